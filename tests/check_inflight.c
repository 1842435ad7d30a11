/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_inflight: inflight tracking of the split ring across worker
 * crashes (TESTPLAN L4, L6, C8).
 *
 * A crash is simulated in-process: the test hook of the vring
 * (vq->inflight_hook) longjmps out of the device at its k-th crash point,
 * for every k a scenario reaches, so the region and guest memory are left
 * exactly as a process killed at that instruction would leave them. Then a
 * fresh vring (a new worker) attaches the same region, recovers, and
 * serves the ring to the end. The simulated guest (vring_drv) detects a
 * double completion itself (-EIO for an id not in flight); the test counts
 * every cookie back exactly once.
 */
#include "config.h"

#include <check.h>
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inflight.h"
#include "memtable.h"
#include "testutil.h"
#include "vring.h"
#include "vring_drv.h"

#define GPA_BASE 0x100000ull
#define MEM_SIZE (256u * 1024u)
#define DATA_OFF 0x10000u
#define DATA(off) (GPA_BASE + DATA_OFF + (off))
#define MAX_COOKIES 4096u

static struct tu_guest g;
static struct vring_drv drv;
static struct vring_layout lay;
static struct vring_chain ch;
static char err[256];
static unsigned qnum;
static uint64_t features;

/* The region, as the supervisor would hold it (page-aligned heap). */
static void *region;
static size_t region_len;
static struct inflight_queue *iq;

/* Crash injection. */
static jmp_buf crash_jmp;
static unsigned hook_calls, crash_at;

/* Guest bookkeeping: cookie c (1-based) was added once; returned[c]
 * counts its completions. pop_seq[c]: when the device last popped it. */
static unsigned returned[MAX_COOKIES];
static unsigned pop_seq[MAX_COOKIES];
static unsigned ncookies, seq_counter;

static uint64_t rng;

static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void crash_hook(struct vring *vq, enum vring_inflight_step step)
{
	(void)vq;
	(void)step;
	if (++hook_calls == crash_at)
		longjmp(crash_jmp, 1);
}

static void setup_all(unsigned num, uint64_t feat)
{
	unsigned sz = num;

	qnum = num;
	features = feat;
	tu_guest_new(&g, GPA_BASE, MEM_SIZE);
	vring_layout(num, GPA_BASE, &lay);
	ck_assert_uint_le(lay.total, DATA_OFF);
	ck_assert_int_eq(vring_drv_init(&drv, num, tu_drv_ptr(&g, lay.desc),
					tu_drv_ptr(&g, lay.avail), tu_drv_ptr(&g, lay.used),
					feat & (1ull << VIRTIO_F_EVENT_IDX)), 0);
	region_len = inflight_region_size(1, &sz);
	ck_assert_uint_gt(region_len, 0);
	ck_assert_int_eq(posix_memalign(&region, 4096, region_len), 0);
	ck_assert_int_eq(inflight_region_init(region, region_len, 1, &sz), 0);
	ck_assert_int_eq(inflight_region_check(region, region_len, 1, &sz, &iq, err,
					       sizeof(err)), 0);
	memset(returned, 0, sizeof(returned));
	memset(pop_seq, 0, sizeof(pop_seq));
	ncookies = 0;
	seq_counter = 0;
	hook_calls = 0;
	crash_at = 0;
}

static void teardown_all(void)
{
	vring_drv_fini(&drv);
	tu_guest_free(&g);
	free(region);
	region = NULL;
}

/* A new "worker": vring_init on the same memory, the Config's (stale)
 * base, the region attached. Returns what attach returned. */
static int new_device(struct vring *vq, uint16_t base)
{
	int r;

	ck_assert_int_eq(vring_init(vq, g.mt, qnum, lay.desc, lay.avail, lay.used, features,
				    err, sizeof(err)), 0);
	if (base)
		vring_set_base(vq, base);
	r = vring_attach_inflight(vq, iq);
	ck_assert_int_ge(r, 0);
	vq->inflight_hook = crash_hook;
	return r;
}

