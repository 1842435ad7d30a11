/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_handover: the vhost-user endpoints in an upgrade in place
 * (handover.h). An endpoint goes over between two messages of its front
 * end: its listener, its tap queues, its connection with everything the
 * front end negotiated (features, memory table, rings and their eventfds,
 * dirty log), its pairs' life counters. The front end sees nothing: its
 * socket stays open, the next message it sends is read by the new
 * process.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handover_priv.h"
#include "pbconv.h"
#include "policy_pb.h"
#include "vhost_user_priv.h"

const char *vu_handover_busy(struct sup *s, char *buf, size_t len, struct ho_fds *cut)
{
	struct vu_endpoint *ep;

	if (!s->vu)
		return NULL;
	TAILQ_FOREACH(ep, &s->vu->eps, link) {
		const struct vu_conn *c = ep->conn;
		const char *why = NULL;

		if (ep->removing || ep->shutting_down)
			why = "it is being removed";
		else if (c && c->waiting)
			why = "an answer to its front end waits for a worker";
		else if (c && c->rx.have && cut)
			ho_fds_add(cut, c->fd);
		else if (c && c->rx.have)
			why = "a message of its front end is half read";
		else if (event_pending(ep->ev_resume, EV_TIMEOUT | EV_READ, NULL))
			why = "it is resuming";
		for (unsigned k = 0; !why && k < ep->max_pairs; k++)
			if (ep->p[k].stopping || ep->p[k].log_pending)
				why = "a pair's worker is stopping or changing its log";
		if (why) {
			snprintf(buf, len, "vhost-user %s: %s", ep->cfg.id, why);
			return buf;
		}
	}
	return NULL;
}

static Vnic__Handover__VuConn *conn_save(struct ho_arena *a, const struct vu_conn *c)
{
	Vnic__Handover__VuConn *m = ho_alloc(a, sizeof(*m));

	if (!m)
		return NULL;
	vnic__handover__vu_conn__init(m);
	m->fd = c->fd;
	m->owner = c->owner;
	m->features_set = c->features_set;
	m->features = c->features;
	m->proto = c->proto;
	m->regions = (Vnic__Handover__Region **)ho_array(a, c->nreg);
	for (unsigned i = 0; i < c->nreg && !a->oom; i++)
		m->regions[m->n_regions++] = ho_region(a, &c->reg[i].d, c->reg[i].uva,
						       c->reg[i].sealed);
	m->rings = (Vnic__Handover__Ring **)ho_array(a, c->nrings);
	for (unsigned i = 0; i < c->nrings && !a->oom; i++) {
		const struct vu_ring *r = &c->r[i];
		Vnic__Handover__Ring *rm = ho_alloc(a, sizeof(*rm));

		if (!rm)
			break;
		vnic__handover__ring__init(rm);
		rm->num_set = r->num_set;
		rm->addr_set = r->addr_set;
		rm->num = r->num;
		rm->desc = r->desc;
		rm->used = r->used;
		rm->avail = r->avail;
		rm->next_avail = r->base;
		rm->kick_fd = r->kick_fd;
		rm->call_fd = r->call_fd;
		rm->err_fd = r->err_fd;
		rm->kick_polled = r->kick_polled;
		rm->started = r->started;
		rm->enabled = r->enabled;
		rm->log = r->log;
		rm->log_addr = r->log_addr;
		m->rings[m->n_rings++] = rm;
	}
	m->status = c->status;
	m->needs_reset = c->needs_reset;
	m->mtu = c->mtu;
	m->log_fd = c->log_fd;
	m->log_size = c->log_size;
	m->log_offset = c->log_offset;
	m->inflight_fd = c->inflight_fd;
	m->inflight_size = c->inflight_size;
	m->inflight_offset = c->inflight_offset;
	m->inflight_queues = c->inflight_nq;
	m->inflight_queue_size = c->inflight_qsize;
	return a->oom ? NULL : m;
}

