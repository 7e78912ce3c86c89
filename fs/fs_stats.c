/* fs_stats — request latency counters and the text of user.zonefuse.stats
 * and user.zonefuse.zones (see fs_stats.h; formats in docs/stats.md). */
#include "fs/fs_stats.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

/* ---- latency ----------------------------------------------------------------
 * Histogram buckets: values 0..3 get their own bucket; above, 4 buckets per
 * power of two (bucket = 4 * (log2(v) - 1) + next two bits), so a bucket's
 * width is at most a quarter of its lower bound. */
#define LAT_BUCKETS 252

static const char *const lat_names[FS_LAT_NR] = {
	[FS_LAT_LOOKUP] = "lookup", [FS_LAT_GETATTR] = "getattr",
	[FS_LAT_SETATTR] = "setattr", [FS_LAT_READ] = "read",
	[FS_LAT_WRITE] = "write", [FS_LAT_FLUSH] = "flush",
	[FS_LAT_FSYNC] = "fsync", [FS_LAT_CREATE] = "create",
	[FS_LAT_REMOVE] = "remove", [FS_LAT_RENAME] = "rename",
	[FS_LAT_OPEN] = "open", [FS_LAT_READDIR] = "readdir",
	[FS_LAT_XATTR] = "xattr", [FS_LAT_OTHER] = "other",
};

static struct lat {
	_Atomic uint64_t count, sum, max;
	_Atomic uint64_t hist[LAT_BUCKETS];
} lat[FS_LAT_NR];

const char *fs_lat_op_name(unsigned int op)
{
	return op < FS_LAT_NR ? lat_names[op] : "?";
}

static unsigned int lat_bucket(uint64_t v)
{
	if (v < 4)
		return (unsigned int)v;
	unsigned int e = 63u - (unsigned int)__builtin_clzll(v);	/* >= 2 */
	return 4u * (e - 1u) + (unsigned int)((v >> (e - 2u)) & 3u);
}

/* Highest value that falls into bucket b. */
static uint64_t lat_bucket_high(unsigned int b)
{
	if (b < 4)
		return b;
	unsigned int e = b / 4u + 1u, sub = b % 4u;
	uint64_t low = (uint64_t)(4u + sub) << (e - 2u);
	return low + ((uint64_t)1 << (e - 2u)) - 1u;
}

void fs_lat_record(unsigned int op, uint64_t ns)
{
	if (op >= FS_LAT_NR)
		op = FS_LAT_OTHER;
	struct lat *l = &lat[op];
	atomic_fetch_add_explicit(&l->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&l->sum, ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&l->hist[lat_bucket(ns)], 1, memory_order_relaxed);
	uint64_t m = atomic_load_explicit(&l->max, memory_order_relaxed);
	while (ns > m && !atomic_compare_exchange_weak_explicit(&l->max, &m, ns,
			memory_order_relaxed, memory_order_relaxed))
		;
}

static _Atomic uint64_t uring_requests;

void fs_lat_count_uring(void)
{
	atomic_fetch_add_explicit(&uring_requests, 1, memory_order_relaxed);
}

static _Atomic uint64_t poll_hits, poll_misses, poll_ns;

void fs_lat_count_poll(bool hit, uint64_t ns)
{
	atomic_fetch_add_explicit(hit ? &poll_hits : &poll_misses, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&poll_ns, ns, memory_order_relaxed);
}

static _Atomic uint64_t served[FS_SERVED_NR];

void fs_lat_count_serve(enum fs_serve how)
{
	if ((unsigned)how < FS_SERVED_NR)
		atomic_fetch_add_explicit(&served[how], 1, memory_order_relaxed);
}

void fs_lat_get_poll(struct fs_poll_counts *out)
{
	out->hits = atomic_load_explicit(&poll_hits, memory_order_relaxed);
	out->misses = atomic_load_explicit(&poll_misses, memory_order_relaxed);
	out->ns = atomic_load_explicit(&poll_ns, memory_order_relaxed);
}

