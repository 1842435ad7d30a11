# SPDX-License-Identifier: BSD-3-Clause
"""Vhost-user back ends for the QEMU tests and benchmarks, one interface:

    b = VnicdBackend(builddir, netns, sock, mode) or TestpmdBackend(...)
    b.before_qemu()   server mode: the back end listens before QEMU connects
    b.after_qemu()    client mode: the back end connects to QEMU's socket
    b.tap             the tap in netns that carries the guest's frames
    b.worker_pid()    the process moving frames (None when not vnicd)
    b.cpu()           CPU seconds of the back end's processes so far
    b.close()

mode "server": the back end listens on sock, QEMU connects (its chardev has
no server=on); mode "client": QEMU listens (server=on,wait=off), the back
end connects."""
import os
import re
import signal

import vmlib


class VnicdBackend:
    name = "vnicd"

    def __init__(self, builddir, netns, sock, mode, nic_id="q0", tap="vq0", mtu=None,
                 workdir=None, policy=None, log_level=None, policy_opts=None,
                 af_packet=False, fd_store=None, vnicd=None):
        # vnicd: a running vnicd (vmlib.Vnicd's interface) that gets this
        # NIC too, e.g. another backend's .v; default: one of our own.
        # fd_store: vnicd under a systemd of its own with --fd-store
        # (vmlib.SystemdVnicd); default: $VNIC_VNICD_FDSTORE=1.
        if fd_store is None:
            fd_store = os.environ.get("VNIC_VNICD_FDSTORE") == "1"
        self.v = vnicd or (vmlib.SystemdVnicd if fd_store else vmlib.Vnicd)(builddir, workdir)
        self.ns, self.sock, self.mode = netns, sock, mode
        self.id, self.tap, self.mtu, self.policy = nic_id, tap, mtu, policy
        # vnicctl set-policy options once the NIC runs: {"rx-irq-us": 200, ...}
        self.policy_opts = policy_opts or {}
        self.af_packet = af_packet  # tap: an existing interface, bound with AF_PACKET
        r = self.v.ctl_raw("add", "--help")
        if "--vhost-user" not in r.stdout + r.stderr:
            vmlib.skip("this vnicctl has no 'add --vhost-user' (issue 8's front door is not "
                       "in this tree yet)")
        if not vnicd:
            self.v.start(["--log-level", log_level] if log_level else [])
        vmlib.diagnose("vnicd's status of %s" % nic_id, lambda: self.v.ctl_raw("status").stdout)

    def add(self):
        args = ["add", self.id, "--vhost-user", self.sock, "--" + self.mode,
                "--af-packet" if self.af_packet else "--tap", self.tap, "--netns", self.ns.name]
        if self.mtu:
            args += ["--mtu", str(self.mtu)]
        if self.policy:
            args += ["--policy", self.policy]
        self.v.ctl(*args)

    def before_qemu(self):
        if self.mode == "server":
            self.add()

    def after_qemu(self):
        if self.mode == "client":
            self.add()

    def nic(self):
        return self.v.nic(self.id)

    def worker_pid(self):
        n = self.nic()
        return n.get("pid") if n else None

    def wait_running(self, seconds=30):
        def running():
            n = self.nic() or {}
            return n.get("state") == "RUNNING" and n.get("pid")
        r = vmlib.wait_for("NIC %s RUNNING with a worker" % self.id, seconds, running, 0.2)
        if self.policy_opts:
            # SetPolicy replaces the whole policy; on an endpoint's NIC it
            # also becomes the endpoint's (kept across front-end sessions).
            args = ["set-policy", self.id, "--mode", self.policy or "default"]
            for opt, v in self.policy_opts.items():
                args += ["--" + opt, str(v)]
            self.v.ctl(*args)
        return r

    def cpu(self):
        return vmlib.tree_cpu(self.v.proc.pid) if self.v.proc else 0.0

    def restart_vnicd(self, sig=signal.SIGKILL):
        """Stop vnicd with sig and start it again on the same socket
        (under systemd with the fd store: SIGKILL, and systemd starts it)."""
        if getattr(self.v, "fd_store", False) and sig == signal.SIGKILL:
            return self.v.crash()
        self.v.stop(sig)
        self.v.start()

    def close(self):
        # vnicd keeps an endpoint (its state file, its persistent tap) across
        # its own restarts: remove it, as a user would, before stopping.
        if self.v.proc and self.v.proc.poll() is None:
            self.v.ctl("remove", self.id, check=False)
        self.v.stop()


def stop_events(text, nic_id):
    """[(seconds, event)] of nic_id in text (vnicd's log; seconds of the
    day, UTC): "spawned" (a worker), "stopping" (the front end's device
    stop made vnicd stop it), "reaped", "answered" (GET_VRING_BASE ring 0).
    QEMU stops the device (device_del, a migration's switch-over) with
    SET_STATUS 0 (when STATUS is negotiated) and then GET_VRING_BASE per
    ring; vnicd answers each only once the worker is reaped."""
    pats = [("answered", r"vhost-user %s: GET_VRING_BASE ring 0 answered"),
            ("stopping", r"nic %s: \S+ -> STOPPING: (GET_VRING_BASE|SET_STATUS 0)"),
            ("reaped", r"nic %s: .*worker reaped"),
            ("spawned", r"nic %s: worker pid \d+ spawned")]
    ev = []
    for line in text.splitlines():
        for name, pat in pats:
            if re.search(pat % nic_id, line):
                m = re.match(r"\d{4}-\d\d-\d\dT(\d\d):(\d\d):(\d\d\.\d+)Z", line)
                t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)) \
                    if m else None
                ev.append((t, name))
                break
    return ev


def unplug_order(text, nic_id):
    """The order of vnicd's "worker reaped" and "GET_VRING_BASE ring 0
    answered" lines for nic_id in text (its log)."""
    return [e for _, e in stop_events(text, nic_id) if e in ("reaped", "answered")]


class TestpmdBackend:
    """DPDK vhost (net_vhost) forwarding to a tap (net_tap) in io mode."""
    name = "testpmd"

    def __init__(self, netns, sock, mode, tap="dq0", seconds=300, workdir=None, port=None):
        self.ns, self.sock, self.mode, self.tap = netns, sock, mode, tap
        # port: the other side (default a tap; e.g. net_af_packet0,iface=X)
        self.tp = vmlib.Testpmd(["net_vhost0,iface=%s,queues=1%s" %
                                 (sock, ",client=1" if mode == "client" else ""),
                                 port or "net_tap0,iface=%s" % tap], netns=netns, seconds=seconds,
                                workdir=workdir, args=["--forward-mode=io", "--auto-start"])
        self.mtu = None

    def before_qemu(self):
        if self.mode == "server":
            vmlib.wait_for("testpmd's vhost-user socket", 30,
                           lambda: self.tp.proc.poll() is None and os.path.exists(self.sock))

    def after_qemu(self):
        pass

    def worker_pid(self):
        return None

    def wait_running(self, seconds=30):
        self.tp.wait_log(r"virtio is now ready|Port 0: link state change", seconds)

    def cpu(self):
        return vmlib.tree_cpu(self.tp.proc.pid) if self.tp.proc else 0.0

    def close(self):
        self.tp.kill()
