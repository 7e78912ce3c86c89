/* fs — the zonefuse file system core, usable without FUSE.
 *
 * Purpose: inodes, directories, extent maps, write buffers and the metadata
 * records that make them durable, on top of zdev (device), zalloc (data
 * zones) and mlog (metadata log).  fusefs/ only decodes requests and calls
 * these functions; unit tests call them directly.
 *
 * Model:
 *   - All metadata lives in memory; every change appends one logical record
 *     (create, link, unlink, rename, setattr, extent, truncate, xattr...) to
 *     the log.  Each record is one atomic step at replay.  fs_fsync() and
 *     fs_sync() commit the log (which first flushes the device: data before
 *     the metadata that points at it).  A commit thread commits every
 *     commit_interval_ms and writes a snapshot when the log is long.
 *   - File data is written out of place.  Writes land in a per-file buffer
 *     of 1 MiB chunks (stripe_unit) made of blocks; a chunk is written to a
 *     zone of the file's lifetime class when it is complete and in file
 *     order (a bounded reorder window absorbs the kernel's out-of-order
 *     writeback; with the write-behind on, only past a file's first 16 MiB),
 *     on fsync, write_behind_ms after the last close (the commit thread; a
 *     file unlinked before then is never written), at age and under memory
 *     pressure.  Partial
 *     blocks are padded with zeros: on-device bytes beyond a file's size are
 *     always zero, so growing a file never exposes old bytes.
 *   - Inode numbers are the FUSE node ids (root = 1).
 *
 * Crash guarantees: after a crash, the state is that of the last commit: a
 * prefix of the record stream.  Everything fsync'ed (file data, size, names)
 * is in it.  A zone is reset only after the records that stopped
 * referencing its data are durable, so no file ever shows another file's
 * old bytes.
 *
 * Errors: every function returns 0 / a count, or -errno.
 *
 * Thread safety and lock order (outer to inner):
 *     inode->rw (rwlock)  ->  fs->lock (mutex)  ->  mlog / zalloc internal locks
 *   inode->rw: readers of the file's data take it shared; writers (buffer
 *   changes, extent changes, truncate) take it exclusive.  fs->lock guards
 *   the inode table, names, attributes, extent maps (changes need both),
 *   xattrs and the order of log records.  Device data I/O is never done
 *   under fs->lock.  Every fs_* function may be called from any thread.
 *   Writing a stripe of a file's buffer to the device (the write-out) runs
 *   with inode->rw released (its chunks are marked busy and stay readable;
 *   at most one write-out per file is in flight), so other writers of the
 *   file keep filling the buffer meanwhile; waiting for it uses
 *   inode->wb_lock, a leaf taken after inode->rw (fs_data.c has the
 *   details).
 */
#ifndef ZONEFUSE_FS_H
#define ZONEFUSE_FS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "lsm/lifetime.h"
#include "zoned/zdev.h"

#define FS_ROOT_INO 1
#define FS_NAME_MAX 255

struct fs;

struct fs_mkfs_opts {
	uint32_t meta_zones;	/* 0 = default (4, or more for large devices) */
	const char *label;	/* may be NULL */
	bool force;		/* overwrite an existing zonefuse file system */
};
/* Format dev.  -EEXIST if it already holds zonefuse and !force. */
int fs_mkfs(struct zdev *dev, const struct fs_mkfs_opts *o);

