#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Test helper for tests/admin_systemd.sh: plays systemd's part.

  sd_helper.py notify SOCK OUT CONTROL SECONDS
      bind an AF_UNIX datagram socket at SOCK (NOTIFY_SOCKET), write each
      message received to OUT as one JSON line; when a message holds
      READY=1, connect to the control socket CONTROL at once and record
      whether it accepted. Ends at STOPPING=1 or after SECONDS.
  sd_helper.py journal SOCK OUT SECONDS
      bind SOCK as journald's native socket, write each record (parsed
      from the native protocol) to OUT as one JSON object per line.
  sd_helper.py activate SOCK -- PROG ARGS...
      listen on SOCK (SOCK_SEQPACKET), then exec PROG with the socket at
      fd 3 and LISTEN_FDS=1, LISTEN_PID=its pid (like systemd-socket-activate,
      for hosts without it).
"""
import json, os, socket, struct, sys, time


def datagrams(path, seconds):
    """Each datagram sent to a socket bound at path, for at most seconds."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.2)
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        try:
            yield s.recv(65536)
        except socket.timeout:
            continue


def notify(path, out, control, seconds):
    with open(out, "w", buffering=1) as f:
        for raw in datagrams(path, seconds):
            data = raw.decode()
            rec = {"msg": data}
            if "READY=1" in data.split("\n"):
                c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                try:
                    c.connect(control)
                    rec["control_accepts"] = True
                except OSError as e:
                    rec["control_accepts"] = False
                    rec["error"] = str(e)
                c.close()
            f.write(json.dumps(rec) + "\n")
            if "STOPPING=1" in data.split("\n"):
                return


def parse_native(buf):
    rec, i = {}, 0
    while i < len(buf):
        nl = buf.index(b"\n", i)
        line = buf[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            rec[k.decode()] = v.decode(errors="replace")
            i = nl + 1
        else:
            (n,) = struct.unpack("<Q", buf[nl + 1:nl + 9])
            rec[line.decode()] = buf[nl + 9:nl + 9 + n].decode(errors="replace")
            i = nl + 9 + n + 1
    return rec


def journal(path, out, seconds):
    with open(out, "w", buffering=1) as f:
        for data in datagrams(path, seconds):
            f.write(json.dumps(parse_native(data)) + "\n")


def activate(path, argv):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(path)
    s.listen(16)
    if s.fileno() != 3:
        os.dup2(s.fileno(), 3)
    os.set_inheritable(3, True)
    os.environ["LISTEN_FDS"] = "1"
    os.environ["LISTEN_PID"] = str(os.getpid())
    os.execv(argv[0], argv)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "notify":
        notify(*sys.argv[2:6])
    elif cmd == "journal":
        journal(*sys.argv[2:5])
    elif cmd == "activate":
        activate(sys.argv[2], sys.argv[4:])
    else:
        sys.exit("unknown command " + cmd)
