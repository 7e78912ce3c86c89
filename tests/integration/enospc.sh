#!/bin/bash
# Fill the device: writes fail with ENOSPC (and only when it is really
# full), also a write() of a writer that never syncs, the file system stays
# consistent, and deleting frees space again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog python3 python3
zf_setup --zone-size 4M --zones 40 --max-open 8 --max-active 8
zf_mount
python3 - "$ZF_MNT" <<'PY' || zf_fail "ENOSPC behaviour"
import errno, os, sys
m = sys.argv[1]
st = os.statvfs(m)
cap = st.f_blocks * st.f_frsize
written, i, hit = 0, 0, False
buf = b"z" * (1 << 20)
while not hit and i < 1000:
    p = os.path.join(m, f"fill{i}")
    try:
        with open(p, "wb") as f:
            for _ in range(4):
                f.write(buf); written += len(buf)
            f.flush(); os.fsync(f.fileno())
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
        hit = True
    i += 1
assert hit, "device never filled"
assert written >= 0.8 * cap, f"ENOSPC too early: {written} of {cap} bytes"
for k in range(0, i):
    p = os.path.join(m, f"fill{k}")
    if os.path.exists(p):
        os.unlink(p)
fd = os.open(m, os.O_RDONLY); os.fsync(fd); os.close(fd)
with open(os.path.join(m, "after"), "wb") as f:
    for _ in range(int(0.5 * cap) >> 20):
        f.write(buf)
    f.flush(); os.fsync(f.fileno())
print(f"filled {written >> 20} MiB of {cap >> 20} MiB, then wrote {int(0.5 * cap) >> 20} MiB after deleting")
PY
# A writer that never syncs learns of the full device at a write(): its
# write() calls only fill the page cache, the kernel's write-back WRITEs
# are refused, and a next write() fails (without that, such a writer would
# write to the page cache forever).  A file opened while space is low
# bypasses the page cache: its write() itself fails.  Neither error stays
# behind for the next writer of the file, who writes once there is room
# again (its first fsync
# may still report the refused write-back: the kernel gives an error no
# fsync has seen to the next fsync of any opener).
cat >"$ZF_WORK/writers.py" <<'PY'
import errno, os, sys, time
m = sys.argv[1]
buf = b"\0" * (1 << 20)
fd = os.open(os.path.join(m, "endless"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
n, t0, err = 0, time.monotonic(), None
while time.monotonic() - t0 < 60:
    try:
        n += os.write(fd, buf)
    except OSError as e:
        err = e.errno
        break
assert err == errno.ENOSPC, f"no ENOSPC at write() after {n >> 20} MiB in 60 s (errno {err})"
try:
    os.close(fd)
except OSError as e:
    assert e.errno == errno.ENOSPC, e
print(f"endless writer: ENOSPC at write() after {n >> 20} MiB, {time.monotonic() - t0:.1f} s")
# Opened while space is low, a file bypasses the page cache: its write()
# itself fails (as on ext4), and the file holds exactly what write() took:
# nothing, or what room the collector gave back meanwhile (it reclaims what
# the endless writer's refused write-back left dead), never more.
late = os.path.join(m, "late")
fd = os.open(late, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
took = 0
try:
    for _ in range(8):
        took += os.write(fd, buf)
    raise AssertionError("8 MiB written to a full device")
except OSError as e:
    assert e.errno == errno.ENOSPC, e
os.close(fd)
assert os.stat(late).st_size == took, (os.stat(late).st_size, took)
print(f"late writer: write() took {took} bytes, then ENOSPC")
for f in ("after", "endless", "late"):
    os.truncate(os.path.join(m, f), 0)
# The open refreshes the file's attributes (the kernel checks the mode);
# a write() asks for them again once they are older than attr_timeout (5 s).
fd = os.open(late, os.O_WRONLY | os.O_APPEND)
time.sleep(6)
for _ in range(4):
    os.write(fd, buf)
try:
    os.fsync(fd)
except OSError as e:
    assert e.errno == errno.ENOSPC, e
os.fsync(fd)
assert os.fstat(fd).st_size == 4 << 20, os.fstat(fd).st_size
os.close(fd)
PY
python3 "$ZF_WORK/writers.py" "$ZF_MNT" || zf_fail "writers that never sync on a full device"
zf_umount
zf_fsck
# The same on libfuse's request loop, which serves a WRITE in op_write.
zf_mount -o fuse_loop=mt
python3 "$ZF_WORK/writers.py" "$ZF_MNT" || zf_fail "writers that never sync, -o fuse_loop=mt"
zf_umount
zf_fsck
zf_pass "ENOSPC only when full, also at write() without a sync; space comes back after delete"
