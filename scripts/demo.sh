#!/bin/bash
# zonefuse demo, as root on a fresh Debian 12 machine:
#   install packages, build, create an emulated zoned device in a temp dir,
#   mkfs, mount, run RocksDB's db_bench and the LevelDB driver on the mount,
#   unmount + fsck + remount and verify both databases, show df, the stats
#   xattr and the zone map, unmount and report.
# Usage: scripts/demo.sh [options]   (--help for the list)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)

zone_size=16M
zones=256
zone_cap=
num=500000
ldb_num=200000
value_size=400
base_dir=${TMPDIR:-/tmp}
mount_opts=
keep=0
do_deps=1
do_build=1
build_dir=$SRC/build

usage() {
	cat <<EOF
Usage: scripts/demo.sh [options]
  --zone-size SIZE     emulated zone size [$zone_size]
  --zones N            number of zones [$zones]
  --zone-capacity SIZE zone capacity (< zone size, like ZNS) [= zone size]
  --num N              db_bench keys/ops [$num] (about a minute)
  --leveldb-num N      LevelDB driver keys/ops [$ldb_num]
  --value-size B       value size for both [$value_size]
  --dir DIR            where the temp dir with the device file goes [$base_dir]
  -o OPTS              zonefuse mount options (-o a,b)
  --build-dir DIR      meson build dir [build]
  --no-deps            skip scripts/deps.sh (package install)
  --no-build           use the existing build
  --keep               keep the device file and logs
  -h, --help           this help
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--zone-size) zone_size=$2; shift ;;
	--zones) zones=$2; shift ;;
	--zone-capacity) zone_cap=$2; shift ;;
	--num) num=$2; shift ;;
	--leveldb-num) ldb_num=$2; shift ;;
	--value-size) value_size=$2; shift ;;
	--dir) base_dir=$2; shift ;;
	-o) mount_opts=$2; shift ;;
	--build-dir) build_dir=$2; shift ;;
	--no-deps) do_deps=0 ;;
	--no-build) do_build=0 ;;
	--keep) keep=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "demo: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done

