/* zalloc_lease.c — leases and limits: the open/active zone budget,
 * granting leases (which zone a writer gets, finishing or closing one to
 * make room), and releasing them (contract: zalloc.h; state and locking:
 * zalloc_priv.h).  The waits of an acquire are zalloc_space.c's.
 *
 * Acquire policy (za_try_acquire, one non-blocking attempt):
 *   1. an unleased open zone of the class with room: the one with the LEAST
 *      room left ("fill the fullest first"), which drives zones to FULL and
 *      keeps the number of half-written zones, and the waste when one has to
 *      be finished, small (the collector and the writers each use only
 *      their own zones: za_zone_usable());
 *   2. else, when FREE zones are short (ZA_SHARE_BELOW or fewer left to
 *      writers), the fullest open zone of another class the acquirer may
 *      use: near full the unwritten tails of the active zones are much of
 *      the room the collector needs, so no stream opens one more;
 *      else a FREE zone (head of the free list) if the data open/active
 *      budget allows;
 *   3. else, if a FREE zone (or an unleased CLOSED zone of the class)
 *      exists, make room and lease as in 1./2.: when only the open budget
 *      binds (active has room, or the class has a CLOSED zone to reopen),
 *      CLOSE the unleased open zone written least recently (nothing is
 *      wasted; only devices with max_open < max_active get here); else
 *      FINISH the unleased active zone (any class) with the least remaining
 *      capacity (wastes least); FREE zones short, step 2 has shared
 *      instead (writers' zones for writers, the collector's for it).
 * When the attempt fails the acquirer waits (zalloc_space.c).
 *
 * Locking: za->mu (zalloc_priv.h); the public functions take it, the za_*
 * helpers are called with it held.
 */
#include "zonealloc/zalloc_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"

/* ---- the open/active budget ---------------------------------------------- */

void za_set_cond(struct zalloc *za, struct za_zone *z, uint8_t c)
{
	za_assert_held(za);
	if (zdev_cond_open(z->cond))
		za->nr_open--;
	if (zdev_cond_active(z->cond))
		za->nr_active--;
	z->cond = c;
	if (zdev_cond_open(c))
		za->nr_open++;
	if (zdev_cond_active(c))
		za->nr_active++;
	za_zone_sync(za, z);
}

static bool budget_allows_open(const struct zalloc *za)
{
	return za->nr_open < za->open_budget;
}

static bool budget_allows_new(const struct zalloc *za)
{
	return za->nr_active < za->act_budget && za->nr_open < za->open_budget;
}

/* ---- granting and picking zones --------------------------------------- */

/* Grant a lease on z (an open zone of cls with room, a CLOSED zone of cls, or
 * a FREE zone) for want bytes (already rounded to the block size). */
static void lease_zone(struct zalloc *za, struct za_zone *z,
		       unsigned int cls, uint64_t want, bool gc,
		       struct zalloc_lease *out)
{
	za_assert_held(za);
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
		za_list_add(za, z, (uint8_t)(ZA_L_CLASS + cls), false);
		za_set_cond(za, z, ZDEV_COND_IMP_OPEN);
	} else if (z->cond == ZDEV_COND_CLOSED) {
		z->was_closed = true;
		za_set_cond(za, z, ZDEV_COND_IMP_OPEN);
	}
	z->leased = true;
	z->lease_len = ZF_MIN(want, za_zremain(z));
	za_unclaimed_add(za, z, z->wp, z->wp + z->lease_len);	/* reserved by caller */
	za->leased_total++;
	za->leased_cls[z->cls]++;
	out->zone = za->first + za_zidx(za, z);
	out->cls = z->cls;
	out->offset = z->wp;
	out->len = z->lease_len;
	za_zone_sync(za, z);
}

static void unlease(struct zalloc *za, struct za_zone *z)
{
	za_assert_held(za);
	z->leased = false;
	z->lease_gc = false;
	z->lease_len = 0;
	za->leased_total--;
	za->leased_cls[z->cls]--;
	za_zone_sync(za, z);
}

