/*
 * zf-leveldb: a small LevelDB workload driver (through the C API) for testing
 * and benchmarking zonefuse.  Debian ships no LevelDB db_bench, so this is it.
 *
 *   zf-leveldb fill      --db DIR --num N     write keys 0..N-1 once each, random order
 *   zf-leveldb overwrite --db DIR --num N     N puts of random existing keys
 *   zf-leveldb read      --db DIR --num N     N random point reads (found/missing)
 *   zf-leveldb verify    --db DIR             iterate everything, check every value
 *   zf-leveldb iot       --db DIR --num N     TPCx-IoT-like sensor ingest
 *
 * Values are a pure function of (key, version, length): a 16-byte header
 * "%08x%08x" (version, length) followed by pseudo-random bytes seeded from
 * those, so any value can be checked on its own.  Every writing run gets a
 * new version number (its "generation").  The expected version of each key
 * is kept in a small state file inside the DB directory
 * (DIR/zf-leveldb.state, ignored by LevelDB), written atomically (write,
 * fsync, rename, fsync dir) before the run (marking the run as pending) and
 * after it.  `verify` therefore checks the exact contents after a reopen: all
 * keys present, each with its latest version; if the last writing run was
 * interrupted (crash), each key may hold either its previous version or the
 * interrupted run's version, and a successful verify then records what it
 * saw.
 *
 * One result line per run, e.g.
 *   fill: 200000 ops in 3.21 s, 62305 ops/s, 24.6 MB/s
 * (MB = 10^6 bytes of key + value).  Exit status: 0 ok, 1 LevelDB error or
 * verification mismatch, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <leveldb/c.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROG "zf-leveldb"
#define KEY_LEN 16        /* "k" + 15 digits */
#define IOT_KEY_LEN 25    /* "s" + 7 digits + "." + 16 digits */
#define VAL_HDR 16        /* "%08x%08x" version, length */
#define MAX_VALUE (16u << 20)
#define STATE_NAME "zf-leveldb.state"
#define IOT_STEP_US 1000  /* one reading per sensor per simulated ms */

enum cmd { CMD_FILL, CMD_OVERWRITE, CMD_READ, CMD_VERIFY, CMD_IOT };
static const char *const cmd_names[] = {"fill", "overwrite", "read", "verify", "iot"};

struct config {
	enum cmd cmd;
	const char *db;
	char *state_path;       /* NULL: --no-state */
	uint64_t num;
	uint64_t keys;          /* key space for overwrite/read; 0 = from state */
	unsigned value_size;    /* 0 = default (100, iot: 1024) */
	uint64_t seed;
	bool sync;
	unsigned threads;
	unsigned sensors;       /* iot: sensors per thread */
	double get_ratio;       /* iot: fraction of gets */
	unsigned batch;
	size_t write_buffer;
	size_t max_file_size;
	size_t cache_size;
	int bloom_bits;
	int compression;        /* -1 = LevelDB default */
	bool fresh;
	bool stats;
	unsigned max_report;
};

/* ---- deterministic generators ---------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

struct rng { uint64_t s; };

static uint64_t rng_next(struct rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	uint64_t z = r->s;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_below(struct rng *r, uint64_t n)
{
	return n ? rng_next(r) % n : 0;
}

static double rng_double(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1p-53;
}

static uint64_t key_hash(uint64_t idx) { return mix64(idx ^ 0x6b65792d6b657921ull); }
static uint64_t iot_hash(uint64_t sensor, uint64_t ts)
{
	return mix64(mix64(sensor ^ 0x73656e736f722121ull) ^ ts);
}

static void gen_value(char *buf, uint32_t len, uint64_t khash, uint32_t version)
{
	char hdr[VAL_HDR + 1];
	snprintf(hdr, sizeof hdr, "%08" PRIx32 "%08" PRIx32, version, len);
	memcpy(buf, hdr, VAL_HDR);
	struct rng r = { mix64(khash ^ mix64(((uint64_t)version << 32) | len)) };
	for (uint32_t i = VAL_HDR; i < len; i += 8) {
		uint64_t w = rng_next(&r);
		uint32_t n = len - i < 8 ? len - i : 8;
		memcpy(buf + i, &w, n);
	}
}

static int hexfield(const char *p, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 8; i++) {
		char c = p[i];
		int d;
		if (c >= '0' && c <= '9') d = c - '0';
		else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
		else return -EINVAL;
		v = v << 4 | (uint32_t)d;
	}
	*out = v;
	return 0;
}

/* Checks that val is exactly gen_value(khash, its version, its length).
 * Returns 0 and the version, or -EINVAL with a description in why. */
static int check_value(const char *val, size_t len, uint64_t khash, uint32_t *version,
		       char *scratch, char *why, size_t whylen)
{
	uint32_t ver, vlen;
	if (len < VAL_HDR || hexfield(val, &ver) < 0 || hexfield(val + 8, &vlen) < 0) {
		snprintf(why, whylen, "bad value header (length %zu)", len);
		return -EINVAL;
	}
	if (vlen != len) {
		snprintf(why, whylen, "value length %zu, header says %" PRIu32, len, vlen);
		return -EINVAL;
	}
	if (vlen > MAX_VALUE) {
		snprintf(why, whylen, "value length %" PRIu32 " too large", vlen);
		return -EINVAL;
	}
	gen_value(scratch, vlen, khash, ver);
	if (memcmp(scratch, val, len) != 0) {
		size_t off = 0;
		while (off < len && scratch[off] == val[off]) off++;
		snprintf(why, whylen, "version %" PRIu32 " content differs at byte %zu of %zu",
			 ver, off, len);
		return -EINVAL;
	}
	*version = ver;
	return 0;
}

static void make_key(char *buf, uint64_t idx)
{
	char tmp[32];
	snprintf(tmp, sizeof tmp, "k%015" PRIu64, idx);
	memcpy(buf, tmp, KEY_LEN);
}

