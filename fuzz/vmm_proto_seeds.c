/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_proto_seeds: writes the seeds of fuzz/corpus/vmm_proto/ (the input
 * format is in fuzz/vmm_proto.c): each file is a sequence of datagram
 * records, every datagram a real frame (u32 big-endian length, then a
 * vnic.vmm.VmmMessage packed by the generated protobuf-c code), so that
 * the fuzzer starts from requests vnicd accepts and mutates from there.
 * One file per request type, a few rejected cases, and whole sessions.
 *
 * Not built by make (it is a tool, run once when proto/vmm.proto
 * changes). From the worktree root, with a configured build/plain:
 *   make -C build/plain proto/vmm.pb-c.c
 *   cc -Ibuild/plain/proto -o /tmp/vmm_proto_seeds fuzz/vmm_proto_seeds.c \
 *      build/plain/proto/vmm.pb-c.c -lprotobuf-c
 *   /tmp/vmm_proto_seeds fuzz/corpus/vmm_proto
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm.pb-c.h"

#define VERSION 1 /* WIRE_VMM_VERSION */
#define VERSION_1_BIT (1ull << 32)

static uint8_t out[1 << 16];
static size_t outlen;
static uint64_t next_id;
static unsigned next_flags; /* ORed into the next record's fdkind, then cleared:
                            * flags, or a wrong kind for a helper that has no
                            * kind argument */

#define PIPELINED 0x80u /* fdkind flags of fuzz/vmm_proto.c: REC_PIPELINED */
#define STARVED 0x40u   /* REC_STARVED (| spare fds, 0..63) */
/* The next record is sent with these flags. */
#define WITH(f) (next_flags = (f))
static int next_nfds = -1; /* >= 0: the next record's nfds, whatever the helper says */
#define NFDS(n) (next_nfds = (n))

/* One record: nfds, fdkind, u16 le length, then the frame of @req. */
static void rec(unsigned nfds, unsigned kind, Vnic__Vmm__Request *req)
{
	Vnic__Vmm__VmmMessage m;
	size_t len;
	uint32_t be;

	vnic__vmm__vmm_message__init(&m);
	m.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REQUEST;
	m.request = req;
	req->request_id = ++next_id;
	len = vnic__vmm__vmm_message__get_packed_size(&m);
	if (outlen + 8 + len > sizeof(out))
		abort();
	out[outlen++] = (uint8_t)(next_nfds >= 0 ? (unsigned)next_nfds : nfds);
	out[outlen++] = (uint8_t)(kind | next_flags);
	next_flags = 0;
	next_nfds = -1;
	out[outlen++] = (uint8_t)((len + 4) & 0xff);
	out[outlen++] = (uint8_t)((len + 4) >> 8);
	be = htonl((uint32_t)len);
	memcpy(out + outlen, &be, 4);
	vnic__vmm__vmm_message__pack(&m, out + outlen + 4);
	outlen += 4 + len;
}

/* A raw record, for frames no encoder makes. */
static void raw(unsigned nfds, unsigned kind, const void *p, size_t len)
{
	out[outlen++] = (uint8_t)nfds;
	out[outlen++] = (uint8_t)kind;
	out[outlen++] = (uint8_t)(len & 0xff);
	out[outlen++] = (uint8_t)(len >> 8);
	memcpy(out + outlen, p, len);
	outlen += len;
}

static void save(const char *dir, const char *name)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(out, 1, outlen, f) != outlen || fclose(f)) {
		perror(path);
		exit(1);
	}
	outlen = 0;
	next_id = 0;
}

static void hello(unsigned min, unsigned max)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__Hello h;

	vnic__vmm__request__init(&r);
	vnic__vmm__hello__init(&h);
	h.min_version = min;
	h.max_version = max;
	h.client = "fuzz seed";
	r.body_case = VNIC__VMM__REQUEST__BODY_HELLO;
	r.hello = &h;
	rec(0, 0, &r);
}

enum be { BE_SOCKET, BE_TAP, BE_TAP_FD };

/* AddNic as libvnic sends it: one 64 KiB region at gpa 0, rx0 and tx0
 * of 256 entries inside it. fds: region, kick/call x2, backend. @mut, when
 * set, changes the request before it is packed (the rejected cases). */
