#!/bin/bash
# Lifetime placement + GC benchmark: RocksDB db_bench fillrandom, then
# overwrite (several passes over the key space), on an emulated zoned
# device at about 50% and 80% utilisation, twice each: with placement (files
# in zones by inferred lifetime class) and with every file in one class
# (-o placement=off).  Prints, side by side: ops/s, write amplification
# (device bytes written / bytes the file system accepted), GC bytes, zone
# resets and finishes, the utilisation reached, and how often the inferred
# LSM level of a table was right (checked against RocksDB's own LOG, which
# names every flush and compaction output and its level).
#
# Utilisation = valid bytes / capacity of the data zones, sampled every
# 2 s during the overwrite passes; the table shows its average and peak.
# --num is N = UTIL x capacity / 520 bytes.  Utilisation is not constant:
# it grows through the overwrite passes (RocksDB keeps old versions in the
# last level until a compaction reaches them), from ~0.6 x UTIL after
# fillrandom to ~1.1 x UTIL at the end; 520 B/key puts the average over the
# overwrite passes near UTIL without the end exceeding ~90% (measured with
# 490 B/key: "80%" averaged 79% but ended at 97%, and RocksDB got ENOSPC:
# valid data filled the device).  The table shows the average and the end.  Writes are rate-limited (6 MB/s) so that
# RocksDB's compaction keeps up on a small machine: unthrottled, its
# compaction debt (dead versions piling up in L2) grew the DB past any
# utilisation target, to the whole device.
# RocksDB settings keep its transient space (L0 backlog, compaction output
# written before the inputs die) small enough for a 2 GiB device: 4 MiB
# write buffer, 8 MiB files, 32 MiB L1, L0 slowdown/stop at 8/12 files.
#
# Needs root (FUSE), db_bench (rocksdb-tools), getfattr (attr), python3.
# Usage: scripts/bench-placement.sh [options]   (--help)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)
# shellcheck source=scripts/lib/zfmount.sh
. scripts/lib/zfmount.sh
# shellcheck source=scripts/lib/rocks.sh
. scripts/lib/rocks.sh

utils="50 80"
modes="on off"
zones=128
zone_size=16M
max_active=14
passes=2
rate_mb=6
gc_mbps=
mount_opts=
build_dir=$SRC/build
backing=
keep=0
extra=()

usage() {
	cat <<EOF
Usage: scripts/bench-placement.sh [options]
  --util "50 80"       utilisations to run, percent [$utils]
  --modes "on off"     placement modes [$modes]
  --zones N            emulated zones [$zones]
  --zone-size SIZE     zone size [$zone_size]
  --max-active N       max open = max active zones of the device [$max_active]
  --passes N           overwrite passes over the key space [$passes]
  --rate-mb N          db_bench --benchmark_write_rate_limit, MB/s (0 = none) [$rate_mb]
  --gc-mbps N          zonefuse -o gc_mbps (default: zonefuse's)
  -o OPTS              more zonefuse mount options (e.g. stripe_width=1)
  --build-dir DIR      zonefuse build dir [build]
  --backing-dir DIR    where the device file goes [a tmpfs in a temp dir]
  --db-bench-arg ARG   extra db_bench argument (repeatable)
  --keep               keep the work dir (logs) and print its path
  -h, --help
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--util) utils=$2; shift ;;
	--modes) modes=$2; shift ;;
	--zones) zones=$2; shift ;;
	--zone-size) zone_size=$2; shift ;;
	--max-active) max_active=$2; shift ;;
	--passes) passes=$2; shift ;;
	--rate-mb) rate_mb=$2; shift ;;
	--gc-mbps) gc_mbps=$2; shift ;;
	-o) mount_opts=$2; shift ;;
	--build-dir) build_dir=$2; shift ;;
	--backing-dir) backing=$2; shift ;;
	--db-bench-arg) extra+=("$2"); shift ;;
	--keep) keep=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "bench: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done

