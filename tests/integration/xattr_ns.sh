#!/bin/bash
# The trusted.* and security.* namespaces, mounted with -o allow_other alone:
#   - root sets, reads, lists and removes trusted.* and security.* values
#     (up to 64 KiB, XATTR_SIZE_MAX; a larger one is E2BIG; at most
#     256 KiB of names and values per file, ENOSPC past it), other
#     system.* names are EOPNOTSUPP;
#   - a non-root user (uid 4343) cannot set trusted.* (EPERM) or read it
#     (ENODATA), does not see trusted.* names in listxattr, cannot set
#     security.* (EPERM);
#   - `setcap cap_net_raw+ep FILE` then `getcap FILE` shows it; a write by
#     uid 4343, a chown and a truncate each drop it, as on ext4;
#   - every value survives kill -9 of the daemon after fsync, and a clean
#     remount;
#   - KILLPRIV_V2 stays in effect with security.* real: 1000 writes cost a
#     handful of GETXATTR round trips, not one each.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_prog python3 python3
zf_require_prog setcap libcap2-bin
zf_require_prog getcap libcap2-bin
zf_setup --zone-size 4M --zones 32
chmod 755 "$ZF_WORK"
zf_mount -o allow_other

python3 - "$ZF_MNT" "$(dirname "$0")" <<'PY' || zf_fail "xattr namespace checks failed"
import errno, os, sys
m = sys.argv[1]
sys.dont_write_bytecode = True	# nothing written into the source tree
sys.path.insert(0, sys.argv[2])
from asuser import as_user
f = os.path.join(m, "f")
BOB = 4343
big = bytes(range(256)) * 256       # 64 KiB
fails = []


def as_bob(fn):
    return as_user(BOB, fn)


def err(fn):
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno


def expect(what, got, want):
    ok = got == want
    print(f"  {'ok  ' if ok else 'FAIL'} {what}: {errno.errorcode.get(got, got) if got else 'ok'}")
    if not ok:
        fails.append(what)


with open(f, "w") as fh:
    fh.write("data")
os.chmod(f, 0o666)
values = {"trusted.glusterfs.gfid": os.urandom(16), "trusted.big": big,
          "security.selinux": b"system_u:object_r:etc_t:s0\0", "security.ima": b"\x03" * 40,
          "user.plain": b"u"}
for k, v in values.items():
    os.setxattr(f, k, v)
for k, v in values.items():
    expect(f"root reads back {k}", 0 if os.getxattr(f, k) == v else errno.EIO, 0)
names = os.listxattr(f)
expect("root lists trusted.* and security.*",
       0 if all(k in names for k in values) else errno.ENODATA, 0)
expect("a 64 KiB + 1 value is refused", err(lambda: os.setxattr(f, "trusted.huge", big + b"x")),
       errno.E2BIG)
os.setxattr(f, "user.big1", big)
os.setxattr(f, "user.big2", big)
expect("a fourth 64 KiB value passes 256 KiB a file", err(lambda: os.setxattr(f, "user.big3", big)),
       errno.ENOSPC)
os.removexattr(f, "user.big1")
os.removexattr(f, "user.big2")
expect("system.foo is not supported", err(lambda: os.setxattr(f, "system.foo", b"x")),
       errno.EOPNOTSUPP)
os.setxattr(f, "trusted.gone", b"x")
os.removexattr(f, "trusted.gone")
expect("removed trusted.gone", err(lambda: os.getxattr(f, "trusted.gone")), errno.ENODATA)

print("uid 4343:")
expect("cannot set trusted.*", as_bob(lambda: os.setxattr(f, "trusted.bob", b"x")), errno.EPERM)
expect("cannot replace trusted.*", as_bob(lambda: os.setxattr(f, "trusted.big", b"x")), errno.EPERM)
expect("cannot remove trusted.*", as_bob(lambda: os.removexattr(f, "trusted.big")), errno.EPERM)
expect("cannot read trusted.*", as_bob(lambda: os.getxattr(f, "trusted.big")), errno.ENODATA)


