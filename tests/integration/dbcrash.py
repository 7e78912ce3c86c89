#!/usr/bin/env python3
"""Acknowledged-write checker for LevelDB and RocksDB on zonefuse, through
their C APIs (ctypes, the distributions' unmodified libleveldb/librocksdb).

  dbcrash.py run    --lib leveldb|rocksdb DB ACKLOG --seed S [--max-ops N]
  dbcrash.py verify --lib leveldb|rocksdb DB ACKLOG

`run` opens (or creates) DB with small memtables and table files, so it
flushes and compacts, and puts random keys with sync=true.  Before each put
it appends "B key version" to ACKLOG, after the put returned OK
"A key version".  ACKLOG lives OUTSIDE the file system under test, so after
a crash it says exactly which writes the database acknowledged.  It stops
at the first error (the daemon was killed).

`verify` (after the crash and a remount) opens DB with paranoid checks and
checks: the database opens; every key whose put was acknowledged holds that
version or a later one that was begun (in flight); every value present is
intact (a value is a pure function of key and version); no key holds a
version that was never written.  It then appends "V key version" lines, the
state it saw, as the new baseline for the next round on the same database.
Exit: 0 ok, 1 violation or database error, 2 usage.
"""
import argparse
import ctypes
import ctypes.util
import os
import random
import sys

KEYS = 3000


def value(key, ver):
    n = 100 + (key * 7919 + ver * 104729) % 3000
    head = f"{key}:{ver}:".encode()
    return head + random.Random(key * 1000003 + ver).randbytes(n)


class DB:
    def __init__(self, lib, path, create):
        self.p = lib
        name = {"leveldb": "leveldb", "rocksdb": "rocksdb"}[lib]
        so = {"leveldb": "libleveldb.so.1d", "rocksdb": "librocksdb.so.7.8"}[lib]
        try:
            L = ctypes.CDLL(so)
        except OSError:
            L = ctypes.CDLL(ctypes.util.find_library(name))
        self.L = L
        vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
        errp = ctypes.POINTER(ctypes.c_char_p)
        f = lambda n: getattr(L, f"{name}_{n}")
        for n, res, args in [
            ("options_create", vp, []),
            ("options_set_create_if_missing", None, [vp, ctypes.c_ubyte]),
            ("options_set_paranoid_checks", None, [vp, ctypes.c_ubyte]),
            ("options_set_write_buffer_size", None, [vp, sz]),
            ("open", vp, [vp, cp, errp]),
            ("close", None, [vp]),
            ("writeoptions_create", vp, []),
            ("writeoptions_set_sync", None, [vp, ctypes.c_ubyte]),
            ("readoptions_create", vp, []),
            ("readoptions_set_verify_checksums", None, [vp, ctypes.c_ubyte]),
            ("put", None, [vp, vp, cp, sz, cp, sz, errp]),
            ("get", ctypes.POINTER(ctypes.c_char), [vp, vp, cp, sz, ctypes.POINTER(sz), errp]),
            ("free", None, [vp]),
            ("create_iterator", vp, [vp, vp]),
            ("iter_seek_to_first", None, [vp]),
            ("iter_valid", ctypes.c_ubyte, [vp]),
            ("iter_next", None, [vp]),
            ("iter_key", ctypes.POINTER(ctypes.c_char), [vp, ctypes.POINTER(sz)]),
            ("iter_value", ctypes.POINTER(ctypes.c_char), [vp, ctypes.POINTER(sz)]),
            ("iter_get_error", None, [vp, errp]),
            ("iter_destroy", None, [vp]),
        ]:
            fn = f(n)
            fn.restype = res
            fn.argtypes = args
            setattr(self, "c_" + n, fn)
        if lib == "leveldb":
            L.leveldb_options_set_max_file_size.argtypes = [vp, sz]
        o = self.c_options_create()
        self.c_options_set_create_if_missing(o, 1 if create else 0)
        self.c_options_set_paranoid_checks(o, 1)
        self.c_options_set_write_buffer_size(o, 256 << 10)
        if lib == "leveldb":
            L.leveldb_options_set_max_file_size(o, 512 << 10)
        else:
            L.rocksdb_options_set_target_file_size_base.argtypes = [vp, ctypes.c_uint64]
            L.rocksdb_options_set_target_file_size_base(o, 512 << 10)
            L.rocksdb_options_set_max_bytes_for_level_base.argtypes = [vp, ctypes.c_uint64]
            L.rocksdb_options_set_max_bytes_for_level_base(o, 2 << 20)
        err = ctypes.c_char_p()
        self.db = self.c_open(o, path.encode(), ctypes.byref(err))
        self.check(err, "open")
        self.wo = self.c_writeoptions_create()
        self.c_writeoptions_set_sync(self.wo, 1)
        self.ro = self.c_readoptions_create()
        self.c_readoptions_set_verify_checksums(self.ro, 1)

    def check(self, err, what):
        if err.value:
            msg = err.value.decode(errors="replace")
            raise RuntimeError(f"{self.p} {what}: {msg}")

    def put(self, k, v):
        err = ctypes.c_char_p()
        self.c_put(self.db, self.wo, k, len(k), v, len(v), ctypes.byref(err))
        self.check(err, "put")

    def items(self):
        it = self.c_create_iterator(self.db, self.ro)
        self.c_iter_seek_to_first(it)
        n = ctypes.c_size_t()
        while self.c_iter_valid(it):
            kp = self.c_iter_key(it, ctypes.byref(n))
            k = ctypes.string_at(kp, n.value)
            vp = self.c_iter_value(it, ctypes.byref(n))
            v = ctypes.string_at(vp, n.value)
            yield k, v
            self.c_iter_next(it)
        err = ctypes.c_char_p()
        self.c_iter_get_error(it, ctypes.byref(err))
        self.c_iter_destroy(it)
        self.check(err, "iterator")

    def close(self):
        self.c_close(self.db)


