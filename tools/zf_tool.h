/* zf_tool.h — shared by the command-line programs (zonefuse, mkfs.zonefuse,
 * fsck.zonefuse): who holds a device, where a zonefuse file system is
 * mounted, and capturing the library's log messages so that a program prints
 * one message of its own that says what is wrong and what to do.
 *
 * Header-only (static inline): each program includes it once, and no build
 * rule has to change.  Everything reads /proc; nothing needs privileges
 * beyond seeing the other process (root sees all).
 */
#ifndef ZONEFUSE_TOOL_H
#define ZONEFUSE_TOOL_H

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/zf_common.h"

/* ---- library messages: kept, not printed -------------------------------- */

/* The first error the library logged while the capture was on.  Errors are
 * kept from the log target (the program reports them in its own words);
 * every other message goes on to it. */
struct zf_capture {
	char first_err[1024];
};

static inline int zf_capture_hook(enum zf_log_level lvl, const char *msg, void *arg)
{
	struct zf_capture *c = arg;
	if (lvl != ZF_LOG_ERROR)
		return 0;
	if (!c->first_err[0])
		snprintf(c->first_err, sizeof(c->first_err), "%s", msg);
	return 1;
}

static inline void zf_capture_start(struct zf_capture *c)
{
	c->first_err[0] = 0;
	zf_log_set_hook(zf_capture_hook, c);
}

static inline void zf_capture_stop(void)
{
	zf_log_set_hook(NULL, NULL);
}

/* The captured library message without its "zdev: PATH: " prefix, or "". */
static inline const char *zf_capture_detail(const struct zf_capture *c)
{
	const char *m = c->first_err;
	if (strncmp(m, "zdev: ", 6) == 0) {
		const char *colon = strstr(m + 6, ": ");
		m = colon ? colon + 2 : m + 6;
	}
	return m;
}

/* ---- mounts ---------------------------------------------------------------- */

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static inline void zf_unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && isdigit((unsigned char)s[2]) &&
		    isdigit((unsigned char)s[3])) {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* One line of /proc/self/mountinfo split into the fields used here. */
struct zf_mnt {
	char dir[PATH_MAX], type[64], source[PATH_MAX];
	unsigned int dev_major, dev_minor;	/* the superblock's st_dev */
};

/* Calls fn for every mount listed in the mountinfo file path; stops and
 * returns 1 when fn returns true, 0 at the end, -errno if it cannot be
 * read. */
static inline int zf_mounts_in(const char *path, bool (*fn)(const struct zf_mnt *m, void *arg),
			       void *arg)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -errno;
	while (!found && getline(&line, &cap, f) > 0) {
		struct zf_mnt m;
		char dir[PATH_MAX], type[64], source[PATH_MAX];
		const char *sep = strstr(line, " - ");
		unsigned int maj, mnr;
		if (!sep || sscanf(line, "%*s %*s %u:%u %*s %4095s", &maj, &mnr, dir) != 3 ||
		    sscanf(sep + 3, "%63s %4095s", type, source) != 2)
			continue;
		zf_unescape(dir);
		zf_unescape(source);
		snprintf(m.dir, sizeof(m.dir), "%s", dir);
		snprintf(m.type, sizeof(m.type), "%s", type);
		snprintf(m.source, sizeof(m.source), "%s", source);
		m.dev_major = maj;
		m.dev_minor = mnr;
		found = fn(&m, arg) ? 1 : 0;
	}
	free(line);
	fclose(f);
	return found;
}

/* zf_mounts_in() of this process's mount namespace. */
static inline int zf_mounts(bool (*fn)(const struct zf_mnt *m, void *arg), void *arg)
{
	return zf_mounts_in("/proc/self/mountinfo", fn, arg);
}

struct zf_mnt_query {
	const char *key;	/* device realpath or mount point realpath */
	struct zf_mnt out;
};

static inline bool zf_is_fuse_type(const char *type)
{
	return !strcmp(type, "fuse.zonefuse") || !strcmp(type, "fuseblk") ||
	       !strcmp(type, "fuse");
}

/* Is the file at a the file (or block device) at b?  A hard link or
 * another name of the same device is. */
static inline bool zf_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	if (!strcmp(a, b))
		return true;
	if (a[0] != '/' || b[0] != '/' || stat(a, &sa) != 0 || stat(b, &sb) != 0)
		return false;
	if (S_ISBLK(sa.st_mode))
		return S_ISBLK(sb.st_mode) && sa.st_rdev == sb.st_rdev;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static inline bool zf_match_source(const struct zf_mnt *m, void *arg)
{
	struct zf_mnt_query *q = arg;
	if (!zf_is_fuse_type(m->type) || !zf_same_file(m->source, q->key))
		return false;
	q->out = *m;
	return true;
}

static inline bool zf_match_dir(const struct zf_mnt *m, void *arg)
{
	struct zf_mnt_query *q = arg;
	if (strcmp(m->dir, q->key) != 0)
		return false;
	q->out = *m;	/* the last mount on a directory is the visible one */
	return false;
}

