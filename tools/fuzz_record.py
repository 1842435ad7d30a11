#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""fuzz_record.py: seed corpora for the fuzz targets, taken from real sessions.

The fuzz targets read their input as records (the header comments of
fuzz/vhost_user.c, fuzz/vmm_proto.c and fuzz/worker_chan.c):
  vhost_user              record := u8 nfds, u8 fdkind, 12-byte vhost-user
                          header (u32 request, flags, size, LE), payload
  vmm_proto, worker_chan  record := u8 nfds, u8 fdkind, u16 len (LE),
                          len bytes (one SOCK_SEQPACKET frame as vnicd reads it)
Records follow each other until the input ends.  A recorded message is
written with fdkind 0 ("the natural fds for this message") and nfds the
number of fds it really carried, so a recorded session replays as it was.

Modes:
  vhost-user --listen SOCK --connect SOCK --out DIR [--prefix P] [--reverse]
      A relay between a vhost-user front end (QEMU, DPDK virtio-user) and
      vnicd's endpoint.  Without --reverse the front end connects to
      --listen and the relay connects to vnicd's --connect socket (vnicd's
      "--server" endpoint); with --reverse vnicd connects to --listen and
      the relay connects to the front end's socket (QEMU's server=on, DPDK's
      server=1; vnicd's "--client" endpoint).  Every message goes through
      unchanged, fds included; every front end -> back end message is
      written as DIR/P<NNN>-<REQUEST> and appended to DIR/P<session>.
  seqpacket --listen SOCK --connect SOCK --out DIR [--prefix P]
      The same for vnicd's control socket (SOCK_SEQPACKET): clients
      (libvnic, vnicctl) connect to --listen, the relay to vnicd's socket;
      every client -> vnicd frame becomes DIR/P<NNN>-<Request body>.
  strace-worker FILE --out DIR [--prefix P]
      What vnicd-worker sent to its supervisor, from
      `strace -f -e trace=sendmsg,execve -xx -s 65536 -o FILE vnicd ...`:
      every sendmsg on the worker's control fd 3 becomes a record.
  dump [--vu | --dgram] FILE...
      Print the records of FILE (the format is guessed from the path when
      neither option is given: "vhost_user" in it means --vu).

A relay serves every connection (side by side) until --seconds pass or it
is killed (SIGINT, SIGTERM); each connection's session file is named
session, session-2, ... in the order they came.  Python 3 standard library
only."""
import argparse
import os
import re
import select
import signal
import socket
import struct
import sys
import threading
import time

MAX_FDS = 253          # SCM_RIGHTS limit per message (SCM_MAX_FD)
REC_MAX_FDS = 8        # a vhost-user record's nfds: above 8 is taken mod 9 by the targets
VMM_REC_MAX_FDS = 48   # a control-socket record's (fuzz_vmm_proto: mod 49)
DGRAM_MAX = 1 << 20    # larger than any frame vnicd accepts

VU_REQUESTS = {
    1: "GET_FEATURES", 2: "SET_FEATURES", 3: "SET_OWNER", 4: "RESET_OWNER",
    5: "SET_MEM_TABLE", 6: "SET_LOG_BASE", 7: "SET_LOG_FD", 8: "SET_VRING_NUM",
    9: "SET_VRING_ADDR", 10: "SET_VRING_BASE", 11: "GET_VRING_BASE",
    12: "SET_VRING_KICK", 13: "SET_VRING_CALL", 14: "SET_VRING_ERR",
    15: "GET_PROTOCOL_FEATURES", 16: "SET_PROTOCOL_FEATURES", 17: "GET_QUEUE_NUM",
    18: "SET_VRING_ENABLE", 19: "SEND_RARP", 20: "NET_SET_MTU",
    21: "SET_BACKEND_REQ_FD", 22: "IOTLB_MSG", 24: "GET_CONFIG", 25: "SET_CONFIG",
    31: "GET_INFLIGHT_FD", 32: "SET_INFLIGHT_FD", 34: "RESET_DEVICE",
    36: "GET_MAX_MEM_SLOTS", 37: "ADD_MEM_REG", 38: "REM_MEM_REG", 39: "SET_STATUS",
    40: "GET_STATUS",
}
# proto/vmm.proto: Request's body oneof (VmmMessage field 1 is Request).
VMM_BODIES = {10: "Hello", 11: "AddNic", 12: "RemoveNic", 13: "GetStatus",
              14: "SetPolicy", 15: "AddVhostUser", 16: "RemoveEndpoint",
              17: "SetDirtyLog", 20: "SetLogLevel"}
VMM_ENVELOPE = {1: "Request", 2: "Reply", 3: "Event"}
# proto/worker.proto: WorkerMessage's oneof.
WORKER_MSGS = {1: "Config", 2: "Start", 3: "Stop", 4: "SetPolicy", 5: "SetDirtyLog",
               6: "SetCallFd", 10: "Ready", 11: "Stopped", 12: "QueueBroken",
               13: "Log", 14: "Error", 15: "PolicySet", 16: "DirtyLogSet",
               17: "CallFdSet", 20: "FaultHit", 50: "RegionFds"}


def log(msg):
    print("fuzz_record: %s" % msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------ protobuf peek

def _varint(b, i):
    v, shift = 0, 0
    while i < len(b) and shift < 64:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        if not c & 0x80:
            return v, i
        shift += 7
    raise ValueError("truncated varint")


def pb_fields(b):
    """(field number, wire type, value) of a packed protobuf message: value
    is an int for varints and fixed, bytes for length-delimited fields."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = bytes(b[i:i + n]), i + n
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def frame_kind(frame, worker=False):
    """The message kind of a wire frame (u32 BE length + packed message):
    the Request body's name on the VMM channel, the WorkerMessage arm's on
    the worker channel; "msg" when it does not parse."""
    try:
        body = frame[4:4 + struct.unpack(">I", frame[:4])[0]]
        for num, wt, v in pb_fields(body):
            if worker:
                if num in WORKER_MSGS:
                    return WORKER_MSGS[num]
            elif num == 1 and wt == 2:
                for n2, _, _ in pb_fields(v):
                    if n2 in VMM_BODIES:
                        return VMM_BODIES[n2]
                return "Request"
            elif num in VMM_ENVELOPE:
                return VMM_ENVELOPE[num]
    except (ValueError, struct.error):
        pass
    return "msg"


