/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats: the per-NIC statistics page shared by a worker and the supervisor.
 *
 * One shared-memory area per NIC (a memfd the supervisor creates, sizes
 * with stats_page_size(), initialises with stats_page_init() and passes to
 * the worker, which maps it read/write and checks it with
 * stats_page_check()). The worker is the only writer of the counters; the
 * supervisor (vnicctl status) reads them at any time without a lock and
 * without waiting for the worker.
 *
 * Layout, version 2 (all integers native-endian: both processes run on the
 * same host):
 *   offset 0   struct stats_page (64 bytes): magic, version, nqueues,
 *              queue_stride, reserved
 *   offset 64  nqueues x struct stats_queue (queue_stride = 320 bytes each),
 *              in virtio-net order: q[0] = rx0, q[1] = tx0, q[2] = rx1 ...
 * A queue's counters are libvnic.h's VNIC_QUEUE_COUNTERS, in its order,
 * each a uint64_t here: the one list the page, the snapshot, vnicd's
 * QueueStatus, libvnic and vnicctl are made from.
 *
 * Concurrency contract:
 *  - Counters are uint64_t, written by the worker with relaxed atomic
 *    stores (single writer: load, add, store; no read-modify-write needed)
 *    and read by the supervisor with relaxed atomic loads. Each value is
 *    untorn; values of different counters are not a consistent snapshot.
 *  - broken_reason is written once, before broken is set to 1 with a
 *    release store; a reader loads broken with acquire and only then reads
 *    the reason (stats_queue_read). The worker never writes the reason
 *    again (the first reason sticks), so no seqlock is needed.
 *  - The supervisor does not trust the page: the worker may be compromised
 *    and scribble anything. stats_queue_read bounds the reason text, and
 *    the supervisor uses its own queue count, not the page's.
 *
 * Header only, no dependencies but libvnic.h's list: the supervisor
 * includes "workers/stats.h".
 */
#ifndef VNIC_STATS_H
#define VNIC_STATS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "libvnic.h"
#include "sandbox.h"

#define STATS_MAGIC   0x54415453434e5656ull /* "VVNCSTAT" little-endian */
#define STATS_VERSION 2u
/* Queues a page describes: 2 x the most queue pairs a NIC may have. */
#define STATS_MAX_QUEUES 64u
#define STATS_REASON_LEN 160u

/* Every counter of the list as a uint64_t (page and snapshot). */
#define STATS_U64_FIELD(type, name, kind) uint64_t name;
#define STATS_COUNT_ONE(type, name, kind) + 1
#define STATS_NCOUNTERS (0 VNIC_QUEUE_COUNTERS(STATS_COUNT_ONE))
/* 64-bit slots before broken: the list, kicks_avoided and reserve. */
#define STATS_QUEUE_SLOTS 19u

struct stats_queue {
	/* VNIC_QUEUE_COUNTERS (libvnic.h says what each counts). Counts
	 * mean: packets, chains completed successfully (one per frame,
	 * however many buffers it took); drops, TX chains returned with
	 * used length 0 (invalid header, runt, oversized, writable
	 * descriptor, backend refused the frame) and RX frames the guest
	 * could not take; errors also count as a drop when a frame was
	 * lost. The TX policy counters are 0 on RX queues. */
	VNIC_QUEUE_COUNTERS(STATS_U64_FIELD)
	/* TX: chains consumed in one wake-up beyond the first (sum over
	 * wake-ups of chains - 1). The guest added them while we had kicks
	 * off ("bh" mitigation) or coalesced them into one kick: each is a
	 * kick it did not need to send. RX: always 0. On the page only (the
	 * engine's tests read it), not in QueueStatus. */
	uint64_t kicks_avoided;
	uint64_t reserved[STATS_QUEUE_SLOTS - STATS_NCOUNTERS - 1];
	/* 0 running, 1 broken (release store after broken_reason). */
	uint32_t broken;
	uint32_t pad;
	char broken_reason[STATS_REASON_LEN];
};

struct stats_page {
	uint64_t magic;
	uint32_t version;
	uint32_t nqueues;
	uint32_t queue_stride; /* sizeof(struct stats_queue) */
	uint32_t reserved32;
	/* The worker's SIGSYS handler stores its record here (sandbox.h):
	 * the supervisor clears it before each start and reads it after a
	 * death by SIGSYS. Written only by a dying worker; untrusted. */
	struct sandbox_report violation;
	uint64_t reserved;
	/* Liveness (issue 11): the worker adds 1 every WORKER_BEAT_MS; the
	 * supervisor's watchdog compares it over time (stats_heartbeat). */
	uint64_t heartbeat;
	struct stats_queue q[];
};

_Static_assert(STATS_NCOUNTERS + 1 <= STATS_QUEUE_SLOTS,
	       "VNIC_QUEUE_COUNTERS outgrew the page's slots: grow STATS_QUEUE_SLOTS and the stride");
