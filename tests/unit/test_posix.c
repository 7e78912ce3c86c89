/* Unit tests for the POSIX behaviours an outside file-system suite checks
 * (issue #45), at the fs layer on the emulated device: readdir while
 * entries are renamed, SEEK_DATA / SEEK_HOLE, large xattr values, and the
 * lookups an export handle needs ("." and ".." of a directory found by
 * number). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "testlib.h"

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void do_mount(void)
{
	ck_assert_int_eq(tl_mount(dev, 64ull << 20, false, &fs), 0);
}

static void setup(void)
{
	tl_dev_make(&td, "posix", 32, 4ull << 20, 8);
	tl_dev_open(&td, &dev);
	do_mount();
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

/* Unmount (fsck must find it clean), mount again: replay of every record
 * written so far. */
static void check_remount(void)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, tl_fsck_print, NULL), 0);
	do_mount();
}

/* ---- readdir while entries are renamed ---- */

/* One READDIR page: at most `per` entries from cookie off.  Entries are
 * f<i> or r<i> (the same file under its two names); seen[i] counts how
 * often file i came in this pass, names[] how often each name did. */
struct pass {
	unsigned *seen_f, *seen_r;	/* per index: times f<i> / r<i> came */
	int per, n;
	uint64_t next;
};

static int page_fn(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
	struct pass *p = arg;
	(void)st;
	if (p->n == p->per)
		return 1;
	p->n++;
	p->next = next_off;
	if (name[0] == 'f')
		p->seen_f[atoi(name + 1)]++;
	else if (name[0] == 'r')
		p->seen_r[atoi(name + 1)]++;
	return 0;
}

/* A new directory under the root holding f0 .. f<n-1>; its inode. */
static uint64_t dir_of_files(const char *dname, int n)
{
	char name[32];
	uint64_t d = tl_mk(fs, FS_ROOT_INO, dname, S_IFDIR | 0755);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		tl_mk(fs, d, name, S_IFREG | 0644);
	}
	return d;
}

static void rename_idx(uint64_t d, int i, bool away)
{
	char a[32], b[32];
	snprintf(a, sizeof(a), "f%d", i);
	snprintf(b, sizeof(b), "r%d", i);
	ck_assert_int_eq(away ? fs_rename(fs, d, a, d, b, 0) : fs_rename(fs, d, b, d, a, 0), 0);
}

/* A listing of a 5,000-file directory in pages of 64 while, between pages,
 * every file is renamed away (f<i> -> r<i>) and back: each file is
 * returned exactly once per pass, under one of its names (every other
 * pass leaves them all renamed away).  Then a rename into another directory and back is a new entry
 * there, and the state replays. */
