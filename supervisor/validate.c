/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * validate: AddNic checks, all before any state change. See validate.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if_tun.h>
#include <linux/magic.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "mac.h"
#include "validate.h"
#include "workers/policy.h"
#include "vring.h"

int sup_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

#define BIT(n) (1ull << (n))

uint64_t validate_nic_offered(enum nic_backend_type backend)
{
	uint64_t f = BIT(VIRTIO_F_VERSION_1) | BIT(VIRTIO_F_EVENT_IDX) |
		     BIT(VIRTIO_F_INDIRECT_DESC) | BIT(VIRTIO_NET_F_MRG_RXBUF) |
		     BIT(VIRTIO_NET_F_MAC) | BIT(VIRTIO_NET_F_MTU);

	if (backend == NIC_BACKEND_TAP || backend == NIC_BACKEND_TAP_FD)
		f |= BIT(VIRTIO_NET_F_CSUM) | BIT(VIRTIO_NET_F_GUEST_CSUM) |
		     BIT(VIRTIO_NET_F_HOST_TSO4) | BIT(VIRTIO_NET_F_HOST_TSO6) |
		     BIT(VIRTIO_NET_F_GUEST_TSO4) | BIT(VIRTIO_NET_F_GUEST_TSO6) |
		     BIT(VIRTIO_NET_F_HOST_UFO) | BIT(VIRTIO_NET_F_GUEST_UFO);
	/* AF_PACKET (issue 17): the kernel's virtio_net_hdr carries partial
	 * checksums both ways and GSO frames to the guest; GSO from the
	 * guest is not offered, as a TX ring slot holds 16 KiB (afp_ring.h). */
	if (backend == NIC_BACKEND_AF_PACKET)
		f |= BIT(VIRTIO_NET_F_CSUM) | BIT(VIRTIO_NET_F_GUEST_CSUM) |
		     BIT(VIRTIO_NET_F_GUEST_TSO4) | BIT(VIRTIO_NET_F_GUEST_TSO6);
	return f;
}

int nic_queue_slot(uint32_t pair, uint32_t idx)
{
	/* Compare the full 32 bits: 0x10000 must not alias queue 0 (C4). */
	if (pair >= NIC_MAX_PAIRS || idx < 2 * pair || idx - 2 * pair >= NIC_NUM_QUEUES)
		return -1;
	return (int)(idx - 2 * pair);
}

int validate_nic_id(const char *id, size_t len, bool has_nul, char *err, size_t errlen)
{
	if (len == 0)
		return sup_errf(err, errlen, -EINVAL, "nic id is empty");
	if (len > VALIDATE_ID_MAX)
		return sup_errf(err, errlen, -EINVAL, "nic id is %zu bytes, at most %u allowed",
			    len, VALIDATE_ID_MAX);
	if (has_nul)
		return sup_errf(err, errlen, -EINVAL, "nic id contains a NUL byte");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)id[i];
		/* Printable ASCII without space: the id goes into log lines,
		 * the worker's argv and vnicctl's table. */
		if (c <= 0x20 || c >= 0x7f)
			return sup_errf(err, errlen, -EINVAL,
				    "nic id byte %zu (0x%02x) is not printable ASCII", i, c);
	}
	return 0;
}

int validate_mac(const uint8_t *mac, size_t len, char *err, size_t errlen)
{
	static const uint8_t zero[6];
	char text[MAC_STR_LEN];

	if (len != 6)
		return sup_errf(err, errlen, -EINVAL, "mac is %zu bytes, must be 6", len);
	if (mac[0] & 1)
		return sup_errf(err, errlen, -EINVAL, "mac %s is multicast, must be unicast",
			    mac_format(mac, text, sizeof(text)));
	if (!memcmp(mac, zero, 6))
		return sup_errf(err, errlen, -EINVAL, "mac 00:00:00:00:00:00 is not a valid address");
	return 0;
}

