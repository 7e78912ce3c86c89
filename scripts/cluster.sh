#!/bin/bash
# Three "nodes" on this machine, each an emulated zoned device with a
# zonefuse mount (or an ext4 file system on a loop device, the reference),
# carrying a GlusterFS replica-3 volume (one brick per node, mounted through
# the Gluster FUSE client) and a 3-member etcd cluster (one data dir per
# node).  Every address is on loopback; everything started is stopped by
# PID; the work dir is removed.
#
#   scripts/cluster.sh [--faults] [--bench] [--quick] [--fs zonefuse|ext4|both]
#                      [--only gluster|etcd] [--keep]
#
#   (no mode)   set up, write and read a little through both engines, tear down
#   --faults    on each node kind of --fs (default zonefuse), while a Gluster
#               writer (fsync'ed files) and an etcd writer (puts) keep going:
#                 kill9     kill -9 of node 2's zonefuse daemon; remount,
#                           restart its brick and etcd member
#                 powerloss the same, plus `zonefuse-emu powerloss` of node 2's
#                           device before the remount
#                 enospc    node 3 filled to ENOSPC by a file beside the brick;
#                           the file removed, the brick and member restarted
#                 restart   node 1's brick and member stopped, its daemon
#                           unmounted and mounted again, both restarted
#               On ext4 nodes kill9 kills the brick and member processes
#               (the control for "is it Gluster or us") and powerloss is
#               skipped.  Checks after each: heal info drains to 0, every
#               acknowledged file has its checksum through the client and on
#               each brick and the bricks agree on every file; every
#               acknowledged put reads back (linearizable) through each
#               member; while the node was down the two others had a leader
#               and kept acknowledging puts; the restarted member caught up.
#   --bench     workloads on zonefuse and ext4 nodes, one kind after the
#               other per workload: fio 1 MiB sequential and 4 KiB random
#               writes with verify, untar of /usr/include/linux + checksums,
#               db_bench through the Gluster client; etcd put/get rate and
#               latency, and the WAL fsync histogram
#   --quick     smaller: kill9 and powerloss only, fewer files (CI)
#   --keep      keep the work dir (logs) on failure
#
# Needs root, /dev/fuse, glusterfs-server, glusterfs-client, etcd-server,
# etcd-client (and fio, rocksdb-tools for --bench).  glusterd runs with its
# own working and run directories under the work dir, bound to 127.0.0.2;
# its brick and heal logs still go to /var/log/glusterfs (a compiled-in
# path) and its brick sockets to /var/run/gluster: the files this run made
# there are removed at the end.
# Env: ZF_BUILD_DIR (default ./build), CLUSTER_TMP (default $TMPDIR or /tmp),
# CLUSTER_PORT (first etcd port, default 23790; each node kind takes 100),
# CLUSTER_FAULTS (the faults to run, e.g. "enospc"), CLUSTER_ZONES (16 MiB
# zones per node: default 64, 192 with --bench), CLUSTER_FILE_RATE (files a
# second of the Gluster writer: default 10, 3 with --quick), CLUSTER_ZF_OPTS
# (zonefuse options; default "-o writeback_cache=off", see docs/cluster.md).
# Exit: 0 all checks passed, 1 a check failed, 2 usage, 77 a facility missing.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${ZF_BUILD_DIR:-$SRC/build}
LOAD=$SRC/scripts/lib/cluster-load.py
faults=0 bench=0 quick=0 keep=0 kinds=zonefuse only=""
while [ $# -gt 0 ]; do
	case $1 in
	--faults) faults=1; shift ;;
	--bench) bench=1; shift ;;
	--quick) quick=1; shift ;;
	--keep) keep=1; shift ;;
	--fs) kinds=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "cluster.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
case $kinds in both) kinds="zonefuse ext4" ;; zonefuse | ext4) ;; *) echo "cluster.sh: --fs zonefuse|ext4|both" >&2; exit 2 ;; esac
case $only in "" | gluster | etcd) ;; *) echo "cluster.sh: --only gluster|etcd" >&2; exit 2 ;; esac
[ $bench -eq 0 ] || kinds="zonefuse ext4"
use_gluster() { [ "$only" != etcd ]; }
use_etcd() { [ "$only" != gluster ]; }

T0=$(date +%s)
say() { echo "[cluster +$(($(date +%s) - T0))s] $*"; }
fail() { echo "FAIL: cluster: $*" >&2; exit 1; }
skip() { echo "SKIP: cluster: $*"; exit 77; }

# ---- requirements --------------------------------------------------------
[ "$(id -u)" -eq 0 ] || skip "needs root (FUSE mounts, glusterd, trusted.* xattrs)"
[ -c /dev/fuse ] || skip "/dev/fuse is missing"
for b in zonefuse zonefuse-emu mkfs.zonefuse; do
	[ -x "$BUILD/$b" ] || skip "$BUILD/$b is not built"
