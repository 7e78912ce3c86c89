#!/usr/bin/env python3
"""Table churn with many tables on the mount, as an LSM store's compactions
make it: used by scripts/bench-zones.sh --part files.

Usage: tables-churn.py DIR TABLES ITERATIONS

A feeder thread creates TABLES files DIR/tNNNNNNNN.sst of 4 KiB, which
then stay; they are synced and given time for the daemon's write-behind
before the clock starts.  Then, ITERATIONS times: the feeder creates a
table (an input), the main thread creates one (an output) and unlinks
the input and the output made LAG iterations before.  For the daemon's
level inference each iteration is a compaction job of the main thread
with one input and one output: the inputs belong to the feeder's job, so
the main thread's job is the one whose input died (an UNLINK carries no
thread id), the most jobs per file there can be.  Every churned table lives LAG iterations, less than the
write-behind delay, whatever TABLES is: only the number of tables differs
between runs.  Prints "ITERATIONS SECONDS" for the churn alone.
"""
import os
import queue
import sys
import threading
import time

BLOCK = b"t" * 4096
LAG = 500
SETTLE_S = 2.0  # more than the write-behind delay (1 s)


def make(path):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, BLOCK)
    finally:
        os.close(fd)


def feeder(top, tables, todo, done):
    for i in range(tables):
        make(os.path.join(top, f"t{i:08d}.sst"))
    done.put(None)
    for path in iter(todo.get, None):
        make(path)
        done.put(path)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().split("\n\n")[1])
    top, tables, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    todo, done = queue.Queue(), queue.Queue()
    feed = threading.Thread(target=feeder, args=(top, tables, todo, done))
    feed.start()
    done.get()
    os.sync()
    time.sleep(SETTLE_S)
    inp = lambda k: os.path.join(top, f"i{k:08d}.sst")
    out = lambda k: os.path.join(top, f"o{k:08d}.sst")
    t0 = time.monotonic()
    for k in range(iters):
        todo.put(inp(k))
        done.get()
        make(out(k))
        if k >= LAG:
            os.unlink(inp(k - LAG))
            os.unlink(out(k - LAG))
    elapsed = time.monotonic() - t0
    todo.put(None)
    feed.join()
    print(iters, f"{elapsed:.3f}")


if __name__ == "__main__":
    main()
