/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnic-bench hostile: a guest breaks its own TX ring (a looping chain, a
 * bad head, a buffer out of bounds) while another NIC carries traffic.
 *
 *   vnic-bench --socket PATH hostile --kind loop|selfloop [--victim 0|1]
 *       [--seconds S]
 *
 * The run is the one of vnic-bench traffic (traffic.h).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "frames.h"
#include "guest.h"
#include "libvnic.h"
#include "traffic.h"

static const char *const tr_kind_names[] = { "loop", "selfloop", "badhead", "oob" };

/* ---- hostile ---- */

void bench_hostile_usage(FILE *f)
{
	fprintf(f,
		"usage: vnic-bench [--socket PATH] hostile [--kind loop|selfloop|badhead|oob]\n"
		"           [--victim 0|1] [--seconds S] [--backend socket|tap|afpacket]\n"
		"           [--netns NAME]\n"
		"  Two NICs on the socket backend (or --backend, as for traffic). The\n"
		"  victim's guest posts a bad TX\n"
		"  chain and kicks: loop (G1, default): two descriptors pointing at each\n"
		"  other; selfloop (G1): one zero-length descriptor pointing at itself;\n"
		"  badhead (G3): an avail entry beyond the queue; oob (G7): a buffer\n"
		"  running past the end of guest memory. Passes when vnicd reports\n"
		"  QUEUE_NEEDS_RESET for the victim within %.0f s, the\n"
		"  victim's tx0 shows broken with a reason, its worker does not spin,\n"
		"  and the other NIC's frames keep flowing (at least a quarter of the\n"
		"  rate before the break), all checked (TESTPLAN L10, L11). The\n"
		"  chain is posted half-way through --seconds (default 3).\n",
		TR_RESET_BOUND_NS / TR_NS);
}

/* Write a bad chain straight into the victim's TX ring, as a hostile
 * guest would, publish it and kick. */
void tr_inject(struct tr_nic *n, enum tr_kind kind)
{
	struct vring_drv *d = &n->g->q[GUEST_TX];
	uint64_t gpa = n->g->txslot_gpa, one = 1;
	uint16_t head = d->avail_idx, entry = 0; /* nothing was sent on this queue */

	switch (kind) {
	case TR_KIND_LOOP:
		d->desc[0] = (struct vring_desc){ .addr = gpa, .len = 64,
						  .flags = VRING_DESC_F_NEXT, .next = 1 };
		d->desc[1] = (struct vring_desc){ .addr = gpa + 64, .len = 64,
						  .flags = VRING_DESC_F_NEXT, .next = 0 };
		break;
	case TR_KIND_SELFLOOP:
		d->desc[0] = (struct vring_desc){ .addr = gpa, .len = 0,
						  .flags = VRING_DESC_F_NEXT, .next = 0 };
		break;
	case TR_KIND_BADHEAD:
		entry = (uint16_t)(d->num + 7);
		break;
	case TR_KIND_OOB:
		d->desc[0] = (struct vring_desc){ .addr = GUEST_GPA_BASE + n->g->memsize - 32,
						  .len = 100, .flags = 0, .next = 0 };
		break;
	}
	d->avail->ring[head % d->num] = entry;
	/* Entries before the index (pairs with the device's read barrier). */
	__atomic_store_n(&d->avail->idx, (uint16_t)(head + 1), __ATOMIC_RELEASE);
	d->avail_idx = (uint16_t)(head + 1);
	if (write(n->g->kick[GUEST_TX], &one, sizeof(one)) == sizeof(one))
		n->g->kicks_sent[GUEST_TX]++;
}

/* The command line of hostile: *ret_victim and r->victim_kind.
 * Returns: 0, 1 (--help), -EINVAL (a usage error). */
static int tr_hostile_args(struct tr_run *r, int argc, char **argv, unsigned *ret_victim)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "kind", required_argument, NULL, 'k' },
		{ "victim", required_argument, NULL, 'v' },
		{ "seconds", required_argument, NULL, 't' },
		{ "window", required_argument, NULL, 'w' },
		{ "backend", required_argument, NULL, 'b' },
		{ "netns", required_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	unsigned long v;
	int opt, i;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'k':
			i = tr_name_index(tr_kind_names, 4, optarg);
			if (i < 0)
				return -EINVAL;
			r->victim_kind = (enum tr_kind)i;
			break;
		case 'v':
			if (bench_parse_ulong(optarg, 0, 1, &v) < 0)
				return -EINVAL;
			*ret_victim = (unsigned)v;
			break;
		case 'h':
			return 1;
		default:
			if (opt == '?' || opt == 'n' || tr_parse_common(r, opt, optarg) < 0)
				return -EINVAL;
		}
	}
	return optind != argc ? -EINVAL : 0;
}

/* The victim's QUEUE_NEEDS_RESET: there, in time, for tx0; the other NIC
 * (on) still receiving after it. */
