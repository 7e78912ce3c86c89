/* fs_namei — the namespace operations: lookup, attributes, create, link,
 * unlink, rename, readlink, open/release and readdir.  Each validates,
 * appends its one record (fs_records.c), then applies it with the same
 * function replay uses (fs_apply.c): log first, then memory. */
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
	uint64_t bytes = S_ISREG(in->mode) ?
			 extmap_bytes(&in->map) + in->buffered + in->pa_bytes : 0;
	st->st_blocks = (blkcnt_t)(bytes / 512);
	st->st_atim = zf_ns_to_timespec(in->atime);
	st->st_mtim = zf_ns_to_timespec(in->mtime);
	st->st_ctim = zf_ns_to_timespec(in->ctime);
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

int fs_setattr(struct fs *fs, uint64_t ino, const struct stat *attr,
	       unsigned int flags, struct stat *out)
{
	int ret = 0;
	struct fs_inode *in;

	if (fs->read_only)
		return -EROFS;
	in = fs_inode_pin(fs, ino);
	if (!in)
		return -ENOENT;

	if (flags & FS_SET_SIZE) {
		if (!S_ISREG(in->mode)) {
			ret = S_ISDIR(in->mode) ? -EISDIR : -EINVAL;
			goto unpin;
		}
		fs_rw_wrlock(in);
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
			a.mode = fs_mode_kill_suidgid(a.mode);
	}
	if (flags & FS_SET_KILL_SUIDGID)
		a.mode = fs_mode_kill_suidgid(a.mode);
	if (flags & FS_SET_ATIME_NOW)
		a.atime = now;
	else if (flags & FS_SET_ATIME)
		a.atime = zf_timespec_to_ns(attr->st_atim);
	if (flags & FS_SET_MTIME_NOW)
		a.mtime = now;
	else if (flags & FS_SET_MTIME)
		a.mtime = zf_timespec_to_ns(attr->st_mtim);
	if (flags & FS_SET_SIZE)
		a.mtime = now;
	/* The kernel sends the ctime it keeps with the writeback cache; any
	 * other change stamps it now. */
	a.ctime = flags & FS_SET_CTIME ? zf_timespec_to_ns(attr->st_ctim) : now;
	/* Size changes are logged by fs_data_truncate; times alone are cheap
	 * to lose, so log the rest now only when something durable changed. */
	if (flags & FS_SET_MODE)	/* an access ACL follows the mode */
		ret = fs_acl_chmod_locked(fs, in, a.mode);
	if (!ret && (flags & (FS_SET_MODE | FS_SET_UID | FS_SET_GID | FS_SET_KILL_SUIDGID |
			      FS_SET_ATIME | FS_SET_MTIME))) {
		ret = fs_log_inode(fs, &a);
		if (!ret) {
			fs_apply_attr(fs, in, &a);
			in->attr_dirty = false;
		}
	} else if (!ret) {
		fs_apply_attr(fs, in, &a);
		in->attr_dirty = true;
	}
	if (!ret && out)
		fs_fill_stat(fs, in, out);
	pthread_mutex_unlock(&fs->lock);
unpin:
	fs_inode_unpin(fs, in);
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
	struct fs_acl_new acl = { NULL, NULL };
	int ret = check_name(name);
	if (ret)
		return ret;
	if (target && strlen(target) >= 4096)
		return -ENAMETOOLONG;
	if (fs->read_only)
		return -EROFS;
	/* A new table's level is guessed from the LSM as the MANIFEST says
	 * it is: read what the store appended to it first, so that the edits
	 * of the jobs that ended before this create (their outputs' levels,
	 * flushes, tables moved down) are in.  The collector's periodic read
	 * falls behind by hundreds of tables while it copies data.  No lock
	 * may be held for it. */
	if (S_ISREG(mode) && lifetime_is_table(name))
		fs_lifetime_tail_manifests(fs);
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
	ret = fs_acl_new_prepare(dir, &a.mode, &acl);
	if (ret)
		goto out;
	ret = fs_inode_prepare(fs, &a, parent, target, &in);
	if (ret)
		goto out;
	fs_acl_new_attach(in, &acl);
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
	fs_acl_new_free(&acl);
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

/* May a closed file's buffers wait for the write-behind (fs_commit.c)
 * instead of going out now?  A log that is unlinked soon after its close
 * (an LSM tree's, once its table is written) then never reaches the zones.
 * Not when the buffer is pressed, nor for a file over its share of it.
 * [RW] */
static bool may_write_behind(struct fs *fs, const struct fs_inode *in)
{
	return fs_write_behind_on(fs) && in->nchunks && in->buffered <= fs_file_share(fs) &&
	       fs->buffered <= fs->opts.buffer_bytes / 2;
}

int fs_release(struct fs *fs, uint64_t ino)
{
	int ret = 0;
	bool behind = false;
	struct fs_inode *in = fs_inode_pin(fs, ino);
	if (!in)
		return -ENOENT;

	/* Closing writes the file's buffers out (not a commit), now or within
	 * write_behind_ms: files that are done are written while their zone
	 * class is still open. */
	if (S_ISREG(in->mode)) {
		fs_rw_wrlock(in);
		if (in->nopen <= 1) {	/* the last close: write-back starts afresh */
			in->wb_cut = UINT64_MAX;
			in->wb_grow_from = UINT64_MAX;
		}
		if (in->nlink > 0 && !(behind = may_write_behind(fs, in)))
			ret = fs_data_writeout(fs, in, true);
		fs_pf_invalidate(fs, in);	/* read-ahead memory goes back */
		pthread_rwlock_unlock(&in->rw);
	}
	pthread_mutex_lock(&fs->lock);
	in->pins--;
	if (in->nopen)
		in->nopen--;
	fs_lifetime_note_release(fs, in);
	if (behind)
		fs_behind_add(fs, in);
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
	for (size_t i = fs_dir_slot(dir->dir, off + 1); i < dir->dir->n; i++) {
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
