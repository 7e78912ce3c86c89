#!/bin/bash
# fsx-style model test (fsx.py): random write / append / truncate /
# fallocate / punch hole / read / mmap read / mmap write / fsync / reopen /
# create / rename / link / unlink, applied to zonefuse and to a reference
# directory on tmpfs, compared after every step.  The run is split into
# phases; between phases zonefuse is unmounted, fsck'ed and remounted and the
# whole tree compared again (what was written is what is read back from the
# device).  Seeds are printed; a failure prints the last operations and the
# command that replays it.
# Env: ZF_FSX_SEED (default: clock), ZF_FSX_OPS (ops per phase, default
# 2000), ZF_FSX_PHASES (default 3), ZF_FSX_MAXSIZE (bytes per file, 6 MiB),
# ZF_FSX_MOUNT_OPTS (extra daemon arguments, e.g. "-o prefetch_kb=0").
#
# Known bug (fs_data.c/fs_prefetch.c, reported; unit test
# test_records:prefetch_after_flush): writing buffered pages out does not
# invalidate read-ahead windows filled before, so a later read can return
# the old device bytes.  When a run with read-ahead on differs, the same
# seed is run again with -o prefetch_kb=0: if that one is identical the
# difference is reported as the known bug and tolerated (set
# ZF_STRICT_KNOWN_BUGS=1 to fail instead).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)

zf_require_fuse
zf_require_prog python3 python3
seed=${ZF_FSX_SEED:-$(( $(date +%s) % 1000000 ))}
ops=${ZF_FSX_OPS:-2000}
phases=${ZF_FSX_PHASES:-3}
maxsize=${ZF_FSX_MAXSIZE:-$((6 << 20))}
zf_log "fsx: seed $seed, $phases phases of $ops operations (replay: ZF_FSX_SEED=$seed)"

# small zones: truncates, punches and overwrites free whole zones, so the
# run also reads data from reset-and-reused zones
zf_setup --zone-size 4M --zones 64
REF=$(mktemp -d /dev/shm/zf-fsx-ref.XXXXXX 2>/dev/null || mktemp -d "$ZF_WORK/ref.XXXXXX")
cleanup_ref() { rm -rf "$REF"; }
trap 'cleanup_ref; zf_teardown' EXIT
[ "$(stat -f -c %T "$REF")" = tmpfs ] || zf_log "note: reference directory $REF is not on tmpfs"

total=0
failure=
# model OPTS...: a fresh file system, all phases; returns 1 (message in
# $failure) on the first difference.
model() {
	local p
	failure=
	find "$REF" -mindepth 1 -delete
	"$ZF_MKFS" --force "$ZF_DEV" >"$ZF_WORK/mkfs.log" 2>&1 || zf_fail "mkfs.zonefuse --force failed"
	zf_mount "$@"
	for ((p = 0; p < phases; p++)); do
		if ! python3 "$HERE/fsx.py" run "$ZF_MNT/fsx" "$REF" --seed "$seed" --ops "$ops" \
			--start "$((p * ops))" --maxsize "$maxsize" >"$ZF_WORK/fsx.$p.out" 2>&1; then
			cat "$ZF_WORK/fsx.$p.out" >&2
			failure="phase $p: zonefuse differs from the reference (seed $seed, mount options: ${*:-none})"
			zf_umount
			return 1
		fi
		total=$((total + ops))
		zf_log "phase $p${*:+ ($*)}: $(tail -n 1 "$ZF_WORK/fsx.$p.out")"
		zf_umount
		zf_fsck
		zf_mount "$@"
		if ! python3 "$HERE/fsx.py" verify "$ZF_MNT/fsx" "$REF" >"$ZF_WORK/verify.$p.out" 2>&1; then
			cat "$ZF_WORK/verify.$p.out" >&2
			failure="phase $p: after unmount + remount zonefuse differs from the reference (seed $seed)"
			zf_umount
			return 1
		fi
	done
	zf_check_log
	zf_umount
	zf_fsck
}

read -r -a mopts <<<"${ZF_FSX_MOUNT_OPTS:-}"
note=
if ! model "${mopts[@]}"; then
	if [ "${ZF_STRICT_KNOWN_BUGS:-0}" = 1 ] || [[ " ${mopts[*]} " == *prefetch_kb=0* ]]; then
		zf_fail "$failure"
	fi
	zf_log "$failure; running seed $seed again with read-ahead off (-o prefetch_kb=0)"
	first=$failure
	model "${mopts[@]}" -o prefetch_kb=0 || zf_fail "$failure"
	note="; KNOWN BUG (tolerated): with read-ahead on, $first -- identical with -o prefetch_kb=0 (stale prefetch window after a buffer flush, see test_records:prefetch_after_flush)"
	echo "SKIP-KNOWN-BUG: $ZF_TEST: $first (read-ahead: stale window after a buffer flush)"
fi
zf_pass "$total model operations identical to tmpfs, $phases remounts per run, seed $seed$note"
