/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sdnotify: vnicd under systemd (issue 10).
 *
 * - sd_notify: READY=1 once the control socket accepts and the loop runs,
 *   STATUS=... (NICs and connections, refreshed every SDNOTIFY_STATUS_MS
 *   while it changes), STOPPING=1 at SIGTERM/SIGINT. Without
 *   NOTIFY_SOCKET these do nothing.
 * - the journal: when stderr is the journal (JOURNAL_STREAM names its
 *   device and inode, as systemd sets it for StandardError=journal), every
 *   line goes through sd_journal_send with PRIORITY, SYSLOG_IDENTIFIER and,
 *   for a NIC's line ("nic ID ..."), NIC_ID=ID, and no timestamp of ours
 *   (the journal keeps one). Without journald's native socket, or when
 *   sd_journal_send fails, the line is written to stderr (the journal
 *   stream) with a "<N>" priority prefix (sd-daemon(3)) instead.
 */
#ifndef VNIC_SUP_SDNOTIFY_H
#define VNIC_SUP_SDNOTIFY_H

#include <stdbool.h>

struct sup;

#define SDNOTIFY_STATUS_MS 2000

/* sdnotify_journal_setup - route logs to the journal when stderr is it.
 * Returns: true when it did. */
bool sdnotify_journal_setup(const char *ident);

/* sdnotify_ready - READY=1 and a first STATUS; arms the STATUS timer. */
void sdnotify_ready(struct sup *s);

/* sdnotify_stopping - STOPPING=1 and STATUS=stopping N NICs. */
void sdnotify_stopping(struct sup *s);

/* sdnotify_reloading - RELOADING=1 before an upgrade's exec (the new
 * process sends READY=1 through sdnotify_ready); sdnotify_ready_again -
 * READY=1 when the exec failed and this process goes on. */
void sdnotify_reloading(struct sup *s);
void sdnotify_ready_again(struct sup *s);

/* sdnotify_free - the timer, at exit. */
void sdnotify_free(struct sup *s);

#endif
