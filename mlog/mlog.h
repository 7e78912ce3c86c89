/* mlog — the metadata log: a superblock plus CRC'd records on rolling zones.
 *
 * Purpose: the file system's metadata (inodes, names, extents, xattrs) lives
 * in memory and is made durable as a stream of typed records appended to a
 * log kept in a set of "meta zones" [sb.meta_first, +sb.meta_count) and,
 * when the state outgrows them, in data zones borrowed from a zone source
 * (mlog_set_zone_source), so the state is limited by the device alone.
 * mlog knows nothing about what the records mean; it gives them an order
 * (LSN), a checksum, durability (mlog_commit) and compaction (mlog_snapshot).
 *
 * On disk:
 *   - Every meta zone in use starts with one header block carrying the magic
 *     "ZFMETA01", the superblock copy (struct mlog_sb), the epoch and the
 *     zone's position in the epoch's chain (zone_seq 0, 1, 2, ...), CRC'd.
 *     So the superblock is found in whichever meta zone is in use; there is
 *     no separate superblock zone.
 *   - Records follow the header, packed, each with a header
 *     {magic+type, payload length, LSN, CRC32C over header and payload}.
 *     Records never cross a zone; a record that does not fit ends the zone
 *     and the chain continues in the next zone (zone_seq + 1).  A commit pads
 *     to the block size, so every commit costs at least one block.
 *   - An epoch is a chain of meta zones that begins with a snapshot:
 *     SNAP_BEGIN, the records the caller emits to describe the whole state,
 *     SNAP_END; then ordinary records.  A new epoch (mlog_snapshot) is
 *     written into EMPTY meta zones; only after its SNAP_END is durable are
 *     the previous epoch's zones reset.  A snapshot may span several zones,
 *     so it works with small zones.
 *   - Recovery (mlog_open): read every meta zone header, take the highest
 *     epoch whose chain contains SNAP_END, replay its records in LSN order
 *     and stop at the first record that is torn, has a bad CRC or breaks LSN
 *     continuity.  Incomplete newer epochs and older epochs are garbage.
 *
 * Durability order: mlog_commit() first flushes the device (so data written
 * by the caller before the commit is durable before any record pointing at
 * it), then writes the pending records, then flushes again.
 *
 * Invariants:
 *   - at most two meta zones are active (open or closed, not full) at any
 *     time: the current one and, during a snapshot, the new epoch's one;
 *   - at least one meta zone is kept EMPTY outside a snapshot, so that a
 *     snapshot can always start (mlog_append/mlog_commit return -ENOSPC
 *     rather than use it; the caller then snapshots); an epoch's first
 *     zone is a meta zone, so recovery finds every epoch there;
 *   - with a zone source, the next snapshot always fits beside the chain
 *     (the growth rule of mlog_should_snapshot, the reserve the source
 *     keeps, and mlog_state_full), so the log never wedges;
 *   - a waiter in mlog_commit waits only for records that exist.
 *
 * Thread safety: mlog_append, mlog_commit, mlog_get_stats and the
 * predicates may be called from any thread concurrently; concurrent commits
 * are grouped (one device write serves every caller waiting).
 * mlog_snapshot must be called with the caller's own metadata lock held so
 * no other thread appends while the snapshot is emitted (mlog's internal
 * lock is taken and released around each call; it is a leaf lock).
 */
#ifndef ZONEFUSE_MLOG_H
#define ZONEFUSE_MLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "zoned/zdev.h"

#define MLOG_SB_VERSION 2	/* 2: chains may continue in borrowed data zones */
/* bytes: largest record payload.  An XATTR_SET of a value of
 * XATTR_SIZE_MAX (64 KiB) with a 255-byte name must fit (fs_xattr.c). */
#define MLOG_MAX_PAYLOAD (65u * 1024u)

/* Record types below MLOG_REC_USER are mlog's own and never replayed. */
#define MLOG_REC_USER 16

/* The superblock, copied into the header of every meta zone in use.
 * Fixed-size, little-endian on disk (we only run on little-endian hosts). */
struct mlog_sb {
	uint8_t uuid[16];
	uint32_t version;	/* MLOG_SB_VERSION */
	uint32_t block_size;	/* bytes: file system block size */
	uint64_t zone_size;	/* bytes, as the device reported at mkfs */
	uint64_t zone_capacity;	/* bytes */
	uint32_t nr_zones;
	uint32_t meta_first;	/* first meta zone (index) */
	uint32_t meta_count;	/* number of meta zones (>= 3) */
	uint32_t data_first;	/* first data zone (index) */
	uint32_t data_count;	/* number of data zones */
	uint32_t flags;		/* reserved, 0 */
	uint64_t created_sec;	/* time of mkfs, seconds since the epoch */
	char label[32];		/* NUL-terminated */
	uint8_t reserved[64];
};