/* May `who` write into z (an active or CLOSED zone of its class)?  Zones
 * the collector opened are its own and it writes only into those: data it
 * moves has outlived its zone-mates once and dies on another schedule than
 * what writers write now, so it is kept apart from fresh data of its class
 * (LevelDB IoT on 16 MiB zones: about 7 % less copying).  Were writers to
 * fill the zone the collector opened from the last FREE zone between two
 * of its batches, it could not finish moving its victim and the device
 * would be stuck with no FREE zone.  Writers that waited out the
 * collector's patience (ZA_GRANT) may use either. */
bool za_zone_usable(const struct za_zone *z, enum za_who who)
{
	if (z->leased || z->busy || za_zremain(z) == 0)
		return false;
	switch (who) {
	case ZA_USER:
		return !z->gc_dest;
	case ZA_GC:
		return z->gc_dest;
	default:
		return true;
	}
}

/* Step 1: the usable open (or CLOSED, if a slot allows) zone of cls with
 * the least room left. */
static struct za_zone *pick_open(struct zalloc *za, unsigned int cls,
				 enum za_who who)
{
	struct za_zone *best = NULL;

	for (uint32_t i = za->lists[ZA_L_CLASS + cls].head; i != ZA_NIL;
	     i = za->z[i].next) {
		struct za_zone *z = &za->z[i];

		if (!za_zone_usable(z, who))
			continue;
		if (!zdev_cond_open(z->cond) && !budget_allows_open(za))
			continue;
		if (!best || za_zremain(z) < za_zremain(best))
			best = z;
	}
	return best;
}

/* With this many FREE zones left to writers or fewer, a lease takes the
 * fullest open zone of another class before a FREE zone or a finish:
 * every active zone holds an unwritten tail, and a finish loses one until
 * the zone is collected.  While FREE zones are plenty that costs only
 * copying later, and keeping classes apart is worth it; near full that
 * room is what the collector needs, and with more streams (a writer's and
 * the collector's per class) than active zones each victim it emptied
 * would cost a finish that makes the next victim, so free space would
 * never grow and writers would wait for ever (tests/unit/test_finish.c). */
#define ZA_SHARE_BELOW 2u

/* Step 2: a FREE zone if the budget allows a new active zone. */
static struct za_zone *pick_free(struct zalloc *za, enum za_who who)
{
	if (za->lists[ZA_L_FREE].head == ZA_NIL || !budget_allows_new(za) ||
	    !za_free_usable(za, who))
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
					     : za_zremain(z) < za_zremain(best)))
				best = z;
		}
	}
	return best;
}

/* The usable open zone of a class other than cls with the least room
 * left (fill the fullest first), or NULL. */
static struct za_zone *pick_other_class(struct zalloc *za, unsigned int cls,
					enum za_who who)
{
	struct za_zone *best = NULL;

	for (unsigned int c = 0; c < ZALLOC_NR_CLASSES; c++) {
		struct za_zone *z = c == cls ? NULL : pick_open(za, c, who);

		if (z && (!best || za_zremain(z) < za_zremain(best)))
			best = z;
	}
	return best;
}

bool za_class_has_closed(struct zalloc *za, unsigned int cls,
			     enum za_who who)
{
	for (uint32_t i = za->lists[ZA_L_CLASS + cls].head; i != ZA_NIL;
	     i = za->z[i].next) {
		struct za_zone *z = &za->z[i];

		if (za_zone_usable(z, who) && z->cond == ZDEV_COND_CLOSED)
			return true;
	}
	return false;
}

struct za_zone *za_zone_of(struct zalloc *za, uint32_t zone)
{
	if (zone < za->first || zone - za->first >= za->nr)
		return NULL;
	return &za->z[zone - za->first];
}

/* Finish (or close) I/O on a zone already accounted as FULL (CLOSED) and
 * marked busy; called and returns with za->mu held, drops it meanwhile. */
