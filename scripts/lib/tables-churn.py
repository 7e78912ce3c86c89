#!/usr/bin/env python3
"""Table churn with many tables on the mount, as an LSM store's compactions
make it: used by scripts/bench-zones.sh --part files.

Usage: tables-churn.py DIR TABLES ITERATIONS

One thread creates TABLES files DIR/NNNNNNNN.sst of 4 KiB (as one job);
then the main thread, a different one (the daemon tells threads apart by
the requests' thread ids), ITERATIONS times creates a new table of 4 KiB
and closes it, and unlinks the one it created LAG iterations before: each
iteration is a compaction job of one input and one output, the most jobs
per file there can be.  The TABLES stay, so only their number differs
between runs: every churned table lives LAG iterations, less than the
daemon's write-behind delay, whatever TABLES is, and the TABLES are
synced and written out before the churn starts.  Prints "ITERATIONS
SECONDS" for the churn alone.
"""
LAG = 500
SETTLE_S = 2.0  # more than the write-behind delay (1 s)
import os
import sys
import threading
import time

BLOCK = b"t" * 4096


def make(path):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, BLOCK)
    finally:
        os.close(fd)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().split("\n\n")[1])
    top, tables, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    name = lambda i: os.path.join(top, f"{i:08d}.sst")
    setup = threading.Thread(target=lambda: [make(name(i)) for i in range(tables)])
    setup.start()
    setup.join()
    # The tables' data goes to the device now, not during the churn.
    os.sync()
    time.sleep(SETTLE_S)
    t0 = time.monotonic()
    for k in range(iters):
        make(name(tables + k))
        if k >= LAG:
            os.unlink(name(tables + k - LAG))
    print(iters, f"{time.monotonic() - t0:.3f}")


if __name__ == "__main__":
    main()
