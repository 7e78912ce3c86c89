/* zalloc.c — the data-zone allocator: life cycle, zone lists and budget,
 * leases, valid-byte accounting, stamped resets, lending to the metadata
 * log, stats (contract: zalloc.h; state and locking: zalloc_priv.h).
 *
 * Acquire policy (za_try_acquire, one non-blocking attempt):
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
 *      capacity (wastes least).
 * When the attempt fails the acquirer waits (zalloc_space.c).
 */
#include "zonealloc/zalloc_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/zf_common.h"

/* ---- space sums ---------------------------------------------------------- */

/* z's share of the sums, from its fields alone. */
static struct za_sums zone_share(const struct zalloc *za, const struct za_zone *z)
{
	struct za_sums a = { .valid = z->valid };
	uint64_t used = z->wp - z->start;

	if (!z->retired && z->lent) {
		a.lent_cap = z->capacity;
	} else if (!z->retired) {
		a.capacity = z->capacity;
		if (z->cond == ZDEV_COND_EMPTY || zdev_cond_active(z->cond))
			a.free = za_zremain(z);
		a.reclaimable = used - ZF_MIN(z->valid, used);
	}
	if (za_gc_candidate(z, 0) && gc_gain_enough(z->capacity, z->valid, za->bs, true)) {
		a.gc_reclaim = z->capacity - z->valid;
		a.gc_cand = 1;
		a.gc_cand_backoff = z->gc_retry_ns != 0;
	}
	return a;
}

static void sums_add(struct za_sums *t, const struct za_sums *a)
{
	t->valid += a->valid;
	t->capacity += a->capacity;
	t->lent_cap += a->lent_cap;
	t->free += a->free;
	t->reclaimable += a->reclaimable;
	t->gc_reclaim += a->gc_reclaim;
	t->gc_cand += a->gc_cand;
	t->gc_cand_backoff += a->gc_cand_backoff;
}

/* Unsigned wrap-around makes t - old + new exact whatever the order. */
static void sums_sub(struct za_sums *t, const struct za_sums *a)
{
	t->valid -= a->valid;
	t->capacity -= a->capacity;
	t->lent_cap -= a->lent_cap;
	t->free -= a->free;
	t->reclaimable -= a->reclaimable;
	t->gc_reclaim -= a->gc_reclaim;
	t->gc_cand -= a->gc_cand;
	t->gc_cand_backoff -= a->gc_cand_backoff;
}

void za_zone_sync(struct zalloc *za, struct za_zone *z)
{
	struct za_sums a = zone_share(za, z);

	sums_sub(&za->sums, &z->acct);
	sums_add(&za->sums, &a);
	z->acct = a;
}

static bool sums_equal(const struct za_sums *a, const struct za_sums *b)
{
	return a->valid == b->valid && a->capacity == b->capacity &&
	       a->lent_cap == b->lent_cap && a->free == b->free &&
	       a->reclaimable == b->reclaimable && a->gc_reclaim == b->gc_reclaim &&
	       a->gc_cand == b->gc_cand && a->gc_cand_backoff == b->gc_cand_backoff;
}

/* Every zone's share, and the sums, from scratch (mount, and mount_done
 * which changes every zone). */
static void sums_rebuild(struct zalloc *za)
{
	memset(&za->sums, 0, sizeof(za->sums));
	for (uint32_t i = 0; i < za->nr; i++) {
		za->z[i].acct = zone_share(za, &za->z[i]);
		sums_add(&za->sums, &za->z[i].acct);
	}
}

/* zalloc.h.  A full recount: each zone's share, the sums, and the list
 * counts and links.  With za->mu held. */
static int check_locked(struct zalloc *za)
{
	struct za_sums t = { 0 };
	uint32_t counted[ZA_L_NR] = { 0 };
	int bad = 0;

	for (uint32_t i = 0; i < za->nr; i++) {
		struct za_zone *z = &za->z[i];
		struct za_sums a = zone_share(za, z);

		if (!sums_equal(&a, &z->acct) && bad++ < 8)
			zf_err("zalloc: check: zone %u: share out of date",
			       za->first + i);
		sums_add(&t, &a);
		if (z->list != ZA_L_NONE)
			counted[z->list]++;
	}
	if (!sums_equal(&t, &za->sums) && bad++ < 8)
		zf_err("zalloc: check: sums differ from a recount (free %llu vs %llu, valid %llu vs %llu, gc %llu vs %llu)",
		       (unsigned long long)za->sums.free, (unsigned long long)t.free,
		       (unsigned long long)za->sums.valid, (unsigned long long)t.valid,
		       (unsigned long long)za->sums.gc_reclaim,
		       (unsigned long long)t.gc_reclaim);
	for (int l = 1; l < ZA_L_NR; l++) {
		uint32_t n = 0;

		for (uint32_t i = za->lists[l].head; i != ZA_NIL && n <= za->nr;
		     i = za->z[i].next, n++)
			if (za->z[i].list != l)
				break;
		if ((n != counted[l] || n != za->lists[l].count) && bad++ < 8)
			zf_err("zalloc: check: list %d holds %u zones, counts %u, marks %u",
			       l, n, za->lists[l].count, counted[l]);
	}
	return bad ? -EUCLEAN : 0;
}

