/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_wire: frames of both control channels over real AF_UNIX
 * SOCK_SEQPACKET socketpairs (TESTPLAN C1 frames, C2 fd counts).
 *
 * Round trips compare the packed bytes of what was sent and what was
 * received (protobuf-c packs fields in number order, so equal messages pack
 * equal) and the identity of every passed fd, in order, by (st_dev,
 * st_ino) of a memfd. Rejections assert the documented errno and that the
 * process's open fd count (/proc/self/fd) is what it was before the frame
 * was sent: every fd the frame carried was closed.
 *
 * Also here, as part of libvnicproto: MAC addresses as text (mac.h).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mac.h"
#include "testutil.h"
#include "wire.h"

/* ------------------------------------------------------------ helpers */


static void closepair(int sv[2])
{
	close(sv[0]);
	close(sv[1]);
}

static void mkmemfds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		fds[i] = memfd_create("check-wire", MFD_CLOEXEC);
		ck_assert_int_ge(fds[i], 0);
	}
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;

	ck_assert_int_eq(fstat(a, &sa), 0);
	ck_assert_int_eq(fstat(b, &sb), 0);
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static bool is_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	ck_assert_int_ge(fl, 0);
	return fl & FD_CLOEXEC;
}

/* Pack m into a new buffer. */
static size_t pack(const ProtobufCMessage *m, uint8_t **ret)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(len ? len : 1);

	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(protobuf_c_message_pack(m, buf), len);
	*ret = buf;
	return len;
}

static void assert_same_packed(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
	uint8_t *pa, *pb;
	size_t la = pack(a, &pa), lb = pack(b, &pb);

	ck_assert_uint_eq(la, lb);
	ck_assert(memcmp(pa, pb, la) == 0);
	free(pa);
	free(pb);
}

/* Send a frame by hand: any prefix, any payload, any fds. */
static void send_raw(int sock, uint32_t prefix, const void *payload, size_t len,
		     const int *fds, unsigned nfds)
{
	uint8_t *buf = malloc(WIRE_HDR_LEN + len);

	ck_assert_ptr_nonnull(buf);
	buf[0] = (uint8_t)(prefix >> 24);
	buf[1] = (uint8_t)(prefix >> 16);
	buf[2] = (uint8_t)(prefix >> 8);
	buf[3] = (uint8_t)prefix;
	if (len)
		memcpy(buf + WIRE_HDR_LEN, payload, len);
	ck_assert_int_eq(fdpass_send(sock, buf, WIRE_HDR_LEN + len, fds, nfds), 0);
	free(buf);
}

/* Send m packed with a correct prefix, whatever its fd count. */
static void send_packed(int sock, const ProtobufCMessage *m, const int *fds, unsigned nfds)
{
	uint8_t *p;
	size_t len = pack(m, &p);

	send_raw(sock, (uint32_t)len, p, len, fds, nfds);
	free(p);
}

/* Receive one frame, expect it rejected with code and, when why is not
 * NULL, with why in the error text (so a test cannot pass because a later
 * check happened to catch what an earlier one should have). */
static void expect_vmm_reject_why(int sock, enum wire_peer from, int code,
				  const char *why, struct wire_err *err)
{
	Vnic__Vmm__VmmMessage *m = NULL;
	struct wire_fds got = { .n = 0 };
	int r = wire_vmm_recv(sock, from, &m, &got, err);

	ck_assert_msg(r == code, "got %d (%s), want %d", r, err->msg, code);
	ck_assert_ptr_null(m);
	ck_assert_uint_eq(got.n, 0);
	ck_assert_int_eq(err->code, code);
	ck_assert_msg(err->msg[0] != '\0', "no error text");
	if (why)
		ck_assert_msg(strstr(err->msg, why), "error \"%s\" lacks \"%s\"", err->msg, why);
}

static void expect_vmm_reject(int sock, enum wire_peer from, int code, struct wire_err *err)
{
	expect_vmm_reject_why(sock, from, code, NULL, err);
}

static void expect_worker_reject_why(int sock, enum wire_peer from, int code,
				     const char *why, struct wire_err *err)
{
	Vnic__Worker__WorkerMessage *m = NULL;
	struct wire_fds got = { .n = 0 };
	int r = wire_worker_recv(sock, from, &m, &got, err);

	ck_assert_msg(r == code, "got %d (%s), want %d", r, err->msg, code);
	ck_assert_ptr_null(m);
	ck_assert_uint_eq(got.n, 0);
	ck_assert_int_eq(err->code, code);
	ck_assert_msg(err->msg[0] != '\0', "no error text");
	if (why)
		ck_assert_msg(strstr(err->msg, why), "error \"%s\" lacks \"%s\"", err->msg, why);
}

static void expect_worker_reject(int sock, enum wire_peer from, int code,
				 struct wire_err *err)
{
	expect_worker_reject_why(sock, from, code, NULL, err);
}

/* --------------------------------------------------- message builders */

/* Storage for one message of any type, built on the stack of a test. */
struct vmm_store {
	Vnic__Vmm__VmmMessage env;
	Vnic__Vmm__Request req;
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__Event ev;
	Vnic__Vmm__Hello hello;
	Vnic__Vmm__AddNic add;
	Vnic__Vmm__MemRegion reg[4], *regp[4];
	Vnic__Vmm__Queue q[4], *qp[4];
	Vnic__Vmm__Backend be;
	Vnic__Vmm__TapBackend tap;
	Vnic__Vmm__SocketBackend sockbe;
	Vnic__Vmm__TapFdBackend tapfd;
	Vnic__Vmm__Policy pol;
	Vnic__Vmm__RemoveNic rm;
	Vnic__Vmm__GetStatus gs;
	Vnic__Vmm__SetPolicy sp;
	Vnic__Vmm__HelloReply hrep;
	Vnic__Vmm__AddNicReply arep;
	Vnic__Vmm__RemoveNicReply rrep;
	Vnic__Vmm__QueueIndex qi[2], *qip[2];
	Vnic__Vmm__StatusReply srep;
	Vnic__Vmm__NicStatus ns[2], *nsp[2];
	Vnic__Vmm__QueueStatus qs[4], *qsp[4];
	Vnic__Vmm__NicFailed nf;
	Vnic__Vmm__QueueNeedsReset qnr;
	Vnic__Vmm__NicRestarted nr;
	Vnic__Vmm__NicStateChanged nsc;
	uint8_t mac[6];
};

static char s_id[] = "nic0", s_tap[] = "vnictap0", s_ns[] = "vnic-test",
	    s_client[] = "check_wire", s_server[] = "vnicd test", s_err[] = "boom",
	    s_rx0[] = "rx0", s_tx0[] = "tx0", s_reason[] = "descriptor loop",
	    s_text[] = "hello from the worker", s_empty[] = "";

static void vmm_request(struct vmm_store *s, uint64_t id)
{
	vnic__vmm__vmm_message__init(&s->env);
	vnic__vmm__request__init(&s->req);
	s->env.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REQUEST;
	s->env.request = &s->req;
	s->req.version = WIRE_VMM_VERSION;
	s->req.request_id = id;
}

static void vmm_reply(struct vmm_store *s, uint64_t id)
{
	vnic__vmm__vmm_message__init(&s->env);
	vnic__vmm__reply__init(&s->rep);
	s->env.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REPLY;
	s->env.reply = &s->rep;
	s->rep.request_id = id;
}

static void vmm_event(struct vmm_store *s)
{
	vnic__vmm__vmm_message__init(&s->env);
	vnic__vmm__event__init(&s->ev);
	s->env.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_EVENT;
	s->env.event = &s->ev;
}

static void vmm_hello(struct vmm_store *s, uint64_t id)
{
	vmm_request(s, id);
	vnic__vmm__hello__init(&s->hello);
	s->hello.min_version = 1;
	s->hello.max_version = 3;
	s->hello.client = s_client;
	s->req.body_case = VNIC__VMM__REQUEST__BODY_HELLO;
	s->req.hello = &s->hello;
}

static void policy_init(Vnic__Vmm__Policy *p)
{
	vnic__vmm__policy__init(p);
	p->mode = VNIC__VMM__MITIGATION__MITIGATION_ADAPTIVE;
	p->timer_us = 150;
	p->poll_us = 50;
	p->budget_packets = 256;
	p->budget_bytes = 512 * 1024;
}

