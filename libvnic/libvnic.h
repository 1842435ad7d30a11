/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libvnic: the client library a VMM links to talk to vnicd.
 *
 *     pkg-config --cflags --libs libvnic      #include <libvnic.h>
 *
 * One struct vnic_conn is one connection to the supervisor's control
 * socket. A NIC belongs to the connection that added it: closing the
 * connection (or the VMM dying) stops and removes every NIC it added.
 *
 * Calls are blocking with a timeout (vnic_set_timeout, default 10 s) and
 * not thread-safe: use one connection from one thread at a time.
 *
 * Return values: 0 on success; a negative errno for a local or transport
 * failure (-ECONNREFUSED, -ETIMEDOUT, -EPIPE: the supervisor went away,
 * -EPROTO: a reply we could not understand, -ENOMEM, -EINVAL: bad
 * arguments); a positive enum vnic_status code when the supervisor
 * answered with an error. In both error cases vnic_last_error() (and the
 * err buffer of vnic_add_nic) holds one line for a person.
 *
 * File descriptors: libvnic only BORROWS the fds you pass (memfds,
 * eventfds, backend sockets). The kernel duplicates them into the
 * supervisor when the request is sent; you still own yours and close them
 * whenever you like after the call returns. The fds libvnic creates (the
 * connection socket) are its own, O_CLOEXEC, closed by vnic_close.
 *
 * Events (a NIC failed, a queue needs reset) arrive on the same socket as
 * replies. To receive them in your own event loop, watch vnic_fd() for
 * readability and call vnic_dispatch(). Events that arrive while a
 * blocking call waits for its reply are queued and delivered to the
 * callback just before that call returns. The callback must not call
 * blocking libvnic functions on the same connection.
 */
#ifndef LIBVNIC_H
#define LIBVNIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VNIC_DEFAULT_SOCKET "/run/vnicd/control.sock"

/* The release of vnicd this header comes with (configure's AC_INIT
 * version; the library does not build when they differ). The protocol
 * version is negotiated separately (vnic_hello_info.version). */
#define VNIC_VERSION_MAJOR 0
#define VNIC_VERSION_MINOR 1
#define VNIC_VERSION_PATCH 0
#define VNIC_VERSION_STRING "0.1.0"
/* For #if VNIC_VERSION >= VNIC_VERSION_NUM(0, 2, 0). */
#define VNIC_VERSION_NUM(major, minor, patch) (((major) << 16) | ((minor) << 8) | (patch))
#define VNIC_VERSION VNIC_VERSION_NUM(VNIC_VERSION_MAJOR, VNIC_VERSION_MINOR, VNIC_VERSION_PATCH)

/* vnic_version - the release of the libvnic that is linked (may differ
 * from VNIC_VERSION_STRING after an upgrade of the shared library). */
const char *vnic_version(void);

/* Supervisor reply codes (vmm.proto Status). */
enum vnic_status_code {
	VNIC_STATUS_OK = 0,
	VNIC_STATUS_INVALID_ARGUMENT = 1,
	VNIC_STATUS_NOT_FOUND = 2,
	VNIC_STATUS_ALREADY_EXISTS = 3,
	VNIC_STATUS_FAILED_PRECONDITION = 4,
	VNIC_STATUS_RESOURCE_EXHAUSTED = 5,
	VNIC_STATUS_INTERNAL = 6,
	VNIC_STATUS_UNAVAILABLE = 7,
	VNIC_STATUS_PERMISSION_DENIED = 8,
	VNIC_STATUS_DEADLINE_EXCEEDED = 9,
	VNIC_STATUS_UNIMPLEMENTED = 10,
};

