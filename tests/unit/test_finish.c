/* test_finish — every lifetime class open at once on a device with few
 * active zones, filled until ENOSPC, through the fs API on the emulator.
 *
 * An unprivileged user can give each of five files another class
 * (user.zonefuse.lifetime), so that a writer stream and a collector stream
 * per class want more zones than the device may keep active; the allocator
 * then finishes zones to open others (a finished zone's unwritten tail is
 * lost until the zone is collected and reset), or, FREE zones short, lets
 * a stream share another class's open zone.  What must still hold:
 *   (a) no write or write-out fails with anything but ENOSPC (never an
 *       open/active-limit error, no error logged);
 *   (b) the first ENOSPC comes only once the bytes in use (statfs: valid
 *       data and buffers) are within one zone of the capacity statfs shows;
 *   (c) after deleting files, writes succeed again, and after deleting
 *       everything the free space is what the empty file system had
 *       (within one zone): no space stays locked away;
 *   (d) every byte accepted reads back after a power loss and a remount;
 *   (e) writes keep completing: a writer waiting for a collector that
 *       moves data forever without freeing any (each victim it empties
 *       paid for by a finish) fails the test after STALL_S seconds.
 * Each run prints the zone finishes and the capacity they skipped;
 * ZF_TEST_VERBOSE=1 prints the figures every 5 s while the device fills.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "gc/gc.h"
#include "zonealloc/zalloc.h"
#include "testlib.h"

#define NF 5			/* one file per lifetime class */
#define MAXCH 2048		/* chunks per file at most */
#define STALL_S 60		/* seconds without a write completed: stuck */
#define BUF_BYTES (8ull << 20)	/* the fs's write buffers */

static const char *const cls_name[NF] = { "none", "short", "medium", "long", "extreme" };

static uint32_t CH;		/* bytes per write: a sixteenth of a zone */
static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

/* The model: each file is whole chunks; chunk c of file f holds
 * pattern(f, c, ver[f][c]). */
static struct model {
	uint64_t ino[NF];
	char name[NF][16];
	bool gone[NF];
	uint32_t nch[NF];
	uint32_t ver[NF][MAXCH];
	uint64_t rng;
} m;

static uint32_t rnd(void)
{
	m.rng ^= m.rng << 13;
	m.rng ^= m.rng >> 7;
	m.rng ^= m.rng << 17;
	return (uint32_t)(m.rng >> 32);
}

static void pattern(uint8_t *b, int f, uint32_t c, uint32_t ver)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ ((uint64_t)f << 56) ^ ((uint64_t)c << 24) ^ ver;

	for (size_t i = 0; i < CH; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(b + i, &x, 8);
	}
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

static void start_collector(void)
{
	ck_assert_int_eq(gc_attach(fs), 0);	/* the collector, as the daemon */
	ck_assert_int_eq(fs_start(fs), 0);	/* as the daemon: GC, committer */
}

static void make(uint32_t zones, uint64_t zone_size, uint32_t max_active)
{
	memset(&m, 0, sizeof(m));
	m.rng = 0x2545f4914f6cdd1dull;
	CH = (uint32_t)(zone_size / 16);
	tl_dev_make(&td, "finish", zones, zone_size, max_active);
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(tl_mount(dev, BUF_BYTES, false, &fs), 0);
	start_collector();
}

static uint64_t statfs_bytes(uint64_t *used)
{
	struct statvfs sv;

	ck_assert_int_eq(fs_statfs(fs, &sv), 0);
	*used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	return (uint64_t)sv.f_blocks * sv.f_frsize;
}

