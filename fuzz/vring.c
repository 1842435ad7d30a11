/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_vring: the device side of the split ring (shm/vring.c) against a
 * hostile guest: descriptor chains, indirect tables, the avail and used
 * indexes, EVENT_IDX fields and the inflight region (shm/inflight.c), in
 * guest memory the input lays out and writes.
 *
 * Each input builds what a worker has after Config: a memfd (fuzz_memfd)
 * mapped through memtable_map as one or two page-aligned regions, a ring
 * set up with vring_init (sizes and addresses from the input, so invalid
 * ones are refused there), optionally an inflight region attached. The
 * harness maps the same memfd a second time as the guest's view (as
 * tests/testutil.c does) and then runs operations from the input: the
 * device's (pop, push, flush, unpop, notification calls, set_base, a
 * worker crash and recovery) interleaved with the guest's writes into its
 * memory. The guest is concurrent and hostile, but a real second thread
 * would make runs non-deterministic (libFuzzer could not replay or
 * minimize them); every interleaving of guest writes between device
 * operations is reachable here, and the snapshot rule (STYLE habit 5:
 * each descriptor is read once) is what makes writes *during* an
 * operation equivalent to one of those. There is therefore no thread mode.
 *
 * Input (little-endian; reading past the end yields zeros):
 *   u8  pages      guest memory = 1 + pages % 64 pages of 4 KiB
 *   u8  flags      bit 0: two regions; 1: EVENT_IDX; 2: INDIRECT_DESC;
 *                  3: inflight tracking; 4: region 1 below region 0
 *   u8  split      two regions: region 0 holds the first 1 + split %
 *                  (pages - 1) pages of the memfd, region 1 the rest
 *   u8  gap        pages between the regions in gpa (0: contiguous)
 *   u32 gpa0       region 0's gpa in pages
 *   u32 num        queue size, unchecked (vring_init must refuse)
 *   u32 desc, avail, used   ring addresses: gpa0 * 4096 + value
 *   u16 base       vring_set_base
 *   then operations until the input ends (at most OPS_MAX), each a u8
 *   opcode (modulo OP_COUNT) and its operands, listed at enum op below.
 *
 * Checked on every step (abort() when false): a popped chain's head is
 * below num, its iovecs number at most VRING_CHAIN_MAX_IOV, each lies
 * inside one mapped region (and is touched at both ends, so ASan and the
 * guard pages see a bad one), their lengths add up to out_len/in_len, it
 * walked at most num + VRING_MAX_SIZE descriptors; the chains in flight
 * are what the harness holds and never more than num; a push writes its
 * element at the device's own used index; a flush publishes used->idx; with inflight tracking the region's invariant (inflight.h)
 * holds after every operation and is clean after a recovery.
 *
 * Seeds: fuzz/gen_seeds.py vring DIR (python3, committed) writes
 * fuzz/corpus/vring/: one chain, chained descriptors, an indirect table,
 * EVENT_IDX, a wrapped index, rings of 256 and 1024, two regions with a
 * buffer across them, a descriptor rewritten after the pop, inflight
 * tracking with a crash and recovery, invalid ring sizes.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "inflight.h"
#include "memtable.h"
#include "vring.h"

#define PAGE 4096u
#define OPS_MAX 2048u
/* Above this ring size the inflight invariant (O(num)) is checked only
 * after flushes and recoveries, so one input stays well under 1 s. */
#define IF_CHECK_ALWAYS_MAX 256u

enum op {
	OP_POP,          /* vring_pop */
	OP_PUSH,         /* u8 which held chain, u32 used length */
	OP_FLUSH,        /* vring_flush */
	OP_UNPOP,        /* u8 n (bounded by chains popped since the last push) */
	OP_NOTIFY_OFF,   /* vring_notify_disable */
	OP_NOTIFY_ON,    /* u8 window: vring_notify_enable_window */
	OP_SHOULD,       /* vring_should_notify */
	OP_PENDING,      /* vring_avail_pending */
	OP_SET_BASE,     /* u16 idx (nothing in flight afterwards; not tracked) */
	OP_WRITE,        /* u32 memfd offset, u8 len, len bytes: guest write */
	OP_DESC,         /* u16 i, u32 addr (from gpa0), u32 len, u16 flags, u16 next */
	OP_AVAIL,        /* u16 head: avail->ring[idx % num] = head, idx++ */
	OP_AVAIL_IDX,    /* u16 avail->idx */
	OP_USED_EVENT,   /* u16 used_event (after avail->ring) */
	OP_DESC_AT,      /* u32 memfd offset, then as OP_DESC: an indirect entry */
	OP_CRASH,        /* u16 base: the worker dies, a new one takes the ring */
	OP_IF_WRITE,     /* u16 offset, u8 len, len bytes into the inflight region */
	OP_COUNT
};

