/* mlog — the metadata log: typed, CRC'd records on a chain of log zones.
 * The contract (API, invariants, thread safety) is in mlog.h, the on-disk
 * format in mlog_format.h.
 *
 * API corner cases (beyond mlog.h):
 *   - mlog_open fills *sb before the first replay callback (and again on
 *     success), so the callback may read the superblock (block size);
 *   - after a read-write mlog_open, mlog_append returns -EINVAL until the
 *     first mlog_snapshot; mlog_should_snapshot returns true then;
 *   - read-only: mlog_append/mlog_snapshot -EROFS, mlog_commit 0 (no I/O);
 *   - mlog_commit with nothing new pending still flushes the device, so it
 *     also serves as "make my data durable";
 *   - if a write error leaves a zone in a state that no longer matches the
 *     layout (write pointer not where expected), mlog_append/mlog_commit
 *     return -EIO until a successful mlog_snapshot (should_snapshot: true);
 *   - mlog_commit called from inside the emit callback writes out what the
 *     snapshot has so far (no flush, no durability) and returns; a snapshot
 *     also writes itself out every 4 MiB, so memory stays bounded;
 *   - any mlog_append failure during emit fails the snapshot even if emit
 *     ignores it; nested mlog_snapshot returns -EBUSY;
 *   - stats.records counts user records appended (snapshots included);
 *     stats.commits counts device commit rounds (a group of callers is one).
 */
#include "mlog/mlog.h"
#include "mlog/mlog_format.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"

#define ZHDR_MAGIC MLOG_ZHDR_MAGIC
#define ZHDR_VERSION MLOG_ZHDR_VERSION
#define REC_MAGIC MLOG_REC_MAGIC
#define RECHDR MLOG_RECHDR
#define MAXREC ZF_ALIGN_UP(RECHDR + MLOG_MAX_PAYLOAD, 8u)
#define MAX_BLOCK MLOG_MAX_BLOCK
#define BUF_ALIGN 4096u
#define WRITE_CHUNK (1u << 20)		/* bytes per zdev_write */
#define READ_WINDOW (1u << 20)		/* bytes per read while parsing */
#define SNAP_WRITEOUT (4u << 20)	/* write a snapshot out every 4 MiB */
#define PROBE_BATCH 32u
#define KEEP_BUF (8u << 20)		/* larger batch buffers are not kept */
#define DAMAGE_SCAN (4u << 20)		/* bytes a mount reads past a torn tail
					 * for valid records (damage) */

enum { REC_PAD = MLOG_REC_PAD, REC_SNAP_BEGIN = MLOG_REC_SNAP_BEGIN,
       REC_SNAP_END = MLOG_REC_SNAP_END, REC_NEXT_ZONE = MLOG_REC_NEXT_ZONE };

/* Role of a log zone in the in-memory state.  Z_UNUSED: a slot past the
 * meta zones that holds no borrowed zone now (reusable). */
enum zrole { Z_FREE, Z_CHAIN, Z_NEW, Z_GARBAGE, Z_BAD, Z_UNUSED };

/* A zone the log uses: the meta zones are slots [0, nmeta); zones borrowed
 * from the data area take the slots after them.  Slots never move (the
 * array is allocated once for every zone the log could hold), so the
 * leader may use a slot without the lock. */
struct mzone {
	uint32_t idx;		/* device zone index */
	uint8_t role;		/* enum zrole; under m->lock */
	uint8_t cond;		/* cached condition; leader only */
	bool need_finish;	/* leader only */
	bool borrowed;		/* a data zone lent by the zone source; under m->lock */
	uint64_t start, cap;	/* bytes */
	uint64_t capB;		/* capacity rounded down to B */
	uint64_t wp;		/* cached absolute write pointer; leader only */
};

struct seg {
	uint32_t zi;		/* slot in m->z */
	bool closes;		/* ends with NEXT_ZONE: finish the zone after */
	uint64_t zoff;		/* zone-relative offset of the first byte */
	size_t boff;		/* offset in the batch buffer */
	size_t len;
};

struct batch {
	uint8_t *buf;
	size_t len, cap;
	struct seg *segs;
	uint32_t nsegs, segcap;
};

struct mlog {
	struct zdev *dev;
	const struct zdev_geometry *geo;
	struct mlog_sb sb;
	uint32_t B;
	bool ro;
	bool salvage;			/* MLOG_OPEN_SALVAGE: replay past damage */

	pthread_mutex_t lock;
	pthread_cond_t cond;

	struct mzone *z;		/* zcap slots */
	uint32_t nz;			/* slots ever used (meta + borrowed); under lock */
	uint32_t nmeta, zcap;		/* meta zones; slots allocated */
	uint32_t *chain, chain_len;	/* current epoch's slots, by zone_seq */
	uint32_t *nchain, nchain_len;	/* epoch being written by a snapshot */
	/* Where borrowed zones come from (mlog_set_zone_source); none: the
	 * log lives in the meta zones alone. */
	struct mlog_zone_source src;
	void *src_arg;
	uint32_t reserve_told;		/* last reserve given to src.reserve */
	/* The caller's size of the next snapshot's records (bytes), or NULL
	 * (mlog_set_state_bytes); called under m->lock. */
	uint64_t (*state_bytes)(void *arg);
	void *state_arg;
	uint32_t snap_zones;		/* zones the current epoch's snapshot took */
	uint64_t snap_bytes;		/* bytes the current epoch's snapshot took */
	uint64_t snap_put;		/* put_bytes when that snapshot ended */
	bool append_frees;		/* the append in progress frees space
					 * (MLOG_APPEND_FREES); under lock */
	bool nearly_full;		/* the last snapshot left room for less than
					 * two more (warned once per entry); under lock */
	bool state_full;		/* the state is as large as the device lets
					 * it be: only records that free space are
					 * taken (set after each snapshot); under lock */
	uint64_t epoch, max_epoch, snap_epoch;
	uint32_t alloc_cursor;

	uint32_t tail_zi;		/* where the next record goes */
	uint64_t tail_off;
	uint64_t next_lsn, durable_lsn;
	uint64_t put_bytes;		/* bytes ever laid out */

	struct batch cur, spare;
	uint64_t inflight_bytes;
	bool leader;			/* someone owns the write path */
	bool need_snapshot;		/* after open: chain is read-only */
	int broken;			/* layout lost: only a snapshot cures */
	uint64_t err_gen, fail_lsn;
	int fail_err;
	uint64_t flush_started, flush_done;

	bool snap;
	pthread_t snap_thread;
	int snap_err;
	uint64_t snap_user;

	struct mlog_stats st;
	struct mlog_open_info info;
};

/* ---- helpers ------------------------------------------------------------ */

static uint32_t rec_crc(const struct mlog_rechdr *h, const void *payload, uint32_t len)
{
	struct mlog_rechdr t = *h;

	t.crc = 0;
	return zf_crc32c(zf_crc32c(0, payload, len), &t, sizeof(t));
}

static uint32_t zhdr_crc(const struct mlog_zhdr *h)
{
	struct mlog_zhdr t = *h;

	t.crc = 0;
	return zf_crc32c(0, &t, sizeof(t));
}

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

static uint64_t zone_capB(uint64_t cap, uint32_t B) { return ZF_ALIGN_DOWN(cap, B); }

static bool zone_cap_ok(uint64_t capB, uint32_t B)
{
	return capB >= 2ull * B + ZF_ALIGN_UP(MAXREC + 16u, B);
}

/* Superblock sanity against the device it sits on. */
static bool sb_valid(const struct mlog_sb *sb, const struct zdev_geometry *geo)
{
	uint32_t B = sb->block_size;

	if (sb->version < 1 || sb->version > MLOG_SB_VERSION)
		return false;
	if (!is_pow2(B) || B < 512 || B < geo->block_size || B > MAX_BLOCK ||
	    B % geo->block_size)
		return false;
	if (sb->zone_size != geo->zone_size || sb->meta_count < 3)
		return false;
	if ((uint64_t)sb->meta_first + sb->meta_count > geo->nr_zones)
		return false;
	if (sb->meta_first < geo->nr_conv_zones)
		return false;
	if (sb->zone_capacity > sb->zone_size)
		return false;
	if (!memchr(sb->label, 0, sizeof(sb->label)))
		return false;
	return true;
}

/* 1 = valid header, 0 = not a header; *magic tells whether the magic matched. */
static bool zhdr_valid(const struct mlog_zhdr *h, const struct zdev_geometry *geo,
		       bool *magic)
{
	if (memcmp(h->magic, ZHDR_MAGIC, 8) != 0)
		return false;
	if (magic)
		*magic = true;
	if (zhdr_crc(h) != h->crc)
		return false;
	if (h->version != ZHDR_VERSION || h->hdr_size != sizeof(*h) ||
	    h->reserved != 0 || h->epoch == 0 || h->first_lsn == 0 ||
	    h->epoch == UINT64_MAX || h->first_lsn >= UINT64_MAX / 2)
		return false;
	if (!sb_valid(&h->sb, geo))
		return false;
	if (h->zone_seq >= geo->nr_zones)
		return false;
	return true;
}

