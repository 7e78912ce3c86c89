/* test_zalloc — unit tests of the data-zone allocator (zonealloc/zalloc.c).
 *
 * Every test runs on an emulated zoned device (zoned/zdev_emu.c) with small
 * zones and low limits, and checks real outcomes against the device's own
 * zone report, not only against zalloc's view: leases start at the device
 * write pointer and can be written, the open/active limits hold on the
 * device, resets happen only after the right commit, etc.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "lsm/lifetime.h"
#include "zonealloc/zalloc.h"
#include "zoned/zdev.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define BS 4096u

/* Device "A": 32 zones of 1 MiB, capacity 768 KiB, 8 open / 8 active
 * (the emulator, like a real device, wants max_open <= max_active).
 * Data zones 2..31; zones 0 and 1 stand for the metadata log, which keeps
 * RES open/active slots.  Device "B" is the same with 8 open / 14 active:
 * there only the open budget binds until 12 zones are active. */
#define NZ 32
#define ZSZ (1 * MiB)
#define ZCAP (768 * KiB)
#define FIRST 2
#define NDATA (NZ - FIRST)
#define RES 2
#define MAXO 8
#define MAXA 8
#define MAXA_B 14
#define BUDGET (MAXO - RES)	/* 6: data open (and, on A, active) budget */

struct tdev {
	char path[64];
	struct zdev *dev;
	struct zalloc *za;
	void *buf;		/* ZCAP bytes of pattern */
};

static struct zalloc_params tparams(uint32_t first, uint32_t nr, uint32_t res,
				    uint32_t stripe)
{
	struct zalloc_params p = {
		.first_zone = first, .nr_zones = nr, .reserved_active = res,
		.reserved_open = res, .max_stripe_width = stripe,
		.self_check = true,	/* every zalloc_get_stats() recounts */
	};
	return p;
}

static void tdev_make(struct tdev *t, uint32_t nz, uint64_t zcap,
		      uint32_t max_open, uint32_t max_active)
{
	struct zdev_emu_params ep = {
		.zone_size = ZSZ, .zone_capacity = zcap, .nr_zones = nz,
		.block_size = BS, .max_open = max_open, .max_active = max_active,
	};
	int fd;

	memset(t, 0, sizeof(*t));
	snprintf(t->path, sizeof(t->path), "/tmp/test_zalloc.XXXXXX");
	fd = mkstemp(t->path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(zdev_emu_create(t->path, &ep, true), 0);
	ck_assert_int_eq(zdev_open(t->path, NULL, &t->dev), 0);
	t->buf = zdev_buf_alloc(ZSZ);
	ck_assert_ptr_nonnull(t->buf);
	memset(t->buf, 0xA5, ZSZ);
}

static void tdev_alloc(struct tdev *t, const struct zalloc_params *p)
{
	ck_assert_int_eq(zalloc_create(t->dev, p, &t->za), 0);
	/* as the file system does: the WAL class's young zones are left to die */
	ck_assert_int_eq(zalloc_set_stream_flags(t->za, LIFETIME_SHORT,
						 ZALLOC_STREAM_DEFER_YOUNG), 0);
	ck_assert_int_eq(zalloc_mount_done(t->za), 0);
}

/* The standard setup: limited device, zalloc over zones 2..31. */
static void tdev_std(struct tdev *t, uint32_t stripe)
{
	struct zalloc_params p = tparams(FIRST, NDATA, RES, stripe);

	tdev_make(t, NZ, ZCAP, MAXO, MAXA);
	tdev_alloc(t, &p);
}

static void tdev_free(struct tdev *t)
{
	/* every test ends with the incremental sums equal to a recount */
	if (t->za)
		ck_assert_int_eq(zalloc_check(t->za), 0);
	if (t->za)
		zalloc_destroy(t->za);
	if (t->dev)
		zdev_close(t->dev);
	zdev_buf_free(t->buf);
	unlink(t->path);
}

static struct zdev_zone dzone(struct tdev *t, uint32_t zone)
{
	struct zdev_zone z;

	ck_assert_int_eq(zdev_report_zones(t->dev, zone, 1, &z), 1);
	return z;
}

/* Count open / active zones in [first, first + nr) by the device report. */
static void dcount(struct tdev *t, uint32_t first, uint32_t nr,
		   uint32_t *open, uint32_t *active)
{
	struct zdev_zone *z = calloc(nr, sizeof(*z));
	uint32_t got = 0;

	ck_assert_ptr_nonnull(z);
	while (got < nr) {
		int rc = zdev_report_zones(t->dev, first + got, nr - got, z + got);

		ck_assert_int_gt(rc, 0);
		got += (uint32_t)rc;
	}
	*open = *active = 0;
	for (uint32_t i = 0; i < nr; i++) {
		if (zdev_zone_open_cond(&z[i]))
			(*open)++;
		if (zdev_zone_active(&z[i]))
			(*active)++;
	}
	free(z);
}

/* Write n bytes (<= lease len) at the lease offset; assert success. */
static void lwrite(struct tdev *t, const struct zalloc_lease *l, uint64_t n)
{
	ck_assert_uint_le(n, l->len);
	ck_assert_int_eq(zdev_write(t->dev, l->offset, t->buf, n), (ssize_t)n);
}

/* A lease must start at the device write pointer of its zone. */
static void check_lease(struct tdev *t, const struct zalloc_lease *l)
{
	struct zdev_zone z = dzone(t, l->zone);

	ck_assert_uint_eq(l->offset, z.wp);
	ck_assert_uint_gt(l->len, 0);
	ck_assert_uint_eq(l->len % BS, 0);
	ck_assert_uint_le(l->offset + l->len, z.start + z.capacity);
	ck_assert(z.cond != ZDEV_COND_FULL);
}

/* zalloc's view of every data zone agrees with the device report. */
static void check_sync(struct tdev *t, uint32_t first, uint32_t nr)
{
	for (uint32_t i = first; i < first + nr; i++) {
		struct zalloc_zone_info zi;
		struct zdev_zone z = dzone(t, i);

		ck_assert_int_eq(zalloc_zone_info(t->za, i, &zi), 0);
		ck_assert_uint_eq(zi.capacity, z.capacity);
		if (z.cond == ZDEV_COND_FULL) {
			ck_assert_int_eq(zi.cond, ZDEV_COND_FULL);
		} else {
			ck_assert_msg(zi.wp == z.wp, "zone %u: zalloc wp %llu device %llu",
				      i, (unsigned long long)zi.wp,
				      (unsigned long long)z.wp);
			ck_assert_int_eq(zdev_zone_empty(&z),
					 zi.cond == ZDEV_COND_EMPTY);
		}
	}
}

/* free + valid + reclaimable == capacity, and the per-zone sums agree. */
static void check_stats(struct tdev *t, uint32_t first, uint32_t nr)
{
	struct zalloc_stats st;
	uint64_t valid = 0, cap = 0;

	zalloc_get_stats(t->za, &st);
	ck_assert_uint_eq(st.nr_zones, nr);
	for (uint32_t i = first; i < first + nr; i++) {
		struct zalloc_zone_info zi;

		ck_assert_int_eq(zalloc_zone_info(t->za, i, &zi), 0);
		valid += zi.valid_bytes;
		cap += zi.capacity;
	}
	ck_assert_uint_eq(st.valid_bytes, valid);
	ck_assert_uint_eq(st.capacity_bytes, cap);
	ck_assert_msg(st.free_bytes + st.gc_floor_bytes + st.valid_bytes +
		      st.reclaimable_bytes == st.capacity_bytes,
		      "free %llu + floor %llu + valid %llu + reclaimable %llu != capacity %llu",
		      (unsigned long long)st.free_bytes,
		      (unsigned long long)st.gc_floor_bytes,
		      (unsigned long long)st.valid_bytes,
		      (unsigned long long)st.reclaimable_bytes,
		      (unsigned long long)st.capacity_bytes);
	uint64_t sum = 0;

	for (int c = 0; c < ZALLOC_NR_CLASSES; c++)
		sum += st.class_bytes_written[c];
	ck_assert_uint_eq(sum, st.device_bytes_written);
}

/* The end of most tests: the allocator's view matches the device's and its
 * counters add up; then free everything. */
static void tdev_check_free(struct tdev *t)
{
	check_sync(t, FIRST, NDATA);
	check_stats(t, FIRST, NDATA);
	tdev_free(t);
}

/* ---- tests --------------------------------------------------------------- */

START_TEST(lease_at_device_wp)
{
	struct tdev t;
	struct zalloc_lease l, l2;

	tdev_std(&t, 4);
	check_sync(&t, FIRST, NDATA);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 10000, &l), 0);
	check_lease(&t, &l);
	ck_assert_uint_eq(l.len, 12288);	/* rounded up to the block size */
	ck_assert_int_eq(l.cls, LIFETIME_SHORT);
	lwrite(&t, &l, l.len);
	zalloc_release(t.za, &l, l.len, 0);
	check_sync(&t, FIRST, NDATA);

	/* the same class continues in the same zone, at the new wp */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l2), 0);
	ck_assert_uint_eq(l2.zone, l.zone);
	ck_assert_uint_eq(l2.offset, l.offset + l.len);
	check_lease(&t, &l2);
	lwrite(&t, &l2, 4096);
	zalloc_release(t.za, &l2, 4096, 0);

	/* a huge want is bounded by the room left in the zone */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 100 * MiB, &l2), 0);
	check_lease(&t, &l2);
	ck_assert_uint_eq(l2.offset + l2.len, dzone(&t, l2.zone).start + ZCAP);
	lwrite(&t, &l2, l2.len);
	zalloc_release(t.za, &l2, l2.len, 0);
	/* the zone is full on the device and in zalloc */
	struct zalloc_zone_info zi;
	ck_assert_int_eq(zalloc_zone_info(t.za, l.zone, &zi), 0);
	ck_assert_int_eq(zi.cond, ZDEV_COND_FULL);
	ck_assert_int_eq(dzone(&t, l.zone).cond, ZDEV_COND_FULL);
	check_sync(&t, FIRST, NDATA);

	/* a lease released unwritten leaves the zone EMPTY and FREE */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, 8192, &l), 0);
	check_lease(&t, &l);
	zalloc_release(t.za, &l, 0, 0);
	ck_assert_int_eq(zalloc_zone_info(t.za, l.zone, &zi), 0);
	ck_assert_int_eq(zi.cond, ZDEV_COND_EMPTY);
	check_sync(&t, FIRST, NDATA);
	check_stats(&t, FIRST, NDATA);

	/* bad arguments */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_NR, 4096, &l), -EINVAL);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 0, &l), -EINVAL);
	ck_assert_int_eq(zalloc_zone_info(t.za, 0, &zi), -EINVAL);
	ck_assert_int_eq(zalloc_zone_info(t.za, NZ, &zi), -EINVAL);
	tdev_free(&t);
}
END_TEST

/* Many acquires across all classes, random sizes, some leases held: classes
 * never share a zone, every lease is at the device wp and writable, and the
 * device never holds more data zones open/active than the budget, while the
 * two "metadata" zones outside the data range stay open all along. */
static const struct { uint32_t maxo, maxa; } cfgs[] = {
	{ MAXO, MAXA }, { MAXO, MAXA_B }, { 0, 0 },
};

static void commit_now(void *arg)
{
	struct zalloc *za = arg;
	uint64_t tk = zalloc_commit_begin(za);

	ck_assert_int_ge(zalloc_commit_end(za, tk), 0);
}

