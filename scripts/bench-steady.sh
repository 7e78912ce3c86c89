#!/bin/bash
# Steady when nearly full (issue 47): three workloads on zonefuse's emulated
# zoned device, each on two zone geometries, without a write-rate limit (and
# once at a throttled rate), with ext4 on a loop device of the same size in
# the same run:
#   dbbench  RocksDB db_bench fillrandom, then --passes overwrite passes
#            (the settings of scripts/bench-placement.sh; every pass is its
#            own db_bench run, so each has its own latency histogram and
#            per-10-s series);
#   tenant   the same, plus fio random 4 KiB writes + fsync into a file of
#            10 % of the device on the same mount for as long as db_bench
#            runs (the database is sized 10 points lower, so that the two
#            together reach the fill);
#   iot      LevelDB IoT ingest, 8 threads x 10 sensors, 1 KiB readings; a
#            sensor keeps a window of its newest readings and every new one
#            deletes its oldest (scripts/lib/iot-window.c), until --turnover
#            times the device was written.
# The fill (--fills, percent) sizes each run: db_bench --num = fill x
# capacity / 520 bytes (bench-placement.sh's sizing; RocksDB's space
# amplification grows through the passes), the IoT window = fill x
# capacity / 1.4 (LevelDB's space with its tombstones).  Utilisation
# (valid bytes / capacity on zonefuse, df's used / size on ext4) is sampled
# every 10 s; "at 50 %" and "nearly full" are the parts of a run where it
# was within 5 points of 50 % and of its peak.  Per run: completed or not
# (and why), utilisation, zonefuse's write amplification (device bytes /
# bytes the file system accepted, from its counters) and GC bytes, ext4's
# device bytes (the loop device's), ops/s (and against ext4), p50/p99/p99.9
# foreground latency at 50 % and nearly full (db_bench: its histogram of the
# pass nearest each; IoT: of each write batch, from the 10-s intervals), the
# active/open-limit errors the daemon logged, and the highest fill each file
# system completed.  Every run also counts the bytes the applications
# handed to write(2) and friends (the wchar of this shell, which reaped
# them), so device bytes / application bytes compares the file systems on
# the same footing.  --fs can add fuse-ext4: libfuse's passthrough_ll
# example (-o writeback, as its authors run it for speed) over ext4 on the
# same loop device, what the FUSE protocol alone costs the workload.
# Writes results.md, chart.svg (per-10-s ops/s and
# utilisation over time) and every log to results/steady-DATE/.
#
# --qemu adds workload 1 (dbbench) on zonefuse, btrfs (zoned) and f2fs
# (zoned) each in its own QEMU guest on an NVMe ZNS namespace of every
# geometry (scripts/bench-qemu-fs.sh --steady, docs/qemu.md): the same
# RocksDB settings, --num rule from each fs's own capacity and passes; rows
# "zonefuse (QEMU)", "btrfs (QEMU)", "f2fs (QEMU)" beside the host's, whose
# write amplification is the namespace's bytes written / the bytes db_bench
# wrote, with f2fs's conventional namespace apart, and the zone resets and
# finishes the kernel sent.  Without QEMU or the guest kernel that part is
# skipped with a message.
#
# Needs root (tmpfs, loop device, FUSE), db_bench, fio, mkfs.ext4, a C
# compiler and libleveldb-dev (the IoT driver is built at run time), python3,
# getfattr.  Exits 77 without /dev/fuse.
# Usage: scripts/bench-steady.sh [--quick] [options]   (--help)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)
# shellcheck source=scripts/lib/zfmount.sh
. scripts/lib/zfmount.sh
# shellcheck source=scripts/lib/rocks.sh
. scripts/lib/rocks.sh
# shellcheck source=scripts/lib/fuse-ref.sh
. scripts/lib/fuse-ref.sh

quick=0
dry_run=0
workloads="dbbench tenant iot"
geoms="16M:128:14 2M:1024:256"
fills="70 80"
rate_mb=6
throttled_fill=80
passes=2
turnover=2
fses="zonefuse ext4"
interval=10
mount_opts=
build_dir=$SRC/build
results=$SRC/results
set_by_user=" "
qemu=0
qemu_fses="zonefuse btrfs f2fs"
qemu_geoms=
qemu_num_max=0
qemu_timeout=5400
qemu_accel=tcg

