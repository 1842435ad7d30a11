/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * traffic_backend: the host end of each NIC's backend. The socket backend:
 * the other half of a socketpair. The tap backend: the tap vnicd made in
 * the run's network namespace, addressed and brought up here, and a UDP
 * socket bound inside that namespace.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frames.h"
#include "mac.h"
#include "traffic.h"

/* ---- commands and namespaces ---- */

/* tr_cmd - run argv (NULL-terminated) and wait; output goes to ours.
 * Returns: 0 when it exited 0, -EIO otherwise (reason printed). */
int tr_cmd(const char *const *argv)
{
	pid_t pid = fork();
	int st;

	if (pid < 0) {
		fprintf(stderr, "vnic-bench: fork: %s\n", strerror(errno));
		return -EIO;
	}
	if (pid == 0) {
		char *v[16];
		unsigned i;

		/* exec wants char *: copies, in the child only. */
		for (i = 0; argv[i] && i < 15; i++)
			v[i] = strdup(argv[i]);
		v[i] = NULL;
		execvp(v[0], v);
		fprintf(stderr, "vnic-bench: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -EIO;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	fprintf(stderr, "vnic-bench: command failed:");
	for (unsigned i = 0; argv[i]; i++)
		fprintf(stderr, " %s", argv[i]);
	fputc('\n', stderr);
	return -EIO;
}

/* tr_ns_enter - switch this (single-threaded) process into netns name.
 * Returns: an fd of the namespace we left (give it to tr_ns_leave), or
 * -EIO (reason printed). */
static int tr_ns_enter(const char *name)
{
	char path[128];
	int self, fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "vnic-bench: entering netns %s: %s\n", name, strerror(errno));
		if (self >= 0)
			close(self);
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	close(fd);
	return self;
}

static void tr_ns_leave(int self)
{
	if (setns(self, CLONE_NEWNET) < 0) {
		/* Staying in the wrong namespace would send the rest of the run
		 * somewhere else: stop here. */
		fprintf(stderr, "vnic-bench: cannot return to our netns: %s\n", strerror(errno));
		abort();
	}
	close(self);
}

/* No IPv6 chatter on interface name, in the netns we are in (there,
 * /proc/sys/net is the netns's own). */
static void tr_ipv6_off(const char *name)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "1", 1) != 1)
			fprintf(stderr, "vnic-bench: %s: %s\n", path, strerror(errno));
		close(fd);
	}
}

/* ---- the host ends ---- */

int tr_socket_pair(struct tr_run *r, struct tr_nic *n, int *ret_vmm_end)
{
	int sv[2], sz = 4 << 20;

	(void)r;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		fprintf(stderr, "vnic-bench: socketpair: %s\n", strerror(errno));
		return -EIO;
	}
	for (unsigned i = 0; i < 2; i++) {
		/* Room for several 64 KiB frames each way; FORCE needs root,
		 * the plain call is the fallback. */
		if (setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
			setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		if (setsockopt(sv[i], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
			setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	n->host_fd = sv[0];
	*ret_vmm_end = sv[1];
	/* The socket backend's host end: a made-up MAC for the frames. */
	memcpy(n->host_mac, (const uint8_t[6]){ 0x52, 0x54, 0x00, 0xbb, 0xff, (uint8_t)n->idx }, 6);
	return 0;
}

/* Before AddNic (afpacket backend): a veth pair in r->netns, n->veth
 * for vnicd's AF_PACKET socket (up, the run's MTU, no IPv6) and n->tap
 * for the host (set up by tr_tap_setup). Removed with the netns, or by
 * tr_veth_del. */
int tr_veth_add(struct tr_run *r, struct tr_nic *n)
{
	char mtu[16];
	int self;
	const char *a1[] = { "ip", "-n", r->netns, "link", "add", n->veth, "type", "veth", "peer",
			     "name", n->tap, NULL };
	const char *a2[] = { "ip", "-n", r->netns, "link", "set", "dev", n->veth, "mtu", mtu, "up",
			     NULL };

	snprintf(mtu, sizeof(mtu), "%u", r->mtu);
	if (tr_cmd(a1) < 0) {
		n->veth[0] = '\0'; /* not ours: never deleted */
		return -EIO;
	}
	if (tr_cmd(a2) < 0)
		return -EIO;
	self = tr_ns_enter(r->netns);
	if (self < 0)
		return -EIO;
	tr_ipv6_off(n->veth);
	tr_ns_leave(self);
	return 0;
}

/* After AddNic created tap n->tap in r->netns: address, MTU, a static
 * neighbour for the guest, no IPv6 chatter; then the host's UDP socket. */
int tr_tap_setup(struct tr_run *r, struct tr_nic *n)
{
	char mtu[16], addr[32], gip[32], gmac[32];
	uint8_t m[6];
	struct ifreq ifr;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int self, fd, sz = 64 << 20;

	snprintf(mtu, sizeof(mtu), "%u", r->mtu);
	snprintf(addr, sizeof(addr), "198.18.%u.1/24", n->idx);
	snprintf(gip, sizeof(gip), "198.18.%u.2", n->idx);
	frames_guest_mac(n->idx, m);
	mac_format(m, gmac, sizeof(gmac));

	self = tr_ns_enter(r->netns);
	if (self < 0)
		return -EIO;
	tr_ipv6_off(n->tap);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		fprintf(stderr, "vnic-bench: socket in netns: %s\n", strerror(errno));
		tr_ns_leave(self);
		return -EIO;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", n->tap);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		fprintf(stderr, "vnic-bench: %s: SIOCGIFHWADDR: %s\n", n->tap, strerror(errno));
		close(fd);
		tr_ns_leave(self);
		return -EIO;
	}
	memcpy(n->host_mac, ifr.ifr_hwaddr.sa_data, 6);
	tr_ns_leave(self);

	{
		const char *a1[] = { "ip", "-n", r->netns, "link", "set", "dev", n->tap, "mtu", mtu,
				     "up", NULL };
		const char *a2[] = { "ip", "-n", r->netns, "addr", "replace", addr, "dev", n->tap,
				     NULL };
		const char *a3[] = { "ip", "-n", r->netns, "neigh", "replace", gip, "lladdr", gmac,
				     "dev", n->tap, "nud", "permanent", NULL };

		if (tr_cmd(a1) < 0 || tr_cmd(a2) < 0 || tr_cmd(a3) < 0) {
			close(fd);
			return -EIO;
		}
	}

	/* The socket was made inside the netns and stays bound to it. Large
	 * buffers as root: the window must fit in them (see the top). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		fprintf(stderr, "vnic-bench: socket buffers: %s\n", strerror(errno));
	sa.sin_port = htons((uint16_t)(FRAMES_UDP_PORT + n->idx));
	sa.sin_addr.s_addr = htonl(frames_host_ip(n->idx));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "vnic-bench: bind %s:%u: %s\n", addr, FRAMES_UDP_PORT + n->idx,
			strerror(errno));
		close(fd);
		return -EIO;
	}
	sa.sin_addr.s_addr = htonl(frames_guest_ip(n->idx));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "vnic-bench: connect %s: %s\n", gip, strerror(errno));
		close(fd);
		return -EIO;
	}
	n->host_fd = fd;
	return 0;
}
