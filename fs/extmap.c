/* extmap — see extmap.h.  Blocks of extents under a sorted index of block
 * ends: a random write into a file of a million extents moves one block's
 * tail (a few KiB), not the file's. */
#include "extmap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"

#define HALF (EXTMAP_BLK / 2)
#define MIN_CAP 8u	/* first size of a map's only block, extents */

static struct extmap_node *nodes(struct extmap *m)
{
	return m->idxcap > 1 ? m->idx : &m->one;
}

static const struct extmap_node *cnodes(const struct extmap *m)
{
	return m->idxcap > 1 ? m->idx : &m->one;
}

static uint64_t ext_end(const struct extmap_ext *e)
{
	return e->off + e->len;
}

static struct extmap_blk *blk_of(struct extmap *m, size_t b)
{
	return nodes(m)[b].blk;
}

/* The index keeps each block's end; every change of a block's last
 * extent goes through here. */
static void fix_key(struct extmap *m, size_t b)
{
	struct extmap_node *nd = &nodes(m)[b];
	nd->end = nd->blk->n ? ext_end(&nd->blk->v[nd->blk->n - 1]) : 0;
}

void extmap_init(struct extmap *m)
{
	memset(m, 0, sizeof(*m));
}

void extmap_free(struct extmap *m)
{
	uint64_t boundary = m->boundary;
	struct extmap_node *nd = nodes(m);

	for (size_t b = 0; b < m->nblk; b++)
		free(nd[b].blk);
	if (m->idxcap > 1)
		free(m->idx);
	while (m->spare) {
		struct extmap_blk *k = m->spare;
		m->spare = k->next;
		free(k);
	}
	extmap_init(m);
	m->boundary = boundary;
}

/* May [a, end) on the device be one extent? */
static bool same_unit(const struct extmap *m, uint64_t a, uint64_t end)
{
	return m->boundary == 0 || a / m->boundary == (end - 1) / m->boundary;
}

/* ---- room ---- */

/* Splits that inserting `extra` extents can cause.  A block splits only
 * when full, so a block there is now splits (once) only if the inserts
 * fill it first: at most as many as the cheapest to fill that `extra`
 * pays for.  A block a split or a merge leaves has at most HALF + 1
 * extents and needs HALF - 1 more inserts before it splits again.
 * O(blocks) for more than 2: that is a copy or a collector's batch. */
static size_t splits_possible(const struct extmap *m, size_t extra)
{
	if (extra <= 2)
		return extra;
	uint32_t free_n[EXTMAP_BLK + 1] = { 0 };	/* blocks by free slots */
	const struct extmap_node *nd = cnodes(m);
	for (size_t b = 0; b < m->nblk; b++)
		free_n[nd[b].blk->cap - nd[b].blk->n]++;
	size_t left = extra, fill = 0;
	for (size_t f = 0; f <= EXTMAP_BLK && left > f; f++) {
		size_t k = ZF_MIN((size_t)free_n[f], left / (f + 1));
		fill += k;
		left -= k * (f + 1);
	}
	return ZF_MIN(extra, fill + extra / (HALF - 1) + 1);
}

static void spare_put(struct extmap *m, struct extmap_blk *k)
{
	k->n = 0;
	k->next = m->spare;
	m->spare = k;
	m->nspare++;
}

static struct extmap_blk *spare_take(struct extmap *m)
{
	struct extmap_blk *k = m->spare;
	m->spare = k->next;
	m->nspare--;
	k->next = NULL;
	return k;
}

/* Room for `extra` inserts (see extmap_reserve); `trim` frees spares
 * beyond what they need.  Set and punch ensure their own room without
 * trimming, so that a larger reserve made for a sequence of them holds. */
