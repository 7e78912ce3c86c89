/* zalloc.c — the data-zone allocator (contract: zalloc.h).
 *
 * State: one struct za_zone per data zone (cached cond, wp, capacity, class,
 * lease, valid/written bytes, resets, queued-reset stamp, write sequence),
 * kept on at most one intrusive list at a time:
 *   FREE     device-EMPTY zones, FIFO (reset zones go to the tail, so zones
 *            rotate: cheap wear levelling);
 *   CLASS(c) zones open (IMP/EXP_OPEN or CLOSED, not full) for class c,
 *            leased or not;
 *   PENDING  FULL zones with no valid byte, waiting for a commit to reset
 *            them; FIFO, hence sorted by stamp.
 * FULL zones that still hold valid data, zones being finished or reset, and
 * retired (READONLY/OFFLINE or unreadable) zones are on no list.
 *
 * Budget: nr_open / nr_active count data zones by the cond zalloc believes.
 * A zone leased from FREE (or from CLOSED) is counted as IMP_OPEN from the
 * moment it is leased; the device opens it implicitly on the first write.
 * A lease released with nothing written returns an EMPTY zone to FREE (and
 * a CLOSED zone to CLOSED), so the cache matches the device again.
 *
 * Acquire policy (zalloc_acquire):
 *   1. an unleased open zone of the class with room: the one with the LEAST
 *      room left ("fill the fullest first"), which drives zones to FULL and
 *      keeps the number of half-written zones, and the waste when one has to
 *      be finished, small;
 *   2. else a FREE zone (head of the free list) if the data open/active
 *      budget allows;
 *   3. else, if a FREE zone (or an unleased CLOSED zone of the class)
 *      exists, make room and lease as in 1./2.: when only the open budget
 *      binds (active has room, or the class has a CLOSED zone to reopen),
 *      CLOSE the unleased open zone written least recently (nothing is
 *      wasted; only devices with max_open < max_active get here); else
 *      FINISH the unleased active zone (any class) with the least remaining
 *      capacity (wastes least);
 *   4. else wait on the condvar (a release, a finish or a reset wakes it);
 *      -ENOSPC when nothing that waiting can bring exists (see can_wait()).
 *
 * Reset stamps: commit_seq starts at 1.  A zone queued for reset records
 * stamp = commit_seq at queueing time; zalloc_commit_begin() returns
 * t = commit_seq and increments it.  So "queued before begin returned t" is
 * exactly stamp <= t, and zalloc_commit_end(t) resets every queued zone with
 * stamp <= t.  (This assumes, as mlog does, that a commit which completes
 * makes durable every record appended before its begin.)
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
 * Caller contract: every byte written through a lease must eventually be
 * zalloc_valid_add()ed; bytes never accounted (a write whose extent was not
 * recorded) keep their zone from being reset until the next mount (or the
 * future GC).  valid_add on a zone queued for reset takes it off the queue.
 *
 * Waiting: zalloc_acquire() waits (condvar) rather than fail while a
 * release, a finish in flight or a reset can still help the class: a lease
 * of the same class is out (it may come back with room), a FREE zone exists
 * and any lease is out, or zones are queued for reset (only a commit frees
 * those: zalloc_set_need_space_cb() lets the caller kick one; if no commit
 * begins within ZALLOC_COMMIT_GRACE_NS, -ENOSPC, so that a committer thread
 * that allocates before committing does not wait for itself).  Do not call zalloc_acquire()
 * while holding a lease: if every usable zone is leased by such threads (or
 * the device is full and your own lease is the one that could help), they
 * wait for each other.  Release first, or use zalloc_acquire_many(), whose
 * extra leases never wait.
 *
 * GC (zalloc.h has the protocol): zalloc_set_gc() turns it on.  Writers
 * leave gc_reserve FREE zones to the collector while it can help (a FULL
 * zone with invalid bytes exists, or a victim is being collected) and wait
 * for it (can_wait() -> ZA_WAIT_GC: kick, timed waits) instead of failing;
 * after ZALLOC_GC_PATIENCE_NS without progress they take a reserved zone,
 * then -ENOSPC.  Victims: cost-benefit over FULL zones (zalloc_gc_pick()),
 * pinned (z->gc: never queued for reset) until zalloc_gc_done().  The age
 * of a zone is za->dev_bytes minus its value at the zone's last write
 * (z->wclock).  GC leases (z->lease_gc) count as gc bytes.
 *
 * Locking: one mutex (za->mu), a leaf lock.  Zone management I/O at run time
 * (finish/close in acquire, report/finish in release after an error, reset in
 * commit_end) runs with the mutex dropped; the zone concerned is marked
 * leased/busy/resetting meanwhile so nobody else touches it.
 * zalloc_mount_done() runs its I/O with the mutex held (nothing else runs
 * during mount).
 */
#include "zonealloc/zalloc.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/zf_common.h"

#define ZA_NIL UINT32_MAX
#define ZA_UNLIMITED UINT32_MAX

enum {
	ZA_L_NONE = 0,
	ZA_L_FREE = 1,
	ZA_L_PENDING = 2,
	ZA_L_CLASS = 3,		/* + class */
	ZA_L_NR = ZA_L_CLASS + ZALLOC_NR_CLASSES,
};

struct za_zone {
	uint64_t start;		/* bytes, absolute */
	uint64_t capacity;	/* bytes */
	uint64_t wp;		/* bytes, absolute; start + capacity once FULL */
	uint64_t written;	/* bytes really written since the last reset
				 * (excludes the tail skipped by a finish) */
	uint64_t valid;		/* bytes referenced by the file system */
	uint64_t resets;	/* since mount */
	uint64_t reset_stamp;	/* commit stamp when queued for reset */
	uint64_t wseq;		/* write sequence of the last write (age, for GC) */
	uint64_t wclock;	/* za->dev_bytes after its last write (GC age) */
	uint64_t dclock;	/* za->dev_bytes at its last invalidation */
	uint64_t lease_len;	/* bytes of the outstanding lease */
	uint32_t nunclaimed;	/* unclaimed ranges of this zone in za->ur */
	uint32_t prev, next;	/* list links (zone indices relative to first) */
	uint8_t list;		/* ZA_L_* */
	uint8_t cond;		/* enum zdev_zone_cond, as we believe it */
	uint8_t cls;		/* enum lifetime_class */
	bool leased;
	bool adopted;		/* class set by zalloc_zone_adopt() */
	bool busy;		/* finish/close I/O in flight */
	bool resetting;		/* reset I/O in flight */
	bool retired;		/* damaged: never written or reset again */
	bool was_closed;	/* leased from CLOSED */
	bool gc;		/* being collected: never queued for reset */
	uint64_t gc_retry_ns;	/* not a victim again before this time */
	bool lease_gc;		/* the outstanding lease is the collector's */
	bool gc_dest;		/* opened by the collector: its destination,
				 * not for ordinary writers (until reset) */
	bool lent;		/* the metadata log's (zalloc_lend): on no
				 * list, cond EMPTY in the budget's books */
};

struct za_list {
	uint32_t head, tail, count;
};

struct zalloc {
	struct zdev *dev;
	pthread_mutex_t mu;
	pthread_cond_t cv;

	uint32_t first, nr;
	uint64_t zone_size;
	uint32_t bs;
	uint32_t act_budget;	/* ZA_UNLIMITED = no limit */
	uint32_t open_budget;
	uint32_t max_stripe;
	uint64_t max_cap;	/* largest zone capacity */
	bool mounted;

	struct za_zone *z;
	struct za_list lists[ZA_L_NR];

	uint32_t nr_open, nr_active;
	uint32_t leased_total, leased_cls[ZALLOC_NR_CLASSES];
	uint32_t nr_busy, nr_resetting;
	uint32_t waiters;

	uint64_t commit_seq;
	uint64_t write_seq;

	struct za_range {	/* leased bytes not yet claimed by valid_add */
		uint32_t zi;	/* zone index (relative) */
		uint64_t lo, hi;	/* bytes, absolute */
	} *ur;
	uint32_t nur, cap_ur;
	uint64_t dev_bytes, class_bytes[ZALLOC_NR_CLASSES];
	uint64_t zone_resets, zone_finishes;

	void (*need_space_cb)(void *arg);
	void *need_space_arg;

	/* zones lent to the metadata log, and how many it may need at once
	 * (zalloc_set_log_reserve): writers leave it the difference */
	uint32_t nr_lent, log_reserve;

