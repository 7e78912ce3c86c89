/* test_zdev — Check unit tests of the zoned device layer (zoned/zdev.h).
 *
 * Every zone rule has a test that fails if the rule is broken.  By default
 * the tests run against a fresh emulated device per test (files under a
 * mkdtemp directory, removed at the end).  With ZDEV_TEST_DEVICE=/dev/xxx
 * the device tests run against that zoned block device instead (it is
 * reset_all'ed first: ALL DATA ON IT IS LOST) and the emulator-only tests
 * (power loss, fault injection, performance model, file format) are skipped.
 * Tests address sequential zones as seqz(k) and take sizes from the
 * geometry, so the same test checks both backends.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "zoned/zdev.h"

static char tmpdir[PATH_MAX / 2];
static char devpath[PATH_MAX];
static const char *test_device;		/* ZDEV_TEST_DEVICE or NULL */
static struct zdev *dev;
static const struct zdev_geometry *g;

/* Emulated device used by the fixture: 2 conventional + 14 sequential
 * zones of 1 MiB with 768 KiB capacity, max_open 4, max_active 6. */
static const struct zdev_emu_params fixture_params = {
	.zone_size = 1 << 20,
	.zone_capacity = 768 << 10,
	.nr_zones = 16,
	.nr_conv_zones = 2,
	.block_size = 4096,
	.max_open = 4,
	.max_active = 6,
};

#define EMU_ONLY()                                                        \
	do {                                                              \
		if (test_device) {                                        \
			fprintf(stderr, "%s: skipped on a real device\n", \
				__func__);                                \
			return;                                           \
		}                                                         \
	} while (0)

/* ---- helpers ----------------------------------------------------------- */

static void path_in_tmp(char *out, const char *name)
{
	if (snprintf(out, PATH_MAX, "%s/%s", tmpdir, name) >= PATH_MAX)
		ck_abort_msg("path too long");
}

static uint32_t seqz(uint32_t k)
{
	ck_assert_uint_lt(g->nr_conv_zones + k, g->nr_zones);
	return g->nr_conv_zones + k;
}

static uint64_t zstart(uint32_t z)
{
	return (uint64_t)z * g->zone_size;
}

static struct zdev_zone zrep(uint32_t z)
{
	struct zdev_zone zn;

	ck_assert_int_eq(zdev_report_zones(dev, z, 1, &zn), 1);
	return zn;
}

static void pattern(void *buf, size_t len, uint64_t seed)
{
	uint64_t *p = buf;

	for (size_t i = 0; i < len / 8; i++)
		p[i] = (seed + i) * 0x9E3779B97F4A7C15ull + 1;
}

static bool pattern_ok(const void *buf, size_t len, uint64_t seed)
{
	const uint64_t *p = buf;

	for (size_t i = 0; i < len / 8; i++)
		if (p[i] != (seed + i) * 0x9E3779B97F4A7C15ull + 1)
			return false;
	return true;
}

static bool all_zero(const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/* Write len bytes of pattern(seed) at off; returns zdev_write's result. */
static ssize_t wr(struct zdev *d, uint64_t off, size_t len, uint64_t seed)
{
	void *buf = zdev_buf_alloc(len);
	ssize_t ret;

	ck_assert_ptr_nonnull(buf);
	pattern(buf, len, seed);
	ret = zdev_write(d, off, buf, len);
	zdev_buf_free(buf);
	return ret;
}

/* Read len bytes at off and check they are pattern(seed). */
static void check_data(struct zdev *d, uint64_t off, size_t len, uint64_t seed)
{
	void *buf = zdev_buf_alloc(len);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(zdev_read(d, off, buf, len), (ssize_t)len);
	ck_assert_msg(pattern_ok(buf, len, seed), "data mismatch at %llu+%zu",
		      (unsigned long long)off, len);
	zdev_buf_free(buf);
}

static void check_zeros(struct zdev *d, uint64_t off, size_t len)
{
	void *buf = zdev_buf_alloc(len);

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0xAA, len);
	ck_assert_int_eq(zdev_read(d, off, buf, len), (ssize_t)len);
	ck_assert_msg(all_zero(buf, len), "expected zeros at %llu+%zu",
		      (unsigned long long)off, len);
	zdev_buf_free(buf);
}

/* Write zone z from its wp up to capacity in chunks. */
static void fill_zone(uint32_t z)
{
	struct zdev_zone zn = zrep(z);
	size_t chunk = 1 << 20;
	void *buf = zdev_buf_alloc(chunk);

	ck_assert_ptr_nonnull(buf);
	pattern(buf, chunk, z);
	while (zn.wp < zn.start + zn.capacity) {
		size_t n = (size_t)ZF_MIN((uint64_t)chunk, zn.start + zn.capacity - zn.wp);

		ck_assert_int_eq(zdev_write(dev, zn.wp, buf, n), (ssize_t)n);
		zn.wp += n;
	}
	zdev_buf_free(buf);
}

static void count_conds(uint32_t *open, uint32_t *closed)
{
	uint32_t n = g->nr_zones;
	struct zdev_zone *zs = calloc(n, sizeof(*zs));

	ck_assert_ptr_nonnull(zs);
	ck_assert_int_eq(zdev_report_zones(dev, 0, n, zs), (int)n);
	*open = *closed = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (zdev_zone_open_cond(&zs[i]))
			(*open)++;
		else if (zs[i].cond == ZDEV_COND_CLOSED)
			(*closed)++;
	}
	free(zs);
}

static int open_dev(struct zdev **out)
{
	return zdev_open(devpath, NULL, out);
}

static void create_emu(const char *path, const struct zdev_emu_params *p)
{
	ck_assert_int_eq(zdev_emu_create(path, p, true), 0);
}

/* ---- fixtures ------------------------------------------------------------ */

static void setup(void)
{
	if (test_device) {
		snprintf(devpath, sizeof(devpath), "%s", test_device);
	} else {
		path_in_tmp(devpath, "dev.emu");
		create_emu(devpath, &fixture_params);
	}
	ck_assert_int_eq(open_dev(&dev), 0);
	g = zdev_geometry(dev);
	ck_assert_int_eq(zdev_reset_all(dev), 0);
}

static void teardown(void)
{
	if (dev)
		zdev_close(dev);
	dev = NULL;
}

/* ---- geometry ------------------------------------------------------------ */

START_TEST(test_geometry)
{
	struct zdev_zone *zs;
	uint32_t n = g->nr_zones;

	ck_assert_uint_gt(n, 0);
	ck_assert_uint_eq(g->size, (uint64_t)n * g->zone_size);
	ck_assert_uint_le(g->zone_capacity, g->zone_size);
	ck_assert_uint_eq(g->zone_capacity % g->block_size, 0);
	ck_assert_uint_ge(g->block_size, 512);
	ck_assert_uint_le(g->mem_align, 4096);
	ck_assert_str_eq(zdev_path(dev), devpath);
	if (test_device) {
		ck_assert_int_eq(zdev_backend(dev), ZDEV_BACKEND_ZBD);
		ck_assert_str_eq(zdev_backend_name(dev), "zbd");
	} else {
		ck_assert_int_eq(zdev_backend(dev), ZDEV_BACKEND_EMU);
		ck_assert_str_eq(zdev_backend_name(dev), "emulated");
		ck_assert_uint_eq(g->zone_size, fixture_params.zone_size);
		ck_assert_uint_eq(g->zone_capacity, fixture_params.zone_capacity);
		ck_assert_uint_eq(n, fixture_params.nr_zones);
		ck_assert_uint_eq(g->nr_conv_zones, fixture_params.nr_conv_zones);
		ck_assert_uint_eq(g->max_open, 4);
		ck_assert_uint_eq(g->max_active, 6);
	}
	zs = calloc(n + 1, sizeof(*zs));
	ck_assert_ptr_nonnull(zs);
	ck_assert_int_eq(zdev_report_zones(dev, 0, n + 5, zs), (int)n);
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_uint_eq(zs[i].start, zstart(i));
		ck_assert_uint_eq(zs[i].len, g->zone_size);
		if (i < g->nr_conv_zones) {
			ck_assert(zdev_zone_conv(&zs[i]));
			ck_assert_int_eq(zs[i].cond, ZDEV_COND_NOT_WP);
		} else {
			ck_assert(zdev_zone_seq(&zs[i]));
			ck_assert_uint_eq(zs[i].capacity, g->zone_capacity);
			ck_assert(zdev_zone_empty(&zs[i]));
			ck_assert_uint_eq(zs[i].wp, zs[i].start);
			ck_assert_uint_eq(zdev_zone_remaining(&zs[i]), g->zone_capacity);
		}
	}
	/* partial report from the middle; out-of-range first zone */
	ck_assert_int_eq(zdev_report_zones(dev, n - 1, 10, zs), 1);
	ck_assert_uint_eq(zs[0].start, zstart(n - 1));
	ck_assert_int_eq(zdev_report_zones(dev, n, 1, zs), -EINVAL);
	ck_assert_int_eq(zdev_report_zones(dev, 0, 0, zs), 0);
	ck_assert_str_eq(zdev_cond_name(ZDEV_COND_IMP_OPEN), "imp_open");
	ck_assert_str_eq(zdev_cond_name(ZDEV_COND_FULL), "full");
	free(zs);
}
END_TEST

/* ---- write rules --------------------------------------------------------- */

/* The recording (zdev_record_start): writes with their bytes, a batch's
 * writes, flushes, resets and finishes in order (not reads, opens,
 * closes); past max_bytes it stops and says so; stop frees it. */
