#!/bin/bash
# Striping and prefetch on a small-zone ZNS model (issue 5).
#
# The emulated device models a small-zone drive (eZNS, OSDI'23): 96 MiB
# zones, 40 MB/s write and 200 MB/s read per zone, 2000 MB/s for the whole
# device.  Prints, in one run:
#   1. sequential write and read throughput (dd, 1 MiB requests) for stripe
#      width 1, 2, 4, 8, 16;
#   2. db_bench fillrandom,waitforcompaction total time with striping and
#      prefetch off (stripe_width=1, prefetch_kb=0) and on (defaults + width 8);
#   3. the same db_bench run on the emulator without the model (no regression).
# Needs root (FUSE mounts).  The device file lives in /dev/shm.
# Usage: scripts/bench-stripe.sh [--num N] [--mib M] [--quick] [--seq-only]
#                                [--widths "1 2 4"] [--reps R]
#   --seq-only  only part 1, plus the same without the model (--plain-widths)
#   --widths    stripe widths of part 1 (default "1 2 4 8 16")
#   --plain-widths  widths run without the model by --seq-only (default "1 8";
#               "" for none)
#   --reps      repeat every part-1 measurement R times (default 1)
#   --no-deps   do not run scripts/deps.sh
#   ZF_BUILD_DIR=DIR runs the binaries of another build (e.g. a baseline).
set -euo pipefail
cd "$(dirname "$0")/.."
num=150000
mib=512
widths="1 2 4 8 16"
seq_only=0
reps=1
plain_widths="1 8"
deps=1
while [ $# -gt 0 ]; do
	case $1 in
	--num) num=$2; shift 2 ;;
	--mib) mib=$2; shift 2 ;;
	--quick) num=50000; mib=192; widths="1 4 16"; shift ;;
	--seq-only) seq_only=1; shift ;;
	--widths) widths=$2; shift 2 ;;
	--plain-widths) plain_widths=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--no-deps) deps=0; shift ;;
	-h|--help) sed -n '2,21p' "$0"; exit 0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-stripe: needs root (FUSE mounts)" >&2; exit 1; }
[ "$deps" = 0 ] || scripts/deps.sh
B=${ZF_BUILD_DIR:-build}
[ -x "$B/zonefuse" ] || { meson setup "$B" >/dev/null; }
ninja -C "$B" >/dev/null

work=$(mktemp -d /tmp/zf-stripe.XXXXXX)
dev=/dev/shm/zf-stripe-$$.img
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
	if mountpoint -q "$mnt"; then fusermount3 -u "$mnt" || umount -l "$mnt"; fi
	rm -f "$dev"
	rm -rf "$work"
}
trap cleanup EXIT

model=(--zone-write-mbps 40 --zone-read-mbps 200 --device-mbps 2000)
mount_fs() { # model(on|off) -- daemon options
	local m=$1; shift
	local args=(--zone-size 96M --zones 64 --force)
	[ "$m" = on ] && args+=("${model[@]}")
	"$B/zonefuse-emu" create "$dev" "${args[@]}" >/dev/null
	"$B/mkfs.zonefuse" "$dev" >/dev/null
	"$B/zonefuse" "$dev" "$mnt" -f "$@" >"$work/daemon.log" 2>&1 &
	for _ in $(seq 100); do mountpoint -q "$mnt" && return 0; sleep 0.1; done
	cat "$work/daemon.log" >&2
	return 1
}
umount_fs() {
	fusermount3 -u "$mnt"
	for _ in $(seq 100); do pgrep -f "zonefuse $dev" >/dev/null || break; sleep 0.1; done
	if grep -qi "error:" "$work/daemon.log"; then
		echo "daemon logged errors:" >&2; grep -i "error:" "$work/daemon.log" >&2; return 1
	fi
}
mbps() { # bytes seconds
	awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / s / 1e6 }'
}
now() { date +%s.%N; }

