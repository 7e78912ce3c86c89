/* zalloc_priv.h — the allocator's private state, shared by its files:
 *   zalloc.c        space accounting: life cycle, the space sums, zone
 *                   lists, unclaimed ranges, valid bytes, stamped resets,
 *                   lending to the metadata log, stats;
 *   zalloc_lease.c  leases and limits: the open/active budget, granting,
 *                   finishing or closing to make room, releasing;
 *   zalloc_space.c  the one place an acquirer waits for space (reserve,
 *                   floor, patience);
 *   zalloc_gc.c     the allocator's side of the GC protocol (victim pick
 *                   and pin, the collector's room, discard);
 *   zalloc_victim.c the pure victim policy (zalloc_victim.h).
 * Nothing outside zonealloc/ includes this header (contract: zalloc.h).
 *
 * Zone state: one struct za_zone per data zone, on at most one intrusive
 * list at a time:
 *   FREE       device-EMPTY zones, FIFO (reset zones go to the tail, so
 *              zones rotate: cheap wear levelling);
 *   CLASS(c)   zones open (IMP/EXP_OPEN or CLOSED, not full) for class c,
 *              leased or not;
 *   PENDING    FULL zones with no valid byte, waiting for a commit to reset
 *              them; FIFO, hence sorted by stamp.
 * FULL zones that still hold valid data, zones being finished or reset,
 * retired (READONLY/OFFLINE or unreadable) zones and zones lent to the
 * metadata log are on no list.
 *
 * Budget: nr_open / nr_active count data zones by the cond zalloc believes
 * (za_set_cond() is the only writer of z->cond).  A zone leased from FREE
 * (or from CLOSED) is counted as IMP_OPEN from the moment it is leased; the
 * device opens it implicitly on the first write.  A lease released with
 * nothing written returns an EMPTY zone to FREE (and a CLOSED zone to
 * CLOSED), so the cache matches the device again.
 *
 * Space sums: za->sums is the sum over the zones of their acct (struct
 * za_sums), which za_zone_sync() recomputes from the zone's own fields
 * after every change of them, so free, valid, reclaimable and collector
 * figures cost O(1) per request whatever the number of zones.
 * zalloc_check() recounts them from scratch (unit tests, fsck, and every
 * zalloc_get_stats() with zalloc_params.self_check).
 *
 * Reset stamps: commit_seq starts at 1.  A zone queued for reset records
 * stamp = commit_seq at queueing time; zalloc_commit_begin() returns
 * t = commit_seq and increments it.  So "queued before begin returned t" is
 * exactly stamp <= t, and zalloc_commit_end(t) resets every queued zone
 * with stamp <= t.  (This assumes, as mlog does, that a commit which
 * completes makes durable every record appended before its begin.)
 *
 * Unclaimed bytes (reset safety whatever the order of release and
 * valid_add): every lease opens an "unclaimed" range [offset, offset+len);
 * valid_add trims it (before or after the release: both orders are fine),
 * the release trims it to the bytes really written.  A zone with an
 * unclaimed range left is never queued for reset, so bytes written through
 * a lease cannot be reset before their extent is accounted, even if the
 * rest of the zone dies and commits run meanwhile.  The ranges live in one
 * small table (za->ur) that holds only the leases in flight and those
 * released but not yet accounted; z->nunclaimed says if a zone has any.
 *
 * Locking: one mutex, za->mu, a leaf lock: zalloc calls nothing that takes
 * another lock while holding it.  Every field below is marked with what
 * protects it:
 *   [mu]     za->mu;
 *   [const]  set by zalloc_create() before the allocator is published,
 *            read-only after (no lock needed).
 * Zone management I/O at run time (finish/close in an acquire, report/
 * finish in a release after an error, reset in zalloc_commit_end) and the
 * callbacks (need_space, gc kick) run with za->mu dropped; the zone
 * concerned is marked leased/busy/resetting meanwhile so nobody else
 * touches it.  zalloc_mount_done() runs its I/O with za->mu held (nothing
 * else runs during mount).  Helpers named za_* (and the static ones that
 * touch [mu] state) are called with za->mu held; the ones that change
 * state assert it in debug builds (za_assert_held()).
 */