struct held {
	uint16_t head;
};

struct harness {
	int fd;
	size_t size;          /* memfd bytes */
	uint8_t *guest;       /* the guest's mapping of the whole memfd */
	uint64_t gpa[2];      /* region gpa; region 0 is memfd [0, split) */
	size_t split;         /* memfd bytes in region 0 */
	unsigned nreg;
	struct memtable *mt;
	struct vring vq;
	bool ring_ok;         /* vring_init succeeded */
	unsigned num;
	uint64_t features;
	uint64_t desc, avail, used;
	void *ifr;            /* inflight region (flags bit 3), else NULL */
	size_t ifr_len;
	bool if_tainted;      /* the region was written by the "predecessor" */
	struct held *held;    /* chains in flight, in pop order */
	unsigned nheld;
	unsigned since_push;  /* pops since the last push (vring_unpop's limit) */
	struct vring_chain c;
};

/* guest_ptr - the guest's view of [gpa, gpa + len) if it lies in one
 * region, else NULL (the harness writes only where the guest could). */
static uint8_t *guest_ptr(struct harness *h, uint64_t gpa, uint64_t len)
{
	for (unsigned r = 0; r < h->nreg; r++) {
		uint64_t start = r ? h->split : 0;
		uint64_t rlen = (r ? h->size : h->split) - start;

		if (gpa >= h->gpa[r] && len <= rlen && gpa - h->gpa[r] <= rlen - len)
			return h->guest + start + (gpa - h->gpa[r]);
	}
	return NULL;
}

static void guest_put(struct harness *h, uint64_t gpa, const void *src, size_t len)
{
	uint8_t *p = guest_ptr(h, gpa, len);

	if (p)
		memcpy(p, src, len);
}

/* iov_in_region - does [base, base + len) lie in one mapped region? */
static bool iov_in_region(const struct memtable *mt, const uint8_t *base, size_t len)
{
	for (unsigned r = 0; r < mt->n; r++) {
		const uint8_t *s = mt->r[r].hva;

		if (base >= s && len <= mt->r[r].size && (size_t)(base - s) <= mt->r[r].size - len)
			return true;
	}
	return false;
}

/* check_chain - what the worker relies on in a chain vring_pop returned. */
static void check_chain(struct harness *h, const struct vring_chain *c)
{
	uint64_t out = 0, in = 0;

	if (c->head >= h->num || c->nout + c->nin > VRING_CHAIN_MAX_IOV || c->ndesc == 0 ||
	    c->ndesc > h->num + VRING_MAX_SIZE)
		abort();
	for (unsigned i = 0; i < c->nout + c->nin; i++) {
		volatile uint8_t *p = c->iov[i].iov_base;
		size_t l = c->iov[i].iov_len;

		if (l == 0 || !iov_in_region(h->mt, c->iov[i].iov_base, l))
			abort();
		/* Touch both ends as the data path would: read what the
		 * device reads, write what it may write. */
		if (i < c->nout) {
			(void)p[0];
			(void)p[l - 1];
			out += l;
		} else {
			p[0] = 0x5a;
			p[l - 1] = 0x5a;
			in += l;
		}
	}
	if (c->truncated ? (out > c->out_len || in > c->in_len) :
	    (out != c->out_len || in != c->in_len))
		abort();
	if (c->out_len + c->in_len == 0)
		abort(); /* zero-length descriptors break the queue (G6) */
}

/* check_if_region - the inflight invariant (inflight.h) between
 * operations: avail_seq - used_seq slots are set, each below 1 +
 * avail_seq; the low bits match the ring's shadows. */
static void check_if_region(struct harness *h)
{
	const struct inflight_queue *q;
	uint64_t a, u, set = 0;

	if (!h->vq.inf || h->vq.broken || h->if_tainted || h->vq.inf->recover)
		return;
	q = h->vq.inf->q;
	a = q->avail_seq;
	u = q->used_seq;
	if (a < u || a - u > h->num || (uint16_t)a != h->vq.last_avail_idx ||
	    (uint16_t)u != h->vq.published_idx)
		abort();
	for (unsigned i = 0; i < h->num; i++) {
		if (!q->slot[i])
			continue;
		/* Completion is in any order: an old position may
		 * outlive later ones, so slots are only bounded above. */
		if (q->slot[i] > a)
			abort();
		set++;
	}
	if (set != a - u)
		abort();
}

