/* fs_repair — the repairing fsck and the mount's read-only fallback (the
 * contract is in fs_repair.h; the CLI is tools/fsck.c).
 *
 * The repairs work on the replayed state in memory, after replay and
 * before the zone allocator counts anything, in this order:
 *   1. the next inode number above every inode;
 *   2. a root directory;
 *   3. names: a name whose inode is missing is removed; a directory keeps
 *      one name (its own, dir->self) and the root none;
 *   4. reachability: an inode with a link count but no name, and then a
 *      directory no path from the root reaches (a cycle), is linked into
 *      /lost+found as "#INO";
 *   5. link counts from the names (files: names; directories: 2 +
 *      subdirectories);
 *   6. extents: one outside the data zones, in a zone the log holds, not
 *      block-aligned or crossing a zone is dropped; the part of one beyond
 *      its zone's write pointer or capacity is dropped; the part beyond the
 *      file's size (rounded up to the block) is dropped.
 * What the mount then does completes them: unlinked inodes are freed, the
 * zones' valid bytes and the shared-extent table are counted from the
 * extent maps, and (read-write) data zones no extent references are reset;
 * the mount snapshot writes the result as a new epoch.
 *
 * fs_fsck runs a check pass (read-only mount with the repairs in memory:
 * what they change is what -y would write), and for -p/-y, if needed, a
 * read-write mount with them, then a check pass again.  The check and the
 * repair replay with MLOG_OPEN_SALVAGE (past damaged stretches, lost zone
 * headers made again from their SNAP_BEGIN, the newest epoch that began
 * when none is complete) and skip each record they cannot apply; a plain
 * mount stops at the first and falls back to read-only.  When nothing at
 * all can be read (no header, record or epoch), -y re-creates an empty
 * file system with the superblock's layout.
 */
#include "fs/fs_repair.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

#define MAX_DETAIL_REPORTS 200	/* problems reported one by one; then counted */
#define PATH_DEPTH 64		/* path components shown in a report */

static const struct {
	const char *name;
	bool preen;		/* -p may fix it: nothing is lost by the fix */
	const char *fix;
} prob[FS_PR_NR] = {
	[FS_PR_LOG_CUT] = { "log-cut", false,
		"that record is dropped, and every later one that depends on it" },
	[FS_PR_SALVAGE] = { "snapshot-damaged", false,
		"the records before the damage are kept, the rest dropped" },
	[FS_PR_LOG_DAMAGED] = { "log-damaged", false,
		"the damaged stretch is skipped, the valid records after it are replayed" },
	[FS_PR_NO_ROOT] = { "no-root", false, "an empty root directory is made" },
	[FS_PR_NAME_DANGLING] = { "dangling-name", true, "the name is removed" },
	[FS_PR_DIR_NAMES] = { "directory-names", false, "the extra name is removed" },
	[FS_PR_UNREACHABLE] = { "unreachable", true, "linked into /lost+found" },
	[FS_PR_NLINK] = { "link-count", true, "set from the names" },
	[FS_PR_EXTENT_BAD] = { "bad-extent", false, "those bytes are dropped (a hole)" },
	[FS_PR_EXTENT_PAST_SIZE] = { "extent-past-size", true,
		"the part past the size is dropped" },
	[FS_PR_NEXT_INO] = { "next-inode", true, "raised past the highest inode" },
	[FS_PR_CHECK] = { "check", true, "recounted from the extent maps by the repair" },
	[FS_PR_RECREATE] = { "no-metadata", false,
		"an empty file system is made: every file is lost" },
};

