#!/bin/bash
# Crash loop: random file system operations with acknowledged fsyncs logged
# OUTSIDE the file system (crashcheck.py), a crash at a random moment --
# kill -9 of the daemon, optionally followed by a simulated power loss of
# the emulated device (unflushed writes dropped, or torn with --tear) -- then
# fsck (must be clean), remount, and every acknowledged state verified:
# fsync'ed bytes, names after fsync(dir), no byte that was never written.
# Some points crash the daemon again while it is mounting (recovery itself
# interrupted), with a power loss too (after a kill -9: half the time).
# Then the same with databases: LevelDB and RocksDB through their C APIs
# with sync=true puts logged outside (dbcrash.py: every acknowledged key
# present, DB opens with paranoid checks), RocksDB's db_bench fillseq
# --sync=1 (its progress lines give a lower bound on the acknowledged keys,
# which are a prefix), and zf-leveldb overwrite --sync (its own crash-aware
# verify).
#
# CI runs the defaults; scripts/crashtest.sh runs the long version.
# Env:
#   ZF_CRASH_POINTS     file system crash points (default 20)
#   ZF_CRASH_MODES      crash kinds to cycle through (default "kill9 powerloss tear")
#   ZF_CRASH_SEED       base seed (default: from the clock; printed)
#   ZF_CRASH_MAXDELAY   max ms between the start of a round and the crash (2500)
#   ZF_CRASH_DB_ROUNDS  crash rounds per database workload (default 1; 0 = none)
#   ZF_CRASH_DB_KINDS   default "leveldb rocksdb dbbench zfleveldb"
# Replay one point: ZF_CRASH_SEED=<printed seed> ZF_CRASH_POINTS=<k> (the
# operation sequence is the same; the crash moment is timing-dependent).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)

zf_require_fuse
zf_require_prog python3 python3
points=${ZF_CRASH_POINTS:-20}
read -r -a modes <<<"${ZF_CRASH_MODES:-kill9 powerloss tear}"
seed=${ZF_CRASH_SEED:-$(( $(date +%s) % 1000000 ))}
maxdelay=${ZF_CRASH_MAXDELAY:-2500}
dbrounds=${ZF_CRASH_DB_ROUNDS:-1}
read -r -a dbkinds <<<"${ZF_CRASH_DB_KINDS:-leveldb rocksdb dbbench zfleveldb}"
RANDOM=$seed
zf_log "crash loop: $points points, modes ${modes[*]}, seed $seed (replay: ZF_CRASH_SEED=$seed)"

# Small zones so deleted files' zones are reset and reused within a run: a
# stale byte from a reused zone would show up in the checks.
zf_setup --zone-size 4M --zones 96 --max-open 14 --max-active 14
zf_mount

violations=0
crashes=0
declare -A count

# crash MODE POINT: kill -9 the daemon, then power loss if asked; counts it.
crash() {
	# The kill -9 follows at once.  The time is a file's mtime, as the
	# client's output file's is: file times come from the kernel's coarse
	# clock, up to a tick behind date's, so an output written just after
	# the kill could look older than a time read from date.
	touch "$ZF_WORK/crash.mark"
	crash_t=$(stat -c %.9Y "$ZF_WORK/crash.mark")
	zf_kill9
	case $1 in
	powerloss) "$ZF_EMU" powerloss "$ZF_DEV" >/dev/null || zf_fail "zonefuse-emu powerloss failed" ;;
	tear) "$ZF_EMU" powerloss --tear "$(( $2 * 7919 + 1 ))" "$ZF_DEV" >/dev/null ||
		zf_fail "zonefuse-emu powerloss --tear failed" ;;
	esac
	crashes=$((crashes + 1))
	count[$1]=$(( ${count[$1]:-0} + 1 ))
}

# recover MODE POINT: fsck must be clean; sometimes crash the daemon again
# while it mounts (replay + mount snapshot interrupted) before the real mount.
recover() {
	zf_fsck
	if (( RANDOM % 5 == 0 )); then
		local d=$(( RANDOM % 150 ))
		"$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -f >>"$ZF_LOG" 2>&1 &
		local pid=$!
		sleep "$(awk -v d="$d" 'BEGIN { printf "%.3f", d / 1000 }')"
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		if zf_is_mounted; then fusermount3 -u -z "$ZF_MNT" 2>/dev/null || umount -l "$ZF_MNT"; fi
		echo "=== daemon killed with SIGKILL while mounting (after $d ms)" >>"$ZF_LOG"
		# After a kill -9 the log may end in records never flushed, and
		# the interrupted mount acts on them: a power loss then too, half
		# the time.
		local pl=""
		if [ "$1" != kill9 ] || (( RANDOM % 2 )); then
			"$ZF_EMU" powerloss "$ZF_DEV" >/dev/null
			pl=" (power lost)"
		fi
		count[mount]=$(( ${count[mount]:-0} + 1 ))
		zf_log "  ...and crashed again $d ms into the remount$pl"
		zf_fsck
	fi
	zf_mount
}

