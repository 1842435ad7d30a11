/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnicd, the supervisor: the only privileged process.
 *
 * One libevent loop (EVENT_BASE_FLAG_NOLOCK, single thread) carries:
 *  - the control socket listener (main.c) and one struct vmm_conn per
 *    connected VMM or vnicctl (vmm_conn.c, requests in vmm_handlers.c);
 *  - one struct nic per NIC (nic.c): its worker process, watched through
 *    a pidfd, and its control socketpair, whose messages pass the
 *    permission table in monitor.c;
 *  - SIGTERM/SIGINT: stop every worker, reap, remove the socket, exit 0.
 *
 * The supervisor never maps guest memory and never parses rings; it
 * validates requests (validate.c) and holds the fds a NIC needs so that a
 * worker can be started (and, in a later issue, restarted) on them.
 */
#ifndef VNIC_SUPERVISOR_H
#define VNIC_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <time.h>

#include <event2/event.h>

#include "log.h"
#include "nic_state.h"
#include "uidrange.h"
#include "validate.h"
#include "wire.h"
#include "worker_spawn.h"

struct stats_page;
struct stats_queue_snapshot;

/* glibc's <sys/queue.h> lacks the BSD _SAFE iterator. */
#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	     (var) && ((tvar) = TAILQ_NEXT(var, field), 1);		\
	     (var) = (tvar))
#endif

/* Limits (each a resource bound, TESTPLAN promise 4). */
#define SUP_MAX_NICS 8192           /* NICs (queue pairs: a struct nic and a worker
				       each) per supervisor; the fd limit decides below it */
#define SUP_MAX_CONNS 128           /* connected clients */
#define SUP_CONN_MAX_ERRORS 32      /* consecutive bad frames before we drop a peer */
#define SUP_CONN_FRAMES_PER_WAKE 32 /* frames read per wake-up, for fairness */
#define SUP_CONN_OUTQ_MAX 256       /* queued replies/events before we drop a peer */
#define SUP_READY_TIMEOUT_MS 5000   /* worker: exec to READY */
#define SUP_STOP_DEFAULT_MS 5000    /* RemoveNic deadline when the VMM gives 0 */
#define SUP_STOP_MAX_MS 60000       /* largest RemoveNic deadline we accept */
#define SUP_SHUTDOWN_STOP_MS 3000   /* per-worker deadline on SIGTERM */
#define SUP_CTRL_GRACE_MS 1000   /* RUNNING worker without its channel: then SIGKILL */
#define SUP_STATUS_PAGE 32          /* NICs per StatusReply (keeps replies < 64 KiB) */
#define SUP_MTU_DEFAULT 1500

/* fd budgets (issue 11 item 1, limits.c): derived at start from
 * RLIMIT_NOFILE, raised to its hard limit. SUP_MAX_NICS and SUP_MAX_CONNS
 * above are ceilings; the limits in struct sup_limits apply. */
#define SUP_FD_RESERVE 32        /* vnicd's own: listener, epoll, signals, log, a tap */
#define SUP_NIC_OWN_FDS 4        /* per NIC (queue pair): the worker's memfd (stats page and
				    inflight region), ctrl, pidfd, and a tap vnicd opened */
#define SUP_NIC_MIN_VMM_FDS 5    /* per NIC from the VMM: 4 eventfds, and a memfd (shared
				    by the pairs of a device) or a backend */
#define SUP_CONN_NICS_MIN 4      /* a connection may always have this many NICs */
#define SUP_ACCEPT_RETRY_MS 100  /* listener off this long after EMFILE & co. */
#define SUP_ORPHAN_WAIT_MS 5000  /* at start: an earlier vnicd's workers, then SIGKILL */

/* Liveness watchdog (issue 11 item 9, watchdog.c). */
#define SUP_WATCHDOG_MS 500      /* how often heartbeats are compared */
#define SUP_STALL_MS 3000        /* no heartbeat this long, with work pending: STALLED (above
                                    the 1.5 s delays of the lifecycle suite's faults) */

