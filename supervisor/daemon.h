/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * daemon: vnicd's start-up checks and hygiene (issue 10).
 *
 * Before anything else vnicd closes every fd it inherited except stdio
 * and the sockets systemd passes (LISTEN_FDS, from fd 3); it refuses to
 * start, with one line on stderr, when the worker binary is missing or
 * when it lacks the capabilities its workers' sandbox needs; and it reads
 * its configuration file (--config PATH, default DAEMON_CONF_DEFAULT when
 * that exists) at start and on every SIGHUP.
 *
 * Configuration file: "KEY = VALUE" lines, '#' comments. Keys:
 *   log-level = error|warn|info|debug
 * An unknown key or a bad value is an error (at start: vnicd does not
 * start; on SIGHUP: a warning, nothing changes).
 */
#ifndef VNIC_SUP_DAEMON_H
#define VNIC_SUP_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "log.h"

#define DAEMON_CONF_DEFAULT "/etc/vnicd/vnicd.conf"

/* daemon_listen_fds - how many sockets systemd passed from fd 3
 * (LISTEN_FDS, when LISTEN_PID is ours); 0 when none. */
int daemon_listen_fds(void);

/* daemon_close_inherited - close every fd >= 3 except
 * [keep_from, keep_from + keep_n). Returns: 0 or a negative errno. */
int daemon_close_inherited(int keep_from, int keep_n);

/* daemon_check_worker - the worker binary exists and is executable.
 * Returns: 0, or a negative errno with err filled (one line). */
int daemon_check_worker(const char *path, char *err, size_t errlen);

/* daemon_check_privileges - with the sandbox on, the effective set holds
 * CAP_SYS_ADMIN, CAP_SETUID and CAP_SETGID (root has them).
 * Returns: 0, or -EPERM with err naming what is missing. */
int daemon_check_privileges(bool sandbox_off, char *err, size_t errlen);

/*
 * daemon_wait_orphans - the workers of an earlier vnicd that died (issue
 * 16): processes named vnicd-worker whose parent is now init (pid 1).
 * Each stops its queues and exits once it sees its channel close; a new
 * vnicd must serve no ring before they are gone, or two workers would run
 * one ring. Wait for them up to wait_ms, then SIGKILL what is left (and
 * wait up to 1 s more). Orphans reparented to a subreaper other than
 * init are not seen. The @nkeep pids in @keep are not waited for (the
 * workers a restart takes over from the fd store, fdstore.h).
 * Returns: 0 with how many were found and killed, or a negative errno
 * when /proc cannot be read.
 */
#define DAEMON_ORPHANS_MAX 4096
int daemon_wait_orphans(unsigned wait_ms, const pid_t *keep, size_t nkeep, unsigned *found,
			unsigned *killed);

/* CAP_NET_ADMIN, which tap backends need (a warning only without it). */
bool daemon_has_net_admin(void);

struct daemon_conf {
	bool have_log_level;
	enum log_level log_level;
};

/* One key of a strict "KEY = VALUE" file: set() takes the value (ctx is
 * the reader's; off and size are the key's own, e.g. a field's offset and
 * size in ctx) and returns 0, or a negative errno with err saying what is
 * wrong with the value (daemon_conf_parse puts file:line before it). */
struct daemon_conf_key {
	const char *name;
	int (*set)(void *ctx, const struct daemon_conf_key *k, const char *val, char *err,
		   size_t errlen);
	size_t off, size;
};

/* daemon_conf_parse - read @path strictly: '#' comments, blank lines and
 * "KEY = VALUE" lines (spaces around both trimmed; VALUE may be empty)
 * whose KEY is one of keys. The first line without '=', unknown key or
 * value its set() refuses ends the read. Used for vnicd.conf and for the
 * vhost-user state files (vhost_user_state.c).
 * Returns: 0; -EINVAL with err "file:line: what"; or a negative errno from
 * fopen with err "file: why". */
int daemon_conf_parse(const char *path, const struct daemon_conf_key *keys, size_t nkeys,
		      void *ctx, char *err, size_t errlen);

/* daemon_conf_read - parse @path (vnicd.conf). Returns: 0 and *ret; -ENOENT (and
 * others from fopen) or -EINVAL with err filled (file:line: what). */
int daemon_conf_read(const char *path, struct daemon_conf *ret, char *err, size_t errlen);

#endif
