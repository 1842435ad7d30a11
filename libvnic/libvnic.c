/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libvnic: VMM-side client of the vnicd control protocol. See libvnic.h.
 *
 * Library code: never logs, never exits, never raises SIGPIPE (wire sends
 * with MSG_NOSIGNAL). The socket is non-blocking; blocking calls poll()
 * with a deadline.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "libvnic.h"
#include "policy_pb.h"
#include "wire.h"

/* libvnic.h is installed and carries the version as literals: they must
 * be configure's (AC_INIT). Bump both together. */
#if VNIC_VERSION_MAJOR != PACKAGE_VERSION_MAJOR || VNIC_VERSION_MINOR != PACKAGE_VERSION_MINOR || \
	VNIC_VERSION_PATCH != PACKAGE_VERSION_PATCH
#error "libvnic.h VNIC_VERSION_* differ from configure.ac's AC_INIT version"
#endif

const char *vnic_version(void)
{
	_Static_assert(sizeof(VNIC_VERSION_STRING) == sizeof(PACKAGE_VERSION),
		       "libvnic.h VNIC_VERSION_STRING differs from PACKAGE_VERSION");
	return PACKAGE_VERSION;
}

#define VNIC_TIMEOUT_DEFAULT_MS 10000u
#define VNIC_EVENTQ_MAX 1024u /* events kept while a call waits; oldest dropped */

struct evq_item {
	struct evq_item *next;
	struct vnic_event ev;
};

struct vnic_conn {
	int fd;
	unsigned timeout_ms;
	uint64_t next_id;
	uint32_t version;
	char err[256];
	vnic_event_fn cb;
	void *cb_arg;
	struct evq_item *evq_head, *evq_tail;
	unsigned evq_len;
};

/* protobuf-c wants char *; string literals are const here. */
static char empty_str[1];

static int set_err(struct vnic_conn *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int set_err(struct vnic_conn *c, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return rc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int vnic_connect(const char *path, struct vnic_conn **ret_conn)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vnic_conn *c;
	int fd, rc;

	if (!path)
		path = VNIC_DEFAULT_SOCKET;
	if (!ret_conn || strlen(path) >= sizeof(sa.sun_path))
		return -EINVAL;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	/* Non-blocking after connect: every wait below has a deadline. */
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	c->timeout_ms = VNIC_TIMEOUT_DEFAULT_MS;
	c->next_id = 1;
	*ret_conn = c;
	return 0;
}

struct vnic_conn *vnic_close(struct vnic_conn *c)
{
	struct evq_item *it;

	if (!c)
		return NULL;
	while ((it = c->evq_head)) {
		c->evq_head = it->next;
		free(it);
	}
	close(c->fd);
	free(c);
	return NULL;
}

void vnic_set_timeout(struct vnic_conn *c, unsigned timeout_ms)
{
	if (timeout_ms)
		c->timeout_ms = timeout_ms;
}

const char *vnic_last_error(const struct vnic_conn *c)
{
	return c->err;
}

int vnic_fd(const struct vnic_conn *c)
{
	return c->fd;
}

void vnic_set_event_cb(struct vnic_conn *c, vnic_event_fn cb, void *arg)
{
	c->cb = cb;
	c->cb_arg = arg;
}

const char *vnic_nic_state_name(enum vnic_nic_state s)
{
	switch (s) {
	case VNIC_NIC_STARTING: return "STARTING";
	case VNIC_NIC_RUNNING: return "RUNNING";
	case VNIC_NIC_STOPPING: return "STOPPING";
	case VNIC_NIC_GONE: return "GONE";
	case VNIC_NIC_FAILED: return "FAILED";
	case VNIC_NIC_RESTARTING: return "RESTARTING";
	case VNIC_NIC_STALLED: return "STALLED";
	case VNIC_NIC_AWAITING_FRONTEND: return "AWAITING_FRONTEND";
	default: return "UNSPECIFIED";
	}
}

static void copy_str(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

/* Convert and queue one event (bounded: the oldest goes first). */
static void evq_push(struct vnic_conn *c, const Vnic__Vmm__Event *e)
{
	struct evq_item *it;
	struct vnic_event *v;

	switch (e->body_case) {
	case VNIC__VMM__EVENT__BODY_NIC_FAILED:
	case VNIC__VMM__EVENT__BODY_QUEUE_NEEDS_RESET:
	case VNIC__VMM__EVENT__BODY_NIC_RESTARTED:
	case VNIC__VMM__EVENT__BODY_NIC_STATE_CHANGED:
	case VNIC__VMM__EVENT__BODY_NIC_STALLED:
		break;
	default:
		return; /* a newer supervisor's event: ignored (vmm.proto) */
	}
	if (c->evq_len >= VNIC_EVENTQ_MAX) {
		it = c->evq_head;
		c->evq_head = it->next;
		if (!c->evq_head)
			c->evq_tail = NULL;
		c->evq_len--;
		free(it);
	}
	it = calloc(1, sizeof(*it));
	if (!it)
		return;
	v = &it->ev;
	switch (e->body_case) {
	case VNIC__VMM__EVENT__BODY_NIC_FAILED:
		v->type = VNIC_EVENT_NIC_FAILED;
		copy_str(v->id, sizeof(v->id), e->nic_failed->id);
		copy_str(v->reason, sizeof(v->reason), e->nic_failed->reason);
		v->signal = e->nic_failed->signal;
		v->exit_status = e->nic_failed->exit_status;
		v->syscall = e->nic_failed->syscall;
		v->pair = e->nic_failed->pair;
		break;
	case VNIC__VMM__EVENT__BODY_QUEUE_NEEDS_RESET:
		v->type = VNIC_EVENT_QUEUE_NEEDS_RESET;
		copy_str(v->id, sizeof(v->id), e->queue_needs_reset->id);
		copy_str(v->reason, sizeof(v->reason), e->queue_needs_reset->reason);
		v->queue = e->queue_needs_reset->queue;
		v->pair = v->queue / 2;
		break;
	case VNIC__VMM__EVENT__BODY_NIC_RESTARTED:
		v->type = VNIC_EVENT_NIC_RESTARTED;
		copy_str(v->id, sizeof(v->id), e->nic_restarted->id);
		v->restarts = e->nic_restarted->restarts;
		v->restart_us = e->nic_restarted->restart_us;
		v->pair = e->nic_restarted->pair;
		break;
	case VNIC__VMM__EVENT__BODY_NIC_STALLED:
		v->type = VNIC_EVENT_NIC_STALLED;
		copy_str(v->id, sizeof(v->id), e->nic_stalled->id);
		v->silent_ms = e->nic_stalled->silent_ms;
		v->pair = e->nic_stalled->pair;
		break;
	default:
		v->type = VNIC_EVENT_NIC_STATE_CHANGED;
		copy_str(v->id, sizeof(v->id), e->nic_state_changed->id);
		copy_str(v->reason, sizeof(v->reason), e->nic_state_changed->reason);
		v->old_state = (enum vnic_nic_state)e->nic_state_changed->old_state;
		v->new_state = (enum vnic_nic_state)e->nic_state_changed->new_state;
		v->pair = e->nic_state_changed->pair;
		break;
	}
	if (c->evq_tail)
		c->evq_tail->next = it;
	else
		c->evq_head = it;
	c->evq_tail = it;
	c->evq_len++;
}

static int evq_deliver(struct vnic_conn *c)
{
	struct evq_item *it;
	int n = 0;

	while ((it = c->evq_head)) {
		c->evq_head = it->next;
		if (!c->evq_head)
			c->evq_tail = NULL;
		c->evq_len--;
		if (c->cb)
			c->cb(c, &it->ev, c->cb_arg);
		free(it);
		n++;
	}
	return n;
}

/* Wait for readiness until deadline. Returns 0, -ETIMEDOUT or -errno. */
static int wait_fd(struct vnic_conn *c, short what, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = c->fd, .events = what };
		uint64_t t = now_ms();
		int r;

		if (t >= deadline)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)(deadline - t));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* Read one message; events are queued and reported as 0 with *ret_m NULL. */
