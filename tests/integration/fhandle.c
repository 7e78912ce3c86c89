/* fhandle — a helper for tests/integration/export_handle.sh: file handles
 * through name_to_handle_at(2) / open_by_handle_at(2).
 *
 *   fhandle get PATH          prints PATH's handle as hex on one line
 *   fhandle open MOUNT HEX    opens the handle (read-only, O_DIRECTORY not
 *                             needed) relative to the mount MOUNT and prints
 *                             "ino=N path=P" (P: what /proc/self/fd shows),
 *                             or "errno=NAME" and exits 1
 *
 * open_by_handle_at needs CAP_DAC_READ_SEARCH (the script runs as root). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case ESTALE: return "ESTALE";
	case ENOENT: return "ENOENT";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EPERM: return "EPERM";
	case EINVAL: return "EINVAL";
	default: return strerror(e);
	}
}

static int get(const char *path)
{
	struct file_handle *h = malloc(sizeof(*h) + MAX_HANDLE_SZ);
	int mount_id;
	if (!h)
		return 2;
	h->handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, path, h, &mount_id, 0) != 0) {
		printf("errno=%s\n", errname(errno));
		free(h);
		return 1;
	}
	printf("%08x%08x", h->handle_bytes, (unsigned)h->handle_type);
	for (unsigned i = 0; i < h->handle_bytes; i++)
		printf("%02x", h->f_handle[i]);
	printf("\n");
	free(h);
	return 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int open_handle(const char *mount, const char *hex)
{
	size_t n = strlen(hex);
	unsigned bytes, type;
	if (n < 16 || sscanf(hex, "%8x%8x", &bytes, &type) != 2 || bytes > MAX_HANDLE_SZ ||
	    n != 16 + 2 * (size_t)bytes) {
		fprintf(stderr, "fhandle: bad handle %s\n", hex);
		return 2;
	}
	struct file_handle *h = malloc(sizeof(*h) + MAX_HANDLE_SZ);
	if (!h)
		return 2;
	h->handle_bytes = bytes;
	h->handle_type = (int)type;
	for (unsigned i = 0; i < bytes; i++) {
		int hi = hexval(hex[16 + 2 * i]), lo = hexval(hex[17 + 2 * i]);
		if (hi < 0 || lo < 0) {
			fprintf(stderr, "fhandle: bad handle %s\n", hex);
			free(h);
			return 2;
		}
		h->f_handle[i] = (unsigned char)(hi << 4 | lo);
	}
	int mfd = open(mount, O_RDONLY | O_DIRECTORY);
	if (mfd < 0) {
		perror(mount);
		free(h);
		return 2;
	}
	int fd = open_by_handle_at(mfd, h, O_RDONLY);
	int err = errno;
	free(h);
	close(mfd);
	if (fd < 0) {
		printf("errno=%s\n", errname(err));
		return 1;
	}
	struct stat st;
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t len = readlink(link, path, sizeof(path) - 1);
	path[len < 0 ? 0 : len] = 0;
	if (fstat(fd, &st) != 0) {
		perror("fstat");
		return 2;
	}
	printf("ino=%llu path=%s\n", (unsigned long long)st.st_ino, path);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "get") == 0)
		return get(argv[2]);
	if (argc == 4 && strcmp(argv[1], "open") == 0)
		return open_handle(argv[2], argv[3]);
	fprintf(stderr, "usage: fhandle get PATH | fhandle open MOUNT HEX\n");
	return 2;
}
