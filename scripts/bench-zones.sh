#!/bin/bash
# Zone count and fsync cost.
#
# Part "zones": does a request cost more on a device cut into more zones?
# One emulated device of one size (default 16 GiB, a sparse file on a
# tmpfs), formatted with different zone geometries (default 256 x 64 MiB,
# 1,024 x 16 MiB, 16,384 x 1 MiB, 65,536 x 256 KiB), each mounted with
# the same options
# and written by fio: random 4 KiB writes with an fsync after each
# (psync, one job, time-based).  The geometries alternate within each of
# --reps rounds; the median of the rounds is printed, with each row's
# ratio to the first geometry (the issue's target: >= 0.95), the
# daemon's CPU time per write (utime + stime of all its threads over the
# fio run / writes: steadier than MiB/s on a shared machine), the time
# from starting the daemon to the mount being there, and the daemon's
# peak RSS (VmHWM in /proc/PID/status, read after the fio run).  The same
# stripe_unit (256 KiB, the largest the smallest zone allows) is used for
# every geometry, so that only the zone count differs.
#
# Part "sync": the cost of an fsync.  zonefuse on the first geometry (and
# the build given by --base, for before/after in one run) against ext4 on
# a loop device over the same tmpfs: fio random 4 KiB writes + fsync, the
# same + fdatasync, and db_bench fillrandom --sync=1 (--dbnum keys),
# targets alternating, median of --reps.
#
# Part "files": does a request cost more with more files?  On the first
# geometry, --files TABLES counts (default 1,000 and 64,000): one thread
# writes that many 4 KiB tables (*.sst) into a directory, which stay; then,
# --churn times, a second thread creates a table, a third creates one and
# unlinks the two made 500 iterations before (scripts/lib/tables-churn.py):
# for the daemon's level inference each iteration is a compaction job of
# one input and one output, the most jobs per file there can be, and each
# churned table lives as long whatever N is.  Iterations per second,
# median of --reps alternating rounds, each row's ratio to the first (the
# issue's target: >= 0.95); with --base, that build's rows too.
#
# Part "extents": does a write cost more in a file of more extents?  On
# the first geometry, a file of --ext-size (default 2 GiB) is written
# sequentially in 1 MiB writes ("seq": one extent per stripe unit), or
# that and then every 8 KiB of it once more in random order with
# O_DIRECT ("aged": about one extent per 8 KiB; not timed).  Then fio
# writes --ext-io (default 128 MiB) of random 4 KiB O_DIRECT writes into
# it (psync, an fsync at the end), the same requests for both layouts,
# each cutting an extent in two or three (an insert into the map).
# MiB/s and the daemon's CPU time per write, median of --reps
# alternating rounds, the ratio of "aged" to "seq" (the issue's target:
# >= 0.95), the file's extents before the timed writes
# (user.zonefuse.file); with --base, that build's rows too.
#
# Needs root and /dev/fuse (exit 77 without them).
# Usage: scripts/bench-zones.sh [--part zones|sync|files|extents|all] [--size 16G]
#          [--geoms "64M:256 16M:1024 1M:16384 256K:65536"] [--reps 3] [--fio-size 512m]
#          [--runtime 10] [--dir DIR] [--opts O] [--base BUILDDIR] [--dbnum 20000]
#          [--files "1000 64000"] [--churn 5000] [--ext-size 2g] [--ext-io 128m]
#   --geoms    ZONE_SIZE:COUNT pairs, the first is the reference
#   --dir      where the device files live (default: a tmpfs of our own)
#   --opts     extra zonefuse mount options
#   --base     also run this build's zonefuse (e.g. main's), as "base"
#   --files    table counts for part "files", the first is the reference
#   --churn    iterations per run of part "files"
#   --ext-size the file's size in part "extents"
#   --ext-io   bytes of timed random writes per run of part "extents"
#   ZF_BUILD_DIR=DIR runs the binaries of another build.
set -euo pipefail
cd "$(dirname "$0")/.."
size=16G
geoms="64M:256 16M:1024 1M:16384 256K:65536"
reps=3
fio_size=512m
runtime=10
dir=
opts=
part=all
base=
dbnum=20000
files="1000 64000"
churn=5000
ext_size=2g
ext_io=128m
while [ $# -gt 0 ]; do
	case $1 in
	--part) part=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--geoms) geoms=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--fio-size) fio_size=$2; shift 2 ;;
	--runtime) runtime=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--opts) opts=$2; shift 2 ;;
	--base) base=$2; shift 2 ;;
	--dbnum) dbnum=$2; shift 2 ;;
	--files) files=$2; shift 2 ;;
	--churn) churn=$2; shift 2 ;;
	--ext-size) ext_size=$2; shift 2 ;;
	--ext-io) ext_io=$2; shift 2 ;;
	-h|--help) sed -n '2,63p' "$0"; exit 0 ;;
	*) echo "bench-zones: unknown option $1" >&2; exit 2 ;;
	esac
