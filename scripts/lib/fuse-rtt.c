/*
 * fuse-rtt: the rate of one FUSE round trip, as a caller sees it.
 *
 *   fuse-rtt PATH N
 *
 * Calls statx(PATH, AT_STATX_FORCE_SYNC) N times and prints the calls per
 * second.  AT_STATX_FORCE_SYNC makes a FUSE mount send one GETATTR per call
 * whatever its caches hold, so on a daemon that answers GETATTR from memory
 * the rate is the transport's: the request's copy to the daemon, the
 * daemon's wake-up, its reply, and the caller's wake-up.  scripts/bench.sh
 * runs it on zonefuse and on libfuse's null and passthrough_ll examples, the
 * floor under the metadata rows.  Exits 1 with a message if a call fails,
 * 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	struct statx sx;
	char *end;
	long n;
	double t0, t1;

	if (argc != 3) {
		fprintf(stderr, "usage: fuse-rtt PATH N\n");
		return 2;
	}
	errno = 0;
	n = strtol(argv[2], &end, 10);
	if (errno || *end || n < 1) {
		fprintf(stderr, "fuse-rtt: N must be a positive count, not '%s'\n", argv[2]);
		return 2;
	}
	t0 = now_s();
	for (long i = 0; i < n; i++) {
		if (statx(AT_FDCWD, argv[1], AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &sx) != 0) {
			fprintf(stderr, "fuse-rtt: statx %s: %s\n", argv[1], strerror(errno));
			return 1;
		}
	}
	t1 = now_s();
	printf("%.1f\n", (double)n / (t1 - t0));
	return 0;
}
