#!/bin/bash
# Every file operation and its edge cases on a mounted zonefuse (fsops.py),
# then unmount + fsck + remount and check the state persisted.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog python3 python3
zf_setup --zone-size 16M --zones 64 --max-open 14 --max-active 14
chmod 755 "$ZF_WORK"	# the unprivileged checks must reach the mount
zf_mount -o allow_other,default_permissions
# The device is held exclusively: a second mount, mkfs and fsck are refused.
mkdir "$ZF_WORK/mnt2"
if timeout 10 "$ZF_DAEMON" "$ZF_DEV" "$ZF_WORK/mnt2" -f >"$ZF_WORK/second.log" 2>&1; then
	zf_fail "a second mount of the same device was accepted"
fi
grep -q "in use" "$ZF_WORK/second.log" || zf_fail "second mount: unclear message: $(cat "$ZF_WORK/second.log")"
if "$ZF_MKFS" --force "$ZF_DEV" >/dev/null 2>&1; then zf_fail "mkfs of a mounted device was accepted"; fi
if "$ZF_FSCK" "$ZF_DEV" >/dev/null 2>&1; then zf_fail "fsck of a mounted device was accepted"; fi
python3 "$ZF_SRC_DIR/tests/integration/fsops.py" prepare "$ZF_MNT" || zf_fail "operation checks"
zf_umount
zf_fsck
zf_mount -o allow_other,default_permissions
python3 "$ZF_SRC_DIR/tests/integration/fsops.py" verify "$ZF_MNT" || zf_fail "state after remount"
zf_umount
zf_pass "operations and remount persistence"