static void problem(struct fs_repair *r, enum fs_problem p, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void problem(struct fs_repair *r, enum fs_problem p, const char *fmt, ...)
{
	char msg[700];
	va_list ap;

	r->found++;
	r->count[p]++;
	if (!prob[p].preen)
		r->unsafe++;
	if (r->quiet || !r->report)
		return;
	if (r->found > MAX_DETAIL_REPORTS) {
		if (r->found == MAX_DETAIL_REPORTS + 1)
			r->report(r->arg, "(more problems: counted, not listed)");
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	const char *how = r->asked == FS_FSCK_CHECK ? "would be fixed: " :
			  r->asked == FS_FSCK_PREEN && !prob[p].preen ? "needs -y: " : "fixing: ";
	r->report(r->arg, "[%s] %s: %s%s", prob[p].name, msg, how, prob[p].fix);
}

/* ---- reporting helpers ---- */

/* "/a/b" for directory ino (its own names, up the self chain). */
static void dir_path(struct fs *fs, uint64_t ino, char *buf, size_t size)
{
	const char *comp[PATH_DEPTH];
	int n = 0;
	struct fs_inode *in = fs_inode_get(fs, ino);

	while (in && in->ino != FS_ROOT_INO && in->dir && in->dir->self && n < PATH_DEPTH) {
		comp[n++] = in->dir->self->name;
		in = fs_inode_get(fs, in->dir->self->parent);
	}
	size_t at = 0;
	buf[0] = 0;
	if (in && in->ino != FS_ROOT_INO)
		at += (size_t)snprintf(buf, size, "<inode %llu>", (unsigned long long)in->ino);
	while (n-- > 0 && at < size)
		at += (size_t)snprintf(buf + at, size - at, "/%s", comp[n]);
	if (!buf[0])
		snprintf(buf, size, "/");
}

static void name_path(struct fs *fs, const struct fs_dirent *d, char *buf, size_t size)
{
	char dir[512];
	dir_path(fs, d->parent, dir, sizeof(dir));
	snprintf(buf, size, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", d->name);
}

/* A path of inode `in` ("inode N" when it has no name): its first name
 * found.  O(names): only for the problems reported one by one. */
static const char *ino_path(struct fs *fs, const struct fs_repair *r,
			    const struct fs_inode *in, char *buf, size_t size)
{
	snprintf(buf, size, "inode %llu", (unsigned long long)in->ino);
	if (r->quiet || r->found >= MAX_DETAIL_REPORTS)
		return buf;
	if (in->dir) {
		if (in->ino == FS_ROOT_INO || in->dir->self)
			dir_path(fs, in->ino, buf, size);
		return buf;
	}
	for (size_t b = 0; b < fs->dtab_size; b++)
		for (struct fs_dirent *d = fs->dtab[b]; d; d = d->hnext)
			if (d->ino == in->ino) {
				name_path(fs, d, buf, size);
				return buf;
			}
	return buf;
}

static const char *kind(const struct fs_inode *in)
{
	return in->dir ? "directory" : S_ISREG(in->mode) ? "file" :
	       S_ISLNK(in->mode) ? "symlink" : "special file";
}

/* ---- a set of inode numbers (open addressing) ---- */

struct iset { uint64_t *v; size_t cap, n; };

static int iset_init(struct iset *s, size_t expect)
{
	s->cap = 64;
	while (s->cap < expect * 2 + 2)
		s->cap *= 2;
	s->n = 0;
	s->v = calloc(s->cap, sizeof(*s->v));
	return s->v ? 0 : -ENOMEM;
}

static bool iset_has(const struct iset *s, uint64_t ino)
{
	for (size_t i = (ino * 0x9E3779B97F4A7C15ull) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->v[i] == ino)
			return true;
		if (!s->v[i])
			return false;
	}
}

/* Inode numbers are never 0; the set is sized for every inode. */
static void iset_add(struct iset *s, uint64_t ino)
{
	size_t i = (ino * 0x9E3779B97F4A7C15ull) & (s->cap - 1);
	while (s->v[i] && s->v[i] != ino)
		i = (i + 1) & (s->cap - 1);
	if (!s->v[i])
		s->n++;
	s->v[i] = ino;
}

/* ---- the repairs ---- */

/* A new empty directory, named `name` in parent (parent NULL: the root). */
static struct fs_inode *new_dir(struct fs *fs, uint64_t ino, struct fs_inode *parent,
				const char *name, uint32_t perm)
{
	struct fs_attr a = { .ino = ino, .mode = S_IFDIR | perm, .nlink = 2 };
	struct fs_inode *in;

	a.atime = a.mtime = a.ctime = fs_now();
	a.cls = LIFETIME_MEDIUM;
	if (fs_inode_prepare(fs, &a, parent ? parent->ino : ino, NULL, &in))
		return NULL;
	if (!parent) {
		fs_inode_insert(fs, in);
		return in;
	}
	struct fs_dirent *d = fs_dirent_alloc(fs, parent, name, ino);
	if (!d) {
		fs_inode_discard(fs, in);
		return NULL;
	}
	fs_inode_insert(fs, in);
	fs_apply_dirent(fs, parent, in, d);
	parent->nlink++;
	if (ino >= fs->next_ino)
		fs->next_ino = ino + 1;
	return in;
}

static int fix_next_ino(struct fs *fs, struct fs_repair *r)
{
	uint64_t max = FS_ROOT_INO;
	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in))
		max = ZF_MAX(max, in->ino);
	if (fs->next_ino <= max) {
		problem(r, FS_PR_NEXT_INO, "next inode number %llu, inode %llu exists",
			(unsigned long long)fs->next_ino, (unsigned long long)max);
		fs->next_ino = max + 1;
	}
	return 0;
}

