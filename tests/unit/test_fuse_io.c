/* Unit tests for the zf loop's own receive (fusefs/fuse_io.c), on a pipe
 * standing in for /dev/fuse: a WRITE's payload lands page-aligned in the
 * donor, any other request whole in the flat buffer, and without memory
 * for a donor a WRITE is read whole into the flat buffer for libfuse
 * (the session goes on instead of ending).  And the replies: one to the
 * request of an io_uring entry goes into the entry, any other to the
 * descriptor; the INIT reply takes io_uring only when offered and
 * wanted.  And the wait: the reader polls while most recent requests came
 * promptly and the last one was served inline, a request that comes while it polls ends the wait, one that
 * comes later is still read after the poll gives up, and a hang-up ends
 * the poll at once. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* RTLD_NEXT */
#endif
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_stats.h"
#include "fusefs/fusefs.h"
#include "testlib.h"

/* posix_memalign (zdev_buf_alloc's) fails while this is set. */
static atomic_bool fail_memalign;

int posix_memalign(void **p, size_t align, size_t n)
{
	static int (*next)(void **, size_t, size_t);

	if (fail_memalign)
		return ENOMEM;
	if (!next) {
		*(void **)&next = dlsym(RTLD_NEXT, "posix_memalign");	/* POSIX idiom */
		if (!next)
			abort();
	}
	return next(p, align, n);
}

static int pfd[2];
static struct fusefs ff;
static struct fusefs_rx rx;

static void setup(void)
{
	ck_assert_int_eq(pipe(pfd), 0);
	fusefs_io_set_thread_fd(pfd[0]);
	rx = (struct fusefs_rx){ .flat = malloc(FUSEFS_RX_FLAT) };
	ck_assert_ptr_nonnull(rx.flat);
}

static void teardown(void)
{
	fail_memalign = false;
	free(rx.flat);
	fs_donor_put(rx.donor);
	close(pfd[0]);
	close(pfd[1]);
	fusefs_io_set_thread_fd(-1);
}

/* A WRITE of n payload bytes of value v at offset off, in one pipe write. */
static size_t send_write(uint32_t n, uint8_t v, uint64_t off)
{
	size_t len = sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in) + n;
	uint8_t *b = calloc(1, len);
	struct fuse_in_header *h = (void *)b;
	struct fuse_write_in *w = (void *)(h + 1);
	*h = (struct fuse_in_header){ .len = (uint32_t)len, .opcode = FUSE_WRITE,
				      .unique = 7, .nodeid = 5 };
	*w = (struct fuse_write_in){ .offset = off, .size = n };
	memset(w + 1, v, n);
	ck_assert_int_eq(write(pfd[1], b, len), (ssize_t)len);
	free(b);
	return len;
}

START_TEST(write_payload_in_donor)
{
	size_t len = send_write(8192, 0xab, 1 << 20);
	ck_assert_int_eq(fusefs_io_receive(&ff, &rx, NULL), (int)len);
	ck_assert(rx.is_write);
	ck_assert_ptr_nonnull(rx.donor);
	ck_assert_uint_eq((uintptr_t)rx.donor->base % 4096, 0);
	for (int i = 0; i < 8192; i++)
		ck_assert_uint_eq(rx.donor->base[i], 0xab);
	const struct fuse_write_in *w = (const void *)(rx.flat + sizeof(struct fuse_in_header));
	ck_assert_uint_eq(w->offset, 1 << 20);
	ck_assert_uint_eq(w->size, 8192);
}
END_TEST

START_TEST(other_request_whole_in_flat)
{
	uint8_t b[300];
	struct fuse_in_header *h = (void *)b;
	for (size_t i = sizeof(*h); i < sizeof(b); i++)
		b[i] = (uint8_t)i;
	*h = (struct fuse_in_header){ .len = sizeof(b), .opcode = FUSE_SETXATTR, .unique = 9 };
	ck_assert_int_eq(write(pfd[1], b, sizeof(b)), (ssize_t)sizeof(b));
	ck_assert_int_eq(fusefs_io_receive(&ff, &rx, NULL), (int)sizeof(b));
	ck_assert(!rx.is_write);
	ck_assert_int_eq(memcmp(rx.flat, b, sizeof(b)), 0);
}
END_TEST

