// bootstrapFromEnvironment (include/braid/bootstrap.h): BRAID_RANK / BRAID_WORLD_SIZE / BRAID_ROOT, or an MPI
// launcher's rank variables with the UniqueId broadcast over MPI.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "bootstrap/bootstrap_internal.h"
#include "braid/bootstrap.h"
#include "common/env.h"
#include "socket/socket.h"

#if defined(BRAID_HAVE_MPI)
#include <mpi.h>
#endif

namespace braid {
namespace {

/// An integer from a launcher variable (not a BRAID_* one): nullopt when unset.
Result<std::optional<int>> launcherInt(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::optional<int>();
  char* end = nullptr;
  errno = 0;
  const long parsed = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || parsed < 0 || parsed > (1 << 30)) {
    return invalidArgument(fmt::format("{}={}: not a rank number", name, value));
  }
  return std::optional<int>(static_cast<int>(parsed));
}

/// Rank and size from the MPI launcher's environment (Open MPI, then MPICH/Intel MPI's PMI): both or nothing.
Result<std::optional<std::pair<int, int>>> launcherRankSize() {
  const std::pair<const char*, const char*> names[] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                                       {"PMI_RANK", "PMI_SIZE"}};
  for (const auto& [rank_name, size_name] : names) {
    BRAID_ASSIGN_OR_RETURN(std::optional<int> rank, launcherInt(rank_name));
    BRAID_ASSIGN_OR_RETURN(std::optional<int> size, launcherInt(size_name));
    if (rank && size) return std::optional<std::pair<int, int>>(std::make_pair(*rank, *size));
  }
  return std::optional<std::pair<int, int>>();
}

/// FNV-1a of the text: the nonce every rank derives from BRAID_ROOT.
uint64_t textNonce(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash == 0 ? 1 : hash;
}

/// The nonce of the rendezvous at BRAID_ROOT `root_text`. It names the rendezvous by BRAID_ROOT alone, so that a rank
/// started with another world size joins this rendezvous and the root fails every rank naming both sizes (a nonce
/// of its own would leave the others waiting for it until their timeout).
uint64_t envNonce(const std::string& root_text) { return textNonce(fmt::format("braid-env {}", root_text)); }

#if defined(BRAID_HAVE_MPI)
void finalizeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Result<std::unique_ptr<Bootstrap>> bootstrapOverMpi(std::optional<std::pair<int, int>> launcher,
                                                    const BootstrapOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
      return Status(StatusCode::kSystemError, "bootstrapFromEnvironment: MPI_Init failed");
    }
    std::atexit(finalizeMpi);  // we initialized MPI, so we finalize it (mpirun treats a missing finalize as an error)
  }
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (launcher && (launcher->first != rank || launcher->second != size)) {
    return invalidArgument(fmt::format("bootstrapFromEnvironment: the launcher says rank {} of {}, MPI says {} of {}",
                                       launcher->first, launcher->second, rank, size));
  }
  // Rank 0 creates the id; a failure travels as an all-zero id, which every rank reports.
  UniqueId id;
  Status created;
  if (rank == 0) {
    Result<UniqueId> made = createUniqueId();
    if (made.isOk()) {
      id = *made;
    } else {
      created = made.status();
    }
  }
  if (MPI_Bcast(id.internal, sizeof(id.internal), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    return Status(StatusCode::kSystemError, fmt::format("rank {}: MPI_Bcast of the bootstrap id failed", rank));
  }
  BRAID_RETURN_IF_ERROR(created);
  if (std::all_of(std::begin(id.internal), std::end(id.internal), [](char c) { return c == 0; })) {
    return Status(StatusCode::kRemoteError, fmt::format("rank {}: rank 0 could not create the bootstrap id", rank));
  }
  return connectBootstrap(id, rank, size, options);
}
#endif

}  // namespace

Result<std::unique_ptr<Bootstrap>> bootstrapFromEnvironment(const BootstrapOptions& options) {
  const std::string root_text = envString("BRAID_ROOT");
  const bool braid_rank_set = !envString("BRAID_RANK").empty() || !envString("BRAID_WORLD_SIZE").empty();
  std::optional<int> rank;
  std::optional<int> size;
  if (braid_rank_set) {
    BRAID_ASSIGN_OR_RETURN(int64_t r, envInt("BRAID_RANK"));
    BRAID_ASSIGN_OR_RETURN(int64_t s, envInt("BRAID_WORLD_SIZE"));
    Status refused = Status::ok();
    if (s < 1 || s > (1 << 30)) {
      refused = invalidArgument(fmt::format("BRAID_WORLD_SIZE={}: must be at least 1", s));
    } else if (r < 0 || r >= s) {
      refused = invalidArgument(fmt::format("BRAID_RANK={}: out of range for BRAID_WORLD_SIZE={}", r, s));
    }
    if (!refused.isOk()) {
      // The others wait for this rank at BRAID_ROOT: tell its root, which fails them at once.
      Result<net::SocketAddress> root = net::parseSocketAddress(root_text, "BRAID_ROOT");
      if (!root_text.empty() && root.isOk() && root->port != 0 && r >= INT32_MIN && r <= INT32_MAX) {
        bootstrap_internal::reportCouldNotJoin(bootstrap_internal::makeId(*root, envNonce(root_text)),
                                               static_cast<int>(r), refused.message());
      }
      return refused;
    }
    rank = static_cast<int>(r);
    size = static_cast<int>(s);
  }
  BRAID_ASSIGN_OR_RETURN(auto launcher, launcherRankSize());

  if (!root_text.empty()) {
    if (!rank && launcher) {
      rank = launcher->first;
      size = launcher->second;
    }
    if (!rank) {
      return invalidArgument(
          "bootstrapFromEnvironment: BRAID_ROOT is set but BRAID_RANK is not (and no MPI launcher "
          "variables name the rank)");
    }
    BRAID_ASSIGN_OR_RETURN(net::SocketAddress root, net::parseSocketAddress(root_text, "BRAID_ROOT"));
    if (root.port == 0) return invalidArgument("BRAID_ROOT=" + root_text + ": needs a port (host:port)");
    const uint64_t nonce = envNonce(root_text);
    UniqueId id = bootstrap_internal::makeId(root, nonce);
    if (*rank == 0) {
      Result<UniqueId> made = bootstrap_internal::startRoot(root, nonce);
      if (!made.isOk()) {
        const Status failed(made.status().code(),
                            fmt::format("rank 0: BRAID_ROOT={}: {}", root_text, made.status().message()));
        // Another rank 0 may hold the address already (two ranks given rank 0): its root then fails them all.
        bootstrap_internal::reportCouldNotJoin(id, 0, failed.message());
        return failed;
      }
    }
    return connectBootstrap(id, *rank, *size, options);
  }

  if (launcher) {
#if defined(BRAID_HAVE_MPI)
    return bootstrapOverMpi(launcher, options);
#else
    return invalidArgument(
        "bootstrapFromEnvironment: BRAID_ROOT is not set; under an MPI launcher this build (without MPI) needs "
        "BRAID_ROOT=host:port to find the root");
#endif
  }
  if (!rank) {
    return invalidArgument(
        "bootstrapFromEnvironment: BRAID_RANK is not set (set BRAID_RANK, BRAID_WORLD_SIZE and "
        "BRAID_ROOT=host:port, or run under mpirun)");
  }
  return invalidArgument(
      "bootstrapFromEnvironment: BRAID_ROOT is not set (host:port of the bootstrap root; rank 0 "
      "listens there)");
}

}  // namespace braid