START_TEST(classes_and_budget)
{
	struct tdev t;
	struct zalloc_params p = tparams(FIRST, NDATA, RES, 4);
	uint8_t owner[NZ];
	uint64_t resets_seen[NZ];
	struct zalloc_lease held[3];
	unsigned int nheld = 0;
	uint64_t fallbacks = 0;
	unsigned int seed = 12345 + (unsigned int)_i;
	const uint32_t maxo = cfgs[_i].maxo, maxa = cfgs[_i].maxa;
	const uint32_t obudget = maxo ? maxo - RES : NDATA;
	const uint32_t abudget = maxa ? maxa - RES : NDATA;

	tdev_make(&t, NZ, ZCAP, maxo, maxa);
	tdev_alloc(&t, &p);
	zalloc_set_need_space_cb(t.za, commit_now, t.za);
	memset(owner, 0xff, sizeof(owner));
	memset(resets_seen, 0, sizeof(resets_seen));
	/* the metadata log's two zones are open the whole time */
	ck_assert_int_eq(zdev_write(t.dev, 0, t.buf, BS), BS);
	ck_assert_int_eq(zdev_write(t.dev, ZSZ, t.buf, BS), BS);

	for (int i = 0; i < 400; i++) {
		enum lifetime_class cls = (enum lifetime_class)(rand_r(&seed) % LIFETIME_NR);
		uint64_t want = (1 + rand_r(&seed) % 64) * BS;
		struct zalloc_lease l;
		struct zalloc_stats st;
		uint32_t op, ac;
		int rc;

		/* holding a lease of cls while acquiring for cls with nothing
		 * free would wait for ourselves (documented): give them back */
		zalloc_get_stats(t.za, &st);
		while (st.free_zones == 0 && nheld) {
			nheld--;
			zalloc_release(t.za, &held[nheld], held[nheld].len, 0);
		}
		rc = zalloc_acquire(t.za, cls, want, &l);

		/* The class had no zone left: the room of another class's open
		 * zone (the last resort before ENOSPC), given back unused. */
		if (rc == 0 && l.cls != cls) {
			check_lease(&t, &l);
			zalloc_get_stats(t.za, &st);
			ck_assert_uint_gt(st.class_fallbacks, fallbacks);
			fallbacks = st.class_fallbacks;
			zalloc_release(t.za, &l, 0, 0);
			rc = -ENOSPC;
		}
		if (rc == -ENOSPC) {
			/* everything written: invalidate and reset all FULL zones */
			for (uint32_t z = FIRST; z < NZ; z++) {
				struct zalloc_zone_info zi;

				zalloc_zone_info(t.za, z, &zi);
				if (zi.cond == ZDEV_COND_FULL && zi.valid_bytes)
					zalloc_valid_sub(t.za, (uint64_t)z * ZSZ,
							 zi.valid_bytes);
			}
			uint64_t tk = zalloc_commit_begin(t.za);
			ck_assert_int_gt(zalloc_commit_end(t.za, tk), 0);
			continue;
		}
		ck_assert_int_eq(rc, 0);
		check_lease(&t, &l);
		ck_assert_int_eq(l.cls, cls);
		{
			struct zalloc_zone_info zi;

			zalloc_zone_info(t.za, l.zone, &zi);
			if (zi.resets != resets_seen[l.zone]) {
				resets_seen[l.zone] = zi.resets;
				owner[l.zone] = 0xff;
			}
			if (owner[l.zone] == 0xff)
				owner[l.zone] = (uint8_t)cls;
			ck_assert_msg(owner[l.zone] == cls,
				      "zone %u shared by classes %d and %d",
				      l.zone, owner[l.zone], cls);
		}
		uint64_t n = (1 + rand_r(&seed) % (l.len / BS)) * BS;

		lwrite(&t, &l, n);
		zalloc_valid_add(t.za, l.offset, n);
		dcount(&t, FIRST, NDATA, &op, &ac);
		ck_assert_uint_le(ac, abudget);
		ck_assert_uint_le(op, obudget);
		if (nheld < 3 && rand_r(&seed) % 4 == 0) {
			held[nheld++] = l;
			held[nheld - 1].len = n;	/* remember what we wrote */
		} else {
			zalloc_release(t.za, &l, n, 0);
		}
		if (nheld == 3 || (nheld && rand_r(&seed) % 3 == 0)) {
			nheld--;
			zalloc_release(t.za, &held[nheld], held[nheld].len, 0);
		}
		dcount(&t, FIRST, NDATA, &op, &ac);
		ck_assert_uint_le(ac, abudget);
		/* the metadata zones are still open and writable */
		ck_assert(zdev_zone_open_cond(&(struct zdev_zone){ .cond = dzone(&t, 0).cond }));
	}
	while (nheld) {
		nheld--;
		zalloc_release(t.za, &held[nheld], held[nheld].len, 0);
	}
	ck_assert_int_eq(zdev_write(t.dev, dzone(&t, 0).wp, t.buf, BS), BS);
	ck_assert_int_eq(zdev_write(t.dev, dzone(&t, 1).wp, t.buf, BS), BS);
	struct zalloc_stats st;
	zalloc_get_stats(t.za, &st);
	struct zdev_stats ds;
	zdev_get_stats(t.dev, &ds);
	if (_i == 0)
		ck_assert_uint_gt(st.zone_finishes, 0);	/* active budget hit */
	if (_i == 1)
		ck_assert_uint_gt(ds.closes, 0);	/* open budget hit */
	if (_i == 2)
		ck_assert_uint_eq(st.zone_finishes + ds.closes, 0);
	ck_assert_uint_le(st.active_zones, abudget);
	ck_assert_uint_le(st.open_zones, obudget);
	tdev_check_free(&t);
}
END_TEST

/* With the budget full, a new class finishes the unleased active zone with
 * the least remaining capacity. */
START_TEST(finish_least_remaining)
{
	struct tdev t;
	struct zalloc_lease l[BUDGET], nl;
	const uint64_t wr[BUDGET] = { 64 * KiB, 128 * KiB, 704 * KiB,
					  256 * KiB, 512 * KiB, 32 * KiB };
	uint32_t op, ac;

	tdev_std(&t, 4);
	for (int i = 0; i < BUDGET; i++) {
		ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, ZCAP, &l[i]), 0);
		check_lease(&t, &l[i]);
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(l[i].zone, l[j].zone);
	}
	for (int i = 0; i < BUDGET; i++) {
		lwrite(&t, &l[i], wr[i]);
		zalloc_valid_add(t.za, l[i].offset, wr[i]);
		zalloc_release(t.za, &l[i], wr[i], 0);
	}
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_eq(ac, BUDGET);

	/* SHORT continues in its fullest zone (least room first) */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, BS, &nl), 0);
	ck_assert_uint_eq(nl.zone, l[2].zone);
	zalloc_release(t.za, &nl, 0, 0);

	/* LONG needs a new zone: zone l[2] (64 KiB left) is finished */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, 4 * BS, &nl), 0);
	check_lease(&t, &nl);
	for (int i = 0; i < BUDGET; i++)
		ck_assert_uint_ne(nl.zone, l[i].zone);
	ck_assert_int_eq(dzone(&t, l[2].zone).cond, ZDEV_COND_FULL);
	for (int i = 0; i < BUDGET; i++)
		if (i != 2)
			ck_assert(zdev_zone_active(&(struct zdev_zone){
				.cond = dzone(&t, l[i].zone).cond }));
	lwrite(&t, &nl, nl.len);
	zalloc_release(t.za, &nl, nl.len, 0);
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_eq(ac, BUDGET);

	/* next victim: l[4] (256 KiB left) */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, BS, &nl), 0);
	ck_assert_int_eq(dzone(&t, l[4].zone).cond, ZDEV_COND_FULL);
	zalloc_release(t.za, &nl, 0, 0);

	struct zalloc_stats st;
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.zone_finishes, 2);
	tdev_check_free(&t);
}
END_TEST

/* Device B (8 open / 14 active): when only the open budget binds, the
 * least recently written idle zone is CLOSED, not finished; a class reopens
 * its CLOSED zone; once the active budget binds, the open zone with the
 * least remaining capacity is finished. */
START_TEST(close_when_only_open_binds)
{
	struct tdev t;
	struct zalloc_params p = tparams(FIRST, NDATA, RES, 4);
	struct zalloc_lease s[BUDGET], lg[BUDGET], x;
	const uint64_t wr[BUDGET] = { 64 * KiB, 128 * KiB, 704 * KiB,
				      256 * KiB, 512 * KiB, 32 * KiB };
	const uint64_t wl[BUDGET] = { 96 * KiB, 160 * KiB, 32 * KiB,
				      640 * KiB, 8 * KiB, 300 * KiB };
	struct zdev_stats ds;
	struct zalloc_stats st;
	uint32_t op, ac;

	tdev_make(&t, NZ, ZCAP, MAXO, MAXA_B);
	tdev_alloc(&t, &p);
	for (int i = 0; i < BUDGET; i++)
		ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, ZCAP, &s[i]), 0);
	for (int i = 0; i < BUDGET; i++) {	/* written in order 0..5 */
		lwrite(&t, &s[i], wr[i]);
		zalloc_valid_add(t.za, s[i].offset, wr[i]);
		zalloc_release(t.za, &s[i], wr[i], 0);
	}
	/* six LONG leases held at once: each closes one SHORT zone, least
	 * recently written first */
	for (int i = 0; i < BUDGET; i++) {
		ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, ZCAP, &lg[i]), 0);
		check_lease(&t, &lg[i]);
		ck_assert_int_eq(dzone(&t, s[i].zone).cond, ZDEV_COND_CLOSED);
		if (i + 1 < BUDGET)
			ck_assert_int_eq(dzone(&t, s[i + 1].zone).cond,
					 ZDEV_COND_IMP_OPEN);
	}
	for (int i = 0; i < BUDGET; i++) {
		lwrite(&t, &lg[i], wl[i]);
		zalloc_valid_add(t.za, lg[i].offset, wl[i]);
		zalloc_release(t.za, &lg[i], wl[i], 0);
	}
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.zone_finishes, 0);
	ck_assert_uint_eq(st.active_zones, 2 * BUDGET);
	ck_assert_uint_eq(st.open_zones, BUDGET);
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_eq(op, BUDGET);
	ck_assert_uint_eq(ac, 2 * BUDGET);

	/* SHORT: reopens its CLOSED zone with the least room (s[2]) after
	 * closing the least recently written LONG zone (lg[0]) */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, BS, &x), 0);
	ck_assert_uint_eq(x.zone, s[2].zone);
	check_lease(&t, &x);
	ck_assert_int_eq(dzone(&t, lg[0].zone).cond, ZDEV_COND_CLOSED);
	lwrite(&t, &x, BS);
	zalloc_valid_add(t.za, x.offset, BS);
	zalloc_release(t.za, &x, BS, 0);
	ck_assert_int_eq(dzone(&t, s[2].zone).cond, ZDEV_COND_IMP_OPEN);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.zone_finishes, 0);

	/* EXTREME needs a new zone with 12 active: the open zone with the least
	 * remaining capacity is finished: s[2] (60 KiB left), then lg[3]
	 * (128 KiB left); the CLOSED SHORT zones (less room) would not free
	 * an open slot */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, BS, &x), 0);
	check_lease(&t, &x);
	ck_assert_int_eq(dzone(&t, s[2].zone).cond, ZDEV_COND_FULL);
	lwrite(&t, &x, BS);
	zalloc_release(t.za, &x, BS, 0);
	/* and next lg[3] */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_NONE, BS, &x), 0);
	ck_assert_int_eq(dzone(&t, lg[3].zone).cond, ZDEV_COND_FULL);
	lwrite(&t, &x, BS);
	zalloc_release(t.za, &x, BS, 0);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.zone_finishes, 2);
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_le(op, BUDGET);
	ck_assert_uint_le(ac, MAXA_B - RES);
	zdev_get_stats(t.dev, &ds);
	ck_assert_uint_eq(ds.finishes, 2);
	tdev_check_free(&t);
}
END_TEST

/* Mount with CLOSED partially written zones (device B): all are kept while
 * within the active budget and reopened by writers of their class without
 * ever exceeding the open budget; beyond the active budget the ones with
 * least remaining capacity are finished. */
START_TEST(mount_closed_zones)
{
	struct tdev t;
	struct zalloc_params p = tparams(FIRST, NDATA, RES, 4);
	const int nc = 10;
	uint64_t wr[10];
	uint32_t op, ac;

	tdev_make(&t, NZ, ZCAP, MAXO, MAXA_B);
	for (int i = 0; i < nc; i++) {
		uint32_t z = FIRST + 3 + (uint32_t)i;

		wr[i] = (uint64_t)(i + 1) * 64 * KiB;	/* zone i+1 fuller */
		ck_assert_int_eq(zdev_write(t.dev, (uint64_t)z * ZSZ, t.buf, wr[i]),
				 (ssize_t)wr[i]);
		ck_assert_int_eq(zdev_zone_close(t.dev, z), 0);
	}
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_eq(op, 0);
	ck_assert_uint_eq(ac, (uint32_t)nc);

	/* active budget 8: the two fullest zones get finished */
	p.reserved_active = MAXA_B - 8;
	ck_assert_int_eq(zalloc_create(t.dev, &p, &t.za), 0);
	for (int i = 0; i < nc; i++) {
		uint32_t z = FIRST + 3 + (uint32_t)i;

		zalloc_valid_add(t.za, (uint64_t)z * ZSZ, BS);
		zalloc_zone_adopt(t.za, z, (enum lifetime_class)(i % 2 ? LIFETIME_LONG
								    : LIFETIME_SHORT));
	}
	ck_assert_int_eq(zalloc_mount_done(t.za), 0);
	ck_assert_int_eq(dzone(&t, FIRST + 3 + 9).cond, ZDEV_COND_FULL);
	ck_assert_int_eq(dzone(&t, FIRST + 3 + 8).cond, ZDEV_COND_FULL);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(dzone(&t, FIRST + 3 + (uint32_t)i).cond,
				 ZDEV_COND_CLOSED);
	check_sync(&t, FIRST, NDATA);

	/* a third class with 8 active, 0 open: the active budget binds, so the
	 * zone with the least remaining (i = 7) is finished, not a 9th opened */
	{
		struct zalloc_lease l;

		ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, BS, &l), 0);
		check_lease(&t, &l);
		ck_assert_int_eq(dzone(&t, FIRST + 3 + 7).cond, ZDEV_COND_FULL);
		lwrite(&t, &l, BS);
		zalloc_valid_add(t.za, l.offset, BS);
		zalloc_release(t.za, &l, BS, 0);
		dcount(&t, FIRST, NDATA, &op, &ac);
		ck_assert_uint_eq(op, 1);
		ck_assert_uint_eq(ac, 8);
	}

	/* writers of both classes: leases reopen the CLOSED zones (fullest
	 * first); the device never has more than 6 data zones open */
	for (int k = 0; k < 60; k++) {
		struct zalloc_lease l;
		enum lifetime_class c = k % 2 ? LIFETIME_LONG : LIFETIME_SHORT;
		struct zalloc_zone_info zi;

		ck_assert_int_eq(zalloc_acquire(t.za, c, 128 * KiB, &l), 0);
		check_lease(&t, &l);
		zalloc_zone_info(t.za, l.zone, &zi);
		ck_assert_int_eq(zi.cls, c);
		lwrite(&t, &l, l.len);
		zalloc_valid_add(t.za, l.offset, l.len);
		zalloc_release(t.za, &l, l.len, 0);
		dcount(&t, FIRST, NDATA, &op, &ac);
		ck_assert_uint_le(op, BUDGET);
		ck_assert_uint_le(ac, 8);
	}
	tdev_check_free(&t);
}
END_TEST

