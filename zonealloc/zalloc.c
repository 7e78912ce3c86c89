/* zalloc.c — the data-zone allocator's space accounting: life cycle,
 * the space sums and their check, zone lists, unclaimed ranges, valid
 * bytes, stamped resets, lending to the metadata log, stats (contract:
 * zalloc.h; state and locking: zalloc_priv.h).  Leases and the open/active
 * budget are zalloc_lease.c's.
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
		a.skipped = used - ZF_MIN(z->written, used);
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
	t->skipped += a->skipped;
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
	t->skipped -= a->skipped;
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
	       a->reclaimable == b->reclaimable && a->skipped == b->skipped &&
	       a->gc_reclaim == b->gc_reclaim &&
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

/* ---- unclaimed ranges ---------------------------------------------------- */

/* Make room for one more range. */
int za_unclaimed_reserve(struct zalloc *za)
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

int za_unclaimed_add(struct zalloc *za, struct za_zone *z, uint64_t lo,
		     uint64_t hi)
{
	if (lo >= hi)
		return 0;
	if (za_unclaimed_reserve(za))
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

			if (za_unclaimed_add(za, z, tail_lo, tail_hi) == 0)
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
void za_mark_full(struct zalloc *za, struct za_zone *z)
{
	za_list_del(za, z);
	za_set_cond(za, z, ZDEV_COND_FULL);
	z->wp = z->start + z->capacity;
	za_zone_sync(za, z);
	za_queue_reset(za, z);
}

void za_make_free(struct zalloc *za, struct za_zone *z)
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

void za_retire(struct zalloc *za, struct za_zone *z, uint8_t cond)
{
	za_list_del(za, z);
	za_set_cond(za, z, cond);
	z->retired = true;
	za_zone_sync(za, z);
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
				za_make_free(za, z);
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
			za_retire(za, v, ZDEV_COND_FULL);
			continue;
		}
		if (close) {
			za_set_cond(za, v, ZDEV_COND_CLOSED);
		} else {
			za->zone_finishes++;
			za->class_finishes[v->cls]++;
			za_mark_full(za, v);
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
			za_make_free(za, z);
			done++;
		} else if (rrc == 1 && (dz.cond == ZDEV_COND_READONLY ||
					dz.cond == ZDEV_COND_OFFLINE)) {
			za_retire(za, z, dz.cond);
		} else if (rrc == 1 && dz.cond == ZDEV_COND_EMPTY) {
			za_make_free(za, z);
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
	st->finished_tail_bytes = za->sums.skipped;
	st->gc_floor_bytes = gc_floor_bytes(za);
	st->free_bytes = za_free_bytes(za);
	st->log_zones = za->nr_lent;
	st->log_reserve_zones = za->log_reserve;
	st->log_bytes = za->sums.lent_cap + log_keep_bytes(za);
	st->log_lent_bytes = za->sums.lent_cap;
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
		za_make_free(za, z);
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

