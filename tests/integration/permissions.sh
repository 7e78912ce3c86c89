#!/bin/bash
# Permissions however the file system is mounted: with -o allow_other
# alone (zonefuse turns default_permissions on and says so) and with
# -o allow_other,default_permissions (the kernel checks modes and ACLs,
# zonefuse stores them), and bad input to the tools.
#
# 1. On both mounts, two unprivileged users (uid 4242 "alice", 4343 "bob", in a forked child
#    with setgroups/setgid/setuid): bob cannot read, write, truncate, chmod,
#    append to, chown, set times of, rename over or (in a sticky directory)
#    delete alice's files, cannot chown or chgrp his own file away, cannot
#    list her 0700 directory or create, mkdir, link, symlink or rename into
#    her 0755 one or rename out of it, cannot rmdir her directory in the
#    sticky one; his write to her 04666 file clears the set-user-id bit
#    (KILLPRIV_V2); cannot set,
#    change or remove user.* xattrs on her file; alice can do all of that;
#    the user.zonefuse.* virtual xattrs can be read by whoever may read the
#    file but never set or removed, not even by root -- except
#    user.zonefuse.lifetime, the documented lifetime hint, which whoever may
#    write the file can set (bob cannot on alice's file; bad values EINVAL).
# 2. Bad input: mkfs.zonefuse, zonefuse and fsck.zonefuse given a device
#    that is not zoned (a regular file, /dev/null, a directory), missing, too
#    small, with unsupported geometry, already mounted, holding another file
#    system (ext4 image), or a zonefuse device with a corrupted superblock /
#    metadata log (bit flips, truncated zone, wrong CRC, foreign zone header):
#    each must exit non-zero with a message on stderr, never crash
#    (exit >= 128 = killed by a signal) or hang.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_prog python3 python3
zf_setup --zone-size 4M --zones 32
chmod 755 "$ZF_WORK"	# the users must reach the mount point
# Bad-input runs of the daemon log errors on purpose (their own log below).
perm_checks() { # tag: the checks, in a directory of that name
python3 - "$ZF_MNT" "$1" "$(dirname "$0")" <<'PY' || zf_fail "permission checks failed (mounted $1)"
import errno, os, stat, sys

m, tag = sys.argv[1], sys.argv[2]
sys.dont_write_bytecode = True	# nothing written into the source tree
sys.path.insert(0, sys.argv[3])
from asuser import as_user
print(f"mounted with {tag}:")
ALICE, BOB = 4242, 4343
fails = []


def expect(what, got, want):
    ok = got in want if isinstance(want, tuple) else got == want
    name = lambda e: "ok" if e == 0 else errno.errorcode.get(e, str(e))
    print(f"  {'ok  ' if ok else 'FAIL'} {what}: {name(got)}"
          + ("" if ok else f" (wanted {want if not isinstance(want, tuple) else ' or '.join(map(name, want))})"))
    if not ok:
        fails.append(what)


def deny(what, uid, fn):
    expect(what, as_user(uid, fn), (errno.EACCES, errno.EPERM))


def allow(what, uid, fn):
    expect(what, as_user(uid, fn), 0)


P = lambda *a: os.path.join(m, tag, *a)
os.mkdir(P())
os.chmod(P(), 0o755)
home = P("alice")
os.mkdir(home, 0o755)
os.chown(home, ALICE, ALICE)
shared = P("shared")
os.mkdir(shared)
os.chmod(shared, 0o1777)           # sticky, like /tmp
secret = os.path.join(home, "secret")
private = os.path.join(home, "private")
public = os.path.join(home, "public")
suid = os.path.join(shared, "suid")
bobs = P("bob")
os.mkdir(bobs, 0o755)
os.chown(bobs, BOB, BOB)


def alice_setup():
    with open(secret, "w") as f:
        f.write("alice's data")
    os.chmod(secret, 0o600)
    os.setxattr(secret, "user.note", b"mine")
    os.mkdir(private, 0o700)
    with open(os.path.join(private, "x"), "w") as f:
        f.write("x")
    with open(os.path.join(shared, "a-file"), "w") as f:
        f.write("in a sticky dir")
    os.chmod(os.path.join(shared, "a-file"), 0o666)
    with open(public, "w") as f:
        f.write("anyone may read")
    os.chmod(public, 0o644)
    os.mkdir(os.path.join(shared, "a-dir"), 0o777)
    with open(suid, "w") as f:
        f.write("set-uid")
    os.chmod(suid, 0o4666)


def bob_setup():
    with open(os.path.join(bobs, "mine"), "w") as f:
        f.write("bob's")


allow("alice creates her files", ALICE, alice_setup)
allow("bob creates his file", BOB, bob_setup)
mine = os.path.join(bobs, "mine")
st = os.stat(secret)
expect("owner and mode stored", 0 if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (ALICE, ALICE, 0o600) else errno.EINVAL, 0)

print("bob against alice's files:")
deny("bob reads the 0600 file", BOB, lambda: open(secret).read())
deny("bob opens it for writing", BOB, lambda: open(secret, "r+"))
deny("bob truncates it", BOB, lambda: os.truncate(secret, 0))
deny("bob chmods it", BOB, lambda: os.chmod(secret, 0o666))
deny("bob chowns it to himself", BOB, lambda: os.chown(secret, BOB, BOB))
deny("bob sets its times", BOB, lambda: os.utime(secret, (1, 1)))
deny("bob sets a user xattr on it", BOB, lambda: os.setxattr(secret, "user.bob", b"x"))
deny("bob replaces alice's xattr", BOB, lambda: os.setxattr(secret, "user.note", b"bob"))
deny("bob removes alice's xattr", BOB, lambda: os.removexattr(secret, "user.note"))
deny("bob reads alice's xattr", BOB, lambda: os.getxattr(secret, "user.note"))
deny("bob lists the 0700 directory", BOB, lambda: os.listdir(private))
deny("bob reads a file in it", BOB, lambda: open(os.path.join(private, "x")).read())
deny("bob creates a file in alice's 0755 directory", BOB,
     lambda: open(os.path.join(home, "bobs"), "w"))
deny("bob unlinks the file", BOB, lambda: os.unlink(secret))
deny("bob renames it away", BOB, lambda: os.rename(secret, P("shared", "stolen")))
deny("bob deletes alice's file in the sticky directory", BOB,
     lambda: os.unlink(os.path.join(shared, "a-file")))
deny("bob renames over alice's file in the sticky directory", BOB,
     lambda: (open(os.path.join(shared, "b"), "w").close(),
              os.rename(os.path.join(shared, "b"), os.path.join(shared, "a-file"))))
deny("bob appends to alice's 0644 file", BOB, lambda: open(public, "a"))
allow("bob reads alice's 0644 file", BOB, lambda: open(public).read())
deny("bob sets the times of the 0644 file to now", BOB, lambda: os.utime(public, None))
deny("bob creates a directory in alice's directory", BOB, lambda: os.mkdir(os.path.join(home, "d")))
deny("bob makes a symlink in alice's directory", BOB,
     lambda: os.symlink("x", os.path.join(home, "l")))
deny("bob hard-links his file into alice's directory", BOB,
     lambda: os.link(mine, os.path.join(home, "l")))
deny("bob renames his file into alice's directory", BOB,
     lambda: os.rename(mine, os.path.join(home, "moved")))
deny("bob renames alice's public file out of her directory", BOB,
     lambda: os.rename(public, os.path.join(bobs, "taken")))
deny("bob removes alice's directory in the sticky directory", BOB,
     lambda: os.rmdir(os.path.join(shared, "a-dir")))
deny("bob renames alice's directory in the sticky directory", BOB,
     lambda: os.rename(os.path.join(shared, "a-dir"), os.path.join(shared, "b-dir")))
deny("bob gives his file to alice", BOB, lambda: os.chown(mine, ALICE, -1))
deny("bob gives his file to alice's group", BOB, lambda: os.chown(mine, -1, ALICE))
allow("bob writes alice's 0666 file (mode allows it)", BOB,
      lambda: open(os.path.join(shared, "a-file"), "a").write("+bob"))
allow("bob sets its times to now (he may write it)", BOB,
      lambda: os.utime(os.path.join(shared, "a-file"), None))
deny("bob sets them to another time (he does not own it)", BOB,
     lambda: os.utime(os.path.join(shared, "a-file"), (1, 1)))
allow("bob writes alice's 04666 file", BOB, lambda: open(suid, "a").write("+bob"))
expect("bob's write cleared the set-user-id bit",
       0 if stat.S_IMODE(os.stat(suid).st_mode) == 0o666 else errno.EPERM, 0)
expect("alice's public file still there", 0 if os.path.exists(public) else errno.ENOENT, 0)
expect("bob's file still his", 0 if os.stat(mine).st_uid == BOB else errno.EPERM, 0)
expect("alice's file content unchanged", 0 if open(secret).read() == "alice's data" else errno.EIO, 0)
expect("alice's xattr unchanged", 0 if os.getxattr(secret, "user.note") == b"mine" else errno.EIO, 0)

print("alice on her own file:")
allow("alice reads it", ALICE, lambda: open(secret).read())
allow("alice sets a user xattr", ALICE, lambda: os.setxattr(secret, "user.more", b"1"))
allow("alice removes it", ALICE, lambda: os.removexattr(secret, "user.more"))
allow("alice chmods it", ALICE, lambda: os.chmod(secret, 0o640))
deny("alice chowns it to bob", ALICE, lambda: os.chown(secret, BOB, -1))
allow("alice chmods it back", ALICE, lambda: os.chmod(secret, 0o600))

print("virtual xattrs user.zonefuse.*:")
virt = ["user.zonefuse.extents", "user.zonefuse.zones"]    # read by name, not listed
LT = "user.zonefuse.lifetime"
allow(f"alice sets the {LT} hint on her file", ALICE, lambda: os.setxattr(secret, LT, b"short"))
expect(f"{LT} reads back", 0 if os.getxattr(secret, LT).startswith(b"short") else errno.EIO, 0)
deny(f"bob cannot set {LT} on alice's file", BOB, lambda: os.setxattr(secret, LT, b"long"))
expect(f"{LT} unchanged", 0 if os.getxattr(secret, LT).startswith(b"short") else errno.EIO, 0)
expect(f"a bad {LT} value is refused", as_user(ALICE, lambda: os.setxattr(secret, LT, b"forever")),
       (errno.EINVAL, errno.ERANGE))
deny(f"bob cannot read {LT} on alice's 0600 file", BOB, lambda: os.getxattr(secret, LT))
for n in virt[:4]:
    for who, uid in (("root", 0), ("alice", ALICE), ("bob", BOB)):
        if uid == 0:
            for what, fn in (("set", lambda: os.setxattr(secret, n, b"short")),
                             ("create", lambda: os.setxattr(secret, n, b"x", os.XATTR_CREATE)),
                             ("remove", lambda: os.removexattr(secret, n))):
                try:
                    fn()
                    e = 0
                except OSError as x:
                    e = x.errno
                expect(f"root cannot {what} {n}", e, (errno.EPERM, errno.EACCES))
        else:
            deny(f"{who} cannot set {n}", uid, lambda: os.setxattr(secret, n, b"long"))
            deny(f"{who} cannot remove {n}", uid, lambda: os.removexattr(secret, n))
    allow(f"alice reads {n} on her file", ALICE, lambda: os.getxattr(secret, n))
    deny(f"bob cannot read {n} on alice's 0600 file", BOB, lambda: os.getxattr(secret, n))
# on the root directory (readable by all): everyone may read, nobody write
rootv = ["user.zonefuse.stats", "user.zonefuse.zones", "user.zonefuse.lifetime"]
for n in rootv[:3]:
    allow(f"bob reads {n} on the root directory", BOB, lambda: os.getxattr(m, n))
    deny(f"bob cannot set {n} on the root directory", BOB, lambda: os.setxattr(m, n, b"x"))
if fails:
    print(f"{len(fails)} permission check(s) failed")
    sys.exit(1)
print("permissions: all checks passed")
PY
}
zf_mount -o allow_other
perm_checks allow_other
grep -q "default_permissions turned on" "$ZF_LOG" ||
	zf_fail "-o allow_other alone: no log line about default_permissions"
