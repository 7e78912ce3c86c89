#!/bin/bash
# Guest side of the QEMU ZNS suite (tests/qemu/suite.sh boots the guests with
# scripts/qemu-zns.sh).  Runs inside the guest, as root, on the real kernel
# zoned device $ZF_QEMU_ZONED (/dev/nvme0n1):
#
#   guest-suite.sh zdev          test_zdev against the device (libzbd backend)
#   guest-suite.sh fs [--long]   mkfs, FUSE mount, smoke test, fio verify,
#                                zf-leveldb fill + remount + verify, fsck,
#                                zone limits sampled all along
#   guest-suite.sh crash-write [R]   round R (1: mkfs; >1: fsck and mount
#                                the image of the previous cut), fsync'ed
#                                files, then the power cut is requested
#                                while writing goes on
#   guest-suite.sh crash-verify [R]  (next boot, same image) fsck, mount,
#                                check every fsync'ed file of rounds 1..R
# Prints "PASS: ..." / "FAIL: ..." lines; exit 0 only if everything passed.
set -euo pipefail
B=${ZF_BUILD_DIR:?}
DEV=${ZF_QEMU_ZONED:-/dev/nvme0n1}
MNT=/mnt/zf
LOG=/tmp/zonefuse.log
T0=$(date +%s)
PID=
SAMPLER=

log() { echo "[guest +$(($(date +%s) - T0))s] $*"; }
fail() {
	echo "FAIL: $*"
	[ -s "$LOG" ] && { echo "--- daemon log tail:"; tail -n 30 "$LOG" | sed 's/^/  | /'; }
	echo "--- kernel messages tail:"
	dmesg | tail -n 15 | sed 's/^/  | /'
	exit 1
}
trap 'rc=$?; [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null; exit $rc' EXIT

