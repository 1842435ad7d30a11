/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * handover: upgrade in place (handover.h): vnicd itself, its control
 * connections and its NICs; vhost_user_handover.c does the endpoints.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "fdstore.h"
#include "handover_priv.h"
#include "holders.h"
#include "memtable.h"
#include "pbconv.h"
#include "policy_pb.h"
#include "sdnotify.h"
#include "supervisor.h"
#include "vhost_user.h"
#include "workers/stats.h"


/* This process is an old binary that an upgrade went back to
 * (--handover-rollback): it answers the Upgrade with the failure and does
 * not go back again. */
static bool ho_rolled_back;

/* ------------------------------------------------------------ the arena */

void *ho_alloc(struct ho_arena *a, size_t size)
{
	void *p;

	if (a->oom)
		return NULL;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 256;
		void **np = realloc(a->p, cap * sizeof(*np));

		if (!np) {
			a->oom = true;
			return NULL;
		}
		a->p = np;
		a->cap = cap;
	}
	p = calloc(1, size ? size : 1);
	if (!p) {
		a->oom = true;
		return NULL;
	}
	a->p[a->n++] = p;
	return p;
}

char *ho_str(struct ho_arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = ho_alloc(a, n);

	if (p)
		memcpy(p, s, n);
	static char none[1];

	return p ? p : none; /* the arena's oom flag fails the build */
}

void **ho_array(struct ho_arena *a, size_t n)
{
	return n ? ho_alloc(a, n * sizeof(void *)) : NULL;
}

static void ho_arena_free(struct ho_arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
	memset(a, 0, sizeof(*a));
}

uint64_t ho_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

struct timespec ho_ts(uint64_t ns)
{
	struct timespec t = { .tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u) };

	return t;
}

Vnic__Handover__Region *ho_region(struct ho_arena *a, const struct memtable_region_desc *d,
				  uint64_t uva, bool sealed)
{
	Vnic__Handover__Region *r = ho_alloc(a, sizeof(*r));

	if (!r)
		return NULL;
	vnic__handover__region__init(r);
	r->fd = d->fd;
	r->gpa = d->gpa;
	r->size = d->size;
	r->offset = d->offset;
	r->uva = uva;
	r->sealed = sealed;
	return r;
}

void ho_region_load(const Vnic__Handover__Region *r, struct memtable_region_desc *d)
{
	d->fd = r->fd;
	d->gpa = r->gpa;
	d->size = r->size;
	d->offset = r->offset;
}

Vnic__Handover__Counters *ho_counters_save(struct ho_arena *a,
					   const struct stats_queue_snapshot *s)
{
	Vnic__Handover__Counters *c = ho_alloc(a, sizeof(*c));
	Vnic__Vmm__QueueStatus *q = ho_alloc(a, sizeof(*q));

	if (!c || !q)
		return NULL;
	vnic__handover__counters__init(c);
	vnic__vmm__queue_status__init(q);
	pbconv_queue_counters(s, q);
	c->c = q;
	c->kicks_avoided = s->kicks_avoided;
	return c;
}

void ho_counters_load(const Vnic__Handover__Counters *c, struct stats_queue_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	if (!c)
		return;
	if (c->c) {
#define HO_COUNTER(type, name, kind) s->name = c->c->name;
		VNIC_QUEUE_COUNTERS(HO_COUNTER)
#undef HO_COUNTER
	}
	s->kicks_avoided = c->kicks_avoided;
}

/* ----------------------------------------------------- every fd named */

typedef int (*ho_fd_fn)(int fd, const char *what, void *arg);

static int each_region_fd(Vnic__Handover__Region **r, size_t n, ho_fd_fn fn, void *arg)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < n; i++)
		rc = fn(r[i]->fd, "guest memory", arg);
	return rc;
}

/* handover_each_fd - fn on every fd m names (not -1), in one order. */
static int handover_each_fd(const Vnic__Handover__Handover *m, ho_fd_fn fn, void *arg)
{
	int rc = fn(m->listen_fd, "control socket", arg);

	rc = rc ? rc : fn(m->old_exe_fd, "old binary", arg);
	rc = rc ? rc : fn(m->journal_fd > 0 ? m->journal_fd : -1, "fd store journal", arg);
	rc = rc ? rc : fn(m->lifeline_rd_fd > 0 ? m->lifeline_rd_fd : -1, "holders' lifeline", arg);
	rc = rc ? rc : fn(m->lifeline_wr_fd > 0 ? m->lifeline_wr_fd : -1, "holders' lifeline", arg);
	for (size_t i = 0; !rc && i < m->n_conns; i++)
		rc = fn(m->conns[i]->fd, "connection", arg);
	for (size_t i = 0; !rc && i < m->n_nics; i++) {
		const Vnic__Handover__Nic *n = m->nics[i];

		rc = each_region_fd(n->regions, n->n_regions, fn, arg);
		for (size_t j = 0; !rc && j < n->n_queues; j++) {
			rc = fn(n->queues[j]->kick_fd, "kick eventfd", arg);
			rc = rc ? rc : fn(n->queues[j]->call_fd, "call eventfd", arg);
		}
		rc = rc ? rc : fn(n->backend_fd, "backend", arg);
		rc = rc ? rc : fn(n->stats_fd, "stats page", arg);
		rc = rc ? rc : fn(n->inflight_fd > 0 ? n->inflight_fd : -1, "inflight region", arg);
		rc = rc ? rc : fn(n->log_fd, "dirty log", arg);
		rc = rc ? rc : fn(n->pidfd, "pidfd", arg);
		rc = rc ? rc : fn(n->ctrl_fd, "worker channel", arg);
	}
	for (size_t i = 0; !rc && i < m->n_endpoints; i++) {
		const Vnic__Handover__Endpoint *e = m->endpoints[i];
		const Vnic__Handover__VuConn *c = e->conn;

		rc = fn(e->listen_fd, "vhost-user listener", arg);
		for (size_t k = 0; !rc && k < e->n_pairs; k++)
			rc = fn(e->pairs[k]->tap_fd, "tap queue", arg);
		if (!c)
			continue;
		rc = rc ? rc : fn(c->fd, "vhost-user connection", arg);
		rc = rc ? rc : each_region_fd(c->regions, c->n_regions, fn, arg);
		for (size_t j = 0; !rc && j < c->n_rings; j++) {
			rc = fn(c->rings[j]->kick_fd, "vring kick", arg);
			rc = rc ? rc : fn(c->rings[j]->call_fd, "vring call", arg);
			rc = rc ? rc : fn(c->rings[j]->err_fd, "vring err", arg);
		}
		rc = rc ? rc : fn(c->log_fd, "vhost-user dirty log", arg);
		rc = rc ? rc : fn(c->inflight_fd > 0 ? c->inflight_fd : -1,
				  "vhost-user inflight region", arg);
	}
	return rc;
}

