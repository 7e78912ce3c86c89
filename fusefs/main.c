/* zonefuse — mount a zoned device (or an emulated one) with FUSE.
 *
 *   zonefuse DEVICE MOUNTPOINT [-f] [-d] [-s] [-o opt,...]
 *   zonefuse -u [-z] MOUNTPOINT          (unmount; returns when the daemon is gone)
 *
 * Also usable as `mount -t fuse.zonefuse DEVICE MOUNTPOINT -o ...` (the
 * mount.fuse3 convention, which also brings `mount -o remount` here: it is
 * refused, exit 32), and, installed as umount.fuse.zonefuse and umount.fuse,
 * as the helpers umount(8) runs for FUSE mounts (umount.fuse hands mounts
 * that are not zonefuse's to umount -i).  Order of work: parse and check
 * every option, choose the log, open the device exclusively, mount the file
 * system (replay) so errors reach the terminal, then mount FUSE, daemonise,
 * start background work and serve requests.
 *
 * Unmount is complete when it returns: the file system is written out and the
 * device closed in the DESTROY handler.  On a block device the mount is of
 * type fuseblk, for which the kernel waits for DESTROY inside umount(2); for
 * an emulated device file `zonefuse -u` and the umount helpers wait until the
 * daemon has exited.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fusefs/bdi.h"
#include "fusefs/fusefs.h"
#include "fusefs/loop.h"
#include "fusefs/uring.h"
#include "gc/gc.h"
#include "tools/zf_tool.h"

/* The numeric -o options: each is given as text and checked against its
 * range before anything is opened, so that a value out of range is a bad
 * command line (exit 2) and never wraps around or means "default". */
enum num_opt {
	N_STRIPE_WIDTH, N_BUFFER_MB, N_COMMIT_MS, N_WRITE_BEHIND_MS, N_REORDER, N_GC_MBPS,
	N_READAHEAD_KB, N_MAX_READ, N_PREFETCH_KB, N_BDI_MAX_MB, N_FUSE_WORKERS,
	N_FUSE_URING, N_POLL_US, N_NUM
};

static const struct num_opt_def {
	const char *name;
	uint64_t min, max;
	const char *unit;	/* for the message */
} num_opts[N_NUM] = {
	[N_STRIPE_WIDTH] = { "stripe_width", 1, 64, "zones" },
	[N_BUFFER_MB] = { "buffer_mb", 8, 1u << 20, "MiB" },
	[N_COMMIT_MS] = { "commit_ms", 0, 3600000, "ms" },
	[N_WRITE_BEHIND_MS] = { "write_behind_ms", 0, 600000, "ms" },
	[N_REORDER] = { "reorder_chunks", 1, 1024, "chunks" },
	[N_GC_MBPS] = { "gc_mbps", 0, 1000000, "MB/s" },
	[N_READAHEAD_KB] = { "readahead_kb", 4, 1u << 20, "KiB" },
	[N_MAX_READ] = { "max_read", 4096, 1u << 20, "bytes" },
	[N_PREFETCH_KB] = { "prefetch_kb", 0, 1u << 20, "KiB" },
	[N_BDI_MAX_MB] = { "bdi_max_mb", 1, 1u << 20, "MiB" },
	[N_FUSE_WORKERS] = { "fuse_workers", 1, FUSEFS_LOOP_MAX_WORKERS, "workers" },
	[N_FUSE_URING] = { "fuse_uring", 0, FUSEFS_URING_MAX_PER_QUEUE, "threads per CPU" },
	[N_POLL_US] = { "poll_us", 0, FUSEFS_POLL_MAX_US, "microseconds" },
};

struct conf {
	char *device;
	char *num_text[N_NUM];	/* as given; NULL = not given */
	uint64_t num[N_NUM];	/* checked values of the given ones */
	char *stripe_unit;
	char *hints;
	char *placement;	/* "on" | "off" */
	int no_killpriv;
	char *writeback_cache;	/* "on" | "off"; NULL = on */
	char *bdi_limit;	/* "global" | "strict" | "off"; NULL = global */
	char *fuse_loop;	/* "zf" | "mt"; NULL = zf */
	int ro;
	int remount;		/* -o remount: mount(8) -o remount through mount.fuse3 */
	int show_help, show_version;
	int verbose;		/* -o zf_verbose: debug messages */
	int chatty;		/* -o verbose: info messages on the terminal too */
	char *log;		/* syslog | stderr | FILE; NULL = default */
	int has_fsname, has_subtype;
	int has_default_permissions;	/* given by the user */
};

static bool has(const struct conf *c, enum num_opt o) { return c->num_text[o] != NULL; }

/* The value of option o, or def when it was not given. */
static uint64_t num(const struct conf *c, enum num_opt o, uint64_t def)
{
	return has(c, o) ? c->num[o] : def;
}

#define OPT(t, p) { t, offsetof(struct conf, p), 1 }
#define NUM(t, o) { t "=%s", offsetof(struct conf, num_text) + (o) * sizeof(char *), 1 }
static const struct fuse_opt conf_opts[] = {
	NUM("stripe_width", N_STRIPE_WIDTH),
	OPT("stripe_unit=%s", stripe_unit),
	NUM("buffer_mb", N_BUFFER_MB),
	NUM("commit_ms", N_COMMIT_MS),
	NUM("write_behind_ms", N_WRITE_BEHIND_MS),
	NUM("reorder_chunks", N_REORDER),
	OPT("hints=%s", hints),
	NUM("gc_mbps", N_GC_MBPS),
	OPT("placement=%s", placement),
	NUM("readahead_kb", N_READAHEAD_KB),
	NUM("max_read", N_MAX_READ),
	NUM("prefetch_kb", N_PREFETCH_KB),
	OPT("no_killpriv", no_killpriv),
	OPT("writeback_cache=%s", writeback_cache),
	OPT("bdi_limit=%s", bdi_limit),
	NUM("bdi_max_mb", N_BDI_MAX_MB),
	OPT("fuse_loop=%s", fuse_loop),
	NUM("fuse_workers", N_FUSE_WORKERS),
	NUM("fuse_uring", N_FUSE_URING),
	NUM("poll_us", N_POLL_US),
	OPT("zf_verbose", verbose),
	OPT("verbose", chatty),
	OPT("remount", remount),
	OPT("log=%s", log),
	FUSE_OPT_KEY("fsname=", 'n'),
	FUSE_OPT_KEY("subtype=", 't'),
	FUSE_OPT_KEY("ro", 'r'),	/* noted, and passed on to FUSE */
	FUSE_OPT_KEY("default_permissions", 'p'),	/* noted, passed on */
	FUSE_OPT_KEY("-h", 'h'),
	FUSE_OPT_KEY("--help", 'h'),
	FUSE_OPT_KEY("-V", 'V'),
	FUSE_OPT_KEY("--version", 'V'),
	FUSE_OPT_END
};

