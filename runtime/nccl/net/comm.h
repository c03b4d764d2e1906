// The net plugin's communicators and requests (nccl_plugins.md §1.3 "isend" ... "test"; the striping of NCCL's
// own socket transport, nccl@2.28.9 src/transport/net_socket.cc, as facts).
//
// A SendComm / RecvComm owns one control socket and `nsocks` data sockets driven by `nthreads` helper threads
// (SocketWorker, each owning sockets s with s % nthreads == its index). The caller's thread (NCCL's proxy) does
// the control socket inside isend / irecv / test; the helpers move payload chunks straight between the
// sockets and the registered buffers. A test() that finds its request incomplete moves up to 4 MiB itself on
// sockets whose helper is not busy with them (a per-socket I/O lock) instead of spinning: on a host with few
// cores the proxy thread's polling then adds throughput instead of taking it from the helpers.
//
// Matching: the k-th isend on a connection is the k-th message; a grouped irecv of n buffers takes the next n
// messages, each into the buffer whose tag equals the message's tag. A message larger than its buffer fails
// the comm (ncclInvalidUsage, "message truncated"); a smaller one completes with its real size.
//
// Failures: EOF or an error on any socket (TCP keepalive on every socket turns a vanished host into one), or, with
// BRAID_NET_IDLE_TIMEOUT > 0, no byte moved for that long while a request is pending, marks the comm failed; every
// pending and later request then reports the error (ncclSystemError), once with a WARN line.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "abi/net_abi.h"
#include "braid/status.h"
#include "net/devices.h"
#include "net/handle.h"
#include "socket/socket.h"

namespace braid::nccl_plugin {

/// Identifies the kind of an opaque pointer NCCL hands back.
enum class ObjectKind : uint32_t {
  kListen = 0x4c53544e,
  kSend = 0x53454e44,
  kRecv = 0x52454356,
  kMemory = 0x4d454d52,
  kRequest = 0x52455153,
  kContext = 0x43545854,
  kDead = 0,
};

/// One piece of payload a helper writes from / reads into a buffer.
struct ChunkTask {
  char* data = nullptr;
  size_t bytes = 0;
  size_t moved = 0;
  std::atomic<int>* pending = nullptr;  // decremented when the chunk is done
};

class DataPath;

/// A helper thread moving chunks on its sockets (non-blocking I/O, poll(2) with an eventfd to be woken).
class SocketWorker {
 public:
  SocketWorker(DataPath* path, std::vector<int> sockets);
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

  DataPath* path_;
  std::vector<int> sockets_;                   // indices into the data path's sockets
  std::vector<std::deque<ChunkTask>> queues_;  // one per owned socket
  std::unique_ptr<std::mutex[]> io_;           // per owned socket: held by whoever moves its bytes
  std::mutex mutex_;                           // guards queues_
  int event_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// The data sockets of one comm, their helpers and the comm's failure state.
class DataPath {
 public:
  DataPath(bool sending, std::vector<net::Fd> sockets, int nthreads, double timeout_s);
  ~DataPath();
  bool sending() const { return sending_; }
  int nsocks() const { return static_cast<int>(sockets_.size()); }
  int fd(int socket) const { return sockets_[socket].get(); }
  /// Splits message `seq` of `size` bytes at `data` into chunks on their sockets (handle.h chunkBytes);
  /// `pending` is raised by the number of chunks first.
  void post(uint64_t seq, char* data, size_t size, std::atomic<int>* pending);
  /// Marks the comm failed (the first reason wins).
  void fail(StatusCode code, const std::string& reason);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  Status failure() const;
  /// Records that bytes moved now (the no-progress timeout restarts).
  void touch() { last_progress_ns_.store(nowNs(), std::memory_order_relaxed); }
  /// Moves up to `budget` bytes from the calling thread (SocketWorker::help); whether any moved.
  bool help(size_t budget);
  /// Fails the comm when nothing moved for the timeout; returns failed().
  bool checkStalled(const std::string& what);
  /// Stops the helpers (before the sockets close).
  void shutdown();

