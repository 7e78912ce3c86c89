/* zalloc — the data-zone allocator: who writes where, and when a zone resets.
 *
 * Purpose: manages the data zones [first_zone, first_zone + nr_zones) of a
 * zoned device for the file system.  Each lifetime class (lifetime.h) writes
 * into its own open zones, so data that dies together shares zones.  zalloc
 * hands out *leases*: exclusive permission to write a range starting at a
 * zone's write pointer.  It does no data I/O itself; it calls the device
 * only for zone management (open/finish/reset, report after an error).
 *
 * Zone life cycle (zalloc's view):
 *   FREE (device EMPTY) --acquire--> OPEN(class c) --full/finish--> FULL
 *   FULL with valid_bytes == 0 --(after the next metadata commit)--> reset -> FREE
 * A zone never holds two classes' data (except after mount, when a
 * partially written zone is adopted with the class the caller tells).
 *
 * Limits: the number of active zones used for data never exceeds
 * max_active - reserved_active (and open zones max_open - reserved_open), so
 * the metadata log always finds its slots (it needs 2).  When a class needs a
 * new zone and no active slot is free, zalloc finishes the active zone that
 * wastes least (smallest remaining capacity) among the zones not leased.
 * Zone capacity < zone size is honoured everywhere (only capacity is used).
 *
 * Valid-byte accounting: the file system calls zalloc_valid_add() for every
 * byte range an extent starts to reference and zalloc_valid_sub() when the
 * range stops being referenced (overwrite, truncate, unlink).  A FULL zone
 * whose valid bytes reach 0 is queued for reset; the reset happens only in
 * zalloc_commit_end() for a commit ticket taken after the zone was queued,
 * i.e. once the metadata records that dropped its last extent are durable,
 * so a crash can never replay an extent into a reset or rewritten zone.
 *
 * Reset safety contract with the caller: the caller appends the metadata
 * record that drops an extent to the log BEFORE calling zalloc_valid_sub()
 * for it, and brackets each log commit as
 *     t = zalloc_commit_begin(za); mlog_commit(...); zalloc_commit_end(za, t);
 *
 * Units: bytes everywhere; zones by index.
 * Thread safety: every function is thread-safe (one internal mutex, a leaf
 * lock; zone management I/O is done with it dropped where it can block).
 * zalloc_acquire may block waiting for a lease to be released.
 */
#ifndef ZONEFUSE_ZALLOC_H
#define ZONEFUSE_ZALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "zoned/zdev.h"
#include "lifetime_hints/lifetime.h"

#define ZALLOC_NR_CLASSES LIFETIME_NR

struct zalloc_params {
	uint32_t first_zone;	/* first data zone (index) */
	uint32_t nr_zones;	/* number of data zones */
	uint32_t reserved_active;	/* active slots kept for others (>= 2 for mlog) */
	uint32_t reserved_open;		/* open slots kept for others (>= 2 for mlog) */
	uint32_t max_stripe_width;	/* upper bound on zones per class (>= 1) */
};

/* An exclusive right to write [offset, offset + len) of zone `zone`;
 * offset is the zone's write pointer when the lease was granted. */
struct zalloc_lease {
	uint32_t zone;
	uint8_t cls;		/* enum lifetime_class */
	uint64_t offset;	/* bytes, absolute device offset */
	uint64_t len;		/* bytes granted (multiple of block size, > 0) */
};

struct zalloc;

/* Build the allocator from a zone report of dev.  Every zone starts with
 * valid_bytes = 0; the caller replays its metadata calling
 * zalloc_valid_add() and zalloc_zone_adopt(), then zalloc_mount_done(). */
int zalloc_create(struct zdev *dev, const struct zalloc_params *p,
		  struct zalloc **out);
void zalloc_destroy(struct zalloc *za);

/* Replay: tell the class of the data in a non-empty zone (first caller wins). */
void zalloc_zone_adopt(struct zalloc *za, uint32_t zone, enum lifetime_class cls);
/* End of replay: reset every non-empty data zone that holds no valid byte
 * (its data was never referenced by durable metadata), finish partially
 * written zones beyond the active limit, and build the free list.
 * Returns the number of zones reset, or -errno. */