START_TEST(no_donor_memory_reads_into_flat)
{
	fail_memalign = true;
	size_t len = send_write(4096, 0x5a, 0);
	ck_assert_int_eq(fusefs_io_receive(&ff, &rx, NULL), (int)len);
	ck_assert_ptr_null(rx.donor);
	ck_assert(!rx.is_write);		/* libfuse serves it */
	size_t hdr = sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in);
	for (size_t i = 0; i < 4096; i++)
		ck_assert_uint_eq((uint8_t)rx.flat[hdr + i], 0x5a);
	/* memory back: the next WRITE gets a donor again */
	fail_memalign = false;
	len = send_write(4096, 0x11, 4096);
	ck_assert_int_eq(fusefs_io_receive(&ff, &rx, NULL), (int)len);
	ck_assert(rx.is_write);
	ck_assert_uint_eq(rx.donor->base[0], 0x11);
}
END_TEST

START_TEST(unmount_and_short_reads)
{
	close(pfd[1]);
	pfd[1] = open("/dev/null", O_WRONLY);
	ck_assert_int_eq(fusefs_io_receive(&ff, &rx, NULL), -ENODEV);	/* EOF */
}
END_TEST

/* A reply (header + arguments split over two segments) sent as libfuse
 * sends it. */
static void send_reply(uint64_t unique, int32_t err, const char *a, const char *b)
{
	struct fuse_out_header oh = { .len = (uint32_t)(sizeof(oh) + strlen(a) + strlen(b)),
				      .error = err, .unique = unique };
	struct iovec iov[3] = { { &oh, sizeof(oh) }, { (void *)a, strlen(a) },
				{ (void *)b, strlen(b) } };
	fusefs_io_send(&ff, iov, err ? 1 : 3);
}

START_TEST(ring_reply_into_entry)
{
	char out[sizeof(struct fuse_out_header)], payload[64];
	char req[sizeof(struct fuse_in_header) + 8] = { 0 };
	struct fuse_in_header *h = (void *)req;
	*h = (struct fuse_in_header){ .len = sizeof(req), .opcode = FUSE_GETATTR, .unique = 41 };
	struct fusefs_ring_reply r = { .unique = 41, .out = out, .payload = payload,
				       .cap = sizeof(payload) };

	fusefs_io_set_thread_fd(pfd[1]);
	fusefs_io_ring_begin(&ff, &r, req, sizeof(req));
	/* a reply to another request (a notification) still goes out */
	send_reply(40, 0, "not", "-mine");
	ck_assert(!r.done);
	send_reply(41, 0, "hello ", "ring");
	fusefs_io_ring_end();
	ck_assert(r.done);
	ck_assert_uint_eq(r.len, 10);
	ck_assert_int_eq(memcmp(payload, "hello ring", 10), 0);
	struct fuse_out_header oh;
	memcpy(&oh, out, sizeof(oh));
	ck_assert_uint_eq(oh.unique, 41);
	ck_assert_int_eq(oh.error, 0);
	char got[64];
	ssize_t n = read(pfd[0], got, sizeof(got));
	ck_assert_int_eq(n, (ssize_t)(sizeof(oh) + 8));
	ck_assert_int_eq(memcmp(got + sizeof(oh), "not-mine", 8), 0);

	/* an error reply, and arguments larger than the entry: -EIO */
	fusefs_io_ring_begin(&ff, &r, req, sizeof(req));
	send_reply(41, -ENOENT, "", "");
	ck_assert(r.done);
	ck_assert_uint_eq(r.len, 0);
	memcpy(&oh, out, sizeof(oh));
	ck_assert_int_eq(oh.error, -ENOENT);
	r.cap = 4;
	fusefs_io_ring_begin(&ff, &r, req, sizeof(req));
	send_reply(41, 0, "too ", "long");
	fusefs_io_ring_end();
	memcpy(&oh, out, sizeof(oh));
	ck_assert_int_eq(oh.error, -EIO);
	ck_assert_uint_eq(r.len, 0);
}
END_TEST

/* The INIT request as the kernel sends it, with or without the io_uring
 * offer; then libfuse's reply through fuse_io: returns the reply's flags
 * as written to the descriptor. */
