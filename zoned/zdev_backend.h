/* zdev_backend — private interface between the zdev dispatch layer (zdev.c)
 * and its backends (zdev_emu.c, zdev_zbd.c).  Not for use outside zoned/.
 *
 * Division of work:
 *   - zdev.c opens by path, picks the backend, checks every argument that
 *     can be checked from the geometry alone (zone index, block alignment,
 *     buffer alignment, device end, read-only handle) and keeps the stats.
 *     Backends therefore see only well-formed requests.
 *   - a backend enforces the zone rules (or lets the device do it), does
 *     the data I/O and converts errors to -errno exactly once.
 * All offsets and lengths are bytes; sectors exist only inside a backend.
 */
#ifndef ZONEFUSE_ZDEV_BACKEND_H
#define ZONEFUSE_ZDEV_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>

#include "zoned/zdev.h"

enum zdev_zone_op {
	ZDEV_ZOP_RESET = 0,
	ZDEV_ZOP_OPEN = 1,
	ZDEV_ZOP_CLOSE = 2,
	ZDEV_ZOP_FINISH = 3,
};

struct zdev_ops {
	enum zdev_backend type;
	const char *name;
	void (*close)(struct zdev *dev);
	int (*report_zones)(struct zdev *dev, uint32_t first, uint32_t count,
			    struct zdev_zone *zones);
	int (*zone_op)(struct zdev *dev, enum zdev_zone_op op, uint32_t zone);
	int (*reset_all)(struct zdev *dev);
	ssize_t (*write)(struct zdev *dev, uint64_t off, const void *buf, size_t len);
	ssize_t (*read)(struct zdev *dev, uint64_t off, void *buf, size_t len);
	int (*flush)(struct zdev *dev);
	/* reqs[] are already validated (bounds, alignment); the backend sets
	 * each ->result.  Returns 0, or -errno if nothing could be submitted. */
	int (*io_batch)(struct zdev *dev, struct zdev_req **reqs, unsigned int nr);
	/* Optional (NULL = -EOPNOTSUPP); the range is within the device;
	 * len 0 asks whether any range could be (fd or -EOPNOTSUPP). */
	int (*read_fd)(struct zdev *dev, uint64_t off, size_t len, uint64_t *file_off);
};

struct zdev {
	const struct zdev_ops *ops;
	char *path;
	struct zdev_geometry geo;
	bool read_only;
	void *priv;		/* backend state */
	struct zdev_rec *rec;	/* recording (zdev_record.c), or NULL */
	_Atomic uint64_t st_bytes_written, st_bytes_read;
	_Atomic uint64_t st_writes, st_reads, st_flushes;
	_Atomic uint64_t st_resets, st_finishes, st_opens, st_closes;
};

/* Backend constructors: fill dev->ops, dev->geo, dev->priv; return 0 or
 * -errno (after logging why with zf_err). */
int zdev_emu_backend_open(struct zdev *dev, const char *path,
			  const struct zdev_open_opts *opts);
int zdev_zbd_backend_open(struct zdev *dev, const char *path,
			  const struct zdev_open_opts *opts);

/* Recording hooks (zdev_record.c): called by zdev.c after a request
 * succeeded; no-ops when dev is not recording. */
struct zdev_rec;
void zdev_rec_note(struct zdev *dev, enum zdev_rec_kind kind, uint32_t zone,
		   uint64_t off, const void *data, uint64_t len);
void zdev_rec_free(struct zdev *dev);

/* Index of the zone holding byte offset off. */
static inline uint32_t zdev_zone_of(const struct zdev *dev, uint64_t off)
{
	return (uint32_t)(off / dev->geo.zone_size);
}

/* Positional I/O of exactly len bytes, retried on EINTR and short
 * transfers (errno negated here, once).  A read that hits the end of the
 * file fills the rest with zeros when zero_at_eof, else fails with -EIO;
 * a write that makes no progress fails with -EIO. */
int zdev_pio_full(int fd, bool write, void *buf, size_t len, uint64_t off,
		  bool zero_at_eof);

#endif