static int fix_root(struct fs *fs, struct fs_repair *r)
{
	struct fs_inode *root = fs_inode_get(fs, FS_ROOT_INO);
	if (root && root->dir)
		return 0;
	if (root) {
		/* replay never changes a type: this is a damaged state */
		problem(r, FS_PR_NO_ROOT, "inode 1 is a %s, not a directory", kind(root));
		fs_inode_destroy(fs, root);
	} else {
		problem(r, FS_PR_NO_ROOT, "no root directory");
	}
	return new_dir(fs, FS_ROOT_INO, NULL, NULL, 0755) ? 0 : -ENOMEM;
}

/* Every name, collected first: removing names changes the table. */
static struct fs_dirent **all_names(struct fs *fs, size_t *n)
{
	struct fs_dirent **v = malloc((fs->ndirents + 1) * sizeof(*v));
	*n = 0;
	if (!v)
		return NULL;
	for (size_t b = 0; b < fs->dtab_size; b++)
		for (struct fs_dirent *d = fs->dtab[b]; d && *n <= fs->ndirents; d = d->hnext)
			v[(*n)++] = d;
	return v;
}

static int fix_names(struct fs *fs, struct fs_repair *r)
{
	size_t n;
	struct fs_dirent **v = all_names(fs, &n);
	char path[1024];

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct fs_dirent *d = v[i];
		struct fs_inode *dir = fs_inode_get(fs, d->parent);
		struct fs_inode *in = fs_inode_get(fs, d->ino);
		if (!dir || !dir->dir)
			continue;	/* names live in their directory: cannot happen */
		if (!in) {
			name_path(fs, d, path, sizeof(path));
			problem(r, FS_PR_NAME_DANGLING, "%s names inode %llu, which does not exist",
				path, (unsigned long long)d->ino);
			r->lost_names++;
			fs_dirent_remove(fs, dir, d);
			continue;
		}
		if (!in->dir)
			continue;
		if (in->ino != FS_ROOT_INO && !in->dir->self) {
			in->dir->self = d;
			in->dir->parent = d->parent;
			continue;
		}
		if (in->ino == FS_ROOT_INO || in->dir->self != d) {
			name_path(fs, d, path, sizeof(path));
			problem(r, FS_PR_DIR_NAMES, "%s is another name of directory %llu", path,
				(unsigned long long)in->ino);
			r->lost_names++;
			fs_dirent_remove(fs, dir, d);
		}
	}
	free(v);
	return 0;
}