seq_run() { # model width -> "write-MB/s read-MB/s"
	local m=$1 w=$2 t0 t1 t2 t3
	mount_fs "$m" -o "stripe_width=$w"
	t0=$(now)
	dd if=/dev/zero of="$mnt/seq" bs=1M count="$mib" conv=fsync status=none
	t1=$(now)
	# Dropping the file's clean pages takes the kernel 0.1-0.3 s for 512 MiB:
	# not part of the read, so the read's clock starts after it.
	echo 3 >/proc/sys/vm/drop_caches
	t2=$(now)
	dd if="$mnt/seq" of=/dev/null bs=1M status=none
	t3=$(now)
	umount_fs
	echo "$(mbps $((mib << 20)) "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')")" \
	     "$(mbps $((mib << 20)) "$(awk -v a="$t2" -v b="$t3" 'BEGIN{print b-a}')")"
}

echo "== 1. sequential throughput, small-zone model (40 MB/s write, 200 MB/s read per zone) =="
echo "   ($B/zonefuse, dd bs=1M count=$mib conv=fsync; $reps run(s) each)"
printf '%-8s %14s %14s %14s\n' width "write MB/s" "read MB/s" "write/width1"
base=
for w in $widths; do
	for _ in $(seq "$reps"); do
		read -r wr rd < <(seq_run on "$w")
		[ -n "$base" ] || base=$wr
		printf '%-8s %14s %14s %13.1fx\n' "$w" "$wr" "$rd" "$(awk -v a="$wr" -v b="$base" 'BEGIN{print a/b}')"
	done
done
if [ "$seq_only" = 1 ]; then
	[ -n "$plain_widths" ] || exit 0
	echo
	echo "== 1b. the same without the model (plain emulator) =="
	printf '%-8s %14s %14s\n' width "write MB/s" "read MB/s"
	for w in $plain_widths; do
		for _ in $(seq "$reps"); do
			read -r wr rd < <(seq_run off "$w")
			printf '%-8s %14s %14s\n' "$w" "$wr" "$rd"
		done
	done
	exit 0
fi

# 4000-byte values: bytes, not per-key CPU, dominate (on 2 cores, 400-byte
# values make db_bench CPU-bound and no storage model shows).
dbb=(--benchmarks=fillrandom,waitforcompaction --num="$num" --value_size=4000
     --compression_type=none --write_buffer_size=67108864 --target_file_size_base=67108864
     --max_bytes_for_level_base=268435456 --seed=42)
run_db() { # label model -- options
	local label=$1 m=$2; shift 2
	mount_fs "$m" "$@"
	local t0 t1
	t0=$(now)
	db_bench --db="$mnt/db" "${dbb[@]}" >"$work/db.log" 2>&1 || { cat "$work/db.log" >&2; return 1; }
	t1=$(now)
	umount_fs
	awk -v a="$t0" -v b="$t1" -v l="$label" 'BEGIN { printf "%-34s %8.1f s\n", l, b - a }'
}

echo
echo "== 2. db_bench fillrandom,waitforcompaction (--num=$num, 4000 B values), small-zone model =="
off=$(run_db "striping+prefetch off" on -o stripe_width=1,prefetch_kb=0)
on=$(run_db "striping+prefetch on (width 8)" on -o stripe_width=8)
echo "$off"
echo "$on"
awk -v a="$(echo "$off" | awk '{print $(NF-1)}')" -v b="$(echo "$on" | awk '{print $(NF-1)}')" \
	'BEGIN { printf "%-34s %8.2fx   (target <= 0.40x)\n", "on / off", b / a }'

echo
echo "== 3. the same without the model (plain emulator): no regression =="
off=$(run_db "striping+prefetch off" off -o stripe_width=1,prefetch_kb=0)
on=$(run_db "striping+prefetch on (width 8)" off -o stripe_width=8)
echo "$off"
echo "$on"
awk -v a="$(echo "$off" | awk '{print $(NF-1)}')" -v b="$(echo "$on" | awk '{print $(NF-1)}')" \
	'BEGIN { printf "%-34s %8.2fx\n", "on / off", b / a }'
