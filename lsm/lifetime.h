/* lifetime — what we expect of a file's life, and the zone class it gets.
 *
 * Purpose: files that die together should share zones, so that whole zones
 * become free without copying.  FUSE never sees F_SET_RW_HINT, so the class
 * is decided by zonefuse from what it knows when the file is CREATED
 * (before any data is written; data reaches the daemon late, from kernel
 * writeback, without the writer's thread id).  This module knows nothing
 * of the file system: fs/fs_lifetime.c gathers the facts and applies the
 * answers.
 *
 * Files (declarations below are grouped the same way):
 *   lifetime.c   class and source names, presets, lifetime_decide(),
 *                lifetime_level_classes()
 *   rules.c      the -o hints=FILE rules: parse, match
 *   manifest.c   the RocksDB/LevelDB MANIFEST parser
 *   infer.c      the LSM level inference state (struct lifetime_infer)
 *   lsm_priv.h   helpers shared by those files only
 *
 * Invariants:
 *   - lifetime_decide(), lifetime_preset(), lifetime_level_classes(), the
 *     name predicates, the rules functions and lifetime_manifest_parse()
 *     are pure: no I/O, no global state, the result depends on the
 *     arguments only.
 *   - enum lifetime_source values are stored on disk: never renumbered.
 *   - A table's class never equals the WAL's (SHORT): level_class[] maps
 *     every level to MEDIUM or above.
 *   - A level set from a MANIFEST (lifetime_infer_set_level) is exact: the
 *     corrections that follow a job's end leave it alone; only another
 *     MANIFEST entry, or a new create of the same file id, changes it.
 *
 * Thread safety: the pure functions are safe from any thread; a parsed
 * rule set is immutable, so lifetime_rules_match() needs no lock.  The
 * inference state has its own leaf mutex: every lifetime_infer_* function
 * is thread-safe, takes no other lock, and calls back only through the
 * size callback of lifetime_infer_create() (with the mutex held).
 *
 * Classes (enum lifetime_class), shortest-lived first:
 *   NONE     small, slowly growing bookkeeping files (MANIFEST, info LOG,
 *            CURRENT, OPTIONS...): few bytes, they must not pin big zones
 *   SHORT    dies within about one memtable: the WAL
 *   MEDIUM   the default; L0/L1 tables (rewritten by every L0->L1 compaction)
 *   LONG     L2 tables, *.blob
 *   EXTREME  L3 and deeper tables
 *
 * ---- The decision: one pure function, lifetime_decide() ----------------
 * Sources, strongest first (enum lifetime_source); the first row that
 * applies wins:
 *
 *   what we know at CREATE                         class               source
 *   ---------------------------------------------  ------------------  ---------
 *   placement off (-o placement=off)               MEDIUM              forced
 *   user.zonefuse.lifetime set on the file (*)     its value           xattr
 *   user.zonefuse.lifetime on the parent dir       its value           dir-xattr
 *   a rules-file line matches (-o hints=FILE,      the line's class    rule
 *     first matching "glob class" line)
 *   a table (*.sst, *.ldb) with an inferred level  level_class[level]  inferred
 *   a preset name pattern matches (table below)    the preset's class  preset
 *   nothing known                                  MEDIUM              default
 *   (*) a file has no xattr at CREATE; setting the xattr later changes the
 *       class of the data written from then on (fs_xattr.c).
 *
 * Presets (basename; first match wins):
 *   *.log                                    SHORT    RocksDB/LevelDB WAL
 *   LOG, LOG.old*, MANIFEST-*, CURRENT,      NONE     bookkeeping: small, long-lived,
 *   LOCK, OPTIONS-*, IDENTITY, *.dbtmp                written a few bytes at a time
 *   *.sst, *.ldb                             MEDIUM   until a level is inferred
 *   *.blob                                   LONG     BlobDB value files
 *   *.tmp                                    MEDIUM
 *
 * level_class[] (lifetime_level_classes(), pure): L0 and L1 MEDIUM (an
 * L0->L1 compaction kills both: they die together), L2 LONG, L3+ EXTREME.
 * Observed lifetimes may only split L1 off: once L0 and L1 have
 * LIFETIME_MIN_OBS deleted tables each, an L1 living at least
 * LIFETIME_STEP_RATIO times as long as L0 (geometric mean lifetime,
 * measured in bytes written to the file system between create and unlink,
 * so it does not depend on speed) gets LONG, and every deeper level one
 * class more.  From L2 on each level opens the next class whatever its
 * lifetime: a level's tables die in that level's own compaction order
 * (LevelDB sweeps each level's key space round-robin), so two levels
 * sharing zones die on two unrelated schedules even when their lifetimes
 * are alike (measured with the LevelDB IoT workload on 16 MiB zones: GC
 * copied 18.9 GB with every level merged into MEDIUM by lifetime, about
 * 10 GB with one class per level).  Tables never share the WAL's class: a
 * WAL dies at the next flush, every table lives at least until the next
 * compaction.
 *
 * ---- Inference of a table's LSM level (struct lifetime_infer) ----------
 * Model of a leveled LSM (RocksDB, LevelDB): a memtable flush writes one
 * L0 table; a compaction of level k reads tables of level k (and k+1) and
 * writes tables of level k+1 = min(input levels) + 1, then the inputs are
 * deleted.  The daemon sees, with the caller's thread id: CREATE of tables
 * and WALs, READ (only when the page cache misses: zonefuse keeps the cache
 * across opens, so compaction inputs are usually NOT read through FUSE) and
 * UNLINK (the thread id there is not the job's: RocksDB deletes obsolete
 * files from whichever job finds them first).  So at CREATE of a table by
 * thread T, in this order:
 *   1. reads: T read >= LIFETIME_READ_MIN bytes of other live tables
 *      recently (not counting T's previous output, which T reads back) ->
 *      compaction output, level = min(levels of those tables) + 1;
 *   2. T is in the middle of a compaction job (it wrote compaction outputs
 *      whose inputs have not been deleted yet) -> same level as the job;
 *   3. a flush is pending (WALs created since the last flushes: every new
 *      WAL means a memtable waits for its flush) and T is not a pure
 *      compaction thread -> flush, L0;
 *   4. otherwise a new compaction job: its level is predicted by
 *      simulating the compaction picker on the LSM as we see it: scores
 *      L0 = files/LIFETIME_L0_TRIGGER, Lk = bytes(Lk)/target(k); the
 *      highest score wins and the output level is its level + 1.  The
 *      targets are learned from the jobs seen so far: target(k) is the
 *      score threshold that best separates the jobs that compacted level k
 *      from the others (with one job from level k >= 2 only: target(k-1) x
 *      LIFETIME_LEVEL_MULT, raised above every size at which level k was
 *      not chosen).  A level no job has compacted yet is never predicted:
 *      RocksDB fills a new level by moving tables down without rewriting
 *      them (invisible to us), its first real compaction teaches us.
 * After the fact, the first table unlinks after a job (its inputs) give
 * the job's true level (min + 1): the job's outputs are corrected (GC then
 * moves their data to the right class), and the targets are learned from
 * the scores seen at the job's start.  Deleted files' lifetimes feed
 * level_class[].  Accuracy is measured by scripts/bench-placement.sh
 * against RocksDB's own LOG (docs/placement.md has the method and results).
 * Bound: no guess (at create or in a correction) is deeper than one below
 * the deepest level holding a live table of exact level (MANIFEST), since
 * guesses feed on guesses and would otherwise compound into levels the LSM
 * does not have; before the first exact level there is no bound.
 */