/* Mark ino and everything below it reached. */
static int mark_from(struct fs *fs, struct iset *seen, uint64_t ino)
{
	size_t cap = 64, n = 0;
	uint64_t *stack = malloc(cap * sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	iset_add(seen, ino);
	stack[n++] = ino;
	while (n) {
		struct fs_inode *in = fs_inode_get(fs, stack[--n]);
		if (!in || !in->dir)
			continue;
		for (size_t i = 0; i < in->dir->n; i++) {
			struct fs_dirent *d = in->dir->ents[i];
			if (!d || iset_has(seen, d->ino))
				continue;
			iset_add(seen, d->ino);
			if (n == cap) {
				uint64_t *s = zf_grow(stack, &cap, n + 1, sizeof(*s), 64);
				if (!s) {
					free(stack);
					return -ENOMEM;
				}
				stack = s;
			}
			stack[n++] = d->ino;
		}
	}
	free(stack);
	return 0;
}

/* The target inode of every name, sorted (names of an inode: a run). */
uint64_t *fs_name_targets(struct fs *fs, size_t *n)
{
	uint64_t *t = malloc((fs->ndirents + 1) * sizeof(*t));
	*n = 0;
	if (!t)
		return NULL;
	for (size_t b = 0; b < fs->dtab_size; b++)
		for (struct fs_dirent *d = fs->dtab[b]; d && *n <= fs->ndirents; d = d->hnext)
			t[(*n)++] = d->ino;
	if (*n)
		qsort(t, *n, sizeof(*t), fs_cmp_u64);
	return t;
}

int fs_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint32_t fs_count_sorted(const uint64_t *t, size_t n, uint64_t v)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint32_t c = 0;
	while (lo < n && t[lo++] == v)
		c++;
	return c;
}

/* /lost+found, made when missing (or a free variant of the name). */
static struct fs_inode *lost_found(struct fs *fs)
{
	struct fs_inode *root = fs_inode_get(fs, FS_ROOT_INO);
	char name[32] = "lost+found";

	for (int i = 1; i < 100; i++) {
		struct fs_dirent *d = fs_dirent_find(fs, FS_ROOT_INO, name);
		if (!d)
			return new_dir(fs, fs->next_ino, root, name, 0700);
		struct fs_inode *in = fs_inode_get(fs, d->ino);
		if (in && in->dir)
			return in;
		snprintf(name, sizeof(name), "lost+found.%d", i);
	}
	return NULL;
}

/* Link `in` into lost+found as "#INO" (removing the name a cycle gave it). */
static int to_lost_found(struct fs *fs, struct fs_repair *r, struct iset *seen,
			 struct fs_inode **lf, struct fs_inode *in)
{
	char name[32];
	if (!*lf && !(*lf = lost_found(fs)))
		return -ENOMEM;
	if (!iset_has(seen, (*lf)->ino)) {
		int ret = mark_from(fs, seen, (*lf)->ino);
		if (ret)
			return ret;
	}
	if (in->dir && in->dir->self) {
		struct fs_inode *p = fs_inode_get(fs, in->dir->self->parent);
		if (p && p->dir) {
			fs_dirent_remove(fs, p, in->dir->self);
			p->nlink -= p->nlink > 2;
		}
	}
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)in->ino);
	for (int i = 1; fs_dirent_find(fs, (*lf)->ino, name) && i < 1000; i++)
		snprintf(name, sizeof(name), "#%llu.%d", (unsigned long long)in->ino, i);
	struct fs_dirent *d = fs_dirent_alloc(fs, *lf, name, in->ino);
	if (!d)
		return -ENOMEM;
	fs_apply_dirent(fs, *lf, in, d);
	if (in->dir)
		(*lf)->nlink++;
	r->linked++;
	return mark_from(fs, seen, in->ino);
}

static int fix_reachable(struct fs *fs, struct fs_repair *r)
{
	struct iset seen;
	struct fs_inode *lf = NULL;
	char buf[64];
	size_t nt;
	uint64_t *t = fs_name_targets(fs, &nt);
	int ret = t ? iset_init(&seen, fs->ninodes + 8) : -ENOMEM;

	if (ret) {
		free(t);
		return ret;
	}
	ret = mark_from(fs, &seen, FS_ROOT_INO);
	/* pass 1: inodes with no name; pass 2: directories in a cycle */
	for (int pass = 1; pass <= 2 && !ret; pass++) {
		for (struct fs_inode *in = fs_inode_first(fs); in && !ret;
		     in = fs_inode_next(fs, in)) {
			if (iset_has(&seen, in->ino) || in->nlink == 0)
				continue;
			bool named = in->dir ? in->dir->self != NULL : false;
			/* a file is unreachable with no name, or with names
			 * only in unreachable directories (pass 2 links those) */
			if (!in->dir)
				named = fs_count_sorted(t, nt, in->ino) > 0;
			if (pass == 1 && named)
				continue;
			if (pass == 2 && !in->dir)
				continue;
			snprintf(buf, sizeof(buf), "%llu bytes", (unsigned long long)in->size);
			problem(r, FS_PR_UNREACHABLE, "%s %llu (%s) is %s", kind(in),
				(unsigned long long)in->ino, in->dir ? "directory" : buf,
				named ? "in a directory cycle" : "not named anywhere");
			ret = to_lost_found(fs, r, &seen, &lf, in);
		}
	}
	free(seen.v);
	free(t);
	return ret;
}

