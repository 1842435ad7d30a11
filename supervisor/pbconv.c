/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pbconv: the one place where protobuf messages (vmm.proto, the parts of
 * worker.proto that reuse them) become plain C and back. Everything else
 * in the supervisor works on struct nic_spec, struct vnic_policy, enum
 * nic_state and enum nic_result.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libvnic.h"
#include "pbconv.h"

/* The public header spells the bits of virtio_net.h once more (it cannot
 * include a private header); they must agree. */
#define PBCONV_SAME_BIT(pub, bit) _Static_assert((pub) == (1ull << (bit)), #pub)
PBCONV_SAME_BIT(VNIC_F_CSUM, VIRTIO_NET_F_CSUM);
PBCONV_SAME_BIT(VNIC_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_CSUM);
PBCONV_SAME_BIT(VNIC_F_MTU, VIRTIO_NET_F_MTU);
PBCONV_SAME_BIT(VNIC_F_MAC, VIRTIO_NET_F_MAC);
PBCONV_SAME_BIT(VNIC_F_GUEST_TSO4, VIRTIO_NET_F_GUEST_TSO4);
PBCONV_SAME_BIT(VNIC_F_GUEST_TSO6, VIRTIO_NET_F_GUEST_TSO6);
PBCONV_SAME_BIT(VNIC_F_HOST_TSO4, VIRTIO_NET_F_HOST_TSO4);
PBCONV_SAME_BIT(VNIC_F_HOST_TSO6, VIRTIO_NET_F_HOST_TSO6);
PBCONV_SAME_BIT(VNIC_F_GUEST_UFO, VIRTIO_NET_F_GUEST_UFO);
PBCONV_SAME_BIT(VNIC_F_HOST_UFO, VIRTIO_NET_F_HOST_UFO);
PBCONV_SAME_BIT(VNIC_F_MRG_RXBUF, VIRTIO_NET_F_MRG_RXBUF);
PBCONV_SAME_BIT(VNIC_F_INDIRECT_DESC, VIRTIO_F_INDIRECT_DESC);
PBCONV_SAME_BIT(VNIC_F_EVENT_IDX, VIRTIO_F_EVENT_IDX);
PBCONV_SAME_BIT(VNIC_F_VERSION_1, VIRTIO_F_VERSION_1);

/* A page counter (always 64 bits) into a field whose largest value is max. */
static uint64_t saturate(uint64_t v, uint64_t max)
{
	return v > max ? max : v;
}

void pbconv_queue_counters(const struct stats_queue_snapshot *sn, Vnic__Vmm__QueueStatus *q)
{
#define PBCONV_COUNTER(type, name, kind) q->name = (type)saturate(sn->name, (type)-1);
	VNIC_QUEUE_COUNTERS(PBCONV_COUNTER)
#undef PBCONV_COUNTER
}

Vnic__Vmm__Status pbconv_result(enum nic_result r)
{
	switch (r) {
	case NIC_RES_OK: return VNIC__VMM__STATUS__STATUS_OK;
	case NIC_RES_UNAVAILABLE: return VNIC__VMM__STATUS__STATUS_UNAVAILABLE;
	case NIC_RES_DEADLINE: return VNIC__VMM__STATUS__STATUS_DEADLINE_EXCEEDED;
	}
	return VNIC__VMM__STATUS__STATUS_INTERNAL;
}

Vnic__Vmm__NicState pbconv_state(enum nic_state s)
{
	switch (s) {
	case NIC_STARTING: return VNIC__VMM__NIC_STATE__NIC_STATE_STARTING;
	case NIC_RUNNING: return VNIC__VMM__NIC_STATE__NIC_STATE_RUNNING;
	case NIC_STOPPING: return VNIC__VMM__NIC_STATE__NIC_STATE_STOPPING;
	case NIC_RESTARTING: return VNIC__VMM__NIC_STATE__NIC_STATE_RESTARTING;
	case NIC_FAILED: return VNIC__VMM__NIC_STATE__NIC_STATE_FAILED;
	case NIC_GONE: return VNIC__VMM__NIC_STATE__NIC_STATE_GONE;
	case NIC_STALLED: return VNIC__VMM__NIC_STATE__NIC_STATE_STALLED;
	case NIC_NSTATES: break;
	}
	return VNIC__VMM__NIC_STATE__NIC_STATE_UNSPECIFIED;
}