/* Guest: add one chain of 1..3 readable descriptors, publish. */
static bool guest_add(void)
{
	struct vring_drv_buf b[3];
	unsigned n = 1 + (unsigned)(xorshift() % 3);
	int head;

	if (ncookies + 1 >= MAX_COOKIES || drv.num_free == 0)
		return false;
	if (n > drv.num_free)
		n = drv.num_free;
	for (unsigned i = 0; i < n; i++) {
		b[i].gpa = DATA(64u * (ncookies % 512));
		b[i].len = 64;
		b[i].writable = false;
	}
	head = vring_drv_add(&drv, b, n, (void *)(uintptr_t)(ncookies + 1));
	if (head < 0)
		return false;
	ncookies++;
	vring_drv_publish(&drv);
	return true;
}

/* Guest: reclaim everything used; a double or bogus completion fails. */
static unsigned guest_reclaim(void)
{
	unsigned n = 0;
	void *cookie;
	uint32_t len;
	int r;

	while ((r = vring_drv_get_used(&drv, &cookie, &len)) == 1) {
		uintptr_t c = (uintptr_t)cookie;

		ck_assert_uint_ge(c, 1);
		ck_assert_uint_le(c, ncookies);
		returned[c]++;
		ck_assert_msg(returned[c] == 1, "cookie %lu completed %u times",
			      (unsigned long)c, returned[c]);
		n++;
	}
	ck_assert_msg(r == 0, "guest saw a used id that is not in flight (double completion)");
	return n;
}

static uintptr_t cookie_of(uint16_t head)
{
	return (uintptr_t)drv.cookie[head];
}

/* Device in-hand state of the scenario. */
struct dev_state {
	uint16_t hand[256];
	unsigned nhand;
	unsigned since_push; /* popped since the last push (unpop's limit) */
};

/*
 * One scripted random run of the device against the guest, using every
 * operation (pop, push in any order, unpop, flush). Deterministic for a
 * seed, so a replay reaches the same crash points.
 */
static void scenario(struct vring *vq, struct dev_state *ds, unsigned steps)
{
	for (unsigned s = 0; s < steps; s++) {
		unsigned op = (unsigned)(xorshift() % 10);

		switch (op) {
		case 0:
		case 1:
			(void)guest_add();
			break;
		case 2:
		case 3:
		case 4: {
			int r = vring_pop(vq, &ch);

			ck_assert_int_ge(r, 0);
			if (r == 1) {
				ck_assert_uint_lt(ds->nhand, 256);
				ds->hand[ds->nhand++] = ch.head;
				ds->since_push++;
				pop_seq[cookie_of(ch.head)] = ++seq_counter;
			}
			break;
		}
		case 5:
		case 6:
			if (ds->nhand) {
				unsigned i = (unsigned)(xorshift() % ds->nhand);
				uint16_t h = ds->hand[i];

				memmove(&ds->hand[i], &ds->hand[i + 1],
					(ds->nhand - i - 1) * sizeof(ds->hand[0]));
				ds->nhand--;
				ds->since_push = 0;
				vring_push(vq, h, 0);
			}
			break;
		case 7:
			if (ds->since_push) {
				unsigned k = 1 + (unsigned)(xorshift() % ds->since_push);

				vring_unpop(vq, (uint16_t)k);
				for (unsigned i = ds->nhand - k; i < ds->nhand; i++)
					pop_seq[cookie_of(ds->hand[i])] = 0;
				ds->nhand -= k;
				ds->since_push -= k;
			}
			break;
		case 8:
			vring_flush(vq);
			break;
		default:
			(void)guest_reclaim();
			break;
		}
	}
}

/* After recovery: serve the ring to the end, the guest adding more. */
static void drain_and_continue(struct vring *vq)
{
	for (unsigned round = 0; round < 4 * qnum + 16; round++) {
		int r;

		if (round % 2)
			(void)guest_add();
		while ((r = vring_pop(vq, &ch)) == 1) {
			pop_seq[cookie_of(ch.head)] = ++seq_counter;
			vring_push(vq, ch.head, 0);
		}
		ck_assert_msg(r == 0, "queue broke after recovery: %s", vq->broken_reason);
		vring_flush(vq);
		(void)guest_reclaim();
	}
	/* Everything posted came back exactly once; nothing is pending. */
	ck_assert_uint_eq(drv.num_free, qnum);
	for (unsigned c = 1; c <= ncookies; c++)
		ck_assert_msg(returned[c] == 1, "cookie %u returned %u times", c, returned[c]);
}