static void add_nic_mut(const char *id, enum be be, unsigned kind,
			void (*mut)(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p))
{
	static uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
	Vnic__Vmm__Request r;
	Vnic__Vmm__AddNic a;
	Vnic__Vmm__MemRegion reg, *regp = &reg;
	Vnic__Vmm__Queue q[2], *qp[2] = { &q[0], &q[1] };
	Vnic__Vmm__Backend b;
	Vnic__Vmm__TapBackend tap;
	Vnic__Vmm__SocketBackend sock;
	Vnic__Vmm__TapFdBackend tapfd;
	Vnic__Vmm__Policy pol;

	vnic__vmm__request__init(&r);
	vnic__vmm__add_nic__init(&a);
	vnic__vmm__policy__init(&pol);
	vnic__vmm__mem_region__init(&reg);
	vnic__vmm__backend__init(&b);
	r.version = VERSION;
	a.id = (char *)id;
	a.mac.data = mac;
	a.mac.len = 6;
	a.mtu = 1500;
	a.features_offered = a.features_acked = VERSION_1_BIT;
	reg.gpa = 0;
	reg.size = 65536;
	a.n_regions = 1;
	a.regions = &regp;
	for (unsigned j = 0; j < 2; j++) {
		vnic__vmm__queue__init(&q[j]);
		q[j].index = j;
		q[j].size = 256;
		q[j].desc_gpa = 0x4000 * j;
		q[j].avail_gpa = 0x4000 * j + 0x1000;
		q[j].used_gpa = 0x4000 * j + 0x2000;
	}
	a.n_queues = 2;
	a.queues = qp;
	if (be == BE_TAP) {
		vnic__vmm__tap_backend__init(&tap);
		tap.name = "vnicfz0";
		b.kind_case = VNIC__VMM__BACKEND__KIND_TAP;
		b.tap = &tap;
	} else if (be == BE_TAP_FD) {
		vnic__vmm__tap_fd_backend__init(&tapfd);
		b.kind_case = VNIC__VMM__BACKEND__KIND_TAP_FD;
		b.tap_fd = &tapfd;
	} else {
		vnic__vmm__socket_backend__init(&sock);
		b.kind_case = VNIC__VMM__BACKEND__KIND_SOCKET;
		b.socket = &sock;
	}
	a.backend = &b;
	if (mut) {
		a.policy = &pol;
		mut(&a, &pol);
	}
	r.body_case = VNIC__VMM__REQUEST__BODY_ADD_NIC;
	r.add_nic = &a;
	/* fds: regions, kick/call per queue, a socket or tap fd per pair. */
	rec(a.n_queues > 2 ? (unsigned)(a.n_regions + 2 * a.n_queues +
					(be == BE_TAP ? 0 : a.n_queues / 2))
			   : be == BE_TAP ? 5u : 6u,
	    kind, &r);
}

static void add_nic(const char *id, enum be be, unsigned kind)
{
	add_nic_mut(id, be, kind, NULL);
}

/* AddNic rejections, one field each (validate_nic_spec's order). */
static void m_id_long(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->id = "a-nic-id-far-longer-than-the-sixty-four-bytes-that-vnicd-allows-for-one";
}
static void m_mac_short(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->mac.len = 5;
}
static void m_mac_multicast(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	static uint8_t mc[6] = { 0x01, 0x00, 0x5e, 0, 0, 1 };

	(void)p;
	a->mac.data = mc;
}
static void m_mtu(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->mtu = 20;
}
static void m_features(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->features_acked = VERSION_1_BIT | (1ull << 34); /* RING_PACKED, not offered */
}
static void m_no_version1(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->features_offered = a->features_acked = 0;
}
static void m_queue_index(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->queues[1]->index = 0x10001;
}
static void m_queue_size(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->queues[0]->size = 3;
}
static void m_ring_outside(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->queues[1]->used_gpa = 65536 - 8;
}
static void m_avail_idx(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->queues[0]->avail_idx = 0x10000;
}
static void m_region_size(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->regions[0]->size = UINT64_MAX - 4095;
}
/* Several queue pairs (issue 15): n queues, rings of queue j at 0x4000 j
 * (all inside the 64 KiB region); @dup: queue 3 says it is queue 2. */