START_TEST(readdir_rename_storm)
{
	const int N = 5000;
	struct stat st;
	unsigned *sf = calloc(N, sizeof(*sf)), *sr = calloc(N, sizeof(*sr));
	uint64_t d = dir_of_files("d", N);
	for (int pass = 0; pass < 4; pass++) {
		struct pass p = { .seen_f = sf, .seen_r = sr, .per = 64 };
		uint64_t off = 0;
		int k = 0, total = 0;
		memset(sf, 0, N * sizeof(*sf));
		memset(sr, 0, N * sizeof(*sr));
		for (;;) {
			p.n = 0;
			ck_assert_int_eq(fs_readdir(fs, d, off, false, page_fn, &p), 0);
			if (p.n == 0)
				break;
			total += p.n;
			off = p.next;
			/* the storm: 300 files away and back, from 0 up */
			for (int j = 0; j < 300 && k < N; j++, k++) {
				rename_idx(d, k, true);
				if (pass % 2 == 0)
					rename_idx(d, k, false);
			}
		}
		for (int i = 0; i < N; i++) {
			ck_assert_msg(sf[i] + sr[i] <= 1, "pass %d: file %d came %u+%u times",
				      pass, i, sf[i], sr[i]);
			/* nobody removed it: it came, under one name */
			ck_assert_msg(sf[i] + sr[i] == 1, "pass %d: file %d missing", pass, i);
		}
		ck_assert_int_le(total, N + 2);
		/* odd passes leave every file r<i>: put them back */
		if (pass % 2)
			for (int i = 0; i < N; i++)
				rename_idx(d, i, false);
	}
	/* moved to another directory and back: a new entry, listed once */
	ck_assert_int_eq(fs_mkdir(fs, FS_ROOT_INO, "e", 0755, NULL, &st), 0);
	uint64_t e = st.st_ino;
	ck_assert_int_eq(fs_rename(fs, d, "f7", e, "f7", 0), 0);
	ck_assert_int_eq(fs_rename(fs, e, "f7", d, "f7", 0), 0);
	/* a rename over an existing name in the same directory */
	ck_assert_int_eq(fs_rename(fs, d, "f8", d, "f9", 0), 0);
	ck_assert_int_eq(fs_rename(fs, d, "f10", d, "f8", 0), 0);
	check_remount();
	struct pass p = { .seen_f = sf, .seen_r = sr, .per = N + 10 };
	memset(sf, 0, N * sizeof(*sf));
	memset(sr, 0, N * sizeof(*sr));
	ck_assert_int_eq(fs_readdir(fs, d, 0, false, page_fn, &p), 0);
	ck_assert_int_eq(p.n, 2 + N - 1);	/* the old f9 went */
	for (int i = 0; i < N; i++)
		ck_assert_uint_eq(sf[i], i == 10 ? 0u : 1u);
	free(sf);
	free(sr);
}
END_TEST

/* telldir/seekdir: a listing resumed at any cookie it handed out returns
 * the rest of the same order, also after the entries before and at the
 * cookie were renamed in place. */
START_TEST(readdir_seek_after_rename)
{
	const int N = 200;
	unsigned *sf = calloc(N, sizeof(*sf)), *sr = calloc(N, sizeof(*sr));
	uint64_t d = dir_of_files("d", N);
	/* cookies of the first 100 entries ('.', '..', f0 .. f97) */
	struct pass p = { .seen_f = sf, .seen_r = sr, .per = 100 };
	ck_assert_int_eq(fs_readdir(fs, d, 0, false, page_fn, &p), 0);
	uint64_t mark = p.next;		/* after f97 */
	for (int i = 0; i < 98; i++)
		rename_idx(d, i, true);
	memset(sf, 0, N * sizeof(*sf));
	memset(sr, 0, N * sizeof(*sr));
	p = (struct pass){ .seen_f = sf, .seen_r = sr, .per = N };
	ck_assert_int_eq(fs_readdir(fs, d, mark, false, page_fn, &p), 0);
	ck_assert_int_eq(p.n, N - 98);
	for (int i = 0; i < N; i++)
		ck_assert_uint_eq(sf[i] + sr[i], i >= 98 ? 1u : 0u);
	free(sf);
	free(sr);
}
END_TEST

/* ---- SEEK_DATA / SEEK_HOLE ---- */

/* Data at [0, 8K), [1M + 4K, 1M + 12K) and [3M, 3M + 4K + 10), size 5M:
 * the same answers while every byte is buffered, after they were written
 * out (extents), with a buffered run next to an extent, and after a
 * remount. */
