/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_handlers: one function per VMM request (the rows of the dispatch
 * table in vmm_conn.c), and the replies and events that nic.c sends when
 * a NIC operation completes later.
 *
 * AddNic is decoded into a struct nic_spec and validated as a whole
 * (validate_nic_spec) before any state changes. On a rejection the reply
 * carries the reason and every fd of the frame is closed by the caller
 * (vmm_conn.c closes whatever a handler did not adopt).
 *
 * Ownership rule: a NIC belongs to the connection that added it (TESTPLAN
 * F3). RemoveNic only finds NICs of the asking connection; any connected
 * client may read status.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "pbconv.h"
#include "supervisor.h"
#include "vhost_user.h"
#include "vring.h"
#include "workers/stats.h"

static void send_event(struct vmm_conn *c, Vnic__Vmm__Event *e)
{
	Vnic__Vmm__VmmMessage m;

	vnic__vmm__vmm_message__init(&m);
	m.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_EVENT;
	m.event = e;
	vmm_conn_send(c, &m);
}

void vmm_handle_hello(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds)
{
	const Vnic__Vmm__Hello *h = r->hello;
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__HelloReply hr;
	char server[64], version[] = PACKAGE_VERSION;

	if (h->min_version > WIRE_VMM_VERSION || h->max_version < WIRE_VMM_VERSION) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
				     "no common protocol version: client speaks %u..%u, vnicd %u",
				     h->min_version, h->max_version, WIRE_VMM_VERSION);
		return;
	}
	c->hello_done = true;
	c->version = WIRE_VMM_VERSION;
	log_info("conn %u: hello from \"%.64s\", version %u", c->id, h->client, c->version);

	snprintf(server, sizeof(server), "vnicd %s", PACKAGE_VERSION);
	vnic__vmm__reply__init(&rep);
	vnic__vmm__hello_reply__init(&hr);
	hr.version = c->version;
	hr.server = server;
	hr.device_features = validate_nic_offered(NIC_BACKEND_TAP);
	/* What one AddNic frame can carry with any backend: 253 fds less
	 * two eventfds per queue and a backend fd (issue 11 item 5). */
	hr.max_regions = WIRE_MAX_FDS - 2 * NIC_NUM_QUEUES - 1;
	hr.max_queues = NIC_NUM_QUEUES;
	hr.max_queue_size = VRING_MAX_SIZE;
	hr.max_message_size = WIRE_VMM_MSG_MAX;
	hr.max_fds = WIRE_MAX_FDS;
	hr.version_major = PACKAGE_VERSION_MAJOR;
	hr.version_minor = PACKAGE_VERSION_MINOR;
	hr.version_patch = PACKAGE_VERSION_PATCH;
	hr.version_string = version;
	rep.body_case = VNIC__VMM__REPLY__BODY_HELLO;
	rep.hello = &hr;
	vmm_conn_reply(c, &rep, r->request_id, VNIC__VMM__STATUS__STATUS_OK, NULL);
}



void vmm_handle_add_nic(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds)
{
	const Vnic__Vmm__AddNic *a = r->add_nic;
	struct sup *s = c->sup;
	struct wire_fd_layout lay;
	struct nic_spec spec;
	char err[256];
	int rc;

	memset(&spec, 0, sizeof(spec));
	rc = wire_add_nic_layout(a, &lay);
	if (rc || lay.total != fds->n) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
				     "AddNic: fd layout does not match the %u fds sent", fds->n);
		return;
	}
	rc = pbconv_add_nic(a, fds, &lay, &spec, err, sizeof(err));
	if (rc == 0)
		rc = validate_nic_spec(&spec, err, sizeof(err));
	if (rc) {
		log_info("conn %u: AddNic \"%.64s\" rejected: %s", c->id, a->id, err);
		vmm_conn_reply_error(c, r->request_id,
				     rc == -ENOMEM ? VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED
						   : VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
				     "%s", err);
		goto out;
	}
	if (vu_endpoint_exists(s, spec.id)) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_ALREADY_EXISTS,
				     "a vhost-user endpoint with id \"%s\" exists", spec.id);
		goto out;
	}
	{
		struct nic *old = nic_find(s, spec.id);

		/* An id still stopping is taken until its RemoveNic (or
		 * disconnect) completes: its worker may still map memory. */
		if (old && old->state == NIC_STOPPING) {
			vmm_conn_reply_error(c, r->request_id,
					     VNIC__VMM__STATUS__STATUS_ALREADY_EXISTS,
					     "a NIC with id \"%s\" exists and is still stopping; "
					     "retry once it is gone", spec.id);
			goto out;
		}
		if (old) {
			vmm_conn_reply_error(c, r->request_id,
					     VNIC__VMM__STATUS__STATUS_ALREADY_EXISTS,
					     "a NIC with id \"%s\" exists (%s)", spec.id,
					     nic_state_name(old->state));
			goto out;
		}
	}
	if (s->shutting_down) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_UNAVAILABLE,
				     "vnicd is shutting down");
		goto out;
	}
	/* Budgets of NICs and fds, global and per connection (issue 11). */
	if (sup_budget_check(s, c, lay.total, err, sizeof(err)) < 0) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED,
				     "%s", err);
		goto out;
	}
	/* Validated: now state may change. The reply follows READY. */
	rc = nic_start(s, &vmm_nic_owner, c, r->request_id, &spec, fds, &lay, err, sizeof(err));
	if (rc) {
		log_warn("conn %u: AddNic \"%s\" failed: %s", c->id, spec.id, err);
		vmm_conn_reply_error(c, r->request_id,
				     rc == -ENOSPC ? VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED
						   : VNIC__VMM__STATUS__STATUS_UNAVAILABLE,
				     "%s", err);
	}
