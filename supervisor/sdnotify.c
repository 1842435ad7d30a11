/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sdnotify: sd_notify and journal logging for vnicd. See sdnotify.h.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

#include "sdnotify.h"
#include "supervisor.h"

static char journal_ident[32] = "vnicd";
/* journald's native socket exists (sd_journal_send returns 0 without
 * one: the line would be lost). */
static bool journal_native;
#define JOURNAL_NATIVE_SOCKET "/run/systemd/journal/socket"

static const int journal_prio[] = {
	[LOG_LEVEL_ERROR] = LOG_ERR,
	[LOG_LEVEL_WARN] = LOG_WARNING,
	[LOG_LEVEL_INFO] = LOG_INFO,
	[LOG_LEVEL_DEBUG] = LOG_DEBUG,
};

/* "nic ID: ..." or "nic ID worker: ...": ID into buf; false otherwise. */
static bool nic_of_line(const char *text, char *buf, size_t len)
{
	const char *p, *e;
	size_t n;

	if (strncmp(text, "nic ", 4))
		return false;
	p = text + 4;
	e = strchr(p, ' ');
	n = e ? (size_t)(e - p) : strlen(p);
	if (n && p[n - 1] == ':')
		n--;
	if (n == 0 || n >= len)
		return false;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return true;
}

static void journal_handler(enum log_level level, const char *text, void *arg)
{
	int prio = journal_prio[level <= LOG_LEVEL_DEBUG ? level : LOG_LEVEL_DEBUG];
	char nic[VALIDATE_ID_MAX + 1], line[LOG_LINE_MAX + 8];
	int rc = -1, n;

	if (!journal_native)
		goto prefix;
	if (nic_of_line(text, nic, sizeof(nic)))
		rc = sd_journal_send("MESSAGE=%s", text, "PRIORITY=%d", prio,
				     "SYSLOG_IDENTIFIER=%s", journal_ident, "NIC_ID=%s", nic, NULL);
	else
		rc = sd_journal_send("MESSAGE=%s", text, "PRIORITY=%d", prio,
				     "SYSLOG_IDENTIFIER=%s", journal_ident, NULL);
	if (rc >= 0)
		return;
prefix:
	/* No journald socket: the stream still reaches the journal, which
	 * reads the "<N>" prefix as the priority and stamps the time. */
	n = snprintf(line, sizeof(line), "<%d>%s\n", prio, text);
	if (n > 0 && write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0) {
		/* nowhere left to say it */
	}
}

bool sdnotify_journal_setup(const char *ident)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0 ||
	    (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino)
		return false;
	snprintf(journal_ident, sizeof(journal_ident), "%s", ident);
	journal_native = access(JOURNAL_NATIVE_SOCKET, W_OK) == 0;
	log_set_handler(journal_handler, NULL);
	return true;
}

static void status_line(struct sup *s, char *buf, size_t len)
{
	snprintf(buf, len, "STATUS=%u NIC(s), %u connection(s), listening on %s", s->nnics,
		 s->nconns, s->socket_path);
}

static void status_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;
	char buf[300];

	status_line(s, buf, sizeof(buf));
	if (strcmp(buf, s->notify_status))
		if (sd_notify(0, buf) > 0)
			snprintf(s->notify_status, sizeof(s->notify_status), "%s", buf);
}

void sdnotify_ready(struct sup *s)
{
	struct timeval tv = { .tv_sec = SDNOTIFY_STATUS_MS / 1000,
			      .tv_usec = (SDNOTIFY_STATUS_MS % 1000) * 1000 };
	char buf[320];
	int rc;

	if (!getenv("NOTIFY_SOCKET"))
		return;
	status_line(s, s->notify_status, sizeof(s->notify_status));
	snprintf(buf, sizeof(buf), "READY=1\n%s", s->notify_status);
	rc = sd_notify(0, buf);
	if (rc < 0)
		log_warn("sd_notify READY=1: %s", strerror(-rc));
	else
		log_debug("sd_notify: READY=1");
	s->ev_notify = event_new(s->base, -1, EV_PERSIST, status_cb, s);
	if (s->ev_notify)
		evtimer_add(s->ev_notify, &tv);
}

void sdnotify_stopping(struct sup *s)
{
	char buf[96];

	if (!getenv("NOTIFY_SOCKET"))
		return;
	if (s->ev_notify)
		evtimer_del(s->ev_notify);
	snprintf(buf, sizeof(buf), "STOPPING=1\nSTATUS=stopping %u NIC(s)", s->nnics);
	sd_notify(0, buf);
}

void sdnotify_reloading(struct sup *s)
{
	struct timespec t;
	char buf[96];

	(void)s;
	if (!getenv("NOTIFY_SOCKET"))
		return;
	/* MONOTONIC_USEC: systemd 253's Type=notify-reload wants it; older
	 * ones ignore it. */
	clock_gettime(CLOCK_MONOTONIC, &t);
	snprintf(buf, sizeof(buf), "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=upgrading in place",
		 (unsigned long long)t.tv_sec * 1000000ull + (unsigned long long)t.tv_nsec / 1000);
	sd_notify(0, buf);
}

void sdnotify_ready_again(struct sup *s)
{
	if (getenv("NOTIFY_SOCKET"))
		sd_notify(0, "READY=1");
	(void)s;
}

void sdnotify_free(struct sup *s)
{
	if (s->ev_notify)
		event_free(s->ev_notify);
	s->ev_notify = NULL;
}
