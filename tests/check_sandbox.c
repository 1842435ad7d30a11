/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_sandbox: the worker sandbox (TESTPLAN S1, S2; issue 4).
 *
 * Forbidden calls run in a grandchild that entered the sandbox; the test
 * (in Check's fork-mode child) waits for it and asserts death by SIGSYS
 * and the report record with the right syscall number. Allowed calls run
 * in Check's child itself after sandbox_enter(), so Check's own reporting
 * (writes to a file it opened earlier) also runs under the filter.
 * Tests that drop privileges or build the empty root need root; without
 * root they are left out with a SKIP line on stderr.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "privdrop.h"
#include "sandbox.h"

#define NOBODY 65534u

/* ---- running a function in a sandboxed grandchild ---- */

struct sbx_result {
	int status;            /* from waitpid */
	size_t replen;         /* bytes of the record: 0 when none was stored */
	unsigned char rep[64];
};

/* Wait at most 10 s for pid; kill it after that (bounded loop). */
static int wait_bounded(pid_t pid, int *status)
{
	for (int i = 0; i < 1000; i++) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0)
			return -errno;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, status, 0);
	return -ETIMEDOUT;
}

/* Fork; the child enters the sandbox with its record in a shared page
 * (as a worker's stats page), runs fn and exits 0 (or 90 if sandbox_enter
 * failed). */
static void run_sandboxed(void (*fn)(void *), void *arg, struct sbx_result *res)
{
	static const unsigned char zero[sizeof(struct sandbox_report)];
	struct sandbox_report *rec;
	pid_t pid;

	memset(res, 0, sizeof(*res));
	rec = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert(rec != MAP_FAILED);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sandbox_cfg cfg = { .mode = SANDBOX_MODE_ENFORCE, .report = rec };

		if (sandbox_enter(&cfg) != 0)
			_exit(90);
		fn(arg);
		_exit(0);
	}
	ck_assert_int_eq(wait_bounded(pid, &res->status), 0);
	if (memcmp(rec, zero, sizeof(zero)) != 0) {
		memcpy(res->rep, rec, sizeof(*rec));
		res->replen = sizeof(*rec);
	}
	munmap(rec, 4096);
}

/* Assert fn was killed by SIGSYS with a record naming syscall nr. */
static void expect_violation(void (*fn)(void *), void *arg, int nr, const char *what)
{
	struct sbx_result res;
	struct sandbox_violation v;

	run_sandboxed(fn, arg, &res);
	ck_assert_msg(WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGSYS,
		      "%s: expected death by SIGSYS, got status 0x%x (exited %d)", what,
		      res.status, WIFEXITED(res.status) ? WEXITSTATUS(res.status) : -1);
	ck_assert_msg(sandbox_parse_report(res.rep, res.replen, &v) == 0,
		      "%s: no valid report record (%zu bytes)", what, res.replen);
	ck_assert_msg(v.nr == nr, "%s: report names syscall %d (%s), expected %d", what, v.nr,
		      v.name, nr);
	ck_assert_uint_eq(v.arch, AUDIT_ARCH_X86_64);
	ck_assert_uint_ne(v.ip, 0);
}

/* ---- forbidden calls (S1): each one kills, with a record ---- */

static void do_socket(void *a) { (void)a; socket(AF_UNIX, SOCK_STREAM, 0); }
static void do_connect(void *a)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX, .sun_path = "/run/x" };

	(void)a;
	connect(-1, (struct sockaddr *)&sun, sizeof(sun));
}
static void do_bind(void *a)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	(void)a;
	bind(-1, (struct sockaddr *)&sun, sizeof(sun));
}
static void do_execve(void *a)
{
	static char arg0[] = "true";
	char *argv[] = { arg0, NULL };
	char *envp[] = { NULL };

	(void)a;
	execve("/bin/true", argv, envp);
}
static void do_execveat(void *a)
{
	static char arg0[] = "true";
	char *argv[] = { arg0, NULL };
	char *envp[] = { NULL };

	(void)a;
	syscall(SYS_execveat, AT_FDCWD, "/bin/true", argv, envp, 0);
}
static void do_fork(void *a)
{
	(void)a;
	if (fork() == 0)
		_exit(0); /* not reached: the child would exit 0 and the parent too */
}
static void do_clone3(void *a) { (void)a; syscall(SYS_clone3, NULL, 0); }
static void do_ptrace(void *a) { (void)a; syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0); }
static void do_mmap_exec(void *a)
{
	(void)a;
	mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}
static void do_mmap_growsdown(void *a)
{
	(void)a;
	mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0);
}
static void do_mprotect_exec(void *a)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)a;
	if (p == MAP_FAILED)
		_exit(91);
	mprotect(p, 4096, PROT_READ | PROT_EXEC);
}
static void do_ioctl_winsz(void *a)
{
	struct winsize ws;

	(void)a;
	ioctl(0, TIOCGWINSZ, &ws);
}
static void do_ioctl_tunsetiff(void *a)
{
	struct ifreq ifr;

	(void)a;
	memset(&ifr, 0, sizeof(ifr));
	ioctl(0, TUNSETIFF, &ifr);
}
/* The whole request number is compared: a neighbour of TUNSETOFFLOAD
 * (same type and size, another number) is not allowed. */
