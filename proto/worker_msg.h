/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_msg: the messages a worker sends its supervisor (worker.proto),
 * one constructor each. The real worker, the fuzzers' simulated worker
 * and their seed generator build them here, so that each message has one
 * shape. A constructor fills a caller-owned struct wmsg (the envelope and
 * its body, usually on the stack) and returns the envelope, ready for
 * wire_worker_send; strings and arrays are borrowed, not copied.
 */
#ifndef VNIC_WORKER_MSG_H
#define VNIC_WORKER_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "worker.pb-c.h"

struct wmsg {
	Vnic__Worker__WorkerMessage m;
	union {
		Vnic__Worker__Ready ready;
		Vnic__Worker__Error error;
		Vnic__Worker__Stopped stopped;
		Vnic__Worker__PolicySet policy_set;
		Vnic__Worker__DirtyLogSet dirty_log_set;
		Vnic__Worker__CallFdSet call_fd_set;
		Vnic__Worker__QueueBroken queue_broken;
		Vnic__Worker__Log log;
		Vnic__Worker__FaultHit fault_hit;
	} b;
};

Vnic__Worker__WorkerMessage *wmsg_ready(struct wmsg *w, bool sandboxed);
Vnic__Worker__WorkerMessage *wmsg_error(struct wmsg *w, int errnum, const char *text);
/* @qp: n final indices, each filled by wmsg_queue_index. */
Vnic__Worker__WorkerMessage *wmsg_stopped(struct wmsg *w, Vnic__Vmm__QueueIndex **qp, size_t n);
void wmsg_queue_index(Vnic__Vmm__QueueIndex *qi, uint32_t index, uint32_t avail_idx,
		      uint32_t used_idx);
Vnic__Worker__WorkerMessage *wmsg_policy_set(struct wmsg *w, Vnic__Vmm__Policy *p);
/* @error: "" or NULL when none. */
Vnic__Worker__WorkerMessage *wmsg_dirty_log_set(struct wmsg *w, bool on, const char *error);
Vnic__Worker__WorkerMessage *wmsg_call_fd_set(struct wmsg *w, uint32_t queue);
Vnic__Worker__WorkerMessage *wmsg_queue_broken(struct wmsg *w, uint32_t queue,
					       const char *reason);
Vnic__Worker__WorkerMessage *wmsg_log(struct wmsg *w, Vnic__Worker__LogLevel level,
				      const char *text);
Vnic__Worker__WorkerMessage *wmsg_fault_hit(struct wmsg *w, const char *point,
					    const char *action, uint32_t arg);

#endif