	/* garbage collection (zalloc_set_gc) */
	bool gc_enabled;
	uint32_t gc_reserve;	/* FREE zones only the collector may take */
	void (*gc_kick)(void *arg);
	void *gc_arg;
	uint32_t gc_waiters;	/* acquirers waiting for the collector now */
	uint32_t gc_active;	/* victims being collected */
	uint64_t gc_bytes, gc_class_bytes[ZALLOC_NR_CLASSES];
	uint64_t gc_runs, gc_waits, gc_wait_ns, gc_reserve_grants;
	uint64_t gc_evacuated;	/* valid bytes that left zones being collected */
	uint64_t reserve_taken;	/* FREE zones leased by others out of the reserve */
	uint64_t class_resets[ZALLOC_NR_CLASSES], class_finishes[ZALLOC_NR_CLASSES];
	/* per class: how long its zones take to die whole after their last
	 * write, device bytes (class_life_note(); 0 = none seen yet) */
	uint64_t class_life[ZALLOC_NR_CLASSES];
};

/* ---- small helpers ------------------------------------------------------ */

static uint64_t zremain(const struct za_zone *z)
{
	return z->start + z->capacity - z->wp;
}

static uint32_t zidx(const struct zalloc *za, const struct za_zone *z)
{
	return (uint32_t)(z - za->z);
}

static void set_cond(struct zalloc *za, struct za_zone *z, uint8_t c)
{
	if (zdev_cond_open(z->cond))
		za->nr_open--;
	if (zdev_cond_active(z->cond))
		za->nr_active--;
	z->cond = c;
	if (zdev_cond_open(c))
		za->nr_open++;
	if (zdev_cond_active(c))
		za->nr_active++;
}

static void list_del(struct zalloc *za, struct za_zone *z)
{
	struct za_list *l;

	if (z->list == ZA_L_NONE)
		return;
	l = &za->lists[z->list];
	if (z->prev != ZA_NIL)
		za->z[z->prev].next = z->next;
	else
		l->head = z->next;
	if (z->next != ZA_NIL)
		za->z[z->next].prev = z->prev;
	else
		l->tail = z->prev;
	l->count--;
	z->prev = z->next = ZA_NIL;
	z->list = ZA_L_NONE;
}

static void list_add(struct zalloc *za, struct za_zone *z, uint8_t list,
		     bool at_head)
{
	struct za_list *l = &za->lists[list];
	uint32_t i = zidx(za, z);

	list_del(za, z);
	z->list = list;
	if (l->head == ZA_NIL) {
		z->prev = z->next = ZA_NIL;
		l->head = l->tail = i;
	} else if (at_head) {
		z->prev = ZA_NIL;
		z->next = l->head;
		za->z[l->head].prev = i;
		l->head = i;
	} else {
		z->next = ZA_NIL;
		z->prev = l->tail;
		za->z[l->tail].next = i;
		l->tail = i;
	}
	l->count++;
}

static bool budget_allows_open(const struct zalloc *za)
{
	return za->nr_open < za->open_budget;
}

static bool budget_allows_new(const struct zalloc *za)
{
	return za->nr_active < za->act_budget && za->nr_open < za->open_budget;
}

/* ---- unclaimed ranges ---------------------------------------------------- */