struct fs_opts {
	uint64_t buffer_bytes;		/* write-buffer memory bound (default 256 MiB) */
	uint32_t stripe_unit;		/* bytes per chunk (default 1 MiB) */
	uint32_t stripe_width;		/* max zones per striped flush (default 4) */
	uint32_t commit_interval_ms;	/* periodic commit (default 5000; 0 = off) */
	uint32_t write_behind_ms;	/* a closed file's buffers wait this long for an
					 * unlink before they are written out (default
					 * 1000; 0 = at the close; needs the commit thread) */
	uint32_t reorder_chunks;	/* complete chunks held for in-order writing (default 8) */
	uint64_t prefetch_bytes;	/* bytes per prefetch buffer, 4 per sequential
					 * reader (default stripe_width x stripe_unit;
					 * 0 = prefetch off) */
	uint64_t prefetch_limit;	/* prefetch memory bound, daemon-wide (default 256 MiB) */
	bool read_only;
	/* lifetime placement and GC (fs_lifetime.c, fs_gc.c) */
	const char *hints_file;		/* rules file "GLOB CLASS" lines (-o hints=FILE), NULL = none;
					 * read at mount */
	bool placement_off;		/* every file in one class (-o placement=off) */
	uint32_t gc_mbps;		/* background GC copy rate bound, MB/s (default 128;
					 * 0 = unbounded); GC for waiting writers is unbounded */
	uint64_t dirty_reserve;		/* bytes the kernel's page cache may hold dirty
					 * for this mount (default 0): writes other than
					 * its write-back leave them free, so that what
					 * write() took into the cache can be stored;
					 * at most a sixteenth of the data capacity is
					 * kept (fs_space_low) */
};
void fs_opts_default(struct fs_opts *o);

/* Mount: replay, reconcile zones, write the mount snapshot.  Background
 * work (periodic commit) starts only with fs_start(), so a daemon can
 * fork after mounting. */
int fs_mount(struct zdev *dev, const struct fs_opts *o, struct fs **out);
/* Why the mount came up read-only though read-write was asked (a damaged
 * metadata log, fs_repair.c; also logged), or NULL. */
const char *fs_mount_note(const struct fs *fs);
int fs_start(struct fs *fs);
/* Flush every buffer, commit, snapshot, stop threads, free.  The device is
 * not closed.  Returns the first error met (the fs is freed anyway). */
int fs_unmount(struct fs *fs);

/* Names and attributes.  Functions that return an entry (lookup, create,
 * mkdir, mknod, symlink, link) take one lookup reference on it, released
 * by fs_forget(). */
int fs_lookup(struct fs *fs, uint64_t parent, const char *name, struct stat *st);
void fs_forget(struct fs *fs, uint64_t ino, uint64_t nlookup);
/* Export handles: the lookup of "." in any inode (a handle's inode found
 * by number, of any type), with a lookup reference; -ENOENT when no inode
 * ino exists or it has no name left (deleted: its handle is stale).
 * Inode numbers are never given twice (fs_ino_reserve covers crashes), so
 * a handle's generation can be constant (FS_INO_GENERATION). */
#define FS_INO_GENERATION 1
int fs_lookup_self(struct fs *fs, uint64_t ino, struct stat *st);
/* Before a create whose inode number leaves the process (the FUSE
 * layer's): make the numbers about to be given durable, so that a crash
 * that loses the create cannot give its number to another inode later
 * (a handle to the lost file would open that one).  Commits once per
 * FS_INO_BATCH numbers.  0, or the log's -errno.  No locks held. */
int fs_ino_reserve(struct fs *fs);
int fs_getattr(struct fs *fs, uint64_t ino, struct stat *st);

enum fs_setattr_flags {
	FS_SET_MODE = 1 << 0, FS_SET_UID = 1 << 1, FS_SET_GID = 1 << 2,
	FS_SET_SIZE = 1 << 3, FS_SET_ATIME = 1 << 4, FS_SET_MTIME = 1 << 5,
	FS_SET_ATIME_NOW = 1 << 6, FS_SET_MTIME_NOW = 1 << 7, FS_SET_CTIME = 1 << 8,
	FS_SET_KILL_SUIDGID = 1 << 9,
};
int fs_setattr(struct fs *fs, uint64_t ino, const struct stat *attr,
	       unsigned int flags, struct stat *out);

/* Who asks: credentials and the calling thread (FUSE passes the tid of the
 * thread making the request; 0 when unknown, e.g. kernel writeback). */
struct fs_ctx { uint32_t uid, gid, tid; };
/* Creates apply no umask: the caller applies it to mode when the parent
 * directory has no default ACL (fs_getxattr of system.posix_acl_default is
 * -ENODATA); with one, the new inode inherits it and the create mode is
 * limited by the ACL instead (POSIX.1e). */
int fs_mknod(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	     dev_t rdev, const struct fs_ctx *ctx, struct stat *out);
int fs_mkdir(struct fs *fs, uint64_t parent, const char *name, mode_t mode,
	     const struct fs_ctx *ctx, struct stat *out);
