/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vring: the device side of a virtio 1.x split virtqueue (virtio spec 2.7).
 *
 * The guest is hostile: every byte of the descriptor table, the avail ring
 * and the used ring can be wrong, and can change while we read it. So:
 *  - every descriptor is copied once into a local (a snapshot) and only the
 *    snapshot is validated and used;
 *  - the device keeps shadow indices (last_avail_idx, used_idx) and never
 *    reads the used ring back as truth (TESTPLAN G17), except once in
 *    vring_recover_inflight after a crash, bounded and checked;
 *  - every walk is bounded by the queue size (or indirect table size);
 *  - a rule broken by the guest marks the queue broken with a reason a
 *    person can read; a broken queue consumes nothing more. Never an
 *    assert, never a crash, never a silent stall.
 *
 * Policies chosen where the threat model (doc/threats.md) leaves a choice;
 * its rows G6, G8, G9 and G12 record them:
 *  - G6 zero-length descriptor: BROKEN (as QEMU and libvhost-user).
 *  - G9 indirect: supported when VIRTIO_F_INDIRECT_DESC is negotiated;
 *    INDIRECT|NEXT, nested INDIRECT, a table len of 0 or not a multiple of
 *    16, more than VRING_MAX_SIZE entries, or a table not inside one
 *    region: BROKEN. INDIRECT without the feature: BROKEN.
 *  - G8 a buffer contiguous in gpa across two regions: scatter into two
 *    iovecs.
 *  - A chain needing more than VRING_CHAIN_MAX_IOV iovecs is popped with
 *    truncated set; the caller returns it with length 0 (DROP).
 *
 * Library code: no logging, no libevent.
 */
#ifndef VNIC_VRING_H
#define VNIC_VRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "dirtylog.h"
#include "inflight.h"
#include "memtable.h"
#include "virtio_net.h"

/* Spec 2.7: queue size is a power of 2, at most 32768. */
#define VRING_MAX_SIZE 32768u

/* Spec 2.7.5 descriptor flags. */
#define VRING_DESC_F_NEXT     1u
#define VRING_DESC_F_WRITE    2u
#define VRING_DESC_F_INDIRECT 4u

/* Spec 2.7.7 / 2.7.10 suppression flags. */
#define VRING_AVAIL_F_NO_INTERRUPT 1u
#define VRING_USED_F_NO_NOTIFY     1u

/* Feature bits (spec 6): virtio_net.h. */

/* writev/readv take at most this many iovecs (UIO_MAXIOV). */
#define VRING_CHAIN_MAX_IOV 1024u

/* Ring layouts, little-endian as virtio 1.x requires (spec 2.7.5-2.7.8). */
struct vring_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct vring_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[]; /* num entries, then uint16_t used_event */
};

struct vring_used_elem {
	uint32_t id;
	uint32_t len;
};

struct vring_used {
	uint16_t flags;
	uint16_t idx;
	struct vring_used_elem ring[]; /* num entries, then uint16_t avail_event */
};

/* Sizes and alignments of the three areas (spec 2.7: 16, 2, 4). */
static inline uint64_t vring_desc_size(unsigned num) { return 16ull * num; }
static inline uint64_t vring_avail_size(unsigned num) { return 6ull + 2ull * num; }
static inline uint64_t vring_used_size(unsigned num) { return 6ull + 8ull * num; }
#define VRING_DESC_ALIGN  16u
#define VRING_AVAIL_ALIGN 2u
#define VRING_USED_ALIGN  4u

/* Where a VMM (or simulated guest) lays the three areas out from base:
 * desc, then avail, then used aligned to 4. */
struct vring_layout {
	uint64_t desc, avail, used; /* guest physical addresses */
	uint64_t total;             /* bytes from base to the end of used */
};
void vring_layout(unsigned num, uint64_t base, struct vring_layout *l);

/* Spec 2.7.10.2: should the other side be notified, given it asked to be
 * at event_idx, and we moved our index from old to new_idx? */
static inline bool vring_need_event(uint16_t event_idx, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - event_idx - 1) < (uint16_t)(new_idx - old);
}

/* One popped chain. iov[0..nout) are device-readable, iov[nout..nout+nin)
 * device-writable, pointing straight into guest memory. */
struct vring_chain {
	uint16_t head;     /* id to return with vring_push */
	uint16_t ndesc;    /* descriptors walked, indirect entries included */
	unsigned nout;
	unsigned nin;
	uint64_t out_len;  /* 64-bit: no sum of u32 lengths can wrap (G12) */
	uint64_t in_len;
	bool truncated;    /* more than VRING_CHAIN_MAX_IOV segments: DROP it */
	struct iovec iov[VRING_CHAIN_MAX_IOV];
};

/* Test-only crash points of the inflight protocol: vring calls
 * vq->inflight_hook (NULL in production) right after each of these stores,
 * so a test can abandon the vring there as a crash would (check_inflight). */