out:
	free(spec.regions);
	free(spec.queues);
}

static void vmm_nic_added(struct nic *n, enum nic_result res, const char *error)
{
	struct vmm_conn *conn = n->owner;
	Vnic__Vmm__Status code = pbconv_result(res);
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__AddNicReply ar;

	if (code != VNIC__VMM__STATUS__STATUS_OK) {
		vmm_conn_reply_error(conn, n->add_req, code, "nic %s: %s", n->id,
				     error ? error : "failed");
		return;
	}
	vnic__vmm__reply__init(&rep);
	vnic__vmm__add_nic_reply__init(&ar);
	ar.id = n->id;
	ar.pid = (int32_t)n->w.pid;
	rep.body_case = VNIC__VMM__REPLY__BODY_ADD_NIC;
	rep.add_nic = &ar;
	vmm_conn_reply(conn, &rep, n->add_req, code, NULL);
}

void vmm_handle_remove_nic(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds)
{
	const Vnic__Vmm__RemoveNic *rm = r->remove_nic;
	struct nic *n = nic_find(c->sup, rm->id);
	uint32_t ms = rm->deadline_ms ? rm->deadline_ms : SUP_STOP_DEFAULT_MS;

	/* F3: another connection's NIC is, for this peer, not there. */
	if (!n || n->ops != &vmm_nic_owner || n->owner != c) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_NOT_FOUND,
				     "no NIC \"%.64s\" on this connection", rm->id);
		return;
	}
	/* A second RemoveNic while the first waits for the worker is refused
	 * at once (it does not wait for the same completion): the first one's
	 * reply is the one that says the memory is free. */
	if (n->state == NIC_STOPPING || n->remove_pending) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
				     "NIC %s is already stopping: the earlier RemoveNic (or "
				     "disconnect) is waiting for its worker", n->id);
		return;
	}
	/* Only a client that does not wait for its AddNic reply can get
	 * here; the AddNic reply comes first. */
	if (n->state == NIC_STARTING) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
				     "NIC %s is still starting: wait for the AddNic reply", n->id);
		return;
	}
	if (ms > SUP_STOP_MAX_MS)
		ms = SUP_STOP_MAX_MS;
	n->remove_pending = true;
	n->remove_req = r->request_id;
	clock_gettime(CLOCK_MONOTONIC, &n->remove_t0);
	if (n->w.pid == 0) {
		/* FAILED, or RESTARTING between two workers: no process maps
		 * the memory now, so the answer can come at once, once vnicd
		 * holds none of the NIC's fds either (guarantee 1). */
		nic_close_vmm_fds(n);
		nic_notify_removed(n, NIC_RES_OK, NULL);
		nic_stop(n, ms, "RemoveNic");
		return;
	}
	/* RUNNING: Stop and a deadline; RESTARTING with a worker starting:
	 * killed. The reply follows the reap (nic.c). */
	nic_stop(n, ms, "RemoveNic");
}

