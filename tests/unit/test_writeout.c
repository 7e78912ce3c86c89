/* The write-out in flight (fs_data.c): a stripe of chunks is written to the
 * device with the inode's rw lock released, so other writers of the same
 * file fill the next stripe meanwhile.  On an emulated device with a
 * performance model (so write-outs take time and overlap the writers),
 * with striping:
 *   - concurrent writers of disjoint stripes of one file, an overwriter of
 *     ranges that were just written (buffered or in flight), readers and
 *     fsyncs all at once: every read returns the newest bytes;
 *   - after everything is fsync'ed and the power fails, the remounted file
 *     holds exactly those bytes (an extent is logged only after its data
 *     write completed, fsync waits for the write-out in flight);
 *   - truncate and punch while write-outs are in flight;
 *   - a failing write-out reaches the next fsync of the file.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "testlib.h"

#define UNIT (64u << 10)		/* stripe_unit */
#define WIDTH 4u			/* stripe_width */
#define STRIPE (UNIT * WIDTH)
#define NWRITERS 4
#define STRIPES_EACH 12
#define NSTRIPES (NWRITERS * STRIPES_EACH)
#define FSIZE ((uint64_t)NSTRIPES * STRIPE)
#define GRAIN 1024u			/* overwrite granularity (bytes) */

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void make_dev(void)
{
	struct zdev_emu_params p = { 0 };
	p.zone_size = 8u << 20;
	p.nr_zones = 40;
	p.block_size = 4096;
	p.max_open = 14;
	p.max_active = 14;
	/* 4 zones x 64 KiB at 400 MB/s: ~0.7 ms per stripe, long enough for
	 * writers to meet the write-out in flight */
	p.zone_write_mbps = 400;
	p.zone_read_mbps = 2000;
	p.device_mbps = 4000;
	tl_dev_create_params(&td, "wo", &p);
}

static void do_mount(void)
{
	struct fs_opts o;
	fs_opts_default(&o);
	o.commit_interval_ms = 0;
	o.buffer_bytes = 16ull << 20;	/* per file: 2 MiB before it must write */
	o.stripe_unit = UNIT;
	o.stripe_width = WIDTH;
	o.reorder_chunks = 4;
	ck_assert_int_eq(fs_mount(dev, &o, &fs), 0);
}

static void setup(void)
{
	make_dev();
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(fs_mkfs(dev, NULL), 0);
	do_mount();
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

static void report(void *arg, const char *fmt, ...)
{
	(void)arg;
	(void)fmt;
	ck_abort_msg("fsck found a problem");
}

static void crash_and_remount(void)
{
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);		/* fails (-EIO): the device is dead; frees */
	fs = NULL;
	zdev_close(dev);
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(fs_check(dev, false, report, NULL), 0);
	do_mount();
}

