#!/bin/bash
# Cheap copies: what `cp` of a big file and `cp -r` of a RocksDB checkpoint
# cost on zonefuse (copy_file_range shares extents), ext4 on a loop device
# (no sharing: every byte is written again) and btrfs on a zoned NVMe device
# in a QEMU guest (reflink; scripts/qemu-zns.sh).
#
#   scripts/bench-copy.sh [options]
#
# For every file system: mkfs, mount; a SIZE MiB file from /dev/urandom
# (fsync'ed) and a RocksDB database (db_bench fillrandom, NUM keys of 400
# bytes, no compression) with a checkpoint of it (ldb checkpoint: hard links
# in a new directory); sync.  Then ROUNDS times, the file systems on the
# host alternating (zonefuse, ext4, zonefuse, ...):
#   cp FILE COPY; sync COPY; sync                time, device bytes written
#   cp -r CHECKPOINT DIR; sync DIR/* DIR; sync   (sync FILE: fsync)
#   both compared with the originals (cmp), then removed, sync.
# Device bytes: zonefuse's own count (device_bytes_written in
# user.zonefuse.stats: data + metadata + GC bytes it wrote), the loop
# device's and the NVMe namespace's sectors written (/sys/block/*/stat).
# Prints a table (medians over the rounds, each round in the result file)
# and writes it to results/copy-YYYYmmdd-HHMMSS/ (table.md, *.result).
#
# Options:
#   --size MIB       the big file (1024)
#   --num N          db_bench keys (300000, about 130 MiB)
#   --rounds R       rounds per file system (3)
#   --fs "LIST"      from zonefuse ext4 btrfs (all); btrfs boots a QEMU guest
#                    (TCG: slow to write the inputs, minutes)
#   --build-dir DIR  zonefuse build folder (build/)
#   --out DIR        result folder (results/copy-<time>)
#   --guest FS SIZE NUM ROUNDS OUT   (internal: the guest side)
# Needs root (mounts, loop devices, QEMU).
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
size=1024 num=300000 rounds=3 fss="zonefuse ext4 btrfs" build_dir=$src/build out=

# ---- measuring one file system -----------------------------------------------
# prepare MNT: the inputs (big file, database, checkpoint)
prepare() {
	local m=$1
	head -c "$((size << 20))" /dev/urandom | dd of="$m/big" bs=1M conv=fsync status=none
	db_bench --db="$m/db" --benchmarks=fillrandom --num="$num" --value_size=400 \
		--compression_type=none --write_buffer_size=16777216 --disable_wal=0 \
		>"$m.dbbench.log" 2>&1 || { tail -n 5 "$m.dbbench.log" >&2; return 1; }
	ldb --db="$m/db" checkpoint --checkpoint_dir="$m/ckpt" >/dev/null
	sync
}

