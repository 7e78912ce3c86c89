/* lifetime — see lifetime.h for the model, the decision table and the
 * inference rules. */
#include "lifetime.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "common/zf_common.h"

#define ZSCORE_MAX(a, b) ((a) > (b) ? (a) : (b))
#define LI_UNKNOWN (-1e300)	/* no lifetime known */

/* log2 of a count, 0 below 1. */
static double li_log2(double x)
{
	return x < 1 ? 0 : log2(x);
}

static const char *const class_names[LIFETIME_NR] = {
	"none", "short", "medium", "long", "extreme"
};

const char *lifetime_class_name(enum lifetime_class c)
{
	return (unsigned)c < LIFETIME_NR ? class_names[c] : "invalid";
}

const char *lifetime_source_name(enum lifetime_source s)
{
	static const char *const names[LIFETIME_SRC_NR] = {
		"default", "inferred", "preset", "rule", "dir-xattr", "xattr",
		"forced"
	};
	return (unsigned)s < LIFETIME_SRC_NR ? names[s] : "invalid";
}

const char *lifetime_why_name(enum lifetime_why w)
{
	static const char *const names[LIFETIME_WHY_NR] = {
		"reads", "job", "flush", "picker"
	};
	return (unsigned)w < LIFETIME_WHY_NR ? names[w] : "invalid";
}