static void tr_hostile_check_reset(struct tr_run *r, struct tr_nic *vn, const struct tr_nic *on)
{
	if (!vn->needs_reset) {
		/* Give a late event its last chance (bounded) before failing. */
		uint64_t end = r->inject_ns + TR_RESET_BOUND_NS;

		while (!vn->needs_reset && bench_now_ns() < end) {
			struct pollfd p = { .fd = vnic_fd(r->conn), .events = POLLIN };

			if (poll(&p, 1, 10) > 0 && vnic_dispatch(r->conn) < 0)
				break;
		}
	}
	if (!vn->needs_reset) {
		tr_fail(r, "no QUEUE_NEEDS_RESET event for nic %u within %.0f s", vn->idx,
			TR_RESET_BOUND_NS / TR_NS);
		return;
	}
	printf("  needs-reset for %s queue %u after %.1f ms: %s\n", vn->id, vn->reset_queue,
	       (vn->reset_ns - r->inject_ns) / 1e6, vn->reset_reason);
	if (vn->reset_queue != GUEST_TX)
		tr_fail(r, "needs-reset names queue %u, the loop was on tx0 (1)", vn->reset_queue);
	if (vn->reset_ns - r->inject_ns > TR_RESET_BOUND_NS)
		tr_fail(r, "needs-reset came after %.1f ms, bound %.0f ms",
			(vn->reset_ns - r->inject_ns) / 1e6, TR_RESET_BOUND_NS / 1e6);
	for (unsigned d = 0; d < 2; d++)
		if (on->f[d].recv <= on->f[d].recv_at_reset)
			tr_fail(r, "nic %u %s: no frame arrived after the victim broke", on->idx,
				d == FRAMES_G2H ? "g2h" : "h2g");
}

/* Blast radius (TESTPLAN L11): the other NIC's frame rate after the break
 * against before it. Loose (a quarter) because the two cores are shared
 * with everything else; a victim that spins is caught by the CPU check. */
static void tr_hostile_blast_radius(struct tr_run *r, const struct tr_nic *vn,
				    const struct tr_nic *on)
{
	uint64_t end = 0, after = 0;
	double before_rate, after_rate, cpu;

	for (unsigned d = 0; d < 2; d++) {
		after += on->f[d].recv - on->f[d].recv_at_reset;
		if (on->f[d].last_ns > end)
			end = on->f[d].last_ns;
	}
	before_rate = r->recv_at_inject / ((r->inject_ns - r->t0) / TR_NS);
	after_rate = end > vn->reset_ns ? after / ((end - vn->reset_ns) / TR_NS) : 0;
	printf("  nic %u: %.0f frames/s before the break, %.0f after\n", on->idx, before_rate,
	       after_rate);
	if (after_rate < before_rate / 4)
		tr_fail(r, "nic %u slowed from %.0f to %.0f frames/s when nic %u broke", on->idx,
			before_rate, after_rate, vn->idx);
	/* G1: no CPU spin. The broken queue consumes nothing more. */
	cpu = tr_cpu_seconds(vn->pid);
	if (cpu >= 0 && r->victim_cpu_at_inject >= 0) {
		printf("  victim worker CPU since the chain was posted: %.2f s\n",
		       cpu - r->victim_cpu_at_inject);
		if (cpu - r->victim_cpu_at_inject > 0.3)
			tr_fail(r, "victim worker used %.2f s of CPU after its queue broke",
				cpu - r->victim_cpu_at_inject);
	}
}

/* vnicctl status shows the victim's tx0 broken, with a reason. */
static void tr_hostile_check_status(struct tr_run *r, const struct tr_nic *vn)
{
	struct vnic_status *st = NULL;

	if (vnic_status(r->conn, &st) != 0) {
		tr_fail(r, "status: %s", vnic_last_error(r->conn));
	} else {
		const struct vnic_nic_status *s = tr_nic_status(st, vn->id);
		const struct vnic_queue_status *tx = s ? tr_queue(s, "tx0") : NULL;

		if (!tx || !tx->broken || !tx->broken_reason[0])
			tr_fail(r, "status does not show %s tx0 broken with a reason", vn->id);
		else
			printf("  status: %s tx0 broken: %s\n", vn->id, tx->broken_reason);
	}
	vnic_status_free(st);
}

/* After setup: traffic on the other NIC, the chain half-way, the checks. */
static void tr_hostile_run(struct tr_run *r, unsigned victim)
{
	struct tr_nic *vn = &r->nics[victim], *on = &r->nics[1 - victim];

	vn->hostile = true;
	for (unsigned d = 0; d < 2; d++) {
		on->f[d].on = true;
		on->f[d].limit = UINT64_MAX;
	}
	r->t0 = bench_now_ns();
	r->victim = vn;
	r->inject_at = r->t0 + (uint64_t)(r->seconds * TR_NS / 2);
	tr_loop(r);
	if (!r->injected)
		tr_fail(r, "the run ended before the bad chain was posted");
	tr_hostile_check_reset(r, vn, on);
	if (r->injected && vn->needs_reset)
		tr_hostile_blast_radius(r, vn, on);
	tr_report(r, "hostile");
	tr_hostile_check_status(r, vn);
}

int bench_hostile_main(int argc, char **argv)
{
	struct tr_run r;
	unsigned victim = 0;
	int rc;

	tr_run_init(&r, 2);
	r.victim_kind = TR_KIND_LOOP;
	rc = tr_hostile_args(&r, argc, argv, &victim);
	if (rc != 0)
		return tr_usage_exit(rc, bench_hostile_usage);
	if (tr_backend_limits(&r) < 0)
		return 2;
	tr_init_common(&r);
	printf("vnic-bench hostile: a '%s' chain on nic %u's tx0, nic %u carries traffic for %.1f s "
	       "(%s backend)\n", tr_kind_names[r.victim_kind], victim, 1 - victim, r.seconds,
	       tr_backend_name(r.backend));
	if (tr_setup(&r) < 0)
		tr_fail(&r, "setup failed");
	else
		tr_hostile_run(&r, victim);
	return tr_finish(&r, "hostile");
}