static int recv_one(struct vnic_conn *c, Vnic__Vmm__VmmMessage **ret_m)
{
	Vnic__Vmm__VmmMessage *m = NULL;
	struct wire_fds fds;
	struct wire_err err;
	int rc;

	memset(&err, 0, sizeof(err));
	fds.n = 0;
	rc = wire_vmm_recv(c->fd, WIRE_PEER_SUPERVISOR, &m, &fds, &err);
	if (rc == -ECONNRESET) {
		/* The supervisor closed with our request unread: the kernel
		 * reports that once, ahead of messages still queued for us
		 * (its last reply, e.g. PERMISSION_DENIED). Read on. */
		memset(&err, 0, sizeof(err));
		fds.n = 0;
		rc = wire_vmm_recv(c->fd, WIRE_PEER_SUPERVISOR, &m, &fds, &err);
		if (rc == -EAGAIN || rc == -ECONNRESET)
			rc = -EPIPE;
	}
	if (rc == -EAGAIN)
		return rc;
	if (rc == -EPIPE || rc == -ECONNRESET)
		return set_err(c, -EPIPE, "the supervisor closed the connection");
	if (rc)
		return set_err(c, -EPROTO, "bad message from the supervisor: %s", err.msg);
	wire_fds_close(&fds); /* supervisor messages carry none */
	if (m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_EVENT) {
		evq_push(c, m->event);
		wire_vmm_free(m);
		*ret_m = NULL;
		return 0;
	}
	*ret_m = m;
	return 0;
}

/*
 * Send one request and wait for its reply. Replies with another id (late
 * answers to a call that timed out) are dropped; a reply with id 0 is the
 * supervisor speaking about the connection (e.g. PERMISSION_DENIED, a
 * rejected frame) and answers whatever we wait for.
 * Returns: 0 with *ret_m (free with wire_vmm_free) whose reply code may be
 * an error; or a negative errno.
 */
