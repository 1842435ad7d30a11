/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sim_worker: a simulated vnicd-worker in the fuzz target's own process
 * (see sim_worker.h for what it is and the record format).
 *
 * Why in-process: a fork+exec per input would cost milliseconds and leave
 * the supervisor's reap racing the fuzzer; here the whole life of a NIC
 * (Config, Ready, Stop, a crash, the reap, a restart) runs in a few
 * hundred microseconds, deterministically. The supervisor side is the
 * real nic.c and monitor.c: only fork, exec and waitid are replaced
 * (struct worker_ops).
 *
 * Fuzzed points. The real worker sends at these points, and a SIM_FUZZED
 * one sends records there instead of its own answer:
 *   - Config read (with its last RegionFds, when regions were deferred):
 *     Ready;
 *   - Start, and any settle round in which it has nothing to read: the
 *     unsolicited messages of a running worker (Log, QueueBroken);
 *   - Stop: Stopped, then exit 0;
 *   - SetPolicy, SetDirtyLog, SetCallFd: their answers;
 *   - a message it cannot take: Error, then exit 1.
 * At a point that owes an answer it sends records until one that is not a
 * Log or QueueBroken frame (that one is the answer, whatever it is:
 * another type, a wrong direction, garbage); at a point that owes none it
 * sends only Log and QueueBroken records and leaves the next one for a
 * later point. A recorded real session thus replays in its order when
 * the target drives the supervisor to the point each answer belongs to
 * (sim_worker_peek). With the input used up, it answers as SIM_OBEDIENT.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "fdpass.h"
#include "supervisor.h"
#include "wire.h"
#include "worker_msg.h"
#include "workers/stats.h"

#include "sim_worker.h"

/* Fake pids: above any real pid_max (2^22), never 0 (nic.c: no worker). */
#define SIM_PID_BASE 0x40000000
/* Messages a worker reads per settle round (the real one: 16 per wake). */
#define SIM_MSGS_PER_STEP 16
/* Records one point may send before it answers obediently. */
#define SIM_POINT_MAX 64
/* Most fds a record sends (DGRAM: nfds mod 9). */
#define SIM_REC_MAX_FDS 8
/* Timer events sim_worker_expire_timers fires at once. */
#define SIM_MAX_TIMERS 64

enum sim_phase {
	SIM_WAIT_CONFIG,  /* spawned: Config is the first message */
	SIM_WAIT_REGIONS, /* Config said regions_deferred > 0: RegionFds follow */
	SIM_CONFIGURED,   /* Ready sent (or what the input said instead) */
	SIM_STARTED,      /* Start received */
	SIM_SILENT,       /* fuzzed: reads and sends nothing until killed */
	SIM_DEAD,         /* exited: waiting for the supervisor's reap */
};

struct sim_worker {
	TAILQ_ENTRY(sim_worker) link;
	pid_t pid;
	int ctrl;                  /* the worker's end of the socketpair */
	struct stats_page *stats;  /* Config's stats page, for a violation record */
	size_t stats_len;
	int exitfd;                /* our copy of the eventfd standing in for the pidfd */
	enum sim_phase phase;
	uint32_t deferred;         /* region fds still to come in RegionFds */
	enum sim_behaviour b;
	struct fuzz_in *in;        /* SIM_FUZZED: the shared input */
	bool exit_pending;         /* exits (as ex says) at its next step */
	struct worker_exit ex;     /* pending, or final once SIM_DEAD */
	unsigned nq;               /* the queues Config gave, for Stopped */
	uint32_t q_index[NIC_NUM_QUEUES], q_avail[NIC_NUM_QUEUES];
};

static TAILQ_HEAD(, sim_worker) sim_list = TAILQ_HEAD_INITIALIZER(sim_list);
static enum sim_behaviour sim_b = SIM_OBEDIENT;
static struct fuzz_in *sim_in;
static pid_t sim_next_pid = SIM_PID_BASE;

/* One datagram record (sim_worker.h), parsed but not consumed. */
struct sim_rec {
	unsigned nfds;
	unsigned fdkind;    /* bits 0-3 */
	unsigned action;    /* bits 4-6 */
	bool to_report;     /* bit 7: into the stats page's violation record */
	const uint8_t *data;
	size_t len;
	struct fuzz_in rest; /* the input after this record */
};