#ifndef ZONEFUSE_LIFETIME_H
#define ZONEFUSE_LIFETIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum lifetime_class {
	LIFETIME_NONE = 0,	/* bookkeeping: small, slowly growing */
	LIFETIME_SHORT = 1,
	LIFETIME_MEDIUM = 2,
	LIFETIME_LONG = 3,
	LIFETIME_EXTREME = 4,
	LIFETIME_NR = 5,
};

/* Values are stored in the metadata log (inode records): never renumber. */
enum lifetime_source {
	LIFETIME_SRC_DEFAULT = 0,
	LIFETIME_SRC_INFERRED = 1,
	LIFETIME_SRC_PRESET = 2,
	LIFETIME_SRC_RULE = 3,
	LIFETIME_SRC_DIR_XATTR = 4,
	LIFETIME_SRC_XATTR = 5,
	LIFETIME_SRC_FORCED = 6,	/* -o placement=off */
	LIFETIME_SRC_NR = 7,
};

/* ---- names and presets (lifetime.c) ------------------------------------ */

const char *lifetime_class_name(enum lifetime_class c);	/* "short" ... */
const char *lifetime_source_name(enum lifetime_source s);	/* "preset" ... */
/* Parse "none|short|medium|long|extreme" (or "0".."4"); -EINVAL otherwise. */
int lifetime_class_parse(const char *s, enum lifetime_class *out);

