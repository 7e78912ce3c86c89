/* fs_stats — observability: request latency counters and the text of the
 * virtual statistics xattrs (user.zonefuse.stats and user.zonefuse.zones on
 * the mount root).  The formats are documented in docs/stats.md; they are a
 * stable interface: keys are only ever added, never renamed or removed.
 *
 * Purpose: fs_xattr.c calls the renderers; fusefs calls fs_lat_record() for
 * every request it answers; zonefuse-stat and scripts parse the text.
 *
 * Costs: rendering never does data I/O and holds fs->lock only while it
 * copies what it needs (the per-zone file counts walk every extent map once,
 * O(extents), under fs->lock).  The meta zones' conditions and write
 * pointers come from zdev_report_zones() on those few zones (in memory on
 * the emulator; one REPORT ZONES command on a real device) until mlog
 * offers a per-zone accessor.
 *
 * Invariants: the latency counters are process-wide (one daemon serves one
 * mount) and only grow; a summary is a consistent-enough snapshot (each
 * counter is read atomically, not all of them at once).
 *
 * Thread safety: every function may be called from any thread.  Lock order:
 * the renderers take fs->lock, then (after dropping it) zalloc/mlog/zdev
 * internal locks; callers must not hold fs->lock.  fs_lat_record() takes no
 * lock (relaxed atomics).
 */
#ifndef ZONEFUSE_FS_STATS_H
#define ZONEFUSE_FS_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fs.h"

/* ---- request latency ---------------------------------------------------- */

/* Request kinds, as grouped in the stats (lat_<name>_*). */
enum fs_lat_op {
	FS_LAT_LOOKUP,		/* lookup */
	FS_LAT_GETATTR,		/* getattr */
	FS_LAT_SETATTR,		/* setattr (chmod, truncate, utimes...) */
	FS_LAT_READ,		/* read */
	FS_LAT_WRITE,		/* write */
	FS_LAT_FLUSH,		/* flush (close) */
	FS_LAT_FSYNC,		/* fsync, fsyncdir */
	FS_LAT_CREATE,		/* create, mknod, mkdir, symlink, link */
	FS_LAT_REMOVE,		/* unlink, rmdir */
	FS_LAT_RENAME,		/* rename */
	FS_LAT_OPEN,		/* open, opendir, release, releasedir */
	FS_LAT_READDIR,		/* readdir, readdirplus */
	FS_LAT_XATTR,		/* getxattr, setxattr, listxattr, removexattr */
	FS_LAT_OTHER,		/* everything else (statfs, fallocate, lseek...) */
	FS_LAT_NR
};

const char *fs_lat_op_name(unsigned int op);	/* "read"...; "?" if out of range */
/* Account one request of kind op that took ns nanoseconds. */
void fs_lat_record(unsigned int op, uint64_t ns);
/* Account one request that came over io_uring instead of /dev/fuse. */
void fs_lat_count_uring(void);
/* Account one wait of the zf loop's reader that began by polling
 * (fusefs.h, struct fusefs_poll): hit = a request came while it polled;
 * ns = nanoseconds spent polling. */
void fs_lat_count_poll(bool hit, uint64_t ns);
/* The counts of fs_lat_count_poll: waits a request ended while polling,
 * waits that slept after polling, nanoseconds polled in all. */
struct fs_poll_counts {
	uint64_t hits, misses, ns;
};
void fs_lat_get_poll(struct fs_poll_counts *out);
/* How the zf loop's reader served one request (fusefs/loop.c): itself,
 * start to end; itself until the handler was about to block, when it gave
 * the reading to another worker; or after giving the reading away at once. */
enum fs_serve { FS_SERVED_INLINE, FS_SERVED_UNTIL_BLOCK, FS_SERVED_HANDED_OFF, FS_SERVED_NR };
void fs_lat_count_serve(enum fs_serve how);

struct fs_lat_summary {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t max_ns;
	uint64_t p50_ns;	/* from a histogram with 4 buckets per power */
	uint64_t p99_ns;	/* of two: within 25 % (never above max_ns) */
};
void fs_lat_get(unsigned int op, struct fs_lat_summary *out);
void fs_lat_reset(void);	/* tests */

/* ---- text ----------------------------------------------------------------- */

/* A growable text buffer; on allocation failure oom is set and further
 * output is dropped.  Zero-initialise; free s with fs_text_free(). */
struct fs_text {
	char *s;
	size_t n, cap;
	bool oom;
};
void fs_text_printf(struct fs_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void fs_text_free(struct fs_text *t);

/* Virtual xattr values are cut to fit the kernel's 64 KiB xattr limit: a
 * list longer than this many bytes ends with a line "# next=N"; the rest is
 * read from the attribute "<name>.N" (see docs/stats.md). */
#define FS_STATS_MAX_TEXT 60000u

/* user.zonefuse.stats: "key=value\n" lines.  0 or -errno. */
int fs_stats_render(struct fs *fs, struct fs_text *t);
/* user.zonefuse.file on a regular file: its size, extents, mapped
 * bytes and how many of them other extents share.  0 or -errno. */
int fs_stats_render_file(struct fs *fs, uint64_t ino, struct fs_text *t);
/* user.zonefuse.zones on the root: one line per zone from zone `first` on,
 * cut after FS_STATS_MAX_TEXT bytes.  0 or -errno (-ENODATA if first is
 * beyond the last zone). */
int fs_stats_render_zones(struct fs *fs, uint32_t first, struct fs_text *t);

#endif