int validate_mtu(uint32_t mtu, char *err, size_t errlen)
{
	if (mtu < VALIDATE_MTU_MIN || mtu > VALIDATE_MTU_MAX)
		return sup_errf(err, errlen, -EINVAL, "mtu %u is outside %u..%u",
			    mtu, VALIDATE_MTU_MIN, VALIDATE_MTU_MAX);
	return 0;
}

int validate_features(uint64_t features, enum nic_backend_type backend,
		      char *err, size_t errlen)
{
	uint64_t offered = validate_nic_offered(backend);
	uint64_t extra = features & ~offered;

	/* C9: a bit we never offered is rejected, not masked. */
	if (extra)
		return sup_errf(err, errlen, -ENOTSUP,
			    "features 0x%llx were not offered (offered 0x%llx for this backend)",
			    (unsigned long long)extra, (unsigned long long)offered);
	if (!(features & BIT(VIRTIO_F_VERSION_1)))
		return sup_errf(err, errlen, -ENOTSUP,
			    "VIRTIO_F_VERSION_1 (bit 32) is required: legacy devices are not supported");
	/* Spec 5.1.3.1: TSO and UFO need the matching checksum offload. */
	if ((features & (BIT(VIRTIO_NET_F_HOST_TSO4) | BIT(VIRTIO_NET_F_HOST_TSO6) |
			 BIT(VIRTIO_NET_F_HOST_UFO))) &&
	    !(features & BIT(VIRTIO_NET_F_CSUM)))
		return sup_errf(err, errlen, -EINVAL,
			    "HOST_TSO4/6 and HOST_UFO require VIRTIO_NET_F_CSUM (spec 5.1.3.1)");
	if ((features & (BIT(VIRTIO_NET_F_GUEST_TSO4) | BIT(VIRTIO_NET_F_GUEST_TSO6) |
			 BIT(VIRTIO_NET_F_GUEST_UFO))) &&
	    !(features & BIT(VIRTIO_NET_F_GUEST_CSUM)))
		return sup_errf(err, errlen, -EINVAL,
			    "GUEST_TSO4/6 and GUEST_UFO require VIRTIO_NET_F_GUEST_CSUM (spec 5.1.3.1)");
	return 0;
}

static int name_chars_ok(const char *name)
{
	for (const char *p = name; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c <= 0x20 || c >= 0x7f || c == '/' || c == ':')
			return 0;
	}
	return 1;
}

int validate_ifname(const char *name, char *err, size_t errlen)
{
	size_t len = strnlen(name, IFNAMSIZ);

	if (len == 0)
		return sup_errf(err, errlen, -EINVAL, "tap name is empty");
	if (len >= IFNAMSIZ)
		return sup_errf(err, errlen, -EINVAL, "tap name is longer than %d bytes", IFNAMSIZ - 1);
	if (!name_chars_ok(name) || !strcmp(name, ".") || !strcmp(name, ".."))
		return sup_errf(err, errlen, -EINVAL, "tap name \"%s\" is not a valid interface name", name);
	return 0;
}

int validate_netns_name(const char *name, char *err, size_t errlen)
{
	size_t len = strlen(name);

	if (len == 0 || len >= 64 || !name_chars_ok(name) ||
	    !strcmp(name, ".") || !strcmp(name, ".."))
		return sup_errf(err, errlen, -EINVAL,
			    "netns \"%.64s\" is not a network namespace name (one path component)", name);
	return 0;
}

