#!/bin/bash
# What an unprivileged user and a full device do through the mount
# (issue: nothing a user does may take the file system away).
#
# 1. Deep tree: user 4242 makes 3,000 nested directories by mkdir + chdir
#    (no path is ever long); after an unmount the file system is clean,
#    mounts read-write and holds the whole chain.
# 2. Set-id bits and capabilities: a root-owned 04777 file (and 02777,
#    02767) loses S_ISUID (and S_ISGID where group-exec is set) when user
#    4242 changes its data by copy_file_range, fallocate (allocate, keep
#    size, punch hole) or write; a file's security.capability goes with a
#    write; stat shows the new mode at once, without a remount.
# 3. A full device, with -o bdi_limit=strict (the kernel's dirty pages
#    capped at the room kept for them): a writer of a known pattern gets
#    ENOSPC; after a remount the file holds a prefix of the pattern (no
#    hole, nothing that was refused); a new file's write() on the full
#    device fails with ENOSPC itself (files opened while space is low bypass
#    the page cache); the refusal is a warning in the log; while space is
#    low the mount's dirty pages are capped at one zone (strict_limit 1,
#    max_bytes 4 MiB).
# 4. The same with the default bdi settings (global dirty limit): the
#    stored file is still a prefix of what was written.
# 5. With -o writeback_cache=off no file can dirty the page cache, so no
#    room is kept for it: the writer meets ENOSPC with at most the
#    collector's two zones (its floor and reserve) left, not the dirty
#    reserve (7 MiB here) on top.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_prog python3 python3
zf_require_prog setcap libcap2-bin
zf_require_prog getfattr attr
zf_setup --zone-size 4M --zones 32
chmod 755 "$ZF_WORK"
HERE=$(cd "$(dirname "$0")" && pwd)

# ---- 1 and 2 ---------------------------------------------------------------
zf_mount -o allow_other
python3 - "$ZF_MNT" "$HERE" <<'PY' || zf_fail "unprivileged shapes"
import errno, os, stat, subprocess, sys
m = sys.argv[1]
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[2])
from asuser import as_user
U = 4242
fails = []

def check(what, ok):
    print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        fails.append(what)

top = os.path.join(m, "deep")
os.mkdir(top)
os.chmod(top, 0o777)
DEPTH = 3000
def deep():
    os.chdir(top)
    for _ in range(DEPTH):
        os.mkdir("d")
        os.chdir("d")
    with open("leaf", "w") as f:
        f.write("bottom")
r = as_user(U, deep)
check(f"user makes {DEPTH} nested directories: {r and errno.errorcode[r] or 'ok'}", r == 0)

def setid_file(name, mode):
    p = os.path.join(m, name)
    with open(p, "wb") as f:
        f.write(b"x" * 65536)
    os.chmod(p, mode)
    return p

src = os.path.join(m, "src")
with open(src, "wb") as f:
    f.write(b"s" * 65536)
os.chmod(src, 0o644)

def copy_into(p):
    def fn():
        a = os.open(src, os.O_RDONLY)
        b = os.open(p, os.O_WRONLY)
        os.copy_file_range(a, b, 8192, 0, 4096)
        os.close(a)
        os.close(b)
    return fn

def falloc(p, mode):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    def fn():
        fd = os.open(p, os.O_WRONLY)
        try:
            if libc.fallocate(fd, mode, 4096, 8192) != 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
        finally:
            os.close(fd)
    return fn

def write_to(p):
    def fn():
        with open(p, "r+b") as f:
            f.write(b"w")
    return fn

KEEP, PUNCH = 1, 2
for how, fn in [("copy_file_range", copy_into), ("fallocate", lambda p: falloc(p, 0)),
                ("fallocate keep-size", lambda p: falloc(p, KEEP)),
                ("fallocate punch-hole", lambda p: falloc(p, PUNCH | KEEP)),
                ("write", write_to)]:
    for mode, want in [(0o4777, 0o777), (0o2777, 0o777), (0o2767, 0o2767), (0o6777, 0o777)]:
        p = setid_file(f"setid-{how.replace(' ', '-')}-{mode:o}", mode)
        r = as_user(U, fn(p))
        got = stat.S_IMODE(os.stat(p).st_mode)
        check(f"{how} by another user on a {mode:o} file: {r and errno.errorcode[r] or 'ok'}, "
              f"mode {got:o} (want {want:o})", r == 0 and got == want)

capf = setid_file("cap", 0o777)
subprocess.run(["setcap", "cap_net_raw+ep", capf], check=True)
r = as_user(U, write_to(capf))
caps = subprocess.run(["getcap", capf], capture_output=True, text=True).stdout.strip()
check(f"a write by another user drops security.capability ({caps or 'none left'})",
      r == 0 and not caps)
sys.exit(1 if fails else 0)
PY
zf_umount
zf_fsck
zf_mount -o allow_other
python3 - "$ZF_MNT" <<'PY' || zf_fail "the deep tree after a remount"
import os, sys
d = os.path.join(sys.argv[1], "deep")
fd = os.open(d, os.O_RDONLY)
n = 0
while True:
    try:
        nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
    except FileNotFoundError:
        break
    os.close(fd)
    fd, n = nfd, n + 1
leaf = os.open("leaf", os.O_RDONLY, dir_fd=fd)
assert os.read(leaf, 100) == b"bottom"
print(f"  ok   {n} levels and the leaf after a remount")
assert n == 3000, n
PY
zf_umount

