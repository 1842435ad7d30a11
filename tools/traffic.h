/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * traffic: the run behind vnic-bench traffic (bench_traffic.c) and
 * hostile (bench_hostile.c), private to them and to the traffic_*.c files.
 *
 * One thread plays every guest and every host end. Per NIC the "VMM"
 * (guest.c) makes sealed memfd guest memory, rings and eventfds, and sends
 * AddNic. The host end is the other half of a SOCK_SEQPACKET socketpair
 * (socket backend) or a UDP socket inside the network namespace where
 * vnicd created the tap (tap backend), or on the peer of the veth end
 * vnicd binds an AF_PACKET socket to (afpacket backend).
 *
 * Every frame carries (nic, direction, seq, length) and a pattern derived
 * from them; the receiver checks every byte and records each seq in a
 * bitmap, so loss, duplication and corruption are all counted. Senders keep
 * at most --window frames (and TR_WINDOW_BYTES) in flight per direction and
 * NIC: the host kernel drops rather than blocks on a full UDP receive
 * buffer or tap queue, and the window keeps the test's rate below that.
 *
 * The files, in the order a run goes through them:
 *   traffic_run.c        setup (AddNic per NIC), vnicd's events, the loop,
 *                        teardown; options both subcommands take
 *   traffic_backend.c    the host end: a socketpair, or a tap in a netns
 *   traffic_flow.c       the flows: frames built, sent, received, checked
 *   traffic_lifecycle.c  unplug, disconnect, stalled backend, the canary
 *   traffic_report.c     after the loop: losses, counters, RESULT lines
 *   traffic_dirtylog.c   --dirty-log: a log per NIC (issue 14), and after
 *                        RemoveNic every page the worker changed logged
 */
#ifndef VNIC_TRAFFIC_H
#define VNIC_TRAFFIC_H

#include <net/if.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench.h"
#include "libvnic.h"

#define TR_MAX_NICS 64u                      /* lanes (NICs x pairs) */
#define TR_STALL_NS (5ull * 1000000000ull)   /* no progress for 5 s: stall */
#define TR_DRAIN_NS (5ull * 1000000000ull)   /* after sending: wait this long */
#define TR_CPU_SAMPLE_NS 100000000ull        /* worker CPU sampled every 100 ms */
#define TR_COUNTER_WAIT_NS 2000000000ull     /* counters settle within 2 s */
#define TR_RESET_BOUND_NS 2000000000ull      /* hostile: needs-reset within 2 s */
#define TR_HARD_EXTRA_NS (30ull * 1000000000ull) /* the loop's absolute bound */
#define TR_BURST 64u                         /* frames per sender per round */
/* In flight per NIC and direction: frames below a tap's default queue
 * (txqueuelen 1000), bytes well below the UDP receive buffer we force
 * (64 MiB, counted at up to twice the frame size: skb truesize). */
#define TR_DEFAULT_WINDOW 768u
#define TR_WINDOW_BYTES (16ull << 20)
/* AF_PACKET: the kernel drops what its 4 MiB RX ring cannot take
 * (afp_ring.h): 192 frames of up to 16 KiB fit, block ends included. */
#define TR_AFP_WINDOW 192u
#define TR_NS 1000000000.0
#define TR_CANARY_NS 200000000ull            /* canary must hold this long */
#define TR_GONE_BOUND_NS (15ull * 1000000000ull) /* disconnect: worker gone by then */

/* TR_AFP: AF_PACKET on one end of a veth pair in the run's netns, the
 * host end (n->tap) the other; the host side as for a tap. */
enum tr_backend { TR_SOCKET, TR_TAP, TR_AFP };

/* What the hostile guest posts on its tx0 (TESTPLAN ids). */
enum tr_kind {
	TR_KIND_LOOP,     /* G1: two descriptors pointing at each other */
	TR_KIND_SELFLOOP, /* G1: one zero-length descriptor pointing at itself */
	TR_KIND_BADHEAD,  /* G3: an avail entry >= queue size */
	TR_KIND_OOB,      /* G7: a descriptor past the end of guest memory */
};

struct tr_flow {
	bool on;
	uint64_t limit;             /* frames to send, UINT64_MAX: until time */
	uint64_t sent, sent_bytes;  /* handed to the transport */
	uint64_t recv, recv_bytes;  /* received, checked, first time */
	uint64_t dup, corrupt, ooo, next_seq;
	uint64_t recv_at_reset;     /* hostile: recv when the victim broke */
	uint8_t *seen;              /* bitmap of received seqs */
	size_t seen_cap;            /* bits */
	uint64_t first_ns, last_ns; /* first and last frame received */
};

