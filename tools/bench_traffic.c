/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnic-bench traffic: a simulated VMM and guests on top of
 * libvnic, moving checked Ethernet/IPv4/UDP frames through real vnicd
 * workers.
 *
 *   vnic-bench --socket PATH traffic --nics N --backend socket|tap
 *       --direction g2h|h2g|both --size BYTES|random --seconds S
 *       [--count N] [--netns NAME] [--window N]
 *       [--expect-json FILE] [--before-remove CMD]
 *       [--id-prefix P] [--fault-nic I] [--unplug-after S]
 *       [--remove-deadline MS] [--disconnect-after S]
 *       [--stall-backend-after S] [--policy P] [--timer-us N] [--poll-us N]
 *       [--latency-us N] [--switch-policy MS] [--guest-batch N] [--rr N]
 *       [--dirty-log] [--dirty-log-after S]
 *       [--rx-irq-us N] [--rx-irq-frames N] [--tx-irq-us N] [--tx-irq-frames N]
 *
 * How a run works: traffic.h.
 *
 * Exit: 0 when every frame arrived exactly once and intact (and the
 * worker counters agree), 1 on any failure, 2 on a usage error. A frame
 * lost on the tap path (the host kernel drops, it cannot block) is counted
 * and reported as a warning, not a failure; on the socket backend, which
 * cannot drop, any loss fails. Duplicates, corruption and stalls (no
 * frame for 5 s) always fail.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bench.h"
#include "frames.h"
#include "guest.h"
#include "libvnic.h"
#include "traffic.h"

/* ---- request/response (--rr) ---- */

