#!/bin/bash
# Which writes are striped (issue 5, fs_data.c stripe_width()), on the
# small-zone performance model (40 MB/s of writes per zone):
#  - a WAL (*.log, lifetime class short) appended and fsync'ed a piece at a
#    time, or appended at a pace one zone keeps up with and pushed out with
#    sync_file_range() (RocksDB's wal_bytes_per_sync), stays in one zone
#    (two if it crosses a zone's end);
#  - a WAL streamed faster than one zone absorbs is striped: a writer found
#    its write-out busy, so the next write-outs go to several zones;
#  - an LSM table (*.sst, class medium) is striped;
#  - the contents survive a remount.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog python3 python3
zf_setup --zone-size 16M --zones 64 --max-open 14 --max-active 14 --zone-write-mbps 40
opts=stripe_width=4
zf_mount -o "$opts"
python3 - "$ZF_MNT" <<'PY' || zf_fail "striping by class and pressure"
import ctypes, hashlib, os, sys, time
m = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
SYNC_FILE_RANGE_WRITE = 2

def zones(p):
    return {int(l.split()[2]) for l in os.getxattr(p, "user.zonefuse.extents").decode().splitlines()}

def cls(p):
    return os.getxattr(p, "user.zonefuse.lifetime").decode().split()[0]

sums = {}
# 1. a WAL written like a synced log: 512 KiB appends, fsync each, pauses
p = os.path.join(m, "000007.log")
with open(p, "wb") as f:
    h = hashlib.sha256()
    for i in range(16):
        b = hashlib.sha256(b"wal%d" % i).digest() * (512 * 1024 // 32)
        f.write(b); f.flush(); os.fsync(f.fileno()); h.update(b)
        time.sleep(0.05)
sums[p] = h.hexdigest()
assert cls(p) == "short", cls(p)
z = zones(p)
assert len(z) <= 2, f"an fsync'ed 8 MiB WAL sits in {len(z)} zones: {sorted(z)}"
print("synced WAL:", len(z), "zone(s)")

# 1b. a paced WAL, never fsync'ed: 1 MiB appends pushed to the daemon with
# sync_file_range() every 1 MiB, 60 ms apart (one zone writes 1 MiB in 25 ms)
p = os.path.join(m, "000008.log")
with open(p, "wb") as f:
    h = hashlib.sha256()
    for i in range(12):
        b = hashlib.sha256(b"paced%d" % i).digest() * (1 << 15)
        f.write(b); f.flush(); h.update(b)
        assert libc.sync_file_range(f.fileno(), i << 20, 1 << 20, SYNC_FILE_RANGE_WRITE) == 0, \
            os.strerror(ctypes.get_errno())
        time.sleep(0.06)
sums[p] = h.hexdigest()
z = zones(p)
assert len(z) <= 2, f"a paced 12 MiB WAL sits in {len(z)} zones: {sorted(z)}"
print("paced WAL:", len(z), "zone(s)")

# 2. a WAL streamed as fast as the writer can: more than one zone can take
for name, mib in (("000009.log", 96), ("000010.sst", 64)):
    p = os.path.join(m, name)
    b = os.urandom(1 << 20)
    t = time.time()
    with open(p, "wb") as f:
        for i in range(mib):
            f.write(b)
        f.flush(); os.fsync(f.fileno())
    secs = time.time() - t
    sums[p] = hashlib.sha256(b * mib).hexdigest()
    z = zones(p)
    print(f"{name} ({cls(p)}): {mib} MiB in {secs:.1f} s, {len(z)} zones")
    assert len(z) >= 3, f"{name} streamed at {mib / secs:.0f} MB/s sits in {len(z)} zones"

with open(os.path.join(m, "sums"), "w") as f:
    for p, s in sums.items():
        f.write(f"{os.path.basename(p)} {s}\n")
    f.flush(); os.fsync(f.fileno())
dfd = os.open(m, os.O_RDONLY); os.fsync(dfd); os.close(dfd)
PY
zf_remount -o "$opts"
python3 - "$ZF_MNT" <<'PY' || zf_fail "contents after remount"
import hashlib, os, sys
m = sys.argv[1]
for line in open(os.path.join(m, "sums")):
    name, want = line.split()
    got = hashlib.sha256(open(os.path.join(m, name), "rb").read()).hexdigest()
    assert got == want, f"{name} changed"
PY
zf_umount
zf_pass "synced WAL in one zone, streamed WAL and tables striped, contents intact"
