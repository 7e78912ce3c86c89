/* fs_xattr — extended attributes: the stored ones (user.*, trusted.*,
 * security.*, and the POSIX ACLs system.posix_acl_access / _default) and
 * the virtual, read-only user.zonefuse.* ones (computed from memory, no
 * device I/O).
 *
 * Stored attributes: names up to XATTR_NAME_MAX bytes, values up to
 * FS_XATTR_MAX_VALUE bytes (XATTR_SIZE_MAX, as XFS and btrfs), at most
 * FS_XATTR_MAX_TOTAL bytes of names and values per inode (-ENOSPC past it,
 * as a full ext4 attribute block), and names that list in XATTR_LIST_MAX
 * bytes (else listxattr could not return them); logged as XATTR_SET / XATTR_DEL records (crash
 * guarantees of fs.h).  Other system.* names and unknown namespaces are
 * -EOPNOTSUPP.  Who may read or write which namespace is the kernel's
 * check (xattr_permission, the capability LSM, the POSIX ACL handlers):
 * docs/guarantees.md.  ACLs are validated (fs_acl.h); setting an access
 * ACL sets the mode's permission bits from it, an access ACL that says no
 * more than the mode is not stored (as ext4), and a chmod rewrites the
 * ACL (fs_acl_chmod_locked).  An ACL change and the mode change it implies
 * are two records, ordered so that a crash between them grants nothing that
 * neither the old nor the new state grants: a new extended ACL is logged
 * before the mode (meanwhile each class of user gets its old or its new
 * rights: the kernel takes owner and, without an ACL check, everyone from
 * the mode, and consults the ACL only when the group bits are not zero);
 * when an extended ACL gives way to the mode alone, the mode is logged
 * first (the old ACL, consulted meanwhile, is limited by its own mask).
 *
 * Virtual attributes (formats: docs/stats.md; read by name, not listed:
 * fs_listxattr):
 *   user.zonefuse.lifetime  on every inode: "<class> <source>" (writable:
 *                           setting it is the strongest lifetime hint)
 *   user.zonefuse.extents   on files: one line per extent
 *                           "<file_off> <len> <zone> <zone_off>" (bytes)
 *   user.zonefuse.zones     on files: "zone=Z bytes=B extents=N" per zone
 *                           the file has data in; on the root: the zone
 *                           table (fs_stats.c)
 *   user.zonefuse.stats     on the root: key=value counters (fs_stats.c)
 * Lists longer than FS_STATS_MAX_TEXT end with "# next=N"; "<name>.N"
 * (not listed) continues from extent index / zone N.
 * Everything else user.zonefuse.* is -EPERM to set or remove.
 *
 * Locking: the public functions take fs->lock; virtual values copy what
 * they need under it and format after dropping it (root renderers: see
 * fs_stats.h).  No device I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/limits.h>
#include <sys/xattr.h>

#include "common/zf_common.h"
#include "fs/fs_acl.h"
#include "fs/fs_internal.h"
#include "fs/fs_stats.h"

#define VPREFIX "user.zonefuse."

static bool has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

bool fs_xattr_name_supported(const char *name)
{
	return has_prefix(name, "user.") || has_prefix(name, "trusted.") ||
	       has_prefix(name, "security.") || strcmp(name, FS_ACL_ACCESS) == 0 ||
	       strcmp(name, FS_ACL_DEFAULT) == 0;
}

struct fs_xattr *fs_xattr_find(struct fs_inode *in, const char *name)
{
	for (struct fs_xattr *x = in->xattrs; x; x = x->next)
		if (strcmp(x->name, name) == 0)
			return x;
	return NULL;
}

struct fs_xattr *fs_xattr_new(const char *name, const void *v, size_t size)
{
	struct fs_xattr *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->name = strdup(name);
	x->value = malloc(size ? size : 1);
	if (!x->name || !x->value) {
		fs_xattr_free(x);
		return NULL;
	}
	if (size)
		memcpy(x->value, v, size);
	x->size = size;
	return x;
}

void fs_xattr_free(struct fs_xattr *x)
{
	if (!x)
		return;
	free(x->name);
	free(x->value);
	free(x);
}

void fs_xattr_attach(struct fs_inode *in, struct fs_xattr *x)
{
	struct fs_xattr *old = fs_xattr_find(in, x->name);

	if (old) {	/* keep the list position; take the new value */
		free(old->value);
		old->value = x->value;
		old->size = x->size;
		x->value = NULL;
		fs_xattr_free(x);
		return;
	}
	x->next = in->xattrs;
	in->xattrs = x;
}

