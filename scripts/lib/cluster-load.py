#!/usr/bin/env python3
"""Load and checks for scripts/cluster.sh: files through a Gluster client
mount, keys through etcd's v3 JSON gateway (HTTP on loopback).  Standard
library only, so the same script runs wherever etcd-server does.

  files-write DIR ACK [--stop FILE] [--max N] [--seed S]
      Writes DIR/fNNNNNN (1 B to 256 KiB of seeded random bytes each), each
      fsync'ed and closed, then appends "SHA256  NAME" to ACK (outside the
      file system under test) -- an ACK line is a file the fs acknowledged.
      Stops at --max files or once FILE exists; at most --rate files a
      second (default 10), so that what a fault leaves to heal stays small.  A failed file is retried
      under the next number; failures are counted, not fatal (a brick or
      the client may fail a call during a fault).
  files-verify ACK ROOT...
      Every ACK entry must read back with its checksum under each ROOT (the
      client mount and each brick).  Prints "N files ok under R roots".
  files-agree DIR...
      The regular files under each DIR (the same volume directory on each
      brick) must be the same set with the same checksums.
  etcd-put ACK --endpoints URL,... [--stop FILE] [--max N] [--prefix P]
      Sequential puts of P/NNNNNNN, each value derived from its key; a put
      that fails or times out moves to the next endpoint and is retried
      under the next key.  Appends "KEY REVISION" to ACK after each 200.
  etcd-verify ACK --endpoints URL,...
      Through each endpoint, a linearizable range read of the prefix must
      return every ACK key with its value.
  etcd-status --endpoints URL,...
      One JSON line per endpoint: leader id, raft index, or the error.
  etcd-bench --endpoints URL,... [--clients C] [--seconds T] [--value-size B]
      C threads, each with its own keep-alive connection to one endpoint
      (round-robin), put for T seconds, then get (linearizable) for T
      seconds.  Prints one line per phase: ops/s, p50 and p99 latency (ms).
  wal-fsync URL...
      Sums etcd_disk_wal_fsync_duration_seconds over the members' metrics
      endpoints; prints count, mean and the p50/p99 bucket bounds (ms).
"""
import argparse
import base64
import hashlib
import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse


def file_bytes(seed, i):
    r = random.Random(seed * 1000003 + i)
    return r.randbytes(r.randint(0, 63) * 4096 + r.randint(1, 4096))


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def ack_loop(a, what, attempt, pause):
    """Calls attempt(i) for i = 0, 1, ... until a.max acknowledgements or
    a.stop exists; a call that returns appends its line to a.ack, one that
    raises OSError or ValueError is counted, reported (the first five) and
    followed by a pause of that many seconds."""
    done = fails = i = 0
    with open(a.ack, "a") as log:
        while (a.max is None or done < a.max) and not (a.stop and os.path.exists(a.stop)):
            i += 1
            try:
                line = attempt(i - 1)
            except (OSError, ValueError) as e:
                fails += 1
                if fails <= 5:
                    print(f"{what}: #{i - 1}: {e}", file=sys.stderr)
                time.sleep(pause)
                continue
            log.write(line + "\n")
            log.flush()
            done += 1
    print(f"{what}: {done} acknowledged, {fails} failed calls")


