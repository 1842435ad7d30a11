/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_abi.h - what the supervisor and vnicd-worker agree on outside
 * worker.proto: the fd numbers the worker finds at exec, and the kinds of
 * backend a NIC can have (the supervisor's view; worker.proto BackendKind
 * is what reaches the worker: tap and tap fd both arrive as a tap).
 */
#ifndef VNIC_WORKER_ABI_H
#define VNIC_WORKER_ABI_H

/* The fds the worker finds at exec (fork+exec, worker_spawn.c), besides
 * stdio. Everything else arrives in Config. A sandbox violation's record
 * goes to the stats page (sandbox.h), not to an fd. */
#define WORKER_CTRL_FD 3   /* control socket (SOCK_SEQPACKET) */
/* The read end of vnicd's lifeline pipe (supervisor/holders.h), which
 * only the worker's holder keeps (workers/holder.h); absent when the
 * worker was not started by vnicd: then it runs without a holder. */
#define WORKER_LIFELINE_FD 4

enum nic_backend_type {
	NIC_BACKEND_NONE = 0,
	NIC_BACKEND_TAP,      /* the supervisor opens or creates the tap */
	NIC_BACKEND_SOCKET,   /* the VMM passes an AF_UNIX dgram/seqpacket socket */
	NIC_BACKEND_TAP_FD,   /* the VMM passes an open tap fd */
	NIC_BACKEND_AF_PACKET, /* the supervisor opens an AF_PACKET socket on an
				* interface, with TPACKET_V3 rings (issue 17) */
};

#endif
