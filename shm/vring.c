/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vring: device side of a split virtqueue (virtio 1.x, spec 2.7).
 *
 * Everything the guest can write is read through the accessors below,
 * exactly once per use: avail->idx, avail->flags, avail->ring[], used_event
 * with single 16-bit atomic loads, descriptors with one memcpy into a local
 * followed by a compiler barrier. Only the local copy is validated and used
 * (TESTPLAN G16). The used ring is written, never read (G17).
 *
 * See vring.h for the policies (zero length, indirect, scatter, truncation).
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vring.h"

/* Stops the compiler from merging the descriptor copy with later uses,
 * i.e. from reading guest memory again instead of the snapshot. */
#define vring_compiler_barrier() __asm__ __volatile__("" ::: "memory")

static inline uint16_t vring_load16(const uint16_t *p)
{
	return le16toh(__atomic_load_n(p, __ATOMIC_RELAXED));
}

static inline void vring_store16(uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, htole16(v), __ATOMIC_RELAXED);
}

static inline void vring_store32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, htole32(v), __ATOMIC_RELAXED);
}

/* used_event sits after the avail ring, avail_event after the used ring
 * (spec 2.7.6, 2.7.8). */
static inline uint16_t *vring_used_event(const struct vring *vq)
{
	return &vq->avail->ring[vq->num];
}

/* ------------------------------------------------ used ring stores
 *
 * Every store the device makes to guest memory in this file goes through
 * these, so each is marked in the dirty log when migration logs (issue
 * 14): after the store, into the log's cache; the bits reach the log at
 * the caller's dirtylog_flush (Barrier L). Logging off: one branch. */
static inline void vring_log_used(struct vring *vq, uint64_t off, uint64_t len)
{
	if (__builtin_expect(vq->log != NULL, 0))
		dirtylog_mark(vq->log, vq->used_gpa + off, len);
}

static inline void vring_set_avail_event(struct vring *vq, uint16_t v)
{
	vring_store16((uint16_t *)(void *)&vq->used->ring[vq->num], v);
	vring_log_used(vq, offsetof(struct vring_used, ring) +
			   (uint64_t)vq->num * sizeof(struct vring_used_elem), sizeof(uint16_t));
}

static inline void vring_set_used_flags(struct vring *vq, uint16_t v)
{
	vring_store16(&vq->used->flags, v);
	vring_log_used(vq, offsetof(struct vring_used, flags), sizeof(uint16_t));
}

/* ------------------------------------------------ inflight tracking
 *
 * The region (inflight.h) must describe the queue correctly after a crash
 * at ANY instruction, so every store to it (and the guest-visible stores
 * that pair with them) happens in a fixed order, one 8-byte store at a
 * time. A crash is a process death: the next worker reads the region only
 * after the kernel reaped this one, so every store that was executed is
 * seen, in program order; the compiler is the only thing that could
 * reorder them, hence vring_if_order() between them.
 *
 * Crash points (what the region says afterwards, and why
 * vring_recover_inflight is right), in the order of the code below:
 *
 *  pop    P0 before slot[h]      nothing recorded; the avail entry is
 *                                still ahead of avail_seq: popped again.
 *         P1 slot[h] = 1 + pos   slot position == avail_seq, i.e. not below
 *                                it: recovery clears it (popped again).
 *         P2 avail_seq = pos + 1 a normal in-flight head: completed.
 *  unpop  U1 avail_seq -= n      slots of the given-back heads now name
 *                                positions >= avail_seq: cleared by
 *                                recovery, popped again.
 *         U2 slots cleared       as U1 for the ones not yet cleared.
 *  push   W1 used elem written   not visible (used->idx unchanged), head
 *                                still in flight: completed with len 0;
 *                                the element is overwritten.
 *  flush  F1 used->idx           the guest sees the batch; used_seq lags:
 *                                recovery reads the guest's used->idx once,
 *                                bounds it, and clears the slots of the ids
 *                                in used entries [used_seq, used->idx).
 *         F2 slots cleared       as F1; slots already clear are accepted.
 *         F3 used_seq committed  consistent.
 *  The slots are cleared BEFORE used_seq is committed: after the commit,
 *  nothing would tell recovery which heads the batch held (a design that
 *  commits first must break the queue on a crash between the two).
 *  Recovery itself uses the same order (clear, then commit), so a crash
 *  during recovery is recovered the same way.
 */
struct vring_inflight_ent {
	uint64_t pos;
	uint16_t head;
};

