/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * virtio_net.h - the virtio-net contract every part of vnicd shares: the
 * feature bits (virtio 1.x 5.1.3 and transport bits, 6), the virtio-net
 * header lengths, and how virtqueues are numbered and named (5.1.2).
 * One definition here; the worker, the supervisor, the vhost-user door and
 * the tests include it. (libvnic.h, the public header, spells the same
 * bits as VNIC_F_*; supervisor/pbconv.c asserts at
 * compile time that both agree.)
 */
#ifndef VNIC_VIRTIO_NET_H
#define VNIC_VIRTIO_NET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* virtio-net feature bits (5.1.3). */
#define VIRTIO_NET_F_CSUM       0
#define VIRTIO_NET_F_GUEST_CSUM 1
#define VIRTIO_NET_F_MTU        3
#define VIRTIO_NET_F_MAC        5
#define VIRTIO_NET_F_GUEST_TSO4 7
#define VIRTIO_NET_F_GUEST_TSO6 8
#define VIRTIO_NET_F_GUEST_ECN  9
#define VIRTIO_NET_F_GUEST_UFO  10
#define VIRTIO_NET_F_HOST_TSO4  11
#define VIRTIO_NET_F_HOST_TSO6  12
#define VIRTIO_NET_F_HOST_ECN   13
#define VIRTIO_NET_F_HOST_UFO   14
#define VIRTIO_NET_F_MRG_RXBUF  15
#define VIRTIO_NET_F_STATUS     16
#define VIRTIO_NET_F_CTRL_VQ    17
#define VIRTIO_NET_F_GUEST_ANNOUNCE 21
#define VIRTIO_NET_F_MQ         22
#define VIRTIO_NET_F_HOST_USO   56

/* Transport feature bits (6). */
#define VIRTIO_F_NOTIFY_ON_EMPTY 24
#define VIRTIO_F_ANY_LAYOUT      27
#define VIRTIO_F_INDIRECT_DESC   28
#define VIRTIO_F_EVENT_IDX       29
#define VIRTIO_F_VERSION_1       32
#define VIRTIO_F_RING_PACKED     34

/* The virtio-net header on a tap (TUNSETVNETHDRSZ): with VERSION_1 or
 * MRG_RXBUF it has num_buffers, 12 bytes; vnicd always sets 12. */
#define VIRTIO_NET_HDR_LEN     10
#define VIRTIO_NET_HDR_MRG_LEN 12

/* Virtqueues of a NIC in this version: exactly rx0 (index 0) and tx0
 * (index 1), one queue pair, as 5.1.2 numbers them without multiqueue. */
#define NIC_NUM_QUEUES 2
#define NIC_QUEUE_RX0 0
#define NIC_QUEUE_TX0 1

/* Queue pairs of one NIC at most (issue 15). Each pair is served by its
 * own worker, whose queues are virtqueues 2k and 2k + 1. 8, because every
 * queue of a NIC must fit its status and RemoveNic answers: libvnic's ABI
 * has VNIC_MAX_QUEUES (16) queues per NIC. More pairs (vhost-user could
 * name 128) need a status paged per NIC first. */
#define NIC_MAX_PAIRS 8u

/* Queue name for logs and status: "rx0", "tx0", "rx1", ... */
static inline void virtio_net_queue_name(unsigned qidx, char *buf, size_t len)
{
	snprintf(buf, len, "%s%u", (qidx & 1u) ? "tx" : "rx", qidx / 2);
}

#endif
