/* mlog_append.c — appending and committing: records are laid out in the
 * pending batch (m->cur) at their final device position as they are
 * appended; mlog_commit writes them as a group commit: the first waiter
 * becomes the leader, flushes the device, writes every record pending and
 * flushes again, and each caller returns once a round that carried its
 * records is durable.  Contract: mlog.h; on-disk format: mlog_format.h;
 * state, invariants and locking: mlog_priv.h.
 *
 * API corner cases (beyond mlog.h):
 *   - after a read-write mlog_open, mlog_append returns -EINVAL until the
 *     first mlog_snapshot;
 *   - read-only: mlog_append -EROFS, mlog_commit 0 (no I/O);
 *   - mlog_commit with nothing new pending still flushes the device, so it
 *     also serves as "make my data durable";
 *   - if a write error leaves a zone in a state that no longer matches the
 *     layout (write pointer not where expected), mlog_append/mlog_commit
 *     return -EIO until a successful mlog_snapshot (should_snapshot: true);
 *   - mlog_commit called from inside the emit callback writes out what the
 *     snapshot has so far (no flush, no durability) and returns; a snapshot
 *     also writes itself out every 4 MiB, so memory stays bounded;
 *   - stats.records counts user records appended (snapshots included);
 *     stats.commits counts device commit rounds (a group of callers is one).
 *
 * Thread safety: mlog_append, mlog_commit and mlog_pending_bytes may be
 * called from any thread; they take m->lock.  The layout helpers run with
 * it held; the leader drops it for its device I/O (ml_leader_io) and alone
 * touches the zones' write pointers meanwhile.
 */
#include "mlog/mlog_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define WRITE_CHUNK (1u << 20)		/* bytes per zdev_write */
#define SNAP_WRITEOUT (4u << 20)	/* write a snapshot out every 4 MiB */
#define KEEP_BUF (8u << 20)		/* larger batch buffers are not kept */

/* ---- batches ------------------------------------------------------------ */

static int batch_reserve(struct batch *b, size_t extra)
{
	size_t need = b->len + extra + BUF_ALIGN;

	if (need <= b->cap)
		return 0;
	size_t ncap = b->cap ? b->cap : 64 * 1024;
	while (ncap < need)
		ncap *= 2;
	uint8_t *nb = zdev_buf_alloc(ncap);
	if (!nb)
		return -ENOMEM;
	if (b->len)
		memcpy(nb, b->buf, b->len);
	zdev_buf_free(b->buf);
	b->buf = nb;
	b->cap = ncap;
	return 0;
}

void ml_batch_clear(struct batch *b)
{
	b->len = 0;
	b->nsegs = 0;
}

void ml_batch_free(struct batch *b)
{
	zdev_buf_free(b->buf);
	free(b->segs);
	memset(b, 0, sizeof(*b));
}

static bool batch_empty(const struct batch *b)
{
	for (uint32_t i = 0; i < b->nsegs; i++)
		if (b->segs[i].len)
			return false;
	return true;
}

/* Room for n more bytes and 3 more segments in m->cur, so that laying out
 * one record (plus a zone switch) cannot fail half-way.  Lock held. */
int ml_ensure_room(struct mlog *m, size_t n)
{
	struct batch *b = &m->cur;

	if (b->nsegs + 3 > b->segcap) {
		uint32_t nc = b->segcap ? b->segcap : 8;
		while (nc < b->nsegs + 3)
			nc *= 2;
		struct seg *s = realloc(b->segs, nc * sizeof(*s));
		if (!s)
			return -ENOMEM;
		b->segs = s;
		b->segcap = nc;
	}
	return batch_reserve(b, n + 3 * BUF_ALIGN);
}

/* Lay out n bytes (from p, or zeros if p is NULL) at the tail.  Room was
 * ensured by ml_ensure_room().  Lock held. */
