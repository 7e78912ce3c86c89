/* zdev_emu — emulated host-managed zoned device in a regular (sparse) file.
 *
 * File layout (all integers in host byte order; the magic detects a
 * foreign-endian file):
 *   [0, 4096)              header: struct emu_hdr, CRC32C-protected
 *   [4096, data_off)       zone state table: nr_zones x struct emu_zstate,
 *                          mapped MAP_SHARED so that every state change is
 *                          in the page cache at once and survives kill -9
 *   [data_off, +size)      zone data, data_off aligned to 1 MiB; sparse:
 *                          what lies past a zone's write pointer is punched
 *                          (FALLOC_FL_PUNCH_HOLE) when the handle closes
 *
 * Zone rules (same errno as Linux reports for a real zoned device; the
 * transitions follow null_blk, drivers/block/null_blk/zoned.c, except where
 * an NVMe ZNS device under Linux (QEMU's, checked by scripts/qemu-zns.sh)
 * differs: see docs/qemu.md):
 *   write not at wp, to FULL/READONLY/OFFLINE, crossing capacity -> -EIO
 *   a write to a conventional zone running into a sequential zone -> -EIO
 *   EMPTY/CLOSED zone written -> implicitly opened (IMP_OPEN); reaching
 *     capacity -> FULL
 *   open beyond max_open: an idle IMP_OPEN zone is closed to make room
 *     (round robin); if every open zone is explicitly open or busy
 *                                                             -> -ETOOMANYREFS
 *   EMPTY zone opened (implicitly or explicitly) while
 *     open+closed >= max_active                               -> -EOVERFLOW
 *   finish of an EMPTY zone: FULL, needs no open/active slot (NVMe)
 *   close of an open zone: CLOSED, also with wp at the zone start (NVMe;
 *     it stays active until reset or finish)
 *   zone management on a conventional zone                    -> -EINVAL
 *   open of a FULL zone, close of an EMPTY or FULL zone        -> -EIO
 *   open of EXP_OPEN, close of CLOSED, finish of FULL          -> 0 (no-op)
 *   reads at or beyond a zone's wp return zeros
 *   anything after zdev_emu_power_loss() on the handle         -> -EIO
 * A FULL zone reports wp = start + capacity.
 *
 * Volatile write cache: each sequential zone keeps a durable write pointer
 * (dwp).  zdev_flush() sets dwp = wp for every zone (it visits only the
 * zones written or finished since the last flush: e->unfl, so a flush
 * costs the same on 64k zones as on 256).  A simulated power loss
 * rolls wp back to dwp (or dwp + a random block-aligned prefix of the
 * unflushed part, "torn write") and punches the dropped bytes; open zones
 * come back CLOSED (or EMPTY).  Zone management (reset, finish) is durable
 * at once; data written before a finish but never flushed is dropped but the
 * zone stays FULL.  Writes to conventional zones are not cached (they
 * survive a power loss).
 * zdev_flush() does NOT fdatasync the backing file: the durable-wp
 * bookkeeping is the simulated durability and the file normally lives in a
 * page cache that outlives the process.  Set ZONEFUSE_EMU_SYNC=1 in the
 * environment to also msync+fdatasync the backing file on every flush
 * (needed only to survive a real host crash).
 *
 * Concurrency: one state mutex (st_lock) guards the zone table and the
 * open/active counters; one mutex per zone serialises data writes and zone
 * management on that zone (lock order: zone lock, then st_lock).  A write
 * checks the wp and opens the zone under st_lock, pwrite()s the data with
 * only its zone lock held, then advances wp under st_lock, so writers to
 * different zones copy data in parallel and wp never covers data that is
 * not in the file (kill -9 mid-write loses just that write).
 * Opening: a read-write (or exclusive) open takes flock(LOCK_EX|LOCK_NB) on
 * the file and fails with -EBUSY if any other read-write open holds it (the
 * state lock is process-local, so only one writer may exist); a read-only
 * non-exclusive open takes no lock (an observer, e.g. `zonefuse-emu info`
 * on a mounted device).
 *
 * Performance model (off unless configured): model time, not threads.
 * Every zone has a busy-until time and so has the device; a request of B
 * bytes to zone z issued at t0 completes at
 *   max(max(t0, zbusy[z]) + B/zone_rate, max(t0, dbusy) + B/device_rate)
 *   + latency
 * and the caller sleeps until then (zdev_io_batch issues all its requests at
 * the same t0 and sleeps once, so N zones in parallel take ~1/N the time).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "zoned/zdev.h"
#include "zoned/zdev_backend.h"

#define EMU_MAGIC "ZFEMUZD1"
#define EMU_VERSION 1u
#define EMU_HDR_AREA 4096u
#define EMU_DATA_ALIGN (1u << 20)
#define EMU_MAX_ZONES (1u << 20)

struct emu_hdr {
	char magic[8];
	uint32_t version;
	uint32_t hdr_size;	/* sizeof(struct emu_hdr) */
	uint64_t zone_size;	/* bytes */
	uint64_t zone_capacity;	/* bytes */
	uint32_t nr_zones;
	uint32_t nr_conv_zones;
	uint32_t block_size;
	uint32_t max_open;
	uint32_t max_active;
	uint32_t zone_write_mbps;
	uint32_t zone_read_mbps;
	uint32_t device_mbps;
	uint32_t latency_us;
	uint32_t zstate_size;	/* sizeof(struct emu_zstate) */
	uint64_t state_off;	/* bytes */
	uint64_t data_off;	/* bytes */
	uint64_t created;	/* unix time, seconds */
	uint32_t reserved[8];
	uint32_t crc;		/* CRC32C of the struct with crc = 0 */
	uint32_t pad;
};
_Static_assert(sizeof(struct emu_hdr) == 136, "emu_hdr layout");

/* Zone state flags. */
#define ZS_FINISHED 0x01	/* FULL by a finish command (durable) */
#define ZS_DIRTY 0x02		/* data may have been written since the last reset */
#define ZS_STALE 0x04		/* reset (or finished) with data in it: bytes of the
				 * old data may lie in the file past the write
				 * pointer until the close punches them */

struct emu_zstate {
	uint64_t wp;		/* bytes from the zone start */
	uint64_t dwp;		/* durable write pointer, bytes from the zone start */
	uint8_t cond;
	uint8_t type;
	uint8_t flags;
	uint8_t pad[5];
	uint64_t reserved;
};
_Static_assert(sizeof(struct emu_zstate) == 32, "emu_zstate layout");

