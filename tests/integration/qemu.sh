#!/bin/bash
# zonefuse on a real kernel zoned device: the short QEMU NVMe ZNS suite
# (tests/qemu/suite.sh, see docs/qemu.md), a few minutes under TCG.
# Skips (exit 77) unless qemu-system-x86_64 and the other host tools are
# installed (scripts/qemu-zns.sh installs them when run by hand) and the
# Debian kernel package can be fetched.
set -euo pipefail
ZF_SRC_DIR=${ZF_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
ZF_BUILD_DIR=${ZF_BUILD_DIR:-$ZF_SRC_DIR/build}
skip() { echo "SKIP: qemu: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root"
command -v qemu-system-x86_64 >/dev/null ||
	skip "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86, or run scripts/qemu-zns.sh once)"
for p in cpio depmod modprobe python3 cc; do
	command -v "$p" >/dev/null || skip "$p is missing (run scripts/qemu-zns.sh once to install what it needs)"
done
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || skip "busybox-static is not installed"
for b in zonefuse mkfs.zonefuse fsck.zonefuse tests/test_zdev; do
	[ -x "$ZF_BUILD_DIR/$b" ] || skip "$ZF_BUILD_DIR/$b is not built"
done
export ZF_QEMU_NO_INSTALL=1
exec "$ZF_SRC_DIR/tests/qemu/suite.sh" --build-dir "$ZF_BUILD_DIR"