/* An AddNic with nreg regions (<= 4), nq queues (<= 4) and a backend. */
static void vmm_add_nic(struct vmm_store *s, uint64_t id, unsigned nreg, unsigned nq,
			Vnic__Vmm__Backend__KindCase kind)
{
	static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };

	vmm_request(s, id);
	vnic__vmm__add_nic__init(&s->add);
	s->req.body_case = VNIC__VMM__REQUEST__BODY_ADD_NIC;
	s->req.add_nic = &s->add;
	memcpy(s->mac, mac, sizeof(mac));
	s->add.id = s_id;
	s->add.mac.data = s->mac;
	s->add.mac.len = sizeof(s->mac);
	s->add.mtu = 9000;
	s->add.features_offered = 1ull << 32 | 1ull << 29 | 1ull << 15;
	s->add.features_acked = 1ull << 32 | 1ull << 15;
	for (unsigned i = 0; i < nreg; i++) {
		vnic__vmm__mem_region__init(&s->reg[i]);
		s->reg[i].gpa = 0x100000000ull + i * 0x10000000ull;
		s->reg[i].size = 0x10000000ull;
		s->reg[i].offset = i * 4096ull;
		s->regp[i] = &s->reg[i];
	}
	s->add.n_regions = nreg;
	s->add.regions = s->regp;
	for (unsigned i = 0; i < nq; i++) {
		vnic__vmm__queue__init(&s->q[i]);
		s->q[i].index = i;
		s->q[i].size = 256u << i;
		s->q[i].desc_gpa = 0x100000000ull + i * 0x10000ull;
		s->q[i].avail_gpa = s->q[i].desc_gpa + 0x4000;
		s->q[i].used_gpa = s->q[i].desc_gpa + 0x8000;
		s->q[i].avail_idx = 7 * i;
		s->qp[i] = &s->q[i];
	}
	s->add.n_queues = nq;
	s->add.queues = s->qp;
	vnic__vmm__backend__init(&s->be);
	s->be.kind_case = kind;
	switch (kind) {
	case VNIC__VMM__BACKEND__KIND_TAP:
		vnic__vmm__tap_backend__init(&s->tap);
		s->tap.name = s_tap;
		s->tap.netns = s_ns;
		s->be.tap = &s->tap;
		break;
	case VNIC__VMM__BACKEND__KIND_SOCKET:
		vnic__vmm__socket_backend__init(&s->sockbe);
		s->be.socket = &s->sockbe;
		break;
	case VNIC__VMM__BACKEND__KIND_TAP_FD:
		vnic__vmm__tap_fd_backend__init(&s->tapfd);
		s->be.tap_fd = &s->tapfd;
		break;
	default:
		break;
	}
	s->add.backend = &s->be;
	policy_init(&s->pol);
	s->add.policy = &s->pol;
}

/* Every VMM-channel message type, with distinctive values: case i of
 * VMM_CASES. Returns the sender and the fd count it needs. */
#define VMM_CASES 16

static void vmm_case(struct vmm_store *s, int i, enum wire_peer *ret_from, unsigned *ret_nfds)
{
	*ret_from = WIRE_PEER_SUPERVISOR;
	*ret_nfds = 0;
	switch (i) {
	case 0:
		vmm_hello(s, 1);
		*ret_from = WIRE_PEER_VMM;
		break;
	case 1: /* tap: the supervisor opens it, no backend fd */
		vmm_add_nic(s, 2, 2, 2, VNIC__VMM__BACKEND__KIND_TAP);
		*ret_from = WIRE_PEER_VMM;
		*ret_nfds = 2 + 2 * 2;
		break;
	case 2:
		vmm_add_nic(s, 3, 2, 2, VNIC__VMM__BACKEND__KIND_SOCKET);
		*ret_from = WIRE_PEER_VMM;
		*ret_nfds = 2 + 2 * 2 + 1;
		break;
	case 3:
		vmm_add_nic(s, 4, 1, 4, VNIC__VMM__BACKEND__KIND_TAP_FD);
		*ret_from = WIRE_PEER_VMM;
		*ret_nfds = 1 + 2 * 4 + 2; /* a tap fd per queue pair (issue 15) */
		break;
	case 4:
		vmm_request(s, 5);
		vnic__vmm__remove_nic__init(&s->rm);
		s->rm.id = s_id;
		s->rm.deadline_ms = 2500;
		s->req.body_case = VNIC__VMM__REQUEST__BODY_REMOVE_NIC;
		s->req.remove_nic = &s->rm;
		*ret_from = WIRE_PEER_VMM;
		break;
	case 5:
		vmm_request(s, 6);
		vnic__vmm__get_status__init(&s->gs);
		s->gs.id = s_id;
		s->gs.start_after = s_tap;
		s->req.body_case = VNIC__VMM__REQUEST__BODY_GET_STATUS;
		s->req.get_status = &s->gs;
		*ret_from = WIRE_PEER_VMM;
		break;
	case 6:
		vmm_request(s, 7);
		vnic__vmm__set_policy__init(&s->sp);
		s->sp.id = s_id;
		policy_init(&s->pol);
		s->sp.policy = &s->pol;
		s->req.body_case = VNIC__VMM__REQUEST__BODY_SET_POLICY;
		s->req.set_policy = &s->sp;
		*ret_from = WIRE_PEER_VMM;
		break;
	case 7:
		vmm_reply(s, 1);
		vnic__vmm__hello_reply__init(&s->hrep);
		s->hrep.version = 1;
		s->hrep.server = s_server;
		s->hrep.device_features = ~0ull;
		s->hrep.max_regions = 250;
		s->hrep.max_queues = 64;
		s->hrep.max_queue_size = 32768;
		s->hrep.max_message_size = WIRE_VMM_MSG_MAX;
		s->hrep.max_fds = WIRE_MAX_FDS;
		s->rep.body_case = VNIC__VMM__REPLY__BODY_HELLO;
		s->rep.hello = &s->hrep;
		break;
	case 8:
		vmm_reply(s, 2);
		vnic__vmm__add_nic_reply__init(&s->arep);
		s->arep.id = s_id;
		s->arep.pid = 4242;
		s->rep.body_case = VNIC__VMM__REPLY__BODY_ADD_NIC;
		s->rep.add_nic = &s->arep;
		break;
	case 9:
		vmm_reply(s, 5);
		vnic__vmm__remove_nic_reply__init(&s->rrep);
		for (unsigned j = 0; j < 2; j++) {
			vnic__vmm__queue_index__init(&s->qi[j]);
			s->qi[j].index = j;
			s->qi[j].avail_idx = 65535 - j;
			s->qi[j].used_idx = 65530 - j;
			s->qip[j] = &s->qi[j];
		}
		s->rrep.n_queues = 2;
		s->rrep.queues = s->qip;
		s->rrep.unplug_latency_us = 1234;
		s->rep.body_case = VNIC__VMM__REPLY__BODY_REMOVE_NIC;
		s->rep.remove_nic = &s->rrep;
		break;
	case 10:
		vmm_reply(s, 6);
		vnic__vmm__status_reply__init(&s->srep);
		for (unsigned j = 0; j < 2; j++) {
			vnic__vmm__nic_status__init(&s->ns[j]);
			s->ns[j].id = j ? s_tap : s_id;
			s->ns[j].state = VNIC__VMM__NIC_STATE__NIC_STATE_RUNNING;
			s->ns[j].pid = 100 + (int)j;
			policy_init(&s->pol);
			s->ns[j].policy = &s->pol;
			s->ns[j].uptime_s = 3600;
			s->ns[j].restarts = j;
			s->ns[j].last_error = j ? s_err : s_empty;
			s->ns[j].sandboxed = true;
			for (unsigned k = 0; k < 2; k++) {
				Vnic__Vmm__QueueStatus *q = &s->qs[2 * j + k];

				vnic__vmm__queue_status__init(q);
				q->name = k ? s_tx0 : s_rx0;
				q->packets = 1000000 + k;
				q->bytes = 1500000000ull;
				q->kicks = 10;
				q->interrupts = 11;
				q->suppressed = 12;
				q->drops = 13;
				q->errors = 14;
				q->broken = k == 1;
				q->broken_reason = k ? s_reason : s_empty;
				s->qsp[2 * j + k] = q;
			}
			s->ns[j].n_queues = 2;
			s->ns[j].queues = &s->qsp[2 * j];
			s->nsp[j] = &s->ns[j];
		}
		s->srep.n_nics = 2;
		s->srep.nics = s->nsp;
		s->srep.more = true;
		s->rep.body_case = VNIC__VMM__REPLY__BODY_STATUS;
		s->rep.status = &s->srep;
		break;
	case 11: /* an error reply has no body */
		vmm_reply(s, 9);
		s->rep.code = VNIC__VMM__STATUS__STATUS_ALREADY_EXISTS;
		s->rep.error = s_err;
		break;
	case 12:
		vmm_event(s);
		vnic__vmm__nic_failed__init(&s->nf);
		s->nf.id = s_id;
		s->nf.reason = s_reason;
		s->nf.signal = 31;
		s->nf.syscall = 41;
		s->nf.exit_status = 0;
		s->ev.body_case = VNIC__VMM__EVENT__BODY_NIC_FAILED;
		s->ev.nic_failed = &s->nf;
		break;
	case 13:
		vmm_event(s);
		vnic__vmm__queue_needs_reset__init(&s->qnr);
		s->qnr.id = s_id;
		s->qnr.queue = 1;
		s->qnr.reason = s_reason;
		s->ev.body_case = VNIC__VMM__EVENT__BODY_QUEUE_NEEDS_RESET;
		s->ev.queue_needs_reset = &s->qnr;
		break;
	case 14:
		vmm_event(s);
		vnic__vmm__nic_restarted__init(&s->nr);
		s->nr.id = s_id;
		s->nr.restarts = 3;
		s->ev.body_case = VNIC__VMM__EVENT__BODY_NIC_RESTARTED;
		s->ev.nic_restarted = &s->nr;
		break;
	case 15:
		vmm_event(s);
		vnic__vmm__nic_state_changed__init(&s->nsc);
		s->nsc.id = s_id;
		s->nsc.old_state = VNIC__VMM__NIC_STATE__NIC_STATE_RUNNING;
		s->nsc.new_state = VNIC__VMM__NIC_STATE__NIC_STATE_RESTARTING;
		s->nsc.reason = s_reason;
		s->ev.body_case = VNIC__VMM__EVENT__BODY_NIC_STATE_CHANGED;
		s->ev.nic_state_changed = &s->nsc;
		break;
	default:
		ck_abort_msg("no case %d", i);
	}
}

