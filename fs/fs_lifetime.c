/* fs_lifetime — the fs side of lifetime placement: choosing a new file's
 * class, and feeding the LSM level inference (lsm/lifetime.h has the model,
 * the decision table and the sources in order).
 *
 *   fs_lifetime_init()   at mount, after replay: the rules file
 *                        (opts.hints_file), the inference state, and the
 *                        tables/WALs that exist already (their level from
 *                        their class when it was inferred)
 *   fs_lifetime_pick()   CREATE: facts -> lifetime_decide() -> in->cls
 *   fs_note_read()       READ by a thread (only on page-cache misses)
 *   fs_lifetime_note_release()  RELEASE: a table's size is final
 *   fs_lifetime_note_unlink()  a file's last name goes: lifetimes, and the
 *                        level corrections of finished compaction jobs
 *                        (in->cls follows, for files whose class was
 *                        inferred: GC then moves their data to that class)
 *   fs_lifetime_tail_manifests()  reads what RocksDB/LevelDB appended to
 *                        their MANIFEST (followed from its CREATE, or found
 *                        at mount): the exact level of every table, trivial
 *                        moves included (lifetime_manifest_parse())
 *   fs_lifetime_fill_stats()  the lifetime counters of struct fs_stats
 *
 * Every inference is logged at debug level (-o zf_verbose) as
 *   lifetime: create NAME ino N tid T level L why W -> CLASS/SOURCE
 *   lifetime: fix ino N level A -> B -> CLASS        (a job's inputs died)
 *   lifetime: exact ino N level A -> B -> CLASS      (from the MANIFEST)
 * which scripts/bench-placement.sh compares with RocksDB's LOG.
 *
 * State: struct fs_lt below, owned by this file, fs->lt (NULL before
 * fs_lifetime_init and after fs_lifetime_fini).  Lifetimes are measured in
 * bytes written to the file system (fs->user_bytes).
 * Locking: pick, note_release and note_unlink run with fs->lock held;
 * note_read takes no fs lock (only the inference state's leaf mutex);
 * tail_manifests is called with no lock held.  Order: lt->tail_lock ->
 * fs->lock -> lt->mf_lock (a leaf); the inference mutex is a leaf too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"
#include "fs/fs_lifetime.h"

#define HINTS_MAX_BYTES (1u << 20)
#define LT_MANIFESTS_MAX 16	/* MANIFEST files followed at once */
/* A followed MANIFEST that gave a level to a table this recently is never
 * dropped for a new one. */
#define LT_MF_KEEP_NS (60ull * 1000000000ull)

/* A MANIFEST being followed: its inode, its directory (where its tables
 * are), the offset up to which it was parsed, and when it last gave a
 * table of its directory a level (zf_now_ns; 0: never). */
struct fs_lt_manifest {
	uint64_t ino, dir, pos;
	uint64_t useful_ns;
};

struct fs_lt {
	struct lifetime_infer *infer;	/* inference state (own leaf mutex) */
	struct lifetime_rules *rules;	/* -o hints=FILE, or NULL; immutable */
	uint8_t map_logged[LIFETIME_MAX_LEVELS];	/* [fs->lock] level classes
					 * last logged */
	/* serialises the MANIFEST readers; taken with no other lock held */
	pthread_mutex_t tail_lock;
	pthread_mutex_t mf_lock;	/* leaf: mf[], nmf */
	struct fs_lt_manifest mf[LT_MANIFESTS_MAX];	/* [mf_lock] */
	int nmf;			/* [mf_lock] */
};

static enum lifetime_kind kind_of(const char *name)
{
	if (lifetime_is_table(name))
		return LIFETIME_KIND_TABLE;
	if (lifetime_is_wal(name))
		return LIFETIME_KIND_WAL;
	return LIFETIME_KIND_OTHER;
}

/* The class in in's user.zonefuse.lifetime value, or -1. */
static int xattr_class(struct fs_inode *in)
{
	struct fs_xattr *x = in ? fs_xattr_find(in, FS_XATTR_LIFETIME) : NULL;
	enum lifetime_class cls;

	return x && fs_xattr_lifetime_parse(x->value, x->size, &cls) == 0 ? (int)cls : -1;
}

/* Parse the rules file at path into *out (errors are logged): 0 or -errno
 * (-EINVAL for a bad line, -EFBIG past HINTS_MAX_BYTES). */
