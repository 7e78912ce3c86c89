/* zonefuse — mount a zoned device (or an emulated one) with FUSE.
 *
 *   zonefuse DEVICE MOUNTPOINT [-f] [-d] [-s] [-o opt,...]
 *
 * Also usable as `mount -t fuse.zonefuse DEVICE MOUNTPOINT -o ...` (the
 * mount.fuse3 convention).  Order of work: parse options, open the device
 * exclusively, mount the file system (replay) so errors reach the terminal,
 * then mount FUSE, daemonise, start background work and serve requests.
 */
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fusefs/fusefs.h"

struct conf {
	char *device;
	unsigned stripe_width;
	char *stripe_unit;
	unsigned buffer_mb;
	unsigned commit_ms;
	unsigned reorder;
	char *hints;
	int gc_mbps;		/* -1 = default */
	char *placement;	/* "on" | "off" */
	unsigned readahead_kb;
	int prefetch_kb;	/* -1 = default */
	int no_killpriv;
	int ro;
	int show_help, show_version;
	int verbose;
};

#define OPT(t, p) { t, offsetof(struct conf, p), 1 }
static const struct fuse_opt conf_opts[] = {
	OPT("stripe_width=%u", stripe_width),
	OPT("stripe_unit=%s", stripe_unit),
	OPT("buffer_mb=%u", buffer_mb),
	OPT("commit_ms=%u", commit_ms),
	OPT("reorder_chunks=%u", reorder),
	OPT("hints=%s", hints),
	OPT("gc_mbps=%d", gc_mbps),
	OPT("placement=%s", placement),
	OPT("readahead_kb=%u", readahead_kb),
	OPT("prefetch_kb=%d", prefetch_kb),
	OPT("no_killpriv", no_killpriv),
	OPT("zf_verbose", verbose),
	FUSE_OPT_KEY("ro", 'r'),	/* noted, and passed on to FUSE */
	FUSE_OPT_KEY("-h", 'h'),
	FUSE_OPT_KEY("--help", 'h'),
	FUSE_OPT_KEY("-V", 'V'),
	FUSE_OPT_KEY("--version", 'V'),
	FUSE_OPT_END
};

