/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_vring: the split virtqueue, device and driver sides
 * (TESTPLAN G1-G12, G16, G17, C5, C7).
 *
 * Guest memory is one sealed memfd mapped twice: the simulated guest
 * (vring_drv and raw writes) uses tu_guest.drv, the device uses the
 * memtable mapping at another address. Hostile chains are written straight
 * into the driver's view of the rings. Every "broken" test also checks the
 * reason, so that each test fails when its own check is removed (and not
 * merely because some later check catches the damage).
 */
#include "config.h"

#include <check.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memtable.h"
#include "testutil.h"
#include "vring.h"
#include "vring_drv.h"

#define GPA_BASE 0x100000ull
#define MEM_SIZE (1024u * 1024u)
#define DATA_OFF 0x10000u /* rings of up to 2048 entries fit below */
#define DATA(off) (GPA_BASE + DATA_OFF + (off))
#define F_INDIRECT (1ull << VIRTIO_F_INDIRECT_DESC)
#define F_EVENT_IDX (1ull << VIRTIO_F_EVENT_IDX)

static struct tu_guest g;
static struct vring vq;
static struct vring_drv drv;
static struct vring_layout lay;
static struct vring_chain ch;
static char err[256];

static void setup_mem(unsigned num, uint64_t features, size_t memsize)
{
	tu_guest_new(&g, GPA_BASE, memsize);
	vring_layout(num, GPA_BASE, &lay);
	ck_assert_uint_le(lay.total, DATA_OFF);
	ck_assert_int_eq(vring_drv_init(&drv, num, tu_drv_ptr(&g, lay.desc),
					tu_drv_ptr(&g, lay.avail), tu_drv_ptr(&g, lay.used),
					features & F_EVENT_IDX), 0);
	ck_assert_int_eq(vring_init(&vq, g.mt, num, lay.desc, lay.avail, lay.used, features,
				    err, sizeof(err)), 0);
}

static void setup(unsigned num, uint64_t features)
{
	setup_mem(num, features, MEM_SIZE);
}

static void teardown(void)
{
	vring_drv_fini(&drv);
	tu_guest_free(&g);
}

/* Raw descriptor write into a table seen through the driver's mapping. */
static void put_desc(struct vring_desc *t, unsigned i, uint64_t addr, uint32_t len,
		     uint16_t flags, uint16_t next)
{
	t[i].addr = htole64(addr);
	t[i].len = htole32(len);
	t[i].flags = htole16(flags);
	t[i].next = htole16(next);
}

/* The driver's pointer to an indirect table at gpa. */
static struct vring_desc *table_at(uint64_t gpa)
{
	return tu_drv_ptr(&g, gpa);
}

/* Offer head in the next avail slot and publish, bypassing the free list. */
static void offer(uint16_t head)
{
	drv.avail->ring[drv.avail_idx & (drv.num - 1)] = htole16(head);
	drv.avail_idx++;
	vring_drv_publish(&drv);
}

static void assert_broken(const char *needle)
{
	uint16_t last = vq.last_avail_idx;

	ck_assert_int_eq(vring_pop(&vq, &ch), -EIO);
	ck_assert(vq.broken);
	ck_assert_msg(strstr(vq.broken_reason, needle) != NULL,
		      "reason \"%s\" does not mention \"%s\"", vq.broken_reason, needle);
	/* Nothing was consumed, and nothing will be. */
	ck_assert_uint_eq(vq.last_avail_idx, last);
	ck_assert_int_eq(vring_pop(&vq, &ch), -EIO);
	ck_assert(!vring_avail_pending(&vq));
}

/* Does [p, p+len) lie inside one region of the device's mapping? */
static bool in_device_memory(const struct memtable *mt, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (unsigned i = 0; i < mt->n; i++) {
		const struct mem_region *r = &mt->r[i];

		if (b >= r->hva && len <= r->size && (size_t)(b - r->hva) <= r->size - len)
			return true;
	}
	return false;
}

static uint8_t *dev_ptr(uint64_t gpa)
{
	uint64_t len = 1;

	return memtable_translate(g.mt, gpa, &len);
}

/* ---------------------------------------------------------------- happy */

START_TEST(direct_chain_round_trip)
{
	struct vring_drv_buf b[2] = {
		{ DATA(0), 100, false },
		{ DATA(4096), 200, true },
	};
	int cookie = 7;
	void *got;
	uint32_t len;
	int head;

	setup(8, 0);
	memset(g.drv + DATA_OFF, 0x5a, 100);
	head = vring_drv_add(&drv, b, 2, &cookie);
	ck_assert_int_ge(head, 0);
	ck_assert_int_eq(vring_pop(&vq, &ch), 0); /* not published yet */
	vring_drv_publish(&drv);
	ck_assert(vring_avail_pending(&vq));
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, (unsigned)head);
	ck_assert_uint_eq(ch.ndesc, 2);
	ck_assert_uint_eq(ch.nout, 1);
	ck_assert_uint_eq(ch.nin, 1);
	ck_assert_uint_eq(ch.out_len, 100);
	ck_assert_uint_eq(ch.in_len, 200);
	ck_assert(!ch.truncated);
	/* The device's mapping, not the driver's. */
	ck_assert_ptr_eq(ch.iov[0].iov_base, dev_ptr(DATA(0)));
	ck_assert_ptr_ne(ch.iov[0].iov_base, tu_drv_ptr(&g, DATA(0)));
	ck_assert_uint_eq(((uint8_t *)ch.iov[0].iov_base)[99], 0x5a);
	memset(ch.iov[1].iov_base, 0xc3, 50);
	ck_assert_int_eq(vring_pop(&vq, &ch), 0);

	vring_push(&vq, (uint16_t)head, 50);
	ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), 0); /* not flushed */
	vring_flush(&vq);
	ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), 1);
	ck_assert_ptr_eq(got, &cookie);
	ck_assert_uint_eq(len, 50);
	ck_assert_uint_eq(g.drv[DATA_OFF + 4096 + 49], 0xc3);
	ck_assert_uint_eq(drv.num_free, 8);
	ck_assert_uint_eq(vq.inflight, 0);
	teardown();
}
END_TEST

START_TEST(indirect_chain)
{
	uint64_t tbl = DATA(0x8000);
	struct vring_desc *t;

	setup(8, F_INDIRECT);
	t = table_at(tbl);
	put_desc(t, 0, DATA(0), 10, VRING_DESC_F_NEXT, 2);
	put_desc(t, 2, DATA(100), 20, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
	put_desc(t, 1, DATA(200), 30, VRING_DESC_F_WRITE, 0);
	put_desc(drv.desc, 5, tbl, 3 * 16, VRING_DESC_F_INDIRECT, 0);
	offer(5);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 5);
	ck_assert_uint_eq(ch.ndesc, 4);
	ck_assert_uint_eq(ch.nout, 1);
	ck_assert_uint_eq(ch.nin, 2);
	ck_assert_uint_eq(ch.out_len, 10);
	ck_assert_uint_eq(ch.in_len, 50);
	ck_assert_ptr_eq(ch.iov[1].iov_base, dev_ptr(DATA(100)));
	ck_assert_ptr_eq(ch.iov[2].iov_base, dev_ptr(DATA(200)));
	teardown();
}
END_TEST

