/* zonefuse-stat — show where data sits on a mounted zonefuse file system.
 *
 *   zonefuse-stat [--watch [SECONDS]] [--json] [--svg FILE] [--top N] [--zones] MOUNTPOINT
 *   zonefuse-stat --prometheus MOUNTPOINT
 *   zonefuse-stat [--json] FILE
 *
 * Everything comes from the virtual xattrs (user.zonefuse.stats and
 * user.zonefuse.zones on the mount root; user.zonefuse.{lifetime,zones,
 * extents,file} on files; formats in docs/stats.md), so it needs no privileges
 * beyond reading the files and never touches the device.
 *
 * Exit status: 0 success, 1 failure (not a zonefuse mount, I/O error),
 * 2 bad command line.
 */
#include <ctype.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "lsm/lifetime.h"

#define EXIT_USAGE 2
#define XSTATS "user.zonefuse.stats"
#define XZONES "user.zonefuse.zones"
#define XEXTENTS "user.zonefuse.extents"
#define XLIFETIME "user.zonefuse.lifetime"
#define XFILE "user.zonefuse.file"

static const char usage_text[] =
"Usage: zonefuse-stat [OPTIONS] MOUNTPOINT\n"
"       zonefuse-stat [--json] FILE\n"
"\n"
"Show how a mounted zonefuse file system uses its zones: a summary (space,\n"
"zones open/active against the device limits, bytes written by users and to\n"
"the device, write amplification, resets, memory, request latency), a table\n"
"of zones grouped by lifetime class and condition, and the files that occupy\n"
"the most zones.  Given a FILE on a zonefuse mount, show that file's layout:\n"
"its lifetime class, the zones it occupies and its extents.\n"
"Reads only the user.zonefuse.* extended attributes (docs/stats.md).\n"
"\n"
"Options:\n"
"  -w, --watch [SECONDS]  redraw the summary every SECONDS (default 2) with\n"
"                         write rates, until interrupted\n"
"  -j, --json             print JSON instead of text (stats, zones, top files;\n"
"                         or the file's layout)\n"
"  -s, --svg FILE         draw the zone map into FILE as SVG (\"-\" = standard\n"
"                         output; a FILE ending in .png is converted with\n"
"                         rsvg-convert): one cell per zone, colour = lifetime\n"
"                         class, solid fill = valid bytes, pale fill = written\n"
"                         but no longer referenced, thick border = open zone,\n"
"                         dashed border = closed (active) zone\n"
"  -n, --top N            files listed by zones used (default 10; 0 skips the\n"
"                         walk of the directory tree)\n"
"  -z, --zones            also list every zone, one line each\n"
"  -p, --prometheus       print the stats in the Prometheus text exposition\n"
"                         format (for node_exporter's textfile collector)\n"
"  -h, --help             show this help\n"
"\n"
"Exit status: 0 success, 1 failure, 2 bad command line.\n";

/* ---- small helpers ---------------------------------------------------------- */

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "zonefuse-stat: out of memory\n");
		exit(1);
	}
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fprintf(stderr, "zonefuse-stat: out of memory\n");
		exit(1);
	}
	return p;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xmalloc(n), s, n);
}

static const char *hb(uint64_t v, char *buf, size_t len)
{
	return zf_fmt_bytes(v, buf, len);
}

/* Read one xattr (NUL-terminated copy).  NULL with errno set on failure.
 * Virtual values change between the size probe and the read: retry. */
static char *xget(const char *path, const char *name, size_t *lenp)
{
	for (int tries = 0; tries < 8; tries++) {
		ssize_t n = getxattr(path, name, NULL, 0);
		if (n < 0)
			return NULL;
		char *buf = xmalloc((size_t)n + 1);
		ssize_t m = getxattr(path, name, buf, (size_t)n);
		if (m >= 0) {
			buf[m] = 0;
			if (lenp)
				*lenp = (size_t)m;
			return buf;
		}
		int e = errno;
		free(buf);
		if (e != ERANGE) {
			errno = e;
			return NULL;
		}
	}
	errno = ERANGE;
	return NULL;
}

/* Read a paged list xattr (lines; "# next=N" continues in "<name>.N") and
 * return every line, comments removed. */
static char *xget_list(const char *path, const char *name)
{
	char *all = NULL;
	size_t alen = 0;
	char pname[256];

	snprintf(pname, sizeof(pname), "%s", name);
	for (int page = 0; page < 1000000; page++) {
		size_t n;
		char *v = xget(path, pname, &n);
		if (!v) {
			free(all);
			return NULL;
		}
		unsigned long long next = ULLONG_MAX;
		all = xrealloc(all, alen + n + 1);
		for (char *line = v, *nl; *line; line = nl) {
			nl = strchr(line, '\n');
			nl = nl ? nl + 1 : line + strlen(line);
			if (line[0] == '#') {
				if (sscanf(line, "# next=%llu", &next) != 1)
					next = ULLONG_MAX;
				continue;
			}
			memcpy(all + alen, line, (size_t)(nl - line));
			alen += (size_t)(nl - line);
		}
		all[alen] = 0;
		free(v);
		if (next == ULLONG_MAX)
			break;
		snprintf(pname, sizeof(pname), "%s.%llu", name, next);
	}
	return all;
}

/* Value of key=... in one "k=v k=v" line (copied into out). */
static bool field(const char *line, const char *key, char *out, size_t len)
{
	size_t kl = strlen(key);
	for (const char *p = line; *p && *p != '\n';) {
		while (*p == ' ')
			p++;
		if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
			p += kl + 1;
			size_t i = 0;
			while (*p && *p != ' ' && *p != '\n' && i + 1 < len)
				out[i++] = *p++;
			out[i] = 0;
			return true;
		}
		while (*p && *p != ' ' && *p != '\n')
			p++;
	}
	return false;
}

static uint64_t field_u64(const char *line, const char *key, bool *ok)
{
	char v[32];
	if (!field(line, key, v, sizeof(v)) || !isdigit((unsigned char)v[0])) {
		if (ok)
			*ok = false;
		return 0;
	}
	return strtoull(v, NULL, 10);
}

/* Value of key in "key=value" lines (0 if absent). */
static uint64_t lines_u64(const char *text, const char *key)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		bool ok = true;
		uint64_t v = field_u64(l, key, &ok);
		if (ok)
			return v;
	}
	return 0;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void xml_str(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			if (*p >= 0x20 || *p == '\t' || *p == '\n')
				fputc(*p, f);
		}
	}
}

static bool is_number(const char *s)
{
	const char *p = s;
	if (*p == '-')
		p++;
	if (!isdigit((unsigned char)*p))
		return false;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return false;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return *p == 0;
}

/* ---- stats ------------------------------------------------------------------ */

struct kv { char *k, *v; };
struct stats { struct kv *kv; size_t n; char *raw; };

static int stats_read(const char *mnt, struct stats *st)
{
	memset(st, 0, sizeof(*st));
	st->raw = xget(mnt, XSTATS, NULL);
	if (!st->raw)
		return -errno;
	size_t cap = 0;
	for (char *line = st->raw, *nl; line && *line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = 0;
		char *eq = strchr(line, '=');
		if (!eq || line[0] == '#')
			continue;
		*eq = 0;
		if (st->n == cap) {
			cap = cap ? cap * 2 : 128;
			st->kv = xrealloc(st->kv, cap * sizeof(*st->kv));
		}
		st->kv[st->n++] = (struct kv){ line, eq + 1 };
	}
	return 0;
}

static void stats_free(struct stats *st)
{
	free(st->kv);
	free(st->raw);
	memset(st, 0, sizeof(*st));
}

static const char *sv(const struct stats *st, const char *k)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(st->kv[i].k, k) == 0)
			return st->kv[i].v;
	return NULL;
}

