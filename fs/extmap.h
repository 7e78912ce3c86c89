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
 * Thread safety: none; the owner (an inode) serialises access.
 * Complexity: lookup O(log n); set/punch O(log n + moved entries), where
 * an overwrite of exactly one extent moves none and a write into the middle
 * of one extent moves the entries after it once; extmap_bytes O(1).
 */
#ifndef ZONEFUSE_EXTMAP_H
#define ZONEFUSE_EXTMAP_H

#include <stddef.h>
#include <stdint.h>

struct extmap_ext {
	uint64_t off;	/* file offset, bytes */
	uint64_t len;	/* bytes */
	uint64_t dev;	/* device offset, bytes */
};

struct extmap {
	struct extmap_ext *v;
	size_t n, cap;
	uint64_t bytes;		/* sum of len over v[0..n) */
	uint64_t boundary;	/* device bytes; extents never merge across a
				 * multiple of it (zone size); 0 = no limit */
};

/* Called for every device range [dev, dev+len) that stops being mapped. */
typedef void (*extmap_drop_fn)(void *arg, uint64_t dev, uint64_t len);

void extmap_init(struct extmap *m);
void extmap_free(struct extmap *m);	/* no drop callbacks */

/* Room for `extra` more entries: 0 or -ENOMEM (map unchanged).  A set
 * needs at most 2 (it may split one extent in three), a punch at most 1
 * (it may split one in two); after extmap_reserve(m, 2) the next set or
 * punch cannot fail, so a caller that has to apply a change it already
 * logged reserves before it appends the record. */
int extmap_reserve(struct extmap *m, size_t extra);
/* Map [off, off+len) to [dev, dev+len). 0 or -ENOMEM (map unchanged). */
int extmap_set(struct extmap *m, uint64_t off, uint64_t len, uint64_t dev,
	       extmap_drop_fn drop, void *arg);
/* Unmap [off, off+len) (len may be UINT64_MAX - off). 0 or -ENOMEM. */
int extmap_punch(struct extmap *m, uint64_t off, uint64_t len,
		 extmap_drop_fn drop, void *arg);

/* Index of the first extent whose end is > off (m->n if none). */
size_t extmap_find(const struct extmap *m, uint64_t off);
/* Highest mapped file offset + 1 (0 when empty). */
uint64_t extmap_end(const struct extmap *m);
/* Total mapped bytes. */
uint64_t extmap_bytes(const struct extmap *m);

#endif
