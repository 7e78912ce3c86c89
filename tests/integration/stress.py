#!/usr/bin/env python3
"""Adversarial model-checked stress of a mounted zonefuse (driven by
stress.sh, which mounts, unmounts, crashes and runs fsck between phases).

  stress.py init  STATE MNT --seed S            # empty model, s/ owned by nobody
  stress.py run   STATE MNT PHASE --ops N --journal J [--depth D] [--tail K]
  stress.py check STATE MNT [--crashed]         # the tree must equal the model
  stress.py space STATE MNT                     # no space leaked (stats xattr)
  stress.py report STATE

The model (pickled in STATE, outside the file system) is the tree under
MNT/s: directories, regular files (content as a map of 4 KiB pages, size),
symbolic links, hard links, user.* xattrs, modes.  `run` does PHASE's
operations as the unprivileged user nobody (effective uid and gid 65534, no
supplementary groups, no capabilities; the saved uid stays 0 so that the
set-id phase can fork a second user) and checks every result (success or
errno) against the model's prediction; a space-consuming operation may get
ENOSPC only when the device is nearly full (free space below the op's size
plus ZF_STRESS_ENOSPC_MARGIN zones, or log_state_full=1), and then must
change nothing the model cannot account for: after a refused data op every
page of the file is as at its last fsync, as before the op, as after it, or
zero (a sequential writer's file: a prefix of what it wrote), until the next
remount shows what is stored and the model adopts it.  Unlinks, rmdirs and
xattr removals never get ENOSPC; renames, creates, writes and cuts that drop
no extent may, once log_state_full=1 (docs/guarantees.md, 2a).  What
write() and close() acknowledged without an error must be stored.

Phases: random (weighted mix of everything), deep (mkdir+openat chain of
--depth levels), wide (thousands of names in one directory), rename, link,
xattr (storms), longnames (255-byte names, 256 refused), sparse (offsets up
to 2^40+, EFBIG past 2^50), copy (copy_file_range, also extending past a
truncated end, and, in the next copy phase, files cut into a block whose cut
only another file's fsync committed before the crash), falloc
(posix_fallocate, KEEP_SIZE, PUNCH_HOLE), setid (another user, uid 4343,
writes, copies into, truncates and fallocates set-id files: the bits must
go), fill (data until ENOSPC; on the full device 'echo hi > f' whose close()
succeeds must be stored, and a rename storm; then delete everything:
statvfs free space must come back within one zone without a remount, no
data zone may stay unreset, and a create must work), meta (the same with
names + xattrs until log_state_full=1), fulldata / fullmeta (the fill
without the delete: the device stays full across the unmount or crash) and
drain (the delete of the last fulldata / fullmeta, after it).
With --tail K the phase ends with a sync point (sync(), fsync of every file
written since the last one, fsync of s/) and K namespace operations in
s/tail: after a kill -9 or power loss the tree must equal the model at the
sync point, s/tail any of the K+1 states after it (zonefuse commits a prefix
of its log), and the next run replays the tail operations the crash lost, so
the run stays deterministic for a seed.

`check` walks the tree as root (openat, so a 10,000-level chain needs no
long path): names, types, modes, owners, sizes, contents (pages compared,
huge sparse files probed), link counts and inode identity, symlink targets,
xattrs.  Every violation is printed with the phase, the seed and the last
operations (the journal J has all of them); exit 1.

Exit codes: 0 ok, 1 violation, 2 usage or harness error.
"""
import argparse
import collections
import ctypes
import errno
import os
import pickle
import random
import stat
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from asuser import as_user                                   # noqa: E402
from crashcheck import payload                               # noqa: E402
from fsx import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, copy_range, fallocate  # noqa: E402
from fsops import renameat2, RENAME_NOREPLACE, RENAME_EXCHANGE  # noqa: E402

BLK = 4096
NOBODY = 65534
OTHER = 4343                  # the second user of the set-id phase
MAXFILE = 1 << 50             # zonefuse's largest file size (EFBIG past it)
NAME_MAX = 255
XATTR_MAX = 65536             # largest stored xattr value (XATTR_SIZE_MAX)
XATTR_TOTAL = 256 << 10       # names (with their NUL) and values per inode
XATTR_LIST = 65536            # names (with their NUL) per inode (XATTR_LIST_MAX)
FULL_READ = 64 << 20          # files up to this size are read whole by check
DD_PAGE = (bytes(range(1, 256)) * 17)[:4096]   # ph_dd's page (no zero byte)
MARGIN_ZONES = int(os.environ.get("ZF_STRESS_ENOSPC_MARGIN", "4"))
libc = ctypes.CDLL(None, use_errno=True)


class Violation(Exception):
    pass


def ename(e):
    return "ok" if e == 0 else errno.errorcode.get(e, str(e))


# ------------------------------------------------------------- model ----

class Node:
    """One inode of the model.  kind: 'f' file, 'd' directory, 'l' symlink.
    pages: page index -> bytes (BLK long; pages never written or punched
    whole are holes); links: {(parent id, name)}; a directory has exactly
    one link and entries {name: id}.  uncertain: a data operation failed
    (allowed ENOSPC) since the last fsync: every page may be as of that
    fsync (spages/ssize) or as now."""
    __slots__ = ("kind", "mode", "uid", "pages", "size", "target", "xattrs",
                 "entries", "links", "spages", "ssize", "uncertain", "prefix", "pre", "presize")

    def __init__(self, kind, mode):
        self.kind, self.mode, self.uid = kind, mode, NOBODY
        self.pages, self.size, self.target = {}, 0, None
        self.xattrs, self.entries, self.links = {}, ({} if kind == "d" else None), set()
        self.spages, self.ssize, self.uncertain = {}, 0, False
        self.prefix = False       # uncertain, and stored as a prefix of what was written
        self.pre, self.presize = {}, 0    # pages and size before the refused op

    # file content
    def read(self, off, n):
        n = max(0, min(n, self.size - off))
        out = bytearray(n)
        p = off // BLK
        while p * BLK < off + n:
            pg = self.pages.get(p)
            if pg is not None:
                s, e = max(off, p * BLK), min(off + n, p * BLK + BLK)
                out[s - off:e - off] = pg[s - p * BLK:e - p * BLK]
            p += 1
        return bytes(out)

    def write(self, off, data):
        end = off + len(data)
        p = off // BLK
        while p * BLK < end:
            s, e = max(off, p * BLK), min(end, p * BLK + BLK)
            pg = self.pages.get(p)
            if s == p * BLK and e == s + BLK:
                self.pages[p] = bytes(data[s - off:e - off])
            else:
                b = bytearray(pg if pg is not None else bytes(BLK))
                b[s - p * BLK:e - p * BLK] = data[s - off:e - off]
                self.pages[p] = bytes(b)
            p += 1
        self.size = max(self.size, end)

    def truncate(self, n):
        if n < self.size:
            for p in [p for p in self.pages if p * BLK >= n]:
                del self.pages[p]
            p = n // BLK
            if n % BLK and p in self.pages:
                self.pages[p] = self.pages[p][:n % BLK] + bytes(BLK - n % BLK)
        self.size = n

    def punch(self, off, n):
        end = min(off + n, self.size)
        if off >= end:
            return
        for p in sorted(p for p in self.pages if p * BLK < end and p * BLK + BLK > off):
            s, e = max(off, p * BLK), min(end, p * BLK + BLK)
            if s == p * BLK and e == s + BLK:
                del self.pages[p]
            else:
                b = bytearray(self.pages[p])
                b[s - p * BLK:e - p * BLK] = bytes(e - s)
                self.pages[p] = bytes(b)

    def mark_uncertain(self):
        """A data op is refused (call before applying it): until the next
        remount every page may be as at the last fsync, as before the op,
        as after it, or zero."""
        if not self.uncertain:
            self.pre, self.presize = dict(self.pages), self.size
        self.uncertain = True

    def synced(self):
        self.spages, self.ssize, self.uncertain = dict(self.pages), self.size, False

    def nlink(self, model):
        if self.kind == "d":
            return 2 + sum(1 for c in self.entries.values() if model.nodes[c].kind == "d")
        return len(self.links)