static void expect_layout(uint64_t ino)
{
	const int64_t K = 1024, M = K * K;
	ck_assert_int_eq(fs_lseek(fs, ino, 0, SEEK_DATA), 0);
	ck_assert_int_eq(fs_lseek(fs, ino, 0, SEEK_HOLE), 8 * K);
	ck_assert_int_eq(fs_lseek(fs, ino, 5000, SEEK_HOLE), 8 * K);
	ck_assert_int_eq(fs_lseek(fs, ino, 8 * K, SEEK_HOLE), 8 * K);
	ck_assert_int_eq(fs_lseek(fs, ino, 8 * K, SEEK_DATA), M + 4 * K);
	ck_assert_int_eq(fs_lseek(fs, ino, M + 5 * K, SEEK_DATA), M + 5 * K);
	ck_assert_int_eq(fs_lseek(fs, ino, M + 5 * K, SEEK_HOLE), M + 12 * K);
	ck_assert_int_eq(fs_lseek(fs, ino, M + 12 * K, SEEK_DATA), 3 * M);
	ck_assert_int_eq(fs_lseek(fs, ino, 3 * M, SEEK_HOLE), 3 * M + 8 * K);
	/* the hole at the end: past the last data, SEEK_DATA finds none */
	ck_assert_int_eq(fs_lseek(fs, ino, 3 * M + 8 * K, SEEK_DATA), -ENXIO);
	ck_assert_int_eq(fs_lseek(fs, ino, 4 * M, SEEK_HOLE), 4 * M);
	ck_assert_int_eq(fs_lseek(fs, ino, 5 * M, SEEK_HOLE), -ENXIO);
	ck_assert_int_eq(fs_lseek(fs, ino, 5 * M, SEEK_DATA), -ENXIO);
	ck_assert_int_eq(fs_lseek(fs, ino, -1, SEEK_DATA), -ENXIO);
	ck_assert_int_eq(fs_lseek(fs, ino, 0, SEEK_END), -EINVAL);
}

START_TEST(seek_data_hole)
{
	const uint64_t K = 1024, M = K * K;
	uint8_t buf[8192];
	memset(buf, 0xa5, sizeof(buf));
	uint64_t ino = tl_mk(fs, FS_ROOT_INO, "sparse", S_IFREG | 0644);
	ck_assert_int_eq(fs_open(fs, ino, O_RDWR), 0);
	ck_assert_int_eq(fs_write(fs, ino, 0, buf, 8 * K, false), 8 * K);
	ck_assert_int_eq(fs_write(fs, ino, 3 * M, buf, 4 * K + 10, false), 4 * K + 10);
	struct stat st = { .st_size = 5 * M };
	ck_assert_int_eq(fs_setattr(fs, ino, &st, FS_SET_SIZE, NULL), 0);
	ck_assert_int_eq(fs_write(fs, ino, M + 4 * K, buf, 8 * K, false), 8 * K);
	expect_layout(ino);
	ck_assert_int_eq(fs_flush(fs, ino), 0);
	expect_layout(ino);
	/* a buffered run right after an extent is one run of data */
	ck_assert_int_eq(fs_write(fs, ino, 8 * K, buf, 4 * K, false), 4 * K);
	ck_assert_int_eq(fs_lseek(fs, ino, 0, SEEK_HOLE), 12 * K);
	ck_assert_int_eq(fs_lseek(fs, ino, 10 * K, SEEK_DATA), 10 * K);
	/* a punched hole is a hole */
	ck_assert_int_eq(fs_fallocate(fs, ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      8 * K, 4 * K), 0);
	expect_layout(ino);
	ck_assert_int_eq(fs_release(fs, ino), 0);
	ck_assert_int_eq(fs_lseek(fs, FS_ROOT_INO, 0, SEEK_DATA), -EISDIR);
	ck_assert_int_eq(fs_lseek(fs, 12345, 0, SEEK_DATA), -ENOENT);
	check_remount();
	expect_layout(ino);
	/* an empty file and one that is all hole */
	uint64_t e = tl_mk(fs, FS_ROOT_INO, "empty", S_IFREG | 0644);
	ck_assert_int_eq(fs_lseek(fs, e, 0, SEEK_DATA), -ENXIO);
	ck_assert_int_eq(fs_lseek(fs, e, 0, SEEK_HOLE), -ENXIO);
	st.st_size = 10 * M;
	ck_assert_int_eq(fs_setattr(fs, e, &st, FS_SET_SIZE, NULL), 0);
	ck_assert_int_eq(fs_lseek(fs, e, 0, SEEK_DATA), -ENXIO);
	ck_assert_int_eq(fs_lseek(fs, e, 0, SEEK_HOLE), 0);
}
END_TEST

/* ---- xattr values up to 64 KiB, bounded per inode ---- */

/* Values of XATTR_SIZE_MAX are stored (test_xattr has them across a crash
 * and a remount); one byte more is E2BIG; an inode holds at most 256 KiB
 * of names and values (ENOSPC past it, a replacement counted once), and
 * names that list in XATTR_LIST_MAX bytes; what was refused left nothing. */
