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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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
	/* What one AddNic frame of one queue pair can carry with any
	 * backend: 253 fds less two eventfds per queue and a backend fd
	 * (issue 11 item 5); each further pair takes 5 fds more. Queues: 2
	 * per pair, up to --max-queue-pairs (issue 15). */
	hr.max_regions = WIRE_MAX_FDS - 2 * NIC_NUM_QUEUES - 1;
	hr.max_queues = 2 * (c->sup->max_pairs ? c->sup->max_pairs : SUP_PAIRS_DEFAULT);
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



/* May connection c add a NIC of id holding nfds fds now? Answers req when
 * not: the id taken (by an endpoint, or a NIC, maybe still stopping),
 * vnicd shutting down, or a budget spent (issue 11). */
static bool add_nic_admissible(struct vmm_conn *c, uint64_t req, const char *id, unsigned npairs,
			       unsigned nfds)
{
	struct sup *s = c->sup;
	struct nic *old = nic_find(s, id);
	char err[256];

	if (vu_endpoint_exists(s, id)) {
		vmm_conn_reply_error(c, req, VNIC__VMM__STATUS__STATUS_ALREADY_EXISTS,
				     "a vhost-user endpoint with id \"%s\" exists", id);
		return false;
	}
	/* An id still stopping is taken until its RemoveNic (or disconnect)
	 * completes: its worker may still map memory. */
	if (old && old->state == NIC_STOPPING) {
		vmm_conn_reply_error(c, req, VNIC__VMM__STATUS__STATUS_ALREADY_EXISTS,
				     "a NIC with id \"%s\" exists and is still stopping; retry once "
				     "it is gone", id);
		return false;
	}
	if (old) {
		vmm_conn_reply_error(c, req, VNIC__VMM__STATUS__STATUS_ALREADY_EXISTS,
				     "a NIC with id \"%s\" exists (%s)", id, nic_state_name(old->state));
		return false;
	}
	if (s->shutting_down) {
		vmm_conn_reply_error(c, req, VNIC__VMM__STATUS__STATUS_UNAVAILABLE,
				     "vnicd is shutting down");
		return false;
	}
	if (sup_budget_check(s, c, npairs, nfds, err, sizeof(err)) < 0) {
		vmm_conn_reply_error(c, req, VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED, "%s", err);
		return false;
	}
	return true;
}

/* ------------------------------------------------------ queue pairs */

/*
 * A NIC of several queue pairs (issue 15, doc/multiqueue.md) is a struct
 * nic per pair, each with the NIC's id and a worker of its own. One AddNic
 * or RemoveNic for all of them gets one answer, once every pair was heard
 * from; the requests waiting so are kept here, by connection and request
 * id, and dropped with their connection.
 */
enum pg_kind {
	PG_ADD,        /* AddNic: every pair's added() */
	PG_ADD_FAILED, /* AddNic where a pair failed: the others' reap, then the answer */
	PG_REMOVE,     /* RemoveNic: every pair's removed() */
	PG_LOG,        /* SetDirtyLog: every pair's dirty_log_set() */
};

struct pair_group {
	struct pair_group *next;
	const struct vmm_conn *conn;
	uint64_t req;
	enum pg_kind kind;
	unsigned left;               /* pairs not heard from */
	char id[VALIDATE_ID_MAX + 1];
	int32_t pid0;                /* pair 0's worker, for AddNicReply */
	Vnic__Vmm__Status code;      /* the first failure's, or OK */
	char error[200];
	struct timespec t0;          /* RemoveNic received */
	size_t nq;                   /* final indices so far (RemoveNic) */
	Vnic__Vmm__QueueIndex qi[2 * NIC_MAX_PAIRS];
};
static struct pair_group *pair_groups;

/* The group of request req on connection c for NIC id (NULL: any). The
 * id too: a one-pair request may reuse a pending group's request id. */
static struct pair_group *pg_find(const struct vmm_conn *c, uint64_t req, const char *id)
{
	for (struct pair_group *g = pair_groups; g; g = g->next)
		if (g->conn == c && g->req == req && (!id || !strcmp(g->id, id)))
			return g;
	return NULL;
}