/* A direct chain may end in an indirect descriptor (spec 2.7.5.3). */
START_TEST(direct_then_indirect)
{
	uint64_t tbl = DATA(0x8000);

	setup(8, F_INDIRECT);
	put_desc(table_at(tbl), 0, DATA(300), 40, VRING_DESC_F_WRITE, 0);
	put_desc(drv.desc, 0, DATA(0), 10, VRING_DESC_F_NEXT, 1);
	put_desc(drv.desc, 1, tbl, 16, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.nout, 1);
	ck_assert_uint_eq(ch.nin, 1);
	ck_assert_uint_eq(ch.in_len, 40);
	teardown();
}
END_TEST

/* --------------------------------------------------------------- G1-G5 */

START_TEST(g1_desc_loop)
{
	setup(256, 0);
	for (unsigned i = 0; i < 256; i++)
		put_desc(drv.desc, i, DATA(i), 1, VRING_DESC_F_NEXT, (uint16_t)((i + 1) % 256));
	offer(3);
	assert_broken("descriptor loop: chain from head 3 longer than queue size 256");
	teardown();
}
END_TEST

START_TEST(g1_self_loop)
{
	setup(8, 0);
	put_desc(drv.desc, 2, DATA(0), 64, VRING_DESC_F_NEXT, 2);
	offer(2);
	assert_broken("loop");
	teardown();
}
END_TEST

/* A self-loop of zero-length descriptors: no progress at all per step.
 * Our G6 policy catches it on the first step; what matters is that it
 * ends, broken, without spinning. */