/* Checks every numeric option given; 0, or -EINVAL after one line that
 * names the option, its range and the value refused. */
static int check_num_opts(struct conf *c)
{
	for (int o = 0; o < N_NUM; o++) {
		const struct num_opt_def *d = &num_opts[o];
		const char *t = c->num_text[o];
		char *end;
		if (!t)
			continue;
		errno = 0;
		unsigned long long v = strtoull(t, &end, 10);
		if (!*t || *t == '-' || *t == '+' || *t == ' ' || *end || errno || v < d->min ||
		    v > d->max) {
			fprintf(stderr, "zonefuse: %s must be %llu to %llu %s, not '%s'\n", d->name,
				(unsigned long long)d->min, (unsigned long long)d->max, d->unit, t);
			return -EINVAL;
		}
		c->num[o] = v;
	}
	return 0;
}

static void usage(const char *prog)
{
	printf("usage: %s DEVICE MOUNTPOINT [options]\n"
	       "       %s -u [-z] MOUNTPOINT\n"
	       "\n"
	       "Mount a zonefuse file system from DEVICE: a zoned block device\n"
	       "(/dev/nvme0n2, /dev/nullb0, an SMR disk) or an emulated zoned device\n"
	       "file made by `zonefuse-emu create`.  Format it first with mkfs.zonefuse.\n"
	       "zonefuse -u, umount(8) (through umount.fuse and umount.fuse.zonefuse)\n"
	       "and, for a block device mounted by root (type fuseblk), fusermount3 -u\n"
	       "return once everything is written and the device is free.\n"
	       "\n"
	       "    -u MOUNTPOINT          unmount, and return only when the daemon has\n"
	       "                           written everything, closed the device and exited\n"
	       "                           (also what `umount MOUNTPOINT` runs, through\n"
	       "                           umount.fuse or umount.fuse.zonefuse); gives up\n"
	       "                           after 10 s, naming the cause, when another mount\n"
	       "                           namespace holds a copy of the mount\n"
	       "    -z                     with -u: lazy unmount (detach now, do not wait)\n"
	       "\n"
	       "zonefuse options (-o name=value; a number out of its range is refused):\n"
	       "    -o stripe_width=N      zones written in parallel per flush (default 4;\n"
	       "                           medium-class files; a WAL only while it streams\n"
	       "                           faster than one zone takes; others use 1)\n"
	       "    -o stripe_unit=BYTES   bytes per stripe unit / write chunk (default 1M)\n"
	       "    -o buffer_mb=N         write-buffer memory bound in MiB (default 256)\n"
	       "    -o commit_ms=N         periodic metadata commit interval (default 5000, 0=off)\n"
	       "    -o write_behind_ms=N   a closed file's buffers wait N ms before they go to\n"
	       "                           the device, so a file deleted by then is never\n"
	       "                           written (default 1000; 0 = at the close); while\n"
	       "                           on, a file's first 16 MiB stay buffered as written\n"
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
	       "    -o max_read=BYTES      bytes per READ request (default 1 MiB; 512 KiB on\n"
	       "                           an emulated device when a pipe cannot hold 1 MiB)\n"
	       "    -o prefetch_kb=N       per-buffer read-ahead for sequential readers, four\n"
	       "                           buffers per file (default stripe_width x\n"
	       "                           stripe_unit; 0 = off)\n"
	       "    -o no_killpriv         do not negotiate FUSE_HANDLE_KILLPRIV_V2\n"
	       "    -o writeback_cache=on|off  off: every write() is a WRITE the daemon\n"
	       "                           answers, so ENOSPC fails the write() itself, not\n"
	       "                           only a later fsync() (default on)\n"
	       "    -o bdi_limit=MODE      the kernel's dirty-page limit for this mount, set\n"
	       "                           when root: global (default: no strict per-mount\n"
	       "                           limit, the system's dirty limit applies), strict\n"
	       "                           (at most bdi_max_mb dirty), off (kernel defaults)\n"
	       "    -o bdi_max_mb=N        the mount's dirty-page cap in MiB (default 256)\n"
	       "    -o fuse_loop=zf|mt     request loop: zf (default; each worker serves what\n"
	       "                           it reads, on its own /dev/fuse clone) or mt\n"
	       "                           (libfuse's multithreaded loop); -s: libfuse's\n"
	       "                           single-threaded loop\n"
	       "    -o fuse_workers=N      workers of the zf loop (default 4)\n"
	       "    -o poll_us=N           zf loop: while requests come promptly, poll for\n"
	       "                           the next one up to N microseconds before sleeping\n"
	       "                           (default 50, at most 1000; 0 = never; never with\n"
	       "                           one CPU)\n"
	       "    -o fuse_uring=N        zf loop: take requests over io_uring as well, N\n"
	       "                           threads per CPU (default 0 = off; needs Linux\n"
	       "                           >= 6.14 with fuse.enable_uring=Y, else /dev/fuse\n"
	       "                           alone serves, as it does FORGETs and INTERRUPTs)\n"
	       "    -o log=syslog|stderr|FILE  where messages go (default: standard error\n"
	       "                           with -f; in the background syslog when /dev/log\n"
	       "                           exists, else /var/log/zonefuse.log or the next\n"
	       "                           writable file; stderr only with -f); each line\n"
	       "                           names the device\n"
	       "    -o verbose             print info messages on the terminal while\n"
	       "                           mounting (default: warnings and errors only)\n"
	       "    -o zf_verbose          log debug messages\n"
	       "    -o ro                  mount read-only\n"
	       "    (default_permissions is always on: the kernel checks modes and ACLs)\n"
	       "\n"
	       "Exit status: 0 success (for -u: unmounted, daemon gone), 1 failure,\n"
	       "2 bad command line (an option or value, a mount point that is not a\n"
	       "directory), 32 mount -o remount (not supported).\n"
	       "\n"
	       "FUSE options:\n", prog, prog);
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
	case 'n':
		c->has_fsname = 1;
		return 1;
	case 'p':
		c->has_default_permissions = 1;
		return 1;
	case 't':
		c->has_subtype = 1;
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

/* Everything one daemon run holds.  ff comes first: libfuse hands the
 * handlers &ff as userdata, and the DESTROY handler finds the rest from it. */
struct daemon {
	struct fusefs ff;
	struct conf c;
	struct fuse_cmdline_opts opts;
	struct fs_opts fo;
	struct zdev *dev;
	bool blk;		/* block device mounted as fuseblk */
	int unmount_ret;	/* fs_unmount's result, once done */
	uint64_t unmount_seen_ns;	/* zf_now_ns() when the zf loop found the mount
					 * gone; 0 = unknown (other loops, a signal) */
	uint64_t served_ns;	/* zf_now_ns() when the request loop returned */
	char log_file[PATH_MAX];	/* the background log file, "" = none */
};

/* ---- unmount: zonefuse -u, umount.fuse.zonefuse ---------------------------- */

static int run_fusermount(const char *dir, bool lazy)
{
	pid_t pid = fork();
	int st;
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", lazy ? "-uz" : "-u", "--", dir, (char *)NULL);
		fprintf(stderr, "zonefuse: cannot run fusermount3: %s\n", strerror(errno));
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* How long -u waits for a copy of the mount in another mount namespace to
 * go before it gives up, in seconds: the daemon serves that copy until it
 * is unmounted there, however long that takes. */
#define NS_COPY_WAIT_S 10

static bool same_superblock(const struct zf_mnt *m, void *arg)
{
	const struct zf_mnt *want = arg;
	return m->dev_major == want->dev_major && m->dev_minor == want->dev_minor;
}

/* Waits until the process behind pidfd has exited, telling the user what
 * it waits for when that takes more than a few seconds.  0 once it is gone,
 * 1 (after one line that says why) when a copy of the mount in another
 * mount namespace keeps it serving for NS_COPY_WAIT_S seconds. */
static int wait_exit(int pidfd, pid_t pid, const struct zf_mnt *m)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	struct zf_ns_mount ns;
	uint64_t t0 = zf_now_ns();
	int waited = 0, copy_for = 0;
	for (;;) {
		int r = poll(&p, 1, 1000);
		if (r > 0 || (r < 0 && errno != EINTR))
			break;
		waited++;
		if (waited >= 2 && zf_find_mount_elsewhere(same_superblock, (void *)m, &ns) == 0) {
			if (++copy_for < NS_COPY_WAIT_S)
				continue;
			fprintf(stderr, "zonefuse: %s is unmounted here, but pid %ld (%s) has it "
				"mounted on %s in another mount namespace, so zonefuse pid %ld goes "
				"on serving it: unmount it there (nsenter -t %ld -m umount %s) or end "
				"the connection (echo 1 > /sys/fs/fuse/connections/%u/abort)\n",
				m->dir, (long)ns.pid, ns.comm, ns.m.dir, (long)pid, (long)ns.pid,
				ns.m.dir, m->dev_minor);
			return 1;
		}
		copy_for = 0;
		if (waited == 5)
			fprintf(stderr, "zonefuse: waiting for zonefuse pid %ld to finish writing "
				"%s and exit\n", (long)pid, m->dir);
	}
	if (waited >= 5)
		fprintf(stderr, "zonefuse: zonefuse pid %ld has exited after %.1f s\n", (long)pid,
			(double)(zf_now_ns() - t0) / 1e9);
	return 0;
}

/* Unmounts dir; unless lazy, returns only when the daemon has exited (so
 * the device is free).  0, or 1 with a message. */
static int unmount_dir(const char *dir, bool lazy, bool force)
{
	struct zf_mnt m;
	pid_t pid = 0;
	char comm[64];
	int pidfd = -1, r;

	r = dir[0] == '/' ? zf_find_mount_at_real(dir, &m) : -ENOENT;
	if (r == -ENOENT)
		r = zf_find_mount_at(dir, &m);
	if (r) {
		fprintf(stderr, "zonefuse: %s: %s\n", dir,
			r == -ENOENT ? "not a mount point" : strerror(-r));
		return 1;
	}
	if (strcmp(m.type, "fuse.zonefuse") != 0 && strcmp(m.type, "fuseblk") != 0) {
		fprintf(stderr, "zonefuse: %s is not a zonefuse mount (type %s)\n", m.dir, m.type);
		return 1;
	}
	if (m.source[0] == '/' &&
	    zf_find_holder(m.source, "zonefuse", &pid, comm, sizeof(comm)) == 0)
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (geteuid() == 0)
		r = umount2(m.dir, lazy ? MNT_DETACH : force ? MNT_FORCE : 0) ? -errno : 0;
	else
		r = run_fusermount(m.dir, lazy);
	if (r) {
		if (r != -EIO)
			fprintf(stderr, "zonefuse: cannot unmount %s: %s%s\n", m.dir, strerror(-r),
				r == -EBUSY ? " (files are open: see `fuser -vm DIR`)" : "");
		if (pidfd >= 0)
			close(pidfd);
		return 1;
	}
	if (pidfd >= 0) {
		if (!lazy)
			r = wait_exit(pidfd, pid, &m);
		close(pidfd);
	}
	return r ? 1 : 0;
}

/* What the helper arguments umount(8) passes (-flnrv, -t TYPE, -N NS)
 * and those of zonefuse -u (-z) ask for. */
struct umount_args {
	bool lazy, force;
	bool other_ns;		/* -N: the mount is in another mount namespace */
	const char *dir;
};

/* 0, or the exit status after a message. */
static int parse_umount_args(int argc, char **argv, bool helper, struct umount_args *u)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-t") || !strcmp(a, "-N")) {
			u->other_ns |= !strcmp(a, "-N");
			i++;
		} else if (a[0] == '-' && a[1]) {
			for (const char *p = a + 1; *p; p++) {
				if (*p == 'z' || *p == 'l')
					u->lazy = true;
				else if (*p == 'f')
					u->force = true;
				else if (!strchr(helper ? "nrvi" : "u", *p)) {
					fprintf(stderr, "zonefuse: -u: unknown option -%c\n", *p);
					return 2;
				}
			}
		} else if (!u->dir) {
			u->dir = a;
		} else {
			fprintf(stderr, "zonefuse: -u takes one MOUNTPOINT\n");
			return 2;
		}
	}
	if (!u->dir) {
		fprintf(stderr, "usage: zonefuse -u [-z] MOUNTPOINT\n");
		return 2;
	}
	return 0;
}