struct fd_collect {
	int *v;
	size_t n, cap;
	char *err;
	size_t errlen;
};

static int collect_fd(int fd, const char *what, void *arg)
{
	struct fd_collect *c = arg;

	if (fd == -1)
		return 0;
	if (fd < 3) {
		snprintf(c->err, c->errlen, "%s: fd %d is not a handed-over fd", what, fd);
		return -EINVAL;
	}
	if (fcntl(fd, F_GETFD) < 0) {
		snprintf(c->err, c->errlen, "%s: fd %d is not open", what, fd);
		return -EBADF;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		int *v = realloc(c->v, cap * sizeof(*v));

		if (!v) {
			snprintf(c->err, c->errlen, "out of memory");
			return -ENOMEM;
		}
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = fd;
	return 0;
}

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* ----------------------------------------------------------- the check */

static bool str_fits(const char *s, size_t size)
{
	return s && strlen(s) < size;
}

int nic_policy_check(const Vnic__Vmm__Policy *pb, char *err, size_t errlen)
{
	struct vnic_policy p;
	char sub[160];

	policy_from_pb(pb, &p);
	if (validate_policy(&p, sub, sizeof(sub)) < 0) {
		snprintf(err, errlen, "a policy out of range: %s", sub);
		return -EINVAL;
	}
	return 0;
}

static int check_nic(const Vnic__Handover__Handover *m, size_t i, char *err, size_t errlen)
{
	const Vnic__Handover__Nic *n = m->nics[i];
	bool have_owner = false;

	if (!str_fits(n->id, VALIDATE_ID_MAX + 1) || !n->id[0] || !str_fits(n->ifname, 32) ||
	    !str_fits(n->netns, 64) || !str_fits(n->worker_user, 24) ||
	    !str_fits(n->last_error, 192) || !str_fits(n->owner_kind, 16) ||
	    !str_fits(n->owner_endpoint, VALIDATE_ID_MAX + 1)) {
		snprintf(err, errlen, "nic %zu: a name is too long", i);
		return -EINVAL;
	}
	if (n->mac.len != 6 || n->pair >= NIC_MAX_PAIRS || n->n_queues != NIC_NUM_QUEUES ||
	    n->n_regions > MEMTABLE_MAX_REGIONS || n->mem_shared_with > i ||
	    (n->mem_shared_with && n->n_regions) || n->backend > NIC_BACKEND_AF_PACKET ||
	    n->n_deaths_ns > SUP_RESTART_MAX_LIMIT + 1 || n->stats_len == 0 ||
	    n->stats_fd < 0) {
		snprintf(err, errlen, "nic %s: a field out of range", n->id);
		return -EINVAL;
	}
	if (nic_policy_check(n->policy, err, errlen) < 0) {
		snprintf(err + strlen(err), errlen - strlen(err), " (nic %s)", n->id);
		return -EINVAL;
	}
	for (size_t j = 0; j < n->n_queues; j++)
		if (!str_fits(n->queues[j]->broken_reason, 160)) {
			snprintf(err, errlen, "nic %s: a queue's reason is too long", n->id);
			return -EINVAL;
		}
	if (n->state == VNIC__VMM__NIC_STATE__NIC_STATE_RUNNING) {
		if (n->worker_pid <= 0 || n->pidfd < 0 || n->ctrl_fd < 0) {
			snprintf(err, errlen, "nic %s: RUNNING without its worker", n->id);
			return -EINVAL;
		}
	} else if (n->state != VNIC__VMM__NIC_STATE__NIC_STATE_FAILED || n->worker_pid != 0) {
		snprintf(err, errlen, "nic %s: only a RUNNING or FAILED NIC is handed over", n->id);
		return -EINVAL;
	}
	if (!strcmp(n->owner_kind, "vmm")) {
		for (size_t k = 0; k < m->n_conns; k++)
			have_owner |= m->conns[k]->id == n->owner_conn;
	} else if (!strcmp(n->owner_kind, "vhost-user")) {
		for (size_t k = 0; k < m->n_endpoints; k++)
			have_owner |= m->endpoints[k]->cfg &&
				      !strcmp(m->endpoints[k]->cfg->id, n->owner_endpoint);
	}
	if (!have_owner) {
		snprintf(err, errlen, "nic %s: its owner (%s) is not in the handover", n->id,
			 n->owner_kind);
		return -EINVAL;
	}
	return 0;
}

static int handover_check(const Vnic__Handover__Handover *m, char *err, size_t errlen)
{
	int rc;

	if (m->format < 1 || m->format > HANDOVER_FORMAT) {
		snprintf(err, errlen, "handover format %u: this vnicd reads 1..%u", m->format,
			 HANDOVER_FORMAT);
		return -EPROTO;
	}
	if (m->listen_fd < 0 || m->n_conns > SUP_MAX_CONNS || m->n_nics > SUP_MAX_NICS) {
		snprintf(err, errlen, "handover: no control socket, or too many entries");
		return -EINVAL;
	}
	if (m->reniced && (m->nice < -20 || m->nice > 19)) {
		snprintf(err, errlen, "handover: nice %d is not in -20..19", m->nice);
		return -EINVAL;
	}
	for (size_t i = 0; i < m->n_conns; i++)
		for (size_t k = 0; k < i; k++)
			if (m->conns[i]->id == m->conns[k]->id || m->conns[i]->fd < 0) {
				snprintf(err, errlen, "handover: connection %u twice or no fd",
					 m->conns[i]->id);
				return -EINVAL;
			}
	for (size_t i = 0; i < m->n_nics; i++) {
		rc = check_nic(m, i, err, errlen);
		if (rc)
			return rc;
	}
	return vu_handover_check(m, err, errlen);
}

int handover_arg_fd(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		ho_rolled_back |= !strcmp(argv[i], "--handover-rollback");
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		char *end;
		long fd;

		if (!strcmp(argv[i], "--handover-fd") && i + 1 < argc)
			v = argv[i + 1];
		else if (!strncmp(argv[i], "--handover-fd=", 14))
			v = argv[i] + 14;
		else
			continue;
		fd = strtol(v, &end, 10);
		return (!v[0] || *end || fd < 3 || fd > INT_MAX) ? -2 : (int)fd;
	}
	return -1;
}

