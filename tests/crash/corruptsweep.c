/* zf-corruptsweep — the corruption sweep of the repairing fsck: for every
 * written block of the metadata log of a populated image (the meta zones
 * and the data zones the log borrowed), each kind of damage:
 *   flip      8 bytes of the block XOR-ed with random bits;
 *   random64  64 random bytes written over the block at a random offset;
 *   zero      the whole block zeroed;
 *   truncate  the zone cut at this block (it and all after it gone);
 * then, on a copy of the image:
 *   1. a plain read-write mount must succeed (read-only when the log is
 *      damaged: the mount never locks data away) and unmount, unless no
 *      metadata at all survived (then 3. must re-create it empty);
 *   2. fsck -n (fs_fsck FS_FSCK_CHECK) must not fail;
 *   3. fsck -y must succeed;
 *   4. a read-write mount must succeed and be writable (a file created
 *      and fsync'ed), and unmount;
 *   5. fsck -n must then find nothing.
 * With --repair-crashes N, every N-th case in which fsck found damage is
 * also a crash test of the repair: the device records the requests of
 * fsck -y, and for every cut before a flush, zone reset or finish and at
 * the end, with the writes in flight since the last flush all dropped and
 * all kept, the image is built again from the damaged one and fsck -y is
 * run again: it must end with the same number of inodes, writable and
 * clean (a crash during a repair is safe: run it again).  A re-creation
 * (no metadata could be read at all) is not crashed: it resets every zone
 * first, and a crash leaves a blank device that mkfs.zonefuse formats to the
 * same empty file system.
 * Any failure is a violation.  Prints blocks x damage kinds, how many
 * cases fsck found damaged and what it reported dropped.  --every N takes
 * every N-th block (the CI sample); the default is every block.
 * Exit status: 0 with no violation, 1 with violations, 2 on setup errors.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "mlog/mlog.h"
#include "zoned/zdev.h"
#include "tc_util.h"

#define ZONES 32
#define ZONE_SIZE (1u << 20)
#define BS 4096u

enum damage { D_FLIP, D_RANDOM64, D_ZERO, D_TRUNCATE, D_NR };
static const char *const damage_name[D_NR] = { "flip", "random64", "zero", "truncate" };

static unsigned every = 1, repair_crashes;
static unsigned long n_rc_cases, n_rc_states, n_rc_recreated;
static bool verbose;
static unsigned long n_cases, n_violations, n_found, n_ro_fallback, n_clean, n_nothing_left;
static unsigned long n_found_kind[D_NR], n_kind[D_NR];
static uint64_t lost_records, lost_names, lost_bytes;
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t base_inodes;		/* inodes of the undamaged image */
static double kept_sum, kept_min = 1.0;	/* inodes after fsck -y / base_inodes */
static unsigned long kept_n;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void quiet(void *arg, const char *fmt, ...)
{
	(void)arg;
	(void)fmt;
}

static void say(void *arg, const char *fmt, ...)
{
	va_list ap;
	(void)arg;
	va_start(ap, fmt);
	fputs("    ", stdout);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void write_file(struct fs *fs, uint64_t ino, size_t len, uint32_t seed)
{
	uint8_t *b = malloc(len);
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)((i * 2654435761u + seed) >> 9);
	TC_CHECK(fs_write(fs, ino, 0, b, len, false));
	free(b);
}

/* Files, directories, links, symlinks, xattrs; a snapshot (unmount), then
 * records in the log tail (fsync'ed, no unmount: a crash). */