static uint64_t mkfile(const char *name)
{
	struct stat st;
	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, name, S_IFREG | 0644, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

/* The byte at file offset off, version v (0 = never written: zero). */
static uint8_t byte_at(uint64_t off, uint32_t v)
{
	return v ? (uint8_t)(((off * 2654435761u) >> 7) + v * 101u + 1) : 0;
}

static void fill(uint8_t *b, uint64_t off, size_t n, uint32_t v)
{
	for (size_t i = 0; i < n; i++)
		b[i] = byte_at(off + i, v);
}

/* ---- concurrent writers, overwriter, readers, fsyncs ---- */

static uint64_t ino;
static _Atomic bool stripe_done[NSTRIPES];	/* all its v1 bytes written */
static uint32_t version[FSIZE / GRAIN];		/* newest version per grain */
static _Atomic bool stop;
static _Atomic int failures;
static _Atomic uint64_t nreads, noverwrites, nfsyncs;

static void note_fail(const char *what, uint64_t off, long got)
{
	fprintf(stderr, "test_writeout: %s at %llu (%ld)\n", what,
		(unsigned long long)off, got);
	failures++;
}

/* Writer t writes stripes t, t+N, t+2N, ... (version 1) in pieces that do
 * not line up with pages or chunks. */
static void *writer(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint8_t *b = malloc(STRIPE);
	unsigned seed = t + 1;

	for (unsigned s = t; s < NSTRIPES; s += NWRITERS) {
		uint64_t base = (uint64_t)s * STRIPE, pos = 0;
		fill(b, base, STRIPE, 1);
		while (pos < STRIPE) {
			size_t n = (size_t)(1 + rand_r(&seed) % (96 << 10));
			n = ZF_MIN((size_t)(STRIPE - pos), n);
			ssize_t w = fs_write(fs, ino, base + pos, b + pos, n, false);
			if (w != (ssize_t)n) {
				note_fail("short write", base + pos, (long)w);
				goto out;
			}
			pos += n;
		}
		stripe_done[s] = true;
	}
out:
	free(b);
	return NULL;
}

/* Overwrites grains of even stripes already written (buffered, in flight
 * or on the device) with newer versions, and reads each back at once. */
static void *overwriter(void *arg)
{
	(void)arg;
	uint8_t *b = malloc(8 * UNIT), *r = malloc(8 * UNIT);
	unsigned seed = 99;
	uint32_t v = 2;

	while (!stop) {
		unsigned s = (unsigned)(rand_r(&seed) % NSTRIPES) & ~1u;
		if (!stripe_done[s]) {
			sched_yield();
			continue;
		}
		uint64_t g0 = (uint64_t)s * STRIPE / GRAIN + (uint64_t)rand_r(&seed) % (STRIPE / GRAIN);
		uint64_t ng = 1 + (uint64_t)rand_r(&seed) % (2 * UNIT / GRAIN);
		ng = ZF_MIN(ng, (uint64_t)(s + 1) * STRIPE / GRAIN - g0);
		uint64_t off = g0 * GRAIN;
		size_t n = (size_t)(ng * GRAIN);
		for (uint64_t g = 0; g < ng; g++)
			fill(b + g * GRAIN, off + g * GRAIN, GRAIN, v);
		ssize_t w = fs_write(fs, ino, off, b, n, false);
		if (w != (ssize_t)n) {
			note_fail("overwrite", off, (long)w);
			break;
		}
		for (uint64_t g = 0; g < ng; g++)
			version[g0 + g] = v;
		if (fs_read(fs, ino, off, n, r) != (ssize_t)n || memcmp(r, b, n)) {
			note_fail("read back of an overwrite", off, 0);
			break;
		}
		v++;
		noverwrites++;
	}
	free(b);
	free(r);
	return NULL;
}

/* Reads odd stripes once written: exactly version 1, wherever the bytes
 * are (buffer, write-out in flight, device). */
static void *reader(void *arg)
{
	(void)arg;
	uint8_t *b = malloc(STRIPE), *want = malloc(STRIPE);
	unsigned seed = 7;

	while (!stop) {
		unsigned s = (unsigned)(rand_r(&seed) % NSTRIPES) | 1u;
		if (s >= NSTRIPES || !stripe_done[s]) {
			sched_yield();
			continue;
		}
		uint64_t base = (uint64_t)s * STRIPE;
		uint64_t o = (uint64_t)rand_r(&seed) % STRIPE;
		uint64_t want_n = 1 + (uint64_t)rand_r(&seed) % (3 * UNIT);
		size_t n = (size_t)ZF_MIN(want_n, STRIPE - o);
		fill(want, base + o, n, 1);
		ssize_t got = fs_read(fs, ino, base + o, n, b);
		if (got != (ssize_t)n || memcmp(b, want, n)) {
			size_t i = 0;
			while (got == (ssize_t)n && i < n && b[i] == want[i])
				i++;
			size_t j = i;
			while (got == (ssize_t)n && j < n && b[j] != want[j])
				j++;
			fprintf(stderr, "test_writeout: read [%llu, +%zu): bytes %llu..%llu differ (got 0x%02x want 0x%02x)\n",
				(unsigned long long)(base + o), n, (unsigned long long)(base + o + i),
				(unsigned long long)(base + o + j), i < n ? b[i] : 0, i < n ? want[i] : 0);
			note_fail("read of a written stripe", base + o, (long)got);
			break;
		}
		nreads++;
	}
	free(b);
	free(want);
	return NULL;
}

static void *syncer(void *arg)
{
	(void)arg;
	while (!stop) {
		int r = fs_fsync(fs, ino, false);
		if (r) {
			note_fail("fsync", 0, r);
			break;
		}
		nfsyncs++;
		usleep(2000);
	}
	return NULL;
}

static void expect_file(void)
{
	uint8_t *b = malloc(STRIPE), *want = malloc(STRIPE);
	struct stat st;

	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, FSIZE);
	for (uint64_t base = 0; base < FSIZE; base += STRIPE) {
		for (uint64_t g = 0; g < STRIPE / GRAIN; g++) {
			uint32_t v = version[(base + g * GRAIN) / GRAIN];
			fill(want + g * GRAIN, base + g * GRAIN, GRAIN, v ? v : 1);
		}
		ck_assert_int_eq(fs_read(fs, ino, base, STRIPE, b), (ssize_t)STRIPE);
		for (size_t i = 0; i < STRIPE; i++)
			if (b[i] != want[i])
				ck_abort_msg("byte %llu is 0x%02x, expected 0x%02x",
					     (unsigned long long)(base + i), b[i], want[i]);
	}
	free(b);
	free(want);
}

