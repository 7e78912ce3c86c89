/* fsck.zonefuse — check an unmounted zonefuse file system.
 * Exit codes as fsck(8): 0 clean, 4 errors left uncorrected, 8 operational
 * error, 16 usage error. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs.h"

static void report(void *arg, const char *fmt, ...)
{
	va_list ap;
	(void)arg;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
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
			printf("usage: %s [-v] DEVICE\n\nCheck an unmounted zonefuse file system:\n"
			       "metadata log, extents against zone write pointers, extents shared\n"
			       "by two files, names, link counts and zone accounting.  Read-only.\n"
			       "Exit codes: 0 clean, 4 problems found, 8 operational error.\n", argv[0]);
			return 0;
		default:
			return 16;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: %s [-v] DEVICE\n", argv[0]);
		return 16;
	}
	struct zdev_open_opts zo = ZDEV_OPEN_OPTS_INIT;
	struct zdev *dev;
	zo.exclusive = true;
	zo.read_only = true;
	int ret = zdev_open(argv[optind], &zo, &dev);
	if (ret) {
		fprintf(stderr, "fsck.zonefuse: cannot open %s: %s\n", argv[optind],
			ret == -EBUSY ? "device is in use (mounted?)" : strerror(-ret));
		return 8;
	}
	ret = fs_check(dev, verbose, report, NULL);
	zdev_close(dev);
	if (ret < 0) {
		fprintf(stderr, "fsck.zonefuse: %s: %s\n", argv[optind], strerror(-ret));
		return ret == -EUCLEAN ? 4 : 8;
	}
	if (ret > 0) {
		printf("%s: %d problem(s) found\n", argv[optind], ret);
		return 4;
	}
	printf("%s: clean\n", argv[optind]);
	return 0;
}
