#!/usr/bin/env python3
"""Summarizes the fio JSON outputs left by scripts/fio/run.sh in RAWDIR.

Prints one line per result and optionally writes them as JSON:
  {"label": ..., "params": {...},
   "rows": [{"test": "matrix", "name": "write 4k", "unit": "MiB/s",
             "value": median, "runs": [...], ...}, ...]}
matrix rows: MiB/s of each pass (fio's bw for the job; writes include the
final fsync), median over the passes.  verify rows: MiB/s written by the
writing job (its own read-back included), median over the passes, and
whether both checks passed in every pass.  churn: files per second
(created, written, fsynced and deleted, by wall time), median over the passes.
Exit status 1 if any fio job reported an error.
"""
import argparse
import glob
import json
import os
import statistics
import sys

MiB = 1 << 20
MATRIX_ROWS = ["write", "rewrite", "read", "reread", "randread", "randwrite"]
ROW_NAMES = {"randread": "random read", "randwrite": "random write"}


def load(path):
    with open(path) as f:
        text = f.read()
    # fio may print warnings before the JSON document
    start = text.find("{")
    if start < 0:
        raise ValueError(f"{path}: no JSON in fio's output")
    return json.loads(text[start:])


def job_bw(job):
    """(direction, MiB/s) of a job: the direction that moved the most bytes."""
    best = max(("read", "write"), key=lambda d: job[d]["io_bytes"])
    return best, job[best]["bw_bytes"] / MiB


def spread(v):
    """The median of the per-pass values v, with their min, max and list."""
    return {"value": round(statistics.median(v), 1), "min": round(min(v), 1),
            "max": round(max(v), 1), "runs": [round(x, 1) for x in v]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--label", default="")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--bs", default="")
    ap.add_argument("--seq-bs", default="")
    ap.add_argument("--size", default="")
    ap.add_argument("--churn-files", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()

    rows = []
    errors = []

    # ---- matrix
    per = {}  # (bs, job) -> [MiB/s per pass]
    for path in sorted(glob.glob(os.path.join(a.raw, "matrix-*.json"))):
        bs = os.path.basename(path)[:-5].split("-", 2)[2]
        for job in load(path)["jobs"]:
            if job["error"]:
                errors.append(f"matrix {job['jobname']} {bs}: error {job['error']}")
            per.setdefault((bs, job["jobname"]), []).append(job_bw(job)[1])
    order = [b for b in a.bs.split(",") if b] + [b for b in a.seq_bs.split(",") if b]
    for bs in order:
        for name in MATRIX_ROWS:
            v = per.get((bs, name))
            if not v:
                continue
            rows.append({
                "test": "matrix", "name": f"{ROW_NAMES.get(name, name)} {bs}",
                "unit": "MiB/s", **spread(v), "size": a.size,
            })

    # ---- verify: one file per pass (verify-N.json), the median per row
    vpaths = sorted(glob.glob(os.path.join(a.raw, "verify-*.json")))
    vrows = {}  # desc -> [(MiB/s, jobs, bytes written, bytes rechecked)]
    vbad = set()
    for vpath in vpaths:
        groups = {}
        for job in load(vpath)["jobs"]:
            groups.setdefault(job["jobname"], []).append(job)
        for name, desc in (("seq", "verify seq 128k"), ("rand", "verify random 4k"),
                           ("par", "verify parallel 8k")):
            jobs = groups.get(name, [])
            checks = groups.get(name + "-check", [])
            if not jobs:
                continue
            bad = [j for j in jobs + checks if j["error"]]
            for j in bad:
                errors.append(f"{os.path.basename(vpath)} {j['jobname']}: error {j['error']}")
                vbad.add(desc)
            nbytes = sum(j["write"]["io_bytes"] for j in jobs)
            secs = max(j["job_runtime"] for j in jobs) / 1000.0
            checked = sum(j["read"]["io_bytes"] for j in checks)
            vrows.setdefault(desc, []).append(
                (nbytes / MiB / secs if secs else 0.0, len(jobs), nbytes, checked))
    for desc, per_pass in vrows.items():
        v = [p[0] for p in per_pass]
        jobs = per_pass[0][1]
        rows.append({
            "test": "verify", "name": desc + (f" x{jobs}" if jobs > 1 else ""),
            "unit": "MiB/s", **spread(v),
            "status": "FAILED" if desc in vbad else "ok", "jobs": jobs,
            "bytes_written": sum(p[2] for p in per_pass),
            "bytes_rechecked": sum(p[3] for p in per_pass),
        })

    # ---- churn: one file per pass (churn-N.json, churn-N.wall), the median
    per_pass = []  # (files/s, jobs, seconds, MiB/s)
    for cpath in sorted(glob.glob(os.path.join(a.raw, "churn-*.json"))):
        jobs = load(cpath)["jobs"]
        for j in jobs:
            if j["error"]:
                errors.append(f"{os.path.basename(cpath)}: error {j['error']}")
        with open(cpath[:-len(".json")] + ".wall") as f:
            t0, t1 = (float(x) for x in f.read().split())
        wall = t1 - t0
        nbytes = sum(j["write"]["io_bytes"] for j in jobs)
        per_pass.append((a.churn_files / wall, len(jobs), wall, nbytes / MiB / wall))
    if per_pass:
        v = [p[0] for p in per_pass]
        med = sorted(per_pass)[(len(per_pass) - 1) // 2]
        rows.append({
            "test": "churn", "name": f"small-file churn x{per_pass[0][1]}", "unit": "files/s",
            **spread(v), "files": a.churn_files,
            "seconds": round(med[2], 2), "mib_s": round(med[3], 1),
        })

    if not a.quiet:
        print(f"fio results for {a.label} ({a.runs} matrix passes, median; MiB/s = 2^20 B/s)")
        print(f"  {'test':<28} {'value':>10}  unit     detail")
        for r in rows:
            if r["test"] == "matrix":
                d = f"min {r['min']}, max {r['max']}"
            elif r["test"] == "verify":
                d = r["status"] + (f", min {r['min']}, max {r['max']}" if len(r["runs"]) > 1 else "")
            else:
                d = f"{r['files']} files in {r['seconds']} s, {r['mib_s']} MiB/s"
                if len(r["runs"]) > 1:
                    d += f" (median pass; min {r['min']}, max {r['max']} files/s)"
            print(f"  {r['name']:<28} {r['value']:>10.1f}  {r['unit']:<8} {d}")
        for e in errors:
            print(f"  ERROR: {e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"label": a.label, "rows": rows, "errors": errors,
                       "params": {"size": a.size, "runs": a.runs, "bs": a.bs,
                                  "seq_bs": a.seq_bs}}, f, indent=1)
            f.write("\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
