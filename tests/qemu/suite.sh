#!/bin/bash
# The QEMU NVMe ZNS suite: zonefuse on a real kernel zoned device.
#   tests/qemu/suite.sh [--long] [--build-dir DIR] [--keep]
# Boots guests with scripts/qemu-zns.sh and runs tests/qemu/guest-suite.sh:
#   1. test_zdev against /dev/nvme0n1, 16 MiB zones, 14 open/active, then the
#      file system part (mkfs, FUSE mount, smoke, fio verify, zf-leveldb fill
#      + remount + verify, zone limits sampled) in the same boot;
#   2. test_zdev on a second geometry: 1 MiB zones with 768 KiB capacity,
#      4 open / 6 active (capacity < zone size, max open < max active);
#   3. crash: fsync'ed files, then the guest's power is cut mid-write (QEMU
#      stopped and quit); the next boot of the same image (zone states
#      restored) runs fsck, mounts and checks every fsync'ed file.
# --long: bigger fio and zf-leveldb runs, the file system part on the
# capacity < zone size geometry too, and three power-cut rounds on the same
# image (each round recovers the previous cut, checks all earlier rounds'
# fsync'ed files, writes its own and is cut again).
# Prints one PASS/FAIL line per part and a closing "N passed, N failed".
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build long=0 keep=()
while [ $# -gt 0 ]; do
	case "$1" in
	--long) long=1; shift ;;
	--build-dir) build=$2; shift 2 ;;
	--keep) keep=(--keep); shift ;;
	*) echo "usage: $0 [--long] [--build-dir DIR] [--keep]" >&2; exit 2 ;;
	esac
done
build=$(realpath -m "$build")
q=("$src/scripts/qemu-zns.sh" --build-dir "$build" "${keep[@]}")
g=$src/tests/qemu/guest-suite.sh
pass=0 failed=0 results=()
t0=$(date +%s)
part() { # name, qemu-zns.sh args... -- guest command...
	local name=$1 t=$(date +%s) rc=0
	shift
	echo "=== $name"
	"${q[@]}" "$@" || rc=$?
	if [ $rc -eq 77 ]; then exit 77; fi
	if [ $rc -eq 0 ]; then pass=$((pass + 1)); results+=("PASS: qemu $name ($(($(date +%s) - t)) s)")
	else failed=$((failed + 1)); results+=("FAIL: qemu $name (exit $rc, $(($(date +%s) - t)) s)"); fi
	return $rc
}
fsarg=()
[ $long -eq 1 ] && fsarg=(--long)

part "zdev + fs, 16M zones, 14 open/active" --size 2G --timeout 1500 -- \
	bash -c "$g zdev && $g fs ${fsarg[*]}"
part "zdev, 1M zones, capacity 768K, 4 open/6 active" --zone-size 1M --zone-capacity 768K \
	--max-open 4 --max-active 6 --size 64M --timeout 600 -- "$g" zdev
if [ $long -eq 1 ]; then
	part "fs, 8M zones, capacity 6M, 8 open/12 active" --zone-size 8M --zone-capacity 6M \
		--max-open 8 --max-active 12 --size 2G --timeout 2400 -- "$g" fs --long
fi
img=$(mktemp "${TMPDIR:-/tmp}/zf-crash.XXXXXX")
rm -f "$img"
trap 'rm -f "$img" "$img.zones" "$img.conv"' EXIT
# power cuts: one round, three with --long (each later round boots the
# image the previous cut left, recovers it, writes more, is cut again)
rounds=1
[ $long -eq 1 ] && rounds=3
for r in $(seq 1 $rounds); do
	part "crash round $r/$rounds: write, fsync, power cut" --image "$img" --size 1G --power-cut \
		--timeout 600 -- "$g" crash-write "$r" || break
	part "crash round $r/$rounds: boot again, fsck, mount, verify rounds 1-$r" --image "$img" \
		--size 1G --timeout 600 -- "$g" crash-verify "$r" || break
done
echo
echo "== qemu suite ($(($(date +%s) - t0)) s)"
for r in "${results[@]}"; do echo "$r"; done
echo "qemu: $pass passed, $failed failed"
[ $failed -eq 0 ]
