/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nic_state: the transition table. See nic_state.h.
 */
#include "config.h"

#include "nic_state.h"

/*
 * Every allowed transition; anything else is refused. Read it as the
 * lifecycle of one NIC:
 *
 *   AddNic -> STARTING -> RUNNING <-> RESTARTING -> FAILED
 *                          RUNNING -> STALLED -> RESTARTING | FAILED | STOPPING
 *                 \          \           \          \
 *                  `-> STOPPING <---------'          `-> GONE
 *                        `-> GONE
 */
const struct nic_transition nic_transitions[] = {
	{ NIC_STARTING, NIC_RUNNING, "first worker READY: Start sent, AddNic answered OK" },
	{ NIC_STARTING, NIC_STOPPING, "RemoveNic, disconnect or shutdown before READY: killed" },
	{ NIC_STARTING, NIC_GONE, "first start failed (exit, no READY, spawn error): "
				  "AddNic answered with the reason" },
	{ NIC_RUNNING, NIC_STOPPING, "RemoveNic, disconnect or shutdown: Stop sent" },
	{ NIC_RUNNING, NIC_RESTARTING, "worker died (exit, signal, sandbox violation, kill) "
				       "within the restart limit" },
	{ NIC_RUNNING, NIC_FAILED, "worker died and the restart limit is reached (or "
				   "restarts are disabled)" },
	{ NIC_RESTARTING, NIC_RUNNING, "new worker READY: Start sent, NicRestarted" },
	{ NIC_RESTARTING, NIC_STOPPING, "RemoveNic, disconnect or shutdown while a new worker "
					"starts: killed" },
	{ NIC_RESTARTING, NIC_FAILED, "a new worker died too often: restart limit reached" },
	{ NIC_RESTARTING, NIC_GONE, "RemoveNic, disconnect or shutdown during the backoff: "
				    "no worker to stop" },
	{ NIC_STOPPING, NIC_GONE, "worker reaped (after Stopped, its exit, or the deadline "
				  "kill): RemoveNic answered" },
	{ NIC_FAILED, NIC_GONE, "RemoveNic, disconnect or shutdown: no worker to stop" },
	{ NIC_RUNNING, NIC_STALLED, "no heartbeat for SUP_STALL_MS while work is pending: "
				    "the worker is killed" },
	{ NIC_STALLED, NIC_RESTARTING, "the stalled worker reaped, within the restart limit" },
	{ NIC_STALLED, NIC_FAILED, "the stalled worker reaped, restart limit reached" },
	{ NIC_STALLED, NIC_STOPPING, "RemoveNic, disconnect or shutdown while the stalled "
				     "worker is being killed" },
};

const size_t nic_ntransitions = sizeof(nic_transitions) / sizeof(nic_transitions[0]);

const char *nic_state_name(enum nic_state s)
{
	switch (s) {
	case NIC_STARTING: return "STARTING";
	case NIC_RUNNING: return "RUNNING";
	case NIC_STOPPING: return "STOPPING";
	case NIC_RESTARTING: return "RESTARTING";
	case NIC_FAILED: return "FAILED";
	case NIC_GONE: return "GONE";
	case NIC_STALLED: return "STALLED";
	case NIC_NSTATES: break;
	}
	return "?";
}

bool nic_transition_allowed(enum nic_state from, enum nic_state to)
{
	for (size_t i = 0; i < nic_ntransitions; i++)
		if (nic_transitions[i].from == from && nic_transitions[i].to == to)
			return true;
	return false;
}