T0=$(date +%s)
step() { echo; echo "==> [+$(($(date +%s) - T0))s] $*"; }
info() { echo "    $*"; }
die() { echo "demo: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (FUSE mount of a device file, package install)"

# ---- packages and build --------------------------------------------------
if [ $do_deps -eq 1 ]; then
	step "installing packages (scripts/deps.sh)"
	scripts/deps.sh
fi
if [ $do_build -eq 1 ]; then
	step "building into $build_dir"
	if [ -d "$build_dir/meson-private" ]; then
		meson setup --reconfigure "$build_dir" >/dev/null
	else
		meson setup "$build_dir" >/dev/null
	fi
	blog=$build_dir/meson-logs/demo-ninja.log
	ninja -C "$build_dir" >"$blog" 2>&1 || { tail -n 30 "$blog" >&2; die "build failed (log: $blog)"; }
	info "ok"
fi
ZONEFUSE=$build_dir/zonefuse
EMU=$build_dir/zonefuse-emu
MKFS=$build_dir/mkfs.zonefuse
FSCK=$build_dir/fsck.zonefuse
ZSTAT=$build_dir/zonefuse-stat
LDB=$build_dir/zf-leveldb
for b in "$ZONEFUSE" "$EMU" "$MKFS" "$LDB"; do
	[ -x "$b" ] || die "$b was not built"
done
[ -c /dev/fuse ] || die "/dev/fuse is missing (modprobe fuse)"
command -v db_bench >/dev/null || die "db_bench missing (apt-get install rocksdb-tools)"

# ---- device, cleanup -----------------------------------------------------
work=$(realpath "$(mktemp -d "$base_dir/zonefuse-demo.XXXXXX")")
dev=$work/zoned.img
mnt=$work/mnt
log=$work/zonefuse.log
mkdir "$mnt"
: >"$log"
pid=

mounted() { awk -v m="$mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	cd /
	if mounted; then
		echo "demo: unmounting $mnt" >&2
		fusermount3 -u "$mnt" 2>/dev/null || { sleep 1; fusermount3 -u "$mnt"; } ||
			fusermount3 -u -z "$mnt" || umount -l "$mnt"
	fi
	if [ -n "$pid" ]; then
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	if [ "$rc" -ne 0 ] && [ -s "$log" ]; then
		echo "--- last lines of the zonefuse log ($log):" >&2
		tail -n 30 "$log" | sed 's/^/  | /' >&2
	fi
	if [ $keep -eq 1 ] || [ "$rc" -ne 0 ]; then
		echo "demo: device, logs and outputs kept in $work" >&2
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_fs() {
	local args=(-f)
	[ -z "$mount_opts" ] || args+=(-o "$mount_opts")
	echo "=== zonefuse $dev $mnt ${args[*]}" >>"$log"
	"$ZONEFUSE" "$dev" "$mnt" "${args[@]}" >>"$log" 2>&1 &
	pid=$!
	for _ in $(seq 150); do
		if mounted; then
			info "mounted $mnt (zonefuse pid $pid, log $log)"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || { wait "$pid" || true; pid=; die "zonefuse exited before mounting"; }
		sleep 0.1
	done
	die "zonefuse did not mount within 15 s"
}

umount_fs() {
	local st=0
	for _ in $(seq 20); do fusermount3 -u "$mnt" 2>/dev/null && break; sleep 0.5; done
	mounted && die "cannot unmount $mnt"
	wait "$pid" || st=$?
	pid=
	[ "$st" -eq 0 ] || die "zonefuse exited with status $st"
	if grep -qi 'error:' "$log"; then
		grep -i 'error:' "$log" | head -n 10 >&2
		die "zonefuse logged errors"
	fi
	info "unmounted, zonefuse exited 0"
}

# db_bench NAME DB ARGS...: result lines shown, full output in $work
results=()
dbb() {
	local name=$1 db=$2 out=$work/db_bench-$1.out
	shift 2
	local st=0
	db_bench --db="$db" "$@" >"$out" 2>&1 || st=$?
	tr '\r' '\n' <"$out" | grep -v '^\.\.\. finished' | grep -v '^ *$' >"$out.clean" || true
	if [ "$st" -ne 0 ] || grep -qE 'Corruption|IO error|failed' "$out.clean"; then
		tail -n 15 "$out.clean" >&2
		die "db_bench $name exited $st"
	fi
	local l
	while read -r l; do
		info "$l"
		results+=("db_bench  $l")
	done < <(grep -E '^[a-z0-9]+ +:' "$out.clean")
}
ldbrun() {
	local out
	out=$("$LDB" "$@" --db "$mnt/leveldb" --value-size "$value_size" --write-buffer-size 4M \
		--max-file-size 4M) || die "zf-leveldb $1 failed"
	info "$out"
	results+=("leveldb   $out")
}

step "creating an emulated zoned device: $zones zones x $zone_size (file $dev)"
emu_args=(--zone-size "$zone_size" --zones "$zones")
[ -z "$zone_cap" ] || emu_args+=(--zone-capacity "$zone_cap")
"$EMU" create "$dev" "${emu_args[@]}"
step "mkfs.zonefuse"
"$MKFS" "$dev"
step "mounting"
mount_fs

rocks=(--compression_type=none --value_size="$value_size" --write_buffer_size=8388608
	--target_file_size_base=16777216 --max_bytes_for_level_base=67108864
	--file_checksum=1 --seed=7)
step "RocksDB db_bench: fillrandom,waitforcompaction,overwrite,readrandom, $num ops of $value_size B"
dbb bench "$mnt/rocksdb" "${rocks[@]}" --num="$num" \
	--benchmarks=fillrandom,waitforcompaction,overwrite,readrandom
info "$(grep -c '"event": "compaction_finished"' "$mnt/rocksdb/LOG" || true) compactions," \
	"$(find "$mnt/rocksdb" -name '*.sst' | wc -l) SST files"

step "LevelDB (zf-leveldb): fill, overwrite, read, $ldb_num ops"
ldbrun fill --num "$ldb_num"
ldbrun overwrite --num "$ldb_num"
ldbrun read --num "$ldb_num"

step "unmount, fsck, remount"
umount_fs
if [ -x "$FSCK" ]; then
	"$FSCK" "$dev" >"$work/fsck.log" 2>&1 || { cat "$work/fsck.log" >&2; die "fsck.zonefuse found problems"; }
	info "fsck.zonefuse: clean"
fi
mount_fs

step "verifying both databases after the remount"
dbb verify "$mnt/rocksdb" "${rocks[@]}" --num="$num" --use_existing_db=1 \
	--benchmarks=verifychecksum,verifyfilechecksums,readseq
ldbrun verify

step "df -h $mnt"
df -h "$mnt"

step "stats (user.zonefuse.stats xattr)"
if stats=$(getfattr --only-values -n user.zonefuse.stats "$mnt" 2>/dev/null); then
	while read -r l; do info "$l"; done <<<"$stats"
	wa=$(sed -n 's/^write_amplification=//p' <<<"$stats")
else
	info "(no stats xattr in this build)"
	stats=
	wa=
fi

step "zone map"
if [ -x "$ZSTAT" ]; then
	"$ZSTAT" "$mnt" || info "(zonefuse-stat failed)"
	umount_fs
else
	umount_fs
	"$EMU" info "$dev" >"$work/zones.txt" 2>&1 || info "(zonefuse-emu info failed)"
	lines=$(wc -l <"$work/zones.txt")
	if [ "$lines" -le 60 ]; then
		sed 's/^/    /' "$work/zones.txt"
	else
		head -n 40 "$work/zones.txt" | sed 's/^/    /'
		info "... ($lines lines; full map in $work/zones.txt with --keep)"
		tail -n 5 "$work/zones.txt" | sed 's/^/    /'
	fi
fi
mounted && umount_fs

step "report"
info "device: $zones zones x $zone_size emulated, db_bench $num ops, LevelDB $ldb_num ops, values $value_size B"
for r in "${results[@]}"; do info "$r"; done
[ -z "$wa" ] || info "write amplification (device bytes / user bytes): $wa"
info "zonefuse log: $(grep -ci 'warning:' "$log" || true) warnings, 0 errors"
echo
echo "demo: OK ($(($(date +%s) - T0)) s)"
