/* fs_inode — the inode table, the name table and the dirty list, and the
 * clock the core stamps times with.  Every function here runs with
 * fs->lock held (or single-threaded at mount); fs.h has the lock order. */
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

/* The coarse clock (one tick) is the kernel's: in writeback-cache mode it
 * stamps mtime and ctime itself with current_time(), which is coarse for a
 * FUSE mount.  A finer stamp from here would differ from the kernel's at a
 * new file's first write, dirtying the inode and costing a SETATTR at
 * close. */
int64_t fs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return zf_timespec_to_ns(ts);
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

/* The first inode of the table, then the one after `in` (NULL at the
 * end), in table order.  Computing the next one before freeing `in` makes
 * the walk safe against that. */
static struct fs_inode *first_from(struct fs *fs, size_t b)
{
	for (; b < fs->itab_size; b++)
		if (fs->itab[b])
			return fs->itab[b];
	return NULL;
}

struct fs_inode *fs_inode_first(struct fs *fs)
{
	return first_from(fs, 0);
}

struct fs_inode *fs_inode_next(struct fs *fs, const struct fs_inode *in)
{
	return in->hnext ? in->hnext : first_from(fs, ihash(in->ino, fs->itab_size) + 1);
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
	in->wb_cut = UINT64_MAX;
	in->wb_grow_from = UINT64_MAX;
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
	in->snap_counted = true;
	fs_snap_account(fs, in);
}

struct fs_inode *fs_inode_new(struct fs *fs, uint64_t ino)
{
	struct fs_inode *in = fs_inode_alloc(fs, ino);
	if (in)
		fs_inode_insert(fs, in);
	return in;
}

void fs_dirty_unlink(struct fs *fs, struct fs_inode *in)
{
	if (!in->on_dirty)
		return;
	if (in->dprev) in->dprev->dnext = in->dnext; else fs->dirty_head = in->dnext;
	if (in->dnext) in->dnext->dprev = in->dprev; else fs->dirty_tail = in->dprev;
	in->dnext = in->dprev = NULL;
	in->on_dirty = false;
}

void fs_behind_unlink(struct fs *fs, struct fs_inode *in)
{
	if (!in->on_behind)
		return;
	if (in->bprev) in->bprev->bnext = in->bnext; else fs->behind_head = in->bnext;
	if (in->bnext) in->bnext->bprev = in->bprev; else fs->behind_tail = in->bprev;
	in->bnext = in->bprev = NULL;
	in->on_behind = false;
}

void fs_behind_add(struct fs *fs, struct fs_inode *in)
{
	fs_behind_unlink(fs, in);
	in->on_behind = true;
	in->closed_ns = zf_now_ns();
	in->bprev = fs->behind_tail;
	in->bnext = NULL;
	if (fs->behind_tail) fs->behind_tail->bnext = in; else fs->behind_head = in;
	fs->behind_tail = in;
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
	fs_pa_free(fs, in);
	if (in->dir) {
		free(in->dir->ents);
		free(in->dir->cookies);
		free(in->dir);
	}
	free(in->symlink);
	fs_xattr_free_all(in);
	pthread_rwlock_destroy(&in->rw);
	pthread_mutex_destroy(&in->wb_lock);
	pthread_cond_destroy(&in->wb_cond);
	free(in);
}

