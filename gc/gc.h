/* gc — the garbage collector: a layer above the file system.
 *
 * Purpose: frees zones whose data is partly dead by moving their live
 * extents to zones of the same class.  The allocator (zonealloc/zalloc.h,
 * "garbage collection") keeps space for the collector, pins its victims
 * and holds the pure victim policy (zonealloc/zalloc_victim.h); writers
 * wait for space in the allocator too (zalloc_wait_room), which kicks the
 * collector through the callback the collector registers with it
 * (zalloc_set_gc).  What the collector needs from the fs -- a zone's
 * owners, re-pointing their extents -- is fs/fs_move.h.  Nothing below
 * calls into this layer by name.
 *
 * Life: gc_attach(fs), between fs_mount() and fs_start(), registers the
 * collector with the fs (fs_set_collector, a hook): fs_start() starts its
 * thread (not on a read-only fs) and fs_unmount() stops it first, before
 * the final commit, and frees it.  The fs keeps the order of its own
 * background work that way, and a caller cannot unmount under a running
 * collector.  The daemon attaches it (fusefs/main.c); tests that want it
 * do the same, or collect one victim at a time with gc_run_once().
 *
 * Stats: the collector's counters are the allocator's (zalloc_stats:
 * gc_runs, gc_bytes_written, gc_zones_emptied, gc_skipped_bytes, ...),
 * which fs_get_stats() reports.
 *
 * Thread safety: gc_attach and gc_run_once are called by the thread that
 * mounts and starts the fs, with no fs lock held.
 */
#ifndef ZONEFUSE_GC_H
#define ZONEFUSE_GC_H

#include "fs/fs.h"

/* Register the collector with fs (see above).  0, -EBUSY (one is
 * registered already), -ENOMEM. */
int gc_attach(struct fs *fs);

/* Collect one victim now, with no thread (tests): 1 collected, 0 none,
 * -EBUSY while the thread runs, -errno. */
int gc_run_once(struct fs *fs);

#endif