/*
 * Check the recovered batch: the last n used entries, each of length 0
 * and in the order their heads were popped (the pop order is the avail
 * order; vring_recover_inflight pushes in that order). A pop_seq of 0 is
 * a pop the crash cut short after its last store (the test never saw it
 * return): the latest of all, so only the last entry may have it.
 */
static void assert_recovered_batch(const struct vring *vq, unsigned n)
{
	unsigned last_seq = 0;

	for (unsigned i = 0; i < n; i++) {
		uint16_t pos = (uint16_t)(vq->used_idx - n + i);
		const struct vring_used_elem *e = &drv.used->ring[pos & (qnum - 1)];
		uint32_t id = le32toh(e->id);

		ck_assert_uint_lt(id, qnum);
		unsigned sq = pop_seq[cookie_of((uint16_t)id)];

		ck_assert_uint_eq(le32toh(e->len), 0);
		if (sq == 0) {
			ck_assert_msg(i == n - 1, "a head of an unfinished pop is not last");
			sq = ~0u;
		}
		ck_assert_msg(sq > last_seq, "recovered heads out of pop order");
		last_seq = sq;
	}
}

/* Run scenario(seed) with a crash at hook call k (0: none). Returns the
 * number of hook calls reached (without a crash: the total). */
static unsigned run_crash(unsigned num, uint64_t seed, unsigned steps, unsigned k,
			  unsigned k2)
{
	static struct vring devs[3]; /* the dead worker, the new one, a third */
	struct vring *vq = &devs[0];
	struct vring *volatile vq2 = &devs[1];
	struct dev_state ds = { .nhand = 0 };
	unsigned calls, n = 0;
	volatile bool crashed = false;

	setup_all(num, 0);
	rng = seed;
	ck_assert_int_eq(new_device(vq, 0), 0); /* FRESH */
	ck_assert_uint_eq(iq->state, INFLIGHT_QUEUE_LIVE);
	crash_at = k;
	if (setjmp(crash_jmp) == 0)
		scenario(vq, &ds, steps);
	else
		crashed = true;
	calls = hook_calls;
	if (k && !crashed) {
		/* k beyond this scenario's crash points: nothing to test. */
		vring_detach_inflight(vq);
		teardown_all();
		return calls;
	}
	/* The dead worker's private state is gone; only its memory leak is
	 * reclaimed here. The guest reclaims what it saw meanwhile and posts
	 * more while "no worker runs" (L6). */
	vring_detach_inflight(vq);
	(void)guest_reclaim();
	(void)guest_add();

	/* New worker, Config base 0 (stale): the region is LIVE. */
	ck_assert_int_eq(new_device(vq2, 0), 1);
	if (k2) {
		/* A second crash, inside recovery. */
		hook_calls = 0;
		crash_at = k2;
		if (setjmp(crash_jmp) == 0) {
			(void)vring_recover_inflight(vq2, &n);
			crash_at = 0;
		} else {
			vring_detach_inflight(vq2);
			vq2 = &devs[2];
			ck_assert_int_eq(new_device(vq2, 0), 1);
			crash_at = 0;
			ck_assert_msg(vring_recover_inflight(vq2, &n) == 0, "recovery after a crash "
				      "in recovery (k=%u k2=%u): %s", k, k2, vq2->broken_reason);
		}
	} else {
		crash_at = 0;
		ck_assert_msg(vring_recover_inflight(vq2, &n) == 0, "recovery at crash point %u: %s",
			      k, vq2->broken_reason);
		assert_recovered_batch(vq2, n);
	}
	drain_and_continue(vq2);
	vring_detach_inflight(vq2);
	teardown_all();
	return calls;
}

/* ------------------------------------------------------------- L4 */

/* Every crash point of a few random scenarios: nothing lost, nothing
 * completed twice, leftovers in pop order, and the guest goes on. */
START_TEST(l4_crash_at_every_point)
{
	static const unsigned nums[] = { 4, 8, 16 };
	unsigned tried = 0;

	for (unsigned s = 0; s < 12; s++) {
		unsigned num = nums[s % 3];
		uint64_t seed = tu_seed("l4_crash_at_every_point", 0x1234567ull) + s * 7919u;
		unsigned total = run_crash(num, seed, 160, 0, 0);

		ck_assert_uint_gt(total, 20);
		for (unsigned k = 1; k <= total; k++) {
			run_crash(num, seed, 160, k, 0);
			tried++;
		}
	}
	fprintf(stderr, "l4_crash_at_every_point: %u crash points\n", tried);
}
END_TEST