/* Keeps the compiler from reordering region stores (see above). */
#define vring_if_order() __atomic_signal_fence(__ATOMIC_SEQ_CST)

static inline uint64_t vring_if_load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline void vring_if_store(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
	vring_if_order();
}

static inline void vring_if_step(struct vring *vq, enum vring_inflight_step step)
{
	if (__builtin_expect(vq->inflight_hook != NULL, 0))
		vq->inflight_hook(vq, step);
}

void vring_layout(unsigned num, uint64_t base, struct vring_layout *l)
{
	l->desc = base;
	l->avail = base + vring_desc_size(num);
	l->used = (l->avail + vring_avail_size(num) + VRING_USED_ALIGN - 1) &
		  ~(uint64_t)(VRING_USED_ALIGN - 1);
	l->total = l->used + vring_used_size(num) - base;
}

void vring_mark_broken(struct vring *vq, const char *fmt, ...)
{
	va_list ap;

	if (vq->broken)
		return; /* the first reason is the one that explains the rest */
	va_start(ap, fmt);
	vsnprintf(vq->broken_reason, sizeof(vq->broken_reason), fmt, ap);
	va_end(ap);
	vq->broken = true;
}

static int vring_check_area(const struct memtable *mt, const char *name, uint64_t gpa,
			    uint64_t size, unsigned align, void **ret_p, char *err, size_t errlen)
{
	void *p;

	if (gpa % align) {
		snprintf(err, errlen, "%s ring at gpa 0x%llx is not %u-byte aligned (spec 2.7)",
			 name, (unsigned long long)gpa, align);
		return -EINVAL;
	}
	p = memtable_translate_all(mt, gpa, size);
	if (!p) {
		snprintf(err, errlen,
			 "%s ring [0x%llx, +0x%llx) is not inside one guest memory region",
			 name, (unsigned long long)gpa, (unsigned long long)size);
		return -EINVAL;
	}
	*ret_p = p;
	return 0;
}

static bool vring_ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	/* No wrap: both ranges passed memtable_translate_all. */
	return a < b + blen && b < a + alen;
}

int vring_init(struct vring *vq, const struct memtable *mt, unsigned num,
	       uint64_t desc_gpa, uint64_t avail_gpa, uint64_t used_gpa,
	       uint64_t features, char *err, size_t errlen)
{
	uint64_t dsz, asz, usz;
	void *d, *a, *u;
	int r;

	/* Spec 2.7: Queue Size is a power of 2, at most 32768. */
	if (num == 0 || num > VRING_MAX_SIZE || (num & (num - 1))) {
		snprintf(err, errlen, "queue size %u is not a power of 2 in 1..%u (spec 2.7)",
			 num, VRING_MAX_SIZE);
		return -EINVAL;
	}
	if (!mt) {
		snprintf(err, errlen, "no guest memory table");
		return -EINVAL;
	}
	dsz = vring_desc_size(num);
	asz = vring_avail_size(num);
	usz = vring_used_size(num);
	r = vring_check_area(mt, "descriptor", desc_gpa, dsz, VRING_DESC_ALIGN, &d, err, errlen);
	if (r < 0)
		return r;
	r = vring_check_area(mt, "avail", avail_gpa, asz, VRING_AVAIL_ALIGN, &a, err, errlen);
	if (r < 0)
		return r;
	r = vring_check_area(mt, "used", used_gpa, usz, VRING_USED_ALIGN, &u, err, errlen);
	if (r < 0)
		return r;
	/* Overlapping areas would let our used writes change descriptors or
	 * avail entries under us (TESTPLAN C7). */
	if (vring_ranges_overlap(desc_gpa, dsz, avail_gpa, asz)) {
		snprintf(err, errlen, "descriptor and avail rings overlap");
		return -EINVAL;
	}
	if (vring_ranges_overlap(desc_gpa, dsz, used_gpa, usz)) {
		snprintf(err, errlen, "descriptor and used rings overlap");
		return -EINVAL;
	}
	if (vring_ranges_overlap(avail_gpa, asz, used_gpa, usz)) {
		snprintf(err, errlen, "avail and used rings overlap");
		return -EINVAL;
	}

	memset(vq, 0, sizeof(*vq));
	vq->num = (uint16_t)num;
	vq->event_idx = features & (1ull << VIRTIO_F_EVENT_IDX);
	vq->indirect = features & (1ull << VIRTIO_F_INDIRECT_DESC);
	vq->mt = mt;
	vq->desc = d;
	vq->avail = a;
	vq->used = u;
	vq->used_gpa = used_gpa;
	vq->notify_enabled = true;
	return 0;
}

