/* fs_data — the write buffer's chunk, private to the fs core: owned by
 * fs_data.c (which has the design: staging, striped write-out, reads),
 * held by struct fs_inode (in->chunks); its functions (fs_data_*) are in
 * fs_internal.h.
 *
 * Purpose: a file's bytes not yet on the device, stripe_unit bytes of file
 * per chunk, so that whole chunks are written in file order.
 *
 * Invariants (fs_data_check tests them): a file's chunks are sorted by
 * idx, without duplicates; a chunk holds at least one page, and npresent
 * is the number of bits set in present; in->ncomplete counts the chunks
 * with every page present, in->buffered the bytes of their buffers
 * (cap * bs each).  A busy chunk belongs to the write-out in flight (at
 * most one per file): nothing changes or frees it until that ends.
 *
 * Thread safety: every field is [RW] (in->rw: shared to read, exclusive to
 * change).  The write-out reads its busy chunks without in->rw, which is
 * why they are read-only.  No lock of its own.
 */
#ifndef ZONEFUSE_FS_DATA_H
#define ZONEFUSE_FS_DATA_H

#include <stdbool.h>
#include <stdint.h>

struct fs_donor;

/* A write-buffer chunk: stripe_unit bytes of file.  Its pages live in one
 * contiguous aligned buffer that grows by powers of two up to the chunk
 * (small files stay small; a full chunk is written straight from it).
 * Every page in a chunk is newer than the device: a present page is one
 * still to be written. */
struct fs_chunk {
	uint64_t idx;			/* file offset / stripe_unit */
	uint64_t seq;			/* creation order (in->chunk_seq) */
	uint32_t npresent;		/* pages present */
	uint32_t cap;			/* page slots the buffer holds */
	uint32_t nslots;		/* slots handed out (<= cap) */
	uint8_t *buf;			/* cap * bs bytes: pages in slots */
	struct fs_donor *donor;		/* [RW] buf lies in this donated WRITE
					 * payload (one reference), or NULL:
					 * buf is the chunk's own */
	uint32_t *slot;			/* per page of the chunk: its slot in
					 * buf, if present (fs_data.c) */
	uint64_t *present;		/* bitmap over pages_per_chunk */
	bool busy;			/* [RW] in the write-out in flight:
					 * read-only until it ends (fs_data.c) */
};

#endif