int fs_symlink(struct fs *fs, uint64_t parent, const char *name,
	       const char *target, const struct fs_ctx *ctx, struct stat *out);
int fs_link(struct fs *fs, uint64_t ino, uint64_t newparent,
	    const char *newname, struct stat *out);
int fs_unlink(struct fs *fs, uint64_t parent, const char *name);
int fs_rmdir(struct fs *fs, uint64_t parent, const char *name);
/* flags: RENAME_NOREPLACE, RENAME_EXCHANGE (-EINVAL for unknown flags). */
int fs_rename(struct fs *fs, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, unsigned int flags);
/* Returns the target length (bytes copied, not NUL-terminated if too long). */
int fs_readlink(struct fs *fs, uint64_t ino, char *buf, size_t size);

/* Open-file references (an unlinked file's data lives until the last one). */
int fs_open(struct fs *fs, uint64_t ino, int flags);
int fs_release(struct fs *fs, uint64_t ino);

ssize_t fs_read(struct fs *fs, uint64_t ino, uint64_t off, size_t size, void *buf);
/* A read's bytes without the final copy: p points at them; own is a buffer
 * of the read's own or NULL, ref a reference to a read-ahead buffer shared
 * with other readers or NULL.  Or, only when asked for (FS_READ_FD), no
 * bytes at all but where they lie: at_fd, and the read's bytes are
 * [fd_off, fd_off + n) of the device's file fd, which the caller moves
 * itself (splice); the file stays read-locked meanwhile (held), so that
 * no write, truncate or collector move of it can free those bytes.
 * Read-only; release with fs_rbuf_put, promptly with at_fd (any thread;
 * safe on a zeroed or already released one). */
struct fs_pf_data;
struct fs_inode;
struct fs_rbuf {
	const uint8_t *p;
	void *own;
	struct fs_pf_data *ref;
	bool at_fd;
	int fd;
	uint64_t fd_off;		/* bytes */
	struct fs *fs;			/* with held */
	struct fs_inode *held;		/* pinned and read-locked, or NULL */
};
void fs_rbuf_put(struct fs_rbuf *rb);
/* fs_read without the final copy: rb (always to be released) holds the
 * bytes read.  flags: FS_READ_FD lets rb be a file range (above): for a
 * read within one extent with no buffered page over it, from a device
 * whose bytes are a plain file (zdev_read_fd). */
#define FS_READ_FD 1u
ssize_t fs_read_buf(struct fs *fs, uint64_t ino, uint64_t off, size_t size,
		    unsigned flags, struct fs_rbuf *rb);
/* flags: FS_WRITE_KILL_PRIV: drop the capability and set-id bits first, as
 * the kernel would (fs_kill_priv); FS_WRITE_PAGECACHE: the kernel's
 * write-back of its page cache, which may use the room kept for the dirty
 * pages (fs_opts.dirty_reserve); any other write leaves that room free and
 * fails with -ENOSPC instead.
 * Returns the bytes buffered, fewer than size only when a later block
 * failed after some were (no memory for its page, or its bytes could not
 * be read from the device to change part of it), or -errno (nothing
 * buffered: -ENOMEM, -EIO, -ENOSPC, ...). */
#define FS_WRITE_KILL_PRIV 1u
#define FS_WRITE_PAGECACHE 2u
ssize_t fs_write(struct fs *fs, uint64_t ino, uint64_t off, const void *buf,
		 size_t size, unsigned int flags);
/* A WRITE payload the write buffer may keep instead of copying: base is
 * zdev_buf_alloc'd (device-aligned), refcounted; freed with the last
 * reference.  Any thread. */
struct fs_donor {
	uint8_t *base;
	size_t len;			/* bytes at base */
	_Atomic unsigned int refs;
};
struct fs_donor *fs_donor_new(size_t len);	/* one reference, or NULL */
void fs_donor_put(struct fs_donor *d);		/* NULL is fine */
/* fs_write of d->base[0, size): every whole write-buffer chunk (stripe_unit
 * bytes at a multiple of it, not buffered yet) takes its bytes in place,
 * with a reference to d, instead of a copy; the rest is copied.  Whether d
 * was kept shows in d->refs. */