grep " $ZF_MNT " /proc/mounts | grep -q default_permissions || zf_fail "default_permissions not in the mount options"
zf_umount
zf_mount -o allow_other,default_permissions
perm_checks default_permissions
zf_log "permission checks passed on both mounts"
zf_check_log

# ---- bad input -------------------------------------------------------------
BAD=$ZF_WORK/bad
mkdir -p "$BAD"
nbad=0
# run_bad NAME CMD...: must exit non-zero (not by a signal) within 30 s and
# print a message on stderr.
run_bad() {
	local name=$1 st=0
	shift
	timeout -s KILL 30 "$@" >"$BAD/out" 2>"$BAD/err" </dev/null || st=$?
	if [ "$st" -eq 0 ]; then
		zf_fail "bad input '$name': $(basename "$1") exited 0"
	elif [ "$st" -ge 124 ]; then
		cat "$BAD/err" >&2
		zf_fail "bad input '$name': $(basename "$1") crashed or hung (exit $st)"
	elif [ ! -s "$BAD/err" ] && ! grep -qiE 'error|problem|not|cannot|corrupt' "$BAD/out"; then
		zf_fail "bad input '$name': $(basename "$1") exited $st without a message"
	fi
	nbad=$((nbad + 1))
	printf '  %-44s %-16s exit %3d: %s\n' "$name" "$(basename "$1")" "$st" \
		"$(cat "$BAD/err" "$BAD/out" | grep -v '^$' | head -n 1 | cut -c1-110)"
}
# all three tools on one device
tools_bad() { # name device [mount point]
	run_bad "$1" "$ZF_MKFS" "$2"
	run_bad "$1" "$ZF_DAEMON" "$2" "$BAD/mnt" -f
	[ -x "$ZF_FSCK" ] && run_bad "$1" "$ZF_FSCK" "$2"
	return 0
}
mkdir -p "$BAD/mnt"

