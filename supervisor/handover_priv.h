/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * handover_priv: what handover.c (vnicd, its connections and NICs) and
 * vhost_user_handover.c (the vhost-user endpoints) share.
 */
#ifndef VNIC_SUP_HANDOVER_PRIV_H
#define VNIC_SUP_HANDOVER_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "handover.pb-c.h"
#include "handover.h"

struct sup;
struct nic;
struct stats_queue_snapshot;

/* Every allocation of a message being built: freed together. */
struct ho_arena {
	void **p;
	size_t n, cap;
	bool oom;
};

void *ho_alloc(struct ho_arena *a, size_t size);
char *ho_str(struct ho_arena *a, const char *s);
/* ho_array - n pointers (NULL when n is 0). */
void **ho_array(struct ho_arena *a, size_t n);

struct handover {
	Vnic__Handover__Handover *m;
	int memfd;
	int *fds;          /* every fd the message names, sorted */
	size_t nfds;
	bool from_store;   /* a restart's, from systemd's fd store (fdstore.c) */
};

/* vhost_user_handover.c */
/* vu_handover_busy - an endpoint in the middle of something (a removal, a
 * message being read or answered later, a pair stopping): why, or NULL.
 * With @cut (the fd store's state), a connection with a message half
 * read is not busy: its fd goes into cut, to be shut down at a restore. */
struct ho_fds;
const char *vu_handover_busy(struct sup *s, char *buf, size_t len, struct ho_fds *cut);

/* A growing list of fds (the connections a restore shuts down). */
struct ho_fds {
	int *v;
	size_t n, cap;
	bool oom;
};
void ho_fds_add(struct ho_fds *f, int fd);
/* vu_handover_save - every endpoint into m (NULL on out of memory). */
int vu_handover_save(struct sup *s, struct ho_arena *a, Vnic__Handover__Handover *m);
/* vu_handover_check - the endpoints of m are whole (pairs, rings, regions
 * in range; every pair with a NIC has one NIC of that endpoint and pair). */
int vu_handover_check(const Vnic__Handover__Handover *m, char *err, size_t errlen);
/* vu_handover_restore - the endpoints, after the NICs (a pair finds its
 * NIC by id and pair). Returns 0 or a negative errno with err filled. */
int vu_handover_restore(struct sup *s, const Vnic__Handover__Handover *m, char *err,
			size_t errlen);
/* vu_handover_owner - the endpoint with this id, as a NIC owner (NULL: none). */
void *vu_handover_owner(struct sup *s, const char *id);
/* vu_handover_pairs - last: each pair that had a NIC finds it again. */
int vu_handover_pairs(struct sup *s, const Vnic__Handover__Handover *m, char *err,
		      size_t errlen);

/* handover.c: the regions and counters both halves write. */
struct memtable_region_desc;
Vnic__Handover__Region *ho_region(struct ho_arena *a, const struct memtable_region_desc *d,
				  uint64_t uva, bool sealed);
void ho_region_load(const Vnic__Handover__Region *r, struct memtable_region_desc *d);
Vnic__Handover__Counters *ho_counters_save(struct ho_arena *a,
					   const struct stats_queue_snapshot *s);
void ho_counters_load(const Vnic__Handover__Counters *c, struct stats_queue_snapshot *s);
/* nic_policy_check - a handed-over policy validate_policy accepts (a
 * resolved one: what a worker was given). Returns 0 or -EINVAL, err filled. */
int nic_policy_check(const Vnic__Vmm__Policy *pb, char *err, size_t errlen);
/* ho_ns / ho_ts: a CLOCK_MONOTONIC timespec as nanoseconds and back. */
uint64_t ho_ns(const struct timespec *t);
struct timespec ho_ts(uint64_t ns);

#endif