void fs_lat_get(unsigned int op, struct fs_lat_summary *out)
{
	uint64_t h[LAT_BUCKETS], total = 0;

	memset(out, 0, sizeof(*out));
	if (op >= FS_LAT_NR)
		return;
	struct lat *l = &lat[op];
	for (unsigned int b = 0; b < LAT_BUCKETS; b++) {
		h[b] = atomic_load_explicit(&l->hist[b], memory_order_relaxed);
		total += h[b];
	}
	out->count = atomic_load_explicit(&l->count, memory_order_relaxed);
	out->sum_ns = atomic_load_explicit(&l->sum, memory_order_relaxed);
	out->max_ns = atomic_load_explicit(&l->max, memory_order_relaxed);
	if (!total)
		return;
	/* Smallest bucket whose cumulative count reaches the rank. */
	uint64_t r50 = (total * 50 + 99) / 100, r99 = (total * 99 + 99) / 100, cum = 0;
	bool have50 = false;
	for (unsigned int b = 0; b < LAT_BUCKETS; b++) {
		cum += h[b];
		if (!have50 && cum >= r50) {
			out->p50_ns = ZF_MIN(lat_bucket_high(b), out->max_ns);
			have50 = true;
		}
		if (cum >= r99) {
			out->p99_ns = ZF_MIN(lat_bucket_high(b), out->max_ns);
			break;
		}
	}
}

void fs_lat_reset(void)
{
	for (unsigned int op = 0; op < FS_LAT_NR; op++) {
		struct lat *l = &lat[op];
		atomic_store(&l->count, 0);
		atomic_store(&l->sum, 0);
		atomic_store(&l->max, 0);
		for (unsigned int b = 0; b < LAT_BUCKETS; b++)
			atomic_store(&l->hist[b], 0);
	}
	atomic_store(&poll_hits, 0);
	atomic_store(&poll_misses, 0);
	atomic_store(&poll_ns, 0);
	for (unsigned int i = 0; i < FS_SERVED_NR; i++)
		atomic_store(&served[i], 0);
}

/* ---- text ------------------------------------------------------------------ */

void fs_text_printf(struct fs_text *t, const char *fmt, ...)
{
	va_list ap;

	if (t->oom)
		return;
	for (;;) {
		size_t room = t->cap - t->n;
		va_start(ap, fmt);
		int w = vsnprintf(t->s ? t->s + t->n : NULL, room, fmt, ap);
		va_end(ap);
		if (w < 0) {
			t->oom = true;
			return;
		}
		if ((size_t)w < room) {
			t->n += (size_t)w;
			return;
		}
		size_t cap = (t->cap ? t->cap * 2 : 1024) + (size_t)w;
		char *s = realloc(t->s, cap);
		if (!s) {
			t->oom = true;
			return;
		}
		t->s = s;
		t->cap = cap;
	}
}

void fs_text_free(struct fs_text *t)
{
	free(t->s);
	memset(t, 0, sizeof(*t));
}

/* ---- zone views ------------------------------------------------------------- */

enum zkind { ZK_UNUSED, ZK_META, ZK_DATA };

struct zrow {
	uint8_t kind;		/* enum zkind */
	uint8_t cond;
	uint8_t cls;		/* data zones: enum lifetime_class */
	bool leased, have_resets;
	uint64_t wp;		/* bytes from the zone start */
	uint64_t cap;
	uint64_t valid;
	uint64_t resets;
};

static const char *zone_class_name(const struct zrow *r)
{
	switch (r->kind) {
	case ZK_META: return "meta";
	case ZK_UNUSED: return "unused";
	default:
		if (r->cond == ZDEV_COND_EMPTY && !r->leased)
			return "-";
		return lifetime_class_name((enum lifetime_class)r->cls);
	}
}

/* Fill rows [first, first + n) of the device: data zones from zalloc's view,
 * meta zones from a zone report of the meta zones only, the rest (unused
 * conventional zones) from the geometry.  No fs->lock. */