static int fix_links(struct fs *fs, struct fs_repair *r)
{
	size_t n;
	uint64_t *t = fs_name_targets(fs, &n);

	if (!t)
		return -ENOMEM;
	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in)) {
		uint32_t want = fs_count_sorted(t, n, in->ino);
		if (in->dir) {
			if (in->nlink == 0 && !in->dir->self)
				continue;	/* removed while open: freed by the mount */
			want = 2;
			for (size_t i = 0; i < in->dir->n; i++) {
				struct fs_dirent *d = in->dir->ents[i];
				struct fs_inode *c = d ? fs_inode_get(fs, d->ino) : NULL;
				want += c && c->dir;
			}
		} else if (want == 0) {
			continue;	/* unlinked while open: freed by the mount */
		}
		if (in->nlink != want) {
			char path[1024];
			problem(r, FS_PR_NLINK, "%s %s: link count %u, %u expected", kind(in),
				ino_path(fs, r, in, path, sizeof(path)), in->nlink, want);
			in->nlink = want;
		}
	}
	free(t);
	return 0;
}

/* The zones' reports and the zones the log holds. */
struct zones {
	struct zdev_zone *z;
	bool *logz;
	uint32_t nz;
};

static int load_zones(struct fs *fs, struct zones *zs)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	zs->nz = g->nr_zones;
	zs->z = calloc(zs->nz, sizeof(*zs->z));
	zs->logz = calloc(zs->nz, sizeof(*zs->logz));
	uint32_t nlog = mlog_borrowed_zones(fs->mlog, NULL, 0);
	uint32_t *lz = calloc(nlog + 1, sizeof(*lz));
	int ret = -ENOMEM;
	if (zs->z && zs->logz && lz) {
		nlog = mlog_borrowed_zones(fs->mlog, lz, nlog);
		for (uint32_t i = 0; i < nlog; i++)
			if (lz[i] < zs->nz)
				zs->logz[lz[i]] = true;
		ret = zdev_report_zones(fs->dev, 0, zs->nz, zs->z);
		ret = ret < 0 ? ret : 0;
	}
	free(lz);
	return ret;
}

/* The bytes of extent e that may stay: [e->off, keep_to) of its file range
 * (empty: drop it all).  Returns why the rest may not, for the report
 * (NULL: all of it may stay). */
static const char *extent_keep(const struct fs *fs, const struct zones *zs,
			       const struct extmap_ext *e, uint64_t *keep_to,
			       char *why, size_t whylen)
{
	uint64_t zsz = zdev_geometry(fs->dev)->zone_size;
	uint32_t z = (uint32_t)(e->dev / zsz);
	*keep_to = e->off;
	if (e->off % fs->bs || e->len % fs->bs || e->dev % fs->bs || !e->len)
		return "not block-aligned";
	if (z < fs->sb.data_first || z >= fs->sb.data_first + fs->sb.data_count || z >= zs->nz)
		return "not in a data zone";
	if ((e->dev + e->len - 1) / zsz != z)
		return "crosses a zone boundary";
	if (zs->logz[z]) {
		snprintf(why, whylen, "zone %u is the metadata log's", z);
		return why;
	}
	const struct zdev_zone *zz = &zs->z[z];
	uint64_t end = ZF_MIN(zz->wp, zz->start + zz->capacity);
	if (zz->type != ZDEV_ZONE_SEQ || zz->cond == ZDEV_COND_OFFLINE) {
		snprintf(why, whylen, "zone %u is %s", z,
			 zz->type != ZDEV_ZONE_SEQ ? "not sequential" : "offline");
		return why;
	}
	*keep_to = e->off + (end <= e->dev ? 0 : ZF_MIN(e->len, ZF_ALIGN_DOWN(end - e->dev, fs->bs)));
	if (*keep_to == e->off + e->len)
		return NULL;
	snprintf(why, whylen, "zone %u %s, written up to +%llu, the extent at +%llu", z,
		 zdev_cond_name(zz->cond), (unsigned long long)(end > zz->start ? end - zz->start : 0),
		 (unsigned long long)(e->dev - zz->start));
	return why;
}

