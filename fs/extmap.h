/* extmap — a file's extent map: file byte ranges -> device byte ranges.
 *
 * Purpose: data is written out of place, so every file keeps a sorted list
 * of non-overlapping extents {file offset, length, device offset}.  Setting
 * a range replaces whatever was mapped there (overwrite); punching unmaps it
 * (truncate, hole punch).  Every device range that stops being referenced is
 * reported through a drop callback so the caller can account valid bytes.
 *
 * Invariants: extents sorted by off, non-overlapping, len > 0; adjacent
 * extents that are also adjacent on the device are merged, unless that
 * would cross a multiple of `boundary` on the device (a zone boundary).
 * Units: bytes.  Holes are simply not mapped.
 *
 * Layout: the extents live in blocks of at most EXTMAP_BLK, in order; an
 * index holds each block's end (the end of its last extent), so a lookup
 * is two bisections and a change moves at most one block's entries, not
 * the whole file's.  Blocks are never empty, except a map's only block.
 * A map of one block grows that block as it fills (most files have a few
 * extents and must stay small); a map of several has full-size blocks, a
 * full one splits in two halves, and two neighbours that fit in half a
 * block are merged, so a map of n extents has at most 4n/EXTMAP_BLK + 1
 * blocks.
 *
 * Thread safety: none; the owner (an inode) serialises access.  A cursor
 * is valid until the next change of the map.
 * Complexity: lookup O(log n); set/punch O(log n + EXTMAP_BLK), plus a
 * move of the index (n / EXTMAP_BLK entries) when a block splits or is
 * freed; extmap_bytes and extmap_count O(1).
 */
#ifndef ZONEFUSE_EXTMAP_H
#define ZONEFUSE_EXTMAP_H

#include <stddef.h>
#include <stdint.h>

#define EXTMAP_BLK 128u		/* extents in a full block */

struct extmap_ext {
	uint64_t off;	/* file offset, bytes */
	uint64_t len;	/* bytes */
	uint64_t dev;	/* device offset, bytes */
};

struct extmap_blk {
	uint32_t n, cap;		/* extents used / room for */
	struct extmap_blk *next;	/* in the spare list only */
	struct extmap_ext v[];		/* sorted by off */
};

/* Bytes of a full block: what one split allocates (calloc(1, this)). */
#define EXTMAP_BLK_BYTES (sizeof(struct extmap_blk) + EXTMAP_BLK * sizeof(struct extmap_ext))

struct extmap_node {
	uint64_t end;			/* blk's last extent's off + len, bytes (0: empty) */
	struct extmap_blk *blk;
};

struct extmap {
	struct extmap_node *idx;	/* nblk nodes when idxcap > 1, else `one` */
	struct extmap_node one;		/* the index of a map of at most one block */
	size_t nblk, idxcap;
	size_t n;			/* extents in all blocks */
	uint64_t bytes;			/* sum of len over all extents */
	uint64_t boundary;		/* device bytes; extents never merge across a
					 * multiple of it (zone size); 0 = no limit */
	struct extmap_blk *spare;	/* full-size blocks kept for splits */
	size_t nspare;
};

/* A position in a map: block and entry in it. */
struct extmap_cur {
	size_t b, i;
};

/* Called for every device range [dev, dev+len) that stops being mapped. */
typedef void (*extmap_drop_fn)(void *arg, uint64_t dev, uint64_t len);

void extmap_init(struct extmap *m);
void extmap_free(struct extmap *m);	/* no drop callbacks; keeps boundary */

/* Room for `extra` more extents: 0 or -ENOMEM (map unchanged).  A set
 * inserts at most 2 extents (it may split one in three), a punch at most 1
 * (it may split one in two); after extmap_reserve(m, k), sets and punches
 * that insert at most k extents in all cannot fail, so a caller that has
 * to apply a change it already logged reserves before it appends the
 * record.  It keeps the spare blocks those inserts may split into (at most
 * k, fewer for a map of few blocks) and frees any more than that, so no
 * other reserve of the same map may come between it and those changes. */
int extmap_reserve(struct extmap *m, size_t extra);
/* Map [off, off+len) to [dev, dev+len). 0 or -ENOMEM (map unchanged). */
int extmap_set(struct extmap *m, uint64_t off, uint64_t len, uint64_t dev,
	       extmap_drop_fn drop, void *arg);
/* Unmap [off, off+len) (len may be UINT64_MAX - off). 0 or -ENOMEM. */
int extmap_punch(struct extmap *m, uint64_t off, uint64_t len,
		 extmap_drop_fn drop, void *arg);

/* The first extent whose end is > off, and *c at it; NULL if none. */
const struct extmap_ext *extmap_seek(const struct extmap *m, uint64_t off,
				     struct extmap_cur *c);
/* The extent after *c's, and *c at it; NULL at the end. */
const struct extmap_ext *extmap_next(const struct extmap *m, struct extmap_cur *c);
/* The k-th extent (from 0), and *c at it; NULL if k >= count.  O(blocks). */
const struct extmap_ext *extmap_nth(const struct extmap *m, size_t k, struct extmap_cur *c);
/* Highest mapped file offset + 1 (0 when empty). */
uint64_t extmap_end(const struct extmap *m);
/* Total mapped bytes. */
uint64_t extmap_bytes(const struct extmap *m);
/* Number of extents. */
size_t extmap_count(const struct extmap *m);
/* The layout's own invariants (block keys, sizes, counts, order): 0 or
 * -EUCLEAN.  O(n); for tests. */
int extmap_check(const struct extmap *m);

#endif
