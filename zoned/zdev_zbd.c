/* zdev_zbd — zdev backend for real zoned block devices (ZNS SSDs, SMR
 * disks, null_blk, QEMU NVMe ZNS).
 *
 * Device access:
 *   - open and device information through libzbd (zbd_open with
 *     O_RDWR|O_DIRECT, plus O_EXCL for an exclusive open);
 *   - zone management through libzbd (zbd_zones_operation / zbd_reset_zones);
 *     it returns -1 with errno set: converted to -errno once, here;
 *   - zone reports through the kernel's BLKREPORTZONE ioctl, the interface
 *     libzbd wraps (its zbd_report_zones has returned an uninitialised
 *     value on success in some upstream revisions, so we do not rely on it);
 *   - synchronous data I/O with pread/pwrite on the O_DIRECT descriptor;
 *     zdev_io_batch through io_uring (a small pool of rings, each guarded by
 *     a mutex), falling back to synchronous I/O if io_uring is unavailable.
 *
 * Accepted devices: host-managed or host-aware zoned block devices with a
 * power-of-two zone size, one zone capacity shared by all sequential zones
 * (non-zero, block aligned), and conventional zones (if any) before all
 * sequential zones.  A smaller last ("runt") zone is left out of the
 * geometry.  Anything else is refused with a message saying why.
 *
 * Semantics kept identical to the emulator (zdev.h):
 *   - the device enforces the zone rules and reports them with the errno
 *     the kernel maps from the device status (-EIO, -ETOOMANYREFS,
 *     -EOVERFLOW); zone management on a conventional zone is refused here
 *     with -EINVAL, and so is (with -EIO) a write crossing the zone
 *     capacity, which the kernel would split at the zone boundary and let
 *     through when the next zone's wp is at its start (see docs/qemu.md);
 *   - a FULL zone reports wp = start + capacity (the kernel reports
 *     start + len for NVMe);
 *   - reads may cross zones and read zeros at or beyond a zone's wp: reads
 *     are split at zone boundaries and only the part below the write
 *     pointer is read from the device (devices may refuse reads that cross
 *     a zone or go past the capacity, e.g. QEMU without cross_read).  The
 *     wp comes from a per-zone cache that this handle updates on every
 *     write and zone operation; a read reaching past the cached wp
 *     refreshes it with a one-zone report first.  Another process moving
 *     the wp backwards (reset) under us is not noticed until then.
 *   - within one zdev_io_batch, requests to the same zone that include a
 *     write are linked (IOSQE_IO_LINK) so they execute in array order; a
 *     request cancelled because an earlier one in its chain failed is
 *     retried synchronously, so its result is what the device says.
 * zdev_flush = fdatasync (the device's volatile write cache flush).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <libzbd/zbd.h>
#include <linux/blkzoned.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "zoned/zdev.h"
#include "zoned/zdev_backend.h"

#define SECTOR_SHIFT_ 9
#define ZBD_NR_RINGS 4
#define ZBD_RING_DEPTH 64
#define ZBD_REPORT_CHUNK 4096
#define ZBD_RING_MAX_LEN (1u << 30)	/* SQE length and CQE result are 32-bit */

struct zring {
	pthread_mutex_t lock;
	int state;		/* 0 not set up, 1 ready, -errno failed */
	struct io_uring ring;
};

struct zbd {
	int fd;
	struct zbd_info info;
	uint32_t nr_zones, nr_conv;
	uint64_t zone_size, capacity;
	_Atomic uint64_t *wp;	/* per zone: cached wp, bytes from zone start */
	struct zring rings[ZBD_NR_RINGS];
	atomic_bool warned_no_uring;
};

static const struct zdev_ops zbd_ops;

static inline struct zbd *Z(struct zdev *dev)
{
	return dev->priv;
}

/* ---- zone reports --------------------------------------------------------- */

