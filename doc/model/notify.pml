/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * notify.pml - the virtio split-ring notification protocol between the
 * guest driver and vnicd's TX queue, under each TX mitigation policy
 * (workers/policy_*.c), checked with spin (tests/notify_model.sh).
 *
 * Claim: no lost wake-up and no stall. Whenever nothing in the system can
 * move any more (spin's `timeout`: the guest has posted everything and
 * the device sleeps with no kick, no timer and no run pending), the
 * device has consumed every buffer the guest posted. pan also reports
 * invalid end states (a process blocked elsewhere) and, with -DNP / -l,
 * cycles without progress (a device spinning forever without consuming).
 *
 * What is modelled (names as in the code):
 *  - driver (shm/vring_drv.c, tools/guest.c): publish avail->idx, full
 *    barrier, read avail_event (EVENT_IDX) or used->flags
 *    (VRING_USED_F_NO_NOTIFY), kick the eventfd when vring_need_event says so.
 *  - device (shm/vring.c): vring_notify_disable (avail_event behind the
 *    ring / NO_NOTIFY), vring_notify_enable (avail_event = avail->idx, Barrier K,
 *    re-check), vring_notify_enable_window (avail_event = last + W - 1,
 *    Barrier K, re-check), draining with a budget (NET_MORE schedules a
 *    run without a kick).
 *  - the worker's event loop (workers/worker_event.c): one thread that
 *    sleeps until a kick (eventfd, level: a kick sent while the device
 *    runs is still there when it sleeps), a policy timer (net_ops.timer;
 *    fires at any time once armed: every timing is explored) or a
 *    scheduled run (NET_MORE, NET_POLL, Start, a switch).
 *  - the policies: timer (kick -> kicks off -> timer -> flush), bh,
 *    adaptive (any window 1..WMAX: the model does not care how the rate
 *    estimate picks it; W > 1 arms the latency timer), poll (spins, then
 *    kicks on and re-check), and after-RX hooks (adaptive drains, poll
 *    starts spinning) on up to NRX arbitrary RX deliveries.
 *  - SetPolicy at any wake-up, up to NSWITCH times: the old policy's timer
 *    is cancelled, the new policy's run is scheduled.
 * Memory is sequentially consistent except where a mutation says.
 *
 * Mutations (each must make pan fail; the suite checks that):
 *  -DMUT_NO_RECHECK     enable without re-checking the ring afterwards
 *  -DMUT_NO_BARRIER     re-check before the enable is visible (no Barrier K)
 *  -DMUT_NO_WINDOW_TIMER  adaptive sleeps on a window > 1 without a timer
 * Switches: -DNO_EVENT_IDX (the flags instead), -DPOLICY=n (only policy
 * n: 1 timer, 2 bh, 3 adaptive, 4 poll; default: start in any, switch).
 */

#ifndef N
#define N 4          /* buffers the guest posts */
#endif
#define WMAX 3       /* adaptive: largest window */
#define PSPIN 2      /* poll: empty spins before kicks go back on */
#define NSWITCH 2    /* SetPolicy calls */
#define NRX 2        /* RX deliveries (after-RX hooks) */

#define P_TIMER 1
#define P_BH 2
#define P_ADAPTIVE 3
#define P_POLL 4

#define W_RUN 0
#define W_KICK 1
#define W_TIMER 2

byte avail_idx = 0;     /* avail->idx, written by the guest */
byte last_avail = 0;    /* the device's shadow */
byte avail_event = 0;   /* used ring's avail_event, written by the device */
bool no_notify = false; /* used->flags NO_NOTIFY (without EVENT_IDX) */
bool kick = false;      /* the kick eventfd is readable */
bool timer_armed = false;
bool sched = true;        /* a run is scheduled (Start schedules one) */
byte policy;
byte switches = 0;
byte rx_left = NRX;

/* vring_need_event(event, new, old): (u16)(new - event - 1) < (u16)(new - old),
 * on bytes (the indices here never get near a wrap of 256). */
#define NEED_EVENT(ev, nw, old) (((nw) - (ev) - 1 + 256) % 256 < ((nw) - (old) + 256) % 256)

active proctype driver()
{
	byte old;

	do
	:: avail_idx < N ->
		old = avail_idx;
		avail_idx = avail_idx + 1;   /* entry written, Barrier A, idx published */
		/* full barrier, then the suppression state (vring_drv_kick_needed) */
#ifdef NO_EVENT_IDX
		if
		:: !no_notify -> kick = true
		:: else -> skip
		fi
#else
		if
		:: NEED_EVENT(avail_event, avail_idx, old) -> kick = true
		:: else -> skip
		fi
#endif
	:: else -> break
	od
}

/* vring_notify_disable */
inline disable()
{
#ifdef NO_EVENT_IDX
	no_notify = true
#else
	avail_event = last_avail - 1   /* byte: wraps, as (u16)(last - 1) */
#endif
}

/* vring_notify_enable_window(w) (w = 1: vring_notify_enable), then the
 * re-check: pending = buffers arrived that we have not consumed. */