done
need() { command -v "$1" >/dev/null || skip "$1 is missing (apt-get install $2)"; }
need fusermount3 fuse3
need python3 python3
if use_gluster; then
	need glusterd glusterfs-server
	need gluster glusterfs-server
	need glusterfs glusterfs-client
	GLFSHEAL=$(glusterd --print-libexecdir 2>/dev/null || true)/glfsheal
	[ -x "$GLFSHEAL" ] || GLFSHEAL=$(ls /usr/lib/*/glusterfs/glfsheal /usr/libexec/glusterfs/glfsheal 2>/dev/null | head -n 1)
	[ -x "$GLFSHEAL" ] || skip "glfsheal is missing (glusterfs-server)"
	ip -4 addr show lo | grep -q 'inet 127.0.0.1/8' || skip "lo has no 127.0.0.0/8 (bricks use 127.0.0.2)"
	if ss -ltn 2>/dev/null | awk '{ print $4 }' | grep -Eq '^(0\.0\.0\.0|\*|127\.0\.0\.2|\[::\]):24007$'; then
		skip "port 24007 is taken (another glusterd runs here)"
	fi
fi
if use_etcd; then
	need etcd etcd-server
	need etcdctl etcd-client
fi
if [ $bench -eq 1 ]; then
	need fio fio
	need db_bench rocksdb-tools
	need mkfs.ext4 e2fsprogs
fi
[[ " $kinds " != *" ext4 "* ]] || need mkfs.ext4 e2fsprogs

# ---- state, teardown -----------------------------------------------------
W=$(mktemp -d "${CLUSTER_TMP:-${TMPDIR:-/tmp}}/zf-cluster.XXXXXX")
GD=$W/glusterd
PORT0=${CLUSTER_PORT:-23790}
declare -A ZPID=()    # node -> zonefuse daemon pid (node = KIND-I)
declare -A EPID=()    # node -> etcd member pid
declare -A LOOPMNT=() # node -> 1 while its ext4 is mounted
GD_PID=
declare -a BG=()      # writers and other background helpers
declare -a CLIENTS=() # Gluster client mount points
pre_socks=$(ls /var/run/gluster/ 2>/dev/null || true)
status=0

node_dir() { echo "$W/$1"; }
mnt_of() { echo "$W/$1/mnt"; }
mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
kind_of() { echo "${1%-*}"; }

# stop PID [SIG]: TERM (or SIG), then KILL after 10 s; reaps our children.
stop_pid() {
	local p=$1 i
	[ -n "$p" ] || return 0
	kill "-${2:-TERM}" "$p" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$p" 2>/dev/null || break
		# A zombie child is gone for our purposes once reaped.
		[ "$(ps -o stat= -p "$p" 2>/dev/null | cut -c1)" = Z ] && break
		sleep 0.1
	done
	# The process may exit between the test and the kill: not an error.
	if kill -0 "$p" 2>/dev/null && [ "$(ps -o stat= -p "$p" | cut -c1)" != Z ]; then
		kill -KILL "$p" 2>/dev/null || true
	fi
	wait "$p" 2>/dev/null || true
}

brick_pidfile() { # VOL NODE
	local f
	for f in "$GD"/run/vols/"$1"/*-"$2"-mnt-brick.pid; do [ -f "$f" ] && echo "$f"; done
	return 0
}

teardown() {
	local rc=$?
	trap - EXIT INT TERM ERR
	set +e
	cd /
	local p n m f
	for p in "${BG[@]}"; do stop_pid "$p"; done
	for m in "${CLIENTS[@]}"; do
		mounted "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	for n in "${!EPID[@]}"; do stop_pid "${EPID[$n]}"; done
	if [ -d "$GD/run/vols" ]; then
		for f in "$GD"/run/vols/*/*.pid "$GD"/run/shd/*/*.pid; do
			[ -f "$f" ] && stop_pid "$(cat "$f")"
		done
	fi
	stop_pid "$GD_PID"
	for n in "${!ZPID[@]}"; do
		m=$(mnt_of "$n")
		if mounted "$m"; then
			timeout 60 "$BUILD/zonefuse" -u "$m" 2>/dev/null || fusermount3 -u -z "$m"
		fi
		stop_pid "${ZPID[$n]}"
	done
	for n in "${!LOOPMNT[@]}"; do
		m=$(mnt_of "$n")
		mounted "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	# What glusterd wrote outside the work dir: brick logs and heal logs
	# named after this run's paths and volumes, brick sockets made meanwhile.
	local tag
	tag=$(echo "${W#/}" | tr / -)
	if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ $keep -eq 1 ]; then
		mkdir -p "$W/gluster-logs"
		cp /var/log/glusterfs/bricks/"$tag"-*.log /var/log/glusterfs/glustershd.log "$W/gluster-logs/" 2>/dev/null
	fi
	rm -f /var/log/glusterfs/bricks/"$tag"-*.log /var/log/glusterfs/glfsheal-zc*.log
	for f in /var/run/gluster/*.socket; do
		[ -e "$f" ] && ! grep -qx "${f##*/}" <<<"$pre_socks" && rm -f "$f"
	done
	[ $rc -eq 0 ] && [ $status -ne 0 ] && rc=$status
	if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ $keep -eq 1 ]; then
		echo "cluster: keeping $W" >&2
	else
		rm -rf "$W"
	fi
	[ $rc -eq 0 ] && say "PASS"
	exit $rc
}
trap teardown EXIT
# A command that stops the script under set -e says which it was.
set -E
trap 'echo "cluster: line $LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- nodes ---------------------------------------------------------------
# Without the kernel's write-back cache a brick's write() itself fails with
# ENOSPC, and Gluster marks that copy for healing; with it, the ENOSPC comes
# from the brick's fsync(), which AFR counts as done when another copy's
# fsync succeeded, so a full brick would silently keep zeros (docs/cluster.md).
ZF_OPTS=${CLUSTER_ZF_OPTS--o writeback_cache=off}
# The emulator's flush is bookkeeping only unless ZONEFUSE_EMU_SYNC=1, which
# makes it fdatasync its file as the loop device under ext4 does: on for the
# numbers, so that an fsync costs a real disk flush on both kinds.
[ $bench -eq 0 ] || export ZONEFUSE_EMU_SYNC=${ZONEFUSE_EMU_SYNC:-1}
ZONES=${CLUSTER_ZONES:-64}   # 16 MiB zones: 1 GiB per node for the faults
[ $bench -eq 0 ] || ZONES=${CLUSTER_ZONES:-192}

