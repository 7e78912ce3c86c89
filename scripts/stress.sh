#!/bin/bash
# The long adversarial stress (issue #44); the CI variant is
# tests/integration/stress.sh with one pass of every phase.
#
#   scripts/stress.sh [--ops N] [--seed S] [--zones Z] [--zone-size SIZE]
#                     [--depth D] [--scale K] [--phases "P1 P2..."]
#                     [--modes "M1 M2..."] [--each-phase]
#
#   --ops N        cycle through the phases until N operations ran
#                  (default 1000000)
#   --seed S       seed (default: from the clock; printed, replayable)
#   --zones Z, --zone-size SIZE   the emulated device (default 32 x 2M;
#                  16-64 zones of 1-4 MiB is the range the stress is for)
#   --depth D      levels of the deep chain of directories (default 10000)
#   --scale K      multiplies every phase's operation count (default 4)
#   --phases LIST  phases, in order (default: all; see stress.py)
#   --modes LIST   what follows each phase, in turn: remount, kill9,
#                  powerloss, tear (default "remount kill9 powerloss
#                  remount tear")
#   --each-phase   run every phase on its own fresh device, five times (so
#                  each mode follows it once) and report each; exit 1 if
#                  any had a violation -- to see everything that fails at
#                  once instead of stopping at the first
#
# Prints operations run, phases, states checked and violations; exits 1 on
# a violation, printing the seed, the replay command and the operations
# before it (the journal of all of them is kept in /tmp).  Needs root and
# /dev/fuse.  Env: ZF_BUILD_DIR (default ./build, built with ninja first).
set -euo pipefail
cd "$(dirname "$0")/.."
ops=1000000 seed="" zones=32 zsize=2M depth=10000 scale=4 phases="" modes="" each=0
while [ $# -gt 0 ]; do
	case $1 in
	--ops) ops=$2; shift 2 ;;
	--seed) seed=$2; shift 2 ;;
	--zones) zones=$2; shift 2 ;;
	--zone-size) zsize=$2; shift 2 ;;
	--depth) depth=$2; shift 2 ;;
	--scale) scale=$2; shift 2 ;;
	--phases) phases=$2; shift 2 ;;
	--modes) modes=$2; shift 2 ;;
	--each-phase) each=1; shift ;;
	-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "stress.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
for v in "$ops" "$zones" "$depth" "$scale" ${seed:+"$seed"}; do
	[[ $v =~ ^[0-9]+$ ]] || { echo "stress.sh: $v is not a number" >&2; exit 2; }
done
export ZF_BUILD_DIR=${ZF_BUILD_DIR:-$PWD/build}
if [ -f "$ZF_BUILD_DIR/build.ninja" ]; then ninja -C "$ZF_BUILD_DIR" >/dev/null; fi
export ZF_STRESS_SEED=${seed:-$(( $(date +%s) % 1000000 ))}
export ZF_STRESS_ZONES=$zones ZF_STRESS_ZONE_SIZE=$zsize ZF_STRESS_DEPTH=$depth ZF_STRESS_SCALE=$scale
[ -z "$phases" ] || export ZF_STRESS_PHASES=$phases
[ -z "$modes" ] || export ZF_STRESS_MODES=$modes
export ZF_TEST=stress
if [ $each -eq 0 ]; then
	export ZF_STRESS_OPS=$ops
	echo "stress: goal $ops operations, seed $ZF_STRESS_SEED, $zones zones of $zsize, depth $depth, scale $scale"
	exec bash tests/integration/stress.sh
fi
all=${phases:-random deep wide rename link xattr longnames sparse copy falloc setid fill meta fullmeta fulldata}
export ZF_STRESS_OPS=0
failed=()
for p in $all; do
	echo "=== stress --each-phase: $p (seed $ZF_STRESS_SEED)"
	if ZF_STRESS_PHASES="$p $p $p $p $p" ZF_TEST=stress-$p bash tests/integration/stress.sh >"/tmp/zf-stress-$p.out" 2>&1; then
		grep -E '^(PASS|operations run|violations)' "/tmp/zf-stress-$p.out" || true
	else
		failed+=("$p")
		grep -E -A3 '^(VIOLATION|FAIL)' "/tmp/zf-stress-$p.out" | grep -v '^  |' | head -n 12 || true
		echo "(all of it: /tmp/zf-stress-$p.out)"
	fi
done
echo "stress --each-phase: ${#failed[@]} phase(s) with violations: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
