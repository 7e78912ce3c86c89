/* fs_commit — making metadata durable: the commit (and the snapshot that
 * follows when one is due), syncfs, and the commit thread that writes out
 * closed files' buffers write_behind_ms after their close (the
 * write-behind), and aged buffers and commits every commit_interval_ms. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_commit.h"
#include "fs/fs_internal.h"

/* ---- commit ---- */

/* A snapshot when one is due.  A snapshot rewrites the whole state into a
 * new epoch, so it also makes durable whatever a failed commit left
 * pending, and it repairs a log broken by a device error. [no locks] */
static int snapshot_if_due(struct fs *fs)
{
	int ret = 0;

	if (!mlog_should_snapshot(fs->mlog))
		return 0;
	pthread_mutex_lock(&fs->lock);
	if (mlog_should_snapshot(fs->mlog)) {
		ret = mlog_snapshot(fs->mlog, fs_emit_snapshot, fs);
		if (ret) {
			fs->meta_errors++;
			zf_warn("metadata snapshot failed: %s; retried at the next commit",
				strerror(-ret));
		}
	}
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_commit(struct fs *fs)
{
	uint64_t t = zalloc_commit_begin(fs->za);
	int ret = mlog_commit(fs->mlog);
	if (ret) {
		/* The caller hears of it (a failed flush may have lost data
		 * written before it).  A log broken by the error (a zone no
		 * longer matches the layout) is cured by a snapshot: one is
		 * tried now, and at every commit until it succeeds. */
		fs->meta_errors++;
		zf_err("metadata commit failed: %s", strerror(-ret));
		snapshot_if_due(fs);
		return ret;
	}
	fs->commits++;
	ret = zalloc_commit_end(fs->za, t);
	if (ret < 0) {
		zf_err("zone reset after commit failed: %s", strerror(-ret));
		return ret;
	}
	/* Everything is durable now: a snapshot that fails is retried later,
	 * never reported to the caller as a failed fsync. */
	snapshot_if_due(fs);
	return 0;
}


/* Write out all of a pinned file's buffers, unless it is busy: a file
 * whose lock is held is being written by its owner, who may be waiting
 * for a commit from this thread, and one with a write-out in flight runs
 * its device I/O without in->rw; the commit thread never waits for
 * either.  0, -EBUSY or the write-out's -errno. */
static int try_writeout(struct fs *fs, struct fs_inode *in)
{
	if (pthread_rwlock_trywrlock(&in->rw))
		return -EBUSY;
	int r = in->wb_busy ? -EBUSY : fs_data_writeout(fs, in, true);
	pthread_rwlock_unlock(&in->rw);
	return r;
}

/* Write out every inode's buffers whose data is older than `age_ns`. */
static int writeout_aged(struct fs *fs, uint64_t age_ns)
{
	int ret = 0;
	uint64_t now = zf_now_ns();

	pthread_mutex_lock(&fs->lock);
	size_t budget = fs->ninodes;	/* each inode visited at most once */
	pthread_mutex_unlock(&fs->lock);
	while (budget--) {
		pthread_mutex_lock(&fs->lock);
		struct fs_inode *in = fs->dirty_head;
		if (!in || (age_ns && now - in->dirty_since_ns < age_ns)) {
			pthread_mutex_unlock(&fs->lock);
			break;
		}
		fs_dirty_unlink(fs, in);
		in->pins++;
		pthread_mutex_unlock(&fs->lock);
		int r = try_writeout(fs, in);	/* busy: put back, retried */
		pthread_mutex_lock(&fs->lock);
		if (r && r != -EBUSY && !ret)
			ret = r;
		if (r)	/* keep it on the list, retried next round */
			fs_mark_dirty(fs, in);
		in->pins--;
		fs_inode_maybe_free(fs, in);
		pthread_mutex_unlock(&fs->lock);
		if (r && r != -EBUSY)
			break;
	}
	return ret;
}

/* The write-behind: write out the buffers of files closed at least age_ns
 * ago (fs_release left them on the list), oldest close first.  An unlinked
 * one stays on the list until it is freed (its buffers were never
 * needed); one opened again leaves it (its next close decides).  A file
 * busy with a writer ends the round; the periodic commit's write-out
 * takes it, as it takes every dirty file. */
static void writeout_behind(struct fs *fs, uint64_t age_ns)
{
	uint64_t now = zf_now_ns();

	for (;;) {
		pthread_mutex_lock(&fs->lock);
		struct fs_inode *in, *next;
		for (in = fs->behind_head; in; in = next) {
			next = in->bnext;
			if (in->nopen)	/* open again: its next close decides */
				fs_behind_unlink(fs, in);
			else if (in->nlink)
				break;
		}
		if (!in || now - in->closed_ns < age_ns) {
			pthread_mutex_unlock(&fs->lock);
			return;
		}
		fs_behind_unlink(fs, in);
		in->pins++;
		pthread_mutex_unlock(&fs->lock);
		int r = try_writeout(fs, in);
		if (r && r != -EBUSY)	/* the bytes stay buffered: the next commit or fsync reports */
			zf_warn("inode %llu: write-behind failed: %s", (unsigned long long)in->ino,
				strerror(-r));
		pthread_mutex_lock(&fs->lock);
		in->pins--;
		fs_inode_maybe_free(fs, in);
		pthread_mutex_unlock(&fs->lock);
		if (r == -EBUSY)	/* the rest next round; this one's commit writes it */
			return;
	}
}

int fs_sync(struct fs *fs)
{
	int ret = writeout_aged(fs, 0);
	pthread_mutex_lock(&fs->lock);
	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in))
		if (in->attr_dirty && !ret)
			ret = fs_log_attr(fs, in);
	pthread_mutex_unlock(&fs->lock);
	int r = fs_commit(fs);
	return ret ? ret : r;
}