static int load_rules(const char *path, struct lifetime_rules **out)
{
	unsigned int bad = 0;
	char *text;
	ssize_t n;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		zf_err("hints file %s: %s", path, strerror(-ret));
		return ret;
	}
	text = malloc(HINTS_MAX_BYTES + 1);
	if (!text) {
		close(fd);
		return -ENOMEM;
	}
	n = read(fd, text, HINTS_MAX_BYTES + 1);
	ret = n < 0 ? -errno : 0;
	close(fd);
	if (!ret && n > HINTS_MAX_BYTES) {
		zf_err("hints file %s: larger than %u bytes", path, HINTS_MAX_BYTES);
		ret = -EFBIG;
	}
	if (!ret) {
		text[n] = 0;
		ret = lifetime_rules_parse(text, out, &bad);
		if (ret == -EINVAL)
			zf_err("hints file %s, line %u: expected \"GLOB CLASS\" with CLASS one of none, short, medium, long, extreme",
			       path, bad);
	} else if (ret != -EFBIG) {
		zf_err("hints file %s: %s", path, strerror(-ret));
	}
	free(text);
	if (!ret)
		zf_info("lifetime rules: %zu from %s", lifetime_rules_count(*out), path);
	return ret;
}

static int level_of_class(uint8_t cls)
{
	switch (cls) {
	case LIFETIME_SHORT: return 0;
	case LIFETIME_MEDIUM: return 1;
	case LIFETIME_LONG: return 2;
	case LIFETIME_EXTREME: return 3;
	default: return -1;
	}
}

/* Follow the file if it is a RocksDB/LevelDB MANIFEST (read from its
 * start by fs_lifetime_tail_manifests).  Anyone may name a file so, so a
 * full table does not turn a database's new MANIFEST away: it replaces
 * the one that has been of no use longest (never named a table of its
 * directory: a copy, a stray, a fake), unless every one was of use within
 * LT_MF_KEEP_NS.  fs->lt set. */
static void mf_follow(struct fs *fs, const char *name, uint64_t ino, uint64_t dir)
{
	if (strncmp(name, "MANIFEST-", 9) != 0)
		return;
	struct fs_lt *lt = fs->lt;
	uint64_t now = zf_now_ns();

	pthread_mutex_lock(&lt->mf_lock);
	int at = lt->nmf;
	if (at == (int)ZF_ARRAY_SIZE(lt->mf)) {
		at = 0;
		for (int i = 1; i < lt->nmf; i++)
			if (lt->mf[i].useful_ns < lt->mf[at].useful_ns)
				at = i;
		if (lt->mf[at].useful_ns && now - lt->mf[at].useful_ns < LT_MF_KEEP_NS)
			at = -1;
	} else {
		lt->nmf++;
	}
	if (at >= 0)
		lt->mf[at] = (struct fs_lt_manifest){ ino, dir, 0, 0 };
	pthread_mutex_unlock(&lt->mf_lock);
}

/* Files that exist already: tables keep the level their class says (when
 * the class was inferred), WALs count as live WALs, MANIFESTs are
 * followed. */
static void adopt_existing(struct fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	for (size_t b = 0; b < fs->dtab_size; b++) {
		for (struct fs_dirent *d = fs->dtab[b]; d; d = d->hnext) {
			struct fs_inode *in = fs_inode_get(fs, d->ino);
			enum lifetime_kind k = kind_of(d->name);

			if (in && S_ISREG(in->mode))
				mf_follow(fs, d->name, in->ino, d->parent);
			if (!in || !S_ISREG(in->mode) || k == LIFETIME_KIND_OTHER)
				continue;
			lifetime_infer_adopt(fs->lt->infer, in->ino, k,
					     in->cls_src == LIFETIME_SRC_INFERRED
						     ? level_of_class(in->cls) : -1,
					     fs->user_bytes, in->size);
		}
	}
	pthread_mutex_unlock(&fs->lock);
}

int fs_lifetime_init(struct fs *fs)
{
	struct fs_lt *lt = calloc(1, sizeof(*lt));
	int ret;

	if (!lt)
		return -ENOMEM;
	if (fs->opts.hints_file && *fs->opts.hints_file) {
		ret = load_rules(fs->opts.hints_file, &lt->rules);
		if (ret) {
			free(lt);
			return ret;
		}
	}
	lt->infer = lifetime_infer_new();
	if (!lt->infer) {
		lifetime_rules_free(lt->rules);
		free(lt);
		return -ENOMEM;
	}
	pthread_mutex_init(&lt->mf_lock, NULL);
	pthread_mutex_init(&lt->tail_lock, NULL);
	fs->lt = lt;
	adopt_existing(fs);
	return 0;
}