START_TEST(concurrent_writers_crash)
{
	pthread_t w[NWRITERS], ow, rd, sy;

	ck_assert_int_eq(gc_attach(fs), 0);	/* the collector, as the daemon */
	ck_assert_int_eq(fs_start(fs), 0);
	ino = mkfile("f");
	memset(version, 0, sizeof(version));
	for (unsigned s = 0; s < NSTRIPES; s++)
		stripe_done[s] = false;
	stop = false;
	failures = 0;
	nreads = noverwrites = nfsyncs = 0;
	for (unsigned t = 0; t < NWRITERS; t++)
		ck_assert_int_eq(pthread_create(&w[t], NULL, writer, (void *)(uintptr_t)t), 0);
	ck_assert_int_eq(pthread_create(&ow, NULL, overwriter, NULL), 0);
	ck_assert_int_eq(pthread_create(&rd, NULL, reader, NULL), 0);
	ck_assert_int_eq(pthread_create(&sy, NULL, syncer, NULL), 0);
	for (unsigned t = 0; t < NWRITERS; t++)
		pthread_join(w[t], NULL);
	/* overwrites, reads and fsyncs once every writer is done: at least
	 * 50 ms, and until the overwriter and the reader have run at all (a
	 * loaded machine may not schedule them sooner), at most 10 s */
	usleep(50000);
	for (int i = 0; i < 1000 && (!noverwrites || !nreads); i++)
		usleep(10000);
	stop = true;
	pthread_join(ow, NULL);
	pthread_join(rd, NULL);
	pthread_join(sy, NULL);
	ck_assert_int_eq(failures, 0);
	ck_assert_uint_gt(noverwrites, 0);
	ck_assert_uint_gt(nreads, 0);
	fprintf(stderr, "test_writeout: %llu overwrites, %llu reads, %llu fsyncs\n",
		(unsigned long long)noverwrites, (unsigned long long)nreads,
		(unsigned long long)nfsyncs);
	expect_file();
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	/* Written after the fsync, never fsync'ed: may or may not survive,
	 * but must not disturb what was fsync'ed. */
	uint8_t *b = malloc(STRIPE);
	fill(b, FSIZE, STRIPE, 1);
	ck_assert_int_eq(fs_write(fs, ino, FSIZE, b, STRIPE, false), (ssize_t)STRIPE);
	free(b);
	crash_and_remount();
	struct stat st;
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "f", &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_uint_eq(st.st_ino, ino);
	ck_assert_uint_ge((uint64_t)st.st_size, FSIZE);
	/* the unsynced tail is cut back for the check below */
	ck_assert_int_eq(fs_setattr(fs, ino, &(struct stat){ .st_size = (off_t)FSIZE },
				    FS_SET_SIZE, NULL), 0);
	expect_file();
}
END_TEST

/* ---- truncate and punch while write-outs are in flight ---- */

struct shrink_arg { uint64_t ino; unsigned stripes; };

static void *stripe_writer(void *arg)
{
	struct shrink_arg *a = arg;
	uint8_t *b = malloc(STRIPE);
	for (unsigned s = 0; s < a->stripes; s++) {
		fill(b, (uint64_t)s * STRIPE, STRIPE, 1);
		if (fs_write(fs, a->ino, (uint64_t)s * STRIPE, b, STRIPE, false) != (ssize_t)STRIPE)
			note_fail("write", (uint64_t)s * STRIPE, 0);
	}
	free(b);
	return NULL;
}