int zalloc_mount_done(struct zalloc *za);

void zalloc_valid_add(struct zalloc *za, uint64_t dev_off, uint64_t len);
void zalloc_valid_sub(struct zalloc *za, uint64_t dev_off, uint64_t len);

/* Lease a zone of class cls for up to `want` bytes (rounded up to the block
 * size).  Blocks while every usable zone of the class is leased and no new
 * zone can be opened.  Returns 0, or -ENOSPC when no free zone exists and
 * none can be made free by waiting. */
int zalloc_acquire(struct zalloc *za, enum lifetime_class cls, uint64_t want,
		   struct zalloc_lease *out);
/* Lease up to n zones of class cls at once (for striping); the first is
 * acquired as by zalloc_acquire, the others only if available without
 * waiting.  Returns the number of leases (>= 1) or -errno. */
int zalloc_acquire_many(struct zalloc *za, enum lifetime_class cls,
			uint64_t want_each, unsigned int n,
			struct zalloc_lease *out);
/* Return a lease: `written` bytes were written at lease->offset (a multiple
 * of the block size, <= lease->len).  err < 0 means the write failed: the
 * zone's write pointer is re-read from the device and the cached state
 * repaired (the zone is finished and retired from writing if it looks
 * damaged).  Bytes written count as device data bytes of the class. */
void zalloc_release(struct zalloc *za, const struct zalloc_lease *lease,
		    uint64_t written, int err);

/* How many zones a writer of cls should stripe over now (1..max), given the
 * active limit and how many classes are writing. */
unsigned int zalloc_stripe_width(struct zalloc *za, enum lifetime_class cls);

/* Commit bracketing for safe resets (see the contract above). */
uint64_t zalloc_commit_begin(struct zalloc *za);
int zalloc_commit_end(struct zalloc *za, uint64_t ticket);	/* resets done or -errno */

/* Per-zone view for stats and fsck. */
struct zalloc_zone_info {
	uint32_t zone;
	uint8_t cond;		/* enum zdev_zone_cond, as zalloc believes it */
	uint8_t cls;		/* enum lifetime_class (meaningless when FREE) */
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
	uint64_t device_bytes_written;	/* data bytes written through leases,
					 * the collector's included */
	uint64_t class_bytes_written[ZALLOC_NR_CLASSES];	/* idem, per class */
	uint64_t zone_resets;
	uint64_t zone_finishes;
	uint64_t pending_resets;	/* zones waiting for a commit to reset */
	/* garbage collection (zalloc_set_gc) and per-class counters */
	uint64_t gc_bytes_written;	/* bytes written through GC leases (part
					 * of device_bytes_written) */
	uint64_t gc_class_bytes_written[ZALLOC_NR_CLASSES];
	uint64_t class_zone_resets[ZALLOC_NR_CLASSES];	/* by the zone's class */
	uint64_t class_zone_finishes[ZALLOC_NR_CLASSES];
	uint64_t gc_runs;		/* victims picked (zalloc_gc_pick) */
	uint64_t gc_waits;		/* acquires that waited for the collector */
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
	uint32_t space_waiters;		/* writers in zalloc_wait_room() now */
	uint64_t space_need_bytes;	/* bytes the largest of them needs */
};
void zalloc_get_stats(struct zalloc *za, struct zalloc_stats *st);

/* ---- Additions (zalloc.c) ---------------------------------------------- */

/* Notes on the calls above (zalloc.c has the details):
 * - zalloc_valid_add() for a lease's bytes may come before or after its
 *   zalloc_release(); until every written byte of a lease has been added
 *   once, its zone is never queued for reset.  Bytes written but never
 *   added (extent not recorded) keep the zone from being reset until the
 *   next mount.
 * - Do not call zalloc_acquire() while holding a lease (use
 *   zalloc_acquire_many() to get several): waiters could wait for each other.
 * - zalloc_stripe_width() divides min(open, active) data budget by the
 *   number of classes with open zones or leases, counting cls itself. */