# ------------------------------------------------------------ records

def vu_record(msg, nfds):
    return bytes([min(nfds, REC_MAX_FDS), 0]) + msg


def dgram_record(frame, nfds):
    if len(frame) > 0xffff:
        log("a %d-byte frame is cut to 65535 bytes (a record's u16 length)" % len(frame))
        frame = frame[:0xffff]
    return bytes([min(nfds, VMM_REC_MAX_FDS), 0]) + struct.pack("<H", len(frame)) + frame


class Recorder:
    """Writes DIR/<prefix><NNN>-<name> per message and appends every record
    to the connection's DIR/<prefix>session[-K]."""

    def __init__(self, outdir, prefix):
        self.dir, self.prefix = outdir, prefix
        os.makedirs(outdir, exist_ok=True)
        self.n = 0
        self.sessions = 0
        # Files already there (an earlier session's) count as recorded.
        self.seen = set()
        for fn in os.listdir(outdir):
            path = os.path.join(outdir, fn)
            if "session" not in fn and os.path.isfile(path):
                with open(path, "rb") as f:
                    self.seen.add(f.read())
        self.lock = threading.Lock()

    def new_session(self):
        with self.lock:
            self.sessions += 1
            name = "session" if self.sessions == 1 else "session-%d" % self.sessions
            return open(os.path.join(self.dir, self.prefix + name), "wb")

    def add(self, session, name, record, nfds):
        if nfds > record[0]:
            log("%s carried %d fds, recorded as %d" % (name, nfds, record[0]))
        with self.lock:
            session.write(record)
            session.flush()
            self.n += 1
            # A message already recorded byte for byte (the same SET_VRING_CALL
            # again, the next GetStatus) stays in the session only: a second
            # copy adds nothing to a corpus.
            if record in self.seen:
                return
            self.seen.add(record)
            fn = "%s%03d-%s" % (self.prefix, self.n, name)
            with open(os.path.join(self.dir, fn), "wb") as f:
                f.write(record)
        log("%s (%d bytes, %d fds)" % (fn, len(record), nfds))


# ------------------------------------------------------------ relays

def recv_exact(sock, n, fds):
    """n bytes from a stream socket, collecting the fds that come with them
    into fds; None at end of stream."""
    buf = b""
    while len(buf) < n:
        data, got, flags, _ = socket.recv_fds(sock, n - len(buf), MAX_FDS)
        fds.extend(got)
        if flags & socket.MSG_CTRUNC:
            raise OSError("fds truncated")
        if not data:
            return None
        buf += data
    return buf