usage() {
	cat <<EOF
Usage: scripts/bench-steady.sh [--quick] [options]     (as root)
  --quick               512 MiB devices (16M:32:14 2M:256:64), fill 70, no
                        throttled run: one pass in minutes
  --workloads LIST      any of dbbench tenant iot [$workloads]
  --geometries LIST     ZONE_SIZE:ZONES:MAX_ACTIVE each [$geoms]
  --fills LIST          fills of the unthrottled runs, percent [$fills]
  --rate-mb N           the throttled run's write rate, MB/s (db_bench's
                        --benchmark_write_rate_limit, the IoT driver's puts;
                        the tenant then writes 1 MB/s); 0 = no throttled run [$rate_mb]
  --throttled-fill P    the throttled run's fill [$throttled_fill]
  --passes N            db_bench overwrite passes [$passes]
  --turnover N          IoT: device sizes written [$turnover]
  --fs LIST             zonefuse ext4 fuse-ext4 [$fses]
  --interval S          sample and series interval, seconds [$interval]
  -o OPTS               zonefuse mount options
  --qemu                also run dbbench in QEMU guests on an NVMe ZNS namespace
                        of each geometry (long: TCG; docs/qemu.md)
  --qemu-fs LIST        zonefuse btrfs f2fs [$qemu_fses]
  --qemu-geometries L   the guests' ZNS geometries [those of --geometries]
  --qemu-num-max N      the guests' db_bench --num at most N (0 = the rule's):
                        TCG runs ~5,000 ops/s [$qemu_num_max]
  --qemu-timeout SEC    per guest; a pass still running then is stopped and
                        the row says so [$qemu_timeout]
  --qemu-accel tcg|kvm  [$qemu_accel]
  --dry-run             check the options, print the runs planned, exit
  --build-dir DIR       [build]
  --results DIR         [results]
  -h, --help
EOF
}

while [ $# -gt 0 ]; do
	set_by_user+="$1 "
	case "$1" in
	--quick) quick=1 ;;
	--workloads) workloads=$2; shift ;;
	--geometries) geoms=$2; shift ;;
	--fills) fills=$2; shift ;;
	--rate-mb) rate_mb=$2; shift ;;
	--throttled-fill) throttled_fill=$2; shift ;;
	--passes) passes=$2; shift ;;
	--turnover) turnover=$2; shift ;;
	--fs) fses=$2; shift ;;
	--interval) interval=$2; shift ;;
	-o) mount_opts=$2; shift ;;
	--qemu) qemu=1 ;;
	--qemu-fs) qemu_fses=$2; shift ;;
	--qemu-geometries) qemu_geoms=$2; shift ;;
	--qemu-timeout) qemu_timeout=$2; shift ;;
	--qemu-num-max) qemu_num_max=$2; shift ;;
	--qemu-accel) qemu_accel=$2; shift ;;
	--dry-run) dry_run=1 ;;
	--build-dir) build_dir=$(realpath -m "$2"); shift ;;
	--results) results=$(realpath -m "$2"); shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "bench-steady: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done
if [ $quick -eq 1 ]; then
	[[ "$set_by_user" == *" --geometries "* ]] || geoms="16M:32:14 2M:256:64"
	[[ "$set_by_user" == *" --fills "* ]] || fills="70"
	[[ "$set_by_user" == *" --rate-mb "* ]] || rate_mb=0
fi
for w in $workloads; do
	case "$w" in dbbench | tenant | iot) ;; *) echo "bench-steady: unknown workload '$w'" >&2; exit 2 ;; esac
done
for f in $fses; do
	case "$f" in zonefuse | ext4 | fuse-ext4) ;; *) echo "bench-steady: unknown file system '$f'" >&2; exit 2 ;; esac
done
for f in $qemu_fses; do
	case "$f" in zonefuse | btrfs | f2fs) ;; *) echo "bench-steady: unknown QEMU file system '$f'" >&2; exit 2 ;; esac
