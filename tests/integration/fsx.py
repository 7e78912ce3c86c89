#!/usr/bin/env python3
"""fsx-style model test: the same random operations on zonefuse and on a
reference directory (tmpfs), contents compared after every step.

  fsx.py run    TEST_DIR REF_DIR --seed S --ops N [--start K] [--maxsize B]
  fsx.py verify TEST_DIR REF_DIR

Operations: write (random offset/length, sometimes block aligned, sometimes
far beyond EOF), append, truncate (down, up, to 0), fallocate (mode 0 to
extend, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE), copy_file_range (between two
files or within one; offsets mostly congruent modulo the block so zonefuse
shares extents, sometimes not; lengths past the source's end), read, mmap
read, mmap write
(when the mount allows shared writable maps), fsync/fdatasync, close and
reopen, create, rename (also over an existing file), link, unlink, and a
few operations that must fail the same way (unlink or rename of a missing
name, link over an existing name).  After each step the touched byte range,
the size and the link count are compared; every 64 steps (after fsync and
dropping the cached pages so the daemon serves the reads) whole files and
the directory listing.  The reference directory IS the model, so a run can
stop (e.g. for a remount) and continue with --start K.

Every op is printed to stdout as "#k op args" only on failure (the last 30
before the mismatch), with the seed: replay with the same --seed/--ops.
Exit: 0 same, 1 mismatch, 2 usage.
"""
import argparse
import ctypes
import errno
import mmap
import os
import random
import sys

FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
BLK = 4096
NAMES = [f"f{i}" for i in range(8)]


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class Mismatch(Exception):
    pass


def copy_range(fdin, fdout, n, soff, doff):
    """copy_file_range until n bytes are copied or the source's end (as it
    was before the first step: within one file later steps would read what
    the first ones wrote); the total."""
    n = max(0, min(n, os.fstat(fdin).st_size - soff))
    done = 0
    while done < n:
        c = os.copy_file_range(fdin, fdout, n - done, soff + done, doff + done)
        if c == 0:
            break
        done += c
    return done


