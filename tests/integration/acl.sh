#!/bin/bash
# POSIX ACLs, mounted with -o allow_other alone (the kernel enforces them,
# FUSE_CAP_POSIX_ACL; zonefuse stores them, keeps the mode in sync and does
# inheritance).  The same commands run on the work directory's own file
# system (ext4 or tmpfs: the reference) and on zonefuse; then:
#   - enforcement: `setfacl -m u:4343:r` on a 0600 file lets uid 4343 read
#     it, not write it, and uid 4444 still cannot read it; a named group
#     entry lets a member write; chmod 600 masks the entry off, chmod 640
#     brings it back; `setfacl -b` removes it;
#   - mode bits: the same modes and the same getfacl output as the
#     reference, for every file (setfacl changes the group bits, chmod the
#     mask; an owner outside the file's group who sets an ACL loses
#     S_ISGID);
#   - inheritance: a default ACL on a directory gives new files and
#     directories (created with umask 077, which a default ACL replaces)
#     the same ACLs and modes as on the reference, and their subdirectories
#     pass it on; without a default ACL the umask applies;
#   - persistence: after fsync, kill -9 and a remount, and after a clean
#     remount, getfacl -R is unchanged;
#   - rsync -aAXH from the reference to zonefuse and back: `rsync -ni -aAXH`
#     finds nothing to do either way (modes, owners, times, ACLs, user.*,
#     trusted.* and security.capability xattrs, symlinks, hard links, fifos).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

zf_require_fuse
zf_require_prog python3 python3
zf_require_prog setfacl acl
zf_require_prog getfacl acl
zf_require_prog rsync rsync
zf_require_prog setcap libcap2-bin
zf_setup --zone-size 4M --zones 32
chmod 755 "$ZF_WORK"
REF=$ZF_WORK/ref
mkdir -m 755 "$REF"
setfacl -m u:4343:r "$REF" 2>/dev/null || zf_skip "the work directory's file system has no ACLs"
setfacl -b "$REF"
zf_mount -o allow_other
ZF=$ZF_MNT/t
mkdir -m 755 "$ZF"


# as UID[:GROUPS] CMD...: run CMD as that user (gid = uid, supplementary
# groups comma-separated); its exit status.
as() {
	python3 - "$@" <<'PY'
import os, sys
who, cmd = sys.argv[1], sys.argv[2:]
uid, _, groups = who.partition(":")
os.setgroups([int(g) for g in groups.split(",") if g])
os.setgid(int(uid))
os.setuid(int(uid))
os.execvp(cmd[0], cmd)
PY
}
allow() { as "$@" >/dev/null 2>&1 || zf_fail "denied: $*"; }
deny() { ! as "$@" >/dev/null 2>&1 || zf_fail "allowed: $*"; }

# The same commands in both trees.
build() { # dir
	local d=$1
	(
		cd "$d"
		umask 022
		echo secret >f
		chmod 600 f
		setfacl -m u:4343:r f
		echo shared >g
		chmod 640 g
		setfacl -m g:4545:rw g
		mkdir -m 755 inh
		setfacl -d -m u:4343:rwx,g:4545:r inh
		umask 077
		python3 -c 'import os; os.close(os.open("inh/new", os.O_CREAT | os.O_WRONLY, 0o666))'
		mkdir inh/sub
		python3 -c 'import os; os.close(os.open("inh/sub/deep", os.O_CREAT | os.O_WRONLY, 0o640))'
		mkfifo inh/fifo
		ln -s new inh/link
		touch plain
		mkdir plaindir
		mkdir -m 777 minimal
		setfacl -d -m u::rwx,g::-,o::- minimal
		touch minimal/m
		echo c >chm
		setfacl -m u:4343:rw chm
		chmod 604 chm
		echo b >bee
		setfacl -m u:4343:rwx bee
		setfacl -b bee
		umask 022
		for f in sg-other sg-member; do
			echo s >$f
			chown 4343:4545 $f
			chmod 2775 $f
		done
		as 4343 setfacl -m u:4444:r sg-other	# not in group 4545: S_ISGID goes
		as 4343:4545 setfacl -m u:4444:r sg-member	# a member: it stays
	)
}
build "$REF"
build "$ZF"

