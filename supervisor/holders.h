/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holders: vnicd reaps its workers' holders (workers/holder.h).
 *
 * A holder is a worker's child that shares the worker's memory; it dies
 * with the worker (PR_SET_PDEATHSIG) and then tears that memory down. So
 * that the teardown is not the worker's, the holder outlives the worker by
 * a few milliseconds, and an orphan goes to the nearest child subreaper:
 * vnicd is one, and after each worker it reaps (worker_reap) it looks for
 * children named HOLDER_COMM and reaps each once it has exited, from the
 * event loop (a timer retries, 1 ms doubling to 100 ms, while one is left),
 * never blocking for it and holding no fd for it.
 */
#ifndef VNICD_SUPERVISOR_HOLDERS_H
#define VNICD_SUPERVISOR_HOLDERS_H

struct event_base;

/* Become a child subreaper; holders are then reaped from base's loop.
 * Before this (a test that spawns workers itself), holders_collect() and
 * holders_shutdown() do nothing: the holders go to init. Returns 0 or a
 * negative errno. */
int holders_init(struct event_base *base);

/* After a worker was reaped: take up the holders among our children. */
void holders_collect(void);

/* Wait for every holder taken up (they are dying with their workers),
 * and stop watching. */
void holders_shutdown(void);

#endif
