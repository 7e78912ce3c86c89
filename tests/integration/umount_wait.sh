#!/bin/bash
# Unmount means done (issue 48, items 1, 2 and 5), on an emulated device
# slowed to 24 MB/s so that the daemon's write-out at unmount takes a
# second or two:
#   1. a mount in the background prints nothing on the terminal (quiet by
#      default); its log lines name the device;
#   2. plain `umount DIR` (umount(8) takes the type "fuse" from statfs and
#      runs /sbin/umount.fuse) returns only after the daemon has written
#      40 MiB of buffers (small files stay buffered) and exited: fsck is clean at once; the unmount
#      line says where the time went;
#   3. umount.fuse hands a FUSE mount of another type to `umount -i`;
#      SIGTERM (a shutdown's final kill) writes everything out, then exits;
#   4. `mkfs.zonefuse` right after `fusermount3 -u` waits for the daemon
#      and says what it waits for, then succeeds;
#   5. `zonefuse -u` with a copy of the mount in another mount namespace
#      gives up within 15 s naming the cause (it used to wait forever); the
#      daemon exits once the copy is gone;
#   6. a hard link to the mounted image is refused at once as in use.
# Steps 2-5 run in a private mount namespace whose /usr/sbin holds the
# build (lib_ns.sh), so nothing is installed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_ns.sh"
zf_require_fuse
zf_require_prog fusermount3 fuse3
zf_setup --zone-size 16M --zones 64 --device-mbps 24
REAL_DEV=$(realpath "$ZF_DEV")