static int zone_rows(struct fs *fs, uint32_t first, uint32_t n, struct zrow *rows)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	const uint32_t mf = fs->sb.meta_first, mc = fs->sb.meta_count;
	const uint32_t df = fs->sb.data_first, dc = fs->sb.data_count;

	memset(rows, 0, (size_t)n * sizeof(*rows));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t z = first + i;
		rows[i].kind = ZK_UNUSED;
		rows[i].cond = z < g->nr_conv_zones ? ZDEV_COND_NOT_WP : ZDEV_COND_EMPTY;
		rows[i].cap = z < g->nr_conv_zones ? g->zone_size : g->zone_capacity;
	}
	/* Meta zones overlapping the range. */
	uint32_t lo = ZF_MAX(first, mf), hi = ZF_MIN(first + n, mf + mc);
	if (lo < hi) {
		struct zdev_zone *zz = calloc(hi - lo, sizeof(*zz));
		if (!zz)
			return -ENOMEM;
		int got = zdev_report_zones(fs->dev, lo, hi - lo, zz);
		if (got < 0) {
			free(zz);
			return got;
		}
		for (uint32_t z = lo; z < lo + (uint32_t)got; z++) {
			struct zrow *r = &rows[z - first];
			const struct zdev_zone *d = &zz[z - lo];
			r->kind = ZK_META;
			r->cond = d->cond;
			r->cap = d->capacity;
			r->wp = d->wp - d->start;
			r->valid = r->wp;
		}
		free(zz);
	}
	lo = ZF_MAX(first, df);
	hi = ZF_MIN(first + n, df + dc);
	for (uint32_t z = lo; z < hi; z++) {
		struct zalloc_zone_info zi;
		struct zrow *r = &rows[z - first];
		if (zalloc_zone_info(fs->za, z, &zi))
			continue;
		if (zi.lent) {	/* the metadata log's now: as the device has it */
			struct zdev_zone d;
			if (zdev_report_zones(fs->dev, z, 1, &d) == 1) {
				r->kind = ZK_META;
				r->cond = d.cond;
				r->cap = d.capacity;
				r->wp = d.wp - d.start;
				r->valid = r->wp;
			}
			continue;
		}
		r->kind = ZK_DATA;
		r->cond = zi.cond;
		r->cls = zi.cls;
		r->leased = zi.leased;
		r->cap = zi.capacity;
		r->wp = zi.wp - (uint64_t)z * g->zone_size;
		r->valid = zi.valid_bytes;
		r->resets = zi.resets;
		r->have_resets = true;
	}
	return 0;
}

/* files[i] = number of inodes with an extent in zone first + i.  Walks
 * every extent map under fs->lock: O(extents). */
static int zone_files(struct fs *fs, uint32_t first, uint32_t n, uint32_t *files)
{
	const uint64_t zsz = zdev_geometry(fs->dev)->zone_size;
	uint64_t *last = calloc(n ? n : 1, sizeof(*last));

	if (!last)
		return -ENOMEM;
	memset(files, 0, (size_t)n * sizeof(*files));
	pthread_mutex_lock(&fs->lock);
	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in)) {
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, 0, &c); e;
		     e = extmap_next(&in->map, &c)) {
			uint64_t z0 = e->dev / zsz, z1 = (e->dev + e->len - 1) / zsz;
			for (uint64_t z = z0; z <= z1; z++) {
				if (z < first || z >= (uint64_t)first + n)
					continue;
				if (last[z - first] != in->ino) {
					last[z - first] = in->ino;
					files[z - first]++;
				}
			}
		}
	}
	pthread_mutex_unlock(&fs->lock);
	free(last);
	return 0;
}