static uint64_t su(const struct stats *st, const char *k)
{
	const char *v = sv(st, k);
	return v ? strtoull(v, NULL, 10) : 0;
}

static double sd(const struct stats *st, const char *k)
{
	const char *v = sv(st, k);
	return v ? strtod(v, NULL) : 0.0;
}

/* ---- zones ------------------------------------------------------------------ */

struct zone {
	uint32_t idx;
	char cls[16], cond[16];
	uint64_t wp, cap, valid;
	uint32_t files;
	int64_t resets;		/* -1: not tracked */
	bool leased;
};

static int zones_read(const char *mnt, struct zone **out, size_t *nout)
{
	char *txt = xget_list(mnt, XZONES);
	size_t n = 0, cap = 0;
	struct zone *z = NULL;

	if (!txt)
		return -errno;
	for (char *line = txt, *nl; *line; line = nl) {
		nl = strchr(line, '\n');
		nl = nl ? nl + 1 : line + strlen(line);
		bool ok = true;
		struct zone r = { 0 };
		char v[32];
		r.idx = (uint32_t)field_u64(line, "zone", &ok);
		if (!ok)
			continue;
		if (!field(line, "class", r.cls, sizeof(r.cls)))
			strcpy(r.cls, "?");
		if (!field(line, "cond", r.cond, sizeof(r.cond)))
			strcpy(r.cond, "?");
		r.wp = field_u64(line, "wp", NULL);
		r.cap = field_u64(line, "cap", NULL);
		r.valid = field_u64(line, "valid", NULL);
		r.files = (uint32_t)field_u64(line, "files", NULL);
		r.resets = field(line, "resets", v, sizeof(v)) && isdigit((unsigned char)v[0]) ?
			   (int64_t)strtoll(v, NULL, 10) : -1;
		r.leased = field_u64(line, "leased", NULL) != 0;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			z = xrealloc(z, cap * sizeof(*z));
		}
		z[n++] = r;
	}
	free(txt);
	*out = z;
	*nout = n;
	return 0;
}

static bool cond_open(const char *c)
{
	return !strcmp(c, "imp_open") || !strcmp(c, "exp_open");
}

/* ---- files (top by zones used) ------------------------------------------------ */

struct file {
	char *path;		/* relative to the mount point */
	uint64_t size, bytes;
	uint32_t zones;
	char cls[16], src[16];
};

static struct {
	struct file *v;
	size_t n, cap;
	size_t root_len;
	dev_t dev;
	unsigned long errors;
} walk;

static void lifetime_of(const char *path, char *cls, size_t clen, char *src, size_t slen)
{
	char *lt = xget(path, XLIFETIME, NULL);
	snprintf(cls, clen, "?");
	snprintf(src, slen, "?");
	if (lt) {
		char a[32] = "", b[32] = "";
		if (sscanf(lt, "%31s %31s", a, b) >= 1) {
			snprintf(cls, clen, "%s", a);
			if (b[0])
				snprintf(src, slen, "%s", b);
		}
		free(lt);
	}
}

static int walk_fn(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode) || st->st_dev != walk.dev)
		return 0;
	char *zl = xget_list(path, XZONES);
	if (!zl) {
		walk.errors++;
		return 0;
	}
	struct file f = { 0 };
	for (char *line = zl, *nl; *line; line = nl) {
		nl = strchr(line, '\n');
		nl = nl ? nl + 1 : line + strlen(line);
		bool ok = true;
		field_u64(line, "zone", &ok);
		if (!ok)
			continue;
		f.zones++;
		f.bytes += field_u64(line, "bytes", NULL);
	}
	free(zl);
	const char *rel = path + walk.root_len;
	while (*rel == '/')
		rel++;
	f.path = xstrdup(rel);
	f.size = (uint64_t)st->st_size;
	lifetime_of(path, f.cls, sizeof(f.cls), f.src, sizeof(f.src));
	if (walk.n == walk.cap) {
		walk.cap = walk.cap ? walk.cap * 2 : 256;
		walk.v = xrealloc(walk.v, walk.cap * sizeof(*walk.v));
	}
	walk.v[walk.n++] = f;
	return 0;
}

static int cmp_file(const void *a, const void *b)
{
	const struct file *x = a, *y = b;
	if (x->zones != y->zones)
		return x->zones < y->zones ? 1 : -1;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return strcmp(x->path, y->path);
}

static void files_free(void)
{
	for (size_t i = 0; i < walk.n; i++)
		free(walk.v[i].path);
	free(walk.v);
	memset(&walk, 0, sizeof(walk));
}

/* Walk the tree under mnt (one file system) and sort files by zones used. */
static void files_walk(const char *mnt)
{
	struct stat st;
	files_free();
	if (stat(mnt, &st))
		return;
	walk.dev = st.st_dev;
	walk.root_len = strlen(mnt);
	nftw(mnt, walk_fn, 32, FTW_PHYS | FTW_MOUNT);
	qsort(walk.v, walk.n, sizeof(*walk.v), cmp_file);
}

/* ---- text summary ---------------------------------------------------------------- */

struct group {
	char cls[16], cond[16];
	uint32_t zones, files_max;
	uint64_t written, valid, cap;
};

/* Where a zone's class sorts: meta, the lifetime classes shortest-lived
 * first, then "-" (no class), "unused", and anything else last. */
static int class_rank(const char *cls)
{
	if (!strcmp(cls, "meta"))
		return 0;
	for (int c = 0; c < LIFETIME_NR; c++)
		if (!strcmp(cls, lifetime_class_name((enum lifetime_class)c)))
			return 1 + c;
	if (!strcmp(cls, "-"))
		return 1 + LIFETIME_NR;
	if (!strcmp(cls, "unused"))
		return 2 + LIFETIME_NR;
	return 3 + LIFETIME_NR;
}

static int cmp_group(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	int ox = class_rank(x->cls), oy = class_rank(y->cls);
	if (ox != oy)
		return ox - oy;
	int c = strcmp(x->cls, y->cls);
	return c ? c : strcmp(x->cond, y->cond);
}

static size_t zone_groups(const struct zone *z, size_t n, struct group **out)
{
	struct group *g = xmalloc((n ? n : 1) * sizeof(*g));
	size_t ng = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j;
		for (j = 0; j < ng; j++)
			if (!strcmp(g[j].cls, z[i].cls) && !strcmp(g[j].cond, z[i].cond))
				break;
		if (j == ng) {
			memset(&g[ng], 0, sizeof(g[ng]));
			strcpy(g[ng].cls, z[i].cls);
			strcpy(g[ng].cond, z[i].cond);
			ng++;
		}
		g[j].zones++;
		g[j].written += z[i].wp;
		g[j].valid += z[i].valid;
		g[j].cap += z[i].cap;
		g[j].files_max = ZF_MAX(g[j].files_max, z[i].files);
	}
	qsort(g, ng, sizeof(*g), cmp_group);
	*out = g;
	return ng;
}

static const char *const lat_ops[] = { "lookup", "getattr", "setattr", "read", "write",
				       "flush", "fsync", "create", "remove", "rename", "open",
				       "readdir", "xattr", "other" };

struct rates { bool have; double user, device, interval; };

