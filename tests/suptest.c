/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * suptest: run a real vnicd for tests. See suptest.h.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "suptest.h"
#include "workers/holder.h"

unsigned long st_vnicd_nofile;

static void msleep(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

const char *st_build_path(const char *rel, char *buf, size_t len)
{
	const char *top = getenv("VNIC_TOP_BUILDDIR");

	snprintf(buf, len, "%s/%s", top ? top : ".", rel);
	return buf;
}

const char *st_worker_path(void)
{
	static char p[512];

	st_build_path("workers/vnicd-worker", p, sizeof(p));
	return access(p, X_OK) == 0 ? p : NULL;
}

void st_vnicd_start(struct vnicd_proc *v, const char *worker, ...)
{
	char bin[512];
	const char *argv[32];
	int argc = 0, fd;
	va_list ap;
	const char *a;

	memset(v, 0, sizeof(*v));
	snprintf(v->dir, sizeof(v->dir), "/tmp/vnicd-test.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(v->dir));
	chmod(v->dir, 0755);
	snprintf(v->sock, sizeof(v->sock), "%s/control.sock", v->dir);
	snprintf(v->log, sizeof(v->log), "%s/vnicd.log", v->dir);
	st_build_path("supervisor/vnicd", bin, sizeof(bin));
	argv[argc++] = bin;
	argv[argc++] = "--foreground";
	argv[argc++] = "--socket";
	argv[argc++] = v->sock;
	argv[argc++] = "--log-level";
	argv[argc++] = "debug";
	argv[argc++] = "--worker";
	argv[argc++] = worker;
	/* Without root vnicd refuses to start sandboxed workers (issue 10):
	 * the scripted workers of unprivileged runs need no sandbox. */
	if (geteuid() != 0)
		argv[argc++] = "--sandbox=off";
	va_start(ap, worker);
	while ((a = va_arg(ap, const char *)) && argc < 30)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;

	v->pid = fork();
	ck_assert_int_ge(v->pid, 0);
	if (v->pid == 0) {
		/* A failing test exits without its teardown: vnicd then gets
		 * SIGTERM, stops its workers and removes its socket. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		fd = open(v->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
		if (st_vnicd_nofile) {
			struct rlimit rl = { st_vnicd_nofile, st_vnicd_nofile };

			if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
				_exit(126);
		}
		/* Only stdio into the daemon: its fd counts start clean. */
		for (int i = 3; i < 1024; i++)
			close(i);
		execv(bin, (char *const *)(uintptr_t)argv);
		_exit(127);
	}
	/* Up to 5 s for the socket to accept. */
	for (int i = 0; i < 500; i++) {
		struct vnic_conn *c = NULL;

		if (vnic_connect(v->sock, &c) == 0) {
			int prev = -2, n;

			vnic_close(c);
			/* Until vnicd has closed the probe: fd counts in the
			 * tests start from a quiet daemon. */
			for (int k = 0; k < 100; k++) {
				msleep(20);
				n = st_fd_count(v->pid);
				if (n == prev)
					break;
				prev = n;
			}
			return;
		}
		if (waitpid(v->pid, NULL, WNOHANG) == v->pid)
			ck_abort_msg("vnicd exited at start (log %s)", v->log);
		msleep(10);
	}
	ck_abort_msg("vnicd did not listen on %s within 5 s", v->sock);
}

void st_rmdir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

int st_vnicd_stop(struct vnicd_proc *v)
{
	int status;

	if (v->pid <= 0)
		return -1;
	kill(v->pid, SIGTERM);
	for (int i = 0; i < 1500; i++) {
		if (waitpid(v->pid, &status, WNOHANG) == v->pid) {
			v->pid = 0;
			/* Keep the log of a daemon that did not exit cleanly. */
			if (status == 0)
				st_rmdir(v->dir);
			else
				fprintf(stderr, "vnicd exit status 0x%x, log in %s\n", status, v->log);
			return status;
		}
		msleep(10);
	}
	kill(v->pid, SIGKILL);
	waitpid(v->pid, &status, 0);
	v->pid = 0;
	return -1;
}

int st_fd_count(pid_t pid)
{
	char path[64];
	DIR *d;
	struct dirent *e;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char link[sizeof(path) + sizeof(e->d_name) + 1], target[16];
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		/* vnicd reads /proc for a moment after each worker's reap
		 * (its holder, supervisor/holders.h): not an fd it keeps. */
		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len < 0 && errno == ENOENT)
			continue; /* closed since readdir saw it */
		if (len > 0) {
			target[len] = '\0';
			if (strncmp(target, "/proc/", 6) == 0)
				continue;
		}
		n++;
	}
	closedir(d);
	return n;
}

int st_fd_count_settle(pid_t pid, int want)
{
	int n = st_fd_count(pid);

	for (int i = 0; i < 200 && n != want; i++) {
		msleep(10);
		n = st_fd_count(pid);
	}
	return n;
}

