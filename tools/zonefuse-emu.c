/* zonefuse-emu — create, inspect, power-cycle and benchmark emulated zoned
 * devices (regular files understood by the zdev EMU backend).
 *
 *   zonefuse-emu create FILE --zone-size SIZE --zones N [options] [--force]
 *   zonefuse-emu info FILE [--zones]
 *   zonefuse-emu powerloss FILE [--tear SEED]
 *   zonefuse-emu bench FILE --zones-parallel N --mib M [--chunk SIZE] [--no-model]
 *
 * Exit status: 0 success, 1 the operation failed, 2 bad command line.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "common/zf_common.h"
#include "tools/zf_tool.h"
#include "zoned/zdev.h"

#define EXIT_USAGE 2

static const char usage_text[] =
"Usage: zonefuse-emu COMMAND FILE [OPTIONS]\n"
"\n"
"Emulated host-managed zoned block devices stored in a sparse regular file\n"
"(what `zonefuse`, `mkfs.zonefuse` and the tests open when given a file).\n"
"\n"
"Commands:\n"
"  create FILE --zone-size SIZE --zones N [OPTIONS]\n"
"      Create an emulated device with every zone empty.  Refuses to\n"
"      overwrite an existing FILE unless --force is given (and never while\n"
"      the file is open by a zdev user).\n"
"        --zone-size SIZE       bytes between zone starts (required; e.g. 64M)\n"
"        --zones N              number of zones (required, 1..1048576)\n"
"        --zone-capacity SIZE   usable bytes per sequential zone (default: zone size)\n"
"        --conv-zones N         conventional (randomly writable) zones at the\n"
"                               start of the device (default 0)\n"
"        --max-open N           max open zones, 0 = unlimited (default 14, or\n"
"                               --max-active if that is smaller)\n"
"        --max-active N         max active zones, 0 = unlimited (default 14)\n"
"        --block-size N         512 or 4096 (default 4096)\n"
"        --zone-write-mbps N    performance model: write MB/s per zone (0 = off)\n"
"        --zone-read-mbps N     read MB/s per zone (0 = off)\n"
"        --device-mbps N        MB/s for the whole device (0 = off)\n"
"        --latency-us N         added latency per request in microseconds (0 = off)\n"
"        --force                overwrite FILE if it exists\n"
"      The model is off unless one of the model options is non-zero; MB/s is\n"
"      10^6 bytes per second.  SIZE accepts K, M, G, T suffixes (powers of 2).\n"
"\n"
"  info FILE [--zones]\n"
"      Print geometry, limits, the performance model and a summary of zone\n"
"      conditions; --zones lists every zone.  Opens FILE read-only, so it\n"
"      also works while the device is in use.\n"
"\n"
"  powerloss FILE [--tear SEED]\n"
"      Simulate a power loss on a device that is not open (e.g. after the\n"
"      daemon was killed -9): writes not covered by a flush are dropped and\n"
"      open zones become closed.  With --tear SEED (non-zero), a random\n"
"      block-aligned prefix of each zone's unflushed data survives instead,\n"
"      like a torn write; the same seed tears the same way.\n"
"\n"
"  bench FILE --zones-parallel N --mib M [--chunk SIZE] [--no-model]\n"
"      Reset the first N sequential zones and write M MiB in total, spread\n"
"      evenly over them with zdev_io_batch (one CHUNK-sized request per zone\n"
"      per batch, default chunk 1M); print the write throughput.  --no-model\n"
"      turns the stored performance model off for this run.  DESTROYS the\n"
"      data in those zones.\n"
"\n"
"  help, --help, -h\n"
"      Show this text.\n"
"\n"
"Exit status: 0 success, 1 failure, 2 bad command line.\n";

static void usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void usage_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "zonefuse-emu: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'zonefuse-emu --help'.\n");
	exit(EXIT_USAGE);
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t max)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		usage_err("%s: '%s' is not a non-negative integer", opt, s ? s : "");
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		usage_err("%s: '%s' is not a non-negative integer", opt, s);
	if (v > max)
		usage_err("%s: %s is too large (max %" PRIu64 ")", opt, s, max);
	return v;
}

static uint64_t parse_sz(const char *opt, const char *s)
{
	uint64_t v;

	if (zf_parse_size(s, &v) < 0)
		usage_err("%s: '%s' is not a size (like 4096, 64K, 256M, 1G)", opt, s);
	return v;
}

/* Opens path as zdev_open() does; on failure prints the one line that
 * says why (the library's own message, captured) and returns -errno. */