geometry() {
	local q=/sys/block/${DEV#/dev/}/queue
	log "device $DEV: $(cat $q/nr_zones) zones of $(($(cat $q/chunk_sectors) / 2048)) MiB," \
		"max open $(cat $q/max_open_zones), max active $(cat $q/max_active_zones)," \
		"block $(cat $q/logical_block_size) B, scheduler $(cat $q/scheduler)"
}

# Kernel messages since the mark: I/O errors on the zoned device (a write
# off the wp, too many open/active zones, ...) are bugs of ours.
dmesg_mark() { DMESG_MARK=$(dmesg | wc -l); }
dmesg_check() {
	local new
	new=$(dmesg | tail -n +$((DMESG_MARK + 1)) | grep -iE 'nvme0n1|I/O error|zones exceeded' || true)
	[ -z "$new" ] || fail "$1: the kernel reported errors on the zoned device:
$new"
}

# ---- zone limits: sample the open/active counts while the fs works ----------
sampler_start() {
	local q=/sys/block/${DEV#/dev/}/queue
	MAX_OPEN=$(cat $q/max_open_zones) MAX_ACTIVE=$(cat $q/max_active_zones)
	: >/tmp/zone-samples
	(while :; do zns-state count "$DEV" >>/tmp/zone-samples 2>/dev/null; sleep 0.2; done) &
	SAMPLER=$!
}
sampler_stop() {
	kill "$SAMPLER" 2>/dev/null || true
	wait "$SAMPLER" 2>/dev/null || true
	SAMPLER=
	local mo ma n
	n=$(wc -l </tmp/zone-samples)
	mo=$(awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { print m }' /tmp/zone-samples)
	ma=$(awk 'BEGIN { m = 0 } $4 > m { m = $4 } END { print m }' /tmp/zone-samples)
	log "zone limits: $n samples, at most $mo open (limit $MAX_OPEN), $ma active (limit $MAX_ACTIVE)"
	{ [ "$MAX_OPEN" -eq 0 ] || [ "$mo" -le "$MAX_OPEN" ]; } &&
		{ [ "$MAX_ACTIVE" -eq 0 ] || [ "$ma" -le "$MAX_ACTIVE" ]; } ||
		fail "zone limits exceeded on the device"
	echo "PASS: zone limits: max $mo open / $ma active of $MAX_OPEN / $MAX_ACTIVE ($n samples)"
}

# ---- mount helpers ---------------------------------------------------------
zf_mount() {
	mkdir -p "$MNT"
	echo "=== zonefuse $DEV $MNT -f $*" >>"$LOG"
	"$B/zonefuse" "$DEV" "$MNT" -f "$@" >>"$LOG" 2>&1 &
	PID=$!
	local i
	for ((i = 0; i < 300; i++)); do
		mountpoint -q "$MNT" && { log "mounted (pid $PID)"; return 0; }
		kill -0 "$PID" 2>/dev/null || fail "zonefuse exited before mounting"
		sleep 0.1
	done
	fail "zonefuse did not mount within 30 s"
}
zf_umount() {
	local i st=0
	for ((i = 0; i < 40; i++)); do
		fusermount3 -u "$MNT" 2>/dev/null && break
		sleep 0.5
	done
	mountpoint -q "$MNT" && fail "cannot unmount $MNT"
	wait "$PID" || st=$?
	PID=
	[ "$st" -eq 0 ] || fail "zonefuse exited with status $st after unmount"
	if grep -i 'error:' "$LOG" | grep -q .; then
		fail "the daemon logged errors: $(grep -i 'error:' "$LOG" | head -n 5)"
	fi
	log "unmounted, daemon exited 0"
}
zf_fsck() {
	local st=0
	"$B/fsck.zonefuse" "$DEV" >/tmp/fsck.log 2>&1 || st=$?
	[ "$st" -eq 0 ] || { cat /tmp/fsck.log; fail "fsck.zonefuse exited $st"; }
	log "fsck clean"
}
zf_mkfs() {
	"$B/mkfs.zonefuse" --force "$DEV" >/tmp/mkfs.log 2>&1 || { cat /tmp/mkfs.log; fail "mkfs.zonefuse"; }
	log "mkfs.zonefuse done"
}

# ---- the parts ---------------------------------------------------------------
do_zdev() {
	geometry
	dmesg_mark
	local st=0
	ZDEV_TEST_DEVICE=$DEV CK_DEFAULT_TIMEOUT=300 "$B/tests/test_zdev" >/tmp/test_zdev.log 2>&1 || st=$?
	grep -vE 'I/O error|I/O Error|zones exceeded|skipped on a real device' /tmp/test_zdev.log | tail -n 20
	[ "$st" -eq 0 ] || fail "test_zdev against $DEV (exit $st)"
	echo "PASS: test_zdev against the kernel zoned device ($(grep -o 'Checks: [0-9]*' /tmp/test_zdev.log))"
}

smoke() {
	local d=$MNT/smoke
	mkdir -p "$d/sub/deeper"
	echo hello >"$d/a"
	[ "$(cat "$d/a")" = hello ] || fail "smoke: small file"
	echo world >>"$d/a"
	[ "$(tail -n 1 "$d/a")" = world ] || fail "smoke: append"
	dd if=/dev/urandom of=/tmp/rand bs=1M count=24 2>/dev/null
	dd if=/tmp/rand of="$d/big" bs=1M conv=fsync 2>/dev/null || fail "smoke: write+fsync 24 MiB"
	cmp /tmp/rand "$d/big" || fail "smoke: read back"
	mv "$d/big" "$d/sub/deeper/moved"
	[ ! -e "$d/big" ] || fail "smoke: rename left the old name"
	cmp /tmp/rand "$d/sub/deeper/moved" || fail "smoke: renamed file content"
	mv "$d/sub" "$d/sub2"
	cmp /tmp/rand "$d/sub2/deeper/moved" || fail "smoke: directory rename"
	# overwrite in the middle, truncate, unlink
	dd if=/dev/zero of="$d/sub2/deeper/moved" bs=4k seek=100 count=3 conv=notrunc,fsync 2>/dev/null
	dd if=/dev/zero of=/tmp/rand bs=4k seek=100 count=3 conv=notrunc 2>/dev/null
	cmp /tmp/rand "$d/sub2/deeper/moved" || fail "smoke: overwrite in place"
	truncate -s 5000000 "$d/sub2/deeper/moved"
	[ "$(stat -c %s "$d/sub2/deeper/moved")" -eq 5000000 ] || fail "smoke: truncate"
	for i in $(seq 1 200); do echo "$i" >"$d/n$i"; done
	[ "$(ls "$d" | grep -c '^n')" -eq 200 ] || fail "smoke: 200 small files"
	rm "$d"/n1*
	[ "$(ls "$d" | grep -c '^n')" -eq 89 ] || fail "smoke: unlink"
	sync
	echo "PASS: smoke (small/append/24 MiB fsync/rename file+dir/overwrite/truncate/200 files/unlink)"
}

fio_run() { # name rw bs size [extra fio args]
	local name=$1 rw=$2 bs=$3 size=$4
	shift 4
	fio --name="$name" --directory="$MNT/fio" --filename_format='$jobname.$jobnum' \
		--rw="$rw" --bs="$bs" --size="$size" --ioengine=psync --verify=crc32c \
		--verify_fatal=1 --do_verify=1 --randrepeat=1 --fsync_on_close=1 \
		--verify_state_save=0 "$@" --output="/tmp/fio-$name.txt" >/dev/null 2>&1 ||
		{ cat "/tmp/fio-$name.txt"; fail "fio $name"; }
	grep -q "err= 0" "/tmp/fio-$name.txt" || { cat "/tmp/fio-$name.txt"; fail "fio $name reported errors"; }
}
fio_verify_only() { # name rw bs size [extra]
	local name=$1 rw=$2 bs=$3 size=$4
	shift 4
	fio --name="$name" --directory="$MNT/fio" --filename_format='$jobname.$jobnum' \
		--rw="$rw" --bs="$bs" --size="$size" --ioengine=psync --verify=crc32c \
		--verify_fatal=1 --verify_only --randrepeat=1 --verify_state_save=0 "$@" \
		--output="/tmp/fio-v-$name.txt" >/dev/null 2>&1 ||
		{ cat "/tmp/fio-v-$name.txt"; fail "fio verify after remount: $name"; }
}

do_fs() {
	local long=0 n=30000
	[ "${1:-}" = --long ] && { long=1; n=300000; }
	geometry
	dmesg_mark
	zf_mkfs
	sampler_start
	zf_mount
	smoke
	mkdir -p "$MNT/fio"
	# small blocks through FUSE are slow under TCG: small sizes unless --long
	FIO_S=4M FIO_M=32M FIO_P=2M
	[ $long -eq 0 ] || { FIO_S=32M FIO_M=128M FIO_P=16M; }
	fio_run seq-4k write 4k $FIO_S
	fio_run rand-8k randwrite 8k $FIO_S
	fio_run seq-1M write 1M $FIO_M
	# more files written at once than the device has open zones
	fio_run par16 write 128k $FIO_P --numjobs=16
	[ $long -eq 0 ] || fio_run rand-4k-big randwrite 4k 128M
	echo "PASS: fio crc32c verify (4k/8k/1M, 16 parallel writers)"
	LDB=1
	[ -x "$B/zf-leveldb" ] || { LDB=0; log "zf-leveldb not built (libleveldb-dev missing): skipped"; }
	if [ $LDB -eq 1 ]; then
		"$B/zf-leveldb" fill --db "$MNT/ldb" --num $n --fresh >/tmp/ldb.log 2>&1 ||
			{ cat /tmp/ldb.log; fail "zf-leveldb fill"; }
		log "zf-leveldb fill: $(tail -n 1 /tmp/ldb.log)"
	fi
	zf_umount
	dmesg_check "first mount"
	zf_fsck
	zf_mount
	fio_verify_only seq-4k write 4k $FIO_S
	fio_verify_only rand-8k randwrite 8k $FIO_S
	fio_verify_only seq-1M write 1M $FIO_M
	fio_verify_only par16 write 128k $FIO_P --numjobs=16
	[ $long -eq 0 ] || fio_verify_only rand-4k-big randwrite 4k 128M
	cmp /tmp/rand "$MNT/smoke/sub2/deeper/moved" -n 5000000 || fail "smoke file after remount"
	if [ $LDB -eq 1 ]; then
		"$B/zf-leveldb" verify --db "$MNT/ldb" >/tmp/ldb-v.log 2>&1 ||
			{ cat /tmp/ldb-v.log; fail "zf-leveldb verify after remount"; }
		log "zf-leveldb verify: $(tail -n 1 /tmp/ldb-v.log)"
	fi
	if [ $long -eq 1 ] && [ $LDB -eq 1 ]; then
		"$B/zf-leveldb" overwrite --db "$MNT/ldb" --num $n >/tmp/ldb-o.log 2>&1 ||
			{ cat /tmp/ldb-o.log; fail "zf-leveldb overwrite"; }
		"$B/zf-leveldb" verify --db "$MNT/ldb" >/tmp/ldb-v.log 2>&1 ||
			{ cat /tmp/ldb-v.log; fail "zf-leveldb verify after overwrite"; }
	fi
	zf_umount
	sampler_stop
	dmesg_check "second mount"
	zf_fsck
	echo "PASS: fio and zf-leveldb data intact after remount, fsck clean, no device errors"
}

# Files fsync'ed before the power cut, round R in crash$R/ (round 1: crash/):
# f$i ($i * 37 KiB + i bytes of byte $i, written by dd with conv=fsync), and
# a log of fsync'ed lines.  Round 1 formats the device; later rounds (suite
# --long) boot the image the previous round's cut left behind, run fsck,
# mount and add their own directory, so every cut is also a crash on top of
# recovered state.
crash_dir() { if [ "$1" -le 1 ]; then echo "$MNT/crash"; else echo "$MNT/crash$1"; fi; }
crash_file_len() { echo $(($1 * 37 * 1024 + $1)); }
do_crash_write() {
	local round=${1:-1} d
	geometry
	if [ "$round" -le 1 ]; then zf_mkfs; else zf_fsck; fi
	zf_mount
	d=$(crash_dir "$round")
	mkdir -p "$d"
	sync
	for i in $(seq 1 40); do
		head -c "$(crash_file_len "$i")" /dev/zero | tr '\0' "\\$(printf '%03o' "$i")" |
			dd of="$d/f$i" bs=64k conv=fsync 2>/dev/null
	done
	for i in $(seq 1 100); do
		printf '%06d\n' "$i" | dd of="$d/log" bs=7 oflag=append conv=notrunc,fsync 2>/dev/null
	done
	mv "$d/f1" "$d/renamed1"
	rm "$d/f2"
	sync "$d" 2>/dev/null || sync
	log "round $round: fsync'ed files written; unsynced writing goes on, power cut requested"
	# unsynced traffic while the power goes
	(i=0; while :; do
		dd if=/dev/urandom of="$d/unsynced$((i % 8))" bs=256k count=8 2>/dev/null
		i=$((i + 1)); done) &
	sleep 1
	touch "$ZF_QEMU_RUN/power-cut"
	sleep 600
	fail "still running 600 s after requesting the power cut"
}
crash_check_dir() { # round
	local r=$1 d i f len
	d=$(crash_dir "$r")
	for i in $(seq 3 40); do
		f=$d/f$i
		len=$(crash_file_len "$i")
		[ -f "$f" ] || fail "crash round $r: fsync'ed file f$i is missing"
		[ "$(stat -c %s "$f")" -eq "$len" ] || fail "crash round $r: f$i has $(stat -c %s "$f") bytes, want $len"
		[ -z "$(tr -d "\\$(printf '%03o' "$i")" <"$f" | head -c 1)" ] || fail "crash round $r: f$i holds foreign bytes"
	done
	[ -f "$d/renamed1" ] && [ ! -e "$d/f1" ] || fail "crash round $r: fsync'ed rename lost"
	[ ! -e "$d/f2" ] || fail "crash round $r: fsync'ed unlink lost"
	[ "$(cat "$d/log")" = "$(for i in $(seq 1 100); do printf '%06d\n' "$i"; done)" ] ||
		fail "crash round $r: fsync'ed log lines lost"
}
do_crash_verify() {
	local rounds=${1:-1} r
	geometry
	dmesg_mark
	zf_fsck
	zf_mount
	for r in $(seq 1 "$rounds"); do crash_check_dir "$r"; done
	# the file system takes new writes
	dd if=/dev/urandom of=/tmp/post bs=1M count=4 2>/dev/null
	dd if=/tmp/post of="$(crash_dir "$rounds")/post" bs=1M conv=fsync 2>/dev/null
	cmp /tmp/post "$(crash_dir "$rounds")/post" || fail "crash: write after recovery"
	zf_umount
	dmesg_check "crash recovery"
	zf_fsck
	echo "PASS: crash: fsync'ed files, rename, unlink and log lines of $rounds round(s) survive power cuts of the guest"
}

case "${1:-}" in
zdev) do_zdev ;;
fs) shift; do_fs "$@" ;;
crash-write) do_crash_write "${2:-1}" ;;
crash-verify) do_crash_verify "${2:-1}" ;;
*) echo "usage: $0 zdev | fs [--long] | crash-write [ROUND] | crash-verify [ROUNDS]" >&2; exit 2 ;;
esac