def files_write(a):
    os.makedirs(a.dir, exist_ok=True)
    t0 = time.monotonic()

    def one(i):
        ahead = i / a.rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
        data = file_bytes(a.seed, i)
        name = f"f{i:06d}"
        fd = os.open(os.path.join(a.dir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)  # its error, too, means not acknowledged
        return f"{hashlib.sha256(data).hexdigest()}  {name}"

    ack_loop(a, "files-write", one, 0.2)


def read_ack(path):
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


class Tally:
    """The mismatches of one check: the first ten are printed, and finish()
    ends the program with status 1 if there was any."""

    def __init__(self, what):
        self.what, self.n = what, 0

    def miss(self, msg):
        self.n += 1
        if self.n <= 10:
            print(f"{self.what}: {msg}", file=sys.stderr)

    def finish(self, bad, ok):
        if self.n:
            print(f"{self.what}: {self.n} {bad}", file=sys.stderr)
            sys.exit(1)
        print(f"{self.what}: {ok}")


def files_verify(a):
    ack = read_ack(a.ack)
    t = Tally("files-verify")
    for root in a.roots:
        for digest, name in ack:
            p = os.path.join(root, name)
            try:
                got = sha(p)
            except OSError as e:
                got = e.strerror
            if got != digest:
                t.miss(f"{p}: {got}, acknowledged {digest}")
    t.finish("acknowledged files differ or are missing",
             f"{len(ack)} acknowledged files ok under {len(a.roots)} roots")


def tree(d):
    out = {}
    for dirpath, dirnames, filenames in os.walk(d):
        dirnames[:] = [x for x in dirnames if x != ".glusterfs"]
        for fn in filenames:
            p = os.path.join(dirpath, fn)
            out[os.path.relpath(p, d)] = sha(p)
    return out


def files_agree(a):
    trees = [tree(d) for d in a.dirs]
    t = Tally("files-agree")
    for d, other in zip(a.dirs[1:], trees[1:]):
        for name in sorted(set(other) | set(trees[0])):
            if other.get(name) != trees[0].get(name):
                t.miss(f"{name}: {a.dirs[0]} {trees[0].get(name, 'missing')}"
                       f" vs {d} {other.get(name, 'missing')}")
    t.finish("files differ between bricks",
             f"{len(trees[0])} files, the same checksums on {len(a.dirs)} bricks")


class Gw:
    """One keep-alive connection to an etcd member's v3 JSON gateway."""

    def __init__(self, url, timeout=5.0):
        u = urllib.parse.urlsplit(url)
        self.url = url
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)

    def call(self, path, body):
        try:
            self.conn.request("POST", "/v3/" + path, json.dumps(body),
                              {"Content-Type": "application/json"})
            r = self.conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            raise
        if r.status != 200:
            raise OSError(f"{self.url}: HTTP {r.status}: {data[:200]!r}")
        return json.loads(data)


def b64(s):
    return base64.b64encode(s.encode()).decode()


def value_of(key):
    return hashlib.sha256(key.encode()).hexdigest()


def etcd_put(a):
    eps = a.endpoints.split(",")
    gws = [Gw(u, timeout=2.0) for u in eps]
    cur = [0]  # the endpoint in use; the next one after a failure

    def one(i):
        key = f"{a.prefix}/{i:07d}"
        try:
            r = gws[cur[0]].call("kv/put", {"key": b64(key), "value": b64(value_of(key))})
        except (OSError, ValueError):
            cur[0] = (cur[0] + 1) % len(gws)
            raise
        return f"{key} {r['header']['revision']}"

    ack_loop(a, "etcd-put", one, 0.1)


def range_all(gw, prefix):
    start = prefix + "/"
    end = prefix + "0"  # '/' + 1
    out = {}
    while True:
        r = gw.call("kv/range", {"key": b64(start), "range_end": b64(end), "limit": 5000})
        kvs = r.get("kvs", [])
        for kv in kvs:
            out[base64.b64decode(kv["key"]).decode()] = base64.b64decode(kv.get("value", "")).decode()
        if not r.get("more") or not kvs:
            return out
        start = base64.b64decode(kvs[-1]["key"]).decode() + "\0"


def etcd_verify(a):
    with open(a.ack) as f:
        keys = [line.split()[0] for line in f if line.strip()]
    prefixes = sorted({k.rsplit("/", 1)[0] for k in keys})
    urls = a.endpoints.split(",")
    t = Tally("etcd-verify")
    for url in urls:
        gw = Gw(url, timeout=30)
        got = {}
        for p in prefixes:
            got.update(range_all(gw, p))
        for k in keys:
            if got.get(k) != value_of(k):
                t.miss(f"{url}: {k} = {got.get(k)!r}")
    t.finish("acknowledged puts missing or wrong",
             f"{len(keys)} acknowledged puts read back (linearizable) through {len(urls)} members")


