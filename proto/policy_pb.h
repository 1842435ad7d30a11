/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_pb: the TX mitigation policy has one contract, libvnic.h's enum
 * vnic_mitigation and struct vnic_policy. The supervisor, the worker and
 * libvnic all hold it in that struct; this is the one conversion to and
 * from vmm.proto's Policy message (policy_pb.c also holds the one table of
 * mode names behind vnic_mitigation_name and vnic_mitigation_from_name,
 * which libvnic exports).
 */
#ifndef VNIC_POLICY_PB_H
#define VNIC_POLICY_PB_H

#include "libvnic.h"
#include "vmm.pb-c.h"

/* policy_to_pb - initialise *pb and fill it from *p. */
void policy_to_pb(const struct vnic_policy *p, Vnic__Vmm__Policy *pb);

/* policy_from_pb - *p from a Policy message; NULL is all defaults (zeroes).
 * The mode is copied as sent, even one this build does not know
 * (validate_policy refuses it). */
void policy_from_pb(const Vnic__Vmm__Policy *pb, struct vnic_policy *p);

#endif