def key_bytes(k):
    return b"key%08d" % k


def run(o):
    rng = random.Random(o.seed)
    ack = open(o.acklog, "a", buffering=1)
    base = read_log(o.acklog)[3]
    ver = base + 1
    try:
        db = DB(o.lib, o.db, True)
    except RuntimeError as e:
        print(f"dbcrash run: {e}")
        return 0
    ops = 0
    while o.max_ops == 0 or ops < o.max_ops:
        k = rng.randrange(KEYS)
        ack.write(f"B {k} {ver}\n")
        try:
            db.put(key_bytes(k), value(k, ver))
        except RuntimeError as e:
            # The file system is gone (the crash): leave at once, without
            # the library's teardown.  RocksDB's background threads go on
            # retrying on a dead mount, and its debug build asserts on an
            # errno it does not expect there (FileExists: ENOTCONN).
            print(f"dbcrash run: stopped after {ops} acknowledged puts: {e}", flush=True)
            ack.close()
            os._exit(0)
        ack.write(f"A {k} {ver}\n")
        ver += 1
        ops += 1
    db.close()
    print(f"dbcrash run: {ops} puts done")
    return 0


def read_log(path):
    """Returns (acked {key: ver}, begun {key: set(ver)}, inflight (key, ver)|None, max ver)."""
    acked, begun, inflight, top = {}, {}, None, 0
    try:
        f = open(path)
    except FileNotFoundError:
        return acked, begun, inflight, top
    with f:
        for line in f:
            w = line.split()
            if len(w) != 3:
                continue
            t, k, v = w[0], int(w[1]), int(w[2])
            top = max(top, v)
            if t == "B":
                begun.setdefault(k, set()).add(v)
                inflight = (k, v)
            elif t == "A":
                acked[k] = v
                inflight = None
            elif t == "V":       # verified baseline after a previous crash
                if v:
                    acked[k] = v
                    begun.setdefault(k, set()).add(v)
                else:
                    acked.pop(k, None)
                inflight = None
    return acked, begun, inflight, top


def verify(o):
    acked, begun, inflight, _ = read_log(o.acklog)
    try:
        db = DB(o.lib, o.db, False)
    except RuntimeError as e:
        print(f"VIOLATION: the database does not open after the crash: {e}")
        return 1
    bad = 0
    seen = {}
    try:
        for k, v in db.items():
            if not k.startswith(b"key") or len(k) != 11:
                print(f"VIOLATION: unexpected key {k!r}")
                bad += 1
                continue
            key = int(k[3:])
            try:
                ver = int(v.split(b":")[1])
            except (IndexError, ValueError):
                ver = -1
            if ver not in begun.get(key, ()) or v != value(key, ver):
                print(f"VIOLATION: key {key}: value is not one that was written "
                      f"(version {ver}, {len(v)} bytes)")
                bad += 1
                continue
            seen[key] = ver
    except RuntimeError as e:
        print(f"VIOLATION: {e}")
        db.close()
        return 1
    for key, ver in sorted(acked.items()):
        got = seen.get(key)
        ok_vers = {ver} | {v for v in begun.get(key, ()) if v > ver}
        if got is None:
            print(f"VIOLATION: key {key}: acknowledged version {ver} is missing")
            bad += 1
        elif got not in ok_vers:
            print(f"VIOLATION: key {key}: version {got}, acknowledged {ver}")
            bad += 1
        if bad > 20:
            break
    db.close()
    if bad:
        return 1
    with open(o.acklog, "a") as f:
        for key in sorted(set(seen) | set(acked)):
            f.write(f"V {key} {seen.get(key, 0)}\n")
    print(f"dbcrash verify ({o.lib}): {len(seen)} keys intact, {len(acked)} acknowledged "
          f"keys present{', in-flight put ' + str(inflight) if inflight else ''}: ok")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=("run", "verify"))
    ap.add_argument("--lib", choices=("leveldb", "rocksdb"), required=True)
    ap.add_argument("db")
    ap.add_argument("acklog")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-ops", type=int, default=0)
    o = ap.parse_args()
    return run(o) if o.cmd == "run" else verify(o)


if __name__ == "__main__":
    sys.exit(main())