static struct pair_group *pg_new(const struct vmm_conn *c, uint64_t req, enum pg_kind kind,
				 const char *id, unsigned left)
{
	struct pair_group *g;

	/* One group per request id in flight: a client that reuses one
	 * before its answer gets FAILED_PRECONDITION (pg_refuse). */
	if (pg_find(c, req, NULL)) {
		errno = EEXIST;
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->conn = c;
	g->req = req;
	g->kind = kind;
	g->left = left;
	g->code = VNIC__VMM__STATUS__STATUS_OK;
	snprintf(g->id, sizeof(g->id), "%s", id);
	clock_gettime(CLOCK_MONOTONIC, &g->t0);
	g->next = pair_groups;
	pair_groups = g;
	return g;
}

/* pg_new returned NULL: say why. */
static void pg_refuse(struct vmm_conn *c, uint64_t req)
{
	if (errno == EEXIST)
		vmm_conn_reply_error(c, req, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
				     "request id %llu is still in progress on this connection",
				     (unsigned long long)req);
	else
		vmm_conn_reply_error(c, req, VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED,
				     "out of memory");
}

static void pg_free(struct pair_group *g)
{
	for (struct pair_group **p = &pair_groups; *p; p = &(*p)->next)
		if (*p == g) {
			*p = g->next;
			break;
		}
	free(g);
}

void vmm_pair_groups_drop(const struct vmm_conn *c)
{
	struct pair_group **p = &pair_groups;

	while (*p) {
		struct pair_group *g = *p;

		if (g->conn == c) {
			*p = g->next;
			free(g);
		} else {
			p = &g->next;
		}
	}
}

static void pg_fail(struct pair_group *g, Vnic__Vmm__Status code, uint32_t pair, const char *error)
{
	if (g->code != VNIC__VMM__STATUS__STATUS_OK)
		return;
	g->code = code;
	snprintf(g->error, sizeof(g->error), "pair %u: %.180s", pair, error ? error : "failed");
}

/* Stop NIC n for request req as a RemoveNic does: the reply (or the
 * group's) follows its reap, or comes at once with no worker. */
static void stop_for(struct nic *n, uint64_t req, uint32_t ms, const char *why)
{
	n->remove_pending = true;
	n->remove_req = req;
	clock_gettime(CLOCK_MONOTONIC, &n->remove_t0);
	if (n->w.pid == 0) {
		/* FAILED, or RESTARTING between two workers: no process maps
		 * the memory now, so the answer can come at once, once vnicd
		 * holds none of the NIC's fds either (guarantee 1). */
		nic_close_vmm_fds(n);
		nic_notify_removed(n, NIC_RES_OK, NULL);
	}
	nic_stop(n, ms, why);
}

/* An AddNic of several pairs where one failed: stop the pairs that run,
 * the answer follows their reap. */
static void pg_add_stop_others(struct vmm_conn *c, struct pair_group *g)
{
	struct nic *list[NIC_MAX_PAIRS], *n;
	unsigned cnt = 0;

	TAILQ_FOREACH(n, &c->sup->nics, link)
		if (n->owner == c && !strcmp(n->id, g->id) && cnt < NIC_MAX_PAIRS &&
		    n->state != NIC_STOPPING)
			list[cnt++] = n;
	g->kind = PG_ADD_FAILED;
	g->left = cnt;
	if (cnt == 0) {
		vmm_conn_reply_error(c, g->req, g->code, "nic %s: %s", g->id, g->error);
		pg_free(g);
		return;
	}
	for (unsigned i = 0; i < cnt; i++)
		stop_for(list[i], g->req, SUP_STOP_DEFAULT_MS, "AddNic failed on another pair");
}

/* The stops of pg_add_stop_others, after the added() call that found
 * the group failed has returned (nic.c moves that NIC to RUNNING right
 * after it): found again by connection id and request id, in case the
 * connection went meanwhile (then its NICs are stopping anyway). */
struct pg_later {
	struct sup *sup;
	unsigned conn_id;
	uint64_t req;
	char id[VALIDATE_ID_MAX + 1];
};

static void pg_later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pg_later *l = arg;
	struct vmm_conn *c;
	struct pair_group *g = NULL;

	(void)fd;
	(void)what;
	TAILQ_FOREACH(c, &l->sup->conns, link)
		if (c->id == l->conn_id) {
			g = pg_find(c, l->req, l->id);
			break;
		}
	if (g && g->kind == PG_ADD)
		pg_add_stop_others(c, g);
	free(l);
}