static void populate(const char *path)
{
	struct zdev *dev;
	struct stat st;
	char name[32];
	int err;
	struct fs *fs = tc_make_fs(path, ZONES, ZONE_SIZE, &dev);
	uint64_t a = tc_mk(fs, FS_ROOT_INO, "a", S_IFDIR | 0755);
	uint64_t b = tc_mk(fs, a, "b", S_IFDIR | 0750);
	for (int i = 0; i < 150; i++) {
		snprintf(name, sizeof(name), "file%03d", i);
		uint64_t f = tc_mk(fs, i % 3 == 0 ? FS_ROOT_INO : i % 3 == 1 ? a : b, name,
				S_IFREG | 0644);
		write_file(fs, f, 3000 + (size_t)(i % 24) * 2500, (uint32_t)i);
		if (i % 4 == 0)
			TC_CHECK(fs_setxattr(fs, f, "user.tag", name, strlen(name), 0));
		if (i % 5 == 0) {
			snprintf(name, sizeof(name), "link%03d", i);
			TC_CHECK(fs_link(fs, f, a, name, &st));
			fs_forget(fs, st.st_ino, 1);
		}
	}
	TC_CHECK(fs_symlink(fs, b, "sym", "../file01", NULL, &st));
	fs_forget(fs, st.st_ino, 1);
	TC_CHECK(fs_unlink(fs, FS_ROOT_INO, "file003"));
	TC_CHECK(fs_rename(fs, a, "file001", b, "moved", 0));
	TC_CHECK(fs_unmount(fs));
	fs = tc_mount(dev, false, &err);
	if (!fs)
		tc_die("remount: %s", strerror(-err));
	/* one commit (a block) each: the log goes on into a second zone */
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "tail%03d", i);
		uint64_t f = tc_mk(fs, i % 2 ? b : a, name, S_IFREG | 0600);
		write_file(fs, f, 4096 + (size_t)(i % 7) * 700, (uint32_t)(100 + i));
		if (i % 10 == 0)
			TC_CHECK(fs_setxattr(fs, f, "user.t", name, strlen(name), 0));
		TC_CHECK(fs_fsync(fs, f, false));
	}
	TC_CHECK(fs_unlink(fs, FS_ROOT_INO, "file006"));
	TC_CHECK(fs_sync(fs));
	TC_CHECK(zdev_emu_power_loss(dev, 0));
	fs_unmount(fs);
	zdev_close(dev);
}

static int no_replay(void *arg, uint16_t type, const void *pl, uint32_t len, uint64_t lsn)
{
	(void)arg; (void)type; (void)pl; (void)len; (void)lsn;
	return 0;
}

/* The zones holding the log: the meta zones and the borrowed ones. */
static uint32_t log_zones(const char *path, uint32_t *out, uint32_t max)
{
	struct zdev_open_opts zo = ZDEV_OPEN_OPTS_INIT;
	struct zdev *dev;
	struct mlog *m;
	struct mlog_sb sb;
	uint32_t n = 0;

	zo.read_only = true;
	TC_CHECK(zdev_open(path, &zo, &dev));
	TC_CHECK(mlog_open(dev, MLOG_OPEN_READ_ONLY, no_replay, NULL, &sb, &m));
	for (uint32_t z = sb.meta_first; z < sb.meta_first + sb.meta_count && n < max; z++)
		out[n++] = z;
	n += mlog_borrowed_zones(m, out + n, max - n);
	mlog_close(m);
	zdev_close(dev);
	return n;
}

/* Damage block blk (device offset) of zone z, as kind says. */
static void damage(struct zdev *dev, uint32_t z, uint64_t blk, enum damage kind)
{
	struct zdev_zone zz;
	TC_CHECK(zdev_report_zones(dev, z, 1, &zz));
	uint64_t len = zz.wp - zz.start;
	bool full = zdev_zone_full(&zz);
	uint8_t *buf = zdev_buf_alloc(ZONE_SIZE);
	TC_CHECK(zdev_read(dev, zz.start, buf, len));
	uint64_t at = blk - zz.start;
	switch (kind) {
	case D_FLIP:
		for (int i = 0; i < 8; i++)
			buf[at + rnd() % BS] ^= (uint8_t)(1u << (rnd() % 8));
		break;
	case D_RANDOM64: {
		uint64_t o = at + rnd() % (BS - 64);
		for (int i = 0; i < 64; i++)
			buf[o + (uint64_t)i] = (uint8_t)rnd();
		break;
	}
	case D_ZERO:
		memset(buf + at, 0, BS);
		break;
	default:
		len = at;
		full = false;
		break;
	}
	TC_CHECK(zdev_zone_reset(dev, z));
	if (len)
		TC_CHECK(zdev_write(dev, zz.start, buf, len));
	if (full)
		TC_CHECK(zdev_zone_finish(dev, z));
	TC_CHECK(zdev_flush(dev));
	zdev_buf_free(buf);
}

