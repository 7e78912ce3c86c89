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
for i in $(seq 0 79); do
	head -c 1M /dev/urandom >"$ZF_MNT/f$i"
done
sync -f "$ZF_MNT/f0" 2>/dev/null; python3 -c 'import os,sys; [os.fsync(os.open(f, os.O_RDONLY)) for f in sys.argv[1:]]' "$ZF_MNT"/f*
for i in $(seq 0 4 79); do rm "$ZF_MNT/f$i"; done
dd if=/dev/urandom of="$ZF_MNT/g" bs=1M count=44 conv=fsync status=none ||
	zf_fail "a 44 MiB write into room the collector must make failed"
grep -qE "warning: gc stall: a write waited [0-9.]+ s for the garbage collector" "$ZF_LOG" ||
	zf_fail "no gc stall warning: $(zf_stats | grep -E '^gc_' | tr '\n' ' ')"
rm -f "$ZF_MNT"/f* "$ZF_MNT/g"
# The deletes' zones are reset at the next commit: only then is space no
# longer low, and a file opened then writes through the page cache, whose
# write-back the full device refuses (opened while space is low, dd's
# write() would fail itself, with no write-back to refuse).
sync -f "$ZF_MNT" 2>/dev/null || sync
sleep 1

# ---- ENOSPC: the device filled by synchronous writes (nothing stays
# buffered), then a writer that never syncs: a refused write-back ---------------
rc=0
dd if=/dev/zero of="$ZF_MNT/fill" bs=1M count=256 oflag=sync status=none 2>"$ZF_WORK/dd.err" || rc=$?
[ "$rc" -ne 0 ] || zf_fail "dd of 256 MiB onto a 128 MiB device succeeded"
grep -q "No space left on device" "$ZF_WORK/dd.err" || zf_fail "dd: $(cat "$ZF_WORK/dd.err")"
rc=0
dd if=/dev/zero of="$ZF_MNT/more" bs=1M count=16 status=none 2>"$ZF_WORK/dd2.err" || rc=$?
[ "$rc" -ne 0 ] || zf_fail "16 MiB more onto a full device succeeded"
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
