#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Every relative link in the tree's Markdown files resolves: for each *.md
# file of the source tree (found by walking it, not with git, so it works in a release
# tarball too; build trees are skipped), every [text](path) and
# [text](path#anchor), image and reference definition included, names a
# file or directory that exists relative to that Markdown file, and an
# #anchor into a Markdown file names one of its headings (GitHub's slugs:
# lowercase, spaces to '-', punctuation other than '-' and '_' dropped,
# "-1", "-2" for repeated headings). http(s) and mailto links are not
# followed. Links inside code blocks and code spans are not links.
# Prints each broken link as FILE: LINK and exits 1.
set -eu
src=${VNIC_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: needs python3"; exit 77; }
exec python3 - "$src" <<'PY'
import os, re, sys
from urllib.parse import unquote

src = os.path.realpath(sys.argv[1])
# Build trees (in-tree or distcheck's), VCS and autotools caches.
SKIP_DIRS = {"build", "_build", ".git", "autom4te.cache", "node_modules"}

def md_files():
    out = []
    for d, dirs, names in os.walk(src):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("build-"))
        out += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    return out

FENCE = re.compile(r"^\s{0,3}(```|~~~)")

def strip_code(text):
    """The text with fenced blocks blanked and code spans removed, line
    numbers kept."""
    lines, fenced = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fenced:
            if m and m.group(1) == fenced:
                fenced = None
            lines.append("")
            continue
        if m:
            fenced = m.group(1)
            lines.append("")
            continue
        lines.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line))
    return lines

def slug(heading):
    h = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    h = re.sub(r"<[^>]+>", "", h)                           # inline HTML
    h = h.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)                          # \w is Unicode-aware
    return h.replace(" ", "-")

_anchors = {}
def anchors(path):
    if path not in _anchors:
        seen, out = {}, set()
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for line in strip_code(text):
            m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
        # Explicit anchors: <a name="x"> or id="x".
        out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
        _anchors[path] = out
    return _anchors[path]

INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+[\"'(][^)]*)?\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
SKIP = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)", re.I)  # http:, https:, mailto:, ...

bad = []
files = md_files()
for md in files:
    with open(md, encoding="utf-8", errors="replace") as f:
        lines = strip_code(f.read())
    rel = os.path.relpath(md, src)
    for line in lines:
        targets = [m.group(1) for m in INLINE.finditer(line)]
        m = REFDEF.match(line)
        if m:
            targets.append(m.group(1))
        for t in targets:
            link = t[1:-1] if t.startswith("<") else t
            if not link or SKIP.match(link):
                continue
            path, _, anchor = link.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(md), unquote(path))) if path else md
            # Outside the source tree is broken too: the repository must stand alone.
            inside = os.path.realpath(target) == src or os.path.realpath(target).startswith(src + os.sep)
            if not inside or not os.path.exists(target):
                bad.append("%s: %s" % (rel, link))
            elif anchor and target.endswith(".md") and os.path.isfile(target) \
                    and unquote(anchor).lower() not in anchors(target):
                bad.append("%s: %s" % (rel, link))
for b in bad:
    print(b)
print("%d Markdown files, %d broken links" % (len(files), len(bad)), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