struct emu_fault {
	uint32_t skip, count;
	int err;
};

struct emu {
	int fd;
	bool read_only;
	bool sync_backing;
	struct emu_hdr hdr;
	void *map;
	size_t map_len;
	struct emu_zstate *zs;
	uint64_t data_off;

	pthread_mutex_t st_lock;
	pthread_mutex_t *zlock;
	uint8_t *inflight;	/* per zone: a data write is in progress */
	uint32_t *unfl;		/* [st_lock] zones whose wp may be past dwp */
	uint32_t nr_unfl;	/* [st_lock] entries in unfl */
	uint8_t *unfl_mark;	/* [st_lock] per zone: listed in unfl */
	uint32_t nr_imp, nr_exp, nr_closed;
	uint32_t imp_cursor;
	atomic_bool dead;

	pthread_mutex_t fault_lock;
	struct emu_fault fault[ZDEV_FAULT_NR];

	/* performance model */
	uint32_t w_mbps, r_mbps, d_mbps, lat_us;
	bool model_on;
	pthread_mutex_t model_lock;
	uint64_t dbusy;
	uint64_t *zbusy;
};

static const struct zdev_ops emu_ops;

static inline struct emu *E(struct zdev *dev)
{
	return dev->priv;
}

static inline bool zconv(const struct emu *e, uint32_t z)
{
	return z < e->hdr.nr_conv_zones;
}

/* The zone's wp moved past its dwp: the next flush must visit it
 * (st_lock held). */
static void note_unflushed(struct emu *e, uint32_t z)
{
	if (e->unfl_mark[z])
		return;
	e->unfl_mark[z] = 1;
	e->unfl[e->nr_unfl++] = z;
}

static inline uint64_t zstart(const struct emu *e, uint32_t z)
{
	return (uint64_t)z * e->hdr.zone_size;
}

static inline uint64_t zcap(const struct emu *e, uint32_t z)
{
	return zconv(e, z) ? e->hdr.zone_size : e->hdr.zone_capacity;
}

/* ---- small I/O helpers (errno negated here, once) --------------------- */

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	return zdev_pio_full(fd, true, (void *)buf, len, off, false);
}

/* Reads len bytes; bytes beyond the end of the file read as zeros. */
static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	return zdev_pio_full(fd, false, buf, len, off, true);
}

