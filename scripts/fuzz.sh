#!/bin/bash
# Fuzz the on-disk parsers with libFuzzer (clang, ASan + UBSan):
#   fuzz_mlog    superblock / zone headers / chains / records (mlog_probe, mlog_open)
#   fuzz_replay  fs record replay (fs_replay_record) + every read entry point
#   fuzz_mount   mount-time recovery, fsck, read-write mount + remount
#
#   scripts/fuzz.sh [--short] [--time S] [--target NAME] [--jobs N]
#     --short      CI: ~20 s per target (about 1-2 minutes with the build)
#     --time S     seconds per target (default 300)
#     --target T   only this target (repeatable)
#     --jobs N     libFuzzer worker processes per target (default 1)
# First every input in tests/fuzz/regress/<target>/ (crashes found before)
# is run; then each target fuzzes from build-fuzz/fuzz-corpus/<target> (kept
# between runs) plus fresh seeds from fuzz_seeds.  Exit 0 only if nothing
# crashed, leaked, hung or failed an oracle; artifacts land in
# build-fuzz/fuzz-artifacts/<target>/ with the command to reproduce them.
# Installs clang and libclang-rt-14-dev through scripts/deps.sh if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=300 jobs=1 targets=()
while [ $# -gt 0 ]; do
	case $1 in
	--short) secs=20; shift ;;
	--time) secs=$2; shift 2 ;;
	--target) targets+=("$2"); shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "fuzz.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_mlog fuzz_replay fuzz_mount)

have_fuzzer() {
	command -v clang >/dev/null || return 1
	echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }' |
		clang -x c -fsanitize=fuzzer,address -o /dev/null - 2>/dev/null
}
if ! have_fuzzer; then
	scripts/deps.sh clang libclang-rt-14-dev
	have_fuzzer || { echo "fuzz.sh: clang cannot build libFuzzer targets" >&2; exit 1; }
fi

B=build-fuzz
if [ ! -f "$B/build.ninja" ]; then
	CC=clang meson setup "$B" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C "$B" tests/fuzz/fuzz_seeds "${targets[@]/#/tests/fuzz/}" >"$B/fuzz-build.log" 2>&1 || {
	tail -n 30 "$B/fuzz-build.log" >&2
	echo "fuzz.sh: build failed" >&2
	exit 1
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
rm -rf "$B/fuzz-seeds"
"$B/tests/fuzz/fuzz_seeds" "$B/fuzz-seeds" >/dev/null 2>"$B/fuzz-seeds.log" || {
	cat "$B/fuzz-seeds.log" >&2
	echo "fuzz.sh: seed generation failed" >&2
	exit 1
}

status=0 total=0
summary=()
for t in "${targets[@]}"; do
	exe=$B/tests/fuzz/$t
	art=$B/fuzz-artifacts/$t
	corpus=$B/fuzz-corpus/$t
	mkdir -p "$art" "$corpus"
	# regressions: crashes found before must stay fixed
	reg=tests/fuzz/regress/$t
	if compgen -G "$reg/*" >/dev/null; then
		if ! "$exe" -timeout=30 "$reg"/* >"$B/$t.regress.log" 2>&1; then
			tail -n 40 "$B/$t.regress.log" >&2
			echo "fuzz.sh: $t: a regression input from $reg fails again" >&2
			status=1
			summary+=("$t: REGRESSION")
			continue
		fi
	fi
	before=$(find "$art" -type f | wc -l)
	log=$B/$t.log
	args=(-max_total_time="$secs" -timeout=20 -rss_limit_mb=3072 -max_len=131072
	      -artifact_prefix="$art/" -print_final_stats=1)
	[ "$jobs" -gt 1 ] && args+=(-fork="$jobs" -ignore_crashes=0)
	rc=0
	timeout -s KILL $((secs + 120)) "$exe" "${args[@]}" "$corpus" "$B/fuzz-seeds/$t" >"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	execs=${execs:-$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')}
	execs=${execs:-0}
	total=$((total + execs))
	after=$(find "$art" -type f | wc -l)
	if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
		status=1
		grep -E 'ERROR|SUMMARY|^fuzz_|abort' "$log" | head -n 10 >&2
		echo "fuzz.sh: $t found a problem (exit $rc); artifacts in $art:" >&2
		find "$art" -type f -newer "$exe" | sed 's/^/    /' >&2
		echo "  reproduce: $exe <artifact>   (then add it to tests/fuzz/regress/$t/)" >&2
		summary+=("$t: FAILED after $execs executions")
	else
		summary+=("$t: $execs executions in ${secs}s, corpus $(find "$corpus" -type f | wc -l) inputs, no crash")
	fi
done
for s in "${summary[@]}"; do echo "fuzz: $s"; done
echo "fuzz: $total executions in total$([ $status -eq 0 ] && echo ', no crash' || echo ', PROBLEMS FOUND')"
exit $status
