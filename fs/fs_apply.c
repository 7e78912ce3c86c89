/* fs_apply — one apply function per record type: how a record changes the
 * in-memory state.  The live operation calls it after its record is
 * appended, replay after decoding and validating the record, so the two
 * cannot drift apart.  Apply functions cannot fail (what they need was
 * allocated before the append), except fs_apply_extent's -ENOMEM when no
 * room was reserved.  Also the checks a record must pass (fs_rename_check),
 * shared the same way.  Every function runs with fs->lock held (data
 * records also with the inode's rw lock), or single-threaded at mount.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

/* ---- applying records (live after the append, and replay) ---- */

/* One reference to [dev, dev+len) less: the bytes whose last reference it
 * was are no longer valid (shared ones stay: fs_copy.c). */
void fs_drop_valid(void *arg, uint64_t dev, uint64_t len)
{
	struct fs *fs = arg;
	if (fs->valid_counted && fs->za)
		fs_share_unref(fs, dev, len);
}

/* The block size while replaying: fs->bs is set only after mlog_open()
 * returns, but mlog fills fs->sb before the first record.  0 if unknown
 * (replay then rejects the record instead of dividing by zero). */
uint32_t fs_block_size(const struct fs *fs)
{
	uint32_t bs = fs->bs ? fs->bs : fs->sb.block_size;
	return bs && !(bs & (bs - 1)) ? bs : 0;
}

/* First byte past a file of `size` bytes that may hold no extent, or
 * UINT64_MAX when rounding up would overflow. */
static uint64_t tail_start(uint64_t size, uint32_t bs)
{
	return size > UINT64_MAX - bs ? UINT64_MAX : ZF_ALIGN_UP(size, bs);
}

/* Everything but the size, which only changes through fs_apply_truncate
 * (it is [L+RW]: written only when it does change). */
static void copy_attr(struct fs_inode *in, const struct fs_attr *a)
{
	in->mode = a->mode;
	in->uid = a->uid;
	in->gid = a->gid;
	in->nlink = a->nlink;
	in->rdev = a->rdev;
	in->atime = a->atime;
	in->mtime = a->mtime;
	in->ctime = a->ctime;
	in->cls = a->cls;
	in->cls_src = a->src;
}

int fs_inode_prepare(struct fs *fs, const struct fs_attr *a, uint64_t parent,
		     const char *target, struct fs_inode **out)
{
	struct fs_inode *in = fs_inode_alloc(fs, a->ino);

	if (!in)
		return -ENOMEM;
	copy_attr(in, a);
	in->size = a->size;
	if (S_ISDIR(a->mode)) {
		in->dir = calloc(1, sizeof(*in->dir));
		if (!in->dir)
			goto nomem;
		in->dir->next_cookie = 3;
		in->dir->parent = parent;
	}
	if (target && !(in->symlink = strdup(target)))
		goto nomem;
	*out = in;
	return 0;
nomem:
	fs_inode_discard(fs, in);
	return -ENOMEM;
}

/* INODE: the attributes as recorded.  A smaller size of a file drops the
 * extents past it, as a TRUNCATE does. */
void fs_apply_attr(struct fs *fs, struct fs_inode *in, const struct fs_attr *a)
{
	if (a->size != in->size) {
		if (S_ISREG(in->mode))
			fs_apply_truncate(fs, in, a->size);
		else
			in->size = a->size;
	}
	copy_attr(in, a);
	if (a->ino >= fs->next_ino)
		fs->next_ino = a->ino + 1;
}

/* CREATE: the prepared inode (attributes, directory, target, xattrs) joins
 * the table under the name d in dir. */
void fs_apply_create(struct fs *fs, struct fs_inode *dir, struct fs_inode *in,
		     struct fs_dirent *d)
{
	fs_inode_insert(fs, in);
	fs_dirent_insert(fs, dir, d);
	if (in->dir) {
		in->dir->parent = dir->ino;
		in->dir->rooted = fs_dir_rooted(dir);
		dir->nlink++;
	}
	dir->mtime = dir->ctime = in->ctime;
	if (in->ino >= fs->next_ino)
		fs->next_ino = in->ino + 1;
}

/* LINK: one more name for a non-directory. */
void fs_apply_link(struct fs *fs, struct fs_inode *dir, struct fs_inode *in,
		   struct fs_dirent *d)
{
	fs_dirent_insert(fs, dir, d);
	in->nlink++;
	in->ctime = dir->mtime = dir->ctime = fs_now();
}

/* DIRENT (snapshots): a name whose link count the INODE record has. */
void fs_apply_dirent(struct fs *fs, struct fs_inode *dir, struct fs_inode *in,
		     struct fs_dirent *d)
{
	fs_dirent_insert(fs, dir, d);
	if (in->dir) {
		in->dir->parent = dir->ino;
		in->dir->rooted = fs_dir_rooted(dir);
	}
}