START_TEST(g1_self_loop_len0)
{
	struct timespec a, b;

	setup(8, 0);
	put_desc(drv.desc, 0, DATA(0), 0, VRING_DESC_F_NEXT, 0);
	offer(0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	ck_assert_int_eq(vring_pop(&vq, &ch), -EIO);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ck_assert(vq.broken);
	ck_assert_int_lt(b.tv_sec - a.tv_sec, 2);
	teardown();
}
END_TEST

START_TEST(g1_loop_in_indirect_table)
{
	uint64_t tbl = DATA(0x8000);
	struct vring_desc *t;

	setup(256, F_INDIRECT);
	t = table_at(tbl);
	for (unsigned i = 0; i < 4; i++)
		put_desc(t, i, DATA(i * 8), 8, VRING_DESC_F_NEXT, (uint16_t)((i + 1) % 4));
	put_desc(drv.desc, 0, tbl, 4 * 16, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	/* Bounded by the table size (4), not the queue size (256). */
	assert_broken("indirect table of head 0 chains more than its 4 entries");
	teardown();
}
END_TEST

START_TEST(g2_next_beyond_queue)
{
	setup(8, 0);
	put_desc(drv.desc, 0, DATA(0), 64, VRING_DESC_F_NEXT, 8);
	offer(0);
	assert_broken("next 8 is not below the queue size 8");
	teardown();
}
END_TEST

START_TEST(g2_next_beyond_indirect_table)
{
	uint64_t tbl = DATA(0x8000);
	struct vring_desc *t;

	setup(8, F_INDIRECT);
	t = table_at(tbl);
	put_desc(t, 0, DATA(0), 8, VRING_DESC_F_NEXT, 2);
	put_desc(t, 1, DATA(8), 8, 0, 0);
	/* A valid-looking entry just past the table: only the next check
	 * keeps the walk from using it. */
	put_desc(t, 2, DATA(16), 8, 0, 0);
	put_desc(drv.desc, 0, tbl, 2 * 16, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("next 2 is not below the indirect table size 2");
	teardown();
}
END_TEST

START_TEST(g3_head_beyond_queue)
{
	setup(8, 0);
	put_desc(drv.desc, 0, DATA(0), 64, 0, 0);
	offer(8);
	assert_broken("head 8 is not below queue size 8");
	teardown();
}
END_TEST

START_TEST(g4_avail_idx_jump)
{
	setup(8, 0);
	put_desc(drv.desc, 0, DATA(0), 64, 0, 0);
	for (unsigned i = 0; i < 8; i++)
		drv.avail->ring[i] = 0;
	drv.avail->idx = htole16(9);
	assert_broken("9 entries pending, more than queue size 8");
	teardown();
}
END_TEST

START_TEST(g4_avail_idx_decrement)
{
	setup(8, 0);
	put_desc(drv.desc, 0, DATA(0), 64, 0, 0);
	offer(0);
	offer(0);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	drv.avail->idx = htole16(1); /* moved back by one: 65535 "pending" */
	assert_broken("65535 entries pending");
	teardown();
}
END_TEST

/* Exactly a full queue pending is legal; the wrap trick (idx far ahead by
 * 65536 - k) is the decrement case above. */
START_TEST(g4_full_queue_is_fine)
{
	setup(8, 0);
	for (unsigned i = 0; i < 8; i++) {
		put_desc(drv.desc, i, DATA(i * 64), 64, 0, 0);
		offer((uint16_t)i);
	}
	for (unsigned i = 0; i < 8; i++) {
		ck_assert_int_eq(vring_pop(&vq, &ch), 1);
		ck_assert_uint_eq(ch.head, i);
	}
	ck_assert_int_eq(vring_pop(&vq, &ch), 0);
	teardown();
}
END_TEST

START_TEST(g5_head_reused_beyond_queue_size)
{
	setup(4, 0);
	put_desc(drv.desc, 0, DATA(0), 64, 0, 0);
	for (unsigned i = 0; i < 4; i++) {
		offer(0); /* the same head, never completed */
		ck_assert_int_eq(vring_pop(&vq, &ch), 1);
		ck_assert_uint_le(vq.inflight, 4);
	}
	ck_assert_uint_eq(vq.inflight, 4);
	offer(0);
	assert_broken("more than queue size 4 chains in flight");
	ck_assert_uint_eq(vq.inflight, 4);
	teardown();
}
END_TEST

/* In flight drops with each push, so a well-behaved guest cycling heads
 * forever never trips G5. */
START_TEST(g5_inflight_follows_push)
{
	setup(4, 0);
	put_desc(drv.desc, 0, DATA(0), 64, 0, 0);
	for (unsigned i = 0; i < 100; i++) {
		offer(0);
		ck_assert_int_eq(vring_pop(&vq, &ch), 1);
		vring_push(&vq, 0, 0);
		vring_flush(&vq);
	}
	ck_assert_uint_eq(vq.inflight, 0);
	ck_assert(!vq.broken);
	teardown();
}
END_TEST

/* ---------------------------------------------------------------- G6-G8 */

START_TEST(g6_zero_len_tx)
{
	setup(8, 0);
	put_desc(drv.desc, 0, DATA(0), 64, VRING_DESC_F_NEXT, 1);
	put_desc(drv.desc, 1, DATA(64), 0, 0, 0);
	offer(0);
	assert_broken("zero-length descriptor 1 in chain from head 0");
	teardown();
}
END_TEST

START_TEST(g6_zero_len_rx)
{
	setup(8, 0);
	put_desc(drv.desc, 4, DATA(0), 0, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 5);
	put_desc(drv.desc, 5, DATA(64), 1500, VRING_DESC_F_WRITE, 0);
	offer(4);
	assert_broken("zero-length descriptor 4");
	teardown();
}
END_TEST

START_TEST(g6_zero_len_indirect)
{
	uint64_t tbl = DATA(0x8000);

	setup(8, F_INDIRECT);
	put_desc(table_at(tbl), 0, DATA(0), 0, VRING_DESC_F_WRITE, 0);
	put_desc(drv.desc, 0, tbl, 16, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("zero-length indirect descriptor 0");
	teardown();
}
END_TEST

START_TEST(g7_straddles_memory_end)
{
	setup(8, 0);
	put_desc(drv.desc, 0, GPA_BASE + MEM_SIZE - 10, 20, 0, 0);
	offer(0);
	assert_broken("outside guest memory");
	teardown();
}
END_TEST

START_TEST(g7_below_memory)
{
	setup(8, 0);
	put_desc(drv.desc, 0, GPA_BASE - 64, 32, VRING_DESC_F_WRITE, 0);
	offer(0);
	assert_broken("outside guest memory");
	teardown();
}
END_TEST

/* Two regions with a gpa hole between them (one memfd, so the driver's
 * view of region B is shifted by the hole). */
START_TEST(g7_gpa_hole)
{
	const uint64_t a_size = 0x20000, hole = 0x10000;
	struct memtable_region_desc d[2] = {
		{ GPA_BASE, a_size, 0, -1 },
		{ GPA_BASE + a_size + hole, MEM_SIZE - a_size, a_size, -1 },
	};
	struct memtable *mt = NULL;
	struct vring q2;

	setup(8, 0);
	d[0].fd = d[1].fd = g.fd;
	ck_assert_int_eq(memtable_map(d, 2, &mt, err, sizeof(err)), 0);
	ck_assert_int_eq(vring_init(&q2, mt, 8, lay.desc, lay.avail, lay.used, 0, err,
				    sizeof(err)), 0);
	/* Fine: the last bytes of A, then the first bytes of B. */
	put_desc(drv.desc, 0, GPA_BASE + a_size - 16, 16, VRING_DESC_F_NEXT, 1);
	put_desc(drv.desc, 1, GPA_BASE + a_size + hole, 16, 0, 0);
	offer(0);
	ck_assert_int_eq(vring_pop(&q2, &ch), 1);
	ck_assert_uint_eq(ch.nout, 2);
	/* Crossing from A into the hole. */
	put_desc(drv.desc, 2, GPA_BASE + a_size - 16, 32, 0, 0);
	offer(2);
	ck_assert_int_eq(vring_pop(&q2, &ch), -EIO);
	ck_assert_ptr_nonnull(strstr(q2.broken_reason, "outside guest memory"));
	memtable_free(mt);
	teardown();
}
END_TEST

START_TEST(g7_gpa_hole_inside)
{
	const uint64_t a_size = 0x20000, hole = 0x10000;
	struct memtable_region_desc d[2] = {
		{ GPA_BASE, a_size, 0, -1 },
		{ GPA_BASE + a_size + hole, MEM_SIZE - a_size, a_size, -1 },
	};
	struct memtable *mt = NULL;
	struct vring q2;

	setup(8, 0);
	d[0].fd = d[1].fd = g.fd;
	ck_assert_int_eq(memtable_map(d, 2, &mt, err, sizeof(err)), 0);
	ck_assert_int_eq(vring_init(&q2, mt, 8, lay.desc, lay.avail, lay.used, 0, err,
				    sizeof(err)), 0);
	put_desc(drv.desc, 0, GPA_BASE + a_size + 0x100, 64, VRING_DESC_F_WRITE, 0);
	offer(0);
	ck_assert_int_eq(vring_pop(&q2, &ch), -EIO);
	ck_assert_ptr_nonnull(strstr(q2.broken_reason, "outside guest memory"));
	memtable_free(mt);
	teardown();
}
END_TEST

START_TEST(g7_addr_len_wraps)
{
	setup(8, 0);
	put_desc(drv.desc, 0, UINT64_MAX - 0xff, 0x200, VRING_DESC_F_WRITE, 0);
	offer(0);
	assert_broken("wraps");
	teardown();
}
END_TEST

START_TEST(g7_last_byte_of_address_space)
{
	setup(8, 0);
	put_desc(drv.desc, 0, UINT64_MAX, 1, 0, 0);
	offer(0);
	assert_broken("outside guest memory");
	teardown();
}
END_TEST

START_TEST(g8_buffer_spans_two_regions)
{
	size_t ends[2] = { DATA_OFF + 100, MEM_SIZE };

	setup(8, 0);
	tu_guest_split(&g, ends, 2);
	ck_assert_int_eq(vring_init(&vq, g.mt, 8, lay.desc, lay.avail, lay.used, 0, err,
				    sizeof(err)), 0);
	for (unsigned i = 0; i < 200; i++)
		g.drv[DATA_OFF + 50 + i] = (uint8_t)i;
	put_desc(drv.desc, 0, DATA(50), 200, 0, 0);
	offer(0);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.nout, 2);
	ck_assert_uint_eq(ch.iov[0].iov_len, 50);
	ck_assert_uint_eq(ch.iov[1].iov_len, 150);
	ck_assert_ptr_eq(ch.iov[1].iov_base, g.mt->r[1].hva);
	for (unsigned i = 0; i < 200; i++) {
		const uint8_t *p = i < 50 ? (uint8_t *)ch.iov[0].iov_base + i
					  : (uint8_t *)ch.iov[1].iov_base + (i - 50);

		ck_assert_uint_eq(*p, (uint8_t)i);
	}
	teardown();
}
END_TEST

START_TEST(g8_single_byte_regions)
{
	size_t ends[18];

	setup(8, 0);
	for (unsigned i = 0; i < 17; i++)
		ends[i] = DATA_OFF + 1 + i; /* ring region, then 16 one-byte ones */
	ends[17] = MEM_SIZE;
	tu_guest_split(&g, ends, 18);
	ck_assert_int_eq(vring_init(&vq, g.mt, 8, lay.desc, lay.avail, lay.used, 0, err,
				    sizeof(err)), 0);
	memcpy(g.drv + DATA_OFF + 1, "0123456789abcdefXYZ", 19);
	put_desc(drv.desc, 0, DATA(1), 19, 0, 0);
	offer(0);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.nout, 17); /* 16 single bytes, then the rest */
	ck_assert_uint_eq(ch.out_len, 19);
	for (unsigned i = 0; i < 16; i++) {
		ck_assert_uint_eq(ch.iov[i].iov_len, 1);
		ck_assert_uint_eq(*(uint8_t *)ch.iov[i].iov_base, "0123456789abcdef"[i]);
		/* device view, never the driver's mapping */
		ck_assert_ptr_ne(ch.iov[i].iov_base, g.drv + DATA_OFF + 1 + i);
		ck_assert(in_device_memory(g.mt, ch.iov[i].iov_base, 1));
	}
	ck_assert_uint_eq(ch.iov[16].iov_len, 3);
	ck_assert_mem_eq(ch.iov[16].iov_base, "XYZ", 3);
	teardown();
}
END_TEST

/* More than VRING_CHAIN_MAX_IOV segments: popped, truncated, counted. */
START_TEST(g8_truncated_chain)
{
	setup(2048, 0);
	for (unsigned i = 0; i < 1100; i++)
		put_desc(drv.desc, i, DATA(i * 2), 1, i + 1 < 1100 ? VRING_DESC_F_NEXT : 0,
			 (uint16_t)(i + 1));
	offer(0);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert(ch.truncated);
	ck_assert_uint_eq(ch.nout, VRING_CHAIN_MAX_IOV);
	ck_assert_uint_eq(ch.out_len, 1100);
	ck_assert_uint_eq(ch.ndesc, 1100);
	teardown();
}
END_TEST

/* Past the truncation point the chain is still validated. */
START_TEST(g8_truncated_chain_still_validated)
{
	setup(2048, 0);
	for (unsigned i = 0; i < 1100; i++)
		put_desc(drv.desc, i, DATA(i * 2), 1, i + 1 < 1100 ? VRING_DESC_F_NEXT : 0,
			 (uint16_t)(i + 1));
	put_desc(drv.desc, 1050, GPA_BASE + MEM_SIZE, 1, VRING_DESC_F_NEXT, 1051);
	offer(0);
	assert_broken("descriptor 1050 in chain from head 0: [0x");
	teardown();
}
END_TEST

/* -------------------------------------------------------------------- G9 */

START_TEST(g9_indirect_not_negotiated)
{
	uint64_t tbl = DATA(0x8000);

	setup(8, 0);
	put_desc(table_at(tbl), 0, DATA(0), 8, 0, 0);
	put_desc(drv.desc, 0, tbl, 16, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("VIRTIO_F_INDIRECT_DESC was not negotiated");
	teardown();
}
END_TEST

START_TEST(g9_indirect_with_next)
{
	uint64_t tbl = DATA(0x8000);

	setup(8, F_INDIRECT);
	put_desc(table_at(tbl), 0, DATA(0), 8, 0, 0);
	put_desc(drv.desc, 0, tbl, 16, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT, 1);
	put_desc(drv.desc, 1, DATA(64), 8, 0, 0);
	offer(0);
	assert_broken("both INDIRECT and NEXT");
	teardown();
}
END_TEST

START_TEST(g9_nested_indirect)
{
	uint64_t tbl = DATA(0x8000), tbl2 = DATA(0x9000);

	setup(8, F_INDIRECT);
	put_desc(table_at(tbl2), 0, DATA(0), 8, 0, 0);
	put_desc(table_at(tbl), 0, tbl2, 16, VRING_DESC_F_INDIRECT, 0);
	put_desc(drv.desc, 0, tbl, 16, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("nested INDIRECT");
	teardown();
}
END_TEST

START_TEST(g9_table_len_zero)
{
	setup(8, F_INDIRECT);
	put_desc(drv.desc, 0, DATA(0x8000), 0, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("has length 0, not a positive multiple of 16");
	teardown();
}
END_TEST

START_TEST(g9_table_len_not_multiple_of_16)
{
	uint64_t tbl = DATA(0x8000);

	setup(8, F_INDIRECT);
	put_desc(table_at(tbl), 0, DATA(0), 8, 0, 0);
	put_desc(table_at(tbl), 1, DATA(0), 8, 0, 0);
	put_desc(drv.desc, 0, tbl, 24, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("has length 24, not a positive multiple of 16");
	teardown();
}
END_TEST

START_TEST(g9_table_too_many_entries)
{
	/* Memory large enough to hold the table, so only the entry limit can
	 * refuse it. */
	const size_t mem = 2 * MEM_SIZE;
	uint64_t tbl = DATA(0);

	setup_mem(8, F_INDIRECT, mem);
	put_desc(table_at(tbl), 0, DATA(0x100000), 8, 0, 0);
	put_desc(drv.desc, 0, tbl, (VRING_MAX_SIZE + 1) * 16u, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("32769 entries, more than 32768");
	teardown();
}
END_TEST

START_TEST(g9_table_split_across_regions)
{
	uint64_t tbl = DATA(0x8000);
	size_t ends[2] = { DATA_OFF + 0x8000 + 16, MEM_SIZE };

	setup(8, F_INDIRECT);
	tu_guest_split(&g, ends, 2);
	ck_assert_int_eq(vring_init(&vq, g.mt, 8, lay.desc, lay.avail, lay.used, F_INDIRECT,
				    err, sizeof(err)), 0);
	put_desc(table_at(tbl), 0, DATA(0), 8, VRING_DESC_F_NEXT, 1);
	put_desc(table_at(tbl), 1, DATA(8), 8, 0, 0);
	put_desc(drv.desc, 0, tbl, 32, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("is not inside one guest memory region");
	teardown();
}
END_TEST

START_TEST(g9_table_outside_memory)
{
	setup(8, F_INDIRECT);
	put_desc(drv.desc, 0, GPA_BASE + MEM_SIZE - 16, 32, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("is not inside one guest memory region");
	teardown();
}
END_TEST

/* ---------------------------------------------------------- G10-G12 */

START_TEST(g10_readable_after_writable)
{
	setup(8, 0);
	put_desc(drv.desc, 0, DATA(0), 64, VRING_DESC_F_NEXT, 1);
	put_desc(drv.desc, 1, DATA(64), 64, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
	put_desc(drv.desc, 2, DATA(128), 64, 0, 0);
	offer(0);
	assert_broken("readable descriptor 2 after a writable one");
	teardown();
}
END_TEST

START_TEST(g10_readable_after_writable_indirect)
{
	uint64_t tbl = DATA(0x8000);

	setup(8, F_INDIRECT);
	put_desc(table_at(tbl), 0, DATA(0), 64, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	put_desc(table_at(tbl), 1, DATA(64), 64, 0, 0);
	put_desc(drv.desc, 0, tbl, 32, VRING_DESC_F_INDIRECT, 0);
	offer(0);
	assert_broken("readable indirect descriptor 1 after a writable one");
	teardown();
}
END_TEST

/* G11 is the net layer's decision; the ring must report direction
 * faithfully so TX can DROP a writable segment and RX a readable one. */
START_TEST(g11_direction_reported)
{
	setup(8, 0);
	put_desc(drv.desc, 0, DATA(0), 64, VRING_DESC_F_WRITE, 0);
	put_desc(drv.desc, 1, DATA(64), 64, 0, 0);
	offer(0);
	offer(1);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.nout, 0);
	ck_assert_uint_eq(ch.nin, 1);
	ck_assert_uint_eq(ch.out_len, 0);
	ck_assert_uint_eq(ch.in_len, 64);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.nout, 1);
	ck_assert_uint_eq(ch.nin, 0);
	teardown();
}
END_TEST

/* Descriptors of 4 GiB - 1 each, all over the same (sparse) memory: the
 * sum exceeds 2^32 and must not wrap. */
START_TEST(g12_length_sum_above_4g)
{
	const size_t mem = (4ull << 30) + MEM_SIZE;

	setup_mem(8, 0, mem);
	put_desc(drv.desc, 0, DATA(0), UINT32_MAX, VRING_DESC_F_NEXT, 1);
	put_desc(drv.desc, 1, DATA(0), UINT32_MAX, VRING_DESC_F_NEXT, 2);
	put_desc(drv.desc, 2, DATA(0), UINT32_MAX, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 3);
	put_desc(drv.desc, 3, DATA(0), UINT32_MAX, VRING_DESC_F_WRITE, 0);
	offer(0);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.out_len, 2ull * UINT32_MAX);
	ck_assert_uint_eq(ch.in_len, 2ull * UINT32_MAX);
	ck_assert_uint_eq(ch.nout, 2);
	ck_assert_uint_eq(ch.nin, 2);
	teardown();
}
END_TEST

/* ------------------------------------------------------------------ G16 */

struct racer {
	struct vring_desc *ring; /* driver view */
	struct vring_desc *tbl;
	struct vring_desc good_ring[8], good_tbl[8]; /* valid values to restore */
	uint64_t tbl_gpa;
	unsigned long seed;
	int stop;
	unsigned long writes;
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	uint64_t s = r->seed | 1;
	static const uint32_t lens[] = { 1, 7, 64, 1500, 4096, 0, UINT32_MAX, 17, 128, 16 };

	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		uint64_t x = xorshift(&s);
		unsigned i = (unsigned)(x >> 1) % 8;
		struct vring_desc *d = (x & 1) ? &r->tbl[i] : &r->ring[i];
		const struct vring_desc *good = (x & 1) ? &r->good_tbl[i] : &r->good_ring[i];
		uint64_t v = xorshift(&s);
		uint64_t addr;

		/* Half the writes put a valid value back, so that chains keep
		 * getting through while their fields flip under the walker. */
		if (v & 0x10000) {
			memcpy(d, good, sizeof(*d));
			r->writes++;
			continue;
		}
		switch ((x >> 8) % 4) {
		case 0:
			switch (v % 6) {
			case 0: addr = GPA_BASE + MEM_SIZE - 8; break;        /* straddles */
			case 1: addr = UINT64_MAX - 0x100; break;             /* wraps */
			case 2: addr = GPA_BASE - 0x1000; break;              /* below */
			case 3: addr = r->tbl_gpa; break;
			default: addr = DATA((v >> 8) % 0x8000); break;       /* fine */
			}
			__atomic_store_n(&d->addr, htole64(addr), __ATOMIC_RELAXED);
			break;
		case 1:
			__atomic_store_n(&d->len, htole32(lens[v % 10]), __ATOMIC_RELAXED);
			break;
		case 2:
			__atomic_store_n(&d->flags, htole16((uint16_t)(v % 8)), __ATOMIC_RELAXED);
			break;
		default:
			__atomic_store_n(&d->next, htole16((uint16_t)(v % 10)), __ATOMIC_RELAXED);
			break;
		}
		r->writes++;
	}
	return NULL;
}

START_TEST(g16_racing_descriptor_writer)
{
	const unsigned iters = 50000;
	uint64_t tbl = DATA(0x9000);
	struct racer r;
	pthread_t t;
	unsigned ok = 0, broken = 0;

	setup(8, F_INDIRECT);
	for (unsigned i = 0; i < 8; i++) {
		put_desc(table_at(tbl), i, DATA(i * 128), 128, i < 7 ? VRING_DESC_F_NEXT : 0,
			 (uint16_t)(i + 1));
		if (i % 2)
			put_desc(drv.desc, i, tbl, 128, VRING_DESC_F_INDIRECT, 0);
		else
			put_desc(drv.desc, i, DATA(0x4000 + i * 256), 256, 0, 0);
	}
	r.ring = drv.desc;
	r.tbl = table_at(tbl);
	memcpy(r.good_ring, r.ring, sizeof(r.good_ring));
	memcpy(r.good_tbl, r.tbl, sizeof(r.good_tbl));
	r.tbl_gpa = tbl;
	r.seed = tu_seed("g16_racing_descriptor_writer", 0x5eed16);
	r.stop = 0;
	r.writes = 0;
	ck_assert_int_eq(pthread_create(&t, NULL, racer_main, &r), 0);

	for (unsigned it = 0; it < iters; it++) {
		int rc;

		offer((uint16_t)(it % 8));
		rc = vring_pop(&vq, &ch);
		if (rc == 1) {
			uint64_t sum = 0;

			ok++;
			ck_assert_uint_le(ch.nout + ch.nin, VRING_CHAIN_MAX_IOV);
			for (unsigned k = 0; k < ch.nout + ch.nin; k++) {
				ck_assert_msg(in_device_memory(g.mt, ch.iov[k].iov_base,
							       ch.iov[k].iov_len),
					      "iteration %u: iovec %u outside guest memory", it, k);
				sum += ch.iov[k].iov_len;
			}
			if (!ch.truncated)
				ck_assert_uint_eq(sum, ch.out_len + ch.in_len);
			vring_push(&vq, ch.head, 0);
			vring_flush(&vq);
		} else {
			ck_assert_int_eq(rc, -EIO);
			broken++;
			/* Reset the queue and resume after what is published. */
			ck_assert_int_eq(vring_init(&vq, g.mt, 8, lay.desc, lay.avail, lay.used,
						    F_INDIRECT, err, sizeof(err)), 0);
			vring_set_base(&vq, drv.avail_idx);
		}
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	fprintf(stderr, "g16: %u chains popped, %u broken, %lu racing writes\n", ok, broken,
		r.writes);
	ck_assert_uint_eq(ok + broken, iters);
	ck_assert_uint_gt(r.writes, 0);
	teardown();
}
END_TEST

/* ------------------------------------------------------------------ G17 */

START_TEST(g17_used_ring_scribbles_ignored)
{
	struct vring_used *u;

	setup(8, 0);
	u = drv.used;
	for (unsigned i = 0; i < 3; i++)
		put_desc(drv.desc, i, DATA(i * 64), 64, VRING_DESC_F_WRITE, 0);
	offer(0);
	offer(1);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	vring_push(&vq, ch.head, 11);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	vring_push(&vq, ch.head, 22);
	vring_flush(&vq);
	ck_assert_uint_eq(le16toh(u->idx), 2);

	/* The guest scribbles over everything in the used area. */
	u->idx = htole16(0x7777);
	u->flags = htole16(0xffff);
	for (unsigned i = 0; i < 8; i++) {
		u->ring[i].id = htole32(0xdeadbeef);
		u->ring[i].len = htole32(0xfeedface);
	}
	offer(2);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 2);
	vring_push(&vq, 2, 42);
	vring_flush(&vq);
	/* Written from the device's shadow, in the slot the shadow says. */
	ck_assert_uint_eq(le16toh(u->idx), 3);
	ck_assert_uint_eq(le32toh(u->ring[2].id), 2);
	ck_assert_uint_eq(le32toh(u->ring[2].len), 42);
	ck_assert_uint_eq(le32toh(u->ring[3].id), 0xdeadbeef); /* untouched */
	ck_assert_uint_eq(vq.used_idx, 3);
	ck_assert(!vq.broken);
	teardown();
}
END_TEST

/* ------------------------------------------------- used ring, notifications */

START_TEST(batched_push_one_flush)
{
	struct vring_drv_buf b = { DATA(0), 64, true };
	int cookies[3];
	uint16_t heads[3];
	void *got;
	uint32_t len;

	setup(8, 0);
	for (unsigned i = 0; i < 3; i++) {
		b.gpa = DATA(i * 64);
		ck_assert_int_ge(vring_drv_add(&drv, &b, 1, &cookies[i]), 0);
	}
	vring_drv_publish(&drv);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_int_eq(vring_pop(&vq, &ch), 1);
		heads[i] = ch.head;
	}
	for (unsigned i = 0; i < 3; i++)
		vring_push(&vq, heads[i], 10u * (i + 1));
	/* Elements are written, the index is not. */
	ck_assert_uint_eq(le16toh(drv.used->idx), 0);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_uint_eq(le32toh(drv.used->ring[i].id), heads[i]);
		ck_assert_uint_eq(le32toh(drv.used->ring[i].len), 10u * (i + 1));
	}
	ck_assert(!vring_drv_used_pending(&drv));
	vring_flush(&vq);
	ck_assert_uint_eq(le16toh(drv.used->idx), 3);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), 1);
		ck_assert_ptr_eq(got, &cookies[i]);
		ck_assert_uint_eq(len, 10u * (i + 1));
	}
	ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), 0);
	teardown();
}
END_TEST

