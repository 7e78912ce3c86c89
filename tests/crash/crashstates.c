/* zf-crashstates — bounded-exhaustive crash-state testing of the fs core
 * (in the spirit of CrashMonkey/B3), without FUSE or root.
 *
 * For each workload: a fresh copy of a populated base image is mounted,
 * the device starts recording (zdev_record_start: writes with their bytes,
 * flushes, zone resets and finishes, in completion order), the workload's
 * steps run through the fs API, and after every step the logical state is
 * taken (names, inode numbers, types, modes, owners, link counts, symlink
 * targets, xattrs including ACLs, and every regular file's size and bytes);
 * the unmount is the last step.  Then every crash state is built: a copy of
 * the image as it was when the recording began, plus the recorded requests
 * up to a cut, where the cut lies before each flush, zone reset or finish
 * and at the end, and of the writes the volatile cache still held at the
 * cut (those after the last flush) each zone keeps a prefix (the emulator's
 * model: a zone's write pointer survives a power loss at a block between
 * its durable write pointer and its last write).  A zone's choices are
 * "none", the end of each of its writes, and for a write of several blocks
 * also its first block and all but its last block (torn).  All
 * combinations are tried when there are at most --max-subsets of them,
 * else: all kept, none kept, every prefix of the writes in stream order,
 * and each single zone at each of its choices with the others all kept or
 * all dropped.  States identical on the device are checked once.
 *
 * Each crash state must pass fs_check with no problem, mount read-write
 * (not the read-only fallback of a damaged log), and then (the oracle,
 * docs/guarantees.md promise 1):
 *   - prefix: its namespace and metadata (everything above but sizes and
 *     bytes) equal those after some step j of the workload;
 *   - fsync'ed metadata: some such j is at or after the last sync step
 *     (fsync, fdatasync, fsync of a directory, syncfs, the unmount) that
 *     completed before the cut, since every sync commits the whole log;
 *   - fsync'ed data: every regular file's (size, bytes) equal its (size,
 *     bytes), by inode number, after some step at or after the last sync
 *     step that wrote its data (its fsync/fdatasync, syncfs, unmount).
 *
 * Workloads: each of OP_NR operations followed by each of SY_NR sync kinds
 * (singles), and each ordered pair of operations on two files in one
 * directory and in two directories followed by each sync kind of the
 * second's object (pairs); and on a device of 128 KiB zones, 90 steps of
 * create + write + fsync (or fdatasync, or syncfs) of a new file, so that
 * the log crosses meta zones, a snapshot starts a new epoch and resets the
 * old one (rollover); and the collector (gc): a full zone of 20 files of
 * which 15 were deleted is collected (the live files moved, the victim
 * reset), then the unmount or a syncfs; and a file unlinked while the
 * kernel still holds it, written so by a snapshot, whose last reference
 * then goes (its extents dropped with no record of their own) before a
 * syncfs resets its zones (held).  The default runs every single,
 * every --sample-th pair, the rollovers, gc and held; --all runs every pair.
 *
 * Exit status: 0 with no violation, 1 with violations, 2 on a usage or
 * setup error.  Prints the numbers of workloads and crash states checked.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "gc/gc.h"	/* gc_run_once: collect one zone now */
#include "zoned/zdev.h"
#include "tc_util.h"

#define ZONES 64		/* most zones of a test device */
#define BS 4096u
#define STRIPE (64u << 10)
#define MAX_ENTRIES 160
#define MAX_STEPS 100
#define ROLL_STEPS 90		/* create+fsync steps of the rollover workloads */

/* The device of the workloads being run: 16 zones of 1 MiB, or for the
 * rollover workloads 48 of 128 KiB (the log crosses meta zones, the
 * commits snapshot it into a new epoch and reset the old one). */
static uint64_t zone_size = 1u << 20;
static uint32_t nzones = 16;
#define REC_MAX_BYTES (256ull << 20)

/* ---- options, counters ---- */

static struct {
	bool all, verbose, trace;
	unsigned sample;	/* every sample-th pair (default run) */
	unsigned max_subsets;	/* all combinations up to this many */
	const char *only;	/* run only the workload with this name */
	char dir[256];		/* scratch directory */
} opt = { .sample = 37, .max_subsets = 256 };

static unsigned long n_workloads, n_states, n_violations;
static unsigned long n_cuts, n_cuts_bounded;	/* cuts; of them past --max-subsets */

/* ---- images ---- */

/* ---- logical state ---- */

struct entry {
	char path[96];
	uint64_t ino;
	uint32_t mode, uid, gid, nlink;
	uint64_t meta;		/* hash: symlink target, xattrs, dir size */
	uint64_t size, data;	/* regular files: size, hash of the bytes */
};

struct state {
	struct entry e[MAX_ENTRIES];
	unsigned n;
};

struct walk { struct state *s; struct fs *fs; const char *dir; uint64_t dino; int err; };

static int walk_dir(struct fs *fs, struct state *s, uint64_t dino, const char *dir);

