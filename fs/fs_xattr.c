/* fs_xattr — extended attributes: stored user.* attributes and the virtual,
 * read-only user.zonefuse.* ones (computed from memory, no device I/O).
 *
 * Virtual attributes:
 *   user.zonefuse.lifetime  on every inode: "<class> <source>" (writable:
 *                           setting it is the strongest lifetime hint)
 *   user.zonefuse.extents   on files: one line per extent
 *                           "<file_off> <len> <zone> <zone_off>" (bytes)
 * Locking: the public functions take fs->lock.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/limits.h>
#include <sys/xattr.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

#define VPREFIX "user.zonefuse."

struct fs_xattr *fs_xattr_find(struct fs_inode *in, const char *name)
{
	for (struct fs_xattr *x = in->xattrs; x; x = x->next)
		if (strcmp(x->name, name) == 0)
			return x;
	return NULL;
}

int fs_xattr_set_raw(struct fs_inode *in, const char *name, const void *v, size_t size)
{
	struct fs_xattr *x = fs_xattr_find(in, name);
	void *copy = malloc(size ? size : 1);

	if (!copy)
		return -ENOMEM;
	memcpy(copy, v, size);
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x || !(x->name = strdup(name))) {
			free(x);
			free(copy);
			return -ENOMEM;
		}
		x->next = in->xattrs;
		in->xattrs = x;
	} else {
		free(x->value);
	}
	x->value = copy;
	x->size = size;
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

/* A growable text buffer for virtual attributes. */
struct tbuf { char *s; size_t n, cap; bool oom; };

static void tprintf(struct tbuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tprintf(struct tbuf *t, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = t->cap - t->n;
		va_start(ap, fmt);
		int w = vsnprintf(t->s ? t->s + t->n : NULL, room, fmt, ap);
		va_end(ap);
		if (w < 0) { t->oom = true; return; }
		if ((size_t)w < room) { t->n += (size_t)w; return; }
		size_t cap = (t->cap ? t->cap * 2 : 256) + (size_t)w;
		char *s = realloc(t->s, cap);
		if (!s) { t->oom = true; return; }
		t->s = s;
		t->cap = cap;
	}
}

static int virtual_get(struct fs *fs, struct fs_inode *in, const char *name, struct tbuf *t)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	if (strcmp(name, FS_XATTR_LIFETIME) == 0) {
		tprintf(t, "%s %s\n", lifetime_class_name(in->cls),
			lifetime_source_name(in->cls_src));
		return 0;
	}
	if (strcmp(name, VPREFIX "extents") == 0 && S_ISREG(in->mode)) {
		for (size_t i = 0; i < in->map.n; i++) {
			const struct extmap_ext *e = &in->map.v[i];
			tprintf(t, "%llu %llu %llu %llu\n", (unsigned long long)e->off,
				(unsigned long long)e->len,
				(unsigned long long)(e->dev / g->zone_size),
				(unsigned long long)(e->dev % g->zone_size));
		}
		return 0;
	}
	return -ENODATA;
}

static const char *const virtual_names[] = { FS_XATTR_LIFETIME, VPREFIX "extents" };

int fs_getxattr(struct fs *fs, uint64_t ino, const char *name, void *value, size_t size)
{
	struct tbuf t = { 0 };
	int ret;

	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in) {
		ret = -ENOENT;
	} else if (strncmp(name, VPREFIX, strlen(VPREFIX)) == 0) {
		ret = virtual_get(fs, in, name, &t);
		if (!ret && t.oom)
			ret = -ENOMEM;
		if (!ret) {
			ret = (int)t.n;
			if (size && t.n > size)
				ret = -ERANGE;
			else if (size)
				memcpy(value, t.s, t.n);
		}
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
	free(t.s);
	return ret;
}

int fs_listxattr(struct fs *fs, uint64_t ino, char *list, size_t size)
{
	struct tbuf t = { 0 };
	int ret;

	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		return -ENOENT;
	}
	for (struct fs_xattr *x = in->xattrs; x; x = x->next) {
		if (strcmp(x->name, FS_XATTR_LIFETIME) == 0)
			continue;	/* listed once, below */
		tprintf(&t, "%s", x->name);
		tprintf(&t, "%c", 0);
	}
	for (size_t i = 0; i < ZF_ARRAY_SIZE(virtual_names); i++) {
		if (i > 0 && !S_ISREG(in->mode))
			break;
		tprintf(&t, "%s", virtual_names[i]);
		tprintf(&t, "%c", 0);
	}
	pthread_mutex_unlock(&fs->lock);
	if (t.oom)
		ret = -ENOMEM;
	else if (size && t.n > size)
		ret = -ERANGE;
	else {
		if (size)
			memcpy(list, t.s, t.n);
		ret = (int)t.n;
	}
	free(t.s);
	return ret;
}

int fs_setxattr(struct fs *fs, uint64_t ino, const char *name,
		const void *value, size_t size, int flags)
{
	int ret;
	enum lifetime_class cls = LIFETIME_MEDIUM;

	if (strncmp(name, "user.", 5) != 0)
		return -EOPNOTSUPP;
	if (strlen(name) > XATTR_NAME_MAX)
		return -ERANGE;
	if (size > 16384)
		return -E2BIG;
	if (strncmp(name, VPREFIX, strlen(VPREFIX)) == 0) {
		char buf[32];
		if (strcmp(name, FS_XATTR_LIFETIME) != 0)
			return -EPERM;
		if (size == 0 || size >= sizeof(buf))
			return -EINVAL;
		memcpy(buf, value, size);
		buf[size] = 0;
		buf[strcspn(buf, " \n")] = 0;
		if (lifetime_class_parse(buf, &cls))
			return -EINVAL;
	}
	if (fs->read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in) {
		ret = -ENOENT;
		goto out;
	}
	struct fs_xattr *x = fs_xattr_find(in, name);
	if ((flags & XATTR_CREATE) && x) {
		ret = -EEXIST;
		goto out;
	}
	if ((flags & XATTR_REPLACE) && !x) {
		ret = -ENODATA;
		goto out;
	}
	ret = fs_log_xattr_set(fs, ino, name, value, size);
	if (!ret)
		ret = fs_xattr_set_raw(in, name, value, size);
	if (!ret && strcmp(name, FS_XATTR_LIFETIME) == 0) {
		in->cls = (uint8_t)cls;
		in->cls_src = LIFETIME_SRC_XATTR;
		ret = fs_log_attr(fs, in);
	}
	if (!ret) {
		in->ctime = fs_now();
		in->attr_dirty = true;
	}
out:
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

int fs_removexattr(struct fs *fs, uint64_t ino, const char *name)
{
	int ret;

	if (strncmp(name, VPREFIX, strlen(VPREFIX)) == 0 &&
	    strcmp(name, FS_XATTR_LIFETIME) != 0)
		return -EPERM;
	if (strncmp(name, "user.", 5) != 0)
		return -EOPNOTSUPP;
	if (fs->read_only)
		return -EROFS;
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in)
		ret = -ENOENT;
	else if (!fs_xattr_find(in, name))
		ret = -ENODATA;
	else {
		ret = fs_log_xattr_del(fs, ino, name);
		if (!ret)
			ret = fs_xattr_del_raw(in, name);
		if (!ret)
			in->ctime = fs_now();
	}
	pthread_mutex_unlock(&fs->lock);
	return ret;
}
