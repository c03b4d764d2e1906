// The UCX data path of the net plugin (BRAID_NET_TRANSPORT=ucx; built with BRAID_HAVE_UCX, UCX >= 1.13, ucp).
//
// Context: one ucp context per process (UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP, UCX_* variables read as UCX reads
// them, workers of several threads), created by the first init that asks for UCX and released with the last
// context or comm that holds it. Contexts are created one at a time, with UCM's memory events off unless
// UCX_MEM_EVENTS is set (runtime/ucx/ucx_init.h, which Braid's UCX transport uses too): two threads in ucp_init at
// once could deadlock in UCM's hook installation, and the plugin sends from and receives into NCCL's host buffers
// directly, which needs no registration cache (the cache is what the events keep coherent). The switch is
// UCM's, so it holds for the whole process.
//
// Worker per comm: every SendComm / RecvComm has its own ucp worker (UCS_THREAD_MODE_SERIALIZED, a mutex
// serializing the owner and the progress thread). One worker per comm keeps tags (= the message sequence number,
// full 64-bit mask) private to the connection, lets a comm close (cancel, flush, destroy) without touching another
// comm, and lets NCCL drive comms from different threads without a shared lock. The cost is a worker (its
// interfaces and sockets) per connection, as NCCL's socket transport pays sockets per connection.
//
// Connection: the TCP control connection is set up as for the TCP data path (no data sockets). The receiver sends
// its worker address as the first record on the control socket; the sender reads it in isend / test (connect never
// waits for accept) and creates its endpoint when its first send needs it and the control connection is still open
// (connecting to a worker that is already gone can trip an assertion in UCX 1.13's TCP transport, which aborts the
// process: see connectTo), with UCP_ERR_HANDLING_MODE_PEER, so a dead receiver fails the endpoint and its sends;
// when UCX_TLS leaves no transport that handles peer failures (UCX 1.13's shared-memory transports: ucp_ep_create
// says "Destination is unreachable"), without it: the control socket's EOF then tells of a dead peer (net/comm.h).
// Sends posted before the endpoint exists wait, not started, until then.
//
// Messages: ucp_tag_send_nbx on the sender when isend posts (tag = sequence number), ucp_tag_recv_nbx of exactly
// the announced size on the receiver when a header meets a buffer; both complete through callbacks (a message of
// another length than announced fails the comm). Zero-byte messages send nothing through UCX.
//
// Progress: the owner's isend / irecv / test progress the worker. A send complete to NCCL may still have bytes in
// UCX's user-space buffers (UCX's TCP transport), and protocol replies (rendezvous) need the worker too, so a
// progress thread per comm progresses it while the owner has not called in for kOwnerIdleNs, sleeping on the
// worker's event fd (ucp_worker_arm) otherwise.
//
// Close: a clean sender flushes its endpoint (drain) before the goodbye; a receiver flushes its worker. Shutdown
// stops the progress thread, cancels outstanding receives, force-closes the endpoint (pending sends complete with
// an error) and destroys the worker once every request's callback ran (within 1 s; otherwise the worker is left
// alive rather than destroyed under a request UCX still holds).
#pragma once

#include <memory>
#include <string>

#include "braid/status.h"
#include "net/comm.h"

namespace braid::nccl_plugin {

/// Whether this library was built with UCX.
bool ucxBuilt();

/// The process's ucp context (see above), created on first use. Errors: kInvalidUsage naming BRAID_NET_TRANSPORT
/// when the library was built without UCX; kSystemError when ucp_config_read / ucp_init fail.
Result<std::shared_ptr<UcxContext>> acquireUcxContext();

/// A UCX data path for one comm (`peer` names the other end in messages). Errors: kSystemError when the worker,
/// its address or its event fd cannot be had; kInvalidUsage without UCX.
Result<std::unique_ptr<DataPath>> makeUcxDataPath(bool sending, std::shared_ptr<UcxContext> context,
                                                  double idle_timeout_s, const std::string& peer);

}  // namespace braid::nccl_plugin
