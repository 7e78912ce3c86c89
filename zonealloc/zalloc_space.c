/* zalloc_space.c — the one place an acquirer waits for space: which FREE
 * zones it may take (the metadata log's reserve, the collector's reserve,
 * the floor), whether waiting can help, and how long it waits.
 *
 * zalloc_acquire() waits (condvar) rather than fail while a release, a
 * finish in flight or a reset can still help the class: a lease of the
 * same class is out (it may come back with room), a FREE zone exists and
 * any lease is out, or zones are queued for reset (only a commit frees
 * those: zalloc_set_need_space_cb() lets the caller kick one; if no commit
 * begins within ZALLOC_COMMIT_GRACE_NS, -ENOSPC, so that a committer
 * thread that allocates before committing does not wait for itself), or
 * the collector can free a zone (kick, timed waits; after
 * ZALLOC_GC_PATIENCE_NS without progress take a reserved zone, then
 * -ENOSPC).
 *
 * Locking: every function here runs with za->mu held (the public ones take
 * it) and drops it only inside condvar waits and around the callbacks.
 */
#include "zonealloc/zalloc_priv.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "common/zf_common.h"

enum { ZA_WAIT_NO = 0, ZA_WAIT_COMMIT = 1, ZA_WAIT_YES = 2, ZA_WAIT_GC = 3 };

/* FREE zones this acquirer may take.  The collector may take all of them;
 * others leave gc_reserve zones to it while it can help.  Once it cannot
 * (no FULL zone holds a dead byte), writers may take the reserve too, but
 * never the last ZALLOC_GC_FLOOR zones: with no FREE zone at all, zones
 * that die only partly later (every other file deleted) could never be
 * compacted, and the device would stay full of dead bytes for good. */
uint32_t za_free_usable(const struct zalloc *za, enum za_who who)
{
	uint32_t n = za->lists[ZA_L_FREE].count;
	uint32_t log_keep = za->log_reserve > za->nr_lent ? za->log_reserve - za->nr_lent : 0;

	za_assert_held(za);
	/* The log's reserve comes first: with it, a snapshot and the records
	 * that free space (unlink, truncate) always find a zone. */
	n = n > log_keep ? n - log_keep : 0;

	if (who == ZA_GC || !za->gc_enabled)
		return n;
	if (n > za->gc_reserve)
		return n - za->gc_reserve;
	if (who == ZA_USER && (za->gc_active || za_gc_possible(za)))
		return 0;	/* the collector's, while it can help */
	return n > ZALLOC_GC_FLOOR ? n - ZALLOC_GC_FLOOR : 0;
}

/* Is there anything that a wait can bring?  (Nothing FREE or openable now.)
 * ZA_WAIT_COMMIT: only zones queued for reset, i.e. only a commit, can.
 * ZA_WAIT_GC: only the collector can (never for the collector itself). */
int za_can_wait(struct zalloc *za, unsigned int cls, enum za_who who)
{
	za_assert_held(za);
	/* A reset in flight makes a FREE zone; a finish in flight may queue
	 * a reset or free a slot. */
	if (za->nr_resetting || za->nr_busy)
		return ZA_WAIT_YES;
	/* A lease of our class may come back with room left. */
	if (za->leased_cls[cls])
		return ZA_WAIT_YES;
	/* With a FREE zone (or a CLOSED zone of ours) but no slot, any
	 * release makes a slot or a finishable zone. */
	if ((za_free_usable(za, who) || za_class_has_closed(za, cls, who)) &&
	    za->leased_total)
		return ZA_WAIT_YES;
	if (za->lists[ZA_L_PENDING].count)
		return ZA_WAIT_COMMIT;
	/* FULL zones hold invalid bytes: the collector can free one. */
	if (who == ZA_USER && za->gc_enabled && (za->gc_active || za_gc_possible(za)))
		return ZA_WAIT_GC;
	return ZA_WAIT_NO;
}

/* ---- the one wait ------------------------------------------------------ */

/* What one waiting writer remembers across its waits. */
struct za_wait {
	uint64_t commit_deadline;	/* ZA_WAIT_COMMIT: give up at (0: unset) */
	uint64_t commit_seq;		/* commit_seq when it was set */
	uint64_t t0;			/* first wait for the collector (0: none) */
	uint64_t since;			/* last progress of the collector seen */
	uint64_t seen;			/* za_gc_progress() then */
	uint64_t seen_free;		/* free bytes then */
};

/* The collector's progress for waiting writers: zones reset, valid bytes
 * moved out of its victims. */