static int call(struct vnic_conn *c, Vnic__Vmm__Request *req, const int *fds, unsigned nfds,
		unsigned timeout_ms, Vnic__Vmm__VmmMessage **ret_m)
{
	Vnic__Vmm__VmmMessage m;
	uint64_t deadline = now_ms() + timeout_ms;
	int rc;

	req->request_id = c->next_id++;
	req->version = c->version;
	vnic__vmm__vmm_message__init(&m);
	m.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REQUEST;
	m.request = req;
	for (;;) {
		rc = wire_vmm_send(c->fd, &m, fds, nfds);
		if (rc != -EAGAIN)
			break;
		rc = wait_fd(c, POLLOUT, deadline);
		if (rc)
			return set_err(c, rc, "sending the request: %s", strerror(-rc));
	}
	if (rc == -EPIPE || rc == -ECONNRESET) {
		/* Closed on us: a last word (e.g. PERMISSION_DENIED, reply
		 * id 0) may still wait in our receive queue. */
		for (int i = 0; i < 16; i++) {
			Vnic__Vmm__VmmMessage *r = NULL;

			if (recv_one(c, &r) < 0)
				break;
			if (r && r->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REPLY &&
			    r->reply->request_id == 0) {
				*ret_m = r;
				return 0;
			}
			wire_vmm_free(r);
		}
		return set_err(c, -EPIPE, "the supervisor closed the connection");
	}
	if (rc)
		return set_err(c, rc, "sending the request: %s", strerror(-rc));

	for (;;) {
		Vnic__Vmm__VmmMessage *r = NULL;

		rc = recv_one(c, &r);
		if (rc == -EAGAIN) {
			rc = wait_fd(c, POLLIN, deadline);
			if (rc)
				return set_err(c, rc, "no reply from the supervisor: %s",
					       strerror(-rc));
			continue;
		}
		if (rc)
			return rc;
		if (!r)
			continue; /* an event, queued */
		if (r->msg_case != VNIC__VMM__VMM_MESSAGE__MSG_REPLY ||
		    (r->reply->request_id != req->request_id && r->reply->request_id != 0)) {
			wire_vmm_free(r);
			continue;
		}
		*ret_m = r;
		return 0;
	}
}

/* The reply's status: 0, or its code with the error text kept. */
/* How long a removal may take to be answered: the worker's stop deadline
 * (vnicd's default 5 s when 0), 5 s more for the kill and reap, and never
 * less than the connection's own timeout. */
static unsigned remove_wait_ms(const struct vnic_conn *c, uint32_t deadline_ms)
{
	unsigned wait = (deadline_ms ? deadline_ms : 5000) + 5000;

	return wait < c->timeout_ms ? c->timeout_ms : wait;
}

static int reply_code(struct vnic_conn *c, const Vnic__Vmm__Reply *r, const char *what)
{
	if (r->code == VNIC__VMM__STATUS__STATUS_OK) {
		c->err[0] = '\0';
		return 0;
	}
	set_err(c, 0, "%s: %s", what, r->error[0] ? r->error : "error");
	return r->code > 0 ? (int)r->code : VNIC_STATUS_INTERNAL;
}

int vnic_hello(struct vnic_conn *c, const char *client, struct vnic_hello_info *ret)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__Hello h;
	Vnic__Vmm__VmmMessage *m = NULL;
	char cl[128];
	int rc;

	vnic__vmm__request__init(&req);
	vnic__vmm__hello__init(&h);
	snprintf(cl, sizeof(cl), "%s", client ? client : "libvnic");
	h.min_version = WIRE_VMM_VERSION;
	h.max_version = WIRE_VMM_VERSION;
	h.client = cl;
	req.body_case = VNIC__VMM__REQUEST__BODY_HELLO;
	req.hello = &h;
	rc = call(c, &req, NULL, 0, c->timeout_ms, &m);
	if (rc)
		return rc;
	rc = reply_code(c, m->reply, "Hello");
	if (rc == 0 && m->reply->body_case != VNIC__VMM__REPLY__BODY_HELLO)
		rc = set_err(c, -EPROTO, "Hello: reply without a body");
	if (rc == 0) {
		const Vnic__Vmm__HelloReply *hr = m->reply->hello;

		c->version = hr->version;
		if (ret) {
			memset(ret, 0, sizeof(*ret));
			ret->version = hr->version;
			copy_str(ret->server, sizeof(ret->server), hr->server);
			ret->device_features = hr->device_features;
			ret->max_regions = hr->max_regions;
			ret->max_queues = hr->max_queues;
			ret->max_queue_size = hr->max_queue_size;
			ret->max_message_size = hr->max_message_size;
			ret->max_fds = hr->max_fds;
			ret->vnicd_major = hr->version_major;
			ret->vnicd_minor = hr->version_minor;
			ret->vnicd_patch = hr->version_patch;
			copy_str(ret->vnicd_version, sizeof(ret->vnicd_version),
				 hr->version_string);
		}
	}
	wire_vmm_free(m);
	evq_deliver(c);
	return rc;
}

