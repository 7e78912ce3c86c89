/* fs_copy — the share table, private to the fs core: owned by fs_copy.c,
 * held in struct fs (fs->share); its functions (fs_share_*) are in
 * fs_internal.h, the copy itself (fs_copy_file_range) in fs.h.
 *
 * Purpose: device blocks referenced by more than one extent (of one file
 * or several), after a copy_file_range shared them or the collector moved
 * a shared range.  Kept per data zone, only for zones that hold such
 * blocks, so unshared data costs one NULL pointer per zone.
 *
 * Invariants: a block's entry is its number of references beyond the
 * first; nshared[z] is the number of blocks of zone z whose entry is > 0,
 * shared_blocks their sum, extra_refs the sum of all entries.  Valid bytes
 * (zalloc) count every block once, added with the first reference and
 * subtracted with the last.  The table is not in the log: it is built from
 * the extent maps at mount (fs_share_rebuild), then kept up to date by the
 * extent maps' drop callback and the records that add references (COPY,
 * REMAP).
 *
 * Thread safety: the table's fields are [L] (fs->lock); the counters are
 * atomics, read by any thread.  No lock of its own: it sits under fs->lock
 * in the fs lock order (fs.h).
 */
#ifndef ZONEFUSE_FS_COPY_H
#define ZONEFUSE_FS_COPY_H

#include <stdint.h>

struct fs_share {
	uint16_t **refs;		/* per device zone: refs per block, or NULL */
	uint32_t *nshared;		/* per device zone: blocks whose refs > 0 */
	uint32_t nzones;		/* device zones (0 = not set up yet) */
	uint32_t zone_blocks;		/* blocks per zone */
	uint64_t zone_size;		/* bytes */
	uint64_t shared_blocks;		/* blocks with refs > 0 */
	uint64_t extra_refs;		/* sum of refs: blocks a copy did not write */
	/* counters since mount (any thread reads them) */
	_Atomic uint64_t copies;	/* fs_copy_file_range calls that copied bytes */
	_Atomic uint64_t copy_shared_bytes;	/* bytes given to copies by sharing */
	_Atomic uint64_t copy_written_bytes;	/* bytes copies wrote through the buffer */
	_Atomic uint64_t gc_shared_moves;	/* shared ranges the collector moved */
};

#endif