static void violation(const char *what, uint32_t z, uint64_t blk, enum damage k, int err)
{
	n_violations++;
	fprintf(stderr, "VIOLATION zone %u block %llu %s: %s%s%s\n", z,
		(unsigned long long)blk / BS, damage_name[k], what, err ? ": " : "",
		err ? strerror(-err) : "");
}

/* A read-write mount that works: 0, 1 when it came up read-only, or -errno;
 * *inodes: the inodes it holds. */
static int mount_write(struct zdev *dev, uint64_t *inodes)
{
	struct stat st;
	struct statvfs sv;
	int err;
	struct fs *fs = tc_mount(dev, false, &err);
	if (!fs)
		return err;
	TC_CHECK(fs_statfs(fs, &sv));
	*inodes = sv.f_files - sv.f_ffree;
	int ret = fs_mknod(fs, FS_ROOT_INO, "written-after", S_IFREG | 0644, 0, NULL, &st);
	if (ret == 0) {
		fs_forget(fs, st.st_ino, 1);
		ret = fs_fsync(fs, st.st_ino, false);
		if (!ret)
			ret = fs_unlink(fs, FS_ROOT_INO, "written-after");
	}
	int u = fs_unmount(fs);
	if (ret == -EROFS)
		return 1;
	return ret ? ret : u;
}

/* Crash states of the repair recorded in ops[0..n) on the damaged image
 * dmg: fsck -y again must reach `inodes` inodes, writable and clean. */
static void repair_crash_states(const char *dmg, const char *cimg, const struct zdev_rec_op *ops,
				long n, uint64_t inodes, uint32_t z, uint64_t blk, enum damage dk)
{
	n_rc_cases++;
	for (long k = 0; k <= n; k++) {
		if (k < n && ops[k].kind == ZDEV_REC_WRITE)
			continue;
		for (int keep = 0; keep <= 1; keep++) {
			struct zdev *dev;
			struct fs_fsck_result res;
			uint64_t got = 0;
			n_rc_states++;
			tc_copy_image(dmg, cimg);
			TC_CHECK(zdev_open(cimg, NULL, &dev));
			for (long i = 0; i < k; i++) {
				const struct zdev_rec_op *o = &ops[i];
				if (o->kind == ZDEV_REC_WRITE) {
					void *b = zdev_buf_alloc(o->len);
					memcpy(b, o->data, o->len);
					TC_CHECK(zdev_write(dev, o->off, b, o->len));
					zdev_buf_free(b);
				} else if (o->kind == ZDEV_REC_FLUSH) {
					TC_CHECK(zdev_flush(dev));
				} else if (o->kind == ZDEV_REC_RESET) {
					TC_CHECK(zdev_zone_reset(dev, o->zone));
				} else if (o->kind == ZDEV_REC_FINISH) {
					TC_CHECK(zdev_zone_finish(dev, o->zone));
				} else {
					TC_CHECK(zdev_reset_all(dev));
				}
			}
			if (keep)
				TC_CHECK(zdev_flush(dev));
			TC_CHECK(zdev_emu_power_loss(dev, 0));
			zdev_close(dev);
			TC_CHECK(zdev_open(cimg, NULL, &dev));
			int ret = fs_fsck(dev, FS_FSCK_YES, false, quiet, NULL, &res);
			if (ret || res.left)
				violation("fsck -y after a crash during fsck -y failed", z, blk, dk, ret);
			ret = mount_write(dev, &got);
			if (ret)
				violation("a crash during fsck -y: no writable mount after the rerun",
					  z, blk, dk, ret < 0 ? ret : 0);
			else if (got != inodes)
				violation("a crash during fsck -y: the rerun kept other inodes", z, blk,
					  dk, 0);
			ret = fs_fsck(dev, FS_FSCK_CHECK, false, quiet, NULL, &res);
			if (ret || res.found)
				violation("a crash during fsck -y: not clean after the rerun", z, blk,
					  dk, ret);
			zdev_close(dev);
		}
	}
}