/* Same on-disk geometry (the uuid may differ: chains are per uuid). */
static bool same_geometry(const struct mlog_sb *a, const struct mlog_sb *b)
{
	return a->block_size == b->block_size && a->meta_first == b->meta_first &&
	       a->meta_count == b->meta_count && a->zone_size == b->zone_size;
}

static void zone_from_report(struct mzone *z, const struct zdev_zone *r, uint32_t B)
{
	z->start = r->start;
	z->cap = r->capacity <= r->len ? r->capacity : r->len;
	z->capB = zone_capB(z->cap, B);
	z->cond = r->cond;
	z->wp = r->wp;
	if (z->wp < z->start)
		z->wp = z->start;
	if (z->wp > z->start + z->cap)
		z->wp = z->start + z->cap;
	if (r->cond == ZDEV_COND_EMPTY)
		z->wp = z->start;
	if (r->cond == ZDEV_COND_FULL)
		z->wp = z->start + z->cap;
}

/* Report `count` zones from `first`, looping over short reports. */
static int report_all(struct zdev *dev, uint32_t first, uint32_t count,
		      struct zdev_zone *out)
{
	uint32_t done = 0;

	while (done < count) {
		int rc = zdev_report_zones(dev, first + done, count - done, out + done);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return -EIO;
		done += (uint32_t)rc;
	}
	return 0;
}

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

static void batch_clear(struct batch *b)
{
	b->len = 0;
	b->nsegs = 0;
}

static void batch_free(struct batch *b)
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
static int ensure_room(struct mlog *m, size_t n)
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
 * ensured by ensure_room().  Lock held. */
static void put_bytes(struct mlog *m, const void *p, size_t n)
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

/* Where a record header may start at or after off (headers never straddle
 * a block boundary). */
static uint64_t hdr_pos(uint64_t off, uint32_t B)
{
	uint64_t r = B - off % B;

	return r < RECHDR ? off + r : off;
}

static const uint8_t zero_block[MAX_BLOCK];

/* Lay out one record at the tail; payload NULL means zeros.  pcrc is
 * zf_crc32c(0, payload, len).  Lock held, room ensured, fit checked. */
static void put_record(struct mlog *m, uint16_t type, const void *payload,
		       uint32_t len, uint32_t pcrc, bool consume)
{
	uint64_t pos = hdr_pos(m->tail_off, m->B);
	struct mlog_rechdr h = { .magic = REC_MAGIC, .type = type, .len = len,
			    .lsn = m->next_lsn };

	put_bytes(m, NULL, pos - m->tail_off);
	h.crc = zf_crc32c(pcrc, &h, sizeof(h));
	put_bytes(m, &h, sizeof(h));
	put_bytes(m, payload, len);
	put_bytes(m, NULL, ZF_ALIGN_UP(RECHDR + len, 8u) - (RECHDR + len));
	if (consume)
		m->next_lsn++;
}

static uint32_t count_role(const struct mlog *m, int role)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < m->nz; i++)
		n += m->z[i].role == role;
	return n;
}

static uint32_t count_borrowed(const struct mlog *m)
{
	uint32_t n = 0;

	for (uint32_t i = m->nmeta; i < m->nz; i++)
		n += m->z[i].role != Z_UNUSED;
	return n;
}

/* Bytes of records one log zone holds. */
static uint64_t zone_room(const struct mlog *m)
{
	uint64_t capB = zone_capB(m->sb.zone_capacity, m->B);

	return capB > 2ull * m->B ? capB - 2ull * m->B : m->B;
}

/* Zones the current epoch may grow to before a snapshot is due: as many
 * again as half its snapshot, and at least half the meta zones.  So the
 * log stays within 1.5 times its state (plus the meta zones), and a
 * snapshot is written at most once per half a state's worth of records. */
static uint32_t next_snapshot_zones(const struct mlog *m);

static uint32_t growth_allowed(const struct mlog *m)
{
	uint32_t a = ZF_MAX((m->snap_zones + 1) / 2, m->nmeta / 2);

	return ZF_MAX(a, 1u);
}

/* With a zone source: the chain grew by growth_allowed() since its
 * snapshot.  Without one the meta zones must hold the next snapshot beside
 * the chain: due once the chain takes half of them. */
static bool snapshot_due(const struct mlog *m)
{
	if (!m->src.borrow)
		return 2ull * m->chain_len >= m->nmeta;
	if (m->chain_len >= ZF_MIN(m->snap_zones, m->chain_len) + growth_allowed(m))
		return true;
	/* Also once a snapshot would give back as many zones as growth
	 * allows: after mass deletes the space is free at once, not after the
	 * log has grown by half of a state that is gone. */
	return m->state_bytes &&
	       m->chain_len >= next_snapshot_zones(m) + growth_allowed(m);
}

/* Zones the next snapshot takes.  With the caller's size of its state
 * (mlog_set_state_bytes): that, plus SNAP_BEGIN/END, in zones that each
 * lose a header and up to one record's bytes at their end (records never
 * cross zones).  Without it, an estimate: 5/4 of the bytes of the last
 * snapshot and of every record since (a snapshot describes each file with
 * a little more than the record that made it); it only grows until the
 * next snapshot. */
static uint32_t next_snapshot_zones(const struct mlog *m)
{
	uint64_t next, room = zone_room(m);

	if (m->state_bytes) {
		next = m->state_bytes(m->state_arg) + 4ull * MAXREC;
		room = room > 2ull * MAXREC ? room - MAXREC : room / 2;
	} else {
		next = (m->snap_bytes + m->put_bytes - m->snap_put) / 4 * 5;
	}
	return (uint32_t)ZF_MIN(next / room + 1, (uint64_t)m->zcap);
}

/* Borrowed zones the log may need at its peak: the chain it has, one more
 * zone to go on appending, and the next snapshot written beside it.
 * Whatever the meta zones hold is not borrowed. */
static uint32_t reserve_needed(const struct mlog *m)
{
	uint64_t peak = (uint64_t)m->chain_len + 1 + next_snapshot_zones(m);

	return peak > m->nmeta ? (uint32_t)ZF_MIN(peak - m->nmeta, (uint64_t)m->zcap)
			       : 0;
}

/* After a snapshot: can the state still grow?  It must always be possible
 * to write the next snapshot beside the chain (else nothing could ever be
 * compacted again): the zones the log could take (free meta zones but the
 * one kept for a snapshot's head, and the source's EMPTY zones) must hold
 * that snapshot and one zone to append to.  Lock held. */
static bool room_for_growth(const struct mlog *m)
{
	if (!m->src.avail)
		return true;
	uint64_t room = (uint64_t)m->src.avail(m->src_arg) + count_role(m, Z_FREE);
	uint64_t need = (uint64_t)next_snapshot_zones(m) + 1;

	return room >= need + 1;
}

/* Tell the zone source how many zones to keep for the log.  Lock held. */
static void tell_reserve(struct mlog *m)
{
	uint32_t r = reserve_needed(m);

	if (!m->src.reserve || r == m->reserve_told)
		return;
	m->reserve_told = r;
	m->src.reserve(m->src_arg, r);
}

/* Next free meta zone, round robin (spreads wear over the meta zones). */
static int pick_free(struct mlog *m, uint32_t *out)
{
	for (uint32_t k = 0; k < m->nmeta; k++) {
		uint32_t i = (m->alloc_cursor + k) % m->nmeta;
		if (m->z[i].role == Z_FREE) {
			m->alloc_cursor = (i + 1) % m->nmeta;
			*out = i;
			return 0;
		}
	}
	return -ENOSPC;
}

/* A slot for a borrowed zone: an unused one, or a new one.  Lock held. */
static int borrow_slot(struct mlog *m, uint32_t *out)
{
	for (uint32_t i = m->nmeta; i < m->nz; i++)
		if (m->z[i].role == Z_UNUSED) {
			*out = i;
			return 0;
		}
	if (m->nz >= m->zcap)
		return -ENOSPC;
	m->z[m->nz].role = Z_UNUSED;
	*out = m->nz++;
	return 0;
}

/* Fill slot si for device zone `zone` from a fresh zone report.  A zone
 * that cannot hold the log (conventional, too small, offline) fails with
 * -EIO. */
static int load_slot(struct mlog *m, uint32_t si, uint32_t zone)
{
	struct zdev_zone r;
	int rc = report_all(m->dev, zone, 1, &r);

	if (rc)
		return rc;
	struct mzone *z = &m->z[si];
	memset(z, 0, sizeof(*z));
	z->idx = zone;
	zone_from_report(z, &r, m->B);
	z->role = Z_UNUSED;
	if (!zdev_zone_seq(&r) || !zone_cap_ok(z->capB, m->B) ||
	    r.cond == ZDEV_COND_OFFLINE || r.cond == ZDEV_COND_READONLY)
		return -EIO;
	return 0;
}