static void print_summary(const char *mnt, const struct stats *st, const struct zone *z,
			  size_t nz, size_t top, bool list_zones, const struct rates *rt)
{
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	uint64_t capb = su(st, "capacity_bytes"), valid = su(st, "valid_bytes");

	printf("zonefuse on %s (%s device %s)\n", mnt, sv(st, "backend") ? sv(st, "backend") : "?",
	       sv(st, "device") ? sv(st, "device") : "?");
	printf("  geometry   %llu zones x %s (capacity %s), block %llu; meta zones %llu-%llu, "
	       "data zones %llu-%llu\n",
	       (unsigned long long)su(st, "zones"), hb(su(st, "zone_size"), b1, sizeof(b1)),
	       hb(su(st, "zone_capacity"), b2, sizeof(b2)), (unsigned long long)su(st, "block_size"),
	       (unsigned long long)su(st, "meta_first_zone"),
	       (unsigned long long)(su(st, "meta_first_zone") + su(st, "meta_zones") - 1),
	       (unsigned long long)su(st, "data_first_zone"),
	       (unsigned long long)(su(st, "data_first_zone") + su(st, "data_zones") - 1));
	printf("  space      %s of data capacity: valid %s (%.1f%%), reclaimable %s, free %s\n",
	       hb(capb, b1, sizeof(b1)), hb(valid, b2, sizeof(b2)),
	       capb ? 100.0 * (double)valid / (double)capb : 0.0,
	       hb(su(st, "reclaimable_bytes"), b3, sizeof(b3)),
	       hb(su(st, "free_bytes"), b4, sizeof(b4)));
	printf("  zones      free %llu of %llu data zones; open %llu/%s, active %llu/%s "
	       "(data %llu open, %llu active; meta %llu active); pending resets %llu\n",
	       (unsigned long long)su(st, "free_zones"), (unsigned long long)su(st, "data_zones"),
	       (unsigned long long)su(st, "open_zones"),
	       su(st, "max_open_zones") ? sv(st, "max_open_zones") : "unlimited",
	       (unsigned long long)su(st, "active_zones"),
	       su(st, "max_active_zones") ? sv(st, "max_active_zones") : "unlimited",
	       (unsigned long long)su(st, "data_open_zones"),
	       (unsigned long long)su(st, "data_active_zones"),
	       (unsigned long long)su(st, "meta_active_zones"),
	       (unsigned long long)su(st, "pending_reset_zones"));
	printf("  written    user %s, device %s (data %s, metadata %s, gc %s): "
	       "write amplification %s\n",
	       hb(su(st, "user_bytes_written"), b1, sizeof(b1)),
	       hb(su(st, "device_bytes_written"), b2, sizeof(b2)),
	       hb(su(st, "data_bytes_written"), b3, sizeof(b3)),
	       hb(su(st, "meta_bytes_written"), b4, sizeof(b4)),
	       hb(su(st, "gc_bytes_written"), b5, sizeof(b5)),
	       sv(st, "write_amplification") ? sv(st, "write_amplification") : "?");
	if (rt && rt->have)
		printf("  rates      user %.1f MB/s, device %.1f MB/s (last %.1f s)\n",
		       rt->user / 1e6, rt->device / 1e6, rt->interval);
	printf("  zone ops   resets %llu (data %llu, meta %llu), finishes %llu\n",
	       (unsigned long long)su(st, "zone_resets"),
	       (unsigned long long)su(st, "data_zone_resets"),
	       (unsigned long long)su(st, "meta_zone_resets"),
	       (unsigned long long)su(st, "zone_finishes"));
	printf("  memory     write buffers %s of %s, prefetch %s of %s (+ %s spare)\n",
	       hb(su(st, "buffer_bytes"), b1, sizeof(b1)),
	       hb(su(st, "buffer_limit_bytes"), b2, sizeof(b2)),
	       hb(su(st, "prefetch_bytes"), b3, sizeof(b3)),
	       hb(su(st, "prefetch_limit_bytes"), b4, sizeof(b4)),
	       hb(su(st, "prefetch_spare_bytes"), b5, sizeof(b5)));
	printf("  metadata   %llu inodes, %llu commits, %llu snapshots, log epoch %llu\n",
	       (unsigned long long)su(st, "inodes"), (unsigned long long)su(st, "commits"),
	       (unsigned long long)su(st, "snapshots"), (unsigned long long)su(st, "log_epoch"));

	bool any = false;
	for (size_t i = 0; i < ZF_ARRAY_SIZE(lat_ops); i++) {
		char k[64];
		snprintf(k, sizeof(k), "lat_%s_count", lat_ops[i]);
		if (!su(st, k))
			continue;
		if (!any) {
			printf("\nRequest latency (microseconds)\n  %-8s %10s %10s %10s %10s %10s\n",
			       "request", "count", "avg", "p50", "p99", "max");
			any = true;
		}
		double v[4];
		static const char *const suf[] = { "avg", "p50", "p99", "max" };
		for (int j = 0; j < 4; j++) {
			snprintf(k, sizeof(k), "lat_%s_%s_us", lat_ops[i], suf[j]);
			v[j] = sd(st, k);
		}
		snprintf(k, sizeof(k), "lat_%s_count", lat_ops[i]);
		printf("  %-8s %10llu %10.1f %10.1f %10.1f %10.1f\n", lat_ops[i],
		       (unsigned long long)su(st, k), v[0], v[1], v[2], v[3]);
	}

	struct group *g;
	size_t ng = zone_groups(z, nz, &g);
	printf("\nZones by class and condition\n  %-8s %-9s %6s %11s %11s %7s %9s\n",
	       "class", "condition", "zones", "written", "valid", "valid%", "max files");
	for (size_t i = 0; i < ng; i++)
		printf("  %-8s %-9s %6u %11s %11s %6.1f%% %9u\n", g[i].cls, g[i].cond, g[i].zones,
		       hb(g[i].written, b1, sizeof(b1)), hb(g[i].valid, b2, sizeof(b2)),
		       g[i].cap ? 100.0 * (double)g[i].valid / (double)g[i].cap : 0.0,
		       g[i].files_max);
	free(g);

	if (list_zones) {
		printf("\nZones\n  %6s %-8s %-9s %11s %11s %11s %6s %6s\n", "zone", "class",
		       "condition", "written", "capacity", "valid", "files", "resets");
		for (size_t i = 0; i < nz; i++) {
			char r[24];
			if (z[i].resets < 0)
				snprintf(r, sizeof(r), "-");
			else
				snprintf(r, sizeof(r), "%lld", (long long)z[i].resets);
			printf("  %6u %-8s %-9s %11s %11s %11s %6u %6s%s\n", z[i].idx, z[i].cls,
			       z[i].cond, hb(z[i].wp, b1, sizeof(b1)), hb(z[i].cap, b2, sizeof(b2)),
			       hb(z[i].valid, b3, sizeof(b3)), z[i].files, r,
			       z[i].leased ? " (being written)" : "");
		}
	}

	if (top) {
		printf("\nTop files by zones used (%zu files", walk.n);
		if (walk.errors)
			printf(", %lu unreadable", walk.errors);
		printf(")\n  %5s %11s %11s %-8s %-9s %s\n", "zones", "size", "on device",
		       "class", "source", "path");
		for (size_t i = 0; i < walk.n && i < top; i++)
			printf("  %5u %11s %11s %-8s %-9s %s\n", walk.v[i].zones,
			       hb(walk.v[i].size, b1, sizeof(b1)), hb(walk.v[i].bytes, b2, sizeof(b2)),
			       walk.v[i].cls, walk.v[i].src, walk.v[i].path);
	}
}

/* ---- JSON ------------------------------------------------------------------------- */

