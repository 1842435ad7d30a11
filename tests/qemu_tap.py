#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The harness itself, on QEMU's own virtio-net and a tap (no vnicd): a real
Linux guest boots under TCG, gets its link, and ping and iperf3 TCP pass
both ways to the tap in a private netns.  This is the reference the
vhost-user tests and tools/bench_qemu.sh compare against; when it fails,
the harness (guest image, QEMU, netns) is broken, not vnicd."""
import os
import sys
sys.dont_write_bytecode = True  # the source tree may be read-only
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "guest"))
import vmlib  # noqa: E402


def main():
    vmlib.need_root()
    vmlib.need_qemu()
    image = vmlib.build_guest(os.path.join(os.environ["VNIC_TOP_BUILDDIR"], "tests/guest-image"))
    ns = vmlib.Netns("qt")
    g = vmlib.Guest(image, ("tap", "qtap0", "bh"), netns=ns).start()
    vmlib.log("guest up %.1f s after QEMU started" % (g.t_ready - g.t_start))
    ns.addr("qtap0", "198.18.0.1/24")
    rc, out = g.ping("198.18.0.1", 3)
    if rc != 0:
        raise vmlib.Fail("guest -> host ping failed:\n" + out)
    r = ns.ping("198.18.0.2", 3)
    if r.returncode != 0:
        raise vmlib.Fail("host -> guest ping failed:\n" + r.stdout + r.stderr)
    g.iperf3_server()
    for rev in (False, True):
        gbps, nbytes, _ = vmlib.iperf3(ns, "198.18.0.2", 2, reverse=rev)
        vmlib.log("iperf3 %s: %.2f Gbit/s, %d bytes" % ("g2h" if rev else "h2g", gbps, nbytes))
        if nbytes < 1 << 20:
            raise vmlib.Fail("iperf3 moved only %d bytes" % nbytes)
    g.shutdown()
    vmlib.log("PASS")


if __name__ == "__main__":
    vmlib.main(main)