/* Borrow an EMPTY data zone from the zone source into a slot.  Lock held
 * (the source takes only its own leaf lock and never waits). */
static int borrow_zone(struct mlog *m, uint32_t *out)
{
	uint32_t si, zone;
	int rc;

	if (!m->src.borrow)
		return -ENOSPC;
	rc = borrow_slot(m, &si);
	if (rc)
		return rc;
	/* Growth leaves room for the next snapshot beside the chain; the
	 * snapshot itself, and records that free space, may take the last
	 * zones (that is what the room is for). */
	uint32_t keep = m->snap ? 0 : next_snapshot_zones(m) + !m->append_frees;
	rc = m->src.borrow(m->src_arg, keep, &zone);
	if (rc)
		return rc;
	rc = load_slot(m, si, zone);
	if (!rc && m->z[si].cond != ZDEV_COND_EMPTY)
		rc = -EIO;
	if (rc) {
		zf_warn("mlog: borrowed zone %u is not usable (%d)", zone, rc);
		m->z[si].role = Z_UNUSED;
		if (m->src.give_back)
			m->src.give_back(m->src_arg, zone);
		return rc;
	}
	m->z[si].borrowed = true;
	m->st.zone_borrows++;
	*out = si;
	return 0;
}

/* The zone the chain continues in.  A snapshot's first zone is always a
 * meta zone (recovery finds epochs by the meta zones' headers), so outside a
 * snapshot one meta zone stays EMPTY; the other zones are meta zones while
 * there are, then borrowed ones.  Lock held. */
static int take_zone(struct mlog *m, bool head, uint32_t *out)
{
	uint32_t nfree = count_role(m, Z_FREE);

	if (head)
		return pick_free(m, out);
	if (nfree >= (m->snap ? 1u : 2u))
		return pick_free(m, out);
	return borrow_zone(m, out);
}

/* Lay out the header block of zone zi as zone_seq seq of epoch; the tail
 * moves there. */
static void put_zone_header(struct mlog *m, uint32_t zi, uint64_t epoch,
			    uint64_t seq)
{
	struct mlog_zhdr h;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, ZHDR_MAGIC, 8);
	h.version = ZHDR_VERSION;
	h.hdr_size = sizeof(h);
	h.epoch = epoch;
	h.zone_seq = seq;
	h.first_lsn = m->next_lsn;
	h.sb = m->sb;
	h.crc = zhdr_crc(&h);
	m->tail_zi = zi;
	m->tail_off = 0;
	put_bytes(m, &h, sizeof(h));
	put_bytes(m, NULL, m->B - sizeof(h));
}

/* End the tail zone with NEXT_ZONE and continue in a free zone.  Outside a
 * snapshot one free zone is kept in reserve.  Lock held, room ensured. */
static int next_zone(struct mlog *m)
{
	uint32_t nzi;
	int rc = take_zone(m, false, &nzi);

	if (rc)
		return rc;
	uint32_t pl[2] = { m->z[nzi].idx, 0 };
	put_record(m, REC_NEXT_ZONE, pl, sizeof(pl), zf_crc32c(0, pl, sizeof(pl)),
		   false);
	put_bytes(m, NULL, ZF_ALIGN_UP(m->tail_off, m->B) - m->tail_off);
	m->cur.segs[m->cur.nsegs - 1].closes = true;

	uint32_t *ch = m->snap ? m->nchain : m->chain;
	uint32_t *len = m->snap ? &m->nchain_len : &m->chain_len;
	m->z[nzi].role = m->snap ? Z_NEW : Z_CHAIN;
	ch[(*len)++] = nzi;
	put_zone_header(m, nzi, m->snap ? m->snap_epoch : m->epoch, *len - 1);
	if (!m->snap)
		tell_reserve(m);
	return 0;
}

/* Append one record (any type) at the tail.  Lock held. */
static int append_locked(struct mlog *m, uint16_t type, const void *payload,
			 uint32_t len, uint32_t pcrc)
{
	size_t rsz = ZF_ALIGN_UP(RECHDR + len, 8u);
	int rc = ensure_room(m, rsz + 3 * (size_t)m->B + 64);

	if (rc)
		return rc;
	const struct mzone *z = &m->z[m->tail_zi];
	if (hdr_pos(m->tail_off, m->B) + rsz > z->capB - m->B) {
		rc = next_zone(m);
		if (rc)
			return rc;
	}
	put_record(m, type, payload, len, pcrc, true);
	return 0;
}

/* Pad the tail to a block boundary (PAD record, or zeros when fewer than a
 * record header's bytes remain).  Lock held. */
static int pad_tail(struct mlog *m)
{
	uint64_t r = m->tail_off % m->B;

	if (!r || !m->cur.nsegs)
		return 0;
	r = m->B - r;
	int rc = ensure_room(m, r);
	if (rc)
		return rc;
	if (r >= RECHDR) {
		uint32_t n = (uint32_t)(r - RECHDR);
		put_record(m, REC_PAD, NULL, n, zf_crc32c(0, zero_block, n), false);
	} else {
		put_bytes(m, NULL, r);
	}
	return 0;
}

/* ---- device I/O (leader only) ------------------------------------------ */

static int finish_zone(struct mlog *m, struct mzone *z)
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

	if (report_all(m->dev, z->idx, 1, &r))
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
		if (m->z[i].need_finish && (rc = finish_zone(m, &m->z[i])))
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
			rc = finish_zone(m, z);
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
	/* put_bytes() continues the last segment in place: end the buffer
	 * exactly there. */
	if (nb.nsegs)
		nb.len = nb.segs[nb.nsegs - 1].boff + nb.segs[nb.nsegs - 1].len;
	batch_free(&m->cur);
	m->cur = nb;
	return 0;
}

static void recycle(struct mlog *m, struct batch *b)
{
	batch_clear(b);
	if (!m->spare.buf && !m->spare.segs && b->cap <= KEEP_BUF)
		m->spare = *b;
	else
		batch_free(b);
	memset(b, 0, sizeof(*b));
}

/* Take m->cur for writing; m->cur becomes the (empty) spare.  Lock held. */
static struct batch take_cur(struct mlog *m)
{
	struct batch b = m->cur;

	m->cur = m->spare;
	batch_clear(&m->cur);
	memset(&m->spare, 0, sizeof(m->spare));
	return b;
}

/* [flush,] write b [, flush].  Called and returns with m->lock held; drops it
 * for the I/O.  On error the unwritten rest of b goes back in front of
 * m->cur.  Caller is the leader. */