struct mlog;

/* mkfs: reset every meta zone and write epoch 1 holding an empty snapshot.
 * Zone indices in sb must be valid for dev. */
int mlog_format(struct zdev *dev, const struct mlog_sb *sb);

/* Find the superblock without replaying anything.
 * Returns 0, -ENODATA if no meta zone header is found (not a zonefuse
 * device), -EUCLEAN if headers are present but none has a valid CRC. */
int mlog_probe(struct zdev *dev, struct mlog_sb *sb);

/* Called once per replayed record, in LSN order; a negative return aborts
 * mlog_open with that error. */
typedef int (*mlog_replay_fn)(void *arg, uint16_t type, const void *payload,
			      uint32_t len, uint64_t lsn);

enum mlog_open_flags {
	MLOG_OPEN_READ_ONLY = 1,	/* fsck: replay only, never write or reset */
	MLOG_OPEN_SALVAGE = 2,		/* fsck -y (fs_repair.c): skip damaged stretches
					 * of a chain (to the next valid record), accept
					 * a chain whose SNAP_BEGIN is lost, and when no
					 * epoch is complete replay the newest that began */
};

/* Recover: find the superblock (copied to *sb), replay the newest complete
 * epoch through fn.  In read-write mode the caller MUST call mlog_snapshot()
 * before the first mlog_append(): the new epoch cuts off any torn tail, and
 * garbage meta zones are reset then. */
int mlog_open(struct zdev *dev, unsigned int flags, mlog_replay_fn fn,
	      void *arg, struct mlog_sb *sb, struct mlog **out);
/* mlog_open for a salvage (flags with MLOG_OPEN_SALVAGE) whose zone
 * headers may all be lost: hint (the layout mkfs would choose) stands in
 * for the superblock when no valid header is found; a meta zone whose
 * header is lost but whose first record is a valid SNAP_BEGIN gets a
 * header made from it in memory (open info: headers_rebuilt). */
int mlog_open_hint(struct zdev *dev, unsigned int flags, mlog_replay_fn fn, void *arg,
		   const struct mlog_sb *hint, struct mlog_sb *sb, struct mlog **out);
void mlog_close(struct mlog *m);	/* does not commit */

/* Buffer one record (payload copied).  -E2BIG if len > MLOG_MAX_PAYLOAD,
 * -EINVAL if type < MLOG_REC_USER, -ENOSPC if the log has no room left
 * before a snapshot.  Records are durable only after mlog_commit(). */
int mlog_append(struct mlog *m, uint16_t type, const void *payload, uint32_t len);
/* The same with flags.  MLOG_APPEND_FREES: the record frees space (unlink,
 * truncate, ...): it may take the zones kept for the next snapshot, so that
 * space can always be freed on a full device. */
enum { MLOG_APPEND_FREES = 1 };
int mlog_append_flags(struct mlog *m, uint16_t type, const void *payload,
		      uint32_t len, unsigned int flags);

/* Make every record appended before this call durable (group commit).
 * Returns 0 or -errno; after an error the records stay pending. */
int mlog_commit(struct mlog *m);

/* Bytes appended but not yet committed. */
uint64_t mlog_pending_bytes(struct mlog *m);

/* True when a snapshot is due: after open, after a device error broke the
 * log, or when the chain has grown enough: by half its snapshot's zones (at
 * least half the meta zones) with a zone source, to half of the meta zones
 * without one. */
bool mlog_should_snapshot(struct mlog *m);

/* Start a new epoch: commit what is pending, write SNAP_BEGIN, call
 * emit(arg, m), which appends the records describing the whole state with
 * mlog_append(), write SNAP_END, commit, then reset the old epoch's zones.
 * On failure the old epoch stays the valid one and the new zones are reset.
 * Must be called with the caller's metadata lock held. */
typedef int (*mlog_emit_fn)(void *arg, struct mlog *m);
int mlog_snapshot(struct mlog *m, mlog_emit_fn emit, void *arg);

struct mlog_stats {
	uint64_t epoch;
	uint64_t next_lsn;
	uint64_t bytes_written;		/* bytes written to meta zones since open */
	uint64_t records;		/* records appended since open */
	uint64_t commits;		/* device commits since open */
	uint64_t snapshots;		/* snapshots since open */
	uint64_t last_snapshot_bytes;
	uint64_t zone_resets;
	uint32_t zones_in_chain;	/* zones used by the current epoch */
	uint32_t zones_empty;		/* meta zones EMPTY now */
	uint32_t zones_borrowed;	/* data zones the log holds now */
	uint32_t reserve_zones;		/* data zones the log may need at its peak */
	uint64_t zone_borrows;		/* data zones borrowed since open */
	bool state_full;		/* mlog_state_full() */
};
void mlog_get_stats(struct mlog *m, struct mlog_stats *st);

