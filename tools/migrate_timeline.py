#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""migrate_timeline.py BUILDDIR OUTDIR [--kind vnicd|qemu] [--mode server|client]
[--dirs h2g,g2h] [--window MS]: where a migration's downtime goes.

Boots the guest of tests/guest/migrate_cases.py once on the back end and
migrates it once per --dirs entry (under its pings and iperf3 stream),
with QEMU's trace events on (VNIC_QEMU_TRACE, each QEMU's DIR/<name>.trace,
stamped with the wall clock) and vnicd at --log-level debug (one line per
vhost-user request, deferral and answer).  For each migration it prints,
in ms from the source's vm_stop ("finish-migrate"), the source's and the
destination's QEMU events (QS, QD), vnicd's log lines (VS, VD), the
guest's pings on both taps (P) and the moment the harness saw the
migration complete (H) up to --window ms after it, and keeps in OUTDIR
the traces, vnicd's logs and the harness's figures (N-DIR.json).  vnicd's log is stamped to the ms,
truncated: its lines may show up to 1 ms early.  doc/benchmarks.md
("Where the downtime goes") reads such timelines.
Needs root, qemu-system-x86, iperf3, linux-image-amd64, busybox-static."""
import argparse
import datetime
import json
import os
import re
import sys
sys.dont_write_bytecode = True
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "guest"))
import migrate_cases  # noqa: E402
import vmlib  # noqa: E402

EVENTS = ("vhost_user_write,vhost_user_read,vhost_dev_start,vhost_dev_stop,migrate_set_state,"
          "migration_completion_vm_stop,vm_state_notify,savevm_state_complete_precopy,"
          "migration_bitmap_sync_start,migration_bitmap_sync_end,qemu_loadvm_state_post_main,"
          "loadvm_state_cleanup,process_incoming_migration_co_end,"
          "migration_thread_low_pending,virtio_net_announce_notify")
LOG_RE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z \S+ (.*)")
TRACE_RE = re.compile(r"\d+@(\d+\.\d+):(.*)")


def qemu_events(path, tag):
    out = []
    with open(path) as f:
        for line in f:
            m = TRACE_RE.match(line)
            if m:
                out.append((float(m.group(1)), tag, m.group(2).strip()))
    return out


def vnicd_events(text, tag):
    out = []
    for line in text.splitlines():
        m = LOG_RE.match(line)
        if m and " conn " not in line:  # vnicctl's status polls
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
            out.append((t.replace(tzinfo=datetime.timezone.utc).timestamp(), tag, m.group(2)))
    return out


def timeline(events, window_ms):
    """Lines "+ms TAG event" from the source's vm_stop to window_ms after."""
    stops = [t for t, g, e in events if g == "QS" and "finish-migrate" in e]
    if not stops:
        return ["no vm_stop (finish-migrate) in the source's trace"]
    t0 = stops[0]
    return ["%+8.1f %s %s" % ((t - t0) * 1000, g, e[:160])
            for t, g, e in sorted(events, key=lambda x: x[0])
            if -1.0 <= (t - t0) * 1000 <= window_ms]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("builddir")
    p.add_argument("outdir")
    p.add_argument("--kind", choices=("vnicd", "qemu"), default="vnicd")
    p.add_argument("--mode", choices=("server", "client"), default="server")
    p.add_argument("--dirs", default="h2g,g2h", help="migrations in order (h2g, g2h)")
    p.add_argument("--window", type=float, default=300.0, help="ms after vm_stop (300)")
    a = p.parse_args()
    vmlib.need_root()
    vmlib.need_qemu()
    out = os.path.abspath(a.outdir)
    os.makedirs(out, exist_ok=True)
    os.environ["VNIC_QEMU_TRACE"] = EVENTS
    os.environ["VNIC_QEMU_TRACE_DIR"] = out
    b = os.path.abspath(a.builddir)
    image = vmlib.build_guest(os.path.join(b, "tests/guest-image"))
    pair = migrate_cases.Pair(a.kind, image, b, mode=a.mode, tag="t")
    try:
        pair.boot()
        for i, d in enumerate(a.dirs.split(",")):
            src_name = pair.g.name
            r = pair.migrate(d)
            ev = qemu_events(os.path.join(out, src_name + ".trace"), "QS")
            ev += qemu_events(os.path.join(out, pair.g.name + ".trace"), "QD")
            for k, tag in (("src_log", "VS"), ("dst_log", "VD")):
                if k in r:
                    text = r.pop(k)
                    with open(os.path.join(out, "%d-%s-%s.log" % (i, d, k)), "w") as f:
                        f.write(text)
                    ev += vnicd_events(text, tag)
            ev += [(t, "P", "%s seq %d on %s" % (kind, seq, tap))
                   for t, tap, kind, seq in r.get("tap_icmp", [])]
            if r.get("t_done_wall"):
                ev.append((r["t_done_wall"], "H", "the harness sees the migration complete"))
            with open(os.path.join(out, "%d-%s.json" % (i, d)), "w") as f:
                json.dump(r, f, indent=1, default=str)
            print("\n== %d %s %s: %s" % (i, a.kind, d, migrate_cases.summary(r)))
            print("\n".join(timeline(ev, a.window)), flush=True)
    finally:
        pair.close()


if __name__ == "__main__":
    vmlib.main(main)
