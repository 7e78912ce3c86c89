/* libFuzzer target: mount-time recovery from a mutated device image.
 *   fsck (fs_check); a read-only mount and a walk of everything; a
 *   read-write mount (replay, zone reconciliation, mount snapshot), a small
 *   workload, unmount -- and then what that wrote must mount again. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz_common.h"

static void quiet(void *arg, const char *fmt, ...)
{
	(void)arg;
	(void)fmt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zdev *dev = fz_device();
	struct fs_opts o;
	struct fs *fs;

	fz_load(dev, data, size);
	fs_check(dev, true, quiet, NULL);
	fz_opts(&o, true);
	if (fs_mount(dev, &o, &fs) == 0) {
		fz_walk(fs);
		fs_unmount(fs);
	}
	fz_opts(&o, false);
	if (fs_mount(dev, &o, &fs) != 0)
		return 0;
	fz_walk(fs);
	fz_workload(fs, (uint32_t)size);
	int ret = fs_unmount(fs);
	if (ret == 0) {
		fz_opts(&o, true);
		if (fs_mount(dev, &o, &fs) != 0) {
			fprintf(stderr, "fuzz_mount: a file system that mounted read-write and "
				"unmounted cleanly does not mount again\n");
			abort();
		}
		fz_walk(fs);
		fs_unmount(fs);
	}
	return 0;
}