/* Copy a protobuf string into a fixed buffer; false when it does not fit. */
static bool copy_str(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (n >= size)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

/* Decode AddNic into plain C. fds stay in the frame (borrowed). Only
 * structural decoding here; every rule is in validate_nic_spec. */
int pbconv_add_nic(const Vnic__Vmm__AddNic *a, const struct wire_fds *fds,
			  const struct wire_fd_layout *lay, struct nic_spec *s,
			  char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->backend_fd = -1;
	s->id_len = strlen(a->id);
	if (s->id_len > VALIDATE_ID_MAX) {
		snprintf(err, errlen, "nic id is %zu bytes, at most %u allowed", s->id_len,
			 VALIDATE_ID_MAX);
		return -EINVAL;
	}
	memcpy(s->id, a->id, s->id_len + 1);
	s->mac_len = a->mac.len;
	if (a->mac.len == 6)
		memcpy(s->mac, a->mac.data, 6);
	s->mtu = a->mtu ? a->mtu : PBCONV_MTU_DEFAULT;
	s->features_offered = a->features_offered;
	s->features = a->features_acked;

	s->nregions = (unsigned)a->n_regions;
	s->regions = calloc(a->n_regions ? a->n_regions : 1, sizeof(*s->regions));
	s->nqueues = (unsigned)a->n_queues;
	s->queues = calloc(a->n_queues ? a->n_queues : 1, sizeof(*s->queues));
	if (!s->regions || !s->queues) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < a->n_regions; i++) {
		s->regions[i].gpa = a->regions[i]->gpa;
		s->regions[i].size = a->regions[i]->size;
		s->regions[i].offset = a->regions[i]->offset;
		s->regions[i].fd = fds->fd[i];
	}
	for (size_t j = 0; j < a->n_queues; j++) {
		const Vnic__Vmm__Queue *q = a->queues[j];

		s->queues[j].index = q->index;
		s->queues[j].size = q->size;
		s->queues[j].desc = q->desc_gpa;
		s->queues[j].avail = q->avail_gpa;
		s->queues[j].used = q->used_gpa;
		s->queues[j].avail_idx = q->avail_idx;
		s->queues[j].kick_fd = fds->fd[wire_fd_kick(lay, (unsigned)j)];
		s->queues[j].call_fd = fds->fd[wire_fd_call(lay, (unsigned)j)];
	}
	if (a->backend) {
		switch (a->backend->kind_case) {
		case VNIC__VMM__BACKEND__KIND_TAP:
			s->backend = NIC_BACKEND_TAP;
			if (!copy_str(s->tap_name, sizeof(s->tap_name), a->backend->tap->name)) {
				snprintf(err, errlen, "tap name is longer than 15 bytes");
				return -EINVAL;
			}
			if (!copy_str(s->netns, sizeof(s->netns), a->backend->tap->netns)) {
				snprintf(err, errlen, "netns name is too long");
				return -EINVAL;
			}
			break;
		case VNIC__VMM__BACKEND__KIND_SOCKET:
			s->backend = NIC_BACKEND_SOCKET;
			break;
		case VNIC__VMM__BACKEND__KIND_TAP_FD:
			s->backend = NIC_BACKEND_TAP_FD;
			break;
		case VNIC__VMM__BACKEND__KIND_AF_PACKET:
			s->backend = NIC_BACKEND_AF_PACKET;
			if (!copy_str(s->tap_name, sizeof(s->tap_name), a->backend->af_packet->ifname)) {
				snprintf(err, errlen, "af_packet interface name is longer than 15 bytes");
				return -EINVAL;
			}
			if (!copy_str(s->netns, sizeof(s->netns), a->backend->af_packet->netns)) {
				snprintf(err, errlen, "netns name is too long");
				return -EINVAL;
			}
			break;
		default:
			break;
		}
	}
	if (lay->backend >= 0) {
		s->backend_fd = fds->fd[lay->backend];
		s->backend_fds = &fds->fd[lay->backend];
		s->nbackend = lay->nbackend;
	}
	policy_from_pb(a->policy, &s->policy);
	return 0;
}

int pbconv_add_vhost_user(const Vnic__Vmm__AddVhostUser *a, struct vu_config *cfg,
			  char *err, size_t errlen)
{
	memset(cfg, 0, sizeof(*cfg));
	if (!copy_str(cfg->id, sizeof(cfg->id), a->id)) {
		snprintf(err, errlen, "nic id is longer than %u bytes", VALIDATE_ID_MAX);
		return -EINVAL;
	}
	if (!copy_str(cfg->path, sizeof(cfg->path), a->path)) {
		snprintf(err, errlen, "socket path is longer than %zu bytes", sizeof(cfg->path) - 1);
		return -EINVAL;
	}
	cfg->server = a->server;
	if (!a->tap) {
		snprintf(err, errlen, "a vhost-user endpoint needs a tap backend");
		return -EINVAL;
	}
	if (!copy_str(cfg->tap, sizeof(cfg->tap), a->tap->name)) {
		snprintf(err, errlen, "tap name is longer than 15 bytes");
		return -EINVAL;
	}
	if (!copy_str(cfg->netns, sizeof(cfg->netns), a->tap->netns)) {
		snprintf(err, errlen, "netns name is too long");
		return -EINVAL;
	}
	if (a->mac.len != 0 && a->mac.len != 6) {
		snprintf(err, errlen, "mac is %zu bytes, 6 expected", a->mac.len);
		return -EINVAL;
	}
	if (a->mac.len == 6) {
		memcpy(cfg->mac, a->mac.data, 6);
		cfg->mac_set = true;
	}
	cfg->mtu = a->mtu;
	cfg->af_packet = a->af_packet;
	policy_from_pb(a->policy, &cfg->policy);
	return 0;
}
