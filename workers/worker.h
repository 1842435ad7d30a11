/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker: state of one vnicd-worker process (one NIC).
 *
 * main.c sets it up in the documented order; worker_event.c is the
 * libevent glue and the control channel. The data path is the engine in
 * net.h, which knows nothing of libevent.
 */
#ifndef VNIC_WORKER_H
#define VNIC_WORKER_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/event.h>

#include "memtable.h"
#include "wire.h"
#include "worker_abi.h"
#include "workers/net.h"
#include "workers/stats.h"


struct worker;

/* Per virtqueue glue. */
struct worker_queue {
	struct worker *w;
	unsigned idx;
	int kick_fd;              /* EV_READ|EV_PERSIST while started */
	int call_fd;              /* written to interrupt the guest */
	struct event *kick_ev;
	struct event *resched_ev; /* zero timeout: run again after other events */
	struct event *policy_ev;  /* TX: the policy's timer (net_ops.timer) */
	struct event *irq_ev;     /* interrupt coalescing (net_ops.irq_timer) */
	bool tx_blocked;          /* TX: waiting for the backend to be writable */
	bool rx_nobuf;            /* RX: backend read off until this queue is kicked */
	bool broken;
	bool polled;              /* never kicked (Config.polled_queues): never waits for one */
	uint32_t poll_idle_us;    /* polled: the pause before the next look, 0 after work */
};

/* Per queue pair: the backend fd (a multiqueue tap has one per pair). */
struct worker_pair {
	struct worker *w;
	unsigned idx;
	int backend_fd;
	struct event *rd_ev;      /* EV_READ|EV_PERSIST, off while RX waits for buffers */
	struct event *wr_ev;      /* EV_WRITE, armed only while TX is blocked */
	bool rd_on;
	bool down;
};

struct worker {
	char nic_id[64];
	struct event_base *base;
	int ctrl_fd;
	struct event *ctrl_ev;
	struct memtable *mt;
	struct stats_page *stats;
	size_t stats_len;
	void *inflight;           /* the inflight region, NULL without one */
	size_t inflight_len;
	bool recover;             /* some queue must recover at Start */
	unsigned restarts;        /* Config.restarts, for log lines */
	struct dirtylog *log;     /* live migration's dirty log, NULL: off */
	struct net_dev *net;
	unsigned vq_base;         /* virtqueue index of q[0]: 2 x Config.pair */
	unsigned nqueues;
	unsigned npairs;
	struct worker_queue q[STATS_MAX_QUEUES];
	struct worker_pair p[NET_MAX_PAIRS];
	bool started;
	bool stopped;     /* worker_stop ran: the queues serve nothing more */
	int exit_code;
	struct event *beat_ev;    /* heartbeat timer (worker_fds.c) */
};

/* worker_event.c */

/* worker_loop_init - the event base (EVENT_BASE_FLAG_NOLOCK) and every
 * event; only the control event is added (queues wait for Start).
 * Returns: 0 or a negative errno. */
int worker_loop_init(struct worker *w);

/* worker_loop_run - dispatch until Stop, supervisor EOF or a protocol
 * error. Returns: the process exit code. */
int worker_loop_run(struct worker *w);

/* worker_loop_free - free every event, then the base. */
void worker_loop_free(struct worker *w);

/* worker_send - one message to the supervisor (blocking briefly if the
 * socket is full). Returns: 0 or a negative errno. */
int worker_send(struct worker *w, Vnic__Worker__WorkerMessage *m);

/* worker_send_error - Error{errnum, text}; best effort. */
void worker_send_error(struct worker *w, int errnum, const char *text);

/* worker_log_replace - live migration (issue 14): flush the current
 * dirty log and free it, then log into l (NULL: stop logging). Every
 * write before the call is covered by the old log, every one after by
 * the new. Logs a line when the old log refused bits (too small). */
void worker_log_replace(struct worker *w, struct dirtylog *l);

/* worker_fds.c: I/O on fds the VMM shares, and the heartbeat (issue 11).
 * Never blocks longer than WORKER_IO_BOUND_US, whatever the VMM does to
 * the fds' flags. */
#define WORKER_IO_BOUND_US 10000L  /* longest a call/kick eventfd call may block */
#define WORKER_BEAT_MS 250         /* heartbeat period (stats page) */
/* worker_fds_init - SIGALRM handler without SA_RESTART (before the sandbox). */
int worker_fds_init(void);
/* worker_call_signal - interrupt the guest through call eventfd fd.
 * Returns: 0 written, 1 an interrupt was already pending (counter
 * saturated, or the bounded write was interrupted), or a negative errno. */
int worker_call_signal(int fd);
/* worker_kick_read - one read of a kick eventfd, never blocking.
 * Returns: 0 and *ret_n, -EAGAIN (nothing), or a negative errno. */
int worker_kick_read(int fd, uint64_t *ret_n);
/* worker_heartbeat_start/stop - the WORKER_BEAT_MS timer on w->base. */
int worker_heartbeat_start(struct worker *w);
void worker_heartbeat_stop(struct worker *w);

/* worker_policy_params - a Policy message (defaults resolved by the
 * supervisor, or not) as engine parameters, net_policy_fill applied. */
void worker_policy_params(const Vnic__Vmm__Policy *p, struct vnic_policy *np);

/* The engine's callbacks (struct net_ops) for this worker. */
extern const struct net_ops worker_net_ops;

#endif
