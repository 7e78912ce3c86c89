#!/usr/bin/env python3
"""Zone states of QEMU's NVMe ZNS namespace 1 at QEMU exit, from its trace log.

QEMU keeps the zone states of an emulated ZNS namespace in memory only, so
scripts/qemu-zns.sh --image traces the commands that change them
(pci_nvme_io_cmd, pci_nvme_write, pci_nvme_err_req_status,
pci_nvme_reset_zone, pci_nvme_finish_zone) and this replays the log from the
all-EMPTY state every boot starts with.  A write moves the wp to its end
unless the same command failed at submission (an err_req_status with its
cid before the next command); the harness stops the guest before QEMU quits,
so every accepted write has completed.  Open and close do not matter: after
a power cycle a zone with data is CLOSED (or FULL).

Prints "INDEX WP_BLOCKS STATE" for every non-empty zone (STATE C or F), the
input of `zns-state restore` in the next boot.
"""
import argparse
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--zone-blocks", type=int, required=True)
ap.add_argument("--cap-blocks", type=int, required=True)
ap.add_argument("--zones", type=int, required=True)
ap.add_argument("log")
a = ap.parse_args()

wp = [0] * a.zones          # blocks from the zone start
full = [False] * a.zones

kv = re.compile(r"(\w+)[ =]('[^']*'|[^\s,]+)")
pending = None              # (cid, kind, args) of the last command's effect


def fields(rest):
    return {k: v.strip("'") for k, v in kv.findall(rest)}


def apply(p):
    kind, f = p[1], p[2]
    if kind == "write":
        if f.get("nsid", "1") != "1":
            return
        lba, nlb = int(f["lba"], 0), int(f["nlb"], 0)
        z = lba // a.zone_blocks
        if z >= a.zones:
            return
        if f.get("append"):     # zone append: at the zone's wp
            end = wp[z] + nlb
        else:
            end = lba + nlb - z * a.zone_blocks
        if end > wp[z]:
            wp[z] = end
        if wp[z] >= a.cap_blocks:
            wp[z], full[z] = a.cap_blocks, True
    else:
        allz = f.get("all", "0") not in ("0", "false")
        zones = range(a.zones) if allz else [int(f["slba"], 0) // a.zone_blocks]
        for z in zones:
            if z >= a.zones:
                continue
            if kind == "reset":
                if allz and wp[z] == 0 and not full[z]:
                    continue
                wp[z], full[z] = 0, False
            elif kind == "finish":
                if allz and (full[z] or wp[z] == 0):
                    continue   # finish all: only open and closed zones
                full[z] = True


ev = re.compile(r"(pci_nvme_\w+) (.*)$")
with open(a.log, errors="replace") as fh:
    for line in fh:
        m = ev.search(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(2)
        f = fields(rest)
        if name == "pci_nvme_io_cmd":
            if pending:
                apply(pending)
            pending = None
        elif name == "pci_nvme_write":
            op = f.get("opname", "")
            if "APPEND" in op:
                f["append"] = "1"
            pending = (f.get("cid"), "write", f)
        elif name in ("pci_nvme_reset_zone", "pci_nvme_finish_zone"):
            pending = (None, name.split("_")[2], f)
        elif name == "pci_nvme_err_req_status":
            if pending and (pending[0] is None or pending[0] == f.get("cid")):
                pending = None
if pending:
    apply(pending)
for z in range(a.zones):
    if full[z]:
        print(z, wp[z], "F")
    elif wp[z]:
        print(z, wp[z], "C")