static void print_json(const char *mnt, const struct stats *st, const struct zone *z,
		       size_t nz, size_t top)
{
	printf("{\n  \"mountpoint\": ");
	json_str(stdout, mnt);
	printf(",\n  \"stats\": {");
	for (size_t i = 0; i < st->n; i++) {
		printf("%s\n    ", i ? "," : "");
		json_str(stdout, st->kv[i].k);
		printf(": ");
		if (is_number(st->kv[i].v))
			printf("%s", st->kv[i].v);
		else
			json_str(stdout, st->kv[i].v);
	}
	printf("\n  },\n  \"zones\": [");
	for (size_t i = 0; i < nz; i++) {
		printf("%s\n    {\"zone\": %u, \"class\": ", i ? "," : "", z[i].idx);
		json_str(stdout, z[i].cls);
		printf(", \"cond\": ");
		json_str(stdout, z[i].cond);
		printf(", \"wp\": %llu, \"cap\": %llu, \"valid\": %llu, \"files\": %u, \"resets\": ",
		       (unsigned long long)z[i].wp, (unsigned long long)z[i].cap,
		       (unsigned long long)z[i].valid, z[i].files);
		if (z[i].resets < 0)
			printf("null");
		else
			printf("%lld", (long long)z[i].resets);
		printf(", \"leased\": %s}", z[i].leased ? "true" : "false");
	}
	printf("\n  ],\n  \"top_files\": [");
	for (size_t i = 0; i < walk.n && i < top; i++) {
		printf("%s\n    {\"path\": ", i ? "," : "");
		json_str(stdout, walk.v[i].path);
		printf(", \"size\": %llu, \"device_bytes\": %llu, \"zones\": %u, \"class\": ",
		       (unsigned long long)walk.v[i].size, (unsigned long long)walk.v[i].bytes,
		       walk.v[i].zones);
		json_str(stdout, walk.v[i].cls);
		printf(", \"source\": ");
		json_str(stdout, walk.v[i].src);
		printf("}");
	}
	printf("\n  ],\n  \"files\": %zu\n}\n", walk.n);
}

/* ---- SVG zone map ---------------------------------------------------------------------- */

/* The zone map's colours (CSS class k<i>): meta, then one per lifetime
 * class in enum order, then anything else.  A class added to
 * enum lifetime_class must get its colour here: the assertion says so. */
static const char *const palette[] = {
	"#6b6b6b",						/* meta */
	"#9467bd", "#d62728", "#ff7f0e", "#2ca02c", "#1f77b4",	/* none..extreme */
	"#bbbbbb",						/* other */
};
_Static_assert(ZF_ARRAY_SIZE(palette) == LIFETIME_NR + 2,
	       "one zone-map colour per lifetime class, plus meta and other");

static size_t class_idx(const char *cls)
{
	int r = class_rank(cls);
	return r <= LIFETIME_NR ? (size_t)r : ZF_ARRAY_SIZE(palette) - 1;
}

/* The legend's name for colour i (i below the last, "other"). */
static const char *palette_name(size_t i)
{
	return i ? lifetime_class_name((enum lifetime_class)(i - 1)) : "meta";
}

/* Height in pixels of `part` of `whole` in a cell, one decimal. */
static double bar(uint64_t part, uint64_t whole, unsigned cell)
{
	double r = whole ? (double)part / (double)whole : 0.0;
	return (double)(long)((double)cell * ZF_MIN(1.0, r) * 10.0 + 0.5) / 10.0;
}

/* The zone map: one rect.cell per zone, row-major by zone index.  Shared
 * attributes live in the style sheet so a map of a few hundred zones stays
 * small. */
static int write_svg(FILE *f, const char *mnt, const struct stats *st, const struct zone *z,
		     size_t nz)
{
	char b1[32], b2[32], b3[32];
	unsigned cols = nz <= 64 ? 16 : nz <= 256 ? 32 : nz <= 2048 ? 64 : 128;
	unsigned cell = nz <= 256 ? 22 : nz <= 2048 ? 12 : 6;
	unsigned gap = cell >= 12 ? 3 : 1;
	unsigned rows = (unsigned)((nz + cols - 1) / cols);
	unsigned mx = 12, top = 52;
	unsigned gw = cols * (cell + gap) - gap, gh = rows ? rows * (cell + gap) - gap : 0;
	unsigned width = ZF_MAX(gw + 2 * mx, 600u), legend_y = top + gh + 22;
	unsigned height = legend_y + 58;
	unsigned sw = cell >= 12 ? 2 : 1;	/* border of open/closed marks */

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\" "
		"viewBox=\"0 0 %u %u\" font-family=\"sans-serif\" font-size=\"12\">\n",
		width, height, width, height);
	fprintf(f, "<title>zonefuse zone map of ");
	xml_str(f, mnt);
	fprintf(f, "</title>\n<style>.cell{stroke:#c8c8c8;stroke-width:.5}.free{fill:#fff}"
		".tint{fill-opacity:.15}.dead{fill-opacity:.3}"
		".open,.closed{fill:none;stroke:#000;stroke-width:%u}.closed{stroke-dasharray:2 2}"
		".bad{stroke:#000}.note{fill:#444}", sw);
	for (size_t i = 0; i < ZF_ARRAY_SIZE(palette); i++)
		fprintf(f, ".k%zu{fill:%s}", i, palette[i]);
	fprintf(f, "</style>\n<rect width=\"%u\" height=\"%u\" fill=\"#fff\"/>\n", width, height);
	fprintf(f, "<text x=\"%u\" y=\"20\" font-size=\"14\" font-weight=\"bold\">zonefuse zone map: ",
		mx);
	xml_str(f, mnt);
	fprintf(f, "</text>\n<text x=\"%u\" y=\"38\">%zu zones x %s; valid %s of %s; "
		"write amplification %s</text>\n", mx, nz, hb(su(st, "zone_size"), b1, sizeof(b1)),
		hb(su(st, "valid_bytes"), b2, sizeof(b2)),
		hb(su(st, "capacity_bytes"), b3, sizeof(b3)),
		sv(st, "write_amplification") ? sv(st, "write_amplification") : "?");
	for (size_t i = 0; i < nz; i++) {
		const struct zone *r = &z[i];
		unsigned x = mx + (unsigned)(i % cols) * (cell + gap);
		unsigned y = top + (unsigned)(i / cols) * (cell + gap);
		size_t k = class_idx(r->cls);
		if (!strcmp(r->cls, "-") && !r->leased) {	/* free data zone */
			fprintf(f, "<rect class=\"cell free\" x=\"%u\" y=\"%u\" width=\"%u\" "
				"height=\"%u\"/>\n", x, y, cell, cell);
			continue;
		}
		if (!strcmp(r->cond, "empty") && !r->leased) {	/* unused meta zone */
			fprintf(f, "<rect class=\"cell tint k%zu\" x=\"%u\" y=\"%u\" width=\"%u\" "
				"height=\"%u\"/>\n", k, x, y, cell, cell);
			continue;
		}
		fprintf(f, "<g><title>zone %u %s %s: %s valid, %s written, %u files",
			r->idx, r->cls, r->cond, hb(r->valid, b1, sizeof(b1)),
			hb(r->wp, b2, sizeof(b2)), r->files);
		if (r->resets >= 0)
			fprintf(f, ", %lld resets", (long long)r->resets);
		fprintf(f, "</title>\n<rect class=\"cell tint k%zu\" x=\"%u\" y=\"%u\" width=\"%u\" "
			"height=\"%u\"/>", k, x, y, cell, cell);
		double hw = bar(r->wp, r->cap, cell), hv = bar(r->valid, r->cap, cell);
		if (hw > hv)
			fprintf(f, "<rect class=\"dead k%zu\" x=\"%u\" y=\"%.1f\" width=\"%u\" "
				"height=\"%.1f\"/>", k, x, y + cell - hw, cell, hw - hv);
		if (hv > 0)
			fprintf(f, "<rect class=\"k%zu\" x=\"%u\" y=\"%.1f\" width=\"%u\" "
				"height=\"%.1f\"/>", k, x, y + cell - hv, cell, hv);
		if (cond_open(r->cond) || !strcmp(r->cond, "closed"))
			fprintf(f, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%u\" "
				"height=\"%u\"/>", cond_open(r->cond) ? "open" : "closed",
				x + sw / 2.0, y + sw / 2.0, cell - sw, cell - sw);
		else if (!strcmp(r->cond, "offline") || !strcmp(r->cond, "readonly"))
			fprintf(f, "<path class=\"bad\" d=\"M%u %uL%u %uM%u %uL%u %u\"/>", x, y,
				x + cell, y + cell, x + cell, y, x, y + cell);
		fprintf(f, "</g>\n");
	}
	/* legend */
	unsigned lx = mx;
	for (size_t i = 0; i + 1 < ZF_ARRAY_SIZE(palette); i++) {
		fprintf(f, "<rect class=\"k%zu\" x=\"%u\" y=\"%u\" width=\"12\" height=\"12\"/>"
			"<text x=\"%u\" y=\"%u\">%s</text>\n", i, lx, legend_y, lx + 16, legend_y + 10,
			palette_name(i));
		lx += 22 + 7 * (unsigned)strlen(palette_name(i)) + 12;
	}
	fprintf(f, "<text class=\"note\" x=\"%u\" y=\"%u\">solid: valid bytes; pale: written, "
		"now unreferenced (a reset frees it); tint: unwritten; white: free</text>\n", mx,
		legend_y + 30);
	fprintf(f, "<text class=\"note\" x=\"%u\" y=\"%u\">thick border: open zone; dashed "
		"border: closed (active) zone; cross: offline/read-only</text>\n", mx, legend_y + 46);
	fprintf(f, "</svg>\n");
	return ferror(f) ? -EIO : 0;
}

