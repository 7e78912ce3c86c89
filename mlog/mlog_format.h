/* mlog_format — the metadata log's ON-DISK FORMAT (version 2), shared by
 * the log (mlog/) and the tools that build or damage logs on purpose (the
 * fuzzers).  The API is in mlog.h.
 * Version 1 is the same but for chains that leave the meta zones; it is
 * read as is, and the first snapshot of a read-write mount writes 2.
 *
 * Units: bytes.  Integers little-endian.  B = sb.block_size (the fs block,
 * a power of two in [max(512, device block), 64 KiB]).  Offsets below are
 * relative to the start of a meta zone.  capB = zone capacity rounded down
 * to B.  Meta zones must be sequential-write-required zones.
 *
 * Zone header: bytes [0, B) of every meta zone in use.  The first 216 bytes:
 *     0  char  magic[8]      "ZFMETA01"
 *     8  u32   version       1
 *    12  u32   hdr_size      216
 *    16  u64   epoch         >= 1
 *    24  u64   zone_seq      position in the epoch's chain, 0, 1, ...
 *    32  u64   first_lsn     LSN of the first LSN-consuming record that
 *                            follows (equals the next expected LSN)
 *    40  struct mlog_sb      168 bytes (see mlog.h)
 *   208  u32   crc           CRC32C (seed 0) of bytes [0, 216) with crc = 0
 *   212  u32   reserved      0
 *   The rest of the header block is zero (not checked).
 *
 * Records: from offset B on, packed, each starting at an 8-byte aligned
 * offset:
 *     0  u16   magic         0x4C4D ("ML")
 *     2  u16   type
 *     4  u32   len           payload bytes
 *     8  u64   lsn
 *    16  u32   crc           CRC32C of the payload (seed 0), continued over
 *                            the 24 header bytes with crc = 0:
 *                            crc32c(crc32c(0, payload, len), hdr0, 24)
 *    20  u32   reserved      0
 *    24  payload, then zero bytes up to the next multiple of 8.
 *   A record header never straddles a B boundary: when fewer than 24 bytes
 *   remain in the block (8 or 16, by alignment), those bytes are zero and
 *   the next record starts at the next block boundary.  Payloads may cross
 *   block boundaries.  Records never cross a zone; records other than
 *   NEXT_ZONE end at or before capB - B, so a NEXT_ZONE always fits.  A
 *   meta zone needs capB >= 2 B + roundup(24 + MLOG_MAX_PAYLOAD + 16, B)
 *   (76 KiB with B = 4 KiB); mlog_format refuses smaller zones.
 *
 * Types (< MLOG_REC_USER are internal and never replayed):
 *   1 PAD         fills the rest of a block at the end of a commit: it ends
 *                 exactly on a B boundary; len <= B - 24; payload zero.
 *   2 SNAP_BEGIN  payload {u64 epoch}; first record of an epoch.
 *   3 SNAP_END    payload {u64 epoch, u64 user records since SNAP_BEGIN}.
 *   4 NEXT_ZONE   payload {u32 next zone (device index), u32 0}; the rest of
 *                 the zone is unused (zero to the block end, then the zone
 *                 is finished); the chain continues in the zone named, a
 *                 meta zone or a data zone borrowed from the allocator,
 *                 whose header carries zone_seq + 1 of the same epoch.
 *   >= 16         user records.
 * LSNs: SNAP_BEGIN, SNAP_END and user records each consume one LSN
 * (consecutive within an epoch and across epochs).  PAD and NEXT_ZONE carry
 * the LSN the next consuming record will get and consume none.
 *
 * Recovery: the meta range (and B) come from the first valid header found
 * scanning non-empty sequential zones in index order (meta zones precede
 * data zones in practice).  A header is valid when magic, CRC, version,
 * hdr_size, reserved == 0, epoch >= 1, first_lsn >= 1, zone_seq <
 * the device's zone count and the superblock checks out: version 1 or 2,
 * block size as
 * above and a multiple of the device block, zone_size equal to the
 * device's, zone_capacity <= zone_size, meta_count >= 3, meta range inside
 * the device and after the conventional zones, label NUL-terminated.  Within the meta range,
 * valid headers of the same geometry are considered; each zone_seq 0 header
 * starts a candidate chain, which goes on in the zones its NEXT_ZONE
 * records name: each must carry a valid header of the same uuid, epoch and
 * geometry, zone_seq one more than the previous zone's, and appear in the
 * chain once.  An epoch's first zone is always a meta zone.
 * Candidates are tried newest epoch first (ties: lower zone first).  The
 * parser walks a chain checking magic, reserved == 0, type (internal types
 * 1-4 only), length bound (PAD <= B - 24, others <= MLOG_MAX_PAYLOAD, and
 * inside the zone's written part), CRC, LSN == expected, SNAP_BEGIN being
 * the first record at offset B of seq 0 with the chain's epoch, SNAP_END
 * once with matching epoch and count, PAD ending on a block boundary, and a
 * the next header's first_lsn.  The
 * first failure ends the log (mlog_get_open_info tells how).  The first
 * candidate in which SNAP_END is reached is replayed in full; every other
 * non-empty meta zone is garbage, reset by the next mlog_snapshot(); data
 * zones outside the chain are the allocator's (reset at its mount).
 *
 * Readable part of a zone: [0, wp) for open/closed zones, [0, capacity)
 * for FULL/READONLY ones, clipped to capB; offline and conventional zones
 * are never used.
 *
 * Write side: records are laid out at append time at their final device
 * position (pending segments = [zone, offset, bytes]), so a failed or
 * partial write only drops the prefix that reached the device.  Commits pad
 * with PAD/zero bytes to B and write each segment with 1 MiB writes; a zone
 * ended by NEXT_ZONE is finished right after its last write, before the
 * next zone is written, so at most one zone per epoch is active.  New zones
 * are taken round robin among the EMPTY meta zones, keeping one EMPTY for
 * the next snapshot's first zone; past that they are borrowed from the zone
 * source (mlog.h), and given back once reset.
 *
 */