done
case $part in zones | sync | files | extents | all) ;; *) echo "bench-zones: --part zones|sync|files|extents|all" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "bench-zones: SKIP: needs root (FUSE mounts)" >&2; exit 77; }
[ -c /dev/fuse ] || { echo "bench-zones: SKIP: no /dev/fuse" >&2; exit 77; }
need=(fio fusermount3 python3 numfmt)
case $part in extents | all) need+=(getfattr) ;; esac
case $part in sync | all) need+=(db_bench mkfs.ext4 losetup) ;; esac
for p in "${need[@]}"; do
	command -v "$p" >/dev/null || { echo "bench-zones: SKIP: $p missing" >&2; exit 77; }
done
B=${ZF_BUILD_DIR:-build}
[ -x "$B/zonefuse" ] || meson setup "$B" --buildtype=release >/dev/null
ninja -C "$B" >/dev/null
[ -z "$base" ] || [ -x "$base/zonefuse" ] || { echo "bench-zones: no $base/zonefuse" >&2; exit 2; }

to_bytes() { numfmt --from=iec "$(tr '[:lower:]' '[:upper:]' <<<"$1")"; }
dev_bytes=$(to_bytes "$size")
work=$(mktemp -d /tmp/zf-zones.XXXXXX)
mnt=$work/mnt
ram=
mkdir -p "$mnt"
if [ -z "$dir" ]; then
	ram=$work/ram
	mkdir "$ram"
	# sparse files: only what is written takes memory
	mount -t tmpfs -o size=$((dev_bytes + (2 << 30))) tmpfs "$ram"
	dir=$ram