static void vmm_nic_removed(struct nic *n, enum nic_result res, const char *error)
{
	struct vmm_conn *conn = n->owner;
	Vnic__Vmm__Status code = pbconv_result(res);
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__RemoveNicReply rr;
	Vnic__Vmm__QueueIndex qi[NIC_NUM_QUEUES], *qp[NIC_NUM_QUEUES];
	struct timespec now;
	size_t nq = 0;

	vnic__vmm__reply__init(&rep);
	vnic__vmm__remove_nic_reply__init(&rr);
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		if (!n->q[i].final_valid)
			continue;
		vnic__vmm__queue_index__init(&qi[nq]);
		qi[nq].index = n->q[i].index;
		qi[nq].avail_idx = n->q[i].final_avail;
		qi[nq].used_idx = n->q[i].final_used;
		qp[nq] = &qi[nq];
		nq++;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	rr.n_queues = nq;
	rr.queues = qp;
	rr.unplug_latency_us = (uint64_t)(now.tv_sec - n->remove_t0.tv_sec) * 1000000u +
			       (uint64_t)((now.tv_nsec - n->remove_t0.tv_nsec) / 1000);
	rep.body_case = VNIC__VMM__REPLY__BODY_REMOVE_NIC;
	rep.remove_nic = &rr;
	log_info("nic %s: removed in %llu us", n->id, (unsigned long long)rr.unplug_latency_us);
	vmm_conn_reply(conn, &rep, n->remove_req, code, error);
}


/* One status row: a NIC, a vhost-user endpoint, or an endpoint's NIC. */
struct status_ent {
	const char *id;
	struct nic *n;                 /* NULL: an endpoint with no worker */
	const struct vu_status *vu;    /* NULL: not an endpoint */
};

static int cmp_ent(const void *a, const void *b)
{
	const struct status_ent *x = a, *y = b;

	return strcmp(x->id, y->id);
}

/* One NIC's status, into storage the caller provides: the queues of
 * every pair that runs (issue 15), up to what libvnic reads. */
#define STATUS_QUEUES 16
#define STATUS_PAIRS (STATUS_QUEUES / 2)
struct nic_status_buf {
	Vnic__Vmm__NicStatus ns;
	Vnic__Vmm__PairStatus ps[STATUS_PAIRS];
	Vnic__Vmm__PairStatus *pp[STATUS_PAIRS];
	char vhost_mode[8];
	Vnic__Vmm__Policy pol;
	Vnic__Vmm__QueueStatus qs[STATUS_QUEUES];
	Vnic__Vmm__QueueStatus *qp[STATUS_QUEUES];
	struct stats_queue_snapshot snap[STATUS_QUEUES];
	char names[STATUS_QUEUES][8];
	struct admin_status_buf admin;
};

/* Append the pair row and the queue rows of NIC n (one pair) to b. */
static void fill_queues(struct nic *n, struct nic_status_buf *b)
{
	if (b->ns.n_pairs < STATUS_PAIRS) {
		Vnic__Vmm__PairStatus *p = &b->ps[b->ns.n_pairs];

		vnic__vmm__pair_status__init(p);
		p->pair = n->pair;
		p->state = pbconv_state(n->state);
		p->pid = (int32_t)n->w.pid;
		p->restarts = n->restarts;
		p->uptime_s = nic_uptime_s(n);
		p->last_error = n->last_error;
		b->pp[b->ns.n_pairs++] = p;
		b->ns.pairs = b->pp;
	}
	for (int i = 0; i < NIC_NUM_QUEUES && b->ns.n_queues < STATUS_QUEUES; i++) {
		size_t k = b->ns.n_queues;
		Vnic__Vmm__QueueStatus *q = &b->qs[k];
		struct stats_queue_snapshot *sn = &b->snap[k];

		nic_read_queue(n, i, sn);
		vnic__vmm__queue_status__init(q);
		virtio_net_queue_name(n->q[i].index, b->names[k], sizeof(b->names[k]));
		q->name = b->names[k];
		pbconv_queue_counters(sn, q);
		/* Broken from either source: the page or a QueueBroken message. */
		q->broken = sn->broken || n->q[i].broken;
		if (n->q[i].broken)
			snprintf(sn->broken_reason, sizeof(sn->broken_reason), "%s",
				 n->q[i].broken_reason);
		q->broken_reason = sn->broken_reason;
		b->qp[k] = q;
		b->ns.n_queues = k + 1;
	}
	b->ns.queues = b->qp;
}

