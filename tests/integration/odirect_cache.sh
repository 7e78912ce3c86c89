#!/bin/bash
# O_DIRECT writes and buffered readers on one file.  The kernel drops a
# direct write's cached pages before it sends the WRITE, and again after
# it only for a synchronous write; pages a buffered reader brought back
# from the daemon before an AIO write reached it stayed, old.
#   - The race made certain (tests/odirect_race, on a device whose zones
#     write at 2 MB/s with the write-out at the close, so that the AIO
#     O_DIRECT write waits in the daemon while a buffered read of its page
#     is answered with the old bytes): afterwards a buffered read must see
#     the new bytes, with the daemon's read-ahead on and off
#     (-o prefetch_kb=0), on the zf request loop and libfuse's mt one (with
#     -s the one thread serves the READ only after the WRITE: no race).
#   - With fio (if installed): 128 KiB AIO O_DIRECT writes, 32 in flight,
#     and two buffered readers for 3 s; then a buffered read of the whole
#     file equals an O_DIRECT read (and nothing hangs).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_prog python3 python3
RACE=$ZF_BUILD_DIR/tests/odirect_race
zf_require_bin "$RACE"
zf_setup --zone-size 4M --zones 64 --zone-write-mbps 2

n=0
for opts in "" "-o prefetch_kb=0" "-o fuse_loop=mt"; do
	# shellcheck disable=SC2086 # opts is words
	zf_mount -o write_behind_ms=0 $opts
	st=0
	"$RACE" "$ZF_MNT/race$n" >"$ZF_WORK/race.out" 2>&1 || st=$?
	sed 's/^/  /' "$ZF_WORK/race.out"
	case $st in
	0) zf_log "[$opts] the buffered read after the AIO write saw the new bytes" ;;
	1) zf_fail "[$opts] a buffered read after an AIO O_DIRECT write returned the old bytes" ;;
	3) zf_fail "[$opts] the race was not met (the write did not wait in the daemon)" ;;
	*) zf_fail "[$opts] odirect_race failed (exit $st)" ;;
	esac
	zf_umount
	n=$((n + 1))
done

if command -v fio >/dev/null && fio --enghelp 2>/dev/null | grep -qw libaio; then
	zf_mount
	f=$ZF_MNT/stress
	head -c 8M /dev/urandom >"$f"
	sync
	fio --name=w --filename="$f" --rw=randwrite --bs=128k --size=8M --direct=1 \
		--ioengine=libaio --iodepth=32 --time_based --runtime=3 --randrepeat=0 \
		--name=r --filename="$f" --rw=read --bs=128k --size=8M --direct=0 \
		--ioengine=psync --time_based --runtime=3 --numjobs=2 >"$ZF_WORK/fio.log" 2>&1 ||
		zf_fail "fio failed: $(tail -n 5 "$ZF_WORK/fio.log")"
	python3 - "$f" <<'PY' || zf_fail "a buffered read returned old bytes after the fio run"
import mmap, os, sys
f = sys.argv[1]
with open(f, "rb") as fh:
    cached = fh.read()
fd = os.open(f, os.O_RDONLY | os.O_DIRECT)
m = mmap.mmap(-1, 8 << 20)
n = os.readv(fd, [m])
os.close(fd)
direct = bytes(m[:n])
bad = sum(1 for i in range(0, n, 4096) if direct[i:i + 4096] != cached[i:i + 4096])
print(f"  fio: {bad} of {n // 4096} blocks differ between a buffered and an O_DIRECT read")
sys.exit(1 if bad or len(cached) != n else 0)
PY
	zf_umount
else
	zf_log "fio with libaio not installed: the fio part is not run"
fi
zf_fsck
zf_pass "buffered reads see AIO O_DIRECT writes (2 request loops, prefetch on and off)"
