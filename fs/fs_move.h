/* fs_move — what the collector (gc/) needs from the file system: which
 * files own the bytes of a zone, and re-pointing their extents to a copy.
 *
 * Purpose: the collector is a layer above the fs (gc/gc.h).  It picks a
 * victim zone (zalloc), reads its live bytes and writes them elsewhere
 * (zdev, zalloc leases); only the fs knows which file each byte belongs to
 * and how a move is recorded.  This header is that part of the fs, public
 * to gc/ alone: no other layer includes it.
 *
 * The move protocol for one victim (the zone is pinned by zalloc_gc_pick,
 * so its bytes stay readable without any file lock):
 *   fs_move_owners()          every extent piece lying in the zone
 *   read, write the copy through zalloc_acquire_gc() leases (the caller)
 *   fs_move_repoint()         one file's pieces, or
 *   fs_move_repoint_shared()  bytes several extents share (copies)
 * A re-point logs the new extent first (the record can fail, nothing after
 * it can), counts the new bytes valid and drops the old ones, the order of
 * an ordinary write, so zalloc's reset-after-commit contract holds.  New
 * bytes no extent takes any more (the file changed meanwhile, or is gone)
 * are zalloc_discard()ed here.  The caller commits after the victim
 * (fs_commit), after which zalloc resets it.
 *
 * The collector's life: the collector registers itself once with
 * fs_set_collector() between fs_mount() and fs_start(); fs_start() calls
 * start() after the read-ahead pool and before the committer, and
 * fs_unmount() calls stop() first, before the committer stops and the
 * final commit (stop() is called also when start() never was).
 *
 * Units: bytes; device offsets are absolute.  Thread safety: every
 * function takes the locks it needs; call them with no fs lock held.  Lock
 * order inside: a file's rw lock (at most one, or several in ascending
 * inode order, each a timed try: a writer may hold its file's lock while
 * it waits for space, i.e. for the collector), then fs->lock, then
 * zalloc's.
 */
#ifndef ZONEFUSE_FS_MOVE_H
#define ZONEFUSE_FS_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fs.h"

struct zalloc;
struct zdev;

/* What the collector needs to know about the mounted fs (constant while
 * it is mounted). */
struct fs_move_info {
	struct zdev *dev;
	struct zalloc *za;
	uint32_t bs;			/* bytes: file system block */
	uint32_t data_first;		/* first data zone (index) */
	uint32_t data_count;		/* data zones */
	uint32_t gc_mbps;		/* fs_opts.gc_mbps: background copy rate */
	bool read_only;
};
void fs_move_info(struct fs *fs, struct fs_move_info *out);

/* Bytes in the write buffers now, not yet written (no locks). */
uint64_t fs_move_buffered(struct fs *fs);

/* A piece of a file's extent: file bytes [off, off+len) at device dev. */
struct fs_move_piece {
	uint64_t ino, off, len, dev;
};
/* Every piece of a regular file's extent in device [start, start+zsize)
 * (a zone), sorted by (ino, off); *out is malloc()ed (the caller frees
 * it).  0 or -ENOMEM. */
int fs_move_owners(struct fs *fs, uint64_t start, uint64_t zsize,
		   struct fs_move_piece **out, size_t *nout);

/* Bitmap over the data zones (bit i: zone data_first + i, `words` words):
 * the zones holding data of a dirty file whose rw lock someone holds now
 * (its writer may hold it while it waits for space: its data could not be
 * moved).  Never blocks on a file lock. */
void fs_move_busy_zones(struct fs *fs, uint64_t *skip, size_t words);

/* The lifetime class of file ino now (where its moved data goes), or
 * -ENOENT when it is gone. */
int fs_move_class(struct fs *fs, uint64_t ino);

/* A part of a move: file bytes [off, off+len) read from device `old`,
 * written again at device `new` (0: not written; the fs skips it).
 * buf_off is the caller's (where it holds the bytes); the fs ignores it. */
struct fs_move_part {
	uint64_t off, len, old, new;
	uint64_t buf_off;
};
/* Re-point the written parts of file ino whose extents still map to the
 * bytes read; discard the new bytes nothing takes.  Bytes re-pointed, or
 * -ETIMEDOUT / -EDEADLK when the file's rw lock could not be had (every
 * new byte discarded). */
int64_t fs_move_repoint(struct fs *fs, uint64_t ino, struct fs_move_part *parts,
			size_t np);
/* Re-point every sharer of device [pos, pos+w) among the pieces sp[0..np)
 * (sorted by dev), written again at nd, in one REMAP record; discard the
 * new bytes nobody takes.  Bytes re-pointed (counted once), -ETIMEDOUT /
 * -EDEADLK when a sharer's rw lock could not be had, or -errno (all new
 * bytes discarded). */
int64_t fs_move_repoint_shared(struct fs *fs, const struct fs_move_piece *sp,
			       size_t np, uint64_t pos, uint64_t w, uint64_t nd);

/* The fs's periodic work that runs on the collector's tick: reading what
 * the LSM stores appended to their MANIFESTs (exact levels,
 * fs_lifetime.c).  No locks held. */
void fs_move_tick(struct fs *fs);

/* The collector's life (see the top comment).  c stays the caller's and
 * must live until stop() was called; NULL unregisters. */
struct fs_collector {
	int (*start)(void *arg);	/* 0 or -errno: fs_start() fails */
	void (*stop)(void *arg);	/* also frees what start() or the
					 * registration took */
	void *arg;
};
void fs_set_collector(struct fs *fs, const struct fs_collector *c);
/* The collector registered, or NULL. */
const struct fs_collector *fs_get_collector(struct fs *fs);

#endif