START_TEST(truncate_punch_during_writeout)
{
	struct shrink_arg a = { mkfile("t"), 32 };
	pthread_t th;
	uint8_t *b = malloc(STRIPE);

	failures = 0;
	ck_assert_int_eq(pthread_create(&th, NULL, stripe_writer, &a), 0);
	for (struct stat st; fs_getattr(fs, a.ino, &st) == 0 && (uint64_t)st.st_size < 4 * STRIPE;)
		usleep(100);
	/* Shrink and punch while the writer's stripes go out: after each, the
	 * bytes cut away read as zeros however the write-out was timed. */
	for (int k = 0; k < 20; k++) {
		struct stat st;
		ck_assert_int_eq(fs_getattr(fs, a.ino, &st), 0);
		uint64_t cut = ZF_ALIGN_DOWN((uint64_t)st.st_size / 2, 4096) + 123;
		ck_assert_int_eq(fs_setattr(fs, a.ino, &(struct stat){ .st_size = (off_t)cut },
					    FS_SET_SIZE, NULL), 0);
		ck_assert_int_eq(fs_fallocate(fs, a.ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					      cut / 4, UNIT + 1000), 0);
		ssize_t n = fs_read(fs, a.ino, cut / 4, UNIT + 1000, b);
		ck_assert_int_ge(n, 0);
		for (ssize_t i = 0; i < n; i++)
			ck_assert_uint_eq(b[i], 0);
		usleep(500);
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(failures, 0);
	/* the final state after the last stripe: a clean, fsck-able fs */
	ck_assert_int_eq(fs_fsync(fs, a.ino, false), 0);
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, a.ino, &st), 0);
	uint64_t size = (uint64_t)st.st_size;
	uint8_t *want = malloc(STRIPE);
	uint64_t from = size > STRIPE ? size - STRIPE : 0;
	ck_assert_int_eq(fs_read(fs, a.ino, from, size - from, b), (ssize_t)(size - from));
	crash_and_remount();
	ck_assert_int_eq(fs_getattr(fs, a.ino, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, size);
	ck_assert_int_eq(fs_read(fs, a.ino, from, size - from, want), (ssize_t)(size - from));
	ck_assert_int_eq(memcmp(b, want, size - from), 0);
	free(b);
	free(want);
}
END_TEST

/* ---- a failing write-out reaches fsync ---- */

START_TEST(writeout_error_reaches_fsync)
{
	uint64_t f = mkfile("e");
	uint8_t *b = malloc(4 * STRIPE);

	fill(b, 0, 4 * STRIPE, 3);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE, 0, 1000000, -EIO), 0);
	/* full stripes: written out by fs_write itself, which cannot report
	 * it (the bytes are buffered, the write succeeded) */
	ck_assert_int_eq(fs_write(fs, f, 0, b, 4 * STRIPE, false), (ssize_t)(4 * STRIPE));
	ck_assert_int_lt(fs_fsync(fs, f, false), 0);
	ck_assert_int_lt(fs_fsync(fs, f, false), 0);	/* still not there */
	for (int k = 0; k < ZDEV_FAULT_NR; k++)
		ck_assert_int_eq(zdev_emu_inject_fault(dev, (enum zdev_fault_kind)k, 0, 0, 0), 0);
	/* the bytes stayed buffered: once the device works, fsync gets them */
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	crash_and_remount();
	uint8_t *r = malloc(4 * STRIPE);
	ck_assert_int_eq(fs_read(fs, f, 0, 4 * STRIPE, r), (ssize_t)(4 * STRIPE));
	ck_assert_int_eq(memcmp(r, b, 4 * STRIPE), 0);
	free(r);
	free(b);
}
END_TEST

/* fdatasync logs no INODE record for times: the size must come back from
 * the extent and truncate records alone.  Appends of odd sizes, a write
 * past the end over a hole, a truncate that grows the file and one that
 * shrinks it, each followed by fdatasync; then the power fails.  And an
 * fsync still makes the times durable. */
