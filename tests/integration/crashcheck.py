#!/usr/bin/env python3
"""Crash-consistency checker for zonefuse (used by crash_loop.sh and
scripts/crashtest.sh).

  crashcheck.py run    DIR JOURNAL --seed S [--max-ops N]
  crashcheck.py verify DIR JOURNAL

`run` creates DIR with two subdirectories and does random operations in them
(create, write, append, truncate, copy_file_range, rename, link, unlink,
fsync, fdatasync, fsync of a directory) until it is stopped: by an error (the daemon was
killed: ENOTCONN/EIO...) or after --max-ops.  Before every operation it
appends "B <id> <op...>" to JOURNAL, after it "E <id> ok [...]" or
"E <id> err <errno>".  JOURNAL must be OUTSIDE the file system under test (it
is on the machine's own disk, which does not crash): the journal is the
record of what zonefuse acknowledged.  Write payloads are a pure function of
the operation id, so the journal stays small.

`verify` (after the crash and a remount) replays the journal into a model
and checks what is on the file system against the promises:

  names  (promise)  each directory holds the names it had at some moment at
                    or after its last acknowledged fsync(dir);
         (prefix)   stronger, what zonefuse's design gives (fs.h: the state
                    after a crash is a prefix of the record stream and every
                    fsync commits the whole log): ONE moment at or after the
                    last acknowledged fsync of anything explains both
                    directories at once;
  data              every file (identified by its inode number, which is
                    persistent) has a size within the sizes it had since its
                    last acknowledged fsync/fdatasync, and every byte holds a
                    value that byte had at some moment since then (the value
                    at that fsync, a value written since, or zero where the
                    file was shorter) -- so nothing fsync'ed is lost and no
                    byte comes from another file or a reused zone.
The operation in flight at the crash may or may not have happened.

Exit codes: 0 ok, 1 violation (printed), 2 usage/journal error.
"""
import argparse
import errno
import os
import random
import stat
import sys

DIRS = ("a", "b")
MAX_FILES = 24
MAX_FILE = 6 << 20          # bytes per file (keeps the device from filling)
MAX_TOTAL = 48 << 20        # bytes over all files
BLK = 4096


def payload(op_id, n):
    return random.Random(op_id * 2654435761 + 97).randbytes(n)


# ---------------------------------------------------------------- run ----