void fs_lifetime_fini(struct fs *fs)
{
	struct fs_lt *lt = fs->lt;

	if (!lt)
		return;
	pthread_mutex_destroy(&lt->mf_lock);
	pthread_mutex_destroy(&lt->tail_lock);
	lifetime_infer_free(lt->infer);
	lifetime_rules_free(lt->rules);
	free(lt);
	fs->lt = NULL;
}

/* Path of dir/name relative to the root, for rules with '/' ([L]): a
 * step per ancestor, each directory knowing its own entry.  Returns false
 * if it does not fit. */
static bool rel_path(struct fs *fs, struct fs_inode *dir, const char *name,
		     char *buf, size_t size)
{
	size_t len = strlen(name);
	uint64_t ino = dir->ino;

	if (len + 1 > size)
		return false;
	memmove(buf + size - len - 1, name, len + 1);
	size_t pos = size - len - 1;
	for (int depth = 0; ino != FS_ROOT_INO && depth < 256; depth++) {
		struct fs_inode *d = fs_inode_get(fs, ino);
		const struct fs_dirent *self = d && d->dir ? d->dir->self : NULL;

		if (!self || self->ino != ino || self->parent != d->dir->parent)
			return false;
		const char *comp = self->name;
		size_t cl = strlen(comp);
		if (cl + 1 > pos)
			return false;
		buf[--pos] = '/';
		pos -= cl;
		memcpy(buf + pos, comp, cl);
		ino = d->dir->parent;
	}
	memmove(buf, buf + pos, size - pos);
	return true;
}

static uint64_t size_of(void *arg, uint64_t file)
{
	struct fs_inode *in = fs_inode_get(arg, file);	/* fs->lock held */

	return in ? in->size : 0;
}

void fs_lifetime_pick(struct fs *fs, struct fs_inode *dir, const char *name,
		      const struct fs_ctx *ctx, struct fs_inode *in)
{
	struct lifetime_facts f = {
		.forced = fs->opts.placement_off,
		.file_xattr = -1,
		.dir_xattr = xattr_class(dir),
		.rule = -1,
		.name = name,
		.level = -1,
	};
	struct lifetime_guess g = { .level = -1 };
	uint8_t map[LIFETIME_MAX_LEVELS];
	enum lifetime_class cls;
	enum lifetime_source src;
	enum lifetime_kind kind = S_ISREG(in->mode) ? kind_of(name) : LIFETIME_KIND_OTHER;
	struct fs_lt *lt = fs->lt;

	if (lt && lt->rules) {
		char path[4096];
		bool have = lifetime_rules_need_path(lt->rules) &&
			    rel_path(fs, dir, name, path, sizeof(path));

		f.rule = lifetime_rules_match(lt->rules, name, have ? path : NULL);
	}
	/* Infer even when a stronger source decides: the state must see
	 * every table (and the accuracy is measured in all modes). */
	if (lt && kind == LIFETIME_KIND_TABLE && lifetime_is_leveldb_table(name))
		lifetime_infer_leveldb(lt->infer);
	if (lt && kind != LIFETIME_KIND_OTHER)
		lifetime_infer_create(lt->infer, in->ino, kind, ctx ? ctx->tid : 0,
				      zf_now_ns(), fs->user_bytes, size_of, fs, &g);
	if (kind == LIFETIME_KIND_TABLE) {
		f.level = g.level;
		lifetime_infer_level_classes(lt ? lt->infer : NULL, map);
		f.level_class = map;
	}
	src = lifetime_decide(&f, &cls);
	in->cls = (uint8_t)cls;
	in->cls_src = (uint8_t)src;
	if (lt && S_ISREG(in->mode))
		mf_follow(fs, name, in->ino, dir->ino);
	if (kind == LIFETIME_KIND_TABLE)
		zf_dbg("lifetime: create %s ino %llu tid %u level %d why %s job %llu -> %s/%s",
		       name, (unsigned long long)in->ino, ctx ? ctx->tid : 0, g.level,
		       lifetime_why_name(g.why), (unsigned long long)g.job,
		       lifetime_class_name(cls), lifetime_source_name(src));
}

/* A file whose class was inferred takes cls (its table's level changed;
 * GC moves its data later); a class from a stronger source stays. [L] */
