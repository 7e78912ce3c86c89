/* zalloc — the data-zone allocator: who writes where, and when a zone resets.
 *
 * Purpose: manages the data zones [first_zone, first_zone + nr_zones) of a
 * zoned device for the file system.  It does no data I/O itself; it calls
 * the device only for zone management (open/finish/close/reset, a report
 * after an error).
 *
 * Classes.  A class is a stream index in [0, ZALLOC_NR_CLASSES): each class
 * writes into its own open zones, so data the caller puts in one class
 * shares zones only with data of that class.  zalloc gives the numbers no
 * meaning; the caller maps its lifetimes onto them and tells zalloc, per
 * class, what the collector should know (zalloc_set_stream_flags()).
 *
 * Leases.  zalloc hands out leases: exclusive permission to write a range
 * starting at a zone's write pointer.  Do not call zalloc_acquire() while
 * holding a lease (use zalloc_acquire_many() to get several): acquirers
 * could wait for each other.
 *
 * Zone life cycle (zalloc's view):
 *   FREE (device EMPTY) --acquire--> OPEN(class c) --full/finish--> FULL
 *   FULL with valid_bytes == 0 --(after the next metadata commit)--> reset -> FREE
 *   FREE --zalloc_lend--> the metadata log's --zalloc_lend_return--> FREE
 * A zone never holds two classes' data (except after mount, when a
 * partially written zone is adopted with the class the caller tells).
 *
 * Budgets: the number of active zones used for data never exceeds
 * max_active - reserved_active (and open zones max_open - reserved_open), so
 * the metadata log always finds its slots (it needs 2).  When a class needs
 * a new zone and no active slot is free, zalloc finishes the active zone
 * that wastes least (smallest remaining capacity) among the zones not
 * leased (or closes one when only the open limit binds); once FREE zones
 * are short it appends to another class's open zone instead, so that no
 * capacity is lost to finishes near full (zalloc_lease.c).  Zone capacity <
 * zone size is honoured everywhere (only capacity is used).
 *
 * Valid bytes: the caller calls zalloc_valid_add() for every byte range an
 * extent starts to reference and zalloc_valid_sub() when the range stops
 * being referenced (overwrite, truncate, unlink).  valid_add for a lease's
 * bytes may come before or after its zalloc_release(); until every written
 * byte of a lease has been added once (or discarded, zalloc_discard()), its
 * zone is never queued for reset.  Bytes written but never added keep the
 * zone from being reset until the next mount.
 *
 * Stamped resets: a FULL zone whose valid bytes reach 0 is queued for
 * reset; the reset happens only in zalloc_commit_end() for a commit ticket
 * taken after the zone was queued, i.e. once the metadata records that
 * dropped its last extent are durable, so a crash can never replay an
 * extent into a reset or rewritten zone.  The caller's side of the
 * contract: append the metadata record that drops an extent to the log
 * BEFORE calling zalloc_valid_sub() for it, and bracket each log commit as
 *     t = zalloc_commit_begin(za); mlog_commit(...); zalloc_commit_end(za, t);
 *
 * Waiting for space (zalloc_space.c is the one place a writer waits):
 * zalloc_acquire() blocks while a release, a finish or a reset can still
 * help; when only a commit can (zones queued for reset) it pokes the
 * caller (zalloc_set_need_space_cb()) and waits as long as commits keep
 * beginning, but returns -ENOSPC (with pending_resets > 0 in the stats) if
 * none begins within ZALLOC_COMMIT_GRACE_NS: the caller may be the
 * committer itself; it should then commit and retry.  With GC on, when only
 * the collector can help, acquirers and zalloc_wait_room() kick it and wait
 * for it under one patience rule: as long as it makes progress (a zone
 * reset, a valid byte moved out of a victim, free bytes growing), and
 * ZALLOC_GC_PATIENCE_NS after the last progress seen.  Then an acquirer
 * takes a FREE zone kept for the collector (the reserve; never the floor)
 * and a room waiter gets -ENOSPC.
 *
 * Space kept: FREE zones are taken in this order of precedence: the
 * metadata log's reserve (zalloc_set_log_reserve) first, then, with GC on,
 * `reserve` zones the collector may take alone while it can help, and
 * ZALLOC_GC_FLOOR zones no writer ever takes (with no FREE zone at all,
 * zones that die only partly later could never be compacted).  So with GC
 * on, -ENOSPC means: no FREE zone a writer may take, no reset pending, and
 * no FULL zone the collector would copy (zalloc_victim.h: at least 1/64 dead),
 * or a collector without progress for the patience above.
 *
 * Cost: what a request calls (acquire, release, valid_add/sub, stats,
 * zalloc_wait_room) does not grow with the number of zones: the space
 * figures are kept incrementally and zalloc_check() recounts them.  Only
 * mount, zalloc_gc_pick() (the collector's choice) and zalloc_check() walk
 * every zone, and a near-full device whose every collector candidate is
 * backed off (zalloc_gc_done_backoff()) looks at their retry times.
 * Acquires walk the open zones of a class (bounded by the active budget,
 * or by the writers in flight without one).
 *
 * Units: bytes everywhere; zones by index.
 * Thread safety: every function is thread-safe: one internal mutex, a leaf
 * lock (zalloc_priv.h).  Zone management I/O is done with it dropped where
 * it can block, and callbacks (need_space, gc kick) are called without it.
 * Lock order for callers: their own locks, then zalloc's.  Functions that
 * may block: zalloc_acquire*, zalloc_wait_room (waits), zalloc_commit_end,
 * zalloc_release (after an error), zalloc_mount_done (device I/O).
 */