class Fsx:
    def __init__(self, tdir, rdir, seed, maxsize):
        self.t, self.r = tdir, rdir
        self.rng = random.Random(seed)
        self.seed = seed
        self.maxsize = maxsize
        self.fds = {}      # name -> (tfd, rfd) (by name; links share the inode)
        self.hist = []
        self.mapwrite = True
        self.counts = {}
        self.paranoid = 0

    # ---- helpers
    def names(self):
        return sorted(os.listdir(self.r))

    def fd(self, name):
        if name not in self.fds:
            self.fds[name] = (os.open(os.path.join(self.t, name), os.O_RDWR),
                              os.open(os.path.join(self.r, name), os.O_RDWR))
        return self.fds[name]

    def close(self, name):
        fds = self.fds.pop(name, None)
        if fds:
            os.close(fds[0])
            os.close(fds[1])

    def close_all(self):
        for n in list(self.fds):
            self.close(n)

    def both(self, what, ft, fr):
        """Runs ft() and fr(); both must succeed, or fail with the same errno."""
        et = er = None
        try:
            rt = ft()
        except OSError as e:
            et, rt = e.errno, None
        try:
            rr = fr()
        except OSError as e:
            er, rr = e.errno, None
        if et != er:
            raise Mismatch(f"{what}: zonefuse {'errno ' + errno.errorcode.get(et, str(et)) if et else 'ok'}"
                           f", reference {'errno ' + errno.errorcode.get(er, str(er)) if er else 'ok'}")
        return rt, rr

    def compare_range(self, name, off, length):
        tfd, rfd = self.fd(name)
        st, sr = os.fstat(tfd), os.fstat(rfd)
        if st.st_size != sr.st_size:
            raise Mismatch(f"{name}: size {st.st_size}, reference {sr.st_size}")
        if st.st_nlink != sr.st_nlink:
            raise Mismatch(f"{name}: nlink {st.st_nlink}, reference {sr.st_nlink}")
        off = max(0, off - BLK)
        length = min(length + 2 * BLK, max(0, sr.st_size - off) + BLK)
        a = os.pread(tfd, length, off)
        b = os.pread(rfd, length, off)
        if a != b:
            k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            raise Mismatch(f"{name}: byte {off + k} differs (zonefuse "
                           f"{a[k] if k < len(a) else 'EOF'}, reference {b[k] if k < len(b) else 'EOF'}),"
                           f" read of {length} at {off} gave {len(a)} / {len(b)} bytes")

    def compare_all(self, drop=True):
        tn = sorted(os.listdir(self.t))
        rn = self.names()
        if tn != rn:
            raise Mismatch(f"directory: zonefuse {tn}, reference {rn}")
        for n in rn:
            tp, rp = os.path.join(self.t, n), os.path.join(self.r, n)
            st, sr = os.stat(tp), os.stat(rp)
            if (st.st_size, st.st_nlink) != (sr.st_size, sr.st_nlink):
                raise Mismatch(f"{n}: size/nlink {st.st_size}/{st.st_nlink}, "
                               f"reference {sr.st_size}/{sr.st_nlink}")
            fd = os.open(tp, os.O_RDONLY)
            try:
                if drop:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                a = b""
                while True:
                    c = os.read(fd, 1 << 20)
                    if not c:
                        break
                    a += c
            finally:
                os.close(fd)
            with open(rp, "rb") as f:
                b = f.read()
            if a != b:
                k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
                raise Mismatch(f"{n}: whole-file compare: byte {k} differs ({len(a)} / {len(b)} bytes)")

    # ---- one step
    def step(self, k):
        r = self.rng
        names = self.names()
        ops = ["write"] * 20 + ["append"] * 8 + ["read"] * 6 + ["mapread"] * 4 + \
              ["mapwrite"] * 3 + ["trunc"] * 6 + ["falloc"] * 3 + ["punch"] * 5 + \
              ["fsync"] * 3 + ["reopen"] * 3 + ["create"] * 3 + ["rename"] * 3 + \
              ["link"] * 2 + ["unlink"] * 2 + ["bad"] * 1 + ["copy"] * 6
        op = r.choice(ops)
        if not names:
            op = "create"
        if op == "create" and len(names) >= len(NAMES):
            op = "write"
        name = r.choice(names) if names else None
        size = os.stat(os.path.join(self.r, name)).st_size if name else 0
        self.counts[op] = self.counts.get(op, 0) + 1

        def log(s):
            self.hist.append(f"#{k} {s}")
            del self.hist[:-int(os.environ.get("FSX_HIST", "30"))]

        if op in ("write", "append", "mapwrite"):
            x = r.random()
            n = r.randint(1, 3000) if x < 0.4 else r.randint(1, 200000) if x < 0.85 \
                else r.randint(1, 1 << 21)
            if op == "append":
                off = size
            elif op == "mapwrite":
                if size == 0 or not self.mapwrite:
                    op = "write"
                off = r.randint(0, max(0, size - 1))
                n = min(n, size - off) if size else n
            else:
                off = r.randint(0, size + (1 << 20 if r.random() < 0.1 else 65536))
                if r.random() < 0.3:
                    off -= off % BLK
                    n = max(BLK, n - n % BLK)
            if op != "mapwrite" and off + n > self.maxsize:
                off = r.randint(0, max(0, self.maxsize - n))
            data = r.randbytes(n)
            tfd, rfd = self.fd(name)
            if op == "mapwrite":
                log(f"mapwrite {name} {off} {n}")
                try:
                    self.mwrite(tfd, off, data)
                except OSError as e:
                    if e.errno in (errno.ENODEV, errno.EACCES, errno.EINVAL):
                        self.mapwrite = False     # not supported on this mount
                        os.pwrite(tfd, data, off)
                    else:
                        raise
                self.mwrite(rfd, off, data)
            else:
                log(f"{op} {name} {off} {n}")
                self.both(f"pwrite {name}", lambda: os.pwrite(tfd, data, off),
                          lambda: os.pwrite(rfd, data, off))
            self.compare_range(name, off, n)
        elif op == "read":
            off = r.randint(0, size + 10000)
            n = r.randint(1, 1 << 20)
            log(f"read {name} {off} {n}")
            self.compare_range(name, off, n)
        elif op == "mapread":
            log(f"mapread {name}")
            if size:
                tfd, rfd = self.fd(name)
                off = r.randint(0, size - 1) & ~(mmap.PAGESIZE - 1)
                n = r.randint(1, size - off)
                a = self.mread(tfd, off, n)
                b = self.mread(rfd, off, n)
                if a != b:
                    kk = next(i for i in range(len(a)) if a[i] != b[i])
                    raise Mismatch(f"mmap read of {name} [{off}, +{n}): byte {off + kk} differs")
        elif op == "trunc":
            x = r.random()
            ns = 0 if x < 0.1 else r.randint(0, size) if x < 0.7 else \
                r.randint(size, min(self.maxsize, size + 300000))
            if r.random() < 0.3:
                ns -= ns % BLK
            log(f"truncate {name} {ns}")
            tfd, rfd = self.fd(name)
            self.both(f"ftruncate {name}", lambda: os.ftruncate(tfd, ns), lambda: os.ftruncate(rfd, ns))
            self.compare_range(name, min(ns, size), abs(ns - size) + BLK)
        elif op in ("falloc", "punch"):
            tfd, rfd = self.fd(name)
            if op == "punch":
                mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                off = r.randint(0, size + 10000)
                n = r.randint(1, max(1, size - off + 20000)) if r.random() < 0.7 else r.randint(1, 3 * BLK)
                if r.random() < 0.4:
                    off -= off % BLK
                    n = max(BLK, n - n % BLK)
            else:
                mode = r.choice([0, FALLOC_FL_KEEP_SIZE])
                off = r.randint(0, size + 100000)
                n = r.randint(1, 400000)
                if off + n > self.maxsize:
                    off, n = 0, min(n, self.maxsize)
            log(f"fallocate {name} mode {mode} {off} {n}")
            self.both(f"fallocate {name}", lambda: fallocate(tfd, mode, off, n),
                      lambda: fallocate(rfd, mode, off, n))
            self.compare_range(name, off, n)
        elif op == "copy":
            dst = r.choice(names)
            dsize = os.stat(os.path.join(self.r, dst)).st_size
            soff = r.randint(0, size + 5000)
            if r.random() < 0.6:
                soff -= soff % BLK
            n = r.randint(1, 3 * BLK) if r.random() < 0.3 else r.randint(1, 1 << 20)
            if r.random() < 0.3:
                n = max(1, size - soff + r.randint(0, 8000))   # to (past) the end
            doff = r.randint(0, dsize + 65536)
            if r.random() < 0.8:
                doff = doff - doff % BLK + soff % BLK           # congruent: shared
            if doff + n > self.maxsize:
                doff = max(0, self.maxsize - n)
                doff = doff - doff % BLK + soff % BLK if doff >= BLK else doff
            log(f"copy_file_range {name} {soff} -> {dst} {doff} {n}")
            (tsi, rsi), (tdo, rdo) = self.fd(name), self.fd(dst)
            ct, cr = self.both(f"copy_file_range {name} -> {dst}",
                               lambda: copy_range(tsi, tdo, n, soff, doff),
                               lambda: copy_range(rsi, rdo, n, soff, doff))
            if ct != cr:
                raise Mismatch(f"copy_file_range {name} -> {dst}: copied {ct}, reference {cr}")
            self.compare_range(dst, doff, n)
            self.compare_range(name, soff, n)
        elif op == "fsync":
            log(f"fsync {name}")
            tfd, rfd = self.fd(name)
            (os.fsync if r.random() < 0.5 else os.fdatasync)(tfd)
        elif op == "reopen":
            log(f"close+reopen {name}")
            self.close(name)
            self.compare_range(name, 0, min(size, 1 << 20))
        elif op == "create":
            n = r.choice([x for x in NAMES if x not in names])
            log(f"create {n}")
            self.both(f"create {n}",
                      lambda: os.close(os.open(os.path.join(self.t, n), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)),
                      lambda: os.close(os.open(os.path.join(self.r, n), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)))
            self.compare_range(n, 0, 0)
        elif op == "rename":
            dst = r.choice(NAMES)
            log(f"rename {name} {dst}")
            self.close(name)
            self.close(dst)
            self.both(f"rename {name} {dst}",
                      lambda: os.rename(os.path.join(self.t, name), os.path.join(self.t, dst)),
                      lambda: os.rename(os.path.join(self.r, name), os.path.join(self.r, dst)))
            if os.path.exists(os.path.join(self.r, dst)):
                self.compare_range(dst, 0, 65536)
        elif op == "link":
            dst = r.choice(NAMES)
            log(f"link {name} {dst}")
            self.both(f"link {name} {dst}",
                      lambda: os.link(os.path.join(self.t, name), os.path.join(self.t, dst)),
                      lambda: os.link(os.path.join(self.r, name), os.path.join(self.r, dst)))
            self.compare_range(name, 0, 4096)
        elif op == "unlink":
            log(f"unlink {name}")
            self.close(name)
            self.both(f"unlink {name}", lambda: os.unlink(os.path.join(self.t, name)),
                      lambda: os.unlink(os.path.join(self.r, name)))
        elif op == "bad":
            missing = [x for x in NAMES if x not in names] or ["nope"]
            m = r.choice(missing)
            log(f"must-fail ops on {m}")
            self.both(f"unlink missing {m}", lambda: os.unlink(os.path.join(self.t, m)),
                      lambda: os.unlink(os.path.join(self.r, m)))
            self.both(f"rename missing {m}",
                      lambda: os.rename(os.path.join(self.t, m), os.path.join(self.t, "x")),
                      lambda: os.rename(os.path.join(self.r, m), os.path.join(self.r, "x")))
            if len(names) >= 2:
                self.both(f"link onto existing {names[1]}",
                          lambda: os.link(os.path.join(self.t, names[0]), os.path.join(self.t, names[1])),
                          lambda: os.link(os.path.join(self.r, names[0]), os.path.join(self.r, names[1])))

    @staticmethod
    def mread(fd, off, n):
        with mmap.mmap(fd, off + n, prot=mmap.PROT_READ, flags=mmap.MAP_SHARED) as m:
            return bytes(m[off:off + n])

    @staticmethod
    def mwrite(fd, off, data):
        with mmap.mmap(fd, off + len(data), prot=mmap.PROT_READ | mmap.PROT_WRITE,
                       flags=mmap.MAP_SHARED) as m:
            m[off:off + len(data)] = data
            m.flush()

    def run(self, start, nops):
        k = start
        try:
            for k in range(start, start + nops):
                self.step(k)
                if self.paranoid:
                    self.compare_all(drop=self.paranoid > 1)
                if k % 64 == 63:
                    for n in list(self.fds):
                        os.fsync(self.fds[n][0])
                    self.close_all()
                    self.compare_all()
            self.close_all()
            self.compare_all()
        except Mismatch as e:
            print("\n".join(self.hist))
            print(f"MISMATCH at op #{k} (seed {self.seed}): {e}")
            print(f"replay: fsx.py run TEST REF --seed {self.seed} --ops {k + 1 - start} "
                  f"--start {start} on the same starting state")
            return 1
        ops = ", ".join(f"{o} {c}" for o, c in sorted(self.counts.items()))
        print(f"fsx: seed {self.seed}: ops #{start}..#{start + nops - 1} identical "
              f"({ops}; mmap write {'on' if self.mapwrite else 'not supported'})")
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=("run", "verify"))
    ap.add_argument("test_dir")
    ap.add_argument("ref_dir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--maxsize", type=int, default=6 << 20)
    ap.add_argument("--paranoid", type=int, default=0,
                    help="compare every file after every op (2: also drop cached pages)")
    o = ap.parse_args()
    for d in (o.test_dir, o.ref_dir):
        os.makedirs(d, exist_ok=True)
    f = Fsx(o.test_dir, o.ref_dir, o.seed * 1000003 + o.start, o.maxsize)
    f.seed = o.seed
    f.paranoid = o.paranoid
    if o.cmd == "verify":
        try:
            f.compare_all()
        except Mismatch as e:
            print(f"MISMATCH after remount: {e}")
            return 1
        print("fsx verify: identical")
        return 0
    return f.run(o.start, o.ops)


if __name__ == "__main__":
    sys.exit(main())
