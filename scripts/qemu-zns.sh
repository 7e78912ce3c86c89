#!/bin/bash
# Run a command inside a QEMU guest whose /dev/nvme0n1 is a real kernel zoned
# block device (QEMU's NVMe ZNS emulation under Debian's kernel), with the
# source tree and the build folder shared at the same paths (virtio 9p).
#
#   scripts/qemu-zns.sh [options] -- COMMAND [ARGS...]
#
# COMMAND runs in the guest (bash, as root, in the current directory when it
# is inside a shared folder) and this script exits with its exit code.
# Output goes to the console, which is copied to stdout (and kept in the run
# directory's console.log).  See docs/qemu.md.
#
# Device options (sizes take K, M, G suffixes, powers of 1024):
#   --zone-size S        zone size (16M)
#   --zone-capacity C    zone capacity, <= zone size (= zone size)
#   --max-open N         max open zones, 0 = no limit (14)
#   --max-active N       max active zones, 0 = no limit (14)
#   --size S             zoned namespace size (1G)
#   --conv-ns SIZE       add a conventional namespace of SIZE as /dev/nvme0n2
#   --lba-size B         logical block size, 512 or 4096 (4096)
#   --image FILE         backing file of the zoned namespace, kept after the
#                        run (created if missing).  Zone states survive too:
#                        QEMU forgets them at exit, so every write and zone
#                        command is traced, the states are written to
#                        FILE.zones, and the next boot with FILE restores them
#                        (tests/qemu/zns-state.c).  The conventional
#                        namespace is kept as FILE.conv.
# Run options:
#   --build-dir DIR      build folder with our binaries (build/)
#   --power-cut          cut the power when the command creates the file
#                        $ZF_QEMU_RUN/power-cut (the guest is stopped, the
#                        device finishes the commands it accepted, QEMU
#                        quits); exit 0 if the cut happened
#   --timeout SEC        kill the guest after SEC seconds, exit 124 (1200)
#   --accel tcg|kvm      CPU emulation (tcg; on the machines seen so far
#                        /dev/kvm opens but a KVM guest never boots, see
#                        docs/qemu.md "Not done yet")
#   --cpu MODEL          QEMU -cpu (max under tcg, host under kvm)
#   --share DIR          share DIR with the guest at the same path (9p,
#                        repeatable; e.g. a result folder outside the tree)
#   --mem M --smp N      guest memory (2G) and CPUs (2)
#   --extra PROG         put a host program and its libraries in the
#                        initramfs (repeatable; e.g. db_bench, mkfs.btrfs)
#   --module NAME        load this kernel module too (repeatable; btrfs, f2fs)
#   --no-install         never install packages: exit 77 if QEMU, busybox,
#                        cpio or kmod is missing (the kernel is still fetched)
#   --keep               keep the run directory (printed at the end)
#   --quiet              do not copy the console to stdout
#
# Inside the guest: ZF_QEMU_RUN (run directory, shared), ZF_BUILD_DIR,
# ZF_SRC_DIR, ZF_QEMU_ZONED=/dev/nvme0n1, ZF_QEMU_CONV=/dev/nvme0n2 (with
# --conv-ns), plus any ZF_* variables of the caller's environment.
#
# Exit codes: the command's; 124 timeout; 125 the guest did not report one
# (kernel panic, boot failure); 77 something needed is missing; 2 usage.
# Cache: the extracted kernel and initramfs images go to $ZF_QEMU_CACHE
# (/var/cache/zonefuse-qemu).
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
zone_size=16M zone_cap= max_open=14 max_active=14 ns_size=1G conv_ns= lba=4096
image= build_dir=$src/build power_cut=0 timeout=1200 accel=tcg mem=2G smp=2
no_install=${ZF_QEMU_NO_INSTALL:-0} keep=0 quiet=0 cpu=
extras=() modules_extra=() shares_extra=()
cache=${ZF_QEMU_CACHE:-/var/cache/zonefuse-qemu}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}
die() { echo "qemu-zns: $*" >&2; exit 1; }
skip() { echo "qemu-zns: SKIP: $*" >&2; exit 77; }
note() { echo "qemu-zns: $*" >&2; }

