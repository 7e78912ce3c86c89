/* fs — the file system core: mkfs, mount/unmount, the inode table, names,
 * attributes and the commit thread.  Data I/O is in fs_data.c, records in
 * fs_records.c, xattrs in fs_xattr.c.  See fs.h for the model and locks.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

#define DEFAULT_META_ZONES 4
#define ACTIVE_RESERVED 2	/* meta log: current zone + a snapshot's */

int64_t fs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void fs_opts_default(struct fs_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->buffer_bytes = 256ull << 20;
	o->stripe_unit = 1u << 20;
	o->stripe_width = 4;
	o->commit_interval_ms = 5000;
	o->reorder_chunks = 8;
	o->prefetch_bytes = UINT64_MAX;	/* default: derived from the stripe */
	o->prefetch_limit = 256ull << 20;
	o->gc_mbps = 128;	/* lifetime GC (fs_gc.c) */
}

/* ---- inode table [L] ---- */

static size_t ihash(uint64_t ino, size_t size)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 17) & (size - 1);
}

struct fs_inode *fs_inode_get(struct fs *fs, uint64_t ino)
{
	for (struct fs_inode *in = fs->itab[ihash(ino, fs->itab_size)]; in; in = in->hnext)
		if (in->ino == ino)
			return in;
	return NULL;
}

static void itab_grow(struct fs *fs)
{
	size_t nsize = fs->itab_size * 2;
	struct fs_inode **nt = calloc(nsize, sizeof(*nt));
	if (!nt)
		return;	/* keep the old table; chains just get longer */
	for (size_t b = 0; b < fs->itab_size; b++) {
		struct fs_inode *in = fs->itab[b];
		while (in) {
			struct fs_inode *next = in->hnext;
			size_t h = ihash(in->ino, nsize);
			in->hnext = nt[h];
			nt[h] = in;
			in = next;
		}
	}
	free(fs->itab);
	fs->itab = nt;
	fs->itab_size = nsize;
}

/* An inode that is not in the table yet: an operation allocates it before
 * it logs its record, and fs_inode_insert() (which cannot fail) adds it
 * after; fs_inode_discard() frees it when the record could not be logged. */
struct fs_inode *fs_inode_alloc(struct fs *fs, uint64_t ino)
{
	struct fs_inode *in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->ino = ino;
	pthread_rwlock_init(&in->rw, NULL);
	pthread_mutex_init(&in->wb_lock, NULL);
	pthread_cond_init(&in->wb_cond, NULL);
	extmap_init(&in->map);
	in->map.boundary = zdev_geometry(fs->dev)->zone_size;
	return in;
}

void fs_inode_insert(struct fs *fs, struct fs_inode *in)
{
	if (fs->ninodes + 1 > fs->itab_size)
		itab_grow(fs);
	size_t h = ihash(in->ino, fs->itab_size);
	in->hnext = fs->itab[h];
	fs->itab[h] = in;
	fs->ninodes++;
}

struct fs_inode *fs_inode_new(struct fs *fs, uint64_t ino)
{
	struct fs_inode *in = fs_inode_alloc(fs, ino);
	if (in)
		fs_inode_insert(fs, in);
	return in;
}

static void dirty_unlink(struct fs *fs, struct fs_inode *in)
{
	if (!in->on_dirty)
		return;
	if (in->dprev) in->dprev->dnext = in->dnext; else fs->dirty_head = in->dnext;
	if (in->dnext) in->dnext->dprev = in->dprev; else fs->dirty_tail = in->dprev;
	in->dnext = in->dprev = NULL;
	in->on_dirty = false;
}

void fs_mark_dirty(struct fs *fs, struct fs_inode *in)
{
	if (in->on_dirty)
		return;
	in->on_dirty = true;
	in->dirty_since_ns = zf_now_ns();
	in->dprev = fs->dirty_tail;
	in->dnext = NULL;
	if (fs->dirty_tail) fs->dirty_tail->dnext = in; else fs->dirty_head = in;
	fs->dirty_tail = in;
}

/* Free what an inode owns, then the inode (out of the table already). */
static void inode_free(struct fs *fs, struct fs_inode *in)
{
	/* Buffers: nobody holds in->rw (no refs left) and no write-out is in
	 * flight (its caller holds a pin until it ended), so drop them. */
	fs_data_drop_buffers(fs, in, 0);
	fs_pf_free(fs, in);
	extmap_punch(&in->map, 0, UINT64_MAX, fs_drop_valid, fs);
	extmap_free(&in->map);
	if (in->dir) {
		free(in->dir->ents);
		free(in->dir);
	}
	free(in->symlink);
	fs_xattr_free_all(in);
	pthread_rwlock_destroy(&in->rw);
	pthread_mutex_destroy(&in->wb_lock);
	pthread_cond_destroy(&in->wb_cond);
	free(in);
}

static void inode_destroy(struct fs *fs, struct fs_inode *in)
{
	struct fs_inode **pp = &fs->itab[ihash(in->ino, fs->itab_size)];
	while (*pp && *pp != in)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = in->hnext;
	fs->ninodes--;
	dirty_unlink(fs, in);
	inode_free(fs, in);
}

void fs_inode_discard(struct fs *fs, struct fs_inode *in)
{
	if (in)
		inode_free(fs, in);
}

/* Free an inode nobody references (no name, no kernel lookup, not open). */
void fs_inode_maybe_free(struct fs *fs, struct fs_inode *in)
{
	if (in->nlink == 0 && in->nlookup == 0 && in->nopen == 0 && in->pins == 0 &&
	    in->ino != FS_ROOT_INO)
		inode_destroy(fs, in);
}

/* ---- names [L] ---- */

