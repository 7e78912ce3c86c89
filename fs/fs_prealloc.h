/* fs_prealloc — a file's fallocated, unwritten ranges, private to the fs
 * core: owned by fs_prealloc.c (which has the design); its functions
 * (fs_pa_*) are in fs_internal.h.
 *
 * Purpose: space fallocate(2) promised is held out of what other writers
 * may take, so that a later write into it cannot fail for space.
 *
 * State: per inode, struct fs_inode's pa (npa ranges of pacap) and
 * pa_bytes; per mount, fs->pa_bytes, the sum over every file.
 *
 * Invariants: a file's ranges are sorted, disjoint, block-aligned and
 * never cover a mapped or buffered block; in->pa_bytes is their sum.
 *
 * Thread safety: the ranges are [L+RW] (changed with fs->lock and in->rw,
 * read under either); fs->pa_bytes is atomic.  No lock of its own.
 * fs_pa_room is the only call that can fail (-ENOMEM): it comes before a
 * record is appended, so that the calls after it cannot.
 */
#ifndef ZONEFUSE_FS_PREALLOC_H
#define ZONEFUSE_FS_PREALLOC_H

#include <stdint.h>

/* A fallocated range not written yet, bytes. */
struct fs_pa { uint64_t off, len; };

#endif