def etcd_status(a):
    for url in a.endpoints.split(","):
        try:
            r = Gw(url, timeout=3).call("maintenance/status", {})
            print(json.dumps({"url": url, "leader": r.get("leader", "0"),
                              "member": r["header"].get("member_id"),
                              "raft_index": int(r.get("raftIndex", 0))}))
        except (OSError, ValueError) as e:
            print(json.dumps({"url": url, "error": str(e)}))


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def etcd_bench(a):
    eps = a.endpoints.split(",")
    val = b64("x" * a.value_size)
    written = [0] * a.clients  # keys bench/N/0.. each put worker wrote
    for phase in ("put", "get"):
        lat = [[] for _ in range(a.clients)]
        errs = [0] * a.clients
        t_end = time.monotonic() + a.seconds

        def worker(n):
            gw = Gw(eps[n % len(eps)])
            r = random.Random(n)
            while time.monotonic() < t_end:
                if phase == "put":
                    path = "kv/put"
                    body = {"key": b64(f"bench/{n}/{written[n]}"), "value": val}
                else:
                    path = "kv/range"
                    body = {"key": b64(f"bench/{n}/{r.randrange(max(1, written[n]))}")}
                t0 = time.monotonic()
                try:
                    gw.call(path, body)
                except (OSError, ValueError):
                    errs[n] += 1
                    continue
                lat[n].append(time.monotonic() - t0)
                if phase == "put":
                    written[n] += 1

        ths = [threading.Thread(target=worker, args=(n,)) for n in range(a.clients)]
        t0 = time.monotonic()
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        el = time.monotonic() - t0
        all_lat = [x for lst in lat for x in lst]
        print(f"{phase} ops={len(all_lat)} ops_s={len(all_lat) / el:.0f} "
              f"p50_ms={pct(all_lat, 50) * 1e3:.2f} p99_ms={pct(all_lat, 99) * 1e3:.2f} "
              f"errors={sum(errs)}")


def wal_fsync(a):
    buckets = {}
    count = total = 0.0
    for url in a.urls:
        u = urllib.parse.urlsplit(url)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
        c.request("GET", "/metrics")
        for line in c.getresponse().read().decode().splitlines():
            if not line.startswith("etcd_disk_wal_fsync_duration_seconds"):
                continue
            name, v = line.rsplit(" ", 1)
            if name.endswith("_sum"):
                total += float(v)
            elif name.endswith("_count"):
                count += float(v)
            elif 'le="' in name:
                le = name.split('le="')[1].split('"')[0]
                buckets[le] = buckets.get(le, 0) + float(v)
    bounds = sorted((float(k), v) for k, v in buckets.items())

    def q(p):
        for le, v in bounds:
            if v >= p * count:
                return le * 1e3
        return float("nan")

    mean = total / count * 1e3 if count else float("nan")
    print(f"wal_fsync count={count:.0f} mean_ms={mean:.2f} p50_le_ms={q(0.5):g} p99_le_ms={q(0.99):g}")


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="cmd", required=True)
    p = sp.add_parser("files-write")
    p.add_argument("dir")
    p.add_argument("ack")
    p.add_argument("--stop")
    p.add_argument("--max", type=int)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rate", type=float, default=10)
    p = sp.add_parser("files-verify")
    p.add_argument("ack")
    p.add_argument("roots", nargs="+")
    p = sp.add_parser("files-agree")
    p.add_argument("dirs", nargs="+")
    p = sp.add_parser("etcd-put")
    p.add_argument("ack")
    p.add_argument("--endpoints", required=True)
    p.add_argument("--stop")
    p.add_argument("--max", type=int)
    p.add_argument("--prefix", default="ack")
    p = sp.add_parser("etcd-verify")
    p.add_argument("ack")
    p.add_argument("--endpoints", required=True)
    p = sp.add_parser("etcd-status")
    p.add_argument("--endpoints", required=True)
    p = sp.add_parser("etcd-bench")
    p.add_argument("--endpoints", required=True)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--value-size", type=int, default=256)
    p = sp.add_parser("wal-fsync")
    p.add_argument("urls", nargs="+")
    a = ap.parse_args()
    {"files-write": files_write, "files-verify": files_verify, "files-agree": files_agree,
     "etcd-put": etcd_put, "etcd-verify": etcd_verify, "etcd-status": etcd_status,
     "etcd-bench": etcd_bench, "wal-fsync": wal_fsync}[a.cmd](a)


if __name__ == "__main__":
    main()