/* Every pair's added() came. All OK: the answer. One failed: the others
 * are stopped first (once this call has returned), and the answer
 * follows their reap. */
static void pg_add_done(struct vmm_conn *c, struct pair_group *g)
{
	static const struct timeval now = { 0, 0 };
	struct pg_later *l;

	if (g->code == VNIC__VMM__STATUS__STATUS_OK) {
		Vnic__Vmm__Reply rep;
		Vnic__Vmm__AddNicReply ar;

		vnic__vmm__reply__init(&rep);
		vnic__vmm__add_nic_reply__init(&ar);
		ar.id = g->id;
		ar.pid = g->pid0;
		rep.body_case = VNIC__VMM__REPLY__BODY_ADD_NIC;
		rep.add_nic = &ar;
		vmm_conn_reply(c, &rep, g->req, g->code, NULL);
		pg_free(g);
		return;
	}
	l = calloc(1, sizeof(*l));
	if (l) {
		l->sup = c->sup;
		l->conn_id = c->id;
		l->req = g->req;
		snprintf(l->id, sizeof(l->id), "%s", g->id);
	}
	if (!l || event_base_once(c->sup->base, -1, EV_TIMEOUT, pg_later_cb, l, &now) < 0) {
		/* Cannot defer: stop now (nic.c then logs a refused
		 * transition for the NIC whose READY this is). */
		free(l);
		pg_add_stop_others(c, g);
	}
}

/* AddNic with 2N queues: validated as a whole, split into a spec per
 * pair (each validated as any AddNic), then a NIC per pair, every fd a
 * duplicate (the frame's own close with it), each pair a queue of one
 * multi-queue tap. The answer follows the last pair's added(). */
