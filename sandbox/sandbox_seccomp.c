/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sandbox_seccomp: load the policy table as a libseccomp filter, the SIGSYS
 * reporter, rlimits and the empty root. Contracts in sandbox.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef VNIC_SANITIZERS
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

#include "sandbox.h"
#include "sandbox_policy.h"

/* si_code of a SIGSYS raised by seccomp (asm-generic/siginfo.h; glibc
 * does not export it). */
#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1
#endif

/* Read by the SIGSYS handler; set once before the filter is loaded. */
static struct sandbox_report *volatile report_at;

/*
 * The SIGSYS handler. Async-signal-safe by construction: raw syscalls
 * only, no libc state, and errno is not needed since it never returns.
 * SA_RESETHAND has already put SIGSYS back to its default action, so the
 * sentinel call (trapped by the filter) makes the kernel kill the whole
 * process with SIGSYS, which is what the supervisor waits for.
 */
static void sigsys_handler(int sig, siginfo_t *si, void *uctx)
{
	struct sandbox_report r = {
		.magic = SANDBOX_REPORT_MAGIC,
		.arch = 0,
		.nr = -1, /* a SIGSYS sent by someone, not by seccomp */
		.reserved = 0,
		.ip = 0,
	};
	struct sandbox_report *out = report_at;

	(void)sig;
	(void)uctx;
	if (si->si_code == SYS_SECCOMP) {
		r.arch = si->si_arch;
		r.nr = si->si_syscall;
		r.ip = (uint64_t)(uintptr_t)si->si_call_addr;
	}
	if (out) {
		/* The fields, then the magic with a release store: a reader
		 * that sees the magic sees the rest (the supervisor reads
		 * only after the death, so this is belt and braces). */
		out->arch = r.arch;
		out->nr = r.nr;
		out->reserved = 0;
		out->ip = r.ip;
		__atomic_store_n(&out->magic, r.magic, __ATOMIC_RELEASE);
	}
	(void)syscall(SANDBOX_SENTINEL_NR);
	syscall(SYS_exit_group, SANDBOX_EXIT_VIOLATION);
	for (;;)
		;
}

/*
 * LeakSanitizer's end-of-process check reads /proc/<pid>/task, clones a
 * tracer thread and ptraces: neither the empty root nor the filter allows
 * that. In sanitizer builds, check now (at the first of sandbox_isolate()
 * and sandbox_enter()); this also turns the check at exit off, so leaks
 * of the sandboxed phase go unreported.
 */
static void sanitizer_last_leak_check(void)
{
#ifdef VNIC_SANITIZERS
	__lsan_do_leak_check();
	/* The runtime's hook for exactly this: cache /proc/self/maps and the
	 * module list while they can still be read. */
	__sanitizer_sandbox_on_notify(NULL);
#endif
}

static uint32_t action_of(enum sandbox_action a)
{
	return a == SANDBOX_EACCES ? SCMP_ACT_ERRNO(EACCES) : SCMP_ACT_ALLOW;
}

static int add_rules(scmp_filter_ctx ctx, const struct sandbox_rule *rules, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		const struct sandbox_rule *r = &rules[i];
		struct scmp_arg_cmp cmp[SANDBOX_MAX_CONDS];
		int nr = seccomp_syscall_resolve_name(r->name);
		int rc;

		/* A name libseccomp does not know for this arch is a table bug. */
		if (nr == __NR_SCMP_ERROR)
			return -ENOENT;
		if (r->ncond > SANDBOX_MAX_CONDS)
			return -EINVAL;
		for (unsigned c = 0; c < r->ncond; c++) {
			cmp[c].arg = r->cond[c].index;
			cmp[c].op = SCMP_CMP_MASKED_EQ;
			cmp[c].datum_a = r->cond[c].mask;
			cmp[c].datum_b = r->cond[c].value;
		}
		/* _exact: fail rather than let libseccomp rewrite a rule. */
		rc = seccomp_rule_add_exact_array(ctx, action_of(r->action), nr, r->ncond, cmp);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Build the filter: native arch only, default trap, foreign ABIs killed. */
static int build_filter(scmp_filter_ctx *ret_ctx)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	int rc;

	if (!ctx)
		return -ENOMEM;
	/* seccomp_init holds only the native arch (x86_64: not x32, not i386),
	 * so calls with another AUDIT_ARCH, or x86_64 calls with the x32
	 * bit, take the bad-arch action. */
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (rc < 0)
		goto out_release;
	rc = add_rules(ctx, sandbox_policy, sandbox_policy_len);
	if (rc < 0)
		goto out_release;
	rc = add_rules(ctx, sandbox_policy_sanitizer, sandbox_policy_sanitizer_len);
	if (rc < 0)
		goto out_release;
	*ret_ctx = ctx;
	return 0;

out_release:
	seccomp_release(ctx);
	return rc;
}

