/* odirect_race — a helper for tests/integration/odirect_cache.sh: an AIO
 * O_DIRECT write racing a buffered reader, with the race made certain.
 *
 *   odirect_race FILE
 *
 * Writes 1 MiB of 'A' to FILE (buffered) and closes it: the daemon writes
 * that chunk out at the close, slowly on the test's emulated device, and a
 * write to the chunk waits for that write-out (reads of it do not).
 * Meanwhile it reads 4 KiB at P buffered (cached), writes 'B' there with
 * native AIO O_DIRECT (the kernel drops the cached page and sends the
 * WRITE, which waits in the daemon), reads P buffered again (a READ the
 * daemon answers with 'A', cached again), waits for the write, and reads P
 * buffered and O_DIRECT.  Prints what each read saw; exits 0 when the last
 * buffered read saw 'B', 1 when it saw 'A' (stale), 2 on other errors, 3
 * when the race was not met (the middle read already saw 'B'). */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define P (64 * 1024)
#define BLK 4096

static char first(int fd, const char *what)
{
	static char buf[BLK] __attribute__((aligned(4096)));
	ssize_t n = pread(fd, buf, BLK, P);
	if (n != BLK) {
		fprintf(stderr, "odirect_race: %s read: %s\n", what, n < 0 ? strerror(errno) : "short");
		exit(2);
	}
	for (int i = 1; i < BLK; i++)
		if (buf[i] != buf[0]) {
			fprintf(stderr, "odirect_race: %s read: mixed bytes\n", what);
			exit(2);
		}
	printf("%s read: %c\n", what, buf[0]);
	return buf[0];
}

static void die(const char *what)
{
	fprintf(stderr, "odirect_race: %s: %s\n", what, strerror(errno));
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: odirect_race FILE\n");
		return 2;
	}
	char *a = malloc(MIB);
	if (!a)
		return 2;
	memset(a, 'A', MIB);
	int fd = open(argv[1], O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0 || write(fd, a, MIB) != MIB || close(fd) != 0)
		die("writing the file");
	free(a);
	int rfd = open(argv[1], O_RDONLY);
	int dfd = open(argv[1], O_WRONLY | O_DIRECT);
	if (rfd < 0 || dfd < 0)
		die("open");
	first(rfd, "cached");
	void *b;
	if (posix_memalign(&b, 4096, BLK))
		return 2;
	memset(b, 'B', BLK);
	aio_context_t ctx = 0;
	if (syscall(SYS_io_setup, 4, &ctx) != 0)
		die("io_setup");
	struct iocb cb = { .aio_fildes = (uint32_t)dfd, .aio_lio_opcode = IOCB_CMD_PWRITE,
			   .aio_buf = (uint64_t)(uintptr_t)b, .aio_nbytes = BLK, .aio_offset = P };
	struct iocb *cbs[1] = { &cb };
	if (syscall(SYS_io_submit, ctx, 1, cbs) != 1)
		die("io_submit");
	struct timespec ms100 = { 0, 100 * 1000 * 1000 };
	nanosleep(&ms100, NULL);
	char mid = first(rfd, "during the write, buffered");
	struct io_event ev;
	if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) != 1)
		die("io_getevents");
	if (ev.res != BLK) {
		fprintf(stderr, "odirect_race: the AIO write returned %lld\n", (long long)ev.res);
		return 2;
	}
	char after = first(rfd, "after the write, buffered");
	int xfd = open(argv[1], O_RDONLY | O_DIRECT);
	if (xfd < 0)
		die("open O_DIRECT");
	char direct = first(xfd, "after the write, O_DIRECT");
	syscall(SYS_io_destroy, ctx);
	close(xfd);
	close(dfd);
	close(rfd);
	free(b);
	if (direct != 'B')
		return 2;
	if (after != 'B')
		return 1;
	return mid == 'B' ? 3 : 0;
}