static int svg_to_file(const char *out, const char *mnt, const struct stats *st,
		       const struct zone *z, size_t nz)
{
	size_t ol = strlen(out);
	bool png = ol > 4 && !strcasecmp(out + ol - 4, ".png");
	char tmp[PATH_MAX];
	FILE *f;
	int ret;

	if (!strcmp(out, "-"))
		return write_svg(stdout, mnt, st, z, nz);
	if (png)
		snprintf(tmp, sizeof(tmp), "%s.tmp.svg", out);
	else
		snprintf(tmp, sizeof(tmp), "%s", out);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "zonefuse-stat: cannot write %s: %s\n", tmp, strerror(errno));
		return -errno;
	}
	ret = write_svg(f, mnt, st, z, nz);
	if (fclose(f) && !ret)
		ret = -errno;
	if (ret || !png)
		return ret;
	pid_t pid = fork();
	if (pid == 0) {
		execlp("rsvg-convert", "rsvg-convert", "-o", out, tmp, (char *)NULL);
		_exit(127);
	}
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		status = -1;
	unlink(tmp);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "zonefuse-stat: PNG output needs rsvg-convert "
			"(apt-get install librsvg2-bin); write an .svg instead\n");
		return -ENOENT;
	}
	return 0;
}

/* ---- one file's layout ------------------------------------------------------------------ */

/* The mount root above path: the nearest directory with the stats xattr. */
static char *find_root(const char *path)
{
	char *p = realpath(path, NULL);
	if (!p)
		return NULL;
	for (int depth = 0; depth < 256; depth++) {
		if (getxattr(p, XSTATS, NULL, 0) >= 0)
			return p;
		char *slash = strrchr(p, '/');
		if (!slash || slash == p)
			break;
		*slash = 0;
	}
	free(p);
	return NULL;
}

static int show_file(const char *path, bool json)
{
	struct stat st;
	char b1[32], b2[32], cls[16], src[16];

	if (stat(path, &st)) {
		fprintf(stderr, "zonefuse-stat: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "zonefuse-stat: %s is neither a zonefuse mount point nor a "
			"regular file on one\n", path);
		return 1;
	}
	char *ext = xget_list(path, XEXTENTS);
	char *zl = ext ? xget_list(path, XZONES) : NULL;
	if (!ext || !zl) {
		fprintf(stderr, "zonefuse-stat: %s: no zonefuse layout (%s): not on a zonefuse "
			"mount?\n", path, strerror(errno));
		free(ext);
		return 1;
	}
	lifetime_of(path, cls, sizeof(cls), src, sizeof(src));
	/* Bytes other files (copies) share with this one; 0 from a daemon
	 * that does not say. */
	char *fv = xget(path, XFILE, NULL);
	uint64_t shared = fv ? lines_u64(fv, "shared_bytes") : 0;
	free(fv);
	/* Zone details from the root's table, when we can find the root. */
	struct zone *z = NULL;
	size_t nz = 0;
	char *root = find_root(path);
	if (root && zones_read(root, &z, &nz))
		nz = 0;

	size_t nzones = 0, next = 0;
	uint64_t dev_bytes = 0;
	for (char *l = zl; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
		nzones++;
		dev_bytes += field_u64(l, "bytes", NULL);
	}
	for (char *l = ext; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		next++;

	if (json) {
		printf("{\n  \"path\": ");
		json_str(stdout, path);
		printf(",\n  \"size\": %llu,\n  \"device_bytes\": %llu,\n  \"shared_bytes\": %llu,"
		       "\n  \"class\": ", (unsigned long long)st.st_size,
		       (unsigned long long)dev_bytes, (unsigned long long)shared);
		json_str(stdout, cls);
		printf(",\n  \"source\": ");
		json_str(stdout, src);
		printf(",\n  \"zones\": [");
		size_t i = 0;
		for (char *l = zl; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l), i++)
			printf("%s\n    {\"zone\": %llu, \"bytes\": %llu, \"extents\": %llu}",
			       i ? "," : "", (unsigned long long)field_u64(l, "zone", NULL),
			       (unsigned long long)field_u64(l, "bytes", NULL),
			       (unsigned long long)field_u64(l, "extents", NULL));
		printf("\n  ],\n  \"extents\": [");
		i = 0;
		for (char *l = ext; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l), i++) {
			unsigned long long off = 0, len = 0, zone = 0, zoff = 0;
			sscanf(l, "%llu %llu %llu %llu", &off, &len, &zone, &zoff);
			printf("%s\n    {\"offset\": %llu, \"length\": %llu, \"zone\": %llu, "
			       "\"zone_offset\": %llu}", i ? "," : "", off, len, zone, zoff);
		}
		printf("\n  ]\n}\n");
	} else {
		char b3[32];
		printf("%s: %s (%s on the device, %s shared with other extents), "
		       "lifetime class %s (%s)\n", path,
		       hb((uint64_t)st.st_size, b1, sizeof(b1)), hb(dev_bytes, b2, sizeof(b2)),
		       hb(shared, b3, sizeof(b3)), cls, src);
		printf("\n%zu zone(s)\n  %6s %11s %7s %-8s %-9s %11s %6s\n", nzones, "zone", "bytes",
		       "extents", "class", "condition", "zone valid", "files");
		for (char *l = zl; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
			uint64_t zi = field_u64(l, "zone", NULL);
			const struct zone *r = NULL;
			for (size_t k = 0; k < nz; k++)
				if (z[k].idx == zi)
					r = &z[k];
			printf("  %6llu %11s %7llu", (unsigned long long)zi,
			       hb(field_u64(l, "bytes", NULL), b1, sizeof(b1)),
			       (unsigned long long)field_u64(l, "extents", NULL));
			if (r)
				printf(" %-8s %-9s %11s %6u\n", r->cls, r->cond,
				       hb(r->valid, b2, sizeof(b2)), r->files);
			else
				printf("\n");
		}
		printf("\n%zu extent(s)\n  %14s %11s   %6s %14s\n", next, "file offset", "length",
		       "zone", "zone offset");
		for (char *l = ext; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
			unsigned long long off = 0, len = 0, zone = 0, zoff = 0;
			sscanf(l, "%llu %llu %llu %llu", &off, &len, &zone, &zoff);
			printf("  %14llu %11s   %6llu %14llu\n", off, hb(len, b1, sizeof(b1)), zone,
			       zoff);
		}
	}
	free(root);
	free(z);
	free(ext);
	free(zl);
	return 0;
}

/* ---- Prometheus text exposition ---------------------------------------------------- */