static int open_dev(const char *path, const struct zdev_open_opts *o, struct zdev **dev)
{
	struct zf_capture cap;
	zf_capture_start(&cap);
	int ret = zdev_open(path, o, dev);
	zf_capture_stop();
	if (ret)
		fprintf(stderr, "zonefuse-emu: cannot open %s: %s\n", path,
			cap.first_err[0] ? zf_capture_detail(&cap) : strerror(-ret));
	return ret;
}

/* ---- create ------------------------------------------------------------- */

/* The file is sparse: its zones take room only as they are written.  Say
 * so when the file system holding it cannot take all of them, because
 * writes to the device then fail (ENOSPC) once it fills, and the file
 * system on the device sees I/O errors. */
static void warn_if_short(const char *file, const struct zdev_emu_params *p)
{
	struct statvfs v;
	char b1[32], b2[32];
	uint64_t need = (uint64_t)p->nr_zones * p->zone_size;

	if (statvfs(file, &v) != 0)
		return;
	uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
	if (avail >= need)
		return;
	fprintf(stderr, "zonefuse-emu: warning: %s is sparse and its file system has %s "
		"free, less than the device's %s: once that fills, writes to the device "
		"fail (ENOSPC)\n", file, zf_fmt_bytes(avail, b1, sizeof(b1)),
		zf_fmt_bytes(need, b2, sizeof(b2)));
}

static int cmd_create(int argc, char **argv)
{
	enum { O_ZSIZE = 256, O_ZONES, O_ZCAP, O_CONV, O_MAXOPEN, O_MAXACT, O_BS,
	       O_WMBPS, O_RMBPS, O_DMBPS, O_LAT, O_FORCE };
	static const struct option lo[] = {
		{ "zone-size", required_argument, NULL, O_ZSIZE },
		{ "zones", required_argument, NULL, O_ZONES },
		{ "zone-capacity", required_argument, NULL, O_ZCAP },
		{ "conv-zones", required_argument, NULL, O_CONV },
		{ "max-open", required_argument, NULL, O_MAXOPEN },
		{ "max-active", required_argument, NULL, O_MAXACT },
		{ "block-size", required_argument, NULL, O_BS },
		{ "zone-write-mbps", required_argument, NULL, O_WMBPS },
		{ "zone-read-mbps", required_argument, NULL, O_RMBPS },
		{ "device-mbps", required_argument, NULL, O_DMBPS },
		{ "latency-us", required_argument, NULL, O_LAT },
		{ "force", no_argument, NULL, O_FORCE },
		{ NULL, 0, NULL, 0 },
	};
	struct zdev_emu_params p = { .block_size = 4096, .max_open = 14, .max_active = 14 };
	bool force = false, have_size = false, have_zones = false, have_open = false;
	const char *file;
	char b1[32], b2[32];
	int c, ret;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case O_ZSIZE: p.zone_size = parse_sz("--zone-size", optarg); have_size = true; break;
		case O_ZONES: p.nr_zones = (uint32_t)parse_u64("--zones", optarg, UINT32_MAX); have_zones = true; break;
		case O_ZCAP: p.zone_capacity = parse_sz("--zone-capacity", optarg);
			if (!p.zone_capacity)
				usage_err("--zone-capacity must not be 0");
			break;
		case O_CONV: p.nr_conv_zones = (uint32_t)parse_u64("--conv-zones", optarg, UINT32_MAX); break;
		case O_MAXOPEN: p.max_open = (uint32_t)parse_u64("--max-open", optarg, UINT32_MAX); have_open = true; break;
		case O_MAXACT: p.max_active = (uint32_t)parse_u64("--max-active", optarg, UINT32_MAX); break;
		case O_BS: p.block_size = (uint32_t)parse_sz("--block-size", optarg);
			if (p.block_size != 512 && p.block_size != 4096)
				usage_err("--block-size must be 512 or 4096");
			break;
		case O_WMBPS: p.zone_write_mbps = (uint32_t)parse_u64("--zone-write-mbps", optarg, UINT32_MAX); break;
		case O_RMBPS: p.zone_read_mbps = (uint32_t)parse_u64("--zone-read-mbps", optarg, UINT32_MAX); break;
		case O_DMBPS: p.device_mbps = (uint32_t)parse_u64("--device-mbps", optarg, UINT32_MAX); break;
		case O_LAT: p.latency_us = (uint32_t)parse_u64("--latency-us", optarg, UINT32_MAX); break;
		case O_FORCE: force = true; break;
		default: usage_err("create: bad option");
		}
	}
	if (optind != argc - 1)
		usage_err("create: expected exactly one FILE argument");
	file = argv[optind];
	if (!have_size)
		usage_err("create: --zone-size is required");
	if (!have_zones)
		usage_err("create: --zones is required");
	/* the default max open follows a smaller --max-active */
	if (!have_open && p.max_active && p.max_open > p.max_active)
		p.max_open = p.max_active;
	if (p.max_open > p.max_active && p.max_active)
		usage_err("create: --max-open (%u) exceeds --max-active (%u)",
			  p.max_open, p.max_active);
	/* A file this call made and could not finish (too large for its file
	 * system, no room) is removed, so that a retry is not "File exists". */
	struct stat before;
	bool existed = lstat(file, &before) == 0;
	struct zf_capture cap;
	zf_capture_start(&cap);
	ret = zdev_emu_create(file, &p, force);
	zf_capture_stop();
	if (ret) {
		if (!existed && ret != -EEXIST)
			unlink(file);
		fprintf(stderr, "zonefuse-emu: cannot create %s: %s\n", file,
			cap.first_err[0] ? zf_capture_detail(&cap) : strerror(-ret));
		return 1;
	}
	printf("created %s: %u zones of %s (capacity %s), %u conventional, "
	       "block %u, max open %u, max active %u\n", file, p.nr_zones,
	       zf_fmt_bytes(p.zone_size, b1, sizeof(b1)),
	       zf_fmt_bytes(p.zone_capacity ? p.zone_capacity : p.zone_size, b2, sizeof(b2)),
	       p.nr_conv_zones, p.block_size, p.max_open, p.max_active);
	warn_if_short(file, &p);
	return 0;
}

