/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_chan: what a compromised vnicd-worker can send its supervisor
 * (issue 18). The code under test is the real supervisor side, nic.c and
 * monitor.c (through proto/wire.c's receive checks): one NIC per input,
 * started with nic_start() on a socket backend, whose workers are
 * simulated in-process (fuzz/sim_worker.c, SIM_FUZZED) and send what the
 * input says at each point where a real worker sends.
 *
 * Input: datagram records (fuzz/sim_worker.h; the format vmm_proto and
 * the strace recorder tools/fuzz_record.py share): u8 nfds, u8 fdkind,
 * u16 le len, len bytes sent as one SOCK_SEQPACKET message (the wire
 * frame, u32 big-endian length + packed WorkerMessage). On this channel
 * fdkind also carries the worker's fate after the record (exit, signal,
 * silence) and a flag sending the bytes into the stats page's sandbox
 * violation record.
 * Every worker of the NIC (first start and each restart) reads the same
 * input, on.
 *
 * The supervisor's side is steered by the next record, so that a
 * recorded session replays in order: a PolicySet next makes it send
 * SetPolicy, DirtyLogSet a SetDirtyLog, CallFdSet a SetCallFd, Stopped a
 * Stop, Ready a crash of the running worker (its replacement's Config is
 * where a Ready belongs); anything else picks one of those by its length.
 * A NIC not RUNNING has its timers fired (READY deadline, restart
 * backoff, stop deadline, the grace of a closed channel): time passes
 * only when nothing else happens; in a restart backoff the next record's
 * length may first make a change no worker is there to answer. At the end the NIC is stopped, every
 * timer fired until it is gone, and the owner must have heard exactly one
 * answer to AddNic and to each change it asked for; fds and memory are
 * checked as for every target.
 *
 * Seeds (fuzz/corpus/worker_chan/): written by fuzz/worker_chan_seeds.c,
 * which packs real WorkerMessages with the generated protobuf-c code:
 * each answer a healthy worker gives, then the hostile cases (wrong
 * state, wrong direction, garbage, fds, report bytes, crashes). Sessions
 * of a real worker recorded with strace go there as they are.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "fuzz.h"
#include "pbconv.h"
#include "sim_worker.h"
#include "supervisor.h"

#define WC_STEPS 48          /* supervisor actions per input */
#define WC_SETTLE 64         /* rounds per settle */
#define WC_TEARDOWN 512      /* rounds for the final stop, timers included */
#define WC_MEM (64u * 1024u) /* guest memory: one region */
#define WC_QSIZE 256u

/* The owner: counts what nic.c tells it, to check each ask is answered once. */
struct wc_owner {
	unsigned added, removed, gone;
	unsigned policy_asked, policy_answered;
	unsigned log_asked, log_answered;
	unsigned call_asked, call_answered;
};

static struct wc_owner *owner_of(struct nic *n)
{
	return n->owner;
}

static void wc_added(struct nic *n, enum nic_result r, const char *e)
{
	(void)r, (void)e;
	owner_of(n)->added++;
}

static void wc_removed(struct nic *n, enum nic_result r, const char *e)
{
	(void)r, (void)e;
	owner_of(n)->removed++;
}

static void wc_policy_set(struct nic *n, enum nic_result r, const char *e)
{
	(void)r, (void)e;
	owner_of(n)->policy_answered++;
}

static void wc_dirty_log_set(struct nic *n, enum nic_result r, const char *e)
{
	(void)r, (void)e;
	owner_of(n)->log_answered++;
}

static void wc_call_fd_set(struct nic *n, enum nic_result r, const char *e)
{
	(void)r, (void)e;
	owner_of(n)->call_answered++;
}

static void wc_gone(struct nic *n)
{
	owner_of(n)->gone++;
}

static const struct nic_owner_ops wc_ops = {
	.kind = "fuzz",
	.added = wc_added,
	.removed = wc_removed,
	.policy_set = wc_policy_set,
	.gone = wc_gone,
	.dirty_log_set = wc_dirty_log_set,
	.call_fd_set = wc_call_fd_set,
};

/* The fds an AddNic would bring: one sealed memory region, kick and call
 * eventfds for rx0 and tx0, a socket backend. The NIC adopts them all. */