# round FS MNT DEVBYTES_FN RESULT: one round of both copies
round() {
	local fs=$1 m=$2 dev=$3 res=$4 d0 d1 t0 t1 k
	for k in file ckpt; do
		d0=$($dev)
		t0=$(date +%s%N)
		# fsync of every copy (sync FILE...), then sync: zonefuse commits
		# at fsync (FUSE has no syncfs here), ext4 and btrfs either way
		if [ $k = file ]; then
			cp "$m/big" "$m/big.copy" && sync "$m/big.copy"
		else
			cp -r "$m/ckpt" "$m/ckpt.copy" && sync "$m/ckpt.copy"/* "$m/ckpt.copy"
		fi
		sync
		t1=$(date +%s%N)
		d1=$($dev)
		echo "$k ms=$(((t1 - t0) / 1000000)) device_bytes=$((d1 - d0))" >>"$res"
	done
	cmp "$m/big" "$m/big.copy"
	for f in "$m/ckpt"/*; do cmp "$f" "$m/ckpt.copy/$(basename "$f")"; done
	rm -rf "$m/big.copy" "$m/ckpt.copy"
	sync
}

inputs_line() { # MNT RESULT
	local bytes
	bytes=$(du -sb --apparent-size "$1/ckpt" | cut -f1)
	echo "inputs file_bytes=$((size << 20)) ckpt_bytes=$bytes ckpt_files=$(ls "$1/ckpt" | wc -l)" >>"$2"
}

sectors_written() { awk '{ printf "%.0f\n", $7 * 512 }' "/sys/block/$1/stat"; }

# ---- guest side (btrfs on the ZNS namespace) ------------------------------------
if [ "${1:-}" = --guest ]; then
	fs=$2 size=$3 num=$4 rounds=$5 out=$6
	M=/mnt/copy R=$out/$fs.result
	: >"$R"
	mkdir -p "$M"
	echo "cp $(cp --version | head -n 1)" >>"$R"
	mkfs.btrfs -f -O zoned -d single -m single /dev/nvme0n1 >/tmp/mkfs.log 2>&1 ||
		{ cat /tmp/mkfs.log; exit 1; }
	mount -t btrfs /dev/nvme0n1 "$M"
	prepare "$M"
	inputs_line "$M" "$R"
	dev() { sectors_written nvme0n1; }
	for ((i = 0; i < rounds; i++)); do round "$fs" "$M" dev "$R"; done
	umount "$M"
	echo "done" >>"$R"
	exit 0
fi

# ---- host side -------------------------------------------------------------------
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--num) num=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--fs) fss=$2; shift 2 ;;
	--build-dir) build_dir=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) usage ;;
	*) echo "bench-copy: unknown option $1" >&2; usage ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-copy: needs root" >&2; exit 77; }
for p in db_bench ldb; do command -v $p >/dev/null || "$src/scripts/deps.sh" rocksdb-tools >&2; done
build_dir=$(realpath -m "$build_dir")
[ -n "$out" ] || out=$src/results/copy-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d "${TMPDIR:-/tmp}/zf-bench-copy.XXXXXX")
zpid= loopdev=
cleanup() {
	mountpoint -q "$work/zf" 2>/dev/null && fusermount3 -u "$work/zf" 2>/dev/null
	[ -z "$zpid" ] || wait "$zpid" 2>/dev/null || true
	mountpoint -q "$work/ext4" 2>/dev/null && umount "$work/ext4"
	[ -z "$loopdev" ] || losetup -d "$loopdev" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
echo "bench-copy: results in $out (work dir $work)"
need=$(((size << 20) * 3 + (num * 1200) + (1 << 30)))	# inputs, a copy, slack

has() { case " $fss " in *" $1 "*) return 0 ;; esac; return 1; }
if has zonefuse; then
	zones=$((need / (64 << 20) + 8))
	"$build_dir/zonefuse-emu" create "$work/zf.img" --zone-size 64M --zones "$zones" >/dev/null
	"$build_dir/mkfs.zonefuse" "$work/zf.img" >/dev/null
	mkdir -p "$work/zf"
	"$build_dir/zonefuse" "$work/zf.img" "$work/zf" -f >"$out/zonefuse.daemon.log" 2>&1 &
	zpid=$!
	for _ in $(seq 100); do mountpoint -q "$work/zf" && break; sleep 0.1; done
	mountpoint -q "$work/zf" || { echo "bench-copy: zonefuse did not mount" >&2; exit 1; }
	zdev() {
		getfattr --only-values -n user.zonefuse.stats "$work/zf" 2>/dev/null |
			awk -F= '$1 == "device_bytes_written" { print $2 }'
	}
	: >"$out/zonefuse.result"
	echo "zonefuse-emu $(stat -c %s "$work/zf.img") bytes, 64 MiB zones" >>"$out/zonefuse.result"
	prepare "$work/zf"
	inputs_line "$work/zf" "$out/zonefuse.result"
	# cp really calls copy_file_range here (coreutils >= 9)
	strace -f -e trace=copy_file_range,ioctl -o "$out/zonefuse.strace" \
		cp "$work/zf/ckpt/CURRENT" "$work/zf/strace-probe" 2>/dev/null || true
	rm -f "$work/zf/strace-probe"
fi
if has ext4; then
	truncate -s "$(((need >> 20) << 20))" "$work/ext4.img"
	loopdev=$(losetup -f --show "$work/ext4.img")
	mkfs.ext4 -q -F "$loopdev"
	mkdir -p "$work/ext4"
	mount "$loopdev" "$work/ext4"
	ldev() { sectors_written "$(basename "$loopdev")"; }
	: >"$out/ext4.result"
	echo "ext4 on $loopdev" >>"$out/ext4.result"
	prepare "$work/ext4"
	inputs_line "$work/ext4" "$out/ext4.result"
fi
for ((i = 0; i < rounds; i++)); do	# alternating: the same machine load
	if has zonefuse; then round zonefuse "$work/zf" zdev "$out/zonefuse.result"; fi
	if has ext4; then round ext4 "$work/ext4" ldev "$out/ext4.result"; fi
done
if has zonefuse; then
	grep -E '^(shared_bytes|copies|copy_shared_bytes|copy_written_bytes)=' \
		<(getfattr --only-values -n user.zonefuse.stats "$work/zf") >>"$out/zonefuse.result"
fi
if has btrfs; then
	echo "=== btrfs (QEMU guest, ZNS namespace)"
	gsize=$(((need >> 30) + 2))G
	"$src/scripts/qemu-zns.sh" --build-dir "$build_dir" --size "$gsize" --zone-size 64M \
		--max-open 14 --max-active 14 --module btrfs --extra db_bench --extra ldb \
		--extra mkfs.btrfs --extra cp --extra du --extra head --extra date --extra sync --timeout 7200 -- \
		"$src/scripts/bench-copy.sh" --guest btrfs "$size" "$num" "$rounds" "$out" \
		>"$out/btrfs.console" 2>&1 || echo "bench-copy: the btrfs guest failed (exit $?), see $out/btrfs.console"
fi

# ---- table ----------------------------------------------------------------------
median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "-" }'; }
{
	echo "# scripts/bench-copy.sh --size $size --num $num --rounds $rounds"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), host $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); medians of $rounds rounds"
	echo
	echo "| fs | copy | bytes copied | time (ms) | device bytes written | device / copied |"
	echo "| --- | --- | ---: | ---: | ---: | ---: |"
	for fs in zonefuse ext4 btrfs; do
		r=$out/$fs.result
		[ -s "$r" ] && grep -q '^file ' "$r" || continue
		for k in file ckpt; do
			bytes=$(awk -v k="$k" '$1 == "inputs" { for (i = 2; i <= NF; i++) { split($i, a, "=");
				if ((k == "file" && a[1] == "file_bytes") || (k == "ckpt" && a[1] == "ckpt_bytes")) print a[2] } }' "$r")
			ms=$(awk -v k="$k" '$1 == k { sub("ms=", "", $2); print $2 }' "$r" | median)
			db=$(awk -v k="$k" '$1 == k { sub("device_bytes=", "", $3); print $3 }' "$r" | median)
			ratio=$(awk -v d="$db" -v b="$bytes" 'BEGIN { printf "%.6f", b ? d / b : 0 }')
			what=$([ $k = file ] && echo "cp of a $size MiB file" || echo "cp -r of a checkpoint ($(awk '$1 == "inputs" { print $4 }' "$r" | cut -d= -f2) files)")
			echo "| $fs | $what | $bytes | $ms | $db | $ratio |"
		done
	done
} >"$out/table.md"
cat "$out/table.md"
