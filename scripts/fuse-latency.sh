#!/bin/bash
# What each FUSE request cost as the kernel saw it, next to what the daemon
# says it spent on it.  Runs a command with the kernel's fuse tracepoints
# (fuse_request_send, fuse_request_end) on for one FUSE mount, in a tracing
# instance of its own, and prints per request type how many there were and
# the time from queueing to reply (average, p50, p99, max, total).  On a
# zonefuse mount it adds the daemon's handler time over the same window
# (user.zonefuse.stats: count and average per class) and what is left: time
# queued behind other requests, the copy through /dev/fuse, and waking the
# daemon and the caller.
#
# Usage: scripts/fuse-latency.sh [options] MOUNTPOINT [--] COMMAND [ARG...]   (as root)
# Exit status: COMMAND's; 2 on bad usage; 1 if tracing cannot be set up.
set -euo pipefail

usage() {
	cat <<EOF
Usage: scripts/fuse-latency.sh [options] MOUNTPOINT [--] COMMAND [ARG...]   (as root)
Runs COMMAND with the kernel's FUSE request tracepoints on for the FUSE mount
at MOUNTPOINT and prints, per request type, the requests the kernel sent and
the time from each one's queueing to its reply (us: average, p50, p99, max;
total in ms).  A request sent before COMMAND started is not counted, nor one
with no reply (FORGET) or none yet when COMMAND ended.

On a zonefuse mount a second table sets the same times, summed per request
class of user.zonefuse.stats (docs/stats.md), next to the daemon's own
handler time over the run; "outside" is the rest: queued behind other
requests, the copy through /dev/fuse and the wake-ups of daemon and caller.
The daemon's clock runs from the end of its read of a request (after the
kernel copied the payload in) to the return of its reply, so a class of
tiny requests can show a slightly negative "outside".  The daemon's xattr
count also holds this script's own first read of the stats (one or two
GETXATTRs, before the tracing starts).

  -o FILE            also write the tables to FILE
  --buffer-kb N      trace buffer per CPU [16384]; a run that overflows it
                     says how many events were lost
  -h, --help         this help

Needs root, python3 and a kernel with the tracepoints fuse/fuse_request_send
and fuse/fuse_request_end (6.18 has them).  Exit status: COMMAND's; 2 on bad
usage; 1 when tracing cannot be set up.
EOF
}

die() { echo "fuse-latency: $*" >&2; exit 1; }
bad() { echo "fuse-latency: $* (try --help)" >&2; exit 2; }