static int wc_nic_start(struct sup *s, struct wc_owner *o, int *peer)
{
	struct memtable_region_desc reg = { .gpa = 0, .size = WC_MEM, .offset = 0 };
	struct nic_queue_spec q[NIC_NUM_QUEUES];
	struct nic_spec spec;
	int sv[2];
	char err[256];

	memset(&spec, 0, sizeof(spec));
	snprintf(spec.id, sizeof(spec.id), "fz0");
	spec.id_len = strlen(spec.id);
	memcpy(spec.mac, "\x52\x54\x00\x12\x34\x56", 6);
	spec.mac_len = 6;
	spec.mtu = 1500;
	spec.features = spec.features_offered = 1ull << 32; /* VERSION_1 */
	reg.fd = fuzz_memfd(NULL, 0, WC_MEM);
	for (unsigned j = 0; j < NIC_NUM_QUEUES; j++) {
		q[j] = (struct nic_queue_spec){ .index = j, .size = WC_QSIZE,
						.desc = 0x1000 + j * 0x4000,
						.avail = 0x2000 + j * 0x4000,
						.used = 0x3000 + j * 0x4000,
						.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK),
						.call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) };
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	*peer = sv[1];
	spec.nregions = 1;
	spec.regions = &reg;
	spec.nqueues = NIC_NUM_QUEUES;
	spec.queues = q;
	spec.backend = NIC_BACKEND_SOCKET;
	spec.backend_fd = sv[0];
	spec.log_fd = -1;
	if (reg.fd < 0 || q[0].kick_fd < 0 || q[1].call_fd < 0)
		abort();
	return nic_start(s, &wc_ops, o, 1, &spec, NULL, NULL, err, sizeof(err));
}

/* SetPolicy to a running worker, through nic_set_policy as
 * vmm_handle_set_policy sends it: switch between bh and timer. */
static void wc_set_policy(struct nic *n, struct wc_owner *o)
{
	struct vnic_policy p = n->policy;
	char err[128];

	p.mode = p.mode == VNIC_MITIGATION_BH ? VNIC_MITIGATION_TIMER : VNIC_MITIGATION_BH;
	if (nic_set_policy(n, &p, 0, 0, err, sizeof(err)) == 0)
		o->policy_asked++;
}

static void wc_set_dirty_log(struct nic *n, struct wc_owner *o)
{
	char err[128];
	int fd = -1;

	if (n->log_fd < 0 && (fd = fuzz_memfd(NULL, 0, 4096)) < 0)
		abort();
	if (nic_set_dirty_log(n, fd, fd >= 0 ? 4096 : 0, 0, err, sizeof(err)) == 0) {
		o->log_asked++;
	} else if (fd >= 0) {
		close(fd);
	}
}

static void wc_set_call_fd(struct nic *n, struct wc_owner *o, uint32_t queue)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	char err[128];

	if (fd < 0)
		abort();
	if (nic_set_call_fd(n, queue, fd, err, sizeof(err)) == 0)
		o->call_asked++;
	else
		close(fd);
}

enum wc_act { WC_POLICY, WC_LOG, WC_CALL, WC_STOP, WC_CRASH, WC_NACTS };

/* What the supervisor does next, from the record that is next. */
static enum wc_act wc_choose(const struct fuzz_in *in)
{
	switch (sim_worker_peek(in)) {
	case VNIC__WORKER__WORKER_MESSAGE__MSG_POLICY_SET:
		return WC_POLICY;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_DIRTY_LOG_SET:
		return WC_LOG;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_CALL_FD_SET:
		return WC_CALL;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_STOPPED:
		return WC_STOP;
	case VNIC__WORKER__WORKER_MESSAGE__MSG_READY:
		return WC_CRASH;
	default:
		/* The low byte of the record's length picks. */
		return in->n > 2 ? (enum wc_act)(in->p[2] % WC_NACTS) : WC_STOP;
	}
}

static void wc_act(struct nic *n, struct wc_owner *o, enum wc_act a, uint32_t arg)
{
	switch (a) {
	case WC_POLICY:
		if (!n->policy_pending) {
			wc_set_policy(n, o);
			return;
		}
		break;
	case WC_LOG:
		if (!n->log_pending) {
			wc_set_dirty_log(n, o);
			return;
		}
		break;
	case WC_CALL:
		if (!n->call_pending) {
			wc_set_call_fd(n, o, arg % (NIC_NUM_QUEUES + 1));
			return;
		}
		break;
	case WC_STOP:
		n->remove_pending = true;
		nic_stop(n, SUP_STOP_DEFAULT_MS, "fuzz: stop");
		return;
	case WC_CRASH:
	case WC_NACTS:
		break;
	}
	/* The change asked for is still pending: a crash ends the wait. */
	sim_worker_crash_all(arg & 1 ? SIGSEGV : SIGKILL);
}