_Static_assert(sizeof(struct stats_queue) == 320, "stats_queue is 320 bytes in version 2");
_Static_assert(sizeof(struct stats_page) == 64, "stats_page header is 64 bytes in version 2");
_Static_assert(offsetof(struct stats_page, violation) == 24 &&
		       sizeof(struct sandbox_report) == 24,
	       "the violation record is bytes 24..47 of the page (check_supervisor writes it there)");

/* stats_page_size - bytes of a page describing nqueues queues. */
static inline size_t stats_page_size(unsigned nqueues)
{
	return sizeof(struct stats_page) + (size_t)nqueues * sizeof(struct stats_queue);
}

/* stats_page_init - zero the page and write its header (supervisor, on a
 * fresh memfd mapping of at least stats_page_size(nqueues) bytes).
 * Returns: 0, or -EINVAL when nqueues or len is out of range. */
static inline int stats_page_init(void *mem, size_t len, unsigned nqueues)
{
	struct stats_page *p = mem;

	if (nqueues == 0 || nqueues > STATS_MAX_QUEUES || len < stats_page_size(nqueues))
		return -EINVAL;
	memset(mem, 0, stats_page_size(nqueues));
	p->version = STATS_VERSION;
	p->nqueues = nqueues;
	p->queue_stride = sizeof(struct stats_queue);
	__atomic_store_n(&p->magic, STATS_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* stats_page_check - does the mapped page match this version and the
 * queue count we expect? (worker, after mapping).
 * Returns: 0 or -EINVAL. */
static inline int stats_page_check(const void *mem, size_t len, unsigned nqueues)
{
	const struct stats_page *p = mem;

	if (nqueues == 0 || nqueues > STATS_MAX_QUEUES || len < stats_page_size(nqueues))
		return -EINVAL;
	if (__atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) != STATS_MAGIC ||
	    p->version != STATS_VERSION || p->nqueues != nqueues ||
	    p->queue_stride != sizeof(struct stats_queue))
		return -EINVAL;
	return 0;
}

/* stats_add - the single writer adds n to a counter. */
static inline void stats_add(uint64_t *ctr, uint64_t n)
{
	__atomic_store_n(ctr, __atomic_load_n(ctr, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* stats_beat - the worker is alive (single writer). */
static inline void stats_beat(struct stats_page *p)
{
	if (p)
		stats_add(&p->heartbeat, 1);
}

/* stats_heartbeat - the supervisor's lock-free read of the heartbeat. */
static inline uint64_t stats_heartbeat(const struct stats_page *p)
{
	return __atomic_load_n(&p->heartbeat, __ATOMIC_RELAXED);
}

/* stats_set - the single writer sets a gauge. */
static inline void stats_set(uint64_t *ctr, uint64_t v)
{
	__atomic_store_n(ctr, v, __ATOMIC_RELAXED);
}

/* stats_set_broken - record the first broken reason, then the flag
 * (release: pairs with the acquire load in stats_queue_read). */
static inline void stats_set_broken(struct stats_queue *q, const char *reason)
{
	size_t n;

	if (__atomic_load_n(&q->broken, __ATOMIC_RELAXED))
		return;
	n = strnlen(reason, STATS_REASON_LEN - 1);
	memcpy(q->broken_reason, reason, n);
	q->broken_reason[n] = '\0';
	__atomic_store_n(&q->broken, 1u, __ATOMIC_RELEASE);
}

/* A reader's copy of one queue. */
struct stats_queue_snapshot {
	VNIC_QUEUE_COUNTERS(STATS_U64_FIELD)
	uint64_t kicks_avoided;
	int broken;
	char broken_reason[STATS_REASON_LEN]; /* always NUL-terminated */
};

/* stats_queue_read - copy one queue's counters (supervisor side; no lock,
 * never blocks the worker). The reason is read only after an acquire load
 * of broken (pairs with the release in stats_set_broken) and is always
 * NUL-terminated, whatever the page holds. */
static inline void stats_queue_read(const struct stats_queue *q, struct stats_queue_snapshot *s)
{
#define STATS_READ_ONE(type, name, kind) s->name = __atomic_load_n(&q->name, __ATOMIC_RELAXED);
	VNIC_QUEUE_COUNTERS(STATS_READ_ONE)
#undef STATS_READ_ONE
	s->kicks_avoided = __atomic_load_n(&q->kicks_avoided, __ATOMIC_RELAXED);
	s->broken = __atomic_load_n(&q->broken, __ATOMIC_ACQUIRE) != 0;
	s->broken_reason[0] = '\0';
	if (s->broken) {
		memcpy(s->broken_reason, q->broken_reason, STATS_REASON_LEN);
		s->broken_reason[STATS_REASON_LEN - 1] = '\0';
	}
}

#endif
