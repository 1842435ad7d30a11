/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnic-bench: a simulated VMM and guest for measuring and demonstrating
 * vnicd's data path. One subcommand per workload:
 *   vnic-bench ring [options]   split ring between two processes
 *   vnic-bench [--socket PATH] traffic [options]   frames through vnicd
 *   vnic-bench [--socket PATH] hostile [options]   a looping guest vs vnicd
 *   vnic-bench --socket PATH policy [options]      the TX policy table
 * main dispatches on argv[1] through the table below; a new workload adds
 * a row and a bench_<name>.c file.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "version.h"

static const struct bench_cmd {
	const char *name;
	const char *summary;
	bench_main_fn *main;
	bench_usage_fn *usage;
} bench_cmds[] = {
	{ "ring", "split ring over shared memory, driver and device in two processes",
	  bench_ring_main, bench_ring_usage },
	{ "traffic", "simulated VMM + guests: checked UDP frames through vnicd workers",
	  bench_traffic_main, bench_traffic_usage },
	{ "policy", "the TX policies side by side: throughput, kicks, CPU, RR latency",
	  bench_policy_main, bench_policy_usage },
	{ "hostile", "a guest posts a looping TX chain: needs-reset, other NICs unaffected",
	  bench_hostile_main, bench_hostile_usage },
	{ "scale", "N NICs on one vnicd: add, frames, status of all, remove; times and memory",
	  bench_scale_main, bench_scale_usage },
};

const char *bench_socket_path;

#define BENCH_NCMDS (sizeof(bench_cmds) / sizeof(bench_cmds[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: vnic-bench [--socket PATH] SUBCOMMAND [OPTIONS] | --version\n"
		   "       vnic-bench SUBCOMMAND --help\n\nsubcommands:\n");
	for (size_t i = 0; i < BENCH_NCMDS; i++)
		fprintf(f, "  %-10s %s\n", bench_cmds[i].name, bench_cmds[i].summary);
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void bench_stats(double *v, unsigned n, double *ret_min, double *ret_med, double *ret_max)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	*ret_min = v[0];
	*ret_max = v[n - 1];
	*ret_med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_parse_ulong(const char *s, unsigned long min, unsigned long max,
		      unsigned long *ret_v)
{
	char *end;
	unsigned long v;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*ret_v = v;
	return 0;
}

int bench_parse_double(const char *s, double min, double max, double *ret_v)
{
	char *end;
	double v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < min || v > max)
		return -EINVAL;
	*ret_v = v;
	return 0;
}

int bench_parse_list(const char *s, unsigned long min, unsigned long max,
		     uint32_t *ret_v, unsigned max_n, unsigned *ret_n)
{
	uint32_t v[64];
	unsigned n = 0;
	char buf[512], *tok, *save = NULL;

	if (!s || strlen(s) >= sizeof(buf) || max_n > 64)
		return -EINVAL;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned long x;

		if (n == max_n || bench_parse_ulong(tok, min, max, &x) < 0)
			return -EINVAL;
		v[n++] = (uint32_t)x;
	}
	if (n == 0)
		return -EINVAL;
	memcpy(ret_v, v, n * sizeof(v[0]));
	*ret_n = n;
	return 0;
}

int main(int argc, char **argv)
{
	/* Options before the subcommand: only --socket PATH (vnicd's). */
	while (argc >= 3 && !strcmp(argv[1], "--socket")) {
		bench_socket_path = argv[2];
		argv[2] = argv[0];
		argc -= 2;
		argv += 2;
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--version"))
		return vnic_print_version("vnic-bench");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < BENCH_NCMDS; i++)
		if (!strcmp(argv[1], bench_cmds[i].name))
			return bench_cmds[i].main(argc - 1, argv + 1);
	fprintf(stderr, "vnic-bench: unknown subcommand '%s' (try vnic-bench --help)\n", argv[1]);
	return 2;
}