ssize_t fs_write_donated(struct fs *fs, uint64_t ino, uint64_t off, struct fs_donor *d,
			 size_t size, unsigned int flags);
/* Write out this file's buffers (no commit).  The FUSE layer has no FLUSH
 * (a closed file is written out by its release or the write-behind); the
 * tests call it. */
int fs_flush(struct fs *fs, uint64_t ino);
/* Write out the file's buffers and commit the log. */
int fs_fsync(struct fs *fs, uint64_t ino, bool datasync);
/* Make durable every metadata change made so far (names, attributes,
 * extents of data already written out), and the data those extents point
 * at; then a snapshot if one is due (its failure is not reported: it is
 * retried at the next commit).  No locks held. */
int fs_commit(struct fs *fs);
/* Commit everything (all buffers, the log). */
int fs_sync(struct fs *fs);

/* The page cache's write-back of ino at byte off was refused with err: its
 * write-back at or past off is refused with err until the file's last
 * close or a truncate to at most off, and what write-back past off the
 * write buffer took meanwhile (only
 * there: nothing past off is on the device) is dropped, so that the stored
 * file never has a hole where the refusal is.  0 or -errno. */
int fs_writeback_refused(struct fs *fs, uint64_t ino, uint64_t off, int err);

/* The room kept for the kernel's dirty pages (bytes): fs_opts.dirty_reserve,
 * at most a sixteenth of the data capacity.  Any thread. */
uint64_t fs_dirty_reserve(struct fs *fs);
/* The part of that reserve that writes other than the page cache's
 * write-back (O_DIRECT, files that bypass the cache, fallocate) leave free
 * now: what the kernel may still hold dirty for this mount.  The mount's
 * owner knows (fusefs: no file open for writing through the cache, 0; its
 * dirty pages capped lower, less) and sets it; UINT64_MAX (the default):
 * the whole reserve.  So a device written without the cache meets ENOSPC
 * when it is full, not a reserve earlier.  Any thread. */
uint64_t fs_dirty_keep(struct fs *fs);
void fs_set_dirty_keep(struct fs *fs, uint64_t bytes);
/* Is the room left (free bytes, and with a collector the dead bytes it
 * could reclaim now, less what is buffered and admitted) below factor
 * times the dirty reserve?  Then the kernel's dirty pages should be
 * capped at the reserve and a file opened for writing should bypass the
 * page cache, so that its write() itself meets ENOSPC (fusefs).  Any
 * thread, no locks held. */
bool fs_space_low(struct fs *fs, unsigned int factor);

/* A data change by a caller without CAP_FSETID that the kernel does not
 * flag (fallocate, the destination of copy_file_range; a write and a
 * truncate carry the kernel's kill flag): drop the file's capability and
 * set-id bits as the kernel would, before the change.  1 if something was
 * dropped (the kernel's cached mode is stale), 0 if nothing was, -errno. */
int fs_kill_priv(struct fs *fs, uint64_t ino);

/* fallocate: mode 0 (holds the range's space and extends the size),
 * FALLOC_FL_KEEP_SIZE (holds it only), FALLOC_FL_PUNCH_HOLE|KEEP_SIZE
 * (unmaps it and releases what was held); others -EOPNOTSUPP.  Held space
 * (whole blocks of the range not written yet: fs_prealloc.c) is -ENOSPC
 * when it does not fit, counted in st_blocks and statfs, kept free from
 * other writers, released as writes, truncates, punches and the unlink of
 * the file take it, and kept across remounts and crashes.  -EFBIG past
 * 2^50 bytes. */
int fs_fallocate(struct fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len);
/* copy_file_range: copy [src_off, src_off+len) of src (clipped to its
 * size) to dst at dst_off; returns the bytes copied (0 at or past src's
 * end) or -errno.  Blocks whose offsets are congruent modulo the block
 * size are shared (dst's extents reference src's device bytes: no data
 * written); unaligned edges, and everything when the offsets are not
 * congruent, are copied through the write buffer.  Each shared run is one
 * COPY record (atomic at replay).  flags must be 0.  Same file: the ranges
 * may not overlap (-EINVAL).  No locks held. */