/* virtio feature bits a VMM may ack (virtio 1.x 5.1.3, 6). */
#define VNIC_F_CSUM          (1ull << 0)
#define VNIC_F_GUEST_CSUM    (1ull << 1)
#define VNIC_F_MTU           (1ull << 3)
#define VNIC_F_MAC           (1ull << 5)
#define VNIC_F_GUEST_TSO4    (1ull << 7)
#define VNIC_F_GUEST_TSO6    (1ull << 8)
#define VNIC_F_GUEST_UFO     (1ull << 10)
#define VNIC_F_HOST_TSO4     (1ull << 11)
#define VNIC_F_HOST_TSO6     (1ull << 12)
#define VNIC_F_HOST_UFO      (1ull << 14)
#define VNIC_F_MRG_RXBUF     (1ull << 15)
#define VNIC_F_INDIRECT_DESC (1ull << 28)
#define VNIC_F_EVENT_IDX     (1ull << 29)
#define VNIC_F_VERSION_1     (1ull << 32)

struct vnic_conn;

/*
 * vnic_connect - connect to the supervisor.
 * @path: control socket, NULL for VNIC_DEFAULT_SOCKET.
 * Returns: 0 and *ret_conn (free with vnic_close), or a negative errno
 * (-ENOENT: no socket there; -ECONNREFUSED: nothing listening).
 */
int vnic_connect(const char *path, struct vnic_conn **ret_conn);

/* vnic_close - close the connection; NICs it added are removed by the
 * supervisor. Accepts NULL. Returns: NULL. */
struct vnic_conn *vnic_close(struct vnic_conn *conn);

/* vnic_set_timeout - how long a blocking call waits for its reply
 * (milliseconds, > 0). vnic_remove_nic waits at least its deadline plus
 * 5 s. */
void vnic_set_timeout(struct vnic_conn *conn, unsigned timeout_ms);

/* vnic_last_error - the last error of this connection, one line ("" after
 * a success). Valid until the next call on conn. */
const char *vnic_last_error(const struct vnic_conn *conn);

/* What the supervisor announced in Hello. */
struct vnic_hello_info {
	uint32_t version;
	char server[64];
	uint64_t device_features; /* bits the device supports (tap backend) */
	/* max_regions: what one AddNic of one queue pair can carry with any
	 * backend (248: one frame's 253 fds less 2 eventfds per queue and a
	 * backend fd; each further pair 5 fewer). max_queues: 2 per queue
	 * pair, up to vnicd's --max-queue-pairs (2 before vnicd 0.2). */
	uint32_t max_regions, max_queues, max_queue_size, max_message_size, max_fds;
	/* vnicd's release; 0.0.0 and "" from a vnicd older than 0.1.0. */
	uint32_t vnicd_major, vnicd_minor, vnicd_patch;
	char vnicd_version[32];
};

/*
 * vnic_hello - negotiate the protocol version; must be the first request.
 * @client: free text for the supervisor's logs, e.g. "myvmm 1.2"; may be NULL.
 * @ret_info: filled on success; may be NULL.
 */
int vnic_hello(struct vnic_conn *conn, const char *client, struct vnic_hello_info *ret_info);

/* One guest memory region: a memfd sealed at least with F_SEAL_SHRINK. */
struct vnic_region {
	uint64_t gpa;    /* guest physical address of its first byte */
	uint64_t size;
	uint64_t offset; /* of the first byte inside fd */
	int fd;          /* borrowed */
};

/* One virtqueue, as the guest driver set it up (spec 2.7). */
struct vnic_queue {
	uint32_t index;  /* 0 = rx0, 1 = tx0, 2 = rx1 ... */
	uint32_t size;   /* power of 2, <= 32768 */
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint32_t avail_idx; /* first avail index to consume (usually 0) */
	int kick_fd;     /* eventfd the guest's notifications arrive on; borrowed */
	int call_fd;     /* eventfd the device writes to interrupt; borrowed */
};

enum vnic_backend {
	VNIC_BACKEND_TAP = 1,    /* vnicd opens/creates tap `tap_name`, in `netns` if set */
	VNIC_BACKEND_SOCKET = 2, /* backend_fd: an AF_UNIX SOCK_SEQPACKET/SOCK_DGRAM socket */
	VNIC_BACKEND_TAP_FD = 3, /* backend_fd: a tap opened IFF_TAP|IFF_NO_PI|IFF_VNET_HDR */
	VNIC_BACKEND_AF_PACKET = 4, /* vnicd binds an AF_PACKET socket with TPACKET_V3 rings
				     * to existing interface `tap_name` (a veth end, a NIC),
				     * in `netns` if set; one queue pair */
};

