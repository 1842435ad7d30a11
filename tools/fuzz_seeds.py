#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""fuzz_seeds.py BUILD_DIR OUT_DIR [SESSION...]: record the fuzz targets'
seed corpora from real sessions with tools/fuzz_record.py (needs root).

Sessions (default: all six, about 6 minutes under TCG):
  libvnic  vnic-bench traffic (Hello, AddNic with a socket and a tap
           backend, SetPolicy, SetDirtyLog, GetStatus, RemoveNic) and vnicctl
           (status, set-policy, log-level, add/remove --vhost-user) through
           the seqpacket relay in front of vnicd's control socket:
           OUT_DIR/vmm_proto/libvnic-*.  vnicd runs under strace, and what its
           workers sent becomes OUT_DIR/worker_chan/worker-*.
  dpdk     dpdk-testpmd's virtio-user on vnicd's vhost-user endpoint, frames
           both ways: OUT_DIR/vhost_user/dpdk-*.
  qemu     a Linux guest under QEMU/TCG on vnicd's endpoint (vnicd listens):
           boot, ping, the guest's driver reloaded, device_del:
           OUT_DIR/vhost_user/qemu-*.
  qemu-client  the same with QEMU listening and vnicd connecting (the relay
           in --reverse): boot and ping: OUT_DIR/vhost_user/qemu-client-*.
  migrate  the guest live-migrated between two QEMUs on two endpoints of
           one vnicd: OUT_DIR/vhost_user/qemu-mig-{src,dst}-* (the source's
           dirty log: SET_FEATURES with LOG_ALL, SET_LOG_BASE).
  hotplug  a DIMM hot-plugged and unplugged under the running guest:
           OUT_DIR/vhost_user/qemu-hotplug-* (ADD_MEM_REG, REM_MEM_REG).