/* Make [off, off+len) of the file read as zeros, releasing the space. */
static int zero_range(int fd, uint64_t off, uint64_t len)
{
	static const char zeros[65536];

	if (len == 0)
		return 0;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)off, (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -errno;
	while (len) {
		size_t n = (size_t)ZF_MIN(len, (uint64_t)sizeof(zeros));
		int ret = pwrite_full(fd, zeros, n, off);
		if (ret)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

/* ---- header ------------------------------------------------------------ */

static uint32_t hdr_crc(const struct emu_hdr *h)
{
	struct emu_hdr c = *h;

	c.crc = 0;
	return zf_crc32c(0, &c, sizeof(c));
}

static uint64_t state_len(uint32_t nr_zones)
{
	return ZF_ALIGN_UP((uint64_t)nr_zones * sizeof(struct emu_zstate), 4096);
}

/* Check geometry values shared by create and open; msg gets the reason. */
static int check_geometry(uint64_t zone_size, uint64_t cap, uint32_t nr_zones,
			  uint32_t nr_conv, uint32_t bs, uint32_t max_open,
			  uint32_t max_active, const char **msg)
{
	if (bs != 512 && bs != 4096)
		return *msg = "block size must be 512 or 4096", -EINVAL;
	if (zone_size == 0 || zone_size % bs)
		return *msg = "zone size must be a non-zero multiple of the block size", -EINVAL;
	if (cap == 0 || cap > zone_size || cap % bs)
		return *msg = "zone capacity must be a non-zero multiple of the block size, at most the zone size", -EINVAL;
	if (nr_zones == 0 || nr_zones > EMU_MAX_ZONES)
		return *msg = "number of zones must be between 1 and 1048576", -EINVAL;
	if (nr_conv > nr_zones)
		return *msg = "more conventional zones than zones", -EINVAL;
	if (zone_size > (UINT64_C(1) << 62) / nr_zones)
		return *msg = "device too large", -EINVAL;
	if (max_open && max_active && max_open > max_active)
		return *msg = "max open zones must not exceed max active zones", -EINVAL;
	return 0;
}

static int read_header(int fd, const char *path, struct emu_hdr *h, uint64_t fsize)
{
	const char *msg = NULL;
	int ret;

	if (fsize < EMU_HDR_AREA) {
		zf_err("zdev: %s: not a zonefuse emulator file (%llu bytes, too short "
		       "for a header); create one with `zonefuse-emu create`",
		       path, (unsigned long long)fsize);
		return -EINVAL;
	}
	ret = pread_full(fd, h, sizeof(*h), 0);
	if (ret) {
		zf_err("zdev: %s: cannot read header: %s", path, strerror(-ret));
		return ret;
	}
	if (memcmp(h->magic, EMU_MAGIC, 8) != 0) {
		zf_err("zdev: %s: not a zoned block device nor a zonefuse emulator "
		       "file (bad magic); create one with `zonefuse-emu create`", path);
		return -EINVAL;
	}
	if (h->version != EMU_VERSION || h->hdr_size != sizeof(*h) ||
	    h->zstate_size != sizeof(struct emu_zstate)) {
		zf_err("zdev: %s: unsupported emulator file version %u (this build "
		       "reads version %u)", path, h->version, EMU_VERSION);
		return -ENOTSUP;
	}
	if (h->crc != hdr_crc(h)) {
		zf_err("zdev: %s: emulator header checksum mismatch (corrupt file)", path);
		return -EINVAL;
	}
	ret = check_geometry(h->zone_size, h->zone_capacity, h->nr_zones,
			     h->nr_conv_zones, h->block_size, h->max_open,
			     h->max_active, &msg);
	if (ret) {
		zf_err("zdev: %s: corrupt emulator header: %s", path, msg);
		return ret;
	}
	if (h->state_off != EMU_HDR_AREA ||
	    h->data_off != ZF_ALIGN_UP(h->state_off + state_len(h->nr_zones), EMU_DATA_ALIGN)) {
		zf_err("zdev: %s: corrupt emulator header: bad layout", path);
		return -EINVAL;
	}
	if (fsize < h->data_off + h->zone_size * h->nr_zones) {
		zf_err("zdev: %s: emulator file truncated (%llu bytes, expected %llu)",
		       path, (unsigned long long)fsize,
		       (unsigned long long)(h->data_off + h->zone_size * h->nr_zones));
		return -EINVAL;
	}
	return 0;
}

/* ---- zone table --------------------------------------------------------- */

static void count_zones(struct emu *e)
{
	e->nr_imp = e->nr_exp = e->nr_closed = 0;
	for (uint32_t z = e->hdr.nr_conv_zones; z < e->hdr.nr_zones; z++) {
		switch (e->zs[z].cond) {
		case ZDEV_COND_IMP_OPEN: e->nr_imp++; break;
		case ZDEV_COND_EXP_OPEN: e->nr_exp++; break;
		case ZDEV_COND_CLOSED: e->nr_closed++; break;
		default: break;
		}
	}
}

/* Validate the zone table; repair states a kill -9 in the middle of an
 * update can leave (only when fix is set).  Returns 0 or -EINVAL. */
static int check_zone_table(struct emu *e, const char *path, bool fix)
{
	uint32_t repaired = 0;

	for (uint32_t z = 0; z < e->hdr.nr_zones; z++) {
		struct emu_zstate *s = &e->zs[z];
		struct emu_zstate n = *s;
		uint64_t cap = zcap(e, z);

		if (zconv(e, z)) {
			if (s->type != ZDEV_ZONE_CONV || s->cond != ZDEV_COND_NOT_WP)
				goto bad;
			continue;
		}
		if (s->type != ZDEV_ZONE_SEQ || s->wp > cap ||
		    s->wp % e->hdr.block_size)
			goto bad;
		switch (s->cond) {
		case ZDEV_COND_EMPTY:
			if (n.wp)
				n.cond = n.wp == cap ? ZDEV_COND_FULL : ZDEV_COND_CLOSED;
			break;
		case ZDEV_COND_CLOSED:	/* with wp 0 too: closed after an open */
			if (n.wp == cap)
				n.cond = ZDEV_COND_FULL;
			break;
		case ZDEV_COND_IMP_OPEN:
		case ZDEV_COND_EXP_OPEN:
			if (n.wp == cap)
				n.cond = ZDEV_COND_FULL;
			break;
		case ZDEV_COND_FULL:
			n.wp = cap;
			break;
		case ZDEV_COND_READONLY:
		case ZDEV_COND_OFFLINE:
			break;
		default:
			goto bad;
		}
		if (n.dwp > n.wp || n.dwp % e->hdr.block_size)
			n.dwp = ZF_MIN(ZF_ALIGN_DOWN(n.dwp, e->hdr.block_size), n.wp);
		if (memcmp(&n, s, sizeof(n)) != 0) {
			repaired++;
			if (fix)
				*s = n;
		}
		continue;
bad:
		zf_err("zdev: %s: corrupt emulator zone table (zone %u: type %u cond %u "
		       "wp %llu)", path, z, s->type, s->cond, (unsigned long long)s->wp);
		return -EINVAL;
	}
	if (repaired)
		zf_warn("zdev: %s: %s %u zone state(s) left half-updated by a crash",
			path, fix ? "repaired" : "found (read-only, not repairing)", repaired);
	return 0;
}

/* ---- performance model -------------------------------------------------- */

static uint64_t xfer_ns(uint64_t bytes, uint32_t mbps)
{
	/* MB/s = 10^6 bytes/s -> bytes * 1000 / mbps nanoseconds */
	return mbps ? bytes * 1000u / mbps : 0;
}

/* Charge a transfer of len bytes at off (may span zones) issued at t0;
 * returns its model completion time (0 when the model is off). */
static uint64_t model_charge(struct emu *e, uint64_t off, uint64_t len,
			     bool write, uint64_t t0)
{
	uint32_t zr = write ? e->w_mbps : e->r_mbps;
	uint64_t done = t0;

	if (!e->model_on)
		return 0;
	pthread_mutex_lock(&e->model_lock);
	while (len) {
		uint32_t z = (uint32_t)(off / e->hdr.zone_size);
		uint64_t n = ZF_MIN(len, zstart(e, z) + e->hdr.zone_size - off);
		uint64_t zd = t0, dd = t0;

		if (zr) {
			zd = ZF_MAX(t0, e->zbusy[z]) + xfer_ns(n, zr);
			e->zbusy[z] = zd;
		}
		if (e->d_mbps) {
			dd = ZF_MAX(t0, e->dbusy) + xfer_ns(n, e->d_mbps);
			e->dbusy = dd;
		}
		done = ZF_MAX(done, ZF_MAX(zd, dd));
		off += n;
		len -= n;
	}
	pthread_mutex_unlock(&e->model_lock);
	return done + (uint64_t)e->lat_us * 1000u;
}

static void model_wait(uint64_t deadline)
{
	if (deadline && deadline > zf_now_ns())
		zf_sleep_until_ns(deadline);
}

static void model_latency(struct emu *e)
{
	if (e->lat_us)
		model_wait(zf_now_ns() + (uint64_t)e->lat_us * 1000u);
}

/* ---- faults ------------------------------------------------------------- */

static int fault_hit(struct emu *e, enum zdev_fault_kind kind)
{
	struct emu_fault *f = &e->fault[kind];
	int ret = 0;

	pthread_mutex_lock(&e->fault_lock);
	if (f->count) {
		if (f->skip) {
			f->skip--;
		} else {
			f->count--;
			ret = f->err;
		}
	}
	pthread_mutex_unlock(&e->fault_lock);
	return ret;
}

int zdev_emu_inject_fault(struct zdev *dev, enum zdev_fault_kind kind,
			  uint32_t skip, uint32_t count, int err)
{
	struct emu *e;

	if (!dev)
		return -EINVAL;
	if (dev->ops != &emu_ops)
		return -ENOTSUP;
	if ((unsigned)kind >= ZDEV_FAULT_NR || (count && (err >= 0 || err < -4095)))
		return -EINVAL;
	e = E(dev);
	pthread_mutex_lock(&e->fault_lock);
	e->fault[kind] = (struct emu_fault){ .skip = skip, .count = count, .err = err };
	pthread_mutex_unlock(&e->fault_lock);
	return 0;
}

/* ---- zone state machine (st_lock held) ---------------------------------- */

static void close_zone_locked(struct emu *e, uint32_t z)
{
	struct emu_zstate *s = &e->zs[z];

	if (s->cond == ZDEV_COND_IMP_OPEN)
		e->nr_imp--;
	else if (s->cond == ZDEV_COND_EXP_OPEN)
		e->nr_exp--;
	else
		return;
	/* NVMe ZNS (and Linux on a QEMU ZNS namespace): an open zone is CLOSED
	 * after a close even with its wp at the zone start, and stays active
	 * (null_blk and SCSI ZBC make such a zone EMPTY instead). */
	s->cond = ZDEV_COND_CLOSED;
	e->nr_closed++;
}

/* Close one idle implicitly open zone (round robin) to free an open slot. */
static int close_imp_open_zone(struct emu *e)
{
	uint32_t nseq = e->hdr.nr_zones - e->hdr.nr_conv_zones;

	for (uint32_t i = 0; i < nseq; i++) {
		uint32_t z = e->hdr.nr_conv_zones + (e->imp_cursor + i) % nseq;

		if (e->zs[z].cond == ZDEV_COND_IMP_OPEN && !e->inflight[z]) {
			close_zone_locked(e, z);
			e->imp_cursor = (z - e->hdr.nr_conv_zones + 1) % nseq;
			return 0;
		}
	}
	return -ETOOMANYREFS;
}

static int check_active(struct emu *e)
{
	uint32_t max = e->hdr.max_active;

	if (!max || e->nr_imp + e->nr_exp + e->nr_closed < max)
		return 0;
	return -EOVERFLOW;
}

static int check_open(struct emu *e)
{
	uint32_t max = e->hdr.max_open;

	if (!max || e->nr_imp + e->nr_exp < max)
		return 0;
	if (e->nr_imp && close_imp_open_zone(e) == 0)
		return 0;
	return -ETOOMANYREFS;
}

/* Resources for moving zone z (EMPTY or CLOSED) to an open condition. */
static int check_resources(struct emu *e, uint32_t z)
{
	int ret;

	switch (e->zs[z].cond) {
	case ZDEV_COND_EMPTY:
		ret = check_active(e);
		if (ret)
			return ret;
		/* fallthrough */
	case ZDEV_COND_CLOSED:
		return check_open(e);
	default:
		return -EIO;
	}
}

/* ---- data I/O ----------------------------------------------------------- */

static ssize_t write_conv(struct emu *e, uint64_t off, const void *buf, size_t len)
{
	uint32_t last = (uint32_t)((off + len - 1) / e->hdr.zone_size);
	int ret;

	if (!zconv(e, last))
		return -EIO;	/* runs into a sequential zone */
	ret = pwrite_full(e->fd, buf, len, e->data_off + off);
	return ret ? ret : (ssize_t)len;
}

static ssize_t do_write(struct emu *e, uint64_t off, const void *buf, size_t len,
			uint64_t t0, uint64_t *done)
{
	uint32_t z = (uint32_t)(off / e->hdr.zone_size);
	struct emu_zstate *s = &e->zs[z];
	uint64_t rel = off - zstart(e, z);
	ssize_t ret;
	int err;

	err = fault_hit(e, ZDEV_FAULT_WRITE);
	if (err)
		return err;
	if (zconv(e, z)) {
		if (atomic_load(&e->dead))
			return -EIO;
		ret = write_conv(e, off, buf, len);
		goto out;
	}

	pthread_mutex_lock(&e->zlock[z]);
	pthread_mutex_lock(&e->st_lock);
	if (atomic_load(&e->dead)) {
		ret = -EIO;
		goto unlock;
	}
	switch (s->cond) {
	case ZDEV_COND_FULL:
	case ZDEV_COND_READONLY:
	case ZDEV_COND_OFFLINE:
		ret = -EIO;
		goto unlock;
	default:
		break;
	}
	if (rel != s->wp || len > e->hdr.zone_capacity - rel) {
		ret = -EIO;
		goto unlock;
	}
	if (s->cond == ZDEV_COND_EMPTY || s->cond == ZDEV_COND_CLOSED) {
		err = check_resources(e, z);
		if (err) {
			ret = err;
			goto unlock;
		}
		if (s->cond == ZDEV_COND_CLOSED)
			e->nr_closed--;
		s->cond = ZDEV_COND_IMP_OPEN;
		e->nr_imp++;
	}
	s->flags |= ZS_DIRTY;
	e->inflight[z] = 1;
	pthread_mutex_unlock(&e->st_lock);

	err = pwrite_full(e->fd, buf, len, e->data_off + off);

	pthread_mutex_lock(&e->st_lock);
	e->inflight[z] = 0;
	if (err) {
		ret = err;
		goto unlock;
	}
	s->wp += len;
	note_unflushed(e, z);
	if (s->wp == e->hdr.zone_capacity) {
		if (s->cond == ZDEV_COND_IMP_OPEN)
			e->nr_imp--;
		else if (s->cond == ZDEV_COND_EXP_OPEN)
			e->nr_exp--;
		else if (s->cond == ZDEV_COND_CLOSED)
			e->nr_closed--;
		s->cond = ZDEV_COND_FULL;
	}
	ret = (ssize_t)len;
unlock:
	pthread_mutex_unlock(&e->st_lock);
	pthread_mutex_unlock(&e->zlock[z]);
out:
	if (ret > 0 && done)
		*done = model_charge(e, off, len, true, t0);
	return ret;
}

static ssize_t do_read(struct emu *e, uint64_t off, void *buf, size_t len,
		       uint64_t t0, uint64_t *done)
{
	uint64_t pos = off, end = off + len;
	char *p = buf;
	int err;

	err = fault_hit(e, ZDEV_FAULT_READ);
	if (err)
		return err;
	if (atomic_load(&e->dead))
		return -EIO;
	while (pos < end) {
		uint32_t z = (uint32_t)(pos / e->hdr.zone_size);
		uint64_t zs = zstart(e, z);
		uint64_t n = ZF_MIN(end - pos, zs + e->hdr.zone_size - pos);
		uint64_t valid;

		if (zconv(e, z)) {
			valid = n;
		} else {
			uint64_t wp;
			uint8_t cond;

			pthread_mutex_lock(&e->st_lock);
			wp = zs + e->zs[z].wp;
			cond = e->zs[z].cond;
			pthread_mutex_unlock(&e->st_lock);
			if (cond == ZDEV_COND_OFFLINE)
				return -EIO;
			valid = wp > pos ? ZF_MIN(n, wp - pos) : 0;
		}
		if (valid) {
			err = pread_full(e->fd, p, valid, e->data_off + pos);
			if (err)
				return err;
		}
		if (valid < n)
			memset(p + valid, 0, n - valid);
		p += n;
		pos += n;
	}
	if (done)
		*done = model_charge(e, off, len, false, t0);
	return (ssize_t)len;
}

static ssize_t emu_write(struct zdev *dev, uint64_t off, const void *buf, size_t len)
{
	uint64_t done = 0;
	ssize_t ret = do_write(E(dev), off, buf, len, zf_now_ns(), &done);

	model_wait(done);
	return ret;
}

static ssize_t emu_read(struct zdev *dev, uint64_t off, void *buf, size_t len)
{
	uint64_t done = 0;
	ssize_t ret = do_read(E(dev), off, buf, len, zf_now_ns(), &done);

	model_wait(done);
	return ret;
}

/* Bytes below a zone's write pointer (or in a conventional zone) are the
 * backing file's, at data_off.  The model must charge every read and an
 * armed read fault must fire, so both keep reads on do_read. */
static int emu_read_fd(struct zdev *dev, uint64_t off, size_t len, uint64_t *file_off)
{
	struct emu *e = E(dev);
	uint32_t z = (uint32_t)(off / e->hdr.zone_size);

	if (atomic_load(&e->dead))
		return -EIO;
	if (e->model_on || off + len > zstart(e, z) + e->hdr.zone_size)
		return -EOPNOTSUPP;
	if (len == 0)
		return e->fd;
	pthread_mutex_lock(&e->fault_lock);
	bool armed = e->fault[ZDEV_FAULT_READ].count != 0;
	pthread_mutex_unlock(&e->fault_lock);
	if (armed)
		return -EOPNOTSUPP;
	if (!zconv(e, z)) {
		pthread_mutex_lock(&e->st_lock);
		bool ok = e->zs[z].cond != ZDEV_COND_OFFLINE &&
			  off + len <= zstart(e, z) + e->zs[z].wp;
		pthread_mutex_unlock(&e->st_lock);
		if (!ok)
			return -EOPNOTSUPP;
	}
	*file_off = e->data_off + off;
	return e->fd;
}

static int emu_io_batch(struct zdev *dev, struct zdev_req **reqs, unsigned int nr)
{
	struct emu *e = E(dev);
	uint64_t t0 = zf_now_ns(), last = 0;

	if (atomic_load(&e->dead))
		return -EIO;
	for (unsigned int i = 0; i < nr; i++) {
		struct zdev_req *r = reqs[i];
		uint64_t done = 0;

		if (r->op == ZDEV_OP_WRITE)
			r->result = do_write(e, r->offset, r->buf, r->len, t0, &done);
		else
			r->result = do_read(e, r->offset, r->buf, r->len, t0, &done);
		last = ZF_MAX(last, done);
	}
	model_wait(last);
	return 0;
}

static int emu_flush(struct zdev *dev)
{
	struct emu *e = E(dev);
	int err;

	err = fault_hit(e, ZDEV_FAULT_FLUSH);
	if (err)
		return err;
	if (atomic_load(&e->dead))
		return -EIO;
	if (e->read_only)
		return 0;
	pthread_mutex_lock(&e->st_lock);
	for (uint32_t k = 0; k < e->nr_unfl; k++) {
		uint32_t z = e->unfl[k];

		e->zs[z].dwp = e->zs[z].wp;
		e->unfl_mark[z] = 0;
	}
	e->nr_unfl = 0;
	pthread_mutex_unlock(&e->st_lock);
	if (e->sync_backing) {
		if (msync(e->map, e->map_len, MS_SYNC) < 0)
			return -errno;
		if (fdatasync(e->fd) < 0)
			return -errno;
	}
	model_latency(e);
	return 0;
}

/* ---- zone management ----------------------------------------------------- */

/* A reset punches nothing: the zone's old bytes stay in the file, unread
 * (reads past the write pointer are zeros) and overwritten in place by the
 * zone's next writes, so a zone cycle costs the backing file no page
 * freed and allocated again, as it costs a real device no erase-time
 * write.  They are punched when the handle closes (punch_stale). */
static int reset_zone_locked(struct emu *e, uint32_t z)
{
	struct emu_zstate *s = &e->zs[z];

	switch (s->cond) {
	case ZDEV_COND_IMP_OPEN: e->nr_imp--; break;
	case ZDEV_COND_EXP_OPEN: e->nr_exp--; break;
	case ZDEV_COND_CLOSED: e->nr_closed--; break;
	case ZDEV_COND_EMPTY:
	case ZDEV_COND_FULL:
		break;
	default:
		return -EIO;
	}
	if (s->cond != ZDEV_COND_EMPTY || (s->flags & ZS_DIRTY))
		s->flags |= ZS_STALE;
	s->wp = 0;
	s->dwp = 0;
	s->flags &= (uint8_t)~ZS_FINISHED;
	s->cond = ZDEV_COND_EMPTY;
	return 0;
}

/* Punch the zone's bytes from `from` to its end: old data a reset left
 * (ZS_STALE).  Called with zlock[z] held. */
static int punch_from(struct emu *e, uint32_t z, uint64_t from)
{
	int ret = zero_range(e->fd, e->data_off + zstart(e, z) + from,
			     e->hdr.zone_size - from);

	if (ret == 0) {
		pthread_mutex_lock(&e->st_lock);
		e->zs[z].flags &= (uint8_t)~ZS_STALE;
		if (e->zs[z].wp == 0)
			e->zs[z].flags &= (uint8_t)~ZS_DIRTY;
		pthread_mutex_unlock(&e->st_lock);
	}
	return ret;
}

/* At close of a read-write handle: the file keeps no zone's old data past
 * its write pointer (the image is as sparse as its live data). */
static void punch_stale(struct emu *e)
{
	for (uint32_t z = e->hdr.nr_conv_zones; z < e->hdr.nr_zones; z++) {
		pthread_mutex_lock(&e->zlock[z]);
		pthread_mutex_lock(&e->st_lock);
		bool stale = (e->zs[z].flags & ZS_STALE) != 0;
		uint64_t wp = e->zs[z].wp;
		pthread_mutex_unlock(&e->st_lock);
		if (stale) {
			int r = punch_from(e, z, wp);
			if (r)
				zf_warn("zdev: cannot punch the old data of zone %u: %s",
					z, strerror(-r));
		}
		pthread_mutex_unlock(&e->zlock[z]);
	}
}

/* *punch: a finish over old data asks the caller to punch from there (a
 * finished zone reads zeros where nothing was written). */
static int zone_op_locked(struct emu *e, enum zdev_zone_op op, uint32_t z,
			  uint64_t *punch)
{
	struct emu_zstate *s = &e->zs[z];
	int ret;

	switch (op) {
	case ZDEV_ZOP_RESET:
		return reset_zone_locked(e, z);
	case ZDEV_ZOP_OPEN:
		switch (s->cond) {
		case ZDEV_COND_EXP_OPEN:
			return 0;
		case ZDEV_COND_EMPTY:
		case ZDEV_COND_CLOSED:
			ret = check_resources(e, z);
			if (ret)
				return ret;
			if (s->cond == ZDEV_COND_CLOSED)
				e->nr_closed--;
			break;
		case ZDEV_COND_IMP_OPEN:
			e->nr_imp--;
			break;
		default:
			return -EIO;
		}
		s->cond = ZDEV_COND_EXP_OPEN;
		e->nr_exp++;
		return 0;
	case ZDEV_ZOP_CLOSE:
		switch (s->cond) {
		case ZDEV_COND_CLOSED:
			return 0;
		case ZDEV_COND_IMP_OPEN:
		case ZDEV_COND_EXP_OPEN:
			close_zone_locked(e, z);
			return 0;
		default:
			return -EIO;
		}
	case ZDEV_ZOP_FINISH:
		switch (s->cond) {
		case ZDEV_COND_FULL:
			return 0;
		case ZDEV_COND_EMPTY:
			/* NVMe ZNS: EMPTY -> FULL directly, no open or active
			 * resource needed (null_blk wants an active slot) */
			break;
		case ZDEV_COND_CLOSED:
			e->nr_closed--;
			break;
		case ZDEV_COND_IMP_OPEN:
			e->nr_imp--;
			break;
		case ZDEV_COND_EXP_OPEN:
			e->nr_exp--;
			break;
		default:
			return -EIO;
		}
		if (s->flags & ZS_STALE)
			*punch = s->wp;
		s->flags |= ZS_FINISHED;
		s->wp = e->hdr.zone_capacity;
		s->cond = ZDEV_COND_FULL;
		note_unflushed(e, z);
		return 0;
	}
	return -EINVAL;
}

static int emu_zone_op(struct zdev *dev, enum zdev_zone_op op, uint32_t z)
{
	struct emu *e = E(dev);
	uint64_t punch = UINT64_MAX;
	int ret;

	if (zconv(e, z))
		return -EINVAL;
	if (op == ZDEV_ZOP_RESET) {
		ret = fault_hit(e, ZDEV_FAULT_RESET);
		if (ret)
			return ret;
	}
	pthread_mutex_lock(&e->zlock[z]);
	pthread_mutex_lock(&e->st_lock);
	if (atomic_load(&e->dead))
		ret = -EIO;
	else
		ret = zone_op_locked(e, op, z, &punch);
	pthread_mutex_unlock(&e->st_lock);
	if (ret == 0 && punch != UINT64_MAX)
		ret = punch_from(e, z, punch);
	pthread_mutex_unlock(&e->zlock[z]);
	if (ret == 0)
		model_latency(e);
	return ret;
}

static int emu_reset_all(struct zdev *dev)
{
	struct emu *e = E(dev);
	int ret;

	ret = fault_hit(e, ZDEV_FAULT_RESET);
	if (ret)
		return ret;
	for (uint32_t z = e->hdr.nr_conv_zones; z < e->hdr.nr_zones; z++) {
		pthread_mutex_lock(&e->zlock[z]);
		pthread_mutex_lock(&e->st_lock);
		if (atomic_load(&e->dead))
			ret = -EIO;
		else if (e->zs[z].cond != ZDEV_COND_READONLY &&
			 e->zs[z].cond != ZDEV_COND_OFFLINE)
			ret = reset_zone_locked(e, z);
		pthread_mutex_unlock(&e->st_lock);
		pthread_mutex_unlock(&e->zlock[z]);
		if (ret)
			return ret;
	}
	model_latency(e);
	return 0;
}

static int emu_report_zones(struct zdev *dev, uint32_t first, uint32_t count,
			    struct zdev_zone *zones)
{
	struct emu *e = E(dev);

	if (atomic_load(&e->dead))
		return -EIO;
	pthread_mutex_lock(&e->st_lock);
	for (uint32_t i = 0; i < count; i++) {
		uint32_t z = first + i;
		const struct emu_zstate *s = &e->zs[z];
		struct zdev_zone *o = &zones[i];

		o->start = zstart(e, z);
		o->len = e->hdr.zone_size;
		o->capacity = zcap(e, z);
		o->type = zconv(e, z) ? ZDEV_ZONE_CONV : ZDEV_ZONE_SEQ;
		o->cond = zconv(e, z) ? ZDEV_COND_NOT_WP : s->cond;
		o->wp = o->start + (zconv(e, z) ? o->capacity : ZF_MIN(s->wp, o->capacity));
	}
	pthread_mutex_unlock(&e->st_lock);
	return (int)count;
}

/* ---- power loss -------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Roll every sequential zone back to its durable state (all locks held or
 * the file held exclusively).  Returns 0 or the first -errno of punching. */
static int rollback(struct emu *e, uint64_t tear_seed, uint32_t *nr_dropped)
{
	uint32_t bs = e->hdr.block_size;
	int ret = 0;

	*nr_dropped = 0;
	for (uint32_t z = e->hdr.nr_conv_zones; z < e->hdr.nr_zones; z++) {
		struct emu_zstate *s = &e->zs[z];
		uint64_t cap = e->hdr.zone_capacity;

		if (s->cond == ZDEV_COND_READONLY || s->cond == ZDEV_COND_OFFLINE)
			continue;
		if (s->dwp < s->wp) {
			uint64_t keep = 0, nblk = (s->wp - s->dwp) / bs;
			uint64_t from;
			int r;

			if (tear_seed)
				keep = splitmix64(tear_seed ^ splitmix64(z)) % (nblk + 1) * bs;
			from = s->dwp + keep;
			r = zero_range(e->fd, e->data_off + zstart(e, z) + from, s->wp - from);
			if (r && !ret)
				ret = r;
			if (from < s->wp)
				(*nr_dropped)++;
			if (!(s->cond == ZDEV_COND_FULL && (s->flags & ZS_FINISHED)))
				s->wp = from;
		}
		s->dwp = s->wp;
		if (s->cond == ZDEV_COND_FULL && (s->flags & ZS_FINISHED))
			continue;
		if (s->wp == 0)
			s->cond = ZDEV_COND_EMPTY;
		else if (s->wp == cap)
			s->cond = ZDEV_COND_FULL;
		else
			s->cond = ZDEV_COND_CLOSED;	/* a power cycle closes open zones */
	}
	count_zones(e);
	return ret;
}

/* ---- open / close ------------------------------------------------------ */

static void emu_free(struct emu *e)
{
	if (!e)
		return;
	if (e->map && e->map != MAP_FAILED)
		munmap(e->map, e->map_len);
	if (e->zlock) {
		for (uint32_t z = 0; z < e->hdr.nr_zones; z++)
			pthread_mutex_destroy(&e->zlock[z]);
		free(e->zlock);
	}
	free(e->inflight);
	free(e->unfl);
	free(e->unfl_mark);
	free(e->zbusy);
	pthread_mutex_destroy(&e->st_lock);
	pthread_mutex_destroy(&e->fault_lock);
	pthread_mutex_destroy(&e->model_lock);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

/* Open and map an emulator file.  lock: take flock(LOCK_EX|LOCK_NB). */
static int emu_load(const char *path, bool read_only, bool lock, struct emu **out)
{
	struct emu *e;
	struct stat st;
	int ret;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->fd = -1;
	pthread_mutex_init(&e->st_lock, NULL);
	pthread_mutex_init(&e->fault_lock, NULL);
	pthread_mutex_init(&e->model_lock, NULL);
	e->read_only = read_only;

	e->fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (e->fd < 0) {
		ret = -errno;
		zf_err("zdev: %s: %s", path, strerror(-ret));
		goto fail;
	}
	if (fstat(e->fd, &st) < 0) {
		ret = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		zf_err("zdev: %s: not an emulator file (not a regular file)", path);
		ret = -ENOTSUP;
		goto fail;
	}
	/* O_NONBLOCK only kept a FIFO from blocking the open */
	if (fcntl(e->fd, F_SETFL, 0) < 0) {
		ret = -errno;
		goto fail;
	}
	if (lock && flock(e->fd, LOCK_EX | LOCK_NB) < 0) {
		ret = -errno;
		if (ret == -EWOULDBLOCK) {
			ret = -EBUSY;
			zf_err("zdev: %s: device busy: the emulator file is already open "
			       "read-write or exclusively by another zdev_open", path);
		} else {
			zf_err("zdev: %s: flock: %s", path, strerror(-ret));
		}
		goto fail;
	}
	ret = read_header(e->fd, path, &e->hdr, (uint64_t)st.st_size);
	if (ret)
		goto fail;
	e->data_off = e->hdr.data_off;
	e->map_len = e->hdr.state_off + state_len(e->hdr.nr_zones);
	e->map = mmap(NULL, e->map_len, PROT_READ | (read_only ? 0 : PROT_WRITE),
		      MAP_SHARED, e->fd, 0);
	if (e->map == MAP_FAILED) {
		ret = -errno;
		e->map = NULL;
		zf_err("zdev: %s: mmap of the zone table: %s", path, strerror(-ret));
		goto fail;
	}
	e->zs = (struct emu_zstate *)((char *)e->map + e->hdr.state_off);
	ret = check_zone_table(e, path, !read_only);
	if (ret)
		goto fail;
	count_zones(e);

	e->zlock = calloc(e->hdr.nr_zones, sizeof(*e->zlock));
	e->inflight = calloc(e->hdr.nr_zones, 1);
	e->unfl = calloc(e->hdr.nr_zones, sizeof(*e->unfl));
	e->unfl_mark = calloc(e->hdr.nr_zones, 1);
	e->zbusy = calloc(e->hdr.nr_zones, sizeof(*e->zbusy));
	if (!e->zlock || !e->inflight || !e->unfl || !e->unfl_mark || !e->zbusy) {
		ret = -ENOMEM;
		free(e->zlock);
		e->zlock = NULL;
		goto fail;
	}
	for (uint32_t z = 0; z < e->hdr.nr_zones; z++) {
		pthread_mutex_init(&e->zlock[z], NULL);
		/* left unflushed by the previous user of the file */
		if (!zconv(e, z) && e->zs[z].dwp != e->zs[z].wp)
			note_unflushed(e, z);
	}
	*out = e;
	return 0;
fail:
	emu_free(e);
	return ret;
}

static int model_opt(int64_t v, uint32_t stored, uint32_t *out)
{
	if (v < 0) {
		*out = stored;
		return 0;
	}
	if (v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int zdev_emu_backend_open(struct zdev *dev, const char *path,
			  const struct zdev_open_opts *o)
{
	struct emu *e;
	const char *sync;
	int ret;

	ret = emu_load(path, o->read_only, !o->read_only || o->exclusive, &e);
	if (ret)
		return ret;
	if (model_opt(o->zone_write_mbps, e->hdr.zone_write_mbps, &e->w_mbps) ||
	    model_opt(o->zone_read_mbps, e->hdr.zone_read_mbps, &e->r_mbps) ||
	    model_opt(o->device_mbps, e->hdr.device_mbps, &e->d_mbps) ||
	    model_opt(o->latency_us, e->hdr.latency_us, &e->lat_us)) {
		zf_err("zdev: %s: performance model option out of range", path);
		emu_free(e);
		return -EINVAL;
	}
	e->model_on = e->w_mbps || e->r_mbps || e->d_mbps || e->lat_us;
	sync = getenv("ZONEFUSE_EMU_SYNC");
	e->sync_backing = sync && *sync && strcmp(sync, "0") != 0;

	dev->ops = &emu_ops;
	dev->priv = e;
	dev->geo = (struct zdev_geometry){
		.zone_size = e->hdr.zone_size,
		.zone_capacity = e->hdr.zone_capacity,
		.size = e->hdr.zone_size * e->hdr.nr_zones,
		.nr_zones = e->hdr.nr_zones,
		.nr_conv_zones = e->hdr.nr_conv_zones,
		.block_size = e->hdr.block_size,
		.mem_align = e->hdr.block_size,
		.max_open = e->hdr.max_open,
		.max_active = e->hdr.max_active,
	};
	if (e->hdr.max_open && e->nr_imp + e->nr_exp > e->hdr.max_open)
		zf_warn("zdev: %s: %u zones open, more than max_open %u", path,
			e->nr_imp + e->nr_exp, e->hdr.max_open);
	if (e->hdr.max_active &&
	    e->nr_imp + e->nr_exp + e->nr_closed > e->hdr.max_active)
		zf_warn("zdev: %s: %u zones active, more than max_active %u", path,
			e->nr_imp + e->nr_exp + e->nr_closed, e->hdr.max_active);
	return 0;
}

static void emu_close(struct zdev *dev)
{
	struct emu *e = E(dev);

	if (!e->read_only)
		punch_stale(e);
	emu_free(e);
	dev->priv = NULL;
}

/* ---- emulator-only API ------------------------------------------------- */

int zdev_emu_create(const char *path, const struct zdev_emu_params *p,
		    bool overwrite)
{
	struct emu_hdr h;
	struct emu_zstate *tab = NULL;
	const char *msg = NULL;
	uint64_t slen;
	struct stat st;
	int fd, ret;

	if (!path || !p)
		return -EINVAL;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, EMU_MAGIC, 8);
	h.version = EMU_VERSION;
	h.hdr_size = sizeof(h);
	h.zstate_size = sizeof(struct emu_zstate);
	h.block_size = p->block_size ? p->block_size : 4096;
	h.zone_size = p->zone_size;
	h.zone_capacity = p->zone_capacity ? p->zone_capacity : p->zone_size;
	h.nr_zones = p->nr_zones;
	h.nr_conv_zones = p->nr_conv_zones;
	h.max_open = p->max_open;
	h.max_active = p->max_active;
	h.zone_write_mbps = p->zone_write_mbps;
	h.zone_read_mbps = p->zone_read_mbps;
	h.device_mbps = p->device_mbps;
	h.latency_us = p->latency_us;
	ret = check_geometry(h.zone_size, h.zone_capacity, h.nr_zones,
			     h.nr_conv_zones, h.block_size, h.max_open,
			     h.max_active, &msg);
	if (ret) {
		zf_err("zdev: cannot create %s: %s", path, msg);
		return ret;
	}
	slen = state_len(h.nr_zones);
	h.state_off = EMU_HDR_AREA;
	h.data_off = ZF_ALIGN_UP(h.state_off + slen, EMU_DATA_ALIGN);
	h.created = (uint64_t)time(NULL);
	h.crc = hdr_crc(&h);

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (overwrite ? 0 : O_EXCL), 0644);
	if (fd < 0) {
		ret = -errno;
		zf_err("zdev: cannot create %s: %s%s", path, strerror(-ret),
		       ret == -EEXIST ? " (use overwrite / --force)" : "");
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		zf_err("zdev: cannot create %s: not a regular file", path);
		ret = -EINVAL;
		goto out;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		zf_err("zdev: cannot create %s: %s", path,
		       ret == -EBUSY ? "file is in use by an open device" : strerror(-ret));
		goto out;
	}
	tab = calloc(1, slen);
	if (!tab) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t z = 0; z < h.nr_zones; z++) {
		bool conv = z < h.nr_conv_zones;

		tab[z].type = conv ? ZDEV_ZONE_CONV : ZDEV_ZONE_SEQ;
		tab[z].cond = conv ? ZDEV_COND_NOT_WP : ZDEV_COND_EMPTY;
	}
	if (ftruncate(fd, 0) < 0 ||
	    ftruncate(fd, (off_t)(h.data_off + h.zone_size * h.nr_zones)) < 0) {
		ret = -errno;
		zf_err("zdev: cannot create %s: %s", path, strerror(-ret));
		goto out;
	}
	ret = pwrite_full(fd, tab, slen, h.state_off);
	if (!ret)
		ret = pwrite_full(fd, &h, sizeof(h), 0);
	if (!ret && fdatasync(fd) < 0)
		ret = -errno;
	if (ret)
		zf_err("zdev: cannot create %s: %s", path, strerror(-ret));
out:
	free(tab);
	close(fd);
	return ret;
}

int zdev_emu_get_params(struct zdev *dev, struct zdev_emu_params *p)
{
	struct emu *e;

	if (!dev || !p)
		return -EINVAL;
	if (dev->ops != &emu_ops)
		return -ENOTSUP;
	e = E(dev);
	*p = (struct zdev_emu_params){
		.zone_size = e->hdr.zone_size,
		.zone_capacity = e->hdr.zone_capacity,
		.nr_zones = e->hdr.nr_zones,
		.nr_conv_zones = e->hdr.nr_conv_zones,
		.block_size = e->hdr.block_size,
		.max_open = e->hdr.max_open,
		.max_active = e->hdr.max_active,
		.zone_write_mbps = e->w_mbps,
		.zone_read_mbps = e->r_mbps,
		.device_mbps = e->d_mbps,
		.latency_us = e->lat_us,
	};
	return 0;
}

int zdev_emu_power_loss(struct zdev *dev, uint64_t tear_seed)
{
	struct emu *e;
	uint32_t dropped;
	int ret;

	if (!dev)
		return -EINVAL;
	if (dev->ops != &emu_ops)
		return -ENOTSUP;
	e = E(dev);
	if (e->read_only)
		return -EBADF;
	if (atomic_load(&e->dead))
		return -EIO;
	for (uint32_t z = 0; z < e->hdr.nr_zones; z++)
		pthread_mutex_lock(&e->zlock[z]);
	pthread_mutex_lock(&e->st_lock);
	if (atomic_load(&e->dead)) {
		ret = -EIO;
	} else {
		ret = rollback(e, tear_seed, &dropped);
		atomic_store(&e->dead, true);
	}
	pthread_mutex_unlock(&e->st_lock);
	for (uint32_t z = e->hdr.nr_zones; z-- > 0;)
		pthread_mutex_unlock(&e->zlock[z]);
	if (ret == 0)
		zf_dbg("zdev: %s: simulated power loss, %u zone(s) lost data",
		       dev->path, dropped);
	return ret;
}

int zdev_emu_power_loss_file(const char *path, uint64_t tear_seed)
{
	struct emu *e;
	uint32_t dropped;
	int ret;

	if (!path)
		return -EINVAL;
	ret = emu_load(path, false, true, &e);
	if (ret)
		return ret;
	ret = rollback(e, tear_seed, &dropped);
	if (ret)
		zf_err("zdev: %s: power loss: cannot drop data: %s", path, strerror(-ret));
	else
		zf_dbg("zdev: %s: simulated power loss, %u zone(s) lost data",
		       path, dropped);
	emu_free(e);
	return ret;
}

static const struct zdev_ops emu_ops = {
	.type = ZDEV_BACKEND_EMU,
	.name = "emulated",
	.close = emu_close,
	.report_zones = emu_report_zones,
	.zone_op = emu_zone_op,
	.reset_all = emu_reset_all,
	.write = emu_write,
	.read = emu_read,
	.flush = emu_flush,
	.io_batch = emu_io_batch,
	.read_fd = emu_read_fd,
};