enum sim_action {
	SIM_ACT_NONE, SIM_ACT_EXIT0, SIM_ACT_EXIT1, SIM_ACT_SEGV, SIM_ACT_SYS, SIM_ACT_KILL,
	SIM_ACT_CLOSE_CTRL, SIM_ACT_HANG,
};

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static struct sim_worker *sim_find(pid_t pid)
{
	struct sim_worker *w;

	TAILQ_FOREACH(w, &sim_list, link)
		if (w->pid == pid)
			return w;
	return NULL;
}

/* ---------------------------------------------------------- how it ends */

/* The descriptions worker_reap gives, so log lines read the same. */
static void exit_status(struct worker_exit *ex, int status)
{
	memset(ex, 0, sizeof(*ex));
	ex->status = status;
	ex->failed = status != 0;
	snprintf(ex->desc, sizeof(ex->desc), "exited with status %d", status);
}

static void exit_signal(struct worker_exit *ex, int sig)
{
	memset(ex, 0, sizeof(*ex));
	ex->sig = sig;
	ex->failed = true;
	snprintf(ex->desc, sizeof(ex->desc), "killed by signal %d (%s%s)", sig, strsignal(sig),
		 sig == SIGSYS ? ": seccomp violation" : "");
}

/* The process is gone: every fd it had closes (the supervisor sees end of
 * file on the channel) and the "pidfd" becomes readable; the
 * record stays until the supervisor reaps it. */
static void sim_unmap_stats(struct sim_worker *w)
{
	if (w->stats)
		munmap(w->stats, w->stats_len);
	w->stats = NULL;
}

static void sim_die(struct sim_worker *w, const struct worker_exit *ex)
{
	uint64_t one = 1;
	ssize_t r;

	if (w->phase == SIM_DEAD)
		return;
	w->ex = *ex;
	w->exit_pending = false;
	w->phase = SIM_DEAD;
	close_fd(&w->ctrl);
	sim_unmap_stats(w);
	r = write(w->exitfd, &one, sizeof(one));
	(void)r; /* an eventfd at 0 always takes 1 */
	close_fd(&w->exitfd);
}

/* Exits at its next step, so that what it sent last is read first (a real
 * worker takes a while from its last send to its exit). */
static void sim_exit_later(struct sim_worker *w, const struct worker_exit *ex)
{
	if (w->phase == SIM_DEAD || w->phase == SIM_SILENT || w->exit_pending)
		return;
	w->ex = *ex;
	w->exit_pending = true;
}

static bool sim_leaving(const struct sim_worker *w)
{
	return w->phase == SIM_DEAD || w->phase == SIM_SILENT || w->exit_pending;
}

/* ------------------------------------------------------------- records */

/* Parse the next record of in without consuming it; false at the end. */
static bool rec_parse(const struct fuzz_in *in, struct sim_rec *r)
{
	struct fuzz_in c;
	uint8_t kind;
	size_t len;

	if (!in || in->n == 0)
		return false;
	c = *in;
	r->nfds = fuzz_u8(&c) % (SIM_REC_MAX_FDS + 1);
	kind = fuzz_u8(&c);
	r->fdkind = kind & 0x0fu;
	r->action = (kind >> 4) & 0x07u;
	r->to_report = (kind & 0x80u) != 0;
	len = fuzz_u8(&c);
	len |= (size_t)fuzz_u8(&c) << 8; /* little-endian, whatever the host */
	r->data = c.p;
	r->len = len < c.n ? len : c.n;
	c.p += r->len;
	c.n -= r->len;
	r->rest = c;
	return true;
}

/* The message type of a record's frame: > 0, or 0 when it is no
 * well-formed frame (short, prefix mismatch, not a WorkerMessage). */
static int rec_type(const struct sim_rec *r)
{
	Vnic__Worker__WorkerMessage *m;
	uint32_t plen;
	int t;

	if (r->to_report || r->len < WIRE_HDR_LEN)
		return 0;
	plen = (uint32_t)r->data[0] << 24 | (uint32_t)r->data[1] << 16 |
	       (uint32_t)r->data[2] << 8 | r->data[3];
	if (plen != r->len - WIRE_HDR_LEN)
		return 0;
	m = vnic__worker__worker_message__unpack(NULL, plen, r->data + WIRE_HDR_LEN);
	if (!m)
		return 0;
	t = (int)m->msg_case;
	vnic__worker__worker_message__free_unpacked(m, NULL);
	return t;
}