/* Where the zonefuse file system on device path is mounted (the daemon
 * names its mount after the device's real path; a hard link to it or
 * another name of the device counts as the same device); 0 and dir
 * filled, or -ENOENT. */
static inline int zf_find_mount_of(const char *path, char *dir, size_t len)
{
	char real[PATH_MAX];
	struct zf_mnt_query q = { .key = real };
	if (!realpath(path, real))
		return -errno;
	int r = zf_mounts(zf_match_source, &q);
	if (r <= 0)
		return r < 0 ? r : -ENOENT;
	snprintf(dir, len, "%s", q.out.dir);
	return 0;
}

/* The mount on directory real, given as a real path, without touching it
 * (a FUSE mount that is not served yet would hang a stat); 0 and *m filled,
 * -ENOENT if it is not a mount point. */
static inline int zf_find_mount_at_real(const char *real, struct zf_mnt *m)
{
	struct zf_mnt_query q = { .key = real };
	q.out.dir[0] = 0;
	int r = zf_mounts(zf_match_dir, &q);
	if (r < 0)
		return r;
	if (!q.out.dir[0])
		return -ENOENT;
	*m = q.out;
	return 0;
}

/* The mount on directory dir (its real path); 0 and *m filled, -ENOENT if
 * dir is not a mount point. */
static inline int zf_find_mount_at(const char *dir, struct zf_mnt *m)
{
	char real[PATH_MAX];
	if (!realpath(dir, real))
		return -errno;
	return zf_find_mount_at_real(real, m);
}

/* ---- processes -------------------------------------------------------------- */

/* Does some descriptor of process pid refer to the file described by want
 * (same inode, or the same block device)? */
static inline bool zf_pid_holds(pid_t pid, const struct stat *want)
{
	char dpath[64];
	snprintf(dpath, sizeof(dpath), "/proc/%ld/fd", (long)pid);
	DIR *d = opendir(dpath);
	struct dirent *e;
	bool hit = false;

	if (!d)
		return false;
	while (!hit && (e = readdir(d))) {
		char fpath[64 + 256];
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		snprintf(fpath, sizeof(fpath), "%s/%s", dpath, e->d_name);
		if (stat(fpath, &st) != 0)
			continue;
		if (S_ISBLK(want->st_mode))
			hit = S_ISBLK(st.st_mode) && st.st_rdev == want->st_rdev;
		else
			hit = st.st_dev == want->st_dev && st.st_ino == want->st_ino;
	}
	closedir(d);
	return hit;
}

/* Reads the command name (comm) of pid into comm; "?" if it is gone. */
static inline void zf_pid_comm(pid_t pid, char *comm, size_t clen)
{
	char cpath[64];
	snprintf(comm, clen, "?");
	snprintf(cpath, sizeof(cpath), "/proc/%ld/comm", (long)pid);
	FILE *f = fopen(cpath, "re");
	if (!f)
		return;
	if (fgets(comm, (int)clen, f))
		comm[strcspn(comm, "\n")] = 0;
	fclose(f);
}

/* The first other process that has path open and whose command name is
 * only (any, when only is NULL): its pid and command name; 0, or -ENOENT if
 * none is visible. */
static inline int zf_find_holder(const char *path, const char *only, pid_t *pid,
				 char *comm, size_t clen)
{
	struct stat want;
	DIR *d;
	struct dirent *e;
	int ret = -ENOENT;

	if (stat(path, &want) != 0)
		return -errno;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while (ret && (e = readdir(d))) {
		char *end;
		long p = strtol(e->d_name, &end, 10);
		if (*end || p <= 0 || p == (long)getpid())
			continue;
		zf_pid_comm((pid_t)p, comm, clen);
		if ((only && strcmp(comm, only) != 0) || !zf_pid_holds((pid_t)p, &want))
			continue;
		*pid = (pid_t)p;
		ret = 0;
	}
	closedir(d);
	return ret;
}

/* ---- other mount namespaces ------------------------------------------------- */

/* A mount that fn matched in a mount namespace other than this process's:
 * a process of that namespace and the mount as it sees it.  A copy of a
 * FUSE mount there (a service's private namespace made while it was
 * mounted) keeps the connection, and so the daemon, alive after it is
 * unmounted here. */
struct zf_ns_mount {
	pid_t pid;
	char comm[64];
	struct zf_mnt m;
};

struct zf_ns_scan {
	bool (*fn)(const struct zf_mnt *m, void *arg);
	void *arg;
	struct zf_mnt hit;
};

static inline bool zf_ns_scan_one(const struct zf_mnt *m, void *arg)
{
	struct zf_ns_scan *s = arg;
	if (!s->fn(m, s->arg))
		return false;
	s->hit = *m;
	return true;
}

/* Reads each other mount namespace's mountinfo once (through the first
 * process seen in it); 0 and *out filled at the first mount fn matches,
 * -ENOENT if none, -errno if /proc cannot be read. */
