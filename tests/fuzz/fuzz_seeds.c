/* Seed corpus generator for the fuzz targets (a plain program, not a
 * fuzzer): builds file systems on the fuzzers' device geometry and dumps
 * them in the targets' input format.
 *   fuzz_seeds OUTDIR   ->  OUTDIR/{fuzz_mlog,fuzz_mount,fuzz_replay}/seed-*
 * Scenarios: freshly formatted; a populated tree unmounted cleanly (the log
 * is one snapshot); the same crashed after fsync (snapshot + a log tail of
 * every record type); a metadata chain spanning several zones. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"
#include "mlog/mlog.h"
#include "tests/fuzz/fuzz_common.h"

static char out[512], devpath[600];
static int nseeds;

static void put(const char *target, const char *name, const uint8_t *b, size_t n)
{
	char p[800];
	snprintf(p, sizeof(p), "%s/%s", out, target);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/%s/seed-%s", out, target, name);
	FILE *f = fopen(p, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
		perror(p);
		exit(1);
	}
	nseeds++;
}

static struct zdev *open_dev(void)
{
	struct zdev *d;
	if (zdev_open(devpath, NULL, &d))
		exit(1);
	return d;
}

/* records of the newest epoch, as fuzz_replay input */
struct rbuf { uint8_t *b; size_t n, cap; };
static int rec_cb(void *arg, uint16_t type, const void *p, uint32_t len, uint64_t lsn)
{
	struct rbuf *r = arg;
	(void)lsn;
	if (len > 0xFFFF || r->n > 24000)	/* keep replay seeds small */
		return 0;
	if (r->n + 3 + len > r->cap) {
		r->cap = (r->n + 3 + len) * 2;
		r->b = realloc(r->b, r->cap);
	}
	r->b[r->n++] = (uint8_t)(type - FS_REC_STATE);
	r->b[r->n++] = (uint8_t)len;
	r->b[r->n++] = (uint8_t)(len >> 8);
	memcpy(r->b + r->n, p, len);
	r->n += len;
	return 0;
}

static void dump(struct zdev *d, const char *name)
{
	uint8_t *img;
	size_t n = fz_dump(d, 0, &img);
	put("fuzz_mlog", name, img, n);
	put("fuzz_mount", name, img, n);
	img[0] = FZ_FIX_CRC;
	char crc[64];
	snprintf(crc, sizeof(crc), "%s-fixcrc", name);
	put("fuzz_mlog", crc, img, n);
	put("fuzz_mount", crc, img, n);
	free(img);
	struct rbuf r = { 0 };
	struct mlog *m;
	struct mlog_sb sb;
	if (mlog_open(d, MLOG_OPEN_READ_ONLY, rec_cb, &r, &sb, &m) == 0) {
		mlog_close(m);
		if (r.n)
			put("fuzz_replay", name, r.b, r.n);
	}
	free(r.b);
}

static struct fs *mount_rw(struct zdev *d)
{
	struct fs_opts o;
	struct fs *fs;
	fz_opts(&o, false);
	if (fs_mount(d, &o, &fs)) {
		fprintf(stderr, "fuzz_seeds: mount failed\n");
		exit(1);
	}
	return fs;
}

