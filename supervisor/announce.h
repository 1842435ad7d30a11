/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * announce: after a live migration the destination tells the host's
 * bridge (and any switch behind it) where the guest now is, by a RARP
 * broadcast from the guest's MAC, the frame QEMU's own device sends
 * (issue 14). vhost-user's SEND_RARP and the control channel's Announce
 * both end here, for every kind of backend.
 */
#ifndef VNIC_ANNOUNCE_H
#define VNIC_ANNOUNCE_H

#include <stddef.h>
#include <stdint.h>

#define ANNOUNCE_FRAME_LEN 60 /* the Ethernet minimum, as QEMU pads it */

/*
 * announce_send - send a RARP "reverse request" for @mac, from @mac to
 * the broadcast address (ANNOUNCE_FRAME_LEN bytes), out of a NIC's backend.
 * @fd >= 0: the backend's own descriptor, a tap (@hdr_len: the bytes of
 *   virtio-net header it carries, all zero: no offload) or a socket of
 *   plain frames (@hdr_len 0); one write, never blocking.
 * @fd < 0: the AF_PACKET backend, whose socket's TX ring belongs to the
 *   worker: a packet socket of its own on interface @ifname in named
 *   network namespace @netns ("" or NULL: ours), closed after the send.
 * Returns: 0, or a negative errno with err filled.
 */
int announce_send(int fd, size_t hdr_len, const char *ifname, const char *netns,
		  const uint8_t mac[6], char *err, size_t errlen);

#endif