node_create() { # NODE
	local n=$1 d
	d=$(node_dir "$n")
	mkdir -p "$d/mnt"
	case $(kind_of "$n") in
	zonefuse)
		"$BUILD/zonefuse-emu" create "$d/dev.img" --zone-size 16M --zones "$ZONES" >"$d/emu.log" 2>&1 ||
			fail "$n: zonefuse-emu create: $(tail -n 3 "$d/emu.log")"
		"$BUILD/mkfs.zonefuse" "$d/dev.img" >"$d/mkfs.log" 2>&1 ||
			fail "$n: mkfs.zonefuse: $(tail -n 3 "$d/mkfs.log")"
		: >"$d/zonefuse.log" ;;
	ext4)
		truncate -s $((ZONES * 16))M "$d/dev.img"
		mkfs.ext4 -q -F "$d/dev.img" >"$d/mkfs.log" 2>&1 || fail "$n: mkfs.ext4: $(cat "$d/mkfs.log")" ;;
	esac
}

node_mount() { # NODE
	local n=$1 d m i
	d=$(node_dir "$n")
	m=$(mnt_of "$n")
	case $(kind_of "$n") in
	zonefuse)
		echo "=== $(date '+%F %T') mount" >>"$d/zonefuse.log"
		# shellcheck disable=SC2086 # ZF_OPTS is words
		"$BUILD/zonefuse" "$d/dev.img" "$m" -f $ZF_OPTS >>"$d/zonefuse.log" 2>&1 &
		ZPID[$n]=$!
		for ((i = 0; i < 300; i++)); do
			mounted "$m" && return 0
			kill -0 "${ZPID[$n]}" 2>/dev/null || fail "$n: zonefuse exited before mounting: $(tail -n 5 "$d/zonefuse.log")"
			sleep 0.1
		done
		fail "$n: zonefuse did not mount in 30 s" ;;
	ext4)
		mount -o loop "$d/dev.img" "$m" || fail "$n: mount ext4"
		LOOPMNT[$n]=1 ;;
	esac
}

# Kill -9 the node's zonefuse daemon and clear the dead mount (ext4: no-op).
node_kill9() {
	local n=$1 m
	m=$(mnt_of "$n")
	[ "$(kind_of "$n")" = zonefuse ] || return 0
	kill -KILL "${ZPID[$n]}"
	wait "${ZPID[$n]}" 2>/dev/null || true
	echo "=== $(date '+%F %T') killed with SIGKILL by cluster.sh" >>"$(node_dir "$n")/zonefuse.log"
	unset "ZPID[$n]"
	mounted "$m" && { fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m"; }
	return 0
}

# Clean unmount; the daemon must exit 0.
node_umount() {
	local n=$1 m st=0
	m=$(mnt_of "$n")
	case $(kind_of "$n") in
	zonefuse)
		timeout 120 "$BUILD/zonefuse" -u "$m" || fail "$n: zonefuse -u failed"
		wait "${ZPID[$n]}" || st=$?
		unset "ZPID[$n]"
		[ $st -eq 0 ] || fail "$n: zonefuse exited $st after unmount" ;;
	ext4)
		umount "$m" || fail "$n: umount ext4"
		unset "LOOPMNT[$n]" ;;
	esac
}

# The daemon logs of every zonefuse node must hold no error (the ENOSPC
# fault's refusals are warnings, not errors).
check_zonefuse_logs() {
	local f e bad=0
	for f in "$W"/zonefuse-*/zonefuse.log; do
		[ -f "$f" ] || continue
		e=$(grep -i 'error:' "$f" | head -n 5 || true)
		[ -z "$e" ] || { echo "$f:" >&2; echo "$e" >&2; bad=1; }
	done
	[ $bad -eq 0 ] || fail "a zonefuse daemon logged errors"
}