START_TEST(test_record)
{
	uint32_t z = seqz(0), z2 = seqz(1);
	uint32_t bs = g->block_size;
	const struct zdev_rec_op *ops;
	uint8_t *buf = zdev_buf_alloc(bs);

	ck_assert_int_eq(zdev_record_get(dev, &ops), -ENOENT);
	ck_assert_int_eq(zdev_record_start(dev, 3 * (uint64_t)bs), 0);
	ck_assert_int_eq(wr(dev, zstart(z), bs, 7), bs);
	ck_assert_int_eq(zdev_read(dev, zstart(z), buf, bs), bs);
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(zdev_zone_open(dev, z2), 0);
	struct zdev_req rq = { .op = ZDEV_OP_WRITE, .offset = zstart(z2), .buf = buf, .len = bs };
	ck_assert_int_eq(zdev_io_batch(dev, &rq, 1), 1);
	ck_assert_int_eq(zdev_zone_finish(dev, z2), 0);
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);
	ck_assert_int_eq(zdev_record_get(dev, &ops), 5);
	ck_assert_int_eq(ops[0].kind, ZDEV_REC_WRITE);
	ck_assert_uint_eq(ops[0].off, zstart(z));
	ck_assert_uint_eq(ops[0].len, bs);
	ck_assert_int_eq(memcmp(ops[0].data, buf, bs), 0);	/* the bytes read back */
	ck_assert_int_eq(ops[1].kind, ZDEV_REC_FLUSH);
	ck_assert_int_eq(ops[2].kind, ZDEV_REC_WRITE);
	ck_assert_uint_eq(ops[2].zone, z2);
	ck_assert_int_eq(ops[3].kind, ZDEV_REC_FINISH);
	ck_assert_uint_eq(ops[3].zone, z2);
	ck_assert_int_eq(ops[4].kind, ZDEV_REC_RESET);
	ck_assert_uint_eq(ops[4].zone, z);
	/* a failed write is not recorded; past max_bytes: -E2BIG from then on */
	ck_assert_int_lt(wr(dev, zstart(z) + bs, bs, 1), 0);
	ck_assert_int_eq(zdev_record_get(dev, &ops), 5);
	ck_assert_int_eq(wr(dev, zstart(z), bs, 1), bs);
	ck_assert_int_eq(wr(dev, zstart(z) + bs, bs, 1), bs);	/* the fourth block */
	ck_assert_int_eq(zdev_record_get(dev, &ops), -E2BIG);
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(zdev_record_get(dev, &ops), -E2BIG);
	/* start again: empty */
	ck_assert_int_eq(zdev_record_start(dev, 1u << 20), 0);
	ck_assert_int_eq(zdev_record_get(dev, &ops), 0);
	zdev_record_stop(dev);
	ck_assert_int_eq(zdev_record_get(dev, &ops), -ENOENT);
	ck_assert_int_eq(zdev_record_start(dev, 1u << 20), 0);	/* freed by close */
	zdev_buf_free(buf);
}
END_TEST

START_TEST(test_write_at_wp)
{
	uint32_t z = seqz(0);
	uint32_t bs = g->block_size;
	struct zdev_zone zn;

	ck_assert_int_eq(wr(dev, zstart(z), 2 * bs, 1), 2 * bs);
	zn = zrep(z);
	ck_assert_uint_eq(zn.wp, zstart(z) + 2 * bs);
	ck_assert_int_eq(zn.cond, ZDEV_COND_IMP_OPEN);
	ck_assert_int_eq(wr(dev, zn.wp, bs, 2), bs);
	ck_assert_uint_eq(zrep(z).wp, zstart(z) + 3 * bs);
	check_data(dev, zstart(z), 2 * bs, 1);
	check_data(dev, zstart(z) + 2 * bs, bs, 2);
	/* zero-length I/O is a successful no-op */
	ck_assert_int_eq(wr(dev, zstart(z), 0, 0), 0);
	ck_assert_uint_eq(zrep(z).wp, zstart(z) + 3 * bs);
}
END_TEST

START_TEST(test_write_not_at_wp)
{
	uint32_t z = seqz(0);
	uint32_t bs = g->block_size;

	/* ahead of the wp of an empty zone */
	ck_assert_int_eq(wr(dev, zstart(z) + bs, bs, 1), -EIO);
	ck_assert(zdev_zone_empty(&(struct zdev_zone){ .cond = zrep(z).cond }));
	ck_assert_int_eq(wr(dev, zstart(z), bs, 1), bs);
	/* behind the wp (overwrite) and ahead of it */
	ck_assert_int_eq(wr(dev, zstart(z), bs, 1), -EIO);
	ck_assert_int_eq(wr(dev, zstart(z) + 2 * bs, bs, 1), -EIO);
	ck_assert_uint_eq(zrep(z).wp, zstart(z) + bs);
	check_data(dev, zstart(z), bs, 1);
}
END_TEST

START_TEST(test_write_unaligned)
{
	uint32_t z = seqz(0);
	uint32_t bs = g->block_size;
	char *buf = zdev_buf_alloc(4 * bs);

	ck_assert_ptr_nonnull(buf);
	memset(buf, 1, 4 * bs);
	if (bs > 512)
		ck_assert_int_eq(zdev_write(dev, zstart(z) + 512, buf, bs), -EINVAL);
	ck_assert_int_eq(zdev_write(dev, zstart(z), buf, bs + 1), -EINVAL);
	ck_assert_int_eq(zdev_write(dev, zstart(z), buf, bs / 2), -EINVAL);
	if (g->mem_align > 1)
		ck_assert_int_eq(zdev_write(dev, zstart(z), buf + 1, bs), -EINVAL);
	ck_assert_int_eq(zdev_write(dev, zstart(z), NULL, bs), -EINVAL);
	ck_assert_int_eq(zdev_read(dev, zstart(z) + 1, buf, bs), -EINVAL);
	/* beyond the device end */
	ck_assert_int_eq(zdev_write(dev, g->size, buf, bs), -EINVAL);
	ck_assert_int_eq(zdev_read(dev, g->size - bs, buf, 2 * bs), -EINVAL);
	ck_assert_int_eq(zdev_read(dev, UINT64_MAX - bs + 1, buf, bs), -EINVAL);
	ck_assert_int_eq(zdev_write(dev, zstart(z), buf, SIZE_MAX - bs + 1), -EINVAL);
	/* nothing moved */
	ck_assert_uint_eq(zrep(z).wp, zstart(z));
	ck_assert(zrep(z).cond == ZDEV_COND_EMPTY);
	zdev_buf_free(buf);
}
END_TEST

START_TEST(test_write_past_capacity)
{
	uint32_t z = seqz(0);
	uint32_t bs = g->block_size;
	uint64_t end = zstart(z) + g->zone_capacity;
	struct zdev_zone zn;

	/* one write larger than the capacity */
	if (g->zone_capacity + bs <= (64u << 20))
		ck_assert_int_eq(wr(dev, zstart(z), (size_t)g->zone_capacity + bs, 1), -EIO);
	ck_assert_uint_eq(zrep(z).wp, zstart(z));
	fill_zone(z);
	zn = zrep(z);
	/* cannot happen before the fill, so rewind the check: the last block */
	ck_assert_uint_eq(zn.wp, end);
	ck_assert_int_eq(zn.cond, ZDEV_COND_FULL);
	ck_assert_uint_eq(zdev_zone_remaining(&zn), 0);

	/* a write crossing the capacity of a partly written zone */
	z = seqz(1);
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);
	end = zstart(z) + g->zone_capacity;
	{
		/* bring wp to capacity - bs */
		size_t chunk = 1 << 20;
		void *buf = zdev_buf_alloc(chunk);
		uint64_t wp = zstart(z);

		memset(buf, 7, chunk);
		while (wp < end - bs) {
			size_t n = (size_t)ZF_MIN((uint64_t)chunk, end - bs - wp);
			ck_assert_int_eq(zdev_write(dev, wp, buf, n), (ssize_t)n);
			wp += n;
		}
		zdev_buf_free(buf);
	}
	ck_assert_int_eq(wr(dev, end - bs, 2 * bs, 3), -EIO);
	ck_assert_uint_eq(zrep(z).wp, end - bs);
	ck_assert_int_eq(wr(dev, end - bs, bs, 3), bs);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_FULL);
}
END_TEST

START_TEST(test_full_at_capacity)
{
	uint32_t z = seqz(0);
	uint32_t bs = g->block_size;
	struct zdev_zone zn;

	fill_zone(z);
	zn = zrep(z);
	ck_assert_int_eq(zn.cond, ZDEV_COND_FULL);
	ck_assert_uint_eq(zn.wp, zn.start + zn.capacity);
	/* any write to a full zone fails: at its wp (when the capacity is
	 * below the zone size; otherwise the wp is the next zone's start),
	 * at its last block, at its start */
	if (zn.capacity < zn.len)
		ck_assert_int_eq(wr(dev, zn.wp, bs, 1), -EIO);
	ck_assert_int_eq(wr(dev, zn.wp - bs, bs, 1), -EIO);
	ck_assert_int_eq(wr(dev, zn.start, bs, 1), -EIO);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_FULL);
	check_data(dev, zn.start, bs, z);
}
END_TEST

/* ---- zone management ------------------------------------------------------ */

START_TEST(test_zone_transitions)
{
	uint32_t z = seqz(0);
	uint32_t bs = g->block_size;
	struct zdev_stats st0, st1;
	struct zdev_zone zn;

	zdev_get_stats(dev, &st0);
	/* explicit open of an empty zone, close it again -> CLOSED with the
	 * wp at the zone start, as NVMe ZNS does (null_blk and ZBC: EMPTY);
	 * a reset makes it EMPTY */
	ck_assert_int_eq(zdev_zone_open(dev, z), 0);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_EXP_OPEN);
	ck_assert_int_eq(zdev_zone_open(dev, z), 0);	/* no-op */
	ck_assert_int_eq(zdev_zone_close(dev, z), 0);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_CLOSED);
	ck_assert_uint_eq(zrep(z).wp, zstart(z));
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_EMPTY);
	/* close of an empty zone is invalid */
	ck_assert_int_eq(zdev_zone_close(dev, z), -EIO);
	/* write -> IMP_OPEN; close -> CLOSED; close again is a no-op */
	ck_assert_int_eq(wr(dev, zstart(z), bs, 1), bs);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_IMP_OPEN);
	ck_assert_int_eq(zdev_zone_close(dev, z), 0);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_CLOSED);
	ck_assert_int_eq(zdev_zone_close(dev, z), 0);
	/* a write to a closed zone opens it implicitly again */
	ck_assert_int_eq(wr(dev, zstart(z) + bs, bs, 2), bs);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_IMP_OPEN);
	/* explicit open of an implicitly open zone */
	ck_assert_int_eq(zdev_zone_open(dev, z), 0);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_EXP_OPEN);
	ck_assert_int_eq(zdev_zone_close(dev, z), 0);
	ck_assert_int_eq(zrep(z).cond, ZDEV_COND_CLOSED);
	/* finish -> FULL with wp at capacity; finish again no-op; open fails */
	ck_assert_int_eq(zdev_zone_finish(dev, z), 0);
	zn = zrep(z);
	ck_assert_int_eq(zn.cond, ZDEV_COND_FULL);
	ck_assert_uint_eq(zn.wp, zn.start + zn.capacity);
	ck_assert_int_eq(zdev_zone_finish(dev, z), 0);
	ck_assert_int_eq(zdev_zone_open(dev, z), -EIO);
	ck_assert_int_eq(zdev_zone_close(dev, z), -EIO);
	check_data(dev, zstart(z), bs, 1);
	check_data(dev, zstart(z) + bs, bs, 2);
	check_zeros(dev, zstart(z) + 2 * bs, bs);
	/* reset -> EMPTY, data gone */
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);
	zn = zrep(z);
	ck_assert_int_eq(zn.cond, ZDEV_COND_EMPTY);
	ck_assert_uint_eq(zn.wp, zn.start);
	check_zeros(dev, zstart(z), 2 * bs);
	/* finish of an empty zone */
	ck_assert_int_eq(zdev_zone_finish(dev, seqz(1)), 0);
	ck_assert_int_eq(zrep(seqz(1)).cond, ZDEV_COND_FULL);
	/* reset of empty is fine; reset_all empties everything */
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);
	ck_assert_int_eq(wr(dev, zstart(seqz(2)), bs, 1), bs);
	ck_assert_int_eq(zdev_reset_all(dev), 0);
	ck_assert_int_eq(zrep(seqz(1)).cond, ZDEV_COND_EMPTY);
	ck_assert_int_eq(zrep(seqz(2)).cond, ZDEV_COND_EMPTY);
	/* bad zone index */
	ck_assert_int_eq(zdev_zone_reset(dev, g->nr_zones), -EINVAL);
	ck_assert_int_eq(zdev_zone_open(dev, g->nr_zones), -EINVAL);
	ck_assert_int_eq(zdev_zone_close(dev, UINT32_MAX), -EINVAL);
	ck_assert_int_eq(zdev_zone_finish(dev, g->nr_zones), -EINVAL);

	zdev_get_stats(dev, &st1);
	ck_assert_uint_eq(st1.opens - st0.opens, 3);
	ck_assert_uint_eq(st1.closes - st0.closes, 4);
	ck_assert_uint_eq(st1.finishes - st0.finishes, 3);
	ck_assert_uint_eq(st1.resets - st0.resets, 4);
	ck_assert_uint_eq(st1.writes - st0.writes, 3);
	ck_assert_uint_eq(st1.bytes_written - st0.bytes_written, 3 * bs);
}
END_TEST

