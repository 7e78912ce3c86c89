#!/bin/bash
# scripts/bench-steady.sh on a tiny device (the IoT workload, 256 MiB of 2 MiB zones,
# zonefuse, ext4 and libfuse's passthrough_ll over ext4, the device written
# once):
# - it ends 0 and writes results.md with the run's table, the targets and
#   the highest fill, and a chart.svg that parses;
# - the IoT driver it builds (scripts/lib/iot-window.c) ran: a series of
#   10-s intervals and a "done ... ok" line;
# - every file system has device bytes / application bytes;
# - it leaves no mount, loop device, passthrough_ll or work dir behind, and
#   its zonefuse daemon logged no error.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog db_bench rocksdb-tools
zf_require_prog fio fio
zf_require_prog mkfs.ext4 e2fsprogs
zf_require_prog losetup mount
zf_require_prog getfattr attr
zf_require_prog cc gcc
[ -f /usr/include/leveldb/c.h ] || zf_skip "LevelDB's C header is missing (apt-get install libleveldb-dev)"
zf_setup

mkdir "$ZF_WORK/tmp"
rc=0
TMPDIR="$ZF_WORK/tmp" "$ZF_SRC_DIR/scripts/bench-steady.sh" --quick --workloads iot \
	--geometries 2M:128:32 --fills 30 --turnover 1 --interval 2 --fs "zonefuse ext4 fuse-ext4" \
	--build-dir "$ZF_BUILD_DIR" --results "$ZF_WORK/res" >"$ZF_WORK/out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { tail -n 30 "$ZF_WORK/out"; zf_fail "bench-steady.sh ended $rc"; }
md=$(echo "$ZF_WORK"/res/steady-*/results.md)
[ -f "$md" ] || zf_fail "no results.md"
grep -q '^## iot, fill 30 %, unthrottled' "$md" || zf_fail "no IoT table: $(head -n 20 "$md")"
grep -qE '^\| result \| ok \| ok \| ok \|' "$md" || zf_fail "a run did not complete: $(grep '^| result' "$md")"
grep -qE '^\| device bytes / application bytes( \| [0-9]+\.[0-9]{3}){3} \|' "$md" ||
	zf_fail "no device / application bytes for every fs: $(grep '^| device bytes /' "$md")"
grep -qE '^\| iot zf 2M x 128 fill 30 % \|' "$md" || zf_fail "no targets row"
grep -qE '^\| iot \| unthrottled \| 30 % ' "$md" || zf_fail "no highest-fill row"
python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$(dirname "$md")/chart.svg" ||
	zf_fail "chart.svg does not parse"
out=$(echo "$ZF_WORK"/res/steady-*/iot-zonefuse-*/iot.out)
grep -q '^i ' "$out" || zf_fail "the IoT driver reported no interval"
grep -qE '^done [0-9]+ [0-9]+ [0-9.]+ ok' "$out" || zf_fail "the IoT driver did not finish: $(tail -n 1 "$out")"
grep -qi 'error:' "$ZF_WORK"/res/steady-*/iot-zonefuse-*/zonefuse.log &&
	zf_fail "zonefuse logged an error: $(grep -i -m 3 'error:' "$ZF_WORK"/res/steady-*/iot-zonefuse-*/zonefuse.log)"
left=$(grep -F "$ZF_WORK/tmp" /proc/mounts; losetup -a | grep -F "$ZF_WORK/tmp";
	find "$ZF_WORK/tmp" -mindepth 1 -maxdepth 1; pgrep -af "$ZF_WORK/tmp") || true
[ -z "$left" ] || zf_fail "the bench left behind: $left"

zf_pass "IoT on zonefuse, ext4 and fuse-ext4 completed; results.md, chart.svg, the driver's intervals; nothing left behind"
