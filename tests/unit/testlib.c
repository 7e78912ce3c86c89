/* testlib: see testlib.h. */
#include "testlib.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tl_dev_create(struct tl_dev *t, const char *tag, uint32_t zones,
		   uint64_t zone_size, uint32_t max_active)
{
	struct zdev_emu_params p = { 0 };

	p.zone_size = zone_size;
	p.nr_zones = zones;
	p.block_size = 4096;
	p.max_open = max_active;
	p.max_active = max_active;
	tl_dev_create_params(t, tag, &p);
}

void tl_dev_create_params(struct tl_dev *t, const char *tag,
			  const struct zdev_emu_params *p)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/zf-test-%s-XXXXXX", tag);
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/dev.zdev", t->dir);
	ck_assert_int_eq(zdev_emu_create(t->path, p, false), 0);
}

void tl_dev_open(const struct tl_dev *t, struct zdev **dev)
{
	ck_assert_int_eq(zdev_open(t->path, NULL, dev), 0);
}

int tl_mount(struct zdev *dev, uint64_t buffer_bytes, bool read_only, struct fs **fs)
{
	struct fs_opts o;

	fs_opts_default(&o);
	o.commit_interval_ms = 0;
	o.buffer_bytes = buffer_bytes;
	o.read_only = read_only;
	return fs_mount(dev, &o, fs);
}

void tl_remount_prefetch(struct zdev *dev, uint64_t buffer_bytes, uint64_t window,
			 struct fs **fs)
{
	struct fs_opts o;

	ck_assert_int_eq(fs_unmount(*fs), 0);
	*fs = NULL;
	fs_opts_default(&o);
	o.commit_interval_ms = 0;
	o.buffer_bytes = buffer_bytes;
	o.prefetch_bytes = window;
	ck_assert_int_eq(fs_mount(dev, &o, fs), 0);
	ck_assert_int_eq(gc_attach(*fs), 0);	/* the collector, as the daemon */
	ck_assert_int_eq(fs_start(*fs), 0);
}

struct fs_stats tl_stats(struct fs *fs)
{
	struct fs_stats st;

	fs_get_stats(fs, &st);
	return st;
}

void tl_teardown(struct tl_dev *t, struct zdev **dev, struct fs **fs)
{
	if (*fs)
		fs_unmount(*fs);
	*fs = NULL;
	if (*dev)
		zdev_close(*dev);
	*dev = NULL;
	tl_dev_remove(t);
}

void tl_dev_remove(struct tl_dev *t)
{
	if (t->path[0])
		unlink(t->path);
	if (t->dir[0])
		rmdir(t->dir);
	t->path[0] = t->dir[0] = 0;
}

uint64_t tl_mk(struct fs *fs, uint64_t parent, const char *name, mode_t mode)
{
	struct stat st;
	if (S_ISDIR(mode))
		ck_assert_int_eq(fs_mkdir(fs, parent, name, mode, NULL, &st), 0);
	else
		ck_assert_int_eq(fs_mknod(fs, parent, name, mode, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

void tl_fsck_print(void *arg, const char *fmt, ...)
{
	va_list ap;

	(void)arg;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void count_print(void *arg, const char *fmt, ...)
{
	va_list ap;

	(*(int *)arg)++;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void tl_fsck_clean(struct zdev *dev)
{
	int problems = 0;

	ck_assert_int_eq(fs_check(dev, false, count_print, &problems), 0);
	ck_assert_int_eq(problems, 0);
}

void tl_power_cycle(const struct tl_dev *t, struct zdev **dev, struct fs **fs,
		    uint64_t buffer_bytes)
{
	ck_assert_int_eq(zdev_emu_power_loss(*dev, 0), 0);
	fs_unmount(*fs);	/* fails: the device is dead; frees */
	*fs = NULL;
	zdev_close(*dev);
	tl_dev_open(t, dev);
	tl_fsck_clean(*dev);
	ck_assert_int_eq(tl_mount(*dev, buffer_bytes, false, fs), 0);
}

void tl_write_behind_log(struct zdev *dev, uint32_t meta_first, uint32_t meta_count)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct zdev_zone *z = calloc(meta_count, sizeof(*z));
	int tail = -1;

	ck_assert_ptr_nonnull(z);
	ck_assert_int_eq(zdev_report_zones(dev, meta_first, meta_count, z), (int)meta_count);
	for (uint32_t i = 0; i < meta_count; i++)
		if (z[i].cond == ZDEV_COND_IMP_OPEN || z[i].cond == ZDEV_COND_EXP_OPEN)
			tail = (int)i;
	ck_assert_int_ge(tail, 0);
	size_t len = 16 * (size_t)g->block_size;
	void *blk = zdev_buf_alloc(len);
	memset(blk, 0, len);
	ck_assert_int_eq(zdev_write(dev, z[tail].wp, blk, len), (ssize_t)len);
	zdev_buf_free(blk);
	free(z);
}

void tl_dev_make(struct tl_dev *t, const char *tag, uint32_t zones,
		 uint64_t zone_size, uint32_t max_active)
{
	struct zdev *d;

	tl_dev_create(t, tag, zones, zone_size, max_active);
	tl_dev_open(t, &d);
	ck_assert_int_eq(fs_mkfs(d, NULL), 0);
	zdev_close(d);
}

struct fs *tl_mount_placement(const struct tl_dev *t, struct zdev **dev,
			      const char *hints, bool placement_off)
{
	struct fs_opts o;
	struct fs *fs;

	tl_dev_open(t, dev);
	fs_opts_default(&o);
	o.commit_interval_ms = 0;
	o.stripe_width = 1;
	o.hints_file = hints;
	o.placement_off = placement_off;
	ck_assert_int_eq(fs_mount(*dev, &o, &fs), 0);
	return fs;
}

void tl_unmount_close(struct fs *fs, struct zdev *dev)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	zdev_close(dev);
}