struct worker_store {
	Vnic__Worker__WorkerMessage env;
	Vnic__Worker__Config cfg;
	Vnic__Vmm__MemRegion reg[4], *regp[4];
	Vnic__Vmm__Queue q[4], *qp[4];
	Vnic__Vmm__Policy pol;
	Vnic__Worker__Start start;
	Vnic__Worker__Stop stop;
	Vnic__Worker__Ready ready;
	Vnic__Worker__Stopped stopped;
	Vnic__Vmm__QueueIndex qi[2], *qip[2];
	Vnic__Worker__QueueBroken qb;
	Vnic__Worker__Log log;
	Vnic__Worker__Error error;
	Vnic__Worker__SetCallFd scf;
	Vnic__Worker__CallFdSet cfs;
};

static void worker_config(struct worker_store *s, unsigned nreg, unsigned nq,
			  Vnic__Worker__BackendKind kind)
{
	vnic__worker__worker_message__init(&s->env);
	vnic__worker__config__init(&s->cfg);
	s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG;
	s->env.config = &s->cfg;
	s->cfg.nic_id = s_id;
	s->cfg.features = 1ull << 32;
	s->cfg.mtu = 1500;
	for (unsigned i = 0; i < nreg; i++) {
		vnic__vmm__mem_region__init(&s->reg[i]);
		s->reg[i].gpa = i * 0x1000000ull;
		s->reg[i].size = 0x1000000ull;
		s->reg[i].offset = 0;
		s->regp[i] = &s->reg[i];
	}
	s->cfg.n_regions = nreg;
	s->cfg.regions = s->regp;
	for (unsigned i = 0; i < nq; i++) {
		vnic__vmm__queue__init(&s->q[i]);
		s->q[i].index = i;
		s->q[i].size = 1024;
		s->q[i].desc_gpa = 0x10000ull * (i + 1);
		s->q[i].avail_gpa = s->q[i].desc_gpa + 0x4000;
		s->q[i].used_gpa = s->q[i].desc_gpa + 0x6000;
		s->qp[i] = &s->q[i];
	}
	s->cfg.n_queues = nq;
	s->cfg.queues = s->qp;
	policy_init(&s->pol);
	s->cfg.policy = &s->pol;
	s->cfg.backend = kind;
	s->cfg.vnet_hdr_len = 12;
	s->cfg.stats_size = 4096;
	s->cfg.restarts = 1;
}

#define WORKER_CASES 12

static void worker_case(struct worker_store *s, int i, enum wire_peer *ret_from,
			unsigned *ret_nfds)
{
	*ret_from = WIRE_PEER_WORKER;
	*ret_nfds = 0;
	if (i >= 2)
		vnic__worker__worker_message__init(&s->env);
	switch (i) {
	case 0:
		worker_config(s, 2, 2, VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_SOCKET);
		*ret_from = WIRE_PEER_SUPERVISOR;
		*ret_nfds = 2 + 2 * 2 + 2;
		break;
	case 1:
		worker_config(s, 1, 4, VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_TAP);
		*ret_from = WIRE_PEER_SUPERVISOR;
		*ret_nfds = 1 + 2 * 4 + 2;
		break;
	case 2:
		vnic__worker__start__init(&s->start);
		s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_START;
		s->env.start = &s->start;
		*ret_from = WIRE_PEER_SUPERVISOR;
		break;
	case 3:
		vnic__worker__stop__init(&s->stop);
		s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_STOP;
		s->env.stop = &s->stop;
		*ret_from = WIRE_PEER_SUPERVISOR;
		break;
	case 4:
		vnic__worker__ready__init(&s->ready);
		s->ready.sandboxed = true;
		s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_READY;
		s->env.ready = &s->ready;
		break;
	case 5:
		vnic__worker__stopped__init(&s->stopped);
		for (unsigned j = 0; j < 2; j++) {
			vnic__vmm__queue_index__init(&s->qi[j]);
			s->qi[j].index = j;
			s->qi[j].avail_idx = 300 + j;
			s->qi[j].used_idx = 299 + j;
			s->qip[j] = &s->qi[j];
		}
		s->stopped.n_queues = 2;
		s->stopped.queues = s->qip;
		s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_STOPPED;
		s->env.stopped = &s->stopped;
		break;
	case 6:
		vnic__worker__queue_broken__init(&s->qb);
		s->qb.queue = 1;
		s->qb.reason = s_reason;
		s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_QUEUE_BROKEN;
		s->env.queue_broken = &s->qb;
		break;
	case 7:
		vnic__worker__log__init(&s->log);
		s->log.level = VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_WARN;
		s->log.text = s_text;
		s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_LOG;
		s->env.log = &s->log;
		break;
	case 8:
		vnic__worker__error__init(&s->error);
		s->error.errnum = EINVAL;
		s->error.text = s_err;
		s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_ERROR;
		s->env.error = &s->error;
		break;
	case 9:
		/* With the inflight region (in the stats page's memfd) and
		 * a dirty log: the log's fd, last. */
		worker_config(s, 2, 2, VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_SOCKET);
		s->cfg.inflight_size = 4096;
		s->cfg.inflight_offset = 4096;
		s->cfg.log_size = 4096;
		*ret_from = WIRE_PEER_SUPERVISOR;
		*ret_nfds = 2 + 2 * 2 + 3;
		break;
	case 10:
		/* A call eventfd swapped live: exactly its one fd. */
		vnic__worker__set_call_fd__init(&s->scf);
		s->scf.queue = 1;
		s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_SET_CALL_FD;
		s->env.set_call_fd = &s->scf;
		*ret_from = WIRE_PEER_SUPERVISOR;
		*ret_nfds = 1;
		break;
	case 11:
		vnic__worker__call_fd_set__init(&s->cfs);
		s->cfs.queue = 1;
		s->env.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_CALL_FD_SET;
		s->env.call_fd_set = &s->cfs;
		break;
	default:
		ck_abort_msg("no case %d", i);
	}
}

/* --------------------------------------------------------- round trips */

/* C1: every VMM-channel message type arrives as sent, fds in order, same
 * objects, CLOEXEC. */