static void convert_zone(const struct blk_zone *b, bool has_cap, struct zdev_zone *o)
{
	o->start = b->start << SECTOR_SHIFT_;
	o->len = b->len << SECTOR_SHIFT_;
	o->capacity = has_cap ? b->capacity << SECTOR_SHIFT_ : o->len;
	o->type = b->type == BLK_ZONE_TYPE_CONVENTIONAL ? ZDEV_ZONE_CONV : ZDEV_ZONE_SEQ;
	o->cond = b->cond;
	if (o->type == ZDEV_ZONE_CONV || o->cond == ZDEV_COND_FULL)
		o->wp = o->start + o->capacity;
	else
		o->wp = ZF_MIN(ZF_MAX(b->wp << SECTOR_SHIFT_, o->start),
			       o->start + o->capacity);
}

/* Report zones [first, first+count) of the device (no geometry checks). */
static int report_raw(int fd, uint64_t zone_size, uint32_t first, uint32_t count,
		      struct zdev_zone *out)
{
	struct blk_zone_report *rep;
	uint32_t chunk = ZF_MIN(count, (uint32_t)ZBD_REPORT_CHUNK);
	uint32_t done = 0;
	int ret = 0;

	rep = malloc(sizeof(*rep) + (size_t)chunk * sizeof(struct blk_zone));
	if (!rep)
		return -ENOMEM;
	while (done < count) {
		uint32_t want = ZF_MIN(chunk, count - done);

		memset(rep, 0, sizeof(*rep));
		rep->sector = ((uint64_t)(first + done) * zone_size) >> SECTOR_SHIFT_;
		rep->nr_zones = want;
		if (ioctl(fd, BLKREPORTZONE, rep) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		if (rep->nr_zones == 0)
			break;
		for (uint32_t i = 0; i < rep->nr_zones && done < count; i++)
			convert_zone(&rep->zones[i], rep->flags & BLK_ZONE_REP_CAPACITY,
				     &out[done++]);
	}
	free(rep);
	return ret ? ret : (int)done;
}

static void cache_wp(struct zbd *b, const struct zdev_zone *z, uint32_t idx)
{
	atomic_store(&b->wp[idx], z->wp - z->start);
}

static int zbd_report_zones_op(struct zdev *dev, uint32_t first, uint32_t count,
			       struct zdev_zone *zones)
{
	struct zbd *b = Z(dev);
	int n = report_raw(b->fd, b->zone_size, first, count, zones);

