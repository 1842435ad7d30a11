/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnicd: the privileged supervisor process.
 *
 *   vnicd [--socket PATH] [--foreground] [--group NAME]
 *         [--log-level error|warn|info|debug] [--worker PATH]
 *         [--user USER] [--sandbox=on|off] [--restart-max N] [--inflight=on|off]
 *         [--fd-store] ...
 *
 * Order at start: parse options -> bind the control socket (mode 0660,
 * group --group) -> daemonize unless --foreground (the parent exits once
 * the socket accepts connections, so `vnicd && vnicctl status` works) ->
 * one libevent base -> loop. SIGPIPE is ignored (every send uses
 * MSG_NOSIGNAL anyway). SIGTERM/SIGINT: refuse new work, stop every
 * worker (Stop, deadline, SIGKILL through the pidfd), reap them, remove
 * the socket, exit 0.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <stddef.h>
#include <unistd.h>

#include "daemon.h"
#include "fault.h"
#include "fdstore.h"
#include "handover.h"
#include "holders.h"
#include "inflight_file.h"
#include "sdnotify.h"
#include "supervisor.h"
#include "version.h"
#include "vhost_user.h"
#include "worker_spare.h"

#ifndef VNICD_WORKER_PATH
#define VNICD_WORKER_PATH "/usr/local/libexec/vnicd/vnicd-worker"
#endif
#define VNICD_DEFAULT_SOCKET "/run/vnicd/control.sock"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vnicd [--socket PATH] [--foreground] [--group NAME]\n"
		"             [--log-level error|warn|info|debug] [--worker PATH]\n"
		"             [--user USER] [--sandbox=on|off] [--restart-max N]\n"
		"             [--inflight=on|off] [--state-dir DIR] [--print-capabilities]\n"
		"             [--config PATH] [--uid-range FIRST-LAST|FIRST:COUNT]\n"
		"             [--max-queue-pairs N] [--fd-store] [--upgrade-nice N]\n"
		"  --socket PATH     control socket (default %s)\n"
		"  --foreground      do not daemonize; log to stderr\n"
		"  --group NAME      members of NAME may connect (root always may)\n"
		"  --log-level L     default info\n"
		"  --worker PATH     vnicd-worker binary (default $VNICD_WORKER, else %s)\n"
		"  --uid-range R     each NIC's worker runs as its own uid and gid from R,\n"
		"                    FIRST-LAST or FIRST:COUNT, ids no passwd/group entry uses\n"
		"                    (default %s)\n"
		"  --user USER       instead: every worker runs as USER\n"
		"  --sandbox=on|off  off: workers run WITHOUT seccomp, uid drop or empty root;\n"
		"                    for debugging only (default on)\n"
		"  --restart-max N   restarts of a crashed worker allowed within %d s, 0..%d;\n"
		"                    one more death leaves the NIC FAILED (default %d)\n"
		"  --inflight=on|off off: no inflight region; a restarted worker may then lose\n"
		"                    or repeat chains in flight (for measuring its cost; default on)\n"
		"  --max-queue-pairs N  queue pairs a vhost-user endpoint serves, each with a\n"
		"                    worker of its own, 1..%u (default %u)\n"
		"  --state-dir DIR   vhost-user endpoints are saved there and re-created at start\n"
		"                    (default: \"endpoints\" beside the socket; \"\": not saved);\n"
		"                    on tmpfs, with every NIC's inflight region (no --fd-store)\n"
		"  --print-capabilities  vhost-user back-end capabilities (JSON), then exit\n"
		"  --fd-store        under systemd (FileDescriptorStoreMax=): keep every fd\n"
		"                    and the state in systemd's fd store, so that a vnicd\n"
		"                    restarted after a crash takes over with nothing stopped\n"
		"  --upgrade-nice N  nice value of an upgrade in place until the new binary has\n"
		"                    taken over, 0..19; 0: vnicd's own (default %d)\n"
		"  --config PATH     configuration file, read at start and on SIGHUP\n"
		"                    (default %s when it exists)\n"
		"  --version         print the version and exit\n",
		VNICD_DEFAULT_SOCKET, VNICD_WORKER_PATH, UIDRANGE_DEFAULT, SUP_RESTART_WINDOW_MS / 1000,
		SUP_RESTART_MAX_LIMIT, SUP_RESTART_MAX_DEFAULT, NIC_MAX_PAIRS, SUP_PAIRS_DEFAULT,
		SUP_UPGRADE_NICE_DEFAULT, DAEMON_CONF_DEFAULT);
}