def bob_lists():
    if [n for n in os.listxattr(f) if n.startswith("trusted.")]:
        raise OSError(errno.EEXIST, "trusted.* listed")
    if "security.selinux" not in os.listxattr(f):
        raise OSError(errno.ENODATA, "security.selinux not listed")


expect("does not list trusted.*, lists security.*", as_bob(bob_lists), 0)
expect("cannot set security.*", as_bob(lambda: os.setxattr(f, "security.bob", b"x")), errno.EPERM)
expect("can read security.*", as_bob(lambda: os.getxattr(f, "security.selinux")), 0)
expect("the values are unchanged", 0 if os.getxattr(f, "trusted.big") == big else errno.EIO, 0)
with open(os.path.join(m, "values"), "wb") as fh:
    for k, v in values.items():
        fh.write(k.encode() + b"\0" + v.hex().encode() + b"\n")
fd = os.open(f, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
if fails:
    sys.exit(f"{len(fails)} check(s) failed")
PY
cp "$ZF_MNT/values" "$ZF_WORK/values"

# setcap / getcap, and what drops a capability
F=$ZF_MNT/f
setcap cap_net_raw+ep "$F"
getcap "$F" | grep -q "cap_net_raw=ep" || zf_fail "getcap does not show cap_net_raw=ep: $(getcap "$F")"
python3 -c 'import os, sys
if os.fork() == 0:
    os.setgroups([]); os.setgid(4343); os.setuid(4343)
    with open(sys.argv[1], "a") as f: f.write("bob")
    os._exit(0)
os.wait()' "$F"
[ -z "$(getcap "$F")" ] || zf_fail "a write by uid 4343 left the capability: $(getcap "$F")"
setcap cap_net_raw+ep "$F"
chown 4343 "$F"
[ -z "$(getcap "$F")" ] || zf_fail "chown left the capability"
setcap cap_net_raw+ep "$F"
truncate -s 2 "$F"
[ -z "$(getcap "$F")" ] || zf_fail "truncate left the capability"
# a capability that stays: persisted with the rest
setcap cap_net_raw+ep "$ZF_MNT/values"
zf_log "setcap/getcap; write, chown and truncate drop the capability"

# KILLPRIV_V2 still spares the writes a security.capability round trip
before=$(zf_stat lat_xattr_count)
python3 -c 'import os,sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
for i in range(1000): os.write(fd, b"x" * 100)
os.fsync(fd)
os.close(fd)' "$ZF_MNT/killpriv"
after=$(zf_stat lat_xattr_count)
n=$((after - before - 1))
zf_log "GETXATTR during 1000 writes: $n"
[ "$n" -lt 20 ] || zf_fail "KILLPRIV_V2 not in effect: $n GETXATTR for 1000 writes"

zf_kill9
zf_fsck
zf_mount -o allow_other
check_values() {
	python3 - "$ZF_MNT/f" "$ZF_WORK/values" <<'PY' || zf_fail "xattrs lost ($1)"
import sys, os
f, vals = sys.argv[1], sys.argv[2]
for line in open(vals, "rb"):
    k, v = line.rstrip(b"\n").split(b"\0")
    got = os.getxattr(f, k.decode())
    assert got == bytes.fromhex(v.decode()), k
print("all values back")
PY
	getcap "$ZF_MNT/values" | grep -q "cap_net_raw=ep" || zf_fail "the capability was lost ($1)"
}
check_values "after kill -9"
zf_umount
zf_mount -o allow_other
check_values "after a clean remount"
zf_umount
zf_fsck
zf_pass "trusted.*/security.* stored, guarded by the kernel, persisted across kill -9; setcap/getcap; capability dropped on write/chown/truncate; KILLPRIV_V2 fast path kept"
