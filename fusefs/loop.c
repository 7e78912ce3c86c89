/* loop — serve each FUSE request on the thread that read it (loop.h). */
#include "fusefs/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_stats.h"
#include "fusefs/uring.h"

/* What the workers share. */
struct loop {
	/* Only the worker holding this reads from /dev/fuse; it gives it up
	 * before serving a request that may block, so that another worker
	 * reads the next one meanwhile.  Requests that do not block are
	 * served by the reader itself, which then reads again: no thread
	 * wake-up between them. */
	pthread_mutex_t reader_lock;
	struct fusefs_poll poll;	/* reader_lock: how the reader waits */
};

/* How a request is served by the worker that read it:
 * HERE: it keeps the reader lock until the handler is about to block (the
 *   blocking notice, zf_will_block in zf_common.h: device I/O, a write-out
 *   in flight, free space, the log), when the lock goes to a waiting
 *   worker; a request that does not block is followed by the next read on
 *   the same thread.  Lookups, attributes, small READs served from memory
 *   or spliced from the device's file, and the small WRITEs, RELEASEs and
 *   SETATTRs that copy into the write buffer or change memory: a caller
 *   waits for most of them (the close of a small file sends a WRITE and a
 *   RELEASE, an unlink a SETATTR), and handing each off would cost the
 *   thread wake-up per request this loop exists to avoid.
 * HAND_OFF: the lock goes at once.  Requests that always wait (fsync, a
 *   fallocate or a copy) and READs and WRITEs over INLINE_MAX, which the
 *   kernel's readahead and write-back send several at a time, so that
 *   another worker serves the next one meanwhile. */
#define INLINE_MAX (32u << 10)	/* bytes */
enum serve { SERVE_HERE, SERVE_HAND_OFF };

static enum serve how_to_serve(const struct fusefs_rx *rx)
{
	const struct fuse_in_header *h = (const void *)rx->flat;
	uint64_t size = 0;
	if (rx->is_write) {
		size = ((const struct fuse_write_in *)(h + 1))->size;
	} else if (h->opcode == FUSE_READ) {
		if (rx->n < sizeof(*h) + sizeof(struct fuse_read_in))
			return SERVE_HAND_OFF;	/* malformed: libfuse answers it */
		size = ((const struct fuse_read_in *)(h + 1))->size;
	} else if (h->opcode == FUSE_WRITE) {	/* not read into a donor */
		size = rx->n;
	}
	switch (h->opcode) {
	case FUSE_FSYNC: case FUSE_FSYNCDIR: case FUSE_FALLOCATE: case FUSE_DESTROY:
	case FUSE_COPY_FILE_RANGE:
		return SERVE_HAND_OFF;
	default:
		return size > INLINE_MAX ? SERVE_HAND_OFF : SERVE_HERE;
	}
}

struct worker {
	pthread_t thread;
	bool started;
	bool held;		/* it holds loop->reader_lock */
	struct loop *loop;
	int fd;			/* own /dev/fuse clone, or -1 = the session's */
	int err;		/* -errno of the read that stopped it, 0 */
	struct fuse_session *se;
	struct fusefs *ff;
	sem_t *stopped;		/* posted when the worker returns */
	atomic_bool *unmounted;	/* set by a worker whose read found the mount gone */
	_Atomic uint64_t *unmount_ns;	/* zf_now_ns() of the first such read, set once */
};

static void unlock_reader(void *arg)
{
	struct worker *w = arg;
	if (w->held)
		pthread_mutex_unlock(&w->loop->reader_lock);
	w->held = false;
}

/* The blocking notice of a request served HERE (set only while the
 * worker holds the reader lock): it blocks, so it was not served inline
 * after all, and the next reader does not poll for its caller. */
static void hand_off_reader(void *arg)
{
	struct worker *w = arg;
	w->loop->poll.after_inline = false;	/* reader_lock: held */
	unlock_reader(w);
}

/* A clone of the session's /dev/fuse descriptor; -errno if the kernel or
 * the device does not allow it. */