int zalloc_check(struct zalloc *za)
{
	int rc;

	if (!za)
		return -EINVAL;
	pthread_mutex_lock(&za->mu);
	rc = check_locked(za);
	pthread_mutex_unlock(&za->mu);
	return rc;
}

/* ---- small helpers ------------------------------------------------------ */

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

void za_list_del(struct zalloc *za, struct za_zone *z)
{
	struct za_list *l;

	za_assert_held(za);
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
	za_zone_sync(za, z);
}

void za_list_add(struct zalloc *za, struct za_zone *z, uint8_t list,
		     bool at_head)
{
	struct za_list *l = &za->lists[list];
	uint32_t i = za_zidx(za, z);

	za_assert_held(za);
	za_list_del(za, z);
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
	za->ur[za->nur++] = (struct za_range){ za_zidx(za, z), lo, hi };
	z->nunclaimed++;
	za_zone_sync(za, z);
	return 0;
}

/* Claim [lo, hi) of zone z: cut it out of the zone's unclaimed ranges. */
void za_unclaimed_trim(struct zalloc *za, struct za_zone *z, uint64_t lo,
			   uint64_t hi)
{
	uint32_t zi = za_zidx(za, z);

	za_assert_held(za);
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
	za_zone_sync(za, z);
}

/* Queue a FULL zone without valid data for reset at the next commit. */
void za_queue_reset(struct zalloc *za, struct za_zone *z)
{
	za_assert_held(za);
	/* A FULL zone, or a CLOSED one that was written and whose data all
	 * died: its class may never reopen it, and no collector picks a zone
	 * that is not FULL, so its dead bytes would stay until a remount.  An
	 * open zone is its class's append point and is reset once full. */
	bool closed = z->cond == ZDEV_COND_CLOSED && z->wp > z->start;
	if ((z->cond != ZDEV_COND_FULL && !closed) || z->valid != 0 || z->leased ||
	    z->busy || z->resetting || z->retired || z->gc || z->lent ||
	    z->list == ZA_L_PENDING || !za->mounted)
		return;
	/* Bytes written through a lease but not yet accounted may still be
	 * referenced: wait for them. */
	if (z->nunclaimed)
		return;
	z->reset_stamp = za->commit_seq;
	za_list_add(za, z, ZA_L_PENDING, false);
}

/* The zone reached capacity (by writing) or was finished. */
static void mark_full(struct zalloc *za, struct za_zone *z)
{
	za_list_del(za, z);
	za_set_cond(za, z, ZDEV_COND_FULL);
	z->wp = z->start + z->capacity;
	za_zone_sync(za, z);
	za_queue_reset(za, z);
}

static void make_free(struct zalloc *za, struct za_zone *z)
{
	za_set_cond(za, z, ZDEV_COND_EMPTY);
	z->wp = z->start;
	z->written = 0;
	if (z->valid) {
		zf_err("zalloc: zone %u reset with %llu valid bytes",
		       za->first + za_zidx(za, z), (unsigned long long)z->valid);
		z->valid = 0;
	}
	z->adopted = false;
	if (z->nunclaimed) {
		zf_err("zalloc: zone %u reset with bytes never accounted",
		       za->first + za_zidx(za, z));
		za_unclaimed_trim(za, z, z->start, z->start + za->zone_size);
	}
	za_list_add(za, z, ZA_L_FREE, false);	/* syncs z */
}

static void retire(struct zalloc *za, struct za_zone *z, uint8_t cond)
{
	za_list_del(za, z);
	za_set_cond(za, z, cond);
	z->retired = true;
	za_zone_sync(za, z);
}

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
	unclaimed_add(za, z, z->wp, z->wp + z->lease_len);	/* reserved by caller */
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