/* Make room for one more range. */
static int unclaimed_reserve(struct zalloc *za)
{
	if (za->nur == za->cap_ur) {
		uint32_t cap = za->cap_ur ? 2 * za->cap_ur : 16;
		struct za_range *n = realloc(za->ur, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		za->ur = n;
		za->cap_ur = cap;
	}
	return 0;
}

static int unclaimed_add(struct zalloc *za, struct za_zone *z, uint64_t lo,
			 uint64_t hi)
{
	if (lo >= hi)
		return 0;
	if (unclaimed_reserve(za))
		return -ENOMEM;
	za->ur[za->nur++] = (struct za_range){ zidx(za, z), lo, hi };
	z->nunclaimed++;
	return 0;
}

/* Claim [lo, hi) of zone z: cut it out of the zone's unclaimed ranges. */
static void unclaimed_trim(struct zalloc *za, struct za_zone *z, uint64_t lo,
			   uint64_t hi)
{
	uint32_t zi = zidx(za, z);

	for (uint32_t k = 0; k < za->nur && z->nunclaimed;) {
		struct za_range *r = &za->ur[k];

		if (r->zi != zi || hi <= r->lo || lo >= r->hi) {
			k++;
			continue;
		}
		if (lo > r->lo && hi < r->hi) {
			/* a claim in the middle: split (on ENOMEM keep the
			 * whole range: the zone stays pinned, safe) */
			uint64_t tail_lo = hi, tail_hi = r->hi;

			if (unclaimed_add(za, z, tail_lo, tail_hi) == 0)
				za->ur[k].hi = lo;
			k++;
			continue;
		}
		if (lo <= r->lo)
			r->lo = ZF_MIN(r->hi, hi);
		if (hi >= r->hi)
			r->hi = ZF_MAX(r->lo, lo);
		if (r->lo >= r->hi) {
			*r = za->ur[--za->nur];
			z->nunclaimed--;
			continue;
		}
		k++;
	}
}

/* Queue a FULL zone without valid data for reset at the next commit. */
static void queue_reset(struct zalloc *za, struct za_zone *z)
{
	if (z->cond != ZDEV_COND_FULL || z->valid != 0 || z->leased ||
	    z->busy || z->resetting || z->retired || z->gc ||
	    z->list == ZA_L_PENDING || !za->mounted)
		return;
	/* Bytes written through a lease but not yet accounted may still be
	 * referenced: wait for them. */
	if (z->nunclaimed)
		return;
	z->reset_stamp = za->commit_seq;
	list_add(za, z, ZA_L_PENDING, false);
}

/* The zone reached capacity (by writing) or was finished. */
static void mark_full(struct zalloc *za, struct za_zone *z)
{
	list_del(za, z);
	set_cond(za, z, ZDEV_COND_FULL);
	z->wp = z->start + z->capacity;
	queue_reset(za, z);
}

static void make_free(struct zalloc *za, struct za_zone *z)
{
	set_cond(za, z, ZDEV_COND_EMPTY);
	z->wp = z->start;
	z->written = 0;
	if (z->valid) {
		zf_err("zalloc: zone %u reset with %llu valid bytes",
		       za->first + zidx(za, z), (unsigned long long)z->valid);
		z->valid = 0;
	}
	z->adopted = false;
	if (z->nunclaimed) {
		zf_err("zalloc: zone %u reset with bytes never accounted",
		       za->first + zidx(za, z));
		unclaimed_trim(za, z, z->start, z->start + za->zone_size);
	}
	list_add(za, z, ZA_L_FREE, false);
}

static void retire(struct zalloc *za, struct za_zone *z, uint8_t cond)
{
	list_del(za, z);
	set_cond(za, z, cond);
	z->retired = true;
}

/* Grant a lease on z (an open zone of cls with room, a CLOSED zone of cls, or
 * a FREE zone) for want bytes (already rounded to the block size). */
static void lease_zone(struct zalloc *za, struct za_zone *z,
		       enum lifetime_class cls, uint64_t want, bool gc,
		       struct zalloc_lease *out)
{
	z->was_closed = false;
	z->lease_gc = gc;
	if (z->cond == ZDEV_COND_EMPTY && za->gc_enabled && !gc &&
	    za->lists[ZA_L_FREE].count <= za->gc_reserve)
		za->reserve_taken++;
	if (z->cond == ZDEV_COND_EMPTY) {
		z->cls = (uint8_t)cls;
		z->gc_dest = gc;
		z->written = 0;
		z->wp = z->start;
		list_add(za, z, (uint8_t)(ZA_L_CLASS + cls), false);
		set_cond(za, z, ZDEV_COND_IMP_OPEN);
	} else if (z->cond == ZDEV_COND_CLOSED) {
		z->was_closed = true;
		set_cond(za, z, ZDEV_COND_IMP_OPEN);
	}
	z->leased = true;
	z->lease_len = ZF_MIN(want, zremain(z));
	unclaimed_add(za, z, z->wp, z->wp + z->lease_len);	/* reserved by caller */
	za->leased_total++;
	za->leased_cls[z->cls]++;
	out->zone = za->first + zidx(za, z);
	out->cls = z->cls;
	out->offset = z->wp;
	out->len = z->lease_len;
}

static void unlease(struct zalloc *za, struct za_zone *z)
{
	z->leased = false;
	z->lease_gc = false;
	z->lease_len = 0;
	za->leased_total--;
	za->leased_cls[z->cls]--;
}

/* Who asks for a lease: a writer, a writer granted the reserve after
 * waiting ZALLOC_GC_PATIENCE_NS for a collector that made no progress, or
 * the collector itself. */
enum za_who { ZA_USER, ZA_GRANT, ZA_GC };

/* May `who` write into z (an active or CLOSED zone of its class)?  The
 * collector's destination zones are its own: were writers to fill the
 * zone the collector opened from the last FREE zone between two of its
 * batches, it could not finish moving its victim and the device would be
 * stuck with no FREE zone (seen with RocksDB at 86% valid).  Writers that
 * waited out the collector's patience (ZA_GRANT) may use them. */
static bool zone_usable(const struct za_zone *z, enum za_who who)
{
	return !z->leased && !z->busy && zremain(z) > 0 &&
	       (!z->gc_dest || who != ZA_USER);
}

/* Step 1: the usable open (or CLOSED, if a slot allows) zone of cls with
 * the least room left. */
static struct za_zone *pick_open(struct zalloc *za, enum lifetime_class cls,
				 enum za_who who)
{
	struct za_zone *best = NULL;

	for (uint32_t i = za->lists[ZA_L_CLASS + cls].head; i != ZA_NIL;
	     i = za->z[i].next) {
		struct za_zone *z = &za->z[i];

		if (!zone_usable(z, who))
			continue;
		if (!zdev_cond_open(z->cond) && !budget_allows_open(za))
			continue;
		if (!best || zremain(z) < zremain(best))
			best = z;
	}
	return best;
}

/* Can the collector free space: a FULL zone, not in anyone's hands, that
 * holds fewer valid bytes than its capacity? */
static bool gc_candidate(const struct za_zone *z, uint64_t now)
{
	return z->cond == ZDEV_COND_FULL && !z->retired && !z->leased &&
	       !z->busy && !z->resetting && !z->gc && z->list != ZA_L_PENDING &&
	       !z->nunclaimed && z->valid < z->capacity &&
	       (!now || z->gc_retry_ns <= now);
}

/* Does collecting z free enough to be worth its copying?  In the
 * background (greedy false) at least capacity / ZALLOC_GC_MIN_GAIN; when
 * writers wait, capacity / ZALLOC_GC_MIN_GAIN_URGENT (and a block). */
static bool gc_gain_enough(const struct zalloc *za, const struct za_zone *z, bool greedy)
{
	uint64_t gain = z->capacity - z->valid;

	return gain >= za->bs &&
	       gain >= z->capacity / (greedy ? ZALLOC_GC_MIN_GAIN_URGENT : ZALLOC_GC_MIN_GAIN);
}

static bool gc_possible(const struct zalloc *za)
{
	uint64_t now;

	if (!za->gc_enabled)
		return false;
	now = zf_now_ns();
	for (uint32_t i = 0; i < za->nr; i++)
		if (gc_candidate(&za->z[i], now) && gc_gain_enough(za, &za->z[i], true))
			return true;
	return false;
}

/* FREE zones this acquirer may take.  The collector may take all of them;
 * others leave gc_reserve zones to it while it can help.  Once it cannot
 * (no FULL zone holds a dead byte), writers may take the reserve too, but
 * never the last ZALLOC_GC_FLOOR zones: with no FREE zone at all, zones
 * that die only partly later (every other file deleted) could never be
 * compacted, and the device would stay full of dead bytes for good. */
static uint32_t free_usable(const struct zalloc *za, enum za_who who)
{
	uint32_t n = za->lists[ZA_L_FREE].count;
	uint32_t log_keep = za->log_reserve > za->nr_lent ? za->log_reserve - za->nr_lent : 0;

	/* The log's reserve comes first: with it, a snapshot and the records
	 * that free space (unlink, truncate) always find a zone. */
	n = n > log_keep ? n - log_keep : 0;

	if (who == ZA_GC || !za->gc_enabled)
		return n;
	if (n > za->gc_reserve)
		return n - za->gc_reserve;
	if (who == ZA_USER && (za->gc_active || gc_possible(za)))
		return 0;	/* the collector's, while it can help */
	return n > ZALLOC_GC_FLOOR ? n - ZALLOC_GC_FLOOR : 0;
}

/* Step 2: a FREE zone if the budget allows a new active zone. */
static struct za_zone *pick_free(struct zalloc *za, enum za_who who)
{
	if (za->lists[ZA_L_FREE].head == ZA_NIL || !budget_allows_new(za) ||
	    !free_usable(za, who))
		return NULL;
	return &za->z[za->lists[ZA_L_FREE].head];
}

/* Step 3 victim: an unleased zone whose finish (or close) frees the slot
 * we lack.  When only the open budget binds (the active budget has room, or
 * `reopen`: the class will reopen one of its CLOSED zones), the victim is
 * CLOSED (nothing wasted, it stays active): the open zone written least
 * recently.  Otherwise it is FINISHED: the active zone, any class, with the
 * least remaining capacity (wastes least). */
static struct za_zone *pick_victim(struct zalloc *za, bool reopen,
				   bool *close)
{
	bool need_open = !budget_allows_open(za);
	struct za_zone *best = NULL;

	*close = need_open && (reopen || za->nr_active < za->act_budget);
	for (int c = 0; c < ZALLOC_NR_CLASSES; c++) {
		for (uint32_t i = za->lists[ZA_L_CLASS + c].head; i != ZA_NIL;
		     i = za->z[i].next) {
			struct za_zone *z = &za->z[i];

			if (z->leased || z->busy || !zdev_cond_active(z->cond))
				continue;
			if (need_open && !zdev_cond_open(z->cond))
				continue;
			if (!best || (*close ? z->wseq < best->wseq
					     : zremain(z) < zremain(best)))
				best = z;
		}
	}
	return best;
}

static bool class_has_closed(struct zalloc *za, enum lifetime_class cls,
			     enum za_who who)
{
	for (uint32_t i = za->lists[ZA_L_CLASS + cls].head; i != ZA_NIL;
	     i = za->z[i].next) {
		struct za_zone *z = &za->z[i];

		if (zone_usable(z, who) && z->cond == ZDEV_COND_CLOSED)
			return true;
	}
	return false;
}

enum { ZA_WAIT_NO = 0, ZA_WAIT_COMMIT = 1, ZA_WAIT_YES = 2, ZA_WAIT_GC = 3 };

/* Is there anything that a wait can bring?  (Nothing FREE or openable now.)
 * ZA_WAIT_COMMIT: only zones queued for reset, i.e. only a commit, can.
 * ZA_WAIT_GC: only the collector can (never for the collector itself). */
static int can_wait(struct zalloc *za, enum lifetime_class cls, enum za_who who)
{
	/* A reset in flight makes a FREE zone; a finish in flight may queue
	 * a reset or free a slot. */
	if (za->nr_resetting || za->nr_busy)
		return ZA_WAIT_YES;
	/* A lease of our class may come back with room left. */
	if (za->leased_cls[cls])
		return ZA_WAIT_YES;
	/* With a FREE zone (or a CLOSED zone of ours) but no slot, any
	 * release makes a slot or a finishable zone. */
	if ((free_usable(za, who) || class_has_closed(za, cls, who)) &&
	    za->leased_total)
		return ZA_WAIT_YES;
	if (za->lists[ZA_L_PENDING].count)
		return ZA_WAIT_COMMIT;
	/* FULL zones hold invalid bytes: the collector can free one. */
	if (who == ZA_USER && za->gc_enabled && (za->gc_active || gc_possible(za)))
		return ZA_WAIT_GC;
	return ZA_WAIT_NO;
}

static struct za_zone *zone_of(struct zalloc *za, uint32_t zone)
{
	if (zone < za->first || zone - za->first >= za->nr)
		return NULL;
	return &za->z[zone - za->first];
}

/* Finish (or close) I/O on a zone already accounted as FULL (CLOSED) and
 * marked busy; called and returns with za->mu held, drops it meanwhile. */
static void mgmt_io(struct zalloc *za, struct za_zone *z, bool close)
{
	uint32_t zone = za->first + zidx(za, z);
	struct zdev_zone dz;
	int rc;

	pthread_mutex_unlock(&za->mu);
	rc = close ? zdev_zone_close(za->dev, zone)
		   : zdev_zone_finish(za->dev, zone);
	if (rc < 0) {
		zf_err("zalloc: %s of zone %u failed: %s",
		       close ? "close" : "finish", zone, strerror(-rc));
		rc = zdev_report_zones(za->dev, zone, 1, &dz);
		if (rc != 1)
			rc = -EIO;
	}
	pthread_mutex_lock(&za->mu);
	z->busy = false;
	za->nr_busy--;
	if (rc == 1) {		/* failed: mirror what the device says */
		if (!close) {
			za->zone_finishes--;
			za->class_finishes[z->cls]--;
		}
		if (dz.cond == ZDEV_COND_READONLY || dz.cond == ZDEV_COND_OFFLINE) {
			retire(za, z, dz.cond);
		} else if (zdev_cond_active(dz.cond)) {
			z->wp = dz.wp;
			set_cond(za, z, dz.cond);
			list_add(za, z, (uint8_t)(ZA_L_CLASS + z->cls), false);
		} else if (dz.cond == ZDEV_COND_FULL) {
			mark_full(za, z);
		} else if (dz.cond == ZDEV_COND_EMPTY) {
			list_del(za, z);
			make_free(za, z);
		}
	} else if (rc < 0) {
		retire(za, z, ZDEV_COND_FULL);
	} else if (!close) {
		queue_reset(za, z);
	}
	pthread_cond_broadcast(&za->cv);
}

/* ---- life cycle ---------------------------------------------------------- */

int zalloc_create(struct zdev *dev, const struct zalloc_params *p,
		  struct zalloc **out)
{
	const struct zdev_geometry *g;
	struct zdev_zone *rep = NULL;
	struct zalloc *za;
	uint32_t done = 0;
	int rc;

	if (!dev || !p || !out)
		return -EINVAL;
	*out = NULL;
	g = zdev_geometry(dev);
	if (!g || p->nr_zones == 0 || p->first_zone >= g->nr_zones ||
	    p->nr_zones > g->nr_zones - p->first_zone ||
	    p->first_zone < g->nr_conv_zones || g->block_size == 0)
		return -EINVAL;
	if ((g->max_active && p->reserved_active >= g->max_active) ||
	    (g->max_open && p->reserved_open >= g->max_open))
		return -EINVAL;

	za = calloc(1, sizeof(*za));
	if (!za)
		return -ENOMEM;
	za->z = calloc(p->nr_zones, sizeof(*za->z));
	rep = calloc(p->nr_zones, sizeof(*rep));
	if (!za->z || !rep) {
		rc = -ENOMEM;
		goto fail;
	}
	za->dev = dev;
	za->first = p->first_zone;
	za->nr = p->nr_zones;
	za->zone_size = g->zone_size;
	za->bs = g->block_size;
	za->act_budget = g->max_active ? g->max_active - p->reserved_active
				       : ZA_UNLIMITED;
	za->open_budget = g->max_open ? g->max_open - p->reserved_open
				      : ZA_UNLIMITED;
	za->max_stripe = p->max_stripe_width ? p->max_stripe_width : 1;
	za->commit_seq = 1;
	for (int l = 0; l < ZA_L_NR; l++)
		za->lists[l].head = za->lists[l].tail = ZA_NIL;

	while (done < za->nr) {
		rc = zdev_report_zones(dev, za->first + done, za->nr - done,
				       rep + done);
		if (rc < 0)
			goto fail;
		if (rc == 0) {
			rc = -EIO;
			goto fail;
		}
		done += (uint32_t)rc;
	}
	for (uint32_t i = 0; i < za->nr; i++) {
		struct za_zone *z = &za->z[i];
		struct zdev_zone *d = &rep[i];

		if (!zdev_zone_seq(d)) {
			zf_err("zalloc: data zone %u is not sequential", za->first + i);
			rc = -EINVAL;
			goto fail;
		}
		z->start = d->start;
		z->capacity = d->capacity;
		za->max_cap = ZF_MAX(za->max_cap, z->capacity);
		z->prev = z->next = ZA_NIL;
		z->cls = LIFETIME_MEDIUM;
		if (d->cond == ZDEV_COND_FULL || d->cond == ZDEV_COND_READONLY ||
		    d->cond == ZDEV_COND_OFFLINE || d->wp < d->start ||
		    d->wp > d->start + d->capacity) {
			z->wp = z->start + z->capacity;
			/* how much is really data is unknown: say all */
			z->written = z->capacity;
		} else {
			z->wp = d->wp;
			z->written = d->wp - d->start;
		}
		if (d->cond == ZDEV_COND_READONLY || d->cond == ZDEV_COND_OFFLINE)
			z->retired = true;
		set_cond(za, z, d->cond);
	}
	free(rep);
	pthread_mutex_init(&za->mu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);	/* zf_now_ns */
		pthread_cond_init(&za->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	*out = za;
	return 0;
fail:
	free(rep);
	free(za->z);
	free(za);
	return rc;
}

void zalloc_destroy(struct zalloc *za)
{
	if (!za)
		return;
	if (za->leased_total)
		zf_warn("zalloc: destroyed with %u leases outstanding",
			za->leased_total);
	pthread_cond_destroy(&za->cv);
	pthread_mutex_destroy(&za->mu);
	free(za->ur);
	free(za->z);
	free(za);
}

void zalloc_set_need_space_cb(struct zalloc *za, void (*cb)(void *arg),
			      void *arg)
{
	if (!za)
		return;
	pthread_mutex_lock(&za->mu);
	za->need_space_cb = cb;
	za->need_space_arg = arg;
	pthread_mutex_unlock(&za->mu);
}

void zalloc_zone_adopt(struct zalloc *za, uint32_t zone, enum lifetime_class cls)
{
	struct za_zone *z;

	if (!za)
		return;
	if ((unsigned int)cls >= ZALLOC_NR_CLASSES) {
		zf_err("zalloc: adopt zone %u: bad class %d", zone, (int)cls);
		return;
	}
	pthread_mutex_lock(&za->mu);
	z = zone_of(za, zone);
	if (!z)
		zf_err("zalloc: adopt: zone %u is not a data zone", zone);
	else if (za->mounted)
		zf_err("zalloc: adopt of zone %u after mount_done", zone);
	else if (!z->adopted) {
		z->adopted = true;
		z->cls = (uint8_t)cls;
	}
	pthread_mutex_unlock(&za->mu);
}

int zalloc_mount_done(struct zalloc *za)
{
	int nreset = 0, first_err = 0;

	if (!za)
		return -EINVAL;
	pthread_mutex_lock(&za->mu);
	if (za->mounted) {
		pthread_mutex_unlock(&za->mu);
		return -EALREADY;
	}
	za->mounted = true;

	for (uint32_t i = 0; i < za->nr; i++) {
		struct za_zone *z = &za->z[i];
		bool nonempty = z->cond == ZDEV_COND_FULL || zdev_cond_active(z->cond);

		if (z->retired || z->lent)
			continue;
		if (z->cond == ZDEV_COND_EMPTY) {
			list_add(za, z, ZA_L_FREE, false);
			continue;
		}
		if (nonempty && z->valid == 0) {
			/* written but never referenced by durable metadata */
			int rc = zdev_zone_reset(za->dev, za->first + i);

			if (rc == 0) {
				z->resets++;
				za->zone_resets++;
				za->class_resets[z->cls]++;
				make_free(za, z);
				nreset++;
				continue;
			}
			zf_err("zalloc: mount: reset of zone %u failed: %s",
			       za->first + i, strerror(-rc));
			if (!first_err)
				first_err = rc;
		}
		if (zdev_cond_active(z->cond)) {
			if (!z->adopted)
				z->cls = LIFETIME_MEDIUM;
			list_add(za, z, (uint8_t)(ZA_L_CLASS + z->cls), false);
		} else if (z->cond == ZDEV_COND_FULL) {
			queue_reset(za, z);	/* only if its reset failed */
		}
	}

	/* Keep partially written zones within the data budget.  Over the
	 * active budget: finish those with the least remaining capacity (they
	 * waste least).  Over the open budget only: close them instead (they
	 * stay active and writable). */
	while (za->nr_active > za->act_budget || za->nr_open > za->open_budget) {
		struct za_zone *v = NULL;
		bool close = za->nr_active <= za->act_budget;
		uint32_t zone;
		int rc;

		for (int c = 0; c < ZALLOC_NR_CLASSES; c++)
			for (uint32_t i = za->lists[ZA_L_CLASS + c].head;
			     i != ZA_NIL; i = za->z[i].next) {
				struct za_zone *z = &za->z[i];

				if (close && !zdev_cond_open(z->cond))
					continue;
				if (!v || zremain(z) < zremain(v))
					v = z;
			}
		if (!v)
			break;
		zone = za->first + zidx(za, v);
		rc = close ? zdev_zone_close(za->dev, zone)
			   : zdev_zone_finish(za->dev, zone);
		if (rc < 0) {
			zf_err("zalloc: mount: %s of zone %u failed: %s",
			       close ? "close" : "finish", zone, strerror(-rc));
			if (!first_err)
				first_err = rc;
			retire(za, v, ZDEV_COND_FULL);
			continue;
		}
		if (close) {
			set_cond(za, v, ZDEV_COND_CLOSED);
		} else {
			za->zone_finishes++;
			za->class_finishes[v->cls]++;
			mark_full(za, v);
		}
	}
	pthread_cond_broadcast(&za->cv);
	pthread_mutex_unlock(&za->mu);
	return first_err ? first_err : nreset;
}

/* ---- valid-byte accounting ----------------------------------------------- */

/* A FULL zone of its class died whole on its own (no collector involved):
 * note how long after its last write, in device bytes.  The estimate
 * follows the longest such survival at once and forgets it slowly (1/8 of
 * the way to each new sample), so it reads "zones of this class may still
 * be dying this long after they were written".  zalloc_gc_pick() uses it
 * for WAL zones (class SHORT) only, leaving younger ones to die instead of
 * copying their live bytes; for the other classes it is a statistic. */
static void class_life_note(struct zalloc *za, const struct za_zone *z)
{
	uint64_t s = za->dev_bytes - z->wclock, *l = &za->class_life[z->cls];

	if (s >= *l)
		*l = s;
	else
		*l -= (*l - s) / 8;
}

/* Add or subtract valid bytes for [off, off+len), zone piece by zone piece. */
static void valid_update(struct zalloc *za, uint64_t off, uint64_t len, bool add)
{
	while (len) {
		uint64_t zi = off / za->zone_size;
		struct za_zone *z;
		uint64_t chunk;

		if (zi < za->first || zi - za->first >= za->nr) {
			zf_err("zalloc: valid_%s [%llu, +%llu) outside the data zones",
			       add ? "add" : "sub", (unsigned long long)off,
			       (unsigned long long)len);
			return;
		}
		z = &za->z[zi - za->first];
		chunk = ZF_MIN(len, z->start + za->zone_size - off);
		if (add) {
			/* bytes that can be referenced: written ones plus the
			 * outstanding lease (callers may account before the
			 * release) */
			uint64_t limit = z->written;
			uint64_t a = chunk;

			if (z->leased)
				limit += z->lease_len;
			if (z->resetting || z->cond == ZDEV_COND_EMPTY)
				limit = z->leased ? z->lease_len : 0;
			if (off + chunk > z->start + limit || z->valid + chunk > limit) {
				zf_err("zalloc: valid_add [%llu, +%llu) beyond the %llu bytes written in zone %llu (valid %llu)",
				       (unsigned long long)off,
				       (unsigned long long)chunk,
				       (unsigned long long)limit,
				       (unsigned long long)zi,
				       (unsigned long long)z->valid);
				a = z->valid < limit ? ZF_MIN(chunk, limit - z->valid) : 0;
			}
			if (z->nunclaimed)
				unclaimed_trim(za, z, off, off + chunk);
			z->valid += a;
			if (z->valid && z->list == ZA_L_PENDING)
				list_del(za, z);	/* referenced again */
			else if (!z->valid)
				queue_reset(za, z);	/* clamped to 0 */
		} else {
			if (z->valid < chunk) {
				zf_err("zalloc: valid_sub [%llu, +%llu) below zero in zone %llu (valid %llu)",
				       (unsigned long long)off,
				       (unsigned long long)chunk,
				       (unsigned long long)zi,
				       (unsigned long long)z->valid);
				z->valid = 0;
			} else {
				z->valid -= chunk;
			}
			if (z->gc)
				za->gc_evacuated += chunk;
			else
				z->dclock = za->dev_bytes;
			if (z->valid == 0 && !z->gc && z->cond == ZDEV_COND_FULL)
				class_life_note(za, z);
			if (z->valid == 0)
				queue_reset(za, z);
		}
		off += chunk;
		len -= chunk;
	}
}

void zalloc_valid_add(struct zalloc *za, uint64_t dev_off, uint64_t len)
{
	if (!za || !len)
		return;
	pthread_mutex_lock(&za->mu);
	valid_update(za, dev_off, len, true);
	pthread_mutex_unlock(&za->mu);
}

void zalloc_valid_sub(struct zalloc *za, uint64_t dev_off, uint64_t len)
{
	if (!za || !len)
		return;
	pthread_mutex_lock(&za->mu);
	valid_update(za, dev_off, len, false);
	pthread_mutex_unlock(&za->mu);
}

/* ---- leases -------------------------------------------------------------- */

/* One non-blocking attempt (steps 1-3).  Returns 0 with *out filled,
 * -EAGAIN when nothing can be had now, -ENOMEM.  may_finish enables step 3;
 * who: what the acquirer may use (free_usable(), zone_usable()). */
static int try_acquire(struct zalloc *za, enum lifetime_class cls,
		       uint64_t want, bool may_finish, enum za_who who,
		       struct zalloc_lease *out)
{
	struct za_zone *z;

	if (unclaimed_reserve(za))	/* lease_zone() cannot fail after this */
		return -ENOMEM;
	z = pick_open(za, cls, who);
	if (!z)
		z = pick_free(za, who);
	if (z) {
		lease_zone(za, z, cls, want, who == ZA_GC, out);
		return 0;
	}
	bool reopen = class_has_closed(za, cls, who), close;

	if (!may_finish || (!free_usable(za, who) && !reopen))
		return -EAGAIN;
	struct za_zone *v = pick_victim(za, reopen, &close);

	if (!v)
		return -EAGAIN;
	/* Account the victim as CLOSED/FULL now so the slot is ours, lease,
	 * then do the zone management I/O with the mutex dropped. */
	if (close) {
		set_cond(za, v, ZDEV_COND_CLOSED);	/* stays on its list */
	} else {
		list_del(za, v);
		set_cond(za, v, ZDEV_COND_FULL);
		v->wp = v->start + v->capacity;
		za->zone_finishes++;
		za->class_finishes[v->cls]++;
	}
	v->busy = true;
	za->nr_busy++;
	z = pick_open(za, cls, who);
	if (!z)
		z = pick_free(za, who);
	if (z)
		lease_zone(za, z, cls, want, who == ZA_GC, out);
	mgmt_io(za, v, close);
	return z ? 0 : -EAGAIN;
}

static int check_acquire_args(struct zalloc *za, enum lifetime_class cls,
			      uint64_t want, const void *out)
{
	if (!za || !out || want == 0 || (unsigned int)cls >= ZALLOC_NR_CLASSES)
		return -EINVAL;
	return 0;
}

static uint64_t round_want(const struct zalloc *za, uint64_t want)
{
	if (want > za->max_cap)	/* bound before rounding: no overflow */
		want = za->max_cap;
	return ZF_ALIGN_UP(want, za->bs);
}

/* Progress the collector makes for waiting writers: zones freed, bytes
 * moved. */
static uint64_t gc_progress(const struct zalloc *za)
{
	return za->zone_resets + za->gc_evacuated;
}

/* Blocking acquire with za->mu held.  gc: the collector's own lease (may
 * use the reserve, never waits for the collector). */
static int acquire_locked(struct zalloc *za, enum lifetime_class cls,
			  uint64_t want, bool gc, struct zalloc_lease *out)
{
	uint64_t deadline = 0, seq = 0;
	uint64_t gc_since = 0, gc_seen = 0, gc_t0 = 0;
	enum za_who who = gc ? ZA_GC : ZA_USER;
	int rc;

	if (!za->mounted)
		return -EBUSY;
	for (;;) {
		int w;

		rc = try_acquire(za, cls, want, true, who, out);

		if (rc != -EAGAIN)
			goto done;
		w = can_wait(za, cls, who);
		if (w == ZA_WAIT_NO) {
			rc = -ENOSPC;
			goto done;
		}
		if (za->need_space_cb && za->lists[ZA_L_PENDING].count) {
			/* resets are waiting for a commit: tell the caller */
			void (*cb)(void *) = za->need_space_cb;
			void *arg = za->need_space_arg;

			pthread_mutex_unlock(&za->mu);
			cb(arg);
			pthread_mutex_lock(&za->mu);
			rc = try_acquire(za, cls, want, true, who, out);
			if (rc != -EAGAIN)
				goto done;
			w = can_wait(za, cls, who);
			if (w == ZA_WAIT_NO) {
				rc = -ENOSPC;
				goto done;
			}
		}
		za->waiters++;
		if (w == ZA_WAIT_COMMIT) {
			/* Only a commit helps.  Wait while commits make progress;
			 * if none begins within the grace period, the committer
			 * may be this very thread: give up so the caller can
			 * commit and retry. */
			uint64_t now = zf_now_ns();
			struct timespec ts;

			if (!deadline || za->commit_seq != seq) {
				deadline = now + ZALLOC_COMMIT_GRACE_NS;
				seq = za->commit_seq;
			} else if (now >= deadline) {
				za->waiters--;
				rc = -ENOSPC;
				goto done;
			}
			ts.tv_sec = (time_t)(deadline / 1000000000ull);
			ts.tv_nsec = (long)(deadline % 1000000000ull);
			pthread_cond_timedwait(&za->cv, &za->mu, &ts);
		} else if (w == ZA_WAIT_GC) {
			/* Only the collector helps: kick it and wait.  If it
			 * makes no progress for ZALLOC_GC_PATIENCE_NS (e.g. the
			 * data it must move belongs to a file this writer holds),
			 * take a reserved zone rather than wait for each other. */
			uint64_t now = zf_now_ns(), until;
			struct timespec ts;

			deadline = 0;
			if (!gc_t0) {
				gc_t0 = now;
				za->gc_waits++;
			}
			if (!gc_since || gc_progress(za) != gc_seen) {
				gc_since = now;
				gc_seen = gc_progress(za);
			} else if (now - gc_since >= ZALLOC_GC_PATIENCE_NS) {
				za->waiters--;
				if (free_usable(za, ZA_GRANT)) {
					who = ZA_GRANT;
					za->gc_reserve_grants++;
					continue;
				}
				rc = -ENOSPC;
				goto done;
			}
			za->gc_waiters++;
			if (za->gc_kick) {
				void (*kick)(void *) = za->gc_kick;
				void *arg = za->gc_arg;

				pthread_mutex_unlock(&za->mu);
				kick(arg);
				pthread_mutex_lock(&za->mu);
			}
			until = zf_now_ns() + 50000000ull;	/* re-check every 50 ms */
			ts.tv_sec = (time_t)(until / 1000000000ull);
			ts.tv_nsec = (long)(until % 1000000000ull);
			pthread_cond_timedwait(&za->cv, &za->mu, &ts);
			za->gc_waiters--;
		} else {
			deadline = 0;
			pthread_cond_wait(&za->cv, &za->mu);
		}
		za->waiters--;
	}
done:
	if (gc_t0)
		za->gc_wait_ns += zf_now_ns() - gc_t0;
	return rc;
}

int zalloc_acquire(struct zalloc *za, enum lifetime_class cls, uint64_t want,
		   struct zalloc_lease *out)
{
	int rc = check_acquire_args(za, cls, want, out);

	if (rc)
		return rc;
	pthread_mutex_lock(&za->mu);
	rc = acquire_locked(za, cls, round_want(za, want), false, out);
	pthread_mutex_unlock(&za->mu);
	return rc;
}

int zalloc_acquire_many(struct zalloc *za, enum lifetime_class cls,
			uint64_t want_each, unsigned int n,
			struct zalloc_lease *out)
{
	int rc = check_acquire_args(za, cls, want_each, out);
	unsigned int got = 1;

	if (rc)
		return rc;
	if (n == 0)
		return -EINVAL;
	pthread_mutex_lock(&za->mu);
	want_each = round_want(za, want_each);
	rc = acquire_locked(za, cls, want_each, false, &out[0]);
	if (rc == 0) {
		/* extra stripes: only what is there now, no finishing */
		while (got < n && try_acquire(za, cls, want_each, false, ZA_USER,
					      &out[got]) == 0)
			got++;
	}
	pthread_mutex_unlock(&za->mu);
	return rc ? rc : (int)got;
}

int zalloc_acquire_gc(struct zalloc *za, enum lifetime_class cls, uint64_t want,
		      struct zalloc_lease *out)
{
	int rc = check_acquire_args(za, cls, want, out);

	if (rc)
		return rc;
	pthread_mutex_lock(&za->mu);
	rc = acquire_locked(za, cls, round_want(za, want), true, out);
	pthread_mutex_unlock(&za->mu);
	return rc;
}

/* Called with za->mu held; z leased, lease validated. */
static void account_written(struct zalloc *za, struct za_zone *z, uint64_t n)
{
	if (!n)
		return;
	z->wp += n;
	z->written += n;
	z->wseq = ++za->write_seq;
	za->dev_bytes += n;
	za->class_bytes[z->cls] += n;
	z->wclock = za->dev_bytes;
	if (z->lease_gc) {
		za->gc_bytes += n;
		za->gc_class_bytes[z->cls] += n;
	}
}

/* After the lease on z ended: put z where it belongs. */
static void settle(struct zalloc *za, struct za_zone *z, bool wrote)
{
	bool was_closed = z->was_closed;

	z->was_closed = false;
	if (z->valid > z->written) {
		zf_err("zalloc: zone %u: %llu valid bytes but only %llu written",
		       za->first + zidx(za, z), (unsigned long long)z->valid,
		       (unsigned long long)z->written);
		z->valid = z->written;
	}
	if (zremain(z) == 0) {
		mark_full(za, z);	/* the device did the same at capacity */
	} else if (z->wp == z->start) {
		list_del(za, z);
		make_free(za, z);	/* never written: still EMPTY */
	} else if (!wrote && was_closed) {
		set_cond(za, z, ZDEV_COND_CLOSED);
	}
}

static void release_error(struct zalloc *za, struct za_zone *z,
			  const struct zalloc_lease *lease, uint64_t written,
			  int err)
{
	uint32_t zone = lease->zone;
	uint64_t end = z->start + z->capacity, new_wp, moved;
	struct zdev_zone dz;
	bool bad_cond, went_back;
	int rc, frc = -EIO;

	/* The zone stays leased: nobody else touches it while we look. */
	pthread_mutex_unlock(&za->mu);
	rc = zdev_report_zones(za->dev, zone, 1, &dz);
	bad_cond = rc == 1 && (dz.cond == ZDEV_COND_READONLY ||
			       dz.cond == ZDEV_COND_OFFLINE);
	went_back = rc == 1 && !bad_cond && dz.cond != ZDEV_COND_FULL &&
		    dz.wp < lease->offset;
	if (rc != 1 || went_back)	/* looks damaged: stop writing it */
		frc = zdev_zone_finish(za->dev, zone);
	pthread_mutex_lock(&za->mu);

	unlease(za, z);
	if (bad_cond) {
		zf_err("zalloc: zone %u is %s after a write error (%s); retiring it",
		       zone, zdev_cond_name(dz.cond), strerror(-err));
		retire(za, z, dz.cond);
		goto out;
	}
	if (rc != 1) {
		zf_err("zalloc: zone %u: write failed (%s) and zone report failed (%s); retiring it",
		       zone, strerror(-err), strerror(rc < 0 ? -rc : EIO));
		if (frc == 0)
			za->zone_finishes++;
		retire(za, z, ZDEV_COND_FULL);
		z->wp = end;
		goto out;
	}
	if (went_back) {
		zf_err("zalloc: zone %u: device wp %llu is below the lease at %llu; finishing it",
		       zone, (unsigned long long)dz.wp,
		       (unsigned long long)lease->offset);
		z->written = ZF_MIN(z->written, dz.wp - dz.start);
		unclaimed_trim(za, z, lease->offset, lease->offset + written);
		settle(za, z, false);	/* clamps valid bytes */
		if (frc == 0) {
			za->zone_finishes++;
			mark_full(za, z);
		} else {
			retire(za, z, ZDEV_COND_FULL);
			z->wp = end;
		}
		goto out;
	}
	/* Accept the device's write pointer.  Bytes past what the caller says
	 * it wrote are garbage: written, never valid. */
	new_wp = dz.cond == ZDEV_COND_FULL ? end : ZF_MIN(dz.wp, end);
	moved = new_wp - lease->offset;
	if (moved < written)
		zf_err("zalloc: zone %u: only %llu of the %llu bytes reported written reached the device",
		       zone, (unsigned long long)moved,
		       (unsigned long long)written);
	else if (moved > written)
		zf_info("zalloc: zone %u: %llu bytes past the failed write are garbage",
			zone, (unsigned long long)(moved - written));
	account_written(za, z, moved);
	if (moved < written)	/* lost: can never be claimed */
		unclaimed_trim(za, z, lease->offset + moved,
			       lease->offset + written);
	settle(za, z, moved > 0);
	if (zdev_cond_active(z->cond) && zdev_cond_active(dz.cond) && dz.cond != z->cond)
		set_cond(za, z, dz.cond);
out:
	pthread_cond_broadcast(&za->cv);
}

void zalloc_release(struct zalloc *za, const struct zalloc_lease *lease,
		    uint64_t written, int err)
{
	struct za_zone *z;

	if (!za || !lease)
		return;
	pthread_mutex_lock(&za->mu);
	z = zone_of(za, lease->zone);
	if (!z || !z->leased || lease->offset != z->wp) {
		zf_err("zalloc: release of a lease not held (zone %u, offset %llu)",
		       lease->zone, (unsigned long long)lease->offset);
		pthread_mutex_unlock(&za->mu);
		return;
	}
	if (written > z->lease_len || written % za->bs) {
		zf_err("zalloc: release of zone %u: %llu bytes written for a lease of %llu",
		       lease->zone, (unsigned long long)written,
		       (unsigned long long)z->lease_len);
		if (err >= 0)
			err = -EINVAL;	/* resync with the device */
		written = ZF_ALIGN_DOWN(ZF_MIN(written, z->lease_len), za->bs);
	}
	/* the part of the lease not written will never be claimed */
	unclaimed_trim(za, z, lease->offset + written,
		       lease->offset + z->lease_len);
	if (err < 0) {
		release_error(za, z, lease, written, err);
	} else {
		account_written(za, z, written);
		unlease(za, z);
		settle(za, z, written > 0);
		pthread_cond_broadcast(&za->cv);
	}
	pthread_mutex_unlock(&za->mu);
}

unsigned int zalloc_stripe_width(struct zalloc *za, enum lifetime_class cls)
{
	unsigned int ncls = 0, w;
	uint32_t budget;

	if (!za)
		return 1;
	pthread_mutex_lock(&za->mu);
	for (int c = 0; c < ZALLOC_NR_CLASSES; c++)
		if (c == (int)cls || za->lists[ZA_L_CLASS + c].count ||
		    za->leased_cls[c])
			ncls++;
	budget = ZF_MIN(za->act_budget, za->open_budget);
	w = za->max_stripe;
	if (budget != ZA_UNLIMITED)
		w = ZF_MIN(w, budget / ZF_MAX(1u, ncls));
	pthread_mutex_unlock(&za->mu);
	return w ? w : 1;
}

/* ---- commits and resets -------------------------------------------------- */

uint64_t zalloc_commit_begin(struct zalloc *za)
{
	uint64_t t;

	if (!za)
		return 0;
	pthread_mutex_lock(&za->mu);
	t = za->commit_seq++;
	pthread_mutex_unlock(&za->mu);
	return t;
}

int zalloc_commit_end(struct zalloc *za, uint64_t ticket)
{
	uint32_t *todo, n = 0;
	int done = 0, first_err = 0;

	if (!za)
		return -EINVAL;
	pthread_mutex_lock(&za->mu);
	if (ticket == 0 || ticket >= za->commit_seq) {
		pthread_mutex_unlock(&za->mu);
		return -EINVAL;
	}
	if (!za->lists[ZA_L_PENDING].count) {
		pthread_mutex_unlock(&za->mu);
		return 0;
	}
	todo = malloc(za->lists[ZA_L_PENDING].count * sizeof(*todo));
	if (!todo) {
		pthread_mutex_unlock(&za->mu);
		return -ENOMEM;
	}
	/* The pending list is in stamp order. */
	while (za->lists[ZA_L_PENDING].head != ZA_NIL) {
		struct za_zone *z = &za->z[za->lists[ZA_L_PENDING].head];

		if (z->reset_stamp > ticket)
			break;
		list_del(za, z);
		z->resetting = true;
		za->nr_resetting++;
		todo[n++] = zidx(za, z);
	}
	pthread_mutex_unlock(&za->mu);

	for (uint32_t k = 0; k < n; k++) {
		uint32_t zone = za->first + todo[k];
		int rc = zdev_zone_reset(za->dev, zone);
		struct za_zone *z = &za->z[todo[k]];
		struct zdev_zone dz;
		int rrc = 0;

		if (rc < 0) {
			zf_err("zalloc: reset of zone %u failed: %s", zone,
			       strerror(-rc));
			if (!first_err)
				first_err = rc;
			rrc = zdev_report_zones(za->dev, zone, 1, &dz);
		}
		pthread_mutex_lock(&za->mu);
		z->resetting = false;
		za->nr_resetting--;
		if (rc == 0) {
			z->resets++;
			za->zone_resets++;
			za->class_resets[z->cls]++;
			make_free(za, z);
			done++;
		} else if (rrc == 1 && (dz.cond == ZDEV_COND_READONLY ||
					dz.cond == ZDEV_COND_OFFLINE)) {
			retire(za, z, dz.cond);
		} else if (rrc == 1 && dz.cond == ZDEV_COND_EMPTY) {
			make_free(za, z);
		} else {
			/* try again at the next commit */
			z->reset_stamp = 0;
			list_add(za, z, ZA_L_PENDING, true);
		}
		pthread_cond_broadcast(&za->cv);
		pthread_mutex_unlock(&za->mu);
	}
	free(todo);
	return first_err ? first_err : done;
}

/* ---- introspection ------------------------------------------------------- */

int zalloc_zone_info(struct zalloc *za, uint32_t zone, struct zalloc_zone_info *out)
{
	struct za_zone *z;

	if (!za || !out)
		return -EINVAL;
	pthread_mutex_lock(&za->mu);
	z = zone_of(za, zone);
	if (!z) {
		pthread_mutex_unlock(&za->mu);
		return -EINVAL;
	}
	out->zone = zone;
	out->cond = z->cond;
	out->cls = z->cls;
	out->leased = z->leased;
	out->wp = z->wp;
	out->capacity = z->capacity;
	out->valid_bytes = z->valid;
	out->resets = z->resets;
	out->lent = z->lent;
	pthread_mutex_unlock(&za->mu);
	return 0;
}

void zalloc_get_stats(struct zalloc *za, struct zalloc_stats *st)
{
	if (!za || !st)
		return;
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&za->mu);
	st->nr_zones = za->nr;
	st->free_zones = za->lists[ZA_L_FREE].count;
	st->open_zones = za->nr_open;
	st->active_zones = za->nr_active;
	st->max_active_data = ZF_MIN(za->act_budget, za->nr);
	for (uint32_t i = 0; i < za->nr; i++) {
		struct za_zone *z = &za->z[i];

		st->valid_bytes += z->valid;
		if (z->retired)
			continue;	/* not usable capacity */
		if (z->lent) {
			st->log_bytes += z->capacity;
			continue;
		}
		st->capacity_bytes += z->capacity;
		if (z->cond == ZDEV_COND_EMPTY || zdev_cond_active(z->cond))
			st->free_bytes += zremain(z);
		st->reclaimable_bytes += (z->wp - z->start) - ZF_MIN(z->valid, z->wp - z->start);
	}
	if (za->gc_enabled) {
		uint32_t k = 0;

		for (uint32_t i = za->lists[ZA_L_FREE].head; i != ZA_NIL && k < ZALLOC_GC_FLOOR;
		     i = za->z[i].next, k++)
			st->gc_floor_bytes += za->z[i].capacity;
		st->free_bytes -= st->gc_floor_bytes;
	}
	st->log_zones = za->nr_lent;
	st->log_reserve_zones = za->log_reserve;
	if (za->log_reserve > za->nr_lent) {
		uint64_t keep = (uint64_t)(za->log_reserve - za->nr_lent) * za->max_cap;
		st->log_bytes += keep;
		st->free_bytes -= ZF_MIN(st->free_bytes, keep);
	}
	st->device_bytes_written = za->dev_bytes;
	memcpy(st->class_bytes_written, za->class_bytes,
	       sizeof(st->class_bytes_written));
	st->zone_resets = za->zone_resets;
	st->zone_finishes = za->zone_finishes;
	st->pending_resets = za->lists[ZA_L_PENDING].count + za->nr_resetting;
	st->gc_bytes_written = za->gc_bytes;
	memcpy(st->gc_class_bytes_written, za->gc_class_bytes,
	       sizeof(st->gc_class_bytes_written));
	memcpy(st->class_zone_resets, za->class_resets, sizeof(st->class_zone_resets));
	memcpy(st->class_zone_finishes, za->class_finishes,
	       sizeof(st->class_zone_finishes));
	st->gc_runs = za->gc_runs;
	st->gc_waits = za->gc_waits;
	st->gc_wait_ns = za->gc_wait_ns;
	st->gc_reserve_grants = za->gc_reserve_grants;
	st->gc_reserve_taken = za->reserve_taken;
	st->gc_reserve_zones = za->gc_enabled ? za->gc_reserve : 0;
	st->gc_waiters = za->gc_waiters;
	st->gc_active = za->gc_active;
	for (int c = 0; c < ZALLOC_NR_CLASSES; c++)
		st->class_life_bytes[c] = za->class_life[c];
	for (uint32_t i = 0; i < za->nr; i++)
		if (gc_candidate(&za->z[i], 0) && gc_gain_enough(za, &za->z[i], true))
			st->gc_reclaimable_bytes += za->z[i].capacity - za->z[i].valid;
	pthread_mutex_unlock(&za->mu);
}

/* ---- garbage collection support ------------------------------------------ */

void zalloc_set_gc(struct zalloc *za, uint32_t reserve_zones,
		   void (*kick)(void *arg), void *arg)
{
	if (!za)
		return;
	pthread_mutex_lock(&za->mu);
	za->gc_enabled = kick != NULL;
	za->gc_reserve = reserve_zones;
	za->gc_kick = kick;
	za->gc_arg = arg;
	pthread_cond_broadcast(&za->cv);
	pthread_mutex_unlock(&za->mu);
}

double zalloc_gc_score(uint64_t capacity, uint64_t valid, uint64_t age)
{
	double u;

	if (capacity == 0 || valid >= capacity)
		return -1;
	u = (double)valid / (double)capacity;
	/* benefit: the bytes freed, weighted by the zone's age in zones
	 * written since (log scale); cost: reading and writing the live
	 * bytes */
	return (1.0 - u) * log2(2.0 + (double)age / (double)capacity) /
	       (2.0 * u + 1.0 / (double)capacity);
}

/* Bytes the collector could write for each class now: the FREE zones
 * (all of them, the reserve included) plus the room left in the class's
 * open or closed zones it may use. */
static void gc_room(const struct zalloc *za, uint64_t room[ZALLOC_NR_CLASSES])
{
	uint64_t free_cap = 0;
	uint32_t n = free_usable(za, ZA_GC);

	for (uint32_t i = za->lists[ZA_L_FREE].head; i != ZA_NIL && n; i = za->z[i].next, n--)
		free_cap += za->z[i].capacity;
	for (int c = 0; c < ZALLOC_NR_CLASSES; c++) {
		room[c] = free_cap;
		for (uint32_t i = za->lists[ZA_L_CLASS + c].head; i != ZA_NIL;
		     i = za->z[i].next)
			if (zone_usable(&za->z[i], ZA_GC))
				room[c] += zremain(&za->z[i]);
	}
}

/* A zone's age for cost-benefit: device bytes written since its data last
 * changed, by a write or by a death.  Zones are written once, so the write
 * alone says little; a zone whose tables are dying now (a compaction just
 * deleted some of its files) is hot: the rest of its data is likely to
 * die soon too, and moving it would be wasted.  Measured with RocksDB at
 * 80% (scripts/bench-placement.sh): docs/placement.md. */
static uint64_t gc_age(const struct zalloc *za, const struct za_zone *z)
{
	return za->dev_bytes - ZF_MAX(z->wclock, z->dclock);
}

int zalloc_gc_pick(struct zalloc *za, bool greedy, const uint64_t *skip,
		   struct zalloc_gc_victim *v)
{
	struct za_zone *best = NULL;
	double best_score = 0;
	uint64_t now = zf_now_ns(), room[ZALLOC_NR_CLASSES];

	if (!za || !v)
		return -EINVAL;
	pthread_mutex_lock(&za->mu);
	gc_room(za, room);
	for (uint32_t i = 0; i < za->nr; i++) {
		struct za_zone *z = &za->z[i];
		double sc;

		if (!gc_candidate(z, now) || !gc_gain_enough(za, z, greedy))
			continue;
		/* only victims whose live data fits: a victim moved in part
		 * uses room and frees nothing */
		if (z->valid > room[z->cls])
			continue;
		if (skip && (skip[i / 64] >> (i % 64)) & 1)
			continue;
		/* in the background, a WAL zone that may still die is left to
		 * die (for longer-lived classes the age in the score does
		 * better: deferring them all made bench-placement's GC at 80%
		 * greedy, WA 1.088 vs 1.045) */
		if (!greedy && z->cls == LIFETIME_SHORT &&
		    za->dev_bytes - z->wclock < za->class_life[z->cls])
			continue;
		sc = greedy ? (double)(z->capacity - z->valid)
			    : zalloc_gc_score(z->capacity, z->valid, gc_age(za, z));
		if (!best || sc > best_score) {
			best = z;
			best_score = sc;
		}
	}
	if (!best) {
		pthread_mutex_unlock(&za->mu);
		return -ENOENT;
	}
	best->gc = true;
	za->gc_active++;
	za->gc_runs++;
	v->zone = za->first + zidx(za, best);
	v->cls = best->cls;
	v->start = best->start;
	v->capacity = best->capacity;
	v->valid_bytes = best->valid;
	v->age = gc_age(za, best);
	v->score = best_score;
	pthread_mutex_unlock(&za->mu);
	return 0;
}

void zalloc_gc_done(struct zalloc *za, uint32_t zone)
{
	zalloc_gc_done_backoff(za, zone, 0);
}

void zalloc_gc_done_backoff(struct zalloc *za, uint32_t zone, uint64_t backoff_ns)
{
	struct za_zone *z;

	if (!za)
		return;
	pthread_mutex_lock(&za->mu);
	z = zone_of(za, zone);
	if (!z || !z->gc) {
		zf_err("zalloc: gc_done on zone %u which is not being collected", zone);
	} else {
		z->gc = false;
		z->gc_retry_ns = backoff_ns ? zf_now_ns() + backoff_ns : 0;
		za->gc_active--;
		if (z->valid == 0)
			queue_reset(za, z);
	}
	pthread_cond_broadcast(&za->cv);
	pthread_mutex_unlock(&za->mu);
}

void zalloc_discard(struct zalloc *za, uint64_t dev_off, uint64_t len)
{
	if (!za || !len)
		return;
	pthread_mutex_lock(&za->mu);
	while (len) {
		uint64_t zi = dev_off / za->zone_size;
		struct za_zone *z;
		uint64_t chunk;

		if (zi < za->first || zi - za->first >= za->nr) {
			zf_err("zalloc: discard [%llu, +%llu) outside the data zones",
			       (unsigned long long)dev_off, (unsigned long long)len);
			break;
		}
		z = &za->z[zi - za->first];
		chunk = ZF_MIN(len, z->start + za->zone_size - dev_off);
		if (z->nunclaimed) {
			unclaimed_trim(za, z, dev_off, dev_off + chunk);
			if (!z->nunclaimed && z->valid == 0)
				queue_reset(za, z);
		}
		dev_off += chunk;
		len -= chunk;
	}
	pthread_mutex_unlock(&za->mu);
}

/* Debug/test aid: the number of acquirers currently blocked. */
int zalloc_lend(struct zalloc *za, uint32_t keep, uint32_t *zone)
{
	int rc = -ENOSPC;

	pthread_mutex_lock(&za->mu);
	uint32_t i = za->lists[ZA_L_FREE].head;
	if (za->mounted && i != ZA_NIL && za->lists[ZA_L_FREE].count > keep) {
		struct za_zone *z = &za->z[i];

		list_del(za, z);
		z->lent = true;
		za->nr_lent++;
		*zone = za->first + i;
		rc = 0;
	}
	pthread_mutex_unlock(&za->mu);
	return rc;
}

void zalloc_lend_return(struct zalloc *za, uint32_t zone)
{
	pthread_mutex_lock(&za->mu);
	struct za_zone *z = zone_of(za, zone);
	if (!z || !z->lent) {
		zf_err("zalloc: zone %u given back but not lent", zone);
	} else {
		z->lent = false;
		za->nr_lent--;
		z->resets++;
		make_free(za, z);
		pthread_cond_broadcast(&za->cv);
	}
	pthread_mutex_unlock(&za->mu);
}

int zalloc_lend_adopt(struct zalloc *za, uint32_t zone)
{
	int rc = 0;

	pthread_mutex_lock(&za->mu);
	struct za_zone *z = zone_of(za, zone);
	if (!z || za->mounted || z->retired) {
		rc = -EINVAL;
	} else if (!z->lent) {
		set_cond(za, z, ZDEV_COND_EMPTY);	/* the log's, not the budget's */
		z->lent = true;
		za->nr_lent++;
	}
	pthread_mutex_unlock(&za->mu);
	return rc;
}

uint32_t zalloc_free_zones(struct zalloc *za)
{
	pthread_mutex_lock(&za->mu);
	uint32_t n = za->lists[ZA_L_FREE].count;
	pthread_mutex_unlock(&za->mu);
	return n;
}

void zalloc_set_log_reserve(struct zalloc *za, uint32_t zones)
{
	pthread_mutex_lock(&za->mu);
	za->log_reserve = zones;
	pthread_cond_broadcast(&za->cv);
	pthread_mutex_unlock(&za->mu);
}

unsigned int zalloc_waiters(struct zalloc *za)
{
	unsigned int n;

	if (!za)
		return 0;
	pthread_mutex_lock(&za->mu);
	n = za->waiters;
	pthread_mutex_unlock(&za->mu);
	return n;
}