static void fill_status(struct nic *n, struct nic_status_buf *b)
{
	vnic__vmm__nic_status__init(&b->ns);
	vnic__vmm__policy__init(&b->pol);
	policy_to_pb(&n->policy, &b->pol);
	b->ns.id = n->id;
	b->ns.state = pbconv_state(n->state);
	b->ns.pid = (int32_t)n->w.pid;
	b->ns.policy = &b->pol;
	b->ns.uptime_s = nic_uptime_s(n);
	b->ns.restarts = n->restarts;
	b->ns.last_error = n->last_error;
	b->ns.sandboxed = n->sandboxed;
	b->ns.start_us = n->start_us;
	b->ns.restart_us = n->restart_us;
	admin_fill_status(n, &b->ns, &b->admin);
	b->ns.policy_switches = n->policy_switches;
	b->ns.n_queues = 0;
	b->ns.n_pairs = 0;
	fill_queues(n, b);
}

/* The vhost-user fields of a row (NicStatus 12-19); an endpoint with no
 * worker is AWAITING_FRONTEND with pid 0 and what it was configured with. */
static void fill_vhost_status(const struct vu_status *v, struct nic_status_buf *b)
{
	if (!v->nic) {
		vnic__vmm__nic_status__init(&b->ns);
		b->ns.id = (char *)(uintptr_t)v->id;
		b->ns.state = VNIC__VMM__NIC_STATE__NIC_STATE_AWAITING_FRONTEND;
		b->ns.last_error = (char *)(uintptr_t)v->last_error;
		policy_to_pb(v->policy, &b->pol);
		b->ns.policy = &b->pol;
		snprintf(b->admin.backend, sizeof(b->admin.backend), "tap_fd");
		memcpy(b->admin.mac, v->mac, sizeof(b->admin.mac));
		b->ns.backend = b->admin.backend;
		b->ns.mac.data = b->admin.mac;
		b->ns.mac.len = sizeof(b->admin.mac);
		b->ns.mtu = v->mtu;
	}
	/* The endpoint opened the tap, not the NIC (a tap fd backend). */
	snprintf(b->admin.tap_name, sizeof(b->admin.tap_name), "%s", v->tap);
	b->ns.tap_name = b->admin.tap_name;
	snprintf(b->vhost_mode, sizeof(b->vhost_mode), "%s", v->server ? "server" : "client");
	b->ns.vhost_path = (char *)(uintptr_t)v->path;
	b->ns.owner_path = (char *)(uintptr_t)v->path; /* NicStatus 22: the owner */
	b->ns.vhost_mode = b->vhost_mode;
	b->ns.vhost_state = (char *)(uintptr_t)v->state;
	b->ns.vhost_connects = v->connects;
	b->ns.vhost_messages = v->messages;
	b->ns.vhost_rejected = v->rejected;
	b->ns.vhost_reconfigs = v->reconfigs;
	b->ns.vhost_last_error = (char *)(uintptr_t)v->last_error;
}