/* May `who` write into z (an active or CLOSED zone of its class)?  The
 * collector's destination zones are its own: were writers to fill the
 * zone the collector opened from the last FREE zone between two of its
 * batches, it could not finish moving its victim and the device would be
 * stuck with no FREE zone.  Writers that waited out the collector's
 * patience (ZA_GRANT) may use them. */
bool za_zone_usable(const struct za_zone *z, enum za_who who)
{
	return !z->leased && !z->busy && za_zremain(z) > 0 &&
	       (!z->gc_dest || who != ZA_USER);
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
			retire(za, z, dz.cond);
		} else if (zdev_cond_active(dz.cond)) {
			z->wp = dz.wp;
			za_set_cond(za, z, dz.cond);
			za_list_add(za, z, (uint8_t)(ZA_L_CLASS + z->cls), false);
		} else if (dz.cond == ZDEV_COND_FULL) {
			mark_full(za, z);
		} else if (dz.cond == ZDEV_COND_EMPTY) {
			za_list_del(za, z);
			make_free(za, z);
		}
	} else if (rc < 0) {
		retire(za, z, ZDEV_COND_FULL);
	} else {
		za_queue_reset(za, z);	/* finished or closed with no valid byte */
	}
	pthread_cond_broadcast(&za->cv);
}

/* ---- life cycle ---------------------------------------------------------- */

/* za->mu checks its owner in debug builds (za_assert_held); za->cv waits
 * with deadlines from zf_now_ns() (CLOCK_MONOTONIC). */
static void init_locks(struct zalloc *za)
{
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;

	pthread_mutexattr_init(&ma);
#ifndef NDEBUG
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
#endif
	pthread_mutex_init(&za->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&za->cv, &ca);
	pthread_condattr_destroy(&ca);
}

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
	init_locks(za);
	pthread_mutex_lock(&za->mu);	/* the helpers assert it */
	za->z = calloc(p->nr_zones, sizeof(*za->z));
	za->views = calloc(p->nr_zones, sizeof(*za->views));
	rep = calloc(p->nr_zones, sizeof(*rep));
	if (!za->z || !za->views || !rep) {
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
	za->self_check = p->self_check;
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
		z->cls = ZALLOC_DEFAULT_CLASS;
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
		za_set_cond(za, z, d->cond);
	}
	sums_rebuild(za);
	pthread_mutex_unlock(&za->mu);
	free(rep);
	*out = za;
	return 0;
fail:
	pthread_mutex_unlock(&za->mu);
	zalloc_destroy(za);
	free(rep);
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
	free(za->views);
	free(za->z);
	free(za);
}

void zalloc_zone_adopt(struct zalloc *za, uint32_t zone, unsigned int cls)
{
	struct za_zone *z;

	if (!za)
		return;
	if (cls >= ZALLOC_NR_CLASSES) {
		zf_err("zalloc: adopt zone %u: bad class %d", zone, (int)cls);
		return;
	}
	pthread_mutex_lock(&za->mu);
	z = za_zone_of(za, zone);
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
			za_list_add(za, z, ZA_L_FREE, false);
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
				z->cls = ZALLOC_DEFAULT_CLASS;
			za_list_add(za, z, (uint8_t)(ZA_L_CLASS + z->cls), false);
		} else if (z->cond == ZDEV_COND_FULL) {
			za_queue_reset(za, z);	/* only if its reset failed */
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
				if (!v || za_zremain(z) < za_zremain(v))
					v = z;
			}
		if (!v)
			break;
		zone = za->first + za_zidx(za, v);
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
			za_set_cond(za, v, ZDEV_COND_CLOSED);
		} else {
			za->zone_finishes++;
			za->class_finishes[v->cls]++;
			mark_full(za, v);
		}
	}
	sums_rebuild(za);	/* every zone changed; mount is O(zones) anyway */
	pthread_cond_broadcast(&za->cv);
	pthread_mutex_unlock(&za->mu);
	return first_err ? first_err : nreset;
}

/* ---- valid-byte accounting ----------------------------------------------- */

/* A FULL zone of its class died whole on its own (no collector involved):
 * note how long after its last write, in device bytes, in the class's life
 * (gc_policy_life_note()).  The victim policy reads it for classes flagged
 * ZALLOC_STREAM_DEFER_YOUNG; for the others it is a statistic. */
static void class_life_note(struct zalloc *za, const struct za_zone *z)
{
	za->class_life[z->cls] = gc_policy_life_note(za->class_life[z->cls],
						     za->dev_bytes - z->wclock);
}

