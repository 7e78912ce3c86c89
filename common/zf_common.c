/* zf_common — see zf_common.h. */
#include "zf_common.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
}

#if defined(__x86_64__)
/* The SSE4.2 crc32 instruction computes CRC32C (Castagnoli) directly. */
__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = ~crc;
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (len--)
		c32 = __builtin_ia32_crc32qi(c32, *p++);
	return ~c32;
}
#endif

uint32_t zf_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return crc32c_hw(crc, p, len);
#endif
	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		v ^= crc;
		crc = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
		      crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
		      crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
		      crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

static _Atomic int log_level = ZF_LOG_INFO;
static _Atomic int log_syslog;
static _Atomic int log_fd = -1;
static _Atomic uint64_t log_errors;
static _Atomic int log_echo = -1;
static pthread_mutex_t log_hook_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_tag[256];	/* log_hook_lock; set before threads start */
static zf_log_hook_fn log_hook;
static void *log_hook_arg;

void zf_log_set_level(enum zf_log_level lvl) { log_level = lvl; }
uint64_t zf_log_error_count(void) { return log_errors; }

static void log_close_file(void)
{
	int fd = atomic_exchange(&log_fd, -1);
	if (fd >= 0)
		close(fd);
}

void zf_log_use_syslog(int on)
{
	log_close_file();
	if (on)
		openlog("zonefuse", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_syslog = on;
}

int zf_log_to_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd < 0)
		return -errno;
	log_syslog = 0;
	fd = atomic_exchange(&log_fd, fd);
	if (fd >= 0)
		close(fd);
	return 0;
}

void zf_log_set_tag(const char *tag)
{
	pthread_mutex_lock(&log_hook_lock);
	snprintf(log_tag, sizeof(log_tag), "%s", tag ? tag : "");
	pthread_mutex_unlock(&log_hook_lock);
}

void zf_log_set_echo(int lvl) { log_echo = lvl; }

void zf_log_set_hook(zf_log_hook_fn fn, void *arg)
{
	pthread_mutex_lock(&log_hook_lock);
	log_hook = fn;
	log_hook_arg = arg;
	pthread_mutex_unlock(&log_hook_lock);
}

/* One write(2) per line, so lines of concurrent writers never interleave in
 * an O_APPEND file. */
static void log_file_line(int fd, const char *tag, const char *level, const char *msg)
{
	char line[1500], ts[40];
	struct timespec now;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	localtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
	int n = snprintf(line, sizeof(line), "%s.%03ld zonefuse[%ld]: %s%s%s: %s\n", ts,
			 now.tv_nsec / 1000000, (long)getpid(), tag, *tag ? ": " : "", level, msg);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	if (write(fd, line, (size_t)n) < 0)
		return;	/* nowhere left to report it */
}

void zf_log(enum zf_log_level lvl, const char *fmt, ...)
{
	static const char *names[] = { "error", "warning", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char msg[1024];
	va_list ap;

	if (lvl == ZF_LOG_ERROR)
		log_errors++;
	if ((int)lvl > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	char tag[sizeof(log_tag)];
	pthread_mutex_lock(&log_hook_lock);
	zf_log_hook_fn hook = log_hook;
	void *arg = log_hook_arg;
	memcpy(tag, log_tag, sizeof(tag));
	pthread_mutex_unlock(&log_hook_lock);
	if (hook && hook(lvl, msg, arg))
		return;
	int fd = log_fd;
	if (fd >= 0)
		log_file_line(fd, tag, names[lvl], msg);
	else if (log_syslog)
		syslog(prio[lvl], "%s%s%s: %s", tag, *tag ? ": " : "", names[lvl], msg);
	if ((fd < 0 && !log_syslog) || (int)lvl <= log_echo)
		fprintf(stderr, "zonefuse: %s: %s\n", names[lvl], msg);
}

uint64_t zf_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct timespec zf_realtime_after(uint64_t ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return zf_ns_to_timespec(zf_timespec_to_ns(ts) + (int64_t)ns);
}

void zf_sleep_until_ns(uint64_t deadline_ns)
{
	struct timespec ts = zf_ns_to_timespec((int64_t)deadline_ns);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static _Thread_local void (*block_fn)(void *);
static _Thread_local void *block_arg;

void zf_block_notice_set(void (*fn)(void *arg), void *arg)
{
	block_fn = fn;
	block_arg = fn ? arg : NULL;
}

void zf_will_block(void)
{
	void (*fn)(void *) = block_fn;
	if (fn) {
		block_fn = NULL;
		fn(block_arg);
	}
}

int zf_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case 0: break;
	case 'K': mul = 1ull << 10; end++; break;
	case 'M': mul = 1ull << 20; end++; break;
	case 'G': mul = 1ull << 30; end++; break;
	case 'T': mul = 1ull << 40; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (v > UINT64_MAX / mul)
		return -ERANGE;
	*out = v * mul;
	return 0;
}

char *zf_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024.0 && u + 1 < ZF_ARRAY_SIZE(units)) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

void *zf_grow(void *v, size_t *cap, size_t need, size_t elem, size_t min)
{
	if (need <= *cap && v)
		return v;
	size_t n = *cap ? *cap : (min ? min : 1);
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return NULL;
		n *= 2;
	}
	if (elem && n > SIZE_MAX / elem)
		return NULL;
	void *nv = realloc(v, n * elem);
	if (!nv)
		return NULL;
	*cap = n;
	return nv;
}
