/* libFuzzer target: fs record replay (fs_replay_record) with arbitrary
 * record sequences, on a real (read-only mounted) fs, then every read-only
 * entry point on the resulting tree.
 * Input: records {u8 type (FS_REC_STATE + type % 16), u16 len, payload}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_internal.h"
#include "tests/fuzz/fuzz_common.h"

static const uint8_t *pristine;
static size_t pristine_len;

/* a formatted device with a little content, dumped once */
static void init(struct zdev *dev)
{
	struct fs_opts o;
	struct fs *fs;
	uint8_t *img;
	if (fs_mkfs(dev, &(struct fs_mkfs_opts){ .force = true }))
		abort();
	fz_opts(&o, false);
	if (fs_mount(dev, &o, &fs))
		abort();
	fz_workload(fs, 1);
	if (fs_unmount(fs))
		abort();
	pristine_len = fz_dump(dev, 0, &img);
	pristine = img;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zdev *dev = fz_device();
	struct fs_opts o;
	struct fs *fs;

	if (!pristine)
		init(dev);
	fz_load(dev, pristine, pristine_len);
	fz_opts(&o, true);
	if (fs_mount(dev, &o, &fs))
		abort();
	/* as at mount: applied, not appended, device bytes not accounted */
	fs->applying_log = true;
	fs->valid_counted = false;
	size_t pos = 0;
	while (pos + 3 <= size) {
		uint16_t type = (uint16_t)(FS_REC_STATE + data[pos] % 16);
		uint32_t len = (uint32_t)data[pos + 1] | (uint32_t)data[pos + 2] << 8;
		pos += 3;
		if (len > size - pos)
			len = (uint32_t)(size - pos);
		/* the payload is copied so ASan sees reads past its end */
		uint8_t *p = malloc(len ? len : 1);
		memcpy(p, data + pos, len);
		int r = fs_replay_record(fs, type, p, len, pos);
		free(p);
		pos += len;
		if (r < 0)
			break;
	}
	fs->applying_log = false;
	fz_walk(fs);
	fs_unmount(fs);
	return 0;
}