void vmm_handle_get_status(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds)
{
	const Vnic__Vmm__GetStatus *g = r->get_status;
	struct sup *s = c->sup;
	struct status_ent *all = NULL;
	struct vu_status *vus = NULL;
	struct nic *n;
	struct nic_status_buf *bufs = NULL;
	Vnic__Vmm__NicStatus **list = NULL;
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__StatusReply sr;
	unsigned nvu = vu_status_list(s, NULL, 0);
	size_t cnt = 0, out = 0, i;

	all = calloc(s->nnics + nvu + 1, sizeof(*all));
	vus = calloc(nvu + 1, sizeof(*vus));
	bufs = calloc(SUP_STATUS_PAGE, sizeof(*bufs));
	list = calloc(SUP_STATUS_PAGE, sizeof(*list));
	if (!all || !vus || !bufs || !list) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED,
				     "out of memory");
		goto out;
	}
	nvu = vu_status_list(s, vus, nvu);
	for (i = 0; i < nvu; i++)
		if (!g->id[0] || !strcmp(g->id, vus[i].id))
			all[cnt++] = (struct status_ent){ vus[i].id, vus[i].nic, &vus[i] };
	TAILQ_FOREACH(n, &s->nics, link) {
		/* An endpoint's pairs are in its row. */
		if (!vu_nic_socket_path(n) && cnt < s->nnics + nvu &&
		    (!g->id[0] || !strcmp(g->id, n->id)))
			all[cnt++] = (struct status_ent){ n->id, n, NULL };
	}
	if (g->id[0] && cnt == 0) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_NOT_FOUND,
				     "no NIC \"%.64s\"", g->id);
		goto out;
	}
	qsort(all, cnt, sizeof(*all), cmp_ent);
	vnic__vmm__reply__init(&rep);
	vnic__vmm__status_reply__init(&sr);
	for (i = 0; i < cnt && out < SUP_STATUS_PAGE; i++) {
		if (g->start_after[0] && strcmp(all[i].id, g->start_after) <= 0)
			continue;
		if (all[i].n)
			fill_status(all[i].n, &bufs[out]);
		if (all[i].vu) {
			/* The other pairs' queues, after the first's. */
			for (unsigned k = 0; all[i].n && k < all[i].vu->npairs; k++) {
				struct nic *pn = vu_status_pair(all[i].vu, k);

				if (pn && pn != all[i].n)
					fill_queues(pn, &bufs[out]);
			}
			fill_vhost_status(all[i].vu, &bufs[out]);
		}
		list[out] = &bufs[out].ns;
		out++;
	}
	/* More when a NIC past the page remains. */
	for (; i < cnt; i++)
		if (!g->start_after[0] || strcmp(all[i].id, g->start_after) > 0)
			sr.more = true;
	sr.n_nics = out;
	sr.nics = list;
	rep.body_case = VNIC__VMM__REPLY__BODY_STATUS;
	rep.status = &sr;
	vmm_conn_reply(c, &rep, r->request_id, VNIC__VMM__STATUS__STATUS_OK, NULL);
out:
	free(list);
	free(bufs);
	free(vus);
	free(all);
}

void vmm_handle_add_vhost_user(struct vmm_conn *c, const Vnic__Vmm__Request *r,
			       struct wire_fds *fds)
{
	struct vu_config cfg;
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__AddVhostUserReply ar;
	char err[256], ifname[16];
	int rc;

	(void)fds;
	rc = pbconv_add_vhost_user(r->add_vhost_user, &cfg, err, sizeof(err));
	if (rc == 0)
		rc = vu_endpoint_add(c->sup, &cfg, ifname, sizeof(ifname), err, sizeof(err));
	if (rc) {
		log_info("conn %u: AddVhostUser \"%.64s\" rejected: %s", c->id,
			 r->add_vhost_user->id, err);
		vmm_conn_reply_error(c, r->request_id,
				     rc == -EEXIST ? VNIC__VMM__STATUS__STATUS_ALREADY_EXISTS
				     : rc == -ENOMEM ? VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED
				     : rc == -ENOSYS ? VNIC__VMM__STATUS__STATUS_UNIMPLEMENTED
				     : rc == -ESHUTDOWN ? VNIC__VMM__STATUS__STATUS_UNAVAILABLE
				     : rc == -EINVAL || rc == -ENOTSUP || rc == -E2BIG
					     ? VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT
					     : VNIC__VMM__STATUS__STATUS_UNAVAILABLE,
				     "%s", err);
		return;
	}
	vnic__vmm__reply__init(&rep);
	vnic__vmm__add_vhost_user_reply__init(&ar);
	ar.id = cfg.id;
	ar.ifname = ifname;
	ar.path = cfg.path;
	rep.body_case = VNIC__VMM__REPLY__BODY_ADD_VHOST_USER;
	rep.add_vhost_user = &ar;
	vmm_conn_reply(c, &rep, r->request_id, VNIC__VMM__STATUS__STATUS_OK, NULL);
}

/* The connection that asked may be gone by the time the worker is reaped:
 * find it by its number. */
static void vmm_endpoint_removed(void *arg, unsigned conn_id, uint64_t request_id,
				 bool deadline, uint64_t latency_us)
{
	struct vmm_conn *c = admin_conn_by_id(arg, conn_id);
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__RemoveEndpointReply rr;
	char msg[] = "worker missed the stop deadline; it was killed and reaped";

	if (!c)
		return;
	vnic__vmm__reply__init(&rep);
	vnic__vmm__remove_endpoint_reply__init(&rr);
	rr.unplug_latency_us = latency_us;
	rep.body_case = VNIC__VMM__REPLY__BODY_REMOVE_ENDPOINT;
	rep.remove_endpoint = &rr;
	vmm_conn_reply(c, &rep, request_id,
		       deadline ? VNIC__VMM__STATUS__STATUS_DEADLINE_EXCEEDED
				: VNIC__VMM__STATUS__STATUS_OK,
		       deadline ? msg : NULL);
}