static void populate(struct fs *fs, const char *tag)
{
	struct stat st;
	uint64_t d, e, f;
	char dn[32], mv[32];
	snprintf(dn, sizeof(dn), "dir%s", tag);
	snprintf(mv, sizeof(mv), "moved%s", tag);
	fz_workload(fs, (uint32_t)strlen(tag) + 7);
	if (fs_mkdir(fs, FS_ROOT_INO, dn, 0755, NULL, &st))
		exit(1);
	d = st.st_ino;
	fs_forget(fs, d, 1);
	if (fs_mkdir(fs, d, "sub", 0700, NULL, &st))
		exit(1);
	e = st.st_ino;
	fs_forget(fs, e, 1);
	if (fs_mknod(fs, e, "file", S_IFREG | 0640, 0, NULL, &st))
		exit(1);
	f = st.st_ino;
	fs_forget(fs, f, 1);
	fs_write(fs, f, 0, "hello, fuzzer", 13, false);
	fs_link(fs, f, d, "hardlink", &st);
	fs_forget(fs, st.st_ino, 1);
	fs_symlink(fs, d, "symlink", "sub/file", NULL, &st);
	fs_forget(fs, st.st_ino, 1);
	fs_mknod(fs, d, "fifo", S_IFIFO | 0644, 0, NULL, &st);
	fs_forget(fs, st.st_ino, 1);
	fs_setxattr(fs, f, "user.a", "1", 1, 0);
	fs_setxattr(fs, f, "user.b", "22", 2, 0);
	fs_removexattr(fs, f, "user.a");
	fs_setxattr(fs, f, "user.zonefuse.lifetime", "long", 4, 0);
	fs_rename(fs, d, "hardlink", FS_ROOT_INO, mv, 0);
	fs_rename(fs, d, "symlink", d, "fifo", RENAME_EXCHANGE);
	fs_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2, 4);
	if (fs_mknod(fs, e, "copy", S_IFREG | 0640, 0, NULL, &st) == 0) {
		fs_forget(fs, st.st_ino, 1);
		fs_copy_file_range(fs, f, 0, st.st_ino, 0, 13, 0);	/* a COPY record */
	}
	fs_fsync(fs, f, false);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
		return 2;
	}
	snprintf(out, sizeof(out), "%s", argv[1]);
	mkdir(out, 0755);
	zf_log_set_level(ZF_LOG_ERROR);
	snprintf(devpath, sizeof(devpath), "%s/.seed-dev", out);
	struct zdev_emu_params p = { .zone_size = FZ_ZONE_SIZE, .nr_zones = FZ_ZONES,
				     .block_size = FZ_BLOCK, .max_open = 8, .max_active = 8 };
	if (zdev_emu_create(devpath, &p, true))
		return 1;
	struct zdev *d = open_dev();
	if (fs_mkfs(d, NULL))
		return 1;
	dump(d, "fresh");

	struct fs *fs = mount_rw(d);
	populate(fs, "");
	if (fs_unmount(fs))
		return 1;
	dump(d, "clean");

	/* the same tree plus a log tail of every record type, then a crash */
	fs = mount_rw(d);
	populate(fs, "2");
	struct stat st;
	if (fs_lookup(fs, FS_ROOT_INO, "moved2", &st) == 0) {
		fs_forget(fs, st.st_ino, 1);
		struct stat a = { .st_size = 3 };
		fs_setattr(fs, st.st_ino, &a, FS_SET_SIZE, NULL);
		fs_open(fs, st.st_ino, O_RDWR);
		fs_unlink(fs, FS_ROOT_INO, "moved2");	/* unlinked while open */
		fs_fsync(fs, st.st_ino, false);
	}
	fs_sync(fs);
	zdev_emu_power_loss(d, 0);
	fs_unmount(fs);
	zdev_close(d);
	d = open_dev();
	dump(d, "crash");

	/* many small files: a snapshot over several meta zones */
	fs = mount_rw(d);
	char name[64];
	for (int i = 0; i < 1200; i++) {
		snprintf(name, sizeof(name), "a-rather-long-file-name-%05d", i);
		if (fs_mknod(fs, FS_ROOT_INO, name, S_IFREG | 0644, 0, NULL, &st))
			break;
		fs_forget(fs, st.st_ino, 1);
		if (i % 3 == 0)
			fs_setxattr(fs, st.st_ino, "user.pad", name, strlen(name), 0);
	}
	fs_sync(fs);
	zdev_emu_power_loss(d, 0);
	fs_unmount(fs);
	zdev_close(d);
	d = open_dev();
	dump(d, "big");
	zdev_close(d);
	unlink(devpath);
	printf("fuzz_seeds: %d seeds in %s\n", nseeds, out);
	return 0;
}
