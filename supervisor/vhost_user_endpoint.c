/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_endpoint: endpoints (add, remove, status, shutdown) and their
 * sockets: listening (server) or connecting with backoff (client).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vhost_user_priv.h"

#define VU_BACKOFF_FIRST_MS 100
#define VU_BACKOFF_MAX_MS 5000

static struct vu_state *vu_state(struct sup *s)
{
	if (!s->vu) {
		s->vu = calloc(1, sizeof(*s->vu));
		if (s->vu)
			TAILQ_INIT(&s->vu->eps);
	}
	return s->vu;
}

struct vu_endpoint *vu_find(struct sup *s, const char *id)
{
	struct vu_endpoint *ep;

	if (!s->vu)
		return NULL;
	TAILQ_FOREACH(ep, &s->vu->eps, link)
		if (!strcmp(ep->cfg.id, id))
			return ep;
	return NULL;
}

bool vu_endpoint_exists(struct sup *s, const char *id)
{
	return vu_find(s, id) != NULL;
}

const char *vu_tap_user(struct sup *s, const char *netns, const char *tap,
			const char *except_id)
{
	struct vu_state *vs = vu_state(s);
	struct vu_endpoint *ep;
	struct nic *n;

	if (!tap || !tap[0])
		return NULL; /* the kernel picks a new tapN */
	netns = netns ? netns : "";
	if (vs)
		TAILQ_FOREACH(ep, &vs->eps, link)
			if ((!except_id || strcmp(ep->cfg.id, except_id)) &&
			    !strcmp(ep->ifname, tap) && !strcmp(ep->cfg.netns, netns))
				return ep->cfg.id;
	TAILQ_FOREACH(n, &s->nics, link)
		if ((!except_id || strcmp(n->id, except_id)) && !strcmp(n->ifname, tap) &&
		    !strcmp(n->netns, netns) && !vu_nic_socket_path(n))
			return n->id;
	return NULL;
}

static void vu_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct vu_endpoint *ep = arg;
	int fd;

	(void)what;
	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			/* Out of fds: the listener would fire again at once.
			 * Take it out of the loop and retry in 200 ms. */
			struct timeval tv = { 0, 200000 };

			log_ratelimited(&vu_rl, LOG_LEVEL_WARN, "vhost-user %s: accept: %s: paused",
					ep->cfg.id, strerror(errno));
			event_del(ep->ev_listen);
			evtimer_add(ep->ev_retry, &tv);
		}
		return;
	}
	if (ep->conn) {
		/* The previous front end's worker may still be stopping: the
		 * new one's starts once it is reaped (vu_try_start). */
		log_ratelimited(&vu_rl, LOG_LEVEL_WARN, "vhost-user %s: a second front end: refused "
				"(one at a time)", ep->cfg.id);
		close(fd);
		return;
	}
	vu_conn_open(ep, fd);
}

static void vu_client_try(evutil_socket_t x, short what, void *arg)
{
	struct vu_endpoint *ep = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	(void)x;
	(void)what;
	if (ep->removing || ep->shutting_down)
		return;
	if (ep->cfg.server) {
		/* After an accept that ran out of fds. */
		event_add(ep->ev_listen, NULL);
		return;
	}
	if (ep->conn)
		return;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		vu_client_schedule(ep);
		return;
	}
	memcpy(sa.sun_path, ep->cfg.path, strlen(ep->cfg.path) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (ep->backoff_ms == 0 || ep->backoff_ms >= VU_BACKOFF_MAX_MS)
			log_debug("vhost-user %s: connect %s: %s", ep->cfg.id, ep->cfg.path,
				  strerror(errno));
		vu_errorf(ep, "connect %s: %s", ep->cfg.path, strerror(errno));
		close(fd);
		vu_client_schedule(ep);
		return;
	}
	vu_conn_open(ep, fd);
}