/* AddNic with nb backend fds (SOCKET, TAP_FD): one per queue pair. */
static int add_nic(struct vnic_conn *c, const struct vnic_nic_config *cfg, const int *bfds,
		   unsigned nb, char *err, size_t errlen)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__AddNic a;
	Vnic__Vmm__Backend be;
	Vnic__Vmm__TapBackend tap;
	Vnic__Vmm__SocketBackend sock;
	Vnic__Vmm__TapFdBackend tapfd;
	Vnic__Vmm__AfPacketBackend afp;
	Vnic__Vmm__Policy pol;
	Vnic__Vmm__MemRegion *regs = NULL, **rp = NULL;
	Vnic__Vmm__Queue *qs = NULL, **qp = NULL;
	Vnic__Vmm__VmmMessage *m = NULL;
	char id[128], tapname[64], netns[128];
	uint8_t mac[6];
	int *fds = NULL;
	unsigned nfds = 0, maxfds;
	int rc;

	if (!cfg || !cfg->id || (cfg->nregions && !cfg->regions) ||
	    (cfg->nqueues && !cfg->queues)) {
		rc = set_err(c, -EINVAL, "vnic_add_nic: missing configuration");
		goto out;
	}
	/* Only a socket or a tap fd travels; one per queue pair. */
	if (cfg->backend != VNIC_BACKEND_SOCKET && cfg->backend != VNIC_BACKEND_TAP_FD)
		nb = 0;
	else if (cfg->nqueues > 2 && nb != cfg->nqueues / 2) {
		rc = set_err(c, -EINVAL,
			     "vnic_add_nic: %u queues need %u backend fds (one per queue pair), "
			     "not %u: vnic_add_nic_backends", cfg->nqueues, cfg->nqueues / 2, nb);
		goto out;
	}
	/* Each count bounded first: their sum cannot wrap. */
	if (cfg->nregions > WIRE_MAX_FDS || cfg->nqueues > WIRE_MAX_FDS || nb > WIRE_MAX_FDS) {
		rc = set_err(c, -E2BIG, "vnic_add_nic: %u regions, %u queues, %u backend fds: "
			     "at most %u fds fit one message", cfg->nregions, cfg->nqueues, nb,
			     WIRE_MAX_FDS);
		goto out;
	}
	maxfds = cfg->nregions + 2 * cfg->nqueues + nb;
	if (maxfds > WIRE_MAX_FDS) {
		rc = set_err(c, -E2BIG, "vnic_add_nic: %u fds, at most %u fit one message",
			     maxfds, WIRE_MAX_FDS);
		goto out;
	}
	regs = calloc(cfg->nregions + 1, sizeof(*regs));
	rp = calloc(cfg->nregions + 1, sizeof(*rp));
	qs = calloc(cfg->nqueues + 1, sizeof(*qs));
	qp = calloc(cfg->nqueues + 1, sizeof(*qp));
	fds = calloc(maxfds, sizeof(*fds));
	if (!regs || !rp || !qs || !qp || !fds) {
		rc = set_err(c, -ENOMEM, "out of memory");
		goto out;
	}
	vnic__vmm__request__init(&req);
	vnic__vmm__add_nic__init(&a);
	vnic__vmm__backend__init(&be);
	snprintf(id, sizeof(id), "%s", cfg->id);
	memcpy(mac, cfg->mac, 6);
	a.id = id;
	a.mac.len = 6;
	a.mac.data = mac;
	a.mtu = cfg->mtu;
	a.features_offered = cfg->features_offered;
	a.features_acked = cfg->features_acked;
	/* fd order of vmm.proto AddNic: regions, (kick, call) per queue, backend. */
	for (unsigned i = 0; i < cfg->nregions; i++) {
		const struct vnic_region *g = &cfg->regions[i];

		wire_region_pb(&regs[i], g->gpa, g->size, g->offset);
		rp[i] = &regs[i];
		fds[nfds++] = g->fd;
	}
	for (unsigned j = 0; j < cfg->nqueues; j++) {
		const struct vnic_queue *q = &cfg->queues[j];

		wire_queue_pb(&qs[j], q->index, q->size, q->desc_gpa, q->avail_gpa, q->used_gpa,
			      q->avail_idx);
		qp[j] = &qs[j];
		fds[nfds++] = q->kick_fd;
		fds[nfds++] = q->call_fd;
	}
	a.n_regions = cfg->nregions;
	a.regions = rp;
	a.n_queues = cfg->nqueues;
	a.queues = qp;
	switch (cfg->backend) {
	case VNIC_BACKEND_TAP:
		vnic__vmm__tap_backend__init(&tap);
		snprintf(tapname, sizeof(tapname), "%s", cfg->tap_name ? cfg->tap_name : "");
		snprintf(netns, sizeof(netns), "%s", cfg->netns ? cfg->netns : "");
		tap.name = tapname;
		tap.netns = netns;
		be.kind_case = VNIC__VMM__BACKEND__KIND_TAP;
		be.tap = &tap;
		break;
	case VNIC_BACKEND_AF_PACKET:
		vnic__vmm__af_packet_backend__init(&afp);
		snprintf(tapname, sizeof(tapname), "%s", cfg->tap_name ? cfg->tap_name : "");
		snprintf(netns, sizeof(netns), "%s", cfg->netns ? cfg->netns : "");
		afp.ifname = tapname;
		afp.netns = netns;
		be.kind_case = VNIC__VMM__BACKEND__KIND_AF_PACKET;
		be.af_packet = &afp;
		break;
	case VNIC_BACKEND_SOCKET:
		vnic__vmm__socket_backend__init(&sock);
		be.kind_case = VNIC__VMM__BACKEND__KIND_SOCKET;
		be.socket = &sock;
		for (unsigned k = 0; k < nb; k++)
			fds[nfds++] = bfds[k];
		break;
	case VNIC_BACKEND_TAP_FD:
		vnic__vmm__tap_fd_backend__init(&tapfd);
		be.kind_case = VNIC__VMM__BACKEND__KIND_TAP_FD;
		be.tap_fd = &tapfd;
		for (unsigned k = 0; k < nb; k++)
			fds[nfds++] = bfds[k];
		break;
	default:
		break; /* sent without a backend: the supervisor says why not */
	}
	a.backend = &be;
	policy_to_pb(&cfg->policy, &pol);
	a.policy = &pol;
	req.body_case = VNIC__VMM__REQUEST__BODY_ADD_NIC;
	req.add_nic = &a;

	/* The worker has up to 5 s to become READY: wait longer than that. */
	rc = call(c, &req, fds, nfds, c->timeout_ms > 8000 ? c->timeout_ms : 8000, &m);
	if (rc == 0) {
		rc = reply_code(c, m->reply, "AddNic");
		wire_vmm_free(m);
	}
	evq_deliver(c);
