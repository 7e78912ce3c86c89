/* fs_internal — what the files of the fs core share, not an interface for
 * other modules: the log record types, struct fs and struct fs_inode with
 * the structures they hold (names, directories, xattrs), the locks, and
 * the functions one file of the core calls in another, grouped by the file
 * that defines them.
 *
 * The state one file owns is in that file's private header, with its
 * invariants and locks; struct fs and struct fs_inode hold it:
 *   fs_commit.h    the commit thread (fs->cmt)
 *   fs_copy.h      the share table of shared extents (fs->share)
 *   fs_data.h      the write buffer's chunks (in->chunks)
 *   fs_lifetime.h  lifetime placement (fs->lt, opaque)
 *   fs_prealloc.h  fallocated, unwritten ranges (in->pa, fs->pa_bytes)
 *   fs_prefetch.h  read-ahead (in->pf, fs->pf)
 *
 * Locking is described in fs.h: inode->rw -> fs->lock -> mlog/zalloc, and
 * inode->rw -> inode->wb_lock (a leaf, held only to wait for or announce the
 * end of a write-out; a waiter takes wb_lock, then releases in->rw).  The
 * owners' locks fit in as their headers say: lt->tail_lock before
 * inode->rw, in->pf->lock between inode->rw and fs->lock, lt->mf_lock
 * after fs->lock; the committer's and the read-ahead queue's locks are
 * leaves.
 * Fields marked [L] need fs->lock; [RW] need inode->rw (shared to read,
 * exclusive to change); [L+RW] need both to change, either to read.
 * A data write-out (fs_data.c) drops in->rw for its device I/O: whoever
 * waits for it must have released in->rw (fs_data_wait_writeout does).
 */
#ifndef ZONEFUSE_FS_INTERNAL_H
#define ZONEFUSE_FS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/zf_common.h"
#include "fs/extmap.h"
#include "fs/fs.h"
#include "fs/fs_commit.h"
#include "fs/fs_copy.h"
#include "fs/fs_data.h"
#include "fs/fs_lifetime.h"
#include "fs/fs_prealloc.h"
#include "fs/fs_prefetch.h"
#include "fs/fs_repair.h"
#include "mlog/mlog.h"
#include "lsm/lifetime.h"
#include "zonealloc/zalloc.h"
#include "zoned/zdev.h"

/* ---- log record types (payloads: see fs_records.c) ---- */
enum fs_rec_type {
	FS_REC_STATE = MLOG_REC_USER,	/* next_ino, cumulative counters */
	FS_REC_INODE,		/* full attributes of an existing/new inode */
	FS_REC_CREATE,		/* attributes + (parent, name) [+ symlink target,
				 * initial xattrs]: new inode linked */
	FS_REC_DIRENT,		/* (parent, name) -> ino, no nlink change (snapshot) */
	FS_REC_LINK,		/* (parent, name) -> ino, nlink + 1 */
	FS_REC_UNLINK,		/* remove (parent, name), nlink - 1 */
	FS_REC_RENAME,		/* atomic rename with flags */
	FS_REC_EXTENT,		/* ino: [off, off+len) -> dev; size >= size_min */
	FS_REC_EXTENTS,		/* ino: many extents (snapshot) */
	FS_REC_TRUNCATE,	/* ino: size, extents beyond dropped */
	FS_REC_XATTR_SET,
	FS_REC_XATTR_DEL,
	FS_REC_SYMLINK,		/* ino: target (snapshots; CREATE carries it live) */
	FS_REC_PUNCH,		/* ino: [off, off+len) unmapped */
	FS_REC_COPY,		/* dst: [off, off+len) replaced by extents that
				 * reference bytes other extents map (a copy) */
	FS_REC_REMAP,		/* several files' ranges re-pointed at once
				 * (the collector moving a shared extent) */
	FS_REC_PREALLOC,	/* ino: [off, off+len) fallocated: its holes
				 * are held (fs_prealloc.c) */
};

struct fs_xattr {
	struct fs_xattr *next;
	char *name;
	void *value;
	size_t size;
};

struct fs_dirent {
	struct fs_dirent *hnext;	/* hash chain */
	uint64_t parent;
	uint64_t ino;
	uint64_t cookie;		/* readdir offset, unique in the directory */
	size_t slot;			/* its index in the directory's ents */
	uint32_t hash;
	char name[];
};

