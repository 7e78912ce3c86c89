/* mkfs.zonefuse — write a fresh zonefuse file system on a zoned device or
 * an emulated zoned device file. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/mlog.h"

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--force] [--meta-zones N] [--label NAME] DEVICE\n"
		"\n"
		"Format DEVICE (a zoned block device, or an emulated zoned device file\n"
		"made by `zonefuse-emu create`) with a new, empty zonefuse file system.\n"
		"Every zone is reset: all data on DEVICE is lost.\n"
		"\n"
		"  -f, --force          overwrite an existing zonefuse file system\n"
		"  -m, --meta-zones N   zones reserved for the metadata log (default 4, min 3)\n"
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
		default: usage(stderr, argv[0]); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr, argv[0]);
		return 2;
	}
	zo.exclusive = true;
	ret = zdev_open(argv[optind], &zo, &dev);
	if (ret) {
		fprintf(stderr, "mkfs.zonefuse: cannot open %s: %s\n", argv[optind],
			ret == -EBUSY ? "device is in use (mounted?)" : strerror(-ret));
		return 1;
	}
	const struct zdev_geometry *g = zdev_geometry(dev);
	ret = fs_mkfs(dev, &o);
	if (ret) {
		fprintf(stderr, "mkfs.zonefuse: formatting %s failed: %s\n", argv[optind],
			strerror(-ret));
		zdev_close(dev);
		return 1;
	}
	struct mlog_sb sb;
	char b1[32], b2[32], b3[32];
	if (mlog_probe(dev, &sb) == 0) {
		printf("zonefuse file system created on %s (%s device)\n", argv[optind],
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
