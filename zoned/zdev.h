/* zdev — one API over zoned block devices.
 *
 * Purpose: everything above this layer (metadata log, zone allocator, file
 * system) talks to a zoned device only through these functions.  Two
 * backends implement it:
 *   - ZDEV_BACKEND_ZBD: a real zoned block device (/dev/nvme0n2, /dev/nullb0,
 *     an SMR disk): zone management through libzbd, data I/O with O_DIRECT
 *     through liburing.
 *   - ZDEV_BACKEND_EMU: a regular (sparse) file created by `zonefuse-emu
 *     create`, emulating a host-managed zoned device with a volatile write
 *     cache, open/active limits and an optional performance model.
 * zdev_open() picks the backend by looking at the path (a block device is
 * ZBD, a regular file carrying the emulator header is EMU).
 *
 * Units: every offset and length in this interface is in BYTES, relative to
 * the start of the device.  Sectors exist only inside the backends.
 *
 * Errors: every function returns 0 (or a non-negative count) on success and
 * -errno on failure.  The zone rules map to errno exactly as Linux reports
 * them for a zoned block device (see the table in zdev_emu.c):
 *   write not at the write pointer, write to a FULL/READONLY/OFFLINE zone,
 *   write crossing zone capacity                        -> -EIO
 *   offset/length not a multiple of the block size,
 *   I/O beyond the device end, bad zone index           -> -EINVAL
 *   implicit or explicit open beyond max_open           -> -ETOOMANYREFS
 *   open (implicit or explicit) beyond max_active       -> -EOVERFLOW
 *   zone management on a conventional zone              -> -EINVAL
 *   I/O after a simulated power loss (emulator only)    -> -EIO
 *
 * Invariants:
 *   - a sequential zone is written only at its write pointer; the write
 *     pointer only moves forward, except by reset;
 *   - wp - start <= capacity <= len for every zone;
 *   - open zones (IMP_OPEN + EXP_OPEN) <= max_open and active zones
 *     (open + CLOSED) <= max_active, when those limits are non-zero.
 *
 * Buffers: data buffers passed to zdev_read/zdev_write/zdev_io_batch must be
 * aligned to zdev_geometry()->mem_align bytes (4096 is always enough; use
 * zdev_buf_alloc()).  Lengths and offsets must be multiples of block_size.
 *
 * Thread safety: every function may be called from any thread at any time
 * on the same struct zdev, except zdev_close().  Writes to the SAME zone
 * from different threads must be ordered by the caller (the device accepts
 * only the write at the current write pointer); writes to different zones
 * may run concurrently, which is how callers keep several zones busy.
 * Lock order: zdev holds only internal leaf locks; callers may call it with
 * their own locks held.
 *
 * Blocking: every call that reaches the device (read, write, flush, batch,
 * report, zone management; not one that fails its argument checks) first
 * gives the calling thread's blocking notice (zf_will_block, zf_common.h).
 */
#ifndef ZONEFUSE_ZDEV_H
#define ZONEFUSE_ZDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum zdev_backend {
	ZDEV_BACKEND_EMU = 1,	/* emulated zoned device in a regular file */
	ZDEV_BACKEND_ZBD = 2,	/* real zoned block device (libzbd + liburing) */
};

enum zdev_zone_type {
	ZDEV_ZONE_CONV = 1,	/* conventional: random writes, no write pointer */
	ZDEV_ZONE_SEQ = 2,	/* sequential write required */
};

/* Same values as the kernel's BLK_ZONE_COND_*. */
enum zdev_zone_cond {
	ZDEV_COND_NOT_WP = 0x0,
	ZDEV_COND_EMPTY = 0x1,
	ZDEV_COND_IMP_OPEN = 0x2,
	ZDEV_COND_EXP_OPEN = 0x3,
	ZDEV_COND_CLOSED = 0x4,
	ZDEV_COND_READONLY = 0xD,
	ZDEV_COND_FULL = 0xE,
	ZDEV_COND_OFFLINE = 0xF,
};

