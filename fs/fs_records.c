/* fs_records — the file system's log records: encoding (live), decoding
 * and validating (replay), and the snapshot that describes the whole state.
 * Applying a record is fs_apply.c's.
 *
 * Each record is one atomic logical step, and each operation writes one
 * record: a crash or a group commit never splits an operation.  Payloads
 * are packed little-endian fields (see the put/get helpers); names carry a
 * u16 length.
 *   STATE     u64 next_ino
 *   INODE     attr                      (attr = ino u64, mode u32, uid u32,
 *   CREATE    attr, parent u64, name     gid u32, nlink u32, rdev u64, size u64,
 *             [tail]                     atime/mtime/ctime i64, cls u8, src u8)
 *             tail = target (u16 length), nx u16, nx * (name, vlen u32, value):
 *             written when the new inode is a symlink (its target) or starts
 *             with xattrs; absent otherwise.  A CREATE of a symlink without
 *             the tail (older logs) is followed by its SYMLINK record.
 *   DIRENT    parent u64, ino u64, name
 *   LINK      parent u64, ino u64, name
 *   UNLINK    parent u64, name
 *   RENAME    parent u64, newparent u64, flags u32, name, newname
 *   EXTENT    ino, off, len, dev, size_min (u64 each)
 *   EXTENTS   ino u64, n u32, n * (off, len, dev)
 *   TRUNCATE  ino u64, size u64
 *   PUNCH     ino u64, off u64, len u64
 *   COPY      src u64, dst u64, off u64, len u64, size u64, cls u8, src u8,
 *             n u32, n * (off, len, dev): dst's [off, off+len) is dropped,
 *             then maps the n runs (sorted, inside the range, device
 *             bytes src referenced: shared), size >= size, class cls/src.
 *             src is for the reader only: replay needs just the runs, so
 *             a copy from a file unlinked later replays the same.
 *   REMAP     n u32, n * (ino, off, len, dev): each run's inode maps
 *             [off, off+len) to dev (the collector moved bytes several
 *             extents share: all of them re-pointed in one step)
 *   XATTR_SET ino u64, name, vlen u32, value  (user.zonefuse.lifetime also
 *                                              sets the inode's class)
 *   XATTR_DEL ino u64, name
 *   SYMLINK   ino u64, target (u16 length)  (snapshots and older logs)
 *
 * Every record type has one fs_apply_* function (fs_apply.c): the live operation calls
 * it after its append succeeded, replay after decoding and validating the
 * record.  Apply functions do not fail: what they need is allocated before
 * (fs_inode_prepare, fs_dirent_alloc, fs_xattr_new), so memory changes only
 * once the record is in the log, and an in-line snapshot taken by the
 * append (log full) describes the state without the record.
 * Decoding is bounds-checked everywhere: a malformed record aborts replay
 * with -EUCLEAN instead of reading out of bounds.
 * Locking: every function here runs with fs->lock held (or single-threaded
 * at mount).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

/* ---- encoding ---- */

struct rbuf {
	uint8_t b[MLOG_MAX_PAYLOAD];
	size_t n;
	bool overflow;
};

/* Only n and overflow need a value: b is written before it is read, and
 * zeroing it (an initializer would) touches 60 KiB of stack per record. */
static void rbuf_init(struct rbuf *r)
{
	r->n = 0;
	r->overflow = false;
}

static void put(struct rbuf *r, const void *p, size_t len)
{
	if (r->n + len > sizeof(r->b)) {
		r->overflow = true;
		return;
	}
	memcpy(r->b + r->n, p, len);
	r->n += len;
}
static void put_u8(struct rbuf *r, uint8_t v) { put(r, &v, 1); }
static void put_u16(struct rbuf *r, uint16_t v) { put(r, &v, 2); }
static void put_u32(struct rbuf *r, uint32_t v) { put(r, &v, 4); }
static void put_u64(struct rbuf *r, uint64_t v) { put(r, &v, 8); }
static void put_name(struct rbuf *r, const char *s)
{
	size_t len = strlen(s);
	put_u16(r, (uint16_t)len);
	put(r, s, len);
}

void fs_attr_get(const struct fs_inode *in, struct fs_attr *a)
{
	a->ino = in->ino;
	a->mode = in->mode;
	a->uid = in->uid;
	a->gid = in->gid;
	a->nlink = in->nlink;
	a->rdev = in->rdev;
	a->size = in->size;
	a->atime = in->atime;
	a->mtime = in->mtime;
	a->ctime = in->ctime;
	a->cls = in->cls;
	a->src = in->cls_src;
}

static void put_attr(struct rbuf *r, const struct fs_attr *a)
{
	put_u64(r, a->ino);
	put_u32(r, a->mode);
	put_u32(r, a->uid);
	put_u32(r, a->gid);
	put_u32(r, a->nlink);
	put_u64(r, a->rdev);
	put_u64(r, a->size);
	put_u64(r, (uint64_t)a->atime);
	put_u64(r, (uint64_t)a->mtime);
	put_u64(r, (uint64_t)a->ctime);
	put_u8(r, a->cls);
	put_u8(r, a->src);
}

