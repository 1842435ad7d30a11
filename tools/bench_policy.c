/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnic-bench policy: the seeds' table, today. Every TX mitigation policy
 * x frame size x direction, measured side by side on one vnicd:
 *   Gbit/s and packets/s (vnic-bench traffic, one NIC, socket backend),
 *   kicks/MB and interrupts/MB (vnicd's counters, both queues),
 *   worker CPU seconds per GB moved (/proc/PID/stat of the worker),
 *   request/response latency p50/p99 with one frame in flight
 *   (vnic-bench traffic --rr, like netperf TCP_RR),
 *   and the policy's timer fires (the seed predicts none for adaptive in
 *   an all-out run and in a ping-like test).
 * With --irq, every policy runs twice, without and with interrupt
 * coalescing (issue 17; rows "P+irq"), measured the same way.
 * Each cell is one child `vnic-bench traffic` run (so every frame is
 * checked as always; a failed check fails the cell and the exit status).
 * Rounds alternate: round r runs every cell once, the policies of a cell
 * back to back in an order rotated by r, so drift and other load hit all
 * policies alike; the table gives min / median / max over the rounds.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "libvnic.h"

#define PB_MAX_RUNS 50u
#define PB_NPOL 4u
#define PB_MAX_SIZES 8u

enum pb_metric {
	PB_GBPS, PB_PPS, PB_KMB, PB_IMB, PB_CPUGB, PB_FIRES, PB_RRFIRES, PB_P50, PB_P99,
	PB_NMETRICS
};

static const char *const pb_metric_name[PB_NMETRICS] = {
	"Gbit/s", "packets/s", "kicks/MB", "irqs/MB", "CPU s/GB", "timer fires", "rr fires",
	"RR p50 us", "RR p99 us",
};

/* The four modes in the table's order; their names are libvnic's. */
static const enum vnic_mitigation pb_policies[PB_NPOL] = {
	VNIC_MITIGATION_TIMER, VNIC_MITIGATION_BH, VNIC_MITIGATION_ADAPTIVE, VNIC_MITIGATION_POLL,
};
static const char *const pb_dirs[2] = { "g2h", "h2g" };

struct pb_cell {
	double v[PB_NMETRICS][PB_MAX_RUNS];
	unsigned n[PB_NMETRICS];
	unsigned failed;
};

struct pb_opts {
	unsigned runs, nsizes, rr, poll_us, batch, latency_us;
	unsigned nvar;                 /* 1, or 2 with --irq: without, with */
	char irq[160];                 /* --irq as vnic-bench traffic options */
	unsigned npol, pol[PB_NPOL];   /* --policies: indices into pb_policies */
	double seconds;
	uint32_t sizes[PB_MAX_SIZES];
	const char *data;
	char self[PATH_MAX];
};

void bench_policy_usage(FILE *f)
{
	fprintf(f,
		"usage: vnic-bench --socket PATH policy [--runs N] [--seconds S]\n"
		"           [--sizes B,B,...] [--rr N] [--poll-us N] [--data FILE]\n"
		"  The seeds' table: each TX policy (timer, bh, adaptive, poll) x frame size\n"
		"  x direction (g2h, h2g) on one NIC of the vnicd at PATH (socket backend,\n"
		"  simulated guest). Per cell: Gbit/s, packets/s, kicks/MB and interrupts/MB\n"
		"  (both queues), worker CPU s per GB, the policy's timer fires, and the\n"
		"  request/response latency p50/p99 in us with one frame in flight (like\n"
		"  netperf TCP_RR: the direction's frame is the size, 60 B the other way).\n"
		"  Each measurement is a child 'vnic-bench traffic' whose checks apply (a\n"
		"  lost, doubled or corrupted frame fails the cell). N rounds alternate the\n"
		"  policies; the table shows min / median / max, with the load average.\n"
		"  --runs N     rounds, 1..%u (default 3)\n"
		"  --seconds S  throughput time per cell (default 1)\n"
		"  --sizes L    frame sizes (default 1024,16384,65535)\n"
		"  --rr N       transactions per latency cell (default 2000; 0: none)\n"
		"  --poll-us N  the poll policy's poll_us (default 50; 0 would pin a CPU)\n"
		"  --policies L which of timer,bh,adaptive,poll (default all four)\n"
		"  --latency-us N  the adaptive policy's latency_us (default: vnicd's, 100)\n"
		"  --irq RU/RF/TU/TF  also every policy with interrupt coalescing: RX used\n"
		"               ring at most one interrupt per RU us (RF frames), TX per TU us\n"
		"               (TF frames); rows 'P+irq'\n"
		"  --guest-batch N  the guest publishes and may kick every N frames\n"
		"               (default 1, as a Linux guest without xmit_more; 64: bursts)\n"
		"  --data FILE  also write the medians (and min, max) for tools/policy_plots.sh\n"
		"  Exit 0 when every cell passed its checks, 1 otherwise, 2 on usage.\n",
		PB_MAX_RUNS);
}