int validate_policy(const struct vnic_policy *p, char *err, size_t errlen)
{
	if ((uint32_t)p->mode > VNIC_MITIGATION_POLL)
		return sup_errf(err, errlen, -EINVAL, "policy mode %u is unknown", (uint32_t)p->mode);
	if (p->timer_us && (p->timer_us < NET_TIMER_US_MIN || p->timer_us > NET_TIMER_US_MAX))
		return sup_errf(err, errlen, -EINVAL, "policy timer_us %u: must be %u..%u (0: %u)",
			    p->timer_us, NET_TIMER_US_MIN, NET_TIMER_US_MAX, NET_TIMER_US_DEFAULT);
	if (p->poll_us > NET_POLL_US_MAX)
		return sup_errf(err, errlen, -EINVAL, "policy poll_us %u: must be 0..%u (0: poll forever)",
			    p->poll_us, NET_POLL_US_MAX);
	if (p->latency_us &&
	    (p->latency_us < NET_LATENCY_US_MIN || p->latency_us > NET_LATENCY_US_MAX))
		return sup_errf(err, errlen, -EINVAL, "policy latency_us %u: must be %u..%u (0: %u)",
			    p->latency_us, NET_LATENCY_US_MIN, NET_LATENCY_US_MAX,
			    NET_LATENCY_US_DEFAULT);
	if (p->safety_pct &&
	    (p->safety_pct < NET_SAFETY_PCT_MIN || p->safety_pct > NET_SAFETY_PCT_MAX))
		return sup_errf(err, errlen, -EINVAL, "policy safety_pct %u: must be %u..%u (0: %u)",
			    p->safety_pct, NET_SAFETY_PCT_MIN, NET_SAFETY_PCT_MAX,
			    NET_SAFETY_PCT_DEFAULT);
	if (p->max_window > NET_WINDOW_MAX_MAX)
		return sup_errf(err, errlen, -EINVAL, "policy max_window %u: must be 1..%u (0: %u)",
			    p->max_window, NET_WINDOW_MAX_MAX, NET_WINDOW_MAX_DEFAULT);
	{
		/* Interrupt coalescing: the bound names the field. */
		const struct {
			const char *name;
			uint32_t v, max;
		} irq[] = {
			{ "rx_irq_us", p->rx_irq_us, NET_IRQ_US_MAX },
			{ "tx_irq_us", p->tx_irq_us, NET_IRQ_US_MAX },
			{ "rx_irq_frames", p->rx_irq_frames, NET_IRQ_FRAMES_MAX },
			{ "tx_irq_frames", p->tx_irq_frames, NET_IRQ_FRAMES_MAX },
		};

		for (size_t i = 0; i < sizeof(irq) / sizeof(irq[0]); i++)
			if (irq[i].v > irq[i].max)
				return sup_errf(err, errlen, -EINVAL,
					    "policy %s %u: must be 0..%u (0: no coalescing)",
					    irq[i].name, irq[i].v, irq[i].max);
	}
	if (p->budget_packets > NIC_POLICY_MAX_BUDGET_PKTS ||
	    p->budget_bytes > NIC_POLICY_MAX_BUDGET_BYTES)
		return sup_errf(err, errlen, -EINVAL,
			    "policy budget above %u packets or %u bytes per wake-up",
			    NIC_POLICY_MAX_BUDGET_PKTS, NIC_POLICY_MAX_BUDGET_BYTES);
	return 0;
}

struct area {
	const char *name;
	uint64_t gpa, size, align;
};