static void make_iot_key(char *buf, uint64_t sensor, uint64_t ts)
{
	char tmp[48];
	snprintf(tmp, sizeof tmp, "s%07" PRIu64 ".%016" PRIu64, sensor, ts);
	memcpy(buf, tmp, IOT_KEY_LEN);
}

static int parse_digits(const char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9') return -EINVAL;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*out = v;
	return 0;
}

/* ---- state file ------------------------------------------------------ */

struct state_hdr {
	char magic[8];
	uint64_t nkeys;
	uint32_t gen;           /* last completed generation */
	uint32_t pending_gen;   /* generation of an unfinished run, or 0 */
	uint64_t iot_keys;      /* iot keys written by completed runs */
	uint64_t iot_pending;   /* upper bound of iot keys of an unfinished run */
	uint64_t iot_max_ts;    /* largest iot timestamp ever written */
	uint64_t checksum;
};

struct state {
	struct state_hdr h;
	uint32_t *ver;          /* nkeys entries: expected version, 0 = absent */
};

static const char state_magic[8] = {'Z', 'F', 'L', 'D', 'B', 'S', 'T', '1'};

static uint64_t state_sum(const struct state *st)
{
	struct state_hdr h = st->h;
	h.checksum = 0;
	uint64_t s = 0x7374617465ull;
	const unsigned char *p = (const unsigned char *)&h;
	for (size_t i = 0; i < sizeof h; i++) s = (s ^ p[i]) * 0x100000001b3ull;
	for (uint64_t i = 0; i < st->h.nkeys; i++) s = mix64(s ^ st->ver[i]);
	return s;
}

static int state_resize(struct state *st, uint64_t nkeys)
{
	if (nkeys <= st->h.nkeys) return 0;
	if (nkeys > UINT32_MAX) return -EOVERFLOW;
	uint32_t *v = realloc(st->ver, nkeys * sizeof *v);
	if (!v) return -ENOMEM;
	memset(v + st->h.nkeys, 0, (nkeys - st->h.nkeys) * sizeof *v);
	st->ver = v;
	st->h.nkeys = nkeys;
	return 0;
}

static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0) {
			if (errno == EINTR) continue;
			return -errno;
		}
		if (n == 0) return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR) continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Loads the state; a missing file gives an empty state. 0 or -errno. */
static int state_load(const char *path, struct state *st)
{
	memset(st, 0, sizeof *st);
	memcpy(st->h.magic, state_magic, sizeof state_magic);
	if (!path) return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return errno == ENOENT ? 0 : -errno;
	struct state_hdr h;
	int rc = read_full(fd, &h, sizeof h);
	if (rc == 0 && (memcmp(h.magic, state_magic, sizeof state_magic) != 0 ||
			h.nkeys > UINT32_MAX))
		rc = -EBADMSG;
	if (rc == 0 && h.nkeys) {
		st->ver = malloc(h.nkeys * sizeof *st->ver);
		if (!st->ver) rc = -ENOMEM;
		else rc = read_full(fd, st->ver, h.nkeys * sizeof *st->ver);
	}
	close(fd);
	if (rc == 0) {
		st->h = h;
		if (state_sum(st) != h.checksum) rc = -EBADMSG;
	}
	if (rc < 0) {
		free(st->ver);
		st->ver = NULL;
	}
	return rc;
}

/* Writes the state atomically: tmp file, fsync, rename, fsync dir. */
static int state_save(const char *path, struct state *st)
{
	if (!path) return 0;
	st->h.checksum = state_sum(st);
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 5);
	char *dir = strdup(path);
	if (!tmp || !dir) {
		free(tmp);
		free(dir);
		return -ENOMEM;
	}
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".tmp", 5);
	int rc = 0;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) rc = -errno;
	if (rc == 0) rc = write_full(fd, &st->h, sizeof st->h);
	if (rc == 0 && st->h.nkeys) rc = write_full(fd, st->ver, st->h.nkeys * sizeof *st->ver);
	if (rc == 0 && fsync(fd) < 0) rc = -errno;
	if (fd >= 0 && close(fd) < 0 && rc == 0) rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0) rc = -errno;
	if (rc == 0) {
		char *slash = strrchr(dir, '/');
		if (slash == dir) slash[1] = '\0';
		else if (slash) *slash = '\0';
		else strcpy(dir, ".");
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) rc = -errno;
		else {
			if (fsync(dfd) < 0) rc = -errno;
			close(dfd);
		}
	} else if (fd >= 0) {
		unlink(tmp);
	}
	free(tmp);
	free(dir);
	return rc;
}

/* ---- the run --------------------------------------------------------- */

struct run {
	const struct config *c;
	leveldb_t *db;
	leveldb_writeoptions_t *wo;
	leveldb_readoptions_t *ro;
	struct state *st;
	uint32_t gen;           /* version written by this run */
	uint64_t keyspace;
	uint32_t *keyseq;       /* fill/overwrite/read: key of op i */
	uint64_t iot_base;      /* iot: first timestamp */
	atomic_bool stop;
	atomic_uint_fast64_t errors;
	atomic_uint_fast64_t mismatches;
	pthread_mutex_t report_lock;
};

