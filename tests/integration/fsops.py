#!/usr/bin/env python3
"""POSIX behaviour checks on a mounted zonefuse (used by basic_ops.sh).

  fsops.py prepare MNT   # every operation and edge case, leaves known state
  fsops.py verify MNT    # after unmount/remount (or kill -9): state is there

Each check raises AssertionError with a message; the exit code is non-zero on
the first failure.  Standard library only.
"""
import ctypes
import errno
import fcntl
import hashlib
import mmap
import os
import stat
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
AT_FDCWD = -100


def renameat2(a, b, flags):
    r = libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def expect_errno(code, fn, *args):
    try:
        fn(*args)
    except OSError as e:
        assert e.errno == code, f"{fn.__name__}{args}: errno {e.errno}, wanted {code}"
        return
    raise AssertionError(f"{fn.__name__}{args} succeeded, wanted errno {code}")


def pattern(n, seed):
    out = bytearray()
    h = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < n:
        out += h
        h = hashlib.sha256(h).digest()
    return bytes(out[:n])


def read(p):
    with open(p, "rb") as f:
        return f.read()


def prepare(m):
    j = lambda *a: os.path.join(m, *a)
    # create / write / read, sizes across block and chunk boundaries
    for n in (0, 1, 4095, 4096, 4097, 1 << 20, (3 << 20) + 5):
        with open(j(f"f{n}"), "wb") as f:
            f.write(pattern(n, n))
        assert read(j(f"f{n}")) == pattern(n, n), f"content of f{n}"
        assert os.stat(j(f"f{n}")).st_size == n
    # random-offset overwrites, fsync
    data = bytearray(pattern(2 << 20, "ow"))
    with open(j("overwrite"), "wb+") as f:
        f.write(data)
        for i in range(200):
            off = (i * 7919 * 4096 + i * 13) % (len(data) - 5000)
            chunk = pattern(1 + i * 17 % 4000, i)
            f.seek(off)
            f.write(chunk)
            data[off:off + len(chunk)] = chunk
        f.flush()
        os.fsync(f.fileno())
    assert read(j("overwrite")) == bytes(data)
    # mmap read (LevelDB maps tables)
    with open(j("f1048576"), "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        assert mm[:4096] == pattern(1 << 20, 1 << 20)[:4096]
        assert mm[-10:] == pattern(1 << 20, 1 << 20)[-10:]
        mm.close()
    # mmap write
    with open(j("mmapw"), "wb+") as f:
        f.truncate(8192)
        mm = mmap.mmap(f.fileno(), 8192)
        mm[100:105] = b"hello"
        mm.flush()
        mm.close()
    assert read(j("mmapw"))[100:105] == b"hello"
    # truncate up / down, sparse
    with open(j("trunc"), "wb+") as f:
        f.write(b"x" * 10000)
        f.truncate(3000)
        f.truncate(9000)
        f.seek(5 << 20)
        f.write(b"end")
    got = read(j("trunc"))
    assert got[:3000] == b"x" * 3000 and got[3000:] .count(b"\0") == (5 << 20) - 3000
    assert got[-3:] == b"end" and len(got) == (5 << 20) + 3
    os.truncate(j("trunc"), 100)
    assert read(j("trunc")) == b"x" * 100
    # fallocate: mode 0 extends, KEEP_SIZE keeps, punch zeroes
    fd = os.open(j("falloc"), os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"y" * 20000)
    os.posix_fallocate(fd, 0, 50000)
    assert os.fstat(fd).st_size == 50000
    FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2
    r = libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, ctypes.c_long(0), ctypes.c_long(1 << 20))
    assert r == 0 and os.fstat(fd).st_size == 50000, "fallocate KEEP_SIZE"
    r = libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       ctypes.c_long(1000), ctypes.c_long(9000))
    assert r == 0, "punch hole"
    got = os.pread(fd, 20000, 0)
    assert got[:1000] == b"y" * 1000 and got[1000:10000] == b"\0" * 9000 and got[10000:] == b"y" * 10000
    os.close(fd)
    # directories, readdir, rmdir
    os.mkdir(j("dir"))
    for i in range(300):
        open(j("dir", f"e{i:03d}"), "w").close()
    names = sorted(os.listdir(j("dir")))
    assert names == [f"e{i:03d}" for i in range(300)], "readdir"
    expect_errno(errno.ENOTEMPTY, os.rmdir, j("dir"))
    for i in range(0, 300, 2):
        os.unlink(j("dir", f"e{i:03d}"))
    assert len(os.listdir(j("dir"))) == 150
    os.mkdir(j("dir", "sub"))
    assert os.stat(j("dir")).st_nlink == 3
    os.rmdir(j("dir", "sub"))
    assert os.stat(j("dir")).st_nlink == 2
    expect_errno(errno.EEXIST, os.mkdir, j("dir"))
    expect_errno(errno.ENOTDIR, os.listdir, j("f1"))
    expect_errno(errno.ENOENT, os.stat, j("nope"))
    # names: 255 bytes ok, 256 ENAMETOOLONG
    open(j("n" * 255), "w").close()
    expect_errno(errno.ENAMETOOLONG, open, j("n" * 256), "w")
    # rename: over an existing file (atomic), over an open file, NOREPLACE, EXCHANGE
    with open(j("old"), "w") as f:
        f.write("old")
    with open(j("new"), "w") as f:
        f.write("new")
    held = open(j("old"), "r")
    os.rename(j("new"), j("old"))
    assert read(j("old")) == b"new" and held.read() == "old"
    held.close()
    with open(j("a"), "w") as f:
        f.write("A")
    with open(j("b"), "w") as f:
        f.write("B")
    expect_errno(errno.EEXIST, renameat2, j("a"), j("b"), RENAME_NOREPLACE)
    renameat2(j("a"), j("b"), RENAME_EXCHANGE)
    assert read(j("a")) == b"B" and read(j("b")) == b"A"
    expect_errno(errno.EINVAL, os.rename, j("dir"), j("dir", "inside"))
    # unlink an open file: still readable and writable through the fd
    with open(j("ghost"), "wb+") as f:
        f.write(b"boo" * 1000)
        os.unlink(j("ghost"))
        f.write(b"!")
        f.seek(0)
        assert f.read() == b"boo" * 1000 + b"!"
    assert not os.path.exists(j("ghost"))
    # hard links and symlinks
    os.link(j("f4096"), j("hard"))
    assert os.stat(j("hard")).st_nlink == 2 and read(j("hard")) == pattern(4096, 4096)
    os.symlink("f4096", j("sym"))
    assert os.readlink(j("sym")) == "f4096" and read(j("sym")) == pattern(4096, 4096)
    # chmod / chown / utime
    os.chmod(j("f1"), 0o600)
    assert stat.S_IMODE(os.stat(j("f1")).st_mode) == 0o600
    os.chown(j("f1"), 1234, 5678)
    assert os.stat(j("f1")).st_uid == 1234 and os.stat(j("f1")).st_gid == 5678
    os.utime(j("f1"), (1000000000, 1200000000))
    assert int(os.stat(j("f1")).st_mtime) == 1200000000
    # set-uid bit cleared by an unprivileged write (KILLPRIV: the fs does it)
    with open(j("suid"), "w") as f:
        f.write("x")
    os.chown(j("suid"), 1000, 1000)
    os.chmod(j("suid"), 0o4755)
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(1000)
            os.setuid(1000)
            with open(j("suid"), "a") as f:
                f.write("more")
            os._exit(0)
        except Exception as e:  # noqa: BLE001
            print("child:", e, file=sys.stderr)
            os._exit(1)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, "unprivileged append"
    assert not (os.stat(j("suid")).st_mode & stat.S_ISUID), "set-uid bit survived a write"
    # xattrs: user.* and trusted.* stored; zonefuse virtual ones readable, read-only
    os.setxattr(j("f1"), "user.color", b"blue")
    assert os.getxattr(j("f1"), "user.color") == b"blue"
    assert "user.color" in os.listxattr(j("f1"))
    os.setxattr(j("f1"), "user.gone", b"1")
    os.removexattr(j("f1"), "user.gone")
    expect_errno(errno.ENODATA, os.getxattr, j("f1"), "user.gone")
    expect_errno(errno.ENODATA, os.getxattr, j("f1"), "security.capability")
    os.setxattr(j("f1"), "trusted.x", b"1")     # stored (root); xattr_ns.sh has the rest
    assert os.getxattr(j("f1"), "trusted.x") == b"1"
    expect_errno(errno.EOPNOTSUPP, os.setxattr, j("f1"), "system.x", b"1")
    lt = os.getxattr(j("f1"), "user.zonefuse.lifetime").decode()
    assert lt.split()[0] in ("none", "short", "medium", "long", "extreme"), lt
    expect_errno(errno.EPERM, os.setxattr, j("f1"), "user.zonefuse.extents", b"1")
    os.setxattr(j("f1"), "user.zonefuse.lifetime", b"long")
    assert os.getxattr(j("f1"), "user.zonefuse.lifetime").decode().split() == ["long", "xattr"]
    # a closed file reaches the device within write_behind_ms (1 s), no fsync
    t0 = time.monotonic()
    while True:
        ext = os.getxattr(j("f1048576"), "user.zonefuse.extents").decode().split("\n")
        if sum(int(l.split()[1]) for l in ext if l and not l.startswith("#")) == 1 << 20:
            break
        assert time.monotonic() - t0 < 3, "extents cover the file 3 s after its close"
        time.sleep(0.01)
    # POSIX locks (LevelDB/RocksDB LOCK files)
    with open(j("LOCK"), "w") as f:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        pid = os.fork()
        if pid == 0:
            with open(j("LOCK"), "w") as g:
                try:
                    fcntl.lockf(g, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    os._exit(1)
                except OSError:
                    os._exit(0)
        _, st = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(st) == 0, "second lock must fail"
    # statfs reports real free space, which shrinks as data is written
    s1 = os.statvfs(m)
    with open(j("space"), "wb") as f:
        f.write(pattern(8 << 20, "space"))
        f.flush()
        os.fsync(f.fileno())
    s2 = os.statvfs(m)
    used = (s1.f_bfree - s2.f_bfree) * s2.f_frsize
    assert s1.f_blocks > 0 and (7 << 20) <= used <= (10 << 20), f"statfs delta {used}"
    os.sync()
    print("prepare: all checks passed")


def verify(m):
    j = lambda *a: os.path.join(m, *a)
    for n in (0, 1, 4095, 4096, 4097, 1 << 20, (3 << 20) + 5):
        assert read(j(f"f{n}")) == pattern(n, n), f"f{n} after remount"
    assert read(j("trunc")) == b"x" * 100
    assert len(os.listdir(j("dir"))) == 150
    assert read(j("old")) == b"new" and read(j("a")) == b"B" and read(j("b")) == b"A"
    assert os.path.exists(j("n" * 255)) and not os.path.exists(j("ghost"))
    assert os.stat(j("hard")).st_nlink == 2 and os.readlink(j("sym")) == "f4096"
    assert os.getxattr(j("f1"), "user.color") == b"blue"
    assert os.getxattr(j("f1"), "user.zonefuse.lifetime").decode().split() == ["long", "xattr"]
    st = os.stat(j("f1"))
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 1234 and int(st.st_mtime) == 1200000000
    assert read(j("space")) == pattern(8 << 20, "space")
    print("verify: all checks passed")


if __name__ == "__main__":
    {"prepare": prepare, "verify": verify}[sys.argv[1]](sys.argv[2])
