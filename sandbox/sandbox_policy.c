/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sandbox_policy: what a vnicd-worker may do once sandbox_enter() returned.
 *
 * This table is the whole policy (issue 4, TESTPLAN "Sandbox policy
 * notes"). Anything not listed traps and kills the worker, notably: socket,
 * connect, bind, execve, execveat, fork, vfork, clone, clone3 (the worker is
 * single-threaded), ptrace, process_vm_readv/writev, userfaultfd, bpf,
 * perf_event_open, io_uring_*, memfd_create, keyctl, kcmp, rt_sigaction,
 * prctl, setuid & co, mount, kill, tgkill.
 *
 * Why each group is here:
 *   I/O on held fds   read/write (tap, eventfds), readv/writev (tap frames
 *                     straight from guest memory), recvmsg/sendmsg (the
 *                     supervisor channel, fds arrive by SCM_RIGHTS).
 *   event loop        libevent 2.1 on Linux: epoll_ctl, epoll_wait (seen
 *                     under strace); epoll_pwait for other libcs.
 *                     timerfd_* for timed notification mitigation.
 *   memory            mmap/mprotect never with PROT_EXEC (only R/W bits),
 *                     mmap flags limited to what malloc and memtable_map
 *                     use; mremap only MAYMOVE (glibc realloc); madvise
 *                     only DONTNEED (malloc trim) and DONTDUMP.
 *   memtable_map      fstat (newfstatat with AT_EMPTY_PATH in glibc 2.33+)
 *                     and fcntl(F_GET_SEALS) check a received memfd.
 *   misc              futex without PI/requeue ops, clocks (vDSO fallback),
 *                     signal mask and return, exit.
 *   AF_PACKET         getsockopt only SOL_PACKET PACKET_STATISTICS (the
 *                     frames the kernel dropped, RX ring full).
 *   tap               ioctl only TUNSETOFFLOAD and TUNSETVNETHDRSZ (set when
 *                     the guest negotiates features) and FIONBIO; the whole
 *                     32-bit request number is compared (the kernel takes
 *                     an unsigned int; higher bits are ignored by it).
 *   EACCES group      open/stat family: libc and libraries that probe a
 *                     file get an error instead of killing the worker
 *                     (the root is empty anyway).
 */
#include "config.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "sandbox_policy.h"

#define NCOND(...) (sizeof((struct sandbox_cond[]){ __VA_ARGS__ }) / sizeof(struct sandbox_cond))

#define ALLOW(sc)           { #sc, SANDBOX_ALLOW, 0, { { 0, 0, 0, NULL } } }
#define ALLOW_IF(sc, ...)   { #sc, SANDBOX_ALLOW, NCOND(__VA_ARGS__), { __VA_ARGS__ } }
#define EACCES(sc)          { #sc, SANDBOX_EACCES, 0, { { 0, 0, 0, NULL } } }
#define EACCES_IF(sc, ...)  { #sc, SANDBOX_EACCES, NCOND(__VA_ARGS__), { __VA_ARGS__ } }

/* Argument i, an int or unsigned int in the kernel, equals v. */
#define EQ32(i, v)          { i, 0xffffffffu, (uint64_t)(v), #v }
/* Argument i, an int in the kernel, equals v once the bits in ignore are dropped. */
#define EQ32_IGNORING(i, v, ignore) \
	{ i, 0xffffffffu & ~(uint64_t)(ignore), (uint64_t)(v), #v " (any " #ignore ")" }
/* Argument i has no bits set outside allowed. */
#define ONLY(i, allowed)    { i, ~(uint64_t)(allowed), 0, "only " #allowed }
#define SET(i, bit)         { i, (uint64_t)(bit), (uint64_t)(bit), #bit " set" }
#define CLEAR(i, bit)       { i, (uint64_t)(bit), 0, #bit " clear" }

const struct sandbox_rule sandbox_policy[] = {
	/* I/O on the fds the worker holds */
	ALLOW(read),
	ALLOW(write),
	ALLOW(readv),
	ALLOW(writev),
	ALLOW(recvmsg),
	ALLOW(sendmsg),
	ALLOW(close),
	/* kick eventfds and a tap the VMM shares: per-call RWF_NOWAIT
	 * (workers/worker_fds.c, net_priv.h) */
	ALLOW(preadv2),
	ALLOW(pwritev2),
	/* call eventfd: writable? (POLLOUT, timeout 0) */
	ALLOW(poll),
	ALLOW(ppoll),

	/* event loop */
	ALLOW(epoll_ctl),
	ALLOW(epoll_wait),
	ALLOW(epoll_pwait),
	ALLOW(timerfd_create),
	ALLOW(timerfd_settime),
	ALLOW(timerfd_gettime),

	/* memory: never executable */
	ALLOW_IF(mmap, ONLY(2, PROT_READ | PROT_WRITE),
		 ONLY(3, MAP_SHARED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
			 MAP_FIXED | MAP_FIXED_NOREPLACE)),
	ALLOW_IF(mprotect, ONLY(2, PROT_READ | PROT_WRITE)),
	ALLOW_IF(mremap, ONLY(3, MREMAP_MAYMOVE)),
	ALLOW(munmap),
	ALLOW_IF(madvise, EQ32(2, MADV_DONTNEED)),
	ALLOW_IF(madvise, EQ32(2, MADV_DONTDUMP)),
	ALLOW(brk),

	/* checking a received memfd (memtable_map) */
	ALLOW(fstat),
	ALLOW_IF(newfstatat, SET(3, AT_EMPTY_PATH)),
	ALLOW_IF(fcntl, EQ32(1, F_GET_SEALS)),

	/* fd flags (libevent sets O_NONBLOCK) */
	ALLOW_IF(fcntl, EQ32(1, F_GETFD)),
	ALLOW_IF(fcntl, EQ32(1, F_SETFD)),
	ALLOW_IF(fcntl, EQ32(1, F_GETFL)),
	ALLOW_IF(fcntl, EQ32(1, F_SETFL)),

	/* AF_PACKET: the kernel's drop count of a full RX ring */
	ALLOW_IF(getsockopt, EQ32(1, SOL_PACKET), EQ32(2, PACKET_STATISTICS)),

	/* tap */
	ALLOW_IF(ioctl, EQ32(1, TUNSETOFFLOAD)),
	ALLOW_IF(ioctl, EQ32(1, TUNSETVNETHDRSZ)),
	ALLOW_IF(ioctl, EQ32(1, FIONBIO)),

	/* futex: plain wait and wake only */
	ALLOW_IF(futex, EQ32_IGNORING(1, FUTEX_WAIT, FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME)),
	ALLOW_IF(futex, EQ32_IGNORING(1, FUTEX_WAKE, FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME)),
	ALLOW_IF(futex, EQ32_IGNORING(1, FUTEX_WAIT_BITSET, FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME)),
	ALLOW_IF(futex, EQ32_IGNORING(1, FUTEX_WAKE_BITSET, FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME)),

	/* time (the vDSO normally answers without a syscall) */
	ALLOW(clock_gettime),
	ALLOW(gettimeofday),
	ALLOW(clock_nanosleep),
	ALLOW(restart_syscall),
	/* the bound around a call eventfd write (SIGALRM, no SA_RESTART) */
	ALLOW(setitimer),

	/* signals, identity, exit */
	ALLOW(rt_sigreturn),
	ALLOW(rt_sigprocmask),
	ALLOW(getpid),
	ALLOW(gettid),
	ALLOW(exit),
	ALLOW(exit_group),

	/* refused gracefully: libc probes files */
	EACCES(open),
	EACCES(openat),
	EACCES(openat2),
	EACCES(stat),
	EACCES(lstat),
	EACCES_IF(newfstatat, CLEAR(3, AT_EMPTY_PATH)),
	EACCES(statx),
	EACCES(access),
	EACCES(faccessat),
	EACCES(faccessat2),
	EACCES(readlink),
	EACCES(readlinkat),
};
const unsigned sandbox_policy_len = sizeof(sandbox_policy) / sizeof(sandbox_policy[0]);

#ifdef VNIC_SANITIZERS
/*
 * Sanitizer builds only (--enable-sanitizers): what ASan/UBSan need inside
 * the sandbox, found by running the tests under the filter. Never in a
 * production build; not in the golden dump.
 */
static const struct sandbox_rule sanitizer_rules[] = {
	/* ASan maps shadow memory for new heap regions without huge pages */
	ALLOW_IF(madvise, EQ32(2, MADV_NOHUGEPAGE)),
	/* libasan's _exit() path calls sigaltstack when leak detection is
	 * on (a sandboxed program ending in _exit died without this row) */
	ALLOW(sigaltstack),
	/* an error report first asks whether stderr is a terminal (colour) */
	ALLOW_IF(ioctl, EQ32(1, TCGETS)),
	/* abort_on_error=1: abort() raises SIGABRT with tgkill, so the
	 * supervisor sees the sanitizer's SIGABRT, not a sandbox violation */
	ALLOW_IF(tgkill, EQ32(2, SIGABRT)),
	/* UBSan's report probes whether memory near the bad pointer is
	 * readable by writing it into a fresh pipe (IsAccessibleMemoryRange) */
	ALLOW(pipe2),
};
const struct sandbox_rule *const sandbox_policy_sanitizer = sanitizer_rules;
const unsigned sandbox_policy_sanitizer_len = sizeof(sanitizer_rules) / sizeof(sanitizer_rules[0]);
#else
const struct sandbox_rule *const sandbox_policy_sanitizer = NULL;
const unsigned sandbox_policy_sanitizer_len = 0;
#endif
