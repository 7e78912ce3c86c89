#!/usr/bin/env python3
"""The tables and plots of scripts/bench-steady.sh from the files of its runs.

Usage: steady-report.py OUT_DIR   (writes OUT_DIR/results.md, chart.svg,
results.json; prints the tables).  Every run is a directory under OUT_DIR
holding `meta` (KEY=VALUE), `samples` ("secs phase used capacity [user
device gc free_zones]" every interval), and its workload's outputs.
A run in a QEMU guest (fs "NAME-qemu", scripts/bench-qemu-fs.sh --steady)
also has `qemu.result`: its write amplification is the zoned namespace's
bytes written / the bytes db_bench wrote (app_bytes), the same measure for
every file system in a guest; f2fs's conventional namespace is shown apart.
"""
import glob
import json
import math
import os
import re
import sys
from html import escape

NEAR = 5.0   # points of utilisation that count as "at 50 %" / "nearly full"


def kv(path):
    d = {}
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            if "=" in line and not line.startswith("#"):
                k, v = line.rstrip("\n").split("=", 1)
                d[k] = v
    return d


def num(d, k):
    try:
        return float(d.get(k, 0) or 0)
    except ValueError:
        return 0.0


def hist_mid(b):
    """Middle of iot-window's latency bucket b, in microseconds."""
    if b < 8:
        return b / 1000.0
    e, sub = b // 8 + 2, b % 8
    lo = 2 ** e + sub * 2 ** (e - 3)
    return (lo + 2 ** (e - 4)) / 1000.0


def pct(hist, qs):
    n = sum(hist.values())
    if not n:
        return [None] * len(qs)
    out, keys = [], sorted(hist)
    for q in qs:
        need, acc = q * n, 0
        for b in keys:
            acc += hist[b]
            if acc >= need:
                out.append(hist_mid(b))
                break
    return out