int fs_apply_unlink(struct fs *fs, uint64_t parent, const char *name)
{
	struct fs_inode *dir = fs_inode_get(fs, parent);
	struct fs_dirent *d;
	struct fs_inode *in;

	if (!dir || !dir->dir)
		return -ENOTDIR;
	d = fs_dirent_find(fs, parent, name);
	if (!d)
		return -ENOENT;
	in = fs_inode_get(fs, d->ino);
	fs_dirent_remove(fs, dir, d);
	if (!in)
		return 0;
	if (in->dir) {
		in->nlink = 0;
		if (dir->nlink > 2)
			dir->nlink--;
	} else if (in->nlink > 0) {
		in->nlink--;
	}
	in->ctime = fs_now();
	dir->mtime = dir->ctime = in->ctime;
	fs_inode_maybe_free(fs, in);
	return 0;
}

int fs_apply_rename(struct fs *fs, uint64_t p, const char *n, uint64_t np,
		    const char *nn, unsigned int flags, struct fs_dirent *d)
{
	struct fs_inode *pd = fs_inode_get(fs, p), *npd = fs_inode_get(fs, np);
	struct fs_dirent *src, *dst;
	int ret = 0;

	if (!pd || !npd || !pd->dir || !npd->dir) {
		ret = -ENOTDIR;
		goto out;
	}
	src = fs_dirent_find(fs, p, n);
	if (!src) {
		ret = -ENOENT;
		goto out;
	}
	dst = fs_dirent_find(fs, np, nn);
	if (src == dst)
		goto out;
	int64_t now = fs_now();
	if (flags & RENAME_EXCHANGE) {
		if (!dst) {
			ret = -ENOENT;
			goto out;
		}
		uint64_t a = src->ino, b = dst->ino;
		struct fs_inode *ia = fs_inode_get(fs, a), *ib = fs_inode_get(fs, b);
		src->ino = b;
		dst->ino = a;
		if (ia && ia->dir)
			ia->dir->self = dst;
		if (ib && ib->dir)
			ib->dir->self = src;
		if (p != np) {	/* moved directories change their parents' link counts */
			if (ia && ia->dir) { ia->dir->parent = np; npd->nlink++; pd->nlink--; }
			if (ib && ib->dir) { ib->dir->parent = p; pd->nlink++; npd->nlink--; }
		}
		pd->mtime = pd->ctime = npd->mtime = npd->ctime = now;
		goto out;
	}
	if (!d || d->ino != src->ino || d->parent != np) {
		ret = -EINVAL;	/* the caller's preallocation does not fit */
		goto out;
	}
	uint64_t ino = src->ino;
	if (dst)
		fs_apply_unlink(fs, np, nn);	/* dst exists in a directory */
	src = fs_dirent_find(fs, p, n);	/* still valid: unlink touched only dst */
	if (p == np) {		/* keeps its cookie: a listing shows it once */
		fs_dirent_replace(fs, pd, src, d);
	} else {
		fs_dirent_remove(fs, pd, src);
		fs_dirent_insert(fs, npd, d);
	}
	d = NULL;
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (in) {
		in->ctime = now;
		if (in->dir && p != np) {
			in->dir->parent = np;
			pd->nlink--;
			npd->nlink++;
		}
	}
	pd->mtime = pd->ctime = npd->mtime = npd->ctime = now;
out:
	free(d);
	return ret;
}

/* XATTR_SET: the value replaces any earlier one; user.zonefuse.lifetime
 * also makes its class the inode's (the strongest lifetime source). */
void fs_apply_xattr_set(struct fs *fs, struct fs_inode *in, struct fs_xattr *x)
{
	enum lifetime_class cls;

	if (strcmp(x->name, FS_XATTR_LIFETIME) == 0 &&
	    fs_xattr_lifetime_parse(x->value, x->size, &cls) == 0) {
		in->cls = (uint8_t)cls;
		in->cls_src = LIFETIME_SRC_XATTR;
	}
	fs_xattr_attach(in, x);
	fs_snap_account(fs, in);
}

void fs_apply_xattr_del(struct fs *fs, struct fs_inode *in, const char *name)
{
	fs_xattr_del_raw(in, name);
	fs_snap_account(fs, in);
}

/* SYMLINK: target (allocated by the caller) becomes in's. */
void fs_apply_symlink(struct fs *fs, struct fs_inode *in, char *target)
{
	free(in->symlink);
	in->symlink = target;
	fs_snap_account(fs, in);
}

/* Data records.  Dropped device ranges are reported to zalloc through
 * fs_drop_valid (a no-op while the bytes are not counted). [L+RW] */
int fs_apply_extent(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len,
		    uint64_t dev, uint64_t size_min)
{
	int ret = extmap_set(&in->map, off, len, dev, fs_drop_valid, fs);
	if (!ret && size_min > in->size)
		in->size = size_min;
	if (!ret && in->npa)
		fs_pa_sub(fs, in, off, len);	/* written: no longer only held */
	fs_snap_account(fs, in);
	return ret;
}

