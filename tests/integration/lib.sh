# shellcheck shell=bash
# Shared helpers for the zonefuse integration tests.  Source it from a bash
# script that runs under `set -euo pipefail`:
#
#   . "$(dirname "$0")/lib.sh"
#   zf_require_fuse                 # exit 77 (skip) without root, /dev/fuse, ...
#   zf_setup                        # work dir, emulated device, mkfs, EXIT trap
#   zf_mount                        # daemon in the background, wait for the mount
#   ... work in "$ZF_MNT" ...
#   zf_umount                       # unmount, the daemon must exit 0
#   zf_pass "what was shown"        # teardown, then PASS and exit 0
#
# After zf_setup: ZF_WORK (temp dir), ZF_DEV (device file), ZF_MNT (mount
# point), ZF_LOG (daemon stdout+stderr, all mounts appended).  While mounted:
# ZF_PID (daemon pid).  Binaries come from $ZF_BUILD_DIR (default: build/ in
# the source tree): ZF_DAEMON ZF_EMU ZF_MKFS ZF_FSCK ZF_LEVELDB ZF_STAT.
#
# The teardown always runs (EXIT trap, also on SIGINT/SIGTERM): it unmounts,
# kills a leftover daemon, fails the test if the daemon exited non-zero or
# logged "error:" (case-insensitive; lines matching the extended regex
# $ZF_LOG_ALLOW are exempt), prints the log tail on failure and removes the
# work dir (kept when ZF_KEEP=1 and the test failed).
#
# Environment: ZF_BUILD_DIR, ZF_SRC_DIR, ZF_TMPDIR (where the work dir goes,
# default $TMPDIR or /tmp), ZF_MOUNT_TIMEOUT (s, default 15),
# ZF_UMOUNT_TIMEOUT (s, default 60), ZF_LOG_ALLOW, ZF_KEEP, ZF_MOUNT_EXTRA
# (daemon arguments added to every mount, e.g. "-o fuse_uring=2" to run a
# suite over another transport).