struct worker {
	pthread_t tid;
	unsigned id;
	struct run *r;
	uint64_t ops, bytes, found, missing, puts, gets;
	uint64_t iot_max_ts;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void ldb_error(struct run *r, const char *what, char *err)
{
	pthread_mutex_lock(&r->report_lock);
	if (atomic_fetch_add(&r->errors, 1) < r->c->max_report)
		fprintf(stderr, PROG ": leveldb error: %s: %s\n", what, err);
	pthread_mutex_unlock(&r->report_lock);
	leveldb_free(err);
	atomic_store(&r->stop, true);
}

static void mismatch(struct run *r, const char *key, size_t klen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void mismatch(struct run *r, const char *key, size_t klen, const char *fmt, ...)
{
	pthread_mutex_lock(&r->report_lock);
	if (atomic_fetch_add(&r->mismatches, 1) < r->c->max_report) {
		va_list ap;
		va_start(ap, fmt);
		fprintf(stderr, PROG ": MISMATCH key '");
		for (size_t i = 0; i < klen && i < 64; i++)
			fputc(key[i] >= 32 && key[i] < 127 ? key[i] : '?', stderr);
		fprintf(stderr, "': ");
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
	pthread_mutex_unlock(&r->report_lock);
}

/* Is version v acceptable for key idx according to the state? */
static bool version_ok(const struct run *r, uint64_t idx, uint32_t v)
{
	uint32_t want = idx < r->st->h.nkeys ? r->st->ver[idx] : 0;
	return v == want || (r->st->h.pending_gen && v == r->st->h.pending_gen);
}

static bool may_be_missing(const struct run *r, uint64_t idx)
{
	return idx >= r->st->h.nkeys || r->st->ver[idx] == 0;
}

static void *write_worker(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	const struct config *c = r->c;
	char key[KEY_LEN];
	char *val = malloc(c->value_size);
	leveldb_writebatch_t *wb = c->batch > 1 ? leveldb_writebatch_create() : NULL;
	unsigned inbatch = 0;
	char *err = NULL;
	if (!val) {
		fprintf(stderr, PROG ": out of memory\n");
		atomic_fetch_add(&r->errors, 1);
		atomic_store(&r->stop, true);
	}
	for (uint64_t i = w->id; i < c->num && !atomic_load_explicit(&r->stop, memory_order_relaxed);
	     i += c->threads) {
		uint64_t k = r->keyseq[i];
		make_key(key, k);
		gen_value(val, c->value_size, key_hash(k), r->gen);
		if (wb) {
			leveldb_writebatch_put(wb, key, KEY_LEN, val, c->value_size);
			if (++inbatch == c->batch) {
				leveldb_write(r->db, r->wo, wb, &err);
				leveldb_writebatch_clear(wb);
				inbatch = 0;
			}
		} else {
			leveldb_put(r->db, r->wo, key, KEY_LEN, val, c->value_size, &err);
		}
		if (err) {
			ldb_error(r, "put", err);
			err = NULL;
			break;
		}
		w->ops++;
		w->bytes += KEY_LEN + c->value_size;
	}
	if (wb) {
		if (inbatch && !atomic_load(&r->stop)) {
			leveldb_write(r->db, r->wo, wb, &err);
			if (err) ldb_error(r, "write batch", err);
		}
		leveldb_writebatch_destroy(wb);
	}
	free(val);
	return NULL;
}

static void *read_worker(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	const struct config *c = r->c;
	char key[KEY_LEN];
	char *scratch = malloc(MAX_VALUE);
	char why[160];
	char *err = NULL;
	if (!scratch) {
		fprintf(stderr, PROG ": out of memory\n");
		atomic_fetch_add(&r->errors, 1);
		atomic_store(&r->stop, true);
	}
	for (uint64_t i = w->id; i < c->num && !atomic_load_explicit(&r->stop, memory_order_relaxed);
	     i += c->threads) {
		uint64_t k = r->keyseq[i];
		size_t vlen = 0;
		make_key(key, k);
		char *v = leveldb_get(r->db, r->ro, key, KEY_LEN, &vlen, &err);
		if (err) {
			ldb_error(r, "get", err);
			err = NULL;
			break;
		}
		w->ops++;
		if (!v) {
			w->missing++;
			if (c->state_path && !may_be_missing(r, k))
				mismatch(r, key, KEY_LEN, "missing, expected version %" PRIu32,
					 r->st->ver[k]);
			continue;
		}
		w->found++;
		w->bytes += KEY_LEN + vlen;
		uint32_t ver;
		if (check_value(v, vlen, key_hash(k), &ver, scratch, why, sizeof why) < 0)
			mismatch(r, key, KEY_LEN, "%s", why);
		else if (c->state_path && !version_ok(r, k, ver))
			mismatch(r, key, KEY_LEN, "version %" PRIu32 ", expected %" PRIu32, ver,
				 k < r->st->h.nkeys ? r->st->ver[k] : 0);
		leveldb_free(v);
	}
	free(scratch);
	return NULL;
}

static void *iot_worker(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	const struct config *c = r->c;
	unsigned S = c->sensors;
	uint64_t ops = c->num / c->threads + (w->id < c->num % c->threads);
	uint64_t *count = calloc(S, sizeof *count);
	char *val = malloc(c->value_size);
	char *scratch = malloc(MAX_VALUE);
	char key[IOT_KEY_LEN];
	char why[160];
	char *err = NULL;
	struct rng rng = { mix64(c->seed ^ mix64(0x696f74ull + w->id)) };
	leveldb_writebatch_t *wb = c->batch > 1 ? leveldb_writebatch_create() : NULL;
	unsigned inbatch = 0;
	uint64_t written = 0;   /* puts that reached the DB (batches flushed) */
	if (!count || !val || !scratch) {
		fprintf(stderr, PROG ": out of memory\n");
		atomic_fetch_add(&r->errors, 1);
		atomic_store(&r->stop, true);
	}
	for (uint64_t i = 0; i < ops && !atomic_load_explicit(&r->stop, memory_order_relaxed); i++) {
		if (written > 0 && rng_double(&rng) < c->get_ratio) {
			/* a get of a reading this thread already stored */
			/* put number p went to sensor p % S as its reading p / S */
			uint64_t p = rng_below(&rng, written);
			uint64_t sensor = (uint64_t)w->id * S + p % S;
			uint64_t ts = r->iot_base + (p / S) * IOT_STEP_US;
			make_iot_key(key, sensor, ts);
			size_t vlen = 0;
			char *v = leveldb_get(r->db, r->ro, key, IOT_KEY_LEN, &vlen, &err);
			if (err) {
				ldb_error(r, "get", err);
				err = NULL;
				break;
			}
			w->gets++;
			w->ops++;
			if (!v) {
				w->missing++;
				mismatch(r, key, IOT_KEY_LEN, "missing (written by this run)");
				continue;
			}
			w->found++;
			w->bytes += IOT_KEY_LEN + vlen;
			uint32_t ver;
			if (check_value(v, vlen, iot_hash(sensor, ts), &ver, scratch, why,
					sizeof why) < 0)
				mismatch(r, key, IOT_KEY_LEN, "%s", why);
			leveldb_free(v);
			continue;
		}
		uint64_t s = w->puts % S;   /* sensors report round-robin */
		uint64_t sensor = (uint64_t)w->id * S + s;
		uint64_t ts = r->iot_base + count[s] * IOT_STEP_US;
		make_iot_key(key, sensor, ts);
		gen_value(val, c->value_size, iot_hash(sensor, ts), 0);
		if (wb) {
			leveldb_writebatch_put(wb, key, IOT_KEY_LEN, val, c->value_size);
			if (++inbatch == c->batch) {
				leveldb_write(r->db, r->wo, wb, &err);
				leveldb_writebatch_clear(wb);
				inbatch = 0;
			}
		} else {
			leveldb_put(r->db, r->wo, key, IOT_KEY_LEN, val, c->value_size, &err);
		}
		if (err) {
			ldb_error(r, "put", err);
			err = NULL;
			break;
		}
		count[s]++;
		w->puts++;
		w->ops++;
		w->bytes += IOT_KEY_LEN + c->value_size;
		if (ts > w->iot_max_ts) w->iot_max_ts = ts;
		if (!wb || inbatch == 0) written = w->puts;
	}
	if (wb) {
		if (inbatch && !atomic_load(&r->stop)) {
			leveldb_write(r->db, r->wo, wb, &err);
			if (err) ldb_error(r, "write batch", err);
		}
		leveldb_writebatch_destroy(wb);
	}
	free(count);
	free(val);
	free(scratch);
	return NULL;
}

/* Single-threaded full scan; returns the number of keys seen. */
static uint64_t verify_scan(struct run *r, uint64_t *iot_seen, uint64_t *bytes)
{
	const struct config *c = r->c;
	struct state *st = r->st;
	uint64_t nkeys = st->h.nkeys;
	uint32_t *seen = nkeys ? calloc(nkeys, sizeof *seen) : NULL;  /* observed version + 1 */
	char *scratch = malloc(MAX_VALUE);
	char why[160];
	char *err = NULL;
	uint64_t total = 0, iot = 0;
	if ((nkeys && !seen) || !scratch) {
		fprintf(stderr, PROG ": out of memory\n");
		atomic_fetch_add(&r->errors, 1);
		free(seen);
		free(scratch);
		return 0;
	}
	leveldb_iterator_t *it = leveldb_create_iterator(r->db, r->ro);
	for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t klen, vlen;
		const char *k = leveldb_iter_key(it, &klen);
		const char *v = leveldb_iter_value(it, &vlen);
		uint64_t idx, sensor, ts;
		uint32_t ver;
		total++;
		*bytes += klen + vlen;
		if (klen == KEY_LEN && k[0] == 'k' && parse_digits(k + 1, KEY_LEN - 1, &idx) == 0) {
			if (check_value(v, vlen, key_hash(idx), &ver, scratch, why, sizeof why) < 0) {
				mismatch(r, k, klen, "%s", why);
			} else if (!c->state_path) {
				/* self-consistency only */
			} else if (idx >= nkeys || !version_ok(r, idx, ver)) {
				mismatch(r, k, klen, "version %" PRIu32 ", expected %" PRIu32 "%s", ver,
					 idx < nkeys ? st->ver[idx] : 0,
					 idx < nkeys ? "" : " (key never written)");
			}
			if (idx < nkeys) seen[idx] = ver + 1;
		} else if (klen == IOT_KEY_LEN && k[0] == 's' && k[8] == '.' &&
			   parse_digits(k + 1, 7, &sensor) == 0 &&
			   parse_digits(k + 9, 16, &ts) == 0) {
			iot++;
			if (check_value(v, vlen, iot_hash(sensor, ts), &ver, scratch, why,
					sizeof why) < 0)
				mismatch(r, k, klen, "%s", why);
		} else {
			mismatch(r, k, klen, "unexpected key (length %zu)", klen);
		}
	}
	leveldb_iter_get_error(it, &err);
	if (err) ldb_error(r, "iterator", err);
	leveldb_iter_destroy(it);

	if (c->state_path) {
		char key[KEY_LEN];
		for (uint64_t i = 0; i < nkeys; i++) {
			if (st->ver[i] && !seen[i]) {
				make_key(key, i);
				mismatch(r, key, KEY_LEN, "missing, expected version %" PRIu32,
					 st->ver[i]);
			}
		}
		uint64_t lo = st->h.iot_keys, hi = st->h.iot_keys + st->h.iot_pending;
		if (iot < lo || iot > hi) {
			if (atomic_fetch_add(&r->mismatches, 1) < c->max_report) {
				fprintf(stderr, PROG ": MISMATCH: %" PRIu64 " iot keys, expected %" PRIu64,
					iot, lo);
				if (hi != lo) fprintf(stderr, "..%" PRIu64, hi);
				fputc('\n', stderr);
			}
		}
		/* after an interrupted run that checked out, record what is there */
		if (atomic_load(&r->mismatches) == 0 && atomic_load(&r->errors) == 0 &&
		    (st->h.pending_gen || st->h.iot_pending)) {
			uint64_t from_pending = 0;
			for (uint64_t i = 0; i < nkeys; i++) {
				uint32_t v = seen[i] ? seen[i] - 1 : 0;
				if (v != st->ver[i]) from_pending++;
				st->ver[i] = v;
			}
			printf("verify: last writing run was interrupted; %" PRIu64
			       " keys hold its version, %" PRIu64 " of its iot keys are present\n",
			       from_pending, iot - lo);
			if (st->h.pending_gen > st->h.gen) st->h.gen = st->h.pending_gen;
			st->h.pending_gen = 0;
			st->h.iot_keys = iot;
			st->h.iot_pending = 0;
			int rc = state_save(c->state_path, st);
			if (rc < 0) {
				fprintf(stderr, PROG ": cannot write %s: %s\n", c->state_path,
					strerror(-rc));
				atomic_fetch_add(&r->errors, 1);
			}
		}
	}
	free(seen);
	free(scratch);
	*iot_seen = iot;
	return total;
}

static uint64_t wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The run's key sequence, computed before the clock starts: a shuffle of
 * every key for fill, random keys of the key space for overwrite and read.
 * 0, or the exit status. */
static int make_keyseq(const struct config *c, struct run *r, const struct state *st)
{
	struct rng rng = { mix64(c->seed ^ mix64((uint64_t)c->cmd + 1)) };
	if (c->cmd == CMD_FILL) {
		r->keyspace = c->num;
	} else if (c->cmd == CMD_OVERWRITE || c->cmd == CMD_READ) {
		r->keyspace = c->keys ? c->keys : st->h.nkeys ? st->h.nkeys : c->num;
	}
	if (r->keyspace > UINT32_MAX) {
		fprintf(stderr, PROG ": at most %" PRIu32 " keys\n", UINT32_MAX);
		return 2;
	}
	if (c->cmd != CMD_FILL && c->cmd != CMD_OVERWRITE && c->cmd != CMD_READ)
		return 0;
	r->keyseq = malloc((c->num ? c->num : 1) * sizeof *r->keyseq);
	if (!r->keyseq) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	if (c->cmd == CMD_FILL) {
		for (uint64_t i = 0; i < c->num; i++) r->keyseq[i] = (uint32_t)i;
		for (uint64_t i = c->num; i > 1; i--) {
			uint64_t j = rng_below(&rng, i);
			uint32_t t = r->keyseq[i - 1];
			r->keyseq[i - 1] = r->keyseq[j];
			r->keyseq[j] = t;
		}
	} else {
		for (uint64_t i = 0; i < c->num; i++)
			r->keyseq[i] = (uint32_t)rng_below(&rng, r->keyspace);
	}
	return 0;
}

/* Mark the run as pending in the state file (so that an interrupted run
 * shows).  0 or -errno. */
static int mark_pending(const struct config *c, struct run *r, struct state *st)
{
	int rc = 0;

	if (c->cmd == CMD_FILL) rc = state_resize(st, c->num);
	if (c->cmd == CMD_OVERWRITE) rc = state_resize(st, r->keyspace);
	if (rc)
		return rc;
	if (c->cmd == CMD_IOT) {
		st->h.iot_pending = c->num;
		r->iot_base = wall_us();
		if (r->iot_base <= st->h.iot_max_ts) r->iot_base = st->h.iot_max_ts + 1;
		/* the base goes into the state first so no timestamp is reused */
		st->h.iot_max_ts = r->iot_base + (c->num / c->threads + 1) * IOT_STEP_US;
	} else {
		r->gen = st->h.gen + 1;
		st->h.pending_gen = r->gen;
	}
	return state_save(c->state_path, st);
}

/* The workers (or the verify scan), their counts summed in *sum.  Returns
 * the seconds it took, or < 0 when out of memory. */
static double run_workers(const struct config *c, struct run *r, struct worker *sum,
			  uint64_t *iot_seen)
{
	struct worker *w = calloc(c->threads, sizeof *w);
	uint64_t total = 0, bytes = 0;

	if (!w)
		return -1;
	double t0 = now_s();
	if (c->cmd == CMD_VERIFY) {
		total = verify_scan(r, iot_seen, &bytes);
	} else {
		void *(*fn)(void *) = c->cmd == CMD_READ ? read_worker :
				      c->cmd == CMD_IOT ? iot_worker : write_worker;
		unsigned started = 0;
		for (unsigned i = 0; i < c->threads; i++) {
			w[i].id = i;
			w[i].r = r;
			int e = pthread_create(&w[i].tid, NULL, fn, &w[i]);
			if (e) {
				fprintf(stderr, PROG ": pthread_create: %s\n", strerror(e));
				atomic_fetch_add(&r->errors, 1);
				atomic_store(&r->stop, true);
				break;
			}
			started++;
		}
		for (unsigned i = 0; i < started; i++) pthread_join(w[i].tid, NULL);
	}
	double secs = now_s() - t0;
	for (unsigned i = 0; i < c->threads; i++) {
		sum->ops += w[i].ops;
		sum->bytes += w[i].bytes;
		sum->found += w[i].found;
		sum->missing += w[i].missing;
		sum->puts += w[i].puts;
		sum->gets += w[i].gets;
		if (w[i].iot_max_ts > sum->iot_max_ts) sum->iot_max_ts = w[i].iot_max_ts;
	}
	free(w);
	if (c->cmd == CMD_VERIFY) {
		sum->ops = total;
		sum->bytes = bytes;
	}
	return secs <= 0 ? 1e-9 : secs;
}

static void print_result(const struct config *c, const struct worker *sum, double secs,
			 uint64_t iot_seen)
{
	printf("%s: %" PRIu64 " %s in %.2f s, %.0f %s/s, %.1f MB/s",
	       cmd_names[c->cmd], sum->ops, c->cmd == CMD_VERIFY ? "keys" : "ops", secs,
	       (double)sum->ops / secs, c->cmd == CMD_VERIFY ? "keys" : "ops",
	       (double)sum->bytes / secs / 1e6);
	if (c->cmd == CMD_READ)
		printf(", %" PRIu64 " found, %" PRIu64 " missing", sum->found, sum->missing);
	if (c->cmd == CMD_VERIFY)
		printf(", %" PRIu64 " iot keys", iot_seen);
	if (c->cmd == CMD_IOT)
		printf(", %" PRIu64 " puts, %" PRIu64 " gets (%" PRIu64 " found), %u threads x %u sensors",
		       sum->puts, sum->gets, sum->found, c->threads, c->sensors);
	if (c->threads > 1 && c->cmd != CMD_IOT && c->cmd != CMD_VERIFY)
		printf(", %u threads", c->threads);
	if (c->sync) printf(", sync");
	printf("\n");
}

static int run_cmd(const struct config *c)
{
	struct state st;
	int rc = state_load(c->state_path, &st);
	if (rc < 0) {
		fprintf(stderr, PROG ": cannot read state file %s: %s\n", c->state_path, strerror(-rc));
		return 1;
	}
	bool writes = c->cmd == CMD_FILL || c->cmd == CMD_OVERWRITE || c->cmd == CMD_IOT;
	if (writes && (st.h.pending_gen || st.h.iot_pending)) {
		fprintf(stderr, PROG ": the last writing run on %s was interrupted; run "
			"'" PROG " verify' first (it records what survived)\n", c->db);
		free(st.ver);
		return 1;
	}

	struct run r = { .c = c, .st = &st };
	atomic_init(&r.stop, false);
	atomic_init(&r.errors, 0);
	atomic_init(&r.mismatches, 0);
	pthread_mutex_init(&r.report_lock, NULL);

	rc = make_keyseq(c, &r, &st);
	if (rc) {
		pthread_mutex_destroy(&r.report_lock);
		free(st.ver);
		return rc;
	}

	/* open */
	leveldb_options_t *opt = leveldb_options_create();
	leveldb_cache_t *cache = c->cache_size ? leveldb_cache_create_lru(c->cache_size) : NULL;
	leveldb_filterpolicy_t *bloom = c->bloom_bits > 0 ?
		leveldb_filterpolicy_create_bloom(c->bloom_bits) : NULL;
	leveldb_options_set_create_if_missing(opt, writes);
	if (c->cmd == CMD_VERIFY) leveldb_options_set_paranoid_checks(opt, 1);
	if (c->write_buffer) leveldb_options_set_write_buffer_size(opt, c->write_buffer);
	if (c->max_file_size) leveldb_options_set_max_file_size(opt, c->max_file_size);
	if (cache) leveldb_options_set_cache(opt, cache);
	if (bloom) leveldb_options_set_filter_policy(opt, bloom);
	if (c->compression >= 0) leveldb_options_set_compression(opt, c->compression);
	char *err = NULL;
	r.db = leveldb_open(opt, c->db, &err);
	if (err) {
		fprintf(stderr, PROG ": cannot open %s: %s\n", c->db, err);
		leveldb_free(err);
		rc = 1;
		goto out_opts;
	}
	r.wo = leveldb_writeoptions_create();
	leveldb_writeoptions_set_sync(r.wo, c->sync);
	r.ro = leveldb_readoptions_create();
	leveldb_readoptions_set_verify_checksums(r.ro, c->cmd == CMD_VERIFY || c->cmd == CMD_READ);
	if (c->cmd == CMD_VERIFY) leveldb_readoptions_set_fill_cache(r.ro, 0);

	if (writes) {
		rc = mark_pending(c, &r, &st);
		if (rc < 0) {
			fprintf(stderr, PROG ": cannot write state %s: %s\n", c->state_path,
				strerror(-rc));
			rc = 1;
			goto out_db;
		}
	}

	struct worker sum = {0};
	uint64_t iot_seen = 0;
	double secs = run_workers(c, &r, &sum, &iot_seen);
	if (secs < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		rc = 1;
		goto out_db;
	}

	/* commit the run in the state file */
	if (writes && atomic_load(&r.errors) == 0) {
		if (c->cmd == CMD_IOT) {
			st.h.iot_keys += sum.puts;
			st.h.iot_pending = 0;
		} else {
			for (uint64_t i = 0; i < c->num; i++) st.ver[r.keyseq[i]] = r.gen;
			st.h.gen = r.gen;
			st.h.pending_gen = 0;
		}
		rc = state_save(c->state_path, &st);
		if (rc < 0) {
			fprintf(stderr, PROG ": cannot write state %s: %s\n", c->state_path,
				strerror(-rc));
			atomic_fetch_add(&r.errors, 1);
		}
	}

	print_result(c, &sum, secs, iot_seen);

	if (c->stats) {
		char *s = leveldb_property_value(r.db, "leveldb.stats");
		if (s) {
			printf("%s\n", s);
			leveldb_free(s);
		}
	}

	uint64_t mm = atomic_load(&r.mismatches), errs = atomic_load(&r.errors);
	if (mm) fprintf(stderr, "%s: FAILED: %" PRIu64 " mismatches\n", cmd_names[c->cmd], mm);
	if (errs) fprintf(stderr, "%s: FAILED: %" PRIu64 " errors\n", cmd_names[c->cmd], errs);
	rc = (mm || errs) ? 1 : 0;

out_db:
	if (r.ro) leveldb_readoptions_destroy(r.ro);
	if (r.wo) leveldb_writeoptions_destroy(r.wo);
	if (r.db) leveldb_close(r.db);
out_opts:
	leveldb_options_destroy(opt);
	if (cache) leveldb_cache_destroy(cache);
	if (bloom) leveldb_filterpolicy_destroy(bloom);
	pthread_mutex_destroy(&r.report_lock);
	free(r.keyseq);
	free(st.ver);
	fflush(stdout);
	return rc;
}

/* ---- command line ---------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: " PROG " COMMAND --db DIR [options]\n"
"LevelDB workload driver (LevelDB C API) for zonefuse tests and benchmarks.\n"
"\n"
"Commands:\n"
"  fill       write keys 0..N-1 once each, in a random order (new DB if missing)\n"
"  overwrite  N puts of keys drawn at random from the key space\n"
"  read       N random point reads; reports found/missing and checks each value\n"
"  verify     iterate the whole DB and check every key and value against the\n"
"             deterministic generator and the state file: all keys present,\n"
"             each with the version of the latest run that wrote it\n"
"  iot        TPCx-IoT-like ingest: keys are sensor id + timestamp, values\n"
"             random (default 1024 bytes), 99.995%% puts / 0.005%% gets of\n"
"             readings already stored (checked); N ops split over the threads\n"
"\n"
"Options:\n"
"  --db DIR                 database directory (required)\n"
"  --num N                  operations (fill: keys) [100000]\n"
"  --keys K                 key space for overwrite/read [from the state file]\n"
"                           (read with K beyond it exercises missing keys)\n"
"  --value-size B           value bytes, >= %d [100; iot 1024]\n"
"  --seed S                 seed for key order and choices [301]\n"
"  --threads N              worker threads [1] (iot: e.g. 1, 2, 4, 8)\n"
"  --sensors-per-thread S   iot: sensors per thread [100]\n"
"  --get-ratio F            iot: fraction of ops that are gets [0.00005]\n"
"  --sync                   synchronous writes (fsync each write or batch)\n"
"  --batch N                puts per WriteBatch [1]\n"
"  --write-buffer-size B    LevelDB write_buffer_size [LevelDB default, 4 MiB]\n"
"  --max-file-size B        LevelDB max_file_size [LevelDB default, 2 MiB]\n"
"  --cache-size B           block cache bytes, 0 = LevelDB's default [8 MiB]\n"
"  --bloom-bits N           bloom filter bits per key, 0 = none [0]\n"
"  --compression none|snappy  [LevelDB default: snappy]\n"
"  --fresh                  (fill, iot) destroy the DB and the state file first\n"
"  --state FILE             expected-contents file [DIR/" STATE_NAME "]\n"
"  --no-state               keep no state; verify/read then only check that\n"
"                           each value matches its own key and header\n"
"  --max-report N           print at most N mismatches [10]\n"
"  --stats                  print LevelDB's stats property at the end\n"
"  -h, --help               this help\n"
"\n"
"Sizes accept K, M, G suffixes (powers of 1024).  Prints one line per run:\n"
"  fill: 200000 ops in 3.21 s, 62305 ops/s, 24.6 MB/s   (MB = 10^6 B of key+value)\n"
"Exit status: 0 ok, 1 LevelDB error or verification mismatch, 2 usage error.\n",
		VAL_HDR);
}

static int parse_u64(const char *s, uint64_t *out, bool sizes)
{
	char *end;
	errno = 0;
	if (!*s || *s == '-') return -EINVAL;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno) return -errno;
	if (sizes && *end) {
		unsigned shift = 0;
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return -EINVAL;
		}
		end++;
		if (*end == 'i' || *end == 'I') end++;
		if (*end == 'b' || *end == 'B') end++;
		if (v > (ULLONG_MAX >> shift)) return -ERANGE;
		v <<= shift;
	}
	if (*end) return -EINVAL;
	*out = v;
	return 0;
}

enum {
	OPT_DB = 256, OPT_NUM, OPT_KEYS, OPT_VALUE_SIZE, OPT_SEED, OPT_SYNC, OPT_THREADS,
	OPT_SENSORS, OPT_GET_RATIO, OPT_BATCH, OPT_WBUF, OPT_MAXFILE, OPT_CACHE, OPT_BLOOM,
	OPT_COMPRESSION, OPT_FRESH, OPT_STATE, OPT_NO_STATE, OPT_MAX_REPORT, OPT_STATS,
};

static const struct option long_opts[] = {
	{"db", required_argument, NULL, OPT_DB},
	{"num", required_argument, NULL, OPT_NUM},
	{"keys", required_argument, NULL, OPT_KEYS},
	{"value-size", required_argument, NULL, OPT_VALUE_SIZE},
	{"seed", required_argument, NULL, OPT_SEED},
	{"sync", no_argument, NULL, OPT_SYNC},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"sensors-per-thread", required_argument, NULL, OPT_SENSORS},
	{"get-ratio", required_argument, NULL, OPT_GET_RATIO},
	{"batch", required_argument, NULL, OPT_BATCH},
	{"write-buffer-size", required_argument, NULL, OPT_WBUF},
	{"max-file-size", required_argument, NULL, OPT_MAXFILE},
	{"cache-size", required_argument, NULL, OPT_CACHE},
	{"bloom-bits", required_argument, NULL, OPT_BLOOM},
	{"compression", required_argument, NULL, OPT_COMPRESSION},
	{"fresh", no_argument, NULL, OPT_FRESH},
	{"state", required_argument, NULL, OPT_STATE},
	{"no-state", no_argument, NULL, OPT_NO_STATE},
	{"max-report", required_argument, NULL, OPT_MAX_REPORT},
	{"stats", no_argument, NULL, OPT_STATS},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static int bad_arg(const char *opt, const char *arg)
{
	fprintf(stderr, PROG ": invalid value for --%s: '%s'\n", opt, arg);
	return -EINVAL;
}

static int parse_args(int argc, char **argv, struct config *c)
{
	*c = (struct config){
		.num = 100000, .seed = 301, .threads = 1, .sensors = 100, .get_ratio = 0.00005,
		.batch = 1, .cache_size = 8u << 20, .compression = -1, .max_report = 10,
	};
	const char *state = NULL;
	bool no_state = false;
	if (argc < 2) {
		usage(stderr);
		return -EINVAL;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 1;
	}
	size_t ncmd = sizeof cmd_names / sizeof cmd_names[0];
	size_t ci;
	for (ci = 0; ci < ncmd; ci++)
		if (!strcmp(argv[1], cmd_names[ci])) break;
	if (ci == ncmd) {
		fprintf(stderr, PROG ": unknown command '%s' (try --help)\n", argv[1]);
		return -EINVAL;
	}
	c->cmd = (enum cmd)ci;
	optind = 2;
	int o, li;
	while ((o = getopt_long(argc, argv, "h", long_opts, &li)) != -1) {
		uint64_t v = 0;
		const char *name = o >= OPT_DB ? long_opts[li].name : "";
		bool num_opt = o == OPT_NUM || o == OPT_KEYS || o == OPT_VALUE_SIZE ||
			       o == OPT_SEED || o == OPT_THREADS || o == OPT_SENSORS ||
			       o == OPT_BATCH || o == OPT_WBUF || o == OPT_MAXFILE ||
			       o == OPT_CACHE || o == OPT_BLOOM || o == OPT_MAX_REPORT;
		if (num_opt && parse_u64(optarg, &v, o != OPT_SEED) < 0)
			return bad_arg(name, optarg);
		switch (o) {
		case OPT_DB: c->db = optarg; break;
		case OPT_NUM: c->num = v; break;
		case OPT_KEYS: c->keys = v; break;
		case OPT_VALUE_SIZE:
			if (v < VAL_HDR || v > MAX_VALUE) return bad_arg(name, optarg);
			c->value_size = (unsigned)v;
			break;
		case OPT_SEED: c->seed = v; break;
		case OPT_SYNC: c->sync = true; break;
		case OPT_THREADS:
			if (v < 1 || v > 1024) return bad_arg(name, optarg);
			c->threads = (unsigned)v;
			break;
		case OPT_SENSORS:
			if (v < 1 || v > 100000) return bad_arg(name, optarg);
			c->sensors = (unsigned)v;
			break;
		case OPT_GET_RATIO: {
			char *end;
			double d = strtod(optarg, &end);
			if (*end || !(d >= 0 && d <= 1)) return bad_arg(name, optarg);
			c->get_ratio = d;
			break;
		}
		case OPT_BATCH:
			if (v < 1 || v > 1000000) return bad_arg(name, optarg);
			c->batch = (unsigned)v;
			break;
		case OPT_WBUF: c->write_buffer = v; break;
		case OPT_MAXFILE: c->max_file_size = v; break;
		case OPT_CACHE: c->cache_size = v; break;
		case OPT_BLOOM:
			if (v > 64) return bad_arg(name, optarg);
			c->bloom_bits = (int)v;
			break;
		case OPT_COMPRESSION:
			if (!strcmp(optarg, "none")) c->compression = leveldb_no_compression;
			else if (!strcmp(optarg, "snappy")) c->compression = leveldb_snappy_compression;
			else return bad_arg(name, optarg);
			break;
		case OPT_FRESH: c->fresh = true; break;
		case OPT_STATE: state = optarg; break;
		case OPT_NO_STATE: no_state = true; break;
		case OPT_MAX_REPORT: c->max_report = (unsigned)(v > 1000000 ? 1000000 : v); break;
		case OPT_STATS: c->stats = true; break;
		case 'h': usage(stdout); return 1;
		default: return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!c->db) {
		fprintf(stderr, PROG ": --db DIR is required\n");
		return -EINVAL;
	}
	if (!c->value_size) c->value_size = c->cmd == CMD_IOT ? 1024 : 100;
	if (c->cmd == CMD_FILL && c->keys && c->keys != c->num) {
		fprintf(stderr, PROG ": fill writes --num keys; --keys does not apply\n");
		return -EINVAL;
	}
	if (c->fresh && c->cmd != CMD_FILL && c->cmd != CMD_IOT) {
		fprintf(stderr, PROG ": --fresh applies to fill and iot only\n");
		return -EINVAL;
	}
	if (state && no_state) {
		fprintf(stderr, PROG ": --state and --no-state exclude each other\n");
		return -EINVAL;
	}
	if (!no_state) {
		if (state) {
			c->state_path = strdup(state);
		} else {
			size_t n = strlen(c->db) + sizeof "/" STATE_NAME;
			c->state_path = malloc(n);
			if (c->state_path) snprintf(c->state_path, n, "%s/%s", c->db, STATE_NAME);
		}
		if (!c->state_path) return -ENOMEM;
	}
	return 0;
}

/* mkdir -p: 0 or -errno. */
static int mkdir_p(const char *path)
{
	char *p = strdup(path);
	if (!p) return -ENOMEM;
	int rc = 0;
	for (char *s = p + 1; ; s++) {
		if (*s != '/' && *s != '\0') continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			rc = -errno;
			break;
		}
		*s = c;
		if (c == '\0') break;
	}
	free(p);
	return rc;
}

int main(int argc, char **argv)
{
	struct config c;
	int rc = parse_args(argc, argv, &c);
	if (rc > 0) return 0;
	if (rc < 0) return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (c.fresh) {
		if (c.state_path && unlink(c.state_path) < 0 && errno != ENOENT) {
			fprintf(stderr, PROG ": cannot remove %s: %s\n", c.state_path, strerror(errno));
			free(c.state_path);
			return 1;
		}
		leveldb_options_t *opt = leveldb_options_create();
		char *err = NULL;
		leveldb_destroy_db(opt, c.db, &err);
		leveldb_options_destroy(opt);
		if (err) {
			fprintf(stderr, PROG ": cannot destroy %s: %s\n", c.db, err);
			leveldb_free(err);
			free(c.state_path);
			return 1;
		}
	}
	/* LevelDB creates only the last path component; the state file needs the
	 * directory before the DB is opened. */
	if (c.cmd != CMD_READ && c.cmd != CMD_VERIFY && (rc = mkdir_p(c.db)) < 0) {
		fprintf(stderr, PROG ": cannot create %s: %s\n", c.db, strerror(-rc));
		free(c.state_path);
		return 1;
	}
	rc = run_cmd(&c);
	free(c.state_path);
	return rc;
}