/* zonefuse -u [-z] DIR, and umount.fuse.zonefuse DIR [-flnrv] [-t TYPE]
 * [-N NS] (the umount(8) helper calling convention). */
static int unmount_main(int argc, char **argv, bool helper)
{
	struct umount_args u = { 0 };
	int r = parse_umount_args(argc, argv, helper, &u);
	return r ? r : unmount_dir(u.dir, u.lazy, u.force);
}

/* umount.fuse: umount(8) names a mount's type after statfs(2), which says
 * "fuse" for every FUSE mount, and then runs /sbin/umount.fuse, not
 * umount.fuse.zonefuse.  Installed under that name, zonefuse unmounts its
 * own mounts (type fuse.zonefuse in mountinfo) the way -u does, and hands
 * every other mount, and any in another mount namespace (-N), back to
 * umount(8) with -i (no helper), which unmounts it exactly as it would
 * have without this helper. */
static int umount_fuse_main(int argc, char **argv)
{
	struct umount_args u = { 0 };
	struct zf_mnt m;
	char *av[24];
	int n = 0;

	if (parse_umount_args(argc, argv, true, &u) == 0 && !u.other_ns &&
	    (u.dir[0] == '/' ? zf_find_mount_at_real(u.dir, &m) : zf_find_mount_at(u.dir, &m)) == 0 &&
	    !strcmp(m.type, "fuse.zonefuse"))
		return unmount_dir(u.dir, u.lazy, u.force);
	av[n++] = "umount";
	av[n++] = "-i";
	for (int i = 1; i < argc && n < 23; i++)
		av[n++] = argv[i];
	av[n] = NULL;
	execv("/usr/bin/umount", av);
	execv("/bin/umount", av);
	fprintf(stderr, "umount.fuse: cannot run umount: %s\n", strerror(errno));
	return 32;
}