/* Optional: called (without any zalloc lock held) by an acquirer that is
 * about to wait while zones are queued for reset, i.e. when only a metadata
 * commit (zalloc_commit_begin/end) can free space.  It should only poke the
 * committing thread (never commit synchronously under locks that writers
 * hold).  cb == NULL removes it.
 * When only a commit can help, zalloc_acquire() waits as long as commits
 * keep beginning, but returns -ENOSPC (with pending_resets > 0 in the stats)
 * if none begins within ZALLOC_COMMIT_GRACE_NS: the caller may be the
 * committer itself; it should then commit and retry. */
#define ZALLOC_COMMIT_GRACE_NS 500000000ull	/* 0.5 s */
void zalloc_set_need_space_cb(struct zalloc *za, void (*cb)(void *arg),
			      void *arg);
/* ---- Zones for the metadata log --------------------------------------- *
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

/* Number of acquirers blocked right now (tests, stats). */
unsigned int zalloc_waiters(struct zalloc *za);

/* Admission: wait until the free bytes (zalloc_stats.free_bytes) cover
 * buffered(arg) + bytes, i.e. the data the caller is about to buffer fits
 * once written.  Called with no lock held.  While zones only wait for a
 * reset, commit(arg) (synchronous; may be NULL) is called, at most twice;
 * then, with GC on, the collector is kicked and waited for under the same
 * patience rule as zalloc_acquire() (ZALLOC_GC_PATIENCE_NS after its last
 * progress).  0, or -ENOSPC when the bytes cannot fit: no collector, not
 * enough reclaimable bytes, or no progress for that long. */
struct zalloc_room {
	uint64_t bytes;
	uint64_t (*buffered)(void *arg);	/* bytes already promised */
	int (*commit)(void *arg);		/* 0 or -errno */
	void *arg;
};
int zalloc_wait_room(struct zalloc *za, const struct zalloc_room *r);
/* Number of writers in zalloc_wait_room() right now (the collector's
 * urgency). */
unsigned int zalloc_space_waiters(struct zalloc *za);

/* ---- Garbage collection ------------------------------------------------- *
 * zalloc chooses victims and keeps space for the collector; the collector
 * itself (fs/fs_gc.c) moves the data, because only the file system knows
 * which file each valid byte belongs to.
 *
 * zalloc_set_gc(za, reserve, kick, arg) turns GC mode on (kick != NULL):
 *   - ordinary acquires leave `reserve` FREE zones to the collector while a
 *     victim exists (a FULL zone with fewer valid bytes than its capacity)
 *     or one is being collected;
 *   - an acquire that finds nothing, where only the collector can help,
 *     calls kick(arg) (no zalloc lock held; it must only wake the
 *     collector) and waits, re-checking every 50 ms, instead of failing.
 *     If the collector makes no progress (no zone reset, no valid byte
 *     leaving a zone being collected) for ZALLOC_GC_PATIENCE_NS, the waiter
 *     takes a reserved zone; with none left, -ENOSPC.  So -ENOSPC means: no
 *     FREE zone, no reset pending, and no FULL zone at least 1/64 dead
 *     (ZALLOC_GC_MIN_GAIN_URGENT), i.e. valid data fills the device to
 *     within 1/64 (or the collector is stuck for that long);
 *   - acquires never wait for leases held by the caller (see above).
 *
 * The collector's protocol for one victim:
 *     zalloc_gc_pick(za, &v)            victim by cost-benefit, pinned
 *     read its valid extents (device offsets in [v.start, v.start+capacity))
 *     zalloc_acquire_gc(za, cls, ...)   leases that may use the reserve and
 *     write, zalloc_release(...)        never wait for the collector
 *     re-point each extent under the file's locks: log the new extent,
 *       zalloc_valid_add(new), then drop the old one (valid_sub), exactly as
 *       an overwrite does (the reset-safety contract above holds)
 *     zalloc_discard(new bytes not used) (the extent changed meanwhile)
 *     zalloc_gc_done(za, v.zone)        unpin; queued for reset if empty
 *     commit (the reset happens after it, as for any zone)
 * While pinned (between pick and done) a zone is never queued for reset, so
 * its bytes stay readable even if its last valid byte dies meanwhile.
 *
 * Victim choice, cost-benefit: maximise
 *     (1 - u) * log2(2 + age) / 2u,   u = valid / capacity,
 *     age = zones' worth of device bytes written since the zone's data
 *           last changed: its last write or its last invalidation (a
 *           zone whose data is dying now is hot: leave it to die)
 * i.e. the bytes freed, weighted by age, over the cost of reading and
 * writing the live bytes.  Unlike LFS's (1 - u) * age / (1 + u) the age
 * counts in log scale: in LSM stores a zone's age predicts little of how
 * long its live tables still have (measured with RocksDB at 80% full: the
 * linear form collected old zones at 65% valid, WA 1.35; this one 1.29,
 * like greedy).  When writers are waiting: greedy, the most bytes freed.
 * Otherwise (in the background) a WAL zone (class SHORT) younger than its
 * class's life -- how long after their last write the class's zones have
 * recently gone on dying whole on their own (class_life_bytes, kept for
 * every class) -- is no candidate: it holds the start of the live WAL,
 * which dies at the next flush.  Deferring every class that way made the
 * collector at 80% full wait until writers waited, then pick greedily
 * (scripts/bench-placement.sh, side by side: WA 1.088 vs 1.045); for
 * longer-lived classes the age in the score does better.
 * A victim must free at least 1/ZALLOC_GC_MIN_GAIN of its capacity in the
 * background, 1/ZALLOC_GC_MIN_GAIN_URGENT when writers wait (seen in QEMU
 * at 80% full: a 16 MiB zone copied to free 4 KiB, a rewritten page, when
 * nothing better was left), and at least a block.  So zones at most 1/64
 * dead are never collected: ENOSPC comes that much before valid data fills
 * the device.  Either way only FULL zones that are not leased, busy,
 * pending, being collected (or backing off), and have no bytes in flight
 * (unclaimed) qualify. */
