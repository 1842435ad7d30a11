/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_vring_random: a simulated guest (vring_drv) and the device (vring)
 * in TWO processes, as a VMM and a worker would run them.
 *
 * Guest memory is one sealed memfd. The guest maps it once; the device
 * process unmaps the guest's view and maps the memfd again through
 * memtable_map, at its own address and cut into several regions (so some
 * buffers cross a region boundary and scatter into two iovecs, G8). Guest
 * kicks and device calls are eventfds.
 *
 * Every round draws, from the seed: a queue size (a power of 2, 1..512),
 * EVENT_IDX on or off, how the guest suppresses interrupts and how the
 * device suppresses kicks (never, while draining, at random), the region
 * split, whether the guest streams (keeps the ring full) or goes in
 * lockstep (sends a batch, waits for all of it: both sides sleep after
 * every batch, where lost wake-ups hide), whether both sides add short
 * random delays at the racy points (before enable-then-recheck, publish,
 * flush) to widen the windows a missing recheck or barrier leaves open,
 * and for each chain its shape: 1..16 descriptors, readable ones then
 * writable ones, random sizes, placed in random order with random gaps in a
 * data area, published in random batches. Chain shapes come from their own
 * generator, so a seed gives the same chains whatever the timing.
 *
 * The device checks every readable byte (a pattern of the chain's sequence
 * number), hashes them, writes a pattern derived from that hash into a
 * prefix of the writable part and pushes len = bytes written, flushing after
 * random batches and calling only when vring_should_notify says so.
 *
 * The guest checks that every buffer comes back exactly once, with the
 * length the device wrote, the right bytes, nothing written past that length
 * and nothing written into readable buffers. Each side sleeps ONLY on its
 * eventfd (poll) after enable-then-recheck; a side that makes no progress
 * for VR_STALL_MS (5 s) fails the round with the reason (a lost wake-up when
 * the other side's work was waiting), so a lost notification fails the test
 * and never hangs it. Fault knobs in this file (never in the library) make
 * the device forget one call, or corrupt one buffer, and tests assert that
 * the checker catches both: the checker itself can fail.
 *
 * Seed: fixed by default and printed; VNIC_SEED=<n> replays a run.
 * Size: VNIC_RANDOM_DESCS=<n> descriptors in all (default 240000, the
 * `make check` run); a long run on demand:
 *     VNIC_RANDOM_DESCS=1000000 tests/check_vring_random
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memtable.h"
#include "testutil.h"
#include "vring.h"
#include "vring_drv.h"

#define VR_DEFAULT_DESCS 240000u
#define VR_ROUNDS        36u     /* event_idx x guest style x device style x pace */
#define VR_MAX_QLOG      9u      /* queue sizes 1..512 */
#define VR_MAX_CHAIN     16u     /* descriptors per chain */
#define VR_SLOT          32768u  /* data bytes per request slot */
#define VR_MAX_SPLIT     8u      /* device regions over the data area */
#define VR_STALL_MS      5000u
#define VR_CANARY        0xA5u
#define VR_MSG           512

enum vr_status { VR_OK, VR_STALL, VR_CONTENT, VR_PROTOCOL, VR_DEVICE, VR_TIMEOUT };

static const char *const vr_status_name[] = {
	[VR_OK] = "ok", [VR_STALL] = "stall", [VR_CONTENT] = "content",
	[VR_PROTOCOL] = "protocol", [VR_DEVICE] = "device", [VR_TIMEOUT] = "timeout",
};

/* Suppression styles, for the guest's interrupts and the device's kicks. */
enum vr_style {
	VR_STYLE_NEVER,   /* never disabled; still enable-then-recheck before sleeping */
	VR_STYLE_DRAIN,   /* disabled while busy, enabled and rechecked before sleeping */
	VR_STYLE_RANDOM,  /* toggled at random while busy */
};

struct vr_cfg {
	unsigned long seed;
	unsigned num;
	bool event_idx;
	enum vr_style guest_style, dev_style;
	unsigned nsplit;          /* device regions over the data area */
	bool lockstep;            /* guest waits for every batch to come back */
	bool jitter;              /* random short delays at the racy points */
	uint64_t gpa_base;
	uint64_t desc_target;     /* stop submitting after this many descriptors */
	uint64_t chain_count;     /* or after exactly this many chains, if non-zero */
	unsigned stall_ms;
	/* Test-only faults of the simulated device. -1: off. */
	int64_t forget_call_seq;  /* the call covering this chain is not sent */
	int64_t corrupt_seq;      /* flip a written byte of the first chain >= this */
	int64_t overrun_seq;      /* write one byte past len, first chain >= this */
};

/* Device -> guest, in a MAP_SHARED page; read after the device exited. */
struct vr_shared {
	int status;               /* enum vr_status */
	char msg[VR_MSG];
	uint64_t popped, calls, wakeups, rechecks_hit;
	unsigned forgot, corrupted, overran;
};

struct vr_result {
	enum vr_status status;
	char msg[VR_MSG];
	uint64_t chains, descs, bytes, kicks, wakeups, enospc;
	struct vr_shared dev;
};

/* splitmix64: small, seedable, good enough to draw shapes. */
struct vr_rng {
	uint64_t s;
};

static uint64_t vr_next(struct vr_rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint32_t vr_below(struct vr_rng *r, uint32_t n)
{
	return (uint32_t)(vr_next(r) % n);
}

static uint64_t vr_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The patterns both sides compute. Readable byte o of chain seq: */
static uint8_t vr_in_base(uint64_t seq)
{
	return (uint8_t)((seq * 0x9E3779B97F4A7C15ull) >> 56);
}

static uint8_t vr_in_byte(uint8_t base, uint64_t o)
{
	return (uint8_t)(base + o * 31u + (o >> 8));
}

static uint32_t vr_hash(uint32_t h, uint8_t b)
{
	return (h ^ b) * 16777619u; /* FNV-1a */
}

#define VR_HASH_INIT 2166136261u

/* Writable byte o, derived from the hash of what the device read. */
static uint32_t vr_out_key(uint64_t seq, uint32_t hash)
{
	return hash ^ (uint32_t)(seq * 0x85EBCA6Bu);
}

static uint8_t vr_out_byte(uint32_t key, uint64_t o)
{
	return (uint8_t)((key >> ((o >> 4) & 24u)) + o * 13u);
}

/* Bytes the device writes: all of the writable part, except that every
 * fourth chain gets a shorter prefix (possibly 0), so len is really checked. */
static uint32_t vr_expect_len(uint64_t seq, uint32_t in_len, uint32_t hash)
{
	if (seq % 4 != 3 || in_len == 0)
		return in_len;
	return (uint32_t)((hash ^ seq) % ((uint64_t)in_len + 1));
}

/* Now and then, wait a little (spin or yield) at a point where the other
 * side can race us: widens the windows a missing recheck or barrier
 * would leave open, so that such a bug shows up as a stall. */
static void vr_jitter(const struct vr_cfg *cfg, struct vr_rng *r)
{
	uint32_t x;
	struct timespec t0, t;

	if (!cfg->jitter || (x = vr_below(r, 16)) > 2)
		return;
	if (x == 0) {
		sched_yield();
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0, ns = vr_below(r, 20000); i < 100000; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >= (long)ns)
			break;
	}
}

static void vr_fail(struct vr_result *res, enum vr_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void vr_fail(struct vr_result *res, enum vr_status st, const char *fmt, ...)
{
	va_list ap;

	if (res->status != VR_OK)
		return;
	res->status = st;
	va_start(ap, fmt);
	vsnprintf(res->msg, sizeof(res->msg), fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Device process                                                      */
/* ------------------------------------------------------------------ */

struct vr_dev {
	const struct vr_cfg *cfg;
	struct vr_rng rng;
	struct vring vq;
	struct vring_chain *c;
	struct vr_shared *sh;
	int call_fd;
	uint64_t seq;         /* chains popped: the avail ring is FIFO */
	unsigned until_flush;
};

static int vr_dev_fail(struct vr_dev *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int vr_dev_fail(struct vr_dev *v, const char *fmt, ...)
{
	va_list ap;

	if (v->sh->status == VR_OK) {
		v->sh->status = VR_DEVICE;
		va_start(ap, fmt);
		vsnprintf(v->sh->msg, sizeof(v->sh->msg), fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int vr_dev_call(struct vr_dev *v)
{
	if (eventfd_write(v->call_fd, 1) < 0)
		return vr_dev_fail(v, "call eventfd: %s", strerror(errno));
	v->sh->calls++;
	return 0;
}

/* Publish what was pushed; call when the guest wants it. */
static int vr_dev_flush(struct vr_dev *v)
{
	vr_jitter(v->cfg, &v->rng);
	vring_flush(&v->vq);
	if (vring_should_notify(&v->vq))
		return vr_dev_call(v);
	return 0;
}

/* Check the readable bytes, write the answer, push. */
static int vr_dev_process(struct vr_dev *v)
{
	const struct vring_chain *c = v->c;
	const struct vr_cfg *cfg = v->cfg;
	uint8_t base = vr_in_base(v->seq);
	uint32_t h = VR_HASH_INIT, w, key;
	uint64_t o = 0, in_len = 0;

	if (c->truncated)
		return vr_dev_fail(v, "chain %" PRIu64 ": truncated with %u iovecs", v->seq,
				   c->nout + c->nin);
	for (unsigned i = 0; i < c->nout; i++) {
		const uint8_t *p = c->iov[i].iov_base;

		for (size_t j = 0; j < c->iov[i].iov_len; j++, o++) {
			if (p[j] != vr_in_byte(base, o))
				return vr_dev_fail(v, "chain %" PRIu64 ": readable byte %" PRIu64
						   " is %#x, expected %#x", v->seq, o, p[j],
						   vr_in_byte(base, o));
			h = vr_hash(h, p[j]);
		}
	}
	if (o != c->out_len)
		return vr_dev_fail(v, "chain %" PRIu64 ": out_len %" PRIu64 " but iovecs hold %" PRIu64,
				   v->seq, c->out_len, o);
	for (unsigned i = c->nout; i < c->nout + c->nin; i++)
		in_len += c->iov[i].iov_len;
	if (in_len != c->in_len || in_len > UINT32_MAX)
		return vr_dev_fail(v, "chain %" PRIu64 ": in_len %" PRIu64 " but iovecs hold %" PRIu64,
				   v->seq, c->in_len, in_len);

	w = vr_expect_len(v->seq, (uint32_t)in_len, h);
	key = vr_out_key(v->seq, h);
	o = 0;
	for (unsigned i = c->nout; i < c->nout + c->nin && o < w; i++) {
		uint8_t *p = c->iov[i].iov_base;

		for (size_t j = 0; j < c->iov[i].iov_len && o < w; j++, o++)
			p[j] = vr_out_byte(key, o);
	}

	/* Fault knobs: the checker must catch these. */
	if (cfg->corrupt_seq >= 0 && (int64_t)v->seq >= cfg->corrupt_seq && w > 0 &&
	    !v->sh->corrupted) {
		((uint8_t *)c->iov[c->nout].iov_base)[0] ^= 0x40;
		v->sh->corrupted = 1;
	}
	if (cfg->overrun_seq >= 0 && (int64_t)v->seq >= cfg->overrun_seq && w < in_len &&
	    !v->sh->overran) {
		size_t skip = w;

		for (unsigned i = c->nout; i < c->nout + c->nin; i++) {
			if (skip < c->iov[i].iov_len) {
				((uint8_t *)c->iov[i].iov_base)[skip] = (uint8_t)~VR_CANARY;
				v->sh->overran = 1;
				break;
			}
			skip -= c->iov[i].iov_len;
		}
	}

	if (cfg->forget_call_seq >= 0 && (int64_t)v->seq == cfg->forget_call_seq) {
		/* Publish and call for everything before, give the guest time to
		 * drain it and go to sleep, then publish this one and "forget"
		 * the call it asks for: a lost wake-up. */
		if (vr_dev_flush(v) < 0)
			return -1;
		usleep(100 * 1000);
		vring_push(&v->vq, c->head, w);
		vring_flush(&v->vq);
		if (vring_should_notify(&v->vq))
			v->sh->forgot++;
		v->seq++;
		return 0;
	}

	vring_push(&v->vq, c->head, w);
	v->seq++;
	if (--v->until_flush == 0) {
		v->until_flush = 1 + vr_below(&v->rng, 8);
		return vr_dev_flush(v);
	}
	return 0;
}

static int vr_dev_map(const struct vr_cfg *cfg, int memfd, size_t ring_bytes, size_t size,
		      struct vr_rng *rng, struct memtable **ret_mt)
{
	struct memtable_region_desc d[1 + VR_MAX_SPLIT];
	uint64_t ends[1 + VR_MAX_SPLIT];
	unsigned n = 0;
	char err[256];
	int rc;

	/* Rings alone in region 0 (a ring must lie in one region), then the
	 * data area cut at random byte offsets, including inside buffers. */
	ends[n++] = ring_bytes;
	for (unsigned i = 1; i < cfg->nsplit; i++) {
		uint64_t e = ring_bytes + 1 + vr_below(rng, (uint32_t)(size - ring_bytes - 1));
		bool dup = false;

		for (unsigned k = 0; k < n; k++)
			dup |= ends[k] == e;
		if (!dup)
			ends[n++] = e;
	}
	ends[n++] = size;
	/* insertion sort: n <= 1 + VR_MAX_SPLIT */
	for (unsigned i = 1; i < n; i++)
		for (unsigned k = i; k > 0 && ends[k - 1] > ends[k]; k--) {
			uint64_t t = ends[k];

			ends[k] = ends[k - 1];
			ends[k - 1] = t;
		}
	for (unsigned i = 0; i < n; i++) {
		uint64_t start = i ? ends[i - 1] : 0;

		d[i] = (struct memtable_region_desc){
			.gpa = cfg->gpa_base + start, .size = ends[i] - start,
			.offset = start, .fd = memfd,
		};
	}
	rc = memtable_map(d, n, ret_mt, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "device: memtable_map: %s\n", err);
	return rc;
}

/*
 * Sleep until a kick (1) or the stop request (0); -1 on failure. Only the
 * kick eventfd ends the sleep: a poll timeout never sends us back to the
 * ring (that would hide a lost kick). Timeouts only bound the wait and
 * diagnose: chains published and left without a kick for stall_ms are a
 * lost kick, and fail the round.
 */
static int vr_dev_sleep(struct vr_dev *v, int kick_fd, int stop_fd, uint64_t deadline)
{
	uint64_t pending_since = 0;

	for (unsigned i = 0; i < 10000000u; i++) {
		struct pollfd pfd[2] = {
			{ .fd = kick_fd, .events = POLLIN },
			{ .fd = stop_fd, .events = POLLIN },
		};
		int prc = poll(pfd, 2, 100);
		uint64_t now = vr_now_ms();
		eventfd_t val;

		if (prc < 0 && errno != EINTR)
			return vr_dev_fail(v, "poll: %s", strerror(errno));
		if (prc > 0 && (pfd[1].revents & POLLIN)) {
			if (vring_avail_pending(&v->vq) || v->vq.inflight)
				return vr_dev_fail(v, "stopped with chains never kicked in the avail ring (inflight %u)",
						   v->vq.inflight);
			return 0;
		}
		if (prc > 0 && (pfd[0].revents & POLLIN)) {
			if (eventfd_read(kick_fd, &val) == 0)
				v->sh->wakeups++;
			return 1;
		}
		if (now > deadline)
			return vr_dev_fail(v, "device: round deadline passed while asleep");
		if (!vring_avail_pending(&v->vq))
			pending_since = 0;
		else if (!pending_since)
			pending_since = now;
		else if (now - pending_since >= v->cfg->stall_ms)
			return vr_dev_fail(v, "lost kick: chains waited %u ms in the avail ring "
					   "and no kick came", v->cfg->stall_ms);
	}
	return vr_dev_fail(v, "device: sleep iteration bound reached");
}

/* The device main loop. Returns the process exit code. */
static int vr_device(const struct vr_cfg *cfg, int memfd, size_t ring_bytes, size_t size,
		     int kick_fd, int call_fd, int stop_fd, struct vr_shared *sh)
{
	struct vr_dev v = { .cfg = cfg, .sh = sh, .call_fd = call_fd };
	struct memtable *mt = NULL;
	struct vring_layout l;
	uint64_t features = 1ull << VIRTIO_F_VERSION_1;
	uint64_t deadline;
	char err[160];
	int rc = 1;

	v.rng.s = cfg->seed ^ 0xD1CEull;
	v.until_flush = 1;
	if (cfg->event_idx)
		features |= 1ull << VIRTIO_F_EVENT_IDX;
	v.c = malloc(sizeof(*v.c));
	if (!v.c) {
		vr_dev_fail(&v, "out of memory");
		goto out;
	}
	if (vr_dev_map(cfg, memfd, ring_bytes, size, &v.rng, &mt) < 0) {
		vr_dev_fail(&v, "memtable_map failed");
		goto out;
	}
	vring_layout(cfg->num, cfg->gpa_base, &l);
	if (vring_init(&v.vq, mt, cfg->num, l.desc, l.avail, l.used, features, err,
		       sizeof(err)) < 0) {
		vr_dev_fail(&v, "vring_init: %s", err);
		goto out_unmap;
	}

	deadline = vr_now_ms() + 120000;
	for (uint64_t iter = 0; iter < 100000000u; iter++) {
		unsigned budget = 1 + vr_below(&v.rng, 64), done = 0;

		if (vr_now_ms() > deadline) {
			vr_dev_fail(&v, "device: round deadline passed");
			goto out_unmap;
		}
		if (cfg->dev_style == VR_STYLE_DRAIN ||
		    (cfg->dev_style == VR_STYLE_RANDOM && vr_below(&v.rng, 2)))
			vring_notify_disable(&v.vq);
		/* Bounded work per wake-up, as a worker does (TESTPLAN G21). */
		for (; done < budget; done++) {
			int r = vring_pop(&v.vq, v.c);

			if (r < 0) {
				vr_dev_fail(&v, "queue broken: %s", v.vq.broken_reason);
				goto out_unmap;
			}
			if (r == 0)
				break;
			sh->popped++;
			if (vr_dev_process(&v) < 0)
				goto out_unmap;
		}
		v.until_flush = 1 + vr_below(&v.rng, 8);
		if (vr_dev_flush(&v) < 0)
			goto out_unmap;
		if (done == budget)
			continue; /* maybe more: go round without sleeping */

		/* Empty: enable, full barrier, recheck; sleep only if still
		 * empty (whatever the style: with EVENT_IDX this is also what
		 * moves avail_event up to where we are). */
		vr_jitter(cfg, &v.rng);
		if (vring_notify_enable(&v.vq)) {
			sh->rechecks_hit++;
			continue;
		}
		switch (vr_dev_sleep(&v, kick_fd, stop_fd, deadline)) {
		case 1:
			continue;
		case 0:
			rc = 0;
			/* fall through */
		default:
			goto out_unmap;
		}
	}
	vr_dev_fail(&v, "device: iteration bound reached");
out_unmap:
	memtable_free(mt);
out:
	free(v.c);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Guest (this process)                                                */
/* ------------------------------------------------------------------ */

struct vr_req {
	bool inflight;
	uint64_t seq;
	unsigned n, nread;
	uint32_t in_len, hash, expect_len;
	struct vring_drv_buf b[VR_MAX_CHAIN];
};

struct vr_guest {
	const struct vr_cfg *cfg;
	struct vr_result *res;
	struct vr_rng rng;     /* scheduling choices: depend on timing */
	struct vr_rng shape;   /* chain shapes: the same for a seed */
	struct vring_drv d;
	uint8_t *mem;          /* the guest's view of its memory */
	size_t data_off;       /* memfd offset of request slot 0 */
	struct vr_req *req;    /* num slots */
	unsigned *free_req, nfree_req;
	uint64_t seq;          /* chains submitted */
	uint64_t returned;
	unsigned pend_n;       /* shape drawn for the next chain, 0 = none */
	bool lockstep_hold;    /* lockstep: batch sent, waiting for all of it */
	bool pend_enospc_checked;
};

static uint8_t *vr_gptr(const struct vr_guest *g, uint64_t gpa)
{
	return g->mem + (gpa - g->cfg->gpa_base);
}

static bool vr_guest_submitting(const struct vr_guest *g)
{
	if (g->cfg->lockstep && g->lockstep_hold)
		return false;
	if (g->cfg->chain_count)
		return g->seq < g->cfg->chain_count;
	return g->res->descs < g->cfg->desc_target;
}

static uint32_t vr_seg_size(struct vr_rng *r)
{
	uint32_t p = vr_below(r, 100);

	if (p < 80)
		return 1 + vr_below(r, 128);
	if (p < 95)
		return 129 + vr_below(r, 896);
	return 1025 + vr_below(r, 776); /* 16 * (1800 + 64 + 64) < VR_SLOT */
}

/* Add one chain. Returns 1 added, 0 no room (or nothing left), -1 error. */
static int vr_guest_add(struct vr_guest *g)
{
	unsigned maxn = g->cfg->num < VR_MAX_CHAIN ? g->cfg->num : VR_MAX_CHAIN;
	unsigned order[VR_MAX_CHAIN], n, idx;
	uint32_t pos[VR_MAX_CHAIN], size[VR_MAX_CHAIN], off, h = VR_HASH_INIT, in_len = 0;
	uint64_t slot_gpa, o = 0;
	struct vr_req *r;
	uint8_t base;
	int head;

	if (!vr_guest_submitting(g))
		return 0;
	if (!g->pend_n) {
		g->pend_n = 1 + vr_below(&g->shape, maxn);
		g->pend_enospc_checked = false;
	}
	n = g->pend_n;
	if (g->nfree_req == 0)
		return 0;
	if (n > g->d.num_free) {
		/* The driver must refuse, without touching the ring. */
		if (!g->pend_enospc_checked) {
			struct vring_drv_buf dummy[VR_MAX_CHAIN];

			for (unsigned i = 0; i < n; i++)
				dummy[i] = (struct vring_drv_buf){ g->cfg->gpa_base + g->data_off, 1, false };
			head = vring_drv_add(&g->d, dummy, n, NULL);
			if (head != -ENOSPC) {
				vr_fail(g->res, VR_PROTOCOL, "vring_drv_add of %u with %u free: %d",
					n, g->d.num_free, head);
				return -1;
			}
			g->pend_enospc_checked = true;
			g->res->enospc++;
		}
		return 0;
	}

	idx = g->free_req[--g->nfree_req];
	r = &g->req[idx];
	r->seq = g->seq;
	r->n = n;
	r->nread = vr_below(&g->shape, n + 1);
	for (unsigned i = 0; i < n; i++) {
		order[i] = i;
		size[i] = vr_seg_size(&g->shape);
	}
	for (unsigned i = n - 1; i > 0; i--) { /* Fisher-Yates */
		unsigned k = vr_below(&g->shape, i + 1), t = order[i];

		order[i] = order[k];
		order[k] = t;
	}
	off = vr_below(&g->shape, 64);
	for (unsigned k = 0; k < n; k++) {
		pos[order[k]] = off;
		off += size[order[k]] + vr_below(&g->shape, 65);
	}
	ck_assert_uint_le(off, VR_SLOT);

	slot_gpa = g->cfg->gpa_base + g->data_off + (uint64_t)idx * VR_SLOT;
	base = vr_in_base(r->seq);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *p;

		r->b[i] = (struct vring_drv_buf){ slot_gpa + pos[i], size[i], i >= r->nread };
		p = vr_gptr(g, r->b[i].gpa);
		if (i < r->nread) {
			for (uint32_t j = 0; j < size[i]; j++, o++) {
				p[j] = vr_in_byte(base, o);
				h = vr_hash(h, p[j]);
			}
		} else {
			memset(p, VR_CANARY, size[i]);
			in_len += size[i];
		}
	}
	r->in_len = in_len;
	r->hash = h;
	r->expect_len = vr_expect_len(r->seq, in_len, h);

	head = vring_drv_add(&g->d, r->b, n, r);
	if (head < 0 || head >= (int)g->cfg->num) {
		vr_fail(g->res, VR_PROTOCOL, "vring_drv_add of %u with %u free: %d", n,
			g->d.num_free + n, head);
		return -1;
	}
	r->inflight = true;
	g->seq++;
	g->pend_n = 0;
	g->res->chains++;
	g->res->descs += n;
	g->res->bytes += o + in_len;
	return 1;
}

/* Check one returned buffer. Returns 0, or -1 with res filled. */
static int vr_guest_check(struct vr_guest *g, void *cookie, uint32_t len)
{
	struct vr_req *r = cookie;
	uint8_t base;
	uint32_t key;
	uint64_t o = 0, wo = 0;
	size_t idx;

	if (r < g->req || r >= g->req + g->cfg->num) {
		vr_fail(g->res, VR_PROTOCOL, "used buffer with a cookie %p not ours", cookie);
		return -1;
	}
	idx = (size_t)(r - g->req);
	if (!r->inflight) {
		vr_fail(g->res, VR_PROTOCOL, "slot %zu returned twice (chain %" PRIu64 ")", idx, r->seq);
		return -1;
	}
	if (len != r->expect_len) {
		vr_fail(g->res, VR_CONTENT, "chain %" PRIu64 ": used len %u, device wrote %u",
			r->seq, len, r->expect_len);
		return -1;
	}
	base = vr_in_base(r->seq);
	key = vr_out_key(r->seq, r->hash);
	for (unsigned i = 0; i < r->n; i++) {
		const uint8_t *p = vr_gptr(g, r->b[i].gpa);

		for (uint32_t j = 0; j < r->b[i].len; j++) {
			uint8_t want;

			if (i < r->nread)
				want = vr_in_byte(base, o++);
			else if (wo < len)
				want = vr_out_byte(key, wo++);
			else {
				want = VR_CANARY;
				wo++;
			}
			if (p[j] != want) {
				vr_fail(g->res, VR_CONTENT, "chain %" PRIu64 " (%u descs, %u readable, "
					"len %u): descriptor %u byte %u is %#x, expected %#x%s",
					r->seq, r->n, r->nread, len, i, j, p[j], want,
					i < r->nread ? " (readable buffer written)" :
					wo > len ? " (written past len)" : "");
				return -1;
			}
		}
	}
	r->inflight = false;
	g->free_req[g->nfree_req++] = (unsigned)idx;
	g->returned++;
	return 0;
}

/* Reclaim up to budget used buffers. Returns how many, or -1. */
static int vr_guest_reclaim(struct vr_guest *g, unsigned budget)
{
	int got = 0;

	for (unsigned i = 0; i < budget; i++) {
		void *cookie;
		uint32_t len;
		int rc = vring_drv_get_used(&g->d, &cookie, &len);

		if (rc < 0) {
			vr_fail(g->res, VR_PROTOCOL, "vring_drv_get_used: %d", rc);
			return -1;
		}
		if (rc == 0)
			break;
		if (vr_guest_check(g, cookie, len) < 0)
			return -1;
		got++;
	}
	return got;
}

static void vr_guest_cb_style(struct vr_guest *g)
{
	switch (g->cfg->guest_style) {
	case VR_STYLE_NEVER:
		break;
	case VR_STYLE_DRAIN:
		vring_drv_cb_disable(&g->d);
		break;
	case VR_STYLE_RANDOM:
		if (vr_below(&g->rng, 4) == 0)
			vring_drv_cb_disable(&g->d);
		else if (vr_below(&g->rng, 4) == 0)
			(void)vring_drv_cb_enable(&g->d); /* a recheck result we may ignore: we are not sleeping */
		break;
	}
}

static void vr_guest_loop(struct vr_guest *g, int kick_fd, int call_fd, int dead_fd)
{
	const struct vr_cfg *cfg = g->cfg;
	uint64_t last_progress = vr_now_ms();
	uint64_t deadline = last_progress + 120000;
	uint64_t max_iter = 64 * (cfg->chain_count + cfg->desc_target) + 1000000;

	for (uint64_t iter = 0; iter < max_iter; iter++) {
		struct pollfd pfd[2] = {
			{ .fd = call_fd, .events = POLLIN },
			{ .fd = dead_fd, .events = POLLIN },
		};
		unsigned batch = 1 + vr_below(&g->rng, 32), added = 0;
		uint64_t now = vr_now_ms();
		int got, prc;
		eventfd_t val;

		if (now > deadline) {
			vr_fail(g->res, VR_TIMEOUT, "round deadline passed: %" PRIu64 " of %" PRIu64
				" returned", g->returned, g->seq);
			return;
		}
		if (now - last_progress > cfg->stall_ms) {
			vr_fail(g->res, VR_STALL, "guest spinning without progress for %u ms",
				cfg->stall_ms);
			return;
		}
		if (g->lockstep_hold && g->returned == g->seq)
			g->lockstep_hold = false; /* the whole batch is back */
		if (!vr_guest_submitting(g) && g->returned == g->seq)
			return; /* all back */

		vr_guest_cb_style(g);
		for (; added < batch; added++) {
			int rc = vr_guest_add(g);

			if (rc < 0)
				return;
			if (rc == 0)
				break;
		}
		if (added) {
			if (cfg->lockstep)
				g->lockstep_hold = true;
			vr_jitter(cfg, &g->rng);
			vring_drv_publish(&g->d);
			if (vring_drv_kick_needed(&g->d)) {
				if (eventfd_write(kick_fd, 1) < 0) {
					vr_fail(g->res, VR_PROTOCOL, "kick: %s", strerror(errno));
					return;
				}
				g->res->kicks++;
			}
			last_progress = now;
		}
		got = vr_guest_reclaim(g, 1 + vr_below(&g->rng, 64));
		if (got < 0)
			return;
		if (got > 0 || added == batch) {
			if (got > 0)
				last_progress = now;
			continue;
		}

		/* Nothing to add and nothing back: enable, full barrier,
		 * recheck; sleep on the call eventfd only if still nothing. */
		vr_jitter(cfg, &g->rng);
		if (vring_drv_cb_enable(&g->d))
			continue;
		prc = poll(pfd, 2, (int)(last_progress + cfg->stall_ms > now ?
					 last_progress + cfg->stall_ms - now : 0));
		if (prc < 0 && errno == EINTR)
			continue;
		if (prc < 0) {
			vr_fail(g->res, VR_PROTOCOL, "poll: %s", strerror(errno));
			return;
		}
		if (prc > 0 && (pfd[0].revents & POLLIN)) {
			if (eventfd_read(call_fd, &val) == 0)
				g->res->wakeups++;
			if (cfg->guest_style == VR_STYLE_DRAIN)
				vring_drv_cb_disable(&g->d);
			continue;
		}
		if (prc > 0) {
			vr_fail(g->res, VR_DEVICE, "device exited while %" PRIu64 " buffers were out",
				g->seq - g->returned);
			return;
		}
		/* Timed out. Only now look at the ring, to say why. */
		if (vring_drv_used_pending(&g->d))
			vr_fail(g->res, VR_STALL, "lost wakeup: used buffers waited but no call came "
				"within %u ms (%" PRIu64 " of %" PRIu64 " returned)", cfg->stall_ms,
				g->returned, g->seq);
		else
			vr_fail(g->res, VR_STALL, "no progress: the device returned nothing for %u ms "
				"(%" PRIu64 " of %" PRIu64 " returned)", cfg->stall_ms, g->returned,
				g->seq);
		return;
	}
	vr_fail(g->res, VR_TIMEOUT, "guest iteration bound reached");
}

/* Wait for the device to exit, at most ms; kill it after that. */
static int vr_reap(pid_t pid, int dead_fd, unsigned ms)
{
	struct pollfd pfd = { .fd = dead_fd, .events = POLLIN };
	int status = 0;

	if (poll(&pfd, 1, (int)ms) <= 0)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

/* One round: set up guest memory and the rings, fork the device, run the
 * guest, stop and reap the device. Asserts only on harness failures; the
 * verdict is in res. */
static void vr_run(const struct vr_cfg *cfg, struct vr_result *res)
{
	struct vr_guest g = { .cfg = cfg, .res = res };
	struct vr_shared *sh;
	struct vring_layout l;
	size_t ring_bytes, size;
	int memfd, kick_fd, call_fd, stop_fd, dead[2], status;
	uint64_t t0 = vr_now_ms();
	pid_t pid;

	memset(res, 0, sizeof(*res));
	g.rng.s = cfg->seed;
	g.shape.s = cfg->seed ^ 0x5AA9Eull;
	vring_layout(cfg->num, cfg->gpa_base, &l);
	ring_bytes = (l.total + 4095) & ~(size_t)4095;
	g.data_off = ring_bytes;
	size = ring_bytes + (size_t)cfg->num * VR_SLOT;

	memfd = tu_memfd(size, true);
	g.mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ck_assert_ptr_ne(g.mem, MAP_FAILED);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(sh, MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	g.req = calloc(cfg->num, sizeof(*g.req));
	g.free_req = calloc(cfg->num, sizeof(*g.free_req));
	ck_assert(g.req && g.free_req);
	for (unsigned i = 0; i < cfg->num; i++)
		g.free_req[g.nfree_req++] = cfg->num - 1 - i;
	ck_assert_int_eq(vring_drv_init(&g.d, cfg->num, vr_gptr(&g, l.desc), vr_gptr(&g, l.avail),
					vr_gptr(&g, l.used), cfg->event_idx), 0);

	kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ck_assert(kick_fd >= 0 && call_fd >= 0 && stop_fd >= 0);
	ck_assert_int_eq(pipe2(dead, O_CLOEXEC), 0);

	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* The device: its own mapping only, and it dies with us. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(dead[0]);
		munmap(g.mem, size);
		_exit(vr_device(cfg, memfd, ring_bytes, size, kick_fd, call_fd, stop_fd, sh));
	}
	close(dead[1]);

	vr_guest_loop(&g, kick_fd, call_fd, dead[0]);

	eventfd_write(stop_fd, 1);
	status = vr_reap(pid, dead[0], 5000);
	res->dev = *sh;
	if (res->status == VR_OK || res->status == VR_DEVICE) {
		if (sh->status != VR_OK) {
			res->status = VR_OK;
			vr_fail(res, VR_DEVICE, "device: %s", sh->msg);
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			vr_fail(res, VR_DEVICE, "device exit status %#x", status);
		} else if (sh->popped != g.seq) {
			vr_fail(res, VR_DEVICE, "device popped %" PRIu64 " chains, guest sent %" PRIu64,
				sh->popped, g.seq);
		}
	}
	if (res->status != VR_OK && res->status != VR_DEVICE && sh->status != VR_OK) {
		/* Both sides saw something: keep both reasons. */
		size_t ml = strlen(res->msg);

		snprintf(res->msg + ml, sizeof(res->msg) - ml, "; device: %s", sh->msg);
	}
	if (res->status == VR_OK && (g.nfree_req != cfg->num || g.d.num_free != cfg->num))
		vr_fail(res, VR_PROTOCOL, "after the round: %u of %u slots and %u descriptors free",
			g.nfree_req, cfg->num, g.d.num_free);

	fprintf(stderr, "  num %3u event_idx %d guest %d device %d regions %u%s%s: %6" PRIu64
		" chains %6" PRIu64 " descs %8" PRIu64 " bytes, %" PRIu64 " kicks %" PRIu64
		" calls %" PRIu64 " guest sleeps %" PRIu64 " enospc, %" PRIu64 " ms: %s%s%s\n",
		cfg->num, cfg->event_idx, cfg->guest_style, cfg->dev_style, cfg->nsplit,
		cfg->lockstep ? " lockstep" : "", cfg->jitter ? " jitter" : "", res->chains,
		res->descs, res->bytes, res->kicks, sh->calls, res->wakeups,
		res->enospc, vr_now_ms() - t0, vr_status_name[res->status],
		res->status ? ": " : "", res->msg);

	vring_drv_fini(&g.d);
	free(g.req);
	free(g.free_req);
	close(dead[0]);
	close(kick_fd);
	close(call_fd);
	close(stop_fd);
	munmap(sh, sizeof(*sh));
	munmap(g.mem, size);
	close(memfd);
}

static uint64_t vr_total_descs(void)
{
	const char *s = getenv("VNIC_RANDOM_DESCS");
	unsigned long long n = s ? strtoull(s, NULL, 0) : VR_DEFAULT_DESCS;

	return n ? n : VR_DEFAULT_DESCS;
}

static void vr_cfg_default(struct vr_cfg *cfg, unsigned long seed)
{
	*cfg = (struct vr_cfg){
		.seed = seed, .num = 16, .nsplit = 1, .gpa_base = 0x40000000ull,
		.stall_ms = VR_STALL_MS, .forget_call_seq = -1, .corrupt_seq = -1,
		.overrun_seq = -1,
	};
}

/* The randomised rounds: every combination of EVENT_IDX and the two
 * suppression styles, the rest drawn from the seed. */
START_TEST(random_two_process_rings)
{
	unsigned long seed = tu_seed("random_two_process_rings", 20261130);
	uint64_t total = vr_total_descs(), sent = 0;
	struct vr_rng rng = { seed };

	for (unsigned round = 0; round < VR_ROUNDS; round++) {
		struct vr_cfg cfg;
		struct vr_result res;

		vr_cfg_default(&cfg, vr_next(&rng));
		cfg.num = 1u << vr_below(&rng, VR_MAX_QLOG + 1);
		cfg.event_idx = round & 1;
		cfg.guest_style = (enum vr_style)((round / 2) % 3);
		cfg.dev_style = (enum vr_style)((round / 6) % 3);
		cfg.nsplit = 1 + vr_below(&rng, VR_MAX_SPLIT);
		cfg.lockstep = (round / 18) % 2;
		cfg.jitter = vr_below(&rng, 2);
		cfg.gpa_base = 0x100000ull + (uint64_t)vr_below(&rng, 1u << 20) * 4096;
		cfg.desc_target = (total - sent + (VR_ROUNDS - round) - 1) / (VR_ROUNDS - round);
		fprintf(stderr, "round %u:", round);
		vr_run(&cfg, &res);
		ck_assert_msg(res.status == VR_OK, "round %u (seed %lu): %s: %s", round, seed,
			      vr_status_name[res.status], res.msg);
		sent += res.descs;
	}
	fprintf(stderr, "random_two_process_rings: %" PRIu64 " descriptors\n", sent);
	ck_assert_uint_ge(sent, total);
}
END_TEST

/* The checker can fail: a device that forgets ONE call the guest asked
 * for must be reported as a lost wake-up by the stall deadline, never hang.
 * The same round without the fault passes, so the fault is the cause. */
START_TEST(lost_call_is_detected)
{
	unsigned long seed = tu_seed("lost_call_is_detected", 7);

	for (int ei = 0; ei <= 1; ei++) {
		struct vr_cfg cfg;
		struct vr_result res;
		uint64_t t0;

		vr_cfg_default(&cfg, seed);
		cfg.event_idx = ei;
		cfg.chain_count = 64;
		cfg.stall_ms = 1000;
		vr_run(&cfg, &res);
		ck_assert_msg(res.status == VR_OK, "control run: %s", res.msg);

		cfg.forget_call_seq = 63; /* the last chain: nothing else will wake the guest */
		t0 = vr_now_ms();
		vr_run(&cfg, &res);
		ck_assert_uint_eq(res.dev.forgot, 1);
		ck_assert_int_eq(res.status, VR_STALL);
		ck_assert_msg(strstr(res.msg, "lost wakeup") != NULL, "%s", res.msg);
		ck_assert_uint_eq(res.chains, 64);
		/* Detected by the deadline, not after it (and not by a hang). */
		ck_assert_uint_lt(vr_now_ms() - t0, 1000 + 100 + 3000);
	}
}
END_TEST

/* The checker can fail on content: one flipped byte, and one byte written
 * past the used length, are both caught. */
START_TEST(corruption_is_detected)
{
	unsigned long seed = tu_seed("corruption_is_detected", 11);
	struct vr_cfg cfg;
	struct vr_result res;

	vr_cfg_default(&cfg, seed);
	cfg.chain_count = 256;
	cfg.corrupt_seq = 100;
	vr_run(&cfg, &res);
	ck_assert_uint_eq(res.dev.corrupted, 1);
	ck_assert_int_eq(res.status, VR_CONTENT);

	vr_cfg_default(&cfg, seed);
	cfg.chain_count = 256;
	cfg.overrun_seq = 100;
	vr_run(&cfg, &res);
	ck_assert_uint_eq(res.dev.overran, 1);
	ck_assert_int_eq(res.status, VR_CONTENT);
	ck_assert_msg(strstr(res.msg, "written past len") != NULL, "%s", res.msg);
}
END_TEST

static Suite *vring_random_suite(void)
{
	Suite *s = suite_create("vring_random");
	TCase *tc = tcase_create("two_process");
	/* Long runs (VNIC_RANDOM_DESCS) get time in proportion. */
	double secs = 60.0 + (double)vr_total_descs() / 5000.0;

	tcase_set_timeout(tc, secs);
	tcase_add_test(tc, random_two_process_rings);
	tcase_add_test(tc, lost_call_is_detected);
	tcase_add_test(tc, corruption_is_detected);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(vring_random_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
