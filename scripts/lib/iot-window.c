/*
 * iot-window: LevelDB IoT ingest that keeps a window, for
 * scripts/bench-steady.sh.
 *
 *   iot-window --db DIR --window-bytes W --total-bytes T [options]
 *
 * T threads (--threads, 8) each own S sensors (--sensors, 10) and write
 * one reading per sensor in turn: key "s<sensor, 8 digits>.<sequence, 16
 * digits>", a pseudo-random value of --value-size bytes (1024).  A gateway
 * keeps a window: once a sensor holds W / (T x S) bytes of readings, every
 * new reading deletes that sensor's oldest one in the same write batch, so
 * the live data stays at about W and the store turns over.  The run stops
 * when T bytes of values were written (or at the first LevelDB error).
 * --rate-mb limits the put rate (MB/s of values over all threads).
 *
 * Every --interval seconds (10) one line on stdout:
 *   i SECONDS OPS BYTES h BUCKET:COUNT,...
 * the ops (one reading: its put and the delete of its aged reading, one
 * write batch) finished in that interval, their value bytes, and their
 * latency histogram (bucket b counts latencies in [lo(b), lo(b+1)) ns,
 * lo() in hist_lo below: 8 buckets per power of two).  At the end:
 *   done OPS BYTES SECONDS ok|error MESSAGE
 * Exit status 0 when the run completed, 1 on a LevelDB error, 2 on usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <leveldb/c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBUCKET 512	/* 8 per power of two: up to 2^64 ns */
#define KEY_LEN 26	/* "s", 8 digits, ".", 16 digits */

struct conf {
	const char *db;
	unsigned threads, sensors, value_size, interval;
	uint64_t window_bytes, total_bytes;
	double rate_mb;
};

/* One thread's counters since the reporter last took them (lock). */
struct slot {
	pthread_mutex_t lock;
	uint64_t ops, bytes;
	uint64_t hist[NBUCKET];
};

static struct conf cf = { .threads = 8, .sensors = 10, .value_size = 1024, .interval = 10 };
static leveldb_t *db;
static struct slot *slots;
static atomic_uint_least64_t bytes_total;
static atomic_bool stop;
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static char *first_err;
static double t0;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Bucket of a latency: 8 linear steps inside each power of two. */
static unsigned hist_bucket(uint64_t ns)
{
	if (ns < 8)
		return (unsigned)ns;
	unsigned e = 63u - (unsigned)__builtin_clzll(ns);	/* 2^e <= ns */
	unsigned b = 8 * (e - 2) + (unsigned)((ns >> (e - 3)) & 7);
	return b < NBUCKET ? b : NBUCKET - 1;
}

/* A thread's generator: xorshift64*, one per thread, seeded by its id. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void fail(char *err)
{
	pthread_mutex_lock(&err_lock);
	if (!first_err)
		first_err = err;
	else
		leveldb_free(err);
	pthread_mutex_unlock(&err_lock);
	atomic_store(&stop, true);
}

static void *writer(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	struct slot *sl = &slots[id];
	uint64_t seed = 0x9e3779b97f4a7c15ull * (id + 1);
	uint64_t per_sensor = cf.window_bytes / ((uint64_t)cf.threads * cf.sensors * cf.value_size);
	uint64_t *seq = calloc(cf.sensors, sizeof(*seq));
	char *val = malloc(cf.value_size);
	leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
	leveldb_writebatch_t *wb = leveldb_writebatch_create();
	double rate = cf.rate_mb * 1e6 / cf.threads;	/* this thread's bytes/s */
	uint64_t mine = 0;
	double start = now_s();
	char key[48], old[48];	/* room for any uint64_t */

	if (!seq || !val)
		abort();
	if (per_sensor == 0)
		per_sensor = 1;
	while (!atomic_load(&stop)) {
		for (unsigned k = 0; k < cf.sensors && !atomic_load(&stop); k++) {
			uint64_t sensor = (uint64_t)id * cf.sensors + k;
			for (unsigned i = 0; i + 8 <= cf.value_size; i += 8) {
				uint64_t r = rnd(&seed);
				memcpy(val + i, &r, 8);
			}
			snprintf(key, sizeof(key), "s%08" PRIu64 ".%016" PRIu64, sensor, seq[k]);
			leveldb_writebatch_clear(wb);
			leveldb_writebatch_put(wb, key, KEY_LEN, val, cf.value_size);
			if (seq[k] >= per_sensor) {
				snprintf(old, sizeof(old), "s%08" PRIu64 ".%016" PRIu64, sensor,
					 seq[k] - per_sensor);
				leveldb_writebatch_delete(wb, old, KEY_LEN);
			}
			char *err = NULL;
			double a = now_s();
			leveldb_write(db, wo, wb, &err);
			double b = now_s();
			if (err) {
				fail(err);
				break;
			}
			seq[k]++;
			mine += cf.value_size;
			pthread_mutex_lock(&sl->lock);
			sl->ops++;
			sl->bytes += cf.value_size;
			sl->hist[hist_bucket((uint64_t)((b - a) * 1e9))]++;
			pthread_mutex_unlock(&sl->lock);
			if (atomic_fetch_add(&bytes_total, cf.value_size) + cf.value_size >=
			    cf.total_bytes)
				atomic_store(&stop, true);
			if (rate > 0) {	/* ahead of the rate: sleep the difference */
				double due = start + (double)mine / rate - now_s();
				if (due > 0)
					usleep((useconds_t)(due * 1e6));
			}
		}
	}
	leveldb_writebatch_destroy(wb);
	leveldb_writeoptions_destroy(wo);
	free(val);
	free(seq);
	return NULL;
}

