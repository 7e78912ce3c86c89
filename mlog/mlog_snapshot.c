/* mlog_snapshot.c — snapshots and epochs: when a snapshot is due, how many
 * zones the next one takes (and so whether the state may still grow), and
 * writing one: a new epoch (SNAP_BEGIN, the caller's records describing the
 * whole state, SNAP_END) in EMPTY zones beside the old epoch, which is
 * reset only once the new one is durable.  Contract: mlog.h; on-disk
 * format: mlog_format.h; state, invariants and locking: mlog_priv.h.
 *
 * Invariants kept here: the next snapshot always fits beside the chain
 * (growth stops at ml_room_for_growth; the state is full when it would
 * not); a failed snapshot leaves the old epoch the log, with the records
 * it had set aside pending again.
 *
 * API corner cases (beyond mlog.h):
 *   - after a read-write mlog_open, mlog_should_snapshot returns true (and
 *     mlog_append -EINVAL) until the first mlog_snapshot;
 *   - read-only: mlog_snapshot -EROFS;
 *   - any mlog_append failure during emit fails the snapshot even if emit
 *     ignores it; nested mlog_snapshot returns -EBUSY.
 *
 * Thread safety: mlog_snapshot is called with the caller's metadata lock
 * held (lock order: that lock -> m->lock); the snapshot thread holds the
 * leader role for the whole snapshot and drops m->lock for the emit
 * callback and for device I/O.  The predicates take m->lock.
 */
#include "mlog/mlog_priv.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* ---- when a snapshot is due, and its size ------------------------------- */

/* Zones the current epoch may grow to before a snapshot is due: as many
 * again as half its snapshot, and at least half the meta zones.  So the
 * log stays within 1.5 times its state (plus the meta zones), and a
 * snapshot is written at most once per half a state's worth of records. */
static uint32_t growth_allowed(const struct mlog *m)
{
	uint32_t a = ZF_MAX((m->snap_zones + 1) / 2, m->nmeta / 2);

	return ZF_MAX(a, 1u);
}

/* Zones the chain reaches before its next snapshot is due (snapshot_due),
 * or has reached already. */
uint64_t ml_chain_peak(const struct mlog *m)
{
	uint64_t due = m->snap_zones;

	if (!m->src.borrow)
		return m->chain_len;
	if (m->state_bytes)
		due = ZF_MIN(due, (uint64_t)ml_next_snapshot_zones(m));
	return due + growth_allowed(m);
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
	       m->chain_len >= ml_next_snapshot_zones(m) + growth_allowed(m);
}

/* Zones the next snapshot takes.  With the caller's size of its state
 * (mlog_set_state_bytes): that, plus SNAP_BEGIN/END, in zones that each
 * lose a header and up to one record's bytes at their end (records never
 * cross zones).  Without it, an estimate: 5/4 of the bytes of the last
 * snapshot and of every record since (a snapshot describes each file with
 * a little more than the record that made it); it only grows until the
 * next snapshot. */
uint32_t ml_next_snapshot_zones(const struct mlog *m)
{
	uint64_t next, room = ml_zone_room(m);

	if (m->state_bytes) {
		next = m->state_bytes(m->state_arg) + 4ull * MAXREC;
		room = room > 2ull * MAXREC ? room - MAXREC : room / 2;
	} else {
		next = (m->snap_bytes + m->put_bytes - m->snap_put) / 4 * 5;
	}
	return (uint32_t)ZF_MIN(next / room + 1, (uint64_t)m->zcap);
}

/* After a snapshot: can the state still grow?  It must always be possible
 * to write the next snapshot beside the chain (else nothing could ever be
 * compacted again): the zones the log could take (free meta zones but the
 * one kept for a snapshot's head, and the source's EMPTY zones) must hold
 * that snapshot and one zone to append to.  Lock held. */
bool ml_room_for_growth(const struct mlog *m)
{
	if (!m->src.avail)
		return true;
	uint64_t room = (uint64_t)m->src.avail(m->src_arg) + ml_count_role(m, Z_FREE);
	uint64_t need = (uint64_t)ml_next_snapshot_zones(m) + 1;

	return room >= need + 1;
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

void mlog_set_state_bytes(struct mlog *m, uint64_t (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&m->lock);
	m->state_bytes = fn;
	m->state_arg = arg;
	if (m->src.reserve && !m->ro)
		ml_tell_reserve(m);
	pthread_mutex_unlock(&m->lock);
}

bool mlog_state_full(struct mlog *m)
{
	pthread_mutex_lock(&m->lock);
	bool r = m->state_full;
	pthread_mutex_unlock(&m->lock);
	return r;
}

/* ---- writing a snapshot ------------------------------------------------- */

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
				  .stash = ml_take_cur(m) };
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
			(void)ml_finish_zone(m, z);
	}
}

/* The new epoch's first zone and its SNAP_BEGIN.  Lock held. */
static int snap_begin(struct mlog *m)
{
	uint32_t zi;
	int rc = ml_take_zone(m, true, &zi);

	if (!rc)
		rc = ml_ensure_room(m, 3 * (size_t)m->B + 64);
	if (rc)
		return rc;
	m->snap_epoch = ++m->max_epoch;
	m->z[zi].role = Z_NEW;
	m->nchain[0] = zi;
	m->nchain_len = 1;
	ml_put_zone_header(m, zi, m->snap_epoch, 0);
	uint64_t pl = m->snap_epoch;
	return ml_append_locked(m, REC_SNAP_BEGIN, &pl, sizeof(pl),
				zf_crc32c(0, &pl, sizeof(pl)));
}

/* SNAP_END, and the rest of the epoch written and flushed.  Lock held
 * (dropped for the I/O). */
static int snap_end(struct mlog *m)
{
	int rc = m->snap_err;

	if (!rc) {
		uint64_t pl[2] = { m->snap_epoch, m->snap_user };
		rc = ml_append_locked(m, REC_SNAP_END, pl, sizeof(pl),
				      zf_crc32c(0, pl, sizeof(pl)));
	}
	if (!rc)
		rc = ml_pad_tail(m);
	if (!rc) {
		struct batch b = ml_take_cur(m);
		rc = ml_leader_io(m, &b, true);
		ml_recycle(m, &b);
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
	m->state_full = !ml_room_for_growth(m);
	if (m->state_full)
		zf_warn("mlog: the metadata fills the device: until files are "
			"deleted, only records that free space are taken");
	bool nearly = !m->state_full && m->src.avail &&
		      m->src.avail(m->src_arg) + ml_count_role(m, Z_FREE) <
		      2 * ((uint64_t)ml_next_snapshot_zones(m) + 2);
	if (nearly && !m->nearly_full)	/* once each time it gets there */
		zf_warn("mlog: the metadata log is nearly full: room for %llu zones, the "
			"next snapshot needs %u; delete files to make room",
			(unsigned long long)(m->src.avail(m->src_arg) + ml_count_role(m, Z_FREE)),
			ml_next_snapshot_zones(m));
	m->nearly_full = nearly;
	ml_tell_reserve(m);
	ml_batch_free(&sv->stash);
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
	ml_batch_clear(&m->cur);
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
	ml_batch_free(&m->cur);
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