/* Add or subtract valid bytes for [off, off+len), zone piece by zone piece. */
static void valid_update(struct zalloc *za, uint64_t off, uint64_t len, bool add)
{
	za_assert_held(za);
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
				za_unclaimed_trim(za, z, off, off + chunk);
			z->valid += a;
			if (z->valid && z->list == ZA_L_PENDING)
				za_list_del(za, z);	/* referenced again */
			else if (!z->valid)
				za_queue_reset(za, z);	/* clamped to 0 */
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
				za_queue_reset(za, z);
		}
		za_zone_sync(za, z);
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
 * who: what the acquirer may use (za_free_usable(), za_zone_usable()). */
int za_try_acquire(struct zalloc *za, unsigned int cls,
		       uint64_t want, bool may_finish, enum za_who who,
		       struct zalloc_lease *out)
{
	struct za_zone *z;

	za_assert_held(za);
	if (unclaimed_reserve(za))	/* lease_zone() cannot fail after this */
		return -ENOMEM;
	z = pick_open(za, cls, who);
	if (!z)
		z = pick_free(za, who);
	if (z) {
		lease_zone(za, z, cls, want, who == ZA_GC, out);
		return 0;
	}
	bool reopen = za_class_has_closed(za, cls, who), close;

	if (!may_finish || (!za_free_usable(za, who) && !reopen))
		return -EAGAIN;
	struct za_zone *v = pick_victim(za, reopen, &close);

	if (!v)
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
	struct za_zone *best = NULL;

	za_assert_held(za);
	if (unclaimed_reserve(za))
		return -ENOMEM;
	for (unsigned int c = 0; c < ZALLOC_NR_CLASSES; c++) {
		struct za_zone *z = c == cls ? NULL : pick_open(za, c, ZA_USER);
		if (z && (!best || za_zremain(z) < za_zremain(best)))
			best = z;
	}
	if (!best)
		return -ENOSPC;
	lease_zone(za, best, cls, want, false, out);
	za->class_fallbacks++;
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

int zalloc_acquire(struct zalloc *za, unsigned int cls, uint64_t want,
		   struct zalloc_lease *out)
{
	int rc = check_acquire_args(za, cls, want, out);

	if (rc)
		return rc;
	pthread_mutex_lock(&za->mu);
	rc = za_acquire_locked(za, cls, round_want(za, want), false, out);
	pthread_mutex_unlock(&za->mu);
	return rc;
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
	int rc = check_acquire_args(za, cls, want, out);