static int room(struct extmap *m, size_t extra, bool trim)
{
	size_t need = 0;

	if (extra && m->nblk == 0) {
		size_t cap = ZF_MIN(ZF_MAX(extra, (size_t)MIN_CAP), (size_t)EXTMAP_BLK);
		struct extmap_blk *k = realloc(NULL, sizeof(*k) + cap * sizeof(k->v[0]));
		if (!k)
			return -ENOMEM;
		k->n = 0;
		k->cap = (uint32_t)cap;
		k->next = NULL;
		nodes(m)[0] = (struct extmap_node){ 0, k };
		m->nblk = 1;
	}
	if (extra && m->nblk == 1) {
		struct extmap_node *nd = nodes(m);
		size_t want = m->n + extra, cap = nd[0].blk->cap;
		if (want > cap && cap < EXTMAP_BLK) {
			while (cap < want && cap < EXTMAP_BLK)
				cap *= 2;
			cap = ZF_MIN(cap, (size_t)EXTMAP_BLK);
			struct extmap_blk *k = realloc(nd[0].blk, sizeof(*k) + cap * sizeof(k->v[0]));
			if (!k)
				return -ENOMEM;
			k->cap = (uint32_t)cap;
			nd[0].blk = k;
		}
		if (want > cap)
			need = splits_possible(m, extra);
	} else if (extra) {
		need = splits_possible(m, extra);
	}
	if (need && m->nblk + need > ZF_MAX(m->idxcap, (size_t)1)) {
		size_t cap = m->idxcap > 1 ? m->idxcap : 0;
		struct extmap_node *v = zf_grow(m->idxcap > 1 ? m->idx : NULL, &cap,
						m->nblk + need, sizeof(*v), 8);
		if (!v)
			return -ENOMEM;
		if (m->idxcap <= 1)
			v[0] = m->one;	/* nblk is 1 here */
		m->idx = v;
		m->idxcap = cap;
	}
	while (m->nspare < need) {
		struct extmap_blk *k = calloc(1, EXTMAP_BLK_BYTES);
		if (!k)
			return -ENOMEM;
		k->cap = EXTMAP_BLK;
		spare_put(m, k);
	}
	while (trim && m->nspare > need)
		free(spare_take(m));
	return 0;
}

int extmap_reserve(struct extmap *m, size_t extra)
{
	return room(m, extra, true);
}

/* ---- positions ---- */

/* The first extent whose end is > off: (block, entry), or (nblk, 0). */
static struct extmap_cur locate(const struct extmap *m, uint64_t off)
{
	const struct extmap_node *nd = cnodes(m);
	size_t lo = 0, hi = m->nblk;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (nd[mid].end <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == m->nblk)
		return (struct extmap_cur){ m->nblk, 0 };
	const struct extmap_blk *k = nd[lo].blk;
	size_t a = 0, z = k->n;
	while (a < z) {
		size_t mid = a + (z - a) / 2;
		if (ext_end(&k->v[mid]) <= off)
			a = mid + 1;
		else
			z = mid;
	}
	return (struct extmap_cur){ lo, a };
}

static struct extmap_ext *at(struct extmap *m, struct extmap_cur c)
{
	return c.b < m->nblk ? &blk_of(m, c.b)->v[c.i] : NULL;
}

/* The extent before c (and *pb its block), or NULL. */
static struct extmap_ext *before(struct extmap *m, struct extmap_cur c, size_t *pb)
{
	if (c.b < m->nblk && c.i > 0) {
		*pb = c.b;
		return &blk_of(m, c.b)->v[c.i - 1];
	}
	if (c.b == 0)
		return NULL;
	struct extmap_blk *k = blk_of(m, c.b - 1);
	*pb = c.b - 1;
	return k->n ? &k->v[k->n - 1] : NULL;
}

static void step(const struct extmap *m, struct extmap_cur *c)
{
	if (++c->i >= cnodes(m)[c->b].blk->n) {
		c->b++;
		c->i = 0;
	}
}

/* The extent after c, or NULL. */
static struct extmap_ext *after(struct extmap *m, struct extmap_cur c)
{
	step(m, &c);
	return at(m, c);
}

const struct extmap_ext *extmap_seek(const struct extmap *m, uint64_t off,
				     struct extmap_cur *c)
{
	*c = locate(m, off);
	return at((struct extmap *)m, *c);
}