/* ---- configuration ----------------------------------------------------------- */

/* Parses the command line into d->c and d->opts.  Returns -1 to go on, or
 * the exit status (0 after --help/--version). */
static int parse_cmdline(struct daemon *d, struct fuse_args *args, const char *prog)
{
	struct conf *c = &d->c;

	if (fuse_opt_parse(args, c, conf_opts, opt_proc) == -1)
		return 2;
	if (c->show_help) {
		usage(prog);
		return 0;
	}
	if (c->show_version) {
		printf("zonefuse 0.1.0 (FUSE library %s)\n", fuse_pkgversion());
		return 0;
	}
	if (fuse_parse_cmdline(args, &d->opts) != 0)
		return 2;
	if (!c->device || !d->opts.mountpoint) {
		fprintf(stderr, "usage: %s DEVICE MOUNTPOINT [options]  (--help for more)\n", prog);
		return 2;
	}
	/* mount(8) -o remount of a fuse.zonefuse mount runs mount.fuse3, which
	 * starts a second daemon for the same device: the running one cannot
	 * change its options, so this is refused, as mount failure (32). */
	if (c->remount) {
		fprintf(stderr, "zonefuse: %s: remount is not supported: unmount, then mount "
			"again with the new options (e.g. -o ro)\n", d->opts.mountpoint);
		return 32;
	}
	struct stat st;
	if (stat(d->opts.mountpoint, &st) == 0 && !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "zonefuse: %s: not a directory: the mount point must be one\n",
			d->opts.mountpoint);
		return 2;
	}
	if (c->log && !strcmp(c->log, "stderr") && !d->opts.foreground) {
		fprintf(stderr, "zonefuse: -o log=stderr needs -f: in the background standard "
			"error is closed (use -o log=FILE or log=syslog)\n");
		return 2;
	}
	if (c->verbose)
		zf_log_set_level(ZF_LOG_DEBUG);
	return -1;
}