/* Socket activation: systemd (vnicd.socket) or systemd-socket-activate
 * passed the listener at fd 3 (LISTEN_FDS=1). It must be a listening
 * AF_UNIX SOCK_SEQPACKET socket; vnicd never unlinks its file. */
static int adopt_listen_fd(struct sup *s, int nfds)
{
	static char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	int type = 0, acc = 0, fd = 3;
	socklen_t tl = sizeof(type), al = sizeof(acc);

	if (nfds != 1) {
		log_error("LISTEN_FDS=%d: vnicd takes exactly one socket (ListenSequentialPacket=)",
			  nfds);
		return -EINVAL;
	}
	memset(&sa, 0, sizeof(sa));
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0 || sa.sun_family != AF_UNIX ||
	    type != SOCK_SEQPACKET || !acc) {
		log_error("LISTEN_FDS: fd 3 is not a listening AF_UNIX SOCK_SEQPACKET socket "
			  "(ListenSequentialPacket= in vnicd.socket)");
		return -EINVAL;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		log_error("LISTEN_FDS: fcntl: %s", strerror(errno));
		return -errno;
	}
	if (len > offsetof(struct sockaddr_un, sun_path) && sa.sun_path[0]) {
		snprintf(path, sizeof(path), "%.*s",
			 (int)(len - offsetof(struct sockaddr_un, sun_path)), sa.sun_path);
		s->socket_path = path;
	}
	s->listen_fd = fd;
	s->socket_activated = true;
	return 0;
}

/* Bind the listener. A socket file left by a dead vnicd is replaced; a
 * live one (connect succeeds) is an error, never stolen. */
static int listen_socket(struct sup *s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[sizeof(sa.sun_path)];
	int fd, probe;

	if (strlen(s->socket_path) >= sizeof(sa.sun_path)) {
		log_error("socket path %s is too long", s->socket_path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, s->socket_path);
	snprintf(dir, sizeof(dir), "%s", s->socket_path);
	if (mkdir(dirname(dir), 0755) < 0 && errno != EEXIST) {
		log_error("mkdir %s: %s", dir, strerror(errno));
		return -errno;
	}
	probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe >= 0) {
		if (connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			log_error("%s: another vnicd is listening there", s->socket_path);
			return -EADDRINUSE;
		}
		close(probe);
	}
	unlink(s->socket_path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("socket: %s", strerror(errno));
		return -errno;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		log_error("bind %s: %s", s->socket_path, strerror(errno));
		goto out_close_fd;
	}
	/* 0660 and, with --group, that group: the file mode is a first gate;
	 * SO_PEERCRED on accept is the real check. */
	if (chmod(s->socket_path, 0660) < 0 ||
	    (s->have_group && chown(s->socket_path, (uid_t)-1, s->group) < 0)) {
		log_error("chmod/chown %s: %s", s->socket_path, strerror(errno));
		goto out_unlink;
	}
	if (listen(fd, 64) < 0) {
		log_error("listen: %s", strerror(errno));
		goto out_unlink;
	}
	s->listen_fd = fd;
	return 0;

out_unlink:
	unlink(s->socket_path);
out_close_fd:
	close(fd);
	return -1;
}

