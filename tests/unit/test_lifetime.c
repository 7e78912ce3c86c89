/* test_lifetime — unit tests of lsm/: the decision table,
 * presets, the rules file, the level -> class map, and the LSM level
 * inference on synthetic RocksDB- and LevelDB-like event sequences (the
 * patterns measured in ../shared/what-the-daemon-sees.md and in RocksDB's
 * LOG: one flush thread, one compaction thread, inputs deleted in a batch
 * after each compaction, often by another thread), and, through the fs
 * core on the emulator, where classes come from (rules file, directory
 * xattr, presets, inference, placement=off).  The collector's tests are
 * in test_gc.c.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "lsm/lifetime.h"
#include "failalloc.h"
#include "testlib.h"

#define MiB (1024ull * 1024ull)

/* ---- decision table ------------------------------------------------------ */

static enum lifetime_class decide(const struct lifetime_facts *f,
				  enum lifetime_source *src)
{
	enum lifetime_class c = LIFETIME_NR;

	*src = lifetime_decide(f, &c);
	return c;
}

static struct lifetime_facts facts(const char *name)
{
	struct lifetime_facts f = { .file_xattr = -1, .dir_xattr = -1,
				    .rule = -1, .name = name, .level = -1 };
	return f;
}

START_TEST(presets)
{
	static const struct { const char *name; int cls; } t[] = {
		{ "000012.log", LIFETIME_SHORT },
		{ "LOG", LIFETIME_NONE }, { "LOG.old.1700000000", LIFETIME_NONE },
		{ "MANIFEST-000005", LIFETIME_NONE }, { "CURRENT", LIFETIME_NONE },
		{ "LOCK", LIFETIME_NONE }, { "OPTIONS-000007", LIFETIME_NONE },
		{ "IDENTITY", LIFETIME_NONE }, { "000001.dbtmp", LIFETIME_NONE },
		{ "000123.sst", LIFETIME_MEDIUM }, { "000123.ldb", LIFETIME_MEDIUM },
		{ "000044.blob", LIFETIME_LONG }, { "x.tmp", LIFETIME_MEDIUM },
	};
	enum lifetime_class c;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ck_assert_int_eq(lifetime_preset(t[i].name, &c), LIFETIME_SRC_PRESET);
		ck_assert_msg((int)c == t[i].cls, "%s: %d", t[i].name, c);
	}
	ck_assert_int_eq(lifetime_preset("notes.txt", &c), LIFETIME_SRC_DEFAULT);
	ck_assert_int_eq(c, LIFETIME_MEDIUM);
	ck_assert(lifetime_is_table("1.sst") && lifetime_is_table("2.ldb"));
	ck_assert(!lifetime_is_table("1.sst.tmp") && !lifetime_is_table("LOG"));
	ck_assert(lifetime_is_wal("000004.log") && !lifetime_is_wal("LOG"));
	ck_assert_str_eq(lifetime_source_name(LIFETIME_SRC_FORCED), "forced");
	ck_assert_str_eq(lifetime_source_name(LIFETIME_SRC_NR), "invalid");
	ck_assert_str_eq(lifetime_class_name(LIFETIME_EXTREME), "extreme");
	ck_assert_int_eq(lifetime_class_parse("long", &c), 0);
	ck_assert_int_eq(c, LIFETIME_LONG);
	ck_assert_int_eq(lifetime_class_parse("4", &c), 0);
	ck_assert_int_eq(c, LIFETIME_EXTREME);
	ck_assert_int_eq(lifetime_class_parse("5", &c), -EINVAL);
	ck_assert_int_eq(lifetime_class_parse("Long", &c), -EINVAL);
}
END_TEST

/* Each row of the table in lifetime.h, and that a stronger source wins. */
START_TEST(decide_table)
{
	struct lifetime_facts f;
	enum lifetime_source s;
	uint8_t map[LIFETIME_MAX_LEVELS] = { 1, 1, 3, 4, 4, 4, 4, 4 };

	f = facts("000010.sst");
	f.forced = true;
	f.file_xattr = LIFETIME_LONG;
	ck_assert_int_eq(decide(&f, &s), LIFETIME_MEDIUM);
	ck_assert_int_eq(s, LIFETIME_SRC_FORCED);

	f = facts("000010.sst");
	f.file_xattr = LIFETIME_EXTREME;
	f.dir_xattr = LIFETIME_SHORT;
	f.rule = LIFETIME_NONE;
	f.level = 0;
	ck_assert_int_eq(decide(&f, &s), LIFETIME_EXTREME);
	ck_assert_int_eq(s, LIFETIME_SRC_XATTR);
	f.file_xattr = -1;
	ck_assert_int_eq(decide(&f, &s), LIFETIME_SHORT);
	ck_assert_int_eq(s, LIFETIME_SRC_DIR_XATTR);
	f.dir_xattr = 9;	/* invalid values are ignored */
	ck_assert_int_eq(decide(&f, &s), LIFETIME_NONE);
	ck_assert_int_eq(s, LIFETIME_SRC_RULE);
	f.rule = -1;
	ck_assert_int_eq(decide(&f, &s), LIFETIME_MEDIUM);	/* default map: L0 */
	ck_assert_int_eq(s, LIFETIME_SRC_INFERRED);
	f.level = 2;
	ck_assert_int_eq(decide(&f, &s), LIFETIME_LONG);
	f.level = 7;
	ck_assert_int_eq(decide(&f, &s), LIFETIME_EXTREME);
	f.level = 40;	/* beyond the table: the deepest entry */
	ck_assert_int_eq(decide(&f, &s), LIFETIME_EXTREME);
	f.level = 0;
	f.level_class = map;
	ck_assert_int_eq(decide(&f, &s), LIFETIME_SHORT);
	f.level = 1;
	ck_assert_int_eq(decide(&f, &s), LIFETIME_SHORT);
	f.level = -1;	/* table, level unknown: the preset */
	ck_assert_int_eq(decide(&f, &s), LIFETIME_MEDIUM);
	ck_assert_int_eq(s, LIFETIME_SRC_PRESET);

	f = facts("000010.log");
	f.level = 3;	/* a level only applies to tables */
	ck_assert_int_eq(decide(&f, &s), LIFETIME_SHORT);
	ck_assert_int_eq(s, LIFETIME_SRC_PRESET);
	f = facts("data.bin");
	ck_assert_int_eq(decide(&f, &s), LIFETIME_MEDIUM);
	ck_assert_int_eq(s, LIFETIME_SRC_DEFAULT);
	f = facts(NULL);
	ck_assert_int_eq(decide(&f, &s), LIFETIME_MEDIUM);
	ck_assert_int_eq(s, LIFETIME_SRC_DEFAULT);
}
END_TEST

/* ---- rules file ----------------------------------------------------------- */