inner=$ZF_WORK/inner.sh
cat >"$inner" <<'INNER'
set -euo pipefail
fail() { echo "FAIL: umount_wait: $*" >&2; exit 1; }
log() { echo "[umount_wait] $*"; }
holder() { # the pid of the zonefuse daemon serving $1
	awk -v m="$1" '$0 ~ "info: mounted .* on " m "$" { sub(/.*zonefuse\[/, ""); sub(/\].*/, ""); p = $0 } END { print p }' "$ZF_LOG"
}
alive() { # alive PID: running (a zombie, exited but not yet reaped, is not)
	local st
	st=$(sed -E 's/^.*\) (.).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$st" != Z ] && [ "$st" != X ]
}
small_files() { # 40 MiB in files of 4 MiB: under 16 MiB, each stays buffered until the unmount
	mkdir "$1"
	for i in 0 1 2 3 4 5 6 7 8 9; do
		head -c 4M /dev/urandom >"$1/f$i"
	done
}
bgmount() { # bgmount DIR [-o ...]: in the background, quiet
	local dir=$1; shift
	"$ZF_DAEMON" "$ZF_DEV" "$dir" -o "log=$ZF_LOG,write_behind_ms=600000,commit_ms=60000" "$@" \
		>"$ZF_WORK/mount.out" 2>&1 || fail "mount failed: $(cat "$ZF_WORK/mount.out")"
	[ ! -s "$ZF_WORK/mount.out" ] || fail "a quiet mount printed: $(cat "$ZF_WORK/mount.out")"
}

# ---- 1, 2: quiet mount, plain umount waits -----------------------------------
bgmount "$ZF_MNT"
pid=$(holder "$ZF_MNT")
[ -n "$pid" ] || fail "no 'mounted' line naming $ZF_MNT in the log"
grep -q "zonefuse\[$pid\]: $REAL_DEV: info: mounted" "$ZF_LOG" || fail "log lines do not name $REAL_DEV"
small_files "$ZF_MNT/a"
t0=$(date +%s.%N)
umount "$ZF_MNT" || fail "umount failed"
t1=$(date +%s.%N)
alive "$pid" && fail "umount returned while daemon $pid was still running"
"$ZF_FSCK" "$ZF_DEV" >"$ZF_WORK/fsck.out" 2>&1 || fail "fsck right after umount: $(cat "$ZF_WORK/fsck.out")"
line=$(grep "zonefuse\[$pid\]: .*info: unmounted" "$ZF_LOG") || fail "no unmount line"
[[ "$line" == *"after the mount ended (requests "*"file system with 40.0 MiB buffered "* ]] ||
	fail "the unmount line does not say where the time went: $line"
steps=$(grep "zonefuse\[$pid\]: .*info: unmount: background work stopped in" "$ZF_LOG") ||
	fail "fs_unmount's steps are not logged"
log "plain umount took $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s, daemon gone, fsck clean: ${line#*info: }; ${steps#*info: }"

# ---- 3: another FUSE type goes to umount -i ------------------------------------
bgmount "$ZF_MNT" -o subtype=other
pid=$(holder "$ZF_MNT")
[ "$(findmnt -n -o FSTYPE "$ZF_MNT")" = fuse.other ] || fail "not of type fuse.other"
umount "$ZF_MNT" || fail "umount of a fuse.other mount failed"
findmnt "$ZF_MNT" >/dev/null && fail "fuse.other still mounted"
for ((i = 0; i < 300; i++)); do alive "$pid" || break; sleep 0.1; done
log "a fuse.other mount: unmounted through umount -i"

# ---- 3b: SIGTERM (the final kill of a shutdown) writes everything out ----------
bgmount "$ZF_MNT"
pid=$(holder "$ZF_MNT")
small_files "$ZF_MNT/t"
sums=$(cd "$ZF_MNT/t" && sha256sum f*)
kill -TERM "$pid"
for ((i = 0; i < 300; i++)); do alive "$pid" || break; sleep 0.1; done
alive "$pid" && fail "daemon $pid still running 30 s after SIGTERM"
grep -q "zonefuse\[$pid\]: .*info: unmounted .*everything written" "$ZF_LOG" || fail "no unmount line after SIGTERM"
findmnt "$ZF_MNT" >/dev/null && umount "$ZF_MNT"
bgmount "$ZF_MNT"
[ "$(cd "$ZF_MNT/t" && sha256sum f*)" = "$sums" ] || fail "the files written before SIGTERM differ after a remount"
umount "$ZF_MNT"
log "SIGTERM: the daemon wrote 40 MiB out and exited; the files are there after a remount"

# ---- 4: mkfs right after fusermount3 -u waits, and says so -----------------------
bgmount "$ZF_MNT"
pid=$(holder "$ZF_MNT")
small_files "$ZF_MNT/b"
fusermount3 -u "$ZF_MNT"
"$ZF_MKFS" --force "$ZF_DEV" >"$ZF_WORK/mkfs.out" 2>"$ZF_WORK/mkfs.err" ||
	fail "mkfs after fusermount3 -u: $(cat "$ZF_WORK/mkfs.err")"
grep -q "waiting (up to 180 s) for zonefuse pid $pid, which is no longer mounted, to finish writing it and exit" \
	"$ZF_WORK/mkfs.err" || fail "mkfs did not say what it waited for: $(cat "$ZF_WORK/mkfs.err")"
log "mkfs after fusermount3 -u: $(cat "$ZF_WORK/mkfs.err")"

# ---- 5: a copy in another mount namespace ------------------------------------------
bgmount "$ZF_MNT"
pid=$(holder "$ZF_MNT")
unshare -m --propagation private sleep 120 &
copy=$!
sleep 0.5
rc=0
t0=$(date +%s)
timeout 60 "$ZF_DAEMON" -u "$ZF_MNT" 2>"$ZF_WORK/u.err" || rc=$?
took=$(($(date +%s) - t0))
[ "$rc" -eq 1 ] || { kill "$copy"; fail "zonefuse -u with a copy elsewhere exited $rc after $took s: $(cat "$ZF_WORK/u.err")"; }
[ "$took" -le 15 ] || { kill "$copy"; fail "zonefuse -u took $took s to give up"; }
grep -q "has it mounted on $ZF_MNT in another mount namespace, so zonefuse pid $pid goes on serving it" \
	"$ZF_WORK/u.err" || { kill "$copy"; fail "no cause: $(cat "$ZF_WORK/u.err")"; }
alive "$pid" || fail "daemon gone while the copy holds the mount"
kill "$copy"
wait "$copy" 2>/dev/null || true
for ((i = 0; i < 300; i++)); do alive "$pid" || break; sleep 0.1; done
alive "$pid" && fail "daemon $pid still running after the copy went"
log "zonefuse -u gave up after $took s: $(tail -n 1 "$ZF_WORK/u.err")"
INNER
ZF_DEV=$ZF_DEV ZF_MNT=$(realpath "$ZF_MNT") ZF_LOG=$ZF_WORK/bg.log ZF_WORK=$ZF_WORK ZF_FSCK=$ZF_FSCK \
	ZF_MKFS=$ZF_MKFS REAL_DEV=$REAL_DEV zf_ns_run bash "$inner" || zf_fail "see above"
if grep -qi 'error:' "$ZF_WORK/bg.log"; then zf_fail "daemon errors: $(grep -i error: "$ZF_WORK/bg.log")"; fi

# ---- 6: a hard link to the mounted image ------------------------------------------
zf_mount
ln "$ZF_DEV" "$ZF_WORK/link.img"
mkdir "$ZF_WORK/mnt2"
rc=0
t0=$(date +%s)
"$ZF_DAEMON" "$ZF_WORK/link.img" "$ZF_WORK/mnt2" -f 2>"$ZF_WORK/link.err" || rc=$?
took=$(($(date +%s) - t0))
[ "$rc" -eq 1 ] || zf_fail "mount of a hard link exited $rc"
grep -q "link.img: in use by zonefuse pid $ZF_PID mounted on $(realpath "$ZF_MNT")" "$ZF_WORK/link.err" ||
	zf_fail "hard link: $(cat "$ZF_WORK/link.err")"
[ "$took" -le 3 ] || zf_fail "the hard link was refused after $took s"
zf_log "hard link refused in $took s: $(cat "$ZF_WORK/link.err")"
zf_umount
zf_pass "quiet mount; umount waits for the daemon; umount -i for others; mkfs waits and says so; -u gives up on a namespace copy; hard link refused at once"