out:
	if (err && errlen)
		snprintf(err, errlen, "%s", c->err);
	free(fds);
	free(qp);
	free(qs);
	free(rp);
	free(regs);
	return rc;
}

int vnic_add_nic(struct vnic_conn *c, const struct vnic_nic_config *cfg, char *err, size_t errlen)
{
	return add_nic(c, cfg, cfg ? &cfg->backend_fd : NULL, 1, err, errlen);
}

int vnic_add_nic_backends(struct vnic_conn *c, const struct vnic_nic_config *cfg,
			  const int *backend_fds, unsigned nbackend, char *err, size_t errlen)
{
	if (!backend_fds || nbackend == 0) {
		if (err && errlen)
			snprintf(err, errlen, "vnic_add_nic_backends: no backend fds");
		return set_err(c, -EINVAL, "vnic_add_nic_backends: no backend fds");
	}
	return add_nic(c, cfg, backend_fds, nbackend, err, errlen);
}

int vnic_remove_nic(struct vnic_conn *c, const char *id, uint32_t deadline_ms,
		    struct vnic_remove_result *ret)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__RemoveNic rm;
	Vnic__Vmm__VmmMessage *m = NULL;
	char idbuf[128];
	int rc;

	if (!id)
		return set_err(c, -EINVAL, "vnic_remove_nic: no id");
	vnic__vmm__request__init(&req);
	vnic__vmm__remove_nic__init(&rm);
	snprintf(idbuf, sizeof(idbuf), "%s", id);
	rm.id = idbuf;
	rm.deadline_ms = deadline_ms;
	req.body_case = VNIC__VMM__REQUEST__BODY_REMOVE_NIC;
	req.remove_nic = &rm;
	rc = call(c, &req, NULL, 0, remove_wait_ms(c, deadline_ms), &m);
	if (rc)
		goto out;
	rc = reply_code(c, m->reply, "RemoveNic");
	if (ret && m->reply->body_case == VNIC__VMM__REPLY__BODY_REMOVE_NIC) {
		const Vnic__Vmm__RemoveNicReply *rr = m->reply->remove_nic;

		memset(ret, 0, sizeof(*ret));
		for (size_t i = 0; i < rr->n_queues && i < VNIC_MAX_QUEUES; i++) {
			ret->queues[i].index = rr->queues[i]->index;
			ret->queues[i].avail_idx = rr->queues[i]->avail_idx;
			ret->queues[i].used_idx = rr->queues[i]->used_idx;
			ret->nqueues++;
		}
		ret->unplug_latency_us = rr->unplug_latency_us;
	}
	wire_vmm_free(m);
out:
	evq_deliver(c);
	return rc;
}

int vnic_add_vhost_user(struct vnic_conn *c, const struct vnic_vhost_user_config *cfg,
			char *ifname, size_t ifname_len, char *err, size_t errlen)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__AddVhostUser a;
	Vnic__Vmm__TapBackend tap;
	Vnic__Vmm__Policy pol;
	Vnic__Vmm__VmmMessage *m = NULL;
	char idbuf[128], pathbuf[128], tapbuf[64], nsbuf[128];
	uint8_t mac[6];
	int rc;

	if (!cfg || !cfg->id || !cfg->path)
		return set_err(c, -EINVAL, "vnic_add_vhost_user: no id or path");
	vnic__vmm__request__init(&req);
	vnic__vmm__add_vhost_user__init(&a);
	vnic__vmm__tap_backend__init(&tap);
	snprintf(idbuf, sizeof(idbuf), "%s", cfg->id);
	snprintf(pathbuf, sizeof(pathbuf), "%s", cfg->path);
	snprintf(tapbuf, sizeof(tapbuf), "%s", cfg->tap_name ? cfg->tap_name : "");
	snprintf(nsbuf, sizeof(nsbuf), "%s", cfg->netns ? cfg->netns : "");
	a.id = idbuf;
	a.path = pathbuf;
	a.server = cfg->server;
	tap.name = tapbuf;
	tap.netns = nsbuf;
	a.af_packet = cfg->af_packet;
	a.tap = &tap;
	if (cfg->mac_set) {
		memcpy(mac, cfg->mac, 6);
		a.mac.data = mac;
		a.mac.len = 6;
	}
	a.mtu = cfg->mtu;
	policy_to_pb(&cfg->policy, &pol);
	a.policy = &pol;
	req.body_case = VNIC__VMM__REQUEST__BODY_ADD_VHOST_USER;
	req.add_vhost_user = &a;
	rc = call(c, &req, NULL, 0, c->timeout_ms, &m);
	if (rc == 0) {
		rc = reply_code(c, m->reply, "AddVhostUser");
		if (rc == 0 && ifname && ifname_len &&
		    m->reply->body_case == VNIC__VMM__REPLY__BODY_ADD_VHOST_USER)
			snprintf(ifname, ifname_len, "%s", m->reply->add_vhost_user->ifname);
		wire_vmm_free(m);
	}
	evq_deliver(c);
	if (err && errlen)
		snprintf(err, errlen, "%s", c->err);
	return rc;
}

