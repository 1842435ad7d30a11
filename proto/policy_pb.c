/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_pb: the TX policy between libvnic.h and vmm.proto (policy_pb.h),
 * and the names of its modes.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "policy_pb.h"

/* The C enum is the protocol's: a value converts by a plain cast. */
#define POLICY_SAME_MODE(c, pb) _Static_assert((int)(c) == (int)(pb), #c " differs from " #pb)
POLICY_SAME_MODE(VNIC_MITIGATION_DEFAULT, VNIC__VMM__MITIGATION__MITIGATION_DEFAULT);
POLICY_SAME_MODE(VNIC_MITIGATION_TIMER, VNIC__VMM__MITIGATION__MITIGATION_TIMER);
POLICY_SAME_MODE(VNIC_MITIGATION_BH, VNIC__VMM__MITIGATION__MITIGATION_BH);
POLICY_SAME_MODE(VNIC_MITIGATION_ADAPTIVE, VNIC__VMM__MITIGATION__MITIGATION_ADAPTIVE);
POLICY_SAME_MODE(VNIC_MITIGATION_POLL, VNIC__VMM__MITIGATION__MITIGATION_POLL);

/* The one table of mode names (vnicctl, vnic-bench, vnicd's logs). */
static const char *const mitigation_names[] = {
	[VNIC_MITIGATION_DEFAULT] = "default",
	[VNIC_MITIGATION_TIMER] = "timer",
	[VNIC_MITIGATION_BH] = "bh",
	[VNIC_MITIGATION_ADAPTIVE] = "adaptive",
	[VNIC_MITIGATION_POLL] = "poll",
};
#define MITIGATION_NNAMES (sizeof(mitigation_names) / sizeof(mitigation_names[0]))
_Static_assert(MITIGATION_NNAMES == VNIC_MITIGATION_POLL + 1, "a mode without a name");

const char *vnic_mitigation_name(enum vnic_mitigation m)
{
	return (unsigned)m < MITIGATION_NNAMES ? mitigation_names[m] : "?";
}

int vnic_mitigation_from_name(const char *name, enum vnic_mitigation *ret)
{
	for (unsigned i = 0; name && i < MITIGATION_NNAMES; i++) {
		if (!strcmp(name, mitigation_names[i])) {
			if (ret)
				*ret = (enum vnic_mitigation)i;
			return 0;
		}
	}
	return -EINVAL;
}

void policy_to_pb(const struct vnic_policy *p, Vnic__Vmm__Policy *pb)
{
	vnic__vmm__policy__init(pb);
	pb->mode = (Vnic__Vmm__Mitigation)p->mode;
	pb->timer_us = p->timer_us;
	pb->poll_us = p->poll_us;
	pb->budget_packets = p->budget_packets;
	pb->budget_bytes = p->budget_bytes;
	pb->latency_us = p->latency_us;
	pb->safety_pct = p->safety_pct;
	pb->max_window = p->max_window;
	pb->rx_irq_us = p->rx_irq_us;
	pb->rx_irq_frames = p->rx_irq_frames;
	pb->tx_irq_us = p->tx_irq_us;
	pb->tx_irq_frames = p->tx_irq_frames;
}

void policy_from_pb(const Vnic__Vmm__Policy *pb, struct vnic_policy *p)
{
	memset(p, 0, sizeof(*p));
	if (!pb)
		return;
	p->mode = (enum vnic_mitigation)pb->mode;
	p->timer_us = pb->timer_us;
	p->poll_us = pb->poll_us;
	p->budget_packets = pb->budget_packets;
	p->budget_bytes = pb->budget_bytes;
	p->latency_us = pb->latency_us;
	p->safety_pct = pb->safety_pct;
	p->max_window = pb->max_window;
	p->rx_irq_us = pb->rx_irq_us;
	p->rx_irq_frames = pb->rx_irq_frames;
	p->tx_irq_us = pb->tx_irq_us;
	p->tx_irq_frames = pb->tx_irq_frames;
}