/* Growing beyond the meta zones.  The zone source lends EMPTY data zones
 * to the log and takes them back once reset.  Its calls are made with
 * mlog's lock held: they must take only leaf locks and never wait.
 *   borrow(arg, keep, &zone): 0 and an EMPTY zone now owned by the log, or
 *     -ENOSPC unless `keep` EMPTY zones would remain after it;
 *   give_back(arg, zone): the zone is EMPTY again and the source's;
 *   reserve(arg, n): keep EMPTY zones so that the log can hold n borrowed
 *     zones at once (those it holds included); called when n changes;
 *   avail(arg): how many EMPTY zones it could lend now.
 * After each snapshot the log checks that the next one would still fit
 * beside it; when not, the state is full (mlog_state_full): appends other
 * than MLOG_APPEND_FREES fail with -ENOSPC, and a snapshot would not help,
 * until records that free space have been taken and a snapshot shows room
 * again.
 * Without a source (mkfs, fsck, tests) the log lives in the meta zones
 * alone and -ENOSPC from mlog_append asks the caller for a snapshot. */
struct mlog_zone_source {
	int (*borrow)(void *arg, uint32_t keep, uint32_t *zone);
	void (*give_back)(void *arg, uint32_t zone);
	void (*reserve)(void *arg, uint32_t zones);
	uint32_t (*avail)(void *arg);	/* EMPTY zones it could lend now */
};
void mlog_set_zone_source(struct mlog *m, const struct mlog_zone_source *src,
			  void *arg);
/* Device indices of the data zones the log holds (up to max in out);
 * returns how many it holds.  After mlog_open: the replayed chain's. */
uint32_t mlog_borrowed_zones(struct mlog *m, uint32_t *out, uint32_t max);
bool mlog_state_full(struct mlog *m);
/* The caller's exact size of the records its next snapshot would emit
 * (bytes): the log then sizes the room it keeps for that snapshot by it,
 * so the room shrinks as the state does (deletes), and a snapshot is due
 * once it would give back the room growth allows.  Without it the log
 * estimates from what it wrote.  fn is called with mlog's lock held: it
 * must only read (an atomic counter). */
void mlog_set_state_bytes(struct mlog *m, uint64_t (*fn)(void *arg), void *arg);
/* Bytes a record of payload len takes in the log (header and alignment). */
uint64_t mlog_record_bytes(uint32_t len);

/* What mlog_open() found, for fsck and diagnostics. */
enum mlog_tail_state {
	MLOG_TAIL_CLEAN = 0,	/* replay ended exactly at the written end */
	MLOG_TAIL_TORN = 1,	/* stopped at a torn/corrupt record (bad magic,
				 * length or CRC) before the written end */
	MLOG_TAIL_LSN_GAP = 2,	/* stopped at a record whose LSN breaks continuity */
	MLOG_TAIL_CHAIN = 3,	/* NEXT_ZONE with no valid next zone in the chain */
};
struct mlog_open_info {
	uint64_t epoch;			/* epoch replayed */
	uint64_t max_epoch;		/* highest epoch seen in any valid header */
	uint64_t records_replayed;	/* user records delivered to the callback */
	uint64_t next_lsn;		/* LSN the next record will get */
	uint32_t chain_zones;		/* zones in the replayed epoch's chain */
	uint32_t garbage_zones;		/* non-empty meta zones outside that chain */
	uint32_t bad_headers;		/* non-empty meta zones without a valid header */
	uint32_t epochs_skipped;	/* newer epochs rejected (incomplete/corrupt) */
	uint32_t tail_state;		/* enum mlog_tail_state */
	uint32_t tail_zone;		/* device zone index where replay stopped */
	uint64_t tail_offset;		/* bytes from that zone's start */
	bool valid_after_tail;		/* a valid record follows where replay
					 * stopped in its zone: damage, not a
					 * torn tail */
	uint64_t salvage_skips;		/* damaged stretches skipped (SALVAGE) */
	bool epoch_incomplete;		/* SALVAGE: no epoch complete, the newest
					 * that began was replayed */
	uint32_t headers_rebuilt;	/* SALVAGE: lost zone headers made again
					 * from their zone's SNAP_BEGIN */
};
void mlog_get_open_info(struct mlog *m, struct mlog_open_info *info);

#endif
