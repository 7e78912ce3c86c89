# Sourced by the bench scripts: one zonefuse mount on a fresh emulated
# device, and what they ask of it.  The caller sets build_dir and, for
# zf_up, the variables named there; zf_pid holds the daemon's PID while
# mounted (the caller's cleanup kills it if it is still set).

# is_mounted DIR: something is mounted at DIR
is_mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# mounted_by MNT PID: wait up to 15 s for a FUSE daemon PID to mount MNT;
# returns 1 if it exited or did not mount in time
mounted_by() {
	local i
	for ((i = 0; i < 150; i++)); do
		is_mounted "$1" && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# zf_up IMG MNT LOG ZONE_SIZE ZONES MAX_ACTIVE OPTS: create the emulated
# device IMG (max open = max active), mkfs, mount it at MNT with -o OPTS
# (may be empty), the daemon's output to LOG; returns 1 if it did not mount
zf_up() {
	local img=$1 mnt=$2 log=$3
	"$build_dir/zonefuse-emu" create "$img" --zone-size "$4" --zones "$5" \
		--max-open "$6" --max-active "$6" >/dev/null || return 1
	"$build_dir/mkfs.zonefuse" "$img" >/dev/null || return 1
	"$build_dir/zonefuse" "$img" "$mnt" -f ${7:+-o "$7"} >"$log" 2>&1 &
	zf_pid=$!
	mounted_by "$mnt" "$zf_pid" && return 0
	echo "zonefuse did not mount: $(tail -n 3 "$log")" >&2
	return 1
}

# zf_down MNT: unmount and wait for the daemon; returns its exit status
zf_down() {
	local st=0 i
	for ((i = 0; i < 20; i++)); do
		fusermount3 -u "$1" 2>/dev/null && break
		sleep 0.5
	done
	is_mounted "$1" && fusermount3 -u -z "$1"
	wait "$zf_pid" || st=$?
	zf_pid=
	return "$st"
}

# zf_stats MNT [OUT]: the daemon's counters (KEY=VALUE lines)
zf_stats() {
	getfattr --absolute-names --only-values -n user.zonefuse.stats "$1" >"${2:-/dev/stdout}" 2>/dev/null
}

# stat_of FILE KEY: KEY's value in a stats file
stat_of() { sed -n "s/^$2=//p" "$1" | head -n 1; }

# zf_reap MNT: for a cleanup trap: unmount whatever is mounted at MNT (a
# zonefuse or a kernel file system) and end the daemon zf_pid, given 10 s
# to exit before it is killed; never fails
zf_reap() {
	if is_mounted "$1"; then
		fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || umount -l "$1"
	fi
	if [ -n "${zf_pid:-}" ]; then
		for _ in $(seq 100); do kill -0 "$zf_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$zf_pid" 2>/dev/null
		wait "$zf_pid" 2>/dev/null
		zf_pid=
	fi
	return 0
}
