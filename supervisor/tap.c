/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap: open a tap with a virtio-net header, optionally in another network
 * namespace. See tap.h.
 *
 * The supervisor is single-threaded, so setns() there and back cannot be
 * observed by other code; the only rule is that every path returns to
 * our own namespace before tap_open returns.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"
#include "validate.h"

/* Offloads the tap may hand us (host -> guest): only what the guest said
 * it can receive (QEMU does the same in virtio_net_apply_guest_offloads). */
static unsigned tap_offloads(uint64_t f)
{
	unsigned o = 0;

	if (f & (1ull << VIRTIO_NET_F_GUEST_CSUM)) {
		o |= TUN_F_CSUM;
		if (f & (1ull << VIRTIO_NET_F_GUEST_TSO4))
			o |= TUN_F_TSO4;
		if (f & (1ull << VIRTIO_NET_F_GUEST_TSO6))
			o |= TUN_F_TSO6;
		/* Accepted by the kernel (with TUN_F_CSUM), which builds
		 * no UFO frames any more: the guest gets none in practice. */
		if (f & (1ull << VIRTIO_NET_F_GUEST_UFO))
			o |= TUN_F_UFO;
	}
	return o;
}

int tap_configure(int fd, uint64_t features, char *err, size_t errlen)
{
	int hdrsz = TAP_VNET_HDR_LEN;

	/* virtio 1.x: the header always has num_buffers: 12 bytes (5.1.6). */
	if (ioctl(fd, TUNSETVNETHDRSZ, &hdrsz) < 0)
		return sup_errf(err, errlen, -errno, "TUNSETVNETHDRSZ: %s", strerror(errno));
	if (ioctl(fd, TUNSETOFFLOAD, (unsigned long)tap_offloads(features)) < 0)
		return sup_errf(err, errlen, -errno, "TUNSETOFFLOAD: %s", strerror(errno));
	return 0;
}

/* One TUNSETIFF on a new fd: create or attach to ifname ("" lets the
 * kernel name it), configured; its name back in ifname. */
static int tap_attach_fd(char *ifname, uint64_t features, bool mq, int *ret_fd, char *err,
			 size_t errlen)
{
	struct ifreq ifr;
	int fd, rc;

	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return sup_errf(err, errlen, -errno, "open /dev/net/tun: %s", strerror(errno));
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | (mq ? IFF_MULTI_QUEUE : 0);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		rc = -errno;
		close(fd);
		return sup_errf(err, errlen, rc, "TUNSETIFF %s%s: %s", ifname[0] ? ifname : "(new)",
			     mq ? " (multi-queue)" : "", strerror(-rc));
	}
	rc = tap_configure(fd, features, err, errlen);
	if (rc) {
		close(fd);
		return rc;
	}
	snprintf(ifname, IFNAMSIZ, "%s", ifr.ifr_name);
	*ret_fd = fd;
	return 0;
}

/* A persistent single-queue tap of that name (left by a vnicd before
 * multiqueue) refuses IFF_MULTI_QUEUE: attach to it as it is, make it not
 * persistent and close, which deletes it. Returns 0 when one was deleted. */
static int tap_delete_single(const char *name)
{
	char ifname[IFNAMSIZ], err[16];
	int fd;

	snprintf(ifname, sizeof(ifname), "%s", name);
	if (tap_attach_fd(ifname, 0, false, &fd, err, sizeof(err)) < 0)
		return -1;
	(void)ioctl(fd, TUNSETPERSIST, 0);
	close(fd);
	return 0;
}

static int tap_set_up(const char *ifname, char *err, size_t errlen)
{
	struct ifreq ifr;
	int sock, rc = 0;

	/* Up, in the namespace the tap lives in (we are in it now). */
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return sup_errf(err, errlen, -errno, "socket: %s", strerror(errno));
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(sock, SIOCSIFFLAGS, &ifr) < 0))
		rc = sup_errf(err, errlen, -errno, "set %s up: %s", ifname, strerror(errno));
	close(sock);
	return rc;
}

static int tap_open_here(const char *name, uint64_t features, unsigned nq, bool mq, int *fds,
			 char *ret_name, bool *recreated, char *err, size_t errlen)
{
	char ifname[IFNAMSIZ];
	unsigned i;
	int rc = 0;

	snprintf(ifname, sizeof(ifname), "%s", name);
	for (i = 0; i < nq; i++) {
		rc = tap_attach_fd(ifname, features, mq, &fds[i], err, errlen);
		if (rc == -EINVAL && mq && i == 0 && ifname[0] && recreated &&
		    tap_delete_single(ifname) == 0) {
			*recreated = true;
			rc = tap_attach_fd(ifname, features, mq, &fds[i], err, errlen);
		}
		if (rc)
			break;
	}
	if (!rc)
		rc = tap_set_up(ifname, err, errlen);
	if (rc) {
		while (i > 0)
			close(fds[--i]);
		return rc;
	}
	snprintf(ret_name, IFNAMSIZ, "%s", ifname);
	return 0;
}