static void do_ioctl_near_miss(void *a) { (void)a; ioctl(0, TUNSETOFFLOAD + 1, 0); }
static void do_memfd_create(void *a) { (void)a; syscall(SYS_memfd_create, "x", 0); }
static void do_io_uring_setup(void *a)
{
	unsigned char params[120];

	(void)a;
	memset(params, 0, sizeof(params));
	syscall(SYS_io_uring_setup, 1, params);
}
static void do_bpf(void *a) { (void)a; syscall(SYS_bpf, 0, NULL, 0); }
static void do_madvise_bad(void *a) { (void)a; madvise(NULL, 0, MADV_REMOVE); }
static void do_futex_pi(void *a)
{
	uint32_t w = 0;

	(void)a;
	syscall(SYS_futex, &w, 6 /* FUTEX_LOCK_PI */, 0, NULL, NULL, 0);
}
static void do_fcntl_dupfd(void *a) { (void)a; fcntl(0, F_DUPFD, 10); }
static void do_sigaction(void *a)
{
	struct sigaction sa;

	(void)a;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGUSR1, &sa, NULL);
}
static void do_prctl(void *a) { (void)a; prctl(PR_SET_NAME, "x", 0, 0, 0); }
static void do_kill(void *a) { (void)a; kill(getpid(), 0); }
static void do_mremap_fixed(void *a) { (void)a; syscall(SYS_mremap, NULL, 0, 0, 3 /* MAYMOVE|FIXED */, NULL); }
static void do_userfaultfd(void *a) { (void)a; syscall(SYS_userfaultfd, 0); }
static void do_perf_event_open(void *a) { (void)a; syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0); }
static void do_process_vm_readv(void *a) { (void)a; syscall(SYS_process_vm_readv, 1, NULL, 0, NULL, 0, 0); }
static void do_keyctl(void *a) { (void)a; syscall(SYS_keyctl, 0, 0, 0, 0, 0); }
static void do_setuid(void *a) { (void)a; syscall(SYS_setuid, 0); }
static void do_unshare(void *a) { (void)a; syscall(SYS_unshare, 0); }
/* getsockopt: only SOL_PACKET PACKET_STATISTICS. */
static void do_getsockopt_other(void *a)
{
	int v;
	socklen_t l = sizeof(v);

	(void)a;
	getsockopt(0, SOL_SOCKET, SO_TYPE, &v, &l);
}
static void do_getsockopt_packet_other(void *a)
{
	int v;
	socklen_t l = sizeof(v);

	(void)a;
	getsockopt(0, SOL_PACKET, PACKET_VERSION, &v, &l);
}

#define KILL_TEST(tname, fn, nr) \
	START_TEST(tname) { expect_violation(fn, NULL, nr, #fn); } END_TEST

KILL_TEST(s1_socket_kills, do_socket, SYS_socket)
KILL_TEST(s1_connect_kills, do_connect, SYS_connect)
KILL_TEST(s1_bind_kills, do_bind, SYS_bind)
KILL_TEST(s1_execve_kills, do_execve, SYS_execve)
KILL_TEST(s1_execveat_kills, do_execveat, SYS_execveat)
KILL_TEST(s1_fork_kills, do_fork, SYS_clone)
KILL_TEST(s1_clone3_kills, do_clone3, SYS_clone3)
KILL_TEST(s1_ptrace_kills, do_ptrace, SYS_ptrace)
KILL_TEST(s1_mmap_exec_kills, do_mmap_exec, SYS_mmap)
KILL_TEST(s1_mmap_odd_flags_kills, do_mmap_growsdown, SYS_mmap)
KILL_TEST(s1_mprotect_exec_kills, do_mprotect_exec, SYS_mprotect)
KILL_TEST(s1_ioctl_unlisted_kills, do_ioctl_winsz, SYS_ioctl)
KILL_TEST(s1_ioctl_tunsetiff_kills, do_ioctl_tunsetiff, SYS_ioctl)
KILL_TEST(s1_ioctl_near_miss_kills, do_ioctl_near_miss, SYS_ioctl)
KILL_TEST(s1_memfd_create_kills, do_memfd_create, SYS_memfd_create)
KILL_TEST(s1_io_uring_kills, do_io_uring_setup, SYS_io_uring_setup)
KILL_TEST(s1_bpf_kills, do_bpf, SYS_bpf)
KILL_TEST(s1_madvise_unlisted_kills, do_madvise_bad, SYS_madvise)
KILL_TEST(s1_futex_pi_kills, do_futex_pi, SYS_futex)
KILL_TEST(s1_fcntl_dupfd_kills, do_fcntl_dupfd, SYS_fcntl)
KILL_TEST(s1_sigaction_kills, do_sigaction, SYS_rt_sigaction)
KILL_TEST(s1_prctl_kills, do_prctl, SYS_prctl)
KILL_TEST(s1_kill_kills, do_kill, SYS_kill)
KILL_TEST(s1_mremap_fixed_kills, do_mremap_fixed, SYS_mremap)
KILL_TEST(s1_userfaultfd_kills, do_userfaultfd, SYS_userfaultfd)
KILL_TEST(s1_perf_event_open_kills, do_perf_event_open, SYS_perf_event_open)
KILL_TEST(s1_process_vm_readv_kills, do_process_vm_readv, SYS_process_vm_readv)
KILL_TEST(s1_keyctl_kills, do_keyctl, SYS_keyctl)
KILL_TEST(s1_setuid_kills, do_setuid, SYS_setuid)
KILL_TEST(s1_unshare_kills, do_unshare, SYS_unshare)
KILL_TEST(s1_getsockopt_other_kills, do_getsockopt_other, SYS_getsockopt)
KILL_TEST(s1_getsockopt_packet_other_kills, do_getsockopt_packet_other, SYS_getsockopt)

/* The x32 ABI (and any foreign ABI) is killed at once, without record. */
static void do_x32(void *a) { (void)a; syscall(0x40000000 /* __X32_SYSCALL_BIT */ | SYS_getpid); }

START_TEST(s1_x32_abi_kills)
{
	struct sbx_result res;

	run_sandboxed(do_x32, NULL, &res);
	ck_assert_msg(WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGSYS,
		      "x32 getpid: expected SIGSYS, status 0x%x", res.status);
	ck_assert_uint_eq(res.replen, 0);
}
END_TEST

/* A violation ends the process even when the code tries to go on. */
static void do_socket_then_exit_0(void *a)
{
	(void)a;
	socket(AF_INET, SOCK_DGRAM, 0);
	socket(AF_INET, SOCK_DGRAM, 0);
	_exit(0);
}

START_TEST(s1_violation_is_fatal_and_reported_once)
{
	struct sbx_result res;

	run_sandboxed(do_socket_then_exit_0, NULL, &res);
	ck_assert(WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGSYS);
	ck_assert_uint_eq(res.replen, sizeof(struct sandbox_report));
}
END_TEST

/* With SIGSYS blocked the kernel kills at once: still SIGSYS, no record. */
static void do_block_sigsys_then_socket(void *a)
{
	sigset_t set;

	(void)a;
	sigemptyset(&set);
	sigaddset(&set, SIGSYS);
	sigprocmask(SIG_BLOCK, &set, NULL);
	socket(AF_UNIX, SOCK_STREAM, 0);
	_exit(0);
}

START_TEST(s1_violation_with_sigsys_blocked_still_kills)
{
	struct sbx_result res;

	run_sandboxed(do_block_sigsys_then_socket, NULL, &res);
	ck_assert_msg(WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGSYS, "status 0x%x",
		      res.status);
	ck_assert_uint_eq(res.replen, 0);
}
END_TEST

/* Without a place for the record a violation still kills. */
START_TEST(s1_violation_without_report_kills)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sandbox_cfg cfg = { .mode = SANDBOX_MODE_ENFORCE, .report = NULL };

		if (sandbox_enter(&cfg) != 0)
			_exit(90);
		socket(AF_UNIX, SOCK_STREAM, 0);
		_exit(0);
	}
	ck_assert_int_eq(wait_bounded(pid, &status), 0);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS, "status 0x%x", status);
}
END_TEST