int sandbox_enter(const struct sandbox_cfg *cfg)
{
	struct sigaction sa, old_sa;
	sigset_t sigsys;
	scmp_filter_ctx ctx;
	int pers, rc;

	if (!cfg || (cfg->mode != SANDBOX_MODE_ENFORCE && cfg->mode != SANDBOX_MODE_OFF))
		return -EINVAL;
	/* No setuid binary, file capability or LSM transition can give
	 * privileges back from here on; required for an unprivileged filter. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (cfg->mode == SANDBOX_MODE_OFF)
		return SANDBOX_DISABLED;

	/* READ_IMPLIES_EXEC would make every PROT_READ mapping executable,
	 * defeating the "only PROT_READ|PROT_WRITE" rules. */
	pers = personality(0xffffffff);
	if (pers < 0)
		return -errno;
	if (pers & READ_IMPLIES_EXEC)
		return -EPERM;

	rc = build_filter(&ctx);
	if (rc < 0)
		return rc;

	sanitizer_last_leak_check();

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sigsys_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	report_at = cfg->report;
	if (sigaction(SIGSYS, &sa, &old_sa) < 0) {
		rc = -errno;
		goto out_release;
	}
	/* A blocked SIGSYS would be delivered with the default action: the
	 * process would still die, but without a record. */
	sigemptyset(&sigsys);
	sigaddset(&sigsys, SIGSYS);
	if (sigprocmask(SIG_UNBLOCK, &sigsys, NULL) < 0) {
		rc = -errno;
		goto out_restore;
	}

	rc = seccomp_load(ctx);
	if (rc < 0)
		goto out_restore;
	seccomp_release(ctx); /* free() and munmap only: both allowed */
	return 0;

out_restore:
	sigaction(SIGSYS, &old_sa, NULL);
	report_at = NULL;
out_release:
	seccomp_release(ctx);
	return rc;
}

int sandbox_rlimits(unsigned nofile)
{
	static const struct {
		int resource;
		bool nofile;
	} limits[] = {
		{ RLIMIT_NPROC, false },  /* no fork (not enforced for root) */
		{ RLIMIT_FSIZE, false },  /* no file can grow */
		{ RLIMIT_CORE, false },   /* no core file holding guest memory */
		{ RLIMIT_NOFILE, true },  /* no fd numbers beyond what is needed */
	};

	if (nofile == 0)
		return -EINVAL;
	for (unsigned i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		rlim_t v = limits[i].nofile ? (rlim_t)nofile : 0;
		struct rlimit rl = { .rlim_cur = v, .rlim_max = v };

		if (setrlimit(limits[i].resource, &rl) < 0)
			return -errno;
	}
	return 0;
}

int sandbox_isolate(void)
{
	struct statfs sfs;
	struct stat st;

	sanitizer_last_leak_check();
	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET) < 0)
		return -errno;
	/* Nothing we mount or unmount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	/* The new root: a read-only tmpfs whose only directory has mode 0. */
	if (mount("vnicd-empty", "/", "tmpfs", MS_RDONLY | MS_NODEV | MS_NOSUID | MS_NOEXEC,
		  "size=4k,nr_inodes=1,mode=0") < 0)
		return -errno;
	/* "/" still names the old root dentry; "/.." steps onto the mount
	 * stacked on it. pivot_root(".", ".") then stacks the old root on
	 * top of the new one, and detaching it leaves only the tmpfs. */
	if (chdir("/..") < 0)
		return -errno;
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return -errno;
	if (umount2(".", MNT_DETACH) < 0)
		return -errno;
	if (chdir("/") < 0)
		return -errno;
	/* Verify rather than trust the path walk above. */
	if (statfs("/", &sfs) < 0 || stat("/", &st) < 0)
		return -errno;
	if (sfs.f_type != TMPFS_MAGIC || (st.st_mode & 07777) != 0 || !(sfs.f_flags & ST_RDONLY))
		return -EIO;
	return 0;
}

