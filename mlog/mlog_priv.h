/* mlog_priv.h — the metadata log's private state, shared by its files:
 *   mlog.c           superblock checks, the zone chain (slots; taking,
 *                    borrowing and continuing in zones; the zone source's
 *                    reserve), stats and settings, life cycle (alloc,
 *                    close, format);
 *   mlog_append.c    appending and committing: the pending batch, laying
 *                    records out at their device position, group commit,
 *                    the leader's device I/O;
 *   mlog_snapshot.c  snapshots and epochs: when one is due and how large
 *                    it is, writing a new epoch, retiring the old one;
 *   mlog_recover.c   recovery: probe, zone headers, walking and replaying
 *                    chains, open.
 * Nothing outside mlog/ includes this header (contract: mlog.h; on-disk
 * format: mlog_format.h).  Functions shared between these files are named
 * ml_*; their prototypes are grouped below by the file that defines them.
 *
 * Invariants (beyond mlog.h's):
 *   - slots never move: m->z is allocated once for every zone the log
 *     could hold (zcap), so a slot may be used without the lock by the
 *     thread that owns it;
 *   - the tail (tail_zi, tail_off) is where the next byte is laid out; the
 *     records in m->cur and in a batch being written lie before it, in
 *     order, at their final device position;
 *   - LSNs below durable_lsn are durable; next_lsn is the next one given.
 *
 * Locking: one mutex, m->lock, taken by every public function.  Fields of
 * struct mlog are under it unless marked:
 *   [const]   set before mlog_open or mlog_format hands m out, read-only
 *             after (mlog_open works on an m no other thread sees yet);
 *   leader only: touched only by the thread that holds the leader role,
 *             without the lock.
 * The leader role (m->leader, under the lock) owns the write path: one
 * thread at a time, a committer for a group-commit round or the snapshot
 * thread for a whole mlog_snapshot.  It takes the pending batch out of
 * m->cur (ml_take_cur) and writes it with the lock dropped (ml_leader_io);
 * other committers wait on m->cond for the round that carries their
 * records.  Device writes, flushes, finishes and resets run with the lock
 * dropped; the zone report of a newly borrowed zone runs with it held.
 * Lock order: the caller's metadata lock (held around mlog_snapshot) ->
 * m->lock -> the zone source's lock.  The zone source's callbacks and
 * state_bytes are called with m->lock held: they take only leaf locks and
 * never wait (mlog.h).
 */
#ifndef ZONEFUSE_MLOG_PRIV_H
#define ZONEFUSE_MLOG_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/zf_common.h"
#include "mlog/mlog.h"
#include "mlog/mlog_format.h"
#include "zoned/zdev.h"

#define ZHDR_MAGIC MLOG_ZHDR_MAGIC
#define ZHDR_VERSION MLOG_ZHDR_VERSION
#define REC_MAGIC MLOG_REC_MAGIC
#define RECHDR MLOG_RECHDR
#define MAXREC ZF_ALIGN_UP(RECHDR + MLOG_MAX_PAYLOAD, 8u)
#define MAX_BLOCK MLOG_MAX_BLOCK
#define BUF_ALIGN 4096u

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
	struct zdev *dev;		/* [const] */
	const struct zdev_geometry *geo;	/* [const] */
	struct mlog_sb sb;		/* [const] */
	uint32_t B;			/* [const] bytes: sb.block_size */
	bool ro;			/* [const] */
	bool salvage;			/* [const] MLOG_OPEN_SALVAGE: replay past
					 * damage */

	pthread_mutex_t lock;
	pthread_cond_t cond;

	struct mzone *z;		/* [const] zcap slots */
	uint32_t nz;			/* slots ever used (meta + borrowed); under lock */
	uint32_t nmeta, zcap;		/* [const] meta zones; slots allocated */
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

/* Zone capacity rounded down to the block size B (bytes). */
static inline uint64_t ml_zone_capB(uint64_t cap, uint32_t B)
{
	return ZF_ALIGN_DOWN(cap, B);
}

/* A zone can hold the log: its header block, the largest record and the
 * last block, kept for NEXT_ZONE (mlog_format.h). */
static inline bool ml_zone_cap_ok(uint64_t capB, uint32_t B)
{
	return capB >= 2ull * B + ZF_ALIGN_UP(MAXREC + 16u, B);
}

/* Where a record header may start at or after off (headers never straddle
 * a block boundary). */
static inline uint64_t ml_hdr_pos(uint64_t off, uint32_t B)
{
	uint64_t r = B - off % B;

	return r < RECHDR ? off + r : off;
}

/* mlog.c: checks, sizes and device helpers (no lock) */
uint32_t ml_zhdr_crc(const struct mlog_zhdr *h);
/* Superblock sanity against the device it sits on. */
bool ml_sb_valid(const struct mlog_sb *sb, const struct zdev_geometry *geo);
void ml_zone_from_report(struct mzone *z, const struct zdev_zone *r, uint32_t B);
int ml_report_all(struct zdev *dev, uint32_t first, uint32_t count,
		  struct zdev_zone *out);
uint64_t ml_zone_room(const struct mlog *m);	/* bytes of records a zone holds */
/* mlog.c: the zone chain (lock held) */
uint32_t ml_count_role(const struct mlog *m, int role);
void ml_tell_reserve(struct mlog *m);
int ml_borrow_slot(struct mlog *m, uint32_t *out);
int ml_take_zone(struct mlog *m, bool head, uint32_t *out);
void ml_put_zone_header(struct mlog *m, uint32_t zi, uint64_t epoch,
			uint64_t seq);
int ml_next_zone(struct mlog *m);
/* mlog.c: life cycle */
int ml_alloc(struct zdev *dev, const struct mlog_sb *sb, bool ro,
	     struct mlog **out);

/* mlog_append.c: batches and layout (lock held) */
void ml_batch_clear(struct batch *b);
void ml_batch_free(struct batch *b);
int ml_ensure_room(struct mlog *m, size_t n);
void ml_put_bytes(struct mlog *m, const void *p, size_t n);
void ml_put_record(struct mlog *m, uint16_t type, const void *payload,
		   uint32_t len, uint32_t pcrc, bool consume);
int ml_append_locked(struct mlog *m, uint16_t type, const void *payload,
		     uint32_t len, uint32_t pcrc);
int ml_pad_tail(struct mlog *m);
/* mlog_append.c: the leader's device I/O */
int ml_finish_zone(struct mlog *m, struct mzone *z);	/* leader only, no lock */
void ml_recycle(struct mlog *m, struct batch *b);	/* lock held */
struct batch ml_take_cur(struct mlog *m);		/* lock held */
/* Leader only; lock held on entry and exit, dropped for the I/O. */
int ml_leader_io(struct mlog *m, struct batch *b, bool flushes);

/* mlog_snapshot.c (lock held) */
uint32_t ml_next_snapshot_zones(const struct mlog *m);
uint64_t ml_chain_peak(const struct mlog *m);
bool ml_room_for_growth(const struct mlog *m);

#endif