static int tr_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Wait (bounded) for fd to be readable; 0 ready, -1 timeout or error. */
static int tr_wait_fd(int fd, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = bench_now_ns();
		int rc;

		if (now >= deadline)
			return -1;
		rc = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

/* rr, the guest: request i into a TX slot, published and kicked. Sets
 * *ret_t0 (the transaction starts) and *ret_deadline (its bound).
 * Returns: 0, or -EIO (failed). */
static int tr_rr_request(struct tr_run *r, struct tr_nic *n, uint64_t i, uint32_t req,
			 uint64_t *ret_t0, uint64_t *ret_deadline)
{
	char err[200];
	unsigned slot;
	uint8_t *p;

	if (guest_tx_reclaim(n->g, err, sizeof(err)) < 0) {
		tr_fail(r, "nic 0: %s", err);
		return -EIO;
	}
	p = guest_tx_slot(n->g, &slot);
	if (!p) {
		tr_fail(r, "rr: no free TX slot with one frame in flight");
		return -EIO;
	}
	frames_build(p, req, n->idx, FRAMES_G2H, i, n->host_mac);
	*ret_deadline = bench_now_ns() + TR_STALL_NS;
	*ret_t0 = bench_now_ns();
	if (guest_tx_add(n->g, slot, req) < 0) {
		tr_fail(r, "rr: guest_tx_add failed");
		return -EIO;
	}
	n->f[FRAMES_G2H].sent++;
	n->f[FRAMES_G2H].sent_bytes += req;
	guest_tx_flush(n->g);
	return 0;
}

/* rr, the host end: the request, then the response at once.
 * Returns: 0, or -EIO (failed). */
static int tr_rr_answer(struct tr_run *r, struct tr_nic *n, uint64_t i, uint32_t req,
			uint32_t rsp, uint64_t deadline)
{
	char err[200];
	uint64_t seq;
	ssize_t len;

	if (tr_wait_fd(n->host_fd, deadline) < 0) {
		tr_fail(r, "rr %llu: the request did not arrive within %.0f s",
			(unsigned long long)i, TR_STALL_NS / TR_NS);
		return -EIO;
	}
	len = recv(n->host_fd, r->buf, FRAMES_MAX + 1, MSG_TRUNC | MSG_DONTWAIT);
	if (len < 0 || frames_check(r->buf, (size_t)len, n->idx, FRAMES_G2H, req, r->maxsize,
				    n->host_mac, true, &seq, err, sizeof(err)) < 0) {
		tr_fail(r, "rr %llu: request: %s", (unsigned long long)i,
			len < 0 ? strerror(errno) : err);
		return -EIO;
	}
	tr_flow_record(r, n, FRAMES_G2H, seq, (size_t)len);
	frames_build(r->buf, rsp, n->idx, FRAMES_H2G, i, n->host_mac);
	n->f[FRAMES_H2G].sent++;
	n->f[FRAMES_H2G].sent_bytes += rsp;
	if (send(n->host_fd, r->buf, rsp, MSG_DONTWAIT) != (ssize_t)rsp) {
		tr_fail(r, "rr %llu: host send: %s", (unsigned long long)i, strerror(errno));
		return -EIO;
	}
	return 0;
}

/* rr, the guest: its RX interrupt, then the response; *ret_lat the time
 * since t0. Returns: 0, or -EIO (failed). */
static int tr_rr_response(struct tr_run *r, struct tr_nic *n, uint64_t i, uint32_t rsp,
			  uint64_t t0, uint64_t deadline, uint64_t *ret_lat)
{
	const uint8_t *fr;
	char err[200];
	uint64_t seq;
	size_t flen;
	int rc;

	for (;;) {
		rc = guest_rx_next(n->g, &fr, &flen, err, sizeof(err));
		if (rc < 0) {
			tr_fail(r, "nic 0: %s", err);
			return -EIO;
		}
		if (rc == 1)
			break;
		if (guest_rx_arm(n->g))
			continue;
		if (tr_wait_fd(n->g->call[GUEST_RX], deadline) < 0) {
			tr_fail(r, "rr %llu: the response did not arrive within %.0f s",
				(unsigned long long)i, TR_STALL_NS / TR_NS);
			return -EIO;
		}
		guest_read_call(n->g, GUEST_RX);
	}
	*ret_lat = bench_now_ns() - t0;
	if (frames_check(fr, flen, n->idx, FRAMES_H2G, rsp, r->maxsize, n->host_mac, true,
			 &seq, err, sizeof(err)) < 0) {
		tr_fail(r, "rr %llu: response: %s", (unsigned long long)i, err);
		return -EIO;
	}
	tr_flow_record(r, n, FRAMES_H2G, seq, flen);
	return 0;
}

/*
 * tr_rr - netperf TCP_RR over one NIC and the socket backend: one frame in
 * flight. The guest sends request i (g2h), the host end answers with
 * response i (h2g) as soon as it has the request, the guest waits for it
 * on its RX interrupt; the time from the request's kick to the response
 * in the guest is one transaction. The --direction's frame is --size,
 * the other one the smallest frame (60 B). Every frame is checked.
 */
static void tr_rr(struct tr_run *r)
{
	struct tr_nic *n = &r->nics[0];
	uint32_t req = r->dirs == 2 ? FRAMES_MIN : r->fixed;
	uint32_t rsp = r->dirs == 2 ? r->fixed : FRAMES_MIN;
	uint64_t *lat = calloc(r->rr, sizeof(*lat)), sum = 0;
	uint64_t t_all = bench_now_ns();

	if (!lat) {
		tr_fail(r, "out of memory");
		return;
	}
	for (unsigned d = 0; d < 2; d++)
		if (tr_flow_reserve(&n->f[d], r->rr) < 0) {
			tr_fail(r, "out of memory");
			goto out;
		}
	for (uint64_t i = 0; i < r->rr && !tr_stop; i++) {
		uint64_t t0, deadline;

		if (tr_rr_request(r, n, i, req, &t0, &deadline) < 0 ||
		    tr_rr_answer(r, n, i, req, rsp, deadline) < 0 ||
		    tr_rr_response(r, n, i, rsp, t0, deadline, &lat[i]) < 0)
			goto out;
		sum += lat[i];
	}
	if (r->failures)
		goto out;
	{
		uint64_t nn = n->f[FRAMES_H2G].recv;
		double secs = (bench_now_ns() - t_all) / TR_NS;

		qsort(lat, nn, sizeof(*lat), tr_cmp_u64);
		printf("  rr: %llu transactions (request %u B, response %u B) in %.2f s: "
		       "p50 %.1f us, p99 %.1f us, mean %.1f us\n", (unsigned long long)nn, req, rsp,
		       secs, lat[nn / 2] / 1e3, lat[(nn * 99) / 100] / 1e3, nn ? sum / 1e3 / nn : 0);
		printf("RESULT rr transactions=%llu req_bytes=%u rsp_bytes=%u p50_us=%.2f "
		       "p99_us=%.2f mean_us=%.2f\n", (unsigned long long)nn, req, rsp,
		       lat[nn / 2] / 1e3, lat[(nn * 99) / 100] / 1e3, nn ? sum / 1e3 / nn : 0);
	}
out:
	free(lat);
}

/* ---- traffic ---- */

void bench_traffic_usage(FILE *f)
{
	fprintf(f,
		"usage: vnic-bench [--socket PATH] traffic [--nics N]\n"
		"           [--backend socket|tap|afpacket]\n"
		"           [--direction g2h|h2g|both] [--size BYTES|random] [--seconds S]\n"
		"           [--count N] [--netns NAME] [--window N]\n"
		"           [--policy default|timer|bh|adaptive|poll]\n"
		"           [--expect-json FILE] [--before-remove CMD] [--queue-pairs P]\n"
		"  Simulated VMM + guests: N NICs on vnicd, checked UDP frames each way.\n"
		"  --queue-pairs P  every NIC has P queue pairs, a worker and a flow\n"
		"               each way per pair (socket backend; N x P <= %u)\n"
		"  --size       frame size %u..%u (tap: ..%u; afpacket: ..%u), or random\n"
		"               (default)\n"
		"  --backend    afpacket: vnicd binds AF_PACKET to one end of a veth pair\n"
		"               in the netns, the host's UDP socket is on the other\n"
		"  --seconds    sending time (default 3); --count stops a flow earlier\n"
		"  --netns      tap, afpacket: namespace for the taps / veths (created and removed\n"
		"               if missing; default a private one)\n"
		"  --policy     TX mitigation asked for in AddNic (default: vnicd's)\n"
		"  --timer-us N, --poll-us N, --latency-us N  its parameters (0: vnicd's\n"
		"               defaults; poll: --poll-us 0 polls forever; default here 50)\n"
		"  --rx-irq-us N, --rx-irq-frames N, --tx-irq-us N, --tx-irq-frames N\n"
		"               interrupt coalescing of the RX / TX used rings (0: off)\n"
		"  --switch-policy MS  every MS ms SetPolicy timer, bh, adaptive, poll, ...\n"
		"               on every NIC while the frames flow (all checked as always);\n"
		"               every other cycle of the four also turns interrupt\n"
		"               coalescing off\n"
		"  --guest-batch N  the guest publishes its TX frames (and kicks when the\n"
		"               device asks) every N frames (default: once per burst of %u)\n"
		"  --rr N       request/response instead (netperf TCP_RR): N transactions,\n"
		"               one frame in flight, 1 NIC, socket backend, --size for the\n"
		"               --direction (g2h: the request), 60 B the other way; prints\n"
		"               p50/p99 latency in a 'RESULT rr' line\n"
		"  --window     frames in flight per NIC and direction (default %u,\n"
		"               afpacket %u;\n"
		"               also at most %llu MiB)\n"
		"  --expect-json  write the counters vnicctl status must show\n"
		"  --before-remove  run CMD (sh -c) after traffic, before RemoveNic\n"
		"  --id-prefix P  NIC ids P0, P1, ... (default bench<pid>-<n>)\n"
		"  --fault-nic I  NIC I is under fault injection: it may fail, restart\n"
		"               and lose frames (printed apart); doubles, corruption and\n"
		"               a TX stall while it runs still fail\n"
		"  --unplug-after S  RemoveNic on NIC 0 at S s; its worker must be gone\n"
		"               at the reply; then a canary over its guest memory\n"
		"  --remove-deadline MS  the stop deadline of that RemoveNic (default 5000)\n"
		"  --disconnect-after S  NIC 0 on its own connection, closed mid-frame\n"
		"               at S s; its worker must go, then the canary\n"
		"  --stall-backend-after S  NIC 0's host end stops reading at S s\n"
		"  --dirty-log  a dirty log per NIC (live migration), set before the\n"
		"               frames flow; after RemoveNic every guest page the worker\n"
		"               changed must have its bit set ('RESULT dirtylog' lines)\n"
		"  --dirty-log-after S  the same, the log set at S s while frames flow\n"
		"  Exit 0: every frame arrived once and intact (tap losses: a warning);\n"
		"  1: failure; 2: usage.\n",
		TR_MAX_NICS, FRAMES_MIN, FRAMES_MAX, FRAMES_TAP_MAX, FRAMES_AFP_MAX, TR_BURST,
		TR_DEFAULT_WINDOW, TR_AFP_WINDOW, TR_WINDOW_BYTES >> 20);
}

/* --policy and its parameters, --switch-policy. Returns: 0, -EINVAL. */
static int tr_policy_option(struct tr_run *r, int opt, const char *arg)
{
	unsigned long v;

	switch (opt) {
	case 'P':
		return vnic_mitigation_from_name(arg, &r->policy);
	case 1000:
	case 1001:
	case 1002:
		if (bench_parse_ulong(arg, 0, 1000000, &v) < 0)
			return -EINVAL;
		if (opt == 1000)
			r->pol.timer_us = (uint32_t)v;
		else if (opt == 1001)
			r->pol.poll_us = (uint32_t)v;
		else
			r->pol.latency_us = (uint32_t)v;
		return 0;
	case 1003:
		return bench_parse_double(arg, 1, 60000, &r->switch_ms);
	case 1009:
	case 1010:
	case 1011:
	case 1012:
		/* Interrupt coalescing: vnicd refuses what is out of bounds. */
		if (bench_parse_ulong(arg, 0, 1000000, &v) < 0)
			return -EINVAL;
		*(opt == 1009 ? &r->pol.rx_irq_us : opt == 1010 ? &r->pol.rx_irq_frames :
		  opt == 1011 ? &r->pol.tx_irq_us : &r->pol.tx_irq_frames) = (uint32_t)v;
		return 0;
	}
	return -EINVAL;
}

/* The lifecycle options (traffic_lifecycle.c). Returns: 0, -EINVAL. */
static int tr_lifecycle_option(struct tr_run *r, int opt, const char *arg)
{
	unsigned long v;

	switch (opt) {
	case 'I':
		if (!arg[0] || strlen(arg) > 40)
			return -EINVAL;
		r->id_prefix = arg;
		return 0;
	case 'F':
		if (bench_parse_ulong(arg, 0, TR_MAX_NICS - 1, &v) < 0)
			return -EINVAL;
		r->fault_nic = (int)v;
		return 0;
	case 'U':
		return bench_parse_double(arg, 0, 3600, &r->unplug_after);
	case 'D':
		return bench_parse_double(arg, 0, 3600, &r->disconnect_after);
	case 'T':
		return bench_parse_double(arg, 0, 3600, &r->stall_after);
	case 'R':
		if (bench_parse_ulong(arg, 1, 60000, &v) < 0)
			return -EINVAL;
		r->remove_deadline_ms = (uint32_t)v;
		return 0;
	}
	return -EINVAL;
}

/* One option of traffic. Returns: 0, -EINVAL (a usage error). */
static int tr_traffic_option(struct tr_run *r, int opt, const char *arg)
{
	static const char *const dirs[] = { "g2h", "h2g", "both" };
	unsigned long v;
	int i;

	switch (opt) {
	case 'd':
		i = tr_name_index(dirs, 3, arg);
		if (i < 0)
			return -EINVAL;
		r->dirs = (unsigned)i + 1;
		return 0;
	case 's':
		if (!strcmp(arg, "random"))
			r->fixed = 0;
		else if (bench_parse_ulong(arg, FRAMES_MIN, FRAMES_MAX, &v) < 0)
			return -EINVAL;
		else
			r->fixed = (uint32_t)v;
		return 0;
	case 'c':
		if (bench_parse_ulong(arg, 1, 1ul << 40, &v) < 0)
			return -EINVAL;
		r->count = v;
		return 0;
	case 'E':
		r->expect_json = arg;
		return 0;
	case 'B':
		r->before_remove = arg;
		return 0;
	case 1004:
		if (bench_parse_ulong(arg, 1, 10000000, &v) < 0)
			return -EINVAL;
		r->rr = v;
		return 0;
	case 1005:
		if (bench_parse_ulong(arg, 1, TR_BURST, &v) < 0)
			return -EINVAL;
		r->guest_batch = (unsigned)v;
		return 0;
	case 1006:
		r->dirty_log = true;
		return 0;
	case 1007:
		return bench_parse_double(arg, 0, 3600, &r->dirty_log_after);
	case 1008:
		if (bench_parse_ulong(arg, 1, TR_MAX_NICS, &v) < 0)
			return -EINVAL;
		r->pairs = (unsigned)v;
		return 0;
	case 'P':
	case 1000:
	case 1001:
	case 1002:
	case 1003:
	case 1009:
	case 1010:
	case 1011:
	case 1012:
		return tr_policy_option(r, opt, arg);
	case 'I':
	case 'F':
	case 'U':
	case 'D':
	case 'T':
	case 'R':
		return tr_lifecycle_option(r, opt, arg);
	}
	return tr_parse_common(r, opt, arg) < 0 ? -EINVAL : 0;
}

/* The command line of traffic. Returns: 0, 1 (--help), -EINVAL (a usage
 * error). */
static int tr_traffic_args(struct tr_run *r, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "nics", required_argument, NULL, 'n' },
		{ "backend", required_argument, NULL, 'b' },
		{ "direction", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 't' },
		{ "count", required_argument, NULL, 'c' },
		{ "netns", required_argument, NULL, 'N' },
		{ "window", required_argument, NULL, 'w' },
		{ "policy", required_argument, NULL, 'P' },
		{ "expect-json", required_argument, NULL, 'E' },
		{ "before-remove", required_argument, NULL, 'B' },
		{ "id-prefix", required_argument, NULL, 'I' },
		{ "fault-nic", required_argument, NULL, 'F' },
		{ "unplug-after", required_argument, NULL, 'U' },
		{ "remove-deadline", required_argument, NULL, 'R' },
		{ "disconnect-after", required_argument, NULL, 'D' },
		{ "stall-backend-after", required_argument, NULL, 'T' },
		{ "timer-us", required_argument, NULL, 1000 },
		{ "poll-us", required_argument, NULL, 1001 },
		{ "latency-us", required_argument, NULL, 1002 },
		{ "switch-policy", required_argument, NULL, 1003 },
		{ "rr", required_argument, NULL, 1004 },
		{ "guest-batch", required_argument, NULL, 1005 },
		{ "dirty-log", no_argument, NULL, 1006 },
		{ "dirty-log-after", required_argument, NULL, 1007 },
		{ "queue-pairs", required_argument, NULL, 1008 },
		{ "rx-irq-us", required_argument, NULL, 1009 },
		{ "rx-irq-frames", required_argument, NULL, 1010 },
		{ "tx-irq-us", required_argument, NULL, 1011 },
		{ "tx-irq-frames", required_argument, NULL, 1012 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'h')
			return 1;
		if (opt == '?' || tr_traffic_option(r, opt, optarg) < 0)
			return -EINVAL;
	}
	return optind != argc ? -EINVAL : 0;
}

