/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench: the subcommands of vnic-bench, a simulated VMM and guest.
 *
 * Each subcommand is one file (bench_<name>.c) exporting a main and a
 * usage function, listed in the table in vnic-bench.c. Helpers shared by
 * subcommands (clock, statistics, option parsing) live in vnic-bench.c.
 * traffic and hostile share one run (guests, host ends, the loop, the
 * report): traffic_*.c, declared in traffic.h, which says what is where.
 */
#ifndef VNIC_BENCH_H
#define VNIC_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* A subcommand: argv[0] is its name. Returns the process exit code:
 * 0 success, 1 failure while running, 2 usage error. */
typedef int bench_main_fn(int argc, char **argv);
typedef void bench_usage_fn(FILE *f);

bench_main_fn bench_ring_main;
bench_usage_fn bench_ring_usage;
bench_main_fn bench_traffic_main;
bench_usage_fn bench_traffic_usage;
bench_main_fn bench_policy_main;
bench_usage_fn bench_policy_usage;
bench_main_fn bench_hostile_main;
bench_usage_fn bench_hostile_usage;
bench_main_fn bench_scale_main;
bench_usage_fn bench_scale_usage;

/* vnicd's control socket from `vnic-bench --socket PATH SUBCOMMAND`, or
 * NULL (subcommands then take their own --socket or libvnic's default). */
extern const char *bench_socket_path;

/* bench_now_ns - CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* bench_stats - sort v[0..n) and give its min, median and max (n >= 1;
 * with n even the median is the mean of the two middle values). */
void bench_stats(double *v, unsigned n, double *ret_min, double *ret_med, double *ret_max);

/* bench_parse_ulong - a whole decimal number in [min, max].
 * Returns: 0, or -EINVAL (value untouched). */
int bench_parse_ulong(const char *s, unsigned long min, unsigned long max,
		      unsigned long *ret_v);

/* bench_parse_double - a decimal number in [min, max].
 * Returns: 0, or -EINVAL (value untouched). */
int bench_parse_double(const char *s, double min, double max, double *ret_v);

/* bench_parse_list - comma-separated whole numbers in [min, max], at
 * most max_n of them. Returns: 0 with *ret_n set, or -EINVAL. */
int bench_parse_list(const char *s, unsigned long min, unsigned long max,
		     uint32_t *ret_v, unsigned max_n, unsigned *ret_n);

#endif
