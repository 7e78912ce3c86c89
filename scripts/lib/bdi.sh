# Sourced by the bench scripts.  bdi_like_zonefuse MOUNTPOINT: give the
# FUSE mount at MOUNTPOINT the kernel writeback and readahead settings
# zonefuse sets for its own mounts (fusefs/bdi.c: no strict dirty limit,
# 256 MiB max_bytes, 1 MiB read_ahead_kb), so that a reference file system
# (libfuse's null) sees the same kernel limits.  Quietly does nothing on a
# kernel without the per-bdi files.
bdi_like_zonefuse() {
	local mm bdi
	mm=$(awk -v m="$1" '$5 == m { d = $3 } END { print d }' /proc/self/mountinfo)
	bdi=/sys/class/bdi/$mm
	if [ -n "$mm" ] && [ -w "$bdi/read_ahead_kb" ]; then
		echo $((256 << 20)) >"$bdi/max_bytes" 2>/dev/null || true
		echo 0 >"$bdi/strict_limit" 2>/dev/null || true
		echo 1024 >"$bdi/read_ahead_kb"
	fi
}
