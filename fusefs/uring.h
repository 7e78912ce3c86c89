/* uring — FUSE over io_uring: the kernel hands requests to ring entries
 * instead of /dev/fuse reads (Linux >= 6.14, fuse.enable_uring=Y).
 *
 * Purpose: a transport beside loop.c's.  The kernel keeps one queue per
 * possible CPU and puts a request on the queue of the CPU its sender runs
 * on; here every queue has a few threads pinned to that CPU, each with its
 * own io_uring and exactly one registered entry (a header buffer and a
 * payload buffer), so a thread blocked in a slow request (fsync) holds
 * only its own request and the reply, the commit and the next fetch are
 * one io_uring_enter on the CPU that sent the request.  Each thread has a
 * helper on the other CPUs that serves and commits its large READs and
 * WRITEs (readahead, writeback), so that their copies run beside the
 * sender rather than on its CPU.  Requests are
 * served by libfuse from the entry's buffers (fuse_session_process_buf);
 * replies are copied into the entry by fuse_io.c's writev/splice hooks.
 * FORGETs, INTERRUPTs and notifications stay on /dev/fuse, so loop.c's
 * workers keep running beside these threads.
 *
 * Invariants: the INIT reply offers FUSE_OVER_IO_URING only when every
 * ring and buffer exists already (fusefs_uring_new succeeded); after such
 * an INIT the kernel holds every request until all queues have an entry,
 * so every thread registers at once, and a failed registration makes the
 * kernel fall back to /dev/fuse (it clears the connection's io_uring).  A
 * thread commits exactly one reply per request it fetched.
 * Thread safety: a ring is used by its thread, or by the thread's helper
 * while the thread waits for it (the helper submits the commit);
 * fusefs_uring_new/start/stop are called by the loop's thread only.
 * Lock order: a thread's hand-over lock is held only to pass a request to
 * its helper and back, never while serving; handlers take fs locks as on
 * loop.c's workers.
 */
#ifndef ZONEFUSE_FUSEFS_URING_H
#define ZONEFUSE_FUSEFS_URING_H

#include "fusefs/fusefs.h"

struct fusefs_uring;

#define FUSEFS_URING_MAX_PER_QUEUE 16u	/* threads per CPU queue */

/* Rings and buffers for `per_queue` threads on each possible CPU's queue
 * (1..FUSEFS_URING_MAX_PER_QUEUE), and ff->uring_want set so that the INIT reply offers the
 * transport.  -EOPNOTSUPP, logged, when the kernel does not offer it
 * (/sys/module/fuse/parameters/enable_uring missing or N) or the possible
 * CPUs are not 0..n-1; -ENOMEM, or -errno of io_uring_queue_init. */
int fusefs_uring_new(struct fuse_session *se, struct fusefs *ff, unsigned int per_queue,
		     struct fusefs_uring **out);
/* Starts the threads; they register once INIT has been answered (or exit
 * if the kernel did not take the offer).  0 or -errno (no thread runs). */
int fusefs_uring_start(struct fusefs_uring *u);
/* Stops and joins the threads (the session has exited or was unmounted)
 * and frees everything. */
void fusefs_uring_stop(struct fusefs_uring *u);

#endif