int fs_xattr_set_raw(struct fs_inode *in, const char *name, const void *v, size_t size)
{
	struct fs_xattr *x = fs_xattr_new(name, v, size);

	if (!x)
		return -ENOMEM;
	fs_xattr_attach(in, x);
	return 0;
}

int fs_xattr_del_raw(struct fs_inode *in, const char *name)
{
	for (struct fs_xattr **pp = &in->xattrs; *pp; pp = &(*pp)->next) {
		if (strcmp((*pp)->name, name) == 0) {
			struct fs_xattr *x = *pp;
			*pp = x->next;
			free(x->name);
			free(x->value);
			free(x);
			return 0;
		}
	}
	return -ENODATA;
}

void fs_xattr_free_all(struct fs_inode *in)
{
	while (in->xattrs)
		fs_xattr_del_raw(in, in->xattrs->name);
}

int fs_xattr_lifetime_parse(const void *v, size_t size, enum lifetime_class *cls)
{
	char buf[32];

	if (size == 0 || size >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, v, size);
	buf[size] = 0;
	buf[strcspn(buf, " \n")] = 0;
	return lifetime_class_parse(buf, cls) ? -EINVAL : 0;
}

/* ---- virtual attributes ---- */

enum vkind { V_LIFETIME, V_EXTENTS, V_ZONES, V_STATS, V_FILE };

/* Parse a user.zonefuse.* name: base name, optional ".N" page suffix
 * (extents and zones only).  -ENODATA for names we do not know. */
static int vparse(const char *name, enum vkind *kind, uint64_t *start)
{
	static const struct { const char *base; enum vkind kind; bool paged; } v[] = {
		{ "lifetime", V_LIFETIME, false }, { "extents", V_EXTENTS, true },
		{ "zones", V_ZONES, true }, { "stats", V_STATS, false },
		{ "file", V_FILE, false },
	};
	const char *s = name + strlen(VPREFIX);

	*start = 0;
	for (size_t i = 0; i < ZF_ARRAY_SIZE(v); i++) {
		size_t l = strlen(v[i].base);
		if (strncmp(s, v[i].base, l) != 0)
			continue;
		*kind = v[i].kind;
		if (s[l] == 0)
			return 0;
		if (!v[i].paged || s[l] != '.' || s[l + 1] < '0' || s[l + 1] > '9')
			return -ENODATA;
		char *end;
		errno = 0;
		unsigned long long n = strtoull(s + l + 1, &end, 10);
		if (*end || errno)
			return -ENODATA;
		*start = n;
		return 0;
	}
	return -ENODATA;
}

