/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static struct {
	char ident[64];
	enum log_level level;
	bool use_syslog;
	log_handler_fn handler;
	void *handler_arg;
} log_state = {
	.ident = "vnic",
	.level = LOG_LEVEL_INFO,
};

static const char *const log_names[] = {
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARN] = "warn",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

static const int log_syslog_prio[] = {
	[LOG_LEVEL_ERROR] = LOG_ERR,
	[LOG_LEVEL_WARN] = LOG_WARNING,
	[LOG_LEVEL_INFO] = LOG_INFO,
	[LOG_LEVEL_DEBUG] = LOG_DEBUG,
};

void log_init(const char *ident, enum log_level level, bool use_syslog)
{
	if (log_state.use_syslog)
		closelog();
	snprintf(log_state.ident, sizeof(log_state.ident), "%s", ident ? ident : "vnic");
	log_set_level(level);
	log_state.use_syslog = use_syslog;
	if (use_syslog)
		openlog(log_state.ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void log_reopen(void)
{
	if (log_state.use_syslog) {
		closelog();
		openlog(log_state.ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	}
}

void log_set_level(enum log_level level)
{
	if (level > LOG_LEVEL_DEBUG)
		level = LOG_LEVEL_DEBUG;
	log_state.level = level;
}

void log_change_level(enum log_level level, const char *why)
{
	enum log_level old = log_state.level;

	log_state.level = LOG_LEVEL_DEBUG;
	log_msg(LOG_LEVEL_WARN, "%s: log level %s -> %s", why, log_level_name(old),
		log_level_name(level));
	log_set_level(level);
}

enum log_level log_get_level(void)
{
	return log_state.level;
}

int log_level_parse(const char *s, enum log_level *ret)
{
	for (unsigned i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++) {
		if (strcmp(s, log_names[i]) == 0) {
			*ret = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *log_level_name(enum log_level level)
{
	return level <= LOG_LEVEL_DEBUG ? log_names[level] : "?";
}

void log_set_handler(log_handler_fn fn, void *arg)
{
	log_state.handler = fn;
	log_state.handler_arg = arg;
}

/* Replace control characters so a line stays one line on a terminal. */
static void log_sanitize(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			*s = '?';
}

static void log_emit(enum log_level level, const char *text)
{
	char line[LOG_LINE_MAX];
	struct timespec ts;
	struct tm tm;
	int n, saved = errno;

	if (log_state.handler) {
		log_state.handler(level, text, log_state.handler_arg);
		goto out;
	}
	if (log_state.use_syslog) {
		syslog(log_syslog_prio[level], "%s", text);
		goto out;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
		     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%ld]: %s: %s",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_state.ident,
		     (long)getpid(), log_names[level], text);
	if (n < 0)
		goto out;
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line, so lines of several processes do not mix. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* Nowhere left to report it. */
	}
out:
	errno = saved;
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char text[LOG_LINE_MAX];
	int saved = errno;

	if (level > LOG_LEVEL_DEBUG)
		level = LOG_LEVEL_DEBUG;
	if (level > log_state.level)
		return;
	vsnprintf(text, sizeof(text), fmt, ap);
	log_sanitize(text);
	errno = saved;
	log_emit(level, text);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

_Noreturn void fatal(const char *fmt, ...)
{
	char text[LOG_LINE_MAX];
	const char *why = strerror(errno);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	log_msg(LOG_LEVEL_ERROR, "%s: %s", text, why);
	exit(1);
}

_Noreturn void fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_LEVEL_ERROR, fmt, ap);
	va_end(ap);
	exit(1);
}

bool log_ratelimit_allow(struct log_ratelimit *rl, uint64_t now_ms,
			 unsigned long *ret_suppressed)
{
	if (rl->interval_ms == 0) {
		*ret_suppressed = 0;
		return true;
	}
	if (rl->begin_ms == 0 || now_ms - rl->begin_ms >= rl->interval_ms) {
		/* A new window. */
		rl->begin_ms = now_ms ? now_ms : 1;
		rl->printed = 0;
	}
	if (rl->printed >= rl->burst) {
		rl->suppressed++;
		return false;
	}
	rl->printed++;
	*ret_suppressed = rl->suppressed;
	rl->suppressed = 0;
	return true;
}

void log_ratelimited(struct log_ratelimit *rl, enum log_level level,
		     const char *fmt, ...)
{
	struct timespec ts;
	unsigned long suppressed;
	va_list ap;

	if (level > log_state.level)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (!log_ratelimit_allow(rl, (uint64_t)ts.tv_sec * 1000u +
				 (uint64_t)ts.tv_nsec / 1000000u, &suppressed))
		return;
	if (suppressed)
		log_msg(level, "%lu similar messages suppressed", suppressed);
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