START_TEST(rules_file)
{
	struct lifetime_rules *r;
	unsigned int bad;

	ck_assert_int_eq(lifetime_rules_parse(
		"# comment\n"
		"\n"
		"   *.sst   long   # trailing comment\n"
		"*.log\tshort\r\n"
		"/db/archive/*  extreme\n"
		"cache-*  0\n"
		"*.sst  none\n", &r, &bad), 0);
	ck_assert_uint_eq(lifetime_rules_count(r), 5);
	ck_assert(lifetime_rules_need_path(r));
	ck_assert_int_eq(lifetime_rules_match(r, "000001.sst", "db/000001.sst"), LIFETIME_LONG);
	ck_assert_int_eq(lifetime_rules_match(r, "7.log", "db/7.log"), LIFETIME_SHORT);
	/* path rule: the relative path, '/' not matched by '*' */
	ck_assert_int_eq(lifetime_rules_match(r, "old.dat", "db/archive/old.dat"), LIFETIME_EXTREME);
	ck_assert_int_eq(lifetime_rules_match(r, "old.dat", "db/archive/x/old.dat"), -1);
	ck_assert_int_eq(lifetime_rules_match(r, "old.dat", NULL), -1);
	ck_assert_int_eq(lifetime_rules_match(r, "cache-12", "cache-12"), LIFETIME_NONE);
	ck_assert_int_eq(lifetime_rules_match(r, "other", "other"), -1);
	lifetime_rules_free(r);

	ck_assert_int_eq(lifetime_rules_parse("", &r, &bad), 0);
	ck_assert_uint_eq(lifetime_rules_count(r), 0);
	ck_assert(!lifetime_rules_need_path(r));
	ck_assert_int_eq(lifetime_rules_match(r, "a.sst", NULL), -1);
	lifetime_rules_free(r);
	ck_assert_int_eq(lifetime_rules_match(NULL, "a.sst", NULL), -1);

	ck_assert_int_eq(lifetime_rules_parse("*.sst long\n*.log shrt\n", &r, &bad), -EINVAL);
	ck_assert_ptr_null(r);
	ck_assert_uint_eq(bad, 2);
	ck_assert_int_eq(lifetime_rules_parse("*.sst\n", &r, &bad), -EINVAL);
	ck_assert_uint_eq(bad, 1);
	ck_assert_int_eq(lifetime_rules_parse("ok short\n# x\n*.a long extra\n", &r, &bad), -EINVAL);
	ck_assert_uint_eq(bad, 3);
	ck_assert_int_eq(lifetime_rules_parse("/ long\n", &r, &bad), -EINVAL);
	ck_assert_uint_eq(bad, 1);
	{
		char *big = malloc(3000);

		memset(big, 'a', 2999);
		big[2999] = 0;
		ck_assert_int_eq(lifetime_rules_parse(big, &r, &bad), -EINVAL);
		free(big);
	}
}
END_TEST

/* ---- level -> class --------------------------------------------------------- */

static struct lifetime_level_obs obs(uint64_t n, double log2_life)
{
	struct lifetime_level_obs o = { n, log2_life };
	return o;
}

START_TEST(level_classes)
{
	struct lifetime_level_obs lv[LIFETIME_MAX_LEVELS] = { { 0, 0 } };
	struct lifetime_level_obs wal = obs(20, 23.0);
	uint8_t m[LIFETIME_MAX_LEVELS];

	/* nothing observed: the default map */
	lifetime_level_classes(NULL, NULL, m);
	ck_assert_int_eq(m[0], LIFETIME_MEDIUM);
	ck_assert_int_eq(m[1], LIFETIME_MEDIUM);
	ck_assert_int_eq(m[2], LIFETIME_LONG);
	ck_assert_int_eq(m[3], LIFETIME_EXTREME);
	ck_assert_int_eq(m[7], LIFETIME_EXTREME);

	/* RocksDB with random keys: L0 and L1 alike, L2 ~6x L0: L0/L1
	 * share MEDIUM, L2 LONG, L3 (unseen) EXTREME; the WAL never matters */
	lv[0] = obs(20, 25.3);
	lv[1] = obs(20, 25.6);
	lv[2] = obs(20, 27.9);
	lifetime_level_classes(&wal, lv, m);
	ck_assert_int_eq(m[0], LIFETIME_MEDIUM);
	ck_assert_int_eq(m[1], LIFETIME_MEDIUM);
	ck_assert_int_eq(m[2], LIFETIME_LONG);
	ck_assert_int_eq(m[3], LIFETIME_EXTREME);
	lv[0] = obs(20, 23.1);	/* L0 as short as the WAL: still MEDIUM */
	lifetime_level_classes(&wal, lv, m);
	ck_assert_int_eq(m[0], LIFETIME_MEDIUM);

	/* the anchor is the class's first level: slow growth still steps */
	lv[0] = obs(20, 25.3);
	lv[1] = obs(20, 26.5);	/* 2.3x L0: same class */
	lv[2] = obs(20, 27.0);	/* 1.4x L1 but 3.2x L0: next class */
	lifetime_level_classes(&wal, lv, m);
	ck_assert_int_eq(m[1], LIFETIME_MEDIUM);
	ck_assert_int_eq(m[2], LIFETIME_LONG);
	/* L1 living much longer than L0 gets its own class, and the deeper
	 * levels one more each */
	lv[1] = obs(20, 28.0);
	lv[2] = obs(20, 29.0);	/* 2x L1: its own class all the same */
	lifetime_level_classes(&wal, lv, m);
	ck_assert_int_eq(m[1], LIFETIME_LONG);
	ck_assert_int_eq(m[2], LIFETIME_EXTREME);
	ck_assert_int_eq(m[3], LIFETIME_EXTREME);

	/* LevelDB IoT: every level lives about as long (each level's sweep
	 * takes about as long), but each dies in its own compaction order:
	 * from L2 on a level never shares a shallower level's class; too few
	 * deaths count as none */
	lv[1] = obs(LIFETIME_MIN_OBS - 1, 30);
	lv[2] = obs(20, 25.5);
	lifetime_level_classes(&wal, lv, m);
	ck_assert_int_eq(m[1], LIFETIME_MEDIUM);
	ck_assert_int_eq(m[2], LIFETIME_LONG);
	ck_assert_int_eq(m[3], LIFETIME_EXTREME);
	for (int l = 0; l < 5; l++)
		lv[l] = obs(1000, 28.0 + 0.5 * (l % 2));
	lifetime_level_classes(&wal, lv, m);
	ck_assert_int_eq(m[1], LIFETIME_MEDIUM);
	ck_assert_int_eq(m[2], LIFETIME_LONG);
	ck_assert_int_eq(m[3], LIFETIME_EXTREME);
	ck_assert_int_eq(m[4], LIFETIME_EXTREME);

	/* never beyond EXTREME, never decreasing */
	for (int l = 0; l < LIFETIME_MAX_LEVELS; l++)
		lv[l] = obs(100, 24.0 + 4.0 * l);
	lifetime_level_classes(&wal, lv, m);
	for (int l = 1; l < LIFETIME_MAX_LEVELS; l++)
		ck_assert_int_ge(m[l], m[l - 1]);
	ck_assert_int_eq(m[LIFETIME_MAX_LEVELS - 1], LIFETIME_EXTREME);
}
END_TEST

/* ---- inference --------------------------------------------------------------- */

/* A small LSM simulator driving lifetime_infer_* the way the FUSE daemon
 * would, with file sizes known to the size callback. */
#define NF 4096
struct sim {
	struct lifetime_infer *li;
	uint64_t size[NF];
	int truth[NF];		/* true level, -1 = not a table */
	bool live[NF];
	uint64_t next;		/* next file id */
	uint64_t now, clock;
	uint64_t wal;		/* current WAL */
	int right, total;	/* at-create level accuracy */
	struct lifetime_fix fixes[LIFETIME_MAX_FIXES];
	size_t nfix;
};

static uint64_t sim_size(void *arg, uint64_t f)
{
	struct sim *s = arg;
	return f < NF ? s->size[f] : 0;
}

static void sim_tick(struct sim *s, uint64_t bytes)
{
	s->now += 1000000;	/* 1 ms */
	s->clock += bytes;
}

static uint64_t sim_wal(struct sim *s, uint32_t tid)
{
	uint64_t f = s->next++;

	lifetime_infer_create(s->li, f, LIFETIME_KIND_WAL, tid, s->now, s->clock,
			      sim_size, s, NULL);
	s->live[f] = true;
	s->truth[f] = -1;
	return f;
}

static uint64_t sim_table(struct sim *s, uint32_t tid, int level, uint64_t size,
			  struct lifetime_guess *g)
{
	uint64_t f = s->next++;
	struct lifetime_guess gg;

