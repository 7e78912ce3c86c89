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
# The daemon stamps times with the kernel's (coarse) clock, so a new small
# file's first write leaves the kernel's times as they are and close() sends
# no SETATTR; a finer stamp made that one round trip of eight per create.
# A create that straddles a clock tick still sends one: allow a quarter.
s0=$(zf_stat lat_setattr_count)
python3 - "$ZF_MNT" <<'PY' || zf_fail "times of new files"
import os, sys, time
COARSE = 5     # CLOCK_REALTIME_COARSE, which Python's time module does not name
d = os.path.join(sys.argv[1], "stamps"); os.mkdir(d)
for i in range(400):
    t0 = time.clock_gettime_ns(COARSE)
    p = os.path.join(d, f"f{i}")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"m" * 100)
    os.close(fd)
    st = os.stat(p)
    t1 = time.clock_gettime_ns(time.CLOCK_REALTIME)
    for n in ("st_mtime_ns", "st_ctime_ns"):
        assert t0 <= getattr(st, n) <= t1, f"{p}: {n} {getattr(st, n)} outside [{t0}, {t1}]"
PY
s1=$(zf_stat lat_setattr_count)
[ $((s1 - s0)) -le 100 ] || zf_fail "400 creates of small files sent $((s1 - s0)) SETATTRs"
zf_log "400 creates of small files: $((s1 - s0)) SETATTRs"
# close() does not wait for the device (there is no FLUSH handler): the
# write-behind writes a closed file's bytes out within write_behind_ms (1 s),
# without an fsync.
python3 - "$ZF_MNT" <<'PY' || zf_fail "a closed file's bytes did not reach the device"
import os, sys, time
p = os.path.join(sys.argv[1], "stamps", "closed")
with open(p, "wb") as f:
    f.write(os.urandom(3 * 65536 + 100))
def extents():
    return [l for l in os.getxattr(p, "user.zonefuse.extents").decode().splitlines()
            if l and not l.startswith("#")]
t0 = time.monotonic()
while not extents():
    assert time.monotonic() - t0 < 3, "no extent 3 s after close"
    time.sleep(0.01)
PY
zf_umount
zf_pass "operations and remount persistence"
