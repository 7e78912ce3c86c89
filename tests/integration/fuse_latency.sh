#!/bin/bash
# scripts/fuse-latency.sh: over 200 small files created and fsync'ed it
# counts exactly the CREATEs and FSYNCs the kernel sent, the daemon's
# classes agree with the kernel's counts, and the kernel's time per class
# holds (nearly all of) the daemon's handler time; without the daemon's
# stats only the kernel's table is printed; the command's exit status comes back;
# a full trace buffer is said; a directory that is no FUSE mount is refused
# with the usage status; and no tracing instance is left behind, also when
# the run is interrupted.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog python3 python3
zf_require_prog getfattr attr
zf_require_prog findmnt util-linux
T=
# Not mounted on a fresh machine; the script under test mounts it too.
if [ -d /sys/kernel/tracing ] && [ ! -d /sys/kernel/tracing/instances ]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	[ -d "$d/instances" ] && { T=$d; break; }
done
[ -n "$T" ] || zf_skip "no tracefs (mount -t tracefs nodev /sys/kernel/tracing)"
[ -d "$T/events/fuse/fuse_request_send" ] || zf_skip "this kernel has no fuse request tracepoints"
LAT=$ZF_SRC_DIR/scripts/fuse-latency.sh
zf_setup
M=$ZF_MNT
left_over() { find "$T/instances" -maxdepth 1 -name 'zf-latency-*' | head -n 1; }

zf_mount
mkdir "$M/d"

# ---- 1. 200 files: the counts and the times --------------------------------------
st=0
"$LAT" -o "$ZF_WORK/rep" "$M" -- python3 - "$M/d" <<'PY' >"$ZF_WORK/out" 2>&1 || st=$?
import os, sys
for i in range(200):
    fd = os.open(f"{sys.argv[1]}/f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"x" * 4096)
    os.fsync(fd)
    os.close(fd)
PY
[ "$st" = 0 ] || zf_fail "fuse-latency ended $st: $(tail -n 5 "$ZF_WORK/out")"
cmp -s "$ZF_WORK/out" "$ZF_WORK/rep" || zf_fail "-o FILE differs from what was printed"
python3 - "$ZF_WORK/rep" <<'PY' || zf_fail "report: $(cat "$ZF_WORK/rep")"
import sys
rows, section = {}, None
for line in open(sys.argv[1]):
    f = line.split()
    if line.startswith("as the kernel saw"):
        section = "kernel"
    elif line.startswith("per class"):
        section = "class"
    elif f and section and f[0][0].isalpha() and f[0] not in ("request", "class"):
        rows[(section, f[0])] = f[1:]
k = lambda op: rows[("kernel", op)]
assert int(k("CREATE")[0]) == 200, k("CREATE")
assert int(k("FSYNC")[0]) == 200, k("FSYNC")
for cls in ("create", "fsync"):
    kn, kt, dn, dt, out = rows[("class", cls)]
    assert int(kn) == int(dn) == 200, (cls, kn, dn)
    # the kernel's time runs from queueing to reply, the handler's nearly
    # inside it (its clock stops when its reply's writev returns)
    assert float(kt) >= 0.9 * float(dt) > 0 and abs(float(kt) - float(dt) - float(out)) < 0.15, (cls, kt, dt, out)
# every class the run used has the kernel's count (the script's map of
# opcodes agrees with the daemon's); xattr also holds the script's own
# read of the stats before the tracing started
for (sec, cls), v in rows.items():
    if sec == "class" and v[0] != "0":
        kn, dn = int(v[0]), int(v[2])
        assert dn == kn or (cls == "xattr" and kn <= dn <= kn + 2), (cls, v)
assert ("class", "write") in rows and ("class", "open") in rows, rows
avg, p50, p99, mx = (float(v) for v in k("FSYNC")[1:5])
assert 0 < p50 <= p99 <= mx and avg <= mx, k("FSYNC")
print("CREATE", k("CREATE"), "fsync class", rows[("class", "fsync")])
PY
[ -z "$(left_over)" ] || zf_fail "tracing instance left: $(left_over)"
for i in 0 117 199; do
	[ "$(stat -c %s "$M/d/f$i")" = 4096 ] || zf_fail "f$i has the wrong size"
done

# ---- 1b. a FUSE file system without zonefuse's stats: the kernel's table only ------
mkdir "$ZF_WORK/bin"
printf '#!/bin/sh\nexit 1\n' >"$ZF_WORK/bin/getfattr"	# as on a mount with no such xattr
chmod +x "$ZF_WORK/bin/getfattr"
PATH=$ZF_WORK/bin:$PATH "$LAT" "$M" -- ls "$M/d" >"$ZF_WORK/plain" 2>&1 ||
	zf_fail "run without the stats: $(tail -n 3 "$ZF_WORK/plain")"
grep -qE "^OPENDIR +1 " "$ZF_WORK/plain" || zf_fail "the ls's OPENDIR not counted: $(cat "$ZF_WORK/plain")"
! grep -q "^per class" "$ZF_WORK/plain" || zf_fail "a class table without the daemon's stats"

# ---- 2. the command's exit status ------------------------------------------------
st=0
"$LAT" "$M" sh -c 'exit 3' >/dev/null 2>&1 || st=$?
[ "$st" = 3 ] || zf_fail "a command that exits 3 gave $st"

# ---- 3. a trace buffer too small is said ----------------------------------------
"$LAT" --buffer-kb 4 "$M" -- sh -c "ls -l $M/d >/dev/null; cat $M/d/* >/dev/null; ls -l $M/d >/dev/null" \
	>"$ZF_WORK/small" 2>&1 || zf_fail "small buffer run: $(tail -n 3 "$ZF_WORK/small")"
grep -q "trace events lost" "$ZF_WORK/small" || zf_fail "no word of lost events with 4 KiB per CPU: $(cat "$ZF_WORK/small")"

# ---- 4. refused: no FUSE mount, bad options; the usage status ---------------------
for args in "$ZF_WORK -- true" "/proc -- true" "--buffer-kb 0 $M -- true" "$M" "--bogus $M true"; do
	st=0
	# shellcheck disable=SC2086
	"$LAT" $args >/dev/null 2>"$ZF_WORK/err" || st=$?
	[ "$st" = 2 ] || zf_fail "'fuse-latency $args' ended $st, not 2: $(cat "$ZF_WORK/err")"
	[ -s "$ZF_WORK/err" ] || zf_fail "'fuse-latency $args' said nothing"
done
"$LAT" --help | grep -q "^Usage: " || zf_fail "--help gives no usage"
# a relative mount point, with a trailing slash
(cd "$ZF_WORK" && "$LAT" mnt/ -- true) >"$ZF_WORK/rel" 2>&1 ||
	zf_fail "a relative mount point (mnt/): $(cat "$ZF_WORK/rel")"
grep -q "^FUSE requests of $M during: true" "$ZF_WORK/rel" || zf_fail "mnt/ is not named $M: $(head -n 1 "$ZF_WORK/rel")"

# ---- 5. interrupted: the instance goes all the same -----------------------------------
st=0
timeout --preserve-status -s INT 1 "$LAT" "$M" -- sleep 3 >/dev/null 2>&1 || st=$?
[ "$st" = 130 ] || zf_fail "an interrupted run ended $st, not 130"
[ -z "$(left_over)" ] || zf_fail "tracing instance left after an interrupt: $(left_over)"

zf_umount
zf_check_log
zf_pass "fuse-latency counts 200 CREATEs and FSYNCs, agrees with the daemon, cleans up"