static void put_inode_attr(struct rbuf *r, const struct fs_inode *in)
{
	struct fs_attr a;
	fs_attr_get(in, &a);
	put_attr(r, &a);
}

/* Append one record.  When the log has no room, a snapshot compacts it
 * (we hold fs->lock, as mlog_snapshot requires) and the append is retried
 * once, unless the state itself fills the device (a snapshot would not
 * help: -ENOSPC at once, never a snapshot per record).
 * fl: MLOG_APPEND_FREES for a record that does not grow the next snapshot
 * (an unlink, an xattr removal, a truncate or punch that drops two extents
 * or more, an inode's new attributes): on a full device such records may
 * use the room kept for appending, so that space can always be freed and
 * what exists can be kept, never the room of the snapshot itself.  A record that
 * frees nothing in the log (a rename, a truncate that splits or grows)
 * must never take it, or a storm of them leaves no room for a snapshot. */
static int emit_flags(struct fs *fs, uint16_t type, struct rbuf *r, unsigned int fl)
{
	int ret;

	if (r->overflow)
		return -ENAMETOOLONG;
	if (fs->applying_log || fs->read_only)
		return 0;
	ret = mlog_append_flags(fs->mlog, type, r->b, (uint32_t)r->n, fl);
	if (ret == -ENOSPC && (fl || !mlog_state_full(fs->mlog))) {
		ret = mlog_snapshot(fs->mlog, fs_emit_snapshot, fs);
		if (ret == 0)
			ret = mlog_append_flags(fs->mlog, type, r->b, (uint32_t)r->n, fl);
	}
	/* A full log is the user's doing, not the daemon's: the caller gets
	 * ENOSPC, and mlog has said once that the metadata fills the device. */
	if (ret < 0 && ret != -ENOSPC)
		zf_err("metadata log append (type %u): %s", type, strerror(-ret));
	return ret;
}

static int emit(struct fs *fs, uint16_t type, struct rbuf *r)
{
	/* An INODE record (live: attributes of an existing inode) does not
	 * grow the snapshot either: a file's times and mode can always be
	 * kept, also on a full log (each full append zone then costs a
	 * snapshot, which the room kept for it always fits). */
	bool frees = type == FS_REC_UNLINK || type == FS_REC_XATTR_DEL ||
		     type == FS_REC_INODE;

	return emit_flags(fs, type, r, frees ? MLOG_APPEND_FREES : 0);
}

/* Extents of ino a punch of [from, to) drops, less the one it adds when it
 * splits an extent in two. [L] */
static int64_t extents_dropped(struct fs *fs, uint64_t ino, uint64_t from, uint64_t to)
{
	struct fs_inode *in = fs_inode_get(fs, ino);
	struct extmap_cur c;
	int64_t n = 0;

	if (!in)
		return 0;
	for (const struct extmap_ext *e = extmap_seek(&in->map, from, &c); e && e->off < to;
	     e = extmap_next(&in->map, &c)) {
		if (e->off >= from && e->off + e->len <= to)
			n++;
		else if (e->off < from && e->off + e->len > to)
			n--;
	}
	return n;
}

static unsigned int frees_extents(struct fs *fs, uint64_t ino, uint64_t from, uint64_t to)
{
	return extents_dropped(fs, ino, from, to) >= 2 ? MLOG_APPEND_FREES : 0;
}

int fs_log_state(struct fs *fs, uint64_t next_ino)
{
	struct rbuf r;

	rbuf_init(&r);
	put_u64(&r, next_ino);
	return emit(fs, FS_REC_STATE, &r);
}

int fs_log_inode(struct fs *fs, const struct fs_attr *a)
{
	struct rbuf r;

	rbuf_init(&r);
	put_attr(&r, a);
	return emit(fs, FS_REC_INODE, &r);
}

int fs_log_attr(struct fs *fs, struct fs_inode *in)
{
	struct fs_attr a;
	fs_attr_get(in, &a);
	int ret = fs_log_inode(fs, &a);
	if (!ret)
		in->attr_dirty = false;
	return ret;
}

int fs_log_create(struct fs *fs, struct fs_inode *in, uint64_t parent, const char *name)
{
	struct rbuf r;

	rbuf_init(&r);
	put_inode_attr(&r, in);
	put_u64(&r, parent);
	put_name(&r, name);
	if (in->symlink || in->xattrs) {
		uint16_t nx = 0;
		put_name(&r, in->symlink ? in->symlink : "");
		for (struct fs_xattr *x = in->xattrs; x; x = x->next)
			nx++;
		put_u16(&r, nx);
		for (struct fs_xattr *x = in->xattrs; x; x = x->next) {
			put_name(&r, x->name);
			put_u32(&r, (uint32_t)x->size);
			put(&r, x->value, x->size);
		}
		if (r.overflow && in->xattrs)
			return -E2BIG;
	}
	return emit(fs, FS_REC_CREATE, &r);
}

int fs_log_link(struct fs *fs, uint64_t parent, const char *name, uint64_t ino)
{
	struct rbuf r;

	rbuf_init(&r);
	put_u64(&r, parent);
	put_u64(&r, ino);
	put_name(&r, name);
	return emit(fs, FS_REC_LINK, &r);
}