static void take_entry(struct walk *w, const char *name, const struct stat *st)
{
	struct state *s = w->s;
	if (s->n == MAX_ENTRIES) {
		w->err = -E2BIG;
		return;
	}
	struct entry *e = &s->e[s->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->path, sizeof(e->path), "%s/%s", w->dir, name);
	e->ino = st->st_ino;
	e->mode = st->st_mode;
	e->uid = st->st_uid;
	e->gid = st->st_gid;
	e->nlink = (uint32_t)st->st_nlink;
	uint64_t h = TC_FNV0;
	char buf[70000];
	if (S_ISLNK(st->st_mode)) {
		int n = fs_readlink(w->fs, e->ino, buf, sizeof(buf));
		if (n > 0)
			h = tc_fnv(h, buf, (size_t)n);
	}
	int ln = fs_listxattr(w->fs, e->ino, buf, sizeof(buf));
	if (ln > 0) {
		/* names in list order may vary: combine the hashes commutatively */
		uint64_t acc = 0;
		for (int i = 0; i < ln; i += (int)strlen(buf + i) + 1) {
			static char val[70000];
			int vn = fs_getxattr(w->fs, e->ino, buf + i, val, sizeof(val));
			uint64_t x = tc_fnv(TC_FNV0, buf + i, strlen(buf + i) + 1);
			if (vn >= 0)
				x = tc_fnv(x, val, (size_t)vn);
			acc += x;
		}
		h = tc_fnv(h, &acc, sizeof(acc));
	}
	e->meta = h;
	if (S_ISREG(st->st_mode)) {
		e->size = (uint64_t)st->st_size;
		uint8_t *d = malloc(e->size + 1);
		if (!d) {
			w->err = -ENOMEM;
			return;
		}
		ssize_t n = fs_read(w->fs, e->ino, 0, e->size, d);
		e->data = n == (ssize_t)e->size ? tc_fnv(TC_FNV0, d, e->size) : 0;
		if (n != (ssize_t)e->size)
			w->err = n < 0 ? (int)n : -EIO;
		free(d);
	}
}

struct names { char (*v)[FS_NAME_MAX + 1]; unsigned n; };

static int collect(void *arg, const char *name, const struct stat *st, uint64_t next)
{
	struct names *nm = arg;
	(void)st;
	(void)next;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (nm->n == MAX_ENTRIES)
		return 1;
	snprintf(nm->v[nm->n++], FS_NAME_MAX + 1, "%s", name);
	return 0;
}

static int walk_dir(struct fs *fs, struct state *s, uint64_t dino, const char *dir)
{
	struct names nm = { calloc(MAX_ENTRIES, FS_NAME_MAX + 1), 0 };
	if (!nm.v)
		return -ENOMEM;
	int ret = fs_readdir(fs, dino, 0, false, collect, &nm);
	for (unsigned i = 0; i < nm.n && !ret; i++) {
		struct stat st;
		struct walk w = { s, fs, dir, dino, 0 };
		ret = fs_lookup(fs, dino, nm.v[i], &st);
		if (ret)
			break;
		take_entry(&w, nm.v[i], &st);
		fs_forget(fs, st.st_ino, 1);
		ret = w.err;
		if (!ret && S_ISDIR(st.st_mode)) {
			char sub[96];
			snprintf(sub, sizeof(sub), "%s/%s", dir, nm.v[i]);
			ret = walk_dir(fs, s, st.st_ino, sub);
		}
	}
	free(nm.v);
	return ret;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path);
}

static int take_state(struct fs *fs, struct state *s)
{
	s->n = 0;
	int ret = walk_dir(fs, s, FS_ROOT_INO, "");
	qsort(s->e, s->n, sizeof(s->e[0]), cmp_entry);
	return ret;
}

/* Namespace and metadata equal (sizes and bytes of regular files aside). */
static bool same_meta(const struct state *a, const struct state *b)
{
	if (a->n != b->n)
		return false;
	for (unsigned i = 0; i < a->n; i++) {
		const struct entry *x = &a->e[i], *y = &b->e[i];
		if (strcmp(x->path, y->path) || x->ino != y->ino || x->mode != y->mode ||
		    x->uid != y->uid || x->gid != y->gid || x->nlink != y->nlink ||
		    x->meta != y->meta)
			return false;
	}
	return true;
}

static const struct entry *by_ino(const struct state *s, uint64_t ino)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->e[i].ino == ino)
			return &s->e[i];
	return NULL;
}

/* ---- workloads ---- */

enum opk { OP_CREATE, OP_MKDIR, OP_SYMLINK, OP_LINK, OP_UNLINK, OP_RMDIR, OP_RENAME,
	   OP_RENAME_OVER, OP_TRUNC_UP, OP_TRUNC_DOWN, OP_WRITE, OP_DIRECT, OP_FALLOC,
	   OP_PUNCH, OP_COPY, OP_SETX, OP_REMX, OP_SETFACL, OP_NR };
static const char *const op_name[OP_NR] = {
	"create", "mkdir", "symlink", "link", "unlink", "rmdir", "rename", "rename-over",
	"truncate-up", "truncate-down", "write", "odirect-write", "fallocate", "punch",
	"copy_file_range", "setxattr", "removexattr", "setfacl",
};
enum synck { SY_FSYNC, SY_FDATASYNC, SY_FSYNC_DIR, SY_SYNCFS, SY_NR };
static const char *const sync_name[SY_NR] = { "fsync", "fdatasync", "fsync-dir", "syncfs" };

struct wl {
	char name[96];
	int nops;
	enum opk op[2];
	int dir[2];		/* 1 or 2: /d1 or /d2 */
	int slot[2];		/* 1 or 2: which file and names */
	enum synck sync;
	int roll;		/* rollover: this many create+write+sync steps */
	bool gc;		/* the collector moves the live files of a zone */
	bool held;		/* a file unlinked while held, then released */
};

static void pattern(uint8_t *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)((i * 2654435761u + seed * 40503u) >> 11);
}