struct waiter {
	struct zalloc *za;
	enum lifetime_class cls;
	struct zalloc_lease l;
	int rc;
	volatile int done;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->rc = zalloc_acquire(w->za, w->cls, 16 * KiB, &w->l);
	__atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void wait_for_waiters(struct zalloc *za, unsigned int n)
{
	for (int i = 0; i < 2000 && zalloc_waiters(za) < n; i++)
		usleep(1000);
	ck_assert_uint_eq(zalloc_waiters(za), n);
}

/* All usable zones leased: acquire blocks, and wakes on a release. */
START_TEST(acquire_blocks_until_release)
{
	struct tdev t;
	struct zalloc_lease l[BUDGET];
	struct waiter w1 = { 0 }, w2 = { 0 };
	pthread_t th1, th2;

	tdev_std(&t, 4);
	for (int i = 0; i < BUDGET; i++) {
		ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l[i]), 0);
		lwrite(&t, &l[i], BS);
	}
	/* same class: will get a leased zone back */
	w1.za = t.za;
	w1.cls = LIFETIME_SHORT;
	ck_assert_int_eq(pthread_create(&th1, NULL, waiter_main, &w1), 0);
	wait_for_waiters(t.za, 1);
	ck_assert(!__atomic_load_n(&w1.done, __ATOMIC_SEQ_CST));

	zalloc_release(t.za, &l[3], BS, 0);
	pthread_join(th1, NULL);
	ck_assert_int_eq(w1.rc, 0);
	ck_assert_uint_eq(w1.l.zone, l[3].zone);
	check_lease(&t, &w1.l);
	ck_assert_uint_eq(w1.l.offset, l[3].offset + BS);
	lwrite(&t, &w1.l, BS);
	l[3] = w1.l;

	/* other class: the released zone gets finished, a new one opened */
	w2.za = t.za;
	w2.cls = LIFETIME_LONG;
	ck_assert_int_eq(pthread_create(&th2, NULL, waiter_main, &w2), 0);
	wait_for_waiters(t.za, 1);
	ck_assert(!__atomic_load_n(&w2.done, __ATOMIC_SEQ_CST));
	zalloc_release(t.za, &l[0], BS, 0);
	pthread_join(th2, NULL);
	ck_assert_int_eq(w2.rc, 0);
	check_lease(&t, &w2.l);
	ck_assert_int_eq(dzone(&t, l[0].zone).cond, ZDEV_COND_FULL);
	lwrite(&t, &w2.l, BS);
	zalloc_release(t.za, &w2.l, BS, 0);
	for (int i = 1; i < BUDGET; i++)
		zalloc_release(t.za, &l[i], BS, 0);
	uint32_t op, ac;
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_le(ac, BUDGET);
	tdev_check_free(&t);
}
END_TEST

/* Fill every data zone with valid data (returns the number of zones). */
static int fill_all_valid(struct tdev *t, enum lifetime_class cls)
{
	struct zalloc_lease l;
	int n = 0, rc;

	while ((rc = zalloc_acquire(t->za, cls, ZCAP, &l)) == 0) {
		check_lease(t, &l);
		lwrite(t, &l, l.len);
		zalloc_valid_add(t->za, l.offset, l.len);
		zalloc_release(t->za, &l, l.len, 0);
		n++;
	}
	ck_assert_int_eq(rc, -ENOSPC);
	return n;
}

static int commits_by_cb;
static void commit_cb(void *arg)
{
	struct zalloc *za = arg;
	uint64_t tk = zalloc_commit_begin(za);

	ck_assert_int_ge(zalloc_commit_end(za, tk), 0);
	commits_by_cb++;
}

START_TEST(enospc_when_full)
{
	struct tdev t;
	struct zalloc_stats st;
	struct zalloc_lease l;

	tdev_std(&t, 4);
	ck_assert_int_eq(fill_all_valid(&t, LIFETIME_MEDIUM), NDATA);
	for (uint32_t z = FIRST; z < NZ; z++)
		ck_assert_int_eq(dzone(&t, z).cond, ZDEV_COND_FULL);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.free_bytes, 0);
	ck_assert_uint_eq(st.free_zones, 0);
	ck_assert_uint_eq(st.valid_bytes, (uint64_t)NDATA * ZCAP);
	ck_assert_uint_eq(st.reclaimable_bytes, 0);
	check_stats(&t, FIRST, NDATA);
	for (int c = 0; c < LIFETIME_NR; c++)
		ck_assert_int_eq(zalloc_acquire(t.za, (enum lifetime_class)c, BS, &l), -ENOSPC);

	/* invalidate one zone: now a commit can help, so acquire waits and
	 * the need-space callback commits, which resets the zone */
	zalloc_valid_sub(t.za, (uint64_t)(FIRST + 7) * ZSZ, ZCAP);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 1);
	zalloc_set_need_space_cb(t.za, commit_cb, t.za);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, BS, &l), 0);
	ck_assert_int_eq(commits_by_cb, 1);
	ck_assert_uint_eq(l.zone, FIRST + 7);
	check_lease(&t, &l);
	lwrite(&t, &l, BS);
	zalloc_release(t.za, &l, BS, 0);
	tdev_check_free(&t);
}
END_TEST

/* Four zones, no FREE one left: three full of LONG data, the fourth a
 * SHORT zone with 64 KiB written and valid through *h, still leased. */
static void four_zones_three_full(struct tdev *t, const struct zalloc_params *p,
				  struct zalloc_lease *h)
{
	struct zalloc_lease l;

	tdev_make(t, 4, ZCAP, 0, 0);
	tdev_alloc(t, p);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(zalloc_acquire(t->za, LIFETIME_LONG, ZCAP, &l), 0);
		lwrite(t, &l, l.len);
		zalloc_valid_add(t->za, l.offset, l.len);
		zalloc_release(t->za, &l, l.len, 0);
	}
	ck_assert_int_eq(zalloc_acquire(t->za, LIFETIME_SHORT, 64 * KiB, h), 0);
	lwrite(t, h, h->len);
	zalloc_valid_add(t->za, h->offset, h->len);
}

/* No FREE zone, nothing pending: a class whose zone is leased waits for it
 * (the lease may come back with room), any other class gets -ENOSPC. */
START_TEST(full_device_waits_for_own_class)
{
	struct tdev t;
	struct zalloc_params p = tparams(0, 4, 0, 1);
	struct zalloc_lease l, h;
	struct waiter w = { 0 };
	pthread_t th;

	four_zones_three_full(&t, &p, &h);
	w.za = t.za;
	w.cls = LIFETIME_SHORT;
	ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
	wait_for_waiters(t.za, 1);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, BS, &l), -ENOSPC);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, BS, &l), -ENOSPC);
	ck_assert(!__atomic_load_n(&w.done, __ATOMIC_SEQ_CST));
	zalloc_release(t.za, &h, h.len, 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.rc, 0);
	ck_assert_uint_eq(w.l.zone, h.zone);
	ck_assert_uint_eq(w.l.offset, h.offset + h.len);
	check_lease(&t, &w.l);
	zalloc_release(t.za, &w.l, 0, 0);
	check_sync(&t, 0, 4);
	check_stats(&t, 0, 4);
	tdev_free(&t);
}
END_TEST


/* No FREE zone and nothing to wait for, but another class's open zone has
 * room (which free_bytes counts, so writes were admitted against it): a
 * lease goes there rather than -ENOSPC; a leased one is not taken. */
START_TEST(full_device_uses_other_class_room)
{
	struct tdev t;
	struct zalloc_params p = tparams(0, 4, 0, 1);
	struct zalloc_lease l, h;
	struct zalloc_stats st;

	four_zones_three_full(&t, &p, &h);
	zalloc_release(t.za, &h, h.len, 0);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, BS, &l), 0);
	ck_assert_uint_eq(l.zone, h.zone);
	ck_assert_uint_eq(l.offset, h.offset + h.len);
	ck_assert_uint_eq(l.cls, LIFETIME_SHORT);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.class_fallbacks, 1);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, BS, &h), -ENOSPC);	/* leased */
	lwrite(&t, &l, BS);
	zalloc_valid_add(t.za, l.offset, BS);
	zalloc_release(t.za, &l, BS, 0);
	check_sync(&t, 0, 4);
	check_stats(&t, 0, 4);
	tdev_free(&t);
}
END_TEST

/* Reset only after commit_end for a ticket taken after the invalidation. */
START_TEST(reset_after_commit)
{
	struct tdev t;
	struct zalloc_lease l, o;
	struct zalloc_zone_info zi;
	struct zalloc_stats st;
	uint32_t zf, zo;

	tdev_std(&t, 4);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, ZCAP, &l), 0);
	zf = l.zone;
	lwrite(&t, &l, l.len);
	zalloc_valid_add(t.za, l.offset, ZCAP);
	zalloc_release(t.za, &l, l.len, 0);
	zalloc_valid_sub(t.za, l.offset + 100 * KiB, 100 * KiB);
	ck_assert_int_eq(dzone(&t, zf).cond, ZDEV_COND_FULL);
	/* an open zone whose data is all invalidated is NOT reset */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, 64 * KiB, &o), 0);
	zo = o.zone;
	lwrite(&t, &o, o.len);
	zalloc_valid_add(t.za, o.offset, o.len);
	zalloc_release(t.za, &o, o.len, 0);
	zalloc_valid_sub(t.za, o.offset, o.len);

	uint64_t before = zalloc_commit_begin(t.za);	/* commit in flight */
	zalloc_valid_sub(t.za, (uint64_t)zf * ZSZ, 100 * KiB);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 0);	/* still 568 KiB valid */
	zalloc_valid_sub(t.za, (uint64_t)zf * ZSZ + 200 * KiB, ZCAP - 200 * KiB);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 1);
	/* the commit that began before the invalidation ends: no reset */
	ck_assert_int_eq(zalloc_commit_end(t.za, before), 0);
	ck_assert_int_eq(dzone(&t, zf).cond, ZDEV_COND_FULL);
	ck_assert_int_eq(zalloc_zone_info(t.za, zf, &zi), 0);
	ck_assert_uint_eq(zi.resets, 0);
	ck_assert_int_eq(zi.cond, ZDEV_COND_FULL);
	/* ticket not issued yet */
	ck_assert_int_eq(zalloc_commit_end(t.za, before + 1), -EINVAL);

	uint64_t after = zalloc_commit_begin(t.za);
	ck_assert_uint_gt(after, before);
	ck_assert_int_eq(zalloc_commit_end(t.za, after), 1);
	ck_assert_int_eq(dzone(&t, zf).cond, ZDEV_COND_EMPTY);
	ck_assert_int_eq(zalloc_zone_info(t.za, zf, &zi), 0);
	ck_assert_uint_eq(zi.resets, 1);
	ck_assert_int_eq(zi.cond, ZDEV_COND_EMPTY);
	ck_assert_uint_eq(zi.valid_bytes, 0);
	/* the open zone was left alone and is still written at its wp */
	ck_assert(dzone(&t, zo).cond != ZDEV_COND_EMPTY);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, BS, &o), 0);
	ck_assert_uint_eq(o.zone, zo);
	check_lease(&t, &o);
	zalloc_release(t.za, &o, 0, 0);

	/* a re-reference before the commit cancels the queued reset */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, ZCAP, &l), 0);
	lwrite(&t, &l, l.len);
	zalloc_valid_add(t.za, l.offset, l.len);
	zalloc_release(t.za, &l, l.len, 0);
	zalloc_valid_sub(t.za, l.offset, l.len);
	zalloc_valid_add(t.za, l.offset, BS);
	after = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, after), 0);
	ck_assert_int_eq(dzone(&t, l.zone).cond, ZDEV_COND_FULL);

	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.zone_resets, 1);
	ck_assert_uint_eq(st.pending_resets, 0);
	tdev_check_free(&t);
}
END_TEST

/* A caller that accounts a lease's bytes only after releasing it (the fs
 * core does): bytes not claimed yet keep their zone from being reset, even
 * when a later lease of the same zone is claimed and dropped first. */