int lifetime_class_parse(const char *s, enum lifetime_class *out)
{
	for (int i = 0; i < LIFETIME_NR; i++) {
		if (strcmp(s, class_names[i]) == 0 ||
		    (s[0] == '0' + i && s[1] == '\0')) {
			*out = (enum lifetime_class)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* The preset table (see lifetime.h); first match wins. */
static const struct {
	const char *glob;
	enum lifetime_class cls;
} presets[] = {
	{ "*.log", LIFETIME_SHORT },		/* RocksDB/LevelDB WAL */
	{ "LOG", LIFETIME_NONE },		/* info log: appended slowly */
	{ "LOG.old*", LIFETIME_NONE },
	{ "MANIFEST-*", LIFETIME_NONE },
	{ "CURRENT", LIFETIME_NONE },
	{ "LOCK", LIFETIME_NONE },
	{ "OPTIONS-*", LIFETIME_NONE },
	{ "IDENTITY", LIFETIME_NONE },
	{ "*.dbtmp", LIFETIME_NONE },		/* becomes CURRENT/OPTIONS */
	{ "*.sst", LIFETIME_MEDIUM },
	{ "*.ldb", LIFETIME_MEDIUM },
	{ "*.blob", LIFETIME_LONG },
	{ "*.tmp", LIFETIME_MEDIUM },
};

enum lifetime_source lifetime_preset(const char *name, enum lifetime_class *cls)
{
	for (size_t i = 0; name && i < sizeof(presets) / sizeof(presets[0]); i++) {
		if (fnmatch(presets[i].glob, name, 0) == 0) {
			*cls = presets[i].cls;
			return LIFETIME_SRC_PRESET;
		}
	}
	*cls = LIFETIME_MEDIUM;
	return LIFETIME_SRC_DEFAULT;
}

int lifetime_is_table(const char *name)
{
	return fnmatch("*.sst", name, 0) == 0 || fnmatch("*.ldb", name, 0) == 0;
}

int lifetime_is_wal(const char *name)
{
	return fnmatch("*.log", name, 0) == 0;
}

/* ---- the decision -------------------------------------------------------- */

static bool class_ok(int c)
{
	return c >= 0 && c < LIFETIME_NR;
}

static const uint8_t default_level_class[LIFETIME_MAX_LEVELS] = {
	LIFETIME_MEDIUM, LIFETIME_MEDIUM, LIFETIME_LONG, LIFETIME_EXTREME,
	LIFETIME_EXTREME, LIFETIME_EXTREME, LIFETIME_EXTREME, LIFETIME_EXTREME,
};

enum lifetime_source lifetime_decide(const struct lifetime_facts *f,
				     enum lifetime_class *cls)
{
	if (f->forced) {
		*cls = LIFETIME_MEDIUM;
		return LIFETIME_SRC_FORCED;
	}
	if (class_ok(f->file_xattr)) {
		*cls = (enum lifetime_class)f->file_xattr;
		return LIFETIME_SRC_XATTR;
	}
	if (class_ok(f->dir_xattr)) {
		*cls = (enum lifetime_class)f->dir_xattr;
		return LIFETIME_SRC_DIR_XATTR;
	}
	if (class_ok(f->rule)) {
		*cls = (enum lifetime_class)f->rule;
		return LIFETIME_SRC_RULE;
	}
	if (f->level >= 0 && f->name && lifetime_is_table(f->name)) {
		const uint8_t *map = f->level_class ? f->level_class : default_level_class;
		int l = f->level < LIFETIME_MAX_LEVELS ? f->level : LIFETIME_MAX_LEVELS - 1;
		*cls = class_ok(map[l]) ? (enum lifetime_class)map[l] : LIFETIME_MEDIUM;
		return LIFETIME_SRC_INFERRED;
	}
	return lifetime_preset(f->name, cls);
}

void lifetime_level_classes(const struct lifetime_level_obs *wal,
			    const struct lifetime_level_obs lv[LIFETIME_MAX_LEVELS],
			    uint8_t out[LIFETIME_MAX_LEVELS])
{
	const double step = li_log2(LIFETIME_STEP_RATIO);
	/* L0 opens MEDIUM; anchor = the lifetime that opened the current
	 * class (LI_UNKNOWN: not observed) */
	int cls = LIFETIME_MEDIUM;
	double anchor;

	(void)wal;	/* tables never join the WAL's class (see lifetime.h) */
	anchor = lv && lv[0].n >= LIFETIME_MIN_OBS ? lv[0].log2_life : LI_UNKNOWN;
	out[0] = (uint8_t)cls;
	for (int l = 1; l < LIFETIME_MAX_LEVELS; l++) {
		bool seen = lv && lv[l].n >= LIFETIME_MIN_OBS;

		if (seen && anchor != LI_UNKNOWN) {
			if (lv[l].log2_life >= anchor + step) {
				cls++;
				anchor = lv[l].log2_life;
			}
		} else {
			if (l >= 2)
				cls++;	/* no evidence: the default map's step */
			if (cls > out[l - 1] || anchor == LI_UNKNOWN)
				anchor = seen ? lv[l].log2_life : LI_UNKNOWN;
		}
		if (cls > LIFETIME_EXTREME)
			cls = LIFETIME_EXTREME;
		out[l] = (uint8_t)cls;
	}
}

/* ---- rules file ------------------------------------------------------------ */

struct lifetime_rule {
	char *glob;
	uint8_t cls;
	bool path;
};

struct lifetime_rules {
	struct lifetime_rule *v;
	size_t n;
	bool need_path;
};

void lifetime_rules_free(struct lifetime_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].glob);
	free(r->v);
	free(r);
}

int lifetime_rules_parse(const char *text, struct lifetime_rules **out,
			 unsigned int *bad_line)
{
	struct lifetime_rules *r = calloc(1, sizeof(*r));
	size_t cap = 0;
	unsigned int lineno = 0;

	*out = NULL;
	if (bad_line)
		*bad_line = 0;
	if (!r)
		return -ENOMEM;
	while (text && *text) {
		const char *eol = strchr(text, '\n');
		size_t len = eol ? (size_t)(eol - text) : strlen(text);
		char line[1024], *p, *glob, *cls, *extra;
		enum lifetime_class c;

		lineno++;
		if (len >= sizeof(line))
			goto bad;
		memcpy(line, text, len);
		line[len] = 0;
		text = eol ? eol + 1 : text + len;
		if ((p = strchr(line, '#')))
			*p = 0;
		glob = strtok_r(line, " \t\r", &p);
		if (!glob)
			continue;
		cls = strtok_r(NULL, " \t\r", &p);
		extra = strtok_r(NULL, " \t\r", &p);
		if (!cls || extra || lifetime_class_parse(cls, &c))
			goto bad;
		if (glob[0] == '/')
			glob++;		/* paths are relative to the mount root */
		if (!*glob)
			goto bad;
		if (r->n == cap) {
			size_t ncap = cap ? 2 * cap : 8;
			struct lifetime_rule *nv = realloc(r->v, ncap * sizeof(*nv));

			if (!nv) {
				lifetime_rules_free(r);
				return -ENOMEM;
			}
			r->v = nv;
			cap = ncap;
		}
		r->v[r->n].glob = strdup(glob);
		if (!r->v[r->n].glob) {
			lifetime_rules_free(r);
			return -ENOMEM;
		}
		r->v[r->n].cls = (uint8_t)c;
		r->v[r->n].path = strchr(glob, '/') != NULL;
		r->need_path |= r->v[r->n].path;
		r->n++;
	}
	*out = r;
	return 0;
bad:
	if (bad_line)
		*bad_line = lineno;
	lifetime_rules_free(r);
	return -EINVAL;
}

size_t lifetime_rules_count(const struct lifetime_rules *r)
{
	return r ? r->n : 0;
}

bool lifetime_rules_need_path(const struct lifetime_rules *r)
{
	return r && r->need_path;
}

int lifetime_rules_match(const struct lifetime_rules *r, const char *name,
			 const char *relpath)
{
	for (size_t i = 0; r && i < r->n; i++) {
		const struct lifetime_rule *x = &r->v[i];

		if (x->path) {
			if (relpath && fnmatch(x->glob, relpath, FNM_PATHNAME) == 0)
				return x->cls;
		} else if (name && fnmatch(x->glob, name, 0) == 0) {
			return x->cls;
		}
	}
	return -1;
}

/* ---- MANIFEST parsing ------------------------------------------------------ */

#define MF_BLOCK 32768u
#define MF_HEADER 7u
enum { MF_FULL = 1, MF_FIRST = 2, MF_MIDDLE = 3, MF_LAST = 4 };

struct mf_rd {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t mf_varint(struct mf_rd *r)
{
	uint64_t v = 0;

	for (int shift = 0; shift <= 63; shift += 7) {
		if (r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		uint8_t b = *r->p++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

static void mf_skip(struct mf_rd *r, uint64_t n)
{
	if (r->bad || n > (uint64_t)(r->end - r->p)) {
		r->bad = true;
		return;
	}
	r->p += n;
}

static void mf_skip_lp(struct mf_rd *r)
{
	uint64_t n = mf_varint(r);

	mf_skip(r, n);
}

#define MF_SAFE_IGNORE (1u << 13)	/* RocksDB: tag followed by an lp blob */
#define MF_FILE_MASK 0x3FFFFFFFFFFFFFFFull	/* RocksDB packs a path id above */

/* One VersionEdit (RocksDB or LevelDB encoding). */
static void mf_edit(const uint8_t *p, size_t len, lifetime_manifest_fn fn, void *arg)
{
	struct mf_rd r = { p, p + len, false };

	while (!r.bad && r.p < r.end) {
		uint32_t tag = (uint32_t)mf_varint(&r);
		uint64_t level, num;

		switch (tag) {
		case 1:		/* comparator */
			mf_skip_lp(&r);
			break;
		case 2: case 3: case 4: case 9: case 10:	/* log/next/seq numbers */
			mf_varint(&r);
			break;
		case 5:		/* compact pointer / cursor: level, key */
			mf_varint(&r);
			mf_skip_lp(&r);
			break;
		case 6:		/* deleted file */
			level = mf_varint(&r);
			num = mf_varint(&r);
			if (!r.bad)
				fn(arg, LIFETIME_MF_DELETED, (int)level, num);
			break;
		case 7:		/* LevelDB new file */
		case 100:	/* RocksDB kNewFile2 */
		case 102:	/* kNewFile3 */
		case 103:	/* kNewFile4 */
			level = mf_varint(&r);
			num = mf_varint(&r) & MF_FILE_MASK;
			if (tag == 102)
				mf_varint(&r);	/* path id */
			mf_varint(&r);		/* size */
			mf_skip_lp(&r);		/* smallest key */
			mf_skip_lp(&r);		/* largest key */
			if (tag != 7) {
				mf_varint(&r);	/* smallest seqno */
				mf_varint(&r);	/* largest seqno */
			}
			if (tag == 103) {
				for (;;) {	/* custom fields until kTerminate */
					uint32_t ct = (uint32_t)mf_varint(&r);

					if (r.bad || ct == 1)
						break;
					mf_skip_lp(&r);
				}
			}
			if (!r.bad)
				fn(arg, LIFETIME_MF_NEW, (int)level, num);
			break;
		case 200: case 203: case 300:	/* column family, max cf, atomic group */
			mf_varint(&r);
			break;
		case 201:	/* column family add */
			mf_skip_lp(&r);
			break;
		case 202:	/* column family drop */
			break;
		default:
			if (tag & MF_SAFE_IGNORE)
				mf_skip_lp(&r);
			else
				return;	/* unknown: the rest of this edit is lost */
		}
	}
}

uint64_t lifetime_manifest_parse(const uint8_t *buf, size_t len, uint64_t base,
				 lifetime_manifest_fn fn, void *arg)
{
	uint64_t pos = base, done = base;
	uint8_t *rec = NULL;	/* a logical record being put together */
	size_t rlen = 0, rcap = 0;
	bool in_rec = false;

	while (pos < base + len) {
		uint64_t left_in_block = MF_BLOCK - pos % MF_BLOCK;
		const uint8_t *h = buf + (pos - base);
		uint32_t crc, n;
		uint8_t type;

		if (left_in_block < MF_HEADER) {	/* trailer padding */
			pos += left_in_block;
			if (!in_rec)
				done = pos;
			continue;
		}
		if (base + len - pos < MF_HEADER)
			break;
		crc = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 |
		      (uint32_t)h[3] << 24;
		n = (uint32_t)h[4] | (uint32_t)h[5] << 8;
		type = h[6];
		if (type == 0 || type > MF_LAST || n > left_in_block - MF_HEADER)
			break;		/* zeros (not written yet) or garbage */
		if (base + len - pos < MF_HEADER + n)
			break;		/* the record is not all here yet */
		/* stored CRC is masked: rot15 + constant, over type + payload */
		uint32_t want = zf_crc32c(0, h + 6, 1 + (size_t)n);

		want = ((want >> 15) | (want << 17)) + 0xa282ead8u;
		if (want != crc)
			break;
		pos += MF_HEADER + n;
		if (type == MF_FULL || type == MF_FIRST) {
			rlen = 0;
			in_rec = type == MF_FIRST;
		} else if (!in_rec) {
			done = pos;	/* a MIDDLE/LAST without its FIRST: skip */
			continue;
		}
		if (rlen + n > rcap) {
			size_t ncap = (rlen + n) * 2;
			uint8_t *nr = realloc(rec, ncap);

			if (!nr)
				break;
			rec = nr;
			rcap = ncap;
		}
		memcpy(rec + rlen, h + MF_HEADER, n);
		rlen += n;
		if (type == MF_FULL || type == MF_LAST) {
			mf_edit(rec, rlen, fn, arg);
			in_rec = false;
			done = pos;
		}
	}
	free(rec);
	return done;
}

uint64_t lifetime_table_number(const char *name)
{
	uint64_t v = 0;
	const char *p = name;

	if (!name || !lifetime_is_table(name))
		return 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	return *p == '.' ? v : 0;
}

/* ---- inference state ------------------------------------------------------- */

#define LI_THREADS 64
#define LI_READS 16
#define LI_OBS 128
#define LI_BATCH_NS (5ull * 1000000000ull)	/* inputs of one job die within this */

struct li_file {
	uint64_t file;		/* 0 = empty slot */
	uint64_t job;		/* compaction job that wrote it (0 = flush/unknown) */
	uint64_t born;		/* clock at create */
	int8_t level;		/* -1 unknown */
	uint8_t kind;
	bool dead;		/* tombstone */
	bool exact;		/* level from a MANIFEST */
};

struct li_read {
	uint64_t file, bytes, t;
};

struct li_thread {
	uint32_t tid;
	bool used;
	uint64_t last_ns;
	uint64_t job;		/* open compaction job, 0 = none */
	int job_level;
	uint64_t job_last_ns;	/* last output of the job */
	bool resolving;		/* inputs of the job are dying */
	int resolve_min;
	uint64_t resolve_ns;
	int obs_idx;		/* observation of the job (learning), -1 */
	uint32_t f_n0;		/* picker features at the job's start */
	double f_b[LIFETIME_MAX_LEVELS];
	uint64_t last_output;
	uint64_t n_flush, jobs_comp;
	struct li_read reads[LI_READS];
};

struct li_obs {
	uint32_t n0;
	double b[LIFETIME_MAX_LEVELS];
	int8_t in_level;
};

struct lifetime_infer {
	pthread_mutex_t mu;
	struct li_file *f;
	size_t fcap, fused;	/* slots in use (live + tombstones) */
	size_t flive;
	struct li_thread th[LI_THREADS];
	int live_wal;		/* WALs alive */
	int unconf;		/* flush outputs not yet confirmed by a WAL death */
	uint64_t next_job;
	struct li_obs obs[LI_OBS];
	unsigned int nobs, obs_next;
	double target[LIFETIME_MAX_LEVELS];
	bool targets_dirty;
	struct lifetime_infer_stats st;
};

static size_t fhash(uint64_t file, size_t cap)
{
	return (size_t)((file * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static struct li_file *file_find(struct lifetime_infer *li, uint64_t file)
{
	if (!li->fcap || !file)
		return NULL;
	for (size_t i = fhash(file, li->fcap), k = 0; k < li->fcap;
	     i = (i + 1) & (li->fcap - 1), k++) {
		struct li_file *x = &li->f[i];

		if (!x->file && !x->dead)
			return NULL;
		if (x->file == file && !x->dead)
			return x;
	}
	return NULL;
}

static int file_rehash(struct lifetime_infer *li, size_t ncap)
{
	struct li_file *nf = calloc(ncap, sizeof(*nf));

	if (!nf)
		return -ENOMEM;
	for (size_t i = 0; i < li->fcap; i++) {
		struct li_file *x = &li->f[i];

		if (!x->file || x->dead)
			continue;
		size_t j = fhash(x->file, ncap);
		while (nf[j].file)
			j = (j + 1) & (ncap - 1);
		nf[j] = *x;
	}
	free(li->f);
	li->f = nf;
	li->fcap = ncap;
	li->fused = li->flive;
	return 0;
}

/* The record of file, created if needed (NULL on ENOMEM). */
static struct li_file *file_get(struct lifetime_infer *li, uint64_t file)
{
	struct li_file *x = file_find(li, file);

	if (x)
		return x;
	if ((li->fused + 1) * 4 > li->fcap * 3 &&
	    file_rehash(li, li->fcap ? (li->flive * 4 > li->fcap ? 2 * li->fcap : li->fcap) : 64))
		return NULL;
	size_t i = fhash(file, li->fcap);
	while (li->f[i].file && !li->f[i].dead)
		i = (i + 1) & (li->fcap - 1);
	x = &li->f[i];
	if (!x->dead)
		li->fused++;
	memset(x, 0, sizeof(*x));
	x->file = file;
	x->level = -1;
	li->flive++;
	return x;
}

static void file_del(struct lifetime_infer *li, struct li_file *x)
{
	x->dead = true;
	x->file = 0;
	li->flive--;
}

struct lifetime_infer *lifetime_infer_new(void)
{
	struct lifetime_infer *li = calloc(1, sizeof(*li));

	if (!li)
		return NULL;
	pthread_mutex_init(&li->mu, NULL);
	li->next_job = 1;
	li->targets_dirty = true;
	for (int i = 0; i < LI_THREADS; i++)
		li->th[i].obs_idx = -1;
	return li;
}

void lifetime_infer_free(struct lifetime_infer *li)
{
	if (!li)
		return;
	pthread_mutex_destroy(&li->mu);
	free(li->f);
	free(li);
}

/* The thread's slot; the least recently active one is recycled. */
static struct li_thread *thread_get(struct lifetime_infer *li, uint32_t tid,
				    uint64_t now)
{
	struct li_thread *old = NULL;

	for (int i = 0; i < LI_THREADS; i++) {
		struct li_thread *t = &li->th[i];

		if (t->used && t->tid == tid) {
			t->last_ns = now;
			return t;
		}
		if (!old || !t->used || (old->used && t->last_ns < old->last_ns))
			if (!old || old->used)
				old = t;
	}
	memset(old, 0, sizeof(*old));
	old->used = true;
	old->tid = tid;
	old->last_ns = now;
	old->obs_idx = -1;
	return old;
}

static void obs_note(struct lifetime_level_obs *o, uint64_t life)
{
	double x = li_log2((double)(life ? life : 1));

	o->n++;
	if (o->n <= 16)
		o->log2_life += (x - o->log2_life) / (double)o->n;
	else
		o->log2_life += (x - o->log2_life) / 16.0;
}

/* Learn target(k) (bytes) for k >= 1 from the jobs seen: the threshold on
 * y = bytes(Lk) / max(L0 score, 1, lower levels' scores) that best
 * separates jobs from level k from the others. */
static void learn_targets(struct lifetime_infer *li)
{
	double pos[LI_OBS], neg[LI_OBS];

	for (int k = 1; k < LIFETIME_MAX_LEVELS; k++) {
		unsigned np = 0, nn = 0;
		double t = 0;

		for (unsigned i = 0; i < li->nobs; i++) {
			const struct li_obs *o = &li->obs[i];
			double m = ZSCORE_MAX(o->n0 / (double)LIFETIME_L0_TRIGGER, 1.0);

			if (o->b[k] <= 0)
				continue;
			for (int j = 1; j < k; j++)
				if (li->target[j] > 0)
					m = ZSCORE_MAX(m, o->b[j] / li->target[j]);
			if (o->in_level == k)
				pos[np++] = o->b[k] / m;
			else
				neg[nn++] = o->b[k] / m;
		}
		if (np >= (k == 1 ? 1u : 2u)) {
			double best_c = pos[0];
			unsigned best_err = UINT32_MAX;

			for (unsigned a = 0; a < np + nn; a++) {
				double c = a < np ? pos[a] : neg[a - np];
				unsigned err = 0;

				for (unsigned i = 0; i < np; i++)
					err += pos[i] < c;
				for (unsigned i = 0; i < nn; i++)
					err += neg[i] >= c;
				if (err < best_err || (err == best_err && c < best_c)) {
					best_err = err;
					best_c = c;
				}
			}
			double lo = 0;
			for (unsigned i = 0; i < nn; i++)
				if (neg[i] < best_c && neg[i] > lo)
					lo = neg[i];
			if (lo <= 0)
				lo = best_c * 0.9;
			t = (best_c + lo) / 2;
		} else if (np) {
			/* one job from this level (k >= 2): the default
			 * multiplier, but above every size at which the level
			 * was NOT chosen */
			if (li->target[k - 1] > 0)
				t = li->target[k - 1] * LIFETIME_LEVEL_MULT;
			for (unsigned i = 0; i < nn; i++)
				if (neg[i] * 1.25 > t)
					t = neg[i] * 1.25;
		}
		/* else: no job from this level seen yet: not predicted (a new
		 * level is usually filled by moving tables down without
		 * rewriting them; its first real compaction teaches us) */
		li->target[k] = t;
	}
	li->targets_dirty = false;
}

/* Level of a new compaction job from the picker simulation; fills the
 * job's features. */
static int picker_level(struct lifetime_infer *li, struct li_thread *t,
			uint64_t (*size_of)(void *, uint64_t), void *arg)
{
	double best = 0;
	int lvl = 0;

	t->f_n0 = 0;
	memset(t->f_b, 0, sizeof(t->f_b));
	for (size_t i = 0; i < li->fcap; i++) {
		const struct li_file *x = &li->f[i];

		if (!x->file || x->dead || x->kind != LIFETIME_KIND_TABLE ||
		    x->level < 0 || x->level >= LIFETIME_MAX_LEVELS)
			continue;
		if (x->level == 0)
			t->f_n0++;
		t->f_b[x->level] += size_of ? (double)size_of(arg, x->file) : 0;
	}
	if (li->targets_dirty)
		learn_targets(li);
	best = t->f_n0 / (double)LIFETIME_L0_TRIGGER;
	for (int k = 1; k < LIFETIME_MAX_LEVELS - 1; k++) {
		if (li->target[k] <= 0 || t->f_b[k] <= 0)
			continue;
		if (t->f_b[k] / li->target[k] > best) {
			best = t->f_b[k] / li->target[k];
			lvl = k;
		}
	}
	return lvl + 1;
}

/* Reads by t of other live tables in the window: their minimum level, or -1
 * if fewer than LIFETIME_READ_MIN bytes. */
static int read_inputs(struct lifetime_infer *li, struct li_thread *t,
		       uint64_t now)
{
	uint64_t bytes = 0;
	int min = -1;

	for (int i = 0; i < LI_READS; i++) {
		const struct li_read *r = &t->reads[i];
		const struct li_file *x;

		if (!r->file || r->file == t->last_output ||
		    now - r->t > LIFETIME_READ_WINDOW_NS)
			continue;
		x = file_find(li, r->file);
		if (!x || x->kind != LIFETIME_KIND_TABLE || x->level < 0)
			continue;
		bytes += r->bytes;
		if (r->bytes >= 4096 && (min < 0 || x->level < min))
			min = x->level;
	}
	return bytes >= LIFETIME_READ_MIN ? min : -1;
}

static void close_job(struct li_thread *t)
{
	t->job = 0;
	t->resolving = false;
	t->obs_idx = -1;
}

static void open_job(struct lifetime_infer *li, struct li_thread *t, int level,
		     uint64_t now)
{
	t->job = li->next_job++;
	t->job_level = level;
	t->job_last_ns = now;
	t->resolving = false;
	t->obs_idx = -1;
}

void lifetime_infer_create(struct lifetime_infer *li, uint64_t file,
			   enum lifetime_kind kind, uint32_t tid,
			   uint64_t now_ns, uint64_t clock,
			   uint64_t (*size_of)(void *arg, uint64_t file),
			   void *arg, struct lifetime_guess *g)
{
	struct li_file *x;

	if (g)
		*g = (struct lifetime_guess){ .level = -1, .why = LIFETIME_WHY_FLUSH };
	if (!li || !file)
		return;
	pthread_mutex_lock(&li->mu);
	x = file_find(li, file);
	if (x) {
		if (x->kind == LIFETIME_KIND_WAL && li->live_wal > 0)
			li->live_wal--;
		file_del(li, x);
	}
	x = file_get(li, file);
	if (!x)
		goto out;
	x->kind = (uint8_t)kind;
	x->born = clock;
	if (kind == LIFETIME_KIND_WAL) {
		li->live_wal++;
		goto out;
	}
	if (kind != LIFETIME_KIND_TABLE)
		goto out;

	struct li_thread *t = thread_get(li, tid, now_ns);
	int pending = li->live_wal - 1 - li->unconf;
	bool compactor = t->jobs_comp >= 3 && t->n_flush * 4 < t->jobs_comp;
	int lvl, rd;
	enum lifetime_why why;

	if (t->job && (t->resolving || now_ns - t->job_last_ns > LIFETIME_JOB_IDLE_NS))
		close_job(t);
	rd = read_inputs(li, t, now_ns);
	if (rd >= 0) {
		lvl = rd + 1;
		why = LIFETIME_WHY_READS;
		if (!t->job) {
			open_job(li, t, lvl, now_ns);
			picker_level(li, t, size_of, arg);	/* features only */
		}
		t->job_level = lvl;
	} else if (t->job) {
		lvl = t->job_level;
		why = LIFETIME_WHY_JOB;
	} else if (pending > 0 && !compactor) {
		lvl = 0;
		why = LIFETIME_WHY_FLUSH;
		li->unconf++;
		t->n_flush++;
	} else {
		lvl = picker_level(li, t, size_of, arg);
		why = LIFETIME_WHY_PICKER;
		open_job(li, t, lvl, now_ns);
	}
	if (lvl >= LIFETIME_MAX_LEVELS)
		lvl = LIFETIME_MAX_LEVELS - 1;
	x->level = (int8_t)lvl;
	x->job = why == LIFETIME_WHY_FLUSH ? 0 : t->job;
	if (t->job)
		t->job_last_ns = now_ns;
	t->last_output = file;
	li->st.tables++;
	li->st.why[why]++;
	if (g)
		*g = (struct lifetime_guess){ .level = lvl, .why = why, .job = x->job };
out:
	pthread_mutex_unlock(&li->mu);
}

void lifetime_infer_adopt(struct lifetime_infer *li, uint64_t file,
			  enum lifetime_kind kind, int level, uint64_t clock)
{
	struct li_file *x;

	if (!li || !file)
		return;
	pthread_mutex_lock(&li->mu);
	x = file_get(li, file);
	if (x) {
		x->kind = (uint8_t)kind;
		x->level = (int8_t)(level < LIFETIME_MAX_LEVELS ? level : LIFETIME_MAX_LEVELS - 1);
		x->born = clock;
		if (kind == LIFETIME_KIND_WAL)
			li->live_wal++;
	}
	pthread_mutex_unlock(&li->mu);
}

void lifetime_infer_read(struct lifetime_infer *li, uint64_t file, uint32_t tid,
			 uint64_t bytes, uint64_t now_ns)
{
	struct li_thread *t;
	struct li_read *slot = NULL;

	if (!li || !file || !bytes)
		return;
	pthread_mutex_lock(&li->mu);
	t = thread_get(li, tid, now_ns);
	for (int i = 0; i < LI_READS; i++) {
		struct li_read *r = &t->reads[i];

		if (r->file == file) {
			slot = r;
			break;
		}
		if (!slot || r->t < slot->t)
			slot = r;
	}
	if (slot->file != file)
		*slot = (struct li_read){ .file = file };
	slot->bytes += bytes;
	slot->t = now_ns;
	pthread_mutex_unlock(&li->mu);
}

/* Set every output of job to level; append the changes to fixes. */
static size_t fix_job(struct lifetime_infer *li, uint64_t job, int level,
		      struct lifetime_fix *fixes, size_t n)
{
	for (size_t i = 0; i < li->fcap; i++) {
		struct li_file *x = &li->f[i];

		if (!x->file || x->dead || x->job != job || x->level == level || x->exact)
			continue;
		if (fixes && n < LIFETIME_MAX_FIXES)
			fixes[n++] = (struct lifetime_fix){ x->file, x->level, level };
		x->level = (int8_t)level;
		li->st.tables_corrected++;
	}
	return n;
}

size_t lifetime_infer_unlink(struct lifetime_infer *li, uint64_t file,
			     uint32_t tid, uint64_t now_ns, uint64_t clock,
			     struct lifetime_fix *fixes)
{
	struct li_file *x;
	struct li_thread *best = NULL;
	size_t n = 0;
	int lvl;
	uint64_t job;

	if (!li || !file)
		return 0;
	pthread_mutex_lock(&li->mu);
	x = file_find(li, file);
	if (!x)
		goto out;
	if (x->kind == LIFETIME_KIND_WAL) {
		if (li->live_wal > 0)
			li->live_wal--;
		if (li->unconf > 0)
			li->unconf--;	/* a flush is done */
		obs_note(&li->st.wal, clock - x->born);
		file_del(li, x);
		goto out;
	}
	if (x->kind != LIFETIME_KIND_TABLE) {
		file_del(li, x);
		goto out;
	}
	lvl = x->level;
	job = x->job;
	if (lvl >= 0)
		obs_note(&li->st.level[lvl], clock - x->born);
	file_del(li, x);
	if (lvl < 0)
		goto out;
	/* Whose job's input was it?  The unlinking thread's own open job; else
	 * a job whose inputs are dying now (same batch); else the open job
	 * idle the longest (the one most likely finished). */
	for (int i = 0; i < LI_THREADS; i++) {
		struct li_thread *t = &li->th[i];

		if (!t->used || !t->job || t->job == job)
			continue;
		if (t->resolving && now_ns - t->resolve_ns > LI_BATCH_NS)
			continue;
		if (tid && t->tid == tid) {
			best = t;
			break;
		}
		if (!best || (t->resolving && !best->resolving) ||
		    (t->resolving == best->resolving && t->job_last_ns < best->job_last_ns))
			best = t;
	}
	if (!best)
		goto out;
	if (!best->resolving || lvl < best->resolve_min) {
		int out_level = lvl + 1 < LIFETIME_MAX_LEVELS ? lvl + 1 : LIFETIME_MAX_LEVELS - 1;

		if (!best->resolving) {
			struct li_obs *o;

			best->resolving = true;
			best->resolve_ns = now_ns;
			best->jobs_comp++;
			li->st.jobs_resolved++;
			best->obs_idx = (int)li->obs_next;
			o = &li->obs[li->obs_next];
			o->n0 = best->f_n0;
			memcpy(o->b, best->f_b, sizeof(o->b));
			li->obs_next = (li->obs_next + 1) % LI_OBS;
			if (li->nobs < LI_OBS)
				li->nobs++;
		}
		best->resolve_min = lvl;
		if (best->obs_idx >= 0)
			li->obs[best->obs_idx].in_level = (int8_t)lvl;
		li->targets_dirty = true;
		best->job_level = out_level;
		n = fix_job(li, best->job, out_level, fixes, n);
	}
out:
	pthread_mutex_unlock(&li->mu);
	return n;
}

int lifetime_infer_set_level(struct lifetime_infer *li, uint64_t file, int level,
			     struct lifetime_fix *fix)
{
	struct li_file *x;
	int changed = 0;

	if (!li || level < 0)
		return 0;
	if (level >= LIFETIME_MAX_LEVELS)
		level = LIFETIME_MAX_LEVELS - 1;
	pthread_mutex_lock(&li->mu);
	x = file_find(li, file);
	if (x && x->kind == LIFETIME_KIND_TABLE) {
		if (!x->exact)
			li->st.tables_exact++;
		if (x->level != level) {
			if (fix)
				*fix = (struct lifetime_fix){ file, x->level, level };
			x->level = (int8_t)level;
			changed = 1;
		}
		x->exact = true;
	}
	pthread_mutex_unlock(&li->mu);
	return changed;
}

int lifetime_infer_level(struct lifetime_infer *li, uint64_t file)
{
	int l = -1;

	if (!li)
		return -1;
	pthread_mutex_lock(&li->mu);
	struct li_file *x = file_find(li, file);
	if (x && x->kind == LIFETIME_KIND_TABLE)
		l = x->level;
	pthread_mutex_unlock(&li->mu);
	return l;
}

void lifetime_infer_level_classes(struct lifetime_infer *li,
				  uint8_t out[LIFETIME_MAX_LEVELS])
{
	if (!li) {
		lifetime_level_classes(NULL, NULL, out);
		return;
	}
	pthread_mutex_lock(&li->mu);
	lifetime_level_classes(&li->st.wal, li->st.level, out);
	pthread_mutex_unlock(&li->mu);
}

void lifetime_infer_get_stats(struct lifetime_infer *li,
			      struct lifetime_infer_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!li)
		return;
	pthread_mutex_lock(&li->mu);
	*st = li->st;
	if (li->targets_dirty)
		learn_targets(li);
	for (int k = 0; k < LIFETIME_MAX_LEVELS; k++)
		st->level_targets[k] = (uint64_t)li->target[k];
	lifetime_level_classes(&li->st.wal, li->st.level, st->level_class);
	pthread_mutex_unlock(&li->mu);
}