#ifndef ZONEFUSE_ZALLOC_PRIV_H
#define ZONEFUSE_ZALLOC_PRIV_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "zonealloc/zalloc_victim.h"
#include "zonealloc/zalloc.h"

#define ZA_NIL UINT32_MAX
#define ZA_UNLIMITED UINT32_MAX

enum {
	ZA_L_NONE = 0,
	ZA_L_FREE = 1,
	ZA_L_PENDING = 2,
	ZA_L_CLASS = 3,		/* + class */
	ZA_L_NR = ZA_L_CLASS + ZALLOC_NR_CLASSES,
};

/* Per-zone shares of the space figures, summed incrementally so that no
 * request walks the zones (za_zone_sync()).  Bytes unless said otherwise. */
struct za_sums {
	uint64_t valid;		/* referenced bytes (every zone) */
	uint64_t capacity;	/* capacity of usable zones (not retired or lent) */
	uint64_t lent_cap;	/* capacity of zones lent to the log (not retired) */
	uint64_t free;		/* room left in usable EMPTY or active zones */
	uint64_t reclaimable;	/* written but unreferenced, usable zones */
	uint64_t skipped;	/* capacity a finish skipped, usable zones
				 * (part of reclaimable) */
	uint64_t gc_reclaim;	/* capacity - valid of the collector's candidates
				 * worth collecting (za_gc_candidate(z, 0)) */
	uint32_t gc_cand;	/* zones: those candidates */
	uint32_t gc_cand_backoff; /* zones: of them, with gc_retry_ns set */
};

struct za_zone {
	uint64_t start;		/* [const] bytes, absolute */
	uint64_t capacity;	/* [const] bytes */
	/* all the rest: [mu] */
	uint64_t wp;		/* bytes, absolute; start + capacity once FULL */
	uint64_t written;	/* bytes really written since the last reset
				 * (excludes the tail skipped by a finish) */
	uint64_t valid;		/* bytes referenced by the file system */
	uint64_t resets;	/* since mount */
	uint64_t reset_stamp;	/* commit stamp when queued for reset */
	uint64_t wseq;		/* write sequence of the last write (LRU close) */
	uint64_t wclock;	/* za->dev_bytes after its last write (GC age) */
	uint64_t dclock;	/* za->dev_bytes at its last invalidation */
	uint64_t lease_len;	/* bytes of the outstanding lease */
	uint32_t nunclaimed;	/* unclaimed ranges of this zone in za->ur */
	uint32_t prev, next;	/* list links (zone indices relative to first) */
	uint8_t list;		/* ZA_L_* */
	uint8_t cond;		/* enum zdev_zone_cond, as we believe it */
	uint8_t cls;		/* class (stream index) of its data */
	bool leased;
	bool adopted;		/* class set by zalloc_zone_adopt() */
	bool busy;		/* finish/close I/O in flight */
	bool resetting;		/* reset I/O in flight */
	bool retired;		/* damaged: never written or reset again */
	bool was_closed;	/* leased from CLOSED */
	bool gc;		/* being collected: never queued for reset */
	uint64_t gc_retry_ns;	/* not a victim again before this time */
	bool lease_gc;		/* the outstanding lease is the collector's */
	bool gc_dest;		/* opened by the collector: its destination
				 * (the only zones it writes into), not for
				 * ordinary writers (until reset) */
	bool lent;		/* the metadata log's (zalloc_lend): on no
				 * list, cond EMPTY in the budget's books */
	struct za_sums acct;	/* its share of za->sums, as last synced */
};

struct za_list {
	uint32_t head, tail, count;	/* [mu] */
};

struct zalloc {
	struct zdev *dev;		/* [const] */
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* waits under mu: a release, a finish, a
					 * reset, a GC step or a setting changed */

	uint32_t first, nr;		/* [const] data zones */
	uint64_t zone_size;		/* [const] */
	uint32_t bs;			/* [const] block size */
	uint32_t act_budget;		/* [const] ZA_UNLIMITED = no limit */
	uint32_t open_budget;		/* [const] */
	uint32_t max_stripe;		/* [const] */
	uint64_t max_cap;		/* [const] largest zone capacity */
	bool self_check;		/* [const] zalloc_params.self_check */
	bool mounted;			/* [mu] zalloc_mount_done() ran */

