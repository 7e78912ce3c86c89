#!/bin/bash
# The Debian package (issue 18): dpkg-buildpackage -us -uc -b on a clean
# copy of the source makes zonefuse_*.deb; lintian reports no error or
# warning (tags explained in debian/ overrides are allowed); the package
# installs binaries, man pages (zonefuse-stat and zonefuse-emu in section
# 1), the README with every document it links (uncompressed, in docs/, so
# that its links resolve), examples, umount.fuse.zonefuse and umount.fuse;
# then, with the installed programs only:
#   - mount -t fuse.zonefuse DEVICE DIR -o ... mounts (through mount.fuse3)
#     and prints nothing; `umount DIR` returns once the daemon is gone (it
#     is not running when umount returns; fsck clean at once, no wait);
#   - `mount -o remount,ro DIR` is refused with exit 32, the mount unchanged;
#   - an fstab line: `mount DIR` mounts it, data written before is there,
#     `umount DIR`, fsck and mkfs at once;
#   - the systemd mount unit example passes systemd-analyze verify.
# The package is removed afterwards unless it was installed before.  The
# fstab is a private file (mount --fstab) so the machine's is not touched.
# Exits 77 only where dpkg-buildpackage cannot run (not Debian, not root).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog dpkg-buildpackage dpkg-dev
zf_require_prog dh debhelper
zf_require_prog lintian lintian
dpkg-checkbuilddeps "$ZF_SRC_DIR/debian/control" 2>/dev/null ||
	zf_skip "build dependencies missing: $(dpkg-checkbuilddeps "$ZF_SRC_DIR/debian/control" 2>&1)"
zf_setup --zone-size 16M --zones 32
[ -x /usr/sbin/mount.fuse3 ] || zf_fail "mount.fuse3 missing (fuse3)"

was_installed=0
dpkg-query -W -f='${Status}' zonefuse 2>/dev/null | grep -q "install ok installed" && was_installed=1
cleanup() {
	local rc=$?
	mountpoint -q "$ZF_MNT" 2>/dev/null && { umount "$ZF_MNT" || fusermount3 -u -z "$ZF_MNT"; }
	[ "$was_installed" -eq 1 ] || dpkg -r zonefuse >/dev/null 2>&1 || true
	return "$rc"	# zf_teardown reads it as $?
}
trap 'cleanup; zf_teardown' EXIT

# ---- build from a clean copy ---------------------------------------------
SRC=$ZF_WORK/pkg/zonefuse
mkdir -p "$SRC"
if git -C "$ZF_SRC_DIR" rev-parse 2>/dev/null; then
	(cd "$ZF_SRC_DIR" && git ls-files -co --exclude-standard -z | grep -zv '^build' |
		tar --null -cf - -T -) | tar -xf - -C "$SRC"
else
	(cd "$ZF_SRC_DIR" && tar --exclude='./build*' --exclude=./obj-* -cf - .) | tar -xf - -C "$SRC"
fi
t0=$(date +%s)
(cd "$SRC" && dpkg-buildpackage -us -uc -b) >"$ZF_WORK/build.log" 2>&1 ||
	zf_fail "dpkg-buildpackage failed: $(tail -n 30 "$ZF_WORK/build.log")"
DEB=$(ls "$ZF_WORK"/pkg/zonefuse_*.deb)
zf_log "built $(basename "$DEB") in $(($(date +%s) - t0)) s"

lintian --fail-on error,warning --pedantic "$ZF_WORK"/pkg/zonefuse_*.changes \
	>"$ZF_WORK/lintian.log" 2>&1 || zf_fail "lintian: $(cat "$ZF_WORK/lintian.log")"
zf_log "lintian: $(grep -c '^[EWIPX]:' "$ZF_WORK/lintian.log" || true) tags$(grep '^[EWIPX]:' "$ZF_WORK/lintian.log" | sed 's/^/ | /' | tr '\n' ' ')"

dpkg-deb -c "$DEB" >"$ZF_WORK/contents"
for f in usr/bin/zonefuse usr/bin/zonefuse-stat usr/bin/zonefuse-emu usr/sbin/mkfs.zonefuse \
	usr/sbin/fsck.zonefuse usr/sbin/umount.fuse.zonefuse usr/sbin/umount.fuse \
	usr/share/man/man8/zonefuse.8.gz usr/share/man/man8/mkfs.zonefuse.8.gz \
	usr/share/man/man8/fsck.zonefuse.8.gz usr/share/man/man1/zonefuse-stat.1.gz \
	usr/share/man/man1/zonefuse-emu.1.gz usr/share/man/man8/umount.fuse.zonefuse.8.gz \
	usr/share/man/man8/umount.fuse.8.gz usr/share/doc/zonefuse/copyright \
	usr/share/doc/zonefuse/README.md usr/share/doc/zonefuse/docs/zonemap.svg \
	usr/share/doc/zonefuse/examples/mnt-zns.mount; do
	grep -q " \./$f\( \|$\)" "$ZF_WORK/contents" || zf_fail "$f is not in the package"
done
# Every document the README links that the source has is installed where
# the link points (relative to the README, uncompressed).
missing=
for l in $(grep -oE '\]\((docs/[^)#]+)' "$ZF_SRC_DIR/README.md" | sed 's/^](//' | sort -u); do
	if [ ! -e "$ZF_SRC_DIR/$l" ]; then
		zf_log "README links $l, which the source does not have (yet)"
	elif ! grep -q " \./usr/share/doc/zonefuse/$l\( \|$\)" "$ZF_WORK/contents"; then
		missing+=" $l"
	fi
