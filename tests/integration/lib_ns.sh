# shellcheck shell=bash
# zf_ns_run CMD...: runs CMD in a private mount namespace in which /usr/sbin
# (and /sbin, where it is a directory of its own) also holds the build's
# zonefuse as zonefuse, umount.fuse and umount.fuse.zonefuse, as the package
# installs it, so that umount(8), mount(8) and mount.fuse3 run the build
# without installing anything.  Mounts made outside before the call are
# seen inside (a copy); what CMD mounts or unmounts stays inside.  Source
# it after lib.sh and call it after zf_setup; skips (77) without unshare.
zf_ns_run() {
	command -v unshare >/dev/null || zf_skip "unshare is missing (util-linux)"
	[ -n "$ZF_WORK" ] || zf_fail "zf_ns_run before zf_setup"
	ZF_DAEMON="$ZF_DAEMON" ZF_WORK="$ZF_WORK" unshare -m --propagation private bash -c '
		set -e
		over=$(mktemp -d "$ZF_WORK/sbin.XXXXXX")
		for d in /usr/sbin /sbin; do
			[ -d "$d" ] && [ ! -L "$d" ] || continue
			mkdir -p "$over$d"
			mount -t tmpfs tmpfs "$over$d"
			cp -a "$d/." "$over$d/"
			for n in zonefuse umount.fuse umount.fuse.zonefuse; do
				ln -sf "$ZF_DAEMON" "$over$d/$n"
			done
			mount --bind "$over$d" "$d"
		done
		"$@"' zf_ns "$@"
}
