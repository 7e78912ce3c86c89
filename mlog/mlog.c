/* mlog.c — the metadata log's zone chain and life cycle: superblock
 * checks, the slots of the zones the log uses, taking the next zone of a
 * chain (a free meta zone, or a data zone borrowed from the zone source)
 * and continuing in it (NEXT_ZONE and the new zone's header), the reserve
 * the zone source keeps for the log, stats and settings, and alloc, close
 * and format.  Contract: mlog.h; on-disk format: mlog_format.h; state,
 * invariants and locking: mlog_priv.h.
 *
 * Invariants kept here: outside a snapshot one meta zone stays EMPTY, so a
 * snapshot can always start, and an epoch's first zone is a meta zone
 * (recovery finds epochs by the meta zones' headers); growth borrows data
 * zones only while the next snapshot still fits beside the chain.
 *
 * Thread safety: the public functions take m->lock; the ml_* chain helpers
 * are called with it held (mlog_priv.h says which need none).  The zone
 * source's callbacks are called with it held (lock order m->lock -> the
 * source's leaf lock).
 */
#include "mlog/mlog_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

uint32_t ml_zhdr_crc(const struct mlog_zhdr *h)
{
	struct mlog_zhdr t = *h;

	t.crc = 0;
	return zf_crc32c(0, &t, sizeof(t));
}

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* Superblock sanity against the device it sits on. */
bool ml_sb_valid(const struct mlog_sb *sb, const struct zdev_geometry *geo)
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

void ml_zone_from_report(struct mzone *z, const struct zdev_zone *r, uint32_t B)
{
	z->start = r->start;
	z->cap = r->capacity <= r->len ? r->capacity : r->len;
	z->capB = ml_zone_capB(z->cap, B);
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
int ml_report_all(struct zdev *dev, uint32_t first, uint32_t count,
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

/* ---- the zone chain ----------------------------------------------------- */

uint32_t ml_count_role(const struct mlog *m, int role)
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
uint64_t ml_zone_room(const struct mlog *m)
{
	uint64_t capB = ml_zone_capB(m->sb.zone_capacity, m->B);

	return capB > 2ull * m->B ? capB - 2ull * m->B : m->B;
}

/* Borrowed zones the log may need at its peak: the chain at its longest
 * in this epoch and one more zone to go on appending until the commit that
 * writes the snapshot, and that snapshot beside it.  Whatever the meta
 * zones hold is not borrowed.  The chain's whole growth is kept from the
 * start of the epoch, so the space the data may use (statfs) stays level
 * while the chain grows, and the log never finds its growth taken by data
 * written early in an epoch. */
static uint32_t reserve_needed(const struct mlog *m)
{
	uint64_t peak = ZF_MAX(ml_chain_peak(m), (uint64_t)m->chain_len) + 1 +
			ml_next_snapshot_zones(m);

	return peak > m->nmeta ? (uint32_t)ZF_MIN(peak - m->nmeta, (uint64_t)m->zcap)
			       : 0;
}

/* Tell the zone source how many zones to keep for the log.  Lock held. */
void ml_tell_reserve(struct mlog *m)
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
int ml_borrow_slot(struct mlog *m, uint32_t *out)
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
	int rc = ml_report_all(m->dev, zone, 1, &r);

	if (rc)
		return rc;
	struct mzone *z = &m->z[si];
	memset(z, 0, sizeof(*z));
	z->idx = zone;
	ml_zone_from_report(z, &r, m->B);
	z->role = Z_UNUSED;
	if (!zdev_zone_seq(&r) || !ml_zone_cap_ok(z->capB, m->B) ||
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
	rc = ml_borrow_slot(m, &si);
	if (rc)
		return rc;
	/* Growth leaves room for the next snapshot beside the chain; the
	 * snapshot itself, and records that free space, may take the last
	 * zones (that is what the room is for). */
	uint32_t keep = m->snap ? 0 : ml_next_snapshot_zones(m) + !m->append_frees;
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
int ml_take_zone(struct mlog *m, bool head, uint32_t *out)
{
	uint32_t nfree = ml_count_role(m, Z_FREE);

	if (head)
		return pick_free(m, out);
	if (nfree >= (m->snap ? 1u : 2u))
		return pick_free(m, out);
	return borrow_zone(m, out);
}

/* Lay out the header block of zone zi as zone_seq seq of epoch; the tail
 * moves there. */
void ml_put_zone_header(struct mlog *m, uint32_t zi, uint64_t epoch,
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
	h.crc = ml_zhdr_crc(&h);
	m->tail_zi = zi;
	m->tail_off = 0;
	ml_put_bytes(m, &h, sizeof(h));
	ml_put_bytes(m, NULL, m->B - sizeof(h));
}

/* End the tail zone with NEXT_ZONE and continue in a free zone.  Outside a
 * snapshot one free zone is kept in reserve.  Lock held, room ensured. */
int ml_next_zone(struct mlog *m)
{
	uint32_t nzi;
	int rc = ml_take_zone(m, false, &nzi);

	if (rc)
		return rc;
	uint32_t pl[2] = { m->z[nzi].idx, 0 };
	ml_put_record(m, REC_NEXT_ZONE, pl, sizeof(pl), zf_crc32c(0, pl, sizeof(pl)),
		      false);
	ml_put_bytes(m, NULL, ZF_ALIGN_UP(m->tail_off, m->B) - m->tail_off);
	m->cur.segs[m->cur.nsegs - 1].closes = true;

	uint32_t *ch = m->snap ? m->nchain : m->chain;
	uint32_t *len = m->snap ? &m->nchain_len : &m->chain_len;
	m->z[nzi].role = m->snap ? Z_NEW : Z_CHAIN;
	ch[(*len)++] = nzi;
	ml_put_zone_header(m, nzi, m->snap ? m->snap_epoch : m->epoch, *len - 1);
	if (!m->snap)
		ml_tell_reserve(m);
	return 0;
}

/* ---- stats and settings ------------------------------------------------- */

void mlog_get_stats(struct mlog *m, struct mlog_stats *st)
{
	pthread_mutex_lock(&m->lock);
	*st = m->st;
	st->epoch = m->epoch;
	st->next_lsn = m->next_lsn;
	st->zones_in_chain = m->chain_len;
	st->zones_empty = ml_count_role(m, Z_FREE);
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
		ml_tell_reserve(m);
	pthread_mutex_unlock(&m->lock);
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

/* ---- setup / teardown --------------------------------------------------- */

void mlog_close(struct mlog *m)
{
	if (!m)
		return;
	ml_batch_free(&m->cur);
	ml_batch_free(&m->spare);
	free(m->z);
	free(m->chain);
	free(m->nchain);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cond);
	free(m);
}

/* Allocate an mlog for sb's meta zones and load their zone reports. */
int ml_alloc(struct zdev *dev, const struct mlog_sb *sb, bool ro,
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
	rc = ml_report_all(dev, sb->meta_first, m->nz, rep);
	if (rc)
		goto fail;
	for (uint32_t i = 0; i < m->nz; i++) {
		struct mzone *z = &m->z[i];
		z->idx = sb->meta_first + i;
		ml_zone_from_report(z, &rep[i], m->B);
		if (!zdev_zone_seq(&rep[i]) || !ml_zone_cap_ok(z->capB, m->B) ||
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

	if (!dev || !sb || !ml_sb_valid(sb, zdev_geometry(dev)))
		return -EINVAL;
	rc = ml_alloc(dev, sb, false, &m);
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
