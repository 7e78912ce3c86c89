#!/bin/bash
# Man pages (issue 18): every option that a program's --help lists, and
# every exit status it names, appears in its man page; the pages render
# without warnings; `meson install` installs them (and the umount helper).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
zf_require_prog python3 python3
zf_require_prog man man-db
MAN=$ZF_SRC_DIR/docs/man
for b in "$ZF_DAEMON" "$ZF_MKFS" "$ZF_FSCK" "$ZF_STAT" "$ZF_EMU"; do zf_require_bin "$b"; done

python3 - "$MAN" "$ZF_DAEMON" "$ZF_MKFS" "$ZF_FSCK" "$ZF_STAT" "$ZF_EMU" <<'PY'
import os, re, subprocess, sys
man, progs = sys.argv[1], sys.argv[2:]
bad = []
for prog in progs:
    name = os.path.basename(prog)
    sec = "1" if name in ("zonefuse-stat", "zonefuse-emu") else "8"
    page = open(os.path.join(man, name + "." + sec)).read()
    # Plain text of the source: "\-" is "-", font escapes dropped.
    text = re.sub(r"\\f[BIRP]|\\f\(..|\\&", "", page).replace("\\-", "-")
    h = subprocess.run([prog, "--help"], capture_output=True, text=True)
    assert h.returncode == 0, f"{name} --help exited {h.returncode}"
    out = h.stdout
    opts = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", out))
    opts |= {"-o " + o for o in re.findall(r"-o ([a-z_]+)", out)}
    for o in sorted(opts):
        key = o[3:] if o.startswith("-o ") else o
        if not re.search(r"(?<![\w-])" + re.escape(key) + r"(?![\w-])", text):
            bad.append(f"{name}: {o} (from --help) is not in {name}.{sec}")
    # Exit statuses named by --help: "Exit status: 0 ..., 1 ..., 2 ..."
    m = re.search(r"Exit (?:status|codes):(.*?)(?:\n\n|\Z)", out, re.S)
    assert m, f"{name} --help names no exit status"
    exits = set(re.findall(r"(?<![\w.-])(\d+) ", m.group(1)))
    sec = text.split(".SH EXIT STATUS", 1)
    assert len(sec) == 2, f"{name} page has no EXIT STATUS section"
    sec = sec[1].split(".SH", 1)[0]
    for e in sorted(exits):
        if not re.search(r"^\.B " + e + r"$", sec, re.M):
            bad.append(f"{name}: exit status {e} (from --help) is not in its page")
    print(f"{name}: {len(opts)} options, exit statuses {sorted(exits)}: all in its page")
# Every virtual xattr the daemon serves is in zonefuse(8) and zonefuse-stat(1).
for page in ("zonefuse.8", "zonefuse-stat.1"):
    text = open(os.path.join(man, page)).read()
    for x in ("user.zonefuse.stats", "user.zonefuse.zones", "user.zonefuse.extents",
              "user.zonefuse.lifetime"):
        if x not in text:
            bad.append(f"{page}: {x} missing")
if bad:
    print("\n".join(bad)); sys.exit(1)
PY
[ $? -eq 0 ] || zf_fail "man pages do not cover --help"

for p in "$MAN"/*.[18]; do
	w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$p" 2>&1 >/dev/null) || zf_fail "man -l $p failed"
	[ -z "$w" ] || zf_fail "$(basename "$p") renders with warnings: $w"
done

# A stats key the daemon serves but zonefuse-stat(1) does not list.
if [ -c /dev/fuse ] && [ "$(id -u)" -eq 0 ]; then
	zf_setup
	zf_mount
	keys=$(zf_stats | sed -n 's/=.*//p' | sed -E 's/^class_(none|short|medium|long|extreme)_/class_C_/; s/^lat_[a-z]+_/lat_OP_/' | sort -u)
	text=$(sed -E 's/\\f[BIRP]//g; s/\\-/-/g' "$MAN/zonefuse-stat.1" | sed -E 's/class_C_/class_C_/g')
	missing=
	for k in $keys; do
		grep -qE "(^|[ ,])$k([ ,.]|$)" <<<"$text" || missing+=" $k"
	done
	[ -z "$missing" ] || zf_fail "stats keys missing from zonefuse-stat.1:$missing"
	zf_umount
fi

dest=$(mktemp -d "${TMPDIR:-/tmp}/zf-maninst.XXXXXX")
trap 'rm -rf "$dest"; zf_teardown' EXIT
meson install -C "$ZF_BUILD_DIR" --no-rebuild --destdir "$dest" --quiet >/dev/null ||
	zf_fail "meson install failed"
for p in man8/zonefuse.8 man8/mkfs.zonefuse.8 man8/fsck.zonefuse.8 man1/zonefuse-stat.1 \
	man1/zonefuse-emu.1 man8/umount.fuse.zonefuse.8 man8/umount.fuse.8; do
	[ -n "$(find "$dest" -path "*/$p")" ] || zf_fail "meson install did not install $p"
done
for h in umount.fuse.zonefuse umount.fuse; do
	[ -n "$(find "$dest" -name "$h" -path '*sbin*')" ] || zf_fail "no $h"
done
zf_pass "every --help option and exit status is in its man page; pages install"