int validate_ring_addrs(const struct memtable_region_desc *r, unsigned nr,
			uint32_t num, uint64_t desc, uint64_t avail, uint64_t used,
			char *err, size_t errlen)
{
	struct area a[3];

	/* Spec 2.7: "Queue Size value is always a power of 2. The maximum
	 * Queue Size value is 32768." (C5) */
	if (num == 0 || num > VRING_MAX_SIZE || (num & (num - 1)))
		return sup_errf(err, errlen, -EINVAL,
			    "queue size %u is not a power of 2 in 1..%u", num, VRING_MAX_SIZE);

	a[0] = (struct area){ "descriptor table", desc, vring_desc_size(num), VRING_DESC_ALIGN };
	a[1] = (struct area){ "avail ring", avail, vring_avail_size(num), VRING_AVAIL_ALIGN };
	a[2] = (struct area){ "used ring", used, vring_used_size(num), VRING_USED_ALIGN };

	for (int i = 0; i < 3; i++) {
		bool inside = false;

		/* Spec 2.7 alignment table: 16, 2, 4 (C7). */
		if (a[i].gpa % a[i].align)
			return sup_errf(err, errlen, -EINVAL, "%s at 0x%llx is not %llu-byte aligned",
				    a[i].name, (unsigned long long)a[i].gpa,
				    (unsigned long long)a[i].align);
		if (a[i].gpa > UINT64_MAX - a[i].size)
			return sup_errf(err, errlen, -EINVAL, "%s at 0x%llx wraps the address space",
				    a[i].name, (unsigned long long)a[i].gpa);
		for (unsigned k = 0; k < nr && !inside; k++) {
			/* memtable_validate has ruled out region wrap. */
			if (a[i].gpa >= r[k].gpa &&
			    a[i].gpa - r[k].gpa <= r[k].size &&
			    a[i].size <= r[k].size - (a[i].gpa - r[k].gpa))
				inside = true;
		}
		if (!inside)
			return sup_errf(err, errlen, -EINVAL,
				    "%s [0x%llx, +0x%llx) is not wholly inside one memory region",
				    a[i].name, (unsigned long long)a[i].gpa,
				    (unsigned long long)a[i].size);
	}
	for (int i = 0; i < 3; i++)
		for (int j = i + 1; j < 3; j++)
			if (a[i].gpa < a[j].gpa + a[j].size && a[j].gpa < a[i].gpa + a[i].size)
				return sup_errf(err, errlen, -EINVAL, "%s and %s overlap",
					    a[i].name, a[j].name);
	return 0;
}

/* 1 semaphore, 0 plain, -1 unknown (no such fdinfo line). */
static int eventfd_is_semaphore(int fd)
{
	char path[64], line[128];
	FILE *f;
	int r = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned v;

		if (sscanf(line, "eventfd-semaphore: %u", &v) == 1) {
			r = v != 0;
			break;
		}
	}
	fclose(f);
	return r;
}

/* The kernel names an anonymous inode's file "anon_inode:[eventfd]". */
int validate_eventfd(int fd, char *err, size_t errlen)
{
	char path[64], target[64];
	ssize_t n;

	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return sup_errf(err, errlen, -EBADF, "fd %d is not open", fd);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return sup_errf(err, errlen, -errno, "cannot inspect fd %d: %s", fd, strerror(errno));
	target[n] = '\0';
	if (strcmp(target, "anon_inode:[eventfd]"))
		return sup_errf(err, errlen, -EINVAL, "fd is %s, not an eventfd", target);
	/* EFD_SEMAPHORE: every read takes 1 from the count, so a count of
	 * 2^40 stays readable for ever (issue 11 item 10). The kernel says so
	 * in fdinfo (Linux 6.x "eventfd-semaphore:"); where it does not, the
	 * worker's one-read-per-edge kick handling still bounds the work. */
	if (eventfd_is_semaphore(fd) == 1)
		return sup_errf(err, errlen, -EINVAL,
			    "eventfd is in semaphore mode (EFD_SEMAPHORE): kick and call "
			    "eventfds must be plain counters");
	return 0;
}

int validate_tap_fd(int fd, char *err, size_t errlen)
{
	struct ifreq ifr;
	const short need = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;

	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return sup_errf(err, errlen, -EBADF, "tap fd %d is not open", fd);
	memset(&ifr, 0, sizeof(ifr));
	if (ioctl(fd, TUNGETIFF, &ifr) < 0)
		return sup_errf(err, errlen, -EINVAL, "backend fd is not a tap (TUNGETIFF: %s)",
			    strerror(errno));
	if ((ifr.ifr_flags & need) != need || (ifr.ifr_flags & IFF_TUN))
		return sup_errf(err, errlen, -EINVAL,
			    "tap %.16s lacks IFF_TAP|IFF_NO_PI|IFF_VNET_HDR (flags 0x%x)",
			    ifr.ifr_name, (unsigned)(unsigned short)ifr.ifr_flags);
	return 0;
}

