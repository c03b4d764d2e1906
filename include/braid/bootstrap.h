// Bootstrap: how the ranks of a communicator find each other (ARCHITECTURE.md §5), as NCCL's
// ncclGetUniqueId / bootstrap root. Rank 0 (or any one process) creates a UniqueId, which starts a root
// listener in that process and names its address; the id travels to every rank out of band (MPI_Bcast, a
// file, an environment variable as text); every rank connects to the root with (rank, size, its own
// listening address); the root answers with every rank's address; ranks then connect to each other (a full
// mesh of TCP connections) for the bootstrap collectives below and for liveness: a peer whose process dies
// closes its sockets, so checkPeers() sees it at once.
//
// Errors: kTimeout when a rendezvous does not complete within the timeout (naming the ranks still missing);
// kInvalidArgument for an id that is not a Braid id, mismatched sizes or a rank given twice; kSystemError
// naming the address for socket failures; kRemoteError naming the peer when it closed its connection, or when
// it closed its connection to the root before the rendezvous completed (every rank then fails at once).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid {

/// NCCL_UNIQUE_ID_BYTES = 128 (nccl.h): an opaque blob, safe to memcpy, broadcast, or print as text.
struct UniqueId {
  char internal[128] = {};
};

/// Text form of an id (hex, 256 characters) and back; for BRAID_UNIQUE_ID-style environment passing.
std::string uniqueIdToString(const UniqueId& id);
Result<UniqueId> uniqueIdFromString(const std::string& text);

/// Creates an id whose root listens in this process on `address` ("host:port"; port 0 = any free port;
/// empty = BRAID_SOCKET_IFNAME's address, else the address of this host's name, else 127.0.0.1). The root
/// thread serves one rendezvous of any size and exits when it finished or after the timeout.
Result<UniqueId> createUniqueId(const std::string& address = "");

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Host name and process id of every rank (same order as ranks): transports choose shared memory or
  /// threads for ranks of the same host / process from these. A host name is the rank's
  /// BootstrapOptions::host_id, else BRAID_HOSTID, else its machine's gethostname().
  virtual const std::vector<std::string>& hostNames() const = 0;
  virtual const std::vector<int64_t>& processIds() const = 0;
  /// `data` holds size() * bytes_per_rank bytes; this rank's slot (rank() * bytes_per_rank) is filled by the
  /// caller; on return every slot holds that rank's bytes.
  virtual Status allGather(void* data, size_t bytes_per_rank) = 0;
  virtual Status barrier() = 0;
  /// Point-to-point messages on the bootstrap mesh, matched by (peer, tag) in order.
  virtual Status send(int peer, int tag, const void* data, size_t bytes) = 0;
  virtual Status recv(int peer, int tag, void* data, size_t bytes) = 0;
  /// kRemoteError naming the first peer whose connection closed or that sent an abort; ok otherwise. Never
  /// blocks.
  virtual Status checkPeers() = 0;
  /// Tells every peer this rank failed (best effort, never blocks).
  virtual void abort(const std::string& why) = 0;
};

struct BootstrapOptions {
  double timeout_s = 0;  // 0: BRAID_TIMEOUT
  /// This rank's entry in hostNames() on every rank, at most 63 bytes; empty: BRAID_HOSTID, else gethostname().
  /// Ranks with equal names count as one host (shared memory, CUDA IPC), different names as different hosts
  /// (TCP, the device executor's proxied connections), so ranks of one machine (or one process) can stand for
  /// several hosts. Ranks of different machines must not share a name. Longer: kInvalidArgument naming it.
  std::string host_id;
};

/// Rendezvous through the root named in `id`. Every rank of 0..size-1 calls this once.
Result<std::unique_ptr<Bootstrap>> connectBootstrap(const UniqueId& id, int rank, int size,
                                                    const BootstrapOptions& options = {});

/// Environment-driven init: BRAID_RANK, BRAID_WORLD_SIZE, BRAID_ROOT ("host:port"; rank 0 listens there,
/// the others connect). Under mpirun without BRAID_ROOT: rank and size from MPI (OMPI_COMM_WORLD_RANK/SIZE,
/// PMI_RANK/PMI_SIZE) and the id broadcast with MPI_Bcast when Braid was built with MPI. Errors:
/// kInvalidArgument naming the variable that is missing or malformed.
Result<std::unique_ptr<Bootstrap>> bootstrapFromEnvironment(const BootstrapOptions& options = {});

}  // namespace braid