static void pb_add(struct pb_cell *c, enum pb_metric m, double v)
{
	if (c->n[m] < PB_MAX_RUNS)
		c->v[m][c->n[m]++] = v;
}

/* Run one child; parse what it printed into c. Returns 0 when it passed. */
static int pb_child(const struct pb_opts *o, const char *args, struct pb_cell *c, bool rr)
{
	char cmd[PATH_MAX + 512], line[1024];
	double gbps = -1, pps = -1, kmb = -1, imb = -1, cpu = -1, p50 = -1, p99 = -1;
	double bytes = 0, fires = -1;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' --socket '%s' traffic %s 2>&1", o->self,
		 bench_socket_path, args);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char *s;

		if (!strncmp(line, "RESULT traffic dir=", 19) && (s = strstr(line, " bytes="))) {
			double b = strtod(s + 7, NULL);

			bytes += b;
			if ((s = strstr(line, " gbps=")))
				gbps = strtod(s + 6, NULL);
			if ((s = strstr(line, " pps=")))
				pps = strtod(s + 5, NULL);
		} else if (!strncmp(line, "RESULT traffic kicks_per_mb=", 28)) {
			kmb = strtod(line + 28, NULL);
			if ((s = strstr(line, " irqs_per_mb=")))
				imb = strtod(s + 13, NULL);
			if ((s = strstr(line, " worker_cpu_s=")))
				cpu = strtod(s + 14, NULL);
		} else if (!strncmp(line, "RESULT rr ", 10)) {
			if ((s = strstr(line, " p50_us=")))
				p50 = strtod(s + 8, NULL);
			if ((s = strstr(line, " p99_us=")))
				p99 = strtod(s + 8, NULL);
		} else if (!strncmp(line, "POLICY ", 7) && (s = strstr(line, " timer_fires="))) {
			fires = strtod(s + 13, NULL);
		} else if (strstr(line, "FAIL") || strstr(line, "vnic-bench: ")) {
			fprintf(stderr, "  %s", line);
		}
	}
	st = pclose(p);
	if (st != 0)
		return -1;
	if (rr) {
		if (p50 < 0 || p99 < 0)
			return -1;
		pb_add(c, PB_P50, p50);
		pb_add(c, PB_P99, p99);
		if (fires >= 0)
			pb_add(c, PB_RRFIRES, fires);
		return 0;
	}
	if (gbps < 0 || kmb < 0)
		return -1;
	pb_add(c, PB_GBPS, gbps);
	pb_add(c, PB_PPS, pps);
	pb_add(c, PB_KMB, kmb);
	pb_add(c, PB_IMB, imb);
	if (cpu >= 0 && bytes > 0)
		pb_add(c, PB_CPUGB, cpu / (bytes / 1e9));
	if (fires >= 0)
		pb_add(c, PB_FIRES, fires);
	return 0;
}