/* Next attempt: 100 ms, doubling to 5 s, reset by a connection. */
void vu_client_schedule(struct vu_endpoint *ep)
{
	struct timeval tv;

	ep->backoff_ms = ep->backoff_ms ? ep->backoff_ms * 2 : VU_BACKOFF_FIRST_MS;
	if (ep->backoff_ms > VU_BACKOFF_MAX_MS)
		ep->backoff_ms = VU_BACKOFF_MAX_MS;
	tv.tv_sec = ep->backoff_ms / 1000;
	tv.tv_usec = (ep->backoff_ms % 1000) * 1000;
	evtimer_add(ep->ev_retry, &tv);
}

/* ------------------------------------------------------- endpoints */

static void vu_endpoint_free(struct vu_endpoint *ep)
{
	if (ep->ev_listen)
		event_free(ep->ev_listen);
	if (ep->ev_retry)
		event_free(ep->ev_retry);
	if (ep->ev_resume)
		event_free(ep->ev_resume);
	if (ep->listen_fd >= 0) {
		close(ep->listen_fd);
		unlink(ep->cfg.path);
	}
	for (unsigned k = 0; ep->p && k < ep->max_pairs; k++) {
		close_fd(&ep->p[k].tap_fd);
		vu_session_stats_unmap(&ep->p[k]);
	}
	free(ep->p);
	free(ep);
}

static int vu_listen(struct vu_endpoint *ep, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	/* A stale socket from an earlier run is replaced; anything else at
	 * PATH is not ours to remove. */
	if (lstat(ep->cfg.path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", ep->cfg.path);
			return -EEXIST;
		}
		unlink(ep->cfg.path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return rc;
	}
	memcpy(sa.sun_path, ep->cfg.path, strlen(ep->cfg.path) + 1);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(ep->cfg.path, 0660) < 0 ||
	    listen(fd, 4) < 0) {
		rc = -errno;
		snprintf(err, errlen, "listen on %s: %s", ep->cfg.path, strerror(errno));
		close(fd);
		return rc;
	}
	ep->listen_fd = fd;
	return 0;
}

/* An endpoint of cfg with max_pairs pairs, no fd, its events made, in no
 * list: the start of vu_endpoint_add's and of a handover's. NULL when out
 * of memory (nothing left). */
static struct vu_endpoint *vu_endpoint_alloc(struct sup *s, const struct vu_config *cfg,
					     unsigned max_pairs)
{
	struct vu_endpoint *ep = calloc(1, sizeof(*ep));

	if (!ep)
		return NULL;
	ep->sup = s;
	ep->cfg = *cfg;
	ep->msg_rl = (struct log_ratelimit)LOG_RATELIMIT_INIT(5000, 20);
	ep->listen_fd = -1;
	ep->max_pairs = max_pairs;
	ep->p = calloc(max_pairs, sizeof(*ep->p));
	ep->ev_retry = evtimer_new(s->base, vu_client_try, ep);
	ep->ev_resume = event_new(s->base, -1, 0, vu_resume_cb, ep);
	if (!ep->p || !ep->ev_retry || !ep->ev_resume) {
		vu_endpoint_free(ep);
		return NULL;
	}
	for (unsigned k = 0; k < max_pairs; k++)
		ep->p[k].tap_fd = -1;
	return ep;
}