struct sup_limits {
	uint64_t nofile;     /* RLIMIT_NOFILE after raising it */
	unsigned max_conns;  /* connected clients */
	unsigned max_nics;   /* NICs in all */
	unsigned nic_fds;    /* fds all NICs may hold: their own and their VMMs' */
	unsigned conn_fds;   /* ... one connection's NICs */
	unsigned conn_nics;  /* NICs of one connection */
};

/* Crash restart policy (issue 5, guarantee 3). A worker that dies while
 * its NIC is RUNNING (or while its replacement starts) is restarted on
 * the same fds. The k-th death within SUP_RESTART_WINDOW_MS waits
 * 0 ms (k = 1), then SUP_RESTART_BACKOFF_FIRST_MS doubling per death up to
 * SUP_RESTART_BACKOFF_MAX_MS before the next start; one more death than
 * the limit (--restart-max, default SUP_RESTART_MAX_DEFAULT) within the
 * window leaves the NIC FAILED, with no more restarts. A sandbox violation
 * is a death like any other and counts. */
#define SUP_RESTART_MAX_DEFAULT 5
#define SUP_RESTART_MAX_LIMIT 64        /* largest --restart-max */
/* --upgrade-nice: the nice value an upgrade in place runs at (handover.c;
 * doc/design.md "Upgrade in place"); 0: vnicd's own. */
#define SUP_UPGRADE_NICE_DEFAULT 10
/* Queue pairs a vhost-user endpoint serves unless --max-queue-pairs says
 * (doc/multiqueue.md): a pair costs nothing until its rings are set up. */
#define SUP_PAIRS_DEFAULT 8u
#define SUP_RESTART_WINDOW_MS 60000
#define SUP_RESTART_BACKOFF_FIRST_MS 100
#define SUP_RESTART_BACKOFF_MAX_MS 5000

/* NIC states and their one transition table: nic_state.h. Every
 * transition goes through nic_set_state(), which checks and logs it. */

struct sup;
struct vmm_conn;
struct nic;
struct vu_state;

/* How an operation the owner asked for ended (no protobuf here: each
 * owner maps it to its own protocol). */
enum nic_result {
	NIC_RES_OK = 0,
	NIC_RES_UNAVAILABLE,   /* the worker could not start / exited first */
	NIC_RES_DEADLINE,      /* the worker missed its stop deadline: killed, reaped */
};

/*
 * A NIC's owner: who created it and hears what happens to it. nic.c knows
 * only this table; the protobuf control channel (vmm_handlers.c) is one
 * owner, a vhost-user endpoint (vhost_user.c) another. Every callback may
 * be NULL. The owner pointer is n->owner; nic_detach_owner() clears it.
 *  added         - the first worker is READY (NIC_RES_OK), or the start
 *                  failed (the NIC is freed right after)
 *  removed       - a stop the owner asked for (nic_stop with
 *                  remove_pending) finished: the worker is reaped
 *  policy_set    - the owner's pending SetPolicy was applied or failed
 *  policy_changed - a SetPolicy (the owner's or an administrator's) was
 *                  applied: n->policy is the NIC's policy from now on
 *  failed        - the worker died (restart or FAILED follows)
 *  restarted     - a replacement worker is READY
 *  state_changed - every transition once added(OK) was called
 *  queue_reset   - the worker reported a broken queue
 *  stalled       - the watchdog killed a worker that stopped answering
 *  gone          - the NIC is about to be freed (last call)
 *  dirty_log_set - the owner's nic_set_dirty_log took effect (OK: the
 *                  worker logs into the new log, or logging stopped) or
 *                  failed (the NIC's log is then none)
 *  call_fd_set   - the owner's nic_set_call_fd took effect: no interrupt
 *                  of the queue goes to the old call fd any more (OK), or
 *                  the NIC failed or went (UNAVAILABLE); either way the
 *                  NIC's queue has the new fd for every later worker
 *  counters_base - optional: add to a queue's counters what the owner kept
 *                  of earlier NICs it stands for (vhost-user: a NIC per
 *                  worker session, one endpoint), so that status counters
 *                  only grow; never gauges (window, broken)
 */
