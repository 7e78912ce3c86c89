#!/bin/bash
# bench-zdev — write throughput of the emulated zoned device for 1, 2, 4, 8
# and 16 zones written in parallel with zdev_io_batch (`zonefuse-emu bench`),
# with the small-zone performance model (40 MB/s write and 200 MB/s read per
# zone, 2000 MB/s for the device, 96 MiB zones) and without any model.
#
# Usage: scripts/bench-zdev.sh [MIB]
#   MIB       MiB written per run, spread over the zones (default 64; at most
#             96 so that one zone can hold it)
#   ZF_BUILD_DIR  build directory holding zonefuse-emu (default: build; it is
#             built with ninja if missing)
# The device file lives in a temporary directory (under /dev/shm when
# available so page-cache writeback noise does not distort the figures) and
# is removed at exit.  MB/s = 10^6 bytes per second.
set -euo pipefail
cd "$(dirname "$0")/.."

mib=${1:-64}
if ! [[ "$mib" =~ ^[0-9]+$ ]] || [ "$mib" -lt 1 ] || [ "$mib" -gt 96 ]; then
  echo "bench-zdev: MIB must be an integer between 1 and 96" >&2
  exit 2
fi
bdir=${ZF_BUILD_DIR:-build}
emu="$bdir/zonefuse-emu"
if [ ! -x "$emu" ]; then
  [ -d "$bdir" ] || meson setup "$bdir" >/dev/null
  ninja -C "$bdir" zonefuse-emu >/dev/null
fi

base=${TMPDIR:-/tmp}
if [ -d /dev/shm ] && [ -w /dev/shm ]; then base=/dev/shm; fi
dir=$(mktemp -d "$base/bench-zdev.XXXXXX")
trap 'rm -rf "$dir"' EXIT
dev="$dir/bench.emu"

"$emu" create "$dev" --zone-size 96M --zones 20 --max-open 16 --max-active 16 \
  --zone-write-mbps 40 --zone-read-mbps 200 --device-mbps 2000 >/dev/null

run() { # zones, extra args...
  local n=$1; shift
  "$emu" bench "$dev" --zones-parallel "$n" --mib "$mib" "$@" |
    sed -n 's/.* MB\/s=\([0-9.]*\) .*/\1/p'
}

echo "zdev emulator write throughput, $mib MiB per run, 1 MiB requests via zdev_io_batch"
echo "model: 40 MB/s write / 200 MB/s read per zone, 2000 MB/s device, 96 MiB zones"
echo "file: $dev"
echo
printf "%6s  %12s  %12s  %14s\n" "zones" "model MB/s" "expected" "no-model MB/s"
for n in 1 2 4 8 16; do
  m=$(run "$n")
  x=$(run "$n" --no-model)
  e=$(( n * 40 < 2000 ? n * 40 : 2000 ))
  printf "%6s  %12s  %12s  %14s\n" "$n" "$m" "$e" "$x"
done
