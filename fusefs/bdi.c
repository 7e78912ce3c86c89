/* bdi — writeback and readahead settings of the mount's bdi (bdi.h). */
#include "fusefs/bdi.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "tools/zf_tool.h"

int fusefs_bdi_parse_mode(const char *s, enum fusefs_bdi_mode *out)
{
	static const char *const names[] = { "global", "strict", "off" };
	for (unsigned i = 0; i < ZF_ARRAY_SIZE(names); i++) {
		if (!strcmp(s, names[i])) {
			*out = (enum fusefs_bdi_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* Writes value to dir/name; 0 or -errno. */
static int put(const char *dir, const char *name, const char *value)
{
	char path[PATH_MAX + 32];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return -ENAMETOOLONG;
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(value);
	ssize_t n = write(fd, value, len);
	int r = n < 0 ? -errno : (size_t)n == len ? 0 : -EIO;
	close(fd);
	return r;
}

/* One setting; counts it in *done, or logs why it was skipped. */
static void set(const char *dir, const char *name, uint64_t value, int *done)
{
	char v[32];
	snprintf(v, sizeof(v), "%" PRIu64, value);
	int r = put(dir, name, v);
	if (r == 0)
		(*done)++;
	else
		zf_info("bdi %s/%s not set to %s (%s): the kernel's default stays", dir, name, v,
			strerror(-r));
}

int fusefs_bdi_tune(const char *mountpoint, const struct fusefs_bdi_conf *c, const char *sysfs)
{
	struct zf_mnt m;
	char dir[PATH_MAX];
	int done = 0;

	if (c->mode == FUSEFS_BDI_OFF)
		return 0;
	int r = zf_find_mount_at_real(mountpoint, &m);
	if (r < 0)
		return r;
	/* fuse_bdi_init names a fuseblk mount's bdi after the block device,
	 * with a suffix, and every other FUSE mount's after its anonymous
	 * st_dev. */
	snprintf(dir, sizeof(dir), "%s/class/bdi/%u:%u%s", sysfs, m.dev_major,
		 m.dev_minor, strcmp(m.type, "fuseblk") ? "" : "-fuseblk");
	if (access(dir, F_OK) != 0) {
		zf_info("no bdi directory %s (%s): writeback settings stay the kernel's", dir,
			strerror(errno));
		return 0;
	}
	/* max_bytes first: with strict_limit still on, the raised cap is in
	 * force before the limit is lifted, never the other way round. */
	if (c->max_bytes)
		set(dir, "max_bytes", c->max_bytes, &done);
	set(dir, "strict_limit", c->mode == FUSEFS_BDI_STRICT, &done);
	if (c->read_ahead_kb)
		set(dir, "read_ahead_kb", c->read_ahead_kb, &done);
	return done;
}