/*
 * A lane: one queue pair of one NIC, with its own guest memory, rings,
 * host end and flows (--queue-pairs P gives every NIC P lanes; frames
 * carry the lane's idx, so a frame delivered on the wrong pair fails its
 * check). The lanes of a NIC are next to each other in tr_run.nics, pair
 * 0 first; it alone does what is per NIC (AddNic, RemoveNic, counters
 * summed over all queues).
 */
struct tr_nic {
	unsigned idx;               /* lane index, unique in the run */
	unsigned pair;              /* its queue pair: queues rx<pair>, tx<pair> */
	unsigned npairs;            /* pairs of its NIC */
	char id[48];                /* the NIC's id (the same on all its lanes) */
	char qname[2][16];          /* "tx<pair>", "rx<pair>": [FRAMES_G2H], [FRAMES_H2G] */
	struct guest *g;
	int host_fd;                /* socketpair end or UDP socket; -1 */
	char tap[IFNAMSIZ];         /* the tap, or the host's veth end */
	char veth[IFNAMSIZ];        /* TR_AFP: the veth end vnicd binds */
	uint8_t host_mac[6];
	struct tr_flow f[2];        /* [FRAMES_G2H], [FRAMES_H2G] */
	uint64_t other_rx, other_rx_bytes; /* kernel frames the guest ignored */
	bool host_blocked;          /* h2g send hit EAGAIN: wait for POLLOUT */
	bool rx_more, tx_wait;
	bool added, hostile;
	pid_t pid;
	double cpu0, cpu1;
	/* Worker CPU across restarts: a dead worker's /proc entry is gone,
	 * so the loop samples the live one (cpu_last, every
	 * TR_CPU_SAMPLE_NS) and a pid change banks the old one's last
	 * sample (cpu_dead). */
	double cpu_last, cpu_dead;
	/* events */
	bool needs_reset, failed;
	uint32_t reset_queue;
	uint64_t reset_ns;
	char reset_reason[256];
	/* lifecycle */
	struct vnic_conn *conn;     /* r->conn, or its own (--disconnect-after) */
	bool faulty;                /* under fault: may fail, restart, lose frames */
	bool gone;                  /* unplugged or disconnected: no more traffic */
	bool stalled;               /* host end stopped reading (--stall-backend-after) */
	bool disc_wait;             /* disconnected, worker not yet seen gone */
	uint64_t disc_ns;
	bool canary_set, canary_checked;
	uint64_t canary_ns;
	uint64_t resume_ns;         /* last restart: per-flow stall clock restarts */
	uint64_t tx_used_ns;        /* last time TX descriptors came back */
	uint64_t g2h_at_restart;    /* g2h frames received before the last restart */
	unsigned restarts, deaths;
	bool reread_pid;
	/* dirty log (traffic_dirtylog.c) */
	bool log_on;                /* SetDirtyLog answered: snap is valid */
	int log_fd;                 /* -1 */
	uint8_t *log;               /* mapped, log_size bytes */
	uint64_t log_size;
	uint8_t *snap;              /* guest memory (rings, receive buffers) at log-on */
	uint64_t h2g_at_log;        /* h2g frames received before log-on */
};

struct tr_run {
	uint64_t cpu_sampled_ns;    /* tr_cpu_sample */
	const char *socket_path;
	struct vnic_conn *conn;
	enum tr_backend backend;
	unsigned dirs;              /* bit 0: g2h, bit 1: h2g */
	uint32_t fixed;             /* frame size, 0 = random */
	uint32_t maxsize;           /* largest frame: FRAMES_MAX, or FRAMES_TAP_MAX */
	double seconds;
	uint64_t count;
	unsigned window;
	bool window_set;            /* --window given */
	char netns[64];
	bool netns_created;
	unsigned nnics;             /* lanes: NICs x pairs */
	unsigned pairs;             /* --queue-pairs: lanes per NIC (1) */
	struct tr_nic *nics;
	uint8_t *buf;               /* host scratch, one frame */
	uint32_t mtu;
	enum vnic_mitigation policy;  /* --policy, DEFAULT: the supervisor's */
	struct vnic_policy pol;       /* its parameters (--timer-us ...) */
	double switch_ms;             /* --switch-policy: SetPolicy every MS, 0 off */
	uint64_t rr;                  /* --rr N: request/response transactions, 0 off */
	unsigned guest_batch;         /* --guest-batch: frames per publish (0: a burst) */
	uint64_t next_switch_ns;
	unsigned switches, switch_next, switch_sets; /* rounds; SetPolicy calls */
	const char *expect_json, *before_remove;
	uint64_t t0, inject_ns;
	/* hostile: the victim gets its looping chain at inject_at, half-way
	 * through, so the other NIC's rate before and after can be compared. */
	struct tr_nic *victim;
	enum tr_kind victim_kind;
	bool injected;
	uint64_t inject_at;
	uint64_t recv_at_inject;    /* the other NIC's frames, both directions */
	double victim_cpu_at_inject;
	unsigned failures;
	int nic_errors;             /* events for NICs that should be fine */
	/* lifecycle (issue 5) */
	const char *id_prefix;
	int fault_nic;              /* -1: none */
	double unplug_after, disconnect_after, stall_after; /* < 0: off */
	uint32_t remove_deadline_ms;
	bool unplug_done, disconnect_done, stall_done;
	/* --dirty-log (before the frames), --dirty-log-after S (< 0: off) */
	bool dirty_log;
	double dirty_log_after;
	bool dirty_log_done;
};

