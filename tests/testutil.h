/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * testutil: guest memory for tests.
 *
 * A test guest is one sealed memfd. The "driver" (simulated guest) maps it
 * once at one address; the device side maps it again through memtable_map
 * at another address, as a real VMM and worker would. Tests may describe
 * the memfd to the device as several regions (single-byte splits, holes).
 */
#ifndef VNIC_TESTUTIL_H
#define VNIC_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memtable.h"

/* tu_memfd - a memfd of size bytes; sealed against shrink and grow when
 * seal is true. Aborts the test process on failure. */
int tu_memfd(size_t size, bool seal);

/* tu_memfd_map - a sealed memfd of size bytes, mapped shared read-write
 * at *ret_p (a dirty log as the VMM holds it). Aborts on failure.
 * Returns: the fd. */
int tu_memfd_map(size_t size, uint8_t **ret_p);

struct tu_guest {
	int fd;
	uint64_t gpa_base; /* guest physical address of byte 0 of the memfd */
	size_t size;
	uint8_t *drv;      /* the driver's mapping of the whole memfd */
	struct memtable *mt; /* the device's mapping (one region, or as split) */
};

/* tu_guest_new - sealed memfd of size bytes at gpa_base, mapped for the
 * driver and, as one region, for the device. Aborts on failure. */
void tu_guest_new(struct tu_guest *g, uint64_t gpa_base, size_t size);

/* tu_guest_split - replace the device mapping with regions that end at
 * the given byte offsets of the memfd (ascending, last == size): e.g.
 * {1, 2, size} gives regions of 1 byte, 1 byte and the rest. */
void tu_guest_split(struct tu_guest *g, const size_t *ends, unsigned n);

/* tu_guest_free - unmap and close everything. */
void tu_guest_free(struct tu_guest *g);

/* tu_drv_ptr - the driver's pointer for a guest physical address. */
void *tu_drv_ptr(const struct tu_guest *g, uint64_t gpa);

/* tu_fd_count - how many fds this process has open (/proc/self/fd), for
 * leak checks. Aborts if /proc cannot be read. */
int tu_fd_count(void);

/* tu_seqpair - a non-blocking, close-on-exec AF_UNIX SOCK_SEQPACKET pair
 * (the transport of both control channels). Aborts on failure. */
void tu_seqpair(int sv[2]);

/* tu_seed - the random seed for this run: $VNIC_SEED if set, else a fixed
 * default; printed to stderr so a failure can be replayed. */
unsigned long tu_seed(const char *test_name, unsigned long fixed_default);

/* tu_cpu_ticks - utime + stime of pid in clock ticks (1/100 s), from
 * /proc/pid/stat. Aborts the test when it cannot be read. */
unsigned long tu_cpu_ticks(pid_t pid);

/* tu_mono_ms - CLOCK_MONOTONIC in milliseconds, for time-bounded loops. */
uint64_t tu_mono_ms(void);

/*
 * tu_soak_more - may a soak loop run iteration i? Soaks are bounded in
 * count and in time (the suite runs niced, sanitized and two at a time on
 * two cores): iteration i runs while i < max and, once min iterations ran,
 * while less than budget_ms passed since t0_ms (tu_mono_ms() before the
 * loop). So a loaded machine runs fewer iterations, never fewer than min,
 * and the test says how many it ran (tu_soak_report).
 */
bool tu_soak_more(unsigned i, unsigned min, unsigned max, uint64_t t0_ms, uint64_t budget_ms);
void tu_soak_report(const char *what, unsigned ran, unsigned max, uint64_t t0_ms);

/*
 * Network namespaces a test makes. Check runs each test in a forked
 * child, and a failed assertion ends that child before its teardown runs:
 * a namespace the test made would be left behind. So every name carries
 * the test runner's pid, and the runner removes whatever is left after
 * srunner_run_all():
 *
 *   tu_netns_init("vnicvu");            in main(), before the runner
 *   tu_netns_add(name, sizeof(name));   in a test or fixture
 *   tu_netns_del(name);                 in its teardown (quietly)
 *   tu_netns_sweep();                   in main(), after the runner
 */
void tu_netns_init(const char *stem);
/* tu_netns_add - "<stem><runner pid>-<pid>", created with ip netns add;
 * its name in name. Aborts the test when it cannot be made. */
void tu_netns_add(char *name, size_t len);
/* tu_netns_del - remove namespace name; 0 or -1 (and a line on stderr). */
int tu_netns_del(const char *name);
/* tu_netns_sweep - remove every namespace of this runner still there,
 * each with a line on stderr; returns how many. */
int tu_netns_sweep(void);
/* tu_netns_enter - move this thread into namespace name (made by
 * tu_netns_add): what it opens there (sockets, taps) stays there. Returns
 * an fd of the namespace it was in, for tu_netns_leave, or -1. */
int tu_netns_enter(const char *name);
/* tu_netns_leave - back into the namespace of self (closed); 0 or -1. */
int tu_netns_leave(int self);

#endif