int fs_log_unlink(struct fs *fs, uint64_t parent, const char *name)
{
	struct rbuf r;

	rbuf_init(&r);
	put_u64(&r, parent);
	put_name(&r, name);
	return emit(fs, FS_REC_UNLINK, &r);
}

int fs_log_rename(struct fs *fs, uint64_t p, const char *n, uint64_t np,
		  const char *nn, unsigned int flags)
{
	struct rbuf r;

	rbuf_init(&r);
	put_u64(&r, p);
	put_u64(&r, np);
	put_u32(&r, flags);
	put_name(&r, n);
	put_name(&r, nn);
	return emit(fs, FS_REC_RENAME, &r);
}

int fs_log_extent(struct fs *fs, uint64_t ino, uint64_t off, uint64_t len,
		  uint64_t dev, uint64_t size_min)
{
	struct rbuf r;

	rbuf_init(&r);
	put_u64(&r, ino);
	put_u64(&r, off);
	put_u64(&r, len);
	put_u64(&r, dev);
	put_u64(&r, size_min);
	return emit(fs, FS_REC_EXTENT, &r);
}

int fs_log_truncate(struct fs *fs, uint64_t ino, uint64_t size)
{
	struct rbuf r;

	rbuf_init(&r);
	put_u64(&r, ino);
	put_u64(&r, size);
	uint32_t bs = fs_block_size(fs);
	uint64_t tail = bs && size <= UINT64_MAX - bs ? ZF_ALIGN_UP(size, bs) : UINT64_MAX;
	return emit_flags(fs, FS_REC_TRUNCATE, &r, frees_extents(fs, ino, tail, UINT64_MAX));
}

/* A record of (ino, off, len): PREALLOC and PUNCH. */
static int emit_range(struct fs *fs, uint16_t type, uint64_t ino, uint64_t off, uint64_t len,
		      unsigned int fl)
{
	struct rbuf r;

	rbuf_init(&r);
	put_u64(&r, ino);
	put_u64(&r, off);
	put_u64(&r, len);
	return emit_flags(fs, type, &r, fl);
}

int fs_log_prealloc(struct fs *fs, uint64_t ino, uint64_t off, uint64_t len)
{
	return emit_range(fs, FS_REC_PREALLOC, ino, off, len, 0);
}

int fs_log_punch(struct fs *fs, uint64_t ino, uint64_t off, uint64_t len)
{
	uint64_t end = off + len < off ? UINT64_MAX : off + len;
	return emit_range(fs, FS_REC_PUNCH, ino, off, len, frees_extents(fs, ino, off, end));
}

/* A payload buffer on the heap (records of many runs are too big for the
 * stack), or NULL. */
static struct rbuf *rbuf_new(void)
{
	struct rbuf *r = malloc(sizeof(*r));
	if (r) {
		r->n = 0;
		r->overflow = false;
	}
	return r;
}

/* The runs of a COPY (ino: false) or REMAP record, then the append. */
static int emit_runs(struct fs *fs, uint16_t type, struct rbuf *r, const struct fs_cext *v,
		     uint32_t n, bool ino)
{
	put_u32(r, n);
	for (uint32_t i = 0; i < n; i++) {
		if (ino)
			put_u64(r, v[i].ino);
		put_u64(r, v[i].off);
		put_u64(r, v[i].len);
		put_u64(r, v[i].dev);
	}
	int ret = r->overflow ? -E2BIG : emit(fs, type, r);
	free(r);
	return ret;
}

int fs_log_copy(struct fs *fs, uint64_t src, uint64_t dst, uint64_t off, uint64_t len,
		uint64_t size, uint8_t cls, uint8_t cls_src, const struct fs_cext *v, uint32_t n)
{
	struct rbuf *r = rbuf_new();

	if (!r)
		return -ENOMEM;
	put_u64(r, src);
	put_u64(r, dst);
	put_u64(r, off);
	put_u64(r, len);
	put_u64(r, size);
	put_u8(r, cls);
	put_u8(r, cls_src);
	return emit_runs(fs, FS_REC_COPY, r, v, n, false);
}

int fs_log_remap(struct fs *fs, const struct fs_cext *v, uint32_t n)
{
	struct rbuf *r = rbuf_new();

	return r ? emit_runs(fs, FS_REC_REMAP, r, v, n, true) : -ENOMEM;
}

int fs_log_xattr_set(struct fs *fs, uint64_t ino, const char *name,
		     const void *value, size_t size)
{
	struct rbuf r;

	rbuf_init(&r);
	put_u64(&r, ino);
	put_name(&r, name);
	put_u32(&r, (uint32_t)size);
	put(&r, value, size);
	if (r.overflow)
		return -E2BIG;
	return emit(fs, FS_REC_XATTR_SET, &r);
}

int fs_log_xattr_del(struct fs *fs, uint64_t ino, const char *name)
{
	struct rbuf r;

	rbuf_init(&r);
	put_u64(&r, ino);
	put_name(&r, name);
	return emit(fs, FS_REC_XATTR_DEL, &r);
}

/* ---- decoding and replay ---- */

struct rd {
	const uint8_t *p;
	size_t left;
	bool bad;
};

