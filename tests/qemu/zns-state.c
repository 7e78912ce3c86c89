/* zns-state — small guest-side helper of scripts/qemu-zns.sh (built static by
 * the harness, put in the initramfs as /bin/zns-state).  Only the kernel's
 * zoned block device ioctls (linux/blkzoned.h), no libraries.
 *
 *   zns-state dump DEV
 *       one line per zone: "INDEX START_BYTES LEN_BYTES CAP_BYTES WP_BYTES COND"
 *       (COND as the kernel's BLK_ZONE_COND_* name); the wp of a FULL zone
 *       is printed as reported (start + len on NVMe).
 *   zns-state count DEV
 *       "open N active M" (open = implicitly + explicitly open, active =
 *       open + closed), for the zone-limit sampler.
 *   zns-state restore DEV FILE
 *       Re-establish zone states after a QEMU restart.  QEMU's NVMe ZNS
 *       emulation keeps zone states in memory only: after a restart every
 *       zone is EMPTY again although the backing file still holds its data.
 *       FILE has lines "INDEX WP_BLOCKS STATE" (WP in logical blocks from the
 *       zone start, STATE C = not full, F = full) as written by the host's
 *       trace parser (tests/qemu/zone-trace.py).  For each such zone the data
 *       below the wp is read back and rewritten in place (which moves the
 *       wp there again), then a C zone is closed (a power cycle closes open
 *       zones) and an F zone below capacity is finished.
 *
 * Exit status: 0 ok, 1 error (message on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/blkzoned.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define CHUNK (1u << 20)

static const char *cond_name(unsigned c)
{
	switch (c) {
	case BLK_ZONE_COND_NOT_WP: return "not_wp";
	case BLK_ZONE_COND_EMPTY: return "empty";
	case BLK_ZONE_COND_IMP_OPEN: return "imp_open";
	case BLK_ZONE_COND_EXP_OPEN: return "exp_open";
	case BLK_ZONE_COND_CLOSED: return "closed";
	case BLK_ZONE_COND_READONLY: return "readonly";
	case BLK_ZONE_COND_FULL: return "full";
	case BLK_ZONE_COND_OFFLINE: return "offline";
	default: return "unknown";
	}
}

/* All zones of the device; returns the count or -1. */
static int report(int fd, struct blk_zone **out)
{
	unsigned int nr = 0;
	struct blk_zone_report *rep;
	struct blk_zone *zones;
	uint64_t sector = 0;
	int got = 0;

	if (ioctl(fd, BLKGETNRZONES, &nr) < 0 || nr == 0) {
		perror("BLKGETNRZONES");
		return -1;
	}
	zones = calloc(nr, sizeof(*zones));
	rep = calloc(1, sizeof(*rep) + 4096 * sizeof(struct blk_zone));
	if (!zones || !rep) {
		perror("calloc");
		return -1;
	}
	while ((unsigned)got < nr) {
		rep->sector = sector;
		rep->nr_zones = 4096;
		if (ioctl(fd, BLKREPORTZONE, rep) < 0) {
			perror("BLKREPORTZONE");
			return -1;
		}
		if (rep->nr_zones == 0)
			break;
		for (unsigned i = 0; i < rep->nr_zones && (unsigned)got < nr; i++)
			zones[got++] = rep->zones[i];
		sector = zones[got - 1].start + zones[got - 1].len;
	}
	free(rep);
	*out = zones;
	return got;
}

static int zone_ioctl(int fd, unsigned long op, const struct blk_zone *z)
{
	struct blk_zone_range r = { .sector = z->start, .nr_sectors = z->len };

	return ioctl(fd, op, &r);
}

