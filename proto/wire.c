#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* ------------------------------------------------------------ errors */

static int wire_fail(struct wire_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int wire_fail(struct wire_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

static void wire_err_clear(struct wire_err *err)
{
	if (err) {
		err->code = 0;
		err->has_request_id = false;
		err->request_id = 0;
		err->msg[0] = '\0';
	}
}

void wire_fds_close(struct wire_fds *fds)
{
	fdpass_close_all(fds->fd, fds->n);
	fds->n = 0;
}

/* --------------------------------------------------------- allocator */

/*
 * The unpack allocator counts every byte protobuf-c asks for while
 * unpacking one frame, plus a per-allocation overhead for malloc's own
 * header, and fails once the total would pass the cap. Frees are not
 * credited back: the count is cumulative, which is simpler and only
 * stricter. protobuf-c (>= 1.4.1, CVE-2022-48468/CVE-2022-33070 fixed)
 * frees what it built when an allocation fails and returns NULL.
 *
 * Messages are freed with the same free function and no budget
 * (wire_free_allocator), so the budget lives only on the unpack stack.
 */
#define WIRE_ALLOC_OVERHEAD 16u

struct wire_budget {
	size_t used;
	size_t cap;
	bool exceeded;
	bool oom;
};

static void *wire_budget_alloc(void *data, size_t size)
{
	struct wire_budget *b = data;
	void *p;

	if (b) {
		size_t cost = size + WIRE_ALLOC_OVERHEAD;

		if (size > b->cap || cost > b->cap - b->used) {
			b->exceeded = true;
			return NULL;
		}
		b->used += cost;
	}
	p = malloc(size ? size : 1);
	if (!p && b)
		b->oom = true;
	return p;
}

static void wire_budget_free(void *data, void *p)
{
	free(p);
}

static ProtobufCAllocator wire_free_allocator = {
	.alloc = wire_budget_alloc,
	.free = wire_budget_free,
	.allocator_data = NULL,
};

static int wire_unpack(const ProtobufCMessageDescriptor *desc,
		       const struct wire_frame *f, ProtobufCMessage **ret_m,
		       struct wire_err *err)
{
	struct wire_budget b = { .cap = WIRE_UNPACK_MEM_MAX };
	ProtobufCAllocator a = {
		.alloc = wire_budget_alloc,
		.free = wire_budget_free,
		.allocator_data = &b,
	};
	ProtobufCMessage *m;

	m = protobuf_c_message_unpack(desc, &a, f->len, f->payload);
	if (!m) {
		if (b.exceeded)
			return wire_fail(err, -EMSGSIZE,
					 "%zu-byte %s would unpack to more than %u bytes",
					 f->len, desc->short_name, WIRE_UNPACK_MEM_MAX);
		if (b.oom)
			return wire_fail(err, -ENOMEM, "out of memory unpacking %s",
					 desc->short_name);
		return wire_fail(err, -EBADMSG, "%zu-byte payload is not a valid %s",
				 f->len, desc->short_name);
	}
	if (!protobuf_c_message_check(m)) {
		protobuf_c_message_free_unpacked(m, &wire_free_allocator);
		return wire_fail(err, -EBADMSG, "%s fails protobuf-c's check",
				 desc->short_name);
	}
	*ret_m = m;
	return 0;
}

/* -------------------------------------------------------------- send */

int wire_send(int sock, const ProtobufCMessage *m, size_t max,
	      const int *fds, unsigned nfds)
{
	uint8_t stackbuf[512];
	uint8_t *buf = stackbuf;
	size_t len = protobuf_c_message_get_packed_size(m);
	int r;

	if (len > max || len > UINT32_MAX)
		return -EMSGSIZE;
	if (len > sizeof(stackbuf) - WIRE_HDR_LEN) {
		buf = malloc(WIRE_HDR_LEN + len);
		if (!buf)
			return -ENOMEM;
	}
	if (protobuf_c_message_pack(m, buf + WIRE_HDR_LEN) != len) {
		r = -EINVAL;
		goto out_free;
	}
	buf[0] = (uint8_t)(len >> 24);
	buf[1] = (uint8_t)(len >> 16);
	buf[2] = (uint8_t)(len >> 8);
	buf[3] = (uint8_t)len;
	r = fdpass_send(sock, buf, WIRE_HDR_LEN + len, fds, nfds);
out_free:
	if (buf != stackbuf)
		free(buf);
	return r;
}

/* ----------------------------------------------------------- receive */

int wire_recv_frame(int sock, size_t max, unsigned max_fds,
		    struct wire_frame *ret_f, struct wire_err *err)
{
	struct wire_frame f = { .buf = NULL };
	size_t buflen, n = 0;
	uint32_t prefix;
	int r;

	wire_err_clear(err);
	if (max > UINT32_MAX || max_fds > WIRE_MAX_FDS)
		return wire_fail(err, -EINVAL, "bad channel limits");
	/* One byte more than the largest frame: anything longer shows as
	 * MSG_TRUNC instead of fitting exactly. */
	buflen = WIRE_HDR_LEN + max + 1;
	f.buf = malloc(buflen);
	if (!f.buf)
		return wire_fail(err, -ENOMEM, "out of memory for a frame buffer");

	r = fdpass_recv(sock, f.buf, buflen, f.fds.fd, max_fds, &n, &f.fds.n);
	if (r < 0) {
		free(f.buf);
		switch (r) {
		case -EAGAIN:
			return wire_fail(err, r, "no frame to read");
		case -EPIPE:
			return wire_fail(err, r, "peer closed the channel");
		case -EMSGSIZE:
			return wire_fail(err, r, "frame above the channel maximum of %zu bytes",
					 max);
		case -ENOBUFS:
			return wire_fail(err, r, "frame carried more than %u fds", max_fds);
		case -EBADMSG:
			return wire_fail(err, r, "frame carried control data other than fds");
		default:
			return wire_fail(err, r, "recvmsg: %s", strerror(-r));
		}
	}

	if (n < WIRE_HDR_LEN) {
		r = wire_fail(err, -EBADMSG,
			      "%zu-byte frame is shorter than its length prefix", n);
		goto out_release;
	}
	prefix = (uint32_t)f.buf[0] << 24 | (uint32_t)f.buf[1] << 16 |
		 (uint32_t)f.buf[2] << 8 | (uint32_t)f.buf[3];
	if (prefix > max) {
		r = wire_fail(err, -EMSGSIZE,
			      "length prefix %u above the channel maximum of %zu bytes",
			      prefix, max);
		goto out_release;
	}
	if (prefix != n - WIRE_HDR_LEN) {
		r = wire_fail(err, -EBADMSG,
			      "length prefix %u but %zu payload bytes", prefix,
			      n - WIRE_HDR_LEN);
		goto out_release;
	}
	f.payload = f.buf + WIRE_HDR_LEN;
	f.len = prefix;
	*ret_f = f;
	return 0;

out_release:
	wire_frame_release(&f);
	return r;
}

void wire_frame_release(struct wire_frame *f)
{
	wire_fds_close(&f->fds);
	free(f->buf);
	f->buf = NULL;
	f->payload = NULL;
	f->len = 0;
}

/* ------------------------------------------------------- VMM channel */

int wire_add_nic_layout(const Vnic__Vmm__AddNic *a, struct wire_fd_layout *ret)
{
	size_t r = a->n_regions, q = a->n_queues, b = 0;

	if (a->backend &&
	    (a->backend->kind_case == VNIC__VMM__BACKEND__KIND_SOCKET ||
	     a->backend->kind_case == VNIC__VMM__BACKEND__KIND_TAP_FD))
		b = 1;
	/* Each term bounded first, so the sum cannot wrap. */
	if (r > WIRE_MAX_FDS || q > WIRE_MAX_FDS || r + 2 * q + b > WIRE_MAX_FDS)
		return -E2BIG;
	ret->nregions = (unsigned)r;
	ret->queue0 = (unsigned)r;
	ret->nqueues = (unsigned)q;
	ret->backend = b ? (int)(r + 2 * q) : -1;
	ret->stats = -1;
	ret->inflight = -1;
	ret->total = (unsigned)(r + 2 * q + b);
	return 0;
}

int wire_vmm_expected_fds(const Vnic__Vmm__VmmMessage *m)
{
	struct wire_fd_layout l;
	int r;

	switch (m->msg_case) {
	case VNIC__VMM__VMM_MESSAGE__MSG_REQUEST:
		if (!m->request)
			return -EINVAL;
		if (m->request->body_case != VNIC__VMM__REQUEST__BODY_ADD_NIC)
			return 0;
		if (!m->request->add_nic)
			return -EINVAL;
		r = wire_add_nic_layout(m->request->add_nic, &l);
		return r < 0 ? r : (int)l.total;
	case VNIC__VMM__VMM_MESSAGE__MSG_REPLY:
	case VNIC__VMM__VMM_MESSAGE__MSG_EVENT:
		return 0;
	default:
		return -EINVAL;
	}
}

/* Unpack, check direction and arm: step 4. */
static int wire_vmm_check_arm(const Vnic__Vmm__VmmMessage *m, enum wire_peer from,
			      struct wire_err *err)
{
	switch (m->msg_case) {
	case VNIC__VMM__VMM_MESSAGE__MSG_REQUEST:
		if (!m->request)
			break;
		if (from != WIRE_PEER_VMM)
			return wire_fail(err, -EPROTO, "a Request from the supervisor");
		return 0;
	case VNIC__VMM__VMM_MESSAGE__MSG_REPLY:
	case VNIC__VMM__VMM_MESSAGE__MSG_EVENT:
		if ((m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REPLY && !m->reply) ||
		    (m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_EVENT && !m->event))
			break;
		if (from != WIRE_PEER_SUPERVISOR)
			return wire_fail(err, -EPROTO, "a %s from the VMM",
					 m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REPLY ?
					 "Reply" : "Event");
		return 0;
	default:
		break;
	}
	return wire_fail(err, -EBADMSG, "VmmMessage with no known message in it");
}

int wire_vmm_unpack(struct wire_frame *f, enum wire_peer from,
		    Vnic__Vmm__VmmMessage **ret_m, struct wire_err *err)
{
	ProtobufCMessage *pm = NULL;
	Vnic__Vmm__VmmMessage *m;
	int r, want;

	wire_err_clear(err);
	if (from != WIRE_PEER_VMM && from != WIRE_PEER_SUPERVISOR) {
		r = wire_fail(err, -EINVAL, "bad peer for the VMM channel");
		goto out_close;
	}
	r = wire_unpack(&vnic__vmm__vmm_message__descriptor, f, &pm, err);
	if (r < 0)
		goto out_close;
	m = (Vnic__Vmm__VmmMessage *)pm;
	r = wire_vmm_check_arm(m, from, err);
	if (r < 0)
		goto out_free;

	/* Step 5: the exact fd count. A Request's id is reported so that the
	 * supervisor can answer it (REJECT, TESTPLAN C2). */
	want = wire_vmm_expected_fds(m);
	if (want < 0 || (unsigned)want != f->fds.n) {
		if (m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REQUEST && err) {
			err->has_request_id = true;
			err->request_id = m->request->request_id;
		}
		if (want < 0)
			r = wire_fail(err, -EPROTO,
				      "message needs more than %u fds", WIRE_MAX_FDS);
		else
			r = wire_fail(err, -EPROTO, "message needs %d fds, frame carried %u",
				      want, f->fds.n);
		goto out_free;
	}
	*ret_m = m;
	return 0;

out_free:
	wire_vmm_free(m);
out_close:
	wire_fds_close(&f->fds);
	return r;
}

int wire_vmm_recv(int sock, enum wire_peer from, Vnic__Vmm__VmmMessage **ret_m,
		  struct wire_fds *ret_fds, struct wire_err *err)
{
	struct wire_frame f;
	Vnic__Vmm__VmmMessage *m;
	int r;

	r = wire_recv_frame(sock, WIRE_VMM_MSG_MAX,
			    from == WIRE_PEER_VMM ? WIRE_MAX_FDS : 0, &f, err);
	if (r < 0)
		return r;
	r = wire_vmm_unpack(&f, from, &m, err);
	if (r < 0) {
		wire_frame_release(&f);
		return r;
	}
	*ret_fds = f.fds;
	f.fds.n = 0;
	wire_frame_release(&f);
	*ret_m = m;
	return 0;
}

int wire_vmm_send(int sock, const Vnic__Vmm__VmmMessage *m,
		  const int *fds, unsigned nfds)
{
	int want = wire_vmm_expected_fds(m);

	if (want < 0)
		return want;
	if ((unsigned)want != nfds)
		return -EINVAL;
	return wire_send(sock, &m->base, WIRE_VMM_MSG_MAX, fds, nfds);
}

Vnic__Vmm__VmmMessage *wire_vmm_free(Vnic__Vmm__VmmMessage *m)
{
	if (m)
		protobuf_c_message_free_unpacked(&m->base, &wire_free_allocator);
	return NULL;
}

/* ---------------------------------------------------- worker channel */

int wire_config_layout(const Vnic__Worker__Config *c, struct wire_fd_layout *ret)
{
	size_t r = c->n_regions, q = c->n_queues, i = c->inflight_size > 0;

	if (c->backend != VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_TAP &&
	    c->backend != VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_SOCKET)
		return -EINVAL;
	if (r > WIRE_MAX_FDS || q > WIRE_MAX_FDS || r + 2 * q + 2 + i > WIRE_MAX_FDS)
		return -E2BIG;
	ret->nregions = (unsigned)r;
	ret->queue0 = (unsigned)r;
	ret->nqueues = (unsigned)q;
	ret->backend = (int)(r + 2 * q);
	ret->stats = (int)(r + 2 * q + 1);
	/* Optional and last: a Config without it is exactly the old one. */
	ret->inflight = i ? (int)(r + 2 * q + 2) : -1;
	ret->total = (unsigned)(r + 2 * q + 2 + i);
	return 0;
}

/* The sender of each arm. */
static int wire_worker_arm_sender(Vnic__Worker__WorkerMessage__MsgCase c,
				  enum wire_peer *ret)
{
	switch (c) {
	case VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_START:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_STOP:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_POLICY:
		*ret = WIRE_PEER_SUPERVISOR;
		return 0;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_READY:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_STOPPED:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_QUEUE_BROKEN:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_LOG:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_ERROR:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_FAULT_HIT:
	case VNIC__WORKER__WORKER_MESSAGE__MSG_POLICY_SET:
		*ret = WIRE_PEER_WORKER;
		return 0;
	default:
		return -EINVAL;
	}
}

int wire_worker_expected_fds(const Vnic__Worker__WorkerMessage *m)
{
	struct wire_fd_layout l;
	enum wire_peer sender;
	int r;

	if (wire_worker_arm_sender(m->msg_case, &sender) < 0)
		return -EINVAL;
	if (m->msg_case != VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG)
		return 0;
	if (!m->config)
		return -EINVAL;
	r = wire_config_layout(m->config, &l);
	return r < 0 ? r : (int)l.total;
}

int wire_worker_unpack(struct wire_frame *f, enum wire_peer from,
		       Vnic__Worker__WorkerMessage **ret_m, struct wire_err *err)
{
	ProtobufCMessage *pm = NULL;
	Vnic__Worker__WorkerMessage *m;
	enum wire_peer sender;
	int r, want;

	wire_err_clear(err);
	if (from != WIRE_PEER_SUPERVISOR && from != WIRE_PEER_WORKER) {
		r = wire_fail(err, -EINVAL, "bad peer for the worker channel");
		goto out_close;
	}
	r = wire_unpack(&vnic__worker__worker_message__descriptor, f, &pm, err);
	if (r < 0)
		goto out_close;
	m = (Vnic__Worker__WorkerMessage *)pm;

	/* Step 4. protobuf-c allocates an empty submessage for a set arm, so a
	 * known case always has its pointer; any arm's pointer will do. */
	if (wire_worker_arm_sender(m->msg_case, &sender) < 0 || !m->config) {
		r = wire_fail(err, -EBADMSG, "WorkerMessage with no known message in it");
		goto out_free;
	}
	if (sender != from) {
		r = wire_fail(err, -EPROTO, "%s from the %s",
			      protobuf_c_message_descriptor_get_field(
				      &vnic__worker__worker_message__descriptor,
				      m->msg_case)->name,
			      from == WIRE_PEER_WORKER ? "worker" : "supervisor");
		goto out_free;
	}

	/* Step 5. */
	want = wire_worker_expected_fds(m);
	if (want == -E2BIG) {
		r = wire_fail(err, -EPROTO, "Config needs more than %u fds",
			      WIRE_MAX_FDS);
		goto out_free;
	}
	if (want < 0) {
		r = wire_fail(err, -EBADMSG, "Config without a backend kind");
		goto out_free;
	}
	if ((unsigned)want != f->fds.n) {
		r = wire_fail(err, -EPROTO, "message needs %d fds, frame carried %u",
			      want, f->fds.n);
		goto out_free;
	}
	*ret_m = m;
	return 0;

out_free:
	wire_worker_free(m);
out_close:
	wire_fds_close(&f->fds);
	return r;
}

int wire_worker_recv(int sock, enum wire_peer from,
		     Vnic__Worker__WorkerMessage **ret_m,
		     struct wire_fds *ret_fds, struct wire_err *err)
{
	struct wire_frame f;
	Vnic__Worker__WorkerMessage *m;
	int r;

	/* Nothing a worker sends carries fds: make no room for any. */
	r = wire_recv_frame(sock, WIRE_WORKER_MSG_MAX,
			    from == WIRE_PEER_SUPERVISOR ? WIRE_MAX_FDS : 0, &f, err);
	if (r < 0)
		return r;
	r = wire_worker_unpack(&f, from, &m, err);
	if (r < 0) {
		wire_frame_release(&f);
		return r;
	}
	*ret_fds = f.fds;
	f.fds.n = 0;
	wire_frame_release(&f);
	*ret_m = m;
	return 0;
}

int wire_worker_send(int sock, const Vnic__Worker__WorkerMessage *m,
		     const int *fds, unsigned nfds)
{
	int want = wire_worker_expected_fds(m);

	if (want < 0)
		return want;
	if ((unsigned)want != nfds)
		return -EINVAL;
	return wire_send(sock, &m->base, WIRE_WORKER_MSG_MAX, fds, nfds);
}

Vnic__Worker__WorkerMessage *wire_worker_free(Vnic__Worker__WorkerMessage *m)
{
	if (m)
		protobuf_c_message_free_unpacked(&m->base, &wire_free_allocator);
	return NULL;
}