int fs_stats_render_zones(struct fs *fs, uint32_t first, struct fs_text *t)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	if (first >= g->nr_zones)
		return -ENODATA;
	/* A page holds fewer than FS_STATS_MAX_TEXT / 70 lines: look at no
	 * more zones than fit. */
	uint32_t n = ZF_MIN(g->nr_zones - first, FS_STATS_MAX_TEXT / 70 + 1);
	struct zrow *rows = calloc(n, sizeof(*rows));
	uint32_t *files = calloc(n, sizeof(*files));
	int ret = -ENOMEM;

	if (!rows || !files)
		goto out;
	ret = zone_rows(fs, first, n, rows);
	if (!ret)
		ret = zone_files(fs, first, n, files);
	if (ret)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		const struct zrow *r = &rows[i];
		if (t->n > FS_STATS_MAX_TEXT) {
			fs_text_printf(t, "# next=%u\n", first + i);
			break;
		}
		fs_text_printf(t, "zone=%u class=%s cond=%s wp=%llu cap=%llu valid=%llu files=%u",
			       first + i, zone_class_name(r), zdev_cond_name(r->cond),
			       (unsigned long long)r->wp, (unsigned long long)r->cap,
			       (unsigned long long)r->valid, files[i]);
		if (r->have_resets)
			fs_text_printf(t, " resets=%llu", (unsigned long long)r->resets);
		else
			fs_text_printf(t, " resets=-");
		fs_text_printf(t, " leased=%d\n", r->leased ? 1 : 0);
		if (i + 1 == n && first + n < g->nr_zones)
			fs_text_printf(t, "# next=%u\n", first + n);
	}
	ret = t->oom ? -ENOMEM : 0;
out:
	free(rows);
	free(files);
	return ret;
}

/* ---- user.zonefuse.stats ------------------------------------------------------ */

#define KV(key, v) fs_text_printf(t, "%s=%llu\n", key, (unsigned long long)(v))

/* key=<string> with control characters replaced, so a value is one line. */
static void kv_str(struct fs_text *t, const char *key, const char *v)
{
	fs_text_printf(t, "%s=", key);
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		fs_text_printf(t, "%c", *p < 0x20 || *p == 0x7f ? '?' : *p);
	fs_text_printf(t, "\n");
}

/* What the zone table says, summed: metadata (log) zones by condition,
 * data zones that are not open, and each class's zones and valid bytes. */
struct zone_counts {
	uint32_t meta_open, meta_active, meta_empty, meta_full;
	uint32_t data_full, data_closed, data_bad;
	uint32_t cls_zones[LIFETIME_NR];
	uint64_t cls_valid[LIFETIME_NR];
	uint64_t meta_written;
};

static int count_zones(struct fs *fs, struct zone_counts *c)
{
	const struct mlog_sb *sb = &fs->sb;
	uint32_t nrows = sb->meta_count + sb->data_count;
	struct zrow *rows = calloc(nrows ? nrows : 1, sizeof(*rows));

	memset(c, 0, sizeof(*c));
	if (!rows)
		return -ENOMEM;
	int ret = zone_rows(fs, sb->meta_first, nrows, rows);
	for (uint32_t i = 0; !ret && i < nrows; i++) {
		const struct zrow *r = &rows[i];
		if (r->kind == ZK_META) {
			c->meta_open += zdev_cond_open(r->cond);
			c->meta_active += zdev_cond_active(r->cond);
			c->meta_empty += r->cond == ZDEV_COND_EMPTY;
			c->meta_full += r->cond == ZDEV_COND_FULL;
			c->meta_written += r->wp;
		} else if (r->kind == ZK_DATA) {
			c->data_full += r->cond == ZDEV_COND_FULL;
			c->data_closed += r->cond == ZDEV_COND_CLOSED;
			c->data_bad += r->cond == ZDEV_COND_READONLY || r->cond == ZDEV_COND_OFFLINE;
			if ((r->cond != ZDEV_COND_EMPTY || r->leased) && r->cls < LIFETIME_NR) {
				c->cls_zones[r->cls]++;
				c->cls_valid[r->cls] += r->valid;
			}
		}
	}
	free(rows);
	return ret;
}