static void pb_loadavg(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

static void pb_fmt(const struct pb_cell *c, enum pb_metric m, char *buf, size_t len, double *med)
{
	double v[PB_MAX_RUNS], mn, md, mx;
	unsigned n = c->n[m];
	int prec = m == PB_GBPS || m == PB_CPUGB ? 2 : m == PB_PPS || m == PB_FIRES ||
						      m == PB_RRFIRES ? 0 : 1;
	const char *unit = m == PB_PPS ? "k" : "";
	double k = m == PB_PPS ? 1e3 : 1;

	if (!n) {
		snprintf(buf, len, "-");
		if (med)
			*med = -1;
		return;
	}
	memcpy(v, c->v[m], n * sizeof(v[0]));
	bench_stats(v, n, &mn, &md, &mx);
	snprintf(buf, len, "%.*f%s / %.*f%s / %.*f%s", prec, mn / k, unit, prec, md / k, unit,
		 prec, mx / k, unit);
	if (med)
		*med = md;
}

int bench_policy_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 't' },
		{ "sizes", required_argument, NULL, 's' },
		{ "rr", required_argument, NULL, 'R' },
		{ "poll-us", required_argument, NULL, 'p' },
		{ "data", required_argument, NULL, 'D' },
		{ "guest-batch", required_argument, NULL, 'b' },
		{ "policies", required_argument, NULL, 'P' },
		{ "latency-us", required_argument, NULL, 'L' },
		{ "irq", required_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct pb_opts o = { .runs = 3, .seconds = 1, .nsizes = 3,
			     .sizes = { 1024, 16384, 65535 }, .rr = 2000, .poll_us = 50,
			     .batch = 1, .npol = PB_NPOL, .pol = { 0, 1, 2, 3 }, .nvar = 1 };
	struct pb_cell *cells;
	char la0[128], la1[128];
	unsigned long v;
	unsigned failures = 0;
	int opt;
	ssize_t sl;
	FILE *data = NULL;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			if (bench_parse_ulong(optarg, 1, PB_MAX_RUNS, &v) < 0)
				goto usage;
			o.runs = (unsigned)v;
			break;
		case 't':
			if (bench_parse_double(optarg, 0.1, 60, &o.seconds) < 0)
				goto usage;
			break;
		case 's':
			if (bench_parse_list(optarg, 60, 65536, o.sizes, PB_MAX_SIZES, &o.nsizes) < 0)
				goto usage;
			break;
		case 'R':
			if (bench_parse_ulong(optarg, 0, 1000000, &v) < 0)
				goto usage;
			o.rr = (unsigned)v;
			break;
		case 'p':
			if (bench_parse_ulong(optarg, 0, 1000000, &v) < 0)
				goto usage;
			o.poll_us = (unsigned)v;
			break;
		case 'D':
			o.data = optarg;
			break;
		case 'P': {
			char buf[128], *tok, *save = NULL;

			if (strlen(optarg) >= sizeof(buf))
				goto usage;
			strcpy(buf, optarg);
			o.npol = 0;
			for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				enum vnic_mitigation m = VNIC_MITIGATION_DEFAULT;
				unsigned i;

				if (vnic_mitigation_from_name(tok, &m) < 0)
					goto usage;
				for (i = 0; i < PB_NPOL && pb_policies[i] != m; i++)
					;
				if (i == PB_NPOL || o.npol == PB_NPOL)
					goto usage;
				o.pol[o.npol++] = i;
			}
			if (!o.npol)
				goto usage;
			break;
		}
		case 'L':
			if (bench_parse_ulong(optarg, 0, 100000, &v) < 0)
				goto usage;
			o.latency_us = (unsigned)v;
			break;
		case 'I': {
			unsigned ru, rf, tu, tf;
			char end;

			if (sscanf(optarg, "%u/%u/%u/%u%c", &ru, &rf, &tu, &tf, &end) != 4)
				goto usage;
			snprintf(o.irq, sizeof(o.irq),
				 " --rx-irq-us %u --rx-irq-frames %u --tx-irq-us %u --tx-irq-frames %u",
				 ru, rf, tu, tf);
			o.nvar = 2;
			break;
		}
		case 'b':
			if (bench_parse_ulong(optarg, 1, 64, &v) < 0)
				goto usage;
			o.batch = (unsigned)v;
			break;
		case 'h':
			bench_policy_usage(stdout);
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		goto usage;
	if (!bench_socket_path || strchr(bench_socket_path, '\'')) {
		fprintf(stderr, "vnic-bench policy: needs --socket PATH (without quotes) before "
				"the subcommand\n");
		return 2;
	}
	sl = readlink("/proc/self/exe", o.self, sizeof(o.self) - 1);
	if (sl <= 0 || strchr(o.self, '\'')) {
		fprintf(stderr, "vnic-bench policy: cannot find my own executable\n");
		return 1;
	}
	o.self[sl] = '\0';
	cells = calloc(PB_NPOL * 2 * PB_MAX_SIZES * 2, sizeof(*cells));
	if (!cells)
		return 1;

	pb_loadavg(la0, sizeof(la0));
	printf("vnic-bench policy: %u round(s), %u size(s) x 2 directions x %u policies, "
	       "%.1f s per throughput cell, %u RR transactions, adaptive latency_us %u%s%s%s; "
	       "load average %s\n", o.runs, o.nsizes, o.npol * o.nvar, o.seconds, o.rr,
	       o.latency_us, o.latency_us ? "" : " (vnicd's default)",
	       o.nvar > 1 ? "; +irq:" : "", o.irq, la0);
	fflush(stdout);
	for (unsigned r = 0; r < o.runs; r++) {
		for (unsigned z = 0; z < o.nsizes; z++) {
			for (unsigned d = 0; d < 2; d++) {
				for (unsigned k = 0; k < o.npol * o.nvar; k++) {
					unsigned kk = (k + r) % (o.npol * o.nvar);
					unsigned pi = o.pol[kk / o.nvar], var = kk % o.nvar;
					const char *pname = vnic_mitigation_name(pb_policies[pi]);
					struct pb_cell *c =
						&cells[((pi * 2 + var) * PB_MAX_SIZES + z) * 2 + d];
					const char *irq = var ? o.irq : "";
					char args[512];

					snprintf(args, sizeof(args),
						 "--nics 1 --backend socket --direction %s --size %u "
						 "--seconds %.2f --policy %s --poll-us %u "
						 "--guest-batch %u --latency-us %u%s", pb_dirs[d],
						 o.sizes[z], o.seconds, pname, o.poll_us,
						 o.batch, o.latency_us, irq);
					if (pb_child(&o, args, c, false) < 0) {
						fprintf(stderr, "vnic-bench policy: FAIL: %s\n", args);
						c->failed++;
						failures++;
					}
					if (!o.rr)
						continue;
					snprintf(args, sizeof(args),
						 "--rr %u --direction %s --size %u --policy %s "
						 "--poll-us %u --latency-us %u%s", o.rr, pb_dirs[d],
						 o.sizes[z], pname, o.poll_us,
						 o.latency_us, irq);
					if (pb_child(&o, args, c, true) < 0) {
						fprintf(stderr, "vnic-bench policy: FAIL: %s\n", args);
						c->failed++;
						failures++;
					}
				}
			}
		}
		printf("  round %u of %u done\n", r + 1, o.runs);
		fflush(stdout);
	}
	pb_loadavg(la1, sizeof(la1));
	if (o.data) {
		data = fopen(o.data, "w");
		if (!data)
			fprintf(stderr, "vnic-bench policy: %s: %s\n", o.data, strerror(errno));
		else
			fprintf(data, "# vnic-bench policy, %u rounds; medians then min max per "
				      "metric: policy size dir gbps pps kicks_mb irqs_mb cpu_s_gb "
				      "fires rr_fires p50_us p99_us; load %s .. %s\n", o.runs, la0,
				la1);
	}
	printf("\nmin / median / max over %u rounds; load average %s at the start, %s at the "
	       "end\n\n", o.runs, la0, la1);
	printf("| policy | size | dir |");
	for (unsigned m = 0; m < PB_NMETRICS; m++)
		printf(" %s |", pb_metric_name[m]);
	printf("\n|---|---|---|");
	for (unsigned m = 0; m < PB_NMETRICS; m++)
		printf("---|");
	printf("\n");
	for (unsigned z = 0; z < o.nsizes; z++)
		for (unsigned d = 0; d < 2; d++)
			for (unsigned k = 0; k < o.npol * o.nvar; k++) {
				unsigned pi = o.pol[k / o.nvar], var = k % o.nvar;
				const struct pb_cell *c =
					&cells[((pi * 2 + var) * PB_MAX_SIZES + z) * 2 + d];
				double med[PB_NMETRICS];
				char pname[32];

				snprintf(pname, sizeof(pname), "%s%s",
					 vnic_mitigation_name(pb_policies[pi]), var ? "+irq" : "");
				printf("| %s | %u | %s |", pname, o.sizes[z], pb_dirs[d]);
				for (unsigned m = 0; m < PB_NMETRICS; m++) {
					char buf[96];

					pb_fmt(c, (enum pb_metric)m, buf, sizeof(buf), &med[m]);
					printf(" %s |", buf);
				}
				printf("%s\n", c->failed ? " FAILED" : "");
				if (data) {
					fprintf(data, "%s %u %s", pname, o.sizes[z], pb_dirs[d]);
					for (unsigned m = 0; m < PB_NMETRICS; m++)
						fprintf(data, " %g", med[m]);
					for (unsigned m = 0; m < PB_NMETRICS; m++) {
						double vv[PB_MAX_RUNS], mn = -1, md, mx = -1;

						if (c->n[m]) {
							memcpy(vv, c->v[m], c->n[m] * sizeof(vv[0]));
							bench_stats(vv, c->n[m], &mn, &md, &mx);
						}
						fprintf(data, " %g %g", mn, mx);
					}
					fprintf(data, "\n");
				}
			}
	if (data)
		fclose(data);
	free(cells);
	printf("\nvnic-bench policy: %s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
usage:
	bench_policy_usage(stderr);
	return 2;
}