# ---- Gluster -------------------------------------------------------------
G() { gluster --mode=script --glusterd-sock="$GD/run/glusterd.socket" --log-file="$GD/log/cli.log" "$@"; }

gd_start() {
	mkdir -p "$GD/work" "$GD/run" "$GD/log"
	# The group profiles and hook scripts glusterd expects in its working dir.
	[ -d /var/lib/glusterd/groups ] && cp -r /var/lib/glusterd/groups "$GD/work/"
	[ -d /var/lib/glusterd/hooks ] && cp -r /var/lib/glusterd/hooks "$GD/work/"
	cat >"$GD/glusterd.vol" <<-EOF
	volume management
	    type mgmt/glusterd
	    option working-directory $GD/work
	    option run-directory $GD/run
	    option glusterd-sockfile $GD/run/glusterd.socket
	    option transport-type socket
	    option transport.socket.bind-address 127.0.0.2
	    option transport.socket.listen-port 24007
	    option ping-timeout 0
	    option event-threads 1
	    option base-port 49152
	    option max-port 49451
	end-volume
	EOF
	glusterd -N -f "$GD/glusterd.vol" -p "$GD/glusterd.pid" -l "$GD/log/glusterd.log" >"$GD/log/stdout" 2>&1 &
	GD_PID=$!
	local i
	for ((i = 0; i < 100; i++)); do
		[ -S "$GD/run/glusterd.socket" ] && G volume list >/dev/null 2>&1 && return 0
		kill -0 "$GD_PID" 2>/dev/null || fail "glusterd exited: $(tail -n 5 "$GD/log/glusterd.log")"
		sleep 0.2
	done
	fail "glusterd did not answer in 20 s"
}

vol_of() { echo "zc$1"; }   # one volume per node kind: zczonefuse, zcext4
brick_of() { echo "$(mnt_of "$1")/brick"; }
client_of() { echo "$W/client-$1"; }

gl_create() { # KIND
	local k=$1 v i bricks=()
	v=$(vol_of "$k")
	for i in 1 2 3; do
		mkdir -p "$(brick_of "$k-$i")"
		bricks+=("127.0.0.2:$(brick_of "$k-$i")")
	done
	# force: three bricks on one host (they stand for three machines here).
	G volume create "$v" replica 3 "${bricks[@]}" force >/dev/null || fail "volume create $v"
	# The brick's own health check stops a brick whose file system went
	# away (a killed daemon) within seconds instead of the default 30.
	G volume set "$v" storage.health-check-interval 5 >/dev/null
	G volume start "$v" >/dev/null || fail "volume start $v"
	gl_client_mount "$k"
}

gl_client_mount() {
	local k=$1 c i
	c=$(client_of "$k")
	mkdir -p "$c"
	glusterfs -s 127.0.0.2 --volfile-id="$(vol_of "$k")" -l "$GD/log/client-$k.log" \
		-p "$GD/client-$k.pid" "$c" || fail "glusterfs client mount of $(vol_of "$k")"
	CLIENTS+=("$c")
	for ((i = 0; i < 100; i++)); do
		mounted "$c" && stat "$c" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	fail "the Gluster client did not mount $c"
}

# Prints the number of entries heal info lists over all bricks, or "-" when
# a brick is not connected or glfsheal did not answer for all three.
heal_entries() {
	{ echo "=== $(date '+%T')"; "$GLFSHEAL" "$(vol_of "$1")" glusterd-sock "$GD/run/glusterd.socket" 2>&1; } |
		grep -v -e '^<gfid' -e '^/' | tee -a "$W/heal-info-$1.log" |
		awk '/^Number of entries:/ { b++; if ($4 == "-") d = 1; else s += $4 }
		     END { print (d || b != 3) ? "-" : s + 0 }'
}

# gl_wait_heal KIND TIMEOUT: until heal info shows 0 entries on 3 connected
# bricks three times in a row, 2 s apart (AFR's post-op, which marks a copy
# for healing, may come a second after the write); an index heal is asked
# for every 20 s.
gl_wait_heal() {
	local k=$1 t0 n last=0 now zeros=0
	t0=$(date +%s)
	G volume heal "$(vol_of "$k")" >/dev/null 2>&1 || true
	while :; do
		n=$(heal_entries "$k")
		now=$(date +%s)
		if [ "$n" = 0 ]; then
			((++zeros < 3)) || return 0
		else
			zeros=0
		fi
		((now - t0 < $2)) || { echo "heal info still lists $n entries after $2 s" >&2; return 1; }
		if ((now - last >= 20)); then
			G volume heal "$(vol_of "$k")" >/dev/null 2>&1 || true
			last=$now
		fi
		sleep 2
	done
}

# Stops the brick process of NODE (if Gluster's health check has not).
gl_brick_stop() {
	local k n=$1 f
	k=$(kind_of "$n")
	f=$(brick_pidfile "$(vol_of "$k")" "$n")
	[ -n "$f" ] && stop_pid "$(cat "$f")"
	return 0
}

