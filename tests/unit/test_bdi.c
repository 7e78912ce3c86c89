/* Unit tests for fusefs/bdi: the settings written to a fake sysfs tree for
 * the mount on /proc, each mode, and every way a setting is skipped. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fusefs/bdi.h"
#include "testlib.h"

static char root[64], bdi[160];

/* A fake /sys with the bdi directory of the /proc mount and its files. */
static void setup(void)
{
	struct stat st;
	char p[256];
	snprintf(root, sizeof(root), "/tmp/zf-test-bdi.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(stat("/proc", &st), 0);
	snprintf(p, sizeof(p), "%s/class", root);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/class/bdi", root);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(bdi, sizeof(bdi), "%s/class/bdi/%u:%u", root, major(st.st_dev), minor(st.st_dev));
	ck_assert_int_eq(mkdir(bdi, 0755), 0);
	const char *files[] = { "max_bytes", "strict_limit", "read_ahead_kb" };
	for (unsigned i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", bdi, files[i]);
		FILE *f = fopen(p, "w");
		ck_assert_ptr_nonnull(f);
		fputs("x\n", f);
		fclose(f);
	}
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	ck_assert_int_eq(system(cmd), 0);
}

/* The file's first line without its newline, "" if missing (writes
 * overwrite the fake files' "x\n" without truncating them). */
static const char *get(const char *name)
{
	static char v[64];
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", bdi, name);
	v[0] = 0;
	FILE *f = fopen(p, "r");
	if (f) {
		if (!fgets(v, sizeof(v), f))
			v[0] = 0;
		v[strcspn(v, "\n")] = 0;
		fclose(f);
	}
	return v;
}

START_TEST(parse_mode)
{
	enum fusefs_bdi_mode m;
	ck_assert_int_eq(fusefs_bdi_parse_mode("global", &m), 0);
	ck_assert_int_eq(m, FUSEFS_BDI_GLOBAL);
	ck_assert_int_eq(fusefs_bdi_parse_mode("strict", &m), 0);
	ck_assert_int_eq(m, FUSEFS_BDI_STRICT);
	ck_assert_int_eq(fusefs_bdi_parse_mode("off", &m), 0);
	ck_assert_int_eq(m, FUSEFS_BDI_OFF);
	ck_assert_int_eq(fusefs_bdi_parse_mode("on", &m), -EINVAL);
	ck_assert_int_eq(fusefs_bdi_parse_mode("", &m), -EINVAL);
}
END_TEST

/* Tunes the /proc mount in the fake tree with c and checks the count and
 * the three files ("x" = untouched, "" = missing). */
static void expect_tune(struct fusefs_bdi_conf c, int done, const char *max_bytes,
			const char *strict, const char *ra)
{
	ck_assert_int_eq(fusefs_bdi_tune("/proc", &c, root), done);
	ck_assert_str_eq(get("max_bytes"), max_bytes);
	ck_assert_str_eq(get("strict_limit"), strict);
	ck_assert_str_eq(get("read_ahead_kb"), ra);
}

START_TEST(global_writes_all_three)
{
	expect_tune((struct fusefs_bdi_conf){ FUSEFS_BDI_GLOBAL, 256u << 20, 1024 }, 3,
		    "268435456", "0", "1024");
}
END_TEST

START_TEST(strict_keeps_the_limit)
{
	expect_tune((struct fusefs_bdi_conf){ FUSEFS_BDI_STRICT, 64u << 20, 0 }, 2,
		    "67108864", "1", "x");
}
END_TEST

START_TEST(off_writes_nothing)
{
	expect_tune((struct fusefs_bdi_conf){ FUSEFS_BDI_OFF, 64u << 20, 1024 }, 0,
		    "x", "x", "x");
}
END_TEST

START_TEST(missing_file_is_skipped)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/strict_limit", bdi);
	ck_assert_int_eq(unlink(p), 0);	/* a kernel before 6.2 */
	expect_tune((struct fusefs_bdi_conf){ FUSEFS_BDI_GLOBAL, 1u << 20, 512 }, 2,
		    "1048576", "", "512");
}
END_TEST

/* An unknown mount point is -ENOENT; a mount whose bdi directory is
 * missing is skipped (0 written). */
START_TEST(nothing_to_tune)
{
	struct fusefs_bdi_conf c = { FUSEFS_BDI_GLOBAL, 1u << 20, 512 };
	char cmd[256];
	ck_assert_int_eq(fusefs_bdi_tune("/no/such/mount/point", &c, root), -ENOENT);
	ck_assert_str_eq(get("max_bytes"), "x");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", bdi);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(fusefs_bdi_tune("/proc", &c, root), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bdi");
	TCase *tc = tcase_create("bdi");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, parse_mode);
	tcase_add_test(tc, global_writes_all_three);
	tcase_add_test(tc, strict_keeps_the_limit);
	tcase_add_test(tc, off_writes_nothing);
	tcase_add_test(tc, missing_file_is_skipped);
	tcase_add_test(tc, nothing_to_tune);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