static void render_device(struct fs *fs, struct fs_text *t, const struct zalloc_stats *zs)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	const struct mlog_sb *sb = &fs->sb;

	KV("format", 1);
	kv_str(t, "backend", zdev_backend_name(fs->dev));
	kv_str(t, "device", zdev_path(fs->dev));
	char label[sizeof(sb->label) + 1];
	memcpy(label, sb->label, sizeof(sb->label));
	label[sizeof(sb->label)] = 0;
	kv_str(t, "label", label);
	fs_text_printf(t, "read_only=%d\n", fs->read_only ? 1 : 0);
	/* geometry */
	KV("block_size", fs->bs);
	KV("device_block_size", g->block_size);
	KV("device_bytes", g->size);
	KV("zone_size", g->zone_size);
	KV("zone_capacity", g->zone_capacity);
	KV("zones", g->nr_zones);
	KV("conv_zones", g->nr_conv_zones);
	KV("meta_first_zone", sb->meta_first);
	KV("meta_zones", sb->meta_count);
	KV("data_first_zone", sb->data_first);
	KV("data_zones", sb->data_count);
	/* limits */
	KV("max_open_zones", g->max_open);
	KV("max_active_zones", g->max_active);
	KV("max_active_data_zones", zs->max_active_data);
}

static void render_zones(struct fs *fs, struct fs_text *t, const struct zalloc_stats *zs,
			 const struct zone_counts *zc)
{
	uint64_t used = zs->capacity_bytes > zs->free_bytes ? zs->capacity_bytes - zs->free_bytes : 0;

	/* zones now */
	KV("open_zones", zs->open_zones + zc->meta_open);
	KV("active_zones", zs->active_zones + zc->meta_active);
	KV("free_zones", zs->free_zones);
	KV("data_open_zones", zs->open_zones);
	KV("data_active_zones", zs->active_zones);
	KV("data_closed_zones", zc->data_closed);
	KV("data_full_zones", zc->data_full);
	KV("data_offline_zones", zc->data_bad);
	KV("meta_open_zones", zc->meta_open);
	KV("meta_active_zones", zc->meta_active);
	KV("meta_empty_zones", zc->meta_empty);
	KV("meta_full_zones", zc->meta_full);
	KV("pending_reset_zones", zs->pending_resets);
	KV("zalloc_waiters", zalloc_waiters(fs->za));
	/* space (data zones) */
	KV("capacity_bytes", zs->capacity_bytes);
	KV("used_bytes", used);
	KV("free_bytes", zs->free_bytes);
	KV("valid_bytes", zs->valid_bytes);
	KV("reclaimable_bytes", zs->reclaimable_bytes);
	KV("finished_tail_bytes", zs->finished_tail_bytes);
	KV("meta_used_bytes", zc->meta_written);
}

static void render_written(struct fs_text *t, const struct fs_stats *fst,
			   const struct zalloc_stats *zs, const struct zone_counts *zc)
{
	uint64_t gc_bytes = fst->gc_bytes_written;
	uint64_t dev_bytes = fst->data_bytes_written + fst->meta_bytes_written + gc_bytes;

	/* bytes written since mount */
	KV("user_bytes_written", fst->user_bytes_written);
	KV("zero_copy_write_bytes", fst->zero_copy_write_bytes);
	KV("zero_copy_read_bytes", fst->zero_copy_read_bytes);
	KV("data_bytes_written", fst->data_bytes_written);
	KV("write_behind_dropped_bytes", fst->write_behind_dropped_bytes);
	KV("meta_bytes_written", fst->meta_bytes_written);
	KV("gc_bytes_written", gc_bytes);
	KV("device_bytes_written", dev_bytes);
	if (fst->user_bytes_written)
		fs_text_printf(t, "write_amplification=%.3f\n",
			       (double)dev_bytes / (double)fst->user_bytes_written);
	else
		fs_text_printf(t, "write_amplification=0\n");
	for (unsigned int c = 0; c < LIFETIME_NR; c++) {
		char k[64];
		snprintf(k, sizeof(k), "class_%s_bytes_written",
			 lifetime_class_name((enum lifetime_class)c));
		KV(k, zs->class_bytes_written[c]);
		snprintf(k, sizeof(k), "class_%s_zones", lifetime_class_name((enum lifetime_class)c));
		KV(k, zc->cls_zones[c]);
		snprintf(k, sizeof(k), "class_%s_valid_bytes",
			 lifetime_class_name((enum lifetime_class)c));
		KV(k, zc->cls_valid[c]);
		snprintf(k, sizeof(k), "class_%s_life_bytes",
			 lifetime_class_name((enum lifetime_class)c));
		KV(k, zs->class_life_bytes[c]);
	}
}