/* Turns the zonefuse options into d->fo; 0 or -EINVAL with a message. */
static int build_fs_opts(struct daemon *d)
{
	const struct conf *c = &d->c;
	struct fs_opts *fo = &d->fo;

	fs_opts_default(fo);
	if (check_num_opts(&d->c))
		return -EINVAL;
	fo->stripe_width = (uint32_t)num(c, N_STRIPE_WIDTH, fo->stripe_width);
	if (c->stripe_unit) {
		uint64_t v;
		if (zf_parse_size(c->stripe_unit, &v) || v == 0 || v > (64u << 20)) {
			fprintf(stderr, "zonefuse: bad stripe_unit '%s'\n", c->stripe_unit);
			return -EINVAL;
		}
		fo->stripe_unit = (uint32_t)v;
	}
	fo->buffer_bytes = num(c, N_BUFFER_MB, fo->buffer_bytes >> 20) << 20;
	/* A flush holds a whole stripe of chunks in the buffer. */
	if (fo->buffer_bytes < (uint64_t)fo->stripe_width * fo->stripe_unit) {
		fprintf(stderr, "zonefuse: buffer_mb must hold a stripe: at least %llu MiB "
			"(stripe_width x stripe_unit)\n",
			(unsigned long long)(((uint64_t)fo->stripe_width * fo->stripe_unit +
					      (1u << 20) - 1) >> 20));
		return -EINVAL;
	}
	fo->commit_interval_ms = (uint32_t)num(c, N_COMMIT_MS, fo->commit_interval_ms);
	fo->write_behind_ms = (uint32_t)num(c, N_WRITE_BEHIND_MS, fo->write_behind_ms);
	fo->reorder_chunks = (uint32_t)num(c, N_REORDER, fo->reorder_chunks);
	if (has(c, N_PREFETCH_KB))
		fo->prefetch_bytes = c->num[N_PREFETCH_KB] << 10;
	fo->read_only = c->ro;
	/* What the kernel may hold dirty for the mount (tune_bdi's cap) is
	 * kept free for its write-back. */
	fo->dirty_reserve = num(c, N_BDI_MAX_MB, 256) << 20;
	fo->gc_mbps = (uint32_t)num(c, N_GC_MBPS, fo->gc_mbps);
	if (c->placement && strcmp(c->placement, "on") != 0 && strcmp(c->placement, "off") != 0) {
		fprintf(stderr, "zonefuse: placement must be on or off, not '%s'\n", c->placement);
		return -EINVAL;
	}
	if (c->writeback_cache && strcmp(c->writeback_cache, "on") != 0 &&
	    strcmp(c->writeback_cache, "off") != 0) {
		fprintf(stderr, "zonefuse: writeback_cache must be on or off, not '%s'\n",
			c->writeback_cache);
		return -EINVAL;
	}
	enum fusefs_bdi_mode bm;
	if (c->bdi_limit && fusefs_bdi_parse_mode(c->bdi_limit, &bm)) {
		fprintf(stderr, "zonefuse: bdi_limit must be global, strict or off, not '%s'\n",
			c->bdi_limit);
		return -EINVAL;
	}
	if (c->fuse_loop && strcmp(c->fuse_loop, "zf") && strcmp(c->fuse_loop, "mt")) {
		fprintf(stderr, "zonefuse: fuse_loop must be zf or mt, not '%s'\n", c->fuse_loop);
		return -EINVAL;
	}
	fo->placement_off = c->placement && strcmp(c->placement, "off") == 0;
	fo->hints_file = c->hints;	/* read at mount (fs_lifetime.c) */
	if (c->hints && access(c->hints, R_OK) != 0) {
		fprintf(stderr, "zonefuse: cannot read hints file %s: %s\n", c->hints, strerror(errno));
		return -EINVAL;
	}
	return 0;
}

/* Names the mount after the device's real path (so `findmnt`, `zonefuse -u`
 * and the in-use messages find it) with type fuse.zonefuse, or fuseblk for a
 * block device when root (the kernel then opens the device itself and waits
 * for DESTROY in umount).  Options the user gave win. */
static int add_mount_opts(struct daemon *d, struct fuse_args *args)
{
	char real[PATH_MAX], opt[PATH_MAX + 16];
	struct stat st;

	if (!realpath(d->c.device, real) || stat(real, &st) != 0)
		return 0;	/* zdev_open reports it */
	d->blk = S_ISBLK(st.st_mode) && geteuid() == 0;
	if (!d->c.has_fsname && !strpbrk(real, ",\\")) {
		snprintf(opt, sizeof(opt), "-ofsname=%s", real);
		if (fuse_opt_add_arg(args, opt))
			return -ENOMEM;
	}
	/* The kernel sets the fuseblk superblock's block size to blksize
	 * (default 512), which fails with EINVAL below the device's logical
	 * block size; 4096 is at least that for every device zdev opens and
	 * at most the page size. */
	if (d->blk && (fuse_opt_add_arg(args, "-oblkdev") ||
		       fuse_opt_add_arg(args, "-oblksize=4096")))
		return -ENOMEM;
	if (!d->c.has_subtype && !d->blk && fuse_opt_add_arg(args, "-osubtype=zonefuse"))
		return -ENOMEM;
	/* zonefuse checks no permissions itself: the kernel checks every
	 * access against the mode bits and ACLs, whatever the mount options
	 * (with allow_other, anyone could otherwise touch anything). */
	if (!d->c.has_default_permissions && fuse_opt_add_arg(args, "-odefault_permissions"))
		return -ENOMEM;
	return 0;
}

/* Lets libfuse parse a copy of the FUSE options the session will get, so
 * that one it does not know is refused (libfuse names it on stderr) before
 * the device is opened.  0, or -EINVAL. */
static int check_fuse_opts(const struct fuse_args *args)
{
	static const struct fuse_lowlevel_ops none;
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	int r = 0;

	for (int i = 0; i < args->argc && !r; i++)
		r = fuse_opt_add_arg(&copy, args->argv[i]);
	if (!r) {
		struct fuse_session *se = fuse_session_new(&copy, &none, sizeof(none), NULL);
		if (se)
			fuse_session_destroy(se);
		else
			r = -EINVAL;
	}
	fuse_opt_free_args(&copy);
	return r ? -EINVAL : 0;
}

/* ---- logging --------------------------------------------------------------------- */

static bool have_syslog(void)
{
	struct stat st;
	return stat("/dev/log", &st) == 0 && S_ISSOCK(st.st_mode);
}

/* The background log file when there is no syslog: the first of these that
 * can be opened. */
static int open_default_log(struct daemon *d)
{
	char cand[3][PATH_MAX];
	const char *rt = getenv("XDG_RUNTIME_DIR");
	int n = 0;

	snprintf(cand[n++], PATH_MAX, "/var/log/zonefuse.log");
	if (rt && rt[0] == '/')
		snprintf(cand[n++], PATH_MAX, "%s/zonefuse.log", rt);
	snprintf(cand[n++], PATH_MAX, "/tmp/zonefuse-%ld.log", (long)geteuid());
	for (int i = 0; i < n; i++) {
		if (zf_log_to_file(cand[i]) == 0) {
			memcpy(d->log_file, cand[i], sizeof(d->log_file));
			return 0;
		}
	}
	return -ENOENT;
}

