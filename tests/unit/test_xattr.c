/* Extended attribute namespaces and POSIX ACLs of the fs core:
 *   - user.*, trusted.*, security.* and system.posix_acl_* are stored, with
 *     the same limits (name 255 bytes, value 16 KiB), survive a crash after
 *     fsync and a clean remount; other names are refused;
 *   - user.zonefuse.* stays virtual, read-only (but for the lifetime) and
 *     unlisted (a lifetime that was set is stored and listed);
 *   - ACLs: malformed values refused, an access ACL sets the mode bits, a
 *     minimal one is only the mode, chmod rewrites the ACL, a default ACL
 *     is inherited by new files and directories (replacing the umask,
 *     which the caller applies otherwise), inside the CREATE record.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "fs/fs.h"
#include "fs/fs_acl.h"
#include "testlib.h"

#define FS_XATTR_MAX_TEST 65536	/* bytes: the largest value (fs.h) */

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void setup(void)
{
	tl_dev_make(&td, "xattr", 24, 4u << 20, 8);
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(tl_mount(dev, 32ull << 20, false, &fs), 0);
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

/* kill -9 after an fsync: only what was committed survives. */
static void crash_and_remount(void)
{
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);		/* fails: the device is dead; frees */
	fs = NULL;
	zdev_close(dev);
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(tl_mount(dev, 32ull << 20, false, &fs), 0);
}

static void clean_remount(void)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(tl_mount(dev, 32ull << 20, false, &fs), 0);
}

static uint64_t mk(uint64_t parent, const char *name, mode_t mode)
{
	return tl_mk(fs, parent, name, mode);
}

static uint32_t mode_of(uint64_t ino)
{
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	return st.st_mode & 07777;
}

static void value_is(uint64_t ino, const char *name, const void *v, int size)
{
	static char buf[FS_XATTR_MAX_TEST + 1];
	ck_assert_int_eq(fs_getxattr(fs, ino, name, NULL, 0), size);
	ck_assert_int_eq(fs_getxattr(fs, ino, name, buf, sizeof(buf)), size);
	ck_assert_int_eq(memcmp(buf, v, (size_t)size), 0);
}

/* ACL builder: tag, perm, id triples. */
struct acl { uint8_t b[4 + 8 * 16]; size_t n; };
enum { UO = 1, U = 2, GO = 4, G = 8, M = 0x10, O = 0x20 };

static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, v); put16(p + 2, v >> 16); }

static struct acl acl_make(int n, const int *e)
{
	struct acl a = { .n = 4 + 8 * (size_t)n };
	put32(a.b, 2);
	for (int i = 0; i < n; i++) {
		put16(a.b + 4 + 8 * i, (uint32_t)e[3 * i]);
		put16(a.b + 6 + 8 * i, (uint32_t)e[3 * i + 1]);
		put32(a.b + 8 + 8 * i, (uint32_t)e[3 * i + 2]);
	}
	return a;
}

static int perm_of(const struct acl *a, int tag, uint32_t id)
{
	for (size_t i = 4; i < a->n; i += 8) {
		uint32_t t = a->b[i] | a->b[i + 1] << 8, p = a->b[i + 2] | a->b[i + 3] << 8;
		uint32_t x = a->b[i + 4] | a->b[i + 5] << 8 | (uint32_t)a->b[i + 6] << 16 |
			     (uint32_t)a->b[i + 7] << 24;
		if ((int)t == tag && (tag == U || tag == G ? x == id : true))
			return (int)p;
	}
	return -1;
}

static struct acl acl_get(uint64_t ino, const char *name)
{
	struct acl a;
	int n = fs_getxattr(fs, ino, name, a.b, sizeof(a.b));
	ck_assert_int_gt(n, 0);
	a.n = (size_t)n;
	return a;
}

/* u::rw, u:4343:r, g::r, m::r, o::- */
static const int ext_acl[] = { UO, 6, -1, U, 4, 4343, GO, 4, -1, M, 4, -1, O, 0, -1 };