struct fs_dir {
	/* Sorted by cookie; NULL = removed.  A directory of more than
	 * DIR_COMPACT_MIN slots is compacted once less than half of them are
	 * live (fs_inode.c); each dirent knows its slot.  cookies[i] is the
	 * cookie of the entry put in slot i, kept after its removal, so a
	 * READDIR resumed at a cookie finds its slot by a binary search
	 * that never walks removed slots. */
	struct fs_dirent **ents;
	uint64_t *cookies;
	size_t n, cap, live;
	uint64_t next_cookie;		/* starts at 3 ('.'=1, '..'=2) */
	uint64_t parent;		/* for '..' */
	/* Its own name: the entry in its parent (a directory has one),
	 * NULL for the root.  Kept by fs_dirent_insert/_remove and the
	 * exchange of two names. */
	struct fs_dirent *self;
	/* Named under the root or under a directory that was rooted when it
	 * was named.  Snapshots name directories from the root down, so at
	 * replay a directory named under a rooted one cannot close a loop:
	 * the check costs one step instead of a walk to the root (which made
	 * replaying a deep tree quadratic). */
	bool rooted;
	uint64_t snap_gen;		/* [L] the snapshot that wrote its names
					 * (fs->snap_gen when it did) */
	uint64_t name_bytes;		/* [L] log bytes of its names' DIRENT
					 * records in a snapshot */
};

struct fs_inode {
	struct fs_inode *hnext;		/* [L] inode hash chain */
	uint64_t ino;
	/* attributes [L] (size: [L+RW]) */
	uint32_t mode, uid, gid, nlink;
	uint64_t rdev;
	uint64_t size;			/* bytes */
	int64_t atime, mtime, ctime;	/* ns since the epoch */
	uint8_t cls, cls_src;		/* enum lifetime_class / lifetime_source */
	bool attr_dirty;		/* [L] attributes changed since last logged */
	/* references [L] */
	uint64_t nlookup;		/* kernel lookups not yet forgotten */
	uint32_t nopen;			/* open file handles */
	uint32_t pins;			/* internal temporary references */
	pthread_rwlock_t rw;
	struct extmap map;		/* [L+RW] */
	struct fs_pa *pa;		/* [L+RW] fallocated, unwritten ranges:
					 * npa of pacap, sorted (fs_prealloc.c) */
	uint32_t npa, pacap;		/* [L+RW] */
	uint64_t pa_bytes;		/* [L+RW] their sum */
	struct fs_chunk **chunks;	/* [RW] write buffer: nchunks, sorted by
					 * idx (a lookup is a bisection) */
	uint64_t buffered;		/* [RW] bytes of chunk buffers */
	uint32_t nchunks, chunks_cap;	/* [RW] */
	uint32_t ncomplete;		/* [RW] chunks with every page present */
	uint64_t chunk_seq;		/* [RW] chunks created */
	/* write-out in flight (fs_data.c): at most one per inode; it holds
	 * the busy chunks and runs its device I/O without in->rw.  Changed
	 * with in->rw exclusive AND wb_lock held, read under either. */
	bool wb_busy;
	/* [RW] the page cache's write-back was refused at wb_cut (bytes;
	 * UINT64_MAX: never since the file was opened): its write-back at or
	 * past it is refused with wb_cut_err until the last close or a
	 * truncate to at most wb_cut */
	uint64_t wb_cut;
	int wb_cut_err;
	/* [RW] the size when the page cache's write-back first grew the file
	 * since the last fsync, last close or truncate (bytes; UINT64_MAX: it
	 * has not).  Bytes past it were promised to no one but the kernel's
	 * write-back, so a refusal may drop them rather than leave a hole
	 * (fs_writeback_refused) */
	uint64_t wb_grow_from;
	uint64_t wb_done;		/* write-outs finished (generation) */
	uint32_t wb_press;		/* chunks still to write striped since a
					 * writer last found a complete chunk but
					 * the write-out busy (stripe_width()) */
	pthread_mutex_t wb_lock;	/* leaf; only to wait on wb_cond */
	pthread_cond_t wb_cond;		/* broadcast when a write-out ends */
	/* dirty list [L] */
	struct fs_inode *dnext, *dprev;
	bool on_dirty;
	uint64_t dirty_since_ns;
	/* write-behind list [L]: closed with buffers left (fs_commit.c) */
	struct fs_inode *bnext, *bprev;
	bool on_behind;
	uint64_t closed_ns;		/* when it joined the list */
	struct fs_dir *dir;		/* [L] directories */
	char *symlink;			/* [L] symlinks */
	struct fs_xattr *xattrs;	/* [L] */
	struct fs_prefetch *pf;		/* sequential-read buffers, or NULL */
	/* [L] log bytes a snapshot spends on it (fs_snap_account), counted
	 * in fs->snap_bytes while snap_counted (from its insertion into the
	 * table until it is destroyed) */
	uint64_t snap_bytes;
	bool snap_counted;
};