START_TEST(test_max_open_implicit)
{
	uint32_t bs = g->block_size, mo = g->max_open, open, closed;

	if (!mo || (g->max_active && g->max_active <= mo)) {
		fprintf(stderr, "%s: skipped (max_open %u, max_active %u)\n",
			__func__, mo, g->max_active);
		return;
	}
	for (uint32_t k = 0; k < mo; k++)
		ck_assert_int_eq(wr(dev, zstart(seqz(k)), bs, k), bs);
	count_conds(&open, &closed);
	ck_assert_uint_eq(open, mo);
	ck_assert_uint_eq(closed, 0);
	/* one more implicit open: an implicitly open zone is closed for room */
	ck_assert_int_eq(wr(dev, zstart(seqz(mo)), bs, 99), bs);
	count_conds(&open, &closed);
	ck_assert_uint_eq(open, mo);
	ck_assert_uint_eq(closed, 1);
	ck_assert_int_eq(zrep(seqz(mo)).cond, ZDEV_COND_IMP_OPEN);
	/* the closed zone kept its data and takes writes again */
	for (uint32_t k = 0; k < mo; k++) {
		struct zdev_zone zn = zrep(seqz(k));

		check_data(dev, zn.start, bs, k);
		if (zn.cond == ZDEV_COND_CLOSED)
			ck_assert_int_eq(wr(dev, zn.wp, bs, 5), bs);
	}
	count_conds(&open, &closed);
	ck_assert_uint_le(open, mo);
}
END_TEST

START_TEST(test_max_open_explicit)
{
	uint32_t bs = g->block_size, mo = g->max_open, open, closed;

	if (!mo || (g->max_active && g->max_active <= mo)) {
		fprintf(stderr, "%s: skipped (max_open %u, max_active %u)\n",
			__func__, mo, g->max_active);
		return;
	}
	for (uint32_t k = 0; k < mo; k++)
		ck_assert_int_eq(zdev_zone_open(dev, seqz(k)), 0);
	ck_assert_int_eq(zdev_zone_open(dev, seqz(mo)), -ETOOMANYREFS);
	ck_assert_int_eq(wr(dev, zstart(seqz(mo)), bs, 1), -ETOOMANYREFS);
	ck_assert_int_eq(zrep(seqz(mo)).cond, ZDEV_COND_EMPTY);
	/* writes to the explicitly open zones are fine */
	ck_assert_int_eq(wr(dev, zstart(seqz(0)), bs, 1), bs);
	ck_assert_int_eq(zrep(seqz(0)).cond, ZDEV_COND_EXP_OPEN);
	/* closing one makes room */
	ck_assert_int_eq(zdev_zone_close(dev, seqz(0)), 0);
	ck_assert_int_eq(wr(dev, zstart(seqz(mo)), bs, 1), bs);
	count_conds(&open, &closed);
	ck_assert_uint_eq(open, mo);
	ck_assert_uint_eq(closed, 1);
	/* now every slot is taken by mo-1 explicit + 1 implicit: an explicit
	 * open of the closed zone closes the implicit one */
	ck_assert_int_eq(zdev_zone_open(dev, seqz(0)), 0);
	ck_assert_int_eq(zrep(seqz(mo)).cond, ZDEV_COND_CLOSED);
	ck_assert_int_eq(wr(dev, zstart(seqz(mo)) + bs, bs, 1), -ETOOMANYREFS);
}
END_TEST

START_TEST(test_max_active)
{
	uint32_t bs = g->block_size, ma = g->max_active;
	uint32_t next;

	if (!ma) {
		fprintf(stderr, "%s: skipped (no max_active)\n", __func__);
		return;
	}
	/* ma zones written then closed: all active, none open */
	for (uint32_t k = 0; k < ma; k++) {
		ck_assert_int_eq(wr(dev, zstart(seqz(k)), bs, k), bs);
		ck_assert_int_eq(zdev_zone_close(dev, seqz(k)), 0);
	}
	next = seqz(ma);
	ck_assert_int_eq(wr(dev, zstart(next), bs, 1), -EOVERFLOW);
	ck_assert_int_eq(zdev_zone_open(dev, next), -EOVERFLOW);
	ck_assert_int_eq(zrep(next).cond, ZDEV_COND_EMPTY);
	/* finishing an EMPTY zone needs no active slot (NVMe ZNS; null_blk
	 * refuses it with -EOVERFLOW) */
	ck_assert_int_eq(zdev_zone_finish(dev, seqz(ma + 2)), 0);
	ck_assert_int_eq(zrep(seqz(ma + 2)).cond, ZDEV_COND_FULL);
	/* an already active (closed) zone may still be written */
	ck_assert_int_eq(wr(dev, zstart(seqz(0)) + bs, bs, 1), bs);
	/* finishing one frees an active slot */
	ck_assert_int_eq(zdev_zone_finish(dev, seqz(1)), 0);
	ck_assert_int_eq(wr(dev, zstart(next), bs, 1), bs);
	ck_assert_int_eq(wr(dev, zstart(seqz(ma + 1)), bs, 1), -EOVERFLOW);
	/* resetting one too */
	ck_assert_int_eq(zdev_zone_reset(dev, seqz(2)), 0);
	ck_assert_int_eq(wr(dev, zstart(seqz(ma + 1)), bs, 1), bs);
}
END_TEST

/* ---- reads ------------------------------------------------------------- */

START_TEST(test_read_beyond_wp)
{
	uint32_t z = seqz(0), bs = g->block_size;

	check_zeros(dev, zstart(z), 4 * bs);
	ck_assert_int_eq(wr(dev, zstart(z), 2 * bs, 11), 2 * bs);
	{
		char *buf = zdev_buf_alloc(4 * bs);

		memset(buf, 0xAA, 4 * bs);
		ck_assert_int_eq(zdev_read(dev, zstart(z), buf, 4 * bs), 4 * bs);
		ck_assert(pattern_ok(buf, 2 * bs, 11));
		ck_assert(all_zero(buf + 2 * bs, 2 * bs));
		zdev_buf_free(buf);
	}
	/* between capacity and zone end, and after a reset */
	if (g->zone_capacity < g->zone_size)
		check_zeros(dev, zstart(z) + g->zone_capacity, bs);
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);
	check_zeros(dev, zstart(z), 2 * bs);
}
END_TEST

START_TEST(test_read_cross_zones)
{
	uint32_t a = seqz(0), b = seqz(1), bs = g->block_size;
	size_t len = 5 * bs;
	uint64_t off = zstart(b) - 2 * bs;
	char *buf = zdev_buf_alloc(len);

	/* a: 2 blocks at its start; b: 2 blocks.  Read the last 2 blocks of
	 * a's zone and the first 3 of b in one call. */
	ck_assert_int_eq(wr(dev, zstart(a), 2 * bs, 66), 2 * bs);
	ck_assert_int_eq(wr(dev, zstart(b), 2 * bs, 77), 2 * bs);
	memset(buf, 0xAA, len);
	ck_assert_int_eq(zdev_read(dev, off, buf, len), (ssize_t)len);
	ck_assert(all_zero(buf, 2 * bs));
	ck_assert(pattern_ok(buf + 2 * bs, 2 * bs, 77));
	ck_assert(all_zero(buf + 4 * bs, bs));
	/* three zones in one read: a's data, all of the gap, b's data */
	if (g->zone_size <= (64u << 20)) {
		size_t big = (size_t)(zstart(b) - zstart(a)) + 2 * bs;
		char *p = zdev_buf_alloc(big);

		memset(p, 0xAA, big);
		ck_assert_int_eq(zdev_read(dev, zstart(a), p, big), (ssize_t)big);
		ck_assert(pattern_ok(p, 2 * bs, 66));
		ck_assert(all_zero(p + 2 * bs, big - 4 * bs));
		ck_assert(pattern_ok(p + big - 2 * bs, 2 * bs, 77));
		zdev_buf_free(p);
	}
	/* a full zone followed by data: the boundary reads both */
	if (g->zone_capacity == g->zone_size && g->zone_size <= (256u << 20)) {
		void *ref = zdev_buf_alloc(1 << 20);
		uint64_t in_chunk = (g->zone_capacity - 2 * bs) % (1 << 20);

		ck_assert_int_eq(zdev_zone_reset(dev, a), 0);
		fill_zone(a);	/* pattern(a) in 1 MiB chunks */
		pattern(ref, 1 << 20, a);
		ck_assert_int_eq(zdev_read(dev, off, buf, len), (ssize_t)len);
		ck_assert(memcmp(buf, (char *)ref + in_chunk, 2 * bs) == 0);
		ck_assert(pattern_ok(buf + 2 * bs, 2 * bs, 77));
		zdev_buf_free(ref);
	}
	zdev_buf_free(buf);
}
END_TEST