int vnic_remove_endpoint(struct vnic_conn *c, const char *id, uint32_t deadline_ms,
			 uint64_t *latency_us)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__RemoveEndpoint rm;
	Vnic__Vmm__VmmMessage *m = NULL;
	char idbuf[128];
	int rc;

	if (!id)
		return set_err(c, -EINVAL, "vnic_remove_endpoint: no id");
	vnic__vmm__request__init(&req);
	vnic__vmm__remove_endpoint__init(&rm);
	snprintf(idbuf, sizeof(idbuf), "%s", id);
	rm.id = idbuf;
	rm.deadline_ms = deadline_ms;
	req.body_case = VNIC__VMM__REQUEST__BODY_REMOVE_ENDPOINT;
	req.remove_endpoint = &rm;
	rc = call(c, &req, NULL, 0, remove_wait_ms(c, deadline_ms), &m);
	if (rc)
		goto out;
	rc = reply_code(c, m->reply, "RemoveEndpoint");
	if (latency_us && m->reply->body_case == VNIC__VMM__REPLY__BODY_REMOVE_ENDPOINT)
		*latency_us = m->reply->remove_endpoint->unplug_latency_us;
	wire_vmm_free(m);
out:
	evq_deliver(c);
	return rc;
}

int vnic_set_policy(struct vnic_conn *c, const char *id, const struct vnic_policy *p)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__SetPolicy sp;
	Vnic__Vmm__Policy pol;
	Vnic__Vmm__VmmMessage *m = NULL;
	char idbuf[128];
	int rc;

	if (!id || !p)
		return set_err(c, -EINVAL, "vnic_set_policy: no id or policy");
	vnic__vmm__request__init(&req);
	vnic__vmm__set_policy__init(&sp);
	snprintf(idbuf, sizeof(idbuf), "%s", id);
	policy_to_pb(p, &pol);
	sp.id = idbuf;
	sp.policy = &pol;
	req.body_case = VNIC__VMM__REQUEST__BODY_SET_POLICY;
	req.set_policy = &sp;
	rc = call(c, &req, NULL, 0, c->timeout_ms, &m);
	if (rc == 0) {
		rc = reply_code(c, m->reply, "SetPolicy");
		wire_vmm_free(m);
	}
	evq_deliver(c);
	return rc;
}

uint64_t vnic_dirty_log_size(uint64_t mem_end)
{
	uint64_t pages = mem_end / VNIC_DIRTY_LOG_PAGE + (mem_end % VNIC_DIRTY_LOG_PAGE != 0);
	uint64_t bytes = pages / 8 + (pages % 8 != 0);

	return (bytes + 7) & ~(uint64_t)7;
}

int vnic_set_dirty_log(struct vnic_conn *c, const char *id, int fd, uint64_t size,
		       uint64_t offset)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__SetDirtyLog sd;
	Vnic__Vmm__VmmMessage *m = NULL;
	char idbuf[128];
	int rc;

	if (!id)
		return set_err(c, -EINVAL, "vnic_set_dirty_log: no id");
	/* The frame carries the fd exactly when there is a log. */
	if ((fd >= 0) != (size > 0))
		return set_err(c, -EINVAL, "vnic_set_dirty_log: %s",
			       fd >= 0 ? "an fd with size 0 (stop logging with fd -1)"
				       : "size > 0 without an fd");
	vnic__vmm__request__init(&req);
	vnic__vmm__set_dirty_log__init(&sd);
	snprintf(idbuf, sizeof(idbuf), "%s", id);
	sd.id = idbuf;
	sd.size = size;
	sd.offset = offset;
	req.body_case = VNIC__VMM__REQUEST__BODY_SET_DIRTY_LOG;
	req.set_dirty_log = &sd;
	rc = call(c, &req, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0, c->timeout_ms, &m);
	if (rc == 0) {
		rc = reply_code(c, m->reply, "SetDirtyLog");
		wire_vmm_free(m);
	}
	evq_deliver(c);
	return rc;
}

