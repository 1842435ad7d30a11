/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * afpacket: the supervisor opens the AF_PACKET backend (issue 17) for a
 * NIC; the worker only maps and runs its rings (it cannot open a packet
 * socket inside its sandbox, nor without CAP_NET_RAW).
 */
#ifndef VNIC_AFPACKET_H
#define VNIC_AFPACKET_H

#include <stddef.h>

/*
 * afp_open - an AF_PACKET socket on existing interface @ifname, in named
 * network namespace @netns ("" or NULL: ours; the socket stays in it),
 * ready for a worker: SOCK_RAW, TPACKET_V3, PACKET_VNET_HDR, PACKET_LOSS
 * (a malformed TX slot is skipped, not retried), PACKET_IGNORE_OUTGOING
 * (frames the host sends out of the interface are not the guest's),
 * the RX and TX rings of afp_ring.h, a send buffer that holds the whole
 * TX ring in flight, bound to the interface for every protocol, and
 * promiscuous (a NIC's filter must pass the guest's MAC). Non-blocking,
 * close-on-exec.
 * Returns: 0 and *ret_fd, or a negative errno with err filled and nothing
 * left open.
 */
int afp_open(const char *ifname, const char *netns, int *ret_fd, char *err, size_t errlen);

#endif