static void daemonize(void)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		fatal("fork");
	if (pid > 0)
		_exit(0); /* the socket is already listening */
	if (setsid() < 0)
		fatal("setsid");
	if (chdir("/") < 0)
		fatal("chdir /");
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fatal("/dev/null");
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
}

static void sup_maybe_exit(struct sup *s)
{
	if (s->shutting_down && s->nnics == 0) {
		log_info("every worker is reaped: exiting");
		event_base_loopbreak(s->base);
	}
}

/* Backstop: a worker that ignored Stop and whose SIGKILL did not reap in
 * time (uninterruptible sleep). Kill and reap with blocking waits. */
static void shutdown_backstop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;
	struct nic *n;

	TAILQ_FOREACH(n, &s->nics, link) {
		if (n->w.pid) {
			struct worker_exit ex;

			log_warn("nic %s: worker pid %d still there at shutdown: SIGKILL and wait",
				 n->id, (int)n->w.pid);
			sup_wops(n->sup)->kill(&n->w);
			sup_wops(n->sup)->reap(&n->w, true, &ex);
		}
	}
	event_base_loopbreak(s->base);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct sup *s = arg;
	struct nic *n, *tmp;
	struct timeval tv = { .tv_sec = SUP_SHUTDOWN_STOP_MS / 1000 + 2, .tv_usec = 0 };

	if (s->shutting_down)
		return;
	log_info("signal %d: stopping %u NIC(s)", (int)sig, s->nnics);
	s->shutting_down = true;
	sdnotify_stopping(s);
	/* No new clients; the socket disappears now. */
	event_del(s->ev_listen);
	close(s->listen_fd);
	s->listen_fd = -1;
	if (!s->socket_activated)
		unlink(s->socket_path);
	s->ev_shutdown = evtimer_new(s->base, shutdown_backstop_cb, s);
	if (s->ev_shutdown)
		evtimer_add(s->ev_shutdown, &tv);
	vu_shutdown(s);
	TAILQ_FOREACH_SAFE(n, &s->nics, link, tmp)
		nic_stop(n, SUP_SHUTDOWN_STOP_MS, "shutdown");
	sup_maybe_exit(s);
}

/* The log level the configuration file gives, else the one vnicd
 * started with (--log-level or info). At start --log-level wins. */
static int sup_conf_apply(struct sup *s, bool at_start)
{
	struct daemon_conf conf;
	char err[320];
	int rc;

	if (!s->conf_path)
		return 0;
	rc = daemon_conf_read(s->conf_path, &conf, err, sizeof(err));
	if (rc == -ENOENT && !s->conf_explicit) {
		if (!at_start)
			log_warn("SIGHUP: no %s: log level stays %s", s->conf_path,
				 log_level_name(log_get_level()));
		return 0;
	}
	if (rc < 0) {
		log_error("configuration: %s%s", err, at_start ? "" : "; nothing changed");
		return rc;
	}
	if (at_start && s->level_from_cmdline)
		return 0;
	if (at_start) {
		log_set_level(conf.have_log_level ? conf.log_level : s->start_level);
		return 0;
	}
	{
		char why[300];

		snprintf(why, sizeof(why), "SIGHUP: %s re-read%s", s->conf_path,
			 conf.have_log_level ? "" : " (it sets no level: the start level)");
		log_change_level(conf.have_log_level ? conf.log_level : s->start_level, why);
	}
	return 0;
}

/* SIGHUP: re-read the configuration and reopen the logs; never exits. */
static void sighup_cb(evutil_socket_t sig, short what, void *arg)
{
	struct sup *s = arg;

	log_reopen();
	log_warn("SIGHUP: logs reopened; re-reading %s", s->conf_path);
	sup_conf_apply(s, false);
}

#ifdef VNIC_FAULT_INJECTION
static void sup_fault_report(const char *point, enum fault_action a, unsigned arg)
{
	log_warn("fault injection: point %s fired (%s %u) in vnicd", point, fault_action_name(a),
		 arg);
}
#endif

