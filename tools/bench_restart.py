#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench_restart.py BUILDDIR [--runs N] [--modes client,server] [--events E,...]
[--fd-store] [--testpmd]:
what a real guest sees when its vhost-user back end is upgraded or
restarted (issue 16), side by side in one run.  One Linux guest per mode
(QEMU/TCG, tests/guest/vhost_cases.py) pings the host every 10 ms while
one iperf3 stream runs host -> guest for 6 s; 1.5 s in, one event:

  none      nothing (the baseline: the gaps TCG and the machine make)
  upgrade   vnicctl upgrade (the binary installed again first)
  sigkill   vnicd SIGKILLed and started again (client mode: vnicd
            reconnects; server mode: QEMU does, reconnect=1)

--fd-store adds vnicd run by a systemd of its own (pid 1 of a private pid
namespace) with --fd-store (backend "vnicd-fds"): there sigkill is
systemctl kill -s KILL, and systemd starts vnicd again, which takes over
from the fd store; and two more events, "systemctl reload" (ExecReload=:
vnicctl upgrade) and "systemctl restart" (SIGTERM: every worker stopped,
the store emptied, a fresh vnicd).

--runs rounds of the three, in that order (--events: only these of the
vnicd events, e.g. none,upgrade).  --testpmd adds DPDK testpmd
(net_vhost <-> net_tap, the anchor) stopped and started again under the
same pings.  Per mode and event: pings lost and the worst gap between two
replies in the guest's clock, min/median/max over the rounds, in the whole
run and within 0.3 s of the event ("near": what the event did, apart from
the gaps TCG makes anywhere; for "none" the same moment, 1.5 s in); whether
iperf3's TCP stream lived through it; how long the event took until the
NIC ran again (host clock).  Needs root, qemu-system-x86, iperf3,
linux-image-amd64, busybox-static (and dpdk for --testpmd).  The machine
may be shared: the load average is printed."""
import argparse
import os
import statistics
import sys
sys.dont_write_bytecode = True
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "guest"))
import vhost_cases  # noqa: E402
import vmlib  # noqa: E402


def mmm(xs, fmt="%.0f"):
    xs = sorted(x for x in xs if x is not None)
    return "/".join(fmt % v for v in (xs[0], statistics.median(xs), xs[-1])) if xs else "-"


def rounds(kind, mode, events, runs):
    os.environ["VNIC_QEMU_BACKEND"] = kind
    grp = vhost_cases.Group(mode)
    grp.watch_tap = False  # the tap capture's CPU would be in the figures
    out = {e: [] for e in events}
    try:
        grp.boot()
        grp.g.iperf3_server()
        for k in range(runs):
            for e in events:
                r = grp.pings_across(None if e == "none" else e)
                out[e].append(r)
    finally:
        grp.close()
        grp.ns.close()  # the next group may take the same name
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builddir")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--modes", default="client,server")
    ap.add_argument("--testpmd", action="store_true")
    ap.add_argument("--fd-store", action="store_true",
                    help="also vnicd under systemd with --fd-store (SIGKILL: systemd restarts "
                         "it and it takes over from the store)")
    ap.add_argument("--events", default=None,
                    help="comma-separated: only these events of vnicd's (none, upgrade, sigkill, "
                         "systemctl reload, systemctl restart)")
    a = ap.parse_args()
    only = a.events.split(",") if a.events else None

    def chosen(evs):
        return tuple(e for e in evs if only is None or e in only)

    os.environ["VNIC_TOP_BUILDDIR"] = os.path.abspath(a.builddir)
    print("load average at start: %s" % open("/proc/loadavg").read().split()[:3])
    res = {}
    for mode in a.modes.split(","):
        res[("vnicd", mode)] = rounds("vnicd", mode, chosen(("none", "upgrade", "sigkill")), a.runs)
    if a.fd_store:
        os.environ["VNIC_VNICD_FDSTORE"] = "1"
        for mode in a.modes.split(","):
            res[("vnicd-fds", mode)] = rounds("vnicd", mode,
                                                    chosen(("none", "sigkill", "systemctl reload",
                                                            "systemctl restart")), a.runs)
        del os.environ["VNIC_VNICD_FDSTORE"]
    if a.testpmd:
        res[("testpmd", "server")] = rounds("testpmd", "server", ("none", "restart"), a.runs)
    print("load average at end: %s" % open("/proc/loadavg").read().split()[:3])
    print("%-9s %-7s %-17s %5s %-14s %-16s %-16s %-12s %s" % (
        "backend", "mode", "event", "runs", "lost min/med/max", "gap ms min/med/max",
        "near min/med/max", "iperf3 alive", "event ms min/med/max"))
    for (kind, mode), evs in res.items():
        for e, rs in evs.items():
            print("%-9s %-7s %-17s %5d %-14s %-16s %-16s %-12s %s" % (
                kind, mode, e, len(rs), mmm([r["lost"] for r in rs]),
                mmm([r["gap_ms"] for r in rs]), mmm([r["event_gap_ms"] for r in rs]),
                "%d/%d" % (sum(r["iperf3_bytes"] is not None for r in rs), len(rs)),
                mmm([m for r in rs for m in r["event_ms"]])))
            print("RESULT restart backend=%s mode=%s event=%s lost=%s gap_ms=%s near_ms=%s dup=%d"
                  % (kind, mode, e.replace(" ", "-"), ",".join(str(r["lost"]) for r in rs),
                     ",".join("%.1f" % r["gap_ms"] for r in rs),
                     ",".join("%.1f" % r["event_gap_ms"] for r in rs), sum(r["dup"] for r in rs)))


if __name__ == "__main__":
    vmlib.main(main)