enum vring_inflight_step {
	VRING_IF_POP_SLOT,      /* pop: slot[head] = 1 + position */
	VRING_IF_POP_AVAIL,     /* pop: avail_seq advanced */
	VRING_IF_UNPOP_AVAIL,   /* unpop: avail_seq rewound */
	VRING_IF_UNPOP_SLOT,    /* unpop: one slot cleared */
	VRING_IF_PUSH_ELEM,     /* push: used element written (guest memory) */
	VRING_IF_FLUSH_IDX,     /* flush: used->idx published (guest memory) */
	VRING_IF_FLUSH_SLOT,    /* flush: one published head's slot cleared */
	VRING_IF_FLUSH_COMMIT,  /* flush: used_seq committed */
	VRING_IF_FIXUP_SLOT,    /* recovery: one slot cleared */
	VRING_IF_FIXUP_COMMIT,  /* recovery: used_seq committed */
};

struct vring;
typedef void (*vring_inflight_hook_fn)(struct vring *vq, enum vring_inflight_step step);

/* Inflight tracking state of one queue (vring_attach_inflight). */
struct vring_inflight {
	struct inflight_queue *q;  /* in the shared region */
	uint64_t avail_seq;        /* 64-bit shadows of last_avail_idx ... */
	uint64_t used_seq;         /* ... and of the committed used idx */
	uint16_t *popped;          /* num: head popped at position p, at p % num */
	uint16_t *pushed;          /* num: heads pushed since the last flush */
	unsigned npushed;
	struct vring_inflight_ent *sort; /* num: recovery scratch */
	bool recover;              /* LIVE region: recover before the first pop */
};

struct vring {
	/* Configuration, fixed by vring_init. */
	uint16_t num;
	bool event_idx;
	bool indirect;
	const struct memtable *mt;
	struct vring_desc *desc;   /* host pointers into guest memory */
	struct vring_avail *avail;
	struct vring_used *used;

	/* Device state: shadows, never read back from guest memory. */
	uint16_t last_avail_idx;   /* next avail entry to pop */
	/* avail->idx as last read (validated, after Barrier A'): entries
	 * up to it are popped without reading the index or fencing again,
	 * so a burst costs one index read and one barrier (issue 9). */
	uint16_t avail_shadow;
	uint16_t used_idx;         /* next used entry to write */
	uint16_t published_idx;    /* last value written to used->idx */
	uint16_t signalled_used;   /* used idx at the last interrupt */
	bool signalled_used_valid;
	uint16_t inflight;         /* popped and not yet pushed (G5) */
	bool notify_enabled;       /* guest kicks wanted */

	bool broken;
	char broken_reason[160];

	/* Inflight tracking: NULL (no tracking) unless attached. */
	struct vring_inflight *inf;
	vring_inflight_hook_fn inflight_hook; /* tests only; NULL in production */

	/* Live migration (issue 14): every store to the used ring (elements,
	 * idx, flags, avail_event) is marked in log after it is made; the
	 * caller flushes the log (dirtylog_flush) before it interrupts the
	 * guest. NULL: logging off, one predicted branch per store. Set by
	 * the caller between runs (vring_init clears it). */
	struct dirtylog *log;
	uint64_t used_gpa;         /* the used ring's guest address, for log */
};

/*
 * vring_init - configure a queue on mapped guest memory.
 * @num: queue size, a power of 2 in 1..VRING_MAX_SIZE (TESTPLAN C5).
 * @desc_gpa, @avail_gpa, @used_gpa: each area must be aligned as the spec
 * requires, lie wholly inside one region, and not overlap the others (C7).
 * @features: negotiated feature bits (VIRTIO_F_EVENT_IDX,
 * VIRTIO_F_INDIRECT_DESC are honoured).
 * The queue starts at index 0 with guest notifications enabled.
 * Returns: 0, or -EINVAL with err filled (vq unchanged).
 */
int vring_init(struct vring *vq, const struct memtable *mt, unsigned num,
	       uint64_t desc_gpa, uint64_t avail_gpa, uint64_t used_gpa,
	       uint64_t features, char *err, size_t errlen);

/* vring_set_base - resume at index idx (vhost-user SET_VRING_BASE): both
 * last_avail_idx and used_idx start there, nothing in flight. */
void vring_set_base(struct vring *vq, uint16_t idx);

/*
 * vring_base_stale - vhost-user resumption (worker.proto
 * Config.base_from_used_idx; doc/vhost-user.md): does a NIC's first
 * worker given @base for a ring of @num entries whose used->idx reads
 * @used resume at @used instead? Yes when base is 0 and the ring has
 * moved (a front end that lost track: DPDK virtio-user), or when used is
 * ahead of base by 1..num (the front end read the used index while the
 * previous back end still completed chains: QEMU after vnicd died; a used
 * index can never pass the next avail index). used behind base, or
 * further ahead than a ring: the base stands. The one rule for the worker
 * and for vnicd's answer when no worker reported a final index.
 */
