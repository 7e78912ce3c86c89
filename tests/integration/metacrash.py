#!/usr/bin/env python3
"""Metadata crash checker for meta_crash.sh: namespace and xattr churn.

  metacrash.py run    DIR JOURNAL --seed S --crash-marker FILE [--max-ops N]
                      [--max-entries E]
  metacrash.py verify DIR JOURNAL

`run` does random metadata operations in DIR/{d0,d1,d2,d3} until it is
stopped: create (O_EXCL, a small file written once), unlink, rename (to a
new name, or over an existing file or symlink, within or across the
directories), setxattr / removexattr (user.*, values up to 1.5 KiB),
symlink (targets up to 900 bytes), mkdir / rmdir of empty directories,
fsync of a file, fsync of a directory fd.  Before each operation it
appends "B <id> <op...>" to JOURNAL (outside the file system under test),
after it "E <id> ok".  The first error stops it: if FILE (--crash-marker)
exists, the test had started the crash and the error is the crash (exit 0);
otherwise it is a real failure (ENOSPC, EIO...; printed, exit 1).

`verify` (after the crash and the remount) replays the journal into a model
and compares what DIR holds -- names, kinds, symlink targets, user.* xattrs,
file contents -- with it:

  promise  every entry the last acknowledged fsync (of a file or of a
           directory: zonefuse commits its whole log on every fsync) made
           durable and that no later operation touched is there as it was
           (name, kind, symlink target, xattrs); a name absent then and not
           touched since is absent;
  prefix   one moment at or after the last acknowledged fsync explains the
           whole of DIR at once (the operation in flight at the crash may or
           may not have happened);
  data     an fsync'ed file holds exactly its bytes; any other file its bytes,
           or a prefix of them, or zeros (never bytes of another file).
Exit codes: 0 ok, 1 violation (printed), 2 usage/journal error.
"""
import argparse
import errno
import os
import random
import sys

DIRS = ("d0", "d1", "d2", "d3")


