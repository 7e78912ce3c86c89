#!/bin/bash
# The zf loop's reader polls for the next request while requests come
# promptly (-o poll_us): with the default, a run of synchronous round trips
# (small files created, stat'ed, read and unlinked) is mostly caught while
# polling (fuse_poll_hits) and every file has its content; -o poll_us=0
# and a daemon that may run on one CPU only never poll; a bad value is
# refused with the usage status; and the daemon unmounts cleanly from a
# poll.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog python3 python3
zf_require_prog taskset util-linux
zf_setup
M=$ZF_MNT

# round_trips NAME: 1000 small files made, checked and removed in $M/NAME
round_trips() {
	zf_small_files "$M/$1" 1000
	rm -r "${M:?}/$1"
}

# ---- 1. the default polls, and the round trips end in polls ---------------
cpus=$(nproc)
zf_mount
round_trips a
hits=$(zf_stat fuse_poll_hits) misses=$(zf_stat fuse_poll_misses) us=$(zf_stat fuse_poll_us)
zf_log "$cpus CPUs: $hits waits ended while polling, $misses slept after polling, $us us polled"
if [ "$cpus" -ge 2 ]; then
	[ "$hits" -ge 500 ] || zf_fail "only $hits of some 6,000 requests came while the reader polled"
	[ "$us" -gt 0 ] || zf_fail "fuse_poll_us is $us with $hits hits"
else
	[ "$hits" = 0 ] && [ "$misses" = 0 ] || zf_fail "polled ($hits / $misses) with one CPU"
fi
zf_umount
zf_check_log

# ---- 2. poll_us=0 never polls ---------------------------------------------------
zf_mount -o poll_us=0
round_trips b
[ "$(zf_stat fuse_poll_hits)" = 0 ] && [ "$(zf_stat fuse_poll_misses)" = 0 ] &&
	[ "$(zf_stat fuse_poll_us)" = 0 ] || zf_fail "-o poll_us=0 polled: $(zf_stats | grep poll)"
zf_umount

# ---- 3. one CPU to run on: no polling, said once ---------------------------------
all=$(taskset -p $$ | awk '{print $NF}')
taskset -p 1 $$ >/dev/null
zf_mount
taskset -p "$all" $$ >/dev/null
round_trips c
[ "$(zf_stat fuse_poll_hits)" = 0 ] && [ "$(zf_stat fuse_poll_misses)" = 0 ] ||
	zf_fail "a daemon on one CPU polled: $(zf_stats | grep poll)"
[ "$(grep -c 'one CPU to run on' "$ZF_LOG")" = 1 ] || zf_fail "no word (or more than one) that the loop does not poll"
zf_umount

# ---- 4. bad values: the usage status, one line, no mount ------------------------
for v in 1001 -1 x; do
	st=0
	timeout -s KILL 20 "$ZF_DAEMON" "$ZF_DEV" "$M" -f -o "poll_us=$v" 2>"$ZF_WORK/err" || st=$?
	[ "$st" = 2 ] || zf_fail "poll_us=$v exited $st, want 2: $(cat "$ZF_WORK/err")"
	grep -q "poll_us" "$ZF_WORK/err" || zf_fail "poll_us=$v: $(cat "$ZF_WORK/err")"
	zf_is_mounted && zf_fail "poll_us=$v mounted"
done
zf_check_log
zf_pass