/* open/stat are refused with EACCES, not death. */
static int path_fails_eacces(void)
{
	struct stat st;
	int fd;

	fd = open("/etc/passwd", O_RDONLY);
	if (fd >= 0 || errno != EACCES)
		return 1;
	fd = openat(AT_FDCWD, "/etc/passwd", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		return 2;
	if (stat("/etc/passwd", &st) == 0 || errno != EACCES)
		return 3;
	if (access("/etc/passwd", R_OK) == 0 || errno != EACCES)
		return 4;
	if (fopen("/etc/passwd", "r") != NULL || errno != EACCES)
		return 5;
	return 0;
}

static void do_paths(void *a) { (void)a; _exit(path_fails_eacces()); }

START_TEST(s1_open_stat_fail_with_eacces)
{
	struct sbx_result res;

	ck_assert_int_eq(access("/etc/passwd", R_OK), 0); /* it is there */
	run_sandboxed(do_paths, NULL, &res);
	ck_assert_msg(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0,
		      "open/stat probe: status 0x%x (exit code = failed step)", res.status);
	ck_assert_uint_eq(res.replen, 0);
}
END_TEST

/* ---- allowed calls work (S1): run in Check's child under the filter ---- */

static void enter(void)
{
	struct sandbox_cfg cfg = { .mode = SANDBOX_MODE_ENFORCE, .report = NULL };

	ck_assert_int_eq(sandbox_enter(&cfg), 0);
}

/*
 * End a test whose process is under the filter. Check's child would go on
 * to arm a teardown timer (timer_create), which the filter kills; in fork
 * mode exit status 0 is a pass, and a failed assertion has exited with 1
 * before getting here.
 */
static void sandboxed_pass(void)
{
	_exit(0);
}

START_TEST(s1_allowed_pipe_and_eventfd_io)
{
	int p[2], efd;
	uint64_t v = 5, got = 0;
	char buf[8];
	struct iovec iov[2] = { { buf, 3 }, { buf + 3, 2 } };

	ck_assert_int_eq(pipe(p), 0);
	efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ck_assert_int_ge(efd, 0);
	enter();

	ck_assert_int_eq(write(p[1], "hello", 5), 5);
	ck_assert_int_eq(readv(p[0], iov, 2), 5);
	ck_assert_int_eq(memcmp(buf, "hello", 5), 0);
	ck_assert_int_eq(writev(p[1], iov, 2), 5);
	ck_assert_int_eq(read(p[0], buf, sizeof(buf)), 5);
	ck_assert_int_eq(write(efd, &v, sizeof(v)), 8);
	ck_assert_int_eq(read(efd, &got, sizeof(got)), 8);
	ck_assert_uint_eq(got, 5);
	ck_assert_int_eq(read(efd, &got, sizeof(got)), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_eq(close(p[0]), 0);
	ck_assert_int_eq(close(p[1]), 0);
	sandboxed_pass();
}
END_TEST

START_TEST(s1_allowed_sendmsg_recvmsg_scm_rights)
{
	int sv[2], efd, got_fd = -1;
	char byte = 'x', rbyte = 0;
	union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } c, rc;
	struct iovec iov = { &byte, 1 }, riov = { &rbyte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
			    .msg_controllen = sizeof(c.buf) };
	struct msghdr rm = { .msg_iov = &riov, .msg_iovlen = 1, .msg_control = rc.buf,
			     .msg_controllen = sizeof(rc.buf) };
	struct cmsghdr *cm;
	uint64_t v = 1;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	efd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_ge(efd, 0);
	enter();

	memset(c.buf, 0, sizeof(c.buf));
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &efd, sizeof(int));
	ck_assert_int_eq(sendmsg(sv[0], &m, 0), 1);
	ck_assert_int_eq(recvmsg(sv[1], &rm, MSG_CMSG_CLOEXEC), 1);
	ck_assert_int_eq(rbyte, 'x');
	cm = CMSG_FIRSTHDR(&rm);
	ck_assert_ptr_nonnull(cm);
	ck_assert_int_eq(cm->cmsg_type, SCM_RIGHTS);
	memcpy(&got_fd, CMSG_DATA(cm), sizeof(int));
	ck_assert_int_ne(got_fd, efd);
	/* The received fd is the same eventfd. */
	ck_assert_int_eq(write(got_fd, &v, sizeof(v)), 8);
	ck_assert_int_eq(read(efd, &v, sizeof(v)), 8);
	ck_assert_uint_eq(v, 1);
	ck_assert_int_eq(fcntl(got_fd, F_GETFD), FD_CLOEXEC);
	sandboxed_pass();
}
END_TEST

