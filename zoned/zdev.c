/* zdev — dispatch layer of the zoned device API (see zdev.h).
 *
 * Opens a path with the right backend (block device -> ZBD, regular file
 * with the emulator header -> EMU), validates every argument that the
 * geometry alone decides (zone index, block and buffer alignment, device
 * end, read-only handle) so that both backends reject the same mistakes
 * with the same errno, and keeps the operation counters.
 *
 * Argument errors decided here:
 *   zone index >= nr_zones, NULL buffer, offset/length not a multiple of
 *   block_size, buffer not aligned to mem_align, I/O beyond the device end
 *                                                     -> -EINVAL
 *   write or zone management on a read-only handle    -> -EBADF
 * Zero-length reads and writes succeed and return 0 without touching the
 * device.
 */
#include "zoned/zdev.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "zoned/zdev_backend.h"

int zdev_open(const char *path, const struct zdev_open_opts *opts,
	      struct zdev **out)
{
	struct zdev_open_opts defaults = ZDEV_OPEN_OPTS_INIT;
	struct zdev *dev;
	struct stat st;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!path || !*path) {
		zf_err("zdev: no device path given");
		return -EINVAL;
	}
	if (!opts)
		opts = &defaults;
	if (stat(path, &st) < 0) {
		ret = -errno;
		zf_err("zdev: %s: %s", path, strerror(-ret));
		return ret;
	}
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode)) {
		zf_err("zdev: %s: not a zoned block device nor an emulator file "
		       "(it is neither a block device nor a regular file)", path);
		return -ENOTSUP;
	}

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->path = strdup(path);
	if (!dev->path) {
		free(dev);
		return -ENOMEM;
	}
	dev->read_only = opts->read_only;
	if (S_ISBLK(st.st_mode))
		ret = zdev_zbd_backend_open(dev, path, opts);
	else
		ret = zdev_emu_backend_open(dev, path, opts);
	if (ret < 0) {
		free(dev->path);
		free(dev);
		return ret;
	}
	*out = dev;
	return 0;
}

void zdev_close(struct zdev *dev)
{
	if (!dev)
		return;
	if (dev->ops)
		dev->ops->close(dev);
	zdev_rec_free(dev);
	free(dev->path);
	free(dev);
}

enum zdev_backend zdev_backend(const struct zdev *dev)
{
	return dev->ops->type;
}

const char *zdev_backend_name(const struct zdev *dev)
{
	return dev->ops->name;
}

const struct zdev_geometry *zdev_geometry(const struct zdev *dev)
{
	return &dev->geo;
}

const char *zdev_path(const struct zdev *dev)
{
	return dev->path;
}

int zdev_report_zones(struct zdev *dev, uint32_t first, uint32_t count,
		      struct zdev_zone *zones)
{
	if (!dev || (!zones && count))
		return -EINVAL;
	if (count == 0)
		return 0;
	if (first >= dev->geo.nr_zones)
		return -EINVAL;
	if (count > dev->geo.nr_zones - first)
		count = dev->geo.nr_zones - first;
	zf_will_block();
	return dev->ops->report_zones(dev, first, count, zones);
}

static int zone_op(struct zdev *dev, enum zdev_zone_op op, uint32_t zone)
{
	static const size_t ctr[] = {
		[ZDEV_ZOP_RESET] = offsetof(struct zdev, st_resets),
		[ZDEV_ZOP_OPEN] = offsetof(struct zdev, st_opens),
		[ZDEV_ZOP_CLOSE] = offsetof(struct zdev, st_closes),
		[ZDEV_ZOP_FINISH] = offsetof(struct zdev, st_finishes),
	};
	int ret;

	if (!dev || zone >= dev->geo.nr_zones)
		return -EINVAL;
	if (dev->read_only)
		return -EBADF;
	zf_will_block();
	ret = dev->ops->zone_op(dev, op, zone);
	if (ret == 0)
		atomic_fetch_add((_Atomic uint64_t *)((char *)dev + ctr[op]), 1);
	if (ret == 0 && (op == ZDEV_ZOP_RESET || op == ZDEV_ZOP_FINISH))
		zdev_rec_note(dev, op == ZDEV_ZOP_RESET ? ZDEV_REC_RESET : ZDEV_REC_FINISH,
			      zone, 0, NULL, 0);
	return ret;
}