START_TEST(set_base_wraps_indices)
{
	struct vring_drv_buf b = { DATA(0), 64, false };
	void *got;
	uint32_t len;
	int cookie;

	setup(8, 0);
	vring_set_base(&vq, 65533);
	drv.avail_idx = drv.kicked_idx = drv.last_used = 65533;
	drv.avail->idx = htole16(65533);
	drv.used->idx = htole16(65533);
	for (unsigned i = 0; i < 5; i++) {
		int head = vring_drv_add(&drv, &b, 1, &cookie);

		ck_assert_int_ge(head, 0);
		vring_drv_publish(&drv);
		ck_assert_int_eq(vring_pop(&vq, &ch), 1);
		ck_assert_uint_eq(ch.head, (unsigned)head);
		vring_push(&vq, ch.head, 5 + i);
		vring_flush(&vq);
		ck_assert_uint_eq(le32toh(drv.used->ring[(65533 + i) % 8].len), 5 + i);
		ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), 1);
		ck_assert_uint_eq(len, 5 + i);
	}
	ck_assert_uint_eq(le16toh(drv.used->idx), 2);
	ck_assert_uint_eq(vq.last_avail_idx, 2);
	teardown();
}
END_TEST

START_TEST(unpop_gives_chains_back)
{
	setup(8, 0);
	for (unsigned i = 0; i < 3; i++) {
		put_desc(drv.desc, i, DATA(i * 64), 64, VRING_DESC_F_WRITE, 0);
		offer((uint16_t)i);
	}
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(vq.inflight, 3);
	vring_unpop(&vq, 2);
	ck_assert_uint_eq(vq.inflight, 1);
	ck_assert(vring_avail_pending(&vq));
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 1);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 2);
	ck_assert_int_eq(vring_pop(&vq, &ch), 0);
	/* More than in flight is clamped: the shadows never pass the guest. */
	vring_unpop(&vq, 100);
	ck_assert_uint_eq(vq.inflight, 0);
	ck_assert_uint_eq(vq.last_avail_idx, 0);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 0);
	teardown();
}
END_TEST