/* Options that each parse but do not go together. Returns: 0, or -EINVAL
 * (reason printed). */
static int tr_traffic_check(const struct tr_run *r)
{
	if (r->unplug_after >= 0 && r->disconnect_after >= 0) {
		fprintf(stderr, "vnic-bench: --unplug-after and --disconnect-after both act on NIC 0\n");
		return -EINVAL;
	}
	if (r->fault_nic >= (int)r->nnics) {
		fprintf(stderr, "vnic-bench: --fault-nic %d: only %u NICs\n", r->fault_nic, r->nnics);
		return -EINVAL;
	}
	if (r->rr && (r->nnics != 1 || r->backend != TR_SOCKET || r->dirs == 3 || !r->fixed)) {
		fprintf(stderr, "vnic-bench: --rr takes 1 NIC, the socket backend, --direction "
				"g2h or h2g and a fixed --size\n");
		return -EINVAL;
	}
	if (r->dirty_log && r->dirty_log_after >= 0) {
		fprintf(stderr, "vnic-bench: --dirty-log or --dirty-log-after, not both\n");
		return -EINVAL;
	}
	if (r->rr && r->dirty_log_after >= 0) {
		fprintf(stderr, "vnic-bench: --rr takes --dirty-log, not --dirty-log-after\n");
		return -EINVAL;
	}
	if (r->pairs > 1 && r->nnics * r->pairs > TR_MAX_NICS) {
		fprintf(stderr, "vnic-bench: %u NICs x %u queue pairs: at most %u in all\n",
			r->nnics, r->pairs, TR_MAX_NICS);
		return -EINVAL;
	}
	/* A tap picks the queue of a host->guest frame by its flow hash, so
	 * frames could not be checked per pair; the dirty-log check keeps a
	 * log per lane, and vnicd one per NIC. */
	if (r->pairs > 1 && (r->backend != TR_SOCKET || r->rr || r->dirty_log ||
			     r->dirty_log_after >= 0)) {
		fprintf(stderr, "vnic-bench: --queue-pairs takes the socket backend, and neither "
				"--rr nor --dirty-log(-after)\n");
		return -EINVAL;
	}
	return 0;
}