out=
buf_kb=16384
while [ $# -gt 0 ]; do
	case "$1" in
	-o) [ $# -ge 2 ] || bad "-o needs a file"; out=$2; shift 2 ;;
	--buffer-kb) [ $# -ge 2 ] || bad "--buffer-kb needs a number"; buf_kb=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	-*) bad "unknown option '$1'" ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || bad "no mount point"
mnt=$1
shift
[ "${1:-}" != "--" ] || shift
[ $# -ge 1 ] || bad "no command"
[[ "$buf_kb" =~ ^[1-9][0-9]{0,6}$ ]] || bad "--buffer-kb must be a whole number of KiB"

[ "$(id -u)" -eq 0 ] || die "needs root (the kernel's tracing)"
[ -d "$mnt" ] || bad "$mnt is not a directory"
mnt=$(realpath "$mnt")	# named in the report as the kernel names it
command -v python3 >/dev/null || die "python3 is missing"
fstype=$(findmnt -n -M "$mnt" -o FSTYPE 2>/dev/null | head -n 1) || true
case "$fstype" in
fuse | fuse.*) ;;
"") bad "$mnt is not a mount point" ;;
*) bad "$mnt is $fstype, not a FUSE mount" ;;
esac
# The tracepoints name a connection by the superblock's device number in the
# kernel's own encoding (major << 20 | minor).
majmin=$(mountpoint -d "$mnt") || die "cannot read the device number of $mnt"
conn=$(((${majmin%%:*} << 20) | ${majmin##*:}))

tracefs=
# A kernel with tracing has the mount point even where nothing mounted it
# (as on a fresh machine): mount it, as perf and trace-cmd do.
if [ -d /sys/kernel/tracing ] && [ ! -d /sys/kernel/tracing/instances ]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	[ -d "$d/instances" ] && { tracefs=$d; break; }
done
[ -n "$tracefs" ] || die "no tracefs (mount -t tracefs nodev /sys/kernel/tracing)"
if [ ! -d "$tracefs/events/fuse/fuse_request_send" ] || [ ! -d "$tracefs/events/fuse/fuse_request_end" ]; then
	die "this kernel has no fuse request tracepoints ($tracefs/events/fuse)"
fi

inst=$tracefs/instances/zf-latency-$$
work=$(mktemp -d "${TMPDIR:-/tmp}/fuse-latency.XXXXXX")
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	if [ -d "$inst" ]; then
		echo 0 >"$inst/tracing_on" 2>/dev/null || true
		echo 0 >"$inst/events/fuse/enable" 2>/dev/null || true
		rmdir "$inst" 2>/dev/null || echo "fuse-latency: could not remove $inst" >&2
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir "$inst" || die "cannot make a tracing instance in $tracefs/instances"
echo 0 >"$inst/tracing_on"
echo "$buf_kb" >"$inst/buffer_size_kb" || die "cannot size the trace buffer to $buf_kb KiB per CPU"
for e in fuse_request_send fuse_request_end; do
	echo "connection == $conn" >"$inst/events/fuse/$e/filter" || die "cannot filter $e"
	echo 1 >"$inst/events/fuse/$e/enable" || die "cannot enable $e"
done

# The daemon's counters before and after, when it is zonefuse.
zstats() { getfattr --only-values -n user.zonefuse.stats "$mnt" 2>/dev/null | grep '^lat_' || true; }
zstats >"$work/before"

echo 1 >"$inst/tracing_on"
st=0
"$@" || st=$?
# A request the command left in flight (a close's RELEASE goes in the
# background) gets its reply before the tracing stops: up to 1 s while the
# connection's waiting count (fusectl) is not 0, else a short pause.
waiting=/sys/fs/fuse/connections/$conn/waiting
if [ -r "$waiting" ]; then
	for _ in $(seq 100); do
		[ "$(cat "$waiting" 2>/dev/null || echo 0)" -gt 0 ] || break
		sleep 0.01
	done
else
	sleep 0.05
fi
echo 0 >"$inst/tracing_on"
zstats >"$work/after"
cat "$inst/trace" >"$work/trace"
lost=$(awk '/^# entries-in-buffer/ { split($3, a, "/"); print a[2] - a[1] }' "$work/trace")

python3 - "$work" "$mnt" "${lost:-0}" "$*" >"$work/report" <<'EOF'
import collections, math, re, sys

work, mnt, lost, cmd = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
# FUSE opcode -> the daemon's latency class, as lat_kind() in fusefs/fuse_io.c
# has it (integ_fuse_latency compares the two tables' counts per class)
CLASS = {
    "LOOKUP": "lookup", "GETATTR": "getattr", "SETATTR": "setattr",
    "READ": "read", "WRITE": "write", "FLUSH": "flush",
    "FSYNC": "fsync", "FSYNCDIR": "fsync",
    "CREATE": "create", "MKNOD": "create", "MKDIR": "create",
    "SYMLINK": "create", "LINK": "create",
    "UNLINK": "remove", "RMDIR": "remove",
    "RENAME": "rename", "RENAME2": "rename",
    "OPEN": "open", "OPENDIR": "open", "RELEASE": "open", "RELEASEDIR": "open",
    "READDIR": "readdir", "READDIRPLUS": "readdir",
    "GETXATTR": "xattr", "SETXATTR": "xattr", "LISTXATTR": "xattr",
    "REMOVEXATTR": "xattr",
}
line_re = re.compile(r"\s(\d+\.\d+):\s+fuse_request_(send|end): connection \d+ req (\d+)"
                     r"(?: opcode \d+ \(FUSE_(\w+)\))?")
sent, lat = {}, collections.defaultdict(list)
for line in open(f"{work}/trace"):
    m = line_re.search(line)
    if not m:
        continue
    t, kind, req, op = float(m[1]), m[2], m[3], m[4]
    if kind == "send":
        sent[req] = (t, op)
    elif req in sent:
        t0, op = sent.pop(req)
        lat[op].append((t - t0) * 1e6)
unanswered = collections.Counter(op for _, op in sent.values())

def pct(v, p):
    return v[min(len(v) - 1, max(0, math.ceil(p / 100 * len(v)) - 1))]

def table(head, rows):
    w = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    fmt = lambda r: "  ".join(str(c).ljust(w[i]) if i == 0 else str(c).rjust(w[i])
                              for i, c in enumerate(r))
    return "\n".join([fmt(head), fmt(["-" * n for n in w])] + [fmt(r) for r in rows])

print(f"FUSE requests of {mnt} during: {cmd}")
print("as the kernel saw them (queued -> replied), us:")
rows = []
for op, v in sorted(lat.items(), key=lambda kv: -sum(kv[1])):
    v.sort()
    rows.append([op, len(v), f"{sum(v) / len(v):.1f}", f"{pct(v, 50):.1f}",
                 f"{pct(v, 99):.1f}", f"{v[-1]:.1f}", f"{sum(v) / 1000:.1f}"])
if rows:
    print(table(["request", "count", "avg", "p50", "p99", "max", "total ms"], rows))
else:
    print("  (no request was sent and answered)")
if unanswered:
    print("sent, no reply seen: " + ", ".join(f"{op} {n}" for op, n in sorted(unanswered.items())))
if lost:
    print(f"warning: {lost} trace events lost (buffer full): the counts are short; "
          "rerun with a larger --buffer-kb")

def zread(name):
    d = {}
    for line in open(f"{work}/{name}"):
        m = re.match(r"lat_(\w+?)_(count|total_us|avg_us)=([\d.]+)$", line.strip())
        if m:
            d.setdefault(m[1], {})[m[2]] = float(m[3])
    return d
before, after = zread("before"), zread("after")
if after:
    kern = collections.defaultdict(lambda: [0, 0.0])
    for op, v in lat.items():
        c = kern[CLASS.get(op, "other")]
        c[0] += len(v)
        c[1] += sum(v)
    def total_us(x):  # the exact total where the daemon has it, else count x rounded average
        return x["total_us"] if "total_us" in x else x.get("count", 0) * x.get("avg_us", 0)
    rows = []
    for cls in sorted(set(kern) | set(after), key=lambda c: -kern[c][1] if c in kern else 0):
        a, b = after.get(cls, {}), before.get(cls, {})
        n = a.get("count", 0) - b.get("count", 0)
        d_us = total_us(a) - total_us(b)
        kn, ks = kern[cls] if cls in kern else (0, 0.0)
        if not kn and n <= 0:
            continue
        rows.append([cls, kn, f"{ks / 1000:.1f}", int(n), f"{max(d_us, 0) / 1000:.1f}",
                     f"{(ks - max(d_us, 0)) / 1000:.1f}" if kn else "-"])
    print()
    print("per class of the daemon's latency table (user.zonefuse.stats), ms:")
    print(table(["class", "kernel count", "kernel total", "daemon count", "daemon total", "outside"], rows))
EOF
cat "$work/report"
[ -z "$out" ] || cp "$work/report" "$out"
exit "$st"
