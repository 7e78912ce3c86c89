#!/bin/bash
# Runs the fio suite of scripts/fio/ on any directory (a zonefuse mount, ext4,
# tmpfs, ...) and prints a table; no root needed, nothing outside DIR is
# touched.  The suite:
#   matrix  IOzone-style (iozone.fio): write, rewrite, read, reread, random
#           read, random write at each --bs on one --size file, the
#           sequential four at each --seq-bs; --runs passes, median reported
#   verify  crc32c integrity (verify.fio): sequential, random, parallel jobs,
#           each checked again from the file system after its cache is dropped
#   churn   many small files created, written, fsynced, deleted (churn.fio)
# Usage: scripts/fio/run.sh [options] DIR     (--help for the options)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

tests=matrix,verify,churn
size=1g
runs=5
bs_list=4k,8k
seq_bs_list=1m
rand_runtime=5
verify_size=256m
verify_jobs=4
churn_jobs=4
churn_files=1000
churn_loops=3
label=
json_out=
raw=
quiet=0
pass=
summary=1

usage() {
	cat <<EOF
Usage: scripts/fio/run.sh [options] DIR
Runs the fio suite in DIR (which must exist; the suite's files are removed
at the end) and prints one line per result.  MiB/s = 2^20 bytes per second.
  --tests LIST         any of matrix,verify,churn [$tests]
  --size SIZE          matrix file size [$size]
  --runs N             matrix passes; the median is reported [$runs]
  --bs LIST            block sizes with all six matrix rows [$bs_list]
  --seq-bs LIST        block sizes with the sequential rows only [$seq_bs_list]
  --rand-runtime S     time cap of each random row: seconds, or with a unit (500ms); 0 = none [$rand_runtime]
  --verify-size SIZE   size of each verify file [$verify_size]
  --verify-jobs N      jobs in the parallel verify run [$verify_jobs]
  --churn-jobs N       parallel churn jobs [$churn_jobs]
  --churn-files N      files per churn job and round [$churn_files]
  --churn-loops N      churn rounds [$churn_loops]
  --label NAME         name of this target in the output [DIR's name]
  --json FILE          also write the results as JSON
  --raw DIR            keep fio's own JSON outputs there
  --pass N             run matrix pass N only, and verify and churn as pass
                       N (with --raw: passes can be spread over several
                       calls, e.g. to interleave targets; each row reports
                       the median of the passes --raw DIR holds)
  --no-summary         run, keep the raw outputs (--raw), print nothing
  --summary-only       run nothing: summarize what --raw DIR holds
  --quiet              no table on stdout
  -h, --help           this help
Exit status: 0 ok, 1 a fio run failed or data did not verify, 2 usage.
EOF
}

die() { echo "fio-run: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case "$1" in
	--tests) tests=$2; shift ;;
	--size) size=$2; shift ;;
	--runs) runs=$2; shift ;;
	--bs) bs_list=$2; shift ;;
	--seq-bs) seq_bs_list=$2; shift ;;
	--rand-runtime) rand_runtime=$2; shift ;;
	--verify-size) verify_size=$2; shift ;;
	--verify-jobs) verify_jobs=$2; shift ;;
	--churn-jobs) churn_jobs=$2; shift ;;
	--churn-files) churn_files=$2; shift ;;
	--churn-loops) churn_loops=$2; shift ;;
	--label) label=$2; shift ;;
	--json) json_out=$2; shift ;;
	--raw) raw=$2; shift ;;
	--pass) pass=$2; shift ;;
	--no-summary) summary=0 ;;
	--summary-only) tests= ;;
	--quiet) quiet=1 ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "fio-run: unknown option '$1' (try --help)" >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
[ $# -eq 1 ] || { usage >&2; exit 2; }
dir=$(realpath "$1")
[ -d "$dir" ] || { echo "fio-run: $1 is not a directory" >&2; exit 2; }
for n in "$runs" "$verify_jobs" "$churn_jobs" "$churn_files" "$churn_loops"; do
	[[ "$n" =~ ^[0-9]+$ ]] || { echo "fio-run: '$n' is not a number" >&2; exit 2; }
done
[ "$runs" -ge 1 ] || { echo "fio-run: --runs must be at least 1" >&2; exit 2; }
[ -z "$pass" ] || [[ "$pass" =~ ^[1-9][0-9]*$ ]] || { echo "fio-run: --pass N, N >= 1" >&2; exit 2; }
if [ -z "$raw" ] && { [ $summary -eq 0 ] || [ -z "$tests" ] || [ -n "$pass" ]; }; then
	echo "fio-run: --pass, --no-summary and --summary-only need --raw DIR" >&2
	exit 2
fi
for t in ${tests//,/ }; do
	case "$t" in matrix | verify | churn) ;; *) echo "fio-run: unknown test '$t'" >&2; exit 2 ;; esac