int sandbox_parse_report(const void *buf, size_t len, struct sandbox_violation *ret)
{
	struct sandbox_report r;
	struct sandbox_violation v;
	char *name;

	if (!buf || !ret || len != sizeof(r))
		return -EINVAL;
	memcpy(&r, buf, sizeof(r));
	if (r.magic != SANDBOX_REPORT_MAGIC || r.reserved != 0)
		return -EINVAL;
	memset(&v, 0, sizeof(v));
	v.nr = r.nr;
	v.arch = r.arch;
	v.ip = r.ip;
	name = r.arch ? seccomp_syscall_resolve_num_arch(r.arch, r.nr) : NULL;
	if (name && strlen(name) < sizeof(v.name))
		memcpy(v.name, name, strlen(name) + 1);
	else
		snprintf(v.name, sizeof(v.name), "nr %d", r.nr);
	free(name);
	*ret = v;
	return 0;
}

/* Sort key for the dump: name, then table order (qsort is not stable). */
static int rule_cmp(const void *a, const void *b)
{
	const struct sandbox_rule *const *ra = a, *const *rb = b;
	int c = strcmp((*ra)->name, (*rb)->name);

	if (c)
		return c;
	return *ra < *rb ? -1 : *ra > *rb;
}

void sandbox_policy_dump(FILE *out)
{
	const struct sandbox_rule **sorted;
	const char *arch = "unknown";
	uint32_t native = seccomp_arch_native();

	if (native == SCMP_ARCH_X86_64)
		arch = "x86_64";
	else if (native == SCMP_ARCH_AARCH64)
		arch = "aarch64";
	fprintf(out, "# vnicd-worker seccomp policy (sandbox/sandbox_policy.c), arch %s\n", arch);
	fprintf(out, "# default: trap -> report record -> killed by SIGSYS\n");
	fprintf(out, "# other ABIs (x32, i386): kill process\n");
	fprintf(out, "# argument conditions: (arg & mask) == value, all of a line must hold\n");

	sorted = calloc(sandbox_policy_len, sizeof(*sorted));
	if (!sorted) {
		fprintf(out, "# out of memory\n");
		return;
	}
	for (unsigned i = 0; i < sandbox_policy_len; i++)
		sorted[i] = &sandbox_policy[i];
	qsort(sorted, sandbox_policy_len, sizeof(*sorted), rule_cmp);
	for (unsigned i = 0; i < sandbox_policy_len; i++) {
		const struct sandbox_rule *r = sorted[i];

		const char *act = r->action == SANDBOX_EACCES ? "EACCES" : "allow";

		if (r->ncond == 0) {
			fprintf(out, "%-16s %s\n", r->name, act);
			continue;
		}
		fprintf(out, "%-16s %-6s", r->name, act);
		for (unsigned c = 0; c < r->ncond && c < SANDBOX_MAX_CONDS; c++)
			fprintf(out, "%s arg%u & 0x%llx == 0x%llx [%s]", c ? " &&" : "",
				r->cond[c].index, (unsigned long long)r->cond[c].mask,
				(unsigned long long)r->cond[c].value, r->cond[c].what);
		fputc('\n', out);
	}
	free(sorted);
}

static bool allows_in(const struct sandbox_rule *rules, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (rules[i].action == SANDBOX_ALLOW && strcmp(rules[i].name, name) == 0)
			return true;
	return false;
}

bool sandbox_policy_allows(const char *name)
{
	return allows_in(sandbox_policy, sandbox_policy_len, name) ||
	       allows_in(sandbox_policy_sanitizer, sandbox_policy_sanitizer_len, name);
}