static void get(struct rd *r, void *out, size_t len)
{
	if (r->bad || r->left < len) {
		r->bad = true;
		memset(out, 0, len);
		return;
	}
	memcpy(out, r->p, len);
	r->p += len;
	r->left -= len;
}
static uint8_t get_u8(struct rd *r) { uint8_t v; get(r, &v, 1); return v; }
static uint16_t get_u16(struct rd *r) { uint16_t v; get(r, &v, 2); return v; }
static uint32_t get_u32(struct rd *r) { uint32_t v; get(r, &v, 4); return v; }
static uint64_t get_u64(struct rd *r) { uint64_t v; get(r, &v, 8); return v; }
/* Names are copied into buf (NUL-terminated); empty or '/'-containing names
 * and names longer than FS_NAME_MAX are rejected. */
static void get_name(struct rd *r, char *buf, size_t cap, bool path)
{
	uint16_t len = get_u16(r);
	if (r->bad || len >= cap || len > r->left || (!path && (len == 0 || len > FS_NAME_MAX))) {
		r->bad = true;
		buf[0] = 0;
		return;
	}
	get(r, buf, len);
	buf[len] = 0;
	if (!path && (memchr(buf, '/', len) || strlen(buf) != len))
		r->bad = true;
}

static void get_attr(struct rd *r, struct fs_attr *a)
{
	a->ino = get_u64(r);
	a->mode = get_u32(r);
	a->uid = get_u32(r);
	a->gid = get_u32(r);
	a->nlink = get_u32(r);
	a->rdev = get_u64(r);
	a->size = get_u64(r);
	a->atime = (int64_t)get_u64(r);
	a->mtime = (int64_t)get_u64(r);
	a->ctime = (int64_t)get_u64(r);
	a->cls = get_u8(r);
	a->src = get_u8(r);
	if (a->ino == 0 || a->cls >= LIFETIME_NR)
		r->bad = true;
	switch (a->mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO: case S_IFSOCK:
	case S_IFCHR: case S_IFBLK:
		break;
	default:
		r->bad = true;
	}
}

/* An extent's device range lies on the device and inside one zone (data is
 * written zone by zone; mount_reconcile refuses anything else too). */
static bool dev_range_ok(const struct fs *fs, uint64_t dev, uint64_t len)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	return len && dev < g->size && len <= g->size - dev &&
	       dev / g->zone_size == (dev + len - 1) / g->zone_size;
}

static struct fs_inode *reg_inode(struct fs *fs, uint64_t ino)
{
	struct fs_inode *in = fs_inode_get(fs, ino);
	return in && S_ISREG(in->mode) ? in : NULL;
}

/* Scratch for names and targets (replay is single-threaded per fs, but
 * several file systems may replay at once). */
struct replay_buf {
	char name[FS_NAME_MAX + 2], name2[FS_NAME_MAX + 2];
	char target[4097];
};
static _Thread_local struct replay_buf rb;

static int replay_inode(struct fs *fs, struct rd *r)
{
	struct fs_attr a;
	get_attr(r, &a);
	if (r->bad)
		return 0;
	struct fs_inode *in = fs_inode_get(fs, a.ino);
	if (in && (in->mode & S_IFMT) != (a.mode & S_IFMT)) {
		r->bad = true;	/* an inode never changes its type */
		return 0;
	}
	if (in && S_ISREG(a.mode) && a.size < in->size && !fs_block_size(fs)) {
		r->bad = true;
		return 0;
	}
	if (!in) {	/* a snapshot's inode: '..' is itself until it is named */
		int ret = fs_inode_prepare(fs, &a, a.ino, NULL, &in);
		if (ret)
			return ret;
		fs_inode_insert(fs, in);
	}
	fs_apply_attr(fs, in, &a);
	return 0;
}

/* The optional tail of a CREATE: target, then initial xattrs, attached to
 * the prepared inode; must use up the payload. */
static int replay_create_tail(struct rd *r, struct fs_inode *in)
{
	get_name(r, rb.target, sizeof(rb.target), true);
	uint16_t nx = get_u16(r);
	if (r->bad)
		return 0;
	if (S_ISLNK(in->mode)) {
		if (!(in->symlink = strdup(rb.target)))
			return -ENOMEM;
	} else if (rb.target[0]) {
		r->bad = true;	/* only a symlink has a target */
		return 0;
	}
	for (uint16_t i = 0; i < nx && !r->bad; i++) {
		get_name(r, rb.name2, sizeof(rb.name2), true);
		uint32_t vlen = get_u32(r);
		if (r->bad || vlen > r->left || fs_xattr_find(in, rb.name2)) {
			r->bad = true;
			break;
		}
		struct fs_xattr *x = fs_xattr_new(rb.name2, r->p, vlen);
		if (!x)
			return -ENOMEM;
		fs_xattr_attach(in, x);
		r->p += vlen;
		r->left -= vlen;
	}
	if (r->left)
		r->bad = true;
	return 0;
}