void fs_inode_destroy(struct fs *fs, struct fs_inode *in)
{
	struct fs_inode **pp = &fs->itab[ihash(in->ino, fs->itab_size)];
	while (*pp && *pp != in)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = in->hnext;
	fs->ninodes--;
	if (in->snap_counted)
		fs->snap_bytes -= in->snap_bytes;
	in->snap_counted = false;
	fs_dirty_unlink(fs, in);
	if (in->on_behind)	/* unlinked before the write-behind reached it */
		fs->behind_dropped += in->buffered;
	fs_behind_unlink(fs, in);
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
		fs_inode_destroy(fs, in);
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

/* Directories up to this many slots are not compacted on remove. */
#define DIR_COMPACT_MIN 64

/* Drop the removed slots, keeping the order (cookies do not change). */
static void dir_compact(struct fs_dir *dd)
{
	size_t k = 0;
	for (size_t i = 0; i < dd->n; i++)
		if (dd->ents[i]) {
			dd->ents[k] = dd->ents[i];
			dd->cookies[k] = dd->cookies[i];
			dd->ents[k]->slot = k;
			k++;
		}
	dd->n = k;
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
			dir_compact(dd);
		} else {
			size_t cap = dd->cap, ccap = dd->cap;
			struct fs_dirent **e = zf_grow(dd->ents, &cap, dd->n + 1, sizeof(*e), 16);
			if (!e)
				return NULL;
			dd->ents = e;
			uint64_t *c = zf_grow(dd->cookies, &ccap, cap, sizeof(*c), 16);
			if (!c)
				return NULL;	/* ents is larger: harmless, cap stays */
			dd->cookies = c;
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
	d->slot = dd->n;
	dd->cookies[dd->n] = d->cookie;
	dd->ents[dd->n++] = d;
	dd->live++;
	dd->name_bytes += fs_snap_name_bytes(d->name);
	fs_snap_account(fs, dir);
	if (fs->ndirents + 1 > fs->dtab_size)
		dtab_grow(fs);
	d->hnext = fs->dtab[d->hash & (fs->dtab_size - 1)];
	fs->dtab[d->hash & (fs->dtab_size - 1)] = d;
	fs->ndirents++;
	struct fs_inode *in = fs_inode_get(fs, d->ino);
	if (in && in->dir)
		in->dir->self = d;
}

/* d (a new name in old's directory, for the same inode) takes old's slot
 * and cookie, and old goes: a rename inside one directory keeps the
 * entry's place in a listing, so that a READDIR pass never returns it
 * twice (once under each name).  Cannot fail. */
void fs_dirent_replace(struct fs *fs, struct fs_inode *dir, struct fs_dirent *old,
		       struct fs_dirent *d)
{
	struct fs_dir *dd = dir->dir;
	struct fs_dirent **pp = &fs->dtab[old->hash & (fs->dtab_size - 1)];

	while (*pp && *pp != old)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = old->hnext;
	d->cookie = old->cookie;
	d->slot = old->slot;
	if (old->slot < dd->n && dd->ents[old->slot] == old) {
		dd->ents[old->slot] = d;
		dd->name_bytes += fs_snap_name_bytes(d->name) - fs_snap_name_bytes(old->name);
		fs_snap_account(fs, dir);
	}
	d->hnext = fs->dtab[d->hash & (fs->dtab_size - 1)];
	fs->dtab[d->hash & (fs->dtab_size - 1)] = d;
	struct fs_inode *in = fs_inode_get(fs, d->ino);
	if (in && in->dir && in->dir->self == old)
		in->dir->self = d;
	free(old);
}

int fs_dirent_add(struct fs *fs, struct fs_inode *dir, const char *name, uint64_t ino)
{
	struct fs_dirent *d = fs_dirent_alloc(fs, dir, name, ino);
	if (!d)
		return -ENOMEM;
	fs_dirent_insert(fs, dir, d);
	return 0;
}

size_t fs_dir_slot(const struct fs_dir *dd, uint64_t cookie)
{
	size_t lo = 0, hi = dd->n;	/* first slot with cookie >= `cookie` */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (dd->cookies[mid] < cookie)
			lo = mid + 1;
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
	struct fs_inode *in = fs_inode_get(fs, d->ino);
	if (in && in->dir && in->dir->self == d)
		in->dir->self = NULL;
	if (d->slot < dd->n && dd->ents[d->slot] == d) {
		dd->ents[d->slot] = NULL;
		dd->live--;
		dd->name_bytes -= fs_snap_name_bytes(d->name);
		fs_snap_account(fs, dir);
	}
	while (dd->n && !dd->ents[dd->n - 1])
		dd->n--;
	/* Removing in creation order leaves the NULLs in front, where every
	 * search by cookie would walk them: keep them to half the slots. */
	if (dd->n > DIR_COMPACT_MIN && dd->live < dd->n / 2)
		dir_compact(dd);
	free(d);
}

uint32_t fs_mode_kill_suidgid(uint32_t mode)
{
	mode &= ~(uint32_t)S_ISUID;
	if (mode & S_IXGRP)
		mode &= ~(uint32_t)S_ISGID;
	return mode;
}

struct fs_inode *fs_inode_pin(struct fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (in)
		in->pins++;
	pthread_mutex_unlock(&fs->lock);
	return in;
}

void fs_inode_unpin(struct fs *fs, struct fs_inode *in)
{
	pthread_mutex_lock(&fs->lock);
	in->pins--;
	fs_inode_maybe_free(fs, in);
	pthread_mutex_unlock(&fs->lock);
}

int fs_lookup_self(struct fs *fs, uint64_t ino, struct stat *st)
{
	int ret = 0;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in || in->nlink == 0) {
		ret = -ENOENT;
	} else {
		in->nlookup++;
		fs_fill_stat(fs, in, st);
	}
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

/* Numbers made durable at once, and the creates that may take a number
 * between a caller's fs_ino_reserve and its own create (concurrent
 * requests: far fewer than this). */
#define FS_INO_BATCH 4096u
#define FS_INO_SLACK 256u

int fs_ino_reserve(struct fs *fs)
{
	if (fs->read_only)
		return 0;
	pthread_mutex_lock(&fs->lock);
	uint64_t want = fs->next_ino + FS_INO_BATCH;
	bool due = fs->next_ino + FS_INO_SLACK > fs->ino_reserved;
	int ret = due ? fs_log_state(fs, want) : 0;
	if (due && !ret)
		fs->ino_logged = ZF_MAX(fs->ino_logged, want);
	pthread_mutex_unlock(&fs->lock);
	if (!due || ret)
		return ret;
	ret = fs_commit(fs);
	if (ret)
		return ret;
	pthread_mutex_lock(&fs->lock);
	fs->ino_reserved = ZF_MAX(fs->ino_reserved, want);
	pthread_mutex_unlock(&fs->lock);
	return 0;
}