/* ---- persistence --------------------------------------------------------- */

START_TEST(test_persist_reopen)
{
	uint32_t bs = g->block_size;

	ck_assert_int_eq(wr(dev, zstart(seqz(0)), 3 * bs, 21), 3 * bs);
	ck_assert_int_eq(wr(dev, zstart(seqz(1)), bs, 22), bs);
	ck_assert_int_eq(zdev_zone_close(dev, seqz(1)), 0);
	ck_assert_int_eq(zdev_zone_finish(dev, seqz(2)), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	zdev_close(dev);
	dev = NULL;
	ck_assert_int_eq(open_dev(&dev), 0);
	g = zdev_geometry(dev);
	ck_assert_uint_eq(zrep(seqz(0)).wp, zstart(seqz(0)) + 3 * bs);
	ck_assert_int_eq(zrep(seqz(0)).cond, ZDEV_COND_IMP_OPEN);
	ck_assert_int_eq(zrep(seqz(1)).cond, ZDEV_COND_CLOSED);
	ck_assert_int_eq(zrep(seqz(2)).cond, ZDEV_COND_FULL);
	check_data(dev, zstart(seqz(0)), 3 * bs, 21);
	check_data(dev, zstart(seqz(1)), bs, 22);
	/* writes continue at the persisted wp */
	ck_assert_int_eq(wr(dev, zstart(seqz(0)) + 3 * bs, bs, 23), bs);
	check_data(dev, zstart(seqz(0)) + 3 * bs, bs, 23);
}
END_TEST

/* Child: write block after block (pattern seed = block number) over the
 * first `nz` sequential zones, tell the parent after `signal_after` blocks,
 * flush every `flush_every` blocks (0 = never).  Never returns. */
static void kill9_child(int wfd, uint32_t nz, uint32_t signal_after,
			uint32_t flush_every)
{
	struct zdev *d;
	uint32_t bs, n = 0;
	void *buf;

	if (zdev_open(devpath, NULL, &d))
		_exit(2);
	bs = zdev_geometry(d)->block_size;
	buf = zdev_buf_alloc(bs);
	for (uint32_t k = 0; k < nz; k++) {
		uint32_t z = zdev_geometry(d)->nr_conv_zones + k;
		uint64_t start = (uint64_t)z * zdev_geometry(d)->zone_size;
		uint64_t cap = zdev_geometry(d)->zone_capacity;

		for (uint64_t off = 0; off < cap; off += bs) {
			pattern(buf, bs, start + off);
			if (zdev_write(d, start + off, buf, bs) != (ssize_t)bs)
				_exit(3);
			n++;
			if (flush_every && n % flush_every == 0 && zdev_flush(d))
				_exit(4);
			if (n == signal_after && write(wfd, "x", 1) != 1)
				_exit(5);
		}
	}
	_exit(0);
}

/* Data below each zone's wp is the child's pattern, beyond it zeros. */
static uint64_t check_after_kill(uint32_t nz)
{
	uint32_t bs = g->block_size;
	uint64_t total = 0;
	void *buf = zdev_buf_alloc(bs);

	for (uint32_t k = 0; k < nz; k++) {
		struct zdev_zone zn = zrep(seqz(k));
		uint64_t used = zn.wp - zn.start;

		ck_assert_uint_eq(used % bs, 0);
		ck_assert_uint_le(used, zn.capacity);
		if (used == 0)
			ck_assert_int_eq(zn.cond, ZDEV_COND_EMPTY);
		else if (used == zn.capacity)
			ck_assert_int_eq(zn.cond, ZDEV_COND_FULL);
		else
			ck_assert(zdev_zone_active(&zn));
		for (uint64_t off = 0; off < used; off += bs) {
			ck_assert_int_eq(zdev_read(dev, zn.start + off, buf, bs), bs);
			ck_assert_msg(pattern_ok(buf, bs, zn.start + off),
				      "zone %u block %llu corrupt", seqz(k),
				      (unsigned long long)(off / bs));
		}
		if (used < zn.capacity) {
			check_zeros(dev, zn.wp, bs);
			/* and the zone keeps working at its wp */
			ck_assert_int_eq(wr(dev, zn.wp, bs, 1), bs);
		}
		total += used / bs;
	}
	zdev_buf_free(buf);
	return total;
}

static void run_killed_child(uint32_t nz, uint32_t flush_every)
{
	int pfd[2];
	pid_t pid;
	char c;
	int status;

	zdev_close(dev);	/* the child needs the (exclusive) device */
	dev = NULL;
	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		kill9_child(pfd[1], nz, 50, flush_every);
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], &c, 1), 1);
	usleep(2000);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
		      "child failed with status %d", status);
	close(pfd[0]);
}

START_TEST(test_kill9_child)
{
	uint64_t total;

	run_killed_child(4, 0);
	ck_assert_int_eq(open_dev(&dev), 0);
	g = zdev_geometry(dev);
	total = check_after_kill(4);
	ck_assert_uint_ge(total, 50);
}
END_TEST

START_TEST(test_kill9_then_power_loss)
{
	uint64_t total, cap_blocks;

	EMU_ONLY();
	run_killed_child(4, 16);
	/* the daemon is dead; now the machine loses power */
	ck_assert_int_eq(zdev_emu_power_loss_file(devpath, 0), 0);
	ck_assert_int_eq(open_dev(&dev), 0);
	g = zdev_geometry(dev);
	cap_blocks = 4 * g->zone_capacity / g->block_size;
	total = check_after_kill(4) - 0;
	/* only flushed writes survive: whole multiples of 16 blocks (the
	 * check above wrote one extra block into each non-full zone) */
	{
		uint64_t written = 0;

		for (uint32_t k = 0; k < 4; k++) {
			struct zdev_zone zn = zrep(seqz(k));
			uint64_t used = (zn.wp - zn.start) / g->block_size;
			written += used < cap_blocks / 4 ? used - 1 : used;
		}
		ck_assert_msg(written % 16 == 0 || written == cap_blocks,
			      "%llu blocks survived, not a flushed count",
			      (unsigned long long)written);
		ck_assert_uint_ge(written, 48);
	}
	(void)total;
}
END_TEST

/* ---- power loss ---------------------------------------------------------- */

static void reopen(void)
{
	zdev_close(dev);
	dev = NULL;
	ck_assert_int_eq(open_dev(&dev), 0);
	g = zdev_geometry(dev);
}

START_TEST(test_power_loss_drops_unflushed)
{
	uint32_t a = seqz(0), b = seqz(1), c = seqz(2), bs = g->block_size;
	struct zdev_zone zn;
	void *buf = zdev_buf_alloc(bs);

	EMU_ONLY();
	ck_assert_int_eq(wr(dev, zstart(a), 4 * bs, 1), 4 * bs);	/* flushed */
	ck_assert_int_eq(wr(dev, zstart(b), 2 * bs, 2), 2 * bs);	/* flushed */
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(wr(dev, zstart(a) + 4 * bs, 3 * bs, 3), 3 * bs); /* lost */
	ck_assert_int_eq(wr(dev, zstart(c), 5 * bs, 4), 5 * bs);	/* lost */
	ck_assert_int_eq(zdev_zone_finish(dev, b), 0);	/* durable at once */
	/* before the power loss the cache serves the data */
	check_data(dev, zstart(a) + 4 * bs, 3 * bs, 3);
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	/* the handle is dead */
	ck_assert_int_eq(zdev_write(dev, zstart(a), buf, bs), -EIO);
	ck_assert_int_eq(zdev_read(dev, zstart(a), buf, bs), -EIO);
	ck_assert_int_eq(zdev_flush(dev), -EIO);
	ck_assert_int_eq(zdev_zone_reset(dev, a), -EIO);
	ck_assert_int_eq(zdev_reset_all(dev), -EIO);
	ck_assert_int_eq(zdev_report_zones(dev, 0, 1, &zn), -EIO);
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), -EIO);
	reopen();
	zn = zrep(a);
	ck_assert_uint_eq(zn.wp, zn.start + 4 * bs);
	ck_assert_int_eq(zn.cond, ZDEV_COND_CLOSED);	/* power cycle closes */
	check_data(dev, zn.start, 4 * bs, 1);
	check_zeros(dev, zn.start + 4 * bs, 3 * bs);
	zn = zrep(b);
	ck_assert_int_eq(zn.cond, ZDEV_COND_FULL);
	check_data(dev, zn.start, 2 * bs, 2);
	zn = zrep(c);
	ck_assert_int_eq(zn.cond, ZDEV_COND_EMPTY);
	ck_assert_uint_eq(zn.wp, zn.start);
	/* the file itself no longer holds the dropped data: write anew */
	ck_assert_int_eq(wr(dev, zstart(a) + 4 * bs, bs, 9), bs);
	check_data(dev, zstart(a) + 4 * bs, bs, 9);
	zdev_buf_free(buf);
}
END_TEST

/* A flush visits only the zones written or finished since the last one
 * (and, after an open, those the previous user left unflushed): every such
 * zone's data survives a power loss, whatever the order of flushes,
 * resets and reopens. */
START_TEST(test_flush_covers_every_written_zone)
{
	uint32_t a = seqz(0), b = seqz(1), c = seqz(2), bs = g->block_size;
	struct zdev_zone zn;

	EMU_ONLY();
	ck_assert_int_eq(wr(dev, zstart(a), 2 * bs, 1), 2 * bs);
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);	/* nothing new: still fine */
	ck_assert_int_eq(wr(dev, zstart(b), bs, 2), bs);	/* left unflushed */
	reopen();		/* a new user of the file: b is still unflushed */
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(wr(dev, zstart(a) + 2 * bs, bs, 3), bs);
	ck_assert_int_eq(zdev_zone_reset(dev, c), 0);
	ck_assert_int_eq(wr(dev, zstart(c), 3 * bs, 4), 3 * bs);
	ck_assert_int_eq(zdev_zone_finish(dev, c), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	reopen();
	zn = zrep(a);
	ck_assert_uint_eq(zn.wp, zn.start + 3 * bs);
	check_data(dev, zn.start, 2 * bs, 1);
	check_data(dev, zn.start + 2 * bs, bs, 3);
	zn = zrep(b);
	ck_assert_uint_eq(zn.wp, zn.start + bs);
	check_data(dev, zn.start, bs, 2);
	zn = zrep(c);
	ck_assert_int_eq(zn.cond, ZDEV_COND_FULL);
	check_data(dev, zn.start, 3 * bs, 4);
}
END_TEST

