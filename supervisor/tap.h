/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap: the supervisor opens the tap for a NIC's tap backend; the worker
 * only reads and writes it (it cannot open anything inside its sandbox).
 */
#ifndef VNIC_TAP_H
#define VNIC_TAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* virtio 1.x net header with num_buffers (spec 5.1.6). */
#define TAP_VNET_HDR_LEN 12

/* tap_configure - set the header size and the offloads that follow from
 * @features on an open tap (also one the VMM passed). */
int tap_configure(int fd, uint64_t features, char *err, size_t errlen);

/*
 * tap_open - create, or attach to, tap interface @name.
 * @name: interface name, "" lets the kernel choose (tapN).
 * @netns: "" for our own network namespace, else the name of a namespace
 *   made by `ip netns add` (/run/netns/NAME): the tap is created there and
 *   stays there; the supervisor switches back before returning.
 * @features: negotiated virtio-net features; the tap's offloads follow
 *   the guest's receive offloads (GUEST_CSUM, GUEST_TSO4/6, GUEST_UFO).
 * The tap is opened with IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, a 12-byte
 * virtio-net header (virtio 1.x always has num_buffers), O_NONBLOCK and
 * O_CLOEXEC, and set up (IFF_UP).
 * Returns: 0, *ret_fd and the kernel's name in ret_name (IFNAMSIZ bytes);
 * or a negative errno with err filled and nothing left open.
 */
int tap_open(const char *name, const char *netns, uint64_t features,
	     int *ret_fd, char *ret_name, char *err, size_t errlen);

/*
 * tap_in_netns - call fn(arg) inside named network namespace @netns ("" or
 * NULL: here) and come back (the supervisor is single-threaded: nobody
 * sees the switch; a failed return exits). Also the AF_PACKET backend's.
 * Returns: fn's value, or a negative errno with err filled.
 */
int tap_in_netns(const char *netns, int (*fn)(void *arg), void *arg, char *err, size_t errlen);

/* Queues of one multi-queue tap: the kernel's limit (MAX_TAP_QUEUES). */
#define TAP_MAX_QUEUES 256u

/*
 * tap_open_queues - as tap_open, with IFF_MULTI_QUEUE and @nq queue fds
 * (1..TAP_MAX_QUEUES) in @fds: the first TUNSETIFF creates the interface
 * or attaches to it, each further one adds a queue. A multi-queue tap
 * also takes more queues later: call it again with the name. A persistent
 * single-queue tap of that name (an older vnicd's) refuses the flag: with
 * @recreated (a tap vnicd owns) it is deleted and made again, and
 * *recreated says so (its addresses and routes are gone with it); with
 * NULL (someone else's tap, a VMM's) the open fails and the tap stays.
 * Returns: 0; or a negative errno with err filled and no fd left open.
 */
int tap_open_queues(const char *name, const char *netns, uint64_t features, unsigned nq,
		    int *fds, char *ret_name, bool *recreated, char *err, size_t errlen);

/* tap_queue_attach - put a queue fd of a multi-queue tap in or out of the
 * kernel's steering (TUNSETQUEUE): a detached queue gets no frame, for a
 * queue pair nobody serves. Returns 0 or a negative errno. */
int tap_queue_attach(int fd, bool on);

/* tap_set_mtu - the interface's MTU (SIOCSIFMTU), in @netns ("" or NULL:
 * ours). */
int tap_set_mtu(const char *ifname, const char *netns, unsigned mtu, char *err, size_t errlen);

/* tap_set_persist - the interface outlives its fd (vhost-user endpoints:
 * across a vnicd restart, with the address the caller gave it). */
int tap_set_persist(int fd, bool on);

#endif