struct fs {
	struct zdev *dev;
	struct mlog *mlog;
	struct zalloc *za;
	struct mlog_sb sb;
	struct fs_opts opts;
	uint32_t bs;			/* bytes: file system block */
	uint32_t pages_per_chunk;
	bool applying_log;		/* records come from the log (mount):
					 * applied, never appended again */
	bool valid_counted;		/* zalloc counts the extents' device bytes:
					 * from mount_reconcile until teardown */
	bool read_only;
	/* mount-time only (fs_repair.c): what replay could not apply, the
	 * fsck run this mount serves (or NULL), and whether a damaged log
	 * may be mounted read-only with repairs in memory */
	struct fs_cut cut;
	struct fs_repair *repair;
	bool repair_fallback;
	char *mount_note;		/* fs_mount_note(), or NULL; freed with fs */

	pthread_mutex_t lock;
	/* inode table [L] */
	struct fs_inode **itab;
	size_t itab_size, ninodes;
	uint64_t next_ino;
	/* fs_ino_reserve: numbers below ino_reserved are durable (a committed
	 * STATE record or snapshot says so); ino_logged, the largest a STATE
	 * record was appended with (snapshots write it on). */
	uint64_t ino_reserved, ino_logged;
	/* name hash [L] */
	struct fs_dirent **dtab;
	size_t dtab_size, ndirents;
	uint64_t snap_gen;		/* [L] snapshots emitted (fs_emit_snapshot) */
	/* Log bytes of the next snapshot's inode and name records: the sum
	 * of the inodes' snap_bytes.  Changed [L]; read by mlog under its own
	 * lock (fs_snap_state_bytes), hence atomic. */
	_Atomic uint64_t snap_bytes;
	/* dirty inodes, oldest first [L] */
	struct fs_inode *dirty_head, *dirty_tail;
	/* closed files whose buffers wait for the write-behind, oldest
	 * close first [L] */
	struct fs_inode *behind_head, *behind_tail;

	/* fs_dirty_reserve() (bytes), UINT64_MAX until its first call */
	_Atomic uint64_t dirty_reserve;
	/* fs_dirty_keep(): the part of it kept now (bytes; UINT64_MAX: all
	 * of it), set by the mount's owner (fs_set_dirty_keep) */
	_Atomic uint64_t dirty_keep;
	/* bytes of every file's fallocated, unwritten ranges (fs_prealloc.c);
	 * changed [L+RW of the file], read anywhere */
	_Atomic uint64_t pa_bytes;
	/* write-buffer memory (bytes), atomically updated */
	_Atomic uint64_t buffered;

	/* commit thread */
	struct fs_committer cmt;	/* fs_commit.c */

	struct fs_pf_pool pf;		/* fs_prefetch.c */

	struct fs_share share;		/* fs_copy.c */

	/* counters */
	_Atomic uint64_t user_bytes, data_bytes;
	_Atomic uint64_t zc_write_bytes;	/* fs_write bytes buffered as donated chunks */
	_Atomic uint64_t behind_dropped;	/* write_behind_dropped_bytes (fs_stats) */
	_Atomic uint64_t zc_read_bytes;		/* read bytes handed out as file ranges */
	_Atomic uint64_t commits;
	_Atomic uint64_t meta_errors;	/* failed metadata commits and snapshots */

	/* lifetime placement (fs_lifetime.c) and garbage collection (fs_gc.c) */
	struct fs_lt *lt;		/* rules, inference, MANIFESTs followed:
					 * fs_lifetime.c's, with its own locks;
					 * NULL outside init..fini */
	const struct fs_collector *collector;	/* fs_move.h: fs_start starts it; or NULL */
	_Atomic uint64_t class_user_bytes[LIFETIME_NR];	/* fs_write bytes by the
					 * file's class (counted by fs_data.c) */
};

/* Defined here: helpers every file of the core uses. */
/* Is the write-behind on (a delay set and the commit thread, which does
 * it, running)?  The release (fs_namei.c) and a write's hold of a small
 * file (fs_data.c) both ask.  [any] */
static inline bool fs_write_behind_on(const struct fs *fs)
{
	return fs->opts.write_behind_ms && fs->cmt.running;
}
/* One file's share of the write buffer (bytes): past it a writer writes
 * everything out, and neither the write-behind nor the hold takes it. */
