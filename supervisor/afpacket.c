/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * afpacket: open an AF_PACKET backend socket. See afpacket.h; the ring
 * sizes and what the worker does with them: common/afp_ring.h and
 * workers/net_afp.c.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "afp_ring.h"
#include "afpacket.h"
#include "tap.h"
#include "validate.h"

/* The send buffer: every TX slot in flight at once, counted at twice its
 * size (skb truesize), so a burst never fails for want of buffer while a
 * slot is free (a frame the kernel cannot take stays in its slot). */
#define AFP_SNDBUF ((int)(2 * AFP_TX_RING_BYTES))

static int afp_setopt(int fd, int level, int opt, int val, const char *name, char *err,
		      size_t errlen)
{
	if (setsockopt(fd, level, opt, &val, sizeof(val)) == 0)
		return 0;
	return sup_errf(err, errlen, -errno, "AF_PACKET %s: %s", name, strerror(errno));
}

static int afp_open_here(const char *ifname, int *ret_fd, char *err, size_t errlen)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	struct packet_mreq mr = { .mr_type = PACKET_MR_PROMISC };
	struct ifreq ifr;
	int fd, rc;

	/* Protocol 0: nothing is queued before bind() names the interface. */
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return sup_errf(err, errlen, -errno, "AF_PACKET socket: %s", strerror(errno));
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0) {
		rc = sup_errf(err, errlen, -errno, "interface %s: %s", ifname, strerror(errno));
		goto fail;
	}
	sll.sll_ifindex = ifr.ifr_ifindex;
	mr.mr_ifindex = ifr.ifr_ifindex;
	rc = afp_setopt(fd, SOL_PACKET, PACKET_VERSION, TPACKET_V3, "PACKET_VERSION V3", err,
			errlen);
	if (!rc)
		rc = afp_setopt(fd, SOL_PACKET, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR", err, errlen);
	if (!rc)
		rc = afp_setopt(fd, SOL_PACKET, PACKET_LOSS, 1, "PACKET_LOSS", err, errlen);
	if (!rc)
		rc = afp_setopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING",
				err, errlen);
	if (!rc && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &(int){ AFP_SNDBUF }, sizeof(int)))
		rc = afp_setopt(fd, SOL_SOCKET, SO_SNDBUF, AFP_SNDBUF, "SO_SNDBUF", err, errlen);
	if (!rc)
		rc = afp_ring_setup(fd, false, err, errlen);
	if (rc)
		goto fail;
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		rc = sup_errf(err, errlen, -errno, "AF_PACKET bind to %s: %s", ifname, strerror(errno));
		goto fail;
	}
	if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0) {
		rc = sup_errf(err, errlen, -errno, "%s: promiscuous mode: %s", ifname, strerror(errno));
		goto fail;
	}
	*ret_fd = fd;
	return 0;
fail:
	close(fd);
	return rc;
}

struct afp_open_args {
	const char *ifname;
	int *ret_fd;
	char *err;
	size_t errlen;
};

static int afp_open_cb(void *arg)
{
	struct afp_open_args *a = arg;

	return afp_open_here(a->ifname, a->ret_fd, a->err, a->errlen);
}

int afp_open(const char *ifname, const char *netns, int *ret_fd, char *err, size_t errlen)
{
	struct afp_open_args a = { ifname, ret_fd, err, errlen };
	int rc = validate_ifname(ifname, err, errlen);

	/* The socket stays in the namespace it was made in. */
	return rc ? rc : tap_in_netns(netns, afp_open_cb, &a, err, errlen);
}
