# SPDX-License-Identifier: BSD-3-Clause
"""vmlib: real clients for vnicd's tests and benchmarks (python3 stdlib only).

- Guest: a Linux guest (tests/guest/mkguest.sh) under QEMU/TCG, with QMP, a
  console log, a pidfile and a command loop on its second serial port; its
  NIC is QEMU's own virtio-net on a tap (tx=bh or tx=timer) or vhost-user.
  Guest(..., incoming=True) is a live migration's destination and
  migrate_to() moves a guest there (migrate_cases.py uses them).
- Netns: a private network namespace (198.18.0.0/15 only), removed on close;
  a bridge in it.
- GuestPing: the guest's pings every 10 ms, each reply time-stamped in the
  guest; AnnounceWatch: RARP and gratuitous ARP of a MAC on a tap.
- Testpmd: DPDK testpmd as a vhost-user back end (net_vhost <-> net_tap) or
  as a front end (net_virtio_user), driven through its interactive prompt.
- Vnicd: vnicd from a build tree on a private socket, and vnicctl.

Every wait has a deadline and every process started here is killed on
close() (also from an atexit hook), so a failing test leaves nothing behind.
"""
import atexit
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
QEMU = shutil.which("qemu-system-x86_64")
DPDK_PMDS = "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0"
_cleanups = []


def log(msg):
    print("%s: %s" % (os.path.basename(sys.argv[0]), msg), file=sys.stderr, flush=True)


def skip(msg):
    log("SKIP: " + msg)
    sys.exit(SKIP)


class Fail(Exception):
    pass


def wait_for(what, seconds, pred, step=0.05):
    end = time.monotonic() + seconds
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise Fail("timed out after %.1f s waiting for %s" % (seconds, what))
        time.sleep(step)


def _atexit():
    for fn in reversed(_cleanups[:]):
        try:
            fn()
        except Exception as e:  # cleanup must go on
            log("cleanup: %s" % e)


atexit.register(_atexit)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
signal.signal(signal.SIGHUP, lambda *a: sys.exit(1))


def on_exit(fn):
    _cleanups.append(fn)
    return fn


# Files whose last lines explain a failure (a guest's console, a vnicd's
# log): main() prints them when the run fails, since a CI log keeps the
# test's output and nothing of its temporary directory.
_evidence = {}


def evidence(label, path):
    _evidence[path] = label


# Functions that describe live state when a run fails (a guest's rings, a
# vnicd's status): main() calls them before the cleanups kill the processes.
_diagnostics = []


def diagnose(label, fn):
    _diagnostics.append((label, fn))


def _run_diagnostics():
    for label, fn in _diagnostics:
        try:
            text = fn()
        except Exception as e:  # a dead guest or vnicd says why, the rest still run
            text = "(unavailable: %s)" % e
        log("---- %s" % label)
        for line in str(text).splitlines():
            log("  | " + line)


def _show_evidence(lines=25):
    for path, label in _evidence.items():
        try:
            with open(path, errors="replace") as f:
                tail = f.read().splitlines()[-lines:]
        except OSError:
            continue
        log("---- last %d lines of %s (%s)" % (len(tail), label, path))
        for line in tail:
            log("  | " + line)


def kill_tree(proc, grace=5.0):
    """SIGTERM the process group of proc, then SIGKILL after grace s."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(5)


def need_root():
    if os.getuid() != 0:
        skip("needs root (network namespaces, taps)")
    if not os.path.exists("/dev/net/tun"):
        skip("needs /dev/net/tun")
    if not shutil.which("ip"):
        skip("needs ip (iproute2)")


def need_qemu():
    if not QEMU:
        skip("needs qemu-system-x86_64 (apt-get install qemu-system-x86)")
    if not shutil.which("iperf3"):
        skip("needs iperf3 (apt-get install iperf3)")


def need_testpmd():
    if not shutil.which("dpdk-testpmd") or not os.path.isdir(DPDK_PMDS):
        skip("needs DPDK testpmd and its PMDs in %s (apt-get install dpdk-dev)" % DPDK_PMDS)


def tmpdir(prefix="vnic-qemu."):
    d = tempfile.mkdtemp(prefix=prefix)
    if os.environ.get("VNIC_KEEP_TMP"):  # debugging: keep the logs, say where
        log("VNIC_KEEP_TMP: keeping %s" % d)
    else:
        on_exit(lambda: shutil.rmtree(d, ignore_errors=True))
    return d


def build_guest(outdir):
    """Build (or reuse) the guest image in outdir; skip when inputs are missing.
    One build at a time: make check -j2 runs two guest tests at once, and
    two builds in one directory replace each other's files (a CI run failed
    on vmlinux.tmp taken away under the other build)."""
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = subprocess.run([os.path.join(HERE, "mkguest.sh"), outdir], timeout=300)
    if r.returncode == SKIP:
        sys.exit(SKIP)
    if r.returncode != 0:
        raise Fail("mkguest.sh failed")
    return outdir


def proc_cpu(pid):
    """utime+stime of pid and its reaped children, in seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    hz = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / hz