	struct za_zone *z;		/* [const] the array; elements [mu] */
	struct za_list lists[ZA_L_NR];	/* [mu] */

	uint32_t nr_open, nr_active;	/* [mu] budget books (za_set_cond) */
	struct za_sums sums;		/* [mu] sum of every zone's acct: kept by
					 * za_zone_sync() after each change of a
					 * zone; zalloc_check() recounts */
	uint32_t leased_total, leased_cls[ZALLOC_NR_CLASSES];	/* [mu] */
	uint32_t nr_busy, nr_resetting;	/* [mu] I/O in flight */
	uint32_t waiters;		/* [mu] acquirers blocked now */
	uint32_t space_waiters;		/* [mu] in zalloc_wait_room() now */
	uint64_t space_need;		/* [mu] bytes the largest of them needs */
	_Atomic uint64_t room_held;	/* bytes zalloc_wait_room() admitted that
					 * its callers have not yet counted in
					 * their buffered(); added under mu,
					 * taken back by zalloc_room_done() */

	uint64_t commit_seq;		/* [mu] next commit ticket */
	uint64_t write_seq;		/* [mu] */

	struct za_range {	/* leased bytes not yet claimed by valid_add */
		uint32_t zi;	/* zone index (relative) */
		uint64_t lo, hi;	/* bytes, absolute */
	} *ur;				/* [mu] */
	uint32_t nur, cap_ur;		/* [mu] */
	uint64_t dev_bytes, class_bytes[ZALLOC_NR_CLASSES];	/* [mu] */
	uint64_t zone_resets, zone_finishes;			/* [mu] */
	uint64_t class_fallbacks;	/* [mu] leases in another class's zone
					 * (za_try_other_class) */

	void (*need_space_cb)(void *arg);	/* [mu] called without it */
	void *need_space_arg;			/* [mu] */

	/* zones lent to the metadata log, and how many it may need at once
	 * (zalloc_set_log_reserve): writers leave it the difference */
	uint32_t nr_lent, log_reserve;		/* [mu] */

	/* garbage collection (zalloc_set_gc) */
	bool gc_enabled;		/* [mu] */
	uint32_t gc_reserve;		/* [mu] FREE zones only the collector may take */
	void (*gc_kick)(void *arg);	/* [mu] called without it */
	void *gc_arg;			/* [mu] */
	uint32_t gc_waiters;		/* [mu] acquirers waiting for the collector now */
	uint32_t gc_active;		/* [mu] victims being collected */
	uint64_t gc_bytes, gc_class_bytes[ZALLOC_NR_CLASSES];		/* [mu] */
	uint64_t gc_runs;					/* [mu] */
	uint64_t gc_emptied;		/* [mu] victims unpinned with no valid byte */
	uint64_t gc_skipped;		/* [mu] bytes zalloc_gc_skipped() */
	uint64_t gc_waits, gc_wait_ns;	/* [mu] waits for the collector (both kinds) */
	uint64_t gc_reserve_grants;	/* [mu] */
	uint64_t gc_evacuated;		/* [mu] valid bytes that left zones being collected */
	uint64_t reserve_taken;		/* [mu] FREE zones leased by others out of the reserve */
	uint64_t class_resets[ZALLOC_NR_CLASSES], class_finishes[ZALLOC_NR_CLASSES];	/* [mu] */
	/* per class: how long its zones take to die whole after their last
	 * write, device bytes (class_life_note(); 0 = none seen yet) [mu] */
	uint64_t class_life[ZALLOC_NR_CLASSES];
	uint8_t stream_flags[ZALLOC_NR_CLASSES];	/* [mu] ZALLOC_STREAM_* */
	struct gc_zone_view *views;	/* [mu] nr entries: zalloc_gc_pick's */
};

/* Debug builds: za->mu is an error-checking mutex, so relocking it from
 * its owner fails with EDEADLK instead of deadlocking: that is the check.
 * (Release builds (NDEBUG) use a normal mutex and check nothing.) */
#define za_assert_held(za) \
	assert(pthread_mutex_lock((pthread_mutex_t *)&(za)->mu) == EDEADLK)

