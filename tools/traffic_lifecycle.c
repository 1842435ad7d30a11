/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * traffic_lifecycle: what happens to NIC 0 while the others run, and the
 * per-NIC stall check of the NICs that run.
 *
 * Lifecycle (issue 5): --unplug-after removes NIC 0 while traffic runs,
 * checks its worker is gone when the reply arrives, then writes a canary
 * over all of its guest memory and checks nothing changes it;
 * --disconnect-after puts NIC 0 on its own connection and closes it
 * mid-frame; --stall-backend-after stops reading NIC 0's host end so its
 * worker sits on a full backend. The NIC under fault (--fault-nic, or the
 * one unplugged or disconnected) may fail, restart or lose frames: its
 * losses are printed on their own line; a descriptor returned twice or
 * never (its TX stalls while it runs), a doubled or corrupted frame still
 * fail. Every other NIC is held to the full standard.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "frames.h"
#include "guest.h"
#include "libvnic.h"
#include "traffic.h"

/* ---- lifecycle: unplug, disconnect, stalled backend (issue 5) ---- */

/* The canary: a pattern no device write produces by chance, a function of
 * the offset so that a moved block shows too. */
static uint64_t tr_canary_word(size_t i)
{
	return 0xc0ffee5a00000000ull ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
}

static void tr_canary_set(struct tr_nic *n)
{
	uint64_t *w = (uint64_t *)(void *)n->g->mem;
	size_t nw = n->g->memsize / 8, one = 1;

	for (size_t i = 0; i < nw; i++)
		w[i] = tr_canary_word(i);
	/* Late kicks on both queues (TESTPLAN L2): nobody may act on them. */
	for (unsigned q = 0; q < 2; q++)
		if (write(n->g->kick[q], &one, sizeof(uint64_t)) < 0)
			fprintf(stderr, "vnic-bench: late kick: %s\n", strerror(errno));
	n->canary_set = true;
	n->canary_ns = bench_now_ns();
}

/* Has anything written the NIC's guest memory since tr_canary_set? */
void tr_canary_check(struct tr_run *r, struct tr_nic *n)
{
	const uint64_t *w = (const uint64_t *)(const void *)n->g->mem;
	size_t nw = n->g->memsize / 8, bad = 0, first = 0;
	double ms = (bench_now_ns() - n->canary_ns) / 1e6;

	for (size_t i = 0; i < nw; i++)
		if (w[i] != tr_canary_word(i) && bad++ == 0)
			first = i * 8;
	n->canary_checked = true;
	if (bad) {
		tr_fail(r, "CANARY nic %s: %zu words of guest memory changed after the worker was "
			"gone (first at offset %#zx; rings at desc %#llx used %#llx)", n->id, bad, first,
			(unsigned long long)(n->g->lay[GUEST_TX].desc - GUEST_GPA_BASE),
			(unsigned long long)(n->g->lay[GUEST_TX].used - GUEST_GPA_BASE));
		return;
	}
	printf("CANARY nic=%s bytes=%zu intact_ms=%.0f\n", n->id, nw * 8, ms);
}

/* The NIC is out of the run: its in-flight frames are lost to the
 * operation (counted apart), frames already on the host end are still
 * read. */
static void tr_retire(struct tr_run *r, struct tr_nic *n)
{
	n->gone = true;
	n->faulty = true;
	n->stalled = false;
	for (unsigned d = 0; d < 2; d++)
		n->f[d].on = false;
	/* Whatever reached the host end before the worker went. Bounded:
	 * at most 64 rounds of 256 frames. */
	for (unsigned i = 0; i < 64; i++) {
		uint64_t before = n->f[FRAMES_G2H].recv;

		tr_host_rx(r, n);
		if (n->f[FRAMES_G2H].recv == before)
			break;
	}
}

/* RemoveNic on NIC 0 (lanes n[0 .. npairs), one per queue pair) while the
 * others run. */
