/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * irq.pml - the interrupt side of the split ring under vnicd's interrupt
 * coalescing (workers/irq.c), checked with spin (tests/notify_model.sh).
 * notify.pml checks the other direction (kicks, TX policies).
 *
 * Claim: no lost interrupt. Whenever nothing can move any more (spin's
 * `timeout`: the device has published every used entry and sleeps, no
 * timer is armed, the guest sleeps waiting for an interrupt), the guest
 * has reclaimed every used entry. pan also reports invalid end states
 * and, with -DNP / -l, cycles without progress.
 *
 * What is modelled (names as in the code):
 *  - device (net_flush, net_irq_after_flush): publish 1..2 used entries
 *    (a flush), then vring_should_notify (full barrier, used_event or
 *    the NO_INTERRUPT flag against the entries since the last flush,
 *    signalled := new); an interrupt the guest asked for becomes due; it
 *    is sent at once when coalescing is off, when the last one is old
 *    enough (any flush may find so: time is not modelled), when FRAMES
 *    entries were published since it became due, or when the timer
 *    fires; the timer is armed when an interrupt is held back and none
 *    is armed, and
 *    fires at any time once armed (every timing is explored); it is never
 *    cancelled. SetPolicy (net_set_policy) at any time, up to NSWITCH
 *    times, turns coalescing on or off and sends what is due.
 *  - guest driver, as Linux virtio-net's NAPI (virtqueue_disable_cb,
 *    virtqueue_enable_cb_prepare + virtqueue_poll): sleeps until an
 *    interrupt; then callbacks off, reclaims what it finds (any budget),
 *    callbacks on (used_event := last_used, or flag cleared), full
 *    barrier, re-check, and polls again if something came meanwhile.
 *
 * Mutations (each must make pan fail; the suite checks that):
 *  -DMUT_REDECIDE   the due interrupt is decided again at every flush
 *                   (due := should_notify), so a flush the guest did not
 *                   ask about forgets the one it did ask about
 *  -DMUT_NO_TIMER   an interrupt held back without arming the timer
 * Switch: -DNO_EVENT_IDX (the flags instead).
 */

#ifndef N
#define N 4          /* used entries the device publishes */
#endif
#define FRAMES 2     /* the frame limit while coalescing */
#define NSWITCH 2    /* SetPolicy calls */

byte used_idx = 0;      /* used->idx, written by the device */
byte last_used = 0;     /* the guest's shadow */
byte used_event = 0;    /* avail ring's used_event, written by the guest */
bool no_interrupt = false; /* avail->flags NO_INTERRUPT (without EVENT_IDX) */
bool irq = false;       /* the call eventfd is readable */
bool timer_armed = false;
bool due = false;       /* q->irq_due */
byte frames = 0;        /* q->irq_frames */
bool coalesce = true;   /* the policy's *_irq_us != 0 */
byte switches = 0;

#define NEED_EVENT(ev, nw, old) (((nw) - (ev) - 1 + 256) % 256 < ((nw) - (old) + 256) % 256)

/* irq_send */
inline send()
{
	due = false;
	frames = 0;
	irq = true
}

active proctype device()
{
	byte signalled = 0, k;
	bool valid = false, want;

	do
	:: used_idx < N ->
		/* A flush of 1 or 2 entries (never past N). */
		if
		:: k = 1
		:: used_idx + 2 <= N -> k = 2
		fi;
		used_idx = used_idx + k;
		/* vring_should_notify: Barrier N, then the guest's state. */
#ifdef NO_EVENT_IDX
		want = !no_interrupt;
#else
		want = !valid || NEED_EVENT(used_event, used_idx, signalled);
#endif
		signalled = used_idx;
		valid = true;
#ifdef MUT_REDECIDE
		due = want;
#else
		if
		:: want -> due = true
		:: else -> skip
		fi;
#endif
		if
		:: due ->
			frames = frames + k;
			if
			:: !coalesce || frames >= FRAMES -> send()
			:: coalesce && frames < FRAMES ->
				send()   /* the last one is *_irq_us old already */
			:: coalesce && frames < FRAMES ->
#ifndef MUT_NO_TIMER
				if
				:: !timer_armed -> timer_armed = true
				:: else -> skip
				fi
#else
				skip
#endif
			fi
		:: else -> skip
		fi
	:: timer_armed ->
		/* net_irq_timer */
		timer_armed = false;
		if
		:: due -> send()
		:: else -> skip
		fi
	:: switches < NSWITCH ->
		/* net_set_policy: what is due goes now. */
		switches++;
		coalesce = !coalesce;
		if
		:: due -> send()
		:: else -> skip
		fi
	:: else -> break
	od
}

active proctype guest()
{
	bool pending;

	do
	:: true ->
end_sleep:
		irq -> irq = false;
		/* NAPI: callbacks off, poll. */
#ifdef NO_EVENT_IDX
		no_interrupt = true;
#endif
		do
		:: true ->
			/* Reclaim what is there, at least one, any number (the
			 * budget). */
			do
			:: last_used != used_idx -> last_used++;
progress_reclaim:
				if
				:: true -> skip
				:: true -> break
				fi
			:: else -> break
			od;
			/* virtqueue_enable_cb_prepare, full barrier, virtqueue_poll. */
#ifdef NO_EVENT_IDX
			no_interrupt = false;
#else
			used_event = last_used;
#endif
			pending = (last_used != used_idx);
			if
			:: pending ->
#ifdef NO_EVENT_IDX
				no_interrupt = true
#else
				skip   /* napi_schedule again: poll without an interrupt */
#endif
			:: else -> break
			fi
		od
	od
}

/* When nothing can move any more, the guest reclaimed every used entry. */
active proctype monitor()
{
	timeout -> assert(used_idx == N && last_used == used_idx)
}