/* VNIC_FAULT / VNIC_FAULT_NIC (common/fault.h): vnicd arms its own "sup."
 * points and keeps the "worker." ones for the workers it spawns.
 * Returns: 0, or -1 on a bad spec (reason printed). */
static int sup_fault_init(struct sup *s)
{
	const char *spec = getenv("VNIC_FAULT");
#ifdef VNIC_FAULT_INJECTION
	const char *nic = getenv("VNIC_FAULT_NIC");
	char err[256];

	if (!spec || !spec[0])
		return 0;
	if (fault_arm(spec, "sup.", err, sizeof(err)) < 0 ||
	    fault_filter(spec, "worker.", s->fault_worker, sizeof(s->fault_worker), err,
			 sizeof(err)) < 0) {
		fprintf(stderr, "vnicd: VNIC_FAULT: %s\n", err);
		return -1;
	}
	snprintf(s->fault_nic, sizeof(s->fault_nic), "%s", nic ? nic : "");
	fault_set_hooks(sup_fault_report, NULL);
	log_warn("FAULT INJECTION armed: %s (worker points for %s)", spec,
		 s->fault_nic[0] ? s->fault_nic : "every NIC");
#else
	(void)s;
	if (spec && spec[0])
		log_warn("VNIC_FAULT ignored: vnicd was built without --enable-fault-injection");
#endif
	return 0;
}

/* main's steps return this to go on, or the exit status. */
#define SUP_GO_ON (-1)

/* What the command line sets beyond struct sup. */
struct sup_args {
	enum log_level level;
	bool foreground;
	bool state_dir_set;
	char state_dir[PATH_MAX]; /* s->state_dir may point here */
	uint32_t range_first, range_count;
	bool have_range;
	bool handover_check;      /* --handover-check: check the handover, exit */
	bool fd_store;            /* --fd-store (fdstore.h) */
};

static int opt_group(struct sup *s, const char *name)
{
	struct group *gr = getgrnam(name);

	if (!gr) {
		fprintf(stderr, "vnicd: --group %s: no such group\n", name);
		return 2;
	}
	s->have_group = true;
	s->group = gr->gr_gid;
	s->group_name = name;
	return SUP_GO_ON;
}

static int opt_user(struct sup *s, const char *name)
{
	/* Checked here so a typo fails at start, not at AddNic. */
	struct passwd *pw = name[0] && strlen(name) <= 32 ? getpwnam(name) : NULL;

	if (!pw) {
		fprintf(stderr, "vnicd: --user %s: no such user\n", name);
		return 2;
	}
	s->worker_user = name;
	s->worker_user_uid = pw->pw_uid;
	s->worker_user_gid = pw->pw_gid;
	return SUP_GO_ON;
}

/* A whole decimal number in lo..hi for option `name` into *out.
 * Returns: SUP_GO_ON, or 2 with the range on stderr. */
static int opt_uint(const char *name, const char *arg, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (!arg[0] || *end || arg[0] == '-' || errno || v < lo || v > hi) {
		fprintf(stderr, "vnicd: --%s %s: use %u..%u\n", name, arg, lo, hi);
		return 2;
	}
	*out = (unsigned)v;
	return SUP_GO_ON;
}