START_TEST(c1_roundtrip_vmm)
{
	struct vmm_store s;
	enum wire_peer from;
	unsigned nfds;
	int sv[2], fds[WIRE_MAX_FDS], before;
	Vnic__Vmm__VmmMessage *m = NULL;
	struct wire_fds got;
	struct wire_err err;

	vmm_case(&s, _i, &from, &nfds);
	ck_assert_int_eq(wire_vmm_expected_fds(&s.env), (int)nfds);
	tu_seqpair(sv);
	mkmemfds(fds, nfds);
	before = tu_fd_count();
	ck_assert_int_eq(wire_vmm_send(sv[0], &s.env, fds, nfds), 0);
	ck_assert_msg(wire_vmm_recv(sv[1], from, &m, &got, &err) == 0, "case %d: %s",
		      _i, err.msg);
	ck_assert_int_eq(m->msg_case, s.env.msg_case);
	assert_same_packed(&s.env.base, &m->base);
	ck_assert_uint_eq(got.n, nfds);
	for (unsigned i = 0; i < nfds; i++) {
		ck_assert(same_file(got.fd[i], fds[i]));
		ck_assert(is_cloexec(got.fd[i]));
	}
	ck_assert_int_eq(tu_fd_count(), before + (int)nfds);
	wire_fds_close(&got);
	ck_assert_int_eq(tu_fd_count(), before);
	m = wire_vmm_free(m);
	ck_assert_ptr_null(m);
	fdpass_close_all(fds, nfds);
	closepair(sv);
}
END_TEST

/* The fields of an AddNic, one by one, and its fd layout. */
START_TEST(c1_roundtrip_add_nic_fields)
{
	struct vmm_store s;
	int sv[2], fds[8];
	Vnic__Vmm__VmmMessage *m = NULL;
	struct wire_fds got;
	struct wire_err err;
	struct wire_fd_layout l;
	const Vnic__Vmm__AddNic *a;

	vmm_add_nic(&s, 77, 3, 2, VNIC__VMM__BACKEND__KIND_SOCKET);
	tu_seqpair(sv);
	mkmemfds(fds, 8);
	ck_assert_int_eq(wire_vmm_send(sv[0], &s.env, fds, 8), 0);
	ck_assert_msg(wire_vmm_recv(sv[1], WIRE_PEER_VMM, &m, &got, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(m->request->version, WIRE_VMM_VERSION);
	ck_assert_uint_eq(m->request->request_id, 77);
	ck_assert_int_eq(m->request->body_case, VNIC__VMM__REQUEST__BODY_ADD_NIC);
	a = m->request->add_nic;
	ck_assert_str_eq(a->id, "nic0");
	ck_assert_uint_eq(a->mac.len, 6);
	ck_assert_mem_eq(a->mac.data, s.mac, 6);
	ck_assert_uint_eq(a->mtu, 9000);
	ck_assert_uint_eq(a->n_regions, 3);
	ck_assert_uint_eq(a->regions[2]->gpa, 0x120000000ull);
	ck_assert_uint_eq(a->regions[2]->offset, 8192);
	ck_assert_uint_eq(a->n_queues, 2);
	ck_assert_uint_eq(a->queues[1]->size, 512);
	ck_assert_uint_eq(a->queues[1]->avail_idx, 7);
	ck_assert_int_eq(a->backend->kind_case, VNIC__VMM__BACKEND__KIND_SOCKET);
	ck_assert_int_eq(a->policy->mode, VNIC__VMM__MITIGATION__MITIGATION_ADAPTIVE);

	/* fds: regions 0..2, then kick/call per queue, then the backend. */
	ck_assert_int_eq(wire_add_nic_layout(a, &l), 0);
	ck_assert_uint_eq(l.total, 8);
	ck_assert_uint_eq(l.nregions, 3);
	ck_assert_uint_eq(wire_fd_kick(&l, 0), 3);
	ck_assert_uint_eq(wire_fd_call(&l, 0), 4);
	ck_assert_uint_eq(wire_fd_kick(&l, 1), 5);
	ck_assert_uint_eq(wire_fd_call(&l, 1), 6);
	ck_assert_int_eq(l.backend, 7);
	ck_assert_int_eq(l.stats, -1);
	ck_assert(same_file(got.fd[wire_fd_call(&l, 1)], fds[6]));
	ck_assert(same_file(got.fd[l.backend], fds[7]));
	wire_fds_close(&got);
	wire_vmm_free(m);
	fdpass_close_all(fds, 8);
	closepair(sv);
}
END_TEST

/* Every worker-channel message type, in its direction. */
START_TEST(c1_roundtrip_worker)
{
	struct worker_store s;
	enum wire_peer from;
	unsigned nfds;
	int sv[2], fds[WIRE_MAX_FDS];
	Vnic__Worker__WorkerMessage *m = NULL;
	struct wire_fds got;
	struct wire_err err;

	worker_case(&s, _i, &from, &nfds);
	ck_assert_int_eq(wire_worker_expected_fds(&s.env), (int)nfds);
	tu_seqpair(sv);
	mkmemfds(fds, nfds);
	ck_assert_int_eq(wire_worker_send(sv[0], &s.env, fds, nfds), 0);
	ck_assert_msg(wire_worker_recv(sv[1], from, &m, &got, &err) == 0, "case %d: %s",
		      _i, err.msg);
	ck_assert_int_eq(m->msg_case, s.env.msg_case);
	assert_same_packed(&s.env.base, &m->base);
	ck_assert_uint_eq(got.n, nfds);
	for (unsigned i = 0; i < nfds; i++) {
		ck_assert(same_file(got.fd[i], fds[i]));
		ck_assert(is_cloexec(got.fd[i]));
	}
	wire_fds_close(&got);
	wire_worker_free(m);
	fdpass_close_all(fds, nfds);
	closepair(sv);
}
END_TEST

START_TEST(c2_config_layout)
{
	struct worker_store s;
	struct wire_fd_layout l;

	worker_config(&s, 2, 4, VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_TAP);
	ck_assert_int_eq(wire_config_layout(&s.cfg, &l), 0);
	ck_assert_uint_eq(l.total, 2 + 8 + 2);
	ck_assert_uint_eq(wire_fd_kick(&l, 0), 2);
	ck_assert_uint_eq(wire_fd_call(&l, 3), 9);
	ck_assert_int_eq(l.backend, 10);
	ck_assert_int_eq(l.stats, 11);
	ck_assert_int_eq(l.log, -1); /* log_size 0: no log, no fd */
	/* The inflight region lives in the stats page's memfd: no fd. */
	s.cfg.inflight_size = 8192;
	s.cfg.inflight_offset = 4096;
	ck_assert_int_eq(wire_config_layout(&s.cfg, &l), 0);
	ck_assert_uint_eq(l.total, 2 + 8 + 2);
	/* The dirty log's fd comes after the stats page's. */
	s.cfg.log_size = 4096;
	ck_assert_int_eq(wire_config_layout(&s.cfg, &l), 0);
	ck_assert_uint_eq(l.total, 2 + 8 + 3);
	ck_assert_int_eq(l.backend, 10);
	ck_assert_int_eq(l.stats, 11);
	ck_assert_int_eq(l.log, 12);
	s.cfg.backend = VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_UNSPECIFIED;
	ck_assert_int_eq(wire_config_layout(&s.cfg, &l), -EINVAL);
}
END_TEST

/* ------------------------------------------------------- C1 rejections */

START_TEST(c1_oversized_prefix)
{
	static const uint32_t prefixes[] = { WIRE_VMM_MSG_MAX + 1, 0x7fffffffu, 0xffffffffu };
	int sv[2], fds[2], before;
	struct wire_err err;
	uint8_t payload[16] = { 0 };

	tu_seqpair(sv);
	mkmemfds(fds, 2);
	before = tu_fd_count();
	for (unsigned i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		send_raw(sv[0], prefixes[i], payload, sizeof(payload), fds, 2);
		expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EMSGSIZE, "above the channel maximum",
				      &err);
		ck_assert_int_eq(tu_fd_count(), before);
	}
	fdpass_close_all(fds, 2);
	closepair(sv);
}
END_TEST

START_TEST(c1_prefix_mismatch)
{
	struct vmm_store s;
	uint8_t *p;
	size_t len;
	int sv[2], fds[1], before;
	struct wire_err err;

	vmm_hello(&s, 1);
	len = pack(&s.env.base, &p);
	tu_seqpair(sv);
	mkmemfds(fds, 1);
	before = tu_fd_count();
	send_raw(sv[0], (uint32_t)len - 1, p, len, fds, 1); /* prefix short */
	expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EBADMSG, "payload bytes", &err);
	send_raw(sv[0], (uint32_t)len + 1, p, len, fds, 1); /* prefix long */
	expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EBADMSG, "payload bytes", &err);
	ck_assert_int_eq(tu_fd_count(), before);
	send_raw(sv[0], (uint32_t)len, p, len, NULL, 0); /* and right */
	{
		Vnic__Vmm__VmmMessage *m;
		struct wire_fds got;

		ck_assert_int_eq(wire_vmm_recv(sv[1], WIRE_PEER_VMM, &m, &got, &err), 0);
		wire_vmm_free(m);
	}
	free(p);
	fdpass_close_all(fds, 1);
	closepair(sv);
}
END_TEST