int sim_worker_peek(const struct fuzz_in *in)
{
	struct sim_rec r;

	if (!rec_parse(in, &r))
		return -1;
	return rec_type(&r);
}

/* Unsolicited messages a running worker sends at any time; any other
 * record answers the point it is sent at. */
static bool rec_unsolicited(const struct sim_rec *r)
{
	int t;

	if (r->to_report)
		return true;
	t = rec_type(r);
	return t == VNIC__WORKER__WORKER_MESSAGE__MSG_LOG ||
	       t == VNIC__WORKER__WORKER_MESSAGE__MSG_QUEUE_BROKEN;
}

/* An fd of the kind a record asks for; the worker channel expects none,
 * so every kind is a wrong one. Returns the fd or -1. */
static int rec_fd(unsigned kind)
{
	int p[2], fd;

	switch (kind % 6) {
	case 0:
		return eventfd(0, EFD_CLOEXEC);
	case 1:
		if (pipe2(p, O_CLOEXEC) < 0)
			return -1;
		close(p[1]);
		return p[0];
	case 2:
		return open("/dev/null", O_RDWR | O_CLOEXEC);
	case 3:
	case 4:
		fd = memfd_create("sim-worker", MFD_CLOEXEC);
		if (fd >= 0 && kind % 6 == 3 && ftruncate(fd, 4096) < 0)
			close_fd(&fd);
		return fd;
	default:
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
			return -1;
		close(p[1]);
		return p[0];
	}
}

/* Send one record as one datagram (or its first bytes into the stats
 * page's violation record, where a dying worker's SIGSYS handler stores
 * one: none before Config mapped the page). A full socket drops it: the
 * worker would block, and we never do. */
static void rec_send(struct sim_worker *w, const struct sim_rec *r)
{
	int fds[SIM_REC_MAX_FDS];
	unsigned n = 0;

	if (r->to_report) {
		if (w->stats)
			memcpy(&w->stats->violation, r->data,
			       r->len < sizeof(w->stats->violation) ? r->len
								    : sizeof(w->stats->violation));
		return;
	}
	if (w->ctrl < 0)
		return;
	while (n < r->nfds && (fds[n] = rec_fd(r->fdkind)) >= 0)
		n++;
	(void)fdpass_send(w->ctrl, r->data, r->len, fds, n);
	fdpass_close_all(fds, n);
}

static void rec_act(struct sim_worker *w, unsigned action)
{
	struct worker_exit ex;

	switch ((enum sim_action)action) {
	case SIM_ACT_NONE:
		return;
	case SIM_ACT_EXIT0:
	case SIM_ACT_EXIT1:
		exit_status(&ex, action == SIM_ACT_EXIT1);
		break;
	case SIM_ACT_SEGV:
		exit_signal(&ex, SIGSEGV);
		break;
	case SIM_ACT_SYS:
		exit_signal(&ex, SIGSYS);
		break;
	case SIM_ACT_KILL:
		exit_signal(&ex, SIGKILL);
		break;
	case SIM_ACT_CLOSE_CTRL:
		close_fd(&w->ctrl);
		w->phase = SIM_SILENT;
		return;
	case SIM_ACT_HANG:
	default:
		w->phase = SIM_SILENT;
		return;
	}
	sim_exit_later(w, &ex);
}

/*
 * sim_point - a fuzzed worker at a point where the real one sends (see
 * the top of the file); @answer: the point owes an answer.
 * Returns: whether the input answered (or the worker is leaving, so no
 * answer follows); *sent: whether a record was used.
 */
static bool sim_point(struct sim_worker *w, bool answer, bool *sent)
{
	struct sim_rec r;

	*sent = false;
	for (unsigned i = 0; i < SIM_POINT_MAX; i++) {
		bool unsolicited;

		if (sim_leaving(w) || !rec_parse(w->in, &r))
			break;
		unsolicited = rec_unsolicited(&r);
		if (!unsolicited && !answer)
			break;
		*w->in = r.rest;
		*sent = true;
		rec_send(w, &r);
		rec_act(w, r.action);
		if (!unsolicited)
			return true;
	}
	return sim_leaving(w);
}

/* ------------------------------------------------------ what it answers */

static void sim_send(struct sim_worker *w, const Vnic__Worker__WorkerMessage *m)
{
	bool sent;

	if (w->b == SIM_FUZZED && sim_point(w, true, &sent))
		return;
	if (w->ctrl >= 0 && !sim_leaving(w))
		(void)wire_worker_send(w->ctrl, m, NULL, 0);
}

