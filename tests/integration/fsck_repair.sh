#!/bin/bash
# fsck.zonefuse's interface and repairs, and the daemon's read-only mount
# of a damaged log:
#   1. exit codes (fsck(8)): clean 0; -n and -y together 16; a missing
#      device 8; every meta zone header zeroed: -n 4 (and the device is not
#      written), -p 4 (UNEXPECTED INCONSISTENCY, nothing written), -y 1,
#      then -n 0;
#   2. with FUSE (root, /dev/fuse; else only part 1 runs): files written,
#      unmounted, every zone header zeroed: the daemon mounts READ-ONLY
#      (one line in its log), the files read back, a create fails with
#      EROFS; fsck -y, then a read-write mount with the files intact.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_bin "$ZF_FSCK"
zf_require_bin "$ZF_EMU"
zf_require_bin "$ZF_MKFS"
ZF_LOG_ALLOW='metadata log is damaged|holds no zonefuse file system'
zf_setup --zone-size 16M --zones 64

fsck_rc() {	# fsck_rc EXPECTED ARGS...: run fsck, check its exit code
	local want=$1 rc=0
	shift
	"$ZF_FSCK" "$@" >"$ZF_WORK/fsck.out" 2>&1 || rc=$?
	[ "$rc" -eq "$want" ] ||
		zf_fail "fsck.zonefuse $*: exit $rc, expected $want: $(cat "$ZF_WORK/fsck.out")"
}
# the header block of every meta zone (zone k at 1 MiB + k x 16 MiB in the file)
zero_headers() {
	local k
	for k in 0 1 2 3; do
		dd if=/dev/zero of="$ZF_DEV" bs=4096 count=1 seek=$((256 + k * 4096)) \
			conv=notrunc status=none
	done
}

fsck_rc 0 -n "$ZF_DEV"
fsck_rc 0 -f -v "$ZF_DEV"
fsck_rc 16 -n -y "$ZF_DEV"
fsck_rc 8 -n "$ZF_WORK/missing.img"
zero_headers
sum0=$(md5sum <"$ZF_DEV")
fsck_rc 4 -n "$ZF_DEV"
grep -q 'log-damaged' "$ZF_WORK/fsck.out" || zf_fail "fsck -n did not name the damage"
fsck_rc 4 -p "$ZF_DEV"
grep -q 'UNEXPECTED INCONSISTENCY' "$ZF_WORK/fsck.out" || zf_fail "fsck -p: $(cat "$ZF_WORK/fsck.out")"
[ "$(md5sum <"$ZF_DEV")" = "$sum0" ] || zf_fail "fsck -n / -p wrote to the device"
fsck_rc 1 -y "$ZF_DEV"
fsck_rc 0 -n "$ZF_DEV"
zf_log "exit codes: clean 0, usage 16, missing 8, damaged -n 4, -p 4 (nothing written), -y 1, then 0"

if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
	zf_pass "fsck exit codes and the header repair (no FUSE: the mounted part skipped)"
fi
zf_mount
for i in 1 2 3; do
	head -c $((i * 50000)) /dev/urandom >"$ZF_MNT/f$i"
done
mkdir "$ZF_MNT/dir" && echo hello >"$ZF_MNT/dir/h"
sums=$(cd "$ZF_MNT" && md5sum f1 f2 f3 dir/h)
zf_umount
zero_headers
zf_mount
grep -q 'mounted READ-ONLY' "$ZF_LOG" || zf_fail "no read-only line in the daemon log"
(cd "$ZF_MNT" && echo "$sums" | md5sum -c --quiet) || zf_fail "files differ on the read-only mount"
if touch "$ZF_MNT/new" 2>"$ZF_WORK/touch.err"; then
	zf_fail "a create succeeded on the read-only fallback mount"
fi
grep -q 'Read-only file system' "$ZF_WORK/touch.err" || zf_fail "create: $(cat "$ZF_WORK/touch.err")"
zf_umount
fsck_rc 1 -y "$ZF_DEV"
fsck_rc 0 -n "$ZF_DEV"
zf_mount
(cd "$ZF_MNT" && echo "$sums" | md5sum -c --quiet) || zf_fail "files differ after fsck -y"
touch "$ZF_MNT/new" || zf_fail "not writable after fsck -y"
zf_umount
fsck_rc 0 -n "$ZF_DEV"
zf_pass "exit codes; headers zeroed: read-only mount with the files, EROFS on create, fsck -y, read-write with the files"