static int replay_create(struct fs *fs, struct rd *r)
{
	struct fs_attr a;
	struct fs_inode *in = NULL;
	struct fs_dirent *d = NULL;
	int ret;

	get_attr(r, &a);
	uint64_t parent = get_u64(r);
	get_name(r, rb.name, sizeof(rb.name), false);
	if (r->bad)
		return 0;
	struct fs_inode *dir = fs_inode_get(fs, parent);
	if (!dir || !dir->dir || fs_dirent_find(fs, parent, rb.name) ||
	    fs_inode_get(fs, a.ino)) {
		r->bad = true;
		return 0;
	}
	ret = fs_inode_prepare(fs, &a, parent, NULL, &in);
	if (!ret && r->left)
		ret = replay_create_tail(r, in);
	if (!ret && !r->bad && !(d = fs_dirent_alloc(fs, dir, rb.name, a.ino)))
		ret = -ENOMEM;
	if (ret || r->bad) {
		fs_inode_discard(fs, in);
		return ret;
	}
	fs_apply_create(fs, dir, in, d);
	return 0;
}

/* LINK and DIRENT */
static int replay_name(struct fs *fs, struct rd *r, uint16_t type)
{
	uint64_t parent = get_u64(r), ino = get_u64(r);
	get_name(r, rb.name, sizeof(rb.name), false);
	if (r->bad)
		return 0;
	struct fs_inode *dir = fs_inode_get(fs, parent), *in = fs_inode_get(fs, ino);
	if (!dir || !dir->dir || !in || fs_dirent_find(fs, parent, rb.name)) {
		r->bad = true;
		return 0;
	}
	/* A directory has exactly one name (never a LINK), the root none, and
	 * a directory never goes below itself. */
	if (in->dir && (type == FS_REC_LINK || ino == FS_ROOT_INO ||
			in->dir->parent != ino ||
			(!fs_dir_rooted(dir) && fs_is_below(fs, parent, ino)))) {
		r->bad = true;
		return 0;
	}
	struct fs_dirent *d = fs_dirent_alloc(fs, dir, rb.name, ino);
	if (!d)
		return -ENOMEM;
	if (type == FS_REC_LINK)
		fs_apply_link(fs, dir, in, d);
	else
		fs_apply_dirent(fs, dir, in, d);
	return 0;
}

static int replay_rename(struct fs *fs, struct rd *r)
{
	uint64_t p = get_u64(r), np = get_u64(r);
	uint32_t flags = get_u32(r);
	get_name(r, rb.name, sizeof(rb.name), false);
	get_name(r, rb.name2, sizeof(rb.name2), false);
	if (r->bad)
		return 0;
	int ret = fs_rename_check(fs, p, rb.name, np, rb.name2, flags);
	if (ret < 0) {
		r->bad = true;
		return 0;
	}
	if (ret == 1)
		return 0;
	struct fs_dirent *d = NULL;
	if (!(flags & RENAME_EXCHANGE)) {
		uint64_t ino = fs_dirent_find(fs, p, rb.name)->ino;
		d = fs_dirent_alloc(fs, fs_inode_get(fs, np), rb.name2, ino);
		if (!d)
			return -ENOMEM;
	}
	return fs_apply_rename(fs, p, rb.name, np, rb.name2, flags, d);
}

static int replay_xattr_set(struct fs *fs, struct rd *r)
{
	uint64_t ino = get_u64(r);
	get_name(r, rb.name, sizeof(rb.name), true);
	uint32_t vlen = get_u32(r);
	if (r->bad || vlen != r->left) {
		r->bad = true;
		return 0;
	}
	struct fs_inode *in = fs_inode_get(fs, ino);
	r->left = 0;
	if (!in)	/* freed later in the log */
		return 0;
	struct fs_xattr *x = fs_xattr_new(rb.name, r->p, vlen);
	if (!x)
		return -ENOMEM;
	fs_apply_xattr_set(fs, in, x);
	return 0;
}

static int replay_unlink(struct fs *fs, struct rd *r)
{
	uint64_t parent = get_u64(r);
	get_name(r, rb.name, sizeof(rb.name), false);
	if (r->bad)
		return 0;
	struct fs_dirent *d = fs_dirent_find(fs, parent, rb.name);
	struct fs_inode *in = d ? fs_inode_get(fs, d->ino) : NULL;
	if (!d || (in && in->dir && in->dir->live > 0)) {
		r->bad = true;	/* missing name, or a non-empty directory */
		return 0;
	}
	return fs_apply_unlink(fs, parent, rb.name);
}

static bool extent_ok(const struct fs *fs, uint64_t off, uint64_t len, uint64_t dev)
{
	return len && off + len >= off && dev_range_ok(fs, dev, len);
}

static int replay_extent(struct fs *fs, struct rd *r)
{
	uint64_t ino = get_u64(r), off = get_u64(r), len = get_u64(r);
	uint64_t dev = get_u64(r), size_min = get_u64(r);
	if (r->bad)
		return 0;
	if (!extent_ok(fs, off, len, dev)) {
		r->bad = true;
		return 0;
	}
	struct fs_inode *in = reg_inode(fs, ino);
	if (!in)	/* freed later in the log (unlinked while open) */
		return 0;
	return fs_apply_extent(fs, in, off, len, dev, size_min);
}

