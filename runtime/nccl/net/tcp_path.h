// The TCP data path of the net plugin (BRAID_NET_TRANSPORT=tcp, the default; the striping of NCCL's own socket
// transport, nccl@2.28.9 src/transport/net_socket.cc, as facts).
//
// A comm's `nsocks` data sockets are driven by `nthreads` helper threads (SocketWorker, each owning sockets s with
// s % nthreads == its index) that move payload chunks straight between the sockets and the registered buffers.
// Message `seq` of `size` bytes is cut into chunks of chunkBytes(size, nsocks) (net/handle.h); chunk c travels on
// socket (seq + c) % nsocks, so both ends compute the same split from the message order. A test() that finds its
// request incomplete moves up to 4 MiB itself on sockets whose helper is not busy with them (a per-socket I/O lock)
// instead of spinning: on a host with few cores the proxy thread's polling then adds throughput instead of taking
// it from the helpers. EOF or an error on a data socket fails the comm.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "net/comm.h"

namespace braid::nccl_plugin {

/// One piece of payload a helper writes from / reads into a buffer.
struct ChunkTask {
  char* data = nullptr;
  size_t bytes = 0;
  size_t moved = 0;
  std::atomic<int>* pending = nullptr;       // decremented when the chunk is done
  std::atomic<uint64_t>* arrived = nullptr;  // receiver, credited messages: grows by `bytes` when the chunk is done
};

class TcpDataPath;

/// A helper thread moving chunks on its sockets (non-blocking I/O, poll(2) with an eventfd to be woken).
class SocketWorker {
 public:
  SocketWorker(TcpDataPath* path, std::vector<int> sockets);
  ~SocketWorker();
  SocketWorker(const SocketWorker&) = delete;
  SocketWorker& operator=(const SocketWorker&) = delete;
  /// Queues `task` on socket `socket` (one of this worker's) and wakes the thread.
  void enqueue(int socket, ChunkTask task);
  /// Stops and joins the thread (queued tasks are dropped).
  void stop();
  /// Moves up to *budget bytes on this worker's sockets from the calling thread, skipping sockets the helper
  /// is using; returns whether any byte moved.
  bool help(size_t* budget);

 private:
  void run();
  void wake();
  // Moves bytes of the head task of queue q (at most *budget when not NULL); true when that task finished.
  // The caller holds io_[q].
  bool progress(size_t q, size_t* budget);

  TcpDataPath* path_;
  std::vector<int> sockets_;                   // indices into the data path's sockets
  std::vector<std::deque<ChunkTask>> queues_;  // one per owned socket
  std::unique_ptr<std::mutex[]> io_;           // per owned socket: held by whoever moves its bytes
  std::mutex mutex_;                           // guards queues_
  int event_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// The data sockets of one comm and their helpers.
class TcpDataPath final : public DataPath {
 public:
  /// Most bytes one progress() call (a test()) moves itself.
  static constexpr size_t kHelpBudgetBytes = 4 << 20;

  TcpDataPath(bool sending, std::vector<net::Fd> sockets, int nthreads, double idle_timeout_s);
  ~TcpDataPath() override;
  int nsocks() const { return static_cast<int>(sockets_.size()); }
  int fd(int socket) const { return sockets_[socket].get(); }
  /// Splits the message into chunks on their sockets (see above).
  void post(uint64_t seq, char* data, size_t size, std::atomic<int>* pending) override;
  /// Parts of `part` bytes a message of `size` bytes is cut into.
  static size_t partCount(size_t size, size_t part) { return (size + part - 1) / part; }
  /// Queues parts [first, end) of message `seq` cut into parts of `part` bytes (part c on socket (seq + c) %
  /// nsocks, as post() does with part = chunkBytes(size, nsocks)); the caller raised *pending by the message's
  /// part count. `arrived` (receiver; may be NULL) grows by each part's bytes as it completes.
  void postParts(uint64_t seq, char* data, size_t size, size_t part, size_t first, size_t end,
                 std::atomic<int>* pending, std::atomic<uint64_t>* arrived);
  /// Moves up to kHelpBudgetBytes from the calling thread (SocketWorker::help).
  bool progress() override;
  /// Bytes a finished send wrote are in the kernel, which delivers them after close: nothing to wait for.
  bool drain(double) override { return true; }
  /// Stops the helpers (before the sockets close).
  void shutdown() override;

 private:
  std::vector<net::Fd> sockets_;
  std::vector<std::unique_ptr<SocketWorker>> workers_;
  int nthreads_;
};

}  // namespace braid::nccl_plugin