int vu_endpoint_add(struct sup *s, const struct vu_config *cfg, char *ifname_out,
		    size_t ifname_len, char *err, size_t errlen)
{
	struct vu_state *vs = vu_state(s);
	struct vu_endpoint *ep;
	bool recreated = false;
	char sub[160];
	int rc;

	if (!vs) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = validate_nic_id(cfg->id, strlen(cfg->id), false, err, errlen);
	if (rc)
		return rc;
	if (!cfg->path[0] || cfg->path[0] != '/' || strlen(cfg->path) >= sizeof(cfg->path)) {
		snprintf(err, errlen, "socket path must be absolute and shorter than %zu bytes",
			 sizeof(cfg->path));
		return -EINVAL;
	}
	if (cfg->af_packet && !cfg->tap[0]) {
		snprintf(err, errlen, "an af_packet endpoint needs an interface name");
		return -EINVAL;
	}
	if ((cfg->tap[0] && validate_ifname(cfg->tap, err, errlen)) ||
	    (cfg->netns[0] && validate_netns_name(cfg->netns, err, errlen)))
		return -EINVAL;
	if (vu_tap_user(s, cfg->netns, cfg->tap, NULL)) {
		snprintf(err, errlen, "tap %s is in use by \"%s\"", cfg->tap,
			 vu_tap_user(s, cfg->netns, cfg->tap, NULL));
		return -EBUSY;
	}
	if (cfg->mac_set && validate_mac(cfg->mac, 6, err, errlen))
		return -EINVAL;
	if (cfg->mtu && validate_mtu(cfg->mtu, err, errlen))
		return -EINVAL;
	rc = validate_policy(&cfg->policy, sub, sizeof(sub));
	if (rc) {
		snprintf(err, errlen, "%s", sub);
		return rc;
	}
	if (vu_find(s, cfg->id) || nic_find(s, cfg->id)) {
		snprintf(err, errlen, "a NIC or endpoint with id \"%s\" exists", cfg->id);
		return -EEXIST;
	}
	TAILQ_FOREACH(ep, &vs->eps, link)
		if (!strcmp(ep->cfg.path, cfg->path)) {
			snprintf(err, errlen, "endpoint %s already uses %s", ep->cfg.id, cfg->path);
			return -EEXIST;
		}
	if (s->shutting_down) {
		snprintf(err, errlen, "vnicd is shutting down");
		return -ESHUTDOWN;
	}

	/* GET_QUEUE_NUM answers twice max_pairs (virtqueues). AF_PACKET: one. */
	ep = vu_endpoint_alloc(s, cfg, cfg->af_packet ? 1 : s->max_pairs ? s->max_pairs
								 : SUP_PAIRS_DEFAULT);
	if (!ep) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (!cfg->mac_set) {
		/* Locally administered, unicast, stable per id (FNV-1a). */
		uint32_t h = 2166136261u;

		for (const char *p = cfg->id; *p; p++)
			h = (h ^ (uint8_t)*p) * 16777619u;
		ep->cfg.mac[0] = 0x52, ep->cfg.mac[1] = 0x54;
		ep->cfg.mac[2] = (uint8_t)(h >> 24), ep->cfg.mac[3] = (uint8_t)(h >> 16);
		ep->cfg.mac[4] = (uint8_t)(h >> 8), ep->cfg.mac[5] = (uint8_t)h;
		ep->cfg.mac_set = true;
	}
	nic_policy_resolve(&ep->cfg.policy);
	if (cfg->af_packet) {
		/* AF_PACKET (issue 17): the interface exists; each session's
		 * NIC binds a socket of its own to it (nic.c), so there is
		 * nothing to hold between sessions. */
		snprintf(ep->ifname, sizeof(ep->ifname), "%s", cfg->tap);
		goto opened;
	}
	/* A multi-queue tap: pair 0's queue now, the others' as their pairs
	 * first run (doc/multiqueue.md). */
	rc = tap_open_queues(cfg->tap, cfg->netns, 0, 1, &ep->p[0].tap_fd, ep->ifname, &recreated, err, errlen);
	if (rc)
		goto out_free;
	if (recreated)
		log_warn("vhost-user %s: tap %s was a single-queue tap (an older vnicd's): made "
			 "again as a multi-queue tap; its addresses and routes are gone", cfg->id,
			 ep->ifname);
	/* The tap survives a vnicd restart (client mode resumes on it, its
	 * address intact); endpoint removal deletes it. */
	rc = tap_set_persist(ep->p[0].tap_fd, true);
	if (rc) {
		snprintf(err, errlen, "tap %s: TUNSETPERSIST: %s", ep->ifname, strerror(-rc));
		goto out_free;
	}
	/* The tap carries what the guest may send: the endpoint's MTU. */
	rc = tap_set_mtu(ep->ifname, cfg->netns, cfg->mtu ? cfg->mtu : SUP_MTU_DEFAULT, err, errlen);
	if (rc) {
		tap_set_persist(ep->p[0].tap_fd, false);
		goto out_free;
	}
opened:
	if (cfg->server) {
		rc = vu_listen(ep, err, errlen);
		if (rc) {
			tap_set_persist(ep->p[0].tap_fd, false);
			goto out_free;
		}
		ep->ev_listen = event_new(s->base, ep->listen_fd, EV_READ | EV_PERSIST, vu_accept_cb, ep);
		if (!ep->ev_listen) {
			snprintf(err, errlen, "out of memory");
			tap_set_persist(ep->p[0].tap_fd, false);
			rc = -ENOMEM;
			goto out_free;
		}
		event_add(ep->ev_listen, NULL);
	}
	rc = vu_state_save(s, &ep->cfg, err, errlen);
	if (rc) {
		tap_set_persist(ep->p[0].tap_fd, false);
		goto out_free;
	}
	TAILQ_INSERT_TAIL(&vs->eps, ep, link);
	if (!cfg->server)
		event_active(ep->ev_retry, EV_TIMEOUT, 0);
	snprintf(ifname_out, ifname_len, "%s", ep->ifname);
	log_info("vhost-user %s: endpoint on %s (%s), %s %s%s%s", ep->cfg.id, ep->cfg.path,
		 cfg->server ? "server: listening" : "client: connecting",
		 cfg->af_packet ? "af_packet on" : "tap", ep->ifname,
		 cfg->netns[0] ? " in netns " : "", cfg->netns);
	return 0;

out_free:
	vu_endpoint_free(ep);
	return rc;
}