struct cut_range { uint64_t off, len; };

static int fix_extents(struct fs *fs, struct fs_repair *r)
{
	struct zones zs = { 0 };
	struct cut_range *cuts = NULL;
	size_t cap = 0;
	int ret = load_zones(fs, &zs);

	for (struct fs_inode *in = fs_inode_first(fs); in && !ret; in = fs_inode_next(fs, in)) {
		/* Unlinked while open: the mount frees it unread.  Its extents
		 * were dropped with no record when the last reference went, and
		 * their zones may have been reset since. */
		if (in->nlink == 0 && in->ino != FS_ROOT_INO)
			continue;
		size_t n = 0;
		uint64_t limit = ZF_ALIGN_UP(in->size, fs->bs);
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, 0, &c); e;
		     e = extmap_next(&in->map, &c)) {
			uint64_t keep_to, end = e->off + e->len;
			char why[96];
			const char *reason = extent_keep(fs, &zs, e, &keep_to, why, sizeof(why));
			char path[1024];
			if (keep_to < end) {
				problem(r, FS_PR_EXTENT_BAD, "%s %s: bytes %llu-%llu at device "
					"offset %llu lie outside the written data zones (%s)",
					kind(in), ino_path(fs, r, in, path, sizeof(path)),
					(unsigned long long)keep_to, (unsigned long long)end,
					(unsigned long long)e->dev, reason);
				r->lost_bytes += end - keep_to;
			}
			if (end > limit && keep_to > limit)
				problem(r, FS_PR_EXTENT_PAST_SIZE, "%s %s: extent up to %llu "
					"beyond its size %llu", kind(in),
					ino_path(fs, r, in, path, sizeof(path)),
					(unsigned long long)end, (unsigned long long)in->size);
			uint64_t from = ZF_MIN(keep_to, ZF_MAX(limit, e->off));
			if (from >= end)
				continue;
			if (n == cap) {
				struct cut_range *v = zf_grow(cuts, &cap, n + 1, sizeof(*v), 16);
				if (!v) {
					ret = -ENOMEM;
					break;
				}
				cuts = v;
			}
			cuts[n++] = (struct cut_range){ from, end - from };
		}
		for (size_t i = 0; i < n && !ret; i++)
			ret = extmap_punch(&in->map, cuts[i].off, cuts[i].len, fs_drop_valid, fs);
	}
	free(cuts);
	free(zs.z);
	free(zs.logz);
	return ret;
}

static int repair_memory(struct fs *fs, struct fs_repair *r)
{
	int ret = fix_next_ino(fs, r);
	if (!ret)
		ret = fix_root(fs, r);
	if (!ret)
		ret = fix_names(fs, r);
	if (!ret)
		ret = fix_reachable(fs, r);
	if (!ret)
		ret = fix_links(fs, r);
	if (!ret)
		ret = fix_extents(fs, r);
	return ret;
}

/* ---- the hooks of the mount ---- */

int fs_repair_replay_record(void *arg, uint16_t type, const void *payload,
			    uint32_t len, uint64_t lsn)
{
	struct fs *fs = arg;

	if (fs->cut.cut && !fs->repair) {
		fs->cut.skipped++;
		return 0;
	}
	int ret = fs_replay_record(fs, type, payload, len, lsn);
	if (ret != -EUCLEAN)
		return ret;
	if (!fs->cut.cut) {
		fs->cut.type = type;
		fs->cut.lsn = lsn;
	}
	fs->cut.cut = true;
	fs->cut.skipped++;
	return 0;
}

