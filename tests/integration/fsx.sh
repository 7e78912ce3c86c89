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
# Read-ahead is on (the default) so its windows are checked against every
# kind of write; a differing seed is run once more with -o prefetch_kb=0 to
# tell in the failure message whether read-ahead is involved.
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
if ! model "${mopts[@]}"; then
	first=$failure
	if [[ " ${mopts[*]} " != *prefetch_kb=0* ]]; then
		zf_log "$failure; running seed $seed again with read-ahead off (-o prefetch_kb=0)"
		if model "${mopts[@]}" -o prefetch_kb=0; then
			zf_fail "$first (identical with -o prefetch_kb=0: read-ahead is involved)"
		fi
	fi
	zf_fail "$first"
fi
zf_pass "$total model operations identical to tmpfs, $phases remounts per run, seed $seed"