static int clone_dev(int session_fd)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	uint32_t src = (uint32_t)session_fd;
	if (ioctl(fd, FUSE_DEV_IOC_CLONE, &src) != 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static void free_rx(void *p)
{
	struct fusefs_rx *rx = p;
	free(rx->flat);
	fs_donor_put(rx->donor);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct fusefs_rx rx = { .flat = malloc(FUSEFS_RX_FLAT) };
	/* Never polling (poll_us=0, one CPU), the waits need no timing. */
	struct fusefs_poll *wait = w->loop->poll.limit_ns ? &w->loop->poll : NULL;
	int old;

	fusefs_io_set_thread_fd(w->fd >= 0 ? w->fd : fuse_session_fd(w->se));
	/* Cancelled only while waiting to read or blocked in read(): the main
	 * thread stops the workers that the end of the session did not wake. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	pthread_cleanup_push(free_rx, &rx);
	pthread_cleanup_push(unlock_reader, w);
	if (!rx.flat)
		w->err = -ENOMEM;
	while (rx.flat && !fuse_session_exited(w->se)) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
		if (!w->held) {
			pthread_mutex_lock(&w->loop->reader_lock);	/* not a cancellation point */
			w->held = true;
			pthread_testcancel();
		}
		int n = fusefs_io_receive(w->ff, &rx, wait);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
		if (n == -EINTR || n == -EAGAIN || n == -ENOENT)
			continue;	/* a signal, or an interrupted request */
		if (n == -ENODEV) {	/* unmounted */
			uint64_t none = 0;
			atomic_compare_exchange_strong(w->unmount_ns, &none, zf_now_ns());
			*w->unmounted = true;
			fuse_session_exit(w->se);
			break;
		}
		if (n < 0) {
			w->err = n;
			break;
		}
		struct fuse_buf buf = { .mem = rx.flat, .size = rx.n };
		enum serve how = how_to_serve(&rx);
		if (wait)
			wait->after_inline = how != SERVE_HAND_OFF;	/* reader_lock: held */
		if (how == SERVE_HAND_OFF)
			unlock_reader(w);
		else
			zf_block_notice_set(hand_off_reader, w);
		if (rx.is_write)
			fusefs_write_direct(w->ff, &rx);
		else
			fuse_session_process_buf(w->se, &buf);
		zf_block_notice_set(NULL, NULL);
		fs_lat_count_serve(how == SERVE_HAND_OFF ? FS_SERVED_HANDED_OFF :
				   w->held ? FS_SERVED_INLINE : FS_SERVED_UNTIL_BLOCK);
	}
	pthread_cleanup_pop(1);
	pthread_cleanup_pop(1);
	sem_post(w->stopped);
	return NULL;
}

/* The CPUs this process may run on. */
static int usable_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int fusefs_loop_run(struct fuse_session *se, struct fusefs_loop_conf *c)
{
	struct worker w[FUSEFS_LOOP_MAX_WORKERS];
	unsigned n = ZF_MAX(1u, ZF_MIN(c->workers, (unsigned)FUSEFS_LOOP_MAX_WORKERS));
	int sfd = fuse_session_fd(se), ret = 0, r;
	sem_t stopped;
	atomic_bool unmounted = false;
	_Atomic uint64_t unmount_ns = 0;
	struct loop loop = { .reader_lock = PTHREAD_MUTEX_INITIALIZER };

	unsigned int poll_us = c->poll_us;
	if (poll_us && usable_cpus() < 2) {
		zf_info("one CPU to run on: the request loop sleeps until each request comes (no polling)");
		poll_us = 0;
	}
	fusefs_poll_init(&loop.poll, poll_us);
	if (sem_init(&stopped, 0, 0))
		return -errno;
	struct fusefs_uring *ring = NULL;
	if (c->uring_per_queue) {
		r = fusefs_uring_new(se, c->ff, c->uring_per_queue, &ring);
		if (!r)
			r = fusefs_uring_start(ring);
		if (r && r != -EOPNOTSUPP)	/* which fusefs_uring_new explains */
			zf_info("io_uring transport not used (%s): requests come over /dev/fuse",
				strerror(-r));
	}
	for (unsigned i = 0; i < n; i++) {
		w[i] = (struct worker){ .fd = -1, .loop = &loop, .se = se, .ff = c->ff,
					.stopped = &stopped, .unmounted = &unmounted,
					.unmount_ns = &unmount_ns };
		if (c->clone_fd && i > 0) {
			r = clone_dev(sfd);
			if (r < 0)
				zf_info("worker %u shares the session's /dev/fuse: cannot clone it (%s)",
					i, strerror(-r));
			else
				w[i].fd = r;
		}
		r = pthread_create(&w[i].thread, NULL, worker_main, &w[i]);
		if (r) {
			zf_err("cannot start FUSE worker %u: %s", i, strerror(r));
			if (w[i].fd >= 0)
				close(w[i].fd);
			w[i].fd = -1;
			if (i == 0) {
				fuse_session_exit(se);
				fusefs_uring_stop(ring);
				sem_destroy(&stopped);
				return -r;
			}
			break;
		}
		w[i].started = true;
	}
	/* The first worker to stop ends the session.  An unmount reaches
	 * every worker (each read finds the mount gone), so they all return
	 * by themselves; a signal wakes only the thread that took it, so the
	 * others are cancelled where they wait to read. */
	unsigned int started = 0;
	for (unsigned i = 0; i < n; i++)
		started += w[i].started;
	int sw;
	while ((sw = sem_wait(&stopped)) != 0 && errno == EINTR && !fuse_session_exited(se))
		;
	unsigned int gone = sw == 0;
	fuse_session_exit(se);
	while (unmounted && gone < started)
		if (sem_wait(&stopped) == 0)
			gone++;
	for (unsigned i = 0; i < n && gone < started; i++)
		if (w[i].started)
			pthread_cancel(w[i].thread);
	for (unsigned i = 0; i < n; i++) {
		if (!w[i].started)
			continue;
		pthread_join(w[i].thread, NULL);
		if (w[i].err < 0 && !ret)
			ret = w[i].err;
		if (w[i].fd >= 0)
			close(w[i].fd);
	}
	fusefs_uring_stop(ring);	/* the session has exited: they return */
	sem_destroy(&stopped);
	c->unmount_ns = unmount_ns;
	return ret;
}
