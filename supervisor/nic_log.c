/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nic_log: rate limits per NIC (issue 10).
 *
 * vnicd's log lines that a guest, a worker or a front end can trigger
 * (the worker's relayed Log lines, QueueBroken reports, dirty log
 * changes) are rate-limited with one
 * bucket per NIC and kind, kept in the NIC (so across its restarts), so
 * that one noisy guest cannot hide another NIC's lines. Lines that belong
 * to no NIC (a VMM's bad frames, vmm_conn.c) keep their own global
 * buckets.
 */
#include "config.h"

#include "supervisor.h"

struct log_ratelimit *nic_log_ratelimit(struct nic *n, enum nic_rl which)
{
	static const unsigned burst[NIC_RL_COUNT] = {
		[NIC_RL_WORKER_LOG] = NIC_RL_WORKER_LOG_BURST,
		[NIC_RL_QUEUE_BROKEN] = NIC_RL_QUEUE_BROKEN_BURST,
		[NIC_RL_DIRTY_LOG] = NIC_RL_DIRTY_LOG_BURST,
		[NIC_RL_ANNOUNCE] = NIC_RL_ANNOUNCE_BURST,
	};

	if (!n->rl_ready) {
		for (int i = 0; i < NIC_RL_COUNT; i++)
			n->rl[i] = (struct log_ratelimit)LOG_RATELIMIT_INIT(NIC_RL_WINDOW_MS, burst[i]);
		n->rl_ready = true;
	}
	return &n->rl[which < NIC_RL_COUNT ? which : NIC_RL_WORKER_LOG];
}