die() { echo "bench: FAILED: $*" >&2; exit 1; }
msg() { echo "bench: $*" >&2; }
[ "$(id -u)" -eq 0 ] || die "needs root (FUSE mounts)"
command -v db_bench >/dev/null || die "db_bench missing (apt-get install rocksdb-tools)"
command -v getfattr >/dev/null || die "getfattr missing (apt-get install attr)"
command -v python3 >/dev/null || die "python3 missing"
for b in zonefuse zonefuse-emu mkfs.zonefuse; do
	[ -x "$build_dir/$b" ] || die "$build_dir/$b is not built"
done

work=$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/zonefuse-placement.XXXXXX")")
tmpfs_mounted=0
mnt=$work/mnt
zf_pid=
mon_pid=
mkdir "$mnt"
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	cd /
	[ -z "$mon_pid" ] || kill "$mon_pid" 2>/dev/null
	zf_reap "$mnt"
	rm -f "$backing/zoned.img"
	[ $tmpfs_mounted -eq 0 ] || umount "$work/backing" || umount -l "$work/backing"
	if [ "$keep" = 1 ] || [ "$rc" -ne 0 ]; then
		msg "logs kept in $work"
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

dev_bytes=$(($(numfmt --from=iec "${zone_size%iB}") * zones))
if [ -z "$backing" ]; then
	backing=$work/backing
	mkdir "$backing"
	mount -t tmpfs -o size=$((dev_bytes + (64 << 20))) tmpfs "$backing"
	tmpfs_mounted=1
fi
backing=$(realpath "$backing")

rocks=("${placement_rocks[@]}" --histogram=0
	--benchmark_write_rate_limit=$((rate_mb * 1000000)) ${extra[@]+"${extra[@]}"})
benchmarks=fillrandom
for ((p = 0; p < passes; p++)); do benchmarks=$benchmarks,overwrite; done

# run UTIL MODE: one mount, one db_bench; results in $work/UTIL-MODE/
run() {
	local util=$1 mode=$2 d=$work/$1-$2 st=0
	mkdir -p "$d"
	local opts=zf_verbose,placement=$mode
	[ -z "$gc_mbps" ] || opts=$opts,gc_mbps=$gc_mbps
	[ -z "$mount_opts" ] || opts=$opts,$mount_opts
	zf_up "$backing/zoned.img" "$mnt" "$d/zonefuse.log" "$zone_size" "$zones" "$max_active" "$opts" ||
		die "zonefuse did not mount"
	zf_stats "$mnt" "$d/stats0" || die "no stats xattr"
	local cap num
	cap=$(stat_of "$d/stats0" capacity_bytes)
	num=$((util * cap / 100 / ${BYTES_PER_KEY:-520}))
	echo "$num" >"$d/num"
	( while :; do
		ph=0	# 1 once fillrandom has finished
		if grep -q '^fillrandom' "$d/db_bench.out" 2>/dev/null; then
			ph=1
			[ -s "$d/stats_fill" ] || zf_stats "$mnt" "$d/stats_fill" || true
		fi
		zf_stats "$mnt" |
			awk -F= -v t="$(date +%s)" -v ph=$ph '$1 == "valid_bytes" { v = $2 } $1 == "capacity_bytes" { c = $2 }
				END { if (c) print t, v, c, ph }'
		sleep 2
	  done >"$d/util" ) &
	mon_pid=$!
	msg "util $util% placement=$mode: $zones x $zone_size zones, max active $max_active, --num=$num, $benchmarks"
	db_bench --db="$mnt/db" --benchmarks="$benchmarks" --num="$num" "${rocks[@]}" >"$d/db_bench.out" 2>&1 || st=$?
	kill "$mon_pid" 2>/dev/null; wait "$mon_pid" 2>/dev/null || true
	mon_pid=
	tr '\r' '\n' <"$d/db_bench.out" | grep -v '^\.\.\. finished' | grep -v '^ *$' >"$d/db_bench.clean" || true
	zf_stats "$mnt" "$d/stats" || true
	cp "$mnt/db/LOG" "$d/LOG" 2>/dev/null || true
	local zst=0
	zf_down "$mnt" || zst=$?
	if [ "$st" -ne 0 ] || grep -qE 'Corruption|IO error|No space' "$d/db_bench.clean"; then
		tail -n 5 "$d/db_bench.clean" >&2
		echo "FAILED (db_bench exit $st)" >"$d/failed"
		msg "util $util% placement=$mode: db_bench FAILED"
	fi
	[ "$zst" -eq 0 ] || msg "zonefuse exited with status $zst"
	if [ -x "$build_dir/fsck.zonefuse" ]; then
		"$build_dir/fsck.zonefuse" "$backing/zoned.img" >"$d/fsck.log" 2>&1 || echo "fsck FAILED" >>"$d/failed"
	fi
	rm -f "$backing/zoned.img"
}