START_TEST(test_power_loss_tear)
{
	uint32_t bs = g->block_size, nz = 8, partial = 0, nblk = 32;

	EMU_ONLY();
	for (uint32_t k = 0; k < 4 && k < nz; k++)
		(void)k;
	/* 4 active zones so the limits are not in the way */
	for (uint32_t k = 0; k < 4; k++)
		ck_assert_int_eq(wr(dev, zstart(seqz(k)), 2 * bs, 100 + k), 2 * bs);
	ck_assert_int_eq(zdev_flush(dev), 0);
	for (uint32_t k = 0; k < 4; k++)
		for (uint32_t i = 0; i < nblk; i++)
			ck_assert_int_eq(wr(dev, zstart(seqz(k)) + (2 + i) * bs, bs,
					    zstart(seqz(k)) + (2 + i) * bs), bs);
	ck_assert_int_eq(zdev_emu_power_loss(dev, 12345), 0);
	reopen();
	for (uint32_t k = 0; k < 4; k++) {
		struct zdev_zone zn = zrep(seqz(k));
		uint64_t kept = (zn.wp - zn.start) / bs;

		ck_assert_uint_ge(kept, 2);
		ck_assert_uint_le(kept, 2 + nblk);
		ck_assert_uint_eq((zn.wp - zn.start) % bs, 0);
		check_data(dev, zn.start, 2 * bs, 100 + k);
		for (uint64_t i = 2; i < kept; i++)
			check_data(dev, zn.start + i * bs, bs, zn.start + i * bs);
		if (kept < 2 + nblk)
			check_zeros(dev, zn.wp, bs);
		if (kept > 2 && kept < 2 + nblk)
			partial++;
	}
	/* a torn write keeps a random prefix: with 4 zones of 32 unflushed
	 * blocks, some zone keeps part of it (deterministic for this seed) */
	ck_assert_uint_ge(partial, 1);
	/* the same seed tears the same way */
	(void)nz;
}
END_TEST

START_TEST(test_power_loss_keeps_flushed_file)
{
	uint32_t bs = g->block_size;

	EMU_ONLY();
	ck_assert_int_eq(wr(dev, zstart(seqz(0)), 8 * bs, 1), 8 * bs);
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(wr(dev, zstart(seqz(0)) + 8 * bs, 8 * bs, 2), 8 * bs);
	/* the file is busy while open */
	ck_assert_int_eq(zdev_emu_power_loss_file(devpath, 0), -EBUSY);
	zdev_close(dev);
	dev = NULL;
	ck_assert_int_eq(zdev_emu_power_loss_file(devpath, 0), 0);
	ck_assert_int_eq(open_dev(&dev), 0);
	g = zdev_geometry(dev);
	ck_assert_uint_eq(zrep(seqz(0)).wp, zstart(seqz(0)) + 8 * bs);
	check_data(dev, zstart(seqz(0)), 8 * bs, 1);
	check_zeros(dev, zstart(seqz(0)) + 8 * bs, 8 * bs);
	/* a second power loss loses nothing more */
	reopen();
	zdev_close(dev);
	dev = NULL;
	ck_assert_int_eq(zdev_emu_power_loss_file(devpath, 7), 0);
	ck_assert_int_eq(open_dev(&dev), 0);
	g = zdev_geometry(dev);
	ck_assert_uint_eq(zrep(seqz(0)).wp, zstart(seqz(0)) + 8 * bs);
}
END_TEST

/* The same tear seed on the same history tears the same way. */
static void tear_run(uint64_t seed, uint64_t *wps)
{
	uint32_t bs = g->block_size;

	ck_assert_int_eq(zdev_reset_all(dev), 0);
	for (uint32_t k = 0; k < 4; k++)
		ck_assert_int_eq(wr(dev, zstart(seqz(k)), bs, k), bs);
	ck_assert_int_eq(zdev_flush(dev), 0);
	for (uint32_t k = 0; k < 4; k++)
		ck_assert_int_eq(wr(dev, zstart(seqz(k)) + bs, 40 * bs, k), 40 * bs);
	ck_assert_int_eq(zdev_emu_power_loss(dev, seed), 0);
	reopen();
	for (uint32_t k = 0; k < 4; k++)
		wps[k] = zrep(seqz(k)).wp;
}

START_TEST(test_power_loss_tear_deterministic)
{
	uint64_t a[4], b[4], c[4];

	EMU_ONLY();
	tear_run(99, a);
	tear_run(99, b);
	tear_run(100, c);
	ck_assert(memcmp(a, b, sizeof(a)) == 0);
	ck_assert_msg(memcmp(a, c, sizeof(a)) != 0, "different seeds tore alike");
}
END_TEST

/* On a real device the emulator-only calls refuse politely. */
START_TEST(test_emu_calls_elsewhere)
{
	struct zdev_emu_params p;

	if (!test_device) {
		ck_assert_int_eq(zdev_emu_get_params(dev, &p), 0);
		ck_assert_uint_eq(p.nr_zones, g->nr_zones);
		return;
	}
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), -ENOTSUP);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE, 0, 1, -EIO), -ENOTSUP);
	ck_assert_int_eq(zdev_emu_get_params(dev, &p), -ENOTSUP);
	ck_assert_int_eq(zdev_emu_power_loss_file(devpath, 0), -ENOTSUP);
}
END_TEST

/* ---- exclusive open ----------------------------------------------------- */

START_TEST(test_exclusive_open)
{
	struct zdev_open_opts o = ZDEV_OPEN_OPTS_INIT;
	struct zdev *d2 = NULL, *d3 = NULL;

	zdev_close(dev);
	dev = NULL;
	o.exclusive = true;
	ck_assert_int_eq(zdev_open(devpath, &o, &dev), 0);
	g = zdev_geometry(dev);
	ck_assert_int_eq(zdev_open(devpath, &o, &d2), -EBUSY);
	ck_assert_ptr_null(d2);
	if (!test_device) {
		/* emulator: any read-write open needs the file to itself */
		ck_assert_int_eq(zdev_open(devpath, NULL, &d2), -EBUSY);
		/* a read-only observer is fine and sees the live state */
		o.exclusive = false;
		o.read_only = true;
		ck_assert_int_eq(zdev_open(devpath, &o, &d3), 0);
		ck_assert_int_eq(wr(dev, zstart(seqz(0)), g->block_size, 1),
				 g->block_size);
		{
			struct zdev_zone zn;

			ck_assert_int_eq(zdev_report_zones(d3, seqz(0), 1, &zn), 1);
			ck_assert_uint_eq(zn.wp, zstart(seqz(0)) + g->block_size);
		}
		check_data(d3, zstart(seqz(0)), g->block_size, 1);
		ck_assert_int_eq(wr(d3, zstart(seqz(0)) + g->block_size,
				    g->block_size, 1), -EBADF);
		ck_assert_int_eq(zdev_zone_reset(d3, seqz(0)), -EBADF);
		zdev_close(d3);
	}
	zdev_close(dev);
	dev = NULL;
	o.exclusive = true;
	o.read_only = false;
	ck_assert_int_eq(zdev_open(devpath, &o, &d2), 0);
	zdev_close(d2);
	ck_assert_int_eq(open_dev(&dev), 0);
	g = zdev_geometry(dev);
}
END_TEST

/* ---- batches -------------------------------------------------------------- */

START_TEST(test_io_batch_results)
{
	uint32_t bs = g->block_size;
	uint32_t a = seqz(0), b = seqz(1);
	struct zdev_req r[7];
	struct zdev_stats st0, st1;
	char *bufs[7];

	for (int i = 0; i < 7; i++) {
		bufs[i] = zdev_buf_alloc(2 * bs);
		pattern(bufs[i], 2 * bs, 1000 + i);
	}
	ck_assert_int_eq(wr(dev, zstart(b), bs, 5), bs);
	zdev_get_stats(dev, &st0);
	memset(r, 0, sizeof(r));
	/* 0: good write at a's wp; 1: good write right behind it (same zone,
	 * array order); 2: write to b not at wp; 3: unaligned length;
	 * 4: good read of b; 5: read beyond the end; 6: good write to b */
	r[0] = (struct zdev_req){ ZDEV_OP_WRITE, zstart(a), bufs[0], 2 * bs, 0 };
	r[1] = (struct zdev_req){ ZDEV_OP_WRITE, zstart(a) + 2 * bs, bufs[1], bs, 0 };
	r[2] = (struct zdev_req){ ZDEV_OP_WRITE, zstart(b) + 4 * bs, bufs[2], bs, 0 };
	r[3] = (struct zdev_req){ ZDEV_OP_WRITE, zstart(b) + bs, bufs[3], 100, 0 };
	r[4] = (struct zdev_req){ ZDEV_OP_READ, zstart(b), bufs[4], bs, 0 };
	r[5] = (struct zdev_req){ ZDEV_OP_READ, g->size, bufs[5], bs, 0 };
	r[6] = (struct zdev_req){ ZDEV_OP_WRITE, zstart(b) + bs, bufs[6], bs, 0 };
	ck_assert_int_eq(zdev_io_batch(dev, r, 7), 4);
	ck_assert_int_eq(r[0].result, 2 * bs);
	ck_assert_int_eq(r[1].result, bs);
	ck_assert_int_eq(r[2].result, -EIO);
	ck_assert_int_eq(r[3].result, -EINVAL);
	ck_assert_int_eq(r[4].result, bs);
	ck_assert_int_eq(r[5].result, -EINVAL);
	ck_assert_int_eq(r[6].result, bs);
	ck_assert(pattern_ok(bufs[4], bs, 5));
	ck_assert_uint_eq(zrep(a).wp, zstart(a) + 3 * bs);
	ck_assert_uint_eq(zrep(b).wp, zstart(b) + 2 * bs);
	check_data(dev, zstart(a), 2 * bs, 1000);
	check_data(dev, zstart(a) + 2 * bs, bs, 1001);
	check_data(dev, zstart(b) + bs, bs, 1006);
	zdev_get_stats(dev, &st1);
	ck_assert_uint_eq(st1.writes - st0.writes, 3);
	ck_assert_uint_eq(st1.bytes_written - st0.bytes_written, 4 * bs);
	ck_assert_uint_eq(st1.reads - st0.reads, 1 + 3);	/* + check_data */
	ck_assert_int_eq(zdev_io_batch(dev, r, 0), 0);
	ck_assert_int_eq(zdev_io_batch(dev, NULL, 1), -EINVAL);
	for (int i = 0; i < 7; i++)
		zdev_buf_free(bufs[i]);
}
END_TEST

