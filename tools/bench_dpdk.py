#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench_dpdk.py BUILDDIR [options]: one client, DPDK testpmd's virtio-user
(a polling guest driver in a process, 1 queue pair, split ring), on
different vhost-user back ends:

  vnicd     vnicd (server mode) -> tap in a private netns
  dpdk      DPDK testpmd net_vhost alone (rxonly for g2h, txonly for h2g):
            DPDK's vhost library at its best, no tap behind it
  dpdk-tap  DPDK testpmd net_vhost <-> net_tap, io forwarding: the same
            work as vnicd (frames to and from a tap)
  vnicd-afp vnicd (server mode) -> AF_PACKET on one end of a veth pair in a
            private netns (issue 17); the counters and the h2g sender on the
            other end
  dpdk-afp  DPDK testpmd net_vhost <-> net_af_packet on the same veth pair,
            io forwarding

g2h: virtio-user txonly; received packets are counted where they land
(testpmd's rx, or the tap's rx counter).  h2g: the sender is testpmd txonly
(dpdk) or a third testpmd with net_af_packet writing into the tap (vnicd,
dpdk-tap); counted at virtio-user's rx.  Sizes: 64 B and 1518 B (Mpps) and
64 KiB (Gbit/s; multi-segment mbufs; g2h only through a tap).  Each
measurement is --seconds after a 1 s warm-up; --runs rounds alternate the
back ends; min/median/max, then (with more than one back end) the ratio of
each pair's packet rates within each round, the earlier in --backends over
the later.  Every testpmd runs under timeout and is killed
at the end.  Needs root and dpdk (and vnicd with vhost-user for vnicd)."""
import os
import statistics
import sys
import time
sys.dont_write_bytecode = True
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "guest"))
import backends  # noqa: E402
import vmlib  # noqa: E402
from vmlib import Fail, log  # noqa: E402

MAC = "52:54:00:12:34:56"
TAP = "bd0"
VETH, PEER = "bva0", "bvb0"  # the back end's veth end, and the host's
SIZES = (64, 1518, 65535)


def txpkts(size):
    if size <= 2048:
        return str(size)
    # Each segment fits one mbuf (--mbuf-size=9216); testpmd's command line
    # takes no longer list.
    segs = [8192] * (size // 8192) + ([size % 8192] if size % 8192 else [])
    return ",".join(map(str, segs))


def client(sock, d, mode="server"):
    return vmlib.Testpmd(["net_virtio_user0,path=%s,queues=1,mac=%s%s" %
                          (sock, MAC, ",server=1" if mode == "client" else "")],
                         seconds=600, workdir=d, name="vu", extra_eal=["--main-lcore", "1"],
                         args=["--eth-peer=0,02:00:00:00:00:01", "--tx-offloads=0x8000",
                               "--enable-scatter", "--max-pkt-len=9600", "--mbuf-size=9216"],
                         mem_mb=2048)


class Pair:
    """A client and a back end; g2h(size) and h2g(size) -> (pps, bps)."""

    def __init__(self, kind, a):
        self.kind, self.a = kind, a
        self.d = vmlib.tmpdir()
        self.sock = os.path.join(self.d, "vhost.sock")
        self.ns = vmlib.Netns("d")
        self.src = None
        self.host = TAP  # where g2h is counted and h2g sent from
        if kind in ("vnicd-afp", "dpdk-afp"):
            self.host = PEER
            self.ns.run("ip link add %s mtu 9000 type veth peer name %s mtu 9000" % (VETH, PEER))
            self.ns.run("sysctl -qw net.ipv6.conf.%s.disable_ipv6=1" % VETH, check=False)
            self.ns.run("ip link set %s up" % VETH)
            # The guest's frames arrive whole: no offloads the guest did
            # not ask for (GSO) on the host's end.
            self.ns.run("ethtool -K %s tso off gso off" % PEER, check=False)
        if kind == "vnicd-afp":
            self.b = backends.VnicdBackend(a.builddir, self.ns, self.sock, "server", tap=VETH,
                                           workdir=self.d, policy=a.policy, af_packet=True)
            self.b.before_qemu()
        elif kind == "dpdk-afp":
            self.b = backends.TestpmdBackend(self.ns, self.sock, "server", tap=VETH, seconds=600,
                                             workdir=self.d,
                                             port="net_af_packet0,iface=%s" % VETH)
            self.b.before_qemu()
        elif kind == "vnicd":
            self.b = backends.VnicdBackend(a.builddir, self.ns, self.sock, "server", tap=TAP,
                                           workdir=self.d, mtu=9000, policy=a.policy)
            self.b.before_qemu()
        elif kind == "dpdk-tap":
            self.b = backends.TestpmdBackend(self.ns, self.sock, "server", tap=TAP, seconds=600,
                                             workdir=self.d)
            self.b.before_qemu()
        elif kind == "dpdk":
            self.b = None
            self.be = vmlib.Testpmd(["net_vhost0,iface=%s,queues=1" % self.sock], seconds=600,
                                    workdir=self.d, name="vhost",
                                    args=["--eth-peer=0,%s" % MAC, "--tx-offloads=0x8000",
                                          "--mbuf-size=9216"])
            vmlib.wait_for("vhost socket", 30, lambda: os.path.exists(self.sock))
        else:
            raise Fail("unknown back end " + kind)
        self.c = client(self.sock, self.d)
        self.c.wait_log("testpmd> ", 60, "the client's prompt")
        if self.b:
            self.b.wait_running()
            vmlib.wait_for("tap", 20, lambda: self.ns.has_link(self.host), 0.1)
            self.ns.run("sysctl -qw net.ipv6.conf.%s.disable_ipv6=1" % self.host, check=False)
            # 1518 B frames exceed MTU 1500: a packet socket refuses them.
            self.ns.addr(self.host, "198.18.2.1/24", 9000)
        else:
            self.be.wait_log("testpmd> ", 60, "the back end's prompt")

    def _rate(self, counter):
        time.sleep(1)
        p0, b0, t0 = counter() + (time.monotonic(),)
        time.sleep(self.a.seconds)
        p1, b1, t1 = counter() + (time.monotonic(),)
        return (p1 - p0) / (t1 - t0), (b1 - b0) * 8 / (t1 - t0)

    def _pmd_counter(self, tp, key):
        def f():
            s = tp.stats()[0]
            return s[key], s[key + "b"]
        return f

    def g2h(self, size):
        if size > 9600 and self.b:
            return None  # the tap's MTU; see h2g
        c = self.c
        c.cmd("set fwd txonly")
        c.cmd("set txpkts " + txpkts(size))
        if self.b:
            def counter():
                rb, rp, _, _ = self.ns.dev_counters(self.host)
                return rp, rb
        else:
            self.be.cmd("set fwd rxonly")
            self.be.cmd("start")
            counter = self._pmd_counter(self.be, "rx")
        c.cmd("start")
        try:
            return self._rate(counter)
        finally:
            c.cmd("stop")
            if not self.b:
                self.be.cmd("stop")

    def h2g(self, size):
        c = self.c
        c.cmd("set fwd rxonly")
        c.cmd("start")
        try:
            if self.b:
                if size > 2048:
                    return None  # net_af_packet frames are 2 KiB
                src = vmlib.Testpmd(["net_af_packet0,iface=%s" % self.host], netns=self.ns,
                                    seconds=self.a.seconds + 30, workdir=self.d, name="src",
                                    lcores="0,1",
                                    args=["--eth-peer=0,%s" % MAC, "--forward-mode=txonly",
                                          "--txpkts=%d" % size])
                src.wait_log("testpmd> ", 60, "the source's prompt")
                src.cmd("start")
                try:
                    return self._rate(self._pmd_counter(c, "rx"))
                finally:
                    src.kill()
            self.be.cmd("set fwd txonly")
            self.be.cmd("set txpkts " + txpkts(size))
            self.be.cmd("start")
            try:
                return self._rate(self._pmd_counter(c, "rx"))
            finally:
                self.be.cmd("stop")
        finally:
            c.cmd("stop")

    def close(self):
        self.c.kill()
        if self.b:
            self.b.close()
        else:
            self.be.kill()
        self.ns.close()



def fmt(xs, scale):
    xs = sorted(x * scale for x in xs if x is not None)
    if not xs:
        return "n/a"
    return "%.3g/%.3g/%.3g" % (xs[0], statistics.median(xs), xs[-1])


def round_ratios(res, kinds, runs):
    """Lines of 'A / B' ratios within each round (min/median/max over the
    rounds where both ran), for every pair of back ends, packet rates at
    64 and 1518 B: on a shared machine the fairest figure."""
    out = []
    for i, x in enumerate(kinds):
        for y in kinds[i + 1:]:
            cells = []
            for d in ("g2h", "h2g"):
                for s in SIZES[:2]:
                    r = [res[(x, d, s)][n][0] / res[(y, d, s)][n][0] for n in range(runs)
                         if res[(x, d, s)][n] and res[(y, d, s)][n]]
                    cells.append(fmt(r, 1))
            out.append("| %s / %s | %s |" % (x, y, " | ".join(cells)))
    return out


def main():
    p = vmlib.bench_args(__doc__, 3)
    p.add_argument("--backends", default="vnicd,dpdk,dpdk-tap")
    p.add_argument("--policy", default=None, help="vnicd's TX policy (vnicctl add --policy)")
    a = p.parse_args()
    vmlib.need_root()
    vmlib.need_testpmd()
    a.builddir = os.path.abspath(a.builddir)
    kinds = a.backends.split(",")
    print("bench_dpdk: %d runs x %s, %.0f s each; loadavg at start %s; %d CPUs"
          % (a.runs, ",".join(kinds), a.seconds, vmlib.loadavg(), os.cpu_count()), flush=True)
    res = {(k, d, s): [] for k in kinds for d in ("g2h", "h2g") for s in SIZES}
    for r in range(a.runs):
        for k in (kinds if r % 2 == 0 else kinds[::-1]):
            try:
                pair = Pair(k, a)
            except (Fail, SystemExit) as e:
                print("run %d %s: FAILED to set up: %s" % (r + 1, k, e), flush=True)
                continue
            try:
                for s in SIZES:
                    for d in ("g2h", "h2g"):
                        try:
                            x = getattr(pair, d)(s)
                        except Fail as e:
                            print("run %d %s %s %d: FAILED: %s" % (r + 1, k, d, s, e))
                            x = None
                        res[(k, d, s)].append(x)
                        if x:
                            print("run %d %-8s %s %5d B: %.3f Mpps %.2f Gbit/s  load %s"
                                  % (r + 1, k, d, s, x[0] / 1e6, x[1] / 1e9, vmlib.loadavg()),
                                  flush=True)
            finally:
                pair.close()
    print("\nloadavg at end %s\n" % vmlib.loadavg())
    print("| back end | dir | 64 B Mpps | 1518 B Mpps | 64 KiB Gbit/s |")
    print("|---|---|---|---|---|")
    for k in kinds:
        for d in ("g2h", "h2g"):
            cells = [fmt([x and x[0] for x in res[(k, d, s)]], 1e-6) for s in SIZES[:2]]
            cells.append(fmt([x and x[1] for x in res[(k, d, SIZES[2])]], 1e-9))
            print("| %s | %s | %s |" % (k, d, " | ".join(cells)))
    print("(min/median/max over %d runs)" % a.runs)
    if len(kinds) > 1:
        print("\nPacket-rate ratios within each round, min/median/max:\n")
        print("| pair | g2h 64 B | g2h 1518 B | h2g 64 B | h2g 1518 B |")
        print("|---|---|---|---|---|")
        for line in round_ratios(res, kinds, a.runs):
            print(line)


if __name__ == "__main__":
    vmlib.main(main)