#ifndef ZONEFUSE_ZALLOC_H
#define ZONEFUSE_ZALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "zoned/zdev.h"

/* Number of classes (stream indices).  The file system's lifetime classes
 * map one to one (asserted where it maps them). */
#define ZALLOC_NR_CLASSES 5
/* The class of a zone found written at mount that no one adopted (its data
 * is unreferenced and it is reset, or kept only if that fails); the caller's
 * default class should be this index. */
#define ZALLOC_DEFAULT_CLASS 2

/* zalloc_acquire(): no commit began for this long while only a commit
 * could help: -ENOSPC (the caller may be the committer). */
#define ZALLOC_COMMIT_GRACE_NS 500000000ull	/* 0.5 s */
/* A writer waiting for the collector gives up this long after the last
 * progress it saw (see "Waiting for space"). */
#define ZALLOC_GC_PATIENCE_NS 3000000000ull	/* 3 s */
/* FREE zones writers never take while GC is on (zalloc_set_gc()), not even
 * after the patience above: the collector's room to compact partly dead
 * zones.  Their capacity is left out of zalloc_stats.free_bytes and is
 * reported as gc_floor_bytes. */
#define ZALLOC_GC_FLOOR 1u

struct zalloc_params {
	uint32_t first_zone;	/* first data zone (index) */
	uint32_t nr_zones;	/* number of data zones */
	uint32_t reserved_active;	/* active slots kept for others (>= 2 for mlog) */
	uint32_t reserved_open;		/* open slots kept for others (>= 2 for mlog) */
	uint32_t max_stripe_width;	/* upper bound on zones per class (>= 1) */
	bool self_check;	/* every zalloc_get_stats() runs zalloc_check()
				 * and aborts on a difference: O(zones), tests */
};

/* An exclusive right to write [offset, offset + len) of zone `zone`;
 * offset is the zone's write pointer when the lease was granted. */
struct zalloc_lease {
	uint32_t zone;
	uint8_t cls;		/* class */
	uint64_t offset;	/* bytes, absolute device offset */
	uint64_t len;		/* bytes granted (multiple of block size, > 0) */
};

struct zalloc;

/* ---- life cycle ---------------------------------------------------------- */

