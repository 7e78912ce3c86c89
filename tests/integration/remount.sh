#!/bin/bash
# mount -o remount (issue 45, item 7).  mount(8) hands a remount of a
# fuse.zonefuse mount to mount.fuse3, which starts a second daemon for the
# same device; the running daemon cannot change its options, so zonefuse
# refuses the remount with one line and exit 32 (mount failure), at once,
# and the mount goes on as it was:
#   1. `zonefuse DEV DIR -o remount,ro` (what mount.fuse3 runs): exit 32,
#      one line naming remount, in well under the 30 s the daemon used to
#      wait for the device;
#   2. `mount -o remount,ro DIR` through mount(8) and mount.fuse3 (in a
#      private mount namespace where /usr/sbin holds the build): the same
#      line and exit 32;
#   3. afterwards the mount is still read-write, the same daemon serves it
#      and the data written before is intact; it unmounts cleanly.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_ns.sh"
zf_require_fuse
[ -x /usr/sbin/mount.fuse3 ] || [ -x /sbin/mount.fuse3 ] || zf_skip "mount.fuse3 is missing (fuse3)"
zf_setup --zone-size 16M --zones 32
zf_mount
dd if=/dev/urandom of="$ZF_MNT/data" bs=1M count=8 status=none
sum=$(sha256sum <"$ZF_MNT/data")

rc=0
t0=$(date +%s)
"$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -o remount,ro 2>"$ZF_WORK/err" || rc=$?
took=$(($(date +%s) - t0))
[ "$rc" -eq 32 ] || zf_fail "zonefuse -o remount,ro exited $rc, expected 32: $(cat "$ZF_WORK/err")"
[ "$(wc -l <"$ZF_WORK/err")" -eq 1 ] || zf_fail "more than one line: $(cat "$ZF_WORK/err")"
grep -q "remount is not supported: unmount, then mount again" "$ZF_WORK/err" ||
	zf_fail "message: $(cat "$ZF_WORK/err")"
[ "$took" -lt 5 ] || zf_fail "the refusal took $took s"
zf_log "zonefuse -o remount,ro: exit 32 in $took s: $(cat "$ZF_WORK/err")"

rc=0
zf_ns_run mount -o remount,ro "$ZF_MNT" 2>"$ZF_WORK/err" || rc=$?
[ "$rc" -eq 32 ] || zf_fail "mount -o remount,ro exited $rc, expected 32: $(cat "$ZF_WORK/err")"
[ "$(wc -l <"$ZF_WORK/err")" -eq 1 ] || zf_fail "mount -o remount: more than one line: $(cat "$ZF_WORK/err")"
grep -q "remount is not supported" "$ZF_WORK/err" || zf_fail "mount -o remount: $(cat "$ZF_WORK/err")"
zf_log "mount -o remount,ro: exit 32: $(cat "$ZF_WORK/err")"

opts=$(findmnt -n -o OPTIONS "$ZF_MNT")
[[ ",$opts," == *,rw,* ]] || zf_fail "the mount is no longer read-write: $opts"
zf_daemon_alive || zf_fail "the daemon is gone after the refused remount"
[ "$(sha256sum <"$ZF_MNT/data")" = "$sum" ] || zf_fail "data differs after the refused remount"
echo more >"$ZF_MNT/after" || zf_fail "cannot write after the refused remount"
n=$(pgrep -c -f "^$ZF_DAEMON $ZF_DEV" || true)
[ "$n" -eq 1 ] || zf_fail "$n daemons for $ZF_DEV"
zf_umount
zf_fsck
zf_pass "remount refused with one line and exit 32; the mount goes on read-write"