START_TEST(unclaimed_bytes_pin_zone)
{
	struct tdev t;
	struct zalloc_lease a, b;
	struct zalloc_stats st;
	uint64_t tk;

	tdev_std(&t, 4);
	/* A writes 256 KiB and releases before claiming */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 256 * KiB, &a), 0);
	lwrite(&t, &a, a.len);
	zalloc_release(t.za, &a, a.len, 0);
	/* B fills the rest of the zone, claims, and its data dies at once */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, ZCAP, &b), 0);
	ck_assert_uint_eq(b.zone, a.zone);
	ck_assert_uint_eq(b.offset, a.offset + a.len);
	lwrite(&t, &b, b.len);
	zalloc_release(t.za, &b, b.len, 0);
	zalloc_valid_add(t.za, b.offset, b.len);
	ck_assert_int_eq(dzone(&t, a.zone).cond, ZDEV_COND_FULL);
	zalloc_valid_sub(t.za, b.offset, b.len);
	/* zone FULL, no valid byte, but A's bytes are unclaimed: no reset */
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 0);
	tk = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, tk), 0);
	ck_assert_int_eq(dzone(&t, a.zone).cond, ZDEV_COND_FULL);
	/* A claims in pieces, the middle one first (its range is split) */
	zalloc_valid_add(t.za, a.offset + 64 * KiB, 64 * KiB);
	zalloc_valid_sub(t.za, a.offset + 64 * KiB, 64 * KiB);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 0);	/* two pieces left */
	zalloc_valid_add(t.za, a.offset, 64 * KiB);
	zalloc_valid_sub(t.za, a.offset, 64 * KiB);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 0);	/* one piece left */
	zalloc_valid_add(t.za, a.offset + 128 * KiB, 128 * KiB);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 0);	/* valid */
	zalloc_valid_sub(t.za, a.offset + 128 * KiB, 128 * KiB);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 1);
	tk = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, tk), 1);
	ck_assert_int_eq(dzone(&t, a.zone).cond, ZDEV_COND_EMPTY);

	/* a lease written only in part: the unwritten rest pins nothing */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, ZCAP, &a), 0);
	lwrite(&t, &a, 128 * KiB);
	zalloc_release(t.za, &a, 128 * KiB, 0);
	zalloc_valid_add(t.za, a.offset, 128 * KiB);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, ZCAP, &b), 0);
	ck_assert_uint_eq(b.zone, a.zone);
	lwrite(&t, &b, b.len);
	zalloc_valid_add(t.za, b.offset, b.len);	/* before release */
	zalloc_release(t.za, &b, b.len, 0);
	zalloc_valid_sub(t.za, a.offset, ZCAP);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 1);
	/* a failed lease's bytes pin nothing either */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, 64 * KiB, &a), 0);
	ck_assert_int_eq(zdev_write(t.dev, a.offset, t.buf, 2 * BS), 2 * BS);
	zalloc_release(t.za, &a, 0, -EIO);	/* 2 blocks of garbage */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, ZCAP, &b), 0);
	ck_assert_uint_eq(b.offset, a.offset + 2 * BS);
	lwrite(&t, &b, b.len);
	zalloc_valid_add(t.za, b.offset, b.len);
	zalloc_release(t.za, &b, b.len, 0);
	zalloc_valid_sub(t.za, b.offset, b.len);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 2);
	tk = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, tk), 2);
	tdev_check_free(&t);
}
END_TEST

struct late_committer {
	struct zalloc *za;
	useconds_t delay_us;
};

static void *late_commit_main(void *arg)
{
	struct late_committer *c = arg;
	uint64_t tk;

	usleep(c->delay_us);
	tk = zalloc_commit_begin(c->za);
	zalloc_commit_end(c->za, tk);
	return NULL;
}

/* Only a commit can help: acquire waits for one, but gives up with -ENOSPC
 * when none begins within the grace period (the caller may be the
 * committer), leaving the zone queued for the caller's own commit. */
START_TEST(commit_only_wait_is_bounded)
{
	struct tdev t;
	struct zalloc_lease l;
	struct zalloc_stats st;
	struct late_committer c;
	pthread_t th;
	uint64_t t0, dt;

	tdev_std(&t, 4);
	ck_assert_int_eq(fill_all_valid(&t, LIFETIME_MEDIUM), NDATA);
	zalloc_valid_sub(t.za, (uint64_t)(FIRST + 3) * ZSZ, ZCAP);
	zalloc_valid_sub(t.za, (uint64_t)(FIRST + 9) * ZSZ, ZCAP);

	t0 = zf_now_ns();
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, BS, &l), -ENOSPC);
	dt = zf_now_ns() - t0;
	ck_assert_uint_ge(dt, ZALLOC_COMMIT_GRACE_NS * 9 / 10);
	ck_assert_uint_lt(dt, ZALLOC_COMMIT_GRACE_NS * 4);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 2);

	/* someone commits after 20 ms (well inside the grace period, even on
	 * a loaded machine): the waiter gets the reset zone */
	c.za = t.za;
	c.delay_us = 20000;
	ck_assert_int_eq(pthread_create(&th, NULL, late_commit_main, &c), 0);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, BS, &l), 0);
	pthread_join(th, NULL);
	ck_assert(l.zone == FIRST + 3 || l.zone == FIRST + 9);
	check_lease(&t, &l);
	zalloc_release(t.za, &l, 0, 0);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 0);
	ck_assert_uint_eq(st.free_zones, 2);
	tdev_check_free(&t);
}
END_TEST

static uint64_t nothing_buffered(void *arg)
{
	(void)arg;
	return 0;
}

/* Writers admitted before any of them buffers: each admission holds its
 * bytes until zalloc_room_done(), so together they are never let in for
 * more than the free bytes (else each would pass alone, and the write-out
 * of what they buffered would fail with ENOSPC later). */
START_TEST(room_admissions_add_up)
{
	struct tdev t;
	struct zalloc_stats st;

	tdev_std(&t, 4);
	zalloc_get_stats(t.za, &st);
	const uint64_t f = st.free_bytes;
	ck_assert_uint_gt(f, 4 * BS);
	struct zalloc_room a = { .bytes = f / 2 + BS, .buffered = nothing_buffered };
	struct zalloc_room b = { .bytes = f / 2, .buffered = nothing_buffered };
	struct zalloc_room rest = { .bytes = f - a.bytes, .buffered = nothing_buffered };
	struct zalloc_room all = { .bytes = f, .buffered = nothing_buffered };

	ck_assert_int_eq(zalloc_wait_room(t.za, &a), 0);
	ck_assert_int_eq(zalloc_wait_room(t.za, &b), -ENOSPC);	/* a is held */
	ck_assert_int_eq(zalloc_wait_room(t.za, &rest), 0);	/* exactly what is left */
	ck_assert_int_eq(zalloc_wait_room(t.za, &all), -ENOSPC);
	zalloc_room_done(t.za, a.bytes);
	ck_assert_int_eq(zalloc_wait_room(t.za, &b), 0);
	zalloc_room_done(t.za, b.bytes);
	zalloc_room_done(t.za, rest.bytes);
	ck_assert_int_eq(zalloc_wait_room(t.za, &all), 0);	/* nothing held */
	zalloc_room_done(t.za, all.bytes);
	tdev_free(&t);
}
END_TEST

/* Reset failure: the zone stays queued and is reset by a later commit. */
START_TEST(reset_failure_retried)
{
	struct tdev t;
	struct zalloc_lease l;
	struct zalloc_stats st;

	tdev_std(&t, 4);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, ZCAP, &l), 0);
	lwrite(&t, &l, l.len);
	zalloc_valid_add(t.za, l.offset, l.len);
	zalloc_release(t.za, &l, l.len, 0);
	zalloc_valid_sub(t.za, l.offset, l.len);	/* queued */
	ck_assert_int_eq(zdev_emu_inject_fault(t.dev, ZDEV_FAULT_RESET, 0, 1, -EIO), 0);
	uint64_t tk = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, tk), -EIO);
	ck_assert_int_eq(dzone(&t, l.zone).cond, ZDEV_COND_FULL);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 1);
	tk = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, tk), 1);
	ck_assert_int_eq(dzone(&t, l.zone).cond, ZDEV_COND_EMPTY);
	tdev_check_free(&t);
}
END_TEST

/* Mount: unreferenced zones are reset, partially written zones with valid
 * data are adopted with their class and written on at their wp. */
START_TEST(mount_resets_and_adopts)
{
	struct tdev t;
	struct zalloc_params p = tparams(FIRST, NDATA, RES, 4);
	struct zalloc_lease a, b, c, d;
	struct zalloc_zone_info zi;
	int rc;

	tdev_make(&t, NZ, ZCAP, MAXO, MAXA);
	tdev_alloc(&t, &p);
	/* a: FULL, referenced; b: partial, referenced; c: partial, not;
	 * d: FULL, not referenced */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, ZCAP, &a), 0);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, ZCAP, &b), 0);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, ZCAP, &c), 0);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, ZCAP, &d), 0);
	lwrite(&t, &a, ZCAP);
	lwrite(&t, &b, 96 * KiB);
	lwrite(&t, &c, 32 * KiB);
	lwrite(&t, &d, ZCAP);
	zalloc_release(t.za, &a, ZCAP, 0);
	zalloc_release(t.za, &b, 96 * KiB, 0);
	zalloc_release(t.za, &c, 32 * KiB, 0);
	zalloc_release(t.za, &d, ZCAP, 0);
	zalloc_destroy(t.za);
	t.za = NULL;
	zdev_close(t.dev);
	ck_assert_int_eq(zdev_open(t.path, NULL, &t.dev), 0);

	ck_assert_int_eq(zalloc_create(t.dev, &p, &t.za), 0);
	/* replay */
	zalloc_valid_add(t.za, a.offset, 500 * KiB);
	zalloc_zone_adopt(t.za, a.zone, LIFETIME_EXTREME);
	zalloc_valid_add(t.za, b.offset, 64 * KiB);
	zalloc_zone_adopt(t.za, b.zone, LIFETIME_LONG);
	zalloc_zone_adopt(t.za, b.zone, LIFETIME_SHORT);	/* first wins */
	rc = zalloc_mount_done(t.za);
	ck_assert_int_eq(rc, 2);
	ck_assert_int_eq(zalloc_mount_done(t.za), -EALREADY);
	ck_assert_int_eq(dzone(&t, c.zone).cond, ZDEV_COND_EMPTY);
	ck_assert_int_eq(dzone(&t, d.zone).cond, ZDEV_COND_EMPTY);
	ck_assert_int_eq(dzone(&t, a.zone).cond, ZDEV_COND_FULL);
	ck_assert(zdev_zone_active(&(struct zdev_zone){ .cond = dzone(&t, b.zone).cond }));
	ck_assert_int_eq(zalloc_zone_info(t.za, b.zone, &zi), 0);
	ck_assert_int_eq(zi.cls, LIFETIME_LONG);
	ck_assert_uint_eq(zi.valid_bytes, 64 * KiB);
	ck_assert_uint_eq(zi.wp, b.offset + 96 * KiB);
	ck_assert_int_eq(zalloc_zone_info(t.za, c.zone, &zi), 0);
	ck_assert_uint_eq(zi.resets, 1);
	check_sync(&t, FIRST, NDATA);
	check_stats(&t, FIRST, NDATA);

	/* LONG continues in the adopted zone, at the device wp */
	struct zalloc_lease n;
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, 8 * KiB, &n), 0);
	ck_assert_uint_eq(n.zone, b.zone);
	check_lease(&t, &n);
	lwrite(&t, &n, n.len);
	zalloc_release(t.za, &n, n.len, 0);
	tdev_free(&t);
}
END_TEST

/* Mount with more partially written zones than the (new) budget: the ones
 * with least remaining capacity are finished. */
START_TEST(mount_finishes_beyond_budget)
{
	struct tdev t;
	struct zalloc_params p = tparams(FIRST, NDATA, RES, 4);
	struct zalloc_lease l[BUDGET];
	const uint64_t wr[BUDGET] = { 64 * KiB, 600 * KiB, 128 * KiB,
					  256 * KiB, 700 * KiB, 32 * KiB };
	uint32_t op, ac;

	tdev_make(&t, NZ, ZCAP, MAXO, MAXA);
	tdev_alloc(&t, &p);
	for (int i = 0; i < BUDGET; i++)
		ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_MEDIUM, ZCAP, &l[i]), 0);
	for (int i = 0; i < BUDGET; i++) {
		lwrite(&t, &l[i], wr[i]);
		zalloc_release(t.za, &l[i], wr[i], 0);
	}
	zalloc_destroy(t.za);
	t.za = NULL;

	p.reserved_active = 4;	/* budget 4 now */
	ck_assert_int_eq(zalloc_create(t.dev, &p, &t.za), 0);
	for (int i = 0; i < BUDGET; i++)
		zalloc_valid_add(t.za, l[i].offset, BS);
	ck_assert_int_eq(zalloc_mount_done(t.za), 0);
	ck_assert_int_eq(dzone(&t, l[4].zone).cond, ZDEV_COND_FULL);
	ck_assert_int_eq(dzone(&t, l[1].zone).cond, ZDEV_COND_FULL);
	for (int i = 0; i < BUDGET; i++) {
		struct zalloc_zone_info zi;

		zalloc_zone_info(t.za, l[i].zone, &zi);
		ck_assert_int_eq(zi.cls, LIFETIME_MEDIUM);	/* default */
		if (i != 1 && i != 4)
			ck_assert(zdev_zone_active(&(struct zdev_zone){
				.cond = dzone(&t, l[i].zone).cond }));
	}
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_eq(ac, 4);
	struct zalloc_stats st;
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.active_zones, 4);
	ck_assert_uint_eq(st.max_active_data, 4);
	tdev_check_free(&t);
}
END_TEST

/* Release with an error re-reads the zone: bytes written behind zalloc's
 * back are accepted (as garbage) and the next lease starts at the real wp. */