void handover_free(struct handover *h)
{
	if (!h)
		return;
	if (h->m)
		vnic__handover__handover__free_unpacked(h->m, NULL);
	free(h->fds);
	free(h);
}

/* Close every fd >= 3 but the sorted keep[] and fd `also`. */
static void close_all_but(const int *keep, size_t n, int also)
{
	int lo = 3;

	for (size_t i = 0; i <= n; i++) {
		int hi = i < n ? keep[i] : INT_MAX; /* [lo, hi) goes */

		if (also >= lo && also < hi) {
			if (also > lo)
				syscall(SYS_close_range, (unsigned)lo, (unsigned)also - 1, 0u);
			lo = also + 1;
		}
		if (hi > lo)
			syscall(SYS_close_range, (unsigned)lo,
				hi == INT_MAX ? ~0u : (unsigned)hi - 1, 0u);
		if (hi != INT_MAX && hi + 1 > lo)
			lo = hi + 1;
	}
}

bool handover_from_store(const struct handover *h)
{
	return h->from_store;
}

size_t handover_worker_pids(const struct handover *h, pid_t *pids, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < h->m->n_nics && n < max; i++)
		if (h->m->nics[i]->worker_pid > 0)
			pids[n++] = h->m->nics[i]->worker_pid;
	return n;
}

void handover_close_others(const struct handover *h)
{
	close_all_but(h->fds, h->nfds, h->memfd);
}

struct handover *handover_load(int fd, bool close_others, char *err, size_t errlen)
{
	struct handover *h = calloc(1, sizeof(*h));
	struct fd_collect fc = { .err = err, .errlen = errlen };
	struct stat st;
	uint8_t *buf = MAP_FAILED;
	int rc;

	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->memfd = fd;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > HANDOVER_MAX_BYTES) {
		snprintf(err, errlen, "--handover-fd %d: not a handover (a memfd of 1..%u bytes)",
			 fd, HANDOVER_MAX_BYTES);
		goto fail;
	}
	buf = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (buf == MAP_FAILED) {
		snprintf(err, errlen, "--handover-fd %d: mmap: %s", fd, strerror(errno));
		goto fail;
	}
	h->m = vnic__handover__handover__unpack(NULL, (size_t)st.st_size, buf);
	munmap(buf, (size_t)st.st_size);
	if (!h->m) {
		snprintf(err, errlen, "the handover does not decode");
		goto fail;
	}
	rc = handover_check(h->m, err, errlen);
	if (rc == 0)
		rc = handover_each_fd(h->m, collect_fd, &fc);
	if (rc)
		goto fail;
	qsort(fc.v, fc.n, sizeof(*fc.v), int_cmp);
	for (size_t i = 1; i < fc.n; i++)
		if (fc.v[i] == fc.v[i - 1]) {
			snprintf(err, errlen, "fd %d is named twice", fc.v[i]);
			goto fail;
		}
	for (size_t i = 0; i < fc.n; i++)
		if (fc.v[i] == fd) {
			snprintf(err, errlen, "fd %d is the handover itself", fd);
			goto fail;
		}
	h->fds = fc.v;
	h->nfds = fc.n;
	if (close_others)
		handover_close_others(h);
	return h;
fail:
	free(fc.v);
	handover_free(h);
	return NULL;
}

int handover_listen_fd(const struct handover *h, bool *socket_activated)
{
	*socket_activated = h->m->socket_activated;
	return h->m->listen_fd;
}

/* ------------------------------------------------------ the old process */

static char ho_exe[PATH_MAX];
static char **ho_argv;
static int ho_argc;

void handover_set_exec(struct sup *s, int argc, char **argv)
{
	ssize_t n = readlink("/proc/self/exe", ho_exe, sizeof(ho_exe) - 1);
	const char *del = " (deleted)";

	ho_exe[n > 0 ? n : 0] = '\0';
	/* Started from a binary replaced since (an earlier upgrade's old
	 * one): its path is still where the new one is installed. */
	if (n > (ssize_t)strlen(del) && !strcmp(ho_exe + n - strlen(del), del))
		ho_exe[n - (ssize_t)strlen(del)] = '\0';
	ho_argc = argc;
	ho_argv = argv;
	s->upgrade = ho_exe[0] ? handover_upgrade : NULL;
}

static const char *nic_busy(const struct nic *n)
{
	if (n->state == NIC_FAILED)
		return n->w.pid ? "a FAILED NIC with a worker" : NULL;
	if (n->state != NIC_RUNNING)
		return nic_state_name(n->state);
	if (!n->w.pid || !n->ready_seen || n->kill_sent || n->ctrl_closed)
		return "its worker is starting or going";
	if (n->add_pending || n->remove_pending || n->policy_pending || n->log_pending ||
	    n->log_sent || n->call_pending || n->call_sent)
		return "a request to it is in progress";
	if (!n->owner)
		return "it has no owner";
	if (n->ev_timer && evtimer_pending(n->ev_timer, NULL))
		return "a deadline runs";
	return NULL;
}

void ho_fds_add(struct ho_fds *f, int fd)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		int *v = realloc(f->v, cap * sizeof(*v));

		if (!v) {
			f->oom = true;
			return;
		}
		f->v = v;
		f->cap = cap;
	}
	f->v[f->n++] = fd;
}

/* Anything in progress that a handover cannot carry: why, or NULL. With
 * @cut (the fd store's state), what one connection alone holds up (a
 * VMM's unread replies, a front end's half-read message) is not busy:
 * that connection goes into cut, to be shut down at a restore, so that
 * no one peer can keep the stored state from following vnicd's. */
static const char *sup_busy(struct sup *s, char *buf, size_t len, struct ho_fds *cut)
{
	struct vmm_conn *c;
	struct nic *n;
	const char *why;

	if (s->shutting_down)
		return "vnicd is shutting down";
	TAILQ_FOREACH(n, &s->nics, link) {
		why = nic_busy(n);
		if (why) {
			snprintf(buf, len, "nic %s (pair %u): %s", n->id, n->pair, why);
			return buf;
		}
	}
	TAILQ_FOREACH(c, &s->conns, link) {
		if (c->closing) {
			snprintf(buf, len, "connection %u is closing", c->id);
			return buf;
		}
		if (c->outq_len && cut) {
			ho_fds_add(cut, c->fd);
		} else if (c->outq_len) { /* the asker's too: its frames would be lost */
			snprintf(buf, len, "connection %u has %u messages not yet read", c->id,
				 c->outq_len);
			return buf;
		}
	}
	return vu_handover_busy(s, buf, len, cut);
}

