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

/* model[i] = device offset + 1 of file byte i, 0 = hole; space bytes.
 * Counts what disagrees and asserts once (each ck_assert costs Check a
 * write, and these run over thousands of extents per step). */
static void check_model(const struct extmap *m, const uint64_t *model, size_t space)
{
	uint64_t mapped = 0, bad = 0, unmerged = 0;
	const struct extmap_ext *p = NULL;
	struct extmap_cur c;
	size_t n = 0;

	ck_assert_int_eq(extmap_check(m), 0);
	for (const struct extmap_ext *e = extmap_seek(m, 0, &c); e; e = extmap_next(m, &c)) {
		bad += e->len == 0;
		if (p) {
			bad += p->off + p->len > e->off;
			/* kept merged: no boundary is set in these tests */
			unmerged += p->off + p->len == e->off && p->dev + p->len == e->dev;
		}
		for (uint64_t b = 0; b < e->len; b++)
			bad += model[e->off + b] != e->dev + b + 1;
		mapped += e->len;
		p = e;
		n++;
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_eq(unmerged, 0);
	uint64_t want = 0;
	for (size_t i = 0; i < space; i++)
		want += model[i] != 0;
	ck_assert_uint_eq(mapped, want);
	ck_assert_uint_eq(extmap_bytes(m), mapped);
	ck_assert_uint_eq(extmap_count(m), n);
	ck_assert_uint_eq(extmap_end(m), p ? p->off + p->len : 0);
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
		check_model(&m, model, SPACE);
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
		check_model(&m, model, SPACE);
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
	struct extmap_cur c;
	ck_assert_ptr_eq(extmap_seek(&m, 5999, &c), extmap_nth(&m, 0, &c));
	ck_assert_ptr_null(extmap_seek(&m, 6000, &c));
	extmap_free(&m);
}
END_TEST

#define BIG 65536u	/* file bytes modelled by the multi-block tests */

static struct extmap_node *nodes_of(struct extmap *m)
{
	return m->idxcap > 1 ? m->idx : &m->one;
}

/* What a map has allocated: the index and every block with its size. */
struct held {
	const void *idx;
	size_t idxcap, n;
	const struct extmap_blk *blk[2048];
	uint32_t cap[2048];
};

static void held_add(struct held *h, const struct extmap_blk *k)
{
	ck_assert_uint_lt(h->n, 2048);
	h->blk[h->n] = k;
	h->cap[h->n++] = k->cap;
}

static void held_of(struct extmap *m, struct held *h)
{
	h->idx = m->idxcap > 1 ? m->idx : NULL;
	h->idxcap = m->idxcap;
	h->n = 0;
	for (size_t b = 0; b < m->nblk; b++)
		held_add(h, nodes_of(m)[b].blk);
	for (const struct extmap_blk *k = m->spare; k; k = k->next)
		held_add(h, k);
}

/* Nothing was allocated or grown since `was`: the same index, and every
 * block one that was there, at its size. */
static void held_nothing_new(struct extmap *m, const struct held *was)
{
	struct held now;
	held_of(m, &now);
	ck_assert_ptr_eq(now.idx, was->idx);
	ck_assert_uint_eq(now.idxcap, was->idxcap);
	size_t fresh = 0;
	for (size_t i = 0; i < now.n; i++) {
		size_t j = 0;
		while (j < was->n && was->blk[j] != now.blk[i])
			j++;
		fresh += j == was->n || now.cap[i] != was->cap[j];
	}
	ck_assert_msg(fresh == 0, "%zu of %zu blocks new or grown", fresh, now.n);
}

/* Map [off, off+len) in model and map at a device offset no neighbour
 * ends at (no merges: every set adds what it says). */
static void model_set(struct extmap *m, uint64_t *model, uint64_t off, uint64_t len,
		      uint64_t *dev_next)
{
	for (uint64_t b = 0; b < len; b++)
		model[off + b] = *dev_next + b + 1;
	ck_assert_int_eq(extmap_set(m, off, len, *dev_next, NULL, NULL), 0);
	*dev_next += len + 1;
}

static void model_punch(struct extmap *m, uint64_t *model, uint64_t off, uint64_t len)
{
	for (uint64_t b = 0; b < len; b++)
		model[off + b] = 0;
	ck_assert_int_eq(extmap_punch(m, off, len, NULL, NULL), 0);
}

/* After extmap_reserve(m, 2) the next set or punch never allocates, even
 * when it splits an extent and its block (the fs reserves before it logs
 * a record, so the apply after the append cannot fail): no block or index
 * is allocated or grown in any step of random set/punch sequences over
 * thousands of small extents (tens of blocks). */
START_TEST(reserve_then_change_never_allocates)
{
	static uint64_t model[BIG];
	struct extmap m;
	struct held was;
	uint64_t dev_next = 1000000;
	unsigned splits = 0, merges = 0;

	memset(model, 0, sizeof(model));
	extmap_init(&m);
	ck_assert_int_eq(extmap_reserve(&m, 0), 0);
	srand(99 + (unsigned)_i);
	for (int step = 0; step < 6000; step++) {
		uint64_t off = (uint64_t)rand() % BIG;
		uint64_t len = 1 + (uint64_t)rand() % (step % 500 == 499 ? 4000 : 12);
		if (off + len > BIG)
			len = BIG - off;
		ck_assert_int_eq(extmap_reserve(&m, 2), 0);
		held_of(&m, &was);
		size_t nblk = m.nblk;
		if (rand() % 3)
			model_set(&m, model, off, len, &dev_next);
		else
			model_punch(&m, model, off, len);
		held_nothing_new(&m, &was);
		splits += m.nblk > nblk;
		merges += m.nblk < nblk;
		if (step % 16 == 0 || m.nblk != nblk)
			check_model(&m, model, BIG);
		else
			ck_assert_int_eq(extmap_check(&m), 0);
	}
	/* the sequences did split and merge blocks */
	ck_assert_uint_gt(splits, 10);
	ck_assert_uint_gt(merges, 0);
	check_model(&m, model, BIG);
	extmap_free(&m);
}
END_TEST

/* Split-three every block's extents until each block is full or one
 * short; returns the number of blocks. */
static size_t fill_blocks(struct extmap *m, uint64_t *model, uint64_t *dev_next)
{
	for (size_t b = 0; b < m->nblk; b++) {
		struct extmap_blk *k = nodes_of(m)[b].blk;
		for (uint32_t i = 0; i < k->n && k->n + 2 <= k->cap; i++) {
			const struct extmap_ext e = k->v[i];
			if (e.len >= 3)
				model_set(m, model, e.off + 1, 1, dev_next);
			k = nodes_of(m)[b].blk;
		}
	}
	return m->nblk;
}

/* extmap_reserve(m, k) holds for a whole sequence that inserts k extents,
 * however many blocks it splits: a copy's punch and its n runs in order
 * into a hole (reserve n + 2: a split every half block), and a
 * collector's runs that each split one extent of a different full block
 * in three (reserve 2 per run: a split per run). */
START_TEST(reserve_holds_for_a_sequence)
{
	static uint64_t model[BIG];
	struct extmap m;
	struct held was;
	uint64_t dev_next = 1000000;
	const uint32_t n = 600 + 200 * (uint32_t)_i;
	const uint64_t hole = BIG / 2, hole_end = hole + 4 * (uint64_t)n + 8;

	memset(model, 0, sizeof(model));
	extmap_init(&m);
	for (uint64_t off = 0; off < BIG; off += 8)
		if (off + 4 <= hole || off >= hole_end)
			model_set(&m, model, off, 4, &dev_next);
	/* a copy of n runs into the hole */
	size_t nblk = m.nblk;
	ck_assert_int_eq(extmap_reserve(&m, n + 2), 0);
	held_of(&m, &was);
	model_punch(&m, model, hole, 4 * (uint64_t)n + 3);
	for (uint32_t i = 0; i < n; i++)
		model_set(&m, model, hole + 4 * (uint64_t)i, 3, &dev_next);
	held_nothing_new(&m, &was);
	check_model(&m, model, BIG);
	ck_assert_uint_ge(m.nblk, nblk + 3);	/* several splits */
	/* one run into each full block */
	size_t r = fill_blocks(&m, model, &dev_next);
	size_t full = 0;
	for (size_t b = 0; b < m.nblk; b++)
		full += nodes_of(&m)[b].blk->n + 2 > EXTMAP_BLK;
	ck_assert_uint_gt(full, r / 2);
	ck_assert_int_eq(extmap_reserve(&m, 2 * r), 0);
	held_of(&m, &was);
	nblk = m.nblk;
	for (size_t b = 0; b < r; b++) {
		const struct extmap_blk *k = nodes_of(&m)[b + (m.nblk - nblk)].blk;
		for (uint32_t i = 0; i < k->n; i++)
			if (k->v[i].len >= 3) {
				model_set(&m, model, k->v[i].off + 1, 1, &dev_next);
				break;
			}
	}
	held_nothing_new(&m, &was);
	check_model(&m, model, BIG);
	ck_assert_uint_ge(m.nblk, nblk + full);
	extmap_free(&m);
}
END_TEST

/* Random sets and punches, small and large, over thousands of extents:
 * the model, the layout's invariants, and the drop callback's count. */
START_TEST(many_blocks_match_model)
{
	static uint64_t model[BIG];
	struct extmap m;
	uint64_t dev_next = 1000000;
	size_t most = 0;

	memset(model, 0, sizeof(model));
	extmap_init(&m);
	srand(31 + (unsigned)_i);
	for (int step = 0; step < 3000; step++) {
		uint64_t off = (uint64_t)rand() % BIG;
		uint64_t len = 1 + (uint64_t)rand() % (rand() % 50 ? 16 : 9000);
		if (off + len > BIG)
			len = BIG - off;
		uint64_t replaced = 0;
		for (uint64_t b = 0; b < len; b++)
			replaced += model[off + b] != 0;
		dropped = 0;
		if (rand() % 5) {
			for (uint64_t b = 0; b < len; b++)
				model[off + b] = dev_next + b + 1;
			ck_assert_int_eq(extmap_set(&m, off, len, dev_next, count_drop, NULL), 0);
			dev_next += len + (uint64_t)(rand() % 2);	/* sometimes contiguous */
		} else {
			for (uint64_t b = 0; b < len; b++)
				model[off + b] = 0;
			ck_assert_int_eq(extmap_punch(&m, off, len, count_drop, NULL), 0);
		}
		ck_assert_uint_eq(dropped, replaced);
		most = ZF_MAX(most, m.nblk);
		check_model(&m, model, BIG);
	}
	ck_assert_uint_gt(most, 10);
	/* truncate to nothing: one empty block stays, bytes and count 0 */
	ck_assert_int_eq(extmap_punch(&m, 0, UINT64_MAX, NULL, NULL), 0);
	memset(model, 0, sizeof(model));
	check_model(&m, model, BIG);
	ck_assert_uint_eq(m.nblk, 1);
	extmap_free(&m);
}
END_TEST

/* A file of a few extents keeps one small block and no spares; the
 * block grows to full size only when it fills. */
START_TEST(small_maps_stay_small)
{
	struct extmap m;
	uint64_t model[64] = { 0 }, dev_next = 1000;

	extmap_init(&m);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(extmap_reserve(&m, 2), 0);
		model_set(&m, model, (uint64_t)i * 10, 5, &dev_next);
	}
	ck_assert_int_eq(extmap_reserve(&m, 2), 0);
	ck_assert_uint_eq(m.nblk, 1);
	ck_assert_uint_le(m.idxcap, 1);
	ck_assert_uint_eq(m.nspare, 0);
	ck_assert_uint_eq(m.one.blk->cap, 8);
	check_model(&m, model, 64);
	extmap_free(&m);
}
END_TEST

