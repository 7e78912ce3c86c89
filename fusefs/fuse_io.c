/* fuse_io — the custom /dev/fuse I/O (fusefs.h): it reads each request
 * before libfuse does and sees each reply before the kernel does, to
 *   - negotiate FUSE_HANDLE_KILLPRIV_V2 in the INIT reply (libfuse 3.14 has
 *     no capability bit for it) when the kernel offers it;
 *   - lift the write/setattr "kill set-id bits" flags into a per-thread
 *     flag the handler takes (fusefs_io_take_kill_suidgid);
 *   - time each request from its read to its reply (fs_stats.h);
 *   - read and reply on the calling worker's own /dev/fuse clone (loop.h),
 *     also for replies libfuse splices (READs from the device's file);
 *   - tell how large a READ reply libfuse can splice (fusefs_io_splice_fit);
 *   - for the zf loop, read a request itself (fusefs_io_receive: a WRITE's
 *     payload lands page-aligned in a donor buffer the write buffer may
 *     keep), polling for it first while requests come promptly (struct
 *     fusefs_poll), and send a reply libfuse did not build (fusefs_io_send);
 *   - offer FUSE_OVER_IO_URING in the INIT reply when uring.c is ready,
 *     and put the reply to a request fetched from a ring entry into that
 *     entry (fusefs_io_ring_begin) instead of writing it to /dev/fuse.
 * libfuse passes the session's userdata (struct fusefs) to the callbacks.
 * Thread safety: per-thread state for the request being served; the INIT
 * fields of struct fusefs are atomics (INIT is served before any other).
 */
#include "fusefs/fusefs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_stats.h"

/* Per-thread flags lifted from the raw request by the reader; libfuse
 * receives and processes a request on the same worker thread. */
static _Thread_local bool tls_kill_suidgid;

bool fusefs_io_take_kill_suidgid(void)
{
	bool k = tls_kill_suidgid;
	tls_kill_suidgid = false;
	return k;
}

/* The descriptor this thread reads requests from and replies on (loop.c:
 * a worker's own clone of /dev/fuse); -1 = the one libfuse passes. */
static _Thread_local int tls_fd = -1;

/* The ring entry whose request this thread serves (uring.c), or NULL. */
static _Thread_local struct fusefs_ring_reply *tls_ring;

void fusefs_io_set_thread_fd(int fd)
{
	tls_fd = fd;
}

/* Request latency (fs_stats.h): from the read of a request to its reply,
 * both on the same worker thread; requests without a reply are skipped. */
static _Thread_local uint64_t lat_unique, lat_t0;
static _Thread_local unsigned int lat_op;

/* The request being timed got its reply. */
static void lat_end(void)
{
	if (lat_unique) {
		fs_lat_record(lat_op, zf_now_ns() - lat_t0);
		lat_unique = 0;
	}
}

/* The class of each opcode in the stats; scripts/fuse-latency.sh keeps the
 * same map to set the kernel's times next to the daemon's. */
static unsigned int lat_kind(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_LOOKUP: return FS_LAT_LOOKUP;
	case FUSE_GETATTR: return FS_LAT_GETATTR;
	case FUSE_SETATTR: return FS_LAT_SETATTR;
	case FUSE_READ: return FS_LAT_READ;
	case FUSE_WRITE: return FS_LAT_WRITE;
	case FUSE_FLUSH: return FS_LAT_FLUSH;
	case FUSE_FSYNC: case FUSE_FSYNCDIR: return FS_LAT_FSYNC;
	case FUSE_CREATE: case FUSE_MKNOD: case FUSE_MKDIR: case FUSE_SYMLINK:
	case FUSE_LINK: return FS_LAT_CREATE;
	case FUSE_UNLINK: case FUSE_RMDIR: return FS_LAT_REMOVE;
	case FUSE_RENAME: case FUSE_RENAME2: return FS_LAT_RENAME;
	case FUSE_OPEN: case FUSE_OPENDIR: case FUSE_RELEASE: case FUSE_RELEASEDIR:
		return FS_LAT_OPEN;
	case FUSE_READDIR: case FUSE_READDIRPLUS: return FS_LAT_READDIR;
	case FUSE_GETXATTR: case FUSE_SETXATTR: case FUSE_LISTXATTR: case FUSE_REMOVEXATTR:
		return FS_LAT_XATTR;
	default: return FS_LAT_OTHER;
	}
}

