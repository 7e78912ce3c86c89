/* lifetime — see lifetime.h. */
#include "lifetime.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

static const char *const class_names[LIFETIME_NR] = {
	"none", "short", "medium", "long", "extreme"
};

const char *lifetime_class_name(enum lifetime_class c)
{
	return (unsigned)c < LIFETIME_NR ? class_names[c] : "invalid";
}

const char *lifetime_source_name(enum lifetime_source s)
{
	static const char *const names[] = { "default", "inferred", "preset",
					     "rule", "dir-xattr", "xattr" };
	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "invalid";
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

/* The preset table; first match wins. */
static const struct {
	const char *glob;
	enum lifetime_class cls;
} presets[] = {
	{ "*.log", LIFETIME_SHORT },		/* RocksDB/LevelDB WAL */
	{ "LOG", LIFETIME_SHORT },		/* info log */
	{ "LOG.old*", LIFETIME_SHORT },
	{ "MANIFEST-*", LIFETIME_MEDIUM },
	{ "CURRENT", LIFETIME_MEDIUM },
	{ "LOCK", LIFETIME_MEDIUM },
	{ "OPTIONS-*", LIFETIME_MEDIUM },
	{ "IDENTITY", LIFETIME_MEDIUM },
	{ "*.dbtmp", LIFETIME_MEDIUM },
	{ "*.tmp", LIFETIME_MEDIUM },
	{ "*.sst", LIFETIME_MEDIUM },
	{ "*.ldb", LIFETIME_MEDIUM },
	{ "*.blob", LIFETIME_LONG },
};

enum lifetime_source lifetime_preset(const char *name, enum lifetime_class *cls)
{
	for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++) {
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