static void init_round(bool offer, bool want, uint32_t *flags, uint32_t *flags2)
{
	uint8_t b[sizeof(struct fuse_in_header) + sizeof(struct fuse_init_in)] = { 0 };
	struct fuse_in_header *h = (void *)b;
	struct fuse_init_in *in = (void *)(h + 1);
	*h = (struct fuse_in_header){ .len = sizeof(b), .opcode = FUSE_INIT, .unique = 1 };
	in->major = 7;
	in->minor = 38;
	in->flags = FUSE_INIT_EXT;
	in->flags2 = offer ? FUSEFS_OVER_IO_URING_HI : 0;
	ff = (struct fusefs){ .uring_want = want };
	ck_assert_int_eq(write(pfd[1], b, sizeof(b)), (ssize_t)sizeof(b));
	ck_assert_int_eq(fusefs_io_receive(&ff, &rx, NULL), (int)sizeof(b));

	struct fuse_init_out out = { .major = 7, .minor = 38 };
	struct fuse_out_header oh = { .len = sizeof(oh) + sizeof(out), .unique = 1 };
	struct iovec iov[2] = { { &oh, sizeof(oh) }, { &out, sizeof(out) } };
	fusefs_io_set_thread_fd(pfd[1]);
	fusefs_io_send(&ff, iov, 2);
	fusefs_io_set_thread_fd(pfd[0]);
	uint8_t got[sizeof(oh) + sizeof(out)];
	ck_assert_int_eq(read(pfd[0], got, sizeof(got)), (ssize_t)sizeof(got));
	memcpy(&out, got + sizeof(oh), sizeof(out));
	*flags = out.flags;
	*flags2 = out.flags2;
	ck_assert(ff.init_answered);
}

START_TEST(init_takes_uring_when_offered_and_wanted)
{
	uint32_t f, f2;
	init_round(true, true, &f, &f2);
	ck_assert(f & FUSE_INIT_EXT);
	ck_assert(f2 & FUSEFS_OVER_IO_URING_HI);
	ck_assert(ff.uring_taken);
	init_round(true, false, &f, &f2);	/* rings not ready */
	ck_assert(!(f2 & FUSEFS_OVER_IO_URING_HI));
	ck_assert(!ff.uring_taken);
	init_round(false, true, &f, &f2);	/* the kernel does not offer it */
	ck_assert(!(f2 & FUSEFS_OVER_IO_URING_HI));
	ck_assert(!ff.uring_taken);
}
END_TEST

START_TEST(poll_only_while_requests_come_promptly)
{
	struct fusefs_poll p;
	fusefs_poll_init(&p, 0);
	ck_assert(!fusefs_poll_wanted(&p));		/* poll_us=0 */
	fusefs_poll_init(&p, 50);
	ck_assert(fusefs_poll_wanted(&p));		/* a new mount polls */
	p.after_inline = false;				/* after a handed-off request */
	ck_assert(!fusefs_poll_wanted(&p));
	p.after_inline = true;
	for (int i = 0; i < 100; i++)			/* one late wait in eight */
		fusefs_poll_note(&p, i % 8 ? 10000 : 5000000);
	ck_assert(fusefs_poll_wanted(&p));
	for (int i = 0; i < 3; i++)			/* three late ones in a row */
		fusefs_poll_note(&p, 50001);
	ck_assert(!fusefs_poll_wanted(&p));
	for (int i = 0; i < 100; i++)			/* one prompt wait in two */
		fusefs_poll_note(&p, i % 2 ? 1000 : 1000000);
	ck_assert(!fusefs_poll_wanted(&p));
	int n = 0;
	while (!fusefs_poll_wanted(&p) && n < 100) {	/* prompt ones, timed asleep */
		fusefs_poll_note(&p, 50000);
		n++;
	}
	ck_assert_int_le(n, 12);
}
END_TEST

/* Writes a 300-byte request into pfd[1] after delay_ms. */
static void *send_later(void *arg)
{
	uint8_t b[300] = { 0 };
	struct fuse_in_header *h = (void *)b;
	*h = (struct fuse_in_header){ .len = sizeof(b), .opcode = FUSE_GETATTR, .unique = 11 };
	struct timespec ts = { 0, (long)(uintptr_t)arg * 1000000L };
	nanosleep(&ts, NULL);
	ck_assert_int_eq(write(pfd[1], b, sizeof(b)), (ssize_t)sizeof(b));
	return NULL;
}