	s->size[f] = 0;		/* data comes later */
	lifetime_infer_create(s->li, f, LIFETIME_KIND_TABLE, tid, s->now, s->clock,
			      sim_size, s, &gg);
	s->size[f] = size;
	/* Half the tables are closed (sealed) as the daemon does at RELEASE;
	 * the others stay open, and the picker asks for their size. */
	if (f % 2)
		lifetime_infer_seal(s->li, f, size);
	ck_assert_int_eq(lifetime_infer_check(s->li), 0);
	s->truth[f] = level;
	s->live[f] = true;
	s->total++;
	s->right += gg.level == level;
	sim_tick(s, size);
	if (g)
		*g = gg;
	return f;
}

static void sim_unlink(struct sim *s, uint64_t f, uint32_t tid)
{
	s->nfix += lifetime_infer_unlink(s->li, f, tid, s->now, s->clock,
					 s->fixes + (s->nfix < LIFETIME_MAX_FIXES / 2 ? s->nfix : 0));
	s->live[f] = false;
	ck_assert_int_eq(lifetime_infer_check(s->li), 0);
	sim_tick(s, 0);
}

static void sim_init(struct sim *s)
{
	memset(s, 0, sizeof(*s));
	s->li = lifetime_infer_new();
	ck_assert_ptr_nonnull(s->li);
	s->next = 1;
	s->now = 1000000000;
}

/* Tables of level l alive now. */
static int sim_live(struct sim *s, int l, uint64_t *out, int max)
{
	int n = 0;

	for (uint64_t f = 1; f < s->next && n < max; f++)
		if (s->live[f] && s->truth[f] == l)
			out[n++] = f;
	return n;
}

/* One memtable: a new WAL (writer thread 100), the flush thread (200)
 * writes the L0 table and deletes the old WAL. */
static void rocks_flush(struct sim *s)
{
	uint64_t old = s->wal;
	struct lifetime_guess g;

	s->wal = sim_wal(s, 100);
	sim_tick(s, 8 * MiB);
	sim_table(s, 200, 0, 8 * MiB, &g);
	if (old)
		sim_unlink(s, old, 200);
}

/* A compaction by thread 300 of all level-l tables (and level l+1's) into
 * k outputs of level l+1; the inputs are deleted by `deleter`. */
static void rocks_compact(struct sim *s, int l, int k, uint32_t deleter)
{
	uint64_t in[256];
	int n = sim_live(s, l, in, 128);

	n += sim_live(s, l + 1, in + n, 128);
	for (int i = 0; i < k; i++)
		sim_table(s, 300, l + 1, 16 * MiB, NULL);
	for (int i = 0; i < n; i++)
		sim_unlink(s, in[i], deleter);
}

START_TEST(infer_rocksdb_flush_and_l0)
{
	struct sim s;
	struct lifetime_infer_stats st;

	sim_init(&s);
	s.wal = sim_wal(&s, 100);
	for (int round = 0; round < 30; round++) {
		for (int i = 0; i < 4; i++)
			rocks_flush(&s);
		/* the inputs are deleted by the flush thread, as RocksDB's
		 * FindObsoleteFiles in the next flush job often does */
		rocks_compact(&s, 0, 3, 200);
	}
	/* every flush is L0 and every L0->L1 output is L1 (the first job
	 * already: the L0 count is at the trigger) */
	ck_assert_int_eq(s.right, s.total);
	lifetime_infer_get_stats(s.li, &st);
	ck_assert_uint_eq(st.tables, (uint64_t)s.total);
	ck_assert_uint_eq(st.why[LIFETIME_WHY_FLUSH], 120);
	ck_assert_uint_eq(st.jobs_resolved, 30);
	ck_assert_uint_eq(st.tables_corrected, 0);
	/* L0 and L1 die together: one class */
	ck_assert_uint_ge(st.wal.n, LIFETIME_MIN_OBS);
	ck_assert_uint_ge(st.level[0].n, LIFETIME_MIN_OBS);
	ck_assert_msg(st.level_class[0] == LIFETIME_MEDIUM, "wal %llu/%.2f L0 %llu/%.2f",
		      (unsigned long long)st.wal.n, st.wal.log2_life,
		      (unsigned long long)st.level[0].n, st.level[0].log2_life);
	ck_assert_int_eq(st.level_class[1], LIFETIME_MEDIUM);
	for (uint64_t f = 1; f < s.next; f++)
		if (s.live[f] && s.truth[f] >= 0)
			ck_assert_int_eq(lifetime_infer_level(s.li, f), s.truth[f]);
	lifetime_infer_free(s.li);
}
END_TEST

/* L1 grows past its target; the picker must learn target(1) and predict
 * L1->L2 jobs once it has seen one; wrong guesses are corrected when the
 * inputs die. */
START_TEST(infer_rocksdb_deeper_levels)
{
	struct sim s;
	struct lifetime_infer_stats st;
	int right_late = 0, total_late = 0;

	sim_init(&s);
	s.wal = sim_wal(&s, 100);
	/* 38 rounds: L2 grows by one file a round and stays under its target
	 * (10 x 64 MiB), as in RocksDB before L3 exists */
	for (int round = 0; round < 38; round++) {
		uint64_t l1[64];
		int n1;

		uint64_t tmp[64];

		for (int i = 0; i < 4; i++)
			rocks_flush(&s);
		/* L0->L1 rewrites L1 one file larger */
		rocks_compact(&s, 0, sim_live(&s, 1, tmp, 64) + 1, 300);
		/* L1 over 64 MiB (5+ files of 16 MiB): push one L1 file down
		 * with its overlapping L2 files */
		n1 = sim_live(&s, 1, l1, 64);
		if (n1 > 4) {
			uint64_t l2[256];
			int n2 = sim_live(&s, 2, l2, 256), k = n2 / 4 + 1;
			int before_r = s.right, before_t = s.total;

			for (int i = 0; i < k; i++)
				sim_table(&s, 300, 2, 16 * MiB, NULL);
			sim_unlink(&s, l1[0], 300);
			for (int i = 0; i < n2 / 4; i++)
				sim_unlink(&s, l2[i], 300);
			if (round >= 10) {
				right_late += s.right - before_r;
				total_late += s.total - before_t;
			}
		}
	}
	lifetime_infer_get_stats(s.li, &st);
	ck_assert_uint_gt(st.jobs_resolved, 60);
	ck_assert_uint_gt(st.level_targets[1], 0);
	/* learned target(1) lies between 64 and 80 MiB of L1 (4 and 5 files) */
	ck_assert_msg(st.level_targets[1] >= 60 * MiB && st.level_targets[1] <= 84 * MiB,
		      "target(1) = %llu", (unsigned long long)st.level_targets[1]);
	ck_assert_int_gt(total_late, 0);
	ck_assert_msg(right_late * 10 >= total_late * 9, "L1->L2 outputs right %d/%d",
		      right_late, total_late);
	ck_assert_msg(s.right * 10 >= s.total * 9, "overall %d/%d", s.right, s.total);
	/* after the corrections every live table's level is right */
	for (uint64_t f = 1; f < s.next; f++)
		if (s.live[f] && s.truth[f] >= 0)
			ck_assert_int_eq(lifetime_infer_level(s.li, f), s.truth[f]);
	ck_assert_uint_gt(st.tables_corrected, 0);
	lifetime_infer_free(s.li);
}
END_TEST

/* Reads, when the daemon sees them, are the strongest signal: a table
 * created by a thread that just read L2 and L3 tables is L3. */