void ml_put_bytes(struct mlog *m, const void *p, size_t n)
{
	struct batch *b = &m->cur;
	struct seg *s = b->nsegs ? &b->segs[b->nsegs - 1] : NULL;

	if (!n)
		return;
	if (!s || s->zi != m->tail_zi || s->zoff + s->len != m->tail_off ||
	    s->closes) {
		size_t boff = ZF_ALIGN_UP(b->len, BUF_ALIGN);
		memset(b->buf + b->len, 0, boff - b->len);
		b->len = boff;
		b->segs[b->nsegs++] = (struct seg){ .zi = m->tail_zi,
						    .zoff = m->tail_off,
						    .boff = boff };
		s = &b->segs[b->nsegs - 1];
	}
	if (p)
		memcpy(b->buf + b->len, p, n);
	else
		memset(b->buf + b->len, 0, n);
	b->len += n;
	s->len += n;
	m->tail_off += n;
	m->put_bytes += n;
}

static const uint8_t zero_block[MAX_BLOCK];

/* Lay out one record at the tail; payload NULL means zeros.  pcrc is
 * zf_crc32c(0, payload, len).  Lock held, room ensured, fit checked. */
void ml_put_record(struct mlog *m, uint16_t type, const void *payload,
		   uint32_t len, uint32_t pcrc, bool consume)
{
	uint64_t pos = ml_hdr_pos(m->tail_off, m->B);
	struct mlog_rechdr h = { .magic = REC_MAGIC, .type = type, .len = len,
			    .lsn = m->next_lsn };

	ml_put_bytes(m, NULL, pos - m->tail_off);
	h.crc = zf_crc32c(pcrc, &h, sizeof(h));
	ml_put_bytes(m, &h, sizeof(h));
	ml_put_bytes(m, payload, len);
	ml_put_bytes(m, NULL, ZF_ALIGN_UP(RECHDR + len, 8u) - (RECHDR + len));
	if (consume)
		m->next_lsn++;
}

/* Append one record (any type) at the tail.  Lock held. */
int ml_append_locked(struct mlog *m, uint16_t type, const void *payload,
		     uint32_t len, uint32_t pcrc)
{
	size_t rsz = ZF_ALIGN_UP(RECHDR + len, 8u);
	int rc = ml_ensure_room(m, rsz + 3 * (size_t)m->B + 64);

	if (rc)
		return rc;
	const struct mzone *z = &m->z[m->tail_zi];
	if (ml_hdr_pos(m->tail_off, m->B) + rsz > z->capB - m->B) {
		rc = ml_next_zone(m);
		if (rc)
			return rc;
	}
	ml_put_record(m, type, payload, len, pcrc, true);
	return 0;
}

/* Pad the tail to a block boundary (PAD record, or zeros when fewer than a
 * record header's bytes remain).  Lock held. */
int ml_pad_tail(struct mlog *m)
{
	uint64_t r = m->tail_off % m->B;

	if (!r || !m->cur.nsegs)
		return 0;
	r = m->B - r;
	int rc = ml_ensure_room(m, r);
	if (rc)
		return rc;
	if (r >= RECHDR) {
		uint32_t n = (uint32_t)(r - RECHDR);
		ml_put_record(m, REC_PAD, NULL, n, zf_crc32c(0, zero_block, n), false);
	} else {
		ml_put_bytes(m, NULL, r);
	}
	return 0;
}

/* ---- device I/O (leader only) ------------------------------------------- */

int ml_finish_zone(struct mlog *m, struct mzone *z)
{
	int rc = zdev_zone_finish(m->dev, z->idx);

	if (rc) {
		zf_warn("mlog: finishing meta zone %u: %d", z->idx, rc);
		return rc;
	}
	z->need_finish = false;
	z->cond = ZDEV_COND_FULL;
	z->wp = z->start + z->cap;
	return 0;
}

/* After a failed write: learn how far the zone got and drop that prefix of
 * the segment.  Returns false if the zone no longer matches the layout. */