/* check_ring - the device's own bookkeeping after every operation. */
static void check_ring(struct harness *h)
{
	const struct vring *vq = &h->vq;

	if (vq->inflight != h->nheld || vq->inflight > h->num)
		abort();
	if (!vq->broken && (uint16_t)(vq->last_avail_idx - vq->used_idx) != vq->inflight)
		abort();
	if (h->num <= IF_CHECK_ALWAYS_MAX)
		check_if_region(h);
}

static void op_pop(struct harness *h)
{
	int r = vring_pop(&h->vq, &h->c);

	if (r < 0) {
		if (!h->vq.broken)
			abort();
		return;
	}
	if (r == 0)
		return;
	check_chain(h, &h->c);
	if (h->nheld >= h->num)
		abort(); /* G5: vring_pop must refuse a chain beyond num */
	h->held[h->nheld++].head = h->c.head;
	h->since_push++;
}

static void op_push(struct harness *h, struct fuzz_in *in)
{
	unsigned sel = fuzz_u8(in);
	uint32_t len = fuzz_u32(in);
	uint16_t head;

	if (!h->nheld)
		return;
	sel %= h->nheld;
	head = h->held[sel].head;
	memmove(&h->held[sel], &h->held[sel + 1], (h->nheld - sel - 1) * sizeof(h->held[0]));
	h->nheld--;
	h->since_push = 0;
	vring_push(&h->vq, head, len);
	if (!h->vq.broken) {
		/* The element went to the used slot of the device's shadow
		 * index, whatever the guest wrote into used->idx. */
		const struct vring_used_elem *e =
			&h->vq.used->ring[(uint16_t)(h->vq.used_idx - 1) & (h->num - 1)];

		if (e->id != head || e->len != len)
			abort();
	}
}

static void op_flush(struct harness *h)
{
	bool publish = !h->vq.broken && h->vq.published_idx != h->vq.used_idx;

	vring_flush(&h->vq);
	if (publish && __atomic_load_n(&h->vq.used->idx, __ATOMIC_RELAXED) != h->vq.used_idx)
		abort();
	if (!h->vq.broken && h->vq.published_idx != h->vq.used_idx)
		abort();
	check_if_region(h);
}

static void op_unpop(struct harness *h, struct fuzz_in *in)
{
	unsigned n = fuzz_u8(in) % (h->since_push + 1);

	vring_unpop(&h->vq, (uint16_t)n);
	h->nheld -= n;
	h->since_push -= n;
}

/* op_desc - write one descriptor at gpa (the ring's table or anywhere). */
static void op_desc(struct harness *h, struct fuzz_in *in, uint64_t gpa)
{
	struct vring_desc d;

	d.addr = h->gpa[0] + fuzz_u32(in);
	d.len = fuzz_u32(in);
	d.flags = fuzz_u16(in);
	d.next = fuzz_u16(in);
	guest_put(h, gpa, &d, sizeof(d));
}

static void op_avail(struct harness *h, struct fuzz_in *in)
{
	uint16_t head = fuzz_u16(in), idx;
	uint8_t *p = guest_ptr(h, h->avail, vring_avail_size(h->num));

	if (!p)
		return;
	memcpy(&idx, p + 2, 2);
	memcpy(p + 4 + 2u * (idx & (h->num - 1)), &head, 2);
	idx++;
	memcpy(p + 2, &idx, 2);
}

static void op_write(struct harness *h, struct fuzz_in *in)
{
	size_t off = fuzz_u32(in) % h->size;
	size_t len = fuzz_u8(in);

	if (len > h->size - off)
		len = h->size - off;
	fuzz_take(in, h->guest + off, len);
}

/* op_if_write - a compromised predecessor scribbles on the inflight
 * region; the next worker (OP_CRASH) must treat it as hostile. */
static void op_if_write(struct harness *h, struct fuzz_in *in)
{
	size_t off = fuzz_u16(in);
	size_t len = fuzz_u8(in);

	if (!h->ifr)
		return;
	off %= h->ifr_len;
	if (len > h->ifr_len - off)
		len = h->ifr_len - off;
	fuzz_take(in, (uint8_t *)h->ifr + off, len);
	h->if_tainted = true;
}

