/* mkfs.zonefuse — write a fresh zonefuse file system on a zoned device or
 * an emulated zoned device file.
 *
 * Progress: on a terminal (stderr), a watcher thread shows how many of the
 * zones that held data are reset so far (it polls zone reports while
 * fs_mkfs() works; fs_mkfs itself is unchanged). */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
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
	struct zdev_zone *zones;
	uint32_t nr, busy0;	/* zones, written (non-empty) zones at the start */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop, shown;
};

static uint32_t count_busy(struct progress *p)
{
	uint32_t busy = 0;
	if (zdev_report_zones(p->dev, 0, p->nr, p->zones) != (int)p->nr)
		return UINT32_MAX;
	for (uint32_t i = 0; i < p->nr; i++) {
		const struct zdev_zone *z = &p->zones[i];
		if (zdev_zone_seq(z) && !zdev_zone_empty(z) && z->cond != ZDEV_COND_READONLY &&
		    z->cond != ZDEV_COND_OFFLINE)
			busy++;
	}
	return busy;
}

static void *progress_main(void *arg)
{
	struct progress *p = arg;
	uint32_t best = 0;

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
		uint32_t busy = count_busy(p);
		if (busy == UINT32_MAX)
			continue;
		uint32_t done = busy < p->busy0 ? p->busy0 - busy : 0;
		if (done < best)	/* the new log's zones fill again: never go back */
			done = best;
		best = done;
		fprintf(stderr, "\rmkfs.zonefuse: resetting zones: %3u%% (%u of %u)",
			(unsigned)((uint64_t)done * 100 / p->busy0), done, p->busy0);
		p->shown = true;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Start the watcher when stderr is a terminal and there are zones to reset. */
static bool progress_start(struct progress *p, struct zdev *dev)
{
	memset(p, 0, sizeof(*p));
	if (!isatty(STDERR_FILENO))
		return false;
	p->dev = dev;
	p->nr = zdev_geometry(dev)->nr_zones;
	p->zones = calloc(p->nr, sizeof(*p->zones));
	if (!p->zones)
		return false;
	p->busy0 = count_busy(p);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	if (p->busy0 == 0 || p->busy0 == UINT32_MAX ||
	    pthread_create(&p->thread, NULL, progress_main, p)) {
		free(p->zones);
		return false;
	}
	return true;
}

static void progress_stop(struct progress *p, int ret)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	if (p->shown) {
		if (ret == 0)
			fprintf(stderr, "\rmkfs.zonefuse: resetting zones: 100%% (%u of %u)\n",
				p->busy0, p->busy0);
		else
			fprintf(stderr, "\n");
	}
	free(p->zones);
}

/* The one line that says why DEVICE cannot be opened and what to do. */
static void report_open_error(const char *path, int err, const struct zf_capture *cap)
{
	char busy[PATH_MAX + 64];

	if (err == -EBUSY) {
		zf_busy_text(path, busy, sizeof(busy));
		fprintf(stderr, "mkfs.zonefuse: %s: %s; unmount it first\n", path, busy);
		return;
	}
	fprintf(stderr, "mkfs.zonefuse: cannot open %s: %s\n", path,
		cap->first_err[0] ? zf_capture_detail(cap) : strerror(-err));
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--force] [--meta-zones N] [--label NAME] DEVICE\n"
		"\n"
		"Format DEVICE (a zoned block device, or an emulated zoned device file\n"
		"made by `zonefuse-emu create`) with a new, empty zonefuse file system.\n"
		"Every zone is reset: all data on DEVICE is lost.  On a terminal,\n"
		"progress of the zone resets is shown on standard error.\n"
		"Exit status: 0 formatted, 1 failure, 2 bad command line.\n"
		"\n"
		"  -f, --force          overwrite an existing zonefuse file system\n"
		"  -m, --meta-zones N   zones reserved for the metadata log (default: enough\n"
		"                       for about 256 MiB of log but at most 1/16 of the\n"
		"                       zones, and at least 4; minimum 3)\n"
		"  -L, --label NAME     a label of up to 31 characters\n"
		"  -h, --help           show this help\n", prog);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "meta-zones", required_argument, NULL, 'm' },
		{ "label", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct fs_mkfs_opts o = { 0 };
	struct zdev_open_opts zo = ZDEV_OPEN_OPTS_INIT;
	struct zdev *dev;
	int c, ret;

	while ((c = getopt_long(argc, argv, "fm:L:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'f': o.force = true; break;
		case 'm': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 3 || v > 1024) {
				fprintf(stderr, "mkfs.zonefuse: --meta-zones must be 3..1024\n");
				return 2;
			}
			o.meta_zones = (uint32_t)v;
			break;
		}
		case 'L':
			if (strlen(optarg) > 31) {
				fprintf(stderr, "mkfs.zonefuse: label longer than 31 characters\n");
				return 2;
			}
			o.label = optarg;
			break;
		case 'h': usage(stdout, argv[0]); return 0;
		default: return 2;	/* getopt named the option */
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: %s [--force] [--meta-zones N] [--label NAME] DEVICE  "
			"(--help for more)\n", argv[0]);
		return 2;
	}
	const char *path = argv[optind];
	struct zf_capture cap;
	zo.exclusive = true;
	zf_capture_start(&cap);
	ret = zdev_open(path, &zo, &dev);
	if (ret == -EBUSY && zf_wait_unmounting("mkfs.zonefuse", path, ZF_WAIT_UNMOUNTING_MS) == 0)
		ret = zdev_open(path, &zo, &dev);
	zf_capture_stop();
	if (ret) {
		report_open_error(path, ret, &cap);
		return 1;
	}
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct progress prog;
	bool watching = progress_start(&prog, dev);
	zf_capture_start(&cap);
	ret = fs_mkfs(dev, &o);
	zf_capture_stop();
	if (watching)
		progress_stop(&prog, ret);
	if (ret == -EEXIST) {
		fprintf(stderr, "mkfs.zonefuse: %s already holds a zonefuse file system: "
			"--force to overwrite\n", path);
		zdev_close(dev);
		return 1;
	}
	if (ret) {
		fprintf(stderr, "mkfs.zonefuse: formatting %s failed: %s\n", path,
			cap.first_err[0] ? zf_capture_detail(&cap) : strerror(-ret));
		zdev_close(dev);
		return 1;
	}
	struct mlog_sb sb;
	char b1[32], b2[32], b3[32];
	if (mlog_probe(dev, &sb) == 0) {
		printf("zonefuse file system created on %s (%s device)\n", path,
		       zdev_backend_name(dev));
		printf("  zones: %u x %s (capacity %s), block %u bytes\n", g->nr_zones,
		       zf_fmt_bytes(g->zone_size, b1, sizeof(b1)),
		       zf_fmt_bytes(g->zone_capacity, b2, sizeof(b2)), sb.block_size);
		printf("  metadata log: zones %u-%u; data: zones %u-%u (%s)\n",
		       sb.meta_first, sb.meta_first + sb.meta_count - 1, sb.data_first,
		       sb.data_first + sb.data_count - 1,
		       zf_fmt_bytes((uint64_t)sb.data_count * g->zone_capacity, b3, sizeof(b3)));
		printf("  limits: max open %u, max active %u (0 = none)\n", g->max_open, g->max_active);
		if (sb.label[0])
			printf("  label: %s\n", sb.label);
	}
	zdev_close(dev);
	return 0;
}