START_TEST(fdatasync_keeps_size_and_data)
{
	uint64_t f = mkfile("d"), g = mkfile("t");
	const size_t n = 64u << 10;
	uint8_t *b = malloc(n), *r = malloc(n), *want = calloc(1, n);
	struct stat st, at;
	struct timespec ts = { 1000000, 0 };

	fill(b, 0, n, 7);
	ck_assert_int_eq(fs_write(fs, f, 0, b, 3000, false), 3000);
	ck_assert_int_eq(fs_fsync(fs, f, true), 0);
	ck_assert_int_eq(fs_write(fs, f, 3000, b + 3000, 5000, false), 5000);
	ck_assert_int_eq(fs_fsync(fs, f, true), 0);
	memcpy(want, b, 8000);
	/* past the end: a hole [8000, 30000) */
	ck_assert_int_eq(fs_write(fs, f, 30000, b + 30000, 100, false), 100);
	memcpy(want + 30000, b + 30000, 100);
	ck_assert_int_eq(fs_fsync(fs, f, true), 0);
	/* a grown size through truncate, then a shrink inside the last block */
	memset(&at, 0, sizeof(at));
	at.st_size = 40000;
	ck_assert_int_eq(fs_setattr(fs, f, &at, FS_SET_SIZE, &st), 0);
	ck_assert_int_eq(fs_fsync(fs, f, true), 0);
	at.st_size = 30050;
	ck_assert_int_eq(fs_setattr(fs, f, &at, FS_SET_SIZE, &st), 0);
	ck_assert_int_eq(fs_fsync(fs, f, true), 0);
	/* an overwrite in the middle: no size change at all */
	ck_assert_int_eq(fs_write(fs, f, 100, b + 5000, 200, false), 200);
	memcpy(want + 100, b + 5000, 200);
	ck_assert_int_eq(fs_fsync(fs, f, true), 0);
	/* fsync (not datasync) of another file: its times are durable */
	ck_assert_int_eq(fs_write(fs, g, 0, b, 10, false), 10);
	memset(&at, 0, sizeof(at));
	at.st_mtim = ts;
	ck_assert_int_eq(fs_setattr(fs, g, &at, FS_SET_MTIME, &st), 0);
	ck_assert_int_eq(fs_fsync(fs, g, false), 0);
	crash_and_remount();
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, 30050);
	ck_assert_int_eq(fs_read(fs, f, 0, n, r), 30050);
	ck_assert_int_eq(memcmp(r, want, 30050), 0);
	ck_assert_int_eq(fs_getattr(fs, g, &st), 0);
	ck_assert_int_eq(st.st_mtim.tv_sec, ts.tv_sec);
	free(b);
	free(r);
	free(want);
}
END_TEST

/* A chunk keeps its pages in slots in arrival order: pages written in a
 * scrambled order, some punched and written again (the chunk is full of
 * slots then and compacts), read back through the buffer, written out
 * (from slots out of file order: gathered) and read back after a crash. */
START_TEST(chunk_slots_out_of_order)
{
	const uint32_t bs = 4096, ppc = UNIT / bs;	/* 16 pages a chunk */
	uint64_t f = mkfile("s");
	uint8_t *want = calloc(1, 2 * UNIT), *r = malloc(2 * UNIT), *pg = malloc(bs);
	uint32_t order[16] = { 9, 3, 14, 0, 7, 12, 1, 10, 5, 15, 2, 8, 11, 4, 6, 13 };

	ck_assert_uint_eq(ppc, 16);
	/* 15 of the 16 pages of chunk 0 (never complete: no write-out yet),
	 * and one page of chunk 1 */
	for (uint32_t k = 0; k < 15; k++) {
		uint64_t off = (uint64_t)order[k] * bs;
		fill(pg, off, bs, 1);
		ck_assert_int_eq(fs_write(fs, f, off, pg, bs, false), (ssize_t)bs);
		memcpy(want + off, pg, bs);
	}
	fill(pg, UNIT + 3 * bs, bs, 1);
	ck_assert_int_eq(fs_write(fs, f, UNIT + 3 * bs, pg, bs, false), (ssize_t)bs);
	memcpy(want + UNIT + 3 * bs, pg, bs);
	/* punch 4 pages, then write them again, version 2 */
	for (uint32_t k = 0; k < 4; k++) {
		uint64_t off = (uint64_t)order[2 * k] * bs;
		ck_assert_int_eq(fs_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					      off, bs), 0);
		memset(want + off, 0, bs);
	}
	ck_assert_int_eq(fs_read(fs, f, 0, 2 * UNIT, r), (ssize_t)(UNIT + 4 * bs));
	ck_assert_int_eq(memcmp(r, want, UNIT + 4 * bs), 0);
	for (uint32_t k = 0; k < 4; k++) {
		uint64_t off = (uint64_t)order[2 * k] * bs;
		fill(pg, off, bs, 2);
		ck_assert_int_eq(fs_write(fs, f, off, pg, bs, false), (ssize_t)bs);
		memcpy(want + off, pg, bs);
	}
	/* a partial overwrite inside a page already in a slot */
	fill(pg, 7 * bs + 100, 300, 3);
	ck_assert_int_eq(fs_write(fs, f, 7 * bs + 100, pg, 300, false), 300);
	memcpy(want + 7 * bs + 100, pg, 300);
	ck_assert_int_eq(fs_read(fs, f, 0, 2 * UNIT, r), (ssize_t)(UNIT + 4 * bs));
	ck_assert_int_eq(memcmp(r, want, UNIT + 4 * bs), 0);
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	crash_and_remount();
	ck_assert_int_eq(fs_read(fs, f, 0, 2 * UNIT, r), (ssize_t)(UNIT + 4 * bs));
	ck_assert_int_eq(memcmp(r, want, UNIT + 4 * bs), 0);
	free(want);
	free(r);
	free(pg);
}
END_TEST

