/* fusefs — the FUSE low-level front end of zonefuse.
 *
 * Purpose: decode kernel requests, call the fs core (fs/fs.h), reply
 * exactly once.  Node ids are fs inode numbers.  Also owns the custom
 * /dev/fuse I/O that negotiates FUSE_HANDLE_KILLPRIV_V2 (libfuse 3.14 has no
 * capability bit for it): with it the kernel marks the mount SB_NOSEC and
 * stops asking for security.capability before every write(), and zonefuse
 * clears set-id bits itself on write, truncate and chown.
 *
 * Write-back errors: in writeback-cache mode write() only fills the page
 * cache, and a WRITE the kernel sends later that the fs refuses (ENOSPC on
 * a full device, EIO) reaches fsync() and close() through the kernel but
 * never write(), so a writer that does not sync (`dd if=/dev/zero of=f`)
 * would write forever.  So the WRITE's handler notes the error and
 * invalidates the inode's attributes; the kernel then asks for them at the
 * writer's next write() (a GETATTR carrying the writer's file handle), and
 * that GETATTR is answered with the error, once: the write() fails with
 * it, as NFS reports a failed write-back at the next write().  The refusal
 * is logged (a warning naming the inode), the file's cached pages are
 * dropped (reads never show bytes that were not stored, and the size comes
 * from the fs again), and until a writer closes the file, its write-back at
 * or past the refused offset is refused too, so that a sequential writer
 * never leaves a hole in the middle of what was stored.  Files opened for
 * writing while space is low (fs_space_low) bypass the page cache, so that
 * their write() meets ENOSPC itself.  Writes that bypass the cache leave
 * free only what the kernel may still hold dirty (fusefs_space_check).
 *
 * Thread safety: handlers run concurrently on the request loop's workers (loop.h, or
 * libfuse's with -s / -o fuse_loop=mt) and on the io_uring threads (uring.h);
 * the fs state is in struct fs (thread-safe), the write-back errors in
 * struct fusefs_wb_errors and the write-handle counts in struct
 * fusefs_writers under their locks (leaves: nothing is taken inside
 * them), the rest in per-thread request flags.  One more thread, started
 * at the first O_DIRECT write, sends the page-cache invalidations of
 * direct writes (struct fusefs_inval); a handler waits for it under no
 * lock but the queue's own (a leaf).
 */
#ifndef ZONEFUSE_FUSEFS_H
#define ZONEFUSE_FUSEFS_H

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <pthread.h>

#include "fs/fs.h"
#include "fusefs/bdi.h"

struct fusefs_conf {
	double attr_timeout;	/* seconds */
	double entry_timeout;	/* seconds */
	unsigned int max_readahead;	/* bytes */
	unsigned int max_read;		/* bytes per READ; 0 = max_write */
	bool killpriv;		/* negotiate HANDLE_KILLPRIV_V2 when offered */
	bool writeback_cache;	/* ask for FUSE_CAP_WRITEBACK_CACHE when offered */
	/* While space is low: the mount's dirty-page cap (bytes; 0 = the
	 * dirty reserve's), and how long the kernel takes at most to write
	 * back a dirty page (ns: vm.dirty_expire_centisecs plus
	 * vm.dirty_writeback_centisecs; 0 = unknown).  Once that long has
	 * passed under the lower cap, only it is kept (fusefs_space_check). */
	uint64_t low_cap;
	uint64_t drain_ns;
};

/* Files whose write-back the fs refused (top comment), until a writer of
 * the file closes it.  Full: a further error is not noted, and reaches the
 * writer only at fsync() or close(). */