# ---- 3 and 4 ---------------------------------------------------------------
fill_and_check() { # tag, mount options...
	local tag=$1; shift
	"$ZF_EMU" create "$ZF_WORK/full.img" --zone-size 4M --zones 32 >/dev/null
	"$ZF_MKFS" "$ZF_WORK/full.img" >/dev/null
	local dev=$ZF_DEV
	ZF_DEV=$ZF_WORK/full.img
	zf_mount -o "allow_other$*"
	python3 "$HERE/fillcheck.py" "$ZF_MNT/big" write | tee "$ZF_WORK/fill.out"
	grep -q ' ENOSPC$' "$ZF_WORK/fill.out" || zf_fail "$tag: the writer never met ENOSPC"
	# Space is low: the mount's dirty pages are capped at one zone, strictly
	# (checked while the log's last word on space stays "low": a refusal's
	# cut may free enough to end it).
	local bdi states
	bdi=/sys/class/bdi/$(python3 -c 'import os,sys; d=os.stat(sys.argv[1]).st_dev; print(f"{os.major(d)}:{os.minor(d)}")' "$ZF_MNT")
	states=$(grep -c 'space is' "$ZF_LOG" || true)
	if ! [ -e "$bdi/strict_limit" ] || ! [ -e "$bdi/max_bytes" ]; then
		zf_log "$tag: no strict_limit/max_bytes in $bdi (a kernel before 6.2): cap not checked"
	elif grep 'space is' "$ZF_LOG" | tail -n 1 | grep -q 'no longer low'; then
		zf_log "$tag: space is no longer low after the fill: cap not checked"
	else
		# (the kernel keeps max_bytes as a share of its limit: a little less)
		local sl mb
		sl=$(cat "$bdi/strict_limit") mb=$(cat "$bdi/max_bytes")
		[ "$(grep -c 'space is' "$ZF_LOG" || true)" != "$states" ] ||
			{ [ "$sl" = 1 ] && [ "$mb" -le 4194304 ] && [ "$mb" -ge 4000000 ]; } ||
			zf_fail "$tag: space is low but the bdi has strict_limit $sl, max_bytes $mb"
	fi
	# A new file on the full device: write() itself, or close(), says so.
	python3 - "$ZF_MNT/small" <<'PY' || zf_fail "$tag: a small write on the full device"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
try:
    os.write(fd, b"hi\n")
    wrote = True
except OSError as e:
    assert e.errno == errno.ENOSPC, e
    wrote = False
try:
    os.close(fd)
    closed = True
except OSError as e:
    assert e.errno == errno.ENOSPC, e
    closed = False
print(f"  small file: write() {'ok' if wrote else 'ENOSPC'}, close() {'ok' if closed else 'ENOSPC'}")
open(sys.argv[1] + ".ok", "w").close() if wrote and closed else None
PY
	zf_umount
	grep -q 'write-back of inode [0-9]* refused' "$ZF_LOG" ||
		zf_log "$tag: no write-back was refused (every refusal came at write())"
	zf_fsck
	zf_mount -o allow_other
	python3 "$HERE/fillcheck.py" "$ZF_MNT/big" check | tee "$ZF_WORK/check.out"
	grep -q ' prefix$' "$ZF_WORK/check.out" || zf_fail "$tag: the stored file is not a prefix of what was written"
	if [ -e "$ZF_MNT/small.ok" ]; then
		[ "$(cat "$ZF_MNT/small")" = hi ] || zf_fail "$tag: a write that succeeded is lost"
	fi
	rm -f "$ZF_MNT/big" "$ZF_MNT/small" "$ZF_MNT/small.ok"
	zf_umount
	rm -f "$ZF_WORK/full.img"
	ZF_DEV=$dev
}
fill_and_check "strict dirty limit" ",bdi_limit=strict"
fill_and_check "default dirty limit" ""

# ---- 5 ---------------------------------------------------------------------
"$ZF_EMU" create "$ZF_WORK/full.img" --zone-size 4M --zones 32 >/dev/null
"$ZF_MKFS" "$ZF_WORK/full.img" >/dev/null
ZF_DEV=$ZF_WORK/full.img
zf_mount -o writeback_cache=off
python3 "$HERE/fillcheck.py" "$ZF_MNT/big" write | tee "$ZF_WORK/fill.out"
grep -q ' ENOSPC$' "$ZF_WORK/fill.out" || zf_fail "writeback_cache=off: the writer never met ENOSPC"
getfattr --absolute-names --only-values -n user.zonefuse.stats "$ZF_MNT" >"$ZF_WORK/stats"
zf_umount
stat_of() { sed -n "s/^$1=//p" "$ZF_WORK/stats"; }
valid=$(stat_of valid_bytes) cap=$(stat_of capacity_bytes) zone=$(stat_of zone_size)
echo "  ENOSPC with $((valid >> 20)) of $((cap >> 20)) MiB valid (zones of $((zone >> 20)) MiB)"
[ $((valid + 2 * zone)) -ge "$cap" ] ||
	zf_fail "writeback_cache=off: ENOSPC with $(((cap - valid) >> 20)) MiB left, more than two zones"
zf_pass "deep tree, set-id and capabilities, full device (strict, default, no cache)"