/* What the reader notes of a request it read (n >= the header): its
 * start time, the kill-set-id flag, the INIT.  buf holds the header and at
 * least the fixed part of the arguments that are used here. */
static void note_request(struct fusefs *ff, const void *buf, size_t n)
{
	const struct fuse_in_header *h = buf;
	const char *arg = (const char *)buf + sizeof(*h);
	size_t alen = n - sizeof(*h);

	lat_unique = 0;
	if (h->opcode != FUSE_FORGET && h->opcode != FUSE_BATCH_FORGET &&
	    h->opcode != FUSE_INTERRUPT) {
		lat_unique = h->unique;
		lat_op = lat_kind(h->opcode);
		lat_t0 = zf_now_ns();
	}
	tls_kill_suidgid = false;
	switch (h->opcode) {
	case FUSE_INIT:
		if (alen >= offsetof(struct fuse_init_in, flags2)) {
			const struct fuse_init_in *in = (const void *)arg;
			ff->init_offered = (in->flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
			ff->uring_offered = (in->flags & FUSE_INIT_EXT) &&
					    alen >= offsetof(struct fuse_init_in, flags2) + 4 &&
					    (in->flags2 & FUSEFS_OVER_IO_URING_HI);
			ff->init_unique = h->unique;
		}
		break;
	case FUSE_WRITE:
		if (alen >= sizeof(struct fuse_write_in)) {
			const struct fuse_write_in *w = (const void *)arg;
			tls_kill_suidgid = (w->write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
		}
		break;
	case FUSE_SETATTR:
		if (alen >= sizeof(struct fuse_setattr_in)) {
			const struct fuse_setattr_in *s = (const void *)arg;
			tls_kill_suidgid = (s->valid & FATTR_KILL_SUIDGID) != 0;
		}
		break;
	default:
		break;
	}
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(tls_fd >= 0 ? tls_fd : fd, buf, len);
	if (n >= (ssize_t)sizeof(struct fuse_in_header))
		note_request(userdata, buf, (size_t)n);
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata);

/* The WRITE's header and fixed arguments go to rx->flat, its payload to
 * the donor's buffer (page-aligned at its start); any other request that
 * overflows into the donor is moved back behind its header. */
#define WRITE_HDR (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))
_Static_assert(WRITE_HDR == 80, "fuse_write_in of protocol 7.9+");

void fusefs_poll_init(struct fusefs_poll *p, unsigned int limit_us)
{
	*p = (struct fusefs_poll){ .limit_ns = (uint64_t)limit_us * 1000, .soon = 1024,
				   .after_inline = true };
}

bool fusefs_poll_wanted(const struct fusefs_poll *p)
{
	return p->limit_ns && p->soon >= 768 && p->after_inline;
}

void fusefs_poll_note(struct fusefs_poll *p, uint64_t wait_ns)
{
	unsigned int x = wait_ns <= p->limit_ns ? 1024 : 0;
	p->soon = p->soon - p->soon / 8 + x / 8;
}

/* Polls this thread's descriptor until it has a request (or an error, a
 * hang-up or a signal, which the read then reports) or limit_ns have
 * passed since t0. */
static void poll_for_request(uint64_t t0, uint64_t limit_ns)
{
	struct pollfd pfd = { .fd = tls_fd, .events = POLLIN };
	int r;
	while ((r = poll(&pfd, 1, 0)) == 0 && zf_now_ns() - t0 < limit_ns)
		;
	fs_lat_count_poll(r != 0, zf_now_ns() - t0);
}

int fusefs_io_receive(struct fusefs *ff, struct fusefs_rx *rx, struct fusefs_poll *poll)
{
	if (!rx->donor)
		rx->donor = fs_donor_new(FUSEFS_RX_PAYLOAD);
	/* Without memory for a payload buffer the whole request goes to flat
	 * and a WRITE to libfuse, which copies it: the session goes on. */
	struct iovec iov[2] = {
		{ rx->flat, rx->donor ? WRITE_HDR : FUSEFS_RX_FLAT },
		{ rx->donor ? rx->donor->base : NULL, rx->donor ? FUSEFS_RX_PAYLOAD : 0 },
	};
	uint64_t t0 = poll ? zf_now_ns() : 0;
	if (poll && fusefs_poll_wanted(poll))
		poll_for_request(t0, poll->limit_ns);
	ssize_t n = readv(tls_fd, iov, rx->donor ? 2 : 1);
	int err = errno;
	if (poll)
		fusefs_poll_note(poll, zf_now_ns() - t0);
	if (n < 0)
		return -err;
	if (n < (ssize_t)sizeof(struct fuse_in_header))
		return n == 0 ? -ENODEV : -EIO;
	const struct fuse_in_header *h = (const void *)rx->flat;
	const struct fuse_write_in *w = (const void *)(rx->flat + sizeof(*h));
	rx->n = (size_t)n;
	rx->is_write = rx->donor && h->opcode == FUSE_WRITE && (size_t)n > WRITE_HDR &&
		       (size_t)n == WRITE_HDR + w->size;
	if (rx->donor && !rx->is_write && (size_t)n > WRITE_HDR)
		memcpy(rx->flat + WRITE_HDR, rx->donor->base, (size_t)n - WRITE_HDR);
	note_request(ff, rx->flat, rx->is_write ? WRITE_HDR : (size_t)n);
	return (int)n;
}

void fusefs_io_send(struct fusefs *ff, struct iovec *iov, int count)
{
	(void)io_writev(tls_fd, iov, count, ff);
}

void fusefs_io_ring_begin(struct fusefs *ff, struct fusefs_ring_reply *r,
			  const void *req, size_t n)
{
	r->done = false;
	r->len = 0;
	tls_ring = r;
	note_request(ff, req, n);
	fs_lat_count_uring();
}

void fusefs_io_ring_end(void)
{
	tls_ring = NULL;
}

/* The reply to the ring entry's request: header and arguments into the
 * entry.  Arguments that do not fit (never: the kernel sizes the payload
 * buffer for its largest request) become -EIO. */
static ssize_t ring_reply(struct fusefs_ring_reply *r, const struct iovec *iov, int count)
{
	struct fuse_out_header oh = *(const struct fuse_out_header *)iov[0].iov_base;
	size_t len = 0, total = iov[0].iov_len;

	for (int i = 1; i < count; i++)
		total += iov[i].iov_len;
	if (total - iov[0].iov_len > r->cap) {
		oh.error = -EIO;
	} else {
		for (int i = 1; i < count; i++) {
			memmove(r->payload + len, iov[i].iov_base, iov[i].iov_len);
			len += iov[i].iov_len;
		}
	}
	oh.len = (uint32_t)(sizeof(oh) + len);
	memcpy(r->out, &oh, sizeof(oh));
	r->len = (uint32_t)len;
	r->done = true;
	lat_end();
	return (ssize_t)total;
}

/* The INIT reply: the extensions the kernel offered and zonefuse takes,
 * which libfuse 3.14 does not know. */
static void init_reply(struct fusefs *ff, struct iovec *iov, int count)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct fuse_init_out *out = count >= 2 ? iov[1].iov_base : NULL;
	size_t olen = count >= 2 ? iov[1].iov_len : 0;

	if (oh->error != 0 || !out)
		return;
	if (ff->init_offered && ff->conf.killpriv &&
	    olen >= offsetof(struct fuse_init_out, max_background)) {
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
		ff->killpriv_active = true;
	}
	if (ff->uring_offered && ff->uring_want &&
	    olen >= offsetof(struct fuse_init_out, flags2) + 4) {
		out->flags |= FUSE_INIT_EXT;
		out->flags2 |= FUSEFS_OVER_IO_URING_HI;
		ff->uring_taken = true;
	}
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fusefs *ff = userdata;
	const struct fuse_out_header *oh = iov[0].iov_base;
	bool hdr = count >= 1 && iov[0].iov_len >= sizeof(*oh);

	if (hdr && tls_ring && !tls_ring->done && oh->unique == tls_ring->unique)
		return ring_reply(tls_ring, iov, count);
	if (hdr && lat_unique && oh->unique == lat_unique)
		lat_end();
	uint64_t u = ff->init_unique;
	bool init = hdr && u && oh->unique == u;
	if (init)
		init_reply(ff, iov, count);
	ssize_t n = writev(tls_fd >= 0 ? tls_fd : fd, iov, count);
	if (init) {
		/* The kernel has taken the INIT reply when writev returns: ring
		 * entries may register from now on. */
		ff->init_unique = 0;
		ff->init_answered = true;
	}
	return n;
}

/* A spliced reply for a ring entry's request: libfuse's pipe holds the
 * header and then the arguments; both are read into the entry. */
static ssize_t ring_splice(struct fusefs_ring_reply *r, int pipe_fd, size_t len)
{
	struct fuse_out_header oh;
	size_t got = 0, want = len > sizeof(oh) ? len - sizeof(oh) : 0;

	if (len < sizeof(oh) || want > r->cap ||
	    read(pipe_fd, &oh, sizeof(oh)) != (ssize_t)sizeof(oh)) {
		errno = EIO;
		return -1;
	}
	while (got < want) {
		ssize_t n = read(pipe_fd, r->payload + got, want - got);
		if (n <= 0) {
			errno = n < 0 ? errno : EIO;
			return -1;
		}
		got += (size_t)n;
	}
	struct iovec iov[2] = { { &oh, sizeof(oh) }, { r->payload, want } };
	return ring_reply(r, iov, 2);	/* the second segment is already in place */
}

/* A reply libfuse splices from its pipe (fuse_reply_data of a file range,
 * op_read): on this worker's descriptor, timed like a written one. */
static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout,
			      size_t len, unsigned int flags, void *userdata)
{
	(void)userdata;
	if (tls_ring && !tls_ring->done && !offin)
		return ring_splice(tls_ring, fdin, len);
	ssize_t n = splice(fdin, offin, tls_fd >= 0 ? tls_fd : fdout, offout, len, flags);
	if (n > 0)
		lat_end();
	return n;
}