/* extmap_nth and a cursor from extmap_seek walk the same extents. */
START_TEST(nth_agrees_with_seek)
{
	struct extmap m;
	struct extmap_cur c, d;
	uint64_t dev = 1000;

	extmap_init(&m);
	for (uint64_t off = 0; off < 3 * EXTMAP_BLK * 10; off += 10, dev += 7)
		ck_assert_int_eq(extmap_set(&m, off, 5, dev, NULL, NULL), 0);
	ck_assert_uint_ge(m.nblk, 3);
	size_t k = 0;
	for (const struct extmap_ext *e = extmap_seek(&m, 0, &c); e; e = extmap_next(&m, &c), k++) {
		ck_assert_ptr_eq(extmap_nth(&m, k, &d), e);
		ck_assert_ptr_eq(extmap_seek(&m, e->off + 4, &d), e);
		ck_assert_uint_eq(d.b, c.b);
		ck_assert_uint_eq(d.i, c.i);
	}
	ck_assert_uint_eq(k, extmap_count(&m));
	ck_assert_ptr_null(extmap_nth(&m, k, &d));
	ck_assert_ptr_null(extmap_next(&m, &c));
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
	tcase_add_loop_test(tc, reserve_holds_for_a_sequence, 0, 2);
	tcase_add_loop_test(tc, many_blocks_match_model, 0, 2);
	tcase_add_test(tc, small_maps_stay_small);
	tcase_add_test(tc, nth_agrees_with_seek);
	tcase_add_test(tc, grow_doubles_and_refuses_overflow);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
