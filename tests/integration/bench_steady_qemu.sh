#!/bin/bash
# scripts/bench-steady.sh --qemu without booting a guest (a second or two):
# - --dry-run plans workload 1 in QEMU for zonefuse, btrfs and f2fs on each
#   --qemu-geometries geometry next to the host runs, and nothing in QEMU
#   for the other workloads;
# - bench-qemu-fs.sh --steady with no qemu-system-x86_64 on the PATH exits
#   77 with a SKIP message naming it (bench-steady then skips the QEMU part
#   instead of failing);
# - steady-report.py puts a QEMU run's rows in the table: write
#   amplification from qemu.result (namespace bytes / db_bench's bytes), the
#   conventional namespace apart, resets / finishes, --num, and a run
#   whose --num was capped counted at the fill it really ran at.
set -euo pipefail
ZF_SRC_DIR=${ZF_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
fail() { echo "FAIL: bench_steady_qemu: $*"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: python3 missing"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/zf-bsq.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- the plan
plan=$("$ZF_SRC_DIR/scripts/bench-steady.sh" --workloads "dbbench iot" --geometries "16M:128:14 2M:1024:256" \
	--qemu-geometries 16M:128:14 --fills 70 --rate-mb 0 --qemu --dry-run 2>&1) ||
	fail "--dry-run ended $?: $plan"
for fs in zonefuse-qemu btrfs-qemu f2fs-qemu; do
	[ "$(grep -c "dbbench on $fs, 16M:128:14, 0 MB/s, fill 70 %" <<<"$plan")" = 1 ] ||
		fail "no single QEMU run for $fs: $plan"
done
grep -q 'dbbench on zonefuse, 2M:1024:256' <<<"$plan" || fail "host run missing: $plan"
! grep -q 'qemu, 2M' <<<"$plan" || fail "a QEMU run on a geometry not asked for: $plan"
! grep -q 'iot on .*-qemu' <<<"$plan" || fail "IoT planned in QEMU: $plan"
plan=$("$ZF_SRC_DIR/scripts/bench-steady.sh" --workloads dbbench --geometries 16M:32:14 --fills 70 \
	--rate-mb 0 --dry-run 2>&1)
! grep -q qemu <<<"$plan" || fail "QEMU runs without --qemu: $plan"
"$ZF_SRC_DIR/scripts/bench-steady.sh" --qemu --qemu-fs xfs --dry-run >/dev/null 2>&1 &&
	fail "--qemu-fs xfs accepted"

# ---- no QEMU: skip, with the reason
if [ "$(id -u)" -eq 0 ]; then
	mkdir "$work/bin"
	# one ln per folder: the first of a name wins, as on the PATH
	for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
		ln -s "$d"/* "$work/bin/" 2>/dev/null || true
	done
	rm -f "$work/bin/qemu-system-x86_64"
	rc=0
	PATH=$work/bin "$ZF_SRC_DIR/scripts/bench-qemu-fs.sh" --steady "$work/run" --fs btrfs --fill 70 \
		>"$work/skip.out" 2>&1 || rc=$?
	[ "$rc" = 77 ] || fail "without QEMU: exit $rc, not 77: $(cat "$work/skip.out")"
	grep -q 'SKIP: qemu-system-x86_64 is not installed' "$work/skip.out" ||
		fail "no SKIP message: $(cat "$work/skip.out")"
fi

# ---- the report's QEMU rows, from a made-up run
d=$work/out/dbbench-f2fs-qemu-16M_128_14-r0-f70
mkdir -p "$d"
printf 'workload=dbbench\nfs=f2fs-qemu\ngeometry=16M:128:14\nrate_mb=0\nfill=70\ndev_bytes=2147483648\ncapacity=1000000000\ninterval=10\nopts=\n' >"$d/meta"
echo 100.0 >"$d/t0"
printf '5.0 1 300000000 1000000000\n15.0 2 650000000 1000000000\n25.0 end 700000000 1000000000\n' >"$d/samples"
printf '1 fillrandom 110.0 0\n2 overwrite 120.0 0\n' >"$d/passes"
printf 'Entries:    1346153\nfillrandom   :      10.0 micros/op 4000 ops/sec 10.0 seconds 40000 operations;\n' >"$d/db-1.out"
printf 'Entries:    1346153\noverwrite    :      10.0 micros/op 3000 ops/sec 10.0 seconds 30000 operations;\n' >"$d/db-2.out"
printf 'app_bytes=1000000000\ndevice_bytes=1100000000\nconv_bytes=5000000\nresets=27\nfinishes=3\nscheduler=mq-deadline\n' >"$d/qemu.result"
# the same on btrfs with --num capped (--qemu-num-max 300000)
b=$work/out/dbbench-btrfs-qemu-16M_128_14-r0-f70
cp -r "$d" "$b"
sed -i 's/^fs=.*/fs=btrfs-qemu/' "$b/meta"
sed -i 's/^Entries: .*/Entries:    300000/' "$b"/db-*.out
python3 "$ZF_SRC_DIR/scripts/lib/steady-report.py" "$work/out" >"$work/report.out" 2>&1 ||
	fail "steady-report.py: $(cat "$work/report.out")"
md=$work/out/results.md
row() { grep -E "^\| $1 \|" "$md" | head -n 1; }
grep -q '| f2fs QEMU ZNS 16M x 128 |' "$md" || fail "no f2fs QEMU column: $(head -n 8 "$md")"
row 'write amplification' | grep -q '| 1.100 |' || fail "WA: $(row 'write amplification')"
row '  conventional namespace \(f2fs metadata\)' | grep -q '| 5 MB |' || fail "conv: $(cat "$md")"
row 'zone resets / finishes' | grep -q '| 27 / 3 |' || fail "resets: $(row 'zone resets / finishes')"
row 'I/O scheduler \(QEMU\)' | grep -q '| mq-deadline | mq-deadline |' || fail "scheduler: $(row 'I/O scheduler')"
row 'db_bench --num' | grep -q '1,346,153' || fail "num: $(row 'db_bench --num')"
row 'ops/s, overwrite passes \(IoT: all\)' | grep -q '3,000' || fail "ops: $(row 'ops/s, overwrite')"
row result | grep -qF '| result | ok (--num capped: fill 16 %) | ok |' || fail "result: $(row result)"
grep -qF '| dbbench | unthrottled | 16 % (of 16) | 70 % (of 70) |' "$md" || fail "highest fill: $(grep -A3 'Highest' "$md")"
echo "PASS: bench_steady_qemu: plan, skip without QEMU, the QEMU rows of the report"
