/* bdi — the kernel's writeback and readahead settings of the mount's
 * backing device info (/sys/class/bdi/<major:minor>[-fuseblk]/).
 *
 * Purpose: the kernel gives every FUSE bdi a strict dirty limit of 1 % of
 * the dirty threshold (strict_limit=1, max_ratio=1), which throttles every
 * buffered writer as soon as a few MiB of the mount are dirty, and caps
 * its readahead at 128 KiB whatever max_readahead INIT asked for.  Right
 * after the session is mounted, fusefs_bdi_tune sets, when it can:
 *   - mode FUSEFS_BDI_GLOBAL: strict_limit=0 and max_bytes=max_bytes: the
 *     mount's dirty pages are bounded by the kernel's global dirty limit
 *     (vm.dirty_ratio / dirty_bytes) like a local file system's, and its
 *     share by max_bytes once writeback throttles;
 *   - mode FUSEFS_BDI_STRICT: strict_limit=1 (the kernel's own for FUSE;
 *     written so that a mount tuned GLOBAL can be made strict again, as
 *     fusefs does while space is low) and max_bytes: the mount never holds
 *     more than max_bytes of dirty pages;
 *   - mode FUSEFS_BDI_OFF: nothing is written;
 *   - read_ahead_kb (any mode but OFF, when nonzero).
 * A file that is missing (kernels before 6.2 have no strict_limit or
 * max_bytes) or not writable (not root) is skipped with one info message;
 * that is never an error: the mount works with the kernel's defaults.
 * Invariants: called once per mount, after fuse_session_mount and before
 * the mount point is touched (it reads /proc/self/mountinfo and sysfs only,
 * never the mount itself, which cannot answer until the session serves).
 * Thread safety: not thread-safe; the daemon calls it from main().
 */
#ifndef ZONEFUSE_FUSEFS_BDI_H
#define ZONEFUSE_FUSEFS_BDI_H

#include <stdint.h>

enum fusefs_bdi_mode { FUSEFS_BDI_GLOBAL = 0, FUSEFS_BDI_STRICT, FUSEFS_BDI_OFF };

struct fusefs_bdi_conf {
	enum fusefs_bdi_mode mode;
	uint64_t max_bytes;		/* bytes; 0 = leave max_bytes alone */
	unsigned int read_ahead_kb;	/* KiB; 0 = leave read_ahead_kb alone */
};

/* Parses the value of -o bdi_limit= ("global", "strict", "off"); 0 or
 * -EINVAL. */
int fusefs_bdi_parse_mode(const char *s, enum fusefs_bdi_mode *out);

/* Tunes the bdi of the mount at mountpoint (a real path, as libfuse keeps
 * it).  Returns the number of settings written (0 when none could be, which
 * is not a failure), or -errno when the mount is not in mountinfo.  sysfs
 * is the directory holding class/bdi ("/sys"; tests pass a fake tree). */
int fusefs_bdi_tune(const char *mountpoint, const struct fusefs_bdi_conf *c, const char *sysfs);

#endif
