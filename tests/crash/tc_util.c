/* tc_util: see tc_util.h. */
#include "tc_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/zf_common.h"

const char *tc_prog = "tc";

void tc_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", tc_prog);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

uint64_t tc_fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

void tc_copy_image(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	struct stat st;
	static char buf[1 << 20];

	if (in < 0 || out < 0 || fstat(in, &st))
		tc_die("copy %s -> %s: %s", src, dst, strerror(errno));
	if (ftruncate(out, st.st_size))
		tc_die("copy %s: %s", dst, strerror(errno));
	off_t pos = 0;
	while (pos < st.st_size) {
		off_t d = lseek(in, pos, SEEK_DATA);
		if (d < 0)
			break;
		off_t h = lseek(in, d, SEEK_HOLE);
		if (h < 0)
			h = st.st_size;
		for (off_t o = d; o < h;) {
			size_t n = (size_t)ZF_MIN((off_t)sizeof(buf), h - o);
			ssize_t r = pread(in, buf, n, o);
			if (r <= 0 || pwrite(out, buf, (size_t)r, o) != r)
				tc_die("copy %s: %s", src, strerror(errno));
			o += r;
		}
		pos = h;
	}
	close(in);
	close(out);
}

void tc_scratch_dir(char *dir, size_t size)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, size, "%s/%s-XXXXXX", tmp, tc_prog);
	if (!mkdtemp(dir))
		tc_die("mkdtemp %s: %s", dir, strerror(errno));
}

uint64_t tc_mk(struct fs *fs, uint64_t parent, const char *name, mode_t mode)
{
	struct stat st;
	if (S_ISDIR(mode))
		TC_CHECK(fs_mkdir(fs, parent, name, mode, NULL, &st));
	else
		TC_CHECK(fs_mknod(fs, parent, name, mode, 0, NULL, &st));
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

struct fs *tc_make_fs(const char *path, uint32_t zones, uint64_t zone_size, struct zdev **dev)
{
	struct zdev_emu_params p = { .zone_size = zone_size, .nr_zones = zones, .block_size = 4096 };
	int err;

	TC_CHECK(zdev_emu_create(path, &p, true));
	TC_CHECK(zdev_open(path, NULL, dev));
	TC_CHECK(fs_mkfs(*dev, NULL));
	struct fs *fs = tc_mount(*dev, false, &err);
	if (!fs)
		tc_die("mount %s: %s", path, strerror(-err));
	return fs;
}

struct fs *tc_mount(struct zdev *dev, bool read_only, int *err)
{
	struct fs_opts o;
	struct fs *fs = NULL;

	fs_opts_default(&o);
	o.commit_interval_ms = 0;
	o.buffer_bytes = 16u << 20;
	o.stripe_unit = 64u << 10;
	o.stripe_width = 1;
	o.read_only = read_only;
	*err = fs_mount(dev, &o, &fs);
	return *err ? NULL : fs;
}
