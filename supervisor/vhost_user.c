/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user: the vhost-user back end for net devices (vhost_user.h).
 *
 * One struct vu_endpoint per endpoint, one struct vu_conn for the front
 * end connected to it (at most one). Every message passes, in order:
 *   1. framing (vu_recv): header, size <= VU_PAYLOAD_MAX, fds only with
 *      the first bytes, at most VU_MAX_FDS;
 *   2. the request table (vu_msg_check): known request, version-1 flags,
 *      payload size and fd count in the row's range;
 *   3. negotiation: a request whose protocol feature was not negotiated,
 *      or that needs SET_OWNER first, is refused;
 *   4. the handler, which checks its own payload whole (indices, sizes,
 *      regions, ring addresses) before it changes anything.
 * A refused message: with NEED_REPLY, the u64 failure answer (1); a
 * request that always has an answer (GET_*) cannot be answered wrongly,
 * so the connection is closed; otherwise the message is dropped. Each
 * gets one rate-limited log line and counts in status (vhost_rejected).
 * A framing error closes the connection (one log line). Every fd of a
 * message that a handler did not adopt is closed after it.
 *
 * The NIC: when both rings are ready (size, addresses, kick fd, enabled,
 * memory table set), the endpoint builds a struct nic_spec from what the
 * front end sent (ring addresses translated from the front end's virtual
 * addresses to guest physical ones through the memory table; every fd
 * duplicated, so that the NIC owns its own), validates it with
 * validate_nic_spec like any AddNic, and starts it with nic_start as its
 * owner. The tap is passed as a tap fd (vnicd opened it at endpoint add).
 * Stopping it (GET_VRING_BASE, a new configuration, a disconnect) is
 * nic_stop; the owner's gone() callback says the worker is reaped, and
 * only then is the waiting answer sent and reading resumed (messages are
 * handled strictly in order; while one waits, none is read).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "supervisor.h"
#include "tap.h"
#include "vhost_user.h"
#include "vhost_user_msg.h"
#include "vring.h"

#define VU_MSGS_PER_WAKE 64
#define VU_BACKOFF_FIRST_MS 100
#define VU_BACKOFF_MAX_MS 5000
#define VU_STATE_SUFFIX ".endpoint"

struct vu_ring {
	bool num_set, addr_set;
	uint32_t num;
	uint64_t desc, used, avail;   /* front-end virtual addresses */
	uint16_t base;                /* next avail index (SET_VRING_BASE or final) */
	int kick_fd, call_fd, err_fd; /* owned; -1 none */
	bool started;                 /* kick received, no GET_VRING_BASE since */
	bool enabled;
};

struct vu_region {
	struct memtable_region_desc d; /* fd owned */
	uint64_t uva;
	bool sealed;
};

struct vu_conn {
	struct vu_endpoint *ep;
	int fd;
	struct event *ev_read;
	struct vu_rx rx;
	bool owner;
	bool features_set;
	uint64_t features;
	uint64_t proto;
	struct vu_region *reg;        /* MEMTABLE_MAX_REGIONS entries */
	unsigned nreg;
	struct vu_ring r[NIC_NUM_QUEUES];
	uint64_t status;
	uint32_t mtu;                 /* NET_SET_MTU, 0: the endpoint's */
	/* An answer that waits for the worker's reap. */
	bool waiting;
	struct vu_hdr wait_hdr;
	int wait_ring;                /* GET_VRING_BASE's ring, -1: a REPLY_ACK */
};

struct vu_endpoint {
	TAILQ_ENTRY(vu_endpoint) link;
	struct sup *sup;
	struct vu_config cfg;
	char ifname[16];
	int tap_fd;
	int listen_fd;
	struct event *ev_listen;
	struct event *ev_retry;       /* client: next connect attempt */
	struct event *ev_resume;      /* after the NIC is gone */
	uint32_t backoff_ms;
	struct vu_conn *conn;
	unsigned conn_gen;            /* connections so far; the NIC's is nic_gen */
	unsigned nic_gen;
	struct nic *nic;
	bool nic_stopping;
	bool start_failed;            /* no new attempt until the front end changes something */
	bool shutting_down;
	/* Removal waiting for the NIC. */
	bool removing;
	vu_removed_fn rm_done;
	unsigned rm_conn;
	uint64_t rm_req;
	uint32_t rm_deadline_ms;
	struct timespec rm_t0;
	bool rm_deadline;
	uint64_t connects, messages, rejected, reconfigs;
	char last_error[192];
};

TAILQ_HEAD(vu_list, vu_endpoint);

struct vu_state {
	struct vu_list eps;
};

static struct log_ratelimit vu_rl = LOG_RATELIMIT_INIT(5000, 20);

static void vu_conn_close(struct vu_endpoint *ep, const char *why);
static void vu_try_start(struct vu_endpoint *ep);
static void vu_client_schedule(struct vu_endpoint *ep);
static void vu_read_cb(evutil_socket_t fd, short what, void *arg);
static void vu_finish_remove(struct vu_endpoint *ep);

uint64_t vu_offered_features(void)
{
	return validate_nic_offered(NIC_BACKEND_TAP_FD) | (1ull << VU_F_PROTOCOL_FEATURES);
}