static void mgmt_io(struct zalloc *za, struct za_zone *z, bool close)
{
	uint32_t zone = za->first + za_zidx(za, z);
	struct zdev_zone dz;
	int rc;

	za_assert_held(za);
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
	za_zone_sync(za, z);
	if (rc == 1) {		/* failed: mirror what the device says */
		if (!close) {
			za->zone_finishes--;
			za->class_finishes[z->cls]--;
		}
		if (dz.cond == ZDEV_COND_READONLY || dz.cond == ZDEV_COND_OFFLINE) {
			za_retire(za, z, dz.cond);
		} else if (zdev_cond_active(dz.cond)) {
			z->wp = dz.wp;
			za_set_cond(za, z, dz.cond);
			za_list_add(za, z, (uint8_t)(ZA_L_CLASS + z->cls), false);
		} else if (dz.cond == ZDEV_COND_FULL) {
			za_mark_full(za, z);
		} else if (dz.cond == ZDEV_COND_EMPTY) {
			za_list_del(za, z);
			za_make_free(za, z);
		}
	} else if (rc < 0) {
		za_retire(za, z, ZDEV_COND_FULL);
	} else {
		za_queue_reset(za, z);	/* finished or closed with no valid byte */
	}
	pthread_cond_broadcast(&za->cv);
}

/* ---- leases -------------------------------------------------------------- */

/* One non-blocking attempt (steps 1-3).  Returns 0 with *out filled,
 * -EAGAIN when nothing can be had now, -ENOMEM.  may_finish enables step 3;
 * who: what the acquirer may use (za_free_usable(), za_zone_usable()). */
int za_try_acquire(struct zalloc *za, unsigned int cls,
		       uint64_t want, bool may_finish, enum za_who who,
		       struct zalloc_lease *out)
{
	struct za_zone *z;

	za_assert_held(za);
	if (za_unclaimed_reserve(za))	/* lease_zone() cannot fail after this */
		return -ENOMEM;
	z = pick_open(za, cls, who);
	if (!z && za_free_usable(za, ZA_USER) <= ZA_SHARE_BELOW &&
	    (z = pick_other_class(za, cls, who)))
		za->class_fallbacks++;
	if (!z)
		z = pick_free(za, who);
	if (z) {
		lease_zone(za, z, cls, want, who == ZA_GC, out);
		return 0;
	}
	if (!may_finish)
		return -EAGAIN;
	bool reopen = za_class_has_closed(za, cls, who), close;
	bool can_open = za_free_usable(za, who) || reopen;
	struct za_zone *v = pick_victim(za, reopen, &close);

	if (!can_open || !v)
		return -EAGAIN;
	/* Account the victim as CLOSED/FULL now so the slot is ours, lease,
	 * then do the zone management I/O with the mutex dropped. */
	if (close) {
		za_set_cond(za, v, ZDEV_COND_CLOSED);	/* stays on its list */
	} else {
		za_list_del(za, v);
		za_set_cond(za, v, ZDEV_COND_FULL);
		v->wp = v->start + v->capacity;
		za->zone_finishes++;
		za->class_finishes[v->cls]++;
	}
	v->busy = true;
	za->nr_busy++;
	za_zone_sync(za, v);
	z = pick_open(za, cls, who);
	if (!z)
		z = pick_free(za, who);
	if (z)
		lease_zone(za, z, cls, want, who == ZA_GC, out);
	mgmt_io(za, v, close);
	return z ? 0 : -EAGAIN;
}

int za_try_other_class(struct zalloc *za, unsigned int cls, uint64_t want,
		       struct zalloc_lease *out)
{
	struct za_zone *best;

	za_assert_held(za);
	if (za_unclaimed_reserve(za))
		return -ENOMEM;
	best = pick_open(za, cls, ZA_GRANT);	/* the collector's zone of cls */
	struct za_zone *other = pick_other_class(za, cls, ZA_GRANT);

	if (other && (!best || za_zremain(other) < za_zremain(best)))
		best = other;
	if (!best)
		return -ENOSPC;
	if (best->cls != cls)
		za->class_fallbacks++;
	lease_zone(za, best, cls, want, false, out);
	return 0;
}

static int check_acquire_args(struct zalloc *za, unsigned int cls,
			      uint64_t want, const void *out)
{
	if (!za || !out || want == 0 || cls >= ZALLOC_NR_CLASSES)
		return -EINVAL;
	return 0;
}

static uint64_t round_want(const struct zalloc *za, uint64_t want)
{
	if (want > za->max_cap)	/* bound before rounding: no overflow */
		want = za->max_cap;
	return ZF_ALIGN_UP(want, za->bs);
}