static Vnic__Handover__Endpoint *ep_save(struct ho_arena *a, const struct vu_endpoint *ep)
{
	Vnic__Handover__Endpoint *m = ho_alloc(a, sizeof(*m));
	Vnic__Vmm__AddVhostUser *cfg = ho_alloc(a, sizeof(*cfg));
	Vnic__Vmm__TapBackend *tap = ho_alloc(a, sizeof(*tap));
	Vnic__Vmm__Policy *pol = ho_alloc(a, sizeof(*pol));
	uint8_t *mac = ho_alloc(a, 6);

	if (!m || !cfg || !tap || !pol || !mac)
		return NULL;
	vnic__handover__endpoint__init(m);
	vnic__vmm__add_vhost_user__init(cfg);
	vnic__vmm__tap_backend__init(tap);
	vnic__vmm__policy__init(pol);
	cfg->id = ho_str(a, ep->cfg.id);
	cfg->path = ho_str(a, ep->cfg.path);
	cfg->server = ep->cfg.server;
	tap->name = ho_str(a, ep->cfg.tap);
	tap->netns = ho_str(a, ep->cfg.netns);
	cfg->tap = tap;
	memcpy(mac, ep->cfg.mac, 6);
	cfg->mac.data = mac;
	cfg->mac.len = 6;
	cfg->mtu = ep->cfg.mtu;
	policy_to_pb(&ep->cfg.policy, pol);
	cfg->policy = pol;
	cfg->af_packet = ep->cfg.af_packet;
	m->cfg = cfg;
	m->ifname = ho_str(a, ep->ifname);
	m->listen_fd = ep->listen_fd;
	if (ep->conn) {
		m->conn = conn_save(a, ep->conn);
		if (!m->conn)
			return NULL;
	}
	m->conn_gen = ep->conn_gen;
	m->pairs = (Vnic__Handover__Pair **)ho_array(a, ep->max_pairs);
	for (unsigned k = 0; k < ep->max_pairs && !a->oom; k++) {
		const struct vu_pair *p = &ep->p[k];
		Vnic__Handover__Pair *pm = ho_alloc(a, sizeof(*pm));

		if (!pm)
			break;
		vnic__handover__pair__init(pm);
		pm->has_nic = p->nic != NULL;
		pm->gen = p->gen;
		pm->tap_fd = p->tap_fd;
		pm->detached = p->detached;
		pm->life = (Vnic__Handover__Counters **)ho_array(a, NIC_NUM_QUEUES);
		for (unsigned i = 0; pm->life && i < NIC_NUM_QUEUES; i++)
			pm->life[pm->n_life++] = ho_counters_save(a, &p->life[i]);
		m->pairs[m->n_pairs++] = pm;
	}
	m->start_failed = ep->start_failed;
	m->connects = ep->connects;
	m->messages = ep->messages;
	m->rejected = ep->rejected;
	m->reconfigs = ep->reconfigs;
	m->last_error = ho_str(a, ep->last_error);
	m->backoff_ms = ep->backoff_ms;
	return a->oom ? NULL : m;
}

int vu_handover_save(struct sup *s, struct ho_arena *a, Vnic__Handover__Handover *m)
{
	struct vu_endpoint *ep;
	size_t n = 0;

	if (!s->vu)
		return 0;
	TAILQ_FOREACH(ep, &s->vu->eps, link)
		n++;
	m->endpoints = (Vnic__Handover__Endpoint **)ho_array(a, n);
	TAILQ_FOREACH(ep, &s->vu->eps, link) {
		Vnic__Handover__Endpoint *em = m->n_endpoints < n ? ep_save(a, ep) : NULL;

		if (!em)
			return -ENOMEM;
		m->endpoints[m->n_endpoints++] = em;
	}
	return 0;
}

/* ------------------------------------------------------------ the check */

