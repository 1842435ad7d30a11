/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * frames: the test frames vnic-bench moves between a simulated guest and
 * the host, and the checks the receiver applies to every byte.
 *
 * A frame is Ethernet II + IPv4 (20-byte header, checksum correct) + UDP
 * (checksum 0: allowed for IPv4, RFC 768) + a payload. The payload starts
 * with a struct frames_tag (nic, direction, sequence number, frame length)
 * followed by a pattern derived from (nic, direction, seq), so a receiver
 * can check every byte and knows the length it must have got.
 *
 * Through a tap the host end is a UDP socket: it sees only the payload,
 * and the kernel writes the Ethernet/IP/UDP headers of host -> guest
 * frames itself. So payload checks (frames_check_payload) stand alone and
 * frame checks (frames_check) add the header checks on top.
 *
 * Sizes are whole Ethernet frames without FCS, FRAMES_MIN..FRAMES_MAX.
 * Library-style: no logging; a failed check writes its reason into err.
 */
#ifndef VNIC_FRAMES_H
#define VNIC_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAMES_ETH_HLEN 14u
#define FRAMES_IP_HLEN  20u
#define FRAMES_UDP_HLEN 8u
#define FRAMES_HDRS (FRAMES_ETH_HLEN + FRAMES_IP_HLEN + FRAMES_UDP_HLEN) /* 42 */

/* 60 bytes: the Ethernet minimum without FCS (IEEE 802.3 64 incl. FCS). */
#define FRAMES_MIN 60u
/* 64 KiB: the largest frame the benchmark sends. The IPv4 total length
 * (65536 - 14 = 65522) stays below the 16-bit limit, and the frame below
 * the worker's NET_MAX_FRAME (65550). */
#define FRAMES_MAX 65536u
/* Through a tap: the kernel caps a tap's MTU at 65535 - 14 = 65521
 * (drivers/net/tun.c max_mtu), so a frame is at most 65535 bytes. */
#define FRAMES_TAP_MTU 65521u
#define FRAMES_TAP_MAX (FRAMES_TAP_MTU + FRAMES_ETH_HLEN)
/* Through AF_PACKET on a veth (issue 17): a TX ring slot takes frames
 * of up to 16326 bytes (afp_ring.h); the run's veth MTU stays below. */
#define FRAMES_AFP_MTU 16000u
#define FRAMES_AFP_MAX (FRAMES_AFP_MTU + FRAMES_ETH_HLEN)

#define FRAMES_UDP_PORT 47000u /* + nic: the host's and the guest's port */

enum frames_dir { FRAMES_G2H = 0, FRAMES_H2G = 1 };

/* First bytes of every payload, little-endian; 16 bytes so that the
 * smallest frame (18 bytes of payload) holds it. */
struct frames_tag {
	uint16_t magic;  /* FRAMES_MAGIC */
	uint8_t nic;
	uint8_t dir;
	uint32_t len;    /* whole frame length */
	uint64_t seq;
} __attribute__((packed));
#define FRAMES_TAG_LEN 16u
#define FRAMES_MAGIC 0x7662u /* "vb" */
_Static_assert(sizeof(struct frames_tag) == FRAMES_TAG_LEN, "tag is 16 bytes");
_Static_assert(FRAMES_HDRS + FRAMES_TAG_LEN <= FRAMES_MIN, "a minimum frame holds the tag");

/* Addresses of NIC n: guest 198.18.n.2, host 198.18.n.1 (RFC 2544
 * benchmarking range), guest MAC 52:54:00:bb:00:n. */
void frames_guest_mac(unsigned nic, uint8_t mac[6]);
uint32_t frames_guest_ip(unsigned nic); /* host byte order */
uint32_t frames_host_ip(unsigned nic);

/*
 * frames_size - the frame length for (nic, dir, seq): @fixed when non-zero,
 * else pseudo-random in FRAMES_MIN..@max (at most FRAMES_MAX) with the
 * edges (60, 61, 1514, the 4 KiB RX buffer boundary, max - 1, max) mixed in. The
 * receiver calls it too, so a truncated frame is caught.
 */
uint32_t frames_size(unsigned nic, unsigned dir, uint64_t seq, uint32_t fixed, uint32_t max);

/*
 * frames_build - write frame (nic, dir, seq) of @len bytes into buf.
 * Guest -> host frames go from the guest MAC/IP to host_mac/host IP;
 * host -> guest frames the other way.
 */
void frames_build(uint8_t *buf, uint32_t len, unsigned nic, unsigned dir, uint64_t seq,
		  const uint8_t host_mac[6]);

/* frames_build_payload - only the UDP payload of that frame (a UDP socket
 * sends it): len - FRAMES_HDRS bytes. */
void frames_build_payload(uint8_t *buf, uint32_t len, unsigned nic, unsigned dir, uint64_t seq);

/*
 * frames_check_payload - check a received UDP payload of plen bytes
 * against what (nic, dir) sends: tag, the length frames_size gives for
 * its seq, and every pattern byte.
 * Returns: 0 with *ret_seq; -EBADMSG (err filled) when anything differs.
 */
int frames_check_payload(const uint8_t *p, size_t plen, unsigned nic, unsigned dir,
			 uint32_t fixed, uint32_t max, uint64_t *ret_seq, char *err, size_t errlen);

/*
 * frames_check - check a whole received frame: Ethernet addresses and
 * type, IPv4 header (version, length, checksum, addresses, protocol, no
 * fragment), UDP ports and length, then the payload.
 * @exact: the frame was built by frames_build (both ends are vnic-bench):
 *   every header byte must be as built. false when the host kernel built
 *   the headers (tap): its MAC, IP id and UDP checksum are its own.
 * Returns: 0 with *ret_seq; -ENOMSG when the frame is not one of ours at
 * all (not IPv4/UDP to our port: the kernel's own traffic, ignored);
 * -EBADMSG (err filled) when it is ours but wrong.
 */
int frames_check(const uint8_t *f, size_t len, unsigned nic, unsigned dir, uint32_t fixed,
		 uint32_t max, const uint8_t host_mac[6], bool exact, uint64_t *ret_seq, char *err,
		 size_t errlen);

#endif
