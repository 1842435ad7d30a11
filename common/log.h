/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log: logging for the daemons (vnicd, vnicd-worker, tools).
 *
 * Library code (shm/, proto/ apart from this file, sandbox/) never calls
 * these: it returns an errno and a message and the daemon decides.
 *
 * Output goes to stderr, one line per call with a UTC timestamp, ident and
 * pid ("2026-11-30T09:00:04.123Z vnicd[42]: warn: text"), or to syslog
 * (LOG_DAEMON), or, in the sandboxed worker, to a handler that forwards the
 * line to the supervisor (log_set_handler). Lines are cut at
 * LOG_LINE_MAX bytes; control characters (a hostile peer's newlines or
 * terminal escapes) are written as '?'.
 *
 * Every line a guest can trigger goes through log_ratelimited() (STYLE
 * habit 8).
 *
 * Not thread-safe: each daemon logs from its one event-loop thread.
 */
#ifndef VNIC_LOG_H
#define VNIC_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

/* Longest line written, prefix included. */
#define LOG_LINE_MAX 1024u

/* Named LOG_LEVEL_* because <syslog.h> owns LOG_INFO and LOG_DEBUG. */
enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN = 1,
	LOG_LEVEL_INFO = 2,
	LOG_LEVEL_DEBUG = 3,
};

/*
 * log_init - set the identity, the level and the destination.
 * @ident: program name for the prefix or syslog; copied.
 * @level: lines above it (less severe) are dropped.
 * @use_syslog: syslog instead of stderr.
 * May be called again (e.g. after parsing options); logging before any
 * call goes to stderr at LOG_LEVEL_INFO as "vnic".
 */
void log_init(const char *ident, enum log_level level, bool use_syslog);

/* log_reopen - reconnect to syslog (after a SIGHUP; a restarted
 * syslog daemon); nothing to do for stderr. */
void log_reopen(void);

void log_set_level(enum log_level level);
/* log_change_level - set @level and say so ("WHY: log level OLD -> NEW")
 * at warn, whatever the old and new levels filter. */
void log_change_level(enum log_level level, const char *why);
enum log_level log_get_level(void);

/* log_level_parse - "error", "warn", "info" or "debug".
 * Returns: 0 and *ret, or -EINVAL. */
int log_level_parse(const char *s, enum log_level *ret);
const char *log_level_name(enum log_level level);

/* A handler receives each line that passes the level check (without
 * prefix) instead of stderr/syslog; NULL restores the default. */
typedef void (*log_handler_fn)(enum log_level level, const char *text, void *arg);
void log_set_handler(log_handler_fn fn, void *arg);

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

/* _f variants prefix the calling function's name. */
#define log_error_f(fmt, ...) log_msg(LOG_LEVEL_ERROR, "%s: " fmt, __func__, ##__VA_ARGS__)
#define log_warn_f(fmt, ...) log_msg(LOG_LEVEL_WARN, "%s: " fmt, __func__, ##__VA_ARGS__)
#define log_info_f(fmt, ...) log_msg(LOG_LEVEL_INFO, "%s: " fmt, __func__, ##__VA_ARGS__)
#define log_debug_f(fmt, ...) log_msg(LOG_LEVEL_DEBUG, "%s: " fmt, __func__, ##__VA_ARGS__)

/*
 * fatal - log at error level with ": " and strerror(errno) appended, then
 * exit(1). fatalx - the same without errno. For our own broken invariants
 * and a misbehaving peer process; never for guest input (STYLE habit 7).
 */
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define fatal_f(fmt, ...) fatal("%s: " fmt, __func__, ##__VA_ARGS__)
#define fatalx_f(fmt, ...) fatalx("%s: " fmt, __func__, ##__VA_ARGS__)

/*
 * Rate limit for lines a guest can trigger (after the kernel's
 * ratelimit_state): at most @burst lines per @interval_ms window. The
 * first line of the next window that is let through is preceded by one
 * "N similar messages suppressed" line at the same level.
 * Define one per call site or per NIC:
 *     static struct log_ratelimit rl = LOG_RATELIMIT_INIT(5000, 10);
 */
struct log_ratelimit {
	uint64_t interval_ms;
	unsigned burst;
	uint64_t begin_ms;        /* start of the current window */
	unsigned printed;         /* lines let through in it */
	unsigned long suppressed; /* lines dropped since the last report */
};

#define LOG_RATELIMIT_INIT(interval_ms, burst) \
	{ (interval_ms), (burst), 0, 0, 0 }

/*
 * log_ratelimit_allow - the decision alone, at time now_ms (monotonic).
 * Returns: true if a line may be written; then *ret_suppressed is the count
 * to report first (0: none) and is reset. false: the line is counted as
 * suppressed.
 */
bool log_ratelimit_allow(struct log_ratelimit *rl, uint64_t now_ms,
			 unsigned long *ret_suppressed);

void log_ratelimited(struct log_ratelimit *rl, enum log_level level,
		     const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
