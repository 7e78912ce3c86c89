#!/bin/bash
# SEEK_DATA / SEEK_HOLE through the mount (FUSE LSEEK):
#   - a sparse file (64 KiB of data at 0, 1 MiB and 40 MiB, size 64 MiB)
#     shows exactly its data runs to os.lseek once closed, both while its
#     last bytes are still in the write buffer and after a remount;
#   - while it is open for writing (the kernel may hold dirty pages the
#     daemon has not seen), every byte below the size is data;
#   - `cp --sparse=always` copies it into a file that stays sparse, and
#     `cp --sparse=never` still copies every byte (cmp);
#   - SEEK_DATA past the last data is ENXIO.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_prog python3 python3
zf_setup --zone-size 4M --zones 64
zf_mount

check() {
	python3 - "$ZF_MNT" "$1" <<'PY' || zf_fail "lseek answers ($1)"
import errno, os, sys
m, phase = sys.argv[1], sys.argv[2]
K, M = 1024, 1024 * 1024
f = os.path.join(m, "sparse")
runs = [(0, 64 * K), (M, M + 64 * K), (40 * M, 40 * M + 64 * K)]
if phase == "write":
    with open(f, "wb") as fh:
        for a, b in runs:
            fh.seek(a)
            fh.write(bytes([a % 251 + 1]) * (b - a))
        fh.truncate(64 * M)
        fd = fh.fileno()
        fh.flush()
        # open for writing: no hole reported
        assert os.lseek(fd, 0, os.SEEK_DATA) == 0
        assert os.lseek(fd, 0, os.SEEK_HOLE) == 64 * M, os.lseek(fd, 0, os.SEEK_HOLE)
fd = os.open(f, os.O_RDONLY)
got, pos = [], 0
while True:
    try:
        d = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError as e:
        assert e.errno == errno.ENXIO, e
        break
    h = os.lseek(fd, d, os.SEEK_HOLE)
    got.append((d, h))
    pos = h
os.close(fd)
print(f"  {phase}: data runs {got}")
sys.exit(0 if got == runs else 1)
PY
}

check write
blocks=$(stat -c %b "$ZF_MNT/sparse")
zf_log "sparse file: $blocks blocks of 512 bytes"
[ "$blocks" -le 1024 ] || zf_fail "the sparse file takes $blocks blocks"
cp --sparse=always "$ZF_MNT/sparse" "$ZF_MNT/copy"
cp --sparse=never "$ZF_MNT/sparse" "$ZF_MNT/full"
cmp "$ZF_MNT/sparse" "$ZF_MNT/copy" || zf_fail "the sparse copy differs"
cmp "$ZF_MNT/sparse" "$ZF_MNT/full" || zf_fail "the full copy differs"
cb=$(stat -c %b "$ZF_MNT/copy")
fb=$(stat -c %b "$ZF_MNT/full")
zf_log "cp --sparse=always: $cb blocks; --sparse=never: $fb blocks"
[ "$cb" -le 1024 ] || zf_fail "cp --sparse=always wrote $cb blocks"
zf_remount
check remount
cmp "$ZF_MNT/sparse" "$ZF_MNT/copy" || zf_fail "the sparse copy differs after the remount"
zf_umount
zf_fsck
zf_pass "SEEK_DATA/SEEK_HOLE show the data runs; cp --sparse keeps holes"