/* Build the allocator from a zone report of dev.  Every zone starts with
 * valid_bytes = 0; the caller replays its metadata calling
 * zalloc_valid_add(), zalloc_zone_adopt() and zalloc_lend_adopt(), then
 * zalloc_mount_done(). */
int zalloc_create(struct zdev *dev, const struct zalloc_params *p,
		  struct zalloc **out);
void zalloc_destroy(struct zalloc *za);

/* Replay: tell the class of the data in a non-empty zone (first caller wins). */
void zalloc_zone_adopt(struct zalloc *za, uint32_t zone, unsigned int cls);
/* End of replay: reset every non-empty data zone that holds no valid byte
 * (its data was never referenced by durable metadata), finish partially
 * written zones beyond the active limit, and build the free list.
 * Returns the number of zones reset, or -errno. */
int zalloc_mount_done(struct zalloc *za);

/* Per class: ZALLOC_STREAM_* flags for the collector's policy (all 0 at
 * create).  0, or -EINVAL. */
#define ZALLOC_STREAM_DEFER_YOUNG 1u	/* its young zones are left to die in
					 * the background (zalloc_victim.h) */
int zalloc_set_stream_flags(struct zalloc *za, unsigned int cls, unsigned int flags);

/* ---- valid bytes --------------------------------------------------------- */

void zalloc_valid_add(struct zalloc *za, uint64_t dev_off, uint64_t len);
void zalloc_valid_sub(struct zalloc *za, uint64_t dev_off, uint64_t len);
/* Bytes written through a lease that will never be referenced (the caller
 * gave up on them): they no longer keep their zone from being reset. */
void zalloc_discard(struct zalloc *za, uint64_t dev_off, uint64_t len);

/* ---- leases -------------------------------------------------------------- */

/* Lease a zone of class cls for up to `want` bytes (rounded up to the block
 * size).  Blocks while waiting can help (see "Waiting for space").
 * Returns 0, -ENOSPC, -EBUSY before zalloc_mount_done(), -EINVAL. */
int zalloc_acquire(struct zalloc *za, unsigned int cls, uint64_t want,
		   struct zalloc_lease *out);
/* Lease up to n zones of class cls at once (for striping); the first is
 * acquired as by zalloc_acquire, the others only if available without
 * waiting.  Returns the number of leases (>= 1) or -errno. */
int zalloc_acquire_many(struct zalloc *za, unsigned int cls,
			uint64_t want_each, unsigned int n,
			struct zalloc_lease *out);
/* Return a lease: `written` bytes were written at lease->offset (a multiple
 * of the block size, <= lease->len).  err < 0 means the write failed: the
 * zone's write pointer is re-read from the device and the cached state
 * repaired (the zone is finished and retired from writing if it looks
 * damaged).  Bytes written count as device data bytes of the class. */
void zalloc_release(struct zalloc *za, const struct zalloc_lease *lease,
		    uint64_t written, int err);

/* How many zones a writer of cls should stripe over now (1..max): the
 * min(open, active) data budget divided by the number of classes with open
 * zones or leases, counting cls itself. */
unsigned int zalloc_stripe_width(struct zalloc *za, unsigned int cls);

/* ---- waiting for space (zalloc_space.c) ---------------------------------- */

/* Called (without any zalloc lock held) by an acquirer that is about to
 * wait while zones are queued for reset, i.e. when only a metadata commit
 * can free space.  It should only poke the committing thread (never commit
 * synchronously under locks that writers hold).  cb == NULL removes it. */
void zalloc_set_need_space_cb(struct zalloc *za, void (*cb)(void *arg),
			      void *arg);

/* Admission: wait until the free bytes (zalloc_stats.free_bytes) cover
 * buffered(arg) + bytes + keep + the bytes of every other admission held,
 * i.e. the data the caller is about to buffer fits once written, also
 * when several callers are admitted before any of them buffers.  On 0
 * the bytes stay held until zalloc_room_done(bytes), which the caller
 * calls once buffered(arg) counts them (or it gave up buffering them).
 * Called with no lock held.  While zones only wait for a
 * reset, commit(arg) (synchronous; may be NULL) is called, at most twice;
 * then, with GC on, the collector is kicked and waited for under the
 * patience rule.  0, or -ENOSPC when the bytes cannot fit: no collector,
 * not enough reclaimable bytes, or no progress for ZALLOC_GC_PATIENCE_NS. */