START_TEST(release_error_resyncs)
{
	struct tdev t;
	struct zalloc_lease l, n;
	struct zalloc_stats st0, st;

	tdev_std(&t, 4);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l), 0);
	lwrite(&t, &l, 16 * KiB);
	zalloc_valid_add(t.za, l.offset, 16 * KiB);
	zalloc_release(t.za, &l, 16 * KiB, 0);
	zalloc_get_stats(t.za, &st0);

	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l), 0);
	check_lease(&t, &l);
	/* a write that "failed" but left 3 blocks on the device */
	ck_assert_int_eq(zdev_write(t.dev, l.offset, t.buf, 3 * BS), 3 * BS);
	zalloc_release(t.za, &l, 0, -EIO);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &n), 0);
	ck_assert_uint_eq(n.zone, l.zone);
	ck_assert_uint_eq(n.offset, l.offset + 3 * BS);
	check_lease(&t, &n);
	lwrite(&t, &n, BS);
	zalloc_valid_add(t.za, n.offset, BS);
	zalloc_release(t.za, &n, BS, 0);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.reclaimable_bytes, st0.reclaimable_bytes + 3 * BS);
	check_sync(&t, FIRST, NDATA);
	check_stats(&t, FIRST, NDATA);

	/* a write that really failed (injected): wp unchanged, zone usable */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l), 0);
	ck_assert_int_eq(zdev_emu_inject_fault(t.dev, ZDEV_FAULT_WRITE, 0, 1, -EIO), 0);
	ck_assert_int_lt(zdev_write(t.dev, l.offset, t.buf, 2 * BS), 0);
	zalloc_release(t.za, &l, 0, -EIO);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &n), 0);
	ck_assert_uint_eq(n.zone, l.zone);
	ck_assert_uint_eq(n.offset, l.offset);
	lwrite(&t, &n, n.len);
	zalloc_release(t.za, &n, n.len, 0);

	/* caller claims more than reached the device: device wins */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l), 0);
	lwrite(&t, &l, BS);
	zalloc_release(t.za, &l, 4 * BS, -EIO);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &n), 0);
	ck_assert_uint_eq(n.offset, l.offset + BS);
	check_lease(&t, &n);
	zalloc_release(t.za, &n, 0, 0);

	/* a lease of a fresh zone that failed without writing: back to FREE */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, 64 * KiB, &l), 0);
	zalloc_release(t.za, &l, 0, -EIO);
	struct zalloc_zone_info zi;
	zalloc_zone_info(t.za, l.zone, &zi);
	ck_assert_int_eq(zi.cond, ZDEV_COND_EMPTY);
	tdev_check_free(&t);
}
END_TEST

START_TEST(stripe_width_budget)
{
	struct tdev t;
	struct zalloc_lease l[8];
	uint32_t op, ac;
	unsigned int w;
	int n;

	tdev_std(&t, 4);
	ck_assert_uint_eq(zalloc_stripe_width(t.za, LIFETIME_SHORT), 4);	/* min(4, 6/1) */
	n = zalloc_acquire_many(t.za, LIFETIME_SHORT, 64 * KiB, 4, l);
	ck_assert_int_eq(n, 4);
	for (int i = 0; i < n; i++) {
		check_lease(&t, &l[i]);
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(l[i].zone, l[j].zone);
		lwrite(&t, &l[i], BS);
	}
	/* two classes busy: 6 / 2 = 3 */
	w = zalloc_stripe_width(t.za, LIFETIME_LONG);
	ck_assert_uint_eq(w, 3);
	/* only 2 slots left: the extras never exceed the budget */
	n = zalloc_acquire_many(t.za, LIFETIME_LONG, 64 * KiB, w, &l[4]);
	ck_assert_int_eq(n, 2);
	for (int i = 4; i < 6; i++) {
		check_lease(&t, &l[i]);
		lwrite(&t, &l[i], BS);
	}
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_le(ac, BUDGET);
	ck_assert_uint_eq(zalloc_stripe_width(t.za, LIFETIME_MEDIUM), 2);	/* 6/3 */
	for (int i = 0; i < 6; i++)
		zalloc_release(t.za, &l[i], BS, 0);
	ck_assert_uint_eq(zalloc_stripe_width(t.za, LIFETIME_NONE), 2);
	/* every class writing: 6/5 = 1 */
	for (int c = 0; c < LIFETIME_NR; c++) {
		struct zalloc_lease x;

		ck_assert_int_eq(zalloc_acquire(t.za, (enum lifetime_class)c, BS, &x), 0);
		lwrite(&t, &x, BS);
		zalloc_release(t.za, &x, BS, 0);
	}
	ck_assert_uint_eq(zalloc_stripe_width(t.za, LIFETIME_SHORT), 1);
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_le(ac, BUDGET);
	tdev_check_free(&t);
}
END_TEST

/* A device without limits: no finishing, stripe width is the maximum, many
 * concurrent leases never block. */
START_TEST(unlimited_device)
{
	struct tdev t;
	struct zalloc_params p = tparams(0, 16, 2, 6);
	struct zalloc_lease l[16];
	struct zalloc_stats st;

	tdev_make(&t, 16, 0, 0, 0);
	tdev_alloc(&t, &p);
	ck_assert_uint_eq(zalloc_stripe_width(t.za, LIFETIME_SHORT), 6);
	for (int i = 0; i < 16; i++) {
		ck_assert_int_eq(zalloc_acquire(t.za, (enum lifetime_class)(i % LIFETIME_NR),
						 128 * KiB, &l[i]), 0);
		check_lease(&t, &l[i]);
		lwrite(&t, &l[i], BS);
	}
	ck_assert_uint_eq(zalloc_stripe_width(t.za, LIFETIME_SHORT), 6);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.open_zones, 16);
	ck_assert_uint_eq(st.zone_finishes, 0);
	ck_assert_uint_eq(st.free_zones, 0);
	ck_assert_uint_eq(st.max_active_data, 16);
	for (int i = 0; i < 16; i++) {
		zalloc_valid_add(t.za, l[i].offset, BS);
		zalloc_release(t.za, &l[i], BS, 0);
	}
	/* zone capacity == zone size here */
	ck_assert_uint_eq(dzone(&t, 3).capacity, ZSZ);
	/* fill up: -ENOSPC once every zone is full of valid data */
	ck_assert_int_eq(fill_all_valid(&t, LIFETIME_SHORT) >= 3, 1);
	for (uint32_t z = 0; z < 16; z++) {
		struct zalloc_zone_info zi;

		zalloc_zone_info(t.za, z, &zi);
		ck_assert_uint_gt(zi.valid_bytes, 0);
	}
	check_sync(&t, 0, 16);
	check_stats(&t, 0, 16);
	tdev_free(&t);
}
END_TEST

/* Accounting bugs are logged and clamped, never fatal. */
START_TEST(accounting_bugs_clamped)
{
	struct tdev t;
	struct zalloc_lease l, l2;
	struct zalloc_zone_info zi;
	uint64_t errs;

	tdev_std(&t, 4);
	zf_log_set_level(ZF_LOG_ERROR);
	errs = zf_log_error_count();
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l), 0);
	lwrite(&t, &l, 8 * KiB);
	/* accounting before release is allowed within the lease */
	zalloc_valid_add(t.za, l.offset, 8 * KiB);
	zalloc_release(t.za, &l, 8 * KiB, 0);
	ck_assert_uint_eq(zf_log_error_count(), errs);
	/* re-referencing old bytes is fine too */
	zalloc_valid_sub(t.za, l.offset, 4 * KiB);
	zalloc_valid_add(t.za, l.offset, 4 * KiB);
	ck_assert_uint_eq(zf_log_error_count(), errs);

	/* accounting a lease after its release is fine too */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l2), 0);
	ck_assert_uint_eq(l2.offset, l.offset + 8 * KiB);
	lwrite(&t, &l2, 8 * KiB);
	zalloc_release(t.za, &l2, 8 * KiB, 0);
	zalloc_valid_add(t.za, l2.offset, 8 * KiB);
	ck_assert_uint_eq(zf_log_error_count(), errs);
	zalloc_zone_info(t.za, l.zone, &zi);
	ck_assert_uint_eq(zi.valid_bytes, 16 * KiB);

	zalloc_valid_sub(t.za, l.offset, 20 * KiB);	/* below zero */
	ck_assert_uint_eq(zf_log_error_count(), errs + 1);
	zalloc_zone_info(t.za, l.zone, &zi);
	ck_assert_uint_eq(zi.valid_bytes, 0);

	zalloc_valid_add(t.za, l.offset, 32 * KiB);	/* beyond written */
	ck_assert_uint_eq(zf_log_error_count(), errs + 2);
	zalloc_zone_info(t.za, l.zone, &zi);
	ck_assert_uint_eq(zi.valid_bytes, 16 * KiB);

	zalloc_valid_add(t.za, (uint64_t)NZ * ZSZ, BS);	/* outside the device */
	zalloc_valid_add(t.za, 0, BS);			/* metadata zone */
	ck_assert_uint_eq(zf_log_error_count(), errs + 4);

	/* releasing a lease twice */
	zalloc_release(t.za, &l, 0, 0);
	ck_assert_uint_eq(zf_log_error_count(), errs + 5);
	/* a lease length that is no multiple of the block size: resync */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l), 0);
	lwrite(&t, &l, BS);
	zalloc_valid_add(t.za, l.offset, BS);
	zalloc_release(t.za, &l, 100, 0);
	ck_assert_uint_eq(zf_log_error_count(), errs + 6);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, 64 * KiB, &l2), 0);
	ck_assert_uint_eq(l2.offset, l.offset + BS);	/* the device's wp */
	zalloc_release(t.za, &l2, 0, 0);
	zf_log_set_level(ZF_LOG_INFO);
	tdev_check_free(&t);
}
END_TEST

START_TEST(create_rejects_bad_params)
{
	struct tdev t;
	struct zalloc_params p;
	struct zalloc *za;
	struct zalloc_lease l;

	tdev_make(&t, NZ, ZCAP, MAXO, MAXA);
	p = tparams(FIRST, NZ, RES, 4);		/* past the end */
	ck_assert_int_eq(zalloc_create(t.dev, &p, &za), -EINVAL);
	p = tparams(FIRST, NDATA, 8, 4);	/* nothing left for data */
	ck_assert_int_eq(zalloc_create(t.dev, &p, &za), -EINVAL);
	p = tparams(FIRST, 0, RES, 4);
	ck_assert_int_eq(zalloc_create(t.dev, &p, &za), -EINVAL);
	ck_assert_int_eq(zalloc_create(NULL, &p, &za), -EINVAL);
	p = tparams(FIRST, NDATA, RES, 4);
	ck_assert_int_eq(zalloc_create(t.dev, &p, &t.za), 0);
	/* before mount_done nothing is leased */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, BS, &l), -EBUSY);
	ck_assert_int_eq(zalloc_mount_done(t.za), 0);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, BS, &l), 0);
	zalloc_release(t.za, &l, 0, 0);
	tdev_free(&t);
}
END_TEST

/* Threads writing through leases concurrently, with invalidations and
 * commits: no write ever fails (exclusive leases keep each zone's writes
 * sequential), the device budget holds, and the accounting adds up. */
struct stress {
	struct tdev *t;
	unsigned int seed;
	bool late;		/* account after zalloc_release (as the fs does) */
	int writes;
	int commits;
};

static pthread_mutex_t ext_mu = PTHREAD_MUTEX_INITIALIZER;
#define MAX_EXT 4096
static struct { uint64_t off, len; } exts[MAX_EXT];
static int nexts;

static void *stress_main(void *arg)
{
	struct stress *s = arg;
	struct tdev *t = s->t;

	for (int i = 0; i < 300; i++) {
		enum lifetime_class cls = (enum lifetime_class)(rand_r(&s->seed) % LIFETIME_NR);
		struct zalloc_lease l[3];
		unsigned int w = zalloc_stripe_width(t->za, cls);
		int n;

		if (w > 3)
			w = 3;
		n = zalloc_acquire_many(t->za, cls, (1 + rand_r(&s->seed) % 16) * BS,
					w, l);
		if (n == -ENOSPC) {
			uint64_t tk = zalloc_commit_begin(t->za);

			zalloc_commit_end(t->za, tk);
			continue;
		}
		ck_assert_int_gt(n, 0);
		for (int k = 0; k < n; k++) {
			uint64_t len = (1 + rand_r(&s->seed) % (l[k].len / BS)) * BS;
			ssize_t r = zdev_write(t->dev, l[k].offset, t->buf, len);

			ck_assert_int_eq(r, (ssize_t)len);
			if (!s->late)
				zalloc_valid_add(t->za, l[k].offset, len);
			zalloc_release(t->za, &l[k], len, 0);
			s->writes++;
			if (s->late && rand_r(&s->seed) % 4 == 0)
				usleep(300);	/* let others overtake */
			pthread_mutex_lock(&ext_mu);
			if (s->late)
				zalloc_valid_add(t->za, l[k].offset, len);
			if (nexts < MAX_EXT) {
				exts[nexts].off = l[k].offset;
				exts[nexts].len = len;
				nexts++;
			}
			/* drop a random older extent (record first, then sub) */
			if (nexts > 12) {
				int v = rand_r(&s->seed) % nexts;

				zalloc_valid_sub(t->za, exts[v].off, exts[v].len);
				exts[v] = exts[--nexts];
			}
			pthread_mutex_unlock(&ext_mu);
		}
		if (rand_r(&s->seed) % 8 == 0) {
			uint64_t tk = zalloc_commit_begin(t->za);

			ck_assert_int_ge(zalloc_commit_end(t->za, tk), 0);
			s->commits++;
		}
	}
	return NULL;
}

static void commit_cb_stress(void *arg)
{
	struct zalloc *za = arg;
	uint64_t tk = zalloc_commit_begin(za);

	zalloc_commit_end(za, tk);
}