	if (rc)
		return rc;
	pthread_mutex_lock(&za->mu);
	rc = za_acquire_locked(za, cls, round_want(za, want), true, out);
	pthread_mutex_unlock(&za->mu);
	return rc;
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
		mark_full(za, z);	/* the device did the same at capacity */
	} else if (z->wp == z->start) {
		za_list_del(za, z);
		make_free(za, z);	/* never written: still EMPTY */
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
		za_unclaimed_trim(za, z, lease->offset, lease->offset + written);
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
		za_list_del(za, z);
		z->resetting = true;
		za->nr_resetting++;
		za_zone_sync(za, z);
		todo[n++] = za_zidx(za, z);
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
		za_zone_sync(za, z);
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
			za_list_add(za, z, ZA_L_PENDING, true);
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
	z = za_zone_of(za, zone);
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

/* Capacity of the FREE zones only the collector may use (the first
 * ZALLOC_GC_FLOOR of the list; none without GC). */
static uint64_t gc_floor_bytes(const struct zalloc *za)
{
	uint64_t b = 0;
	uint32_t k = 0;

	if (!za->gc_enabled)
		return 0;
	for (uint32_t i = za->lists[ZA_L_FREE].head; i != ZA_NIL && k < ZALLOC_GC_FLOOR;
	     i = za->z[i].next, k++)
		b += za->z[i].capacity;
	return b;
}

/* Bytes of FREE zones kept for the rest of the log's reserve. */
static uint64_t log_keep_bytes(const struct zalloc *za)
{
	if (za->log_reserve <= za->nr_lent)
		return 0;
	return (uint64_t)(za->log_reserve - za->nr_lent) * za->max_cap;
}

uint64_t za_free_bytes(const struct zalloc *za)
{
	uint64_t f = za->sums.free - gc_floor_bytes(za);	/* FREE zones are in it */

	return f - ZF_MIN(f, log_keep_bytes(za));
}

void za_stats_locked(struct zalloc *za, struct zalloc_stats *st)
{
	za_assert_held(za);
	memset(st, 0, sizeof(*st));
	st->nr_zones = za->nr;
	st->free_zones = za->lists[ZA_L_FREE].count;
	/* Before zalloc_mount_done() (a read-only mount: fsck) no FREE list
	 * is built: count the EMPTY zones it would hold. */
	for (uint32_t i = 0; !za->mounted && i < za->nr; i++)
		st->free_zones += za->z[i].cond == ZDEV_COND_EMPTY && !za->z[i].retired &&
				  !za->z[i].lent;
	st->open_zones = za->nr_open;
	st->active_zones = za->nr_active;
	st->max_active_data = ZF_MIN(za->act_budget, za->nr);
	st->valid_bytes = za->sums.valid;
	st->capacity_bytes = za->sums.capacity;
	st->reclaimable_bytes = za->sums.reclaimable;
	st->gc_floor_bytes = gc_floor_bytes(za);
	st->free_bytes = za_free_bytes(za);
	st->log_zones = za->nr_lent;
	st->log_reserve_zones = za->log_reserve;
	st->log_bytes = za->sums.lent_cap + log_keep_bytes(za);
	st->device_bytes_written = za->dev_bytes;
	memcpy(st->class_bytes_written, za->class_bytes,
	       sizeof(st->class_bytes_written));
	st->zone_resets = za->zone_resets;
	st->zone_finishes = za->zone_finishes;
	st->class_fallbacks = za->class_fallbacks;
	st->pending_resets = za->lists[ZA_L_PENDING].count + za->nr_resetting;
	st->gc_bytes_written = za->gc_bytes;
	memcpy(st->gc_class_bytes_written, za->gc_class_bytes,
	       sizeof(st->gc_class_bytes_written));
	memcpy(st->class_zone_resets, za->class_resets, sizeof(st->class_zone_resets));
	memcpy(st->class_zone_finishes, za->class_finishes,
	       sizeof(st->class_zone_finishes));
	st->gc_runs = za->gc_runs;
	st->gc_zones_emptied = za->gc_emptied;
	st->gc_skipped_bytes = za->gc_skipped;
	st->gc_waits = za->gc_waits;
	st->gc_wait_ns = za->gc_wait_ns;
	st->gc_reserve_grants = za->gc_reserve_grants;
	st->gc_reserve_taken = za->reserve_taken;
	st->gc_reserve_zones = za->gc_enabled ? za->gc_reserve : 0;
	st->gc_waiters = za->gc_waiters;
	st->gc_active = za->gc_active;
	for (int c = 0; c < ZALLOC_NR_CLASSES; c++)
		st->class_life_bytes[c] = za->class_life[c];
	st->gc_reclaimable_bytes = za->sums.gc_reclaim;
	st->space_waiters = za->space_waiters;
	st->space_need_bytes = za->space_need;
	st->room_held_bytes = atomic_load_explicit(&za->room_held, memory_order_relaxed);
}

void zalloc_get_stats(struct zalloc *za, struct zalloc_stats *st)
{
	if (!za || !st)
		return;
	pthread_mutex_lock(&za->mu);
	if (za->self_check && check_locked(za))
		abort();	/* the sums must equal a recount (tests) */
	za_stats_locked(za, st);
	pthread_mutex_unlock(&za->mu);
}

/* ---- garbage collection support ------------------------------------------ */

int zalloc_lend(struct zalloc *za, uint32_t keep, uint32_t *zone)
{
	int rc = -ENOSPC;

	pthread_mutex_lock(&za->mu);
	uint32_t i = za->lists[ZA_L_FREE].head;
	if (za->mounted && i != ZA_NIL && za->lists[ZA_L_FREE].count > keep) {
		struct za_zone *z = &za->z[i];

		za_list_del(za, z);
		z->lent = true;
		za->nr_lent++;
		za_zone_sync(za, z);
		*zone = za->first + i;
		rc = 0;
	}
	pthread_mutex_unlock(&za->mu);
	return rc;
}

void zalloc_lend_return(struct zalloc *za, uint32_t zone)
{
	pthread_mutex_lock(&za->mu);
	struct za_zone *z = za_zone_of(za, zone);
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
	struct za_zone *z = za_zone_of(za, zone);
	if (!z || za->mounted || z->retired) {
		rc = -EINVAL;
	} else if (!z->lent) {
		za_set_cond(za, z, ZDEV_COND_EMPTY);	/* the log's, not the budget's */
		z->lent = true;
		za->nr_lent++;
		za_zone_sync(za, z);
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

