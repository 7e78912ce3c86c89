#!/bin/bash
# scripts/bench.sh's own rules, on small sizes (db_bench, IoT and metadata
# parts):
# - a db_bench or LevelDB IoT run that fails on passthrough_ll (the
#   reference, not the system under test) is left out of its row with a
#   warning and the bench ends 0; the rows still hold zonefuse's and ext4's
#   medians;
# - each round starts one target further along (round 1 zonefuse first,
#   round 2 ext4, round 3 passthrough_ll);
# - a db_bench run that fails on zonefuse fails the bench (exit 1), and the
#   bench leaves no mount, loop device or work dir behind;
# - the FUSE round trip row has zonefuse and passthrough_ll, and no ext4
#   (it must not enter the geometric mean against ext4); a round trip run
#   that fails on null (also a reference) is left out the same way;
# - the bench builds its round trip program when the build dir has none,
#   and keeps one that is newer than its source;
# - the bench's zonefuse daemon logged no error.
# db_bench fails on demand through a wrapper first on PATH, zf-leveldb
# through a build dir of links to the real one's programs and a wrapper,
# the round trip program through a wrapper in that build dir's bench-ref.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog db_bench rocksdb-tools
zf_require_prog mkfs.ext4 e2fsprogs
zf_require_prog losetup mount
zf_require_prog getfattr attr
[ -f /usr/share/doc/libfuse3-dev/examples/passthrough_ll.c ] ||
	zf_skip "libfuse's passthrough_ll example is missing (apt-get install libfuse3-dev)"
zf_setup

# failing_wrapper PATH REAL VAR: writes PATH, a program that fails (exit 1,
# "injected failure") when one of its arguments is the mount point
# mnt-$VAR or a path under it (--db=DIR included), and runs REAL otherwise
failing_wrapper() {
	local name
	name=$(basename "$1")
	cat >"$1" <<EOF
#!/bin/bash
for a in "\$@"; do
	case "\$a" in *"/mnt-\${$3:-none}"|*"/mnt-\${$3:-none}/"*) echo "$name: injected failure" >&2; exit 1 ;; esac
done
exec "$2" "\$@"
EOF
	chmod +x "$1"
}
mkdir "$ZF_WORK/bin" "$ZF_WORK/tmp"
# db_bench, first on PATH, failing when its --db is under mnt-$FAIL_ON
failing_wrapper "$ZF_WORK/bin/db_bench" "$(command -v db_bench)" FAIL_ON
# the build dir the bench gets: the programs it runs from there, with
# zf-leveldb failing when its --db is under mnt-$FAIL_ON; the references
# (bench-ref) are built into it by the bench itself
mkdir "$ZF_WORK/build" "$ZF_WORK/build/bench-ref"
for p in zonefuse zonefuse-emu mkfs.zonefuse; do
	ln -s "$ZF_BUILD_DIR/$p" "$ZF_WORK/build/$p"
done
failing_wrapper "$ZF_WORK/build/zf-leveldb" "$ZF_BUILD_DIR/zf-leveldb" FAIL_ON
# the round trip program, failing when its file is mnt-$FAIL_RTT_ON (null's
# mount point is its file) or under it; newer than its source, so the
# bench keeps it
cc -std=c11 -O2 "$ZF_SRC_DIR/scripts/lib/fuse-rtt.c" -o "$ZF_WORK/fuse-rtt" ||
	zf_fail "cannot build scripts/lib/fuse-rtt.c"
failing_wrapper "$ZF_WORK/build/bench-ref/fuse-rtt" "$ZF_WORK/fuse-rtt" FAIL_RTT_ON

bench() { # FAIL_ON FAIL_RTT_ON RESULTS-DIR: runs the bench, sets rc; output in RESULTS-DIR.out
	local results=$3
	rc=0
	FAIL_ON=$1 FAIL_RTT_ON=$2 PATH="$ZF_WORK/bin:$PATH" TMPDIR="$ZF_WORK/tmp" \
		"$ZF_SRC_DIR/scripts/bench.sh" --quick --no-deps --no-build --build-dir "$ZF_WORK/build" \
		--results "$results" --parts dbbench,iot,meta --db-num 3000 --db-sync-num 300 --db-runs 3 \
		--iot-num 2000 --iot-threads 1 --iot-sensors 1 --iot-runs 2 \
		--md-files 200 --md-threads 1 --md-runs 1 >"$results.out" 2>&1 || rc=$?
}
leftovers() { # prints what the bench left behind
	grep -F "$ZF_WORK/tmp" /proc/mounts || true
	losetup -a | grep -F "$ZF_WORK/tmp" || true
	find "$ZF_WORK/tmp" -mindepth 1 -maxdepth 1 || true
}

# 1. passthrough_ll's db_bench and IoT runs and null's round trip runs fail:
# left out, the bench passes
bench passthrough null "$ZF_WORK/r1"
[ "$rc" = 0 ] || { tail -n 30 "$ZF_WORK/r1.out"; zf_fail "bench with a failing reference ended $rc, not 0"; }
grep -q 'passthrough_ll.*left out' "$ZF_WORK/r1.out" ||
	{ tail -n 30 "$ZF_WORK/r1.out"; zf_fail "no warning about the left-out passthrough_ll runs"; }