ZF_SRC_DIR=${ZF_SRC_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
ZF_BUILD_DIR=${ZF_BUILD_DIR:-$ZF_SRC_DIR/build}
# Paths of the built binaries, for the tests that source this file.
# shellcheck disable=SC2034
{
ZF_DAEMON=$ZF_BUILD_DIR/zonefuse
ZF_EMU=$ZF_BUILD_DIR/zonefuse-emu
ZF_MKFS=$ZF_BUILD_DIR/mkfs.zonefuse
ZF_FSCK=$ZF_BUILD_DIR/fsck.zonefuse
ZF_LEVELDB=$ZF_BUILD_DIR/zf-leveldb
ZF_STAT=$ZF_BUILD_DIR/zonefuse-stat
}
ZF_TEST=${ZF_TEST:-$(basename "$0" .sh)}
ZF_MOUNT_TIMEOUT=${ZF_MOUNT_TIMEOUT:-15}
ZF_UMOUNT_TIMEOUT=${ZF_UMOUNT_TIMEOUT:-60}
ZF_WORK=
ZF_DEV=
ZF_MNT=
ZF_LOG=
ZF_PID=
ZF_PASS_MSG=
ZF_DAEMON_STATUS=
ZF_TAIL_SHOWN=
ZF_T0=$(date +%s)

# ---- messages ----------------------------------------------------------

zf_log() { echo "[$ZF_TEST +$(($(date +%s) - ZF_T0))s] $*"; }

# zf_fail MSG...: fail the test now (the EXIT trap tears down).
zf_fail() {
	echo "FAIL: $ZF_TEST: $*" >&2
	exit 1
}

# zf_pass [MSG...]: tear down (which may still fail the test: daemon errors),
# then print PASS and exit 0.
zf_pass() {
	ZF_PASS_MSG=${*:-ok}
	exit 0
}

zf_skip() {
	echo "SKIP: $ZF_TEST: $*"
	exit 77
}

# Prints the last N (default 40) lines of the daemon log, indented.
zf_log_tail() {
	[ -n "$ZF_LOG" ] && [ -s "$ZF_LOG" ] || return 0
	ZF_TAIL_SHOWN=1
	echo "--- last ${1:-40} lines of the daemon log ($ZF_LOG):" >&2
	tail -n "${1:-40}" "$ZF_LOG" | sed 's/^/  | /' >&2
}

# ---- requirements ------------------------------------------------------

# Skips (exit 77) unless this can mount zonefuse: root, /dev/fuse,
# fusermount3, mountpoint and the built binaries.
zf_require_fuse() {
	[ "$(id -u)" -eq 0 ] || zf_skip "needs root (FUSE mounts of a device file)"
	[ -c /dev/fuse ] || zf_skip "/dev/fuse is missing (modprobe fuse, or run the container with --device /dev/fuse)"
	command -v fusermount3 >/dev/null || zf_skip "fusermount3 is missing (apt-get install fuse3)"
	command -v mountpoint >/dev/null || zf_skip "mountpoint is missing (util-linux)"
	local b
	for b in "$ZF_DAEMON" "$ZF_EMU" "$ZF_MKFS"; do
		[ -x "$b" ] || zf_skip "$b is not built (ZF_BUILD_DIR=$ZF_BUILD_DIR)"
	done
}

# zf_require_prog PROG [package]: skip unless PROG is on the PATH.
zf_require_prog() {
	command -v "$1" >/dev/null || zf_skip "$1 is missing${2:+ (apt-get install $2)}"
}

# zf_require_bin PATH: skip unless a built binary exists.
zf_require_bin() {
	[ -x "$1" ] || zf_skip "$1 is not built"
}

# ---- setup / teardown --------------------------------------------------

# zf_setup [zonefuse-emu create args...]: work dir, emulated zoned device
# (--zone-size 16M and --zones 64 unless given), mkfs, mount point, EXIT trap.
zf_setup() {
	local base=${ZF_TMPDIR:-${TMPDIR:-/tmp}}
	ZF_WORK=$(mktemp -d "$base/zf-$ZF_TEST.XXXXXX")
	trap zf_teardown EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	ZF_DEV=$ZF_WORK/dev.img
	ZF_MNT=$ZF_WORK/mnt
	ZF_LOG=$ZF_WORK/zonefuse.log
	mkdir "$ZF_MNT"
	: >"$ZF_LOG"
	local args=("$@")
	[[ " $* " == *" --zone-size "* ]] || args+=(--zone-size 16M)
	[[ " $* " == *" --zones "* ]] || args+=(--zones 64)
	zf_log "device: zonefuse-emu create dev.img ${args[*]} (work dir $ZF_WORK)"
	"$ZF_EMU" create "$ZF_DEV" "${args[@]}" >"$ZF_WORK/emu.log" 2>&1 ||
		zf_fail "zonefuse-emu create failed: $(tail -n 5 "$ZF_WORK/emu.log")"
	"$ZF_MKFS" "$ZF_DEV" >"$ZF_WORK/mkfs.log" 2>&1 ||
		zf_fail "mkfs.zonefuse failed: $(tail -n 5 "$ZF_WORK/mkfs.log")"
}

# True if $ZF_MNT is a mount point.  Reads /proc/self/mountinfo rather than
# stat()ing the directory so a hung or dead daemon cannot block it.
zf_is_mounted() {
	[ -n "$ZF_MNT" ] || return 1
	local mnt
	mnt=$(realpath -m "$ZF_MNT")
	awk -v m="$mnt" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

zf_daemon_alive() {
	[ -n "$ZF_PID" ] && kill -0 "$ZF_PID" 2>/dev/null
}

# zf_mount [daemon args...]  e.g. zf_mount -o foo=1: starts
# `zonefuse $ZF_DEV $ZF_MNT -f ARGS` in the background, logging to $ZF_LOG,
# and waits up to $ZF_MOUNT_TIMEOUT s for the mount.
zf_mount() {
	[ -n "$ZF_WORK" ] || zf_fail "zf_mount before zf_setup"
	zf_is_mounted && zf_fail "zf_mount: $ZF_MNT is already mounted"
	# shellcheck disable=SC2086 # ZF_MOUNT_EXTRA is words
	set -- "$@" ${ZF_MOUNT_EXTRA:-}
	echo "=== $(date '+%F %T') zonefuse $ZF_DEV $ZF_MNT -f $*" >>"$ZF_LOG"
	"$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -f "$@" >>"$ZF_LOG" 2>&1 &
	ZF_PID=$!
	local i st
	for ((i = 0; i < ZF_MOUNT_TIMEOUT * 10; i++)); do
		if zf_is_mounted && timeout -s KILL 10 mountpoint -q "$ZF_MNT"; then
			zf_log "mounted (daemon pid $ZF_PID)"
			return 0
		fi
		if ! zf_daemon_alive; then
			st=0
			wait "$ZF_PID" || st=$?
			ZF_PID=
			zf_log_tail 40
			zf_fail "zonefuse exited with status $st before mounting"
		fi
		sleep 0.1
	done
	zf_log_tail 40
	zf_fail "zonefuse did not mount $ZF_MNT within ${ZF_MOUNT_TIMEOUT} s"
}

# Waits up to $1 s for the daemon to exit; sets ZF_DAEMON_STATUS.  Returns 1
# (daemon still running) on timeout.
zf_wait_daemon() {
	local i
	ZF_DAEMON_STATUS=
	for ((i = 0; i < $1 * 10; i++)); do
		zf_daemon_alive || break
		sleep 0.1
	done
	zf_daemon_alive && return 1
	ZF_DAEMON_STATUS=0
	wait "$ZF_PID" 2>/dev/null || ZF_DAEMON_STATUS=$?
	ZF_PID=
	return 0
}

# zf_umount: fusermount3 -u (retried while busy), then the daemon must exit
# with status 0 within $ZF_UMOUNT_TIMEOUT s.
zf_umount() {
	zf_is_mounted || zf_fail "zf_umount: $ZF_MNT is not mounted"
	local i
	for ((i = 0; ; i++)); do
		fusermount3 -u "$ZF_MNT" 2>>"$ZF_WORK/umount.err" && break
		if ((i >= 20)); then
			tail -n 1 "$ZF_WORK/umount.err" >&2
			echo "processes using $ZF_MNT:" >&2
			fuser -vm "$ZF_MNT" 2>&1 | grep -v '^Cannot stat' >&2 || true
			zf_fail "fusermount3 -u $ZF_MNT keeps failing"
		fi
		sleep 0.5
	done
	if [ -n "$ZF_PID" ]; then
		zf_wait_daemon "$ZF_UMOUNT_TIMEOUT" || {
			zf_log_tail 40
			zf_fail "zonefuse (pid $ZF_PID) still running ${ZF_UMOUNT_TIMEOUT} s after unmount"
		}
		if [ "$ZF_DAEMON_STATUS" -ne 0 ]; then
			zf_log_tail 40
			zf_fail "zonefuse exited with status $ZF_DAEMON_STATUS after unmount"
		fi
	fi
	zf_log "unmounted, daemon exited 0"
}

# zf_remount [daemon args...]
zf_remount() {
	zf_umount
	zf_mount "$@"
}

# zf_kill9: kill -9 the daemon (a crash), then clear the dead mount.
zf_kill9() {
	[ -n "$ZF_PID" ] || zf_fail "zf_kill9: no daemon running"
	kill -9 "$ZF_PID" 2>/dev/null || true
	wait "$ZF_PID" 2>/dev/null || true
	zf_log "killed daemon $ZF_PID with SIGKILL"
	echo "=== $(date '+%F %T') daemon killed with SIGKILL by the test" >>"$ZF_LOG"
	ZF_PID=
	if zf_is_mounted; then
		fusermount3 -u -z "$ZF_MNT" 2>/dev/null || umount -l "$ZF_MNT" ||
			zf_fail "cannot clear the dead mount $ZF_MNT"
	fi
	zf_is_mounted && zf_fail "$ZF_MNT still mounted after kill -9"
	return 0
}

# zf_check_log: fail if the daemon logged an error.
zf_check_log() {
	local errs
	errs=$(zf_log_errors) || true
	[ -z "$errs" ] || zf_fail "daemon logged errors:
$errs"
}

# Prints the daemon log's error lines not exempted by $ZF_LOG_ALLOW.
zf_log_errors() {
	[ -n "$ZF_LOG" ] && [ -f "$ZF_LOG" ] || return 0
	local errs
	errs=$(grep -ni 'error:' "$ZF_LOG" || true)
	if [ -n "$errs" ] && [ -n "${ZF_LOG_ALLOW:-}" ]; then
		errs=$(grep -vE "$ZF_LOG_ALLOW" <<<"$errs" || true)
	fi
	[ -z "$errs" ] || head -n 20 <<<"$errs"
}

# zf_fsck: fsck the (unmounted) device; fails unless it is clean (exit 0).
zf_fsck() {
	[ -x "$ZF_FSCK" ] || { zf_log "fsck.zonefuse not built, fsck skipped"; return 0; }
	local st=0
	"$ZF_FSCK" "$ZF_DEV" >"$ZF_WORK/fsck.log" 2>&1 || st=$?
	[ "$st" -eq 0 ] || zf_fail "fsck.zonefuse exited $st: $(tail -n 20 "$ZF_WORK/fsck.log")"
	zf_log "fsck clean"
}

# zf_stats: prints the stats xattr (key=value lines); returns 1 if absent.
zf_stats() {
	getfattr --only-values -n user.zonefuse.stats "$ZF_MNT" 2>/dev/null
}

# zf_stat KEY: prints one value of the stats xattr (empty if absent).
zf_stat() {
	zf_stats | sed -n "s/^$1=//p" | head -n 1 || true
}

# zf_small_files DIR N: makes DIR and N files in it, f0..f(N-1), file i
# holding the digits of i repeated 50 times, then stats and reads each back;
# fails the test if one differs.  Each file costs a handful of synchronous
# requests (LOOKUP, CREATE, WRITE, RELEASE, GETATTR, OPEN, READ...).
zf_small_files() {
	python3 - "$1" "$2" <<'PY' || zf_fail "small files in $1"
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.mkdir(d)
for i in range(n):
    with open(f"{d}/f{i}", "wb") as f:
        f.write(b"%d" % i * 50)
for i in range(n):
    assert os.stat(f"{d}/f{i}").st_size == len(b"%d" % i * 50), i
    with open(f"{d}/f{i}", "rb") as f:
        assert f.read() == b"%d" % i * 50, i
PY
}

# zf_time CMD...: runs CMD, then logs how long it took.
zf_time() {
	local t0 t1
	t0=$(date +%s.%N)
	"$@"
	t1=$(date +%s.%N)
	zf_log "$(basename "$1") took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
}

zf_teardown() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	cd / || true
	if zf_is_mounted; then
		local i
		for ((i = 0; i < 10; i++)); do
			fusermount3 -u "$ZF_MNT" 2>/dev/null && break
			sleep 0.5
		done
		if zf_is_mounted; then
			echo "teardown: $ZF_MNT busy, lazy unmount" >&2
			fusermount3 -u -z "$ZF_MNT" 2>/dev/null || umount -l "$ZF_MNT"
		fi
	fi
	if [ -n "$ZF_PID" ]; then
		if ! zf_wait_daemon 20; then
			echo "teardown: zonefuse (pid $ZF_PID) did not exit, killing it" >&2
			kill -9 "$ZF_PID" 2>/dev/null
			wait "$ZF_PID" 2>/dev/null
			ZF_PID=
			[ "$rc" -ne 0 ] || rc=1
		elif [ "$ZF_DAEMON_STATUS" -ne 0 ]; then
			echo "teardown: zonefuse exited with status $ZF_DAEMON_STATUS" >&2
			[ "$rc" -ne 0 ] || rc=1
		fi
	fi
	local errs
	errs=$(zf_log_errors)
	if [ -n "$errs" ]; then
		echo "FAIL: $ZF_TEST: the daemon logged errors:" >&2
		echo "$errs" >&2
		[ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] || rc=1
	fi
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -z "$ZF_TAIL_SHOWN" ]; then
		zf_log_tail 40
	fi
	if [ -n "$ZF_WORK" ] && [ -d "$ZF_WORK" ]; then
		if [ "$rc" -ne 0 ] && [ "${ZF_KEEP:-0}" = 1 ]; then
			echo "teardown: keeping $ZF_WORK (ZF_KEEP=1)" >&2
		else
			rm -rf "$ZF_WORK"
		fi
	fi
	if [ "$rc" -eq 0 ] && [ -n "$ZF_PASS_MSG" ]; then
		echo "PASS: $ZF_TEST: $ZF_PASS_MSG ($(($(date +%s) - ZF_T0)) s)"
	elif [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		echo "FAIL: $ZF_TEST (exit $rc)" >&2
	fi
	exit "$rc"
}