START_TEST(xattr_large_and_total)
{
	static char big[65537], got[65536];
	char name[300];
	memset(big, 'v', sizeof(big));
	uint64_t f = tl_mk(fs, FS_ROOT_INO, "x", S_IFREG | 0644);
	ck_assert_int_eq(fs_setxattr(fs, f, "user.huge", big, 65537, 0), -E2BIG);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "user.v%d", i);
		ck_assert_int_eq(fs_setxattr(fs, f, name, big, 65536, 0), 0);
	}
	/* 3 x 64 KiB + names: a fourth 64 KiB value passes 256 KiB */
	ck_assert_int_eq(fs_setxattr(fs, f, "user.v3", big, 65536, 0), -ENOSPC);
	ck_assert_int_eq(fs_getxattr(fs, f, "user.v3", NULL, 0), -ENODATA);
	ck_assert_int_eq(fs_setxattr(fs, f, "user.v3", big, 60000, 0), 0);
	/* replacing a value counts its new size only */
	ck_assert_int_eq(fs_setxattr(fs, f, "user.v0", big, 65536, XATTR_REPLACE), 0);
	ck_assert_int_eq(fs_setxattr(fs, f, "user.v3", big, 65536, 0), -ENOSPC);
	ck_assert_int_eq(fs_removexattr(fs, f, "user.v1"), 0);
	ck_assert_int_eq(fs_setxattr(fs, f, "user.v3", big, 65536, 0), 0);
	ck_assert_int_eq(fs_getxattr(fs, f, "user.v3", got, sizeof(got)), 65536);
	ck_assert_int_eq(memcmp(got, big, 65536), 0);
	/* names: 255-byte ones until the list would pass XATTR_LIST_MAX */
	uint64_t g = tl_mk(fs, FS_ROOT_INO, "names", S_IFREG | 0644);
	int n = 0, ret;
	for (;; n++) {
		snprintf(name, sizeof(name), "user.%0250d", n);
		ret = fs_setxattr(fs, g, name, "1", 1, 0);
		if (ret)
			break;
	}
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_int_eq(n, 65536 / 256);
	int len = fs_listxattr(fs, g, NULL, 0);
	ck_assert_int_le(len, 65536);
	ck_assert_int_eq(len, n * 256);
	check_remount();
	ck_assert_int_eq(fs_getxattr(fs, f, "user.v3", got, sizeof(got)), 65536);
	ck_assert_int_eq(fs_getxattr(fs, f, "user.v1", NULL, 0), -ENODATA);
	ck_assert_int_eq(fs_listxattr(fs, g, NULL, 0), len);
}
END_TEST

/* ---- export handles ---- */

/* A handle's inode found by number ("." in it, any type), a directory's
 * parent (".."), and a deleted inode: -ENOENT, also while it is still
 * open (no name left: the handle is stale); lookup references balance. */