static uint64_t look(struct fs *fs, uint64_t parent, const char *name)
{
	struct stat st;
	if (fs_lookup(fs, parent, name, &st))
		return 0;
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

/* An access ACL granting user 4343 read (POSIX ACL xattr format, v2). */
static size_t acl_blob(uint8_t *b)
{
	static const uint16_t ent[][2] = { { 1, 6 }, { 2, 4 }, { 4, 4 }, { 0x10, 4 }, { 0x20, 0 } };
	size_t n = 4;
	uint32_t v = 2;
	memcpy(b, &v, 4);
	for (size_t i = 0; i < ZF_ARRAY_SIZE(ent); i++) {
		uint32_t id = ent[i][0] == 2 ? 4343 : UINT32_MAX;
		memcpy(b + n, &ent[i][0], 2);
		memcpy(b + n + 2, &ent[i][1], 2);
		memcpy(b + n + 4, &id, 4);
		n += 8;
	}
	return n;
}

/* The base: /d1 and /d2, each holding f1, f2 (8 KiB, user.old), o1, o2
 * (rename-over victims), y1, y2 (copy targets), e1, e2 (empty dirs). */
static void populate(struct fs *fs)
{
	uint8_t buf[8192];
	for (int d = 1; d <= 2; d++) {
		char n[16];
		snprintf(n, sizeof(n), "d%d", d);
		uint64_t di = tc_mk(fs, FS_ROOT_INO, n, S_IFDIR | 0755);
		for (int t = 1; t <= 2; t++) {
			snprintf(n, sizeof(n), "f%d", t);
			uint64_t f = tc_mk(fs, di, n, S_IFREG | 0644);
			pattern(buf, sizeof(buf), (uint32_t)(d * 10 + t));
			TC_CHECK(fs_write(fs, f, 0, buf, sizeof(buf), false));
			TC_CHECK(fs_setxattr(fs, f, "user.old", "x", 1, 0));
			snprintf(n, sizeof(n), "o%d", t);
			uint64_t o = tc_mk(fs, di, n, S_IFREG | 0600);
			TC_CHECK(fs_write(fs, o, 0, buf, 4096, false));
			snprintf(n, sizeof(n), "y%d", t);
			tc_mk(fs, di, n, S_IFREG | 0644);
			snprintf(n, sizeof(n), "e%d", t);
			tc_mk(fs, di, n, S_IFDIR | 0700);
		}
	}
	TC_CHECK(fs_sync(fs));
}

/* Run one operation; *obj is the inode its sync step syncs, *dir its directory. */
static int run_op(struct fs *fs, enum opk op, int d, int t, uint64_t *obj, uint64_t *dir)
{
	char n[16], x[16];
	struct stat st;
	snprintf(n, sizeof(n), "d%d", d);
	uint64_t di = look(fs, FS_ROOT_INO, n);
	snprintf(n, sizeof(n), "f%d", t);
	uint64_t f = look(fs, di, n);
	static uint8_t buf[STRIPE] __attribute__((aligned(4096)));
	int ret = 0;

	*dir = di;
	*obj = f;
	if (!di || !f)
		return -ENOENT;
	pattern(buf, sizeof(buf), (uint32_t)(100 + d * 10 + t));
	switch (op) {
	case OP_CREATE:
		snprintf(x, sizeof(x), "n%d", t);
		*obj = tc_mk(fs, di, x, S_IFREG | 0644);
		break;
	case OP_MKDIR:
		snprintf(x, sizeof(x), "m%d", t);
		*obj = tc_mk(fs, di, x, S_IFDIR | 0755);
		break;
	case OP_SYMLINK:
		snprintf(x, sizeof(x), "s%d", t);
		ret = fs_symlink(fs, di, x, "../some/target", NULL, &st);
		if (!ret) {
			fs_forget(fs, st.st_ino, 1);
			*obj = st.st_ino;
		}
		break;
	case OP_LINK:
		snprintf(x, sizeof(x), "l%d", t);
		ret = fs_link(fs, f, di, x, &st);
		if (!ret)
			fs_forget(fs, st.st_ino, 1);
		break;
	case OP_UNLINK:
		ret = fs_unlink(fs, di, n);
		*obj = di;
		break;
	case OP_RMDIR:
		snprintf(x, sizeof(x), "e%d", t);
		ret = fs_rmdir(fs, di, x);
		*obj = di;
		break;
	case OP_RENAME:
		snprintf(x, sizeof(x), "r%d", t);
		ret = fs_rename(fs, di, n, di, x, 0);
		break;
	case OP_RENAME_OVER:
		snprintf(x, sizeof(x), "o%d", t);
		ret = fs_rename(fs, di, n, di, x, 0);
		break;
	case OP_TRUNC_UP:
	case OP_TRUNC_DOWN:
		memset(&st, 0, sizeof(st));
		st.st_size = op == OP_TRUNC_UP ? 20000 : 1000;
		ret = fs_setattr(fs, f, &st, FS_SET_SIZE, &st);
		break;
	case OP_WRITE:
		ret = (int)fs_write(fs, f, 2000, buf, 6000, false);
		break;
	case OP_DIRECT: {
		/* O_DIRECT reaches the fs as a donated, chunk-aligned payload */
		struct fs_donor *dn = fs_donor_new(STRIPE);
		if (!dn)
			return -ENOMEM;
		memcpy(dn->base, buf, STRIPE);
		ret = (int)fs_write_donated(fs, f, 0, dn, STRIPE, false);
		fs_donor_put(dn);
		break;
	}
	case OP_FALLOC:
		ret = fs_fallocate(fs, f, 0, 0, 32768);
		break;
	case OP_PUNCH:
		ret = fs_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096);
		break;
	case OP_COPY:
		snprintf(x, sizeof(x), "y%d", t);
		*obj = look(fs, di, x);
		ret = (int)fs_copy_file_range(fs, f, 0, *obj, 0, 8192, 0);
		break;
	case OP_SETX:
		ret = fs_setxattr(fs, f, "user.k", "value", 5, 0);
		break;
	case OP_REMX:
		ret = fs_removexattr(fs, f, "user.old");
		break;
	case OP_SETFACL: {
		uint8_t b[64];
		size_t len = acl_blob(b);
		ret = fs_setxattr(fs, f, FS_ACL_ACCESS, b, len, 0);
		break;
	}
	default:
		return -EINVAL;
	}
	return ret < 0 ? ret : 0;
}

