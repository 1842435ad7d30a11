/*
 * vnicd: the privileged supervisor process.
 *
 *   vnicd [--socket PATH] [--foreground] [--group NAME]
 *         [--log-level error|warn|info|debug] [--worker PATH]
 *         [--user USER] [--sandbox=on|off] [--restart-max N] [--inflight=on|off]
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
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fault.h"
#include "supervisor.h"

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
		"             [--inflight=on|off]\n"
		"  --socket PATH     control socket (default %s)\n"
		"  --foreground      do not daemonize; log to stderr\n"
		"  --group NAME      members of NAME may connect (root always may)\n"
		"  --log-level L     default info\n"
		"  --worker PATH     vnicd-worker binary (default $VNICD_WORKER, else %s)\n"
		"  --user USER       workers run as USER (default: \"vnicd\" if it exists, else\n"
		"                    \"nobody\")\n"
		"  --sandbox=on|off  off: workers run WITHOUT seccomp, uid drop or empty root;\n"
		"                    for debugging only (default on)\n"
		"  --restart-max N   restarts of a crashed worker allowed within %d s, 0..%d;\n"
		"                    one more death leaves the NIC FAILED (default %d)\n"
		"  --inflight=on|off off: no inflight region; a restarted worker may then lose\n"
		"                    or repeat chains in flight (for measuring its cost; default on)\n",
		VNICD_DEFAULT_SOCKET, VNICD_WORKER_PATH, SUP_RESTART_WINDOW_MS / 1000,
		SUP_RESTART_MAX_LIMIT, SUP_RESTART_MAX_DEFAULT);
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

void sup_maybe_exit(struct sup *s)
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
			worker_kill(&n->w);
			worker_reap(&n->w, true, &ex);
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
	/* No new clients; the socket disappears now. */
	event_del(s->ev_listen);
	close(s->listen_fd);
	s->listen_fd = -1;
	unlink(s->socket_path);
	s->ev_shutdown = evtimer_new(s->base, shutdown_backstop_cb, s);
	if (s->ev_shutdown)
		evtimer_add(s->ev_shutdown, &tv);
	TAILQ_FOREACH_SAFE(n, &s->nics, link, tmp)
		nic_stop(n, SUP_SHUTDOWN_STOP_MS, "shutdown");
	sup_maybe_exit(s);
}

#ifdef VNIC_FAULT_INJECTION
static void sup_fault_report(const char *point, enum fault_action a, unsigned arg)
{
	log_warn("fault injection: point %s fired (%s %u) in vnicd", point, fault_action_name(a),
		 arg);
}
#endif

