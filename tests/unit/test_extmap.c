/* Unit tests for fs/extmap: random set/punch sequences checked against a
 * flat per-byte model, plus the drop callback's accounting. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/extmap.h"
#include "testlib.h"

#define SPACE 4096u	/* file bytes modelled (units: 1 byte) */

static uint64_t dropped;
static void count_drop(void *arg, uint64_t dev, uint64_t len)
{
	(void)arg; (void)dev;
	dropped += len;
}

/* model[i] = device offset + 1 of file byte i, 0 = hole */
static void check_model(const struct extmap *m, const uint64_t *model)
{
	uint64_t mapped = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct extmap_ext *e = &m->v[i];
		ck_assert_uint_gt(e->len, 0);
		if (i) {
			const struct extmap_ext *p = &m->v[i - 1];
			ck_assert_uint_le(p->off + p->len, e->off);
			/* kept merged: no boundary is set in these tests */
			ck_assert(!(p->off + p->len == e->off && p->dev + p->len == e->dev));
		}
		uint64_t bad = 0;
		for (uint64_t b = 0; b < e->len; b++)
			bad += model[e->off + b] != e->dev + b + 1;
		ck_assert_uint_eq(bad, 0);
		mapped += e->len;
	}
	uint64_t want = 0;
	for (unsigned i = 0; i < SPACE; i++)
		want += model[i] != 0;
	ck_assert_uint_eq(mapped, want);
	ck_assert_uint_eq(extmap_bytes(m), mapped);
}

START_TEST(random_ops_match_model)
{
	static uint64_t model[SPACE];
	struct extmap m;
	uint64_t dev_next = 1000;

	memset(model, 0, sizeof(model));
	extmap_init(&m);
	srand(1234 + (unsigned)_i);
	for (int step = 0; step < 2000; step++) {
		uint64_t off = (uint64_t)rand() % SPACE;
		uint64_t len = 1 + (uint64_t)rand() % 300;
		if (off + len > SPACE)
			len = SPACE - off;
		uint64_t before = 0, after = 0;
		for (unsigned i = 0; i < SPACE; i++)
			before += model[i] != 0;
		dropped = 0;
		if (rand() % 4) {
			uint64_t replaced = 0;
			for (uint64_t b = 0; b < len; b++) {
				replaced += model[off + b] != 0;
				model[off + b] = dev_next + b + 1;
			}
			ck_assert_int_eq(extmap_set(&m, off, len, dev_next, count_drop, NULL), 0);
			ck_assert_uint_eq(dropped, replaced);
			dev_next += len + (uint64_t)(rand() % 2);	/* sometimes contiguous */
		} else {
			for (uint64_t b = 0; b < len; b++)
				model[off + b] = 0;
			ck_assert_int_eq(extmap_punch(&m, off, len, count_drop, NULL), 0);
		}
		for (unsigned i = 0; i < SPACE; i++)
			after += model[i] != 0;
		if (dropped && after > before)
			ck_assert_uint_le(dropped, before);
		check_model(&m, model);
	}
	extmap_free(&m);
}
END_TEST

/* Block-sized writes and punches, as the write-out makes them: most hit
 * exactly one extent or the inside of one (the in-place paths of
 * extmap_set), some are contiguous on the device with a neighbour. */
START_TEST(block_overwrites_match_model)
{
	static uint64_t model[SPACE];
	struct extmap m;
	uint64_t dev_next = 100000;
	const uint64_t B = 16;

	memset(model, 0, sizeof(model));
	extmap_init(&m);
	srand(777 + (unsigned)_i);
	ck_assert_int_eq(extmap_set(&m, 0, SPACE, 50000, NULL, NULL), 0);
	for (uint64_t b = 0; b < SPACE; b++)
		model[b] = 50000 + b + 1;
	for (int step = 0; step < 4000; step++) {
		uint64_t off = (uint64_t)(rand() % (int)(SPACE / B)) * B;
		uint64_t len = B * (1 + (uint64_t)(rand() % 3 == 0));
		if (off + len > SPACE)
			len = SPACE - off;
		uint64_t replaced = 0;
		dropped = 0;
		if (rand() % 8) {
			for (uint64_t b = 0; b < len; b++) {
				replaced += model[off + b] != 0;
				model[off + b] = dev_next + b + 1;
			}
			ck_assert_int_eq(extmap_set(&m, off, len, dev_next, count_drop, NULL), 0);
			ck_assert_uint_eq(dropped, replaced);
			dev_next += len + (uint64_t)(rand() % 2) * B;
		} else {
			for (uint64_t b = 0; b < len; b++) {
				replaced += model[off + b] != 0;
				model[off + b] = 0;
			}
			ck_assert_int_eq(extmap_punch(&m, off, len, count_drop, NULL), 0);
			ck_assert_uint_eq(dropped, replaced);
		}
		check_model(&m, model);
	}
	extmap_free(&m);
	ck_assert_uint_eq(extmap_bytes(&m), 0);
}
END_TEST