START_TEST(infer_from_reads)
{
	struct lifetime_infer *li = lifetime_infer_new();
	struct lifetime_guess g;
	uint64_t sz[16] = { 0 };

	for (uint64_t f = 1; f <= 4; f++)
		lifetime_infer_adopt(li, f, LIFETIME_KIND_TABLE, f <= 2 ? 2 : 3, 0, 0);
	ck_assert_int_eq(lifetime_infer_level(li, 3), 3);
	ck_assert_int_eq(lifetime_infer_level(li, 99), -1);
	/* too little read: not evidence */
	lifetime_infer_read(li, 1, 7, 4096, 1000);
	lifetime_infer_create(li, 10, LIFETIME_KIND_TABLE, 7, 2000, 0,
			      sim_size, sz, &g);
	ck_assert_int_ne(g.why, LIFETIME_WHY_READS);
	/* whole inputs read */
	lifetime_infer_read(li, 2, 8, 2 * MiB, 3000);
	lifetime_infer_read(li, 3, 8, 2 * MiB, 3000);
	lifetime_infer_read(li, 4, 8, 1 * MiB, 3000);
	lifetime_infer_create(li, 11, LIFETIME_KIND_TABLE, 8, 4000, 0,
			      sim_size, sz, &g);
	ck_assert_int_eq(g.why, LIFETIME_WHY_READS);
	ck_assert_int_eq(g.level, 3);
	/* its own previous output read back does not count; the inputs
	 * still do (same job) */
	lifetime_infer_read(li, 11, 8, 4 * MiB, 5000);
	lifetime_infer_create(li, 12, LIFETIME_KIND_TABLE, 8, 6000, 0,
			      sim_size, sz, &g);
	ck_assert_int_eq(g.level, 3);
	/* reads older than the window do not count */
	lifetime_infer_read(li, 1, 9, 4 * MiB, 7000);
	lifetime_infer_create(li, 13, LIFETIME_KIND_TABLE, 9,
			      7000 + LIFETIME_READ_WINDOW_NS + 1, 0, sim_size, sz, &g);
	ck_assert_int_ne(g.why, LIFETIME_WHY_READS);
	lifetime_infer_free(li);
}
END_TEST

/* LevelDB: one background thread flushes (when a new log exists) and
 * compacts; the flush must not be taken for a compaction output. */
START_TEST(infer_leveldb_single_thread)
{
	struct sim s;

	sim_init(&s);
	s.wal = sim_wal(&s, 100);
	for (int round = 0; round < 30; round++) {
		/* 4 flushes (the first right after the previous compaction, by
		 * the same thread), then the L0->L1 compaction */
		for (int i = 0; i < 4; i++) {
			uint64_t old = s.wal;

			s.wal = sim_wal(&s, 100);
			sim_tick(&s, 4 * MiB);
			sim_table(&s, 500, 0, 4 * MiB, NULL);
			sim_unlink(&s, old, 500);
		}
		rocks_compact(&s, 0, 2, 500);
	}
	ck_assert_msg(s.right * 100 >= s.total * 95, "%d/%d", s.right, s.total);
	lifetime_infer_free(s.li);
}
END_TEST

/* Robustness: unknown files, NULL state, unknown tid, files re-created,
 * many threads (slot recycling), many files (table growth). */
START_TEST(infer_corners)
{
	struct lifetime_infer *li = lifetime_infer_new();
	struct lifetime_infer_stats st;
	struct lifetime_fix fx[LIFETIME_MAX_FIXES];
	struct lifetime_guess g;
	uint8_t m[LIFETIME_MAX_LEVELS];

	ck_assert_uint_eq(lifetime_infer_unlink(li, 12345, 1, 0, 0, fx), 0);
	ck_assert_uint_eq(lifetime_infer_unlink(NULL, 1, 1, 0, 0, fx), 0);
	lifetime_infer_create(NULL, 1, LIFETIME_KIND_TABLE, 1, 0, 0, NULL, NULL, &g);
	ck_assert_int_eq(g.level, -1);
	lifetime_infer_read(NULL, 1, 1, 1, 0);
	lifetime_infer_level_classes(NULL, m);
	ck_assert_int_eq(m[2], LIFETIME_LONG);
	lifetime_infer_get_stats(NULL, &st);
	ck_assert_uint_eq(st.tables, 0);
	/* 100 threads, 20000 files: slots recycle, the table grows */
	for (uint64_t f = 1; f <= 20000; f++) {
		lifetime_infer_create(li, f, f % 3 ? LIFETIME_KIND_TABLE : LIFETIME_KIND_OTHER,
				      (uint32_t)(f % 100), f * 1000, f, NULL, NULL, &g);
		lifetime_infer_read(li, f, (uint32_t)(f % 100) + 1000, 4096, f * 1000);
		if (f % 3)
			ck_assert_int_ge(g.level, 0);
	}
	for (uint64_t f = 1; f <= 20000; f += 2)
		lifetime_infer_unlink(li, f, 0, 30000000, 30000, fx);
	/* re-creating an id replaces its record */
	lifetime_infer_create(li, 2, LIFETIME_KIND_WAL, 1, 0, 0, NULL, NULL, &g);
	ck_assert_int_eq(lifetime_infer_level(li, 2), -1);
	lifetime_infer_get_stats(li, &st);
	ck_assert_uint_gt(st.tables, 13000);
	for (uint64_t f = 4; f <= 20000; f += 2)
		ck_assert_int_ge(lifetime_infer_level(li, f), f % 3 ? 0 : -1);
	lifetime_infer_free(li);
	lifetime_infer_free(NULL);
}
END_TEST

/* A table's size as the daemon would say: its id, in KiB. */
static uint64_t id_size(void *arg, uint64_t f)
{
	(void)arg;
	return f << 10;
}

/* The picker's running sums (tables and sealed bytes per level, the open
 * tables) stay equal to a recount through adopt, seal, re-seal, more open
 * tables than are tracked, exact levels, corrections, re-created ids and
 * unlinks. */
START_TEST(infer_sums_recount)
{
	struct lifetime_infer *li = lifetime_infer_new();
	struct lifetime_fix fx[LIFETIME_MAX_FIXES];
	struct lifetime_guess g;

	for (uint64_t f = 1; f <= 8; f++)
		lifetime_infer_adopt(li, f, LIFETIME_KIND_TABLE, (int)(f % 4) - 1, 0, f * MiB);
	lifetime_infer_adopt(li, 9, LIFETIME_KIND_WAL, -1, 0, 4096);
	lifetime_infer_adopt(li, 3, LIFETIME_KIND_TABLE, 12, 0, 7);	/* again */
	ck_assert_int_eq(lifetime_infer_check(li), 0);
	ck_assert_int_eq(lifetime_infer_level(li, 3), LIFETIME_MAX_LEVELS - 1);
	/* 300 tables of one job, none closed: 128 stay open, the rest are
	 * sealed oldest first */
	for (uint64_t f = 100; f < 400; f++) {
		lifetime_infer_create(li, f, LIFETIME_KIND_TABLE, 7, 1000 + f, 0,
				      id_size, NULL, &g);
		ck_assert_int_ge(g.level, 0);
	}
	ck_assert_int_eq(lifetime_infer_check(li), 0);
	for (uint64_t f = 350; f < 400; f++)
		lifetime_infer_seal(li, f, f);
	lifetime_infer_seal(li, 360, 1);	/* written again, closed again */
	lifetime_infer_seal(li, 9, 1);		/* a WAL: not a table, no-op */
	lifetime_infer_seal(li, 99999, 1);	/* unknown */
	ck_assert_int_eq(lifetime_infer_check(li), 0);
	ck_assert_int_eq(lifetime_infer_set_level(li, 120, 5, &fx[0]), 1);
	ck_assert_int_eq(lifetime_infer_set_level(li, 360, 0, &fx[0]), 1);
	ck_assert_int_eq(lifetime_infer_check(li), 0);
	/* an input of level 1 dies: the job's outputs are corrected */
	ck_assert_uint_gt(lifetime_infer_unlink(li, 2, 7, 500000, 0, fx), 0);
	ck_assert_int_eq(lifetime_infer_check(li), 0);
	ck_assert_int_eq(lifetime_infer_level(li, 120), 5);	/* exact stays */
	ck_assert_int_eq(lifetime_infer_level(li, 121), 2);
	/* ids re-created as another kind, and unlinked, open or sealed */
	lifetime_infer_create(li, 130, LIFETIME_KIND_WAL, 8, 600000, 0, id_size, NULL, &g);
	lifetime_infer_create(li, 370, LIFETIME_KIND_OTHER, 8, 600000, 0, id_size, NULL, &g);
	for (uint64_t f = 100; f < 400; f += 3)
		lifetime_infer_unlink(li, f, 9, 700000, 0, fx);
	ck_assert_int_eq(lifetime_infer_check(li), 0);
	lifetime_infer_free(li);
}
END_TEST