uint64_t vu_offered_protocol_features(void)
{
	return (1ull << VU_PROTO_MQ) | (1ull << VU_PROTO_RARP) | (1ull << VU_PROTO_REPLY_ACK) |
	       (1ull << VU_PROTO_NET_MTU) | (1ull << VU_PROTO_CONFIGURE_MEM_SLOTS) |
	       (1ull << VU_PROTO_STATUS);
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static struct vu_state *vu_state(struct sup *s)
{
	if (!s->vu) {
		s->vu = calloc(1, sizeof(*s->vu));
		if (s->vu)
			TAILQ_INIT(&s->vu->eps);
	}
	return s->vu;
}

static struct vu_endpoint *vu_find(struct sup *s, const char *id)
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

static void vu_errorf(struct vu_endpoint *ep, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void vu_errorf(struct vu_endpoint *ep, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ep->last_error, sizeof(ep->last_error), fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------ the NIC */

static void vu_nic_added(struct nic *n, enum nic_result r, const char *error)
{
	struct vu_endpoint *ep = n->owner;

	if (r != NIC_RES_OK && ep->nic_stopping) {
		/* We stopped it before it was ready (a new table, a
		 * disconnect): not a failure of the configuration. */
		log_info("vhost-user %s: worker stopped before it was ready", ep->cfg.id);
	} else if (r != NIC_RES_OK) {
		ep->start_failed = true;
		vu_errorf(ep, "worker did not start: %s", error ? error : "failed");
		log_warn("vhost-user %s: %s", ep->cfg.id, ep->last_error);
	} else {
		log_info("vhost-user %s: worker pid %d running", ep->cfg.id, (int)n->w.pid);
	}
}

/* The worker is reaped (or there was none): keep the final indices as
 * the rings' bases, forget the NIC, continue outside nic.c's call. */
static void vu_nic_gone(struct nic *n)
{
	struct vu_endpoint *ep = n->owner;

	/* Only for the connection that configured it: a new front end
	 * brings its own bases. */
	if (ep->conn && ep->nic_gen == ep->conn_gen) {
		for (int i = 0; i < NIC_NUM_QUEUES; i++)
			if (n->q[i].final_valid)
				ep->conn->r[i].base = (uint16_t)n->q[i].final_avail;
	}
	if (n->deadline_missed)
		ep->rm_deadline = true;
	ep->nic = NULL;
	ep->nic_stopping = false;
	event_active(ep->ev_resume, EV_TIMEOUT, 0);
}

static void vu_nic_failed(struct nic *n, int sig, int exit_status, int syscall_nr)
{
	struct vu_endpoint *ep = n->owner;

	(void)sig;
	(void)exit_status;
	(void)syscall_nr;
	vu_errorf(ep, "%s", n->last_error);
}

/* A broken queue: the spec's error eventfd, when the front end gave one. */
static void vu_nic_queue_reset(struct nic *n, uint32_t queue, const char *reason)
{
	struct vu_endpoint *ep = n->owner;
	uint64_t one = 1;

	vu_errorf(ep, "queue %u broken: %s", queue, reason);
	if (ep->conn && queue < NIC_NUM_QUEUES && ep->conn->r[queue].err_fd >= 0 &&
	    write(ep->conn->r[queue].err_fd, &one, sizeof(one)) < 0)
		log_debug("vhost-user %s: error eventfd: %s", ep->cfg.id, strerror(errno));
}

static int vu_state_save(struct sup *s, const struct vu_config *cfg, char *err, size_t errlen);

/* A SetPolicy applied to the endpoint's NIC: the endpoint's own policy,
 * so the worker of the next memory table, front end or vnicd run keeps
 * it (a crash restart keeps n->policy by itself). */
static void vu_nic_policy_changed(struct nic *n)
{
	struct vu_endpoint *ep = n->owner;
	char err[256];

	ep->cfg.policy = n->policy;
	if (vu_state_save(ep->sup, &ep->cfg, err, sizeof(err)) < 0)
		log_warn("vhost-user %s: policy applied, not saved: %s", ep->cfg.id, err);
}

static const struct nic_owner_ops vu_nic_owner = {
	.kind = "vhost-user",
	.added = vu_nic_added,
	.policy_changed = vu_nic_policy_changed,
	.failed = vu_nic_failed,
	.queue_reset = vu_nic_queue_reset,
	.gone = vu_nic_gone,
};

/* Stop the NIC (the answer to whatever waits follows its reap). */
static void vu_stop_nic(struct vu_endpoint *ep, uint32_t deadline_ms, const char *why)
{
	struct nic *n = ep->nic;

	if (!n || ep->nic_stopping)
		return;
	ep->nic_stopping = true;
	nic_stop(n, deadline_ms, why); /* may call vu_nic_gone at once */
}

/* Translate a front-end virtual address range to guest physical: wholly
 * inside one region (a ring that straddles two is refused). */
static int vu_uva_to_gpa(const struct vu_conn *c, uint64_t uva, uint64_t len, uint64_t *gpa)
{
	for (unsigned i = 0; i < c->nreg; i++) {
		const struct vu_region *r = &c->reg[i];

		if (uva >= r->uva && uva - r->uva < r->d.size && len <= r->d.size - (uva - r->uva)) {
			*gpa = r->d.gpa + (uva - r->uva);
			return 0;
		}
	}
	return -EFAULT;
}

static int vu_ring_gpas(const struct vu_conn *c, const struct vu_ring *r, uint64_t g[3],
			char *err, size_t errlen)
{
	if (vu_uva_to_gpa(c, r->desc, vring_desc_size(r->num), &g[0]) ||
	    vu_uva_to_gpa(c, r->avail, vring_avail_size(r->num) + 2, &g[1]) ||
	    vu_uva_to_gpa(c, r->used, vring_used_size(r->num) + 2, &g[2])) {
		snprintf(err, errlen, "ring addresses (desc 0x%llx avail 0x%llx used 0x%llx, "
			 "%u entries) are not each inside one memory region",
			 (unsigned long long)r->desc, (unsigned long long)r->avail,
			 (unsigned long long)r->used, r->num);
		return -EFAULT;
	}
	return 0;
}

static bool vu_ring_ready(const struct vu_conn *c, const struct vu_ring *r)
{
	bool need_enable = c->features & (1ull << VU_F_PROTOCOL_FEATURES);

	return r->num_set && r->addr_set && r->kick_fd >= 0 && r->started &&
	       (r->enabled || !need_enable);
}

static int dup_cloexec(int fd)
{
	return fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

/* Both rings ready, memory set, no NIC: start one. */
static void vu_try_start(struct vu_endpoint *ep)
{
	struct vu_conn *c = ep->conn;
	struct nic_spec spec;
	struct nic_queue_spec qs[NIC_NUM_QUEUES];
	unsigned total;
	int *dups = NULL;           /* every fd the NIC would adopt, to close on failure */
	unsigned ndups = 0;
	bool unsealed = false;
	char err[256];
	int rc;

	if (!c || ep->nic || c->waiting || ep->removing || ep->shutting_down || !c->features_set ||
	    c->nreg == 0 || ep->start_failed)
		return;
	for (int i = 0; i < NIC_NUM_QUEUES; i++)
		if (!vu_ring_ready(c, &c->r[i]))
			return;
	if (nic_find(ep->sup, ep->cfg.id))
		return; /* an earlier NIC of this id is still going away */

	memset(&spec, 0, sizeof(spec));
	total = c->nreg + 2 * NIC_NUM_QUEUES + 1;
	spec.regions = calloc(c->nreg, sizeof(*spec.regions));
	dups = calloc(total, sizeof(*dups));
	if (!spec.regions || !dups) {
		vu_errorf(ep, "out of memory");
		goto out_log;
	}
	snprintf(spec.id, sizeof(spec.id), "%s", ep->cfg.id);
	spec.id_len = strlen(spec.id);
	memcpy(spec.mac, ep->cfg.mac, 6);
	spec.mac_len = 6;
	spec.mtu = c->mtu ? c->mtu : ep->cfg.mtu ? ep->cfg.mtu : SUP_MTU_DEFAULT;
	spec.features_offered = validate_nic_offered(NIC_BACKEND_TAP_FD);
	spec.features = c->features & ~(1ull << VU_F_PROTOCOL_FEATURES);
	spec.policy = ep->cfg.policy;
	spec.backend = NIC_BACKEND_TAP_FD;
	for (unsigned i = 0; i < c->nreg; i++)
		unsealed |= !c->reg[i].sealed;
	spec.memory_unsealed_ok = unsealed;
	spec.base_from_used_idx = true;

	/* Duplicates of the front end's fds: the NIC owns its own, so a new
	 * table or a disconnect never pulls an fd from under a worker. */
	for (unsigned i = 0; i < c->nreg; i++) {
		spec.regions[i] = c->reg[i].d;
		spec.regions[i].fd = dups[ndups++] = dup_cloexec(c->reg[i].d.fd);
		if (spec.regions[i].fd < 0)
			goto out_errno;
	}
	spec.nregions = c->nreg;
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		struct vu_ring *r = &c->r[i];
		uint64_t g[3];

		if (vu_ring_gpas(c, r, g, err, sizeof(err)) < 0) {
			vu_errorf(ep, "ring %d: %s", i, err);
			goto out_log;
		}
		if (r->call_fd < 0) {
			/* No call fd (polling front end): interrupts go nowhere. */
			r->call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (r->call_fd < 0)
				goto out_errno;
		}
		qs[i] = (struct nic_queue_spec){ .index = (uint32_t)i, .size = r->num, .desc = g[0],
						 .avail = g[1], .used = g[2], .avail_idx = r->base };
		qs[i].kick_fd = dups[ndups++] = dup_cloexec(r->kick_fd);
		qs[i].call_fd = dups[ndups++] = dup_cloexec(r->call_fd);
		if (qs[i].kick_fd < 0 || qs[i].call_fd < 0)
			goto out_errno;
	}
	spec.queues = qs;
	spec.nqueues = NIC_NUM_QUEUES;
	spec.backend_fd = dups[ndups++] = dup_cloexec(ep->tap_fd);
	if (spec.backend_fd < 0)
		goto out_errno;

	rc = validate_nic_spec(&spec, err, sizeof(err));
	if (rc) {
		vu_errorf(ep, "front end's configuration refused: %s", err);
		goto out_log;
	}
	/* The same fd budgets as AddNic (limits.c); no connection's own. */
	rc = sup_budget_check(ep->sup, NULL, total, err, sizeof(err));
	if (rc) {
		vu_errorf(ep, "%s", err);
		goto out_log;
	}
	rc = nic_start(ep->sup, &vu_nic_owner, ep, 0, &spec, NULL, NULL, err, sizeof(err));
	if (rc) {
		vu_errorf(ep, "cannot start the NIC: %s", err);
		goto out_log;
	}
	ndups = 0; /* adopted */
	ep->nic_gen = ep->conn_gen;
	/* nic_start may already have failed and freed it (then gone() ran). */
	ep->nic = nic_find(ep->sup, ep->cfg.id);
	if (ep->nic && ep->nic->owner != ep)
		ep->nic = NULL;
	if (ep->nic)
		log_info("vhost-user %s: rings ready: starting the worker (%u regions%s)",
			 ep->cfg.id, c->nreg, unsealed ? ", unsealed memory" : "");
	goto out_close;

out_errno:
	vu_errorf(ep, "duplicating fds: %s", strerror(errno));
out_log:
	ep->start_failed = true;
	log_warn("vhost-user %s: %s", ep->cfg.id, ep->last_error);
out_close:
	for (unsigned i = 0; i < ndups; i++)
		if (dups[i] >= 0)
			close(dups[i]);
	free(dups);
	free(spec.regions);
}

/* ------------------------------------------------- answering messages */

/* The answer that waited for a reap, then resume reading. */
static void vu_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vu_endpoint *ep = arg;
	struct vu_conn *c = ep->conn;

	(void)fd;
	(void)what;
	if (ep->removing || ep->shutting_down) {
		if (ep->removing && !ep->nic)
			vu_finish_remove(ep);
		return;
	}
	if (!c)
		return;
	if (c->waiting && !ep->nic) {
		int rc;

		c->waiting = false;
		if (c->wait_ring >= 0) {
			struct vu_vring_state st = { .index = (uint32_t)c->wait_ring,
						     .num = c->r[c->wait_ring].base };

			rc = vu_send_reply(c->fd, &c->wait_hdr, &st, sizeof(st));
			log_info("vhost-user %s: GET_VRING_BASE ring %d answered: %u (worker reaped)",
				 ep->cfg.id, c->wait_ring, st.num);
		} else if (c->wait_hdr.flags & VU_FLAG_NEED_REPLY) {
			uint64_t ok = 0;

			rc = vu_send_reply(c->fd, &c->wait_hdr, &ok, sizeof(ok));
		} else {
			rc = 0; /* no answer asked for: only the order waited */
		}
		if (rc) {
			vu_conn_close(ep, "cannot send a reply");
			return;
		}
		event_add(c->ev_read, NULL);
		/* Messages may already be waiting in the socket. */
		event_active(c->ev_read, EV_READ, 0);
	}
	vu_try_start(ep);
}

/* Handlers return 0 (done; REPLY_ACK 0 when asked), a negative errno
 * (refused, err filled), or VU_WAIT: the answer follows the worker's reap
 * (c->waiting is set and reading stops). */
#define VU_WAIT 1

/* Stop the NIC, if one runs, before a change it cannot take live: a
 * planned restart. Returns VU_WAIT when the answer must wait. */
static int vu_reconfigure(struct vu_conn *c, const struct vu_msg *m, const char *why)
{
	struct vu_endpoint *ep = c->ep;

	if (!ep->nic)
		return 0;
	ep->reconfigs++;
	log_info("vhost-user %s: %s: planned restart of the worker", ep->cfg.id, why);
	c->waiting = true;
	c->wait_hdr = m->hdr;
	c->wait_ring = -1;
	vu_stop_nic(ep, SUP_STOP_DEFAULT_MS, why);
	return VU_WAIT;
}

static int ring_index(const struct vu_msg *m, uint64_t idx, char *err, size_t errlen)
{
	char nb[24];

	if (idx >= NIC_NUM_QUEUES) {
		snprintf(err, errlen, "%s: ring %llu does not exist (one queue pair: 0, 1)",
			 vu_request_name(m->hdr.request, nb, sizeof(nb)), (unsigned long long)idx);
		return -ERANGE;
	}
	return (int)idx;
}

static int h_get_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t f = vu_offered_features();

	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &f, sizeof(f));
}

