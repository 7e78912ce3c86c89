/* zf_common — small helpers shared by every module: CRC32C, logging, time,
 * growing arrays, the notice a thread gets before it blocks.
 *
 * Logging: zf_log_*() writes one line per message, "LEVEL: text", to one
 * target: standard error (the default; "zonefuse: LEVEL: text"), syslog
 * (ident "zonefuse", with the pid) or a file (appended, one write(2) per line,
 * "DATE TIME zonefuse[PID]: LEVEL: text").  With a tag set (the daemon's
 * device), syslog and file lines carry it before the level, "TAG: LEVEL:
 * text", so that several daemons can share one log.  While an echo level
 * is set, messages at or above that severity also go to standard error
 * when the target is syslog or a file (the terminal of a daemon that has
 * not detached yet).  A hook, when set, sees every message first and may
 * keep it from the target and the echo (tools use it to replace library
 * messages by their own).
 * Every ERROR is counted (zf_log_error_count()) so integration tests can fail
 * a run in which the daemon logged an error.
 * Thread safety: all functions are thread-safe.
 */
#ifndef ZONEFUSE_COMMON_H
#define ZONEFUSE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define ZF_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ZF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ZF_MAX(a, b) ((a) > (b) ? (a) : (b))
#define ZF_ALIGN_UP(x, a) ((((x) + (a) - 1) / (a)) * (a))
#define ZF_ALIGN_DOWN(x, a) (((x) / (a)) * (a))

/* CRC32C (Castagnoli), seed 0 for a fresh checksum; chain by passing the
 * previous result. */
uint32_t zf_crc32c(uint32_t crc, const void *buf, size_t len);

enum zf_log_level { ZF_LOG_ERROR = 0, ZF_LOG_WARN = 1, ZF_LOG_INFO = 2, ZF_LOG_DEBUG = 3 };
void zf_log_set_level(enum zf_log_level lvl);
void zf_log_use_syslog(int on);		/* on: syslog; off: standard error */
/* Append to the file at path (created 0640) from now on; -errno if it cannot
 * be opened, and the target is then unchanged.  The descriptor survives
 * fork/daemonisation. */
int zf_log_to_file(const char *path);
/* The tag of syslog and file lines (copied, truncated to 255 bytes); NULL
 * or "" = none. */
void zf_log_set_tag(const char *tag);
/* Also print messages of level lvl and more severe on standard error while
 * the target is syslog or a file; -1 = do not (the default). */
void zf_log_set_echo(int lvl);
/* Every message is passed to fn first while set (NULL: unset); fn returns
 * nonzero when it consumed the message, 0 to let it go on to the target.
 * Messages below the level set with zf_log_set_level() are not passed. */
typedef int (*zf_log_hook_fn)(enum zf_log_level lvl, const char *msg, void *arg);
void zf_log_set_hook(zf_log_hook_fn fn, void *arg);
void zf_log(enum zf_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
uint64_t zf_log_error_count(void);
#define zf_err(...) zf_log(ZF_LOG_ERROR, __VA_ARGS__)
#define zf_warn(...) zf_log(ZF_LOG_WARN, __VA_ARGS__)
#define zf_info(...) zf_log(ZF_LOG_INFO, __VA_ARGS__)
#define zf_dbg(...) zf_log(ZF_LOG_DEBUG, __VA_ARGS__)

/* Monotonic clock in nanoseconds. */
uint64_t zf_now_ns(void);

/* Nanoseconds <-> struct timespec (times since the epoch may be negative:
 * the division truncates, as the kernel's does). */
#define ZF_NS_PER_SEC 1000000000ll
static inline struct timespec zf_ns_to_timespec(int64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / ZF_NS_PER_SEC),
				  .tv_nsec = (long)(ns % ZF_NS_PER_SEC) };
}
static inline int64_t zf_timespec_to_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * ZF_NS_PER_SEC + ts.tv_nsec;
}
/* The CLOCK_REALTIME time `ns` from now (pthread_cond_timedwait's clock). */
struct timespec zf_realtime_after(uint64_t ns);
/* Sleep until the monotonic clock reads deadline_ns. */
void zf_sleep_until_ns(uint64_t deadline_ns);

/* The blocking notice: a thread may name a function that is called, once,
 * the first time the thread is about to wait for something that may take
 * long: device I/O (zdev.h) or another thread's progress (a write-out in
 * flight, the log's leader, free space).  The FUSE request loop serves a
 * request on the thread that read it and gives that thread's reading role
 * to another worker only when the request does block.
 * Every such wait on a request's path calls zf_will_block() first; waits
 * for a lock held only briefly do not.  Per thread: set, cleared and
 * called on the same thread; fn NULL clears.  zf_will_block() clears the
 * notice before calling it, so fn may block. */
void zf_block_notice_set(void (*fn)(void *arg), void *arg);
void zf_will_block(void);

/* Parse a size like "64M", "4k", "1G", "4096" into bytes; -EINVAL on junk. */
int zf_parse_size(const char *s, uint64_t *out);

/* Growing arrays: v (NULL or from malloc/realloc) holds *cap elements of
 * elem bytes; returns it reallocated to hold at least `need`, the capacity
 * doubling from `min` (or from *cap), and sets *cap; NULL (v untouched,
 * still valid) when memory or the size's range runs out.  A v that already
 * holds `need` comes back as it is. */
void *zf_grow(void *v, size_t *cap, size_t need, size_t elem, size_t min);
/* Format bytes as "1.5 GiB" into buf. Returns buf. */
char *zf_fmt_bytes(uint64_t bytes, char *buf, size_t len);

#endif