static int ep_check(const Vnic__Handover__Handover *m, size_t i, char *err, size_t errlen)
{
	const Vnic__Handover__Endpoint *e = m->endpoints[i];
	const Vnic__Handover__VuConn *c = e->conn;
	struct vu_config cfg;
	char sub[192];

	if (!e->cfg || pbconv_add_vhost_user(e->cfg, &cfg, sub, sizeof(sub)) < 0) {
		snprintf(err, errlen, "endpoint %zu: %s", i, e->cfg ? sub : "no configuration");
		return -EINVAL;
	}
	if (nic_policy_check(e->cfg->policy, sub, sizeof(sub)) < 0) {
		snprintf(err, errlen, "endpoint %s: %s", cfg.id, sub);
		return -EINVAL;
	}
	if (e->n_pairs < 1 || e->n_pairs > NIC_MAX_PAIRS || strlen(e->ifname) >= 16 ||
	    strlen(e->last_error) >= 192 || (cfg.server && e->listen_fd < 0) ||
	    (c && (c->fd < 0 || c->n_rings != 2 * e->n_pairs ||
		   c->n_regions > MEMTABLE_MAX_REGIONS))) {
		snprintf(err, errlen, "endpoint %s: a field out of range", cfg.id);
		return -EINVAL;
	}
	/* The front end's inflight region: as h_set_inflight_fd took it. */
	if (c && c->inflight_fd > 0 &&
	    vu_inflight_geometry(c->inflight_queues, c->inflight_queue_size, (unsigned)c->n_rings,
				 sub, sizeof(sub)) < 0) {
		snprintf(err, errlen, "endpoint %s: inflight region: %s", cfg.id, sub);
		return -EINVAL;
	}
	if (c && c->inflight_fd > 0 &&
	    c->inflight_size != vu_inflight_size(c->inflight_queues, c->inflight_queue_size)) {
		snprintf(err, errlen, "endpoint %s: inflight region of %llu bytes", cfg.id,
			 (unsigned long long)c->inflight_size);
		return -EINVAL;
	}
	for (size_t j = 0; c && j < c->n_rings; j++)
		if (c->rings[j]->num > 32768 || c->rings[j]->next_avail > 0xffff) {
			snprintf(err, errlen, "endpoint %s: ring %zu out of range", cfg.id, j);
			return -EINVAL;
		}
	for (size_t k = 0; k < i; k++)
		if (!strcmp(m->endpoints[k]->cfg->id, cfg.id)) {
			snprintf(err, errlen, "endpoint %s twice", cfg.id);
			return -EINVAL;
		}
	for (size_t k = 0; k < e->n_pairs; k++) {
		unsigned nics = 0;

		if (e->pairs[k]->n_life > NIC_NUM_QUEUES) {
			snprintf(err, errlen, "endpoint %s: pair %zu: counters", cfg.id, k);
			return -EINVAL;
		}
		for (size_t j = 0; j < m->n_nics; j++)
			nics += !strcmp(m->nics[j]->owner_kind, "vhost-user") &&
				!strcmp(m->nics[j]->owner_endpoint, cfg.id) &&
				m->nics[j]->pair == k;
		if (nics != (e->pairs[k]->has_nic ? 1u : 0u)) {
			snprintf(err, errlen, "endpoint %s: pair %zu has %u NICs in the handover",
				 cfg.id, k, nics);
			return -EINVAL;
		}
	}
	return 0;
}