/* A crash inside recovery is recovered the same way. */
START_TEST(l4_crash_during_recovery)
{
	uint64_t seed = tu_seed("l4_crash_during_recovery", 0xfeedull);
	unsigned total = run_crash(8, seed, 80, 0, 0), tried = 0;

	for (unsigned k = 1; k <= total; k += 3)
		for (unsigned k2 = 1; k2 <= 12; k2++, tried++)
			run_crash(8, seed, 80, k, k2);
	ck_assert_uint_gt(tried, 0);
}
END_TEST

/* The named crash points of the issue, each on a known state: after pop
 * before processing, after push before flush, between used->idx and the
 * commit, after the commit. */
static enum vring_inflight_step target_step;
static unsigned target_nth, target_seen;

static void step_hook(struct vring *vq, enum vring_inflight_step step)
{
	(void)vq;
	if (step == target_step && ++target_seen == target_nth)
		longjmp(crash_jmp, 1);
}

/* 5 chains posted; the device pops 3, pushes 2, flushes, pops 2 more,
 * pushes 1, flushes. Crash at the nth `step`; expect `leftover` heads
 * completed by recovery and `fixed` published ones found by it. */
static void named_point(enum vring_inflight_step step, unsigned nth, unsigned leftover)
{
	struct vring *vq = calloc(1, sizeof(*vq)), *vq2 = calloc(1, sizeof(*vq2));
	uint16_t h[5];
	unsigned n = 99;

	setup_all(8, 0);
	ck_assert_int_eq(new_device(vq, 0), 0);
	for (int i = 0; i < 5; i++)
		ck_assert(guest_add());
	vq->inflight_hook = step_hook;
	target_step = step;
	target_nth = nth;
	target_seen = 0;
	if (setjmp(crash_jmp) == 0) {
		for (int i = 0; i < 3; i++) {
			ck_assert_int_eq(vring_pop(vq, &ch), 1);
			h[i] = ch.head;
			pop_seq[cookie_of(ch.head)] = ++seq_counter;
		}
		vring_push(vq, h[0], 0);
		vring_push(vq, h[1], 0);
		vring_flush(vq);
		for (int i = 3; i < 5; i++) {
			ck_assert_int_eq(vring_pop(vq, &ch), 1);
			h[i] = ch.head;
			pop_seq[cookie_of(ch.head)] = ++seq_counter;
		}
		vring_push(vq, h[2], 0);
		vring_flush(vq);
		ck_abort_msg("step %d #%u not reached", (int)step, nth);
	}
	vring_detach_inflight(vq);
	ck_assert_int_eq(new_device(vq2, 0), 1);
	vq2->inflight_hook = NULL;
	ck_assert_msg(vring_recover_inflight(vq2, &n) == 0, "%s", vq2->broken_reason);
	ck_assert_uint_eq(n, leftover);
	assert_recovered_batch(vq2, n);
	drain_and_continue(vq2);
	vring_detach_inflight(vq2);
	free(vq);
	free(vq2);
	teardown_all();
}

START_TEST(l4_after_pop_before_processing)
{
	named_point(VRING_IF_POP_AVAIL, 3, 3);
}
END_TEST

START_TEST(l4_pop_cut_short)
{
	/* Slot written, avail_seq not: the third chain is popped again. */
	named_point(VRING_IF_POP_SLOT, 3, 2);
}
END_TEST

START_TEST(l4_after_push_before_flush)
{
	named_point(VRING_IF_PUSH_ELEM, 2, 3);
}
END_TEST

START_TEST(l4_between_used_idx_and_commit)
{
	named_point(VRING_IF_FLUSH_IDX, 1, 1);
}
END_TEST

START_TEST(l4_between_slot_clears)
{
	named_point(VRING_IF_FLUSH_SLOT, 1, 1);
}
END_TEST

START_TEST(l4_after_commit)
{
	named_point(VRING_IF_FLUSH_COMMIT, 1, 1);
}
END_TEST

