/* fsck.zonefuse — check an unmounted zonefuse file system.
 * Exit codes as fsck(8): 0 clean, 4 errors left uncorrected, 8 operational
 * error, 16 usage error.
 *
 * Progress: on a terminal (stderr), a watcher thread compares the bytes the
 * device has read so far with the bytes written in the meta zones (what the
 * replay reads) and shows a percentage; fs_check() itself is unchanged. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/mlog.h"
#include "tools/zf_tool.h"

/* ---- progress ---- */

struct progress {
	struct zdev *dev;
	uint64_t total;		/* bytes written in the meta zones */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop, shown;
};

static void *progress_main(void *arg)
{
	struct progress *p = arg;
	char b1[32], b2[32];

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
		if (p->stop)
			break;
		struct zdev_stats st;
		zdev_get_stats(p->dev, &st);
		if (st.bytes_read >= p->total)
			fprintf(stderr, "\rfsck.zonefuse: metadata log read (%s); checking files, "
				"extents and names...\033[K", zf_fmt_bytes(p->total, b1, sizeof(b1)));
		else
			fprintf(stderr, "\rfsck.zonefuse: reading the metadata log: %3u%% (%s of %s)\033[K",
				(unsigned)(st.bytes_read * 100 / p->total),
				zf_fmt_bytes(st.bytes_read, b1, sizeof(b1)),
				zf_fmt_bytes(p->total, b2, sizeof(b2)));
		p->shown = true;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Start the watcher when stderr is a terminal and there is a log to read. */
static bool progress_start(struct progress *p, struct zdev *dev)
{
	struct mlog_sb sb;

	memset(p, 0, sizeof(*p));
	if (!isatty(STDERR_FILENO) || mlog_probe(dev, &sb) != 0 || sb.meta_count == 0)
		return false;
	struct zdev_zone *z = calloc(sb.meta_count, sizeof(*z));
	if (!z)
		return false;
	int n = zdev_report_zones(dev, sb.meta_first, sb.meta_count, z);
	for (int i = 0; i < n; i++)
		p->total += z[i].wp - z[i].start;
	free(z);
	if (p->total == 0)
		return false;
	p->dev = dev;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	return pthread_create(&p->thread, NULL, progress_main, p) == 0;
}

/* Before a result line: erase the progress line (it is redrawn later). */
static void progress_clear(struct progress *p)
{
	pthread_mutex_lock(&p->lock);
	if (p->shown)
		fprintf(stderr, "\r\033[K");
	p->shown = false;
	pthread_mutex_unlock(&p->lock);
}

static void progress_stop(struct progress *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	if (p->shown)
		fprintf(stderr, "\r\033[K");	/* the result lines follow */
}

struct progress;
static struct progress *active_progress;
static void progress_clear(struct progress *p);

static void report(void *arg, const char *fmt, ...)
{
	va_list ap;
	(void)arg;
	if (active_progress)
		progress_clear(active_progress);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool verbose = false;
	int c;

	while ((c = getopt_long(argc, argv, "vhnpaf", lopts, NULL)) != -1) {
		switch (c) {
		case 'v': verbose = true; break;
		case 'n': case 'p': case 'a': case 'f': break;	/* fsck(8) compatibility */
		case 'h':
			printf("usage: %s [-v] [-n] [-p] [-a] [-f] DEVICE\n\nCheck an unmounted zonefuse file system:\n"
			       "metadata log, extents against zone write pointers, extents shared\n"
			       "by two files, names, link counts and zone accounting.  Read-only.\n"
			       "On a terminal, progress is shown on standard error.\n"
			       "Exit codes: 0 clean, 4 problems found, 8 operational error (cannot\n"
			       "open or read; not a zonefuse file system), 16 usage error.\n"
			       "  -v, --verbose  also print totals (files, directories, extents, bytes,\n"
			       "                 data zones and free zones)\n"
			       "  -n, -p, -a, -f accepted and ignored (fsck(8) compatibility)\n"
			       "  -h, --help     show this help\n", argv[0]);
			return 0;
		default:
			return 16;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: %s [-v] [-n] [-p] [-a] [-f] DEVICE  (--help for more)\n", argv[0]);
		return 16;
	}
	struct zdev_open_opts zo = ZDEV_OPEN_OPTS_INIT;
	struct zdev *dev;
	const char *path = argv[optind];
	struct zf_capture cap;
	char busy[PATH_MAX + 64];
	zo.exclusive = true;
	zo.read_only = true;
	zf_capture_start(&cap);
	int ret = zdev_open(path, &zo, &dev);
	if (ret == -EBUSY && zf_wait_unmounting("fsck.zonefuse", path, ZF_WAIT_UNMOUNTING_MS) == 0)
		ret = zdev_open(path, &zo, &dev);
	zf_capture_stop();
	if (ret == -EBUSY) {
		zf_busy_text(path, busy, sizeof(busy));
		fprintf(stderr, "fsck.zonefuse: %s: %s; unmount it first\n", path, busy);
		return 8;
	}
	if (ret) {
		fprintf(stderr, "fsck.zonefuse: cannot open %s: %s\n", path,
			cap.first_err[0] ? zf_capture_detail(&cap) : strerror(-ret));
		return 8;
	}
	struct mlog_sb sb;
	zf_capture_start(&cap);
	ret = mlog_probe(dev, &sb);
	zf_capture_stop();
	if (ret == -ENODATA) {
		fprintf(stderr, "fsck.zonefuse: %s: not a zonefuse file system: run mkfs.zonefuse "
			"first\n", path);
		zdev_close(dev);
		return 8;
	}
	struct progress prog;
	bool watching = progress_start(&prog, dev);
	if (watching)
		active_progress = &prog;
	ret = fs_check(dev, verbose, report, NULL);
	if (watching) {
		progress_stop(&prog);
		active_progress = NULL;
	}
	zdev_close(dev);
	if (ret < 0) {
		fprintf(stderr, "fsck.zonefuse: %s: %s\n", path, strerror(-ret));
		return ret == -EUCLEAN ? 4 : 8;
	}
	if (ret > 0) {
		printf("%s: %d problem(s) found\n", path, ret);
		return 4;
	}
	printf("%s: clean\n", path);
	return 0;
}