brick_log() { echo "/var/log/glusterfs/bricks/$(brick_of "$1" | sed 's|^/||; s|/|-|g').log"; }
health_fails() {
	local c
	c=$(grep -c 'health-check failed, going down' "$(brick_log "$1")" 2>/dev/null || true)
	echo "${c:-0}"
}

# gl_brick_wait_health NODE TIMEOUT COUNT T0: seconds from T0 until the brick
# of NODE finds by itself that its file system is gone (its health check
# logs "health-check failed, going down" for the COUNT+1st time, and the
# brick signals itself), or "none" after TIMEOUT s.
gl_brick_wait_health() {
	while [ "$(health_fails "$1")" -le "$3" ]; do
		(($(date +%s) - $4 < $2)) || { echo none; return; }
		sleep 0.5
	done
	echo $(($(date +%s) - $4))
}

gl_brick_start() { G volume start "$(vol_of "$(kind_of "$1")")" force >/dev/null || fail "volume start force"; }

gl_verify() { # KIND DIR ACK: DIR relative to the volume root
	local k=$1 bricks=() i
	for i in 1 2 3; do bricks+=("$(brick_of "$k-$i")/$2"); done
	# The bricks first: a read through the client may start a heal itself,
	# which would hide a copy that heal info did not list.
	python3 "$LOAD" files-verify "$3" "${bricks[@]}" || return 1
	python3 "$LOAD" files-agree "${bricks[@]}" || return 1
	python3 "$LOAD" files-verify "$3" "$(client_of "$k")/$2" || return 1
}

# ---- etcd ----------------------------------------------------------------
kind_index() { case $1 in zonefuse) echo 0 ;; ext4) echo 1 ;; esac; }
eport() { # NODE client|peer|metrics
	local k i b
	k=$(kind_of "$1")
	i=${1##*-}
	b=$((PORT0 + 100 * $(kind_index "$k")))
	case $2 in client) echo $((b + i)) ;; peer) echo $((b + 10 + i)) ;; metrics) echo $((b + 20 + i)) ;; esac
}
eurl() { echo "http://127.0.0.1:$(eport "$1" "$2")"; }
endpoints() { # KIND [except NODE]
	local i out=()
	for i in 1 2 3; do [ "$1-$i" = "${2:-}" ] || out+=("$(eurl "$1-$i" client)"); done
	(IFS=,; echo "${out[*]}")
}

etcd_start() { # NODE new|existing
	local n=$1 k ic=() i
	k=$(kind_of "$n")
	for i in 1 2 3; do ic+=("e$i=$(eurl "$k-$i" peer)"); done
	etcd --name "e${n##*-}" --data-dir "$(mnt_of "$n")/etcd" \
		--listen-client-urls "$(eurl "$n" client)" --advertise-client-urls "$(eurl "$n" client)" \
		--listen-peer-urls "$(eurl "$n" peer)" --initial-advertise-peer-urls "$(eurl "$n" peer)" \
		--listen-metrics-urls "$(eurl "$n" metrics)" \
		--initial-cluster "$(IFS=,; echo "${ic[*]}")" --initial-cluster-token "zc-$k" \
		--initial-cluster-state "$2" >>"$(node_dir "$n")/etcd.log" 2>&1 &
	EPID[$n]=$!
}

etcd_stop() { # NODE: TERM, or nothing if it already died (a failed disk)
	local n=$1
	[ -n "${EPID[$n]:-}" ] || return 0
	stop_pid "${EPID[$n]}"
	unset "EPID[$n]"
}

etcd_wait_healthy() { # KIND TIMEOUT
	local i
	for ((i = 0; i < $2 * 2; i++)); do
		ETCDCTL_API=3 etcdctl --endpoints="$(endpoints "$1")" --command-timeout=2s endpoint health >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	fail "etcd ($1) not healthy after $2 s"
}

# The members listed (comma-separated URLs) agree on one leader; prints its id.
etcd_leader() {
	python3 "$LOAD" etcd-status --endpoints "$1" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
ls = {r.get("leader") for r in rows}
ok = all("error" not in r for r in rows) and len(ls) == 1 and "0" not in ls
print(ls.pop() if ok else "none")'
}