int validate_backend_socket(int fd, char *err, size_t errlen)
{
	struct stat st;
	int type = 0, domain = 0;
	socklen_t len;

	if (fd < 0 || fstat(fd, &st) < 0)
		return sup_errf(err, errlen, -EBADF, "backend fd %d is not open", fd);
	if (!S_ISSOCK(st.st_mode))
		return sup_errf(err, errlen, -EINVAL, "backend fd is not a socket");
	len = sizeof(domain);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
		return sup_errf(err, errlen, -errno, "backend socket: SO_DOMAIN: %s", strerror(errno));
	len = sizeof(type);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return sup_errf(err, errlen, -errno, "backend socket: SO_TYPE: %s", strerror(errno));
	if (domain != AF_UNIX)
		return sup_errf(err, errlen, -EINVAL, "backend socket is not AF_UNIX (domain %d)", domain);
	if (type != SOCK_SEQPACKET && type != SOCK_DGRAM)
		return sup_errf(err, errlen, -EINVAL,
			    "backend socket must be SOCK_SEQPACKET or SOCK_DGRAM (one frame per packet)");
	return 0;
}

int validate_nic_pairs(const struct nic_spec *s, unsigned max_pairs, unsigned *ret_npairs,
		       char *err, size_t errlen)
{
	bool seen[2 * NIC_MAX_PAIRS] = { false };

	if (max_pairs > NIC_MAX_PAIRS)
		max_pairs = NIC_MAX_PAIRS;
	if (s->backend == NIC_BACKEND_AF_PACKET && s->nqueues > 2)
		return sup_errf(err, errlen, -EINVAL, "an AF_PACKET backend serves one queue pair "
			    "(%u queues given)", s->nqueues);
	if (s->nqueues < 4 || s->nqueues % 2 || s->nqueues > 2 * max_pairs)
		return sup_errf(err, errlen, -EINVAL, "%u queues: several queue pairs are 4..%u queues, "
			    "rx/tx pairs", s->nqueues, 2 * max_pairs);
	for (unsigned i = 0; i < s->nqueues; i++) {
		uint32_t idx = s->queues[i].index;

		if (idx >= s->nqueues)
			return sup_errf(err, errlen, -EINVAL, "queue index %u is out of range (0..%u)", idx,
				    s->nqueues - 1);
		if (seen[idx])
			return sup_errf(err, errlen, -EINVAL, "queue index %u given twice", idx);
		seen[idx] = true;
	}
	/* An empty name lets the kernel pick tapN, a new one per open:
	 * the pairs would each get a tap of their own, not a queue of one. */
	if (s->backend == NIC_BACKEND_TAP && !s->tap_name[0])
		return sup_errf(err, errlen, -EINVAL, "%u queue pairs need the tap's name (one "
			    "multi-queue tap, a queue per pair)", s->nqueues / 2);
	if (s->backend != NIC_BACKEND_TAP && s->nbackend != s->nqueues / 2)
		return sup_errf(err, errlen, -EINVAL, "%u queue pairs need a tap by name, or a socket or "
			    "a tap fd each (%u sent)", s->nqueues / 2, s->nbackend);
	*ret_npairs = s->nqueues / 2;
	return 0;
}

