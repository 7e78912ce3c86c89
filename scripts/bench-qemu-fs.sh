#!/bin/bash
# zonefuse next to the kernel's zoned file systems (btrfs, f2fs) on the same
# emulated NVMe ZNS device and the same db_bench workload, each in its own
# QEMU guest (scripts/qemu-zns.sh, Debian's 6.1 kernel, TCG).
#
#   scripts/bench-qemu-fs.sh [options]
#
# Device: 128 zones of 16 MiB (2 GiB), max open = max active = 14, plus a
# 64 MiB conventional namespace /dev/nvme0n2 (f2fs keeps its metadata there;
# the others leave it alone).  For every file system and fill level:
#   mkfs, mount; at a fill level F > 0 a filler file of F % of the size the
#   file system reports (statfs) minus what is already used is written from
#   /dev/zero and fsync'ed; then
#   db_bench --benchmarks=fillrandom,overwrite,waitforcompaction --num=N
#     --value_size=400 --bytes_per_sync=1048576 --wal_bytes_per_sync=1048576
#     --compression_type=none --statistics
#   then sync and unmount.  Measured over db_bench + sync + unmount only:
#   - app bytes: bytes db_bench passed to write(2) and friends (the wchar of
#     /proc/PID/io, all threads, minus its stdout), the same for every fs;
#   - device bytes: sectors written to /dev/nvme0n1 (/sys/block/.../stat,
#     x 512), plus /dev/nvme0n2 shown apart (f2fs metadata);
#   - zone resets and finishes: zone management send commands (opcode 0x79;
#     zsa 4 = reset, 2 = finish) from the tracefs event nvme/nvme_setup_cmd,
#     filtered to that opcode;
#   - completed: db_bench exit 0, no error in its output, no I/O error on the
#     zoned device in the kernel log.
# Prints a side-by-side table and writes it (with every run's raw output) to
# results/qemu-fs-YYYYmmdd-HHMMSS/ (table.md, FS-FILL.{result,dbbench,console}).
#
# Options:
#   --fs "LIST"        file systems, from zonefuse btrfs f2fs (all three)
#   --fill "LIST"      fill levels in percent (0 80)
#   --num N            db_bench --num (300000)
#   --build-dir DIR    zonefuse build folder (build/)
#   --out DIR          result folder (results/qemu-fs-<time>)
#   --timeout SEC      per guest (5400); db_bench itself is stopped 300 s
#                      earlier so the counters are still collected
#   -o OPTS            more zonefuse mount options (zf_verbose is always on)
#   --table DIR        only print the table of an earlier result folder
# Steady mode (what scripts/bench-steady.sh --qemu runs, one guest):
#   --steady DIR       bench-steady's workload 1 on --fs FS (one of the three)
#                      in one guest; DIR gets bench-steady's run files
#                      (guest_steady below).  With --fill P (one level),
#                      --passes N (2), --rate-mb R (0), --interval S (10),
#                      --geometry ZONE_SIZE:ZONES:MAX_ACTIVE (16M:128:14),
#                      --num-max N (0 = no limit: --num at most N, for TCG).
#                      The zoned namespace's I/O scheduler: mq-deadline for
#                      btrfs and f2fs (6.1 needs its zone write lock to
#                      keep a zone's writes in order), none (the kernel's
#                      choice for NVMe) for zonefuse; ZF_BENCH_SCHED=S
#                      overrides.
#                      Never installs packages: exits 77 with a message when
#                      QEMU, the kernel or the fs's mkfs is missing.
# Needs root (scripts/qemu-zns.sh).  A run that fails (ENOSPC, I/O error,
# timeout) is reported as not completed; the script exits 0 when every run
# produced a result.
set -euo pipefail