START_TEST(s1_allowed_memory)
{
	int mfd = (int)syscall(SYS_memfd_create, "guest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct stat st;
	uint8_t *a, *b, *anon;
	void *big;

	ck_assert_int_ge(mfd, 0);
	ck_assert_int_eq(ftruncate(mfd, 8192), 0);
	ck_assert_int_eq(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	enter();

	/* What memtable_map does with a received memfd. */
	ck_assert_int_eq(fstat(mfd, &st), 0);
	ck_assert_int_eq(st.st_size, 8192);
	ck_assert_int_eq(fcntl(mfd, F_GET_SEALS) & F_SEAL_SHRINK, F_SEAL_SHRINK);
	anon = mmap(NULL, 3 * 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert_ptr_ne(anon, MAP_FAILED);
	a = mmap(anon + 4096, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mfd, 0);
	ck_assert_ptr_eq(a, anon + 4096);
	b = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ck_assert_ptr_ne(b, MAP_FAILED);
	a[100] = 0x5a; /* one memfd, two mappings */
	ck_assert_int_eq(b[100], 0x5a);
	ck_assert_int_eq(mprotect(b, 8192, PROT_READ), 0);
	ck_assert_int_eq(mprotect(b, 8192, PROT_NONE), 0);
	ck_assert_int_eq(madvise(a, 8192, MADV_DONTDUMP), 0);
	ck_assert_int_eq(munmap(b, 8192), 0);
	ck_assert_int_eq(munmap(anon, 3 * 8192), 0);

	/* malloc: brk, mmap and realloc's mremap, free's munmap. */
	big = malloc(1 << 20);
	ck_assert_ptr_nonnull(big);
	memset(big, 1, 1 << 20);
	big = realloc(big, 4 << 20);
	ck_assert_ptr_nonnull(big);
	free(big);
	for (int i = 0; i < 1000; i++)
		free(malloc(100 + (size_t)i * 64));
	sandboxed_pass();
}
END_TEST

START_TEST(s1_allowed_fcntl_tap_ioctls_packet_stats)
{
	int p[2], on = 1, hdrsz = 12;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	enter();

	ck_assert_int_eq(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK), 0);
	ck_assert_int_ne(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
	ck_assert_int_eq(fcntl(p[0], F_SETFD, 0), 0);
	ck_assert_int_eq(fcntl(p[0], F_GETFD), 0);
	ck_assert_int_eq(ioctl(p[1], FIONBIO, &on), 0);
	/* The filter lets the tap requests through: on a pipe the kernel
	 * answers ENOTTY instead of the filter killing. */
	ck_assert_int_eq(ioctl(p[0], TUNSETVNETHDRSZ, &hdrsz), -1);
	ck_assert_int_eq(errno, ENOTTY);
	ck_assert_int_eq(ioctl(p[0], TUNSETOFFLOAD, (unsigned long)TUN_F_CSUM), -1);
	ck_assert_int_eq(errno, ENOTTY);
	/* Bits above 32 are ignored by the kernel and by the filter. */
	ck_assert_int_eq(syscall(SYS_ioctl, p[0], 0xffffffff00000000ull | TUNSETOFFLOAD, 0), -1);
	ck_assert_int_eq(errno, ENOTTY);
	/* An AF_PACKET ring's drop count goes through (on a pipe: ENOTSOCK). */
	{
		struct tpacket_stats_v3 st;
		socklen_t l = sizeof(st);

		ck_assert_int_eq(getsockopt(p[0], SOL_PACKET, PACKET_STATISTICS, &st, &l), -1);
		ck_assert_int_eq(errno, ENOTSOCK);
	}
	sandboxed_pass();
}
END_TEST

START_TEST(s1_allowed_clock_timerfd_futex)
{
	struct timespec ts, d = { 0, 1000 };
	struct itimerspec its = { .it_value = { 0, 1000000 } };
	uint64_t ticks = 0;
	uint32_t word = 0;
	int tfd;

	enter();
	ck_assert_int_eq(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts), 0);
	ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &ts), 0);
	ck_assert_int_eq(clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL), 0);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	ck_assert_int_ge(tfd, 0);
	ck_assert_int_eq(timerfd_settime(tfd, 0, &its, NULL), 0);
	ck_assert_int_eq(read(tfd, &ticks, sizeof(ticks)), 8);
	ck_assert_uint_ge(ticks, 1);
	ck_assert_int_eq(timerfd_gettime(tfd, &its), 0);
	ck_assert_int_eq(close(tfd), 0);
	ck_assert_int_eq(syscall(SYS_futex, &word, 1 | 128 /* FUTEX_WAKE_PRIVATE */, 1, NULL, NULL, 0), 0);
	ck_assert_int_eq(syscall(SYS_futex, &word, 0 /* FUTEX_WAIT */, 1, NULL, NULL, 0), -1);
	ck_assert_int_eq(errno, EAGAIN); /* *word != 1 */
	ck_assert_int_gt(getpid(), 0);
	ck_assert_int_gt(syscall(SYS_gettid), 0);
	sandboxed_pass();
}
END_TEST

static void on_event(evutil_socket_t fd, short what, void *arg)
{
	unsigned *hits = arg;
	uint64_t v;

	if (what & EV_READ)
		ck_assert_int_eq(read(fd, &v, sizeof(v)), 8);
	(*hits)++;
}