static int replay_extents(struct fs *fs, struct rd *r)
{
	uint64_t ino = get_u64(r);
	uint32_t n = get_u32(r);
	struct fs_inode *in = reg_inode(fs, ino);
	int ret = 0;

	if (r->bad || (uint64_t)n * 24 != r->left) {
		r->bad = true;
		return 0;
	}
	for (uint32_t i = 0; i < n && !ret; i++) {
		uint64_t off = get_u64(r), len = get_u64(r), dev = get_u64(r);
		if (!extent_ok(fs, off, len, dev)) {
			r->bad = true;
			return 0;
		}
		if (in)
			ret = fs_apply_extent(fs, in, off, len, dev, 0);
	}
	return ret;
}

static int replay_truncate(struct fs *fs, struct rd *r)
{
	uint64_t ino = get_u64(r), size = get_u64(r);
	struct fs_inode *in = reg_inode(fs, ino);
	if (r->bad || !in)
		return 0;
	if (!fs_block_size(fs))
		r->bad = true;
	else
		fs_apply_truncate(fs, in, size);
	return 0;
}

static int replay_punch(struct fs *fs, struct rd *r)
{
	uint64_t ino = get_u64(r), off = get_u64(r), len = get_u64(r);
	struct fs_inode *in = reg_inode(fs, ino);
	if (!r->bad && in)
		fs_apply_punch(fs, in, off, len);
	return 0;
}

/* PREALLOC: a range fallocate held, as its record says (the live path
 * gives a block-aligned range within the largest file size). */
static int replay_prealloc(struct fs *fs, struct rd *r)
{
	uint64_t ino = get_u64(r), off = get_u64(r), len = get_u64(r);
	struct fs_inode *in = reg_inode(fs, ino);
	uint32_t bs = fs_block_size(fs);

	if (r->bad || !len || !bs || off % bs || len % bs || off > (1ull << 50) ||
	    len > (1ull << 50) - off) {
		r->bad = true;
		return 0;
	}
	if (!in)
		return 0;	/* freed later in the log */
	if (fs_pa_room(in, fs_pa_holes(in, off, len)))
		return -ENOMEM;
	fs_apply_prealloc(fs, in, off, len);
	return 0;
}

/* The runs of a COPY or REMAP record (at most max), bounds-checked: NULL
 * with r->bad (or *err = -ENOMEM). */
static struct fs_cext *get_runs(const struct fs *fs, struct rd *r, uint32_t n, bool ino,
				int *err)
{
	struct fs_cext *v;

	*err = 0;
	if (r->bad || (uint64_t)n * (ino ? 32 : 24) != r->left) {
		r->bad = true;
		return NULL;
	}
	if (!(v = malloc((n ? n : 1) * sizeof(*v)))) {
		*err = -ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++) {
		v[i].ino = ino ? get_u64(r) : 0;
		v[i].off = get_u64(r);
		v[i].len = get_u64(r);
		v[i].dev = get_u64(r);
		if (!extent_ok(fs, v[i].off, v[i].len, v[i].dev) || (ino && !v[i].ino))
			r->bad = true;
	}
	if (r->bad) {
		free(v);
		return NULL;
	}
	return v;
}

static int replay_copy(struct fs *fs, struct rd *r)
{
	uint64_t src = get_u64(r), dst = get_u64(r), off = get_u64(r), len = get_u64(r);
	uint64_t size = get_u64(r);
	uint8_t cls = get_u8(r), csrc = get_u8(r);
	uint32_t n = get_u32(r);
	int ret;

	(void)src;
	if (r->bad || off + len < off || cls >= LIFETIME_NR || n > FS_COPY_MAX_RUNS) {
		r->bad = true;
		return 0;
	}
	struct fs_cext *v = get_runs(fs, r, n, false, &ret);
	if (!v)
		return ret;
	/* runs in order, inside the range, not overlapping */
	for (uint32_t i = 0; i < n && !r->bad; i++)
		if (v[i].off < (i ? v[i - 1].off + v[i - 1].len : off) ||
		    v[i].off + v[i].len > off + len)
			r->bad = true;
	struct fs_inode *in = reg_inode(fs, dst);
	if (!r->bad && in)	/* no inode: freed later in the log */
		ret = fs_apply_copy(fs, in, off, len, size, cls, csrc, v, n);
	free(v);
	return ret;
}

static int replay_remap(struct fs *fs, struct rd *r)
{
	uint32_t n = get_u32(r);
	int ret;

	if (n > FS_REMAP_MAX_RUNS) {
		r->bad = true;
		return 0;
	}
	struct fs_cext *v = get_runs(fs, r, n, true, &ret);
	if (!v)
		return ret;
	ret = fs_apply_remap(fs, v, n);
	free(v);
	return ret;
}

static int replay_xattr_del(struct fs *fs, struct rd *r)
{
	uint64_t ino = get_u64(r);
	get_name(r, rb.name, sizeof(rb.name), true);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!r->bad && in)
		fs_apply_xattr_del(fs, in, rb.name);
	return 0;
}

