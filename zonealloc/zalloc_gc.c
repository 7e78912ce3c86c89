/* zalloc_gc.c — the allocator's side of the GC protocol (zalloc.h):
 * turning GC mode on, picking and pinning victims, the room the collector
 * has, unpinning, and discarding bytes written but never referenced.  The
 * collector itself (gc/gc.c) moves the data.
 *
 * A victim is pinned (z->gc: never queued for reset) from zalloc_gc_pick()
 * to zalloc_gc_done().  The age of a zone is za->dev_bytes minus its value
 * at the zone's last write or invalidation.  GC leases (z->lease_gc) count
 * as gc bytes.
 *
 * Locking: za->mu (zalloc_priv.h), taken by each public function.
 */
#include "zonealloc/zalloc_priv.h"

#include <errno.h>
#include <pthread.h>

#include "common/zf_common.h"

/* Can the collector free space: a FULL zone, not in anyone's hands, that
 * holds fewer valid bytes than its capacity? */
bool za_gc_candidate(const struct za_zone *z, uint64_t now)
{
	return z->cond == ZDEV_COND_FULL && !z->retired && !z->leased &&
	       !z->busy && !z->resetting && !z->gc && z->list != ZA_L_PENDING &&
	       !z->nunclaimed && z->valid < z->capacity &&
	       (!now || z->gc_retry_ns <= now);
}

bool za_gc_possible(const struct zalloc *za)
{
	uint64_t now;

	za_assert_held(za);
	if (!za->gc_enabled || !za->sums.gc_cand)
		return false;
	if (za->sums.gc_cand > za->sums.gc_cand_backoff)
		return true;	/* one without a retry time: possible now */
	/* Every candidate was backed off once (rare): look at their times. */
	now = zf_now_ns();
	for (uint32_t i = 0; i < za->nr; i++)
		if (za_gc_candidate(&za->z[i], now) && gc_gain_enough(za->z[i].capacity, za->z[i].valid, za->bs, true))
			return true;
	return false;
}

int zalloc_set_stream_flags(struct zalloc *za, unsigned int cls, unsigned int flags)
{
	if (!za || cls >= ZALLOC_NR_CLASSES || (flags & ~ZALLOC_STREAM_DEFER_YOUNG))
		return -EINVAL;
	pthread_mutex_lock(&za->mu);
	za->stream_flags[cls] = (uint8_t)flags;
	pthread_mutex_unlock(&za->mu);
	return 0;
}

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

/* Bytes the collector could write for each class now: the FREE zones
 * (all of them, the reserve included) plus the room left in the class's
 * open or closed zones it may use. */
static void gc_room(const struct zalloc *za, uint64_t room[ZALLOC_NR_CLASSES])
{
	uint64_t free_cap = 0;
	uint32_t n = za_free_usable(za, ZA_GC);

	for (uint32_t i = za->lists[ZA_L_FREE].head; i != ZA_NIL && n; i = za->z[i].next, n--)
		free_cap += za->z[i].capacity;
	for (int c = 0; c < ZALLOC_NR_CLASSES; c++) {
		room[c] = free_cap;
		for (uint32_t i = za->lists[ZA_L_CLASS + c].head; i != ZA_NIL;
		     i = za->z[i].next)
			if (za_zone_usable(&za->z[i], ZA_GC))
				room[c] += za_zremain(&za->z[i]);
	}
}

/* A zone's age for cost-benefit: device bytes written since its data last
 * changed, by a write or by a death (zalloc_victim.h). */
static uint64_t gc_age(const struct zalloc *za, const struct za_zone *z)
{
	return za->dev_bytes - ZF_MAX(z->wclock, z->dclock);
}

static struct gc_zone_view gc_view(const struct zalloc *za, const struct za_zone *z)
{
	return (struct gc_zone_view){
		.id = za_zidx(za, z),
		.capacity = z->capacity,
		.valid = z->valid,
		.age = gc_age(za, z),
		.since_write = za->dev_bytes - z->wclock,
		.class_life = za->class_life[z->cls],
		.defer_young = za->stream_flags[z->cls] & ZALLOC_STREAM_DEFER_YOUNG,
	};
}

/* The zones the collector may take now, one view each in za->views: FULL
 * zones in nobody's hands (za_gc_candidate), not in skip, whose live data
 * fits in the room it has for their class (a victim moved in part uses
 * room and frees nothing).  The policy chooses among them. */
static size_t gc_views(struct zalloc *za, const uint64_t *skip)
{
	uint64_t now = zf_now_ns(), room[ZALLOC_NR_CLASSES];
	size_t n = 0;

	za_assert_held(za);
	gc_room(za, room);
	for (uint32_t i = 0; i < za->nr; i++) {
		struct za_zone *z = &za->z[i];

		if (!za_gc_candidate(z, now) || z->valid > room[z->cls])
			continue;
		if (skip && (skip[i / 64] >> (i % 64)) & 1)
			continue;
		za->views[n++] = gc_view(za, z);
	}
	return n;
}

int zalloc_gc_pick(struct zalloc *za, bool greedy, const uint64_t *skip,
		   struct zalloc_gc_victim *v)
{
	struct za_zone *best;
	double score;
	ptrdiff_t k;

	if (!za || !v)
		return -EINVAL;
	pthread_mutex_lock(&za->mu);
	k = gc_policy_pick(za->views, gc_views(za, skip), za->bs, greedy, &score);
	if (k < 0) {
		pthread_mutex_unlock(&za->mu);
		return -ENOENT;
	}
	best = &za->z[za->views[k].id];
	best->gc = true;
	za_zone_sync(za, best);
	za->gc_active++;
	za->gc_runs++;
	v->zone = za->first + za_zidx(za, best);
	v->cls = best->cls;
	v->start = best->start;
	v->capacity = best->capacity;
	v->valid_bytes = best->valid;
	v->age = gc_age(za, best);
	v->score = score;
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
	z = za_zone_of(za, zone);
	if (!z || !z->gc) {
		zf_err("zalloc: gc_done on zone %u which is not being collected", zone);
	} else {
		z->gc = false;
		z->gc_retry_ns = backoff_ns ? zf_now_ns() + backoff_ns : 0;
		za_zone_sync(za, z);
		za->gc_active--;
		if (z->valid == 0) {
			za->gc_emptied++;
			za_queue_reset(za, z);
		}
	}
	pthread_cond_broadcast(&za->cv);
	pthread_mutex_unlock(&za->mu);
}

void zalloc_gc_skipped(struct zalloc *za, uint64_t bytes)
{
	if (!za)
		return;
	pthread_mutex_lock(&za->mu);
	za->gc_skipped += bytes;
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
			za_unclaimed_trim(za, z, dev_off, dev_off + chunk);
			if (!z->nunclaimed && z->valid == 0)
				za_queue_reset(za, z);
		}
		dev_off += chunk;
		len -= chunk;
	}
	pthread_mutex_unlock(&za->mu);
}
