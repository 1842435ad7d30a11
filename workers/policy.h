/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy: TX mitigation policies of the engine (issue 9). How a TX queue
 * decides when to serve its ring and when to ask the guest for a kick.
 *
 * A policy is a small table of hooks (struct net_policy), one file each:
 *   policy_timer.c    "timer": on a kick, kicks off, flush after timer_us
 *                     (QEMU's tx=timer, x-txtimer=150), a budget per flush
 *   policy_bh.c       "bh": drain at once with kicks off, kicks on, re-check
 *   policy_adaptive.c "adaptive": a kick every N packets through
 *                     EVENT_IDX's avail_event, N from the measured rate and
 *                     an allowable latency; a timer at that latency
 *   policy_poll.c     "poll": busy-poll the ring for poll_us after it
 *                     empties, then kicks on and re-check
 * policy.c dispatches (net_tx_kick, net_tx_timer, ...) and switches.
 * Interrupt coalescing on the used rings of both directions (irq.c)
 * rides in the same struct vnic_policy and switches with it.
 *
 * The engine knows no libevent: a policy that wants a timer asks the
 * caller through net_ops.timer (arm after N us, or cancel); the caller
 * owns the timer and calls net_tx_timer when it fires. A hook returns
 * what to wait for next (enum net_run); NET_POLL means "call net_tx_resume
 * again as soon as the other ready events ran" (a busy-poll spin).
 *
 * Every hook ends in one of three safe states (tests/notify.pml checks
 * the protocol): kicks on and the ring re-checked empty after Barrier K;
 * kicks off with a timer armed or a run scheduled (MORE, POLL) or the
 * backend's writability awaited (TX_BLOCKED); or broken.
 */
#ifndef VNIC_POLICY_H
#define VNIC_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "libvnic.h"

struct net_dev;
struct net_queue;

/* The modes and their parameters are libvnic.h's enum vnic_mitigation and
 * struct vnic_policy, the one contract from the VMM to here; the engine
 * runs TIMER, BH, ADAPTIVE and POLL (DEFAULT is bh) and leaves the budgets
 * to net_set_budget. */

/* Defaults (the supervisor resolves them; the engine applies them to a 0
 * too) and bounds (the supervisor refuses values outside with
 * INVALID_ARGUMENT). */
#define NET_TIMER_US_DEFAULT    150u     /* QEMU x-txtimer */
#define NET_POLL_US_DEFAULT     50u      /* poll: 0 in a request = always */
#define NET_LATENCY_US_DEFAULT  100u     /* adaptive: allowable latency */
#define NET_SAFETY_PCT_DEFAULT  80u      /* adaptive: the seed's 0.8 */
#define NET_WINDOW_MAX_DEFAULT  64u      /* adaptive: largest window */
#define NET_TIMER_US_MIN        1u
#define NET_TIMER_US_MAX        100000u  /* 100 ms */
#define NET_POLL_US_MAX         1000000u /* 1 s */
#define NET_LATENCY_US_MIN      5u
#define NET_LATENCY_US_MAX      100000u
#define NET_SAFETY_PCT_MIN      10u
#define NET_SAFETY_PCT_MAX      100u
#define NET_WINDOW_MAX_MAX      4096u    /* and at most half the queue */
/* Interrupt coalescing (irq.c): 0 = off / no frame limit, the default. */
#define NET_IRQ_US_MAX          10000u   /* 10 ms */
#define NET_IRQ_FRAMES_MAX      32768u   /* the largest ring */

/* Per TX queue state of whichever policy runs it (struct net_queue.ps). */
struct net_policy_state {
	bool timer_armed;      /* we asked net_ops.timer for a callback */
	/* adaptive */
	unsigned window;       /* packets per kick asked for (1: every packet) */
	double rate_pps;       /* EWMA of the served packet rate */
	uint64_t sample_ns;    /* start of the current rate sample */
	uint64_t sample_pkts;  /* packets served in it */
	/* poll */
	bool polling;          /* spinning: kicks off, a spin scheduled */
	uint64_t last_work_ns; /* last spin (or kick) that found work */
};

/* A policy: every hook gets a configured, unbroken TX queue. */
struct net_policy {
	enum vnic_mitigation mode; /* its name: vnic_mitigation_name */
	/* The queue switches to this policy (state zeroed before). */
	void (*enable)(struct net_dev *d, struct net_queue *q);
	/* The queue leaves this policy: drop timers and spins. The next
	 * policy's on_run follows at once, so nothing is left waiting. */
	void (*disable)(struct net_dev *d, struct net_queue *q);
	/* The guest kicked. */
	int (*on_kick)(struct net_dev *d, struct net_queue *q);
	/* Run again: after NET_MORE/NET_POLL, the backend became writable,
	 * Start, a restart, or a switch to this policy. */
	int (*on_run)(struct net_dev *d, struct net_queue *q);
	/* The timer asked for through net_ops.timer fired. */
	int (*on_timer)(struct net_dev *d, struct net_queue *q);
	/* The RX queue of the same pair ran and moved rx_pkts frames (NULL:
	 * nothing to do). Return NET_IDLE to change nothing. */
	int (*after_rx)(struct net_dev *d, struct net_queue *q, unsigned rx_pkts);
};

extern const struct net_policy net_policy_timer, net_policy_bh, net_policy_adaptive,
	net_policy_poll;

/* net_policy_find - the table of a mode, or NULL. */
const struct net_policy *net_policy_find(enum vnic_mitigation mode);

/* net_policy_fill - params with 0 (and DEFAULT or an unknown mode)
 * replaced by the defaults, values clamped to the bounds above. poll_us 0
 * stays 0; the budgets are left as they are. */
void net_policy_fill(struct vnic_policy *p);

#endif