START_TEST(namespaces_stored_and_limited)
{
	uint64_t f = mk(FS_ROOT_INO, "f", S_IFREG | 0644);
	static char big[FS_XATTR_MAX_TEST + 1];
	char name[300];

	ck_assert_int_eq(fs_setxattr(fs, f, "user.a", "1", 1, 0), 0);
	ck_assert_int_eq(fs_setxattr(fs, f, "trusted.glusterfs.gfid", "0123456789abcdef", 16, 0), 0);
	ck_assert_int_eq(fs_setxattr(fs, f, "security.selinux", "system_u:object_r:x:s0", 22, 0), 0);
	ck_assert_int_eq(fs_setxattr(fs, f, "security.capability", "cap", 3, 0), 0);
	/* other system.* names and unknown namespaces */
	ck_assert_int_eq(fs_setxattr(fs, f, "system.foo", "x", 1, 0), -EOPNOTSUPP);
	ck_assert_int_eq(fs_setxattr(fs, f, "os2.x", "x", 1, 0), -EOPNOTSUPP);
	ck_assert_int_eq(fs_removexattr(fs, f, "system.foo"), -EOPNOTSUPP);
	ck_assert_int_eq(fs_getxattr(fs, f, "system.foo", NULL, 0), -ENODATA);
	/* the same limits in every namespace */
	memset(big, 'v', sizeof(big));
	const char *ns[] = { "user.", "trusted.", "security." };
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "%sbig", ns[i]);
		ck_assert_int_eq(fs_setxattr(fs, f, name, big, FS_XATTR_MAX_TEST, 0), 0);
		ck_assert_int_eq(fs_setxattr(fs, f, name, big, FS_XATTR_MAX_TEST + 1, 0), -E2BIG);
		memset(name, 'n', 256);
		memcpy(name, ns[i], strlen(ns[i]));
		name[255] = 0;
		ck_assert_int_eq(fs_setxattr(fs, f, name, "x", 1, 0), 0);
		name[255] = 'n';
		name[256] = 0;
		ck_assert_int_eq(fs_setxattr(fs, f, name, "x", 1, 0), -ERANGE);
	}
	ck_assert_int_eq(fs_setxattr(fs, f, "trusted.glusterfs.gfid", "x", 1, XATTR_CREATE), -EEXIST);
	ck_assert_int_eq(fs_setxattr(fs, f, "trusted.nope", "x", 1, XATTR_REPLACE), -ENODATA);
	ck_assert_int_eq(fs_removexattr(fs, f, "security.capability"), 0);
	ck_assert_int_eq(fs_removexattr(fs, f, "security.capability"), -ENODATA);
	char list[4096];
	int n = fs_listxattr(fs, f, list, sizeof(list));
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_nonnull(memmem(list, (size_t)n, "trusted.glusterfs.gfid", 23));
	ck_assert_ptr_nonnull(memmem(list, (size_t)n, "security.selinux", 17));
	ck_assert_ptr_null(memmem(list, (size_t)n, "security.capability", 20));

	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	crash_and_remount();
	value_is(f, "user.a", "1", 1);
	value_is(f, "trusted.glusterfs.gfid", "0123456789abcdef", 16);
	value_is(f, "security.selinux", "system_u:object_r:x:s0", 22);
	value_is(f, "security.big", big, FS_XATTR_MAX_TEST);
	ck_assert_int_eq(fs_getxattr(fs, f, "security.capability", NULL, 0), -ENODATA);
	clean_remount();
	value_is(f, "trusted.big", big, FS_XATTR_MAX_TEST);
	value_is(f, "trusted.glusterfs.gfid", "0123456789abcdef", 16);
}
END_TEST