md=$(echo "$ZF_WORK"/r1/bench-*/results.md)
[ -f "$md" ] || zf_fail "no results.md"
row=$(grep -E '^\| rocksdb \| fillrandom \|' "$md") || zf_fail "no db_bench fillrandom row in results.md"
# | rocksdb | fillrandom | ops/s | zonefuse | ext4 | tmpfs | passthrough_ll | ...
IFS='|' read -r _ _ _ _ zf ext4 _ pt _ <<<"$row"
[[ "$zf" =~ [1-9] && "$ext4" =~ [1-9] ]] || zf_fail "fillrandom row lacks zonefuse or ext4: $row"
[ "${pt// /}" = - ] || zf_fail "passthrough_ll's failed runs made a value: $row"
# the IoT row: passthrough_ll's failed runs left out, as db_bench's
row=$(grep -E '^\| leveldb-iot \| 1 thr x 1 sensors \|' "$md") || zf_fail "no LevelDB IoT row in results.md"
IFS='|' read -r _ _ _ _ zf ext4 _ pt _ <<<"$row"
[[ "$zf" =~ [1-9] && "$ext4" =~ [1-9] ]] || zf_fail "IoT row lacks zonefuse or ext4: $row"
[ "${pt// /}" = - ] || zf_fail "passthrough_ll's failed IoT runs made a value: $row"
grep -q 'zf-leveldb iot.*on passthrough_ll failed; run left out' "$ZF_WORK/r1.out" ||
	zf_fail "no warning about the left-out IoT runs"
# the round trip row: zonefuse and passthrough_ll measured, null's failed
# run left out
row=$(grep -E '^\| FUSE round trip \|' "$md") || zf_fail "no FUSE round trip row in results.md"
IFS='|' read -r _ _ _ _ zf ext4 _ pt null _ <<<"$row"
[[ "$zf" =~ [1-9] && "$pt" =~ [1-9] ]] || zf_fail "round trip row lacks zonefuse or passthrough_ll: $row"
[ "${null// /}" = - ] || zf_fail "null's failed round trip run made a value: $row"
[ "${ext4// /}" = - ] || zf_fail "round trip row has an ext4 value (it would enter the mean): $row"
grep -q 'FUSE round trip on null failed; run left out' "$ZF_WORK/r1.out" ||
	zf_fail "no warning about the left-out round trip run on null"
grep -q 'one FUSE round trip (a GETATTR, statx forced): zonefuse [0-9.]* us, passthrough_ll [0-9.]* us;' "$ZF_WORK/r1.out" ||
	zf_fail "no round trip line of zonefuse and passthrough_ll alone in the bench's output"
rtt_row=$row
zf_log "left out: $(cat "$ZF_WORK"/r1/bench-*/logs/db_bench-passthrough*.txt | grep -c 'injected failure') failed passthrough_ll runs; row: $row"

# the order: the first db_bench target of rounds 1, 2 and 3
firsts=$(sed -n 's/.*RocksDB db_bench on \([a-z0-9_]*\): .*run \([0-9]*\) of 3.*/\2 \1/p' "$ZF_WORK/r1.out" |
	awk '!seen[$1]++ { printf "%s ", $2 }')
[ "$firsts" = "zonefuse ext4 passthrough " ] || zf_fail "rounds started with: $firsts (expected zonefuse ext4 passthrough)"
grep -qi 'error:' "$ZF_WORK"/r1/bench-*/logs/zonefuse.log &&
	zf_fail "the bench's zonefuse daemon logged an error: $(grep -i -m 3 'error:' "$ZF_WORK"/r1/bench-*/logs/zonefuse.log)"
left=$(leftovers)
[ -z "$left" ] || zf_fail "the bench left behind: $left"

# 2. zonefuse's db_bench fails: the bench fails and cleans up; with no round
# trip program in the build dir, the bench has built one first
rm "$ZF_WORK/build/bench-ref/fuse-rtt"
bench zonefuse none "$ZF_WORK/r2"
[ "$rc" = 1 ] || { tail -n 30 "$ZF_WORK/r2.out"; zf_fail "bench with a failing zonefuse run ended $rc, not 1"; }
grep -q 'FAILED' "$ZF_WORK/r2.out" || zf_fail "no FAILED line: $(tail -n 5 "$ZF_WORK/r2.out")"
left=$(leftovers)
[ -z "$left" ] || zf_fail "the failed bench left behind: $left"
built=$("$ZF_WORK/build/bench-ref/fuse-rtt" "$ZF_WORK/build/bench-ref" 10) ||
	zf_fail "the bench built no working round trip program"
[[ "$built" =~ ^[0-9]+(\.[0-9]+)?$ ]] || zf_fail "the bench's round trip program printed: $built"

zf_pass "failing reference runs (db_bench, IoT on passthrough_ll, the round trip on null) left out (rounds started zonefuse, ext4, passthrough); round trip row: $rtt_row; a failing zonefuse run failed the bench; its round trip program built; nothing left behind"
