/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holders: vnicd's side of its workers' holders (workers/holder.h).
 *
 * A holder is a worker's child that shares the worker's memory and sleeps
 * reading the lifeline, a pipe whose write end only vnicd holds (and never
 * writes to): each worker gets its read end at exec (WORKER_LIFELINE_FD)
 * and leaves it to its holder. When the worker dies its holder comes to
 * vnicd, a child subreaper; so a holder among vnicd's own children is one
 * whose worker is gone. After each worker it reaps (worker_reap) vnicd
 * looks for such children (named HOLDER_COMM) and lets each linger for
 * HOLDERS_LINGER_MS before it kills and reaps it, from the event loop,
 * holding no fd for it: the teardown of the worker's memory, which the
 * kill starts, then falls after a device stop's answer and after the rest
 * of a migration's downtime, not in them. If vnicd dies, the lifeline's
 * last write end closes and every holder exits.
 */
#ifndef VNICD_SUPERVISOR_HOLDERS_H
#define VNICD_SUPERVISOR_HOLDERS_H

struct event_base;

/* How long a holder outlives its worker. A migration's stop-and-copy
 * lasts what QEMU's downtime limit allows (300 ms by default). */
#define HOLDERS_LINGER_MS 1000

/* Become a child subreaper and open the lifeline (or keep the one
 * holders_adopt() gives); holders are then handled from base's loop.
 * Before this (a test that spawns workers itself) there is no lifeline,
 * workers start without a holder and the calls below do nothing.
 * Returns 0 or a negative errno. */
int holders_init(struct event_base *base);

/* An upgrade's new process: the lifeline that the old one handed over
 * (rd, wr) replaces the one holders_init() opened, so the holders of the
 * workers taken over keep sleeping. */
void holders_adopt(int rd, int wr);

/* The lifeline's ends (-1 before holders_init): rd for a worker's
 * WORKER_LIFELINE_FD, both for an upgrade's handover. */
int holders_lifeline_rd(void);
int holders_lifeline_wr(void);

/* After a worker was reaped: take up the holders among our children, in
 * a sweep 2 ms later (after the answers the reap releases). */
void holders_collect(void);

/* End every linger now: kill each holder among our children, reaped
 * from the loop as usual. Before a worker starts on a backend whose
 * mapped state outlives a worker (an AF_PACKET socket's rings: the
 * kernel refuses to replace them while any process maps them, and a
 * lingering holder maps its worker's). */
void holders_expire(void);

/* Kill every holder among our children now, wait for each, close the
 * lifeline and stop watching. */
void holders_shutdown(void);

#endif