START_TEST(virtual_names_read_only)
{
	uint64_t f = mk(FS_ROOT_INO, "f", S_IFREG | 0644);
	const char *ro[] = { "user.zonefuse.extents", "user.zonefuse.zones",
			     "user.zonefuse.stats", "user.zonefuse.mine" };
	for (size_t i = 0; i < 4; i++) {
		ck_assert_int_eq(fs_setxattr(fs, f, ro[i], "short", 5, 0), -EPERM);
		ck_assert_int_eq(fs_setxattr(fs, FS_ROOT_INO, ro[i], "short", 5, 0), -EPERM);
		ck_assert_int_eq(fs_removexattr(fs, f, ro[i]), -EPERM);
	}
	/* virtual values are read by name, never listed */
	char list[512];
	ck_assert_int_eq(fs_listxattr(fs, f, NULL, 0), 0);
	ck_assert_int_eq(fs_listxattr(fs, FS_ROOT_INO, NULL, 0), 0);
	ck_assert_int_gt(fs_getxattr(fs, FS_ROOT_INO, "user.zonefuse.stats", NULL, 0), 0);
	ck_assert_int_eq(fs_setxattr(fs, f, "user.zonefuse.lifetime", "long", 4, 0), 0);
	/* a lifetime that was set is stored, so listed (and copied) */
	ck_assert_int_eq(fs_listxattr(fs, f, list, sizeof(list)), 23);
	ck_assert_str_eq(list, "user.zonefuse.lifetime");
	ck_assert_int_eq(fs_setxattr(fs, f, "user.zonefuse.lifetime", "forever", 7, 0), -EINVAL);
	/* other namespaces never reach the virtual ones */
	ck_assert_int_eq(fs_setxattr(fs, f, "trusted.zonefuse.stats", "x", 1, 0), 0);
	ck_assert_int_eq(fs_getxattr(fs, f, "trusted.zonefuse.stats", NULL, 0), 1);
}
END_TEST