START_TEST(threads_stress)
{
	struct tdev t;
	struct stress s[6];
	pthread_t th[6];
	volatile int stop = 0;
	uint32_t op, ac;

	(void)stop;
	tdev_std(&t, 3);
	nexts = 0;
	zalloc_set_need_space_cb(t.za, commit_cb_stress, t.za);
	for (int i = 0; i < 6; i++) {
		s[i] = (struct stress){ .t = &t, .seed = 1000u + (unsigned)i + 77u * (unsigned)_i,
					.late = _i == 1 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, stress_main, &s[i]), 0);
	}
	for (int k = 0; k < 50; k++) {
		dcount(&t, FIRST, NDATA, &op, &ac);
		ck_assert_uint_le(ac, BUDGET);
		ck_assert_uint_le(op, BUDGET);
		ck_assert_int_eq(zalloc_check(t.za), 0);	/* while they run */
		usleep(2000);
	}
	int writes = 0;
	for (int i = 0; i < 6; i++) {
		pthread_join(th[i], NULL);
		writes += s[i].writes;
	}
	ck_assert_int_gt(writes, 1000);
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_le(ac, BUDGET);
	/* the live extents are exactly the valid bytes */
	uint64_t live = 0;
	for (int i = 0; i < nexts; i++)
		live += exts[i].len;
	struct zalloc_stats st;
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.valid_bytes, live);
	ck_assert_uint_gt(st.zone_resets, 0);
	/* no live extent was ever reset or overwritten */
	uint8_t *rb = zdev_buf_alloc(ZSZ);
	for (int i = 0; i < nexts; i++) {
		ck_assert_int_eq(zdev_read(t.dev, exts[i].off, rb, exts[i].len),
				 (ssize_t)exts[i].len);
		ck_assert_msg(memcmp(rb, t.buf, exts[i].len) == 0,
			      "live extent [%llu, +%llu) lost",
			      (unsigned long long)exts[i].off,
			      (unsigned long long)exts[i].len);
	}
	zdev_buf_free(rb);
	tdev_check_free(&t);
}
END_TEST

/* ---- garbage collection -------------------------------------------------- */

/* Write a whole zone of class cls with valid data; returns its zone. */
static uint32_t fill_zone(struct tdev *t, enum lifetime_class cls)
{
	struct zalloc_lease l;

	ck_assert_int_eq(zalloc_acquire(t->za, cls, ZCAP, &l), 0);
	ck_assert_uint_eq(l.len, ZCAP);
	lwrite(t, &l, l.len);
	zalloc_valid_add(t->za, l.offset, l.len);
	zalloc_release(t->za, &l, l.len, 0);
	return l.zone;
}

static uint64_t zstart(uint32_t zone)
{
	return (uint64_t)zone * ZSZ;
}

/* In the background a WAL zone younger than its class's life is left to
 * die (the life: how long after their last write the class's zones went on
 * dying whole by themselves), and a zone freeing less than 1/8 of itself
 * is not worth copying; writers waiting (greedy) still take either, but
 * not a zone freeing less than 1/64 of itself. */
START_TEST(gc_young_zone_left_to_die)
{
	struct tdev t;
	struct zalloc_gc_victim v;
	struct zalloc_stats st;
	uint32_t a, b;

	tdev_std(&t, 1);
	/* a WAL-like zone dies whole 3 zones' worth of writes after its last */
	a = fill_zone(&t, LIFETIME_SHORT);
	for (int i = 0; i < 3; i++)
		fill_zone(&t, LIFETIME_MEDIUM);
	zalloc_valid_sub(t.za, zstart(a), ZCAP);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.class_life_bytes[LIFETIME_SHORT], 3 * ZCAP);
	ck_assert_uint_eq(st.class_life_bytes[LIFETIME_MEDIUM], 0);
	/* the next one holds a little live data (the start of the next WAL) */
	b = fill_zone(&t, LIFETIME_SHORT);
	zalloc_valid_sub(t.za, zstart(b), ZCAP - ZCAP / 16);
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), -ENOENT);
	ck_assert_int_eq(zalloc_gc_pick(t.za, true, NULL, &v), 0);
	ck_assert_uint_eq(v.zone, b);
	zalloc_gc_done(t.za, b);
	/* once older than the class's life it is a victim like any other */
	fill_zone(&t, LIFETIME_MEDIUM);
	fill_zone(&t, LIFETIME_MEDIUM);
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), -ENOENT);
	fill_zone(&t, LIFETIME_MEDIUM);
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), 0);
	ck_assert_uint_eq(v.zone, b);
	zalloc_gc_done(t.za, b);
	/* a zone dying sooner pulls the life down by 1/8 of the gap */
	zalloc_valid_sub(t.za, zstart(b) + ZCAP - ZCAP / 16, ZCAP / 16);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.class_life_bytes[LIFETIME_SHORT], 3 * ZCAP);	/* b: 3 zones too */
	a = fill_zone(&t, LIFETIME_SHORT);
	fill_zone(&t, LIFETIME_MEDIUM);
	zalloc_valid_sub(t.za, zstart(a), ZCAP);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.class_life_bytes[LIFETIME_SHORT], 3 * ZCAP - (2 * ZCAP) / 8);
	/* a zone that would free less than 1/8 of itself: greedy only; less
	 * than 1/64: never (a rewritten page is no reason to copy a zone) */
	{
		uint32_t d = fill_zone(&t, LIFETIME_LONG);
		uint32_t c = fill_zone(&t, LIFETIME_LONG);

		zalloc_valid_sub(t.za, zstart(d), ZCAP / 64 - BS);
		for (int i = 0; i < 4; i++)
			fill_zone(&t, LIFETIME_MEDIUM);
		ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), -ENOENT);
		ck_assert_int_eq(zalloc_gc_pick(t.za, true, NULL, &v), -ENOENT);
		zalloc_get_stats(t.za, &st);
		ck_assert_uint_eq(st.gc_reclaimable_bytes, 0);

		for (int i = 0; i < 4; i++)
			fill_zone(&t, LIFETIME_MEDIUM);
		zalloc_valid_sub(t.za, zstart(c), ZCAP / 8 - BS);
		ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), -ENOENT);
		ck_assert_int_eq(zalloc_gc_pick(t.za, true, NULL, &v), 0);
		ck_assert_uint_eq(v.zone, c);
		zalloc_gc_done(t.za, c);
		zalloc_valid_sub(t.za, zstart(c) + ZCAP / 8 - BS, BS);
		ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), 0);
		ck_assert_uint_eq(v.zone, c);
		zalloc_gc_done(t.za, c);
	}
	/* other classes: the age in the score decides, young or not */
	{
		uint32_t m = fill_zone(&t, LIFETIME_MEDIUM);

		for (int i = 0; i < 3; i++)
			fill_zone(&t, LIFETIME_LONG);
		zalloc_valid_sub(t.za, zstart(m), ZCAP);
		zalloc_get_stats(t.za, &st);
		ck_assert_uint_eq(st.class_life_bytes[LIFETIME_MEDIUM], 3 * ZCAP);
		m = fill_zone(&t, LIFETIME_MEDIUM);
		zalloc_valid_sub(t.za, zstart(m), ZCAP - ZCAP / 16);
		ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), 0);
		ck_assert_uint_eq(v.zone, m);
		zalloc_gc_done(t.za, m);
	}
	tdev_free(&t);
}
END_TEST

/* Victims: cost-benefit or greedy; pinned, skipped, backing-off, pending,
 * open and fully valid zones are never picked; a pinned zone whose data
 * all dies is reset only after gc_done (and a commit). */
START_TEST(gc_victim_choice)
{
	struct tdev t;
	struct zalloc_gc_victim v;
	struct zalloc_stats st;
	uint32_t z[6];
	uint64_t skip[1] = { 0 }, tk;
	/* valid share per zone, written oldest first */
	const uint64_t keep[6] = { ZCAP / 4, ZCAP / 2, ZCAP * 3 / 4, ZCAP, ZCAP / 5, 0 };

	tdev_std(&t, 1);
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), -ENOENT);
	for (int i = 0; i < 6; i++) {	/* each zone's data dies as it is written */
		z[i] = fill_zone(&t, LIFETIME_MEDIUM);
		zalloc_valid_sub(t.za, zstart(z[i]) + keep[i], ZCAP - keep[i]);
	}
	/* an open zone with invalid bytes is no victim */
	{
		struct zalloc_lease l;

		ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, 64 * KiB, &l), 0);
		lwrite(&t, &l, l.len);
		zalloc_release(t.za, &l, l.len, 0);
		zalloc_valid_add(t.za, l.offset, l.len);
		zalloc_valid_sub(t.za, l.offset, l.len / 2);
	}
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 1);	/* z[5] */
	ck_assert_uint_eq(st.gc_reclaimable_bytes,
			  ZCAP * 3 / 4 + ZCAP / 2 + ZCAP / 4 + (ZCAP - ZCAP / 5));
	/* ages 5,4,3,..,1 zones: scores (1-u) log2(2+age) / 2u:
	 * z0 .75*2.81/.5=4.2, z1 .5*2.58/1=1.3, z2 .25*2.32/1.5=.39,
	 * z4 .8*1.58/.4=3.2 */
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), 0);
	ck_assert_uint_eq(v.zone, z[0]);
	ck_assert_uint_eq(v.valid_bytes, ZCAP / 4);
	ck_assert_uint_eq(v.cls, LIFETIME_MEDIUM);
	ck_assert_uint_eq(v.start, zstart(z[0]));
	ck_assert_uint_eq(v.capacity, ZCAP);
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), 0);	/* z0 is pinned */
	ck_assert_uint_eq(v.zone, z[4]);
	zalloc_gc_done(t.za, z[4]);
	/* greedy: most bytes freed */
	ck_assert_int_eq(zalloc_gc_pick(t.za, true, NULL, &v), 0);
	ck_assert_uint_eq(v.zone, z[4]);
	zalloc_gc_done(t.za, z[4]);
	skip[0] = 1ull << (z[4] - FIRST);
	ck_assert_int_eq(zalloc_gc_pick(t.za, true, skip, &v), 0);
	ck_assert_uint_eq(v.zone, z[1]);
	zalloc_gc_done_backoff(t.za, z[1], 60ull * 1000000000ull);
	ck_assert_int_eq(zalloc_gc_pick(t.za, true, skip, &v), 0);	/* z1 backs off */
	ck_assert_uint_eq(v.zone, z[2]);
	zalloc_gc_done(t.za, z[2]);
	ck_assert_int_eq(zalloc_gc_pick(t.za, true, skip, &v), 0);
	ck_assert_uint_eq(v.zone, z[2]);
	zalloc_gc_done(t.za, z[2]);
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), 0);
	ck_assert_uint_eq(v.zone, z[4]);
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, skip, &v), 0);
	ck_assert_uint_eq(v.zone, z[2]);
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, skip, &v), -ENOENT);	/* z1 backs off */
	zalloc_gc_done(t.za, z[4]);
	zalloc_gc_done(t.za, z[2]);
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, skip, &v), 0);
	ck_assert_uint_eq(v.zone, z[2]);

	/* z2 (pinned) dies: not queued until gc_done; then reset */
	zalloc_valid_sub(t.za, zstart(z[2]), ZCAP * 3 / 4);
	tk = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, tk), 1);	/* z5 only */
	ck_assert_int_eq(dzone(&t, z[2]).cond, ZDEV_COND_FULL);
	ck_assert_int_eq(dzone(&t, z[5]).cond, ZDEV_COND_EMPTY);
	zalloc_gc_done(t.za, z[2]);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 1);
	tk = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, tk), 1);
	ck_assert_int_eq(dzone(&t, z[2]).cond, ZDEV_COND_EMPTY);
	zalloc_gc_done(t.za, z[0]);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.gc_runs, 9);
	ck_assert_uint_eq(st.gc_active, 0);
	ck_assert_uint_eq(st.class_zone_resets[LIFETIME_MEDIUM], 2);
	tdev_check_free(&t);
}
END_TEST

/* A minimal collector, as fs_gc does it: the live ranges are tracked here
 * (the file system's extent maps play that part in zonefuse). */
#define MAXR 512
static struct { uint64_t off, len; } live[MAXR];
static int nlive;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;

static void live_add(uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&live_mu);
	ck_assert_int_lt(nlive, MAXR);
	live[nlive].off = off;
	live[nlive].len = len;
	nlive++;
	pthread_mutex_unlock(&live_mu);
}

/* Make [off, off+len) dead (it must be a whole tracked range's tail or all). */
static void live_kill_tail(uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&live_mu);
	for (int i = 0; i < nlive; i++) {
		if (live[i].off <= off && off + len == live[i].off + live[i].len) {
			live[i].len -= len;
			if (!live[i].len)
				live[i] = live[--nlive];
			break;
		}
	}
	pthread_mutex_unlock(&live_mu);
}

struct collector {
	struct tdev *t;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int kicks;
	bool stop, lazy;	/* lazy: never collects */
	int collected;
	void *buf;
};