for u in $utils; do
	for m in $modes; do
		run "$u" "$m"
	done
done

# The table (and the inference accuracy) from the files of each run.
python3 - "$work" "$utils" "$modes" "$passes" <<'PY'
import os, re, sys
from collections import Counter
work, utils, modes, passes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])

def stats(path):
    d = {}
    if os.path.exists(path):
        for line in open(path):
            if '=' in line and not line.startswith('#'):
                k, v = line.strip().split('=', 1)
                d[k] = v
    return d

def truth(path):
    """file number -> level at creation, from RocksDB's LOG"""
    lv, outs = {}, {}
    if not os.path.exists(path):
        return lv
    for line in open(path, errors='replace'):
        m = re.search(r'\[JOB (\d+)\] Level-0 flush table #(\d+): started', line)
        if m:
            lv[int(m.group(2))] = 0
            continue
        m = re.search(r'\[JOB (\d+)\] Generated table #(\d+):', line)
        if m:
            outs.setdefault(int(m.group(1)), []).append(int(m.group(2)))
            continue
        m = re.search(r'\[JOB (\d+)\] Compacted .* files to L(\d+)', line)
        if m:
            for f in outs.get(int(m.group(1)), []):
                lv[f] = int(m.group(2))
    return lv

def inferred(path):
    """file number -> (level at create, level after corrections)"""
    at, fin, ino = {}, {}, {}
    for line in open(path, errors='replace'):
        m = re.search(r'lifetime: create (\d+)\.(?:sst|ldb) ino (\d+) tid \d+ level (-?\d+)', line)
        if m:
            n = int(m.group(1))
            at[n] = fin[n] = int(m.group(3))
            ino[int(m.group(2))] = n
            continue
        m = re.search(r'lifetime: (?:fix|exact) ino (\d+) level (-?\d+) -> (-?\d+)', line)
        if m and int(m.group(1)) in ino:
            fin[ino[int(m.group(1))]] = int(m.group(3))
    return at, fin