static int h_set_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t f = m->p.u64, extra = f & ~vu_offered_features();
	bool changed = c->features_set && f != c->features;

	if (extra) {
		snprintf(err, errlen, "SET_FEATURES 0x%llx: bits 0x%llx were not offered",
			 (unsigned long long)f, (unsigned long long)extra);
		return -ENOTSUP;
	}
	if (!(f & (1ull << VIRTIO_F_VERSION_1))) {
		snprintf(err, errlen, "SET_FEATURES 0x%llx: VERSION_1 is required", (unsigned long long)f);
		return -ENOTSUP;
	}
	c->features = f;
	c->features_set = true;
	return changed ? vu_reconfigure(c, m, "new features") : 0;
}

static int h_get_protocol_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t f = vu_offered_protocol_features();

	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &f, sizeof(f));
}

static int h_set_protocol_features(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t extra = m->p.u64 & ~vu_offered_protocol_features();

	if (extra) {
		snprintf(err, errlen, "SET_PROTOCOL_FEATURES: bits 0x%llx were not offered",
			 (unsigned long long)extra);
		return -ENOTSUP;
	}
	c->proto = m->p.u64;
	return 0;
}

static int h_set_owner(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	(void)m;
	(void)err;
	(void)errlen;
	c->owner = true;
	return 0;
}