/* A job whose outputs could not be listed (no memory for the list) still
 * has them all corrected when its inputs die: by a scan instead. */
static size_t fix_scenario(bool fail_list, int *levels)
{
	struct lifetime_infer *li = lifetime_infer_new();
	struct lifetime_fix fx[LIFETIME_MAX_FIXES];
	struct lifetime_guess g;
	size_t n;

	lifetime_infer_adopt(li, 1, LIFETIME_KIND_TABLE, 1, 0, 8 * MiB);
	lifetime_infer_adopt(li, 2, LIFETIME_KIND_TABLE, 1, 0, 8 * MiB);
	if (fail_list)
		failalloc_arm_calloc(16, sizeof(uint64_t));
	for (uint64_t f = 10; f < 13; f++)
		lifetime_infer_create(li, f, LIFETIME_KIND_TABLE, 300, 1000, 0,
				      id_size, NULL, &g);
	failalloc_disarm();
	n = lifetime_infer_unlink(li, 1, 300, 2000, 0, fx);
	for (uint64_t f = 10; f < 13; f++)
		levels[f - 10] = lifetime_infer_level(li, f);
	ck_assert_int_eq(lifetime_infer_check(li), 0);
	lifetime_infer_free(li);
	return n;
}

START_TEST(infer_fix_without_list)
{
	int with[3], without[3];
	uint64_t failed = failalloc_failed();

	ck_assert_uint_eq(fix_scenario(false, with), 3);
	ck_assert_uint_eq(failalloc_failed(), failed);
	ck_assert_uint_eq(fix_scenario(true, without), 3);
	ck_assert_uint_eq(failalloc_failed(), failed + 1);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(with[i], 2);
		ck_assert_int_eq(without[i], 2);
	}
}
END_TEST

/* Tables 1 and 2 adopted at levels l1 and l2, then a job of thread 300
 * writes tables 10-13 of (f - 9) MiB; guess[] gets their guessed levels. */
static struct lifetime_infer *one_job(int l1, int l2, int guess[4])
{
	struct lifetime_infer *li = lifetime_infer_new();
	struct lifetime_guess g;

	ck_assert_ptr_nonnull(li);
	lifetime_infer_adopt(li, 1, LIFETIME_KIND_TABLE, l1, 0, 8 * MiB);
	lifetime_infer_adopt(li, 2, LIFETIME_KIND_TABLE, l2, 0, 8 * MiB);
	for (uint64_t f = 10; f < 14; f++) {
		lifetime_infer_create(li, f, LIFETIME_KIND_TABLE, 300, 1000, 0,
				      id_size, NULL, &g);
		guess[f - 10] = g.level;
		lifetime_infer_seal(li, f, (f - 9) * MiB);
	}
	return li;
}

/* A job's inputs die in any order: its L2 input first makes its outputs
 * L3, its L1 input then L2.  Each output counts once as corrected. */
START_TEST(infer_corrected_counted_once)
{
	int guess[4];
	struct lifetime_infer *li = one_job(1, 2, guess);
	struct lifetime_infer_stats st;
	struct lifetime_fix fx[LIFETIME_MAX_FIXES];

	ck_assert_uint_eq(lifetime_infer_unlink(li, 2, 300, 2000, 0, fx), 4);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(fx[i].new_level, 3);
	ck_assert_uint_eq(lifetime_infer_unlink(li, 1, 300, 2001, 0, fx), 4);
	for (uint64_t f = 10; f < 14; f++)
		ck_assert_int_eq(lifetime_infer_level(li, f), 2);
	lifetime_infer_get_stats(li, &st);
	ck_assert_uint_eq(st.tables, 4);
	ck_assert_uint_eq(st.tables_corrected, 4);
	lifetime_infer_free(li);
}
END_TEST

/* A table whose class at death is not the class its level at create gave
 * counts as misguessed, with its sealed bytes: its data went to another
 * class's zones.  A correction within one class (L1 -> L0, both MEDIUM)
 * and a table adopted at mount (no guess) do not count. */
START_TEST(infer_misguessed_counted)
{
	int guess[4];
	struct lifetime_infer *li = one_job(1, 1, guess);
	struct lifetime_infer_stats st;
	struct lifetime_fix fx[LIFETIME_MAX_FIXES];

	/* a new job: nothing learned yet, the picker says L1 (MEDIUM) */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(guess[i], 1);
	/* its L1 input dies: the outputs are L2 (LONG) */
	ck_assert_uint_eq(lifetime_infer_unlink(li, 1, 300, 2000, 0, fx), 4);
	/* the MANIFEST puts two of them back: 12 in L1, 13 in L0 (MEDIUM) */
	ck_assert_int_eq(lifetime_infer_set_level(li, 12, 1, &fx[0]), 1);
	ck_assert_int_eq(lifetime_infer_set_level(li, 13, 0, &fx[0]), 1);
	for (uint64_t f = 10; f < 14; f++)
		lifetime_infer_unlink(li, f, 300, 3000, 0, fx);
	lifetime_infer_unlink(li, 2, 300, 3000, 0, fx);
	lifetime_infer_get_stats(li, &st);
	ck_assert_uint_eq(st.tables_died, 4);
	ck_assert_uint_eq(st.bytes_died, 10 * MiB);
	ck_assert_uint_eq(st.tables_misguessed, 2);
	ck_assert_uint_eq(st.bytes_misguessed, 3 * MiB);
	lifetime_infer_free(li);
}
END_TEST

/* LevelDB: the picker knows its level targets (10 MiB for L1, ten times
 * more per level) before any job taught it, and picks L1 -> L2 when L1's
 * score is the highest; a pending flush comes first even in the middle of
 * a compaction job.  RocksDB's tables learn their targets. */
static void leveldb_picks(bool leveldb, int *first, int *mid_flush)
{
	struct lifetime_infer *li = lifetime_infer_new();
	struct lifetime_guess g;
	uint64_t f = 1;

	if (leveldb)
		lifetime_infer_leveldb(li);
	/* L0 2 tables (score 0.5), L1 12 MiB (1.2), L2 80 MiB (0.8) */
	for (int i = 0; i < 2; i++)
		lifetime_infer_adopt(li, f++, LIFETIME_KIND_TABLE, 0, 0, 4 * MiB);
	for (int i = 0; i < 6; i++)
		lifetime_infer_adopt(li, f++, LIFETIME_KIND_TABLE, 1, 0, 2 * MiB);
	for (int i = 0; i < 40; i++)
		lifetime_infer_adopt(li, f++, LIFETIME_KIND_TABLE, 2, 0, 2 * MiB);
	lifetime_infer_create(li, 100, LIFETIME_KIND_WAL, 9, 1000, 0, id_size, NULL, NULL);
	lifetime_infer_create(li, 101, LIFETIME_KIND_TABLE, 5, 2000, 0, id_size, NULL, &g);
	*first = g.level;
	/* the memtable fills: a new WAL, and the job's thread writes next */
	lifetime_infer_create(li, 102, LIFETIME_KIND_WAL, 9, 3000, 0, id_size, NULL, NULL);
	lifetime_infer_create(li, 103, LIFETIME_KIND_TABLE, 5, 4000, 0, id_size, NULL, &g);
	*mid_flush = g.level;
	ck_assert_int_eq(lifetime_infer_check(li), 0);
	lifetime_infer_free(li);
}