static void follow_class(struct fs_inode *o, uint8_t cls)
{
	if (o && o->cls_src == LIFETIME_SRC_INFERRED && o->cls != cls) {
		o->cls = cls;
		o->attr_dirty = true;
	}
}

/* Log the level -> class map at debug level when it differs from the one
 * logged last. [L] */
static void log_level_classes(struct fs_lt *lt, const uint8_t map[LIFETIME_MAX_LEVELS])
{
	struct lifetime_infer_stats st;
	char b[256];
	int k = 0;

	if (memcmp(map, lt->map_logged, sizeof(lt->map_logged)) == 0)
		return;
	memcpy(lt->map_logged, map, sizeof(lt->map_logged));
	lifetime_infer_get_stats(lt->infer, &st);
	k += snprintf(b + k, sizeof(b) - (size_t)k, "wal %llu/%.1f",
		      (unsigned long long)st.wal.n, st.wal.log2_life);
	for (int l = 0; l < 5 && k < (int)sizeof(b); l++)
		k += snprintf(b + k, sizeof(b) - (size_t)k, ", L%d %s %llu/%.1f", l,
			      lifetime_class_name(map[l]),
			      (unsigned long long)st.level[l].n, st.level[l].log2_life);
	zf_dbg("lifetime: level classes now (deaths/log2 lifetime in bytes): %s", b);
}

void fs_lifetime_note_release(struct fs *fs, struct fs_inode *in)
{
	if (fs->lt && S_ISREG(in->mode) && in->nlink)
		lifetime_infer_seal(fs->lt->infer, in->ino, in->size);
}

void fs_lifetime_note_unlink(struct fs *fs, struct fs_inode *in, uint32_t tid)
{
	struct lifetime_fix fixes[LIFETIME_MAX_FIXES];
	uint8_t map[LIFETIME_MAX_LEVELS];
	struct fs_lt *lt = fs->lt;
	size_t n;

	if (!lt || !in || !S_ISREG(in->mode))
		return;
	pthread_mutex_lock(&lt->mf_lock);
	for (int i = 0; i < lt->nmf; i++)
		if (lt->mf[i].ino == in->ino)
			lt->mf[i--] = lt->mf[--lt->nmf];
	pthread_mutex_unlock(&lt->mf_lock);
	n = lifetime_infer_unlink(lt->infer, in->ino, tid, zf_now_ns(), fs->user_bytes, fixes);
	lifetime_infer_level_classes(lt->infer, map);
	log_level_classes(lt, map);
	for (size_t i = 0; i < n; i++) {
		int l = ZF_MIN(fixes[i].new_level, LIFETIME_MAX_LEVELS - 1);

		zf_dbg("lifetime: fix ino %llu level %d -> %d -> %s",
		       (unsigned long long)fixes[i].file, fixes[i].old_level,
		       fixes[i].new_level, lifetime_class_name(map[l]));
		follow_class(fs_inode_get(fs, fixes[i].file), map[l]);
	}
}

/* ---- MANIFEST tailing ---- */

struct mf_entry { int level; uint64_t number; };
struct mf_collect { struct mf_entry *v; size_t n, cap; };

static void mf_collect_fn(void *arg, enum lifetime_manifest_op op, int level,
			  uint64_t number)
{
	struct mf_collect *c = arg;

	if (op != LIFETIME_MF_NEW)
		return;
	struct mf_entry *nv = zf_grow(c->v, &c->cap, c->n + 1, sizeof(*nv), 64);
	if (!nv)
		return;
	c->v = nv;
	c->v[c->n++] = (struct mf_entry){ level, number };
}

/* Apply exact levels to the tables of directory dir: how many of its
 * tables were named.  [L] */
static size_t mf_apply(struct fs *fs, uint64_t dir, const struct mf_collect *c)
{
	size_t found = 0;
	uint8_t map[LIFETIME_MAX_LEVELS];

	lifetime_infer_level_classes(fs->lt->infer, map);
	for (size_t i = 0; i < c->n; i++) {
		static const char *const ext[] = { "sst", "ldb" };
		struct lifetime_fix fx;

		for (size_t e = 0; e < ZF_ARRAY_SIZE(ext); e++) {
			char name[40];
			struct fs_dirent *d;
			struct fs_inode *o;
			int l;

			snprintf(name, sizeof(name), "%06llu.%s",
				 (unsigned long long)c->v[i].number, ext[e]);
			d = fs_dirent_find(fs, dir, name);
			if (!d || !(o = fs_inode_get(fs, d->ino)))
				continue;
			found++;
			if (lifetime_infer_set_level(fs->lt->infer, o->ino, c->v[i].level, &fx)) {
				l = ZF_MIN(fx.new_level, LIFETIME_MAX_LEVELS - 1);
				zf_dbg("lifetime: exact ino %llu level %d -> %d -> %s",
				       (unsigned long long)o->ino, fx.old_level, fx.new_level,
				       lifetime_class_name(map[l]));
				follow_class(o, map[l]);
			}
			break;
		}
	}
	return found;
}