/*
 * ring_start - what a worker does with Config: vring_init, set_base, and
 * with a region, inflight_region_check, attach, and recovery when it is
 * LIVE. Returns false when the worker would refuse to run.
 */
static bool ring_start(struct harness *h, uint16_t base)
{
	struct inflight_queue *q;
	char err[256];
	unsigned done;
	int r;

	if (vring_init(&h->vq, h->mt, h->num, h->desc, h->avail, h->used, h->features, err,
		       sizeof(err)) < 0)
		return false;
	vring_set_base(&h->vq, base);
	h->nheld = 0;
	h->since_push = 0;
	if (!h->ifr)
		return true;
	if (inflight_region_check(h->ifr, h->ifr_len, 1, &h->num, &q, err, sizeof(err)) < 0)
		return false;
	r = vring_attach_inflight(&h->vq, q);
	if (r < 0)
		abort(); /* checked region, right size: only ENOMEM */
	/* Checked and attached (FRESH), or recovered below: from here the
	 * region must keep its invariant. */
	h->if_tainted = false;
	if (r == 1) {
		r = vring_recover_inflight(&h->vq, &done);
		if (r < 0 ? !h->vq.broken : h->vq.inflight != 0)
			abort();
		if (r == 0) {
			if (q->avail_seq != q->used_seq)
				abort();
			check_if_region(h);
		}
	}
	return true;
}

/* op_crash - the worker dies between operations (its private state is
 * lost, the region and guest memory stay) and a new one starts. */
static bool op_crash(struct harness *h, struct fuzz_in *in)
{
	uint16_t base = fuzz_u16(in);

	vring_detach_inflight(&h->vq);
	return ring_start(h, base);
}

/* guest_op - one write of the guest into its memory (or of a dead
 * worker into the inflight region). */
static void guest_op(struct harness *h, unsigned op, struct fuzz_in *in)
{
	uint16_t v;

	switch (op) {
	case OP_WRITE:
		op_write(h, in);
		break;
	case OP_DESC:
		v = fuzz_u16(in);
		op_desc(h, in, h->desc + 16ull * (v & (h->num - 1)));
		break;
	case OP_AVAIL:
		op_avail(h, in);
		break;
	case OP_AVAIL_IDX:
		v = fuzz_u16(in);
		guest_put(h, h->avail + 2, &v, 2);
		break;
	case OP_USED_EVENT:
		v = fuzz_u16(in);
		guest_put(h, h->avail + 4 + 2ull * h->num, &v, 2);
		break;
	case OP_DESC_AT: {
		uint64_t off = fuzz_u32(in) % h->size;

		/* Through the memfd offset: an indirect table anywhere. */
		if (off + sizeof(struct vring_desc) <= h->size)
			op_desc(h, in, off < h->split ? h->gpa[0] + off :
				h->gpa[1] + off - h->split);
		break;
	}
	case OP_IF_WRITE:
		op_if_write(h, in);
		break;
	}
}

/* run_op - one operation. Returns false to end the input. */
static bool run_op(struct harness *h, struct fuzz_in *in)
{
	unsigned op = fuzz_u8(in) % OP_COUNT;
	uint16_t v;

	switch (op) {
	case OP_POP:
		op_pop(h);
		break;
	case OP_PUSH:
		op_push(h, in);
		break;
	case OP_FLUSH:
		op_flush(h);
		break;
	case OP_UNPOP:
		op_unpop(h, in);
		break;
	case OP_NOTIFY_OFF:
		vring_notify_disable(&h->vq);
		break;
	case OP_NOTIFY_ON:
		(void)vring_notify_enable_window(&h->vq, fuzz_u8(in));
		break;
	case OP_SHOULD:
		(void)vring_should_notify(&h->vq);
		break;
	case OP_PENDING:
		(void)vring_avail_pending(&h->vq);
		break;
	case OP_SET_BASE:
		v = fuzz_u16(in);
		/* The channels allow SET_VRING_BASE only on a stopped ring:
		 * with tracking the region owns the index. */
		if (!h->vq.inf) {
			vring_set_base(&h->vq, v);
			h->nheld = 0;
			h->since_push = 0;
		}
		break;
	case OP_CRASH:
		return op_crash(h, in);
	default:
		guest_op(h, op, in);
		break;
	}
	check_ring(h);
	return true;
}

/*
 * map_guest - the memfd, the worker's memtable of one or two regions
 * (page-aligned, as memtable_check_pages requires of Config) and the
 * guest's own mapping. Returns false when the layout is refused.
 */