static void add_nic_pairs(struct vmm_conn *c, uint64_t req, struct nic_spec *spec, unsigned nfds)
{
	struct nic_queue_spec q[2 * NIC_MAX_PAIRS];
	struct nic_spec ps;
	struct pair_group *g;
	unsigned npairs, k;
	char err[256], sub[200];
	int rc;

	rc = validate_nic_pairs(spec, c->sup->max_pairs ? c->sup->max_pairs : SUP_PAIRS_DEFAULT,
				&npairs, err, sizeof(err));
	for (unsigned i = 0; rc == 0 && i < spec->nqueues; i++)
		q[spec->queues[i].index] = spec->queues[i]; /* by index: 0..2N-1, each once */
	for (k = 0; rc == 0 && k < npairs; k++) {
		ps = *spec;
		ps.pair = k;
		ps.queues = &q[2 * k];
		ps.nqueues = NIC_NUM_QUEUES;
		ps.tap_multi = spec->backend == NIC_BACKEND_TAP;
		if (spec->backend != NIC_BACKEND_TAP)
			ps.backend_fd = spec->backend_fds[k];
		rc = validate_nic_spec(&ps, sub, sizeof(sub));
		if (rc)
			snprintf(err, sizeof(err), "pair %u: %s", k, sub);
	}
	if (rc) {
		log_info("conn %u: AddNic \"%.64s\" rejected: %s", c->id, spec->id, err);
		vmm_conn_reply_error(c, req, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT, "%s", err);
		return;
	}
	/* The pairs share the memory's fds (nic.c): the NICs hold the frame's. */
	if (!add_nic_admissible(c, req, spec->id, npairs, nfds))
		return;
	g = pg_new(c, req, PG_ADD, spec->id, npairs);
	if (!g) {
		pg_refuse(c, req);
		return;
	}
	for (k = 0; k < npairs; k++) {
		struct memtable_region_desc *regs = calloc(spec->nregions + 1, sizeof(*regs));
		int dups[2 * NIC_NUM_QUEUES + 1], nd = 0;

		if (!regs) {
			pg_fail(g, VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED, k, "out of memory");
			g->left -= npairs - k;
			if (g->left == 0)
				pg_add_done(c, g);
			return;
		}
		ps = *spec;
		ps.pair = k;
		ps.tap_multi = spec->backend == NIC_BACKEND_TAP;
		ps.regions = regs;
		ps.queues = &q[2 * k];
		ps.nqueues = NIC_NUM_QUEUES;
		rc = 0;
		for (unsigned i = 0; i < spec->nregions; i++) {
			regs[i] = spec->regions[i];
			regs[i].fd = fcntl(spec->regions[i].fd, F_DUPFD_CLOEXEC, 3);
			rc |= regs[i].fd < 0;
		}
		for (unsigned j = 0; j < NIC_NUM_QUEUES; j++) {
			ps.queues[j].kick_fd = dups[nd++] = fcntl(ps.queues[j].kick_fd, F_DUPFD_CLOEXEC, 3);
			ps.queues[j].call_fd = dups[nd++] = fcntl(ps.queues[j].call_fd, F_DUPFD_CLOEXEC, 3);
			rc |= ps.queues[j].kick_fd < 0 || ps.queues[j].call_fd < 0;
		}
		ps.backend_fds = NULL;
		ps.nbackend = 0;
		ps.backend_fd = -1;
		if (spec->backend != NIC_BACKEND_TAP) {
			/* Its own socket or tap fd (a queue of the VMM's tap). */
			ps.backend_fd = dups[nd++] = fcntl(spec->backend_fds[k], F_DUPFD_CLOEXEC, 3);
			rc |= ps.backend_fd < 0;
		}
		if (rc)
			snprintf(err, sizeof(err), "duplicating fds: %s", strerror(errno));
		else
			rc = nic_start(c->sup, &vmm_nic_owner, c, req, &ps, NULL, NULL, err,
				       sizeof(err));
		if (rc) {
			/* Nothing adopted: this pair's copies go; the pairs
			 * not started are heard from now. */
			for (unsigned i = 0; i < spec->nregions; i++)
				if (regs[i].fd >= 0)
					close(regs[i].fd);
			free(regs);
			for (int i = 0; i < nd; i++)
				if (dups[i] >= 0)
					close(dups[i]);
			log_warn("conn %u: AddNic \"%s\" pair %u failed: %s", c->id, spec->id, k, err);
			pg_fail(g, rc == -ENOSPC ? VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED
						 : VNIC__VMM__STATUS__STATUS_UNAVAILABLE, k, err);
			g->left -= npairs - k;
			if (g->left == 0)
				pg_add_done(c, g);
			return;
		}
		free(regs); /* nic_start copied the table; the fds are the NIC's */
	}
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
	if (rc == 0 && spec.nqueues > NIC_NUM_QUEUES) {
		/* Several queue pairs: a NIC per pair, one answer. */
		add_nic_pairs(c, r->request_id, &spec, lay.total);
		goto out;
	}
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
	if (!add_nic_admissible(c, r->request_id, spec.id, 1, lay.total))
		goto out;
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
	struct pair_group *g = pg_find(conn, n->add_req, n->id);
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__AddNicReply ar;

	if (g && g->kind == PG_ADD) {
		/* One pair of several: the answer waits for all. */
		if (code == VNIC__VMM__STATUS__STATUS_OK && n->pair == 0)
			g->pid0 = (int32_t)n->w.pid;
		if (code != VNIC__VMM__STATUS__STATUS_OK)
			pg_fail(g, code, n->pair, error);
		if (--g->left == 0)
			pg_add_done(conn, g);
		return;
	}
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
	struct nic *n = nic_find(c->sup, rm->id), *list[NIC_MAX_PAIRS], *o;
	uint32_t ms = rm->deadline_ms ? rm->deadline_ms : SUP_STOP_DEFAULT_MS;
	unsigned cnt = 0;

	/* F3: another connection's NIC is, for this peer, not there. */
	if (!n || n->ops != &vmm_nic_owner || n->owner != c) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_NOT_FOUND,
				     "no NIC \"%.64s\" on this connection", rm->id);
		return;
	}
	/* Every queue pair's NIC (one, but for several pairs: issue 15). */
	TAILQ_FOREACH(o, &c->sup->nics, link)
		if (o->owner == c && !strcmp(o->id, n->id) && cnt < NIC_MAX_PAIRS)
			list[cnt++] = o;
	for (unsigned i = 0; i < cnt; i++) {
		o = list[i];
		/* A second RemoveNic while the first waits for the worker is
		 * refused at once (it does not wait for the same completion):
		 * the first one's reply is the one that says the memory is
		 * free. */
		if (o->state == NIC_STOPPING || o->remove_pending) {
			vmm_conn_reply_error(c, r->request_id,
					     VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
					     "NIC %s is already stopping: the earlier RemoveNic (or "
					     "disconnect) is waiting for its worker", o->id);
			return;
		}
		/* Only a client that does not wait for its AddNic reply can
		 * get here; the AddNic reply comes first. */
		if (o->state == NIC_STARTING) {
			vmm_conn_reply_error(c, r->request_id,
					     VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
					     "NIC %s is still starting: wait for the AddNic reply",
					     o->id);
			return;
		}
	}
	if (ms > SUP_STOP_MAX_MS)
		ms = SUP_STOP_MAX_MS;
	if (cnt > 1 && !pg_new(c, r->request_id, PG_REMOVE, n->id, cnt)) {
		pg_refuse(c, r->request_id);
		return;
	}
	/* RUNNING: Stop and a deadline; RESTARTING with a worker starting:
	 * killed. The reply follows the reap (nic.c), of every pair. */
	for (unsigned i = 0; i < cnt; i++)
		stop_for(list[i], r->request_id, ms, "RemoveNic");
}

