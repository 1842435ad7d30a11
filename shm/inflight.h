/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inflight: the shared region that lets a restarted worker return every
 * descriptor its dead predecessor popped exactly once (DESIGN "Worker
 * crash", TESTPLAN L3, L4, L6, C8; in the spirit of vhost-user's
 * GET_INFLIGHT_FD, with a layout and recovery of our own).
 *
 * The supervisor creates a memfd of inflight_region_size() bytes, fills it
 * with inflight_region_init() and passes it in Config (worker.proto). It
 * outlives every worker of the NIC. The worker checks it
 * (inflight_region_check) and is then its only writer, through vring
 * (vring_attach_inflight). The supervisor only reads the header and the
 * per-queue indices; it never reads guest memory.
 *
 * Layout, version 1 (native-endian, both processes on one host):
 *   offset 0    struct inflight_header (64 bytes)
 *   offset 64   queue 0: struct inflight_queue (64 bytes) + num_0 x u64 slot
 *   then        queue 1 ... in virtqueue order; each block is
 *               inflight_queue_size(num) bytes, a multiple of 8.
 *
 * Per queue (all 64-bit, so no index ever wraps in the region):
 *   avail_seq  the device's consumption point: every avail entry below it
 *              was popped. Its low 16 bits are last_avail_idx.
 *   used_seq   used entries the device published AND committed here. Its
 *              low 16 bits are the used idx (the guest's used->idx once
 *              the worker is between operations).
 *   slot[h]    0: head h is not in flight; else 1 + the avail position it
 *              was popped at. Pop order is avail position order, so the
 *              position doubles as the completion order on recovery, and
 *              the flag and the order change in ONE 8-byte store.
 * Invariant between operations: exactly avail_seq - used_seq slots are
 * non-zero, each below 1 + avail_seq, all different. vring.c orders its
 * stores so that a crash at any instruction leaves a state that
 * vring_recover_inflight() turns back into this invariant (crash-point
 * table in vring.c).
 *
 * Trust: the region is written by a worker that may have been compromised
 * by its guest, so a new worker treats its contents as hostile: every
 * value is bounded before use and an inconsistency breaks the queue with a
 * reason (never an out-of-bounds access, never a crash).
 *
 * Library code: no logging.
 */
#ifndef VNIC_INFLIGHT_H
#define VNIC_INFLIGHT_H

#include <stddef.h>
#include <stdint.h>

#define INFLIGHT_MAGIC   0x544c464e49434e56ull /* "VNCINFLT" little-endian */
#define INFLIGHT_VERSION 1u
/* Queues a region describes (as many as a stats page, STATS_MAX_QUEUES). */
#define INFLIGHT_MAX_QUEUES 64u

/* inflight_queue.state */
#define INFLIGHT_QUEUE_FRESH 0u /* as the supervisor initialised it */
#define INFLIGHT_QUEUE_LIVE  1u /* a worker set its base: recover before use */

struct inflight_header {
	uint64_t magic;
	uint32_t version;
	uint32_t nqueues;
	uint64_t size;         /* bytes of the whole region */
	uint64_t reserved[5];
};

struct inflight_queue {
	uint32_t num;          /* queue size, set by inflight_region_init */
	uint32_t state;        /* INFLIGHT_QUEUE_FRESH or _LIVE */
	uint64_t avail_seq;
	uint64_t used_seq;
	uint64_t reserved[5];
	uint64_t slot[];       /* num entries */
};

_Static_assert(sizeof(struct inflight_header) == 64, "inflight header is 64 bytes");
_Static_assert(sizeof(struct inflight_queue) == 64, "inflight queue header is 64 bytes");

/* Bytes of one queue's block. */
static inline size_t inflight_queue_size(unsigned num)
{
	return sizeof(struct inflight_queue) + 8u * (size_t)num;
}

/*
 * inflight_region_size - bytes of a region for nqueues queues of the given
 * sizes (each a power of 2 in 1..32768, spec 2.7).
 * Returns: the size, or 0 when nqueues or a size is out of range.
 */
size_t inflight_region_size(unsigned nqueues, const unsigned *qsize);

/*
 * inflight_region_pages - inflight_region_size() rounded up to a whole
 * page: the bytes of a file or memfd that holds such a region (mmap maps
 * whole pages; a front end's region gives each pair a page-aligned block).
 * Returns: the size, or 0 when nqueues or a size is out of range.
 */
size_t inflight_region_pages(unsigned nqueues, const unsigned *qsize);

/*
 * inflight_region_init - write a fresh region into p (len bytes, exactly
 * inflight_region_size()): every queue FRESH, nothing in flight.
 * Returns: 0 or -EINVAL.
 */
int inflight_region_init(void *p, size_t len, unsigned nqueues, const unsigned *qsize);

/*
 * inflight_region_check - validate a mapped region against the Config's
 * queues (TESTPLAN C8): magic, version, queue count, total size, every
 * queue's num and state, and nothing in flight in a FRESH queue. The
 * slots of LIVE queues are checked later, by vring_recover_inflight.
 * @ret_q: nqueues pointers into the region, filled only on success.
 * Returns: 0, or -EINVAL with err filled.
 */
int inflight_region_check(void *p, size_t len, unsigned nqueues, const unsigned *qsize,
			  struct inflight_queue **ret_q, char *err, size_t errlen);

/*
 * inflight_queue_reset - back to FRESH with nothing in flight, for the
 * supervisor when the VMM resets or reconfigures a queue (or the whole
 * device: then inflight_region_init) while no worker runs. Without it a
 * new worker would complete the old ring's heads on the new ring
 * (TESTPLAN L5). The size (num) is kept.
 */
void inflight_queue_reset(struct inflight_queue *q);

#endif
