#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# handover_check.sh: the handover an upgrade in place passes to the new
# vnicd (proto/handover.proto) is checked whole before anything is taken
# over (issue 16, doc/design.md "Upgrade in place"). Each bad handover
# below goes to `vnicd --handover-fd=N --handover-check` and to
# `vnicd --handover-fd=N` (the take-over itself) in a sealed memfd: both
# must exit 1 with one line that says what is wrong, and the take-over
# must bind no socket. The messages are encoded here by hand (protobuf
# varints and lengths), so the test needs no protobuf library:
#   garbage bytes, an empty memfd, a format from the future, no control
#   socket, a control socket that is not open, fd 0 as the socket, one fd
#   named twice, a nice value to return to out of range, a NIC whose
#   owner is not in the handover, a NIC in a state that cannot be handed
#   over, a NIC whose policy is out of range, an endpoint pair with no NIC.
set -u
. "$(dirname "$0")/e2e_lib.sh"

command -v python3 >/dev/null 2>&1 || e2e_skip "needs python3"

python3 - "$VNICD" "$VNICD_WORKER" "$E2E_TMP" <<'PY'
import os, socket, subprocess, sys

vnicd, worker, tmp = sys.argv[1:4]


def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def f_int(num, v):
    return varint(num << 3) + varint(v)


def f_msg(num, body):
    return varint((num << 3) | 2) + varint(len(body)) + body


def f_str(num, s):
    return f_msg(num, s.encode())


# A listening socket the handovers may name (open in the child).
lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
lsock.bind(os.path.join(tmp, "l.sock"))
lsock.listen(1)
L = lsock.fileno()
conn = socket.socketpair()
C = conn[0].fileno()

# A NIC (field 7) of RUNNING state with a worker, owned by connection 7.
nic_ok_fields = (f_str(1, "n0") + f_msg(4, b"\x52\x54\x00\x00\x00\x01") +
                 f_msg(13, b"") + f_msg(13, b"") + f_int(17, C) + f_int(18, 4096))
cases = [
    ("garbage", b"\xff\xff\xff\xff\x0f\x01\x02", "does not decode"),
    ("empty", b"", "not a handover"),
    ("future format", f_int(1, 99) + f_int(3, L), "handover format 99"),
    ("no control socket", f_int(1, 1) + f_int(3, -1), "no control socket"),
    ("nice out of range", f_int(1, 1) + f_int(3, L) + f_int(13, -1) + f_int(20, 1) +
     f_int(21, 40), "nice 40 is not in -20..19"),
    ("socket not open", f_int(1, 1) + f_int(3, 987), "fd 987 is not open"),
    ("fd 0 as the socket", f_int(1, 1) + f_int(3, 0), "not a handed-over fd"),
    ("fd named twice", f_int(1, 1) + f_int(3, L) + f_int(13, -1) +
     f_msg(6, f_int(1, L) + f_int(2, 1)), "named twice"),
    ("owner missing", f_int(1, 1) + f_int(3, L) + f_int(13, -1) +
     f_msg(7, nic_ok_fields + f_int(3, 5) + f_str(33, "vmm") + f_int(34, 7)),
     "owner"),
    ("state STARTING", f_int(1, 1) + f_int(3, L) + f_int(13, -1) +
     f_msg(7, nic_ok_fields + f_int(3, 1) + f_str(33, "vmm") + f_int(34, 7)),
     "only a RUNNING or FAILED NIC"),
    ("policy out of range", f_int(1, 1) + f_int(3, L) + f_int(13, -1) +
     f_msg(7, nic_ok_fields + f_msg(7, f_int(1, 99)) + f_int(3, 5) + f_str(33, "vmm") +
           f_int(34, 7)),
     "a policy out of range"),
    ("pair with no NIC", f_int(1, 1) + f_int(3, L) + f_int(13, -1) +
     f_msg(8, f_msg(1, f_str(1, "e0") + f_str(2, "/tmp/x.sock") + f_msg(4, f_str(1, "t0"))) +
           f_int(4, -1) + f_msg(7, f_int(1, 1))),
     "pair 0 has 0 NICs"),
]
fails = 0
for name, data, want in cases:
    fd = os.memfd_create("handover", os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    for extra in (["--handover-check"], []):
        sock = os.path.join(tmp, "c.sock")
        r = subprocess.run([vnicd, "--handover-fd=%d" % fd, "--socket", sock, "--foreground",
                            "--worker", worker, "--state-dir", ""] + extra,
                           pass_fds=(fd, L, C), capture_output=True, text=True, timeout=20)
        mode = "check" if extra else "take-over"
        ok = r.returncode == 1 and want in r.stderr and not os.path.exists(sock)
        print("%-20s %-9s rc %d: %s" % (name, mode, r.returncode,
                                        r.stderr.strip().splitlines()[-1] if r.stderr.strip()
                                        else "(nothing on stderr)"))
        if not ok:
            print("  FAIL: expected exit 1 with \"%s\" and no socket" % want)
            fails += 1
    os.close(fd)
sys.exit(1 if fails else 0)
PY
rc=$?
[ $rc = 0 ] || e2e_die "a bad handover was not refused as it should be"
e2e_log "PASS"
