#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""migrate_compare.py OUT [OUT...]: the side-by-side verdict of one or more
tools/bench_migrate.py outputs (their "round N CONFIG DIR: ..." lines),
each back end against the first one named --against (default qemu):

  - per back end and direction: QEMU's downtime, the worst ping gap in
    the guest, pings lost, TCP streams that survived (min / median / max);
  - the median difference of downtime and worst gap against the anchor,
    with a bootstrap 95 % interval (10,000 resamples, --seed) and the
    share of all pairs in which the back end's figure was higher;
  - downtime at equal RAM: a line through each back end's migrations
    (downtime against the MiB QEMU sent in it), read at --at MiB, and the
    difference with a bootstrap 95 % interval (5,000 resamples). The
    downtime depends on how much RAM QEMU leaves for the stop, which
    varies from one migration to the next far more than the back ends do.

Rows whose downtime or total is 0 (QEMU had not set its times when it
was read) are left out of the fit and said so."""
import argparse
import random
import re
import statistics as st
import sys

ROW = re.compile(r"^round \d+ (\S+)\s+(h2g|g2h): downtime (\d+) ms \(([\d.]+) MiB in it\), "
                 r"total (\d+) ms, worst gap (\d+) ms, (\d+) lost, TCP (\w+)")


def read(paths):
    rows = []
    for p in paths:
        for line in open(p):
            m = ROW.match(line)
            if m:
                c, d, dt, mib, tot, gap, lost, tcp = m.groups()
                rows.append(dict(c=c, d=d, dt=int(dt), mib=float(mib), tot=int(tot),
                                 gap=int(gap), lost=int(lost), tcp=tcp == "survived"))
    return rows


def mmm(v):
    return "%g / %g / %g" % (min(v), st.median(v), max(v)) if v else "-"


def fit(rs, x0):
    xs = [r["mib"] for r in rs]
    ys = [r["dt"] for r in rs]
    mx, my = st.mean(xs), st.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my + b * (x0 - mx)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", nargs="+")
    p.add_argument("--against", default="qemu")
    p.add_argument("--at", type=float, default=5.0, help="MiB for the fit (default 5)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rows = read(a.out)
    if not rows:
        sys.exit("migrate_compare: no round lines in %s" % ", ".join(a.out))
    cfgs = list(dict.fromkeys(r["c"] for r in rows))
    print("| back end | dir | migrations | downtime ms | worst gap in the guest ms | pings lost "
          "| TCP survived | MiB in the downtime, median |")
    print("|---|---|---|---|---|---|---|---|")
    for c in cfgs:
        for d in ("h2g", "g2h"):
            rs = [r for r in rows if r["c"] == c and r["d"] == d]
            if rs:
                print("| %s | %s | %d | %s | %s | %d | %d of %d | %.1f |" % (
                    c, d, len(rs), mmm([r["dt"] for r in rs]), mmm([r["gap"] for r in rs]),
                    sum(r["lost"] for r in rs), sum(r["tcp"] for r in rs), len(rs),
                    st.median([r["mib"] for r in rs])))
    if a.against not in cfgs:
        return
    rnd = random.Random(a.seed)
    print("\nagainst %s: median difference [bootstrap 95 %%], share of pairs higher" % a.against)
    for c in cfgs:
        if c == a.against:
            continue
        for f, name in (("dt", "downtime"), ("gap", "worst gap")):
            for d in ("h2g", "g2h"):
                x = [r[f] for r in rows if r["c"] == c and r["d"] == d]
                y = [r[f] for r in rows if r["c"] == a.against and r["d"] == d]
                if not x or not y:
                    continue
                ds = sorted(st.median([rnd.choice(x) for _ in x]) -
                            st.median([rnd.choice(y) for _ in y]) for _ in range(10000))
                above = sum(1 for u in x for v in y if u > v) / (len(x) * len(y))
                print("  %s %s %s: %+.1f ms [%+.1f, %+.1f], %.2f" % (
                    c, name, d, st.median(x) - st.median(y), ds[250], ds[9750], above))
    zero = [r for r in rows if r["dt"] == 0 or r["tot"] == 0]
    if zero:
        print("left out of the fit (times not set yet): %d rows" % len(zero))
    g = {c: [r for r in rows if r["c"] == c and r["dt"] > 0 and r["tot"] > 0] for c in cfgs}
    print("\ndowntime at %g MiB sent in it (a line through both directions' migrations): %s" % (
        a.at, ", ".join("%s %.1f ms" % (c, fit(v, a.at)) for c, v in g.items() if len(v) > 2)))
    for c in cfgs:
        if c == a.against or len(g[c]) < 3 or len(g[a.against]) < 3:
            continue
        x, y = g[c], g[a.against]
        ds = sorted(fit([rnd.choice(x) for _ in x], a.at) - fit([rnd.choice(y) for _ in y], a.at)
                    for _ in range(5000))
        print("  %s minus %s: %+.1f ms [%+.1f, %+.1f]" % (
            c, a.against, fit(x, a.at) - fit(y, a.at), ds[125], ds[4875]))


if __name__ == "__main__":
    main()
