#!/bin/bash
# zonefuse-stat --prometheus (issue 18): on a mount with files of three
# lifetime classes, the output parses with prometheus_client (the Debian
# package python3-prometheus-client); every family has HELP and TYPE once,
# in one block (what node_exporter's textfile collector requires); names
# start with zonefuse_, counters end in _total, units in the names; every
# series has the mountpoint label, no series is repeated; zone counts by
# class and condition add up to the device's zones; the numbers equal the
# stats xattr; --prometheus with other output options is a usage error.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_bin "$ZF_STAT"
zf_require_prog setfattr attr
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3	# Debian's, where the package installs
"$PY" -c 'import prometheus_client' 2>/dev/null ||
	zf_skip "prometheus_client missing (apt-get install python3-prometheus-client)"
zf_setup --zone-size 16M --zones 64
zf_mount

mkdir "$ZF_MNT/d"
dd if=/dev/urandom of="$ZF_MNT/a.sst" bs=1M count=6 conv=fsync status=none
dd if=/dev/urandom of="$ZF_MNT/wal.log" bs=1M count=2 conv=fsync status=none
touch "$ZF_MNT/d/cold"
setfattr -n user.zonefuse.lifetime -v long "$ZF_MNT/d/cold"
dd if=/dev/urandom of="$ZF_MNT/d/cold" bs=1M count=3 conv=fsync,notrunc status=none
cp "$ZF_MNT/a.sst" "$ZF_MNT/a-copy.sst"	# copy_file_range: shared extents
sync -f "$ZF_MNT" 2>/dev/null || true

"$ZF_STAT" --prometheus "$ZF_MNT" >"$ZF_WORK/m.prom" || zf_fail "zonefuse-stat --prometheus failed"
zf_stats >"$ZF_WORK/stats.txt"
export ZF_MNT ZF_WORK
"$PY" - <<'PYEOF' || zf_fail "Prometheus output checks"
import collections, os, re
from prometheus_client.parser import text_string_to_metric_families
M = os.path.realpath(os.environ["ZF_MNT"]); W = os.environ["ZF_WORK"]
text = open(os.path.join(W, "m.prom")).read()
st = dict(l.split("=", 1) for l in open(os.path.join(W, "stats.txt")).read().splitlines() if "=" in l)
assert text.endswith("\n")

# HELP and TYPE once per family, samples right after their TYPE, in one block.
seen, current = set(), None
for line in text.splitlines():
    m = re.match(r"# (HELP|TYPE) (\S+) (.+)", line)
    if m:
        kind, name, rest = m.groups()
        assert (kind, name) not in seen, f"second {kind} for {name}"
        seen.add((kind, name))
        current = name
        continue
    name = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", line).group(1)
    assert current and (name == current or name[len(current):] in ("_sum", "_count")), \
        f"sample {name} outside its family block ({current})"

fams = {f.name: f for f in text_string_to_metric_families(text)}
series = set()
for f in fams.values():
    assert f.name.startswith("zonefuse_"), f.name
    assert f.documentation, f"{f.name}: no HELP"
    assert f.type in ("gauge", "counter", "summary"), (f.name, f.type)
    for s in f.samples:
        assert s.labels.get("mountpoint") == M, (s.name, s.labels)
        key = (s.name, tuple(sorted(s.labels.items())))
        assert key not in series, f"repeated series {key}"
        series.add(key)
        if f.type == "counter":
            assert s.name.endswith("_total"), s.name
        assert s.value == s.value and s.value >= 0, (s.name, s.value)
    unit_ok = re.search(r"_(bytes|seconds|ratio|zones|total|info|inodes|epoch|waiters|full|only)$", f.name)
    assert unit_ok or f.type == "counter", f"{f.name}: no unit in the name"

def val(name, **labels):
    """The value of the sample called name (counters: with _total)."""
    for f in fams.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError((name, labels))

# The numbers equal the stats xattr.
for metric, key in [("zonefuse_valid_bytes", "valid_bytes"), ("zonefuse_device_zones", "zones"),
                    ("zonefuse_capacity_bytes", "capacity_bytes"),
                    ("zonefuse_free_zones", "free_zones"), ("zonefuse_inodes", "inodes")]:
    assert val(metric) == float(st[key]), (metric, val(metric), st[key])
