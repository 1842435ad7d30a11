/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * afp_ring: the AF_PACKET backend's rings (issue 17), one definition for
 * the supervisor, which makes the socket and its rings, and the worker,
 * which maps and runs them.
 *
 * Sizes (bounded, fixed; 8 MiB of kernel memory per NIC in all):
 *  - RX, TPACKET_V3: AFP_RX_BLOCKS blocks of AFP_RX_BLOCK_SIZE (256 KiB
 *    each, 4 MiB): a block holds many frames and is handed to the worker
 *    whole when full or after AFP_RX_RETIRE_MS; a frame larger than a
 *    block (less its headers) is truncated by the kernel and dropped by
 *    the worker.
 *  - TX, TPACKET_V3 (fixed-size slots): AFP_TX_FRAMES slots of
 *    AFP_TX_FRAME_SIZE (16 KiB: the virtio-net header and an Ethernet
 *    frame of up to AFP_TX_MAX_FRAME bytes, jumbo frames included), in
 *    blocks of AFP_TX_BLOCK_SIZE. A guest frame longer than a slot is
 *    dropped and counted; GSO is not offered on TX for that reason.
 *  - Each frame is preceded by the kernel's 10-byte struct virtio_net_hdr
 *    (PACKET_VNET_HDR), both ways.
 */
#ifndef VNIC_AFP_RING_H
#define VNIC_AFP_RING_H

#include <errno.h>
#include <linux/if_packet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define AFP_RX_BLOCK_SIZE (256u * 1024u)
#define AFP_RX_BLOCKS 16u
#define AFP_RX_FRAME_SIZE 2048u /* nominal (TPACKET_V3 packs frames) */
#define AFP_RX_RETIRE_MS 1u     /* a partly filled block is handed over after this */
#define AFP_TX_FRAME_SIZE (16u * 1024u)
#define AFP_TX_BLOCK_SIZE (64u * 1024u)
#define AFP_TX_FRAMES 256u
#define AFP_VNET_HDR_LEN 10u    /* struct virtio_net_hdr, no num_buffers */
/* Where a TX slot's data starts (TPACKET3_HDRLEN less the sockaddr_ll:
 * the kernel's default without PACKET_TX_HAS_OFF). */
#define AFP_TX_DATA_OFF 48u
#define AFP_TX_MAX_FRAME (AFP_TX_FRAME_SIZE - AFP_TX_DATA_OFF - AFP_VNET_HDR_LEN)
/* TX frames up to this length go into the skb's linear buffer whole (the
 * header's hdr_len; net_afp.c): one order-0 allocation, no ring pages. */
#define AFP_TX_LINEAR_MAX 2048u
#define AFP_RX_RING_BYTES ((size_t)AFP_RX_BLOCK_SIZE * AFP_RX_BLOCKS)
#define AFP_TX_RING_BYTES ((size_t)AFP_TX_FRAME_SIZE * AFP_TX_FRAMES)

/*
 * afp_ring_setup - set up the RX and TX rings on fd, an AF_PACKET socket
 * with PACKET_VERSION TPACKET_V3 and PACKET_VNET_HDR already set. With
 * reset, rings the socket has are torn down first (nobody may have them
 * mapped): what the old rings held is gone, every block belongs to the
 * kernel and the TX ring starts at slot 0. A TX ring with frames still in
 * flight is busy for a moment: retried for up to 200 ms.
 * Returns: 0, or a negative errno with err filled.
 * (Inline: the supervisor and the worker's engine link no common
 * library but this header.)
 */
_Static_assert(AFP_TX_DATA_OFF == TPACKET3_HDRLEN - sizeof(struct sockaddr_ll),
	       "TX data offset is the kernel's");
_Static_assert(AFP_RX_BLOCK_SIZE % AFP_RX_FRAME_SIZE == 0 &&
	       AFP_TX_BLOCK_SIZE % AFP_TX_FRAME_SIZE == 0, "whole frames per block");

static inline int afp_ring_opt(int fd, int opt, const struct tpacket_req3 *req, char *err,
			       size_t errlen)
{
	/* Busy (TX frames in flight, or a dying mapping): wait a little. */
	for (unsigned i = 0; i < 200; i++) {
		if (setsockopt(fd, SOL_PACKET, opt, req, sizeof(*req)) == 0)
			return 0;
		if (errno != EBUSY)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	{
		int e = errno;

		snprintf(err, errlen, "AF_PACKET %s ring%s: %s", opt == PACKET_RX_RING ? "RX" : "TX",
			 req->tp_block_nr ? "" : " teardown", strerror(e));
		return -e;
	}
}

static inline int afp_ring_setup(int fd, bool reset, char *err, size_t errlen)
{
	struct tpacket_req3 rx = {
		.tp_block_size = AFP_RX_BLOCK_SIZE,
		.tp_block_nr = AFP_RX_BLOCKS,
		.tp_frame_size = AFP_RX_FRAME_SIZE,
		.tp_frame_nr = AFP_RX_BLOCKS * (AFP_RX_BLOCK_SIZE / AFP_RX_FRAME_SIZE),
		.tp_retire_blk_tov = AFP_RX_RETIRE_MS,
	};
	struct tpacket_req3 tx = {
		.tp_block_size = AFP_TX_BLOCK_SIZE,
		.tp_block_nr = AFP_TX_FRAMES / (AFP_TX_BLOCK_SIZE / AFP_TX_FRAME_SIZE),
		.tp_frame_size = AFP_TX_FRAME_SIZE,
		.tp_frame_nr = AFP_TX_FRAMES,
	};
	struct tpacket_req3 none = { 0 };
	int rc;

	if (reset) {
		/* Without a ring the call fails with EINVAL on some kernels
		 * only when there is nothing to free: harmless. */
		rc = afp_ring_opt(fd, PACKET_RX_RING, &none, err, errlen);
		if (rc && rc != -EINVAL)
			return rc;
		rc = afp_ring_opt(fd, PACKET_TX_RING, &none, err, errlen);
		if (rc && rc != -EINVAL)
			return rc;
	}
	rc = afp_ring_opt(fd, PACKET_RX_RING, &rx, err, errlen);
	if (rc == 0)
		rc = afp_ring_opt(fd, PACKET_TX_RING, &tx, err, errlen);
	return rc;
}

#endif
