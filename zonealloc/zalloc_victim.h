/* zalloc_victim — the victim policy: which zone the collector takes next.
 *
 * Purpose: the victim policy on its own, as pure functions over snapshots
 * of zone state (struct gc_zone_view), so that it can be read, changed and
 * unit-tested without a device or an allocator.  The allocator
 * (zonealloc/zalloc_gc.c) decides which zones may be collected at all --
 * FULL, not leased, busy, pending, pinned, backing off, with no bytes in
 * flight, whose live data fits in the collector's room -- fills one view
 * per such zone, and asks gc_policy_pick() which one to take.
 *
 * The policy:
 * - Cost-benefit in the background: maximise
 *       (1 - u) * log2(2 + age / capacity) / 2u,     u = valid / capacity,
 *   the bytes freed, weighted by age, over the cost of reading and writing
 *   the live bytes.  age = device bytes written since the zone's data last
 *   changed: its last write or its last invalidation (a zone whose data is
 *   dying now is hot: leave it to die).  The age counts in log scale: in
 *   LSM stores a zone's age predicts little of how long its live tables
 *   still have.
 * - Greedy when writers wait (urgent): the zone that frees most.
 * - Minimum gain: a victim must free at least capacity / GC_MIN_GAIN in the
 *   background, capacity / GC_MIN_GAIN_URGENT when writers wait, and at
 *   least a block: copying a whole zone to free a rewritten page is never
 *   worth it, so ENOSPC comes that much before valid data fills the device.
 * - Young-zone deferral: in the background a zone of a class marked
 *   defer_young (the WAL's: it holds the start of the live WAL, which dies
 *   at the next flush) is no candidate while younger than its class's
 *   life.  For longer-lived classes the age in the score does better.
 * - Class life: how long after their last write a class's zones have
 *   recently gone on dying whole by themselves (gc_policy_life_note()).
 * Measurements behind these choices: docs/placement.md.
 *
 * Invariants: every function is pure (no I/O, no locks, no global state);
 * units are bytes.  Thread safety: trivially safe.
 */
#ifndef ZONEFUSE_ZALLOC_VICTIM_H
#define ZONEFUSE_ZALLOC_VICTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GC_MIN_GAIN 8u		/* background victims free >= capacity / 8 */
#define GC_MIN_GAIN_URGENT 64u	/* greedy ones >= capacity / 64 */

/* One collectable zone as the policy sees it. */
struct gc_zone_view {
	uint32_t id;		/* the caller's (zone index); returned by pick */
	uint64_t capacity;	/* bytes */
	uint64_t valid;		/* live bytes */
	uint64_t age;		/* device bytes written since its data last
				 * changed (last write or invalidation) */
	uint64_t since_write;	/* device bytes written since its last write */
	uint64_t class_life;	/* its class's life (0: none seen yet) */
	bool defer_young;	/* its class's young zones are left to die */
};

/* The cost-benefit score; < 0 when nothing is to gain. */
double gc_score(uint64_t capacity, uint64_t valid, uint64_t age);
/* Does collecting a zone free enough to be worth its copying? */
bool gc_gain_enough(uint64_t capacity, uint64_t valid, uint32_t block, bool urgent);
/* Is the zone left to die for now (young-zone deferral, background only)? */
bool gc_deferred(const struct gc_zone_view *v, bool urgent);
/* Index into v[0..n) of the victim to collect (the first of equals), or
 * -1 when none qualifies (gain, deferral).  block: the device block size. */
ptrdiff_t gc_policy_pick(const struct gc_zone_view *v, size_t n, uint32_t block,
			 bool urgent, double *score);
/* A class's life after one of its zones died whole `sample` device bytes
 * after its last write: follows the longest at once, forgets it slowly (by
 * 1/8 of the gap per shorter sample), so it reads "zones of this class may
 * still be dying this long after they were written". */
uint64_t gc_policy_life_note(uint64_t life, uint64_t sample);

#endif
