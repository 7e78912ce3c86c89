/* fuzz_common — shared by the libFuzzer targets and the seed generator.
 *
 * The targets parse a mutated emulated zoned device.  An input does not
 * hold the whole device (2.5 MiB, mostly zeros) but a list of zone
 * contents:
 *
 *   byte 0           flags: FZ_FIX_CRC recompute the CRCs of meta zone
 *                    headers and of the records behind them (so mutations
 *                    reach the semantic checks instead of dying at a CRC)
 *   then segments:   u8 zone, u8 zflags (FZ_FINISH: finish the zone after
 *                    writing), u16 blocks (4 KiB blocks written to the zone,
 *                    cut to its capacity), u16 n, n bytes of data (the first
 *                    n bytes of the zone; the rest of the blocks are zero)
 *
 * Geometry (FZ_ZONES zones of FZ_ZONE_SIZE, 4 KiB blocks) is fixed, so a
 * mutated input never changes the device, only its contents.  Every zone
 * not named by a segment is empty.
 */
#ifndef ZONEFUSE_FUZZ_COMMON_H
#define ZONEFUSE_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fs.h"
#include "zoned/zdev.h"

#define FZ_ZONES 10
#define FZ_ZONE_SIZE (256u << 10)
#define FZ_BLOCK 4096u
#define FZ_FIX_CRC 0x01
#define FZ_FINISH 0x01

/* The device for this process (created once in /dev/shm, or $TMPDIR);
 * quiet logging unless ZF_FUZZ_VERBOSE is set. */
struct zdev *fz_device(void);

/* Reset every zone and write the zones described by the input. */
void fz_load(struct zdev *dev, const uint8_t *data, size_t size);

/* Recompute header and record CRCs in one meta zone image of `len` bytes
 * (no-op unless it starts with a zone header). */
void fz_fix_crcs(uint8_t *zone, size_t len);

/* Dump the device's zones in the input format (flags byte included). */
size_t fz_dump(struct zdev *dev, uint8_t flags, uint8_t **out);

/* Mount options that fit the small zones. */
void fz_opts(struct fs_opts *o, bool read_only);

/* Walk the tree from the root (bounded), calling every read-only entry
 * point on every inode: lookup, getattr, readdir(plus), readlink,
 * list/getxattr, read, lseek, statfs.  Returns the number of inodes seen. */
unsigned fz_walk(struct fs *fs);

/* A small read-write workload on a mounted fs (creates, writes, fsyncs,
 * renames, truncates, xattrs, unlinks).  Errors are allowed. */
void fz_workload(struct fs *fs, uint32_t seed);

#endif