START_TEST(s1_allowed_libevent_loop)
{
	struct event_base *base = event_base_new(); /* epoll_create1: before */
	struct event *ev, *tm;
	struct timeval tv = { 0, 2000 };
	unsigned ev_hits = 0, tm_hits = 0;
	uint64_t one = 1;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	ck_assert_ptr_nonnull(base);
	ck_assert_int_ge(efd, 0);
	enter();

	ev = event_new(base, efd, EV_READ | EV_PERSIST, on_event, &ev_hits);
	tm = evtimer_new(base, on_event, &tm_hits);
	ck_assert_int_eq(event_add(ev, NULL), 0);
	ck_assert_int_eq(evtimer_add(tm, &tv), 0);
	ck_assert_int_eq(write(efd, &one, sizeof(one)), 8);
	for (int i = 0; i < 100 && (ev_hits == 0 || tm_hits == 0); i++)
		ck_assert_int_ge(event_base_loop(base, EVLOOP_ONCE), 0);
	ck_assert_uint_eq(ev_hits, 1);
	ck_assert_uint_eq(tm_hits, 1);
	event_free(ev);
	event_free(tm);
	event_base_free(base);
	sandboxed_pass();
}
END_TEST

static void do_exit_group_7(void *a) { (void)a; syscall(SYS_exit_group, 7); }

START_TEST(s1_allowed_exit_group)
{
	struct sbx_result res;

	run_sandboxed(do_exit_group_7, NULL, &res);
	ck_assert_msg(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 7, "status 0x%x",
		      res.status);
	ck_assert_uint_eq(res.replen, 0);
}
END_TEST

/* A /proc/self/status field (-1 if missing), read from an fd opened
 * before the sandbox. */
static long status_field(const char *text, const char *key, int base)
{
	const char *p = strstr(text, key);

	return p ? strtol(p + strlen(key), NULL, base) : -1;
}

START_TEST(s1_proc_status_after_enter)
{
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	char buf[4096];
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	enter();
	n = read(fd, buf, sizeof(buf) - 1);
	ck_assert_int_gt(n, 0);
	buf[n] = 0;
	ck_assert_int_eq(status_field(buf, "NoNewPrivs:", 10), 1);
	ck_assert_int_eq(status_field(buf, "Seccomp:", 10), 2);
	sandboxed_pass();
}
END_TEST

START_TEST(s1_mode_off_is_reported_and_filterless)
{
	struct sandbox_cfg cfg = { .mode = SANDBOX_MODE_OFF, .report = NULL };
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	char buf[4096];
	ssize_t n;
	int s;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(sandbox_enter(&cfg), SANDBOX_DISABLED);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(s, 0);
	close(s);
	n = read(fd, buf, sizeof(buf) - 1);
	ck_assert_int_gt(n, 0);
	buf[n] = 0;
	ck_assert_int_eq(status_field(buf, "NoNewPrivs:", 10), 1);
	ck_assert_int_eq(status_field(buf, "Seccomp:", 10), 0);
}
END_TEST

START_TEST(s1_bad_cfg_rejected)
{
	struct sandbox_cfg cfg = { .mode = (enum sandbox_mode)7, .report = NULL };

	ck_assert_int_eq(sandbox_enter(NULL), -EINVAL);
	ck_assert_int_eq(sandbox_enter(&cfg), -EINVAL);
}
END_TEST

START_TEST(s1_parse_report)
{
	struct sandbox_report r = { .magic = SANDBOX_REPORT_MAGIC, .arch = AUDIT_ARCH_X86_64,
				    .nr = SYS_socket, .ip = 0x1234 };
	struct sandbox_violation v;

	ck_assert_int_eq(sandbox_parse_report(&r, sizeof(r), &v), 0);
	ck_assert_int_eq(v.nr, SYS_socket);
	ck_assert_str_eq(v.name, "socket");
	ck_assert_uint_eq(v.ip, 0x1234);
	r.nr = 99999;
	ck_assert_int_eq(sandbox_parse_report(&r, sizeof(r), &v), 0);
	ck_assert_str_eq(v.name, "nr 99999");
	ck_assert_int_eq(sandbox_parse_report(&r, sizeof(r) - 1, &v), -EINVAL);
	ck_assert_int_eq(sandbox_parse_report(&r, 0, &v), -EINVAL);
	r.magic ^= 1;
	ck_assert_int_eq(sandbox_parse_report(&r, sizeof(r), &v), -EINVAL);
}
END_TEST

/* ---- the policy table (S2) ---- */

/* Never allowed, whatever the build (issue 4's "everything else kills"). */
static const char *const never_allowed[] = {
	"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
	"execve", "execveat", "fork", "vfork", "clone", "clone3", "ptrace",
	"process_vm_readv", "process_vm_writev", "userfaultfd", "bpf", "perf_event_open",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "memfd_create", "keyctl",
	"add_key", "request_key", "kcmp", "rt_sigaction", "prctl", "seccomp", "setuid",
	"setresuid", "setgid", "unshare", "setns", "mount", "pivot_root", "chroot", "kill",
#ifndef VNIC_SANITIZERS
	"tgkill", /* sanitizer builds: only for abort()'s SIGABRT */
#endif
	"tkill", "personality", "open", "openat", "sendto", "recvfrom",
	"pidfd_open", "pidfd_getfd",
};

START_TEST(s2_never_allowed_rows)
{
	char *sentinel;

	for (unsigned i = 0; i < sizeof(never_allowed) / sizeof(never_allowed[0]); i++)
		ck_assert_msg(!sandbox_policy_allows(never_allowed[i]), "policy allows %s",
			      never_allowed[i]);
	/* The handler's sentinel must trap. */
	sentinel = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, SANDBOX_SENTINEL_NR);
	ck_assert_ptr_nonnull(sentinel);
	ck_assert_msg(!sandbox_policy_allows(sentinel), "sentinel syscall %s is allowed", sentinel);
	free(sentinel);
	ck_assert(sandbox_policy_allows("read"));
}
END_TEST

