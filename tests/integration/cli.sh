#!/bin/bash
# What a person sees at the command line (issue 18):
#   1. each error text, as the only line the program prints: "already holds
#      a zonefuse file system: --force to overwrite" (mkfs twice), "not a
#      zonefuse file system: run mkfs.zonefuse first" (mount and fsck of an
#      unformatted device), "in use by zonefuse pid N mounted on DIR" (mkfs,
#      fsck and a second mount of a mounted device); no library
#      "zonefuse: error: zdev: ..." line before it;
#   2. the mount is of type fuse.zonefuse, named after the device's path;
#   3. `zonefuse -u` returns only when the daemon has exited: fsck and mkfs
#      right after it succeed (3 rounds with unwritten buffers);
#   4. logs: -o log=FILE in the background gets the same lines the
#      foreground prints on stderr; without log= and without /dev/log the
#      daemon names its log file before detaching and writes there;
#   5. zonefuse-emu create warns when the image's file system has less room
#      than the device, and only then;
#   6. fsck.zonefuse -v counts the free zones (it printed "free 0"), and
#      its --help synopsis names every option it lists;
#   7. README.md opens with the two set-up commands and every file it
#      links exists (docs/cluster.md may come from another branch).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_setup --zone-size 16M --zones 64
REAL_DEV=$(realpath "$ZF_DEV")
REAL_MNT=$(realpath "$ZF_MNT")

# expect_msg RC TEXT CMD...: CMD exits RC and prints exactly one line on
# stderr, which contains TEXT.
expect_msg() {
	local want_rc=$1 text=$2 rc=0
	shift 2
	"$@" >"$ZF_WORK/out" 2>"$ZF_WORK/err" || rc=$?
	[ "$rc" -eq "$want_rc" ] || zf_fail "$* exited $rc, expected $want_rc: $(cat "$ZF_WORK/err")"
	grep -qF -- "$text" "$ZF_WORK/err" || zf_fail "$*: no '$text' in: $(cat "$ZF_WORK/err")"
	[ "$(wc -l <"$ZF_WORK/err")" -eq 1 ] || zf_fail "$*: more than the one line: $(cat "$ZF_WORK/err")"
	if grep -qi 'error:' "$ZF_WORK/err"; then zf_fail "$*: library error line: $(cat "$ZF_WORK/err")"; fi
	zf_log "ok: $(basename "$1") -> $(cat "$ZF_WORK/err")"
}

# ---- 1. error texts ---------------------------------------------------------
expect_msg 1 "$ZF_DEV already holds a zonefuse file system: --force to overwrite" \
	"$ZF_MKFS" "$ZF_DEV"
"$ZF_EMU" create "$ZF_WORK/blank.img" --zone-size 16M --zones 16 >/dev/null
expect_msg 1 "blank.img: not a zonefuse file system: run mkfs.zonefuse first" \
	"$ZF_DAEMON" "$ZF_WORK/blank.img" "$ZF_MNT" -f
expect_msg 8 "blank.img: not a zonefuse file system: run mkfs.zonefuse first" \
	"$ZF_FSCK" "$ZF_WORK/blank.img"
zf_is_mounted && zf_fail "a failed mount left $ZF_MNT mounted"
# a bad option value is a bad command line (exit 2), as a bad option is
expect_msg 2 "fuse_workers must be 1 to 64 workers, not '65'" "$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -f -o fuse_workers=65
expect_msg 2 "fuse_loop must be zf or mt, not 'x'" "$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -f -o fuse_loop=x
expect_msg 2 "bad stripe_unit 'lots'" "$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -f -o stripe_unit=lots
zf_is_mounted && zf_fail "a bad option value left $ZF_MNT mounted"

zf_mount
busy="in use by zonefuse pid $ZF_PID mounted on $REAL_MNT"
expect_msg 1 "$busy" "$ZF_MKFS" --force "$ZF_DEV"
expect_msg 8 "$busy" "$ZF_FSCK" "$ZF_DEV"
expect_msg 1 "$busy" "$ZF_DAEMON" "$ZF_DEV" "$ZF_WORK" -f