static int run_sync(struct fs *fs, enum synck k, uint64_t obj, uint64_t dir)
{
	switch (k) {
	case SY_FSYNC: return fs_fsync(fs, obj, false);
	case SY_FDATASYNC: return fs_fsync(fs, obj, true);
	case SY_FSYNC_DIR: return fs_fsync(fs, dir, false);
	default: return fs_sync(fs);
	}
}

/* ---- one workload: record, then every crash state ---- */

struct step {
	long pos;		/* recorded requests when the step completed */
	bool sync;		/* a sync step: commits the whole log */
	uint64_t synced;	/* inode whose data it made durable (0: every file) */
};

struct run {
	const struct wl *w;
	struct state st[MAX_STEPS + 1];	/* st[0]: before the first step */
	struct step step[MAX_STEPS + 1];
	int nsteps;
	const struct zdev_rec_op *ops;
	long nops;
	char base[300];		/* the image when the recording began */
	char img[300];		/* scratch crash image */
	uint64_t *seen;		/* device-state keys checked */
	size_t nseen, capseen;
};

static void violation(struct run *r, const char *what, const char *detail)
{
	n_violations++;
	fprintf(stderr, "VIOLATION %s: %s%s%s\n", r->w->name, what, detail ? ": " : "",
		detail ? detail : "");
}

/* The cut: requests [0, k) happened; zone z's writes after request
 * vfrom[z] (the last flush, or the zone's last reset after it) are
 * volatile: of them the zone keeps keep[z] bytes from vstart[z]. */
struct cut {
	long k, flush_at;
	long vfrom[ZONES];
	uint64_t vstart[ZONES];	/* zone-relative offset where its volatile bytes start */
	uint64_t vend[ZONES];	/* ... and its write pointer at the cut */
	uint64_t keep[ZONES];
};

static uint64_t state_key(const struct run *r, const struct cut *c)
{
	/* per zone: index of its last reset before the cut, bytes kept since */
	long lastreset[ZONES];
	uint64_t len[ZONES] = { 0 };
	bool fin[ZONES] = { false };
	for (int z = 0; z < ZONES; z++)
		lastreset[z] = -1;
	for (long i = 0; i < c->k; i++) {
		const struct zdev_rec_op *o = &r->ops[i];
		if (o->kind == ZDEV_REC_RESET || o->kind == ZDEV_REC_RESET_ALL) {
			for (int z = 0; z < ZONES; z++)
				if (o->kind == ZDEV_REC_RESET_ALL || (uint32_t)z == o->zone) {
					lastreset[z] = i;
					len[z] = 0;
					fin[z] = false;
				}
		} else if (o->kind == ZDEV_REC_FINISH && o->zone < ZONES) {
			fin[o->zone] = true;
		}
	}
	uint64_t h = TC_FNV0;
	for (int z = 0; z < ZONES; z++) {
		uint64_t l = c->vend[z] > c->vstart[z] ? c->vstart[z] + c->keep[z] : c->vend[z];
		len[z] = l;
		h = tc_fnv(h, &lastreset[z], sizeof(lastreset[z]));
		h = tc_fnv(h, &len[z], sizeof(len[z]));
		h = tc_fnv(h, &fin[z], sizeof(fin[z]));
	}
	return h;
}

static bool seen_before(struct run *r, uint64_t key)
{
	for (size_t i = 0; i < r->nseen; i++)
		if (r->seen[i] == key)
			return true;
	if (r->nseen == r->capseen) {
		size_t cap = r->capseen;
		uint64_t *n = zf_grow(r->seen, &cap, r->nseen + 1, sizeof(*n), 256);
		if (!n)
			tc_die("out of memory");
		r->seen = n;
		r->capseen = cap;
	}
	r->seen[r->nseen++] = key;
	return false;
}