START_TEST(s2_policy_matches_golden)
{
	const char *top = getenv("VNIC_TOP_SRCDIR");
	char path[4096], *dump = NULL, *golden;
	size_t dumplen = 0, glen = 0;
	FILE *f, *mem;
	long fl;
	unsigned line = 1;

	if (seccomp_arch_native() != SCMP_ARCH_X86_64) {
		fprintf(stderr, "SKIP s2_policy_matches_golden: golden file is for x86_64\n");
		return;
	}
	ck_assert_msg(top != NULL, "VNIC_TOP_SRCDIR not set (run through make check)");
	snprintf(path, sizeof(path), "%s/tests/sandbox-policy.golden", top);
	mem = open_memstream(&dump, &dumplen);
	ck_assert_ptr_nonnull(mem);
	sandbox_policy_dump(mem);
	fclose(mem);

	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	fl = ftell(f);
	rewind(f);
	golden = calloc(1, (size_t)fl + 1);
	ck_assert_ptr_nonnull(golden);
	glen = fread(golden, 1, (size_t)fl, f);
	fclose(f);

	if (glen != dumplen || memcmp(golden, dump, glen) != 0) {
		/* Show the first differing line of each, then the whole dump. */
		const char *g = golden, *d = dump;

		while (*g && *d) {
			const char *ge = strchrnul(g, '\n'), *de = strchrnul(d, '\n');

			if (ge - g != de - d || memcmp(g, d, (size_t)(ge - g)) != 0)
				break;
			line++;
			g = *ge ? ge + 1 : ge;
			d = *de ? de + 1 : de;
		}
		fprintf(stderr, "policy differs from %s at line %u:\n-%.*s\n+%.*s\n"
			"--- full dump (update the golden file if the change is intended) ---\n%s",
			path, line, (int)(strchrnul(g, '\n') - g), g,
			(int)(strchrnul(d, '\n') - d), d, dump);
		ck_abort_msg("sandbox policy differs from the golden file at line %u", line);
	}
	free(golden);
	free(dump);
}
END_TEST

/* ---- rlimits: FSIZE 0 would stop Check's own result file, so these run
 * in a child of the test that reports through its exit status ---- */

/* In such a child: print the failed condition and exit 1. */
#define REQUIRE(c) do { \
		if (!(c)) { \
			fprintf(stderr, "%s:%d: failed: %s (errno %d)\n", __FILE__, __LINE__, #c, errno); \
			_exit(1); \
		} \
	} while (0)

/* Run fn in a child (no sandbox unless fn enters it); assert it exits 0. */
static void run_child(void (*fn)(void *), void *arg, const char *what)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	ck_assert_int_eq(wait_bounded(pid, &status), 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: child status 0x%x (see the failed condition above)", what, status);
}

static void rlimits_child(void *a)
{
	static const int res[] = { RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_CORE };
	char tmpl[] = "/tmp/check_sandbox.XXXXXX";
	struct rlimit rl;
	int fd = mkstemp(tmpl);

	(void)a;
	REQUIRE(fd >= 0);
	unlink(tmpl);
	REQUIRE(sandbox_rlimits(0) == -EINVAL);
	REQUIRE(sandbox_rlimits(16) == 0);
	for (unsigned i = 0; i < 3; i++) {
		REQUIRE(getrlimit(res[i], &rl) == 0);
		REQUIRE(rl.rlim_cur == 0 && rl.rlim_max == 0);
	}
	REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	REQUIRE(rl.rlim_cur == 16 && rl.rlim_max == 16);
	/* FSIZE 0: a file cannot grow (SIGXFSZ ignored so write reports it). */
	signal(SIGXFSZ, SIG_IGN);
	REQUIRE(write(fd, "x", 1) == -1 && errno == EFBIG);
	/* NOFILE 16: no new fd number 16 or above. */
	REQUIRE(fcntl(fd, F_DUPFD, 16) == -1 && errno == EINVAL);
	REQUIRE(fcntl(fd, F_DUPFD, 10) >= 10);
}

START_TEST(s1_rlimits_in_place)
{
	run_child(rlimits_child, NULL, "rlimits");
}
END_TEST

/* ---- privdrop ---- */

START_TEST(s1_close_fds_except)
{
	int p[2], keep[3], extra;

	ck_assert_int_eq(pipe(p), 0);
	extra = dup(p[0]);
	ck_assert_int_ge(extra, 0);
	keep[0] = STDERR_FILENO;
	keep[1] = p[1];
	keep[2] = p[1]; /* duplicates are fine */
	ck_assert_int_eq(privdrop_close_fds_except(keep, 3), 0);
	ck_assert_int_ge(fcntl(STDERR_FILENO, F_GETFD), 0);
	ck_assert_int_ge(fcntl(p[1], F_GETFD), 0);
	ck_assert_int_eq(fcntl(p[0], F_GETFD), -1);
	ck_assert_int_eq(fcntl(extra, F_GETFD), -1);
	ck_assert_int_eq(fcntl(STDIN_FILENO, F_GETFD), -1);
	/* A kept fd that is not open is refused and nothing is closed. */
	keep[0] = p[0];
	ck_assert_int_eq(privdrop_close_fds_except(keep, 2), -EBADF);
	ck_assert_int_ge(fcntl(p[1], F_GETFD), 0);
	keep[0] = -1;
	ck_assert_int_eq(privdrop_close_fds_except(keep, 1), -EINVAL);
	ck_assert_int_eq(privdrop_close_fds_except(NULL, 0), 0);
	ck_assert_int_eq(fcntl(STDERR_FILENO, F_GETFD), -1);
}
END_TEST