	for (int i = 0; i < n; i++)
		cache_wp(b, &zones[i], first + (uint32_t)i);
	return n;
}

/* Refresh the cached wp of one zone. */
static int refresh_wp(struct zbd *b, uint32_t z)
{
	struct zdev_zone zn;
	int n = report_raw(b->fd, b->zone_size, z, 1, &zn);

	if (n < 0)
		return n;
	if (n != 1)
		return -EIO;
	cache_wp(b, &zn, z);
	return 0;
}

/* ---- zone management ------------------------------------------------------ */

static int zbd_zone_op(struct zdev *dev, enum zdev_zone_op op, uint32_t z)
{
	static const enum zbd_zone_op map[] = {
		[ZDEV_ZOP_RESET] = ZBD_OP_RESET,
		[ZDEV_ZOP_OPEN] = ZBD_OP_OPEN,
		[ZDEV_ZOP_CLOSE] = ZBD_OP_CLOSE,
		[ZDEV_ZOP_FINISH] = ZBD_OP_FINISH,
	};
	struct zbd *b = Z(dev);

	if (z < b->nr_conv)
		return -EINVAL;
	errno = 0;
	if (zbd_zones_operation(b->fd, map[op], (off_t)((uint64_t)z * b->zone_size),
				(off_t)b->zone_size) != 0)
		return errno ? -errno : -EIO;
	if (op == ZDEV_ZOP_RESET)
		atomic_store(&b->wp[z], 0);
	else if (op == ZDEV_ZOP_FINISH)
		atomic_store(&b->wp[z], b->capacity);
	return 0;
}

static int zbd_reset_all_op(struct zdev *dev)
{
	struct zbd *b = Z(dev);
	uint64_t from = (uint64_t)b->nr_conv * b->zone_size;

	if (b->nr_conv == b->nr_zones)
		return 0;
	errno = 0;
	if (zbd_reset_zones(b->fd, (off_t)from,
			    (off_t)((uint64_t)b->nr_zones * b->zone_size - from)) != 0)
		return errno ? -errno : -EIO;
	for (uint32_t z = b->nr_conv; z < b->nr_zones; z++)
		atomic_store(&b->wp[z], 0);
	return 0;
}

/* ---- data I/O ------------------------------------------------------------ */

static int pio_full(int fd, bool write, void *buf, size_t len, uint64_t off)
{
	return zdev_pio_full(fd, write, buf, len, off, false);
}

static void note_write(struct zbd *b, uint64_t off, size_t len)
{
	uint32_t z = (uint32_t)(off / b->zone_size);
	uint64_t end = off + len - (uint64_t)z * b->zone_size;

	if (z >= b->nr_conv && end > atomic_load(&b->wp[z]))
		atomic_store(&b->wp[z], end);
}

/* The zdev rule "a write must not cross the zone capacity" (and "a write to
 * a conventional zone must not run into a sequential zone"), checked here:
 * the kernel splits writes at zone boundaries, so on a device whose
 * capacity equals its zone size a write running past the end of a zone
 * into the next one succeeds when it happens to start that zone at its wp.
 * The emulator refuses it with -EIO, and so do we. */
static bool write_crosses(const struct zbd *b, uint64_t off, size_t len)
{
	uint32_t z = (uint32_t)(off / b->zone_size);
	uint64_t rel = off - (uint64_t)z * b->zone_size;

	if (z < b->nr_conv)
		return (off + len - 1) / b->zone_size >= b->nr_conv;
	return rel + len > b->capacity;
}

static ssize_t zbd_write_op(struct zdev *dev, uint64_t off, const void *buf, size_t len)
{
	struct zbd *b = Z(dev);
	int ret;

	if (write_crosses(b, off, len))
		return -EIO;
	ret = pio_full(b->fd, true, (void *)buf, len, off);
	if (ret)
		return ret;
	note_write(b, off, len);
	return (ssize_t)len;
}

/* Is [off, off+len) one zone and below its cached wp (a plain device read)? */
static bool read_is_simple(struct zbd *b, uint64_t off, size_t len)
{
	uint32_t z = (uint32_t)(off / b->zone_size);
	uint64_t rel = off - (uint64_t)z * b->zone_size;

	if (rel + len > b->zone_size)
		return false;
	if (z < b->nr_conv)
		return true;
	return rel + len <= atomic_load(&b->wp[z]);
}

static ssize_t zbd_read_op(struct zdev *dev, uint64_t off, void *buf, size_t len)
{
	struct zbd *b = Z(dev);
	uint64_t pos = off, end = off + len;
	char *p = buf;
	int ret;

	if (read_is_simple(b, off, len)) {
		ret = pio_full(b->fd, false, buf, len, off);
		return ret ? ret : (ssize_t)len;
	}
	while (pos < end) {
		uint32_t z = (uint32_t)(pos / b->zone_size);
		uint64_t zs = (uint64_t)z * b->zone_size;
		uint64_t n = ZF_MIN(end - pos, zs + b->zone_size - pos);
		uint64_t valid = n;

		if (z >= b->nr_conv) {
			uint64_t wp = zs + atomic_load(&b->wp[z]);

			if (pos + n > wp) {
				ret = refresh_wp(b, z);
				if (ret)
					return ret;
				wp = zs + atomic_load(&b->wp[z]);
			}
			valid = wp > pos ? ZF_MIN(n, wp - pos) : 0;
		}
		if (valid) {
			ret = pio_full(b->fd, false, p, valid, pos);
			if (ret)
				return ret;
		}
		if (valid < n)
			memset(p + valid, 0, n - valid);
		p += n;
		pos += n;
	}
	return (ssize_t)len;
}

static ssize_t sync_req(struct zdev *dev, struct zdev_req *r)
{
	if (r->op == ZDEV_OP_WRITE)
		return zbd_write_op(dev, r->offset, r->buf, r->len);
	return zbd_read_op(dev, r->offset, r->buf, r->len);
}

static struct zring *ring_get(struct zbd *b)
{
	struct zring *zr = NULL;

