/* extmap — see extmap.h.  A sorted array: files written by LSM stores have
 * few large extents; random-write workloads are bounded by the write
 * buffer's chunking (one extent per contiguous dirty run). */
#include "extmap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"

void extmap_init(struct extmap *m)
{
	m->v = NULL;
	m->n = m->cap = 0;
	m->bytes = 0;
	m->boundary = 0;
}

/* May [a, a+alen) and the device range right after it form one extent? */
static bool same_unit(const struct extmap *m, uint64_t a, uint64_t end)
{
	return m->boundary == 0 || a / m->boundary == (end - 1) / m->boundary;
}

void extmap_free(struct extmap *m)
{
	uint64_t b = m->boundary;
	free(m->v);
	extmap_init(m);
	m->boundary = b;
}

int extmap_reserve(struct extmap *m, size_t extra)
{
	if (m->n + extra <= m->cap)
		return 0;
	size_t cap = m->cap;
	struct extmap_ext *v = zf_grow(m->v, &cap, m->n + extra, sizeof(*v), 8);
	if (!v)
		return -ENOMEM;
	m->v = v;
	m->cap = cap;
	return 0;
}

size_t extmap_find(const struct extmap *m, uint64_t off)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid].off + m->v[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t extmap_end(const struct extmap *m)
{
	return m->n ? m->v[m->n - 1].off + m->v[m->n - 1].len : 0;
}

uint64_t extmap_bytes(const struct extmap *m)
{
	return m->bytes;
}

static void insert_at(struct extmap *m, size_t i, const struct extmap_ext *e)
{
	memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*e));
	m->v[i] = *e;
	m->n++;
}

int extmap_punch(struct extmap *m, uint64_t off, uint64_t len,
		 extmap_drop_fn drop, void *arg)
{
	uint64_t end = (len > UINT64_MAX - off) ? UINT64_MAX : off + len;
	size_t i = extmap_find(m, off);

	if (len == 0)
		return 0;
	/* One extent straddling both ends splits in two: needs a slot. */
	if (i < m->n && m->v[i].off < off && m->v[i].off + m->v[i].len > end) {
		if (extmap_reserve(m, 1))
			return -ENOMEM;
		struct extmap_ext *e = &m->v[i];
		struct extmap_ext tail = {
			.off = end, .len = e->off + e->len - end,
			.dev = e->dev + (end - e->off) };
		if (drop)
			drop(arg, e->dev + (off - e->off), end - off);
		m->bytes -= end - off;
		e->len = off - e->off;
		insert_at(m, i + 1, &tail);
		return 0;
	}
	size_t first = i, last = i;	/* [first, last) fully removed */
	if (i < m->n && m->v[i].off < off) {	/* trim the head extent's end */
		struct extmap_ext *e = &m->v[i];
		uint64_t cut = e->off + e->len - off;
		if (drop)
			drop(arg, e->dev + (off - e->off), cut);
		m->bytes -= cut;
		e->len -= cut;
		first = last = i + 1;
	}
	while (last < m->n && m->v[last].off + m->v[last].len <= end) {
		if (drop)
			drop(arg, m->v[last].dev, m->v[last].len);
		m->bytes -= m->v[last].len;
		last++;
	}
	if (last < m->n && m->v[last].off < end) {	/* trim the tail extent's start */
		struct extmap_ext *e = &m->v[last];
		uint64_t cut = end - e->off;
		if (drop)
			drop(arg, e->dev, cut);
		m->bytes -= cut;
		e->off += cut;
		e->dev += cut;
		e->len -= cut;
	}
	if (last > first) {
		memmove(&m->v[first], &m->v[last], (m->n - last) * sizeof(m->v[0]));
		m->n -= last - first;
	}
	return 0;
}

/* Would the new extent {off, len, dev} merge with a neighbour: the extent
 * ending at off (p, may be NULL) or the one starting at off + len (q)? */
static bool would_merge(const struct extmap *m, const struct extmap_ext *p,
			const struct extmap_ext *q, uint64_t off, uint64_t len, uint64_t dev)
{
	return (p && p->off + p->len == off && p->dev + p->len == dev &&
		same_unit(m, p->dev, dev + len)) ||
	       (q && q->off == off + len && q->dev == dev + len &&
		same_unit(m, dev, q->dev + q->len));
}

/* The two shapes of a random overwrite, done without the punch-then-insert
 * that moves the tail of the array twice: [off, off+len) is exactly one
 * extent (its device range is replaced in place), or lies strictly inside
 * one (split in three with one move of the tail).  Returns false, having
 * changed nothing, for every other shape and whenever the new extent would
 * merge with a neighbour (the general path keeps extents merged).  Room for
 * two more entries is reserved by the caller. */
static bool set_in_place(struct extmap *m, uint64_t off, uint64_t len, uint64_t dev,
			 extmap_drop_fn drop, void *arg)
{
	size_t i = extmap_find(m, off);
	if (i >= m->n)
		return false;
	struct extmap_ext *e = &m->v[i];
	uint64_t end = off + len, e_end = e->off + e->len;

	if (e->off == off && e->len == len) {
		if (would_merge(m, i ? &m->v[i - 1] : NULL, i + 1 < m->n ? &m->v[i + 1] : NULL,
				off, len, dev))
			return false;
		if (drop)
			drop(arg, e->dev, len);
		e->dev = dev;
		return true;
	}
	if (!(e->off < off && end < e_end))
		return false;
	struct extmap_ext head = { e->off, off - e->off, e->dev };
	struct extmap_ext tail = { end, e_end - end, e->dev + (end - e->off) };
	if (would_merge(m, &head, &tail, off, len, dev))
		return false;
	if (drop)
		drop(arg, e->dev + (off - e->off), len);
	memmove(&m->v[i + 3], &m->v[i + 1], (m->n - i - 1) * sizeof(*e));
	m->v[i] = head;
	m->v[i + 1] = (struct extmap_ext){ off, len, dev };
	m->v[i + 2] = tail;
	m->n += 2;
	return true;
}

int extmap_set(struct extmap *m, uint64_t off, uint64_t len, uint64_t dev,
	       extmap_drop_fn drop, void *arg)
{
	if (len == 0)
		return 0;
	if (extmap_reserve(m, 2))	/* punch may split (1) + the insert (1) */
		return -ENOMEM;
	if (set_in_place(m, off, len, dev, drop, arg))
		return 0;
	extmap_punch(m, off, len, drop, arg);	/* cannot fail: space reserved */
	m->bytes += len;
	size_t i = extmap_find(m, off);
	struct extmap_ext e = { .off = off, .len = len, .dev = dev };
	/* Merge with the previous extent when contiguous in file and device. */
	if (i > 0) {
		struct extmap_ext *p = &m->v[i - 1];
		if (p->off + p->len == off && p->dev + p->len == dev &&
		    same_unit(m, p->dev, dev + len)) {
			p->len += len;
			if (i < m->n && m->v[i].off == off + len &&
			    m->v[i].dev == dev + len &&
			    same_unit(m, p->dev, m->v[i].dev + m->v[i].len)) {
				p->len += m->v[i].len;
				memmove(&m->v[i], &m->v[i + 1],
					(m->n - i - 1) * sizeof(e));
				m->n--;
			}
			return 0;
		}
	}
	if (i < m->n && m->v[i].off == off + len && m->v[i].dev == dev + len &&
	    same_unit(m, dev, m->v[i].dev + m->v[i].len)) {
		m->v[i].off = off;
		m->v[i].dev = dev;
		m->v[i].len += len;
		return 0;
	}
	insert_at(m, i, &e);
	return 0;
}