while [ $# -gt 0 ]; do
	case "$1" in
	--zone-size) zone_size=$2; shift 2 ;;
	--zone-capacity) zone_cap=$2; shift 2 ;;
	--max-open) max_open=$2; shift 2 ;;
	--max-active) max_active=$2; shift 2 ;;
	--size) ns_size=$2; shift 2 ;;
	--conv-ns) conv_ns=$2; shift 2 ;;
	--lba-size) lba=$2; shift 2 ;;
	--image) image=$2; shift 2 ;;
	--build-dir) build_dir=$2; shift 2 ;;
	--power-cut) power_cut=1; shift ;;
	--timeout) timeout=$2; shift 2 ;;
	--accel) accel=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--cpu) cpu=$2; shift 2 ;;
	--share) shares_extra+=("$2"); shift 2 ;;
	--extra) extras+=("$2"); shift 2 ;;
	--module) modules_extra+=("$2"); shift 2 ;;
	--no-install) no_install=1; shift ;;
	--keep) keep=1; shift ;;
	--quiet) quiet=1; shift ;;
	-h|--help) usage ;;
	--) shift; break ;;
	*) echo "qemu-zns: unknown option $1" >&2; usage ;;
	esac
done
[ $# -gt 0 ] || { echo "qemu-zns: no command given" >&2; usage; }
[ "$(id -u)" -eq 0 ] || skip "needs root (packages, 9p passthrough shares)"

bytes() { # SIZE with optional K/M/G suffix -> bytes
	local v=$1 m=1
	case "$v" in
	*[kK]) m=1024; v=${v%?} ;;
	*[mM]) m=$((1024 * 1024)); v=${v%?} ;;
	*[gG]) m=$((1024 * 1024 * 1024)); v=${v%?} ;;
	esac
	[[ "$v" =~ ^[0-9]+$ ]] || die "bad size: $1"
	echo $((v * m))
}
zs=$(bytes "$zone_size")
zc=$(bytes "${zone_cap:-$zone_size}")
nsb=$(bytes "$ns_size")
[ "$lba" = 512 ] || [ "$lba" = 4096 ] || die "--lba-size must be 512 or 4096"
((zc <= zs && zc > 0 && zc % lba == 0)) || die "zone capacity must be in (0, zone size] and a multiple of $lba"
((nsb >= zs && nsb % zs == 0)) || die "--size must be a multiple of the zone size"
((max_open <= max_active || max_active == 0)) || die "--max-open must not exceed --max-active"
build_dir=$(realpath -m "$build_dir")
[ -d "$build_dir" ] || die "build folder $build_dir does not exist (meson setup $build_dir && ninja -C $build_dir)"