/* Between two workers (restart backoff) no worker answers a change: it
 * is answered at once and the next worker's Config carries it. Whether
 * one is made, and which, the next record's length picks (its low byte
 * mod 3: none, the dirty log, a call fd). Returns: whether one was. */
static bool wc_change_between(struct nic *n, struct wc_owner *o, const struct fuzz_in *in,
			      uint32_t arg)
{
	unsigned pick = in->n > 2 ? in->p[2] % 3u : 0;

	if (pick == 1 && !n->log_pending) {
		wc_act(n, o, WC_LOG, arg);
		return true;
	}
	if (pick == 2 && !n->call_pending) {
		wc_act(n, o, WC_CALL, arg);
		return true;
	}
	return false;
}

static void wc_drive(struct sup *s, struct wc_owner *o, struct fuzz_in *in)
{
	bool between = false; /* a change was made in this backoff already */

	for (unsigned step = 0; step < WC_STEPS && in->n > 0; step++) {
		struct nic *n;

		sim_worker_settle(s, WC_SETTLE);
		n = TAILQ_FIRST(&s->nics);
		if (!n || n->state == NIC_FAILED || in->n == 0)
			return;
		if (n->w.pid != 0)
			between = false;
		if (n->state == NIC_RUNNING && !n->ctrl_closed)
			wc_act(n, o, wc_choose(in), step);
		else if (n->w.pid == 0 && !between && wc_change_between(n, o, in, step))
			between = true;
		else
			sim_worker_expire_timers(s);
	}
}

/* Stop what is left, let every deadline pass, free; the owner's books
 * must balance. */
static void wc_teardown(struct sup *s, struct wc_owner *o)
{
	struct nic *n;

	sim_worker_settle(s, WC_SETTLE);
	n = TAILQ_FIRST(&s->nics);
	if (n) {
		n->remove_pending = true;
		nic_stop(n, SUP_STOP_DEFAULT_MS, "fuzz: teardown");
	}
	sim_worker_settle_all(s, WC_TEARDOWN);
	if (s->nnics || sim_worker_count()) {
		fprintf(stderr, "worker_chan: %u NIC(s), %u worker(s) left after the stop\n",
			s->nnics, sim_worker_count());
		abort();
	}
	if (o->added != 1 || o->gone != 1 || o->removed > 1 ||
	    o->policy_answered != o->policy_asked || o->log_answered != o->log_asked ||
	    o->call_answered != o->call_asked) {
		fprintf(stderr, "worker_chan: owner told added %u gone %u removed %u, policy %u/%u, "
			"log %u/%u, call fd %u/%u (answered/asked)\n", o->added, o->gone,
			o->removed, o->policy_answered, o->policy_asked, o->log_answered,
			o->log_asked, o->call_answered, o->call_asked);
		abort();
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int before = fuzz_fd_count();
	struct fuzz_in in = fuzz_in(data, size);
	struct event_config *cfg = event_config_new();
	struct wc_owner o;
	struct sup s;
	int peer = -1;

	memset(&s, 0, sizeof(s));
	memset(&o, 0, sizeof(o));
	if (!cfg)
		abort();
	event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
	s.base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (!s.base)
		abort();
	s.worker_path = "vnicd-worker";
	s.listen_fd = -1;
	s.restart_max = SUP_RESTART_MAX_DEFAULT;
	TAILQ_INIT(&s.conns);
	TAILQ_INIT(&s.nics);
	sim_worker_use(&s);
	sim_worker_behave(SIM_FUZZED, &in);

	if (wc_nic_start(&s, &o, &peer) != 0)
		abort(); /* nothing in it depends on the input */
	wc_drive(&s, &o, &in);
	wc_teardown(&s, &o);

	sim_worker_reset();
	event_base_free(s.base);
	close(peer);
	fuzz_fd_check(before, "worker_chan");
	return 0;
}