def load_run(d):
    m = kv(os.path.join(d, "meta"))
    r = {"dir": os.path.basename(d), "wl": m["workload"], "fs": m["fs"], "geom": m["geometry"],
         "rate": int(m["rate_mb"]), "fill": int(m["fill"]), "dev": int(m["dev_bytes"]),
         "cap": int(m["capacity"] or 0)}
    fails = os.path.join(d, "failed")
    r["failed"] = open(fails).read().strip().splitlines()[0] if os.path.exists(fails) else ""
    t0 = float(open(os.path.join(d, "t0")).read())
    # samples: utilisation over time, the phase, zonefuse's counters
    samples = []
    for line in open(os.path.join(d, "samples")):
        f = line.split()
        if len(f) < 4:
            continue
        v = [int(float(x)) for x in f[2:]]
        s = {"t": float(f[0]), "ph": f[1], "used": v[0], "cap": v[1]}
        if len(v) >= 6:
            s.update(user=v[2], devb=v[3], gc=v[4], free=v[5])
        if len(v) >= 8:
            s["buffered"], s["dfused"] = v[6], v[7]
        s["util"] = 100.0 * s["used"] / s["cap"] if s["cap"] else 0
        samples.append(s)
    r["samples"] = samples
    us = [s["util"] for s in samples if s["ph"] != "end"]
    r["util_peak"] = max(us) if us else 0
    # what df counts beyond the valid bytes: buffered, and held for
    # fallocated ranges (the rest)
    gaps = [(s["dfused"] - s["used"], s["buffered"]) for s in samples if "dfused" in s]
    r["held_peak"] = max(gaps) if gaps else None
    r["opts"] = m.get("opts", "")
    r["util_end"] = us[-1] if us else 0
    # throughput series (secs since the run began, ops/s) and latencies
    series, lat_parts = [], []
    if r["wl"] in ("dbbench", "tenant"):
        start, r["ops"] = t0, {}
        passes = []
        if os.path.exists(os.path.join(d, "passes")):
            passes = [l.split() for l in open(os.path.join(d, "passes"))]
        for k, name, tend, st in passes:
            # db_bench's report: ops done in each interval (not per second)
            rep, prev = os.path.join(d, f"report-{k}.csv"), 0.0
            if os.path.exists(rep):
                for line in open(rep):
                    f = line.strip().split(",")
                    if len(f) == 2 and f[0].replace(".", "").isdigit() and float(f[0]) > prev:
                        series.append((start - t0 + float(f[0]), float(f[1]) / (float(f[0]) - prev)))
                        prev = float(f[0])
            txt = open(os.path.join(d, f"db-{k}.out"), errors="replace").read().replace("\r", "\n")
            mo = re.search(r"^\w+\s+:.*?(\d+) ops/sec", txt, re.M)
            mp = re.search(r"Percentiles: P50: ([\d.]+) P75: [\d.]+ P99: ([\d.]+) P99.9: ([\d.]+)", txt)
            # the pass's utilisation: its samples and the first one after it
            a_, b_ = start - t0, float(tend) - t0
            pu = [s["util"] for s in samples if a_ <= s["t"] <= b_]
            pu += [s["util"] for s in samples if s["t"] > b_][:1]
            part = {"name": name, "k": k, "ops": int(mo.group(1)) if mo else None,
                    "p": [float(x) for x in mp.groups()] if mp else [None] * 3,
                    "util": sum(pu) / len(pu) if pu else None, "t0": a_, "t1": b_}
            lat_parts.append(part)
            start = float(tend)
        if passes and os.path.exists(os.path.join(d, "db-1.out")):
            me = re.search(r"^Entries:\s+(\d+)", open(os.path.join(d, "db-1.out"), errors="replace").read(), re.M)
            r["num"] = int(me.group(1)) if me else None
        # a guest's --num capped below the fill's (--qemu-num-max): the
        # fill it really ran at, by the same rule
        rule = r["fill"] * r["cap"] // 100 // 520 if r["wl"] == "dbbench" else None
        if r.get("num") and rule and r["num"] < rule:
            r["capped"] = round(100.0 * r["num"] * 520 / r["cap"])
        fill_ops = [p["ops"] for p in lat_parts if p["name"] == "fillrandom" and p["ops"]]
        ow = [p["ops"] for p in lat_parts if p["name"] == "overwrite" and p["ops"]]
        r["ops_fill"] = fill_ops[0] if fill_ops else None
        r["ops_main"] = sum(ow) / len(ow) if ow else None
        # latency: the pass nearest 50 % and the last pass that ran
        done = [p for p in lat_parts if p["util"] is not None and p["p"][0] is not None]
        if done:
            near = min(done, key=lambda p: abs(p["util"] - 50))
            r["lat50"], r["lat50_at"] = near["p"], f'{near["name"]} {near["k"]}, {near["util"]:.0f} %'
            last = done[-1]
            r["latfull"], r["latfull_at"] = last["p"], f'{last["name"]} {last["k"]}, {last["util"]:.0f} %'
        fj = os.path.join(d, "fio.json")
        if r["wl"] == "tenant" and os.path.exists(fj):
            try:
                txt = open(fj).read()
                job = json.loads(txt[txt.index("{"):])["jobs"][0]["write"]
                cp = job.get("clat_ns", {}).get("percentile", {})
                r["tenant"] = {"iops": job["iops"], "p": [cp.get(k, 0) / 1000 for k in
                                                          ("50.000000", "99.000000", "99.900000")]}
            except (ValueError, KeyError, IndexError):
                pass
    else:
        ivs, done = [], None
        for line in open(os.path.join(d, "iot.out")):
            f = line.split()
            if f and f[0] == "i" and len(f) >= 4:
                h = {}
                if len(f) >= 6:
                    for kvp in f[5].split(","):
                        b, c = kvp.split(":")
                        h[int(b)] = int(c)
                ivs.append((float(f[1]), int(f[2]), h))
            elif f and f[0] == "done":
                done = f
        prev = 0.0
        for t, ops, h in ivs:
            if t > prev:
                series.append((t, ops / (t - prev)))
            prev = t
        r["ops_fill"] = None
        r["ops_main"] = int(done[1]) / float(done[3]) if done and float(done[3]) > 0 else None

        def util_at(t):
            best = min(samples, key=lambda s: abs(s["t"] - t), default=None)
            return best["util"] if best else 0
        h50, hfull, prev = {}, {}, 0.0
        for t, ops, h in ivs:
            u = util_at((t + prev) / 2)
            prev = t
            for tgt, acc in ((50.0, h50), (r["util_peak"], hfull)):
                if abs(u - tgt) <= NEAR:
                    for b, c in h.items():
                        acc[b] = acc.get(b, 0) + c
        if h50:
            r["lat50"], r["lat50_at"] = pct(h50, (0.5, 0.99, 0.999)), f"{50 - NEAR:.0f}-{50 + NEAR:.0f} %"
        if hfull:
            r["latfull"], r["latfull_at"] = pct(hfull, (0.5, 0.99, 0.999)), \
                f'{r["util_peak"] - NEAR:.0f}-{r["util_peak"]:.0f} %'
    r["series"] = series

    # throughput at 50 % and nearly full: the series' intervals there
    def tput(tgt):
        v = []
        for t, q in series:
            best = min(samples, key=lambda s: abs(s["t"] - t), default=None)
            if best and abs(best["util"] - tgt) <= NEAR:
                v.append(q)
        return sum(v) / len(v) if v else None
    r["tput50"], r["tputfull"] = tput(50.0), tput(r["util_peak"])
    # bytes
    r["qemu"] = r["fs"].endswith("-qemu")
    if r["qemu"]:
        q = kv(os.path.join(d, "qemu.result"))
        if q.get("app_bytes"):
            r["user"] = num(q, "app_bytes")
        # the unmount did not return: the counters after sync
        for k in ("device_bytes", "conv_bytes", "resets", "finishes"):
            if not q.get(k) and q.get("synced_" + k):
                q[k] = q["synced_" + k]
        if q.get("device_bytes"):
            r["devb"] = num(q, "device_bytes")
            r["conv"] = num(q, "conv_bytes")
            r["wa"] = r["devb"] / r["user"] if r.get("user") else None
        if q.get("scheduler"):
            r["sched"] = q["scheduler"]
        if q.get("resets"):
            r["resets"], r["finishes"] = int(num(q, "resets")), int(num(q, "finishes"))
        s0, s1 = kv(os.path.join(d, "stats0")), kv(os.path.join(d, "stats"))
        if s1:
            r["gc"] = num(s1, "gc_bytes_written") - num(s0, "gc_bytes_written")
        log = os.path.join(d, "zonefuse.log")
        if os.path.exists(log):
            txt = open(log, errors="replace").read()
            r["limit_errors"] = len(re.findall(r"Too many references|Value too large|ETOOMANYREFS|EOVERFLOW", txt))
            r["log_errors"] = len(re.findall(r"error:", txt, re.I))
    elif r["fs"] == "zonefuse":
        s0, s1 = kv(os.path.join(d, "stats0")), kv(os.path.join(d, "stats"))
        dev_k = "zdev_bytes_written" if "zdev_bytes_written" in s1 else "device_bytes_written"
        user = num(s1, "user_bytes_written") - num(s0, "user_bytes_written")
        devb = num(s1, dev_k) - num(s0, dev_k)
        r["user"], r["devb"] = user, devb
        r["gc"] = num(s1, "gc_bytes_written") - num(s0, "gc_bytes_written")
        r["wa"] = devb / user if user else None
        if "zone_resets" in s1:
            r["resets"] = int(num(s1, "zone_resets") - num(s0, "zone_resets"))
            r["finishes"] = int(num(s1, "zone_finishes") - num(s0, "zone_finishes"))
        # after the device first filled (db: from the first overwrite
        # pass; IoT: after one device size was written): the steady part
        cut = None
        for s in samples:
            if "user" not in s:
                continue
            if (r["wl"] != "iot" and s["ph"] not in ("0", "1")) or \
                    (r["wl"] == "iot" and s["user"] - num(s0, "user_bytes_written") >= r["dev"]):
                cut = s
                break
        last = [s for s in samples if "user" in s]
        r["wa_steady"] = None
        if cut and last and num(s1, "user_bytes_written") > cut["user"]:
            r["wa_steady"] = (num(s1, dev_k) - cut["devb"]) / (num(s1, "user_bytes_written") - cut["user"])
        log = os.path.join(d, "zonefuse.log")
        txt = open(log, errors="replace").read() if os.path.exists(log) else ""
        r["limit_errors"] = len(re.findall(r"Too many references|Value too large|ETOOMANYREFS|EOVERFLOW", txt))
        r["log_errors"] = len(re.findall(r"error:", txt, re.I))
    else:
        p = os.path.join(d, "ext4_dev_bytes")
        r["devb"] = int(open(p).read()) if os.path.exists(p) else None
    p = os.path.join(d, "app_bytes")
    r["app"] = int(open(p).read()) if os.path.exists(p) else (r.get("user") if r["qemu"] else None)
    r["wa_app"] = r["devb"] / r["app"] if r.get("devb") and r.get("app") else None
    return r


