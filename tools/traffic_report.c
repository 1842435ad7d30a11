/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * traffic_report: after the loop. Losses, duplicates and corruption per
 * direction, the TX descriptors all back, the worker's counters against
 * what the guests and hosts saw, the RESULT and POLICY lines, and the
 * counters vnicctl status must show (--expect-json).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "frames.h"
#include "guest.h"
#include "libvnic.h"
#include "traffic.h"

const struct vnic_queue_status *tr_queue(const struct vnic_nic_status *s, const char *name)
{
	for (unsigned i = 0; i < s->nqueues; i++)
		if (!strcmp(s->queues[i].name, name))
			return &s->queues[i];
	return NULL;
}

const struct vnic_nic_status *tr_nic_status(const struct vnic_status *st, const char *id)
{
	for (unsigned i = 0; i < st->nnics; i++)
		if (!strcmp(st->nics[i].id, id))
			return &st->nics[i];
	return NULL;
}

/* Do the worker's counters say what the guests and hosts saw? TX: every
 * frame the guest sent was written (packets, Ethernet bytes); RX: every
 * frame the guest received, ours and the kernel's. */
static bool tr_counters_match(struct tr_run *r, const struct vnic_status *st, bool report)
{
	bool ok = true;

	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		const struct vnic_nic_status *s = tr_nic_status(st, n->id);
		const struct vnic_queue_status *tx, *rx;
		uint64_t rxp = n->f[FRAMES_H2G].recv + n->other_rx;
		uint64_t rxb = n->f[FRAMES_H2G].recv_bytes + n->other_rx_bytes;

		if (n->hostile || n->faulty || n->gone)
			continue;
		tx = s ? tr_queue(s, n->qname[FRAMES_G2H]) : NULL;
		rx = s ? tr_queue(s, n->qname[FRAMES_H2G]) : NULL;
		if (!tx || !rx) {
			if (report)
				tr_fail(r, "nic %s %s/%s missing from status", n->id,
					n->qname[FRAMES_G2H], n->qname[FRAMES_H2G]);
			ok = false;
			continue;
		}
		if (tx->packets != n->f[FRAMES_G2H].sent || tx->bytes != n->f[FRAMES_G2H].sent_bytes ||
		    rx->packets != rxp || rx->bytes != rxb) {
			if (report)
				tr_fail(r,
					"nic %s counters: %s %llu pkts %llu B (guest sent %llu, %llu B), "
					"%s %llu pkts %llu B (guest got %llu, %llu B)",
					n->id, tx->name, (unsigned long long)tx->packets,
					(unsigned long long)tx->bytes,
					(unsigned long long)n->f[FRAMES_G2H].sent,
					(unsigned long long)n->f[FRAMES_G2H].sent_bytes, rx->name,
					(unsigned long long)rx->packets, (unsigned long long)rx->bytes,
					(unsigned long long)rxp, (unsigned long long)rxb);
			ok = false;
		}
		if (report && r->backend == TR_SOCKET &&
		    (tx->drops || tx->errors || rx->drops || rx->errors)) {
			tr_fail(r, "nic %s: drops/errors %s %llu/%llu %s %llu/%llu on a lossless backend",
				n->id, tx->name, (unsigned long long)tx->drops, (unsigned long long)tx->errors,
				rx->name, (unsigned long long)rx->drops, (unsigned long long)rx->errors);
			ok = false;
		}
		for (unsigned q = 0; report && n->pair == 0 && q < s->nqueues; q++)
			if (s->queues[q].broken) {
				tr_fail(r, "nic %s %s broken: %s", n->id, s->queues[q].name,
					s->queues[q].broken_reason);
				ok = false;
			}
	}
	return ok;
}