# Seconds until NODE's raft index reaches the highest of the others'.
etcd_wait_caught_up() { # NODE TIMEOUT
	local n=$1 k t0 idx
	k=$(kind_of "$n")
	t0=$(date +%s)
	while :; do
		idx=$(python3 "$LOAD" etcd-status --endpoints "$(endpoints "$k")" | python3 -c '
import json, sys
rows = {r["url"]: r for r in map(json.loads, sys.stdin)}
me = rows.pop(sys.argv[1])
others = max(r.get("raft_index", 0) for r in rows.values())
print("ok" if "error" not in me and me["raft_index"] >= others - 2 else "no")' "$(eurl "$n" client)")
		[ "$idx" = ok ] && { echo $(($(date +%s) - t0)); return 0; }
		(($(date +%s) - t0 < $2)) || return 1
		sleep 0.5
	done
}

# ---- cluster up ----------------------------------------------------------
cluster_up() { # KIND
	local k=$1 i
	for i in 1 2 3; do node_create "$k-$i"; node_mount "$k-$i"; done
	if use_gluster; then gl_create "$k"; fi
	if use_etcd; then
		for i in 1 2 3; do etcd_start "$k-$i" new; done
		etcd_wait_healthy "$k" 30
	fi
	say "$k: 3 nodes up$(use_gluster && echo ", volume $(vol_of "$k") mounted at $(client_of "$k")")$(use_etcd && echo ", etcd at $(endpoints "$k")")"
}

use_gluster && gd_start
for k in $kinds; do cluster_up "$k"; done

if [ $faults -eq 0 ] && [ $bench -eq 0 ]; then
	for k in $kinds; do
		if use_gluster; then
			python3 "$LOAD" files-write "$(client_of "$k")/w" "$W/smoke-$k.ack" --max 20 >/dev/null
			gl_wait_heal "$k" 60 || fail "heal"
			gl_verify "$k" w "$W/smoke-$k.ack" || fail "gluster smoke check"
		fi
		if use_etcd; then
			python3 "$LOAD" etcd-put "$W/smoke-$k.eack" --endpoints "$(endpoints "$k")" --max 50 >/dev/null
			python3 "$LOAD" etcd-verify "$W/smoke-$k.eack" --endpoints "$(endpoints "$k")" || fail "etcd smoke check"
		fi
	done
	check_zonefuse_logs
	exit 0
fi

# ---- faults --------------------------------------------------------------
declare -a RESULTS=() # one line per fault: what was measured

acks() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

# fault KIND NAME: one fault on one node while both writers run, recovery,
# checks.  Appends a line to RESULTS.
fault() {
	local k=$1 name=$2 n stop gack eack wg we i
	case $name in
	kill9 | powerloss) n=$k-2 ;;
	enospc) n=$k-3 ;;
	restart) n=$k-1 ;;
	esac
	if [ "$name" = powerloss ] && [ "$k" != zonefuse ]; then
		say "$k/$name: skipped (no power loss on a loop device)"
		return 0
	fi
	stop=$W/stop-$k-$name gack=$W/$k-$name.ack eack=$W/$k-$name.eack
	local m out
	m=$(mnt_of "$n")
	out=$W/$k-$name.out
	: >"$out"
	say "$k/$name: node $n, writers started"
	if use_gluster; then
		python3 "$LOAD" files-write "$(client_of "$k")/w-$name" "$gack" --stop "$stop" --seed "$RANDOM" \
			--rate "$FILE_RATE" >>"$out" 2>&1 &
		wg=$!
		BG+=("$wg")
	fi
	if use_etcd; then
		python3 "$LOAD" etcd-put "$eack" --endpoints "$(endpoints "$k")" --prefix "$name" --stop "$stop" >>"$out" 2>&1 &
		we=$!
		BG+=("$we")
	fi
	sleep 3

	# -- the fault
	local before_g before_e health=- member=-
	before_g=$(acks "$gack") before_e=$(acks "$eack")
	case $name in
	kill9 | powerloss)
		if [ "$k" = zonefuse ]; then
			local hc t_kill
			hc=$(health_fails "$n") t_kill=$(date +%s)
			node_kill9 "$n"
			if [ "$name" = powerloss ]; then
				"$BUILD/zonefuse-emu" powerloss "$(node_dir "$n")/dev.img" >>"$out" 2>&1 ||
					fail "zonefuse-emu powerloss"
			fi
			# Gluster's brick health check should stop the brick on the dead
			# mount by itself; otherwise it serves ENOTCONN until stopped.
			use_gluster && health=$(gl_brick_wait_health "$n" 20 "$hc" "$t_kill")
		else
			use_gluster && stop_pid "$(cat "$(brick_pidfile "$(vol_of "$k")" "$n")")" KILL
			use_etcd && stop_pid "${EPID[$n]}" KILL
		fi ;;
	enospc)
		local ferr
		ferr=$(dd if=/dev/zero of="$m/fill" bs=1M 2>&1 >/dev/null || true)
		grep -q 'No space left' <<<"$ferr" || fail "$k/$name: filling $m did not end in ENOSPC: $ferr"
		say "$k/$name: $m full ($(du -m "$m/fill" | cut -f1) MiB file beside the brick)"
		sleep 5 ;;
	restart)
		use_etcd && etcd_stop "$n"
		use_gluster && gl_brick_stop "$n"
		node_umount "$n" ;;
	esac
	use_gluster && gl_brick_stop "$n"
	if use_etcd && [ -n "${EPID[$n]:-}" ]; then
		# A member whose disk failed exits by itself (etcd treats a failed
		# WAL write or fsync as fatal); one that did not is stopped.
		for ((i = 0; i < 20; i++)); do
			kill -0 "${EPID[$n]}" 2>/dev/null || break
			sleep 0.5
		done
		member=exited
		if kill -0 "${EPID[$n]}" 2>/dev/null; then
			member=stopped
			say "$k/$name: etcd member ${n##*-} still running, stopping it"
		fi
		etcd_stop "$n"
	fi

	# -- one node down: the others go on
	local g1 e1 g2 e2 leader=-
	g1=$(acks "$gack") e1=$(acks "$eack")
	# Long enough for an election (1 s timeout) and a put that went to the
	# stopped member to time out (2 s) and be retried on another.
	sleep 8
	g2=$(acks "$gack") e2=$(acks "$eack")
	if use_etcd; then
		leader=$(etcd_leader "$(endpoints "$k" "$n")")
		[ "$leader" != none ] || fail "$k/$name: no leader among the two members left"
		((e2 > e1)) || fail "$k/$name: no put acknowledged with member ${n##*-} down"
	fi
	if use_gluster; then
		((g2 > g1)) || fail "$k/$name: no file acknowledged with brick ${n##*-} down"
	fi

	# -- recovery
	case $name in
	kill9 | powerloss) [ "$k" = zonefuse ] && node_mount "$n" ;;
	enospc) rm -f "$m/fill" ;;
	restart) node_mount "$n" ;;
	esac
	local t_start heal=- catch=-
	t_start=$(date +%s)
	use_gluster && gl_brick_start "$n"
	use_etcd && etcd_start "$n" existing
	sleep 3
	touch "$stop"
	[ -z "${wg:-}" ] || wait "$wg" || fail "$k/$name: the Gluster writer failed: $(tail -n 3 "$out")"
	[ -z "${we:-}" ] || wait "$we" || fail "$k/$name: the etcd writer failed: $(tail -n 3 "$out")"
	BG=()
	if use_etcd; then
		etcd_wait_caught_up "$n" 120 >/dev/null || fail "$k/$name: member ${n##*-} did not catch up in 120 s"
		catch=$(($(date +%s) - t_start))
		python3 "$LOAD" etcd-verify "$eack" --endpoints "$(endpoints "$k")" | tee -a "$out" ||
			fail "$k/$name: acknowledged puts lost"
	fi
	if use_gluster; then
		local hlimit=240
		[ $quick -eq 0 ] || hlimit=120
		gl_wait_heal "$k" "$hlimit" || { status=1; say "$k/$name: FAILED: heal did not drain"; }
		heal=$(($(date +%s) - t_start))
		gl_verify "$k" "w-$name" "$gack" | tee -a "$out" || fail "$k/$name: acknowledged files lost or bricks differ"
		rm -rf "$(client_of "$k")/w-$name"
	fi
	RESULTS+=("$(printf '| %s | %s | %s (%s) | %s | %s s | %s (%s) | %s | %s s |' \
		"$k" "$name" "$(acks "$gack")" "$((g2 - before_g))" "$health" "$heal" \
		"$(acks "$eack")" "$((e2 - before_e))" "$member" "$catch")")
	say "$k/$name: ok: ${RESULTS[-1]}"
}