static int restore(int fd, const char *file)
{
	struct blk_zone *zones;
	int n = report(fd, &zones), lbs = 0, restored = 0;
	FILE *f = fopen(file, "r");
	char *buf;
	unsigned long idx;
	unsigned long long wpb;
	char st;

	if (n < 0)
		return 1;
	if (!f) {
		perror(file);
		return 1;
	}
	if (ioctl(fd, BLKSSZGET, &lbs) < 0 || lbs <= 0) {
		perror("BLKSSZGET");
		return 1;
	}
	if (posix_memalign((void **)&buf, 4096, CHUNK)) {
		perror("posix_memalign");
		return 1;
	}
	while (fscanf(f, "%lu %llu %c", &idx, &wpb, &st) == 3) {
		struct blk_zone *z;
		uint64_t start, end, cap, pos;

		if (idx >= (unsigned long)n) {
			fprintf(stderr, "zns-state: zone %lu beyond the device (%d zones)\n",
				idx, n);
			return 1;
		}
		z = &zones[idx];
		start = z->start << 9;
		cap = (z->capacity ? z->capacity : z->len) << 9;
		end = start + wpb * (uint64_t)lbs;
		if (z->type == BLK_ZONE_TYPE_CONVENTIONAL || wpb * (uint64_t)lbs > cap ||
		    (st != 'C' && st != 'F')) {
			fprintf(stderr, "zns-state: bad line: zone %lu wp %llu state %c\n",
				idx, wpb, st);
			return 1;
		}
		if (z->cond != BLK_ZONE_COND_EMPTY) {
			fprintf(stderr, "zns-state: zone %lu is %s, not empty: the device "
				"kept its zone states; nothing restored\n", idx,
				cond_name(z->cond));
			return 1;
		}
		for (pos = start; pos < end;) {
			size_t len = end - pos < CHUNK ? (size_t)(end - pos) : CHUNK;

			if (pread(fd, buf, len, (off_t)pos) != (ssize_t)len ||
			    pwrite(fd, buf, len, (off_t)pos) != (ssize_t)len) {
				fprintf(stderr, "zns-state: zone %lu at %llu: %s\n", idx,
					(unsigned long long)pos, strerror(errno));
				return 1;
			}
			pos += len;
		}
		if (st == 'C' && end > start && end < start + cap &&
		    zone_ioctl(fd, BLKCLOSEZONE, z) < 0) {
			fprintf(stderr, "zns-state: close zone %lu: %s\n", idx, strerror(errno));
			return 1;
		}
		if (st == 'F' && end < start + cap && zone_ioctl(fd, BLKFINISHZONE, z) < 0) {
			fprintf(stderr, "zns-state: finish zone %lu: %s\n", idx, strerror(errno));
			return 1;
		}
		restored++;
	}
	fclose(f);
	free(buf);
	free(zones);
	fprintf(stderr, "zns-state: restored %d zone(s)\n", restored);
	return 0;
}

int main(int argc, char **argv)
{
	struct blk_zone *zones;
	int fd, n;

	if (argc < 3 || (strcmp(argv[1], "restore") == 0 && argc < 4)) {
		fprintf(stderr, "usage: zns-state dump|count DEV | restore DEV FILE\n");
		return 1;
	}
	fd = open(argv[2], (strcmp(argv[1], "restore") == 0 ? O_RDWR : O_RDONLY) | O_DIRECT);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	if (strcmp(argv[1], "restore") == 0)
		return restore(fd, argv[3]);
	n = report(fd, &zones);
	if (n < 0)
		return 1;
	if (strcmp(argv[1], "count") == 0) {
		int open = 0, active = 0;

		for (int i = 0; i < n; i++) {
			unsigned c = zones[i].cond;

			open += c == BLK_ZONE_COND_IMP_OPEN || c == BLK_ZONE_COND_EXP_OPEN;
			active += c == BLK_ZONE_COND_IMP_OPEN || c == BLK_ZONE_COND_EXP_OPEN ||
				  c == BLK_ZONE_COND_CLOSED;
		}
		printf("open %d active %d\n", open, active);
		return 0;
	}
	for (int i = 0; i < n; i++)
		printf("%d %llu %llu %llu %llu %s\n", i,
		       (unsigned long long)zones[i].start << 9,
		       (unsigned long long)zones[i].len << 9,
		       (unsigned long long)zones[i].capacity << 9,
		       (unsigned long long)zones[i].wp << 9, cond_name(zones[i].cond));
	return 0;
}