static void usage(const char *prog)
{
	printf("usage: %s DEVICE MOUNTPOINT [options]\n"
	       "\n"
	       "Mount a zonefuse file system from DEVICE: a zoned block device\n"
	       "(/dev/nvme0n2, /dev/nullb0, an SMR disk) or an emulated zoned device\n"
	       "file made by `zonefuse-emu create`.  Format it first with mkfs.zonefuse.\n"
	       "Unmount with `fusermount3 -u MOUNTPOINT`.\n"
	       "\n"
	       "zonefuse options (-o name=value):\n"
	       "    -o stripe_width=N      zones written in parallel per flush (default 4;\n"
	       "                           medium-class files; a WAL only while it streams\n"
	       "                           faster than one zone takes; others use 1)\n"
	       "    -o stripe_unit=BYTES   bytes per stripe unit / write chunk (default 1M)\n"
	       "    -o buffer_mb=N         write-buffer memory bound in MiB (default 256)\n"
	       "    -o commit_ms=N         periodic metadata commit interval (default 5000, 0=off)\n"
	       "    -o reorder_chunks=N    complete chunks held to write files in order (default 8)\n"
	       "    -o hints=FILE          lifetime rules: lines \"GLOB CLASS\" (CLASS: none, short,\n"
	       "                           medium, long, extreme; GLOB with '/' matches the path\n"
	       "                           from the mount root, else the name; first match wins)\n"
	       "    -o placement=on|off    place files in zones by lifetime class (default on;\n"
	       "                           off: every file in one class, for comparison)\n"
	       "    -o gc_mbps=N           background garbage collection copy rate in MB/s\n"
	       "                           (default 128, 0 = unbounded; GC for waiting writers\n"
	       "                           is never slowed)\n"
	       "    -o readahead_kb=N      max kernel readahead per request (default 1024)\n"
	       "    -o prefetch_kb=N       per-buffer read-ahead for sequential readers, two\n"
	       "                           buffers per file (default 2 x stripe_width x\n"
	       "                           stripe_unit; 0 = off)\n"
	       "    -o no_killpriv         do not negotiate FUSE_HANDLE_KILLPRIV_V2\n"
	       "    -o zf_verbose          log debug messages\n"
	       "    -o ro                  mount read-only\n"
	       "\n"
	       "FUSE options:\n", prog);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct conf *c = data;
	(void)outargs;
	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (!c->device) {
			c->device = strdup(arg);
			return 0;
		}
		return 1;
	case 'r':
		c->ro = 1;
		return 1;
	case 'h':
		c->show_help = 1;
		return 0;
	case 'V':
		c->show_version = 1;
		return 0;
	default:
		return 1;
	}
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts;
	struct conf c = { 0 };
	struct fs_opts fo;
	struct zdev *dev = NULL;
	struct fs *fs = NULL;
	struct fuse_session *se = NULL;
	struct fusefs ff = { 0 };
	int ret = 1, r;

	/* Write buffers and read bounces are large and short-lived: keep them
	 * in the heap instead of mapping and faulting pages in on every call. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	c.commit_ms = UINT32_MAX;	/* "not given" */
	c.prefetch_kb = -1;
	c.gc_mbps = -1;
	if (fuse_opt_parse(&args, &c, conf_opts, opt_proc) == -1)
		return 2;
	if (c.show_help) {
		usage(argv[0]);
		fuse_opt_free_args(&args);
		return 0;
	}
	if (c.show_version) {
		printf("zonefuse 0.1.0 (FUSE library %s)\n", fuse_pkgversion());
		fuse_opt_free_args(&args);
		return 0;
	}
	if (fuse_parse_cmdline(&args, &opts) != 0) {
		free(c.device);
		fuse_opt_free_args(&args);
		return 2;
	}
	if (!c.device || !opts.mountpoint) {
		fprintf(stderr, "usage: %s DEVICE MOUNTPOINT [options]  (--help for more)\n", argv[0]);
		goto out_args;
	}
	if (c.verbose)
		zf_log_set_level(ZF_LOG_DEBUG);

	fs_opts_default(&fo);
	if (c.stripe_width)
		fo.stripe_width = c.stripe_width;
	if (c.stripe_unit) {
		uint64_t v;
		if (zf_parse_size(c.stripe_unit, &v) || v == 0 || v > (64u << 20)) {
			fprintf(stderr, "zonefuse: bad stripe_unit '%s'\n", c.stripe_unit);
			goto out_args;
		}
		fo.stripe_unit = (uint32_t)v;
	}
	if (c.buffer_mb)
		fo.buffer_bytes = (uint64_t)c.buffer_mb << 20;
	if (c.commit_ms != UINT32_MAX)
		fo.commit_interval_ms = c.commit_ms;
	if (c.reorder)
		fo.reorder_chunks = c.reorder;
	if (c.prefetch_kb >= 0)
		fo.prefetch_bytes = (uint64_t)c.prefetch_kb << 10;
	fo.read_only = c.ro;
	if (c.gc_mbps >= 0)
		fo.gc_mbps = (uint32_t)c.gc_mbps;
	if (c.placement && strcmp(c.placement, "on") != 0 && strcmp(c.placement, "off") != 0) {
		fprintf(stderr, "zonefuse: placement must be on or off, not '%s'\n", c.placement);
		goto out_args;
	}
	fo.placement_off = c.placement && strcmp(c.placement, "off") == 0;
	fo.hints_file = c.hints;	/* read at mount (fs_lifetime.c) */
	if (c.hints && access(c.hints, R_OK) != 0) {
		fprintf(stderr, "zonefuse: cannot read hints file %s: %s\n", c.hints, strerror(errno));
		goto out_args;
	}

	struct zdev_open_opts zo = ZDEV_OPEN_OPTS_INIT;
	zo.exclusive = true;
	zo.read_only = c.ro;
	r = zdev_open(c.device, &zo, &dev);
	if (r) {
		if (r == -EBUSY)
			fprintf(stderr, "zonefuse: %s is in use (already mounted?)\n", c.device);
		else
			fprintf(stderr, "zonefuse: cannot open %s: %s\n", c.device, strerror(-r));
		goto out_args;
	}
	r = fs_mount(dev, &fo, &fs);
	if (r) {
		fprintf(stderr, "zonefuse: cannot mount %s: %s\n", c.device, strerror(-r));
		goto out_dev;
	}
	ff.fs = fs;
	ff.conf.attr_timeout = 5.0;
	ff.conf.entry_timeout = 5.0;
	ff.conf.max_readahead = (c.readahead_kb ? c.readahead_kb : 1024) * 1024u;
	ff.conf.killpriv = !c.no_killpriv;

	se = fuse_session_new(&args, &fusefs_ops, sizeof(fusefs_ops), &ff);
	if (!se)
		goto out_fs;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_se;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_sig;
	r = fusefs_install_io(se, &ff);
	if (r)
		zf_warn("custom FUSE I/O not installed (%s): writes will be slower", strerror(-r));
	if (!opts.foreground)
		zf_log_use_syslog(1);
	fuse_daemonize(opts.foreground);
	r = fs_start(fs);
	if (r)
		zf_err("cannot start background work: %s", strerror(-r));
	zf_info("mounted %s (%s) on %s", c.device, zdev_backend_name(dev), opts.mountpoint);

	if (opts.singlethread) {
		r = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		if (!lc) {
			r = -ENOMEM;
		} else {
			fuse_loop_cfg_set_clone_fd(lc, 0);
			/* -1 (the default) means "no limit"; libfuse 3.14 warns
			 * about it (as a "max threads value") if passed on. */
			if (opts.max_idle_threads <= 100000)
				fuse_loop_cfg_set_idle_threads(lc, opts.max_idle_threads);
			if (opts.max_threads > 0 && opts.max_threads <= 100000)
				fuse_loop_cfg_set_max_threads(lc, opts.max_threads);
			r = fuse_session_loop_mt(se, lc);
			fuse_loop_cfg_destroy(lc);
		}
	}
	ret = r ? 1 : 0;
	fuse_session_unmount(se);
out_sig:
	fuse_remove_signal_handlers(se);
out_se:
	fuse_session_destroy(se);
out_fs:
	r = fs_unmount(fs);
	if (r) {
		zf_err("unmount of %s did not complete cleanly: %s", c.device, strerror(-r));
		ret = 1;
	}
out_dev:
	zdev_close(dev);
out_args:
	free(opts.mountpoint);
	free(c.device);
	free(c.stripe_unit);
	free(c.hints);
	free(c.placement);
	fuse_opt_free_args(&args);
	return ret;
}