int validate_nic_spec(const struct nic_spec *s, char *err, size_t errlen)
{
	char sub[200];
	bool seen[NIC_NUM_QUEUES] = { false };
	int rc;

	rc = validate_nic_id(s->id, s->id_len, s->id_has_nul, err, errlen);
	if (rc)
		return rc;
	rc = validate_mac(s->mac, s->mac_len, err, errlen);
	if (rc)
		return rc;
	rc = validate_mtu(s->mtu, err, errlen);
	if (rc)
		return rc;
	if (s->backend != NIC_BACKEND_TAP && s->backend != NIC_BACKEND_SOCKET &&
	    s->backend != NIC_BACKEND_TAP_FD && s->backend != NIC_BACKEND_AF_PACKET)
		return sup_errf(err, errlen, -EINVAL, "backend must be tap, tap_fd, socket or af_packet");
	if (s->features & ~s->features_offered)
		return sup_errf(err, errlen, -EINVAL,
			    "acked features 0x%llx are not a subset of the offered 0x%llx",
			    (unsigned long long)s->features,
			    (unsigned long long)s->features_offered);
	rc = validate_features(s->features, s->backend, err, errlen);
	if (rc)
		return rc;
	rc = validate_policy(&s->policy, err, errlen);
	if (rc)
		return rc;

	/* C6, F1, F2: the memory table as a whole. */
	rc = memtable_validate_flags(s->regions, s->nregions,
				     s->memory_unsealed_ok ? MEMTABLE_UNSEALED_OK : 0, sub, sizeof(sub));
	if (rc == 0)
		rc = memtable_check_pages(s->regions, s->nregions, sub, sizeof(sub));
	if (rc)
		return sup_errf(err, errlen, rc, "memory table: %s", sub);

	if (s->pair >= NIC_MAX_PAIRS)
		return sup_errf(err, errlen, -EINVAL, "queue pair %u: at most %u pairs", s->pair,
			    NIC_MAX_PAIRS);
	if (s->nqueues != NIC_NUM_QUEUES)
		return sup_errf(err, errlen, -EINVAL, "%u queues given, exactly %d (rx%u, tx%u) required",
			    s->nqueues, NIC_NUM_QUEUES, s->pair, s->pair);
	for (unsigned i = 0; i < s->nqueues; i++) {
		const struct nic_queue_spec *q = &s->queues[i];
		int slot = nic_queue_slot(s->pair, q->index);
		char qn[16];

		if (slot < 0)
			return sup_errf(err, errlen, -EINVAL, "queue index %u is out of range (%u..%u)",
				    q->index, 2 * s->pair, 2 * s->pair + NIC_NUM_QUEUES - 1);
		if (seen[slot])
			return sup_errf(err, errlen, -EINVAL, "queue index %u given twice", q->index);
		seen[slot] = true;
		virtio_net_queue_name(q->index, qn, sizeof(qn));
		if (q->avail_idx > 0xffff)
			return sup_errf(err, errlen, -EINVAL, "queue %s: avail_idx %u does not fit 16 bits",
				    qn, q->avail_idx);
		rc = validate_ring_addrs(s->regions, s->nregions, q->size,
					 q->desc, q->avail, q->used, sub, sizeof(sub));
		if (rc)
			return sup_errf(err, errlen, rc, "queue %s: %s", qn, sub);
		rc = validate_eventfd(q->kick_fd, sub, sizeof(sub));
		if (rc)
			return sup_errf(err, errlen, rc, "queue %s kick: %s", qn, sub);
		rc = validate_eventfd(q->call_fd, sub, sizeof(sub));
		if (rc)
			return sup_errf(err, errlen, rc, "queue %s call: %s", qn, sub);
	}

	/* The dirty log (vhost-user, issue 14): the rules of a log from the
	 * front end, and large enough for every region. */
	if (s->log_size > 0) {
		rc = validate_dirty_log(s->log_fd, s->log_size, s->log_offset, err, errlen);
		if (rc == 0)
			rc = validate_log_covers(s->regions, s->nregions, s->log_size, err, errlen);
		if (rc)
			return rc;
	}

	/* AF_PACKET: an existing interface (a veth end, a NIC), named. */
	if (s->backend == NIC_BACKEND_AF_PACKET && !s->tap_name[0])
		return sup_errf(err, errlen, -EINVAL, "an af_packet backend needs an interface name");
	if (s->backend == NIC_BACKEND_TAP || s->backend == NIC_BACKEND_AF_PACKET) {
		if (s->tap_name[0]) {
			rc = validate_ifname(s->tap_name, sub, sizeof(sub));
			if (rc)
				return sup_errf(err, errlen, rc, "%s%s", s->backend == NIC_BACKEND_AF_PACKET
					    ? "af_packet backend: " : "", sub);
		}
		if (s->netns[0]) {
			rc = validate_netns_name(s->netns, err, errlen);
			if (rc)
				return rc;
		}
		if (s->backend_fd >= 0)
			return sup_errf(err, errlen, -EINVAL, "a tap or af_packet backend takes no fd "
				    "from the VMM");
	} else if (s->backend == NIC_BACKEND_TAP_FD) {
		rc = validate_tap_fd(s->backend_fd, sub, sizeof(sub));
		if (rc)
			return sup_errf(err, errlen, rc, "%s", sub);
	} else {
		rc = validate_backend_socket(s->backend_fd, sub, sizeof(sub));
		if (rc)
			return sup_errf(err, errlen, rc, "%s", sub);
	}
	return 0;
}