void vring_set_base(struct vring *vq, uint16_t idx)
{
	vq->last_avail_idx = idx;
	vq->avail_shadow = idx;
	vq->used_idx = idx;
	vq->published_idx = idx;
	vq->signalled_used_valid = false;
	vq->inflight = 0;
}

uint16_t vring_guest_used_idx(const struct vring *vq)
{
	return vring_load16(&vq->used->idx);
}

/* Snapshot descriptor i of a table (the ring's or an indirect one, which
 * need not be aligned) into host byte order. One read of guest memory. */
static void vring_desc_fetch(const uint8_t *table, unsigned i, struct vring_desc *d)
{
	struct vring_desc raw;

	memcpy(&raw, table + (size_t)i * sizeof(raw), sizeof(raw));
	vring_compiler_barrier();
	d->addr = le64toh(raw.addr);
	d->len = le32toh(raw.len);
	d->flags = le16toh(raw.flags);
	d->next = le16toh(raw.next);
}

/* Is every byte of [gpa, gpa+len) in guest memory? Used once the chain is
 * truncated and no more iovecs are kept. Bounded by the region count. */
static bool vring_range_ok(const struct memtable *mt, uint64_t gpa, uint64_t len)
{
	while (len > 0) {
		uint64_t l = len;

		if (!memtable_translate(mt, gpa, &l))
			return false;
		gpa += l;
		len -= l;
	}
	return true;
}

/* One buffer descriptor (not INDIRECT): validate the snapshot, append its
 * iovecs. Returns 0 or -EIO (queue marked broken). */
static int vring_add_buf(struct vring *vq, struct vring_chain *c, const struct vring_desc *d,
			 uint16_t head, unsigned idx, bool in_indirect)
{
	const char *where = in_indirect ? "indirect descriptor" : "descriptor";
	bool writable = d->flags & VRING_DESC_F_WRITE;
	uint64_t last;
	unsigned n;
	int r;

	/* G6 policy: a zero-length descriptor is a broken driver (as QEMU and
	 * libvhost-user); skipping it would hide a loop with no progress. */
	if (d->len == 0) {
		vring_mark_broken(vq, "zero-length %s %u in chain from head %u", where, idx, head);
		return -EIO;
	}
	/* G7: the range must not wrap the 64-bit address space. */
	if (__builtin_add_overflow(d->addr, (uint64_t)d->len - 1, &last)) {
		vring_mark_broken(vq, "%s %u in chain from head %u: addr 0x%llx + len %u wraps",
				  where, idx, head, (unsigned long long)d->addr, d->len);
		return -EIO;
	}
	/* G10, spec 2.7.5.2: device-writable descriptors come after every
	 * device-readable one (in_len
	 * counts writable bytes even once truncated; every len is > 0). */
	if (!writable && c->in_len > 0) {
		vring_mark_broken(vq, "readable %s %u after a writable one in chain from head %u",
				  where, idx, head);
		return -EIO;
	}

	if (!c->truncated) {
		n = c->nout + c->nin;
		r = memtable_to_iov(vq->mt, d->addr, d->len, c->iov, &n, VRING_CHAIN_MAX_IOV);
		if (r == -ENOBUFS) {
			c->truncated = true;
		} else if (r < 0) {
			goto out_of_memory;
		} else if (writable) {
			c->nin = n - c->nout;
		} else {
			c->nout = n;
		}
	}
	/* Truncated chains are still checked to the end: the chain must be
	 * valid as a whole before it is returned, even for a DROP. */
	if (c->truncated && !vring_range_ok(vq->mt, d->addr, d->len))
		goto out_of_memory;

	/* G12: 64-bit sums of 32-bit lengths; at most 2 * 32768 descriptors
	 * of < 2^32 bytes each, so these cannot wrap. The spec's 2^32 total
	 * (2.7.5.2) is not enforced here: callers DROP above their maximum
	 * frame, which is far lower. */
	if (writable)
		c->in_len += d->len;
	else
		c->out_len += d->len;
	return 0;

out_of_memory:
	vring_mark_broken(vq, "%s %u in chain from head %u: [0x%llx, +%u) is outside guest memory",
			  where, idx, head, (unsigned long long)d->addr, d->len);
	return -EIO;
}

