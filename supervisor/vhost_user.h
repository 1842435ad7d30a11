/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user: vnicd as a vhost-user back end for virtio-net (issue 8).
 *
 * An endpoint is one NIC's vhost-user socket (server: vnicd listens;
 * client: vnicd connects and reconnects with backoff) plus the tap that
 * vnicd opened for it and keeps for the endpoint's whole life. At most one
 * front end is connected at a time. When its rings are ready, the endpoint
 * starts a NIC (nic.c) on the front end's memory and eventfds, as a NIC
 * owner (struct nic_owner_ops): the same worker, validation, inflight
 * region and crash restart as AddNic. GET_VRING_BASE is answered after the
 * worker has been reaped; a new memory table, call fd, MTU or feature set
 * is a planned restart (stop, reap, start on the new configuration at the
 * final indices). The protocol details are in vhost_user.c.
 */
#ifndef VNIC_VHOST_USER_H
#define VNIC_VHOST_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "validate.h"

struct sup;
struct vu_endpoint;

/* What an endpoint is made of (from AddVhostUser or a state file). */
struct vu_config {
	char id[VALIDATE_ID_MAX + 1];
	char path[108];         /* sockaddr_un.sun_path */
	bool server;
	char tap[16];           /* "" lets the kernel choose; af_packet: the interface */
	bool af_packet;         /* tap is an existing interface bound with AF_PACKET */
	char netns[64];
	uint8_t mac[6];
	bool mac_set;           /* false: derived from the id */
	uint32_t mtu;           /* 0: 1500 */
	struct vnic_policy policy;
};

/* What status shows of an endpoint. */
struct vu_status {
	const char *id, *path, *state, *last_error;
	bool server;
	struct nic *nic;        /* the lowest pair's NIC, or NULL: none runs */
	const struct vu_endpoint *ep; /* for vu_status_pair */
	unsigned npairs;        /* pairs it serves: vu_status_pair(0 .. npairs - 1) */
	const struct vnic_policy *policy;
	uint64_t connects, messages, rejected, reconfigs;
	/* As configured (shown while no NIC runs): the tap's name and MTU. */
	const uint8_t *mac;
	const char *tap;
	uint32_t mtu;
	bool af_packet;
	const char *inflight;    /* its region: "front end", "vnicd" or "off" (NicStatus) */
};

/* vu_status_pair - pair k's NIC (NULL: none, or k past the last pair). */
struct nic *vu_status_pair(const struct vu_status *v, unsigned k);

/* Offered to front ends: virtio-net features (with the tap's offloads) and
 * vhost-user protocol features. */
uint64_t vu_offered_features(bool af_packet);
uint64_t vu_offered_protocol_features(void);

/* vu_init - after the event base exists: recreate the endpoints saved in
 * the state directory (s->state_dir; NULL: none). Failures are logged. */
void vu_init(struct sup *s);

/*
 * vu_endpoint_add - validate cfg whole, open the tap, bind (server) or
 * start connecting (client), save the state file. Returns 0 or a negative
 * errno with err filled (then nothing exists). -EEXIST: the id is taken.
 */
int vu_endpoint_add(struct sup *s, const struct vu_config *cfg, char *ifname_out,
		    size_t ifname_len, char *err, size_t errlen);

/* Called when a removal completes: OK, or DEADLINE when the worker had to
 * be killed. */
typedef void (*vu_removed_fn)(void *arg, unsigned conn_id, uint64_t request_id, bool deadline,
			      uint64_t latency_us);

/*
 * vu_endpoint_remove - disconnect the front end, stop and reap the worker,
 * remove the socket (server) and the state file, free the endpoint, then
 * call done(conn_id, request_id). Returns 0 (done follows, maybe at once)
 * or -ENOENT / -EBUSY (already being removed).
 */
int vu_endpoint_remove(struct sup *s, const char *id, uint32_t deadline_ms, vu_removed_fn done,
		       unsigned conn_id, uint64_t request_id);

bool vu_endpoint_exists(struct sup *s, const char *id);

/* vu_tap_user - the id of a vhost-user endpoint or a NIC other than
 * except_id (NULL: none excepted) that uses tap `tap` in netns ("": vnicd's
 * own), else NULL. A multi-queue tap lets a second opener attach queues
 * beside the first (the kernel does not refuse, as it does a single-queue
 * tap in use), so vnicd refuses a second NIC on one tap itself. */
const char *vu_tap_user(struct sup *s, const char *netns, const char *tap,
			const char *except_id);

/* vu_status_list - every endpoint, in no order: fills up to max entries,
 * returns how many there are. */
unsigned vu_status_list(struct sup *s, struct vu_status *out, unsigned max);

/* vu_nic_socket_path - the endpoint's socket for a NIC a vhost-user
 * endpoint owns, else NULL. */
const char *vu_nic_socket_path(const struct nic *n);

/* vu_shutdown - SIGTERM: close every front end connection (their NICs stop
 * with the others) and every listener; state files stay. */
void vu_shutdown(struct sup *s);
/* vu_spares_discard - stop every connection's pre-started worker
 * (worker_spare.h): before an upgrade's exec, which would leave them
 * exiting, unreaped, under the new vnicd. */
void vu_spares_discard(struct sup *s);
/* vu_free_all - at exit, after every NIC is gone. */
void vu_free_all(struct sup *s);

/* The endpoint as a NIC owner (n->owner is the struct vu_endpoint). */
struct nic_owner_ops;
extern const struct nic_owner_ops vu_nic_owner;

/* vu_print_capabilities - QEMU's "Backend program conventions" JSON. */
void vu_print_capabilities(void);

#endif