/* Metric names are part of the interface (dashboards and alerts use them):
 * add new ones, never rename.  Units follow the Prometheus conventions:
 * bytes, seconds, ratios; counters end in _total.  Every series carries the
 * mountpoint label, so several mounts can feed one textfile collector. */
struct prom_metric {
	const char *key;	/* user.zonefuse.stats key */
	const char *name;
	const char *type;	/* "gauge" | "counter" */
	const char *help;
};

static const struct prom_metric prom_metrics[] = {
	{ "read_only", "zonefuse_read_only", "gauge", "1 when mounted read-only" },
	{ "device_bytes", "zonefuse_device_size_bytes", "gauge", "Size of the device" },
	{ "zone_size", "zonefuse_zone_size_bytes", "gauge", "Bytes between zone starts" },
	{ "zone_capacity", "zonefuse_zone_capacity_bytes", "gauge", "Usable bytes of a sequential zone" },
	{ "zones", "zonefuse_device_zones", "gauge", "Zones on the device" },
	{ "meta_zones", "zonefuse_meta_zones", "gauge", "Zones reserved for the metadata log" },
	{ "data_zones", "zonefuse_data_zones", "gauge", "Zones that hold file data" },
	{ "max_open_zones", "zonefuse_max_open_zones", "gauge", "Device limit on open zones (0 = none)" },
	{ "max_active_zones", "zonefuse_max_active_zones", "gauge", "Device limit on active zones (0 = none)" },
	{ "open_zones", "zonefuse_open_zones", "gauge", "Zones open now, data and metadata" },
	{ "active_zones", "zonefuse_active_zones", "gauge", "Zones active now, data and metadata" },
	{ "free_zones", "zonefuse_free_zones", "gauge", "Data zones empty and available for new data" },
	{ "pending_reset_zones", "zonefuse_pending_reset_zones", "gauge", "Data zones without valid bytes waiting for the next commit to be reset" },
	{ "zalloc_waiters", "zonefuse_zone_waiters", "gauge", "Writers waiting for a zone now" },
	{ "capacity_bytes", "zonefuse_capacity_bytes", "gauge", "Capacity of the data zones" },
	{ "used_bytes", "zonefuse_used_bytes", "gauge", "Data capacity written or finished (comes back only through resets)" },
	{ "free_bytes", "zonefuse_free_bytes", "gauge", "Data capacity writable without a reset" },
	{ "valid_bytes", "zonefuse_valid_bytes", "gauge", "Bytes referenced by files" },
	{ "reclaimable_bytes", "zonefuse_reclaimable_bytes", "gauge", "Written bytes no file references any more" },
	{ "finished_tail_bytes", "zonefuse_finished_tail_bytes", "gauge", "Of the reclaimable bytes, the capacity zone finishes skipped" },
	{ "meta_used_bytes", "zonefuse_meta_used_bytes", "gauge", "Bytes written in the metadata zones now" },
	{ "user_bytes_written", "zonefuse_user_written_bytes_total", "counter", "Bytes applications wrote since mount" },
	{ "data_bytes_written", "zonefuse_data_written_bytes_total", "counter", "File data bytes written to data zones since mount" },
	{ "meta_bytes_written", "zonefuse_meta_written_bytes_total", "counter", "Metadata log bytes written since mount" },
	{ "gc_bytes_written", "zonefuse_gc_written_bytes_total", "counter", "Bytes copied by garbage collection since mount" },
	{ "device_bytes_written", "zonefuse_device_written_bytes_total", "counter", "Bytes the device was asked to write since mount" },
	{ "write_amplification", "zonefuse_write_amplification_ratio", "gauge", "Device bytes written per user byte written since mount" },
	{ "zdev_bytes_read", "zonefuse_device_read_bytes_total", "counter", "Bytes read from the device since it was opened" },
	{ "zdev_writes", "zonefuse_device_writes_total", "counter", "Write requests to the device" },
	{ "zdev_reads", "zonefuse_device_reads_total", "counter", "Read requests to the device" },
	{ "zdev_flushes", "zonefuse_device_flushes_total", "counter", "Cache flushes sent to the device" },
	{ "zero_copy_write_bytes", "zonefuse_zero_copy_written_bytes_total", "counter", "Bytes written that the write buffer kept as the request's own pages (no copy)" },
	{ "zero_copy_read_bytes", "zonefuse_zero_copy_read_bytes_total", "counter", "Bytes read that were spliced from the device's file (no copy through a buffer)" },
	{ "shared_bytes", "zonefuse_shared_bytes", "gauge", "Device bytes referenced by more than one extent (copies)" },
	{ "shared_saved_bytes", "zonefuse_shared_saved_bytes", "gauge", "File bytes mapped to shared extents beyond their first reference" },
	{ "copies", "zonefuse_copies_total", "counter", "copy_file_range requests that copied bytes since mount" },
	{ "copy_shared_bytes", "zonefuse_copy_shared_bytes_total", "counter", "Bytes copies gave by sharing extents (nothing written)" },
	{ "copy_written_bytes", "zonefuse_copy_written_bytes_total", "counter", "Bytes copies wrote through the write buffer" },
	{ "fuse_uring_requests", "zonefuse_uring_requests_total", "counter", "FUSE requests that came over io_uring rather than /dev/fuse" },
	{ "fuse_poll_hits", "zonefuse_poll_hits_total", "counter", "Waits for a FUSE request that ended while the reader polled (-o poll_us)" },
	{ "fuse_poll_misses", "zonefuse_poll_misses_total", "counter", "Waits for a FUSE request that slept after polling found none" },
	{ "fuse_served_inline", "zonefuse_requests_served_inline_total", "counter", "FUSE requests the zf loop's reader served itself, start to end" },
	{ "fuse_served_until_block", "zonefuse_requests_served_until_block_total", "counter", "FUSE requests whose reader gave the reading to another worker when the handler blocked" },
	{ "fuse_handed_off", "zonefuse_requests_handed_off_total", "counter", "FUSE requests whose reader gave the reading to another worker before serving them" },
	{ "gc_runs", "zonefuse_gc_runs_total", "counter", "Garbage collection runs since mount" },
	{ "gc_zones_reclaimed", "zonefuse_gc_reclaimed_zones_total", "counter", "Zones garbage collection emptied since mount" },
	{ "buffer_bytes", "zonefuse_write_buffer_bytes", "gauge", "Write-buffer memory in use" },
	{ "buffer_limit_bytes", "zonefuse_write_buffer_limit_bytes", "gauge", "Write-buffer memory bound" },
	{ "prefetch_bytes", "zonefuse_prefetch_bytes", "gauge", "Read-ahead buffer memory in use" },
	{ "prefetch_limit_bytes", "zonefuse_prefetch_limit_bytes", "gauge", "Read-ahead buffer memory bound" },
	{ "prefetch_spare_bytes", "zonefuse_prefetch_spare_bytes", "gauge", "Read-ahead buffers kept for the next windows" },
	{ "prefetch_hits", "zonefuse_prefetch_hits_total", "counter", "Reads served from read-ahead buffers" },
	{ "prefetch_fills", "zonefuse_prefetch_fills_total", "counter", "Background read-ahead fills started" },
	{ "prefetch_fill_errors", "zonefuse_prefetch_fill_errors_total", "counter", "Read-ahead fills a device read error ended" },
	{ "inodes", "zonefuse_inodes", "gauge", "Inodes in memory" },
	{ "commits", "zonefuse_commits_total", "counter", "Metadata commits since mount" },
	{ "snapshots", "zonefuse_snapshots_total", "counter", "Metadata log snapshots since mount" },
	{ "log_epoch", "zonefuse_log_epoch", "gauge", "Current metadata log epoch" },
	{ "log_records", "zonefuse_log_records_total", "counter", "Metadata records appended since mount" },
	{ "log_zones_in_chain", "zonefuse_log_zones", "gauge", "Zones the current log epoch spans" },
	{ "log_zones_borrowed", "zonefuse_log_borrowed_zones", "gauge", "Data zones the metadata log holds now" },
	{ "log_zone_borrows", "zonefuse_log_zone_borrows_total", "counter", "Data zones the metadata log borrowed since mount" },
	{ "log_reserve_zones", "zonefuse_log_reserve_zones", "gauge", "Data zones kept free for the metadata log" },
	{ "log_state_full", "zonefuse_log_state_full", "gauge", "1 when the metadata state fills the room the device gives it" },
	{ "log_errors", "zonefuse_log_errors_total", "counter", "Failed metadata commits and snapshots since mount" },
};