zf_log "bad input: the device is in use (mounted)"
run_bad "already mounted" "$ZF_DAEMON" "$ZF_DEV" "$BAD/mnt" -f
run_bad "already mounted" "$ZF_MKFS" --force "$ZF_DEV"
[ -x "$ZF_FSCK" ] && run_bad "already mounted" "$ZF_FSCK" "$ZF_DEV"
zf_umount

zf_log "bad input: not a zoned device"
tools_bad "missing file" "$BAD/nope"
: >"$BAD/empty"
tools_bad "empty regular file" "$BAD/empty"
head -c 8M /dev/urandom >"$BAD/random"
tools_bad "random bytes" "$BAD/random"
tools_bad "a directory" "$BAD"
tools_bad "/dev/null" /dev/null
if command -v mkfs.ext4 >/dev/null; then
	truncate -s 64M "$BAD/ext4.img"
	mkfs.ext4 -q -F "$BAD/ext4.img"
	tools_bad "an ext4 image" "$BAD/ext4.img"
fi
# an emulated zoned device that holds no zonefuse (never formatted): mount
# and fsck must refuse; mkfs would format it, so it is not run here
"$ZF_EMU" create "$BAD/blank.img" --zone-size 4M --zones 16 >/dev/null
run_bad "blank zoned device (no file system)" "$ZF_DAEMON" "$BAD/blank.img" "$BAD/mnt" -f
[ -x "$ZF_FSCK" ] && run_bad "blank zoned device (no file system)" "$ZF_FSCK" "$BAD/blank.img"