/* TX mitigation modes, numbered as vmm.proto's Mitigation (checked at
 * build time). The one definition: vnicd and its workers use it too. */
enum vnic_mitigation {
	VNIC_MITIGATION_DEFAULT = 0, /* bh */
	VNIC_MITIGATION_TIMER = 1,
	VNIC_MITIGATION_BH = 2,
	VNIC_MITIGATION_ADAPTIVE = 3,
	VNIC_MITIGATION_POLL = 4,
};

/* TX mitigation; zero fields take the supervisor's defaults (doc/design.md
 * "TX mitigation policies"), except poll_us: 0 means poll forever. */
struct vnic_policy {
	enum vnic_mitigation mode;
	uint32_t timer_us, poll_us, budget_packets, budget_bytes;
	uint32_t latency_us, safety_pct, max_window; /* adaptive */
	/* Interrupt coalescing on the used rings (since libvnic.so.3, issue
	 * 17): a queue interrupts at most once per *_irq_us. An interrupt
	 * the guest asked for goes at once when the last one is that old;
	 * otherwise it waits for the rest of the interval, or until
	 * *_irq_frames entries were published since it became due,
	 * whichever comes first. A queue whose last interrupt told of one
	 * entry (request/response) is not held. *_irq_us 0: every
	 * interrupt at once (off, the default); *_irq_frames 0: no frame
	 * limit. rx_*: the RX queues (frames delivered), tx_*: the TX
	 * queues (buffers returned). */
	uint32_t rx_irq_us, rx_irq_frames, tx_irq_us, tx_irq_frames;
};

struct vnic_nic_config {
	const char *id;             /* unique, 1..64 printable ASCII bytes, no space */
	uint8_t mac[6];             /* unicast */
	uint32_t mtu;               /* 68..65535; 0 = 1500 */
	uint64_t features_offered;  /* VNIC_F_* the VMM offered the guest */
	uint64_t features_acked;    /* the subset the guest driver acked; VERSION_1 required */
	unsigned nregions;
	const struct vnic_region *regions;
	unsigned nqueues;           /* 2 per queue pair: rx0, tx0, rx1, tx1 ... (issue 15:
				     * several pairs need a tap by name, a worker each) */
	const struct vnic_queue *queues;
	enum vnic_backend backend;
	const char *tap_name;       /* TAP: interface name or NULL/"" for tapN
				     * (one pair only: several need a name);
				     * AF_PACKET: the interface, required */
	const char *netns;          /* TAP, AF_PACKET: /run/netns/<netns>, NULL/"" for vnicd's own */
	int backend_fd;             /* SOCKET, TAP_FD: borrowed; else ignored */
	struct vnic_policy policy;
};

/*
 * vnic_add_nic - hot-plug a NIC whose driver has set DRIVER_OK.
 * The supervisor validates the whole request before changing anything,
 * starts a worker and answers once the worker is READY.
 * All fds in @cfg are borrowed (see the top of this file).
 * @err, @errlen: the supervisor's reason on failure (may be NULL/0).
 * Returns: 0, a negative errno, or a positive enum vnic_status_code.
 */
int vnic_add_nic(struct vnic_conn *conn, const struct vnic_nic_config *cfg,
		 char *err, size_t errlen);

/*
 * vnic_add_nic_backends - vnic_add_nic for a NIC of several queue pairs
 * (cfg->nqueues = 2N, issue 15) whose backend is a socket or a tap fd per
 * pair: backend_fds[k] serves pair k (nbackend = N; cfg->backend_fd is not
 * used). With a tap by name, vnic_add_nic takes any number of pairs.
 * Since libvnic 0.2.
 */
int vnic_add_nic_backends(struct vnic_conn *conn, const struct vnic_nic_config *cfg,
			  const int *backend_fds, unsigned nbackend, char *err, size_t errlen);

#define VNIC_MAX_QUEUES 16