START_TEST(test_io_batch_many)
{
	/* a batch larger than any internal queue: 200 blocks over 4 zones */
	uint32_t bs = g->block_size, nr = 200;
	struct zdev_req *r = calloc(nr, sizeof(*r));
	char *buf = zdev_buf_alloc((size_t)nr * bs);

	for (uint32_t i = 0; i < nr; i++) {
		uint32_t z = seqz(i % 4), k = i / 4;

		r[i].op = ZDEV_OP_WRITE;
		r[i].offset = zstart(z) + (uint64_t)k * bs;
		r[i].buf = buf + (size_t)i * bs;
		r[i].len = bs;
		pattern(r[i].buf, bs, r[i].offset);
	}
	ck_assert_int_eq(zdev_io_batch(dev, r, nr), (int)nr);
	for (uint32_t i = 0; i < nr; i++) {
		ck_assert_int_eq(r[i].result, bs);
		r[i].op = ZDEV_OP_READ;
		memset(r[i].buf, 0, bs);
	}
	ck_assert_int_eq(zdev_io_batch(dev, r, nr), (int)nr);
	for (uint32_t i = 0; i < nr; i++)
		ck_assert(pattern_ok(r[i].buf, bs, r[i].offset));
	for (uint32_t k = 0; k < 4; k++)
		ck_assert_uint_eq(zrep(seqz(k)).wp, zstart(seqz(k)) + nr / 4 * bs);
	zdev_buf_free(buf);
	free(r);
}
END_TEST

/* ---- concurrency ----------------------------------------------------------- */

struct wthread {
	struct zdev *d;
	uint64_t start;
	uint32_t blocks, bs;
	int err;
};

static void *writer_thread(void *arg)
{
	struct wthread *w = arg;
	void *buf = zdev_buf_alloc(w->bs);

	for (uint32_t i = 0; i < w->blocks && !w->err; i++) {
		uint64_t off = w->start + (uint64_t)i * w->bs;

		pattern(buf, w->bs, off);
		if (zdev_write(w->d, off, buf, w->bs) != (ssize_t)w->bs)
			w->err = 1;
	}
	zdev_buf_free(buf);
	return NULL;
}

START_TEST(test_concurrent_zones)
{
	uint32_t nt = g->max_open ? ZF_MIN(g->max_open, 4u) : 4u;
	uint32_t bs = g->block_size;
	uint32_t blocks = (uint32_t)ZF_MIN(g->zone_capacity / bs, 128u);
	pthread_t th[4];
	struct wthread w[4];

	for (uint32_t t = 0; t < nt; t++) {
		w[t] = (struct wthread){ dev, zstart(seqz(t)), blocks, bs, 0 };
		ck_assert_int_eq(pthread_create(&th[t], NULL, writer_thread, &w[t]), 0);
	}
	for (uint32_t t = 0; t < nt; t++) {
		pthread_join(th[t], NULL);
		ck_assert_int_eq(w[t].err, 0);
	}
	for (uint32_t t = 0; t < nt; t++) {
		struct zdev_zone zn = zrep(seqz(t));
		void *buf = zdev_buf_alloc(bs);

		ck_assert_uint_eq(zn.wp, zn.start + (uint64_t)blocks * bs);
		for (uint32_t i = 0; i < blocks; i++) {
			ck_assert_int_eq(zdev_read(dev, zn.start + (uint64_t)i * bs, buf, bs), bs);
			ck_assert(pattern_ok(buf, bs, zn.start + (uint64_t)i * bs));
		}
		zdev_buf_free(buf);
	}
}
END_TEST

/* ---- emulator specifics ----------------------------------------------------- */

START_TEST(test_fault_injection)
{
	uint32_t z = seqz(0), bs = g->block_size;
	void *buf = zdev_buf_alloc(bs);

	EMU_ONLY();
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE, 1, 2, -ENOSPC), 0);
	ck_assert_int_eq(wr(dev, zstart(z), bs, 1), bs);		/* skipped */
	ck_assert_int_eq(wr(dev, zstart(z) + bs, bs, 2), -ENOSPC);
	ck_assert_int_eq(wr(dev, zstart(z) + bs, bs, 2), -ENOSPC);
	ck_assert_uint_eq(zrep(z).wp, zstart(z) + bs);			/* no effect */
	ck_assert_int_eq(wr(dev, zstart(z) + bs, bs, 2), bs);		/* healed */

	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 1, -EIO), 0);
	ck_assert_int_eq(zdev_read(dev, zstart(z), buf, bs), -EIO);
	ck_assert_int_eq(zdev_read(dev, zstart(z), buf, bs), bs);

	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_RESET, 0, 2, -EIO), 0);
	ck_assert_int_eq(zdev_zone_reset(dev, z), -EIO);
	ck_assert_int_eq(zdev_reset_all(dev), -EIO);
	ck_assert_uint_eq(zrep(z).wp, zstart(z) + 2 * bs);
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);

	/* a failed flush makes nothing durable */
	ck_assert_int_eq(wr(dev, zstart(z), bs, 3), bs);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_FLUSH, 0, 1, -EIO), 0);
	ck_assert_int_eq(zdev_flush(dev), -EIO);
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	reopen();
	ck_assert_uint_eq(zrep(z).wp, zstart(z));

	/* faults in a batch hit individual requests */
	{
		struct zdev_req r[2] = {
			{ ZDEV_OP_WRITE, zstart(z), buf, bs, 0 },
			{ ZDEV_OP_WRITE, zstart(z) + bs, buf, bs, 0 },
		};
		ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE, 1, 1, -ENOSPC), 0);
		ck_assert_int_eq(zdev_io_batch(dev, r, 2), 1);
		ck_assert_int_eq(r[0].result, bs);
		ck_assert_int_eq(r[1].result, -ENOSPC);
	}
	/* bad arguments */
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_NR, 0, 1, -EIO), -EINVAL);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 1, 5), -EINVAL);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 0, 0), 0);
	zdev_buf_free(buf);
}
END_TEST

/* zdev_read_fd: the file range of bytes below the write pointer of one
 * zone (or in a conventional zone) holds exactly what was written; ranges
 * crossing the write pointer or a zone, an armed read fault and the
 * performance model send the reader to zdev_read. */
START_TEST(test_read_fd)
{
	uint32_t z = seqz(0), bs = g->block_size;
	char *got = zdev_buf_alloc(4 * bs), *want = zdev_buf_alloc(4 * bs);
	uint64_t fo = 0;
	int fd;

	EMU_ONLY();
	ck_assert(zdev_reads_as_file(dev));
	ck_assert_int_eq(wr(dev, zstart(z), 3 * bs, 7), 3 * bs);
	pattern(want, 3 * bs, 7);
	fd = zdev_read_fd(dev, zstart(z) + 100, 2 * bs, &fo);	/* unaligned is fine */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, got, 2 * bs, (off_t)fo), (ssize_t)(2 * bs));
	ck_assert_int_eq(memcmp(got, want + 100, 2 * bs), 0);
	/* up to the write pointer, not past it */
	ck_assert_int_ge(zdev_read_fd(dev, zstart(z), 3 * bs, &fo), 0);
	ck_assert_int_eq(zdev_read_fd(dev, zstart(z), 3 * bs + 1, &fo), -EOPNOTSUPP);
	ck_assert_int_eq(zdev_read_fd(dev, zstart(z + 1), bs, &fo), -EOPNOTSUPP);
	/* not across zones, even both written (conventional zones 0 and 1) */
	ck_assert_int_eq(wr(dev, zstart(1) - bs, 2 * bs, 8), 2 * bs);
	ck_assert_int_ge(zdev_read_fd(dev, zstart(1) - bs, bs, &fo), 0);
	ck_assert_int_eq(zdev_read_fd(dev, zstart(1) - bs, 2 * bs, &fo), -EOPNOTSUPP);
	/* an armed read fault fires on the normal path */
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 1, -EIO), 0);
	ck_assert_int_eq(zdev_read_fd(dev, zstart(z), bs, &fo), -EOPNOTSUPP);
	ck_assert_int_eq(zdev_read(dev, zstart(z), got, bs), -EIO);
	ck_assert_int_ge(zdev_read_fd(dev, zstart(z), bs, &fo), 0);
	/* a reset zone has nothing to give */
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);
	ck_assert_int_eq(zdev_read_fd(dev, zstart(z), bs, &fo), -EOPNOTSUPP);
	/* bad arguments */
	ck_assert_int_eq(zdev_read_fd(dev, g->size, bs, &fo), -EINVAL);
	ck_assert_int_eq(zdev_read_fd(dev, 0, 0, &fo), -EINVAL);
	ck_assert_int_eq(zdev_read_fd(NULL, 0, bs, &fo), -EINVAL);
	/* with the performance model on, every read is charged: none by fd */
	{
		struct zdev_emu_params p = fixture_params;
		char path[PATH_MAX];
		struct zdev *d;

		p.zone_read_mbps = 200;
		path_in_tmp(path, "model-fd.emu");
		create_emu(path, &p);
		ck_assert_int_eq(zdev_open(path, NULL, &d), 0);
		ck_assert(!zdev_reads_as_file(d));
		ck_assert_int_eq(wr(d, 2 * p.zone_size, bs, 9), bs);
		ck_assert_int_eq(zdev_read_fd(d, 2 * p.zone_size, bs, &fo), -EOPNOTSUPP);
		zdev_close(d);
	}
	zdev_buf_free(got);
	zdev_buf_free(want);
}
END_TEST

/* Writes 4 blocks of seed at the start of zone z; returns where the zone
 * lies in the emulator's file (and the file's descriptor in *fd). */
static uint64_t write_zone_at(uint32_t z, uint64_t seed, int *fd)
{
	uint32_t bs = g->block_size;
	uint64_t fo = 0;
	ck_assert_int_eq(wr(dev, zstart(z), 4 * bs, seed), 4 * bs);
	int f = zdev_read_fd(dev, zstart(z), bs, &fo);
	ck_assert_int_ge(f, 0);
	if (fd)
		*fd = f;
	return fo;
}

/* The file fd holds no data in [off, end of that zone). */
static void assert_punched(int fd, uint64_t off, uint64_t zone_file_off)
{
	off_t d = lseek(fd, (off_t)off, SEEK_DATA);
	ck_assert(d < 0 || d >= (off_t)(zone_file_off + g->zone_size));
}

/* A reset leaves the zone's old bytes in the file (no page freed and
 * allocated again per zone cycle) but never lets them be read: zeros past
 * the write pointer, the new bytes over them, zeros in a finished zone's
 * unwritten part; the close punches them, so the file at rest holds only
 * live data. */