int vu_handover_check(const Vnic__Handover__Handover *m, char *err, size_t errlen)
{
	for (size_t i = 0; i < m->n_endpoints; i++) {
		int rc = ep_check(m, i, err, errlen);

		if (rc)
			return rc;
	}
	/* Every vhost-user NIC has its pair (its pair index below n_pairs). */
	for (size_t j = 0; j < m->n_nics; j++) {
		const Vnic__Handover__Nic *n = m->nics[j];
		bool found = false;

		if (strcmp(n->owner_kind, "vhost-user"))
			continue;
		for (size_t i = 0; i < m->n_endpoints; i++)
			found |= !strcmp(m->endpoints[i]->cfg->id, n->owner_endpoint) &&
				 n->pair < m->endpoints[i]->n_pairs;
		if (!found) {
			snprintf(err, errlen, "nic %s: no endpoint pair %u", n->id, n->pair);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---------------------------------------------------------- the restore */

void *vu_handover_owner(struct sup *s, const char *id)
{
	return vu_find(s, id);
}

static int conn_restore(struct vu_endpoint *ep, const Vnic__Handover__VuConn *m)
{
	struct vu_conn *c = vu_conn_new(ep, m->fd);

	if (!c)
		return -ENOMEM;
	c->owner = m->owner;
	c->features_set = m->features_set;
	c->features = m->features;
	c->proto = m->proto;
	c->nreg = (unsigned)m->n_regions;
	for (size_t i = 0; i < m->n_regions; i++) {
		ho_region_load(m->regions[i], &c->reg[i].d);
		c->reg[i].uva = m->regions[i]->uva;
		c->reg[i].sealed = m->regions[i]->sealed;
	}
	for (size_t i = 0; i < m->n_rings; i++) {
		const Vnic__Handover__Ring *rm = m->rings[i];
		struct vu_ring *r = &c->r[i];

		r->num_set = rm->num_set;
		r->addr_set = rm->addr_set;
		r->num = rm->num;
		r->desc = rm->desc;
		r->used = rm->used;
		r->avail = rm->avail;
		r->base = (uint16_t)rm->next_avail;
		r->kick_fd = rm->kick_fd;
		r->call_fd = rm->call_fd;
		r->err_fd = rm->err_fd;
		r->kick_polled = rm->kick_polled;
		r->started = rm->started;
		r->enabled = rm->enabled;
		r->log = rm->log;
		r->log_addr = rm->log_addr;
	}
	c->status = m->status;
	c->needs_reset = m->needs_reset;
	c->mtu = m->mtu;
	c->log_fd = m->log_fd;
	c->log_size = m->log_size;
	c->log_offset = m->log_offset;
	if (m->inflight_fd > 0) {
		c->inflight_fd = m->inflight_fd;
		c->inflight_size = m->inflight_size;
		c->inflight_offset = m->inflight_offset;
		c->inflight_nq = (uint16_t)m->inflight_queues;
		c->inflight_qsize = (uint16_t)m->inflight_queue_size;
	}
	return 0;
}

int vu_handover_restore(struct sup *s, const Vnic__Handover__Handover *m, char *err,
			size_t errlen)
{
	for (size_t i = 0; i < m->n_endpoints; i++) {
		const Vnic__Handover__Endpoint *e = m->endpoints[i];
		struct vu_endpoint *ep;
		struct vu_config cfg;
		int rc;

		rc = pbconv_add_vhost_user(e->cfg, &cfg, err, errlen);
		if (rc)
			return rc;
		ep = vu_endpoint_adopt(s, &cfg, (unsigned)e->n_pairs, e->ifname, e->listen_fd, err,
				       errlen);
		if (!ep)
			return -ENOMEM;
		for (unsigned k = 0; k < ep->max_pairs; k++) {
			const Vnic__Handover__Pair *pm = e->pairs[k];
			struct vu_pair *p = &ep->p[k];

			p->gen = pm->gen;
			p->tap_fd = pm->tap_fd;
			p->detached = pm->detached;
			for (size_t q = 0; q < pm->n_life; q++)
				ho_counters_load(pm->life[q], &p->life[q]);
		}
		if (e->conn && conn_restore(ep, e->conn) < 0) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		ep->conn_gen = e->conn_gen;
		ep->start_failed = e->start_failed;
		ep->connects = e->connects;
		ep->messages = e->messages;
		ep->rejected = e->rejected;
		ep->reconfigs = e->reconfigs;
		snprintf(ep->last_error, sizeof(ep->last_error), "%s", e->last_error);
		ep->backoff_ms = e->backoff_ms;
		if (!ep->cfg.server && !ep->conn)
			vu_client_schedule(ep);
	}
	return 0;
}

int vu_handover_pairs(struct sup *s, const Vnic__Handover__Handover *m, char *err,
		      size_t errlen)
{
	for (size_t i = 0; i < m->n_endpoints; i++) {
		const Vnic__Handover__Endpoint *e = m->endpoints[i];
		struct vu_endpoint *ep = vu_handover_owner(s, e->cfg->id);

		for (unsigned k = 0; ep && k < ep->max_pairs; k++) {
			struct vu_pair *p = &ep->p[k];

			if (!e->pairs[k]->has_nic)
				continue;
			p->nic = nic_find_pair(s, ep->cfg.id, k);
			if (!p->nic || p->nic->owner != ep) {
				snprintf(err, errlen, "vhost-user %s: pair %u: its NIC is missing",
					 ep->cfg.id, k);
				return -EINVAL;
			}
			vu_session_stats_map(ep, p);
		}
	}
	return 0;
}