/* Switch the walk to the indirect table described by d (spec 2.7.5.3).
 * Returns 0 with *ret_table and *ret_n, or -EIO. */
static int vring_enter_indirect(struct vring *vq, const struct vring_desc *d, uint16_t head,
				unsigned idx, bool in_indirect, const uint8_t **ret_table,
				unsigned *ret_n)
{
	const uint8_t *t;

	if (!vq->indirect) {
		vring_mark_broken(vq, "INDIRECT descriptor %u in chain from head %u but "
				  "VIRTIO_F_INDIRECT_DESC was not negotiated", idx, head);
		return -EIO;
	}
	/* Spec 2.7.5.3.1: no INDIRECT inside an indirect table. */
	if (in_indirect) {
		vring_mark_broken(vq, "nested INDIRECT descriptor %u in the indirect table of "
				  "head %u", idx, head);
		return -EIO;
	}
	/* Spec 2.7.5.3.1: INDIRECT and NEXT are exclusive. */
	if (d->flags & VRING_DESC_F_NEXT) {
		vring_mark_broken(vq, "descriptor %u in chain from head %u has both INDIRECT "
				  "and NEXT", idx, head);
		return -EIO;
	}
	if (d->len == 0 || d->len % sizeof(struct vring_desc)) {
		vring_mark_broken(vq, "indirect table of head %u has length %u, not a positive "
				  "multiple of 16", head, d->len);
		return -EIO;
	}
	if (d->len / sizeof(struct vring_desc) > VRING_MAX_SIZE) {
		vring_mark_broken(vq, "indirect table of head %u has %u entries, more than %u",
				  head, d->len / (unsigned)sizeof(struct vring_desc),
				  VRING_MAX_SIZE);
		return -EIO;
	}
	/* The table itself is read in place: it must not be split. */
	t = memtable_translate_all(vq->mt, d->addr, d->len);
	if (!t) {
		vring_mark_broken(vq, "indirect table of head %u at [0x%llx, +%u) is not inside "
				  "one guest memory region", head, (unsigned long long)d->addr,
				  d->len);
		return -EIO;
	}
	*ret_table = t;
	*ret_n = d->len / sizeof(struct vring_desc);
	return 0;
}

/* Walk and validate the chain starting at head (already < num). */
static int vring_walk(struct vring *vq, uint16_t head, struct vring_chain *c)
{
	const uint8_t *table = (const uint8_t *)vq->desc;
	unsigned table_n = vq->num;
	unsigned walked = 0; /* in the current table */
	unsigned total = 0;
	bool in_indirect = false;
	unsigned i = head;
	struct vring_desc d;
	int r;

	c->head = head;
	c->ndesc = 0;
	c->nout = 0;
	c->nin = 0;
	c->out_len = 0;
	c->in_len = 0;
	c->truncated = false;

	for (;;) {
		/* G1: a chain visits each descriptor of a table at most once,
		 * so more than the table size means a loop (spec 2.7.5.2:
		 * loops are forbidden; 2.7.5.3.1: no chain longer than the
		 * queue size). An indirect table is bounded by its own size. */
		if (walked >= table_n) {
			if (in_indirect)
				vring_mark_broken(vq, "descriptor loop: indirect table of head %u "
						  "chains more than its %u entries", head, table_n);
			else
				vring_mark_broken(vq, "descriptor loop: chain from head %u longer "
						  "than queue size %u", head, table_n);
			return -EIO;
		}
		walked++;
		total++;
		vring_desc_fetch(table, i, &d);

		if (d.flags & VRING_DESC_F_INDIRECT) {
			r = vring_enter_indirect(vq, &d, head, i, in_indirect, &table, &table_n);
			if (r < 0)
				return r;
			in_indirect = true;
			walked = 0;
			i = 0;
			continue;
		}
		r = vring_add_buf(vq, c, &d, head, i, in_indirect);
		if (r < 0)
			return r;
		if (!(d.flags & VRING_DESC_F_NEXT))
			break;
		/* G2: next indexes the current table. */
		if (d.next >= table_n) {
			vring_mark_broken(vq, "%s %u in chain from head %u: next %u is not below "
					  "the %s size %u", in_indirect ? "indirect descriptor" :
					  "descriptor", i, head, d.next,
					  in_indirect ? "indirect table" : "queue", table_n);
			return -EIO;
		}
		i = d.next;
	}
	/* At most num direct plus VRING_MAX_SIZE indirect entries. */
	c->ndesc = total > UINT16_MAX ? UINT16_MAX : (uint16_t)total;
	return 0;
}