void fs_apply_truncate(struct fs *fs, struct fs_inode *in, uint64_t size)
{
	if (size < in->size)
		extmap_punch(&in->map, tail_start(size, fs_block_size(fs)), UINT64_MAX,
			     fs_drop_valid, fs);
	/* As on ext4, a truncate that does not grow the file releases what
	 * was fallocated past its end. */
	if (size <= in->size && in->npa)
		fs_pa_sub(fs, in, tail_start(size, fs_block_size(fs)), UINT64_MAX);
	in->size = size;
	fs_snap_account(fs, in);
}

void fs_apply_punch(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len)
{
	extmap_punch(&in->map, off, len, fs_drop_valid, fs);
	if (in->npa)
		fs_pa_sub(fs, in, off, len);
	fs_snap_account(fs, in);
}

void fs_apply_prealloc(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len)
{
	fs_pa_add(fs, in, off, len);
	fs_snap_account(fs, in);
}

/* COPY: the new references first (live: counted in the share table, so
 * that dropping dst's old range never takes a shared byte's last
 * reference), then dst's range replaced by the runs. */
int fs_apply_copy(struct fs *fs, struct fs_inode *dst, uint64_t off, uint64_t len,
		  uint64_t size, uint8_t cls, uint8_t cls_src, const struct fs_cext *v,
		  uint32_t n)
{
	int ret = extmap_reserve(&dst->map, n + 2);	/* live: reserved already */

	if (ret)
		return ret;
	if (fs->valid_counted)
		for (uint32_t i = 0; i < n; i++)
			fs_share_ref(fs, v[i].dev, v[i].len);
	extmap_punch(&dst->map, off, len, fs_drop_valid, fs);
	for (uint32_t i = 0; i < n && !ret; i++)
		ret = extmap_set(&dst->map, v[i].off, v[i].len, v[i].dev, fs_drop_valid, fs);
	if (size > dst->size)
		dst->size = size;
	if (dst->npa)
		fs_pa_sub(fs, dst, off, len);
	dst->cls = cls;
	dst->cls_src = cls_src;
	fs_snap_account(fs, dst);
	return ret;
}

int fs_apply_remap(struct fs *fs, const struct fs_cext *v, uint32_t n)
{
	int ret = 0;

	for (uint32_t i = 0; i < n && !ret; i++) {
		struct fs_inode *in = fs_inode_get(fs, v[i].ino);
		if (in && S_ISREG(in->mode)) {	/* gone: freed later in the log */
			ret = extmap_set(&in->map, v[i].off, v[i].len, v[i].dev, fs_drop_valid, fs);
			fs_snap_account(fs, in);
		}
	}
	return ret;
}

/* ---- validation (live and replay) ---- */

/* Is `ino` equal to `anc` or below it?  No chain of parents is longer than
 * the inode table, whatever the depth a user built, so a longer walk can
 * only be a loop (a damaged log): counted as "below" (refused). */
bool fs_is_below(struct fs *fs, uint64_t ino, uint64_t anc)
{
	for (size_t steps = 0; steps <= fs->ninodes; steps++) {
		if (ino == anc)
			return true;
		struct fs_inode *in = fs_inode_get(fs, ino);
		/* a directory not named yet (snapshot replay) is its own parent */
		if (!in || !in->dir || ino == FS_ROOT_INO || in->dir->parent == ino)
			return false;
		ino = in->dir->parent;
	}
	return true;
}

int fs_rename_check(struct fs *fs, uint64_t p, const char *n, uint64_t np,
		    const char *nn, unsigned int flags)
{
	struct fs_inode *pd = fs_inode_get(fs, p), *npd = fs_inode_get(fs, np);
	if (flags & ~(unsigned int)(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE)))
		return -EINVAL;
	if (!pd || !npd)
		return -ENOENT;
	if (!pd->dir || !npd->dir)
		return -ENOTDIR;
	struct fs_dirent *src = fs_dirent_find(fs, p, n), *dst = fs_dirent_find(fs, np, nn);
	struct fs_inode *sin = src ? fs_inode_get(fs, src->ino) : NULL;
	struct fs_inode *din = dst ? fs_inode_get(fs, dst->ino) : NULL;
	if (!src || !sin)
		return -ENOENT;
	if (dst && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (!dst && (flags & RENAME_EXCHANGE))
		return -ENOENT;
	if (dst && dst->ino == src->ino)	/* same inode: POSIX says do nothing */
		return 1;
	/* A directory cannot move below itself. */
	if ((sin->dir && fs_is_below(fs, np, sin->ino)) ||
	    ((flags & RENAME_EXCHANGE) && din && din->dir && fs_is_below(fs, p, din->ino)))
		return -EINVAL;
	if (din && !(flags & RENAME_EXCHANGE)) {
		if (sin->dir && !din->dir)
			return -ENOTDIR;
		if (!sin->dir && din->dir)
			return -EISDIR;
		if (din->dir && din->dir->live > 0)
			return -ENOTEMPTY;
	}
	return 0;
}