static void queues_n(Vnic__Vmm__AddNic *a, unsigned n, bool dup)
{
	static Vnic__Vmm__Queue q[4];
	static Vnic__Vmm__Queue *qp[4];

	for (unsigned j = 0; j < n && j < 4; j++) {
		vnic__vmm__queue__init(&q[j]);
		q[j].index = dup && j == 3 ? 2 : j;
		q[j].size = 256;
		q[j].desc_gpa = 0x4000 * j;
		q[j].avail_gpa = 0x4000 * j + 0x1000;
		q[j].used_gpa = 0x4000 * j + 0x2000;
		qp[j] = &q[j];
	}
	a->n_queues = n < 4 ? n : 4;
	a->queues = qp;
}
static void m_id_empty(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->id = "";
}
static void m_tso_no_csum(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p; /* HOST_TSO4 (11) without CSUM (0); GUEST_TSO4 (7) without GUEST_CSUM (1) */
	a->features_offered |= (1ull << 11) | (1ull << 7) | 1ull;
	a->features_acked = VERSION_1_BIT | (1ull << 11);
}
static void m_guest_tso_no_csum(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->features_offered |= (1ull << 7) | 1ull;
	a->features_acked = VERSION_1_BIT | (1ull << 7);
}
static void m_ring_wraps(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->queues[0]->desc_gpa = UINT64_MAX - 100;
}
static void m_tap_name_empty(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->backend->tap->name = "";
}
static void m_tap_name_long(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->backend->tap->name = "vnicfz0123456789ab";
}
static void m_tap_netns(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->backend->tap->netns = "vnicfz-nothere";
}
static void m_tap_netns_bad(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->backend->tap->netns = "../etc";
}
static void m_tap_name_longer(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p; /* longer than the request's copy (31 bytes) */
	a->backend->tap->name = "vnicfz-a-tap-name-of-forty-bytes-0123456";
}
static void m_tap_netns_long(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	a->backend->tap->netns =
		"vnicfz-a-netns-name-longer-than-sixty-three-bytes-0123456789abcdef";
}
static void m_two_pairs(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	queues_n(a, 4, false);
}
static void m_two_pairs_dup(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	queues_n(a, 4, true);
}
static void m_two_pairs_index_high(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	queues_n(a, 4, false);
	a->queues[3]->index = 9;
}
static void m_two_pairs_unnamed(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	queues_n(a, 4, false);
	a->backend->tap->name = "";
}
static void m_nine_pairs(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	static Vnic__Vmm__Queue q[18];
	static Vnic__Vmm__Queue *qp[18];

	(void)p;
	for (unsigned j = 0; j < 18; j++) {
		vnic__vmm__queue__init(&q[j]);
		q[j].index = j;
		q[j].size = 16;
		q[j].desc_gpa = 0x800 * j;
		q[j].avail_gpa = 0x800 * j + 0x100;
		q[j].used_gpa = 0x800 * j + 0x200;
		qp[j] = &q[j];
	}
	a->n_queues = 18;
	a->queues = qp;
}
static void m_three_queues(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)p;
	queues_n(a, 3, false);
}
static void m_policy_mode(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)a;
	p->mode = 9;
}
static void m_policy_timer(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)a;
	p->mode = VNIC__VMM__MITIGATION__MITIGATION_TIMER;
	p->timer_us = 100001; /* one past NET_TIMER_US_MAX: refused */
}
static void m_policy_budget(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p)
{
	(void)a;
	p->budget_packets = 1u << 30;
}

/* SetPolicy with every field as given. */
static void set_policy_p(const char *id, const Vnic__Vmm__Policy *pol)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__SetPolicy sp;
	Vnic__Vmm__Policy p = *pol;

	vnic__vmm__request__init(&r);
	vnic__vmm__set_policy__init(&sp);
	r.version = VERSION;
	sp.id = (char *)id;
	sp.policy = &p;
	r.body_case = VNIC__VMM__REQUEST__BODY_SET_POLICY;
	r.set_policy = &sp;
	rec(0, 0, &r);
}

/* Each of validate_policy's refusals (the timer's lower bound, 1 us, is
 * reachable only as 0, which means "vnicd's default"), then a good one;
 * the interrupt coalescing bounds, then a good coalescing policy. */
static void bad_policies(const char *id)
{
	static const struct {
		unsigned mode, timer_us, poll_us, latency_us, safety_pct, max_window, pkts, bytes;
		unsigned irq_us, irq_frames; /* both directions */
	} bad[] = {
		{ 9, 0, 0, 0, 0, 0, 0, 0 },         { 1, 100001, 0, 0, 0, 0, 0, 0 },
		{ 1, 100000000, 0, 0, 0, 0, 0, 0 }, { 4, 0, 100000000, 0, 0, 0, 0, 0 },
		{ 3, 0, 0, 1, 0, 0, 0, 0 },         { 3, 0, 0, 100000000, 0, 0, 0, 0 },
		{ 3, 0, 0, 0, 1, 0, 0, 0 },         { 3, 0, 0, 0, 250, 0, 0, 0 },
		{ 3, 0, 0, 0, 0, 1u << 30, 0, 0 },  { 2, 0, 0, 0, 0, 0, 1u << 30, 0 },
		{ 2, 0, 0, 0, 0, 0, 0, 1u << 31 },  { 1, 200, 0, 0, 0, 0, 64, 65536 },
		{ 2, 0, 0, 0, 0, 0, 0, 0, 10001, 0 }, { 2, 0, 0, 0, 0, 0, 0, 0, 0, 32769 },
		{ 2, 0, 0, 0, 0, 0, 0, 0, 200, 64 },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		Vnic__Vmm__Policy p;

		vnic__vmm__policy__init(&p);
		p.mode = bad[i].mode;
		p.timer_us = bad[i].timer_us;
		p.poll_us = bad[i].poll_us;
		p.latency_us = bad[i].latency_us;
		p.safety_pct = bad[i].safety_pct;
		p.max_window = bad[i].max_window;
		p.budget_packets = bad[i].pkts;
		p.budget_bytes = bad[i].bytes;
		p.rx_irq_us = p.tx_irq_us = bad[i].irq_us;
		p.rx_irq_frames = p.tx_irq_frames = bad[i].irq_frames;
		set_policy_p(id, &p);
	}
}

