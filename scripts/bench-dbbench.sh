#!/bin/bash
# RocksDB db_bench on zonefuse next to ext4, in the same run and on the same
# kind of backing storage: the emulated zoned device file and an ext4 image
# (on a loop device) of the same size, both in the backing dir (default: a
# tmpfs mounted in a temp dir, so the storage is not the bottleneck and the
# numbers compare the file systems).  Prints a table of ops/s for fillrandom,
# overwrite and readrandom (and the zonefuse stats if the xattr exists).
# Needs root.  Cleans up mounts, loop devices and files on exit.
# Usage: scripts/bench-dbbench.sh [options]   (--help for the list)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)

num=300000
value_size=400
zone_size=16M
zones=128
backing=
build_dir=$SRC/build
only=
mount_opts=
extra=()

usage() {
	cat <<EOF
Usage: scripts/bench-dbbench.sh [options]
  --num N             db_bench --num [$num]
  --value-size B      db_bench --value_size [$value_size]
  --zone-size SIZE    emulated zone size [$zone_size]
  --zones N           zones; the ext4 image gets the same size [$zones]
  --backing-dir DIR   where the device file and the ext4 image go
                      [a tmpfs mounted in a temp dir]
  --build-dir DIR     zonefuse build dir [build]
  --only ext4|zonefuse  run one side only
  -o OPTS             zonefuse mount options
  --db-bench-arg ARG  extra db_bench argument (repeatable), for both
  -h, --help          this help
db_bench runs fillrandom,waitforcompaction,overwrite,waitforcompaction,readrandom
with --compression_type=none, 8 MiB write buffer, 16 MiB target files and a
64 MiB level base (RocksDB 7.8 from Debian, built with assertions on).
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--num) num=$2; shift ;;
	--value-size) value_size=$2; shift ;;
	--zone-size) zone_size=$2; shift ;;
	--zones) zones=$2; shift ;;
	--backing-dir) backing=$2; shift ;;
	--build-dir) build_dir=$2; shift ;;
	--only) only=$2; shift ;;
	-o) mount_opts=$2; shift ;;
	--db-bench-arg) extra+=("$2"); shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "bench: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$only" in "" | ext4 | zonefuse) ;; *) echo "bench: --only ext4|zonefuse" >&2; exit 2 ;; esac

die() { echo "bench: FAILED: $*" >&2; exit 1; }
msg() { echo "bench: $*" >&2; }
[ "$(id -u)" -eq 0 ] || die "needs root (loop devices, mounts)"
command -v db_bench >/dev/null || die "db_bench missing (apt-get install rocksdb-tools)"

to_bytes() { numfmt --from=iec "${1%iB}"; }
dev_bytes=$(($(to_bytes "$zone_size") * zones))

work=$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/zonefuse-bench.XXXXXX")")
tmpfs_mounted=0
loopdev=
ext4_mnt=$work/ext4
zf_mnt=$work/zonefuse
zf_pid=
mkdir "$ext4_mnt" "$zf_mnt"

is_mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	cd /
	if is_mounted "$zf_mnt"; then
		fusermount3 -u "$zf_mnt" 2>/dev/null || fusermount3 -u -z "$zf_mnt" || umount -l "$zf_mnt"
	fi
	if [ -n "$zf_pid" ]; then
		for _ in $(seq 100); do kill -0 "$zf_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$zf_pid" 2>/dev/null
		wait "$zf_pid" 2>/dev/null
	fi
	if is_mounted "$ext4_mnt"; then umount "$ext4_mnt" || umount -l "$ext4_mnt"; fi
	[ -z "$loopdev" ] || losetup -d "$loopdev"
	if [ "$rc" -ne 0 ] && [ -s "$work/zonefuse.log" ]; then
		msg "last lines of the zonefuse log:"
		tail -n 20 "$work/zonefuse.log" | sed 's/^/  | /' >&2
	fi
	if [ $tmpfs_mounted -eq 1 ]; then umount "$work/backing" || umount -l "$work/backing"; fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "$backing" ]; then
	backing=$work/backing
	mkdir "$backing"
	mount -t tmpfs -o size=$((dev_bytes * 2 + (256 << 20))) tmpfs "$backing"
	tmpfs_mounted=1
	what="tmpfs"
else
	mkdir -p "$backing"
	what="$(df --output=fstype "$backing" | tail -n 1) at $backing"
fi
backing=$(realpath "$backing")
avail=$(($(df --output=avail -B1 "$backing" | tail -n 1)))
[ "$avail" -gt $((dev_bytes * 2)) ] ||
	msg "warning: $backing has $avail bytes free, the two backing files may need up to $((dev_bytes * 2))"

