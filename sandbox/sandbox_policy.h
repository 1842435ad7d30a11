/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sandbox_policy: the worker's seccomp policy as data (internal to sandbox/).
 *
 * One row per rule. Rows for the same syscall are alternatives (any one
 * matching lets the call through); the conditions inside one row must all
 * hold. Every call no row matches gets the default action (see sandbox.h).
 */
#ifndef VNIC_SANDBOX_POLICY_H
#define VNIC_SANDBOX_POLICY_H

#include <stdint.h>

enum sandbox_action {
	SANDBOX_ALLOW,  /* run the call */
	SANDBOX_EACCES, /* fail it with EACCES: libc probes files and copes */
};

/* One argument condition: (arg[index] & mask) == value, in 64 bits. */
struct sandbox_cond {
	unsigned index;
	uint64_t mask;
	uint64_t value;
	const char *what; /* the same condition in names, for the dump */
};

#define SANDBOX_MAX_CONDS 2

struct sandbox_rule {
	const char *name; /* syscall name as libseccomp knows it */
	enum sandbox_action action;
	unsigned ncond;
	struct sandbox_cond cond[SANDBOX_MAX_CONDS];
};

/* The production policy, and its length. */
extern const struct sandbox_rule sandbox_policy[];
extern const unsigned sandbox_policy_len;

/* Rows added in sanitizer builds only (VNIC_SANITIZERS); length 0 otherwise. */
extern const struct sandbox_rule *const sandbox_policy_sanitizer;
extern const unsigned sandbox_policy_sanitizer_len;

#endif