struct zalloc_room {
	uint64_t bytes;
	uint64_t keep;		/* bytes to leave free beyond the need: room
				 * that other writers (the kernel's dirty
				 * pages) were promised; 0 for those writers */
	uint64_t (*buffered)(void *arg);	/* bytes already promised */
	int (*commit)(void *arg);		/* 0 or -errno */
	void *arg;
};
int zalloc_wait_room(struct zalloc *za, const struct zalloc_room *r);
/* The end of an admission of `bytes` (no lock needed, never blocks). */
void zalloc_room_done(struct zalloc *za, uint64_t bytes);

/* Number of acquirers blocked right now (tests, stats, the collector's
 * urgency), and of writers in zalloc_wait_room(). */
unsigned int zalloc_waiters(struct zalloc *za);
unsigned int zalloc_space_waiters(struct zalloc *za);

/* ---- commits and resets -------------------------------------------------- */

/* Commit bracketing for safe resets ("Stamped resets" above). */
uint64_t zalloc_commit_begin(struct zalloc *za);
int zalloc_commit_end(struct zalloc *za, uint64_t ticket);	/* resets done or -errno */

/* ---- zones for the metadata log ------------------------------------------ *
 * The log grows beyond its meta zones by borrowing EMPTY data zones.  A
 * lent zone is the log's alone: on no list, never leased, collected,
 * finished or reset by zalloc, not counted in the open/active budget (the
 * log's two active zones are reserved_active).
 *   zalloc_lend: take the head FREE zone, whatever the writers' reserves
 *     (the log's needs come first), if more than `keep` are FREE: 0, or
 *     -ENOSPC.
 *   zalloc_lend_return: the log reset it; it is FREE again.
 *   zalloc_lend_adopt: before zalloc_mount_done, a zone the replayed log
 *     holds (mount_done then leaves it alone).
 *   zalloc_set_log_reserve: the log may hold `zones` lent zones at once;
 *     writers and the collector leave FREE the ones it does not hold yet,
 *     so a snapshot, and after it the records that free space, always find
 *     room.  Their capacity is left out of free_bytes (log_bytes).
 * None of them waits; they take only zalloc's leaf lock. */
int zalloc_lend(struct zalloc *za, uint32_t keep, uint32_t *zone);
void zalloc_lend_return(struct zalloc *za, uint32_t zone);
int zalloc_lend_adopt(struct zalloc *za, uint32_t zone);
void zalloc_set_log_reserve(struct zalloc *za, uint32_t zones);
/* FREE zones now (the log's room to borrow from). */
uint32_t zalloc_free_zones(struct zalloc *za);