def main():
    out = sys.argv[1]
    runs = [load_run(os.path.dirname(m)) for m in sorted(glob.glob(os.path.join(out, "*", "meta")))]
    if not runs:
        sys.exit("steady-report: no runs in " + out)
    order = {"ext4": 0, "fuse-ext4": 1, "zonefuse": 2, "zonefuse-qemu": 3, "btrfs-qemu": 4, "f2fs-qemu": 5}
    runs.sort(key=lambda r: (r["wl"], r["rate"], r["fill"], r["fs"] not in ("ext4", "fuse-ext4"),
                             r["fs"] != "ext4", r["geom"], order.get(r["fs"], 9)))

    def label(r):
        z = r["geom"].split(":")
        opts = f' -o {r["opts"]}' if r["opts"] else ""
        if r["fs"] in ("ext4", "fuse-ext4"):
            return r["fs"]
        if r["qemu"]:
            name = {"zonefuse-qemu": "zf"}.get(r["fs"], r["fs"][:-5])
            return f"{name} QEMU ZNS {z[0]} x {z[1]}" + (opts if r["fs"] == "zonefuse-qemu" else "")
        return f"zf {z[0]} x {z[1]}" + opts

    def ext4_of(r):
        for e in runs:
            if e["fs"] == "ext4" and (e["wl"], e["rate"], e["fill"], e["dev"]) == \
                    (r["wl"], r["rate"], r["fill"], r["dev"]):
                return e
        return None

    def f0(v, fmt="{:,.0f}"):
        return "-" if v is None else fmt.format(v)

    def lat(v):
        return "-" if not v or v[0] is None else " / ".join(f"{x:,.0f}" if x >= 10 else f"{x:.1f}" for x in v)

    def mb(v):
        return "-" if v is None else f"{v / 1e6:,.0f} MB"

    rows = [
        ("device", lambda r: f'{r["dev"] >> 20} MiB'),
        ("db_bench --num", lambda r: f0(r.get("num"))),
        ("result", lambda r: ("ok" if not r["failed"] else "NOT completed: " + r["failed"][:60]) +
         (f' (--num capped: fill {r["capped"]} %)' if r.get("capped") is not None else "")),
        ("utilisation end / peak", lambda r: f'{r["util_end"]:.0f} / {r["util_peak"]:.0f} %'),
        ("df used beyond valid, peak (of it buffered)", lambda r: "-" if not r.get("held_peak") else
         f'{mb(r["held_peak"][0])} ({mb(r["held_peak"][1])})'),
        ("ops/s, fillrandom", lambda r: f0(r.get("ops_fill"))),
        ("ops/s, overwrite passes (IoT: all)", lambda r: f0(r.get("ops_main"))),
        ("  / ext4", lambda r: f0((r["ops_main"] / ext4_of(r)["ops_main"]) if r["fs"] != "ext4" and not r["qemu"] and ext4_of(r)
                                   and r.get("ops_main") and ext4_of(r).get("ops_main") else None, "{:.2f}")),
        ("ops/s at 50 % / nearly full", lambda r: f'{f0(r["tput50"])} / {f0(r["tputfull"])}'),
        ("  nearly full / 50 %", lambda r: f0(r["tputfull"] / r["tput50"] if r["tput50"] and r["tputfull"] else None,
                                             "{:.2f}")),
        ("p50/p99/p99.9 us at 50 %", lambda r: lat(r.get("lat50")) + (f' ({r["lat50_at"]})' if r.get("lat50_at") else "")),
        ("p50/p99/p99.9 us nearly full", lambda r: lat(r.get("latfull")) + (f' ({r["latfull_at"]})' if r.get("latfull_at") else "")),
        ("  p99 nearly full / at 50 %", lambda r: f0(r["latfull"][1] / r["lat50"][1] if r.get("lat50") and r.get("latfull")
                                                    and r["lat50"][1] and r["latfull"][1] else None, "{:.2f}")),
        ("bytes accepted (QEMU: db_bench wrote)", lambda r: mb(r.get("user"))),
        ("device bytes written (QEMU: zoned namespace)", lambda r: mb(r.get("devb"))),
        ("  conventional namespace (f2fs metadata)", lambda r: mb(r.get("conv")) if r.get("qemu") else "-"),
        ("GC bytes written", lambda r: mb(r.get("gc"))),
        ("write amplification", lambda r: f0(r.get("wa"), "{:.3f}")),
        ("bytes the applications wrote (wchar)", lambda r: mb(r.get("app"))),
        ("device bytes / application bytes", lambda r: f0(r.get("wa_app"), "{:.3f}")),
        ("  after the device filled", lambda r: f0(r.get("wa_steady"), "{:.3f}")),
        ("tenant fio IOPS, p50/p99/p99.9 us", lambda r: f'{r["tenant"]["iops"]:,.0f}, {lat(r["tenant"]["p"])}'
         if r.get("tenant") else "-"),
        ("I/O scheduler (QEMU)", lambda r: r.get("sched", "-")),
        ("zone resets / finishes", lambda r: f'{r["resets"]} / {r["finishes"]}' if "resets" in r else "-"),
        ("open/active-limit errors, log errors", lambda r: f'{r["limit_errors"]}, {r["log_errors"]}' if "limit_errors" in r else "-"),
    ]
    md, term = [f"# bench-steady {os.path.basename(out)}", "", "- " + os.environ.get("STEADY_META", ""), ""], []
    for key in sorted({(r["wl"], r["rate"], r["fill"]) for r in runs}):
        grp = [r for r in runs if (r["wl"], r["rate"], r["fill"]) == key]
        title = f'{key[0]}, fill {key[2]} %, ' + ("unthrottled" if key[1] == 0 else f"throttled to {key[1]} MB/s")
        hdr = [""] + [label(r) for r in grp]
        md += [f"## {title}", "", "| " + " | ".join(hdr) + " |", "|---" + "|---:" * len(grp) + "|"]
        term += ["", title]
        table = [[name] + [f(r) for r in grp] for name, f in rows]
        w = [max(len(l[i]) for l in table + [hdr]) for i in range(len(hdr))]
        term.append("  ".join(h.ljust(w[i]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(hdr)))
        for l in table:
            md.append("| " + " | ".join(l) + " |")
            term.append("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(l)))
        md.append("")
    # the highest fill each file system completed, per workload and rate
    md += ["## Highest fill completed", "", "| workload | rate | " +
           " | ".join(sorted({label(r) for r in runs})) + " |", "|---|---" + "|---:" * len({label(r) for r in runs}) + "|"]
    term += ["", "highest fill completed:"]
    for wl, rate in sorted({(r["wl"], r["rate"]) for r in runs}):
        cells = []
        for lab in sorted({label(r) for r in runs}):
            ok = [r for r in runs if (r["wl"], r["rate"]) == (wl, rate) and label(r) == lab]
            # a capped guest run counts at the fill it really ran at
            best = max([r.get("capped") or r["fill"] for r in ok if not r["failed"]], default=None)
            tried = sorted(r.get("capped") or r["fill"] for r in ok)
            cells.append("-" if not tried else (f"{best} %" if best else "none") +
                         f" (of {', '.join(map(str, tried))})")
        rl = "unthrottled" if rate == 0 else f"{rate} MB/s"
        md.append(f"| {wl} | {rl} | " + " | ".join(cells) + " |")
        term.append(f"  {wl} {rl}: " + "; ".join(f"{lab} {c}" for lab, c in zip(sorted({label(r) for r in runs}), cells)))
    md.append("")
    # issue 47's targets, per zonefuse run
    tnames = ["WA <= 1.05", "ops >= 1.0x ext4", "p99 full <= 2x p99 at 50 %",
              "ops full >= 0.8x at 50 %", "completes where ext4 does",
              "ENOSPC only within a zone of full", "no open/active-limit error"]
    md += ["## Targets", "", "| run | " + " | ".join(tnames) + " |", "|---" + "|---" * len(tnames) + "|"]
    term += ["", "targets (yes / NO / - = not measured):"]
    for r in runs:
        if r["fs"] != "zonefuse":
            continue
        e = ext4_of(r)
        zone = int(re.sub(r"\D", "", r["geom"].split(":")[0])) << 20
        valid_end = r["samples"][-1]["used"] if r["samples"] else 0

        def yn(ok):
            return "-" if ok is None else ("yes" if ok else "NO")
        cells = [
            yn(None if r.get("wa") is None else r["wa"] <= 1.05),
            yn(None if not (e and e.get("ops_main") and r.get("ops_main")) else r["ops_main"] >= e["ops_main"]),
            yn(None if not (r.get("lat50") and r.get("latfull") and r["lat50"][1] and r["latfull"][1])
               or r.get("lat50_at") == r.get("latfull_at") else r["latfull"][1] <= 2 * r["lat50"][1]),
            yn(None if not (r["tput50"] and r["tputfull"]) else r["tputfull"] >= 0.8 * r["tput50"]),
            yn(None if not e else (not r["failed"] or bool(e["failed"]))),
            yn(None if not r["failed"] else valid_end >= r["cap"] - zone) if r["failed"] else "yes",
            yn(r.get("limit_errors", 0) == 0),
        ]
        lab = f'{r["wl"]} {label(r)} fill {r["fill"]} %' + ("" if r["rate"] == 0 else f' {r["rate"]} MB/s')
        md.append(f"| {lab} | " + " | ".join(cells) + " |")
        term.append(f"  {lab}: " + ", ".join(f"{n} {c}" for n, c in zip(tnames, cells)))
    md.append("")
    open(os.path.join(out, "results.md"), "w").write("\n".join(md) + "\n")
    print("\n".join(term))
    json.dump([{k: v for k, v in r.items() if k != "samples"} for r in runs],
              open(os.path.join(out, "results.json"), "w"), indent=1, default=str)
    svg(out, runs, label)


def svg(out, runs, label):
    """One panel per workload, rate and fill: ops/s per 10 s over time (one
    line per file system and geometry), the utilisation under it."""
    colors = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#c53030"]
    keys = sorted({(r["wl"], r["rate"], r["fill"]) for r in runs})
    pw, ph, uh, left, top = 640, 170, 70, 70, 40
    H = top + len(keys) * (ph + uh + 70) + 20
    W = left + pw + 150
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         f'font-family="sans-serif" font-size="11">', f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">'
         f'ops/s per interval and utilisation over time (bench-steady {escape(os.path.basename(out))})</text>']
    y0 = top
    for key in keys:
        grp = [r for r in runs if (r["wl"], r["rate"], r["fill"]) == key]
        tmax = max([t for r in grp for t, _ in r["series"]] + [t["t"] for r in grp for t in r["samples"]] + [1])
        qmax = max([q for r in grp for _, q in r["series"]] + [1])
        title = f'{key[0]}, fill {key[2]} %, ' + ("unthrottled" if key[1] == 0 else f"{key[1]} MB/s")
        s.append(f'<text x="{left}" y="{y0 + 12}" font-weight="bold">{escape(title)}</text>')
        py = y0 + 20
        s.append(f'<rect x="{left}" y="{py}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        s.append(f'<text x="{left - 4}" y="{py + 10}" text-anchor="end">{qmax:,.0f}</text>')
        s.append(f'<text x="{left - 4}" y="{py + ph}" text-anchor="end">0</text>')
        s.append(f'<text x="{left - 40}" y="{py + ph / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 {left - 40} {py + ph / 2})">ops/s</text>')
        uy = py + ph + 8
        s.append(f'<rect x="{left}" y="{uy}" width="{pw}" height="{uh}" fill="none" stroke="#999"/>')
        s.append(f'<text x="{left - 4}" y="{uy + 10}" text-anchor="end">100 %</text>')
        s.append(f'<text x="{left - 4}" y="{uy + uh}" text-anchor="end">0</text>')
        s.append(f'<text x="{left + pw}" y="{uy + uh + 14}" text-anchor="end">{tmax:,.0f} s</text>')
        for i, r in enumerate(grp):
            c = colors[i % len(colors)]
            pts = " ".join(f"{left + t / tmax * pw:.1f},{py + ph - q / qmax * ph:.1f}" for t, q in r["series"])
            if pts:
                s.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="1.3"/>')
            pts = " ".join(f'{left + x["t"] / tmax * pw:.1f},{uy + uh - min(x["util"], 100) / 100 * uh:.1f}'
                           for x in r["samples"])
            if pts:
                s.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-dasharray="3,2"/>')
            mark = "" if not r["failed"] else " (not completed)"
            s.append(f'<rect x="{left + pw + 10}" y="{py + 14 * i}" width="10" height="8" fill="{c}"/>'
                     f'<text x="{left + pw + 24}" y="{py + 8 + 14 * i}">{escape(label(r) + mark)}</text>')
        y0 = uy + uh + 40
    s.append("</svg>")
    open(os.path.join(out, "chart.svg"), "w").write("\n".join(s) + "\n")


if __name__ == "__main__":
    main()