static inline uint64_t fs_file_share(const struct fs *fs)
{
	return fs->opts.buffer_bytes / 8;
}
/* Take in->rw exclusive.  Its holder may be a collector's move or a
 * write-out's bookkeeping, so a wait for it gets the blocking notice
 * first (zf_will_block, zf_common.h).  [any; no fs lock held] */
static inline void fs_rw_wrlock(struct fs_inode *in)
{
	if (pthread_rwlock_trywrlock(&in->rw) != 0) {
		zf_will_block();
		pthread_rwlock_wrlock(&in->rw);
	}
}
/* See struct fs_dir. */
static inline bool fs_dir_rooted(const struct fs_inode *dir)
{
	return dir->ino == FS_ROOT_INO || dir->dir->rooted;
}

/* fs_inode.c: the inode and name tables, the dirty list. [L] */
int64_t fs_now(void);				/* ns since the epoch */
struct fs_inode *fs_inode_get(struct fs *fs, uint64_t ino);
/* Every inode: for (in = fs_inode_first(fs); in; in = fs_inode_next(fs, in));
 * to free `in` in the body, take the next one first.  No insertion meanwhile. */
struct fs_inode *fs_inode_first(struct fs *fs);
struct fs_inode *fs_inode_next(struct fs *fs, const struct fs_inode *in);
struct fs_inode *fs_inode_new(struct fs *fs, uint64_t ino);
void fs_inode_maybe_free(struct fs *fs, struct fs_inode *in);
void fs_inode_destroy(struct fs *fs, struct fs_inode *in);	/* whatever its references */
/* An internal reference that keeps `ino` in memory while the caller works
 * on it without fs->lock (NULL: no such inode).  No lock held. */
struct fs_inode *fs_inode_pin(struct fs *fs, uint64_t ino);
void fs_inode_unpin(struct fs *fs, struct fs_inode *in);
struct fs_dirent *fs_dirent_find(struct fs *fs, uint64_t parent, const char *name);
int fs_dirent_add(struct fs *fs, struct fs_inode *dir, const char *name, uint64_t ino);
void fs_dirent_remove(struct fs *fs, struct fs_inode *dir, struct fs_dirent *d);
/* A rename inside dir: d takes old's slot and cookie, old is freed. */
void fs_dirent_replace(struct fs *fs, struct fs_inode *dir, struct fs_dirent *old,
		       struct fs_dirent *d);
size_t fs_dir_slot(const struct fs_dir *dd, uint64_t cookie);	/* first entry >= cookie */
void fs_mark_dirty(struct fs *fs, struct fs_inode *in);
void fs_dirty_unlink(struct fs *fs, struct fs_inode *in);
/* The write-behind list: (re)join it at its tail, now; leave it. [L] */
void fs_behind_add(struct fs *fs, struct fs_inode *in);
void fs_behind_unlink(struct fs *fs, struct fs_inode *in);
/* The mode after a write or chown by someone else: no set-user-id bit, no
 * set-group-id bit where group execute is set (as the kernel does). */
uint32_t fs_mode_kill_suidgid(uint32_t mode);
/* Preallocation: an inode or a name that is not linked in yet:
 * fs_inode_insert / fs_dirent_insert cannot fail; an unused one is freed
 * with fs_inode_discard / free().  fs_dirent_alloc reserves a slot in dir:
 * at most one outstanding reservation per directory. */
struct fs_inode *fs_inode_alloc(struct fs *fs, uint64_t ino);
void fs_inode_insert(struct fs *fs, struct fs_inode *in);
void fs_inode_discard(struct fs *fs, struct fs_inode *in);
struct fs_dirent *fs_dirent_alloc(struct fs *fs, struct fs_inode *dir, const char *name,
				  uint64_t ino);
void fs_dirent_insert(struct fs *fs, struct fs_inode *dir, struct fs_dirent *d);

/* fs_namei.c */
void fs_fill_stat(struct fs *fs, const struct fs_inode *in, struct stat *st);

/* fs_mount.c: the layout mkfs gives dev (meta_zones 0: the default), a
 * new uuid.  0 or -errno (logged). */
int fs_layout(struct zdev *dev, uint32_t meta_zones, struct mlog_sb *sb);

/* fs_commit.c */
int fs_committer_start(struct fs *fs);
void fs_committer_stop(struct fs *fs);
void fs_kick_committer(struct fs *fs);	/* write out buffers and commit now */
void fs_commit_need_space(void *fs);	/* zalloc waits for a commit's resets */

