# SPDX-License-Identifier: BSD-3-Clause
"""The multiqueue cases of issue 15 on a real Linux guest: -smp 2, a NIC of
two queue pairs (-netdev vhost-user,queues=2, -device virtio-net-pci,mq=on),
vnicd in server mode, a worker per pair.

boot: the guest has two RX and two TX queues, vnicd a worker for each pair
(status: two "pairs" rows, two pids); both pairs move: iperf3 with 16
streams each way moves rx0 and rx1 (the tap hashes host flows over its
queues) and tx0 and tx1 (the guest's XPS is cleared, so its flows are hashed
over the TX queues too; 16 flows all on one queue: a 1 in 32768 chance,
not a hope); ethtool -L combined 1 under traffic stops pair 1's worker and
the traffic goes on, combined 2 brings it back; SIGKILL of pair 1's worker
under iperf3: pair 0's worker never stops, the TCP streams survive, pair 1
restarts; device_del: both workers reaped by DEVICE_DELETED."""
import os
import signal
import time

import backends
import vmlib
from vmlib import Fail, log

GUEST, HOST = "198.18.0.2", "198.18.0.1"
STREAMS = 16


def packets(nic):
    return {q["name"]: q["packets"] for q in nic["queues"]}


def pairs(nic):
    return {p["pair"]: p for p in (nic or {}).get("pairs", [])}