int vnic_announce(struct vnic_conn *c, const char *id)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__Announce an;
	Vnic__Vmm__VmmMessage *m = NULL;
	char idbuf[128];
	int rc;

	if (!id)
		return set_err(c, -EINVAL, "vnic_announce: no id");
	vnic__vmm__request__init(&req);
	vnic__vmm__announce__init(&an);
	snprintf(idbuf, sizeof(idbuf), "%s", id);
	an.id = idbuf;
	req.body_case = VNIC__VMM__REQUEST__BODY_ANNOUNCE;
	req.announce = &an;
	rc = call(c, &req, NULL, 0, c->timeout_ms, &m);
	if (rc == 0) {
		rc = reply_code(c, m->reply, "Announce");
		wire_vmm_free(m);
	}
	evq_deliver(c);
	return rc;
}

int vnic_set_log_level(struct vnic_conn *c, const char *level, char *old, size_t oldlen)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__SetLogLevel sl;
	Vnic__Vmm__VmmMessage *m = NULL;
	char lv[32];
	int rc;

	if (!level)
		return set_err(c, -EINVAL, "vnic_set_log_level: no level");
	vnic__vmm__request__init(&req);
	vnic__vmm__set_log_level__init(&sl);
	snprintf(lv, sizeof(lv), "%s", level);
	sl.level = lv;
	req.body_case = VNIC__VMM__REQUEST__BODY_SET_LOG_LEVEL;
	req.set_log_level = &sl;
	rc = call(c, &req, NULL, 0, c->timeout_ms, &m);
	if (rc == 0) {
		rc = reply_code(c, m->reply, "SetLogLevel");
		if (rc == 0 && old && oldlen && m->reply->body_case == VNIC__VMM__REPLY__BODY_LOG_LEVEL)
			copy_str(old, oldlen, m->reply->log_level->old_level);
		wire_vmm_free(m);
	}
	evq_deliver(c);
	return rc;
}

int vnic_upgrade(struct vnic_conn *c, struct vnic_upgrade_result *ret)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__Upgrade up;
	Vnic__Vmm__VmmMessage *m = NULL;
	int rc;

	vnic__vmm__request__init(&req);
	vnic__vmm__upgrade__init(&up);
	req.body_case = VNIC__VMM__REQUEST__BODY_UPGRADE;
	req.upgrade = &up;
	rc = call(c, &req, NULL, 0, c->timeout_ms > 30000 ? c->timeout_ms : 30000, &m);
	if (rc == 0) {
		rc = reply_code(c, m->reply, "Upgrade");
		if (rc == 0 && m->reply->body_case != VNIC__VMM__REPLY__BODY_UPGRADE)
			rc = set_err(c, -EPROTO, "Upgrade: the reply has no UpgradeReply");
		if (rc == 0 && ret) {
			const Vnic__Vmm__UpgradeReply *u = m->reply->upgrade;

			memset(ret, 0, sizeof(*ret));
			copy_str(ret->from_version, sizeof(ret->from_version), u->from_version);
			copy_str(ret->to_version, sizeof(ret->to_version), u->to_version);
			ret->pid = u->pid;
			ret->nics = u->nics;
			ret->endpoints = u->endpoints;
			ret->connections = u->connections;
			ret->pause_us = u->pause_us;
			ret->upgrades = u->upgrades;
		}
		wire_vmm_free(m);
	}
	evq_deliver(c);
	return rc;
}

static void fill_nic(struct vnic_nic_status *d, const Vnic__Vmm__NicStatus *s)
{
	memset(d, 0, sizeof(*d));
	copy_str(d->id, sizeof(d->id), s->id);
	d->state = (enum vnic_nic_state)s->state;
	d->pid = s->pid;
	policy_from_pb(s->policy, &d->policy);
	d->policy_switches = s->policy_switches;
	d->uptime_s = s->uptime_s;
	d->restarts = s->restarts;
	copy_str(d->last_error, sizeof(d->last_error), s->last_error);
	d->sandboxed = s->sandboxed;
	d->start_us = s->start_us;
	d->restart_us = s->restart_us;
	d->owner_pid = s->owner_pid;
	d->owner_uid = s->owner_uid;
	copy_str(d->owner_path, sizeof(d->owner_path), s->owner_path);
	copy_str(d->backend, sizeof(d->backend), s->backend);
	copy_str(d->tap_name, sizeof(d->tap_name), s->tap_name);
	if (s->mac.len == sizeof(d->mac))
		memcpy(d->mac, s->mac.data, sizeof(d->mac));
	d->features = s->features;
	d->worker_uid = s->worker_uid;
	d->worker_gid = s->worker_gid;
	d->mtu = s->mtu;
	copy_str(d->vhost_path, sizeof(d->vhost_path), s->vhost_path);
	copy_str(d->vhost_mode, sizeof(d->vhost_mode), s->vhost_mode);
	copy_str(d->vhost_state, sizeof(d->vhost_state), s->vhost_state);
	copy_str(d->vhost_last_error, sizeof(d->vhost_last_error), s->vhost_last_error);
	d->vhost_connects = s->vhost_connects;
	d->vhost_messages = s->vhost_messages;
	d->vhost_rejected = s->vhost_rejected;
	d->vhost_reconfigs = s->vhost_reconfigs;
	for (size_t i = 0; i < s->n_queues && i < VNIC_MAX_QUEUES; i++) {
		const Vnic__Vmm__QueueStatus *q = s->queues[i];
		struct vnic_queue_status *o = &d->queues[d->nqueues++];

		copy_str(o->name, sizeof(o->name), q->name);
#define LIBVNIC_COUNTER(type, name, kind) o->name = q->name;
		VNIC_QUEUE_COUNTERS(LIBVNIC_COUNTER)
#undef LIBVNIC_COUNTER
		o->broken = q->broken;
		copy_str(o->broken_reason, sizeof(o->broken_reason), q->broken_reason);
	}
}