static int replay_symlink(struct fs *fs, struct rd *r)
{
	uint64_t ino = get_u64(r);
	get_name(r, rb.target, sizeof(rb.target), true);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (r->bad || !in)
		return 0;
	char *t = strdup(rb.target);
	if (!t)
		return -ENOMEM;
	fs_apply_symlink(fs, in, t);
	return 0;
}

static int replay_state(struct fs *fs, struct rd *r)
{
	uint64_t next = get_u64(r);
	if (!r->bad && next > fs->next_ino)
		fs->next_ino = next;
	return 0;
}

int fs_replay_record(void *arg, uint16_t type, const void *payload,
		     uint32_t len, uint64_t lsn)
{
	struct fs *fs = arg;
	struct rd r = { .p = payload, .left = len };
	int ret;

	switch (type) {
	case FS_REC_STATE:	ret = replay_state(fs, &r); break;
	case FS_REC_INODE:	ret = replay_inode(fs, &r); break;
	case FS_REC_CREATE:	ret = replay_create(fs, &r); break;
	case FS_REC_DIRENT:
	case FS_REC_LINK:	ret = replay_name(fs, &r, type); break;
	case FS_REC_UNLINK:	ret = replay_unlink(fs, &r); break;
	case FS_REC_RENAME:	ret = replay_rename(fs, &r); break;
	case FS_REC_EXTENT:	ret = replay_extent(fs, &r); break;
	case FS_REC_EXTENTS:	ret = replay_extents(fs, &r); break;
	case FS_REC_TRUNCATE:	ret = replay_truncate(fs, &r); break;
	case FS_REC_PUNCH:	ret = replay_punch(fs, &r); break;
	case FS_REC_COPY:	ret = replay_copy(fs, &r); break;
	case FS_REC_REMAP:	ret = replay_remap(fs, &r); break;
	case FS_REC_PREALLOC:	ret = replay_prealloc(fs, &r); break;
	case FS_REC_XATTR_SET:	ret = replay_xattr_set(fs, &r); break;
	case FS_REC_XATTR_DEL:	ret = replay_xattr_del(fs, &r); break;
	case FS_REC_SYMLINK:	ret = replay_symlink(fs, &r); break;
	default:
		zf_warn("replay: unknown record type %u skipped", type);
		return 0;
	}
	if (r.bad || (ret < 0 && ret != -ENOMEM)) {
		zf_err("replay: malformed record type %u (lsn %llu)%s%s", type,
		       (unsigned long long)lsn, ret < 0 ? ": " : "",
		       ret < 0 ? strerror(-ret) : "");
		return -EUCLEAN;
	}
	return ret;
}

/* ---- snapshot ---- */

static int snap_append(struct mlog *m, uint16_t type, struct rbuf *r)
{
	if (r->overflow)
		return -E2BIG;
	return mlog_append(m, type, r->b, (uint32_t)r->n);
}

static int snap_inode(struct fs *fs, struct mlog *m, struct fs_inode *in)
{
	struct rbuf *r = rbuf_new();
	int ret;

	if (!r)
		return -ENOMEM;
	put_inode_attr(r, in);
	ret = snap_append(m, FS_REC_INODE, r);
	if (!ret && in->symlink) {
		r->n = 0;
		put_u64(r, in->ino);
		put_name(r, in->symlink);
		ret = snap_append(m, FS_REC_SYMLINK, r);
	}
	for (struct fs_xattr *x = in->xattrs; x && !ret; x = x->next) {
		r->n = 0;
		put_u64(r, in->ino);
		put_name(r, x->name);
		put_u32(r, (uint32_t)x->size);
		put(r, x->value, x->size);
		ret = snap_append(m, FS_REC_XATTR_SET, r);
	}
	const size_t per = (MLOG_MAX_PAYLOAD - 16) / 24;
	struct extmap_cur c;
	const struct extmap_ext *e = extmap_seek(&in->map, 0, &c);
	for (size_t i = 0; i < extmap_count(&in->map) && !ret; i += per) {
		uint32_t n = (uint32_t)ZF_MIN(per, extmap_count(&in->map) - i);
		r->n = 0;
		put_u64(r, in->ino);
		put_u32(r, n);
		for (uint32_t k = 0; k < n; k++, e = extmap_next(&in->map, &c)) {
			put_u64(r, e->off);
			put_u64(r, e->len);
			put_u64(r, e->dev);
		}
		ret = snap_append(m, FS_REC_EXTENTS, r);
	}
	for (uint32_t i = 0; i < in->npa && !ret; i++) {
		r->n = 0;
		put_u64(r, in->ino);
		put_u64(r, in->pa[i].off);
		put_u64(r, in->pa[i].len);
		ret = snap_append(m, FS_REC_PREALLOC, r);
	}
	(void)fs;
	free(r);
	return ret;
}

/* ---- the size of the next snapshot ---- */

/* What snap_inode() and snap_names() emit, in log bytes: the next
 * snapshot's size is the sum over the inodes (fs->snap_bytes), kept as the
 * state changes, so that the log sizes the room it keeps for that snapshot
 * by the state as it is, shrinking as files go (mlog_set_state_bytes). */
#define ATTR_PAYLOAD 66u	/* put_attr() */
#define EXT_PER_REC ((MLOG_MAX_PAYLOAD - 16) / 24)