class Group:
    def __init__(self):
        vmlib.need_root()
        vmlib.need_qemu()
        b = os.environ.get("VNIC_TOP_BUILDDIR")
        if not b:
            raise Fail("VNIC_TOP_BUILDDIR is not set: run through make check")
        self.image = vmlib.build_guest(os.path.join(b, "tests/guest-image"))
        self.dir = vmlib.tmpdir()
        self.ns = vmlib.Netns("vm")
        self.sock = os.path.join(self.dir, "vhost.sock")
        self.b = backends.VnicdBackend(b, self.ns, self.sock, "server", workdir=self.dir)
        self.passed = []

    def case(self, name, fn, *a):
        t = time.monotonic()
        fn(*a)
        self.passed.append(name)
        log("ok %s (%.1f s)" % (name, time.monotonic() - t))

    def pair_pids(self):
        return {k: p["pid"] for k, p in pairs(self.b.nic()).items() if p["pid"]}

    def wait_pairs(self, want):
        return vmlib.wait_for("workers of pairs %s" % sorted(want), 30,
                              lambda: set(self.pair_pids()) == set(want) and self.pair_pids(),
                              0.2)

    # cases
    def boot(self):
        self.b.before_qemu()
        self.g = vmlib.Guest(self.image, ("vhost-user", self.sock, False), ip=GUEST + "/24",
                             netns=self.ns, workdir=self.dir, smp=2, queues=2)
        self.g.start(on_sockets=self.b.after_qemu)
        self.b.wait_running()
        vmlib.wait_for("tap %s" % self.b.tap, 20, lambda: self.ns.has_link(self.b.tap), 0.1)
        self.ns.addr(self.b.tap, HOST + "/24", None)
        vmlib.wait_for("the guest's carrier", 20,
                       lambda: self.g.run("cat /sys/class/net/eth0/carrier", check=False)[1]
                       .strip() == "1", 0.2)
        q = self.g.run("ls /sys/class/net/eth0/queues")[1].split()
        if sorted(q) != ["rx-0", "rx-1", "tx-0", "tx-1"]:
            raise Fail("the guest's queues: %s (two pairs expected)" % q)
        pids = self.wait_pairs({0, 1})
        if len(set(pids.values())) != 2:
            raise Fail("one worker per pair expected: %s" % pids)
        # Flows hashed over the TX queues, not bound to the sender's CPU
        # (iperf3 sends every stream from one thread).
        self.g.run("for f in /sys/class/net/eth0/queues/tx-*/xps_cpus; do echo 0 > $f; done")
        log("two pairs, workers %s" % pids)

    def both_pairs_move(self):
        self.g.iperf3_server()
        for rev in (False, True):
            before = packets(self.b.nic())
            gbps, nbytes, _ = vmlib.iperf3(self.ns, GUEST, 4, reverse=rev,
                                           extra="-P %d" % STREAMS)
            after = packets(self.b.nic())
            d, names = ("g2h", ("tx0", "tx1")) if rev else ("h2g", ("rx0", "rx1"))
            moved = {n: after.get(n, 0) - before.get(n, 0) for n in names}
            log("iperf3 %s, %d streams: %.2f Gbit/s; packets %s" % (d, STREAMS, gbps, moved))
            if min(moved.values()) <= 0:
                raise Fail("%s with %d streams did not move both pairs: %s"
                           % (d, STREAMS, moved))

    def channels_under_traffic(self):
        self.g.iperf3_server()
        p = vmlib.iperf3_bg(self.ns, GUEST, 10, reverse=True, extra="-P 4")
        time.sleep(2)
        self.g.run("ethtool -L eth0 combined 1")
        self.wait_pairs({0})
        time.sleep(2)
        self.g.run("ethtool -L eth0 combined 2")
        self.wait_pairs({0, 1})
        gbps, nbytes, j = vmlib.iperf3_result(p, 10)
        tail = [iv["sum"]["bits_per_second"] / 1e9 for iv in j["intervals"]][-3:]
        log("iperf3 across combined 2 -> 1 -> 2: %.2f Gbit/s, last seconds %s" % (gbps, tail))
        if not tail or min(tail) <= 0:
            raise Fail("traffic stopped across the channel changes: %s" % tail)

    def kill_one_pair(self):
        pids = self.wait_pairs({0, 1})
        self.g.iperf3_server()
        p = vmlib.iperf3_bg(self.ns, GUEST, 8, reverse=True, extra="-P 4")
        time.sleep(3)
        os.kill(pids[1], signal.SIGKILL)
        gbps, nbytes, j = vmlib.iperf3_result(p, 8)
        tail = [iv["sum"]["bits_per_second"] / 1e9 for iv in j["intervals"]][-2:]
        now = self.wait_pairs({0, 1})
        log("iperf3 across pair 1's worker kill: %.2f Gbit/s, last seconds %s; workers %s -> %s"
            % (gbps, tail, pids, now))
        if now[0] != pids[0]:
            raise Fail("pair 0's worker changed (%d -> %d): it must never stop"
                       % (pids[0], now[0]))
        if now[1] == pids[1]:
            raise Fail("pair 1's worker %d was not restarted" % pids[1])
        if not tail or min(tail) <= 0:
            raise Fail("the TCP streams did not survive: %s" % tail)

    def device_del(self):
        pids = self.wait_pairs({0, 1})
        self.g.qmp("device_del", id="nic0")
        self.g.qmp_event("DEVICE_DELETED", 60)
        alive = [pid for pid in pids.values() if os.path.exists("/proc/%d" % pid)]
        if alive:
            raise Fail("workers %s not reaped by DEVICE_DELETED" % alive)
        self.g.run("true")

    def close(self):
        self.g.shutdown()
        self.b.close()


def run():
    vmlib.main(run_group)


def run_group():
    grp = Group()
    grp.case("boot_two_pairs", grp.boot)
    grp.case("both_pairs_move", grp.both_pairs_move)
    if grp.g.run("command -v ethtool", check=False)[0] == 0:
        grp.case("channels_2_1_2_under_traffic", grp.channels_under_traffic)
    else:
        log("channels: no ethtool in the guest image (apt-get install ethtool): not run")
    grp.case("kill_one_pair_under_iperf3", grp.kill_one_pair)
    grp.case("device_del_two_pairs", grp.device_del)
    grp.close()
    log("PASS (multiqueue): %s" % " ".join(grp.passed))
