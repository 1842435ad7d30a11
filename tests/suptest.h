/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * suptest: helpers for tests that run a real vnicd from the build tree.
 *
 * Each test starts its own vnicd (--foreground, a private socket in a
 * fresh temporary directory, the given worker binary), talks to it over
 * the socket, and stops it with SIGTERM. Nothing here fakes the daemon.
 */
#ifndef VNIC_SUPTEST_H
#define VNIC_SUPTEST_H

#include <stdbool.h>
#include <sys/types.h>

#include "libvnic.h"

struct vnicd_proc {
	pid_t pid;
	char dir[64];
	char sock[128];
	char log[128];
};

/* Path of a binary in the build tree ($VNIC_TOP_BUILDDIR/rel). */
const char *st_build_path(const char *rel, char *buf, size_t len);

/* The worker built by this tree, or NULL when it is not built. */
const char *st_worker_path(void);

/* When not 0, the next vnicd starts with RLIMIT_NOFILE soft = hard = it. */
extern unsigned long st_vnicd_nofile;

/* Start vnicd with @worker and extra args (NULL-terminated list after
 * worker, may be empty). Aborts the test on failure. */
void st_vnicd_start(struct vnicd_proc *v, const char *worker, ...);

/* SIGTERM, wait up to 15 s. Returns the wait status, or -1 on timeout
 * (then it was SIGKILLed). */
int st_vnicd_stop(struct vnicd_proc *v);

/* Remove the files in dir (one level) and dir. */
void st_rmdir(const char *dir);

/* Open fds of a process (entries of /proc/pid/fd), but for files of /proc
 * (vnicd opens those for a moment after a worker's reap: supervisor/holders.h). */
int st_fd_count(pid_t pid);

/* Wait up to 2 s for pid's fd count to equal want; returns the last count. */
int st_fd_count_settle(pid_t pid, int want);

/* Is pid a worker's holder (named HOLDER_COMM: workers/holder.h)? 1
 * yes, 0 another process, -1 no such process (reaped since it was listed
 * as a child). st_is_holder: st_holder_kind() == 1. */
int st_holder_kind(pid_t pid);
bool st_is_holder(pid_t pid);

/* Children of pid (from /proc/pid/task/pid/children), once no worker's
 * holder is among them, or after 2 s: a holder outlives its worker by a
 * few ms (workers/holder.h) before vnicd reaps it. */
int st_child_count(pid_t pid);

/* Connect and Hello; aborts the test on failure. */
struct vnic_conn *st_connect(const struct vnicd_proc *v);

/* A guest for AddNic: one sealed memfd, two queues with eventfds, a
 * socketpair backend. cfg is valid as built; tests break one field. */
struct st_guest {
	int memfd;
	int kick[2], call[2];
	int backend[2];
	struct vnic_region reg[4];
	struct vnic_queue q[4];
	struct vnic_nic_config cfg;
	char id[128];
};

#define ST_GPA_BASE 0x100000ull
#define ST_MEM_SIZE (1024u * 1024u)
#define ST_QSIZE 256u

void st_guest_init(struct st_guest *g, const char *id);
void st_guest_free(struct st_guest *g);

/* AddNic of g->cfg over c; fails the test with the reason otherwise. */
void st_add_ok(struct vnic_conn *c, struct st_guest *g);

/* Does process pid exist (/proc/pid)? */
bool st_pid_alive(pid_t pid);

/* Run a shell command, capture at most outlen-1 bytes of its stdout
 * (NUL-terminated). Returns its exit status, or -1 if it did not exit. */
int st_run_capture(const char *cmd, char *out, size_t outlen);

/* The status of the one NIC the supervisor has (fails the test unless
 * there is exactly one). */
struct vnic_nic_status st_one_nic(struct vnic_conn *c);

/* Fail the test unless frame f (n bytes, from a backend or a packet
 * socket) is the announcement of a migrated guest (supervisor/announce.h):
 * a RARP reverse request from mac for mac, to everyone, 60 bytes. */
void st_assert_rarp(const uint8_t *f, ssize_t n, const uint8_t mac[6]);

/* Number of NICs the supervisor reports (over a fresh status call). */
int st_nic_count(struct vnic_conn *c);

/*
 * ST_SH_STORE_VIOLATION: shell lines for a scripted worker (fd 3 its
 * control socket) that take the Config and its fds off fd 3 and store a
 * sandbox violation record (sandbox.h struct sandbox_report: magic "VSBX",
 * x86_64, nr 41 = socket, ip 0) where a real worker's SIGSYS handler
 * does: bytes 24..47 of the stats page, at the start of the Config's
 * "vnic-worker" memfd (workers/stats.h asserts the offset). Python, to
 * receive the fds and map the page; the script then dies by SIGSYS. No
 * '%' in it: it may be part of a printf format.
 */
#define ST_SH_STORE_VIOLATION                                                              \
	"/usr/bin/python3 - <<'EOF'\n"                                                    \
	"import mmap, os, socket, struct\n"                                               \
	"s = socket.socket(fileno=3)\n"                                                   \
	"_, anc, _, _ = s.recvmsg(1 << 16, socket.CMSG_SPACE(253 * 4))\n"                 \
	"fds = [f for lvl, typ, d in anc if typ == socket.SCM_RIGHTS\n"                   \
	"       for f in struct.unpack(str(len(d) // 4) + 'i', d[:len(d) // 4 * 4])]\n"  \
	"for f in fds:\n"                                                                 \
	"    if 'vnic-worker' in os.readlink('/proc/self/fd/' + str(f)):\n"               \
	"        m = mmap.mmap(f, 4096)\n"                                                \
	"        m[24:48] = struct.pack('<IIiIQ', 0x58425356, 0xc000003e, 41, 0, 0)\n"    \
	"s.detach()\n"                                                                    \
	"EOF\n"

#endif