/* One interval line: every thread's counters, taken and cleared. */
static void report(double t)
{
	static uint64_t h[NBUCKET];
	uint64_t ops = 0, bytes = 0;

	memset(h, 0, sizeof(h));
	for (unsigned i = 0; i < cf.threads; i++) {
		pthread_mutex_lock(&slots[i].lock);
		ops += slots[i].ops;
		bytes += slots[i].bytes;
		for (unsigned b = 0; b < NBUCKET; b++)
			h[b] += slots[i].hist[b];
		slots[i].ops = slots[i].bytes = 0;
		memset(slots[i].hist, 0, sizeof(slots[i].hist));
		pthread_mutex_unlock(&slots[i].lock);
	}
	printf("i %.1f %" PRIu64 " %" PRIu64 " h ", t, ops, bytes);
	const char *sep = "";
	for (unsigned b = 0; b < NBUCKET; b++) {
		if (h[b]) {
			printf("%s%u:%" PRIu64, sep, b, h[b]);
			sep = ",";
		}
	}
	printf("\n");
	fflush(stdout);
}

static int usage(void)
{
	fprintf(stderr, "usage: iot-window --db DIR --window-bytes W --total-bytes T [--threads 8]\n"
			"       [--sensors 10] [--value-size 1024] [--rate-mb R] [--interval 10]\n");
	return 2;
}

static bool num_arg(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || end == s || *end)
		return false;
	*v = x;
	return true;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		uint64_t v = 0;
		const char *o = argv[i], *a = i + 1 < argc ? argv[i + 1] : NULL;
		if (!a)
			return usage();
		i++;
		if (!strcmp(o, "--db"))
			cf.db = a;
		else if (!strcmp(o, "--rate-mb"))
			cf.rate_mb = atof(a);
		else if (!num_arg(a, &v))
			return usage();
		else if (!strcmp(o, "--window-bytes"))
			cf.window_bytes = v;
		else if (!strcmp(o, "--total-bytes"))
			cf.total_bytes = v;
		else if (!strcmp(o, "--threads") && v && v <= 1024)
			cf.threads = (unsigned)v;
		else if (!strcmp(o, "--sensors") && v && v <= 1000000)
			cf.sensors = (unsigned)v;
		else if (!strcmp(o, "--value-size") && v >= 8 && v <= (1u << 24))
			cf.value_size = (unsigned)v;
		else if (!strcmp(o, "--interval") && v && v <= 3600)
			cf.interval = (unsigned)v;
		else
			return usage();
	}
	if (!cf.db || !cf.window_bytes || !cf.total_bytes)
		return usage();

	leveldb_options_t *opt = leveldb_options_create();
	leveldb_options_set_create_if_missing(opt, 1);
	char *err = NULL;
	db = leveldb_open(opt, cf.db, &err);
	if (err) {
		fprintf(stderr, "iot-window: open %s: %s\n", cf.db, err);
		return 1;
	}
	slots = calloc(cf.threads, sizeof(*slots));
	pthread_t *th = calloc(cf.threads, sizeof(*th));
	if (!slots || !th)
		return 1;
	t0 = now_s();
	for (unsigned i = 0; i < cf.threads; i++) {
		pthread_mutex_init(&slots[i].lock, NULL);
		if (pthread_create(&th[i], NULL, writer, (void *)(uintptr_t)i)) {
			fprintf(stderr, "iot-window: cannot start a thread\n");
			return 1;
		}
	}
	double next = t0 + cf.interval;
	while (!atomic_load(&stop)) {
		usleep(100000);
		double t = now_s();
		if (t >= next) {
			report(t - t0);
			next += cf.interval;
		}
	}
	for (unsigned i = 0; i < cf.threads; i++)
		pthread_join(th[i], NULL);
	double secs = now_s() - t0;
	report(secs);	/* the last, partial interval */
	uint64_t total = atomic_load(&bytes_total);
	uint64_t ops = total / cf.value_size;
	printf("done %" PRIu64 " %" PRIu64 " %.2f %s%s\n", ops, total, secs,
	       first_err ? "error " : "ok", first_err ? first_err : "");
	leveldb_close(db);
	leveldb_options_destroy(opt);
	return first_err ? 1 : 0;
}