static Vnic__Handover__Nic *nic_save(struct sup *s, struct ho_arena *a, struct nic *n,
				     unsigned idx)
{
	Vnic__Handover__Nic *m = ho_alloc(a, sizeof(*m));
	Vnic__Vmm__Policy *pol = ho_alloc(a, sizeof(*pol));
	uint8_t *mac = ho_alloc(a, 6);
	struct nic *o;
	unsigned k = 0;

	if (!m || !pol || !mac)
		return NULL;
	vnic__handover__nic__init(m);
	vnic__vmm__policy__init(pol);
	m->id = ho_str(a, n->id);
	m->pair = n->pair;
	m->state = pbconv_state(n->state);
	memcpy(mac, n->mac, 6);
	m->mac.data = mac;
	m->mac.len = 6;
	m->mtu = n->mtu;
	m->features = n->features;
	policy_to_pb(&n->policy, pol);
	m->policy = pol;
	m->backend = n->backend;
	m->ifname = ho_str(a, n->ifname);
	m->netns = ho_str(a, n->netns);
	TAILQ_FOREACH(o, &s->nics, link) {
		if (k >= idx)
			break;
		if (o->mem && o->mem == n->mem) {
			m->mem_shared_with = k + 1;
			break;
		}
		k++;
	}
	if (!m->mem_shared_with && n->mem) {
		m->regions = (Vnic__Handover__Region **)ho_array(a, n->mem->n);
		for (unsigned i = 0; i < n->mem->n && !a->oom; i++)
			m->regions[m->n_regions++] = ho_region(a, &n->mem->r[i], 0, true);
	}
	m->queues = (Vnic__Handover__Queue **)ho_array(a, NIC_NUM_QUEUES);
	for (unsigned i = 0; i < NIC_NUM_QUEUES && !a->oom; i++) {
		const struct nic_queue *q = &n->q[i];
		Vnic__Handover__Queue *qm = ho_alloc(a, sizeof(*qm));

		if (!qm)
			break;
		vnic__handover__queue__init(qm);
		qm->index = q->index;
		qm->size = q->size;
		qm->desc = q->desc;
		qm->avail = q->avail;
		qm->used = q->used;
		qm->avail_idx = q->avail_idx;
		qm->kick_fd = q->kick_fd;
		qm->call_fd = q->call_fd;
		qm->polled = q->polled;
		qm->broken = q->broken;
		qm->broken_reason = ho_str(a, q->broken_reason);
		m->queues[m->n_queues++] = qm;
	}
	m->backend_fd = n->backend_fd;
	m->memory_unsealed_ok = n->memory_unsealed_ok;
	m->base_from_used_idx = n->base_from_used_idx;
	m->stats_fd = n->stats_fd;
	m->stats_len = n->stats_len;
	m->inflight_off = n->inflight_off;
	m->inflight_len = n->inflight_len;
	m->inflight_fd = n->inflight_fd;
	m->inflight_file = n->inflight_file;
	m->log_fd = n->log_fd;
	m->log_size = n->log_size;
	m->log_offset = n->log_offset;
	m->log_in_config = n->log_in_config;
	m->call_in_config = n->call_in_config;
	m->worker_pid = n->w.pid;
	m->pidfd = n->w.pid ? n->w.pidfd : -1;
	m->ctrl_fd = n->w.pid ? n->w.ctrl_fd : -1;
	m->sandboxed = n->sandboxed;
	m->ever_ready = n->ever_ready;
	m->announced = n->announced;
	m->mon_once = n->mon_once;
	if (n->ops == &vmm_nic_owner) {
		m->owner_kind = ho_str(a, "vmm");
		m->owner_conn = n->owner ? ((const struct vmm_conn *)n->owner)->id : 0;
		m->owner_endpoint = ho_str(a, "");
	} else if (n->ops == &vu_nic_owner) {
		m->owner_kind = ho_str(a, "vhost-user");
		m->owner_endpoint = ho_str(a, n->id); /* a vhost-user NIC has its endpoint's id */
	} else {
		m->owner_kind = ho_str(a, "");
		m->owner_endpoint = ho_str(a, "");
	}
	m->restarts = n->restarts;
	m->restart_us = n->restart_us;
	m->start_us = n->start_us;
	m->policy_switches = n->policy_switches;
	m->last_error = ho_str(a, n->last_error);
	m->worker_uid = n->worker_uid;
	m->worker_gid = n->worker_gid;
	m->worker_user = ho_str(a, n->worker_user);
	m->t_spawn_ns = ho_ns(&n->t_spawn);
	m->t_running_ns = ho_ns(&n->t_running);
	m->t_died_ns = ho_ns(&n->t_died);
	m->deaths_ns = ho_alloc(a, (n->ndeaths + 1) * sizeof(uint64_t));
	for (unsigned i = 0; m->deaths_ns && i < n->ndeaths; i++)
		m->deaths_ns[m->n_deaths_ns++] = ho_ns(&n->deaths[i]);
	m->hb_last = n->hb_last;
	m->hb_t_ns = ho_ns(&n->hb_t);
	m->hb_pid = n->hb_pid;
	return a->oom ? NULL : m;
}