static inline bool vring_base_stale(uint16_t base, uint16_t used, uint32_t num)
{
	return used != base && (base == 0 || (uint16_t)(used - base) <= num);
}

/* vring_guest_used_idx - used->idx as guest memory says now (one read;
 * a hint for vhost-user resumption, never trusted beyond 16 bits). */
uint16_t vring_guest_used_idx(const struct vring *vq);

/*
 * vring_pop - take the next available chain.
 * The whole chain is walked and validated before anything is returned
 * (TESTPLAN G1-G12, G16). On a violation the queue is marked broken.
 * Returns: 1 and *c filled; 0 when the ring is empty; -EIO when the queue
 * is broken (now or before).
 */
int vring_pop(struct vring *vq, struct vring_chain *c);

/*
 * vring_unpop - give back the last n popped chains without using them
 * (RX popped more buffers than the frame needed). Nothing was published
 * for them, so the guest cannot tell; they are popped again next time.
 * @n must not exceed the chains popped since the last vring_push.
 */
void vring_unpop(struct vring *vq, uint16_t n);

/*
 * vring_push - return a chain to the guest with @len bytes written.
 * Writes the used element (not yet visible: see vring_flush).
 * @head must come from vring_pop on this queue and not be pushed yet.
 */
void vring_push(struct vring *vq, uint16_t head, uint32_t len);

/* vring_flush - make every pushed element visible by publishing used->idx.
 * Pushed elements are written before the index (Barrier U). */
void vring_flush(struct vring *vq);

/* vring_should_notify - after vring_flush: does the guest want an
 * interrupt for what was published since the last one? Honours
 * VRING_AVAIL_F_NO_INTERRUPT, or used_event with EVENT_IDX. */
bool vring_should_notify(struct vring *vq);

/* vring_notify_disable - ask the guest not to kick (NO_NOTIFY flag, or
 * with EVENT_IDX an avail_event that the guest will not reach soon). */
void vring_notify_disable(struct vring *vq);

/* vring_notify_enable - ask the guest to kick again, then re-check the
 * ring after a full barrier (the lost-wakeup race).
 * Returns: true when buffers arrived meanwhile: the caller must process
 * them (and may disable notifications again) instead of sleeping. */
bool vring_notify_enable(struct vring *vq);

/* vring_notify_enable_window - like vring_notify_enable, but with
 * EVENT_IDX ask the guest to kick only once it has published @window more
 * entries than we consumed (avail_event = last_avail_idx + window - 1).
 * window <= 1, or no EVENT_IDX: exactly vring_notify_enable. The caller
 * must bound how long it sleeps on a window above 1 (a timer): a guest
 * that posts fewer entries never kicks. Re-checks after Barrier K.
 * Returns: true when buffers are already pending (process them). */
bool vring_notify_enable_window(struct vring *vq, unsigned window);

/* vring_avail_pending - is there at least one chain to pop? */
bool vring_avail_pending(struct vring *vq);

/*
 * vring_attach_inflight - track this queue's in-flight heads in q, one
 * queue of a checked region (inflight_region_check). Call after
 * vring_init and vring_set_base, before the first pop.
 * A FRESH q takes the ring's current index as its base and becomes LIVE.
 * A LIVE q was used by an earlier worker: the ring's index is ignored and
 * vring_recover_inflight() must run before the first pop (until then
 * vring_pop marks the queue broken).
 * Allocates about 20 bytes per ring entry of private state (call it
 * before any sandbox).
 * Returns: 1 when recovery is needed, 0 when not, -ENOMEM, or -EINVAL
 * (q->num is not the ring's size, or already attached).
 */
int vring_attach_inflight(struct vring *vq, struct inflight_queue *q);

/* vring_detach_inflight - free the private state (the region is left as
 * it is: a later worker recovers from it). Accepts a vring never attached. */
void vring_detach_inflight(struct vring *vq);

/*
 * vring_recover_inflight - resume a queue from a LIVE region left by a
 * dead worker: reads the guest's used->idx once (bounded: it cannot be
 * ahead of the committed index by more than what was in flight), finishes
 * the interrupted flush if there was one, checks the region's invariant,
 * then completes every head still in flight exactly once, in pop order,
 * with used length 0, and flushes. Then the queue resumes at the region's
 * avail index. The caller sends one interrupt whatever the result of
 * vring_should_notify (the dead worker may have published without
 * interrupting) and processes the ring without waiting for a kick.
 *
 * Used length 0 on TX: the frame may or may not have reached the backend
 * (at most once). On RX: the buffer comes back empty; a Linux guest drops
 * a used buffer shorter than its header and counts it in rx_length_errors.
 *
 * Returns: 0 (*ret_completed heads completed, may be NULL), or -EIO with
 * the queue broken and a reason (inconsistent region or guest index).
 */
int vring_recover_inflight(struct vring *vq, unsigned *ret_completed);

/* vring_mark_broken - mark the queue broken with a reason (printf format).
 * The first reason sticks. */
void vring_mark_broken(struct vring *vq, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