/* Built-in presets: class for a file name (basename only).  Returns
 * LIFETIME_SRC_PRESET and sets *cls when a preset matches, otherwise
 * LIFETIME_SRC_DEFAULT with *cls = LIFETIME_MEDIUM. */
enum lifetime_source lifetime_preset(const char *name, enum lifetime_class *cls);

/* True for LSM table files (*.sst, *.ldb) whose level inference applies. */
int lifetime_is_table(const char *name);
/* True for LevelDB's tables (*.ldb; RocksDB names its tables *.sst). */
int lifetime_is_leveldb_table(const char *name);
/* True for write-ahead logs (*.log). */
int lifetime_is_wal(const char *name);

/* ---- the decision (lifetime.c) ------------------------------------------ */

#define LIFETIME_MAX_LEVELS 8
#define LIFETIME_MIN_OBS 8		/* deaths before a level's lifetime counts */
#define LIFETIME_STEP_RATIO 3.0		/* L1/L0 lifetime ratio that splits L1 off */

struct lifetime_facts {
	bool forced;		/* placement off: everything MEDIUM */
	int file_xattr;		/* class from the file's xattr, or -1 */
	int dir_xattr;		/* class from the parent directory's xattr, or -1 */
	int rule;		/* class from the rules file, or -1 */
	const char *name;	/* basename (presets); may be NULL */
	int level;		/* inferred LSM level of a table, or -1 */
	const uint8_t *level_class;	/* LIFETIME_MAX_LEVELS classes, NULL = default map */
};
/* The table in the header comment.  Sets *cls, returns the source. */
enum lifetime_source lifetime_decide(const struct lifetime_facts *f,
				     enum lifetime_class *cls);

/* Observed lifetimes, the input of lifetime_level_classes(). */
struct lifetime_level_obs {
	uint64_t n;		/* deaths observed */
	double log2_life;	/* mean log2(lifetime in bytes written), running */
};
/* level_class[] from observations (wal: the WAL's; lv: per level).  Pure. */
void lifetime_level_classes(const struct lifetime_level_obs *wal,
			    const struct lifetime_level_obs lv[LIFETIME_MAX_LEVELS],
			    uint8_t out[LIFETIME_MAX_LEVELS]);

/* ---- rules file, -o hints=FILE (rules.c) -------------------------------- */

/* Format: one rule per line, "GLOB CLASS" separated by blanks; '#' starts a
 * comment; blank lines are ignored.  A GLOB containing '/' is matched
 * (fnmatch, FNM_PATHNAME) against the path relative to the mount root
 * without a leading "/", e.g. "db/old/[0-9]*.sst"; otherwise against the
 * basename.  The first matching line wins. */
struct lifetime_rules;
/* Parse text (NUL-terminated).  On a bad line: -EINVAL and *bad_line is its
 * number (1-based).  -ENOMEM.  An empty file gives an empty rule set. */
int lifetime_rules_parse(const char *text, struct lifetime_rules **out,
			 unsigned int *bad_line);
void lifetime_rules_free(struct lifetime_rules *r);
size_t lifetime_rules_count(const struct lifetime_rules *r);
/* True if some rule needs the relative path. */
bool lifetime_rules_need_path(const struct lifetime_rules *r);
/* Class of the first rule matching (relpath may be NULL when no rule needs
 * it), or -1. */
