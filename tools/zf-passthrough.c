/*
 * zf-passthrough: the thinnest FUSE passthrough we could write, used as the
 * FUSE-overhead reference in scripts/bench.sh.  It mirrors a source directory
 * at a mount point:
 *
 *   zf-passthrough SOURCE MOUNTPOINT [-f] [-s] [-d] [-o opt,...]
 *
 * Design (the same shape as libfuse's passthrough_ll example, our own code):
 *  - FUSE low-level API, multithreaded session loop;
 *  - every inode the kernel knows is an O_PATH descriptor kept in a table
 *    keyed by (st_dev, st_ino), so hard links and repeated lookups share one
 *    node; the FUSE node id is the address of the table entry;
 *  - lookup counting: each reply that hands the kernel a node (lookup,
 *    create, mkdir, mknod, symlink, link) adds one, FORGET subtracts what the
 *    kernel says, and the entry and its descriptor go away at zero;
 *  - data goes through the descriptor opened at OPEN/CREATE: READ replies with
 *    a descriptor buffer (libfuse reads or splices it), WRITE_BUF copies the
 *    request buffer (possibly a pipe) straight into the file;
 *  - the kernel writeback cache is on (unless -o no_writeback), so files are
 *    opened read-write and without O_APPEND, as that mode requires;
 *  - no xattr handlers: the kernel gets ENOSYS once and stops asking.
 *
 * Options (-o):
 *   cache=always|normal  always (default): attributes and entries are cached
 *                        for `timeout` seconds and page cache survives open
 *                        (keep_cache): right while nothing changes SOURCE
 *                        behind the mount, which the writeback cache assumes
 *                        anyway.  normal: 1 s timeouts, page cache dropped on
 *                        each open (passthrough_ll's default).
 *   timeout=S            attribute/entry timeout for cache=always [5]
 *   readahead_kb=N       max_readahead offered at INIT [kernel's default]
 *   no_writeback         do not ask for the writeback cache
 * plus libfuse's own (-o max_threads=N, allow_other, ...).
 *
 * Limits: files are created with the caller's fsuid/fsgid (supplementary
 * groups are not switched), times of symlinks cannot be set, no locks
 * are forwarded (the kernel keeps POSIX/flock locks locally), no xattrs.
 */
#define FUSE_USE_VERSION 35

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#define PROG "zf-passthrough"

struct node {
	struct node *next;	/* hash chain */
	int fd;			/* O_PATH descriptor */
	dev_t dev;
	ino_t ino;
	uint64_t nlookup;	/* under table lock */
};

struct pt {
	pthread_mutex_t lock;
	struct node **bucket;
	size_t nbucket;
	size_t count;
	struct node root;
	double timeout;
	bool keep_cache;
	bool writeback;
	unsigned readahead;
};

struct dir_handle {
	DIR *dp;
	off_t pos;	/* offset the next readdir() returns from */
};

static struct pt *pt_of(fuse_req_t req) { return fuse_req_userdata(req); }

static struct node *node_of(fuse_req_t req, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &pt_of(req)->root;
	return (struct node *)(uintptr_t)ino;
}

static int fd_of(fuse_req_t req, fuse_ino_t ino) { return node_of(req, ino)->fd; }

/* "/proc/self/fd/N": reopening or changing a file known by an O_PATH fd. */
static void proc_path(char *buf, size_t len, int fd)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* ---- node table --------------------------------------------------------- */

static size_t hash_of(dev_t dev, ino_t ino, size_t n)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;
	h ^= h >> 29;
	return (size_t)(h % n);
}

/* Called with the lock held. */
static int table_grow(struct pt *pt)
{
	size_t n = pt->nbucket ? pt->nbucket * 2 : 1024;
	struct node **b = calloc(n, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < pt->nbucket; i++) {
		struct node *e = pt->bucket[i], *next;
		for (; e; e = next) {
			next = e->next;
			size_t h = hash_of(e->dev, e->ino, n);
			e->next = b[h];
			b[h] = e;
		}
	}
	free(pt->bucket);
	pt->bucket = b;
	pt->nbucket = n;
	return 0;
}

