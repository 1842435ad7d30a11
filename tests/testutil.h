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

#endif