static void vu_conn_forget_device(struct vu_conn *c)
{
	for (unsigned i = 0; i < c->nreg; i++)
		close_fd(&c->reg[i].d.fd);
	c->nreg = 0;
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		close_fd(&c->r[i].kick_fd);
		close_fd(&c->r[i].call_fd);
		close_fd(&c->r[i].err_fd);
		memset(&c->r[i], 0, sizeof(c->r[i]));
		c->r[i].kick_fd = c->r[i].call_fd = c->r[i].err_fd = -1;
	}
	c->features_set = false;
	c->features = 0;
	c->status = 0;
	c->mtu = 0;
}

/* RESET_OWNER (deprecated, still sent by old front ends): back to a fresh
 * connection; the worker is stopped first. */
static int h_reset_owner(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	(void)m;
	(void)err;
	(void)errlen;
	/* No answer is defined, so nothing waits: the worker stops on its
	 * own fds; a new configuration starts once it is reaped. */
	vu_stop_nic(c->ep, SUP_STOP_DEFAULT_MS, "RESET_OWNER");
	vu_conn_forget_device(c);
	c->owner = false;
	return 0;
}

/* One region from the front end, checked alone. */
static int check_region(const struct vu_mem_region *r, int fd, unsigned i, bool *sealed,
			char *err, size_t errlen)
{
	struct stat st;
	struct statfs sfs;
	uint64_t end;
	int seals;

	if (r->size == 0 || __builtin_add_overflow(r->gpa, r->size, &end) ||
	    __builtin_add_overflow(r->uva, r->size, &end) ||
	    __builtin_add_overflow(r->mmap_offset, r->size, &end) || end > (uint64_t)INT64_MAX) {
		snprintf(err, errlen, "region %u: size 0x%llx is 0 or overflows an address",
			 i, (unsigned long long)r->size);
		return -EINVAL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || fstatfs(fd, &sfs) < 0 ||
	    (sfs.f_type != TMPFS_MAGIC && sfs.f_type != HUGETLBFS_MAGIC)) {
		snprintf(err, errlen, "region %u: fd is not a memfd, shared memory or hugetlbfs file", i);
		return -EINVAL;
	}
	if (end > (uint64_t)st.st_size) {
		snprintf(err, errlen, "region %u: offset+size 0x%llx is beyond the file's 0x%llx bytes",
			 i, (unsigned long long)end, (unsigned long long)st.st_size);
		return -EINVAL;
	}
	seals = fcntl(fd, F_GET_SEALS);
	*sealed = seals >= 0 && (seals & F_SEAL_SHRINK);
	return 0;
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* The whole table by the rules every guest memory table obeys (memtable.h:
 * fds open read-write, not write-sealed, large enough, no gpa overlap,
 * page-aligned), unsealed files allowed: before anything changes. */
static int check_table_rules(const struct vu_region *tab, unsigned count, char *err,
			     size_t errlen)
{
	struct memtable_region_desc *d = calloc(count, sizeof(*d));
	int rc;

	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < count; i++)
		d[i] = tab[i].d;
	rc = memtable_validate_flags(d, count, MEMTABLE_UNSEALED_OK, err, errlen);
	if (rc == 0)
		rc = memtable_check_pages(d, count, err, errlen);
	free(d);
	return rc;
}

/* Region n of tab (size count) against the others: no gpa or uva overlap. */
static int check_overlaps(const struct vu_region *tab, unsigned count, char *err, size_t errlen)
{
	for (unsigned i = 0; i < count; i++)
		for (unsigned j = i + 1; j < count; j++) {
			const struct vu_region *a = &tab[i], *b = &tab[j];

			if (ranges_overlap(a->d.gpa, a->d.size, b->d.gpa, b->d.size) ||
			    ranges_overlap(a->uva, a->d.size, b->uva, b->d.size)) {
				snprintf(err, errlen, "regions %u and %u overlap", i, j);
				return -EINVAL;
			}
		}
	return 0;
}

/* The whole new table in tmp (fds borrowed), then adopt. */
static int vu_mem_replace(struct vu_conn *c, struct vu_msg *m, struct vu_region *tmp,
			  unsigned n, int *adopt_from, const char *why)
{
	for (unsigned i = 0; i < c->nreg; i++)
		close_fd(&c->reg[i].d.fd);
	memcpy(c->reg, tmp, n * sizeof(*tmp));
	c->nreg = n;
	for (unsigned i = 0; i < n; i++)
		if (adopt_from[i] >= 0)
			m->fds[adopt_from[i]] = -1;
	return vu_reconfigure(c, m, why);
}

static int h_set_mem_table(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_mem_table *t = &m->p.mem;
	struct vu_region tmp[VU_MEM_BASELINE_REGIONS];
	int from[VU_MEM_BASELINE_REGIONS];
	char sub[160];

	if (t->nregions == 0 || t->nregions > VU_MEM_BASELINE_REGIONS ||
	    m->hdr.size != 8 + t->nregions * sizeof(struct vu_mem_region) ||
	    m->nfds != t->nregions) {
		snprintf(err, errlen, "SET_MEM_TABLE: %u regions in %u bytes with %u fds",
			 t->nregions, m->hdr.size, m->nfds);
		return -EINVAL;
	}
	for (unsigned i = 0; i < t->nregions; i++) {
		int rc = check_region(&t->r[i], m->fds[i], i, &tmp[i].sealed, sub, sizeof(sub));

		if (rc) {
			snprintf(err, errlen, "SET_MEM_TABLE: %s", sub);
			return rc;
		}
		tmp[i].d = (struct memtable_region_desc){ .gpa = t->r[i].gpa, .size = t->r[i].size,
							  .offset = t->r[i].mmap_offset,
							  .fd = m->fds[i] };
		tmp[i].uva = t->r[i].uva;
		from[i] = (int)i;
	}
	if (check_overlaps(tmp, t->nregions, sub, sizeof(sub)) ||
	    check_table_rules(tmp, t->nregions, sub, sizeof(sub))) {
		snprintf(err, errlen, "SET_MEM_TABLE: %s", sub);
		return -EINVAL;
	}
	return vu_mem_replace(c, m, tmp, t->nregions, from, "new memory table");
}