if [ $faults -eq 1 ]; then
	# Files a second the Gluster writer makes: what a fault leaves to heal,
	# and so the heal time, grows with it.
	FILE_RATE=${CLUSTER_FILE_RATE:-10}
	[ $quick -eq 0 ] || FILE_RATE=${CLUSTER_FILE_RATE:-3}
	flist=${CLUSTER_FAULTS:-kill9 powerloss enospc restart}
	[ $quick -eq 0 ] || flist=${CLUSTER_FAULTS:-kill9 powerloss}
	for k in $kinds; do
		for f in $flist; do fault "$k" "$f"; done
	done
	check_zonefuse_logs
	echo
	echo "== faults: all checks passed for these =="
	echo "| nodes | fault | files acked (during the fault) | brick health check fired after | heal info 0 after | puts acked (during the fault) | etcd member | caught up after |"
	echo "|---|---|---:|---:|---:|---:|---|---:|"
	for r in "${RESULTS[@]}"; do echo "$r"; done
	[ $bench -eq 1 ] || exit $status
fi

# ---- bench ---------------------------------------------------------------
declare -A NUM=() # "workload|kind" -> value
ROWS=()           # workload names in order, with units

note() { # WORKLOAD KIND VALUE
	[[ " ${ROWS[*]} " == *" $1 "* ]] || ROWS+=("$1")
	NUM["$1|$2"]=$3
	say "bench $2: $1 = $3"
}

fio_json() { # KIND NAME fio args...: prints "write_bw_MiBs write_iops"
	local k=$1 name=$2 d
	shift 2
	d=$(client_of "$k")/fio-$name
	mkdir -p "$d"
	fio --name="$name" --directory="$d" --output-format=json --output="$W/fio-$k-$name.json" \
		--ioengine=psync --verify=crc32c --do_verify=1 --end_fsync=1 --verify_state_save=0 "$@" >/dev/null ||
		fail "fio $name on $k"
	python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
if j.get("error"): sys.exit("fio error %d" % j["error"])
print("%.1f %.0f %.1f" % (j["write"]["bw"] / 1024, j["write"]["iops"], j["read"]["bw"] / 1024))' "$W/fio-$k-$name.json"
	rm -rf "$d"
}