static void render_counters(struct fs *fs, struct fs_text *t, const struct fs_stats *fst,
			    const struct zalloc_stats *zs, const struct mlog_stats *ms)
{
	struct zdev_stats ds;

	zdev_get_stats(fs->dev, &ds);
	/* the device layer's own counters (every request since open) */
	KV("zdev_bytes_written", ds.bytes_written);
	KV("zdev_bytes_read", ds.bytes_read);
	KV("zdev_writes", ds.writes);
	KV("zdev_reads", ds.reads);
	KV("zdev_flushes", ds.flushes);
	/* zone management since mount */
	KV("zone_resets", ds.resets);
	KV("zone_finishes", ds.finishes);
	KV("data_zone_resets", zs->zone_resets);
	KV("data_zone_finishes", zs->zone_finishes);
	KV("meta_zone_resets", ms->zone_resets);
	/* garbage collection */
	KV("gc_runs", fst->gc_runs);
	KV("gc_zones_reclaimed", fst->gc_zones_freed);
	KV("gc_shared_moves", fst->gc_shared_moves);
	/* LSM level inference: tables, and the guesses a later level undid */
	KV("lifetime_tables", fst->lifetime_tables);
	KV("lifetime_tables_corrected", fst->lifetime_tables_corrected);
	KV("lifetime_tables_died", fst->lifetime_tables_died);
	KV("lifetime_table_bytes_died", fst->lifetime_table_bytes_died);
	KV("lifetime_tables_misguessed", fst->lifetime_tables_misguessed);
	KV("lifetime_misguessed_bytes", fst->lifetime_misguessed_bytes);
	/* shared extents (copy_file_range) */
	KV("shared_bytes", fst->shared_bytes);
	KV("shared_saved_bytes", fst->shared_saved_bytes);
	KV("copies", fst->copies);
	KV("copy_shared_bytes", fst->copy_shared_bytes);
	KV("copy_written_bytes", fst->copy_written_bytes);
	/* memory */
	KV("buffer_bytes", fst->buffer_bytes);
	KV("buffer_limit_bytes", fst->buffer_limit);
	KV("prefetch_bytes", fst->prefetch_bytes);
	KV("prefetch_limit_bytes", fs->pf.window ? fs->opts.prefetch_limit : 0);
	KV("prefetch_spare_bytes", fst->prefetch_spare_bytes);
	KV("prefetch_hits", fst->prefetch_hits);
	KV("prefetch_fills", fst->prefetch_fills);
	KV("prefetch_fill_errors", fst->prefetch_fill_errors);
	/* metadata */
	KV("inodes", fst->inodes);
	KV("commits", fst->commits);
	KV("snapshots", fst->snapshots);
	KV("log_epoch", ms->epoch);
	KV("log_records", ms->records);
	KV("log_zones_in_chain", ms->zones_in_chain);
	KV("log_zones_borrowed", ms->zones_borrowed);
	KV("log_zone_borrows", ms->zone_borrows);
	KV("log_reserve_zones", ms->reserve_zones);
	KV("log_state_full", ms->state_full);
	KV("log_errors", fs->meta_errors);
	/* mount options in effect */
	KV("opt_stripe_width", fs->opts.stripe_width);
	KV("opt_stripe_unit", fs->opts.stripe_unit);
	KV("opt_commit_interval_ms", fs->opts.commit_interval_ms);
	KV("opt_write_behind_ms", fs->opts.write_behind_ms);
	KV("opt_reorder_chunks", fs->opts.reorder_chunks);
	KV("opt_buffer_bytes", fs->opts.buffer_bytes);
	KV("prefetch_window_bytes", fs->pf.window);
	/* request latency (FUSE requests answered by this daemon) */
	KV("fuse_uring_requests", atomic_load_explicit(&uring_requests, memory_order_relaxed));
	struct fs_poll_counts pc;
	fs_lat_get_poll(&pc);
	KV("fuse_poll_hits", pc.hits);
	KV("fuse_poll_misses", pc.misses);
	KV("fuse_poll_us", pc.ns / 1000);
	KV("fuse_served_inline", atomic_load_explicit(&served[FS_SERVED_INLINE], memory_order_relaxed));
	KV("fuse_served_until_block",
	   atomic_load_explicit(&served[FS_SERVED_UNTIL_BLOCK], memory_order_relaxed));
	KV("fuse_handed_off", atomic_load_explicit(&served[FS_SERVED_HANDED_OFF], memory_order_relaxed));
	for (unsigned int op = 0; op < FS_LAT_NR; op++) {
		struct fs_lat_summary s;
		const char *nm = fs_lat_op_name(op);
		fs_lat_get(op, &s);
		fs_text_printf(t, "lat_%s_count=%llu\n", nm, (unsigned long long)s.count);
		fs_text_printf(t, "lat_%s_total_us=%llu\n", nm,
			       (unsigned long long)(s.sum_ns / 1000));
		fs_text_printf(t, "lat_%s_avg_us=%.1f\n", nm,
			       s.count ? (double)s.sum_ns / (double)s.count / 1e3 : 0.0);
		fs_text_printf(t, "lat_%s_p50_us=%.1f\n", nm, (double)s.p50_ns / 1e3);
		fs_text_printf(t, "lat_%s_p99_us=%.1f\n", nm, (double)s.p99_ns / 1e3);
		fs_text_printf(t, "lat_%s_max_us=%.1f\n", nm, (double)s.max_ns / 1e3);
	}
}