static int h_add_mem_reg(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_mem_region *r = &m->p.mreg.r;
	struct vu_region *tab;
	unsigned n = c->nreg;
	int from_one[1] = { 0 };
	char sub[160];
	int rc;

	if (n >= MEMTABLE_MAX_REGIONS) {
		snprintf(err, errlen, "ADD_MEM_REG: already %u regions (at most %u)", n,
			 MEMTABLE_MAX_REGIONS);
		return -ENOSPC;
	}
	tab = &c->reg[n];
	rc = check_region(r, m->fds[0], n, &tab->sealed, sub, sizeof(sub));
	if (rc) {
		snprintf(err, errlen, "ADD_MEM_REG: %s", sub);
		return rc;
	}
	tab->d = (struct memtable_region_desc){ .gpa = r->gpa, .size = r->size,
						.offset = r->mmap_offset, .fd = m->fds[0] };
	tab->uva = r->uva;
	if (check_overlaps(c->reg, n + 1, sub, sizeof(sub)) ||
	    check_table_rules(c->reg, n + 1, sub, sizeof(sub))) {
		tab->d.fd = -1;
		snprintf(err, errlen, "ADD_MEM_REG: %s", sub);
		return -EINVAL;
	}
	c->nreg = n + 1;
	m->fds[from_one[0]] = -1;
	return vu_reconfigure(c, m, "memory region added");
}

static int h_rem_mem_reg(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_mem_region *r = &m->p.mreg.r;

	for (unsigned i = 0; i < c->nreg; i++) {
		struct vu_region *x = &c->reg[i];

		if (x->d.gpa != r->gpa || x->d.size != r->size || x->uva != r->uva)
			continue;
		close_fd(&x->d.fd);
		memmove(x, x + 1, (c->nreg - i - 1) * sizeof(*x));
		c->nreg--;
		return vu_reconfigure(c, m, "memory region removed");
	}
	snprintf(err, errlen, "REM_MEM_REG: no region gpa 0x%llx size 0x%llx uva 0x%llx",
		 (unsigned long long)r->gpa, (unsigned long long)r->size,
		 (unsigned long long)r->uva);
	return -ENOENT;
}

static int h_get_max_mem_slots(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t v = MEMTABLE_MAX_REGIONS;

	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &v, sizeof(v));
}

/* A ring's layout may change only while no worker uses it. */
static int ring_idle(struct vu_conn *c, int i, const char *what, char *err, size_t errlen)
{
	if (c->ep->nic && c->r[i].started) {
		snprintf(err, errlen, "%s: ring %d is running (GET_VRING_BASE first)", what, i);
		return -EBUSY;
	}
	return 0;
}

static int h_set_vring_num(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i = ring_index(m, m->p.state.index, err, errlen);
	uint32_t num = m->p.state.num;

	if (i < 0)
		return i;
	if (num == 0 || num > VRING_MAX_SIZE || (num & (num - 1))) {
		snprintf(err, errlen, "SET_VRING_NUM: %u is not a power of 2 in 1..%u", num,
			 VRING_MAX_SIZE);
		return -EINVAL;
	}
	if (ring_idle(c, i, "SET_VRING_NUM", err, errlen))
		return -EBUSY;
	c->r[i].num = num;
	c->r[i].num_set = true;
	return 0;
}

static int h_set_vring_addr(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	const struct vu_vring_addr *a = &m->p.addr;
	int i = ring_index(m, a->index, err, errlen);
	struct vu_ring r;
	uint64_t g[3];

	if (i < 0)
		return i;
	if (ring_idle(c, i, "SET_VRING_ADDR", err, errlen))
		return -EBUSY;
	if (a->flags & 1u) {
		snprintf(err, errlen, "SET_VRING_ADDR: logging was not offered");
		return -ENOTSUP;
	}
	if ((a->desc & 15) || (a->avail & 1) || (a->used & 3)) {
		snprintf(err, errlen, "SET_VRING_ADDR: ring %d: misaligned (desc 16, avail 2, used 4)", i);
		return -EINVAL;
	}
	r = c->r[i];
	r.desc = a->desc;
	r.avail = a->avail;
	r.used = a->used;
	/* Checked against the table now when both are known (the table may
	 * also come later; vu_try_start checks again). */
	if (c->nreg && r.num_set && vu_ring_gpas(c, &r, g, err, errlen))
		return -EFAULT;
	c->r[i].desc = a->desc;
	c->r[i].avail = a->avail;
	c->r[i].used = a->used;
	c->r[i].addr_set = true;
	return 0;
}

static int h_set_vring_base(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i = ring_index(m, m->p.state.index, err, errlen);

	if (i < 0)
		return i;
	if (m->p.state.num > 0xffff) {
		snprintf(err, errlen, "SET_VRING_BASE: %u does not fit 16 bits", m->p.state.num);
		return -EINVAL;
	}
	if (ring_idle(c, i, "SET_VRING_BASE", err, errlen))
		return -EBUSY;
	c->r[i].base = (uint16_t)m->p.state.num;
	return 0;
}

/* GET_VRING_BASE: the ring stops. With a worker, the answer waits until
 * it is reaped (it stops both rings; the other one keeps its final index
 * as its base and waits for its own GET_VRING_BASE or a new kick). */
static int h_get_vring_base(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i = ring_index(m, m->p.state.index, err, errlen);
	struct vu_vring_state st;

	if (i < 0)
		return i;
	c->r[i].started = false;
	if (c->ep->nic) {
		c->waiting = true;
		c->wait_hdr = m->hdr;
		c->wait_ring = i;
		vu_stop_nic(c->ep, SUP_STOP_DEFAULT_MS, "GET_VRING_BASE");
		return VU_WAIT;
	}
	st.index = (uint32_t)i;
	st.num = c->r[i].base;
	log_info("vhost-user %s: GET_VRING_BASE ring %d answered: %u (no worker)", c->ep->cfg.id, i,
		 st.num);
	return vu_send_reply(c->fd, &m->hdr, &st, sizeof(st));
}

/* KICK, CALL, ERR: index and the fd (or NOFD with none). */
static int vring_fd(struct vu_conn *c, struct vu_msg *m, int *ring, int *fd, char *err,
		    size_t errlen)
{
	uint64_t v = m->p.u64;
	char nb[24], sub[128];
	int i;

	if (v & ~(VU_VRING_IDX_MASK | VU_VRING_NOFD)) {
		snprintf(err, errlen, "%s: unknown bits 0x%llx",
			 vu_request_name(m->hdr.request, nb, sizeof(nb)), (unsigned long long)v);
		return -EINVAL;
	}
	i = ring_index(m, v & VU_VRING_IDX_MASK, err, errlen);
	if (i < 0)
		return i;
	if (!!(v & VU_VRING_NOFD) != (m->nfds == 0)) {
		snprintf(err, errlen, "%s: the no-fd flag and the %u fds sent disagree",
			 vu_request_name(m->hdr.request, nb, sizeof(nb)), m->nfds);
		return -EBADF;
	}
	*ring = i;
	*fd = -1;
	if (m->nfds) {
		if (validate_eventfd(m->fds[0], sub, sizeof(sub))) {
			snprintf(err, errlen, "%s: %s", vu_request_name(m->hdr.request, nb, sizeof(nb)),
				 sub);
			return -EBADF;
		}
		*fd = m->fds[0];
		m->fds[0] = -1;
	}
	(void)c;
	return 0;
}