static inline int zf_find_mount_elsewhere(bool (*fn)(const struct zf_mnt *m, void *arg),
					  void *arg, struct zf_ns_mount *out)
{
	struct stat self;
	ino_t *seen = NULL;
	size_t nseen = 0, cap = 0;
	struct dirent *e;
	int ret = -ENOENT;
	DIR *d;

	if (stat("/proc/self/ns/mnt", &self) != 0)
		return -errno;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while (ret == -ENOENT && (e = readdir(d))) {
		char path[64], *end;
		struct stat ns;
		long p = strtol(e->d_name, &end, 10);
		bool known = false;
		if (*end || p <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/ns/mnt", p);
		if (stat(path, &ns) != 0 || ns.st_ino == self.st_ino)
			continue;
		for (size_t i = 0; i < nseen && !known; i++)
			known = seen[i] == ns.st_ino;
		if (known)
			continue;
		if (nseen == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			ino_t *n = realloc(seen, ncap * sizeof(*n));
			if (!n)
				break;
			seen = n;
			cap = ncap;
		}
		seen[nseen++] = ns.st_ino;
		struct zf_ns_scan s = { .fn = fn, .arg = arg };
		snprintf(path, sizeof(path), "/proc/%ld/mountinfo", p);
		if (zf_mounts_in(path, zf_ns_scan_one, &s) == 1) {
			out->pid = (pid_t)p;
			zf_pid_comm((pid_t)p, out->comm, sizeof(out->comm));
			out->m = s.hit;
			ret = 0;
		}
	}
	closedir(d);
	free(seen);
	return ret;
}

/* Where device path is mounted in another mount namespace; 0 and *out
 * filled, or -ENOENT. */
static inline int zf_find_mount_of_elsewhere(const char *path, struct zf_ns_mount *out)
{
	char real[PATH_MAX];
	struct zf_mnt_query q = { .key = real };
	if (!realpath(path, real))
		return -errno;
	return zf_find_mount_elsewhere(zf_match_source, &q, out);
}

/* "in use by zonefuse pid N mounted on DIR", "in use by zonefuse pid N
 * mounted on DIR in the mount namespace of pid P (COMM)", "in use by PROG
 * pid N", or "in use by another program" when no holder is visible (a
 * kernel mount, another PID namespace). */
static inline void zf_busy_text(const char *path, char *buf, size_t len)
{
	pid_t pid;
	char comm[64], dir[PATH_MAX];
	struct zf_ns_mount ns;

	if (zf_find_holder(path, "zonefuse", &pid, comm, sizeof(comm)) != 0 &&
	    zf_find_holder(path, NULL, &pid, comm, sizeof(comm)) != 0) {
		snprintf(buf, len, "in use by another program (or mounted by the kernel)");
		return;
	}
	if (strcmp(comm, "zonefuse") != 0)
		snprintf(buf, len, "in use by %s pid %ld", comm, (long)pid);
	else if (zf_find_mount_of(path, dir, sizeof(dir)) == 0)
		snprintf(buf, len, "in use by zonefuse pid %ld mounted on %s", (long)pid, dir);
	else if (zf_find_mount_of_elsewhere(path, &ns) != 0)
		snprintf(buf, len, "in use by zonefuse pid %ld", (long)pid);
	else if (snprintf(buf, len, "in use by zonefuse pid %ld mounted on %s in the mount "
			  "namespace of pid %ld (%s)", (long)pid, ns.m.dir, (long)ns.pid,
			  ns.comm) < 0)
		buf[0] = 0;
}

/* How long mount, mkfs and fsck wait for a daemon that is no longer
 * mounted to finish writing and exit: longer than any write-out of a full
 * write buffer seen on a busy machine. */
#define ZF_WAIT_UNMOUNTING_MS 180000u

/* After umount(8) the kernel drops a FUSE mount at once, but the daemon
 * still writes its last commit and holds the device until it exits.  When
 * the holder of path is a zonefuse daemon with no mount of path left (here
 * or in another mount namespace), waits up to timeout_ms for it to exit,
 * saying on stderr after a second what it waits for: 0 once it is gone
 * (also when no zonefuse holds path any more: the open that failed may have
 * raced with its exit, so the caller tries once more), -EBUSY at once if it
 * is still mounted, or when it outlives the wait. */
static inline int zf_wait_unmounting(const char *prog, const char *path, unsigned timeout_ms)
{
	pid_t pid;
	char comm[64], dir[PATH_MAX];
	struct zf_ns_mount ns;
	bool said = false;

	if (zf_find_mount_of(path, dir, sizeof(dir)) == 0 ||
	    zf_find_mount_of_elsewhere(path, &ns) == 0)
		return -EBUSY;
	if (zf_find_holder(path, "zonefuse", &pid, comm, sizeof(comm)) != 0)
		return 0;
	for (unsigned ms = 0; ms < timeout_ms; ms += 20) {
		struct stat want;
		if (stat(path, &want) != 0 || !zf_pid_holds(pid, &want))
			return 0;
		if (ms >= 1000 && !said) {
			fprintf(stderr, "%s: %s: waiting (up to %u s) for zonefuse pid %ld, which is "
				"no longer mounted, to finish writing it and exit\n", prog, path,
				timeout_ms / 1000, (long)pid);
			said = true;
		}
		usleep(20 * 1000);
	}
	return -EBUSY;
}

#endif