struct zdev_geometry {
	uint64_t zone_size;	/* bytes between zone starts */
	uint64_t zone_capacity;	/* usable bytes of a sequential zone (<= zone_size) */
	uint64_t size;		/* bytes: nr_zones * zone_size */
	uint32_t nr_zones;
	uint32_t nr_conv_zones;	/* conventional zones (always the first ones) */
	uint32_t block_size;	/* bytes: logical block size, I/O granularity */
	uint32_t mem_align;	/* bytes: required buffer alignment */
	uint32_t max_open;	/* max open zones, 0 = no limit */
	uint32_t max_active;	/* max active zones, 0 = no limit */
};

struct zdev_zone {
	uint64_t start;		/* bytes */
	uint64_t len;		/* bytes (zone size) */
	uint64_t capacity;	/* bytes */
	uint64_t wp;		/* bytes, absolute device offset of the write pointer */
	uint8_t type;		/* enum zdev_zone_type */
	uint8_t cond;		/* enum zdev_zone_cond */
};

/* Options for zdev_open(). Zero-initialise; every field is optional. */
struct zdev_open_opts {
	bool exclusive;		/* refuse (-EBUSY) if another zdev_open holds it exclusively */
	bool read_only;
	/* Emulator only: override the performance model stored in the file
	 * (-1 keeps the stored value, 0 turns that part off). */
	int64_t zone_write_mbps;	/* MB/s (10^6 bytes/s) per zone */
	int64_t zone_read_mbps;		/* MB/s per zone */
	int64_t device_mbps;		/* MB/s for the whole device */
	int64_t latency_us;		/* microseconds per request */
};
#define ZDEV_OPEN_OPTS_INIT { .zone_write_mbps = -1, .zone_read_mbps = -1, \
			      .device_mbps = -1, .latency_us = -1 }

struct zdev;

/* Open a device. opts may be NULL (defaults: shared, read-write, stored model). */
int zdev_open(const char *path, const struct zdev_open_opts *opts,
	      struct zdev **out);
void zdev_close(struct zdev *dev);

enum zdev_backend zdev_backend(const struct zdev *dev);
const char *zdev_backend_name(const struct zdev *dev);	/* "emulated", "zbd" */
const struct zdev_geometry *zdev_geometry(const struct zdev *dev);
const char *zdev_path(const struct zdev *dev);

/* Report zones [first, first+count) into zones[]; returns the number filled. */
int zdev_report_zones(struct zdev *dev, uint32_t first, uint32_t count,
		      struct zdev_zone *zones);

/* Zone management, by zone index. */
int zdev_zone_reset(struct zdev *dev, uint32_t zone);
int zdev_zone_open(struct zdev *dev, uint32_t zone);	/* explicit open */
int zdev_zone_close(struct zdev *dev, uint32_t zone);
int zdev_zone_finish(struct zdev *dev, uint32_t zone);
int zdev_reset_all(struct zdev *dev);

/* Synchronous I/O. Returns bytes transferred (always len on success).
 * zdev_write on a sequential zone must start at the zone's write pointer and
 * must not cross zone capacity. zdev_read may cross zone boundaries; bytes
 * at or beyond a zone's write pointer read as zeros. */
ssize_t zdev_write(struct zdev *dev, uint64_t offset, const void *buf, size_t len);
ssize_t zdev_read(struct zdev *dev, uint64_t offset, void *buf, size_t len);

/* Where device bytes [offset, offset+len) lie in a plain file, for a reader
 * that moves them itself (splice(2) into a FUSE reply saves the copy
 * through a buffer): returns that file's descriptor and sets *file_off, or
 * -EOPNOTSUPP when the bytes are not plain file contents or must go through
 * zdev_read: a real device, a range that crosses a zone or its write
 * pointer, the emulator's performance model, an injected read fault.  No
 * alignment is required.  The descriptor stays open until zdev_close; the
 * bytes stay what they are until the zone is reset, which the caller must
 * exclude until it has moved them.  Counted as one read. */
