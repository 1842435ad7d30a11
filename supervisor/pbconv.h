/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pbconv: protobuf <-> C for the supervisor, in one place (pbconv.c).
 */
#ifndef VNIC_PBCONV_H
#define VNIC_PBCONV_H

#include "nic_state.h"
#include "policy_pb.h" /* the policy: policy_to_pb, policy_from_pb */
#include "supervisor.h"
#include "validate.h"
#include "vhost_user.h"
#include "wire.h"
#include "workers/stats.h"

#define PBCONV_MTU_DEFAULT SUP_MTU_DEFAULT

/* pbconv_queue_counters - every VNIC_QUEUE_COUNTERS field of a queue's
 * snapshot into its QueueStatus (saturated to the message's type); the
 * name and broken state are the caller's. */
void pbconv_queue_counters(const struct stats_queue_snapshot *sn, Vnic__Vmm__QueueStatus *q);
Vnic__Vmm__Status pbconv_result(enum nic_result r);
Vnic__Vmm__NicState pbconv_state(enum nic_state s);
/*
 * pbconv_add_nic - decode AddNic into plain C. fds stay in the frame
 * (borrowed); structural decoding only, every rule is validate_nic_spec's.
 * s->regions and s->queues are allocated (the caller frees them, also on
 * failure). Returns 0, -EINVAL or -ENOMEM with err filled.
 */
int pbconv_add_nic(const Vnic__Vmm__AddNic *a, const struct wire_fds *fds,
		   const struct wire_fd_layout *lay, struct nic_spec *s,
		   char *err, size_t errlen);

/* pbconv_add_vhost_user - AddVhostUser into plain C (sizes checked; the
 * rules are vu_endpoint_add's). */
int pbconv_add_vhost_user(const Vnic__Vmm__AddVhostUser *a, struct vu_config *cfg,
			  char *err, size_t errlen);

#endif
