#!/bin/bash
# The data path without copies, through the kernel: a sequential write of
# whole 1 MiB blocks is buffered as donated chunks (zero_copy_write_bytes
# counts all of it), a cold sequential read is spliced from the emulated
# device's file (zero_copy_read_bytes), and the bytes read back are the
# bytes written -- also after a remount and with libfuse's own loop
# (-o fuse_loop=mt), which copies and counts nothing.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
[[ "${ZF_MOUNT_EXTRA:-}" != *fuse_uring* ]] ||
	zf_skip "over io_uring a WRITE's payload is the ring entry's: nothing is donated"
zf_require_prog cmp diffutils
zf_require_prog python3 python3
zf_setup
zf_mount
M=$ZF_MNT
SRC=$ZF_WORK/src
head -c $((48 << 20)) /dev/urandom >"$SRC"
dd if="$SRC" of="$M/seq" bs=1M conv=fsync status=none
zc_w=$(zf_stat zero_copy_write_bytes)
user=$(zf_stat user_bytes_written)
[ "$user" -ge $((48 << 20)) ] || zf_fail "user_bytes_written=$user after 48 MiB"
# the kernel's writeback sends whole, aligned 1 MiB WRITEs; allow a few
# that it split differently
[ "$zc_w" -ge $((40 << 20)) ] || zf_fail "zero_copy_write_bytes=$zc_w of 48 MiB written"
zf_log "48 MiB written, $zc_w bytes buffered without a copy"
# drop the kernel's cached pages of the file, read it cold
python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$M/seq"
zc_r0=$(zf_stat zero_copy_read_bytes)
cmp "$SRC" "$M/seq" || zf_fail "read back differs"
zc_r=$(($(zf_stat zero_copy_read_bytes) - zc_r0))
[ "$zc_r" -ge $((24 << 20)) ] || zf_fail "zero_copy_read_bytes grew by $zc_r reading 48 MiB cold"
zf_log "cold read: $zc_r bytes spliced, content equal"
# partial and unaligned writes over donated chunks, then the content again
python3 - "$SRC" "$M/seq" <<'PY' || zf_fail "unaligned overwrites"
import os, sys
src, dst = sys.argv[1], sys.argv[2]
with open(src, "r+b") as a, open(dst, "r+b") as b:
    for off, n in [(5, 100), (1 << 20, 4096), ((3 << 20) - 7, 300000), (47 << 20, 1 << 20)]:
        data = os.urandom(n)
        for f in (a, b):
            f.seek(off)
            f.write(data)
    b.flush()
    os.fsync(b.fileno())
PY
cmp "$SRC" "$M/seq" || zf_fail "content differs after overwrites"
zf_remount
cmp "$SRC" "$M/seq" || zf_fail "content differs after remount"
zf_umount
# libfuse's loop copies: nothing counted, the same bytes
zf_mount -o fuse_loop=mt
dd if="$SRC" of="$M/seq2" bs=1M conv=fsync status=none
[ "$(zf_stat zero_copy_write_bytes)" = 0 ] || zf_fail "fuse_loop=mt counted zero-copy writes"
cmp "$SRC" "$M/seq2" || zf_fail "fuse_loop=mt: content differs"
cmp "$SRC" "$M/seq" || zf_fail "fuse_loop=mt: the first file differs"
zf_pass