static void tr_unplug(struct tr_run *r, struct tr_nic *n)
{
	struct vnic_remove_result res;
	uint64_t t0, t1;
	char err[200];
	int rc;

	memset(&res, 0, sizeof(res));
	t0 = bench_now_ns();
	rc = vnic_remove_nic(n->conn, n->id, r->remove_deadline_ms, &res);
	t1 = bench_now_ns();
	for (unsigned k = 0; k < n->npairs; k++)
		n[k].added = false;
	if (rc < 0 || (rc > 0 && rc != VNIC_STATUS_DEADLINE_EXCEEDED)) {
		tr_fail(r, "RemoveNic %s: %s", n->id, vnic_last_error(n->conn));
		for (unsigned k = 0; k < n->npairs; k++)
			tr_retire(r, &n[k]);
		return;
	}
	/* Bounded: the deadline, then a SIGKILL and a reap (1 s is ample). */
	if (t1 - t0 > (uint64_t)(r->remove_deadline_ms + 1000) * 1000000ull)
		tr_fail(r, "RemoveNic %s took %.1f ms, bound %u ms (deadline + 1 s)", n->id,
			(t1 - t0) / 1e6, r->remove_deadline_ms + 1000);
	/* The promise: the reply comes after every pair's worker was reaped. */
	for (unsigned k = 0; k < n->npairs; k++)
		if (!tr_worker_gone_soon(n[k].pid))
			tr_fail(r, "RemoveNic %s replied while the worker of pair %u, pid %d, still "
				   "exists", n->id, k, (int)n[k].pid);
	printf("UNPLUG nic=%s status=%s latency_ms=%.3f reply_latency_ms=%.3f worker_pid=%d "
	       "gone=%s pairs=%u\n", n->id, rc ? "DEADLINE_EXCEEDED" : "OK", (t1 - t0) / 1e6,
	       res.unplug_latency_us / 1000.0, (int)n->pid, tr_worker_gone(n->pid) ? "yes" : "NO",
	       n->npairs);
	for (unsigned q = 0; q < res.nqueues; q++) {
		const struct vnic_queue_index *qi = &res.queues[q];
		unsigned k = qi->index / 2, slot = qi->index % 2 ? GUEST_TX : GUEST_RX;
		uint16_t seen;

		if (k >= n->npairs) {
			tr_fail(r, "nic %s: RemoveNic answered queue %u of %u pairs", n->id, qi->index,
				n->npairs);
			continue;
		}
		seen = __atomic_load_n(&n[k].g->q[slot].used->idx, __ATOMIC_ACQUIRE);
		printf("  final %s%u: avail %u used %u (guest sees used %u)\n",
		       slot == GUEST_TX ? "tx" : "rx", k, qi->avail_idx, qi->used_idx, seen);
		if ((uint16_t)qi->used_idx != seen)
			tr_fail(r, "nic %s q%u: reply says used %u, the ring says %u", n->id, qi->index,
				qi->used_idx, seen);
		/* A clean stop finishes the packet in hand: every TX chain
		 * the device consumed is back. */
		if (slot == GUEST_TX && (uint16_t)qi->used_idx != (uint16_t)qi->avail_idx)
			tr_fail(r, "nic %s tx%u: stopped with %u chains consumed and not returned",
				n->id, k, (uint16_t)(qi->avail_idx - qi->used_idx));
	}
	for (unsigned k = 0; k < n->npairs; k++) {
		/* Take back what was returned before the stop: a double or
		 * bogus id fails here. */
		if (guest_tx_reclaim(n[k].g, err, sizeof(err)) < 0)
			tr_fail(r, "nic %s pair %u after unplug: %s", n->id, k, err);
		tr_retire(r, &n[k]);
		tr_canary_set(&n[k]);
	}
}

/* Close NIC 0's own connection (its lanes share it) in the middle of a
 * frame. */
static void tr_disconnect(struct tr_run *r, struct tr_nic *n)
{
	/* A length prefix announcing 64 bytes, and 2 of them. */
	static const uint8_t half[] = { 0, 0, 0, 64, 0x0a, 0x02 };
	uint64_t now;

	if (write(vnic_fd(n->conn), half, sizeof(half)) < 0)
		fprintf(stderr, "vnic-bench: half frame: %s\n", strerror(errno));
	vnic_close(n->conn);
	now = bench_now_ns();
	printf("DISCONNECT nic=%s closed mid-frame\n", n->id);
	for (unsigned k = 0; k < n->npairs; k++) {
		n[k].conn = NULL;
		n[k].added = false;
		n[k].disc_wait = true;
		n[k].disc_ns = now;
		tr_retire(r, &n[k]);
	}
}

