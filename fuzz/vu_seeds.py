#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Write the hand-made seeds of the vhost_user fuzz target.

Usage: fuzz/vu_seeds.py DIR   (the committed ones: fuzz/corpus/vhost_user)

Each seed is a list of records in the format of fuzz/vhost_user.c's
header comment (u8 nfds, u8 fdkind, u32 request, u32 flags, u32 size, then
the payload), the same that tools/fuzz_record.py writes for real QEMU and
DPDK sessions. One file per request of supervisor/vhost_user_msg.c's
table (after the handshake that makes it acceptable), a few malformed
ones, and whole sessions: QEMU's start-up order for 2 rings, a migration
(LOG_ALL, SET_LOG_BASE, logged rings), a restart, a call fd swap, a
crash of the simulated worker and a reconnect.
"""
import os
import struct
import sys

REQ = {
    'GET_FEATURES': 1, 'SET_FEATURES': 2, 'SET_OWNER': 3, 'RESET_OWNER': 4,
    'SET_MEM_TABLE': 5, 'SET_LOG_BASE': 6, 'SET_LOG_FD': 7, 'SET_VRING_NUM': 8,
    'SET_VRING_ADDR': 9, 'SET_VRING_BASE': 10, 'GET_VRING_BASE': 11,
    'SET_VRING_KICK': 12, 'SET_VRING_CALL': 13, 'SET_VRING_ERR': 14,
    'GET_PROTOCOL_FEATURES': 15, 'SET_PROTOCOL_FEATURES': 16,
    'GET_QUEUE_NUM': 17, 'SET_VRING_ENABLE': 18, 'SEND_RARP': 19,
    'NET_SET_MTU': 20, 'SET_BACKEND_REQ_FD': 21, 'IOTLB_MSG': 22,
    'GET_CONFIG': 24, 'SET_CONFIG': 25, 'GET_INFLIGHT_FD': 31,
    'SET_INFLIGHT_FD': 32, 'RESET_DEVICE': 34, 'GET_MAX_MEM_SLOTS': 36,
    'ADD_MEM_REG': 37, 'REM_MEM_REG': 38, 'SET_STATUS': 39, 'GET_STATUS': 40,
}
# The harness's own requests (fuzz/vhost_user.c).
CRASH = 0xffffffff
RECONNECT = 0xfffffffe

VERSION = 1
NEED_REPLY = 1 << 3

# virtio-net features QEMU acks with a tap-like back end.
F = {'CSUM': 0, 'GUEST_CSUM': 1, 'MTU': 3, 'MAC': 5, 'GUEST_TSO4': 7,
     'GUEST_TSO6': 8, 'GUEST_UFO': 10, 'HOST_TSO4': 11, 'HOST_TSO6': 12,
     'HOST_UFO': 14, 'MRG_RXBUF': 15, 'LOG_ALL': 26, 'INDIRECT_DESC': 28,
     'EVENT_IDX': 29, 'PROTOCOL_FEATURES': 30, 'VERSION_1': 32}
FEATURES = sum(1 << F[k] for k in ('VERSION_1', 'EVENT_IDX', 'INDIRECT_DESC',
                                   'MRG_RXBUF', 'MAC', 'MTU', 'CSUM',
                                   'GUEST_CSUM', 'PROTOCOL_FEATURES'))
PROTO = sum(1 << b for b in (0, 1, 2, 3, 4, 12, 15, 16))  # MQ LOG_SHMFD RARP
# REPLY_ACK NET_MTU INFLIGHT_SHMFD CONFIGURE_MEM_SLOTS STATUS

# Guest memory: one region of 1 MiB at gpa 0, mapped by the front end at
# UVA; ring i at 0x4000 * i (desc, avail +0x1000, used +0x2000).
MEM = 1 << 20
UVA = 0x7f0000000000
QS = 256


def rec(req, payload=b'', flags=VERSION, nfds=0, fdkind=0, size=None):
    if size is None:
        size = len(payload)
    return struct.pack('<BBIII', nfds, fdkind, req, flags, size) + payload


def u64(req, v, **kw):
    return rec(REQ[req], struct.pack('<Q', v), **kw)


def get(req):
    return rec(REQ[req])


def region(gpa=0, size=MEM, uva=UVA, off=0):
    return struct.pack('<QQQQ', gpa, size, uva, off)


def mem_table(regions, fdkind=0):
    body = struct.pack('<II', len(regions), 0) + b''.join(regions)
    return rec(REQ['SET_MEM_TABLE'], body, nfds=len(regions), fdkind=fdkind)


def state(req, idx, num, **kw):
    return rec(REQ[req], struct.pack('<II', idx, num), **kw)


def vring_addr(idx, log=False):
    base = UVA + 0x4000 * idx
    used_gpa = 0x4000 * idx + 0x2000
    return rec(REQ['SET_VRING_ADDR'],
               struct.pack('<IIQQQQ', idx, 1 if log else 0, base, base + 0x2000,
                           base + 0x1000, used_gpa if log else 0))


def vring_fd(req, idx, nofd=False, fdkind=0):
    v = idx | (1 << 8 if nofd else 0)
    return u64(req, v, nfds=0 if nofd else 1, fdkind=fdkind)


def log_base(size=4096, off=0, fdkind=0):
    return rec(REQ['SET_LOG_BASE'], struct.pack('<QQ', size, off), nfds=1,
               fdkind=fdkind)


# GET/SET_INFLIGHT_FD (issue 16): u64 mmap_size, u64 mmap_offset, u16
# num_queues, u16 queue_size, padded to 24 bytes as QEMU sends it. A
# region for 2 rings of QS is 2 pages.
INFLIGHT_SIZE = 8192


def inflight(req, size, nq=2, qs=QS):
    return rec(REQ[req], struct.pack('<QQHHI', size, 0, nq, qs, 0),
               nfds=1 if req == 'SET_INFLIGHT_FD' else 0)


def harness(req, flags=0):
    return rec(req, flags=flags)


HANDSHAKE = [
    get('GET_FEATURES'),
    get('GET_PROTOCOL_FEATURES'),
    u64('SET_PROTOCOL_FEATURES', PROTO),
    rec(REQ['SET_OWNER']),
    u64('SET_FEATURES', FEATURES),
]


def rings(log=False):
    out = []
    for i in range(2):
        out += [state('SET_VRING_NUM', i, QS), state('SET_VRING_BASE', i, 0),
                vring_addr(i, log), vring_fd('SET_VRING_KICK', i),
                vring_fd('SET_VRING_CALL', i)]
    out += [state('SET_VRING_ENABLE', i, 1) for i in range(2)]
    return out


# QEMU's order (vhost_dev_start): features, memory, then per ring num,
# base, addr, kick, call; enable after.
START = HANDSHAKE + [get('GET_QUEUE_NUM'), get('GET_MAX_MEM_SLOTS'),
                     vring_fd('SET_VRING_CALL', 0), vring_fd('SET_VRING_CALL', 1),
                     u64('NET_SET_MTU', 1500), mem_table([region()])] + rings()
STOP = [state('GET_VRING_BASE', 0, 0), state('GET_VRING_BASE', 1, 0)]
MIGRATE = [log_base(), u64('SET_FEATURES', FEATURES | 1 << F['LOG_ALL']),
           vring_addr(0, log=True), vring_addr(1, log=True)]

SINGLE = {
    'get-features': [get('GET_FEATURES')],
    'set-features': [u64('SET_FEATURES', FEATURES)],
    'set-owner': [rec(REQ['SET_OWNER'])],
    'reset-owner': HANDSHAKE + [rec(REQ['RESET_OWNER'])],
    'set-mem-table-1-region': HANDSHAKE + [mem_table([region()])],
    'set-mem-table-2-regions': HANDSHAKE + [mem_table(
        [region(0, MEM // 2), region(MEM, MEM // 2, UVA + MEM, 0)])],
    'set-mem-table-8-regions': HANDSHAKE + [mem_table(
        [region(i * 0x10000, 0x10000, UVA + i * 0x10000, 0) for i in range(8)])],
    'set-mem-table-unsealed': HANDSHAKE + [mem_table([region()], fdkind=3)],
    'set-mem-table-pipe': HANDSHAKE + [mem_table([region()], fdkind=1)],
    'set-mem-table-short-memfd': HANDSHAKE + [mem_table([region()], fdkind=8)],
    'set-mem-table-readonly-memfd': HANDSHAKE + [mem_table([region()], fdkind=9)],
    'set-mem-table-overlap': HANDSHAKE + [mem_table([region(), region(0x1000)])],
    'set-log-base': HANDSHAKE + [mem_table([region()]), log_base()],
    'set-vring-num': HANDSHAKE + [state('SET_VRING_NUM', 0, QS)],
    'set-vring-addr': HANDSHAKE + [mem_table([region()]), vring_addr(0)],
    'set-vring-base': HANDSHAKE + [state('SET_VRING_BASE', 1, 7)],
    'get-vring-base': HANDSHAKE + [state('GET_VRING_BASE', 0, 0)],
    'set-vring-kick': HANDSHAKE + [vring_fd('SET_VRING_KICK', 0)],
    'set-vring-kick-nofd': HANDSHAKE + [vring_fd('SET_VRING_KICK', 0, nofd=True)],
    'set-vring-kick-semaphore': HANDSHAKE + [vring_fd('SET_VRING_KICK', 0, fdkind=7)],
    'set-vring-call': HANDSHAKE + [vring_fd('SET_VRING_CALL', 1)],
    'set-vring-err': HANDSHAKE + [vring_fd('SET_VRING_ERR', 0)],
    'get-protocol-features': [get('GET_PROTOCOL_FEATURES')],
    'set-protocol-features': HANDSHAKE[:2] + [u64('SET_PROTOCOL_FEATURES', PROTO)],
    'get-queue-num': HANDSHAKE + [get('GET_QUEUE_NUM')],
    'set-vring-enable': HANDSHAKE + [state('SET_VRING_ENABLE', 0, 1)],
    'send-rarp': HANDSHAKE + [rec(REQ['SEND_RARP'], bytes([0x52, 0x54, 0, 0x12, 0x34, 0x56,
                                                           0, 0]))],
    'net-set-mtu': HANDSHAKE + [u64('NET_SET_MTU', 9000)],
    'get-max-mem-slots': HANDSHAKE + [get('GET_MAX_MEM_SLOTS')],
    'add-mem-reg': HANDSHAKE + [rec(REQ['ADD_MEM_REG'], struct.pack('<Q', 0) + region(),
                                    nfds=1)],
    'rem-mem-reg': HANDSHAKE + [
        rec(REQ['ADD_MEM_REG'], struct.pack('<Q', 0) + region(), nfds=1),
        rec(REQ['REM_MEM_REG'], struct.pack('<Q', 0) + region(), nfds=1)],
    'get-inflight-fd': HANDSHAKE + [inflight('GET_INFLIGHT_FD', 0)],
    'set-inflight-fd': HANDSHAKE + [inflight('SET_INFLIGHT_FD', INFLIGHT_SIZE)],
    'get-inflight-fd-flood': HANDSHAKE + [inflight('GET_INFLIGHT_FD', 0)] * 64,
    'set-status': HANDSHAKE + [u64('SET_STATUS', 0xf)],
    'get-status': HANDSHAKE + [u64('SET_STATUS', 0x7), get('GET_STATUS')],
    # Requests vnicd does not take: each gets the failure answer or a close.
    'set-log-fd-unsupported': HANDSHAKE + [u64('SET_LOG_FD', 0, nfds=1)],
    'set-backend-req-fd-unsupported': HANDSHAKE + [rec(REQ['SET_BACKEND_REQ_FD'], nfds=1)],
    'get-config-unsupported': HANDSHAKE + [rec(REQ['GET_CONFIG'], bytes(12 + 8))],
    'iotlb-msg-unsupported': HANDSHAKE + [rec(REQ['IOTLB_MSG'], bytes(40))],
    'request-99-unknown': [rec(99, flags=VERSION | NEED_REPLY)],
    # Framing and the table's checks.
    'bad-version': [rec(REQ['GET_FEATURES'], flags=2)],
    'reply-flag-from-front-end': [rec(REQ['GET_FEATURES'], flags=VERSION | 4)],
    'size-beyond-max': [rec(REQ['SET_FEATURES'], bytes(8), size=0x10000)],
    'size-wrong-for-row': HANDSHAKE + [rec(REQ['SET_VRING_NUM'], bytes(4))],
    'fds-with-get-features': [rec(REQ['GET_FEATURES'], nfds=3)],
    'set-mem-table-more-fds-than-regions': HANDSHAKE + [
        rec(REQ['SET_MEM_TABLE'], struct.pack('<II', 1, 0) + region(), nfds=8)],
    'truncated-payload': HANDSHAKE + [rec(REQ['SET_VRING_ADDR'], bytes(10), size=40)],
    'not-negotiated-get-queue-num': [get('GET_QUEUE_NUM')],
    'need-reply-set-owner': [rec(REQ['SET_OWNER'], flags=VERSION | NEED_REPLY)],
}

SESSIONS = {
    'session-qemu-start-2-rings': START,
    'session-qemu-start-stop': START + STOP,
    # QEMU's vhost_migration_log(): the log first, then LOG_ALL, then
    # logged rings; a larger log as memory grows; the source stops.
    'session-qemu-migration': START + MIGRATE + [log_base(8192)] + STOP,
    # Migration cancelled: LOG_ALL off, rings unlogged, running on.
    'session-qemu-migration-cancel': START + MIGRATE + [
        u64('SET_FEATURES', FEATURES), vring_addr(0), vring_addr(1)] + STOP,
    'session-qemu-migration-log-first': HANDSHAKE[:4] + [
        u64('SET_FEATURES', FEATURES | 1 << F['LOG_ALL']),
        mem_table([region()]), log_base()] + rings(log=True) + STOP,
    'session-new-mem-table-restart': START + [
        mem_table([region(0, MEM * 2, UVA, 0)])] + STOP,
    'session-call-swap-running': START + [vring_fd('SET_VRING_CALL', 0),
                                          vring_fd('SET_VRING_CALL', 1)] + STOP,
    'session-mtu-restart': START + [u64('NET_SET_MTU', 4000)] + STOP,
    'session-worker-crash': START + [harness(CRASH, 0)] + STOP,
    'session-worker-killed': START + [harness(CRASH, 1)] + STOP,
    'session-reconnect': START + [harness(RECONNECT)] + START + STOP,
    'session-crash-while-logging': START + MIGRATE + [harness(CRASH, 2), log_base(8192)] + STOP,
    'session-crash-twice-then-call-swap': START + [harness(CRASH, 3), harness(CRASH, 0),
                                                   vring_fd('SET_VRING_CALL', 0)] + STOP,
    'session-reconnect-while-running': START + [harness(RECONNECT)] + HANDSHAKE,
    'session-reply-ack': HANDSHAKE + [
        rec(REQ['SET_MEM_TABLE'], struct.pack('<II', 1, 0) + region(), nfds=1,
            flags=VERSION | NEED_REPLY)] + rings() + STOP,
    'session-add-mem-reg-start': HANDSHAKE + [
        rec(REQ['ADD_MEM_REG'], struct.pack('<Q', 0) + region(), nfds=1)] + rings() + STOP,
    'session-reset-owner-running': START + [rec(REQ['RESET_OWNER'])],
    # A front end that keeps its inflight region (cloud-hypervisor): made,
    # set, a crash, a reconnect, set again before the rings.
    'session-inflight-kept': HANDSHAKE + [
        inflight('GET_INFLIGHT_FD', 0), inflight('SET_INFLIGHT_FD', INFLIGHT_SIZE)] +
        START[len(HANDSHAKE):] + [harness(CRASH, 0), harness(RECONNECT)] + HANDSHAKE + [
        inflight('SET_INFLIGHT_FD', INFLIGHT_SIZE)] + START[len(HANDSHAKE):] + STOP,
}


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: vu_seeds.py DIR')
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, recs in list(SINGLE.items()) + list(SESSIONS.items()):
        with open(os.path.join(out, name), 'wb') as f:
            f.write(b''.join(recs))


if __name__ == '__main__':
    main()