int vring_pop(struct vring *vq, struct vring_chain *c)
{
	uint16_t avail_idx, pending, head;
	int r;

	if (vq->broken)
		return -EIO;
	if (vq->inf && vq->inf->recover) {
		/* A caller bug, not the guest's: a LIVE region must be
		 * recovered first or heads would be completed twice. */
		vring_mark_broken(vq, "inflight region not recovered before the first pop");
		return -EIO;
	}
	/* Burst: while entries seen at the last read remain, no read of
	 * avail->idx and no barrier (they were validated and fenced then). */
	if (vq->avail_shadow == vq->last_avail_idx) {
		avail_idx = vring_load16(&vq->avail->idx);
		if (avail_idx == vq->last_avail_idx)
			return 0;
		/* G4, spec 2.7.13.3: the driver never moves idx back nor more
		 * than a queue's worth ahead of what we consumed. */
		pending = (uint16_t)(avail_idx - vq->last_avail_idx);
		if (pending > vq->num) {
			vring_mark_broken(vq, "avail index moved from %u to %u: %u entries "
					  "pending, more than queue size %u", vq->last_avail_idx,
					  avail_idx, pending, vq->num);
			return -EIO;
		}
		/* Barrier A' (read): read avail->ring[] and descriptors only
		 * after avail->idx. Pairs with Barrier A in the driver, its
		 * write barrier before publishing avail->idx
		 * (vring_drv_publish). */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		vq->avail_shadow = avail_idx;
	}

	/* G5: the guest has only num buffers; a head offered while num are
	 * in flight is reused before completion. */
	if (vq->inflight >= vq->num) {
		vring_mark_broken(vq, "more than queue size %u chains in flight (a head was "
				  "reused before it was used)", vq->num);
		return -EIO;
	}
	head = vring_load16(&vq->avail->ring[vq->last_avail_idx & (vq->num - 1)]);
	/* G3 */
	if (head >= vq->num) {
		vring_mark_broken(vq, "avail ring entry %u: head %u is not below queue size %u",
				  vq->last_avail_idx, head, vq->num);
		return -EIO;
	}
	r = vring_walk(vq, head, c);
	if (r < 0)
		return r;
	if (vq->inf) {
		struct vring_inflight *f = vq->inf;
		uint64_t pos = f->avail_seq;

		/* G5 with tracking: head h is in flight already, so the guest
		 * offered it again before it was used (spec 2.7.13.2). One
		 * slot per head cannot record it twice: BROKEN. */
		if (vring_if_load(&f->q->slot[head])) {
			vring_mark_broken(vq, "avail ring entry %u: head %u offered again while "
					  "in flight", vq->last_avail_idx, head);
			return -EIO;
		}
		/* P1, then P2: see the crash-point table. */
		vring_if_store(&f->q->slot[head], pos + 1);
		vring_if_step(vq, VRING_IF_POP_SLOT);
		vring_if_store(&f->q->avail_seq, pos + 1);
		vring_if_step(vq, VRING_IF_POP_AVAIL);
		f->avail_seq = pos + 1;
		f->popped[pos & (vq->num - 1)] = head;
	}

	vq->last_avail_idx++;
	vq->inflight++;
	/* With notifications on, ask for a kick for the next new entry
	 * (spec 2.7.10: avail_event). */
	if (vq->event_idx && vq->notify_enabled)
		vring_set_avail_event(vq, vq->last_avail_idx);
	return 1;
}

void vring_unpop(struct vring *vq, uint16_t n)
{
	/* Only chains still in flight can be given back; a larger n is a
	 * caller bug, clamped so that the shadows stay consistent. */
	if (n > vq->inflight)
		n = vq->inflight;
	if (vq->inf && n > 0) {
		struct vring_inflight *f = vq->inf;
		uint64_t from = f->avail_seq - n;

		/* U1, then U2: see the crash-point table. The heads come from
		 * our own record of the last n pops, not the avail ring. */
		vring_if_store(&f->q->avail_seq, from);
		vring_if_step(vq, VRING_IF_UNPOP_AVAIL);
		for (uint64_t pos = f->avail_seq; pos-- > from;) {
			vring_if_store(&f->q->slot[f->popped[pos & (vq->num - 1)]], 0);
			vring_if_step(vq, VRING_IF_UNPOP_SLOT);
		}
		f->avail_seq = from;
	}
	vq->last_avail_idx = (uint16_t)(vq->last_avail_idx - n);
	vq->avail_shadow = vq->last_avail_idx; /* read (and check) again */
	vq->inflight = (uint16_t)(vq->inflight - n);
}