/* One option of getopt_long's. Returns: SUP_GO_ON or the exit status. */
static int parse_option(struct sup *s, struct sup_args *a, int opt, char *arg)
{
	char err[320];

	switch (opt) {
	case 's': s->socket_path = arg; break;
	case 'f': a->foreground = true; break;
	case 'g': return opt_group(s, arg);
	case 'l':
		if (log_level_parse(arg, &a->level) < 0) {
			fprintf(stderr, "vnicd: --log-level %s: use error, warn, info or debug\n",
				arg);
			return 2;
		}
		s->level_from_cmdline = true;
		break;
	case 'U':
		if (uidrange_parse(arg, &a->range_first, &a->range_count, err, sizeof(err)) < 0) {
			fprintf(stderr, "vnicd: %s\n", err);
			return 2;
		}
		a->have_range = true;
		break;
	case 'C':
		s->conf_path = arg;
		s->conf_explicit = true;
		break;
	case 'w': s->worker_path = arg; break;
	case 'u': return opt_user(s, arg);
	case 'S':
		if (!strcmp(arg, "on")) {
			s->sandbox_off = false;
		} else if (!strcmp(arg, "off")) {
			s->sandbox_off = true;
		} else {
			fprintf(stderr, "vnicd: --sandbox %s: use on or off\n", arg);
			return 2;
		}
		break;
	case 'I':
		if (strcmp(arg, "on") && strcmp(arg, "off")) {
			fprintf(stderr, "vnicd: --inflight %s: use on or off\n", arg);
			return 2;
		}
		s->inflight_off = !strcmp(arg, "off");
		break;
	case 'R': return opt_uint("restart-max", arg, 0, SUP_RESTART_MAX_LIMIT, &s->restart_max);
	case 'Q': return opt_uint("max-queue-pairs", arg, 1, NIC_MAX_PAIRS, &s->max_pairs);
	case 'N': {
		unsigned nice;

		if (opt_uint("upgrade-nice", arg, 0, 19, &nice) != SUP_GO_ON)
			return 2;
		s->upgrade_nice = (int)nice; /* int: compared with getpriority()'s */
		break;
	}
	case 'D': a->state_dir_set = true; s->state_dir = arg[0] ? arg : NULL; break;
	case 'P': vu_print_capabilities(); return 0;
	case 'h': usage(stdout); return 0;
	case 'V': return vnic_print_version("vnicd");
	case 'H': break; /* --handover-fd: read by main before anything */
	case 'K': a->handover_check = true; break;
	case 'F': a->fd_store = true; break;
	default: usage(stderr); return 2;
	}
	return SUP_GO_ON;
}

/* The command line into s and a. Returns: SUP_GO_ON or the exit status. */
static int parse_args(int argc, char **argv, struct sup *s, struct sup_args *a)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "group", required_argument, NULL, 'g' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "worker", required_argument, NULL, 'w' },
		{ "user", required_argument, NULL, 'u' },
		{ "sandbox", required_argument, NULL, 'S' },
		{ "restart-max", required_argument, NULL, 'R' },
		{ "inflight", required_argument, NULL, 'I' },
		{ "state-dir", required_argument, NULL, 'D' },
		{ "print-capabilities", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "config", required_argument, NULL, 'C' },
		{ "uid-range", required_argument, NULL, 'U' },
		{ "max-queue-pairs", required_argument, NULL, 'Q' },
		{ "fd-store", no_argument, NULL, 'F' },
		{ "upgrade-nice", required_argument, NULL, 'N' },
		/* Upgrade in place (handover.h): given by vnicd to itself. */
		{ "handover-fd", required_argument, NULL, 'H' },
		{ "handover-check", no_argument, NULL, 'K' },
		{ "handover-rollback", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "s:fg:l:w:h", opts, NULL)) != -1) {
		rc = parse_option(s, a, opt, optarg);
		if (rc != SUP_GO_ON)
			return rc;
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (!a->state_dir_set) {
		/* Beside the control socket: /run/vnicd/endpoints by default. */
		const char *slash = strrchr(s->socket_path, '/');
		int dl = slash ? (int)(slash - s->socket_path) : 1;

		snprintf(a->state_dir, sizeof(a->state_dir), "%.*s/endpoints", dl,
			 slash ? s->socket_path : ".");
		s->state_dir = a->state_dir;
	}
	return SUP_GO_ON;
}

/* Logging, the configuration file, fault injection, the checks that
 * refuse to start, the uid range, process-wide settings.
 * Returns: SUP_GO_ON or the exit status. */
