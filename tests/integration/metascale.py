#!/usr/bin/env python3
"""Many-small-files driver for meta_scale.sh (metadata scaling).

  metascale.py create DIR JOURNAL --first A --last B --dirs D [--size N]
                      [--fsync-every K] [--no-final-dirsync]
  metascale.py verify DIR JOURNAL --dirs D [--size N]
  metascale.py delete DIR --dirs D [--expect B]
  metascale.py fill   DIR JOURNAL --seed S [--fsync-every K] [--sizes mixed|small]
  metascale.py empty  DIR

File i (0 <= i) is DIR/dNNN/fIIIIIII, in directory i % D, holding
content(i): N bytes that are a pure function of i.  `create` makes the files
[A, B) (O_CREAT|O_TRUNC, so a range can be made again after a crash), every
K-th file is fsync'ed and then its directory; at the end every directory is
fsync'ed (fsync of the directory fd), and so is DIR.  JOURNAL (outside the
file system under test) gets one line per acknowledged durability point:

  F i        file i fsync'ed: it must exist with content(i)
  D d b      directory d fsync'ed while files [0, b) with i % D == d had
             been created: all those names must exist
  DONE a b   the range [a, b) was finished (all directories fsync'ed)

`verify` checks a journal after a crash and remount: every name the journal
made durable exists, every fsync'ed file holds exactly its content, and no
file (of a sample: 1 in --sample, default 37) holds a byte that is neither
its content's nor zero.
`delete` unlinks every file and removes every directory (each unlink must
succeed; --expect B: exactly the files [0, B) must be there).
`fill` writes files of mixed sizes (or only 100-byte ones) until ENOSPC, then reports (journal: the
names written and fsync'ed); `delete` then removes them with --any.
`empty` checks that DIR has no entries.

Each step has a watchdog (ZF_OP_TIMEOUT s, default 120): an operation that
takes longer is reported as a hang and the driver exits 3.  Exit codes:
0 ok, 1 check failed / unexpected errno (printed), 3 hang.
"""
import argparse
import errno
import os
import random
import signal
import sys
import time

OP_TIMEOUT = int(os.environ.get("ZF_OP_TIMEOUT", "120"))


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


signal.signal(signal.SIGALRM, _alarm)
_cur_op = ["start"]


def step(what):
    """Re-arm the watchdog for the next operation."""
    _cur_op[0] = what
    signal.alarm(OP_TIMEOUT)


def dname(d):
    return f"d{d:03d}"


def fname(i):
    return f"f{i:07d}"


def fpath(root, i, ndirs):
    return os.path.join(root, dname(i % ndirs), fname(i))


