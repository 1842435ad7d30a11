/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * limits: vnicd's resource bounds, derived from its fd limit, and the
 * listener's back-off when the process is out of fds (issue 11 item 1).
 *
 * At start vnicd raises RLIMIT_NOFILE to its hard limit and derives every
 * other bound from it (sup_limits_derive): connections, NICs, the fds all
 * NICs may hold (what the VMMs park in vnicd and each NIC's own: worker
 * memfd, control socket, pidfd, tap), and each connection's share of them,
 * so that no single VMM can take every slot and some fds are always left
 * for vnicd itself (accept, a frame being received). Admission counts what
 * each NIC actually holds (sup_budget_check), not a fixed cost per NIC.
 *
 * If accept() still fails for lack of fds or memory (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM: another process shares the limit, or the limit was
 * lowered under us), the listener is taken out of the event loop, so a
 * pending connect() no longer wakes vnicd in a loop, and put back after
 * SUP_ACCEPT_RETRY_MS or as soon as a connection closes (which frees an
 * fd). The log line is rate-limited.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "supervisor.h"

void sup_limits_derive(uint64_t nofile, struct sup_limits *l)
{
	uint64_t usable, total, headroom;

	memset(l, 0, sizeof(*l));
	l->nofile = nofile;
	if (nofile <= SUP_FD_RESERVE + 8)
		nofile = SUP_FD_RESERVE + 8;
	/* One fd per connection, at most an eighth of what is left. */
	l->max_conns = (unsigned)((nofile - SUP_FD_RESERVE) / 8);
	if (l->max_conns > SUP_MAX_CONNS)
		l->max_conns = SUP_MAX_CONNS;
	usable = nofile - SUP_FD_RESERVE - l->max_conns;
	/* A NIC holds up to SUP_NIC_OWN_FDS of its own and at least
	 * SUP_NIC_MIN_VMM_FDS of the VMM's. */
	l->max_nics = (unsigned)(usable / (SUP_NIC_OWN_FDS + SUP_NIC_MIN_VMM_FDS));
	if (l->max_nics > SUP_MAX_NICS)
		l->max_nics = SUP_MAX_NICS;
	if (l->max_nics == 0)
		l->max_nics = 1;
	/* Room for the one frame being received (up to WIRE_MAX_FDS fds
	 * until they are adopted or closed), at most half. */
	headroom = usable / 2 < WIRE_MAX_FDS ? usable / 2 : WIRE_MAX_FDS;
	total = usable - headroom;
	l->nic_fds = total > UINT32_MAX ? UINT32_MAX : (unsigned)total;
	/* Each connection: a quarter, or one full frame and its NICs' own
	 * fds if that is more, never more than all. */
	l->conn_fds = l->nic_fds / 4 > WIRE_MAX_FDS + SUP_NIC_OWN_FDS
			      ? l->nic_fds / 4 : WIRE_MAX_FDS + SUP_NIC_OWN_FDS;
	if (l->conn_fds > l->nic_fds)
		l->conn_fds = l->nic_fds;
	l->conn_nics = l->max_nics / 4 > SUP_CONN_NICS_MIN ? l->max_nics / 4 : SUP_CONN_NICS_MIN;
	if (l->conn_nics > l->max_nics)
		l->conn_nics = l->max_nics;
}

void sup_limits_init(struct sup *s)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rlim_t want = rl.rlim_max;

		rl.rlim_cur = want;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_warn("raising RLIMIT_NOFILE to %llu: %s", (unsigned long long)want,
				 strerror(errno));
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = 1024;
	sup_limits_derive(rl.rlim_cur == RLIM_INFINITY ? (uint64_t)1 << 20 : rl.rlim_cur, &s->lim);
	log_info("fd limit %llu: at most %u connections, %u NICs (%u per connection), %u fds "
		 "held for NICs (%u per connection)", (unsigned long long)s->lim.nofile,
		 s->lim.max_conns, s->lim.max_nics, s->lim.conn_nics, s->lim.nic_fds,
		 s->lim.conn_fds);
}