static void one_case(const char *base, const char *img, uint32_t z, uint64_t blk, enum damage k)
{
	struct zdev *dev;
	struct fs_fsck_result res;

	n_cases++;
	tc_copy_image(base, img);
	TC_CHECK(zdev_open(img, NULL, &dev));
	damage(dev, z, blk, k);
	zdev_close(dev);
	/* a plain mount: read-write, or read-only with what can be read */
	TC_CHECK(zdev_open(img, NULL, &dev));
	uint64_t inodes;
	int ret = mount_write(dev, &inodes);
	zdev_close(dev);
	/* mount_write may have written: start again from the damage */
	tc_copy_image(base, img);
	TC_CHECK(zdev_open(img, NULL, &dev));
	damage(dev, z, blk, k);
	int plain = ret;
	if (ret == 1)
		n_ro_fallback++;
	ret = fs_fsck(dev, FS_FSCK_CHECK, false, quiet, NULL, &res);
	if (ret)
		violation("fsck -n failed", z, blk, k, ret);
	if (verbose)
		printf("zone %u block %llu %s: %d problem(s)\n", z,
		       (unsigned long long)(blk % ZONE_SIZE) / BS, damage_name[k], res.found);
	/* a crash test of the repair for every repair_crashes-th damaged case */
	static unsigned long damaged_seen;
	bool rc_test = repair_crashes && res.found && damaged_seen++ % repair_crashes == 0;
	char dmg[320], cimg[320];
	if (rc_test) {
		snprintf(dmg, sizeof(dmg), "%s.damaged", img);
		snprintf(cimg, sizeof(cimg), "%s.crash", img);
		tc_copy_image(img, dmg);
		TC_CHECK(zdev_record_start(dev, 256ull << 20));
	}
	ret = fs_fsck(dev, FS_FSCK_YES, false, verbose ? say : quiet, NULL, &res);
	/* a plain mount refuses only when no metadata at all survived, which
	 * fsck -y then re-creates empty */
	if (plain < 0 && (ret || !res.recreated))
		violation("the damaged file system does not mount", z, blk, k, plain);
	else if (plain < 0)
		n_nothing_left++;
	if (ret) {
		violation("fsck -y failed", z, blk, k, ret);
	} else {
		n_kind[k]++;
		if (res.found) {
			n_found++;
			n_found_kind[k]++;
			lost_records += res.lost_records;
			lost_names += res.lost_names;
			lost_bytes += res.lost_bytes;
		} else {
			n_clean++;
		}
		if (res.left)
			violation("fsck -y left problems", z, blk, k, 0);
	}
	if (rc_test) {
		/* the repaired image's inodes, from a copy (the recording must
		 * not grow while its entries are used) */
		const struct zdev_rec_op *ops = NULL;
		long nops = zdev_record_get(dev, &ops);
		struct zdev *cdev;
		uint64_t ref = 0;
		tc_copy_image(img, cimg);
		TC_CHECK(zdev_open(cimg, NULL, &cdev));
		int r2 = mount_write(cdev, &ref);
		zdev_close(cdev);
		/* a re-created file system resets every zone first: a crash
		 * then leaves a blank device, which mkfs.zonefuse formats to the
		 * same empty file system (nothing could be salvaged anyway) */
		if (res.recreated)
			n_rc_recreated++;
		else if (!r2 && nops >= 0)
			repair_crash_states(dmg, cimg, ops, nops, ref, z, blk, k);
		zdev_record_stop(dev);
		unlink(dmg);
		unlink(cimg);
	}
	ret = mount_write(dev, &inodes);
	if (!ret) {
		kept_sum += (double)inodes / (double)base_inodes;
		kept_min = ZF_MIN(kept_min, (double)inodes / (double)base_inodes);
		kept_n++;
	}
	if (ret)
		violation(ret == 1 ? "read-only after fsck -y" : "does not mount after fsck -y",
			  z, blk, k, ret < 0 ? ret : 0);
	ret = fs_fsck(dev, FS_FSCK_CHECK, false, quiet, NULL, &res);
	if (ret || res.found)
		violation("fsck -n not clean after fsck -y", z, blk, k, ret);
	zdev_close(dev);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "every", required_argument, NULL, 'e' }, { "help", no_argument, NULL, 'h' },
		{ "repair-crashes", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	tc_prog = "zf-corruptsweep";
	while ((c = getopt_long(argc, argv, "vh", lo, NULL)) != -1) {
		switch (c) {
		case 'e': every = (unsigned)atoi(optarg); break;
		case 'r': repair_crashes = (unsigned)atoi(optarg); break;
		case 'v': verbose = true; break;
		case 'h':
			printf("usage: zf-corruptsweep [--every N] [--repair-crashes N] [-v]\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind != argc || every == 0) {
		fprintf(stderr, "usage: zf-corruptsweep [--every N] [--repair-crashes N] [-v]\n");
		return 2;
	}
	char dir[256], base[300], img[300];
	tc_scratch_dir(dir, sizeof(dir));
	snprintf(base, sizeof(base), "%s/base.zdev", dir);
	snprintf(img, sizeof(img), "%s/img.zdev", dir);
	zf_log_set_level(ZF_LOG_ERROR);
	zf_log_use_syslog(0);
	populate(base);
	uint32_t zones[ZONES];
	uint32_t nz = log_zones(base, zones, ZONES);
	struct zdev *bdev;
	tc_copy_image(base, img);
	TC_CHECK(zdev_open(img, NULL, &bdev));
	TC_CHECK(mount_write(bdev, &base_inodes));
	zdev_close(bdev);
	unsigned long blocks = 0, seen = 0;
	uint64_t t0 = zf_now_ns();
	struct zdev_open_opts zo = ZDEV_OPEN_OPTS_INIT;
	zo.read_only = true;
	for (uint32_t i = 0; i < nz; i++) {
		struct zdev *dev;
		struct zdev_zone zz;
		TC_CHECK(zdev_open(base, &zo, &dev));
		TC_CHECK(zdev_report_zones(dev, zones[i], 1, &zz));
		zdev_close(dev);
		for (uint64_t b = zz.start; b < zz.wp; b += BS) {
			if (seen++ % every)
				continue;
			blocks++;
			for (int k = 0; k < D_NR; k++)
				one_case(base, img, zones[i], b, (enum damage)k);
		}
	}
	unlink(img);
	unlink(base);
	rmdir(dir);
	/* a zone cut short looks like a crash (a zone keeps a prefix of its
	 * writes): fsck finds damage there only when a snapshot is cut */
	for (int k = 0; k < D_NR; k++)
		printf("  %-9s fsck found damage in %lu of %lu\n", damage_name[k], n_found_kind[k],
		       n_kind[k]);
	if (repair_crashes)
		printf("  crashes during fsck -y: %lu repairs, %lu crash states, each repaired "
		       "again (%lu re-creations not crashed)\n", n_rc_cases, n_rc_states,
		       n_rc_recreated);
	char lb[32];
	printf("zf-corruptsweep: %lu metadata blocks x %d damage kinds = %lu cases; fsck found "
	       "damage in %lu (%lu harmless); plain mount read-only in %lu, refused with no "
	       "metadata left in %lu (fsck -y re-creates); dropped %llu "
	       "record(s), %llu name(s), %s; inodes kept after fsck -y: %.1f %% on average, "
	       "%.1f %% at least (of %llu); %lu violations, 0 expected (%.1f s)\n",
	       blocks, D_NR, n_cases, n_found, n_clean, n_ro_fallback, n_nothing_left,
	       (unsigned long long)lost_records, (unsigned long long)lost_names,
	       zf_fmt_bytes(lost_bytes, lb, sizeof(lb)),
	       kept_n ? 100.0 * kept_sum / (double)kept_n : 0.0, 100.0 * kept_min,
	       (unsigned long long)base_inodes, n_violations,
	       (double)(zf_now_ns() - t0) / 1e9);
	return n_violations ? 1 : 0;
}