struct vnic_queue_index {
	uint32_t index;      /* virtqueue index */
	uint32_t avail_idx;  /* next avail index the device would have consumed */
	uint32_t used_idx;   /* the device's used index */
};

struct vnic_remove_result {
	unsigned nqueues;    /* 0 when the worker could not report (it died) */
	struct vnic_queue_index queues[VNIC_MAX_QUEUES];
	uint64_t unplug_latency_us;
};

/*
 * vnic_set_policy - change a running NIC's TX mitigation policy and its
 * interrupt coalescing (the whole struct vnic_policy: zero fields take
 * vnicd's defaults, and coalescing's default is off).
 * Answered once the worker applied it (its budgets take effect from its
 * next wake-up); a worker restarted later starts with it too.
 * Returns: 0, a negative errno, or VNIC_STATUS_NOT_FOUND (no such NIC on
 * this connection), VNIC_STATUS_INVALID_ARGUMENT (out of range),
 * VNIC_STATUS_FAILED_PRECONDITION (not running, or a SetPolicy in
 * progress), VNIC_STATUS_UNAVAILABLE (the worker died before applying it).
 */
int vnic_set_policy(struct vnic_conn *conn, const char *id, const struct vnic_policy *policy);

/*
 * Live migration (issue 14; libvnic(3) "Live migration" has the whole
 * sequence). The dirty log has one bit per VNIC_DIRTY_LOG_PAGE bytes of
 * guest physical memory: page p = gpa / VNIC_DIRTY_LOG_PAGE is bit p % 8
 * of byte p / 8, as vhost's VHOST_SET_LOG_BASE. The worker sets a bit
 * with an atomic OR after the data of the page is written (received
 * frames and their virtio-net headers, used rings, avail_event); the VMM
 * reads and clears bits with atomic exchanges while the NIC runs.
 */
#define VNIC_DIRTY_LOG_PAGE 4096u

/*
 * vnic_dirty_log_size - the bytes of dirty log that cover guest physical
 * addresses [0, mem_end) (mem_end: the highest guest physical address of
 * any memory region, plus 1): one bit per page, rounded up to a multiple
 * of 8 bytes so that the log can be read and cleared 64 bits at a time.
 * Returns: the size (0 for mem_end 0).
 */
uint64_t vnic_dirty_log_size(uint64_t mem_end);

/*
 * vnic_set_dirty_log - start, replace or stop dirty logging on a NIC this
 * connection added.
 * @fd: a memfd sealed with F_SEAL_SHRINK (F_SEAL_GROW too, as the memory
 *   regions), at least @offset + @size bytes, mapped by the VMM to read
 *   and clear the bits; borrowed. -1 with @size 0: stop logging.
 * @size: bytes of log (vnic_dirty_log_size of the guest's memory), at
 *   most 1 GiB; 0 stops logging.
 * @offset: of the log inside @fd (0 when stopping).
 * Answered once the worker logs into the new log (or stopped): every
 * guest write after the answer is logged. A log replacing another gets
 * the writes from the answer on; the old one's bits up to then are
 * flushed into it before. The log stays the NIC's across worker restarts
 * until replaced, stopped or the NIC is removed (vnic_remove_nic answers
 * after the worker flushed its last bits).
 * Returns: 0, -EINVAL (fd and size disagree, no id), a negative errno, or
 * VNIC_STATUS_NOT_FOUND (no such NIC on this connection),
 * VNIC_STATUS_INVALID_ARGUMENT (the fd is not a sealed memfd, too short,
 * size too large, offset + size overflows), VNIC_STATUS_FAILED_PRECONDITION
 * (starting, stopping, or another SetDirtyLog still in progress),
 * VNIC_STATUS_UNAVAILABLE (the worker could not map it: then the NIC
 * logs nothing).
 */
int vnic_set_dirty_log(struct vnic_conn *conn, const char *id, int fd, uint64_t size,
		       uint64_t offset);