# ---- guest side: scripts/bench-qemu-fs.sh --guest FS FILL NUM OUTDIR --------
guest() {
	local fs=$1 fill=$2 num=$3 out=$4 zfopts=${5:-}
	local B=${ZF_BUILD_DIR:?} DEV=/dev/nvme0n1 CONV=/dev/nvme0n2 MNT=/mnt/bench
	local R=$out/$fs-$fill T=/sys/kernel/tracing zpid=
	: >"$R.result"
	res() { echo "$1=$2" >>"$R.result"; }
	note() { echo "[bench $fs $fill% +${SECONDS}s] $*"; }
	sectors() { awk '{ print $7 }' "/sys/block/$1/stat"; }
	zstats() { getfattr --only-values -n user.zonefuse.stats "$MNT" 2>/dev/null; }
	zkey() { awk -F= -v k="$2" '$1 == k { v = $2 } END { print v + 0 }' <<<"$1"; }
	failed() { res completed no; res error "$1"; note "FAILED: $1"; finish_trace; exit 0; }
	finish_trace() {
		echo 0 >"$T/events/nvme/nvme_setup_cmd/enable"
		grep -v '^#' "$T/trace" >"$R.trace" || true
		cp "$R.trace" /tmp/trace.txt
		res resets "$(grep -c 'zsa=4' /tmp/trace.txt || true)"
		res finishes "$(grep -c 'zsa=2' /tmp/trace.txt || true)"
		res zone_mgmt_other "$(grep 'zsa=' /tmp/trace.txt | grep -vc 'zsa=[24],' || true)"
		res trace_overrun "$(cat "$T"/per_cpu/cpu*/stats | awk '/^overrun:/ { s += $2 } END { print s + 0 }')"
	}

	mkdir -p "$MNT"
	mountpoint -q "$T" || mount -t tracefs nodev "$T"
	res fs "$fs"
	res fill "$fill"
	res num "$num"
	res kernel "$(uname -r)"
	local q=/sys/block/nvme0n1/queue
	res geometry "$(cat $q/nr_zones) x $(($(cat $q/chunk_sectors) / 2048)) MiB zones, max open $(cat $q/max_open_zones), max active $(cat $q/max_active_zones)"
	[ -f "$out/trace-format.txt" ] || cat "$T/events/nvme/nvme_setup_cmd/format" >"$out/trace-format.txt"

	# ---- mkfs and mount
	case "$fs" in
	zonefuse)
		"$B/mkfs.zonefuse" --force "$DEV" >/tmp/mkfs.log 2>&1 || { cat /tmp/mkfs.log; failed "mkfs.zonefuse"; }
		# zf_verbose: one line per GC victim in FS-FILL.daemon.log
		local o=(-o "zf_verbose${zfopts:+,$zfopts}")
		"$B/zonefuse" "$DEV" "$MNT" -f "${o[@]}" >"$R.daemon.log" 2>&1 &
		zpid=$!
		for _ in $(seq 300); do mountpoint -q "$MNT" && break; sleep 0.1; done
		mountpoint -q "$MNT" || failed "zonefuse did not mount"
		;;
	btrfs)
		mkfs.btrfs -f -O zoned -d single -m single "$DEV" >/tmp/mkfs.log 2>&1 ||
			{ cat /tmp/mkfs.log; failed "mkfs.btrfs"; }
		mount -t btrfs "$DEV" "$MNT" || failed "mount btrfs"
		;;
	f2fs)
		# the conventional namespace is the main device (superblock, checkpoint,
		# SIT/NAT/SSA), the zoned one the extra device with the main area
		mkfs.f2fs -f -m -c "$DEV" "$CONV" >/tmp/mkfs.log 2>&1 ||
			{ cat /tmp/mkfs.log; failed "mkfs.f2fs"; }
		mount -t f2fs "$CONV" "$MNT" || failed "mount f2fs"
		;;
	esac
	grep -E 'version|zoned|Zoned|Info: ' /tmp/mkfs.log 2>/dev/null | head -n 12 | sed 's/^/  mkfs| /' || true
	local bs blocks bfree
	read -r bs blocks bfree < <(stat -f -c '%S %b %f' "$MNT")
	res fs_size "$((bs * blocks))"
	res fs_used_empty "$((bs * (blocks - bfree)))"
	note "mounted: $((bs * blocks / 1048576)) MiB, $((bs * (blocks - bfree) / 1048576)) MiB used"

	# ---- filler
	local s0 c0
	if [ "$fill" -gt 0 ]; then
		local want=$((bs * blocks * fill / 100 - bs * (blocks - bfree)))
		local mib=$((want / 1048576))
		note "filler: $mib MiB to reach $fill %"
		s0=$(sectors nvme0n1)
		local t=$SECONDS
		if ! dd if=/dev/zero of="$MNT/filler" bs=1M count="$mib" conv=fsync 2>/tmp/filler.err; then
			res filler_error "$(tail -n 1 /tmp/filler.err)"
		fi
		sync
		res filler_bytes "$(stat -c %s "$MNT/filler" 2>/dev/null || echo 0)"
		res filler_device_bytes "$((($(sectors nvme0n1) - s0) * 512))"
		res filler_seconds "$((SECONDS - t))"
		[ -s /tmp/filler.err ] && grep -qi error /tmp/filler.err && failed "filler: $(tail -n 1 /tmp/filler.err)"
	fi
	read -r bs blocks bfree < <(stat -f -c '%S %b %f' "$MNT")
	res used_before "$((bs * (blocks - bfree)))"
	res used_before_pct "$(((blocks - bfree) * 100 / blocks))"
	note "before db_bench: $(((blocks - bfree) * 100 / blocks)) % used"

	# ---- db_bench, measured
	local zs0=
	[ "$fs" != zonefuse ] || zs0=$(zstats)
	echo >"$T/trace"
	echo 16384 >"$T/buffer_size_kb"
	echo 'opcode == 121 && qid != 0' >"$T/events/nvme/nvme_setup_cmd/filter"
	echo 1 >"$T/events/nvme/nvme_setup_cmd/enable"
	local dm
	dm=$(dmesg | wc -l)
	s0=$(sectors nvme0n1) c0=$(sectors nvme0n2)
	local W0 W1 k v rc=0 t=$SECONDS
	while read -r k v; do [ "$k" = wchar: ] && W0=$v; done </proc/$$/io
	timeout "${ZF_BENCH_DB_TIMEOUT:-5100}" db_bench --db="$MNT/db" \
		--benchmarks=fillrandom,overwrite,waitforcompaction --num="$num" --value_size=400 \
		--bytes_per_sync=1048576 --wal_bytes_per_sync=1048576 --compression_type=none \
		--statistics >"$R.dbbench" 2>&1 || rc=$?
	while read -r k v; do [ "$k" = wchar: ] && W1=$v; done </proc/$$/io
	# a file system that hangs after a failure (btrfs did, once: kworkers
	# blocked, sync never returned) must not hold the guest until the
	# host's timeout: the rest must end within 10 min, or the result says
	# so and the guest powers off
	(sleep "${ZF_BENCH_HANG_SECONDS:-600}"
	 res completed no
	 res error "hung after db_bench (exit $rc): sync/unmount did not return in ${ZF_BENCH_HANG_SECONDS:-600} s"
	 dmesg | grep -A2 'blocked for more than' | head -n 6 | sed 's/^/  dmesg| /'
	 echo o >/proc/sysrq-trigger) &
	local watchdog=$!
	res dbbench_rc "$rc"
	res dbbench_seconds "$((SECONDS - t))"
	res app_bytes "$((W1 - W0 - $(stat -c %s "$R.dbbench")))"
	for k in rocksdb.wal.bytes rocksdb.flush.write.bytes rocksdb.compact.write.bytes; do
		res "$k" "$(awk -v k="$k" '$1 == k { print $4 }' "$R.dbbench")"
	done
	res fillrandom_ops "$(awk '$1 == "fillrandom" { print $5 }' "$R.dbbench")"
	res overwrite_ops "$(awk '$1 == "overwrite" { print $5 }' "$R.dbbench")"
	# after a failure: does a plain 64 MiB write + fsync still work? (tells
	# ENOSPC from I/O errors; RocksDB's debug build aborts on a writer's
	# earlier error without logging its errno)
	if [ "$rc" -ne 0 ]; then
		dd if=/dev/zero of="$MNT/probe" bs=1M count=64 conv=fsync 2>/tmp/probe.err &&
			res probe_after_failure "64 MiB write+fsync ok" ||
			res probe_after_failure "$(grep -v records /tmp/probe.err | tail -n 1)"
		rm -f "$MNT/probe"
	fi
	# the first errors RocksDB logged (the write that failed)
	grep -vE '[Oo]ptions\.|error_if_exists|paranoid|rocksdb\.|COUNT :' "$MNT/db/LOG" 2>/dev/null |
		grep -iE 'error|no space|corrupt' | head -n 5 >"$R.rocksdb-log" || true
	[ ! -s "$R.rocksdb-log" ] || res rocksdb_log_error "$(head -n 1 "$R.rocksdb-log" | cut -d' ' -f3- | tr -s ' \t' ' ' | cut -c1-200)"
	sync
	if [ "$fs" = zonefuse ]; then
		local zs1
		zs1=$(zstats)
		echo "$zs1" >"$R.zonefuse-stats"
		res zf_user_bytes "$(($(zkey "$zs1" user_bytes_written) - $(zkey "$zs0" user_bytes_written)))"
		res zf_device_bytes "$(($(zkey "$zs1" device_bytes_written) - $(zkey "$zs0" device_bytes_written)))"
		res zf_gc_bytes "$(($(zkey "$zs1" gc_bytes_written) - $(zkey "$zs0" gc_bytes_written)))"
		res zf_resets "$(($(zkey "$zs1" zone_resets) - $(zkey "$zs0" zone_resets)))"
		res zf_finishes "$(($(zkey "$zs1" zone_finishes) - $(zkey "$zs0" zone_finishes)))"
	fi
	read -r bs blocks bfree < <(stat -f -c '%S %b %f' "$MNT")
	res used_after_pct "$(((blocks - bfree) * 100 / blocks))"
	if [ "$fs" = zonefuse ]; then
		for _ in $(seq 60); do fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.5; done
		wait "$zpid" || res daemon_exit "$?"
		grep -i 'error' "$R.daemon.log" | head -n 5 | sed 's/^/  daemon| /' || true
	else
		umount "$MNT" || res umount_failed 1
	fi
	res device_bytes "$((($(sectors nvme0n1) - s0) * 512))"
	res conv_bytes "$((($(sectors nvme0n2) - c0) * 512))"
	finish_trace
	kill "$watchdog" 2>/dev/null || true
	local errs
	dmesg | tail -n +$((dm + 1)) >"$R.dmesg"
	errs=$(grep -vE 'BTRFS info|F2FS-fs \([^)]*\): (Mounted|Start checkpoint|Stop)' "$R.dmesg" |
		grep -iE 'error|zones exceeded|critical|fail|No space|abort|readonly|read-only' | head -n 8 || true)
	[ -z "$errs" ] || { res kernel_errors "$(echo "$errs" | wc -l)"; echo "$errs" | sed 's/^/  dmesg| /'; }
	local err
	# db_bench's progress lines end in \r; RocksDB's own statistics names
	# contain "error"
	err=$(tr '\r' '\n' <"$R.dbbench" | grep -vE '^rocksdb\.|Assertions are enabled|finished .* ops' |
		grep -m1 -iE 'error|no space|corruption|assert' || true)
	[ "$rc" -ne 134 ] || err="db_bench aborted (SIGABRT): $(grep -o 'Assertion .* failed' <<<"$err" || echo "$err")"
	if [ "$rc" -eq 0 ] && [ -z "$err" ] && [ -z "$errs" ]; then
		res completed yes
	else
		res completed no
		[ -n "$err" ] || err=$(echo "$errs" | head -n 1)
		[ -n "$err" ] || err="db_bench exit $rc"
		[ "$rc" -ne 124 ] || err="db_bench timed out; $err"
		res error "$(echo "$err" | tr -s ' \t' ' ' | cut -c1-160)"
	fi
	note "done: $(tr '\n' ' ' <"$R.result")"
}