START_TEST(merge_contiguous_appends)
{
	struct extmap m;
	extmap_init(&m);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(extmap_set(&m, (uint64_t)i * 4096, 4096,
					    1 << 20 | (uint64_t)i * 4096, NULL, NULL), 0);
	ck_assert_uint_eq(m.n, 1);
	ck_assert_uint_eq(extmap_end(&m), 100 * 4096);
	/* Overwrite the middle: splits into three. */
	dropped = 0;
	ck_assert_int_eq(extmap_set(&m, 8192, 4096, 99u << 20, count_drop, NULL), 0);
	ck_assert_uint_eq(m.n, 3);
	ck_assert_uint_eq(dropped, 4096);
	/* Truncate to 6000 bytes: drops everything above. */
	dropped = 0;
	ck_assert_int_eq(extmap_punch(&m, 6000, UINT64_MAX - 6000, count_drop, NULL), 0);
	ck_assert_uint_eq(extmap_end(&m), 6000);
	ck_assert_uint_eq(dropped, 100 * 4096 - 6000);
	ck_assert_uint_eq(m.n, 1);
	ck_assert_uint_eq(extmap_find(&m, 5999), 0);
	ck_assert_uint_eq(extmap_find(&m, 6000), m.n);
	extmap_free(&m);
}
END_TEST

/* After extmap_reserve(m, 2) the next set or punch never allocates, even
 * when it splits an extent (the fs reserves before it logs a record, so
 * the apply after the append cannot fail): the array and its capacity stay
 * the same through every step of random set/punch sequences that keep the
 * map full of small extents. */
START_TEST(reserve_then_change_never_allocates)
{
	static uint64_t model[SPACE];
	struct extmap m;
	uint64_t dev_next = 1000;
	unsigned tight = 0;

	memset(model, 0, sizeof(model));
	extmap_init(&m);
	ck_assert_int_eq(extmap_reserve(&m, 0), 0);
	srand(99 + (unsigned)_i);
	for (int step = 0; step < 2000; step++) {
		uint64_t off = (uint64_t)rand() % SPACE;
		uint64_t len = 1 + (uint64_t)rand() % 40;
		if (off + len > SPACE)
			len = SPACE - off;
		ck_assert_int_eq(extmap_reserve(&m, 2), 0);
		ck_assert_uint_le(m.n + 2, m.cap);
		const struct extmap_ext *v = m.v;
		size_t cap = m.cap;
		tight += m.n + 2 == m.cap;
		if (rand() % 2) {
			for (uint64_t b = 0; b < len; b++)
				model[off + b] = dev_next + b + 1;
			ck_assert_int_eq(extmap_set(&m, off, len, dev_next, NULL, NULL), 0);
			dev_next += len + 1;	/* never contiguous: no merges */
		} else {
			for (uint64_t b = 0; b < len; b++)
				model[off + b] = 0;
			ck_assert_int_eq(extmap_punch(&m, off, len, NULL, NULL), 0);
		}
		ck_assert_ptr_eq(m.v, v);
		ck_assert_uint_eq(m.cap, cap);
		check_model(&m, model);
	}
	/* the sequences did reach a full array (n + 2 == cap) */
	ck_assert_uint_gt(tight, 0);
	extmap_free(&m);
}
END_TEST

/* zf_grow, which extmap_reserve and the other arrays grow with: doubling
 * from the minimum, as it was when it holds enough, NULL with the array
 * untouched when the size would overflow. */
START_TEST(grow_doubles_and_refuses_overflow)
{
	size_t cap = 0;
	uint64_t *v = zf_grow(NULL, &cap, 3, sizeof(*v), 8);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(cap, 8);
	v[7] = 42;
	ck_assert_ptr_eq(zf_grow(v, &cap, 8, sizeof(*v), 8), v);
	v = zf_grow(v, &cap, 9, sizeof(*v), 8);
	ck_assert_uint_eq(cap, 16);
	ck_assert_uint_eq(v[7], 42);
	v = zf_grow(v, &cap, 100, sizeof(*v), 8);
	ck_assert_uint_eq(cap, 128);
	ck_assert_ptr_null(zf_grow(v, &cap, SIZE_MAX / 4, sizeof(*v), 8));
	ck_assert_ptr_null(zf_grow(v, &cap, SIZE_MAX, 1, 8));
	ck_assert_uint_eq(cap, 128);
	ck_assert_uint_eq(v[7], 42);
	free(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("extmap");
	TCase *tc = tcase_create("core");
	tcase_add_loop_test(tc, random_ops_match_model, 0, 4);
	tcase_add_loop_test(tc, block_overwrites_match_model, 0, 4);
	tcase_add_test(tc, merge_contiguous_appends);
	tcase_add_loop_test(tc, reserve_then_change_never_allocates, 0, 2);
	tcase_add_test(tc, grow_doubles_and_refuses_overflow);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
