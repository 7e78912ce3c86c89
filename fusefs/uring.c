/* uring — FUSE over io_uring, one entry per thread (uring.h). */
#include "fusefs/uring.h"

#include <errno.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/zf_common.h"

/* The kernel's ABI (include/uapi/linux/fuse.h, protocol 7.42), which
 * Debian 12's <linux/fuse.h> predates. */
#define URING_HDR_SZ 128	/* bytes of in_out and of op_in */
struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* the request's unique: quoted in its commit */
	uint32_t payload_sz;	/* bytes of payload, either direction */
	uint32_t padding;
	uint64_t reserved;
};
struct uring_req_header {
	char in_out[URING_HDR_SZ];	/* fuse_in_header in, fuse_out_header out */
	char op_in[URING_HDR_SZ];	/* the opcode's fixed arguments */
	struct uring_ent_in_out ent;
};
struct uring_cmd_req {	/* in the SQE's 80-byte command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};
enum { URING_CMD_REGISTER = 1, URING_CMD_COMMIT_AND_FETCH = 2 };
_Static_assert(sizeof(struct uring_req_header) == 288, "fuse_uring_req_header");
_Static_assert(sizeof(struct uring_cmd_req) == 24, "fuse_uring_cmd_req");

#define ENABLE_PARAM "/sys/module/fuse/parameters/enable_uring"
/* The payload buffer: at least the kernel's largest request or reply
 * (max(max_write, max_pages pages) = FUSEFS_RX_PAYLOAD here). */
#define PAYLOAD_SZ FUSEFS_RX_PAYLOAD
/* Room before the payload for the request's header and fixed arguments,
 * which are copied there so that libfuse sees one contiguous request. */
#define PREFIX_SZ 4096u
/* How often a waiting thread looks whether the session has ended (ms). */
#define EXIT_POLL_MS 200

struct uring_thread {
	struct fusefs_uring *u;
	pthread_t thread;
	bool started;
	unsigned int qid;	/* the kernel's queue = the CPU it serves */
	struct io_uring ring;
	bool ring_ok;
	struct uring_req_header *hdr;	/* registered: iov[0] */
	char *area;		/* PREFIX_SZ + PAYLOAD_SZ; payload = iov[1] */
	struct iovec iov[2];
	/* The helper: a thread on the other CPUs that serves this entry's
	 * large READs and WRITEs and commits them, so that their copies (the
	 * handler's and the kernel's at commit) run beside the sender instead
	 * of on its CPU, while this thread waits. */
	pthread_t helper;
	bool helper_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fuse_buf *job;		/* lock: the request handed over, NULL
					 * once the helper has committed it */
	struct fusefs_ring_reply *job_reply;	/* lock */
	uint64_t job_id;		/* lock: its commit id */
	int job_err;			/* lock: the commit's submit result */
	bool stop;			/* lock */
};

struct fusefs_uring {
	struct fuse_session *se;
	struct fusefs *ff;
	unsigned int nthreads, per_queue;
	struct uring_thread *t;
};

static bool kernel_offers(void)
{
	char c = 0;
	FILE *f = fopen(ENABLE_PARAM, "re");
	if (!f)
		return false;
	bool on = fread(&c, 1, 1, f) == 1 && (c == 'Y' || c == '1');
	fclose(f);
	return on;
}

/* The kernel's queue count, num_possible_cpus(): queues are indexed by the
 * sending CPU, so only a possible set 0..n-1 is served (a sparse one
 * would leave a queue unregistered and the kernel holding requests). */
static long possible_cpus(void)
{
	char buf[64] = "";
	long lo = -1, hi = -1;
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	if (!f)
		return -errno;
	bool ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	if (!ok)
		return -EIO;
	int n = sscanf(buf, "%ld-%ld", &lo, &hi);
	if (n == 1)
		hi = lo;
	if (n < 1 || lo != 0 || hi < 0 || buf[strspn(buf, "0123456789-")] != '\n')
		return -EOPNOTSUPP;
	return hi + 1;
}

static int submit_cmd(struct uring_thread *t, uint32_t op, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	if (!sqe)
		return -EBUSY;	/* never: one command in flight per ring */
	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fuse_session_fd(t->u->se);
	sqe->cmd_op = op;
	sqe->addr = (uint64_t)(uintptr_t)t->iov;
	sqe->len = 2;
	struct uring_cmd_req *cr = (struct uring_cmd_req *)sqe->cmd;
	cr->commit_id = commit_id;
	cr->qid = (uint16_t)t->qid;
	int r = io_uring_submit(&t->ring);
	return r < 0 ? r : 0;
}

/* The entry's reply is complete: an -EIO header if the handler sent none
 * (every handler replies before it returns, fusefs.h; a request libfuse
 * drops still needs its commit), and the arguments' size. */
static void finish_reply(struct uring_thread *t, struct fusefs_ring_reply *r, uint64_t unique)
{
	if (!r->done) {
		struct fuse_out_header oh = { .len = sizeof(oh), .error = -EIO, .unique = unique };
		memcpy(t->hdr->in_out, &oh, sizeof(oh));
		r->len = 0;
	}
	t->hdr->ent.payload_sz = r->len;
}

/* Requests worth another CPU: readahead READs and writeback WRITEs carry
 * up to a MiB each, sent several at a time from one CPU. */
#define LARGE_IO (64u << 10)	/* bytes */
static bool is_large(const struct fuse_in_header *h, const char *args, uint32_t psz)
{
	if (h->opcode == FUSE_WRITE)
		return psz > LARGE_IO;
	if (h->opcode == FUSE_READ)
		return ((const struct fuse_read_in *)args)->size > LARGE_IO;
	return false;
}

static void *helper_main(void *arg)
{
	struct uring_thread *t = arg;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t cs;
	CPU_ZERO(&cs);
	for (long c = 0; c < n && c < CPU_SETSIZE; c++)
		if ((unsigned long)c != t->qid)
			CPU_SET(c, &cs);
	if (CPU_COUNT(&cs))
		(void)pthread_setaffinity_np(pthread_self(), sizeof(cs), &cs);
	pthread_mutex_lock(&t->lock);
	for (;;) {
		while (!t->job && !t->stop)
			pthread_cond_wait(&t->cond, &t->lock);
		if (t->stop)
			break;
		struct fuse_buf *b = t->job;
		struct fusefs_ring_reply *r = t->job_reply;
		pthread_mutex_unlock(&t->lock);
		fusefs_io_ring_begin(t->u->ff, r, b->mem, b->size);
		fuse_session_process_buf(t->u->se, b);
		fusefs_io_ring_end();
		finish_reply(t, r, r->unique);
		int err = submit_cmd(t, URING_CMD_COMMIT_AND_FETCH, t->job_id);
		pthread_mutex_lock(&t->lock);
		t->job = NULL;
		t->job_err = err;
		pthread_cond_broadcast(&t->cond);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* One fetched request: rebuilt contiguous in front of the payload (the
 * header and fixed arguments come in their own buffers), served by
 * libfuse, its reply put in the entry and committed with the next fetch.
 * A large one goes to the helper, which commits it.  0, or -errno of the
 * commit's submission. */
static int serve_one(struct uring_thread *t)
{
	struct fusefs *ff = t->u->ff;
	struct fuse_in_header h;
	char *payload = t->area + PREFIX_SZ;
	uint32_t psz = t->hdr->ent.payload_sz;
	uint64_t id = t->hdr->ent.commit_id;

	memcpy(&h, t->hdr->in_out, sizeof(h));
	struct fusefs_ring_reply r = {
		.unique = h.unique, .out = t->hdr->in_out,
		.payload = payload, .cap = PAYLOAD_SZ,
	};
	/* The fixed arguments' size: what the request's length leaves. */
	size_t oplen = h.len >= sizeof(h) + psz ? h.len - sizeof(h) - psz : SIZE_MAX;
	if (oplen > URING_HDR_SZ || psz > PAYLOAD_SZ) {
		zf_warn("io_uring request %llu (opcode %u) of bad length %u: answered EIO",
			(unsigned long long)h.unique, h.opcode, h.len);
		finish_reply(t, &r, h.unique);
		return submit_cmd(t, URING_CMD_COMMIT_AND_FETCH, id);
	}
	char *req = payload - oplen - sizeof(h);
	memcpy(req, &h, sizeof(h));
	memcpy(req + sizeof(h), t->hdr->op_in, oplen);
	struct fuse_buf buf = { .mem = req, .size = h.len };
	if (t->helper_started && is_large(&h, req + sizeof(h), psz)) {
		/* The helper owns the ring until it has submitted the commit. */
		pthread_mutex_lock(&t->lock);
		t->job = &buf;
		t->job_reply = &r;
		t->job_id = id;
		pthread_cond_broadcast(&t->cond);
		while (t->job)
			pthread_cond_wait(&t->cond, &t->lock);
		int err = t->job_err;
		pthread_mutex_unlock(&t->lock);
		return err;
	}
	fusefs_io_ring_begin(ff, &r, req, h.len);
	fuse_session_process_buf(t->u->se, &buf);
	fusefs_io_ring_end();
	finish_reply(t, &r, h.unique);
	return submit_cmd(t, URING_CMD_COMMIT_AND_FETCH, id);
}

static void *thread_main(void *arg)
{
	struct uring_thread *t = arg;
	struct fusefs_uring *u = t->u;
	struct __kernel_timespec poll = { .tv_nsec = EXIT_POLL_MS * 1000000L };
	int r;

	/* Serve the CPU whose requests this queue gets: a request and its
	 * reply then stay on one CPU. */
	cpu_set_t cs;
	CPU_ZERO(&cs);
	CPU_SET(t->qid, &cs);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(cs), &cs);

	while (!u->ff->init_answered) {
		if (fuse_session_exited(u->se))
			return NULL;
		struct timespec ms = { .tv_nsec = 1000000L };
		nanosleep(&ms, NULL);
	}
	if (t == u->t) {
		if (u->ff->uring_taken)
			zf_info("requests come over io_uring: %u thread(s) on each of %u CPU queues",
				u->per_queue, u->nthreads / u->per_queue);
		else
			zf_info("the kernel's INIT did not offer io_uring: requests come over /dev/fuse");
	}
	if (!u->ff->uring_taken)
		return NULL;
	r = submit_cmd(t, URING_CMD_REGISTER, 0);
	while (r == 0 && !fuse_session_exited(u->se)) {
		struct io_uring_cqe *cqe;
		r = io_uring_wait_cqe_timeout(&t->ring, &cqe, &poll);
		if (r == -ETIME || r == -EINTR) {
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		int res = cqe->res;
		io_uring_cqe_seen(&t->ring, cqe);
		if (res == -EAGAIN) {	/* the kernel has not finished INIT */
			struct timespec ms = { .tv_nsec = 1000000L };
			nanosleep(&ms, NULL);
			r = submit_cmd(t, URING_CMD_REGISTER, 0);
			continue;
		}
		if (res < 0) {
			/* -ENOTCONN: unmounted, the entries were torn down */
			if (res != -ENOTCONN && res != -ECANCELED)
				zf_warn("io_uring queue %u: %s; its requests go to the other threads",
					t->qid, strerror(-res));
			break;
		}
		r = serve_one(t);
	}
	if (r < 0 && r != -ENOTCONN)
		zf_warn("io_uring queue %u thread stops: %s", t->qid, strerror(-r));
	return NULL;
}

static void free_all(struct fusefs_uring *u)
{
	for (unsigned int i = 0; i < u->nthreads; i++) {
		struct uring_thread *t = &u->t[i];
		if (t->helper_started) {
			pthread_mutex_lock(&t->lock);
			t->stop = true;
			pthread_cond_broadcast(&t->cond);
			pthread_mutex_unlock(&t->lock);
			pthread_join(t->helper, NULL);
		}
		pthread_mutex_destroy(&t->lock);
		pthread_cond_destroy(&t->cond);
		if (t->ring_ok)
			io_uring_queue_exit(&t->ring);
		free(t->hdr);
		free(t->area);
	}
	free(u->t);
	free(u);
}

int fusefs_uring_new(struct fuse_session *se, struct fusefs *ff, unsigned int per_queue,
		     struct fusefs_uring **out)
{
	long ncpu = possible_cpus();
	int r = 0;

	*out = NULL;
	if (!kernel_offers()) {
		zf_info("io_uring transport not used: the kernel does not offer it (%s is not Y); "
			"requests come over /dev/fuse", ENABLE_PARAM);
		return -EOPNOTSUPP;
	}
	if (ncpu < 1 || ncpu > 1024) {
		zf_info("io_uring transport not used: the possible CPUs are not 0..n-1 (%s); "
			"requests come over /dev/fuse", ncpu < 0 ? strerror((int)-ncpu) : "too many");
		return -EOPNOTSUPP;
	}
	per_queue = ZF_MAX(1u, ZF_MIN(per_queue, FUSEFS_URING_MAX_PER_QUEUE));
	struct fusefs_uring *u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->se = se;
	u->ff = ff;
	u->per_queue = per_queue;
	u->nthreads = (unsigned int)ncpu * per_queue;
	u->t = calloc(u->nthreads, sizeof(*u->t));
	if (!u->t) {
		free(u);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < u->nthreads; i++) {
		pthread_mutex_init(&u->t[i].lock, NULL);
		pthread_cond_init(&u->t[i].cond, NULL);
	}
	for (unsigned int i = 0; i < u->nthreads && !r; i++) {
		struct uring_thread *t = &u->t[i];
		t->u = u;
		t->qid = i / per_queue;
		if (posix_memalign((void **)&t->hdr, 64, sizeof(*t->hdr)) ||
		    posix_memalign((void **)&t->area, 4096, PREFIX_SZ + PAYLOAD_SZ)) {
			r = -ENOMEM;
			break;
		}
		memset(t->hdr, 0, sizeof(*t->hdr));
		t->iov[0] = (struct iovec){ t->hdr, sizeof(*t->hdr) };
		t->iov[1] = (struct iovec){ t->area + PREFIX_SZ, PAYLOAD_SZ };
		r = io_uring_queue_init(2, &t->ring, IORING_SETUP_SQE128);
		t->ring_ok = r == 0;
	}
	if (r) {
		free_all(u);
		return r;
	}
	ff->uring_want = true;
	*out = u;
	return 0;
}

int fusefs_uring_start(struct fusefs_uring *u)
{
	for (unsigned int i = 0; i < u->nthreads; i++) {
		/* Without its helper a thread serves large requests itself. */
		u->t[i].helper_started = !pthread_create(&u->t[i].helper, NULL, helper_main, &u->t[i]);
		int r = pthread_create(&u->t[i].thread, NULL, thread_main, &u->t[i]);
		if (r) {
			/* Called before INIT is read (loop.c): withdrawing the
			 * offer here is in time, and the threads already
			 * started see it untaken and return. */
			u->ff->uring_want = false;
			return -r;
		}
		u->t[i].started = true;
	}
	return 0;
}

void fusefs_uring_stop(struct fusefs_uring *u)
{
	if (!u)
		return;
	for (unsigned int i = 0; i < u->nthreads; i++)
		if (u->t[i].started)
			pthread_join(u->t[i].thread, NULL);
	free_all(u);
}