static bool resync(struct mlog *m, struct mzone *z, struct seg *s)
{
	struct zdev_zone r;

	if (ml_report_all(m->dev, z->idx, 1, &r))
		return false;
	uint64_t pos = z->start + s->zoff;
	uint64_t wp = r.wp;
	if (r.cond == ZDEV_COND_EMPTY)
		wp = r.start;
	z->cond = r.cond;
	if (r.cond == ZDEV_COND_FULL || r.cond == ZDEV_COND_READONLY ||
	    r.cond == ZDEV_COND_OFFLINE || wp < pos || wp > pos + s->len ||
	    (wp - pos) % m->geo->block_size)
		return false;
	z->wp = wp;
	s->zoff += wp - pos;
	s->boff += wp - pos;
	s->len -= wp - pos;
	return true;
}

/* Write what is left of b.  Segments shrink from the front as bytes reach
 * the device.  *lost is set when the device no longer matches the layout. */
static int write_batch(struct mlog *m, struct batch *b, uint32_t nz,
		       uint64_t *written, bool *lost)
{
	int rc;

	for (uint32_t i = 0; i < nz; i++)
		if (m->z[i].need_finish && (rc = ml_finish_zone(m, &m->z[i])))
			return rc;
	for (uint32_t i = 0; i < b->nsegs; i++) {
		struct seg *s = &b->segs[i];
		struct mzone *z = &m->z[s->zi];
		while (s->len) {
			uint64_t pos = z->start + s->zoff;
			if (z->wp != pos) {
				zf_err("mlog: meta zone %u write pointer %llu, "
				       "expected %llu", z->idx,
				       (unsigned long long)z->wp,
				       (unsigned long long)pos);
				*lost = true;
				return -EIO;
			}
			size_t n = ZF_MIN(s->len, (size_t)WRITE_CHUNK);
			ssize_t w = zdev_write(m->dev, pos, b->buf + s->boff, n);
			if (w != (ssize_t)n) {
				rc = w < 0 ? (int)w : -EIO;
				zf_warn("mlog: writing meta zone %u at +%llu: %d",
					z->idx, (unsigned long long)s->zoff, rc);
				if (!resync(m, z, s))
					*lost = true;
				return rc;
			}
			z->wp += n;
			if (z->cond == ZDEV_COND_EMPTY)
				z->cond = ZDEV_COND_IMP_OPEN;
			s->zoff += n;
			s->boff += n;
			s->len -= n;
			*written += n;
		}
		if (s->closes) {
			s->closes = false;
			z->need_finish = true;
			rc = ml_finish_zone(m, z);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Put the unwritten rest of b in front of m->cur (records appended since b
 * was taken follow it on disk).  Lock held. */
static int merge_front(struct mlog *m, struct batch *b)
{
	struct batch nb = { 0 };
	size_t total = BUF_ALIGN;
	uint32_t ns = 0;
	struct batch *src[2] = { b, &m->cur };

	for (int k = 0; k < 2; k++)
		for (uint32_t i = 0; i < src[k]->nsegs; i++)
			if (src[k]->segs[i].len) {
				total += ZF_ALIGN_UP(src[k]->segs[i].len, BUF_ALIGN);
				ns++;
			}
	nb.cap = ZF_MAX(total * 2, (size_t)64 * 1024);
	nb.buf = zdev_buf_alloc(nb.cap);
	nb.segcap = ZF_MAX(ns + 3, 8u);
	nb.segs = malloc(nb.segcap * sizeof(*nb.segs));
	if (!nb.buf || !nb.segs) {
		zdev_buf_free(nb.buf);
		free(nb.segs);
		return -ENOMEM;
	}
	for (int k = 0; k < 2; k++)
		for (uint32_t i = 0; i < src[k]->nsegs; i++) {
			struct seg s = src[k]->segs[i];
			if (!s.len)
				continue;
			memcpy(nb.buf + nb.len, src[k]->buf + s.boff, s.len);
			s.boff = nb.len;
			nb.segs[nb.nsegs++] = s;
			nb.len = ZF_ALIGN_UP(nb.len + s.len, BUF_ALIGN);
		}
	/* ml_put_bytes() continues the last segment in place: end the buffer
	 * exactly there. */
	if (nb.nsegs)
		nb.len = nb.segs[nb.nsegs - 1].boff + nb.segs[nb.nsegs - 1].len;
	ml_batch_free(&m->cur);
	m->cur = nb;
	return 0;
}

void ml_recycle(struct mlog *m, struct batch *b)
{
	ml_batch_clear(b);
	if (!m->spare.buf && !m->spare.segs && b->cap <= KEEP_BUF)
		m->spare = *b;
	else
		ml_batch_free(b);
	memset(b, 0, sizeof(*b));
}

/* Take m->cur for writing; m->cur becomes the (empty) spare.  Lock held. */
struct batch ml_take_cur(struct mlog *m)
{
	struct batch b = m->cur;

	m->cur = m->spare;
	ml_batch_clear(&m->cur);
	memset(&m->spare, 0, sizeof(m->spare));
	return b;
}

/* [flush,] write b [, flush].  Called and returns with m->lock held; drops it
 * for the I/O.  On error the unwritten rest of b goes back in front of
 * m->cur.  Caller is the leader. */
int ml_leader_io(struct mlog *m, struct batch *b, bool flushes)
{
	uint64_t g1 = 0, g2 = 0, written = 0;
	bool lost = false, f1 = false;
	int rc = 0;

	if (flushes)
		g1 = ++m->flush_started;
	m->inflight_bytes = b->len;
	uint32_t nz = m->nz;	/* slots are never moved: usable unlocked */
	pthread_mutex_unlock(&m->lock);
	if (flushes) {
		rc = zdev_flush(m->dev);
		f1 = !rc;
	}
	if (!rc)
		rc = write_batch(m, b, nz, &written, &lost);
	if (!rc && flushes) {
		pthread_mutex_lock(&m->lock);
		g2 = ++m->flush_started;
		pthread_mutex_unlock(&m->lock);
		rc = zdev_flush(m->dev);
	}
	pthread_mutex_lock(&m->lock);
	m->inflight_bytes = 0;
	m->st.bytes_written += written;
	if (f1 && m->flush_done < g1)
		m->flush_done = g1;
	if (!rc && flushes && m->flush_done < g2)
		m->flush_done = g2;
	if (lost && !m->broken) {
		zf_err("mlog: meta zone state lost after an I/O error; a "
		       "snapshot is needed");
		m->broken = -EIO;
	}
	if (rc && !batch_empty(b)) {
		int mr = merge_front(m, b);
		if (mr && !m->broken)
			m->broken = mr;
	}
	return rc;
}

/* One group-commit round as leader.  Lock held on entry and exit. */
static int lead_commit(struct mlog *m)
{
	int rc;

	m->leader = true;
	rc = ml_pad_tail(m);
	if (!rc) {
		struct batch b = ml_take_cur(m);
		uint64_t end_lsn = m->next_lsn;
		rc = ml_leader_io(m, &b, true);
		ml_recycle(m, &b);
		if (!rc) {
			if (m->durable_lsn < end_lsn)
				m->durable_lsn = end_lsn;
			m->st.commits++;
		} else {
			m->err_gen++;
			m->fail_lsn = end_lsn;
			m->fail_err = rc;
		}
	}
	m->leader = false;
	pthread_cond_broadcast(&m->cond);
	return rc;
}

/* During a snapshot (snapshot thread, which holds the leader role): write
 * what is laid out so far, no flush. */
static int snap_writeout(struct mlog *m)
{
	pthread_mutex_lock(&m->lock);
	int rc = ml_pad_tail(m);
	if (!rc && !batch_empty(&m->cur)) {
		struct batch b = ml_take_cur(m);
		rc = ml_leader_io(m, &b, false);
		ml_recycle(m, &b);
	}
	if (rc && !m->snap_err)
		m->snap_err = rc;
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static bool is_snap_thread(const struct mlog *m)
{
	return m->snap && pthread_equal(m->snap_thread, pthread_self());
}

/* ---- public write side -------------------------------------------------- */

int mlog_append(struct mlog *m, uint16_t type, const void *payload, uint32_t len)
{
	return mlog_append_flags(m, type, payload, len, 0);
}

int mlog_append_flags(struct mlog *m, uint16_t type, const void *payload,
		      uint32_t len, unsigned int flags)
{
	if (!m || type < MLOG_REC_USER || (len && !payload) ||
	    (flags & ~(unsigned int)MLOG_APPEND_FREES))
		return -EINVAL;
	if (len > MLOG_MAX_PAYLOAD)
		return -E2BIG;
	uint32_t pcrc = len ? zf_crc32c(0, payload, len) : 0;
	int rc;
	bool wo = false;

	pthread_mutex_lock(&m->lock);
	if (m->ro)
		rc = -EROFS;
	else if (m->snap)
		rc = m->snap_err ? m->snap_err
				 : ml_append_locked(m, type, payload, len, pcrc);
	else if (m->need_snapshot)
		rc = -EINVAL;
	else if (m->broken)
		rc = m->broken;
	else if (!(flags & MLOG_APPEND_FREES) && !ml_room_for_growth(m)) {
		/* The state may grow only while the next snapshot fits beside
		 * the chain (checked at every record: the state grows inside a
		 * zone too).  When a snapshot would give zones back, the caller
		 * takes one (-ENOSPC with the state not full); else the state
		 * is full until records that free space make room. */
		m->state_full = m->chain_len <= ml_next_snapshot_zones(m);
		rc = -ENOSPC;
	} else {
		/* a growing record just found room; one that frees rechecks */
		m->state_full = (flags & MLOG_APPEND_FREES) && m->state_full &&
				!ml_room_for_growth(m);
		m->append_frees = flags & MLOG_APPEND_FREES;
		rc = ml_append_locked(m, type, payload, len, pcrc);
		m->append_frees = false;
		if (!rc)
			/* the data zones kept for the log follow the state */
			ml_tell_reserve(m);
	}
	if (!rc) {
		m->st.records++;
		if (m->snap)
			m->snap_user++;
		wo = is_snap_thread(m) && m->cur.len >= SNAP_WRITEOUT;
	} else if (m->snap && !m->snap_err) {
		m->snap_err = rc;
	}
	pthread_mutex_unlock(&m->lock);
	if (wo)
		rc = snap_writeout(m);
	return rc;
}

int mlog_commit(struct mlog *m)
{
	if (!m)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	if (m->ro) {
		pthread_mutex_unlock(&m->lock);
		return 0;
	}
	if (is_snap_thread(m)) {
		pthread_mutex_unlock(&m->lock);
		return snap_writeout(m);
	}
	uint64_t target = m->next_lsn, fgen = m->flush_started, egen = m->err_gen;
	int rc = 0;
	for (;;) {
		/* Wait only for records that exist: a failed snapshot takes
		 * back the LSNs it had given its own records. */
		if (target > m->next_lsn)
			target = m->next_lsn;
		if (m->durable_lsn >= target)
			break;
		if (m->err_gen != egen && m->fail_lsn >= target) {
			rc = m->fail_err;
			break;
		}
		if (!m->leader && m->broken) {
			rc = m->broken;
			break;
		}
		if (!m->leader) {
			rc = lead_commit(m);
			if (rc)
				break;
			continue;
		}
		zf_will_block();
		pthread_cond_wait(&m->cond, &m->lock);
	}
	bool fresh = m->flush_done > fgen;
	pthread_mutex_unlock(&m->lock);
	/* Data the caller wrote before calling must be durable on return even
	 * when its records were carried by a round that flushed earlier. */
	if (!rc && !fresh)
		rc = zdev_flush(m->dev);
	return rc;
}

uint64_t mlog_pending_bytes(struct mlog *m)
{
	pthread_mutex_lock(&m->lock);
	uint64_t n = m->cur.len + m->inflight_bytes;
	pthread_mutex_unlock(&m->lock);
	return n;
}

uint64_t mlog_record_bytes(uint32_t len)
{
	return ZF_ALIGN_UP(RECHDR + (uint64_t)len, 8u);
}
