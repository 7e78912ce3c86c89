#!/bin/bash
# FUSE over io_uring (-o fuse_uring=N): with the kernel's offer the
# requests come over the rings (fuse_uring_requests grows), and files made
# and read that way -- many small ones, a large random one read cold, a
# rename, a truncate, xattrs -- have their content, also after a remount
# over /dev/fuse; without the offer (fuse.enable_uring=N) the same option
# serves over /dev/fuse and counts nothing; SIGTERM ends a session whose
# rings run.  The module parameter is put back as it was.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

P=/sys/module/fuse/parameters/enable_uring
zf_require_fuse
zf_require_prog cmp diffutils
zf_require_prog python3 python3
[ -e "$P" ] || zf_skip "this kernel has no FUSE over io_uring ($P)"
[ -w "$P" ] || zf_skip "cannot set $P (needs root)"
old=$(cat "$P")
zf_setup
trap 'rc=$?; echo "$old" >"$P"; (exit $rc); zf_teardown' EXIT
M=$ZF_MNT
SRC=$ZF_WORK/src

echo Y >"$P"
zf_mount -o fuse_uring=2
grep -q "requests come over io_uring" "$ZF_LOG" || zf_fail "the daemon did not take io_uring"
zf_small_files "$M/small" 2000
python3 - "$M/small" <<'PY' || zf_fail "small files over io_uring"
import os, sys
d = sys.argv[1]
for i in range(0, 2000, 2):
    os.unlink(f"{d}/f{i}")
os.rename(f"{d}/f1", f"{d}/one")
os.setxattr(f"{d}/one", "user.k", b"v" * 300)
assert os.getxattr(f"{d}/one", "user.k") == b"v" * 300
assert len(os.listdir(d)) == 1000
PY
head -c $((40 << 20)) /dev/urandom >"$SRC"
dd if="$SRC" of="$M/big" bs=256k conv=fsync status=none
python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$M/big"
cmp "$SRC" "$M/big" || zf_fail "a 40 MiB file read back cold differs"
truncate -s $((3 << 20)) "$M/big"
truncate -s $((3 << 20)) "$SRC"
cmp "$SRC" "$M/big" || zf_fail "content differs after a truncate"
n=$(zf_stat fuse_uring_requests)
[ "$n" -gt 10000 ] || zf_fail "only $n requests came over io_uring"
zf_log "$n requests over io_uring"
zf_umount
grep -q "warning:.*io_uring" "$ZF_LOG" && zf_fail "io_uring warnings: $(grep 'warning:.*io_uring' "$ZF_LOG")"

# the content, over /dev/fuse
zf_mount
cmp "$SRC" "$M/big" || zf_fail "content differs after a remount"
[ "$(cat "$M/small/one")" = "$(python3 -c 'print("1" * 50, end="")')" ] ||
	zf_fail "small/one differs after a remount"
[ "$(zf_stat fuse_uring_requests)" = 0 ] || zf_fail "requests counted over io_uring without the option"
zf_umount

# a signal ends a session whose rings are running: the daemon unmounts,
# stops its threads and exits 0
zf_mount -o fuse_uring=2
echo data >"$M/sig"
kill -TERM "$ZF_PID"
zf_wait_daemon 20 || zf_fail "the daemon did not exit within 20 s of SIGTERM"
[ "$ZF_DAEMON_STATUS" = 0 ] || zf_fail "the daemon exited $ZF_DAEMON_STATUS after SIGTERM"
zf_is_mounted && zf_fail "still mounted after SIGTERM"
zf_mount
[ "$(cat "$M/sig")" = data ] || zf_fail "a file written before SIGTERM differs"
zf_umount

# without the kernel's offer the option serves over /dev/fuse
echo N >"$P"
zf_mount -o fuse_uring=2
grep -q "io_uring transport not used" "$ZF_LOG" || zf_fail "no word that io_uring is not used"
cmp "$SRC" "$M/big" || zf_fail "content differs over /dev/fuse"
[ "$(zf_stat fuse_uring_requests)" = 0 ] || zf_fail "requests counted over io_uring without the offer"
zf_pass
