/* mlog_recover.c — recovery: find the superblock (mlog_probe), read the
 * meta zones' headers, walk each candidate epoch's chain through the zones
 * its NEXT_ZONE records name, pick the newest complete epoch and replay it
 * through the caller's callback (mlog_open); with MLOG_OPEN_SALVAGE, skip
 * damage and rebuild lost zone headers.  The rules are mlog_format.h's
 * "Recovery"; contract: mlog.h; state: mlog_priv.h.
 *
 * API corner cases (beyond mlog.h):
 *   - mlog_open fills *sb before the first replay callback (and again on
 *     success), so the callback may read the superblock (block size).
 *
 * Thread safety: mlog_probe and mlog_open touch only their own memory and
 * the device; mlog_open builds m before any other thread can see it and
 * takes no lock.  The replay callback runs on the caller's thread.
 */
#include "mlog/mlog_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define READ_WINDOW (1u << 20)		/* bytes per read while parsing */
#define PROBE_BATCH 32u
#define DAMAGE_SCAN (4u << 20)		/* bytes a mount reads past a torn tail
					 * for valid records (damage) */

/* ---- checks ------------------------------------------------------------- */

static uint32_t rec_crc(const struct mlog_rechdr *h, const void *payload, uint32_t len)
{
	struct mlog_rechdr t = *h;

	t.crc = 0;
	return zf_crc32c(zf_crc32c(0, payload, len), &t, sizeof(t));
}

/* 1 = valid header, 0 = not a header; *magic tells whether the magic matched. */
static bool zhdr_valid(const struct mlog_zhdr *h, const struct zdev_geometry *geo,
		       bool *magic)
{
	if (memcmp(h->magic, ZHDR_MAGIC, 8) != 0)
		return false;
	if (magic)
		*magic = true;
	if (ml_zhdr_crc(h) != h->crc)
		return false;
	if (h->version != ZHDR_VERSION || h->hdr_size != sizeof(*h) ||
	    h->reserved != 0 || h->epoch == 0 || h->first_lsn == 0 ||
	    h->epoch == UINT64_MAX || h->first_lsn >= UINT64_MAX / 2)
		return false;
	if (!ml_sb_valid(&h->sb, geo))
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

/* ---- reading headers ---------------------------------------------------- */

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
		rc = ml_report_all(dev, first, n, rep);
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
	rc = ml_report_all(dev, ref->meta_first, n, rep);
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

/* ---- walking a chain ---------------------------------------------------- */

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

		if (zone >= m->geo->nr_zones || ml_borrow_slot(m, &si))
			return 1;
		rc = ml_report_all(m->dev, zone, 1, &rep);
		memset(&mh, 0, sizeof(mh));
		if (!rc && zone_has_data(&rep))
			rc = read_headers(m->dev, &rep, 1, &mh);
		if (rc)
			return rc;
		if (!mh.valid ||
		    !ml_zone_cap_ok(ml_zone_capB(ZF_MIN(rep.capacity, rep.len), m->B), m->B))
			return 1;
		memset(&m->z[si], 0, sizeof(m->z[si]));
		m->z[si].idx = zone;
		m->z[si].role = Z_UNUSED;
		ml_zone_from_report(&m->z[si], &rep, m->B);
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
	for (uint64_t o = ml_hdr_pos(ZF_ALIGN_UP(off + 8, 8u), B); o + RECHDR <= lim;
	     o = ml_hdr_pos(o + 8, B)) {
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
			off = z->start + ml_hdr_pos(off - z->start, B);
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

/* ---- open --------------------------------------------------------------- */

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
		ml_zone_from_report(&m->z[i], &rep[i], m->B);
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
	m->put_bytes = (uint64_t)(clen - ZF_MIN(clen, res->snap_zones)) * ml_zone_room(m);
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
	m->info.garbage_zones = ml_count_role(m, Z_GARBAGE);
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
	rc = ml_alloc(dev, &ref, ro, &m);
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