/* Frames of 1, 2 and 3 bytes: shorter than the length prefix. */
START_TEST(c1_truncated_frame)
{
	static const uint8_t bytes[3] = { 0, 0, 0 };
	int sv[2], fds[1], before;
	struct wire_err err;

	tu_seqpair(sv);
	mkmemfds(fds, 1);
	before = tu_fd_count();
	for (size_t n = 1; n < WIRE_HDR_LEN; n++) {
		ck_assert_int_eq(fdpass_send(sv[0], bytes, n, fds, 1), 0);
		expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EBADMSG, "shorter than", &err);
		ck_assert_int_eq(tu_fd_count(), before);
	}
	fdpass_close_all(fds, 1);
	closepair(sv);
}
END_TEST

START_TEST(c1_garbage_protobuf)
{
	/* wire type 7 (invalid); a varint of 11 bytes; a length past the end;
	 * a valid tag then truncated bytes. */
	static const uint8_t g1[] = { 0x0f, 0x01 };
	static const uint8_t g2[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				      0xff, 0xff, 0xff, 0x01 };
	static const uint8_t g3[] = { 0x0a, 0x7f, 0x08, 0x01 };
	static const uint8_t g4[] = { 0x0a };
	static const struct { const uint8_t *p; size_t n; } g[] = {
		{ g1, sizeof(g1) }, { g2, sizeof(g2) }, { g3, sizeof(g3) }, { g4, sizeof(g4) },
	};
	int sv[2], fds[2], before;
	struct wire_err err;

	tu_seqpair(sv);
	mkmemfds(fds, 2);
	before = tu_fd_count();
	for (unsigned i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		send_raw(sv[0], (uint32_t)g[i].n, g[i].p, g[i].n, fds, 2);
		expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EBADMSG, "not a valid", &err);
		ck_assert_int_eq(tu_fd_count(), before);
		send_raw(sv[0], (uint32_t)g[i].n, g[i].p, g[i].n, fds, 2);
		expect_worker_reject_why(sv[1], WIRE_PEER_SUPERVISOR, -EBADMSG, "not a valid", &err);
		ck_assert_int_eq(tu_fd_count(), before);
	}
	fdpass_close_all(fds, 2);
	closepair(sv);
}
END_TEST

/* Random bytes and random mutations of a valid AddNic: never a crash or a
 * leak (run under ASan too); whatever unpacks is freed cleanly. */
START_TEST(c1_garbage_fuzz)
{
	struct vmm_store s;
	uint8_t *valid, buf[512];
	size_t vlen;
	int sv[2], fds[1], before, accepted = 0;
	unsigned seed = 12345;

	vmm_add_nic(&s, 1, 4, 4, VNIC__VMM__BACKEND__KIND_TAP);
	vlen = pack(&s.env.base, &valid);
	ck_assert_uint_le(vlen, sizeof(buf));
	tu_seqpair(sv);
	mkmemfds(fds, 1);
	before = tu_fd_count();
	for (int it = 0; it < 4000; it++) {
		size_t n;
		Vnic__Vmm__VmmMessage *m = NULL;
		struct wire_fds got;
		struct wire_err err;
		int r;

		if (it & 1) {
			n = (size_t)rand_r(&seed) % sizeof(buf);
			for (size_t i = 0; i < n; i++)
				buf[i] = (uint8_t)rand_r(&seed);
		} else {
			n = vlen;
			memcpy(buf, valid, vlen);
			for (int k = 0; k < 1 + rand_r(&seed) % 4; k++)
				buf[(size_t)rand_r(&seed) % vlen] = (uint8_t)rand_r(&seed);
			n -= (size_t)rand_r(&seed) % 3 == 0 ? (size_t)rand_r(&seed) % vlen : 0;
		}
		send_raw(sv[0], (uint32_t)n, buf, n, fds, 1);
		r = wire_vmm_recv(sv[1], WIRE_PEER_VMM, &m, &got, &err);
		if (r == 0) {
			accepted++;
			ck_assert_uint_eq(got.n, 1);
			wire_fds_close(&got);
			wire_vmm_free(m);
		} else {
			ck_assert_msg(r == -EBADMSG || r == -EPROTO || r == -EMSGSIZE,
				      "iteration %d: %d %s", it, r, err.msg);
		}
		ck_assert_int_eq(tu_fd_count(), before);
	}
	/* Some random frames do unpack (e.g. a Request with an unknown
	 * body); none of them may carry an fd count other than theirs. */
	ck_assert_int_lt(accepted, 4000);
	free(valid);
	fdpass_close_all(fds, 1);
	closepair(sv);
}
END_TEST

/* Zero-length payload: a valid frame that unpacks to an empty envelope,
 * which is rejected. An envelope holding only an unknown arm likewise. */
START_TEST(c1_empty_envelope)
{
	static const uint8_t unknown_arm[] = { 0xa2, 0x06, 0x00 }; /* field 100, len 0 */
	int sv[2], fds[1], before;
	struct wire_frame f;
	struct wire_err err;

	tu_seqpair(sv);
	mkmemfds(fds, 1);
	before = tu_fd_count();

	send_raw(sv[0], 0, NULL, 0, fds, 1);
	ck_assert_int_eq(wire_recv_frame(sv[1], WIRE_VMM_MSG_MAX, WIRE_MAX_FDS, &f, &err), 0);
	ck_assert_uint_eq(f.len, 0);
	ck_assert_uint_eq(f.fds.n, 1);
	{
		Vnic__Vmm__VmmMessage *m = NULL;

		ck_assert_int_eq(wire_vmm_unpack(&f, WIRE_PEER_VMM, &m, &err), -EBADMSG);
		ck_assert_ptr_null(m);
		ck_assert_uint_eq(f.fds.n, 0); /* closed by the failed unpack */
	}
	wire_frame_release(&f);
	ck_assert_int_eq(tu_fd_count(), before);

	send_raw(sv[0], 0, NULL, 0, fds, 1);
	expect_worker_reject_why(sv[1], WIRE_PEER_SUPERVISOR, -EBADMSG, "no known message", &err);
	send_raw(sv[0], sizeof(unknown_arm), unknown_arm, sizeof(unknown_arm), fds, 1);
	expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EBADMSG, "no known message", &err);
	send_raw(sv[0], sizeof(unknown_arm), unknown_arm, sizeof(unknown_arm), NULL, 0);
	expect_worker_reject_why(sv[1], WIRE_PEER_WORKER, -EBADMSG, "no known message", &err);
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(fds, 1);
	closepair(sv);
}
END_TEST

/* A Request with a body this version does not know unpacks with no body
 * and 0 fds, so the supervisor can answer UNIMPLEMENTED; with fds it is
 * rejected and its request id reported. */