static uint32_t name_hash(uint64_t parent, const char *name)
{
	uint32_t h = 2166136261u ^ (uint32_t)(parent * 0x9E3779B1u);
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

struct fs_dirent *fs_dirent_find(struct fs *fs, uint64_t parent, const char *name)
{
	uint32_t h = name_hash(parent, name);
	for (struct fs_dirent *d = fs->dtab[h & (fs->dtab_size - 1)]; d; d = d->hnext)
		if (d->hash == h && d->parent == parent && strcmp(d->name, name) == 0)
			return d;
	return NULL;
}

static void dtab_grow(struct fs *fs)
{
	size_t nsize = fs->dtab_size * 2;
	struct fs_dirent **nt = calloc(nsize, sizeof(*nt));
	if (!nt)
		return;
	for (size_t b = 0; b < fs->dtab_size; b++) {
		struct fs_dirent *d = fs->dtab[b];
		while (d) {
			struct fs_dirent *next = d->hnext;
			d->hnext = nt[d->hash & (nsize - 1)];
			nt[d->hash & (nsize - 1)] = d;
			d = next;
		}
	}
	free(fs->dtab);
	fs->dtab = nt;
	fs->dtab_size = nsize;
}

/* A name that is not in its directory yet, with a slot reserved for it in
 * the directory's array, so that fs_dirent_insert() cannot fail: allocated
 * before an operation logs its record.  At most one reservation per
 * directory may be outstanding (free() an unused one). */
struct fs_dirent *fs_dirent_alloc(struct fs *fs, struct fs_inode *dir, const char *name,
				  uint64_t ino)
{
	struct fs_dir *dd = dir->dir;
	size_t len = strlen(name);
	struct fs_dirent *d;

	(void)fs;
	if (dd->n == dd->cap) {
		/* Compact removed slots first; grow only when mostly live. */
		if (dd->live < dd->n / 2) {
			size_t k = 0;
			for (size_t i = 0; i < dd->n; i++)
				if (dd->ents[i])
					dd->ents[k++] = dd->ents[i];
			dd->n = k;
		} else {
			size_t cap = dd->cap ? dd->cap * 2 : 16;
			struct fs_dirent **e = realloc(dd->ents, cap * sizeof(*e));
			if (!e)
				return NULL;
			dd->ents = e;
			dd->cap = cap;
		}
	}
	d = malloc(sizeof(*d) + len + 1);
	if (!d)
		return NULL;
	memcpy(d->name, name, len + 1);
	d->parent = dir->ino;
	d->ino = ino;
	d->cookie = 0;
	d->hash = name_hash(dir->ino, name);
	d->hnext = NULL;
	return d;
}

void fs_dirent_insert(struct fs *fs, struct fs_inode *dir, struct fs_dirent *d)
{
	struct fs_dir *dd = dir->dir;

	d->cookie = dd->next_cookie++;
	dd->ents[dd->n++] = d;
	dd->live++;
	if (fs->ndirents + 1 > fs->dtab_size)
		dtab_grow(fs);
	d->hnext = fs->dtab[d->hash & (fs->dtab_size - 1)];
	fs->dtab[d->hash & (fs->dtab_size - 1)] = d;
	fs->ndirents++;
}

int fs_dirent_add(struct fs *fs, struct fs_inode *dir, const char *name, uint64_t ino)
{
	struct fs_dirent *d = fs_dirent_alloc(fs, dir, name, ino);
	if (!d)
		return -ENOMEM;
	fs_dirent_insert(fs, dir, d);
	return 0;
}

static size_t dir_slot(const struct fs_dir *dd, uint64_t cookie)
{
	size_t lo = 0, hi = dd->n;	/* first slot with cookie >= `cookie` */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2, m = mid;
		while (m < hi && !dd->ents[m])
			m++;
		if (m == hi) {
			hi = mid;
			continue;
		}
		if (dd->ents[m]->cookie < cookie)
			lo = m + 1;
		else
			hi = mid;
	}
	return lo;
}

void fs_dirent_remove(struct fs *fs, struct fs_inode *dir, struct fs_dirent *d)
{
	struct fs_dir *dd = dir->dir;
	struct fs_dirent **pp = &fs->dtab[d->hash & (fs->dtab_size - 1)];

	while (*pp && *pp != d)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = d->hnext;
	fs->ndirents--;
	size_t i = dir_slot(dd, d->cookie);
	while (i < dd->n && dd->ents[i] != d)
		i++;
	if (i < dd->n) {
		dd->ents[i] = NULL;
		dd->live--;
	}
	while (dd->n && !dd->ents[dd->n - 1])
		dd->n--;
	free(d);
}

/* ---- attributes ---- */

void fs_fill_stat(struct fs *fs, const struct fs_inode *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_mode = in->mode;
	st->st_nlink = in->nlink;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_rdev = in->rdev;
	st->st_size = (off_t)in->size;
	if (in->symlink)
		st->st_size = (off_t)strlen(in->symlink);
	st->st_blksize = fs->opts.stripe_unit;
	uint64_t bytes = S_ISREG(in->mode) ? extmap_bytes(&in->map) + in->buffered : 0;
	st->st_blocks = (blkcnt_t)(bytes / 512);
	st->st_atim.tv_sec = in->atime / 1000000000;
	st->st_atim.tv_nsec = in->atime % 1000000000;
	st->st_mtim.tv_sec = in->mtime / 1000000000;
	st->st_mtim.tv_nsec = in->mtime % 1000000000;
	st->st_ctim.tv_sec = in->ctime / 1000000000;
	st->st_ctim.tv_nsec = in->ctime % 1000000000;
}

int fs_getattr(struct fs *fs, uint64_t ino, struct stat *st)
{
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (in)
		fs_fill_stat(fs, in, st);
	pthread_mutex_unlock(&fs->lock);
	return in ? 0 : -ENOENT;
}