int lifetime_rules_match(const struct lifetime_rules *r, const char *name,
			 const char *relpath);

/* ---- RocksDB/LevelDB MANIFEST (manifest.c) ------------------------------ *
 * The exact levels, after the fact.  The MANIFEST is a log (32 KiB blocks of records: masked CRC32C, u16
 * length, type FULL/FIRST/MIDDLE/LAST) of VersionEdits, appended and
 * fsync'ed by the store each time its LSM changes: after a flush or a
 * compaction, and for "trivial moves" (a table moved one level down without
 * being rewritten, which no other file operation reveals).  Each edit lists
 * deleted files (level, number) and new files (level, number, ...).  Parsing
 * it gives every table's exact level within a moment of the change, which
 * keeps the picker simulation's view of the LSM exact. */
enum lifetime_manifest_op { LIFETIME_MF_NEW = 0, LIFETIME_MF_DELETED = 1 };
typedef void (*lifetime_manifest_fn)(void *arg, enum lifetime_manifest_op op,
				     int level, uint64_t number);
/* Parse the complete records in buf, the bytes [base, base + len) of a
 * MANIFEST (base: any offset where a record starts, e.g. 0 or a value this
 * function returned).  Calls fn for each file entry of each complete edit
 * (edits with tags this parser does not know are cut at that tag).
 * Returns the offset up to which everything was consumed: the next call
 * starts there (a record cut by the end of buf, a zero-filled or corrupt
 * tail stay unconsumed). */
uint64_t lifetime_manifest_parse(const uint8_t *buf, size_t len, uint64_t base,
				 lifetime_manifest_fn fn, void *arg);
/* The table number in a name like "000123.sst" (or .ldb); 0 if none. */
uint64_t lifetime_table_number(const char *name);

/* ---- inference state (infer.c) ------------------------------------------ */

#define LIFETIME_L0_TRIGGER 4		/* L0 files that start an L0 compaction */
#define LIFETIME_LEVEL_MULT 10.0	/* default target(k+1) / target(k) */
#define LIFETIME_LDB_L1_TARGET (10.0 * 1048576.0)	/* LevelDB's L1 target, bytes */
#define LIFETIME_READ_MIN (64u << 10)	/* table bytes read that reveal a compaction */
#define LIFETIME_READ_WINDOW_NS (30ull * 1000000000ull)
#define LIFETIME_JOB_IDLE_NS (20ull * 1000000000ull)	/* an open job dies after this */

enum lifetime_kind {
	LIFETIME_KIND_OTHER = 0,	/* not a table or WAL */
	LIFETIME_KIND_WAL = 1,
	LIFETIME_KIND_TABLE = 2,
};

/* Why a table got its level (for the debug log and the statistics). */
enum lifetime_why {
	LIFETIME_WHY_READS = 0,		/* its creator read its inputs */
	LIFETIME_WHY_JOB = 1,		/* next output of an open compaction job */
	LIFETIME_WHY_FLUSH = 2,		/* a flush was pending */
	LIFETIME_WHY_PICKER = 3,	/* new compaction job: picker simulation */
	LIFETIME_WHY_NR = 4,
};
const char *lifetime_why_name(enum lifetime_why w);	/* lifetime.c */

struct lifetime_guess {
	int level;
	enum lifetime_why why;
	uint64_t job;		/* compaction job id (0 = flush) */
};

/* A level correction: file's level changed (after its job's inputs died). */
struct lifetime_fix {
	uint64_t file;
	int old_level, new_level;
};
#define LIFETIME_MAX_FIXES 64

struct lifetime_infer;
struct lifetime_infer *lifetime_infer_new(void);
void lifetime_infer_free(struct lifetime_infer *li);

/* A file of the given kind was created by thread tid (0 = unknown).
 * now_ns: monotonic time; clock: bytes written to the file system so far
 * (the lifetime unit).  For tables, *g gets the inferred level; size_of
 * (called with the state's mutex held; must not call back) gives the
 * current size of a table not yet sealed (at most 128 calls).  Creating a file id already known replaces
 * its record. */