def content(fid, n):
    base = f"<metacrash file {fid}>".encode()
    return (base * (n // len(base) + 1))[:n]


def xval(op_id, n):
    return random.Random(op_id * 7919 + 13).randbytes(n)


def target(op_id, n):
    r = random.Random(op_id * 104729 + 7)
    s = f"tgt{op_id}/" + "".join(r.choice("abcdefghijklmnopqrstuvwxyz/._-") for _ in range(n))
    return s[:max(n, 8)]


# ---------------------------------------------------------------- model ----
# state: path ("d1/f12" or "d1/s3/..." never: subdirectories stay empty)
#        -> ("f", fid, size, xattrs-tuple) | ("l", target) | ("d",)
# A file's xattrs live with the file; hard links are not made, so a path
# names one file.

def apply(state, op, fsynced):
    """Applies one journal operation (list of words) to state."""
    k = op[0]
    if k == "create":
        state[op[1]] = ("f", int(op[2]), int(op[3]), ())
    elif k == "symlink":
        state[op[1]] = ("l", target(int(op[2]), int(op[3])))
    elif k == "mkdir":
        state[op[1]] = ("d",)
    elif k in ("unlink", "rmdir"):
        state.pop(op[1], None)
    elif k == "rename":
        src, dst = op[1], op[2]
        if src in state:
            state[dst] = state.pop(src)
    elif k in ("setxattr", "removexattr"):
        p = op[1]
        e = state.get(p)
        if e and e[0] == "f":
            xs = dict(e[3])
            if k == "setxattr":
                xs[op[2]] = (int(op[3]), int(op[4]))     # (op id, length)
            else:
                xs.pop(op[2], None)
            state[p] = ("f", e[1], e[2], tuple(sorted(xs.items())))
    elif k == "fsync":
        e = state.get(op[1])
        if e and e[0] == "f":
            fsynced.add(e[1])
    # "dirsync": no change of state


def touched(op):
    """Paths an operation changes."""
    k = op[0]
    if k == "rename":
        return [op[1], op[2]]
    if k in ("create", "symlink", "mkdir", "unlink", "rmdir", "setxattr", "removexattr"):
        return [op[1]]
    return []


# ---------------------------------------------------------------- run ----

class Runner:
    def __init__(self, a):
        self.root = a.dir
        self.rng = random.Random(a.seed)
        self.marker = a.crash_marker
        self.max_ops = a.max_ops
        self.max_entries = a.max_entries
        self.jfd = os.open(a.journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.state = {}
        self.fsynced = set()
        self.nid = 0
        self.serial = 0
        self.last = "setup"

    def j(self, line):
        if line.startswith("B "):
            self.last = line.split(" ", 2)[2]
        os.write(self.jfd, (line + "\n").encode())

    def p(self, rel):
        return os.path.join(self.root, rel)

    def new_name(self, kind):
        self.serial += 1
        return f"{self.rng.choice(DIRS)}/{kind}{self.serial}"

    def pick(self, kinds):
        c = sorted(p for p, e in self.state.items() if e[0] in kinds)
        return self.rng.choice(c) if c else None

    def dirsync(self, rel):
        fd = os.open(self.p(rel), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def setup(self):
        if not os.path.isdir(self.root):
            raise OSError(errno.ENOENT, f"{self.root} does not exist")
        self.dev = os.stat(self.root).st_dev
        for d in DIRS:
            os.mkdir(self.p(d))
        for d in DIRS + ("",):
            self.dirsync(d)
        self.dirsync(os.path.dirname(self.root))
        self.j("READY")

    def one(self):
        r = self.rng
        kinds = ["create"] * 22 + ["unlink"] * 10 + ["rename"] * 14 + ["setxattr"] * 16 + \
            ["removexattr"] * 3 + ["symlink"] * 10 + ["mkdir"] * 3 + ["rmdir"] * 2 + \
            ["fsync"] * 8 + ["dirsync"] * 8
        k = r.choice(kinds)
        if k in ("create", "symlink", "mkdir") and len(self.state) >= self.max_entries:
            k = "unlink"
        self.nid += 1
        i = self.nid
        op = None
        if k == "create":
            n = self.new_name("f")
            size = r.choice((0, r.randint(1, 200), r.randint(1, 3000), r.randint(3000, 9000)))
            op = ["create", n, str(i), str(size)]
            self.j(f"B {i} {' '.join(op)}")
            fd = os.open(self.p(n), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                if size and os.write(fd, content(i, size)) != size:
                    raise OSError(errno.EIO, "short write")
            finally:
                os.close(fd)
        elif k == "symlink":
            n = self.new_name("l")
            ln = r.choice((r.randint(1, 60), r.randint(60, 900)))
            op = ["symlink", n, str(i), str(ln)]
            self.j(f"B {i} {' '.join(op)}")
            os.symlink(target(i, ln), self.p(n))
        elif k == "mkdir":
            n = self.new_name("s")
            op = ["mkdir", n]
            self.j(f"B {i} {' '.join(op)}")
            os.mkdir(self.p(n))
        elif k == "unlink":
            n = self.pick("fl")
            if n is None:
                return self.skip()
            op = ["unlink", n]
            self.j(f"B {i} {' '.join(op)}")
            os.unlink(self.p(n))
        elif k == "rmdir":
            n = self.pick("d")
            if n is None:
                return self.skip()
            op = ["rmdir", n]
            self.j(f"B {i} {' '.join(op)}")
            os.rmdir(self.p(n))
        elif k == "rename":
            src = self.pick("fld")
            if src is None:
                return self.skip()
            dst = None
            if self.state[src][0] != "d" and r.random() < 0.4:
                dst = self.pick("fl")          # replace an existing file/symlink
            if dst is None or dst == src:
                dst = self.new_name(self.state[src][0] if self.state[src][0] != "d" else "s")
            op = ["rename", src, dst]
            self.j(f"B {i} {' '.join(op)}")
            os.rename(self.p(src), self.p(dst))
        elif k in ("setxattr", "removexattr"):
            n = self.pick("f")
            if n is None:
                return self.skip()
            name = f"user.a{r.randint(0, 5)}"
            if k == "setxattr":
                ln = r.choice((r.randint(0, 40), r.randint(40, 300), r.randint(300, 1500)))
                op = ["setxattr", n, name, str(i), str(ln)]
                self.j(f"B {i} {' '.join(op)}")
                os.setxattr(self.p(n), name, xval(i, ln))
            else:
                if name not in dict(self.state[n][3]):
                    return self.skip()
                op = ["removexattr", n, name]
                self.j(f"B {i} {' '.join(op)}")
                os.removexattr(self.p(n), name)
        elif k == "fsync":
            n = self.pick("f")
            if n is None:
                return self.skip()
            op = ["fsync", n]
            self.j(f"B {i} {' '.join(op)}")
            fd = os.open(self.p(n), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        elif k == "dirsync":
            d = r.choice(DIRS)
            op = ["dirsync", d]
            self.j(f"B {i} {' '.join(op)}")
            self.dirsync(d)
        apply(self.state, op, self.fsynced)
        self.j(f"E {i} ok")

    def skip(self):
        self.nid -= 1

    def run(self):
        try:
            self.setup()
        except OSError as e:
            return self.stopped(e, 0, "setup")
        ops = 0
        while self.max_ops == 0 or ops < self.max_ops:
            try:
                if ops % 64 == 0 and os.stat(self.root).st_dev != self.dev:
                    raise OSError(errno.ENOTCONN, "the file system went away")
                self.one()
            except OSError as e:
                return self.stopped(e, ops, f"operation {self.nid} ({self.last})")
            ops += 1
        print(f"metacrash run: finished {ops} ops, {len(self.state)} entries")
        self.j("DONE")
        return 0

    def stopped(self, e, ops, where):
        name = errno.errorcode.get(e.errno, "?")
        crashed = os.path.exists(self.marker)
        self.j(f"X {self.nid} {e.errno}")
        if not crashed:
            print(f"metacrash run: FAILED: {where} failed with {name} ({e.strerror}) "
                  f"before the crash, after {ops} ops, {len(self.state)} entries")
            return 1
        print(f"metacrash run: stopped by the crash after {ops} ops ({name}), "
              f"{len(self.state)} entries")
        return 0


# ------------------------------------------------------------- verify ----

def read_disk(root):
    """path -> entry as on disk; files as ("f", bytes, xattrs-dict)."""
    out = {}
    for d in DIRS:
        dp = os.path.join(root, d)
        if not os.path.isdir(dp):
            continue
        for n in os.listdir(dp):
            rel = f"{d}/{n}"
            p = os.path.join(dp, n)
            if os.path.islink(p):
                out[rel] = ("l", os.readlink(p))
            elif os.path.isdir(p):
                sub = os.listdir(p)
                out[rel] = ("d",) if not sub else ("d!", tuple(sub))
            else:
                with open(p, "rb") as f:
                    data = f.read()
                xs = {x: os.getxattr(p, x) for x in os.listxattr(p) 
                      if x.startswith("user.") and not x.startswith("user.zonefuse.")}
                out[rel] = ("f", data, xs)
    return out


def matches(model, disk, fsynced):
    """None if the disk entry is explained by the model entry, else why not."""
    if model is None and disk is None:
        return None
    if model is None:
        return f"is there ({disk[0]}) but should not be"
    if disk is None:
        return f"is missing (should be {model[0]})"
    if model[0] != disk[0]:
        return f"is a {disk[0]}, should be a {model[0]}"
    if model[0] == "l":
        return None if model[1] == disk[1] else f"symlink target {disk[1][:40]!r}..., " \
            f"should be {model[1][:40]!r}..."
    if model[0] == "d":
        return None
    _, fid, size, xattrs = model
    data, xs = disk[1], disk[2]
    exp = content(fid, size)
    if fid in fsynced:
        if data != exp:
            return f"fsync'ed file holds {len(data)} bytes {data[:30]!r}, not its {size} bytes"
    elif len(data) > size or any(g != e and g != 0 for g, e in zip(data, exp)):
        return f"holds bytes never written to it: {data[:30]!r}"
    want = {n: xval(oid, ln) for n, (oid, ln) in xattrs}
    if xs != want:
        got = {n: len(v) for n, v in xs.items()}
        w = {n: len(v) for n, v in want.items()}
        return f"xattrs {got} (name: length), should be {w}"
    return None


def cmd_verify(a):
    ops = []          # (id, words, acknowledged)
    begun = {}
    for line in open(a.journal):
        w = line.split()
        if not w:
            continue
        if w[0] == "B":
            begun[int(w[1])] = len(ops)
            ops.append([int(w[1]), w[2:], False])
        elif w[0] == "E" and w[2] == "ok":
            ops[begun[int(w[1])]][2] = True
    # an unacknowledged operation can only be the last one
    for idx, (i, w, ack) in enumerate(ops[:-1]):
        if not ack:
            print(f"metacrash verify: journal: operation {i} not acknowledged but not last")
            return 2
    last_sync = -1
    for idx, (i, w, ack) in enumerate(ops):
        if ack and w[0] in ("fsync", "dirsync"):
            last_sync = idx
    disk = read_disk(a.dir)
    state, fsynced = {}, set()
    for idx in range(last_sync + 1):
        apply(state, ops[idx][1], fsynced)
    bad = []
    # promise: entries (and absences) at the last sync untouched since
    later = set()
    for idx in range(last_sync + 1, len(ops)):
        later.update(touched(ops[idx][1]))
    for p in sorted(set(state) | set(disk)):
        if p in later:
            continue
        why = matches(state.get(p), disk.get(p), fsynced)
        if why:
            bad.append(f"promise: {p} {why}")
    # prefix: one moment from last_sync on explains everything
    mism = {p for p in set(state) | set(disk) if matches(state.get(p), disk.get(p), fsynced)}
    best = (len(mism), last_sync, sorted(mism))
    ok_at = last_sync if not mism else None
    for idx in range(last_sync + 1, len(ops)):
        if ok_at is not None:
            break
        apply(state, ops[idx][1], fsynced)
        for p in touched(ops[idx][1]):
            if matches(state.get(p), disk.get(p), fsynced):
                mism.add(p)
            else:
                mism.discard(p)
        if not mism:
            ok_at = idx
        elif len(mism) < best[0]:
            best = (len(mism), idx, sorted(mism))
    if ok_at is None:
        # describe the closest moment
        st2, fs2 = {}, set()
        for idx in range(best[1] + 1):
            apply(st2, ops[idx][1], fs2)
        for p in best[2][:20]:
            bad.append(f"prefix (closest moment: after op {ops[best[1]][0] if best[1] >= 0 else 0}): "
                       f"{p} {matches(st2.get(p), disk.get(p), fsynced)}")
    nsync = sum(1 for i, w, ack in ops if ack and w[0] in ("fsync", "dirsync"))
    if bad:
        print(f"metacrash verify: {len(bad)} violations ({len(ops)} ops, last acknowledged "
              f"fsync at op {ops[last_sync][0] if last_sync >= 0 else '-'}):")
        for b in bad[:40]:
            print("  " + b)
        return 1
    ents = sum(1 for e in disk.values())
    nx = sum(len(e[2]) for e in disk.values() if e[0] == "f")
    print(f"metacrash verify: ok: {ents} entries ({nx} xattrs, "
          f"{sum(1 for e in disk.values() if e[0] == 'l')} symlinks) as of a moment "
          f"{ok_at - last_sync} ops after the last of {nsync} acknowledged fsyncs "
          f"({len(ops)} ops)")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("journal")
    r.add_argument("--seed", type=int, required=True)
    r.add_argument("--crash-marker", required=True)
    r.add_argument("--max-ops", type=int, default=0)
    r.add_argument("--max-entries", type=int, default=400)
    v = sub.add_parser("verify")
    v.add_argument("dir")
    v.add_argument("journal")
    a = p.parse_args()
    if a.cmd == "run":
        return Runner(a).run()
    return cmd_verify(a)


if __name__ == "__main__":
    sys.exit(main())