done
case "$qemu_accel" in tcg | kvm) ;; *) echo "bench-steady: --qemu-accel takes tcg or kvm" >&2; exit 2 ;; esac
for n in $fills $throttled_fill $passes $turnover $interval $qemu_timeout; do
	[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench-steady: '$n' is not a positive number" >&2; exit 2; }
done
[[ "$rate_mb" =~ ^[0-9]+$ ]] || { echo "bench-steady: --rate-mb takes MB/s" >&2; exit 2; }
[[ "$qemu_num_max" =~ ^[0-9]+$ ]] || { echo "bench-steady: --qemu-num-max takes a number" >&2; exit 2; }
to_bytes() { numfmt --from=iec "$(tr '[:lower:]' '[:upper:]' <<<"${1%[iI][bB]}")"; }
max_dev=0
for g in $geoms $qemu_geoms; do
	IFS=: read -r zs zn za <<<"$g"
	[[ "$zn" =~ ^[1-9][0-9]*$ && "$za" =~ ^[1-9][0-9]*$ ]] ||
		{ echo "bench-steady: geometry '$g' is not ZONE_SIZE:ZONES:MAX_ACTIVE" >&2; exit 2; }
	b=$(($(to_bytes "$zs") * zn))
	[ "$b" -le "$max_dev" ] || max_dev=$b
done

msg() { echo "bench-steady: [+$(($(date +%s) - T0))s] $*" >&2; }
die() { echo "bench-steady: FAILED: $*" >&2; exit 1; }
T0=$(date +%s)

# the runs: "workload rate fill" x geometry x file system; ext4 and
# fuse-ext4 do not care about the geometry (once per device size); the QEMU rows are
# workload 1 only
plan=()
for wl in $workloads; do
	for f in $fills; do plan+=("$wl 0 $f"); done
	[ "$rate_mb" = 0 ] || plan+=("$wl $rate_mb $throttled_fill")
done
runs=()
declare -A per_size_done=()
for p in "${plan[@]}"; do
	read -r wl rate fill <<<"$p"
	for g in $geoms; do
		for fs in $fses; do
			if [ "$fs" != zonefuse ]; then
				IFS=: read -r zs zn _ <<<"$g"
				key="$fs-$wl-$rate-$fill-$(($(to_bytes "$zs") * zn))"
				[ -z "${per_size_done[$key]:-}" ] || continue
				per_size_done[$key]=1
			fi
			runs+=("$wl $fs $g $rate $fill")
		done
	done
	if [ $qemu -eq 1 ] && [ "$wl" = dbbench ]; then
		for g in ${qemu_geoms:-$geoms}; do
			for fs in $qemu_fses; do runs+=("$wl $fs-qemu $g $rate $fill"); done
		done
	fi
done
if [ $dry_run -eq 1 ]; then
	printf '%s\n' "${runs[@]}" | awk '{ printf "bench-steady: would run %s on %s, %s, %s MB/s, fill %s %%\n", $1, $2, $3, $4, $5 }'
	exit 0
fi
[ "$(id -u)" -eq 0 ] || die "needs root (tmpfs, loop device, FUSE mounts)"
[ -c /dev/fuse ] || { echo "bench-steady: SKIP: no /dev/fuse" >&2; exit 77; }
for p in db_bench fio mkfs.ext4 losetup getfattr python3 cc; do
	command -v "$p" >/dev/null || die "$p is missing (scripts/deps.sh installs it)"
done
for b in zonefuse zonefuse-emu mkfs.zonefuse; do
	[ -x "$build_dir/$b" ] || die "$build_dir/$b is not built"
done

out=$results/steady-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
work=$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/zonefuse-steady.XXXXXX")")
ram=$work/ram
mnt=$work/mnt
lower=$work/lower
mkdir "$ram" "$mnt" "$lower"
ram_mounted=0
loopdev=
zf_pid=
pt_pid=
mon_pid=
bg_pid=
qemu_pid=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	cd /
	[ -z "$mon_pid" ] || kill "$mon_pid" 2>/dev/null
	[ -z "$bg_pid" ] || { kill "$bg_pid" 2>/dev/null; wait "$bg_pid" 2>/dev/null; }
	# bench-qemu-fs.sh passes the TERM on to qemu-zns.sh, which stops QEMU
	[ -z "$qemu_pid" ] || { kill -TERM "$qemu_pid" 2>/dev/null; wait "$qemu_pid" 2>/dev/null; }
	zf_reap "$mnt"
	[ -z "$pt_pid" ] || { kill "$pt_pid" 2>/dev/null; wait "$pt_pid" 2>/dev/null; }
	! is_mounted "$lower" || umount "$lower" || umount -l "$lower"
	[ -z "$loopdev" ] || losetup -d "$loopdev"
	[ $ram_mounted -eq 0 ] || umount "$ram" || umount -l "$ram"
	rm -rf "$work"
	[ "$rc" -eq 0 ] || echo "bench-steady: FAILED (exit $rc); logs in $out" >&2
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount -t tmpfs -o size=$((max_dev + (512 << 20))) tmpfs "$ram"
ram_mounted=1
PASSTHROUGH=$work/ref/passthrough_ll
[[ " $fses " != *" fuse-ext4 "* ]] || build_fuse_ref passthrough_ll "$work/ref"
IOT=$work/iot-window
cc -std=c11 -O2 -Wall -Wextra -Werror scripts/lib/iot-window.c -lleveldb -lpthread -o "$IOT" \
	>"$out/iot-window-build.log" 2>&1 || { cat "$out/iot-window-build.log" >&2; die "cannot build scripts/lib/iot-window.c (libleveldb-dev?)"; }