/* A write that adds pages to a chunk makes room for all of them at once
 * (the buffer no longer doubles page by page, copying what it holds):
 * 5 pages written at once take 5 pages of buffer; one more page doubles. */
START_TEST(chunk_grows_to_the_write)
{
	const uint32_t bs = 4096;
	uint64_t f = mkfile("grow");
	uint8_t *b = malloc(6 * bs), *r = malloc(6 * bs);
	fill(b, 0, 6 * bs, 1);
	struct fs_stats st;
	ck_assert_int_eq(fs_write(fs, f, 0, b, 5 * bs, false), (ssize_t)(5 * bs));
	fs_get_stats(fs, &st);
	ck_assert_uint_eq(st.buffer_bytes, 5 * bs);
	ck_assert_int_eq(fs_write(fs, f, 5 * bs, b + 5 * bs, bs, false), (ssize_t)bs);
	fs_get_stats(fs, &st);
	ck_assert_uint_eq(st.buffer_bytes, 10 * bs);
	ck_assert_int_eq(fs_read(fs, f, 0, 6 * bs, r), (ssize_t)(6 * bs));
	ck_assert_int_eq(memcmp(r, b, 6 * bs), 0);
	free(b);
	free(r);
}
END_TEST

/* ---- the blocking notice (zf_common.h) ---- */

static int notices;
static void count_notice(void *arg)
{
	(void)arg;
	notices++;
}

/* A write that only fills the buffer does not give the calling thread's
 * blocking notice (the FUSE loop keeps reading on that thread); a write
 * that writes a stripe out, a release that writes the file out and an
 * fsync do, once each. */
START_TEST(notice_only_where_a_call_blocks)
{
	uint64_t f = mkfile("n");
	uint8_t *b = malloc(STRIPE);
	fill(b, 0, STRIPE, 1);

	notices = 0;
	zf_block_notice_set(count_notice, NULL);
	ck_assert_int_eq(fs_write(fs, f, 0, b, 100, false), 100);
	ck_assert_int_eq(fs_write(fs, f, 100, b + 100, UNIT, false), (ssize_t)UNIT);
	ck_assert_int_eq(notices, 0);
	/* the first stripe completes: fs_write writes it out */
	ck_assert_int_eq(fs_write(fs, f, 100 + UNIT, b + 100 + UNIT, STRIPE - 100 - UNIT, false),
			 (ssize_t)(STRIPE - 100 - UNIT));
	ck_assert_int_eq(notices, 1);
	zf_block_notice_set(count_notice, NULL);
	ck_assert_int_eq(fs_write(fs, f, STRIPE, b, 4096, false), 4096);
	ck_assert_int_eq(notices, 1);
	ck_assert_int_eq(fs_release(fs, f), 0);	/* no write-behind here: writes out */
	ck_assert_int_eq(notices, 2);
	zf_block_notice_set(count_notice, NULL);
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	ck_assert_int_eq(notices, 3);
	zf_block_notice_set(NULL, NULL);
	uint8_t *r = malloc(STRIPE);
	ck_assert_int_eq(fs_read(fs, f, 0, STRIPE, r), (ssize_t)STRIPE);
	ck_assert_int_eq(memcmp(r, b, STRIPE), 0);
	free(r);
	free(b);
}
END_TEST

/* fs_data_check on ino, holding its rw lock. */
static void chunks_ok(uint64_t ino)
{
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	pthread_mutex_unlock(&fs->lock);
	ck_assert_ptr_nonnull(in);
	pthread_rwlock_rdlock(&in->rw);
	int r = fs_data_check(fs, in);
	uint32_t n = in->nchunks;
	pthread_rwlock_unlock(&in->rw);
	ck_assert_msg(r == 0, "write buffer of %u chunks inconsistent", n);
}

