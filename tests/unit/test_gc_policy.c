/* test_gc_policy — unit tests of the collector's victim policy
 * (zonealloc/zalloc_victim.c): pure functions over zone views, no device.  The same
 * policy seen through the allocator (pinning, room, skip, backoff) is
 * tested in test_zalloc (gc_victim_choice, gc_young_zone_left_to_die). */
#include <check.h>
#include <stdlib.h>

#include "zonealloc/zalloc_victim.h"

#define KiB 1024ull
#define BS 4096u
#define ZCAP (768 * KiB)

static struct gc_zone_view view(uint32_t id, uint64_t valid, uint64_t age)
{
	return (struct gc_zone_view){ .id = id, .capacity = ZCAP, .valid = valid,
				      .age = age, .since_write = age };
}

START_TEST(gc_score_function)
{
	ck_assert(gc_score(ZCAP, ZCAP, 1000) < 0);
	ck_assert(gc_score(0, 0, 1000) < 0);
	ck_assert(gc_score(ZCAP, ZCAP / 2, 20 * ZCAP) > gc_score(ZCAP, ZCAP / 2, ZCAP));
	ck_assert(gc_score(ZCAP, ZCAP / 4, ZCAP) > gc_score(ZCAP, ZCAP / 2, ZCAP));
	/* age counts, in log scale: an old quarter-full zone beats a young
	 * fifth-full one, but not a young nearly empty one */
	ck_assert(gc_score(ZCAP, ZCAP / 4, 5 * ZCAP) > gc_score(ZCAP, ZCAP / 5, ZCAP));
	ck_assert(gc_score(ZCAP, ZCAP / 4, 1000 * ZCAP) < gc_score(ZCAP, ZCAP / 20, ZCAP));
	ck_assert(gc_score(ZCAP, 0, 0) > gc_score(ZCAP, BS, 0));
}
END_TEST

/* 1/8 of the zone in the background, 1/64 when writers wait, and a block. */
START_TEST(minimum_gain)
{
	ck_assert(!gc_gain_enough(ZCAP, ZCAP - ZCAP / 8 + BS, BS, false));
	ck_assert(gc_gain_enough(ZCAP, ZCAP - ZCAP / 8, BS, false));
	ck_assert(gc_gain_enough(ZCAP, ZCAP - ZCAP / 8 + BS, BS, true));
	ck_assert(!gc_gain_enough(ZCAP, ZCAP - ZCAP / 64 + BS, BS, true));
	ck_assert(gc_gain_enough(ZCAP, ZCAP - ZCAP / 64, BS, true));
	ck_assert(!gc_gain_enough(ZCAP, ZCAP, BS, true));
	ck_assert(!gc_gain_enough(ZCAP, ZCAP + BS, BS, true));	/* accounting bug */
	/* a tiny zone: at least a block */
	ck_assert(!gc_gain_enough(16 * KiB, 12 * KiB + 1, BS, true));
	ck_assert(gc_gain_enough(16 * KiB, 12 * KiB, BS, true));
}
END_TEST

/* Young zones of a flagged class are left to die in the background only;
 * other classes and urgent picks ignore the class life. */
START_TEST(young_zone_deferral)
{
	struct gc_zone_view v = view(0, ZCAP / 16, 2 * ZCAP);

	v.class_life = 3 * ZCAP;
	ck_assert(!gc_deferred(&v, false));	/* not flagged */
	v.defer_young = true;
	ck_assert(gc_deferred(&v, false));
	ck_assert(!gc_deferred(&v, true));	/* writers wait */
	v.since_write = 3 * ZCAP;
	ck_assert(!gc_deferred(&v, false));	/* as old as the class's life */
	v.since_write = 0;
	v.class_life = 0;			/* no life seen yet */
	ck_assert(!gc_deferred(&v, false));
	/* deferral is on the time since the last write, not the age (which
	 * an invalidation resets) */
	v = view(0, ZCAP / 16, 0);
	v.since_write = 4 * ZCAP;
	v.class_life = 3 * ZCAP;
	v.defer_young = true;
	ck_assert(!gc_deferred(&v, false));
}
END_TEST

/* The life follows the longest sample at once and forgets by 1/8 of the
 * gap per shorter one. */
START_TEST(class_life)
{
	uint64_t l = 0;

	l = gc_policy_life_note(l, 3 * ZCAP);
	ck_assert_uint_eq(l, 3 * ZCAP);
	l = gc_policy_life_note(l, 3 * ZCAP);
	ck_assert_uint_eq(l, 3 * ZCAP);
	l = gc_policy_life_note(l, ZCAP);
	ck_assert_uint_eq(l, 3 * ZCAP - (2 * ZCAP) / 8);
	l = gc_policy_life_note(l, 10 * ZCAP);
	ck_assert_uint_eq(l, 10 * ZCAP);
}
END_TEST

/* Cost-benefit in the background, greedy when writers wait; the first of
 * equals; -1 when nothing qualifies. */
START_TEST(pick)
{
	/* the zones of test_zalloc:gc_victim_choice, ages 5..1 zones */
	struct gc_zone_view v[4] = {
		view(10, ZCAP / 4, 5 * ZCAP), view(11, ZCAP / 2, 4 * ZCAP),
		view(12, ZCAP * 3 / 4, 3 * ZCAP), view(14, ZCAP / 5, 1 * ZCAP),
	};
	double sc;

	ck_assert_int_eq(gc_policy_pick(v, 0, BS, false, &sc), -1);
	ck_assert_int_eq(gc_policy_pick(v, 4, BS, false, &sc), 0);
	ck_assert(sc > 4.0 && sc < 4.5);	/* .75 * log2(7) / .5 */
	ck_assert_int_eq(gc_policy_pick(v, 4, BS, true, &sc), 3);
	ck_assert(sc == (double)(ZCAP - ZCAP / 5));
	ck_assert_int_eq(gc_policy_pick(v + 1, 3, BS, false, NULL), 2);
	/* equals: the first */
	v[1] = v[0];
	v[1].id = 99;
	ck_assert_int_eq(gc_policy_pick(v, 2, BS, true, NULL), 0);
	/* nothing worth it */
	v[0] = view(1, ZCAP - BS, 100 * ZCAP);
	ck_assert_int_eq(gc_policy_pick(v, 1, BS, false, NULL), -1);
	ck_assert_int_eq(gc_policy_pick(v, 1, BS, true, NULL), -1);
	/* a deferred zone is skipped in the background only */
	v[0] = view(1, ZCAP / 16, ZCAP);
	v[0].defer_young = true;
	v[0].class_life = 3 * ZCAP;
	v[1] = view(2, ZCAP / 2, ZCAP);
	ck_assert_int_eq(gc_policy_pick(v, 2, BS, false, NULL), 1);
	ck_assert_int_eq(gc_policy_pick(v, 2, BS, true, NULL), 0);
}
END_TEST

static Suite *gc_policy_suite(void)
{
	Suite *s = suite_create("gc_policy");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, gc_score_function);
	tcase_add_test(tc, minimum_gain);
	tcase_add_test(tc, young_zone_deferral);
	tcase_add_test(tc, class_life);
	tcase_add_test(tc, pick);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(gc_policy_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