# reap PID WHAT: after a crash every client must stop within 30 s (its
# requests fail with ENOTCONN); one that keeps going is not on the mount.
reap() {
	local i
	for ((i = 0; i < 300; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$1" 2>/dev/null || true
	zf_fail "the $2 (pid $1) was still running 30 s after the crash"
}

# ms_after_crash FILE: how long after the kill -9 (crash_t) FILE was last
# written (negative: before it; 0: within the same clock tick).
ms_after_crash() {
	awk -v m="$(stat -c %.9Y "$1")" -v c="$crash_t" 'BEGIN { printf "%.0f", (m - c) * 1000 }'
}

delay_s() { awk -v d="$1" 'BEGIN { printf "%.3f", d / 1000 }'; }

# ---- file system operations -------------------------------------------
for ((k = 1; k <= points; k++)); do
	s=$(( seed * 1000 + k ))
	mode=${modes[$(( (k - 1) % ${#modes[@]} ))]}
	# mostly spread over the range, sometimes very early
	if (( RANDOM % 6 == 0 )); then d=$(( RANDOM % 120 )); else d=$(( 50 + RANDOM % maxdelay )); fi
	dir=$ZF_MNT/r$k
	jr=$ZF_WORK/journal.$k
	mkdir "$dir"	# while mounted: the checker refuses a missing DIR
	python3 "$HERE/crashcheck.py" run "$dir" "$jr" --seed "$s" >"$ZF_WORK/run.$k.out" 2>&1 &
	cpid=$!
	# the delay counts from the checker's first operation (python start-up
	# is slow and varies with the load)
	for ((i = 0; i < 750; i++)); do
		grep -q '^READY' "$jr" 2>/dev/null && break
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.02
	done
	sleep "$(delay_s "$d")"
	crash "$mode" "$k"
	reap "$cpid" checker
	st=0
	wait "$cpid" || st=$?
	[ "$st" -eq 0 ] || zf_fail "point $k: the checker failed (exit $st): $(tail -n 5 "$ZF_WORK/run.$k.out")"
	recover "$mode"
	if ! python3 "$HERE/crashcheck.py" verify "$dir" "$jr" >"$ZF_WORK/verify.$k.out" 2>&1; then
		violations=$((violations + 1))
		cat "$ZF_WORK/verify.$k.out" >&2
		echo "point $k: seed $s, mode $mode, crash after $d ms; $(cat "$ZF_WORK/run.$k.out")" >&2
		cp "$jr" "${ZF_TMPDIR:-/tmp}/zf-crash-journal.$seed.$k" 2>/dev/null || true
		zf_fail "point $k: acknowledged state lost after $mode (journal kept in /tmp/zf-crash-journal.$seed.$k)"
	fi
	zf_log "point $k/$points: $mode after $d ms ($(sed 's/^crashcheck run: //' "$ZF_WORK/run.$k.out" | tail -n 1)): $(tail -n 1 "$ZF_WORK/verify.$k.out" | sed 's/^crashcheck verify: //')"
	# keep the two latest rounds; deleting the rest frees zones for reuse
	if (( k > 2 )); then rm -rf "$ZF_MNT/r$((k - 2))"; fi
done

# ---- databases ------------------------------------------------------------
# Databases live in $ZF_MNT/dbs, made while mounted: a client that starts
# after the daemon died finds no parent directory instead of creating its
# database in the directory under the mount point.
db_point() { # kind round
	local kind=$1 r=$2 d mode st late
	mkdir -p "$ZF_MNT/dbs"
	mode=${modes[$(( (r + ${#kind}) % ${#modes[@]} ))]}
	d=$(( 1500 + RANDOM % 2500 ))
	case $kind in
	leveldb | rocksdb)
		local db=$ZF_MNT/dbs/$kind ack=$ZF_WORK/ack-$kind
		python3 "$HERE/dbcrash.py" run --lib "$kind" "$db" "$ack" --seed "$((seed + r))" \
			>"$ZF_WORK/db.out" 2>&1 &
		local pid=$!
		sleep "$(delay_s "$d")"
		crash "$mode" "$r"
		reap "$pid" "$kind client"
		st=0
		wait "$pid" || st=$?
		# Debian's RocksDB is built with assertions, and some of them
		# assert that a call cannot fail (FileExists: access() gives EIO
		# or ENOMEM; IsSyncFileRangeSupported: fstatfs() succeeds).  On
		# the dead mount its background threads get ENOTCONN between the
		# crash and the client's exit: an abort whose message was written
		# after the kill -9 is the client's end, not a lost write
		# (verify below says that).  One written before fails the test.
		if [ "$st" -ne 0 ] && [ "$kind" = rocksdb ] &&
			grep -q "Assertion .* failed" "$ZF_WORK/db.out"; then
			late=$(ms_after_crash "$ZF_WORK/db.out")
			[ "$late" -ge 0 ] || zf_fail "rocksdb client aborted $((-late)) ms before the kill -9: $(tail -n 5 "$ZF_WORK/db.out")"
			zf_log "rocksdb client aborted $late ms after the $mode: $(grep -m1 'Assertion' "$ZF_WORK/db.out")"
			st=0
		fi
		[ "$st" -eq 0 ] || zf_fail "dbcrash run ($kind) failed: $(tail -n 5 "$ZF_WORK/db.out")"
		recover "$mode"
		python3 "$HERE/dbcrash.py" verify --lib "$kind" "$db" "$ack" >"$ZF_WORK/dbv.out" 2>&1 || {
			cat "$ZF_WORK/dbv.out" >&2
			zf_fail "$kind: acknowledged writes lost after $mode ($(cat "$ZF_WORK/db.out"))"
		}
		zf_log "$kind round $r: $mode after $d ms: $(tail -n 1 "$ZF_WORK/db.out"); $(tail -n 1 "$ZF_WORK/dbv.out")"
		;;
	dbbench)
		command -v db_bench >/dev/null && command -v ldb >/dev/null ||
			{ zf_log "db_bench/ldb missing, RocksDB db_bench round skipped"; return 0; }
		local db=$ZF_MNT/dbs/dbbench-$r
		db_bench --db="$db" --benchmarks=fillseq --num=2000000 --sync=1 --threads=1 \
			--compression_type=none --value_size=200 --write_buffer_size=262144 \
			--target_file_size_base=262144 --max_bytes_for_level_base=1048576 \
			--histogram=0 >"$ZF_WORK/dbb.out" 2>"$ZF_WORK/dbb.err" &
		local pid=$!
		sleep "$(delay_s "$d")"
		crash "$mode" "$r"
		reap "$pid" "$kind client"
		wait "$pid" 2>/dev/null || true
		# "... finished N ops" is printed after the N-th write returned (sync=1)
		local acked
		acked=$(tr '\r' '\n' <"$ZF_WORK/dbb.err" | sed -nE 's/^\.\.\. finished ([0-9]+) ops.*/\1/p' | tail -n 1)
		acked=${acked:-0}
		recover "$mode"
		# fillseq keys are the integers 0, 1, 2... (8 bytes big-endian, then '0'
		# padding): the DB must hold exactly 0..K-1 with K >= acked.
		ldb --db="$db" scan --hex >"$ZF_WORK/ldb.out" 2>"$ZF_WORK/ldb.err" || {
			cat "$ZF_WORK/ldb.err" >&2
			zf_fail "db_bench DB does not open after $mode (acknowledged $acked keys)"
		}
		python3 - "$ZF_WORK/ldb.out" "$acked" <<'PY' || zf_fail "db_bench fillseq: acknowledged keys lost after $mode"
import sys
keys = []
for line in open(sys.argv[1]):
    k = line.split(" ==> ")[0].strip()
    if k.startswith("0x"):
        keys.append(int(k[2:18], 16))
acked = int(sys.argv[2])
if keys != list(range(len(keys))):
    sys.exit(f"keys are not the prefix 0..{len(keys) - 1}")
if len(keys) < acked:
    sys.exit(f"{len(keys)} keys, db_bench had acknowledged at least {acked}")
print(f"{len(keys)} keys (>= {acked} acknowledged)")
PY
		zf_log "db_bench fillseq round $r: $mode after $d ms: $(wc -l <"$ZF_WORK/ldb.out") keys, >= $acked acknowledged"
		rm -rf "$db"
		;;
	zfleveldb)
		[ -x "$ZF_LEVELDB" ] || { zf_log "zf-leveldb not built, round skipped"; return 0; }
		local db=$ZF_MNT/dbs/zfleveldb
		if [ ! -d "$db" ]; then
			"$ZF_LEVELDB" fill --db "$db" --num 20000 --value-size 200 --write-buffer-size 256K \
				--max-file-size 256K >/dev/null || zf_fail "zf-leveldb fill failed"
		fi
		"$ZF_LEVELDB" overwrite --db "$db" --num 1000000 --sync --value-size 200 \
			--write-buffer-size 256K --max-file-size 256K --seed "$((seed + r))" \
			>"$ZF_WORK/zfl.out" 2>&1 &
		local pid=$!
		sleep "$(delay_s "$d")"
		crash "$mode" "$r"
		reap "$pid" "$kind client"
		wait "$pid" 2>/dev/null || true
		recover "$mode"
		"$ZF_LEVELDB" verify --db "$db" >"$ZF_WORK/zflv.out" 2>&1 || {
			cat "$ZF_WORK/zflv.out" >&2
			zf_fail "zf-leveldb verify failed after $mode"
		}
		zf_log "zf-leveldb overwrite --sync round $r: $mode after $d ms: $(tail -n 1 "$ZF_WORK/zflv.out")"
		;;
	esac
}
for ((r = 1; r <= dbrounds; r++)); do
	for kind in "${dbkinds[@]}"; do
		db_point "$kind" "$r"
	done
done

zf_umount
zf_fsck
summary=""
for m in "${!count[@]}"; do summary+="$m ${count[$m]}, "; done
zf_pass "$crashes crash points (${summary%, }), $violations violations, seed $seed"