/* The fds a NIC holds: for its VMM, memfds (counted with one of the
 * pairs that share them), kick and call eventfds and a backend the VMM
 * passed; of its own, the worker's memfd, control socket and pidfd (while
 * it has no worker too: it gets one again) and a tap vnicd opened. */
static unsigned nic_fds(const struct nic *n)
{
	unsigned mem = n->mem && n->mem->counted == n ? n->mem->n : 0;

	/* The backend (the VMM's, or a tap) is one of SUP_NIC_OWN_FDS. */
	/* + the inflight region's own fd (a front end's, or a file). */
	return mem + 2 * NIC_NUM_QUEUES + SUP_NIC_OWN_FDS + (n->inflight_fd >= 0);
}

int sup_budget_check(struct sup *s, const struct vmm_conn *c, unsigned nnics, unsigned nfds,
		     char *err, size_t errlen)
{
	unsigned all_fds = 0, conn_fds = 0, conn_nics = 0;
	struct nic *n;

	TAILQ_FOREACH(n, &s->nics, link) {
		all_fds += nic_fds(n);
		if (c && n->owner == (const void *)c) {
			conn_fds += nic_fds(n);
			conn_nics++;
		}
	}
	/* The new NICs: the frame's fds and at most SUP_NIC_OWN_FDS each. */
	nfds += nnics * SUP_NIC_OWN_FDS;
	/* nnics: one per queue pair (issue 15), each a struct nic. */
	if (s->nnics + nnics > s->lim.max_nics) {
		snprintf(err, errlen, "at most %u NICs per supervisor (fd limit %llu)",
			 s->lim.max_nics, (unsigned long long)s->lim.nofile);
		return -ENOSPC;
	}
	if (conn_nics + nnics > s->lim.conn_nics) {
		snprintf(err, errlen, "this connection has %u NICs, its budget is %u", conn_nics,
			 s->lim.conn_nics);
		return -ENOSPC;
	}
	if (conn_fds + nfds > s->lim.conn_fds) {
		snprintf(err, errlen, "this connection's NICs hold %u fds; %u more exceed its "
			 "budget of %u", conn_fds, nfds, s->lim.conn_fds);
		return -ENOSPC;
	}
	if (all_fds + nfds > s->lim.nic_fds) {
		snprintf(err, errlen, "vnicd holds %u fds for NICs; %u more exceed its budget of "
			 "%u (fd limit %llu)", all_fds, nfds, s->lim.nic_fds,
			 (unsigned long long)s->lim.nofile);
		return -ENOSPC;
	}
	return 0;
}

static void accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sup_accept_resume(arg);
}

void sup_accept_pause(struct sup *s, int errnum)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT(5000, 5);
	struct timeval tv = { .tv_sec = 0, .tv_usec = SUP_ACCEPT_RETRY_MS * 1000 };

	s->accept_pauses++;
	log_ratelimited(&rl, LOG_LEVEL_WARN, "accept: %s: not accepting for %d ms "
			"(or until a connection closes; %llu pauses so far)", strerror(errnum),
			SUP_ACCEPT_RETRY_MS, (unsigned long long)s->accept_pauses);
	if (!s->ev_accept_retry)
		s->ev_accept_retry = evtimer_new(s->base, accept_retry_cb, s);
	if (!s->ev_accept_retry)
		return; /* no timer: stay in the loop rather than stop for good */
	event_del(s->ev_listen);
	s->accept_paused = true;
	evtimer_add(s->ev_accept_retry, &tv);
}

void sup_accept_resume(struct sup *s)
{
	if (!s->accept_paused)
		return;
	s->accept_paused = false;
	if (s->ev_accept_retry)
		event_del(s->ev_accept_retry);
	if (!s->shutting_down && s->listen_fd >= 0)
		event_add(s->ev_listen, NULL);
}