struct nic_owner_ops {
	const char *kind;
	void (*added)(struct nic *n, enum nic_result r, const char *error);
	void (*removed)(struct nic *n, enum nic_result r, const char *error);
	void (*policy_set)(struct nic *n, enum nic_result r, const char *error);
	void (*policy_changed)(struct nic *n);
	void (*failed)(struct nic *n, int sig, int exit_status, int syscall_nr);
	void (*restarted)(struct nic *n);
	void (*state_changed)(struct nic *n, enum nic_state old, enum nic_state st,
			      const char *why);
	void (*queue_reset)(struct nic *n, uint32_t queue, const char *reason);
	void (*stalled)(struct nic *n, uint64_t silent_ms);
	/* The worker reported Stopped: it reads and writes nothing more,
	 * backend included, and exits next (gone follows its reap). */
	void (*stopped)(struct nic *n);
	void (*gone)(struct nic *n);
	void (*counters_base)(const struct nic *n, int slot, struct stats_queue_snapshot *s);
	void (*dirty_log_set)(struct nic *n, enum nic_result r, const char *error);
	void (*call_fd_set)(struct nic *n, enum nic_result r, const char *error);
};

/* Per-NIC log buckets (nic_log.c). */
enum nic_rl {
	NIC_RL_WORKER_LOG,   /* Log messages the worker relays: 50 per 5 s */
	NIC_RL_QUEUE_BROKEN, /* QueueBroken reports: 10 per 5 s */
	NIC_RL_DIRTY_LOG,    /* dirty log changes (an owner may toggle at will): 20 per 5 s */
	NIC_RL_ANNOUNCE,     /* Announce failures (an owner may ask at will): 20 per 5 s */
	NIC_RL_COUNT,
};
#define NIC_RL_WINDOW_MS 5000
#define NIC_RL_WORKER_LOG_BURST 50
#define NIC_RL_QUEUE_BROKEN_BURST 10
#define NIC_RL_DIRTY_LOG_BURST 20
#define NIC_RL_ANNOUNCE_BURST 20

struct nic_queue {
	uint32_t index;   /* virtqueue index (slot from nic_queue_slot) */
	uint32_t size;
	uint64_t desc, avail, used;
	uint32_t avail_idx;
	int kick_fd, call_fd;       /* owned */
	bool polled;                /* no kicks come: the worker polls (worker.proto) */
	/* Final indices from the worker's Stopped message. */
	bool final_valid;
	uint32_t final_avail, final_used;
	/* A QueueBroken report from the worker (also in the stats page). */
	bool broken;
	char broken_reason[160];
};

/* Guest memory's memfds, shared by the pairs of one device (issue 15): a
 * NIC of P pairs holds one fd per region, not P. The pairs that refer to
 * it (refs) are those whose tables are the same regions of the same files;
 * the last one closes the fds. `counted` is the one pair whose fd budget
 * (limits.c) counts them. */
struct nic_mem {
	unsigned refs;
	struct nic *counted;
	unsigned n;
	struct memtable_region_desc r[]; /* fds owned */
};

struct nic {
	TAILQ_ENTRY(nic) link;
	struct sup *sup;
	const struct nic_owner_ops *ops; /* the owner's callbacks */
	void *owner;                /* the owner's object; NULL once detached */
	char id[VALIDATE_ID_MAX + 1];
	uint32_t pair;              /* the queue pair it serves (issue 15): nic_vq */
	enum nic_state state;

	/* Configuration, as validated. */
	uint8_t mac[6];
	uint32_t mtu;
	uint64_t features;
	struct vnic_policy policy;
	enum nic_backend_type backend;
	char ifname[32];            /* tap: the kernel's name */
	char netns[64];
	struct nic_mem *mem;        /* guest memory, maybe shared with sibling pairs;
				       NULL once closed (nic_regions, nic_nregions) */
	struct nic_queue q[NIC_NUM_QUEUES];   /* by slot: use nic_vq() */
	int backend_fd;             /* owned */
	bool memory_unsealed_ok;    /* vhost-user memory (worker.proto Config) */
	bool base_from_used_idx;    /* vhost-user resumption (worker.proto Config) */

	/* Stats page: a memfd shared with the worker, read lock-free here. */
	int stats_fd;
	struct stats_page *stats;
	size_t stats_len;