START_TEST(c1_unknown_request_body)
{
	/* VmmMessage{request(1): Request{request_id(2)=42, field 99 = ""}} */
	static const uint8_t msg[] = { 0x0a, 0x05, 0x10, 0x2a, 0x9a, 0x06, 0x00 };
	int sv[2], fds[1], before;
	Vnic__Vmm__VmmMessage *m = NULL;
	struct wire_fds got;
	struct wire_err err;

	tu_seqpair(sv);
	mkmemfds(fds, 1);
	before = tu_fd_count();
	send_raw(sv[0], sizeof(msg), msg, sizeof(msg), NULL, 0);
	ck_assert_msg(wire_vmm_recv(sv[1], WIRE_PEER_VMM, &m, &got, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(m->msg_case, VNIC__VMM__VMM_MESSAGE__MSG_REQUEST);
	ck_assert_uint_eq(m->request->request_id, 42);
	ck_assert_int_eq(m->request->body_case, VNIC__VMM__REQUEST__BODY__NOT_SET);
	ck_assert_uint_eq(got.n, 0);
	wire_vmm_free(m);

	send_raw(sv[0], sizeof(msg), msg, sizeof(msg), fds, 1);
	expect_vmm_reject(sv[1], WIRE_PEER_VMM, -EPROTO, &err);
	ck_assert(err.has_request_id);
	ck_assert_uint_eq(err.request_id, 42);
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(fds, 1);
	closepair(sv);
}
END_TEST

/* Messages in the wrong direction are protocol violations. */
START_TEST(c1_wrong_direction)
{
	struct vmm_store s;
	struct worker_store w;
	enum wire_peer from;
	unsigned nfds;
	int sv[2], fds[16], before;
	struct wire_err err;

	tu_seqpair(sv);
	mkmemfds(fds, 16);
	before = tu_fd_count();

	vmm_case(&s, 2, &from, &nfds); /* an AddNic with 7 fds, "from" the supervisor */
	send_packed(sv[0], &s.env.base, fds, nfds);
	/* a client makes room for no fds at all */
	expect_vmm_reject(sv[1], WIRE_PEER_SUPERVISOR, -ENOBUFS, &err);
	send_packed(sv[0], &s.env.base, NULL, 0);
	expect_vmm_reject_why(sv[1], WIRE_PEER_SUPERVISOR, -EPROTO, "from the supervisor", &err);
	vmm_case(&s, 7, &from, &nfds); /* a Reply "from" the VMM */
	send_packed(sv[0], &s.env.base, NULL, 0);
	expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EPROTO, "Reply from the VMM", &err);
	vmm_case(&s, 12, &from, &nfds); /* an Event "from" the VMM */
	send_packed(sv[0], &s.env.base, NULL, 0);
	expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EPROTO, "Event from the VMM", &err);

	worker_case(&w, 0, &from, &nfds); /* a Config "from" a worker */
	send_packed(sv[0], &w.env.base, NULL, 0);
	expect_worker_reject_why(sv[1], WIRE_PEER_WORKER, -EPROTO, "config from the worker", &err);
	worker_case(&w, 4, &from, &nfds); /* a Ready "from" the supervisor */
	send_packed(sv[0], &w.env.base, NULL, 0);
	expect_worker_reject_why(sv[1], WIRE_PEER_SUPERVISOR, -EPROTO, "ready from the supervisor",
				 &err);
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(fds, 16);
	closepair(sv);
}
END_TEST

static Vnic__Vmm__MemRegion **huge_regions(size_t n, bool empty, Vnic__Vmm__MemRegion **ret_arr)
{
	Vnic__Vmm__MemRegion *r = calloc(n, sizeof(*r));
	Vnic__Vmm__MemRegion **rp = calloc(n, sizeof(*rp));

	ck_assert(r && rp);
	for (size_t i = 0; i < n; i++) {
		vnic__vmm__mem_region__init(&r[i]);
		if (!empty) {
			r[i].gpa = 0x100000000ull + i * 4096;
			r[i].size = 4096;
			r[i].offset = i * 4096;
		}
		rp[i] = &r[i];
	}
	*ret_arr = r;
	return rp;
}

/* 100k regions with real values are ~1.5 MB: far above the channel
 * maximum, refused by the sender and cut by the kernel (MSG_TRUNC) at the
 * receiver, before anything is unpacked. */
START_TEST(c1_huge_repeated_size_cap)
{
	struct vmm_store s;
	Vnic__Vmm__MemRegion *arr;
	size_t n = 100000;
	int sv[2], fds[2], before, big = 16 << 20;
	struct wire_err err;

	tu_seqpair(sv);
	/* Room to send it at all: SO_SNDBUFFORCE as root, else the sysctl max. */
	if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0) {
		ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big)), 0);
		n = 20000; /* ~300 KB, still above the maximum */
	}
	vmm_add_nic(&s, 5, 0, 0, VNIC__VMM__BACKEND__KIND_TAP);
	s.add.regions = huge_regions(n, false, &arr);
	s.add.n_regions = n;
	ck_assert_uint_gt(protobuf_c_message_get_packed_size(&s.env.base), WIRE_VMM_MSG_MAX);
	ck_assert_int_eq(wire_send(sv[0], &s.env.base, WIRE_VMM_MSG_MAX, NULL, 0), -EMSGSIZE);
	ck_assert_int_eq(wire_vmm_send(sv[0], &s.env, NULL, 0), -E2BIG);

	mkmemfds(fds, 2);
	before = tu_fd_count();
	send_packed(sv[0], &s.env.base, fds, 2);
	expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EMSGSIZE, "frame above the channel maximum",
			      &err);
	ck_assert_int_eq(tu_fd_count(), before);
	free(s.add.regions);
	free(arr);
	fdpass_close_all(fds, 2);
	closepair(sv);
}
END_TEST

/* 100k EMPTY regions pack into 200 KB, under the channel maximum, but
 * would unpack into ~6 MB of structs: the capped allocator refuses. */
START_TEST(c1_huge_repeated_alloc_cap)
{
	struct vmm_store s;
	Vnic__Vmm__MemRegion *arr;
	size_t n = 100000;
	int sv[2], fds[2], before, big = 4 << 20;
	struct wire_err err;

	tu_seqpair(sv);
	if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big)), 0);
	vmm_add_nic(&s, 6, 0, 0, VNIC__VMM__BACKEND__KIND_TAP);
	s.add.regions = huge_regions(n, true, &arr);
	s.add.n_regions = n;
	ck_assert_uint_le(protobuf_c_message_get_packed_size(&s.env.base), WIRE_VMM_MSG_MAX);
	mkmemfds(fds, 2);
	before = tu_fd_count();
	send_packed(sv[0], &s.env.base, fds, 2);
	expect_vmm_reject(sv[1], WIRE_PEER_VMM, -EMSGSIZE, &err);
	ck_assert_msg(strstr(err.msg, "unpack") != NULL, "%s", err.msg);
	ck_assert_int_eq(tu_fd_count(), before);
	free(s.add.regions);
	free(arr);
	fdpass_close_all(fds, 2);
	closepair(sv);
}
END_TEST

/* ------------------------------------------------------- C2 fd counts */

/* AddNic with one fd too many, one too few, and none. */
START_TEST(c2_add_nic_fd_count)
{
	struct vmm_store s;
	int sv[2], fds[9], before;
	struct wire_err err;

	vmm_add_nic(&s, 31, 2, 2, VNIC__VMM__BACKEND__KIND_SOCKET); /* wants 7 */
	tu_seqpair(sv);
	mkmemfds(fds, 9);
	before = tu_fd_count();
	ck_assert_int_eq(wire_vmm_send(sv[0], &s.env, fds, 8), -EINVAL); /* sender checks too */
	ck_assert_int_eq(wire_vmm_send(sv[0], &s.env, fds, 6), -EINVAL);
	{
		struct wire_fds got;
		Vnic__Vmm__VmmMessage *m;

		ck_assert_int_eq(wire_vmm_recv(sv[1], WIRE_PEER_VMM, &m, &got, &err), -EAGAIN);
	}
	for (unsigned n = 0; n <= 9; n++) {
		if (n == 7)
			continue;
		send_packed(sv[0], &s.env.base, fds, n);
		expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EPROTO, "needs 7 fds", &err);
		ck_assert(err.has_request_id);
		ck_assert_uint_eq(err.request_id, 31);
		ck_assert_int_eq(tu_fd_count(), before);
	}
	fdpass_close_all(fds, 9);
	closepair(sv);
}
END_TEST