START_TEST(test_reset_punches_at_close)
{
	uint32_t z = seqz(1), bs = g->block_size;
	char *buf = zdev_buf_alloc(4 * bs);

	EMU_ONLY();
	int fd;
	uint64_t fo = write_zone_at(z, 11, &fd);	/* the zone's place in the file */
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);
	/* still in the file, not readable */
	ck_assert_int_eq(lseek(fd, (off_t)fo, SEEK_DATA), (off_t)fo);
	ck_assert_int_eq(zdev_read(dev, zstart(z), buf, 4 * bs), 4 * bs);
	ck_assert(all_zero(buf, 4 * bs));
	/* overwritten in place; a finish reads zeros where nothing was written */
	ck_assert_int_eq(wr(dev, zstart(z), bs, 12), bs);
	ck_assert_int_eq(zdev_zone_finish(dev, z), 0);
	ck_assert_int_eq(zdev_read(dev, zstart(z), buf, 4 * bs), 4 * bs);
	ck_assert(pattern_ok(buf, bs, 12));
	ck_assert(all_zero(buf + bs, 3 * bs));
	/* a zone reset again and left empty: punched at close */
	uint32_t y = seqz(2);
	uint64_t fy = write_zone_at(y, 13, NULL);
	ck_assert_int_eq(zdev_zone_reset(dev, y), 0);
	reopen();
	fd = open(devpath, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	assert_punched(fd, fy, fy);
	assert_punched(fd, fo + bs, fo);	/* past zone z's one block */
	close(fd);
	ck_assert_int_eq(zdev_read(dev, zstart(z), buf, bs), bs);
	ck_assert(pattern_ok(buf, bs, 12));
	zdev_buf_free(buf);
}
END_TEST

/* A process killed between a reset and its close leaves the stale mark in
 * the mapped zone table: the next open reads the zone as empty (zeros, the
 * write pointer at its start) and its close punches the old bytes. */
START_TEST(test_reset_then_kill_punched_by_next_close)
{
	uint32_t y = seqz(3), bs = g->block_size;
	char *buf = zdev_buf_alloc(4 * bs);

	EMU_ONLY();
	uint64_t fo = write_zone_at(y, 17, NULL);
	zdev_close(dev);
	dev = NULL;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct zdev *c = NULL;
		if (open_dev(&c) != 0 || zdev_zone_reset(c, y) != 0)
			_exit(1);
		_exit(0);	/* no close: a kill -9 after the reset */
	}
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	int fd = open(devpath, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(lseek(fd, (off_t)fo, SEEK_DATA), (off_t)fo);	/* not punched yet */
	ck_assert_int_eq(open_dev(&dev), 0);
	g = zdev_geometry(dev);
	struct zdev_zone zn;
	ck_assert_int_eq(zdev_report_zones(dev, y, 1, &zn), 1);
	ck_assert_uint_eq(zn.wp, zn.start);
	ck_assert_int_eq(zdev_read(dev, zstart(y), buf, 4 * bs), 4 * bs);
	ck_assert(all_zero(buf, 4 * bs));
	reopen();
	assert_punched(fd, fo, fo);
	close(fd);
	zdev_buf_free(buf);
}
END_TEST

START_TEST(test_conventional_zones)
{
	uint32_t bs = g->block_size;
	uint64_t c0 = zstart(0);

	EMU_ONLY();
	ck_assert_uint_eq(g->nr_conv_zones, 2);
	ck_assert(zdev_zone_conv(&(struct zdev_zone){ .type = zrep(0).type }));
	/* random writes and overwrites anywhere, also across conv zones */
	ck_assert_int_eq(wr(dev, c0 + 5 * bs, bs, 1), bs);
	ck_assert_int_eq(wr(dev, c0 + 2 * bs, bs, 2), bs);
	ck_assert_int_eq(wr(dev, c0 + 5 * bs, bs, 3), bs);
	ck_assert_int_eq(wr(dev, zstart(1) - bs, 2 * bs, 4), 2 * bs);
	check_data(dev, c0 + 2 * bs, bs, 2);
	check_data(dev, c0 + 5 * bs, bs, 3);
	check_data(dev, zstart(1) - bs, 2 * bs, 4);
	/* but not into a sequential zone */
	ck_assert_int_eq(wr(dev, zstart(2) - bs, 2 * bs, 4), -EIO);
	/* zone management on conventional zones is invalid */
	ck_assert_int_eq(zdev_zone_reset(dev, 0), -EINVAL);
	ck_assert_int_eq(zdev_zone_open(dev, 1), -EINVAL);
	ck_assert_int_eq(zdev_zone_close(dev, 0), -EINVAL);
	ck_assert_int_eq(zdev_zone_finish(dev, 0), -EINVAL);
	/* reset_all leaves them alone */
	ck_assert_int_eq(zdev_reset_all(dev), 0);
	check_data(dev, c0 + 2 * bs, bs, 2);
	ck_assert_int_eq(zrep(0).cond, ZDEV_COND_NOT_WP);
}
END_TEST

START_TEST(test_bad_files)
{
	char p[PATH_MAX], good[PATH_MAX];
	struct zdev *d = NULL;
	struct zdev_emu_params bad = fixture_params;
	int fd;
	char junk[8192];

	EMU_ONLY();
	/* random contents */
	path_in_tmp(p, "random.img");
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(rand() & 0xff);
	fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	ck_assert_int_eq(zdev_open(p, NULL, &d), -EINVAL);
	ck_assert_ptr_null(d);
	/* empty file */
	ck_assert_int_eq(truncate(p, 0), 0);
	ck_assert_int_eq(zdev_open(p, NULL, &d), -EINVAL);
	/* a valid device, then truncated: inside the header, inside the table,
	 * inside the data area */
	path_in_tmp(good, "trunc.emu");
	create_emu(good, &fixture_params);
	ck_assert_int_eq(zdev_open(good, NULL, &d), 0);
	zdev_close(d);
	d = NULL;
	ck_assert_int_eq(truncate(good, 100), 0);
	ck_assert_int_eq(zdev_open(good, NULL, &d), -EINVAL);
	create_emu(good, &fixture_params);
	ck_assert_int_eq(truncate(good, 4096 + 16), 0);
	ck_assert_int_eq(zdev_open(good, NULL, &d), -EINVAL);
	create_emu(good, &fixture_params);
	ck_assert_int_eq(truncate(good, 3 << 20), 0);
	ck_assert_int_eq(zdev_open(good, NULL, &d), -EINVAL);
	/* a flipped bit in the header (checksum) */
	create_emu(good, &fixture_params);
	fd = open(good, O_RDWR);
	{
		uint32_t v = 0x1234;
		ck_assert_int_eq(pwrite(fd, &v, 4, 16), 4);
	}
	close(fd);
	ck_assert_int_eq(zdev_open(good, NULL, &d), -EINVAL);
	/* a garbage zone state */
	create_emu(good, &fixture_params);
	fd = open(good, O_RDWR);
	{
		unsigned char v[32];
		memset(v, 0x77, sizeof(v));
		ck_assert_int_eq(pwrite(fd, v, sizeof(v), 4096 + 3 * 32), 32);
	}
	close(fd);
	ck_assert_int_eq(zdev_open(good, NULL, &d), -EINVAL);
	ck_assert_ptr_null(d);
	/* not a file */
	ck_assert_int_eq(zdev_open(tmpdir, NULL, &d), -ENOTSUP);
	ck_assert_int_eq(zdev_open("/dev/null", NULL, &d), -ENOTSUP);
	path_in_tmp(p, "does-not-exist");
	ck_assert_int_eq(zdev_open(p, NULL, &d), -ENOENT);
	ck_assert_int_eq(zdev_open("", NULL, &d), -EINVAL);
	/* create: refuses to clobber; bad parameters */
	ck_assert_int_eq(zdev_emu_create(devpath, &fixture_params, false), -EEXIST);
	bad.zone_capacity = bad.zone_size + 4096;
	ck_assert_int_eq(zdev_emu_create(good, &bad, true), -EINVAL);
	bad = fixture_params;
	bad.zone_size = 1000;
	ck_assert_int_eq(zdev_emu_create(good, &bad, true), -EINVAL);
	bad = fixture_params;
	bad.nr_zones = 0;
	ck_assert_int_eq(zdev_emu_create(good, &bad, true), -EINVAL);
	bad = fixture_params;
	bad.nr_conv_zones = 17;
	ck_assert_int_eq(zdev_emu_create(good, &bad, true), -EINVAL);
	bad = fixture_params;
	bad.block_size = 1024;
	ck_assert_int_eq(zdev_emu_create(good, &bad, true), -EINVAL);
	bad = fixture_params;
	bad.max_open = 8;
	ck_assert_int_eq(zdev_emu_create(good, &bad, true), -EINVAL);
	/* overwrite of a device in use */
	ck_assert_int_eq(zdev_emu_create(devpath, &fixture_params, true), -EBUSY);
	/* non-emulator handles refuse emulator calls: nothing to test without
	 * a device; NULL is rejected */
	ck_assert_int_eq(zdev_emu_power_loss(NULL, 0), -EINVAL);
}
END_TEST

START_TEST(test_read_only_handle)
{
	struct zdev_open_opts o = ZDEV_OPEN_OPTS_INIT;
	struct zdev *ro = NULL;
	void *buf = zdev_buf_alloc(g->block_size);

	EMU_ONLY();
	o.read_only = true;
	ck_assert_int_eq(zdev_open(devpath, &o, &ro), 0);
	ck_assert_int_eq(zdev_write(ro, zstart(seqz(0)), buf, g->block_size), -EBADF);
	ck_assert_int_eq(zdev_zone_finish(ro, seqz(0)), -EBADF);
	ck_assert_int_eq(zdev_reset_all(ro), -EBADF);
	ck_assert_int_eq(zdev_emu_power_loss(ro, 0), -EBADF);
	ck_assert_int_eq(zdev_read(ro, zstart(seqz(0)), buf, g->block_size),
			 g->block_size);
	ck_assert_int_eq(zdev_flush(ro), 0);
	zdev_close(ro);
	zdev_buf_free(buf);
}
END_TEST

/* Performance model: 4 zones in parallel at 40 MB/s must take clearly less
 * than 4x one zone.  Wall-clock based, so each figure is the best of 3
 * runs (noise only ever adds time; the model only ever sleeps). */