#define MF_READ_MAX (4u << 20)	/* bytes read per MANIFEST per pass */

/* Parse what was appended to the MANIFEST m since m->pos (at most
 * MF_READ_MAX bytes) and apply the exact levels it gives.  Returns 1 and
 * sets *pos to the offset parsed up to and *useful when it named a table
 * of its directory, or 0 when nothing was read (file gone, no new bytes,
 * no memory, read error).  lt->tail_lock held, no other lock. */
static int tail_one(struct fs *fs, const struct fs_lt_manifest *m, uint64_t *pos,
		    bool *useful)
{
	struct mf_collect c = { 0 };
	struct fs_inode *in;
	uint64_t size = 0;
	uint8_t *buf;
	ssize_t got;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_get(fs, m->ino);
	if (in)
		size = in->size;
	pthread_mutex_unlock(&fs->lock);
	if (!in || size <= m->pos)
		return 0;
	size = ZF_MIN(size, m->pos + MF_READ_MAX);
	buf = malloc(size - m->pos);
	if (!buf)
		return 0;
	got = fs_read(fs, m->ino, m->pos, size - m->pos, buf);
	if (got <= 0) {
		free(buf);
		return 0;
	}
	*pos = lifetime_manifest_parse(buf, (size_t)got, m->pos, mf_collect_fn, &c);
	free(buf);
	*useful = false;
	if (c.n) {
		pthread_mutex_lock(&fs->lock);
		*useful = mf_apply(fs, m->dir, &c) > 0;
		pthread_mutex_unlock(&fs->lock);
	}
	free(c.v);
	return 1;
}

void fs_lifetime_tail_manifests(struct fs *fs)
{
	struct fs_lt *lt = fs->lt;
	struct fs_lt_manifest mf[LT_MANIFESTS_MAX];
	int n;

	if (!lt)
		return;
	pthread_mutex_lock(&lt->tail_lock);
	pthread_mutex_lock(&lt->mf_lock);
	n = lt->nmf;
	memcpy(mf, lt->mf, sizeof(mf[0]) * (size_t)n);
	pthread_mutex_unlock(&lt->mf_lock);
	for (int i = 0; i < n; i++) {
		uint64_t pos;
		bool useful;

		if (!tail_one(fs, &mf[i], &pos, &useful))
			continue;
		pthread_mutex_lock(&lt->mf_lock);
		for (int k = 0; k < lt->nmf; k++) {
			if (lt->mf[k].ino != mf[i].ino)
				continue;
			lt->mf[k].pos = pos;
			if (useful)
				lt->mf[k].useful_ns = zf_now_ns();
		}
		pthread_mutex_unlock(&lt->mf_lock);
	}
	pthread_mutex_unlock(&lt->tail_lock);
}

void fs_note_read(struct fs *fs, uint64_t ino, uint32_t tid, uint64_t bytes)
{
	if (fs->lt && tid)
		lifetime_infer_read(fs->lt->infer, ino, tid, bytes, zf_now_ns());
}

static void fs_lifetime_get_stats(struct fs *fs, struct lifetime_infer_stats *st)
{
	lifetime_infer_get_stats(fs->lt ? fs->lt->infer : NULL, st);
}

void fs_lifetime_fill_stats(struct fs *fs, struct fs_stats *st)
{
	struct lifetime_infer_stats ls;

	fs_lifetime_get_stats(fs, &ls);
	st->lifetime_tables = ls.tables;
	st->lifetime_tables_corrected = ls.tables_corrected;
	st->lifetime_tables_died = ls.tables_died;
	st->lifetime_table_bytes_died = ls.bytes_died;
	st->lifetime_tables_misguessed = ls.tables_misguessed;
	st->lifetime_misguessed_bytes = ls.bytes_misguessed;
}

int fs_lifetime_level(struct fs *fs, uint64_t ino)
{
	return lifetime_infer_level(fs->lt ? fs->lt->infer : NULL, ino);
}
