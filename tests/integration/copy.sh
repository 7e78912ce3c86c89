#!/bin/bash
# Copies through the kernel: coreutils cp (FICLONE fails, then
# copy_file_range) of a big file and of a directory of odd-sized files shares
# extents -- no data byte written, df unchanged, the shared bytes in the
# stats -- and the copies read back the same, also after the source is
# deleted and the file system remounted; fsck is clean.  A copy by read and
# write (dd) writes the bytes as before.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_prog cmp diffutils
zf_setup
zf_mount
M=$ZF_MNT
head -c $((24 << 20)) /dev/urandom >"$M/big"
mkdir "$M/dir"
for i in 1 2 3 4 5 6 7 8; do head -c $((i * 100003)) /dev/urandom >"$M/dir/f$i"; done
sync "$M/big" "$M"/dir/*
used0=$(df -B1 --output=used "$M" | tail -n 1)
data0=$(zf_stat data_bytes_written)
cp "$M/big" "$M/big.copy"
cp -r "$M/dir" "$M/dir.copy"
sync "$M/big.copy" "$M"/dir.copy/*
data1=$(zf_stat data_bytes_written)
used1=$(df -B1 --output=used "$M" | tail -n 1)
shared=$(zf_stat shared_bytes)
[ "$data1" = "$data0" ] || zf_fail "cp wrote $((data1 - data0)) data bytes (expected 0)"
[ "$used1" = "$used0" ] || zf_fail "df used grew from $used0 to $used1 (shared bytes count once)"
[ "$shared" -ge $((24 << 20)) ] || zf_fail "shared_bytes=$shared after copying 24 MiB"
fshared=$(getfattr --only-values -n user.zonefuse.file "$M/big.copy" | sed -n 's/^shared_bytes=//p')
[ "$fshared" = $((24 << 20)) ] || zf_fail "big.copy: shared_bytes=$fshared"
cmp "$M/big" "$M/big.copy"
for i in 1 2 3 4 5 6 7 8; do cmp "$M/dir/f$i" "$M/dir.copy/f$i"; done
zf_log "cp of 24 MiB + a directory: 0 data bytes written, df unchanged, $shared bytes shared"
# read/write copies are unchanged (dd; coreutils cat uses copy_file_range too)
dd if="$M/big" of="$M/big.cat" bs=1M status=none
sync "$M/big.cat"
data2=$(zf_stat data_bytes_written)
[ $((data2 - data1)) -ge $((24 << 20)) ] || zf_fail "dd copy wrote only $((data2 - data1)) bytes"
# the source goes: the copies keep their bytes
sha=$(sha256sum <"$M/big" | cut -d' ' -f1)
rm -rf "$M/big" "$M/dir"
sync "$M"
zf_umount
zf_fsck
zf_mount
[ "$(sha256sum <"$M/big.copy" | cut -d' ' -f1)" = "$sha" ] || zf_fail "big.copy changed after the source was removed"
for i in 1 2 3 4 5 6 7 8; do
	[ "$(stat -c %s "$M/dir.copy/f$i")" = $((i * 100003)) ] || zf_fail "dir.copy/f$i: wrong size"
done
[ "$(zf_stat shared_bytes)" = 0 ] || zf_fail "shared_bytes=$(zf_stat shared_bytes) with no second reference left"
zf_umount
zf_fsck
zf_pass "cp shares extents (0 data bytes, df once), copies survive the source and a remount"