def vu_pump(src, dst, rec, session, record_it):
    """Relays vhost-user messages src -> dst one at a time (header, then the
    size its header gives): reading exactly one message per step keeps each
    message's fds with it."""
    while True:
        fds = []
        try:
            hdr = recv_exact(src, 12, fds)
            if hdr is None:
                return
            req, _, size = struct.unpack("<III", hdr)
            body = recv_exact(src, size, fds) if size else b""
            if body is None:
                return
            msg = hdr + body
            socket.send_fds(dst, [msg], fds) if fds else dst.sendall(msg)
        finally:
            # Passed on (or not, at an error): the relay's copies go.
            for fd in fds:
                os.close(fd)
        if record_it:
            rec.add(session, VU_REQUESTS.get(req, "REQUEST_%d" % req),
                    vu_record(msg, len(fds)), len(fds))


def dgram_pump(src, dst, rec, session, record_it):
    """Relays SOCK_SEQPACKET messages src -> dst, one datagram each."""
    while True:
        data, fds, flags, _ = socket.recv_fds(src, DGRAM_MAX, MAX_FDS)
        # An empty datagram reads as the end of the connection: no client
        # of vnicd sends one.
        try:
            if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
                raise OSError("datagram or its fds truncated")
            if not data and not fds:
                return
            socket.send_fds(dst, [data], fds) if fds else dst.send(data)
        finally:
            for fd in fds:
                os.close(fd)
        if record_it:
            rec.add(session, frame_kind(data), dgram_record(data, len(fds)), len(fds))


def relay_one(conn, peer_path, stype, pump, rec, reverse):
    """One connection: conn accepted on --listen, the relay connects to
    peer_path; the front end is conn unless reverse."""
    peer = socket.socket(socket.AF_UNIX, stype)
    try:
        peer.connect(peer_path)
    except OSError as e:
        log("connect %s: %s" % (peer_path, e))
        conn.close()
        peer.close()
        return
    front, back = (peer, conn) if reverse else (conn, peer)
    session = rec.new_session()

    def run(src, dst, record_it):
        try:
            pump(src, dst, rec, session, record_it)
        except OSError as e:
            log("relay: %s" % e)
        # One side is gone: end the other direction too.
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    t = [threading.Thread(target=run, args=(front, back, True), daemon=True),
         threading.Thread(target=run, args=(back, front, False), daemon=True)]
    for th in t:
        th.start()
    for th in t:
        th.join()
    session.close()
    conn.close()
    peer.close()
    log("connection closed")


def serve(args, stype, pump):
    rec = Recorder(args.out, args.prefix)
    if os.path.exists(args.listen):
        os.unlink(args.listen)
    lsock = socket.socket(socket.AF_UNIX, stype)
    lsock.bind(args.listen)
    lsock.listen(4)
    end = time.monotonic() + args.seconds if args.seconds else None
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    log("listening on %s, relaying to %s" % (args.listen, args.connect))
    try:
        while end is None or time.monotonic() < end:
            r, _, _ = select.select([lsock], [], [], 0.2)
            if not r:
                continue
            conn, _ = lsock.accept()
            # Connections are served side by side (vnicctl may query vnicd
            # while a VMM's connection is open) and recorded separately.
            threading.Thread(target=relay_one, daemon=True,
                             args=(conn, args.connect, stype, pump, rec, args.reverse)).start()
    except KeyboardInterrupt:
        pass
    finally:
        lsock.close()
        os.unlink(args.listen)


# ------------------------------------------------------------ strace

SENDMSG = re.compile(r'^(\d+)\s+sendmsg\((\d+), \{.*?msg_iov=\[(.*?)\], msg_iovlen')
EXECVE = re.compile(r'^(\d+)\s+execve\("([^"]*)"')
IOV = re.compile(r'iov_base="((?:\\x[0-9a-f]{2})*)", iov_len=(\d+)')
RESUMED = re.compile(r'^(\d+)\s+<\.\.\. (\w+) resumed>(.*)$')


