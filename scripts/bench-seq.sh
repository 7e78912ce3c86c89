#!/bin/bash
# Sequential 1 MiB throughput of one or more zonefuse builds side by side
# with libfuse's null example (the FUSE ceiling), for before/after runs of
# a data-path change.  Per round and per target (targets alternate within
# a round): a fresh emulated device (--zones x 64 MiB on a tmpfs of our
# own), mkfs, mount; a warm-up file of --warm written with fsync and
# deleted (so that later writes reuse reset zones, as a long-running
# mount does); then --writes files of --size, each written (fio sync 1 MiB
# blocks, end_fsync) and deleted except the last, which is then read cold
# (invalidate=1).  Prints each run's MiB/s and, per target, the median of
# all write runs and of the reads.  null gets zonefuse's bdi settings
# (no strict dirty limit, 256 MiB cap, 1 MiB readahead), as in bench.sh.
#
# Needs root, /dev/fuse and fio (exit 77 without them).
# Usage: scripts/bench-seq.sh [--rounds 3] [--size 512m] [--warm 1g]
#          [--writes 3] [--zones 32] [--no-null] [--opts O] BUILD_DIR...
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bdi.sh
. scripts/lib/bdi.sh
rounds=3
size=512m
warm=1g
writes=3
zones=32
null=1
opts=
builds=()
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--warm) warm=$2; shift 2 ;;
	--writes) writes=$2; shift 2 ;;
	--zones) zones=$2; shift 2 ;;
	--no-null) null=0; shift ;;
	--opts) opts=$2; shift 2 ;;
	-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
	-*) echo "bench-seq: unknown option $1" >&2; exit 2 ;;
	*) builds+=("$(cd "$1" && pwd)"); shift ;;
	esac
done
[ ${#builds[@]} -gt 0 ] || builds=("$(pwd)/build")
[ "$(id -u)" -eq 0 ] || { echo "bench-seq: needs root (skipped)"; exit 77; }
[ -c /dev/fuse ] || { echo "bench-seq: no /dev/fuse (skipped)"; exit 77; }
command -v fio >/dev/null || { echo "bench-seq: fio is not installed (skipped)"; exit 77; }
for b in "${builds[@]}"; do
	for x in zonefuse zonefuse-emu mkfs.zonefuse; do
		[ -x "$b/$x" ] || { echo "bench-seq: $b/$x is missing" >&2; exit 1; }
	done
done

work=$(mktemp -d /tmp/zf-bench-seq.XXXXXX)
ram=$work/ram mnt=$work/mnt nullf=$work/null-file pid=
mkdir -p "$ram" "$mnt"
touch "$nullf"
cleanup() {
	fusermount3 -u "$mnt" 2>/dev/null || true
	fusermount3 -u "$nullf" 2>/dev/null || true
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
	umount "$ram" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mount -t tmpfs -o size=$((zones * 64 + 1024))m tmpfs "$ram"

NULLFS=
if [ "$null" = 1 ]; then
	ex=/usr/share/doc/libfuse3-dev/examples
	if [ -f "$ex/null.c" ]; then cp "$ex/null.c" "$work/null.c"
	elif [ -f "$ex/null.c.gz" ]; then gzip -dc "$ex/null.c.gz" >"$work/null.c"
	fi
	# shellcheck disable=SC2046
	if [ -f "$work/null.c" ] && cc -O2 "$work/null.c" $(pkg-config fuse3 --cflags --libs) \
		-o "$work/null" 2>/dev/null; then
		NULLFS=$work/null
	else
		echo "bench-seq: cannot build libfuse's null example; no null column" >&2
	fi
fi

mounted() { grep -q " $1 fuse" /proc/mounts; }
wait_mount() {
	local i
	for ((i = 0; i < 100; i++)); do mounted "$1" && return 0; sleep 0.1; done
	echo "bench-seq: $1 did not mount" >&2
	exit 1
}
fio_bw() { # fio args...: MiB/s of the job
	fio --ioengine=sync --bs=1m --output-format=terse "$@" 2>/dev/null |
		awk -F';' '{ print int(($7 > 0 ? $7 : $48) / 1024) }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "-" }'; }

declare -A wr rd
run_zf() { # build
	local b=$1 i w r ws=""
	rm -f "$ram/z.img"
	"$b/zonefuse-emu" create "$ram/z.img" --zone-size 64M --zones "$zones" >/dev/null
	"$b/mkfs.zonefuse" "$ram/z.img" >/dev/null
	# shellcheck disable=SC2086
	"$b/zonefuse" "$ram/z.img" "$mnt" -f ${opts:+-o $opts} >"$work/zf.log" 2>&1 &
	pid=$!
	wait_mount "$mnt"
	fio --name=warm --rw=write --bs=1m --size="$warm" --end_fsync=1 --ioengine=sync \
		--directory="$mnt" --filename=warm >/dev/null
	rm -f "$mnt/warm"
	for ((i = 1; i <= writes; i++)); do
		w=$(fio_bw --name=w --rw=write --size="$size" --end_fsync=1 --directory="$mnt" --filename="f$i")
		ws="$ws $w"
		wr[$b]="${wr[$b]:-} $w"
		[ "$i" = "$writes" ] || rm -f "$mnt/f$i"
	done
	r=$(fio_bw --name=r --rw=read --size="$size" --invalidate=1 --directory="$mnt" --filename="f$writes")
	rd[$b]="${rd[$b]:-} $r"
	fusermount3 -u "$mnt"
	wait "$pid" || { tail -n 5 "$work/zf.log" >&2; echo "bench-seq: daemon failed" >&2; exit 1; }
	pid=
	if grep -qi 'error:' "$work/zf.log"; then
		grep -i 'error:' "$work/zf.log" >&2
		exit 1
	fi
	printf '%-40s write%s  read %s\n' "$b" "$ws" "$r"
}
run_null() {
	local w r
	"$NULLFS" -f "$nullf" >"$work/null.log" 2>&1 &
	pid=$!
	wait_mount "$nullf"
	bdi_like_zonefuse "$nullf"
	w=$(fio_bw --name=w --rw=write --size="$size" --end_fsync=1 --filename="$nullf")
	r=$(fio_bw --name=r --rw=read --size="$size" --invalidate=1 --filename="$nullf")
	wr[null]="${wr[null]:-} $w"
	rd[null]="${rd[null]:-} $r"
	fusermount3 -u "$nullf"
	wait "$pid" || true
	pid=
	printf '%-40s write %s  read %s\n' null "$w" "$r"
}

echo "bench-seq: $rounds rounds, $size files, warm-up $warm, $writes writes per mount, $zones x 64 MiB zones"
for ((k = 1; k <= rounds; k++)); do
	echo "round $k (load $(cut -d' ' -f1 /proc/loadavg))"
	for b in "${builds[@]}"; do run_zf "$b"; done
	[ -z "$NULLFS" ] || run_null
done
echo
printf '%-40s %12s %12s\n' target "write MiB/s" "read MiB/s"
for t in "${builds[@]}" ${NULLFS:+null}; do
	printf '%-40s %12s %12s\n' "$t" \
		"$(tr ' ' '\n' <<<"${wr[$t]}" | grep . | median)" \
		"$(tr ' ' '\n' <<<"${rd[$t]}" | grep . | median)"
done
