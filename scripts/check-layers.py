#!/usr/bin/env python3
"""Fail when a file uses a layer it may not use: an #include of its header,
or a declaration (a prototype) of a function that layer defines.

The layers, lowest first (docs/design.md): common, zoned, lsm, zonealloc
(with the pure victim policy), mlog, fs, gc (the collector), fusefs, tools;
progs (tools/zf_tool.h) is shared by the programs.  Each may include its own
headers and those of the layers listed for it below, and declare only
functions that those layers (or its own) define: a prototype of a higher
layer's function in a lower layer's file is an upward call that no include
shows.  Tests may include and declare anything.
Usage: check-layers.py SOURCE_ROOT [STAMP]  (writes STAMP on success, so
meson can run it as a build step).
"""
import os
import re
import sys

# layer -> layers whose headers it may include (itself implied)
ALLOWED = {
    "common": set(),
    "zoned": {"common"},
    "lsm": {"common"},
    "zonealloc": {"common", "zoned"},
    "mlog": {"common", "zoned"},
    "fs": {"common", "zoned", "lsm", "zonealloc", "mlog"},
    "gc": {"common", "zoned", "lsm", "zonealloc", "fs-gc"},
    "fusefs": {"common", "zoned", "fs-public", "gc", "progs"},
    "tools": {"common", "zoned", "lsm", "zonealloc", "mlog", "fs-public", "progs"},
    "progs": {"common"},
}
# fs and mlog headers a layer above fs may use; the rest are the core's own
FS_PUBLIC = {"fs/fs.h", "fs/fs_stats.h", "mlog/mlog.h"}
# ... and the collector: what it needs to move data (fs/fs_move.h)
FS_FOR_GC = FS_PUBLIC | {"fs/fs_move.h"}
DIRS = ["common", "zoned", "lsm", "zonealloc", "mlog", "fs", "gc", "fusefs", "tools"]
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "_Static_assert",
            "__attribute__", "_Alignof", "typeof", "__typeof__"}


def layer_of(path):
    top = path.split("/", 1)[0]
    base = os.path.basename(path)
    if path == "tools/zf_tool.h":
        return "progs"
    return top


def may_use(me, them, inc=None):
    """May layer `me` use layer `them` (through header inc, if given)?"""
    ok = ALLOWED[me]
    if them == me or them in ok:
        return True
    if them not in ("fs", "mlog"):
        return False
    if "fs-gc" in ok:
        return inc is None or inc in FS_FOR_GC
    if "fs-public" in ok:
        return inc is None or inc in FS_PUBLIC
    return False


def strip_code(text):
    """The text without comments, string and character literals and
    preprocessor lines; newlines are kept so line numbers stay right."""
    out = []
    i, n = 0, len(text)
    bol = True		# at the beginning of a line (only blanks so far)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j) or " ")
            i = j
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        elif c == "#" and bol:
            # a directive, with its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 1
                i += 1
        else:
            out.append(c)
            if c == "\n":
                bol = True
            elif not c.isspace():
                bol = False
            i += 1
            continue
        bol = False
    return "".join(out)


def function_name(head):
    """The function a top-level declaration or definition head names, or
    None (a variable, a function pointer, a typedef, a static one)."""
    words = head.split()
    if not words or words[0] in ("typedef", "static"):
        return None
    depth = 0
    for k, ch in enumerate(head):
        if ch == "(":
            if depth == 0:
                m = re.search(r"([A-Za-z_]\w*)\s*$", head[:k])
                rest = head[k + 1:].lstrip()
                if not m or rest.startswith("*") or "=" in head[:k]:
                    return None
                name = m.group(1)
                return None if name in KEYWORDS else name
            depth += 1
        elif ch == ")":
            depth -= 1
    return None


def top_level(text):
    """(kind, name, line) for each top-level function declaration ('decl')
    and definition ('def') of code text (strip_code()'d)."""
    res = []
    i, n, line = 0, len(text), 1
    head, head_line, had_brace = [], None, False
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        if c == ";":
            h = "".join(head).strip()
            name = None if had_brace else function_name(h)
            if name:
                res.append(("decl", name, head_line))
            head, head_line, had_brace = [], None, False
        elif c == "{":
            h = "".join(head).strip()
            body = h.endswith(")")	# a function's (static or not)
            name = function_name(h) if body else None
            depth, i = 1, i + 1
            while i < n and depth:
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                elif text[i] == "\n":
                    line += 1
                i += 1
            if name:
                res.append(("def", name, head_line))
            if body:
                head, head_line, had_brace = [], None, False
            else:
                had_brace = True	# struct, union, enum, initializer
            continue
        else:
            if head_line is None and not c.isspace():
                head_line = line
            head.append(c)
        i += 1
    return res


def sources(root):
    for d in DIRS:
        base = os.path.join(root, d)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            if name.endswith((".c", ".h")):
                rel = f"{d}/{name}"
                with open(os.path.join(root, rel), encoding="utf-8") as f:
                    yield rel, f.read()


def main():
    root = sys.argv[1]
    bad = []
    files = list(sources(root))
    for rel, text in files:
        me = layer_of(rel)
        d = rel.split("/", 1)[0]
        for n, line in enumerate(text.split("\n"), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            inc = m.group(1)
            if "/" not in inc:
                inc = f"{d}/{inc}"
            them = layer_of(inc)
            if not may_use(me, them, inc):
                bad.append(f"{rel}:{n}: layer '{me}' may not include \"{inc}\" ('{them}')")
    # Declarations: name -> layers that define it (non-static functions)
    parsed = [(rel, top_level(strip_code(text))) for rel, text in files]
    defined = {}
    for rel, items in parsed:
        for kind, name, _ in items:
            if kind == "def":
                defined.setdefault(name, set()).add(layer_of(rel))
    for rel, items in parsed:
        me = layer_of(rel)
        for kind, name, n in items:
            them = defined.get(name)
            if kind != "decl" or not them or any(may_use(me, t) for t in them):
                continue
            bad.append(f"{rel}:{n}: layer '{me}' declares {name}(), which layer "
                       f"'{'/'.join(sorted(them))}' defines")
    if bad:
        print("check-layers: upward or sideways includes and declarations:",
              file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        return 1
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w", encoding="utf-8") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