int fs_repair_open_log(struct fs *fs, unsigned int flags)
{
	/* a repair replays past damage (MLOG_OPEN_SALVAGE); a mount stops there */
	if (fs->repair)
		flags |= MLOG_OPEN_SALVAGE;
	struct mlog_sb hint = fs->sb;	/* probed, or mkfs's layout when none was */
	int ret = mlog_open_hint(fs->dev, flags, fs_repair_replay_record, fs, &hint, &fs->sb,
				 &fs->mlog);
	/* No complete epoch: the newest that began, up to its damage, when
	 * this mount may fall back (or is a repair). */
	if ((ret == -EUCLEAN || ret == -ENODATA) && fs->repair_fallback && fs->ninodes == 0)
		ret = mlog_open_hint(fs->dev, flags | MLOG_OPEN_SALVAGE, fs_repair_replay_record,
				     fs, &hint, &fs->sb, &fs->mlog);
	if (!ret) {
		struct mlog_open_info info;
		mlog_get_open_info(fs->mlog, &info);
		fs->cut.salvaged = info.epoch_incomplete;
	}
	return ret;
}

int fs_repair_after_replay(struct fs *fs)
{
	struct fs_repair quiet = { .mode = FS_FSCK_YES, .quiet = true };
	struct fs_repair *r = fs->repair ? fs->repair : &quiet;
	struct mlog_open_info info;

	mlog_get_open_info(fs->mlog, &info);
	if (!fs->repair && !fs->cut.cut && !fs->cut.salvaged && !fs->repair_fallback &&
	    !info.valid_after_tail)
		return 0;
	if (info.valid_after_tail)
		problem(r, FS_PR_LOG_DAMAGED, "replay stopped at a damaged record in zone %u "
			"(+%llu) with valid records after it", info.tail_zone,
			(unsigned long long)info.tail_offset);
	if (info.headers_rebuilt)
		problem(r, FS_PR_LOG_DAMAGED, "%u zone header(s) of the metadata log lost, made "
			"again from the records after them", info.headers_rebuilt);
	if (info.salvage_skips)
		problem(r, FS_PR_LOG_DAMAGED, "%llu damaged stretch(es) of the log skipped",
			(unsigned long long)info.salvage_skips);
	if (fs->cut.salvaged)
		problem(r, FS_PR_SALVAGE, "no epoch of the metadata log is complete; the "
			"newest was replayed up to its damage");
	if (fs->cut.cut) {
		problem(r, FS_PR_LOG_CUT, "log record %llu (type %u) cannot be applied; %llu "
			"record(s) %s", (unsigned long long)fs->cut.lsn, fs->cut.type,
			(unsigned long long)fs->cut.skipped,
			fs->repair ? "that cannot be applied are skipped" :
			"from it on are not replayed");
		r->lost_records += fs->cut.skipped;
	}
	int ret = repair_memory(fs, r);
	if (ret || fs->repair || !r->found)
		return ret;
	/* A plain mount of a damaged log: read-only, with that state. */
	fs->read_only = true;
	fs->opts.read_only = true;
	char b[32], why[256] = "";
	size_t at = 0;
	if (fs->cut.salvaged)
		at += (size_t)snprintf(why + at, sizeof(why) - at, "no snapshot complete; ");
	if (info.headers_rebuilt && at < sizeof(why))
		at += (size_t)snprintf(why + at, sizeof(why) - at, "%u zone header(s) lost; ",
				       info.headers_rebuilt);
	if (info.valid_after_tail && at < sizeof(why))
		at += (size_t)snprintf(why + at, sizeof(why) - at,
				       "valid records after a damaged one not replayed; ");
	if (info.salvage_skips && at < sizeof(why))
		at += (size_t)snprintf(why + at, sizeof(why) - at, "%llu damaged stretch(es) "
				       "skipped; ", (unsigned long long)info.salvage_skips);
	if (fs->cut.cut && at < sizeof(why))
		at += (size_t)snprintf(why + at, sizeof(why) - at,
				       "%llu record(s) from lsn %llu not applied; ",
				       (unsigned long long)fs->cut.skipped,
				       (unsigned long long)fs->cut.lsn);
	char note[1024];
	snprintf(note, sizeof(note), "%s: the metadata log is damaged (%s%d repair(s) in "
		 "memory, %s of file data dropped): mounted READ-ONLY with what could be "
		 "read; `fsck.zonefuse -y %s` would write that state, keep what it can after "
		 "the damage and make it writable again", zdev_path(fs->dev), why,
		 r->found, zf_fmt_bytes(r->lost_bytes, b, sizeof(b)), zdev_path(fs->dev));
	zf_err("%s", note);
	free(fs->mount_note);
	fs->mount_note = strdup(note);
	return 0;
}