/* After a disconnect: the worker must be gone within a bound; then the
 * canary. */
static void tr_disconnect_poll(struct tr_run *r, struct tr_nic *n)
{
	uint64_t now = bench_now_ns(); /* disc_ns may be later than the loop's clock */

	if (!n->disc_wait)
		return;
	if (tr_worker_gone(n->pid)) {
		n->disc_wait = false;
		printf("DISCONNECT nic=%s teardown_ms=%.3f worker_pid=%d gone=yes\n", n->id,
		       (now - n->disc_ns) / 1e6, (int)n->pid);
		tr_canary_set(n);
	} else if (now - n->disc_ns > TR_GONE_BOUND_NS) {
		n->disc_wait = false;
		tr_fail(r, "nic %s: worker pid %d still exists %.0f s after its VMM disconnected",
			n->id, (int)n->pid, TR_GONE_BOUND_NS / TR_NS);
	}
}

/* Lifecycle steps due at now; the per-flow stall check of NICs that run. */
void tr_lifecycle(struct tr_run *r, uint64_t now)
{
	struct tr_nic *n0 = &r->nics[0];
	double t = (now - r->t0) / TR_NS;

	if (r->stall_after >= 0 && !r->stall_done && t >= r->stall_after) {
		r->stall_done = true;
		for (unsigned k = 0; k < n0->npairs; k++)
			n0[k].stalled = true; /* every pair's host end */
		printf("STALL nic=%s host end stops reading at %.2f s\n", n0->id, t);
	}
	if (r->unplug_after >= 0 && !r->unplug_done && t >= r->unplug_after) {
		r->unplug_done = true;
		tr_unplug(r, n0);
	}
	if (r->disconnect_after >= 0 && !r->disconnect_done && t >= r->disconnect_after) {
		r->disconnect_done = true;
		tr_disconnect(r, n0);
	}
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];

		tr_disconnect_poll(r, n);
		if (n->canary_set && !n->canary_checked &&
		    bench_now_ns() - n->canary_ns >= TR_CANARY_NS)
			tr_canary_check(r, n);
		/* Per NIC, since the others keep the global progress clock
		 * moving. TX: a descriptor never returned stalls the guest's
		 * ring for good, frames dropped by the device do not. */
		if (n->gone || n->failed || n->hostile)
			continue;
		{
			unsigned out = n->g->ntxslots - n->g->ntxfree;
			uint64_t since = n->tx_used_ns > r->t0 ? n->tx_used_ns : r->t0;

			if (n->resume_ns > since)
				since = n->resume_ns;
			if (n->f[FRAMES_G2H].on && out && !n->stalled && now - since > TR_STALL_NS) {
				tr_fail(r, "stall: nic %u: %u TX descriptors out, none came back for "
					"%.0f s", n->idx, out, TR_STALL_NS / TR_NS);
				n->f[FRAMES_G2H].on = false;
			}
		}
		if (n->f[FRAMES_H2G].on && tr_may_send(r, &n->f[FRAMES_H2G], now)) {
			struct tr_flow *f = &n->f[FRAMES_H2G];
			uint64_t since = f->last_ns > r->t0 ? f->last_ns : r->t0;

			if (n->resume_ns > since)
				since = n->resume_ns;
			if (f->recv < f->sent && now - since > TR_STALL_NS) {
				tr_fail(r, "stall: nic %u h2g: %llu frames in flight, none arrived for "
					"%.0f s", n->idx, (unsigned long long)(f->sent - f->recv),
					TR_STALL_NS / TR_NS);
				f->on = false;
			}
		}
	}
}

/* A lifecycle step still to come or to finish (the run waits for it). */
bool tr_lifecycle_pending(const struct tr_run *r)
{
	if ((r->unplug_after >= 0 && !r->unplug_done) ||
	    (r->disconnect_after >= 0 && !r->disconnect_done))
		return true;
	for (unsigned i = 0; i < r->nnics; i++)
		if (r->nics[i].disc_wait || (r->nics[i].canary_set && !r->nics[i].canary_checked))
			return true;
	return false;
}