/* Label values: backslash, double quote and newline escaped. */
static void prom_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void prom_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{mountpoint="...",LABELS} VALUE; labels is "" or ",k=\"v\"". */
static void prom_sample(FILE *f, const char *name, const char *mnt, const char *labels,
			const char *value)
{
	fprintf(f, "%s{mountpoint=", name);
	prom_str(f, mnt);
	fprintf(f, "%s} %s\n", labels, value);
}

static void prom_sample_u(FILE *f, const char *name, const char *mnt, const char *labels,
			  uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	prom_sample(f, name, mnt, labels, buf);
}

static void prom_sample_d(FILE *f, const char *name, const char *mnt, const char *labels,
			  double v)
{
	char buf[40];
	snprintf(buf, sizeof(buf), "%.9g", v);
	prom_sample(f, name, mnt, labels, buf);
}

static void prom_info(FILE *f, const char *mnt, const struct stats *st)
{
	char labels[1024];
	const char *keys[] = { "backend", "device", "label" };
	size_t off = 0;

	for (size_t i = 0; i < ZF_ARRAY_SIZE(keys); i++) {
		const char *v = sv(st, keys[i]) ? sv(st, keys[i]) : "";
		off += (size_t)snprintf(labels + off, sizeof(labels) - off, ",%s=\"", keys[i]);
		for (; *v && off + 3 < sizeof(labels); v++) {
			if (*v == '\\' || *v == '"')
				labels[off++] = '\\';
			labels[off++] = *v == '\n' ? ' ' : *v;
		}
		off += (size_t)snprintf(labels + off, sizeof(labels) - off, "\"");
		if (off >= sizeof(labels) - 1)
			break;
	}
	prom_head(f, "zonefuse_info", "gauge", "Constant 1; labels name the device, backend and label");
	prom_sample(f, "zonefuse_info", mnt, labels, "1");
}

/* Per lifetime class, from the stats keys class_<c>_*. */
static void prom_classes_out(FILE *f, const char *mnt, const struct stats *st)
{
	static const struct { const char *suffix, *name, *type, *help; } m[] = {
		{ "bytes_written", "zonefuse_class_written_bytes_total", "counter",
		  "Data bytes written for a lifetime class since mount" },
		{ "zones", "zonefuse_class_zones", "gauge", "Data zones holding a lifetime class now" },
		{ "valid_bytes", "zonefuse_class_valid_bytes", "gauge",
		  "Valid bytes in the zones of a lifetime class" },
	};
	for (size_t i = 0; i < ZF_ARRAY_SIZE(m); i++) {
		prom_head(f, m[i].name, m[i].type, m[i].help);
		for (int c = 0; c < LIFETIME_NR; c++) {
			const char *cls = lifetime_class_name((enum lifetime_class)c);
			char key[64], labels[64];
			snprintf(key, sizeof(key), "class_%s_%s", cls, m[i].suffix);
			snprintf(labels, sizeof(labels), ",class=\"%s\"", cls);
			if (sv(st, key))
				prom_sample_u(f, m[i].name, mnt, labels, su(st, key));
		}
	}
}

/* Zones grouped by class and condition, from the zone table.  Free zones
 * have class "free". */
static void prom_zone_groups(FILE *f, const char *mnt, const struct zone *z, size_t nz)
{
	static const struct { const char *name, *help; } m[] = {
		{ "zonefuse_zones", "Zones by lifetime class and zone condition" },
		{ "zonefuse_zones_written_bytes", "Bytes below the write pointers of those zones" },
		{ "zonefuse_zones_valid_bytes", "Valid bytes in those zones" },
		{ "zonefuse_zones_capacity_bytes", "Capacity of those zones" },
	};
	struct group *g;
	size_t ng = zone_groups(z, nz, &g);

	for (size_t i = 0; i < ZF_ARRAY_SIZE(m); i++) {
		prom_head(f, m[i].name, "gauge", m[i].help);
		for (size_t j = 0; j < ng; j++) {
			char labels[96];
			uint64_t v[] = { g[j].zones, g[j].written, g[j].valid, g[j].cap };
			snprintf(labels, sizeof(labels), ",class=\"%s\",condition=\"%s\"",
				 strcmp(g[j].cls, "-") ? g[j].cls : "free", g[j].cond);
			prom_sample_u(f, m[i].name, mnt, labels, v[i]);
		}
	}
	free(g);
}

/* Zone resets and finishes, split into data and metadata zones. */
static void prom_zone_ops(FILE *f, const char *mnt, const struct stats *st)
{
	uint64_t r = su(st, "zone_resets"), dr = su(st, "data_zone_resets");
	uint64_t fin = su(st, "zone_finishes"), df = su(st, "data_zone_finishes");

	prom_head(f, "zonefuse_zone_resets_total", "counter", "Zone resets sent to the device since mount");
	prom_sample_u(f, "zonefuse_zone_resets_total", mnt, ",area=\"data\"", dr);
	prom_sample_u(f, "zonefuse_zone_resets_total", mnt, ",area=\"meta\"", r >= dr ? r - dr : 0);
	prom_head(f, "zonefuse_zone_finishes_total", "counter", "Zone finishes sent to the device since mount");
	prom_sample_u(f, "zonefuse_zone_finishes_total", mnt, ",area=\"data\"", df);
	prom_sample_u(f, "zonefuse_zone_finishes_total", mnt, ",area=\"meta\"", fin >= df ? fin - df : 0);
}

/* Request latency as a summary (quantiles 0.5 and 0.99, _sum, _count) and
 * the largest one seen, in seconds. */
static void prom_latency(FILE *f, const char *mnt, const struct stats *st)
{
	const char *sum = "zonefuse_request_duration_seconds";
	char key[64], labels[96];

	prom_head(f, sum, "summary", "Time from reading a FUSE request to replying, since mount");
	for (size_t i = 0; i < ZF_ARRAY_SIZE(lat_ops); i++) {
		const char *op = lat_ops[i];
		snprintf(key, sizeof(key), "lat_%s_count", op);
		if (!sv(st, key))
			continue;
		uint64_t n = su(st, key);
		static const char *const q[][2] = { { "0.5", "p50" }, { "0.99", "p99" } };
		for (size_t k = 0; k < ZF_ARRAY_SIZE(q); k++) {
			snprintf(key, sizeof(key), "lat_%s_%s_us", op, q[k][1]);
			snprintf(labels, sizeof(labels), ",op=\"%s\",quantile=\"%s\"", op, q[k][0]);
			prom_sample_d(f, sum, mnt, labels, sd(st, key) / 1e6);
		}
		snprintf(labels, sizeof(labels), ",op=\"%s\"", op);
		/* The exact running total keeps _sum monotonic; count x the rounded
		 * average can go down between scrapes, which Prometheus reads as a
		 * counter reset.  Daemons without the total get the product. */
		double sum_us;
		snprintf(key, sizeof(key), "lat_%s_total_us", op);
		if (sv(st, key)) {
			sum_us = (double)su(st, key);
		} else {
			snprintf(key, sizeof(key), "lat_%s_avg_us", op);
			sum_us = sd(st, key) * (double)n;
		}
		prom_sample_d(f, "zonefuse_request_duration_seconds_sum", mnt, labels, sum_us / 1e6);
		prom_sample_u(f, "zonefuse_request_duration_seconds_count", mnt, labels, n);
	}
	prom_head(f, "zonefuse_request_duration_max_seconds", "gauge",
		  "Longest FUSE request since mount");
	for (size_t i = 0; i < ZF_ARRAY_SIZE(lat_ops); i++) {
		snprintf(key, sizeof(key), "lat_%s_max_us", lat_ops[i]);
		snprintf(labels, sizeof(labels), ",op=\"%s\"", lat_ops[i]);
		if (sv(st, key))
			prom_sample_d(f, "zonefuse_request_duration_max_seconds", mnt, labels,
				      sd(st, key) / 1e6);
	}
}

