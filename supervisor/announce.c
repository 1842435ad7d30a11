/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * announce: the RARP broadcast that announces a migrated guest. See
 * announce.h.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "announce.h"
#include "tap.h"
#include "validate.h"

static void announce_rarp_frame(uint8_t f[ANNOUNCE_FRAME_LEN], const uint8_t mac[6])
{
	memset(f, 0, ANNOUNCE_FRAME_LEN);
	memset(f, 0xff, 6);                         /* to everyone */
	memcpy(f + 6, mac, 6);                      /* from the guest */
	f[12] = 0x80, f[13] = 0x35;                 /* ETH_P_RARP */
	f[14] = 0, f[15] = 1, f[16] = 8, f[17] = 0; /* Ethernet, IPv4 */
	f[18] = 6, f[19] = 4, f[20] = 0, f[21] = 3; /* reverse request */
	memcpy(f + 22, mac, 6);                     /* sender's hardware address */
	memcpy(f + 32, mac, 6);                     /* target's hardware address */
}

struct afp_send_args {
	const char *ifname;
	const uint8_t *frame;
	char *err;
	size_t errlen;
};

/* In the interface's namespace: a socket that receives nothing
 * (protocol 0), one frame out of the interface. */
static int afp_send_here(void *arg)
{
	struct afp_send_args *a = arg;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_RARP),
				   .sll_halen = 6 };
	int fd, rc = 0;

	sll.sll_ifindex = (int)if_nametoindex(a->ifname);
	if (sll.sll_ifindex == 0)
		return sup_errf(a->err, a->errlen, -errno, "interface %s: %s", a->ifname,
				strerror(errno));
	memset(sll.sll_addr, 0xff, 6);
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sup_errf(a->err, a->errlen, -errno, "AF_PACKET socket: %s", strerror(errno));
	if (sendto(fd, a->frame, ANNOUNCE_FRAME_LEN, MSG_DONTWAIT, (struct sockaddr *)&sll,
		   sizeof(sll)) != ANNOUNCE_FRAME_LEN)
		rc = sup_errf(a->err, a->errlen, -errno, "send on %s: %s", a->ifname,
			      strerror(errno));
	close(fd);
	return rc;
}

int announce_send(int fd, size_t hdr_len, const char *ifname, const char *netns,
		  const uint8_t mac[6], char *err, size_t errlen)
{
	uint8_t buf[TAP_VNET_HDR_LEN + ANNOUNCE_FRAME_LEN] = { 0 };
	size_t len = hdr_len + ANNOUNCE_FRAME_LEN;
	ssize_t n;
	int rc;

	if (fd < 0) {
		struct afp_send_args a = { ifname, buf, err, errlen };

		rc = validate_ifname(ifname, err, errlen);
		if (rc)
			return rc;
		announce_rarp_frame(buf, mac);
		return tap_in_netns(netns, afp_send_here, &a, err, errlen);
	}
	if (hdr_len > TAP_VNET_HDR_LEN)
		return sup_errf(err, errlen, -EINVAL, "a %zu-byte virtio-net header", hdr_len);
	announce_rarp_frame(buf + hdr_len, mac);
	/* A socket of plain frames (never SIGPIPE), or a tap. */
	n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0 && errno == ENOTSOCK)
		n = write(fd, buf, len);
	if (n < 0)
		return sup_errf(err, errlen, -errno, "%s", strerror(errno));
	if ((size_t)n != len)
		return sup_errf(err, errlen, -EIO, "short write (%zd of %zu bytes)", n, len);
	return 0;
}
