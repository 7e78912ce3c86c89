#!/bin/bash
# Fill the device: writes fail with ENOSPC (and only when it is really
# full), the file system stays consistent, and deleting frees space again.
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
zf_umount
zf_fsck
zf_pass "ENOSPC only when full; space comes back after delete"