int zdev_read_fd(struct zdev *dev, uint64_t offset, size_t len, uint64_t *file_off);
/* Whether zdev_read_fd can ever succeed on this device (the emulator
 * without its performance model). */
bool zdev_reads_as_file(struct zdev *dev);

/* Persist the volatile write cache: after it returns 0, every write that
 * completed before the call survives a power loss. */
int zdev_flush(struct zdev *dev);

/* Asynchronous batch: the requests are submitted together and run
 * concurrently (requests to the same zone run in array order); the call
 * returns when all have completed.  Each request's result is stored in
 * req->result (bytes or -errno).  Returns the number of requests that
 * succeeded, or -errno if the batch could not be submitted at all. */
enum zdev_op { ZDEV_OP_READ = 0, ZDEV_OP_WRITE = 1 };
struct zdev_req {
	uint8_t op;		/* enum zdev_op */
	uint64_t offset;	/* bytes */
	void *buf;
	size_t len;		/* bytes */
	ssize_t result;		/* out: bytes or -errno */
};
int zdev_io_batch(struct zdev *dev, struct zdev_req *reqs, unsigned int nr);

/* Aligned buffer helpers (mem_align of the device, at least 4096). */
void *zdev_buf_alloc(size_t len);
void zdev_buf_free(void *buf);

/* Zone predicates (read like prose). */
static inline bool zdev_zone_seq(const struct zdev_zone *z)
{ return z->type == ZDEV_ZONE_SEQ; }
static inline bool zdev_zone_conv(const struct zdev_zone *z)
{ return z->type == ZDEV_ZONE_CONV; }
static inline bool zdev_zone_empty(const struct zdev_zone *z)
{ return z->cond == ZDEV_COND_EMPTY; }
static inline bool zdev_zone_full(const struct zdev_zone *z)
{ return z->cond == ZDEV_COND_FULL; }
static inline bool zdev_zone_open_cond(const struct zdev_zone *z)
{ return z->cond == ZDEV_COND_IMP_OPEN || z->cond == ZDEV_COND_EXP_OPEN; }
static inline bool zdev_zone_active(const struct zdev_zone *z)
{ return zdev_zone_open_cond(z) || z->cond == ZDEV_COND_CLOSED; }
static inline uint64_t zdev_zone_remaining(const struct zdev_zone *z)
{ return z->start + z->capacity - z->wp; }
/* The same on a bare condition (callers that cache it, zalloc, stats). */
static inline bool zdev_cond_open(uint8_t cond)
{ return cond == ZDEV_COND_IMP_OPEN || cond == ZDEV_COND_EXP_OPEN; }
static inline bool zdev_cond_active(uint8_t cond)
{ return zdev_cond_open(cond) || cond == ZDEV_COND_CLOSED; }
const char *zdev_cond_name(uint8_t cond);	/* "empty", "imp_open", ... */

/* Counters kept by every backend (bytes and operation counts since open). */
struct zdev_stats {
	uint64_t bytes_written;
	uint64_t bytes_read;
	uint64_t writes, reads, flushes;
	uint64_t resets, finishes, opens, closes;
};
void zdev_get_stats(const struct zdev *dev, struct zdev_stats *st);

/* ---- Recording (crash-state testing) ---------------------------------- *
 * A device handle can record every request that changes what the device
 * holds, in the order they completed: data writes (with a copy of their
 * bytes), cache flushes, zone resets and finishes (zone open and close
 * change nothing a power loss keeps, so they are not recorded; the zdev API
 * has no FUA write).  A crash tester rebuilds any crash state from a copy
 * of the device taken when the recording started plus a chosen subset of
 * the recorded writes (zoned/zdev_record.c, tests/crash/).  Recording costs
 * a copy of every byte written; it stops taking entries (and says so in
 * zdev_record_get) beyond max_bytes of data.  Any thread; one recording per
 * handle. */