static int daemon_setup(struct sup *s, const struct sup_args *a)
{
	char err[320];

	/* stderr until vnicd detaches: every error before that is seen;
	 * under systemd (stderr is the journal) the journal from the start. */
	/* The check of an upgrade (handover.h) says only what is wrong. */
	log_init("vnicd", a->handover_check ? LOG_LEVEL_WARN : a->level, false);
	sdnotify_journal_setup("vnicd");
	s->start_level = a->level;
	if (!s->conf_path)
		s->conf_path = DAEMON_CONF_DEFAULT;
	if (sup_conf_apply(s, true) < 0)
		return 2;
	if (sup_fault_init(s) < 0)
		return 2;
	if (daemon_check_worker(s->worker_path, err, sizeof(err)) < 0 ||
	    daemon_check_privileges(s->sandbox_off, err, sizeof(err)) < 0) {
		log_error("not starting: %s", err);
		return 1;
	}
	if (a->have_range && (s->worker_user || s->sandbox_off)) {
		fprintf(stderr, "vnicd: --uid-range goes with neither --user nor --sandbox=off\n");
		return 2;
	}
	s->uid_per_nic = !s->worker_user && !s->sandbox_off;
	if (s->uid_per_nic &&
	    uidrange_init(&s->uids, a->range_first, a->range_count, err, sizeof(err)) < 0) {
		log_error("not starting: %s", err);
		return 1;
	}
	if (!daemon_has_net_admin())
		log_warn("no CAP_NET_ADMIN: tap backends will fail (socket backends work)");
	if (s->sandbox_off)
		log_warn("*** --sandbox=off: workers run WITHOUT their sandbox (no seccomp filter, "
			 "no uid drop, no empty root). A guest that exploits a worker gets a root "
			 "process. For debugging only. ***");
	signal(SIGPIPE, SIG_IGN);
	/* RLIMIT_NOFILE to its hard limit; every bound from it (limits.c). */
	sup_limits_init(s);
	return SUP_GO_ON;
}

/* The control socket, systemd's or our own, then off into the
 * background unless --foreground. Returns: 0, or -1 (logged). */
static int open_listener(struct sup *s, int nlisten, bool foreground)
{
	if (nlisten ? adopt_listen_fd(s, nlisten) < 0 : listen_socket(s) < 0)
		return -1;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (!foreground) {
		daemonize();
		log_init("vnicd", log_get_level(), true);
	}
	return 0;
}

/* The libevent base and vnicd's own events: the listener, the signals,
 * the watchdog. Fails only fatally. */
static void events_setup(struct sup *s)
{
	struct event_config *cfg;
	char user[320];
	int rc;

	cfg = event_config_new();
	if (!cfg)
		fatalx("event_config_new failed");
	/* Single thread: no locking in libevent. A precise clock: with the
	 * default (CLOCK_MONOTONIC_COARSE, 4 ms ticks here) a worker's stop
	 * deadline could expire a tick before the time the VMM gave. */
	event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_PRECISE_TIMER);
	s->nic_gone = sup_maybe_exit;
	s->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (!s->base)
		fatalx("event_base_new failed");
	rc = holders_init(s->base); /* the workers' holders come to us (holders.h) */
	if (rc < 0)
		log_warn("cannot become a child subreaper (%s): the workers' holders go to init",
			 strerror(-rc));
	s->ev_listen = event_new(s->base, s->listen_fd, EV_READ | EV_PERSIST, vmm_conn_accept, s);
	s->ev_sigterm = evsignal_new(s->base, SIGTERM, signal_cb, s);
	s->ev_sigint = evsignal_new(s->base, SIGINT, signal_cb, s);
	s->ev_sighup = evsignal_new(s->base, SIGHUP, sighup_cb, s);
	if (!s->ev_listen || !s->ev_sigterm || !s->ev_sigint || !s->ev_sighup ||
	    sup_watchdog_start(s) < 0)
		fatalx("event_new failed");
	event_add(s->ev_sighup, NULL);
	event_add(s->ev_listen, NULL);
	event_add(s->ev_sigterm, NULL);
	event_add(s->ev_sigint, NULL);
	if (s->uid_per_nic)
		snprintf(user, sizeof(user), "a uid per NIC from %u-%u", s->uids.first,
			 s->uids.first + s->uids.count - 1);
	else
		snprintf(user, sizeof(user), "%s",
			 s->worker_user ? s->worker_user : "(none: sandbox off)");
	log_info("listening on %s (worker %s, user %s, sandbox %s, restart-max %u in %d s, "
		 "inflight %s)", s->socket_path, s->worker_path, user, s->sandbox_off ? "OFF" : "on",
		 s->restart_max, SUP_RESTART_WINDOW_MS / 1000, s->inflight_off ? "off" : "on");
}