static int handover_build(struct sup *s, struct ho_arena *a, struct vmm_conn *asker,
			  uint64_t req, int old_exe_fd, Vnic__Handover__Handover *m)
{
	struct timespec now;
	struct vmm_conn *c;
	struct nic *n;
	unsigned i = 0;

	vnic__handover__handover__init(m);
	clock_gettime(CLOCK_MONOTONIC, &now);
	m->format = HANDOVER_FORMAT;
	m->from_version = ho_str(a, PACKAGE_VERSION);
	m->listen_fd = s->listen_fd;
	m->socket_activated = s->socket_activated;
	m->next_conn_id = s->next_conn_id;
	m->reply_conn = asker ? asker->id : 0;
	m->reply_request = req;
	m->t_begin_ns = ho_ns(&now);
	m->upgrades = s->upgrades;
	m->old_exe_fd = old_exe_fd;
	m->accept_pauses = s->accept_pauses;
	m->journal_fd = fdstore_journal_fd(s);
	m->store_generation = fdstore_generation(s);
	m->conns = (Vnic__Handover__Conn **)ho_array(a, s->nconns);
	TAILQ_FOREACH(c, &s->conns, link) {
		Vnic__Handover__Conn *cm = ho_alloc(a, sizeof(*cm));

		if (!cm || m->n_conns >= s->nconns)
			return -ENOMEM;
		vnic__handover__conn__init(cm);
		cm->fd = c->fd;
		cm->id = c->id;
		cm->pid = c->pid;
		cm->uid = c->uid;
		cm->gid = c->gid;
		cm->hello_done = c->hello_done;
		cm->version = c->version;
		m->conns[m->n_conns++] = cm;
	}
	m->nics = (Vnic__Handover__Nic **)ho_array(a, s->nnics);
	TAILQ_FOREACH(n, &s->nics, link) {
		Vnic__Handover__Nic *nm = m->n_nics < s->nnics ? nic_save(s, a, n, i++) : NULL;

		if (!nm)
			return -ENOMEM;
		m->nics[m->n_nics++] = nm;
	}
	if (vu_handover_save(s, a, m) < 0 || a->oom)
		return -ENOMEM;
	return 0;
}

/* ----------------------------------------------- the fd store's state */

struct handover_snap {
	struct ho_arena a;
	Vnic__Handover__Handover m;
	int *fds;
	size_t nfds;
	struct ho_fds cut;
};

void handover_snap_free(struct handover_snap *hs)
{
	if (!hs)
		return;
	ho_arena_free(&hs->a);
	free(hs->fds);
	free(hs->cut.v);
	free(hs);
}

struct handover_snap *handover_snap_new(struct sup *s, char *err, size_t errlen)
{
	struct handover_snap *hs = calloc(1, sizeof(*hs));
	struct fd_collect fc = { .err = err, .errlen = errlen };
	const char *why = hs ? sup_busy(s, err, errlen, &hs->cut) : NULL;

	if (hs && !why && hs->cut.oom)
		why = "out of memory";
	if (!hs || why) {
		if (hs)
			free(hs->cut.v);
		if (why && why != err)
			snprintf(err, errlen, "%s", why);
		else if (!why)
			snprintf(err, errlen, "out of memory");
		free(hs);
		return NULL;
	}
	if (handover_build(s, &hs->a, NULL, 0, -1, &hs->m) < 0) {
		snprintf(err, errlen, "out of memory");
		handover_snap_free(hs);
		return NULL;
	}
	hs->m.shut_on_restore = hs->cut.v;
	hs->m.n_shut_on_restore = hs->cut.n;
	/* What changes at every watchdog tick stays out, so that an idle
	 * vnicd writes nothing: a restored vnicd's watchdog starts afresh
	 * from the first heartbeat it reads (hb_pid 0 matches no worker). */
	hs->m.t_begin_ns = 0;
	for (size_t i = 0; i < hs->m.n_nics; i++) {
		hs->m.nics[i]->hb_last = 0;
		hs->m.nics[i]->hb_t_ns = 0;
		hs->m.nics[i]->hb_pid = 0;
	}
	if (handover_each_fd(&hs->m, collect_fd, &fc) < 0) {
		free(fc.v);
		handover_snap_free(hs);
		return NULL;
	}
	if (fc.n)
		qsort(fc.v, fc.n, sizeof(*fc.v), int_cmp);
	hs->fds = fc.v;
	hs->nfds = fc.n;
	return hs;
}

const int *handover_snap_fds(const struct handover_snap *hs, size_t *n)
{
	*n = hs->nfds;
	return hs->fds;
}

int handover_snap_aliases(struct handover_snap *hs, const int (*pairs)[2], size_t n)
{
	hs->m.fd_aliases = (Vnic__Handover__FdAlias **)ho_array(&hs->a, n);
	for (size_t i = 0; i < n; i++) {
		Vnic__Handover__FdAlias *fa = ho_alloc(&hs->a, sizeof(*fa));

		if (!fa)
			return -ENOMEM;
		vnic__handover__fd_alias__init(fa);
		fa->fd = pairs[i][0];
		fa->same_as = pairs[i][1];
		hs->m.fd_aliases[i] = fa;
	}
	hs->m.n_fd_aliases = n;
	return hs->a.oom ? -ENOMEM : 0;
}

uint8_t *handover_snap_pack(struct handover_snap *hs, uint64_t generation, size_t *len)
{
	uint8_t *buf;

	hs->m.store_generation = generation;
	*len = vnic__handover__handover__get_packed_size(&hs->m);
	buf = malloc(*len ? *len : 1);
	if (buf && vnic__handover__handover__pack(&hs->m, buf) != *len) {
		free(buf);
		buf = NULL;
	}
	return buf;
}

static int set_cloexec(int fd, const char *what, void *arg)
{
	bool on = *(const bool *)arg;
	int fl;

	(void)what;
	if (fd < 0)
		return 0;
	fl = fcntl(fd, F_GETFD);
	if (fl < 0)
		return -errno;
	return fcntl(fd, F_SETFD, on ? fl | FD_CLOEXEC : fl & ~FD_CLOEXEC) < 0 ? -errno : 0;
}

/* argv again, without an earlier --handover-*, with --handover-fd=fd and
 * @extra (NULL, "--handover-check" or "--handover-rollback").
 * NULL-terminated (free it); NULL when out of memory. */
static char **exec_argv(int fd, const char *extra, char *fdarg, size_t fdlen)
{
	char **v = calloc((size_t)ho_argc + 3, sizeof(*v));
	int k = 0;

	if (!v)
		return NULL;
	for (int i = 0; i < ho_argc; i++) {
		if (!strcmp(ho_argv[i], "--handover-fd")) {
			i++;
			continue;
		}
		if (!strncmp(ho_argv[i], "--handover-fd=", 14) ||
		    !strcmp(ho_argv[i], "--handover-check") ||
		    !strcmp(ho_argv[i], "--handover-rollback"))
			continue;
		v[k++] = ho_argv[i];
	}
	snprintf(fdarg, fdlen, "--handover-fd=%d", fd);
	v[k++] = fdarg;
	if (extra)
		v[k++] = (char *)(uintptr_t)extra; /* execv's argv is not const */
	v[k] = NULL;
	return v;
}