#define FUSEFS_WB_ERRORS 64
struct fusefs_wb_errors {
	pthread_mutex_t lock;	/* zero is unlocked (glibc); main.c inits it too */
	_Atomic unsigned int n;	/* entries used; read without the lock to skip
				 * the lock when 0 */
	struct {
		uint64_t ino;
		uint64_t off;	/* bytes: the lowest offset refused; later
				 * write-back at or past it is refused too */
		int err;	/* -errno of the first refused WRITE */
		bool reported;	/* a writer's write() has had it */
	} e[FUSEFS_WB_ERRORS];	/* [lock] */
	/* The last files whose refusal was logged: write-back the kernel
	 * sends after the writer's close is refused without a second line. */
	uint64_t warned[16];	/* [lock] */
	unsigned int nwarned;	/* [lock] next slot, round robin */
};
/* Open write handles per inode.  While a file has one, the kernel's
 * writeback cache may hold written pages the fs has not seen yet, so
 * SEEK_HOLE cannot take the fs's holes for holes (op_lseek).  A chained
 * hash; an entry lives while its count is above 0. */
#define FUSEFS_WRITERS_BUCKETS 256
struct fusefs_writer {
	struct fusefs_writer *next;
	uint64_t ino;
	uint32_t n;		/* write handles open */
};
struct fusefs_writers {
	pthread_mutex_t lock;	/* a leaf; zero is unlocked (glibc) */
	struct fusefs_writer *b[FUSEFS_WRITERS_BUCKETS];	/* [lock] */
};
/* Page-cache invalidations after direct writes (fusefs.c, op_write): a
 * thread of their own sends them, so that a request worker never waits
 * for the kernel's page locks (a readahead's locked pages wait for READs
 * that only a free worker can serve); the writer's handler waits up to
 * FUSEFS_INVAL_WAIT_MS for its own before replying.  Jobs run in the order
 * they came, numbered from 1.  Zero-initialised is valid (glibc); the
 * thread starts at the first job and stops in op_destroy. */
#define FUSEFS_INVAL_WAIT_MS 200
struct fusefs_inval_job {
	struct fusefs_inval_job *next;
	uint64_t ino, off, len;		/* bytes */
};
struct fusefs_inval {
	pthread_mutex_t lock;		/* a leaf */
	pthread_cond_t cond;		/* [lock] a job came, or stop */
	pthread_cond_t done_cond;	/* [lock] done moved */
	struct fusefs_inval_job *head, *tail;	/* [lock] FIFO */
	uint64_t queued, done;		/* [lock] jobs queued / finished, ever */
	pthread_t thread;
	bool started, stop;		/* [lock] */
};
/* A file handle (fi->fh) is its inode number, with this bit when the file
 * was opened for writing: only a writer's GETATTR takes a write-back
 * error; and this one when it may also dirty the page cache (opened for
 * writing, through the cache, with the write-back cache on). */
#define FUSEFS_FH_WRITE (1ull << 63)
#define FUSEFS_FH_CACHED (1ull << 62)
struct fusefs {
	struct fs *fs;
	struct fuse_session *se;	/* for notifications; NULL until mounted */
	struct fusefs_conf conf;
	struct fusefs_wb_errors wb;
	struct fusefs_writers writers;
	struct fusefs_inval inval;
	/* The mount's bdi settings (bdi.h) as tuned at mount, and its mount
	 * point; mountpoint NULL: not tuned (not root, or bdi_limit=off), so
	 * never retuned.  While space is low (space_low, fs_space_low) the
	 * bdi has the strict limit at the dirty reserve instead. */
	struct fusefs_bdi_conf bdi;
	const char *mountpoint;
	pthread_mutex_t space_lock;	/* leaf; serializes the retuning */
	_Atomic bool space_low;		/* [space_lock] to change */
	uint64_t low_since_ns;		/* [space_lock] when space became low */
	bool low_capped;		/* [space_lock] the bdi has conf.low_cap */
	bool wbc;			/* the kernel's write-back cache is on (INIT) */
	_Atomic uint32_t cached_writers;	/* handles with FUSEFS_FH_CACHED */
	/* [space_lock] to change: the last fs_set_dirty_keep() (bytes),
	 * once keep_known */
	_Atomic uint64_t keep_set;
	_Atomic bool keep_known;
	_Atomic uint64_t space_bytes;	/* bytes of write-back since the last look */
	uint64_t space_warned_ns;	/* [space_lock] the last "space is low"
					 * warning (zf_now_ns), 0: none yet */
	bool killpriv_active;	/* kernel accepted HANDLE_KILLPRIV_V2 */
	_Atomic uint64_t init_unique;	/* fuse_io.c: the INIT request, 0 = answered */
	_Atomic bool init_offered;	/* fuse_io.c: INIT offered KILLPRIV_V2 */
	_Atomic bool init_answered;	/* fuse_io.c: the kernel took the INIT reply */
	_Atomic bool uring_want;	/* uring.c: rings are ready, offer io_uring */
	_Atomic bool uring_offered;	/* fuse_io.c: INIT offered FUSE_OVER_IO_URING */
	_Atomic bool uring_taken;	/* fuse_io.c: the INIT reply took it */
};