/* A pair of a group reaped: an AddNic that failed elsewhere answers once
 * all are; a RemoveNic collects every queue's final indices. */
static void pg_removed(struct vmm_conn *conn, struct pair_group *g, const struct nic *n,
		       Vnic__Vmm__Status code, const char *error)
{
	Vnic__Vmm__QueueIndex *qp[2 * NIC_MAX_PAIRS];
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__RemoveNicReply rr;
	struct timespec now;

	if (g->kind == PG_REMOVE) {
		if (code != VNIC__VMM__STATUS__STATUS_OK)
			pg_fail(g, code, n->pair, error);
		for (int i = 0; i < NIC_NUM_QUEUES && g->nq < 2 * NIC_MAX_PAIRS; i++) {
			if (!n->q[i].final_valid)
				continue;
			vnic__vmm__queue_index__init(&g->qi[g->nq]);
			g->qi[g->nq].index = n->q[i].index;
			g->qi[g->nq].avail_idx = n->q[i].final_avail;
			g->qi[g->nq].used_idx = n->q[i].final_used;
			g->nq++;
		}
	}
	if (--g->left > 0)
		return;
	if (g->kind == PG_ADD_FAILED) {
		vmm_conn_reply_error(conn, g->req, g->code, "nic %s: %s", g->id, g->error);
		pg_free(g);
		return;
	}
	vnic__vmm__reply__init(&rep);
	vnic__vmm__remove_nic_reply__init(&rr);
	for (size_t i = 0; i < g->nq; i++)
		qp[i] = &g->qi[i];
	clock_gettime(CLOCK_MONOTONIC, &now);
	rr.n_queues = g->nq;
	rr.queues = qp;
	rr.unplug_latency_us = (uint64_t)(now.tv_sec - g->t0.tv_sec) * 1000000u +
			       (uint64_t)((now.tv_nsec - g->t0.tv_nsec) / 1000);
	rep.body_case = VNIC__VMM__REPLY__BODY_REMOVE_NIC;
	rep.remove_nic = &rr;
	log_info("nic %s: every pair removed in %llu us", g->id,
		 (unsigned long long)rr.unplug_latency_us);
	vmm_conn_reply(conn, &rep, g->req, g->code,
		       g->code == VNIC__VMM__STATUS__STATUS_OK ? NULL : g->error);
	pg_free(g);
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
	struct pair_group *g = pg_find(conn, n->remove_req, n->id);

	if (g && g->kind != PG_ADD) {
		pg_removed(conn, g, n, code, error);
		return;
	}
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

/* By id, then a NIC's pairs in order: a row's pairs sit together, its
 * first pair first. */
static int cmp_ent(const void *a, const void *b)
{
	const struct status_ent *x = a, *y = b;
	int c = strcmp(x->id, y->id);
	uint32_t px = x->n ? x->n->pair : 0, py = y->n ? y->n->pair : 0;

	return c ? c : px < py ? -1 : px > py;
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
	char names[STATUS_QUEUES][16];
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
	b->ns.inflight = (char *)(uintptr_t)(n->inflight_fd >= 0 ? "front end"
					     : n->inflight_len ? "vnicd" : "off");
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
		snprintf(b->admin.backend, sizeof(b->admin.backend), "%s",
			 v->af_packet ? "af_packet" : "tap_fd");
		memcpy(b->admin.mac, v->mac, sizeof(b->admin.mac));
		b->ns.backend = b->admin.backend;
		b->ns.mac.data = b->admin.mac;
		b->ns.mac.len = sizeof(b->admin.mac);
		b->ns.mtu = v->mtu;
		b->ns.inflight = (char *)(uintptr_t)v->inflight;
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

/* Another pair of n's NIC with a lower pair index (its row stands for n). */
static bool lower_pair(struct sup *s, const struct nic *n)
{
	const struct nic *o;

	if (n->pair == 0)
		return false; /* most NICs: no walk, so a status listing stays linear */
	TAILQ_FOREACH(o, &s->nics, link)
		if (o->pair < n->pair && !strcmp(o->id, n->id) && !vu_nic_socket_path(o))
			return true;
	return false;
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
		/* An endpoint's pairs are in its row. A NIC of several pairs
		 * is one row: every pair is listed here, and after the sort
		 * the first (lowest pair) stands for the row, the others
		 * follow it (O(N log N) for a listing, not a walk per pair). */
		if ((!g->id[0] || !strcmp(g->id, n->id)) && !vu_nic_socket_path(n) &&
		    cnt < s->nnics + nvu)
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
		if (i > 0 && !all[i].vu && !all[i - 1].vu && !strcmp(all[i].id, all[i - 1].id))
			continue; /* a later pair: in its first pair's row */
		if (all[i].n)
			fill_status(all[i].n, &bufs[out]);
		if (all[i].n && !all[i].vu) {
			/* The NIC's other pairs' queues (issue 15): next to it. */
			for (size_t j = i + 1; j < cnt && !all[j].vu && !strcmp(all[j].id, all[i].id);
			     j++)
				fill_queues(all[j].n, &bufs[out]);
		}
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
	/* More when a NIC past the page remains (not a later pair of the
	 * page's last row). */
	for (; i < cnt; i++)
		if ((!g->start_after[0] || strcmp(all[i].id, g->start_after) > 0) &&
		    !(out > 0 && !strcmp(all[i].id, list[out - 1]->id)))
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

/* Can every other pair of first's NIC (issue 15) take a policy now, so
 * that a SetPolicy reaches all of them or none? Running with no change
 * pending, or between two workers (the next one starts with it). */
static int set_policy_pairs_ready(struct sup *s, const struct nic *first, char *err,
				  size_t errlen)
{
	const struct nic *o;

	TAILQ_FOREACH(o, &s->nics, link) {
		if (o == first || o->ops != first->ops || o->owner != first->owner ||
		    strcmp(o->id, first->id))
			continue;
		if (o->policy_pending) {
			snprintf(err, errlen, "nic %s: pair %u: a SetPolicy is already in progress",
				 o->id, o->pair);
			return -EBUSY;
		}
		if (o->state != NIC_RUNNING && !(o->state == NIC_RESTARTING && o->w.pid == 0)) {
			snprintf(err, errlen, "nic %s: pair %u is %s: a policy can change while it runs",
				 o->id, o->pair, nic_state_name(o->state));
			return -EAGAIN;
		}
	}
	return 0;
}

/* The other pairs of first's NIC take p too (checked by
 * set_policy_pairs_ready). Their confirmations answer nobody (request 0):
 * the first pair's answers the request. */
static void set_policy_other_pairs(struct sup *s, const struct nic *first,
				   const struct vnic_policy *p)
{
	struct nic *o;
	char err[128];

	TAILQ_FOREACH(o, &s->nics, link)
		if (o != first && o->ops == first->ops && o->owner == first->owner &&
		    !strcmp(o->id, first->id) && nic_set_policy(o, p, 0, 0, err, sizeof(err)) < 0)
			log_warn("nic %s: pair %u: policy not applied: %s", o->id, o->pair, err);
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
	rc = set_policy_pairs_ready(c->sup, n, err, sizeof(err));
	if (rc == 0)
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
	if (n->policy_req == 0)
		return; /* a pair after the first: its SetPolicy answers nobody */
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

static void pg_log_done(struct vmm_conn *c, struct pair_group *g)
{
	if (g->code == VNIC__VMM__STATUS__STATUS_OK)
		vmm_conn_reply_error(c, g->req, g->code, "%s", "");
	else
		vmm_conn_reply_error(c, g->req, g->code,
				     "nic %s: the dirty log was not set on every pair: %s", g->id,
				     g->error);
	pg_free(g);
}

/* SetDirtyLog on a NIC of several pairs (checked against its memory like
 * any): each pair's NIC gets its own copy of the log fd (fd: the frame's,
 * -1 to stop logging); one answer when all took it. */
static void set_dirty_log_pairs(struct vmm_conn *c, uint64_t req, const char *id, int fd,
				uint64_t size, uint64_t offset)
{
	struct nic *list[NIC_MAX_PAIRS], *o;
	struct pair_group *g;
	unsigned cnt = 0;
	char err[256];

	TAILQ_FOREACH(o, &c->sup->nics, link)
		if (o->owner == c && !strcmp(o->id, id) && cnt < NIC_MAX_PAIRS)
			list[cnt++] = o;
	for (unsigned i = 0; i < cnt; i++)
		if (dirty_log_wait_find(list[i]) || list[i]->log_pending ||
		    list[i]->state == NIC_STOPPING ||
		    list[i]->remove_pending || list[i]->state == NIC_STARTING) {
			vmm_conn_reply_error(c, req, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION,
					     "nic %s pair %u: %s", id, list[i]->pair,
					     dirty_log_wait_find(list[i]) || list[i]->log_pending
						     ? "a SetDirtyLog is already in progress"
						     : "starting or stopping: its log cannot change now");
			return;
		}
	/* Everything that can fail before any pair changes, so the log
	 * reaches every pair or none: the copies of the fd, the waits. */
	{
		struct dirty_log_wait *ws[NIC_MAX_PAIRS] = { NULL };
		int dups[NIC_MAX_PAIRS];
		bool ok = true;
		int why = 0;

		for (unsigned i = 0; i < cnt; i++) {
			dups[i] = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
			ws[i] = calloc(1, sizeof(*ws[i]));
			if (!ws[i] || (fd >= 0 && dups[i] < 0)) {
				why = ws[i] ? errno : ENOMEM;
				ok = false;
			}
		}
		g = ok ? pg_new(c, req, PG_LOG, id, cnt) : NULL;
		if (!g) {
			int e = errno;

			for (unsigned i = 0; i < cnt; i++) {
				if (dups[i] >= 0)
					close(dups[i]);
				free(ws[i]);
			}
			if (ok) {
				errno = e;
				pg_refuse(c, req);
			} else {
				vmm_conn_reply_error(c, req,
						     VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED,
						     "nic %s: cannot give every pair the log: %s", id,
						     strerror(why));
			}
			return;
		}
		for (unsigned i = 0; i < cnt; i++) {
			/* Before the call: with no worker running it answers
			 * at once. Cannot fail: no change pending (above). */
			ws[i]->n = list[i];
			ws[i]->req = req;
			ws[i]->next = dirty_log_waits;
			dirty_log_waits = ws[i];
			nic_set_dirty_log(list[i], dups[i], size, offset, err, sizeof(err));
		}
	}
}

/* Announce (issue 14): the migrated guest's RARP, out of pair 0's
 * backend (a NIC of several pairs shares one interface). Answered at
 * once: the frame is sent or it is not. */
void vmm_handle_announce(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds)
{
	const Vnic__Vmm__Announce *a = r->announce;
	struct nic *n = nic_find_pair(c->sup, a->id, 0);
	Vnic__Vmm__Reply rep;
	char err[200];
	int rc;

	(void)fds;
	/* F3: another connection's NIC (or a vhost-user endpoint's, whose
	 * front end has SEND_RARP) is, for this peer, not there. */
	if (!n || n->ops != &vmm_nic_owner || n->owner != c) {
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_NOT_FOUND,
				     "no NIC \"%.64s\" on this connection", a->id);
		return;
	}
	rc = nic_announce(n, err, sizeof(err));
	if (rc) {
		log_ratelimited(nic_log_ratelimit(n, NIC_RL_ANNOUNCE), LOG_LEVEL_WARN,
				"conn %u: Announce \"%s\": %s", c->id, n->id, err);
		vmm_conn_reply_error(c, r->request_id, VNIC__VMM__STATUS__STATUS_UNAVAILABLE,
				     "nic %s: announce: %s", n->id, err);
		return;
	}
	log_debug("conn %u: nic %s announced on %s", c->id, n->id,
		  n->backend == NIC_BACKEND_SOCKET || n->backend == NIC_BACKEND_TAP_FD ? "its backend"
										     : n->ifname);
	vnic__vmm__reply__init(&rep);
	vmm_conn_reply(c, &rep, r->request_id, VNIC__VMM__STATUS__STATUS_OK, NULL);
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
			rc = validate_log_covers(nic_regions(n), nic_nregions(n), d->size, err,
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
	if (n->pair > 0 || lower_pair(c->sup, n) || nic_find_pair(c->sup, n->id, 1)) {
		/* Several queue pairs: the log for every pair, one answer. */
		set_dirty_log_pairs(c, r->request_id, n->id, fd, d->size, d->offset);
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
	struct pair_group *g;
	uint64_t req;

	if (!dirty_log_wait_take(n, &req)) {
		log_warn("nic %s: a dirty log change nobody waits for was %s", n->id,
			 res == NIC_RES_OK ? "applied" : "refused");
		return;
	}
	g = pg_find(n->owner, req, n->id);
	if (g && g->kind == PG_LOG) {
		if (res != NIC_RES_OK)
			pg_fail(g, pbconv_result(res), n->pair,
				error && error[0] ? error : "the worker failed");
		if (--g->left == 0)
			pg_log_done(n->owner, g);
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

/* A pair of an AddNic of several pairs that is not answered yet (or
 * failed): the VMM hears nothing of it before the answer, and nothing at
 * all when the answer is a failure, as for a NIC of one pair. */
static bool vmm_nic_unannounced(const struct nic *n)
{
	const struct pair_group *g = pg_find(n->owner, n->add_req, n->id);

	return g && (g->kind == PG_ADD || g->kind == PG_ADD_FAILED);
}

static void vmm_nic_failed(struct nic *n, int sig, int exit_status, int syscall_nr)
{
	Vnic__Vmm__Event e;
	Vnic__Vmm__NicFailed f;

	if (vmm_nic_unannounced(n))
		return;
	vnic__vmm__event__init(&e);
	vnic__vmm__nic_failed__init(&f);
	f.id = n->id;
	f.pair = n->pair;
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

	if (vmm_nic_unannounced(n))
		return;
	vnic__vmm__event__init(&e);
	vnic__vmm__nic_restarted__init(&r);
	r.id = n->id;
	r.pair = n->pair;
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

	if (vmm_nic_unannounced(n))
		return;
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

	if (vmm_nic_unannounced(n))
		return;
	vnic__vmm__event__init(&e);
	vnic__vmm__nic_state_changed__init(&s);
	snprintf(text, sizeof(text), "%s", why ? why : "");
	s.id = n->id;
	s.pair = n->pair;
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

	if (!n->announced || vmm_nic_unannounced(n))
		return;
	vnic__vmm__event__init(&e);
	vnic__vmm__nic_stalled__init(&st);
	st.id = n->id;
	st.pair = n->pair;
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
