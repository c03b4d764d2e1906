// Creating a ucp context, shared by the UCX transport (runtime/transport/ucx) and the net plugin's UCX data path
// (runtime/nccl/net/ucx_path.cc). Part of braid_runtime; compiled only in a build with UCX (BRAID_HAVE_UCX).
#pragma once

#include <ucp/api/ucp.h>

namespace braid::ucx {

/// ucp_config_read, then ucp_init with `params`, then ucp_config_release. Contexts are created one at a time per
/// process (a mutex), with UCM's memory events turned off first unless UCX_MEM_EVENTS is set: two threads in
/// ucp_init at once (braid_perf -t 2 --transport ucx) could deadlock in UCM's hook installation (ucm_mmap_install
/// -> ucm_event_enter_exclusive, found with gdb: 1-2 of 15 runs), and with events off it never did (0 of 30 runs).
/// Braid's UCX users send from their own buffers and receive into host memory, so they need no registration cache,
/// which is what the events keep coherent; the switch is UCM's, so it holds for the whole process.
/// Returns UCS_OK with *context set, or the failing call's status with *context NULL and *failed_call naming that
/// call ("ucp_config_read" or "ucp_init").
ucs_status_t initContext(const ucp_params_t& params, ucp_context_h* context, const char** failed_call);

}  // namespace braid::ucx