/* FUSE_OVER_IO_URING (1 << 41 of the 64 INIT flags) as a bit of flags2;
 * Debian 12's <linux/fuse.h> predates it. */
#define FUSEFS_OVER_IO_URING_HI (1u << 9)

extern const struct fuse_lowlevel_ops fusefs_ops;

/* Space low or not any more (fs_space_low: below 2, above 3 times the dirty
 * reserve R): the bdi is retuned (strict limit at min(R, conf.low_cap)
 * while low) and the change logged.  Then the part of R that writes other
 * than the page cache's write-back leave free (fs_set_dirty_keep): none
 * while no handle may dirty the cache (the kernel writes a file's pages
 * back before its RELEASE); the lower cap once space has been low for
 * conf.drain_ns (what the kernel held dirty before is written back by
 * then); else all of R.  So a device written without the cache meets
 * ENOSPC when full, not R early.  Called at opens and releases, and every
 * 64 MiB of writes (half the reserve when that is less) or refused write.
 * Any thread, no locks held. */
void fusefs_space_check(struct fusefs *ff);

/* The rule fusefs_space_check applies (pure, for tests): the bytes of the
 * dirty reserve kept (fs_set_dirty_keep; UINT64_MAX: all of it). */
struct fusefs_keep_in {
	bool wbc;			/* the write-back cache is on */
	uint32_t cached_writers;	/* handles that may dirty the cache */
	bool low_capped;		/* space is low, the bdi has the lower cap */
	uint64_t low_for_ns;		/* since space became low */
	uint64_t drain_ns, low_cap;	/* fusefs_conf's */
};
uint64_t fusefs_dirty_keep_rule(const struct fusefs_keep_in *k);



/* fuse_io.c: install the custom I/O on a mounted session (after
 * fuse_session_mount; ff is the session's userdata).  A handler of WRITE,
 * SETATTR or OPEN takes its request's kill-set-id flag once. */
int fusefs_install_io(struct fuse_session *se, struct fusefs *ff);
bool fusefs_io_take_kill_suidgid(void);
/* fuse_io.c: the calling thread reads and replies on fd from now on (-1:
 * on the descriptor libfuse passes).  A reply must leave on the descriptor
 * its request was read from: loop.c's workers each set their clone. */
void fusefs_io_set_thread_fd(int fd);
/* fuse_io.c: a worker's receive buffers (loop.c): flat holds a request
 * as libfuse wants it (FUSEFS_RX_FLAT bytes), except a WRITE's payload,
 * which lands in donor->base, page-aligned, so that the write buffer may
 * keep it (fs_write_donated).  A donor kept by the fs is replaced at the
 * next receive. */