def content(i, n):
    base = f"zonefuse-metascale file {i:07d} ".encode()
    return (base * (n // len(base) + 1))[:n]


def dirsync(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def close_quietly(fd):
    try:
        os.close(fd)
    except OSError:
        pass


class Journal:
    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, line):
        os.write(self.fd, (line + "\n").encode())


def rate(n, t0):
    dt = time.monotonic() - t0
    return f"{n} in {dt:.1f} s ({n / dt if dt > 0 else 0:.0f}/s)"


def cmd_create(a):
    j = Journal(a.journal)
    t0 = time.monotonic()
    # the directories (idempotent: a second run after a crash finds them)
    for d in range(a.dirs):
        step(f"mkdir {dname(d)}")
        try:
            os.mkdir(os.path.join(a.dir, dname(d)))
        except FileExistsError:
            pass
    step("fsync of the root")
    dirsync(a.dir)
    j(f"READY {a.first} {a.last}")
    done = 0
    try:
        for i in range(a.first, a.last):
            p = fpath(a.dir, i, a.dirs)
            step(f"create {p}")
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                synced = a.fsync_every and (i + 1) % a.fsync_every == 0
                # Only the fsync'ed files hold data: every file with data
                # takes a 4 KiB block, and 300000 blocks do not fit 1 GiB.
                if synced or not a.empty:
                    step(f"write {p}")
                    if os.write(fd, content(i, a.size)) != a.size:
                        raise OSError(errno.EIO, f"short write to {p}")
                if synced:
                    step(f"fsync {p}")
                    os.fsync(fd)
                    j(f"F {i}")
                    step(f"fsync of directory {dname(i % a.dirs)}")
                    dirsync(os.path.dirname(p))
                    j(f"D {i % a.dirs} {i + 1}")
            except BaseException:
                close_quietly(fd)
                raise
            step(f"close {p}")
            os.close(fd)
            done += 1
            if done % 20000 == 0:
                print(f"metascale create: {rate(done, t0)}", file=sys.stderr, flush=True)
        if not a.no_final_dirsync:
            for d in range(a.dirs):
                step(f"fsync of directory {dname(d)}")
                dirsync(os.path.join(a.dir, dname(d)))
                j(f"D {d} {a.last}")
            step("fsync of the root")
            dirsync(a.dir)
            j(f"DONE {a.first} {a.last}")
    except Hang:
        print(f"metascale create: HANG: {_cur_op[0]} took more than {OP_TIMEOUT} s "
              f"(after {done} files)", flush=True)
        return 3
    except OSError as e:
        print(f"metascale create: {_cur_op[0]}: {os.strerror(e.errno or 0)} "
              f"(errno {e.errno} {errno.errorcode.get(e.errno, '?')}) after {done} files of "
              f"[{a.first}, {a.last}) in {time.monotonic() - t0:.1f} s", flush=True)
        return 1
    signal.alarm(0)
    print(f"metascale create: files [{a.first}, {a.last}): {rate(done, t0)}", flush=True)
    return 0


def cmd_verify(a):
    fsynced = set()
    dirmax = {}
    for line in open(a.journal):
        w = line.split()
        if w and w[0] == "F":
            fsynced.add(int(w[1]))
        elif w and w[0] == "D":
            d, b = int(w[1]), int(w[2])
            dirmax[d] = max(dirmax.get(d, 0), b)
    bad = []
    t0 = time.monotonic()
    try:
        # every name a directory fsync made durable
        need = set(fsynced)
        for d, b in dirmax.items():
            need.update(range(d, b, a.dirs))
        listed = {}
        for d in range(a.dirs):
            step(f"readdir {dname(d)}")
            try:
                listed[d] = set(os.listdir(os.path.join(a.dir, dname(d))))
            except FileNotFoundError:
                listed[d] = set()
        for i in sorted(need):
            if fname(i) not in listed[i % a.dirs]:
                bad.append(f"{dname(i % a.dirs)}/{fname(i)} missing"
                           + (" (fsync'ed)" if i in fsynced else " (its directory was fsync'ed)"))
        # contents: exact for fsync'ed files, else content bytes or zeros
        # (every fsync'ed file, and a sample of 1 in --sample of the others)
        nfiles = 0
        for d in range(a.dirs):
            for n in sorted(listed[d]):
                i = int(n[1:])
                if i not in fsynced and i % a.sample:
                    continue
                nfiles += 1
                p = os.path.join(a.dir, dname(d), n)
                step(f"read {p}")
                with open(p, "rb") as f:
                    got = f.read()
                exp = content(i, a.size)
                if i in fsynced:
                    if got != exp:
                        bad.append(f"{dname(d)}/{n} (fsync'ed) holds {len(got)} bytes "
                                   f"{got[:40]!r}, not its {a.size} bytes")
                elif len(got) > a.size or any(g != e and g != 0 for g, e in zip(got, exp)):
                    bad.append(f"{dname(d)}/{n} holds bytes never written to it: {got[:40]!r}")
    except Hang:
        print(f"metascale verify: HANG: {_cur_op[0]} took more than {OP_TIMEOUT} s", flush=True)
        return 3
    signal.alarm(0)
    if bad:
        print(f"metascale verify: {len(bad)} violations (of {len(need)} durable names):")
        for b in bad[:30]:
            print("  " + b)
        return 1
    print(f"metascale verify: {len(need)} durable names ({len(fsynced)} fsync'ed files) "
          f"present, contents of {nfiles} files checked in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


def cmd_delete(a):
    t0 = time.monotonic()
    n = 0
    try:
        names = []
        for e in sorted(os.listdir(a.dir)):
            p = os.path.join(a.dir, e)
            step(f"lstat {p}")
            if os.path.isdir(p):
                step(f"readdir {p}")
                names += [(e, f) for f in sorted(os.listdir(p))]
            else:
                names.append((None, e))
        if a.expect is not None:
            have = {int(f[1:]) for d, f in names if d is not None}
            want = set(range(a.expect))
            if have != want:
                miss = sorted(want - have)[:10]
                extra = sorted(have - want)[:10]
                print(f"metascale delete: {len(have)} files, expected {a.expect}: "
                      f"missing {miss}, unexpected {extra}", flush=True)
                return 1
        for k, (d, f) in enumerate(names):
            p = os.path.join(a.dir, f) if d is None else os.path.join(a.dir, d, f)
            step(f"unlink {p}")
            os.unlink(p)
            n += 1
            if n % 50000 == 0:
                print(f"metascale delete: {rate(n, t0)}", file=sys.stderr, flush=True)
        for e in sorted(os.listdir(a.dir)):
            p = os.path.join(a.dir, e)
            step(f"rmdir {p}")
            os.rmdir(p)
        step("fsync of the root")
        dirsync(a.dir)
    except Hang:
        print(f"metascale delete: HANG: {_cur_op[0]} took more than {OP_TIMEOUT} s "
              f"(after {n} unlinks)", flush=True)
        return 3
    except OSError as e:
        print(f"metascale delete: {_cur_op[0]}: {os.strerror(e.errno or 0)} "
              f"(errno {e.errno} {errno.errorcode.get(e.errno, '?')}) after {n} unlinks "
              f"in {time.monotonic() - t0:.1f} s", flush=True)
        return 1
    signal.alarm(0)
    print(f"metascale delete: {rate(n, t0)} unlinked, directories removed", flush=True)
    return 0


# mixed sizes for fill: mostly small, some large (bytes, weight)
FILL_SIZES = [(0, 5), (100, 55), (4096, 25), (65536, 10), (1 << 20, 4), (3 << 20, 1)]


def cmd_fill(a):
    r = random.Random(a.seed)
    j = Journal(a.journal)
    sizes = [s for s, w in FILL_SIZES for _ in range(w)] if a.sizes == "mixed" else [100]
    ndirs = 16
    t0 = time.monotonic()
    n = written = alloc = 0
    where = None
    try:
        for d in range(ndirs):
            step(f"mkdir {dname(d)}")
            os.mkdir(os.path.join(a.dir, dname(d)))
        while True:
            i = n
            sz = r.choice(sizes)
            p = fpath(a.dir, i, ndirs)
            where = f"create {p}"
            step(where)
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            j(f"N {i} {sz}")
            n += 1
            try:
                off = 0
                while off < sz:
                    k = min(sz - off, 1 << 20)
                    where = f"write {p} at {off}"
                    step(where)
                    off += os.write(fd, content(i, k))
                written += sz
                alloc += -(-sz // 4096) * 4096
                if (i + 1) % a.fsync_every == 0:
                    where = f"fsync {p}"
                    step(where)
                    os.fsync(fd)
                    where = f"fsync of directory {dname(i % ndirs)}"
                    step(where)
                    dirsync(os.path.dirname(p))
            except BaseException:
                close_quietly(fd)
                raise
            where = f"close {p}"
            step(where)
            os.close(fd)
            if n > 10_000_000:
                print("metascale fill: never got ENOSPC", flush=True)
                return 1
    except Hang:
        print(f"metascale fill: HANG: {_cur_op[0]} took more than {OP_TIMEOUT} s "
              f"(after {n} files)", flush=True)
        return 3
    except OSError as e:
        signal.alarm(0)
        if e.errno != errno.ENOSPC:
            print(f"metascale fill: {where}: {os.strerror(e.errno or 0)} (errno {e.errno} "
                  f"{errno.errorcode.get(e.errno, '?')}), expected ENOSPC, after {n} files",
                  flush=True)
            return 1
    st = os.statvfs(a.dir)
    cap = st.f_blocks * st.f_frsize
    print(f"metascale fill: ENOSPC at \"{where}\" after {n} files, {written >> 20} MiB "
          f"written, {alloc >> 20} MiB in 4 KiB blocks of {cap >> 20} MiB "
          f"({100 * alloc // cap}% allocated), {time.monotonic() - t0:.1f} s", flush=True)
    return 0


def cmd_empty(a):
    e = os.listdir(a.dir)
    if e:
        print(f"metascale empty: {a.dir} holds {len(e)} entries: {sorted(e)[:10]}")
        return 1
    print("metascale empty: root is empty")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("create")
    c.add_argument("dir")
    c.add_argument("journal")
    c.add_argument("--first", type=int, required=True)
    c.add_argument("--last", type=int, required=True)
    c.add_argument("--dirs", type=int, default=300)
    c.add_argument("--size", type=int, default=100)
    c.add_argument("--empty", action="store_true",
                   help="files that are not fsync'ed stay empty")
    c.add_argument("--fsync-every", type=int, default=200)
    c.add_argument("--no-final-dirsync", action="store_true")
    v = sub.add_parser("verify")
    v.add_argument("dir")
    v.add_argument("journal")
    v.add_argument("--dirs", type=int, default=300)
    v.add_argument("--size", type=int, default=100)
    v.add_argument("--sample", type=int, default=37)
    d = sub.add_parser("delete")
    d.add_argument("dir")
    d.add_argument("--expect", type=int)
    f = sub.add_parser("fill")
    f.add_argument("dir")
    f.add_argument("journal")
    f.add_argument("--seed", type=int, default=1)
    f.add_argument("--fsync-every", type=int, default=20)
    f.add_argument("--sizes", choices=("mixed", "small"), default="mixed")
    e = sub.add_parser("empty")
    e.add_argument("dir")
    a = p.parse_args()
    return {"create": cmd_create, "verify": cmd_verify, "delete": cmd_delete,
            "fill": cmd_fill, "empty": cmd_empty}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