int validate_dirty_log(int fd, uint64_t size, uint64_t offset, char *err, size_t errlen)
{
	return validate_shared_memfd("dirty log", fd, size, offset, VALIDATE_LOG_MAX, err, errlen);
}

int validate_shared_memfd(const char *what, int fd, uint64_t size, uint64_t offset, uint64_t max,
			  char *err, size_t errlen)
{
	struct memtable_region_desc d = { .gpa = 0, .size = size, .offset = offset, .fd = fd };
	struct stat st;
	struct statfs sfs;
	uint64_t end;
	char sub[200];
	int seals;

	if (size == 0 || size > max)
		return sup_errf(err, errlen, -EINVAL, "%s: size %llu is outside 1..%llu", what,
			    (unsigned long long)size, (unsigned long long)max);
	/* CVE-2020-10722 (DPDK): offset + size wrapped before the mmap. */
	if (__builtin_add_overflow(offset, size, &end) || end > (uint64_t)INT64_MAX)
		return sup_errf(err, errlen, -EINVAL, "%s: offset 0x%llx + size 0x%llx overflows",
			    what, (unsigned long long)offset, (unsigned long long)size);
	if (fd < 0 || fstat(fd, &st) < 0)
		return sup_errf(err, errlen, -EINVAL, "%s: fd %d is not open", what, fd);
	if (!S_ISREG(st.st_mode) || fstatfs(fd, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC)
		return sup_errf(err, errlen, -EINVAL,
			    "%s: the fd is not a memfd (a regular file on tmpfs)", what);
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return sup_errf(err, errlen, -EINVAL,
			    "%s: the memfd is not sealed against shrinking (F_SEAL_SHRINK): "
			    "it could shrink under the worker that maps it (SIGBUS)", what);
	if (end > (uint64_t)st.st_size)
		return sup_errf(err, errlen, -EINVAL,
			    "%s: offset+size 0x%llx is beyond the memfd's 0x%llx bytes", what,
			    (unsigned long long)end, (unsigned long long)st.st_size);
	/* The rest of what a shared read-write mapping needs (open O_RDWR,
	 * no write seal) by the memory table's own rules. */
	if (memtable_validate(&d, 1, sub, sizeof(sub)) < 0)
		return sup_errf(err, errlen, -EINVAL, "%s: %s", what,
			    strncmp(sub, "region 0: ", 10) ? sub : sub + 10);
	return 0;
}

int validate_log_covers(const struct memtable_region_desc *r, unsigned nr, uint64_t log_size,
			char *err, size_t errlen)
{
	for (unsigned i = 0; i < nr; i++) {
		/* memtable_validate ruled out a wrap; the last byte's page. */
		uint64_t last_page = (r[i].gpa + r[i].size - 1) / VALIDATE_LOG_PAGE;

		if (last_page / 8 >= log_size)
			return sup_errf(err, errlen, -EINVAL,
				    "dirty log of %llu bytes covers guest memory below 0x%llx; a "
				    "region ends at 0x%llx", (unsigned long long)log_size,
				    (unsigned long long)(log_size * 8 * VALIDATE_LOG_PAGE),
				    (unsigned long long)(r[i].gpa + r[i].size));
	}
	return 0;
}
