/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_priv: what the vhost_user*.c files share: the endpoint, the
 * connection and its rings and regions, and the functions one file calls
 * in another. Not for anything outside the vhost-user back end.
 *
 *   vhost_user.c           a connection: reading, dispatch, replies
 *   vhost_user_handlers.c  one handler per request (vhost_user_msg.c's table)
 *   vhost_user_mem.c       the memory table: checks and its handlers
 *   vhost_user_nic.c       the endpoint as a NIC owner; starting the NIC
 *   vhost_user_endpoint.c  endpoints, listening, connecting, status
 *   vhost_user_state.c     state files
 */
#ifndef VNIC_VHOST_USER_PRIV_H
#define VNIC_VHOST_USER_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/queue.h>
#include <time.h>
#include <unistd.h>

#include "supervisor.h"
#include "tap.h"
#include "vhost_user.h"
#include "vhost_user_msg.h"
#include "vring.h"
#include "worker_spare.h"
#include "workers/stats.h"

struct vu_ring {
	bool num_set, addr_set;
	uint32_t num;
	uint64_t desc, used, avail;   /* front-end virtual addresses */
	uint16_t base;                /* next avail index (SET_VRING_BASE or final) */
	int kick_fd, call_fd, err_fd; /* owned; -1 none */
	bool kick_polled;             /* SET_VRING_KICK without an fd: the worker polls */
	bool started;                 /* kick received, no GET_VRING_BASE since */
	bool enabled;
	bool log;                     /* SET_VRING_ADDR's VHOST_VRING_F_LOG */
	uint64_t log_addr;            /* its log_guest_addr: the used ring's gpa */
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
	/* Pair 0's worker, started at SET_OWNER for the first device start
	 * (worker_spare.h); it goes with the connection. */
	struct worker_spare spare;
	bool features_set;
	uint64_t features;
	uint64_t proto;
	struct vu_region *reg;        /* MEMTABLE_MAX_REGIONS entries */
	unsigned nreg;
	struct vu_ring *r;            /* nrings = 2 x the endpoint's max_pairs */
	unsigned nrings;
	uint64_t status;              /* SET_STATUS: the driver's bits */
	/* DEVICE_NEEDS_RESET, ORed into GET_STATUS: the device hit an error
	 * it cannot recover from (a broken queue, a configuration no worker
	 * starts on, a NIC that exhausted its restarts). SET_STATUS 0 clears it. */
	bool needs_reset;
	uint32_t mtu;                 /* NET_SET_MTU, 0: the endpoint's */
	/* The inflight region the front end keeps (GET/SET_INFLIGHT_FD;
	 * vhost_user_inflight.c): fd owned, -1 none; [inflight_offset,
	 * + inflight_size) of it, made for inflight_nq rings of inflight_qsize. */
	int inflight_fd;
	uint64_t inflight_size, inflight_offset;
	uint16_t inflight_nq, inflight_qsize;
	/* The dirty log (SET_LOG_BASE; issue 14): fd owned, -1 none. A
	 * worker logs into it while VHOST_F_LOG_ALL is acked (vu_logging). */
	int log_fd;
	uint64_t log_size, log_offset;
	/* An answer that waits: for the reap of one pair's worker
	 * (wait_pair >= 0) or of every pair's (-1); or (wait_log) for every
	 * running pair's dirty_log_set, a log changed under running workers;
	 * or (wait_call) for one pair's call_fd_set. */
	bool waiting;
	struct vu_hdr wait_hdr;
	int wait_ring;                /* GET_VRING_BASE's ring, -1: a REPLY_ACK */
	int wait_pair;                /* the pair waited for, -1: every pair */
	bool wait_log;
	bool log_want;                /* wait_log: logging asked for (not: stopped) */
	bool log_failed;              /* a worker could not map it */
	/* wait_call: the answer to a SET_VRING_CALL on a running ring waits
	 * for its pair's call_fd_set (the worker swapped its call fd). */
	bool wait_call;
	bool call_done;               /* call_fd_set came */
};

/* The worker of this connection must log: LOG_ALL acked and a log set. */
static inline bool vu_log_all(const struct vu_conn *c)
{
	return c->features_set && (c->features & (1ull << VU_F_LOG_ALL));
}

static inline bool vu_logging(const struct vu_conn *c)
{
	return vu_log_all(c) && c->log_fd >= 0;
}

/* One queue pair of an endpoint (issue 15): a NIC of its own, with its
 * own worker, tap queue and counters. Ring i belongs to pair i / 2. */
struct vu_pair {
	struct nic *nic;              /* running (or stopping); NULL: none */
	bool stopping;                /* nic_stop asked */
	unsigned gen;                 /* conn_gen at its start: whose rings it ran */
	int tap_fd;                   /* its tap queue (owned); -1 until first needed */
	bool detached;                /* its tap queue is out of the kernel's steering */
	bool log_pending;             /* a dirty log change waits for its worker */
	/* Queue counters over the endpoint's life (issue 19): each NIC (a
	 * worker session: front end, memory table, call fd ...) has its own
	 * stats page, which a crash restart keeps. The endpoint maps the
	 * current one read-only and, when the NIC is gone, adds its final
	 * counters to life[], which status adds to the next NIC's. */
	const struct stats_page *sess_stats;
	size_t sess_stats_len;
	struct stats_queue_snapshot life[NIC_NUM_QUEUES];
};

struct vu_endpoint {
	TAILQ_ENTRY(vu_endpoint) link;
	struct sup *sup;
	struct vu_config cfg;
	char ifname[16];
	int listen_fd;
	struct event *ev_listen;
	struct event *ev_retry;       /* client: next connect attempt */
	struct event *ev_resume;      /* after the NIC is gone */
	uint32_t backoff_ms;
	struct vu_conn *conn;
	unsigned conn_gen;            /* connections so far; a pair's NIC's is its gen */
	struct vu_pair *p;            /* max_pairs entries */
	unsigned max_pairs;
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
	/* Lines a front end triggers with accepted messages (dirty log
	 * changes): its own bucket, so it hides no other endpoint's. */
	struct log_ratelimit msg_rl;
};

/* Any pair with a NIC (running or stopping); any running and not stopping. */
static inline bool vu_any_nic(const struct vu_endpoint *ep)
{
	for (unsigned k = 0; k < ep->max_pairs; k++)
		if (ep->p[k].nic)
			return true;
	return false;
}

static inline bool vu_any_running(const struct vu_endpoint *ep)
{
	for (unsigned k = 0; k < ep->max_pairs; k++)
		if (ep->p[k].nic && !ep->p[k].stopping)
			return true;
	return false;
}

/* The pair of ring i's NIC, running and not stopping; NULL: none. */
static inline struct nic *vu_ring_nic(const struct vu_endpoint *ep, unsigned ring)
{
	const struct vu_pair *p = &ep->p[ring / 2];

	return p->nic && !p->stopping ? p->nic : NULL;
}

TAILQ_HEAD(vu_list, vu_endpoint);

struct vu_state {
	struct vu_list eps;
};

/* Handlers return 0 (done; REPLY_ACK 0 when asked), a negative errno
 * (refused, err filled), or VU_WAIT: the answer follows the worker's reap
 * (c->waiting is set and reading stops). */
#define VU_WAIT 1


extern struct log_ratelimit vu_rl;

/* A close-on-exec copy of fd at 3 or above (the NIC owns its own). */
static inline int dup_cloexec(int fd)
{
	return fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

static inline void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* vhost_user.c */
void vu_errorf(struct vu_endpoint *ep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* vu_wait - the answer to m waits (reading stops): for pair's reap (-1:
 * every pair's), ring (GET_VRING_BASE's, else -1) answered with its base. */
int vu_wait(struct vu_conn *c, const struct vu_msg *m, int pair, int ring);
void vu_resume_cb(evutil_socket_t fd, short what, void *arg);
void vu_conn_open(struct vu_endpoint *ep, int fd);
/* vu_conn_new - ep's connection on fd, reading; NULL when out of memory
 * (fd left open). vu_conn_open: a front end that just connected. */
struct vu_conn *vu_conn_new(struct vu_endpoint *ep, int fd);
void vu_conn_close(struct vu_endpoint *ep, const char *why);

/* vhost_user_nic.c (vu_nic_owner: vhost_user.h) */
/* vu_stop_nic - stop every pair's worker; vu_stop_pair one pair's. */
void vu_stop_nic(struct vu_endpoint *ep, uint32_t deadline_ms, const char *why);
void vu_stop_pair(struct vu_endpoint *ep, unsigned k, uint32_t deadline_ms, const char *why);
void vu_try_start(struct vu_endpoint *ep);
/* vu_tap_queue - a pair's tap queue in (on) or out of the kernel's
 * steering: out while the guest has the pair disabled (doc/multiqueue.md). */
void vu_tap_queue(struct vu_endpoint *ep, struct vu_pair *p, bool on);
/* vu_session_stats_map - map pair p's NIC's stats page read-only (the
 * session's counters, folded into life[] when the NIC goes); a failure is
 * logged and the session's counts are then not kept past it. */
void vu_session_stats_map(struct vu_endpoint *ep, struct vu_pair *p);
void vu_session_stats_unmap(struct vu_pair *p);

/* vhost_user_mem.c */
int vu_ring_gpas(const struct vu_conn *c, const struct vu_ring *r, uint64_t g[3], char *err,
		 size_t errlen);
/* vu_log_covers - every region of tab lies inside a log of log_size bytes
 * (QEMU grows the log before the table, shrinks it after). */
int vu_log_covers(const struct vu_region *tab, unsigned count, uint64_t log_size, char *err,
		  size_t errlen);
/* vu_live_log - change every running pair's log to fd (borrowed: each NIC
 * gets its own copy; -1: logging stops): the answer to m waits for their
 * dirty_log_set (VU_WAIT), or a negative errno with err filled. */
int vu_live_log(struct vu_conn *c, const struct vu_msg *m, int fd, uint64_t size, uint64_t offset,
		char *err, size_t errlen);
/* vu_log_pending - a running pair has not taken the last log change. */
bool vu_log_pending(const struct vu_endpoint *ep);
void vu_conn_forget_log(struct vu_conn *c);

/* vhost_user_handlers.c */
/* vu_reconfigure - a planned restart of every pair (a new memory table,
 * features, MTU ...); vu_reconfigure_pair of one (its ring disabled, a new
 * kick fd). VU_WAIT when a worker must be reaped first, else 0. */
int vu_reconfigure(struct vu_conn *c, const struct vu_msg *m, const char *why);
int vu_reconfigure_pair(struct vu_conn *c, const struct vu_msg *m, unsigned k, const char *why);
void vu_conn_forget_device(struct vu_conn *c);

/* vhost_user_inflight.c */
/* vu_inflight_geometry - num_queues and queue_size of an inflight region
 * in range for a connection of nrings rings; -EINVAL with err filled. */
int vu_inflight_geometry(unsigned nq, unsigned qsize, unsigned nrings, char *err, size_t errlen);
/* vu_inflight_size - bytes of a region for nq rings of qsize (geometry ok). */
uint64_t vu_inflight_size(unsigned nq, unsigned qsize);
/* vu_inflight_for_pair - pair k's block of the front end's region in spec
 * (inflight_fd a copy, to close on failure; inflight_len 0 when the pair
 * has none: vnicd's own region), initialised if the front end cleared it.
 * Returns 0, or a negative errno with err filled (the pair cannot start). */
int vu_inflight_for_pair(struct vu_conn *c, unsigned k, struct nic_spec *spec, char *err,
			 size_t errlen);

/* vhost_user_state.c */
void vu_state_path(const struct sup *s, const char *id, char *buf, size_t len);
int vu_state_save(struct sup *s, const struct vu_config *cfg, char *err, size_t errlen);

/* vhost_user_endpoint.c */
/* vu_find - the endpoint with this id, or NULL. */
struct vu_endpoint *vu_find(struct sup *s, const char *id);
void vu_client_schedule(struct vu_endpoint *ep);
void vu_finish_remove(struct vu_endpoint *ep);
/* vu_endpoint_adopt - an endpoint handed over by an upgrade in place
 * (vhost_user_handover.c): cfg as it was, its listener (server), no
 * connection yet, in the list; no socket bound, no tap opened, no state
 * file written. NULL when out of memory (err filled; nothing closed). */
struct vu_endpoint *vu_endpoint_adopt(struct sup *s, const struct vu_config *cfg,
				      unsigned max_pairs, const char *ifname, int listen_fd,
				      char *err, size_t errlen);

#endif