ssize_t fs_copy_file_range(struct fs *fs, uint64_t src, uint64_t src_off, uint64_t dst,
			   uint64_t dst_off, uint64_t len, unsigned int flags);
/* SEEK_DATA / SEEK_HOLE; returns the offset or -ENXIO. */
int64_t fs_lseek(struct fs *fs, uint64_t ino, int64_t off, int whence);

/* readdir: calls fn for each entry with cookie > off (including "." and
 * ".." at cookies 1 and 2) until fn returns non-zero.  With plus, the entry
 * gets a lookup reference when fn returns 0 (readdirplus semantics;
 * "." and ".." never get one). */
typedef int (*fs_dir_fn)(void *arg, const char *name, const struct stat *st,
			 uint64_t next_off);
int fs_readdir(struct fs *fs, uint64_t ino, uint64_t off, bool plus,
	       fs_dir_fn fn, void *arg);

int fs_statfs(struct fs *fs, struct statvfs *st);

/* Extended attributes.  user.*, trusted.*, security.* and the POSIX ACLs
 * system.posix_acl_access / _default are stored (values up to 64 KiB,
 * names and values up to 256 KiB per inode: -ENOSPC past it;
 * ACLs are validated, -EINVAL, and kept in agreement with the mode bits,
 * see fs_xattr.c); user.zonefuse.* are virtual, read-only (-EPERM on
 * set/remove) but for user.zonefuse.lifetime; other namespaces:
 * -EOPNOTSUPP on set, -ENODATA on get.  Access checks are the caller's
 * (the kernel's).  get/list with size 0 return the needed size. */
#define FS_ACL_ACCESS "system.posix_acl_access"
#define FS_ACL_DEFAULT "system.posix_acl_default"
/* flags: XATTR_CREATE, XATTR_REPLACE, and FS_XATTR_KILL_SGID: setting
 * FS_ACL_ACCESS also clears S_ISGID (the caller is neither in the file's
 * group nor privileged). */
#define FS_XATTR_KILL_SGID (1 << 8)
int fs_setxattr(struct fs *fs, uint64_t ino, const char *name,
		const void *value, size_t size, int flags);
int fs_getxattr(struct fs *fs, uint64_t ino, const char *name, void *value, size_t size);
int fs_listxattr(struct fs *fs, uint64_t ino, char *list, size_t size);
int fs_removexattr(struct fs *fs, uint64_t ino, const char *name);

/* Lifetime inference input: thread `tid` read `bytes` of file `ino`
 * (called by the FUSE layer after each successful read). */
void fs_note_read(struct fs *fs, uint64_t ino, uint32_t tid, uint64_t bytes);