# ---- 2. mount type and name ---------------------------------------------------
line=$(awk -v m="$REAL_MNT" '$5 == m' /proc/self/mountinfo)
[[ "$line" == *" - fuse.zonefuse $REAL_DEV "* ]] ||
	zf_fail "mountinfo line is not 'fuse.zonefuse $REAL_DEV': $line"

# ---- 3. zonefuse -u returns when the device is free -----------------------------
for round in 1 2 3; do
	[ "$round" -eq 1 ] || zf_mount -o commit_ms=60000
	# Written but not fsync'ed: the daemon still has buffers and a commit to do.
	dd if=/dev/urandom of="$ZF_MNT/f$round" bs=1M count=24 status=none
	t0=$(date +%s.%N)
	"$ZF_DAEMON" -u "$ZF_MNT" || zf_fail "zonefuse -u failed"
	t1=$(date +%s.%N)
	zf_daemon_alive && zf_fail "round $round: daemon $ZF_PID still running after zonefuse -u"
	"$ZF_FSCK" "$ZF_DEV" >"$ZF_WORK/fsck.log" 2>&1 ||
		zf_fail "round $round: fsck right after zonefuse -u: $(cat "$ZF_WORK/fsck.log")"
	zf_wait_daemon 5 || true
	[ "${ZF_DAEMON_STATUS:-1}" -eq 0 ] || zf_fail "daemon exited $ZF_DAEMON_STATUS"
	zf_log "round $round: zonefuse -u took $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s, fsck clean at once"
done
"$ZF_DAEMON" -u "$ZF_MNT" 2>"$ZF_WORK/err" && zf_fail "zonefuse -u of an unmounted dir succeeded"
grep -q "not a mount point" "$ZF_WORK/err" || zf_fail "zonefuse -u message: $(cat "$ZF_WORK/err")"

# ---- 4. logs ----------------------------------------------------------------------------
BG=$ZF_WORK/bg.log
"$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -o "log=$BG" 2>"$ZF_WORK/bg.err" || zf_fail "background mount failed"
[ ! -s "$ZF_WORK/bg.err" ] || zf_fail "background mount with log=FILE printed: $(cat "$ZF_WORK/bg.err")"
echo data >"$ZF_MNT/x"
"$ZF_DAEMON" -u "$ZF_MNT"
grep -E "^[0-9-]+ [0-9:.]+ zonefuse\[[0-9]+\]: $REAL_DEV: info: mounted " "$BG" >/dev/null ||
	zf_fail "log file has no dated 'mounted' line: $(cat "$BG")"
grep -q 'info: unmounted .*everything written, device closed' "$BG" ||
	zf_fail "log file has no 'unmounted' line: $(cat "$BG")"
if grep -qi 'error:' "$BG"; then zf_fail "daemon logged errors: $(grep -i error: "$BG")"; fi
# The same lines in the foreground (on stderr): compare the messages.
FG=$ZF_WORK/fg.log
"$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -f 2>"$FG" &
ZF_PID=$!
for ((i = 0; i < 100; i++)); do zf_is_mounted && break; sleep 0.1; done
echo data >"$ZF_MNT/x"
"$ZF_DAEMON" -u "$ZF_MNT"
zf_wait_daemon 5 || zf_fail "foreground daemon did not exit"
msgs() { sed -E 's/^([0-9-]+ [0-9:.]+ zonefuse\[[0-9]+\]: [^ ]+|zonefuse): //; s/^(info: gc: at unmount|info: unmounted|info: unmount:).*/\1/' "$1" | sort; }
diff <(msgs "$BG") <(msgs "$FG") >"$ZF_WORK/diff" ||
	zf_fail "foreground lines differ from the log file's: $(cat "$ZF_WORK/diff")"
# Default target in the background.
if [ -S /dev/log ]; then
	"$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" 2>"$ZF_WORK/def.err"
	[ ! -s "$ZF_WORK/def.err" ] || zf_fail "with /dev/log the daemon printed: $(cat "$ZF_WORK/def.err")"
	"$ZF_DAEMON" -u "$ZF_MNT"
	zf_log "default log: syslog (/dev/log exists)"