static int h_set_vring_kick(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i, fd, rc = vring_fd(c, m, &i, &fd, err, errlen);
	bool live;

	if (rc)
		return rc;
	if (fd < 0) {
		snprintf(err, errlen, "SET_VRING_KICK: ring %d without a kick fd: vnicd does not "
			 "poll rings", i);
		return -ENOTSUP;
	}
	live = c->ep->nic && c->r[i].started;
	close_fd(&c->r[i].kick_fd);
	c->r[i].kick_fd = fd;
	c->r[i].started = true;
	return live ? vu_reconfigure(c, m, "new kick fd") : 0;
}

static int h_set_vring_call(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i, fd, rc = vring_fd(c, m, &i, &fd, err, errlen);
	bool live;

	if (rc)
		return rc;
	live = c->ep->nic && c->r[i].started;
	close_fd(&c->r[i].call_fd);
	c->r[i].call_fd = fd; /* -1: vu_try_start makes one that nobody reads */
	return live ? vu_reconfigure(c, m, "new call fd") : 0;
}

static int h_set_vring_err(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i, fd, rc = vring_fd(c, m, &i, &fd, err, errlen);

	if (rc)
		return rc;
	close_fd(&c->r[i].err_fd);
	c->r[i].err_fd = fd;
	return 0;
}

static int h_get_queue_num(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t v = 1; /* queue pairs, until multiqueue exists */

	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &v, sizeof(v));
}

static int h_set_vring_enable(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	int i = ring_index(m, m->p.state.index, err, errlen);
	bool on = m->p.state.num != 0;

	if (i < 0)
		return i;
	if (m->p.state.num > 1) {
		snprintf(err, errlen, "SET_VRING_ENABLE: %u is neither 0 nor 1", m->p.state.num);
		return -EINVAL;
	}
	if (c->r[i].enabled == on)
		return 0;
	c->r[i].enabled = on;
	return on ? 0 : vu_reconfigure(c, m, "ring disabled");
}

/* SEND_RARP: announce the guest's MAC after a migration, as QEMU's own
 * device does, by a RARP broadcast on the tap. */
static int h_send_rarp(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint8_t f[VIRTIO_NET_HDR_MRG_LEN + 60] = { 0 };
	uint8_t *e = f + VIRTIO_NET_HDR_MRG_LEN;
	const uint8_t *mac = m->p.bytes;

	(void)err;
	(void)errlen;
	memset(e, 0xff, 6);
	memcpy(e + 6, mac, 6);
	e[12] = 0x80, e[13] = 0x35;              /* ETH_P_RARP */
	e[14] = 0, e[15] = 1, e[16] = 8, e[17] = 0; /* Ethernet, IPv4 */
	e[18] = 6, e[19] = 4, e[20] = 0, e[21] = 3; /* reverse request */
	memcpy(e + 22, mac, 6);
	memcpy(e + 32, mac, 6);
	if (write(c->ep->tap_fd, f, sizeof(f)) < 0)
		log_debug("vhost-user %s: RARP: %s", c->ep->cfg.id, strerror(errno));
	return 0;
}

static int h_net_set_mtu(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	uint64_t mtu = m->p.u64;

	if (mtu < VALIDATE_MTU_MIN || mtu > VALIDATE_MTU_MAX) {
		snprintf(err, errlen, "NET_SET_MTU: %llu is outside %u..%u", (unsigned long long)mtu,
			 VALIDATE_MTU_MIN, VALIDATE_MTU_MAX);
		return -EINVAL;
	}
	if (c->mtu == mtu)
		return 0;
	c->mtu = (uint32_t)mtu;
	return vu_reconfigure(c, m, "new MTU");
}

static int h_set_status(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	if (m->p.u64 > 0xff) {
		snprintf(err, errlen, "SET_STATUS: 0x%llx is not a status byte",
			 (unsigned long long)m->p.u64);
		return -EINVAL;
	}
	c->status = m->p.u64;
	return 0;
}

static int h_get_status(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return vu_send_reply(c->fd, &m->hdr, &c->status, sizeof(c->status));
}

typedef int (*vu_handler_fn)(struct vu_conn *c, struct vu_msg *m, char *err, size_t errlen);

static const vu_handler_fn handlers[VU_REQUEST_MAX] = {
	[VU_GET_FEATURES] = h_get_features,
	[VU_SET_FEATURES] = h_set_features,
	[VU_SET_OWNER] = h_set_owner,
	[VU_RESET_OWNER] = h_reset_owner,
	[VU_SET_MEM_TABLE] = h_set_mem_table,
	[VU_SET_VRING_NUM] = h_set_vring_num,
	[VU_SET_VRING_ADDR] = h_set_vring_addr,
	[VU_SET_VRING_BASE] = h_set_vring_base,
	[VU_GET_VRING_BASE] = h_get_vring_base,
	[VU_SET_VRING_KICK] = h_set_vring_kick,
	[VU_SET_VRING_CALL] = h_set_vring_call,
	[VU_SET_VRING_ERR] = h_set_vring_err,
	[VU_GET_PROTOCOL_FEATURES] = h_get_protocol_features,
	[VU_SET_PROTOCOL_FEATURES] = h_set_protocol_features,
	[VU_GET_QUEUE_NUM] = h_get_queue_num,
	[VU_SET_VRING_ENABLE] = h_set_vring_enable,
	[VU_SEND_RARP] = h_send_rarp,
	[VU_NET_SET_MTU] = h_net_set_mtu,
	[VU_GET_MAX_MEM_SLOTS] = h_get_max_mem_slots,
	[VU_ADD_MEM_REG] = h_add_mem_reg,
	[VU_REM_MEM_REG] = h_rem_mem_reg,
	[VU_SET_STATUS] = h_set_status,
	[VU_GET_STATUS] = h_get_status,
};