const struct extmap_ext *extmap_next(const struct extmap *m, struct extmap_cur *c)
{
	if (c->b >= m->nblk)
		return NULL;
	step(m, c);
	return at((struct extmap *)m, *c);
}

const struct extmap_ext *extmap_nth(const struct extmap *m, size_t k, struct extmap_cur *c)
{
	const struct extmap_node *nd = cnodes(m);

	for (size_t b = 0; b < m->nblk; b++) {
		if (k < nd[b].blk->n) {
			*c = (struct extmap_cur){ b, k };
			return &nd[b].blk->v[k];
		}
		k -= nd[b].blk->n;
	}
	*c = (struct extmap_cur){ m->nblk, 0 };
	return NULL;
}

uint64_t extmap_end(const struct extmap *m)
{
	return m->nblk ? cnodes(m)[m->nblk - 1].end : 0;
}

uint64_t extmap_bytes(const struct extmap *m)
{
	return m->bytes;
}

size_t extmap_count(const struct extmap *m)
{
	return m->n;
}

/* ---- changes (room ensured by the caller) ---- */

/* Insert e before the extent at c (c.i may be its block's n: at the end
 * of block c.b; c.b == nblk: at the end of the map).  A full block splits
 * into halves, taking a spare.  Returns where e now is. */
static struct extmap_cur insert_at(struct extmap *m, struct extmap_cur c,
				   const struct extmap_ext *e)
{
	struct extmap_node *nd = nodes(m);

	if (c.b == m->nblk) {
		c.b = m->nblk - 1;
		c.i = nd[c.b].blk->n;
	} else if (c.i == 0 && c.b > 0 && nd[c.b - 1].blk->n < nd[c.b - 1].blk->cap) {
		c.b--;
		c.i = nd[c.b].blk->n;
	}
	struct extmap_blk *k = nd[c.b].blk;
	if (k->n == k->cap) {
		struct extmap_blk *s = spare_take(m);
		memmove(&nd[c.b + 2], &nd[c.b + 1], (m->nblk - c.b - 1) * sizeof(*nd));
		m->nblk++;
		s->n = k->n - HALF;
		memcpy(s->v, &k->v[HALF], s->n * sizeof(*e));
		k->n = HALF;
		nd[c.b + 1].blk = s;
		fix_key(m, c.b + 1);
		if (c.i > HALF) {
			fix_key(m, c.b);
			c.b++;
			c.i -= HALF;
			k = s;
		}
	}
	memmove(&k->v[c.i + 1], &k->v[c.i], (k->n - c.i) * sizeof(*e));
	k->v[c.i] = *e;
	k->n++;
	m->n++;
	fix_key(m, c.b);
	return c;
}

/* Merge block b+1 into b when both fit in half a block. */
static bool try_merge(struct extmap *m, size_t b)
{
	struct extmap_node *nd = nodes(m);

	if (b + 1 >= m->nblk || nd[b].blk->n + nd[b + 1].blk->n > HALF)
		return false;
	struct extmap_blk *k = nd[b].blk, *s = nd[b + 1].blk;
	memcpy(&k->v[k->n], s->v, s->n * sizeof(s->v[0]));
	k->n += s->n;
	spare_put(m, s);
	memmove(&nd[b + 1], &nd[b + 2], (m->nblk - b - 2) * sizeof(*nd));
	m->nblk--;
	fix_key(m, b);
	return true;
}

/* After extents were cut from blocks [b0, b1]: free the empty ones
 * (keeping one block when the map is empty), then merge around them. */
static void settle(struct extmap *m, size_t b0, size_t b1)
{
	struct extmap_node *nd = nodes(m);
	size_t w = b0;

	for (size_t b = b0; b <= b1; b++) {
		if (nd[b].blk->n == 0 && !(m->n == 0 && w == 0))
			spare_put(m, nd[b].blk);
		else
			nd[w++] = nd[b];
	}
	if (w <= b1) {
		memmove(&nd[w], &nd[b1 + 1], (m->nblk - b1 - 1) * sizeof(*nd));
		m->nblk -= b1 + 1 - w;
	}
	/* The blocks that lost extents are now at b0 and b0 + 1: merge each
	 * pair they are in that fits in half a block. */
	for (size_t b = b0 ? b0 - 1 : 0; b + 1 < m->nblk && b <= b0 + 1;)
		if (!try_merge(m, b))
			b++;
}

