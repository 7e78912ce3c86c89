/* zdev_record — the recording of a device's durable-state requests (the
 * contract is in zdev.h, "Recording").
 *
 * Entries are appended under one leaf mutex after the request completed,
 * so their order is the completion order seen by the callers.  A flush is
 * recorded when it returns: a write that completed before the flush began
 * is recorded before it, provided the writer noted it before issuing the
 * flush (true for one thread, and for the fs, which orders its flushes
 * after the writes they cover); writes racing with a flush from another
 * thread may be recorded after it, which only makes the recording treat a
 * durable write as volatile (more crash states, never fewer).
 * Lock order: rec->lock is a leaf; it is taken with no zdev lock held.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "zoned/zdev.h"
#include "zoned/zdev_backend.h"

struct zdev_rec {
	pthread_mutex_t lock;
	struct zdev_rec_op *ops;	/* [lock] */
	size_t n, cap;			/* [lock] entries, slots */
	uint64_t bytes, max_bytes;	/* [lock] data bytes kept, bound */
	bool overflow;			/* [lock] an entry was refused */
};

static void rec_clear(struct zdev_rec *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->ops[i].data);
	free(r->ops);
	r->ops = NULL;
	r->n = r->cap = 0;
	r->bytes = 0;
	r->overflow = false;
}

int zdev_record_start(struct zdev *dev, uint64_t max_bytes)
{
	if (!dev)
		return -EINVAL;
	if (dev->rec) {
		pthread_mutex_lock(&dev->rec->lock);
		rec_clear(dev->rec);
		dev->rec->max_bytes = max_bytes;
		pthread_mutex_unlock(&dev->rec->lock);
		return 0;
	}
	struct zdev_rec *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	r->max_bytes = max_bytes;
	dev->rec = r;
	return 0;
}

long zdev_record_get(struct zdev *dev, const struct zdev_rec_op **ops)
{
	if (!dev || !dev->rec)
		return -ENOENT;
	pthread_mutex_lock(&dev->rec->lock);
	*ops = dev->rec->ops;
	long n = dev->rec->overflow ? -E2BIG : (long)dev->rec->n;
	pthread_mutex_unlock(&dev->rec->lock);
	return n;
}

void zdev_rec_free(struct zdev *dev)
{
	if (!dev || !dev->rec)
		return;
	rec_clear(dev->rec);
	pthread_mutex_destroy(&dev->rec->lock);
	free(dev->rec);
	dev->rec = NULL;
}

void zdev_record_stop(struct zdev *dev)
{
	zdev_rec_free(dev);
}

void zdev_rec_note(struct zdev *dev, enum zdev_rec_kind kind, uint32_t zone,
		   uint64_t off, const void *data, uint64_t len)
{
	struct zdev_rec *r = dev->rec;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	if (r->overflow)
		goto out;
	if (kind == ZDEV_REC_WRITE && len > r->max_bytes - ZF_MIN(r->bytes, r->max_bytes)) {
		zf_warn("zdev record: more than %llu bytes written; recording stopped",
			(unsigned long long)r->max_bytes);
		r->overflow = true;
		goto out;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap;
		struct zdev_rec_op *n = zf_grow(r->ops, &cap, r->n + 1, sizeof(*n), 256);
		if (!n) {
			r->overflow = true;
			goto out;
		}
		r->ops = n;
		r->cap = cap;
	}
	struct zdev_rec_op *o = &r->ops[r->n];
	*o = (struct zdev_rec_op){ .kind = (uint8_t)kind, .zone = zone, .off = off, .len = len };
	if (kind == ZDEV_REC_WRITE) {
		o->data = malloc(len ? len : 1);
		if (!o->data) {
			r->overflow = true;
			goto out;
		}
		memcpy(o->data, data, len);
		r->bytes += len;
	}
	r->n++;
out:
	pthread_mutex_unlock(&r->lock);
}