rocks=("${placement_rocks[@]}" --histogram=1 --report_interval_seconds="$interval")

# sampler DIR FS: every $interval s one line "secs phase used capacity
# [user device gc free_zones buffered df_used]" (zonefuse: used = valid
# bytes, its counters, and df's used, which adds what is buffered and held
# for fallocated ranges; ext4: df), phase = the workload's part running then
sampler() {
	local d=$1 fs=$2 t0
	t0=$(date +%s.%N)
	while :; do
		local t ph line
		t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
		ph=$(cat "$d/phase" 2>/dev/null || echo -)
		if [ "$fs" = zonefuse ]; then
			line=$(zf_stats "$mnt" | awk -F= '{ v[$1] = $2 } END {
				if (v["capacity_bytes"]) printf "%s %s %s %s %s %s %s ", v["valid_bytes"], v["capacity_bytes"],
					v["user_bytes_written"], v["zdev_bytes_written"] ? v["zdev_bytes_written"] : v["device_bytes_written"],
					v["gc_bytes_written"], v["free_zones"], v["buffer_bytes"] }')
			[ -z "$line" ] || line="$line$(df -B1 --output=used "$mnt" | tail -n 1)"
		else
			line=$(df -B1 --output=used,size "$mnt" | tail -n 1)
		fi
		[ -z "$line" ] || echo "$t $ph $line"
		sleep "$interval"
	done
}

# mount_fs FS GEOMETRY LOGDIR: a fresh file system at $mnt; sets dev to
# the device's bytes
mount_fs() {
	local zs zn za
	IFS=: read -r zs zn za <<<"$2"
	dev=$(($(to_bytes "$zs") * zn))
	if [ "$1" = zonefuse ]; then
		zf_up "$ram/zoned.img" "$mnt" "$3/zonefuse.log" "$zs" "$zn" "$za" "$mount_opts" ||
			die "zonefuse did not mount ($3/zonefuse.log)"
	else
		local at=$mnt
		[ "$1" = ext4 ] || at=$lower
		truncate -s "$dev" "$ram/ext4.img"
		mkfs.ext4 -F -q "$ram/ext4.img"
		loopdev=$(losetup --find --show "$ram/ext4.img")
		mount "$loopdev" "$at"
		[ "$1" = fuse-ext4 ] || return 0
		"$PASSTHROUGH" -f -o writeback -o "source=$lower" "$mnt" >"$3/passthrough.log" 2>&1 &
		pt_pid=$!
		mounted_by "$mnt" "$pt_pid" || die "passthrough_ll did not mount ($3/passthrough.log)"
	fi
}