/* fds on messages that carry none. */
START_TEST(c2_fds_on_fdless)
{
	struct vmm_store s;
	struct worker_store w;
	enum wire_peer from;
	unsigned nfds;
	int sv[2], fds[3], before;
	struct wire_err err;

	tu_seqpair(sv);
	mkmemfds(fds, 3);
	before = tu_fd_count();
	for (int i = 0; i < VMM_CASES; i++) {
		vmm_case(&s, i, &from, &nfds);
		if (nfds || from != WIRE_PEER_VMM)
			continue;
		send_packed(sv[0], &s.env.base, fds, 1 + (unsigned)i % 3);
		expect_vmm_reject(sv[1], WIRE_PEER_VMM, -EPROTO, &err);
		ck_assert_int_eq(tu_fd_count(), before);
	}
	for (int i = 2; i <= 3; i++) { /* Start, Stop to the worker */
		worker_case(&w, i, &from, &nfds);
		send_packed(sv[0], &w.env.base, fds, 2);
		expect_worker_reject(sv[1], WIRE_PEER_SUPERVISOR, -EPROTO, &err);
		ck_assert_int_eq(tu_fd_count(), before);
	}
	/* SetCallFd wants exactly one fd: none or two are rejected. */
	worker_case(&w, 10, &from, &nfds);
	send_packed(sv[0], &w.env.base, fds, 0);
	expect_worker_reject(sv[1], WIRE_PEER_SUPERVISOR, -EPROTO, &err);
	send_packed(sv[0], &w.env.base, fds, 2);
	expect_worker_reject(sv[1], WIRE_PEER_SUPERVISOR, -EPROTO, &err);
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(fds, 3);
	closepair(sv);
}
END_TEST

/* Config with the stats fd missing, one extra, and no backend kind. */
START_TEST(c2_config_fd_count)
{
	struct worker_store w;
	int sv[2], fds[10], before;
	struct wire_err err;

	worker_config(&w, 2, 2, VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_TAP); /* wants 8 */
	tu_seqpair(sv);
	mkmemfds(fds, 10);
	before = tu_fd_count();
	send_packed(sv[0], &w.env.base, fds, 7);
	expect_worker_reject(sv[1], WIRE_PEER_SUPERVISOR, -EPROTO, &err);
	send_packed(sv[0], &w.env.base, fds, 9);
	expect_worker_reject(sv[1], WIRE_PEER_SUPERVISOR, -EPROTO, &err);
	w.cfg.backend = VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_UNSPECIFIED;
	ck_assert_int_eq(wire_worker_send(sv[0], &w.env, fds, 8), -EINVAL);
	send_packed(sv[0], &w.env.base, fds, 8);
	expect_worker_reject(sv[1], WIRE_PEER_SUPERVISOR, -EBADMSG, &err);
	/* With a dirty log the Config wants 9: 8 (the shape without) and
	 * 10 are rejected, 9 is accepted. */
	w.cfg.backend = VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_TAP;
	w.cfg.log_size = 4096;
	send_packed(sv[0], &w.env.base, fds, 8);
	expect_worker_reject(sv[1], WIRE_PEER_SUPERVISOR, -EPROTO, &err);
	send_packed(sv[0], &w.env.base, fds, 10);
	expect_worker_reject(sv[1], WIRE_PEER_SUPERVISOR, -EPROTO, &err);
	{
		Vnic__Worker__WorkerMessage *m = NULL;
		struct wire_fds got;

		ck_assert_int_eq(wire_worker_send(sv[0], &w.env, fds, 9), 0);
		ck_assert_int_eq(wire_worker_recv(sv[1], WIRE_PEER_SUPERVISOR, &m, &got, &err), 0);
		ck_assert_uint_eq(got.n, 9);
		ck_assert_uint_eq(m->config->log_size, 4096);
		wire_fds_close(&got);
		wire_worker_free(m);
	}
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(fds, 10);
	closepair(sv);
}
END_TEST

/* An AddNic declaring more fds than a frame can carry is rejected whatever
 * it carries. */
START_TEST(c2_add_nic_beyond_scm_max)
{
	struct vmm_store s;
	Vnic__Vmm__MemRegion *arr;
	int sv[2], fds[4], before;
	struct wire_err err;

	vmm_add_nic(&s, 8, 0, 0, VNIC__VMM__BACKEND__KIND_TAP);
	s.add.regions = huge_regions(WIRE_MAX_FDS + 1, false, &arr);
	s.add.n_regions = WIRE_MAX_FDS + 1;
	ck_assert_int_eq(wire_vmm_expected_fds(&s.env), -E2BIG);
	tu_seqpair(sv);
	mkmemfds(fds, 4);
	before = tu_fd_count();
	send_packed(sv[0], &s.env.base, fds, 4);
	expect_vmm_reject(sv[1], WIRE_PEER_VMM, -EPROTO, &err);
	ck_assert(err.has_request_id);
	ck_assert_int_eq(tu_fd_count(), before);
	free(s.add.regions);
	free(arr);
	fdpass_close_all(fds, 4);
	closepair(sv);
}
END_TEST

/* MSG_CTRUNC: a worker passing fds to the supervisor (which makes room for
 * none), and a frame above a receiver's fd limit. */
START_TEST(c2_ctrunc)
{
	struct worker_store w;
	enum wire_peer from;
	unsigned nfds;
	int sv[2], fds[8], before;
	struct wire_frame f;
	struct wire_err err;

	tu_seqpair(sv);
	mkmemfds(fds, 8);
	before = tu_fd_count();
	worker_case(&w, 4, &from, &nfds); /* Ready */
	send_packed(sv[0], &w.env.base, fds, 3);
	expect_worker_reject(sv[1], WIRE_PEER_WORKER, -ENOBUFS, &err);
	ck_assert_int_eq(tu_fd_count(), before);

	send_raw(sv[0], 0, NULL, 0, fds, 8);
	ck_assert_int_eq(wire_recv_frame(sv[1], WIRE_VMM_MSG_MAX, 4, &f, &err), -ENOBUFS);
	ck_assert_int_eq(tu_fd_count(), before);
	fdpass_close_all(fds, 8);
	closepair(sv);
}
END_TEST

/* The length prefix is checked against the channel maximum given. */
START_TEST(c1_frame_at_and_above_max)
{
	uint8_t *payload = calloc(1, 2048);
	int sv[2];
	struct wire_frame f;
	struct wire_err err;

	ck_assert_ptr_nonnull(payload);
	tu_seqpair(sv);
	send_raw(sv[0], 1024, payload, 1024, NULL, 0);
	ck_assert_int_eq(wire_recv_frame(sv[1], 1024, 0, &f, &err), 0);
	ck_assert_uint_eq(f.len, 1024);
	wire_frame_release(&f);
	send_raw(sv[0], 1025, payload, 1025, NULL, 0); /* MSG_TRUNC */
	ck_assert_int_eq(wire_recv_frame(sv[1], 1024, 0, &f, &err), -EMSGSIZE);
	send_raw(sv[0], 1025, payload, 1020, NULL, 0); /* prefix alone too big */
	ck_assert_int_eq(wire_recv_frame(sv[1], 1024, 0, &f, &err), -EMSGSIZE);
	free(payload);
	closepair(sv);
}
END_TEST

START_TEST(c1_eagain_and_eof)
{
	int sv[2];
	Vnic__Vmm__VmmMessage *m = NULL;
	Vnic__Worker__WorkerMessage *wm = NULL;
	struct wire_fds got;
	struct wire_err err;
	struct vmm_store s;

	tu_seqpair(sv);
	ck_assert_int_eq(wire_vmm_recv(sv[1], WIRE_PEER_VMM, &m, &got, &err), -EAGAIN);
	close(sv[0]);
	ck_assert_int_eq(wire_vmm_recv(sv[1], WIRE_PEER_VMM, &m, &got, &err), -EPIPE);
	ck_assert_int_eq(wire_worker_recv(sv[1], WIRE_PEER_WORKER, &wm, &got, &err), -EPIPE);
	vmm_hello(&s, 1);
	ck_assert_int_eq(wire_vmm_send(sv[1], &s.env, NULL, 0), -EPIPE);
	ck_assert_ptr_null(m);
	ck_assert_ptr_null(wm);
	close(sv[1]);
}
END_TEST

/* A full non-blocking socket: -EAGAIN, nothing half-sent. */
START_TEST(c1_send_eagain)
{
	struct vmm_store s;
	int sv[2], n = 0, r;
	Vnic__Vmm__VmmMessage *m;
	struct wire_fds got;
	struct wire_err err;

	tu_seqpair(sv);
	vmm_hello(&s, 1);
	while ((r = wire_vmm_send(sv[0], &s.env, NULL, 0)) == 0 && n < 1000000)
		n++;
	ck_assert_int_eq(r, -EAGAIN);
	ck_assert_int_gt(n, 0);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(wire_vmm_recv(sv[1], WIRE_PEER_VMM, &m, &got, &err), 0);
		wire_vmm_free(m);
	}
	ck_assert_int_eq(wire_vmm_recv(sv[1], WIRE_PEER_VMM, &m, &got, &err), -EAGAIN);
	closepair(sv);
}
END_TEST