void vring_push(struct vring *vq, uint16_t head, uint32_t len)
{
	struct vring_used_elem *e;

	if (vq->inflight > 0)
		vq->inflight--;
	if (vq->broken)
		return; /* the guest must reset the queue; write nothing more */
	e = &vq->used->ring[vq->used_idx & (vq->num - 1)];
	vring_store32(&e->id, head);
	vring_store32(&e->len, len);
	vring_log_used(vq, offsetof(struct vring_used, ring) +
			   (uint64_t)(vq->used_idx & (vq->num - 1)) * sizeof(*e), sizeof(*e));
	vq->used_idx++;
	if (vq->inf) {
		/* W1: still in flight until flushed. At most num pushes
		 * between flushes: each pushed head was popped (G5). */
		if (vq->inf->npushed < vq->num)
			vq->inf->pushed[vq->inf->npushed++] = head;
		vring_if_step(vq, VRING_IF_PUSH_ELEM);
	}
}

void vring_flush(struct vring *vq)
{
	if (vq->broken || vq->published_idx == vq->used_idx)
		return;
	/* Barrier U (write): used elements before used->idx. Pairs with the
	 * driver's read barrier after it reads used->idx
	 * (vring_drv_get_used). */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	/* Written from the shadow; the guest's value is never read (G17). */
	vring_store16(&vq->used->idx, vq->used_idx);
	vring_log_used(vq, offsetof(struct vring_used, idx), sizeof(uint16_t));
	vq->published_idx = vq->used_idx;
	if (vq->inf) {
		struct vring_inflight *f = vq->inf;

		/* F1 done; F2 (clear the batch's slots), then F3 (commit):
		 * see the crash-point table. */
		vring_if_order();
		vring_if_step(vq, VRING_IF_FLUSH_IDX);
		for (unsigned i = 0; i < f->npushed; i++) {
			vring_if_store(&f->q->slot[f->pushed[i]], 0);
			vring_if_step(vq, VRING_IF_FLUSH_SLOT);
		}
		vring_if_store(&f->q->used_seq, f->used_seq + f->npushed);
		vring_if_step(vq, VRING_IF_FLUSH_COMMIT);
		f->used_seq += f->npushed;
		f->npushed = 0;
	}
}

bool vring_should_notify(struct vring *vq)
{
	uint16_t old = vq->signalled_used, new_idx = vq->published_idx;
	bool valid = vq->signalled_used_valid;

	if (vq->broken)
		return false;
	/* Barrier N (full): the used->idx store must be visible before we
	 * read the guest's suppression state, or a guest re-enabling
	 * interrupts concurrently could miss both. Pairs with the full
	 * barrier in the driver's vring_drv_cb_enable. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	vq->signalled_used = new_idx;
	vq->signalled_used_valid = true;
	if (valid && old == new_idx)
		return false; /* nothing published since the last interrupt */
	if (vq->event_idx)
		return !valid || vring_need_event(vring_load16(vring_used_event(vq)), new_idx, old);
	return !(vring_load16(&vq->avail->flags) & VRING_AVAIL_F_NO_INTERRUPT);
}

void vring_notify_disable(struct vring *vq)
{
	vq->notify_enabled = false;
	if (vq->broken)
		return;
	if (vq->event_idx)
		/* An index the guest has passed already: it kicks again only
		 * after 65535 more entries, long after we re-enable. */
		vring_set_avail_event(vq, (uint16_t)(vq->last_avail_idx - 1));
	else
		vring_set_used_flags(vq, VRING_USED_F_NO_NOTIFY);
}

