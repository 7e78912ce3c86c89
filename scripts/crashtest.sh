#!/bin/bash
# The long crash-consistency run (the CI variant is tests/integration/crash_loop.sh
# with ~20 points; this is the same harness with more points).
#
#   scripts/crashtest.sh [--points N] [--power-loss] [--seed S] [--db-rounds R]
#   scripts/crashtest.sh --meta [--points N] [--seed S]
#   scripts/crashtest.sh --exhaustive [--max-subsets N]
#
#   --points N     file system crash points (default 200)
#   --power-loss   after each kill -9, also simulate a power loss of the
#                  emulated device (alternately clean and with torn writes);
#                  default: kill -9 of the daemon only
#   --mixed        cycle kill -9 / power loss / torn power loss
#   --seed S       base seed (default: from the clock; printed, replayable)
#   --db-rounds R  crash rounds for each database workload (LevelDB and
#                  RocksDB through their C APIs, db_bench fillseq --sync=1,
#                  zf-leveldb overwrite --sync); default N / 25, at least 2
#   --meta         the metadata crash loop instead (tests/integration/
#                  meta_crash.sh: create/unlink/rename/setxattr/symlink churn
#                  on a 3-zone metadata log, kill -9 / power loss / torn
#                  writes cycling; about 5 s per point)
#   --exhaustive   the bounded-exhaustive crash states instead (build/tests/
#                  zf-crashstates --all: every single operation and every
#                  pair on two files in one and in two directories, each
#                  followed by fsync / fdatasync / fsync of the directory /
#                  syncfs, 90-step rollovers of the log across zones and
#                  epochs, and the collector moving a zone; every crash
#                  state of the recorded device requests
#                  (cuts at flushes, resets, finishes; per-zone prefixes of
#                  the writes in flight, torn ones included) checked with
#                  fsck and against the oracle; no root; about 2 minutes)
#   --max-subsets N  with --exhaustive: all combinations of the writes in
#                  flight at a cut up to N (default 256), else a bounded set
#
# Every point: a checker does random writes/appends/truncates/renames/links/
# unlinks/fsyncs and logs each acknowledged operation outside the file
# system; the daemon is killed at a random moment (sometimes again during the
# remount); fsck must be clean; after the remount every acknowledged state
# must be there.  Exit 0 only with 0 violations.  Needs root and /dev/fuse.
# Env: ZF_BUILD_DIR (default ./build, built with ninja first if present).
set -euo pipefail
cd "$(dirname "$0")/.."
points=200 modes="kill9" seed="" dbr="" meta=0 exhaustive=0 subsets=256
while [ $# -gt 0 ]; do
	case $1 in
	--points) points=$2; shift 2 ;;
	--power-loss) modes="powerloss tear"; shift ;;
	--mixed) modes="kill9 powerloss tear"; shift ;;
	--seed) seed=$2; shift 2 ;;
	--db-rounds) dbr=$2; shift 2 ;;
	--meta) meta=1; shift ;;
	--exhaustive) exhaustive=1; shift ;;
	--max-subsets) subsets=$2; shift 2 ;;
	-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "crashtest.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
[[ $points =~ ^[0-9]+$ ]] || { echo "crashtest.sh: --points needs a number" >&2; exit 2; }
[ -n "$dbr" ] || dbr=$(( points / 25 > 2 ? points / 25 : 2 ))
export ZF_BUILD_DIR=${ZF_BUILD_DIR:-$PWD/build}
if [ -f "$ZF_BUILD_DIR/build.ninja" ]; then ninja -C "$ZF_BUILD_DIR" >/dev/null; fi
if [ $exhaustive -eq 1 ]; then
	[[ $subsets =~ ^[0-9]+$ ]] || { echo "crashtest.sh: --max-subsets needs a number" >&2; exit 2; }
	echo "crashtest --exhaustive: every workload, up to $subsets subsets of the writes in flight"
	exec "$ZF_BUILD_DIR/tests/zf-crashstates" --all --max-subsets "$subsets"
fi
if [ $meta -eq 1 ]; then
	export ZF_MCRASH_POINTS=$points ZF_MCRASH_SEED=${seed:-$(( $(date +%s) % 1000000 ))}
	export ZF_TEST=crashtest-meta
	echo "crashtest --meta: $points points, seed $ZF_MCRASH_SEED"
	exec bash tests/integration/meta_crash.sh
fi
export ZF_CRASH_POINTS=$points ZF_CRASH_MODES=$modes ZF_CRASH_DB_ROUNDS=$dbr
export ZF_CRASH_SEED=${seed:-$(( $(date +%s) % 1000000 ))}
export ZF_TEST=crashtest
echo "crashtest: $points points ($modes), $dbr rounds per database workload, seed $ZF_CRASH_SEED"
exec bash tests/integration/crash_loop.sh