static void print_prometheus(FILE *f, const char *mnt, const struct stats *st,
			     const struct zone *z, size_t nz)
{
	prom_info(f, mnt, st);
	for (size_t i = 0; i < ZF_ARRAY_SIZE(prom_metrics); i++) {
		const struct prom_metric *m = &prom_metrics[i];
		const char *v = sv(st, m->key);
		if (!v || !is_number(v))
			continue;
		prom_head(f, m->name, m->type, m->help);
		prom_sample(f, m->name, mnt, "", v);
	}
	prom_classes_out(f, mnt, st);
	prom_zone_groups(f, mnt, z, nz);
	prom_zone_ops(f, mnt, st);
	prom_latency(f, mnt, st);
}

/* ---- main -------------------------------------------------------------------------------- */

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

struct args {
	bool json, list_zones, prom;
	double watch;		/* seconds; 0 = no --watch */
	const char *svg;
	size_t top;
	const char *target;
};

/* Fills a; returns -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option lo[] = {
		{ "watch", optional_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "svg", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 'n' },
		{ "zones", no_argument, NULL, 'z' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*a = (struct args){ .top = 10 };
	while ((c = getopt_long(argc, argv, "w::jps:n:zh", lo, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'w':
			a->watch = 2;
			if (!optarg && optind < argc && is_number(argv[optind]))
				optarg = argv[optind++];
			if (optarg) {
				a->watch = strtod(optarg, &end);
				if (*end || a->watch < 0.1 || a->watch > 86400) {
					fprintf(stderr, "zonefuse-stat: --watch: SECONDS must be 0.1..86400\n");
					return EXIT_USAGE;
				}
			}
			break;
		case 'j': a->json = true; break;
		case 'p': a->prom = true; break;
		case 's': a->svg = optarg; break;
		case 'n': {
			long v = strtol(optarg, &end, 10);
			if (*end || v < 0) {
				fprintf(stderr, "zonefuse-stat: --top: expected a number >= 0\n");
				return EXIT_USAGE;
			}
			a->top = (size_t)v;
			break;
		}
		case 'z': a->list_zones = true; break;
		case 'h': fputs(usage_text, stdout); return 0;
		default:
			fprintf(stderr, "Try 'zonefuse-stat --help'.\n");
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "zonefuse-stat: expected one MOUNTPOINT or FILE (try --help)\n");
		return EXIT_USAGE;
	}
	if (a->prom && (a->watch || a->json || a->svg || a->list_zones)) {
		fprintf(stderr, "zonefuse-stat: --prometheus cannot be combined with --watch, "
			"--json, --svg or --zones\n");
		return EXIT_USAGE;
	}
	if (a->watch && (a->json || a->svg)) {
		fprintf(stderr, "zonefuse-stat: --watch cannot be combined with --json or --svg\n");
		return EXIT_USAGE;
	}
	a->target = argv[optind];
	return -1;
}

/* Redraws the summary every a->watch seconds with write rates until
 * interrupted or the mount goes away.  st, z and nz are replaced on each
 * round.  Returns 0, or -EIO when the stats could no longer be read. */
static int run_watch(const struct args *a, struct stats *st, struct zone **z, size_t *nz)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	bool tty = isatty(STDOUT_FILENO);
	struct rates rt = { 0 };
	uint64_t pu = su(st, "user_bytes_written"), pd = su(st, "device_bytes_written");
	uint64_t pt = zf_now_ns();

	for (;;) {
		if (tty)
			fputs("\033[H\033[2J", stdout);
		time_t now = time(NULL);
		char ts[64];
		strftime(ts, sizeof(ts), "%F %T", localtime(&now));
		printf("%s  (every %.1f s; Ctrl-C to stop)\n", ts, a->watch);
		print_summary(a->target, st, *z, *nz, a->top, a->list_zones, &rt);
		if (!tty)
			printf("\n");
		fflush(stdout);
		uint64_t until = zf_now_ns() + (uint64_t)(a->watch * 1e9);
		while (!stop && zf_now_ns() < until)
			usleep(50000);
		if (stop)
			return 0;
		stats_free(st);
		free(*z);
		*z = NULL;
		if (stats_read(a->target, st) || zones_read(a->target, z, nz)) {
			fprintf(stderr, "zonefuse-stat: %s: stats no longer readable (unmounted?)\n",
				a->target);
			return -EIO;
		}
		uint64_t t = zf_now_ns(), u = su(st, "user_bytes_written"),
			 d = su(st, "device_bytes_written");
		rt.interval = (double)(t - pt) / 1e9;
		rt.user = u >= pu ? (double)(u - pu) / rt.interval : 0;
		rt.device = d >= pd ? (double)(d - pd) / rt.interval : 0;
		rt.have = true;
		pu = u;
		pd = d;
		pt = t;
		if (a->top)
			files_walk(a->target);
	}
}

/* Everything about a mount whose stats were read into st.  Returns the exit
 * status. */
static int run_mount(const struct args *a, struct stats *st)
{
	struct zone *z = NULL;
	size_t nz = 0;
	int ret = zones_read(a->target, &z, &nz);

	if (ret) {
		fprintf(stderr, "zonefuse-stat: %s: cannot read the zone table: %s\n", a->target,
			strerror(-ret));
		return 1;
	}
	if (a->prom) {
		print_prometheus(stdout, a->target, st, z, nz);
		free(z);
		return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
	}
	if (a->svg) {
		ret = svg_to_file(a->svg, a->target, st, z, nz);
		if (!ret && strcmp(a->svg, "-") && !a->json)
			fprintf(stderr, "zonefuse-stat: zone map of %zu zones written to %s\n", nz,
				a->svg);
		if (ret || !a->json || !strcmp(a->svg, "-")) {
			free(z);
			return ret ? 1 : 0;
		}
	}
	if (a->top)
		files_walk(a->target);
	if (a->json)
		print_json(a->target, st, z, nz, a->top);
	else if (!a->watch)
		print_summary(a->target, st, z, nz, a->top, a->list_zones, NULL);
	else
		ret = run_watch(a, st, &z, &nz);
	files_free();
	free(z);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct args a;
	struct stats st;
	int ret = parse_args(argc, argv, &a);

	if (ret >= 0)
		return ret;
	ret = stats_read(a.target, &st);
	if (ret) {
		struct stat sb;
		if (stat(a.target, &sb) == 0 && S_ISREG(sb.st_mode)) {
			if (a.watch || a.svg || a.list_zones || a.prom) {
				fprintf(stderr, "zonefuse-stat: --watch, --svg, --zones and "
					"--prometheus need a MOUNTPOINT\n");
				return EXIT_USAGE;
			}
			return show_file(a.target, a.json);
		}
		fprintf(stderr, "zonefuse-stat: %s: not the root of a zonefuse mount (%s)\n",
			a.target, strerror(-ret));
		return 1;
	}
	ret = run_mount(&a, &st);
	stats_free(&st);
	return ret;
}