/*
 * Hands the kernel one more reference to the object behind `fd` (an O_PATH
 * descriptor, consumed) with attributes `st`: the existing node if the
 * object is known, else a new one.  Returns the node or NULL (ENOMEM).
 */
static struct node *table_get(struct pt *pt, int fd, const struct stat *st)
{
	struct node *n;

	pthread_mutex_lock(&pt->lock);
	if (st->st_dev == pt->root.dev && st->st_ino == pt->root.ino) {
		/* ".." of a top-level dir, or a bind loop: the root never goes */
		pthread_mutex_unlock(&pt->lock);
		close(fd);
		return &pt->root;
	}
	size_t h = hash_of(st->st_dev, st->st_ino, pt->nbucket);
	for (n = pt->bucket[h]; n; n = n->next) {
		if (n->dev == st->st_dev && n->ino == st->st_ino) {
			n->nlookup++;
			pthread_mutex_unlock(&pt->lock);
			close(fd);
			return n;
		}
	}
	if (pt->count >= pt->nbucket && table_grow(pt) == 0)
		h = hash_of(st->st_dev, st->st_ino, pt->nbucket);
	n = calloc(1, sizeof(*n));
	if (!n) {
		pthread_mutex_unlock(&pt->lock);
		close(fd);
		return NULL;
	}
	n->fd = fd;
	n->dev = st->st_dev;
	n->ino = st->st_ino;
	n->nlookup = 1;
	n->next = pt->bucket[h];
	pt->bucket[h] = n;
	pt->count++;
	pthread_mutex_unlock(&pt->lock);
	return n;
}

static void table_put(struct pt *pt, struct node *n, uint64_t count)
{
	if (n == &pt->root)
		return;
	pthread_mutex_lock(&pt->lock);
	if (count > n->nlookup) {
		fprintf(stderr, PROG ": error: forget %" PRIu64 " > %" PRIu64 " lookups\n",
			count, n->nlookup);
		count = n->nlookup;
	}
	n->nlookup -= count;
	if (n->nlookup == 0) {
		struct node **p = &pt->bucket[hash_of(n->dev, n->ino, pt->nbucket)];
		while (*p != n)
			p = &(*p)->next;
		*p = n->next;
		pt->count--;
		pthread_mutex_unlock(&pt->lock);
		close(n->fd);
		free(n);
		return;
	}
	pthread_mutex_unlock(&pt->lock);
}

/* ---- entries -------------------------------------------------------------- */

/* Looks `name` up in `parent`; on success fills `e` (with a new reference). */
static int do_lookup(fuse_req_t req, fuse_ino_t parent, const char *name,
		     struct fuse_entry_param *e)
{
	struct pt *pt = pt_of(req);
	struct stat st;

	memset(e, 0, sizeof(*e));
	e->attr_timeout = pt->timeout;
	e->entry_timeout = pt->timeout;
	int fd = openat(fd_of(req, parent), name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
		int err = errno;
		close(fd);
		return err;
	}
	struct node *n = table_get(pt, fd, &st);
	if (!n)
		return ENOMEM;
	e->ino = n == &pt->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
	e->attr = st;
	return 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err = do_lookup(req, parent, name, &e);