	/* Inflight region (shm/inflight.h): in the stats page's memfd at
	 * inflight_off (a page boundary), made and initialised at AddNic,
	 * described in every Config (first start and each restart), so a
	 * restarted worker returns exactly once every chain its predecessor
	 * popped. Length 0 with --inflight=off. vnicd never maps it after the
	 * initialisation. With inflight_fd >= 0 (owned) the region is in that
	 * memfd instead: a vhost-user front end's (GET/SET_INFLIGHT_FD), or
	 * with inflight_file a file of the state directory (inflight_file.h),
	 * which the NIC removes when it ends. */
	int inflight_fd;
	bool inflight_file;
	uint64_t inflight_off;
	size_t inflight_len;

	/* Dirty log (issue 14): the memfd this NIC's workers log into, in
	 * every Config (first start and each restart) once set; -1 and size
	 * 0: no logging. Changed by nic_set_dirty_log only. */
	int log_fd;
	uint64_t log_size, log_offset;
	bool log_pending;           /* the owner awaits dirty_log_set() */
	bool log_sent;              /* SetDirtyLog sent to this worker, DirtyLogSet awaited */
	bool log_in_config;         /* this worker's Config carried the current log */

	/* A call eventfd swapped under a running worker (nic_set_call_fd),
	 * one at a time: the new fd is already the queue's call_fd. */
	bool call_pending;          /* the owner awaits call_fd_set() */
	bool call_sent;             /* SetCallFd sent to this worker, CallFdSet awaited */
	bool call_in_config;        /* this worker's Config carried the new fd */
	uint32_t call_queue;        /* the virtqueue index of the pending swap */
	unsigned call_early;        /* SetCallFds sent before READY, their CallFdSets due */

	/* Worker. pid 0 when there is none. */
	struct worker_proc w;
	struct timespec t_spawn;    /* this worker's fork */
	uint64_t start_us;          /* the last worker's spawn -> READY */
	struct event *ev_ctrl;      /* worker control socket readable */
	struct event *ev_exit;      /* pidfd readable: the worker exited */
	struct event *ev_timer;     /* READY or Stop deadline */
	bool sandboxed;
	bool ready_seen, stopped_seen;
	bool ever_ready;            /* some worker of this NIC became READY (ran its rings) */
	bool kill_sent;
	bool ctrl_closed;           /* the worker closed its control socket */
	char exit_desc[160];

	/* Requests waiting for this NIC (the owner's request ids). */
	bool add_pending;
	uint64_t add_req;
	bool announced;             /* AddNic was answered OK: events flow */
	bool remove_pending;
	uint64_t remove_req;
	bool policy_pending;        /* SetPolicy sent to the worker, PolicySet awaited */
	uint64_t policy_req;
	unsigned policy_conn_id;    /* an administrator's connection asked (admin.c); 0: the owner */
	struct vnic_policy policy_new;
	uint32_t policy_switches;   /* SetPolicy requests a worker applied */
	struct timespec remove_t0;
	bool deadline_missed;

	struct timespec t_running;  /* for uptime */
	uint32_t restarts;          /* completed restarts (status, NicRestarted) */
	/* Restart policy state: when the recent deaths happened (a ring of
	 * the last SUP_RESTART_MAX_LIMIT + 1), when the running worker's
	 * death was noticed (restart time = that -> new READY). */
	struct timespec deaths[SUP_RESTART_MAX_LIMIT + 1];
	unsigned ndeaths;           /* entries used in deaths[] (oldest first) */
	struct timespec t_died;
	uint64_t hb_last;           /* watchdog: last heartbeat seen, and when */
	struct timespec hb_t;
	pid_t hb_pid;               /* the worker hb_last belongs to */
	unsigned mon_once;          /* monitor.c: ONCE rows seen from this worker (bit per row) */
	uint64_t restart_us;        /* the last restart's death -> READY */
	char last_error[192];
	/* The uid and gid its workers run as (supervisor/uidrange.c); 0:
	 * none allocated (--sandbox=off). Kept across restarts. */
	uint32_t worker_uid, worker_gid;
	char worker_user[24];       /* "UID:GID" for --user, "" when not from the range */
	/* Log rate limits of this NIC's guest- or worker-triggered lines
	 * (nic_log.c): its own buckets, so a flood hides no other NIC. */
	struct log_ratelimit rl[NIC_RL_COUNT];
	bool rl_ready;
};