/* Remove entries [i, j) of block b. */
static void cut(struct extmap *m, size_t b, size_t i, size_t j)
{
	struct extmap_blk *k = blk_of(m, b);

	if (j == i)
		return;
	memmove(&k->v[i], &k->v[j], (k->n - j) * sizeof(k->v[0]));
	k->n -= (uint32_t)(j - i);
	m->n -= j - i;
	fix_key(m, b);
}

int extmap_punch(struct extmap *m, uint64_t off, uint64_t len,
		 extmap_drop_fn drop, void *arg)
{
	uint64_t end = (len > UINT64_MAX - off) ? UINT64_MAX : off + len;
	struct extmap_cur c = locate(m, off);
	struct extmap_ext *e = at(m, c);

	if (len == 0 || !e)
		return 0;
	/* One extent straddling both ends splits in two: needs room. */
	if (e->off < off && ext_end(e) > end) {
		if (room(m, 1, false))
			return -ENOMEM;
		e = at(m, c);	/* room may have moved the block */
		struct extmap_ext tail = {
			.off = end, .len = ext_end(e) - end, .dev = e->dev + (end - e->off) };
		if (drop)
			drop(arg, e->dev + (off - e->off), end - off);
		m->bytes -= end - off;
		e->len = off - e->off;
		fix_key(m, c.b);
		c.i++;
		insert_at(m, c, &tail);
		return 0;
	}
	size_t b0 = c.b;
	if (e->off < off) {	/* trim the head extent's end */
		uint64_t trim = ext_end(e) - off;
		if (drop)
			drop(arg, e->dev + (off - e->off), trim);
		m->bytes -= trim;
		e->len -= trim;
		fix_key(m, c.b);
		step(m, &c);
	}
	while (c.b < m->nblk) {	/* whole extents, block by block */
		struct extmap_blk *k = blk_of(m, c.b);
		size_t j = c.i;
		for (; j < k->n && ext_end(&k->v[j]) <= end; j++) {
			if (drop)
				drop(arg, k->v[j].dev, k->v[j].len);
			m->bytes -= k->v[j].len;
		}
		bool rest = j == k->n;
		cut(m, c.b, c.i, j);
		if (!rest) {	/* trim the tail extent's start */
			e = &k->v[c.i];
			if (e->off < end) {
				uint64_t trim = end - e->off;
				if (drop)
					drop(arg, e->dev, trim);
				m->bytes -= trim;
				e->off += trim;
				e->dev += trim;
				e->len -= trim;
			}
			break;
		}
		c.b++;
		c.i = 0;
	}
	settle(m, b0, ZF_MIN(c.b, m->nblk - 1));
	return 0;
}

/* Would the new extent {off, len, dev} merge with a neighbour: the extent
 * ending at off (p, may be NULL) or the one starting at off + len (q)? */
static bool would_merge(const struct extmap *m, const struct extmap_ext *p,
			const struct extmap_ext *q, uint64_t off, uint64_t len, uint64_t dev)
{
	return (p && ext_end(p) == off && p->dev + p->len == dev &&
		same_unit(m, p->dev, dev + len)) ||
	       (q && q->off == off + len && q->dev == dev + len &&
		same_unit(m, dev, q->dev + q->len));
}

/* The two shapes of a random overwrite, done without a punch and a
 * search: [off, off+len) is exactly one extent (its device range is
 * replaced in place), or lies strictly inside one (split in three).
 * Returns false, having changed nothing, for every other shape and
 * whenever the new extent would merge with a neighbour (the general path
 * keeps extents merged).  Room for two inserts is ensured by the caller. */
