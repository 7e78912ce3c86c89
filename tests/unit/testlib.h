/* testlib: the emulated-device fixture shared by the fs-level unit tests
 * (test_fs, test_faults, test_records, ...).
 *
 * A test creates an emulated zoned device file in a fresh mkdtemp()
 * directory, opens it, formats and mounts it, and at teardown unmounts,
 * closes and removes both.  The test keeps its own `dev` and `fs` pointers;
 * these helpers fill and clear them.  Failures abort the test through
 * Check's ck_assert.  Not thread safe: one fixture per test (Check forks
 * every test).
 */
#ifndef ZF_TESTLIB_H
#define ZF_TESTLIB_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/fs.h"
#include "gc/gc.h"

struct tl_dev {
	char dir[256];		/* the temp directory */
	char path[300];		/* the device file in it */
};

/* Create the device file: zones of zone_size bytes, 4 KiB blocks, the
 * same max open and max active.  tag names the temp directory. */
void tl_dev_create(struct tl_dev *t, const char *tag, uint32_t zones,
		   uint64_t zone_size, uint32_t max_active);
/* The same with every emulator parameter given (a performance model...). */
void tl_dev_create_params(struct tl_dev *t, const char *tag,
			  const struct zdev_emu_params *p);
void tl_dev_open(const struct tl_dev *t, struct zdev **dev);
/* Mount with commits only on demand (commit_interval_ms 0) and
 * buffer_bytes of write buffers.  Returns fs_mount()'s result. */
int tl_mount(struct zdev *dev, uint64_t buffer_bytes, bool read_only, struct fs **fs);
/* Unmount *fs (must succeed), mount again as tl_mount does with
 * read-ahead windows of `window` bytes (0 = off), and start its threads. */
void tl_remount_prefetch(struct zdev *dev, uint64_t buffer_bytes, uint64_t window,
			 struct fs **fs);
/* fs_get_stats() as a value. */
struct fs_stats tl_stats(struct fs *fs);
/* tl_dev_create, then format it (mkfs defaults). */
void tl_dev_make(struct tl_dev *t, const char *tag, uint32_t zones,
		 uint64_t zone_size, uint32_t max_active);
/* Open and mount for the lifetime and GC tests: commits on demand, one
 * zone per write-out (stripe_width 1), a rules file (or NULL), placement
 * on or off.  tl_unmount_close: unmount (must succeed) and close. */
struct fs *tl_mount_placement(const struct tl_dev *t, struct zdev **dev,
			      const char *hints, bool placement_off);
void tl_unmount_close(struct fs *fs, struct zdev *dev);
/* Remove the device file and its directory (once). */
void tl_dev_remove(struct tl_dev *t);
/* Unmount (result ignored), close, remove the files; safe on NULLs. */
void tl_teardown(struct tl_dev *t, struct zdev **dev, struct fs **fs);
/* Write 16 blocks at the write pointer of the open meta zone among
 * [meta_first, +meta_count) behind the log's back: more than its next commit
 * writes, so that commit finds the zone no longer matching its layout (the
 * log is broken until a snapshot). */
void tl_write_behind_log(struct zdev *dev, uint32_t meta_first, uint32_t meta_count);
/* A new inode (fs_mkdir for a directory mode, else fs_mknod) named name
 * in parent, without the lookup reference; its number. */
uint64_t tl_mk(struct fs *fs, uint64_t parent, const char *name, mode_t mode);
/* fs_check() report callback: prints each finding to stderr. */
void tl_fsck_print(void *arg, const char *fmt, ...);
/* fs_check of the unmounted dev finds nothing (each finding printed). */
void tl_fsck_clean(struct zdev *dev);
/* kill -9 and power loss: the volatile cache dropped, *fs freed, the
 * device reopened, fsck clean, mounted again as tl_mount does. */
void tl_power_cycle(const struct tl_dev *t, struct zdev **dev, struct fs **fs,
		    uint64_t buffer_bytes);
/* Run every test of s (and free the runner): main()'s exit status. */
struct Suite;
int tl_run(struct Suite *s);

#endif