/* fs_records.c: encoding (fs_log_*), decoding and replay, the snapshot.
 * Every operation validates, preallocates what its change needs, appends
 * its one record, and only then applies it with the fs_apply_* function of
 * that record type (fs_apply.c), which replay calls too and which cannot
 * fail: an in-line snapshot taken by the append must describe the state
 * before the record, and memory must be untouched when the append fails.
 * [L] */

/* Attributes as INODE and CREATE records carry them. */
struct fs_attr {
	uint64_t ino;
	uint32_t mode, uid, gid, nlink;
	uint64_t rdev, size;
	int64_t atime, mtime, ctime;
	uint8_t cls, src;		/* enum lifetime_class / lifetime_source */
};
void fs_attr_get(const struct fs_inode *in, struct fs_attr *a);

int fs_log_attr(struct fs *fs, struct fs_inode *in);	/* in's attributes as they are */
int fs_log_inode(struct fs *fs, const struct fs_attr *a);
int fs_log_state(struct fs *fs, uint64_t next_ino);	/* STATE: next_ino at least this */
/* CREATE of the prepared inode `in` (with its symlink target and xattrs). */
int fs_log_create(struct fs *fs, struct fs_inode *in, uint64_t parent, const char *name);
int fs_log_link(struct fs *fs, uint64_t parent, const char *name, uint64_t ino);
int fs_log_unlink(struct fs *fs, uint64_t parent, const char *name);
int fs_log_rename(struct fs *fs, uint64_t p, const char *n, uint64_t np,
		  const char *nn, unsigned int flags);
int fs_log_extent(struct fs *fs, uint64_t ino, uint64_t off, uint64_t len,
		  uint64_t dev, uint64_t size_min);
int fs_log_truncate(struct fs *fs, uint64_t ino, uint64_t size);
int fs_log_punch(struct fs *fs, uint64_t ino, uint64_t off, uint64_t len);
int fs_log_prealloc(struct fs *fs, uint64_t ino, uint64_t off, uint64_t len);
/* A run of a COPY or REMAP record: file [off, off+len) -> device dev
 * (REMAP also names the inode). */
struct fs_cext { uint64_t ino, off, len, dev; };
/* Records are at most MLOG_MAX_PAYLOAD: the runs one record carries. */
#define FS_COPY_MAX_RUNS ((MLOG_MAX_PAYLOAD - 64) / 24)
#define FS_REMAP_MAX_RUNS ((MLOG_MAX_PAYLOAD - 16) / 32)
/* COPY: dst's [off, off+len) becomes v[0..n) (file offsets inside it, in
 * order; the rest is a hole), size at least size, class cls/src. */
int fs_log_copy(struct fs *fs, uint64_t src, uint64_t dst, uint64_t off, uint64_t len,
		uint64_t size, uint8_t cls, uint8_t cls_src, const struct fs_cext *v, uint32_t n);
int fs_log_remap(struct fs *fs, const struct fs_cext *v, uint32_t n);
int fs_log_xattr_set(struct fs *fs, uint64_t ino, const char *name,
		     const void *value, size_t size);
int fs_log_xattr_del(struct fs *fs, uint64_t ino, const char *name);
/* The next snapshot's size (struct fs_inode's snap_bytes): after any change
 * to in's names, extents, xattrs or symlink, fs_snap_account(fs, in) counts
 * it again [L]; fs_snap_name_bytes is one name's share of its directory's
 * name_bytes; fs_snap_state_bytes is mlog's callback (any thread). */
void fs_snap_account(struct fs *fs, struct fs_inode *in);
uint64_t fs_snap_name_bytes(const char *name);
uint64_t fs_snap_state_bytes(void *arg);
int fs_replay_record(void *arg, uint16_t type, const void *payload,
		     uint32_t len, uint64_t lsn);
int fs_emit_snapshot(void *arg, struct mlog *m);

/* fs_apply.c: apply functions, one per record type, shared by the live
 * operation (after its append) and replay (after decoding and validation).
 * fs_block_size: the block size, also while replaying (before fs->bs is
 * set), 0 if unknown.  fs_is_below: ino is anc or below it (a loop counts
 * as below; depth is not limited). */
uint32_t fs_block_size(const struct fs *fs);
bool fs_is_below(struct fs *fs, uint64_t ino, uint64_t anc);
/* A new inode with attributes a, not in the table: its directory (parent
 * for '..') when a is a directory, a copy of target when not NULL.
 * 0 or -ENOMEM. */
int fs_inode_prepare(struct fs *fs, const struct fs_attr *a, uint64_t parent,
		     const char *target, struct fs_inode **out);
