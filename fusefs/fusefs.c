/* fusefs — FUSE low-level handlers (see fusefs.h).  Every handler calls one
 * fs_* function and replies once with its result. */
#include "fusefs/fusefs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_stats.h"

static struct fusefs *ff_of(fuse_req_t req) { return fuse_req_userdata(req); }
static struct fs *fs_of(fuse_req_t req) { return ff_of(req)->fs; }

static void reply_err(fuse_req_t req, int ret)
{
	fuse_reply_err(req, ret < 0 ? -ret : ret);
}

static void reply_entry(fuse_req_t req, int ret, const struct stat *st)
{
	struct fusefs *ff = ff_of(req);
	struct fuse_entry_param e;

	if (ret == -ENOENT) {	/* negative entry, cached by the kernel */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = ff->conf.entry_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	if (ret) {
		reply_err(req, ret);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = st->st_ino;
	e.generation = 1;
	e.attr = *st;
	e.attr_timeout = ff->conf.attr_timeout;
	e.entry_timeout = ff->conf.entry_timeout;
	fuse_reply_entry(req, &e);
}

static struct fs_ctx ctx_of(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	return (struct fs_ctx){ .uid = c->uid, .gid = c->gid, .tid = (uint32_t)c->pid };	/* FUSE gives the thread id */
}

/* The mode of a new inode in parent: the caller's umask applies unless
 * parent has a default ACL, which limits the mode instead (fs.h).  With
 * FUSE_CAP_DONT_MASK the kernel leaves the umask to us; without it, it
 * applied it already and applying it again changes nothing. */
static mode_t create_mode(fuse_req_t req, fuse_ino_t parent, mode_t mode)
{
	if (fs_getxattr(fs_of(req), parent, FS_ACL_DEFAULT, NULL, 0) == -ENODATA)
		mode &= ~(fuse_req_ctx(req)->umask & 0777);
	return mode;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fusefs *ff = userdata;

	/* Without the write-back cache every write() waits for its WRITE, so
	 * a refusal (ENOSPC) fails that write() rather than a later fsync():
	 * for a replicating server on top (a Gluster brick), which marks a
	 * copy for healing when a write fails but not when an fsync does. */
	if (ff->conf.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	/* The kernel enforces POSIX ACLs (and turns default_permissions on);
	 * zonefuse stores them, keeps the mode in sync and does inheritance,
	 * which needs the umask left to it (fs_acl_new_prepare). */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	else
		zf_warn("the kernel offers no POSIX ACL support: ACLs are stored but not enforced");
	/* READ replies spliced from the device's file (op_read). */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	conn->max_write = 1u << 20;
	if (ff->conf.max_read)
		conn->max_read = ff->conf.max_read;	/* must match the mount's */
	if (ff->conf.max_readahead)
		conn->max_readahead = ff->conf.max_readahead;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
}

static void op_destroy(void *userdata)
{
	(void)userdata;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stat st;
	int ret = fs_lookup(fs_of(req), parent, name, &st);
	reply_entry(req, ret, &st);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_forget(fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		fs_forget(fs_of(req), f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

void fusefs_wb_error_note(struct fusefs *ff, uint64_t ino, int err)
{
	struct fusefs_wb_errors *w = &ff->wb;
	pthread_mutex_lock(&w->lock);
	unsigned int n = atomic_load(&w->n), i = 0;
	while (i < n && w->e[i].ino != ino)
		i++;
	if (i == n && n < FUSEFS_WB_ERRORS) {
		w->e[n].ino = ino;
		w->e[n].err = err;
		atomic_store(&w->n, n + 1);
	}
	pthread_mutex_unlock(&w->lock);
	/* Attributes only (offset < 0): no page is touched, so this cannot
	 * wait for the write-back that sent the WRITE. */
	if (ff->se)
		(void)fuse_lowlevel_notify_inval_inode(ff->se, ino, -1, 0);
}

/* The write-back error noted for ino, now taken (0: none). */
static int wb_error_take(struct fusefs *ff, uint64_t ino)
{
	struct fusefs_wb_errors *w = &ff->wb;
	int err = 0;

	if (atomic_load(&w->n) == 0)
		return 0;
	pthread_mutex_lock(&w->lock);
	unsigned int n = atomic_load(&w->n);
	for (unsigned int i = 0; i < n; i++) {
		if (w->e[i].ino == ino) {
			err = w->e[i].err;
			w->e[i] = w->e[n - 1];
			atomic_store(&w->n, n - 1);
			break;
		}
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

static uint64_t fh_of(fuse_ino_t ino, int flags)
{
	return ino | ((flags & O_ACCMODE) != O_RDONLY ? FUSEFS_FH_WRITE : 0);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret = 0;
	/* With a writer's file handle: the kernel asks before a write() (or a
	 * seek to the end, or a read past it) of that writer. */
	if (fi && (fi->fh & FUSEFS_FH_WRITE))
		ret = wb_error_take(ff_of(req), ino);
	if (!ret)
		ret = fs_getattr(fs_of(req), ino, &st);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_attr(req, &st, ff_of(req)->conf.attr_timeout);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	unsigned flags = 0;
	struct stat st;

	(void)fi;
	if (to_set & FUSE_SET_ATTR_MODE) flags |= FS_SET_MODE;
	if (to_set & FUSE_SET_ATTR_UID) flags |= FS_SET_UID;
	if (to_set & FUSE_SET_ATTR_GID) flags |= FS_SET_GID;
	if (to_set & FUSE_SET_ATTR_SIZE) flags |= FS_SET_SIZE;
	if (to_set & FUSE_SET_ATTR_ATIME) flags |= FS_SET_ATIME;
	if (to_set & FUSE_SET_ATTR_MTIME) flags |= FS_SET_MTIME;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) flags |= FS_SET_ATIME_NOW;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) flags |= FS_SET_MTIME_NOW;
	if (to_set & FUSE_SET_ATTR_CTIME) flags |= FS_SET_CTIME;
	if (fusefs_io_take_kill_suidgid())
		flags |= FS_SET_KILL_SUIDGID;
	int ret = fs_setattr(fs_of(req), ino, attr, flags, &st);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_attr(req, &st, ff_of(req)->conf.attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[4097];
	int ret = fs_readlink(fs_of(req), ino, buf, sizeof(buf) - 1);
	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	buf[ZF_MIN((size_t)ret, sizeof(buf) - 1)] = 0;
	fuse_reply_readlink(req, buf);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct stat st;
	struct fs_ctx c = ctx_of(req);
	int ret = fs_mknod(fs_of(req), parent, name, create_mode(req, parent, mode), rdev, &c, &st);
	if (ret)
		reply_err(req, ret);
	else
		reply_entry(req, 0, &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct stat st;
	struct fs_ctx c = ctx_of(req);
	int ret = fs_mkdir(fs_of(req), parent, name, create_mode(req, parent, mode), &c, &st);
	if (ret)
		reply_err(req, ret);
	else
		reply_entry(req, 0, &st);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct stat st;
	struct fs_ctx c = ctx_of(req);
	int ret = fs_symlink(fs_of(req), parent, name, link, &c, &st);
	if (ret)
		reply_err(req, ret);
	else
		reply_entry(req, 0, &st);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct stat st;
	int ret = fs_link(fs_of(req), ino, newparent, newname, &st);
	if (ret)
		reply_err(req, ret);
	else
		reply_entry(req, 0, &st);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_err(req, fs_unlink(fs_of(req), parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_err(req, fs_rmdir(fs_of(req), parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	reply_err(req, fs_rename(fs_of(req), parent, name, newparent, newname, flags));
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int ret = fs_open(fs_of(req), ino, fi->flags);
	(void)fusefs_io_take_kill_suidgid();
	if (ret) {
		reply_err(req, ret);
		return;
	}
	fi->keep_cache = 1;	/* only the kernel changes our files */
	fi->fh = fh_of(ino, fi->flags);
	if (fuse_reply_open(req, fi) == -ENOENT)	/* the opener went away */
		fs_release(fs_of(req), ino);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fusefs *ff = ff_of(req);
	struct fs_ctx c = ctx_of(req);
	struct fuse_entry_param e;
	struct stat st;
	int ret = fs_mknod(ff->fs, parent, name, S_IFREG | (create_mode(req, parent, mode) & 07777),
			   0, &c, &st);

	if (ret) {
		reply_err(req, ret);
		return;
	}
	ret = fs_open(ff->fs, st.st_ino, fi->flags);
	if (ret) {
		fs_forget(ff->fs, st.st_ino, 1);
		reply_err(req, ret);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = st.st_ino;
	e.generation = 1;
	e.attr = st;
	e.attr_timeout = ff->conf.attr_timeout;
	e.entry_timeout = ff->conf.entry_timeout;
	fi->keep_cache = 1;
	fi->fh = fh_of(st.st_ino, fi->flags);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		fs_release(ff->fs, st.st_ino);
		fs_forget(ff->fs, st.st_ino, 1);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	uint32_t tid = (uint32_t)fuse_req_ctx(req)->pid;	/* req dies with the reply */
	struct fs_rbuf rb;
	(void)fi;
	ssize_t n = fs_read_buf(fs, ino, (uint64_t)off, size, FS_READ_FD, &rb);
	if (n < 0) {
		reply_err(req, (int)n);
	} else if (rb.at_fd) {
		/* libfuse splices the bytes from the device's file into the
		 * reply (no copy through a buffer; a small reply it reads and
		 * writes); no FUSE_BUF_SPLICE_MOVE: the pages are the device's. */
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT((size_t)n);
		bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		bv.buf[0].fd = rb.fd;
		bv.buf[0].pos = (off_t)rb.fd_off;
		fuse_reply_data(req, &bv, 0);
		fs_note_read(fs, ino, tid, (uint64_t)n);
	} else {
		fuse_reply_buf(req, n ? (const char *)rb.p : NULL, (size_t)n);
		fs_note_read(fs, ino, tid, (uint64_t)n);
	}
	/* The reply is written to the kernel before fuse_reply_* returns, so
	 * the bytes may be released right after it. */
	fs_rbuf_put(&rb);
}

/* The kernel takes the reply to a WRITE of its write-back as all or
 * nothing (it does not read the count), so when fs_write took only part
 * of one (n bytes of size: the next block failed), the rest is written
 * again, until all of it is taken or a call fails with nothing taken: that
 * call's error (no memory, a device error) is the reply, or the rest would
 * be lost unnoticed.  A WRITE from write() (O_DIRECT) returns the part to
 * its caller. */
static ssize_t writeback_whole(struct fs *fs, uint64_t ino, uint64_t off, const uint8_t *buf,
			       size_t size, ssize_t n, bool writeback)
{
	size_t done = 0;
	while (writeback && n > 0 && done + (size_t)n < size) {
		done += (size_t)n;
		n = fs_write(fs, ino, off + done, buf + done, size - done, false);
	}
	return n < 0 ? n : (ssize_t)done + n;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	struct fusefs *ff = ff_of(req);	/* req is gone once replied to */
	bool kill = fusefs_io_take_kill_suidgid();
	if (off < 0) {
		reply_err(req, -EINVAL);
		return;
	}
	ssize_t n = writeback_whole(ff->fs, ino, (uint64_t)off, (const uint8_t *)buf, size,
				    fs_write(ff->fs, ino, (uint64_t)off, buf, size, kill),
				    fi->writepage);
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
	if (n < 0 && fi->writepage)
		fusefs_wb_error_note(ff, ino, (int)n);
}

void fusefs_write_direct(struct fusefs *ff, struct fusefs_rx *rx)
{
	const struct fuse_in_header *h = (const void *)rx->flat;
	const struct fuse_write_in *w = (const void *)(rx->flat + sizeof(*h));
	bool kill = fusefs_io_take_kill_suidgid();
	bool writeback = w->write_flags & FUSE_WRITE_CACHE;
	ssize_t n = w->offset > (uint64_t)INT64_MAX ? -EINVAL :
		writeback_whole(ff->fs, h->nodeid, w->offset, rx->donor->base, w->size,
				fs_write_donated(ff->fs, h->nodeid, w->offset, rx->donor,
						 w->size, kill), writeback);
	struct fuse_write_out wo = { .size = n > 0 ? (uint32_t)n : 0 };
	struct fuse_out_header oh = {
		.len = (uint32_t)(sizeof(oh) + (n < 0 ? 0 : sizeof(wo))),
		.error = n < 0 ? (int32_t)n : 0,
		.unique = h->unique,
	};
	struct iovec iov[2] = { { &oh, sizeof(oh) }, { &wo, sizeof(wo) } };
	fusefs_io_send(ff, iov, n < 0 ? 1 : 2);
	if (n < 0 && writeback)
		fusefs_wb_error_note(ff, h->nodeid, (int)n);
	if (atomic_load(&rx->donor->refs) > 1) {	/* kept by the write buffer */
		fs_donor_put(rx->donor);
		rx->donor = NULL;
	}
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* close() has reported the write-back's errors (the kernel's): a
	 * writer opening the file later must not get them again. */
	if (fi->fh & FUSEFS_FH_WRITE)
		(void)wb_error_take(ff_of(req), ino);
	reply_err(req, fs_release(fs_of(req), ino));
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)fi;
	reply_err(req, fs_fsync(fs_of(req), ino, datasync != 0));
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret = fs_getattr(fs_of(req), ino, &st);
	if (!ret && !S_ISDIR(st.st_mode))
		ret = -ENOTDIR;
	if (ret) {
		reply_err(req, ret);
		return;
	}
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

struct dirbuf {
	fuse_req_t req;
	char *buf;
	size_t size, used;
	bool plus;
	double attr_timeout, entry_timeout;
};

static int dir_add(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
	struct dirbuf *d = arg;
	size_t room = d->size - d->used, need;

	if (d->plus) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		bool dot = strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
		e.attr = *st;
		if (!dot) {	/* "." and ".." carry no lookup reference */
			e.ino = st->st_ino;
			e.generation = 1;
			e.attr_timeout = d->attr_timeout;
			e.entry_timeout = d->entry_timeout;
		}
		need = fuse_add_direntry_plus(d->req, d->buf + d->used, room, name, &e,
					      (off_t)next_off);
	} else {
		need = fuse_add_direntry(d->req, d->buf + d->used, room, name, st,
					 (off_t)next_off);
	}
	if (need > room)
		return 1;
	d->used += need;
	return 0;
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct fusefs *ff = ff_of(req);
	struct dirbuf d = { .req = req, .size = size, .plus = plus,
			    .attr_timeout = ff->conf.attr_timeout,
			    .entry_timeout = ff->conf.entry_timeout };
	d.buf = malloc(size ? size : 1);
	if (!d.buf) {
		reply_err(req, -ENOMEM);
		return;
	}
	int ret = fs_readdir(ff->fs, ino, off < 0 ? 0 : (uint64_t)off, plus, dir_add, &d);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	reply_err(req, fs_commit(fs_of(req)));
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st;
	(void)ino;
	int ret = fs_statfs(fs_of(req), &st);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_statfs(req, &st);
}

/* Whether the caller is in group gid (its gid or a supplementary one). */
static bool in_group(fuse_req_t req, gid_t gid)
{
	gid_t small[32], *g = small;
	int n = fuse_req_getgroups(req, (int)ZF_ARRAY_SIZE(small), small);
	bool found = fuse_req_ctx(req)->gid == gid;

	if (n > (int)ZF_ARRAY_SIZE(small) && (g = malloc((size_t)n * sizeof(*g))))
		n = ZF_MIN(n, fuse_req_getgroups(req, n, g));
	else if (n > (int)ZF_ARRAY_SIZE(small))
		return true;	/* unknown: keep the bit rather than drop it wrongly */
	for (int i = 0; i < n && !found; i++)
		found = g[i] == gid;
	if (g != small)
		free(g);
	return found;
}

/* Setting an access ACL clears the set-group-id bit unless the caller is in
 * the file's group or is root, as the kernel does for local file systems;
 * for FUSE it leaves that to the daemon (its flag for it needs
 * FUSE_SETXATTR_EXT, which libfuse 3.14 does not offer). */
static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct stat st;

	flags &= XATTR_CREATE | XATTR_REPLACE;
	if (strcmp(name, FS_ACL_ACCESS) == 0 && fuse_req_ctx(req)->uid != 0 &&
	    fs_getattr(fs_of(req), ino, &st) == 0 && (st.st_mode & S_ISGID) &&
	    !in_group(req, st.st_gid))
		flags |= FS_XATTR_KILL_SGID;
	reply_err(req, fs_setxattr(fs_of(req), ino, name, value, size, flags));
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = NULL;
	if (size && !(buf = malloc(size))) {
		reply_err(req, -ENOMEM);
		return;
	}
	int ret = fs_getxattr(fs_of(req), ino, name, buf, size);
	if (ret < 0)
		reply_err(req, ret);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)ret);
	else
		fuse_reply_buf(req, buf, (size_t)ret);
	free(buf);
}

/* The list without trusted.* names (n bytes of NUL-terminated names,
 * filtered in place); the new length. */
static size_t drop_trusted(char *list, size_t n)
{
	size_t out = 0;
	for (size_t i = 0; i < n;) {
		size_t l = strnlen(list + i, n - i) + 1;
		if (strncmp(list + i, "trusted.", 8) != 0) {
			memmove(list + out, list + i, l);
			out += l;
		}
		i += l;
	}
	return out;
}

/* trusted.* names are listed to root only, as on ext4 (CAP_SYS_ADMIN;
 * the kernel already refuses their values to others). */
static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	bool all = fuse_req_ctx(req)->uid == 0;
	struct fs *fs = fs_of(req);
	char *buf = NULL;
	int ret;

	if (all) {
		if (size && !(buf = malloc(size))) {
			reply_err(req, -ENOMEM);
			return;
		}
		ret = fs_listxattr(fs, ino, buf, size);
	} else {
		/* The whole list, then the filter: the size asked for is the
		 * filtered one. */
		do {
			ret = fs_listxattr(fs, ino, NULL, 0);
			free(buf);
			buf = ret > 0 ? malloc((size_t)ret) : NULL;
			if (ret > 0 && !buf)
				ret = -ENOMEM;
			else if (ret > 0)
				ret = fs_listxattr(fs, ino, buf, (size_t)ret);
		} while (ret == -ERANGE);
		if (ret > 0)
			ret = (int)drop_trusted(buf, (size_t)ret);
		if (ret > 0 && size && (size_t)ret > size)
			ret = -ERANGE;
	}
	if (ret < 0)
		reply_err(req, ret);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)ret);
	else
		fuse_reply_buf(req, buf, (size_t)ret);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	reply_err(req, fs_removexattr(fs_of(req), ino, name));
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			 off_t len, struct fuse_file_info *fi)
{
	(void)fi;
	if (off < 0 || len <= 0) {
		reply_err(req, -EINVAL);
		return;
	}
	reply_err(req, fs_fallocate(fs_of(req), ino, mode, (uint64_t)off, (uint64_t)len));
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	(void)fi_in;
	(void)fi_out;
	if (off_in < 0 || off_out < 0 || flags < 0) {
		reply_err(req, -EINVAL);
		return;
	}
	/* the reply's count is 32 bits: a longer copy is a short one (the
	 * caller asks again for the rest) */
	len = ZF_MIN(len, (size_t)(UINT32_MAX & ~4095u));
	ssize_t n = fs_copy_file_range(fs_of(req), ino_in, (uint64_t)off_in, ino_out,
				       (uint64_t)off_out, len, (unsigned int)flags);
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	(void)fi;
	int64_t ret = fs_lseek(fs_of(req), ino, off, whence);
	if (ret < 0)
		reply_err(req, (int)ret);
	else
		fuse_reply_lseek(req, (off_t)ret);
}

const struct fuse_lowlevel_ops fusefs_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.link = op_link,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write = op_write,
	/* No .flush: libfuse answers FLUSH with ENOSYS and the kernel stops
	 * sending it, one round trip less per close.  close() still waits for
	 * the write-back of the file's pages (and reports its errors); the
	 * write-out of what is left buffered follows the RELEASE within
	 * write_behind_ms (fs_release), and a device error of a write-out is
	 * the next fsync's (zonefuse(8), NOTES). */
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
	.copy_file_range = op_copy_file_range,
};
