#!/bin/bash
# The zf loop serves a small WRITE, a RELEASE or a SETATTR on the thread
# that read it and gives the reading to another worker only when the
# request is about to block (fusefs/loop.c, zf_will_block):
#   1. creating, reading and removing 1,000 small files (a WRITE and a
#      RELEASE per close, a SETATTR per unlink) hands almost nothing off
#      (fuse_handed_off), and every file has its content;
#   2. on a device that takes 400 ms per request, a close whose RELEASE
#      writes the file out (write_behind_ms=0) blocks in the device: the
#      reading goes on meanwhile (lookups of other names answer in well
#      under 400 ms), fuse_served_until_block counts it, and the file is
#      whole after a remount;
#   3. on the same device, four small READs that miss the page cache run
#      in parallel (about 400 ms for all four, not 1.6 s).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog python3 python3
zf_setup
M=$ZF_MNT

# ---- 1. small files: served inline ------------------------------------------
zf_mount
zf_small_files "$M/a" 1000
rm -r "${M:?}/a"
inl=$(zf_stat fuse_served_inline) ub=$(zf_stat fuse_served_until_block) ho=$(zf_stat fuse_handed_off)
zf_log "1,000 small files: $inl requests served inline, $ub until they blocked, $ho handed off"
[ "$inl" -ge 6000 ] || zf_fail "only $inl requests served inline (some 8,000 were sent)"
[ "$ho" -lt 200 ] || zf_fail "$ho requests handed off: the closes' WRITEs and RELEASEs went to other workers"
zf_umount
zf_check_log

# ---- 2. a RELEASE that blocks in the device gives the reading up ----------------
slow=$ZF_WORK/slow.img
"$ZF_EMU" create "$slow" --zone-size 16M --zones 32 --latency-us 400000 >/dev/null ||
	zf_fail "zonefuse-emu create --latency-us failed"
"$ZF_MKFS" "$slow" >"$ZF_WORK/mkfs-slow.log" 2>&1 || zf_fail "mkfs.zonefuse of the slow device failed"
ZF_DEV=$slow
zf_mount -o write_behind_ms=0,commit_ms=60000
python3 - "$M" <<'PY' || zf_fail "the loop did not read on while a RELEASE blocked"
import os, sys, time
m = sys.argv[1]
data = os.urandom(16384)
# A first close: the kernel learns FLUSH is not served; its release is slow.
with open(f"{m}/warm", "wb") as f:
    f.write(b"w")
time.sleep(1.0)
for i in range(4):
    with open(f"{m}/r{i}", "wb") as f:
        f.write(data)
with open(f"{m}/f", "wb") as f:
    f.write(data)
t_close = time.monotonic()   # the RELEASE is on its way: it writes 16 KiB out
time.sleep(0.02)
worst = 0.0
for i in range(5):
    t = time.monotonic()
    try:
        os.stat(f"{m}/none{i}")   # a LOOKUP of a new name: a round trip
    except FileNotFoundError:
        pass
    worst = max(worst, time.monotonic() - t)
spent = time.monotonic() - t_close
print(f"worst lookup {worst * 1000:.1f} ms, {spent * 1000:.0f} ms after the close")
if worst > 0.2:
    sys.exit(f"a lookup took {worst * 1000:.0f} ms while a RELEASE waited for the device")
if spent > 0.35:
    sys.exit(f"too slow to tell: the lookups ended {spent * 1000:.0f} ms after the close")
PY
sleep 1
ub=$(zf_stat fuse_served_until_block)
zf_log "served until they blocked: $ub"
[ "$ub" -ge 1 ] || zf_fail "no request counted as served until it blocked"
zf_umount

# ---- 3. small READs that go to the device run in parallel -----------------------
zf_mount
python3 - "$M" <<'PY' || zf_fail "small READs to the device did not run in parallel"
import os, sys, threading, time
m = sys.argv[1]
assert os.path.getsize(f"{m}/f") == 16384, "the file written out by the slow release is not whole"
fds = [os.open(f"{m}/r{i}", os.O_RDONLY) for i in range(4)]
for fd in fds:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)   # one 4 KiB READ, no readahead
got = [None] * 4
def rd(i):
    got[i] = os.pread(fds[i], 4096, 8192)
ts = [threading.Thread(target=rd, args=(i,)) for i in range(4)]
t0 = time.monotonic()
for t in ts:
    t.start()
for t in ts:
    t.join()
took = time.monotonic() - t0
print(f"four 4 KiB reads from the 400 ms device took {took * 1000:.0f} ms")
assert all(g is not None and len(g) == 4096 for g in got), "short reads"
assert len(set(got)) == 1, "the four files hold the same bytes"
if took > 1.2:
    sys.exit(f"four small READs took {took * 1000:.0f} ms: one at a time")
PY
zf_umount
zf_check_log
zf_pass