Everything runs in private temporary directories and a private network
namespace (198.18.0.0/15); run it under `chrt -i 0 nice -n 19`."""
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "guest"))
import backends  # noqa: E402
import migrate_cases  # noqa: E402
import vmlib  # noqa: E402
from vmlib import Fail, log  # noqa: E402

RECORD = os.path.join(HERE, "fuzz_record.py")
GUEST, HOST = "198.18.0.2", "198.18.0.1"


class Relay:
    """tools/fuzz_record.py MODE in the background until close()."""

    def __init__(self, mode, listen, connect, out, prefix, reverse=False):
        self.listen = listen
        argv = [sys.executable, RECORD, mode, "--listen", listen, "--connect", connect,
                "--out", out, "--prefix", prefix] + (["--reverse"] if reverse else [])
        self.proc = subprocess.Popen(argv, start_new_session=True)
        vmlib.on_exit(self.close)
        vmlib.wait_for("the relay's socket " + listen, 10, lambda: os.path.exists(listen))

    def close(self):
        if self.proc:
            time.sleep(0.5)  # the last messages are written
            vmlib.kill_tree(self.proc, 3)
            self.proc = None


class TracedVnicd(vmlib.Vnicd):
    """vnicd under `strace -f` (its workers' sendmsg calls), when strace_out
    is given."""

    def __init__(self, builddir, workdir, strace_out=None):
        super().__init__(builddir, workdir)
        self.strace_out = strace_out

    def start(self, extra=()):
        if not self.strace_out:
            return super().start(extra)
        self.logf = open(self.log_path, "a")
        argv = ["strace", "-f", "-e", "trace=sendmsg,execve", "-xx", "-s", "65536",
                "-o", self.strace_out, os.path.join(self.b, "supervisor/vnicd"), "--socket",
                self.sock, "--foreground", "--worker",
                os.path.join(self.b, "workers/vnicd-worker")] + list(extra)
        self.proc = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        vmlib.on_exit(self.stop)
        vmlib.wait_for("vnicd's socket", 20, lambda: self._alive() and os.path.exists(self.sock))
        return self


def vnicd_backend(builddir, ns, sock, mode, d, nic_id, tap, v=None, **kw):
    """A VnicdBackend whose vnicd is ours (TracedVnicd has the same
    interface), or v, another backend's."""
    return backends.VnicdBackend(builddir, ns, sock, mode, nic_id=nic_id, tap=tap,
                                 vnicd=v or TracedVnicd(builddir, d, **kw).start())


def libvnic(builddir, out, ns):
    d = vmlib.tmpdir()
    trace = os.path.join(d, "vnicd.strace")
    v = TracedVnicd(builddir, d, strace_out=trace).start()
    relay = os.path.join(d, "relay.sock")
    r = Relay("seqpacket", relay, v.sock, os.path.join(out, "vmm_proto"), "libvnic-")
    bench = os.path.join(builddir, "tools/vnic-bench")
    ctl = os.path.join(builddir, "tools/vnicctl")
    runs = [[bench, "--socket", relay, "traffic", "--nics", "1", "--backend", "socket",
             "--direction", "both", "--seconds", "1", "--switch-policy", "300",
             "--dirty-log", "--policy", "timer"],
            [bench, "--socket", relay, "traffic", "--nics", "1", "--backend", "tap",
             "--netns", ns.name, "--direction", "g2h", "--seconds", "1", "--policy", "poll",
             "--dirty-log-after", "0.5"],
            [ctl, "--socket", relay, "status", "--json"],
            [ctl, "--socket", relay, "log-level", "debug"],
            [ctl, "--socket", relay, "add", "vu0", "--vhost-user", os.path.join(d, "vu.sock"),
             "--server", "--tap", "vu0", "--netns", ns.name],
            [ctl, "--socket", relay, "set-policy", "vu0", "--mode", "adaptive"],
            [ctl, "--socket", relay, "remove", "vu0"]]
    for argv in runs:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        log("%s: rc %d %s" % (" ".join(argv[3:6]), p.returncode,
                              (p.stdout + p.stderr).strip().splitlines()[-1:]))
    r.close()
    v.stop()
    worker_seeds(trace, out, "worker-")


def worker_seeds(trace, out, prefix):
    """What vnicd's workers sent, from vnicd's strace log."""
    subprocess.run([sys.executable, RECORD, "strace-worker", trace, "--out",
                    os.path.join(out, "worker_chan"), "--prefix", prefix], check=True)


def dpdk(builddir, out, ns):
    d = vmlib.tmpdir()
    vsock, fsock = os.path.join(d, "vnicd.sock"), os.path.join(d, "front.sock")
    trace = os.path.join(d, "vnicd.strace")
    b = vnicd_backend(builddir, ns, vsock, "server", d, "dp0", "dp0", strace_out=trace)
    b.add()
    r = Relay("vhost-user", fsock, vsock, os.path.join(out, "vhost_user"), "dpdk-")
    fe = vmlib.Testpmd(["net_virtio_user0,path=%s,queues=1,mac=52:54:00:12:34:56" % fsock],
                       seconds=90, workdir=d, name="vurec", lcores="0,1",
                       extra_eal=["--main-lcore", "1"],
                       args=["--eth-peer=0,02:00:00:00:00:01", "--txpkts=64"])
    fe.wait_log(r"testpmd> ", 60, "testpmd's prompt")
    b.wait_running()
    fe.cmd("set fwd txonly")
    fe.cmd("start")
    time.sleep(1)
    fe.cmd("stop")
    fe.kill()
    r.close()
    b.close()
    worker_seeds(trace, out, "worker-dpdk-")


def qemu(builddir, out, ns, image, client=False):
    d = vmlib.tmpdir()
    vsock, fsock = os.path.join(d, "vnicd.sock"), os.path.join(d, "front.sock")
    mode = "client" if client else "server"
    tap = "qc0" if client else "qs0"
    trace = os.path.join(d, "vnicd.strace")
    b = vnicd_backend(builddir, ns, vsock, mode, d, tap, tap, strace_out=trace)
    prefix = "qemu-client-" if client else "qemu-"
    if client:
        # QEMU listens on fsock; vnicd connects to the relay's vsock.
        g = vmlib.Guest(image, ("vhost-user", fsock, True), ip=GUEST + "/24", netns=ns,
                        workdir=d)

        def on_sockets():
            Relay("vhost-user", vsock, fsock, os.path.join(out, "vhost_user"), prefix,
                  reverse=True)
            b.add()
        g.start(on_sockets=on_sockets)
    else:
        b.add()
        Relay("vhost-user", fsock, vsock, os.path.join(out, "vhost_user"), prefix)
        g = vmlib.Guest(image, ("vhost-user", fsock, False), ip=GUEST + "/24", netns=ns,
                        workdir=d)
        g.start(boot_timeout=180)
    b.wait_running(60)
    vmlib.wait_for("tap " + tap, 30, lambda: ns.has_link(tap), 0.2)
    ns.addr(tap, HOST + "/24")
    rc, o = g.run("ping -c 2 -W 5 %s" % HOST, timeout=60, check=False)
    log("qemu %s: guest ping rc %d" % (mode, rc))
    if not client:
        g.run("rmmod virtio_net && insmod /lib/modules/virtio_net.ko", timeout=120)
        b.wait_running(60)
        g.qmp("device_del", id="nic0")
        g.qmp_event("DEVICE_DELETED", 60)
    g.shutdown()
    b.close()
    worker_seeds(trace, out, "worker-" + prefix)


def migrate(builddir, out, ns, image):
    """A live migration between two endpoints of one vnicd: the source
    gets the dirty log (SET_FEATURES with LOG_ALL, SET_LOG_BASE)."""
    d = vmlib.tmpdir()
    trace = os.path.join(d, "vnicd.strace")
    ends = {}
    for end in ("src", "dst"):
        vsock, fsock = os.path.join(d, end + "-vnicd.sock"), os.path.join(d, end + ".sock")
        b = vnicd_backend(builddir, ns, vsock, "server", d, "m" + end, "m" + end,
                          v=ends["src"][0].v if ends else None, strace_out=trace)
        b.add()
        Relay("vhost-user", fsock, vsock, os.path.join(out, "vhost_user"),
              "qemu-mig-%s-" % end)
        g = vmlib.Guest(image, ("vhost-user", fsock, False), ip=GUEST + "/24", netns=ns,
                        workdir=d, name=end, incoming=end == "dst", mac="52:54:00:12:34:56",
                        mem=migrate_cases.MEM)  # QEMU 7.2's TCG dirty-bitmap bug
        ends[end] = (b, g)
        g.start(boot_timeout=180)
        if end == "src":
            b.wait_running(60)
    src, dst = ends["src"][1], ends["dst"][1]
    r = src.migrate_to(dst, "unix:" + os.path.join(d, "mig.sock"), seconds=300,
                       max_bandwidth=4 << 30)
    log("migration: %s, downtime %s ms" % (r["status"], r["downtime"]))
    ends["dst"][0].wait_running(60)
    dst.shutdown()
    src.kill()
    for b, _ in ends.values():
        b.v.ctl("remove", b.id, check=False)
    ends["src"][0].v.stop()
    worker_seeds(trace, out, "worker-qemu-mig-")


class HotplugGuest(vmlib.Guest):
    """A guest with room for a hot-plugged DIMM."""

    def argv(self):
        a = super().argv()
        a[a.index("-m") + 1] = self.mem + ",slots=2,maxmem=2G"
        return a


def hotplug(builddir, out, ns, image):
    """Guest memory plugged and unplugged under a running NIC: QEMU adds
    and removes a region (ADD_MEM_REG, REM_MEM_REG with CONFIGURE_MEM_SLOTS)."""
    d = vmlib.tmpdir()
    vsock, fsock = os.path.join(d, "vnicd.sock"), os.path.join(d, "front.sock")
    trace = os.path.join(d, "vnicd.strace")
    b = vnicd_backend(builddir, ns, vsock, "server", d, "hp0", "hp0", strace_out=trace)
    b.add()
    Relay("vhost-user", fsock, vsock, os.path.join(out, "vhost_user"), "qemu-hotplug-")
    g = HotplugGuest(image, ("vhost-user", fsock, False), ip=GUEST + "/24", netns=ns,
                     workdir=d)
    g.start(boot_timeout=180)
    b.wait_running(60)
    g.qmp("object-add", **{"qom-type": "memory-backend-memfd", "id": "hpmem", "size": 128 << 20,
                           "share": True})
    g.qmp("device_add", driver="pc-dimm", id="dimm0", memdev="hpmem")
    time.sleep(2)
    b.wait_running(60)
    # The guest leaves hot-added memory offline (no udev rule onlines it),
    # so it ejects the DIMM when asked.
    g.qmp("device_del", id="dimm0")
    try:
        g.qmp_event("DEVICE_DELETED", 60)
        g.qmp("object-del", id="hpmem")
    except Fail as e:
        log("hotplug: the DIMM did not go: %s" % e)
    time.sleep(1)
    b.wait_running(60)
    g.shutdown()
    b.close()
    worker_seeds(trace, out, "worker-qemu-hotplug-")


def main():
    vmlib.need_root()
    if len(sys.argv) < 3:
        raise Fail("usage: fuzz_seeds.py BUILD_DIR OUT_DIR "
                   "[libvnic|dpdk|qemu|qemu-client|migrate|hotplug...]")
    builddir, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    which = sys.argv[3:] or ["libvnic", "dpdk", "qemu", "qemu-client", "migrate", "hotplug"]
    ns = vmlib.Netns("fr")
    image = os.environ.get("VNIC_GUEST_IMAGE") or os.path.join(builddir, "tests/guest-image")
    if set(which) & {"qemu", "qemu-client", "migrate", "hotplug"}:
        vmlib.need_qemu()
        image = vmlib.build_guest(image)
    for w in which:
        log("recording %s" % w)
        if w == "libvnic":
            libvnic(builddir, out, ns)
        elif w == "dpdk":
            vmlib.need_testpmd()
            dpdk(builddir, out, ns)
        elif w == "hotplug":
            hotplug(builddir, out, ns, image)
        elif w == "migrate":
            migrate(builddir, out, ns, image)
        elif w in ("qemu", "qemu-client"):
            qemu(builddir, out, ns, image, client=w == "qemu-client")
        else:
            raise Fail("unknown session %s" % w)


if __name__ == "__main__":
    vmlib.main(main)
