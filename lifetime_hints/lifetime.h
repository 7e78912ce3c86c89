/* lifetime — what we expect of a file's life, and the zone class it gets.
 *
 * Purpose: files that die together should share zones, so that whole zones
 * become free without copying.  FUSE never sees F_SET_RW_HINT, so the class
 * is inferred.  Sources, strongest first (enum lifetime_source):
 *   1. XATTR     user.zonefuse.lifetime set on the file;
 *   2. DIR_XATTR the same xattr on the parent directory (inherited at create);
 *   3. RULE      a rules file given at mount (-o hints=FILE: "glob class");
 *   4. PRESET    built-in RocksDB/LevelDB name table (below);
 *   5. INFERRED  for LSM tables: level inferred from how the file was made;
 *   6. DEFAULT   nothing known: LIFETIME_MEDIUM.
 *
 * Preset table (name pattern -> class):
 *   *.log (WAL), LOG, LOG.old*      SHORT    rewritten/deleted within minutes
 *   MANIFEST-*, CURRENT, LOCK,      MEDIUM   small, frequently replaced
 *   OPTIONS-*, IDENTITY, *.dbtmp, *.tmp
 *   *.sst, *.ldb                    MEDIUM   until inferred (L0 flushes SHORT,
 *                                            deep levels LONG/EXTREME)
 *   *.blob                          LONG
 *
 * Invariants: every function is pure (no I/O, no global state) except where
 * it takes an explicit state argument.
 * Thread safety: pure functions are thread-safe.
 */
#ifndef ZONEFUSE_LIFETIME_H
#define ZONEFUSE_LIFETIME_H

#include <stdint.h>

enum lifetime_class {
	LIFETIME_NONE = 0,	/* metadata-like, unknown writer */
	LIFETIME_SHORT = 1,
	LIFETIME_MEDIUM = 2,
	LIFETIME_LONG = 3,
	LIFETIME_EXTREME = 4,
	LIFETIME_NR = 5,
};

enum lifetime_source {
	LIFETIME_SRC_DEFAULT = 0,
	LIFETIME_SRC_INFERRED = 1,
	LIFETIME_SRC_PRESET = 2,
	LIFETIME_SRC_RULE = 3,
	LIFETIME_SRC_DIR_XATTR = 4,
	LIFETIME_SRC_XATTR = 5,
};

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

#endif