static void fill_pairs(struct vnic_nic_pairs *d, const Vnic__Vmm__NicStatus *s)
{
	memset(d, 0, sizeof(*d));
	for (size_t i = 0; i < s->n_pairs && i < VNIC_MAX_PAIRS; i++) {
		const Vnic__Vmm__PairStatus *p = s->pairs[i];
		struct vnic_pair_status *o = &d->pairs[d->npairs++];

		o->pair = p->pair;
		o->state = (enum vnic_nic_state)p->state;
		o->pid = p->pid;
		o->restarts = p->restarts;
		o->uptime_s = p->uptime_s;
		copy_str(o->last_error, sizeof(o->last_error), p->last_error);
	}
}

int vnic_status(struct vnic_conn *c, struct vnic_status **ret)
{
	struct vnic_status *st;
	char after[128] = "";
	int rc = 0;

	if (!ret)
		return set_err(c, -EINVAL, "vnic_status: no result pointer");
	st = calloc(1, sizeof(*st));
	if (!st)
		return set_err(c, -ENOMEM, "out of memory");
	/* Bounded: at most 4096 pages (far beyond the supervisor's NIC limit). */
	for (int page = 0; page < 4096; page++) {
		Vnic__Vmm__Request req;
		Vnic__Vmm__GetStatus g;
		Vnic__Vmm__VmmMessage *m = NULL;
		const Vnic__Vmm__StatusReply *sr;
		struct vnic_nic_status *grown;
		struct vnic_nic_pairs *grown_pairs;
		struct vnic_nic_inflight *grown_inflight;
		bool more;

		vnic__vmm__request__init(&req);
		vnic__vmm__get_status__init(&g);
		g.id = empty_str;
		g.start_after = after;
		req.body_case = VNIC__VMM__REQUEST__BODY_GET_STATUS;
		req.get_status = &g;
		rc = call(c, &req, NULL, 0, c->timeout_ms, &m);
		if (rc)
			break;
		rc = reply_code(c, m->reply, "GetStatus");
		if (rc == 0 && m->reply->body_case != VNIC__VMM__REPLY__BODY_STATUS)
			rc = set_err(c, -EPROTO, "GetStatus: reply without a body");
		if (rc) {
			wire_vmm_free(m);
			break;
		}
		sr = m->reply->status;
		grown = realloc(st->nics, (st->nnics + sr->n_nics + 1) * sizeof(*st->nics));
		if (!grown) {
			wire_vmm_free(m);
			rc = set_err(c, -ENOMEM, "out of memory");
			break;
		}
		st->nics = grown;
		grown_pairs = realloc(st->pairs, (st->nnics + sr->n_nics + 1) * sizeof(*st->pairs));
		if (!grown_pairs) {
			wire_vmm_free(m);
			rc = set_err(c, -ENOMEM, "out of memory");
			break;
		}
		st->pairs = grown_pairs;
		grown_inflight = realloc(st->inflight, (st->nnics + sr->n_nics + 1) *
							   sizeof(*st->inflight));
		if (!grown_inflight) {
			wire_vmm_free(m);
			rc = set_err(c, -ENOMEM, "out of memory");
			break;
		}
		st->inflight = grown_inflight;
		for (size_t i = 0; i < sr->n_nics; i++) {
			copy_str(st->inflight[st->nnics].where, sizeof(st->inflight[0].where),
				 sr->nics[i]->inflight);
			fill_pairs(&st->pairs[st->nnics], sr->nics[i]);
			fill_nic(&st->nics[st->nnics++], sr->nics[i]);
		}
		more = sr->more && sr->n_nics > 0;
		if (more)
			copy_str(after, sizeof(after), sr->nics[sr->n_nics - 1]->id);
		wire_vmm_free(m);
		if (!more)
			break;
	}
	evq_deliver(c);
	if (rc) {
		vnic_status_free(st);
		return rc;
	}
	*ret = st;
	return 0;
}

struct vnic_status *vnic_status_free(struct vnic_status *st)
{
	if (st) {
		free(st->nics);
		free(st->pairs);
		free(st->inflight);
		free(st);
	}
	return NULL;
}

int vnic_dispatch(struct vnic_conn *c)
{
	int n = evq_deliver(c);

	/* Bounded per call, like the supervisor: 64 messages. */
	for (int i = 0; i < 64; i++) {
		Vnic__Vmm__VmmMessage *m = NULL;
		int rc = recv_one(c, &m);

		if (rc == -EAGAIN)
			break;
		if (rc < 0)
			return rc;
		wire_vmm_free(m); /* a stray reply: nobody waits for it */
		n += evq_deliver(c);
	}
	return n;
}