/* C2 soak: 10,000 bad frames carrying fds, of every kind; every one is
 * rejected and the receiver's fd count does not move. */
START_TEST(c2_soak_10k_bad_frames)
{
	struct vmm_store add, hello;
	struct worker_store ready;
	enum wire_peer from;
	unsigned nfds;
	uint8_t *p_add, *p_hello, *p_ready, garbage[64];
	size_t l_add, l_hello, l_ready;
	int sv[2], fds[8], before, kinds = 9;
	struct timespec t0, t1;
	struct wire_err err;

	vmm_add_nic(&add, 1, 2, 2, VNIC__VMM__BACKEND__KIND_SOCKET); /* wants 7 */
	vmm_hello(&hello, 2);
	worker_case(&ready, 4, &from, &nfds);
	l_add = pack(&add.env.base, &p_add);
	l_hello = pack(&hello.env.base, &p_hello);
	l_ready = pack(&ready.env.base, &p_ready);
	memset(garbage, 0xff, sizeof(garbage));
	tu_seqpair(sv);
	mkmemfds(fds, 8);
	before = tu_fd_count();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int it = 0; it < 10000; it++) {
		unsigned n = 1 + (unsigned)it % 8;

		switch (it % kinds) {
		case 0: /* oversized prefix */
			send_raw(sv[0], WIRE_VMM_MSG_MAX + 1 + (uint32_t)it, garbage, 8, fds, n);
			expect_vmm_reject(sv[1], WIRE_PEER_VMM, -EMSGSIZE, &err);
			break;
		case 1: /* prefix mismatch */
			send_raw(sv[0], (uint32_t)l_add + 1, p_add, l_add, fds, n);
			expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EBADMSG, "payload bytes", &err);
			break;
		case 2: /* garbage protobuf */
			send_raw(sv[0], sizeof(garbage), garbage, sizeof(garbage), fds, n);
			expect_vmm_reject(sv[1], WIRE_PEER_VMM, -EBADMSG, &err);
			break;
		case 3: /* AddNic with the wrong fd count */
			send_raw(sv[0], (uint32_t)l_add, p_add, l_add, fds, n == 7 ? 8 : n);
			expect_vmm_reject(sv[1], WIRE_PEER_VMM, -EPROTO, &err);
			break;
		case 4: /* fds on Hello */
			send_raw(sv[0], (uint32_t)l_hello, p_hello, l_hello, fds, n);
			expect_vmm_reject(sv[1], WIRE_PEER_VMM, -EPROTO, &err);
			break;
		case 5: /* fds from a worker: MSG_CTRUNC */
			send_raw(sv[0], (uint32_t)l_ready, p_ready, l_ready, fds, n);
			expect_worker_reject(sv[1], WIRE_PEER_WORKER, -ENOBUFS, &err);
			break;
		case 6: /* shorter than the prefix */
			ck_assert_int_eq(fdpass_send(sv[0], garbage, 1 + (size_t)it % 3, fds, n), 0);
			expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EBADMSG, "shorter than", &err);
			break;
		case 7: /* empty envelope */
			send_raw(sv[0], 0, NULL, 0, fds, n);
			expect_vmm_reject_why(sv[1], WIRE_PEER_VMM, -EBADMSG, "no known message", &err);
			break;
		case 8: /* a Reply from the VMM */
			vmm_case(&hello, 8, &from, &nfds);
			send_packed(sv[0], &hello.env.base, fds, n);
			expect_vmm_reject(sv[1], WIRE_PEER_VMM, -EPROTO, &err);
			break;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_eq(tu_fd_count(), before);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 50);
	free(p_add);
	free(p_hello);
	free(p_ready);
	fdpass_close_all(fds, 8);
	closepair(sv);
}
END_TEST

/* ---------------------------------------------------------------- mac */

START_TEST(mac_parse_accepts)
{
	static const struct { const char *s; uint8_t mac[6]; } ok[] = {
		{ "02:00:00:00:00:01", { 2, 0, 0, 0, 0, 1 } },
		{ "2:0:0:0:0:1", { 2, 0, 0, 0, 0, 1 } },
		{ "52:54:00:AB:cd:Ef", { 0x52, 0x54, 0, 0xab, 0xcd, 0xef } },
		{ "ff:ff:ff:ff:ff:ff", { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } },
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint8_t mac[6];

		ck_assert_msg(mac_parse(ok[i].s, mac) == 0, "\"%s\" refused", ok[i].s);
		ck_assert_msg(!memcmp(mac, ok[i].mac, 6), "\"%s\" parsed wrong", ok[i].s);
	}
}
END_TEST

/* Everything but six 1-2 digit hex groups and five ':' is refused, also
 * what ether_aton_r alone would take (trailing text after the sixth byte). */
START_TEST(mac_parse_refuses)
{
	static const char *const bad[] = {
		"", ":", "02:00:00:00:00", "02:00:00:00:00:", "02:00:00:00:00:01:",
		"02:00:00:00:00:01:02", "02:00:00:00:00:011", "002:00:00:00:00:01",
		"02::00:00:00:01", "02:00:00:00:00:0g", "02-00-00-00-00-01", "0x2:0:0:0:0:1",
		"+2:0:0:0:0:1", " 02:00:00:00:00:01", "02:00:00:00:00:01 ", "02:00:00:00:00:1\n",
		"02:00:00:00:00:01x", "020000000001",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t mac[6] = { 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa };
		static const uint8_t same[6] = { 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa };

		ck_assert_msg(mac_parse(bad[i], mac) == -EINVAL, "\"%s\" accepted", bad[i]);
		ck_assert_msg(!memcmp(mac, same, 6), "\"%s\" changed mac[]", bad[i]);
	}
}
END_TEST

START_TEST(mac_format_two_digits)
{
	static const uint8_t m[6] = { 0x02, 0x0a, 0x00, 0x00, 0x00, 0xff };
	char buf[MAC_STR_LEN], small[9];
	uint8_t back[6];

	ck_assert_str_eq(mac_format(m, buf, sizeof(buf)), "02:0a:00:00:00:ff");
	ck_assert_int_eq(mac_parse(buf, back), 0);
	ck_assert_mem_eq(back, m, 6);
	ck_assert_str_eq(mac_format(m, small, sizeof(small)), "02:0a:00");
}
END_TEST

static Suite *wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *rt = tcase_create("roundtrip");
	TCase *c1 = tcase_create("c1_frames");
	TCase *c2 = tcase_create("c2_fds");
	TCase *mac = tcase_create("mac");

	tcase_add_loop_test(rt, c1_roundtrip_vmm, 0, VMM_CASES);
	tcase_add_test(rt, c1_roundtrip_add_nic_fields);
	tcase_add_loop_test(rt, c1_roundtrip_worker, 0, WORKER_CASES);
	tcase_add_test(rt, c2_config_layout);
	suite_add_tcase(s, rt);

	tcase_add_test(c1, c1_oversized_prefix);
	tcase_add_test(c1, c1_prefix_mismatch);
	tcase_add_test(c1, c1_truncated_frame);
	tcase_add_test(c1, c1_garbage_protobuf);
	tcase_add_test(c1, c1_garbage_fuzz);
	tcase_add_test(c1, c1_empty_envelope);
	tcase_add_test(c1, c1_unknown_request_body);
	tcase_add_test(c1, c1_wrong_direction);
	tcase_add_test(c1, c1_huge_repeated_size_cap);
	tcase_add_test(c1, c1_huge_repeated_alloc_cap);
	tcase_add_test(c1, c1_frame_at_and_above_max);
	tcase_add_test(c1, c1_eagain_and_eof);
	tcase_add_test(c1, c1_send_eagain);
	suite_add_tcase(s, c1);

	tcase_add_test(c2, c2_add_nic_fd_count);
	tcase_add_test(c2, c2_fds_on_fdless);
	tcase_add_test(c2, c2_config_fd_count);
	tcase_add_test(c2, c2_add_nic_beyond_scm_max);
	tcase_add_test(c2, c2_ctrunc);
	tcase_add_test(c2, c2_soak_10k_bad_frames);
	tcase_set_timeout(c2, 120);
	suite_add_tcase(s, c2);

	tcase_add_test(mac, mac_parse_accepts);
	tcase_add_test(mac, mac_parse_refuses);
	tcase_add_test(mac, mac_format_two_digits);
	suite_add_tcase(s, mac);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(wire_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