zf_log "bad input: unsupported geometry"
"$ZF_EMU" create "$BAD/small.img" --zone-size 4M --zones 4 >/dev/null
run_bad "too small (4 zones)" "$ZF_MKFS" "$BAD/small.img"
"$ZF_EMU" create "$BAD/tiny.img" --zone-size 32K --zones 64 >/dev/null
run_bad "zones of 32 KiB" "$ZF_MKFS" "$BAD/tiny.img"
"$ZF_EMU" create "$BAD/lowactive.img" --zone-size 4M --zones 32 --max-active 2 --max-open 2 >/dev/null
run_bad "max active zones 2" "$ZF_MKFS" "$BAD/lowactive.img"
"$ZF_EMU" create "$BAD/conv.img" --zone-size 4M --zones 8 --conv-zones 8 >/dev/null
run_bad "only conventional zones" "$ZF_MKFS" "$BAD/conv.img"
run_bad "meta zones 2" "$ZF_MKFS" --meta-zones 2 "$BAD/blank.img"
run_bad "meta zones 0" "$ZF_MKFS" --meta-zones 0 "$BAD/blank.img"
run_bad "label of 40 characters" "$ZF_MKFS" --label "$(printf 'L%.0s' {1..40})" "$BAD/blank.img"
"$ZF_EMU" create "$BAD/512.img" --zone-size 512K --zones 16 --block-size 512 >/dev/null
if "$ZF_MKFS" "$BAD/512.img" >/dev/null 2>&1; then
	run_bad "stripe_unit larger than the zone" "$ZF_DAEMON" "$BAD/512.img" "$BAD/mnt" -f
fi
run_bad "stripe_unit not a multiple of the block" "$ZF_DAEMON" "$ZF_DEV" "$BAD/mnt" -f -o stripe_unit=1000
# a device file whose emulator header is damaged
cp --sparse=always "$ZF_DEV" "$BAD/hdr.img"
printf '\xff\xff\xff\xff' | dd of="$BAD/hdr.img" bs=1 seek=24 conv=notrunc status=none
tools_bad "damaged emulator header" "$BAD/hdr.img"
cp --sparse=always "$ZF_DEV" "$BAD/trunc.img"
truncate -s 1M "$BAD/trunc.img"
tools_bad "truncated emulator file" "$BAD/trunc.img"