done
command -v fio >/dev/null || die "fio is missing (apt-get install fio)"
command -v python3 >/dev/null || die "python3 is missing"
label=${label:-$(basename "$dir")}

if [ -n "$raw" ]; then
	mkdir -p "$raw"
	raw=$(realpath "$raw")
	keep_raw=1
else
	raw=$(mktemp -d "${TMPDIR:-/tmp}/fio-run.XXXXXX")
	keep_raw=0
fi
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	rm -rf "$dir"/iozone.* "$dir"/verify.* "$dir"/churn.*
	[ $keep_raw -eq 1 ] || rm -rf "$raw"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

msg() { [ $quiet -eq 1 ] || echo "fio-run: [$label] $*" >&2; }

# run_fio OUT JOBFILE [fio args...]: fio with JSON output in OUT; on failure
# shows the end of its output and fails.
run_fio() {
	local out=$1 job=$2 st=0
	shift 2
	fio "$HERE/$job" --directory="$dir" --output-format=json --output="$out" "$@" \
		2>"$out.err" || st=$?
	if [ $st -ne 0 ]; then
		tail -n 20 "$out.err" "$out" >&2
		die "fio $job $* failed (exit $st) in $dir"
	fi
}

export FIO_SIZE=$size FIO_RAND_RUNTIME=$rand_runtime FIO_VSIZE=$verify_size \
	FIO_VJOBS=$verify_jobs FIO_CJOBS=$churn_jobs FIO_CFILES=$churn_files FIO_CLOOPS=$churn_loops

if [[ ",$tests," == *",matrix,"* ]]; then
	first=1 last=$runs
	[ -z "$pass" ] || first=$pass last=$pass
	for ((r = first; r <= last; r++)); do
		for bs in ${bs_list//,/ }; do
			msg "matrix pass $r/$runs, $bs blocks, $size file"
			rm -f "$dir/iozone.$bs"
			FIO_BS=$bs run_fio "$raw/matrix-$r-$bs.json" iozone.fio
			rm -f "$dir/iozone.$bs"
		done
		for bs in ${seq_bs_list//,/ }; do
			msg "matrix pass $r/$runs, $bs blocks (sequential), $size file"
			rm -f "$dir/iozone.$bs"
			FIO_BS=$bs run_fio "$raw/matrix-$r-$bs.json" iozone.fio \
				--section=write --section=rewrite --section=read --section=reread
			rm -f "$dir/iozone.$bs"
		done
	done
fi
# verify and churn run once per call, as pass ${pass:-1}: a caller after a
# median runs them again with --pass 2, 3, ... into the same --raw DIR
vp=${pass:-1}
if [[ ",$tests," == *",verify,"* ]]; then
	msg "verify pass $vp: crc32c, $verify_size per file, $verify_jobs parallel jobs"
	rm -f "$dir"/verify.*
	run_fio "$raw/verify-$vp.json" verify.fio
	rm -f "$dir"/verify.*
fi
if [[ ",$tests," == *",churn,"* ]]; then
	msg "churn pass $vp: $churn_jobs jobs x $churn_files files x $churn_loops rounds"
	rm -rf "$dir"/churn.*
	for ((j = 0; j < churn_jobs; j++)); do mkdir -p "$dir/churn.$j"; done
	t0=$(date +%s.%N)
	run_fio "$raw/churn-$vp.json" churn.fio
	t1=$(date +%s.%N)
	echo "$t0 $t1" >"$raw/churn-$vp.wall"
	rm -rf "$dir"/churn.*
fi

[ $summary -eq 1 ] || exit 0
args=("$raw" --label "$label" --runs "$runs" --bs "$bs_list" --seq-bs "$seq_bs_list"
	--size "$size" --churn-files $((churn_jobs * churn_files * churn_loops)))
[ -z "$json_out" ] || args+=(--json "$json_out")
[ $quiet -eq 0 ] || args+=(--quiet)
python3 "$HERE/summarize.py" "${args[@]}"