def strace_frames(path, fd=3):
    """[(pid, bytes)] of every sendmsg on fd by a process that exec'd
    vnicd-worker (by any process but the first when the trace has no
    execve lines), with its return value not an error."""
    workers, first, frames, pending = set(), None, [], {}
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"^(\d+)\s", line)
            if not m:
                continue
            pid = int(m.group(1))
            first = pid if first is None else first
            if line.endswith("<unfinished ...>"):
                pending[pid] = line[:-len("<unfinished ...>")]
                continue
            r = RESUMED.match(line)
            if r and pid in pending:
                line = pending.pop(pid) + r.group(3)
            e = EXECVE.match(line)
            if e and e.group(2).endswith("vnicd-worker"):
                workers.add(pid)
            s = SENDMSG.match(line)
            if not s or int(s.group(2)) != fd or re.search(r"= -1 ", line):
                continue
            data = b"".join(bytes.fromhex(x.replace("\\x", ""))
                            for x, _ in IOV.findall(s.group(3)))
            frames.append((pid, data))
    if workers:
        return [(p, d) for p, d in frames if p in workers]
    return [(p, d) for p, d in frames if p != first]


def strace_worker(args):
    rec = Recorder(args.out, args.prefix)
    frames = strace_frames(args.file)
    if not frames:
        log("no sendmsg on fd 3 by a vnicd-worker in %s" % args.file)
        return 1
    sessions = {}
    for pid, data in frames:
        if pid not in sessions:
            sessions[pid] = rec.new_session()
        rec.add(sessions[pid], frame_kind(data, worker=True), dgram_record(data, 0), 0)
    for s in sessions.values():
        s.close()
    return 0


# ------------------------------------------------------------ dump

def dump_vu(b):
    i = 0
    while i + 2 <= len(b):
        nfds, kind = b[i], b[i + 1]
        hdr = b[i + 2:i + 14]
        if len(hdr) < 12:
            print("  truncated header (%d bytes)" % len(hdr))
            return
        req, flags, size = struct.unpack("<III", hdr)
        payload = b[i + 14:i + 14 + size]
        print("%-22s flags 0x%x size %d%s nfds %d fdkind %d  %s" % (
            VU_REQUESTS.get(req, "request %d" % req), flags, size,
            "" if len(payload) == size else " (only %d left)" % len(payload),
            nfds, kind, payload[:48].hex()))
        i += 14 + len(payload)


def dump_dgram(b, worker):
    i = 0
    while i + 4 <= len(b):
        nfds, kind = b[i], b[i + 1]
        n = struct.unpack("<H", b[i + 2:i + 4])[0]
        frame = b[i + 4:i + 4 + n]
        print("%-16s len %d%s nfds %d fdkind %d  %s" % (
            frame_kind(frame, worker), n, "" if len(frame) == n else
            " (only %d left)" % len(frame), nfds, kind, frame[:48].hex()))
        i += 4 + len(frame)
    if i < len(b):
        print("  %d bytes left over" % (len(b) - i))


def dump(args):
    for path in args.files:
        with open(path, "rb") as f:
            b = f.read()
        print("%s: %d bytes" % (path, len(b)))
        vu = args.vu or (not args.dgram and "vhost_user" in path)
        if vu:
            dump_vu(b)
        else:
            dump_dgram(b, "worker" in path)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("vhost-user", "seqpacket"):
        s = sub.add_parser(name)
        s.add_argument("--listen", required=True, help="socket the relay listens on")
        s.add_argument("--connect", required=True, help="socket the relay connects to")
        s.add_argument("--out", required=True, help="directory of the records")
        s.add_argument("--prefix", default="", help="prefix of the file names")
        s.add_argument("--seconds", type=float, default=0, help="stop after this long")
        s.add_argument("--reverse", action="store_true",
                       help="the front end is on --connect (vhost-user client mode)")
    s = sub.add_parser("strace-worker")
    s.add_argument("file")
    s.add_argument("--out", required=True)
    s.add_argument("--prefix", default="worker-")
    s = sub.add_parser("dump")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--vu", action="store_true", help="vhost-user records")
    g.add_argument("--dgram", action="store_true", help="datagram records")
    s.add_argument("files", nargs="+")
    args = p.parse_args()
    if args.mode == "vhost-user":
        return serve(args, socket.SOCK_STREAM, vu_pump)
    if args.mode == "seqpacket":
        args.reverse = False
        return serve(args, socket.SOCK_SEQPACKET, dgram_pump)
    if args.mode == "strace-worker":
        return strace_worker(args)
    return dump(args)


if __name__ == "__main__":
    sys.exit(main() or 0)