int zdev_zone_reset(struct zdev *dev, uint32_t zone)
{
	return zone_op(dev, ZDEV_ZOP_RESET, zone);
}

int zdev_zone_open(struct zdev *dev, uint32_t zone)
{
	return zone_op(dev, ZDEV_ZOP_OPEN, zone);
}

int zdev_zone_close(struct zdev *dev, uint32_t zone)
{
	return zone_op(dev, ZDEV_ZOP_CLOSE, zone);
}

int zdev_zone_finish(struct zdev *dev, uint32_t zone)
{
	return zone_op(dev, ZDEV_ZOP_FINISH, zone);
}

int zdev_reset_all(struct zdev *dev)
{
	int ret;

	if (!dev)
		return -EINVAL;
	if (dev->read_only)
		return -EBADF;
	zf_will_block();
	ret = dev->ops->reset_all(dev);
	if (ret == 0) {
		dev->st_resets++;
		zdev_rec_note(dev, ZDEV_REC_RESET_ALL, 0, 0, NULL, 0);
	}
	return ret;
}

/* Argument checks shared by zdev_read, zdev_write and zdev_io_batch. */
static int check_io(const struct zdev *dev, int op, uint64_t off,
		    const void *buf, size_t len)
{
	const struct zdev_geometry *g = &dev->geo;

	if (op != ZDEV_OP_READ && op != ZDEV_OP_WRITE)
		return -EINVAL;
	if (op == ZDEV_OP_WRITE && dev->read_only)
		return -EBADF;
	if (len == 0)
		return 0;
	if (!buf || off % g->block_size || len % g->block_size ||
	    (uintptr_t)buf % g->mem_align)
		return -EINVAL;
	if (off >= g->size || len > g->size - off)
		return -EINVAL;
	return 1;
}

ssize_t zdev_write(struct zdev *dev, uint64_t offset, const void *buf, size_t len)
{
	ssize_t ret;

	if (!dev)
		return -EINVAL;
	ret = check_io(dev, ZDEV_OP_WRITE, offset, buf, len);
	if (ret <= 0)
		return ret;
	zf_will_block();
	ret = dev->ops->write(dev, offset, buf, len);
	if (ret > 0) {
		dev->st_writes++;
		dev->st_bytes_written += (uint64_t)ret;
		zdev_rec_note(dev, ZDEV_REC_WRITE, zdev_zone_of(dev, offset), offset,
			      buf, (uint64_t)ret);
	}
	return ret;
}

ssize_t zdev_read(struct zdev *dev, uint64_t offset, void *buf, size_t len)
{
	ssize_t ret;

	if (!dev)
		return -EINVAL;
	ret = check_io(dev, ZDEV_OP_READ, offset, buf, len);
	if (ret <= 0)
		return ret;
	zf_will_block();
	ret = dev->ops->read(dev, offset, buf, len);
	if (ret > 0) {
		dev->st_reads++;
		dev->st_bytes_read += (uint64_t)ret;
	}
	return ret;
}

int zdev_read_fd(struct zdev *dev, uint64_t offset, size_t len, uint64_t *file_off)
{
	if (!dev || !file_off || len == 0 || offset >= dev->geo.size ||
	    len > dev->geo.size - offset)
		return -EINVAL;
	if (!dev->ops->read_fd)
		return -EOPNOTSUPP;
	int fd = dev->ops->read_fd(dev, offset, len, file_off);
	if (fd >= 0) {
		dev->st_reads++;
		dev->st_bytes_read += len;
	}
	return fd;
}

bool zdev_reads_as_file(struct zdev *dev)
{
	uint64_t o;
	return dev && dev->ops->read_fd && dev->ops->read_fd(dev, 0, 0, &o) >= 0;
}