/* The last non-empty line the check wrote (up to 2 KiB are read), in out. */
static void check_said(int fd, char *out, size_t outlen)
{
	char buf[2048], *line;
	size_t n = 0;
	ssize_t r;

	out[0] = '\0';
	while (n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	line = strrchr(buf, '\n');
	line = line ? line + 1 : buf;
	if (*line)
		snprintf(out, outlen, ": %.200s", line);
}

/* The new binary, run as a child with --handover-check: it decodes and
 * checks the handover (it sees our fds: fork keeps them) and exits; what
 * it writes on stderr comes back in the refusal. Returns: 0 when it
 * exited 0, else -ENOEXEC with err filled. */
static int run_check(const char *exe, int fd, char *err, size_t errlen)
{
	char fdarg[32], said[256] = "";
	char **argv = exec_argv(fd, "--handover-check", fdarg, sizeof(fdarg));
	struct pollfd p;
	siginfo_t si;
	pid_t pid;
	int pidfd, rc, out[2];

	if (!argv || pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(argv);
		snprintf(err, errlen, "out of memory or fds");
		return -ENOMEM;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		free(argv);
		close(out[0]);
		close(out[1]);
		snprintf(err, errlen, "fork: %s", strerror(-rc));
		return rc;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(out[1], 2);
		execv(exe, argv);
		_exit(126);
	}
	free(argv);
	close(out[1]);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	p.fd = pidfd;
	p.events = POLLIN;
	if (pidfd < 0 || poll(&p, 1, HANDOVER_CHECK_MS) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (pidfd >= 0)
			close(pidfd);
		close(out[0]);
		snprintf(err, errlen, "%s --handover-check did not finish within %d ms", exe,
			 HANDOVER_CHECK_MS);
		return -ENOEXEC;
	}
	close(pidfd);
	check_said(out[0], said, sizeof(said));
	close(out[0]);
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED) < 0) {
		snprintf(err, errlen, "waitid: %s", strerror(errno));
		return -ENOEXEC;
	}
	if (si.si_code == CLD_EXITED && si.si_status == 0)
		return 0;
	if (si.si_code == CLD_EXITED && si.si_status == 126)
		snprintf(err, errlen, "%s cannot be executed", exe);
	else if (si.si_code == CLD_EXITED)
		snprintf(err, errlen, "%s --handover-check exited with status %d%s", exe,
			 si.si_status, said[0] ? said : " (and said nothing)");
	else
		snprintf(err, errlen, "%s --handover-check was killed by signal %d%s", exe,
			 si.si_status, said);
	return -ENOEXEC;
}

/* Whether this process may set its nice value back to `nice` after
 * raising it: CAP_SYS_NICE (the shipped unit keeps it), or an
 * RLIMIT_NICE that allows `nice`. */
static bool may_renice_back(int nice)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	struct rlimit rl;

	if (syscall(SYS_capget, &h, d) == 0 &&
	    (d[CAP_TO_INDEX(CAP_SYS_NICE)].effective & CAP_TO_MASK(CAP_SYS_NICE)))
		return true;
	return getrlimit(RLIMIT_NICE, &rl) == 0 &&
	       (rl.rlim_cur == RLIM_INFINITY || (rlim_t)(20 - nice) <= rl.rlim_cur);
}

/* The upgrade's own CPU (the new binary's check run, its exec and its
 * restore: about 20 ms here) goes at --upgrade-nice (SUP_UPGRADE_NICE_DEFAULT), so that
 * on a busy host the workers and the VMs' vCPUs keep their share
 * (doc/benchmarks.md: a guest's worst ping gap near an upgrade). Only
 * when the process that takes over may return to the nice value of now;
 * m says which. */
static void upgrade_renice(const struct sup *s, Vnic__Handover__Handover *m)
{
	int nice;

	errno = 0;
	nice = getpriority(PRIO_PROCESS, 0);
	if (s->upgrade_nice == 0 || (nice == -1 && errno) || nice >= s->upgrade_nice ||
	    !may_renice_back(nice))
		return;
	m->reniced = true;
	m->nice = nice;
}

/* Back to the nice value of before the upgrade (m->reniced). */
static void upgrade_renice_back(const Vnic__Handover__Handover *m)
{
	if (m->reniced && setpriority(PRIO_PROCESS, 0, m->nice) < 0)
		log_warn("upgrade: cannot return to nice %d: %s", m->nice, strerror(errno));
}

int handover_upgrade(struct sup *s, struct vmm_conn *asker, uint64_t req, char *err,
		     size_t errlen)
{
	Vnic__Handover__Handover m;
	struct ho_arena a = { 0 };
	char busy[256], fdarg[32], at[48] = "";
	const char *why;
	char **argv = NULL;
	uint8_t *buf = NULL;
	size_t len;
	int fd = -1, exe_fd = -1, rc;
	bool on = false;
	sigset_t stop, old;

	why = sup_busy(s, busy, sizeof(busy), NULL);
	if (why) {
		snprintf(err, errlen, "busy: %s; ask again", why);
		return -EBUSY;
	}
	/* The store holds every fd and the state from now on: the new
	 * process finds it whole (fdstore.h). The asker waits for an
	 * answer the state does not promise: should vnicd die before the
	 * new process stored its own, the asker's connection is shut down. */
	fdstore_sync(s);
	if (asker)
		sup_note_io(s, asker->fd);
	exe_fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
	rc = exe_fd < 0 ? -errno : handover_build(s, &a, asker, req, exe_fd, &m);
	if (rc == 0) {
		m.stored_fds = fdstore_stored(s, &m.n_stored_fds);
		/* Not the fd store's: a restore from it starts a new one. */
		m.lifeline_rd_fd = holders_lifeline_rd();
		m.lifeline_wr_fd = holders_lifeline_wr();
		upgrade_renice(s, &m);
	}
	if (rc) {
		snprintf(err, errlen, "building the handover: %s", strerror(-rc));
		goto out;
	}
	len = vnic__handover__handover__get_packed_size(&m);
	buf = malloc(len ? len : 1);
	fd = buf ? memfd_create("vnicd-handover", MFD_CLOEXEC | MFD_ALLOW_SEALING) : -1;
	if (fd < 0 || vnic__handover__handover__pack(&m, buf) != len ||
	    write(fd, buf, len) != (ssize_t)len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		rc = -errno ? -errno : -ENOMEM;
		snprintf(err, errlen, "writing the handover: %s", strerror(errno));
		goto out;
	}
	if (m.reniced)
		snprintf(at, sizeof(at), ", at nice %d until it has taken over", s->upgrade_nice);
	log_info("upgrade: handing over %u connection(s), %u NIC(s), %zu endpoint(s) "
		 "(%zu bytes) to %s%s", s->nconns, s->nnics, m.n_endpoints, len, ho_exe, at);
	/* The child gets the fds through fork; only the check's exec needs
	 * them without FD_CLOEXEC. */
	on = false;
	rc = handover_each_fd(&m, set_cloexec, &on);
	if (rc == 0)
		rc = set_cloexec(fd, "handover", &on);
	if (rc == 0 && m.reniced && setpriority(PRIO_PROCESS, 0, s->upgrade_nice) < 0)
		m.reniced = false; /* (the packed copy says so too: returning is harmless) */
	if (rc == 0)
		rc = run_check(ho_exe, fd, err, errlen);
	if (rc)
		goto restore;
	argv = exec_argv(fd, NULL, fdarg, sizeof(fdarg));
	if (!argv) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto restore;
	}
	/* Stop signals wait in the mask (it survives the exec) until the
	 * new process has its handlers: none kills it on the way. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	sigprocmask(SIG_BLOCK, &stop, &old);
	sdnotify_reloading(s);
	vu_spares_discard(s);
	log_info("upgrade: exec %s", ho_exe);
	execv(ho_exe, argv);
	rc = -errno;
	snprintf(err, errlen, "exec %s: %s", ho_exe, strerror(errno));
	sigprocmask(SIG_SETMASK, &old, NULL);
	sdnotify_ready_again(s);
restore:
	upgrade_renice_back(&m);
	on = true;
	handover_each_fd(&m, set_cloexec, &on);
out:
	free(argv);
	free(buf);
	if (fd >= 0)
		close(fd);
	if (exe_fd >= 0)
		close(exe_fd);
	ho_arena_free(&a);
	log_warn("upgrade refused: %s", err);
	return rc;
}

/* ------------------------------------------------------ the new process */

