#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Every case id the tree cites (G1..G23, C1.., F1.., L1.., S1..: "TESTPLAN
# C5", "(G17)") is defined in doc/threats.md (a table row starting
# "| ID |"); every DESIGN "Section" cited is a heading of doc/design.md,
# every TESTPLAN "Section" a heading of doc/threats.md, every
# "TESTPLAN promise N" one of its numbered promises, and every "STYLE
# habit N" (or "STYLE N") one of the habits of doc/style.md. So the ids mean
# something to a reader of this repository alone.
set -eu
src=${VNIC_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: needs python3"; exit 77; }
exec python3 - "$src" <<'PY'
import os, re, subprocess, sys

src = sys.argv[1]
SKIP_DIRS = {"build", "build-aux", "m4", "autom4te.cache", ".git", "_build", "debian"}
EXTS = (".c", ".h", ".proto", ".sh", ".md", ".mk", ".am", ".ac", ".py", ".pml",
        ".1", ".3", ".5", ".7", ".8", ".golden", ".in")

def tree_files():
    try:
        top = subprocess.run(["git", "-C", src, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        if os.path.realpath(top) == os.path.realpath(src):
            out = subprocess.run(["git", "-C", src, "ls-files", "-co", "--exclude-standard"],
                                 capture_output=True, text=True, check=True).stdout
            return [f for f in out.splitlines() if not f.startswith("debian/")]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(src):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
        for n in names:
            files.append(os.path.relpath(os.path.join(d, n), src))
    return files

def text(path):
    with open(os.path.join(src, path), encoding="utf-8", errors="replace") as f:
        return f.read()

threats = text("doc/threats.md")
design = text("doc/design.md")
defined = set(re.findall(r"^\| ([GCFLS][0-9]{1,2}) \|", threats, re.M))
headings = lambda doc: {h.strip() for h in re.findall(r"^#+ (.*)$", doc, re.M)}
promises = {int(n) for n in re.findall(r"^([0-9]+)\. \*\*", threats, re.M)}
habits = {int(n) for n in re.findall(r"^([0-9]+)\. \*\*", text("doc/style.md"), re.M)}

ID = re.compile(r"(?<![A-Za-z0-9_])([GCFLS][0-9]{1,2})(?![0-9A-Za-z_])")
RANGE = re.compile(r"(?<![A-Za-z0-9_])([GCFLS])([0-9]{1,2})\s*(?:-|–|\.\.)\s*\1?([0-9]{1,2})(?![0-9])")
bad, cited = [], {}
for f in sorted(tree_files()):
    if f in ("doc/threats.md", "doc/style.md", "tests/threat_ids.sh") or not f.endswith(EXTS):
        continue
    try:
        t = text(f)
    except (OSError, UnicodeError):
        continue
    for m in ID.finditer(t):
        cited.setdefault(m.group(1), f)
    for m in RANGE.finditer(t):
        for n in range(int(m.group(2)), int(m.group(3)) + 1):
            cited.setdefault(m.group(1) + str(n), f)
    # Quoted sections, possibly broken over comment lines.
    flat = re.sub(r"\s*\n\s*(?:\*|//|#|dnl)?\s*", " ", t)
    for m in re.finditer(r'\bDESIGN \(?"([^"]+)"', flat):
        if m.group(1).strip() not in headings(design):
            bad.append('%s cites DESIGN "%s": no such heading in doc/design.md' % (f, m.group(1)))
    for m in re.finditer(r'\bTESTPLAN \(?"([^"]+)"', flat):
        if m.group(1).strip() not in headings(threats):
            bad.append('%s cites TESTPLAN "%s": no such heading in doc/threats.md' % (f, m.group(1)))
    for m in re.finditer(r"\bTESTPLAN promise ([0-9]+)", flat):
        if int(m.group(1)) not in promises:
            bad.append("%s cites TESTPLAN promise %s: doc/threats.md has %d" % (f, m.group(1), len(promises)))

    for m in re.finditer(r"\bSTYLE (?:habits? )?([0-9]+(?:(?:, | and )[0-9]+)*)", flat):
        for n in re.findall(r"[0-9]+", m.group(1)):
            if int(n) not in habits:
                bad.append("%s cites STYLE habit %s: doc/style.md has %d" % (f, n, len(habits)))

for i in sorted(set(cited) - defined, key=lambda x: (x[0], int(x[1:]))):
    bad.append("%s cites %s: not defined in doc/threats.md (add a row '| %s | ... |')" % (cited[i], i, i))
for b in bad:
    print("FAIL: " + b)
unused = sorted(defined - set(cited), key=lambda x: (x[0], int(x[1:])))
print("%d ids cited, %d defined%s" % (len(cited), len(defined),
      ", defined but not cited: " + " ".join(unused) if unused else ""))
sys.exit(1 if bad else 0)
PY