START_TEST(s1_privdrop_resolve)
{
	uid_t uid = 1;
	gid_t gid = 1;

	ck_assert_int_eq(privdrop_resolve("nobody", &uid, &gid), 0);
	ck_assert_uint_eq(uid, NOBODY);
	ck_assert_int_eq(privdrop_resolve(NULL, &uid, &gid), 0);
	ck_assert_uint_ne(uid, 0);
	ck_assert_int_eq(privdrop_resolve("65534", &uid, &gid), 0);
	ck_assert_uint_eq(uid, NOBODY);
	ck_assert_uint_eq(gid, NOBODY);
	ck_assert_int_eq(privdrop_resolve("4000000", &uid, &gid), 0);
	ck_assert_uint_eq(uid, 4000000);
	ck_assert_uint_eq(gid, 4000000);
	uid = 1;
	ck_assert_int_eq(privdrop_resolve("root", &uid, &gid), -EPERM);
	ck_assert_int_eq(privdrop_resolve("0", &uid, &gid), -EPERM);
	ck_assert_int_eq(privdrop_resolve("no-such-user-vnicd-test", &uid, &gid), -ENOENT);
	ck_assert_int_eq(privdrop_resolve("12x", &uid, &gid), -EINVAL);
	ck_assert_uint_eq(uid, 1); /* untouched on failure */
}
END_TEST