/* A handed-over connection (its fd is not closed on failure: the old
 * binary may take it back). */
static struct vmm_conn *conn_restore(struct sup *s, const Vnic__Handover__Conn *cm)
{
	struct vmm_conn *c = vmm_conn_new(s, cm->fd, cm->pid, cm->uid, cm->gid, cm->id);

	if (!c || !c->ev_read || !c->ev_write)
		return NULL;
	c->hello_done = cm->hello_done;
	c->version = cm->version;
	event_add(c->ev_read, NULL);
	return c;
}

static struct vmm_conn *conn_by_id(struct sup *s, unsigned id)
{
	struct vmm_conn *c;

	TAILQ_FOREACH(c, &s->conns, link)
		if (c->id == id)
			return c;
	return NULL;
}

static enum nic_state state_from_pb(Vnic__Vmm__NicState st)
{
	return st == VNIC__VMM__NIC_STATE__NIC_STATE_RUNNING ? NIC_RUNNING : NIC_FAILED;
}

static int nic_restore(struct sup *s, const Vnic__Handover__Handover *hm, size_t idx,
		       struct nic **all, char *err, size_t errlen)
{
	const Vnic__Handover__Nic *m = hm->nics[idx];
	struct nic *n = nic_alloc(s);

	if (!n) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	all[idx] = n;
	snprintf(n->id, sizeof(n->id), "%s", m->id);
	n->pair = m->pair;
	n->state = state_from_pb(m->state);
	memcpy(n->mac, m->mac.data, 6);
	n->mtu = m->mtu;
	n->features = m->features;
	policy_from_pb(m->policy, &n->policy);
	n->backend = (enum nic_backend_type)m->backend;
	snprintf(n->ifname, sizeof(n->ifname), "%s", m->ifname);
	snprintf(n->netns, sizeof(n->netns), "%s", m->netns);
	if (m->mem_shared_with) {
		n->mem = all[m->mem_shared_with - 1]->mem;
		if (n->mem)
			n->mem->refs++;
	} else {
		n->mem = calloc(1, sizeof(*n->mem) + m->n_regions * sizeof(n->mem->r[0]));
		if (!n->mem) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		n->mem->refs = 1;
		n->mem->counted = n;
		n->mem->n = (unsigned)m->n_regions;
		for (size_t i = 0; i < m->n_regions; i++)
			ho_region_load(m->regions[i], &n->mem->r[i]);
	}
	for (size_t i = 0; i < NIC_NUM_QUEUES; i++) {
		const Vnic__Handover__Queue *qm = m->queues[i];
		struct nic_queue *q = &n->q[i];

		q->index = qm->index;
		q->size = qm->size;
		q->desc = qm->desc;
		q->avail = qm->avail;
		q->used = qm->used;
		q->avail_idx = qm->avail_idx;
		q->kick_fd = qm->kick_fd;
		q->call_fd = qm->call_fd;
		q->polled = qm->polled;
		q->broken = qm->broken;
		snprintf(q->broken_reason, sizeof(q->broken_reason), "%s", qm->broken_reason);
	}
	n->backend_fd = m->backend_fd;
	n->memory_unsealed_ok = m->memory_unsealed_ok;
	n->base_from_used_idx = m->base_from_used_idx;
	n->stats_fd = m->stats_fd;
	n->stats_len = m->stats_len;
	n->inflight_off = m->inflight_off;
	n->inflight_len = m->inflight_len;
	n->inflight_fd = m->inflight_fd > 0 ? m->inflight_fd : -1;
	n->inflight_file = n->inflight_fd >= 0 && m->inflight_file;
	n->log_fd = m->log_fd;
	n->log_size = m->log_size;
	n->log_offset = m->log_offset;
	n->log_in_config = m->log_in_config;
	n->call_in_config = m->call_in_config;
	n->w.pid = m->worker_pid;
	n->w.pidfd = m->pidfd;
	n->w.ctrl_fd = m->ctrl_fd;
	n->sandboxed = m->sandboxed;
	n->ready_seen = n->w.pid != 0;
	n->ever_ready = m->ever_ready;
	n->announced = m->announced;
	n->mon_once = m->mon_once;
	n->restarts = m->restarts;
	n->restart_us = m->restart_us;
	n->start_us = m->start_us;
	n->policy_switches = m->policy_switches;
	snprintf(n->last_error, sizeof(n->last_error), "%s", m->last_error);
	n->worker_uid = m->worker_uid;
	n->worker_gid = m->worker_gid;
	snprintf(n->worker_user, sizeof(n->worker_user), "%s", m->worker_user);
	n->t_spawn = ho_ts(m->t_spawn_ns);
	n->t_running = ho_ts(m->t_running_ns);
	n->t_died = ho_ts(m->t_died_ns);
	for (size_t i = 0; i < m->n_deaths_ns; i++)
		n->deaths[i] = ho_ts(m->deaths_ns[i]);
	n->ndeaths = (unsigned)m->n_deaths_ns;
	n->hb_last = m->hb_last;
	n->hb_t = ho_ts(m->hb_t_ns);
	n->hb_pid = m->hb_pid;
	if (!strcmp(m->owner_kind, "vmm")) {
		n->ops = &vmm_nic_owner;
		n->owner = conn_by_id(s, m->owner_conn);
	} else {
		n->ops = &vu_nic_owner;
		n->owner = vu_handover_owner(s, m->owner_endpoint);
	}
	if (!n->owner) {
		snprintf(err, errlen, "nic %s: its owner is gone", n->id);
		return -EINVAL;
	}
	return nic_handover_adopt(n, err, errlen);
}

