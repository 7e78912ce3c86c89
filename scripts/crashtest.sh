#!/bin/bash
# The long crash-consistency run (the CI variant is tests/integration/crash_loop.sh
# with ~20 points; this is the same harness with more points).
#
#   scripts/crashtest.sh [--points N] [--power-loss] [--seed S] [--db-rounds R]
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
#
# Every point: a checker does random writes/appends/truncates/renames/links/
# unlinks/fsyncs and logs each acknowledged operation outside the file
# system; the daemon is killed at a random moment (sometimes again during the
# remount); fsck must be clean; after the remount every acknowledged state
# must be there.  Exit 0 only with 0 violations.  Needs root and /dev/fuse.
# Env: ZF_BUILD_DIR (default ./build, built with ninja first if present).
set -euo pipefail
cd "$(dirname "$0")/.."
points=200 modes="kill9" seed="" dbr=""
while [ $# -gt 0 ]; do
	case $1 in
	--points) points=$2; shift 2 ;;
	--power-loss) modes="powerloss tear"; shift ;;
	--mixed) modes="kill9 powerloss tear"; shift ;;
	--seed) seed=$2; shift 2 ;;
	--db-rounds) dbr=$2; shift 2 ;;
	-h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "crashtest.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
[[ $points =~ ^[0-9]+$ ]] || { echo "crashtest.sh: --points needs a number" >&2; exit 2; }
[ -n "$dbr" ] || dbr=$(( points / 25 > 2 ? points / 25 : 2 ))
export ZF_BUILD_DIR=${ZF_BUILD_DIR:-$PWD/build}
if [ -f "$ZF_BUILD_DIR/build.ninja" ]; then ninja -C "$ZF_BUILD_DIR" >/dev/null; fi
export ZF_CRASH_POINTS=$points ZF_CRASH_MODES=$modes ZF_CRASH_DB_ROUNDS=$dbr
export ZF_CRASH_SEED=${seed:-$(( $(date +%s) % 1000000 ))}
export ZF_TEST=crashtest
echo "crashtest: $points points ($modes), $dbr rounds per database workload, seed $ZF_CRASH_SEED"
exec bash tests/integration/crash_loop.sh