else
	"$ZF_DAEMON" "$ZF_DEV" "$ZF_MNT" -o verbose 2>"$ZF_WORK/def.err"
	file=$(sed -n 's/^zonefuse: no syslog (\/dev\/log is missing): messages go to //p' "$ZF_WORK/def.err")
	[ -n "$file" ] || zf_fail "no log file named before detaching: $(cat "$ZF_WORK/def.err")"
	pid=$(awk -v d="$REAL_MNT" '$0 ~ "info: mounted .* on " d "$" { sub(/.*zonefuse\[/, ""); sub(/\].*/, ""); p = $0 } END { print p }' "$file")
	"$ZF_DAEMON" -u "$ZF_MNT"
	[ -n "$pid" ] || zf_fail "$file has no 'mounted ... on $REAL_MNT' line"
	grep -q "zonefuse\[$pid\]: $REAL_DEV: info: unmounted" "$file" ||
		zf_fail "$file has no unmount line of pid $pid naming $REAL_DEV"
	zf_log "default log without /dev/log: $file"
fi

# 5. zonefuse-emu create warns when the file system that holds the sparse
#    image has less room than the device, and only then.
small=$ZF_WORK/small
mkdir "$small"
mount -t tmpfs -o size=32m tmpfs "$small" || zf_fail "cannot mount a tmpfs on $small"
rc=0
"$ZF_EMU" create "$small/big.img" --zone-size 16M --zones 4 >/dev/null 2>"$ZF_WORK/emu.err" || rc=$?
"$ZF_EMU" create "$small/fits.img" --zone-size 4M --zones 4 >/dev/null 2>"$ZF_WORK/emu2.err" || rc=$((rc + $?))
umount "$small"
[ "$rc" -eq 0 ] || zf_fail "zonefuse-emu create on a small tmpfs failed: $(cat "$ZF_WORK/emu.err" "$ZF_WORK/emu2.err")"
grep -q "warning: .*big.img is sparse and its file system has .* free, less than the device's 64.0 MiB" \
	"$ZF_WORK/emu.err" || zf_fail "no warning for a device larger than its file system's room: $(cat "$ZF_WORK/emu.err")"
[ ! -s "$ZF_WORK/emu2.err" ] || zf_fail "a warning for a device that fits: $(cat "$ZF_WORK/emu2.err")"
zf_log "zonefuse-emu create: $(cat "$ZF_WORK/emu.err")"

# 6. fsck -v: free zones counted; --help synopsis.
"$ZF_FSCK" -v "$ZF_DEV" >"$ZF_WORK/fsckv.out" 2>&1 || zf_fail "fsck -v: $(cat "$ZF_WORK/fsckv.out")"
free=$(sed -n 's/^data zones: \([0-9]*\), free \([0-9]*\);.*/\2/p' "$ZF_WORK/fsckv.out")
[ -n "$free" ] && [ "$free" -gt 0 ] || zf_fail "fsck -v counts no free zone: $(grep 'data zones' "$ZF_WORK/fsckv.out")"
syn=$("$ZF_FSCK" --help | head -n 1)
for o in -v -n -p -a -y -f; do
	[[ "$syn" == *"$o"[]\ ]* ]] || zf_fail "fsck --help synopsis lacks $o: $syn"
	"$ZF_FSCK" --help | grep -qE "^ +$o|, $o" || zf_fail "fsck --help does not list $o"
done
zf_log "fsck -v: $(grep 'data zones' "$ZF_WORK/fsckv.out"); --help: $syn"

# 7. README: the two commands first, every link resolves.
head -n 8 "$ZF_SRC_DIR/README.md" | grep -q '^scripts/demo.sh ' || zf_fail "README does not open with scripts/demo.sh"
head -n 8 "$ZF_SRC_DIR/README.md" | grep -q '^scripts/test.sh ' || zf_fail "README does not open with scripts/test.sh"
for l in $(grep -oE '\]\([^)#:]+' "$ZF_SRC_DIR/README.md" | sed 's/^](//' | sort -u); do
	[ -e "$ZF_SRC_DIR/$l" ] || [ "$l" = docs/cluster.md ] || zf_fail "README links $l, which does not exist"
done
zf_log "README: $(wc -l <"$ZF_SRC_DIR/README.md") lines, links resolve"
zf_pass "error texts, mount name, zonefuse -u then fsck at once, log targets, sparse-image warning, fsck -v and --help, README"