const char *fs_mount_note(const struct fs *fs)
{
	return fs->mount_note;
}

/* ---- fsck ---- */

static void fsck_opts(struct fs_opts *o, bool read_only)
{
	fs_opts_default(o);
	o->read_only = read_only;
	o->commit_interval_ms = 0;
	/* a stripe unit that fits any supported zone (capacity >= 128 KiB,
	 * blocks <= 64 KiB), or small-zone devices could not be checked */
	o->stripe_unit = 64u << 10;
	o->prefetch_bytes = 0;
}

/* No metadata to salvage: an empty file system with the layout the
 * superblock (any valid copy) gives, else the default one. */
static int recreate(struct zdev *dev, struct fs_repair *r)
{
	struct mlog_sb sb;
	struct fs_mkfs_opts mo = { .force = true };
	char label[sizeof(sb.label) + 1] = "";

	if (mlog_probe(dev, &sb) == 0) {
		mo.meta_zones = sb.meta_count;
		memcpy(label, sb.label, sizeof(sb.label));
		mo.label = label[0] ? label : NULL;
	}
	problem(r, FS_PR_RECREATE, "no zone header or snapshot of the metadata log can be read");
	zf_info("fsck: re-creating the file system on %s", zdev_path(dev));
	return fs_mkfs(dev, &mo);
}

int fs_fsck(struct zdev *dev, enum fs_fsck_mode mode, bool verbose, fs_report_fn report,
	    void *arg, struct fs_fsck_result *res)
{
	struct fs_repair pass = { .mode = FS_FSCK_CHECK, .asked = mode, .report = report,
				  .arg = arg };
	int ret;

	memset(res, 0, sizeof(*res));
	ret = fs_check_pass(dev, &pass, verbose);
	res->found = pass.found;
	res->lost_bytes = pass.lost_bytes;
	res->lost_names = pass.lost_names;
	res->lost_records = pass.lost_records;
	bool unreadable = ret == -EUCLEAN;
	if (ret < 0 && !unreadable)
		return ret;
	if (unreadable) {
		report(arg, "[%s] the metadata log cannot be read at all: %s%s",
		       prob[FS_PR_RECREATE].name, mode == FS_FSCK_CHECK ? "would be fixed: " :
		       mode == FS_FSCK_PREEN ? "needs -y: " : "fixing: ", prob[FS_PR_RECREATE].fix);
		res->found++;
	}
	if (mode == FS_FSCK_CHECK || res->found == 0)
		return 0;
	if (mode == FS_FSCK_PREEN && (pass.unsafe || unreadable)) {
		res->needs_yes = true;
		return 0;
	}
	struct fs_repair fix = { .mode = mode, .quiet = true };
	if (unreadable) {
		ret = recreate(dev, &fix);
		res->recreated = true;
	} else {
		struct fs_opts o;
		struct fs *fs;
		fsck_opts(&o, false);
		ret = fs_mount_repair(dev, &o, &fix, &fs);
		if (!ret)
			ret = fs_unmount(fs);
	}
	if (ret) {
		zf_err("fsck: the repair failed: %s", strerror(-ret));
		return ret;
	}
	res->fixed = res->found;
	struct fs_repair after = { .mode = FS_FSCK_CHECK, .report = report, .arg = arg };
	ret = fs_check_pass(dev, &after, false);
	if (ret < 0)
		return ret;
	res->left = after.found;
	res->fixed = res->found - ZF_MIN(res->found, res->left);
	return 0;
}