/* Build the crash image for cut c. */
static void build(struct run *r, const struct cut *c)
{
	struct zdev *dev;
	const uint64_t zs = zone_size;

	tc_copy_image(r->base, r->img);
	TC_CHECK(zdev_open(r->img, NULL, &dev));
	for (long i = 0; i < c->k; i++) {
		const struct zdev_rec_op *o = &r->ops[i];
		switch (o->kind) {
		case ZDEV_REC_WRITE: {
			uint64_t len = o->len;
			uint32_t z = o->zone;
			if (z < ZONES && i > c->vfrom[z]) {
				uint64_t zo = o->off - (uint64_t)z * zs;
				uint64_t lim = c->vstart[z] + c->keep[z];
				len = zo >= lim ? 0 : ZF_MIN(len, lim - zo);
			}
			if (len) {
				void *b = zdev_buf_alloc(len);
				memcpy(b, o->data, len);
				TC_CHECK(zdev_write(dev, o->off, b, len));
				zdev_buf_free(b);
			}
			break;
		}
		case ZDEV_REC_FLUSH: TC_CHECK(zdev_flush(dev)); break;
		case ZDEV_REC_RESET: TC_CHECK(zdev_zone_reset(dev, o->zone)); break;
		case ZDEV_REC_FINISH: TC_CHECK(zdev_zone_finish(dev, o->zone)); break;
		case ZDEV_REC_RESET_ALL: TC_CHECK(zdev_reset_all(dev)); break;
		}
	}
	TC_CHECK(zdev_flush(dev));
	TC_CHECK(zdev_emu_power_loss(dev, 0));	/* open zones come back closed */
	zdev_close(dev);
}

static void fsck_report(void *arg, const char *fmt, ...)
{
	char *buf = arg;
	va_list ap;
	if (buf[0])
		return;
	va_start(ap, fmt);
	vsnprintf(buf, 256, fmt, ap);
	va_end(ap);
}

static void check_state(struct run *r, const struct cut *c)
{
	struct zdev *dev;
	char msg[400], fsck_msg[256] = "";
	int err;

	if (seen_before(r, state_key(r, c)))
		return;
	n_states++;
	if (opt.trace) {
		printf("  cut %ld:", c->k);
		for (int z = 0; z < ZONES; z++)
			if (c->vend[z] > c->vstart[z])
				printf(" z%d keeps %llu/%llu", z, (unsigned long long)c->keep[z],
				       (unsigned long long)(c->vend[z] - c->vstart[z]));
		putchar('\n');
	}
	build(r, c);
	TC_CHECK(zdev_open(r->img, NULL, &dev));
	int probs = fs_check(dev, false, fsck_report, fsck_msg);
	if (probs != 0) {
		snprintf(msg, sizeof(msg), "cut %ld: fsck: %d (%s)", c->k, probs, fsck_msg);
		violation(r, "fsck not clean", msg);
	}
	struct fs *fs = tc_mount(dev, false, &err);
	if (!fs) {
		snprintf(msg, sizeof(msg), "cut %ld: %s", c->k, strerror(-err));
		violation(r, "crash state does not mount", msg);
		zdev_close(dev);
		return;
	}
	if (fs_mount_note(fs)) {	/* a crash must never look like damage */
		snprintf(msg, sizeof(msg), "cut %ld: %s", c->k, fs_mount_note(fs));
		violation(r, "crash state mounts read-only", msg);
	}
	static struct state got;
	err = take_state(fs, &got);
	if (err) {
		snprintf(msg, sizeof(msg), "cut %ld: walking: %s", c->k, strerror(-err));
		violation(r, "crash state unreadable", msg);
	}
	/* the last sync step completed before the cut, and each file's */
	int last_sync = 0;
	for (int s = 1; s <= r->nsteps; s++)
		if (r->step[s].sync && r->step[s].pos <= c->k)
			last_sync = s;
	int best = -1;
	for (int j = 0; j <= r->nsteps; j++)
		if (same_meta(&got, &r->st[j]))
			best = j;
	if (!err && best < 0) {
		snprintf(msg, sizeof(msg), "cut %ld of %ld: names/metadata match no step", c->k,
			 r->nops);
		violation(r, "not a state the workload passed through", msg);
	} else if (!err && best < last_sync) {
		snprintf(msg, sizeof(msg), "cut %ld: state of step %d, sync step %d completed",
			 c->k, best, last_sync);
		violation(r, "lost fsync'ed metadata", msg);
	}
	for (unsigned i = 0; i < got.n && !err; i++) {
		const struct entry *e = &got.e[i];
		if (!S_ISREG(e->mode))
			continue;
		int from = 0;
		for (int s = 1; s <= r->nsteps; s++)
			if (r->step[s].sync && r->step[s].pos <= c->k &&
			    (r->step[s].synced == 0 || r->step[s].synced == e->ino))
				from = s;
		bool ok = false;
		for (int j = from; j <= r->nsteps && !ok; j++) {
			const struct entry *x = by_ino(&r->st[j], e->ino);
			ok = x && x->size == e->size && x->data == e->data;
		}
		if (!ok) {
			snprintf(msg, sizeof(msg), "cut %ld: %s (inode %llu, %llu bytes) matches "
				 "no step from %d", c->k, e->path, (unsigned long long)e->ino,
				 (unsigned long long)e->size, from);
			violation(r, "file data lost or never written", msg);
		}
	}
	err = fs_unmount(fs);
	if (err) {
		snprintf(msg, sizeof(msg), "cut %ld: unmount: %s", c->k, strerror(-err));
		violation(r, "crash state does not unmount", msg);
	}
	zdev_close(dev);
}

/* Choices of kept volatile bytes for one zone: none, each write's end, and
 * for a write of several blocks its first block and all but its last. */
static unsigned zone_choices(const struct run *r, const struct cut *c, uint32_t z,
			     uint64_t *out, unsigned max)
{
	unsigned n = 0;
	out[n++] = 0;
	for (long i = c->vfrom[z] + 1; i < c->k && n + 3 <= max; i++) {
		const struct zdev_rec_op *o = &r->ops[i];
		if (o->kind != ZDEV_REC_WRITE || o->zone != z)
			continue;
		uint64_t s = o->off - (uint64_t)z * zone_size - c->vstart[z];
		if (o->len > BS) {
			out[n++] = s + BS;
			out[n++] = s + o->len - BS;
		}
		out[n++] = s + o->len;
	}
	return n;
}