/* ---- info ------------------------------------------------------------- */

static void print_model(const struct zdev_emu_params *p)
{
	if (!p->zone_write_mbps && !p->zone_read_mbps && !p->device_mbps && !p->latency_us) {
		printf("  model:          off\n");
		return;
	}
	printf("  model:          zone write %u MB/s, zone read %u MB/s, device %u MB/s, "
	       "latency %u us (0 = not limited)\n", p->zone_write_mbps,
	       p->zone_read_mbps, p->device_mbps, p->latency_us);
}

static int cmd_info(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "zones", no_argument, NULL, 'z' },
		{ NULL, 0, NULL, 0 },
	};
	struct zdev_open_opts o = ZDEV_OPEN_OPTS_INIT;
	const struct zdev_geometry *g;
	struct zdev_emu_params p;
	struct zdev_zone *zs;
	struct zdev *dev;
	bool list = false;
	uint32_t ncond[16] = { 0 };
	uint64_t used = 0;
	char b1[32], b2[32], b3[32];
	int c, ret;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'z')
			list = true;
		else
			usage_err("info: bad option");
	}
	if (optind != argc - 1)
		usage_err("info: expected exactly one FILE argument");
	o.read_only = true;
	if (open_dev(argv[optind], &o, &dev))
		return 1;
	g = zdev_geometry(dev);
	zs = calloc(g->nr_zones, sizeof(*zs));
	if (!zs) {
		zdev_close(dev);
		fprintf(stderr, "zonefuse-emu: out of memory\n");
		return 1;
	}
	ret = zdev_report_zones(dev, 0, g->nr_zones, zs);
	if (ret < 0) {
		fprintf(stderr, "zonefuse-emu: report zones: %s\n", strerror(-ret));
		free(zs);
		zdev_close(dev);
		return 1;
	}
	printf("%s: %s zoned device\n", zdev_path(dev), zdev_backend_name(dev));
	printf("  size:           %s (%" PRIu64 " bytes)\n", zf_fmt_bytes(g->size, b1, sizeof(b1)), g->size);
	printf("  zones:          %u (%u conventional, %u sequential write required)\n",
	       g->nr_zones, g->nr_conv_zones, g->nr_zones - g->nr_conv_zones);
	printf("  zone size:      %s (%" PRIu64 " bytes), capacity %s (%" PRIu64 " bytes)\n",
	       zf_fmt_bytes(g->zone_size, b1, sizeof(b1)), g->zone_size,
	       zf_fmt_bytes(g->zone_capacity, b2, sizeof(b2)), g->zone_capacity);
	printf("  block size:     %u\n", g->block_size);
	printf("  max open:       %u%s\n", g->max_open, g->max_open ? "" : " (unlimited)");
	printf("  max active:     %u%s\n", g->max_active, g->max_active ? "" : " (unlimited)");
	if (zdev_emu_get_params(dev, &p) == 0)
		print_model(&p);
	for (uint32_t i = 0; i < g->nr_zones; i++) {
		ncond[zs[i].cond & 0xf]++;
		if (zdev_zone_seq(&zs[i]))
			used += zs[i].wp - zs[i].start;
	}
	printf("  written:        %s in sequential zones\n", zf_fmt_bytes(used, b1, sizeof(b1)));
	printf("  conditions:    ");
	for (unsigned cnd = 0; cnd < 16; cnd++)
		if (ncond[cnd])
			printf(" %s %u", zdev_cond_name((uint8_t)cnd), ncond[cnd]);
	printf("\n");
	if (list) {
		printf("\n%6s %-5s %-9s %14s %12s %12s %6s\n", "zone", "type", "cond",
		       "start", "wp-offset", "capacity", "used");
		for (uint32_t i = 0; i < g->nr_zones; i++) {
			struct zdev_zone *z = &zs[i];

			if (zdev_zone_conv(z))
				printf("%6u %-5s %-9s %14" PRIu64 " %12s %12" PRIu64 " %6s\n", i,
				       "conv", zdev_cond_name(z->cond), z->start, "-",
				       z->capacity, "-");
			else
				printf("%6u %-5s %-9s %14" PRIu64 " %12" PRIu64 " %12" PRIu64
				       " %5.1f%%\n", i, "seq", zdev_cond_name(z->cond), z->start,
				       z->wp - z->start, z->capacity,
				       100.0 * (double)(z->wp - z->start) / (double)z->capacity);
		}
	} else {
		uint32_t shown = 0;

		for (uint32_t i = 0; i < g->nr_zones; i++)
			if (zdev_zone_active(&zs[i]))
				shown++;
		if (shown) {
			printf("  active zones:  ");
			for (uint32_t i = 0; i < g->nr_zones; i++)
				if (zdev_zone_active(&zs[i]))
					printf(" %u:%s@%s", i, zdev_cond_name(zs[i].cond),
					       zf_fmt_bytes(zs[i].wp - zs[i].start, b3, sizeof(b3)));
			printf("\n");
		}
		printf("  (use --zones to list every zone)\n");
	}
	free(zs);
	zdev_close(dev);
	return 0;
}