uint64_t fs_snap_name_bytes(const char *name)
{
	return mlog_record_bytes(16 + 2 + (uint32_t)strlen(name));
}

static uint64_t snap_inode_bytes(const struct fs_inode *in)
{
	uint64_t b = mlog_record_bytes(ATTR_PAYLOAD);
	size_t n = extmap_count(&in->map);

	if (in->symlink)
		b += mlog_record_bytes(8 + 2 + (uint32_t)strlen(in->symlink));
	for (const struct fs_xattr *x = in->xattrs; x; x = x->next)
		b += mlog_record_bytes(8 + 2 + (uint32_t)strlen(x->name) + 4 + (uint32_t)x->size);
	b += (uint64_t)(n / EXT_PER_REC) * mlog_record_bytes(12 + 24 * EXT_PER_REC);
	if (n % EXT_PER_REC)
		b += mlog_record_bytes(12 + 24 * (uint32_t)(n % EXT_PER_REC));
	b += (uint64_t)in->npa * mlog_record_bytes(24);
	if (in->dir)
		b += in->dir->name_bytes;
	return b;
}

void fs_snap_account(struct fs *fs, struct fs_inode *in)
{
	if (!in->snap_counted)
		return;
	uint64_t b = snap_inode_bytes(in);
	fs->snap_bytes += b - in->snap_bytes;	/* modulo 2^64: a decrease too */
	in->snap_bytes = b;
}

uint64_t fs_snap_state_bytes(void *arg)
{
	struct fs *fs = arg;

	return mlog_record_bytes(8) + fs->snap_bytes;	/* STATE + the inodes */
}

/* The DIRENT records of dir's names.  Never writes a name that cannot be
 * replayed: one left pointing at an inode that is gone (only a damaged log
 * can leave that; fsck reports it).  Subdirectories go on the queue. */
static int snap_names(struct fs *fs, struct mlog *m, struct rbuf *r, struct fs_inode *dir,
		      struct fs_inode ***q, size_t *qn, size_t *qcap)
{
	int ret = 0;

	for (size_t i = 0; i < dir->dir->n && !ret; i++) {
		struct fs_dirent *d = dir->dir->ents[i];
		if (!d)
			continue;
		struct fs_inode *in = fs_inode_get(fs, d->ino);
		if (!in || d->ino == FS_ROOT_INO) {
			zf_warn("snapshot: name '%s' in directory %llu points at "
				"missing inode %llu; dropped", d->name,
				(unsigned long long)d->parent, (unsigned long long)d->ino);
			continue;
		}
		r->n = 0;
		put_u64(r, d->parent);
		put_u64(r, d->ino);
		put_name(r, d->name);
		ret = snap_append(m, FS_REC_DIRENT, r);
		if (ret || !in->dir || in->dir->snap_gen == fs->snap_gen)
			continue;
		if (*qn == *qcap) {
			size_t cap = *qcap ? 2 * *qcap : 64;
			struct fs_inode **nq = realloc(*q, cap * sizeof(**q));
			if (!nq)
				return -ENOMEM;
			*q = nq;
			*qcap = cap;
		}
		in->dir->snap_gen = fs->snap_gen;
		(*q)[(*qn)++] = in;
	}
	return ret;
}

/* Snapshot: STATE, every inode (attrs, symlink, xattrs, extents), then every
 * name, so that both ends exist when a DIRENT is replayed.  Names go from
 * the root down, a directory's before those inside it (replay's loop check
 * then costs one step, struct fs_dir), then those of directories the root
 * does not reach (only a damaged log has them).  Runs with fs->lock. */
int fs_emit_snapshot(void *arg, struct mlog *m)
{
	struct fs *fs = arg;
	struct rbuf *r = rbuf_new();
	struct fs_inode **q = NULL, *root = fs_inode_get(fs, FS_ROOT_INO);
	size_t qn = 0, qcap = 0;
	int ret;

	if (!r)
		return -ENOMEM;
	put_u64(r, ZF_MAX(fs->next_ino, fs->ino_logged));	/* fs_ino_reserve */
	ret = snap_append(m, FS_REC_STATE, r);
	for (struct fs_inode *in = fs_inode_first(fs); in && !ret; in = fs_inode_next(fs, in))
		ret = snap_inode(fs, m, in);
	fs->snap_gen++;
	/* The root first, then each directory it does not reach (each with
	 * everything below it), breadth first. */
	struct fs_inode *top = root && root->dir ? root : NULL;
	struct fs_inode *in = fs_inode_first(fs);
	while (!ret) {
		if (!top) {
			while (in && (!in->dir || in->dir->snap_gen == fs->snap_gen))
				in = fs_inode_next(fs, in);
			if (!in)
				break;
			top = in;
		}
		top->dir->snap_gen = fs->snap_gen;
		qn = 0;
		ret = snap_names(fs, m, r, top, &q, &qn, &qcap);
		for (size_t i = 0; i < qn && !ret; i++)
			ret = snap_names(fs, m, r, q[i], &q, &qn, &qcap);
		top = NULL;
	}
	free(q);
	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in))
		in->attr_dirty = false;
	free(r);
	return ret;
}
