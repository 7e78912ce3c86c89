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
int za_can_wait(struct zalloc *za, enum lifetime_class cls, enum za_who who)
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

/* Progress the collector makes for waiting writers: zones freed, bytes
 * moved. */
static uint64_t gc_progress(const struct zalloc *za)
{
	return za->zone_resets + za->gc_evacuated;
}

/* Blocking acquire with za->mu held.  gc: the collector's own lease (may
 * use the reserve, never waits for the collector). */
int za_acquire_locked(struct zalloc *za, enum lifetime_class cls,
			  uint64_t want, bool gc, struct zalloc_lease *out)
{
	uint64_t deadline = 0, seq = 0;
	uint64_t gc_since = 0, gc_seen = 0, gc_t0 = 0;
	enum za_who who = gc ? ZA_GC : ZA_USER;
	int rc;

	za_assert_held(za);
	if (!za->mounted)
		return -EBUSY;
	for (;;) {
		int w;

		rc = za_try_acquire(za, cls, want, true, who, out);

		if (rc != -EAGAIN)
			goto done;
		w = za_can_wait(za, cls, who);
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
			rc = za_try_acquire(za, cls, want, true, who, out);
			if (rc != -EAGAIN)
				goto done;
			w = za_can_wait(za, cls, who);
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
				if (za_free_usable(za, ZA_GRANT)) {
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