#define MAXCH 64

static void enumerate_cut(struct run *r, long k)
{
	struct cut c = { .k = k, .flush_at = -1 };
	uint64_t ch[ZONES][MAXCH];
	unsigned nch[ZONES] = { 0 };

	for (long i = 0; i < k; i++)
		if (r->ops[i].kind == ZDEV_REC_FLUSH)
			c.flush_at = i;
	/* each zone's volatile range: from its state at the flush (or its
	 * last reset after it) to its end at the cut */
	uint64_t wp[ZONES] = { 0 };
	bool known[ZONES] = { false };
	for (int z = 0; z < ZONES; z++)
		c.vfrom[z] = c.flush_at;
	for (long i = 0; i < k; i++) {
		const struct zdev_rec_op *o = &r->ops[i];
		if (o->kind == ZDEV_REC_WRITE && o->zone < ZONES) {
			uint64_t zo = o->off - (uint64_t)o->zone * zone_size;
			if (i > c.flush_at && !known[o->zone]) {
				c.vstart[o->zone] = zo;
				known[o->zone] = true;
			}
			wp[o->zone] = zo + o->len;
		} else if (o->kind == ZDEV_REC_RESET || o->kind == ZDEV_REC_RESET_ALL) {
			for (int z = 0; z < ZONES; z++)
				if (o->kind == ZDEV_REC_RESET_ALL || (uint32_t)z == o->zone) {
					wp[z] = 0;
					known[z] = false;
					if (i > c.flush_at)
						c.vfrom[z] = i;
				}
		}
	}
	uint64_t combos = 1;
	n_cuts++;
	for (int z = 0; z < ZONES; z++) {
		if (!known[z])
			c.vstart[z] = wp[z];
		c.vend[z] = wp[z];
		if (known[z])
			nch[z] = zone_choices(r, &c, (uint32_t)z, ch[z], MAXCH);
		if (nch[z])
			combos *= nch[z];
		if (combos > opt.max_subsets)
			combos = (uint64_t)opt.max_subsets + 1;
	}
	if (combos <= opt.max_subsets) {
		unsigned idx[ZONES] = { 0 };
		for (;;) {
			for (int z = 0; z < ZONES; z++)
				c.keep[z] = nch[z] ? ch[z][idx[z]] : 0;
			check_state(r, &c);
			int z = 0;
			for (; z < ZONES; z++) {
				if (!nch[z])
					continue;
				if (++idx[z] < nch[z])
					break;
				idx[z] = 0;
			}
			if (z == ZONES)
				return;
		}
	}
	/* bounded: all, none, stream-order prefixes, single zones */
	n_cuts_bounded++;
	for (int full = 0; full <= 1; full++) {
		for (int z = 0; z < ZONES; z++)
			c.keep[z] = nch[z] && full ? ch[z][nch[z] - 1] : 0;
		check_state(r, &c);
		for (int z = 0; z < ZONES; z++) {
			uint64_t save = c.keep[z];
			for (unsigned i = 0; i < nch[z]; i++) {
				c.keep[z] = ch[z][i];
				check_state(r, &c);
			}
			c.keep[z] = save;
		}
	}
	for (int z = 0; z < ZONES; z++)
		c.keep[z] = 0;
	for (long i = c.flush_at + 1; i < k; i++) {
		const struct zdev_rec_op *o = &r->ops[i];
		if (o->kind != ZDEV_REC_WRITE || o->zone >= ZONES || i <= c.vfrom[o->zone])
			continue;
		uint64_t zo = o->off - (uint64_t)o->zone * zone_size;
		c.keep[o->zone] = zo + o->len - c.vstart[o->zone];
		check_state(r, &c);
	}
}