START_TEST(l4_second_batch_published)
{
	/* The second flush published h[2]; only h[3], h[4] are left. */
	named_point(VRING_IF_FLUSH_IDX, 2, 2);
}
END_TEST

/* L6 at ring level: chains posted while no worker ran are popped by the
 * new one right after recovery, and a fresh region takes the Config base. */
START_TEST(l6_fresh_base_and_posted_meanwhile)
{
	struct vring vq;
	unsigned n = 7;

	setup_all(8, 0);
	/* The guest's ring already moved to 300 (a VMM resumed it). */
	drv.avail_idx = drv.last_used = drv.kicked_idx = 300;
	drv.avail->idx = htole16(300);
	drv.used->idx = htole16(300);
	ck_assert_int_eq(new_device(&vq, 300), 0);
	ck_assert_uint_eq(iq->avail_seq, 300);
	ck_assert_uint_eq(iq->used_seq, 300);
	ck_assert_int_eq(vring_recover_inflight(&vq, &n), 0); /* nothing to do */
	ck_assert_uint_eq(n, 0);
	ck_assert(guest_add());
	ck_assert(guest_add());
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	vring_detach_inflight(&vq);
	/* Crash; two more posted meanwhile. */
	ck_assert(guest_add());
	ck_assert(guest_add());
	ck_assert_int_eq(new_device(&vq, 0), 1);
	ck_assert_int_eq(vring_recover_inflight(&vq, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(vq.last_avail_idx, 301);
	ck_assert(vring_avail_pending(&vq)); /* 3 to pop without any kick */
	drain_and_continue(&vq);
	vring_detach_inflight(&vq);
	teardown_all();
}
END_TEST

/* L5: after a queue reset the supervisor resets the region's queue; the
 * next worker starts FRESH at its Config base and completes nothing of
 * the old ring. */
START_TEST(l5_queue_reset_no_stale_resubmission)
{
	struct vring vq;

	setup_all(8, 0);
	ck_assert_int_eq(new_device(&vq, 0), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert(guest_add());
		ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	}
	vring_detach_inflight(&vq); /* crash with 3 in flight */
	ck_assert_uint_eq(iq->avail_seq - iq->used_seq, 3);
	/* The guest resets the queue: a new, empty ring. */
	vring_drv_fini(&drv);
	ck_assert_int_eq(vring_drv_init(&drv, qnum, tu_drv_ptr(&g, lay.desc),
					tu_drv_ptr(&g, lay.avail), tu_drv_ptr(&g, lay.used), false), 0);
	memset(returned, 0, sizeof(returned));
	ncookies = 0;
	inflight_queue_reset(iq);
	ck_assert_int_eq(inflight_region_check(region, region_len, 1, &qnum, &iq, err,
					       sizeof(err)), 0);
	ck_assert_int_eq(new_device(&vq, 0), 0); /* FRESH: nothing to recover */
	ck_assert_uint_eq(le16toh(drv.used->idx), 0);
	drain_and_continue(&vq);
	vring_detach_inflight(&vq);
	teardown_all();
}
END_TEST

/* A LIVE region must be recovered before the first pop. */
START_TEST(l4_pop_before_recovery_breaks)
{
	struct vring vq;

	setup_all(8, 0);
	ck_assert_int_eq(new_device(&vq, 0), 0);
	vring_detach_inflight(&vq);
	ck_assert(guest_add());
	ck_assert_int_eq(new_device(&vq, 0), 1);
	ck_assert_int_eq(vring_pop(&vq, &ch), -EIO);
	ck_assert(strstr(vq.broken_reason, "not recovered") != NULL);
	vring_detach_inflight(&vq);
	teardown_all();
}
END_TEST

/* G5 with tracking: a head offered again while in flight is caught. */
START_TEST(g5_head_offered_twice_in_flight)
{
	struct vring vq;
	int head;

	setup_all(8, 0);
	ck_assert_int_eq(new_device(&vq, 0), 0);
	ck_assert(guest_add());
	head = drv.avail->ring[0];
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	drv.avail->ring[1] = (uint16_t)head;
	drv.avail->idx = htole16(2);
	ck_assert_int_eq(vring_pop(&vq, &ch), -EIO);
	ck_assert(strstr(vq.broken_reason, "offered again while in flight") != NULL);
	vring_detach_inflight(&vq);
	teardown_all();
}
END_TEST

/* ------------------------------------------------------------- C8 */

/* Set up a LIVE region with 3 heads in flight (popped, not used). */
static void live_with_three(struct vring *vq)
{
	setup_all(8, 0);
	ck_assert_int_eq(new_device(vq, 0), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert(guest_add());
		ck_assert_int_eq(vring_pop(vq, &ch), 1);
	}
	vring_detach_inflight(vq);
}

static void expect_recover_broken(const char *needle)
{
	struct vring vq;
	unsigned n = 77;

	ck_assert_int_eq(new_device(&vq, 0), 1);
	ck_assert_int_eq(vring_recover_inflight(&vq, &n), -EIO);
	ck_assert_uint_eq(n, 77); /* untouched on failure */
	ck_assert(vq.broken);
	ck_assert_msg(strstr(vq.broken_reason, needle) != NULL, "reason \"%s\" lacks \"%s\"",
		      vq.broken_reason, needle);
	ck_assert_int_eq(vring_pop(&vq, &ch), -EIO);
	vring_detach_inflight(&vq);
	teardown_all();
}

START_TEST(c8_used_above_avail)
{
	struct vring vq;

	live_with_three(&vq);
	iq->used_seq = iq->avail_seq + 1;
	expect_recover_broken("are not 0..8 apart");
}
END_TEST

START_TEST(c8_indices_far_apart)
{
	struct vring vq;

	live_with_three(&vq);
	iq->avail_seq = 1ull << 40;
	expect_recover_broken("are not 0..8 apart");
}
END_TEST

START_TEST(c8_guest_used_far_ahead)
{
	struct vring vq;

	live_with_three(&vq);
	drv.used->idx = htole16(200);
	expect_recover_broken("guest used index 200");
}
END_TEST

START_TEST(c8_guest_used_behind)
{
	struct vring vq;

	live_with_three(&vq);
	drv.used->idx = htole16(0xffff);
	expect_recover_broken("guest used index 65535");
}
END_TEST

START_TEST(c8_used_id_out_of_range)
{
	struct vring vq;

	live_with_three(&vq);
	/* As if a flush published one entry, with an id past the ring. */
	drv.used->ring[0].id = htole32(8);
	drv.used->idx = htole16(1);
	expect_recover_broken("names head 8");
}
END_TEST

START_TEST(c8_used_id_duplicated)
{
	struct vring vq;
	uint32_t id;

	live_with_three(&vq);
	for (id = 0; id < 8 && !iq->slot[id]; id++)
		;
	drv.used->ring[0].id = htole32(id);
	drv.used->ring[1].id = htole32(id);
	drv.used->idx = htole16(2);
	expect_recover_broken("heads in flight, its indices say");
}
END_TEST

START_TEST(c8_extra_flag)
{
	struct vring vq;
	unsigned h;

	live_with_three(&vq);
	for (h = 0; h < 8 && iq->slot[h]; h++)
		;
	iq->slot[h] = 1; /* position 0: below avail_seq, not counted */
	expect_recover_broken("4 heads in flight, its indices say 3");
}
END_TEST

START_TEST(c8_missing_flag)
{
	struct vring vq;
	unsigned h;

	live_with_three(&vq);
	for (h = 0; h < 8 && !iq->slot[h]; h++)
		;
	iq->slot[h] = 0;
	expect_recover_broken("2 heads in flight, its indices say 3");
}
END_TEST

START_TEST(c8_same_position_twice)
{
	struct vring vq;
	unsigned a = 8, b = 8;

	live_with_three(&vq);
	for (unsigned h = 0; h < 8; h++) {
		if (iq->slot[h] == 1)
			a = h;
		if (iq->slot[h] == 2)
			b = h;
	}
	ck_assert(a < 8 && b < 8);
	iq->slot[b] = 1;
	expect_recover_broken("both popped at avail position 0");
}
END_TEST

/* Garbage everywhere: recovery either succeeds or breaks the queue with
 * a reason; never a crash or an access outside the region (sanitizers). */
START_TEST(c8_garbage_fuzz)
{
	unsigned ok = 0, broken = 0;

	rng = tu_seed("c8_garbage_fuzz", 0xabcdefull);
	for (unsigned round = 0; round < 2000; round++) {
		struct vring vq;
		unsigned n;
		int r;

		live_with_three(&vq);
		switch (round % 4) {
		case 0: /* random slots */
			for (unsigned h = 0; h < 8; h++)
				if (xorshift() % 2)
					iq->slot[h] = xorshift() % 16;
			break;
		case 1: /* random indices */
			iq->avail_seq = xorshift() % 12;
			iq->used_seq = xorshift() % 12;
			break;
		case 2: /* random guest used ring */
			drv.used->idx = htole16((uint16_t)(xorshift() % 6));
			for (unsigned i = 0; i < 8; i++)
				drv.used->ring[i].id = htole32((uint32_t)(xorshift() % 12));
			break;
		default: /* all of it, full range */
			for (unsigned h = 0; h < 8; h++)
				iq->slot[h] = xorshift();
			iq->avail_seq = xorshift();
			iq->used_seq = iq->avail_seq - xorshift() % 10;
			drv.used->idx = htole16((uint16_t)xorshift());
			for (unsigned i = 0; i < 8; i++)
				drv.used->ring[i].id = htole32((uint32_t)xorshift());
			break;
		}
		ck_assert_int_eq(new_device(&vq, 0), 1);
		r = vring_recover_inflight(&vq, &n);
		if (r == 0) {
			ok++;
			ck_assert_uint_le(n, 8);
			ck_assert(!vq.broken);
		} else {
			broken++;
			ck_assert_int_eq(r, -EIO);
			ck_assert(vq.broken && vq.broken_reason[0]);
		}
		vring_detach_inflight(&vq);
		teardown_all();
	}
	ck_assert_uint_gt(ok, 0);
	ck_assert_uint_gt(broken, 0);
}
END_TEST

/* Header checks (a bad region is rejected as a whole: the worker exits). */
START_TEST(c8_region_header_checks)
{
	unsigned sz[2] = { 8, 16 }, bad[2] = { 8, 32 };
	size_t len = inflight_region_size(2, sz);
	uint8_t *p = calloc(1, len + 64);
	struct inflight_queue *q[2];
	struct inflight_header *h = (struct inflight_header *)(void *)p;
	struct inflight_queue *q1;

	ck_assert_uint_eq(len, 64 + (64 + 64) + (64 + 128));
	ck_assert_uint_eq(inflight_region_size(0, sz), 0);
	ck_assert_uint_eq(inflight_region_size(65, sz), 0);
	ck_assert_uint_eq(inflight_region_size(2, (unsigned[]){ 8, 6 }), 0);
	ck_assert_uint_eq(inflight_region_size(1, (unsigned[]){ 65536 }), 0);
	/* Whole (4 KiB x86-64) pages: 448 bytes take one, two 256-entry rings
	 * (4288 bytes) two. */
	ck_assert_uint_eq(inflight_region_pages(2, sz), 4096);
	ck_assert_uint_eq(inflight_region_pages(2, (unsigned[]){ 256, 256 }), 8192);
	ck_assert_uint_eq(inflight_region_pages(2, (unsigned[]){ 8, 6 }), 0);
	ck_assert_int_eq(inflight_region_init(p, len - 1, 2, sz), -EINVAL);
	ck_assert_int_eq(inflight_region_init(p, len, 2, sz), 0);
	ck_assert_int_eq(inflight_region_check(p, len, 2, sz, q, err, sizeof(err)), 0);
	ck_assert_ptr_eq(q[0], p + 64);
	ck_assert_ptr_eq(q[1], p + 64 + 128);
	q1 = q[1];
	/* Queue count, queue size, length. */
	ck_assert_int_eq(inflight_region_check(p, len, 1, sz, q, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(inflight_region_check(p, len, 2, bad, q, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(inflight_region_check(p, len - 8, 2, sz, q, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(inflight_region_check(p, len + 64, 2, sz, q, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(inflight_region_check(p, 16, 2, sz, q, err, sizeof(err)), -EINVAL);
	/* Version, magic, header size, queue num, state, fresh with a slot. */
	h->version = 2;
	ck_assert_int_eq(inflight_region_check(p, len, 2, sz, q, err, sizeof(err)), -EINVAL);
	ck_assert(strstr(err, "version") != NULL);
	h->version = INFLIGHT_VERSION;
	h->magic ^= 1;
	ck_assert_int_eq(inflight_region_check(p, len, 2, sz, q, err, sizeof(err)), -EINVAL);
	h->magic ^= 1;
	h->size = len * 2;
	ck_assert_int_eq(inflight_region_check(p, len, 2, sz, q, err, sizeof(err)), -EINVAL);
	h->size = len;
	q1->num = 32;
	ck_assert_int_eq(inflight_region_check(p, len, 2, sz, q, err, sizeof(err)), -EINVAL);
	ck_assert(strstr(err, "queue 1 has size 32") != NULL);
	q1->num = 16;
	q1->state = 7;
	ck_assert_int_eq(inflight_region_check(p, len, 2, sz, q, err, sizeof(err)), -EINVAL);
	ck_assert(strstr(err, "state 7") != NULL);
	q1->state = INFLIGHT_QUEUE_FRESH;
	q1->slot[15] = 3;
	ck_assert_int_eq(inflight_region_check(p, len, 2, sz, q, err, sizeof(err)), -EINVAL);
	ck_assert(strstr(err, "fresh queue 1 has head 15") != NULL);
	q1->state = INFLIGHT_QUEUE_LIVE; /* LIVE slots are recovery's business */
	ck_assert_int_eq(inflight_region_check(p, len, 2, sz, q, err, sizeof(err)), 0);
	free(p);
}
END_TEST

/* attach refuses a queue of another size and a second attach. */
START_TEST(c8_attach_size_mismatch)
{
	struct vring vq;
	unsigned sz = 16;
	void *p;
	struct inflight_queue *q16;

	setup_all(8, 0);
	p = calloc(1, inflight_region_size(1, &sz));
	ck_assert_int_eq(inflight_region_init(p, inflight_region_size(1, &sz), 1, &sz), 0);
	q16 = (struct inflight_queue *)(void *)((uint8_t *)p + 64);
	ck_assert_int_eq(vring_init(&vq, g.mt, 8, lay.desc, lay.avail, lay.used, 0, err,
				    sizeof(err)), 0);
	ck_assert_int_eq(vring_attach_inflight(&vq, q16), -EINVAL);
	ck_assert_int_eq(vring_attach_inflight(&vq, iq), 0);
	ck_assert_int_eq(vring_attach_inflight(&vq, iq), -EINVAL);
	vring_detach_inflight(&vq);
	vring_detach_inflight(&vq); /* twice is fine */
	free(p);
	teardown_all();
}
END_TEST

static Suite *inflight_suite(void)
{
	Suite *s = suite_create("inflight");
	TCase *tl = tcase_create("crash");
	TCase *tc = tcase_create("hostile");

	tcase_set_timeout(tl, 120);
	tcase_add_test(tl, l4_crash_at_every_point);
	tcase_add_test(tl, l4_crash_during_recovery);
	tcase_add_test(tl, l4_after_pop_before_processing);
	tcase_add_test(tl, l4_pop_cut_short);
	tcase_add_test(tl, l4_after_push_before_flush);
	tcase_add_test(tl, l4_between_used_idx_and_commit);
	tcase_add_test(tl, l4_between_slot_clears);
	tcase_add_test(tl, l4_after_commit);
	tcase_add_test(tl, l4_second_batch_published);
	tcase_add_test(tl, l6_fresh_base_and_posted_meanwhile);
	tcase_add_test(tl, l4_pop_before_recovery_breaks);
	tcase_add_test(tl, l5_queue_reset_no_stale_resubmission);
	tcase_add_test(tl, g5_head_offered_twice_in_flight);
	suite_add_tcase(s, tl);

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, c8_used_above_avail);
	tcase_add_test(tc, c8_indices_far_apart);
	tcase_add_test(tc, c8_guest_used_far_ahead);
	tcase_add_test(tc, c8_guest_used_behind);
	tcase_add_test(tc, c8_used_id_out_of_range);
	tcase_add_test(tc, c8_used_id_duplicated);
	tcase_add_test(tc, c8_extra_flag);
	tcase_add_test(tc, c8_missing_flag);
	tcase_add_test(tc, c8_same_position_twice);
	tcase_add_test(tc, c8_garbage_fuzz);
	tcase_add_test(tc, c8_region_header_checks);
	tcase_add_test(tc, c8_attach_size_mismatch);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(inflight_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