zf_log "enforcement"
allow 4343 cat "$ZF/f"
deny 4343 sh -c "echo x >>'$ZF/f'"
deny 4444 cat "$ZF/f"
allow 4444:4545 sh -c "echo member >>'$ZF/g'"
deny 4444 sh -c "echo other >>'$ZF/g'"
chmod 600 "$ZF/f"
deny 4343 cat "$ZF/f"
chmod 640 "$ZF/f"
allow 4343 cat "$ZF/f"
allow 4343 sh -c "echo via-default >>'$ZF/inh/new'"
deny 4444 sh -c "echo x >>'$ZF/inh/new'"
deny 4343 cat "$ZF/bee"
[ "$(stat -c %a "$ZF/f")" = 640 ] || zf_fail "mode of f: $(stat -c %a "$ZF/f") (wanted 640: mask r)"
# undo the writes so both trees hold the same bytes
echo shared >"$ZF/g"
: >"$ZF/inh/new"

# compare WHAT: modes and ACLs of every file match the reference
compare() {
	local what=$1 a b
	a=$(cd "$REF" && find . -not -path './rs*' | sort | xargs -d '\n' getfacl -P -p 2>&1;
	    find . -not -path './rs*' -printf '%p %M %U %G\n' | sort)
	b=$(cd "$ZF" && find . | sort | xargs -d '\n' getfacl -P -p 2>&1;
	    find . -printf '%p %M %U %G\n' | sort)
	if [ "$a" != "$b" ]; then
		diff <(echo "$a") <(echo "$b") | head -40 >&2
		zf_fail "ACLs or modes differ from the reference ($what)"
	fi
}
compare "after setfacl, chmod, inheritance"
zf_log "modes and getfacl -R match the reference"
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$ZF/f"
zf_kill9
zf_fsck
zf_mount -o allow_other
compare "after kill -9 and remount"
allow 4343 cat "$ZF/f"
deny 4444 cat "$ZF/f"
zf_umount
zf_mount -o allow_other
compare "after a clean remount"
zf_log "ACLs persist across kill -9 and remount, and are enforced after it"

zf_log "rsync -aAXH reference -> zonefuse -> back"
SRC=$REF/rs
mkdir "$SRC"
(
	cd "$SRC"
	echo data >file
	chown 4343:4545 file
	chmod 4755 file
	setfattr -n user.note -v hello file
	setfattr -n trusted.brick -v 0x0102030405 file
	cp file capfile
	chmod 755 capfile
	setcap cap_net_raw+ep capfile
	ln file hard
	ln -s file sym
	mkfifo fifo
	mkdir -m 2775 dir
	setfacl -m u:4343:rwx,d:g:4545:rx dir
	echo x >dir/inner
	setfacl -m u:4444:r dir/inner
	touch -d '2001-02-03 04:05:06.123456789' dir/inner file
)
rsync -aAXH "$SRC/" "$ZF_MNT/rs/"
BACK=$ZF_WORK/back
rsync -aAXH "$ZF_MNT/rs/" "$BACK/"
out=$(rsync -ni -aAXH "$SRC/" "$ZF_MNT/rs/")
[ -z "$out" ] || zf_fail "rsync -ni reference -> zonefuse is not empty: $out"
out=$(rsync -ni -aAXH "$SRC/" "$BACK/")
[ -z "$out" ] || zf_fail "rsync -ni reference -> copy back is not empty: $out"
getcap "$ZF_MNT/rs/capfile" | grep -q cap_net_raw=ep || zf_fail "rsync lost the capability"
getfattr -n trusted.brick -e hex "$ZF_MNT/rs/file" 2>/dev/null | grep -q "=0x0102030405" ||
	zf_fail "rsync lost trusted.brick"
zf_umount
zf_fsck
zf_pass "ACLs enforced, mode bits in sync, inherited, persisted across kill -9; rsync -aAXH round trip equal"