/*
 * vnic_announce - on a migration's destination, once the NIC runs there:
 * vnicd sends a RARP broadcast from the NIC's MAC out of its backend (the
 * tap, the socket, or the AF_PACKET interface), as QEMU does for its own
 * devices, so that the host's bridge learns where the guest now is. For
 * guests that do not announce themselves (VIRTIO_NET_F_GUEST_ANNOUNCE, which
 * the VMM's own device model offers; with it the guest's gratuitous ARPs
 * leave through the NIC like any frame). Any state of the NIC; it may be
 * repeated (QEMU sends its announcement several times, 50 ms apart and
 * growing).
 * Returns: 0 (the frame was sent), -EINVAL (no id), a negative errno, or
 * VNIC_STATUS_NOT_FOUND (no such NIC on this connection),
 * VNIC_STATUS_UNAVAILABLE (the send failed: vnic_last_error says why).
 */
int vnic_announce(struct vnic_conn *conn, const char *id);

/*
 * vnic_remove_nic - hot-unplug a NIC this connection added.
 * The reply comes only after the worker process is gone (reaped): once
 * this returns 0, no process maps the NIC's guest memory or holds its
 * eventfds, and the VMM may free them.
 * @deadline_ms: time the worker gets to stop cleanly (0: 5000); after it
 *   the worker is killed and reaped, and the call returns
 *   VNIC_STATUS_DEADLINE_EXCEEDED (the NIC is removed all the same).
 * @ret: final ring indices; may be NULL.
 * Returns: 0, a negative errno, or VNIC_STATUS_NOT_FOUND (no such NIC on
 * this connection), VNIC_STATUS_FAILED_PRECONDITION, ...
 */
int vnic_remove_nic(struct vnic_conn *conn, const char *id, uint32_t deadline_ms,
		    struct vnic_remove_result *ret);

/* A vhost-user endpoint: vnicd is the vhost-user back end on @path. */
struct vnic_vhost_user_config {
	const char *id;             /* as vnic_nic_config's */
	const char *path;           /* absolute unix socket path, < 108 bytes */
	bool server;                /* true: vnicd listens; false: vnicd connects (and reconnects) */
	const char *tap_name;       /* NULL/"": the kernel chooses (tapN) */
	const char *netns;          /* NULL/"": vnicd's own; else an existing /run/netns/<netns> */
	bool mac_set;               /* false: a locally administered MAC derived from the id */
	uint8_t mac[6];
	uint32_t mtu;               /* 0: 1500 */
	struct vnic_policy policy;
	bool af_packet;             /* tap_name is an existing interface that vnicd binds
				     * with AF_PACKET (issue 17); one queue pair */
};

/*
 * vnic_add_vhost_user - create a vhost-user endpoint. Server mode: answered
 * once @path accepts connections. The endpoint does not belong to this
 * connection: it lives until vnic_remove_endpoint, and across vnicd
 * restarts (vnicd's state directory).
 * @ifname, @ifname_len: the tap's name (may be NULL/0).
 * Returns: 0, a negative errno, or a positive status code
 * (VNIC_STATUS_ALREADY_EXISTS, VNIC_STATUS_INVALID_ARGUMENT, ...).
 */
int vnic_add_vhost_user(struct vnic_conn *conn, const struct vnic_vhost_user_config *cfg,
			char *ifname, size_t ifname_len, char *err, size_t errlen);

/*
 * vnic_remove_endpoint - remove a vhost-user endpoint: the front end is
 * disconnected and the worker reaped before the answer.
 * Returns: 0, a negative errno, VNIC_STATUS_NOT_FOUND, ...
 */
int vnic_remove_endpoint(struct vnic_conn *conn, const char *id, uint32_t deadline_ms,
			 uint64_t *latency_us);

enum vnic_nic_state {
	VNIC_NIC_UNSPECIFIED = 0,
	VNIC_NIC_STARTING = 1,
	VNIC_NIC_RUNNING = 2,
	VNIC_NIC_STOPPING = 3,
	VNIC_NIC_GONE = 4,
	VNIC_NIC_FAILED = 5,
	VNIC_NIC_RESTARTING = 6,
	VNIC_NIC_STALLED = 7,     /* no heartbeat while it had work: being killed
	                             and restarted (issue 11) */
	VNIC_NIC_AWAITING_FRONTEND = 8, /* a vhost-user endpoint with no worker: no
	                                   front end yet, or its rings not ready */
};

