#!/usr/bin/env python3
"""The layer check (scripts/check-layers.py) passes on the tree and fails
on each kind of upward use planted in a copy of it: an include of a
higher layer's header, a one-line and a multi-line prototype of a higher
layer's function, the collector including the fs's private header.
Usage: check_layers_test.py SOURCE_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

DIRS = ["common", "zoned", "lsm", "mlog", "zonealloc", "fs", "gc", "fusefs", "tools"]


def run(script, root):
    p = subprocess.run([sys.executable, script, root], capture_output=True, text=True)
    return p.returncode, p.stderr


def main():
    src = sys.argv[1]
    script = os.path.join(src, "scripts", "check-layers.py")
    failures = 0
    rc, err = run(script, src)
    if rc != 0:
        print("the tree itself fails:\n" + err)
        return 1
    plants = [
        ("zonealloc/zalloc_priv.h", '#include "gc/gc.h"\n', "may not include \"gc/gc.h\""),
        ("fs/fs_internal.h", "int gc_attach(struct fs *fs);\n", "declares gc_attach()"),
        ("zonealloc/zalloc.h", "void\nfs_move_tick(struct fs *fs,\n\tint unused);\n",
         "declares fs_move_tick()"),
        ("gc/gc.c", '#include "fs/fs_internal.h"\n', "may not include \"fs/fs_internal.h\""),
        ("tools/mkfs.c", '#include "fs/fs_move.h"\n', "may not include \"fs/fs_move.h\""),
    ]
    for rel, text, want in plants:
        with tempfile.TemporaryDirectory(prefix="zf-layers-") as tmp:
            for d in DIRS + ["scripts"]:
                if os.path.isdir(os.path.join(src, d)):
                    shutil.copytree(os.path.join(src, d), os.path.join(tmp, d))
            with open(os.path.join(tmp, rel), "a", encoding="utf-8") as f:
                f.write(text)
            rc, err = run(script, tmp)
            if rc == 0 or want not in err:
                print(f"{rel} + {text!r}: rc {rc}, expected '{want}' in:\n{err}")
                failures += 1
    print(f"check-layers: {len(plants) - failures} of {len(plants)} planted uses caught")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