# ---- packages --------------------------------------------------------------
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
command -v depmod >/dev/null && command -v modprobe >/dev/null || need+=(kmod)
command -v python3 >/dev/null || need+=(python3)
command -v cc >/dev/null || need+=(gcc libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
	[ $no_install -eq 0 ] || skip "missing ${need[*]} (run scripts/qemu-zns.sh once, or scripts/deps.sh ${need[*]})"
	"$src/scripts/deps.sh" "${need[@]}" >&2
fi

# ---- kernel: Debian's linux-image-amd64, extracted (no initramfs hook) ------
mkdir -p "$cache"
kdir=$(ls -d "$cache"/linux-image-*/ 2>/dev/null | sort -V | tail -n 1 || true)
kdir=${kdir%/}
if [ -z "$kdir" ] || [ ! -f "$kdir/.complete" ]; then
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	if [ -z "$kpkg" ]; then
		apt-get update -q >&2 || true
		kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	fi
	[ -n "$kpkg" ] || skip "cannot resolve the Debian kernel package (apt-cache depends linux-image-amd64)"
	kdir=$cache/$kpkg
	note "fetching $kpkg into $kdir (once)"
	rm -rf "$kdir" "$cache/dl"
	mkdir -p "$cache/dl"
	(cd "$cache/dl" && apt-get download -q -o APT::Sandbox::User=root "$kpkg" >&2) ||
		skip "apt-get download $kpkg failed"
	dpkg-deb -x "$cache"/dl/"$kpkg"_*.deb "$kdir"
	rm -rf "$cache/dl"
	kver=$(ls "$kdir/lib/modules")
	depmod -b "$kdir" "$kver"
	touch "$kdir/.complete"
fi
kver=$(ls "$kdir/lib/modules")
vmlinuz=$kdir/boot/vmlinuz-$kver
[ -f "$vmlinuz" ] || die "no kernel image in $kdir"
# Boot the uncompressed ELF kernel through its PVH entry: decompressing the
# xz bzImage under TCG takes ~8 s of every boot.
if [ ! -f "$kdir/vmlinux" ] && [ ! -f "$kdir/vmlinux.none" ]; then
	off=$(LC_ALL=C grep -abo -m1 $'\xfd7zXZ' "$vmlinuz" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
	[ -z "$off" ] || { tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream >"$kdir/vmlinux.tmp"; } 2>/dev/null || true
	if [ -n "$off" ] && head -c 4 "$kdir/vmlinux.tmp" | grep -q ELF; then
		mv "$kdir/vmlinux.tmp" "$kdir/vmlinux"
	else
		rm -f "$kdir/vmlinux.tmp"
		: >"$kdir/vmlinux.none"
	fi
fi
kernel=$vmlinuz
[ -s "$kdir/vmlinux" ] && kernel=$kdir/vmlinux

# ---- run directory and cleanup ----------------------------------------------
run=$(mktemp -d "${TMPDIR:-/tmp}/zf-qemu.XXXXXX")
chmod 755 "$run"
qpid= tpid= tmp_image= tmp_conv=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	trap '' PIPE	# stdout may be a pipe whose reader is gone
	set +e
	if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
		kill -TERM "$qpid" 2>/dev/null
		for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$qpid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$qpid" 2>/dev/null
		wait "$qpid" 2>/dev/null
	fi
	if [ -n "$tpid" ]; then kill "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null; fi
	[ -n "$tmp_image" ] && rm -f "$tmp_image"
	[ -n "$tmp_conv" ] && rm -f "$tmp_conv"
	if [ $keep -eq 1 ]; then note "run directory kept: $run"; else rm -rf "$run"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- initramfs ---------------------------------------------------------------
modlist=()
add_module() { # name: its dependency chain, in load order, without repeats
	local line f
	while read -r line; do
		case "$line" in insmod\ *) ;; *) continue ;; esac
		f=${line#insmod }
		f=${f%% *}
		f=$(realpath -m "$f")
		local have=0 m
		for m in "${modlist[@]}"; do [ "$m" = "$f" ] && have=1; done
		[ $have -eq 1 ] || modlist+=("$f")
	done < <(modprobe -d "$kdir" -S "$kver" --show-depends "$1" 2>/dev/null)
}
for m in virtio_pci 9pnet_virtio 9p nvme fuse "${modules_extra[@]}"; do
	add_module "$m"
done
[ ${#modlist[@]} -ge 4 ] || die "module dependencies not found in $kdir (modprobe --show-depends)"

# programs in the initramfs (host paths), the ELF files of the build folder
# (run from the share; only their libraries are copied)
progs=(/bin/bash)
for p in fio fusermount3 mountpoint getfattr setfattr blkzone stat sha256sum \
	cmp timeout "${extras[@]}"; do
	q=$(command -v "$p" 2>/dev/null) || { [ -x "$p" ] && q=$p; } ||
		{ note "warning: $p not found on the host, not in the guest"; continue; }
	progs+=("$q")
done
mapfile -t build_elfs < <(find "$build_dir" -maxdepth 2 -type f -perm -u+x \
	-not -path '*/meson-*' 2>/dev/null | while read -r f; do
	head -c 4 "$f" 2>/dev/null | grep -q ELF && echo "$f"; done | sort)
libs=()
mapfile -t libs < <(for f in "${progs[@]}" "${build_elfs[@]}"; do
	ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }'
done | sort -u)

zstate_src=$src/tests/qemu/zns-state.c
key=$( { echo "$kver"; cat "$0" "$src/tests/qemu/init" "$zstate_src";
	printf '%s\n' "${modlist[@]}"; stat -L -c '%n %s %Y' /bin/busybox "${progs[@]}" "${libs[@]}"; } |
	sha256sum | cut -c1-16)
initrd=$cache/initrd-$key.cpio
if [ ! -f "$initrd" ]; then
	note "building the initramfs ($initrd)"
	ir=$run/initramfs
	# merged /usr like Debian 12: /bin, /sbin, /lib, /lib64 -> usr/...
	mkdir -p "$ir"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,proc,sys,dev,tmp,run,root,mnt}
	for d in bin sbin lib lib64; do ln -s "usr/$d" "$ir/$d"; done
	mkdir -p "$ir/usr/lib/modules"
	cp /bin/busybox "$ir/usr/bin/busybox"
	install -m 755 "$src/tests/qemu/init" "$ir/init"
	cc -O2 -Wall -static -o "$ir/usr/bin/zns-state" "$zstate_src"
	for m in "${modlist[@]}"; do
		b=$(basename "$m")
		case "$b" in
		*.ko.xz) xz -dc "$m" >"$ir/lib/modules/${b%.xz}"; b=${b%.xz} ;;
		*.ko.zst) zstd -qdc "$m" >"$ir/lib/modules/${b%.zst}"; b=${b%.zst} ;;
		*) cp "$m" "$ir/lib/modules/$b" ;;
		esac
		echo "$b"
	done >"$ir/etc/zf-modules"
	for f in "${progs[@]}" "${libs[@]}"; do
		r=$(readlink -f "$f")
		mkdir -p "$ir$(dirname "$r")"
		[ -e "$ir$r" ] || cp "$r" "$ir$r"
		# the name we were given, when it is not the same file via /usr
		if [ ! -e "$ir$f" ]; then mkdir -p "$ir$(dirname "$f")"; ln -s "$r" "$ir$f"; fi
	done
	echo 'root:x:0:0:root:/root:/bin/bash' >"$ir/etc/passwd"
	echo 'root:x:0:' >"$ir/etc/group"
	: >"$ir/etc/fuse.conf"
	(cd "$ir" && find . | cpio -o -H newc --quiet) >"$initrd.$$.tmp"
	mv "$initrd.$$.tmp" "$initrd"
	rm -rf "$ir"
	# keep the three newest images
	ls -t "$cache"/initrd-*.cpio | tail -n +4 | xargs -r rm -f
