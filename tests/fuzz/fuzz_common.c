#include "tests/fuzz/fuzz_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "mlog/mlog.h"
#include "mlog/mlog_format.h"

static struct zdev *g_dev;
static char g_dir[256], g_path[300];

static void cleanup(void)
{
	if (g_dev)
		zdev_close(g_dev);
	g_dev = NULL;
	unlink(g_path);
	rmdir(g_dir);
}

struct zdev *fz_device(void)
{
	if (g_dev)
		return g_dev;
	if (!getenv("ZF_FUZZ_VERBOSE"))
		zf_log_set_level((enum zf_log_level)-1);
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" :
			   getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(g_dir, sizeof(g_dir), "%s/zf-fuzz-XXXXXX", base);
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		abort();
	}
	snprintf(g_path, sizeof(g_path), "%s/dev.zdev", g_dir);
	struct zdev_emu_params p = {
		.zone_size = FZ_ZONE_SIZE, .nr_zones = FZ_ZONES, .block_size = FZ_BLOCK,
		.max_open = 8, .max_active = 8,
	};
	if (zdev_emu_create(g_path, &p, true) || zdev_open(g_path, NULL, &g_dev)) {
		fprintf(stderr, "fuzz: cannot create the emulated device %s\n", g_path);
		abort();
	}
	atexit(cleanup);
	return g_dev;
}

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

/* Layouts: mlog/mlog_format.h. */
void fz_fix_crcs(uint8_t *z, size_t len)
{
	if (len < FZ_BLOCK || memcmp(z, MLOG_ZHDR_MAGIC, 8) != 0)
		return;
	uint32_t zero = 0, crc;
	memcpy(z + MLOG_ZHDR_CRC_OFF, &zero, 4);
	crc = zf_crc32c(0, z, MLOG_ZHDR_SIZE);
	memcpy(z + MLOG_ZHDR_CRC_OFF, &crc, 4);
	uint32_t B;
	memcpy(&B, z + MLOG_ZHDR_SB_OFF + offsetof(struct mlog_sb, block_size), 4);
	if (B < 512 || B > 65536 || (B & (B - 1)) || B > len)
		B = FZ_BLOCK;
	/* records: 8-aligned, a header never straddles a block boundary */
	size_t off = B;
	while (off + MLOG_RECHDR <= len) {
		if (B - off % B < MLOG_RECHDR) {
			off = ZF_ALIGN_UP(off, B);
			continue;
		}
		uint16_t magic;
		uint32_t plen;
		memcpy(&magic, z + off, 2);
		memcpy(&plen, z + off + 4, 4);
		if (magic != MLOG_REC_MAGIC || plen > len - off - MLOG_RECHDR)
			break;
		memcpy(z + off + MLOG_RECHDR_CRC_OFF, &zero, 4);
		crc = zf_crc32c(zf_crc32c(0, z + off + MLOG_RECHDR, plen), z + off, MLOG_RECHDR);
		memcpy(z + off + MLOG_RECHDR_CRC_OFF, &crc, 4);
		off = ZF_ALIGN_UP(off + MLOG_RECHDR + plen, 8);
	}
}

