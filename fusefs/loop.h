/* loop — zonefuse's FUSE request loop.
 *
 * Purpose: serve each request on the thread that read it.  A fixed set of
 * workers is started at once, each with its own clone of /dev/fuse
 * (FUSE_DEV_IOC_CLONE: a reply must go out on the descriptor its request
 * came in on, which fuse_io.c sees to through a per-thread descriptor).
 * One worker at a time, the holder of the reader lock, reads; it serves a
 * request itself and reads again, so a stream of fast requests costs no
 * thread wake-up.  It gives the lock to a waiting worker before serving a
 * request that always blocks or comes several at a time (fsync, fallocate,
 * copy_file_range, READs and WRITEs over 32 KiB: readahead and
 * write-back), and for any other request at the moment its handler is
 * about to block (the blocking notice, zf_common.h: device I/O, a
 * write-out in flight, free space, the log); so a blocking request holds
 * only its own worker, and small READs that go to the device run in
 * parallel.  No thread is started or stopped while serving.
 * A worker reads each request itself (fusefs_io_receive) so that a WRITE's
 * payload lands page-aligned in a buffer the write buffer may keep instead
 * of copying it (fs_write_donated); WRITEs are served without libfuse
 * (fusefs_write_direct), everything else by libfuse from the same read.
 * The reader polls /dev/fuse for a while before it sleeps in read(), as
 * long as requests come promptly (poll_us; struct fusefs_poll in fusefs.h
 * says when and why), so a synchronous round trip does not wait for the
 * reader to be woken.
 * With uring_per_queue, uring.h's threads also serve, started before the
 * first read so that the INIT reply can offer the kernel io_uring.
 * Invariants: every worker replies to what it read before it reads again
 * (the handlers reply synchronously); the loop returns only when every
 * worker has stopped.
 * Thread safety: fusefs_loop_run is called once, from one thread; the
 * workers call into libfuse's session concurrently, as its own loop does.
 * Lock order: the reader lock (loop.c) is outermost: a worker holds it
 * while it waits, reads and serves an inline request, whose handler
 * takes fs locks under it; nothing takes it while holding another lock.
 * The blocking notice releases it under the handler's fs locks (a release
 * never waits).
 */
#ifndef ZONEFUSE_FUSEFS_LOOP_H
#define ZONEFUSE_FUSEFS_LOOP_H

#include "fusefs/fusefs.h"

#define FUSEFS_LOOP_MAX_WORKERS 64

struct fusefs_loop_conf {
	unsigned int workers;	/* 1..FUSEFS_LOOP_MAX_WORKERS */
	bool clone_fd;		/* a /dev/fuse clone per worker (else one shared fd) */
	unsigned int uring_per_queue;	/* io_uring threads per CPU (uring.h); 0 = none */
	unsigned int poll_us;	/* the reader's longest poll (struct fusefs_poll), microseconds; 0 = never */
	struct fusefs *ff;	/* the session's userdata: WRITEs are served here */
	uint64_t unmount_ns;	/* out: zf_now_ns() when a worker first found the
				 * mount gone (ENODEV); 0 = not unmounted */
};

/* Serves se until it is unmounted or exited (a signal), and sets
 * c->unmount_ns.  0, or -errno of the read that failed. */
int fusefs_loop_run(struct fuse_session *se, struct fusefs_loop_conf *c);

#endif