/* One message. Returns false when the connection was closed. */
static bool vu_dispatch(struct vu_conn *c, struct vu_msg *m)
{
	struct vu_endpoint *ep = c->ep;
	const struct vu_row_spec *row;
	char err[256];
	int rc;

	ep->messages++;
	rc = vu_msg_check(m, err, sizeof(err));
	row = vu_request_spec(m->hdr.request);
	if (rc == 0 && row->proto_bit >= 0 && !(c->proto & (1ull << row->proto_bit))) {
		snprintf(err, sizeof(err), "%s: protocol feature %d was not negotiated", row->name,
			 row->proto_bit);
		rc = -ENOTSUP;
	}
	if (rc == 0 && (row->flags & VU_ROW_NEEDS_OWNER) && !c->owner) {
		/* The spec makes SET_OWNER first; DPDK virtio-user (server=1)
		 * never sends it again when a back end reconnects, and DPDK's
		 * own back end does not insist. The connection is the owner. */
		log_debug("vhost-user %s: %s before SET_OWNER: taken as the owner", ep->cfg.id,
			  row->name);
		c->owner = true;
	}
	if (rc == 0)
		rc = handlers[m->hdr.request](c, m, err, sizeof(err));
	if (rc == VU_WAIT) {
		event_del(c->ev_read);
		return true;
	}
	if (rc == -EPIPE || rc == -ECONNRESET || rc == -EAGAIN) {
		vu_conn_close(ep, "cannot send a reply");
		return false;
	}
	if (rc < 0) {
		ep->rejected++;
		vu_errorf(ep, "%s", err);
		log_ratelimited(&vu_rl, LOG_LEVEL_WARN, "vhost-user %s: refused: %s", ep->cfg.id, err);
		if (rc == -EPROTO || (row && (row->flags & VU_ROW_REPLIES))) {
			/* Nothing we could answer is right: drop the peer. */
			vu_conn_close(ep, err);
			return false;
		}
	} else if (!(row->flags & VU_ROW_REPLIES)) {
		/* Something changed: a start that failed may work now. */
		ep->start_failed = false;
	}
	if ((m->hdr.flags & VU_FLAG_NEED_REPLY) && !(row && (row->flags & VU_ROW_REPLIES))) {
		uint64_t v = rc < 0 ? 1 : 0;

		if (vu_send_reply(c->fd, &m->hdr, &v, sizeof(v))) {
			vu_conn_close(ep, "cannot send a reply");
			return false;
		}
	}
	vu_try_start(ep);
	return true;
}

static void vu_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vu_endpoint *ep = arg;
	struct vu_conn *c = ep->conn;

	(void)fd;
	(void)what;
	for (int k = 0; c && !c->waiting && k < VU_MSGS_PER_WAKE; k++) {
		int rc = vu_recv(c->fd, &c->rx);
		bool alive;

		if (rc == 0)
			return;
		if (rc < 0) {
			char why[96];

			if (rc == -EPIPE || rc == -ECONNRESET)
				snprintf(why, sizeof(why), "front end disconnected");
			else
				snprintf(why, sizeof(why), "bad framing: %s", strerror(-rc));
			if (rc != -EPIPE && rc != -ECONNRESET)
				ep->rejected++;
			vu_conn_close(ep, why);
			return;
		}
		alive = vu_dispatch(c, &c->rx.m);
		if (!alive)
			return;
		vu_rx_reset(&c->rx);
	}
	/* More may be there: fairness with other endpoints. */
	if (c && !c->waiting)
		event_active(c->ev_read, EV_READ, 0);
}

/* ------------------------------------------------------- connections */

static void vu_conn_open(struct vu_endpoint *ep, int fd)
{
	struct vu_conn *c = calloc(1, sizeof(*c));

	if (c)
		c->reg = calloc(MEMTABLE_MAX_REGIONS, sizeof(*c->reg));
	if (!c || !c->reg) {
		log_warn("vhost-user %s: out of memory for a connection", ep->cfg.id);
		if (c)
			free(c);
		close(fd);
		return;
	}
	c->ep = ep;
	c->fd = fd;
	for (int i = 0; i < NIC_NUM_QUEUES; i++)
		c->r[i].kick_fd = c->r[i].call_fd = c->r[i].err_fd = -1;
	c->ev_read = event_new(ep->sup->base, fd, EV_READ | EV_PERSIST, vu_read_cb, ep);
	if (!c->ev_read) {
		free(c->reg);
		free(c);
		close(fd);
		return;
	}
	event_add(c->ev_read, NULL);
	ep->conn = c;
	ep->conn_gen++;
	ep->connects++;
	ep->start_failed = false;
	ep->backoff_ms = 0;
	log_info("vhost-user %s: front end connected (%s %s)", ep->cfg.id,
		 ep->cfg.server ? "accepted on" : "connected to", ep->cfg.path);
}