/* Collect one victim; 1 done, 0 none. */
static int collect(struct collector *c)
{
	struct zalloc_gc_victim v;
	struct zalloc *za = c->t->za;
	uint64_t tk;

	if (zalloc_gc_pick(za, true, NULL, &v))
		return 0;
	for (;;) {
		uint64_t off = 0, len = 0;

		pthread_mutex_lock(&live_mu);
		for (int i = 0; i < nlive; i++) {
			if (live[i].off >= v.start && live[i].off < v.start + ZSZ) {
				off = live[i].off;
				len = live[i].len;
				live[i] = live[--nlive];
				break;
			}
		}
		pthread_mutex_unlock(&live_mu);
		if (!len)
			break;
		ck_assert_int_eq(zdev_read(c->t->dev, off, c->buf, len), (ssize_t)len);
		for (uint64_t done = 0; done < len;) {
			struct zalloc_lease l;
			uint64_t n;

			ck_assert_int_eq(zalloc_acquire_gc(za, v.cls, len - done, &l), 0);
			n = ZF_MIN(l.len, len - done);
			ck_assert_int_eq(zdev_write(c->t->dev, l.offset, (char *)c->buf + done, n),
					 (ssize_t)n);
			zalloc_release(za, &l, n, 0);
			zalloc_valid_add(za, l.offset, n);
			live_add(l.offset, n);
			done += n;
		}
		zalloc_valid_sub(za, off, len);
	}
	zalloc_gc_done(za, v.zone);
	tk = zalloc_commit_begin(za);
	ck_assert_int_ge(zalloc_commit_end(za, tk), 1);
	c->collected++;
	return 1;
}

static void *collector_main(void *arg)
{
	struct collector *c = arg;

	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		if (!c->kicks) {
			pthread_cond_wait(&c->cv, &c->mu);
			continue;
		}
		c->kicks = 0;
		pthread_mutex_unlock(&c->mu);
		if (!c->lazy)
			collect(c);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void collector_kick(void *arg)
{
	struct collector *c = arg;

	pthread_mutex_lock(&c->mu);
	c->kicks++;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void collector_start(struct collector *c, struct tdev *t, pthread_t *th)
{
	c->t = t;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->buf = zdev_buf_alloc(ZSZ);
	ck_assert_int_eq(pthread_create(th, NULL, collector_main, c), 0);
	zalloc_set_gc(t->za, 2, collector_kick, c);
}

static void collector_stop(struct collector *c, pthread_t th)
{
	zalloc_set_gc(c->t->za, 0, NULL, NULL);
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(th, NULL);
	zdev_buf_free(c->buf);
}

/* Every zone half valid: without GC an acquire fails; with GC writers wait
 * for it (the reserve is never theirs while it can help) and keep going
 * until valid data really fills the device.  Device B: 8 open / 14 active. */
START_TEST(gc_writers_wait_instead_of_enospc)
{
	struct tdev t;
	struct zalloc_params p = tparams(FIRST, NDATA, RES, 2);
	struct zalloc_lease l;
	struct zalloc_stats st;
	struct collector c = { 0 };
	pthread_t th;
	int rc, n = 0;

	nlive = 0;
	tdev_make(&t, NZ, ZCAP, MAXO, MAXA_B);
	tdev_alloc(&t, &p);
	/* all zones but the collector's reserve of 2: half valid */
	for (int i = 0; i < NDATA - 2; i++) {
		uint32_t zn = fill_zone(&t, i % 2 ? LIFETIME_LONG : LIFETIME_SHORT);

		live_add(zstart(zn), ZCAP);
		live_kill_tail(zstart(zn) + ZCAP / 2, ZCAP / 2);
		zalloc_valid_sub(t.za, zstart(zn) + ZCAP / 2, ZCAP / 2);
	}
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.free_zones, 2);
	ck_assert_uint_eq(st.pending_resets, 0);
	collector_start(&c, &t, &th);
	/* write until ENOSPC: 32 KiB pieces of live data; never from the
	 * reserve while the collector can help */
	for (;;) {
		rc = zalloc_acquire(t.za, LIFETIME_MEDIUM, 32 * KiB, &l);
		if (rc)
			break;
		zalloc_get_stats(t.za, &st);
		if (st.gc_reclaimable_bytes >= 2 * ZCAP)
			ck_assert_uint_eq(st.gc_reserve_taken, 0);
		check_lease(&t, &l);
		lwrite(&t, &l, l.len);
		zalloc_valid_add(t.za, l.offset, l.len);
		live_add(l.offset, l.len);
		zalloc_release(t.za, &l, l.len, 0);
		n++;
	}
	ck_assert_int_eq(rc, -ENOSPC);
	zalloc_get_stats(t.za, &st);
	/* ENOSPC only once valid data (nearly) fills the device: what is left
	 * is the room in the open zones the writer's class cannot use */
	ck_assert_msg(st.valid_bytes + 6 * ZCAP >= st.capacity_bytes,
		      "ENOSPC with %llu of %llu bytes valid after %d writes",
		      (unsigned long long)st.valid_bytes,
		      (unsigned long long)st.capacity_bytes, n);
	ck_assert_uint_gt(c.collected, 10);
	ck_assert_uint_gt(st.gc_waits, 0);
	ck_assert_uint_gt(st.gc_bytes_written, 0);
	ck_assert_uint_eq(st.gc_bytes_written, st.gc_class_bytes_written[LIFETIME_SHORT] +
			  st.gc_class_bytes_written[LIFETIME_LONG]);
	ck_assert_uint_ge(st.zone_resets, (uint64_t)c.collected);
	collector_stop(&c, th);
	{
		uint32_t op, ac;

		dcount(&t, FIRST, NDATA, &op, &ac);
		ck_assert_uint_le(op, MAXO - RES);
		ck_assert_uint_le(ac, MAXA_B - RES);
	}
	tdev_check_free(&t);
}
END_TEST

/* The reserve: while the collector can help, ordinary writers leave the
 * last reserved FREE zones alone and wait; a collector that makes no
 * progress for ZALLOC_GC_PATIENCE_NS lets them take one. */
START_TEST(gc_reserve_and_patience)
{
	struct tdev t;
	struct zalloc_lease l;
	struct zalloc_stats st;
	struct collector c = { 0 };
	pthread_t th;
	uint64_t t0, dt;

	nlive = 0;
	tdev_std(&t, 1);
	for (int i = 0; i < NDATA - 2; i++) {
		uint32_t zn = fill_zone(&t, LIFETIME_MEDIUM);

		zalloc_valid_sub(t.za, zstart(zn) + ZCAP / 2, ZCAP / 2);
	}
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.free_zones, 2);
	c.lazy = true;
	collector_start(&c, &t, &th);
	/* the collector (ZA GC lease) may take them */
	ck_assert_int_eq(zalloc_acquire_gc(t.za, LIFETIME_LONG, BS, &l), 0);
	ck_assert_int_eq(dzone(&t, l.zone).cond, ZDEV_COND_EMPTY);
	zalloc_release(t.za, &l, 0, 0);
	/* an ordinary writer waits, then takes one */
	t0 = zf_now_ns();
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, BS, &l), 0);
	dt = zf_now_ns() - t0;
	ck_assert_uint_ge(dt, ZALLOC_GC_PATIENCE_NS * 9 / 10);
	ck_assert_uint_lt(dt, ZALLOC_GC_PATIENCE_NS * 3);
	zalloc_release(t.za, &l, 0, 0);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.gc_reserve_grants, 1);
	ck_assert_uint_eq(st.gc_reserve_zones, 2);
	ck_assert_uint_ge(st.gc_wait_ns, ZALLOC_GC_PATIENCE_NS * 9 / 10);
	collector_stop(&c, th);
	/* GC off: the reserve is anybody's at once */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, BS, &l), 0);
	zalloc_release(t.za, &l, 0, 0);
	tdev_check_free(&t);
}
END_TEST

/* A zone whose data is dying now is hot: of two zones written one after
 * the other and half dead, cost-benefit takes the one whose deaths are
 * old, even when the other was written first. */
START_TEST(gc_hot_zone_waits)
{
	struct tdev t;
	struct zalloc_gc_victim v;
	uint32_t a, b;

	tdev_std(&t, 1);
	b = fill_zone(&t, LIFETIME_LONG);	/* the older write */
	a = fill_zone(&t, LIFETIME_LONG);
	zalloc_valid_sub(t.za, zstart(a), ZCAP / 2);
	zalloc_valid_sub(t.za, zstart(b), ZCAP / 2 - BS);
	for (int i = 0; i < 4; i++)	/* time passes: other zones are written */
		fill_zone(&t, LIFETIME_MEDIUM);
	zalloc_valid_sub(t.za, zstart(b) + ZCAP / 2 - BS, BS);	/* b: a death now */
	ck_assert_int_eq(zalloc_gc_pick(t.za, false, NULL, &v), 0);
	ck_assert_uint_eq(v.zone, a);
	ck_assert_uint_gt(v.age, 3 * ZCAP);
	zalloc_gc_done(t.za, a);
	tdev_check_free(&t);
}
END_TEST

/* A zone the collector opened is its destination: ordinary writers of the
 * class open their own (else they could fill it between two of the
 * collector's batches and leave it without room to finish its victim). */
START_TEST(gc_dest_zone_is_the_collectors)
{
	struct tdev t;
	struct zalloc_lease g, u, g2;

	tdev_std(&t, 1);
	ck_assert_int_eq(zalloc_acquire_gc(t.za, LIFETIME_LONG, 64 * KiB, &g), 0);
	lwrite(&t, &g, g.len);
	zalloc_valid_add(t.za, g.offset, g.len);
	zalloc_release(t.za, &g, g.len, 0);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, BS, &u), 0);
	ck_assert_uint_ne(u.zone, g.zone);
	lwrite(&t, &u, u.len);
	zalloc_valid_add(t.za, u.offset, u.len);
	zalloc_release(t.za, &u, u.len, 0);
	ck_assert_int_eq(zalloc_acquire_gc(t.za, LIFETIME_LONG, BS, &g2), 0);
	ck_assert_uint_eq(g2.zone, g.zone);	/* the collector goes on in it */
	ck_assert_uint_eq(g2.offset, g.offset + g.len);
	zalloc_release(t.za, &g2, 0, 0);
	tdev_check_free(&t);
}
END_TEST

/* The collector writes the data it moves only into zones it opened, never
 * among the fresh data of the class: moved data has outlived its zone-mates
 * once and dies on another schedule than what writers write now. */
START_TEST(gc_survivors_apart_from_fresh_data)
{
	struct tdev t;
	struct zalloc_lease u, g, g2, u2;

	tdev_std(&t, 1);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, ZCAP / 2, &u), 0);
	lwrite(&t, &u, u.len);
	zalloc_valid_add(t.za, u.offset, u.len);
	zalloc_release(t.za, &u, u.len, 0);
	/* the writers' zone has room left, but the collector opens its own */
	ck_assert_int_eq(zalloc_acquire_gc(t.za, LIFETIME_LONG, 64 * KiB, &g), 0);
	ck_assert_uint_ne(g.zone, u.zone);
	lwrite(&t, &g, g.len);
	zalloc_valid_add(t.za, g.offset, g.len);
	zalloc_release(t.za, &g, g.len, 0);
	/* and goes on in it, while the writers go on in theirs */
	ck_assert_int_eq(zalloc_acquire_gc(t.za, LIFETIME_LONG, BS, &g2), 0);
	ck_assert_uint_eq(g2.zone, g.zone);
	zalloc_release(t.za, &g2, 0, 0);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, BS, &u2), 0);
	ck_assert_uint_eq(u2.zone, u.zone);
	zalloc_release(t.za, &u2, 0, 0);
	tdev_check_free(&t);
}
END_TEST

/* The device fills with valid data (the collector cannot help): writers
 * take the reserve but never the last FREE zone; once data dies partly in
 * every zone, the collector still has that zone to compact into, and
 * writers get space again instead of ENOSPC forever. */
START_TEST(gc_floor_never_taken)
{
	struct tdev t;
	struct zalloc_lease l;
	struct zalloc_stats st;
	struct collector c = { 0 };
	pthread_t th;
	uint64_t t0;

	nlive = 0;
	tdev_std(&t, 1);
	collector_start(&c, &t, &th);
	for (int i = 0; i < NDATA - 1; i++)
		fill_zone(&t, LIFETIME_MEDIUM);	/* no dead byte: no waiting */
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.free_zones, ZALLOC_GC_FLOOR);
	ck_assert_uint_eq(st.free_bytes, 0);
	ck_assert_uint_eq(st.gc_floor_bytes, ZALLOC_GC_FLOOR * ZCAP);
	t0 = zf_now_ns();
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_MEDIUM, BS, &l), -ENOSPC);
	ck_assert_uint_lt(zf_now_ns() - t0, ZALLOC_GC_PATIENCE_NS / 2);	/* at once */
	/* every other zone's data half dies: the collector moves the live
	 * halves into the floor zone and frees zones for the writer */
	for (uint32_t z = FIRST; z < FIRST + NDATA; z++) {
		struct zalloc_zone_info zi;

		ck_assert_int_eq(zalloc_zone_info(t.za, z, &zi), 0);
		if (zi.valid_bytes != ZCAP)
			continue;
		if (z % 2) {
			zalloc_valid_sub(t.za, zstart(z), ZCAP / 2);
			live_add(zstart(z) + ZCAP / 2, ZCAP / 2);
		} else {
			live_add(zstart(z), ZCAP);
		}
	}
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_MEDIUM, ZCAP, &l), 0);
	lwrite(&t, &l, l.len);
	zalloc_valid_add(t.za, l.offset, l.len);
	zalloc_release(t.za, &l, l.len, 0);
	collector_stop(&c, th);
	ck_assert_int_ge(c.collected, 1);
	tdev_check_free(&t);
}
END_TEST