/* Write chunk c of file f as its next version (not yet in the model). */
static ssize_t write_chunk(uint8_t *buf, int f, uint32_t c)
{
	pattern(buf, f, c, m.ver[f][c] + 1);
	ssize_t r = fs_write(fs, m.ino[f], (uint64_t)c * CH, buf, CH, 0);
	ck_assert_msg(r == (ssize_t)CH || r == -ENOSPC,
		      "write of %s chunk %u: %zd (%s)", m.name[f], c, r,
		      r < 0 ? strerror((int)-r) : "short");
	if (r == (ssize_t)CH) {
		m.ver[f][c]++;
		if (c == m.nch[f])
			m.nch[f]++;
	}
	return r;
}

static int flush(int f)
{
	int e = fs_flush(fs, m.ino[f]);

	ck_assert_msg(e == 0 || e == -ENOSPC, "write-out of %s: %d (%s)", m.name[f], e,
		      strerror(-e));
	return e;
}

/* Every file reads back as the model says. */
static void verify(const char *when)
{
	uint8_t *want = malloc(CH), *got = malloc(CH);
	struct stat st;

	for (int f = 0; f < NF; f++) {
		if (m.gone[f])
			continue;
		ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, m.name[f], &st), 0);
		fs_forget(fs, st.st_ino, 1);
		ck_assert_uint_eq(st.st_ino, m.ino[f]);
		ck_assert_uint_eq((uint64_t)st.st_size, (uint64_t)m.nch[f] * CH);
		for (uint32_t c = 0; c < m.nch[f]; c++) {
			pattern(want, f, c, m.ver[f][c]);
			ck_assert_int_eq(fs_read(fs, m.ino[f], (uint64_t)c * CH, CH, got),
					 (ssize_t)CH);
			ck_assert_msg(memcmp(want, got, CH) == 0, "%s: %s chunk %u differs",
				      when, m.name[f], c);
		}
	}
	free(want);
	free(got);
}

static void progress(uint64_t writes)
{
	struct zalloc_stats zs;
	uint64_t used, cap = statfs_bytes(&used);

	zalloc_get_stats(fs->za, &zs);
	fprintf(stderr, "%llu writes: used %llu of %llu KiB, %u free zones, %llu finishes "
		"(%llu KiB skipped now), %llu collector runs, %llu KiB moved, %llu resets, "
		"collector could reclaim %llu KiB\n",
		(unsigned long long)writes, (unsigned long long)(used >> 10),
		(unsigned long long)(cap >> 10), zs.free_zones,
		(unsigned long long)zs.zone_finishes,
		(unsigned long long)(zs.finished_tail_bytes >> 10),
		(unsigned long long)zs.gc_runs, (unsigned long long)(zs.gc_bytes_written >> 10),
		(unsigned long long)zs.zone_resets,
		(unsigned long long)(zs.gc_reclaimable_bytes >> 10));
}

/* While the device fills: the figures every 5 s (ZF_TEST_VERBOSE), and a
 * failure once no write completed for STALL_S seconds. */
static _Atomic bool fill_done;
static _Atomic uint64_t fill_writes;
static _Atomic uint64_t peak_tails;	/* most bytes in finished tails seen */

static void *watch_main(void *arg)
{
	bool verbose = arg != NULL;
	uint64_t seen = 0;
	int still = 0;

	for (int t = 1; !fill_done; t++) {
		struct zalloc_stats zs;

		usleep(100000);
		zalloc_get_stats(fs->za, &zs);
		if (zs.finished_tail_bytes > peak_tails)
			peak_tails = zs.finished_tail_bytes;
		if (verbose && t % 50 == 0)
			progress(fill_writes);
		still = fill_writes == seen ? still + 1 : 0;
		seen = fill_writes;
		if (still == STALL_S * 10) {
			progress(seen);
			ck_abort_msg("no write completed for %d s after %llu writes", STALL_S,
				     (unsigned long long)seen);
		}
	}
	return NULL;
}

/* What a fill measured at its first ENOSPC. */
struct fill_result {
	uint64_t cap, used, live, zone_cap;
	uint64_t writes, enospc_write, enospc_flush;
	struct zalloc_stats zs;
};