static void pop_n(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(vring_pop(&vq, &ch), 1);
}

static void add_n(unsigned n)
{
	struct vring_drv_buf b = { DATA(0), 64, true };

	for (unsigned i = 0; i < n; i++)
		ck_assert_int_ge(vring_drv_add(&drv, &b, 1, NULL), 0);
	vring_drv_publish(&drv);
}

START_TEST(event_idx_interrupt_decisions)
{
	setup(8, F_EVENT_IDX);
	add_n(5);
	pop_n(5);
	drv.avail->ring[8] = htole16(2); /* used_event: interrupt when idx passes 2 */
	vring_push(&vq, 0, 1);
	vring_flush(&vq);
	ck_assert(vring_should_notify(&vq)); /* the first one always */
	ck_assert(!vring_should_notify(&vq)); /* nothing new */
	vring_push(&vq, 1, 1);
	vring_flush(&vq);                     /* idx 2: event 2 not crossed */
	ck_assert(!vring_should_notify(&vq));
	vring_push(&vq, 2, 1);
	vring_flush(&vq);                     /* idx 3: crossed */
	ck_assert(vring_should_notify(&vq));
	vring_push(&vq, 3, 1);
	vring_flush(&vq);
	ck_assert(!vring_should_notify(&vq));
	/* Driver asks for the next one. */
	while (vring_drv_used_pending(&drv)) {
		void *c;
		uint32_t l;

		ck_assert_int_eq(vring_drv_get_used(&drv, &c, &l), 1);
	}
	ck_assert(!vring_drv_cb_enable(&drv));
	vring_push(&vq, 4, 1);
	vring_flush(&vq);
	ck_assert(vring_should_notify(&vq));
	teardown();
}
END_TEST