/* With FREE zones short (two or fewer left to writers), a class without a
 * zone of its own neither finishes one (its room would be lost until the
 * zone is collected) nor opens one (its unwritten tail is room the
 * collector cannot use): it shares the fullest open zone of another class
 * it may use; with FREE zones to spare it finishes, as above.  The
 * collector, with no zone of its own, finishes one and opens a FREE zone;
 * then, FREE zones short, it shares that zone. */
START_TEST(share_instead_of_finish_when_short)
{
	struct tdev t;
	struct zalloc_lease l[BUDGET], nl, g;
	struct zalloc_stats st;
	const uint64_t wr[BUDGET] = { 64 * KiB, 128 * KiB, 512 * KiB,
				      256 * KiB, 384 * KiB, 32 * KiB };
	uint32_t op, ac;

	tdev_std(&t, 4);
	for (int i = 0; i < NDATA - BUDGET - 3; i++)
		fill_zone(&t, LIFETIME_MEDIUM);
	for (int i = 0; i < BUDGET; i++)
		ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, ZCAP, &l[i]), 0);
	for (int i = 0; i < BUDGET; i++) {
		lwrite(&t, &l[i], wr[i]);
		zalloc_valid_add(t.za, l[i].offset, wr[i]);
		zalloc_release(t.za, &l[i], wr[i], 0);
	}
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.free_zones, 3);

	/* three FREE zones: LONG finishes the fullest (l[2]) and opens one */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, BS, &nl), 0);
	ck_assert_int_eq(dzone(&t, l[2].zone).cond, ZDEV_COND_FULL);
	ck_assert_uint_eq(nl.cls, LIFETIME_LONG);
	lwrite(&t, &nl, BS);
	zalloc_valid_add(t.za, nl.offset, BS);
	zalloc_release(t.za, &nl, BS, 0);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.zone_finishes, 1);
	ck_assert_uint_eq(st.finished_tail_bytes, ZCAP - wr[2]);
	ck_assert_uint_eq(st.free_zones, 2);

	/* two FREE zones left: EXTREME appends to the fullest SHORT zone */
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_EXTREME, BS, &nl), 0);
	ck_assert_uint_eq(nl.zone, l[4].zone);
	ck_assert_uint_eq(nl.offset, l[4].offset + wr[4]);
	ck_assert_uint_eq(nl.cls, LIFETIME_SHORT);
	check_lease(&t, &nl);
	zalloc_release(t.za, &nl, 0, 0);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.zone_finishes, 1);
	ck_assert_uint_eq(st.class_fallbacks, 1);

	/* the collector has no zone of its own to share: it finishes one and
	 * opens a FREE zone ... */
	ck_assert_int_eq(zalloc_acquire_gc(t.za, LIFETIME_LONG, 64 * KiB, &g), 0);
	ck_assert_uint_eq(g.cls, LIFETIME_LONG);
	ck_assert_int_eq(dzone(&t, l[4].zone).cond, ZDEV_COND_FULL);
	lwrite(&t, &g, g.len);
	zalloc_valid_add(t.za, g.offset, g.len);
	zalloc_release(t.za, &g, g.len, 0);
	/* ... and with one left, EXTREME's moved data goes there too */
	ck_assert_int_eq(zalloc_acquire_gc(t.za, LIFETIME_EXTREME, BS, &nl), 0);
	ck_assert_uint_eq(nl.zone, g.zone);
	ck_assert_uint_eq(nl.offset, g.offset + g.len);
	ck_assert_uint_eq(nl.cls, LIFETIME_LONG);
	zalloc_release(t.za, &nl, 0, 0);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.zone_finishes, 2);
	ck_assert_uint_eq(st.class_fallbacks, 2);
	ck_assert_uint_eq(st.free_zones, 1);
	dcount(&t, FIRST, NDATA, &op, &ac);
	ck_assert_uint_le(ac, BUDGET);
	tdev_check_free(&t);
}
END_TEST

/* Bytes written through a lease and given up (zalloc_discard) no longer
 * keep their zone from being reset; per-class counters add up. */
START_TEST(discard_and_class_counters)
{
	struct tdev t;
	struct zalloc_lease a, b;
	struct zalloc_stats st;
	uint64_t tk;

	tdev_std(&t, 1);
	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_SHORT, ZCAP, &a), 0);
	lwrite(&t, &a, a.len);
	zalloc_release(t.za, &a, a.len, 0);	/* never accounted */
	tk = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, tk), 0);
	ck_assert_int_eq(dzone(&t, a.zone).cond, ZDEV_COND_FULL);
	zalloc_discard(t.za, a.offset, a.len / 2);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 0);	/* half still unclaimed */
	zalloc_discard(t.za, a.offset + a.len / 2, a.len / 2);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.pending_resets, 1);
	tk = zalloc_commit_begin(t.za);
	ck_assert_int_eq(zalloc_commit_end(t.za, tk), 1);
	zalloc_discard(t.za, 0, BS);	/* outside the data zones: logged, ignored */

	ck_assert_int_eq(zalloc_acquire(t.za, LIFETIME_LONG, 64 * KiB, &b), 0);
	lwrite(&t, &b, b.len);
	zalloc_valid_add(t.za, b.offset, b.len);
	zalloc_release(t.za, &b, b.len, 0);
	zalloc_get_stats(t.za, &st);
	ck_assert_uint_eq(st.class_bytes_written[LIFETIME_SHORT], ZCAP);
	ck_assert_uint_eq(st.class_bytes_written[LIFETIME_LONG], 64 * KiB);
	ck_assert_uint_eq(st.device_bytes_written, ZCAP + 64 * KiB);
	ck_assert_uint_eq(st.class_zone_resets[LIFETIME_SHORT], 1);
	ck_assert_uint_eq(st.gc_bytes_written, 0);
	ck_assert_uint_eq(st.gc_reserve_zones, 0);
	tdev_check_free(&t);
}
END_TEST

/* The sums kept incrementally (free, valid, reclaimable, collector bytes)
 * equal a full recount after every kind of step: leases written in part,
 * releases with an error, valid bytes added and dropped, commits and
 * resets, zones lent to the log and given back, victims picked, backed off
 * and done, discards.  And they are the figures stats and waits use. */
static struct { uint64_t off, len; } lv[256];
static int nlv;
static uint64_t live_bytes;

/* Every live byte of the zone at start goes (valid_sub). */
static void kill_zone(struct zalloc *za, uint64_t start)
{
	for (int k = 0; k < nlv;) {
		if (lv[k].off >= start && lv[k].off < start + ZSZ) {
			zalloc_valid_sub(za, lv[k].off, lv[k].len);
			live_bytes -= lv[k].len;
			lv[k] = lv[--nlv];
		} else {
			k++;
		}
	}
}

/* A collector that frees its victim by deleting what is in it (runs in
 * the waiting writer's thread, za->mu dropped), so waits end quickly. */
static void killer_kick(void *arg)
{
	struct zalloc *za = arg;
	struct zalloc_gc_victim v;

	if (zalloc_gc_pick(za, true, NULL, &v))
		return;
	kill_zone(za, v.start);
	zalloc_gc_done(za, v.zone);
	commit_cb_stress(za);
}

static void sums_step_check(struct tdev *t)
{
	struct zalloc_stats st;

	ck_assert_int_eq(zalloc_check(t->za), 0);
	zalloc_get_stats(t->za, &st);
	/* the FREE zones kept for the log's reserve are out of free_bytes */
	ck_assert_uint_eq(st.free_bytes + st.gc_floor_bytes + st.valid_bytes +
			  st.reclaimable_bytes + st.log_bytes - st.log_zones * ZCAP,
			  st.capacity_bytes);
}

START_TEST(sums_match_recount)
{
	struct tdev t;
	uint32_t lent[4];
	int nlent = 0;
	unsigned int seed = 4242;

	nlv = 0;
	live_bytes = 0;
	tdev_std(&t, 2);
	zalloc_set_gc(t.za, 2, killer_kick, t.za);
	zalloc_set_need_space_cb(t.za, commit_cb_stress, t.za);
	zalloc_set_log_reserve(t.za, 2);
	sums_step_check(&t);
	for (int i = 0; i < 3000; i++) {
		int op = (int)(rand_r(&seed) % 10);

		if (op <= 3 && live_bytes < NDATA * ZCAP / 3) {
			struct zalloc_lease l[2];
			enum lifetime_class cls = (enum lifetime_class)(rand_r(&seed) % LIFETIME_NR);
			int n = zalloc_acquire_many(t.za, cls, (1 + rand_r(&seed) % 64) * BS,
						    2, l);

			if (n == -ENOSPC)
				continue;
			ck_assert_int_gt(n, 0);
			for (int k = 0; k < n; k++) {
				uint64_t len = (rand_r(&seed) % (l[k].len / BS + 1)) * BS;

				if (len)
					lwrite(&t, &l[k], len);
				if (rand_r(&seed) % 16 == 0) {
					/* an error: zalloc asks the device */
					zalloc_release(t.za, &l[k], len, -EIO);
					continue;
				}
				zalloc_release(t.za, &l[k], len, 0);
				if (!len)
					continue;
				if (nlv < 256 && rand_r(&seed) % 8) {
					zalloc_valid_add(t.za, l[k].offset, len);
					lv[nlv].off = l[k].offset;
					lv[nlv].len = len;
					nlv++;
					live_bytes += len;
				} else {
					zalloc_discard(t.za, l[k].offset, len);
				}
			}
		} else if (op <= 5 && nlv) {
			int v = (int)(rand_r(&seed) % (unsigned)nlv);

			zalloc_valid_sub(t.za, lv[v].off, lv[v].len);
			live_bytes -= lv[v].len;
			lv[v] = lv[--nlv];
		} else if (op == 6) {
			uint64_t tk = zalloc_commit_begin(t.za);

			ck_assert_int_ge(zalloc_commit_end(t.za, tk), 0);
		} else if (op == 7) {
			if (nlent < 4 && rand_r(&seed) % 2 &&
			    zalloc_lend(t.za, 3, &lent[nlent]) == 0)
				nlent++;
			else if (nlent) {
				/* the log resets a zone before giving it back */
				ck_assert_int_eq(zdev_zone_reset(t.dev, lent[nlent - 1]), 0);
				zalloc_lend_return(t.za, lent[--nlent]);
			}
		} else if (op == 8) {
			struct zalloc_gc_victim v;

			if (zalloc_gc_pick(t.za, true, NULL, &v) == 0) {
				sums_step_check(&t);
				if (rand_r(&seed) % 2)
					kill_zone(t.za, v.start);	/* died meanwhile */
				zalloc_gc_done_backoff(t.za, v.zone,
						       rand_r(&seed) % 2 ? 1000000000ull : 0);
			}
		} else {
			struct zalloc_stats st;

			zalloc_get_stats(t.za, &st);
			ck_assert_uint_le(st.free_bytes, st.capacity_bytes);
		}
		sums_step_check(&t);
	}
	while (nlent) {
		ck_assert_int_eq(zdev_zone_reset(t.dev, lent[nlent - 1]), 0);
		zalloc_lend_return(t.za, lent[--nlent]);
	}
	zalloc_set_gc(t.za, 0, NULL, NULL);
	sums_step_check(&t);
	tdev_free(&t);
}
END_TEST

static Suite *zalloc_suite(void)
{
	Suite *s = suite_create("zalloc");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, lease_at_device_wp);
	tcase_add_loop_test(tc, classes_and_budget, 0, 3);
	tcase_add_test(tc, finish_least_remaining);
	tcase_add_test(tc, share_instead_of_finish_when_short);
	tcase_add_test(tc, close_when_only_open_binds);
	tcase_add_test(tc, mount_closed_zones);
	tcase_add_test(tc, acquire_blocks_until_release);
	tcase_add_test(tc, enospc_when_full);
	tcase_add_test(tc, full_device_waits_for_own_class);
	tcase_add_test(tc, full_device_uses_other_class_room);
	tcase_add_test(tc, reset_after_commit);
	tcase_add_test(tc, reset_failure_retried);
	tcase_add_test(tc, unclaimed_bytes_pin_zone);
	tcase_add_test(tc, commit_only_wait_is_bounded);
	tcase_add_test(tc, room_admissions_add_up);
	tcase_add_test(tc, mount_resets_and_adopts);
	tcase_add_test(tc, mount_finishes_beyond_budget);
	tcase_add_test(tc, release_error_resyncs);
	tcase_add_test(tc, stripe_width_budget);
	tcase_add_test(tc, unlimited_device);
	tcase_add_test(tc, accounting_bugs_clamped);
	tcase_add_test(tc, create_rejects_bad_params);
	tcase_add_loop_test(tc, threads_stress, 0, 2);
	tcase_add_test(tc, gc_victim_choice);
	tcase_add_test(tc, gc_young_zone_left_to_die);
	tcase_add_test(tc, gc_hot_zone_waits);
	tcase_add_test(tc, gc_dest_zone_is_the_collectors);
	tcase_add_test(tc, gc_survivors_apart_from_fresh_data);
	tcase_add_test(tc, gc_writers_wait_instead_of_enospc);
	tcase_add_test(tc, gc_reserve_and_patience);
	tcase_add_test(tc, gc_floor_never_taken);
	tcase_add_test(tc, discard_and_class_counters);
	tcase_add_test(tc, sums_match_recount);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(zalloc_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