class Model:
    def __init__(self, seed):
        self.seed = seed
        self.nodes = {0: Node("d", 0o755)}    # 0 = s/
        self.nodes[0].links.add((None, "s"))
        self.next_id = 1
        self.serial = 0
        self.phase_no = 0
        self.ops = 0
        self.counts = collections.Counter()   # per op kind
        self.phases = collections.Counter()
        self.states = 0                       # states checked (ops + trees)
        self.trees = 0
        self.violations = 0
        self.dirty = set()                    # files written since the last sync point
        self.tail = None                      # (ops, states) of the last sync point's tail
        self.tail_from = None                 # tail state the crash left (check sets it)
        self.fill_free0 = None                # statvfs free bytes before an undrained fill
        self.fill_stats0 = {}                 # user.zonefuse.stats read with fill_free0
        self.cut_pending = []                 # files cut into a block, committed by another's fsync
        self.notes = []

    def new(self, kind, mode, parent, name):
        i = self.next_id
        self.next_id += 1
        n = Node(kind, mode)
        self.nodes[i] = n
        self.link(i, parent, name)
        return i

    def link(self, i, parent, name):
        self.nodes[parent].entries[name] = i
        self.nodes[i].links.add((parent, name))

    def unlink(self, parent, name):
        i = self.nodes[parent].entries.pop(name)
        n = self.nodes[i]
        n.links.discard((parent, name))
        if not n.links:
            self.drop(i)
        return i

    def drop(self, i):
        n = self.nodes.pop(i)
        self.dirty.discard(i)
        if n.kind == "d":
            for c in list(n.entries.values()):
                cn = self.nodes.get(c)
                if cn:
                    cn.links = {lk for lk in cn.links if lk[0] != i}
                    if not cn.links:
                        self.drop(c)

    def parent_of(self, i):
        return min(self.nodes[i].links)[0]

    def path(self, i):
        """Path relative to s/ (a list of names)."""
        out = []
        while i != 0:
            p, name = min(self.nodes[i].links)
            out.append(name)
            i = p
        out.reverse()
        return out

    def lookup(self, parent, name):
        return self.nodes[parent].entries.get(name)

    def is_ancestor(self, a, b):
        """True if directory a is b or an ancestor of b."""
        while b is not None:
            if a == b:
                return True
            b = None if b == 0 else self.parent_of(b)
        return False

    def subtree(self, i):
        out, todo = [], [i]
        while todo:
            x = todo.pop()
            out.append(x)
            n = self.nodes[x]
            if n.kind == "d":
                todo.extend(n.entries.values())
        return out

    def alloc_bound(self):
        """Bytes of data blocks the files may hold (copies share, so this
        is an upper bound)."""
        return sum(len(n.pages) for n in self.nodes.values() if n.kind == "f") * BLK

    def tail_state(self, d):
        """Names, types, targets and xattrs under directory d (flat)."""
        n = self.nodes.get(d)
        if n is None:
            return None
        return frozenset((name, self.nodes[c].kind, self.nodes[c].target,
                          tuple(sorted(self.nodes[c].xattrs.items())))
                         for name, c in n.entries.items())


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def save(model, path):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(model, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


# --------------------------------------------------------- file system ----

def stats(mnt):
    try:
        v = os.getxattr(mnt, "user.zonefuse.stats").decode()
    except OSError:
        return {}
    out = {}
    for line in v.splitlines():
        k, _, x = line.partition("=")
        out[k] = x
    return out


def stats_diff(a, b):
    """The space and log counters that differ between two stats reads."""
    keys = ("capacity", "used", "free", "valid", "reclaim", "log_", "meta_", "buffer",
            "prealloc", "pending", "zones_")
    return ", ".join(f"{k} {a.get(k)} -> {b.get(k)}" for k in sorted(set(a) | set(b))
                     if k.startswith(keys) and a.get(k) != b.get(k)) or "none"


def open_at(root_fd, comps, flags=os.O_RDONLY, mode=0o644):
    """Open s/<comps...> relative to root_fd, in pieces of at most 3000
    bytes of path (a deep chain is longer than PATH_MAX)."""
    fd, own = root_fd, False
    i = 0
    while True:
        j, n = i, 0
        while j < len(comps) and n + len(comps[j]) + 1 < 3000:
            n += len(comps[j].encode()) + 1
            j += 1
        last = j >= len(comps)
        p = "/".join(comps[i:j]) or "."
        try:
            nfd = os.open(p, flags if last else os.O_RDONLY | os.O_DIRECTORY, mode, dir_fd=fd)
        finally:
            if own:
                os.close(fd)
        if last:
            return nfd
        fd, own, i = nfd, True, j


# ------------------------------------------------------------- runner ----

class Runner:
    def __init__(self, model, mnt, journal, phase, rng):
        self.m = model
        self.mnt = mnt
        self.s = os.path.join(mnt, "s")
        self.phase = phase
        self.r = rng
        self.jf = open(journal, "a")
        self.recent = collections.deque(maxlen=40)
        self.root_fd = None
        st = stats(mnt)
        self.zone = int(st.get("zone_size", 1 << 20))
        self.nops = 0
        self.enospc = 0           # allowed ENOSPC answers in this run

    # ---- bookkeeping
    def log(self, text):
        self.m.ops += 1
        self.nops += 1
        line = f"#{self.m.ops} [{self.phase}] {text}"
        self.recent.append(line)
        self.jf.write(line + "\n")

    def fail(self, msg):
        self.jf.write("VIOLATION: " + msg + "\n")
        self.jf.flush()
        raise Violation(msg)

    def p(self, i, name=None):
        comps = self.m.path(i) + ([name] if name is not None else [])
        return os.path.join(self.s, *comps)

    def rel(self, i, name=None):
        return "/".join(self.m.path(i) + ([name] if name is not None else [])) or "."

    def new_name(self, prefix="n", length=None):
        self.m.serial += 1
        n = f"{prefix}{self.m.serial}"
        if length:
            n = (n + "_" + "x" * length)[:length]
        return n

    def near_full(self, need):
        sv = os.statvfs(self.mnt)
        st = stats(self.mnt)
        if st.get("log_state_full") == "1":
            return True, "log_state_full=1"
        free = sv.f_bavail * sv.f_frsize
        lim = need + MARGIN_ZONES * self.zone
        return free < lim, f"statvfs free {free} (limit {lim}), log_state_full={st.get('log_state_full')}"

    def expect(self, what, got, want, space=0):
        """Compare an errno with the prediction; ENOSPC (and EDQUOT) is
        allowed for a space-consuming op (space > 0 bytes, or -1 for
        metadata growth) on a nearly full device.  Returns True if the op
        took effect as predicted, False if it was refused with ENOSPC."""
        self.m.counts[what.split()[0]] += 1
        self.m.states += 1
        if got == want:
            return True
        if got == errno.ENOSPC and want == 0 and space:
            full, why = self.near_full(max(space, 0))
            if full:
                self.m.counts["enospc"] += 1
                self.enospc += 1
                return False
            self.fail(f"{what}: ENOSPC although the device is not full ({why})")
        self.fail(f"{what}: got {ename(got)}, the model says {ename(want)}")

    def call(self, fn, *a, **kw):
        try:
            return 0, fn(*a, **kw)
        except OSError as e:
            return e.errno, None

    # ---- permission predictions (the caller owns everything)
    def dir_w(self, d):
        return 0 if (self.m.nodes[d].mode & 0o300) == 0o300 else errno.EACCES

    def file_acc(self, i, write):
        return 0 if self.m.nodes[i].mode & (0o200 if write else 0o400) else errno.EACCES

    # ---- picking
    def nodes_under(self, top, kind=None):
        out = [i for i in self.m.subtree(top) if i != top or kind == "d"]
        if kind:
            out = [i for i in out if self.m.nodes[i].kind == kind]
        return sorted(out)

    def files(self, top):
        """Files under top whose content the model knows (a refused write
        leaves a file uncertain until the next remount shows it)."""
        return [f for f in self.nodes_under(top, "f") if not self.m.nodes[f].uncertain]

    def pick(self, top, kind=None):
        c = self.nodes_under(top, kind)
        return self.r.choice(c) if c else None

    def pick_entry(self, top):
        """(parent, name) of a random entry under top."""
        ds = [d for d in self.nodes_under(top, "d") if self.m.nodes[d].entries]
        if not ds:
            return None
        d = self.r.choice(ds)
        return d, self.r.choice(sorted(self.m.nodes[d].entries))

    def phase_dir(self, name, mode=0o755):
        i = self.m.lookup(0, name)
        if i is None:
            err, _ = self.call(os.mkdir, self.p(0, name), mode)
            self.log(f"mkdir {name} -> {ename(err)}")
            if self.expect(f"mkdir {name}", err, 0, space=-1):
                i = self.m.new("d", mode, 0, name)
                os.chmod(self.p(0, name), mode)
            else:
                self.fail(f"cannot make the phase directory {name}: ENOSPC")
        return i

    def delete_tree(self, d, name):
        """Remove d/name and everything below it, deepest first."""
        i = self.m.lookup(d, name)
        if i is None:
            return
        if self.m.nodes[i].kind == "d":
            for sub in sorted(self.m.nodes[i].entries):
                self.delete_tree(i, sub)
            self.op_rmdir(d, name)
        else:
            self.op_unlink(d, name)

    def prune(self, dirname, keep):
        """Delete all but the newest `keep` entries of a phase directory:
        each pass of a long run starts where the device is not full of the
        earlier passes' files."""
        top = self.m.lookup(0, dirname)
        if top is None:
            return
        ents = self.m.nodes[top].entries
        for name in sorted(ents, key=lambda x: ents[x])[:max(0, len(ents) - keep)]:
            self.delete_tree(top, name)

    def fresh_dir(self, name, prefix):
        """A new directory in the phase directory `name` (None: refused)."""
        return self.op_mkdir(self.phase_dir(name), self.new_name(prefix))

    # ---- operations (each: journal, do, predict, compare, apply)
    def op_create(self, d, name, data=b"", mode=0o644, fsync=False):
        want = errno.ENAMETOOLONG if len(name.encode()) > NAME_MAX else \
            errno.EEXIST if self.m.lookup(d, name) is not None else self.dir_w(d)
        path = self.p(d, name)
        err, fd = self.call(os.open, path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        created = err == 0
        werr, wrote = write_close(fd, (lambda fd: os.pwrite(fd, data, 0)) if data else None, fsync)
        short = bool(data) and not werr and wrote is not None and wrote < len(data)
        self.log(f"create {self.rel(d, name)} mode {mode:o} {len(data)} bytes"
                 f"{f' (took {wrote})' if short else ''}"
                 f"{' fsync' if fsync else ''} -> {ename(err)}/{ename(werr)}")
        if short:
            # write() may take less than it was given (the device filled
            # part way, as on ext4): the file holds what it took
            self.expect(f"short write {self.rel(d, name)}", errno.ENOSPC, 0,
                        space=len(data) - wrote)
            data = data[:wrote]
        ok = self.expect(f"create {self.rel(d, name)}", err, want, space=-1)
        if not ok:
            if os.path.lexists(path):
                self.fail(f"create {self.rel(d, name)} failed with ENOSPC but the name exists")
            return None
        if not created:
            return None
        i = self.m.new("f", mode, d, name)
        n = self.m.nodes[i]
        n.synced()
        if data:
            n.write(0, data)
        self.m.dirty.add(i)
        if werr:
            if not self.expect(f"write {self.rel(d, name)}", werr, 0, space=max(1, len(data))):
                n.mark_uncertain()
                n.pre, n.presize = {}, 0      # a new file
                self.settle(i)
        elif fsync:
            n.synced()
        return i

    def op_mkdir(self, d, name, mode=0o755):
        want = errno.ENAMETOOLONG if len(name.encode()) > NAME_MAX else \
            errno.EEXIST if self.m.lookup(d, name) is not None else self.dir_w(d)
        err, _ = self.call(os.mkdir, self.p(d, name), mode)
        self.log(f"mkdir {self.rel(d, name)} {mode:o} -> {ename(err)}")
        if self.expect(f"mkdir {self.rel(d, name)}", err, want, space=-1) and err == 0:
            return self.m.new("d", mode, d, name)
        if err == errno.ENOSPC and os.path.lexists(self.p(d, name)):
            self.fail(f"mkdir {self.rel(d, name)} failed with ENOSPC but the name exists")
        return None

    def op_symlink(self, d, name, target):
        want = errno.ENAMETOOLONG if len(name.encode()) > NAME_MAX or len(target.encode()) >= 4096 else \
            errno.EEXIST if self.m.lookup(d, name) is not None else self.dir_w(d)
        err, _ = self.call(os.symlink, target, self.p(d, name))
        self.log(f"symlink {self.rel(d, name)} -> {target[:40]}({len(target)}) -> {ename(err)}")
        if self.expect(f"symlink {self.rel(d, name)}", err, want, space=-1) and err == 0:
            i = self.m.new("l", 0o777, d, name)
            self.m.nodes[i].target = target
            self.m.nodes[i].size = len(target.encode())

    def op_unlink(self, d, name):
        i = self.m.lookup(d, name)
        want = errno.ENOENT if i is None else self.dir_w(d) or \
            (errno.EISDIR if self.m.nodes[i].kind == "d" else 0)
        err, _ = self.call(os.unlink, self.p(d, name))
        self.log(f"unlink {self.rel(d, name)} -> {ename(err)}")
        self.expect(f"unlink {self.rel(d, name)}", err, want)
        if err == 0:
            self.m.unlink(d, name)

    def op_rmdir(self, d, name):
        i = self.m.lookup(d, name)
        want = errno.ENOENT if i is None else self.dir_w(d) or \
            (errno.ENOTDIR if self.m.nodes[i].kind != "d" else
             errno.ENOTEMPTY if self.m.nodes[i].entries else 0)
        err, _ = self.call(os.rmdir, self.p(d, name))
        self.log(f"rmdir {self.rel(d, name)} -> {ename(err)}")
        self.expect(f"rmdir {self.rel(d, name)}", err, want)
        if err == 0:
            self.m.unlink(d, name)

    def op_link(self, sd, sn, dd, dn):
        i = self.m.lookup(sd, sn)
        tgt = self.m.lookup(dd, dn)
        want = errno.ENOENT if i is None else \
            errno.ENAMETOOLONG if len(dn.encode()) > NAME_MAX else \
            errno.EEXIST if tgt is not None else self.dir_w(dd) or \
            (errno.EPERM if self.m.nodes[i].kind == "d" else
             errno.EMLINK if len(self.m.nodes[i].links) >= 65000 else 0)
        err, _ = self.call(os.link, self.p(sd, sn), self.p(dd, dn), follow_symlinks=False)
        self.log(f"link {self.rel(sd, sn)} {self.rel(dd, dn)} -> {ename(err)}")
        if self.expect(f"link {self.rel(sd, sn)} {self.rel(dd, dn)}", err, want, space=-1) and err == 0:
            self.m.link(i, dd, dn)
        elif err == errno.ENOSPC and os.path.lexists(self.p(dd, dn)):
            self.fail(f"link {self.rel(dd, dn)} failed with ENOSPC but the name exists")

    def rename_want(self, sd, sn, dd, dn, flags):
        m = self.m
        s = m.lookup(sd, sn)
        t = m.lookup(dd, dn)
        if s is None:
            return errno.ENOENT
        if len(dn.encode()) > NAME_MAX:
            return errno.ENAMETOOLONG
        if flags & RENAME_NOREPLACE and t is not None:
            return errno.EEXIST
        if flags & RENAME_EXCHANGE and t is None:
            return errno.ENOENT
        sdir = m.nodes[s].kind == "d"
        if sdir and m.is_ancestor(s, dd):
            return errno.EINVAL
        if t is not None and m.nodes[t].kind == "d" and m.is_ancestor(t, sd):
            return errno.EINVAL if flags & RENAME_EXCHANGE else errno.ENOTEMPTY
        if s == t:
            return 0
        e = self.dir_w(sd) or self.dir_w(dd)
        if e:
            return e
        if t is not None and not flags & RENAME_EXCHANGE:
            tdir = m.nodes[t].kind == "d"
            if sdir and not tdir:
                return errno.ENOTDIR
            if tdir and not sdir:
                return errno.EISDIR
        if sdir and sd != dd and m.nodes[s].mode & 0o200 == 0:
            return errno.EACCES
        if flags & RENAME_EXCHANGE and t is not None and m.nodes[t].kind == "d" and \
                sd != dd and m.nodes[t].mode & 0o200 == 0:
            return errno.EACCES
        if t is not None and not flags & RENAME_EXCHANGE and m.nodes[t].kind == "d" and \
                m.nodes[t].entries:
            return errno.ENOTEMPTY
        return 0

    def op_rename(self, sd, sn, dd, dn, flags=0):
        want = self.rename_want(sd, sn, dd, dn, flags)
        if flags:
            err, _ = self.call(renameat2, self.p(sd, sn), self.p(dd, dn), flags)
        else:
            err, _ = self.call(os.rename, self.p(sd, sn), self.p(dd, dn))
        fl = {0: "", RENAME_NOREPLACE: " NOREPLACE", RENAME_EXCHANGE: " EXCHANGE"}[flags]
        self.log(f"rename{fl} {self.rel(sd, sn)} {self.rel(dd, dn)} -> {ename(err)}")
        # a rename frees nothing: ENOSPC when the metadata is full
        if not self.expect(f"rename {self.rel(sd, sn)} {self.rel(dd, dn)}", err, want, space=-1):
            if not os.path.lexists(self.p(sd, sn)):
                self.fail(f"rename {self.rel(sd, sn)} failed with ENOSPC but the source is gone")
            return
        if err:
            return
        m = self.m
        s, t = m.lookup(sd, sn), m.lookup(dd, dn)
        if s == t:
            return
        if flags & RENAME_EXCHANGE:
            m.nodes[sd].entries[sn] = t
            m.nodes[dd].entries[dn] = s
            m.nodes[s].links.discard((sd, sn))
            m.nodes[t].links.discard((dd, dn))
            m.nodes[s].links.add((dd, dn))
            m.nodes[t].links.add((sd, sn))
            return
        if t is not None:
            m.unlink(dd, dn)
        del m.nodes[sd].entries[sn]
        m.nodes[s].links.discard((sd, sn))
        m.link(s, dd, dn)

    def op_chmod(self, i, mode):
        err, _ = self.call(os.chmod, self.p(i), mode)
        self.log(f"chmod {self.rel(i)} {mode:o} -> {ename(err)}")
        self.expect(f"chmod {self.rel(i)}", err, 0)
        self.m.nodes[i].mode = mode

    def kill_priv(self, n):
        """The kernel drops set-id bits when someone without CAP_FSETID
        changes a file's data or size."""
        if n.mode & stat.S_ISUID:
            n.mode &= ~stat.S_ISUID
        if n.mode & stat.S_ISGID and n.mode & stat.S_IXGRP:
            n.mode &= ~stat.S_ISGID

    def data_op(self, i, what, fn, space, apply, fsync=False, kill=True):
        """open i for writing, fn(fd), optional fsync, close; apply(node)
        on success."""
        n = self.m.nodes[i]
        want = self.file_acc(i, True)
        err, fd = self.call(os.open, self.p(i), os.O_WRONLY)
        werr, res = write_close(fd, fn, fsync)
        self.log(f"{what} {self.rel(i)}{' fsync' if fsync else ''} -> {ename(err)}/{ename(werr)}")
        self.expect(f"open-w {self.rel(i)}", err, want)
        if err:
            return None
        ok = self.expect(f"{what} {self.rel(i)}", werr, 0, space=space)
        self.m.dirty.add(i)
        if not ok:
            n.mark_uncertain()
        apply(n, res)
        if kill:
            self.kill_priv(n)
        if not ok:
            self.settle(i)
        elif fsync:
            n.synced()
        return res

    def settle(self, i):
        """After an allowed failure: fsync (may fail again), drop the cached
        pages, read the file back and check it against 'old or new'; once
        an fsync succeeds the model adopts what is there."""
        n = self.m.nodes[i]
        with self.root():
            fd = open_at(self.root_fd, self.m.path(i), os.O_RDONLY)
        try:
            try:
                os.fsync(fd)
                fsynced = True
            except OSError:
                fsynced = False
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            # no adoption even after a good fsync: the kernel reports a
            # refused write-back to one fsync only, and keeps the size it
            # gave the file; what is on the device shows after the remount
            del fsynced
            msg = check_uncertain(n, fd, adopt=False)
            if msg:
                self.fail(f"after a refused write {self.rel(i)}: {msg}")
            self.m.states += 1
        finally:
            os.close(fd)

    def root(self):
        """with R.root(): the harness itself (not the user under test)
        opens a file the user may not read, to fsync or check it."""
        return AsRoot()

    def op_write(self, i, off, data, fsync=False):
        if off + len(data) > MAXFILE:
            self.op_efbig(i, off, data)
            return
        self.data_op(i, f"write {off}+{len(data)}", lambda fd: os.pwrite(fd, data, off),
                     len(data), lambda n, r: n.write(off, data), fsync)

    def op_efbig(self, i, off, data):
        """A write past the largest file size: EFBIG at the write or at the
        fsync that follows (the page cache takes it first), never success,
        and the file does not change."""
        n = self.m.nodes[i]
        size = n.size
        fd = open_at(self.root_fd, self.m.path(i), os.O_WRONLY)
        got = []
        try:
            for fn in (lambda: os.pwrite(fd, data, off), lambda: os.fsync(fd)):
                e, _ = self.call(fn)
                got.append(e)
                if e:
                    break
        finally:
            try:
                os.close(fd)
            except OSError:
                pass
        self.log(f"write {off}+{len(data)} past 2^50 {self.rel(i)} -> {'/'.join(map(ename, got))}")
        self.m.counts["efbig"] += 1
        self.m.states += 1
        if got[-1] not in (errno.EFBIG, errno.EINVAL):
            self.fail(f"write at {off} (past 2^50) {self.rel(i)}: {'/'.join(map(ename, got))}, "
                      f"wanted EFBIG at the write or its fsync")
        st = os.lstat(self.p(i))
        if st.st_size != size:
            # the kernel's page cache took the write (FUSE cannot tell it the
            # largest size) and keeps the size it gave the file until the
            # inode is dropped: the daemon never had it.  Noted, and cut back.
            self.m.counts["efbig_cached_size"] += 1
            if got[0] == 0:
                note = (f"write() past 2^50 returned success, EFBIG only at fsync; "
                        f"stat showed size {st.st_size} (seed {self.m.seed}, op #{self.m.ops})")
                if note.split(";")[0] not in " ".join(self.m.notes):
                    self.m.notes.append(note)
            os.truncate(self.p(i), size)
        if got[0] == 0:
            # the write-back WRITE that was refused may have carried earlier
            # writes' pages too: since the last fsync, as after any failed one
            n.mark_uncertain()
        self.kill_priv(n)
        if stat.S_IMODE(st.st_mode) != n.mode:     # set-id bits: kept or not, as the fs says
            n.mode = stat.S_IMODE(st.st_mode)

    def op_truncate(self, i, size):
        n = self.m.nodes[i]
        want = self.file_acc(i, True) or (errno.EFBIG if size > MAXFILE else 0)
        err, _ = self.call(os.truncate, self.p(i), size)
        self.log(f"truncate {self.rel(i)} {size} -> {ename(err)}")
        # a partial last block is written again (a copy of its bytes), and
        # on a full metadata log only a cut that drops extents is a free
        space = BLK if size != n.size and (size % BLK or n.size % BLK) else -1
        ok = self.expect(f"truncate {self.rel(i)} {size}", err, want, space=space)
        if ok and err == 0:
            n.truncate(size)
            self.kill_priv(n)
            self.m.dirty.add(i)
        elif not ok and os.lstat(self.p(i)).st_size != n.size:
            self.fail(f"truncate {self.rel(i)} failed with ENOSPC but changed the size")

    def op_fallocate(self, i, mode, off, length):
        def apply(n, r):
            if mode & FALLOC_FL_PUNCH_HOLE:
                n.punch(off, length)
            elif not mode & FALLOC_FL_KEEP_SIZE:
                n.size = max(n.size, off + length)
        # a punch writes again only the partial blocks at its ends
        space = (BLK if off % BLK or (off + length) % BLK else -1) \
            if mode & FALLOC_FL_PUNCH_HOLE else length
        self.data_op(i, f"fallocate mode {mode} {off}+{length}",
                     lambda fd: fallocate(fd, mode, off, length) if mode else
                     os.posix_fallocate(fd, off, length), space, apply)

    def op_copy(self, si, soff, di, doff, n):
        s = self.m.nodes[si]
        c = max(0, min(n, s.size - soff))
        want = self.file_acc(si, False) or self.file_acc(di, True)
        if not want and c and si == di and soff < doff + c and doff < soff + c:
            want = errno.EINVAL
        if not want and c and doff + c > MAXFILE:
            want = errno.EFBIG
        data = s.read(soff, c)
        fdi = None
        err, fdi = self.call(open_at, self.root_fd, self.m.path(si), os.O_RDONLY)
        if err:
            self.log(f"copy {self.rel(si)} -> open {ename(err)}")
            self.expect(f"open-r {self.rel(si)}", err, self.file_acc(si, False))
            return
        try:
            def fn(fd):
                if c == 0:        # at or past the source's end: copies nothing
                    return os.copy_file_range(fdi, fd, n, soff, doff)
                return copy_range(fdi, fd, c, soff, doff)
            what = f"copy {self.rel(si)} {soff}+{n} to {doff}"
            if want and want != errno.EACCES:
                e2 = 0
                fd = open_at(self.root_fd, self.m.path(di), os.O_WRONLY)
                try:
                    fn(fd)
                except OSError as e:
                    e2 = e.errno
                os.close(fd)
                self.log(f"{what} {self.rel(di)} -> {ename(e2)}")
                self.expect(f"{what} {self.rel(di)}", e2, want)
                return
            res = self.data_op(di, what, fn, c, lambda nd, r: nd.write(doff, data[:r]) if r else None,
                               kill=c > 0)
            if res is not None and res != c:
                self.fail(f"{what} {self.rel(di)}: copied {res} of {c} bytes")
        finally:
            os.close(fdi)

    def op_xattr_set(self, i, name, value, flags=0):
        n = self.m.nodes[i]
        want = errno.ERANGE if len(name.encode()) > NAME_MAX else \
            errno.EPERM if n.kind == "l" else self.file_acc(i, True) or \
            (errno.E2BIG if len(value) > XATTR_MAX else
             errno.EEXIST if flags == os.XATTR_CREATE and name in n.xattrs else
             errno.ENODATA if flags == os.XATTR_REPLACE and name not in n.xattrs else
             xattr_room(n, name, value))
        err, _ = self.call(os.setxattr, self.p(i), name, value, flags, follow_symlinks=False)
        self.log(f"setxattr {self.rel(i)} {name[:40]}({len(name)}) {len(value)} bytes flags {flags} -> {ename(err)}")
        if self.expect(f"setxattr {self.rel(i)} {name[:40]}", err, want, space=-1) and err == 0:
            n.xattrs[name] = value

    def op_xattr_rm(self, i, name):
        n = self.m.nodes[i]
        want = errno.EPERM if n.kind == "l" else self.file_acc(i, True) or \
            (0 if name in n.xattrs else errno.ENODATA)
        err, _ = self.call(os.removexattr, self.p(i), name, follow_symlinks=False)
        self.log(f"removexattr {self.rel(i)} {name[:40]} -> {ename(err)}")
        self.expect(f"removexattr {self.rel(i)} {name[:40]}", err, want)
        if err == 0:
            del n.xattrs[name]

    def op_xattr_get(self, i, name):
        n = self.m.nodes[i]
        want = (errno.ENODATA if n.kind == "l" else self.file_acc(i, False) or
                (0 if name in n.xattrs else errno.ENODATA))
        err, v = self.call(os.getxattr, self.p(i), name, follow_symlinks=False)
        self.log(f"getxattr {self.rel(i)} {name[:40]} -> {ename(err)}")
        self.expect(f"getxattr {self.rel(i)} {name[:40]}", err, want)
        if err == 0 and v != n.xattrs[name]:
            self.fail(f"getxattr {self.rel(i)} {name}: {len(v)} bytes differ from the "
                      f"{len(n.xattrs[name])} set")

    def op_verify(self, i):
        """stat (and read) one node in the session."""
        n = self.m.nodes[i]
        self.log(f"verify {self.rel(i)}")
        self.m.counts["verify"] += 1
        self.m.states += 1
        msg = check_node(self.m, i, os.lstat(self.p(i)), self.p(i), None)
        if msg:
            self.fail(f"in session: {msg}")
        if n.kind == "f" and n.mode & 0o400 and n.size <= FULL_READ and not n.uncertain:
            with open(self.p(i), "rb") as f:
                got = f.read()
            if got != n.read(0, n.size):
                self.fail(f"in session: {self.rel(i)}: {diff_at(got, n.read(0, n.size))}")

    def op_fsync(self, i, harness=False):
        n = self.m.nodes[i]
        if harness:
            with self.root():
                err, fd = self.call(open_at, self.root_fd, self.m.path(i), os.O_RDONLY)
        else:
            err, fd = self.call(open_at, self.root_fd, self.m.path(i), os.O_RDONLY)
        if err:
            self.expect(f"open-r {self.rel(i)}", err, self.file_acc(i, False))
            return
        e2 = 0
        try:
            os.fsync(fd)
        except OSError as e:
            e2 = e.errno
        os.close(fd)
        self.log(f"fsync {self.rel(i)} -> {ename(e2)}")
        if n.uncertain and e2 == errno.ENOSPC:
            e2 = 0                # its refused write-back, reported again
        if self.expect(f"fsync {self.rel(i)}", e2, 0, space=n.size or BLK):
            if not n.uncertain:   # a refused write-back fails one fsync only
                n.synced()
        else:
            n.mark_uncertain()
            self.settle(i)

    # ---- sync points
    def sync_point(self):
        """sync(), then fsync every file written since the last sync point
        and s/ (every fsync commits the whole log)."""
        os.sync()
        for i in sorted(self.m.dirty):
            n = self.m.nodes.get(i)
            if n is None or n.kind != "f":
                continue
            self.op_fsync(i, harness=True)
        self.m.dirty.clear()
        fd = os.open(self.s, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.log("sync point")

    # ---- the set-id phase's second user
    def as_other(self, what, fn):
        os.setresuid(0, 0, 0)
        try:
            e = as_user(OTHER, fn)
        finally:
            become_nobody()
        return e


def xattr_room(n, name, value):
    """0, or ENOSPC if setting name would pass the per-inode bounds."""
    names = len(name.encode()) + 1
    total = names + len(value)
    for x, v in n.xattrs.items():
        if x != name:
            names += len(x.encode()) + 1
            total += len(x.encode()) + 1 + len(v)
    return errno.ENOSPC if total > XATTR_TOTAL or names > XATTR_LIST else 0


def write_close(fd, fn, fsync):
    """fn(fd) (if any), fsync if asked, close: (first errno or 0, fn's
    result).  fd None: nothing to do (the open failed)."""
    werr, res = 0, None
    if fd is None:
        return werr, res
    try:
        res = fn(fd) if fn else None
        if fsync:
            os.fsync(fd)
    except OSError as e:
        werr = e.errno
    try:
        os.close(fd)
    except OSError as e:
        werr = werr or e.errno
    return werr, res


def check_uncertain(n, fd, adopt=True):
    """The file read through fd must have a size it had since its last
    fsync and each page as then, as now, or zero; with adopt, the model
    takes what is there (it is on the device)."""
    size = os.fstat(fd).st_size
    # every size since the last fsync: cuts in between were acknowledged
    lo, hi = 0, max(n.ssize, n.size, n.presize)
    if not lo <= size <= hi:
        return f"size {size}, allowed {lo}..{hi}"
    if size > FULL_READ:
        return None
    got = os.pread(fd, size, 0)
    if len(got) != size:
        return f"read {len(got)} of {size} bytes"
    if n.prefix and adopt:
        # a sequential writer's stored file: a prefix of what it wrote
        want = n.read(0, size)
        if got != want:
            return f"not a prefix of what was written: {diff_at(got, want)}"
        n.prefix = False
    new = {}
    zero = bytes(BLK)
    for p in range((size + BLK - 1) // BLK):
        g = got[p * BLK:(p + 1) * BLK]
        L = len(g)
        cands = [n.pages.get(p, zero)[:L], n.spages.get(p, zero)[:L], n.pre.get(p, zero)[:L],
                 zero[:L]]
        if g not in cands:
            return f"page {p} (offset {p * BLK}) is neither as at the last fsync, as written since, nor zero"
        if g != zero[:L]:
            new[p] = g + bytes(BLK - L)
    if adopt:
        n.pages, n.size = new, size
        n.spages, n.ssize, n.uncertain = dict(new), size, False
        n.pre, n.presize = {}, 0
    return None


def diff_at(got, want):
    if len(got) != len(want):
        return f"size {len(got)}, the model says {len(want)}"
    k = next(j for j in range(len(got)) if got[j] != want[j])
    return f"byte {k}: 0x{got[k]:02x}, the model says 0x{want[k]:02x}"


def check_node(m, i, st, where, fd, nlink=True):
    """Type, mode, owner, size, link count of one node; None or a message."""
    n = m.nodes[i]
    kinds = {"f": stat.S_ISREG, "d": stat.S_ISDIR, "l": stat.S_ISLNK}
    rel = "/".join(m.path(i))
    if not kinds[n.kind](st.st_mode):
        return f"{rel}: mode {st.st_mode:o}, the model says a {dict(f='file', d='directory', l='symlink')[n.kind]}"
    if n.kind != "l" and stat.S_IMODE(st.st_mode) != n.mode:
        return f"{rel}: mode {stat.S_IMODE(st.st_mode):o}, the model says {n.mode:o}"
    if st.st_uid != n.uid:
        return f"{rel}: owner {st.st_uid}, the model says {n.uid}"
    if nlink and st.st_nlink != n.nlink(m):
        return f"{rel}: {st.st_nlink} links, the model says {n.nlink(m)}"
    if n.kind == "f" and not n.uncertain and st.st_size != n.size:
        return f"{rel}: size {st.st_size}, the model says {n.size}"
    return None


class AsRoot:
    def __enter__(self):
        os.setresuid(0, 0, 0)

    def __exit__(self, *exc):
        become_nobody()


def become_nobody():
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, 0)
    os.setresuid(NOBODY, NOBODY, 0)


# ------------------------------------------------------------- phases ----

def ph_random(R, ops, top_name="rand"):
    m, r = R.m, R.r
    top = R.phase_dir(top_name)
    kinds = (["create"] * 10 + ["mkdir"] * 4 + ["write"] * 16 + ["append"] * 6 + ["truncate"] * 5 +
             ["unlink"] * 6 + ["rmdir"] * 3 + ["rename"] * 10 + ["rename2"] * 3 + ["link"] * 4 +
             ["symlink"] * 3 + ["chmod"] * 3 + ["setxattr"] * 6 + ["rmxattr"] * 2 + ["getxattr"] * 2 +
             ["copy"] * 5 + ["falloc"] * 4 + ["fsync"] * 3 + ["verify"] * 6 + ["bad"] * 2)
    cap = max(1 << 20, int(os.statvfs(R.mnt).f_blocks * os.statvfs(R.mnt).f_frsize * 0.3))
    for _ in range(ops):
        k = r.choice(kinds)
        files = R.files(top)
        dirs = R.nodes_under(top, "d")
        total = sum(len(m.nodes[f].pages) for f in files) * BLK
        if k in ("write", "append", "copy", "falloc") and total > cap:
            k = r.choice(["truncate", "unlink"])
        if k in ("write", "append", "truncate", "copy", "falloc", "fsync") and not files:
            k = "create"
        d = r.choice(dirs)
        if k == "create":
            if len(files) > 200:
                ent = R.pick_entry(top)
                if ent and m.nodes[m.lookup(*ent)].kind != "d":
                    R.op_unlink(*ent)
                continue
            data = payload(m.ops, r.choice([0, 1, 100, 4095, 4096, 5000, 70000]))
            R.op_create(d, R.new_name("f"), data, r.choice([0o644, 0o600, 0o644, 0o444, 0o664]),
                        fsync=r.random() < 0.2)
        elif k == "mkdir":
            depth = len(m.path(d)) - len(m.path(top))
            if depth < 6 and len(dirs) < 60:
                R.op_mkdir(d, R.new_name("d"), r.choice([0o755, 0o700, 0o755, 0o775]))
        elif k in ("write", "append"):
            f = r.choice(files)
            n = m.nodes[f]
            x = r.random()
            ln = r.randint(1, 4096) if x < 0.5 else r.randint(1, 200000) if x < 0.9 else r.randint(1, 1 << 20)
            off = n.size if k == "append" else r.randint(0, n.size + 65536)
            if r.random() < 0.3:
                off -= off % BLK
            R.op_write(f, off, payload(m.ops, ln), fsync=r.random() < 0.15)
        elif k == "truncate":
            f = r.choice(files)
            sz = m.nodes[f].size
            x = r.random()
            R.op_truncate(f, 0 if x < 0.15 else r.randint(0, sz) if x < 0.8 else r.randint(sz, sz + 300000))
        elif k == "unlink":
            ent = R.pick_entry(top)
            if ent:
                R.op_unlink(*ent)
        elif k == "rmdir":
            ent = R.pick_entry(top)
            if ent:
                R.op_rmdir(*ent)
        elif k in ("rename", "rename2"):
            ent = R.pick_entry(top)
            if not ent:
                continue
            dd = r.choice(dirs)
            if r.random() < 0.5 and m.nodes[dd].entries:
                dn = r.choice(sorted(m.nodes[dd].entries))
            else:
                dn = R.new_name("r")
            fl = 0 if k == "rename" else r.choice([RENAME_NOREPLACE, RENAME_EXCHANGE])
            R.op_rename(ent[0], ent[1], dd, dn, fl)
        elif k == "link":
            f = r.choice(files + dirs[1:2])
            sd, sn = sorted(m.nodes[f].links)[0]
            dd = r.choice(dirs)
            dn = R.new_name("h") if r.random() < 0.85 else r.choice(sorted(m.nodes[dd].entries) or ["x"])
            R.op_link(sd, sn, dd, dn)
        elif k == "symlink":
            t = r.choice(["../" * r.randint(0, 3) + R.new_name("t"), "/etc/passwd",
                          "y" * r.randint(1, 4000)])
            R.op_symlink(d, R.new_name("l"), t)
        elif k == "chmod":
            i = r.choice(files + dirs[1:]) if len(files) + len(dirs) > 1 else None
            if i is None:
                continue
            if m.nodes[i].kind == "d":
                R.op_chmod(i, r.choice([0o755, 0o700, 0o1777, 0o775, 0o555]))
            else:
                R.op_chmod(i, r.choice([0o644, 0o600, 0o444, 0o664, 0o4755, 0o2755, 0o6777, 0o000]))
        elif k in ("setxattr", "rmxattr", "getxattr"):
            i = R.pick(top) or top
            n = m.nodes[i]
            names = sorted(n.xattrs)
            if k == "setxattr":
                nm = r.choice(names) if names and r.random() < 0.3 else f"user.{R.new_name('x')}"
                v = payload(m.ops, r.choice([0, 1, 50, 1000, 16384]))
                R.op_xattr_set(i, nm, v, r.choice([0, 0, os.XATTR_CREATE, os.XATTR_REPLACE]))
            elif k == "rmxattr":
                R.op_xattr_rm(i, r.choice(names) if names and r.random() < 0.8 else "user.none")
            else:
                R.op_xattr_get(i, r.choice(names) if names and r.random() < 0.8 else "user.none")
        elif k == "copy":
            si, di = r.choice(files), r.choice(files)
            ss = m.nodes[si].size
            soff = r.randint(0, ss)
            if r.random() < 0.6:
                soff -= soff % BLK
            ln = r.randint(1, 1 << 20) if r.random() < 0.6 else max(1, ss - soff)
            doff = r.randint(0, m.nodes[di].size + 65536)
            if r.random() < 0.7:
                doff = doff - doff % BLK + soff % BLK
            R.op_copy(si, soff, di, doff, ln)
        elif k == "falloc":
            f = r.choice(files)
            sz = m.nodes[f].size
            mode = r.choice([0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE])
            off = r.randint(0, sz + 8192)
            R.op_fallocate(f, mode, off, r.randint(1, 200000))
        elif k == "fsync":
            R.op_fsync(r.choice(files))
        elif k == "verify":
            i = R.pick(top)
            if i is not None:
                R.op_verify(i)
        elif k == "bad":
            x = r.randrange(5)
            if x == 0:
                R.op_create(d, "L" * 256)
            elif x == 1:
                R.op_unlink(d, R.new_name("missing"))
            elif x == 2 and len(dirs) > 1:
                sub = r.choice(dirs[1:])
                R.op_rename(m.parent_of(sub), m.path(sub)[-1], sub, "into")
            elif x == 3:
                R.op_xattr_set(top, "user." + "x" * 300, b"v")
            else:
                R.op_xattr_set(top, "user.big", payload(1, XATTR_MAX + 1))


def ph_deep(R, ops, depth):
    """A chain of `depth` directories made by mkdir + openat (no long
    path), a file every 500 levels; each level is an op.  Chains of
    earlier deep phases beyond the newest one are removed first (rmdir
    bottom up, climbing with openat "..")."""
    m = R.m
    top = R.phase_dir("deep")
    ents = m.nodes[top].entries
    for name in sorted(ents, key=lambda x: ents[x])[:-1]:
        rm_chain(R, top, name)
    name = R.new_name("c")
    fd = os.open(R.p(top), os.O_RDONLY | os.O_DIRECTORY)
    cur = top
    try:
        for lvl in range(depth):
            nm = name if lvl == 0 else "d"
            err, _ = R.call(os.mkdir, nm, 0o755, dir_fd=fd)
            if lvl % 500 == 0 or err:
                R.log(f"deep mkdir level {lvl} -> {ename(err)}")
            else:
                m.ops += 1
                R.nops += 1
            if not R.expect("mkdir", err, 0, space=-1):
                break
            cur = m.new("d", 0o755, cur, nm)
            nfd = os.open(nm, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
            if lvl % 500 == 499:
                data = payload(m.ops, 3000)
                err, ffd = R.call(os.open, "f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
                R.log(f"deep create level {lvl} -> {ename(err)}")
                if R.expect("create", err, 0, space=-1):
                    os.write(ffd, data)
                    os.close(ffd)
                    i = m.new("f", 0o644, cur, "f")
                    m.nodes[i].write(0, data)
                    m.dirty.add(i)
        # renames at the bottom: within the deepest directory, and a
        # directory moved one level up (the loop check walks the chain)
        if cur != top and m.nodes[cur].links:
            pfd = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            parent = m.parent_of(cur)
            try:
                steps = [("mkdir", "x"), ("rename", "x", fd, "y"), ("rename", "y", pfd, "z")]
                for st in steps:
                    if st[0] == "mkdir":
                        err, _ = R.call(os.mkdir, st[1], 0o755, dir_fd=fd)
                    else:
                        err, _ = R.call(os.rename, st[1], st[3], src_dir_fd=fd, dst_dir_fd=st[2])
                    R.log(f"deep {' '.join(str(x) for x in st if not isinstance(x, int))} "
                          f"at level {len(m.path(cur))} -> {ename(err)}")
                    if not R.expect(f"deep-{st[0]}", err, 0, space=-1):
                        break
                    if st[0] == "mkdir":
                        m.new("d", 0o755, cur, "x")
                    else:
                        dst = cur if st[2] == fd else parent
                        x = m.nodes[cur].entries.pop(st[1])
                        m.nodes[x].links = set()
                        m.link(x, dst, st[3])
            finally:
                os.close(pfd)
    finally:
        os.close(fd)


def rm_chain(R, top, name):
    m = R.m
    chain = [m.lookup(top, name)]
    while True:
        nxt = m.nodes[chain[-1]].entries.get("d")
        if nxt is None:
            break
        chain.append(nxt)
    tfd = os.open(R.p(top), os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=tfd)
    os.close(tfd)
    for _ in chain[1:]:
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    for k in range(len(chain) - 1, -1, -1):
        d = chain[k]
        for nm in sorted(m.nodes[d].entries):
            if nm == "d":
                continue
            isdir = m.nodes[m.nodes[d].entries[nm]].kind == "d"
            err, _ = R.call(os.rmdir if isdir else os.unlink, nm, dir_fd=fd)
            R.log(f"deep {'rmdir' if isdir else 'unlink'} {nm} level {k} -> {ename(err)}")
            R.expect("rmdir" if isdir else "unlink", err, 0)
            m.unlink(d, nm)
        pfd = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = pfd
        nm = "d" if k else name
        err, _ = R.call(os.rmdir, nm, dir_fd=fd)
        if k % 500 == 0 or err:
            R.log(f"deep rmdir level {k} -> {ename(err)}")
        else:
            m.ops += 1
            R.nops += 1
        R.expect("rmdir", err, 0)
        m.unlink(chain[k - 1] if k else top, nm)
    os.close(fd)


def ph_wide(R, ops):
    d = R.fresh_dir("wide", "w")
    if d is None:
        return
    n = max(1, ops * 3 // 4)
    for k in range(n):
        if k % 3 == 0:
            R.op_mkdir(d, R.new_name("e", 40))
        else:
            R.op_create(d, R.new_name("e", R.r.choice([4, 40, 200])))
    names = sorted(R.m.nodes[d].entries)
    R.r.shuffle(names)
    for nm in names[:ops - n]:
        i = R.m.lookup(d, nm)
        (R.op_rmdir if R.m.nodes[i].kind == "d" else R.op_unlink)(d, nm)
    R.log(f"listdir {R.rel(d)}")
    got = sorted(os.listdir(R.p(d)))
    R.m.states += 1
    if got != sorted(R.m.nodes[d].entries):
        R.fail(f"listdir {R.rel(d)}: {len(got)} names, the model has {len(R.m.nodes[d].entries)}")


def ph_rename(R, ops):
    """Renames among a pool of files and directories in a few directories,
    over existing names, exchanges, into subdirectories."""
    m, r = R.m, R.r
    top = R.phase_dir("ren")
    dirs = [x for x in R.nodes_under(top, "d")]
    while len(dirs) < 5:
        x = R.op_mkdir(r.choice(dirs), R.new_name("D"))
        if x is None:
            break
        dirs.append(x)
    while len(R.nodes_under(top, "f")) < 30:
        if R.op_create(r.choice(dirs), R.new_name("F"), payload(m.ops, 100)) is None:
            break
    for _ in range(ops):
        ent = R.pick_entry(top)
        if not ent:
            break
        dirs = R.nodes_under(top, "d")
        dd = r.choice(dirs)
        x = r.random()
        if x < 0.4 and m.nodes[dd].entries:
            dn = r.choice(sorted(m.nodes[dd].entries))
        elif x < 0.5:
            dn = ent[1]
        else:
            dn = R.new_name("R", r.choice([0, 0, 30, 120]) or None)
        fl = r.choice([0, 0, 0, RENAME_NOREPLACE, RENAME_EXCHANGE])
        R.op_rename(ent[0], ent[1], dd, dn, fl)


def ph_link(R, ops):
    m, r = R.m, R.r
    d = R.fresh_dir("link", "L")
    if d is None:
        return
    srcs = [x for x in (R.op_create(d, R.new_name("s"), payload(m.ops, 5000)) for _ in range(3)) if x]
    for _ in range(ops):
        if not srcs:
            break
        s = r.choice(srcs)
        if s not in m.nodes:
            srcs.remove(s)
            continue
        if r.random() < 0.7 or len(m.nodes[s].links) < 2:
            sd, sn = sorted(m.nodes[s].links)[0]
            R.op_link(sd, sn, d, R.new_name("l"))
        else:
            R.op_unlink(*r.choice(sorted(m.nodes[s].links)))
        if r.random() < 0.01:
            R.op_verify(s)


def ph_xattr(R, ops):
    m, r = R.m, R.r
    top = R.phase_dir("xattr")
    pool = [x for x in (R.op_create(top, R.new_name("X")) for _ in range(4)) if x]
    pool += [x for x in (R.op_mkdir(top, R.new_name("XD")),) if x]
    for _ in range(ops):
        pool = [x for x in pool if x in m.nodes]
        if not pool:
            break
        i = r.choice(pool)
        names = sorted(m.nodes[i].xattrs)
        x = r.random()
        if x < 0.55:
            if len(names) > 40:
                R.op_xattr_rm(i, r.choice(names))
                continue
            ln = r.choice([6, 20, 100, NAME_MAX])
            nm = ("user." + R.new_name("a") + "_" + "z" * ln)[:ln] if ln > 10 else f"user.{R.new_name('a')}"
            if r.random() < 0.3 and names:
                nm = r.choice(names)
            R.op_xattr_set(i, nm, payload(m.ops, r.choice([0, 10, 400, 4096, 16384, XATTR_MAX])),
                           r.choice([0, 0, os.XATTR_CREATE, os.XATTR_REPLACE]))
        elif x < 0.8:
            R.op_xattr_rm(i, r.choice(names) if names else "user.none")
        elif x < 0.95:
            R.op_xattr_get(i, r.choice(names) if names else "user.none")
        else:
            R.op_xattr_set(i, "user." + "n" * 251, b"max name")     # 256 bytes: ERANGE


def ph_longnames(R, ops):
    m, r = R.m, R.r
    d = R.fresh_dir("long", "N")
    if d is None:
        return
    for _ in range(ops):
        x = r.random()
        n255 = R.new_name("n", NAME_MAX)
        if x < 0.35:
            R.op_create(d, n255, payload(m.ops, 10))
        elif x < 0.45:
            R.op_mkdir(d, n255)
        elif x < 0.5:
            mb = R.new_name("u") + "_"
            nm = mb + "é" * ((NAME_MAX - len(mb)) // 2)          # multi-byte, <= 255 bytes
            R.op_create(d, nm)
        elif x < 0.6:
            R.op_symlink(d, n255, "t" * r.choice([255, 1000, 4095]))
        elif x < 0.7:
            R.op_create(d, R.new_name("n", NAME_MAX + 1))       # ENAMETOOLONG
        elif x < 0.85:
            ent = R.pick_entry(d)
            if ent:
                R.op_rename(ent[0], ent[1], d, R.new_name("m", r.choice([NAME_MAX, NAME_MAX + 1])))
        else:
            ent = R.pick_entry(d)
            if ent:
                i = m.lookup(*ent)
                (R.op_rmdir if m.nodes[i].kind == "d" else R.op_unlink)(*ent)


def ph_sparse(R, ops):
    m, r = R.m, R.r
    top = R.phase_dir("sparse")
    files = [x for x in (R.op_create(top, R.new_name("S")) for _ in range(3)) if x]
    for _ in range(ops):
        files = [f for f in files if f in m.nodes and not m.nodes[f].uncertain]
        if len(files) < 3:        # a refused write left one uncertain
            f = R.op_create(top, R.new_name("S"))
            if f is None:
                break
            files.append(f)
        f = r.choice(files)
        x = r.random()
        off = r.choice([1 << 40, (1 << 40) + r.randint(0, 1 << 30), r.randint(0, 1 << 41),
                        (1 << 32) - r.randint(1, 4096), MAXFILE - r.randint(1, 9000)])
        if x < 0.5:
            R.op_write(f, off, payload(m.ops, r.randint(1, 9000)), fsync=r.random() < 0.2)
        elif x < 0.6:
            R.op_write(f, MAXFILE + r.randint(0, 1 << 20), b"beyond")          # EFBIG
        elif x < 0.75:
            R.op_truncate(f, r.choice([r.randint(0, 1 << 42), MAXFILE, MAXFILE + 1, 0,
                                       m.nodes[f].size // 2]))
        elif x < 0.85:
            R.op_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, r.randint(0, max(1, m.nodes[f].size)),
                           r.randint(1, 1 << 30))
        else:
            R.op_verify(f)


def ph_copy(R, ops):
    """copy_file_range: between files and within one, congruent and not,
    past the source's end, and extending a file that was truncated down
    (the bytes cut off must not come back)."""
    m, r = R.m, R.r
    top = R.phase_dir("copy")
    files = [x for x in (R.op_create(top, R.new_name("C"), payload(m.ops, r.randint(1, 600000)))
                         for _ in range(4)) if x]
    # files the last copy phase cut into a block (the cut committed by
    # another file's fsync, the file itself never fsync'ed) before the
    # crash or unmount: extend them by a copy; the cut-off bytes of the
    # block must not come back
    srcs = [x for x in files if m.nodes[x].size >= 2 * BLK]
    for f in m.cut_pending:
        if f in m.nodes and not m.nodes[f].uncertain and srcs:
            # whole blocks at a block offset past the end: the copy shares
            # the source's extents instead of writing through the buffer
            end = -(-m.nodes[f].size // BLK) * BLK
            R.op_copy(srcs[0], 0, f, end + r.choice([0, BLK, 4 * BLK]), BLK * r.randint(1, 2))
            R.op_verify(f)
    m.cut_pending = []
    for _ in range(ops):
        files = [f for f in files if f in m.nodes and not m.nodes[f].uncertain]
        if len(files) < 2:
            break
        si, di = r.choice(files), r.choice(files)
        x = r.random()
        if x < 0.4:
            n = m.nodes[di]
            if n.size > BLK * 4:
                # cut (block aligned or not), then extend past the cut with
                # a copy (from another file or from the same one's start),
                # congruent or not, sometimes fsync'ed at once
                cut = r.randint(0, n.size // 2)
                if r.random() < 0.3:
                    cut -= cut % BLK
                R.op_truncate(di, cut)
                if r.random() < 0.3:
                    si = di
                src = m.nodes[si]
                soff = r.randint(0, max(0, min(src.size, cut if si == di else src.size) - 1))
                if r.random() < 0.5:
                    soff -= soff % BLK
                gap = r.choice([0, 1, 100, BLK, 3 * BLK + 17, 100000])
                doff = cut + gap
                if r.random() < 0.6:
                    doff = doff - doff % BLK + soff % BLK
                    doff += BLK if doff < cut else 0
                R.op_copy(si, soff, di, doff, r.randint(1, 300000))
                if r.random() < 0.5:
                    R.op_fsync(di)
                continue
        if x < 0.3 and m.nodes[di].size > (4 << 20):
            R.op_truncate(di, r.randint(0, 1 << 20))
            continue
        ss = m.nodes[si].size
        soff = r.randint(0, ss)
        if r.random() < 0.6:
            soff -= soff % BLK
        ln = r.randint(1, 1 << 20)
        doff = r.randint(0, m.nodes[di].size + 65536)
        if r.random() < 0.7:
            doff = doff - doff % BLK + soff % BLK
        R.op_copy(si, soff, di, doff, ln)
        if r.random() < 0.2:
            R.op_fsync(di)
    files = [f for f in files if f in m.nodes and not m.nodes[f].uncertain]
    for f in files[:2]:
        n = m.nodes[f]
        others = [g for g in files if g != f and g not in m.cut_pending]
        if n.size > 3 * BLK and others:
            R.op_fsync(f)
            cut = r.randint(BLK, n.size - BLK) // BLK * BLK + r.randint(1, BLK - 1)
            R.op_truncate(f, cut)
            R.op_fsync(others[0])         # commits the whole log, the cut too
            m.dirty.discard(f)            # the sync point leaves f alone
            m.cut_pending.append(f)


def ph_falloc(R, ops):
    m, r = R.m, R.r
    top = R.phase_dir("falloc")
    files = [x for x in (R.op_create(top, R.new_name("A"), payload(m.ops, 50000)) for _ in range(3)) if x]
    for _ in range(ops):
        files = [f for f in files if f in m.nodes and not m.nodes[f].uncertain]
        if not files:
            break
        f = r.choice(files)
        sz = m.nodes[f].size
        x = r.random()
        if x < 0.25:
            R.op_fallocate(f, 0, r.randint(0, sz + 100000), r.randint(1, 300000))
        elif x < 0.45:
            R.op_fallocate(f, FALLOC_FL_KEEP_SIZE, r.randint(0, sz + 100000), r.randint(1, 300000))
        elif x < 0.75:
            R.op_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, r.randint(0, sz + 1),
                           r.randint(1, 100000))
        elif x < 0.9:
            R.op_write(f, r.randint(0, sz + 10000), payload(m.ops, r.randint(1, 20000)))
        elif sz > (2 << 20):
            R.op_truncate(f, r.randint(0, sz))
        else:
            R.op_verify(f)


def ph_setid(R, ops):
    """Set-id files written, copied into, truncated and fallocated by the
    owner (nobody) and by another user (4343): the bits must go."""
    m, r = R.m, R.r
    top = R.phase_dir("setid", 0o777)
    src = R.op_create(top, R.new_name("src"), payload(m.ops, 20000), 0o644)
    if src is None:
        return
    kinds = ["write", "trunc", "falloc", "keep", "punch", "copy"]
    for k in range(ops):
        f = R.op_create(top, R.new_name("suid"), payload(m.ops, 12000), 0o644)
        if f is None:
            continue
        R.op_chmod(f, r.choice([0o4777, 0o6777, 0o2777, 0o4757]))
        kind = kinds[k % len(kinds)]
        other = r.random() < 0.7
        n = m.nodes[f]
        path, spath = R.p(f), R.p(src)
        data = payload(m.ops, 100)
        off = r.randint(0, 20000)

        def act():
            fd = os.open(path, os.O_WRONLY)
            try:
                if kind == "write":
                    os.pwrite(fd, data, off)
                elif kind == "trunc":
                    os.ftruncate(fd, off)
                elif kind == "falloc":
                    os.posix_fallocate(fd, off, 5000)
                elif kind == "keep":
                    fallocate(fd, FALLOC_FL_KEEP_SIZE, off, 5000)
                elif kind == "punch":
                    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, 5000)
                else:
                    s = os.open(spath, os.O_RDONLY)
                    try:
                        os.copy_file_range(s, fd, 3000, 0, off)
                    finally:
                        os.close(s)
            finally:
                os.close(fd)
        e = R.as_other(kind, act) if other else R.call(act)[0]
        R.log(f"setid {kind} by {'uid %d' % OTHER if other else 'the owner'} {R.rel(f)} at {off} -> {ename(e)}")
        R.expect(f"setid-{kind} {R.rel(f)}", e, 0, space=5000)
        if kind == "write":
            n.write(off, data)
        elif kind == "trunc":
            n.truncate(off)
        elif kind == "falloc":
            n.size = max(n.size, off + 5000)
        elif kind == "punch":
            n.punch(off, 5000)
        elif kind == "copy":
            n.write(off, m.nodes[src].read(0, 3000))
        before = n.mode
        R.kill_priv(n)
        m.dirty.add(f)
        st = os.stat(path)
        m.states += 1
        if stat.S_IMODE(st.st_mode) != n.mode:
            R.fail(f"{kind} by {'uid %d' % OTHER if other else 'the owner'} of {R.rel(f)} (mode {before:o}): "
                   f"mode {stat.S_IMODE(st.st_mode):o} after it, the set-id bits must be cleared ({n.mode:o})")
        if r.random() < 0.5:
            R.op_unlink(top, m.path(f)[-1])


def ph_fill(R, ops, meta=False, drain=True):
    """Fill the device (data, or metadata: names and xattrs until
    log_state_full=1) until ENOSPC, then write small files and rename on
    the full device; with drain, then delete everything (drain_fill),
    else leave the device full for the unmount or crash that follows (and
    a drain phase after it)."""
    m, r = R.m, R.r
    top = R.phase_dir("fill")
    if m.fill_free0 is not None:
        drain_fill(R)         # the last fill left the device full
    sv0 = os.statvfs(R.mnt)
    free0 = sv0.f_bavail * sv0.f_frsize
    m.fill_free0 = free0
    m.fill_stats0 = stats(R.mnt)
    d = R.op_mkdir(top, R.new_name("F"))
    if d is None:
        R.fail("fill: cannot make the fill directory")
    sub = [d]
    made = []
    cap = 3 << 20
    full = 0
    done = 0
    t0 = time.monotonic()
    while full < 3 and done < ops and time.monotonic() - t0 < 600:
        done += 1
        e0 = R.enospc
        if meta:
            x = r.random()
            if x < 0.05 and len(sub) < 50:
                i = R.op_mkdir(d, R.new_name("M", 200))
                if i:
                    sub.append(i)
                else:
                    full += 1
            elif x < 0.35 and made:
                i = r.choice(made[-50:])
                R.op_xattr_set(i, "user." + R.new_name("v", 200), payload(m.ops, r.choice([100, 4000])))
            else:
                i = R.op_create(r.choice(sub), R.new_name("m", 240))
                if i is not None:
                    made.append(i)
        else:
            # big files first, smaller ones once they are refused: the
            # device ends full to the last few blocks
            ln = r.choice([x for x in (4096, 100000, 1 << 20, 3 << 20) if x <= cap])
            R.op_create(r.choice(sub), R.new_name("b"), payload(m.ops, ln), fsync=True)
            if R.enospc > e0 and cap > 4096:
                cap = max(4096, cap // 8)
                continue
        full += R.enospc > e0
    st = stats(R.mnt)
    sv = os.statvfs(R.mnt)
    R.log(f"fill: {done} steps, full {full}x, statvfs free {sv.f_bavail * sv.f_frsize}, "
          f"log_state_full={st.get('log_state_full')}")
    m.notes.append(f"fill{'(meta)' if meta else ''}: {done} steps, ENOSPC {full}x, free "
                   f"{sv.f_bavail * sv.f_frsize >> 10} KiB of {free0 >> 10}, log_state_full="
                   f"{st.get('log_state_full')}")
    # on the full device: small files the way a shell writes them (no
    # fsync: what close() acknowledges must be there after the remount)
    # and renames, also to the same and shorter name lengths
    his = [R.op_create(d, R.new_name("hi"), b"hi\n") for _ in range(10)]
    his += [R.op_create(d, R.new_name("cp"), payload(m.ops, 65536 + 100)) for _ in range(6)]
    his += [ph_dd(R, d) for _ in range(3)]
    # what close() acknowledged is the daemon's after the write-back
    # (sync), not only the page cache's
    os.sync()
    for i in his:
        if i is None or m.nodes[i].uncertain:
            continue
        want = m.nodes[i].read(0, m.nodes[i].size)
        with R.root():
            fd = open_at(R.root_fd, m.path(i), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            got = os.pread(fd, len(want) + 100, 0)
        finally:
            os.close(fd)
        m.states += 1
        if got != want:
            R.fail(f"{R.rel(i)}: written on the full device, open, write and close "
                   f"succeeded, but after sync() the file holds {diff_at(got, want)}")
        # close() acknowledged it: an fsync may not refuse it now
        with R.root():
            fd = open_at(R.root_fd, m.path(i), os.O_RDONLY)
        try:
            e, _ = R.call(os.fsync, fd)
        finally:
            os.close(fd)
        R.log(f"fsync {R.rel(i)} (close() acknowledged 'hi') -> {ename(e)}")
        R.expect(f"fsync-acknowledged {R.rel(i)}", e, 0)
        m.nodes[i].synced()
    # a rename storm on the full device: to the same name length (must
    # work: renames may use the log's reserve), longer (may get ENOSPC)
    # and shorter
    ents = sorted((d2, n) for d2 in sub for n in m.nodes[d2].entries)
    for _ in range(min(200, ops) if drain else ops // 2):
        if not ents:
            break
        e = ents.pop(r.randrange(len(ents)))
        if m.lookup(*e) is None:
            continue
        ln = max(2, len(e[1]) + r.choice([0, 0, 0, -1, 1, 8]))
        nm, dest = R.new_name("r", ln), r.choice(sub)
        R.op_rename(e[0], e[1], dest, nm)
        ents.append((dest, nm) if m.lookup(dest, nm) is not None else e)
    R.sync_point()
    if drain:
        drain_fill(R)


def ph_dd(R, d):
    """dd of=f on the full device: 256 KiB write()s of one repeated
    page (no fsync) until one fails or FULL_READ bytes (more than the small
    devices hold: the page cache takes them first), then close().  If
    nothing failed the file must be stored whole; else after the remount
    the stored file must be a prefix of what was written, without holes."""
    m = R.m
    name = R.new_name("dd")
    err, fd = R.call(os.open, R.p(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    R.log(f"dd create {R.rel(d, name)} -> {ename(err)}")
    if not R.expect(f"create {R.rel(d, name)}", err, 0, space=-1):
        return None
    i = m.new("f", 0o644, d, name)
    n = m.nodes[i]
    n.synced()
    m.dirty.add(i)
    off, werr = 0, 0
    data = DD_PAGE * 64
    while off < FULL_READ and not werr:
        try:
            k = os.write(fd, data)
        except OSError as e:
            werr = e.errno
            break
        for p in range(off // BLK, (off + k) // BLK):
            n.pages[p] = DD_PAGE          # one object: the pickle stays small
        off += k
        n.size = off
    try:
        os.close(fd)
    except OSError as e:
        werr = werr or e.errno
    R.log(f"dd {R.rel(d, name)}: {off} bytes written -> {ename(werr)}")
    m.notes.append(f"dd on the full device: write() took {off} bytes, then {ename(werr)}")
    if werr:
        R.expect(f"dd {R.rel(d, name)}", werr, 0, space=256 << 10)
        n.mark_uncertain()
        n.pre, n.presize, n.prefix = {}, 0, True
        return None
    return i


def drain_fill(R):
    """Delete everything under fill/: every delete works, the free space
    comes back within one zone without a remount, the space adds up, and a
    create works."""
    m = R.m
    top = R.phase_dir("fill")
    free0 = m.fill_free0
    # delete everything under fill/
    for i in sorted(R.nodes_under(top), key=lambda x: -len(m.path(x))):
        if i in m.nodes and m.nodes[i].kind != "d":
            for lk in sorted(m.nodes[i].links):
                R.op_unlink(*lk)
    for i in sorted(R.nodes_under(top, "d"), key=lambda x: -len(m.path(x))):
        if i != top and i in m.nodes:
            R.op_rmdir(m.parent_of(i), m.path(i)[-1])
    fd = os.open(R.s, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
    # the space comes back without a remount (resets follow a commit)
    zone = R.zone
    t1 = time.monotonic()
    while free0 is not None:
        sv = os.statvfs(R.mnt)
        free1 = sv.f_bavail * sv.f_frsize
        if free1 + zone >= free0 or time.monotonic() - t1 > 20:
            break
        time.sleep(0.5)
    if free0 is not None:
        m.states += 1
        R.log(f"after delete: statvfs free {free1}, before the fill {free0}")
        if free1 + zone < free0:
            R.fail(f"after deleting everything the fill wrote, statvfs free is {free1} bytes, "
                   f"before the fill {free0}: {free0 - free1} bytes (> one zone, {zone}) did not come back; "
                   f"stats that changed: {stats_diff(m.fill_stats0, stats(R.mnt))}; log now: "
                   + ", ".join(f"{k} {v}" for k, v in stats(R.mnt).items()
                               if k.startswith(("log_", "meta_"))))
    errs = check_space(m, R.mnt, zone)
    m.states += 1
    if errs:
        R.fail("after deleting everything the fill wrote (no remount): " + "; ".join(errs))
    i = R.op_create(top, R.new_name("after"), payload(m.ops, 5000), fsync=True)
    if i is None:
        R.fail("after deleting everything, a create still gets ENOSPC")
    R.op_mkdir(top, R.new_name("afterdir"))
    m.fill_free0 = None


def ph_tail(R, k):
    """K namespace operations after the sync point, each a state of
    s/tail; returns (ops, states)."""
    m, r = R.m, R.r
    top = R.phase_dir("tail")
    ops, states = [], [m.tail_state(top)]
    for _ in range(k):
        x = r.random()
        names = sorted(m.nodes[top].entries)
        if x < 0.35 or not names:
            op = ("create", R.new_name("t"))
        elif x < 0.5:
            op = ("mkdir", R.new_name("td"))
        elif x < 0.65:
            op = ("rename", r.choice(names), R.new_name("t"))
        elif x < 0.75:
            op = ("symlink", R.new_name("ts"), "target" * r.randint(1, 5))
        elif x < 0.85:
            op = ("setxattr", r.choice(names), "user.t" + str(r.randrange(4)), b"v" * r.randint(0, 99))
        else:
            op = ("remove", r.choice(names))
        ops.append(op)
        tail_apply(R, top, op)
        states.append(m.tail_state(top))
    return ops, states


def tail_apply(R, top, op):
    m = R.m
    if op[0] == "create":
        R.op_create(top, op[1])
    elif op[0] == "mkdir":
        R.op_mkdir(top, op[1])
    elif op[0] == "rename":
        R.op_rename(top, op[1], top, op[2])
    elif op[0] == "symlink":
        R.op_symlink(top, op[1], op[2])
    elif op[0] == "setxattr":
        R.op_xattr_set(m.lookup(top, op[1]), op[2], op[3])
    elif op[0] == "remove":
        i = m.lookup(top, op[1])
        if m.nodes[i].kind == "d" and m.nodes[i].entries:
            return
        (R.op_rmdir if m.nodes[i].kind == "d" else R.op_unlink)(top, op[1])


# phase -> (its directory, entries of earlier runs kept)
PRUNE = {"wide": ("wide", 1), "rename": ("ren", 40), "link": ("link", 1), "xattr": ("xattr", 10),
         "longnames": ("long", 1), "sparse": ("sparse", 6), "copy": ("copy", 8),
         "falloc": ("falloc", 6), "setid": ("setid", 8)}

PHASES = {
    "random": lambda R, o, a: ph_random(R, o),
    "deep": lambda R, o, a: ph_deep(R, o, a.depth or o),
    "wide": lambda R, o, a: ph_wide(R, o),
    "rename": lambda R, o, a: ph_rename(R, o),
    "link": lambda R, o, a: ph_link(R, o),
    "xattr": lambda R, o, a: ph_xattr(R, o),
    "longnames": lambda R, o, a: ph_longnames(R, o),
    "sparse": lambda R, o, a: ph_sparse(R, o),
    "copy": lambda R, o, a: ph_copy(R, o),
    "falloc": lambda R, o, a: ph_falloc(R, o),
    "setid": lambda R, o, a: ph_setid(R, o),
    "fill": lambda R, o, a: ph_fill(R, o),
    "meta": lambda R, o, a: ph_fill(R, o, meta=True),
    "fulldata": lambda R, o, a: ph_fill(R, o, drain=False),
    "fullmeta": lambda R, o, a: ph_fill(R, o, meta=True, drain=False),
    "drain": lambda R, o, a: drain_fill(R),
}


# ------------------------------------------------------------- check ----

def check_tree(m, mnt, crashed):
    """Walk s/ as root with openat; compare with the model.  Returns a
    list of messages (empty: equal).  After a crash s/tail may be any of
    the tail states; the one found is recorded in m.tail_from."""
    errs = []
    s = os.path.join(mnt, "s")
    inos = {}                  # st_ino -> model id
    seen = set()
    tail_top = m.lookup(0, "tail")
    pending_tail = None
    # iterative DFS; a directory's fd is closed once its last subdirectory
    # is entered, so a chain costs O(1) descriptors
    root_fd = os.open(s, os.O_RDONLY | os.O_DIRECTORY)
    stack = [(0, root_fd)]
    nodes = 0
    while stack and len(errs) < 20:
        d, fd = stack.pop()
        try:
            if crashed and d == tail_top and m.tail is not None:
                pending_tail = fd_tail_state(fd)
                continue
            names = sorted(os.listdir(fd))
            want = sorted(m.nodes[d].entries)
            if names != want:
                extra = sorted(set(names) - set(want))[:5]
                miss = sorted(set(want) - set(names))[:5]
                errs.append(f"{'/'.join(m.path(d)) or 's'}: names differ: extra {extra}, "
                            f"missing {miss} ({len(names)} vs {len(want)} in the model)")
                continue
            subdirs = []
            for name in names:
                i = m.nodes[d].entries[name]
                n = m.nodes[i]
                st = os.lstat(name, dir_fd=fd)
                nodes += 1
                if st.st_ino in inos and inos[st.st_ino] != i:
                    errs.append(f"{'/'.join(m.path(i))}: inode {st.st_ino} is also "
                                f"{'/'.join(m.path(inos[st.st_ino]))}, the model has two inodes")
                inos[st.st_ino] = i
                if i in seen:
                    continue
                seen.add(i)
                # after a crash s/tail's own link count follows the tail state found
                msg = check_node(m, i, st, name, fd, nlink=not (crashed and i == tail_top))
                if msg:
                    errs.append(msg)
                    continue
                if n.kind == "l":
                    t = os.readlink(name, dir_fd=fd)
                    if t != n.target:
                        errs.append(f"{'/'.join(m.path(i))}: symlink to {t[:60]!r}, the model says {n.target[:60]!r}")
                    continue
                msg = check_xattrs(m, i, name, fd)
                if msg:
                    errs.append(msg)
                if n.kind == "d":
                    subdirs.append((i, name))
                else:
                    ffd = os.open(name, os.O_RDONLY, dir_fd=fd)
                    try:
                        msg = check_content(m, i, ffd)
                    finally:
                        os.close(ffd)
                    if msg:
                        errs.append(msg)
            for k, (i, name) in enumerate(reversed(subdirs)):
                stack.append((i, os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)))
        finally:
            os.close(fd)
    for _, fd in stack:
        os.close(fd)
    if crashed and m.tail is not None and tail_top is not None:
        states = m.tail[1]
        hits = [k for k, st in enumerate(states) if st == pending_tail]
        if not hits:
            errs.append(f"s/tail matches none of the {len(states)} states since the sync point "
                        f"(found {sorted(pending_tail or [])[:6]}, latest {sorted(states[-1] or [])[:6]})")
        else:
            m.tail_from = hits[-1]
    return errs, nodes


def fd_tail_state(fd):
    out = set()
    for name in os.listdir(fd):
        st = os.lstat(name, dir_fd=fd)
        kind = "d" if stat.S_ISDIR(st.st_mode) else "l" if stat.S_ISLNK(st.st_mode) else "f"
        target = os.readlink(name, dir_fd=fd) if kind == "l" else None
        xs = ()
        if kind != "l":
            p = f"/proc/self/fd/{fd}/{name}"
            xs = tuple(sorted((x, os.getxattr(p, x)) for x in os.listxattr(p)
                              if x.startswith("user.")))
        out.add((name, kind, target, xs))
    return frozenset(out)


def check_xattrs(m, i, name, fd):
    n = m.nodes[i]
    p = f"/proc/self/fd/{fd}/{name}"
    try:
        got = sorted(x for x in os.listxattr(p) if x.startswith("user.") and
                     not x.startswith("user.zonefuse."))
    except OSError as e:
        return f"{'/'.join(m.path(i))}: listxattr: {e}"
    if got != sorted(n.xattrs):
        return (f"{'/'.join(m.path(i))}: xattrs {got[:5]}... ({len(got)}), the model has "
                f"{sorted(n.xattrs)[:5]}... ({len(n.xattrs)})")
    for x in got:
        if os.getxattr(p, x) != n.xattrs[x]:
            return f"{'/'.join(m.path(i))}: xattr {x} differs"
    return None


def check_content(m, i, fd):
    n = m.nodes[i]
    if n.uncertain:
        msg = check_uncertain(n, fd)
        return f"{'/'.join(m.path(i))} (a write to it was refused): {msg}" if msg else None
    if n.size <= FULL_READ:
        got = b""
        while len(got) < n.size:
            c = os.pread(fd, n.size - len(got), len(got))
            if not c:
                break
            got += c
        want = n.read(0, n.size)
        if got != want:
            return f"{'/'.join(m.path(i))}: {diff_at(got, want)}"
        return None
    # huge sparse file: every page the model has, probes of the holes, the end
    rng = random.Random(n.size)
    offs = sorted(set([p * BLK for p in n.pages] + [rng.randrange(0, n.size) // BLK * BLK for _ in range(16)] +
                      [(n.size - 1) // BLK * BLK]))
    for off in offs:
        got = os.pread(fd, BLK, off)
        want = n.read(off, BLK)
        if got != want:
            return f"{'/'.join(m.path(i))} (size {n.size}): at {off}: {diff_at(got, want)}"
    return None


def check_space(m, mnt, zone):
    """After a remount nothing is buffered: the stats must add up and the
    valid bytes must not exceed what the model's files can hold."""
    st = stats(mnt)
    if not st:
        return ["no user.zonefuse.stats on the mount root"]
    g = lambda k: int(st.get(k, "0"))
    errs = []
    if os.environ.get("ZF_STRESS_DUMP_STATS"):
        print("\n".join(f"{k}={v}" for k, v in st.items() if k.startswith(
            ("capacity", "used", "free", "valid", "reclaim", "log_", "data_", "meta_", "pending"))))
    bound = m.alloc_bound()
    if g("valid_bytes") > bound + zone:
        errs.append(f"valid_bytes {g('valid_bytes')} > {bound} the files can hold (+ one zone): "
                    f"space leaked")
    # a data zone that holds nothing any file references is reset after
    # the next commit; one that stays is lost to the file system
    for k in range(40):
        if k % 10 == 0:
            # a commit (resets wait for one): a name made and removed
            probe = os.path.join(mnt, "s", ".leakprobe")
            try:
                os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o600))
                os.unlink(probe)
            except OSError:
                pass
            fd = os.open(os.path.join(mnt, "s"), os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)
        lost = []
        for line in os.getxattr(mnt, "user.zonefuse.zones").decode().splitlines():
            z = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if z.get("class") in (None, "meta", "-", "unused") or z.get("leased") == "1":
                continue
            if z.get("valid") == "0" and z.get("files") == "0" and z.get("cond") in ("full", "closed"):
                lost.append(f"zone {z['zone']} ({z['cond']}, wp {z['wp']}, class {z['class']})")
        if not lost:
            break
        time.sleep(0.25)
    if lost:
        errs.append(f"{len(lost)} data zone(s) hold no valid byte and are not reset: "
                    f"{', '.join(lost[:4])} (pending_reset_zones={st.get('pending_reset_zones')}): "
                    f"space leaked")
    return errs


# ------------------------------------------------------------ commands ----

def cmd_init(a):
    m = Model(a.seed)
    s = os.path.join(a.mnt, "s")
    os.mkdir(s, 0o755)
    os.chown(s, NOBODY, NOBODY)
    os.chmod(s, 0o755)
    # s/tail from the start: a later full metadata log would refuse it
    os.mkdir(os.path.join(s, "tail"), 0o755)
    os.chown(os.path.join(s, "tail"), NOBODY, NOBODY)
    os.chmod(os.path.join(s, "tail"), 0o755)
    m.new("d", 0o755, 0, "tail")
    save(m, a.state)
    return 0


def cmd_run(a):
    m = load(a.state)
    m.phase_no += 1
    m.phases[a.phase] += 1
    rng = random.Random(f"{m.seed}:{m.phase_no}:{a.phase}")
    jpath = a.journal
    os.setgroups([])
    R = Runner(m, a.mnt, jpath, a.phase, rng)
    become_nobody()
    os.umask(0)               # the model's modes are the ones asked for
    R.root_fd = os.open(R.s, os.O_RDONLY | os.O_DIRECTORY)
    t0 = time.monotonic()
    ops0 = m.ops
    try:
        # the tail operations the last crash lost, replayed: the model
        # stays the one the seed gives
        if m.tail is not None:
            ops, states = m.tail
            k = m.tail_from if m.tail_from is not None else len(ops)
            top = m.lookup(0, "tail")
            if k < len(ops):
                # the model is at the end of the tail; step it back to state k
                R.log(f"crash kept tail state {k} of {len(ops)}: replaying {len(ops) - k} ops")
                rewind_tail(m, top, ops, states, k)
                for op in ops[k:]:
                    tail_apply(R, top, op)
            m.tail, m.tail_from = None, None
        pr = PRUNE.get(a.phase)
        if pr:
            R.prune(*pr)
        R.prune("tail", 30)
        # a chain of the deep phase lives through one unmount or crash:
        # every tree check after it would walk it again
        deep = m.lookup(0, "deep")
        if a.phase != "deep" and deep is not None:
            for name in sorted(m.nodes[deep].entries):
                rm_chain(R, deep, name)
        if a.tail:
            R.phase_dir("tail")       # before the phase: a full log refuses it later
        PHASES[a.phase](R, a.ops, a)
        if a.tail:
            R.sync_point()
            m.tail = ph_tail(R, a.tail)
            m.tail_from = None
    except Violation as e:
        m.violations += 1
        print(f"VIOLATION in phase {a.phase} (#{m.phase_no}, seed {m.seed}): {e}")
        print("last operations:")
        for line in R.recent:
            print("  " + line)
        R.jf.close()
        os.setresuid(0, 0, 0)
        save(m, a.state)
        return 1
    finally:
        os.close(R.root_fd)
    R.jf.close()
    dt = time.monotonic() - t0
    os.setresuid(0, 0, 0)
    os.setresgid(0, 0, 0)
    save(m, a.state)
    print(f"phase {a.phase}: {m.ops - ops0} ops in {dt:.1f} s "
          f"({(m.ops - ops0) / dt if dt else 0:.0f}/s), {m.ops} in all")
    return 0


def rewind_tail(m, top, ops, states, k):
    """Make the model's s/tail hold tail state k again: the crash kept the
    tree there.  The tail only creates empty files, directories, symlinks
    and xattrs, so a state rebuilds from its description."""
    d = m.nodes[top]
    for name in list(d.entries):
        m.unlink(top, name)
    for name, kind, target, xs in states[k]:
        i = m.new(kind, {"f": 0o644, "d": 0o755, "l": 0o777}[kind], top, name)
        n = m.nodes[i]
        n.target = target
        if target is not None:
            n.size = len(target.encode())
        n.xattrs = dict(xs)
        n.synced()


def cmd_check(a):
    m = load(a.state)
    t0 = time.monotonic()
    errs, nodes = check_tree(m, a.mnt, a.crashed)
    if not errs and a.zone:
        errs += check_space(m, a.mnt, a.zone)
    m.trees += 1
    m.states += nodes
    dt = time.monotonic() - t0
    if errs:
        m.violations += 1
        print(f"VIOLATION: the tree differs from the model after phase #{m.phase_no} "
              f"(seed {m.seed}{', after a crash' if a.crashed else ''}):")
        for e in errs:
            print("  " + e)
        save(m, a.state)
        return 1
    if a.crashed and m.tail is not None:
        print(f"check: crash kept tail state {m.tail_from} of {len(m.tail[0])}")
    save(m, a.state)
    print(f"check: {nodes} names equal the model ({dt:.1f} s)")
    return 0


def cmd_space(a):
    """The statvfs free bytes now (for the delete-all comparison)."""
    sv = os.statvfs(a.mnt)
    print(sv.f_bavail * sv.f_frsize)
    return 0


def cmd_report(a):
    m = load(a.state)
    print(f"operations run: {m.ops}")
    print("per operation: " + ", ".join(f"{k} {v}" for k, v in sorted(m.counts.items())))
    print(f"phases: {m.phase_no} (" + ", ".join(f"{k} {v}" for k, v in sorted(m.phases.items())) + ")")
    print(f"states checked: {m.states} (op results and names; {m.trees} whole trees)")
    for n in m.notes[-6:]:
        print("note: " + n)
    print(f"violations: {m.violations}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=("init", "run", "check", "space", "report"))
    ap.add_argument("state")
    ap.add_argument("mnt", nargs="?")
    ap.add_argument("phase", nargs="?", choices=sorted(PHASES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--depth", type=int, default=0)
    ap.add_argument("--tail", type=int, default=0)
    ap.add_argument("--journal", default="/dev/null")
    ap.add_argument("--crashed", action="store_true")
    ap.add_argument("--zone", type=int, default=0, help="zone size: check space too")
    a = ap.parse_args()
    try:
        import resource
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    return {"init": cmd_init, "run": cmd_run, "check": cmd_check, "space": cmd_space,
            "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
