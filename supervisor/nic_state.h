/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nic_state: the NIC state machine of the supervisor (issue 5, DESIGN
 * "Lifecycle"): the states and the ONE table of allowed transitions.
 *
 * nic_set_state() (nic.c) consults nic_transition_allowed() for every
 * change; a transition that is not in the table is a bug in vnicd: it is
 * logged at error level and refused (the state stays), never a crash.
 * No libevent, no logging here, so the table is unit-tested on its own
 * (tests/check_lifecycle.c).
 */
#ifndef VNIC_NIC_STATE_H
#define VNIC_NIC_STATE_H

#include <stdbool.h>
#include <stddef.h>

enum nic_state {
	NIC_STARTING,   /* first worker spawned, Config sent, waiting for READY;
			   AddNic not answered yet */
	NIC_RUNNING,    /* READY received, Start sent */
	NIC_STOPPING,   /* RemoveNic, disconnect or shutdown: Stop sent (or the
			   not-yet-READY worker killed); waiting for its reap */
	NIC_RESTARTING, /* the running worker died: a new one is being started
			   on the same fds (or waits out its backoff) */
	NIC_FAILED,     /* the worker died and will not be restarted (restart
			   limit reached, or restarts disabled); no worker; the
			   entry stays for status until RemoveNic/disconnect */
	NIC_GONE,       /* removed from the table; about to be freed */
	NIC_STALLED,    /* the running worker stopped beating its heartbeat while
			   it had work (issue 11): killed; its reap restarts it */
	NIC_NSTATES
};

/* One allowed transition and the event that causes it. */
struct nic_transition {
	enum nic_state from, to;
	const char *when;
};

/* The table itself (nic_state.c), for documentation and tests. */
extern const struct nic_transition nic_transitions[];
extern const size_t nic_ntransitions;

/* "STARTING", "RUNNING", ...; "?" for a value out of range. */
const char *nic_state_name(enum nic_state s);

/* Is from -> to in the table? Out-of-range values and self-transitions
 * are not. */
bool nic_transition_allowed(enum nic_state from, enum nic_state to);

#endif
