/* fsck.zonefuse — check and repair an unmounted zonefuse file system,
 * with e2fsck's interface: -n check only (the default), -p (or -a) the
 * repairs that lose nothing, -y every repair, -f accepted (every run is a
 * full check), -v totals.  The checks and repairs are fs_fsck (fs/fs_repair.c).
 * Exit codes as fsck(8): 0 clean, 1 errors corrected, 4 errors left
 * uncorrected, 8 operational error, 16 usage error.
 *
 * Progress: on a terminal (stderr), a watcher thread compares the bytes the
 * device has read so far with the bytes written in the meta zones (what the
 * replay reads) and shows a percentage; fs_fsck() itself knows nothing of it. */
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
#include "mlog/mlog.h"
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

static const char usage_text[] =
	"usage: %s [-n | -p | -a | -y] [-f] [-v] DEVICE\n\n"
	"Check an unmounted zonefuse file system and, with -p or -y, repair it:\n"
	"metadata log, names, reachability, link counts, extents against zone write\n"
	"pointers, extents shared by two files and zone accounting.\n"
	"  -n             check only, open the device read-only (the default)\n"
	"  -p, -a         repair what loses nothing (link counts, names of missing\n"
	"                 inodes, unreachable inodes into /lost+found, counts); if\n"
	"                 anything else is wrong, change nothing and exit 4\n"
	"  -y             make every repair: cut the log at a record that cannot be\n"
	"                 applied, salvage a damaged snapshot, drop extents outside\n"
	"                 the written data; what is dropped is printed\n"
	"  -f             accepted (every run is a full check)\n"
	"  -v, --verbose  also print totals (files, directories, extents, bytes)\n"
	"  -h, --help     show this help\n"
	"On a terminal, progress is shown on standard error.\n"
	"Exit codes: 0 clean, 1 errors corrected, 4 errors left uncorrected, 8\n"
	"operational error (cannot open or read; not a zonefuse file system), 16\n"
	"usage error.\n";

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool verbose = false;
	int c, modes = 0;
	enum fs_fsck_mode mode = FS_FSCK_CHECK;

	while ((c = getopt_long(argc, argv, "vhnpayf", lopts, NULL)) != -1) {
		switch (c) {
		case 'v': verbose = true; break;
		case 'n': mode = FS_FSCK_CHECK; modes++; break;
		case 'p': case 'a': mode = FS_FSCK_PREEN; modes++; break;
		case 'y': mode = FS_FSCK_YES; modes++; break;
		case 'f': break;
		case 'h':
			printf(usage_text, argv[0]);
			return 0;
		default:
			return 16;
		}
	}
	if (optind != argc - 1 || modes > 1) {
		fprintf(stderr, modes > 1 ? "%s: only one of -n, -p/-a and -y\n" :
			"usage: %s [-n | -p | -a | -y] [-f] [-v] DEVICE  (--help for more)\n",
			argv[0]);
		return 16;
	}
	struct zdev_open_opts zo = ZDEV_OPEN_OPTS_INIT;
	struct zdev *dev;
	const char *path = argv[optind];
	struct zf_capture cap;
	char busy[PATH_MAX + 64];
	zo.exclusive = true;
	zo.read_only = mode == FS_FSCK_CHECK;
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
	struct progress prog;
	bool watching = progress_start(&prog, dev);
	if (watching)
		active_progress = &prog;
	struct fs_fsck_result res;
	/* the library's error lines repeat what the problems say: kept back,
	 * the first one shown only when fsck itself fails */
	zf_capture_start(&cap);
	ret = fs_fsck(dev, mode, verbose, report, NULL, &res);
	zf_capture_stop();
	if (watching) {
		progress_stop(&prog);
		active_progress = NULL;
	}
	zdev_close(dev);
	if (ret == -ENODATA) {
		fprintf(stderr, "fsck.zonefuse: %s: not a zonefuse file system: run mkfs.zonefuse "
			"first\n", path);
		return 8;
	}
	if (ret < 0) {
		fprintf(stderr, "fsck.zonefuse: %s: %s\n", path,
			cap.first_err[0] ? zf_capture_detail(&cap) : strerror(-ret));
		return 8;
	}
	char b1[32];
	if (res.found && (res.lost_bytes || res.lost_names || res.lost_records))
		printf("%s: %s: %llu log record(s), %llu name(s), %s of file data\n", path,
		       mode == FS_FSCK_CHECK || res.needs_yes ? "a repair would drop" : "dropped",
		       (unsigned long long)res.lost_records, (unsigned long long)res.lost_names,
		       zf_fmt_bytes(res.lost_bytes, b1, sizeof(b1)));
	if (res.found == 0) {
		printf("%s: clean\n", path);
		return 0;
	}
	if (mode == FS_FSCK_CHECK) {
		printf("%s: %d problem(s) found; fsck.zonefuse -y repairs them\n", path, res.found);
		return 4;
	}
	if (res.needs_yes) {
		printf("%s: %d problem(s) found, some of which -p may not repair alone: "
		       "UNEXPECTED INCONSISTENCY; run fsck.zonefuse -y (nothing was changed)\n",
		       path, res.found);
		return 4;
	}
	if (res.left) {
		printf("%s: %d problem(s) found, %d left after the repair\n", path, res.found,
		       res.left);
		return 4;
	}
	printf("%s: %d problem(s) found and repaired%s\n", path, res.found,
	       res.recreated ? " (re-created empty)" : "");
	return 1;
}