enum zdev_rec_kind {
	ZDEV_REC_WRITE = 1,	/* off, len, data */
	ZDEV_REC_FLUSH = 2,	/* every write completed before it is durable */
	ZDEV_REC_RESET = 3,	/* zone reset: zone */
	ZDEV_REC_FINISH = 4,	/* zone finish: zone */
	ZDEV_REC_RESET_ALL = 5,	/* every sequential zone reset */
};
struct zdev_rec_op {
	uint8_t kind;		/* enum zdev_rec_kind */
	uint32_t zone;		/* zone index (write, reset, finish) */
	uint64_t off;		/* bytes, device offset (write) */
	uint64_t len;		/* bytes (write) */
	uint8_t *data;		/* len bytes (write), owned by the recording */
};
/* Start recording on dev (an earlier recording is dropped).  0 or -errno. */
int zdev_record_start(struct zdev *dev, uint64_t max_bytes);
/* The entries so far (valid until the next call on the recording); returns
 * the count, or -E2BIG if max_bytes was exceeded (the entries are then a
 * prefix of what happened), -ENOENT if dev is not recording. */
long zdev_record_get(struct zdev *dev, const struct zdev_rec_op **ops);
/* Stop recording and free the entries. */
void zdev_record_stop(struct zdev *dev);

/* ---- Emulator-only ---------------------------------------------------- */

struct zdev_emu_params {
	uint64_t zone_size;	/* bytes, multiple of block_size */
	uint64_t zone_capacity;	/* bytes, 0 = zone_size */
	uint32_t nr_zones;
	uint32_t nr_conv_zones;	/* 0 by default */
	uint32_t block_size;	/* bytes: 512 or 4096 (default 4096) */
	uint32_t max_open;	/* 0 = unlimited */
	uint32_t max_active;	/* 0 = unlimited */
	uint32_t zone_write_mbps, zone_read_mbps, device_mbps;	/* 0 = off */
	uint32_t latency_us;	/* 0 = off */
};

/* Parameters of an open emulated device: geometry and limits as stored in
 * the file, performance model as in effect for this handle (after the
 * zdev_open_opts overrides).  Returns -ENOTSUP on other backends. */
int zdev_emu_get_params(struct zdev *dev, struct zdev_emu_params *p);

/* Create an emulated device file (fails with -EEXIST unless overwrite). */
int zdev_emu_create(const char *path, const struct zdev_emu_params *p,
		    bool overwrite);

/* Simulate a power loss on an open emulated device: every write not yet
 * covered by a zdev_flush() is dropped (with tear_seed != 0, a random
 * block-aligned prefix of the unflushed part of each zone survives instead,
 * as a torn write).  Afterwards every call on dev fails with -EIO; close it
 * and reopen.  Returns -ENOTSUP on other backends. */
int zdev_emu_power_loss(struct zdev *dev, uint64_t tear_seed);

/* The same on a closed device file (e.g. after the daemon was killed -9):
 * `zonefuse-emu powerloss FILE`. */
int zdev_emu_power_loss_file(const char *path, uint64_t tear_seed);

/* Fault injection (emulator): make the next `count` operations of a kind
 * fail with `err` (negative errno) after `skip` successful ones.
 * kind: ZDEV_FAULT_WRITE, ZDEV_FAULT_READ, ZDEV_FAULT_RESET, ZDEV_FAULT_FLUSH. */
enum zdev_fault_kind { ZDEV_FAULT_WRITE, ZDEV_FAULT_READ, ZDEV_FAULT_RESET,
		       ZDEV_FAULT_FLUSH, ZDEV_FAULT_NR };
int zdev_emu_inject_fault(struct zdev *dev, enum zdev_fault_kind kind,
			  uint32_t skip, uint32_t count, int err);

#endif