/* "STARTING", "RUNNING", ... */
const char *vnic_nic_state_name(enum vnic_nic_state s);
/* "default", "timer", "bh", "adaptive", "poll"; "?" for an unknown mode. */
const char *vnic_mitigation_name(enum vnic_mitigation m);
/*
 * vnic_mitigation_from_name - the mode vnic_mitigation_name calls @name
 * ("default" included: the supervisor's default, bh).
 * Returns: 0 and *ret (may be NULL), or -EINVAL for any other string.
 */
int vnic_mitigation_from_name(const char *name, enum vnic_mitigation *ret);

/*
 * VNIC_QUEUE_COUNTERS - every counter of a queue, once, as X(type, name,
 * kind). vnicd expands it for its shared stats page and the QueueStatus
 * message, libvnic for struct vnic_queue_status below, vnicctl for its
 * JSON and table; you may expand it to export every counter by name.
 *   type  the field's type in struct vnic_queue_status and vmm.proto
 *   kind  VNIC_QC_ALL: counted on every queue for the NIC's life (across
 *         crash restarts; a vhost-user endpoint's across worker sessions);
 *         VNIC_QC_TX: the TX policy's work (0 on RX queues);
 *         VNIC_QC_TX | VNIC_QC_GAUGE: a TX value now, not a count.
 * Adding a counter takes two edits: a line at the end here and the
 * QueueStatus field of the same name and type in vmm.proto (the next
 * free field number); then the worker counts it (stats_add(&q->st->name,
 * n)) and vnicctl(8) says what it means. It grows struct
 * vnic_queue_status: bump libvnic's -version-info.
 */
#define VNIC_QC_ALL   0u
#define VNIC_QC_TX    1u
#define VNIC_QC_GAUGE 2u
#define VNIC_QUEUE_COUNTERS(X) \
	X(uint64_t, packets, VNIC_QC_ALL)     /* frames completed (TX: to the backend) */ \
	X(uint64_t, bytes, VNIC_QC_ALL)       /* their Ethernet bytes, no virtio-net header */ \
	X(uint64_t, kicks, VNIC_QC_ALL)       /* guest notifications received */ \
	X(uint64_t, interrupts, VNIC_QC_ALL)  /* call eventfd writes */ \
	X(uint64_t, suppressed, VNIC_QC_ALL)  /* flushes without an interrupt: the guest \
						* asked for none, or coalescing held it */ \
	X(uint64_t, drops, VNIC_QC_ALL)       /* frames dropped */ \
	X(uint64_t, errors, VNIC_QC_ALL)      /* backend I/O errors other than EAGAIN */ \
	X(uint32_t, window, VNIC_QC_TX | VNIC_QC_GAUGE) /* adaptive: packets per kick asked for */ \
	X(uint64_t, flushes, VNIC_QC_TX)      /* runs that published used entries */ \
	X(uint64_t, timer_fires, VNIC_QC_TX)  /* policy timers that fired */ \
	X(uint64_t, timer_hits, VNIC_QC_TX)   /* of those, fires that found frames */ \
	X(uint64_t, poll_spins, VNIC_QC_TX)   /* poll: spins that found nothing */ \
	X(uint64_t, poll_hits, VNIC_QC_TX)    /* poll: spins that found frames */

#define VNIC_QUEUE_STATUS_FIELD(type, name, kind) type name;
struct vnic_queue_status {
	char name[16];       /* rx0, tx0 */
	VNIC_QUEUE_COUNTERS(VNIC_QUEUE_STATUS_FIELD)
	bool broken;
	char broken_reason[192];
};
#undef VNIC_QUEUE_STATUS_FIELD