static uint64_t gc_progress(const struct zalloc *za)
{
	return za->zone_resets + za->gc_evacuated;
}

/* The patience rule, the same for every writer waiting for the collector:
 * it waits as long as the collector makes progress (a zone reset, a byte
 * moved out of a victim, or free bytes growing), and gives up
 * ZALLOC_GC_PATIENCE_NS after the last progress it saw.  First call: starts
 * the clock and counts the wait. */
static bool gc_patience_over(struct zalloc *za, struct za_wait *w,
			     uint64_t free_bytes)
{
	uint64_t now = zf_now_ns();

	za_assert_held(za);
	if (!w->t0) {
		w->t0 = now;
		za->gc_waits++;
	}
	if (!w->since || gc_progress(za) != w->seen || free_bytes > w->seen_free) {
		w->since = now;
		w->seen = gc_progress(za);
		w->seen_free = free_bytes;
		return false;
	}
	return now - w->since >= ZALLOC_GC_PATIENCE_NS;
}

/* A writer that waited a second or more for the collector is a stall a
 * person must see (at most one warning a minute: every writer of a full
 * device may wait). */
#define ZA_STALL_WARN_NS 1000000000ull
#define ZA_STALL_WARN_EVERY_NS 60000000000ull

static void wait_done(struct zalloc *za, const struct za_wait *w)
{
	static _Atomic uint64_t last_warn;
	if (!w->t0)
		return;
	uint64_t now = zf_now_ns(), took = now - w->t0, last = last_warn;
	za->gc_wait_ns += took;
	if (took >= ZA_STALL_WARN_NS && (!last || now - last >= ZA_STALL_WARN_EVERY_NS) &&
	    atomic_compare_exchange_strong(&last_warn, &last, now))
		zf_warn("gc stall: a write waited %.1f s for the garbage collector to free "
			"space (%u free zones): the device is nearly full of valid data",
			(double)took / 1e9, za->lists[ZA_L_FREE].count);
}

/* Call a caller's callback (a kick: it must not take locks writers hold
 * while they call zalloc) with za->mu dropped. */
static void call_unlocked(struct zalloc *za, void (*fn)(void *), void *arg)
{
	pthread_mutex_unlock(&za->mu);
	fn(arg);
	pthread_mutex_lock(&za->mu);
}

static void timedwait_until(struct zalloc *za, uint64_t at_ns)
{
	struct timespec ts = zf_ns_to_timespec((int64_t)at_ns);

	zf_will_block();
	pthread_cond_timedwait(&za->cv, &za->mu, &ts);
}

/* Kick the collector and wait for it a little (re-check every 50 ms). */
static void wait_for_collector(struct zalloc *za)
{
	if (za->gc_kick)
		call_unlocked(za, za->gc_kick, za->gc_arg);
	timedwait_until(za, zf_now_ns() + 50000000ull);
}

/* Only a commit helps.  Wait while commits make progress; if none begins
 * within ZALLOC_COMMIT_GRACE_NS, the committer may be this very thread:
 * -ENOSPC so the caller can commit and retry. */
static int wait_commit(struct zalloc *za, struct za_wait *w)
{
	uint64_t now = zf_now_ns();

	if (!w->commit_deadline || za->commit_seq != w->commit_seq) {
		w->commit_deadline = now + ZALLOC_COMMIT_GRACE_NS;
		w->commit_seq = za->commit_seq;
	} else if (now >= w->commit_deadline) {
		return -ENOSPC;
	}
	timedwait_until(za, w->commit_deadline);
	return 0;
}

/* Only the collector helps: kick it and wait.  Once it is out of patience
 * (e.g. the data the collector must move belongs to a file this writer
 * holds), the writer takes a reserved zone rather than wait for each
 * other (*who = ZA_GRANT, 0 without waiting); with none left, -ENOSPC. */
static int wait_gc_for_lease(struct zalloc *za, struct za_wait *w,
			     enum za_who *who)
{
	w->commit_deadline = 0;
	if (gc_patience_over(za, w, za_free_bytes(za))) {
		if (!za_free_usable(za, ZA_GRANT))
			return -ENOSPC;
		*who = ZA_GRANT;
		za->gc_reserve_grants++;
		return 0;
	}
	za->gc_waiters++;
	wait_for_collector(za);
	za->gc_waiters--;
	return 0;
}

/* One attempt, and what a wait could bring when it fails (ZA_WAIT_*):
 * zones queued for reset make the caller poke its committer first. */