/* Error, then exit 1: what the real worker does with what it cannot take. */
static void sim_fail(struct sim_worker *w, int errnum, const char *text)
{
	struct wmsg m;
	struct worker_exit ex;

	sim_send(w, wmsg_error(&m, errnum, text));
	exit_status(&ex, 1);
	sim_exit_later(w, &ex);
}

static void sim_ready(struct sim_worker *w)
{
	struct wmsg m;

	w->phase = SIM_CONFIGURED;
	sim_send(w, wmsg_ready(&m, true));
}

/* Config: the queues' indexes are kept for Stopped, the stats page is
 * mapped for a fuzzed violation record; its fds are closed by the caller. */
static void sim_config(struct sim_worker *w, const Vnic__Worker__Config *c,
		       const struct wire_fds *fds)
{
	struct wire_fd_layout lay;
	void *p;

	if (!w->stats && wire_config_layout(c, &lay) == 0 && lay.stats >= 0 &&
	    (unsigned)lay.stats < fds->n && c->stats_size >= sizeof(struct stats_page)) {
		p = mmap(NULL, c->stats_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 fds->fd[lay.stats], 0);
		if (p != MAP_FAILED) {
			w->stats = p;
			w->stats_len = c->stats_size;
		}
	}
	w->nq = 0;
	for (size_t j = 0; j < c->n_queues && w->nq < NIC_NUM_QUEUES; j++) {
		if (!c->queues[j])
			continue;
		w->q_index[w->nq] = c->queues[j]->index;
		w->q_avail[w->nq] = c->queues[j]->avail_idx;
		w->nq++;
	}
	w->deferred = c->regions_deferred;
	if (w->deferred) {
		w->phase = SIM_WAIT_REGIONS;
		return;
	}
	sim_ready(w);
}

static void sim_region_fds(struct sim_worker *w, const Vnic__Worker__RegionFds *r)
{
	if (r->count == 0 || r->count > w->deferred) {
		sim_fail(w, EPROTO, "RegionFds does not follow the Config");
		return;
	}
	w->deferred -= r->count;
	if (w->deferred == 0)
		sim_ready(w);
}

/* Stop: the indexes it was given (nothing moved), then exit 0. */
static void sim_stop(struct sim_worker *w)
{
	struct wmsg m;
	Vnic__Vmm__QueueIndex qi[NIC_NUM_QUEUES], *qp[NIC_NUM_QUEUES];
	struct worker_exit ex;

	for (unsigned j = 0; j < w->nq; j++) {
		wmsg_queue_index(&qi[j], w->q_index[j], w->q_avail[j], w->q_avail[j]);
		qp[j] = &qi[j];
	}
	sim_send(w, wmsg_stopped(&m, qp, w->nq));
	exit_status(&ex, 0);
	sim_exit_later(w, &ex);
}

static void sim_set_policy(struct sim_worker *w, Vnic__Vmm__Policy *p)
{
	struct wmsg m;

	if (!p) {
		sim_fail(w, EPROTO, "SetPolicy without a policy");
		return;
	}
	sim_send(w, wmsg_policy_set(&m, p)); /* applied as asked */
}

static void sim_set_dirty_log(struct sim_worker *w, const Vnic__Worker__SetDirtyLog *s,
			      const struct wire_fds *fds)
{
	struct wmsg m;

	sim_send(w, wmsg_dirty_log_set(&m, s->size > 0 && fds->n == 1, NULL));
}

static void sim_set_call_fd(struct sim_worker *w, const Vnic__Worker__SetCallFd *s,
			    const struct wire_fds *fds)
{
	struct wmsg m;
	bool have = false;

	for (unsigned j = 0; j < w->nq; j++)
		have |= w->q_index[j] == s->queue;
	if (!have || fds->n != 1) {
		sim_fail(w, EINVAL, "SetCallFd for a queue this worker does not have");
		return;
	}
	sim_send(w, wmsg_call_fd_set(&m, s->queue));
}

/* Start: nothing owed; a fuzzed worker may say what a running one says. */
static void sim_start(struct sim_worker *w)
{
	bool sent;

	if (w->phase == SIM_STARTED) {
		sim_fail(w, EPROTO, "Start received twice");
		return;
	}
	w->phase = SIM_STARTED;
	if (w->b == SIM_FUZZED)
		(void)sim_point(w, false, &sent);
}