int st_holder_kind(pid_t pid)
{
	char path[64], comm[32];
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1; /* reaped since it was listed */
	len = read(fd, comm, sizeof(comm) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	comm[len] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
	return strcmp(comm, HOLDER_COMM) == 0;
}

bool st_is_holder(pid_t pid)
{
	return st_holder_kind(pid) == 1;
}

/* pid's children now; *holders: how many of them are holders. A child
 * reaped between the list and its name (a holder whose linger ended) is
 * not counted. */
static int child_count_now(pid_t pid, int *holders)
{
	char path[96], buf[4096];
	int fd, n = 0;
	ssize_t len;

	*holders = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	for (char *p = strtok(buf, " \n"); p; p = strtok(NULL, " \n")) {
		int k = st_holder_kind((pid_t)atoi(p));

		if (k < 0)
			continue;
		n++;
		*holders += k;
	}
	return n;
}

int st_child_count(pid_t pid)
{
	int holders, n = child_count_now(pid, &holders);

	/* A worker's holder is vnicd's child for HOLDERS_LINGER_MS (1 s)
	 * after the worker is reaped, and the few ms its teardown takes.
	 * One still there after 4 s is counted (vnicd did not reap it). */
	for (int i = 0; i < 400 && holders > 0; i++) {
		msleep(10);
		n = child_count_now(pid, &holders);
	}
	return n;
}

struct vnic_conn *st_connect(const struct vnicd_proc *v)
{
	struct vnic_conn *c = NULL;
	int rc;

	rc = vnic_connect(v->sock, &c);
	ck_assert_msg(rc == 0, "connect %s: %s", v->sock, strerror(-rc));
	rc = vnic_hello(c, "test", NULL);
	ck_assert_msg(rc == 0, "hello: %d %s", rc, vnic_last_error(c));
	return c;
}

void st_guest_init(struct st_guest *g, const char *id)
{
	memset(g, 0, sizeof(*g));
	g->memfd = memfd_create("st-guest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(g->memfd, 0);
	ck_assert_int_eq(ftruncate(g->memfd, ST_MEM_SIZE), 0);
	ck_assert_int_eq(fcntl(g->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	for (int i = 0; i < 2; i++) {
		g->kick[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		g->call[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		ck_assert_int_ge(g->kick[i], 0);
		ck_assert_int_ge(g->call[i], 0);
	}
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, g->backend), 0);
	g->reg[0] = (struct vnic_region){ .gpa = ST_GPA_BASE, .size = ST_MEM_SIZE, .offset = 0,
					  .fd = g->memfd };
	for (int i = 0; i < 2; i++) {
		uint64_t base = ST_GPA_BASE + (uint64_t)i * 0x10000;

		g->q[i] = (struct vnic_queue){
			.index = (uint32_t)i, .size = ST_QSIZE,
			.desc_gpa = base, .avail_gpa = base + 0x1000, .used_gpa = base + 0x2000,
			.kick_fd = g->kick[i], .call_fd = g->call[i],
		};
	}
	snprintf(g->id, sizeof(g->id), "%s", id);
	g->cfg = (struct vnic_nic_config){
		.id = g->id,
		.mac = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 },
		.mtu = 1500,
		.features_offered = VNIC_F_VERSION_1 | VNIC_F_EVENT_IDX | VNIC_F_MRG_RXBUF |
				    VNIC_F_MAC | VNIC_F_MTU,
		.features_acked = VNIC_F_VERSION_1 | VNIC_F_EVENT_IDX | VNIC_F_MRG_RXBUF |
				  VNIC_F_MAC | VNIC_F_MTU,
		.nregions = 1, .regions = g->reg,
		.nqueues = 2, .queues = g->q,
		.backend = VNIC_BACKEND_SOCKET, .backend_fd = g->backend[0],
	};
}

void st_guest_free(struct st_guest *g)
{
	close(g->memfd);
	for (int i = 0; i < 2; i++) {
		close(g->kick[i]);
		close(g->call[i]);
		close(g->backend[i]);
	}
}

int st_nic_count(struct vnic_conn *c)
{
	struct vnic_status *st = NULL;
	int rc = vnic_status(c, &st), n;

	ck_assert_msg(rc == 0, "status: %d %s", rc, vnic_last_error(c));
	n = (int)st->nnics;
	vnic_status_free(st);
	return n;
}

struct vnic_nic_status st_one_nic(struct vnic_conn *c)
{
	struct vnic_status *st = NULL;
	struct vnic_nic_status n;

	ck_assert_int_eq(vnic_status(c, &st), 0);
	ck_assert_uint_eq(st->nnics, 1);
	n = st->nics[0];
	vnic_status_free(st);
	return n;
}

void st_add_ok(struct vnic_conn *c, struct st_guest *g)
{
	char err[512] = "";
	int rc = vnic_add_nic(c, &g->cfg, err, sizeof(err));

	ck_assert_msg(rc == 0, "AddNic: %d %s", rc, err);
}

bool st_pid_alive(pid_t pid)
{
	char p[64];

	snprintf(p, sizeof(p), "/proc/%d", (int)pid);
	return pid > 0 && access(p, F_OK) == 0;
}

int st_run_capture(const char *cmd, char *out, size_t outlen)
{
	FILE *f = popen(cmd, "r");
	size_t n;
	int st;

	ck_assert_ptr_nonnull(f);
	n = fread(out, 1, outlen - 1, f);
	out[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void st_assert_rarp(const uint8_t *f, ssize_t n, const uint8_t mac[6])
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	/* Ethernet, IPv4, 6- and 4-byte addresses, reverse request */
	static const uint8_t rarp[8] = { 0, 1, 8, 0, 6, 4, 0, 3 };

	ck_assert_msg(n == 60, "not an announcement: %zd bytes (%s)", n, n < 0 ? strerror(errno) : "");
	ck_assert_mem_eq(f, bcast, 6);
	ck_assert_mem_eq(f + 6, mac, 6);
	ck_assert_uint_eq(f[12], 0x80); /* ETH_P_RARP */
	ck_assert_uint_eq(f[13], 0x35);
	ck_assert_mem_eq(f + 14, rarp, 8);
	ck_assert_mem_eq(f + 22, mac, 6);
	ck_assert_mem_eq(f + 32, mac, 6);
}