TAILQ_HEAD(nic_list, nic);

/* The NIC's guest memory regions (its nic_mem), none once closed. */
static inline unsigned nic_nregions(const struct nic *n)
{
	return n->mem ? n->mem->n : 0;
}

static inline const struct memtable_region_desc *nic_regions(const struct nic *n)
{
	return n->mem ? n->mem->r : NULL;
}

struct outframe {
	STAILQ_ENTRY(outframe) link;
	size_t len;
	uint8_t data[];
};

struct vmm_conn {
	TAILQ_ENTRY(vmm_conn) link;
	struct sup *sup;
	int fd;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	unsigned id;               /* for log lines */
	struct event *ev_read;
	struct event *ev_write;    /* armed only while outq is not empty */
	STAILQ_HEAD(, outframe) outq;
	unsigned outq_len;
	bool hello_done;
	uint32_t version;
	unsigned errors;           /* consecutive bad frames */
	bool closing;
	bool in_dispatch;          /* replies wait for the frame's fds to close */
};

TAILQ_HEAD(conn_list, vmm_conn);

struct sup {
	struct event_base *base;
	const char *socket_path;
	const char *worker_path;
	const struct worker_ops *wops; /* NULL: worker_ops_process (sup_wops) */
	bool have_group;
	gid_t group;
	const char *group_name;
	int listen_fd;
	bool socket_activated;        /* listen_fd came from LISTEN_FDS: never unlinked */
	struct event *ev_listen;
	struct event *ev_sigterm, *ev_sigint, *ev_sighup;
	/* Configuration file (daemon.h), re-read on SIGHUP. */
	const char *conf_path;
	bool conf_explicit;           /* --config given: it must exist */
	bool level_from_cmdline;      /* --log-level given: wins at start */
	enum log_level start_level;
	struct event *ev_shutdown;    /* backstop timer during shutdown */
	struct event *ev_notify;      /* sd_notify STATUS refresh (sdnotify.c) */
	char notify_status[300];      /* the last STATUS= sent */
	struct conn_list conns;
	struct nic_list nics;
	unsigned nnics;
	unsigned nconns;
	unsigned next_conn_id;
	bool shutting_down;
	/* vhost-user endpoints (vhost_user.c) and where they are saved
	 * (--state-dir; NULL: nowhere). */
	struct vu_state *vu;
	const char *state_dir;
	/* Called whenever a NIC is freed (main.c: exit once shutdown is done). */
	void (*nic_gone)(struct sup *s);
	/* Answers an administrator's SetPolicy on another's NIC (vmm_handlers.c). */
	void (*admin_policy_set)(struct nic *n, enum nic_result r, const char *error);
	struct sup_limits lim;        /* limits.c */
	struct event *ev_accept_retry;
	bool accept_paused;           /* listener out of the loop after EMFILE */
	uint64_t accept_pauses;
	struct event *ev_watchdog;    /* watchdog.c */
	/* Worker options (issue 4): --user (NULL: the worker's default) and
	 * --sandbox=off (debugging only, loud). */
	const char *worker_user;
	uint32_t worker_user_uid, worker_user_gid; /* --user's ids, for status */
	bool sandbox_off;
	/* A uid and gid per NIC from --uid-range (uidrange.h); off with
	 * --user or --sandbox=off. */
	bool uid_per_nic;
	struct uidrange uids;
	/* Pre-started workers killed and not yet reaped (worker_spare.c):
	 * reaped from their pidfd's event, the rest at exit. NULL: none. */
	struct worker_spare_dying *spares_dying;
	unsigned restart_max;         /* --restart-max; 0: never restart */
	unsigned max_pairs;           /* --max-queue-pairs: a vhost-user endpoint's pairs */
	int upgrade_nice;             /* --upgrade-nice: 0..19, 0: no change */
	bool inflight_off;            /* --inflight=off: no region (for measuring its cost) */
	bool fd_store;                /* --fd-store: systemd's store keeps every fd */
	/* Upgrade in place (handover.h): set by handover_set_exec; NULL: this
	 * vnicd cannot (the fuzz targets). upgrades: so far in this process. */
	int (*upgrade)(struct sup *s, struct vmm_conn *c, uint64_t request_id, char *err,
		       size_t errlen);
	unsigned upgrades;
	/* vnicd is about to read from this connection or worker channel, or
	 * to send to this worker (NULL: nobody asks); the fd store's journal
	 * (fdstore.h). Call through sup_note_io. */
	void (*on_io)(struct sup *s, int fd);
#ifdef VNIC_FAULT_INJECTION
	/* VNIC_FAULT's worker entries, for the first launch of each worker
	 * (of fault_nic only, when set); see common/fault.h. */
	char fault_worker[WORKER_FAULT_SPEC_MAX + 1];
	char fault_nic[VALIDATE_ID_MAX + 1];
#endif
};

