#!/bin/bash
# Metadata crash loop: a device with a small metadata log (mkfs --meta-zones
# 3 on 1 MiB zones: 3 MiB of log) so that snapshots, log zone switches and
# log growth happen all through the churn.  Each point: metacrash.py runs
# create / unlink / rename / setxattr (user.*) / removexattr / symlink /
# mkdir / rmdir with fsyncs of files and of directories, journalling every
# acknowledged operation outside the file system; at a random moment the
# daemon is crashed -- kill -9, kill -9 + emulated power loss, or kill -9 +
# power loss with torn writes (zonefuse-emu powerloss --tear SEED), cycling
# -- and sometimes crashed again while it mounts; fsck must be clean, every
# remount must succeed, and every fsync'ed name must be there with its
# xattrs / symlink target (metacrash.py verify: promise and prefix checks).
# Every earlier round still on the device is verified again after each
# crash, and so is a base population of ZF_MCRASH_BASE (3000) small files
# made at the start (a snapshot has something to carry).  An operation that
# fails before the crash (ENOSPC from a full log, EIO...) fails the test.
#
# Env:
#   ZF_MCRASH_POINTS    crash points (default 20; scripts/crashtest.sh --meta
#                       runs 200)
#   ZF_MCRASH_MODES     default "kill9 powerloss tear"
#   ZF_MCRASH_SEED      base seed (default from the clock; printed)
#   ZF_MCRASH_MAXDELAY  max ms from the first operation to the crash (2500)
#   ZF_MCRASH_KEEP      rounds kept on the device (default 6; older ones
#                       are deleted, which is churn of its own)
#   ZF_MCRASH_BASE      base files (default 3000)
#   ZF_MCRASH_ZONES / ZF_MCRASH_ZONE_SIZE / ZF_MCRASH_META_ZONES
#                       device: 96 x 1M, 3 meta zones
# About 3-5 s per point on a 2-vCPU VM: 20 points ~1.5 min, 200 ~9-17 min.
# At a3030cd the default fails at point 5-6: an fsync (or create...) gets
# ENOSPC, "metadata snapshot failed: No space left on device" -- the 3-zone
# log cannot hold a snapshot of ~4000 inodes.  With ZF_MCRASH_BASE=0
# ZF_MCRASH_KEEP=2 (a few hundred inodes) 200 points pass (530 s).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)

zf_require_fuse
zf_require_prog python3 python3
points=${ZF_MCRASH_POINTS:-20}
read -r -a modes <<<"${ZF_MCRASH_MODES:-kill9 powerloss tear}"
seed=${ZF_MCRASH_SEED:-$(( $(date +%s) % 1000000 ))}
maxdelay=${ZF_MCRASH_MAXDELAY:-2500}
keep=${ZF_MCRASH_KEEP:-6}
base=${ZF_MCRASH_BASE:-3000}
metaz=${ZF_MCRASH_META_ZONES:-3}
RANDOM=$seed
zf_log "meta crash loop: $points points, modes ${modes[*]}, seed $seed (replay: ZF_MCRASH_SEED=$seed)"

zf_setup --zone-size "${ZF_MCRASH_ZONE_SIZE:-1M}" --zones "${ZF_MCRASH_ZONES:-96}" --max-open 14 --max-active 14
"$ZF_MKFS" --force --meta-zones "$metaz" "$ZF_DEV" >"$ZF_WORK/mkfs.log" 2>&1 ||
	zf_fail "mkfs.zonefuse --meta-zones $metaz failed: $(tail -n 5 "$ZF_WORK/mkfs.log")"
zf_log "$(grep -o 'metadata log: .*' "$ZF_WORK/mkfs.log")"
zf_mount

crashes=0 snaps=0 metaresets=0
declare -A count

if [ "$base" -gt 0 ]; then
	mkdir "$ZF_MNT/base"
	python3 "$HERE/metascale.py" create "$ZF_MNT/base" "$ZF_WORK/base.journal" --first 0 --last "$base" \
		--dirs 20 --fsync-every 100 >"$ZF_WORK/base.out" 2>&1 || zf_fail "base files: $(tail -n 3 "$ZF_WORK/base.out")"
	zf_log "base: $(tail -n 1 "$ZF_WORK/base.out")"
fi

crash() { # MODE POINT
	zf_kill9
	case $1 in
	powerloss) "$ZF_EMU" powerloss "$ZF_DEV" >/dev/null || zf_fail "zonefuse-emu powerloss failed" ;;
	tear) "$ZF_EMU" powerloss --tear "$(( $2 * 7919 + seed ))" "$ZF_DEV" >/dev/null ||
		zf_fail "zonefuse-emu powerloss --tear failed" ;;
	esac
	crashes=$((crashes + 1))
	count[$1]=$(( ${count[$1]:-0} + 1 ))
}