int tr_write_expect(struct tr_run *r)
{
	FILE *f = fopen(r->expect_json, "w");

	if (!f) {
		fprintf(stderr, "vnic-bench: %s: %s\n", r->expect_json, strerror(errno));
		return -EIO;
	}
	fprintf(f, "{\"nics\": [");
	for (unsigned i = 0, first = 1; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];

		if (n->hostile)
			continue;
		/* One object per NIC, its lanes' queues in it. */
		if (n->pair == 0) {
			fprintf(f, "%s\n {\"id\": \"%s\", \"queues\": {", first ? "" : ",", n->id);
			first = 0;
		}
		fprintf(f,
			"%s\"%s\": {\"packets\": %llu, \"bytes\": %llu}, "
			"\"%s\": {\"packets\": %llu, \"bytes\": %llu}",
			n->pair ? ", " : "", n->qname[FRAMES_G2H],
			(unsigned long long)n->f[FRAMES_G2H].sent,
			(unsigned long long)n->f[FRAMES_G2H].sent_bytes, n->qname[FRAMES_H2G],
			(unsigned long long)(n->f[FRAMES_H2G].recv + n->other_rx),
			(unsigned long long)(n->f[FRAMES_H2G].recv_bytes + n->other_rx_bytes));
		if (n->pair + 1 == n->npairs)
			fprintf(f, "}}");
	}
	fprintf(f, "\n]}\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* Sum of a counter over all queues of our (non-hostile) NICs. */
static void tr_sum_counters(struct tr_run *r, const struct vnic_status *st, uint64_t *kicks,
			    uint64_t *irqs, uint64_t *supp, uint64_t *drops)
{
	*kicks = *irqs = *supp = *drops = 0;
	for (unsigned i = 0; i < r->nnics; i++) {
		const struct vnic_nic_status *s = tr_nic_status(st, r->nics[i].id);

		if (!s || r->nics[i].hostile || r->nics[i].pair != 0)
			continue; /* per NIC: its first lane sums all its queues */
		for (unsigned q = 0; q < s->nqueues; q++) {
			*kicks += s->queues[q].kicks;
			*irqs += s->queues[q].interrupts;
			*supp += s->queues[q].suppressed;
			*drops += s->queues[q].drops;
		}
	}
}

/* The TX policy counters (a line of its own: the RESULT lines keep their
 * format). */
static void tr_report_policy(struct tr_run *r, const struct vnic_status *st)
{
	uint64_t fl = 0, tf = 0, th = 0, ps = 0, ph = 0;
	uint32_t win = 0, sw = 0;
	const char *name = "?";

	for (unsigned i = 0; i < r->nnics; i++) {
		const struct vnic_nic_status *s = tr_nic_status(st, r->nics[i].id);
		const struct vnic_queue_status *q =
			s ? tr_queue(s, r->nics[i].qname[FRAMES_G2H]) : NULL;

		if (!q || r->nics[i].hostile)
			continue;
		name = vnic_mitigation_name(s->policy.mode);
		fl += q->flushes;
		tf += q->timer_fires;
		th += q->timer_hits;
		ps += q->poll_spins;
		ph += q->poll_hits;
		if (r->nics[i].pair == 0)
			sw += s->policy_switches; /* per NIC */
		if (q->window > win)
			win = q->window;
	}
	printf("POLICY policy=%s window=%u flushes=%llu timer_fires=%llu timer_hits=%llu "
	       "poll_spins=%llu poll_hits=%llu switches=%u status_switches=%u\n", name, win,
	       (unsigned long long)fl, (unsigned long long)tf, (unsigned long long)th,
	       (unsigned long long)ps, (unsigned long long)ph, r->switches, sw);
	if (sw != r->switch_sets)
		tr_fail(r, "%u SetPolicy calls answered OK, status counts %u switches", r->switch_sets,
			sw);
}

/* Frames per direction over all NICs: received, lost, doubled, corrupt,
 * reordered; a line for people, a RESULT line for scripts. Losses fail on
 * the socket backend and warn on the tap one. Returns: the bytes moved. */
static uint64_t tr_report_flows(struct tr_run *r, const char *mode)
{
	static const char *const dname[2] = { "g2h", "h2g" };
	uint64_t bytes_all = 0;

	for (unsigned d = 0; d < 2; d++) {
		uint64_t fr = 0, by = 0, lost = 0, dup = 0, bad = 0, ooo = 0, t0 = 0, t1 = 0;
		bool on = false;

		for (unsigned i = 0; i < r->nnics; i++) {
			struct tr_flow *f = &r->nics[i].f[d];

			if (!f->on && !f->sent)
				continue;
			on = true;
			fr += f->recv;
			by += f->recv_bytes;
			if (!r->nics[i].faulty)
				lost += f->sent - f->recv;
			dup += f->dup;
			bad += f->corrupt;
			ooo += f->ooo;
			if (f->first_ns && (!t0 || f->first_ns < t0))
				t0 = f->first_ns;
			if (f->last_ns > t1)
				t1 = f->last_ns;
		}
		if (!on)
			continue;
		{
			double secs = t1 > r->t0 ? (t1 - r->t0) / TR_NS : 0;

			printf("  %s: %llu frames, %llu bytes in %.2f s: %.3f Gbit/s, %.0f packets/s; "
			       "lost %llu, duplicated %llu, corrupt %llu, reordered %llu\n",
			       dname[d], (unsigned long long)fr, (unsigned long long)by, secs,
			       secs > 0 ? by * 8 / secs / 1e9 : 0, secs > 0 ? fr / secs : 0,
			       (unsigned long long)lost, (unsigned long long)dup,
			       (unsigned long long)bad, (unsigned long long)ooo);
			printf("RESULT %s dir=%s frames=%llu bytes=%llu seconds=%.3f gbps=%.3f pps=%.0f "
			       "lost=%llu dup=%llu corrupt=%llu\n",
			       mode, dname[d], (unsigned long long)fr, (unsigned long long)by, secs,
			       secs > 0 ? by * 8 / secs / 1e9 : 0, secs > 0 ? fr / secs : 0,
			       (unsigned long long)lost, (unsigned long long)dup,
			       (unsigned long long)bad);
		}
		bytes_all += by;
		if (lost && r->backend == TR_SOCKET) {
			tr_fail(r, "%s: %llu frames lost on the lossless socket backend", dname[d],
				(unsigned long long)lost);
		} else if (lost) {
			/* Through a tap the host kernel drops instead of blocking
			 * (a full UDP receive buffer, a full tap queue while the
			 * guest has no RX buffers). Counted and reported; the
			 * window keeps the tests' rate below it and e2e_tap
			 * asserts that every frame arrived. */
			printf("  WARNING: %s: %llu frames lost in the host kernel (tap path)\n",
			       dname[d], (unsigned long long)lost);
		}
	}
	return bytes_all;
}

/* The NICs under fault: what they lost, apart from the others. */
static void tr_report_faults(const struct tr_run *r)
{
	for (unsigned i = 0; i < r->nnics; i++) {
		const struct tr_nic *n = &r->nics[i];

		if (!n->faulty)
			continue;
		/* At most once across unplug, crash and restart: frames in
		 * flight then may be lost, never doubled (checked per frame). */
		printf("LOST-TO-FAULTS nic=%s g2h=%llu h2g=%llu deaths=%u restarts=%u failed=%s "
		       "gone=%s g2h_after_restart=%llu rx_empty_buffers=%llu\n", n->id,
		       (unsigned long long)(n->f[FRAMES_G2H].sent - n->f[FRAMES_G2H].recv),
		       (unsigned long long)(n->f[FRAMES_H2G].sent - n->f[FRAMES_H2G].recv),
		       n->deaths, n->restarts, n->failed ? "yes" : "no", n->gone ? "yes" : "no",
		       (unsigned long long)(n->f[FRAMES_G2H].recv - n->g2h_at_restart),
		       (unsigned long long)n->g->rx_empty);
	}
}

/* The guests' rings at the end: every TX descriptor back, no empty RX
 * buffer without a restart; the kernel frames the guests ignored. */
static void tr_check_rings(struct tr_run *r)
{
	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		char err[200];
		int rc = 0;

		/* Every TX descriptor of a running NIC is back (exactly once:
		 * a second return fails in guest_tx_reclaim). */
		if (n->gone || n->failed || n->hostile || !n->g)
			continue;
		/* The worker publishes a run's used entries after its last
		 * send, so the host end may hold the last frame before its
		 * descriptor is back: give it a moment (bounded). */
		for (uint64_t until = bench_now_ns() + TR_COUNTER_WAIT_NS;;) {
			rc = guest_tx_reclaim(n->g, err, sizeof(err));
			if (rc < 0 || n->g->ntxfree == n->g->ntxslots || bench_now_ns() > until)
				break;
			usleep(1000);
		}
		if (rc < 0)
			tr_fail(r, "nic %u: %s", i, err);
		else if (n->g->ntxfree != n->g->ntxslots)
			tr_fail(r, "nic %u: %u TX descriptors never came back", i,
				n->g->ntxslots - n->g->ntxfree);
	}
	for (unsigned i = 0; i < r->nnics; i++) {
		/* Empty RX buffers come only from a restarted worker. */
		if (r->nics[i].g->rx_empty && !r->nics[i].restarts)
			tr_fail(r, "nic %u: %llu receive buffers came back empty without a restart",
				i, (unsigned long long)r->nics[i].g->rx_empty);
	}
	for (unsigned i = 0; i < r->nnics; i++)
		if (r->nics[i].other_rx)
			printf("  nic %u: guest ignored %llu frames from the host kernel\n", i,
			       (unsigned long long)r->nics[i].other_rx);
}