START_TEST(infer_leveldb_picker)
{
	int first, mid;

	leveldb_picks(true, &first, &mid);
	ck_assert_int_eq(first, 2);
	ck_assert_int_eq(mid, 0);
	leveldb_picks(false, &first, &mid);
	ck_assert_int_eq(first, 1);	/* nothing learned: an L0 job */
	ck_assert_int_eq(mid, 1);	/* the job goes on */
	ck_assert(lifetime_is_leveldb_table("000012.ldb"));
	ck_assert(!lifetime_is_leveldb_table("000012.sst"));
}
END_TEST

/* ---- MANIFEST parsing ------------------------------------------------------ */

struct enc { uint8_t b[200000]; size_t n; };

static void e_var(struct enc *e, uint64_t v)
{
	while (v >= 0x80) {
		e->b[e->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	e->b[e->n++] = (uint8_t)v;
}

static void e_lp(struct enc *e, const char *s, size_t n)
{
	e_var(e, n);
	memcpy(e->b + e->n, s, n);
	e->n += n;
}

/* RocksDB kNewFile4 with a custom field, or LevelDB kNewFile (7) */
static void e_new(struct enc *e, bool rocks, int level, uint64_t num)
{
	e_var(e, rocks ? 103 : 7);
	e_var(e, (uint64_t)level);
	e_var(e, num);
	e_var(e, 8 << 20);
	e_lp(e, "aaaaaaaaaaaaaaaa", 16);
	e_lp(e, "zzzzzzzzzzzzzzzz", 16);
	if (rocks) {
		e_var(e, 100);
		e_var(e, 200);
		e_var(e, 2);		/* a custom field: tag, lp value */
		e_lp(e, "x", 1);
		e_var(e, 1);		/* kTerminate */
	}
}

/* Wrap a logical record into physical records (log format) at pos. */
static void e_log(struct enc *log, const uint8_t *rec, size_t n)
{
	bool first = true;

	do {
		size_t left = 32768 - log->n % 32768;

		if (left < 7) {
			memset(log->b + log->n, 0, left);
			log->n += left;
			left = 32768;
		}
		size_t frag = n < left - 7 ? n : left - 7;
		uint8_t type = first && frag == n ? 1 : first ? 2 : frag == n ? 4 : 3;
		uint8_t *h = log->b + log->n;
		uint32_t crc;

		h[4] = (uint8_t)frag;
		h[5] = (uint8_t)(frag >> 8);
		h[6] = type;
		memcpy(h + 7, rec, frag);
		crc = zf_crc32c(0, h + 6, 1 + frag);
		crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
		h[0] = (uint8_t)crc;
		h[1] = (uint8_t)(crc >> 8);
		h[2] = (uint8_t)(crc >> 16);
		h[3] = (uint8_t)(crc >> 24);
		log->n += 7 + frag;
		rec += frag;
		n -= frag;
		first = false;
	} while (n);
}

struct seen { int n; int op[4096], level[4096]; uint64_t num[4096]; };

static void seen_fn(void *arg, enum lifetime_manifest_op op, int level, uint64_t num)
{
	struct seen *s = arg;

	s->op[s->n] = op;
	s->level[s->n] = level;
	s->num[s->n] = num;
	s->n++;
}

START_TEST(manifest_parse)
{
	static struct enc log, rec;
	static struct seen sn;
	uint64_t done;

	ck_assert_uint_eq(zf_crc32c(0, "123456789", 9), 0xe3069283u);
	memset(&log, 0, sizeof(log));
	/* edit 1: comparator, log number, a flush to L0 (RocksDB) */
	rec.n = 0;
	e_var(&rec, 1);
	e_lp(&rec, "leveldb.BytewiseComparator", 26);
	e_var(&rec, 2);
	e_var(&rec, 12);
	e_var(&rec, 3);
	e_var(&rec, 14);
	e_new(&rec, true, 0, 13);
	e_log(&log, rec.b, rec.n);
	/* edit 2: a trivial move: deleted L2 #7, new L3 #7, and a safe-to-
	 * ignore tag (RocksDB kDbId-like) */
	rec.n = 0;
	e_var(&rec, 4);
	e_var(&rec, 999);
	e_var(&rec, (1u << 13) | 1);
	e_lp(&rec, "db-id", 5);
	e_var(&rec, 6);
	e_var(&rec, 2);
	e_var(&rec, 7);
	e_new(&rec, true, 3, 7);
	e_log(&log, rec.b, rec.n);
	/* edit 3: a big compaction edit spanning two blocks (FIRST, MIDDLE,
	 * LAST): 2000 new L1 files, LevelDB encoding */
	rec.n = 0;
	for (int i = 0; i < 2000; i++)
		e_new(&rec, false, 1, 100 + (uint64_t)i);
	ck_assert_uint_gt(rec.n, 32768 + 7);
	e_log(&log, rec.b, rec.n);
	/* edit 4: an unknown tag cuts the edit there */
	rec.n = 0;
	e_new(&rec, true, 2, 5000);
	e_var(&rec, 4242);
	e_new(&rec, true, 2, 5001);
	e_log(&log, rec.b, rec.n);
	size_t complete = log.n;

	memset(&sn, 0, sizeof(sn));
	done = lifetime_manifest_parse(log.b, log.n, 0, seen_fn, &sn);
	ck_assert_uint_eq(done, complete);
	ck_assert_int_eq(sn.n, 1 + 2 + 2000 + 1);
	ck_assert(sn.op[0] == LIFETIME_MF_NEW && sn.level[0] == 0 && sn.num[0] == 13);
	ck_assert(sn.op[1] == LIFETIME_MF_DELETED && sn.level[1] == 2 && sn.num[1] == 7);
	ck_assert(sn.op[2] == LIFETIME_MF_NEW && sn.level[2] == 3 && sn.num[2] == 7);
	ck_assert(sn.level[3] == 1 && sn.num[3] == 100 && sn.num[2002] == 2099);
	ck_assert(sn.level[2003] == 2 && sn.num[2003] == 5000);

	/* a cut tail stays unconsumed; parsing from the returned offset with
	 * the rest gives the same result, exactly once */
	memset(&sn, 0, sizeof(sn));
	done = lifetime_manifest_parse(log.b, complete - 10, 0, seen_fn, &sn);
	ck_assert_int_eq(sn.n, 3 + 2000);	/* edit 4 not complete */
	ck_assert_uint_lt(done, complete);
	done = lifetime_manifest_parse(log.b + done, complete - done, done, seen_fn, &sn);
	ck_assert_uint_eq(done, complete);
	ck_assert_int_eq(sn.n, 2004);
	/* the big edit cut in its MIDDLE: nothing of it yet */
	memset(&sn, 0, sizeof(sn));
	done = lifetime_manifest_parse(log.b, 40000, 0, seen_fn, &sn);
	ck_assert_int_eq(sn.n, 3);
	/* zeros (fallocated, not written yet) and a bad CRC stop the parse */
	memset(log.b + complete, 0, 100);
	memset(&sn, 0, sizeof(sn));
	ck_assert_uint_eq(lifetime_manifest_parse(log.b, complete + 100, 0, seen_fn, &sn), complete);
	log.b[5] ^= 1;	/* first record's length */
	memset(&sn, 0, sizeof(sn));
	ck_assert_uint_eq(lifetime_manifest_parse(log.b, complete, 0, seen_fn, &sn), 0);
	ck_assert_int_eq(sn.n, 0);

	ck_assert_uint_eq(lifetime_table_number("000123.sst"), 123);
	ck_assert_uint_eq(lifetime_table_number("77.ldb"), 77);
	ck_assert_uint_eq(lifetime_table_number("MANIFEST-000001"), 0);
	ck_assert_uint_eq(lifetime_table_number("x12.sst"), 0);
}
END_TEST

/* set_level: exact levels win over job corrections */
START_TEST(infer_exact_levels)
{
	struct sim s;
	struct lifetime_fix fx;
	uint64_t a, b;

	sim_init(&s);
	s.wal = sim_wal(&s, 100);
	a = sim_table(&s, 300, 2, 8 * MiB, NULL);	/* picker: a level guessed */
	b = sim_table(&s, 300, 2, 8 * MiB, NULL);
	ck_assert_int_eq(lifetime_infer_set_level(s.li, a, 3, &fx), 1);
	ck_assert_uint_eq(fx.file, a);
	ck_assert_int_eq(fx.new_level, 3);
	ck_assert_int_eq(lifetime_infer_set_level(s.li, a, 3, &fx), 0);
	ck_assert_int_eq(lifetime_infer_level(s.li, a), 3);
	ck_assert_int_eq(lifetime_infer_set_level(s.li, 99999, 1, &fx), 0);
	ck_assert_int_eq(lifetime_infer_set_level(s.li, s.wal, 1, &fx), 0);
	/* the job's inputs die: b is corrected, a (exact) is not */
	{
		uint64_t in = sim_table(&s, 400, 0, 8 * MiB, NULL);

		lifetime_infer_set_level(s.li, in, 0, NULL);
		sim_unlink(&s, in, 0);
	}
	ck_assert_int_eq(lifetime_infer_level(s.li, a), 3);
	ck_assert_int_eq(lifetime_infer_level(s.li, b), 1);
	{
		struct lifetime_infer_stats st;

		lifetime_infer_get_stats(s.li, &st);
		ck_assert_uint_eq(st.tables_exact, 2);
	}
	lifetime_infer_free(s.li);
}
END_TEST

/* ---- through the file system -------------------------------------------- */

static struct tl_dev td;
static char fhints[300];

/* A formatted emulated device (32 x 4 MiB zones), and a path for a rules
 * file next to it. */
static void fs_dev_make(void)
{
	tl_dev_make(&td, "lifetime", 32, 4ull << 20, 8);
	snprintf(fhints, sizeof(fhints), "%s/hints", td.dir);
}

static struct fs *fs_up(struct zdev **dev, const char *hints, bool off)
{
	return tl_mount_placement(&td, dev, hints, off);
}

static void fs_down(struct fs *fs, struct zdev *dev)
{
	tl_unmount_close(fs, dev);
}

static uint64_t mk(struct fs *fs, uint64_t parent, const char *name, uint32_t tid)
{
	struct fs_ctx ctx = { 0, 0, tid };
	struct stat st;

	ck_assert_int_eq(fs_mknod(fs, parent, name, S_IFREG | 0644, 0, &ctx, &st), 0);
	return st.st_ino;
}

static void lifetime_is(struct fs *fs, uint64_t ino, const char *want)
{
	char v[64];
	int n = fs_getxattr(fs, ino, "user.zonefuse.lifetime", v, sizeof(v) - 1);

	ck_assert_int_gt(n, 0);
	v[n] = 0;
	ck_assert_msg(strcmp(v, want) == 0, "ino %llu: '%s', want '%s'",
		      (unsigned long long)ino, v, want);
}

START_TEST(fs_class_sources)
{
	struct zdev *dev;
	struct fs *fs;
	struct stat st;
	struct fs_ctx ctx = { 0, 0, 1 };
	FILE *f;
	uint64_t logs, hot, t;

	fs_dev_make();
	f = fopen(fhints, "w");
	fputs("# test rules\n*.dat long\nlogs/*.txt extreme\n", f);
	fclose(f);
	fs = fs_up(&dev, fhints, false);
	lifetime_is(fs, mk(fs, FS_ROOT_INO, "a.dat", 1), "long rule\n");
	ck_assert_int_eq(fs_mkdir(fs, FS_ROOT_INO, "logs", 0755, &ctx, &st), 0);
	logs = st.st_ino;
	lifetime_is(fs, mk(fs, logs, "x.txt", 1), "extreme rule\n");
	lifetime_is(fs, mk(fs, FS_ROOT_INO, "x.txt", 1), "medium default\n");
	uint64_t mf = mk(fs, FS_ROOT_INO, "MANIFEST-000001", 1);

	lifetime_is(fs, mf, "none preset\n");
	lifetime_is(fs, mk(fs, FS_ROOT_INO, "000003.log", 1), "short preset\n");
	ck_assert_int_eq(fs_mkdir(fs, FS_ROOT_INO, "hot", 0755, &ctx, &st), 0);
	hot = st.st_ino;
	ck_assert_int_eq(fs_setxattr(fs, hot, "user.zonefuse.lifetime", "short", 5, 0), 0);
	lifetime_is(fs, mk(fs, hot, "b.dat", 1), "short dir-xattr\n");
	/* a table: a flush (a new WAL means a memtable waits), inferred */
	mk(fs, FS_ROOT_INO, "000005.log", 2);
	t = mk(fs, FS_ROOT_INO, "000006.sst", 3);
	lifetime_is(fs, t, "medium inferred\n");
	ck_assert_int_eq(fs_lifetime_level(fs, t), 0);
	/* the MANIFEST says where it really is (a table moved down): L2 */
	{
		static struct enc log, rec;

		log.n = rec.n = 0;
		e_var(&rec, 6);
		e_var(&rec, 0);
		e_var(&rec, 6);
		e_new(&rec, true, 2, 6);
		e_log(&log, rec.b, rec.n);
		ck_assert_int_eq(fs_write(fs, mf, 0, log.b, log.n, false), (ssize_t)log.n);
		fs_lifetime_tail_manifests(fs);
		ck_assert_int_eq(fs_lifetime_level(fs, t), 2);
		lifetime_is(fs, t, "long inferred\n");
		fs_lifetime_tail_manifests(fs);	/* nothing new: no change */
		ck_assert_int_eq(fs_lifetime_level(fs, t), 2);
	}
	/* the file's own xattr wins from then on */
	ck_assert_int_eq(fs_setxattr(fs, t, "user.zonefuse.lifetime", "extreme", 7, 0), 0);
	lifetime_is(fs, t, "extreme xattr\n");
	fs_down(fs, dev);
	/* classes persist */
	fs = fs_up(&dev, NULL, false);
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "a.dat", &st), 0);
	lifetime_is(fs, st.st_ino, "long rule\n");
	fs_down(fs, dev);
	/* placement off: one class for everything */
	fs = fs_up(&dev, fhints, true);
	lifetime_is(fs, mk(fs, FS_ROOT_INO, "c.dat", 1), "medium forced\n");
	lifetime_is(fs, mk(fs, FS_ROOT_INO, "000009.log", 1), "medium forced\n");
	fs_down(fs, dev);
	/* a bad rules file fails the mount */
	f = fopen(fhints, "w");
	fputs("*.dat lengthy\n", f);
	fclose(f);
	{
		struct fs_opts o;
		struct fs *bad = NULL;

		tl_dev_open(&td, &dev);
		fs_opts_default(&o);
		o.hints_file = fhints;
		ck_assert_int_eq(fs_mount(dev, &o, &bad), -EINVAL);
		o.hints_file = "/nonexistent/hints";
		ck_assert_int_eq(fs_mount(dev, &o, &bad), -ENOENT);
		zdev_close(dev);
	}
	unlink(fhints);
	tl_dev_remove(&td);
}
END_TEST