/* ---- garbage collection (zalloc_gc.c) ------------------------------------ *
 * zalloc keeps space for the collector and pins its victims; the victim
 * policy is zonealloc/zalloc_victim.h; the collector itself (gc/gc.c) moves the data,
 * because only the file system knows which file each valid byte belongs to.
 *
 * zalloc_set_gc(za, reserve, kick, arg) turns GC mode on (kick != NULL):
 * ordinary acquires leave `reserve` FREE zones to the collector while a
 * victim exists or one is being collected, and wait for the collector
 * instead of failing ("Waiting for space"); kick(arg) is called with no
 * zalloc lock held and must only wake the collector.
 *
 * The collector's protocol for one victim:
 *     zalloc_gc_pick(za, &v)            victim by the policy, pinned
 *     read its valid extents (device offsets in [v.start, v.start+capacity))
 *     zalloc_acquire_gc(za, cls, ...)   leases that may use the reserve and
 *     write, zalloc_release(...)        never wait for the collector
 *     re-point each extent under the file's locks: log the new extent,
 *       zalloc_valid_add(new), then drop the old one (valid_sub), exactly as
 *       an overwrite does (the reset contract above holds)
 *     zalloc_discard(new bytes not used) (the extent changed meanwhile)
 *     zalloc_gc_done(za, v.zone)        unpin; queued for reset if empty
 *     commit (the reset happens after it, as for any zone)
 * While pinned (between pick and done) a zone is never queued for reset, so
 * its bytes stay readable even if its last valid byte dies meanwhile.  A
 * zone the collector opened is its own destination: ordinary writers do not
 * write into it (only writers granted the reserve may), so the collector can
 * always finish moving a victim it started; and the collector writes only
 * into zones it opened, one stream per class beside the writers' (the data
 * it moves outlived its zone-mates and dies on another schedule than fresh
 * data; its zones count in the active budget like any other).
 *
 * Candidates: only FULL zones that are not leased, busy, pending, being
 * collected (or backing off), have no bytes in flight (unclaimed), and
 * whose valid bytes fit in the room the collector has for their class
 * (FREE zones and the class's open zones); gc_policy_pick() chooses among
 * them (cost-benefit, or greedy when writers wait; minimum gain; young-zone
 * deferral for classes flagged ZALLOC_STREAM_DEFER_YOUNG; class life). */
struct zalloc_gc_victim {
	uint32_t zone;
	uint8_t cls;		/* class of the data in it */
	uint64_t start;		/* bytes, absolute */
	uint64_t capacity;	/* bytes */
	uint64_t valid_bytes;	/* when picked */
	uint64_t age;		/* device bytes written since its data last changed */
	double score;
};

void zalloc_set_gc(struct zalloc *za, uint32_t reserve_zones,
		   void (*kick)(void *arg), void *arg);
/* Pick and pin the best victim; greedy: writers are waiting.  skip: NULL or
 * a bitmap over the data zones (bit i = zone first_zone + i) of zones not to
 * pick.  0, or -ENOENT when none. */
int zalloc_gc_pick(struct zalloc *za, bool greedy, const uint64_t *skip,
		   struct zalloc_gc_victim *v);
/* Unpin a victim (whatever was moved); queues it for reset if empty. */
void zalloc_gc_done(struct zalloc *za, uint32_t zone);
/* The same, and the zone is no victim again for backoff_ns (the collector
 * could not move all of it: a file stayed locked). */
void zalloc_gc_done_backoff(struct zalloc *za, uint32_t zone, uint64_t backoff_ns);
/* Bytes of a victim the collector left where they are (their file stayed
 * locked): counted in gc_skipped_bytes. */
void zalloc_gc_skipped(struct zalloc *za, uint64_t bytes);
/* zalloc_acquire() for the collector: may use the reserved FREE zones,
 * waits for releases and commits like zalloc_acquire() but never for the
 * collector; its bytes count as gc_bytes_written. */
int zalloc_acquire_gc(struct zalloc *za, unsigned int cls, uint64_t want,
		      struct zalloc_lease *out);

/* ---- introspection ------------------------------------------------------- */

/* Per-zone view for stats and fsck. */
struct zalloc_zone_info {
	uint32_t zone;
	uint8_t cond;		/* enum zdev_zone_cond, as zalloc believes it */
	uint8_t cls;		/* class (meaningless when FREE) */
	bool leased;
	uint64_t wp;		/* bytes, absolute */
	uint64_t capacity;	/* bytes */
	uint64_t valid_bytes;
	uint64_t resets;	/* resets of this zone since mount */
	bool lent;		/* held by the metadata log (zalloc_lend) */
};
int zalloc_zone_info(struct zalloc *za, uint32_t zone, struct zalloc_zone_info *out);

