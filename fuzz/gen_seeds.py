#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""gen_seeds.py TARGET DIR: write the seed inputs of fuzz/TARGET.c into DIR.

TARGET is vring or virtio_net_hdr; the input formats are described in the
header comments of fuzz/vring.c and fuzz/virtio_net_hdr.c, and mirrored by
the encoders below. Run from the worktree root:
    python3 fuzz/gen_seeds.py vring fuzz/corpus/vring
    python3 fuzz/gen_seeds.py virtio_net_hdr fuzz/corpus/virtio_net_hdr
The output is deterministic, so a rerun leaves git clean.
"""
import os
import struct
import sys

# ------------------------------------------------------------------ vring
# Opcodes: enum op in fuzz/vring.c.
(POP, PUSH, FLUSH, UNPOP, NOTIFY_OFF, NOTIFY_ON, SHOULD, PENDING, SET_BASE,
 WRITE, DESC, AVAIL, AVAIL_IDX, USED_EVENT, DESC_AT, CRASH, IF_WRITE) = range(17)
F_NEXT, F_WRITE, F_INDIRECT = 1, 2, 4
TWO_REGIONS, EVENT_IDX, INDIRECT, INFLIGHT, REGION1_BELOW = 1, 2, 4, 8, 16
GPA0_PAGE = 0x100  # region 0 at 1 MiB


def ring_layout(num):
    """desc, avail, used offsets from gpa0, as vring_layout lays them out."""
    desc = 0
    avail = 16 * num
    used = (avail + 6 + 2 * num + 3) & ~3
    return desc, avail, used, used + 6 + 8 * num


def vr_header(num, pages, flags=0, split=0, gap=0, base=0, layout=None):
    desc, avail, used, _ = layout or ring_layout(num)
    return struct.pack('<BBBBIIIIIH', pages - 1, flags, split, gap, GPA0_PAGE, num,
                       desc, avail, used, base)


def op(code, fmt='', *args):
    return struct.pack('<B' + fmt, code, *args)


def desc(i, addr, length, flags=0, nxt=0):
    return op(DESC, 'HIIHH', i, addr, length, flags, nxt)


def desc_at(off, addr, length, flags=0, nxt=0):
    return op(DESC_AT, 'IIIHH', off, addr, length, flags, nxt)


def pop():
    return op(POP)


def push(sel=0, length=0):
    return op(PUSH, 'BI', sel, length)


def avail(head):
    return op(AVAIL, 'H', head)


def flush():
    return op(FLUSH)


def buf_base(num):
    return (ring_layout(num)[3] + 4095) & ~4095


def simple_chains(num, count, size=256):
    """count one-descriptor chains, each popped, pushed and flushed."""
    b = buf_base(num)
    out = b''
    for k in range(count):
        i = k % num
        out += desc(i, b + 512 * (k % 16), size, F_WRITE if k & 1 else 0) + avail(i)
    for k in range(count):
        out += pop() + push(0, size if k & 1 else 0)
        if k % 4 == 3:
            out += flush() + op(SHOULD)
    return out + flush()


def vring_seeds():
    s = {}
    b8 = buf_base(8)
    s['one-chain'] = (vr_header(8, 4) + desc(0, b8, 64) + avail(0) + op(PENDING) + pop()
                      + push(0, 0) + flush() + op(SHOULD))
    s['chained-out-then-in'] = (vr_header(8, 4) + desc(0, b8, 12, F_NEXT, 1)
                                + desc(1, b8 + 64, 100, F_NEXT, 2)
                                + desc(2, b8 + 512, 1500, F_WRITE) + avail(0) + pop()
                                + push(0, 1512) + flush())
    table = b8 + 2048
    s['indirect-table'] = (vr_header(8, 4, INDIRECT) + desc(0, table, 48, F_INDIRECT)
                           + desc_at(table, b8, 12, F_NEXT, 1)
                           + desc_at(table + 16, b8 + 64, 200, F_NEXT, 2)
                           + desc_at(table + 32, b8 + 512, 1024, F_WRITE)
                           + avail(0) + pop() + push(0, 100) + flush())
    s['indirect-without-feature'] = (vr_header(8, 4) + desc(0, table, 16, F_INDIRECT)
                                     + desc_at(table, b8, 64) + avail(0) + pop())
    s['event-idx'] = (vr_header(8, 4, EVENT_IDX) + op(USED_EVENT, 'H', 0)
                      + op(NOTIFY_OFF) + simple_chains(8, 6)
                      + op(NOTIFY_ON, 'B', 1) + op(USED_EVENT, 'H', 9)
                      + simple_chains(8, 3) + op(NOTIFY_ON, 'B', 4) + op(SHOULD))
    s['wrapped-index'] = vr_header(8, 4, base=0xfffd) + op(AVAIL_IDX, 'H', 0xfffd) \
        + simple_chains(8, 8)
    s['ring-256'] = vr_header(256, 8) + simple_chains(256, 40)
    s['ring-1024'] = vr_header(1024, 16) + simple_chains(1024, 40)
    # Region 0 is 2 pages, region 1 right after it in gpa: one buffer
    # crosses the boundary (two iovecs, G8).
    s['two-regions-split-buffer'] = (vr_header(8, 4, TWO_REGIONS, split=1) + desc(0, 8192 - 100, 300)
                                     + avail(0) + pop() + push() + flush())
    s['two-regions-gap'] = (vr_header(8, 4, TWO_REGIONS, split=1, gap=3)
                            + desc(0, 8192 - 100, 300) + avail(0) + pop())
    s['two-regions-below'] = (vr_header(8, 4, TWO_REGIONS | REGION1_BELOW, split=1, gap=1)
                              + simple_chains(8, 2))
    s['rewrite-after-pop'] = (vr_header(8, 4) + desc(0, b8, 64, F_NEXT, 1) + desc(1, b8 + 64, 64)
                              + avail(0) + pop() + desc(0, 0xffffff00, 0xffffffff, F_NEXT, 0)
                              + desc(1, b8, 0) + push(0, 0) + flush() + avail(0) + pop())
    s['unpop'] = (vr_header(8, 4) + desc(0, b8, 64) + desc(1, b8 + 64, 64) + avail(0) + avail(1)
                  + pop() + pop() + op(UNPOP, 'B', 2) + pop() + push(0, 0) + pop()
                  + op(UNPOP, 'B', 1) + pop() + push(0, 0) + flush())
    s['loop'] = vr_header(8, 4) + desc(0, b8, 64, F_NEXT, 0) + avail(0) + pop()
    s['head-out-of-range'] = vr_header(8, 4) + avail(9) + pop()
    s['avail-idx-jump'] = vr_header(8, 4) + op(AVAIL_IDX, 'H', 100) + pop()
    s['raw-write-wrapping-desc'] = (vr_header(8, 4) + op(WRITE, 'IB', 0, 16)
                                    + struct.pack('<QIHH', 0xfffffffffffffff0, 0x20, 0, 0)
                                    + avail(0) + pop())
    s['set-base'] = (vr_header(8, 4) + op(SET_BASE, 'H', 5) + op(AVAIL_IDX, 'H', 5)
                     + simple_chains(8, 3))
    s['inflight-crash-recover'] = (vr_header(8, 4, INFLIGHT) + desc(0, b8, 64) + desc(1, b8 + 64, 64)
                                   + desc(2, b8 + 128, 64) + avail(0) + avail(1) + avail(2)
                                   + pop() + pop() + push(0, 0) + flush() + pop()
                                   + op(CRASH, 'H', 0) + pop() + push() + flush())
    s['inflight-hostile-region'] = (vr_header(8, 4, INFLIGHT) + desc(0, b8, 64) + avail(0) + pop()
                                    + op(CRASH, 'H', 0) + op(IF_WRITE, 'HB', 80, 16)
                                    + struct.pack('<QQ', 1, 1) + op(CRASH, 'H', 0) + pop())
    s['inflight-event-idx-256'] = vr_header(256, 8, INFLIGHT | EVENT_IDX) + simple_chains(256, 20) \
        + op(CRASH, 'H', 0)
    for n in (0, 3, 65536, 32768):
        s['invalid-size-%d' % n] = vr_header(n, 4, layout=ring_layout(8))
    s['rings-overlap'] = vr_header(8, 4, layout=(0, 64, 64, 0)) + pop()
    s['misaligned-desc'] = vr_header(8, 4, layout=(8, 256, 512, 0)) + pop()
    return s


# --------------------------------------------------------- virtio_net_hdr
# Opcodes: enum op in fuzz/virtio_net_hdr.c; header bits as its comment.
N_TX, N_TX_RUN, N_RX_BUFS, N_RX_SEND, N_RX_RUN, N_WRITE, N_PEER = range(7)
TAP, MRG, N_EVENT_IDX, DGRAM, DLOG = 1, 2, 4, 8, 16
O_CSUM, O_TSO4, O_TSO6, O_ECN, O_UFO, O_USO, O_GCSUM, O_GOFF = (1 << i for i in range(8))
NEEDS_CSUM = 1
GSO_NONE, GSO_TCPV4, GSO_UDP, GSO_TCPV6, GSO_UDP_L4, GSO_TUNNEL4, GSO_ECN = 0, 1, 3, 4, 5, 0x20, 0x80


def net_header(flags, offloads=0, qlog=6, budget=0):
    return struct.pack('<BBBB', flags, offloads, qlog, budget)


def vhdr(flags=0, gso=GSO_NONE, hdr_len=0, gso_size=0, csum_start=0, csum_offset=0, nb=0):
    return struct.pack('<BBHHHHH', flags, gso, hdr_len, gso_size, csum_start, csum_offset, nb)


def tx(hdr, flen, segs=()):
    """One TX chain: the header then flen frame bytes, split after each of
    segs (bytes per descriptor), the last descriptor taking the rest."""
    return (struct.pack('<BB', N_TX, len(segs)) + hdr + struct.pack('<I', flen)
            + struct.pack('<%dH' % len(segs), *segs))


def rx_bufs(chains):
    """chains: a list of lists of segment lengths."""
    out = struct.pack('<BB', N_RX_BUFS, len(chains) - 1)
    for c in chains:
        out += struct.pack('<B', len(c) - 1) + struct.pack('<%dH' % len(c), *c)
    return out


def rx_send(flen, hdr=None):
    return bytes([N_RX_SEND]) + (hdr or b'') + struct.pack('<I', flen)


def net_seeds():
    s = {}
    run, rxrun = bytes([N_TX_RUN]), bytes([N_RX_RUN])
    tcp4 = vhdr(NEEDS_CSUM, GSO_TCPV4, 54, 1448, 34, 16)
    s['tx-no-offload-seqpacket'] = net_header(0) + tx(vhdr(), 60) + run
    s['tx-no-offload-dgram'] = net_header(DGRAM) + tx(vhdr(), 1514) + tx(vhdr(), 60) + run
    s['tap-tx-no-offload'] = net_header(TAP) + tx(vhdr(), 60) + run
    s['tap-tx-csum-valid'] = (net_header(TAP, O_CSUM) + tx(vhdr(NEEDS_CSUM, csum_start=34,
                                                            csum_offset=16), 74) + run)
    s['tap-tx-tso4'] = net_header(TAP, O_CSUM | O_TSO4) + tx(tcp4, 3000, (12, 54)) + run
    s['tap-tx-tso6'] = (net_header(TAP, O_CSUM | O_TSO6)
                        + tx(vhdr(NEEDS_CSUM, GSO_TCPV6, 74, 1428, 54, 16), 3000) + run)
    s['tap-tx-tso4-ecn'] = (net_header(TAP, O_CSUM | O_TSO4 | O_ECN)
                            + tx(vhdr(NEEDS_CSUM, GSO_TCPV4 | GSO_ECN, 54, 1448, 34, 16), 3000)
                            + run)
    s['tap-tx-udp-ufo'] = (net_header(TAP, O_CSUM | O_UFO)
                           + tx(vhdr(NEEDS_CSUM, GSO_UDP, 42, 1472, 34, 6), 4000) + run)
    s['tap-tx-udp-l4-uso'] = (net_header(TAP, O_CSUM | O_USO)
                              + tx(vhdr(NEEDS_CSUM, GSO_UDP_L4, 42, 1400, 34, 6), 4000) + run)
    s['tap-tx-csum-beyond-frame'] = (net_header(TAP, O_CSUM)
                                     + tx(vhdr(NEEDS_CSUM, csum_start=0xfff0, csum_offset=0x20), 60)
                                     + tx(vhdr(NEEDS_CSUM, csum_start=58, csum_offset=1), 60) + run)
    s['tap-tx-gso-without-feature'] = net_header(TAP, O_CSUM) + tx(tcp4, 3000) + run
    s['tap-tx-gso-size-zero'] = (net_header(TAP, O_CSUM | O_TSO4)
                                 + tx(vhdr(NEEDS_CSUM, GSO_TCPV4, 54, 0, 34, 16), 3000) + run)
    s['tap-tx-tunnel-gso'] = (net_header(TAP, 0x3f)
                              + tx(vhdr(NEEDS_CSUM, GSO_TUNNEL4 | GSO_TCPV4, 54, 1448, 34, 16), 3000)
                              + run)
    s['tap-tx-hdr-len-beyond-frame'] = net_header(TAP) + tx(vhdr(hdr_len=200), 100) + run
    s['tap-tx-header-split'] = (net_header(TAP, O_CSUM | O_TSO4)
                                + tx(tcp4, 2000, (4, 4, 4, 100, 1)) + run)
    s['tap-tx-header-rewritten'] = (net_header(TAP, O_CSUM | O_TSO4) + tx(tcp4, 3000)
                                    + struct.pack('<BIB', N_WRITE, 0, 12)
                                    + vhdr(0xff, 0x45, 0xffff, 0, 0xffff, 0xffff, 7) + run)
    s['tx-runt'] = net_header(0) + tx(vhdr(), 0) + run
    s['tx-budget-ring-1024'] = (net_header(TAP, 0, 10, 4)
                                + b''.join(tx(vhdr(), 60 + k) for k in range(20)) + run)
    s['rx-socket-one-frame'] = net_header(0) + rx_bufs([[2048], [2048]]) + rx_send(100) + rxrun
    s['rx-dgram-two-frames'] = (net_header(DGRAM) + rx_bufs([[64, 2000], [1600]]) + rx_send(60)
                                + rx_send(1514) + rxrun)
    s['rx-mrg-num-buffers-3'] = (net_header(TAP | MRG) + rx_bufs([[1024]] * 4)
                                 + rx_send(2500, vhdr()) + rxrun)
    s['rx-mrg-socket'] = (net_header(MRG) + rx_bufs([[1500]] * 5) + rx_send(4000) + rxrun
                          + rx_bufs([[1500]] * 8) + rxrun)
    s['rx-mrg-event-idx'] = (net_header(TAP | MRG | N_EVENT_IDX) + rx_send(3000, vhdr())
                             + rxrun + rx_bufs([[512, 512]] * 3) + rxrun + rx_bufs([[4096]]) + rxrun)
    s['rx-no-mrg-too-large'] = (net_header(TAP) + rx_bufs([[1000], [1000]])
                                + rx_send(3000, vhdr()) + rx_send(500, vhdr()) + rxrun)
    s['rx-tap-gso-header'] = (net_header(TAP | MRG, O_GCSUM | O_GOFF) + rx_bufs([[4096]] * 3)
                              + rx_send(9000, vhdr(NEEDS_CSUM, GSO_TCPV4, 54, 1448, 34, 16))
                              + rxrun)
    s['rx-buffer-below-header'] = net_header(0) + rx_bufs([[8]]) + rx_send(60) + rxrun
    s['rx-no-buffers'] = net_header(MRG) + rx_send(60) + rxrun
    s['rx-full-frame'] = (net_header(TAP | MRG) + rx_bufs([[16384]] * 5)
                          + rx_send(65550, vhdr()) + rxrun)
    s['tx-rx-both'] = (net_header(TAP | MRG, O_CSUM | O_TSO4 | O_GCSUM) + rx_bufs([[2048]] * 4)
                       + tx(tcp4, 3000) + rx_send(1000, vhdr()) + run + rxrun)
    # Live migration: every page the engine writes must be in the log.
    s['dirty-log-rx-tx'] = (net_header(TAP | MRG | DLOG, O_CSUM | O_GCSUM) + rx_bufs([[1024]] * 6)
                            + rx_send(3000, vhdr()) + rx_send(60, vhdr()) + tx(vhdr(), 1514)
                            + run + rxrun)
    s['dirty-log-socket-event-idx'] = (net_header(N_EVENT_IDX | DLOG) + rx_bufs([[2048], [64, 2000]])
                                       + rx_send(1500) + rxrun + tx(vhdr(), 60) + run)
    # The backend's far end goes away; the engine's send buffer fills.
    gone, tiny = bytes([N_PEER, 0]), bytes([N_PEER, 1])
    s['backend-gone'] = (net_header(0) + rx_bufs([[2048]]) + gone + tx(vhdr(), 60) + run
                         + rxrun)
    s['backend-gone-tap'] = net_header(TAP) + gone + tx(vhdr(), 60) + run
    s['backend-send-buffer-full'] = (net_header(TAP, 0, 8) + tiny
                                     + b''.join(tx(vhdr(), 60000) for _ in range(12)) + run)
    # More guest errors than a log window lets through.
    s['guest-errors-rate-limited'] = (net_header(TAP, O_CSUM)
                                      + b''.join(tx(vhdr(NEEDS_CSUM, csum_start=0xfff0,
                                                         csum_offset=0x20), 60)
                                                 for _ in range(40)) + run)
    return s


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ('vring', 'virtio_net_hdr'):
        sys.exit(__doc__)
    seeds = vring_seeds() if sys.argv[1] == 'vring' else net_seeds()
    os.makedirs(sys.argv[2], exist_ok=True)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(sys.argv[2], name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