START_TEST(no_interrupt_flag_honoured)
{
	setup(8, 0);
	add_n(3);
	pop_n(3);
	vring_push(&vq, 0, 1);
	vring_flush(&vq);
	ck_assert(vring_should_notify(&vq));
	vring_drv_cb_disable(&drv);
	vring_push(&vq, 1, 1);
	vring_flush(&vq);
	ck_assert(!vring_should_notify(&vq));
	ck_assert(vring_drv_cb_enable(&drv)); /* used entries already pending */
	vring_push(&vq, 2, 1);
	vring_flush(&vq);
	ck_assert(vring_should_notify(&vq));
	teardown();
}
END_TEST

START_TEST(event_idx_kick_decisions)
{
	setup(8, F_EVENT_IDX);
	add_n(1);
	ck_assert(vring_drv_kick_needed(&drv));
	ck_assert(!vring_drv_kick_needed(&drv)); /* nothing new */
	pop_n(1);
	add_n(1);
	ck_assert(vring_drv_kick_needed(&drv));
	pop_n(1);
	vring_notify_disable(&vq);
	add_n(1);
	ck_assert(!vring_drv_kick_needed(&drv));
	/* Work arrived while notifications were off: enable says so. */
	ck_assert(vring_notify_enable(&vq));
	pop_n(1);
	ck_assert(!vring_notify_enable(&vq));
	add_n(1);
	ck_assert(vring_drv_kick_needed(&drv));
	teardown();
}
END_TEST