int fs_stats_render(struct fs *fs, struct fs_text *t)
{
	struct fs_stats fst;
	struct zalloc_stats zs;
	struct mlog_stats ms;
	struct zone_counts zc;
	int ret = count_zones(fs, &zc);

	if (ret)
		return ret;
	fs_get_stats(fs, &fst);
	zalloc_get_stats(fs->za, &zs);
	memset(&ms, 0, sizeof(ms));
	if (fs->mlog)
		mlog_get_stats(fs->mlog, &ms);
	render_device(fs, t, &zs);
	render_zones(fs, t, &zs, &zc);
	render_written(t, &fst, &zs, &zc);
	render_counters(fs, t, &fst, &zs, &ms);
	return t->oom ? -ENOMEM : 0;
}

/* ---- user.zonefuse.file ----------------------------------------------------- */

int fs_stats_render_file(struct fs *fs, uint64_t ino, struct fs_text *t)
{
	uint64_t size, mapped, shared, extents;

	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	if (!in || !S_ISREG(in->mode)) {
		pthread_mutex_unlock(&fs->lock);
		return in ? -ENODATA : -ENOENT;
	}
	size = in->size;
	extents = extmap_count(&in->map);
	mapped = extmap_bytes(&in->map);
	shared = fs_share_file_bytes(fs, in);
	pthread_mutex_unlock(&fs->lock);
	KV("size", size);
	KV("extents", extents);
	KV("mapped_bytes", mapped);
	KV("shared_bytes", shared);
	KV("own_bytes", mapped - shared);
	return t->oom ? -ENOMEM : 0;
}