recover() { # MODE
	zf_fsck
	if (( RANDOM % 6 == 0 )); then
		local d=$(( RANDOM % 200 ))
		echo "=== $(date '+%F %T') zonefuse (to be killed while mounting)" >>"$ZF_LOG"
		"$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -f >>"$ZF_LOG" 2>&1 &
		local pid=$!
		sleep "$(awk -v d="$d" 'BEGIN { printf "%.3f", d / 1000 }')"
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		if zf_is_mounted; then fusermount3 -u -z "$ZF_MNT" 2>/dev/null || umount -l "$ZF_MNT"; fi
		echo "=== daemon killed with SIGKILL while mounting (after $d ms)" >>"$ZF_LOG"
		[ "$1" = kill9 ] || "$ZF_EMU" powerloss "$ZF_DEV" >/dev/null
		count[mount]=$(( ${count[mount]:-0} + 1 ))
		zf_log "  ...and crashed again $d ms into the remount"
		zf_fsck
	fi
	zf_mount
}

reap() { # PID
	local i
	for ((i = 0; i < 300; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$1" 2>/dev/null || true
	zf_fail "the churn (pid $1) was still running 30 s after the crash"
}

verify_round() { # K
	local k=$1
	python3 "$HERE/metacrash.py" verify "$ZF_MNT/r$k" "$ZF_WORK/journal.$k" >"$ZF_WORK/verify.$k.out" 2>&1 || {
		cat "$ZF_WORK/verify.$k.out" >&2
		cp "$ZF_WORK/journal.$k" "${ZF_TMPDIR:-/tmp}/zf-metacrash-journal.$seed.$k" 2>/dev/null || true
		zf_fail "round $k: acknowledged metadata lost (journal kept in ${ZF_TMPDIR:-/tmp}/zf-metacrash-journal.$seed.$k)"
	}
}

for ((k = 1; k <= points; k++)); do
	s=$(( seed * 1000 + k ))
	mode=${modes[$(( (k - 1) % ${#modes[@]} ))]}
	if (( RANDOM % 6 == 0 )); then d=$(( RANDOM % 150 )); else d=$(( 100 + RANDOM % maxdelay )); fi
	jr=$ZF_WORK/journal.$k marker=$ZF_WORK/crashing.$k
	rm -f "$marker"
	mkdir "$ZF_MNT/r$k"
	python3 "$HERE/metacrash.py" run "$ZF_MNT/r$k" "$jr" --seed "$s" --crash-marker "$marker" \
		>"$ZF_WORK/run.$k.out" 2>&1 &
	cpid=$!
	for ((i = 0; i < 750; i++)); do
		grep -q '^READY' "$jr" 2>/dev/null && break
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.02
	done
	sleep "$(awk -v d="$d" 'BEGIN { printf "%.3f", d / 1000 }')"
	st=$(zf_stats) || true
	v=$(sed -n 's/^snapshots=//p' <<<"$st" | head -n 1) || true
	snaps=$((snaps + ${v:-0}))
	v=$(sed -n 's/^meta_zone_resets=//p' <<<"$st" | head -n 1) || true
	metaresets=$((metaresets + ${v:-0}))
	: >"$marker"
	crash "$mode" "$k"
	reap "$cpid"
	rc=0
	wait "$cpid" || rc=$?
	[ "$rc" -eq 0 ] || zf_fail "point $k: $(tail -n 3 "$ZF_WORK/run.$k.out") (seed $s)"
	recover "$mode"
	verify_round "$k"
	for ((o = k - 1; o >= 1 && o > k - keep; o--)); do verify_round "$o"; done
	if [ "$base" -gt 0 ]; then
		python3 "$HERE/metascale.py" verify "$ZF_MNT/base" "$ZF_WORK/base.journal" --dirs 20 \
			>"$ZF_WORK/base.out" 2>&1 || { cat "$ZF_WORK/base.out" >&2; zf_fail "point $k: base files lost"; }
	fi
	zf_log "point $k/$points: $mode after $d ms: $(sed 's/^metacrash run: //' "$ZF_WORK/run.$k.out" | tail -n 1); $(sed 's/^metacrash verify: //' "$ZF_WORK/verify.$k.out" | tail -n 1)"
	if (( k >= keep )); then rm -rf "$ZF_MNT/r$((k - keep + 1))"; fi
done

zf_umount
zf_fsck
zf_mount
for ((o = points; o >= 1 && o > points - keep + 1; o--)); do verify_round "$o"; done
zf_umount
summary=""
for m in "${!count[@]}"; do summary+="$m ${count[$m]}, "; done
zf_pass "$crashes crash points (${summary%, }); $snaps snapshots and $metaresets meta zone resets in the churn; seed $seed"