#ifndef ZONEFUSE_MLOG_FORMAT_H
#define ZONEFUSE_MLOG_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "mlog/mlog.h"

#define MLOG_ZHDR_MAGIC "ZFMETA01"
#define MLOG_ZHDR_VERSION 1u
#define MLOG_REC_MAGIC 0x4C4Du
#define MLOG_RECHDR 24u			/* bytes of a record header */
#define MLOG_MAX_BLOCK (64u * 1024u)	/* largest block size */

/* Internal record types (below MLOG_REC_USER). */
enum { MLOG_REC_PAD = 1, MLOG_REC_SNAP_BEGIN = 2, MLOG_REC_SNAP_END = 3,
       MLOG_REC_NEXT_ZONE = 4 };

/* A zone header: the first bytes of block 0 of every log zone. */
struct mlog_zhdr {
	char magic[8];
	uint32_t version;
	uint32_t hdr_size;
	uint64_t epoch;
	uint64_t zone_seq;
	uint64_t first_lsn;
	struct mlog_sb sb;
	uint32_t crc;
	uint32_t reserved;
};

struct mlog_rechdr {
	uint16_t magic;
	uint16_t type;
	uint32_t len;
	uint64_t lsn;
	uint32_t crc;
	uint32_t reserved;
};

#define MLOG_ZHDR_SB_OFF 40u		/* offsetof(struct mlog_zhdr, sb) */
#define MLOG_ZHDR_CRC_OFF 208u		/* offsetof(struct mlog_zhdr, crc) */
#define MLOG_ZHDR_SIZE 216u		/* sizeof(struct mlog_zhdr) */
#define MLOG_RECHDR_CRC_OFF 16u		/* offsetof(struct mlog_rechdr, crc) */

_Static_assert(sizeof(struct mlog_sb) == 168, "mlog_sb layout");
_Static_assert(offsetof(struct mlog_zhdr, sb) == MLOG_ZHDR_SB_OFF, "zhdr layout");
_Static_assert(offsetof(struct mlog_zhdr, crc) == MLOG_ZHDR_CRC_OFF, "zhdr layout");
_Static_assert(sizeof(struct mlog_zhdr) == MLOG_ZHDR_SIZE, "zhdr layout");
_Static_assert(sizeof(struct mlog_rechdr) == MLOG_RECHDR, "rechdr layout");
_Static_assert(offsetof(struct mlog_rechdr, crc) == MLOG_RECHDR_CRC_OFF, "rechdr layout");

#endif