START_TEST(no_notify_flag_kick_decisions)
{
	setup(8, 0);
	add_n(1);
	ck_assert(vring_drv_kick_needed(&drv));
	pop_n(1);
	vring_notify_disable(&vq);
	ck_assert(!vring_avail_pending(&vq));
	add_n(1);
	ck_assert(!vring_drv_kick_needed(&drv));
	ck_assert(vring_avail_pending(&vq));
	ck_assert(vring_notify_enable(&vq));
	pop_n(1);
	ck_assert(!vring_notify_enable(&vq));
	add_n(1);
	ck_assert(vring_drv_kick_needed(&drv));
	teardown();
}
END_TEST

/* The lost-wakeup window: the guest adds a buffer after the device decided
 * to sleep but before it re-enabled notifications; the guest saw
 * notifications off and did not kick. The re-check must find the work. */
START_TEST(notify_enable_rechecks)
{
	for (int ev = 0; ev < 2; ev++) {
		setup(8, ev ? F_EVENT_IDX : 0);
		vring_notify_disable(&vq);
		ck_assert(!vring_notify_enable(&vq)); /* empty: safe to sleep */
		vring_notify_disable(&vq);
		add_n(1);
		ck_assert(!vring_drv_kick_needed(&drv));
		ck_assert(vring_notify_enable(&vq));
		teardown();
	}
}
END_TEST

/* ------------------------------------------------------------- init, misc */

START_TEST(init_rejections)
{
	static const unsigned bad_num[] = { 0, 3, 100, 32769, 65536 };
	struct vring before;
	size_t ends[2];

	setup(8, 0);
	memset(&vq, 0xa5, sizeof(vq));
	memcpy(&before, &vq, sizeof(vq));
	for (unsigned i = 0; i < sizeof(bad_num) / sizeof(bad_num[0]); i++) {
		ck_assert_int_eq(vring_init(&vq, g.mt, bad_num[i], lay.desc, lay.avail, lay.used,
					    0, err, sizeof(err)), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "queue size"));
	}
#define REJECT(d, a, u, what)                                                             \
	do {                                                                              \
		err[0] = 0;                                                               \
		ck_assert_int_eq(vring_init(&vq, g.mt, 8, (d), (a), (u), 0, err,          \
					    sizeof(err)), -EINVAL);                       \
		ck_assert_msg(strstr(err, (what)) != NULL, "err \"%s\" lacks \"%s\"", err, \
			      (what));                                                    \
	} while (0)
	REJECT(lay.desc + 8, DATA(0x1000), DATA(0x2000), "descriptor ring at gpa 0x100008 is not 16-byte aligned");
	REJECT(lay.desc, lay.avail + 1, lay.used, "avail ring at gpa");
	REJECT(lay.desc, lay.avail, lay.used + 2, "used ring at gpa");
	REJECT(GPA_BASE - 0x1000, lay.avail, lay.used, "descriptor ring [0xff000");
	REJECT(lay.desc, GPA_BASE + MEM_SIZE - 8, lay.used, "avail ring [");
	REJECT(lay.desc, lay.avail, GPA_BASE + MEM_SIZE - 16, "used ring [");
	REJECT(lay.desc, lay.desc + 16, lay.used, "descriptor and avail rings overlap");
	REJECT(lay.desc, lay.avail, lay.desc + 32, "descriptor and used rings overlap");
	REJECT(lay.desc, lay.avail, lay.avail + 4, "avail and used rings overlap");
	ck_assert_mem_eq(&vq, &before, sizeof(vq)); /* untouched on failure */

	/* A ring split between two regions. */
	ends[0] = (size_t)(lay.avail - GPA_BASE) + 4;
	ends[1] = MEM_SIZE;
	tu_guest_split(&g, ends, 2);
	REJECT(lay.desc, lay.avail, lay.used, "avail ring [");
	/* Valid bounds: 1 and 32768. */
	ck_assert_int_eq(vring_init(&vq, g.mt, 1, DATA(0), DATA(0x100), DATA(0x200), 0, err,
				    sizeof(err)), 0);
	ck_assert_int_eq(vring_init(&vq, g.mt, VRING_MAX_SIZE, DATA(0), DATA(0x80000),
				    DATA(0xa0000), 0, err, sizeof(err)), 0);
	teardown();
#undef REJECT
}
END_TEST

START_TEST(broken_reason_first_sticks)
{
	setup(8, 0);
	vring_mark_broken(&vq, "first %d", 1);
	vring_mark_broken(&vq, "second");
	ck_assert_str_eq(vq.broken_reason, "first 1");
	put_desc(drv.desc, 0, DATA(0), 64, 0, 0);
	offer(0);
	ck_assert_int_eq(vring_pop(&vq, &ch), -EIO);
	ck_assert(!vring_avail_pending(&vq));
	ck_assert(!vring_notify_enable(&vq));
	teardown();
}
END_TEST

START_TEST(layout_is_aligned)
{
	struct vring_layout l;

	for (unsigned num = 1; num <= VRING_MAX_SIZE; num *= 2) {
		vring_layout(num, 0x1000, &l);
		ck_assert_uint_eq(l.desc, 0x1000);
		ck_assert_uint_eq(l.avail, 0x1000 + 16ull * num);
		ck_assert_uint_eq(l.used % 4, 0);
		ck_assert_uint_ge(l.used, l.avail + vring_avail_size(num));
		ck_assert_uint_eq(l.total, l.used + vring_used_size(num) - 0x1000);
	}
}
END_TEST

/* ----------------------------------------------------------- driver side */

