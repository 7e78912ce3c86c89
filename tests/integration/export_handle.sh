#!/bin/bash
# Export handles (name_to_handle_at / open_by_handle_at, what an NFS
# re-export uses) once the kernel has dropped its cached inodes and
# dentries, and across a remount:
#   - a file's handle opens that file (same inode number);
#   - a directory's handle opens it connected to its path (the kernel looks
#     up ".." up to the root and finds each name by readdir);
#   - the handle of a file deleted since is ESTALE.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
FH=$ZF_BUILD_DIR/tests/fhandle
zf_require_bin "$FH"
[ -w /proc/sys/vm/drop_caches ] || zf_skip "cannot write /proc/sys/vm/drop_caches"
zf_setup --zone-size 4M --zones 32
zf_mount

mkdir -p "$ZF_MNT/d/sub"
echo hello >"$ZF_MNT/d/sub/f"
echo bye >"$ZF_MNT/d/gone"
hf=$("$FH" get "$ZF_MNT/d/sub/f") || zf_fail "name_to_handle_at: $hf"
hd=$("$FH" get "$ZF_MNT/d/sub") || zf_fail "name_to_handle_at: $hd"
hg=$("$FH" get "$ZF_MNT/d/gone") || zf_fail "name_to_handle_at: $hg"
ino_f=$(stat -c %i "$ZF_MNT/d/sub/f")
ino_d=$(stat -c %i "$ZF_MNT/d/sub")
rm "$ZF_MNT/d/gone"

# expect WHAT HANDLE WANT: the output of `fhandle open` must match the
# glob WANT (a file's dentry stays disconnected: its path is the kernel's)
expect() {
	local got
	got=$("$FH" open "$ZF_MNT" "$2") || true
	zf_log "$1: $got"
	# shellcheck disable=SC2053 # WANT is a glob
	[[ "$got" == $3 ]] || zf_fail "$1: got '$got', want '$3'"
}

check_all() {
	sync
	echo 2 >/proc/sys/vm/drop_caches	# dentries and inodes
	expect "$1: file handle" "$hf" "ino=$ino_f path=*"
	echo 2 >/proc/sys/vm/drop_caches
	expect "$1: directory handle" "$hd" "ino=$ino_d path=$(realpath "$ZF_MNT")/d/sub"
	echo 2 >/proc/sys/vm/drop_caches
	expect "$1: deleted file's handle" "$hg" "errno=ESTALE"
}
check_all "caches dropped"
zf_remount
check_all "after a remount"
zf_umount
zf_fsck
zf_pass "handles open their inodes after the caches are dropped and across a remount; a deleted one is ESTALE"