void fz_load(struct zdev *dev, const uint8_t *data, size_t size)
{
	static uint8_t *zbuf;
	const struct zdev_geometry *g = zdev_geometry(dev);
	if (!zbuf)
		zbuf = zdev_buf_alloc(FZ_ZONE_SIZE);
	if (zdev_reset_all(dev))
		abort();
	if (size < 1)
		return;
	uint8_t flags = data[0];
	size_t pos = 1;
	bool done[FZ_ZONES] = { false };
	while (pos + 6 <= size) {
		uint32_t z = data[pos] % FZ_ZONES;
		uint8_t zf = data[pos + 1];
		uint32_t blocks = rd16(data + pos + 2);
		uint32_t n = rd16(data + pos + 4);
		pos += 6;
		if (n > size - pos)
			n = (uint32_t)(size - pos);
		uint32_t capb = (uint32_t)(g->zone_capacity / FZ_BLOCK);
		blocks %= capb + 1;
		if (n > blocks * FZ_BLOCK)
			n = blocks * FZ_BLOCK;
		if (done[z]) {
			pos += n;
			continue;
		}
		done[z] = true;
		memset(zbuf, 0, (size_t)blocks * FZ_BLOCK);
		memcpy(zbuf, data + pos, n);
		pos += n;
		if (flags & FZ_FIX_CRC)
			fz_fix_crcs(zbuf, (size_t)blocks * FZ_BLOCK);
		/* A zone the emulator will not take as described (its rules
		 * refuse the write) is left empty: the input's business, not a
		 * bug of the code under test. */
		if (blocks && zdev_write(dev, (uint64_t)z * g->zone_size, zbuf,
					 (size_t)blocks * FZ_BLOCK) < 0)
			continue;
		if ((zf & FZ_FINISH) && zdev_zone_finish(dev, z))
			abort();
	}
	if (zdev_flush(dev))
		abort();
}

size_t fz_dump(struct zdev *dev, uint8_t flags, uint8_t **out)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct zdev_zone zs[FZ_ZONES];
	struct mlog_sb sb;
	bool have_sb = mlog_probe(dev, &sb) == 0;
	uint8_t *zbuf = zdev_buf_alloc(FZ_ZONE_SIZE);
	size_t cap = 1 + FZ_ZONES * (6 + FZ_ZONE_SIZE), n = 0;
	uint8_t *o = malloc(cap);
	if (zdev_report_zones(dev, 0, FZ_ZONES, zs) != FZ_ZONES)
		abort();
	o[n++] = flags;
	for (uint32_t z = 0; z < FZ_ZONES; z++) {
		uint64_t w = zs[z].wp - zs[z].start;
		bool full = zdev_zone_full(&zs[z]);
		if (full)
			w = zs[z].capacity;
		if (!w)
			continue;
		if (zdev_read(dev, zs[z].start, zbuf, w) != (ssize_t)w)
			abort();
		uint32_t len = (uint32_t)w;
		while (len && !zbuf[len - 1])	/* trailing zeros are implied */
			len--;
		if (len > 0xFFFF)	/* inputs carry at most 64 KiB per zone */
			len = 0xFFFF;
		/* data zones: the first 8 KiB (the rest reads as zeros) keeps
		 * seeds small; file contents do not matter to the parsers */
		if (have_sb && (z < sb.meta_first || z >= sb.meta_first + sb.meta_count) &&
		    len > 8192)
			len = 8192;
		uint32_t blocks = (uint32_t)(w / FZ_BLOCK);
		o[n++] = (uint8_t)z;
		o[n++] = full && w < g->zone_capacity ? FZ_FINISH : 0;
		o[n++] = (uint8_t)blocks;
		o[n++] = (uint8_t)(blocks >> 8);
		o[n++] = (uint8_t)len;
		o[n++] = (uint8_t)(len >> 8);
		memcpy(o + n, zbuf, len);
		n += len;
	}
	zdev_buf_free(zbuf);
	*out = o;
	return n;
}

void fz_opts(struct fs_opts *o, bool read_only)
{
	fs_opts_default(o);
	o->commit_interval_ms = 0;
	o->buffer_bytes = 4u << 20;
	o->stripe_unit = 64u << 10;
	o->stripe_width = 2;
	o->read_only = read_only;
}

/* ---- walking ------------------------------------------------------------ */

struct walk {
	struct fs *fs;
	uint64_t stack[64];
	unsigned depth, seen;
	uint64_t children[256];
	char names[256][FS_NAME_MAX + 1];
	unsigned nchild;
};

static int dir_cb(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
	struct walk *w = arg;
	(void)next_off;
	/* called with fs->lock held: only collect here */
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (w->nchild < ZF_ARRAY_SIZE(w->children)) {
		w->children[w->nchild] = st->st_ino;
		snprintf(w->names[w->nchild], sizeof(w->names[0]), "%s", name);
		w->nchild++;
	}
	return w->nchild >= ZF_ARRAY_SIZE(w->children);
}