bench_gluster() { # KIND WORKLOAD
	local k=$1 c r t0 t1 wbw rbw iops
	c=$(client_of "$k")
	case $2 in
	seq)
		read -r wbw _ rbw < <(fio_json "$k" seq --rw=write --bs=1M --size="$SEQ_MB"M)
		note "Gluster: fio 1 MiB sequential write, MiB/s" "$k" "$wbw"
		note "Gluster: its crc32c verify read, MiB/s" "$k" "$rbw" ;;
	rand)
		read -r _ iops _ < <(fio_json "$k" rand --rw=randwrite --bs=4k --size="$RAND_MB"M)
		note "Gluster: fio 4 KiB random write, IOPS" "$k" "$iops" ;;
	untar)
		mkdir -p "$c/untar"
		t0=$(date +%s.%N)
		tar -xf "$W/src.tar" -C "$c/untar"
		sync -f "$c/untar"
		t1=$(date +%s.%N)
		r=$(cd "$c/untar/linux" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
		[ "$r" = "$SRC_SUM" ] || fail "untar on $k: checksums differ from the source tree"
		note "Gluster: untar of /usr/include/linux ($SRC_FILES files, $SRC_MB MiB) + sync, s" "$k" \
			"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')"
		rm -rf "$c/untar" ;;
	dbbench)
		db_bench --db="$c/db" --benchmarks=fillrandom,readrandom --num="$DB_NUM" --value_size=400 \
			--compression_type=none --threads=1 --statistics=0 >"$W/db_bench-$k.log" 2>&1 ||
			fail "db_bench on $k: $(tail -n 3 "$W/db_bench-$k.log")"
		note "Gluster: db_bench fillrandom ($DB_NUM x 400 B), ops/s" "$k" \
			"$(awk '$1 == "fillrandom" { print $5 }' "$W/db_bench-$k.log")"
		note "Gluster: db_bench readrandom, ops/s" "$k" \
			"$(awk '$1 == "readrandom" { print $5 }' "$W/db_bench-$k.log")"
		rm -rf "$c/db" ;;
	esac
}

bench_etcd() { # KIND
	local k=$1 i urls=() line
	for i in 1 2 3; do urls+=("$(eurl "$k-$i" metrics)"); done
	python3 "$LOAD" etcd-bench --endpoints "$(endpoints "$k")" --clients 8 --seconds "$ETCD_S" >"$W/etcd-bench-$k.log" ||
		fail "etcd-bench on $k"
	while read -r line; do
		set -- $line
		note "etcd: ${1} (8 clients, 256 B values), ops/s" "$k" "${3#ops_s=}"
		note "etcd: ${1} latency p50 / p99, ms" "$k" "${4#p50_ms=} / ${5#p99_ms=}"
	done <"$W/etcd-bench-$k.log"
	line=$(python3 "$LOAD" wal-fsync "${urls[@]}")
	set -- $line
	note "etcd: WAL fsyncs (3 members): count, mean ms, p99 bucket ms" "$k" "${2#count=}, ${3#mean_ms=}, <= ${5#p99_le_ms=}"
}

if [ $bench -eq 1 ]; then
	SEQ_MB=512 RAND_MB=32 DB_NUM=200000 ETCD_S=20
	if [ $quick -eq 1 ]; then SEQ_MB=64 RAND_MB=8 DB_NUM=20000 ETCD_S=5; fi
	if use_gluster; then
		# A source tree: the kernel's UAPI headers (~760 files).
		tar -C /usr/include -cf "$W/src.tar" linux
		SRC_FILES=$(tar -tf "$W/src.tar" | grep -vc '/$')
		SRC_MB=$(( $(stat -c %s "$W/src.tar") >> 20 ))
		SRC_SUM=$(cd /usr/include/linux && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
		for wl in seq rand untar dbbench; do
			# One kind after the other for each workload, the order swapped
			# each time, so that a busy moment of the shared machine does not
			# fall on one kind only.
			order="zonefuse ext4"
			[ $((${#ROWS[@]} % 2)) -eq 0 ] || order="ext4 zonefuse"
			for k in $order; do sync; echo 3 >/proc/sys/vm/drop_caches; bench_gluster "$k" "$wl"; done
		done
	fi
	if use_etcd; then
		for k in zonefuse ext4; do bench_etcd "$k"; done
	fi
	check_zonefuse_logs
	echo
	echo "== bench ($(nproc) CPUs, $(date -u '+%F %H:%M UTC'); zonefuse options: ${ZF_OPTS:-none}) =="
	echo "| workload | zonefuse | ext4 on loop |"
	echo "|---|---:|---:|"
	for r in "${ROWS[@]}"; do echo "| $r | ${NUM["$r|zonefuse"]:--} | ${NUM["$r|ext4"]:--} |"; done
fi
exit $status
