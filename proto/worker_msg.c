/* SPDX-License-Identifier: BSD-3-Clause */
/* worker_msg: see worker_msg.h. protobuf-c's string fields are char *;
 * the messages only borrow them, so the casts drop a const no one writes
 * through. */
#include "config.h"

#include "worker_msg.h"

static Vnic__Worker__WorkerMessage *envelope(struct wmsg *w,
					     Vnic__Worker__WorkerMessage__MsgCase c)
{
	vnic__worker__worker_message__init(&w->m);
	w->m.msg_case = c;
	return &w->m;
}

static char *str(const char *s)
{
	return (char *)(uintptr_t)(s ? s : "");
}

Vnic__Worker__WorkerMessage *wmsg_ready(struct wmsg *w, bool sandboxed)
{
	vnic__worker__ready__init(&w->b.ready);
	w->b.ready.sandboxed = sandboxed;
	envelope(w, VNIC__WORKER__WORKER_MESSAGE__MSG_READY)->ready = &w->b.ready;
	return &w->m;
}

Vnic__Worker__WorkerMessage *wmsg_error(struct wmsg *w, int errnum, const char *text)
{
	vnic__worker__error__init(&w->b.error);
	w->b.error.errnum = errnum;
	w->b.error.text = str(text);
	envelope(w, VNIC__WORKER__WORKER_MESSAGE__MSG_ERROR)->error = &w->b.error;
	return &w->m;
}

void wmsg_queue_index(Vnic__Vmm__QueueIndex *qi, uint32_t index, uint32_t avail_idx,
		      uint32_t used_idx)
{
	vnic__vmm__queue_index__init(qi);
	qi->index = index;
	qi->avail_idx = avail_idx;
	qi->used_idx = used_idx;
}

Vnic__Worker__WorkerMessage *wmsg_stopped(struct wmsg *w, Vnic__Vmm__QueueIndex **qp, size_t n)
{
	vnic__worker__stopped__init(&w->b.stopped);
	w->b.stopped.n_queues = n;
	w->b.stopped.queues = qp;
	envelope(w, VNIC__WORKER__WORKER_MESSAGE__MSG_STOPPED)->stopped = &w->b.stopped;
	return &w->m;
}

Vnic__Worker__WorkerMessage *wmsg_policy_set(struct wmsg *w, Vnic__Vmm__Policy *p)
{
	vnic__worker__policy_set__init(&w->b.policy_set);
	w->b.policy_set.policy = p;
	envelope(w, VNIC__WORKER__WORKER_MESSAGE__MSG_POLICY_SET)->policy_set = &w->b.policy_set;
	return &w->m;
}

Vnic__Worker__WorkerMessage *wmsg_dirty_log_set(struct wmsg *w, bool on, const char *error)
{
	vnic__worker__dirty_log_set__init(&w->b.dirty_log_set);
	w->b.dirty_log_set.on = on;
	w->b.dirty_log_set.error = str(error);
	envelope(w, VNIC__WORKER__WORKER_MESSAGE__MSG_DIRTY_LOG_SET)->dirty_log_set =
		&w->b.dirty_log_set;
	return &w->m;
}

Vnic__Worker__WorkerMessage *wmsg_call_fd_set(struct wmsg *w, uint32_t queue)
{
	vnic__worker__call_fd_set__init(&w->b.call_fd_set);
	w->b.call_fd_set.queue = queue;
	envelope(w, VNIC__WORKER__WORKER_MESSAGE__MSG_CALL_FD_SET)->call_fd_set =
		&w->b.call_fd_set;
	return &w->m;
}

Vnic__Worker__WorkerMessage *wmsg_queue_broken(struct wmsg *w, uint32_t queue,
					       const char *reason)
{
	vnic__worker__queue_broken__init(&w->b.queue_broken);
	w->b.queue_broken.queue = queue;
	w->b.queue_broken.reason = str(reason);
	envelope(w, VNIC__WORKER__WORKER_MESSAGE__MSG_QUEUE_BROKEN)->queue_broken =
		&w->b.queue_broken;
	return &w->m;
}

Vnic__Worker__WorkerMessage *wmsg_log(struct wmsg *w, Vnic__Worker__LogLevel level,
				      const char *text)
{
	vnic__worker__log__init(&w->b.log);
	w->b.log.level = level;
	w->b.log.text = str(text);
	envelope(w, VNIC__WORKER__WORKER_MESSAGE__MSG_LOG)->log = &w->b.log;
	return &w->m;
}

Vnic__Worker__WorkerMessage *wmsg_fault_hit(struct wmsg *w, const char *point,
					    const char *action, uint32_t arg)
{
	vnic__worker__fault_hit__init(&w->b.fault_hit);
	w->b.fault_hit.point = str(point);
	w->b.fault_hit.action = str(action);
	w->b.fault_hit.arg = arg;
	envelope(w, VNIC__WORKER__WORKER_MESSAGE__MSG_FAULT_HIT)->fault_hit = &w->b.fault_hit;
	return &w->m;
}