def tree_pids(pid):
    """pid and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(x) for x in f.read().split()]
        except FileNotFoundError:
            pass
    return out


def tree_cpu(pid):
    return sum(proc_cpu(p) for p in tree_pids(pid))


def _hold_on_fail():
    """VNIC_HOLD_ON_FAIL=SECONDS: keep a failed run's processes (QEMU, vnicd,
    the namespace) alive that long before cleaning up, to look at them."""
    hold = float(os.environ.get("VNIC_HOLD_ON_FAIL", "0") or 0)
    if hold > 0:
        log("holding the failed run for %.0f s (VNIC_HOLD_ON_FAIL), pid %d" % (hold, os.getpid()))
        time.sleep(hold)


def main(fn):
    """Run a test's or benchmark's fn; a Fail ends it with exit status 1."""
    try:
        fn()
    except Fail as e:
        _run_diagnostics()
        _show_evidence()
        log("FAIL: %s" % e)
        _hold_on_fail()
        sys.exit(1)
    except Exception:
        _run_diagnostics()
        _show_evidence()
        raise


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def bench_args(doc, seconds):
    """The arguments both benchmarks take: BUILDDIR --runs --seconds."""
    import argparse
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("builddir", help="a build tree (vnicd, vnicctl; the guest image goes here)")
    p.add_argument("--runs", type=int, default=3, help="alternating rounds (default 3)")
    p.add_argument("--seconds", type=float, default=seconds, help="per measurement")
    return p


class Netns:
    """A private network namespace for one test run."""

    def __init__(self, tag="q"):
        self.name = "vnic%s%d" % (tag, os.getpid())
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        on_exit(self.close)
        self.run("ip link set lo up")

    def cmd(self, argv):
        return ["ip", "netns", "exec", self.name] + argv

    def run(self, shcmd, timeout=30, check=True):
        r = subprocess.run(self.cmd(["sh", "-c", shcmd]), capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise Fail("in %s: %s: rc %d: %s" % (self.name, shcmd, r.returncode,
                                                 r.stderr.strip()))
        return r

    def popen(self, argv, **kw):
        return subprocess.Popen(self.cmd(argv), start_new_session=True, **kw)

    def addr(self, dev, addr, mtu=None):
        m = " mtu %d" % mtu if mtu else ""
        self.run("ip addr replace %s dev %s && ip link set %s%s up" % (addr, dev, dev, m))

    def ping(self, addr, count=3, extra=""):
        """busybox ping (the host may have no iputils) from the netns."""
        return self.run("busybox ping -c %d -W 5 %s %s" % (count, extra, addr),
                        timeout=count + 30, check=False)

    def bridge(self, name, addr, mac):
        """A bridge with the host's address: STP off, so a port forwards as
        soon as it joins; a fixed MAC, so the host's address does not move
        when a port joins or leaves."""
        self.run("ip link add %s address %s type bridge stp_state 0 forward_delay 0 && "
                 "ip addr add %s dev %s && ip link set %s up" % (name, mac, addr, name, name))

    def enslave(self, dev, bridge):
        self.run("ip link set %s master %s && ip link set %s up" % (dev, bridge, dev))

    def fdb_port(self, bridge, mac):
        """The bridge port the bridge has learnt mac on, or None."""
        r = self.run("bridge fdb show br %s" % bridge, check=False)
        for line in r.stdout.splitlines():
            f = line.split()
            if f and f[0].lower() == mac.lower() and "dev" in f:
                return f[f.index("dev") + 1]
        return None

    def has_link(self, dev):
        return self.run("ip link show %s" % dev, check=False).returncode == 0

    def dev_counters(self, dev):
        """(rx_bytes, rx_packets, tx_bytes, tx_packets) of dev in the netns."""
        out = self.run("cat /sys/class/net/%s/statistics/rx_bytes "
                       "/sys/class/net/%s/statistics/rx_packets "
                       "/sys/class/net/%s/statistics/tx_bytes "
                       "/sys/class/net/%s/statistics/tx_packets" % ((dev,) * 4)).stdout
        return tuple(int(x) for x in out.split())

    def dev_stat(self, dev, name):
        """One counter of dev's statistics (e.g. tx_dropped), None when dev
        is gone."""
        r = self.run("cat /sys/class/net/%s/statistics/%s" % (dev, name), check=False)
        return int(r.stdout) if r.returncode == 0 else None

    def close(self):
        if self.name:
            r = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True,
                               text=True)
            for p in r.stdout.split():
                try:
                    os.kill(int(p), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
            self.name = None


class Guest:
    """A Linux guest under QEMU/TCG.

    nic is one of
      ("tap", IFNAME, TX)           QEMU's virtio-net on tap IFNAME created by
                                    QEMU (run in netns); TX "bh" or "timer"
      ("vhost-user", PATH, SERVER)  -netdev vhost-user on PATH; SERVER True
                                    means QEMU listens (server=on,wait=off)
    """

    def __init__(self, image, nic, ip="198.18.0.2/24", mtu=None, netns=None, mem="512M",
                 workdir=None, name="vm", tso=True, incoming=False, mac=None, announce=None,
                 memfd=None, console=None, smp=1, queues=1, hold=False, prealloc=False,
                 reconnect=None):
        self.image, self.nic, self.ip, self.mtu = image, nic, ip, mtu
        # hold: a destination that stays paused after the migration (-S),
        # so migrate_to can compare its RAM with the source's (ramcheck).
        self.hold = hold
        # prealloc: the memfd's pages allocated when QEMU starts
        # (prealloc=on). A migration needs it on some hosts: see
        # migrate_cases.py.
        self.prealloc = prealloc
        # reconnect: vhost-user with QEMU connecting (vnicd in server
        # mode): QEMU retries a lost connection every reconnect s.
        self.reconnect = reconnect
        # smp: vCPUs; queues: the NIC's queue pairs (vhost-user only:
        # queues=N on the netdev, mq=on on the device; issue 15).
        self.smp, self.queues = smp, queues
        self.netns, self.mem, self.tso = netns, mem, tso
        # incoming: a migration's destination (-incoming defer), the same
        # guest-visible command line as its source.  mac: the NIC's MAC
        # (both ends of a migration must agree).  announce: virtio-net's
        # guest_announce on (True) or off (False), QEMU's default (None).
        # memfd: the guest's memory in a shared memfd (always so on
        # vhost-user; on a tap only when asked, to compare like with like).
        self.incoming, self.mac, self.announce = incoming, mac, announce
        self.memfd = memfd if memfd is not None else nic[0] == "vhost-user"
        self.dir = workdir or tmpdir()
        self.name = name
        self.console = console or os.path.join(self.dir, name + ".console")
        self.qmp_path = os.path.join(self.dir, name + ".qmp")
        self.cmd_path = os.path.join(self.dir, name + ".cmd")
        self.pidfile = os.path.join(self.dir, name + ".pid")
        self.proc = None
        self.sock = None
        self.buf = b""
        self.seq = 0
        self.qmp_sock = None
        self.qmp_buf = b""
        self.stderr_path = os.path.join(self.dir, name + ".stderr")

    def argv(self):
        a = [QEMU, "-name", self.name + ",debug-threads=on", "-accel", "tcg", "-cpu", "qemu64",
             # maxcpus >= 2: QEMU 7.2's TCG drops the guest's memory
             # barriers when the machine can have only one vCPU (fixed in
             # QEMU 8.1, "tcg: Do not elide memory barriers for
             # !CF_PARALLEL in system mode"). The driver then reads
             # avail_event before its avail->idx store is visible to the
             # back end, and a kick or interrupt is lost for good: the NIC
             # stops (doc/real-clients.md). A second possible vCPU makes TCG
             # translate every barrier and locked instruction.
             "-m", self.mem, "-smp", "%d,maxcpus=%d" % (self.smp, max(self.smp, 2)),
             "-nodefaults", "-display", "none",
             "-no-reboot",
             "-kernel", os.path.join(self.image, "vmlinux"),
             "-initrd", os.path.join(self.image, "initramfs.cpio.gz"),
             "-append", self.append(),
             # append: a migration's two QEMUs write one console file.
             "-chardev", "file,id=con,path=%s,append=on" % self.console,
             "-serial", "chardev:con",
             "-chardev", "socket,id=cmd,path=%s,server=on,wait=off" % self.cmd_path,
             "-serial", "chardev:cmd",
             "-qmp", "unix:%s,server=on,wait=off" % self.qmp_path,
             "-pidfile", self.pidfile]
        kind = self.nic[0]
        opts = ""
        if not self.tso:
            opts = ",host_tso4=off,host_tso6=off,host_ufo=off,guest_tso4=off,guest_tso6=off,guest_ufo=off"
        if self.mac:
            opts += ",mac=" + self.mac
        if self.announce is not None:
            opts += ",guest_announce=" + ("on" if self.announce else "off")
        if self.memfd:
            # The exact form: memfd guest memory, shared.
            a += ["-object", "memory-backend-memfd,id=mem,size=%s,share=on%s"
                  % (self.mem, ",prealloc=on" if self.prealloc else ""),
                  "-numa", "node,memdev=mem"]
        if self.incoming:
            a += ["-incoming", "defer"]
            if self.hold:
                a += ["-S"]
        # Diagnosis (doc/benchmarks.md, the migration timeline):
        # VNIC_QEMU_TRACE="vhost_user_*,migrat*" and VNIC_QEMU_TRACE_DIR=DIR
        # write QEMU's trace events, stamped with the wall clock as vnicd's
        # log is, to DIR/<name>.trace (kept: DIR is the caller's).
        trace = os.environ.get("VNIC_QEMU_TRACE")
        if trace and os.environ.get("VNIC_QEMU_TRACE_DIR"):
            for t in trace.split(","):
                a += ["-trace", "enable=" + t]
            a += ["-msg", "timestamp=on",
                  "-D", os.path.join(os.environ["VNIC_QEMU_TRACE_DIR"], self.name + ".trace")]
        if kind == "tap":
            _, ifname, tx = self.nic
            txo = {"bh": "tx=bh", "timer": "tx=timer,x-txtimer=150000,x-txburst=256"}[tx]
            a += ["-netdev", "tap,id=n0,ifname=%s,script=no,downscript=no,vhost=off" % ifname,
                  "-device", "virtio-net-pci,id=nic0,netdev=n0,vectors=0,romfile=,%s%s"
                  % (txo, opts)]
        elif kind == "vhost-user":
            _, path, server = self.nic
            mq_net = ",queues=%d" % self.queues if self.queues > 1 else ""
            mq_dev = ",mq=on" if self.queues > 1 else ""
            a += ["-chardev", "socket,id=c,path=%s%s" % (
                      path, ",server=on,wait=off" if server else
                      ",reconnect=%d" % self.reconnect if self.reconnect else ""),
                  "-netdev", "vhost-user,id=n0,chardev=c%s" % mq_net,
                  "-device", "virtio-net-pci,id=nic0,netdev=n0,vectors=0,romfile=%s%s"
                  % (mq_dev, opts)]
        else:
            raise ValueError(kind)
        return a

    def append(self):
        s = "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init VNIC_IP=%s" % self.ip
        if self.mtu:
            s += " VNIC_MTU=%d" % self.mtu
        return s

    def start(self, boot_timeout=90, on_sockets=None):
        """Start QEMU and wait for the guest's command loop.  on_sockets runs
        once QEMU's sockets exist: with a vhost-user chardev in server mode,
        QEMU waits for the back end's connection before the guest boots."""
        argv = self.argv()
        if self.nic[0] == "tap" and self.netns:
            argv = self.netns.cmd(argv)
        self.t_start = time.monotonic()
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err,
                                         stderr=err, start_new_session=True)
        on_exit(self.kill)
        evidence("the guest's console", self.console)
        evidence("QEMU's stderr (%s)" % self.name, self.stderr_path)
        if self.nic[0] == "vhost-user":
            diagnose("the rings of %s in guest memory (QEMU's view)" % self.name, self.ring_report)
        diagnose("the NIC as the guest %s sees it" % self.name, lambda: self.run(
            "grep -E 'virtio|CPU' /proc/interrupts; cd /sys/class/net/eth0/statistics && "
            "for f in rx_packets rx_dropped tx_packets tx_dropped; do echo $f $(cat $f); done; "
            "dmesg | tail -n 8", timeout=10, check=False)[1])
        wait_for("QEMU's sockets", 20, lambda: self._alive() and
                 os.path.exists(self.cmd_path) and os.path.exists(self.qmp_path))
        if on_sockets:
            on_sockets()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.cmd_path)
        self.sock.settimeout(0.2)
        if self.incoming:
            # A destination: the guest arrives running, its command loop
            # waiting; connected before the switch-over, so no answer the
            # guest writes right after it is dropped.
            return self
        self._read_until(b"@@READY\n", boot_timeout, "the guest's command loop")
        self.t_ready = time.monotonic()
        return self

    def prime_dirty_log(self, seconds=30, poll=0.02):
        """Start a migration to nowhere and cancel it once its setup is
        done: QEMU's first dirty bitmap sync, which finds every page of
        the guest's RAM dirty, then happens here instead of in the next
        real migration. With a RAM size that keeps QEMU 7.2 off its
        buggy fast path (migrate_cases.MEM), that sync resets TCG's TLB
        once per dirty page and stalls the guest for 250-500 ms; a
        migration started after this one finds only the pages written
        since. It runs at 4 KiB/s, so it cannot complete; the source's
        max-bandwidth is then what it was. Returns the time it took (ms)."""
        bw = self.qmp("query-migrate-parameters")["max-bandwidth"]
        self.qmp("migrate-set-parameters", **{"max-bandwidth": 4096})
        t0 = time.monotonic()
        try:
            self.qmp("migrate", uri="exec:cat >/dev/null")
            wait_for("the priming migration's setup", seconds,
                     lambda: self.qmp("query-migrate").get("status") != "setup", poll)
        finally:
            self.qmp("migrate_cancel")
            wait_for("the priming migration to end", seconds,
                     lambda: self.qmp("query-migrate").get("status") in
                     ("cancelled", "failed", "completed", None), poll)
            self.qmp("migrate-set-parameters", **{"max-bandwidth": bw})
        st = self.qmp("query-migrate").get("status")
        if st != "cancelled":
            raise Fail("the priming migration ended %s, not cancelled" % st)
        return (time.monotonic() - t0) * 1000

    def migrate_to(self, dst, uri, seconds=120, poll=0.02, **params):
        """Live-migrate this guest to dst (started with incoming=True) over
        uri ("unix:PATH"), with QMP migrate-set-parameters params on the
        source (e.g. max_bandwidth, downtime_limit: "_" for "-"); returns
        QEMU's figures of the source's query-migrate (ms: downtime,
        total-time, setup-time; status; ram: its RAM statistics) and
        t_done, the monotonic time the source first reported completion.
        dst then carries on the command loop where this one stopped."""
        if params:
            self.qmp("migrate-set-parameters",
                     **{k.replace("_", "-"): v for k, v in params.items()})
        dst.qmp("migrate-incoming", uri=uri)
        self.t_migrate = time.monotonic()
        self.qmp("migrate", uri=uri)
        last = {}

        def done():
            nonlocal last
            last = self.qmp("query-migrate")
            if last.get("status") in ("failed", "cancelled"):
                raise Fail("migration %s: %s; destination stderr: %s" % (
                    last["status"], last.get("error-desc", "?"), dst.stderr()))
            return last.get("status") == "completed"
        try:
            wait_for("the migration to complete", seconds, done, poll)
        except Fail:
            if last.get("status") not in ("failed", "cancelled", "completed"):
                try:
                    self.qmp("migrate_cancel")
                except (Fail, OSError):
                    pass
            raise
        t_done = time.monotonic()
        # QEMU 7.2 sets "completed" before it computes the migration's
        # times (migration_calculate_complete, in the migration thread;
        # upstream swapped the two in 2023), so a query in between reads
        # total-time and downtime 0: read the figures again until they
        # are there.
        for n in range(100):
            if last.get("total-time"):
                if n:
                    log("query-migrate: the figures came %d reads after \"completed\"" % n)
                break
            time.sleep(0.01)
            last = self.qmp("query-migrate")
        diff = None
        if dst.hold:
            wait_for("the destination to have the guest", 30,
                     lambda: dst.qmp("query-status")["status"] == "paused", poll)
            try:
                diff = self.ramcheck(dst)
            except (Fail, OSError) as e:  # no verdict, but the guest must run on
                log("RAM check not done: %s" % e)
            finally:
                dst.qmp("cont")
        wait_for("the destination to run", 30,
                 lambda: dst.qmp("query-status")["status"] == "running", poll)
        dst.seq, dst.buf = self.seq, dst.buf
        dst.t_start, dst.t_ready = self.t_start, t_done
        out = {k: last.get(k) for k in ("status", "downtime", "total-time", "setup-time",
                                        "ram")}
        out["t_done"] = t_done
        out["wall_ms"] = (t_done - self.t_migrate) * 1000
        out["ram_diff"] = diff
        return out

    def ramcheck(self, dst):
        """The pages of guest RAM that differ between this source (stopped
        by its completed migration) and dst (held paused, nothing run on it
        yet): [(guest page number, bytes that differ, page_diff_text: what
        differs, and in which virtqueue area)]. Both hold the
        guest's memory as of the switch-over, so a page that differs is a
        write the migration lost: one the source's dirty tracking (QEMU's
        for the vCPU and its own devices, the back end's log for a
        vhost-user device) never reported. Guest RAM from address 0, which
        is all of it below 3 GiB."""
        size = mem_bytes(self.mem)
        if size > 3 << 30:
            raise ValueError("ramcheck: RAM above 3 GiB is not contiguous")
        paths = [os.path.join(self.dir, "%s.ram" % g.name) for g in (self, dst)]
        try:
            for g, path in zip((self, dst), paths):
                g.qmp("pmemsave", timeout=120, val=0, size=size, filename=path)
            rings = self.ring_areas()
            if not rings:
                log("RAM check: QEMU's monitor named no virtqueue areas (lost writes "
                    "will not be placed in the rings)")
            diff = []
            with open(paths[0], "rb") as a, open(paths[1], "rb") as b:
                for page in range(size // 4096):
                    x, y = a.read(4096), b.read(4096)
                    if x != y:
                        diff.append((page, sum(1 for i in range(4096) if x[i] != y[i]),
                                     page_diff_text(page, x, y, rings)))
            return diff
        finally:
            for path in paths:
                if os.path.exists(path):
                    os.unlink(path)

    def _alive(self):
        if self.proc.poll() is not None:
            raise Fail("QEMU exited with %s: %s" % (self.proc.returncode, self.stderr()))
        return True

    def stderr(self):
        try:
            with open(self.stderr_path) as f:
                return f.read().strip()[-2000:]
        except FileNotFoundError:
            return ""

    def console_text(self):
        try:
            with open(self.console, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def _read_until(self, marker, seconds, what):
        end = time.monotonic() + seconds
        while marker not in self.buf:
            if time.monotonic() > end:
                raise Fail("timed out after %.0f s waiting for %s; console tail:\n%s"
                           % (seconds, what, self.console_text()[-1500:]))
            self._alive()
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not d:
                raise Fail("guest command socket closed")
            self.buf += d
        i = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:i - len(marker)], self.buf[i:]
        return out

    def run(self, cmd, timeout=60, check=True):
        """Run cmd in the guest shell; returns (rc, output)."""
        self.seq += 1
        sid = "c%d" % self.seq
        self.sock.sendall(("%s %s\n" % (sid, cmd)).encode())
        out = self._read_until(("@@END %s " % sid).encode(), timeout, "guest command %r" % cmd)
        rest = self._read_until(b"\n", 5, "guest rc")
        rc = int(rest.strip())
        # Drop answers of earlier (timed-out) commands.
        text = out.decode(errors="replace")
        text = re.sub(r"(?s).*@@END c\d+ \d+\n", "", text)
        if check and rc != 0:
            raise Fail("guest: %s: rc %d: %s" % (cmd, rc, text.strip()[-1500:]))
        return rc, text

    def queue_addrs(self, i, path="/machine/peripheral/nic0/virtio-backend"):
        """(num, desc, avail, used): virtqueue i's size and the guest
        addresses of its descriptor table and rings, from QEMU's monitor
        (vhost-user's queue status, else QEMU's own device's); None when
        neither answers or the guest has not set the queue up."""
        try:
            v = self.qmp("x-query-virtio-vhost-queue-status", timeout=5, path=path, queue=i)
            r = v["num"], v["desc-phys"], v["avail-phys"], v["used-phys"]
        except (Fail, OSError, KeyError):
            try:
                v = self.qmp("x-query-virtio-queue-status", timeout=5, path=path, queue=i)
                r = v["vring-num"], v["vring-desc"], v["vring-avail"], v["vring-used"]
            except (Fail, OSError, KeyError):
                return None
        return r if r[1] else None

    def ring_areas(self):
        """[(name, first byte, end)] of each virtqueue's descriptor table,
        avail ring and used ring in guest memory (queue_addrs); [] when
        QEMU's monitor names none."""
        out = []
        for i in range(2 * self.queues):
            q = "%s%d" % ("rx" if i % 2 == 0 else "tx", i // 2)
            qa = self.queue_addrs(i)
            if qa:
                n, d, a, u = qa
                out += [("%s desc" % q, d, d + 16 * n), ("%s avail" % q, a, a + 6 + 2 * n),
                        ("%s used" % q, u, u + 6 + 8 * n)]
        return out

    def ring_report(self):
        """Each virtqueue's indices and notification state as guest memory
        holds them now, read through QEMU's monitor: what a stuck NIC's
        driver and device last told each other."""
        def rd16(addr):
            out = self.qmp("human-monitor-command", timeout=5,
                           **{"command-line": "xp /1hx %d" % addr})
            return int(out.split(":")[1].split()[0], 16)
        lines = []
        status = self.qmp("query-status", timeout=5)["status"]
        lines.append("QEMU %s" % status)
        for i in range(2 * self.queues):
            qa = self.queue_addrs(i)
            if not qa:
                lines.append("queue %d: not set up, or not known to QEMU's monitor" % i)
                continue
            n, _, a, u = qa
            lines.append("queue %d (%s, num %d): avail idx %d flags %#x used_event %d | "
                         "used idx %d flags %#x avail_event %d"
                         % (i, "rx" if i % 2 == 0 else "tx", n, rd16(a + 2), rd16(a),
                            rd16(a + 4 + 2 * n), rd16(u + 2), rd16(u), rd16(u + 4 + 8 * n)))
        return "\n".join(lines)

    # QMP
    def qmp(self, execute, timeout=None, **arguments):
        """One QMP command; timeout (s) for a slow one (default 10 s)."""
        if self.qmp_sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(self.qmp_path)
            self.qmp_sock = s
            self._qmp_read()  # greeting
            self._qmp_send({"execute": "qmp_capabilities"})
            self._qmp_reply()
        self._qmp_send({"execute": execute, "arguments": arguments})
        if timeout is None:
            return self._qmp_reply()
        self.qmp_sock.settimeout(timeout)
        try:
            return self._qmp_reply()
        finally:
            self.qmp_sock.settimeout(10)

    def _qmp_send(self, obj):
        self.qmp_sock.sendall(json.dumps(obj).encode() + b"\n")

    def _qmp_read(self):
        while b"\n" not in self.qmp_buf:
            d = self.qmp_sock.recv(65536)
            if not d:
                raise Fail("QMP closed")
            self.qmp_buf += d
        line, self.qmp_buf = self.qmp_buf.split(b"\n", 1)
        return json.loads(line)

    def _qmp_reply(self):
        self.qmp_events = getattr(self, "qmp_events", [])
        while True:
            m = self._qmp_read()
            if "event" in m:
                self.qmp_events.append(m)
                continue
            if "error" in m:
                raise Fail("QMP error: %s" % m["error"])
            return m.get("return")

    def qmp_event(self, name, seconds):
        """Wait for QMP event name (seen or to come)."""
        self.qmp_events = getattr(self, "qmp_events", [])
        end = time.monotonic() + seconds
        while True:
            for e in self.qmp_events:
                if e["event"] == name:
                    self.qmp_events.remove(e)
                    return e
            left = end - time.monotonic()
            if left <= 0:
                raise Fail("no QMP event %s in %.0f s" % (name, seconds))
            self.qmp_sock.settimeout(left)
            try:
                m = self._qmp_read()
            except socket.timeout:
                continue
            finally:
                self.qmp_sock.settimeout(10)
            if "event" in m:
                self.qmp_events.append(m)

    @property
    def pid(self):
        with open(self.pidfile) as f:
            return int(f.read())

    def threads_cpu(self):
        """{thread name: cpu seconds} of QEMU (debug-threads=on names them)."""
        hz = os.sysconf("SC_CLK_TCK")
        out = {}
        base = "/proc/%d/task" % self.pid
        for t in os.listdir(base):
            try:
                with open("%s/%s/stat" % (base, t)) as f:
                    s = f.read()
            except FileNotFoundError:
                continue
            name = s[s.index("(") + 1:s.rindex(")")]
            fl = s.rsplit(")", 1)[1].split()
            out[name] = out.get(name, 0.0) + (int(fl[11]) + int(fl[12])) / hz
        return out

    def kill(self):
        if self.proc is None:
            return
        if self.sock:
            self.sock.close()
            self.sock = None
        if self.qmp_sock:
            self.qmp_sock.close()
            self.qmp_sock = None
        kill_tree(self.proc, 3)
        self.proc = None

    def shutdown(self, timeout=15):
        """Power the guest off and wait for QEMU to exit (kill after timeout)."""
        try:
            self.qmp("quit")
        except (Fail, OSError):
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    # Guest-side helpers
    def iface(self):
        rc, out = self.run("ls /sys/class/net")
        return [x for x in out.split() if x != "lo"]

    def iperf3_server(self):
        """iperf3 -s -D in the guest (once), listening when this returns."""
        self.run("{ pidof iperf3 >/dev/null || iperf3 -s -D; } && i=0; while ! grep -q ':1451 0' /proc/net/tcp /proc/net/tcp6"
                 " && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; [ $i -lt 100 ]")

    def ping(self, addr, count=3, timeout=30):
        return self.run("ping -c %d -W 5 %s" % (count, addr), timeout=timeout, check=False)


# The guest's pings, each reply time-stamped by the guest's shell as it
# reads ping's line ($EPOCHREALTIME: busybox ash, the guest's clock), and
# summed up by awk in the guest (the serial command loop is slow).
# A doubled reply is one busybox ping marks "(DUP!)": it keeps a table of
# the sequence numbers it received. A line printed twice without the mark
# is ping's own output, not the network's: its SIGINT handler (result()
# stops it so) flushes stdio, and when the signal lands inside the
# flush of the last reply's line, that line is written again (seen: the
# last reply twice, 4 ms apart, the tap showing one request and one
# reply). Those are counted apart, as "repeated".
_PING_AWK = " ".join(r"""
/ seq=/ { match($0, /seq=[0-9]+/); q = substr($0, RSTART + 4, RLENGTH - 4) + 0; t = $1;
  if (q in seen) { if (/DUP!/) { dup++; if (dup <= 10) dl = dl "," q ":" int((t - last) * 1000); } else rep++; next; };
  seen[q] = 1; n++; if (q > mx) mx = q;
  if (n > 1 && t - last > gap) { gap = t - last; ga = lq; gb = q; };
  if (n > 1 && t - last > 0.012 && ng < 300) { gl = gl "," q ":" int((t - last) * 10000); ng++; };
  last = t; lq = q; }
/packets transmitted/ { sent = $2; stop = $1; }
END { miss = 0; ml = "";
  for (i = 0; i <= mx; i++) if (!(i in seen)) { miss++; if (miss <= 30) ml = ml "," i; };
  tail = sent - mx - 1; tail_ms = (n > 0 && stop > last) ? (stop - last) * 1000 : 0;
  printf "@@PING replies=%d maxseq=%d missing=%d gap_ms=%.1f gap_after=%d gap_before=%d dup=%d repeated=%d sent=%d tail=%d tail_ms=%.1f missing_seqs=%s dup_seqs=%s gaps=%s\n", n, mx, miss, gap * 1000, ga, gb, dup, rep, sent, tail, tail_ms, substr(ml, 2), substr(dl, 2), substr(gl, 2); }
""".split())  # one line: the command loop reads lines


def page_diff_text(page, x, y, rings=()):
    """What differs in one page between two RAM images x and y (source,
    destination): up to 4 runs of differing bytes as "+OFFSET: SRC -> DST"
    (hex, at most 8 bytes each, with the virtqueue area and offset in it
    when the run lies in one), and the virtqueue areas (ring_areas) the
    page overlaps: a lost write in a ring is the back end's, a kernel
    pointer the vCPU's."""
    runs, i = [], 0
    while i < 4096 and len(runs) < 4:
        if x[i] == y[i]:
            i += 1
            continue
        j = i
        while j < 4096 and j - i < 8 and x[j] != y[j]:
            j += 1
        addr = page * 4096 + i
        where = "".join(" (%s +%d)" % (name, addr - lo) for name, lo, hi in rings
                        if lo <= addr < hi)
        runs.append("+%#x: %s -> %s%s" % (i, x[i:j].hex(), y[i:j].hex(), where))
        i = j
    base, end = page * 4096, page * 4096 + 4096
    over = [name for name, lo, hi in rings if lo < end and hi > base]
    return "; ".join(runs) + (" [page holds %s]" % ", ".join(over) if over else "")


class GuestPing:
    """The guest pings addr every interval s (at most count pings, at most
    deadline s) in the background; result() stops it and returns the
    replies, the pings lost (sequence numbers below the last answered one
    that got no answer: the tail cut by the stop is not a loss, unless no
    reply came in the last DEAD_TAIL s before the stop: then the network
    was down when the ping stopped, and the tail counts as lost and as a
    gap up to the stop) and the worst gap between two replies in the
    guest's clock; "gaps": every gap
    over 12 ms (the first 300) as (seq of the reply that ended it, ms), for
    gap_near(); "dup_seqs": the first 10 doubled replies as "seq:ms after
    the reply before it"."""

    DEAD_TAIL = 1.0  # s

    def __init__(self, guest, addr, interval=0.01, count=6000, deadline=90,
                 log="/tmp/tping.log"):
        self.g, self.log = guest, log
        guest.run("rm -f %s; (ping -i %s -c %d -w %d -W 2 %s 2>&1 | while read -r l; do "
                  "echo \"$EPOCHREALTIME $l\"; done > %s) </dev/null >/dev/null 2>&1 &"
                  % (log, interval, count, deadline, addr, log))

    def result(self, guest=None, seconds=30):
        g = guest or self.g
        # Replies the ping's own socket dropped (busybox ping sets SO_RCVBUF
        # to about 7 KiB: a burst of a few replies fills it while the ping
        # process is not scheduled): the drops column of /proc/net/raw,
        # read while the ping lives.
        _, raw = g.run("cat /proc/net/raw", check=False)
        sock_drops = sum(int(f[-1]) for f in (x.split() for x in raw.splitlines()[1:])
                         if f and f[-1].isdigit())
        g.run("kill -INT $(pidof ping) 2>/dev/null; i=0; while pidof ping >/dev/null && "
              "[ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; true")
        _, out = g.run("awk '%s' %s" % (_PING_AWK.replace("'", "'\\''"), self.log),
                       timeout=seconds)
        m = re.search(r"@@PING (.*)", out)
        if not m:
            raise Fail("no ping summary from the guest: %s" % out[-500:])
        r = {}
        for kv in m.group(1).split():
            k, v = kv.split("=", 1)
            if k == "gaps":  # seq:tenths of a ms,...
                r[k] = [(int(q), int(t) / 10.0) for q, t in (x.split(":") for x in v.split(",")
                                                             if x)]
            else:
                r[k] = v if k in ("missing_seqs", "dup_seqs") else \
                    float(v) if "." in v else int(v)
        if r["replies"] < 10:
            raise Fail("the guest's ping got %d replies: %s" % (
                r["replies"], g.run("tail -n 5 %s" % self.log, check=False)[1]))
        r["lost"] = r["missing"]
        if r["tail"] > 0 and r["tail_ms"] > self.DEAD_TAIL * 1000:
            # Down at the stop, not cut by it: replies come within ms.
            r["lost"] += r["tail"]
            if r["tail_ms"] > r["gap_ms"]:
                r["gap_ms"], r["gap_after"], r["gap_before"] = (r["tail_ms"], r["maxseq"],
                                                               r["sent"])
        r["sock_drops"] = sock_drops
        return r

    @staticmethod
    def gap_near(r, first, last, interval=0.01, margin=0.3):
        """The worst gap (ms) of result r that ended within `margin` s of
        the span [first, last] s after the ping started (the guest's
        sequence numbers: seq k is sent k x interval in), 12.0 when none
        there was over 12 ms: what an event in that span did to the
        pings, apart from the gaps the rest of the run had."""
        lo, hi = (first - margin) / interval, (last + margin) / interval
        return max([ms for q, ms in r.get("gaps", []) if lo <= q <= hi] + [12.0])


_ANNOUNCE_PY = r"""
import json, select, signal, socket, struct, sys, time
class Stop(Exception):
    pass
def stop(*a):
    raise Stop()
signal.signal(signal.SIGTERM, stop)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
if len(sys.argv) > 4 and sys.argv[4] == "icmp":
    # IPv4 ICMP only (classic BPF: ethertype 0x800, protocol 1), so that
    # a stream beside the pings costs this capture nothing.
    import ctypes
    code = [(0x28, 0, 0, 12), (0x15, 0, 3, 0x0800), (0x30, 0, 0, 23), (0x15, 0, 1, 1),
            (0x06, 0, 0, 0x40000), (0x06, 0, 0, 0)]
    prog = b"".join(struct.pack("HBBI", *c) for c in code)
    buf = ctypes.create_string_buffer(prog)
    s.setsockopt(socket.SOL_SOCKET, 26, struct.pack("HL", len(code), ctypes.addressof(buf)))
s.bind((sys.argv[1], 0))
mac = bytes.fromhex(sys.argv[2].replace(":", ""))
end = time.monotonic() + float(sys.argv[3])
out = {"rarp": [], "garp": [], "first": None, "frames": 0, "icmp": []}
print("ready", flush=True)
while True:
    left = end - time.monotonic()
    try:
        if left <= 0 or not select.select([s], [], [], left)[0]:
            if left <= 0:
                break
            continue
        d, a = s.recvfrom(65536)
    except Stop:
        break
    except OSError as e:  # the tap went down (ENETDOWN): say when
        out.setdefault("errors", []).append([time.monotonic(), e.strerror])
        time.sleep(0.01)
        continue
    t = time.monotonic()
    out_ = a[2] == socket.PACKET_OUTGOING
    # ICMP echo to or from the guest: [t, "to"/"from" the guest, type, seq]
    o = 14 + (d[14] & 15) * 4 if len(d) > 14 else 0
    if len(d) >= o + 8 and d[12:14] == b"\x08\x00" and d[23] == 1 and d[o] in (0, 8) and \
            (d[0:6] if out_ else d[6:12]) == mac:
        seq = struct.unpack("!H", d[o + 6:o + 8])[0]
        out["icmp"].append([t, "to" if out_ else "from", d[o], seq])
    if out_ or d[6:12] != mac:
        continue
    out["frames"] += 1
    if out["first"] is None:
        out["first"] = t
    et = struct.unpack("!H", d[12:14])[0]
    if et == 0x8035:
        out["rarp"].append(t)
    elif et == 0x0806 and d[28:32] == d[38:42]:
        out["garp"].append(t)
print(json.dumps(out), flush=True)
"""


class AnnounceWatch:
    """What the guest's MAC sends on dev (in netns) for seconds: the times
    (host monotonic) of RARP frames (QEMU's or the back end's SEND_RARP),
    of gratuitous ARPs (the guest's own announcement, GUEST_ANNOUNCE), and
    of its first frame at all; and every ICMP echo to or from the guest
    (where a lost ping went)."""

    def __init__(self, netns, dev, mac, seconds, icmp_only=False):
        # icmp_only: the ICMP echoes alone (a socket filter in the kernel)
        self.proc = netns.popen(["python3", "-c", _ANNOUNCE_PY, dev, mac, str(seconds)] +
                                (["icmp"] if icmp_only else []),
                                stdout=subprocess.PIPE, text=True)
        self.seconds = seconds
        on_exit(lambda: kill_tree(self.proc, 1))
        if self.proc.stdout.readline().strip() != "ready":
            raise Fail("cannot watch %s in %s" % (dev, netns.name))

    def result(self):
        """Stops the watch (at the latest after its seconds) and returns
        {"rarp": [t], "garp": [t], "first": t or None, "frames": n}."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=self.seconds + 10)
        return json.loads(out)


_SIZES_PY = r"""
import json, select, socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
end = time.monotonic() + float(sys.argv[2])
n = big = mx = 0
while True:
    left = end - time.monotonic()
    if left <= 0:
        break
    if not select.select([s], [], [], left)[0]:
        continue
    d, a = s.recvfrom(262144)
    if a[2] == socket.PACKET_OUTGOING:
        continue
    n += 1
    mx = max(mx, len(d))
    big += len(d) > 16384
print(json.dumps({"frames": n, "max": mx, "over16k": big}), flush=True)
"""


class FrameSizes:
    """Sizes of the frames the host receives on dev (from the guest), read
    with an AF_PACKET socket in the netns for a bounded time."""

    def __init__(self, netns, dev, seconds):
        self.proc = netns.popen(["python3", "-c", _SIZES_PY, dev, str(seconds)],
                                stdout=subprocess.PIPE, text=True)
        self.seconds = seconds
        on_exit(lambda: kill_tree(self.proc, 1))
        time.sleep(0.3)

    def result(self):
        out, _ = self.proc.communicate(timeout=self.seconds + 10)
        return json.loads(out)


def iperf3_bg(netns, server_ip, seconds, reverse=False, extra=""):
    """iperf3 client in the background; .communicate() for its JSON."""
    cmd = "timeout -k 2 %d iperf3 -c %s -t %s -J %s %s" % (seconds + 30, server_ip, seconds,
                                                           "-R" if reverse else "", extra)
    p = netns.popen(["sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True)
    on_exit(lambda: kill_tree(p, 1))
    return p


def iperf3_stop(p):
    """End an iperf3_bg client now (SIGINT: it reports what it measured);
    read it with iperf3_result(p, s, stopped=True)."""
    # iperf3 itself: timeout(1) runs it in a process group of its own.
    for pid in tree_pids(p.pid):
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().strip() == "iperf3":
                    os.kill(pid, signal.SIGINT)
        except (FileNotFoundError, ProcessLookupError):
            pass


def iperf3_result(p, seconds, stopped=False):
    out, err = p.communicate(timeout=seconds + 40)
    try:
        j = json.loads(out)
    except ValueError:
        raise Fail("iperf3 gave no JSON (rc %d): %s %s" % (p.returncode, out[-500:], err[-500:]))
    if "error" in j and not (stopped and j["error"].startswith("interrupt")):
        raise Fail("iperf3: %s" % j["error"])
    rcv = j["end"]["sum_received"]
    return rcv["bits_per_second"] / 1e9, rcv["bytes"], j


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def iperf3(netns, server_ip, seconds=5, reverse=False, extra=""):
    """Host-side iperf3 client in netns to the guest's iperf3 -s; returns the
    receiver's Gbit/s, bytes and the JSON (reverse = the guest sends)."""
    # iperf3 -s closes its listening socket between tests: a slow guest may
    # refuse the next one for a moment.
    # A run can also hang in iperf3 itself, its client then killed by the
    # timeout ("interrupt - the client has terminated"). That happened with
    # QEMU's own virtio-net too (doc/benchmarks.md), so it is tried once
    # more, but only if the NIC still carries pings both ways first: a
    # NIC that stopped moving frames fails here and now. (The hangs seen
    # in CI were such stops: a kick lost to TCG's dropped barriers, gone
    # since maxcpus=2, see Guest.argv.)
    hung = False
    for attempt in range(10):
        try:
            return iperf3_result(iperf3_bg(netns, server_ip, seconds, reverse, extra), seconds)
        except Fail as e:
            if attempt < 9 and re.search(r"unable to connect|server is busy", str(e)):
                time.sleep(1)
                continue
            # The guest's iperf3 -s, still tearing down the test before
            # (16 streams, or the other direction's), can reset or close
            # the next control connection before any test data moved: the
            # same "busy" moment, if the NIC still carries pings.
            if attempt < 9 and re.search(r"unable to receive control message|"
                                         r"control socket has closed unexpectedly", str(e)):
                if netns.ping(server_ip, 5).returncode != 0:
                    raise Fail("%s, and the guest no longer answers pings" % e)
                log("iperf3's control connection was reset before the test (%s); the NIC "
                    "still answers pings: once more" % e)
                time.sleep(1)
                continue
            if hung or "the client has terminated" not in str(e):
                raise
            hung = True
            if netns.ping(server_ip, 5).returncode != 0:
                raise Fail("%s, and the guest no longer answers pings" % e)
            log("iperf3 hung and was killed (%s); the NIC still answers pings: once more" % e)


class Testpmd:
    """DPDK testpmd on one forwarding lcore, time-bounded, interactive.

    vdevs: list of --vdev strings.  Runs in netns when given (net_tap makes
    its tap there).  --no-huge: its memory is memfd-backed, shareable with a
    vhost-user peer."""

    def __init__(self, vdevs, netns=None, seconds=120, workdir=None, extra_eal=(),
                 args=(), mem_mb=1024, lcores="0,1", name="testpmd"):
        self.dir = workdir or tmpdir()
        self.log_path = os.path.join(self.dir, name + ".log")
        pmds = ["librte_mempool_ring.so", "librte_net_vhost.so", "librte_net_virtio.so",
                "librte_net_tap.so"]
        argv = ["timeout", "-k", "2", str(seconds), "stdbuf", "-oL", "dpdk-testpmd", "-l", lcores, "--no-pci",
                "--no-huge", "-m", str(mem_mb), "--file-prefix", "vnic%s%d" % (name, os.getpid()),
                "--log-level", "lib.eal:error"]
        for p in pmds:
            argv += ["-d", os.path.join(DPDK_PMDS, p)]
        for v in vdevs:
            argv += ["--vdev", v]
        argv += list(extra_eal) + ["--", "-i", "--total-num-mbufs=16384"] + list(args)
        if netns:
            argv = netns.cmd(argv)
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=self.logf,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        on_exit(self.kill)

    def text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_log(self, pattern, seconds, what=None):
        def seen():
            if self.proc.poll() is not None:
                raise Fail("testpmd exited %s: %s" % (self.proc.returncode, self.text()[-2000:]))
            return re.search(pattern, self.text())
        try:
            return wait_for(what or pattern, seconds, seen, 0.1)
        except Fail as e:
            raise Fail("%s; testpmd log tail:\n%s" % (e, self.text()[-1500:]))

    def cmd(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def stats(self):
        """{port: {"rx": packets, "tx": packets, "rxb": bytes, "txb": bytes}}
        of every port, from "show port stats all"."""
        mark = len(self.text())
        self.cmd("show port stats all")
        n = self.nports()

        def parsed():
            # Whole blocks only: testpmd's output arrives in pieces, and
            # a block's "####" header alone (or the forward statistics a
            # "stop" just before still prints) says nothing of its counts.
            out = {}
            for m in re.finditer(r"NIC statistics for port (\d+)[\s\S]*?RX-packets: *(\d+)"
                                 r"[\s\S]*?RX-bytes: *(\d+)[\s\S]*?TX-packets: *(\d+)"
                                 r"[\s\S]*?TX-bytes: *(\d+)", self.text()[mark:]):
                out[int(m.group(1))] = {"rx": int(m.group(2)), "rxb": int(m.group(3)),
                                        "tx": int(m.group(4)), "txb": int(m.group(5))}
            return out if len(out) >= n else None
        return wait_for("port stats of %d port(s)" % n, 10, parsed, 0.1)

    def nports(self):
        return max(1, len(re.findall(r"Port \d+: [0-9A-F]{2}:", self.text())) or 1)

    def kill(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.cmd("quit")
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        kill_tree(self.proc, 3)
        self.proc = None
        self.logf.close()


def mem_bytes(m):
    """QEMU's -m size ("512M", "2G", "1024") in bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if m[-1:].upper() in units:
        return int(m[:-1]) * units[m[-1].upper()]
    return int(m) << 20


class Vnicd:
    """vnicd from a build tree, on a private control socket."""

    def __init__(self, builddir, workdir=None, env=None):
        self.b = builddir
        self.dir = workdir or tmpdir()
        self.sock = os.path.join(self.dir, "control.sock")
        self.log_path = os.path.join(self.dir, "vnicd.log")
        self.env = env
        self.proc = None
        for rel in ("supervisor/vnicd", "workers/vnicd-worker", "tools/vnicctl"):
            if not os.access(os.path.join(self.b, rel), os.X_OK):
                raise Fail("%s/%s missing: build first" % (self.b, rel))

    def install(self):
        """Copy the build's vnicd to the work directory, as a package
        manager installs: a new file renamed over the old one. vnicd runs
        from there, so that upgrade() has a binary to replace."""
        self.exe = os.path.join(self.dir, "vnicd")
        shutil.copy2(os.path.join(self.b, "supervisor/vnicd"), self.exe + ".new")
        os.rename(self.exe + ".new", self.exe)

    def upgrade(self, wait=10):
        """Install the binary again and upgrade in place (vnicctl upgrade):
        its JSON answer, with "before_exe"/"after_exe" (/proc/PID/exe)."""
        self.install()
        before = os.readlink("/proc/%d/exe" % self.proc.pid)
        r = self.ctl("--json", "upgrade", "--wait", str(wait), timeout=wait + 40)
        j = json.loads(r.stdout)
        j["before_exe"] = before
        j["after_exe"] = os.readlink("/proc/%d/exe" % self.proc.pid)
        return j

    def start(self, extra=()):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.logf = open(self.log_path, "a")
        env = dict(os.environ, **(self.env or {}))
        if not getattr(self, "exe", None):
            self.install()
        self.proc = subprocess.Popen([self.exe, "--socket",
                                      self.sock, "--foreground", "--worker",
                                      os.path.join(self.b, "workers/vnicd-worker")] + list(extra),
                                     stdout=self.logf, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        on_exit(self.stop)
        evidence("a vnicd's log", self.log_path)
        wait_for("vnicd's socket", 10, lambda: self._alive() and os.path.exists(self.sock))
        return self

    def _alive(self):
        if self.proc.poll() is not None:
            raise Fail("vnicd exited %s: %s" % (self.proc.returncode, self.log()[-1500:]))
        return True

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def ctl_argv(self):
        """How to run the build's vnicctl as the installed one runs: the
        program itself, not libtool's wrapper script (bash, about 70 ms of
        CPU a run here: a guest on 2 cores sees it in its ping gaps)."""
        real = os.path.join(self.b, "tools/.libs/vnicctl")
        libs = os.path.abspath(os.path.join(self.b, ".libs"))  # libvnic.so
        if os.access(real, os.X_OK) and os.path.exists(os.path.join(libs, "libvnic.so")):
            return ["/usr/bin/env", "LD_LIBRARY_PATH=" + libs, os.path.abspath(real)]
        return [os.path.abspath(os.path.join(self.b, "tools/vnicctl"))]

    def ctl_raw(self, *args, timeout=30):
        return subprocess.run(self.ctl_argv() + ["--socket", self.sock] + list(args),
                              capture_output=True, text=True, timeout=timeout)

    def ctl(self, *args, check=True, timeout=30):
        r = self.ctl_raw(*args, timeout=timeout)
        if check and r.returncode != 0:
            raise Fail("vnicctl %s: rc %d: %s%s" % (" ".join(args), r.returncode, r.stdout,
                                                   r.stderr))
        return r

    def status(self):
        return json.loads(self.ctl("status", "--json").stdout)

    def nic(self, nic_id):
        for n in self.status()["nics"]:
            if n["id"] == nic_id:
                return n
        return None

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                kill_tree(self.proc, 1)
        self.proc = None
        self.logf.close()


class SystemdVnicd(Vnicd):
    """vnicd as systemd runs it with --fd-store (issue 16): a real systemd
    as pid 1 of a private pid and mount namespace (this machine's pid 1 is
    not systemd), vnicd a Type=notify service with FileDescriptorStoreMax=,
    Restart=on-failure and KillMode=process. The namespace shares the
    machine's network and files: vnicd puts its taps in the harness's
    namespaces and reaches QEMU's sockets. Only our units exist, with
    DefaultDependencies=no, and everything of a boot is masked (no
    sysinit.target, udevd, journald or tmpfiles: a systemd-tmpfiles --boot
    would empty the machine's /tmp); /run and /tmp are tmpfs of its own
    with the machine's /run/netns and our work directory (vnicd's files
    and QEMU's sockets) bound in."""
    fd_store = True
    SYSTEMD = "/lib/systemd/systemd"
    MASKED = ("sysinit.target", "basic.target", "sockets.target", "timers.target",
              "paths.target", "local-fs.target", "systemd-tmpfiles-setup.service",
              "systemd-tmpfiles-setup-dev.service", "systemd-tmpfiles-clean.timer",
              "systemd-udevd.service", "systemd-journald.service", "systemd-journald.socket",
              "tmp.mount")

    def sd(self, *args, check=True, timeout=30):
        r = subprocess.run(["nsenter", "-t", str(self.init_pid), "-p", "-m"] + list(args),
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise Fail("%s: rc %d: %s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def main_pid(self):
        return int(self.sd("systemctl", "show", "-p", "MainPID", "--value", "vnicd").stdout
                   .strip() or 0)

    def start(self, extra=()):
        if not os.access(self.SYSTEMD, os.X_OK) or not shutil.which("unshare") or \
                not shutil.which("nsenter"):
            skip("no systemd (%s), unshare or nsenter" % self.SYSTEMD)
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        if not getattr(self, "exe", None):
            self.install()
        self.logf = open(self.log_path, "a")
        env = " ".join("%s=%s" % kv for kv in (self.env or {}).items())
        argv = [self.exe, "--socket", self.sock, "--foreground", "--worker",
                os.path.join(self.b, "workers/vnicd-worker"), "--fd-store"] + list(extra)
        units = os.path.join(self.dir, "units")
        os.makedirs(units, exist_ok=True)
        with open(os.path.join(units, "vnictest.target"), "w") as f:
            f.write("[Unit]\nDescription=vnicd under test\nDefaultDependencies=no\n")
        with open(os.path.join(units, "vnicd.service"), "w") as f:
            f.write("[Unit]\nDefaultDependencies=no\n[Service]\nType=notify\n"
                    "ExecStart=%s\nExecReload=%s --socket %s upgrade --wait 30\n"
                    "Restart=on-failure\nRestartSec=100ms\nKillMode=process\n"
                    "FileDescriptorStoreMax=16384\nLimitNOFILE=65536\n%s"
                    "StandardOutput=append:%s\nStandardError=append:%s\n"
                    % (" ".join(argv), " ".join(self.ctl_argv()), self.sock,
                       "Environment=%s\n" % env if env else "", self.log_path, self.log_path))
        boot = os.path.join(self.dir, "boot.sh")
        with open(boot, "w") as f:
            # /run a tmpfs of its own (else systemd mounts one over it,
            # finds none of our units and boots into rescue.target with
            # all of sysinit), with the machine's /run/netns bound in;
            # /tmp a tmpfs of its own with only our directory and the
            # build tree (when they are in /tmp) bound in.
            keep = [d for d in (self.dir, os.path.realpath(self.b)) if d.startswith("/tmp/")]
            f.write("set -e\nD=%s\nmkdir -p $D/host-run\nmount --rbind /run $D/host-run\n"
                    "mount -t tmpfs tmpfs /run\nmkdir -p /run/netns /run/systemd/system\n"
                    "[ -d $D/host-run/netns ] && mount --rbind $D/host-run/netns /run/netns\n"
                    % self.dir +
                    "".join("mkdir -p /run/keep/%d\nmount --bind %s /run/keep/%d\n" % (i, d, i)
                            for i, d in enumerate(keep)) +
                    "mount -t tmpfs tmpfs /tmp\n" +
                    "".join("mkdir -p %s\nmount --bind /run/keep/%d %s\n" % (d, i, d)
                            for i, d in enumerate(keep)) +
                    "".join("ln -s /dev/null /run/systemd/system/%s\n" % u for u in self.MASKED) +
                    "cp %s/* /run/systemd/system/\n"
                    "exec %s --system --unit=vnictest.target --log-level=warning\n"
                    % (units, self.SYSTEMD))
        self.proc = subprocess.Popen(["unshare", "--kill-child", "--pid", "--fork", "--mount",
                                      "--mount-proc", "--propagation", "slave", "--cgroup",
                                      "--uts", "--ipc", "bash", boot],
                                     stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        on_exit(self.stop)
        evidence("a vnicd's log", self.log_path)

        def booted():
            self._alive()
            kids = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                  text=True).stdout.split()
            if not kids:
                return False
            self.init_pid = int(kids[0])
            st = self.sd("systemctl", "is-system-running", check=False).stdout.strip()
            return st in ("running", "degraded")
        wait_for("systemd in its namespace", 20, booted, 0.1)
        self.sd("systemctl", "start", "vnicd", timeout=60)
        wait_for("vnicd's socket", 10, lambda: self._alive() and os.path.exists(self.sock))
        return self

    def crash(self):
        """SIGKILL vnicd; systemd starts it again and it takes over from
        the fd store. Returns vnicd's pids (in the namespace) before and
        after."""
        p0 = self.main_pid()
        self.sd("systemctl", "kill", "-s", "KILL", "--kill-who=main", "vnicd")

        def back():
            p = self.main_pid()
            return p not in (0, p0) and self.ctl_raw("status").returncode == 0 and p
        return p0, wait_for("vnicd restarted by systemd", 20, back, 0.02)

    def systemctl(self, verb):
        """systemctl restart or reload vnicd (reload: ExecReload=, an
        upgrade in place of the binary installed again first); waits
        until vnicd answers again."""
        if verb == "reload":
            self.install()
        self.sd("systemctl", verb, "vnicd", timeout=60)
        return wait_for("vnicd after systemctl %s" % verb, 20,
                        lambda: self.ctl_raw("status").returncode == 0, 0.02)

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if sig == signal.SIGTERM:
                self.sd("systemctl", "stop", "vnicd", check=False, timeout=60)
            kill_tree(self.proc, 1)
        self.proc = None
        self.logf.close()