static void vu_conn_close(struct vu_endpoint *ep, const char *why)
{
	struct vu_conn *c = ep->conn;

	if (!c)
		return;
	log_info("vhost-user %s: connection closed: %s", ep->cfg.id, why);
	ep->conn = NULL;
	event_free(c->ev_read);
	close(c->fd);
	vu_rx_reset(&c->rx);
	vu_conn_forget_device(c);
	free(c->reg);
	free(c);
	/* The worker stops; its reap frees everything the NIC holds. */
	vu_stop_nic(ep, SUP_STOP_DEFAULT_MS, "front end disconnected");
	if (!ep->cfg.server && !ep->removing && !ep->shutting_down)
		vu_client_schedule(ep);
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
static void vu_client_schedule(struct vu_endpoint *ep)
{
	struct timeval tv;

	ep->backoff_ms = ep->backoff_ms ? ep->backoff_ms * 2 : VU_BACKOFF_FIRST_MS;
	if (ep->backoff_ms > VU_BACKOFF_MAX_MS)
		ep->backoff_ms = VU_BACKOFF_MAX_MS;
	tv.tv_sec = ep->backoff_ms / 1000;
	tv.tv_usec = (ep->backoff_ms % 1000) * 1000;
	evtimer_add(ep->ev_retry, &tv);
}

/* ------------------------------------------------------- state files */

static void vu_state_path(const struct sup *s, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s" VU_STATE_SUFFIX, s->state_dir, id);
}

/* One "key value" per line; values have no newline (validated). The id
 * is printable (validate_nic_id) and contains no '/'. */
static int vu_state_save(struct sup *s, const struct vu_config *cfg, char *err, size_t errlen)
{
	char path[512], tmp[520];
	FILE *f;

	if (!s->state_dir)
		return 0;
	if (mkdir(s->state_dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "state directory %s: %s", s->state_dir, strerror(errno));
		return -errno;
	}
	vu_state_path(s, cfg->id, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f) {
		snprintf(err, errlen, "state file %s: %s", tmp, strerror(errno));
		return -errno;
	}
	fprintf(f, "id %s\npath %s\nmode %s\ntap %s\nnetns %s\n", cfg->id, cfg->path,
		cfg->server ? "server" : "client", cfg->tap, cfg->netns);
	fprintf(f, "mac %02x:%02x:%02x:%02x:%02x:%02x\nmtu %u\npolicy %u %u %u %u %u %u %u %u\n",
		cfg->mac[0], cfg->mac[1], cfg->mac[2], cfg->mac[3], cfg->mac[4], cfg->mac[5],
		cfg->mtu, cfg->policy.mode, cfg->policy.timer_us, cfg->policy.poll_us,
		cfg->policy.budget_packets, cfg->policy.budget_bytes, cfg->policy.latency_us,
		cfg->policy.safety_pct, cfg->policy.max_window);
	if (fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, path)) {
		snprintf(err, errlen, "state file %s: %s", path, strerror(errno));
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

static int vu_state_load(const char *file, struct vu_config *cfg)
{
	char line[256];
	FILE *f = fopen(file, "re");
	int have = 0;

	if (!f)
		return -errno;
	memset(cfg, 0, sizeof(*cfg));
	while (fgets(line, sizeof(line), f)) {
		char *v = strchr(line, ' '), *nl = strchr(line, '\n');

		if (!v)
			continue;
		*v++ = '\0';
		if (nl)
			*nl = '\0';
		if (!strcmp(line, "id"))
			have |= snprintf(cfg->id, sizeof(cfg->id), "%s", v) > 0;
		else if (!strcmp(line, "path"))
			have |= (snprintf(cfg->path, sizeof(cfg->path), "%s", v) > 0) << 1;
		else if (!strcmp(line, "mode"))
			cfg->server = !strcmp(v, "server");
		else if (!strcmp(line, "tap"))
			snprintf(cfg->tap, sizeof(cfg->tap), "%s", v);
		else if (!strcmp(line, "netns"))
			snprintf(cfg->netns, sizeof(cfg->netns), "%s", v);
		else if (!strcmp(line, "mac"))
			cfg->mac_set = sscanf(v, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &cfg->mac[0],
					      &cfg->mac[1], &cfg->mac[2], &cfg->mac[3],
					      &cfg->mac[4], &cfg->mac[5]) == 6;
		else if (!strcmp(line, "mtu"))
			cfg->mtu = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(line, "policy"))
			sscanf(v, "%u %u %u %u %u %u %u %u", &cfg->policy.mode, &cfg->policy.timer_us,
			       &cfg->policy.poll_us, &cfg->policy.budget_packets,
			       &cfg->policy.budget_bytes, &cfg->policy.latency_us,
			       &cfg->policy.safety_pct, &cfg->policy.max_window);
	}
	fclose(f);
	return have == 3 ? 0 : -EINVAL;
}

void vu_init(struct sup *s)
{
	DIR *d;
	struct dirent *e;

	if (!s->state_dir)
		return;
	d = opendir(s->state_dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name), sl = strlen(VU_STATE_SUFFIX);
		struct vu_config cfg;
		char path[512], err[256], ifname[16];

		if (l <= sl || strcmp(e->d_name + l - sl, VU_STATE_SUFFIX))
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->state_dir, e->d_name);
		if (vu_state_load(path, &cfg) < 0) {
			log_warn("state file %s: unreadable, ignored", path);
			continue;
		}
		if (vu_endpoint_add(s, &cfg, ifname, sizeof(ifname), err, sizeof(err)) < 0)
			log_warn("state file %s: endpoint %s not restored: %s", path, cfg.id, err);
		else
			log_info("vhost-user %s: restored from %s (%s %s, tap %s)", cfg.id, path,
				 cfg.server ? "server" : "client", cfg.path, ifname);
	}
	closedir(d);
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
	close_fd(&ep->tap_fd);
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

int vu_endpoint_add(struct sup *s, const struct vu_config *cfg, char *ifname_out,
		    size_t ifname_len, char *err, size_t errlen)
{
	struct vu_state *vs = vu_state(s);
	struct vu_endpoint *ep;
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
	if ((cfg->tap[0] && validate_ifname(cfg->tap, err, errlen)) ||
	    (cfg->netns[0] && validate_netns_name(cfg->netns, err, errlen)))
		return -EINVAL;
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

	ep = calloc(1, sizeof(*ep));
	if (!ep) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ep->sup = s;
	ep->cfg = *cfg;
	ep->tap_fd = ep->listen_fd = -1;
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
	ep->ev_retry = evtimer_new(s->base, vu_client_try, ep);
	ep->ev_resume = event_new(s->base, -1, 0, vu_resume_cb, ep);
	if (!ep->ev_retry || !ep->ev_resume) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out_free;
	}
	rc = tap_open(cfg->tap, cfg->netns, 0, &ep->tap_fd, ep->ifname, err, errlen);
	if (rc)
		goto out_free;
	/* The tap survives a vnicd restart (client mode resumes on it, its
	 * address intact); endpoint removal deletes it. */
	rc = tap_set_persist(ep->tap_fd, true);
	if (rc) {
		snprintf(err, errlen, "tap %s: TUNSETPERSIST: %s", ep->ifname, strerror(-rc));
		goto out_free;
	}
	/* The tap carries what the guest may send: the endpoint's MTU. */
	rc = tap_set_mtu(ep->ifname, cfg->netns, cfg->mtu ? cfg->mtu : SUP_MTU_DEFAULT, err, errlen);
	if (rc) {
		tap_set_persist(ep->tap_fd, false);
		goto out_free;
	}
	if (cfg->server) {
		rc = vu_listen(ep, err, errlen);
		if (rc) {
			tap_set_persist(ep->tap_fd, false);
			goto out_free;
		}
		ep->ev_listen = event_new(s->base, ep->listen_fd, EV_READ | EV_PERSIST, vu_accept_cb, ep);
		if (!ep->ev_listen) {
			snprintf(err, errlen, "out of memory");
			tap_set_persist(ep->tap_fd, false);
			rc = -ENOMEM;
			goto out_free;
		}
		event_add(ep->ev_listen, NULL);
	}
	rc = vu_state_save(s, &ep->cfg, err, errlen);
	if (rc) {
		tap_set_persist(ep->tap_fd, false);
		goto out_free;
	}
	TAILQ_INSERT_TAIL(&vs->eps, ep, link);
	if (!cfg->server)
		event_active(ep->ev_retry, EV_TIMEOUT, 0);
	snprintf(ifname_out, ifname_len, "%s", ep->ifname);
	log_info("vhost-user %s: endpoint on %s (%s), tap %s%s%s", ep->cfg.id, ep->cfg.path,
		 cfg->server ? "server: listening" : "client: connecting", ep->ifname,
		 cfg->netns[0] ? " in netns " : "", cfg->netns);
	return 0;

out_free:
	vu_endpoint_free(ep);
	return rc;
}

static void vu_finish_remove(struct vu_endpoint *ep)
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
	if (ep->tap_fd >= 0)
		tap_set_persist(ep->tap_fd, false); /* gone with our fd */
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
	if (!ep->nic)
		event_active(ep->ev_resume, EV_TIMEOUT, 0);
	return 0;
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
			o->nic = ep->nic;
			o->state = ep->removing ? "removing" : ep->nic_stopping ? "stopping" :
				   ep->nic ? "running" : ep->conn ? "negotiating" :
				   ep->cfg.server ? "listening" : "connecting";
			o->last_error = ep->last_error;
			o->connects = ep->connects;
			o->messages = ep->messages;
			o->rejected = ep->rejected;
			o->reconfigs = ep->reconfigs;
			o->policy = &ep->cfg.policy;
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
