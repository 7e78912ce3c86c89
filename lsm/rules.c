/* rules — the -o hints=FILE rules: parsing the file's text and matching a
 * name or a path against it (format in lifetime.h).  Pure: a rule set is
 * immutable once parsed, so lookups need no lock. */
#include "lsm/lifetime.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"

struct lifetime_rule {
	char *glob;
	uint8_t cls;
	bool path;
};

struct lifetime_rules {
	struct lifetime_rule *v;
	size_t n;
	bool need_path;
};

void lifetime_rules_free(struct lifetime_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].glob);
	free(r->v);
	free(r);
}

int lifetime_rules_parse(const char *text, struct lifetime_rules **out,
			 unsigned int *bad_line)
{
	struct lifetime_rules *r = calloc(1, sizeof(*r));
	size_t cap = 0;
	unsigned int lineno = 0;

	*out = NULL;
	if (bad_line)
		*bad_line = 0;
	if (!r)
		return -ENOMEM;
	while (text && *text) {
		const char *eol = strchr(text, '\n');
		size_t len = eol ? (size_t)(eol - text) : strlen(text);
		char line[1024], *p, *glob, *cls, *extra;
		enum lifetime_class c;

		lineno++;
		if (len >= sizeof(line))
			goto bad;
		memcpy(line, text, len);
		line[len] = 0;
		text = eol ? eol + 1 : text + len;
		if ((p = strchr(line, '#')))
			*p = 0;
		glob = strtok_r(line, " \t\r", &p);
		if (!glob)
			continue;
		cls = strtok_r(NULL, " \t\r", &p);
		extra = strtok_r(NULL, " \t\r", &p);
		if (!cls || extra || lifetime_class_parse(cls, &c))
			goto bad;
		if (glob[0] == '/')
			glob++;		/* paths are relative to the mount root */
		if (!*glob)
			goto bad;
		struct lifetime_rule *nv = zf_grow(r->v, &cap, r->n + 1, sizeof(*nv), 8);
		if (!nv) {
			lifetime_rules_free(r);
			return -ENOMEM;
		}
		r->v = nv;
		r->v[r->n].glob = strdup(glob);
		if (!r->v[r->n].glob) {
			lifetime_rules_free(r);
			return -ENOMEM;
		}
		r->v[r->n].cls = (uint8_t)c;
		r->v[r->n].path = strchr(glob, '/') != NULL;
		r->need_path |= r->v[r->n].path;
		r->n++;
	}
	*out = r;
	return 0;
bad:
	if (bad_line)
		*bad_line = lineno;
	lifetime_rules_free(r);
	return -EINVAL;
}

size_t lifetime_rules_count(const struct lifetime_rules *r)
{
	return r ? r->n : 0;
}

bool lifetime_rules_need_path(const struct lifetime_rules *r)
{
	return r && r->need_path;
}

int lifetime_rules_match(const struct lifetime_rules *r, const char *name,
			 const char *relpath)
{
	for (size_t i = 0; r && i < r->n; i++) {
		const struct lifetime_rule *x = &r->v[i];

		if (x->path) {
			if (relpath && fnmatch(x->glob, relpath, FNM_PATHNAME) == 0)
				return x->cls;
		} else if (name && fnmatch(x->glob, name, 0) == 0) {
			return x->cls;
		}
	}
	return -1;
}