static int leader_io(struct mlog *m, struct batch *b, bool flushes)
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
	rc = pad_tail(m);
	if (!rc) {
		struct batch b = take_cur(m);
		uint64_t end_lsn = m->next_lsn;
		rc = leader_io(m, &b, true);
		recycle(m, &b);
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
	int rc = pad_tail(m);
	if (!rc && !batch_empty(&m->cur)) {
		struct batch b = take_cur(m);
		rc = leader_io(m, &b, false);
		recycle(m, &b);
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

/* ---- public write side --------------------------------------------------- */

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
				 : append_locked(m, type, payload, len, pcrc);
	else if (m->need_snapshot)
		rc = -EINVAL;
	else if (m->broken)
		rc = m->broken;
	else if (!(flags & MLOG_APPEND_FREES) && !room_for_growth(m)) {
		/* The state may grow only while the next snapshot fits beside
		 * the chain (checked at every record: the state grows inside a
		 * zone too).  When a snapshot would give zones back, the caller
		 * takes one (-ENOSPC with the state not full); else the state
		 * is full until records that free space make room. */
		m->state_full = m->chain_len <= next_snapshot_zones(m);
		rc = -ENOSPC;
	} else {
		/* a growing record just found room; one that frees rechecks */
		m->state_full = (flags & MLOG_APPEND_FREES) && m->state_full &&
				!room_for_growth(m);
		m->append_frees = flags & MLOG_APPEND_FREES;
		rc = append_locked(m, type, payload, len, pcrc);
		m->append_frees = false;
		if (!rc)
			tell_reserve(m);	/* the data zones kept for the log follow the state */
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

bool mlog_should_snapshot(struct mlog *m)
{
	pthread_mutex_lock(&m->lock);
	bool r = !m->ro && !m->snap &&
		 (m->need_snapshot || m->broken ||
		  (m->chain_len >= 2 && snapshot_due(m)));
	pthread_mutex_unlock(&m->lock);
	return r;
}

/* Reset every zone with role `role` (GARBAGE or NEW); leader only.  Zones
 * never written are freed without a reset.  A borrowed zone, once reset, is
 * given back to the zone source and its slot becomes unused. */
static void reset_role(struct mlog *m, int role)
{
	pthread_mutex_lock(&m->lock);
	uint32_t n = m->nz;
	pthread_mutex_unlock(&m->lock);
	for (uint32_t i = 0; i < n; i++) {
		struct mzone *z = &m->z[i];
		pthread_mutex_lock(&m->lock);
		bool hit = z->role == role;
		pthread_mutex_unlock(&m->lock);
		if (!hit)
			continue;
		int rc = 0;
		bool reset = !(z->cond == ZDEV_COND_EMPTY && z->wp == z->start);
		if (reset)
			rc = zdev_zone_reset(m->dev, z->idx);
		pthread_mutex_lock(&m->lock);
		if (!rc) {
			z->cond = ZDEV_COND_EMPTY;
			z->wp = z->start;
			z->need_finish = false;
			if (reset)
				m->st.zone_resets++;
			if (z->borrowed) {
				z->borrowed = false;
				z->role = Z_UNUSED;
				if (m->src.give_back)
					m->src.give_back(m->src_arg, z->idx);
			} else {
				z->role = Z_FREE;
			}
		} else {
			zf_warn("mlog: resetting log zone %u: %d", z->idx, rc);
			z->role = Z_GARBAGE;
		}
		pthread_mutex_unlock(&m->lock);
	}
}

struct snap_save {
	uint64_t epoch, next_lsn, durable_lsn, tail_off;
	uint32_t tail_zi;
	int broken;
	bool need_snapshot;
	struct batch stash;
};

/* Become the snapshot's leader: the pending records are set aside in sv
 * (the new epoch describes their effect; they come back if it fails).
 * Lock held on entry and exit. */
static void snap_enter(struct mlog *m, struct snap_save *sv)
{
	while (m->leader) {
		zf_will_block();
		pthread_cond_wait(&m->cond, &m->lock);
	}
	m->leader = true;
	m->snap = true;
	m->snap_thread = pthread_self();
	m->snap_err = 0;
	m->snap_user = 0;
	*sv = (struct snap_save){ .epoch = m->epoch, .next_lsn = m->next_lsn,
				  .durable_lsn = m->durable_lsn,
				  .tail_off = m->tail_off, .tail_zi = m->tail_zi,
				  .broken = m->broken,
				  .need_snapshot = m->need_snapshot,
				  .stash = take_cur(m) };
	m->broken = 0;
}

/* Garbage zones are reset first (room for the new epoch).  A recovered
 * chain may have two active zones (power loss between a NEXT_ZONE and the
 * finish); keep to two with the new epoch's zone.  It is never appended to
 * again, so finishing changes nothing it holds.  No lock held. */
static void snap_prepare_zones(struct mlog *m, bool recovered)
{
	reset_role(m, Z_GARBAGE);
	if (!recovered)
		return;
	for (uint32_t i = 0; i + 1 < m->chain_len; i++) {
		struct mzone *z = &m->z[m->chain[i]];
		if (z->cond == ZDEV_COND_IMP_OPEN || z->cond == ZDEV_COND_EXP_OPEN ||
		    z->cond == ZDEV_COND_CLOSED)
			(void)finish_zone(m, z);
	}
}

/* The new epoch's first zone and its SNAP_BEGIN.  Lock held. */
static int snap_begin(struct mlog *m)
{
	uint32_t zi;
	int rc = take_zone(m, true, &zi);

	if (!rc)
		rc = ensure_room(m, 3 * (size_t)m->B + 64);
	if (rc)
		return rc;
	m->snap_epoch = ++m->max_epoch;
	m->z[zi].role = Z_NEW;
	m->nchain[0] = zi;
	m->nchain_len = 1;
	put_zone_header(m, zi, m->snap_epoch, 0);
	uint64_t pl = m->snap_epoch;
	return append_locked(m, REC_SNAP_BEGIN, &pl, sizeof(pl),
			     zf_crc32c(0, &pl, sizeof(pl)));
}

/* SNAP_END, and the rest of the epoch written and flushed.  Lock held
 * (dropped for the I/O). */
static int snap_end(struct mlog *m)
{
	int rc = m->snap_err;

	if (!rc) {
		uint64_t pl[2] = { m->snap_epoch, m->snap_user };
		rc = append_locked(m, REC_SNAP_END, pl, sizeof(pl),
				   zf_crc32c(0, pl, sizeof(pl)));
	}
	if (!rc)
		rc = pad_tail(m);
	if (!rc) {
		struct batch b = take_cur(m);
		rc = leader_io(m, &b, true);
		recycle(m, &b);
	}
	return rc;
}

/* The new epoch is durable: it is the log now; the old one is garbage
 * (reset by the caller).  Lock held. */
static void snap_commit(struct mlog *m, uint64_t put0, struct snap_save *sv)
{
	for (uint32_t i = 0; i < m->chain_len; i++)
		m->z[m->chain[i]].role = Z_GARBAGE;
	for (uint32_t i = 0; i < m->nchain_len; i++)
		m->z[m->nchain[i]].role = Z_CHAIN;
	uint32_t *t = m->chain;
	m->chain = m->nchain;
	m->chain_len = m->nchain_len;
	m->nchain = t;
	m->nchain_len = 0;
	m->epoch = m->snap_epoch;
	m->need_snapshot = false;
	m->broken = 0;
	m->durable_lsn = m->next_lsn;
	m->st.snapshots++;
	m->st.commits++;
	m->st.last_snapshot_bytes = m->put_bytes - put0;
	m->snap_bytes = m->put_bytes - put0;
	m->snap_put = m->put_bytes;
	m->snap_zones = m->chain_len;
	m->state_full = !room_for_growth(m);
	if (m->state_full)
		zf_warn("mlog: the metadata fills the device: until files are "
			"deleted, only records that free space are taken");
	bool nearly = !m->state_full && m->src.avail &&
		      m->src.avail(m->src_arg) + count_role(m, Z_FREE) <
		      2 * ((uint64_t)next_snapshot_zones(m) + 2);
	if (nearly && !m->nearly_full)	/* once each time it gets there */
		zf_warn("mlog: the metadata log is nearly full: room for %llu zones, the "
			"next snapshot needs %u; delete files to make room",
			(unsigned long long)(m->src.avail(m->src_arg) + count_role(m, Z_FREE)),
			next_snapshot_zones(m));
	m->nearly_full = nearly;
	tell_reserve(m);
	batch_free(&sv->stash);
}

/* The snapshot failed: the old epoch stays the log, the records set aside
 * are pending again, the new epoch's zones are reset.  Lock held (dropped
 * for the resets). */
static void snap_abort(struct mlog *m, int rc, struct snap_save *sv)
{
	zf_warn("mlog: snapshot of epoch %llu failed: %d",
		(unsigned long long)m->snap_epoch, rc);
	/* No room for it: growing appends fail at once until there is
	 * (rechecked at each), rather than each trying a snapshot. */
	if (rc == -ENOSPC && m->src.avail)
		m->state_full = true;
	batch_clear(&m->cur);
	pthread_mutex_unlock(&m->lock);
	reset_role(m, Z_NEW);
	pthread_mutex_lock(&m->lock);
	m->nchain_len = 0;
	m->epoch = sv->epoch;
	m->next_lsn = sv->next_lsn;
	m->durable_lsn = sv->durable_lsn;
	m->tail_off = sv->tail_off;
	m->tail_zi = sv->tail_zi;
	m->broken = sv->broken;
	m->need_snapshot = sv->need_snapshot;
	batch_free(&m->cur);
	m->cur = sv->stash;
}

int mlog_snapshot(struct mlog *m, mlog_emit_fn emit, void *arg)
{
	struct snap_save sv;
	int rc;

	if (!m)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	if (m->ro || m->snap) {
		rc = m->ro ? -EROFS : -EBUSY;
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	bool pre = !m->need_snapshot && !m->broken && m->durable_lsn < m->next_lsn;
	pthread_mutex_unlock(&m->lock);
	/* Commit what is pending so that the old epoch is complete if this
	 * snapshot fails.  If that commit fails, carry on: the new epoch covers
	 * those records; they are restored as pending if it fails too. */
	if (pre && (rc = mlog_commit(m)))
		zf_warn("mlog: commit before snapshot failed (%d), continuing", rc);

	pthread_mutex_lock(&m->lock);
	snap_enter(m, &sv);
	pthread_mutex_unlock(&m->lock);
	snap_prepare_zones(m, sv.need_snapshot);

	pthread_mutex_lock(&m->lock);
	uint64_t put0 = m->put_bytes;
	rc = snap_begin(m);
	pthread_mutex_unlock(&m->lock);
	if (!rc && emit)
		rc = emit(arg, m);
	pthread_mutex_lock(&m->lock);
	if (!rc)
		rc = snap_end(m);
	if (!rc) {
		snap_commit(m, put0, &sv);
		pthread_mutex_unlock(&m->lock);
		reset_role(m, Z_GARBAGE);
		pthread_mutex_lock(&m->lock);
	} else {
		snap_abort(m, rc, &sv);
	}
	m->snap = false;
	m->leader = false;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void mlog_get_stats(struct mlog *m, struct mlog_stats *st)
{
	pthread_mutex_lock(&m->lock);
	*st = m->st;
	st->epoch = m->epoch;
	st->next_lsn = m->next_lsn;
	st->zones_in_chain = m->chain_len;
	st->zones_empty = count_role(m, Z_FREE);
	st->zones_borrowed = count_borrowed(m);
	st->state_full = m->state_full;
	st->reserve_zones = reserve_needed(m);
	pthread_mutex_unlock(&m->lock);
}

void mlog_get_open_info(struct mlog *m, struct mlog_open_info *info)
{
	pthread_mutex_lock(&m->lock);
	*info = m->info;
	pthread_mutex_unlock(&m->lock);
}

void mlog_set_zone_source(struct mlog *m, const struct mlog_zone_source *src,
			  void *arg)
{
	pthread_mutex_lock(&m->lock);
	if (src)
		m->src = *src;
	else
		memset(&m->src, 0, sizeof(m->src));
	m->src_arg = arg;
	m->reserve_told = UINT32_MAX;
	if (!m->ro)
		tell_reserve(m);
	pthread_mutex_unlock(&m->lock);
}

void mlog_set_state_bytes(struct mlog *m, uint64_t (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&m->lock);
	m->state_bytes = fn;
	m->state_arg = arg;
	if (m->src.reserve && !m->ro)
		tell_reserve(m);
	pthread_mutex_unlock(&m->lock);
}

uint64_t mlog_record_bytes(uint32_t len)
{
	return ZF_ALIGN_UP(RECHDR + (uint64_t)len, 8u);
}

bool mlog_state_full(struct mlog *m)
{
	pthread_mutex_lock(&m->lock);
	bool r = m->state_full;
	pthread_mutex_unlock(&m->lock);
	return r;
}

uint32_t mlog_borrowed_zones(struct mlog *m, uint32_t *out, uint32_t max)
{
	uint32_t n = 0;

	pthread_mutex_lock(&m->lock);
	for (uint32_t i = m->nmeta; i < m->nz; i++)
		if (m->z[i].role != Z_UNUSED) {
			if (n < max)
				out[n] = m->z[i].idx;
			n++;
		}
	pthread_mutex_unlock(&m->lock);
	return n;
}

/* ---- setup / teardown ------------------------------------------------------ */

void mlog_close(struct mlog *m)
{
	if (!m)
		return;
	batch_free(&m->cur);
	batch_free(&m->spare);
	free(m->z);
	free(m->chain);
	free(m->nchain);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cond);
	free(m);
}

/* Allocate an mlog for sb's meta zones and load their zone reports. */
static int mlog_alloc(struct zdev *dev, const struct mlog_sb *sb, bool ro,
		      struct mlog **out)
{
	struct mlog *m = calloc(1, sizeof(*m));
	struct zdev_zone *rep = NULL;
	int rc = -ENOMEM;

	if (!m)
		return -ENOMEM;
	m->dev = dev;
	m->geo = zdev_geometry(dev);
	m->sb = *sb;
	m->B = sb->block_size;
	m->ro = ro;
	m->nz = m->nmeta = sb->meta_count;
	/* Every zone from the first meta zone on could end up in the log;
	 * untouched slots cost no memory (calloc of large sizes maps zero
	 * pages lazily). */
	m->zcap = m->geo->nr_zones > sb->meta_first ? m->geo->nr_zones - sb->meta_first
						    : m->nmeta;
	m->zcap = ZF_MAX(m->zcap, m->nmeta);
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	m->z = calloc(m->zcap, sizeof(*m->z));
	m->chain = calloc(m->zcap, sizeof(*m->chain));
	m->nchain = calloc(m->zcap, sizeof(*m->nchain));
	rep = calloc(m->nz, sizeof(*rep));
	if (!m->z || !m->chain || !m->nchain || !rep)
		goto fail;
	rc = report_all(dev, sb->meta_first, m->nz, rep);
	if (rc)
		goto fail;
	for (uint32_t i = 0; i < m->nz; i++) {
		struct mzone *z = &m->z[i];
		z->idx = sb->meta_first + i;
		zone_from_report(z, &rep[i], m->B);
		if (!zdev_zone_seq(&rep[i]) || !zone_cap_ok(z->capB, m->B) ||
		    rep[i].cond == ZDEV_COND_OFFLINE)
			z->role = Z_BAD;
		else if (rep[i].cond == ZDEV_COND_EMPTY)
			z->role = Z_FREE;
		else
			z->role = Z_GARBAGE;
	}
	free(rep);
	m->next_lsn = m->durable_lsn = 1;
	m->need_snapshot = !ro;
	*out = m;
	return 0;
fail:
	free(rep);
	mlog_close(m);
	return rc;
}

int mlog_format(struct zdev *dev, const struct mlog_sb *sb)
{
	struct mlog *m;
	int rc;

	if (!dev || !sb || !sb_valid(sb, zdev_geometry(dev)))
		return -EINVAL;
	rc = mlog_alloc(dev, sb, false, &m);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < m->nz; i++) {
		struct mzone *z = &m->z[i];
		if (z->role == Z_BAD) {
			zf_err("mlog: meta zone %u is not usable (conventional, "
			       "offline or capacity %llu too small for block "
			       "size %u)", z->idx, (unsigned long long)z->cap, m->B);
			mlog_close(m);
			return -EINVAL;
		}
		rc = zdev_zone_reset(dev, z->idx);
		if (rc) {
			mlog_close(m);
			return rc;
		}
		z->role = Z_FREE;
		z->cond = ZDEV_COND_EMPTY;
		z->wp = z->start;
	}
	rc = mlog_snapshot(m, NULL, NULL);
	mlog_close(m);
	return rc;
}

/* ---- reading ----------------------------------------------------------- */

struct mhdr {
	bool valid;	/* valid header of this file system */
	bool magic;	/* the magic matched (valid or not) */
	bool written;	/* zone not empty */
	struct mlog_zhdr h;
};

/* Read the first device block of each zone in idx[0..n) into hdr[]. */
static int read_headers(struct zdev *dev, const struct zdev_zone *rep,
			uint32_t n, struct mhdr *out)
{
	const struct zdev_geometry *geo = zdev_geometry(dev);
	size_t rb = ZF_ALIGN_UP((size_t)geo->block_size, BUF_ALIGN);
	uint8_t *buf = zdev_buf_alloc(rb * PROBE_BATCH);
	struct zdev_req req[PROBE_BATCH];
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	for (uint32_t i = 0; i < n && !rc; i += PROBE_BATCH) {
		uint32_t k = ZF_MIN(n - i, PROBE_BATCH);
		for (uint32_t j = 0; j < k; j++)
			req[j] = (struct zdev_req){ .op = ZDEV_OP_READ,
						    .offset = rep[j + i].start,
						    .buf = buf + j * rb,
						    .len = geo->block_size };
		int got = zdev_io_batch(dev, req, k);
		if (got < 0) {
			rc = got;
			break;
		}
		for (uint32_t j = 0; j < k; j++) {
			if (req[j].result != (ssize_t)geo->block_size) {
				rc = req[j].result < 0 ? (int)req[j].result : -EIO;
				break;
			}
			memcpy(&out[i + j].h, buf + j * rb, sizeof(struct mlog_zhdr));
			out[i + j].written = true;
			out[i + j].valid = zhdr_valid(&out[i + j].h, geo,
						      &out[i + j].magic);
		}
	}
	zdev_buf_free(buf);
	return rc;
}

/* A zone worth reading a header from. */
static bool zone_has_data(const struct zdev_zone *r)
{
	return zdev_zone_seq(r) && r->cond != ZDEV_COND_EMPTY &&
	       r->cond != ZDEV_COND_OFFLINE &&
	       (r->wp > r->start || r->cond == ZDEV_COND_FULL ||
		r->cond == ZDEV_COND_READONLY);
}

/* Scan zones in index order for the first valid header lying inside the meta
 * range its own superblock describes. */
static int scan_for_sb(struct zdev *dev, struct mlog_sb *ref)
{
	const struct zdev_geometry *geo = zdev_geometry(dev);
	const uint32_t chunk = 1024;
	struct zdev_zone *rep = malloc(chunk * sizeof(*rep));
	struct zdev_zone *cand = calloc(chunk, sizeof(*cand));
	struct mhdr *hd = malloc(chunk * sizeof(*hd));
	uint32_t *cidx = malloc(chunk * sizeof(*cidx));
	bool magic = false;
	int rc = -ENOMEM;

	if (!rep || !cand || !hd || !cidx)
		goto out;
	for (uint32_t first = 0; first < geo->nr_zones; first += chunk) {
		uint32_t n = ZF_MIN(chunk, geo->nr_zones - first), nc = 0;
		rc = report_all(dev, first, n, rep);
		if (rc)
			goto out;
		for (uint32_t i = 0; i < n; i++)
			if (zone_has_data(&rep[i])) {
				cidx[nc] = first + i;
				cand[nc++] = rep[i];
			}
		memset(hd, 0, nc * sizeof(*hd));
		rc = read_headers(dev, cand, nc, hd);
		if (rc)
			goto out;
		for (uint32_t i = 0; i < nc; i++) {
			magic |= hd[i].magic;
			const struct mlog_sb *sb = &hd[i].h.sb;
			if (hd[i].valid && cidx[i] >= sb->meta_first &&
			    cidx[i] - sb->meta_first < sb->meta_count) {
				*ref = *sb;
				rc = 0;
				goto out;
			}
		}
	}
	rc = magic ? -EUCLEAN : -ENODATA;
out:
	free(rep);
	free(cand);
	free(hd);
	free(cidx);
	return rc;
}

/* Headers of every meta zone of ref's range; hd[i].valid only for headers of
 * the same file system. */
static int load_meta(struct zdev *dev, const struct mlog_sb *ref,
		     struct zdev_zone *rep, struct mhdr *hd)
{
	uint32_t n = ref->meta_count, nc = 0;
	struct zdev_zone *cand = calloc(n, sizeof(*cand));
	uint32_t *map = malloc(n * sizeof(*map));
	struct mhdr *tmp = calloc(n, sizeof(*tmp));
	int rc = -ENOMEM;

	if (!cand || !map || !tmp)
		goto out;
	rc = report_all(dev, ref->meta_first, n, rep);
	if (rc)
		goto out;
	memset(hd, 0, n * sizeof(*hd));
	for (uint32_t i = 0; i < n; i++)
		if (zone_has_data(&rep[i])) {
			map[nc] = i;
			cand[nc++] = rep[i];
		} else if (rep[i].cond != ZDEV_COND_EMPTY) {
			hd[i].written = true;
		}
	rc = read_headers(dev, cand, nc, tmp);
	if (rc)
		goto out;
	for (uint32_t i = 0; i < nc; i++) {
		hd[map[i]] = tmp[i];
		if (hd[map[i]].valid && !same_geometry(&tmp[i].h.sb, ref))
			hd[map[i]].valid = false;
	}
out:
	free(cand);
	free(map);
	free(tmp);
	return rc;
}

int mlog_probe(struct zdev *dev, struct mlog_sb *sb)
{
	struct mlog_sb ref;
	int rc;

	if (!dev || !sb)
		return -EINVAL;
	rc = scan_for_sb(dev, &ref);
	if (rc)
		return rc;
	struct zdev_zone *rep = calloc(ref.meta_count, sizeof(*rep));
	struct mhdr *hd = calloc(ref.meta_count, sizeof(*hd));
	if (!rep || !hd) {
		rc = -ENOMEM;
		goto out;
	}
	rc = load_meta(dev, &ref, rep, hd);
	if (rc)
		goto out;
	/* The newest epoch's copy (they agree on everything but, in principle,
	 * the label). */
	*sb = ref;
	uint64_t best = 0;
	for (uint32_t i = 0; i < ref.meta_count; i++)
		if (hd[i].valid && hd[i].h.epoch > best) {
			best = hd[i].h.epoch;
			*sb = hd[i].h.sb;
		}
out:
	free(rep);
	free(hd);
	return rc;
}

/* Sliding read window over one zone. */
struct preader {
	struct zdev *dev;
	uint8_t *buf;
	uint64_t woff;		/* absolute offset of buf[0] */
	size_t wlen;
	uint32_t dblk;
};

/* Point *p at [off, off+n) (absolute); the caller guarantees off+n <= lim,
 * lim being device-block aligned and inside one zone. */
static int pr_get(struct preader *r, uint64_t off, size_t n, uint64_t lim,
		  const uint8_t **p)
{
	if (!(r->wlen && off >= r->woff && off + n <= r->woff + r->wlen)) {
		uint64_t s = ZF_ALIGN_DOWN(off, r->dblk);
		uint64_t e = ZF_MIN(s + READ_WINDOW, lim);
		if (e < off + n)
			return -EIO;
		ssize_t got = zdev_read(r->dev, s, r->buf, e - s);
		if (got != (ssize_t)(e - s))
			return got < 0 ? (int)got : -EIO;
		r->woff = s;
		r->wlen = e - s;
	}
	*p = r->buf + (off - r->woff);
	return 0;
}

/* Zone-relative end of what can hold records in zone z. */
static uint64_t readable_end(const struct mzone *z, uint32_t dblk)
{
	uint64_t e = 0;

	switch (z->cond) {
	case ZDEV_COND_FULL:
	case ZDEV_COND_READONLY:
		e = z->cap;
		break;
	case ZDEV_COND_IMP_OPEN:
	case ZDEV_COND_EXP_OPEN:
	case ZDEV_COND_CLOSED:
		e = z->wp - z->start;
		break;
	default:
		break;
	}
	return ZF_ALIGN_DOWN(ZF_MIN(e, z->capB), dblk);
}

struct pres {
	bool snap_end;
	uint32_t snap_zones;	/* zones up to and including SNAP_END's */
	uint64_t snap_bytes;	/* bytes from the chain's start to SNAP_END */
	uint64_t next_lsn;
	uint64_t user;
	uint32_t tail_state, tail_zone;
	uint64_t tail_off;
};

/* The zone a NEXT_ZONE in chain slot ci names: device zone `zone`, a meta
 * zone (header in hd[]) or a borrowed data zone (its header read now).  Its
 * header must continue the chain: same file system and epoch, zone_seq
 * ci + 1, first_lsn the next expected LSN, and the zone not yet in the
 * chain.  On success chain[ci + 1] is its slot and *n = ci + 2.  Returns 0,
 * 1 when the zone does not continue the chain, or a read error. */
static int resolve_next(struct mlog *m, uint32_t *chain, uint32_t *n, uint32_t ci,
			uint32_t zone, const struct mhdr *hd, uint64_t epoch,
			uint64_t expected)
{
	const struct mlog_zhdr *h0 = &hd[chain[0]].h;
	struct mhdr mh;
	const struct mlog_zhdr *h;
	uint32_t si;
	bool meta = zone >= m->sb.meta_first && zone - m->sb.meta_first < m->nmeta;

	if (ci + 1 < *n && m->z[chain[ci + 1]].idx == zone)
		return 0;	/* resolved by an earlier walk */
	for (uint32_t k = 0; k <= ci; k++)
		if (m->z[chain[k]].idx == zone)
			return 1;
	if (meta) {
		si = zone - m->sb.meta_first;
		if (!hd[si].valid || m->z[si].role == Z_BAD)
			return 1;
		h = &hd[si].h;
	} else {
		struct zdev_zone rep;
		int rc;

		if (zone >= m->geo->nr_zones || borrow_slot(m, &si))
			return 1;
		rc = report_all(m->dev, zone, 1, &rep);
		memset(&mh, 0, sizeof(mh));
		if (!rc && zone_has_data(&rep))
			rc = read_headers(m->dev, &rep, 1, &mh);
		if (rc)
			return rc;
		if (!mh.valid || !zone_cap_ok(zone_capB(ZF_MIN(rep.capacity, rep.len), m->B), m->B))
			return 1;
		memset(&m->z[si], 0, sizeof(m->z[si]));
		m->z[si].idx = zone;
		m->z[si].role = Z_UNUSED;
		zone_from_report(&m->z[si], &rep, m->B);
		h = &mh.h;
	}
	if (h->epoch != epoch || h->zone_seq != (uint64_t)ci + 1 ||
	    h->first_lsn != expected || memcmp(h->sb.uuid, h0->sb.uuid, 16) ||
	    !same_geometry(&h->sb, &h0->sb))
		return 1;
	if (!meta) {
		m->z[si].borrowed = true;
		m->z[si].role = Z_CHAIN;	/* the slot is taken */
	}
	chain[ci + 1] = si;
	*n = ci + 2;
	return 0;
}

/* The record at off (absolute; lim: the end of what the zone holds): its
 * header in *h, its payload at *pl.  0; 1 when it is not a valid record
 * with LSN `expected` (*state says how: torn or corrupt, or an LSN gap);
 * or a read error. */
static int read_record(struct preader *r, uint32_t B, uint64_t off, uint64_t lim,
		       uint64_t expected, struct mlog_rechdr *h, const uint8_t **pl,
		       uint32_t *state)
{
	const uint8_t *p = NULL;
	int rc = pr_get(r, off, RECHDR, lim, &p);

	if (rc)
		return rc;
	memcpy(h, p, sizeof(*h));
	*state = MLOG_TAIL_TORN;
	if (h->magic != REC_MAGIC || h->reserved)
		return 1;
	if (h->type < MLOG_REC_USER && (h->type < REC_PAD || h->type > REC_NEXT_ZONE))
		return 1;
	uint64_t maxlen = h->type == REC_PAD ? B - RECHDR : MLOG_MAX_PAYLOAD;
	if (h->len > maxlen || off + RECHDR + h->len > lim)
		return 1;
	rc = pr_get(r, off, RECHDR + h->len, lim, &p);
	if (rc)
		return rc;
	*pl = p + RECHDR;
	if (rec_crc(h, *pl, h->len) != h->crc)
		return 1;
	if (h->lsn != expected) {
		*state = MLOG_TAIL_LSN_GAP;
		return 1;
	}
	return 0;
}

/* Salvage (MLOG_OPEN_SALVAGE) and damage detection: the first valid
 * record after off in the zone (8-byte steps, header positions only) with
 * an LSN of at least `expected`: 0 and its offset and LSN, 1 when there is
 * none, or a read error. */
static int next_valid_record(struct preader *r, uint32_t B, uint64_t off, uint64_t lim,
			     uint64_t expected, uint64_t *at, uint64_t *lsn)
{
	for (uint64_t o = hdr_pos(ZF_ALIGN_UP(off + 8, 8u), B); o + RECHDR <= lim;
	     o = hdr_pos(o + 8, B)) {
		const uint8_t *p = NULL, *pl;
		struct mlog_rechdr h;
		uint32_t state;
		int rc = pr_get(r, o, RECHDR, lim, &p);
		if (rc)
			return rc;
		memcpy(&h, p, sizeof(h));
		if (h.magic != REC_MAGIC || h.lsn < expected)
			continue;
		rc = read_record(r, B, o, lim, h.lsn, &h, &pl, &state);
		if (rc <= 0) {
			*at = o;
			*lsn = h.lsn;
			return rc;
		}
	}
	return 1;
}

/* Walk an epoch's chain (slots chain[0..*n), meta headers hd[]), following
 * each NEXT_ZONE to the zone it names (resolve_next: chain and *n grow),
 * calling fn for user records (fn NULL: validate only; stop_at_end: return
 * at SNAP_END).  Returns 0 (how it ended is in *res) or a read error or the
 * callback's error. */
static int parse_chain(struct mlog *m, struct preader *r, uint32_t *chain,
		       uint32_t *np, const struct mhdr *hd, uint64_t epoch,
		       bool stop_at_end, mlog_replay_fn fn, void *arg,
		       struct pres *res)
{
	uint32_t n = *np;
	uint64_t before = 0;	/* bytes of the zones before chain[ci] */
	const uint32_t B = m->B, dblk = r->dblk;
	uint64_t expected = hd[chain[0]].h.first_lsn, user = 0;
	bool begun = false, ended = false;
	uint32_t state = MLOG_TAIL_CLEAN;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	for (uint32_t ci = 0; ci < n; ci++) {
		const struct mzone *z = &m->z[chain[ci]];
		uint64_t lim = z->start + readable_end(z, dblk);
		uint64_t off = z->start + B;
		r->wlen = 0;
		for (;;) {
			off = z->start + hdr_pos(off - z->start, B);
			res->tail_zone = z->idx;
			res->tail_off = off - z->start;
			if (off + RECHDR > lim) {
				state = MLOG_TAIL_CLEAN;
				goto out;
			}
			const uint8_t *pl;
			struct mlog_rechdr h;
			rc = read_record(r, B, off, lim, expected, &h, &pl, &state);
			if (rc == 1 && m->salvage) {
				uint64_t at, lsn;
				rc = next_valid_record(r, B, off, lim, expected, &at, &lsn);
				if (rc == 0) {	/* skip the damaged stretch */
					m->info.salvage_skips++;
					off = at;
					expected = lsn;
					continue;
				}
			}
			if (rc) {
				rc = rc < 0 ? rc : 0;
				goto out;
			}
			state = MLOG_TAIL_TORN;
			bool next = false;
			uint64_t v[2];
			switch (h.type) {
			case REC_PAD:
				if ((off - z->start + RECHDR + h.len) % B)
					goto out;
				break;
			case REC_NEXT_ZONE: {
				uint32_t nzi[2];
				if (h.len != sizeof(nzi) || !begun)
					goto out;
				memcpy(nzi, pl, sizeof(nzi));
				state = MLOG_TAIL_CHAIN;
				rc = resolve_next(m, chain, np, ci, nzi[0], hd, epoch,
						  expected);
				n = *np;
				if (rc) {
					rc = rc < 0 ? rc : 0;
					goto out;
				}
				before += off + RECHDR + h.len - z->start;
				next = true;
				break;
			}
			case REC_SNAP_BEGIN:
				if (begun || h.len != 8 || ci != 0 ||
				    off != z->start + B)
					goto out;
				memcpy(v, pl, 8);
				if (v[0] != epoch)
					goto out;
				begun = true;
				expected++;
				break;
			case REC_SNAP_END:
				if (!begun || ended || h.len != 16)
					goto out;
				memcpy(v, pl, 16);
				if (v[0] != epoch || (v[1] != user && !m->salvage))
					goto out;
				ended = true;
				expected++;
				res->snap_zones = ci + 1;
				res->snap_bytes = before + (off - z->start) + RECHDR + h.len;
				if (stop_at_end) {
					state = MLOG_TAIL_CLEAN;
					goto out;
				}
				break;
			default:
				if (!begun && !m->salvage)
					goto out;
				begun = true;
				if (fn) {
					rc = fn(arg, h.type, pl, h.len, h.lsn);
					if (rc < 0)
						goto out;
					rc = 0;
				}
				user++;
				expected++;
				break;
			}
			if (next)
				break;
			off += ZF_ALIGN_UP(RECHDR + h.len, 8u);
		}
	}
out:
	res->snap_end = ended;
	res->next_lsn = expected;
	res->user = user;
	res->tail_state = state;
	return rc;
}

/* What mlog_open reads before replaying: the meta zones' headers and the
 * chain of the epoch it chose. */
struct open_scan {
	struct mhdr *hd;	/* per meta zone */
	uint32_t *chain, clen;	/* slots, by zone_seq */
	uint64_t epoch;		/* 0: none found */
	struct preader r;
	struct pres res;
};

/* Load the meta zones' reports and headers into m and os->hd. */
static int open_load(struct mlog *m, const struct mlog_sb *ref, struct open_scan *os)
{
	struct zdev_zone *rep = calloc(m->nmeta, sizeof(*rep));
	int rc = rep ? load_meta(m->dev, ref, rep, os->hd) : -ENOMEM;

	for (uint32_t i = 0; !rc && i < m->nmeta; i++) {
		struct mhdr *h = &os->hd[i];
		zone_from_report(&m->z[i], &rep[i], m->B);
		if (h->valid && m->z[i].role == Z_BAD)
			h->valid = false;
		if (h->valid && h->h.epoch > m->max_epoch)
			m->max_epoch = h->h.epoch;
		if (h->written && !h->valid)
			m->info.bad_headers++;
	}
	free(rep);
	return rc;
}

/* Salvage: a meta zone with data whose header is lost gets one made from
 * its first record when that is a valid SNAP_BEGIN (epoch from it,
 * zone_seq 0, first_lsn its LSN, the superblock ref), so its chain can be
 * replayed.  Nothing is written: the repair's snapshot writes a new epoch. */
static int open_rebuild_headers(struct mlog *m, const struct mlog_sb *ref,
				struct open_scan *os)
{
	for (uint32_t i = 0; i < m->nmeta; i++) {
		struct mhdr *h = &os->hd[i];
		const struct mzone *z = &m->z[i];
		const uint8_t *p = NULL, *pl;
		struct mlog_rechdr rh;
		uint32_t state;
		uint64_t lim = z->start + readable_end(z, os->r.dblk), epoch;

		if (h->valid || !h->written || z->role == Z_BAD || z->start + m->B + RECHDR > lim)
			continue;
		os->r.wlen = 0;
		int rc = pr_get(&os->r, z->start + m->B, RECHDR, lim, &p);
		if (rc)
			return rc;
		memcpy(&rh, p, sizeof(rh));
		rc = read_record(&os->r, m->B, z->start + m->B, lim, rh.lsn, &rh, &pl, &state);
		if (rc < 0)
			return rc;
		if (rc || rh.type != REC_SNAP_BEGIN || rh.len != 8 || rh.lsn == 0)
			continue;
		memcpy(&epoch, pl, 8);
		if (epoch == 0 || epoch == UINT64_MAX)
			continue;
		memset(&h->h, 0, sizeof(h->h));
		memcpy(h->h.magic, ZHDR_MAGIC, 8);
		h->h.version = ZHDR_VERSION;
		h->h.hdr_size = sizeof(h->h);
		h->h.epoch = epoch;
		h->h.first_lsn = rh.lsn;
		h->h.sb = *ref;
		h->valid = h->magic = true;
		m->info.headers_rebuilt++;
		if (epoch > m->max_epoch)
			m->max_epoch = epoch;
	}
	os->r.wlen = 0;
	return 0;
}

/* Candidate chains start at a zone_seq 0 header in a meta zone and go on
 * in the zones their NEXT_ZONE records name (meta or borrowed data zones).
 * Newest epoch first (ties: lower zone first); the first whose chain
 * reaches SNAP_END wins (os->epoch; 0 when none does). */
static int open_pick_epoch(struct mlog *m, struct open_scan *os, bool salvage)
{
	bool *tried = calloc(m->nmeta, sizeof(*tried));
	uint32_t begun = UINT32_MAX;	/* newest chain whose SNAP_BEGIN is valid */
	int rc = 0;

	if (!tried)
		return -ENOMEM;
	for (;;) {
		uint32_t head = UINT32_MAX;
		for (uint32_t i = 0; i < m->nmeta; i++)
			if (os->hd[i].valid && !tried[i] && os->hd[i].h.zone_seq == 0 &&
			    (head == UINT32_MAX || os->hd[i].h.epoch > os->hd[head].h.epoch))
				head = i;
		if (head == UINT32_MAX)
			break;
		tried[head] = true;
		uint64_t e = os->hd[head].h.epoch;
		os->chain[0] = head;
		os->clen = 1;
		m->nz = m->nmeta;	/* forget slots a failed candidate took */
		rc = parse_chain(m, &os->r, os->chain, &os->clen, os->hd, e, true,
				 NULL, NULL, &os->res);
		if (rc)
			break;
		if (os->res.snap_end) {
			os->epoch = e;
			break;
		}
		zf_warn("mlog: epoch %llu (zone %u) is incomplete or corrupt, "
			"skipped", (unsigned long long)e, m->z[head].idx);
		m->info.epochs_skipped++;
		if (begun == UINT32_MAX && os->res.next_lsn > os->hd[head].h.first_lsn)
			begun = head;
	}
	/* Salvage (fs_repair.c): no epoch is complete; the newest that began
	 * is replayed up to its damage. */
	if (!rc && !os->epoch && salvage && begun != UINT32_MAX) {
		os->chain[0] = begun;
		os->clen = 1;
		m->nz = m->nmeta;
		rc = parse_chain(m, &os->r, os->chain, &os->clen, os->hd,
				 os->hd[begun].h.epoch, true, NULL, NULL, &os->res);
		if (!rc) {
			os->epoch = os->hd[begun].h.epoch;
			m->info.epoch_incomplete = true;
		}
	}
	free(tried);
	return rc;
}

/* After replay: the chain replayed is the log; m's state and open info. */
static void open_adopt(struct mlog *m, const struct open_scan *os, bool ro)
{
	const struct pres *res = &os->res;
	uint32_t clen = os->clen;

	if (res->tail_state != MLOG_TAIL_CLEAN)
		zf_warn("mlog: replay of epoch %llu stopped at zone %u +%llu "
			"(%s); later records are ignored",
			(unsigned long long)os->epoch, res->tail_zone,
			(unsigned long long)res->tail_off,
			res->tail_state == MLOG_TAIL_LSN_GAP ? "LSN gap" :
			res->tail_state == MLOG_TAIL_CHAIN ? "broken chain" :
			"torn or corrupt record");
	for (uint32_t i = 0; i < clen; i++)
		m->z[os->chain[i]].role = Z_CHAIN;
	/* Slots resolved past where replay stopped hold no record of the
	 * log: give them up (their zones are the zone source's garbage). */
	for (uint32_t i = m->nmeta; i < m->nz; i++)
		if (m->z[i].role != Z_CHAIN) {
			m->z[i].role = Z_UNUSED;
			m->z[i].borrowed = false;
		}
	memcpy(m->chain, os->chain, clen * sizeof(*os->chain));
	m->chain_len = clen;
	m->snap_zones = res->snap_zones;
	m->snap_bytes = res->snap_bytes;
	/* The records after the snapshot count for the next one's size;
	 * their bytes are not known exactly: whole zones, at most. */
	m->put_bytes = (uint64_t)(clen - ZF_MIN(clen, res->snap_zones)) * zone_room(m);
	m->snap_put = 0;
	m->epoch = os->epoch;
	m->next_lsn = m->durable_lsn = res->next_lsn;
	m->tail_zi = os->chain[clen - 1];
	m->sb = os->hd[os->chain[0]].h.sb;
	/* Version 2 chains may go on in borrowed data zones, which version 1
	 * readers cannot follow: every header written from now on says 2. */
	if (!ro)
		m->sb.version = MLOG_SB_VERSION;
	m->info.epoch = os->epoch;
	m->info.max_epoch = m->max_epoch;
	m->info.records_replayed = res->user;
	m->info.next_lsn = res->next_lsn;
	m->info.chain_zones = clen;
	m->info.garbage_zones = count_role(m, Z_GARBAGE);
	m->info.tail_state = res->tail_state;
	m->info.tail_zone = res->tail_zone;
	m->info.tail_offset = res->tail_off;
}

static int open_common(struct zdev *dev, unsigned int flags, mlog_replay_fn fn,
		       void *arg, const struct mlog_sb *hint, struct mlog_sb *sb,
		       struct mlog **out)
{
	struct mlog_sb ref;
	struct mlog *m = NULL;
	struct open_scan os = { .r = { .dev = dev } };
	bool ro = flags & MLOG_OPEN_READ_ONLY;
	int rc;

	if (!dev || !out)
		return -EINVAL;
	*out = NULL;
	rc = scan_for_sb(dev, &ref);
	int no_sb = rc;		/* every header lost: mkfs's layout, if salvaging */
	if (rc && rc != -ENOMEM && hint && (flags & MLOG_OPEN_SALVAGE)) {
		ref = *hint;
		rc = 0;
	}
	if (rc)
		return rc;
	rc = mlog_alloc(dev, &ref, ro, &m);
	if (rc)
		return rc;
	m->salvage = flags & MLOG_OPEN_SALVAGE;
	rc = -ENOMEM;
	os.hd = calloc(m->nmeta, sizeof(*os.hd));
	os.chain = calloc(m->zcap, sizeof(*os.chain));
	os.r.dblk = m->geo->block_size;
	os.r.buf = zdev_buf_alloc(READ_WINDOW);
	if (os.hd && os.chain && os.r.buf)
		rc = open_load(m, &ref, &os);
	if (!rc && m->salvage)
		rc = open_rebuild_headers(m, &ref, &os);
	if (!rc && no_sb && !m->info.headers_rebuilt)
		rc = no_sb;	/* nothing of a log here either */
	if (!rc)
		rc = open_pick_epoch(m, &os, flags & MLOG_OPEN_SALVAGE);
	if (!rc && !os.epoch)
		rc = -EUCLEAN;
	/* The superblock is known before the first record is replayed, so the
	 * callback may use it (the fs needs the block size to apply TRUNCATE). */
	if (!rc && sb)
		*sb = os.hd[os.chain[0]].h.sb;
	m->info.salvage_skips = 0;	/* the candidates' walks counted too */
	if (!rc)
		rc = parse_chain(m, &os.r, os.chain, &os.clen, os.hd, os.epoch, false,
				 fn, arg, &os.res);
	/* A stop before the written end of its zone with a valid record
	 * after it is damage, not a torn tail: a zone keeps a prefix of its
	 * writes (fs_repair.c reports it).  (A zone of the chain the walk
	 * does not reach is not: a crash may keep the next zone's start and
	 * lose the NEXT_ZONE record before it.) */
	if (!rc && (os.res.tail_state == MLOG_TAIL_TORN ||
		    os.res.tail_state == MLOG_TAIL_LSN_GAP)) {
		uint64_t at, lsn, zs = (uint64_t)os.res.tail_zone * m->geo->zone_size;
		uint64_t from = zs + os.res.tail_off;
		for (uint32_t i = 0; i < os.clen; i++) {
			const struct mzone *z = &m->z[os.chain[i]];
			/* a mount looks DAMAGE_SCAN bytes on (a damaged block or
			 * two, not a whole large zone of zeros); fsck the zone */
			uint64_t lim = z->start + readable_end(z, os.r.dblk);
			if (!m->salvage && lim - ZF_MIN(lim, from) > DAMAGE_SCAN)
				lim = ZF_ALIGN_DOWN(from + DAMAGE_SCAN, os.r.dblk);
			if (z->idx == os.res.tail_zone)
				m->info.valid_after_tail = next_valid_record(&os.r, m->B, from, lim,
					os.res.next_lsn, &at, &lsn) == 0;
		}
	}
	if (!rc) {
		open_adopt(m, &os, ro);
		if (sb)
			*sb = m->sb;
		*out = m;
	} else {
		mlog_close(m);
	}
	free(os.hd);
	free(os.chain);
	zdev_buf_free(os.r.buf);
	return rc;
}

int mlog_open(struct zdev *dev, unsigned int flags, mlog_replay_fn fn,
	      void *arg, struct mlog_sb *sb, struct mlog **out)
{
	return open_common(dev, flags, fn, arg, NULL, sb, out);
}

int mlog_open_hint(struct zdev *dev, unsigned int flags, mlog_replay_fn fn, void *arg,
		   const struct mlog_sb *hint, struct mlog_sb *sb, struct mlog **out)
{
	return open_common(dev, flags, fn, arg, hint, sb, out);
}
