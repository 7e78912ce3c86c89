#!/bin/bash
# fio --verify=crc32c on the mount: sequential and random writes at 4 KiB,
# 8 KiB and 1 MiB blocks, verified in the same run and again after a remount.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog fio fio
zf_setup --zone-size 16M --zones 96 --max-open 14 --max-active 14
zf_mount
size=${ZF_FIO_SIZE:-48M}
for rw in write randwrite; do
	for bs in 4k 8k 1M; do
		name="$rw-$bs"
		zf_log "fio $name ($size)"
		fio --name="$name" --directory="$ZF_MNT" --filename="$name" --rw="$rw" --bs="$bs" \
			--size="$size" --ioengine=psync --verify=crc32c --verify_fatal=1 \
			--do_verify=1 --randrepeat=1 --fsync_on_close=1 --verify_state_save=0 \
			--output="$ZF_WORK/fio-$name.txt" || { cat "$ZF_WORK/fio-$name.txt"; zf_fail "fio $name"; }
		grep -q "err= 0" "$ZF_WORK/fio-$name.txt" || { cat "$ZF_WORK/fio-$name.txt"; zf_fail "fio $name reported errors"; }
	done
done
zf_umount
zf_fsck
zf_mount
for rw in write randwrite; do
	for bs in 4k 8k 1M; do
		name="$rw-$bs"
		fio --name="$name" --directory="$ZF_MNT" --filename="$name" --rw="$rw" --bs="$bs" \
			--size="$size" --ioengine=psync --verify=crc32c --verify_fatal=1 \
			--verify_only --randrepeat=1 --verify_state_save=0 --output="$ZF_WORK/fio-v-$name.txt" ||
			{ cat "$ZF_WORK/fio-v-$name.txt"; zf_fail "fio verify after remount: $name"; }
	done
done
zf_umount
zf_pass "fio crc32c verify, sequential and random, 4k/8k/1M, after remount too"