fi

# ---- devices -----------------------------------------------------------------
if [ -n "$image" ]; then
	image=$(realpath -m "$image")
	if [ ! -f "$image" ]; then
		truncate -s "$nsb" "$image"
		rm -f "$image.zones"
	fi
	[ "$(stat -c %s "$image")" -eq "$nsb" ] || die "$image is not $nsb bytes (--size)"
	[ -f "$image.zones" ] && cp "$image.zones" "$run/zones.in"
else
	tmp_image=$run/zns.img
	image=$tmp_image
	truncate -s "$nsb" "$image"
fi
nvme_args=(-device nvme,id=nvme0,serial=zonefuse0
	-drive "file=$image,if=none,id=zns,format=raw,cache=unsafe,discard=unmap"
	-device "nvme-ns,drive=zns,bus=nvme0,nsid=1,logical_block_size=$lba,physical_block_size=$lba,zoned=true,zoned.zone_size=$zs,zoned.zone_capacity=$zc,zoned.max_open=$max_open,zoned.max_active=$max_active")
echo 1 >"$run/namespaces"
if [ -n "$conv_ns" ]; then
	cb=$(bytes "$conv_ns")
	if [ -n "$tmp_image" ]; then conv=$run/conv.img; tmp_conv=$conv; else conv=$image.conv; fi
	[ -f "$conv" ] || truncate -s "$cb" "$conv"
	nvme_args+=(-drive "file=$conv,if=none,id=conv,format=raw,cache=unsafe"
		-device "nvme-ns,drive=conv,bus=nvme0,nsid=2,logical_block_size=$lba,physical_block_size=$lba")
	echo 2 >"$run/namespaces"
