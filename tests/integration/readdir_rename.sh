#!/bin/bash
# readdir while entries are renamed: a 5,000-file directory is listed
# (os.listdir: getdents64 in 32 KiB pages, so many READDIRs, each resumed
# at the offset of the last entry) while another process renames every
# entry away and back (f<i> -> r<i> -> f<i>), over and over.  Each file
# must come at most once per listing, under either name (POSIX lets a
# renamed entry come once or not at all), as on ext4 and tmpfs.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_prog python3 python3
zf_setup --zone-size 4M --zones 32
zf_mount

python3 - "$ZF_MNT/d" <<'PY' || zf_fail "a listing returned a file twice"
import os, sys, time
d, N = sys.argv[1], 5000
os.mkdir(d)
for i in range(N):
    open(f"{d}/f{i}", "w").close()
pid = os.fork()
if pid == 0:                    # the renamer, until killed
    try:
        while True:
            for i in range(N):
                os.rename(f"{d}/f{i}", f"{d}/r{i}")
                os.rename(f"{d}/r{i}", f"{d}/f{i}")
    finally:
        os._exit(0)
worst, passes, t0 = 0, 0, time.time()
try:
    while time.time() - t0 < 8 or passes < 20:
        names = os.listdir(d)
        files = [int(n[1:]) for n in names]
        worst = max(worst, len(files) - len(set(files)))
        passes += 1
finally:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(f"{passes} listings, largest number of files returned twice in one: {worst}")
sys.exit(1 if worst else 0)
PY
[ "$(find "$ZF_MNT/d" -type f | wc -l)" -eq 5000 ] || zf_fail "files lost"
zf_umount
zf_fsck
zf_pass "no file listed twice while renamed away and back"
