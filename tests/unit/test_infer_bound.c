/* test_infer_bound — guessed LSM levels stay within the levels the LSM has.
 *
 * A compaction job's level is guessed as its dying inputs' level + 1, and
 * those inputs' levels were guessed the same way: while no exact level
 * (MANIFEST) comes in, a run of jobs whose inputs are the previous job's
 * outputs walks one level deeper per job.  Measured with LevelDB's IoT
 * ingest at 80 % fill on 16 MiB zones while the MANIFEST was not tailed:
 * creates at L5-L7 of a database with L0-L3.  The bound: a guess is at
 * most one below the deepest level holding a table of exact level. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "lsm/lifetime.h"
#include "testlib.h"

#define MiB (1024ull * 1024)
#define TID_DB 500		/* LevelDB: one thread flushes and compacts */
#define TID_SETUP 900

struct run {
	struct lifetime_infer *li;
	uint64_t next, now, clock;
	int max_guess;		/* deepest level guessed at a create */
};

static void run_init(struct run *r)
{
	memset(r, 0, sizeof(*r));
	r->li = lifetime_infer_new();
	ck_assert_ptr_nonnull(r->li);
	r->next = 1;
	r->now = 1000000000ull;
	r->max_guess = -1;
}

static void step(struct run *r, uint64_t bytes)
{
	r->now += 1000000;	/* 1 ms: every event well within the batch windows */
	r->clock += bytes;
}

static uint64_t table(struct run *r, uint32_t tid)
{
	struct lifetime_guess g;
	uint64_t f = r->next++;

	lifetime_infer_create(r->li, f, LIFETIME_KIND_TABLE, tid, r->now, r->clock,
			      NULL, NULL, &g);
	lifetime_infer_seal(r->li, f, 2 * MiB);
	if (tid == TID_DB && g.level > r->max_guess)
		r->max_guess = g.level;
	ck_assert_int_eq(lifetime_infer_check(r->li), 0);
	step(r, 2 * MiB);
	return f;
}

static uint64_t exact_table(struct run *r, int level)
{
	uint64_t f = table(r, TID_SETUP);

	lifetime_infer_set_level(r->li, f, level, NULL);
	ck_assert_int_eq(lifetime_infer_level(r->li, f), level);
	return f;
}

static void unlink_table(struct run *r, uint64_t f)
{
	struct lifetime_fix fx[LIFETIME_MAX_FIXES];

	lifetime_infer_unlink(r->li, f, TID_DB, r->now, r->clock, fx);
	ck_assert_int_eq(lifetime_infer_check(r->li), 0);
	step(r, 0);
}

#define OUTS 4

/* One compaction job on the database thread: OUTS outputs, then its inputs
 * die.  out[] gets the outputs. */
static void job(struct run *r, const uint64_t *in, int nin, uint64_t *out)
{
	for (int i = 0; i < OUTS; i++)
		out[i] = table(r, TID_DB);
	for (int i = 0; i < nin; i++)
		unlink_table(r, in[i]);
}

/* jobs chained on their outputs; the deepest level believed at the end */
static int chain(struct run *r, uint64_t *prev, int nprev, int jobs)
{
	uint64_t in[OUTS], out[OUTS];
	int deepest = -1;

	memcpy(in, prev, (size_t)nprev * sizeof(*in));
	for (int j = 0; j < jobs; j++) {
		job(r, in, nprev, out);
		memcpy(in, out, sizeof(out));
		nprev = OUTS;
	}
	for (int i = 0; i < OUTS; i++) {
		int l = lifetime_infer_level(r->li, out[i]);

		if (l > deepest)
			deepest = l;
		prev[i] = out[i];
	}
	return deepest;
}

/* The LSM holds L1-L3 (exact, from the MANIFEST); no MANIFEST update comes
 * while 8 jobs run, each compacting the previous one's outputs. */
START_TEST(no_level_below_the_deepest_exact_plus_one)
{
	struct run r;
	uint64_t prev[OUTS];

	run_init(&r);
	lifetime_infer_create(r.li, r.next++, LIFETIME_KIND_WAL, TID_DB, r.now,
			      r.clock, NULL, NULL, NULL);
	exact_table(&r, 1);
	prev[0] = exact_table(&r, 2);
	exact_table(&r, 3);
	ck_assert_int_le(chain(&r, prev, 1, 8), 4);
	ck_assert_int_le(r.max_guess, 4);
	/* a table the MANIFEST puts at L4 opens L5 to the guesses */
	exact_table(&r, 4);
	ck_assert_int_eq(chain(&r, prev, OUTS, 3), 5);
	ck_assert_int_le(r.max_guess, 5);
	lifetime_infer_free(r.li);
}
END_TEST

/* A legitimate step down is not cut: inputs of exact level 3 give an L4
 * job. */
START_TEST(one_below_the_deepest_exact_is_allowed)
{
	struct run r;
	uint64_t in[2], out[OUTS];

	run_init(&r);
	in[0] = exact_table(&r, 3);
	in[1] = exact_table(&r, 3);
	job(&r, in, 2, out);
	for (int i = 0; i < OUTS; i++)
		ck_assert_int_eq(lifetime_infer_level(r.li, out[i]), 4);
	lifetime_infer_free(r.li);
}
END_TEST

/* Before any exact level there is nothing to bound by: RocksDB or LevelDB
 * whose MANIFEST is not followed keep the plain inference. */
START_TEST(no_bound_without_exact_levels)
{
	struct run r;
	uint64_t prev[OUTS];

	run_init(&r);
	prev[0] = table(&r, TID_SETUP);
	lifetime_infer_set_level(r.li, prev[0], 2, NULL);
	/* an exact table that dies takes the bound with it */
	ck_assert_int_gt(chain(&r, prev, 1, 6), 4);
	lifetime_infer_free(r.li);
}
END_TEST

static Suite *bound_suite(void)
{
	Suite *s = suite_create("infer_bound");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, no_level_below_the_deepest_exact_plus_one);
	tcase_add_test(tc, one_below_the_deepest_exact_is_allowed);
	tcase_add_test(tc, no_bound_without_exact_levels);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tl_run(bound_suite());
}