/* The checks of a RENAME (live: the errno to return; replay: any error
 * means a corrupt record): 1 = same inode, nothing to do; 0 = apply. */
int fs_rename_check(struct fs *fs, uint64_t p, const char *n, uint64_t np,
		    const char *nn, unsigned int flags);
void fs_apply_attr(struct fs *fs, struct fs_inode *in, const struct fs_attr *a);
void fs_apply_create(struct fs *fs, struct fs_inode *dir, struct fs_inode *in,
		     struct fs_dirent *d);
void fs_apply_link(struct fs *fs, struct fs_inode *dir, struct fs_inode *in,
		   struct fs_dirent *d);
void fs_apply_dirent(struct fs *fs, struct fs_inode *dir, struct fs_inode *in,
		     struct fs_dirent *d);
int fs_apply_unlink(struct fs *fs, uint64_t parent, const char *name);
/* d: the new name (np, nn) -> the source inode, preallocated; NULL for an
 * exchange (consumed or freed either way). */
int fs_apply_rename(struct fs *fs, uint64_t p, const char *n, uint64_t np,
		    const char *nn, unsigned int flags, struct fs_dirent *d);
void fs_apply_xattr_set(struct fs *fs, struct fs_inode *in, struct fs_xattr *x);
void fs_apply_xattr_del(struct fs *fs, struct fs_inode *in, const char *name);
void fs_apply_symlink(struct fs *fs, struct fs_inode *in, char *target);
void fs_drop_valid(void *arg, uint64_t dev, uint64_t len);	/* extmap drop cb */
/* Data records applied to memory, live (after the append) and at replay.
 * [L+RW]; fs_apply_extent fails only with -ENOMEM from the extent map. */
int fs_apply_extent(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len,
		    uint64_t dev, uint64_t size_min);
void fs_apply_truncate(struct fs *fs, struct fs_inode *in, uint64_t size);
void fs_apply_punch(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len);
/* PREALLOC: hold the holes of [off, off+len) (fs_pa_room'd for
 * fs_pa_holes ranges before the append). */
void fs_apply_prealloc(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len);
/* COPY (see fs_log_copy).  Live, the new references are counted first
 * (fs_share_prepare'd), then dst's old range is dropped.  -ENOMEM only
 * when no map room was reserved (extmap_reserve(n + 2)). */
int fs_apply_copy(struct fs *fs, struct fs_inode *dst, uint64_t off, uint64_t len,
		  uint64_t size, uint8_t cls, uint8_t cls_src, const struct fs_cext *v,
		  uint32_t n);
/* REMAP: every run's inode (if it still exists) maps [off, off+len) to
 * dev.  Live, the caller counted the new bytes (fs_share_add_new) and
 * reserved 2 map entries per run.  -ENOMEM as fs_apply_extent. */
int fs_apply_remap(struct fs *fs, const struct fs_cext *v, uint32_t n);

/* fs_copy.c: the shared-extent table (struct fs_share) and copies.  [L]
 * unless stated.  fs_share_rebuild: after replay, count every extent's
 * bytes (valid bytes once, extra references in the table); 0, -ENOMEM or
 * -EUCLEAN (more references than a block can count).  fs_share_unref: the
 * drop callback's work (one reference less; valid bytes of blocks whose
 * last reference went).  fs_share_prepare: room to add one reference to
 * every run of v (tables of their zones exist, no count overflows): 0,
 * -ENOMEM or -EMLINK; after it fs_share_ref cannot fail; fs_share_unprepare
 * frees what an unused preparation left.  fs_share_add_new: v's device
 * ranges (v sorted by dev) were just written and are referenced by v's
 * runs: valid bytes once per byte, the table for bytes several runs
 * reference (prepared: cannot fail then). */
int fs_share_rebuild(struct fs *fs);
void fs_share_fini(struct fs *fs);	/* no lock: teardown */
void fs_share_unref(struct fs *fs, uint64_t dev, uint64_t len);
int fs_share_prepare(struct fs *fs, const struct fs_cext *v, size_t n);
void fs_share_unprepare(struct fs *fs, const struct fs_cext *v, size_t n);
void fs_share_ref(struct fs *fs, uint64_t dev, uint64_t len);
int fs_share_add_new(struct fs *fs, const struct fs_cext *v, size_t n);
/* References beyond the first of the block at dev (0: unshared or unused). */
uint32_t fs_share_refs(const struct fs *fs, uint64_t dev);
/* Blocks of zone z whose refs > 0 (the table's own count) and the number
 * counted in its table now (fsck compares them). */