/* A LevelDB directory at the root: MANIFEST-000001 (*mf), a log, table
 * 000006.ldb (returned), then the MANIFEST's record putting it at L2 (in
 * *log) and the next table's create, which reads the MANIFEST first. */
static uint64_t db_manifest_says_l2(struct fs *fs, struct enc *log, uint64_t *mf)
{
	static struct enc rec;
	uint64_t t;

	*mf = mk(fs, FS_ROOT_INO, "MANIFEST-000001", 1);
	mk(fs, FS_ROOT_INO, "000005.log", 2);
	t = mk(fs, FS_ROOT_INO, "000006.ldb", 3);
	ck_assert_int_ne(fs_lifetime_level(fs, t), 2);
	log->n = rec.n = 0;
	e_new(&rec, false, 2, 6);
	e_log(log, rec.b, rec.n);
	ck_assert_int_eq(fs_write(fs, *mf, 0, log->b, log->n, false), (ssize_t)log->n);
	mk(fs, FS_ROOT_INO, "000007.ldb", 3);
	ck_assert_int_eq(fs_lifetime_level(fs, t), 2);
	return t;
}

/* The MANIFEST is read before a table's create: the levels it gives are
 * in when the next table's level is guessed, without waiting for the
 * collector's periodic read. */
START_TEST(fs_manifest_before_create)
{
	static struct enc log;
	struct zdev *dev;
	struct fs *fs;
	uint64_t mf, t;

	fs_dev_make();
	fs = fs_up(&dev, NULL, false);
	t = db_manifest_says_l2(fs, &log, &mf);
	lifetime_is(fs, t, "long inferred\n");
	fs_down(fs, dev);
	tl_dev_remove(&td);
}
END_TEST