/* One message from the supervisor, as workers/main.c (before Ready) and
 * worker_event.c's ctrl_cb (after) take it. */
static void sim_handle(struct sim_worker *w, const Vnic__Worker__WorkerMessage *m,
		       const struct wire_fds *fds)
{
	Vnic__Worker__WorkerMessage__MsgCase t = m->msg_case;

	if (w->phase == SIM_WAIT_CONFIG) {
		if (t == VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG)
			sim_config(w, m->config, fds);
		else
			sim_fail(w, EPROTO, "expected Config first");
		return;
	}
	if (w->phase == SIM_WAIT_REGIONS) {
		if (t == VNIC__WORKER__WORKER_MESSAGE__MSG_REGION_FDS)
			sim_region_fds(w, m->region_fds);
		else
			sim_fail(w, EPROTO, "expected RegionFds after the Config");
		return;
	}
	switch (t) {
	case VNIC__WORKER__WORKER_MESSAGE__MSG_START:
		sim_start(w);
		break;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_STOP:
		sim_stop(w);
		break;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_POLICY:
		sim_set_policy(w, m->set_policy->policy);
		break;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_DIRTY_LOG:
		sim_set_dirty_log(w, m->set_dirty_log, fds);
		break;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_CALL_FD:
		sim_set_call_fd(w, m->set_call_fd, fds);
		break;
	default:
		sim_fail(w, EPROTO, "unexpected message from the supervisor");
		break;
	}
}

/* One settle round of one worker. Returns: whether it did anything. */
static bool sim_step(struct sim_worker *w)
{
	struct worker_exit ex;
	bool did = false;

	if (w->phase == SIM_DEAD || w->phase == SIM_SILENT)
		return false;
	if (w->exit_pending) {
		sim_die(w, &w->ex);
		return true;
	}
	for (int i = 0; i < SIM_MSGS_PER_STEP && !sim_leaving(w); i++) {
		Vnic__Worker__WorkerMessage *m = NULL;
		struct wire_fds fds = { .n = 0 };
		struct wire_err err;
		int rc;

		memset(&err, 0, sizeof(err));
		rc = wire_worker_recv(w->ctrl, WIRE_PEER_SUPERVISOR, &m, &fds, &err);
		if (rc == -EAGAIN)
			break;
		did = true;
		if (rc == -EPIPE || rc == -ECONNRESET) {
			/* The supervisor closed the channel: nobody to serve. */
			exit_status(&ex, 0);
			sim_die(w, &ex);
			break;
		}
		if (rc < 0) {
			sim_fail(w, -rc, err.msg);
			break;
		}
		sim_handle(w, m, &fds);
		wire_fds_close(&fds); /* adopted by nothing: a simulation maps nothing */
		wire_worker_free(m);
	}
	/* Nothing to read: a running worker may speak unasked. */
	if (!did && w->b == SIM_FUZZED && w->phase == SIM_STARTED && !w->exit_pending)
		(void)sim_point(w, false, &did);
	return did;
}

/* --------------------------------------------------------- worker_ops */

static int sim_spawn(const char *path, const char *nic_id, const struct worker_opts *opts,
		     struct worker_proc *ret, char *err, size_t errlen)
{
	struct sim_worker *w = calloc(1, sizeof(*w));
	int sv[2] = { -1, -1 }, efd = -1;
	int rc;