struct vu_endpoint *vu_endpoint_adopt(struct sup *s, const struct vu_config *cfg,
				      unsigned max_pairs, const char *ifname, int listen_fd,
				      char *err, size_t errlen)
{
	struct vu_state *vs = vu_state(s);
	struct vu_endpoint *ep = vs ? vu_endpoint_alloc(s, cfg, max_pairs) : NULL;

	if (ep && listen_fd >= 0)
		ep->ev_listen = event_new(s->base, listen_fd, EV_READ | EV_PERSIST, vu_accept_cb,
					  ep);
	if (!ep || (listen_fd >= 0 && !ep->ev_listen)) {
		/* Nothing of the handover is closed (listen_fd is not the
		 * endpoint's yet): the old binary may take it back. */
		if (ep)
			vu_endpoint_free(ep);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(ep->ifname, sizeof(ep->ifname), "%s", ifname);
	ep->listen_fd = listen_fd;
	if (ep->ev_listen)
		event_add(ep->ev_listen, NULL);
	TAILQ_INSERT_TAIL(&vs->eps, ep, link);
	return ep;
}

void vu_finish_remove(struct vu_endpoint *ep)
{
	struct sup *s = ep->sup;
	struct timespec now;
	char path[512];
	uint64_t us, req;
	vu_removed_fn done;
	unsigned conn;
	bool deadline;

	clock_gettime(CLOCK_MONOTONIC, &now);
	us = (uint64_t)(now.tv_sec - ep->rm_t0.tv_sec) * 1000000u +
	     (uint64_t)((now.tv_nsec - ep->rm_t0.tv_nsec) / 1000);
	if (s->state_dir) {
		vu_state_path(s, ep->cfg.id, path, sizeof(path));
		unlink(path);
	}
	TAILQ_REMOVE(&s->vu->eps, ep, link);
	if (ep->p[0].tap_fd >= 0)
		tap_set_persist(ep->p[0].tap_fd, false); /* gone with our fds */
	log_info("vhost-user %s: endpoint removed in %llu us", ep->cfg.id, (unsigned long long)us);
	done = ep->rm_done;
	conn = ep->rm_conn;
	req = ep->rm_req;
	deadline = ep->rm_deadline;
	/* Socket unlinked and tap gone before the answer. */
	vu_endpoint_free(ep);
	if (done)
		done(s, conn, req, deadline, us);
}

int vu_endpoint_remove(struct sup *s, const char *id, uint32_t deadline_ms, vu_removed_fn done,
		       unsigned conn_id, uint64_t request_id)
{
	struct vu_endpoint *ep = vu_find(s, id);

	if (!ep)
		return -ENOENT;
	if (ep->removing)
		return -EBUSY;
	ep->removing = true;
	ep->rm_done = done;
	ep->rm_conn = conn_id;
	ep->rm_req = request_id;
	ep->rm_deadline_ms = deadline_ms;
	clock_gettime(CLOCK_MONOTONIC, &ep->rm_t0);
	if (ep->ev_listen)
		event_del(ep->ev_listen);
	event_del(ep->ev_retry);
	vu_stop_nic(ep, deadline_ms, "endpoint removed");
	vu_conn_close(ep, "endpoint removed");
	if (!vu_any_nic(ep))
		event_active(ep->ev_resume, EV_TIMEOUT, 0);
	return 0;
}

struct nic *vu_status_pair(const struct vu_status *v, unsigned k)
{
	const struct vu_endpoint *ep = v->ep;

	return ep && k < ep->max_pairs ? ep->p[k].nic : NULL;
}

const char *vu_nic_socket_path(const struct nic *n)
{
	const struct vu_endpoint *ep = n->owner;

	return n->ops == &vu_nic_owner && ep ? ep->cfg.path : NULL;
}

unsigned vu_status_list(struct sup *s, struct vu_status *out, unsigned max)
{
	struct vu_endpoint *ep;
	unsigned n = 0;

	if (!s->vu)
		return 0;
	TAILQ_FOREACH(ep, &s->vu->eps, link) {
		if (n < max) {
			struct vu_status *o = &out[n];

			o->id = ep->cfg.id;
			o->path = ep->cfg.path;
			o->server = ep->cfg.server;
			o->nic = NULL;
			for (unsigned k = 0; k < ep->max_pairs && !o->nic; k++)
				o->nic = ep->p[k].nic;
			o->ep = ep;
			o->npairs = ep->max_pairs;
			o->state = ep->removing ? "removing" : vu_any_running(ep) ? "running" :
				   o->nic ? "stopping" : ep->conn ? "negotiating" :
				   ep->cfg.server ? "listening" : "connecting";
			o->last_error = ep->last_error;
			o->connects = ep->connects;
			o->messages = ep->messages;
			o->rejected = ep->rejected;
			o->reconfigs = ep->reconfigs;
			o->policy = &ep->cfg.policy;
			o->mac = ep->cfg.mac;
			o->tap = ep->ifname;
			o->af_packet = ep->cfg.af_packet;
			o->inflight = ep->conn && ep->conn->inflight_fd >= 0 ? "front end"
				      : s->inflight_off ? "off" : "vnicd";
			o->mtu = ep->cfg.mtu ? ep->cfg.mtu : SUP_MTU_DEFAULT;
		}
		n++;
	}
	return n;
}

void vu_shutdown(struct sup *s)
{
	struct vu_endpoint *ep;

	if (!s->vu)
		return;
	TAILQ_FOREACH(ep, &s->vu->eps, link) {
		ep->shutting_down = true;
		if (ep->ev_listen)
			event_del(ep->ev_listen);
		event_del(ep->ev_retry);
		vu_conn_close(ep, "vnicd is shutting down");
	}
}

void vu_spares_discard(struct sup *s)
{
	struct vu_endpoint *ep;

	if (!s->vu)
		return;
	TAILQ_FOREACH(ep, &s->vu->eps, link)
		if (ep->conn)
			worker_spare_discard(s, &ep->conn->spare, "vnicd upgrades");
	worker_spare_reap_all(s);
}

void vu_free_all(struct sup *s)
{
	struct vu_endpoint *ep;

	if (!s->vu)
		return;
	while ((ep = TAILQ_FIRST(&s->vu->eps))) {
		TAILQ_REMOVE(&s->vu->eps, ep, link);
		vu_endpoint_free(ep);
	}
	free(s->vu);
	s->vu = NULL;
}

void vu_print_capabilities(void)
{
	/* QEMU docs/interop/vhost-user.rst "Backend program conventions":
	 * a net back end has no type-specific capabilities. */
	printf("{\n  \"type\": \"net\"\n}\n");
}
