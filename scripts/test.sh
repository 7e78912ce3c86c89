#!/bin/bash
# Install what is needed, build, and run every test:
#   1. unit tests (Check, against the emulator) and integration tests (FUSE
#      mounts; skipped with exit 77 where /dev/fuse or root is missing);
#   2. a second build with AddressSanitizer + UndefinedBehaviorSanitizer that
#      runs the unit tests again.
# Usage: scripts/test.sh [--quick]   (--quick: skip the sanitizer build)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

# The QEMU packages let the integration suite run the guest tests on a real
# kernel zoned device (NVMe ZNS); set ZF_NO_QEMU=1 to skip installing them.
# glusterfs-* and etcd-*: the cluster test (scripts/cluster.sh).
if [ -n "${ZF_NO_QEMU:-}" ]; then scripts/deps.sh glusterfs-server glusterfs-client etcd-server etcd-client
else scripts/deps.sh qemu-system-x86 busybox-static cpio kmod glusterfs-server glusterfs-client etcd-server etcd-client; fi

build() { # dir, extra meson args...
  local dir=$1; shift
  if [ -d "$dir" ]; then meson setup --reconfigure "$dir" "$@" >/dev/null
  else meson setup "$dir" "$@" >/dev/null; fi
  ninja -C "$dir"
}

summary=()
run_suite() { # dir, suite, label
  local rc=0
  meson test -C "$1" --suite "$2" --print-errorlogs --num-processes 2 || rc=$?
  local log="$1/meson-logs/testlog.json"
  local counts
  counts=$(python3 - "$log" <<'PY'
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL"): p += 1
    elif r == "SKIP": s += 1
    else: f += 1
print(f"{p} passed, {f} failed, {s} skipped")
PY
)
  summary+=("$3: $counts")
  return $rc
}

status=0
build build
# As a packager builds it: -O3 warnings differ from the default build's.
for cc in gcc clang; do
  if CC=$cc build build-release-$cc --buildtype=release >/dev/null; then
    summary+=("release build ($cc): 1 passed, 0 failed")
  else
    summary+=("release build ($cc): 0 passed, 1 failed"); status=1
  fi
done
run_suite build unit "unit" || status=1
run_suite build integration "integration" || status=1

if [ $quick -eq 0 ]; then
  build build-asan -Db_sanitize=address,undefined -Db_lundef=false
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_suite build-asan unit "asan" || status=1
fi

# Bounded fuzzing of the on-disk parsers (clang/libFuzzer), when present.
if [ $quick -eq 0 ] && [ -x scripts/fuzz.sh ]; then
  if scripts/fuzz.sh --short; then summary+=("fuzz: 1 passed, 0 failed")
  else summary+=("fuzz: 0 passed, 1 failed"); status=1; fi
fi

echo
echo "== summary =="
for s in "${summary[@]}"; do echo "$s"; done
exit $status