uint32_t fs_share_zone_count(const struct fs *fs, uint32_t z, uint32_t *counted);
/* Bytes of in's extents that other references share. */
uint64_t fs_share_file_bytes(const struct fs *fs, const struct fs_inode *in);
/* The shared-extent fields of st.  No lock held (takes fs->lock). */
void fs_share_fill_stats(struct fs *fs, struct fs_stats *st);

/* fs_data.c.  "Write-out" is writing a file's buffered chunks to zones
 * (fs_flush is FUSE's FLUSH, which writes out; zdev_flush empties the
 * device's volatile cache; a commit makes records durable).
 * [RW excl, drops] = called and returns with in->rw held
 * exclusively, but may release and re-take it meanwhile (to run device I/O
 * or to wait for the write-out in flight): state read before the call must
 * be re-read after it.  No other lock may be held across such a call. */
int fs_data_writeout(struct fs *fs, struct fs_inode *in, bool all);	/* [RW excl, drops] */
/* No write-out in flight (in->wb_busy false) when called: */
void fs_data_drop_buffers(struct fs *fs, struct fs_inode *in, uint64_t from);	/* [RW excl] */
/* Does a buffered chunk hold any of file bytes [from, to)? [RW] */
bool fs_data_buffered(const struct fs *fs, const struct fs_inode *in, uint64_t from, uint64_t to);
/* The first chunk whose index is >= idx (nchunks if none); whether page i
 * of chunk c is buffered.  [RW] */
uint32_t fs_data_chunk_pos(const struct fs_inode *in, uint64_t idx);
bool fs_data_page_present(const struct fs_chunk *c, uint32_t i);
/* The write buffer's own invariants (chunks sorted and unique, counts of
 * pages, complete chunks and bytes): 0 or -EUCLEAN.  O(chunks); for
 * tests.  [RW] */
int fs_data_check(const struct fs *fs, const struct fs_inode *in);
int fs_data_truncate(struct fs *fs, struct fs_inode *in, uint64_t size);	/* [RW excl, drops] */
/* Before anything but a write or truncate grows the file: the bytes of its
 * last block past the size become zeros in the buffer (the device's may
 * not be: a truncate into that block whose zeroed page was lost in a
 * crash), so that no byte cut off by a truncate comes back.  0 or -errno
 * (the block could not be read, or no memory). [RW excl] */
int fs_data_zero_tail(struct fs *fs, struct fs_inode *in);
void fs_data_wait_writeout(struct fs_inode *in);	/* [RW excl, drops] */
/* Forget the buffered pages of the blocks inside [from, to) (bytes, block
 * aligned): a record replaced them.  No write-out in flight. [RW excl] */
void fs_data_drop_range(struct fs *fs, struct fs_inode *in, uint64_t from, uint64_t to);

/* fs_lifetime.c: lifetime placement, state in struct fs_lt (fs->lt).
 * After replay: the rules file, the inference state, the files that exist
 * already; 0 or -errno (the mount fails).  Holds no lock on entry. */
int fs_lifetime_init(struct fs *fs);
void fs_lifetime_fini(struct fs *fs);	/* safe when init failed or never ran */
/* The class of a new inode (presets, rules, xattrs, inference) into
 * in->cls / in->cls_src. [L] */
void fs_lifetime_pick(struct fs *fs, struct fs_inode *dir, const char *name,
		      const struct fs_ctx *ctx, struct fs_inode *in);
/* A RELEASE of `in`: a table's size is final (the inference's level sizes
 * stop asking for it). [L] */
void fs_lifetime_note_release(struct fs *fs, struct fs_inode *in);
/* The last name of `in` is about to go (tid: 0 if unknown); the classes of
 * inferred tables whose level was corrected follow. [L] */
void fs_lifetime_note_unlink(struct fs *fs, struct fs_inode *in, uint32_t tid);
/* Read what was appended to the MANIFESTs being followed and apply the
 * exact levels.  No locks held; concurrent callers are serialised.  Called
 * periodically by the collector thread. */
void fs_lifetime_tail_manifests(struct fs *fs);
/* The inference statistics (zeros before init).  Any thread, no locks. */
/* The lifetime fields of st (lifetime_tables, lifetime_tables_corrected);
 * other fields untouched.  Any thread, no locks. */
void fs_lifetime_fill_stats(struct fs *fs, struct fs_stats *st);
/* The inferred LSM level of table ino, -1 if unknown or not a table
 * (tests, debugging).  Any thread, no locks. */
int fs_lifetime_level(struct fs *fs, uint64_t ino);