/* Five files, one per class, written in turns: half of the writes append
 * a chunk, half overwrite a chunk at random (garbage in every class, so the
 * collector runs for every class), each written out at once, until the
 * first ENOSPC. */
static void fill(struct fill_result *r)
{
	uint8_t *buf = malloc(CH);
	struct stat st;

	memset(r, 0, sizeof(*r));
	for (int f = 0; f < NF; f++) {
		snprintf(m.name[f], sizeof(m.name[f]), "f-%s", cls_name[f]);
		ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, m.name[f], S_IFREG | 0644, 0, NULL,
					  &st), 0);
		fs_forget(fs, st.st_ino, 1);
		m.ino[f] = st.st_ino;
		ck_assert_int_eq(fs_setxattr(fs, m.ino[f], "user.zonefuse.lifetime",
					     cls_name[f], strlen(cls_name[f]), 0), 0);
	}
	pthread_t watch;

	fill_done = false;
	fill_writes = 0;
	peak_tails = 0;
	ck_assert_int_eq(pthread_create(&watch, NULL, watch_main,
					getenv("ZF_TEST_VERBOSE") ? &watch : NULL), 0);
	for (uint64_t op = 0;; op++) {
		int f = (int)(op % NF);
		bool append = m.nch[f] == 0 || rnd() % 2;
		uint32_t c = append ? m.nch[f] : rnd() % m.nch[f];

		ck_assert_uint_lt(c, MAXCH);
		ssize_t w = write_chunk(buf, f, c);
		int e = w < 0 ? 0 : flush(f);

		if (w >= 0 && !e) {
			fill_writes = ++r->writes;
			continue;
		}
		r->enospc_write += w < 0;
		r->enospc_flush += e < 0;
		break;
	}
	fill_done = true;
	pthread_join(watch, NULL);
	r->cap = statfs_bytes(&r->used);
	for (int f = 0; f < NF; f++)
		r->live += (uint64_t)m.nch[f] * CH;
	zalloc_get_stats(fs->za, &r->zs);
	r->zone_cap = r->zs.capacity_bytes / r->zs.nr_zones;
	fprintf(stderr, "ENOSPC (%s) after %llu writes: used %llu of %llu KiB (live %llu KiB, "
		"valid %llu KiB), free %llu KiB, reclaimable %llu KiB (collector %llu KiB); "
		"%llu zone finishes, %llu KiB skipped by finishes now (at most %llu KiB), "
		"%llu leases in another class's zone, %llu collector runs, %llu KiB moved, %llu resets\n",
		r->enospc_write ? "write" : "write-out", (unsigned long long)r->writes,
		(unsigned long long)(r->used >> 10), (unsigned long long)(r->cap >> 10),
		(unsigned long long)(r->live >> 10),
		(unsigned long long)(r->zs.valid_bytes >> 10),
		(unsigned long long)(r->zs.free_bytes >> 10),
		(unsigned long long)(r->zs.reclaimable_bytes >> 10),
		(unsigned long long)(r->zs.gc_reclaimable_bytes >> 10),
		(unsigned long long)r->zs.zone_finishes,
		(unsigned long long)(r->zs.finished_tail_bytes >> 10),
		(unsigned long long)(peak_tails >> 10),
		(unsigned long long)r->zs.class_fallbacks,
		(unsigned long long)r->zs.gc_runs,
		(unsigned long long)(r->zs.gc_bytes_written >> 10),
		(unsigned long long)r->zs.zone_resets);
	free(buf);
}