benchmarks=fillrandom,waitforcompaction,overwrite,waitforcompaction,readrandom
common=(--benchmarks="$benchmarks"
	--num="$num" --value_size="$value_size" --compression_type=none
	--write_buffer_size=8388608 --target_file_size_base=16777216
	--max_bytes_for_level_base=67108864 --seed=42 --threads=1 ${extra[@]+"${extra[@]}"})

# run_db_bench LABEL DIR: runs db_bench, records ops/s per benchmark in
# the associative array ops[LABEL.bench] and prints the result lines.
declare -A ops
run_db_bench() {
	local label=$1 dir=$2 out=$work/db_bench-$1.out st=0
	msg "$label: db_bench ${common[*]}"
	db_bench --db="$dir/db" "${common[@]}" >"$out" 2>&1 || st=$?
	tr '\r' '\n' <"$out" | grep -v '^\.\.\. finished' | grep -v '^ *$' >"$out.clean" || true
	if [ "$st" -ne 0 ] || grep -qE 'Corruption|IO error' "$out.clean"; then
		tail -n 15 "$out.clean" >&2
		die "db_bench on $label exited $st"
	fi
	local b v
	while read -r b v; do
		ops[$label.$b]=$v
	done < <(awk '$2 == ":" && / ops\/sec / { for (i = 3; i <= NF; i++) if ($i == "ops/sec") print $1, $(i - 1) }' "$out.clean")
	grep -E '^[a-z]+ +:' "$out.clean" | sed "s/^/  $label  /" >&2
}

zf_stats=
if [ "$only" != ext4 ]; then
	for b in zonefuse zonefuse-emu mkfs.zonefuse; do
		[ -x "$build_dir/$b" ] || die "$build_dir/$b is not built (meson setup build && ninja -C build)"
	done
	[ -c /dev/fuse ] || die "/dev/fuse missing"
	msg "zonefuse: emulated device $zones x $zone_size on $what"
	"$build_dir/zonefuse-emu" create "$backing/zoned.img" --zone-size "$zone_size" --zones "$zones" >/dev/null
	"$build_dir/mkfs.zonefuse" "$backing/zoned.img" >/dev/null
	args=(-f)
	[ -z "$mount_opts" ] || args+=(-o "$mount_opts")
	"$build_dir/zonefuse" "$backing/zoned.img" "$zf_mnt" "${args[@]}" >"$work/zonefuse.log" 2>&1 &
	zf_pid=$!
	for _ in $(seq 150); do
		is_mounted "$zf_mnt" && break
		kill -0 "$zf_pid" 2>/dev/null || die "zonefuse exited before mounting"
		sleep 0.1
	done
	is_mounted "$zf_mnt" || die "zonefuse did not mount"
	run_db_bench zonefuse "$zf_mnt"
	zf_stats=$(getfattr --only-values -n user.zonefuse.stats "$zf_mnt" 2>/dev/null || true)
	fusermount3 -u "$zf_mnt"
	st=0
	wait "$zf_pid" || st=$?
	zf_pid=
	[ "$st" -eq 0 ] || die "zonefuse exited with status $st"
	if grep -qi 'error:' "$work/zonefuse.log"; then
		grep -i 'error:' "$work/zonefuse.log" | head -n 5 >&2
		die "zonefuse logged errors"
	fi
	rm -f "$backing/zoned.img"
fi

if [ "$only" != zonefuse ]; then
	msg "ext4: $dev_bytes-byte image on a loop device, on $what"
	truncate -s "$dev_bytes" "$backing/ext4.img"
	mkfs.ext4 -F -q "$backing/ext4.img"
	loopdev=$(losetup --find --show "$backing/ext4.img")
	mount "$loopdev" "$ext4_mnt"
	run_db_bench ext4 "$ext4_mnt"
	umount "$ext4_mnt"
	losetup -d "$loopdev"
	loopdev=
	rm -f "$backing/ext4.img"
fi

echo
echo "db_bench (RocksDB $(db_bench --version 2>/dev/null | awk '{print $NF}')), --num=$num --value_size=$value_size," \
	"backing: $what, device/image $((dev_bytes >> 20)) MiB"
printf '%-12s %16s %16s %10s\n' benchmark "zonefuse ops/s" "ext4 ops/s" "zf/ext4"
for b in fillrandom overwrite readrandom; do
	z=${ops[zonefuse.$b]:-}
	e=${ops[ext4.$b]:-}
	ratio=-
	if [ -n "$z" ] && [ -n "$e" ] && [ "$e" -gt 0 ]; then
		ratio=$(awk -v a="$z" -v b="$e" 'BEGIN { printf "%.2f", a / b }')
	fi
	printf '%-12s %16s %16s %10s\n' "$b" "${z:--}" "${e:--}" "$ratio"
done
if [ -n "$zf_stats" ]; then
	echo
	echo "zonefuse stats after the run:"
	while read -r l; do echo "  $l"; done <<<"$zf_stats"
fi