	(void)path;
	(void)nic_id;
	(void)opts;
	if (!w) {
		snprintf(err, errlen, "simulated worker: out of memory");
		return -ENOMEM;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0 ||
	    (efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (w->exitfd = fcntl(efd, F_DUPFD_CLOEXEC, 0)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "simulated worker: %s", strerror(-rc));
		fdpass_close_all(sv, 2);
		if (efd >= 0)
			close(efd);
		free(w);
		return rc;
	}
	w->pid = sim_next_pid++;
	w->ctrl = sv[1];
	w->phase = SIM_WAIT_CONFIG;
	w->b = sim_b;
	w->in = sim_in;
	TAILQ_INSERT_TAIL(&sim_list, w, link);
	ret->pid = w->pid;
	ret->pidfd = efd;
	ret->ctrl_fd = sv[0];
	return 0;
}

/* SIGKILL: immediate, as far as the supervisor can tell (its pidfd turns
 * readable within the next loop run). A worker already gone: 0, as a
 * pidfd_send_signal's ESRCH is. */
static int sim_kill(const struct worker_proc *p)
{
	struct sim_worker *w = sim_find(p->pid);
	struct worker_exit ex;

	if (w && w->phase != SIM_DEAD) {
		exit_signal(&ex, SIGKILL);
		sim_die(w, &ex);
	}
	return 0;
}

/* The recorded exit, once; the record is freed then. A blocking reap of
 * a live worker would hang a real supervisor: -EDEADLK instead. */
static int sim_reap(const struct worker_proc *p, bool block, struct worker_exit *ret)
{
	struct sim_worker *w = sim_find(p->pid);

	if (!w)
		return -ECHILD;
	if (w->phase != SIM_DEAD)
		return block ? -EDEADLK : 0;
	*ret = w->ex;
	TAILQ_REMOVE(&sim_list, w, link);
	free(w);
	return 1;
}

static const struct worker_ops sim_ops = {
	.spawn = sim_spawn,
	.kill = sim_kill,
	.reap = sim_reap,
};

void sim_worker_use(struct sup *s)
{
	s->wops = &sim_ops;
}

void sim_worker_behave(enum sim_behaviour b, struct fuzz_in *in)
{
	sim_b = b;
	sim_in = b == SIM_FUZZED ? in : NULL;
}

/* --------------------------------------------------------------- driving */

static bool sim_step_all(void)
{
	struct sim_worker *w;
	bool did = false;

	TAILQ_FOREACH(w, &sim_list, link)
		did |= sim_step(w);
	return did;
}

unsigned sim_worker_settle(struct sup *s, unsigned max_rounds)
{
	unsigned round, quiet = 0;

	/* Two quiet rounds: the second runs the supervisor once more after
	 * the last thing a worker did, so nothing it queued stays unread. */
	for (round = 0; round < max_rounds && quiet < 2; round++) {
		event_base_loop(s->base, EVLOOP_NONBLOCK);
		if (sim_step_all())
			quiet = 0;
		else
			quiet++;
	}
	return round;
}

struct sim_timers {
	struct event *ev[SIM_MAX_TIMERS];
	unsigned n;
};

/* foreach callbacks may not activate events: collect them first. */
static int collect_timer(const struct event_base *base, const struct event *ev, void *arg)
{
	struct sim_timers *t = arg;

	(void)base;
	if (event_get_fd(ev) >= 0 || (event_get_events(ev) & (EV_READ | EV_WRITE | EV_SIGNAL)))
		return 0;
	if (!event_pending(ev, EV_TIMEOUT, NULL) || t->n >= SIM_MAX_TIMERS)
		return 0;
	/* libevent hands out const events; activating one is what we are for. */
	t->ev[t->n++] = (struct event *)(uintptr_t)ev;
	return 0;
}

unsigned sim_worker_expire_timers(struct sup *s)
{
	struct sim_timers t = { .n = 0 };

	event_base_foreach_event(s->base, collect_timer, &t);
	for (unsigned i = 0; i < t.n; i++)
		event_active(t.ev[i], EV_TIMEOUT, 0);
	return t.n;
}

unsigned sim_worker_settle_all(struct sup *s, unsigned max_rounds)
{
	unsigned used = sim_worker_settle(s, max_rounds);

	while (used < max_rounds && sim_worker_expire_timers(s) > 0)
		used += 1 + sim_worker_settle(s, max_rounds - used - 1);
	return used;
}

void sim_worker_crash_all(int sig)
{
	struct sim_worker *w;
	struct worker_exit ex;

	exit_signal(&ex, sig);
	TAILQ_FOREACH(w, &sim_list, link)
		sim_die(w, &ex);
}

void sim_worker_reset(void)
{
	struct sim_worker *w;

	while ((w = TAILQ_FIRST(&sim_list))) {
		TAILQ_REMOVE(&sim_list, w, link);
		close_fd(&w->ctrl);
		sim_unmap_stats(w);
		close_fd(&w->exitfd);
		free(w);
	}
	sim_b = SIM_OBEDIENT;
	sim_in = NULL;
	sim_next_pid = SIM_PID_BASE;
}

unsigned sim_worker_count(void)
{
	struct sim_worker *w;
	unsigned n = 0;

	TAILQ_FOREACH(w, &sim_list, link)
		n += w->phase != SIM_DEAD;
	return n;
}