	for (int i = 0; i < ZBD_NR_RINGS && !zr; i++)
		if (pthread_mutex_trylock(&b->rings[i].lock) == 0)
			zr = &b->rings[i];
	if (!zr) {
		zr = &b->rings[(uintptr_t)pthread_self() % ZBD_NR_RINGS];
		pthread_mutex_lock(&zr->lock);
	}
	if (zr->state == 0) {
		int ret = io_uring_queue_init(ZBD_RING_DEPTH, &zr->ring, 0);

		zr->state = ret < 0 ? ret : 1;
	}
	if (zr->state < 0) {
		if (!atomic_exchange(&b->warned_no_uring, true))
			zf_warn("zdev: io_uring unavailable (%s); batches run synchronously",
				strerror(-zr->state));
		pthread_mutex_unlock(&zr->lock);
		return NULL;
	}
	return zr;
}

#define NOT_DONE ((ssize_t)INT64_MIN)

/* Submit reqs[0..n) (already ordered so that linked chains are contiguous;
 * link[i] says request i is linked to i+1), wait for everything submitted
 * and set the results.  Requests that could not be submitted keep
 * result == NOT_DONE; then the ring is torn down (its SQ still holds them)
 * and -errno is returned. */
static int ring_run(struct zbd *b, struct zring *zr, struct zdev_req **reqs,
		    const bool *link, unsigned int n)
{
	struct io_uring *ring = &zr->ring;
	unsigned int submitted = 0, got = 0;
	int err = 0, ret;

	for (unsigned int i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		struct zdev_req *r = reqs[i];

		r->result = NOT_DONE;
		if (!sqe) {
			err = -EBUSY;	/* cannot happen: n <= depth, SQ drained */
			break;
		}
		if (r->op == ZDEV_OP_WRITE)
			io_uring_prep_write(sqe, b->fd, r->buf, (unsigned)r->len, r->offset);
		else
			io_uring_prep_read(sqe, b->fd, r->buf, (unsigned)r->len, r->offset);
		if (link[i] && i + 1 < n)
			sqe->flags |= IOSQE_IO_LINK;
		io_uring_sqe_set_data(sqe, r);
	}
	while (!err || got < submitted) {
		struct io_uring_cqe *cqe;
		struct zdev_req *r;

		if (!err && submitted < n) {
			ret = io_uring_submit(ring);
			if (ret > 0)
				submitted += (unsigned int)ret;
			else if (got == submitted)	/* nothing in flight to wait for */
				err = ret < 0 ? ret : -EIO;
		}
		if (got == submitted) {
			if (err || submitted == n)
				break;
			continue;
		}
		ret = io_uring_wait_cqe(ring, &cqe);
		if (ret == -EINTR || ret == -EAGAIN)
			continue;
		if (ret < 0) {
			/* cannot reap: do not return while the kernel may still
			 * use the buffers; should never happen */
			zf_err("zdev: io_uring_wait_cqe: %s", strerror(-ret));
			usleep(1000);
			continue;
		}
		r = io_uring_cqe_get_data(cqe);
		r->result = cqe->res;
		io_uring_cqe_seen(ring, cqe);
		got++;
	}
	if (err) {
		io_uring_queue_exit(ring);
		zr->state = 0;	/* set up again on next use */
	}
	return err;
}

/* Finish the requests of one ring round: retries for cancelled links and
 * short transfers, wp cache updates. */
static void round_finish(struct zdev *dev, struct zdev_req **reqs, unsigned int n)
{
	struct zbd *b = Z(dev);

	for (unsigned int i = 0; i < n; i++) {
		struct zdev_req *r = reqs[i];

		if (r->result == NOT_DONE || r->result == -ECANCELED ||
		    r->result == -EAGAIN ||
		    (r->result >= 0 && (size_t)r->result < r->len)) {
			/* cancelled by a failed predecessor in its chain, or
			 * short: redo the whole request synchronously (a short
			 * write leaves wp in the middle: finish the rest) */
			if (r->result > 0 && r->op == ZDEV_OP_WRITE) {
				size_t d = (size_t)r->result;
				int ret = pio_full(b->fd, true, (char *)r->buf + d,
						   r->len - d, r->offset + d);
				r->result = ret ? ret : (ssize_t)r->len;
				if (!ret)
					note_write(b, r->offset, r->len);
			} else {
				r->result = sync_req(dev, r);
			}
			continue;
		}
		if (r->result > 0 && r->op == ZDEV_OP_WRITE)
			note_write(b, r->offset, r->len);
	}
}

/* Run simple requests reqs[0..n) through the ring, same-zone groups that
 * contain a write linked in array order. */
static int ring_batch(struct zdev *dev, struct zring *zr, struct zdev_req **reqs,
		      unsigned int n)
{
	struct zbd *b = Z(dev);
	struct zdev_req **ord = malloc(n * sizeof(*ord));
	bool *link = calloc(n, sizeof(*link));
	bool *used = calloc(n, sizeof(*used));
	unsigned int k = 0;
	int ret = 0;

	if (!ord || !link || !used) {
		ret = -ENOMEM;
		goto out;
	}
	/* stable grouping by zone */
	for (unsigned int i = 0; i < n; i++) {
		uint32_t z;
		unsigned int first = k;
		bool has_write = false;

		if (used[i])
			continue;
		z = (uint32_t)(reqs[i]->offset / b->zone_size);
		for (unsigned int j = i; j < n; j++) {
			if (used[j] || (uint32_t)(reqs[j]->offset / b->zone_size) != z)
				continue;
			used[j] = true;
			has_write |= reqs[j]->op == ZDEV_OP_WRITE;
			ord[k++] = reqs[j];
		}
		if (has_write)
			for (unsigned int j = first; j + 1 < k; j++)
				link[j] = true;
	}
	for (unsigned int s = 0; s < n; s += ZBD_RING_DEPTH) {
		unsigned int m = ZF_MIN(n - s, (unsigned int)ZBD_RING_DEPTH);

		if (zr->state == 1) {
			ret = ring_run(b, zr, ord + s, link + s, m);
			if (ret)
				zf_warn("zdev: io_uring submission failed (%s); "
					"finishing the batch synchronously", strerror(-ret));
		} else {
			for (unsigned int i = 0; i < m; i++)
				ord[s + i]->result = NOT_DONE;
		}
		/* NOT_DONE requests are run synchronously here */
		round_finish(dev, ord + s, m);
	}
	ret = 0;
out:
	free(ord);
	free(link);
	free(used);
	return ret;
}

static int zbd_io_batch_op(struct zdev *dev, struct zdev_req **reqs, unsigned int nr)
{
	struct zbd *b = Z(dev);
	struct zring *zr = ring_get(b);
	unsigned int i = 0;

	if (!zr) {
		for (i = 0; i < nr; i++)
			reqs[i]->result = sync_req(dev, reqs[i]);
		return 0;
	}
	/* runs of simple requests go through the ring; a read crossing zones
	 * or reaching past the cached wp, a write crossing the zone capacity
	 * (refused), or a request over 1 GiB, runs synchronously in its place */
	while (i < nr) {
		unsigned int j = i;

		while (j < nr && reqs[j]->len <= ZBD_RING_MAX_LEN &&
		       (reqs[j]->op == ZDEV_OP_WRITE
				? !write_crosses(b, reqs[j]->offset, reqs[j]->len)
				: read_is_simple(b, reqs[j]->offset, reqs[j]->len)))
			j++;
		if (j > i && ring_batch(dev, zr, reqs + i, j - i) < 0)
			for (unsigned int k = i; k < j; k++)	/* out of memory */
				reqs[k]->result = sync_req(dev, reqs[k]);
		if (j < nr)
			reqs[j]->result = sync_req(dev, reqs[j]);
		i = j + 1;
	}
	pthread_mutex_unlock(&zr->lock);
	return 0;
}

static int zbd_flush_op(struct zdev *dev)
{
	if (fdatasync(Z(dev)->fd) < 0)
		return -errno;
	return 0;
}

/* ---- open / close ---------------------------------------------------------- */

static void zbd_free(struct zbd *b)
{
	if (!b)
		return;
	for (int i = 0; i < ZBD_NR_RINGS; i++) {
		if (b->rings[i].state == 1)
			io_uring_queue_exit(&b->rings[i].ring);
		pthread_mutex_destroy(&b->rings[i].lock);
	}
	if (b->fd >= 0)
		zbd_close(b->fd);
	free(b->wp);
	free(b);
}

static void zbd_close_op(struct zdev *dev)
{
	zbd_free(Z(dev));
	dev->priv = NULL;
}

/* Scan the zone layout; fill b->nr_zones, nr_conv, capacity and wp cache. */
static int scan_zones(struct zbd *b, const char *path)
{
	uint32_t n = b->info.nr_zones;
	struct zdev_zone *zs = calloc(n, sizeof(*zs));
	uint64_t dev_bytes = b->info.nr_sectors << SECTOR_SHIFT_;
	uint32_t bs = b->info.lblock_size;
	int ret;

	if (!zs)
		return -ENOMEM;
	ret = report_raw(b->fd, b->zone_size, 0, n, zs);
	if (ret < 0) {
		zf_err("zdev: %s: zone report failed: %s", path, strerror(-ret));
		goto out;
	}
	n = (uint32_t)ret;
	/* leave out a smaller last zone */
	while (n && (zs[n - 1].len != b->zone_size ||
		     zs[n - 1].start + b->zone_size > dev_bytes))
		n--;
	if (n == 0) {
		zf_err("zdev: %s: no usable zones", path);
		ret = -ENOTSUP;
		goto out;
	}
	if (n < (uint32_t)ret)
		zf_warn("zdev: %s: ignoring %u smaller zone(s) at the end", path,
			(uint32_t)ret - n);
	b->nr_zones = n;
	b->nr_conv = 0;
	b->capacity = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct zdev_zone *z = &zs[i];

		if (z->start != (uint64_t)i * b->zone_size) {
			zf_err("zdev: %s: zone %u starts at %llu, expected %llu", path, i,
			       (unsigned long long)z->start,
			       (unsigned long long)i * b->zone_size);
			ret = -ENOTSUP;
			goto out;
		}
		if (zdev_zone_conv(z)) {
			if (i != b->nr_conv) {
				zf_err("zdev: %s: conventional zone %u after sequential "
				       "zones is not supported (conventional zones must "
				       "come first)", path, i);
				ret = -ENOTSUP;
				goto out;
			}
			b->nr_conv++;
			continue;
		}
		if (z->capacity == 0 || z->capacity > z->len || z->capacity % bs) {
			zf_err("zdev: %s: zone %u has an unusable capacity of %llu bytes "
			       "(zone size %llu, block size %u)", path, i,
			       (unsigned long long)z->capacity,
			       (unsigned long long)z->len, bs);
			ret = -ENOTSUP;
			goto out;
		}
		if (b->capacity && z->capacity != b->capacity) {
			zf_err("zdev: %s: zone capacities differ (%llu and %llu bytes); "
			       "only devices with one zone capacity are supported", path,
			       (unsigned long long)b->capacity,
			       (unsigned long long)z->capacity);
			ret = -ENOTSUP;
			goto out;
		}
		b->capacity = z->capacity;
	}
	if (!b->capacity)
		b->capacity = b->zone_size;	/* only conventional zones */
	b->wp = calloc(n, sizeof(*b->wp));
	if (!b->wp) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++)
		cache_wp(b, &zs[i], i);
	ret = 0;
