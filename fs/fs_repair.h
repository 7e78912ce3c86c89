/* fs_repair — private interface of the repairing fsck and of the mount's
 * read-only fallback (fs_repair.c).  Not for use outside fs/.
 *
 * Purpose: a mount never locks data away.  Replay goes through
 * fs_repair_replay_record, which applies records until the first one that
 * cannot be applied and ignores that one and every later one (the cut);
 * when no epoch of the log is complete, mount replays the newest one that
 * began up to its damage (MLOG_OPEN_SALVAGE).  Either way the in-memory
 * state is then made consistent by fs_repair_memory (a root, names that
 * point at inodes, every inode reachable, link counts, extents inside the
 * data zones and below their write pointers), and:
 *   - a plain mount comes up read-only with that state and logs one line
 *     (what fsck.zonefuse -y would do); read-write needs a clean log;
 *   - fsck (fs_fsck) counts every change as a problem; with -p/-y it mounts
 *     read-write with the changes, whose mount snapshot writes them as a new
 *     epoch: the old epoch stays the valid one until the new epoch's
 *     SNAP_END is durable, so a crash during a repair leaves the old state
 *     and the repair is simply run again.
 *
 * Invariants: fs_repair_memory runs after replay and before the zone
 * allocator is built (mount_zones), with no other thread running; it
 * changes memory only (the mount snapshot persists it) and leaves a state
 * that replay of that snapshot accepts.
 * Thread safety: mount-time only (single thread); no locks taken.
 */
#ifndef ZONEFUSE_FS_REPAIR_H
#define ZONEFUSE_FS_REPAIR_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/fs.h"

struct fs;

/* Problem codes, one per kind of finding (the table in fs_repair.c says
 * whether -p may fix it alone and what the fix is). */
enum fs_problem {
	FS_PR_LOG_CUT = 1,	/* a record replay cannot apply: the log is cut there */
	FS_PR_SALVAGE,		/* no complete epoch: the newest is salvaged */
	FS_PR_LOG_DAMAGED,	/* a damaged record with valid records after it */
	FS_PR_NO_ROOT,		/* no root directory */
	FS_PR_NAME_DANGLING,	/* a name points at a missing inode */
	FS_PR_DIR_NAMES,	/* a directory with more than one name */
	FS_PR_UNREACHABLE,	/* an inode no path from the root reaches */
	FS_PR_NLINK,		/* a link count differs from the names */
	FS_PR_EXTENT_BAD,	/* an extent outside the data zones or their data */
	FS_PR_EXTENT_PAST_SIZE,	/* an extent beyond the file's size */
	FS_PR_NEXT_INO,		/* the next inode number is in use */
	FS_PR_CHECK,		/* a finding of the checks (fs_check.c) */
	FS_PR_RECREATE,		/* no metadata left to salvage: re-created empty */
	FS_PR_NR
};

/* One repair run: what it may change and what it found. */
struct fs_repair {
	enum fs_fsck_mode mode;	/* FS_FSCK_CHECK: change memory only, to report */
	enum fs_fsck_mode asked;	/* what the user asked (the wording of reports) */
	bool quiet;		/* the mount's fallback: no report lines */
	fs_report_fn report;
	void *arg;
	int found;		/* problems found */
	int unsafe;		/* ... of them not fixable by -p */
	uint64_t count[FS_PR_NR];
	uint64_t lost_bytes;	/* file bytes dropped (extents) */
	uint64_t lost_names;	/* names dropped */
	uint64_t lost_records;	/* log records not applied */
	uint64_t linked;	/* inodes linked into /lost+found */
};

/* What replay could not apply (kept in struct fs). */
struct fs_cut {
	bool cut;		/* a record could not be applied (plain mount:
				 * it and every later one are not applied) */
	bool salvaged;		/* no complete epoch: a partial one was replayed */
	uint16_t type;		/* the first record not applied */
	uint64_t lsn;
	uint64_t skipped;	/* records not applied (a repair run skips each
				 * record it cannot apply and goes on) */
};

/* Sorted inode numbers (fs_check.c and fs_repair.c): qsort's comparison;
 * how often v appears in the sorted t[0..n); the target of every name,
 * sorted, in a malloc'ed array of *n (NULL: no memory).  [L] */
int fs_cmp_u64(const void *a, const void *b);
uint32_t fs_count_sorted(const uint64_t *t, size_t n, uint64_t v);
uint64_t *fs_name_targets(struct fs *fs, size_t *n);

/* mlog_replay_fn: fs_replay_record until the first record it rejects
 * (-EUCLEAN), then nothing (the cut is recorded in fs->cut). */
int fs_repair_replay_record(void *arg, uint16_t type, const void *payload,
			    uint32_t len, uint64_t lsn);

/* mlog_open with fs_repair_replay_record into fs (fs->sb, fs->mlog); when
 * no epoch is complete and fs->repair or fs->repair_fallback is set, the
 * newest that began is salvaged (fs->cut.salvaged).  0 or -errno. */
int fs_repair_open_log(struct fs *fs, unsigned int flags);

/* After replay: with fs->repair set, the repairs of its mode; else, when
 * replay was cut or salvaged, the repairs in memory and the mount turned
 * read-only with one line logged.  0 or -errno (-ENOMEM). */
int fs_repair_after_replay(struct fs *fs);

/* One check pass (fs_check.c): mount read-only with r's repairs in memory
 * (r->mode FS_FSCK_CHECK), then the checks; every finding counts in r.
 * 0 or -errno (-EUCLEAN: nothing could be mounted, even salvaged). */
int fs_check_pass(struct zdev *dev, struct fs_repair *r, bool verbose);

/* Mount as fs_mount does, for a repair run (fsck).  fs_mount.c. */
int fs_mount_repair(struct zdev *dev, const struct fs_opts *o, struct fs_repair *r,
		    struct fs **out);

#endif