START_TEST(acl_validation)
{
	uint64_t f = mk(FS_ROOT_INO, "f", S_IFREG | 0644);
	uint64_t d = mk(FS_ROOT_INO, "d", S_IFDIR | 0755);
	const int no_mask[] = { UO, 6, -1, U, 4, 1, GO, 4, -1, O, 0, -1 };
	const int two_uo[] = { UO, 6, -1, UO, 6, -1, GO, 4, -1, O, 0, -1 };
	const int bad_perm[] = { UO, 8, -1, GO, 4, -1, O, 0, -1 };
	const int bad_tag[] = { UO, 6, -1, 0x40, 4, -1, GO, 4, -1, O, 0, -1 };
	const int no_other[] = { UO, 6, -1, GO, 4, -1, M, 4, -1 };
	const int *bad[] = { no_mask, two_uo, bad_perm, bad_tag, no_other };
	const int nbad[] = { 4, 4, 3, 4, 3 };
	for (int i = 0; i < 5; i++) {
		struct acl a = acl_make(nbad[i], bad[i]);
		ck_assert_int_eq(fs_acl_check(a.b, a.n), -EINVAL);
		ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, a.b, a.n, 0), -EINVAL);
		ck_assert_int_eq(fs_setxattr(fs, d, FS_ACL_DEFAULT, a.b, a.n, 0), -EINVAL);
	}
	struct acl a = acl_make(5, ext_acl);
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, a.b, a.n - 1, 0), -EINVAL);
	a.b[0] = 1;	/* version */
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, a.b, a.n, 0), -EINVAL);
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, "", 0, 0), -EINVAL);
	a = acl_make(5, ext_acl);
	/* only directories have default ACLs; symlinks have none */
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_DEFAULT, a.b, a.n, 0), -EACCES);
	struct stat st;
	ck_assert_int_eq(fs_symlink(fs, FS_ROOT_INO, "l", "f", NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(fs_setxattr(fs, st.st_ino, FS_ACL_ACCESS, a.b, a.n, 0), -EOPNOTSUPP);
	ck_assert_uint_eq(mode_of(f), 0644);	/* nothing changed */
	ck_assert_int_eq(fs_getxattr(fs, f, FS_ACL_ACCESS, NULL, 0), -ENODATA);
}
END_TEST

START_TEST(acl_mode_sync)
{
	uint64_t f = mk(FS_ROOT_INO, "f", S_IFREG | 04600);
	struct acl a = acl_make(5, ext_acl);
	struct stat st;

	/* setfacl -m u:4343:r on a 0600 file: mode 0640 (mask r), ACL kept */
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, a.b, a.n, 0), 0);
	ck_assert_uint_eq(mode_of(f), 04640);
	value_is(f, FS_ACL_ACCESS, a.b, (int)a.n);
	/* chmod 0660: the mask follows, the named entry stays */
	struct stat at = { .st_mode = S_IFREG | 0660 };
	ck_assert_int_eq(fs_setattr(fs, f, &at, FS_SET_MODE, &st), 0);
	struct acl b = acl_get(f, FS_ACL_ACCESS);
	ck_assert_int_eq(perm_of(&b, M, 0), 6);
	ck_assert_int_eq(perm_of(&b, U, 4343), 4);
	ck_assert_int_eq(perm_of(&b, GO, 0), 4);
	ck_assert_int_eq(perm_of(&b, O, 0), 0);
	ck_assert_int_eq(perm_of(&b, UO, 0), 6);
	/* chmod 0705 */
	at.st_mode = S_IFREG | 0705;
	ck_assert_int_eq(fs_setattr(fs, f, &at, FS_SET_MODE, &st), 0);
	b = acl_get(f, FS_ACL_ACCESS);
	ck_assert_int_eq(perm_of(&b, UO, 0), 7);
	ck_assert_int_eq(perm_of(&b, M, 0), 0);
	ck_assert_int_eq(perm_of(&b, O, 0), 5);
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	crash_and_remount();
	ck_assert_uint_eq(mode_of(f), 0705);
	b = acl_get(f, FS_ACL_ACCESS);
	ck_assert_int_eq(perm_of(&b, UO, 0), 7);
	ck_assert_int_eq(perm_of(&b, U, 4343), 4);
	/* set by someone outside the file's group: S_ISGID goes */
	at.st_mode = S_IFREG | 02750;
	ck_assert_int_eq(fs_setattr(fs, f, &at, FS_SET_MODE, &st), 0);
	a = acl_make(5, ext_acl);
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, a.b, a.n, 0), 0);
	ck_assert_uint_eq(mode_of(f), 02640);
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, a.b, a.n, FS_XATTR_KILL_SGID), 0);
	ck_assert_uint_eq(mode_of(f), 0640);
	at.st_mode = S_IFREG | 0705;
	ck_assert_int_eq(fs_setattr(fs, f, &at, FS_SET_MODE, &st), 0);
	/* a minimal ACL is only the mode: no ACL stored */
	const int minimal[] = { UO, 6, -1, GO, 0, -1, O, 4, -1 };
	a = acl_make(3, minimal);
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, a.b, a.n, 0), 0);
	ck_assert_uint_eq(mode_of(f), 0604);
	ck_assert_int_eq(fs_getxattr(fs, f, FS_ACL_ACCESS, NULL, 0), -ENODATA);
	/* removing an access ACL leaves the mode */
	a = acl_make(5, ext_acl);
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, a.b, a.n, 0), 0);
	ck_assert_int_eq(fs_removexattr(fs, f, FS_ACL_ACCESS), 0);
	ck_assert_uint_eq(mode_of(f), 0640);
	clean_remount();
	ck_assert_uint_eq(mode_of(f), 0640);
	ck_assert_int_eq(fs_getxattr(fs, f, FS_ACL_ACCESS, NULL, 0), -ENODATA);
}
END_TEST