/* Chooses where messages go, before the device is opened: -o log=stderr,
 * or -f without -o log, standard error; else -o log=FILE, syslog, or the
 * default file, from now on, with warnings and errors (and, with -o
 * verbose, every message) also printed on the terminal until a background
 * daemon detaches.  Every
 * line of syslog and of a file names the device.  0, or -errno after a
 * message. */
static int setup_log(struct daemon *d)
{
	const char *l = d->c.log;
	char real[PATH_MAX];
	int r;

	if ((l && !strcmp(l, "stderr")) || (!l && d->opts.foreground))
		return 0;
	zf_log_set_tag(realpath(d->c.device, real) ? real : d->c.device);
	if (!d->opts.foreground)
		zf_log_set_echo(d->c.chatty ? ZF_LOG_INFO : ZF_LOG_WARN);
	if (l && strcmp(l, "syslog")) {
		r = zf_log_to_file(l);
		if (r)
			fprintf(stderr, "zonefuse: cannot open log file %s: %s\n", l, strerror(-r));
		return r;
	}
	if (l || have_syslog()) {
		if (!have_syslog())
			fprintf(stderr, "zonefuse: warning: -o log=syslog but /dev/log does not "
				"exist: messages are lost\n");
		zf_log_use_syslog(1);
		return 0;
	}
	if (open_default_log(d) == 0) {
		if (d->c.chatty)
			fprintf(stderr, "zonefuse: no syslog (/dev/log is missing): messages go "
				"to %s\n", d->log_file);
		return 0;
	}
	fprintf(stderr, "zonefuse: no syslog and no writable log file: use -o log=FILE\n");
	return -ENOENT;
}

/* ---- device and file system ------------------------------------------------------- */

/* The one line that says what is wrong with DEVICE and what to do. */
static void report_open_error(const char *dev, int err, const struct zf_capture *cap)
{
	char busy[PATH_MAX + 64];

	switch (err) {
	case -EBUSY:
		zf_busy_text(dev, busy, sizeof(busy));
		fprintf(stderr, "zonefuse: %s: %s\n", dev, busy);
		break;
	case -ENODATA:
		fprintf(stderr, "zonefuse: %s: not a zonefuse file system: run mkfs.zonefuse "
			"first\n", dev);
		break;
	case -EUCLEAN:
		fprintf(stderr, "zonefuse: %s: the zonefuse file system is damaged (%s): run "
			"fsck.zonefuse %s\n", dev, zf_capture_detail(cap), dev);
		break;
	default:
		fprintf(stderr, "zonefuse: cannot mount %s: %s\n", dev,
			cap->first_err[0] ? zf_capture_detail(cap) : strerror(-err));
	}
}

/* Opens the device exclusively and mounts the file system (replay).  For
 * fuseblk the exclusive open only checks that nobody holds the device: the
 * kernel's own exclusive open at mount time would fail against it, so the
 * device is then opened again shared. */
static int open_fs(struct daemon *d)
{
	struct zdev_open_opts zo = ZDEV_OPEN_OPTS_INIT;
	struct zf_capture cap;
	int r;

	zo.exclusive = true;
	zo.read_only = d->c.ro;
	zf_capture_start(&cap);
	r = zdev_open(d->c.device, &zo, &d->dev);
	if (r == -EBUSY && zf_wait_unmounting("zonefuse", d->c.device, ZF_WAIT_UNMOUNTING_MS) == 0)
		r = zdev_open(d->c.device, &zo, &d->dev);
	if (!r && d->blk) {
		zdev_close(d->dev);
		d->dev = NULL;
		zo.exclusive = false;
		r = zdev_open(d->c.device, &zo, &d->dev);
	}
	if (!r) {
		r = fs_mount(d->dev, &d->fo, &d->ff.fs);
		if (r) {
			zdev_close(d->dev);
			d->dev = NULL;
		}
	}
	zf_capture_stop();
	if (r)
		report_open_error(d->c.device, r, &cap);
	else if (fs_mount_note(d->ff.fs))	/* a damaged log mounted read-only */
		zf_err("%s", fs_mount_note(d->ff.fs));
	return r;
}

static double secs(uint64_t from_ns, uint64_t to_ns)
{
	return to_ns > from_ns ? (double)(to_ns - from_ns) / 1e9 : 0.0;
}

/* Writes everything out and closes the device; runs once, from DESTROY or
 * after the session ended without one.  The unmount line says how long it
 * took from the moment the daemon found the mount gone, so that a slow exit
 * after umount shows where its time went: the requests still being served,
 * fs_unmount (which logs its own steps: stopping background work, the
 * write-out of the buffers and the final commit, the snapshot), closing
 * the device. */
static void close_fs(struct daemon *d)
{
	struct fs_stats st;
	char buffered[32];

	if (!d->ff.fs)
		return;
	uint64_t t0 = zf_now_ns();
	uint64_t start = d->unmount_seen_ns ? d->unmount_seen_ns : d->served_ns ? d->served_ns : t0;
	fs_get_stats(d->ff.fs, &st);
	zf_fmt_bytes(st.buffer_bytes, buffered, sizeof(buffered));
	int r = fs_unmount(d->ff.fs);
	d->ff.fs = NULL;
	uint64_t t1 = zf_now_ns();
	zdev_close(d->dev);
	d->dev = NULL;
	uint64_t t2 = zf_now_ns();
	d->unmount_ret = r;
	if (r) {
		zf_err("unmount of %s did not complete cleanly: %s", d->c.device, strerror(-r));
		return;
	}
	zf_info("unmounted %s: everything written, device closed %.2f s after the mount "
		"ended (requests %.2f s, file system with %s buffered %.2f s, device close "
		"%.2f s)", d->c.device, secs(start, t2), secs(start, t0), buffered,
		secs(t0, t1), secs(t1, t2));
}