void vmm_handle_remove_endpoint(struct vmm_conn *c, const Vnic__Vmm__Request *r,
				struct wire_fds *fds)
{
	const Vnic__Vmm__RemoveEndpoint *rm = r->remove_endpoint;
	uint32_t ms = rm->deadline_ms ? rm->deadline_ms : SUP_STOP_DEFAULT_MS;
	int rc;

	(void)fds;
	if (ms > SUP_STOP_MAX_MS)
		ms = SUP_STOP_MAX_MS;
	rc = vu_endpoint_remove(c->sup, rm->id, ms, vmm_endpoint_removed, c->id, r->request_id);
	if (rc == -ENOENT)
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_NOT_FOUND,
				     "no vhost-user endpoint \"%.64s\"", rm->id);
	else if (rc)
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
				     "endpoint %.64s is already being removed", rm->id);
}

/* An administrator's SetPolicy (vnicctl set-policy) on a NIC it does not
 * own is answered on its own connection (by id: it may have closed). */
static void vmm_admin_policy_set(struct nic *n, enum nic_result res, const char *error)
{
	struct vmm_conn *c = admin_conn_by_id(n->sup, n->policy_conn_id);

	n->policy_conn_id = 0;
	if (c)
		vmm_conn_reply_error(c, n->policy_req, pbconv_result(res), "%s", error ? error : "");
}

/* The NIC's other queue pairs (issue 15: a worker each) take the policy
 * too; the request's answer follows the first's PolicySet. A pair that
 * cannot take it now (stopping, starting) gets it at its next start, from
 * its owner (vhost-user keeps the endpoint's policy). */
static void set_policy_other_pairs(struct sup *s, const struct nic *first,
				   const struct vnic_policy *p)
{
	struct nic *o;
	char err[128];

	TAILQ_FOREACH(o, &s->nics, link)
		if (o != first && !strcmp(o->id, first->id) &&
		    nic_set_policy(o, p, 0, 0, err, sizeof(err)) < 0)
			log_info("nic %s: pair %u: policy not applied now: %s", o->id, o->pair, err);
}

void vmm_handle_set_policy(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds)
{
	const Vnic__Vmm__SetPolicy *sp = r->set_policy;
	struct nic *n = nic_find(c->sup, sp->id);
	bool own = n && n->ops == &vmm_nic_owner && n->owner == c;
	bool admin = n && !own && admin_conn_is_admin(c); /* vnicctl set-policy */
	struct vnic_policy p = { 0 };
	char err[128];
	int rc;

	if (!n || (!own && !admin)) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_NOT_FOUND,
				     "no NIC \"%.64s\" on this connection", sp->id);
		return;
	}
	policy_from_pb(sp->policy, &p);
	rc = validate_policy(&p, err, sizeof(err));
	if (rc) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
				     "%s", err);
		return;
	}
	nic_policy_resolve(&p);
	rc = nic_set_policy(n, &p, r->request_id, admin ? c->id : 0, err, sizeof(err));
	if (rc >= 0)
		set_policy_other_pairs(c->sup, n, &p);
	if (rc < 0) {
		vmm_conn_reply_error(c, r->request_id,
				     rc == -EBUSY || rc == -EAGAIN
					     ? VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION
					     : VNIC__VMM__STATUS__STATUS_UNAVAILABLE, "%s", err);
		return;
	}
	if (rc == 1) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_OK, "%s", "");
		return;
	}
	/* Answered when the worker confirms (monitor.c, PolicySet). */
	if (admin)
		c->sup->admin_policy_set = vmm_admin_policy_set;
}

static void vmm_nic_policy_set(struct nic *n, enum nic_result res, const char *error)
{
	vmm_conn_reply_error(n->owner, n->policy_req, pbconv_result(res), "%s", error ? error : "");
}

/*
 * SetDirtyLog (issue 14). struct nic has no room for the request id
 * (nic.c knows only that a change is pending), so the owner keeps it
 * here: one entry per NIC with a SetDirtyLog waiting for its
 * dirty_log_set(), made before nic_set_dirty_log (which may answer at
 * once, with no worker running), dropped by the answer or when the NIC
 * is gone (a NIC whose connection closed is never answered).
 */