START_TEST(acl_inheritance)
{
	uint64_t d = mk(FS_ROOT_INO, "d", S_IFDIR | 0755);
	/* default: u::rwx u:4343:rwx g::r-x m::rwx o::--- */
	const int def[] = { UO, 7, -1, U, 7, 4343, GO, 5, -1, M, 7, -1, O, 0, -1 };
	struct acl a = acl_make(5, def);

	ck_assert_int_eq(fs_setxattr(fs, d, FS_ACL_DEFAULT, a.b, a.n, 0), 0);
	ck_assert_uint_eq(mode_of(d), 0755);	/* a default ACL leaves the mode */
	uint64_t f = mk(d, "f", S_IFREG | 0666);
	uint64_t sub = mk(d, "sub", S_IFDIR | 0777);
	uint64_t g = mk(sub, "g", S_IFREG | 0640);
	struct stat st;
	ck_assert_int_eq(fs_symlink(fs, d, "l", "f", NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(fs_getxattr(fs, st.st_ino, FS_ACL_ACCESS, NULL, 0), -ENODATA);
	/* file: mode limited by the ACL (o::---), mask = the group bits */
	ck_assert_uint_eq(mode_of(f), 0660);
	struct acl b = acl_get(f, FS_ACL_ACCESS);
	ck_assert_int_eq(perm_of(&b, UO, 0), 6);
	ck_assert_int_eq(perm_of(&b, U, 4343), 7);
	ck_assert_int_eq(perm_of(&b, M, 0), 6);
	ck_assert_int_eq(perm_of(&b, O, 0), 0);
	ck_assert_int_eq(fs_getxattr(fs, f, FS_ACL_DEFAULT, NULL, 0), -ENODATA);
	/* directory: both ACLs, so its children inherit too */
	ck_assert_uint_eq(mode_of(sub), 0770);
	value_is(sub, FS_ACL_DEFAULT, a.b, (int)a.n);
	ck_assert_uint_eq(mode_of(g), 0640);
	b = acl_get(g, FS_ACL_ACCESS);
	ck_assert_int_eq(perm_of(&b, M, 0), 4);
	/* a default ACL that is only base entries gives a mode, no ACL */
	const int base[] = { UO, 7, -1, GO, 0, -1, O, 0, -1 };
	uint64_t d2 = mk(FS_ROOT_INO, "d2", S_IFDIR | 0777);
	a = acl_make(3, base);
	ck_assert_int_eq(fs_setxattr(fs, d2, FS_ACL_DEFAULT, a.b, a.n, 0), 0);
	uint64_t h = mk(d2, "h", S_IFREG | 0666);
	ck_assert_uint_eq(mode_of(h), 0600);
	ck_assert_int_eq(fs_getxattr(fs, h, FS_ACL_ACCESS, NULL, 0), -ENODATA);
	/* without a default ACL the mode is what the caller gave */
	uint64_t k = mk(FS_ROOT_INO, "k", S_IFREG | 0666);
	ck_assert_uint_eq(mode_of(k), 0666);
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	crash_and_remount();	/* the ACLs came in the CREATE records */
	ck_assert_uint_eq(mode_of(f), 0660);
	b = acl_get(f, FS_ACL_ACCESS);
	ck_assert_int_eq(perm_of(&b, U, 4343), 7);
	ck_assert_int_eq(perm_of(&b, M, 0), 6);
	a = acl_make(5, def);
	value_is(sub, FS_ACL_DEFAULT, a.b, (int)a.n);
	ck_assert_uint_eq(mode_of(h), 0600);
	clean_remount();
	value_is(sub, FS_ACL_DEFAULT, a.b, (int)a.n);
	b = acl_get(g, FS_ACL_ACCESS);
	ck_assert_int_eq(perm_of(&b, M, 0), 4);
}
END_TEST

START_TEST(read_only_refuses)
{
	uint64_t f = mk(FS_ROOT_INO, "f", S_IFREG | 0644);
	ck_assert_int_eq(fs_setxattr(fs, f, "trusted.x", "1", 1, 0), 0);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(tl_mount(dev, 32ull << 20, true, &fs), 0);
	struct acl a = acl_make(5, ext_acl);
	ck_assert_int_eq(fs_setxattr(fs, f, "trusted.y", "1", 1, 0), -EROFS);
	ck_assert_int_eq(fs_setxattr(fs, f, FS_ACL_ACCESS, a.b, a.n, 0), -EROFS);
	ck_assert_int_eq(fs_removexattr(fs, f, "trusted.x"), -EROFS);
	value_is(f, "trusted.x", "1", 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("xattr");
	TCase *tc = tcase_create("xattr");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, namespaces_stored_and_limited);
	tcase_add_test(tc, virtual_names_read_only);
	tcase_add_test(tc, acl_validation);
	tcase_add_test(tc, acl_mode_sync);
	tcase_add_test(tc, acl_inheritance);
	tcase_add_test(tc, read_only_refuses);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