static void op_destroy_close(void *userdata)
{
	struct daemon *d = (struct daemon *)((char *)userdata - offsetof(struct daemon, ff));
	if (fusefs_ops.destroy)
		fusefs_ops.destroy(userdata);
	close_fs(d);
}

/* ---- serving ----------------------------------------------------------------------- */

/* The request loop: -s libfuse's single-threaded loop, -o fuse_loop=mt
 * libfuse's multithreaded one, else loop.c's. */
static int serve(struct fuse_session *se, struct daemon *d)
{
	const struct fuse_cmdline_opts *opts = &d->opts;
	bool zf = !opts->singlethread && (!d->c.fuse_loop || !strcmp(d->c.fuse_loop, "zf"));
	if (num(&d->c, N_FUSE_URING, 0) && !zf)
		zf_warn("-o fuse_uring applies to the zf loop only: requests come over /dev/fuse");
	if (num(&d->c, N_POLL_US, 0) && !zf)
		zf_warn("-o poll_us applies to the zf loop only: this loop sleeps until each request comes");
	if (opts->singlethread)
		return fuse_session_loop(se);
	if (zf) {
		struct fusefs_loop_conf lc = {
			.workers = (unsigned)num(&d->c, N_FUSE_WORKERS, 4),
			.clone_fd = true,
			.uring_per_queue = (unsigned)num(&d->c, N_FUSE_URING, 0),
			.poll_us = (unsigned)num(&d->c, N_POLL_US, FUSEFS_POLL_DEFAULT_US),
			.ff = (struct fusefs *)&d->ff,
		};
		int r = fusefs_loop_run(se, &lc);
		d->unmount_seen_ns = lc.unmount_ns;
		return r;
	}
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, 0);
	/* -1 (the default) means "no limit"; libfuse 3.14 warns about it (as
	 * a "max threads value") if passed on. */
	if (opts->max_idle_threads <= 100000)
		fuse_loop_cfg_set_idle_threads(lc, opts->max_idle_threads);
	if (opts->max_threads > 0 && opts->max_threads <= 100000)
		fuse_loop_cfg_set_max_threads(lc, opts->max_threads);
	int r = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return r;
}

/* The kernel's writeback and readahead settings for the new mount (bdi.h);
 * never fails the mount. */
static void tune_bdi(struct daemon *d)
{
	struct fusefs_bdi_conf bc = {
		.mode = FUSEFS_BDI_GLOBAL,
		.max_bytes = num(&d->c, N_BDI_MAX_MB, 256) << 20,
		.read_ahead_kb = (unsigned)num(&d->c, N_READAHEAD_KB, 1024),
	};
	if (d->c.bdi_limit)
		(void)fusefs_bdi_parse_mode(d->c.bdi_limit, &bc.mode);	/* checked at parse */
	/* Strict: the kernel never holds more dirty than the room kept for it. */
	if (bc.mode == FUSEFS_BDI_STRICT)
		bc.max_bytes = ZF_MIN(bc.max_bytes, fs_dirty_reserve(d->ff.fs));
	int r = fusefs_bdi_tune(d->opts.mountpoint, &bc, "/sys");
	if (r < 0)
		zf_info("bdi settings not changed: mount %s not found (%s)", d->opts.mountpoint,
			strerror(-r));
	else if (bc.mode != FUSEFS_BDI_OFF) {	/* retuned while space is low */
		d->ff.bdi = bc;
		d->ff.mountpoint = d->opts.mountpoint;
	}
}

/* Mounts FUSE, detaches and serves until unmounted.  Returns the exit
 * status. */
/* Goes to the background, unless in the foreground: the parent waits on a
 * pipe and exits with the status the daemon reports through
 * detach_done(), so that `zonefuse DEV DIR` returns only once the file
 * system is served and its "mounted" line is logged (or has failed).
 * Returns the pipe's write end in the daemon, -1 in the foreground, or
 * -errno (still in the caller's process). */
static int detach_begin(bool foreground)
{
	int p[2];

	if (foreground)
		return -1;
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int r = -errno;
		close(p[0]);
		close(p[1]);
		return r;
	}
	if (pid > 0) {		/* the parent: the daemon's status, 1 if it died */
		unsigned char st = 1;
		close(p[1]);
		while (read(p[0], &st, 1) < 0 && errno == EINTR)
			;
		_exit(st);
	}
	close(p[0]);
	if (setsid() < 0)
		zf_warn("setsid: %s", strerror(errno));
	if (chdir("/") != 0)
		zf_warn("chdir /: %s", strerror(errno));
	return p[1];
}

/* The daemon is up (status 0) or gives up (non-zero): tell the waiting
 * parent and leave the terminal.  fd: detach_begin()'s result. */
static void detach_done(int fd, unsigned char status)
{
	if (fd < 0)
		return;
	zf_log_set_echo(-1);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	while (write(fd, &status, 1) < 0 && errno == EINTR)
		;
	close(fd);
}

/* The bytes per READ, which the mount and libfuse's INIT must agree on.
 * READs of a device whose bytes are a plain file are spliced into the
 * reply (op_read), which libfuse does only when its pipe holds the whole
 * reply: where the pipe cannot grow to a 1 MiB READ (no CAP_SYS_RESOURCE
 * beyond /proc/sys/fs/pipe-max-size), READs are capped at the largest
 * power of two that fits, so that one still lies within one stripe unit's
 * extent and is spliced instead of copied through a buffer.  An explicit
 * -o max_read wins.  0 or -errno. */