 private:
  static int64_t nowNs();
  bool sending_;
  std::vector<net::Fd> sockets_;
  std::vector<std::unique_ptr<SocketWorker>> workers_;
  int nthreads_;
  double timeout_s_;
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mutex_;
  Status failure_;
  std::atomic<int64_t> last_progress_ns_{0};
};

/// A request: one isend, one grouped irecv (n buffers), or one iflush.
struct Request {
  enum class Type { kSend, kRecv, kFlush };
  ObjectKind kind = ObjectKind::kRequest;
  void* comm = nullptr;  // the SendComm / RecvComm it belongs to
  Type type = Type::kSend;
  bool used = false;
  int n = 0;
  char* data[kNetMaxRecvs] = {};
  size_t capacity[kNetMaxRecvs] = {};  // receive: buffer sizes; send: data[0]'s size
  int tags[kNetMaxRecvs] = {};
  size_t sizes[kNetMaxRecvs] = {};  // bytes actually moved
  bool assigned[kNetMaxRecvs] = {};
  int assigned_count = 0;
  uint64_t header_end = 0;      // send: control-stream offset after this request's header
  std::atomic<int> pending{0};  // chunks not yet moved
};

/// Registration of a host buffer (regMr): nothing is pinned, the handle only records what was registered.
struct MemoryHandle {
  ObjectKind kind = ObjectKind::kMemory;
  void* data = nullptr;
  size_t size = 0;
  int type = nccl_abi::kPtrHost;
};

/// Shared by the two directions: the control socket, the data path and the request slots.
struct CommBase {
  ObjectKind kind;
  net::Fd control;
  std::unique_ptr<DataPath> path;
  std::vector<Request> requests;
  uint64_t next_seq = 0;          // message sequence number (matches the peer's)
  bool failure_reported = false;  // the WARN line was written
  std::string peer;               // "a.b.c.d:port" for messages
  CommBase(ObjectKind k, size_t slots) : kind(k), requests(slots) {}
  /// A free slot or nullptr.
  Request* allocate(Request::Type type);
};

struct SendComm : CommBase {
  std::vector<char> control_out;  // header bytes not yet written
  uint64_t control_written = 0;   // header bytes written since the start
  uint64_t control_queued = 0;    // header bytes ever queued
  SendComm() : CommBase(ObjectKind::kSend, static_cast<size_t>(nccl_abi::kNetMaxRequests) * kNetMaxRecvs) {}
};

struct RecvComm : CommBase {
  std::deque<Request*> unassigned;  // posted receives still waiting for some of their messages
  char header[16] = {};
  size_t header_have = 0;
  bool control_closed = false;                                                // EOF on the control socket
  RecvComm() : CommBase(ObjectKind::kRecv, nccl_abi::kNetMaxRequests + 1) {}  // + 1: an iflush slot
};

/// Builds a comm over connected sockets (`sockets[0]` control, the rest data). Starts the helpers.
std::unique_ptr<SendComm> makeSendComm(std::vector<net::Fd> sockets, int nthreads, double timeout_s, std::string peer);
std::unique_ptr<RecvComm> makeRecvComm(std::vector<net::Fd> sockets, int nthreads, double timeout_s, std::string peer);

/// The data-path entry points (v11 shapes; plugin.cc validates the opaque pointers first).
int sendPost(SendComm* comm, void* data, size_t size, int tag, void** request);
int recvPost(RecvComm* comm, int n, void** data, const size_t* sizes, const int* tags, void** request);
int flushPost(RecvComm* comm, void** request);
int requestTest(Request* request, int* done, int* sizes);
/// Stops the helpers and closes the sockets; the comm object is deleted by the caller.
void closeComm(CommBase* comm);

}  // namespace braid::nccl_plugin