zf_log "bad input: corrupted zonefuse metadata"
# The meta zone headers ("ZFMETA01" at a 4 KiB boundary, mlog/mlog_format.h)
# are found by scanning the emulator file; every header in use is damaged the
# same way, so no intact epoch is left to fall back to.
python3 - "$ZF_DEV" "$BAD" <<'PY' || zf_fail "could not build the corrupted images"
import os, shutil, sys
dev, out = sys.argv[1], sys.argv[2]
heads = []
with open(dev, "rb") as f:
    pos = 0
    while pos < (96 << 20):
        b = f.read(1 << 20)
        if not b:
            break
        for k in range(0, len(b), 4096):
            if b[k:k + 8] == b"ZFMETA01":
                heads.append(pos + k)
        pos += len(b)
if not heads:
    sys.exit("no meta zone header found")
def variant(name, patch):
    p = os.path.join(out, name + ".img")
    subprocess_copy(dev, p)
    with open(p, "r+b") as f:
        for h in heads:
            patch(f, h)
def subprocess_copy(a, b):
    os.system(f"cp --sparse=always '{a}' '{b}'")
def flip(rel, mask=0x10):
    def f(fh, base):
        fh.seek(base + rel)
        b = fh.read(1)
        fh.seek(base + rel)
        fh.write(bytes([b[0] ^ mask]))
    return f
def zero(rel, n):
    def f(fh, base):
        fh.seek(base + rel)
        fh.write(bytes(n))
    return f
base = 0
variant("sb-magic", flip(base + 3))                 # header magic
variant("sb-crc", flip(base + 208))                 # header CRC
variant("sb-blocksize", flip(base + 40 + 20, 0x01))  # sb.block_size (CRC now wrong)
variant("sb-zeroed", zero(base, 4096))              # whole header gone
variant("rec-first", flip(base + 4096 + 30))        # first record (SNAP_BEGIN) payload
variant("rec-magic", flip(base + 4096))             # first record magic
variant("log-zeroed", zero(base + 4096, 64 << 10))  # the log's first 64 KiB
PY
# run_damaged NAME DEVICE: the daemon either refuses (as run_bad) or, when
# records of the log survive, mounts read-only with the state it can read
# and one "mounted READ-ONLY" line (the mount never locks data away); a
# create then fails and the unmount ends the daemon.
run_damaged() {
	local name=$1 img=$2 pid st=0 i
	"$ZF_DAEMON" "$img" "$BAD/mnt" -f >"$BAD/out" 2>"$BAD/err" </dev/null &
	pid=$!
	for i in $(seq 1 150); do
		mountpoint -q "$BAD/mnt" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if ! mountpoint -q "$BAD/mnt"; then
		wait "$pid" || st=$?
		[ "$st" -ne 0 ] && [ "$st" -lt 124 ] && [ -s "$BAD/err" ] ||
			zf_fail "damaged input '$name': neither mounted nor refused cleanly (exit $st)"
		nbad=$((nbad + 1))
		printf '  %-44s %-16s exit %3d: %s\n' "$name" zonefuse "$st" "$(head -n 1 "$BAD/err" | cut -c1-110)"
		return 0
	fi
	grep -q 'mounted READ-ONLY' "$BAD/err" || zf_fail "damaged input '$name': mounted without the read-only line"
	if touch "$BAD/mnt/new" 2>/dev/null; then
		zf_fail "damaged input '$name': a create succeeded on the read-only mount"
	fi
	fusermount3 -u "$BAD/mnt" || zf_fail "damaged input '$name': unmount failed"
	wait "$pid" || zf_fail "damaged input '$name': the daemon exited $? after the unmount"
	nbad=$((nbad + 1))
	printf '  %-44s %-16s read-only: %s\n' "$name" zonefuse "$(grep -o 'the metadata log is damaged ([^)]*)' "$BAD/err" | cut -c1-100)"
}
for v in sb-magic sb-crc sb-blocksize sb-zeroed rec-first rec-magic log-zeroed; do
	run_damaged "corrupt metadata: $v" "$BAD/$v.img"
	[ -x "$ZF_FSCK" ] && run_bad "corrupt metadata: $v" "$ZF_FSCK" "$BAD/$v.img"
done
# the intact device still mounts and is clean after all that
zf_fsck
zf_mount -o allow_other
[ "$(cat "$ZF_MNT/allow_other/alice/secret")" = "alice's data" ] || zf_fail "alice's file changed"
zf_umount
zf_pass "permission checks with allow_other alone and with default_permissions; $nbad bad-input runs refused cleanly"