static uint64_t perf_batch(struct zdev *d, uint64_t zone_size, bool parallel,
			   char *buf, size_t chunk)
{
	struct zdev_req r[4];
	uint64_t best = UINT64_MAX;

	for (int run = 0; run < 3; run++) {
		uint64_t t0;

		ck_assert_int_eq(zdev_reset_all(d), 0);
		for (int i = 0; i < 4; i++)
			r[i] = (struct zdev_req){
				ZDEV_OP_WRITE,
				parallel ? (uint64_t)(i + 1) * zone_size : (uint64_t)i * chunk,
				buf + i * chunk, chunk, 0 };
		t0 = zf_now_ns();
		ck_assert_int_eq(zdev_io_batch(d, r, 4), 4);
		best = ZF_MIN(best, zf_now_ns() - t0);
	}
	return best;
}

static uint64_t perf_threads(struct zdev *d, uint64_t zone_size, size_t chunk)
{
	uint64_t best = UINT64_MAX;

	for (int run = 0; run < 3; run++) {
		pthread_t th[4];
		struct wthread w[4];
		uint64_t t0;

		ck_assert_int_eq(zdev_reset_all(d), 0);
		t0 = zf_now_ns();
		for (int t = 0; t < 4; t++) {
			w[t] = (struct wthread){ d, (uint64_t)(t + 5) * zone_size,
						 4, (uint32_t)(chunk / 4), 0 };
			ck_assert_int_eq(pthread_create(&th[t], NULL, writer_thread, &w[t]), 0);
		}
		for (int t = 0; t < 4; t++) {
			pthread_join(th[t], NULL);
			ck_assert_int_eq(w[t].err, 0);
		}
		best = ZF_MIN(best, zf_now_ns() - t0);
	}
	return best;
}

START_TEST(test_perf_model)
{
	struct zdev_emu_params p = fixture_params, q;
	char path[PATH_MAX];
	struct zdev *d;
	size_t chunk = 256 << 10;
	char *buf;
	uint64_t t0, serial, parallel, threaded;
	double model_serial_ns = 4.0 * chunk * 1000.0 / 40.0;

	EMU_ONLY();
	p.nr_conv_zones = 0;
	p.zone_capacity = p.zone_size;
	p.max_open = p.max_active = 0;
	p.zone_write_mbps = 40;
	p.zone_read_mbps = 200;
	p.device_mbps = 2000;
	path_in_tmp(path, "model.emu");
	create_emu(path, &p);
	ck_assert_int_eq(zdev_open(path, NULL, &d), 0);
	ck_assert_int_eq(zdev_emu_get_params(d, &q), 0);
	ck_assert_uint_eq(q.zone_write_mbps, 40);
	ck_assert_uint_eq(q.device_mbps, 2000);
	buf = zdev_buf_alloc(4 * chunk);
	memset(buf, 5, 4 * chunk);

	serial = perf_batch(d, p.zone_size, false, buf, chunk);
	parallel = perf_batch(d, p.zone_size, true, buf, chunk);
	threaded = perf_threads(d, p.zone_size, chunk);
	fprintf(stderr, "perf model: 1 zone %.1f ms, 4 zones batch %.1f ms, "
		"4 threads %.1f ms (model: %.1f / %.1f ms)\n", serial / 1e6,
		parallel / 1e6, threaded / 1e6, model_serial_ns / 1e6,
		model_serial_ns / 4e6);
	ck_assert_msg(serial >= 0.9 * model_serial_ns, "serial too fast: model off?");
	ck_assert_msg(parallel < serial / 2, "zones did not overlap in a batch");
	ck_assert_msg(threaded < serial * 3 / 4, "threads did not overlap");
	zdev_close(d);
	/* the model can be switched off at open */
	{
		struct zdev_open_opts o = ZDEV_OPEN_OPTS_INIT;

		o.zone_write_mbps = 0;
		o.device_mbps = 0;
		ck_assert_int_eq(zdev_open(path, &o, &d), 0);
		ck_assert_int_eq(zdev_emu_get_params(d, &q), 0);
		ck_assert_uint_eq(q.zone_write_mbps, 0);
		ck_assert_uint_eq(q.zone_read_mbps, 200);
		ck_assert_int_eq(zdev_reset_all(d), 0);
		t0 = zf_now_ns();
		ck_assert_int_eq(zdev_write(d, 9 * p.zone_size, buf, 4 * chunk),
				 (ssize_t)(4 * chunk));
		ck_assert_uint_lt(zf_now_ns() - t0, (uint64_t)(model_serial_ns / 2));
		zdev_close(d);
	}
	zdev_buf_free(buf);
}
END_TEST

/* ---- main ---------------------------------------------------------------- */

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* ---- the blocking notice ---------------------------------------------- */

static int notices;
static void count_notice(void *arg)
{
	(void)arg;
	notices++;
}

static void *will_block_elsewhere(void *arg)
{
	(void)arg;
	zf_will_block();	/* this thread set none */
	return NULL;
}

/* Every call that reaches the device gives the calling thread's blocking
 * notice, once, and only that thread's (zf_common.h): the FUSE loop gives
 * its reading role away there. */
START_TEST(test_io_gives_the_blocking_notice)
{
	uint32_t z = seqz(0);
	void *buf = zdev_buf_alloc(g->block_size);
	ck_assert_ptr_nonnull(buf);
	memset(buf, 0x5a, g->block_size);
	struct zdev_zone zone;
	struct zdev_req rq = { .op = ZDEV_OP_READ, .offset = zstart(z), .buf = buf,
			       .len = g->block_size };
	struct {
		const char *what;
		int ret;
	} calls[7];
	int n = 0;

	notices = 0;
	zf_block_notice_set(count_notice, NULL);
	calls[n].what = "write";
	calls[n++].ret = (int)zdev_write(dev, zstart(z), buf, g->block_size);
	ck_assert_int_eq(notices, 1);
	zf_will_block();	/* one-shot: cleared before it was called */
	ck_assert_int_eq(notices, 1);
	for (int i = 0; i < 6; i++) {
		zf_block_notice_set(count_notice, NULL);
		switch (i) {
		case 0: calls[n].what = "read";
			calls[n++].ret = (int)zdev_read(dev, zstart(z), buf, g->block_size); break;
		case 1: calls[n].what = "flush"; calls[n++].ret = zdev_flush(dev); break;
		case 2: calls[n].what = "io_batch"; calls[n++].ret = zdev_io_batch(dev, &rq, 1); break;
		case 3: calls[n].what = "report"; calls[n++].ret = zdev_report_zones(dev, z, 1, &zone); break;
		case 4: calls[n].what = "finish"; calls[n++].ret = zdev_zone_finish(dev, z); break;
		case 5: calls[n].what = "reset"; calls[n++].ret = zdev_zone_reset(dev, z); break;
		}
		ck_assert_msg(notices == i + 2, "zdev %s gave %d notices", calls[n - 1].what,
			      notices - (i + 1));
	}
	for (int i = 0; i < n; i++)
		ck_assert_msg(calls[i].ret >= 0, "zdev %s: %s", calls[i].what, strerror(-calls[i].ret));

	/* A check that fails before the device is reached gives none, and
	 * neither does another thread's I/O nor a cleared notice. */
	zf_block_notice_set(count_notice, NULL);
	ck_assert_int_eq(zdev_write(dev, zstart(z) + 1, buf, g->block_size), -EINVAL);
	ck_assert_int_eq(notices, 7);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, will_block_elsewhere, NULL), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(notices, 7);
	zf_block_notice_set(NULL, NULL);
	ck_assert_int_eq((int)zdev_write(dev, zstart(z), buf, g->block_size), (int)g->block_size);
	ck_assert_int_eq(notices, 7);
	zdev_buf_free(buf);
}
END_TEST

static Suite *zdev_suite(void)
{
	Suite *s = suite_create("zdev");
	TCase *tc = tcase_create("zdev");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_geometry);
	tcase_add_test(tc, test_write_at_wp);
	tcase_add_test(tc, test_write_not_at_wp);
	tcase_add_test(tc, test_write_unaligned);
	tcase_add_test(tc, test_write_past_capacity);
	tcase_add_test(tc, test_full_at_capacity);
	tcase_add_test(tc, test_zone_transitions);
	tcase_add_test(tc, test_max_open_implicit);
	tcase_add_test(tc, test_max_open_explicit);
	tcase_add_test(tc, test_max_active);
	tcase_add_test(tc, test_read_beyond_wp);
	tcase_add_test(tc, test_read_cross_zones);
	tcase_add_test(tc, test_persist_reopen);
	tcase_add_test(tc, test_kill9_child);
	tcase_add_test(tc, test_kill9_then_power_loss);
	tcase_add_test(tc, test_power_loss_drops_unflushed);
	tcase_add_test(tc, test_flush_covers_every_written_zone);
	tcase_add_test(tc, test_power_loss_tear);
	tcase_add_test(tc, test_power_loss_keeps_flushed_file);
	tcase_add_test(tc, test_power_loss_tear_deterministic);
	tcase_add_test(tc, test_emu_calls_elsewhere);
	tcase_add_test(tc, test_exclusive_open);
	tcase_add_test(tc, test_io_batch_results);
	tcase_add_test(tc, test_io_batch_many);
	tcase_add_test(tc, test_concurrent_zones);
	tcase_add_test(tc, test_fault_injection);
	tcase_add_test(tc, test_record);
	tcase_add_test(tc, test_read_fd);
	tcase_add_test(tc, test_reset_punches_at_close);
	tcase_add_test(tc, test_reset_then_kill_punched_by_next_close);
	tcase_add_test(tc, test_conventional_zones);
	tcase_add_test(tc, test_bad_files);
	tcase_add_test(tc, test_read_only_handle);
	tcase_add_test(tc, test_perf_model);
	tcase_add_test(tc, test_io_gives_the_blocking_notice);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;
	const char *base = getenv("TMPDIR");

	test_device = getenv("ZDEV_TEST_DEVICE");
	if (test_device && !*test_device)
		test_device = NULL;
	snprintf(tmpdir, sizeof(tmpdir), "%s/test_zdev.XXXXXX",
		 base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (test_device) {
		struct zdev *d;
		int ret = zdev_open(test_device, NULL, &d);

		if (ret) {
			fprintf(stderr, "test_zdev: cannot open ZDEV_TEST_DEVICE=%s: %s\n",
				test_device, strerror(-ret));
			rmdir(tmpdir);
			return 1;
		}
		fprintf(stderr, "test_zdev: running against %s (%s backend, %u zones; "
			"all data on it is erased)\n", test_device,
			zdev_backend_name(d), zdev_geometry(d)->nr_zones);
		zdev_close(d);
	}
	sr = srunner_create(zdev_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return failed ? 1 : 0;
}