struct dirty_log_wait {
	struct nic *n;
	uint64_t req;
	struct dirty_log_wait *next;
};
static struct dirty_log_wait *dirty_log_waits;

static struct dirty_log_wait **dirty_log_wait_find(const struct nic *n)
{
	struct dirty_log_wait **w;

	for (w = &dirty_log_waits; *w; w = &(*w)->next)
		if ((*w)->n == n)
			return w;
	return NULL;
}

/* Forget n's waiting request. Returns: true and *ret_req when there was one. */
static bool dirty_log_wait_take(const struct nic *n, uint64_t *ret_req)
{
	struct dirty_log_wait **w = dirty_log_wait_find(n), *e;

	if (!w)
		return false;
	e = *w;
	*w = e->next;
	if (ret_req)
		*ret_req = e->req;
	free(e);
	return true;
}

void vmm_handle_set_dirty_log(struct vmm_conn *c, const Vnic__Vmm__Request *r,
			      struct wire_fds *fds)
{
	const Vnic__Vmm__SetDirtyLog *d = r->set_dirty_log;
	struct nic *n = nic_find(c->sup, d->id);
	struct dirty_log_wait *w;
	char err[256];
	int fd = -1, rc;

	/* F3: another connection's NIC (or a vhost-user endpoint's, whose
	 * log comes from its front end) is, for this peer, not there. */
	if (!n || n->ops != &vmm_nic_owner || n->owner != c) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_NOT_FOUND,
				     "no NIC \"%.64s\" on this connection", d->id);
		return;
	}
	/* wire_vmm_expected_fds already held the frame to these counts;
	 * checked again so that no fd can pass unadopted and unseen. */
	if (fds->n != (d->size > 0 ? 1u : 0u)) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
				     "SetDirtyLog with size %llu carries %u fds, expected %u",
				     (unsigned long long)d->size, fds->n, d->size > 0 ? 1u : 0u);
		return;
	}
	if (d->size == 0 && d->offset != 0) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
				     "SetDirtyLog: offset %llu without a log (size 0 stops "
				     "logging and takes offset 0)", (unsigned long long)d->offset);
		return;
	}
	if (d->size > 0) {
		fd = fds->fd[0];
		rc = validate_dirty_log(fd, d->size, d->offset, err, sizeof(err));
		/* A log too small for the memory would lose the bits of the
		 * pages above it, and with them those pages' migration. */
		if (rc == 0)
			rc = validate_log_covers(n->regions, n->nregions, d->size, err,
						 sizeof(err));
		if (rc) {
			log_info("conn %u: SetDirtyLog \"%s\" rejected: %s", c->id, n->id, err);
			vmm_conn_reply_error(c, r->request_id,
					     VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT,
					     "nic %s: %s", n->id, err);
			return;
		}
	}
	if (dirty_log_wait_find(n)) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
				     "nic %s: a SetDirtyLog is already in progress", n->id);
		return;
	}
	/* Its memory is about to be (or was) given back: nothing to log. */
	if (n->state == NIC_STOPPING || n->remove_pending) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
				     "nic %s is stopping: its dirty log can no longer change",
				     n->id);
		return;
	}
	/* As RemoveNic: only a client that does not wait for AddNic's
	 * reply gets here, and the log belongs after it. */
	if (n->state == NIC_STARTING) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
				     "nic %s is still starting: wait for the AddNic reply", n->id);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		vmm_conn_reply_error(c, r->request_id,
				     VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	/* Before the call: with no worker running it answers at once. */
	w->n = n;
	w->req = r->request_id;
	w->next = dirty_log_waits;
	dirty_log_waits = w;
	rc = nic_set_dirty_log(n, fd, d->size, d->offset, err, sizeof(err));
	if (rc) {
		/* Nothing changed and fd is still the frame's (closed by
		 * vmm_conn.c before this reply leaves). */
		dirty_log_wait_take(n, NULL);
		vmm_conn_reply_error(c, r->request_id,
				     rc == -EBUSY ? VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION
						  : VNIC__VMM__STATUS__STATUS_UNAVAILABLE,
				     "nic %s: %s", n->id, err);
		return;
	}
	if (fd >= 0)
		fds->fd[0] = -1; /* the NIC's now (nic.c logs the change) */
}