fi
img=$dir/zf-zones-$$.img
pid=
loopdev=
cleanup() {
	set +e
	if mountpoint -q "$mnt"; then fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" || umount -l "$mnt"; fi
	[ -z "$pid" ] || { for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done; kill -9 "$pid" 2>/dev/null; }
	[ -z "$loopdev" ] || losetup -d "$loopdev"
	rm -f "$img" "$img.ext4"
	[ -z "$ram" ] || umount "$ram" || umount -l "$ram"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_opts=stripe_unit=262144${opts:+,$opts}
mount_ms=0

mount_zf() { # build zone_size count: sets pid and mount_ms
	local b=$1 zs=$2 nz=$3 t0 t1
	"$b/zonefuse-emu" create "$img" --zone-size "$zs" --zones "$nz" --max-open 14 \
		--max-active 14 --force >/dev/null
	"$b/mkfs.zonefuse" "$img" >"$work/mkfs.log" 2>&1 ||
		{ cat "$work/mkfs.log" >&2; return 1; }
	t0=$(date +%s%N)
	"$b/zonefuse" "$img" "$mnt" -f -o "$mount_opts" >"$work/daemon.log" 2>&1 &
	pid=$!
	for _ in $(seq 1500); do mountpoint -q "$mnt" && break; sleep 0.01; done
	t1=$(date +%s%N)
	mountpoint -q "$mnt" || { cat "$work/daemon.log" >&2; return 1; }
	mount_ms=$(((t1 - t0) / 1000000))
}

umount_zf() { # the daemon must exit 0 and log no error
	local st=0
	fusermount3 -u "$mnt"
	wait "$pid" || st=$?
	pid=
	[ "$st" -eq 0 ] || { tail -n 20 "$work/daemon.log" >&2; echo "bench-zones: daemon exited $st" >&2; return 1; }
	if grep -qi 'error:' "$work/daemon.log"; then
		grep -i 'error:' "$work/daemon.log" | head -n 5 >&2
		echo "bench-zones: the daemon logged errors" >&2
		return 1
	fi
	rm -f "$img"
}

mount_ext4() {
	truncate -s "$dev_bytes" "$img.ext4"
	mkfs.ext4 -F -q "$img.ext4"
	loopdev=$(losetup --find --show "$img.ext4")
	mount "$loopdev" "$mnt"
}

umount_ext4() {
	umount "$mnt"
	losetup -d "$loopdev"
	loopdev=
	rm -f "$img.ext4"
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }

us_per() { # ticks before, ticks after, count: the daemon's CPU us per one
	echo $((($2 - $1) * 1000000 / $(getconf CLK_TCK) / ($3 ? $3 : 1)))
}

fio_write_result() { # prints write MiB/s and writes done of $work/fio.json
	python3 -c 'import json,sys; w=json.load(open(sys.argv[1]))["jobs"][0]["write"]; print("%.1f %d" % (w["bw"] / 1024, w["total_ios"]))' "$work/fio.json"
}

fio_randwrite() { # sync option (fsync|fdatasync): prints write MiB/s and writes done
	fio --name=zones --directory="$mnt" --rw=randwrite --bs=4k --size="$fio_size" \
		--ioengine=psync --"$1"=1 --time_based --runtime="$runtime" \
		--output-format=json --output="$work/fio.json" >/dev/null
	fio_write_result
}

dbbench_sync() { # prints fillrandom ops/s
	db_bench --db="$mnt/db" --benchmarks=fillrandom --num="$dbnum" --value_size=400 \
		--sync=1 --compression_type=none >"$work/db.txt" 2>&1 ||
		{ tail -n 5 "$work/db.txt" >&2; return 1; }
	awk '/^fillrandom/ { for (i = 1; i <= NF; i++) if ($(i + 1) ~ /^ops\/sec/) { print $i; exit } }' "$work/db.txt"
	rm -rf "$mnt/db"
}

read -r -a G <<<"$geoms"
ordered() { # round, items...: the items, reversed in even rounds (the machine is shared)
	local r=$1 i
	shift
	local a=("$@")
	if ((r % 2)); then echo "${a[@]}"; else for ((i = ${#a[@]} - 1; i >= 0; i--)); do printf '%s ' "${a[i]}"; done; echo; fi
}

part_zones() {
	local res=$work/zones.tsv r g zs nz bw hwm c0 c1 ios us
	: >"$res"
	for ((r = 1; r <= reps; r++)); do
		for g in $(ordered "$r" "${G[@]}"); do
			zs=${g%%:*} nz=${g##*:}
			[ $(($(to_bytes "$zs") * nz)) -eq "$dev_bytes" ] ||
				echo "bench-zones: note: $nz x $zs is not $size" >&2
			mount_zf "$B" "$zs" "$nz"
			c0=$(cpu_ticks)
			read -r bw ios < <(fio_randwrite fsync)
			c1=$(cpu_ticks)
			us=$(us_per "$c0" "$c1" "$ios")
			hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
			umount_zf
			printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$g" "$r" "$bw" "$mount_ms" "$hwm" "$us" >>"$res"
			echo "bench-zones: round $r, $nz x $zs: $bw MiB/s, $us us CPU/write, mount $mount_ms ms, VmHWM $((hwm >> 10)) MiB (load $(cut -d' ' -f1 /proc/loadavg))" >&2
		done
	done
	python3 - "$res" "$geoms" "$reps" "$fio_size" "$runtime" <<'EOF'
import statistics, sys
res, geoms, reps, fsz, rt = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(res) if l.strip()]
print(f"zone count: fio randwrite 4 KiB + fsync per write, {fsz} file, {rt} s, "
      f"median of {reps} alternating rounds; ratios to the first row (MiB/s over its, its CPU/write over ours)")
print(f"{'geometry':>16} {'MiB/s':>8} {'ratio':>6} {'us CPU/write':>13} {'ratio':>6} {'mount ms':>9} {'VmHWM MiB':>10}  runs (MiB/s)")
ref = cref = None
for g in geoms.split():
    r = [x for x in rows if x[0] == g]
    bw = statistics.median(float(x[2]) for x in r)
    mt = statistics.median(int(x[3]) for x in r)
    hwm = statistics.median(int(x[4]) for x in r) / 1024
    cpu = statistics.median(int(x[5]) for x in r)
    ref = ref or bw
    cref = cref or cpu
    zs, nz = g.split(":")
    print(f"{nz + ' x ' + zs:>16} {bw:8.1f} {bw / ref:6.2f} {cpu:13.0f} {cref / cpu if cpu else 0:6.2f} {mt:9.0f} {hwm:10.1f}  "
          + " ".join(x[2] for x in r))
EOF
}

part_sync() {
	local res=$work/sync.tsv r t zs=${G[0]%%:*} nz=${G[0]##*:} a b c
	local targets=(zonefuse ext4)
	[ -z "$base" ] || targets=(zonefuse base ext4)
	: >"$res"
	for ((r = 1; r <= reps; r++)); do
		for t in $(ordered "$r" "${targets[@]}"); do
			case $t in
			zonefuse) mount_zf "$B" "$zs" "$nz" ;;
			base) mount_zf "$base" "$zs" "$nz" ;;
			ext4) mount_ext4 ;;
			esac
			a=$(fio_randwrite fsync | cut -d' ' -f1)
			b=$(fio_randwrite fdatasync | cut -d' ' -f1)
			c=$(dbbench_sync)
			if [ "$t" = ext4 ]; then umount_ext4; else umount_zf; fi
			printf '%s\t%s\t%s\t%s\t%s\n' "$t" "$r" "$a" "$b" "$c" >>"$res"
			echo "bench-zones: round $r, $t: fsync $a MiB/s, fdatasync $b MiB/s, db_bench --sync=1 $c ops/s (load $(cut -d' ' -f1 /proc/loadavg))" >&2
		done
	done
	python3 - "$res" "$reps" "$fio_size" "$runtime" "$dbnum" "${G[0]}" <<'EOF'
import statistics, sys
res, reps, fsz, rt, dbnum, geo = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(res) if l.strip()]
tg = []
for x in rows:
    if x[0] not in tg:
        tg.append(x[0])
med = {t: [statistics.median(float(x[k]) for x in rows if x[0] == t) for k in (2, 3, 4)] for t in tg}
print(f"fsync cost ({geo.split(':')[1]} x {geo.split(':')[0]} zones; ext4 on a loop device over the same tmpfs), "
      f"median of {reps} alternating rounds; ratio = / ext4")
print(f"{'target':>10} {'fio+fsync MiB/s':>16} {'ratio':>6} {'fio+fdatasync':>14} {'ratio':>6} {'db_bench --sync=1 ops/s':>24} {'ratio':>6}")
e = med.get("ext4")
for t in tg:
    m = med[t]
    rs = [m[k] / e[k] if e and e[k] else float("nan") for k in range(3)]
    print(f"{t:>10} {m[0]:16.1f} {rs[0]:6.2f} {m[1]:14.1f} {rs[1]:6.2f} {m[2]:24.0f} {rs[2]:6.2f}")
EOF
}

part_files() {
	local res=$work/files.tsv r t n it secs zs=${G[0]%%:*} nz=${G[0]##*:}
	local targets=(zonefuse) items=()
	[ -z "$base" ] || targets=(zonefuse base)
	for t in "${targets[@]}"; do for n in $files; do items+=("$t:$n"); done; done
	: >"$res"
	for ((r = 1; r <= reps; r++)); do
		for it in $(ordered "$r" "${items[@]}"); do
			t=${it%%:*} n=${it##*:}
			if [ "$t" = base ]; then mount_zf "$base" "$zs" "$nz"; else mount_zf "$B" "$zs" "$nz"; fi
			mkdir "$mnt/db"
			secs=$(python3 scripts/lib/tables-churn.py "$mnt/db" "$n" "$churn" | cut -d' ' -f2)
			umount_zf
			printf '%s\t%s\t%s\t%s\n' "$t" "$n" "$r" "$(python3 -c "print('%.0f' % ($churn / max($secs, 1e-6)))")" >>"$res"
			echo "bench-zones: round $r, $t, $n tables: $(tail -n 1 "$res" | cut -f4) iterations/s (load $(cut -d' ' -f1 /proc/loadavg))" >&2
		done
	done
	python3 - "$res" "$reps" "$churn" "${G[0]}" <<'EOF'
import statistics, sys
res, reps, churn, geo = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(res) if l.strip()]
print(f"file count: {churn} x (an input table, an output table, unlink the pair of 500 before), "
      f"with N other tables ({geo.split(':')[1]} x {geo.split(':')[0]} zones); median of {reps} alternating rounds; "
      f"ratio to the target's first row")
print(f"{'target':>10} {'tables':>8} {'iterations/s':>13} {'ratio':>6}  runs")
for t in dict.fromkeys(x[0] for x in rows):
    ref = None
    for n in dict.fromkeys(x[1] for x in rows if x[0] == t):
        r = [float(x[3]) for x in rows if x[0] == t and x[1] == n]
        m = statistics.median(r)
        ref = ref or m
        print(f"{t:>10} {int(n):8d} {m:13.0f} {m / ref:6.2f}  " + " ".join(f"{v:.0f}" for v in r))
EOF
}

part_extents() {
	local res=$work/extents.tsv r t lay it zs=${G[0]%%:*} nz=${G[0]##*:} bw ios c0 c1 us n
	local targets=(zonefuse) items=()
	[ -z "$base" ] || targets=(zonefuse base)
	for t in "${targets[@]}"; do for lay in seq aged; do items+=("$t:$lay"); done; done
	: >"$res"
	for ((r = 1; r <= reps; r++)); do
		for it in $(ordered "$r" "${items[@]}"); do
			t=${it%%:*} lay=${it##*:}
			if [ "$t" = base ]; then mount_zf "$base" "$zs" "$nz"; else mount_zf "$B" "$zs" "$nz"; fi
			fio --name=fill --filename="$mnt/f" --rw=write --bs=1m --size="$ext_size" \
				--ioengine=psync --end_fsync=1 >/dev/null
			[ "$lay" = seq ] || fio --name=age --filename="$mnt/f" --rw=randwrite --bs=8k --direct=1 \
				--size="$ext_size" --ioengine=psync --end_fsync=1 >/dev/null
			n=$(getfattr --only-values -n user.zonefuse.file "$mnt/f" | awk -F= '$1 == "extents" { print $2 }')
			c0=$(cpu_ticks)
			fio --name=rand --filename="$mnt/f" --rw=randwrite --bs=4k --size="$ext_size" \
				--io_size="$ext_io" --direct=1 --ioengine=psync --end_fsync=1 \
				--output-format=json --output="$work/fio.json" >/dev/null
			c1=$(cpu_ticks)
			read -r bw ios < <(fio_write_result)
			us=$(us_per "$c0" "$c1" "$ios")
			umount_zf
			printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$lay" "$r" "$bw" "$us" "$n" >>"$res"
			echo "bench-zones: round $r, $t, $lay file: $bw MiB/s, $us us CPU/write, $n extents before (load $(cut -d' ' -f1 /proc/loadavg))" >&2
		done
	done
	python3 - "$res" "$reps" "$ext_io" "$ext_size" "${G[0]}" <<'EOF'
import statistics, sys
res, reps, io, size, geo = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(res) if l.strip()]
print(f"extent count: fio randwrite 4 KiB O_DIRECT, {io} into a {size} file written sequentially "
      f"(seq) or then rewritten 8 KiB at a time in random order (aged) ({geo.split(':')[1]} x {geo.split(':')[0]} zones); "
      f"median of {reps} alternating rounds; ratios to the target's seq row (MiB/s over its, its CPU/write over ours)")
print(f"{'target':>10} {'layout':>7} {'extents':>9} {'MiB/s':>8} {'ratio':>6} {'us CPU/write':>13} {'ratio':>6}  runs (MiB/s)")
for t in dict.fromkeys(x[0] for x in rows):
    ref = cref = None
    for lay in ("seq", "aged"):
        r = [x for x in rows if x[0] == t and x[1] == lay]
        if not r:
            continue
        bw = statistics.median(float(x[3]) for x in r)
        cpu = statistics.median(int(x[4]) for x in r)
        n = statistics.median(int(x[5] or 0) for x in r)
        ref = ref or bw
        cref = cref or cpu
        print(f"{t:>10} {lay:>7} {n:9.0f} {bw:8.1f} {bw / ref:6.2f} {cpu:13.0f} {cref / cpu if cpu else 0:6.2f}  "
              + " ".join(x[3] for x in r))
EOF
}

case $part in zones | all) part_zones ;; esac
case $part in sync | all) part_sync ;; esac
case $part in files | all) part_files ;; esac
case $part in extents | all) part_extents ;; esac