static int set_max_read(struct daemon *d, struct fuse_args *args)
{
	const size_t full = 1u << 20;	/* max_write: the kernel's READ size */
	unsigned int mr = (unsigned int)num(&d->c, N_MAX_READ, 0);
	char opt[32];

	if (!mr && zdev_reads_as_file(d->dev)) {
		size_t fit = fusefs_io_splice_fit(full);
		if (fit && fit < full) {
			mr = (unsigned int)fit;
			zf_info("READs capped at %u KiB (-o max_read) so that they are spliced: "
				"a pipe cannot hold a 1 MiB reply here", mr >> 10);
		}
	}
	if (!mr)
		return 0;
	d->ff.conf.max_read = mr;
	snprintf(opt, sizeof(opt), "-omax_read=%u", mr);
	return fuse_opt_add_arg(args, opt) ? -ENOMEM : 0;
}

/* A vm sysctl in centiseconds as ns; -1 when unreadable. */
static int64_t vm_centisecs_ns(const char *name)
{
	char path[64];
	long long v = -1;
	snprintf(path, sizeof(path), "/proc/sys/vm/%s", name);
	FILE *f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v < 0 ? -1 : (int64_t)v * 10000000;
}

/* What the mount keeps for the kernel's dirty pages while space is low
 * (fusefs.h, fusefs_space_check): a cap of one zone (at least 4 MiB, the
 * kernel overshoots a strict cap by a few pages per CPU), and the time the
 * kernel takes at most to write back what it held before, plus 1 s; none
 * when periodic write-back is off (dirty_writeback_centisecs 0). */
static void set_low_keep(struct daemon *d)
{
	int64_t expire = vm_centisecs_ns("dirty_expire_centisecs");
	int64_t every = vm_centisecs_ns("dirty_writeback_centisecs");

	d->ff.conf.low_cap = ZF_MAX(zdev_geometry(d->dev)->zone_capacity, 4ull << 20);
	d->ff.conf.drain_ns = expire >= 0 && every > 0 ?
			      (uint64_t)(expire + every) + 1000000000ull : 0;
}

static int run_session(struct daemon *d, struct fuse_args *args)
{
	static struct fuse_lowlevel_ops ops;
	struct fuse_session *se;
	int ret = 1, r, detach;

	ops = fusefs_ops;
	ops.destroy = op_destroy_close;
	d->ff.conf.attr_timeout = 5.0;
	d->ff.conf.entry_timeout = 5.0;
	d->ff.conf.max_readahead = (unsigned)num(&d->c, N_READAHEAD_KB, 1024) * 1024u;
	d->ff.conf.killpriv = !d->c.no_killpriv;
	d->ff.conf.writeback_cache = !d->c.writeback_cache ||
				     strcmp(d->c.writeback_cache, "off") != 0;	/* checked */
	if (set_max_read(d, args))
		return 1;
	set_low_keep(d);

	pthread_mutex_init(&d->ff.wb.lock, NULL);
	pthread_mutex_init(&d->ff.space_lock, NULL);
	se = fuse_session_new(args, &ops, sizeof(ops), &d->ff);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_se;
	if (fuse_session_mount(se, d->opts.mountpoint) != 0)
		goto out_sig;
	d->ff.se = se;
	r = fusefs_install_io(se, &d->ff);
	if (r)
		zf_warn("custom FUSE I/O not installed (%s): writes will be slower", strerror(-r));
	if (geteuid() == 0)
		tune_bdi(d);
	detach = detach_begin(d->opts.foreground);
	if (detach < -1) {
		zf_err("cannot go to the background: %s", strerror(-detach));
		goto out_mount;
	}
	r = gc_attach(d->ff.fs);	/* the collector: fs_start() to fs_unmount() */
	if (!r)
		r = fs_start(d->ff.fs);
	if (r)
		zf_err("cannot start background work: %s", strerror(-r));
	zf_info("mounted %s (%s%s) on %s", d->c.device, zdev_backend_name(d->dev),
		d->blk ? ", fuseblk" : "", d->opts.mountpoint);
	if (!d->c.has_default_permissions)
		zf_info("default_permissions turned on: the kernel checks every access "
			"against modes and ACLs");
	detach_done(detach, 0);
	ret = serve(se, d) ? 1 : 0;
	d->served_ns = zf_now_ns();
out_mount:
	d->ff.se = NULL;
	fuse_session_unmount(se);
out_sig:
	fuse_remove_signal_handlers(se);
out_se:
	fuse_session_destroy(se);	/* runs DESTROY if the kernel did not send it */
	return ret;
}

static bool called_as(const char *argv0, const char *name)
{
	const char *b = strrchr(argv0, '/');
	return !strcmp(b ? b + 1 : argv0, name);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	static struct daemon d;
	int ret;

	if (called_as(argv[0], "umount.fuse.zonefuse"))
		return unmount_main(argc, argv, true);
	if (called_as(argv[0], "umount.fuse"))
		return umount_fuse_main(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "-u"))
		return unmount_main(argc, argv, false);

	/* Write buffers and read bounces are large and short-lived: keep them
	 * in the heap instead of mapping and faulting pages in on every call.
	 * One arena for every thread: a chunk freed by one thread is then
	 * reused by the next, whichever allocates it, where per-thread arenas
	 * would each keep their own high-water mark of freed chunks and the
	 * peak RSS grow with the number of threads serving WRITEs. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	mallopt(M_ARENA_MAX, 1);
	ret = parse_cmdline(&d, &args, argv[0]);
	if (ret >= 0)
		goto out;
	ret = 2;	/* a bad option value is a bad command line */
	if (build_fs_opts(&d))
		goto out;
	if (add_mount_opts(&d, &args) || check_fuse_opts(&args))
		goto out;
	ret = 1;
	if (setup_log(&d))
		goto out;
	if (open_fs(&d))
		goto out;
	ret = run_session(&d, &args);
	close_fs(&d);
	if (d.unmount_ret)
		ret = 1;
out:
	free(d.opts.mountpoint);
	free(d.c.device);
	for (int o = 0; o < N_NUM; o++)
		free(d.c.num_text[o]);
	free(d.c.stripe_unit);
	free(d.c.hints);
	free(d.c.placement);
	free(d.c.log);
	free(d.c.bdi_limit);
	free(d.c.fuse_loop);
	fuse_opt_free_args(&args);
	return ret;
}