bool vring_notify_enable(struct vring *vq)
{
	vq->notify_enabled = true;
	if (vq->broken)
		return false;
	if (vq->event_idx)
		/* Kick for any entry after the ones visible now. */
		vring_set_avail_event(vq, vring_load16(&vq->avail->idx));
	else
		vring_set_used_flags(vq, 0);
	/* Barrier K (full): publish "kick me" before re-reading avail->idx,
	 * or a guest adding a buffer concurrently and reading the old
	 * suppression state could skip the kick while we go to sleep (lost
	 * wakeup). Pairs with the full barrier in vring_drv_kick_needed. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return vring_load16(&vq->avail->idx) != vq->last_avail_idx;
}

bool vring_notify_enable_window(struct vring *vq, unsigned window)
{
	if (window <= 1 || !vq->event_idx)
		return vring_notify_enable(vq);
	if (window > vq->num)
		window = vq->num;
	/* notify_enabled stays false: vring_pop must not move avail_event
	 * back to "every entry" while the window is open (the caller drains
	 * with notifications off and calls this again when the ring is
	 * empty). */
	vq->notify_enabled = false;
	if (vq->broken)
		return false;
	/* avail_event = last_avail_idx + window - 1: the guest kicks when it
	 * publishes the window-th entry after the ones we consumed (spec
	 * 2.7.10: it notifies when its index passes avail_event). */
	vring_set_avail_event(vq, (uint16_t)(vq->last_avail_idx + window - 1));
	/* Barrier K, as in vring_notify_enable. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return vring_load16(&vq->avail->idx) != vq->last_avail_idx;
}

bool vring_avail_pending(struct vring *vq)
{
	if (vq->broken)
		return false;
	return vring_load16(&vq->avail->idx) != vq->last_avail_idx;
}

/* ------------------------------------------------ inflight: attach, recover */

int vring_attach_inflight(struct vring *vq, struct inflight_queue *q)
{
	struct vring_inflight *f;

	if (vq->inf || !q || q->num != vq->num)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->q = q;
	f->popped = calloc(vq->num, sizeof(*f->popped));
	f->pushed = calloc(vq->num, sizeof(*f->pushed));
	f->sort = calloc(vq->num, sizeof(*f->sort));
	if (!f->popped || !f->pushed || !f->sort) {
		free(f->popped);
		free(f->pushed);
		free(f->sort);
		free(f);
		return -ENOMEM;
	}
	vq->inf = f;
	if (__atomic_load_n(&q->state, __ATOMIC_RELAXED) == INFLIGHT_QUEUE_LIVE) {
		f->recover = true;
		return 1;
	}
	/* FRESH: the ring's index is the base. The indices first, then
	 * LIVE: a crash in between leaves the queue FRESH, and the next
	 * worker takes the same base from the same Config. */
	vring_if_store(&q->avail_seq, vq->last_avail_idx);
	vring_if_store(&q->used_seq, vq->used_idx);
	__atomic_store_n(&q->state, INFLIGHT_QUEUE_LIVE, __ATOMIC_RELAXED);
	vring_if_order();
	f->avail_seq = vq->last_avail_idx;
	f->used_seq = vq->used_idx;
	return 0;
}

void vring_detach_inflight(struct vring *vq)
{
	struct vring_inflight *f = vq->inf;

	if (!f)
		return;
	free(f->popped);
	free(f->pushed);
	free(f->sort);
	free(f);
	vq->inf = NULL;
}

/* Sort by position, in place: heapsort, no allocation and no library
 * call (glibc's qsort may allocate and call sysconf, which the worker's
 * seccomp filter does not allow). n <= VRING_MAX_SIZE. */
static void vring_if_sift(struct vring_inflight_ent *a, unsigned root, unsigned n)
{
	for (;;) {
		unsigned child = 2 * root + 1;
		struct vring_inflight_ent t;

		if (child >= n)
			return;
		if (child + 1 < n && a[child + 1].pos > a[child].pos)
			child++;
		if (a[root].pos >= a[child].pos)
			return;
		t = a[root];
		a[root] = a[child];
		a[child] = t;
		root = child;
	}
}

static void vring_if_sort(struct vring_inflight_ent *a, unsigned n)
{
	for (unsigned i = n / 2; i-- > 0;)
		vring_if_sift(a, i, n);
	for (unsigned end = n; end-- > 1;) {
		struct vring_inflight_ent t = a[0];

		a[0] = a[end];
		a[end] = t;
		vring_if_sift(a, 0, end);
	}
}

int vring_recover_inflight(struct vring *vq, unsigned *ret_completed)
{
	struct vring_inflight *f = vq->inf;
	struct inflight_queue *q;
	uint64_t avail, used, inflight;
	uint16_t guest_used, ahead, mask = (uint16_t)(vq->num - 1);
	unsigned n = 0;

	if (!f || !f->recover) {
		if (ret_completed)
			*ret_completed = 0;
		return 0;
	}
	f->recover = false;
	if (vq->broken)
		return -EIO;
	q = f->q;

	/* The region is hostile (its last writer may have been a
	 * compromised worker): each index read once, then bounded. */
	avail = vring_if_load(&q->avail_seq);
	used = vring_if_load(&q->used_seq);
	if (used > avail || avail - used > vq->num) {
		vring_mark_broken(vq, "inflight region: avail position %llu and used position "
				  "%llu are not 0..%u apart", (unsigned long long)avail,
				  (unsigned long long)used, vq->num);
		return -EIO;
	}
	inflight = avail - used;

	/* F1/F2 crash: the guest's used->idx may be ahead of the committed
	 * index. The one read of a used-ring field the device ever makes
	 * (an exception to G17): guest-writable, so read once and bounded
	 * by what was in flight. */
	guest_used = vring_load16(&vq->used->idx);
	ahead = (uint16_t)(guest_used - (uint16_t)used);
	if (ahead > inflight) {
		vring_mark_broken(vq, "inflight recovery: guest used index %u is %u past the "
				  "committed %u, more than the %llu in flight", guest_used, ahead,
				  (uint16_t)used, (unsigned long long)inflight);
		return -EIO;
	}
	if (ahead > 0) {
		/* Used elements after used->idx (pairs with Barrier U of the
		 * dead worker's flush). */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		for (uint16_t i = 0; i < ahead; i++) {
			const struct vring_used_elem *e =
				&vq->used->ring[(uint16_t)(used + i) & mask];
			uint32_t id = le32toh(__atomic_load_n(&e->id, __ATOMIC_RELAXED));

			if (id >= vq->num) {
				vring_mark_broken(vq, "inflight recovery: published used entry %u "
						  "names head %u, not below queue size %u",
						  (uint16_t)(used + i), id, vq->num);
				return -EIO;
			}
			/* Already clear: F2 got that far. A duplicate or a
			 * forged id shows in the count check below. */
			if (vring_if_load(&q->slot[id])) {
				vring_if_store(&q->slot[id], 0);
				vring_if_step(vq, VRING_IF_FIXUP_SLOT);
			}
		}
		used += ahead;
		inflight -= ahead;
		vring_if_store(&q->used_seq, used);
		vring_if_step(vq, VRING_IF_FIXUP_COMMIT);
	}

	/* Heads still in flight. A slot at or past avail_seq is a pop or
	 * unpop cut short (P1, U1, U2): its avail entry is ahead of us and
	 * is popped again, so the slot is cleared, not completed. */
	for (unsigned h = 0; h < vq->num; h++) {
		uint64_t v = vring_if_load(&q->slot[h]);

		if (v == 0)
			continue;
		if (v - 1 >= avail) {
			vring_if_store(&q->slot[h], 0);
			vring_if_step(vq, VRING_IF_FIXUP_SLOT);
			continue;
		}
		f->sort[n].pos = v - 1;
		f->sort[n].head = (uint16_t)h;
		n++;
	}
	if (n != inflight) {
		vring_mark_broken(vq, "inflight region: %u heads in flight, its indices say %llu",
				  n, (unsigned long long)inflight);
		return -EIO;
	}
	vring_if_sort(f->sort, n);
	for (unsigned i = 1; i < n; i++) {
		if (f->sort[i].pos == f->sort[i - 1].pos) {
			vring_mark_broken(vq, "inflight region: heads %u and %u both popped at "
					  "avail position %llu", f->sort[i - 1].head,
					  f->sort[i].head, (unsigned long long)f->sort[i].pos);
			return -EIO;
		}
	}

	/* Resume: the region's indices are the truth; the Config's base
	 * (vring_set_base) was the previous launch's. */
	vq->last_avail_idx = (uint16_t)avail;
	vq->avail_shadow = (uint16_t)avail;
	vq->used_idx = (uint16_t)used;
	vq->published_idx = (uint16_t)used;
	vq->signalled_used_valid = false;
	vq->inflight = (uint16_t)n;
	f->avail_seq = avail;
	f->used_seq = used;
	f->npushed = 0;
	/* Each leftover exactly once, in pop order, length 0; the normal
	 * push/flush protocol makes this crash-safe too. */
	for (unsigned i = 0; i < n; i++)
		vring_push(vq, f->sort[i].head, 0);
	vring_flush(vq);
	if (vq->event_idx && vq->notify_enabled)
		vring_set_avail_event(vq, vq->last_avail_idx);
	if (ret_completed)
		*ret_completed = n;
	return 0;
}
