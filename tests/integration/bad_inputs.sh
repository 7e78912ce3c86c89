#!/bin/bash
# Bad input (issue 48): runs every row of the table in docs/packaging.md
# ("Bad input: every message and exit status") and checks that the command
# exits with the status the row gives, prints one line on standard error
# (a usage error of zonefuse-emu may add "Try 'zonefuse-emu --help'."),
# that the line holds the row's message, that it prints no library
# "error:" line, that it takes less than 10 s, and that it leaves nothing
# behind: no mount on DIR or FILE, no NEW file.  The table is the documentation: a row that is wrong there
# fails here.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_fuse
zf_require_prog python3 python3
for b in "$ZF_FSCK" "$ZF_STAT"; do zf_require_bin "$b"; done
zf_setup --zone-size 16M --zones 32
W=$ZF_WORK
"$ZF_EMU" create "$W/fmt.img" --zone-size 16M --zones 32 >/dev/null
"$ZF_MKFS" "$W/fmt.img" >/dev/null
"$ZF_EMU" create "$W/blank.img" --zone-size 16M --zones 16 >/dev/null
mkdir "$W/dir"
: >"$W/file"
ln "$ZF_DEV" "$W/link.img"
zf_mount

python3 - "$ZF_SRC_DIR/docs/packaging.md" "$ZF_BUILD_DIR" "$W" "$ZF_DEV" "$(realpath "$ZF_MNT")" <<'PY'
import os, re, subprocess, sys, time
doc, build, w, busy, mnt = sys.argv[1:]
text = open(doc).read()
m = re.search(r"<!-- bad-inputs[^>]*-->(.*?)<!-- /bad-inputs -->", text, re.S)
assert m, "no bad-inputs table in " + doc
tokens = {"DEV": f"{w}/fmt.img", "BLANK": f"{w}/blank.img", "BUSY": busy,
          "LINK": f"{w}/link.img", "MNT": mnt, "DIR": f"{w}/dir", "FILE": f"{w}/file",
          "NONE": f"{w}/none", "NEW": f"{w}/new.img"}
tok_re = re.compile(r"\b(" + "|".join(tokens) + r")\b")
def subst(s):
    return tok_re.sub(lambda t: tokens[t.group(1)], s)
def cell(c):
    c = c.strip().replace("\\|", "|")	# a | in a table cell is written \|
    for q in ("``", "`"):
        if c.startswith(q) and c.endswith(q):
            return c[len(q):-len(q)].strip()
    return c
bad, n = [], 0
for line in m.group(1).splitlines():
    cols = [c for c in line.split(" | ")]
    if not line.startswith("| `"):
        continue
    cmd, rc, msg = cell(cols[0][2:]), int(cols[1]), cell(cols[2].rstrip(" |"))
    argv = subst(cmd).split()
    if "/" not in argv[0]:
        argv[0] = os.path.join(build, argv[0])
    want = re.escape(subst(msg)).replace(r"\ N\ ", r" [0-9]+ ")
    t0 = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    took = time.time() - t0
    lines = p.stderr.splitlines()
    extra = [l for l in lines[1:] if not l.startswith("Try '")]
    n += 1
    why = []
    if p.returncode != rc:
        why.append(f"exit {p.returncode}, the table says {rc}")
    if not lines or extra:
        why.append(f"{len(lines)} lines on stderr")
    elif not re.search(want, lines[0]):
        why.append("message differs")
    if re.search(r"\berror:", p.stderr):
        why.append("a library error line")
    if took > 10:
        why.append(f"took {took:.0f} s")
    if os.path.exists(tokens["NEW"]):
        why.append("left NEW behind")
        os.unlink(tokens["NEW"])
    for t in ("DIR", "FILE"):
        if os.path.ismount(tokens[t]):
            why.append(f"left {t} mounted")
            subprocess.run(["umount", "-l", tokens[t]])
    status = "ok" if not why else "BAD (" + "; ".join(why) + ")"
    print(f"{status}: {cmd} -> {p.returncode}: {' / '.join(lines)}")
    if why:
        bad.append(cmd)
print(f"{n} rows, {len(bad)} bad")
if n < 40 or bad:
    sys.exit(1)
PY
[ $? -eq 0 ] || zf_fail "bad inputs"
zf_daemon_alive || zf_fail "the daemon of BUSY died"
zf_umount
zf_pass "every row of the bad-input table in docs/packaging.md: exit status, one line, message"