for metric, key in [("zonefuse_user_written_bytes_total", "user_bytes_written"),
                    ("zonefuse_zero_copy_written_bytes_total", "zero_copy_write_bytes"),
                    ("zonefuse_zero_copy_read_bytes_total", "zero_copy_read_bytes"),
                    ("zonefuse_shared_bytes", "shared_bytes"),
                    ("zonefuse_shared_saved_bytes", "shared_saved_bytes"),
                    ("zonefuse_copies_total", "copies"),
                    ("zonefuse_copy_shared_bytes_total", "copy_shared_bytes"),
                    ("zonefuse_copy_written_bytes_total", "copy_written_bytes"),
                    ("zonefuse_uring_requests_total", "fuse_uring_requests")]:
    assert val(metric) == float(st[key]), (metric, val(metric), st[key])
assert val("zonefuse_copies_total") >= 1 and val("zonefuse_copy_shared_bytes_total") > 0
# Counters that every request moves: read before the stats, so at most theirs.
for metric, key in [("zonefuse_poll_hits_total", "fuse_poll_hits"),
                    ("zonefuse_poll_misses_total", "fuse_poll_misses"),
                    ("zonefuse_requests_served_inline_total", "fuse_served_inline"),
                    ("zonefuse_requests_served_until_block_total", "fuse_served_until_block"),
                    ("zonefuse_requests_handed_off_total", "fuse_handed_off")]:
    assert 0 <= val(metric) <= float(st[key]), (metric, val(metric), st[key])
# Zones by class and condition add up; the classes written are there.
z = [s for s in fams["zonefuse_zones"].samples]
assert sum(s.value for s in z) == float(st["zones"]), "zones by class/condition do not add up"
classes = {s.labels["class"] for s in z}
conds = {s.labels["condition"] for s in z}
assert {"meta", "medium", "short", "long", "free"} <= classes, classes
assert conds <= {"empty", "imp_open", "exp_open", "closed", "full", "readonly", "offline", "not_wp"}, conds
assert sum(s.value for s in fams["zonefuse_zones_valid_bytes"].samples
           if s.labels["class"] not in ("meta",)) == float(st["valid_bytes"])
# Every class the daemon counts is exported, and nothing else.
daemon_classes = {k[6:-14] for k in st if k.startswith("class_") and k.endswith("_bytes_written")}
exported = {s.labels["class"] for s in fams["zonefuse_class_written_bytes"].samples if s.name.endswith("_total")}
assert exported == daemon_classes and len(exported) == 5, (exported, daemon_classes)
for c, mib in (("medium", 6), ("short", 2), ("long", 3)):
    assert val("zonefuse_class_valid_bytes", **{"class": c}) >= mib << 20, c
# Latency summary: quantiles, _sum and _count per op; seconds.
lat = fams["zonefuse_request_duration_seconds"]
w = {s.name: s.value for s in lat.samples if s.labels.get("op") == "write" and "quantile" not in s.labels}
assert w["zonefuse_request_duration_seconds_count"] >= 11, w
assert 0 < w["zonefuse_request_duration_seconds_sum"] < 60, w
# _sum is the daemon's exact running total (a rounded average times the count
# could go down between scrapes, a counter reset to Prometheus)
assert round(w["zonefuse_request_duration_seconds_sum"] * 1e6) == int(st["lat_write_total_us"]), \
    (w, st["lat_write_total_us"])
assert {s.labels["quantile"] for s in lat.samples if "quantile" in s.labels} == {"0.5", "0.99"}
print(f"{len(fams)} families, {len(series)} series; zones by class {sorted(classes)}")
PYEOF

rc=0; "$ZF_STAT" --prometheus --json "$ZF_MNT" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || zf_fail "--prometheus --json exited $rc, expected 2"
rc=0; "$ZF_STAT" --prometheus "$ZF_WORK" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || zf_fail "--prometheus on a non-mount exited $rc, expected 1"
zf_umount
zf_pass "Prometheus exposition parses and matches the stats"
