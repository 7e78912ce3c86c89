/* fs_commit — the commit thread's state, private to the fs core: owned by
 * fs_commit.c, held in struct fs (fs->cmt); its functions are in
 * fs_internal.h, fs_commit and fs_sync in fs.h.
 *
 * Purpose: one thread per mount that wakes every commit_interval_ms, or
 * when kicked, writes out the buffers of files closed write_behind_ms ago
 * (the write-behind) and of aged dirty files, and commits the metadata log.
 *
 * Invariants: `running` is true exactly while the thread exists, from a
 * successful fs_committer_start until fs_committer_stop returns; nothing
 * starts it on a read-only mount or with commit_interval_ms 0.  A kick
 * (write out everything, then commit) and commit_only (commit, so that
 * zalloc can reset zones) are consumed by the thread's next round.
 *
 * Thread safety: fs_committer_start and _stop are called by mount and
 * unmount only; fs_kick_committer and fs_commit_need_space by any thread
 * holding no fs or zalloc lock.  Lock order: cmt.lock is a leaf: the
 * thread drops it before it writes out or commits (which take in->rw,
 * fs->lock, mlog and zalloc locks).
 */
#ifndef ZONEFUSE_FS_COMMIT_H
#define ZONEFUSE_FS_COMMIT_H

#include <pthread.h>
#include <stdbool.h>

struct fs_committer {
	pthread_t thread;		/* set by start, joined by stop */
	bool running;			/* set and cleared by start/stop only */
	pthread_mutex_t lock;		/* leaf; protects the three flags */
	pthread_cond_t cond;
	bool stop, kick, commit_only;	/* [lock] */
};

#endif