/* Receives with p while a request is sent delay_ms later; the poll
 * counters' growth in *d, the wait's length (ms) returned. */
static double receive_sent_later(struct fusefs_poll *p, unsigned int delay_ms,
				 struct fs_poll_counts *d)
{
	struct fs_poll_counts a, b;
	pthread_t t;
	fs_lat_get_poll(&a);
	uint64_t t0 = zf_now_ns();
	ck_assert_int_eq(pthread_create(&t, NULL, send_later, (void *)(uintptr_t)delay_ms), 0);
	ck_assert_int_eq(fusefs_io_receive(&ff, &rx, p), 300);
	double ms = (double)(zf_now_ns() - t0) / 1e6;
	pthread_join(t, NULL);
	fs_lat_get_poll(&b);
	*d = (struct fs_poll_counts){ b.hits - a.hits, b.misses - a.misses, b.ns - a.ns };
	ck_assert_uint_eq(((struct fuse_in_header *)rx.flat)->unique, 11);
	return ms;
}

START_TEST(poll_catches_a_prompt_request)
{
	struct fusefs_poll p;
	struct fs_poll_counts d;
	fusefs_poll_init(&p, FUSEFS_POLL_MAX_US);
	p.limit_ns = 2000000000ull;	/* 2 s: the sender comes well within it */
	double ms = receive_sent_later(&p, 5, &d);
	/* A hit within the 2 s limit: it polled until the request came.  How
	 * long that was depends on when this thread got a CPU (on a loaded
	 * machine it may start polling after the request was sent), so only
	 * the bound that always holds is asserted: the poll lies within the
	 * receive. */
	ck_assert_uint_eq(d.hits, 1);
	ck_assert_uint_eq(d.misses, 0);
	ck_assert_uint_le(d.ns, (uint64_t)(ms * 1e6) + 1);
	ck_assert(fusefs_poll_wanted(&p));
}
END_TEST

START_TEST(poll_gives_up_then_the_read_waits)
{
	struct fusefs_poll p;
	struct fs_poll_counts d;
	fusefs_poll_init(&p, 2000);	/* 2 ms */
	double ms = receive_sent_later(&p, 100, &d);
	ck_assert_uint_eq(d.hits, 0);
	ck_assert_uint_eq(d.misses, 1);
	ck_assert_uint_ge(d.ns, 2000000);
	ck_assert_uint_lt(d.ns, 90000000);	/* it slept, not polled, for the rest */
	ck_assert_double_ge(ms, 95);
	/* two more late requests and the reader stops polling */
	receive_sent_later(&p, 10, &d);
	receive_sent_later(&p, 10, &d);
	ck_assert(!fusefs_poll_wanted(&p));
	receive_sent_later(&p, 10, &d);
	ck_assert_uint_eq(d.hits + d.misses, 0);
	ck_assert_uint_eq(d.ns, 0);
}
END_TEST

START_TEST(poll_ends_at_a_hang_up)
{
	struct fusefs_poll p;
	fusefs_poll_init(&p, FUSEFS_POLL_MAX_US);
	p.limit_ns = 5000000000ull;	/* 5 s */
	close(pfd[1]);
	pfd[1] = open("/dev/null", O_WRONLY);
	uint64_t t0 = zf_now_ns();
	ck_assert_int_eq(fusefs_io_receive(&ff, &rx, &p), -ENODEV);
	ck_assert_uint_lt(zf_now_ns() - t0, 1000000000ull);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuse_io");
	TCase *tc = tcase_create("receive");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, write_payload_in_donor);
	tcase_add_test(tc, other_request_whole_in_flat);
	tcase_add_test(tc, no_donor_memory_reads_into_flat);
	tcase_add_test(tc, unmount_and_short_reads);
	suite_add_tcase(s, tc);
	tc = tcase_create("wait");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, poll_only_while_requests_come_promptly);
	tcase_add_test(tc, poll_catches_a_prompt_request);
	tcase_add_test(tc, poll_gives_up_then_the_read_waits);
	tcase_add_test(tc, poll_ends_at_a_hang_up);
	suite_add_tcase(s, tc);
	tc = tcase_create("reply");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, ring_reply_into_entry);
	tcase_add_test(tc, init_takes_uring_when_offered_and_wanted);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