/* After setup: the flows (or --rr), the report, --expect-json and
 * --before-remove. */
static void tr_traffic_run(struct tr_run *r)
{
	if (r->dirty_log && tr_dirty_log_on(r) < 0)
		return;
	for (unsigned i = 0; i < r->nnics; i++)
		for (unsigned d = 0; d < 2; d++) {
			r->nics[i].f[d].on = r->dirs & (1u << d);
			r->nics[i].f[d].limit = r->count ? r->count : UINT64_MAX;
		}
	r->t0 = bench_now_ns();
	if (r->rr) {
		tr_rr(r);
		if (!r->failures)
			tr_report(r, "traffic");
	} else {
		tr_loop(r);
		tr_report(r, "traffic");
	}
	if (r->expect_json && tr_write_expect(r) < 0)
		tr_fail(r, "cannot write %s", r->expect_json);
	if (r->before_remove) {
		int st;

		fflush(stdout);
		st = system(r->before_remove);
		if (st != 0)
			tr_fail(r, "--before-remove command failed (status %d)", st);
	}
}

int bench_traffic_main(int argc, char **argv)
{
	struct tr_run r;
	int rc;

	tr_run_init(&r, 1);
	r.pol.poll_us = 50;
	rc = tr_traffic_args(&r, argc, argv);
	if (rc != 0)
		return tr_usage_exit(rc, bench_traffic_usage);
	if (tr_traffic_check(&r) < 0)
		return 2;
	tr_init_common(&r);
	printf("vnic-bench traffic: %u NIC(s)", r.nnics);
	if (r.pairs > 1)
		printf(" of %u queue pairs", r.pairs);
	r.nnics *= r.pairs; /* from here on: lanes */
	/* Frames above 1514 bytes need a larger MTU on the tap and NIC; a
	 * tap's MTU stops at 65521. */
	if (tr_backend_limits(&r) < 0)
		return 2;

	printf(", %s backend, %s, size %s%s, %.1f s\n",
	       tr_backend_name(r.backend),
	       r.dirs == 3 ? "both directions" : r.dirs == 1 ? "guest->host" : "host->guest",
	       r.fixed ? "" : "random", r.fixed ? "" : "", r.seconds);
	if (r.fixed)
		printf("  frame size %u bytes\n", r.fixed);
	if (tr_setup(&r) < 0)
		tr_fail(&r, "setup failed");
	else
		tr_traffic_run(&r);
	return tr_finish(&r, "traffic");
}