inline enable_recheck(w, pending)
{
#ifdef MUT_NO_BARRIER
	pending = (avail_idx != last_avail);   /* load moved before the store */
#endif
#ifdef NO_EVENT_IDX
	no_notify = false;
#else
	if
	:: w <= 1 -> avail_event = avail_idx   /* kick for any entry after these */
	:: else -> avail_event = last_avail + w - 1
	fi;
#endif
#ifdef MUT_NO_BARRIER
	skip
#elif defined(MUT_NO_RECHECK)
	pending = false
#else
	pending = (avail_idx != last_avail)
#endif
}

/* net_tx_drain: consume until empty (more = false) or the budget is
 * spent with work left (more = true, nondeterministic; a wake-up's budget
 * is at least one chain, found counts the wake-up's chains). */
inline drain(more, found)
{
	more = false;
	do
	:: last_avail != avail_idx -> last_avail++; found++;
progress_consume:
		skip
	:: last_avail != avail_idx && found > 0 ->
		more = true; break   /* budget spent (it is at least one chain) */
	:: else -> break
	od
}

active proctype device()
{
	byte why, w = 1, found, spins = 0;
	bool more, pending, polling = false;

#ifdef POLICY
	policy = POLICY;
#else
	if
	:: policy = P_TIMER
	:: policy = P_BH
	:: policy = P_ADAPTIVE
	:: policy = P_POLL
	fi;
#endif
	do
	:: true ->
end_sleep:
		/* The event loop: whichever event is ready. */
		if
		:: sched -> sched = false; why = W_RUN
		:: kick -> kick = false; why = W_KICK
		:: timer_armed -> timer_armed = false; why = W_TIMER
#ifndef POLICY
		:: switches < NSWITCH ->
			/* SetPolicy: net_set_policy cancels the old policy's
			 * timer and state, then a run is scheduled. */
			switches++;
			timer_armed = false;
			polling = false;
			spins = 0;
			w = 1;
			if
			:: policy = P_TIMER
			:: policy = P_BH
			:: policy = P_ADAPTIVE
			:: policy = P_POLL
			fi;
			sched = true;
			goto next
#endif
		:: rx_left > 0 ->
			/* The RX queue delivered frames: net_tx_after_rx. */
			rx_left--;
			if
			:: policy == P_ADAPTIVE && avail_idx != last_avail ->
				why = W_RUN   /* drain now (the ACKs) */
			:: policy == P_POLL && !polling ->
				disable(); polling = true; sched = true; goto next
			:: else -> goto next
			fi
		fi;
		found = 0;
		if
		:: policy == P_BH ->
			disable();
			do
			:: true ->
				drain(more, found);
				if
				:: more -> sched = true; break   /* NET_MORE: kicks stay off */
				:: else -> skip
				fi;
				enable_recheck(1, pending);
				if
				:: !pending -> break
				:: else -> disable()
				fi
			od
		:: policy == P_TIMER ->
			if
			:: why == W_KICK && timer_armed -> skip   /* already waiting */
			:: why == W_KICK && !timer_armed -> disable(); timer_armed = true
			:: why != W_KICK ->
				/* flush: the timer fired, or a resume */
				timer_armed = false;
				disable();
				drain(more, found);
				if
				:: more -> disable(); timer_armed = true
				:: else ->
					enable_recheck(1, pending);
					if
					:: pending -> disable(); timer_armed = true
					:: else -> skip
					fi
				fi
			fi
		:: policy == P_ADAPTIVE ->
			timer_armed = false;
			disable();
			do
			:: true ->
				drain(more, found);
				if
				:: more -> sched = true; break
				:: else -> skip
				fi;
				/* Any window the estimate may pick, except that a
				 * timer that found nothing means idle: window 1
				 * (and so no timer: the seed's "none in a ping
				 * test"). Without that rule an idle queue's timer
				 * would fire forever (pan -l finds the cycle). */
				if
				:: why == W_TIMER && found == 0 -> w = 1
				:: else ->
					if
					:: w = 1
					:: w = 2
					:: w = WMAX
					fi
				fi;
				enable_recheck(w, pending);
				if
				:: !pending ->
#ifndef MUT_NO_WINDOW_TIMER
					if
					:: w > 1 -> timer_armed = true
					:: else -> skip
					fi;
#endif
					break
				:: else -> disable()
				fi
			od
		:: policy == P_POLL ->
			disable();
			drain(more, found);
			if
			:: more -> polling = true; sched = true
			:: !more && found > 0 -> spins = 0; polling = true; sched = true
			:: !more && found == 0 && spins < PSPIN ->
				spins++; polling = true; sched = true
			:: !more && found == 0 && spins >= PSPIN ->
				spins = 0;
				polling = false;
				enable_recheck(1, pending);
				if
				:: pending -> disable(); polling = true; sched = true
				:: else -> skip
				fi
			fi
		fi;
next:
		skip
	od
}

/* When nothing can move any more, every posted buffer was consumed. */
active proctype monitor()
{
	timeout -> assert(avail_idx == N && last_avail == avail_idx)
}
