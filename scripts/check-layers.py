#!/usr/bin/env python3
"""Fail when a source file includes a header of a layer it may not use.

The layers, lowest first (docs/design.md): common, zoned, lsm, zonealloc
(with the pure GC policy), mlog, fs (with the collector), fusefs, tools;
progs (tools/zf_tool.h) is shared by the programs.  Each may include its own
headers and those of the layers listed for it below; tests may include
anything.
Usage: check-layers.py SOURCE_ROOT [STAMP]  (writes STAMP on success, so
meson can run it as a build step).
"""
import os
import re
import sys

# layer -> layers whose headers it may include (itself implied)
ALLOWED = {
    "common": set(),
    "zoned": {"common"},
    "lsm": {"common"},
    "zonealloc": {"common", "zoned"},
    "mlog": {"common", "zoned"},
    "fs": {"common", "zoned", "lsm", "zonealloc", "mlog", "gc"},
    "gc": {"common", "zoned", "lsm", "zonealloc", "mlog", "fs"},
    "fusefs": {"common", "zoned", "fs-public", "progs"},
    "tools": {"common", "zoned", "lsm", "zonealloc", "mlog", "fs-public", "progs"},
    "progs": {"common"},
}
# fs and mlog headers a layer above fs may use; the rest are the core's own
FS_PUBLIC = {"fs/fs.h", "fs/fs_stats.h", "mlog/mlog.h"}
DIRS = ["common", "zoned", "lsm", "zonealloc", "mlog", "fs", "gc", "fusefs", "tools"]


def layer_of(path):
    top = path.split("/", 1)[0]
    base = os.path.basename(path)
    if top == "gc" and base.startswith("gc_policy"):
        return "zonealloc"
    if path == "tools/zf_tool.h":
        return "progs"
    return top


def main():
    root = sys.argv[1]
    bad = []
    for d in DIRS:
        base = os.path.join(root, d)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            if not name.endswith((".c", ".h")):
                continue
            rel = f"{d}/{name}"
            me = layer_of(rel)
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if "/" not in inc:
                        inc = f"{d}/{inc}"
                    them = layer_of(inc)
                    if them == me:
                        continue
                    ok = ALLOWED[me]
                    if them in ok or (them in ("fs", "mlog") and "fs-public" in ok
                                      and inc in FS_PUBLIC):
                        continue
                    bad.append(f"{rel}:{n}: layer '{me}' may not include \"{inc}\" ('{them}')")
    if bad:
        print("check-layers: upward or sideways includes:", file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        return 1
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w", encoding="utf-8") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