void lifetime_infer_create(struct lifetime_infer *li, uint64_t file,
			   enum lifetime_kind kind, uint32_t tid,
			   uint64_t now_ns, uint64_t clock,
			   uint64_t (*size_of)(void *arg, uint64_t file),
			   void *arg, struct lifetime_guess *g);
/* Register a file that exists already (mount); a table at a level (-1
 * unknown) and of its final size in bytes. */
void lifetime_infer_adopt(struct lifetime_infer *li, uint64_t file,
			  enum lifetime_kind kind, int level, uint64_t clock,
			  uint64_t size);
/* A table's writer is done with it (the daemon: a RELEASE): from now on it
 * counts as size bytes in the picker's level sizes, without asking size_of.
 * A table never sealed is asked for its size while it is among the
 * newest 128 unsealed ones, and sealed at that size after.  No-op for a
 * file that is not a known table. */
void lifetime_infer_seal(struct lifetime_infer *li, uint64_t file, uint64_t size);
/* Thread tid read bytes of file (cheap: no file lookup). */
void lifetime_infer_read(struct lifetime_infer *li, uint64_t file, uint32_t tid,
			 uint64_t bytes, uint64_t now_ns);
/* The file's last name went away.  Level corrections that follow (a job's
 * inputs died) are written to fixes[] (up to LIFETIME_MAX_FIXES); returns
 * their number. */
size_t lifetime_infer_unlink(struct lifetime_infer *li, uint64_t file,
			     uint32_t tid, uint64_t now_ns, uint64_t clock,
			     struct lifetime_fix *fixes);
/* The exact level of a table (from the MANIFEST); later corrections leave
 * it alone.  Returns 1 and fills *fix when the belief changed. */
int lifetime_infer_set_level(struct lifetime_infer *li, uint64_t file, int level,
			     struct lifetime_fix *fix);
/* The tables are LevelDB's (named *.ldb).  From then on:
 *   - the picker uses LevelDB's level targets, LIFETIME_LDB_L1_TARGET
 *     for L1 and LIFETIME_LEVEL_MULT times more per level below, not
 *     learned ones: LevelDB has no option for them, and in its steady
 *     state two levels' scores differ by a few percent, which a learned
 *     threshold does not resolve;
 *   - a pending flush comes first, even for a thread in a compaction
 *     job: LevelDB's single background thread writes a waiting
 *     memtable before anything else, also in the middle of a job. */
void lifetime_infer_leveldb(struct lifetime_infer *li);
/* Current belief about a table's level (-1 unknown / not a table). */
int lifetime_infer_level(struct lifetime_infer *li, uint64_t file);
/* The level -> class map from the lifetimes observed so far. */
void lifetime_infer_level_classes(struct lifetime_infer *li,
				  uint8_t out[LIFETIME_MAX_LEVELS]);

struct lifetime_infer_stats {
	uint64_t tables;		/* tables created */
	uint64_t why[LIFETIME_WHY_NR];	/* ... by reason */
	uint64_t jobs_resolved;		/* compaction jobs whose inputs died */
	uint64_t tables_corrected;	/* outputs whose level was corrected (each once) */
	uint64_t tables_exact;		/* levels set from a MANIFEST */
	/* Tables unlinked whose level was guessed at create, their sealed
	 * bytes, and of those the tables whose level at death maps to another
	 * class than the guess did (their data went to the wrong zones, but
	 * for what was still buffered when the level was corrected). */
	uint64_t tables_died, bytes_died;
	uint64_t tables_misguessed, bytes_misguessed;
	uint64_t level_targets[LIFETIME_MAX_LEVELS];	/* target(k) the picker uses
							 * (learned, or LevelDB's), bytes */
	struct lifetime_level_obs wal, level[LIFETIME_MAX_LEVELS];
	uint8_t level_class[LIFETIME_MAX_LEVELS];
};
void lifetime_infer_get_stats(struct lifetime_infer *li,
			      struct lifetime_infer_stats *st);
/* Recounts the running sums (tables and sealed bytes per level, the open
 * tables) from the table of files: 0, or -EUCLEAN if one disagrees.  For
 * tests; walks every file. */
int lifetime_infer_check(struct lifetime_infer *li);

#endif