static void remove_nic(const char *id)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__RemoveNic rm;

	vnic__vmm__request__init(&r);
	vnic__vmm__remove_nic__init(&rm);
	r.version = VERSION;
	rm.id = (char *)id;
	rm.deadline_ms = 1000;
	r.body_case = VNIC__VMM__REQUEST__BODY_REMOVE_NIC;
	r.remove_nic = &rm;
	rec(0, 0, &r);
}

static void get_status(const char *id)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__GetStatus g;

	vnic__vmm__request__init(&r);
	vnic__vmm__get_status__init(&g);
	r.version = VERSION;
	g.id = (char *)id;
	r.body_case = VNIC__VMM__REQUEST__BODY_GET_STATUS;
	r.get_status = &g;
	rec(0, 0, &r);
}

static void get_status_after(const char *id, const char *after)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__GetStatus g;

	vnic__vmm__request__init(&r);
	vnic__vmm__get_status__init(&g);
	r.version = VERSION;
	g.id = (char *)id;
	g.start_after = (char *)after;
	r.body_case = VNIC__VMM__REQUEST__BODY_GET_STATUS;
	r.get_status = &g;
	rec(0, 0, &r);
}

/* A RemoveNic whose version is not the one Hello negotiated. */
static void remove_nic_version(const char *id, unsigned version)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__RemoveNic rm;

	vnic__vmm__request__init(&r);
	vnic__vmm__remove_nic__init(&rm);
	r.version = version;
	rm.id = (char *)id;
	r.body_case = VNIC__VMM__REQUEST__BODY_REMOVE_NIC;
	r.remove_nic = &rm;
	rec(0, 0, &r);
}

/* A Request with no body: a body this supervisor does not know. */
static void no_body(void)
{
	Vnic__Vmm__Request r;

	vnic__vmm__request__init(&r);
	r.version = VERSION;
	rec(0, 0, &r);
}

/* A Reply, which only vnicd may send. */
static void reply(void)
{
	Vnic__Vmm__VmmMessage m;
	Vnic__Vmm__Reply rep;
	uint8_t buf[64];
	size_t len;
	uint32_t be;

	vnic__vmm__vmm_message__init(&m);
	vnic__vmm__reply__init(&rep);
	rep.request_id = 7;
	m.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REPLY;
	m.reply = &rep;
	len = vnic__vmm__vmm_message__pack(&m, buf + 4);
	be = htonl((uint32_t)len);
	memcpy(buf, &be, 4);
	raw(0, 0, buf, len + 4);
}

static void set_policy(const char *id, Vnic__Vmm__Mitigation mode)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__SetPolicy sp;
	Vnic__Vmm__Policy p;

	vnic__vmm__request__init(&r);
	vnic__vmm__set_policy__init(&sp);
	vnic__vmm__policy__init(&p);
	r.version = VERSION;
	p.mode = mode;
	p.timer_us = mode == VNIC__VMM__MITIGATION__MITIGATION_TIMER ? 150 : 0;
	p.latency_us = mode == VNIC__VMM__MITIGATION__MITIGATION_ADAPTIVE ? 100 : 0;
	sp.id = (char *)id;
	sp.policy = &p;
	r.body_case = VNIC__VMM__REQUEST__BODY_SET_POLICY;
	r.set_policy = &sp;
	rec(0, 0, &r);
}

static void set_dirty_log_full(const char *id, uint64_t size, uint64_t offset, unsigned nfds)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__SetDirtyLog d;

	vnic__vmm__request__init(&r);
	vnic__vmm__set_dirty_log__init(&d);
	r.version = VERSION;
	d.id = (char *)id;
	d.size = size;
	d.offset = offset;
	r.body_case = VNIC__VMM__REQUEST__BODY_SET_DIRTY_LOG;
	r.set_dirty_log = &d;
	rec(nfds, 0, &r);
}