struct vnic_nic_status {
	char id[80];
	enum vnic_nic_state state;
	int32_t pid;         /* worker pid, 0 when none */
	struct vnic_policy policy;
	uint64_t uptime_s;
	uint32_t restarts;
	char last_error[256];
	bool sandboxed;      /* false: the worker runs without its sandbox (--sandbox=off) */
	uint64_t start_us;   /* the worker's start, spawn -> READY */
	uint64_t restart_us; /* the last restart, death noticed -> READY; 0 if none */
	uint32_t policy_switches; /* SetPolicy requests its workers applied */
	unsigned nqueues;
	struct vnic_queue_status queues[VNIC_MAX_QUEUES];
	/* vhost-user endpoints only (vhost_path[0] == 0 otherwise). An
	 * endpoint with no worker is AWAITING_FRONTEND with pid 0 and its
	 * configured mac, tap_name and mtu. */
	char vhost_path[108];
	char vhost_mode[8];          /* "server" or "client" */
	char vhost_state[16];        /* listening, connecting, negotiating, running, stopping */
	uint64_t vhost_connects, vhost_messages, vhost_rejected, vhost_reconfigs;
	char vhost_last_error[192];
	/* Owner and device (since 0.1.0's admin fields, NicStatus 20-29). */
	int32_t owner_pid;   /* the owning connection's peer pid; 0: no owner connected */
	uint32_t owner_uid;  /* its uid, when owner_pid != 0 */
	char owner_path[108]; /* a vhost-user owner's socket path; else "" */
	char backend[16];    /* "tap", "socket", "tap_fd" */
	char tap_name[32];   /* tap backends: the interface; else "" */
	uint8_t mac[6];
	uint64_t features;   /* negotiated (acked) VNIC_F_* bits */
	uint32_t worker_uid, worker_gid; /* 0: vnicd's own (--sandbox=off) */
	uint32_t mtu;
};

/* One queue pair's worker (issue 15): each pair of a NIC runs its own. */
#define VNIC_MAX_PAIRS (VNIC_MAX_QUEUES / 2)
struct vnic_pair_status {
	uint32_t pair;       /* its queues are rx<pair> and tx<pair> */
	enum vnic_nic_state state;
	int32_t pid;         /* 0 when none */
	uint32_t restarts;
	uint64_t uptime_s;
	char last_error[192];
};

struct vnic_nic_pairs {
	unsigned npairs;     /* pairs with a worker session, by pair */
	struct vnic_pair_status pairs[VNIC_MAX_PAIRS];
};

/* Where a NIC's inflight region lives (issue 16). */
struct vnic_nic_inflight {
	/* "vnicd" (vnicd's memfd: a worker's crash loses nothing, vnicd's own
	 * death only with the fd store), "front end" (a vhost-user front end
	 * keeps it: INFLIGHT_SHMFD) or "off" (--inflight=off). */
	char where[12];
};

struct vnic_status {
	unsigned nnics;
	struct vnic_nic_status *nics; /* sorted by id */
	/* Since libvnic 0.2 (issue 15): pairs[i] are nics[i]'s queue pairs;
	 * nics[i]'s own pid, state and restarts are its first pair's. */
	struct vnic_nic_pairs *pairs;
	/* Since libvnic 0.4 (issue 16): inflight[i] is where nics[i]'s
	 * inflight region lives. (A member of struct vnic_nic_status would
	 * change the stride of nics[] under binaries built before it.) */
	struct vnic_nic_inflight *inflight;
};

/*
 * vnic_status - the status of every NIC of the supervisor (any connection
 * may ask; vnicctl does). Fetches all pages.
 * Returns: 0 and *ret (free with vnic_status_free), a negative errno, or a
 * positive status code.
 */
int vnic_status(struct vnic_conn *conn, struct vnic_status **ret);

/*
 * vnic_set_log_level - change vnicd's log level ("error", "warn", "info",
 * "debug") until its next SIGHUP or restart. Only uid 0 and vnicd's own
 * uid may (VNIC_STATUS_PERMISSION_DENIED otherwise).
 * @old, @oldlen: the level before (may be NULL/0).
 * Returns: 0, a negative errno, or a positive status code.
 */
int vnic_set_log_level(struct vnic_conn *conn, const char *level, char *old, size_t oldlen);