static int cmp_ext_dev(const void *a, const void *b)
{
	const struct extmap_ext *x = a, *y = b;
	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

/* user.zonefuse.extents from extent index `start` (v: a copy of the map). */
static void render_extents(struct fs_text *t, const struct extmap_ext *v, size_t n,
			   uint64_t start, uint64_t zsz)
{
	for (size_t i = 0; i < n; i++) {
		const struct extmap_ext *e = &v[i];
		if (t->n > FS_STATS_MAX_TEXT) {
			fs_text_printf(t, "# next=%llu\n", (unsigned long long)(start + i));
			return;
		}
		fs_text_printf(t, "%llu %llu %llu %llu\n", (unsigned long long)e->off,
			       (unsigned long long)e->len, (unsigned long long)(e->dev / zsz),
			       (unsigned long long)(e->dev % zsz));
	}
}

/* One line of the per-file zones list; false when the text is full (a
 * "# next=" line was written instead). */
static bool file_zone_line(struct fs_text *t, uint64_t zone, uint64_t bytes,
			   uint64_t count, uint64_t first)
{
	if (zone == UINT64_MAX || zone < first)
		return true;
	if (t->n > FS_STATS_MAX_TEXT) {
		fs_text_printf(t, "# next=%llu\n", (unsigned long long)zone);
		return false;
	}
	fs_text_printf(t, "zone=%llu bytes=%llu extents=%llu\n", (unsigned long long)zone,
		       (unsigned long long)bytes, (unsigned long long)count);
	return true;
}

/* Per-file user.zonefuse.zones: zones >= first, in zone order (v is sorted
 * here; an extent crossing a zone boundary counts in both zones). */
static void render_file_zones(struct fs_text *t, struct extmap_ext *v, size_t n,
			      uint64_t first, uint64_t zsz)
{
	uint64_t cur = UINT64_MAX, bytes = 0, count = 0;

	if (n)
		qsort(v, n, sizeof(*v), cmp_ext_dev);
	for (size_t i = 0; i < n; i++) {
		uint64_t dev = v[i].dev, len = v[i].len;
		while (len) {
			uint64_t z = dev / zsz;
			uint64_t piece = ZF_MIN(len, (z + 1) * zsz - dev);
			if (z != cur) {
				if (!file_zone_line(t, cur, bytes, count, first))
					return;
				cur = z;
				bytes = count = 0;
			}
			bytes += piece;
			count++;
			dev += piece;
			len -= piece;
		}
	}
	file_zone_line(t, cur, bytes, count, first);
}

static int virtual_get(struct fs *fs, uint64_t ino, const char *name, struct fs_text *t)
{
	const uint64_t zsz = zdev_geometry(fs->dev)->zone_size;
	enum vkind kind;
	uint64_t start;
	int ret = vparse(name, &kind, &start);

	if (ret)
		return ret;
	if (ino == FS_ROOT_INO && (kind == V_STATS || kind == V_ZONES)) {
		/* Renderers take fs->lock themselves, briefly. */
		if (kind == V_STATS)
			return fs_stats_render(fs, t);
		if (start > UINT32_MAX)
			return -ENODATA;
		return fs_stats_render_zones(fs, (uint32_t)start, t);
	}
	if (kind == V_STATS)
		return -ENODATA;
	if (kind == V_FILE)
		return fs_stats_render_file(fs, ino, t);

	struct extmap_ext *copy = NULL;
	size_t n = 0;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in) {
		ret = -ENOENT;
	} else if (kind == V_LIFETIME) {
		fs_text_printf(t, "%s %s\n", lifetime_class_name(in->cls),
			       lifetime_source_name(in->cls_src));
	} else if (!S_ISREG(in->mode)) {
		ret = -ENODATA;
	} else {
		/* Copy what we need; format outside fs->lock. */
		size_t count = extmap_count(&in->map);
		size_t from = kind == V_EXTENTS ? (size_t)ZF_MIN(start, (uint64_t)count) : 0;
		n = count - from;
		if (kind == V_EXTENTS)
			n = ZF_MIN(n, (size_t)FS_STATS_MAX_TEXT / 8);
		if (n && !(copy = malloc(n * sizeof(*copy)))) {
			ret = -ENOMEM;
		} else if (n) {
			struct extmap_cur c;
			const struct extmap_ext *e = extmap_nth(&in->map, from, &c);
			for (size_t k = 0; k < n; k++, e = extmap_next(&in->map, &c))
				copy[k] = *e;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	if (!ret && kind == V_EXTENTS)
		render_extents(t, copy, n, start, zsz);
	else if (!ret && kind == V_ZONES)
		render_file_zones(t, copy, n, start, zsz);
	free(copy);
	if (!ret && t->oom)
		ret = -ENOMEM;
	return ret;
}

int fs_getxattr(struct fs *fs, uint64_t ino, const char *name, void *value, size_t size)
{
	struct fs_text t = { 0 };
	int ret;

	if (strncmp(name, VPREFIX, strlen(VPREFIX)) == 0) {
		ret = virtual_get(fs, ino, name, &t);
		if (ret == 0) {
			ret = (int)t.n;
			if (size && t.n > size) {
				ret = -ERANGE;
			} else if (size) {
				if (t.n)
					memcpy(value, t.s, t.n);
			} else if (strcmp(name, FS_XATTR_LIFETIME) != 0) {
				/* Size probe: the value changes all the time; leave
				 * room for the next read to be a little longer. */
				ret = (int)ZF_MIN(t.n + t.n / 8 + 512, (size_t)XATTR_SIZE_MAX);
			}
		}
		fs_text_free(&t);
		return ret;
	}
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in) {
		ret = -ENOENT;
	} else {
		struct fs_xattr *x = fs_xattr_find(in, name);
		if (!x)
			ret = -ENODATA;
		else if (size && x->size > size)
			ret = -ERANGE;
		else {
			if (size)
				memcpy(value, x->value, x->size);
			ret = (int)x->size;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

/* Only stored attributes are listed: copying tools (rsync -X, cp -a,
 * tar --xattrs) copy what is listed and remove from a destination what the
 * source lacks, so listed virtual values would land as junk on other file
 * systems and make every copy onto zonefuse fail with EPERM. */
int fs_listxattr(struct fs *fs, uint64_t ino, char *list, size_t size)
{
	struct fs_text t = { 0 };
	int ret;

	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		return -ENOENT;
	}
	for (struct fs_xattr *x = in->xattrs; x; x = x->next)
		fs_text_printf(&t, "%s%c", x->name, 0);
	pthread_mutex_unlock(&fs->lock);
	if (t.oom)
		ret = -ENOMEM;
	else if (size && t.n > size)
		ret = -ERANGE;
	else {
		if (size && t.n)
			memcpy(list, t.s, t.n);
		ret = (int)t.n;
	}
	fs_text_free(&t);
	return ret;
}

/* One XATTR_SET record holds the largest value with the longest name
 * (fs_log_xattr_set: inode, name and its length, value and its length). */
_Static_assert(8 + 2 + XATTR_NAME_MAX + 4 + FS_XATTR_MAX_VALUE <= MLOG_MAX_PAYLOAD,
	       "an xattr record must fit a log record");

/* Would setting name to a value of size bytes keep in within the per-inode
 * bounds (top comment)?  0 or -ENOSPC.  O(attributes). [L] */
static int room_for(const struct fs_inode *in, const char *name, size_t size)
{
	size_t names = strlen(name) + 1, total = names + size;
	for (const struct fs_xattr *x = in->xattrs; x; x = x->next) {
		if (strcmp(x->name, name) == 0)
			continue;	/* replaced */
		names += strlen(x->name) + 1;
		total += strlen(x->name) + 1 + x->size;
	}
	return total > FS_XATTR_MAX_TOTAL || names > XATTR_LIST_MAX ? -ENOSPC : 0;
}

/* Log XATTR_SET of (name, value), then apply it to in. [L] */
static int log_set(struct fs *fs, struct fs_inode *in, const char *name,
		   const void *value, size_t size)
{
	int ret = room_for(in, name, size);
	if (ret)
		return ret;
	struct fs_xattr *x = fs_xattr_new(name, value, size);
	if (!x)
		return -ENOMEM;
	ret = fs_log_xattr_set(fs, in->ino, name, value, size);
	if (ret) {
		fs_xattr_free(x);
		return ret;
	}
	fs_apply_xattr_set(fs, in, x);
	return 0;
}

/* Log in's attributes with the permission bits perm (0777), without S_ISGID
 * when kill_sgid, and ctime now, then apply them. [L] */
static int log_perm(struct fs *fs, struct fs_inode *in, uint32_t perm, bool kill_sgid)
{
	struct fs_attr a;
	int ret;

	fs_attr_get(in, &a);
	a.mode = (a.mode & ~0777u) | perm;
	if (kill_sgid)
		a.mode &= ~(uint32_t)S_ISGID;
	a.ctime = fs_now();
	ret = fs_log_inode(fs, &a);
	if (!ret) {
		fs_apply_attr(fs, in, &a);
		in->attr_dirty = false;
	}
	return ret;
}

/* Setting system.posix_acl_access: an extended ACL first, then the mode
 * bits it implies; a minimal ACL is only the mode: the mode first, then the
 * stored ACL goes (the orders of the file's top comment). [L] */
static int set_access_acl(struct fs *fs, struct fs_inode *in, const void *value, size_t size,
			  bool kill_sgid)
{
	uint32_t perm = fs_acl_perm_bits(value, size);
	bool minimal = fs_acl_is_minimal(value, size);
	int ret = 0;

	kill_sgid = kill_sgid && (in->mode & S_ISGID);
	if (!minimal)
		ret = log_set(fs, in, FS_ACL_ACCESS, value, size);
	if (!ret && ((in->mode & 0777) != perm || kill_sgid))
		ret = log_perm(fs, in, perm, kill_sgid);
	if (!ret && minimal && fs_xattr_find(in, FS_ACL_ACCESS) &&
	    !(ret = fs_log_xattr_del(fs, in->ino, FS_ACL_ACCESS)))
		fs_apply_xattr_del(fs, in, FS_ACL_ACCESS);
	return ret;
}

/* Validate, log XATTR_SET, then apply it (the class change that setting
 * user.zonefuse.lifetime implies is part of applying the same record). */
int fs_setxattr(struct fs *fs, uint64_t ino, const char *name,
		const void *value, size_t size, int flags)
{
	bool acl = strcmp(name, FS_ACL_ACCESS) == 0 || strcmp(name, FS_ACL_DEFAULT) == 0;
	int ret;

	if (!fs_xattr_name_supported(name))
		return -EOPNOTSUPP;
	if (strlen(name) > XATTR_NAME_MAX)
		return -ERANGE;
	if (size > FS_XATTR_MAX_VALUE)
		return -E2BIG;
	if (has_prefix(name, VPREFIX)) {
		enum lifetime_class cls;
		if (strcmp(name, FS_XATTR_LIFETIME) != 0)
			return -EPERM;
		if (fs_xattr_lifetime_parse(value, size, &cls))
			return -EINVAL;
	}
	if (acl && fs_acl_check(value, size))
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in) {
		ret = -ENOENT;
		goto out;
	}
	struct fs_xattr *cur = fs_xattr_find(in, name);
	if ((flags & XATTR_CREATE) && cur) {
		ret = -EEXIST;
		goto out;
	}
	if ((flags & XATTR_REPLACE) && !cur) {
		ret = -ENODATA;
		goto out;
	}
	if (acl && S_ISLNK(in->mode)) {
		ret = -EOPNOTSUPP;
		goto out;
	}
	if (strcmp(name, FS_ACL_DEFAULT) == 0 && !S_ISDIR(in->mode)) {
		ret = -EACCES;	/* only directories have default ACLs */
		goto out;
	}
	if (strcmp(name, FS_ACL_ACCESS) == 0) {
		ret = set_access_acl(fs, in, value, size, flags & FS_XATTR_KILL_SGID);
		goto out;
	}
	ret = log_set(fs, in, name, value, size);
	if (ret)
		goto out;
	/* ctime is logged lazily, with the other attributes */
	in->ctime = fs_now();
	in->attr_dirty = true;
out:
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_acl_chmod_locked(struct fs *fs, struct fs_inode *in, uint32_t mode)
{
	struct fs_xattr *x = fs_xattr_find(in, FS_ACL_ACCESS);
	uint8_t acl[FS_ACL_MAX_SIZE];

	if (!x || x->size > sizeof(acl) || fs_acl_check(x->value, x->size))
		return 0;
	memcpy(acl, x->value, x->size);
	fs_acl_chmod(acl, x->size, mode);
	if (memcmp(acl, x->value, x->size) == 0)
		return 0;
	return log_set(fs, in, FS_ACL_ACCESS, acl, x->size);
}

void fs_acl_new_free(struct fs_acl_new *n)
{
	fs_xattr_free(n->access);
	fs_xattr_free(n->def);
	n->access = n->def = NULL;
}

int fs_acl_new_prepare(struct fs_inode *dir, uint32_t *mode, struct fs_acl_new *n)
{
	struct fs_xattr *d = fs_xattr_find(dir, FS_ACL_DEFAULT);

	n->access = n->def = NULL;
	if (S_ISLNK(*mode) || !d || fs_acl_check(d->value, d->size))
		return 0;	/* symlinks are 0777 and have no ACLs */
	if (S_ISDIR(*mode) && !(n->def = fs_xattr_new(FS_ACL_DEFAULT, d->value, d->size)))
		return -ENOMEM;
	n->access = fs_xattr_new(FS_ACL_ACCESS, d->value, d->size);
	if (!n->access) {
		fs_acl_new_free(n);
		return -ENOMEM;
	}
	fs_acl_inherit(n->access->value, n->access->size, mode);
	if (fs_acl_is_minimal(n->access->value, n->access->size)) {
		fs_xattr_free(n->access);
		n->access = NULL;
	}
	return 0;
}

void fs_acl_new_attach(struct fs_inode *in, struct fs_acl_new *n)
{
	if (n->access)
		fs_xattr_attach(in, n->access);
	if (n->def)
		fs_xattr_attach(in, n->def);
	n->access = n->def = NULL;
}

int fs_removexattr(struct fs *fs, uint64_t ino, const char *name)
{
	int ret;

	if (has_prefix(name, VPREFIX) && strcmp(name, FS_XATTR_LIFETIME) != 0)
		return -EPERM;
	if (!fs_xattr_name_supported(name))
		return -EOPNOTSUPP;
	if (fs->read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in)
		ret = -ENOENT;
	else if (!fs_xattr_find(in, name))
		ret = -ENODATA;
	else
		ret = fs_log_xattr_del(fs, ino, name);
	if (!ret) {
		fs_apply_xattr_del(fs, in, name);
		in->ctime = fs_now();
	}
	pthread_mutex_unlock(&fs->lock);
	return ret;
}
