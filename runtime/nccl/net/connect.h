// Connection setup of the net plugin (nccl_plugins.md §1.3 "listen", "connect", "accept"): every call returns at
// once; connect and accept report progress with NCCL's retry convention (success with *comm == NULL: call
// again). See net/handle.h for the handle and the hello.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "net/comm.h"
#include "net/handle.h"

namespace braid::nccl_plugin {

/// Per-connection parameters chosen at init (BRAID_NET_TRANSPORT, BRAID_NET_NSOCKS x BRAID_NET_NTHREADS sockets,
/// BRAID_TIMEOUT, BRAID_NET_IDLE_TIMEOUT, BRAID_CC_*, BRAID_TCP_CONGESTION).
struct ConnectionOptions {
  NetTransport transport = NetTransport::kTcp;
  int nsocks = 2;  // TCP: data sockets per connection (threads x sockets per thread)
  int nthreads = 2;
  double timeout_s = 300;           // connect: how long the listener may stay unreachable; established
                                    // connections: how long TCP may go unacknowledged before the peer is dead
  double idle_timeout_s = 0;        // a pending request with no byte moving fails after this; 0 = never
  std::shared_ptr<UcxContext> ucx;  // UCX: the process's context (net/ucx_path.h)
  congestion::Config cc;            // BRAID_CC_*: receiver admission on the TCP data path (net/admission.h)
  std::string tcp_congestion;       // BRAID_TCP_CONGESTION
  /// What a comm's data path is built from.
  DataPathOptions dataPath() const {
    return DataPathOptions{transport, nthreads, idle_timeout_s, timeout_s, ucx, cc, tcp_congestion};
  }
};

/// The receiving end before accept(): a listening socket and the sockets that arrived so far.
struct ListenComm {
  ObjectKind kind = ObjectKind::kListen;
  net::Fd fd;
  ConnectHandle handle;
  ConnectionOptions options;
  struct Arrival {  // an accepted socket whose hello is not complete yet
    net::Fd fd;
    Hello hello;
    size_t have = 0;
  };
  std::vector<Arrival> arrivals;
  struct Group {  // the sockets of one connect, by index
    std::vector<net::Fd> fds;
    int count = 0;
    std::string peer;
  };
  std::map<uint64_t, Group> groups;
};

/// Listens on device `dev`'s address (ephemeral port) and writes the handle. Errors: kSystemError (socket).
Result<std::unique_ptr<ListenComm>> listenOn(int dev, const ConnectionOptions& options, void* handle);

/// One step of connecting to `handle` (state kept in the handle, see handle.h). Returns the comm when every
/// socket is connected and has sent its hello, nullptr while in progress (it never waits for the peer's accept).
/// Errors: the handle's; kInvalidUsage when the listener uses another BRAID_NET_TRANSPORT; kSystemError when a
/// socket fails, the connection is not up within the timeout or the UCX worker cannot be created.
Result<std::unique_ptr<SendComm>> connectStep(void* handle, const ConnectionOptions& options);

/// One step of accepting: takes pending connections and hellos; returns the first complete connection,
/// nullptr while none is. Errors: kSystemError from accept(2) or the UCX worker. Stray sockets (wrong nonce, EOF)
/// are dropped.
Result<std::unique_ptr<RecvComm>> acceptStep(ListenComm* listen);

}  // namespace braid::nccl_plugin