static void *committer_main(void *arg)
{
	struct fs *fs = arg;
	uint64_t interval = (uint64_t)fs->opts.commit_interval_ms * 1000000ull;
	uint64_t behind = (uint64_t)fs->opts.write_behind_ms * 1000000ull;
	/* Wake for the write-behind twice per delay, commit every interval. */
	uint64_t tick = behind && behind / 2 < interval ? ZF_MAX(behind / 2, 1000000ull) : interval;
	uint64_t due = zf_now_ns() + interval;

	pthread_mutex_lock(&fs->cmt.lock);
	while (!fs->cmt.stop) {
		struct timespec ts = zf_realtime_after(tick);
		if (!fs->cmt.kick && !fs->cmt.commit_only)
			pthread_cond_timedwait(&fs->cmt.cond, &fs->cmt.lock, &ts);
		bool kicked = fs->cmt.kick, commit_only = fs->cmt.commit_only;
		fs->cmt.kick = fs->cmt.commit_only = false;
		if (fs->cmt.stop)
			break;
		pthread_mutex_unlock(&fs->cmt.lock);
		if (behind && !kicked && !commit_only)
			writeout_behind(fs, behind);
		uint64_t now = zf_now_ns();
		if (kicked || commit_only || now + tick / 2 >= due) {
			if (!commit_only || kicked)
				writeout_aged(fs, kicked ? 0 : interval);
			fs_commit(fs);
			due = now + interval;
		}
		pthread_mutex_lock(&fs->cmt.lock);
	}
	pthread_mutex_unlock(&fs->cmt.lock);
	return NULL;
}

void fs_kick_committer(struct fs *fs)
{
	pthread_mutex_lock(&fs->cmt.lock);
	fs->cmt.kick = true;
	pthread_cond_signal(&fs->cmt.cond);
	pthread_mutex_unlock(&fs->cmt.lock);
}

/* zalloc waits for zones that only a commit can reset: wake the committer,
 * or commit here when there is none (the caller holds no fs or zalloc
 * lock). */
void fs_commit_need_space(void *arg)
{
	struct fs *fs = arg;
	if (fs->cmt.running) {
		pthread_mutex_lock(&fs->cmt.lock);
		fs->cmt.commit_only = true;
		pthread_cond_signal(&fs->cmt.cond);
		pthread_mutex_unlock(&fs->cmt.lock);
	} else {
		fs_commit(fs);
	}
}

int fs_committer_start(struct fs *fs)
{
	if (fs->read_only || !fs->opts.commit_interval_ms || fs->cmt.running)
		return 0;
	int ret = -pthread_create(&fs->cmt.thread, NULL, committer_main, fs);
	if (!ret)
		fs->cmt.running = true;
	return ret;
}

void fs_committer_stop(struct fs *fs)
{
	if (!fs->cmt.running)
		return;
	pthread_mutex_lock(&fs->cmt.lock);
	fs->cmt.stop = true;
	pthread_cond_signal(&fs->cmt.cond);
	pthread_mutex_unlock(&fs->cmt.lock);
	pthread_join(fs->cmt.thread, NULL);
	fs->cmt.running = false;
}