int fs_lookup(struct fs *fs, uint64_t parent, const char *name, struct stat *st)
{
	int ret = 0;

	if (strlen(name) > FS_NAME_MAX)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *dir = fs_inode_get(fs, parent), *in = NULL;
	if (!dir) {
		ret = -ENOENT;
	} else if (!dir->dir) {
		ret = -ENOTDIR;
	} else if (strcmp(name, ".") == 0) {
		in = dir;
	} else if (strcmp(name, "..") == 0) {
		in = fs_inode_get(fs, dir->dir->parent);
	} else {
		struct fs_dirent *d = fs_dirent_find(fs, parent, name);
		in = d ? fs_inode_get(fs, d->ino) : NULL;
	}
	if (!ret && !in)
		ret = -ENOENT;
	if (!ret) {
		in->nlookup++;
		fs_fill_stat(fs, in, st);
	}
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

void fs_forget(struct fs *fs, uint64_t ino, uint64_t nlookup)
{
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (in) {
		in->nlookup = nlookup > in->nlookup ? 0 : in->nlookup - nlookup;
		fs_inode_maybe_free(fs, in);
	}
	pthread_mutex_unlock(&fs->lock);
}

static void kill_suidgid(uint32_t *mode)
{
	*mode &= ~(uint32_t)S_ISUID;
	if (*mode & S_IXGRP)
		*mode &= ~(uint32_t)S_ISGID;
}

int fs_setattr(struct fs *fs, uint64_t ino, const struct stat *attr,
	       unsigned int flags, struct stat *out)
{
	int ret = 0;
	struct fs_inode *in;

	if (fs->read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_get(fs, ino);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		return -ENOENT;
	}
	in->pins++;
	pthread_mutex_unlock(&fs->lock);

	if (flags & FS_SET_SIZE) {
		if (!S_ISREG(in->mode)) {
			ret = S_ISDIR(in->mode) ? -EISDIR : -EINVAL;
			goto unpin;
		}
		pthread_rwlock_wrlock(&in->rw);
		ret = fs_data_truncate(fs, in, (uint64_t)attr->st_size);
		pthread_rwlock_unlock(&in->rw);
		if (ret)
			goto unpin;
	}
	/* The new attributes are computed aside, logged, then applied. */
	pthread_mutex_lock(&fs->lock);
	struct fs_attr a;
	int64_t now = fs_now();
	fs_attr_get(in, &a);
	if (flags & FS_SET_MODE)
		a.mode = (a.mode & S_IFMT) | (attr->st_mode & 07777);
	if (flags & (FS_SET_UID | FS_SET_GID)) {
		if (flags & FS_SET_UID)
			a.uid = attr->st_uid;
		if (flags & FS_SET_GID)
			a.gid = attr->st_gid;
		if (!S_ISDIR(a.mode))	/* chown clears set-id bits */
			kill_suidgid(&a.mode);
	}
	if (flags & FS_SET_KILL_SUIDGID)
		kill_suidgid(&a.mode);
	if (flags & FS_SET_ATIME_NOW)
		a.atime = now;
	else if (flags & FS_SET_ATIME)
		a.atime = (int64_t)attr->st_atim.tv_sec * 1000000000 + attr->st_atim.tv_nsec;
	if (flags & FS_SET_MTIME_NOW)
		a.mtime = now;
	else if (flags & FS_SET_MTIME)
		a.mtime = (int64_t)attr->st_mtim.tv_sec * 1000000000 + attr->st_mtim.tv_nsec;
	if (flags & FS_SET_SIZE)
		a.mtime = now;
	a.ctime = now;
	/* Size changes are logged by fs_data_truncate; times alone are cheap
	 * to lose, so log the rest now only when something durable changed. */
	if (flags & (FS_SET_MODE | FS_SET_UID | FS_SET_GID | FS_SET_KILL_SUIDGID |
		     FS_SET_ATIME | FS_SET_MTIME)) {
		ret = fs_log_inode(fs, &a);
		if (!ret) {
			fs_apply_attr(fs, in, &a);
			in->attr_dirty = false;
		}
	} else {
		fs_apply_attr(fs, in, &a);
		in->attr_dirty = true;
	}
	if (!ret && out)
		fs_fill_stat(fs, in, out);
	pthread_mutex_unlock(&fs->lock);
unpin:
	pthread_mutex_lock(&fs->lock);
	in->pins--;
	fs_inode_maybe_free(fs, in);
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

/* ---- namespace operations ---- */

static int check_name(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || strchr(name, '/'))
		return -EINVAL;
	if (len > FS_NAME_MAX)
		return -ENAMETOOLONG;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EEXIST;
	return 0;
}

/* Validate, prepare the inode (attributes, lifetime class, directory,
 * target) and its name, log the one CREATE record, then apply it. */
static int make_node(struct fs *fs, uint64_t parent, const char *name,
		     mode_t mode, dev_t rdev, const char *target,
		     const struct fs_ctx *ctx, struct stat *out)
{
	struct fs_inode *in = NULL;
	struct fs_dirent *d = NULL;
	int ret = check_name(name);
	if (ret)
		return ret;
	if (target && strlen(target) >= 4096)
		return -ENAMETOOLONG;
	if (fs->read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *dir = fs_inode_get(fs, parent);
	if (!dir) {
		ret = -ENOENT;
		goto out;
	}
	if (!dir->dir || dir->nlink == 0) {
		ret = dir->dir ? -ENOENT : -ENOTDIR;
		goto out;
	}
	if (fs_dirent_find(fs, parent, name)) {
		ret = -EEXIST;
		goto out;
	}
	struct fs_attr a = {
		.ino = fs->next_ino,
		.mode = (uint32_t)mode,
		.uid = ctx ? ctx->uid : 0,
		.gid = ctx ? ctx->gid : 0,
		.nlink = S_ISDIR(mode) ? 2 : 1,
		.rdev = (uint64_t)rdev,
	};
	if (dir->mode & S_ISGID) {	/* BSD group semantics on setgid dirs */
		a.gid = dir->gid;
		if (S_ISDIR(mode))
			a.mode |= S_ISGID;
	}
	a.atime = a.mtime = a.ctime = fs_now();
	ret = fs_inode_prepare(fs, &a, parent, target, &in);
	if (ret)
		goto out;
	fs_lifetime_pick(fs, dir, name, ctx, in);
	d = fs_dirent_alloc(fs, dir, name, in->ino);
	if (!d) {
		ret = -ENOMEM;
		goto out;
	}
	ret = fs_log_create(fs, in, parent, name);
	if (ret)
		goto out;
	fs_apply_create(fs, dir, in, d);
	in->nlookup++;
	fs_fill_stat(fs, in, out);
	in = NULL;
	d = NULL;
out:
	free(d);
	fs_inode_discard(fs, in);
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_mknod(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	     dev_t rdev, const struct fs_ctx *ctx, struct stat *out)
{
	if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISSOCK(mode) &&
	    !S_ISCHR(mode) && !S_ISBLK(mode))
		return -EINVAL;
	return make_node(fs, parent, name, mode, rdev, NULL, ctx, out);
}

int fs_mkdir(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	     const struct fs_ctx *ctx, struct stat *out)
{
	return make_node(fs, parent, name, S_IFDIR | (mode & 07777), 0, NULL, ctx, out);
}

int fs_symlink(struct fs *fs, uint64_t parent, const char *name,
	       const char *target, const struct fs_ctx *ctx, struct stat *out)
{
	return make_node(fs, parent, name, S_IFLNK | 0777, 0, target, ctx, out);
}

int fs_link(struct fs *fs, uint64_t ino, uint64_t newparent,
	    const char *newname, struct stat *out)
{
	int ret = check_name(newname);
	if (ret)
		return ret;
	if (fs->read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino), *dir = fs_inode_get(fs, newparent);
	if (!in || !dir)
		ret = -ENOENT;
	else if (!dir->dir)
		ret = -ENOTDIR;
	else if (in->dir)
		ret = -EPERM;
	else if (in->nlink == 0 || dir->nlink == 0)
		ret = -ENOENT;
	else if (in->nlink >= 65000)
		ret = -EMLINK;
	else if (fs_dirent_find(fs, newparent, newname))
		ret = -EEXIST;
	struct fs_dirent *d = NULL;
	if (!ret && !(d = fs_dirent_alloc(fs, dir, newname, ino)))
		ret = -ENOMEM;
	if (!ret)
		ret = fs_log_link(fs, newparent, newname, ino);
	if (!ret) {
		fs_apply_link(fs, dir, in, d);
		d = NULL;
		in->nlookup++;
		fs_fill_stat(fs, in, out);
	}
	free(d);
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

static int remove_name(struct fs *fs, uint64_t parent, const char *name, bool dir_wanted)
{
	int ret = 0;
	if (strlen(name) > FS_NAME_MAX)
		return -ENAMETOOLONG;
	if (fs->read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *dir = fs_inode_get(fs, parent);
	struct fs_dirent *d = dir && dir->dir ? fs_dirent_find(fs, parent, name) : NULL;
	struct fs_inode *in = d ? fs_inode_get(fs, d->ino) : NULL;
	if (!dir)
		ret = -ENOENT;
	else if (!dir->dir)
		ret = -ENOTDIR;
	else if (!d || !in)
		ret = -ENOENT;
	else if (dir_wanted && !in->dir)
		ret = -ENOTDIR;
	else if (!dir_wanted && in->dir)
		ret = -EISDIR;
	else if (dir_wanted && in->dir->live > 0)
		ret = -ENOTEMPTY;
	if (!ret)
		ret = fs_log_unlink(fs, parent, name);
	if (!ret && !in->dir && in->nlink <= 1)
		fs_lifetime_note_unlink(fs, in, 0);	/* lifetime inference (fs_lifetime.c) */
	if (!ret)
		fs_apply_unlink(fs, parent, name);	/* validated: cannot fail */
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_unlink(struct fs *fs, uint64_t parent, const char *name)
{
	return remove_name(fs, parent, name, false);
}

int fs_rmdir(struct fs *fs, uint64_t parent, const char *name)
{
	if (strcmp(name, ".") == 0)
		return -EINVAL;
	if (strcmp(name, "..") == 0)
		return -ENOTEMPTY;
	return remove_name(fs, parent, name, true);
}

int fs_rename(struct fs *fs, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, unsigned int flags)
{
	struct fs_dirent *d = NULL;
	int ret;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	if ((ret = check_name(newname)) || (ret = check_name(name)))
		return ret == -EEXIST ? -EBUSY : ret;
	if (fs->read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	ret = fs_rename_check(fs, parent, name, newparent, newname, flags);
	if (ret == 1) {		/* same inode: nothing to do */
		ret = 0;
		goto out;
	}
	if (ret)
		goto out;
	if (!(flags & RENAME_EXCHANGE)) {
		uint64_t ino = fs_dirent_find(fs, parent, name)->ino;
		d = fs_dirent_alloc(fs, fs_inode_get(fs, newparent), newname, ino);
		if (!d) {
			ret = -ENOMEM;
			goto out;
		}
	}
	ret = fs_log_rename(fs, parent, name, newparent, newname, flags);
	if (!ret)
		ret = fs_apply_rename(fs, parent, name, newparent, newname, flags, d);
	else
		free(d);
out:
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_readlink(struct fs *fs, uint64_t ino, char *buf, size_t size)
{
	int ret;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in)
		ret = -ENOENT;
	else if (!in->symlink)
		ret = -EINVAL;
	else {
		size_t len = strlen(in->symlink);
		memcpy(buf, in->symlink, ZF_MIN(len, size));
		ret = (int)len;
	}
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_open(struct fs *fs, uint64_t ino, int flags)
{
	int ret = 0;
	if (fs->read_only && (flags & O_ACCMODE) != O_RDONLY)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in)
		ret = -ENOENT;
	else
		in->nopen++;
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_release(struct fs *fs, uint64_t ino)
{
	int ret = 0;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		return -ENOENT;
	}
	in->pins++;
	pthread_mutex_unlock(&fs->lock);

	/* Closing writes the file's buffers out (not a commit): files that are
	 * done are written while their zone class is still open. */
	if (S_ISREG(in->mode)) {
		pthread_rwlock_wrlock(&in->rw);
		if (in->nlink > 0)
			ret = fs_data_flush(fs, in, true);
		fs_pf_invalidate(fs, in);	/* read-ahead memory goes back */
		pthread_rwlock_unlock(&in->rw);
	}
	pthread_mutex_lock(&fs->lock);
	in->pins--;
	if (in->nopen)
		in->nopen--;
	fs_inode_maybe_free(fs, in);
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_readdir(struct fs *fs, uint64_t ino, uint64_t off, bool plus,
	       fs_dir_fn fn, void *arg)
{
	struct stat st;
	int ret = 0;

	pthread_mutex_lock(&fs->lock);
	struct fs_inode *dir = fs_inode_get(fs, ino);
	if (!dir || !dir->dir) {
		pthread_mutex_unlock(&fs->lock);
		return dir ? -ENOTDIR : -ENOENT;
	}
	if (off < 1) {
		fs_fill_stat(fs, dir, &st);
		if (fn(arg, ".", &st, 1))
			goto out;
	}
	if (off < 2) {
		struct fs_inode *p = fs_inode_get(fs, dir->dir->parent);
		if (!p)
			p = dir;
		fs_fill_stat(fs, p, &st);
		if (fn(arg, "..", &st, 2))
			goto out;
	}
	for (size_t i = dir_slot(dir->dir, off + 1); i < dir->dir->n; i++) {
		struct fs_dirent *d = dir->dir->ents[i];
		if (!d || d->cookie <= off)
			continue;
		struct fs_inode *in = fs_inode_get(fs, d->ino);
		if (!in)
			continue;
		fs_fill_stat(fs, in, &st);
		if (fn(arg, d->name, &st, d->cookie))
			break;
		if (plus)
			in->nlookup++;
	}
out:
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_statfs(struct fs *fs, struct statvfs *st)
{
	struct zalloc_stats zs;
	zalloc_get_stats(fs->za, &zs);
	memset(st, 0, sizeof(*st));
	st->f_bsize = fs->bs;
	st->f_frsize = fs->bs;
	/* the collector's floor zone never holds user data */
	uint64_t floor = zs.gc_reserve_zones && zs.nr_zones ?
			 ZALLOC_GC_FLOOR * (zs.capacity_bytes / zs.nr_zones) : 0;
	/* nor do the metadata log's zones and the reserve kept for it */
	uint64_t cap = zs.capacity_bytes - ZF_MIN(zs.capacity_bytes, floor + zs.log_bytes);
	st->f_blocks = cap / fs->bs;
	uint64_t used = zs.valid_bytes + fs->buffered;
	uint64_t avail = cap > used ? cap - used : 0;
	st->f_bfree = avail / fs->bs;
	st->f_bavail = st->f_bfree;
	pthread_mutex_lock(&fs->lock);
	st->f_files = fs->ninodes + (1u << 20);
	st->f_ffree = 1u << 20;
	pthread_mutex_unlock(&fs->lock);
	st->f_favail = st->f_ffree;
	st->f_namemax = FS_NAME_MAX;
	st->f_fsid = 0x7a66;
	return 0;
}

void fs_get_stats(struct fs *fs, struct fs_stats *st)
{
	struct mlog_stats ms;
	mlog_get_stats(fs->mlog, &ms);
	memset(st, 0, sizeof(*st));
	st->user_bytes_written = fs->user_bytes;
	st->data_bytes_written = fs->data_bytes;
	st->meta_bytes_written = ms.bytes_written;
	st->buffer_bytes = fs->buffered;
	st->buffer_limit = fs->opts.buffer_bytes;
	st->prefetch_bytes = fs->pf_bytes;
	st->prefetch_hits = fs->pf_hits;
	st->prefetch_fills = fs->pf_fills;
	st->commits = fs->commits;
	st->snapshots = ms.snapshots;
	pthread_mutex_lock(&fs->lock);
	st->inodes = fs->ninodes;
	pthread_mutex_unlock(&fs->lock);
	fs_gc_fill_stats(fs, st);	/* GC, placement, WA (fs_gc.c) */
}

/* ---- commit ---- */

/* A snapshot when one is due.  A snapshot rewrites the whole state into a
 * new epoch, so it also makes durable whatever a failed commit left
 * pending, and it repairs a log broken by a device error. [no locks] */
static int snapshot_if_due(struct fs *fs)
{
	int ret = 0;

	if (!mlog_should_snapshot(fs->mlog))
		return 0;
	pthread_mutex_lock(&fs->lock);
	if (mlog_should_snapshot(fs->mlog)) {
		ret = mlog_snapshot(fs->mlog, fs_emit_snapshot, fs);
		if (ret) {
			fs->meta_errors++;
			zf_warn("metadata snapshot failed: %s; retried at the next commit",
				strerror(-ret));
		}
	}
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_commit(struct fs *fs)
{
	uint64_t t = zalloc_commit_begin(fs->za);
	int ret = mlog_commit(fs->mlog);
	if (ret) {
		/* The caller hears of it (a failed flush may have lost data
		 * written before it).  A log broken by the error (a zone no
		 * longer matches the layout) is cured by a snapshot: one is
		 * tried now, and at every commit until it succeeds. */
		fs->meta_errors++;
		zf_err("metadata commit failed: %s", strerror(-ret));
		snapshot_if_due(fs);
		return ret;
	}
	fs->commits++;
	ret = zalloc_commit_end(fs->za, t);
	if (ret < 0) {
		zf_err("zone reset after commit failed: %s", strerror(-ret));
		return ret;
	}
	/* Everything is durable now: a snapshot that fails is retried later,
	 * never reported to the caller as a failed fsync. */
	snapshot_if_due(fs);
	return 0;
}

int fs_commit_log(struct fs *fs)
{
	return fs_commit(fs);
}

/* Write out every inode's buffers whose data is older than `age_ns`. */
static int flush_dirty(struct fs *fs, uint64_t age_ns)
{
	int ret = 0;
	uint64_t now = zf_now_ns();

	pthread_mutex_lock(&fs->lock);
	size_t budget = fs->ninodes;	/* each inode visited at most once */
	pthread_mutex_unlock(&fs->lock);
	while (budget--) {
		pthread_mutex_lock(&fs->lock);
		struct fs_inode *in = fs->dirty_head;
		if (!in || (age_ns && now - in->dirty_since_ns < age_ns)) {
			pthread_mutex_unlock(&fs->lock);
			break;
		}
		dirty_unlink(fs, in);
		in->pins++;
		pthread_mutex_unlock(&fs->lock);
		/* A busy inode is being written by its owner, who may be waiting
		 * for a commit from us: skip it rather than wait (it is put back
		 * on the list and retried).  So is one with a write-out in
		 * flight (its device I/O runs without in->rw). */
		int r;
		if (pthread_rwlock_trywrlock(&in->rw) == 0) {
			r = in->wb_busy ? -EBUSY : fs_data_flush(fs, in, true);
			pthread_rwlock_unlock(&in->rw);
		} else {
			r = -EBUSY;
		}
		pthread_mutex_lock(&fs->lock);
		if (r && r != -EBUSY && !ret)
			ret = r;
		if (r)	/* keep it on the list, retried next round */
			fs_mark_dirty(fs, in);
		in->pins--;
		fs_inode_maybe_free(fs, in);
		pthread_mutex_unlock(&fs->lock);
		if (r && r != -EBUSY)
			break;
	}
	return ret;
}

int fs_sync(struct fs *fs)
{
	int ret = flush_dirty(fs, 0);
	pthread_mutex_lock(&fs->lock);
	for (size_t b = 0; b < fs->itab_size; b++)
		for (struct fs_inode *in = fs->itab[b]; in; in = in->hnext)
			if (in->attr_dirty && !ret)
				ret = fs_log_attr(fs, in);
	pthread_mutex_unlock(&fs->lock);
	int r = fs_commit(fs);
	return ret ? ret : r;
}

static void *committer_main(void *arg)
{
	struct fs *fs = arg;
	uint64_t interval = (uint64_t)fs->opts.commit_interval_ms * 1000000ull;

	pthread_mutex_lock(&fs->cmt_lock);
	while (!fs->cmt_stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + interval;
		ts.tv_sec += (time_t)(ns / 1000000000ull);
		ts.tv_nsec = (long)(ns % 1000000000ull);
		if (!fs->cmt_kick && !fs->cmt_commit_only)
			pthread_cond_timedwait(&fs->cmt_cond, &fs->cmt_lock, &ts);
		bool kicked = fs->cmt_kick, commit_only = fs->cmt_commit_only;
		fs->cmt_kick = fs->cmt_commit_only = false;
		if (fs->cmt_stop)
			break;
		pthread_mutex_unlock(&fs->cmt_lock);
		if (!commit_only || kicked)
			flush_dirty(fs, kicked ? 0 : interval);
		fs_commit(fs);
		pthread_mutex_lock(&fs->cmt_lock);
	}
	pthread_mutex_unlock(&fs->cmt_lock);
	return NULL;
}

void fs_kick_committer(struct fs *fs);
void fs_kick_committer(struct fs *fs)
{
	pthread_mutex_lock(&fs->cmt_lock);
	fs->cmt_kick = true;
	pthread_cond_signal(&fs->cmt_cond);
	pthread_mutex_unlock(&fs->cmt_lock);
}

/* ---- mkfs, mount, unmount ---- */

static int layout(struct zdev *dev, uint32_t meta_zones, struct mlog_sb *sb)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	uint32_t first = g->nr_conv_zones;	/* conventional zones are not used */

	if (meta_zones == 0) {
		/* About 256 MiB of log space, at least 4 zones and at most
		 * 1/16 of the device: a snapshot must fit in half of them. */
		uint64_t want = (256ull << 20) / ZF_MAX(g->zone_capacity, 1);
		meta_zones = (uint32_t)ZF_MAX((uint64_t)DEFAULT_META_ZONES,
					      ZF_MIN(want, (uint64_t)g->nr_zones / 16));
	}
	if (meta_zones < 3) {
		zf_err("at least 3 metadata zones are needed");
		return -EINVAL;
	}
	if (g->nr_zones < first + meta_zones + 2) {
		zf_err("device too small: %u sequential zones, need at least %u",
		       g->nr_zones - first, meta_zones + 2);
		return -ENOSPC;
	}
	if (g->zone_capacity < 128 * 1024) {
		zf_err("zone capacity %llu bytes is too small (minimum 128 KiB)",
		       (unsigned long long)g->zone_capacity);
		return -EINVAL;
	}
	if (g->max_active && g->max_active < ACTIVE_RESERVED + 2) {
		zf_err("device allows only %u active zones; zonefuse needs at least %u",
		       g->max_active, ACTIVE_RESERVED + 2);
		return -EINVAL;
	}
	memset(sb, 0, sizeof(*sb));
	sb->version = MLOG_SB_VERSION;
	sb->block_size = ZF_MAX(4096u, g->block_size);
	sb->zone_size = g->zone_size;
	sb->zone_capacity = g->zone_capacity;
	sb->nr_zones = g->nr_zones;
	sb->meta_first = first;
	sb->meta_count = meta_zones;
	sb->data_first = first + meta_zones;
	sb->data_count = g->nr_zones - sb->data_first;
	sb->created_sec = (uint64_t)time(NULL);
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, sb->uuid, sizeof(sb->uuid)) != (ssize_t)sizeof(sb->uuid)) {
		uint64_t t = zf_now_ns() ^ (uint64_t)getpid();
		memcpy(sb->uuid, &t, sizeof(t));
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

static struct fs *fs_alloc(struct zdev *dev, const struct fs_opts *o)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return NULL;
	fs->dev = dev;
	if (o)
		fs->opts = *o;
	else
		fs_opts_default(&fs->opts);
	fs->itab_size = 1024;
	fs->dtab_size = 1024;
	fs->itab = calloc(fs->itab_size, sizeof(*fs->itab));
	fs->dtab = calloc(fs->dtab_size, sizeof(*fs->dtab));
	if (!fs->itab || !fs->dtab) {
		free(fs->itab);
		free(fs->dtab);
		free(fs);
		return NULL;
	}
	fs->next_ino = FS_ROOT_INO + 1;
	pthread_mutex_init(&fs->lock, NULL);
	pthread_mutex_init(&fs->cmt_lock, NULL);
	pthread_cond_init(&fs->cmt_cond, NULL);
	return fs;
}

static void fs_free(struct fs *fs)
{
	fs->replaying = true;	/* no valid-byte accounting while tearing down */
	for (size_t b = 0; b < fs->itab_size; b++) {
		while (fs->itab[b])
			inode_destroy(fs, fs->itab[b]);
	}
	for (size_t b = 0; b < fs->dtab_size; b++) {
		struct fs_dirent *d = fs->dtab[b];
		while (d) {
			struct fs_dirent *next = d->hnext;
			free(d);
			d = next;
		}
	}
	free(fs->itab);
	free(fs->dtab);
	fs_lifetime_fini(fs);	/* lifetime state (fs_lifetime.c) */
	pthread_mutex_destroy(&fs->lock);
	pthread_mutex_destroy(&fs->cmt_lock);
	pthread_cond_destroy(&fs->cmt_cond);
	free(fs);
}

static int make_root(struct fs *fs)
{
	struct fs_inode *root = fs_inode_new(fs, FS_ROOT_INO);
	if (!root)
		return -ENOMEM;
	root->mode = S_IFDIR | 0755;
	root->nlink = 2;
	root->atime = root->mtime = root->ctime = fs_now();
	root->cls = LIFETIME_MEDIUM;
	root->dir = calloc(1, sizeof(*root->dir));
	if (!root->dir)
		return -ENOMEM;
	root->dir->next_cookie = 3;
	root->dir->parent = FS_ROOT_INO;
	return 0;
}

int fs_mkfs(struct zdev *dev, const struct fs_mkfs_opts *o)
{
	struct mlog_sb sb, old;
	struct mlog *m = NULL;
	struct fs *fs = NULL;
	int ret;

	if (mlog_probe(dev, &old) == 0 && !(o && o->force)) {
		zf_err("%s already holds a zonefuse file system (use --force to overwrite)",
		       zdev_path(dev));
		return -EEXIST;
	}
	ret = layout(dev, o ? o->meta_zones : 0, &sb);
	if (ret)
		return ret;
	if (o && o->label)
		snprintf(sb.label, sizeof(sb.label), "%s", o->label);
	ret = zdev_reset_all(dev);
	if (ret) {
		zf_err("resetting zones: %s", strerror(-ret));
		return ret;
	}
	ret = mlog_format(dev, &sb);
	if (ret) {
		zf_err("writing the metadata log: %s", strerror(-ret));
		return ret;
	}
	fs = fs_alloc(dev, NULL);
	if (!fs)
		return -ENOMEM;
	fs->bs = sb.block_size;
	fs->replaying = true;
	ret = mlog_open(dev, 0, fs_replay_record, fs, &sb, &m);
	fs->replaying = false;
	if (ret)
		goto out;
	fs->mlog = m;
	fs->bs = sb.block_size;
	ret = make_root(fs);
	if (!ret)
		ret = mlog_snapshot(m, fs_emit_snapshot, fs);
	if (!ret)
		ret = zdev_flush(dev);
out:
	if (m)
		mlog_close(m);
	fs_free(fs);
	return ret;
}

/* zalloc waits for zones that only a commit can reset: wake the committer. */
static void need_space(void *arg)
{
	struct fs *fs = arg;
	if (fs->committer_running) {
		pthread_mutex_lock(&fs->cmt_lock);
		fs->cmt_commit_only = true;
		pthread_cond_signal(&fs->cmt_cond);
		pthread_mutex_unlock(&fs->cmt_lock);
	} else {
		fs_commit(fs);	/* the caller holds no fs or zalloc lock */
	}
}

/* The metadata log borrows EMPTY data zones from zalloc when its meta zones
 * are not enough (mlog.h, zalloc.h); the callbacks run with mlog's lock
 * held and take only zalloc's leaf lock. */
static int log_borrow(void *arg, uint32_t keep, uint32_t *zone)
{
	struct fs *fs = arg;
	return zalloc_lend(fs->za, keep, zone);
}

static void log_give_back(void *arg, uint32_t zone)
{
	struct fs *fs = arg;
	zalloc_lend_return(fs->za, zone);
}

static void log_reserve(void *arg, uint32_t zones)
{
	struct fs *fs = arg;
	zalloc_set_log_reserve(fs->za, zones);
}

static uint32_t log_avail(void *arg)
{
	struct fs *fs = arg;
	return zalloc_free_zones(fs->za);
}

static const struct mlog_zone_source log_zone_source = {
	.borrow = log_borrow, .give_back = log_give_back, .reserve = log_reserve,
	.avail = log_avail,
};

/* Before zalloc_mount_done: the data zones the replayed log holds are the
 * log's (mount_done would reset them: no extent references them). */
static int adopt_log_zones(struct fs *fs)
{
	uint32_t n = mlog_borrowed_zones(fs->mlog, NULL, 0);
	if (!n)
		return 0;
	uint32_t *z = calloc(n, sizeof(*z));
	if (!z)
		return -ENOMEM;
	n = mlog_borrowed_zones(fs->mlog, z, n);
	int ret = 0;
	for (uint32_t i = 0; i < n && !ret; i++) {
		ret = zalloc_lend_adopt(fs->za, z[i]);
		if (ret)
			zf_err("metadata log zone %u is not a data zone", z[i]);
	}
	free(z);
	return ret ? -EUCLEAN : 0;
}

/* After replay: free orphans, account valid bytes per zone, tell zalloc
 * each zone's class. */
static int mount_reconcile(struct fs *fs)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	uint64_t data_start = (uint64_t)fs->sb.data_first * g->zone_size;
	uint64_t data_end = (uint64_t)(fs->sb.data_first + fs->sb.data_count) * g->zone_size;

	fs->replaying = true;	/* valid bytes are not counted yet */
	for (size_t b = 0; b < fs->itab_size; b++) {
		struct fs_inode *in = fs->itab[b];
		while (in) {
			struct fs_inode *next = in->hnext;
			if (in->nlink == 0 && in->ino != FS_ROOT_INO)
				inode_destroy(fs, in);	/* orphan: unlinked while open */
			in = next;
		}
	}
	fs->replaying = false;
	for (size_t b = 0; b < fs->itab_size; b++) {
		for (struct fs_inode *in = fs->itab[b]; in; in = in->hnext) {
			for (size_t i = 0; i < in->map.n; i++) {
				const struct extmap_ext *e = &in->map.v[i];
				if (e->dev < data_start || e->dev + e->len > data_end ||
				    e->dev / g->zone_size != (e->dev + e->len - 1) / g->zone_size) {
					zf_err("inode %llu: extent at device offset %llu is outside the data zones",
					       (unsigned long long)in->ino, (unsigned long long)e->dev);
					return -EUCLEAN;
				}
				zalloc_zone_adopt(fs->za, (uint32_t)(e->dev / g->zone_size),
						  (enum lifetime_class)in->cls);
				zalloc_valid_add(fs->za, e->dev, e->len);
			}
		}
	}
	return 0;
}

int fs_mount(struct zdev *dev, const struct fs_opts *o, struct fs **out)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct fs *fs = fs_alloc(dev, o);
	int ret;

	if (!fs)
		return -ENOMEM;
	fs->read_only = fs->opts.read_only;
	/* Replay needs the block size before the log is read. */
	ret = mlog_probe(dev, &fs->sb);
	if (ret == 0 && (fs->sb.block_size < 512 || (fs->sb.block_size & (fs->sb.block_size - 1))))
		ret = -EUCLEAN;
	if (ret) {
		if (ret == -ENODATA)
			zf_err("%s holds no zonefuse file system (run mkfs.zonefuse)", zdev_path(dev));
		else
			zf_err("reading the superblock of %s: %s", zdev_path(dev), strerror(-ret));
		goto fail;
	}
	fs->bs = fs->sb.block_size;
	fs->replaying = true;
	ret = mlog_open(dev, fs->read_only ? MLOG_OPEN_READ_ONLY : 0,
			fs_replay_record, fs, &fs->sb, &fs->mlog);
	fs->replaying = false;
	if (ret) {
		if (ret == -ENODATA)
			zf_err("%s holds no zonefuse file system (run mkfs.zonefuse)", zdev_path(dev));
		else
			zf_err("reading the metadata log of %s: %s", zdev_path(dev), strerror(-ret));
		goto fail;
	}
	if (fs->sb.zone_size != g->zone_size || fs->sb.nr_zones != g->nr_zones ||
	    fs->sb.block_size % g->block_size || fs->sb.block_size < 4096 ||
	    fs->sb.data_first + fs->sb.data_count > g->nr_zones) {
		zf_err("superblock geometry does not match the device");
		ret = -EUCLEAN;
		goto fail;
	}
	fs->bs = fs->sb.block_size;
	if (fs->opts.stripe_unit < fs->bs || fs->opts.stripe_unit % fs->bs ||
	    fs->opts.stripe_unit > g->zone_capacity) {
		zf_err("stripe_unit must be a multiple of %u bytes and at most the zone capacity", fs->bs);
		ret = -EINVAL;
		goto fail;
	}
	fs->pages_per_chunk = fs->opts.stripe_unit / fs->bs;
	if (!fs_inode_get(fs, FS_ROOT_INO)) {
		zf_err("metadata has no root directory");
		ret = -EUCLEAN;
		goto fail;
	}
	struct zalloc_params zp = {
		.first_zone = fs->sb.data_first,
		.nr_zones = fs->sb.data_count,
		.reserved_active = ACTIVE_RESERVED,
		.reserved_open = ACTIVE_RESERVED,
		.max_stripe_width = ZF_MAX(1u, fs->opts.stripe_width),
	};
	ret = zalloc_create(dev, &zp, &fs->za);
	if (ret) {
		zf_err("zone allocator: %s", strerror(-ret));
		goto fail;
	}
	zalloc_set_need_space_cb(fs->za, need_space, fs);
	ret = adopt_log_zones(fs);
	if (ret)
		goto fail;
	ret = mount_reconcile(fs);
	if (!ret)
		ret = fs_lifetime_init(fs);	/* rules file, inference (fs_lifetime.c) */
	if (ret)
		goto fail;
	if (!fs->read_only) {
		ret = zalloc_mount_done(fs->za);
		if (ret < 0) {
			zf_err("mount-time zone cleanup: %s", strerror(-ret));
			goto fail;
		}
		mlog_set_zone_source(fs->mlog, &log_zone_source, fs);
		pthread_mutex_lock(&fs->lock);
		ret = mlog_snapshot(fs->mlog, fs_emit_snapshot, fs);
		pthread_mutex_unlock(&fs->lock);
		if (ret) {
			zf_err("writing the mount snapshot: %s", strerror(-ret));
			goto fail;
		}
	}
	*out = fs;
	return 0;
fail:
	if (fs->mlog)
		mlog_set_zone_source(fs->mlog, NULL, NULL);
	if (fs->za)
		zalloc_destroy(fs->za);
	if (fs->mlog)
		mlog_close(fs->mlog);
	fs->za = NULL;
	fs_free(fs);
	return ret;
}

int fs_start(struct fs *fs)
{
	int ret = fs_pf_start(fs);
	if (!ret)
		ret = fs_gc_start(fs);	/* lifetime GC thread (fs_gc.c) */
	if (ret || fs->read_only || !fs->opts.commit_interval_ms || fs->committer_running)
		return ret;
	ret = -pthread_create(&fs->committer, NULL, committer_main, fs);
	if (!ret)
		fs->committer_running = true;
	return ret;
}

int fs_unmount(struct fs *fs)
{
	int ret = 0;

	fs_gc_stop(fs);	/* lifetime GC thread (fs_gc.c) */
	if (fs->committer_running) {
		pthread_mutex_lock(&fs->cmt_lock);
		fs->cmt_stop = true;
		pthread_cond_signal(&fs->cmt_cond);
		pthread_mutex_unlock(&fs->cmt_lock);
		pthread_join(fs->committer, NULL);
	}
	fs_pf_stop(fs);
	if (!fs->read_only) {
		ret = fs_sync(fs);
		if (ret) {
			zf_err("unmount: final commit failed: %s", strerror(-ret));
		} else {
			/* Everything is durable: the snapshot only shortens the
			 * next mount's replay. */
			pthread_mutex_lock(&fs->lock);
			int r = mlog_snapshot(fs->mlog, fs_emit_snapshot, fs);
			pthread_mutex_unlock(&fs->lock);
			if (r)
				zf_warn("unmount: final snapshot failed (%s); the log "
					"is replayed at the next mount", strerror(-r));
		}
	}
	mlog_set_zone_source(fs->mlog, NULL, NULL);
	zalloc_destroy(fs->za);
	fs->za = NULL;
	mlog_close(fs->mlog);
	fs_free(fs);
	return ret;
}