static void set_dirty_log(const char *id, uint64_t size)
{
	set_dirty_log_full(id, size, 0, size ? 1 : 0);
}

static void announce(const char *id)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__Announce a;

	vnic__vmm__request__init(&r);
	vnic__vmm__announce__init(&a);
	r.version = VERSION;
	a.id = (char *)id;
	r.body_case = VNIC__VMM__REQUEST__BODY_ANNOUNCE;
	r.announce = &a;
	rec(0, 0, &r);
}

static void set_log_level(const char *level)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__SetLogLevel l;

	vnic__vmm__request__init(&r);
	vnic__vmm__set_log_level__init(&l);
	r.version = VERSION;
	l.level = (char *)level;
	r.body_case = VNIC__VMM__REQUEST__BODY_SET_LOG_LEVEL;
	r.set_log_level = &l;
	rec(0, 0, &r);
}

static void add_vhost_user_full(const char *id, const char *path, int server, const char *tapname,
				const char *netns, unsigned maclen, unsigned mtu)
{
	static uint8_t mac[6] = { 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef };
	Vnic__Vmm__Request r;
	Vnic__Vmm__AddVhostUser v;
	Vnic__Vmm__TapBackend tap;

	vnic__vmm__request__init(&r);
	vnic__vmm__add_vhost_user__init(&v);
	vnic__vmm__tap_backend__init(&tap);
	r.version = VERSION;
	tap.name = (char *)tapname;
	tap.netns = (char *)netns;
	v.id = (char *)id;
	v.path = (char *)path;
	v.server = server;
	v.tap = &tap;
	v.mac.data = mac;
	v.mac.len = maclen;
	v.mtu = mtu;
	r.body_case = VNIC__VMM__REQUEST__BODY_ADD_VHOST_USER;
	r.add_vhost_user = &v;
	rec(0, 0, &r);
}

static void add_vhost_user(const char *id, const char *path, int server)
{
	add_vhost_user_full(id, path, server, "vnicfzvu0", "", 0, 0);
}

static void remove_endpoint(const char *id)
{
	Vnic__Vmm__Request r;
	Vnic__Vmm__RemoveEndpoint e;

	vnic__vmm__request__init(&r);
	vnic__vmm__remove_endpoint__init(&e);
	r.version = VERSION;
	e.id = (char *)id;
	r.body_case = VNIC__VMM__REQUEST__BODY_REMOVE_ENDPOINT;
	r.remove_endpoint = &e;
	rec(0, 0, &r);
}