START_TEST(export_lookups)
{
	struct stat st;
	uint64_t d = tl_mk(fs, FS_ROOT_INO, "d", S_IFDIR | 0755);
	uint64_t f = tl_mk(fs, d, "f", S_IFREG | 0644);
	ck_assert_int_eq(fs_symlink(fs, d, "l", "f", NULL, &st), 0);
	uint64_t l = st.st_ino;
	fs_forget(fs, l, 1);
	ck_assert_int_eq(fs_lookup_self(fs, f, &st), 0);
	ck_assert_uint_eq(st.st_ino, f);
	ck_assert(S_ISREG(st.st_mode));
	fs_forget(fs, f, 1);
	ck_assert_int_eq(fs_lookup_self(fs, d, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	fs_forget(fs, d, 1);
	ck_assert_int_eq(fs_lookup_self(fs, l, &st), 0);
	fs_forget(fs, l, 1);
	ck_assert_int_eq(fs_lookup_self(fs, FS_ROOT_INO, &st), 0);
	fs_forget(fs, FS_ROOT_INO, 1);
	ck_assert_int_eq(fs_lookup(fs, d, "..", &st), 0);
	ck_assert_uint_eq(st.st_ino, FS_ROOT_INO);
	fs_forget(fs, FS_ROOT_INO, 1);
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "..", &st), 0);
	ck_assert_uint_eq(st.st_ino, FS_ROOT_INO);
	fs_forget(fs, FS_ROOT_INO, 1);
	/* deleted while open, then closed */
	ck_assert_int_eq(fs_open(fs, f, O_RDONLY), 0);
	ck_assert_int_eq(fs_unlink(fs, d, "f"), 0);
	ck_assert_int_eq(fs_lookup_self(fs, f, &st), -ENOENT);
	ck_assert_int_eq(fs_release(fs, f), 0);
	ck_assert_int_eq(fs_lookup_self(fs, f, &st), -ENOENT);
	ck_assert_int_eq(fs_lookup_self(fs, 99999, &st), -ENOENT);
	/* numbers survive a remount (the handle's inode is the same one) */
	check_remount();
	ck_assert_int_eq(fs_lookup_self(fs, l, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	fs_forget(fs, l, 1);
}
END_TEST

/* A crash loses the inodes created since the last commit; their numbers
 * were handed out (the kernel, or an NFS client, may hold handles to
 * them), so no later inode may get one of them: fs_ino_reserve makes the
 * numbers durable before they are given. */
static void mount_after_crash(void)
{
	fs_unmount(fs);		/* fails: the device is dead; frees */
	fs = NULL;
	zdev_close(dev);
	tl_dev_open(&td, &dev);
	do_mount();
}

static void crash_remount(void)
{
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	mount_after_crash();
}

START_TEST(ino_not_reused_after_crash)
{
	ck_assert_int_eq(fs_ino_reserve(fs), 0);
	uint64_t a = tl_mk(fs, FS_ROOT_INO, "a", S_IFREG | 0644);
	ck_assert_int_eq(fs_sync(fs), 0);
	uint64_t lost = 0;
	for (int i = 0; i < 100; i++) {
		char name[16];
		snprintf(name, sizeof(name), "b%d", i);
		ck_assert_int_eq(fs_ino_reserve(fs), 0);
		lost = tl_mk(fs, FS_ROOT_INO, name, S_IFREG | 0644);
	}
	ck_assert_uint_gt(lost, a);
	crash_remount();
	struct stat st;
	ck_assert_int_eq(fs_lookup_self(fs, lost, &st), -ENOENT);
	ck_assert_int_eq(fs_ino_reserve(fs), 0);
	uint64_t c = tl_mk(fs, FS_ROOT_INO, "c", S_IFREG | 0644);
	ck_assert_uint_gt(c, lost);
	/* and across a snapshot taken meanwhile (a clean remount) */
	check_remount();
	ck_assert_int_eq(fs_ino_reserve(fs), 0);
	uint64_t d = tl_mk(fs, FS_ROOT_INO, "d", S_IFREG | 0644);
	ck_assert_uint_gt(d, c);
	ck_assert_int_eq(fs_lookup_self(fs, a, &st), 0);
	fs_forget(fs, a, 1);
}
END_TEST

/* A reservation that cannot be committed fails the create before it takes
 * a number: the log's error, and nothing created. */
START_TEST(ino_reserve_fails)
{
	check_remount();	/* nothing reserved yet in this mount */
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);	/* every I/O fails now */
	ck_assert_int_lt(fs_ino_reserve(fs), 0);
	mount_after_crash();
	ck_assert_int_eq(fs_ino_reserve(fs), 0);
	tl_mk(fs, FS_ROOT_INO, "after", S_IFREG | 0644);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("posix");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, readdir_rename_storm);
	tcase_add_test(tc, readdir_seek_after_rename);
	tcase_add_test(tc, seek_data_hole);
	tcase_add_test(tc, xattr_large_and_total);
	tcase_add_test(tc, export_lookups);
	tcase_add_test(tc, ino_not_reused_after_crash);
	tcase_add_test(tc, ino_reserve_fails);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