static bool map_guest(struct harness *h, unsigned pages, unsigned flags, unsigned split,
		      unsigned gap, uint32_t gpa0)
{
	struct memtable_region_desc rd[2];
	char err[256];

	h->size = (size_t)pages * PAGE;
	h->fd = fuzz_memfd(NULL, 0, h->size);
	if (h->fd < 0)
		abort();
	h->guest = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
	if (h->guest == MAP_FAILED)
		abort();
	h->nreg = (flags & 1u) && pages > 1 ? 2 : 1;
	h->split = h->nreg == 2 ? (size_t)(1 + split % (pages - 1)) * PAGE : h->size;
	h->gpa[0] = (uint64_t)gpa0 * PAGE;
	if (flags & 16u) /* region 1 below region 0; may wrap: memtable refuses */
		h->gpa[1] = h->gpa[0] - (h->size - h->split) - (uint64_t)gap * PAGE;
	else
		h->gpa[1] = h->gpa[0] + h->split + (uint64_t)gap * PAGE;
	for (unsigned r = 0; r < h->nreg; r++) {
		rd[r].gpa = h->gpa[r];
		rd[r].offset = r ? h->split : 0;
		rd[r].size = (r ? h->size : h->split) - rd[r].offset;
		rd[r].fd = h->fd;
	}
	if (memtable_check_pages(rd, h->nreg, err, sizeof(err)) < 0)
		abort();
	return memtable_map(rd, h->nreg, &h->mt, err, sizeof(err)) == 0;
}

/* setup_inflight - a fresh region as the supervisor makes one. */
static bool setup_inflight(struct harness *h)
{
	h->ifr_len = inflight_region_size(1, &h->num);
	if (!h->ifr_len)
		return false;
	h->ifr = calloc(1, h->ifr_len);
	if (!h->ifr)
		abort();
	if (inflight_region_init(h->ifr, h->ifr_len, 1, &h->num) < 0)
		abort();
	return true;
}

static void teardown(struct harness *h)
{
	vring_detach_inflight(&h->vq);
	free(h->ifr);
	free(h->held);
	h->mt = memtable_free(h->mt);
	if (h->guest && h->guest != MAP_FAILED)
		munmap(h->guest, h->size);
	if (h->fd >= 0)
		close(h->fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct harness H;
	struct harness *h = &H;
	struct fuzz_in in = fuzz_in(data, size);
	int before = fuzz_fd_count();
	unsigned pages, flags, split, gap;
	uint32_t gpa0;
	uint16_t base;

	memset(h, 0, offsetof(struct harness, c));
	h->fd = -1;
	pages = 1 + fuzz_u8(&in) % 64;
	flags = fuzz_u8(&in);
	split = fuzz_u8(&in);
	gap = fuzz_u8(&in);
	gpa0 = fuzz_u32(&in);
	h->num = fuzz_u32(&in);
	h->features = (1ull << VIRTIO_F_VERSION_1) |
		      ((flags & 2u) ? 1ull << VIRTIO_F_EVENT_IDX : 0) |
		      ((flags & 4u) ? 1ull << VIRTIO_F_INDIRECT_DESC : 0);
	h->desc = (uint64_t)gpa0 * PAGE + fuzz_u32(&in);
	h->avail = (uint64_t)gpa0 * PAGE + fuzz_u32(&in);
	h->used = (uint64_t)gpa0 * PAGE + fuzz_u32(&in);
	base = fuzz_u16(&in);

	if (!map_guest(h, pages, flags, split, gap, gpa0))
		goto out;
	/* An invalid size stops here, in vring_init (or in the region's
	 * size check, which vnicd's Config validation makes first). */
	if (h->num == 0 || h->num > VRING_MAX_SIZE || (h->num & (h->num - 1))) {
		char err[256];

		if (vring_init(&h->vq, h->mt, h->num, h->desc, h->avail, h->used, h->features,
			       err, sizeof(err)) != -EINVAL)
			abort();
		goto out;
	}
	if ((flags & 8u) && !setup_inflight(h))
		abort();
	h->held = calloc(h->num, sizeof(*h->held));
	if (!h->held)
		abort();
	if (!ring_start(h, base))
		goto out;
	for (unsigned n = 0; n < OPS_MAX && !in.end && in.n > 0; n++)
		if (!run_op(h, &in))
			break;
out:
	teardown(h);
	fuzz_fd_check(before, "vring");
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_setup();
	return 0;
}