START_TEST(drv_enospc_and_reclaim)
{
	struct vring_drv_buf b[3] = {
		{ DATA(0), 8, false }, { DATA(8), 8, false }, { DATA(16), 8, true },
	};
	void *got;
	uint32_t len;
	int h3, h1;

	setup(4, 0);
	ck_assert_int_eq(vring_drv_add(&drv, b, 0, NULL), -EINVAL);
	h3 = vring_drv_add(&drv, b, 3, (void *)1);
	ck_assert_int_ge(h3, 0);
	ck_assert_int_eq(vring_drv_add(&drv, b, 2, NULL), -ENOSPC);
	h1 = vring_drv_add(&drv, b, 1, (void *)2);
	ck_assert_int_ge(h1, 0);
	ck_assert_int_eq(vring_drv_add(&drv, b, 1, NULL), -ENOSPC);
	vring_drv_publish(&drv);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.ndesc, 3);
	vring_push(&vq, ch.head, 0);
	vring_flush(&vq);
	ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), 1);
	ck_assert_ptr_eq(got, (void *)1);
	ck_assert_uint_eq(drv.num_free, 3);
	/* The three freed descriptors form a valid new chain. */
	ck_assert_int_ge(vring_drv_add(&drv, b, 3, (void *)3), 0);
	vring_drv_publish(&drv);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1); /* h1 */
	ck_assert_uint_eq(ch.head, (unsigned)h1);
	ck_assert_int_eq(vring_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.ndesc, 3);
	ck_assert_uint_eq(ch.nout, 2);
	ck_assert_uint_eq(ch.nin, 1);
	teardown();
}
END_TEST

START_TEST(drv_bogus_used_id)
{
	struct vring_drv_buf b = { DATA(0), 8, true };
	void *got = (void *)0x1;
	uint32_t len = 77;
	int h, h2;

	setup(8, 0);
	h = vring_drv_add(&drv, &b, 1, NULL);
	h2 = vring_drv_add(&drv, &b, 1, NULL);
	ck_assert_int_ge(h2, 0);
	vring_drv_publish(&drv);
	pop_n(2);
	vring_push(&vq, (uint16_t)h, 8);
	vring_flush(&vq);
	ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), 1);

	/* A hostile device: id out of range ... */
	vq.used->ring[1].id = htole32(99);
	vq.used->idx = htole16(2);
	got = (void *)0x1;
	len = 77;
	ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), -EIO);
	ck_assert_ptr_eq(got, (void *)0x1); /* untouched */
	ck_assert_uint_eq(len, 77);
	/* ... an id that is not in flight (returned already) ... */
	vq.used->ring[1].id = htole32((uint32_t)h);
	ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), -EIO);
	/* ... and more used entries than buffers in flight (the first one
	 * itself would be fine). */
	vq.used->ring[1].id = htole32((uint32_t)h2);
	vq.used->idx = htole16(5);
	ck_assert_int_eq(vring_drv_get_used(&drv, &got, &len), -EIO);
	ck_assert_uint_eq(drv.num_free, 7);
	teardown();
}
END_TEST

START_TEST(drv_init_rejects)
{
	uint8_t buf[1024];
	struct vring_drv d;

	ck_assert_int_eq(vring_drv_init(&d, 0, buf, buf, buf, false), -EINVAL);
	ck_assert_int_eq(vring_drv_init(&d, 6, buf, buf, buf, false), -EINVAL);
	ck_assert_int_eq(vring_drv_init(&d, 65536, buf, buf, buf, false), -EINVAL);
	ck_assert_int_eq(vring_drv_init(&d, 4, buf, buf + 64, buf + 128, false), 0);
	vring_drv_fini(&d);
}
END_TEST

static Suite *vring_suite(void)
{
	Suite *s = suite_create("vring");
	TCase *tc = tcase_create("device");
	TCase *td = tcase_create("driver");

	tcase_add_test(tc, direct_chain_round_trip);
	tcase_add_test(tc, indirect_chain);
	tcase_add_test(tc, direct_then_indirect);
	tcase_add_test(tc, g1_desc_loop);
	tcase_add_test(tc, g1_self_loop);
	tcase_add_test(tc, g1_self_loop_len0);
	tcase_add_test(tc, g1_loop_in_indirect_table);
	tcase_add_test(tc, g2_next_beyond_queue);
	tcase_add_test(tc, g2_next_beyond_indirect_table);
	tcase_add_test(tc, g3_head_beyond_queue);
	tcase_add_test(tc, g4_avail_idx_jump);
	tcase_add_test(tc, g4_avail_idx_decrement);
	tcase_add_test(tc, g4_full_queue_is_fine);
	tcase_add_test(tc, g5_head_reused_beyond_queue_size);
	tcase_add_test(tc, g5_inflight_follows_push);
	tcase_add_test(tc, g6_zero_len_tx);
	tcase_add_test(tc, g6_zero_len_rx);
	tcase_add_test(tc, g6_zero_len_indirect);
	tcase_add_test(tc, g7_straddles_memory_end);
	tcase_add_test(tc, g7_below_memory);
	tcase_add_test(tc, g7_gpa_hole);
	tcase_add_test(tc, g7_gpa_hole_inside);
	tcase_add_test(tc, g7_addr_len_wraps);
	tcase_add_test(tc, g7_last_byte_of_address_space);
	tcase_add_test(tc, g8_buffer_spans_two_regions);
	tcase_add_test(tc, g8_single_byte_regions);
	tcase_add_test(tc, g8_truncated_chain);
	tcase_add_test(tc, g8_truncated_chain_still_validated);
	tcase_add_test(tc, g9_indirect_not_negotiated);
	tcase_add_test(tc, g9_indirect_with_next);
	tcase_add_test(tc, g9_nested_indirect);
	tcase_add_test(tc, g9_table_len_zero);
	tcase_add_test(tc, g9_table_len_not_multiple_of_16);
	tcase_add_test(tc, g9_table_too_many_entries);
	tcase_add_test(tc, g9_table_split_across_regions);
	tcase_add_test(tc, g9_table_outside_memory);
	tcase_add_test(tc, g10_readable_after_writable);
	tcase_add_test(tc, g10_readable_after_writable_indirect);
	tcase_add_test(tc, g11_direction_reported);
	tcase_add_test(tc, g12_length_sum_above_4g);
	tcase_add_test(tc, g16_racing_descriptor_writer);
	tcase_add_test(tc, g17_used_ring_scribbles_ignored);
	tcase_add_test(tc, batched_push_one_flush);
	tcase_add_test(tc, set_base_wraps_indices);
	tcase_add_test(tc, unpop_gives_chains_back);
	tcase_add_test(tc, event_idx_interrupt_decisions);
	tcase_add_test(tc, no_interrupt_flag_honoured);
	tcase_add_test(tc, event_idx_kick_decisions);
	tcase_add_test(tc, no_notify_flag_kick_decisions);
	tcase_add_test(tc, notify_enable_rechecks);
	tcase_add_test(tc, init_rejections);
	tcase_add_test(tc, broken_reason_first_sticks);
	tcase_add_test(tc, layout_is_aligned);
	suite_add_tcase(s, tc);

	tcase_add_test(td, drv_enospc_and_reclaim);
	tcase_add_test(td, drv_bogus_used_id);
	tcase_add_test(td, drv_init_rejects);
	suite_add_tcase(s, td);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(vring_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
