/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holder: a second process in the worker's address space, so that the
 * worker's exit does not tear that address space down. See holder.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "holder.h"
#include "worker_abi.h"

#define HOLDER_STACK (64 * 1024)
/* How long the worker waits for the holder to block (it takes well under
 * a millisecond; a host that needs more loses only the fast exit). */
#define HOLDER_WAIT_NS (1000 * 1000 * 1000LL)

/*
 * Read the lifeline until EOF, then exit: from the text alone. Only
 * registers it sets itself and no stack: after the first read blocks,
 * nothing a compromised worker can write (the holder's stack and data are
 * in the memory they share; text it cannot make writable and executable
 * again, the filter refuses PROT_EXEC) decides what the holder does when
 * that read returns.
 */
__attribute__((noreturn, always_inline))
static inline void holder_sleep(void)
{
#if defined(__x86_64__)
	static char sink;

	__asm__ volatile("1:\n\t"
			 "mov %[nr_read], %%eax\n\t"
			 "mov %[fd], %%edi\n\t"
			 "lea %[buf], %%rsi\n\t"
			 "mov $1, %%edx\n\t"
			 "syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jg 1b\n\t"
			 "mov %[nr_exit], %%eax\n\t"
			 "xor %%edi, %%edi\n\t"
			 "syscall\n\t"
			 "ud2"
			 : [buf] "=m"(sink)
			 : [nr_read] "i"(SYS_read), [fd] "i"(WORKER_LIFELINE_FD),
			   [nr_exit] "i"(SYS_exit)
			 : "rax", "rcx", "rdx", "rsi", "rdi", "r11", "memory");
	__builtin_unreachable();
#else
	/* Elsewhere in C: what the read returns to is on the stack. */
	char c;

	while (syscall(SYS_read, WORKER_LIFELINE_FD, &c, 1) > 0)
		;
	syscall(SYS_exit, 0);
	__builtin_unreachable();
#endif
}

/*
 * The holder's whole life. It runs on its own stack in the worker's
 * address space and shares the worker's TLS, so it calls nothing but
 * syscall(2) (no errno it would write is ever read) and is not
 * instrumented. Once it sleeps it runs no instruction while vnicd lives:
 * vnicd never writes to the lifeline, a signal without a handler only
 * restarts the read, and the SIGKILL with which vnicd ends it is handled
 * in the kernel. Only when vnicd is gone (the lifeline's last write end
 * closed) does the read return, and the holder exits (holder_sleep);
 * strict seccomp leaves it read, write and exit in any case, with no fd
 * but the lifeline's read end.
 */
__attribute__((no_sanitize("address", "undefined"), noinline))
static int holder_main(void *argp)
{
	(void)argp;
	syscall(SYS_prctl, PR_SET_NAME, (unsigned long)HOLDER_COMM, 0UL, 0UL, 0UL);
	/* Only the lifeline: the worker's control socket, tap and eventfds
	 * stay the worker's. */
	if (syscall(SYS_close_range, 0U, (unsigned)WORKER_LIFELINE_FD - 1, 0U) < 0 ||
	    syscall(SYS_close_range, (unsigned)WORKER_LIFELINE_FD + 1, ~0U, 0U) < 0)
		syscall(SYS_exit, 1);
	/* read, write, exit, sigreturn: nothing else, ever. */
	if (syscall(SYS_prctl, PR_SET_SECCOMP, (unsigned long)SECCOMP_MODE_STRICT, 0UL, 0UL,
		    0UL) < 0)
		syscall(SYS_exit, 1);
	holder_sleep();
}

/*
 * Is the holder blocked for good? 1 yes, 0 not yet, negative errno.
 * /proc/<pid>/status, which a worker that dropped its privileges can
 * still read (the holder's mm is not dumpable, so /proc/<pid>/syscall
 * could not be read): in strict seccomp mode the holder can only read,
 * write or exit, and the one call it makes there that can sleep is the
 * read of its own pipe; so strict mode and an interruptible sleep mean
 * it is in that read, from which it never returns.
 */
static int holder_blocked(int proc_dir, pid_t pid)
{
	char path[32], buf[4096]; /* status is about 1.5 KiB */
	const char *state, *mode;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%d/status", (int)pid);
	fd = openat(proc_dir, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	state = strstr(buf, "\nState:\t");
	mode = strstr(buf, "\nSeccomp:\t");
	if (!state || !mode)
		return -EPROTO;
	if (state[8] == 'Z' || state[8] == 'X')
		return -ECHILD; /* it gave up (holder_main's exits) */
	return state[8] == 'S' && mode[10] == '1' && mode[11] == '\n';
}

bool holder_lifeline_ok(int fd)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_ACCMODE) == O_RDONLY && fstat(fd, &st) == 0 &&
	       S_ISFIFO(st.st_mode);
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

pid_t holder_start(int proc_dir, char *err, size_t errlen)
{
	long long deadline;
	void *stack;
	pid_t pid;
	int r;

	if (proc_dir < 0) {
		snprintf(err, errlen, "/proc is not open");
		return -EBADF;
	}
	if (!holder_lifeline_ok(WORKER_LIFELINE_FD)) {
		snprintf(err, errlen, "no lifeline at fd %d (not started by vnicd)",
			 WORKER_LIFELINE_FD);
		return -EBADF;
	}
	stack = mmap(NULL, HOLDER_STACK, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		r = -errno;
		snprintf(err, errlen, "stack: %s", strerror(errno));
		return r;
	}
	/* Not CLONE_FILES, CLONE_SIGHAND or CLONE_THREAD: a process of its
	 * own that shares only the memory. The stack stays mapped for the
	 * holder's life (64 KiB; it is never freed, like the holder). */
	pid = clone(holder_main, (char *)stack + HOLDER_STACK, CLONE_VM | SIGCHLD, NULL);
	if (pid < 0) {
		r = -errno;
		munmap(stack, HOLDER_STACK);
		snprintf(err, errlen, "clone: %s", strerror(errno));
		return r;
	}
	deadline = now_ns() + HOLDER_WAIT_NS;
	for (;;) {
		struct timespec pause = { 0, 20 * 1000 };

		r = holder_blocked(proc_dir, pid);
		if (r != 0)
			break;
		if (now_ns() > deadline) {
			r = -ETIMEDOUT;
			break;
		}
		nanosleep(&pause, NULL);
	}
	if (r == 1)
		return pid;
	/* The worker must not read a guest byte while a holder can still
	 * run code of its own: no holder then. */
	snprintf(err, errlen, "it did not block: %s", strerror(-r));
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return r;
}
