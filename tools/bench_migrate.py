#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench_migrate.py BUILDDIR [options]: live migration of the same Linux
guest (QEMU/TCG, 512 MiB) on vnicd and on QEMU's own virtio-net, side by
side in one run (tests/guest/migrate_cases.py is the harness):

  vnicd         two vnicd endpoints in server mode (vnicd listens)
  vnicd-client  the same in client mode (QEMU listens, vnicd connects)
  qemu          QEMU's own virtio-net on two taps (tx=bh), the anchor
  qemu-private  the same with the guest's RAM private to QEMU (not a
                shared memfd, which vhost-user needs): a control for
                --ramcheck

Both ends' taps are ports of one bridge in a private netns that holds the
host's address.  Each round boots the guest once per back end and migrates
it there and back: a->b under an iperf3 stream host->guest (h2g), then
b->a under one guest->host (g2h), each under the guest's pings to the host
every 10 ms (the stream starts 2 s before the migration and ends --seconds
after the switch-over); --runs rounds alternate the order of the back ends.  A
round whose guest dies (QEMU's migration loses guest writes on some hosts,
doc/benchmarks.md) keeps the migration it completed before.  Per
direction: QEMU's downtime (query-migrate), the worst gap between two ping
replies seen in the guest, the pings lost, whether TCP survived (iperf3
ended without error and moved bytes after the switch-over), how the guest
was announced on the destination's tap, and on vnicd the time from the
source's GET_VRING_BASE to its answer (vnicd's log).  --announce off
makes the device hide GUEST_ANNOUNCE (so the back end's SEND_RARP, or
QEMU's RARP, is the only announcement).  --ramcheck holds each
destination paused after the migration and compares its RAM with the
source's page by page (a page that differs is a write the migration lost;
vmlib's ramcheck), then lets it run: the time figures then include the
comparison, so use it for correctness, not for gaps.
Needs root, qemu-system-x86, iperf3, linux-image-amd64, busybox-static.
TCG is slow and the machine may be shared: the load average is printed."""
import os
import statistics
import sys
sys.dont_write_bytecode = True
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "guest"))
import migrate_cases  # noqa: E402
import vmlib  # noqa: E402
from vmlib import Fail  # noqa: E402

CONFIGS = {"vnicd": ("vnicd", "server"), "vnicd-client": ("vnicd", "client"),
           "qemu": ("qemu", "server"), "qemu-private": ("qemu", "server")}


def one_round(cfg, a, image, ramchecks, out):
    """Boots the guest on cfg and migrates it there and back; each
    migration's figures go into out[direction] as it completes, so a
    guest that dies in the second keeps the first's."""
    kind, mode = CONFIGS[cfg]
    announce = {"on": True, "off": False, "default": None}[a.announce]
    p = migrate_cases.Pair(kind, image, a.builddir, mode=mode, announce=announce, tag="b",
                           ramcheck=a.ramcheck, private_ram=cfg == "qemu-private",
                           prealloc=not a.no_prealloc, iperf_args=a.iperf_args)
    try:
        p.boot()
        for d in ("h2g", "g2h"):
            r = p.migrate(d, a.seconds)
            r["failures"] = migrate_cases.check(r)
            r.pop("src_log", None)
            r.pop("dst_log", None)
            out[d] = r
    finally:
        # Every RAM check, a failed round's too (lost pages often kill the guest).
        ramchecks.extend(p.ram_diffs)
        p.close()


def mmm(xs, fmt="%.0f"):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return "-"
    return "/".join(fmt % v for v in (xs[0], statistics.median(xs), xs[-1]))


def announce_kind(r):
    k = []
    if r["rarp"]:
        k.append("RARP")
    if r["garp"]:
        k.append("GARP")
    return "+".join(k) or "none"


def main():
    p = vmlib.bench_args(__doc__, migrate_cases.TAIL)
    p.add_argument("--configs", default="vnicd,qemu",
                   help="comma-separated: vnicd, vnicd-client, qemu, qemu-private (default "
                   "vnicd,qemu)")
    p.add_argument("--announce", choices=("default", "on", "off"), default="default",
                   help="virtio-net-pci guest_announce (default: QEMU's, on)")
    p.add_argument("--iperf-args", default="",
                   help="more iperf3 client options, e.g. '-b 2G' for the same stream rate on "
                   "every back end")
    p.add_argument("--no-prealloc", action="store_true",
                   help="the guest's memfd without prealloc=on (loses guest writes in a "
                   "migration on some hosts: doc/benchmarks.md)")
    p.add_argument("--ramcheck", action="store_true",
                   help="compare the destination's RAM with the source's after each "
                   "migration (pages lost)")
    a = p.parse_args()
    vmlib.need_root()
    vmlib.need_qemu()
    a.builddir = os.path.abspath(a.builddir)
    image = vmlib.build_guest(os.path.join(a.builddir, "tests/guest-image"))
    cfgs = a.configs.split(",")
    for c in cfgs:
        if c not in CONFIGS:
            raise Fail("unknown back end %s (%s)" % (c, ", ".join(CONFIGS)))
    print("bench_migrate: %d rounds x %s, iperf3 %suntil %.0f s after the switch-over, "
          "guest_announce %s, "
          "max-bandwidth %d MiB/s; loadavg at start %s; %d CPUs"
          % (a.runs, ",".join(cfgs), a.iperf_args + " " if a.iperf_args else "", a.seconds,
             a.announce,
             migrate_cases.PARAMS["max_bandwidth"] >> 20, vmlib.loadavg(), os.cpu_count()),
          flush=True)
    res = {c: {"h2g": [], "g2h": []} for c in cfgs}
    failed = {c: 0 for c in cfgs}
    ramchecks = {c: [] for c in cfgs}
    for rnd in range(a.runs):
        for c in (cfgs if rnd % 2 == 0 else cfgs[::-1]):
            x = {}
            try:
                one_round(c, a, image, ramchecks[c], x)
            except (Fail, SystemExit, OSError) as e:
                # A skip (77: this vnicd has no vhost-user) costs the round;
                # SIGTERM's exit ends the benchmark.
                if isinstance(e, SystemExit) and e.code != vmlib.SKIP:
                    raise
                # OSError: the guest's command socket broke (it crashed).
                print("round %d %s: FAILED: %s%s" % (
                    rnd + 1, c, e, " (after its %s migration, which counts)" % ", ".join(x)
                    if x else ""), flush=True)
                failed[c] += 1
            for d, r in x.items():
                res[c][d].append(r)
                print("round %d %-12s %s: downtime %s ms (%.1f MiB in it), total %s ms, worst "
                      "gap %.0f ms, %d lost, TCP %s, announce %s%s%s  load %s"
                      % (rnd + 1, c, d, r["downtime"], r["final_mib"], r["total"], r["gap"],
                         r["lost"],
                         "survived" if r["tcp"] else "FAILED", announce_kind(r),
                         ", GET_VRING_BASE to answer %.1f ms" % r["src_stop_ms"]
                         if r.get("src_stop_ms") is not None else "",
                         "" if not r["failures"] else "; " + "; ".join(r["failures"]),
                         vmlib.loadavg()), flush=True)
                if r.get("ram_diff") is not None:
                    print("round %d %-12s %s: RAM check: %s" % (
                        rnd + 1, c, d, migrate_cases.ram_diff_text(r["ram_diff"])), flush=True)
    print("\nloadavg at end %s\n" % vmlib.loadavg())
    print("| back end | dir | downtime ms min/med/max | worst gap in the guest ms min/med/max "
          "| pings lost min/med/max | TCP survived | total ms median | MiB sent in the "
          "downtime median | announcement | GET_VRING_BASE to answer ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in cfgs:
        if a.ramcheck:
            rs = ramchecks[c]
            print("| %s | RAM check | migrations that lost pages: %d of %d | pages lost "
                  "min/med/max %s | | | | | | |" % (
                      c, sum(1 for d in rs if d), len(rs), mmm([len(d) for d in rs])))
        if failed[c] and not res[c]["h2g"]:
            print("| %s | | failed (%d rounds) | | | | | | | |" % (c, failed[c]))
            continue
        for d in ("h2g", "g2h"):
            rs = res[c][d]
            if not rs:
                continue
            tot = statistics.median([r["total"] for r in rs])
            print("| %s | %s | %s | %s | %s | %d/%d | %.0f | %.1f | %s | %s |" % (
                c, d, mmm([r["downtime"] for r in rs]), mmm([r["gap"] for r in rs]),
                mmm([r["lost"] for r in rs]), sum(1 for r in rs if r["tcp"]), len(rs), tot,
                statistics.median([r["final_mib"] for r in rs]),
                ", ".join(sorted({announce_kind(r) for r in rs})),
                mmm([r.get("src_stop_ms") for r in rs])))
    if any(failed.values()):
        print("\nrounds failed: %s" % ", ".join("%s %d" % kv for kv in failed.items() if kv[1]))


if __name__ == "__main__":
    vmlib.main(main)