int tap_in_netns(const char *netns, int (*fn)(void *arg), void *arg, char *err, size_t errlen)
{
	char path[128];
	int self, target, rc;

	if (!netns || !netns[0])
		return fn(arg);

	rc = validate_netns_name(netns, err, errlen);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "/run/netns/%s", netns);
	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return sup_errf(err, errlen, -errno, "open /proc/self/ns/net: %s", strerror(errno));
	target = open(path, O_RDONLY | O_CLOEXEC);
	if (target < 0) {
		rc = sup_errf(err, errlen, -errno, "network namespace %s: %s", netns, strerror(errno));
		goto out_close_self;
	}
	if (setns(target, CLONE_NEWNET) < 0) {
		rc = sup_errf(err, errlen, -errno, "setns %s: %s", netns, strerror(errno));
		goto out_close_target;
	}
	rc = fn(arg);
	if (setns(self, CLONE_NEWNET) < 0) {
		/* We cannot be left in the guest's namespace: every later
		 * tap and the control socket's meaning would change. */
		fprintf(stderr, "vnicd: cannot return to own network namespace: %s\n",
			strerror(errno));
		_exit(70);
	}
out_close_target:
	close(target);
out_close_self:
	close(self);
	return rc;
}

struct tap_open_args {
	const char *name;
	uint64_t features;
	unsigned nq;
	bool mq;
	int *fds;
	char *ret_name;
	bool *recreated;
	char *err;
	size_t errlen;
};

static int tap_open_cb(void *arg)
{
	struct tap_open_args *a = arg;

	return tap_open_here(a->name, a->features, a->nq, a->mq, a->fds, a->ret_name, a->recreated,
			     a->err, a->errlen);
}

/* Run tap_open_here inside netns ("" or NULL: here), and come back. */
static int tap_open_in(const char *name, const char *netns, uint64_t features, unsigned nq,
		       bool mq, int *fds, char *ret_name, bool *recreated, char *err,
		       size_t errlen)
{
	struct tap_open_args a = { name, features, nq, mq, fds, ret_name, recreated, err, errlen };

	return tap_in_netns(netns, tap_open_cb, &a, err, errlen);
}

int tap_open(const char *name, const char *netns, uint64_t features,
	     int *ret_fd, char *ret_name, char *err, size_t errlen)
{
	return tap_open_in(name, netns, features, 1, false, ret_fd, ret_name, NULL, err, errlen);
}

int tap_open_queues(const char *name, const char *netns, uint64_t features, unsigned nq,
		    int *fds, char *ret_name, bool *recreated, char *err, size_t errlen)
{
	if (recreated)
		*recreated = false;
	if (nq == 0 || nq > TAP_MAX_QUEUES)
		return sup_errf(err, errlen, -EINVAL, "%u tap queues (1..%u)", nq, TAP_MAX_QUEUES);
	return tap_open_in(name, netns, features, nq, true, fds, ret_name, recreated, err,
			   errlen);
}

int tap_queue_attach(int fd, bool on)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = on ? IFF_ATTACH_QUEUE : IFF_DETACH_QUEUE;
	return ioctl(fd, TUNSETQUEUE, &ifr) < 0 ? -errno : 0;
}

int tap_set_persist(int fd, bool on)
{
	return ioctl(fd, TUNSETPERSIST, on ? 1 : 0) < 0 ? -errno : 0;
}

int tap_set_mtu(const char *ifname, const char *netns, unsigned mtu, char *err, size_t errlen)
{
	struct ifreq ifr;
	char path[128];
	int self = -1, target = -1, sock, rc = 0;

	if (netns && netns[0]) {
		snprintf(path, sizeof(path), "/run/netns/%s", netns);
		self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		target = open(path, O_RDONLY | O_CLOEXEC);
		if (self < 0 || target < 0 || setns(target, CLONE_NEWNET) < 0) {
			rc = sup_errf(err, errlen, -errno, "network namespace %s: %s", netns,
				   strerror(errno));
			goto out_close;
		}
	}
	/* The socket belongs to the namespace it is made in; back at once. */
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (self >= 0 && setns(self, CLONE_NEWNET) < 0) {
		fprintf(stderr, "vnicd: cannot return to own network namespace: %s\n",
			strerror(errno));
		_exit(70);
	}
	if (sock < 0) {
		rc = sup_errf(err, errlen, -errno, "socket: %s", strerror(errno));
		goto out_close;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	ifr.ifr_mtu = (int)mtu;
	if (ioctl(sock, SIOCSIFMTU, &ifr) < 0)
		rc = sup_errf(err, errlen, -errno, "MTU %u on %s: %s", mtu, ifname, strerror(errno));
	close(sock);
out_close:
	if (target >= 0)
		close(target);
	if (self >= 0)
		close(self);
	return rc;
}