static void vmm_nic_dirty_log_set(struct nic *n, enum nic_result res, const char *error)
{
	uint64_t req;

	if (!dirty_log_wait_take(n, &req)) {
		log_warn("nic %s: a dirty log change nobody waits for was %s", n->id,
			 res == NIC_RES_OK ? "applied" : "refused");
		return;
	}
	if (res == NIC_RES_OK)
		vmm_conn_reply_error(n->owner, req, VNIC__VMM__STATUS__STATUS_OK, "%s", "");
	else
		vmm_conn_reply_error(n->owner, req, pbconv_result(res),
				     "nic %s: the dirty log was not set, the NIC logs nothing: %s",
				     n->id, error && error[0] ? error : "the worker failed");
}

static void vmm_nic_gone(struct nic *n)
{
	dirty_log_wait_take(n, NULL);
}

static void vmm_nic_failed(struct nic *n, int sig, int exit_status, int syscall_nr)
{
	Vnic__Vmm__Event e;
	Vnic__Vmm__NicFailed f;

	vnic__vmm__event__init(&e);
	vnic__vmm__nic_failed__init(&f);
	f.id = n->id;
	f.reason = n->last_error;
	f.signal = sig;
	f.syscall = syscall_nr;
	f.exit_status = exit_status;
	e.body_case = VNIC__VMM__EVENT__BODY_NIC_FAILED;
	e.nic_failed = &f;
	send_event(n->owner, &e);
}

static void vmm_nic_restarted(struct nic *n)
{
	Vnic__Vmm__Event e;
	Vnic__Vmm__NicRestarted r;

	vnic__vmm__event__init(&e);
	vnic__vmm__nic_restarted__init(&r);
	r.id = n->id;
	r.restarts = n->restarts;
	r.restart_us = n->restart_us;
	e.body_case = VNIC__VMM__EVENT__BODY_NIC_RESTARTED;
	e.nic_restarted = &r;
	send_event(n->owner, &e);
}

static void vmm_nic_queue_reset(struct nic *n, uint32_t queue, const char *reason)
{
	Vnic__Vmm__Event e;
	Vnic__Vmm__QueueNeedsReset q;
	char text[256];

	vnic__vmm__event__init(&e);
	vnic__vmm__queue_needs_reset__init(&q);
	q.id = n->id;
	q.queue = queue;
	snprintf(text, sizeof(text), "%s", reason);
	q.reason = text;
	e.body_case = VNIC__VMM__EVENT__BODY_QUEUE_NEEDS_RESET;
	e.queue_needs_reset = &q;
	send_event(n->owner, &e);
}

static void vmm_nic_state_changed(struct nic *n, enum nic_state old, enum nic_state st,
				  const char *why)
{
	Vnic__Vmm__Event e;
	Vnic__Vmm__NicStateChanged s;
	char text[256];

	vnic__vmm__event__init(&e);
	vnic__vmm__nic_state_changed__init(&s);
	snprintf(text, sizeof(text), "%s", why ? why : "");
	s.id = n->id;
	s.old_state = pbconv_state(old);
	s.new_state = pbconv_state(st);
	s.reason = text;
	e.body_case = VNIC__VMM__EVENT__BODY_NIC_STATE_CHANGED;
	e.nic_state_changed = &s;
	send_event(n->owner, &e);
}

static void vmm_nic_stalled(struct nic *n, uint64_t silent_ms)
{
	Vnic__Vmm__Event e;
	Vnic__Vmm__NicStalled st;

	if (!n->announced)
		return;
	vnic__vmm__event__init(&e);
	vnic__vmm__nic_stalled__init(&st);
	st.id = n->id;
	st.silent_ms = silent_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)silent_ms;
	e.body_case = VNIC__VMM__EVENT__BODY_NIC_STALLED;
	e.nic_stalled = &st;
	send_event(n->owner, &e);
}

const struct nic_owner_ops vmm_nic_owner = {
	.kind = "control",
	.added = vmm_nic_added,
	.removed = vmm_nic_removed,
	.policy_set = vmm_nic_policy_set,
	.failed = vmm_nic_failed,
	.restarted = vmm_nic_restarted,
	.state_changed = vmm_nic_state_changed,
	.queue_reset = vmm_nic_queue_reset,
	.stalled = vmm_nic_stalled,
	.gone = vmm_nic_gone,
	.dirty_log_set = vmm_nic_dirty_log_set,
};