/* fs_prefetch.c */
int fs_pf_start(struct fs *fs);
void fs_pf_stop(struct fs *fs);
/* Bytes of the spare window buffers now (any thread, no locks). */
uint64_t fs_pf_spare_bytes(struct fs *fs);
/* Serve [a0, a0+len) (block-aligned) from prefetch buffers and drive
 * read-ahead; false = read it from the device.  With out, the bytes are
 * copied there; else *rb gets a reference to the buffer holding them
 * (release with fs_rbuf_put).  [in->rw shared] */
bool fs_pf_read(struct fs *fs, struct fs_inode *in, uint64_t a0, uint64_t len, uint8_t *out,
		struct fs_rbuf *rb);
void fs_pf_data_put(struct fs_pf_data *d);	/* any thread, no locks */
void fs_pf_invalidate(struct fs *fs, struct fs_inode *in);	/* [in->rw excl] */
void fs_pf_free(struct fs *fs, struct fs_inode *in);		/* no references left */

/* fs_prealloc.c: a file's fallocated, unwritten ranges (struct fs_pa).
 * [L+RW] to change, either to read.  fs_pa_room: room for `extra` more
 * ranges (0 or -ENOMEM), so that the functions after it cannot fail;
 * fs_pa_holes: how many ranges fs_pa_add of [off, off+len) may add at the
 * most; fs_pa_add: hold the holes of [off, off+len) that no range holds
 * (returns the bytes added); fs_pa_sub: release what ranges hold of
 * [off, off+len) (len may run to UINT64_MAX); fs_pa_overlap: the bytes of
 * [off, off+len) ranges hold; fs_pa_free: release everything (the inode
 * goes). */
int fs_pa_room(struct fs_inode *in, uint32_t extra);
uint32_t fs_pa_holes(const struct fs_inode *in, uint64_t off, uint64_t len);
uint64_t fs_pa_add(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len);
void fs_pa_sub(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len);
uint64_t fs_pa_overlap(const struct fs_inode *in, uint64_t off, uint64_t len);
void fs_pa_free(struct fs *fs, struct fs_inode *in);

/* fs_xattr.c */
/* A stored attribute not on any inode yet (copies of name and value), or
 * NULL; fs_xattr_attach puts it on in, replacing one of the same name
 * (cannot fail); fs_xattr_free frees one that was not attached. */
struct fs_xattr *fs_xattr_new(const char *name, const void *v, size_t size);
void fs_xattr_attach(struct fs_inode *in, struct fs_xattr *x);
void fs_xattr_free(struct fs_xattr *x);
int fs_xattr_set_raw(struct fs_inode *in, const char *name, const void *v, size_t size);
int fs_xattr_del_raw(struct fs_inode *in, const char *name);
struct fs_xattr *fs_xattr_find(struct fs_inode *in, const char *name);
void fs_xattr_free_all(struct fs_inode *in);
/* The class a user.zonefuse.lifetime value names ("long", "long rule\n"):
 * 0, or -EINVAL when it names none. */
int fs_xattr_lifetime_parse(const void *v, size_t size, enum lifetime_class *cls);

#define FS_XATTR_LIFETIME "user.zonefuse.lifetime"
#define FS_XATTR_MAX_VALUE 65536	/* bytes: largest stored value (XATTR_SIZE_MAX) */
/* bytes: the stored attributes of one inode, names (with their NUL) and
 * values together; a set that would pass it is -ENOSPC.  All metadata
 * lives in memory, so this bounds what one inode can make the daemon keep. */
#define FS_XATTR_MAX_TOTAL (256u * 1024u)

/* user.*, trusted.*, security.* and the two POSIX ACL names are stored. */
bool fs_xattr_name_supported(const char *name);
/* chmod of in to mode: rewrite its access ACL, if any, to match (logged
 * before the mode, see fs_xattr.c).  0 or -errno. [L] */
int fs_acl_chmod_locked(struct fs *fs, struct fs_inode *in, uint32_t mode);
/* The ACLs a new inode inherits from dir's default ACL (fs_acl_inherit):
 * prepare limits *mode by it and allocates the attributes (none when dir
 * has no default ACL), attach puts them on the prepared inode before its
 * CREATE is logged (cannot fail), free drops unattached ones.  0 or
 * -ENOMEM. [L] */
struct fs_acl_new { struct fs_xattr *access, *def; };
int fs_acl_new_prepare(struct fs_inode *dir, uint32_t *mode, struct fs_acl_new *n);
void fs_acl_new_attach(struct fs_inode *in, struct fs_acl_new *n);
void fs_acl_new_free(struct fs_acl_new *n);

#endif