fi
trace_args=()
if [ -z "$tmp_image" ]; then
	printf '%s\n' pci_nvme_io_cmd pci_nvme_write pci_nvme_err_req_status \
		pci_nvme_reset_zone pci_nvme_finish_zone >"$run/trace-events"
	trace_args=(-trace "events=$run/trace-events" -D "$run/trace.log")
fi

# ---- shares: the source tree, the build folder if outside it, the run dir ---
shares=("zfsrc:$src")
share_args=(-fsdev "local,id=zfsrc,path=$src,security_model=passthrough"
	-device virtio-9p-pci,fsdev=zfsrc,mount_tag=zfsrc)
case "$build_dir/" in
"$src"/*) ;;
*) shares+=("zfbuild:$build_dir")
	share_args+=(-fsdev "local,id=zfbuild,path=$build_dir,security_model=passthrough"
		-device virtio-9p-pci,fsdev=zfbuild,mount_tag=zfbuild) ;;
esac
i=0
for d in "${shares_extra[@]}"; do
	d=$(realpath -m "$d")
	[ -d "$d" ] || die "--share $d is not a directory"
	case "$d/" in "$src"/*) continue ;; esac
	i=$((i + 1))
	shares+=("zfshare$i:$d")
	share_args+=(-fsdev "local,id=zfshare$i,path=$d,security_model=passthrough"
		-device "virtio-9p-pci,fsdev=zfshare$i,mount_tag=zfshare$i")
done
share_args+=(-fsdev "local,id=zfrun,path=$run,security_model=passthrough"
	-device virtio-9p-pci,fsdev=zfrun,mount_tag=zfrun)

# ---- the command -------------------------------------------------------------
cwd=$(pwd)
{
	echo "# generated by scripts/qemu-zns.sh"
	echo "export HOME=/root TMPDIR=/tmp PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	printf 'export ZF_QEMU=1 ZF_QEMU_RUN=%q ZF_BUILD_DIR=%q ZF_SRC_DIR=%q ZF_QEMU_ZONED=/dev/nvme0n1\n' \
		"$run" "$build_dir" "$src"
	[ -z "$conv_ns" ] || echo "export ZF_QEMU_CONV=/dev/nvme0n2"
	while IFS='=' read -r k v; do
		case "$k" in ZF_QEMU*|ZF_BUILD_DIR|ZF_SRC_DIR) continue ;; esac
		printf 'export %s=%q\n' "$k" "$v"
	done < <(env | grep -E '^ZF_[A-Za-z0-9_]+=' || true)
	printf 'cd %q 2>/dev/null || cd /\n' "$cwd"
	printf '%q ' "$@"
	echo
} >"$run/cmd.sh"

# ---- accelerator ---------------------------------------------------------------
case "$accel" in tcg|kvm) ;; *) die "--accel must be tcg or kvm" ;; esac
if [ -z "$cpu" ]; then
	cpu=max
	[ "$accel" = kvm ] && cpu=host
fi

# ---- boot ----------------------------------------------------------------------
: >"$run/console.log"
t_start=$(date +%s.%N)
qemu-system-x86_64 -machine pc -accel "$accel" -cpu "$cpu" -smp "$smp" -m "$mem" \
	-nodefaults -display none -no-reboot \
	-kernel "$kernel" -initrd "$initrd" \
	-append "console=ttyS0,115200 loglevel=4 panic=-1 rdinit=/init zf.run=$run zf.shares=$(IFS=,; echo "${shares[*]}")" \
	-chardev "file,id=con,path=$run/console.log" -serial chardev:con \
	-monitor "unix:$run/monitor.sock,server=on,wait=off" \
	"${share_args[@]}" "${nvme_args[@]}" "${trace_args[@]}" \
	</dev/null >"$run/qemu.out" 2>&1 &
qpid=$!
if [ $quiet -eq 0 ]; then
	tail -n +1 -f --pid="$qpid" "$run/console.log" &
	tpid=$!
fi

monitor() { # HMP command through the monitor socket
	python3 - "$run/monitor.sock" "$1" <<'PY' >/dev/null 2>&1 || true
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(30)
s.sendall(sys.argv[2].encode() + b"\n")
buf = b""
end = time.time() + 30
while time.time() < end:
    try:
        d = s.recv(65536)
    except socket.timeout:
        break
    if not d:
        break
    buf += d
    if buf.count(b"(qemu)") >= 2:
        break
PY
}

cut=0 timed_out=0
deadline=$(($(date +%s) + timeout))
while kill -0 "$qpid" 2>/dev/null; do
	if [ $power_cut -eq 1 ] && [ $cut -eq 0 ] && [ -e "$run/power-cut" ]; then
		cut=1
		monitor stop	# vCPUs stop; the device completes what it accepted
		monitor quit
		note "power cut"
	fi
	if [ "$(date +%s)" -ge "$deadline" ]; then
		timed_out=1
		note "timeout after ${timeout}s: stopping the guest"
		monitor quit
		sleep 1
		kill -TERM "$qpid" 2>/dev/null || true
		sleep 1
		kill -KILL "$qpid" 2>/dev/null || true
		break
	fi
	sleep 0.2
done
qrc=0
wait "$qpid" || qrc=$?
qpid=
if [ -n "$tpid" ]; then wait "$tpid" 2>/dev/null || true; tpid=; fi
t_end=$(date +%s.%N)
if [ -s "$run/qemu.out" ]; then
	grep -v '^$' "$run/qemu.out" | sed 's/^/qemu-zns: qemu: /' >&2 || true
fi

# zone states for the next boot
if [ ${#trace_args[@]} -gt 0 ] && [ -f "$run/trace.log" ]; then
	python3 "$src/tests/qemu/zone-trace.py" --zone-blocks $((zs / lba)) \
		--cap-blocks $((zc / lba)) --zones $((nsb / zs)) "$run/trace.log" >"$image.zones.tmp" &&
		mv "$image.zones.tmp" "$image.zones" ||
		{ rm -f "$image.zones.tmp"; note "warning: could not derive the zone states; $image.zones removed"; rm -f "$image.zones"; }
fi

boot=$(cat "$run/boot-time" 2>/dev/null || echo '?')
total=$(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }')
if [ $timed_out -eq 1 ]; then
	rc=124
elif [ $cut -eq 1 ]; then
	rc=0
	note "guest stopped by the power cut after ${total}s"
elif [ -f "$run/rc" ]; then
	rc=$(cat "$run/rc")
	if [ $power_cut -eq 1 ]; then
		note "the command ended (exit $rc) before the power cut"
		[ "$rc" -ne 0 ] || rc=1
	fi
elif rc=$(grep -a -o 'ZF-QEMU-EXIT [0-9]*' "$run/console.log" | tail -n 1 | cut -d' ' -f2) && [ -n "$rc" ]; then
	:
else
	rc=125
	note "the guest ended without an exit code (QEMU exit $qrc); last console lines:"
	tail -n 20 "$run/console.log" | sed 's/^/  | /' >&2
fi
note "exit $rc (kernel $kver, $accel, boot ${boot}s, total ${total}s)"
exit "$rc"