START_TEST(s1_privdrop_to_nobody)
{
	uid_t r, e, s;
	gid_t rg, eg, sg;

	gid_t groups[2] = { 0, 4 };

	/* Start with supplementary groups, so that dropping them shows. */
	ck_assert_int_eq(setgroups(2, groups), 0);
	ck_assert_int_eq(getgroups(0, NULL), 2);
	ck_assert_int_eq(privdrop_to(0, NOBODY), -EPERM);
	ck_assert_int_eq(privdrop_to(NOBODY, 0), -EPERM);
	ck_assert_int_eq(privdrop_to(NOBODY, NOBODY), 0);
	ck_assert_int_eq(getresuid(&r, &e, &s), 0);
	ck_assert_int_eq(getresgid(&rg, &eg, &sg), 0);
	ck_assert_uint_eq(r, NOBODY);
	ck_assert_uint_eq(e, NOBODY);
	ck_assert_uint_eq(s, NOBODY);
	ck_assert_uint_eq(rg, NOBODY);
	ck_assert_uint_eq(eg, NOBODY);
	ck_assert_uint_eq(sg, NOBODY);
	ck_assert_int_eq(getgroups(0, NULL), 0);
	ck_assert_int_eq(setuid(0), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(setgid(0), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
}
END_TEST

/* After the drop, NPROC 0 stops fork even without the filter. */
static void nproc_child(void *a)
{
	pid_t pid;

	(void)a;
	REQUIRE(privdrop_to(NOBODY, NOBODY) == 0);
	REQUIRE(sandbox_rlimits(64) == 0);
	pid = fork();
	if (pid == 0)
		_exit(0);
	REQUIRE(pid == -1 && errno == EAGAIN);
}

START_TEST(s1_rlimit_nproc_stops_fork_after_drop)
{
	run_child(nproc_child, NULL, "nproc");
}
END_TEST

START_TEST(s1_isolate_empty_root)
{
	int keep = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	struct stat st;
	char buf[64];

	ck_assert_int_ge(keep, 0);
	ck_assert_int_eq(sandbox_isolate(), 0);
	ck_assert_int_eq(open("/etc/passwd", O_RDONLY), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(open("/proc/self/status", O_RDONLY), -1);
	ck_assert_int_eq(stat("/", &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0);
	ck_assert_int_eq(stat("/..", &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0);
	ck_assert_int_eq(mkdir("/x", 0700), -1); /* read-only */
	/* An fd held from before still works. */
	ck_assert_int_gt(read(keep, buf, sizeof(buf)), 0);
	/* No socket to anywhere: the network namespace is new (only lo, down). */
	ck_assert_int_eq(if_nametoindex("lo"), 1);
}
END_TEST

/*
 * The worker's whole order on a real tap, in a throwaway network namespace:
 * open tap -> close fds -> isolate -> drop -> rlimits -> enter; then the tap
 * ioctls succeed and /proc/self/status shows the confinement.
 */
static void worker_order_child(void *a)
{
	struct sandbox_cfg cfg = { .mode = SANDBOX_MODE_ENFORCE, .report = NULL };
	struct ifreq ifr;
	int tap, st, keep[3];
	int hdrsz = 12;
	char buf[4096];
	ssize_t n;

	(void)a;
	REQUIRE(unshare(CLONE_NEWNET) == 0);
	tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	REQUIRE(tap >= 0);
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	REQUIRE(ioctl(tap, TUNSETIFF, &ifr) == 0);
	st = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	REQUIRE(st >= 0);

	keep[0] = tap;
	keep[1] = st;
	keep[2] = STDERR_FILENO;
	REQUIRE(privdrop_close_fds_except(keep, 3) == 0);
	REQUIRE(sandbox_isolate() == 0);
	REQUIRE(privdrop_to(NOBODY, NOBODY) == 0);
	REQUIRE(sandbox_rlimits(16) == 0);
	REQUIRE(sandbox_enter(&cfg) == 0);

	REQUIRE(ioctl(tap, TUNSETVNETHDRSZ, &hdrsz) == 0);
	REQUIRE(ioctl(tap, TUNSETOFFLOAD, (unsigned long)(TUN_F_CSUM | TUN_F_TSO4)) == 0);
	n = read(st, buf, sizeof(buf) - 1);
	REQUIRE(n > 0);
	buf[n] = 0;
	REQUIRE(status_field(buf, "NoNewPrivs:", 10) == 1);
	REQUIRE(status_field(buf, "Seccomp:", 10) == 2);
	REQUIRE(status_field(buf, "CapEff:", 16) == 0);
	REQUIRE(status_field(buf, "CapPrm:", 16) == 0);
	REQUIRE(status_field(buf, "Uid:", 10) == NOBODY);
	REQUIRE(status_field(buf, "Gid:", 10) == NOBODY);
}

START_TEST(s1_worker_order_on_tap)
{
	if (access("/dev/net/tun", R_OK | W_OK) != 0) {
		fprintf(stderr, "SKIP s1_worker_order_on_tap: no /dev/net/tun\n");
		return;
	}
	run_child(worker_order_child, NULL, "worker order on tap");
}
END_TEST

#ifdef VNIC_SANITIZERS
/* The sanitizer rows never open a hole in never_allowed: that is checked by
 * s2_never_allowed_rows, as sandbox_policy_allows() includes them. Here: a
 * sanitizer error inside the sandbox is reported as such (printed, then
 * SIGABRT or exit 1), not turned into a sandbox violation. */
static void do_heap_overflow(void *a)
{
	volatile size_t i = 8;
	char *x = malloc(8);

	(void)a;
	x[i] = 1;
	_exit(x[0]);
}

START_TEST(s2_sanitizer_error_is_not_a_violation)
{
	struct sbx_result res;
	struct sandbox_violation v = { .name = "none" };

	run_sandboxed(do_heap_overflow, NULL, &res);
	(void)sandbox_parse_report(res.rep, res.replen, &v);
	ck_assert_msg((WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGABRT) ||
		      (WIFEXITED(res.status) && WEXITSTATUS(res.status) != 0),
		      "ASan error under the filter: status 0x%x, violation %s", res.status, v.name);
	ck_assert_uint_eq(res.replen, 0);
}
END_TEST
#endif

static Suite *sandbox_suite(void)
{
	Suite *s = suite_create("sandbox");
	TCase *kill = tcase_create("s1_forbidden");
	TCase *ok = tcase_create("s1_allowed");
	TCase *pol = tcase_create("s2_policy");
	TCase *priv = tcase_create("privdrop");

	tcase_add_test(kill, s1_socket_kills);
	tcase_add_test(kill, s1_connect_kills);
	tcase_add_test(kill, s1_bind_kills);
	tcase_add_test(kill, s1_execve_kills);
	tcase_add_test(kill, s1_execveat_kills);
	tcase_add_test(kill, s1_fork_kills);
	tcase_add_test(kill, s1_clone3_kills);
	tcase_add_test(kill, s1_ptrace_kills);
	tcase_add_test(kill, s1_mmap_exec_kills);
	tcase_add_test(kill, s1_mmap_odd_flags_kills);
	tcase_add_test(kill, s1_mprotect_exec_kills);
	tcase_add_test(kill, s1_ioctl_unlisted_kills);
	tcase_add_test(kill, s1_ioctl_tunsetiff_kills);
	tcase_add_test(kill, s1_ioctl_near_miss_kills);
	tcase_add_test(kill, s1_memfd_create_kills);
	tcase_add_test(kill, s1_io_uring_kills);
	tcase_add_test(kill, s1_bpf_kills);
	tcase_add_test(kill, s1_madvise_unlisted_kills);
	tcase_add_test(kill, s1_futex_pi_kills);
	tcase_add_test(kill, s1_fcntl_dupfd_kills);
	tcase_add_test(kill, s1_sigaction_kills);
	tcase_add_test(kill, s1_prctl_kills);
	tcase_add_test(kill, s1_kill_kills);
	tcase_add_test(kill, s1_mremap_fixed_kills);
	tcase_add_test(kill, s1_userfaultfd_kills);
	tcase_add_test(kill, s1_perf_event_open_kills);
	tcase_add_test(kill, s1_process_vm_readv_kills);
	tcase_add_test(kill, s1_keyctl_kills);
	tcase_add_test(kill, s1_setuid_kills);
	tcase_add_test(kill, s1_unshare_kills);
	tcase_add_test(kill, s1_getsockopt_other_kills);
	tcase_add_test(kill, s1_getsockopt_packet_other_kills);
	tcase_add_test(kill, s1_x32_abi_kills);
	tcase_add_test(kill, s1_violation_is_fatal_and_reported_once);
	tcase_add_test(kill, s1_violation_with_sigsys_blocked_still_kills);
	tcase_add_test(kill, s1_violation_without_report_kills);
	tcase_add_test(kill, s1_open_stat_fail_with_eacces);
	suite_add_tcase(s, kill);

	tcase_add_test(ok, s1_allowed_pipe_and_eventfd_io);
	tcase_add_test(ok, s1_allowed_sendmsg_recvmsg_scm_rights);
	tcase_add_test(ok, s1_allowed_memory);
	tcase_add_test(ok, s1_allowed_fcntl_tap_ioctls_packet_stats);
	tcase_add_test(ok, s1_allowed_clock_timerfd_futex);
	tcase_add_test(ok, s1_allowed_libevent_loop);
	tcase_add_test(ok, s1_allowed_exit_group);
	tcase_add_test(ok, s1_proc_status_after_enter);
	tcase_add_test(ok, s1_mode_off_is_reported_and_filterless);
	tcase_add_test(ok, s1_bad_cfg_rejected);
	tcase_add_test(ok, s1_parse_report);
	tcase_add_test(ok, s1_rlimits_in_place);
	tcase_add_test(ok, s1_close_fds_except);
	tcase_add_test(ok, s1_privdrop_resolve);
	suite_add_tcase(s, ok);

	tcase_add_test(pol, s2_never_allowed_rows);
	tcase_add_test(pol, s2_policy_matches_golden);
#ifdef VNIC_SANITIZERS
	tcase_add_test(pol, s2_sanitizer_error_is_not_a_violation);
#endif
	suite_add_tcase(s, pol);

	if (geteuid() == 0) {
		tcase_add_test(priv, s1_privdrop_to_nobody);
		tcase_add_test(priv, s1_rlimit_nproc_stops_fork_after_drop);
		tcase_add_test(priv, s1_isolate_empty_root);
		tcase_add_test(priv, s1_worker_order_on_tap);
		suite_add_tcase(s, priv);
	} else {
		fprintf(stderr, "SKIP privdrop tests (drop to nobody, NPROC, isolate, tap): "
				"need root\n");
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sandbox_suite());
	int failed;

	/* Every test changes its process for good: fork mode, always. */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