/* sup_note_io - vnicd reads from fd or sends to a worker on fd now. */
static inline void sup_note_io(struct sup *s, int fd)
{
	if (s->on_io)
		s->on_io(s, fd);
}

/* sup_wops - how s starts, kills and reaps its workers (worker_spawn.h). */
static inline const struct worker_ops *sup_wops(const struct sup *s)
{
	return s->wops ? s->wops : &worker_ops_process;
}

/* vmm_conn.c */
void vmm_conn_accept(evutil_socket_t fd, short what, void *arg);
struct vmm_conn *vmm_conn_free(struct vmm_conn *c);
/* vmm_conn_send - queue one message to the peer (replies, events). A peer
 * that stops reading is dropped once SUP_CONN_OUTQ_MAX frames wait. */
void vmm_conn_send(struct vmm_conn *c, const Vnic__Vmm__VmmMessage *m);
/* vmm_conn_reply - send *r, whose body the caller has set (body_case and
 * its arm), with this header: @error is copied (at most 255 bytes; NULL is
 * none). vmm_conn_reply_error sends a Reply with no body. */
void vmm_conn_reply(struct vmm_conn *c, Vnic__Vmm__Reply *r, uint64_t request_id,
		    Vnic__Vmm__Status code, const char *error);
void vmm_conn_reply_error(struct vmm_conn *c, uint64_t request_id,
			  Vnic__Vmm__Status code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* vmm_handlers.c: one function per request; see the table in vmm_conn.c. */
void vmm_handle_hello(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds);
void vmm_handle_add_nic(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds);
void vmm_handle_remove_nic(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds);
void vmm_handle_get_status(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds);
void vmm_handle_set_policy(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds);
void vmm_handle_set_dirty_log(struct vmm_conn *c, const Vnic__Vmm__Request *r,
			      struct wire_fds *fds);
/* admin.c */
void vmm_handle_set_log_level(struct vmm_conn *c, const Vnic__Vmm__Request *r,
			      struct wire_fds *fds);
void vmm_handle_add_vhost_user(struct vmm_conn *c, const Vnic__Vmm__Request *r,
			       struct wire_fds *fds);
void vmm_handle_remove_endpoint(struct vmm_conn *c, const Vnic__Vmm__Request *r,
				struct wire_fds *fds);
/* The control channel as a NIC owner (n->owner is the vmm_conn). */
extern const struct nic_owner_ops vmm_nic_owner;
/* vmm_pair_groups_drop - forget c's requests over several queue pairs
 * (AddNic, RemoveNic) that wait for their pairs: c is going away. */
void vmm_pair_groups_drop(const struct vmm_conn *c);

/* nic.c */
/* nic_find - a NIC with that id (of a device with several queue pairs,
 * one of its pairs' NICs); nic_find_pair - the NIC of that pair. */
struct nic *nic_find(struct sup *s, const char *id);
struct nic *nic_find_pair(struct sup *s, const char *id, uint32_t pair);
struct nic_queue *nic_vq(struct nic *n, uint32_t index);
/* nic_set_state - the one way to change state: checks the transition
 * table (a refused one is logged at error level and returns -EINVAL, the
 * state unchanged), logs "nic ID: OLD -> NEW: why", and tells the owner
 * (NicStateChanged) once its AddNic was answered. */
int nic_set_state(struct nic *n, enum nic_state st, const char *why);
/* nic_worker_ready - READY from the current worker (monitor.c): Start it;
 * STARTING answers AddNic, RESTARTING announces NicRestarted.
 * Returns: 0, or -1 when the worker must be killed (reason in last_error). */
int nic_worker_ready(struct nic *n, bool sandboxed);
/* nic_policy_resolve - fill in defaults so a worker gets concrete values. */
void nic_policy_resolve(struct vnic_policy *p);
/* nic_start - adopt the validated spec's fds (set to -1 in the frame;
 * fds == NULL: the spec's fds are the caller's own and pass to the NIC
 * as they are, lay unused), open the backend, spawn the worker, send
 * Config; the owner's added() follows on READY or failure. Returns 0 or
 * a negative errno with err filled (then nothing was adopted and no NIC
 * exists). */
int nic_start(struct sup *s, const struct nic_owner_ops *ops, void *owner, uint64_t request_id,
	      const struct nic_spec *spec, struct wire_fds *fds,
	      const struct wire_fd_layout *lay, char *err, size_t errlen);
/* sup_read_guest_u16 - the little-endian u16 at gpa of the guest memory
 * r[0..nr) describes, with pread (nothing mapped, so memory a front end
 * shrank is a short read, not SIGBUS). 0, -EIO, or -EFAULT: not in r. */
int sup_read_guest_u16(const struct memtable_region_desc *r, unsigned nr, uint64_t gpa,
		       uint16_t *v);

/* nic_set_dirty_log - live migration (issue 14): adopt fd as the NIC's
 * dirty log (size and offset already checked by validate_dirty_log), or
 * stop logging with fd -1. A running worker gets SetDirtyLog, and the
 * owner's dirty_log_set() follows its DirtyLogSet; with no worker running
 * (starting, restarting) the next Config carries the log and
 * dirty_log_set() is called at once. Every later worker of the NIC (crash
 * restarts) gets the log in its Config.
 * Returns: 0 (fd adopted), or -EBUSY with err filled when a change is
 * still pending (fd not adopted, nothing changed). */
int nic_set_dirty_log(struct nic *n, int fd, uint64_t size, uint64_t offset, char *err,
		      size_t errlen);
/* nic_announce - after a live migration: a RARP broadcast from the NIC's
 * MAC out of its backend (announce.h), in any state of the NIC.
 * Returns: 0, or a negative errno with err filled. */
int nic_announce(struct nic *n, char *err, size_t errlen);
/* nic_set_policy - apply @p (validated, resolved) to the NIC. A running
 * worker gets SetPolicy; the owner's policy_set() follows its PolicySet,
 * with @req as policy_req, or, with an @admin_conn_id and
 * sup->admin_policy_set set by the caller, the administrator's
 * admin_policy_set (without the hook the owner's policy_set() answers).
 * Between two workers of a RESTARTING NIC the next one starts with it.
 * Returns: 0 (applied when the worker confirms), 1 (applied now), or with
 * err filled: -EBUSY (a SetPolicy is in progress), -EAGAIN (the NIC is
 * not running), -EIO (the worker cannot be reached). */
int nic_set_policy(struct nic *n, const struct vnic_policy *p, uint64_t req,
		   unsigned admin_conn_id, char *err, size_t errlen);
/* nic_set_call_fd - adopt fd (an eventfd) as the call fd of virtqueue
 * index, closing the old one, with no restart. A running worker gets
 * SetCallFd, and the owner's call_fd_set() follows its CallFdSet; with no
 * worker running the next Config carries the fd and call_fd_set() is
 * called at once; so it is for a worker not yet READY, which gets
 * SetCallFd ahead of its Start.
 * Every later worker of the NIC (crash restarts) gets the new fd.
 * Returns: 0 (fd adopted), or -EBUSY (a swap still pending) or -ERANGE
 * (no such queue) with err filled (fd not adopted, nothing changed). */
int nic_set_call_fd(struct nic *n, uint32_t index, int fd, char *err, size_t errlen);
/* nic_stop - begin a stop: Stop to the worker and a deadline, or a kill
 * for a worker not yet READY; a NIC with no worker is freed at once. */
void nic_stop(struct nic *n, uint32_t deadline_ms, const char *why);
/* nic_detach_owner - the owner went away: stop each of its NICs. */
void nic_detach_owner(struct sup *s, void *owner);
/* Tell the owner (each checks and clears the matching pending flag). */
void nic_notify_removed(struct nic *n, enum nic_result r, const char *error);
void nic_notify_policy_set(struct nic *n, enum nic_result r, const char *error);
void nic_notify_queue_reset(struct nic *n, uint32_t queue, const char *reason);
void nic_notify_stopped(struct nic *n);
void nic_notify_dirty_log_set(struct nic *n, enum nic_result r, const char *error);
void nic_notify_call_fd_set(struct nic *n, enum nic_result r, const char *error);
/* nic_ctrl_closed - a RUNNING worker closed its control socket: kill it
 * unless it exits within SUP_CTRL_GRACE_MS. */
void nic_ctrl_closed(struct nic *n);
/* nic_free_all - at exit, after every worker is reaped (or given up on). */
void nic_free_all(struct sup *s);
/* nic_read_queue - lock-free copy of one queue's counters. */
struct stats_queue_snapshot;
void nic_read_queue(const struct nic *n, int slot, struct stats_queue_snapshot *out);
uint64_t nic_uptime_s(const struct nic *n);

/* nic_log.c: the NIC's own bucket for lines of kind @which. */
struct log_ratelimit *nic_log_ratelimit(struct nic *n, enum nic_rl which);

/* monitor.c: messages from a worker, through the permission table. */
void monitor_ctrl_cb(evutil_socket_t fd, short what, void *arg);


/* limits.c (issue 11 item 1) */
/* sup_limits_derive - every bound from an fd limit (pure; see limits.c). */
void sup_limits_derive(uint64_t nofile, struct sup_limits *l);
/* sup_limits_init - raise RLIMIT_NOFILE to its hard limit, derive s->lim. */
void sup_limits_init(struct sup *s);
/* sup_budget_check - may connection c add nnics NICs (a NIC's queue pairs,
 * each a struct nic) carrying nfds fds in all?
 * Returns: 0, or -ENOSPC with err filled (answer RESOURCE_EXHAUSTED). */
int sup_budget_check(struct sup *s, const struct vmm_conn *c, unsigned nnics, unsigned nfds,
		     char *err, size_t errlen);
/* sup_accept_pause - accept failed with errnum (EMFILE & co.): listener
 * off, back after SUP_ACCEPT_RETRY_MS or at sup_accept_resume. */
void sup_accept_pause(struct sup *s, int errnum);
/* sup_accept_resume - an fd was freed: listen again (no-op if not paused). */
void sup_accept_resume(struct sup *s);

/* watchdog.c (issue 11 item 9) */
/* sup_watchdog_start - the periodic heartbeat check of every worker. */
int sup_watchdog_start(struct sup *s);
/* nic_close_vmm_fds (nic.c) - close the NIC's memfds, eventfds, backend,
 * stats page and inflight region now (before a reply that says they are
 * free); nic_free closes nothing twice. */
void nic_close_vmm_fds(struct nic *n);
/* nic_alloc (nic.c) - a zeroed NIC of s holding no fd (every fd field
 * -1), in no table: the start of nic_start's NICs and of a handover's.
 * nic_handover_adopt - a NIC rebuilt from an upgrade's handover
 * (handover.c; the caller set every field): its events, its stats page
 * mapped, its uid taken, into the table. Returns 0, or -ENOMEM with err
 * filled and nothing closed. */
struct nic *nic_alloc(struct sup *s);
int nic_handover_adopt(struct nic *n, char *err, size_t errlen);
/* vmm_conn_new (vmm_conn.c) - connection id on fd, peer pid/uid/gid, in
 * s's list, its events made but not added (ev_read or ev_write NULL when
 * out of memory: the caller checks); NULL when out of memory (fd left
 * open). vmm_conn_accept's and a handover's. */
struct vmm_conn *vmm_conn_new(struct sup *s, int fd, pid_t pid, uid_t uid, gid_t gid,
			      unsigned id);
void vmm_handle_upgrade(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds);
void vmm_handle_announce(struct vmm_conn *c, const Vnic__Vmm__Request *r, struct wire_fds *fds);
/* nic_stalled (nic.c) - the worker stopped beating: STALLED, kill; its
 * reap restarts it under the usual backoff. */
void nic_stalled(struct nic *n, uint64_t silent_ms);

#endif