out:
	free(zs);
	return ret;
}

int zdev_zbd_backend_open(struct zdev *dev, const char *path,
			  const struct zdev_open_opts *o)
{
	struct zbd *b;
	int flags, ret;

	ret = zbd_device_is_zoned(path);
	if (ret < 0) {
		ret = errno ? -errno : -EIO;
		zf_err("zdev: %s: cannot inspect block device: %s", path, strerror(-ret));
		return ret;
	}
	if (ret == 0) {
		zf_err("zdev: %s: not a zoned block device (a regular block device "
		       "cannot hold zonefuse; use a zoned device or an emulator file "
		       "from `zonefuse-emu create`)", path);
		return -ENOTSUP;
	}

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->fd = -1;
	for (int i = 0; i < ZBD_NR_RINGS; i++)
		pthread_mutex_init(&b->rings[i].lock, NULL);

	flags = (o->read_only ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC;
	if (o->exclusive)
		flags |= O_EXCL;
	errno = 0;
	b->fd = zbd_open(path, flags, &b->info);
	if (b->fd < 0) {
		ret = errno ? -errno : -EIO;
		b->fd = -1;
		if (ret == -EBUSY)
			zf_err("zdev: %s: device busy (opened exclusively or mounted "
			       "elsewhere)", path);
		else
			zf_err("zdev: %s: cannot open zoned device: %s", path, strerror(-ret));
		goto fail;
	}
	if (b->info.model != ZBD_DM_HOST_MANAGED && b->info.model != ZBD_DM_HOST_AWARE) {
		zf_err("zdev: %s: not a zoned block device (zone model %u)", path,
		       b->info.model);
		ret = -ENOTSUP;
		goto fail;
	}
	b->zone_size = b->info.zone_size;
	if (b->zone_size == 0 || (b->zone_size & (b->zone_size - 1))) {
		zf_err("zdev: %s: zone size %llu bytes is not a power of two; not "
		       "supported", path, (unsigned long long)b->zone_size);
		ret = -ENOTSUP;
		goto fail;
	}
	if (b->info.lblock_size < 512 || b->info.lblock_size > 4096 ||
	    (b->info.lblock_size & (b->info.lblock_size - 1)) ||
	    b->zone_size % b->info.lblock_size) {
		zf_err("zdev: %s: unsupported logical block size %u", path,
		       b->info.lblock_size);
		ret = -ENOTSUP;
		goto fail;
	}
	ret = scan_zones(b, path);
	if (ret)
		goto fail;
	if (b->info.model == ZBD_DM_HOST_AWARE)
		zf_info("zdev: %s: host-aware device, used as host-managed", path);

	dev->ops = &zbd_ops;
	dev->priv = b;
	dev->geo = (struct zdev_geometry){
		.zone_size = b->zone_size,
		.zone_capacity = b->capacity,
		.size = (uint64_t)b->nr_zones * b->zone_size,
		.nr_zones = b->nr_zones,
		.nr_conv_zones = b->nr_conv,
		.block_size = b->info.lblock_size,
		.mem_align = b->info.lblock_size,
		.max_open = b->info.max_nr_open_zones == UINT32_MAX ? 0 : b->info.max_nr_open_zones,
		.max_active = b->info.max_nr_active_zones == UINT32_MAX ? 0 : b->info.max_nr_active_zones,
	};
	return 0;
fail:
	zbd_free(b);
	return ret;
}

static const struct zdev_ops zbd_ops = {
	.type = ZDEV_BACKEND_ZBD,
	.name = "zbd",
	.close = zbd_close_op,
	.report_zones = zbd_report_zones_op,
	.zone_op = zbd_zone_op,
	.reset_all = zbd_reset_all_op,
	.write = zbd_write_op,
	.read = zbd_read_op,
	.flush = zbd_flush_op,
	.io_batch = zbd_io_batch_op,
};