static void run_workload(const struct wl *w, const char *base_img)
{
	static struct run r;
	struct zdev *dev;
	int err;

	if (opt.only && strcmp(opt.only, w->name))
		return;
	memset(&r, 0, sizeof(r));
	r.w = w;
	char work[300];
	snprintf(work, sizeof(work), "%s/work.zdev", opt.dir);
	snprintf(r.base, sizeof(r.base), "%s/start.zdev", opt.dir);
	snprintf(r.img, sizeof(r.img), "%s/crash.zdev", opt.dir);
	tc_copy_image(base_img, work);
	TC_CHECK(zdev_open(work, NULL, &dev));
	struct fs *fs = tc_mount(dev, false, &err);
	if (!fs)
		tc_die("%s: mount: %s", w->name, strerror(-err));
	if (w->gc) {	/* a full zone of 20 files, 3 in 4 deleted: a victim */
		static uint8_t gb[STRIPE];
		uint64_t d2 = look(fs, FS_ROOT_INO, "d2");
		for (int i = 0; i < 20; i++) {
			char n[16];
			snprintf(n, sizeof(n), "g%02d", i);
			uint64_t f = tc_mk(fs, d2, n, S_IFREG | 0644);
			pattern(gb, sizeof(gb), (uint32_t)(500 + i));
			TC_CHECK(fs_write(fs, f, 0, gb, sizeof(gb), false));
			TC_CHECK(fs_fsync(fs, f, false));
		}
		for (int i = 0; i < 20; i++) {
			char n[16];
			snprintf(n, sizeof(n), "g%02d", i);
			if (i % 4)
				TC_CHECK(fs_unlink(fs, d2, n));
		}
		TC_CHECK(fs_sync(fs));
	}
	uint64_t held = 0;
	if (w->held) {	/* two zones' worth, held by a lookup, unlinked, snapshot */
		static uint8_t hb[STRIPE];
		struct stat st;
		uint64_t d2 = look(fs, FS_ROOT_INO, "d2");
		held = tc_mk(fs, d2, "held", S_IFREG | 0644);
		for (uint64_t off = 0; off < 2 * zone_size; off += sizeof(hb)) {
			pattern(hb, sizeof(hb), (uint32_t)(700 + off / sizeof(hb)));
			TC_CHECK(fs_write(fs, held, off, hb, sizeof(hb), false));
		}
		TC_CHECK(fs_fsync(fs, held, false));
		TC_CHECK(fs_lookup(fs, d2, "held", &st));
		TC_CHECK(fs_unlink(fs, d2, "held"));
		pthread_mutex_lock(&fs->lock);
		err = mlog_snapshot(fs->mlog, fs_emit_snapshot, fs);
		pthread_mutex_unlock(&fs->lock);
		TC_CHECK(err);
		TC_CHECK(fs_sync(fs));
	}
	TC_CHECK(zdev_flush(dev));
	tc_copy_image(work, r.base);
	TC_CHECK(take_state(fs, &r.st[0]));
	TC_CHECK(zdev_record_start(dev, REC_MAX_BYTES));
	uint64_t obj = 0, dir = 0;
	int s = 0;
	for (int i = 0; i < w->roll; i++) {
		static uint8_t rb[3000];
		char n[16];
		snprintf(n, sizeof(n), "r%03d", i);
		dir = look(fs, FS_ROOT_INO, "d1");
		obj = tc_mk(fs, dir, n, S_IFREG | 0644);
		pattern(rb, sizeof(rb), (uint32_t)(1000 + i));
		TC_CHECK(fs_write(fs, obj, 0, rb, sizeof(rb), false));
		TC_CHECK(run_sync(fs, w->sync, obj, dir));
		s++;
		r.step[s].pos = zdev_record_get(dev, &r.ops);
		r.step[s].sync = true;
		r.step[s].synced = w->sync == SY_SYNCFS ? 0 : obj;
		TC_CHECK(take_state(fs, &r.st[s]));
	}
	if (w->gc) {
		int got = gc_run_once(fs);
		if (got != 1)
			tc_die("%s: the collector collected %d zones, 1 expected", w->name, got);
		s++;
		r.step[s].pos = zdev_record_get(dev, &r.ops);
		TC_CHECK(take_state(fs, &r.st[s]));
		obj = dir = FS_ROOT_INO;
	}
	struct fs_stats before_release = { 0 };
	if (w->held) {	/* the last reference goes; the sync below resets its zones */
		fs_get_stats(fs, &before_release);
		fs_forget(fs, held, 1);
		s++;
		r.step[s].pos = zdev_record_get(dev, &r.ops);
		TC_CHECK(take_state(fs, &r.st[s]));
		obj = dir = FS_ROOT_INO;
	}
	for (int i = 0; i < w->nops; i++) {
		err = run_op(fs, w->op[i], w->dir[i], w->slot[i], &obj, &dir);
		if (err)
			tc_die("%s: %s: %s", w->name, op_name[w->op[i]], strerror(-err));
		s++;
		r.step[s].pos = zdev_record_get(dev, &r.ops);
		TC_CHECK(take_state(fs, &r.st[s]));
	}
	if (!w->roll && !(w->gc && w->sync != SY_SYNCFS)) {
		TC_CHECK(run_sync(fs, w->sync, obj, dir));
		s++;
		r.step[s].pos = zdev_record_get(dev, &r.ops);
		r.step[s].sync = true;
		r.step[s].synced = w->sync == SY_SYNCFS ? 0 :
				   w->sync == SY_FSYNC_DIR ? UINT64_MAX : obj;
		TC_CHECK(take_state(fs, &r.st[s]));
	}
	if (w->held) {
		struct fs_stats now;
		fs_get_stats(fs, &now);
		if (now.zone_resets == before_release.zone_resets)
			tc_die("%s: no zone of the released file was reset", w->name);
	}
	err = fs_unmount(fs);
	if (err)
		tc_die("%s: unmount: %s", w->name, strerror(-err));
	s++;
	r.nops = zdev_record_get(dev, &r.ops);
	if (r.nops < 0)
		tc_die("%s: recording: %s", w->name, strerror((int)-r.nops));
	r.step[s].pos = r.nops;
	r.step[s].sync = true;
	r.step[s].synced = 0;
	r.st[s] = r.st[s - 1];
	r.nsteps = s;
	unsigned long before = n_states;
	if (opt.trace)
		for (long i = 0; i < r.nops; i++)
			printf("  %3ld %-9s zone %2u off %8llu len %6llu\n", i,
			       (const char *[]){ "?", "write", "flush", "reset", "finish",
						 "reset-all" }[r.ops[i].kind],
			       r.ops[i].zone, (unsigned long long)r.ops[i].off,
			       (unsigned long long)r.ops[i].len);
	enumerate_cut(&r, 0);
	for (long i = 0; i < r.nops; i++)
		if (r.ops[i].kind != ZDEV_REC_WRITE)
			enumerate_cut(&r, i);
	enumerate_cut(&r, r.nops);
	n_workloads++;
	if (opt.verbose)
		printf("%-48s %4ld requests, %4lu crash states\n", w->name, r.nops,
		       n_states - before);
	zdev_close(dev);
	free(r.seen);
	unlink(work);
	unlink(r.base);
	unlink(r.img);
}