class Runner:
    def __init__(self, root, journal, seed, max_ops):
        self.root = root
        self.rng = random.Random(seed)
        self.max_ops = max_ops
        self.jfd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.ns = {d: {} for d in DIRS}      # dir -> name -> ino
        self.size = {}                        # ino -> size
        self.fd = {}                          # ino -> fd
        self.nid = 0
        self.serial = 0

    def j(self, line):
        os.write(self.jfd, (line + "\n").encode())

    def path(self, d, n=None):
        return os.path.join(self.root, d) if n is None else os.path.join(self.root, d, n)

    def names_of(self, ino):
        return [(d, n) for d in DIRS for n, i in self.ns[d].items() if i == ino]

    def setup(self):
        # DIR must already exist (made by the caller while the file system
        # was mounted): if the daemon dies first and the mount is detached,
        # DIR is missing and the run stops instead of carrying on in the
        # directory under the mount point.
        if not os.path.isdir(self.root):
            raise OSError(errno.ENOENT, f"{self.root} does not exist")
        self.dev = os.stat(self.root).st_dev
        for d in DIRS:
            os.mkdir(self.path(d))
            fd = os.open(self.path(d), os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)
        for p in (self.root, os.path.dirname(self.root)):
            fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)
        self.j("READY")

    def pick_file(self):
        inos = sorted(self.fd)
        return self.rng.choice(inos) if inos else None

    def pick_name(self):
        all_names = [(d, n) for d in DIRS for n in sorted(self.ns[d])]
        return self.rng.choice(all_names) if all_names else None

    def new_name(self):
        self.serial += 1
        return f"f{self.serial}"

    def drop_if_unlinked(self, ino):
        if ino is not None and not self.names_of(ino) and ino in self.fd:
            os.close(self.fd.pop(ino))
            self.size.pop(ino, None)

    def one(self):
        r = self.rng
        total = sum(self.size.values())
        kinds = ["write"] * 30 + ["append"] * 20 + ["trunc"] * 5 + ["fsync"] * 10 + \
                ["fdatasync"] * 5 + ["dirsync"] * 8 + ["create"] * 8 + ["rename"] * 7 + \
                ["link"] * 3 + ["unlink"] * 6 + ["copy"] * 8
        k = r.choice(kinds)
        if k in ("write", "append", "trunc", "fsync", "fdatasync", "copy") and not self.fd:
            k = "create"
        if k in ("rename", "link", "unlink") and not self.pick_name():
            k = "create"
        if k == "create" and len(self.fd) >= MAX_FILES:
            k = "unlink"
        if k in ("write", "append", "copy") and total > MAX_TOTAL:
            k = "unlink" if r.random() < 0.5 else "trunc"
        self.nid += 1
        i = self.nid
        if k == "create":
            d = r.choice(DIRS)
            n = self.new_name()
            self.j(f"B {i} create {d} {n}")
            fd = os.open(self.path(d, n), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            ino = os.fstat(fd).st_ino
            self.fd[ino] = fd
            self.size[ino] = 0
            self.ns[d][n] = ino
            self.j(f"E {i} ok {ino}")
        elif k in ("write", "append"):
            ino = self.pick_file()
            sz = self.size[ino]
            x = r.random()
            n = r.randint(1, 5000) if x < 0.5 else r.randint(1, 300000) if x < 0.9 \
                else r.randint(1, 2 << 20)
            if k == "append":
                off = sz
            else:
                off = r.randint(0, sz + 65536)
                if r.random() < 0.3:
                    off -= off % BLK
            if off + n > MAX_FILE:
                off = r.randint(0, max(0, MAX_FILE - n))
            self.j(f"B {i} write {ino} {off} {n}")
            data = payload(i, n)
            w = os.pwrite(self.fd[ino], data, off)
            if w != n:
                raise OSError(errno.EIO, f"short write {w} of {n}")
            self.size[ino] = max(sz, off + n)
            self.j(f"E {i} ok")
        elif k == "copy":
            # mostly congruent offsets (zonefuse shares the blocks), often
            # to the source's end; within one file the ranges must not overlap
            src, dst = self.pick_file(), self.pick_file()
            ssz, dsz = self.size[src], self.size[dst]
            soff = r.randint(0, ssz)
            if r.random() < 0.6:
                soff -= soff % BLK
            n = max(1, ssz - soff) if r.random() < 0.4 else r.randint(1, 1 << 20)
            doff = r.randint(0, dsz + 65536)
            if r.random() < 0.8:
                doff = doff - doff % BLK + soff % BLK
            doff = min(doff, max(0, MAX_FILE - n))
            if src == dst and soff < doff + n and doff < soff + n:
                doff = soff + n
            if doff + n > MAX_FILE:
                n = 0
            # never past src's end as it is now: a loop of copies within one
            # file would read what its first steps wrote
            n = max(0, min(n, ssz - soff))
            self.j(f"B {i} copy {src} {soff} {dst} {doff} {n}")
            c = 0
            while c < n:
                got = os.copy_file_range(self.fd[src], self.fd[dst], n - c, soff + c, doff + c)
                if got == 0:
                    break
                c += got
            if c:
                self.size[dst] = max(dsz, doff + c)
            self.j(f"E {i} ok {c}")
        elif k == "trunc":
            ino = self.pick_file()
            sz = self.size[ino]
            x = r.random()
            ns = 0 if x < 0.15 else r.randint(0, sz) if x < 0.8 else r.randint(sz, sz + 200000)
            ns = min(ns, MAX_FILE)
            self.j(f"B {i} trunc {ino} {ns}")
            os.ftruncate(self.fd[ino], ns)
            self.size[ino] = ns
            self.j(f"E {i} ok")
        elif k in ("fsync", "fdatasync"):
            ino = self.pick_file()
            self.j(f"B {i} {k} {ino}")
            (os.fsync if k == "fsync" else os.fdatasync)(self.fd[ino])
            self.j(f"E {i} ok")
        elif k == "dirsync":
            d = r.choice(DIRS)
            self.j(f"B {i} dirsync {d}")
            fd = os.open(self.path(d), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self.j(f"E {i} ok")
        elif k == "rename":
            sd, sn = self.pick_name()
            dd = r.choice(DIRS)
            if r.random() < 0.5 and self.ns[dd]:
                dn = r.choice(sorted(self.ns[dd]))       # replace an existing name
            else:
                dn = self.new_name()
            self.j(f"B {i} rename {sd} {sn} {dd} {dn}")
            os.rename(self.path(sd, sn), self.path(dd, dn))
            src = self.ns[sd][sn]
            old = self.ns[dd].get(dn)
            if old != src:
                del self.ns[sd][sn]
                self.ns[dd][dn] = src
                self.drop_if_unlinked(old)
            self.j(f"E {i} ok")
        elif k == "link":
            sd, sn = self.pick_name()
            dd = r.choice(DIRS)
            dn = self.new_name()
            self.j(f"B {i} link {sd} {sn} {dd} {dn}")
            os.link(self.path(sd, sn), self.path(dd, dn))
            self.ns[dd][dn] = self.ns[sd][sn]
            self.j(f"E {i} ok")
        elif k == "unlink":
            sd, sn = self.pick_name()
            self.j(f"B {i} unlink {sd} {sn}")
            os.unlink(self.path(sd, sn))
            ino = self.ns[sd].pop(sn)
            self.drop_if_unlinked(ino)
            self.j(f"E {i} ok")

    def run(self):
        try:
            self.setup()
        except OSError as e:
            print(f"crashcheck run: setup stopped: {e}")
            return 0
        ops = 0
        while self.max_ops == 0 or ops < self.max_ops:
            try:
                if ops % 64 == 0 and os.stat(self.root).st_dev != self.dev:
                    raise OSError(errno.ENOTCONN, "the file system went away")
                self.one()
            except OSError as e:
                self.j(f"E {self.nid} err {e.errno}")
                print(f"crashcheck run: stopped after {ops} ops by {e.strerror} "
                      f"(errno {e.errno})")
                return 0
            ops += 1
        print(f"crashcheck run: finished {ops} ops")
        self.j("DONE")
        return 0


# ------------------------------------------------------------- verify ----

class Hist:
    """Content history of one inode since its last acknowledged fsync."""

    def __init__(self):
        self.base = b""          # content at the last acknowledged fsync
        self.cur = bytearray()   # content now (model)
        self.ops = []            # writes since base: (off, data)
        self.sizes = [0]         # sizes since base (every state)

    def ack(self):
        self.base = bytes(self.cur)
        self.ops = []
        self.sizes = [len(self.cur)]

    def write(self, off, data, applied=True):
        self.ops.append((off, data))
        if applied:
            end = off + len(data)
            if end > len(self.cur):
                self.cur.extend(bytes(end - len(self.cur)))
            self.cur[off:end] = data
            self.sizes.append(len(self.cur))
        else:  # in flight: any part may have landed
            self.sizes.append(max(len(self.cur), off + len(data)))

    def trunc(self, size, applied=True):
        if applied:
            if size < len(self.cur):
                del self.cur[size:]
            else:
                self.cur.extend(bytes(size - len(self.cur)))
        self.sizes.append(size)

    def check(self, got):
        """Returns None or a description of the first bad byte."""
        lo, hi = min(self.sizes), max(self.sizes)
        if not lo <= len(got) <= hi:
            return f"size {len(got)}, allowed {lo}..{hi} (sizes since the last fsync)"
        n = len(got)
        base = self.base
        # bytes no write touched and where the file was never shorter: exact
        touched = []
        for off, data in self.ops:
            touched.append((off, off + len(data)))
        touched.append((lo, max(hi, n)))
        touched.sort()
        merged = []
        for a, b in touched:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        pos = 0
        for a, b in merged + [[n, n]]:
            a = min(a, n)
            if pos < a:
                want = base[pos:a]
                if got[pos:a] != want:
                    k = next(j for j in range(pos, a) if got[j] != base[j])
                    return (f"byte {k}: 0x{got[k]:02x}, the fsync'ed value is 0x{base[k]:02x} "
                            f"and nothing wrote there since")
            pos = max(pos, min(b, n))
        # touched ranges: block fast path, then byte by byte
        cur = bytes(self.cur)
        for a, b in merged:
            a, b = min(a, n), min(b, n)
            for s in range(a - a % BLK, b, BLK):
                e = min(s + BLK, n)
                s = max(s, a)
                if s >= e:
                    continue
                g = got[s:e]
                if g == cur[s:e] or g == base[s:e]:
                    continue
                bad = self.slow(got, s, e, lo)
                if bad is not None:
                    return bad
        return None

    def slow(self, got, s, e, lo):
        ops = [(o, d) for o, d in self.ops if o < e and o + len(d) > s]
        for p in range(s, e):
            v = got[p]
            if p < len(self.base) and self.base[p] == v:
                continue
            if v == 0 and (p >= lo or p >= len(self.base)):
                continue
            if any(o <= p < o + len(d) and d[p - o] == v for o, d in ops):
                continue
            return (f"byte {p}: 0x{v:02x} was never written there since the last fsync "
                    f"(fsync'ed value {'0x%02x' % self.base[p] if p < len(self.base) else 'none'}, "
                    f"{sum(1 for o, d in ops if o <= p < o + len(d))} later write(s) covered it)")
        return None


def parse_journal(path):
    ops, ends, ready = [], {}, False
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "READY":
                ready = True
            elif w[0] == "B":
                ops.append((int(w[1]), w[2], w[3:]))
            elif w[0] == "E":
                ends[int(w[1])] = w[2:]
    return ready, ops, ends


def verify(root, journal):
    ready, ops, ends = parse_journal(journal)
    if not ready:
        print("crashcheck verify: the crash came before the checker's setup finished; "
              "nothing was acknowledged")
        return 0
    ns = {d: {} for d in DIRS}
    hist = {}
    states = [frozenset()]     # namespace after each op: {(dir, name, ino)}
    dir_ack = {d: 0 for d in DIRS}  # index into states
    any_ack = 0
    inflight = None
    for idx, (i, kind, a) in enumerate(ops):
        end = ends.get(i)
        ok = end is not None and end[0] == "ok"
        if end is not None and not ok:
            inflight = (i, kind, a)   # failed at the crash: may have happened
        elif end is None:
            inflight = (i, kind, a)
        if not ok:
            if idx != len(ops) - 1:
                print(f"crashcheck verify: journal: op {i} did not complete but is not the last")
                return 2
            break
        if kind == "create":
            d, n = a
            ino = int(end[1])
            ns[d][n] = ino
            hist[ino] = Hist()
        elif kind == "write":
            ino, off, n = int(a[0]), int(a[1]), int(a[2])
            hist[ino].write(off, payload(i, n))
        elif kind == "trunc":
            hist[int(a[0])].trunc(int(a[1]))
        elif kind == "copy":
            src, soff, dst, doff = int(a[0]), int(a[1]), int(a[2]), int(a[3])
            c = int(end[1])
            if c:
                hist[dst].write(doff, bytes(hist[src].cur[soff:soff + c]))
        elif kind in ("fsync", "fdatasync"):
            hist[int(a[0])].ack()
            any_ack = len(states) - 1
        elif kind == "dirsync":
            dir_ack[a[0]] = len(states) - 1
            any_ack = len(states) - 1
        elif kind == "rename":
            sd, sn, dd, dn = a
            src = ns[sd][sn]
            if ns[dd].get(dn) != src:
                del ns[sd][sn]
                ns[dd][dn] = src
        elif kind == "link":
            sd, sn, dd, dn = a
            ns[dd][dn] = ns[sd][sn]
        elif kind == "unlink":
            del ns[a[0]][a[1]]
        if kind in ("create", "rename", "link", "unlink"):
            states.append(frozenset((d, n, ino) for d in DIRS for n, ino in ns[d].items()))
    # the operation in flight may have happened
    if inflight:
        i, kind, a = inflight
        if kind == "create":
            nsx = {d: dict(ns[d]) for d in DIRS}
            nsx[a[0]][a[1]] = None
            states.append(frozenset((d, n, ino) for d in DIRS for n, ino in nsx[d].items()))
        elif kind in ("rename", "link", "unlink"):
            nsx = {d: dict(ns[d]) for d in DIRS}
            if kind == "rename":
                src = nsx[a[0]][a[1]]
                if nsx[a[2]].get(a[3]) != src:
                    del nsx[a[0]][a[1]]
                    nsx[a[2]][a[3]] = src
            elif kind == "link":
                nsx[a[2]][a[3]] = nsx[a[0]][a[1]]
            else:
                del nsx[a[0]][a[1]]
            states.append(frozenset((d, n, ino) for d in DIRS for n, ino in nsx[d].items()))
        elif kind == "write":
            hist[int(a[0])].write(int(a[1]), payload(i, int(a[2])), applied=False)
        elif kind == "trunc":
            hist[int(a[0])].trunc(int(a[1]), applied=False)
        elif kind == "copy":
            src, soff, dst, doff, n = (int(x) for x in a)
            data = bytes(hist[src].cur[soff:soff + n])
            if data:
                hist[dst].write(doff, data, applied=False)

    # what is there
    seen = set()
    for d in DIRS:
        p = os.path.join(root, d)
        try:
            names = os.listdir(p)
        except OSError as e:
            print(f"VIOLATION: directory {d} (fsync'ed before the run) is unreadable: {e}")
            return 1
        for n in names:
            st = os.lstat(os.path.join(p, n))
            if not stat.S_ISREG(st.st_mode):
                print(f"VIOLATION: {d}/{n} is not a regular file (mode {st.st_mode:o})")
                return 1
            seen.add((d, n, st.st_ino))
    known = {ino for s in states for (_, _, ino) in s}

    def matches(state, dirs):
        want = {(d, n, ino) for (d, n, ino) in state if d in dirs}
        got = {(d, n, ino) for (d, n, ino) in seen if d in dirs}
        if len(want) != len(got):
            return False
        wn = {(d, n): ino for (d, n, ino) in want}
        for d, n, ino in got:
            if (d, n) not in wn:
                return False
            w = wn[(d, n)]
            if w is None:
                if ino in known:
                    return False
            elif w != ino:
                return False
        return True

    fail = 0
    for d in DIRS:
        if not any(matches(states[k], (d,)) for k in range(dir_ack[d], len(states))):
            fail = 1
            want = sorted((n, ino) for (dd, n, ino) in states[-1] if dd == d)
            got = sorted((n, ino) for (dd, n, ino) in seen if dd == d)
            print(f"VIOLATION (names): directory {d} matches no state since its last "
                  f"fsync (state {dir_ack[d]} of {len(states) - 1}); found {got}, "
                  f"latest model {want}")
    if not fail and not any(matches(states[k], DIRS) for k in range(any_ack, len(states))):
        fail = 1
        print(f"VIOLATION (prefix): no single moment since the last acknowledged fsync "
              f"(state {any_ack} of {len(states) - 1}) explains both directories: "
              f"found {sorted(seen)}")
    checked = 0
    for d, n, ino in sorted(seen):
        h = hist.get(ino)
        if h is None:
            h = Hist()        # the in-flight create: empty
        with open(os.path.join(root, d, n), "rb") as f:
            got = f.read()
        bad = h.check(got)
        checked += len(got)
        if bad:
            fail = 1
            print(f"VIOLATION (data): {d}/{n} (inode {ino}): {bad}")
    nops = len(ops)
    print(f"crashcheck verify: {nops} ops in the journal, {len(states) - 1} namespace "
          f"changes, last fsync(dir) at {dir_ack}, {len(seen)} names and "
          f"{checked} bytes checked{', in flight: ' + inflight[1] if inflight else ''}: "
          f"{'VIOLATIONS' if fail else 'ok'}")
    return fail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=("run", "verify"))
    ap.add_argument("dir")
    ap.add_argument("journal")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-ops", type=int, default=200000)
    o = ap.parse_args()
    if o.cmd == "run":
        return Runner(o.dir, o.journal, o.seed, o.max_ops).run()
    return verify(o.dir, o.journal)


if __name__ == "__main__":
    sys.exit(main())