	if (err == ENOENT && pt_of(req)->keep_cache) {
		memset(&e, 0, sizeof(e));	/* negative entry, cached */
		e.entry_timeout = pt_of(req)->timeout;
		fuse_reply_entry(req, &e);
	} else if (err) {
		fuse_reply_err(req, err);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	table_put(pt_of(req), node_of(req, ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		table_put(pt_of(req), node_of(req, f[i].ino), f[i].nlookup);
	fuse_reply_none(req);
}

/* New objects belong to the caller: switch this thread's fs ids around it. */
struct creds { uid_t uid; gid_t gid; };

static struct creds creds_enter(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct creds old;
	old.gid = (gid_t)setfsgid(c->gid);
	old.uid = (uid_t)setfsuid(c->uid);
	return old;
}

static void creds_leave(struct creds old)
{
	setfsuid(old.uid);
	setfsgid(old.gid);
}

/* Finishes mknod/mkdir/symlink/link: `err` is the syscall's errno (0 = ok). */
static void reply_new(fuse_req_t req, int err, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (!err)
		err = do_lookup(req, parent, name, &e);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	struct creds old = creds_enter(req);
	int err = mknodat(fd_of(req, parent), name, mode, rdev) ? errno : 0;
	creds_leave(old);
	reply_new(req, err, parent, name);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct creds old = creds_enter(req);
	int err = mkdirat(fd_of(req, parent), name, mode) ? errno : 0;
	creds_leave(old);
	reply_new(req, err, parent, name);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct creds old = creds_enter(req);
	int err = symlinkat(link, fd_of(req, parent), name) ? errno : 0;
	creds_leave(old);
	reply_new(req, err, parent, name);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	char path[64];
	proc_path(path, sizeof(path), fd_of(req, ino));
	int err = linkat(AT_FDCWD, path, fd_of(req, newparent), newname, AT_SYMLINK_FOLLOW)
			  ? errno : 0;
	reply_new(req, err, newparent, newname);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(fd_of(req, parent), name, 0) ? errno : 0);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(fd_of(req, parent), name, AT_REMOVEDIR) ? errno : 0);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	int r = renameat2(fd_of(req, parent), name, fd_of(req, newparent), newname, flags);
	fuse_reply_err(req, r ? errno : 0);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t r = readlinkat(fd_of(req, ino), "", buf, sizeof(buf));

	if (r < 0)
		fuse_reply_err(req, errno);
	else if (r >= (ssize_t)sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[r] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

/* ---- attributes ------------------------------------------------------------ */

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (fstatat(fd_of(req, ino), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, pt_of(req)->timeout);
}

static struct timespec set_time(int to_set, int bit, int now_bit, struct timespec t)
{
	if (to_set & now_bit)
		return (struct timespec){ .tv_nsec = UTIME_NOW };
	if (to_set & bit)
		return t;
	return (struct timespec){ .tv_nsec = UTIME_OMIT };
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	int pfd = fd_of(req, ino);
	char path[64];
	struct stat st;
	int r = 0;

	proc_path(path, sizeof(path), pfd);
	if (to_set & FUSE_SET_ATTR_MODE)
		r = fi ? fchmod((int)fi->fh, attr->st_mode) : chmod(path, attr->st_mode);
	if (!r && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		uid_t uid = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
		r = fchownat(pfd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	}
	if (!r && (to_set & FUSE_SET_ATTR_SIZE))
		r = fi ? ftruncate((int)fi->fh, attr->st_size) : truncate(path, attr->st_size);
	if (!r && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
			     FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW))) {
		struct timespec ts[2] = {
			set_time(to_set, FUSE_SET_ATTR_ATIME, FUSE_SET_ATTR_ATIME_NOW, attr->st_atim),
			set_time(to_set, FUSE_SET_ATTR_MTIME, FUSE_SET_ATTR_MTIME_NOW, attr->st_mtim),
		};
		if (fi) {
			r = futimens((int)fi->fh, ts);
		} else if (fstatat(pfd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 &&
			   S_ISLNK(st.st_mode)) {
			errno = EOPNOTSUPP;	/* /proc/self/fd/N would follow the link */
			r = -1;
		} else {
			r = utimensat(AT_FDCWD, path, ts, 0);
		}
	}
	if (r) {
		fuse_reply_err(req, errno);
		return;
	}
	op_getattr(req, ino, fi);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	if (fstatvfs(fd_of(req, ino), &sv) != 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* ---- directories ----------------------------------------------------------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dir_handle *d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int fd = openat(fd_of(req, ino), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d->dp = fdopendir(fd))) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		free(d);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (pt_of(req)->keep_cache)
		fi->cache_readdir = 1;
	fi->keep_cache = pt_of(req)->keep_cache;
	if (fuse_reply_open(req, fi) == -ENOENT) {	/* the opener went away */
		closedir(d->dp);
		free(d);
	}
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dir_handle *d = (struct dir_handle *)(uintptr_t)fi->fh;
	char *buf = malloc(size ? size : 1);
	size_t used = 0;
	int err = 0;

	(void)ino;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off != d->pos) {
		seekdir(d->dp, off);
		d->pos = off;
	}
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d->dp);
		if (!de) {
			err = errno;
			break;
		}
		struct stat st = { .st_ino = de->d_ino, .st_mode = (mode_t)DTTOIF(de->d_type) };
		size_t len = fuse_add_direntry(req, buf + used, size - used, de->d_name, &st,
					       de->d_off);
		if (len > size - used) {
			seekdir(d->dp, d->pos);	/* does not fit: next call */
			break;
		}
		used += len;
		d->pos = de->d_off;
	}
	if (err && used == 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dir_handle *d = (struct dir_handle *)(uintptr_t)fi->fh;
	(void)ino;
	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct dir_handle *d = (struct dir_handle *)(uintptr_t)fi->fh;
	int fd = dirfd(d->dp);
	(void)ino;
	fuse_reply_err(req, (datasync ? fdatasync(fd) : fsync(fd)) ? errno : 0);
}

/* ---- files --------------------------------------------------------------- */

/* With the writeback cache the kernel reads pages of files opened write-only
 * and does O_APPEND itself. */
static int open_flags(fuse_req_t req, int flags)
{
	if (pt_of(req)->writeback) {
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return (flags & ~O_NOFOLLOW) | O_CLOEXEC;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	struct creds old = creds_enter(req);
	int fd = openat(fd_of(req, parent), name, open_flags(req, fi->flags) | O_CREAT, mode);
	int err = fd < 0 ? errno : 0;
	creds_leave(old);

	if (!err)
		err = do_lookup(req, parent, name, &e);
	if (err) {
		if (fd >= 0)
			close(fd);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->keep_cache = pt_of(req)->keep_cache;
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		close(fd);	/* the kernel will FORGET the reference */
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[64];

	proc_path(path, sizeof(path), fd_of(req, ino));
	int fd = open(path, open_flags(req, fi->flags));
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->keep_cache = pt_of(req)->keep_cache;
	if (fuse_reply_open(req, fi) == -ENOENT)
		close(fd);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

	(void)ino;
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = (int)fi->fh;
	bv.buf[0].pos = off;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));

	(void)ino;
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = (int)fi->fh;
	out.buf[0].pos = off;
	ssize_t r = fuse_buf_copy(&out, in, 0);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_write(req, (size_t)r);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	/* close() of a duplicate: what close(2) of the caller's fd would do */
	int fd = dup((int)fi->fh);
	fuse_reply_err(req, fd < 0 || close(fd) ? errno : 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int fd = (int)fi->fh;
	(void)ino;
	fuse_reply_err(req, (datasync ? fdatasync(fd) : fsync(fd)) ? errno : 0);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, fallocate((int)fi->fh, mode, off, len) ? errno : 0);
}

/* ---- session ------------------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct pt *pt = userdata;

	if (pt->writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		pt->writeback = false;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->max_write = 1u << 20;
	if (pt->readahead)
		conn->max_readahead = pt->readahead;
}

static const struct fuse_lowlevel_ops pt_ops = {
	.init = op_init,
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
	.statfs = op_statfs,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.create = op_create,
	.open = op_open,
	.read = op_read,
	.write_buf = op_write_buf,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.fallocate = op_fallocate,
};

struct conf {
	char *source;
	char *cache;
	double timeout;
	unsigned readahead_kb;
	int no_writeback;
	int help;
};

static const struct fuse_opt conf_opts[] = {
	{ "cache=%s", offsetof(struct conf, cache), 0 },
	{ "timeout=%lf", offsetof(struct conf, timeout), 0 },
	{ "readahead_kb=%u", offsetof(struct conf, readahead_kb), 0 },
	{ "no_writeback", offsetof(struct conf, no_writeback), 1 },
	{ "-h", offsetof(struct conf, help), 1 },
	{ "--help", offsetof(struct conf, help), 1 },
	FUSE_OPT_END
};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct conf *c = data;
	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT && !c->source) {
		c->source = strdup(arg);
		return 0;	/* taken; the next one is the mount point */
	}
	return 1;
}