# ---- guest side, steady mode (scripts/bench-steady.sh --qemu) ----------------
# bench-qemu-fs.sh --guest-steady FS FILL PASSES RATE_MB INTERVAL DIR [ZFOPTS]
# bench-steady's workload 1 in the guest, its files in DIR the way
# bench-steady writes a run (meta, samples, t0, passes, db-K.out,
# report-K.csv, failed; zonefuse: stats0, stats), plus qemu.result: the
# device's bytes, resets and finishes over all passes + sync + unmount, and
# the bytes db_bench wrote (app_bytes).  The sizing is bench-steady's:
# --num = FILL x capacity / 520, capacity = zonefuse's capacity_bytes, or
# for btrfs and f2fs what statfs shows free on the empty file system (f2fs
# counts its reserved and overprovisioned sections as used); utilisation =
# valid bytes / capacity (zonefuse), (df used - used when empty) / capacity.
guest_steady() {
	local fs=$1 fill=$2 passes=$3 rate=$4 interval=$5 d=$6 zfopts=${7:-}
	local B=${ZF_BUILD_DIR:?} DEV=/dev/nvme0n1 CONV=/dev/nvme0n2 MNT=/mnt/bench
	local T=/sys/kernel/tracing zpid= spid= q=/sys/block/nvme0n1/queue
	local deadline=$((SECONDS + ${ZF_BENCH_DB_TIMEOUT:-5100}))
	mkdir -p "$d" "$MNT"
	: >"$d/qemu.result"
	res() { echo "$1=$2" >>"$d/qemu.result"; }
	note() { echo "[bench $fs steady $fill% +${SECONDS}s] $*"; }
	now() { cut -d' ' -f1 /proc/uptime; }
	sectors() { awk '{ print $7 }' "/sys/block/$1/stat"; }
	zstats() { getfattr --absolute-names --only-values -n user.zonefuse.stats "$MNT" 2>/dev/null; }
	fail() { echo "$1" >>"$d/failed"; note "FAILED: $1"; }
	mountpoint -q "$T" || mount -t tracefs nodev "$T"
	res kernel "$(uname -r)"
	local zones=$(cat $q/nr_zones) zmib=$(($(cat $q/chunk_sectors) / 2048)) act=$(cat $q/max_active_zones)
	res geometry "$zones x $zmib MiB zones, max open $(cat $q/max_open_zones), max active $act"
	# I/O scheduler: ZF_BENCH_SCHED, set by the host side (mq-deadline for
	# btrfs and f2fs, the kernel's none for zonefuse).  With none nothing
	# in the block layer keeps the writes to a zone in order; 6.1's f2fs
	# relies on mq-deadline's zone write lock for that (and failed with
	# "Zone Invalid Write" without it); zonefuse orders its own writes
	[ -z "${ZF_BENCH_SCHED:-}" ] || echo "$ZF_BENCH_SCHED" >"$q/scheduler" || { fail "cannot set the scheduler $ZF_BENCH_SCHED"; return 0; }
	res scheduler "$(sed 's/.*\[\(.*\)\].*/\1/' "$q/scheduler")"
	case "$fs" in
	zonefuse)
		"$B/mkfs.zonefuse" --force "$DEV" >"$d/mkfs.log" 2>&1 || { fail "mkfs.zonefuse failed"; return 0; }
		"$B/zonefuse" "$DEV" "$MNT" -f ${zfopts:+-o "$zfopts"} >"$d/zonefuse.log" 2>&1 &
		zpid=$!
		for _ in $(seq 300); do mountpoint -q "$MNT" && break; sleep 0.1; done
		mountpoint -q "$MNT" || { fail "zonefuse did not mount"; return 0; }
		;;
	btrfs)
		mkfs.btrfs -f -O zoned -d single -m single "$DEV" >"$d/mkfs.log" 2>&1 || { fail "mkfs.btrfs failed"; return 0; }
		mount -t btrfs "$DEV" "$MNT" || { fail "mount btrfs failed"; return 0; }
		;;
	f2fs)
		mkfs.f2fs -f -m -c "$DEV" "$CONV" >"$d/mkfs.log" 2>&1 || { fail "mkfs.f2fs failed"; return 0; }
		mount -t f2fs "$CONV" "$MNT" || { fail "mount f2fs failed"; return 0; }
		;;
	esac
	local bs blocks bfree cap used0=0
	read -r bs blocks bfree < <(stat -f -c '%S %b %f' "$MNT")
	if [ "$fs" = zonefuse ]; then
		zstats >"$d/stats0"
		cap=$(sed -n 's/^capacity_bytes=//p' "$d/stats0")
	else
		used0=$((bs * (blocks - bfree)))
		cap=$((bs * bfree))
	fi
	res fs_size "$((bs * blocks))"
	res used_empty "$used0"
	printf 'workload=dbbench\nfs=%s-qemu\ngeometry=%sM:%s:%s\nrate_mb=%s\nfill=%s\ndev_bytes=%s\ncapacity=%s\ninterval=%s\nopts=%s\n' \
		"$fs" "$zmib" "$zones" "$act" "$rate" "$fill" "$((zones * zmib * 1048576))" "$cap" "$interval" "$zfopts" >"$d/meta"
	local num=$((fill * cap / 100 / 520))
	[ "${ZF_BENCH_NUM_MAX:-0}" -eq 0 ] || [ "$num" -le "$ZF_BENCH_NUM_MAX" ] || num=$ZF_BENCH_NUM_MAX
	note "mounted: capacity $((cap / 1048576)) MiB ($((used0 / 1048576)) MiB used when empty), --num $num"
	echo 0 >"$d/phase"
	# sampler: "secs phase used capacity [user device gc free_zones buffered df_used]"
	(t0=$(now)
	 while :; do
		t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
		ph=$(cat "$d/phase" 2>/dev/null || echo -)
		if [ "$fs" = zonefuse ]; then
			line=$(zstats | awk -F= '{ v[$1] = $2 } END {
				if (v["capacity_bytes"]) printf "%s %s %s %s %s %s %s ", v["valid_bytes"], v["capacity_bytes"],
					v["user_bytes_written"], v["zdev_bytes_written"] ? v["zdev_bytes_written"] : v["device_bytes_written"],
					v["gc_bytes_written"], v["free_zones"], v["buffer_bytes"] + 0 }')
			[ -z "$line" ] || line="$line$(stat -f -c '%S %b %f' "$MNT" | awk '{ print $1 * ($2 - $3) }')"
		else
			line=$(stat -f -c '%S %b %f' "$MNT" | awk -v u0="$used0" -v c="$cap" '{ u = $1 * ($2 - $3) - u0; print (u < 0 ? 0 : u), c }')
		fi
		[ -z "$line" ] || echo "$t $ph $line" >>"$d/samples"
		sleep "$interval"
	 done) &
	spid=$!
	now >"$d/t0"
	# the device's counters over the passes + sync + unmount
	echo >"$T/trace"
	echo 16384 >"$T/buffer_size_kb"
	echo 'opcode == 121 && qid != 0' >"$T/events/nvme/nvme_setup_cmd/filter"
	echo 1 >"$T/events/nvme/nvme_setup_cmd/enable"
	local dm s0 c0 W0 W1 k v app=0
	dm=$(dmesg | wc -l)
	s0=$(sectors nvme0n1) c0=$(sectors nvme0n2)
	# shellcheck source=scripts/lib/rocks.sh
	. "${ZF_SRC_DIR:?}/scripts/lib/rocks.sh"
	local args=("${placement_rocks[@]}" --histogram=1 --report_interval_seconds="$interval"
		--num="$num" --benchmark_write_rate_limit=$((rate * 1000000)))
	local i=0 b st left
	for b in fillrandom $(for ((p = 0; p < passes; p++)); do echo overwrite; done); do
		i=$((i + 1))
		echo "$i" >"$d/phase"
		local more=()
		[ "$b" = fillrandom ] || more=(--use_existing_db=1)
		left=$((deadline - SECONDS))
		[ "$left" -gt 60 ] || { fail "out of time before pass $i ($b): the guest's db_bench budget is ${ZF_BENCH_DB_TIMEOUT:-5100} s"; break; }
		note "pass $i: $b"
		st=0
		# app bytes: the shell's wchar moves by what the reaped db_bench
		# wrote (all its threads) and by nothing else in between
		while read -r k v; do [ "$k" = wchar: ] && W0=$v; done </proc/$$/io
		timeout "$left" db_bench --db="$MNT/db" --benchmarks="$b" "${args[@]}" "${more[@]}" \
			--report_file="$d/report-$i.csv" >"/tmp/db-$i.raw" 2>&1 || st=$?
		while read -r k v; do [ "$k" = wchar: ] && W1=$v; done </proc/$$/io
		app=$((app + W1 - W0 - $(stat -c %s "/tmp/db-$i.raw")))
		tr '\r' '\n' <"/tmp/db-$i.raw" | grep -v '^\.\.\. finished' >"$d/db-$i.out" || true
		echo "$i $b $(now) $st" >>"$d/passes"
		note "pass $i: exit $st, $(grep -m1 -oE '^[a-z]+ +:.* [0-9]+ ops/sec' "$d/db-$i.out" | grep -oE '[0-9]+ ops/sec' || echo '- ops/sec')"
		if [ "$st" -ne 0 ] || grep -qE 'Corruption|IO error|No space' "$d/db-$i.out"; then
			if [ "$st" -eq 124 ]; then
				echo "db_bench $b timed out (the guest's budget of ${ZF_BENCH_DB_TIMEOUT:-5100} s, TCG)" >>"$d/failed"
			else
				grep -hE 'Corruption|IO error|No space|rror|Assertion' "$d/db-$i.out" | head -n 3 >>"$d/failed" || true
				[ -s "$d/failed" ] || echo "db_bench $b exit $st" >>"$d/failed"
			fi
			break
		fi
	done
	res app_bytes "$app"
	echo end >"$d/phase"
	sleep 1
	kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
	# a file system that hangs after a failure must not hold the guest
	(sleep "${ZF_BENCH_HANG_SECONDS:-600}"
	 echo "hung: sync/unmount did not return in ${ZF_BENCH_HANG_SECONDS:-600} s" >>"$d/failed"
	 echo o >/proc/sysrq-trigger) &
	local watchdog=$!
	sync
	[ "$fs" != zonefuse ] || zstats >"$d/stats"
	read -r bs blocks bfree < <(stat -f -c '%S %b %f' "$MNT")
	res used_after "$((bs * (blocks - bfree) - used0))"
	# the counters so far, in case the unmount never returns (btrfs after
	# an aborted transaction)
	res synced_device_bytes "$((($(sectors nvme0n1) - s0) * 512))"
	res synced_conv_bytes "$((($(sectors nvme0n2) - c0) * 512))"
	grep -v '^#' "$T/trace" >/tmp/trace.txt || true
	res synced_resets "$(grep -c 'zsa=4' /tmp/trace.txt || true)"
	res synced_finishes "$(grep -c 'zsa=2' /tmp/trace.txt || true)"
	if [ "$fs" = zonefuse ]; then
		for _ in $(seq 60); do fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.5; done
		wait "$zpid" || echo "daemon exit status $?" >>"$d/failed"
	else
		umount "$MNT" || echo "umount failed" >>"$d/failed"
	fi
	res device_bytes "$((($(sectors nvme0n1) - s0) * 512))"
	res conv_bytes "$((($(sectors nvme0n2) - c0) * 512))"
	echo 0 >"$T/events/nvme/nvme_setup_cmd/enable"
	grep -v '^#' "$T/trace" >/tmp/trace.txt || true
	res resets "$(grep -c 'zsa=4' /tmp/trace.txt || true)"
	res finishes "$(grep -c 'zsa=2' /tmp/trace.txt || true)"
	res trace_overrun "$(cat "$T"/per_cpu/cpu*/stats | awk '/^overrun:/ { s += $2 } END { print s + 0 }')"
	kill "$watchdog" 2>/dev/null || true
	dmesg | tail -n +$((dm + 1)) >"$d/dmesg"
	local errs
	errs=$(grep -vE 'BTRFS info|F2FS-fs \([^)]*\): (Mounted|Start checkpoint|Stop)' "$d/dmesg" |
		grep -iE 'error|zones exceeded|critical|fail|No space|abort|readonly|read-only' | head -n 8 || true)
	# the kernel's error first: it is the cause (RocksDB's debug build may
	# abort on the failed write without printing its errno)
	if [ -n "$errs" ]; then
		res kernel_errors "$(echo "$errs" | wc -l)"
		{ echo "kernel: $(echo "$errs" | head -n 1 | sed 's/^\[ *[0-9.]*\] //' | cut -c1-120)"
		  cat "$d/failed" 2>/dev/null || true; } >/tmp/failed
		cp /tmp/failed "$d/failed"
	fi
	note "done: $(tr '\n' ' ' <"$d/qemu.result")"
}

