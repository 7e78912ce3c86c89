#!/bin/bash
# kill -9 of the daemon, and a simulated power loss of the emulated device:
# everything fsync'ed before the crash is there after a remount.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog python3 python3
zf_setup --zone-size 16M --zones 64 --max-open 14 --max-active 14

crash_round() { # mode: kill9 | powerloss
	zf_mount
	python3 - "$ZF_MNT" "$1" <<'PY'
import os, sys
m, mode = sys.argv[1], sys.argv[2]
d = os.path.join(m, mode)
os.makedirs(d, exist_ok=True)
for i in range(20):
    p = os.path.join(d, f"synced{i}")
    with open(p, "wb") as f:
        f.write(bytes([i]) * (100000 + i * 4096 + i))
        f.flush(); os.fsync(f.fileno())
with open(os.path.join(d, "log"), "ab") as f:
    for i in range(100):
        f.write(b"%06d\n" % i); f.flush(); os.fsync(f.fileno())
os.rename(os.path.join(d, "synced0"), os.path.join(d, "renamed0"))
os.unlink(os.path.join(d, "synced1"))
fd = os.open(d, os.O_RDONLY); os.fsync(fd); os.close(fd)
# not synced: may or may not survive, must not corrupt anything
with open(os.path.join(d, "unsynced"), "wb") as f:
    f.write(b"u" * 3000000)
PY
	zf_kill9
	if [ "$1" = powerloss ]; then
		"$ZF_EMU" powerloss "$ZF_DEV" >/dev/null || zf_fail "zonefuse-emu powerloss"
	fi
	zf_fsck
	zf_mount
	python3 - "$ZF_MNT" "$1" <<'PY' || zf_fail "fsync'ed state lost after $1"
import os, sys
m, mode = sys.argv[1], sys.argv[2]
d = os.path.join(m, mode)
for i in range(2, 20):
    with open(os.path.join(d, f"synced{i}"), "rb") as f:
        assert f.read() == bytes([i]) * (100000 + i * 4096 + i), f"synced{i}"
with open(os.path.join(d, "renamed0"), "rb") as f:
    assert f.read() == bytes([0]) * 100000
assert not os.path.exists(os.path.join(d, "synced0"))
assert not os.path.exists(os.path.join(d, "synced1"))
with open(os.path.join(d, "log"), "rb") as f:
    assert f.read() == b"".join(b"%06d\n" % i for i in range(100))
p = os.path.join(d, "unsynced")
if os.path.exists(p):
    data = open(p, "rb").read()
    assert data.strip(b"u\0") == b"", "unsynced file holds foreign bytes"
print(mode, "ok")
PY
	zf_umount
}
crash_round kill9
crash_round powerloss
zf_fsck
zf_pass "fsync'ed data, names and renames survive kill -9 and power loss"