int main(int argc, char **argv)
{
	static const uint8_t short_prefix[] = { 0, 0, 0 };
	static const uint8_t long_prefix[] = { 0, 0, 1, 0, 0x0a, 0x00 };
	const char *d = argc > 1 ? argv[1] : ".";

	hello(1, 1), save(d, "hello");
	hello(2, 9), save(d, "hello-no-common-version");
	add_nic("n0", BE_SOCKET, 0), save(d, "add-nic-before-hello");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), save(d, "add-nic-socket");
	hello(1, 1), add_nic("n0", BE_TAP, 0), save(d, "add-nic-tap");
	hello(1, 1), add_nic("n0", BE_TAP_FD, 0), save(d, "add-nic-tap-fd");
	hello(1, 1), add_nic("n0", BE_SOCKET, 3), save(d, "add-nic-unsealed-memfds");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), remove_nic("n0"), save(d, "remove-nic");
	hello(1, 1), remove_nic("nothere"), save(d, "remove-nic-unknown");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0),
		set_policy("n0", VNIC__VMM__MITIGATION__MITIGATION_ADAPTIVE),
		save(d, "set-policy-adaptive");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), get_status(""), get_status("n0"),
		save(d, "get-status");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), set_dirty_log("n0", 4096),
		set_dirty_log("n0", 0), save(d, "set-dirty-log-on-off");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), add_nic("n1", BE_TAP, 0), announce("n0"),
		announce("n1"), announce("nothere"), save(d, "announce");
	hello(1, 1), set_log_level("debug"), set_log_level("loud"), save(d, "set-log-level");
	hello(1, 1), add_vhost_user("vu0", "/run/vnicfz-vu0.sock", 1), get_status(""),
		remove_endpoint("vu0"), save(d, "add-vhost-user-server");
	hello(1, 1), add_vhost_user("vu0", "/run/vnicfz-vu0.sock", 0), remove_endpoint("vu0"),
		save(d, "add-vhost-user-client");
	raw(0, 0, short_prefix, sizeof(short_prefix)), hello(1, 1), save(d, "frame-short-prefix");
	raw(0, 0, long_prefix, sizeof(long_prefix)), hello(1, 1), save(d, "frame-prefix-too-long");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), add_nic("n1", BE_TAP, 0),
		set_policy("n1", VNIC__VMM__MITIGATION__MITIGATION_TIMER), get_status(""),
		set_dirty_log("n0", 8192), remove_nic("n1"), get_status(""),
		save(d, "session-two-nics");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), add_nic("n0", BE_SOCKET, 0),
		save(d, "session-add-nic-twice");
	hello(1, 1), hello(1, 1), save(d, "hello-twice");
	hello(1, 1), get_status_after("", "a"), get_status_after("", "n0"),
		save(d, "get-status-paged");
	hello(1, 1), remove_nic_version("n0", 2), save(d, "remove-nic-wrong-version");
	hello(1, 1), no_body(), reply(), save(d, "request-without-body-and-a-reply");
	/* Rejections, one field each (issue 18: fuzz_cov.sh showed them
	 * unreached). */
	{
		static const struct {
			const char *name;
			void (*mut)(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p);
		} m[] = {
			{ "add-nic-id-too-long", m_id_long },
			{ "add-nic-mac-short", m_mac_short },
			{ "add-nic-mac-multicast", m_mac_multicast },
			{ "add-nic-mtu-20", m_mtu },
			{ "add-nic-feature-not-offered", m_features },
			{ "add-nic-no-version-1", m_no_version1 },
			{ "add-nic-queue-index-0x10001", m_queue_index },
			{ "add-nic-queue-size-3", m_queue_size },
			{ "add-nic-ring-outside-memory", m_ring_outside },
			{ "add-nic-avail-idx-0x10000", m_avail_idx },
			{ "add-nic-region-size-overflows", m_region_size },
			{ "add-nic-policy-mode-9", m_policy_mode },
			{ "add-nic-policy-timer-too-long", m_policy_timer },
			{ "add-nic-policy-budget", m_policy_budget },
		};

		for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
			hello(1, 1), add_nic_mut("n0", BE_SOCKET, 0, m[i].mut), save(d, m[i].name);
	}
	{
		static const struct {
			const char *name;
			enum be be;
			void (*mut)(Vnic__Vmm__AddNic *a, Vnic__Vmm__Policy *p);
		} m[] = {
			{ "add-nic-id-empty", BE_SOCKET, m_id_empty },
			{ "add-nic-tso-without-csum", BE_SOCKET, m_tso_no_csum },
			{ "add-nic-guest-tso-without-csum", BE_SOCKET, m_guest_tso_no_csum },
			{ "add-nic-ring-wraps", BE_SOCKET, m_ring_wraps },
			{ "add-nic-tap-name-empty", BE_TAP, m_tap_name_empty },
			{ "add-nic-tap-name-long", BE_TAP, m_tap_name_long },
			{ "add-nic-tap-netns-absent", BE_TAP, m_tap_netns },
			{ "add-nic-tap-netns-bad", BE_TAP, m_tap_netns_bad },
			{ "two-pairs-queue-index-9", BE_SOCKET, m_two_pairs_index_high },
			{ "nine-pairs", BE_SOCKET, m_nine_pairs },
			{ "add-nic-tap-name-40", BE_TAP, m_tap_name_longer },
			{ "add-nic-tap-netns-66", BE_TAP, m_tap_netns_long },
			{ "two-pairs-tap-unnamed", BE_TAP, m_two_pairs_unnamed },
		};

		for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
			hello(1, 1), add_nic_mut("n0", m[i].be, 0, m[i].mut), save(d, m[i].name);
	}
	/* One wrong fd among natural ones (fdkind 32..63 of fuzz/vmm_proto.c):
	 * a wrong backend (sel 0), kick (sel 1) or call (sel 2) of each kind. */
	for (unsigned sel = 0; sel < 3; sel++) {
		char name[64];

		hello(1, 1);
		for (unsigned k = 0; k < 8; k++)
			add_nic("n0", BE_SOCKET, 32 + 8 * sel + k);
		add_nic("n0", BE_TAP_FD, 32 + 8 * sel + 7), add_nic("n0", BE_TAP_FD, 32 + 8 * sel + 3);
		snprintf(name, sizeof(name), "add-nic-one-wrong-fd-%s",
			 sel == 0 ? "backend" : sel == 1 ? "kick" : "call");
		save(d, name);
	}
	/* Names longer than AddVhostUser's copies; a log too small for the
	 * memory; an endpoint removed twice at once. */
	hello(1, 1),
		add_vhost_user_full("vnicfz-an-endpoint-id-far-longer-than-sixty-four-bytes-0123456789",
				    "/run/vnicfz-vu0.sock", 1, "vnicfzvu0", "", 0, 0),
		add_vhost_user_full("vu0", "/run/vnicfz-a-socket-path-longer-than-the-107-bytes-of-"
				    "sun_path-0123456789abcdef0123456789abcdef0123456789.sock",
				    1, "vnicfzvu0", "", 0, 0),
		add_vhost_user_full("vu0", "/run/vnicfz-vu0.sock", 1, "vnicfz-tap-name-too-long", "",
				    0, 0),
		add_vhost_user_full("vu0", "/run/vnicfz-vu0.sock", 1, "vnicfzvu0",
				    "vnicfz-a-netns-name-longer-than-sixty-three-bytes-0123456789abcdef",
				    0, 0),
		save(d, "add-vhost-user-names-too-long");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), set_dirty_log("n0", 1), set_dirty_log("n0", 2),
		save(d, "set-dirty-log-too-small");
	hello(1, 1), add_vhost_user("vu0", "/run/vnicfz-vu0.sock", 1), WITH(PIPELINED),
		remove_endpoint("vu0"), remove_endpoint("vu0"), save(d, "remove-endpoint-twice");
	/* Frames protobuf-c would take but vnicd's walk refuses, and a
	 * message of the wrong direction. */
	{
		static const uint8_t bad[][8] = {
			{ 0, 0, 0, 1, 0x0b },             /* a group (wire type 3) */
			{ 0, 0, 0, 1, 0x80 },             /* a key that never ends */
			{ 0, 0, 0, 3, 0x0d, 0x01, 0x02 }, /* fixed32 cut short */
			{ 0, 0, 0, 3, 0x0a, 0x05, 0x00 }, /* a length past the end */
			{ 0, 0, 0, 2, 0x1a, 0x00 },       /* an Event from the VMM */
			{ 0, 0, 0, 2, 0x12, 0x00 },       /* a Reply from the VMM */
		};
		static const size_t len[] = { 5, 5, 7, 7, 6, 6 };

		hello(1, 1);
		for (size_t i = 0; i < sizeof(len) / sizeof(len[0]); i++)
			raw(0, 0, bad[i], len[i]);
		get_status(""), save(d, "frames-malformed");
		hello(1, 1);
		for (unsigned i = 0; i < 33; i++) /* SUP_CONN_MAX_ERRORS is 32 */
			raw(0, 0, bad[1], len[1]);
		get_status(""), save(d, "frames-bad-in-a-row");
	}
	hello(1, 1), NFDS(1), get_status(""), NFDS(2), remove_nic("n0"), NFDS(1), hello(1, 1),
		save(d, "fds-where-none-belong");
	/* (No seed fills a StatusReply's page, SUP_STATUS_PAGE NICs: 33 NICs
	 * take about 3 s in the sanitized target, over the 1 s an input may
	 * take.) */
	/* A single NIC's log at the fd limit: its dup fails. */
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), WITH(STARVED | 0), set_dirty_log("n0", 4096),
		WITH(STARVED | 1), set_dirty_log("n0", 4096), save(d, "set-dirty-log-starved");
	/* A dirty log of every wrong kind (fdkind 1..10). */
	hello(1, 1), add_nic("n0", BE_SOCKET, 0);
	for (unsigned k = 1; k <= 10; k++)
		WITH(k), set_dirty_log_full("n0", 4096, 0, 1);
	save(d, "set-dirty-log-wrong-fds");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), bad_policies("n0"), save(d, "set-policy-refused");
	/* Two queue pairs (issue 15): a worker each, one answer per request. */
	hello(1, 1), add_nic_mut("mq", BE_SOCKET, 0, m_two_pairs), get_status(""),
		set_policy("mq", VNIC__VMM__MITIGATION__MITIGATION_BH), set_dirty_log("mq", 4096),
		remove_nic("mq"), save(d, "two-pairs-socket-session");
	hello(1, 1), add_nic_mut("mq", BE_TAP, 0, m_two_pairs), get_status("mq"),
		remove_nic("mq"), save(d, "two-pairs-tap");
	hello(1, 1), add_nic_mut("mq", BE_TAP_FD, 0, m_two_pairs), save(d, "two-pairs-tap-fd");
	hello(1, 1), add_nic_mut("mq", BE_SOCKET, 0, m_two_pairs_dup), save(d, "two-pairs-dup-queue");
	hello(1, 1), add_nic_mut("mq", BE_SOCKET, 0, m_three_queues), save(d, "three-queues");
	hello(1, 1), bad_policies("nothere"), save(d, "set-policy-no-nic");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), set_dirty_log_full("n0", 1ull << 31, 0, 1),
		set_dirty_log_full("n0", 4096, UINT64_MAX - 100, 1),
		set_dirty_log_full("n0", 4096, 0, 0), set_dirty_log_full("n0", 0, 0, 1),
		set_dirty_log_full("nothere", 4096, 0, 1), set_dirty_log_full("n0", 4096, 8192, 1),
		save(d, "set-dirty-log-refused");
	hello(1, 1), add_vhost_user_full("vu0", "relative.sock", 1, "vnicfzvu0", "", 0, 0),
		add_vhost_user_full("vu0", "/run/vnicfz-vu0.sock", 1, "bad name!", "", 0, 0),
		add_vhost_user_full("vu0", "/run/vnicfz-vu0.sock", 1, "vnicfzvu0", "../ns", 0, 0),
		add_vhost_user_full("vu0", "/run/vnicfz-vu0.sock", 1, "vnicfzvu0", "", 5, 0),
		add_vhost_user_full("vu0", "/run/vnicfz-vu0.sock", 1, "vnicfzvu0", "", 6, 20),
		add_vhost_user_full("vu0", "/run/vnicfz-vu0.sock", 1, "vnicfzvu0", "", 6, 9000),
		add_vhost_user_full("vu0", "/run/vnicfz-vu1.sock", 0, "vnicfzvu1", "", 0, 0),
		remove_endpoint("vu0"), save(d, "add-vhost-user-refused");
	/* Requests that do not wait for the one before (REC_PIPELINED): they
	 * meet a NIC that is starting, stopping or changing its log. */
	hello(1, 1), WITH(PIPELINED), add_nic("n0", BE_SOCKET, 0), WITH(PIPELINED),
		set_dirty_log("n0", 4096), WITH(PIPELINED), set_policy("n0", 2), remove_nic("n0"),
		save(d, "pipelined-while-starting");
	hello(1, 1), add_nic("n0", BE_SOCKET, 0), WITH(PIPELINED), set_dirty_log("n0", 4096),
		WITH(PIPELINED), set_dirty_log("n0", 8192), WITH(PIPELINED), set_policy("n0", 2),
		set_policy("n0", 3), WITH(PIPELINED), remove_nic("n0"), WITH(PIPELINED),
		set_dirty_log("n0", 4096), WITH(PIPELINED), set_policy("n0", 1), remove_nic("n0"),
		save(d, "pipelined-while-changing-and-stopping");
	hello(1, 1), WITH(PIPELINED), add_nic_mut("mq", BE_SOCKET, 0, m_two_pairs),
		WITH(PIPELINED), set_dirty_log("mq", 4096), WITH(PIPELINED), set_policy("mq", 2),
		get_status(""), WITH(PIPELINED), set_dirty_log("mq", 4096), WITH(PIPELINED),
		set_dirty_log("mq", 0), WITH(PIPELINED), set_policy("mq", 2), set_policy("mq", 3),
		WITH(PIPELINED), remove_nic("mq"), set_dirty_log("mq", 4096),
		save(d, "two-pairs-pipelined");
	hello(1, 1), add_nic_mut("mq", BE_SOCKET, 0, m_two_pairs), set_dirty_log_full("mq", 0, 0, 1),
		set_dirty_log_full("mq", 0, 4096, 0), set_dirty_log_full("mq", 4096, 0, 2),
		set_dirty_log_full("mq", 4096, 0, 1), remove_nic("mq"),
		save(d, "two-pairs-dirty-log-refused");
	/* At the fd limit (REC_STARVED): fds cut in recvmsg, and a daemon whose
	 * own dups and sockets fail. */
	hello(1, 1), WITH(STARVED | 2), add_nic_mut("mq", BE_SOCKET, 0, m_two_pairs),
		WITH(STARVED | 6), add_nic("n0", BE_SOCKET, 0), add_nic_mut("mq", BE_TAP, 0, m_two_pairs),
		WITH(STARVED | 1), set_dirty_log("mq", 4096), get_status(""),
		save(d, "starved-fds");
	/* Room for the 11 fds of a 2-pair AddNic, not for every dup it makes. */
	hello(1, 1), WITH(STARVED | 12), add_nic_mut("mq", BE_SOCKET, 0, m_two_pairs),
		WITH(STARVED | 16), add_nic_mut("mq", BE_SOCKET, 0, m_two_pairs),
		WITH(STARVED | 24), add_nic_mut("mq", BE_SOCKET, 0, m_two_pairs), get_status(""),
		WITH(STARVED | 1), set_dirty_log("mq", 4096), WITH(STARVED | 2),
		set_dirty_log("mq", 4096), save(d, "starved-dups");
	return 0;
}
