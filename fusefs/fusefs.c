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
#include <time.h>
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
	e.generation = FS_INO_GENERATION;
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
	ff->wbc = (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0;
	fusefs_space_check(ff);	/* no writer yet: nothing kept for the cache */
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* name_to_handle_at / open_by_handle_at, NFS re-export (op_lookup) */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
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

static void inval_stop(struct fusefs *ff);

/* The session ends: handles the kernel never released leave no entries. */
static void writers_free(struct fusefs *ff)
{
	struct fusefs_writers *w = &ff->writers;
	pthread_mutex_lock(&w->lock);
	for (size_t b = 0; b < FUSEFS_WRITERS_BUCKETS; b++)
		while (w->b[b]) {
			struct fusefs_writer *e = w->b[b];
			w->b[b] = e->next;
			free(e);
		}
	pthread_mutex_unlock(&w->lock);
}

static void op_destroy(void *userdata)
{
	inval_stop(userdata);
	writers_free(userdata);
}

/* With export support the kernel resolves a file handle it no longer has
 * in its cache by a LOOKUP of "." in the handle's inode, whatever its
 * type, and a directory's parent by a LOOKUP of ".." (a path walk never
 * sends either).  An inode that is gone is a negative entry: the kernel
 * makes that ESTALE. */
static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stat st;
	int ret = strcmp(name, ".") == 0 ? fs_lookup_self(fs_of(req), parent, &st) :
		fs_lookup(fs_of(req), parent, name, &st);
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

/* Attributes only (offset < 0): no page is touched, so this cannot wait
 * for the write-back of a page whose WRITE is being served. */
static void refresh_attr(struct fusefs *ff, uint64_t ino)
{
	if (ff->se)
		(void)fuse_lowlevel_notify_inval_inode(ff->se, ino, -1, 0);
}

/* ---- low space and refused write-back (fusefs.h, top comment) ---- */

/* The mount's dirty-page cap while space is low (bytes). */
static uint64_t low_cap(const struct fusefs *ff)
{
	uint64_t reserve = fs_dirty_reserve(ff->fs);
	return ff->conf.low_cap ? ZF_MIN(reserve, ff->conf.low_cap) : reserve;
}

uint64_t fusefs_dirty_keep_rule(const struct fusefs_keep_in *k)
{
	if (!k->wbc || !k->cached_writers)
		return 0;
	if (k->low_capped && k->drain_ns && k->low_for_ns >= k->drain_ns)
		return k->low_cap;
	return UINT64_MAX;	/* all of the reserve */
}

/* fusefs.h: the part of the dirty reserve kept.  [space_lock] */
static void keep_update(struct fusefs *ff, uint64_t now)
{
	bool low = atomic_load(&ff->space_low);
	struct fusefs_keep_in k = {
		.wbc = ff->wbc,
		.cached_writers = atomic_load(&ff->cached_writers),
		.low_capped = low && ff->low_capped,
		.low_for_ns = low ? now - ff->low_since_ns : 0,
		.drain_ns = ff->conf.drain_ns,
		.low_cap = low_cap(ff),
	};
	uint64_t keep = fusefs_dirty_keep_rule(&k);
	fs_set_dirty_keep(ff->fs, keep);
	atomic_store(&ff->keep_set, keep);
	atomic_store(&ff->keep_known, true);
}

void fusefs_space_check(struct fusefs *ff)
{
	bool was = atomic_load(&ff->space_low);
	bool low = fs_space_low(ff->fs, was ? 3 : 2);

	/* The common case without the lock: space not low, nothing changes. */
	uint64_t want = ff->wbc && atomic_load(&ff->cached_writers) ? UINT64_MAX : 0;
	if (!low && !was && atomic_load(&ff->keep_known) && atomic_load(&ff->keep_set) == want)
		return;
	pthread_mutex_lock(&ff->space_lock);
	if (low != atomic_load(&ff->space_low)) {
		uint64_t reserve = fs_dirty_reserve(ff->fs);
		struct fusefs_bdi_conf c = ff->bdi;
		if (low) {	/* the two settings a cap needs, nothing else */
			c.mode = FUSEFS_BDI_STRICT;
			c.max_bytes = low_cap(ff);
			c.read_ahead_kb = 0;
		}
		int n = ff->mountpoint ? fusefs_bdi_tune(ff->mountpoint, &c, "/sys") : 0;
		ff->low_capped = low && n == 2;	/* max_bytes and strict_limit */
		ff->low_since_ns = zf_now_ns();
		atomic_store(&ff->space_low, low);
		/* a warning when it first happens, then (it may come and go
		 * with every delete and commit) at most once a minute */
		uint64_t now = zf_now_ns();
		bool loud = low && (!ff->space_warned_ns ||
				    now - ff->space_warned_ns >= 60000000000ull);
		if (loud)
			ff->space_warned_ns = now;
		if (loud)
			zf_warn("space is low (less than %llu MiB left): files opened for writing "
				"bypass the page cache, the mount's dirty pages are capped at "
				"%llu MiB", (unsigned long long)(2 * reserve >> 20),
				(unsigned long long)(low_cap(ff) >> 20));
		else
			zf_info("space is %s: %s", low ? "low again" : "no longer low",
				low ? "files opened for writing bypass the page cache"
				    : "the page cache is used as before");
	}
	keep_update(ff, zf_now_ns());
	pthread_mutex_unlock(&ff->space_lock);
}

static void inval_range(struct fusefs *ff, uint64_t ino, uint64_t off, uint64_t len,
			bool wait);

void fusefs_wb_error_note(struct fusefs *ff, uint64_t ino, uint64_t off, int err)
{
	struct fusefs_wb_errors *w = &ff->wb;
	bool first = false;

	pthread_mutex_lock(&w->lock);
	unsigned int n = atomic_load(&w->n), i = 0;
	while (i < n && w->e[i].ino != ino)
		i++;
	if (i < n) {
		w->e[i].off = w->e[i].off < off ? w->e[i].off : off;
	} else if (n < FUSEFS_WB_ERRORS) {
		w->e[n].ino = ino;
		w->e[n].off = off;
		w->e[n].err = err;
		w->e[n].reported = false;
		atomic_store(&w->n, n + 1);
		first = true;
	}
	for (unsigned int k = 0; first && k < 16; k++)
		first = w->warned[k] != ino;
	if (first)
		w->warned[w->nwarned++ % 16] = ino;
	pthread_mutex_unlock(&w->lock);
	if (first)
		zf_warn("write-back of inode %llu refused (%s) at byte %llu: reported to "
			"its writer, cached pages dropped, later write-back past it refused "
			"until the file is closed", (unsigned long long)ino, strerror(-err),
			(unsigned long long)off);
	int r = fs_writeback_refused(ff->fs, ino, off, err);
	if (r && r != -ENOENT)
		zf_warn("inode %llu: dropping write-back past byte %llu: %s",
			(unsigned long long)ino, (unsigned long long)off, strerror(-r));
	inval_range(ff, ino, 0, 0, false);	/* the whole file, after the reply */
}

/* The write-back error noted for ino: reported (once) to a writer's
 * write() (take), or forgotten when a writer closes the file (drop).
 * 0: none, or none left to report. */
static int wb_error_take(struct fusefs *ff, uint64_t ino, bool drop)
{
	struct fusefs_wb_errors *w = &ff->wb;
	int err = 0;

	if (atomic_load(&w->n) == 0)
		return 0;
	pthread_mutex_lock(&w->lock);
	unsigned int n = atomic_load(&w->n);
	for (unsigned int i = 0; i < n; i++) {
		if (w->e[i].ino != ino)
			continue;
		err = w->e[i].reported ? 0 : w->e[i].err;
		w->e[i].reported = true;
		if (drop) {
			w->e[i] = w->e[n - 1];
			atomic_store(&w->n, n - 1);
		}
		break;
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

/* Only the kernel changes our files: their cached pages stay valid across
 * opens.  But a file opened for writing while space is low bypasses the
 * page cache, so that its write() meets ENOSPC itself rather than a later
 * write-back (fs_space_low). */
static void cache_mode(struct fusefs *ff, struct fuse_file_info *fi)
{
	fusefs_space_check(ff);
	if ((fi->flags & O_ACCMODE) != O_RDONLY && atomic_load(&ff->space_low)) {
		fi->direct_io = 1;
		return;
	}
	fi->keep_cache = 1;
}

/* Count one write handle of ino more (d = 1) or less (d = -1).  Without
 * memory for a new entry the handle is not counted: lseek then answers
 * from the fs alone for it, as for a file nobody writes. */
static void writers_add(struct fusefs *ff, uint64_t ino, int d)
{
	struct fusefs_writers *w = &ff->writers;
	struct fusefs_writer **pp = &w->b[ino % FUSEFS_WRITERS_BUCKETS];
	pthread_mutex_lock(&w->lock);
	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	if (!*pp && d > 0 && (*pp = calloc(1, sizeof(**pp))))
		(*pp)->ino = ino;
	if (*pp && d > 0) {
		(*pp)->n++;
	} else if (*pp && --(*pp)->n == 0) {
		struct fusefs_writer *e = *pp;
		*pp = e->next;
		free(e);
	}
	pthread_mutex_unlock(&w->lock);
}

static bool has_writers(struct fusefs *ff, uint64_t ino)
{
	struct fusefs_writers *w = &ff->writers;
	pthread_mutex_lock(&w->lock);
	struct fusefs_writer *e = w->b[ino % FUSEFS_WRITERS_BUCKETS];
	while (e && e->ino != ino)
		e = e->next;
	pthread_mutex_unlock(&w->lock);
	return e != NULL;
}

static uint64_t fh_of(fuse_ino_t ino, int flags)
{
	return ino | ((flags & O_ACCMODE) != O_RDONLY ? FUSEFS_FH_WRITE : 0);
}

/* The file handle of a new open of ino (fi's flags and cache mode set):
 * a handle that may dirty the page cache is counted before the reply (the
 * kernel may write at once), and the room kept for the cache follows. */
static uint64_t fh_open(struct fusefs *ff, fuse_ino_t ino, const struct fuse_file_info *fi)
{
	uint64_t fh = fh_of(ino, fi->flags);

	if ((fh & FUSEFS_FH_WRITE) && ff->wbc && !fi->direct_io) {
		fh |= FUSEFS_FH_CACHED;
		if (atomic_fetch_add(&ff->cached_writers, 1) == 0)
			fusefs_space_check(ff);
	}
	return fh;
}

/* The handle fh is closed (or its open failed after fh_open). */
static void fh_close(struct fusefs *ff, uint64_t fh)
{
	if ((fh & FUSEFS_FH_CACHED) && atomic_fetch_sub(&ff->cached_writers, 1) == 1)
		fusefs_space_check(ff);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret = 0;
	/* With a writer's file handle: the kernel asks before a write() (or a
	 * seek to the end, or a read past it) of that writer. */
	if (fi && (fi->fh & FUSEFS_FH_WRITE))
		ret = wb_error_take(ff_of(req), ino, false);
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
	int ret = fs_ino_reserve(fs_of(req));
	if (!ret)
		ret = fs_mknod(fs_of(req), parent, name, create_mode(req, parent, mode), rdev, &c,
			       &st);
	if (ret)
		reply_err(req, ret);
	else
		reply_entry(req, 0, &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct stat st;
	struct fs_ctx c = ctx_of(req);
	int ret = fs_ino_reserve(fs_of(req));
	if (!ret)
		ret = fs_mkdir(fs_of(req), parent, name, create_mode(req, parent, mode), &c, &st);
	if (ret)
		reply_err(req, ret);
	else
		reply_entry(req, 0, &st);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct stat st;
	struct fs_ctx c = ctx_of(req);
	int ret = fs_ino_reserve(fs_of(req));
	if (!ret)
		ret = fs_symlink(fs_of(req), parent, name, link, &c, &st);
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
	struct fusefs *ff = ff_of(req);	/* req is gone once replied to */
	cache_mode(ff, fi);
	fi->fh = fh_open(ff, ino, fi);
	if (fi->fh & FUSEFS_FH_WRITE)	/* before the reply: the kernel may write at once */
		writers_add(ff, ino, 1);
	if (fuse_reply_open(req, fi) == -ENOENT) {	/* the opener went away */
		if (fi->fh & FUSEFS_FH_WRITE)
			writers_add(ff, ino, -1);
		fh_close(ff, fi->fh);
		fs_release(ff->fs, ino);
	}
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fusefs *ff = ff_of(req);
	struct fs_ctx c = ctx_of(req);
	struct fuse_entry_param e;
	struct stat st;
	int ret = fs_ino_reserve(ff->fs);
	if (!ret)
		ret = fs_mknod(ff->fs, parent, name, S_IFREG | (create_mode(req, parent, mode) & 07777),
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
	e.generation = FS_INO_GENERATION;
	e.attr = st;
	e.attr_timeout = ff->conf.attr_timeout;
	e.entry_timeout = ff->conf.entry_timeout;
	cache_mode(ff, fi);
	fi->fh = fh_open(ff, st.st_ino, fi);
	if (fi->fh & FUSEFS_FH_WRITE)
		writers_add(ff, st.st_ino, 1);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		if (fi->fh & FUSEFS_FH_WRITE)
			writers_add(ff, st.st_ino, -1);
		fh_close(ff, fi->fh);
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

/* ---- page-cache invalidation after a direct write ----
 * The kernel drops the cached pages of a direct write's range before it
 * sends the WRITE, and again after it only for a synchronous write: pages
 * a buffered reader brought back meanwhile (read from the fs before the
 * write reached it) stay, old, after an asynchronous (AIO) O_DIRECT write.
 * ext4 drops them when the write completes; so does zonefuse, after the
 * write is in the fs and before the reply, through a notification (the
 * read-ahead windows of the fs itself are dropped by fs_write). */

static void *inval_main(void *arg)
{
	struct fusefs *ff = arg;
	struct fusefs_inval *v = &ff->inval;
	pthread_mutex_lock(&v->lock);
	for (;;) {
		while (!v->head && !v->stop)
			pthread_cond_wait(&v->cond, &v->lock);
		if (!v->head)
			break;		/* stopping, nothing left */
		struct fusefs_inval_job *j = v->head;
		v->head = j->next;
		if (!v->head)
			v->tail = NULL;
		pthread_mutex_unlock(&v->lock);
		/* -ENOENT: the kernel has no such inode cached, nothing to drop */
		if (ff->se)
			(void)fuse_lowlevel_notify_inval_inode(ff->se, j->ino, (off_t)j->off,
							       (off_t)j->len);
		free(j);
		pthread_mutex_lock(&v->lock);
		v->done++;
		pthread_cond_broadcast(&v->done_cond);
	}
	pthread_mutex_unlock(&v->lock);
	return NULL;
}

static void inval_stop(struct fusefs *ff)
{
	struct fusefs_inval *v = &ff->inval;
	pthread_mutex_lock(&v->lock);
	bool started = v->started;
	v->stop = true;
	v->started = false;
	pthread_cond_signal(&v->cond);
	pthread_mutex_unlock(&v->lock);
	if (started)
		pthread_join(v->thread, NULL);
}

/* Drop the kernel's cached pages of ino's [off, off+len) (len 0: to the
 * end), with wait up to FUSEFS_INVAL_WAIT_MS for it: past that (the thread waits for pages that
 * READs queued behind this request lock) the reply goes and the pages go
 * right after it.  Without memory or a thread, the pages are not dropped
 * (logged). */
static void inval_range(struct fusefs *ff, uint64_t ino, uint64_t off, uint64_t len,
			bool wait)
{
	struct fusefs_inval *v = &ff->inval;
	struct fusefs_inval_job *j = malloc(sizeof(*j));
	if (!j) {
		zf_warn("no memory to drop the cached pages of inode %llu",
			(unsigned long long)ino);
		return;
	}
	*j = (struct fusefs_inval_job){ .ino = ino, .off = off, .len = len };
	if (wait)
		zf_will_block();	/* the loop lets another worker read meanwhile */
	pthread_mutex_lock(&v->lock);
	if (!v->started && !v->stop) {
		int r = pthread_create(&v->thread, NULL, inval_main, ff);
		if (r)
			zf_warn("cannot start the page-cache invalidation thread: %s", strerror(r));
		else
			v->started = true;
	}
	if (!v->started) {
		pthread_mutex_unlock(&v->lock);
		free(j);
		return;
	}
	if (v->tail)
		v->tail->next = j;
	else
		v->head = j;
	v->tail = j;
	uint64_t mine = ++v->queued;
	pthread_cond_signal(&v->cond);
	if (!wait) {
		pthread_mutex_unlock(&v->lock);
		return;
	}
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += FUSEFS_INVAL_WAIT_MS * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	while (v->done < mine && v->started)
		if (pthread_cond_timedwait(&v->done_cond, &v->lock, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&v->lock);
}

/* A WRITE that bypassed the page cache (O_DIRECT; not the kernel's
 * write-back) of n bytes at off: drop the cached pages it made old. */
static void after_direct_write(struct fusefs *ff, uint64_t ino, uint64_t off, ssize_t n,
			       bool writeback, uint32_t open_flags)
{
	if (n > 0 && !writeback && (open_flags & O_DIRECT) && ff->se)
		inval_range(ff, ino, off, (uint64_t)n, true);
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
		n = fs_write(fs, ino, off + done, buf + done, size - done, FS_WRITE_PAGECACHE);
	}
	return n < 0 ? n : (ssize_t)done + n;
}

/* A data change by a caller without CAP_FSETID drops the file's capability
 * and set-id bits first (fs_kill_priv): a WRITE or SETATTR says so with
 * the kernel's kill flag; fallocate and copy_file_range carry none, so
 * any caller but root counts.  The reply to a WRITE carries no attributes:
 * when something was dropped, the kernel's cached mode is refreshed once
 * the reply is out (refresh_attr).  0, 1 (dropped) or -errno. */
static int kill_priv(struct fusefs *ff, uint64_t ino, bool kill)
{
	return kill ? fs_kill_priv(ff->fs, ino) : 0;
}

/* A WRITE (donor: its payload may be kept, else buf is copied): the
 * privileges it drops, a refusal noted earlier, the write.  Bytes taken
 * or -errno; *killed: the kernel's mode is stale (after_write). */
static ssize_t serve_write(struct fusefs *ff, uint64_t ino, uint64_t off, const void *buf,
			   struct fs_donor *donor, size_t size, bool writeback, bool kill,
			   int *killed)
{
	unsigned int fl = writeback ? FS_WRITE_PAGECACHE : 0;

	*killed = kill_priv(ff, ino, kill);
	if (off > (uint64_t)INT64_MAX)
		return -EINVAL;
	if (*killed < 0)
		return *killed;
	return writeback_whole(ff->fs, ino, off, buf, size,
			       donor ? fs_write_donated(ff->fs, ino, off, donor, size, fl)
				     : fs_write(ff->fs, ino, off, buf, size, fl), writeback);
}

/* After the reply to a WRITE (n: its result). */
static void after_write(struct fusefs *ff, uint64_t ino, uint64_t off, ssize_t n,
			bool writeback, int killed)
{
	uint64_t every = ZF_MIN(64ull << 20, fs_dirty_reserve(ff->fs) / 2);
	if ((n > 0 && every &&
	     atomic_fetch_add(&ff->space_bytes, (uint64_t)n) + (uint64_t)n >= every) ||
	    n == -ENOSPC) {
		atomic_store(&ff->space_bytes, 0);
		fusefs_space_check(ff);
	}
	if (n < 0 && writeback)
		fusefs_wb_error_note(ff, ino, off, (int)n);
	if (killed > 0)
		refresh_attr(ff, ino);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	struct fusefs *ff = ff_of(req);	/* req is gone once replied to */
	int killed;
	ssize_t n = off < 0 ? -EINVAL :
		serve_write(ff, ino, (uint64_t)off, buf, NULL, size, fi->writepage,
			    fusefs_io_take_kill_suidgid(), &killed);
	if (off < 0)
		killed = 0;
	if (off >= 0)
		after_direct_write(ff, ino, (uint64_t)off, n, fi->writepage, (uint32_t)fi->flags);
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
	after_write(ff, ino, (uint64_t)off, n, fi->writepage, killed);
}

void fusefs_write_direct(struct fusefs *ff, struct fusefs_rx *rx)
{
	const struct fuse_in_header *h = (const void *)rx->flat;
	const struct fuse_write_in *w = (const void *)(rx->flat + sizeof(*h));
	bool writeback = w->write_flags & FUSE_WRITE_CACHE;
	int killed;
	ssize_t n = serve_write(ff, h->nodeid, w->offset, rx->donor->base, rx->donor, w->size,
				writeback, fusefs_io_take_kill_suidgid(), &killed);
	if (w->offset <= (uint64_t)INT64_MAX)
		after_direct_write(ff, h->nodeid, w->offset, n, writeback, w->flags);
	struct fuse_write_out wo = { .size = n > 0 ? (uint32_t)n : 0 };
	struct fuse_out_header oh = {
		.len = (uint32_t)(sizeof(oh) + (n < 0 ? 0 : sizeof(wo))),
		.error = n < 0 ? (int32_t)n : 0,
		.unique = h->unique,
	};
	struct iovec iov[2] = { { &oh, sizeof(oh) }, { &wo, sizeof(wo) } };
	fusefs_io_send(ff, iov, n < 0 ? 1 : 2);
	after_write(ff, h->nodeid, w->offset, n, writeback, killed);
	if (atomic_load(&rx->donor->refs) > 1) {	/* kept by the write buffer */
		fs_donor_put(rx->donor);
		rx->donor = NULL;
	}
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* close() has reported the write-back's errors (the kernel's): a
	 * writer opening the file later must not get them again. */
	struct fusefs *ff = ff_of(req);
	if (fi->fh & FUSEFS_FH_WRITE) {
		(void)wb_error_take(ff, ino, true);
		writers_add(ff, ino, -1);	/* the kernel wrote its pages back */
	}
	fh_close(ff, fi->fh);
	reply_err(req, fs_release(ff->fs, ino));
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
			e.generation = FS_INO_GENERATION;
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
	struct fusefs *ff = ff_of(req);
	(void)fi;
	if (off < 0 || len <= 0) {
		reply_err(req, -EINVAL);
		return;
	}
	int killed = kill_priv(ff, ino, fuse_req_ctx(req)->uid != 0);
	reply_err(req, killed < 0 ? killed :
		       fs_fallocate(ff->fs, ino, mode, (uint64_t)off, (uint64_t)len));
	if (killed > 0)
		refresh_attr(ff, ino);
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
	struct fusefs *ff = ff_of(req);
	int killed = kill_priv(ff, ino_out, fuse_req_ctx(req)->uid != 0);
	ssize_t n = killed < 0 ? killed :
		fs_copy_file_range(ff->fs, ino_in, (uint64_t)off_in, ino_out,
				   (uint64_t)off_out, len, (unsigned int)flags);
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
	if (killed > 0)
		refresh_attr(ff, ino_out);
}

/* SEEK_DATA / SEEK_HOLE from the fs's extents and write buffer (fs_lseek).
 * The kernel sends LSEEK without writing its dirty pages back first, so
 * while the file has a write handle open (the only time it can have dirty
 * pages: a close or the last RELEASE writes them back) a hole of the fs's
 * may hold written bytes: then every byte below the size is data, which
 * a copy reads as it would without SEEK_HOLE. */
static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct stat st;
	int64_t ret;
	(void)fi;
	if ((whence == SEEK_DATA || whence == SEEK_HOLE) && has_writers(ff_of(req), ino)) {
		ret = fs_getattr(fs_of(req), ino, &st);
		if (!ret && (off < 0 || off >= st.st_size))
			ret = -ENXIO;
		else if (!ret)
			ret = whence == SEEK_DATA ? off : st.st_size;
	} else {
		ret = fs_lseek(fs_of(req), ino, off, whence);
	}
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