/* Random page writes (single pages, runs, whole chunks) over a file of
 * 256 chunks, with truncates, fsyncs and reads between: the chunk index
 * (sorted array, complete-chunk count, bytes) stays consistent and every
 * read returns the newest bytes. */
START_TEST(random_pages_keep_the_chunk_index)
{
	enum { SPAN = 256 * UNIT };
	static uint8_t model[SPAN];
	static uint8_t buf[2 * UNIT], got[2 * UNIT];
	uint64_t ino = mkfile("r"), size = 0, whole = 0;
	uint32_t most = 0;

	memset(model, 0, sizeof(model));
	/* a complete chunk held back (a gap before it), then cut in two */
	fill(buf, 5 * UNIT, UNIT, 1);
	ck_assert_int_eq(fs_write(fs, ino, 5 * UNIT, buf, UNIT, false), (ssize_t)UNIT);
	chunks_ok(ino);
	ck_assert_int_eq(fs_setattr(fs, ino, &(struct stat){ .st_size = 5 * UNIT + UNIT / 2 },
				    FS_SET_SIZE, NULL), 0);
	chunks_ok(ino);
	memcpy(model + 5 * UNIT, buf, UNIT / 2);
	size = 5 * UNIT + UNIT / 2;
	srand(17);
	for (uint32_t step = 2; step <= 3000; step++) {
		int op = rand() % 100;
		if (op < 80) {
			uint64_t off, len;
			if (op < 10) {	/* whole chunks: complete at once */
				off = (uint64_t)(rand() % 255) * UNIT;
				len = UNIT * (1 + (uint64_t)(rand() % 2));
				whole = off;
			} else {
				off = (uint64_t)(rand() % (SPAN / 4096)) * 4096 + (uint64_t)(rand() % 3) * 100;
				len = 1 + (uint64_t)(rand() % (3 * 4096));
				if (off + len > SPAN)
					len = SPAN - off;
			}
			fill(buf, off, len, step);
			ck_assert_int_eq(fs_write(fs, ino, off, buf, len, false), (ssize_t)len);
			memcpy(model + off, buf, len);
			size = ZF_MAX(size, off + len);
		} else if (op < 85) {
			/* half of them into the chunk last written whole */
			uint64_t to = rand() % 2 ? (uint64_t)rand() % SPAN : whole + UNIT / 2;
			ck_assert_int_eq(fs_setattr(fs, ino, &(struct stat){ .st_size = (off_t)to },
						    FS_SET_SIZE, NULL), 0);
			if (to < size)
				memset(model + to, 0, size - to);
			size = to;
		} else if (op < 88) {
			ck_assert_int_eq(fs_fsync(fs, ino, rand() % 2), 0);
		} else {
			uint64_t off = (uint64_t)rand() % SPAN, len = 1 + (uint64_t)(rand() % (2 * UNIT));
			if (off + len > SPAN)
				len = SPAN - off;
			ssize_t want = off >= size ? 0 : (ssize_t)ZF_MIN(len, size - off);
			ck_assert_int_eq(fs_read(fs, ino, off, len, got), want);
			ck_assert_msg(memcmp(got, model + off, (size_t)want) == 0,
				      "step %u: read [%llu, +%llu) differs", step,
				      (unsigned long long)off, (unsigned long long)len);
		}
		chunks_ok(ino);
		pthread_mutex_lock(&fs->lock);
		most = ZF_MAX(most, fs_inode_get(fs, ino)->nchunks);
		pthread_mutex_unlock(&fs->lock);
	}
	ck_assert_uint_gt(most, 30);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	chunks_ok(ino);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("writeout");
	TCase *tc = tcase_create("inflight");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, concurrent_writers_crash, 0, 3);
	tcase_add_test(tc, truncate_punch_during_writeout);
	tcase_add_test(tc, writeout_error_reaches_fsync);
	tcase_add_test(tc, fdatasync_keeps_size_and_data);
	tcase_add_test(tc, chunk_slots_out_of_order);
	tcase_add_test(tc, chunk_grows_to_the_write);
	tcase_add_test(tc, notice_only_where_a_call_blocks);
	tcase_add_test(tc, random_pages_keep_the_chunk_index);
	suite_add_tcase(s, tc);

	return tl_run(s);
}
