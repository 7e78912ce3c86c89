/* lifetime — the classes and sources by name, the presets, and the
 * decision: lifetime_decide() and the level -> class map
 * lifetime_level_classes().  Everything here is pure (lifetime.h has the
 * table these functions implement). */
#include "lsm/lifetime.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <string.h>

#include "lsm/lsm_priv.h"

double lsm_log2(double x)
{
	return x < 1 ? 0 : log2(x);
}

static const char *const class_names[LIFETIME_NR] = {
	"none", "short", "medium", "long", "extreme"
};

const char *lifetime_class_name(enum lifetime_class c)
{
	return (unsigned)c < LIFETIME_NR ? class_names[c] : "invalid";
}

const char *lifetime_source_name(enum lifetime_source s)
{
	static const char *const names[LIFETIME_SRC_NR] = {
		"default", "inferred", "preset", "rule", "dir-xattr", "xattr",
		"forced"
	};
	return (unsigned)s < LIFETIME_SRC_NR ? names[s] : "invalid";
}

const char *lifetime_why_name(enum lifetime_why w)
{
	static const char *const names[LIFETIME_WHY_NR] = {
		"reads", "job", "flush", "picker"
	};
	return (unsigned)w < LIFETIME_WHY_NR ? names[w] : "invalid";
}

int lifetime_class_parse(const char *s, enum lifetime_class *out)
{
	for (int i = 0; i < LIFETIME_NR; i++) {
		if (strcmp(s, class_names[i]) == 0 ||
		    (s[0] == '0' + i && s[1] == '\0')) {
			*out = (enum lifetime_class)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* The preset table (see lifetime.h); first match wins. */
static const struct {
	const char *glob;
	enum lifetime_class cls;
} presets[] = {
	{ "*.log", LIFETIME_SHORT },		/* RocksDB/LevelDB WAL */
	{ "LOG", LIFETIME_NONE },		/* info log: appended slowly */
	{ "LOG.old*", LIFETIME_NONE },
	{ "MANIFEST-*", LIFETIME_NONE },
	{ "CURRENT", LIFETIME_NONE },
	{ "LOCK", LIFETIME_NONE },
	{ "OPTIONS-*", LIFETIME_NONE },
	{ "IDENTITY", LIFETIME_NONE },
	{ "*.dbtmp", LIFETIME_NONE },		/* becomes CURRENT/OPTIONS */
	{ "*.sst", LIFETIME_MEDIUM },
	{ "*.ldb", LIFETIME_MEDIUM },
	{ "*.blob", LIFETIME_LONG },
	{ "*.tmp", LIFETIME_MEDIUM },
};

enum lifetime_source lifetime_preset(const char *name, enum lifetime_class *cls)
{
	for (size_t i = 0; name && i < sizeof(presets) / sizeof(presets[0]); i++) {
		if (fnmatch(presets[i].glob, name, 0) == 0) {
			*cls = presets[i].cls;
			return LIFETIME_SRC_PRESET;
		}
	}
	*cls = LIFETIME_MEDIUM;
	return LIFETIME_SRC_DEFAULT;
}

int lifetime_is_table(const char *name)
{
	return fnmatch("*.sst", name, 0) == 0 || fnmatch("*.ldb", name, 0) == 0;
}

int lifetime_is_leveldb_table(const char *name)
{
	return fnmatch("*.ldb", name, 0) == 0;
}

int lifetime_is_wal(const char *name)
{
	return fnmatch("*.log", name, 0) == 0;
}

/* ---- the decision -------------------------------------------------------- */

static bool class_ok(int c)
{
	return c >= 0 && c < LIFETIME_NR;
}

static const uint8_t default_level_class[LIFETIME_MAX_LEVELS] = {
	LIFETIME_MEDIUM, LIFETIME_MEDIUM, LIFETIME_LONG, LIFETIME_EXTREME,
	LIFETIME_EXTREME, LIFETIME_EXTREME, LIFETIME_EXTREME, LIFETIME_EXTREME,
};

enum lifetime_source lifetime_decide(const struct lifetime_facts *f,
				     enum lifetime_class *cls)
{
	if (f->forced) {
		*cls = LIFETIME_MEDIUM;
		return LIFETIME_SRC_FORCED;
	}
	if (class_ok(f->file_xattr)) {
		*cls = (enum lifetime_class)f->file_xattr;
		return LIFETIME_SRC_XATTR;
	}
	if (class_ok(f->dir_xattr)) {
		*cls = (enum lifetime_class)f->dir_xattr;
		return LIFETIME_SRC_DIR_XATTR;
	}
	if (class_ok(f->rule)) {
		*cls = (enum lifetime_class)f->rule;
		return LIFETIME_SRC_RULE;
	}
	if (f->level >= 0 && f->name && lifetime_is_table(f->name)) {
		const uint8_t *map = f->level_class ? f->level_class : default_level_class;
		int l = f->level < LIFETIME_MAX_LEVELS ? f->level : LIFETIME_MAX_LEVELS - 1;
		*cls = class_ok(map[l]) ? (enum lifetime_class)map[l] : LIFETIME_MEDIUM;
		return LIFETIME_SRC_INFERRED;
	}
	return lifetime_preset(f->name, cls);
}

void lifetime_level_classes(const struct lifetime_level_obs *wal,
			    const struct lifetime_level_obs lv[LIFETIME_MAX_LEVELS],
			    uint8_t out[LIFETIME_MAX_LEVELS])
{
	const double step = lsm_log2(LIFETIME_STEP_RATIO);
	int cls = LIFETIME_MEDIUM;

	(void)wal;	/* tables never join the WAL's class (see lifetime.h) */
	/* L0 opens MEDIUM; L1 shares it (an L0->L1 compaction kills both)
	 * unless it is seen to live STEP_RATIO times as long */
	out[0] = (uint8_t)cls;
	if (lv && lv[0].n >= LIFETIME_MIN_OBS && lv[1].n >= LIFETIME_MIN_OBS &&
	    lv[1].log2_life >= lv[0].log2_life + step)
		cls++;
	out[1] = (uint8_t)cls;
	/* from L2 on every level opens the next class, however long it
	 * lives: each level's tables die in that level's own compaction
	 * order, so two levels in one zone die on two unrelated schedules
	 * even when their lifetimes are alike */
	for (int l = 2; l < LIFETIME_MAX_LEVELS; l++) {
		if (cls < LIFETIME_EXTREME)
			cls++;
		out[l] = (uint8_t)cls;
	}
}