/* Exec the old binary with the same handover (it wrote it, it reads it). */
void handover_rollback(const struct handover *h, const char *why)
{
	char fdarg[32];
	char **argv;
	bool on = false;

	if (h->m->old_exe_fd < 0 || ho_rolled_back) {
		log_error("upgrade: cannot take over (%s), and there is no binary to go back to",
			  why);
		return;
	}
	log_error("upgrade: this binary cannot take over (%s): going back to the old one", why);
	if (handover_each_fd(h->m, set_cloexec, &on) < 0 || set_cloexec(h->memfd, "", &on) < 0)
		return;
	argv = exec_argv(h->memfd, "--handover-rollback", fdarg, sizeof(fdarg));
	if (argv)
		syscall(SYS_execveat, h->m->old_exe_fd, "", argv, environ, AT_EMPTY_PATH);
	log_error("upgrade: exec of the old binary failed: %s", strerror(errno));
	free(argv);
}

int handover_restore(struct sup *s, struct handover *h, char *err, size_t errlen)
{
	const Vnic__Handover__Handover *m = h->m;
	struct nic **all = calloc(m->n_nics + 1, sizeof(*all));
	int rc = ho_rolled_back ? 0 : -FAULT_ERRNO("sup.handover.restore");

	if (rc)
		snprintf(err, errlen, "fault injection: %s", strerror(-rc));
	s->next_conn_id = m->next_conn_id;
	s->upgrades = m->upgrades + (!ho_rolled_back && !h->from_store);
	s->accept_pauses = m->accept_pauses;
	if (!h->from_store)
		holders_adopt(m->lifeline_rd_fd, m->lifeline_wr_fd);
	for (size_t i = 0; !rc && i < m->n_conns; i++)
		if (!conn_restore(s, m->conns[i])) {
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
		}
	/* Endpoints first (a NIC's owner), then the NICs, then each
	 * endpoint's pairs find their NICs. */
	if (!rc)
		rc = vu_handover_restore(s, m, err, errlen);
	for (size_t i = 0; !rc && all && i < m->n_nics; i++)
		rc = nic_restore(s, m, i, all, err, errlen);
	if (!rc)
		rc = vu_handover_pairs(s, m, err, errlen);
	if (!all && !rc) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
	free(all);
	if (rc && !h->from_store)
		handover_rollback(h, err);
	return rc;
}

void handover_finish(struct sup *s, struct handover *h)
{
	const Vnic__Handover__Handover *m = h->m;
	struct vmm_conn *c = m->reply_conn ? conn_by_id(s, m->reply_conn) : NULL;
	struct timespec now;
	uint64_t us;
	bool on = true;

	handover_each_fd(m, set_cloexec, &on);
	if (!h->from_store)
		upgrade_renice_back(m);
	if (m->old_exe_fd >= 0)
		close(m->old_exe_fd);
	close(h->memfd);
	clock_gettime(CLOCK_MONOTONIC, &now);
	us = (ho_ns(&now) - m->t_begin_ns) / 1000u;
	if (ho_rolled_back) {
		log_warn("upgrade failed: the new binary could not take over; this old binary took "
			 "back %zu connection(s), %zu NIC(s), %zu endpoint(s) in %llu us", m->n_conns,
			 m->n_nics, m->n_endpoints, (unsigned long long)us);
		if (c)
			vmm_conn_reply_error(c, m->reply_request,
					     VNIC__VMM__STATUS__STATUS_UNAVAILABLE,
					     "the new binary passed its check but could not take over "
					     "(vnicd's log says why); the old binary serves on, nothing "
					     "stopped");
		handover_free(h);
		return;
	}
	if (h->from_store) {
		log_info("restarted from the fd store (state %llu of vnicd %s): took over %zu "
			 "connection(s), %zu NIC(s), %zu endpoint(s)",
			 (unsigned long long)m->store_generation, m->from_version, m->n_conns,
			 m->n_nics, m->n_endpoints);
		handover_free(h);
		return;
	}
	log_info("upgrade: %s -> %s in place (pid %d, upgrade %u): took over %zu connection(s), "
		 "%zu NIC(s), %zu endpoint(s) in %llu us", m->from_version, PACKAGE_VERSION,
		 (int)getpid(), s->upgrades, m->n_conns, m->n_nics, m->n_endpoints,
		 (unsigned long long)us);
	if (c) {
		Vnic__Vmm__Reply rep;
		Vnic__Vmm__UpgradeReply ur;
		char from[64], to[64];

		snprintf(from, sizeof(from), "%s", m->from_version);
		snprintf(to, sizeof(to), "%s", PACKAGE_VERSION);
		vnic__vmm__reply__init(&rep);
		vnic__vmm__upgrade_reply__init(&ur);
		ur.from_version = from;
		ur.to_version = to;
		ur.pid = (uint32_t)getpid();
		ur.nics = (uint32_t)m->n_nics;
		ur.endpoints = (uint32_t)m->n_endpoints;
		ur.connections = (uint32_t)m->n_conns;
		ur.pause_us = us;
		ur.upgrades = s->upgrades;
		rep.body_case = VNIC__VMM__REPLY__BODY_UPGRADE;
		rep.upgrade = &ur;
		vmm_conn_reply(c, &rep, m->reply_request, VNIC__VMM__STATUS__STATUS_OK, NULL);
	}
	handover_free(h);
}