/* What an upgrade in place did (vnic_upgrade). */
struct vnic_upgrade_result {
	char from_version[32], to_version[32];
	uint32_t pid;          /* vnicd's, the same before and after */
	uint32_t nics;         /* NICs (queue pairs) taken over, workers running on */
	uint32_t endpoints;    /* vhost-user endpoints taken over */
	uint32_t connections;  /* control connections taken over */
	uint64_t pause_us;     /* request -> the new process's event loop */
	uint32_t upgrades;     /* upgrades in place of this vnicd so far */
};

/*
 * vnic_upgrade - replace the running vnicd with the vnicd binary now
 * installed at the path it was started from, in the same process, with no
 * worker stopped and no connection closed (this one included: the new
 * vnicd answers). Only uid 0 and vnicd's own uid may.
 * VNIC_STATUS_FAILED_PRECONDITION: vnicd is busy (a NIC starting,
 * stopping or restarting, a request in progress): ask again.
 * VNIC_STATUS_UNAVAILABLE: the new binary failed its check; the old one
 * serves on. Waits up to 30 s (or the connection's longer timeout).
 * Returns: 0 with *ret filled (may be NULL), a negative errno, or a
 * positive status code.
 */
int vnic_upgrade(struct vnic_conn *conn, struct vnic_upgrade_result *ret);

/* vnic_status_free - accepts NULL. Returns: NULL. */
struct vnic_status *vnic_status_free(struct vnic_status *st);

enum vnic_event_type {
	VNIC_EVENT_NIC_FAILED = 1,        /* the worker died; a NIC_STATE_CHANGED follows:
	                                     RESTARTING (NIC_RESTARTED once the new
	                                     worker runs) or FAILED (restart limit) */
	VNIC_EVENT_QUEUE_NEEDS_RESET = 2, /* a queue broke on guest input: set
	                                     DEVICE_NEEDS_RESET, config interrupt */
	VNIC_EVENT_NIC_RESTARTED = 3,
	VNIC_EVENT_NIC_STATE_CHANGED = 4,
	VNIC_EVENT_NIC_STALLED = 5,       /* the worker stopped beating while it had
	                                     work; STALLED, then restarted (a
	                                     NIC_FAILED and state changes follow) */
};

struct vnic_event {
	enum vnic_event_type type;
	char id[80];
	char reason[256];
	uint32_t queue;         /* QUEUE_NEEDS_RESET: virtqueue index */
	int32_t signal;         /* NIC_FAILED: terminating signal, 0 if it exited */
	int32_t exit_status;    /* NIC_FAILED: exit status when it exited */
	int32_t syscall;        /* NIC_FAILED with SIGSYS: syscall, -1 unknown */
	uint32_t restarts;      /* NIC_RESTARTED: restarts so far, this one included */
	uint64_t restart_us;    /* NIC_RESTARTED: death noticed -> new worker READY */
	enum vnic_nic_state old_state, new_state; /* NIC_STATE_CHANGED */
	uint32_t silent_ms;     /* NIC_STALLED: how long the heartbeat stood still */
	uint32_t pair;          /* since 0.2: the queue pair whose worker it was (issue 15;
				 * QUEUE_NEEDS_RESET: queue / 2) */
};

/* The callback gets an event valid during the call only. */
typedef void (*vnic_event_fn)(struct vnic_conn *conn, const struct vnic_event *ev, void *arg);

/* vnic_set_event_cb - where events go; NULL drops them. */
void vnic_set_event_cb(struct vnic_conn *conn, vnic_event_fn cb, void *arg);

/* vnic_fd - the connection's socket, to watch for readability (do not
 * read it, write it or close it). */
int vnic_fd(const struct vnic_conn *conn);

/*
 * vnic_dispatch - without blocking, read what the supervisor sent and
 * deliver events (queued ones first) to the callback.
 * Returns: the number of events delivered (>= 0), or a negative errno
 * (-EPIPE: the supervisor closed the connection).
 */
int vnic_dispatch(struct vnic_conn *conn);

#ifdef __cplusplus
}
#endif

#endif