/* After the loop: connections, NICs, endpoints, the socket, the events. */
static void sup_cleanup(struct sup *s)
{
	struct vmm_conn *c;

	while ((c = TAILQ_FIRST(&s->conns)))
		vmm_conn_free(c);
	nic_free_all(s);
	vu_free_all(s);
	worker_spare_reap_all(s);
	holders_shutdown();
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		if (!s->socket_activated)
			unlink(s->socket_path);
	}
	if (s->ev_shutdown)
		event_free(s->ev_shutdown);
	sdnotify_free(s);
	if (s->ev_accept_retry)
		event_free(s->ev_accept_retry);
	if (s->ev_watchdog)
		event_free(s->ev_watchdog);
	event_free(s->ev_listen);
	event_free(s->ev_sigterm);
	event_free(s->ev_sigint);
	event_free(s->ev_sighup);
	event_base_free(s->base);
	uidrange_fini(&s->uids);
}

/* Upgrade in place, the new process (handover.h): vnicd's listener and
 * everything else come from the handover; no bind, no fork (the pid must
 * stay: the workers are its children). Returns: only on failure. */
static int main_handover(struct sup *s, const struct sup_args *a, struct handover *h)
{
	char err[512];

	s->listen_fd = handover_listen_fd(h, &s->socket_activated);
	if (!a->foreground)
		log_init("vnicd", log_get_level(), true);
	events_setup(s);
	if (handover_restore(s, h, err, sizeof(err)) < 0) {
		if (handover_from_store(h)) {
			log_error("fd store: cannot take over: %s; the store is released, the next "
				  "start begins afresh", err);
			fdstore_abandon(h);
		} else {
			log_error("upgrade: cannot take over: %s", err);
		}
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sup s;
	struct sup_args a = { .level = LOG_LEVEL_INFO,
			      .range_first = UIDRANGE_DEFAULT_FIRST,
			      .range_count = UIDRANGE_DEFAULT_COUNT };
	struct handover *h = NULL;
	sigset_t stop_sigs;
	int nlisten = 0, rc, hfd;

	hfd = handover_arg_fd(argc, argv);
	if (hfd == -2) {
		fprintf(stderr, "vnicd: --handover-fd: not an fd number\n");
		return 2;
	}
	if (hfd >= 0) {
		/* The fds the handover names stay, every other goes. */
		char err[512];
		bool check = false;

		for (int i = 1; i < argc; i++)
			check |= !strcmp(argv[i], "--handover-check");
		h = handover_load(hfd, !check, err, sizeof(err));
		if (!h) {
			fprintf(stderr, "vnicd: upgrade: the handover: %s\n", err);
			return 1;
		}
	} else {
		/* Inherited fds: only stdio and systemd's sockets (LISTEN_FDS) stay. */
		nlisten = daemon_listen_fds();
		if (daemon_close_inherited(3, nlisten) < 0) {
			fprintf(stderr, "vnicd: closing inherited fds: %s\n", strerror(errno));
			return 1;
		}
	}
	memset(&s, 0, sizeof(s));
	s.socket_path = VNICD_DEFAULT_SOCKET;
	s.listen_fd = -1;
	s.restart_max = SUP_RESTART_MAX_DEFAULT;
	s.max_pairs = SUP_PAIRS_DEFAULT;
	s.upgrade_nice = SUP_UPGRADE_NICE_DEFAULT;
	s.worker_path = getenv("VNICD_WORKER");
	if (!s.worker_path || !s.worker_path[0])
		s.worker_path = VNICD_WORKER_PATH;
	TAILQ_INIT(&s.conns);
	TAILQ_INIT(&s.nics);
	log_init("vnicd", a.level, false);
	if (hfd < 0) {
		/* vnicd died and systemd restarted it: its fd store, if any. */
		bool store = false;

		for (int i = 1; i < argc; i++)
			store |= !strcmp(argv[i], "--fd-store");
		h = fdstore_take(&nlisten, store);
	}

	rc = parse_args(argc, argv, &s, &a);
	if (rc == SUP_GO_ON)
		rc = daemon_setup(&s, &a);
	if (h && (a.handover_check || rc != SUP_GO_ON)) {
		/* The check (the old process waits for its exit status), or
		 * a start that failed before taking anything over. */
		if (!a.handover_check)
			handover_rollback(h, "its setup failed");
		handover_free(h);
		uidrange_fini(&s.uids);
		return rc == SUP_GO_ON ? 0 : rc ? rc : 1;
	}
	if (rc != SUP_GO_ON)
		return rc;
	handover_set_exec(&s, argc, argv);
	/* The socket is connectable from listen() on, and whoever waits for
	 * it (systemd, a script) may send SIGTERM at once: hold the signals
	 * until their events exist, so one is handled, never fatal. Workers
	 * are spawned later, with this mask cleared. (An upgrade's exec
	 * comes with them held already.) */
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGTERM);
	sigaddset(&stop_sigs, SIGINT);
	sigaddset(&stop_sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &stop_sigs, NULL);
	if (h) {
		if (handover_from_store(h)) {
			/* Workers of the dead vnicd that the state does not
			 * name (started after it was stored) must end first. */
			pid_t keep[SUP_MAX_NICS];
			size_t nkeep = handover_worker_pids(h, keep, SUP_MAX_NICS);
			unsigned found, killed;

			daemon_wait_orphans(SUP_ORPHAN_WAIT_MS, keep, nkeep, &found, &killed);
		}
		if (main_handover(&s, &a, h)) {
			uidrange_fini(&s.uids);
			return 1;
		}
	} else {
		unsigned found, killed;

		/* Before the socket accepts: a VMM's AddNic or a front end's
		 * rings must not reach a worker while an earlier vnicd's
		 * worker still runs them. */
		daemon_wait_orphans(SUP_ORPHAN_WAIT_MS, NULL, 0, &found, &killed);
		if (open_listener(&s, nlisten, a.foreground) < 0) {
			uidrange_fini(&s.uids);
			return 1;
		}
		events_setup(&s);
	}
	sigprocmask(SIG_UNBLOCK, &stop_sigs, NULL);

	s.fd_store = a.fd_store;
	if (a.fd_store)
		fdstore_setup(&s, h);
	if (h) {
		bool from_store = handover_from_store(h);

		handover_finish(&s, h);
		if (from_store)
			fdstore_adopted(&s);
	} else {
		inflight_files_age(&s);
		vu_init(&s);
	}
	sdnotify_ready(&s);
	/* One turn at a time: after each, the fd store follows the state. */
	while (event_base_loop(s.base, EVLOOP_ONCE) == 0 && !event_base_got_break(s.base) &&
	       !event_base_got_exit(s.base))
		fdstore_turn(&s);

	sup_cleanup(&s);
	fdstore_release(&s);
	log_info("exit");
	return 0;
}