done
[ -z "$missing" ] || zf_fail "README links documents the package does not ship:$missing"
dpkg -i "$DEB" >"$ZF_WORK/dpkg.log" 2>&1 || zf_fail "dpkg -i: $(cat "$ZF_WORK/dpkg.log")"
man -w zonefuse >/dev/null || zf_fail "man zonefuse finds no page after install"

# ---- mount -t fuse.zonefuse, umount ------------------------------------------
DLOG=$ZF_WORK/daemon.log
/usr/sbin/mkfs.zonefuse --force "$ZF_DEV" >/dev/null
mount -t fuse.zonefuse "$ZF_DEV" "$ZF_MNT" -o "allow_other,default_permissions,commit_ms=60000,log=$DLOG" \
	>"$ZF_WORK/mount.out" 2>&1 || zf_fail "mount -t fuse.zonefuse failed: $(cat "$ZF_WORK/mount.out")"
[ ! -s "$ZF_WORK/mount.out" ] || zf_fail "mount -t fuse.zonefuse printed: $(cat "$ZF_WORK/mount.out")"
line=$(findmnt -n -o FSTYPE,SOURCE "$ZF_MNT")
[ "$line" = "fuse.zonefuse $(realpath "$ZF_DEV")" ] || zf_fail "findmnt: '$line'"
dd if=/dev/urandom of="$ZF_MNT/data" bs=1M count=16 status=none
sum=$(sha256sum <"$ZF_MNT/data")
pid=$(sed -n 's/.*zonefuse\[\([0-9]*\)\]: .*info: mounted .*/\1/p' "$DLOG" | tail -n 1)
[ -n "$pid" ] || zf_fail "no 'mounted' line in $DLOG"
rc=0
mount -o remount,ro "$ZF_MNT" 2>"$ZF_WORK/remount.err" || rc=$?
[ "$rc" -eq 32 ] || zf_fail "mount -o remount,ro exited $rc: $(cat "$ZF_WORK/remount.err")"
grep -q "remount is not supported" "$ZF_WORK/remount.err" || zf_fail "remount: $(cat "$ZF_WORK/remount.err")"
[[ ",$(findmnt -n -o OPTIONS "$ZF_MNT")," == *,rw,* ]] || zf_fail "not read-write after the refused remount"
umount "$ZF_MNT" || zf_fail "umount failed"
st=$(sed -E 's/^.*\) (.).*/\1/' "/proc/$pid/stat" 2>/dev/null || echo gone)
[ "$st" = gone ] || [ "$st" = Z ] || zf_fail "umount returned while daemon $pid was still running ($st)"
/usr/sbin/fsck.zonefuse "$ZF_DEV" >"$ZF_WORK/fsck.log" 2>&1 ||
	zf_fail "fsck right after umount: $(cat "$ZF_WORK/fsck.log")"
if grep -q waiting "$ZF_WORK/fsck.log"; then zf_fail "fsck had to wait: $(cat "$ZF_WORK/fsck.log")"; fi
zf_log "mount -t fuse.zonefuse (quiet), remount refused (32), umount waited for the daemon, fsck at once: ok"

# ---- fstab -------------------------------------------------------------------------
FSTAB=$ZF_WORK/fstab
echo "$ZF_DEV $ZF_MNT fuse.zonefuse defaults,allow_other,nofail,log=$DLOG 0 0" >"$FSTAB"
mount --fstab "$FSTAB" "$ZF_MNT" || zf_fail "mount DIR (fstab) failed"
[ "$(sha256sum <"$ZF_MNT/data")" = "$sum" ] || zf_fail "data differs after the fstab mount"
[ "$(findmnt -n -o FSTYPE "$ZF_MNT")" = fuse.zonefuse ] || zf_fail "fstab mount type"
umount "$ZF_MNT" || zf_fail "umount of the fstab mount failed"
/usr/sbin/fsck.zonefuse "$ZF_DEV" >"$ZF_WORK/fsck.log" 2>&1 ||
	zf_fail "fsck right after umount (fstab): $(cat "$ZF_WORK/fsck.log")"
/usr/sbin/mkfs.zonefuse --force "$ZF_DEV" >"$ZF_WORK/mkfs.log" 2>&1 ||
	zf_fail "mkfs right after umount: $(cat "$ZF_WORK/mkfs.log")"
if grep -qi 'error:' "$DLOG"; then zf_fail "the daemon logged errors: $(grep -i error: "$DLOG")"; fi
grep -c 'info: unmounted' "$DLOG" | grep -qx 2 || zf_fail "daemon log: $(cat "$DLOG")"
zf_log "fstab mount, umount, fsck and mkfs at once: ok"

# ---- systemd mount unit example --------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
	U=$ZF_WORK/units
	mkdir -p "$U"
	cp /usr/share/doc/zonefuse/examples/mnt-zns.mount /usr/share/doc/zonefuse/examples/zonefuse-prometheus.* "$U/"
	(cd "$U" && systemd-analyze verify mnt-zns.mount zonefuse-prometheus.service zonefuse-prometheus.timer) \
		>"$ZF_WORK/verify.log" 2>&1 || zf_fail "systemd-analyze verify: $(cat "$ZF_WORK/verify.log")"
	zf_log "systemd-analyze verify: clean"
else
	zf_log "systemd-analyze missing: unit example not verified"
fi
zf_pass "package builds lintian-clean, installs, mounts with mount -t and fstab"