/* Files anyone can name MANIFEST-* (copies, strays, fakes) fill the table
 * of followed MANIFESTs: a database's new one still replaces one of them,
 * and its levels arrive. */
START_TEST(fs_manifest_fakes_do_not_starve)
{
	static struct enc log, rec;
	struct zdev *dev;
	struct fs *fs;
	struct stat st;
	uint64_t mf;

	fs_dev_make();
	fs = fs_up(&dev, NULL, false);
	ck_assert_int_eq(fs_mkdir(fs, FS_ROOT_INO, "junk", 0755, &(struct fs_ctx){ 0 }, &st), 0);
	for (int i = 0; i < 40; i++) {
		char name[32];
		snprintf(name, sizeof(name), "MANIFEST-%06d", i);
		mk(fs, st.st_ino, name, 1);
	}
	fs_lifetime_tail_manifests(fs);
	db_manifest_says_l2(fs, &log, &mf);
	/* a fake now cannot push out the MANIFEST that was of use */
	for (int i = 40; i < 80; i++) {
		char name[32];
		snprintf(name, sizeof(name), "MANIFEST-%06d", i);
		mk(fs, st.st_ino, name, 1);
	}
	uint64_t u = mk(fs, FS_ROOT_INO, "000008.ldb", 3);
	rec.n = 0;
	size_t at = log.n;
	e_new(&rec, false, 3, 8);
	e_log(&log, rec.b, rec.n);
	ck_assert_int_eq(fs_write(fs, mf, at, log.b + at, log.n - at, false),
			 (ssize_t)(log.n - at));
	fs_lifetime_tail_manifests(fs);
	ck_assert_int_eq(fs_lifetime_level(fs, u), 3);
	fs_down(fs, dev);
	tl_dev_remove(&td);
}
END_TEST

/* Rules with '/' match the path from the root: right after directories
 * are renamed, exchanged and removed, and after a remount (the names are
 * rebuilt from the log), however deep. */
START_TEST(fs_rule_paths)
{
	struct zdev *dev;
	struct fs *fs;
	struct stat st;
	struct fs_ctx ctx = { 0, 0, 1 };
	uint64_t a, b, c, deep;
	FILE *f;

	fs_dev_make();
	f = fopen(fhints, "w");
	fputs("a/b/*.txt extreme\nc/b/*.txt short\nc/x/*.txt extreme\nc/*.txt long\n"
	      "d/d/d/d/d/d/d/d/d/d/*.txt extreme\n", f);
	fclose(f);
	fs = fs_up(&dev, fhints, false);
	ck_assert_int_eq(fs_mkdir(fs, FS_ROOT_INO, "a", 0755, &ctx, &st), 0);
	a = st.st_ino;
	ck_assert_int_eq(fs_mkdir(fs, a, "b", 0755, &ctx, &st), 0);
	b = st.st_ino;
	lifetime_is(fs, mk(fs, b, "x.txt", 1), "extreme rule\n");
	/* a renamed: its subdirectory's path is c/b */
	ck_assert_int_eq(fs_rename(fs, FS_ROOT_INO, "a", FS_ROOT_INO, "c", 0), 0);
	lifetime_is(fs, mk(fs, b, "y.txt", 1), "short rule\n");
	/* b and a new c/x exchanged: b is c/x, and c/b the new one */
	ck_assert_int_eq(fs_mkdir(fs, a, "x", 0755, &ctx, &st), 0);
	ck_assert_int_eq(fs_rename(fs, a, "b", a, "x", RENAME_EXCHANGE), 0);
	lifetime_is(fs, mk(fs, b, "z.txt", 1), "extreme rule\n");
	lifetime_is(fs, mk(fs, st.st_ino, "z.txt", 1), "short rule\n");
	ck_assert_int_eq(fs_mkdir(fs, FS_ROOT_INO, "e", 0755, &ctx, &st), 0);
	c = st.st_ino;
	ck_assert_int_eq(fs_rename(fs, a, "x", c, "b", 0), 0);	/* b is e/b */
	lifetime_is(fs, mk(fs, b, "w.txt", 1), "medium default\n");
	/* ten levels */
	deep = FS_ROOT_INO;
	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(fs_mkdir(fs, deep, "d", 0755, &ctx, &st), 0);
		deep = st.st_ino;
	}
	lifetime_is(fs, mk(fs, deep, "v.txt", 1), "extreme rule\n");
	fs_down(fs, dev);
	fs = fs_up(&dev, fhints, false);
	lifetime_is(fs, mk(fs, deep, "u.txt", 1), "extreme rule\n");
	lifetime_is(fs, mk(fs, a, "t.txt", 1), "long rule\n");
	fs_down(fs, dev);
	unlink(fhints);
	tl_dev_remove(&td);
}
END_TEST

static Suite *lifetime_suite(void)
{
	Suite *s = suite_create("lifetime");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, presets);
	tcase_add_test(tc, decide_table);
	tcase_add_test(tc, rules_file);
	tcase_add_test(tc, level_classes);
	tcase_add_test(tc, infer_rocksdb_flush_and_l0);
	tcase_add_test(tc, infer_rocksdb_deeper_levels);
	tcase_add_test(tc, infer_from_reads);
	tcase_add_test(tc, infer_leveldb_single_thread);
	tcase_add_test(tc, infer_corners);
	tcase_add_test(tc, infer_sums_recount);
	tcase_add_test(tc, infer_fix_without_list);
	tcase_add_test(tc, infer_corrected_counted_once);
	tcase_add_test(tc, infer_misguessed_counted);
	tcase_add_test(tc, infer_leveldb_picker);
	tcase_add_test(tc, manifest_parse);
	tcase_add_test(tc, infer_exact_levels);
	tcase_add_test(tc, fs_class_sources);
	tcase_add_test(tc, fs_rule_paths);
	tcase_add_test(tc, fs_manifest_before_create);
	tcase_add_test(tc, fs_manifest_fakes_do_not_starve);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lifetime_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