/* VNIC_FAULT / VNIC_FAULT_NIC (proto/fault.h): vnicd arms its own "sup."
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

int main(int argc, char **argv)
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
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sup s;
	struct event_config *cfg;
	enum log_level level = LOG_LEVEL_INFO;
	bool foreground = false;
	struct vmm_conn *c;
	int opt;

	memset(&s, 0, sizeof(s));
	s.socket_path = VNICD_DEFAULT_SOCKET;
	s.listen_fd = -1;
	s.restart_max = SUP_RESTART_MAX_DEFAULT;
	s.worker_path = getenv("VNICD_WORKER");
	if (!s.worker_path || !s.worker_path[0])
		s.worker_path = VNICD_WORKER_PATH;
	TAILQ_INIT(&s.conns);
	TAILQ_INIT(&s.nics);
	log_init("vnicd", level, false);

	while ((opt = getopt_long(argc, argv, "s:fg:l:w:h", opts, NULL)) != -1) {
		switch (opt) {
		case 's': s.socket_path = optarg; break;
		case 'f': foreground = true; break;
		case 'g': {
			struct group *gr = getgrnam(optarg);

			if (!gr) {
				fprintf(stderr, "vnicd: --group %s: no such group\n", optarg);
				return 2;
			}
			s.have_group = true;
			s.group = gr->gr_gid;
			s.group_name = optarg;
			break;
		}
		case 'l':
			if (log_level_parse(optarg, &level) < 0) {
				fprintf(stderr, "vnicd: --log-level %s: use error, warn, info or debug\n",
					optarg);
				return 2;
			}
			break;
		case 'w': s.worker_path = optarg; break;
		case 'u':
			/* Checked here so a typo fails at start, not at AddNic. */
			if (!optarg[0] || strlen(optarg) > 32 || !getpwnam(optarg)) {
				fprintf(stderr, "vnicd: --user %s: no such user\n", optarg);
				return 2;
			}
			s.worker_user = optarg;
			break;
		case 'S':
			if (!strcmp(optarg, "on")) {
				s.sandbox_off = false;
			} else if (!strcmp(optarg, "off")) {
				s.sandbox_off = true;
			} else {
				fprintf(stderr, "vnicd: --sandbox %s: use on or off\n", optarg);
				return 2;
			}
			break;
		case 'I':
			if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
				fprintf(stderr, "vnicd: --inflight %s: use on or off\n", optarg);
				return 2;
			}
			s.inflight_off = !strcmp(optarg, "off");
			break;
		case 'R': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (!optarg[0] || *end || v > SUP_RESTART_MAX_LIMIT) {
				fprintf(stderr, "vnicd: --restart-max %s: use 0..%d\n", optarg,
					SUP_RESTART_MAX_LIMIT);
				return 2;
			}
			s.restart_max = (unsigned)v;
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	log_init("vnicd", level, !foreground);
	if (sup_fault_init(&s) < 0)
		return 2;
	if (access(s.worker_path, X_OK) < 0)
		log_warn("worker %s is not executable (%s): AddNic will fail", s.worker_path,
			 strerror(errno));
	if (s.sandbox_off)
		log_warn("*** --sandbox=off: workers run WITHOUT their sandbox (no seccomp filter, "
			 "no uid drop, no empty root). A guest that exploits a worker gets a root "
			 "process. For debugging only. ***");
	signal(SIGPIPE, SIG_IGN);
	/* RLIMIT_NOFILE to its hard limit; every bound from it (limits.c). */
	sup_limits_init(&s);

	if (listen_socket(&s) < 0)
		return 1;
	if (!foreground)
		daemonize();

	cfg = event_config_new();
	if (!cfg)
		fatalx("event_config_new failed");
	/* Single thread: no locking in libevent. */
	event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
	s.base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (!s.base)
		fatalx("event_base_new failed");
	s.ev_listen = event_new(s.base, s.listen_fd, EV_READ | EV_PERSIST, vmm_conn_accept, &s);
	s.ev_sigterm = evsignal_new(s.base, SIGTERM, signal_cb, &s);
	s.ev_sigint = evsignal_new(s.base, SIGINT, signal_cb, &s);
	if (!s.ev_listen || !s.ev_sigterm || !s.ev_sigint || sup_watchdog_start(&s) < 0)
		fatalx("event_new failed");
	event_add(s.ev_listen, NULL);
	event_add(s.ev_sigterm, NULL);
	event_add(s.ev_sigint, NULL);
	log_info("listening on %s (worker %s, user %s, sandbox %s, restart-max %u in %d s, "
		 "inflight %s)", s.socket_path, s.worker_path,
		 s.worker_user ? s.worker_user : "(worker default)", s.sandbox_off ? "OFF" : "on",
		 s.restart_max, SUP_RESTART_WINDOW_MS / 1000, s.inflight_off ? "off" : "on");

	event_base_dispatch(s.base);

	while ((c = TAILQ_FIRST(&s.conns)))
		vmm_conn_free(c);
	nic_free_all(&s);
	if (s.listen_fd >= 0) {
		close(s.listen_fd);
		unlink(s.socket_path);
	}
	if (s.ev_shutdown)
		event_free(s.ev_shutdown);
	if (s.ev_accept_retry)
		event_free(s.ev_accept_retry);
	if (s.ev_watchdog)
		event_free(s.ev_watchdog);
	event_free(s.ev_listen);
	event_free(s.ev_sigterm);
	event_free(s.ev_sigint);
	event_base_free(s.base);
	log_info("exit");
	return 0;
}
