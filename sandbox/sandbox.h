/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sandbox: confine a vnicd-worker (seccomp allow-list, rlimits, empty root).
 *
 * A guest that finds a bug in the ring code must land in a process that can
 * only read and write the fds it holds, map memory it is sent, and exit.
 * The worker sheds privilege in this fixed order (each step needs what the
 * previous ones still have; see also privdrop.h):
 *
 *   privdrop_resolve(user)    getpwnam reads /etc/passwd, may open sockets
 *   sandbox_isolate()         new mount/ipc/net namespaces, empty root:
 *                             needs CAP_SYS_ADMIN, so before the uid drop;
 *                             the worker does it before its Config
 *   receive config and fds, map guest memory        (fds only, no paths)
 *   privdrop_close_fds_except(keep)   also closes what getpwnam left open
 *   privdrop_to(uid, gid)     setgroups, setresgid, setresuid; loses caps
 *                             (it clears PR_SET_PDEATHSIG: set it again here)
 *   holder_start()            the worker's holder (workers/holder.h), as
 *                             that user, while clone is still allowed
 *   sandbox_rlimits(nofile)   NPROC 0, FSIZE 0, CORE 0, NOFILE tight
 *   sandbox_enter(&cfg)       NO_NEW_PRIVS, then the seccomp filter
 *   send READY
 *
 * Only sandbox_enter() is needed for the filter; the other steps are
 * separate calls so the worker's startup can be read as the list above.
 *
 * Violations (TESTPLAN S1). A call outside the policy raises SIGSYS
 * (SCMP_ACT_TRAP). The handler stores one struct sandbox_report at
 * cfg->report (shared memory) and then gets the process killed by SIGSYS:
 * the handler is installed with SA_RESETHAND, so it re-issues a call the
 * filter traps (SANDBOX_SENTINEL_NR) and the kernel's default action for
 * the now unhandled SIGSYS ends the whole process. The supervisor thus sees
 * WTERMSIG == SIGSYS as with SCMP_ACT_KILL_PROCESS, and in addition the
 * syscall number and architecture in the record. Trap was chosen over
 * KILL_PROCESS only for that record: the issue asks for the syscall number,
 * and KILL_PROCESS leaves it only in the audit log. The handler uses no
 * libc state (no malloc, no stdio), only plain stores and the sentinel call.
 * The price: an attacker who already runs arbitrary code in the worker could
 * return from the handler instead of dying; the forbidden call has still not
 * been executed, so confinement holds, only the kill becomes a refusal.
 * Calls of a foreign ABI (i386 int 0x80, x32 numbers with __X32_SYSCALL_BIT)
 * are never accidents: they kill at once (SCMP_ACT_KILL_PROCESS, no record).
 * If SIGSYS is blocked when a violation happens, the kernel kills at once
 * and no record is written either. If the process ever survived the
 * sentinel (it cannot while the filter is loaded), it _exits with
 * SANDBOX_EXIT_VIOLATION.
 *
 * The record goes to memory the supervisor shares with the worker (vnicd
 * uses the worker's stats page, workers/stats.h): a store cannot block or
 * fail, costs no fd and no syscall, and the supervisor reads it after the
 * worker died and passes the bytes to sandbox_parse_report(). It clears the
 * record before each worker starts, so a record is always the last worker's.
 * (Until issue 15 the record went through a pipe, one more fd per worker on
 * both sides.)
 *
 * The policy (sandbox_policy.c) is one table; sandbox_policy_dump() prints
 * it sorted, and tests/sandbox-policy.golden holds the expected output
 * (TESTPLAN S2), so every policy change is a visible diff.
 *
 * Library code: never logs, returns 0 or a negative errno.
 */
#ifndef VNIC_SANDBOX_H
#define VNIC_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>

/* What sandbox_enter() does. */
enum sandbox_mode {
	SANDBOX_MODE_ENFORCE = 0, /* the default: NO_NEW_PRIVS + filter */
	SANDBOX_MODE_OFF = 1,     /* debugging only (--sandbox=off): NO_NEW_PRIVS, no filter */
};

struct sandbox_cfg {
	enum sandbox_mode mode;
	/* Where the SIGSYS handler stores its record (shared memory that
	 * outlives the process), or NULL for none. Must stay mapped. */
	struct sandbox_report *report;
};

/* sandbox_enter() returns this (positive) when cfg->mode is
 * SANDBOX_MODE_OFF, so the caller cannot take "off" for success silently:
 * it must log it loudly and show it in the NIC's status. */
#define SANDBOX_DISABLED 1

/*
 * sandbox_enter - set PR_SET_NO_NEW_PRIVS, install the SIGSYS reporter and
 * load the seccomp filter. Call last, after every other step above: from
 * here on only the calls in the policy table work (open/stat fail with
 * EACCES, everything unlisted kills). Single-threaded callers only (no
 * TSYNC: the worker never starts threads).
 * It refuses a process whose personality has READ_IMPLIES_EXEC (PROT_READ
 * would then give executable mappings past the PROT_EXEC filter).
 * In sanitizer builds LeakSanitizer's leak check runs here or in
 * sandbox_isolate(), whichever comes first (its end-of-process check needs
 * /proc, clone and ptrace); leaks of the sandboxed phase go unreported.
 * Returns: 0 when the filter is in place; SANDBOX_DISABLED when cfg->mode
 * is SANDBOX_MODE_OFF (only NO_NEW_PRIVS set); a negative errno on failure
 * (the filter may or may not be loaded then: the caller must exit).
 */
int sandbox_enter(const struct sandbox_cfg *cfg);

/*
 * sandbox_rlimits - hard and soft RLIMIT_NPROC 0 (no fork; not enforced
 * for root, so call after privdrop_to), RLIMIT_FSIZE 0 (no file growth),
 * RLIMIT_CORE 0 (no core with guest memory in it), RLIMIT_NOFILE @nofile.
 * @nofile: one more than the highest fd number the process will ever
 * need, including fds still to be received (SCM_RIGHTS) or created
 * (timerfd); existing fds above it keep working. Must be >= 1.
 * Returns: 0 or a negative errno.
 */
int sandbox_rlimits(unsigned nofile);

/*
 * sandbox_isolate - new mount, IPC and network namespaces, and an empty,
 * read-only root: a private tmpfs (mode 0, nodev, nosuid, noexec) becomes
 * "/" by pivot_root and the old root is detached. Afterwards no path
 * resolves to anything (no /proc, no /dev). Fds held keep working, a tap fd
 * included (it stays bound to its device in the original namespace).
 * Needs CAP_SYS_ADMIN: call before privdrop_to().
 * Returns: 0 or a negative errno (the process may be half way, e.g. in a
 * new namespace with the old root: the caller must exit).
 */
int sandbox_isolate(void);

/*
 * The record the SIGSYS handler writes (host byte order; both ends run on
 * the same machine).
 */
#define SANDBOX_REPORT_MAGIC 0x58425356u /* "VSBX" little-endian */
struct sandbox_report {
	uint32_t magic;    /* SANDBOX_REPORT_MAGIC */
	uint32_t arch;     /* AUDIT_ARCH_* of the call (si_arch) */
	int32_t nr;        /* syscall number (si_syscall) */
	uint32_t reserved; /* 0 */
	uint64_t ip;       /* address of the calling instruction (si_call_addr) */
};

/* Exit status of a violating process that somehow survived the SIGSYS
 * default action (never seen while the filter is loaded). 128 + SIGSYS. */
#define SANDBOX_EXIT_VIOLATION 159

/* The call the handler re-issues so that the filter traps again with
 * SIGSYS reset to its default action. Never in the policy (tested); has
 * no effect if it ever ran unfiltered. */
#define SANDBOX_SENTINEL_NR SYS_getppid

/* A parsed violation, for the supervisor's status line. */
struct sandbox_violation {
	int nr;            /* syscall number */
	uint32_t arch;     /* AUDIT_ARCH_* */
	uint64_t ip;
	char name[32];     /* "socket", or "nr 12345" when unknown */
};

/*
 * sandbox_parse_report - validate @len bytes copied from the record.
 * Untrusted input (it comes from a possibly compromised worker): only the
 * magic and the size are checked, and the name is looked up, never used
 * as a format. Returns: 0 with *ret filled, -EINVAL if the bytes are not
 * exactly one record.
 */
int sandbox_parse_report(const void *buf, size_t len, struct sandbox_violation *ret);

/*
 * sandbox_policy_dump - print the production policy, one line per rule,
 * sorted by syscall name (then table order), with the argument conditions
 * in numbers and names. Sanitizer-build additions are not printed.
 */
void sandbox_policy_dump(FILE *out);

/*
 * sandbox_policy_allows - whether any rule of the production table (plus
 * the sanitizer additions in sanitizer builds) lets the named syscall run
 * for some arguments (EACCES rows do not count). For tests.
 */
bool sandbox_policy_allows(const char *name);

#endif