/* vnicd's status once the counters agree with what the guests and hosts
 * saw, or at the deadline (then the mismatch fails). The worker updates
 * them after the frame moved, so give them a moment to settle.
 * Returns: the status (vnic_status_free it), NULL when vnicd did not
 * answer (failed). */
static struct vnic_status *tr_settled_status(struct tr_run *r, uint64_t deadline)
{
	struct vnic_status *st = NULL;

	for (;;) {
		st = vnic_status_free(st);
		if (vnic_status(r->conn, &st) != 0) {
			tr_fail(r, "status: %s", vnic_last_error(r->conn));
			return NULL;
		}
		if (tr_counters_match(r, st, false) || bench_now_ns() > deadline)
			break;
		usleep(20000);
	}
	tr_counters_match(r, st, true);
	return st;
}

/* Per running NIC: its queues' counters, the guest's view, the worker's
 * CPU. Returns: the workers' CPU seconds over the run, -1 when unknown. */
static double tr_report_workers(struct tr_run *r, const struct vnic_status *st)
{
	double cpu = 0;
	bool have_cpu = true;

	for (unsigned i = 0; i < r->nnics; i++) {
		struct tr_nic *n = &r->nics[i];
		const struct vnic_nic_status *s = tr_nic_status(st, n->id);
		char lane[24];

		if (n->hostile || n->gone)
			continue;
		n->cpu1 = tr_cpu_seconds(n->pid);
		if (n->cpu1 < 0)
			n->cpu1 = n->cpu_last; /* gone since the last sample */
		if (n->cpu0 < 0 || n->cpu1 < 0)
			have_cpu = false;
		else
			cpu += n->cpu_dead + n->cpu1 - n->cpu0;
		for (unsigned q = 0; s && n->pair == 0 && q < s->nqueues; q++) {
			const struct vnic_queue_status *qs = &s->queues[q];

			printf("  %s %s: %llu pkts %llu B, kicks %llu, interrupts %llu, suppressed %llu, "
			       "drops %llu, errors %llu\n",
			       n->id, qs->name, (unsigned long long)qs->packets,
			       (unsigned long long)qs->bytes, (unsigned long long)qs->kicks,
			       (unsigned long long)qs->interrupts, (unsigned long long)qs->suppressed,
			       (unsigned long long)qs->drops, (unsigned long long)qs->errors);
		}
		snprintf(lane, sizeof(lane), " pair %u", n->pair);
		printf("  %s%s worker pid %d (%s), guest: kicks sent rx %llu tx %llu, "
		       "interrupts seen rx %llu tx %llu\n",
		       n->id, n->npairs > 1 ? lane : "", (int)n->pid, s && s->sandboxed ? "sandboxed" : "NOT sandboxed",
		       (unsigned long long)n->g->kicks_sent[0],
		       (unsigned long long)n->g->kicks_sent[1],
		       (unsigned long long)n->g->irqs_seen[0], (unsigned long long)n->g->irqs_seen[1]);
	}
	return have_cpu ? cpu : -1.0;
}

/* After the loop: losses, counters, summary. */
void tr_report(struct tr_run *r, const char *mode)
{
	struct vnic_status *st;
	uint64_t deadline = bench_now_ns() + TR_COUNTER_WAIT_NS;
	uint64_t bytes_all, kicks, irqs, supp, drops;
	double cpu, mb;

	bytes_all = tr_report_flows(r, mode);
	tr_report_faults(r);
	tr_check_rings(r);
	st = tr_settled_status(r, deadline);
	if (!st)
		return;
	tr_sum_counters(r, st, &kicks, &irqs, &supp, &drops);
	cpu = tr_report_workers(r, st);
	mb = bytes_all / 1e6;
	printf("  per MB (10^6 bytes moved): %.2f kicks, %.2f interrupts; worker CPU %.2f s\n",
	       mb > 0 ? kicks / mb : 0, mb > 0 ? irqs / mb : 0, cpu);
	printf("RESULT %s kicks_per_mb=%.3f irqs_per_mb=%.3f worker_cpu_s=%.3f drops=%llu\n",
	       mode, mb > 0 ? kicks / mb : 0, mb > 0 ? irqs / mb : 0, cpu,
	       (unsigned long long)drops);
	tr_report_policy(r, st);
	vnic_status_free(st);
}
