#!/usr/bin/env python3
"""Summarizes the fio JSON outputs left by scripts/fio/run.sh in RAWDIR.

Prints one line per result and optionally writes them as JSON:
  {"label": ..., "params": {...},
   "rows": [{"test": "matrix", "name": "write 4k", "unit": "MiB/s",
             "value": median, "runs": [...], ...}, ...]}
matrix rows: MiB/s of each pass (fio's bw for the job; writes include the
final fsync), median over the passes.  verify rows: MiB/s written by the
writing job (its own read-back included) and whether both checks passed.
churn: files per second (created, written, fsynced and deleted), wall time.
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
                "unit": "MiB/s", "value": round(statistics.median(v), 1),
                "min": round(min(v), 1), "max": round(max(v), 1),
                "runs": [round(x, 1) for x in v], "size": a.size,
            })

    # ---- verify
    vpath = os.path.join(a.raw, "verify.json")
    if os.path.exists(vpath):
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
                errors.append(f"{j['jobname']}: error {j['error']}")
            nbytes = sum(j["write"]["io_bytes"] for j in jobs)
            secs = max(j["job_runtime"] for j in jobs) / 1000.0
            checked = sum(j["read"]["io_bytes"] for j in checks)
            rows.append({
                "test": "verify", "name": desc + (f" x{len(jobs)}" if len(jobs) > 1 else ""),
                "unit": "MiB/s", "value": round(nbytes / MiB / secs, 1) if secs else 0.0,
                "status": "FAILED" if bad else "ok", "jobs": len(jobs),
                "bytes_written": nbytes, "bytes_rechecked": checked,
            })

    # ---- churn
    cpath = os.path.join(a.raw, "churn.json")
    if os.path.exists(cpath):
        jobs = load(cpath)["jobs"]
        for j in jobs:
            if j["error"]:
                errors.append(f"churn: error {j['error']}")
        with open(os.path.join(a.raw, "churn.wall")) as f:
            t0, t1 = (float(x) for x in f.read().split())
        wall = t1 - t0
        nbytes = sum(j["write"]["io_bytes"] for j in jobs)
        rows.append({
            "test": "churn", "name": f"small-file churn x{len(jobs)}", "unit": "files/s",
            "value": round(a.churn_files / wall, 1), "files": a.churn_files,
            "seconds": round(wall, 2), "mib_s": round(nbytes / MiB / wall, 1),
        })

    if not a.quiet:
        print(f"fio results for {a.label} ({a.runs} matrix passes, median; MiB/s = 2^20 B/s)")
        print(f"  {'test':<28} {'value':>10}  unit     detail")
        for r in rows:
            if r["test"] == "matrix":
                d = f"min {r['min']}, max {r['max']}"
            elif r["test"] == "verify":
                d = r["status"]
            else:
                d = f"{r['files']} files in {r['seconds']} s, {r['mib_s']} MiB/s"
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