/* libfuse splices a reply of n bytes only into a pipe of n + 3 pages (it
 * grows its pipe to that), and the kernel grows a pipe past
 * /proc/sys/fs/pipe-max-size only for CAP_SYS_RESOURCE. */
static bool pipe_holds(int fd, size_t n)
{
	size_t sz = n + 3 * (size_t)sysconf(_SC_PAGESIZE) + sizeof(struct fuse_out_header);
	return sz <= INT_MAX && fcntl(fd, F_SETPIPE_SZ, (int)sz) >= 0;
}

size_t fusefs_io_splice_fit(size_t want)
{
	const size_t min = 64u << 10;
	int p[2];
	size_t n = want;

	if (want < min || pipe2(p, O_CLOEXEC))
		return 0;
	if (!pipe_holds(p[0], n)) {
		n = (size_t)1 << (63 - __builtin_clzll((unsigned long long)want));
		if (n == want)
			n /= 2;
		while (n >= min && !pipe_holds(p[0], n))
			n /= 2;
	}
	close(p[0]);
	close(p[1]);
	return n >= min ? n : 0;
}

int fusefs_install_io(struct fuse_session *se, struct fusefs *ff)
{
	static const struct fuse_custom_io io = {
		.read = io_read, .writev = io_writev, .splice_send = io_splice_send };
	(void)ff;	/* the callbacks get it as the session's userdata */
	int fd = fuse_session_fd(se);
	if (fd < 0)
		return -EBADF;
	return fuse_session_custom_io(se, &io, fd) ? -EINVAL : 0;
}