#define ZALLOC_GC_PATIENCE_NS 3000000000ull	/* 3 s without progress */
#define ZALLOC_GC_MIN_GAIN 8u		/* background victims free >= capacity / 8 */
#define ZALLOC_GC_MIN_GAIN_URGENT 64u	/* greedy ones >= capacity / 64 */
/* FREE zones writers never take while GC is on (zalloc_set_gc()), not even
 * after the patience above: the collector's room to compact partly dead
 * zones.  Their capacity is left out of zalloc_stats.free_bytes and is
 * reported as gc_floor_bytes. */
#define ZALLOC_GC_FLOOR 1u

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
/* The cost-benefit score (pure; < 0 when nothing to gain). */
double zalloc_gc_score(uint64_t capacity, uint64_t valid, uint64_t age);
/* Pick and pin the best victim: by cost-benefit, or with greedy the one
 * that frees most (least valid bytes; when writers wait).  Only zones whose
 * valid bytes fit in the room the collector has for their class (FREE
 * zones and the class's open zones) qualify.  skip: NULL or a bitmap over
 * the data zones (bit i = zone first_zone + i) of zones not to pick.
 * 0, or -ENOENT when none. */

int zalloc_gc_pick(struct zalloc *za, bool greedy, const uint64_t *skip,
		   struct zalloc_gc_victim *v);
/* Unpin a victim (whatever was moved); queues it for reset if empty. */
void zalloc_gc_done(struct zalloc *za, uint32_t zone);
/* The same, and the zone is no victim again for backoff_ns (the collector
 * could not move all of it: a file stayed locked). */
void zalloc_gc_done_backoff(struct zalloc *za, uint32_t zone, uint64_t backoff_ns);
/* zalloc_acquire() for the collector: may use the reserved FREE zones,
 * waits for releases and commits like zalloc_acquire() but never for the
 * collector; its bytes count as gc_bytes_written. */
int zalloc_acquire_gc(struct zalloc *za, enum lifetime_class cls, uint64_t want,
		      struct zalloc_lease *out);
/* Bytes written through a lease that will never be referenced (the caller
 * gave up on them): they no longer keep their zone from being reset. */
void zalloc_discard(struct zalloc *za, uint64_t dev_off, uint64_t len);

#endif