/* Counters for stats and tests. */
struct fs_stats {
	uint64_t user_bytes_written;	/* bytes accepted by fs_write */
	uint64_t zero_copy_write_bytes;	/* of those, kept as donated chunks (no copy) */
	uint64_t zero_copy_read_bytes;	/* bytes read as file ranges (FS_READ_FD) */
	uint64_t data_bytes_written;	/* file data bytes written to zones */
	uint64_t write_behind_dropped_bytes;	/* buffers of closed files unlinked
						 * before their write-out (never written) */
	uint64_t meta_bytes_written;	/* metadata log bytes written */
	uint64_t buffer_bytes;		/* bytes held in write buffers now */
	uint64_t buffer_limit;
	uint64_t prefetch_bytes;	/* bytes held in prefetch buffers now */
	uint64_t prefetch_spare_bytes;	/* bytes of buffers kept for the next
					 * windows (at most FS_PF_SPARE windows) */
	uint64_t prefetch_hits;		/* reads served from prefetch buffers */
	uint64_t prefetch_fills;	/* background fills started */
	uint64_t prefetch_fill_errors;	/* fills a device read error ended (dropped;
					 * the reader then reads the device itself) */
	uint64_t inodes;
	uint64_t commits;
	uint64_t snapshots;
	/* lifetime placement and GC (the allocator's figures).  Device data bytes =
	 * data_bytes_written + gc_bytes_written; write amplification =
	 * (data + gc + meta bytes) / user bytes. */
	uint64_t gc_bytes_written;	/* bytes the collector copied */
	uint64_t gc_runs;		/* victim zones collected */
	uint64_t gc_zones_freed;	/* ... of which emptied completely */
	uint64_t gc_skipped_busy;	/* extents left: their file stayed locked */
	uint64_t gc_waits;		/* writer allocations that waited for GC */
	uint64_t gc_wait_ms;		/* total time they waited */
	uint64_t write_amp_milli;	/* write amplification x 1000 (0: nothing written) */
	uint64_t zone_resets;
	uint64_t zone_finishes;
	uint64_t free_zones;		/* data zones EMPTY now */
	uint64_t class_user_bytes_written[LIFETIME_NR];	/* fs_write bytes by the file's class */
	uint64_t class_bytes_written[LIFETIME_NR];	/* device bytes by class (incl. GC) */
	uint64_t class_gc_bytes_written[LIFETIME_NR];
	uint64_t class_zone_resets[LIFETIME_NR];
	uint64_t class_zone_finishes[LIFETIME_NR];
	/* shared extents (fs_copy.c) */
	uint64_t shared_bytes;		/* device bytes referenced more than once */
	uint64_t shared_saved_bytes;	/* file bytes mapped to them beyond the
					 * first reference (what copies saved) */
	uint64_t copies;		/* copy_file_range calls that copied bytes */
	uint64_t copy_shared_bytes;	/* bytes they shared */
	uint64_t copy_written_bytes;	/* bytes they copied through the buffer */
	uint64_t gc_shared_moves;	/* shared ranges the collector moved once */
	uint64_t lifetime_tables;	/* tables whose level was inferred */
	uint64_t lifetime_tables_corrected;	/* tables whose level was corrected after their job */
	uint64_t lifetime_tables_died;		/* tables unlinked whose level was guessed */
	uint64_t lifetime_table_bytes_died;	/* ... their bytes */
	uint64_t lifetime_tables_misguessed;	/* ... whose class at death is not the
						 * class guessed at create */
	uint64_t lifetime_misguessed_bytes;	/* ... their bytes */
};
void fs_get_stats(struct fs *fs, struct fs_stats *st);

/* fsck helpers: replay read-only and check invariants, printing problems
 * through report(); returns the number of problems found or -errno. */
typedef void (*fs_report_fn)(void *arg, const char *fmt, ...);
int fs_check(struct zdev *dev, bool verbose, fs_report_fn report, void *arg);
/* fsck with repairs (fs_repair.c).  FS_FSCK_CHECK reports what is wrong
 * and writes nothing; FS_FSCK_PREEN repairs only what loses nothing (link
 * counts, names of missing inodes, unreachable inodes into /lost+found,
 * counts) and writes nothing when something else is wrong (needs_yes);
 * FS_FSCK_YES makes every repair (cutting the log at a record that cannot
 * be applied, salvaging a damaged snapshot, dropping extents that point
 * outside the written data; an empty file system when no metadata can be
 * read at all).  A repair is written as a new epoch of the log, so a crash
 * during it leaves the old state (run it again).  Findings go through
 * report().  Returns 0 (the counts in *res) or -errno when the device
 * cannot be used (-ENODATA: not a zonefuse file system). */
enum fs_fsck_mode { FS_FSCK_CHECK = 0, FS_FSCK_PREEN = 1, FS_FSCK_YES = 2 };
struct fs_fsck_result {
	int found;		/* problems found */
	int fixed;		/* ... repaired (0 with FS_FSCK_CHECK) */
	int left;		/* found by the check after the repair */
	bool needs_yes;		/* PREEN: a problem only FS_FSCK_YES repairs */
	bool recreated;		/* nothing could be read: re-created empty */
	uint64_t lost_bytes;	/* file bytes dropped */
	uint64_t lost_names;	/* names dropped */
	uint64_t lost_records;	/* log records not applied */
};
int fs_fsck(struct zdev *dev, enum fs_fsck_mode mode, bool verbose, fs_report_fn report,
	    void *arg, struct fs_fsck_result *res);
/* The shared-extent checks of fs_check on a mounted file system (tests):
 * the table of extra references and every zone's valid bytes against the
 * extent maps.  Takes fs->lock.  Returns the number of problems. */
int fs_check_shares(struct fs *fs, fs_report_fn report, void *arg);

#endif