static void make_base(const char *path)
{
	struct zdev *dev;
	struct fs *fs = tc_make_fs(path, nzones, zone_size, &dev);
	populate(fs);
	TC_CHECK(fs_unmount(fs));
	zdev_close(dev);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: zf-crashstates [--all] [--sample N] [--max-subsets N] "
		"[--only NAME] [--list] [-v]\n"
		"  --all            every pair of operations (default: every single, every\n"
		"                   N-th pair)\n"
		"  --sample N       the N-th pairs in the default run (default 37)\n"
		"  --max-subsets N  all combinations of kept volatile writes up to N per cut\n"
		"                   (default 256), else the bounded set\n"
		"  --only NAME      just the workload NAME (as --list prints it)\n"
		"  --list           print the workloads and exit\n"
		"  -v               a line per workload\n"
		"  -t               also the recorded requests and each crash state\n"
		"Env: TMPDIR (default /dev/shm, else /tmp) for the scratch images.\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "all", no_argument, NULL, 'a' }, { "sample", required_argument, NULL, 's' },
		{ "max-subsets", required_argument, NULL, 'm' },
		{ "only", required_argument, NULL, 'o' }, { "list", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	bool list = false;
	int c;
	while ((c = getopt_long(argc, argv, "vht", lo, NULL)) != -1) {
		switch (c) {
		case 'a': opt.all = true; break;
		case 's': opt.sample = (unsigned)atoi(optarg); break;
		case 'm': opt.max_subsets = (unsigned)atoi(optarg); break;
		case 'o': opt.only = optarg; break;
		case 'l': list = true; break;
		case 'v': opt.verbose = true; break;
		case 't': opt.trace = opt.verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || opt.sample == 0 || opt.max_subsets == 0) {
		usage(stderr);
		return 2;
	}
	/* build the workload list */
	static struct wl wls[OP_NR * SY_NR * (1 + 2 * OP_NR) + SY_NR + 3];
	size_t nw = 0, npairs = 0;
	for (int a = 0; a < OP_NR; a++)
		for (int k = 0; k < SY_NR; k++) {
			struct wl *w = &wls[nw++];
			*w = (struct wl){ .nops = 1, .op = { a }, .dir = { 1 }, .slot = { 1 },
					  .sync = k };
			snprintf(w->name, sizeof(w->name), "%s+%s", op_name[a], sync_name[k]);
		}
	for (int two = 0; two <= 1; two++)
		for (int a = 0; a < OP_NR; a++)
			for (int b = 0; b < OP_NR; b++)
				for (int k = 0; k < SY_NR; k++) {
					if (!opt.all && !opt.only && npairs++ % opt.sample)
						continue;
					struct wl *w = &wls[nw++];
					*w = (struct wl){ .nops = 2, .op = { a, b },
							  .dir = { 1, two ? 2 : 1 }, .slot = { 1, 2 },
							  .sync = k };
					snprintf(w->name, sizeof(w->name), "%s,%s%s+%s", op_name[a],
						 op_name[b], two ? "(2dirs)" : "", sync_name[k]);
				}
	for (int k = 0; k < 2; k++) {	/* the collector, then unmount or syncfs first */
		struct wl *w = &wls[nw++];
		*w = (struct wl){ .gc = true, .sync = k ? SY_SYNCFS : SY_FSYNC };
		snprintf(w->name, sizeof(w->name), "gc%s", k ? "+syncfs" : "");
	}
	wls[nw] = (struct wl){ .held = true, .sync = SY_SYNCFS };
	snprintf(wls[nw++].name, sizeof(wls[0].name), "held+syncfs");
	size_t nsmall = nw;
	for (int k = 0; k < SY_NR; k++) {
		if (k == SY_FSYNC_DIR)
			continue;
		struct wl *w = &wls[nw++];
		*w = (struct wl){ .roll = ROLL_STEPS, .sync = k };
		snprintf(w->name, sizeof(w->name), "rollover%d+%s", ROLL_STEPS, sync_name[k]);
	}
	if (list) {
		for (size_t i = 0; i < nw; i++)
			puts(wls[i].name);
		return 0;
	}
	tc_prog = "zf-crashstates";
	tc_scratch_dir(opt.dir, sizeof(opt.dir));
	zf_log_set_level(ZF_LOG_ERROR);
	char base[300];
	snprintf(base, sizeof(base), "%s/base.zdev", opt.dir);
	make_base(base);
	uint64_t t0 = zf_now_ns();
	for (size_t i = 0; i < nsmall; i++)
		run_workload(&wls[i], base);
	unlink(base);
	zone_size = 128u << 10;
	nzones = 48;
	make_base(base);
	for (size_t i = nsmall; i < nw; i++)
		run_workload(&wls[i], base);
	unlink(base);
	rmdir(opt.dir);
	printf("zf-crashstates: %lu workloads, %lu crash states checked (%lu cuts, %lu of them "
	       "past %u combinations: bounded set), %lu violations (%.1f s)\n", n_workloads,
	       n_states, n_cuts, n_cuts_bounded, opt.max_subsets, n_violations,
	       (double)(zf_now_ns() - t0) / 1e9);
	if (opt.only && n_workloads == 0) {
		fprintf(stderr, "zf-crashstates: no workload named %s\n", opt.only);
		return 2;
	}
	return n_violations ? 1 : 0;
}