/* Who asks for a lease: a writer, a writer granted the reserve after
 * waiting ZALLOC_GC_PATIENCE_NS for a collector that made no progress, or
 * the collector itself. */
enum za_who { ZA_USER, ZA_GRANT, ZA_GC };

static inline uint64_t za_zremain(const struct za_zone *z)
{
	return z->start + z->capacity - z->wp;
}

static inline uint32_t za_zidx(const struct zalloc *za, const struct za_zone *z)
{
	return (uint32_t)(z - za->z);
}

/* zalloc.c: space accounting (all with za->mu held) */
/* Bring z's share of za->sums up to date: call after every change of a
 * field the shares read (cond, wp, valid, list, lease, busy, resetting,
 * retired, lent, gc, gc_retry_ns, nunclaimed).  Idempotent, O(1). */
void za_zone_sync(struct zalloc *za, struct za_zone *z);
void za_list_del(struct zalloc *za, struct za_zone *z);
void za_list_add(struct zalloc *za, struct za_zone *z, uint8_t list, bool at_head);
/* Unclaimed ranges: room for one more (0 or -ENOMEM); a lease's range
 * [lo, hi) of z (0 or -ENOMEM); trim [lo, hi) out of z's ranges. */
int za_unclaimed_reserve(struct zalloc *za);
int za_unclaimed_add(struct zalloc *za, struct za_zone *z, uint64_t lo, uint64_t hi);
void za_unclaimed_trim(struct zalloc *za, struct za_zone *z, uint64_t lo, uint64_t hi);
void za_queue_reset(struct zalloc *za, struct za_zone *z);
/* Zone state changes: reached capacity or finished (queued for reset if
 * empty); reset (FREE again); damaged (never written or reset again). */
void za_mark_full(struct zalloc *za, struct za_zone *z);
void za_make_free(struct zalloc *za, struct za_zone *z);
void za_retire(struct zalloc *za, struct za_zone *z, uint8_t cond);
struct za_zone *za_zone_of(struct zalloc *za, uint32_t zone);	/* NULL: no data zone */
void za_stats_locked(struct zalloc *za, struct zalloc_stats *st);
/* zalloc_stats.free_bytes, O(1). */
uint64_t za_free_bytes(const struct zalloc *za);

/* zalloc_lease.c: leases and the open/active budget (with za->mu held) */
/* The only writer of z->cond: keeps nr_open / nr_active. */
void za_set_cond(struct zalloc *za, struct za_zone *z, uint8_t c);
bool za_zone_usable(const struct za_zone *z, enum za_who who);
bool za_class_has_closed(struct zalloc *za, unsigned int cls, enum za_who who);
/* The last resort of a writer's acquire that would fail with -ENOSPC: an
 * unleased open zone with room of another class, or one the collector
 * opened (of any class), the fullest.  Placement is a hint, and so is the
 * collector's claim on its zones once writers are out of space:
 * free_bytes and the write admission count the room left in every open
 * zone, so admitted data must be able to use it, or it could never be
 * written out (ENOSPC while space is left).  0 (out is leased; out->cls is
 * the zone's class), -ENOSPC or -ENOMEM.  [mu] */
int za_try_other_class(struct zalloc *za, unsigned int cls, uint64_t want,
		       struct zalloc_lease *out);
/* One non-blocking attempt: 0 with *out filled, -EAGAIN, -ENOMEM. */
int za_try_acquire(struct zalloc *za, unsigned int cls, uint64_t want,
		   bool may_finish, enum za_who who, struct zalloc_lease *out);

/* zalloc_space.c (with za->mu held) */
uint32_t za_free_usable(const struct zalloc *za, enum za_who who);
int za_can_wait(struct zalloc *za, unsigned int cls, enum za_who who);
/* Blocking acquire: drops and retakes za->mu while it waits. */
int za_acquire_locked(struct zalloc *za, unsigned int cls, uint64_t want,
		      bool gc, struct zalloc_lease *out);

/* zalloc_gc.c (with za->mu held) */
bool za_gc_candidate(const struct za_zone *z, uint64_t now);
bool za_gc_possible(const struct zalloc *za);

#endif