struct zalloc_stats {
	uint32_t nr_zones;		/* data zones */
	uint32_t free_zones;		/* EMPTY, not leased */
	uint32_t open_zones;		/* data zones open for writing */
	uint32_t active_zones;		/* data zones active (open + closed) */
	uint32_t max_active_data;	/* active slots zalloc may use */
	uint64_t capacity_bytes;	/* sum of zone capacities */
	uint64_t free_bytes;		/* free zones' capacity + room left in open
					 * zones, less gc_floor_bytes */
	uint64_t gc_floor_bytes;	/* FREE capacity only the collector may
					 * use (up to ZALLOC_GC_FLOOR zones; 0
					 * without GC) */
	uint64_t valid_bytes;		/* referenced bytes */
	uint64_t reclaimable_bytes;	/* written but no longer referenced */
	uint64_t finished_tail_bytes;	/* of them, the capacity that zone
					 * finishes skipped in zones not reset
					 * since (mount counts a FULL zone as
					 * written to its end) */
	uint64_t device_bytes_written;	/* data bytes written through leases,
					 * the collector's included */
	uint64_t class_bytes_written[ZALLOC_NR_CLASSES];	/* idem, per class */
	uint64_t zone_resets;
	uint64_t zone_finishes;
	uint64_t class_fallbacks;	/* leases given a zone of another class
					 * because the class had none left */
	uint64_t pending_resets;	/* zones waiting for a commit to reset */
	/* garbage collection (zalloc_set_gc) and per-class counters */
	uint64_t gc_bytes_written;	/* bytes written through GC leases (part
					 * of device_bytes_written) */
	uint64_t gc_class_bytes_written[ZALLOC_NR_CLASSES];
	uint64_t class_zone_resets[ZALLOC_NR_CLASSES];	/* by the zone's class */
	uint64_t class_zone_finishes[ZALLOC_NR_CLASSES];
	uint64_t gc_runs;		/* victims picked (zalloc_gc_pick) */
	uint64_t gc_zones_emptied;	/* ... of which unpinned with no valid
					 * byte left (zalloc_gc_done*) */
	uint64_t gc_skipped_bytes;	/* zalloc_gc_skipped() */
	uint64_t gc_waits;		/* writers that waited for the collector
					 * (acquires and zalloc_wait_room) */
	uint64_t gc_wait_ns;		/* total time they waited */
	uint64_t gc_reserve_grants;	/* waits that ended taking a reserved zone */
	uint64_t gc_reserve_taken;	/* reserved zones leased by others (the
					 * collector could not help, or a grant) */
	uint64_t gc_reclaimable_bytes;	/* capacity - valid of FULL zones the
					 * collector could pick now */
	uint32_t gc_reserve_zones;	/* FREE zones kept for the collector */
	uint32_t gc_waiters;		/* acquirers waiting for it now */
	uint32_t gc_active;		/* victims being collected now */
	uint64_t class_life_bytes[ZALLOC_NR_CLASSES];	/* device bytes written
					 * between a zone's last write and its
					 * death, recent longest (0: none yet) */
	uint32_t log_zones;		/* zones lent to the metadata log now */
	uint32_t log_reserve_zones;	/* zones the log may need at once */
	uint64_t log_bytes;		/* capacity of the lent zones and of the
					 * FREE zones kept for the rest of the
					 * reserve (not in free_bytes) */
	uint64_t log_lent_bytes;	/* capacity of the lent zones alone
					 * (not in capacity_bytes either) */
	uint32_t space_waiters;		/* writers in zalloc_wait_room() now */
	uint64_t space_need_bytes;	/* bytes the largest of them needs */
	uint64_t room_held_bytes;	/* admitted, not yet zalloc_room_done() */
};
/* O(1): every figure is kept incrementally (zalloc_check() recounts). */
void zalloc_get_stats(struct zalloc *za, struct zalloc_stats *st);

/* Recount from scratch what the allocator keeps incrementally (free,
 * valid, reclaimable and collector bytes, per zone and in total; the zone
 * lists) and compare: 0, or -EUCLEAN with the differences logged.
 * O(zones), takes the allocator's lock: for tests and fsck (and every
 * zalloc_get_stats() with zalloc_params.self_check). */
int zalloc_check(struct zalloc *za);

#endif
