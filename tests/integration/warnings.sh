#!/bin/bash
# Warnings a person sees (issue 48, item 5): on a small device filled by a
# writer that never syncs, the daemon logs, at level warning,
#   - a refused write-back ("write-back of inode N refused (No space left
#     on device)"), once per file, when a writer that never syncs meets a
#     device that synchronous writes filled;
#   - a garbage-collector stall ("gc stall: a write waited ... s");
#   - a metadata log that is nearly full: the device full of data leaves
#     the log room for less than two snapshots ("metadata log is nearly
#     full"; or, with less room still, "the metadata fills the device").
# The background daemon's terminal shows warnings only while it mounts;
# these land in its log (here -f, standard error) at warning level, so that
# `journalctl -p warning` or a grep for "warning:" finds them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_setup --zone-size 4M --zones 32 --device-mbps 10
zf_mount -o commit_ms=200,stripe_width=1,gc_mbps=1

# ---- a gc stall: half-dead zones, then a writer that needs them ---------------
# 1 MiB files, four to a 4 MiB zone; every fourth deleted leaves each zone
# a quarter dead, so that the new file's room comes from the collector,
# which moves three zones' data (1.2 s at 10 MB/s) for each zone of room.
# 60 MiB stay valid of the 104 the device offers; the new file leaves it
# two zones of room (with 44 MiB it filled the device to the last byte,
# where ENOSPC is the promised answer).
for i in $(seq 0 79); do
	head -c 1M /dev/urandom >"$ZF_MNT/f$i"
done
sync -f "$ZF_MNT/f0" 2>/dev/null; python3 -c 'import os,sys; [os.fsync(os.open(f, os.O_RDONLY)) for f in sys.argv[1:]]' "$ZF_MNT"/f*
for i in $(seq 0 4 79); do rm "$ZF_MNT/f$i"; done
dd if=/dev/urandom of="$ZF_MNT/g" bs=1M count=36 conv=fsync status=none ||
	zf_fail "a 36 MiB write into room the collector must make failed"
grep -qE "warning: gc stall: a write waited [0-9.]+ s for the garbage collector" "$ZF_LOG" ||
	zf_fail "no gc stall warning: $(zf_stats | grep -E '^gc_' | tr '\n' ' ')"
rm -f "$ZF_MNT"/f* "$ZF_MNT/g"
# ---- ENOSPC: a file opened while there is room (so its writes go through
# the page cache: a file opened while space is low bypasses it, and its
# write() fails itself with no write-back to refuse), the device then filled
# by synchronous writes, then 16 MiB written to that file without a sync:
# its write-back at close is refused ---------------------------------------------
sync -f "$ZF_MNT" 2>/dev/null || sync
sleep 1
rc=0
python3 - "$ZF_MNT" >"$ZF_WORK/enospc.out" 2>&1 <<'EOF_PY' || rc=$?
import errno, os, sys
m = sys.argv[1]
fd = os.open(m + "/more", os.O_WRONLY | os.O_CREAT, 0o644)
buf = bytes(1 << 20)
fill = os.open(m + "/fill", os.O_WRONLY | os.O_CREAT | os.O_SYNC, 0o644)
n = 0
try:
    for n in range(256):
        os.write(fill, buf)
    sys.exit("256 MiB of synchronous writes onto a 128 MiB device succeeded")
except OSError as e:
    if e.errno != errno.ENOSPC:
        raise
os.close(fill)
try:
    for _ in range(16):
        os.write(fd, buf)
    os.close(fd)
except OSError as e:
    if e.errno != errno.ENOSPC:
        raise
    print(f"filled after {n} MiB; the unsynced writer got ENOSPC")
    sys.exit(0)
sys.exit("16 MiB more onto a full device succeeded")
EOF_PY
[ "$rc" -eq 0 ] || zf_fail "$(cat "$ZF_WORK/enospc.out")"
grep -qE "warning: write-back of inode [0-9]+ refused \(No space left on device\)" "$ZF_LOG" ||
	zf_fail "no warning for the refused write-back"
n=$(grep -c "warning: write-back of inode" "$ZF_LOG" || true)
files=$(grep -o "warning: write-back of inode [0-9]*" "$ZF_LOG" | sort -u | wc -l)
[ "$n" -eq "$files" ] || zf_fail "$n write-back warnings for $files files"
# Its refused bytes are gone; what it still holds goes with it.
rm -f "$ZF_MNT/more"
zf_umount
# Which of the two the last snapshot meets depends on the room the refused
# write-back left: nearly full, or full.
grep -qE "warning: mlog: (the metadata log is nearly full: room for [0-9]+ zones|the metadata fills the device)" \
	"$ZF_LOG" || zf_fail "no warning for the nearly full log"
zf_log "warnings: $(grep -E 'warning: ' "$ZF_LOG" | sed 's/^zonefuse: //' | sort -u | tr '\n' '|')"
zf_pass "a gc stall, a refused write-back and a nearly full log are logged as warnings"