int zdev_flush(struct zdev *dev)
{
	int ret;

	if (!dev)
		return -EINVAL;
	zf_will_block();
	ret = dev->ops->flush(dev);
	if (ret == 0) {
		dev->st_flushes++;
		zdev_rec_note(dev, ZDEV_REC_FLUSH, 0, 0, NULL, 0);
	}
	return ret;
}

int zdev_io_batch(struct zdev *dev, struct zdev_req *reqs, unsigned int nr)
{
	struct zdev_req *stackv[64], **valid = stackv;
	unsigned int nvalid = 0, i;
	int ret, ok = 0;

	if (!dev || (!reqs && nr))
		return -EINVAL;
	if (nr == 0)
		return 0;
	if (nr > ZF_ARRAY_SIZE(stackv)) {
		valid = malloc(nr * sizeof(*valid));
		if (!valid)
			return -ENOMEM;
	}
	for (i = 0; i < nr; i++) {
		int c = check_io(dev, reqs[i].op, reqs[i].offset, reqs[i].buf,
				 reqs[i].len);
		reqs[i].result = c < 0 ? c : 0;
		if (c > 0)
			valid[nvalid++] = &reqs[i];
	}
	if (nvalid)
		zf_will_block();
	ret = nvalid ? dev->ops->io_batch(dev, valid, nvalid) : 0;
	if (valid != stackv)
		free(valid);
	if (ret < 0) {
		for (i = 0; i < nr; i++)
			if (reqs[i].result == 0 && reqs[i].len)
				reqs[i].result = ret;
		return ret;
	}
	for (i = 0; i < nr; i++) {
		struct zdev_req *r = &reqs[i];

		if (r->result < 0)
			continue;
		ok++;
		if (r->result == 0)
			continue;
		if (r->op == ZDEV_OP_WRITE) {
			dev->st_writes++;
			dev->st_bytes_written += (uint64_t)r->result;
			zdev_rec_note(dev, ZDEV_REC_WRITE, zdev_zone_of(dev, r->offset),
				      r->offset, r->buf, (uint64_t)r->result);
		} else {
			dev->st_reads++;
			dev->st_bytes_read += (uint64_t)r->result;
		}
	}
	return ok;
}

void *zdev_buf_alloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len ? ZF_ALIGN_UP(len, 4096) : 4096))
		return NULL;
	return p;
}

void zdev_buf_free(void *buf)
{
	free(buf);
}

const char *zdev_cond_name(uint8_t cond)
{
	switch (cond) {
	case ZDEV_COND_NOT_WP: return "not_wp";
	case ZDEV_COND_EMPTY: return "empty";
	case ZDEV_COND_IMP_OPEN: return "imp_open";
	case ZDEV_COND_EXP_OPEN: return "exp_open";
	case ZDEV_COND_CLOSED: return "closed";
	case ZDEV_COND_READONLY: return "readonly";
	case ZDEV_COND_FULL: return "full";
	case ZDEV_COND_OFFLINE: return "offline";
	default: return "unknown";
	}
}

void zdev_get_stats(const struct zdev *dev, struct zdev_stats *st)
{
	st->bytes_written = dev->st_bytes_written;
	st->bytes_read = dev->st_bytes_read;
	st->writes = dev->st_writes;
	st->reads = dev->st_reads;
	st->flushes = dev->st_flushes;
	st->resets = dev->st_resets;
	st->finishes = dev->st_finishes;
	st->opens = dev->st_opens;
	st->closes = dev->st_closes;
}

int zdev_pio_full(int fd, bool write, void *buf, size_t len, uint64_t off,
		  bool zero_at_eof)
{
	char *p = buf;

	while (len) {
		ssize_t n = write ? pwrite(fd, p, len, (off_t)off)
				  : pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) {
			if (write || !zero_at_eof)
				return -EIO;
			memset(p, 0, len);
			return 0;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}