/* SIGINT/SIGTERM seen: senders stop, the run ends cleanly. */
extern volatile sig_atomic_t tr_stop;

/* traffic_run.c */
/* tr_worker_gone - the worker process pid has ended: no such process, or
 * a zombie (which holds no fd and no memory any more). */
bool tr_worker_gone(pid_t pid);
/* tr_worker_gone_soon - the same, allowing a task that vnicd saw end
 * through its pidfd 100 ms to become the zombie it is about to be. */
bool tr_worker_gone_soon(pid_t pid);
void tr_fail(struct tr_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double tr_cpu_seconds(pid_t pid);
bool tr_sending(const struct tr_run *r, uint64_t now);
/* tr_parse_common - an option both subcommands take (--socket, --seconds,
 * --nics, --window, --backend, --netns). Returns 0 or -EIO. */
int tr_parse_common(struct tr_run *r, int opt, const char *arg);
/* tr_backend_limits - the largest frame, the MTU and the default window
 * the backend takes (after the options). Returns 0, or -EINVAL with the
 * reason printed (--size beyond it). */
int tr_backend_limits(struct tr_run *r);
/* tr_backend_name - "socket", "tap" or "afpacket" (--backend's words). */
const char *tr_backend_name(enum tr_backend b);
void tr_init_common(struct tr_run *r);
int tr_setup(struct tr_run *r);
void tr_loop(struct tr_run *r);
void tr_run_init(struct tr_run *r, unsigned nnics);
int tr_usage_exit(int rc, bench_usage_fn *usage);
int tr_finish(struct tr_run *r, const char *name);
int tr_name_index(const char *const *names, unsigned n, const char *s);

/* traffic_backend.c */
int tr_cmd(const char *const *argv);
int tr_socket_pair(struct tr_run *r, struct tr_nic *n, int *ret_vmm_end);
int tr_tap_setup(struct tr_run *r, struct tr_nic *n);
int tr_veth_add(struct tr_run *r, struct tr_nic *n);

/* traffic_flow.c */
int tr_flow_reserve(struct tr_flow *f, uint64_t seq);
void tr_flow_record(struct tr_run *r, struct tr_nic *n, unsigned dir, uint64_t seq,
		    size_t bytes);
bool tr_may_send(const struct tr_run *r, const struct tr_flow *f, uint64_t now);
void tr_guest_tx(struct tr_run *r, struct tr_nic *n, uint64_t now);
void tr_guest_rx(struct tr_run *r, struct tr_nic *n);
void tr_host_rx(struct tr_run *r, struct tr_nic *n);
void tr_host_tx(struct tr_run *r, struct tr_nic *n, uint64_t now);

/* traffic_lifecycle.c */
void tr_lifecycle(struct tr_run *r, uint64_t now);
bool tr_lifecycle_pending(const struct tr_run *r);
void tr_canary_check(struct tr_run *r, struct tr_nic *n);

/* traffic_report.c */
const struct vnic_queue_status *tr_queue(const struct vnic_nic_status *s, const char *name);
const struct vnic_nic_status *tr_nic_status(const struct vnic_status *st, const char *id);
void tr_report(struct tr_run *r, const char *mode);
int tr_write_expect(struct tr_run *r);

/* traffic_dirtylog.c */
int tr_dirty_log_on(struct tr_run *r);
void tr_dirty_log_due(struct tr_run *r, uint64_t now);
void tr_dirty_log_check(struct tr_run *r, struct tr_nic *n);
void tr_dirty_log_free(struct tr_nic *n);

/* bench_hostile.c */
void tr_inject(struct tr_nic *n, enum tr_kind kind);

#endif