/* ---- powerloss --------------------------------------------------------- */

static int cmd_powerloss(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "tear", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t seed = 0;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 't') {
			seed = parse_u64("--tear", optarg, UINT64_MAX);
			if (!seed)
				usage_err("--tear: the seed must be non-zero (0 means no tear)");
		} else {
			usage_err("powerloss: bad option");
		}
	}
	if (optind != argc - 1)
		usage_err("powerloss: expected exactly one FILE argument");
	ret = zdev_emu_power_loss_file(argv[optind], seed);
	if (ret) {
		fprintf(stderr, "zonefuse-emu: powerloss %s failed: %s\n", argv[optind],
			strerror(-ret));
		return 1;
	}
	printf("%s: power loss simulated%s; unflushed writes dropped\n", argv[optind],
	       seed ? " with torn writes" : "");
	return 0;
}

/* ---- bench -------------------------------------------------------------- */

static int cmd_bench(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "zones-parallel", required_argument, NULL, 'n' },
		{ "mib", required_argument, NULL, 'm' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "no-model", no_argument, NULL, 'x' },
		{ NULL, 0, NULL, 0 },
	};
	struct zdev_open_opts o = ZDEV_OPEN_OPTS_INIT;
	const struct zdev_geometry *g;
	struct zdev *dev;
	struct zdev_req *reqs = NULL;
	char *buf = NULL;
	uint64_t n = 0, mib = 0, chunk = 1 << 20, per_zone, done = 0, t0, ns;
	int c, ret, rc = 1;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n': n = parse_u64("--zones-parallel", optarg, 4096); break;
		case 'm': mib = parse_u64("--mib", optarg, 1u << 24); break;
		case 'c': chunk = parse_sz("--chunk", optarg); break;
		case 'x':
			o.zone_write_mbps = o.zone_read_mbps = 0;
			o.device_mbps = o.latency_us = 0;
			break;
		default: usage_err("bench: bad option");
		}
	}
	if (optind != argc - 1)
		usage_err("bench: expected exactly one FILE argument");
	if (!n || !mib)
		usage_err("bench: --zones-parallel N and --mib M (both > 0) are required");
	if (!chunk || chunk > (256u << 20))
		usage_err("bench: --chunk must be between 1 byte and 256M");
	o.exclusive = true;
	if (open_dev(argv[optind], &o, &dev))
		return 1;
	g = zdev_geometry(dev);
	if (chunk % g->block_size) {
		fprintf(stderr, "zonefuse-emu: --chunk must be a multiple of the block size %u\n",
			g->block_size);
		goto out;
	}
	if (n > g->nr_zones - g->nr_conv_zones) {
		fprintf(stderr, "zonefuse-emu: only %u sequential zones\n",
			g->nr_zones - g->nr_conv_zones);
		goto out;
	}
	if (g->max_open && n > g->max_open) {
		fprintf(stderr, "zonefuse-emu: %" PRIu64 " zones in parallel exceed max open %u\n",
			n, g->max_open);
		goto out;
	}
	per_zone = ZF_ALIGN_DOWN(mib * (1u << 20) / n, chunk);
	if (per_zone == 0 || per_zone > g->zone_capacity) {
		fprintf(stderr, "zonefuse-emu: %" PRIu64 " MiB over %" PRIu64 " zones is %"
			PRIu64 " bytes per zone in %" PRIu64 "-byte chunks; must be between "
			"one chunk and the zone capacity %" PRIu64 "\n",
			mib, n, mib * (1u << 20) / n, chunk, g->zone_capacity);
		goto out;
	}
	reqs = calloc(n, sizeof(*reqs));
	buf = zdev_buf_alloc(n * chunk);
	if (!reqs || !buf) {
		fprintf(stderr, "zonefuse-emu: out of memory\n");
		goto out;
	}
	memset(buf, 0x5a, n * chunk);
	for (uint32_t i = 0; i < n; i++) {
		ret = zdev_zone_reset(dev, g->nr_conv_zones + i);
		if (ret) {
			fprintf(stderr, "zonefuse-emu: reset: %s\n", strerror(-ret));
			goto out;
		}
	}
	t0 = zf_now_ns();
	for (uint64_t off = 0; off < per_zone; off += chunk) {
		for (uint32_t i = 0; i < n; i++) {
			reqs[i] = (struct zdev_req){
				.op = ZDEV_OP_WRITE,
				.offset = (uint64_t)(g->nr_conv_zones + i) * g->zone_size + off,
				.buf = buf + i * chunk,
				.len = chunk,
			};
		}
		ret = zdev_io_batch(dev, reqs, (unsigned)n);
		if (ret != (int)n) {
			for (uint32_t i = 0; i < n; i++)
				if (reqs[i].result < 0)
					fprintf(stderr, "zonefuse-emu: write failed: %s\n",
						strerror((int)-reqs[i].result));
			if (ret < 0)
				fprintf(stderr, "zonefuse-emu: batch failed: %s\n", strerror(-ret));
			goto out;
		}
		done += n * chunk;
	}
	ns = zf_now_ns() - t0;
	printf("zones=%" PRIu64 " bytes=%" PRIu64 " seconds=%.3f MB/s=%.1f MiB/s=%.1f\n",
	       n, done, (double)ns / 1e9, (double)done * 1e3 / (double)ns,
	       (double)done / (1 << 20) / ((double)ns / 1e9));
	for (uint32_t i = 0; i < n; i++)
		zdev_zone_reset(dev, g->nr_conv_zones + i);
	rc = 0;
out:
	zdev_buf_free(buf);
	free(reqs);
	zdev_close(dev);
	return rc;
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			return 0;
		}
	/* sub-command options start after the command word */
	argc--;
	argv++;
	optind = 1;
	if (!strcmp(cmd, "create"))
		return cmd_create(argc, argv);
	if (!strcmp(cmd, "info"))
		return cmd_info(argc, argv);
	if (!strcmp(cmd, "powerloss"))
		return cmd_powerloss(argc, argv);
	if (!strcmp(cmd, "bench"))
		return cmd_bench(argc, argv);
	usage_err("unknown command '%s'", cmd);
	return EXIT_USAGE;
}