/* The whole story on one geometry. */
static void every_class_to_full(uint32_t zones, uint64_t zone_size, uint32_t max_active)
{
	struct fill_result r;
	uint64_t errors0 = zf_log_error_count(), empty_used;
	uint64_t empty_cap;

	make(zones, zone_size, max_active);
	empty_cap = statfs_bytes(&empty_used);
	fill(&r);
	/* (a) only ENOSPC, and nothing logged as an error */
	ck_assert_uint_eq(zf_log_error_count() - errors0, 0);
	/* the shape this test is for: the active limit binds, and a stream
	 * either finished a zone or shared another class's (FREE zones short) */
	ck_assert_uint_gt(r.zs.zone_finishes + r.zs.class_fallbacks, 0);
	ck_assert_uint_gt(r.zs.gc_runs, 0);
	/* (b) ENOSPC only within one zone of full */
	ck_assert_msg(r.used + r.zone_cap >= r.cap,
		      "ENOSPC with %llu of %llu bytes in use (%llu KiB short of the last "
		      "zone); %llu KiB skipped by %llu finishes",
		      (unsigned long long)r.used, (unsigned long long)r.cap,
		      (unsigned long long)((r.cap - r.zone_cap - r.used) >> 10),
		      (unsigned long long)(r.zs.finished_tail_bytes >> 10),
		      (unsigned long long)r.zs.zone_finishes);
	/* (d) every accepted byte is durable, through a power loss */
	ck_assert_int_eq(fs_sync(fs), 0);
	tl_power_cycle(&td, &dev, &fs, BUF_BYTES);	/* logs the dead device's errors */
	errors0 = zf_log_error_count();
	verify("after a power loss on the full device");
	start_collector();

	/* (c) deleting two of the five files makes room at once */
	uint8_t *buf = malloc(CH);
	uint64_t freed = 0, again = 0;
	for (int f = 1; f < NF; f += 2) {
		freed += (uint64_t)m.nch[f] * CH;
		ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, m.name[f]), 0);
		m.gone[f] = true;
	}
	ck_assert_int_eq(fs_sync(fs), 0);
	for (uint64_t op = 0; again + 2 * CH <= freed / 2; op++) {
		int f = (int)(op % NF);

		if (m.gone[f])
			continue;
		ck_assert_int_eq(write_chunk(buf, f, m.nch[f]), (ssize_t)CH);
		ck_assert_int_eq(flush(f), 0);
		again += CH;
	}
	ck_assert_int_eq(fs_sync(fs), 0);
	ck_assert_uint_eq(zf_log_error_count() - errors0, 0);
	fprintf(stderr, "after deleting %llu KiB: wrote %llu KiB again\n",
		(unsigned long long)(freed >> 10), (unsigned long long)(again >> 10));
	free(buf);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	tl_fsck_clean(dev);
	ck_assert_int_eq(tl_mount(dev, BUF_BYTES, false, &fs), 0);
	verify("after a remount");
	start_collector();

	/* ... and deleting everything gives back what the empty fs had */
	for (int f = 0; f < NF; f++)
		if (!m.gone[f])
			ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, m.name[f]), 0);
	ck_assert_int_eq(fs_sync(fs), 0);
	ck_assert_int_eq(fs_commit(fs), 0);
	uint64_t used, cap = statfs_bytes(&used);
	fprintf(stderr, "after deleting everything: free %llu KiB, empty %llu KiB\n",
		(unsigned long long)((cap - used) >> 10),
		(unsigned long long)((empty_cap - empty_used) >> 10));
	ck_assert_uint_ge(cap - used + r.zone_cap, empty_cap - empty_used);
	ck_assert_uint_eq(zf_log_error_count() - errors0, 0);
}

/* 28 data zones of 2 MiB, 8 active (6 for data): ten streams, six slots. */
START_TEST(every_class_8_active)
{
	every_class_to_full(32, 2u << 20, 8);
}
END_TEST

/* The fewest active zones a mount accepts: 4 (2 for data). */
START_TEST(every_class_4_active)
{
	every_class_to_full(32, 2u << 20, 4);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("finish");
	TCase *tc = tcase_create("active8");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, every_class_8_active);
	suite_add_tcase(s, tc);
	tc = tcase_create("active4");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, every_class_4_active);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