/* One blocking acquire; gc: the collector's (zalloc_acquire_gc). */
static int acquire_one(struct zalloc *za, unsigned int cls, uint64_t want, bool gc,
		       struct zalloc_lease *out)
{
	int rc = check_acquire_args(za, cls, want, out);

	if (rc)
		return rc;
	pthread_mutex_lock(&za->mu);
	rc = za_acquire_locked(za, cls, round_want(za, want), gc, out);
	pthread_mutex_unlock(&za->mu);
	return rc;
}

int zalloc_acquire(struct zalloc *za, unsigned int cls, uint64_t want,
		   struct zalloc_lease *out)
{
	return acquire_one(za, cls, want, false, out);
}

int zalloc_acquire_many(struct zalloc *za, unsigned int cls,
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
	rc = za_acquire_locked(za, cls, want_each, false, &out[0]);
	if (rc == 0) {
		/* extra stripes: only what is there now, no finishing */
		while (got < n && za_try_acquire(za, cls, want_each, false, ZA_USER,
					      &out[got]) == 0)
			got++;
	}
	pthread_mutex_unlock(&za->mu);
	return rc ? rc : (int)got;
}

int zalloc_acquire_gc(struct zalloc *za, unsigned int cls, uint64_t want,
		      struct zalloc_lease *out)
{
	return acquire_one(za, cls, want, true, out);
}

/* Called with za->mu held; z leased, lease validated. */
static void account_written(struct zalloc *za, struct za_zone *z, uint64_t n)
{
	za_assert_held(za);
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
	za_zone_sync(za, z);
}

/* After the lease on z ended: put z where it belongs. */
static void settle(struct zalloc *za, struct za_zone *z, bool wrote)
{
	bool was_closed = z->was_closed;

	za_assert_held(za);
	z->was_closed = false;
	if (z->valid > z->written) {
		zf_err("zalloc: zone %u: %llu valid bytes but only %llu written",
		       za->first + za_zidx(za, z), (unsigned long long)z->valid,
		       (unsigned long long)z->written);
		z->valid = z->written;
	}
	if (za_zremain(z) == 0) {
		za_mark_full(za, z);	/* the device did the same at capacity */
	} else if (z->wp == z->start) {
		za_list_del(za, z);
		za_make_free(za, z);	/* never written: still EMPTY */
	} else if (!wrote && was_closed) {
		za_set_cond(za, z, ZDEV_COND_CLOSED);
	}
	za_zone_sync(za, z);
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
		za_retire(za, z, dz.cond);
		goto out;
	}
	if (rc != 1) {
		zf_err("zalloc: zone %u: write failed (%s) and zone report failed (%s); retiring it",
		       zone, strerror(-err), strerror(rc < 0 ? -rc : EIO));
		if (frc == 0)
			za->zone_finishes++;
		za_retire(za, z, ZDEV_COND_FULL);
		z->wp = end;
		goto out;
	}
	if (went_back) {
		zf_err("zalloc: zone %u: device wp %llu is below the lease at %llu; finishing it",
		       zone, (unsigned long long)dz.wp,
		       (unsigned long long)lease->offset);
		z->written = ZF_MIN(z->written, dz.wp - dz.start);
		za_unclaimed_trim(za, z, lease->offset, lease->offset + written);
		settle(za, z, false);	/* clamps valid bytes */
		if (frc == 0) {
			za->zone_finishes++;
			za_mark_full(za, z);
		} else {
			za_retire(za, z, ZDEV_COND_FULL);
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
		za_unclaimed_trim(za, z, lease->offset + moved,
			       lease->offset + written);
	settle(za, z, moved > 0);
	if (zdev_cond_active(z->cond) && zdev_cond_active(dz.cond) && dz.cond != z->cond)
		za_set_cond(za, z, dz.cond);
out:
	za_zone_sync(za, z);
	pthread_cond_broadcast(&za->cv);
}

void zalloc_release(struct zalloc *za, const struct zalloc_lease *lease,
		    uint64_t written, int err)
{
	struct za_zone *z;

	if (!za || !lease)
		return;
	pthread_mutex_lock(&za->mu);
	z = za_zone_of(za, lease->zone);
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
	za_unclaimed_trim(za, z, lease->offset + written,
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

unsigned int zalloc_stripe_width(struct zalloc *za, unsigned int cls)
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