# ---- table -------------------------------------------------------------------
table() { # result folder
	local d=$1 f
	echo "| fs | fill | filler | completed | app bytes | device bytes | ratio | conv ns bytes | resets | finishes | fillrandom ops/s | overwrite ops/s | db_bench s | note |"
	echo "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
	# rows by fill level, then zonefuse, btrfs, f2fs
	for f in $(for r in "$d"/*.result; do
		[ -e "$r" ] || continue
		b=$(basename "$r" .result)
		case "${b%-*}" in zonefuse) o=1 ;; btrfs) o=2 ;; f2fs) o=3 ;; *) o=9 ;; esac
		echo "${b##*-} $o $r"
	done | sort -n -k1,1 -k2,2 | cut -d' ' -f3-); do
		awk -F= '
			{ v[$1] = substr($0, length($1) + 2) }
			END {
				mb = 1048576
				app = v["app_bytes"] + 0; dev = v["device_bytes"] + 0
				ratio = (app > 0 && v["device_bytes"] != "") ? sprintf("%.3f", dev / app) : "-"
				n = v["error"]
				if (v["probe_after_failure"] != "") n = n (n != "" ? "; " : "") "then dd 64 MiB: " v["probe_after_failure"]
				if (v["rocksdb_log_error"] != "") n = n (n != "" ? "; " : "") "RocksDB LOG: " v["rocksdb_log_error"]
				if (v["filler_error"] != "") n = "filler: " v["filler_error"] (n != "" ? "; " n : "")
				if (v["zf_user_bytes"] != "")
					n = n (n != "" ? "; " : "") sprintf("zonefuse stats: user %.1f MiB, device %.1f MiB, gc %.1f MiB, resets %d, finishes %d", v["zf_user_bytes"] / mb, v["zf_device_bytes"] / mb, v["zf_gc_bytes"] / mb, v["zf_resets"], v["zf_finishes"])
				if (v["trace_overrun"] + 0 > 0) n = n "; trace overrun " v["trace_overrun"]
				fill = v["fill"] "%"
				if (v["used_before_pct"] != "") fill = fill " (" v["used_before_pct"] "% used)"
				printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", v["fs"], fill,
					(v["filler_bytes"] != "" ? sprintf("%.0f MiB", v["filler_bytes"] / mb) : "-"),
					(v["completed"] == "" ? "no (no result)" : v["completed"]),
					(app ? sprintf("%.1f MiB", app / mb) : "-"),
					(v["device_bytes"] != "" ? sprintf("%.1f MiB", dev / mb) : "-"), ratio,
					(v["conv_bytes"] != "" ? sprintf("%.1f MiB", v["conv_bytes"] / mb) : "-"),
					(v["resets"] != "" ? v["resets"] : "-"), (v["finishes"] != "" ? v["finishes"] : "-"),
					(v["fillrandom_ops"] != "" ? v["fillrandom_ops"] : "-"),
					(v["overwrite_ops"] != "" ? v["overwrite_ops"] : "-"),
					(v["dbbench_seconds"] != "" ? v["dbbench_seconds"] : "-"), n
			}' "$f"
	done
}

if [ "${1:-}" = --guest ]; then
	shift
	guest "$@"
	exit 0
fi
if [ "${1:-}" = --guest-steady ]; then
	shift
	guest_steady "$@"
	exit 0
fi

# ---- host side ---------------------------------------------------------------
src=$(cd "$(dirname "$0")/.." && pwd)
fss="zonefuse btrfs f2fs" fills="0 80" num=300000 build_dir=$src/build out= timeout=5400 zfopts=
steady= passes=2 rate_mb=0 interval=10 geometry=16M:128:14 num_max=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--fs) fss=$2; shift 2 ;;
	--fill) fills=$2; shift 2 ;;
	--num) num=$2; shift 2 ;;
	--build-dir) build_dir=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	-o) zfopts=$2; shift 2 ;;
	--table) table "$2"; exit 0 ;;
	--steady) steady=$2; shift 2 ;;
	--passes) passes=$2; shift 2 ;;
	--rate-mb) rate_mb=$2; shift 2 ;;
	--interval) interval=$2; shift 2 ;;
	--geometry) geometry=$2; shift 2 ;;
	--num-max) num_max=$2; shift 2 ;;
	-h|--help) usage ;;
	*) echo "bench-qemu-fs: unknown option $1" >&2; usage ;;
	esac
done
for f in $fss; do case "$f" in zonefuse|btrfs|f2fs) ;; *) echo "bench-qemu-fs: unknown fs $f" >&2; exit 2 ;; esac; done
[ "$(id -u)" -eq 0 ] || { echo "bench-qemu-fs: needs root" >&2; exit 77; }
if [ -n "$steady" ]; then
	# one guest, bench-steady's run directory; nothing is installed
	skip() { echo "bench-qemu-fs: SKIP: $*" >&2; exit 77; }
	set -- $fss
	[ $# -eq 1 ] || { echo "bench-qemu-fs: --steady takes one --fs" >&2; exit 2; }
	set -- $fills
	[ $# -eq 1 ] || { echo "bench-qemu-fs: --steady takes one --fill" >&2; exit 2; }
	IFS=: read -r zs zn za <<<"$geometry"
	[[ "$zs" =~ ^[0-9]+[KMG]$ && "$zn" =~ ^[1-9][0-9]*$ && "$za" =~ ^[0-9]+$ ]] ||
		{ echo "bench-qemu-fs: --geometry $geometry is not ZONE_SIZE:ZONES:MAX_ACTIVE" >&2; exit 2; }
	command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
	command -v db_bench >/dev/null || skip "db_bench is not installed (rocksdb-tools)"
	case "$fss" in
	btrfs) command -v mkfs.btrfs >/dev/null || skip "mkfs.btrfs is not installed (btrfs-progs)" ;;
	f2fs) command -v mkfs.f2fs >/dev/null || skip "mkfs.f2fs is not installed (f2fs-tools)" ;;
	zonefuse) [ -x "$build_dir/zonefuse" ] || { echo "bench-qemu-fs: $build_dir/zonefuse is not built" >&2; exit 1; } ;;
	esac
	mkdir -p "$steady"
	steady=$(realpath "$steady")
	dev_b=$(numfmt --from=iec "$zs")
	# what the report needs if the guest never gets to write it
	printf 'workload=dbbench\nfs=%s-qemu\ngeometry=%s\nrate_mb=%s\nfill=%s\ndev_bytes=%s\ncapacity=\ninterval=%s\nopts=%s\n' \
		"$fss" "$geometry" "$rate_mb" "$fills" "$((dev_b * zn))" "$interval" "$zfopts" >"$steady/meta"
	extra=(--extra db_bench)
	if [ -z "${ZF_BENCH_SCHED+set}" ]; then
		ZF_BENCH_SCHED=mq-deadline
		[ "$fss" != zonefuse ] || ZF_BENCH_SCHED=
	fi
	export ZF_BENCH_SCHED
	[ "$fss" != btrfs ] || extra+=(--extra mkfs.btrfs --module btrfs)
	[ "$fss" != f2fs ] || extra+=(--extra mkfs.f2fs --module f2fs)
	rc=0
	[[ "$num_max" =~ ^[0-9]+$ ]] || { echo "bench-qemu-fs: --num-max takes a number" >&2; exit 2; }
	# qemu-zns.sh in the background so that a TERM or INT here reaches it
	# (its trap stops QEMU by PID) before this script exits
	ZF_BENCH_NUM_MAX=$num_max ZF_BENCH_DB_TIMEOUT=$((timeout - 300)) "$src/scripts/qemu-zns.sh" --no-install --build-dir "$build_dir" \
		--size $((dev_b * zn / 1048576))M --zone-size "$zs" --max-open "$za" --max-active "$za" --conv-ns 64M \
		"${extra[@]}" --share "$steady" --timeout "$timeout" ${ZF_QEMU_ACCEL:+--accel "$ZF_QEMU_ACCEL"} \
		-- "$src/scripts/bench-qemu-fs.sh" --guest-steady "$fss" "$fills" "$passes" "$rate_mb" "$interval" "$steady" "$zfopts" \
		>"$steady/console.log" 2>&1 &
	qz=$!
	trap 'kill -TERM "$qz" 2>/dev/null; wait "$qz" 2>/dev/null; exit 143' TERM
	trap 'kill -TERM "$qz" 2>/dev/null; wait "$qz" 2>/dev/null; exit 130' INT
	wait "$qz" || rc=$?
	trap - TERM INT
	grep -E '^\[bench' "$steady/console.log" >&2 || true
	[ "$rc" -ne 77 ] || skip "$(grep -m1 'SKIP' "$steady/console.log" || echo 'qemu-zns.sh exit 77')"
	[ -f "$steady/t0" ] || echo 0 >"$steady/t0"
	[ -f "$steady/samples" ] || : >"$steady/samples"
	if [ "$rc" -ne 0 ]; then
		case "$rc" in
		124) echo "the guest timed out after $timeout s (QEMU $(grep -m1 -o 'tcg\|kvm' "$steady/console.log" || echo ?))" >>"$steady/failed" ;;
		*) echo "the guest ended $rc ($(grep -m1 -E 'qemu-zns: (exit|the guest)' "$steady/console.log" | cut -c1-100))" >>"$steady/failed" ;;
		esac
	fi
	exit 0
fi
need=()
command -v db_bench >/dev/null || need+=(rocksdb-tools)
command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs)
command -v mkfs.f2fs >/dev/null || need+=(f2fs-tools)
[ ${#need[@]} -eq 0 ] || "$src/scripts/deps.sh" "${need[@]}" >&2
build_dir=$(realpath -m "$build_dir")
[ -x "$build_dir/zonefuse" ] || { echo "bench-qemu-fs: $build_dir/zonefuse is not built" >&2; exit 1; }
[ -n "$out" ] || out=$src/results/qemu-fs-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
out=$(realpath "$out")
case "$out/" in "$src"/*|"$build_dir"/*) ;; *) echo "bench-qemu-fs: --out must be inside $src (shared with the guest)" >&2; exit 2 ;; esac

echo "bench-qemu-fs: results in $out"
t0=$(date +%s)
for fill in $fills; do
	for fs in $fss; do
		t=$(date +%s) rc=0
		echo "=== $fs, fill $fill %"
		ZF_BENCH_DB_TIMEOUT=$((timeout - 300)) "$src/scripts/qemu-zns.sh" --build-dir "$build_dir" \
			--size 2G --zone-size 16M --max-open 14 --max-active 14 --conv-ns 64M \
			--module btrfs --module f2fs --extra db_bench --extra mkfs.btrfs --extra mkfs.f2fs \
			--timeout "$timeout" -- "$src/scripts/bench-qemu-fs.sh" --guest "$fs" "$fill" "$num" "$out" "$zfopts" \
			>"$out/$fs-$fill.console" 2>&1 || rc=$?
		grep -E '^\[bench|^  (mkfs|dmesg|daemon)\|' "$out/$fs-$fill.console" || true
		echo "guest exit $rc, $(($(date +%s) - t)) s"
		[ -s "$out/$fs-$fill.result" ] || echo "fs=$fs" >"$out/$fs-$fill.result"
		if ! grep -q '^completed=' "$out/$fs-$fill.result"; then
			{ echo "fill=$fill"; echo "completed=no"; echo "error=guest exit $rc (124 = timeout) before the run ended"; } >>"$out/$fs-$fill.result"
		fi
	done
done
{
	echo "# scripts/bench-qemu-fs.sh --fs \"$fss\" --fill \"$fills\" --num $num"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(($(date +%s) - t0)) s; device: 128 x 16 MiB zones, max open/active 14, 64 MiB conventional namespace; guest kernel $(awk -F= '$1 == "kernel" { print $2; exit }' "$out"/*.result 2>/dev/null), QEMU TCG, host $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	table "$out"
} >"$out/table.md"
echo
cat "$out/table.md"