# umount_fs FS LOGDIR: unmount, check the daemon, remove the device
umount_fs() {
	if [ "$1" = zonefuse ]; then
		local st=0
		zf_down "$mnt" || st=$?
		[ "$st" -eq 0 ] || echo "daemon exit status $st" >>"$2/failed"
		if [ -x "$build_dir/fsck.zonefuse" ]; then
			"$build_dir/fsck.zonefuse" "$ram/zoned.img" >"$2/fsck.log" 2>&1 || echo "fsck failed" >>"$2/failed"
		fi
		rm -f "$ram/zoned.img"
	else
		if [ "$1" = fuse-ext4 ]; then
			fusermount3 -u "$mnt" || umount -l "$mnt"
			wait "$pt_pid" || echo "passthrough_ll exit status $?" >>"$2/passthrough.log"
			pt_pid=
		fi
		local kb=/sys/fs/ext4/${loopdev#/dev/}/session_write_kbytes
		[ ! -r "$kb" ] || echo "$(($(cat "$kb") * 1024))" >"$2/ext4_dev_bytes"
		umount "$([ "$1" = ext4 ] && echo "$mnt" || echo "$lower")"
		losetup -d "$loopdev"
		loopdev=
		rm -f "$ram/ext4.img"
	fi
}

# wchar: bytes this shell and the children it reaped passed to write(2) and
# friends (the kernel adds a reaped child's counters to its parent's): the
# workload's application bytes, plus the few KB the sampler and the output
# pipes write
wchar() { awk '$1 == "wchar:" { print $2 }' "/proc/$$/io"; }

# capacity FS: bytes the file system can hold
capacity() {
	if [ "$1" = zonefuse ]; then
		zf_stats "$mnt" "$work/st"
		stat_of "$work/st" capacity_bytes
	else
		df -B1 --output=size "$mnt" | tail -n 1
	fi
}

# run_db DIR RATE FILL_BYTES: the db_bench passes, one run each
run_db() {
	local d=$1 rate=$2 num=$(($3 / 520)) k=0 b st
	local args=("${rocks[@]}" --num="$num" --benchmark_write_rate_limit=$((rate * 1000000)))
	for b in fillrandom $(for ((p = 0; p < passes; p++)); do echo overwrite; done); do
		k=$((k + 1))
		echo "$k" >"$d/phase"
		local more=()
		[ "$b" = fillrandom ] || more=(--use_existing_db=1)
		st=0
		db_bench --db="$mnt/db" --benchmarks="$b" "${args[@]}" "${more[@]}" \
			--report_file="$d/report-$k.csv" 2>&1 | tr '\r' '\n' | grep -v '^\.\.\. finished' >"$d/db-$k.out" ||
			st=${PIPESTATUS[0]}
		echo "$k $b $(date +%s.%N) $st" >>"$d/passes"
		if [ "$st" -ne 0 ] || grep -qE 'Corruption|IO error|No space' "$d/db-$k.out"; then
			grep -hE 'Corruption|IO error|No space|rror' "$d/db-$k.out" | head -n 3 >>"$d/failed" || true
			[ -s "$d/failed" ] || echo "db_bench $b exit $st" >>"$d/failed"
			return 0
		fi
	done
}

# run_one WORKLOAD FS GEOMETRY RATE FILL
run_one() {
	local wl=$1 fs=$2 geom=$3 rate=$4 fill=$5 dev cap
	local d=$out/$wl-$fs-${geom//:/_}-r$rate-f$fill
	mkdir -p "$d"
	mount_fs "$fs" "$geom" "$d"
	cap=$(capacity "$fs")
	[ "$fs" != zonefuse ] || zf_stats "$mnt" "$d/stats0"
	printf 'workload=%s\nfs=%s\ngeometry=%s\nrate_mb=%s\nfill=%s\ndev_bytes=%s\ncapacity=%s\ninterval=%s\nopts=%s\n' \
		"$wl" "$fs" "$geom" "$rate" "$fill" "$dev" "$cap" "$interval" "$mount_opts" >"$d/meta"
	echo 0 >"$d/phase"
	msg "$wl on $fs ($geom, ${rate:-0} MB/s, fill $fill %, load $(cut -d' ' -f1 /proc/loadavg))"
	sampler "$d" "$fs" >"$d/samples" &
	mon_pid=$!
	date +%s.%N >"$d/t0"
	local wchar0
	wchar0=$(wchar)
	case "$wl" in
	dbbench) run_db "$d" "$rate" $((fill * cap / 100)) ;;
	tenant)
		local frate=()
		[ "$rate" = 0 ] || frate=(--rate=1m)
		fio --name=tenant --filename="$mnt/tenant" --size=$((dev / 10 / 4096 * 4096)) --rw=randwrite \
			--bs=4k --fsync=1 --ioengine=sync --time_based --runtime=86400 --randrepeat=0 \
			--fallocate=none --write_bw_log="$d/tenant" --log_avg_msec=$((interval * 1000)) \
			"${frate[@]}" --output-format=json --output="$d/fio.json" >"$d/fio.log" 2>&1 &
		bg_pid=$!
		run_db "$d" "$rate" $(((fill - 10) * cap / 100))
		kill -INT "$bg_pid" 2>/dev/null || true
		wait "$bg_pid" || echo "fio tenant: exit $?" >>"$d/fio.log"
		bg_pid=
		grep -q '"error" : [1-9]' "$d/fio.json" 2>/dev/null && echo "fio tenant: I/O error" >>"$d/failed"
		;;
	iot)
		echo 1 >"$d/phase"
		local st=0 irate=()
		[ "$rate" = 0 ] || irate=(--rate-mb "$rate")
		"$IOT" --db "$mnt/iot" --window-bytes $((fill * cap / 140)) --total-bytes $((turnover * dev)) \
			--interval "$interval" "${irate[@]}" >"$d/iot.out" 2>"$d/iot.err" || st=$?
		[ "$st" -eq 0 ] || { grep '^done' "$d/iot.out" | cut -d' ' -f5- >>"$d/failed"; echo "iot-window exit $st" >>"$d/failed"; }
		;;
	esac
	echo end >"$d/phase"
	sleep 1
	kill "$mon_pid" 2>/dev/null; wait "$mon_pid" 2>/dev/null || true
	mon_pid=
	echo $(($(wchar) - wchar0)) >"$d/app_bytes"
	[ "$fs" != zonefuse ] || zf_stats "$mnt" "$d/stats"
	rm -rf "${mnt:?}"/* 2>/dev/null || true
	umount_fs "$fs" "$d"
	if [ -f "$d/failed" ]; then msg "  not completed: $(head -n 1 "$d/failed")"; else msg "  completed"; fi
}

# run_qemu FS GEOMETRY RATE FILL: workload 1 in a QEMU guest
# (scripts/bench-qemu-fs.sh --steady); its exit 77 (QEMU, the kernel or a
# mkfs missing) skips this and, unless only the mkfs was missing, every
# later QEMU run
qemu_skip=
run_qemu() {
	local fs=$1 geom=$2 rate=$3 fill=$4 st=0
	local d=$out/dbbench-$fs-qemu-${geom//:/_}-r$rate-f$fill
	if [ -n "$qemu_skip" ]; then msg "SKIP dbbench on $fs in QEMU: $qemu_skip"; return 0; fi
	msg "dbbench on $fs in QEMU ($qemu_accel, ZNS $geom, fill $fill %, load $(cut -d' ' -f1 /proc/loadavg))"
	ZF_QEMU_ACCEL=$qemu_accel scripts/bench-qemu-fs.sh --steady "$d" --fs "$fs" --fill "$fill" \
		--passes "$passes" --rate-mb "$rate" --interval "$interval" --geometry "$geom" \
		--timeout "$qemu_timeout" --num-max "$qemu_num_max" --build-dir "$build_dir" ${mount_opts:+-o "$mount_opts"} \
		>"$out/qemu-$fs-${geom//:/_}-f$fill.log" 2>&1 &
	qemu_pid=$!
	wait "$qemu_pid" || st=$?
	qemu_pid=
	if [ "$st" -eq 77 ]; then
		local why
		why=$(grep -m1 'SKIP' "$out/qemu-$fs-${geom//:/_}-f$fill.log" | sed 's/.*SKIP: //')
		msg "SKIP dbbench on $fs in QEMU: $why"
		case "$why" in mkfs.*) ;; *) qemu_skip=$why ;; esac
		rm -rf "$d"
		return 0
	fi
	[ "$st" -eq 0 ] || echo "bench-qemu-fs.sh --steady exit $st" >>"$d/failed"
	if [ -f "$d/failed" ]; then msg "  not completed: $(head -n 1 "$d/failed")"; else msg "  completed"; fi
}

for r in "${runs[@]}"; do
	read -r wl fs g rate fill <<<"$r"
	case "$fs" in
	*-qemu) run_qemu "${fs%-qemu}" "$g" "$rate" "$fill" ;;
	*) run_one "$wl" "$fs" "$g" "$rate" "$fill" ;;
	esac
done

git_rev=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$SRC" diff --quiet HEAD 2>/dev/null || git_rev="$git_rev (with local changes)"
STEADY_META="git $git_rev; $(nproc) CPUs; load at end $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - T0)) s" \
	python3 scripts/lib/steady-report.py "$out"
msg "done: $out/results.md, chart.svg"