rows, acc = {}, {}
for u in utils:
    for m in modes:
        d = os.path.join(work, f'{u}-{m}')
        s = stats(os.path.join(d, 'stats'))
        r = {'failed': os.path.exists(os.path.join(d, 'failed'))}
        ops = {}
        if os.path.exists(os.path.join(d, 'db_bench.clean')):
            for line in open(os.path.join(d, 'db_bench.clean')):
                mm = re.match(r'^(\w+)\s+:.*?(\d+) ops/sec', line)
                if mm:
                    ops.setdefault(mm.group(1), []).append(int(mm.group(2)))
        r['fill'] = ops.get('fillrandom', [0])[0]
        ow = ops.get('overwrite', [])
        r['over'] = int(sum(ow) / len(ow)) if ow else 0
        user = int(s.get('user_bytes_written', 0))
        data = int(s.get('data_bytes_written', 0))
        meta = int(s.get('meta_bytes_written', 0))
        dev = int(s.get('zdev_bytes_written', 0)) or int(s.get('device_bytes_written', 0))
        gc = int(s.get('gc_bytes_written', 0)) or max(0, dev - data - meta)
        r['user'], r['dev'], r['gc'] = user, dev, gc
        r['wa'] = dev / user if user else 0
        # the overwrite passes alone (fillrandom on an empty device needs no GC)
        f = stats(os.path.join(d, 'stats_fill'))
        fu = int(f.get('user_bytes_written', 0))
        fd = int(f.get('zdev_bytes_written', 0)) or int(f.get('device_bytes_written', 0))
        r['wa_ow'] = (dev - fd) / (user - fu) if f and user > fu else 0
        r['resets'] = int(s.get('data_zone_resets', s.get('zone_resets', 0)))
        r['finishes'] = int(s.get('data_zone_finishes', s.get('zone_finishes', 0)))
        r['gc_runs'] = int(s.get('gc_runs', 0))
        if os.path.exists(os.path.join(d, 'zonefuse.log')):
            for line in open(os.path.join(d, 'zonefuse.log'), errors='replace'):
                mm = re.search(r'gc: at unmount: (\d+) victims', line)
                if mm:
                    r['gc_runs'] = int(mm.group(1))
        us = []
        if os.path.exists(os.path.join(d, 'util')):
            for line in open(os.path.join(d, 'util')):
                t, v, c, ph = map(int, line.split())
                if ph:
                    us.append(100.0 * v / c)
        r['util_avg'] = sum(us) / len(us) if us else 0
        r['util_max'] = max(us) if us else 0
        r['util_end'] = us[-1] if us else 0
        r['num'] = open(os.path.join(d, 'num')).read().strip() if os.path.exists(os.path.join(d, 'num')) else '?'
        rows[(u, m)] = r
        tv = truth(os.path.join(d, 'LOG'))
        if os.path.exists(os.path.join(d, 'zonefuse.log')):
            at, fin = inferred(os.path.join(d, 'zonefuse.log'))
            common = [n for n in tv if n in at]
            if common:
                acc[(u, m)] = (sum(at[n] == tv[n] for n in common), sum(fin[n] == tv[n] for n in common),
                               len(common), Counter((tv[n], at[n]) for n in common))

def mb(x): return f'{x / 1e6:,.0f} MB'
hdr = ['', ] + [f'{u}% {"placement" if m == "on" else "one class"}' for u in utils for m in modes]
lines = [
    ('db_bench --num', lambda r: r['num']),
    ('fillrandom ops/s', lambda r: f"{r['fill']:,}"),
    (f'overwrite ops/s (avg of {passes})', lambda r: f"{r['over']:,}"),
    ('utilisation avg / end / peak', lambda r: f"{r['util_avg']:.0f}/{r['util_end']:.0f}/{r['util_max']:.0f}%"),
    ('GC victim zones', lambda r: f"{r['gc_runs']:,}"),
    ('user bytes written', lambda r: mb(r['user'])),
    ('device bytes written', lambda r: mb(r['dev'])),
    ('GC bytes written', lambda r: mb(r['gc'])),
    ('write amplification', lambda r: f"{r['wa']:.3f}"),
    ('  during the overwrites', lambda r: f"{r['wa_ow']:.3f}" if r['wa_ow'] else '-'),
    ('zone resets', lambda r: f"{r['resets']:,}"),
    ('zone finishes', lambda r: f"{r['finishes']:,}"),
    ('result', lambda r: 'FAILED' if r['failed'] else 'ok'),
]
w0 = max(len(l[0]) for l in lines) + 2
w = max(16, max(len(h) for h in hdr) + 2)
print()
print(''.join([hdr[0].ljust(w0)] + [h.rjust(w) for h in hdr[1:]]))
for name, f in lines:
    print(''.join([name.ljust(w0)] + [f(rows[(u, m)]).rjust(w) for u in utils for m in modes]))
print()
for (u, m), (a, f, n, conf) in sorted(acc.items()):
    print(f'{u}% placement={m}: level inferred at CREATE right for {a}/{n} tables ({100.0 * a / n:.1f}%), '
          f'after the job corrections {f}/{n} ({100.0 * f / n:.1f}%)')
    for lvl in sorted(set(t for t, _ in conf)):
        c = {p: conf[(t, p)] for t, p in conf if t == lvl}
        print(f'    true L{lvl}: ' + ', '.join(f'inferred L{p}: {c[p]}' for p in sorted(c)))
PY