static void usage(const char *argv0)
{
	printf("usage: %s SOURCE MOUNTPOINT [options]\n\n"
	       "Mirror directory SOURCE at MOUNTPOINT through FUSE (thin passthrough).\n\n"
	       "    -o cache=always|normal  always: cache attributes/entries for `timeout` s\n"
	       "                           and keep page cache across opens (default);\n"
	       "                           normal: 1 s timeouts, page cache dropped on open\n"
	       "    -o timeout=S           timeout for cache=always (default 5)\n"
	       "    -o readahead_kb=N      max readahead offered to the kernel\n"
	       "    -o no_writeback        no kernel writeback cache\n\n", argv0);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts = { 0 };
	struct conf c = { .timeout = 5.0 };
	static struct pt pt;
	struct fuse_session *se = NULL;
	struct stat st;
	int ret = 1;

	if (fuse_opt_parse(&args, &c, conf_opts, opt_proc) == -1)
		return 2;
	if (c.help) {
		usage(argv[0]);
		fuse_opt_free_args(&args);
		return 0;
	}
	if (fuse_parse_cmdline(&args, &opts) != 0)
		goto out_args;
	if (!c.source || !opts.mountpoint) {
		fprintf(stderr, "usage: %s SOURCE MOUNTPOINT [options]  (--help for more)\n",
			argv[0]);
		goto out_args;
	}
	if (c.cache && strcmp(c.cache, "always") && strcmp(c.cache, "normal")) {
		fprintf(stderr, PROG ": cache=always|normal, not '%s'\n", c.cache);
		goto out_args;
	}
	pthread_mutex_init(&pt.lock, NULL);
	pt.keep_cache = !c.cache || !strcmp(c.cache, "always");
	pt.timeout = pt.keep_cache ? c.timeout : 1.0;
	pt.writeback = !c.no_writeback;
	pt.readahead = c.readahead_kb * 1024u;
	if (table_grow(&pt) != 0)
		goto out_args;
	pt.root.fd = open(c.source, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pt.root.fd < 0 || fstat(pt.root.fd, &st) != 0) {
		fprintf(stderr, PROG ": %s: %s\n", c.source, strerror(errno));
		goto out_args;
	}
	pt.root.dev = st.st_dev;
	pt.root.ino = st.st_ino;
	pt.root.nlookup = UINT64_MAX / 2;

	/* One O_PATH descriptor per node the kernel holds: allow many. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	umask(0);	/* the kernel has applied the caller's umask already */

	se = fuse_session_new(&args, &pt_ops, sizeof(pt_ops), &pt);
	if (!se)
		goto out_root;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_se;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_sig;
	fuse_daemonize(opts.foreground);
	if (opts.singlethread) {
		ret = fuse_session_loop(se) ? 1 : 0;
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		if (lc) {
			fuse_loop_cfg_set_clone_fd(lc, (unsigned)opts.clone_fd);
			fuse_loop_cfg_set_idle_threads(lc, opts.max_idle_threads);
			if (opts.max_threads > 0 && opts.max_threads <= 100000)
				fuse_loop_cfg_set_max_threads(lc, opts.max_threads);
			ret = fuse_session_loop_mt(se, lc) ? 1 : 0;
			fuse_loop_cfg_destroy(lc);
		}
	}
	fuse_session_unmount(se);
out_sig:
	fuse_remove_signal_handlers(se);
out_se:
	fuse_session_destroy(se);
out_root:
	close(pt.root.fd);
out_args:
	for (size_t i = 0; i < pt.nbucket; i++) {
		struct node *n = pt.bucket[i], *next;
		for (; n; n = next) {
			next = n->next;
			close(n->fd);
			free(n);
		}
	}
	free(pt.bucket);
	free(opts.mountpoint);
	free(c.source);
	free(c.cache);
	fuse_opt_free_args(&args);
	return ret;
}
