#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench_qemu.py BUILDDIR [options]: the same Linux guest, the same QEMU
(TCG), the same tap in a private netns, on different network back ends:

  bh       QEMU's own virtio-net, tx=bh
  timer    QEMU's own virtio-net, tx=timer (x-txtimer=150000,x-txburst=256)
  vnicd    -netdev vhost-user -> vnicd (server mode) -> tap
  vnicd:P  the same with vnicd's TX policy P (timer|bh|adaptive|poll)
  vnicd:P+K=V+...  and vnicctl set-policy's --K V once the NIC runs, e.g.
           vnicd:timer+rx-irq-us=200+rx-irq-frames=64 (interrupt coalescing)
  vnicd@N  the same with N queue pairs (queues=N, mq=on; issue 15): give
           the guest vCPUs (--smp) and flows (--streams) to spread
  testpmd  -netdev vhost-user -> DPDK testpmd, net_vhost <-> net_tap, io
           forwarding (the guest's TSO/UFO are off: net_tap has none)

Each run boots the guest, measures iperf3 TCP host->guest (h2g) and
guest->host (g2h) for --seconds, a ping request/response latency (--rr),
and the unplug time (QMP device_del until DEVICE_DELETED and until the
guest's eth0 is gone); --runs rounds alternate over the back ends.  CPU
seconds per GB: the guest's vCPU thread, QEMU's other threads, and the
back end's processes (vnicd and its workers, or testpmd).  Where the time
goes, per GB and direction: the interrupts the guest took on its virtio
device (/proc/interrupts in the guest), the wake-ups (context switches) of
QEMU's threads other than the vCPU and of the back end's processes, and
for vnicd the kicks it received and the interrupts it sent (its counters).
--lifecycle adds, on vnicd: the ping gap across a worker SIGKILL (server
mode), across a vnicd SIGKILL + restart in server mode (QEMU's chardev with
reconnect=1) and across one in client mode.
Needs root, qemu-system-x86, iperf3, linux-image-amd64, busybox-static
(and dpdk for testpmd; vnicd with vhost-user for vnicd).  TCG is slow and
the machine may be shared: the load average is printed."""
import os
import re
import signal
import statistics
import sys
import time
sys.dont_write_bytecode = True
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "guest"))
import backends  # noqa: E402
import vmlib  # noqa: E402
from vmlib import Fail, log  # noqa: E402

GUEST, HOST, TAP = "198.18.0.2", "198.18.0.1", "bq0"



def boot(cfg, a, image, ns, mode="server", reconnect=None):
    d = vmlib.tmpdir()
    sock = os.path.join(d, "vhost.sock")
    b = None
    cfg, _, q = cfg.partition("@")
    queues = int(q or 1)
    if cfg in ("bh", "timer"):
        g = vmlib.Guest(image, ("tap", TAP, cfg), ip=GUEST + "/24", netns=ns, workdir=d,
                        smp=a.smp)
    elif cfg.startswith("vnicd"):
        policy = cfg.split(":", 1)[1] if ":" in cfg else None
        opts = {}
        if policy and "+" in policy:
            policy, *kvs = policy.split("+")
            for kv in kvs:
                k, eq, v = kv.partition("=")
                if not eq or not v.isdigit():
                    raise Fail("%s: want +OPTION=NUMBER (vnicctl set-policy's)" % cfg)
                opts[k] = int(v)
        b = backends.VnicdBackend(a.builddir, ns, sock, mode, tap=TAP, workdir=d,
                                  policy=policy or None, policy_opts=opts)
        g = vmlib.Guest(image, ("vhost-user", sock, mode == "client"), ip=GUEST + "/24",
                        netns=ns, workdir=d, smp=a.smp, queues=queues, reconnect=reconnect)
    elif cfg == "testpmd":
        b = backends.TestpmdBackend(ns, sock, mode, tap=TAP, workdir=d)
        g = vmlib.Guest(image, ("vhost-user", sock, mode == "client"), ip=GUEST + "/24",
                        netns=ns, workdir=d, tso=False)
    else:
        raise Fail("unknown back end %s" % cfg)
    if b:
        b.before_qemu()
    g.start(on_sockets=b.after_qemu if b else None)
    if b:
        b.wait_running()
    vmlib.wait_for("tap", 20, lambda: ns.has_link(TAP), 0.1)
    ns.addr(TAP, HOST + "/24")
    vmlib.wait_for("ping", 30, lambda: g.run("ping -c 1 -W 1 " + HOST, check=False)[0] == 0,
                   0.2)
    return g, b


def guest_irqs(g):
    """Interrupts the guest took on its virtio device(s), all CPUs."""
    out = g.run("cat /proc/interrupts")[1]
    n = 0
    for line in out.splitlines():
        if "virtio" in line:
            n += sum(int(x) for x in line.split()[1:] if x.isdigit())
    return n


def wakeups(pids, skip_vcpu=False):
    """Context switches (voluntary + not) of every thread of pids; with
    skip_vcpu, not of QEMU's vCPU threads (debug-threads=on names them)."""
    n = 0
    for pid in pids:
        base = "/proc/%d/task" % pid
        try:
            tids = os.listdir(base)
        except FileNotFoundError:
            continue
        for t in tids:
            try:
                with open("%s/%s/status" % (base, t)) as f:
                    st = f.read()
            except FileNotFoundError:
                continue
            if skip_vcpu and re.search(r"^Name:\s+CPU ", st, re.M):
                continue
            n += sum(int(x) for x in re.findall(r"ctxt_switches:\s+(\d+)", st))
    return n


def be_counts(b):
    """vnicd's kicks received and interrupts sent, over the NIC's queues."""
    n = (b.nic() or {}) if isinstance(b, backends.VnicdBackend) else {}
    qs = n.get("queues", [])
    return sum(q["kicks"] for q in qs), sum(q["interrupts"] for q in qs)


def be_pid(b):
    """The back end's top process (vnicd, or testpmd), or None."""
    proc = getattr(getattr(b, "v", None) or getattr(b, "tp", None), "proc", None)
    return proc.pid if proc else None


def time_goes(g, b):
    be = vmlib.tree_pids(be_pid(b)) if b and be_pid(b) else []
    k, i = be_counts(b) if b else (0, 0)
    return {"irqs": guest_irqs(g), "qemu_wake": wakeups([g.pid], skip_vcpu=True),
            "be_wake": wakeups(be), "kicks": k, "be_irqs": i}


def cpu_split(g):
    t = g.threads_cpu()
    vcpu = sum(v for k, v in t.items() if k.startswith("CPU "))
    return vcpu, sum(t.values()) - vcpu


def one_run(cfg, a, image):
    ns = vmlib.Netns("b")
    g, b = boot(cfg, a, image, ns)
    res = {}
    try:
        g.iperf3_server()
        # Flows hashed over every TX queue, not bound to the sending CPU
        # (iperf3 sends all its streams from one thread).
        g.run("for f in /sys/class/net/eth0/queues/tx-*/xps_cpus; do echo 0 > $f; done",
              check=False)
        vmlib.iperf3(ns, GUEST, 1)  # warm-up
        for d in ("h2g", "g2h"):
            v0, o0 = cpu_split(g)
            b0 = b.cpu() if b else 0.0
            w0 = time_goes(g, b)
            gbps, nbytes, _ = vmlib.iperf3(ns, GUEST, a.seconds, reverse=d == "g2h",
                                           extra="-P %d" % a.streams if a.streams > 1 else "")
            v1, o1 = cpu_split(g)
            b1 = b.cpu() if b else 0.0
            w1 = time_goes(g, b)
            gb = nbytes / 1e9
            res[d] = {"gbps": gbps, "vcpu": (v1 - v0) / gb, "qemu": (o1 - o0) / gb,
                      "backend": (b1 - b0) / gb}
            res[d].update({k: (w1[k] - w0[k]) / gb for k in w0})
        if a.rr:
            rc, out = g.run("ping -c %d -i 0.02 -W 1 %s" % (a.rr, HOST), timeout=a.rr + 30,
                            check=False)
            rtts = sorted(float(x) for x in re.findall(r"time=([0-9.]+) ms", out))
            if rtts:
                res["rr"] = {"p50": rtts[len(rtts) // 2] * 1000,
                             "p99": rtts[min(len(rtts) - 1, len(rtts) * 99 // 100)] * 1000}
        t0 = time.monotonic()
        g.qmp("device_del", id="nic0")
        g.qmp_event("DEVICE_DELETED", 60)
        t1 = time.monotonic()
        vmlib.wait_for("eth0 gone", 30, lambda: "eth0" not in g.iface(), 0.05)
        res["unplug"] = {"deleted": (t1 - t0) * 1000, "gone": (time.monotonic() - t0) * 1000}
    finally:
        g.shutdown()
        if b:
            b.close()
        ns.close()
    return res


def mmm(xs):
    xs = sorted(xs)
    return "%.2f/%.2f/%.2f" % (xs[0], statistics.median(xs), xs[-1]) if xs else "-"


def med(xs):
    return "%.1f" % statistics.median(xs) if xs else "-"


def ping_gap(g, action, interval=0.01, count=800):
    """Lost pings (x interval = the gap) while action() runs after 2 s."""
    g.run("ping -i %s -c %d -W 1 %s > /tmp/gap.log 2>&1 &" % (interval, count, HOST))
    time.sleep(2)
    action()
    vmlib.wait_for("ping done", count * interval + 60,
                   lambda: "packet loss" in g.run("cat /tmp/gap.log")[1], 0.5)
    out = g.run("cat /tmp/gap.log")[1]
    m = re.search(r"(\d+) packets transmitted, (\d+) packets received", out)
    lost = int(m.group(1)) - int(m.group(2))
    # A request sent while the back end is down waits in the ring and is
    # answered late, not lost: the longest round trip is the gap.
    rtt = max([float(x) for x in re.findall(r"time=([0-9.]+) ms", out)] or [0])
    return max(rtt, lost * interval * 1000), lost


def lifecycle(a, image):
    server = "vnicd restart (server, QEMU reconnect=1)"
    out = {"worker restart": [], server: [], "vnicd restart (client)": []}
    t_kill = [None]

    def restart(ns, b):
        t_kill[0] = time.strftime("%H:%M:%S", time.gmtime()) + ".%03d" % (time.time() % 1 * 1000)
        b.restart_vnicd(signal.SIGKILL)
        if b.nic() is None:
            b.add()
        b.wait_running()
        vmlib.wait_for("tap", 20, lambda: ns.has_link(TAP), 0.1)
        ns.addr(TAP, HOST + "/24")

    for mode, key in (("server", server), ("client", "vnicd restart (client)")):
        ns = vmlib.Netns("l")
        # Server mode: QEMU connects, so only its reconnect (every 1 s, the
        # least QEMU 7.2 takes) brings it back to a restarted vnicd.
        g, b = boot("vnicd", a, image, ns, mode, reconnect=1 if mode == "server" else None)
        try:
            for _ in range(a.runs if mode == "server" else 0):
                pid = b.worker_pid()
                out["worker restart"].append(ping_gap(g, lambda: os.kill(pid, signal.SIGKILL)))
                b.wait_running()
            for i in range(a.runs):
                out[key].append(ping_gap(g, lambda: restart(ns, b)))
                log("%s %d (kill at %s): gap %.1f ms, %d pings lost" % (
                    (key, i + 1, t_kill[0]) + out[key][-1]))
        finally:
            g.shutdown()
            b.close()
            ns.close()
    return out


def main():
    p = vmlib.bench_args(__doc__, 5)
    p.add_argument("--configs", default="bh,timer,vnicd,testpmd")
    p.add_argument("--rr", type=int, default=0, help="ping request/response count (0: none)")
    p.add_argument("--lifecycle", action="store_true")
    p.add_argument("--smp", type=int, default=1, help="the guest's vCPUs (default 1)")
    p.add_argument("--streams", type=int, default=1, help="iperf3 -P (default 1)")
    a = p.parse_args()
    vmlib.need_root()
    vmlib.need_qemu()
    image = vmlib.build_guest(os.path.join(os.path.abspath(a.builddir), "tests/guest-image"))
    a.builddir = os.path.abspath(a.builddir)
    cfgs = a.configs.split(",")
    print("bench_qemu: %d runs x %s, iperf3 %.0f s; loadavg at start %s; %d CPUs"
          % (a.runs, ",".join(cfgs), a.seconds, vmlib.loadavg(), os.cpu_count()), flush=True)
    res = {c: [] for c in cfgs}
    rounds = []
    for r in range(a.runs):
        rounds.append({})
        for c in (cfgs if r % 2 == 0 else cfgs[::-1]):
            try:
                x = one_run(c, a, image)
            except (Fail, SystemExit) as e:
                print("run %d %s: FAILED: %s" % (r + 1, c, e), flush=True)
                continue
            res[c].append(x)
            rounds[-1][c] = x
            print("run %d %-12s h2g %.2f g2h %.2f Gbit/s  unplug %.0f ms  load %s"
                  % (r + 1, c, x["h2g"]["gbps"], x["g2h"]["gbps"], x["unplug"]["gone"],
                     vmlib.loadavg()), flush=True)
    print("\nloadavg at end %s\n" % vmlib.loadavg())
    print("| back end | h2g Gbit/s min/med/max | g2h Gbit/s min/med/max | CPU s/GB h2g "
          "vCPU+QEMU+back end | CPU s/GB g2h vCPU+QEMU+back end | unplug ms (DEVICE_DELETED"
          " / eth0 gone) |%s" % (" ping RR p50/p99 us |" if a.rr else ""))
    print("|---|---|---|---|---|---|%s" % ("---|" if a.rr else ""))
    for c in cfgs:
        rs = res[c]
        if not rs:
            print("| %s | failed | | | | |" % c)
            continue
        cpu = {d: "%s+%s+%s" % tuple("%.2f" % statistics.median([x[d][k] for x in rs])
                                     for k in ("vcpu", "qemu", "backend"))
               for d in ("h2g", "g2h")}
        rr = ""
        if a.rr:
            rr = " %s/%s |" % (med([x["rr"]["p50"] for x in rs if "rr" in x]),
                               med([x["rr"]["p99"] for x in rs if "rr" in x]))
        print("| %s | %s | %s | %s | %s | %s / %s |%s" % (
            c, mmm([x["h2g"]["gbps"] for x in rs]), mmm([x["g2h"]["gbps"] for x in rs]),
            cpu["h2g"], cpu["g2h"], med([x["unplug"]["deleted"] for x in rs]),
            med([x["unplug"]["gone"] for x in rs]), rr))
    print("\nWhere the time goes, per GB, median (thousands): guest interrupts on its virtio "
          "device; wake-ups of QEMU's non-vCPU threads and of the back end; vnicd's kicks "
          "received and interrupts sent\n\n| back end | dir | guest irqs | QEMU wake-ups | "
          "back-end wake-ups | kicks | interrupts sent |\n|---|---|---|---|---|---|---|")
    for c in cfgs:
        for d in ("h2g", "g2h"):
            rs = [x[d] for x in res[c]]
            if rs:
                print("| %s | %s | %s |" % (c, d, " | ".join(
                    "%.1f" % (statistics.median(x[k] for x in rs) / 1000)
                    for k in ("irqs", "qemu_wake", "be_wake", "kicks", "be_irqs"))))
    ref = cfgs[0]
    print("\nRatio to %s in the same round (the fairest figure on a loaded machine), "
          "min/median/max:\n\n| back end | h2g | g2h |\n|---|---|---|" % ref)
    for c in cfgs[1:]:
        cells = []
        for d in ("h2g", "g2h"):
            cells.append(mmm([rd[c][d]["gbps"] / rd[ref][d]["gbps"] for rd in rounds
                              if c in rd and ref in rd and rd[ref][d]["gbps"] > 0]))
        print("| %s | %s | %s |" % (c, cells[0], cells[1]))
    if a.lifecycle:
        lc = lifecycle(a, image)
        print("\n| lifecycle (vnicd, guest pings every 10 ms, as issue 16 asks) | gap ms "
              "min/med/max (longest round trip, or lost x 10 ms) | pings lost min/med/max "
              "|\n|---|---|---|")
        for k, v in lc.items():
            print("| %s | %s | %s |" % (k, mmm([x[0] for x in v]),
                                        mmm([x[1] for x in v]).replace(".00", "")))
        print("\nloadavg at end %s" % vmlib.loadavg())


if __name__ == "__main__":
    vmlib.main(main)