static int attempt(struct zalloc *za, unsigned int cls, uint64_t want,
		   enum za_who who, struct zalloc_lease *out, int *kind)
{
	int rc = za_try_acquire(za, cls, want, true, who, out);

	if (rc != -EAGAIN)
		return rc;
	*kind = za_can_wait(za, cls, who);
	if (*kind == ZA_WAIT_NO)
		return -ENOSPC;
	if (za->need_space_cb && za->lists[ZA_L_PENDING].count) {
		call_unlocked(za, za->need_space_cb, za->need_space_arg);
		rc = za_try_acquire(za, cls, want, true, who, out);
		if (rc != -EAGAIN)
			return rc;
		*kind = za_can_wait(za, cls, who);
		if (*kind == ZA_WAIT_NO)
			return -ENOSPC;
	}
	return -EAGAIN;
}

/* Blocking acquire with za->mu held.  gc: the collector's own lease (may
 * use the reserve, never waits for the collector). */
int za_acquire_locked(struct zalloc *za, unsigned int cls,
		      uint64_t want, bool gc, struct zalloc_lease *out)
{
	struct za_wait w = { 0 };
	enum za_who who = gc ? ZA_GC : ZA_USER;
	int rc, kind = ZA_WAIT_NO;

	za_assert_held(za);
	if (!za->mounted)
		return -EBUSY;
	while ((rc = attempt(za, cls, want, who, out, &kind)) == -EAGAIN) {
		za->waiters++;
		if (kind == ZA_WAIT_COMMIT) {
			rc = wait_commit(za, &w);
		} else if (kind == ZA_WAIT_GC) {
			rc = wait_gc_for_lease(za, &w, &who);
		} else {
			w.commit_deadline = 0;
			zf_will_block();
			pthread_cond_wait(&za->cv, &za->mu);
			rc = 0;
		}
		za->waiters--;
		if (rc)
			break;
	}
	if (rc == -ENOSPC && who != ZA_GC)
		rc = za_try_other_class(za, cls, want, out);
	wait_done(za, &w);
	return rc;
}

/* Admission (zalloc.h): the same patience rule as a lease's wait for the
 * collector; at the end of it -ENOSPC, as there is no reserve to grant
 * bytes that are not yet written. */
int zalloc_wait_room(struct zalloc *za, const struct zalloc_room *r)
{
	struct za_wait w = { 0 };
	int ret = -ENOSPC;

	if (!za || !r || !r->buffered)
		return -EINVAL;
	pthread_mutex_lock(&za->mu);
	for (int attempt = 0;; attempt++) {
		/* O(1): the sums (zalloc_priv.h), never a walk of the zones */
		uint64_t need = r->buffered(r->arg) + r->bytes + r->keep +
				atomic_load_explicit(&za->room_held, memory_order_relaxed);
		uint64_t free_bytes = za_free_bytes(za);
		uint64_t pending = za->lists[ZA_L_PENDING].count + za->nr_resetting;

		if (free_bytes >= need) {
			atomic_fetch_add_explicit(&za->room_held, r->bytes, memory_order_relaxed);
			ret = 0;
			break;
		}
		if (pending && attempt < 2 && r->commit) {
			int c;

			pthread_mutex_unlock(&za->mu);
			c = r->commit(r->arg);
			pthread_mutex_lock(&za->mu);
			if (c == 0)
				continue;
		}
		if (!za->gc_enabled)
			break;		/* no collector: full means full */
		/* Can the collector make room at all?  Valid data plus the
		 * buffers must fit in the capacity. */
		if (free_bytes + za->sums.gc_reclaim < need && !za->gc_active &&
		    !pending)
			break;
		if (gc_patience_over(za, &w, free_bytes))
			break;
		za->space_waiters++;
		za->space_need = ZF_MAX(za->space_need, r->bytes);
		wait_for_collector(za);
		if (--za->space_waiters == 0)
			za->space_need = 0;
	}
	wait_done(za, &w);
	pthread_mutex_unlock(&za->mu);
	return ret;
}

void zalloc_room_done(struct zalloc *za, uint64_t bytes)
{
	if (za)
		atomic_fetch_sub_explicit(&za->room_held, bytes, memory_order_relaxed);
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

unsigned int zalloc_space_waiters(struct zalloc *za)
{
	unsigned int n;

	if (!za)
		return 0;
	pthread_mutex_lock(&za->mu);
	n = za->space_waiters;
	pthread_mutex_unlock(&za->mu);
	return n;
}