static void visit(struct walk *w, uint64_t ino)
{
	static uint8_t buf[1 << 16];
	struct fs *fs = w->fs;
	struct stat st;
	w->seen++;
	if (fs_getattr(fs, ino, &st))
		return;
	char names[4096];
	int n = fs_listxattr(fs, ino, names, sizeof(names));
	for (int i = 0; n > 0 && i < n; i += (int)strlen(names + i) + 1)
		fs_getxattr(fs, ino, names + i, buf, sizeof(buf));
	fs_getxattr(fs, ino, "user.zonefuse.lifetime", buf, sizeof(buf));
	if (S_ISLNK(st.st_mode))
		fs_readlink(fs, ino, (char *)buf, sizeof(buf));
	if (S_ISREG(st.st_mode)) {
		fs_getxattr(fs, ino, "user.zonefuse.extents", buf, sizeof(buf));
		fs_getxattr(fs, ino, "user.zonefuse.zones", buf, sizeof(buf));
		if (fs_open(fs, ino, O_RDONLY) == 0) {
			fs_read(fs, ino, 0, sizeof(buf), buf);
			if (st.st_size > 8192)
				fs_read(fs, ino, (uint64_t)st.st_size - 5000, 8192, buf);
			fs_lseek(fs, ino, 0, SEEK_DATA);
			fs_lseek(fs, ino, 0, SEEK_HOLE);
			fs_release(fs, ino);
		}
	}
	if (S_ISDIR(st.st_mode) && w->depth < ZF_ARRAY_SIZE(w->stack)) {
		for (unsigned d = 0; d < w->depth; d++)
			if (w->stack[d] == ino)
				return;	/* a loop: never walk it twice */
		w->stack[w->depth++] = ino;
		w->nchild = 0;
		fs_readdir(fs, ino, 0, false, dir_cb, w);
		unsigned nc = w->nchild;
		uint64_t kids[256];
		memcpy(kids, w->children, nc * sizeof(kids[0]));
		for (unsigned i = 0; i < nc; i++) {
			struct stat ls;
			if (fs_lookup(fs, ino, w->names[i], &ls) == 0)
				fs_forget(fs, ls.st_ino, 1);
		}
		for (unsigned i = 0; i < nc && w->seen < 2000; i++)
			visit(w, kids[i]);
		w->depth--;
	}
}

unsigned fz_walk(struct fs *fs)
{
	static struct walk w;
	memset(&w, 0, sizeof(w));
	w.fs = fs;
	struct statvfs sv;
	fs_statfs(fs, &sv);
	visit(&w, FS_ROOT_INO);
	return w.seen;
}

/* ---- a small workload --------------------------------------------------- */

void fz_workload(struct fs *fs, uint32_t seed)
{
	static uint8_t buf[200000];
	struct stat st;
	char name[32];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + seed);
	if (fs_mkdir(fs, FS_ROOT_INO, "fz-dir", 0755, NULL, &st) == 0)
		fs_forget(fs, st.st_ino, 1);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "fz-%u-%d", seed, i);
		if (fs_mknod(fs, FS_ROOT_INO, name, S_IFREG | 0644, 0, NULL, &st))
			continue;
		fs_forget(fs, st.st_ino, 1);
		fs_write(fs, st.st_ino, (uint64_t)i * 7000, buf, 3000 + (size_t)i * 9000, false);
		if (i == 1)
			fs_setxattr(fs, st.st_ino, "user.k", "v", 1, 0);
		if (i == 2) {
			struct stat a = { .st_size = 30000 };
			fs_setattr(fs, st.st_ino, &a, FS_SET_SIZE, NULL);
		}
		fs_fsync(fs, st.st_ino, i & 1);
	}
	snprintf(name, sizeof(name), "fz-%u-0", seed);
	fs_rename(fs, FS_ROOT_INO, name, FS_ROOT_INO, "fz-renamed", 0);
	snprintf(name, sizeof(name), "fz-%u-3", seed);
	fs_unlink(fs, FS_ROOT_INO, name);
	fs_sync(fs);
}