#define FUSEFS_RX_PAYLOAD (1u << 20)	/* = max_write (op_init) */
#define FUSEFS_RX_FLAT (FUSEFS_RX_PAYLOAD + 4096u)
struct fusefs_rx {
	char *flat;
	struct fs_donor *donor;	/* one reference, or NULL */
	size_t n;		/* bytes of the request read */
	bool is_write;		/* a WRITE with its payload in donor->base */
};
/* fuse_io.c: how the zf loop's reader waits for the next request.  A
 * reader asleep in read() is woken by the sender's CPU when the request
 * comes, usually on the other, idle CPU: an inter-processor interrupt
 * (on a virtual machine, an exit of the idle vCPU) in every synchronous
 * round trip.  So while most recent requests came within limit_ns of the
 * reader starting to wait, it first polls its descriptor, for at most
 * limit_ns, and sleeps in read() only after that.  Polling costs CPU only
 * while requests come that often: rare requests end it by themselves
 * (`soon` falls below 3/4) and a run of prompt ones (timed asleep) starts
 * it again.  And only after a request its reader served itself (a
 * LOOKUP, GETATTR, small READ, a WRITE or RELEASE that did not block):
 * one handed to another worker (readahead, large write-back, fsync, or a
 * request that blocked: loop.c) comes from the kernel's write-back or
 * read-ahead or from a caller who waits for much more than a wake-up,
 * and polling after
 * it takes CPU from applications that keep both CPUs busy (db_bench's
 * compactions) for little.  With one CPU nobody can send while the reader
 * polls: loop.c sets limit_ns to 0 there.
 * Thread safety: the caller serializes (loop.c: the reader lock). */
#define FUSEFS_POLL_DEFAULT_US 50u
#define FUSEFS_POLL_MAX_US 1000u
struct fusefs_poll {
	uint64_t limit_ns;	/* longest poll; 0 = sleep at once, always */
	unsigned int soon;	/* share of recent waits no longer than limit_ns,
				 * in 1/1024ths: moving average of weight 1/8 */
	bool after_inline;	/* the last request read was served by its reader */
};
void fusefs_poll_init(struct fusefs_poll *p, unsigned int limit_us);
/* Whether the next wait begins by polling: limit_ns > 0, soon >= 3/4,
 * after_inline. */
bool fusefs_poll_wanted(const struct fusefs_poll *p);
/* Account a wait of wait_ns (from its start to its request) in soon. */
void fusefs_poll_note(struct fusefs_poll *p, uint64_t wait_ns);
/* Read one request on this thread's descriptor (as io_read does: timing,
 * flags, INIT), waiting as poll says (NULL: sleep in read() at once).
 * Returns its length, or -errno (-ENODEV: unmounted).  With no memory for
 * a donor the request is read whole into flat (is_write false: libfuse
 * serves it, copying). */
int fusefs_io_receive(struct fusefs *ff, struct fusefs_rx *rx, struct fusefs_poll *poll);
/* Send a reply on this thread's descriptor (as io_writev does). */
struct iovec;
void fusefs_io_send(struct fusefs *ff, struct iovec *iov, int count);
/* fusefs.c: serve a WRITE received by fusefs_io_receive (rx->is_write),
 * without libfuse, and reply to it. */
void fusefs_write_direct(struct fusefs *ff, struct fusefs_rx *rx);
/* fusefs.c: a WRITE of the kernel's write-back of ino at byte off was
 * refused with err (-errno): note it for the writer's next write() and
 * for the write-back past it, log it, drop ino's cached pages (top
 * comment).  Call after the reply. */
void fusefs_wb_error_note(struct fusefs *ff, uint64_t ino, uint64_t off, int err);

/* fuse_io.c: the reply to a request fetched from an io_uring entry
 * (uring.c) goes into the entry.  Between begin and end, on this thread,
 * libfuse's reply to `unique` is copied there (header to out, arguments
 * to payload, done set) instead of being written to /dev/fuse; begin also
 * notes the request as a read one is noted (timing, flags).  req holds the
 * request as libfuse wants it, n bytes. */
struct fusefs_ring_reply {
	uint64_t unique;	/* the request's */
	void *out;		/* room for a struct fuse_out_header */
	char *payload;		/* the reply's arguments go here */
	size_t cap;		/* bytes */
	uint32_t len;		/* bytes of arguments written */
	bool done;		/* a reply was written */
};
void fusefs_io_ring_begin(struct fusefs *ff, struct fusefs_ring_reply *r,
			  const void *req, size_t n);
void fusefs_io_ring_end(void);

/* fuse_io.c: the largest READ reply (bytes, <= want) that libfuse can
 * splice here (op_read): `want`, or the largest power of two below it, or
 * 0 when not even 64 KiB fits. */
size_t fusefs_io_splice_fit(size_t want);

#endif