static bool set_in_place(struct extmap *m, uint64_t off, uint64_t len, uint64_t dev,
			 extmap_drop_fn drop, void *arg)
{
	struct extmap_cur c = locate(m, off);
	struct extmap_ext *e = at(m, c);
	size_t pb;

	if (!e)
		return false;
	uint64_t end = off + len, e_end = ext_end(e);
	if (e->off == off && e->len == len) {
		if (would_merge(m, before(m, c, &pb), after(m, c), off, len, dev))
			return false;
		if (drop)
			drop(arg, e->dev, len);
		e->dev = dev;
		return true;
	}
	if (!(e->off < off && end < e_end))
		return false;
	struct extmap_ext head = { e->off, off - e->off, e->dev };
	struct extmap_ext mid = { off, len, dev };
	struct extmap_ext tail = { end, e_end - end, e->dev + (end - e->off) };
	if (would_merge(m, &head, &tail, off, len, dev))
		return false;
	if (drop)
		drop(arg, e->dev + (off - e->off), len);
	*e = head;
	fix_key(m, c.b);
	c.i++;
	c = insert_at(m, c, &mid);
	c.i++;
	insert_at(m, c, &tail);
	return true;
}

int extmap_set(struct extmap *m, uint64_t off, uint64_t len, uint64_t dev,
	       extmap_drop_fn drop, void *arg)
{
	if (len == 0)
		return 0;
	if (room(m, 2, false))	/* punch may split (1) + the insert (1) */
		return -ENOMEM;
	if (set_in_place(m, off, len, dev, drop, arg))
		return 0;
	extmap_punch(m, off, len, drop, arg);	/* cannot fail: room ensured */
	m->bytes += len;
	struct extmap_cur c = locate(m, off);	/* the extent after the hole */
	size_t pb;
	struct extmap_ext *p = before(m, c, &pb), *q = at(m, c);
	/* Merge with the previous extent when contiguous in file and device. */
	if (p && ext_end(p) == off && p->dev + p->len == dev && same_unit(m, p->dev, dev + len)) {
		p->len += len;
		if (q && q->off == off + len && q->dev == dev + len &&
		    same_unit(m, p->dev, q->dev + q->len)) {
			p->len += q->len;
			cut(m, c.b, c.i, c.i + 1);
			fix_key(m, pb);
			settle(m, c.b, c.b);
		} else {
			fix_key(m, pb);
		}
		return 0;
	}
	if (q && q->off == off + len && q->dev == dev + len && same_unit(m, dev, q->dev + q->len)) {
		q->off = off;
		q->dev = dev;
		q->len += len;
		return 0;
	}
	insert_at(m, c, &(struct extmap_ext){ .off = off, .len = len, .dev = dev });
	return 0;
}

/* ---- checks ---- */

int extmap_check(const struct extmap *m)
{
	const struct extmap_node *nd = cnodes(m);
	const struct extmap_ext *prev = NULL;
	uint64_t bytes = 0;
	size_t n = 0, spares = 0;

	for (size_t b = 0; b < m->nblk; b++) {
		const struct extmap_blk *k = nd[b].blk;
		if (k->n > k->cap || (k->n == 0 && m->nblk > 1) ||
		    (m->nblk > 1 && k->cap != EXTMAP_BLK))
			return -EUCLEAN;
		if (nd[b].end != (k->n ? ext_end(&k->v[k->n - 1]) : 0))
			return -EUCLEAN;
		if (b + 1 < m->nblk && k->n + nd[b + 1].blk->n <= HALF)
			return -EUCLEAN;	/* should have merged */
		for (uint32_t i = 0; i < k->n; i++) {
			const struct extmap_ext *e = &k->v[i];
			if (e->len == 0 || (prev && ext_end(prev) > e->off))
				return -EUCLEAN;
			prev = e;
			bytes += e->len;
			n++;
		}
	}
	for (const struct extmap_blk *k = m->spare; k; k = k->next)
		if (k->cap != EXTMAP_BLK || ++spares > m->nspare)
			return -EUCLEAN;
	if (n != m->n || bytes != m->bytes || spares != m->nspare ||
	    m->nblk > ZF_MAX(m->idxcap, (size_t)1))
		return -EUCLEAN;
	return 0;
}
