/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnicctl: its one command table. Every command, whichever file holds
 * it, is a row of vnicctl_cmds (vnicctl.c): one dispatcher parses the
 * options, checks the operands and runs it, and --help is made from it.
 */
#ifndef VNIC_VNICCTL_H
#define VNIC_VNICCTL_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "libvnic.h"

/* What the dispatcher hands a command: the global options, the command's
 * own (filled by its opt hook) and, once vnicctl_connect ran, vnicd. */
struct vnicctl {
	const struct vnicctl_cmd *cmd;
	const char *socket;
	bool json;
	struct vnic_conn *conn;            /* closed by the dispatcher */
	struct vnic_hello_info hello;
	/* status */
	bool watch;
	double interval;
	long count;
	/* set-policy */
	bool policy_set;
	struct vnic_policy policy;
	/* add, remove */
	struct vnic_vhost_user_config vu;
	int vu_mode;                       /* 1 --server, 2 --client, 3 both */
	unsigned long deadline_ms;
	/* upgrade */
	double wait_s;
};

struct vnicctl_cmd {
	const char *name;
	const char *usage;                 /* its operands and options, for --help */
	unsigned min_args, max_args;       /* operands after the name */
	const struct option *opts;         /* its own options besides the global ones */
	const char *shortopts;             /* their one-letter forms, "" for none */
	/* One of opts was given: 0, or 2 (a message on stderr) for a bad value. */
	int (*opt)(struct vnicctl *v, int opt, const char *arg);
	/* Run with its operands; returns the exit status (0, 1 error, 2 usage). */
	int (*run)(struct vnicctl *v, char **args, unsigned nargs);
};

/* vnicctl_usage - the usage of every command (cmd NULL), or of one. */
void vnicctl_usage(FILE *f, const struct vnicctl_cmd *cmd);
/* vnicctl_usage_error - v's command's usage on stderr; returns 2. */
int vnicctl_usage_error(const struct vnicctl *v);
/* vnicctl_connect - connect to v->socket and say Hello; 1 with a message
 * on stderr when that fails. */
int vnicctl_connect(struct vnicctl *v);
/* --OPT V: a TX mode name (libvnic's); -1 with a message on stderr. */
int vnicctl_parse_mode(const char *opt, const char *v, enum vnic_mitigation *ret);

/* add / remove (vnicctl_endpoint.c): their rows' hooks. */
extern const struct option vnicctl_add_opts[], vnicctl_remove_opts[];
int vnicctl_add_opt(struct vnicctl *v, int opt, const char *arg);
int vnicctl_add_run(struct vnicctl *v, char **args, unsigned nargs);
int vnicctl_remove_opt(struct vnicctl *v, int opt, const char *arg);
int vnicctl_remove_run(struct vnicctl *v, char **args, unsigned nargs);

#endif
