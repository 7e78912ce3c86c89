#!/bin/bash
# What a replicating server on a brick sees at ENOSPC (docs/cluster.md):
# a file opened on a full zonefuse fails its write() with ENOSPC, with the
# default write-back cache (it bypasses the cache while space is low) and
# with -o writeback_cache=off (every write() waits for the daemon); the
# write() itself fails with ENOSPC (Gluster then marks the copy for healing), the
# fsync() of what was accepted succeeds, and every byte acknowledged before
# the device filled reads back after a remount.  A bad value is refused.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog python3 python3
zf_setup --zone-size 4M --zones 40 --max-open 8 --max-active 8
# The fill's refused write-backs are logged as warnings, not errors.

probe() { # expected: "write-ok fsync-ENOSPC" or "write-ENOSPC fsync-ok"
	python3 - "$ZF_MNT" "$1" <<'PY' || zf_fail "ENOSPC with $2: expected $1"
import errno, os, sys
m, want = sys.argv[1], sys.argv[2]
fd = os.open(os.path.join(m, "fill"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
try:                                             # fill the device
    while True:
        os.write(fd, b"z" * (1 << 20))
except OSError as e:
    assert e.errno == errno.ENOSPC, e
try:
    os.close(fd)
except OSError as e:
    assert e.errno == errno.ENOSPC, e
fd = os.open(os.path.join(m, "probe"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
# What the fill left (no room is kept for the page cache once no file
# is open through it) the probe may take; then write() itself fails.
def write_till_full():
    for _ in range(1024):
        os.write(fd, b"p" * 65536)
out = []
for what, call in (("write", write_till_full), ("fsync", lambda: os.fsync(fd))):
    try:
        call()
        out.append(what + "-ok")
    except OSError as e:
        out.append(f"{what}-{errno.errorcode[e.errno]}")
os.close(fd)
got = " ".join(out)
print(f"full device: {got}")
assert got == want, f"got {got!r}, want {want!r}"
os.unlink(os.path.join(m, "fill"))
os.unlink(os.path.join(m, "probe"))
PY
}

zf_mount
python3 - "$ZF_MNT" <<'PY'
import os, sys
with open(os.path.join(sys.argv[1], "kept"), "wb") as f:
    f.write(bytes(range(256)) * 4096)
    os.fsync(f.fileno())
PY
# A file opened while space is low bypasses the page cache even with the
# write-back cache on (docs/guarantees.md, 2a): its write() fails itself.
probe "write-ENOSPC fsync-ok" "the write-back cache"
zf_umount
zf_mount -o writeback_cache=off
probe "write-ENOSPC fsync-ok" "writeback_cache=off"
zf_remount -o writeback_cache=off
python3 - "$ZF_MNT" <<'PY' || zf_fail "the file fsync'ed before the fills changed"
import os, sys
with open(os.path.join(sys.argv[1], "kept"), "rb") as f:
    assert f.read() == bytes(range(256)) * 4096
PY
zf_umount
st=0
"$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -f -o writeback_cache=maybe >"$ZF_WORK/bad.log" 2>&1 || st=$?
[ $st -ne 0 ] || { zf_umount; zf_fail "-o writeback_cache=maybe was accepted"; }
[ $st -eq 2 ] || zf_fail "-o writeback_cache=maybe: exit $st, not 2"
grep -q "writeback_cache must be on or off, not 'maybe'" "$ZF_WORK/bad.log" || zf_fail "no message for writeback_cache=maybe: $(cat "$ZF_WORK/bad.log")"
zf_fsck
zf_pass "ENOSPC fails the write() of a file opened on a full device, with and without the write-back cache"
