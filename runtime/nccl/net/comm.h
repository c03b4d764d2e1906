// The net plugin's communicators and requests (nccl_plugins.md §1.3 "isend" ... "test").
//
// A SendComm / RecvComm owns one control socket (message headers, net/handle.h) and a DataPath that moves the
// payload: the TCP data path (net/tcp_path.h: data sockets striped as NCCL's own socket transport does) or the
// UCX data path (net/ucx_path.h: UCX tag messages, tag = message sequence number), chosen by BRAID_NET_TRANSPORT.
// The caller's thread (NCCL's proxy) does the control socket inside isend / irecv / test (net/transfer.cc); that
// code, the matching of headers to buffers and the failure rules below are one piece of code for both paths.
//
// Matching: the k-th isend on a connection is the k-th message; a grouped irecv of n buffers takes the next n
// messages, each into the buffer whose tag equals the message's tag. The receiver reads headers as they arrive
// (up to kMaxQueuedHeaders ahead of its receives) and starts the payload of a message when its header meets a
// buffer. A message larger than its buffer fails the comm (ncclInvalidUsage, "message truncated"); a smaller one
// completes with its real size. Zero-byte messages are a header alone.
//
// Closing and failures: a comm closed on purpose writes a goodbye record on the control socket before closing it
// (a sender only when every message it announced was delivered: data written to the kernel, or the UCX endpoint
// flushed). End of file on the control socket without a goodbye is a peer that died: every pending and later
// request fails with ncclSystemError. After a sender's goodbye the receives whose headers arrived still complete
// and the others fail; after a receiver's goodbye a send still pending kPeerCloseGraceS later fails. Besides, any
// error of the data path (a data socket's EOF or reset, a failed UCX endpoint or request), TCP keepalive on every
// socket (a vanished host, about 40 s) or, with BRAID_NET_IDLE_TIMEOUT > 0, no byte moved for that long while a
// request is pending, marks the comm failed; every pending and later request then reports the error, once with a
// WARN line.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "abi/net_abi.h"
#include "braid/status.h"
#include "congestion/congestion.h"
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

/// Headers a receiver reads ahead of its posted receives (beyond, it leaves them in the socket).
inline constexpr size_t kMaxQueuedHeaders = 1024;
/// How long a send may stay pending after the receiver closed on purpose (a reply in flight may still
/// complete it), seconds.
inline constexpr double kPeerCloseGraceS = 1.0;
/// Longest wait of a close for its data path to deliver what it holds and for the goodbye to be written, seconds.
inline constexpr double kCloseDrainS = 2.0;

class UcxContext;
class Admission;

/// How a comm's data path is built (from BRAID_NET_TRANSPORT, BRAID_NET_NTHREADS, BRAID_NET_IDLE_TIMEOUT,
/// BRAID_CC_*).
struct DataPathOptions {
  NetTransport transport = NetTransport::kTcp;
  int nthreads = 2;                 // TCP: helper threads
  double idle_timeout_s = 0;        // see BRAID_NET_IDLE_TIMEOUT; 0 = never
  double dead_peer_s = 300;         // BRAID_TIMEOUT: how long TCP may go without an acknowledgement (keepalive)
  std::shared_ptr<UcxContext> ucx;  // UCX: the process's context
  congestion::Config cc;            // BRAID_CC_*: adaptive receivers of the TCP data path admit senders
  std::string tcp_congestion;       // BRAID_TCP_CONGESTION: the data sockets' TCP congestion control ("": the system's)
};

/// The payload mover of one comm, and the comm's failure state. Implementations: TcpDataPath (net/tcp_path.h),
/// the UCX data path (net/ucx_path.h). Called by the owner's thread (NCCL's proxy); an implementation's own
/// threads only touch what it guards itself, `pending` counters and the failure state.
class DataPath {
 public:
  DataPath(bool sending, double idle_timeout_s);
  virtual ~DataPath() = default;
  DataPath(const DataPath&) = delete;
  DataPath& operator=(const DataPath&) = delete;
  bool sending() const { return sending_; }

  /// Starts moving message `seq` (0, 1, ... in posting order on both ends) of `size` > 0 bytes at `data`: the
  /// sender sends it, the receiver receives it (its header announced `size`). Raises *pending by the parts the
  /// message is cut into first; each part lowers it when done. A failure marks the comm failed.
  virtual void post(uint64_t seq, char* data, size_t size, std::atomic<int>* pending) = 0;
  /// Moves what it can from the calling thread (test() of a request not yet complete); whether anything moved.
  virtual bool progress() = 0;
  /// Receiver: what the sender needs before the first message can move (the UCX worker address); "" for none.
  virtual std::string localAddress() const { return {}; }
  /// Sender: the receiver's localAddress() arrived; messages posted before it start now. Errors: kSystemError
  /// (the endpoint cannot be created); kInternalError for a data path that expects no address.
  virtual Status connectTo(const std::string& address);
  /// Close on purpose: waits up to `seconds` until what was handed to the data path left this process (sender:
  /// every message delivered to the kernel or the peer; receiver: its protocol replies sent). Whether it did.
  virtual bool drain(double seconds) = 0;
  /// Stops the data path's threads and releases its resources; afterwards nothing touches a registered buffer.
  /// Idempotent.
  virtual void shutdown() = 0;

  /// Marks the comm failed (the first reason wins).
  void fail(StatusCode code, const std::string& reason);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  Status failure() const;
  /// Records that bytes moved now (the no-progress timeout restarts).
  void touch() { last_progress_ns_.store(nowNs(), std::memory_order_relaxed); }
  /// Fails the comm when nothing moved for the idle timeout; returns failed().
  bool checkStalled(const std::string& what);
  static int64_t nowNs();

 private:
  bool sending_;
  double idle_timeout_s_;
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
  std::atomic<int> pending{0};  // parts of its messages not yet moved
};

/// Registration of a host buffer (regMr): nothing is pinned, the handle only records what was registered.
struct MemoryHandle {
  ObjectKind kind = ObjectKind::kMemory;
  void* data = nullptr;
  size_t size = 0;
  int type = nccl_abi::kPtrHost;
};

/// Shared by the two directions: the control socket (both ways), the data path and the request slots.
struct CommBase {
  ObjectKind kind;
  net::Fd control;
  std::unique_ptr<DataPath> path;
  std::vector<Request> requests;
  uint64_t next_seq = 0;          // message sequence number (matches the peer's)
  bool failure_reported = false;  // the WARN line was written
  std::string peer;               // "a.b.c.d:port" for messages
  // Control stream out: records not yet written (headers, the UCX address, the goodbye).
  std::vector<char> control_out;
  uint64_t control_written = 0;  // bytes written since the start
  uint64_t control_queued = 0;   // bytes ever queued
  // Control stream in: the record being read and, after an address record, its payload.
  char record[sizeof(MessageHeader)] = {};
  size_t record_have = 0;
  std::string payload;
  size_t payload_want = 0;
  bool address_pending = false;  // a complete address record not yet handed to the data path
  bool control_closed = false;   // EOF on the control socket
  bool goodbye = false;          // the peer's goodbye arrived
  int64_t closed_at_ns = 0;      // when the EOF was seen
  CommBase(ObjectKind k, size_t slots) : kind(k), requests(slots) {}
  /// A free slot or nullptr.
  Request* allocate(Request::Type type);
};

/// A message of a send comm whose payload is not handed to the data path yet (net/admission.h): it waits for
/// credit, or behind one that does.
struct HeldSend {
  uint64_t seq = 0;
  char* data = nullptr;
  size_t size = 0;
  size_t part = 0;  // bytes per part
  size_t next = 0;  // parts handed over so far
  bool credited = false;
  std::atomic<int>* pending = nullptr;
};

struct SendComm : CommBase {
  congestion::Config cc;
  // The receiver's admission (its kAdmitMagic records).
  bool peer_admits = false;
  bool peer_open = true;
  uint64_t peer_grant = 0;     // its grant size
  uint64_t credit = 0;         // granted, not spent
  uint64_t credit_wanted = 0;  // credited bytes announced and not yet covered by grants
  std::deque<HeldSend> held;
  std::vector<congestion::SenderControl> reporters;  // per data socket: TCP_INFO -> retransmission timeouts
  SendComm() : CommBase(ObjectKind::kSend, static_cast<size_t>(nccl_abi::kNetMaxRequests) * kNetMaxRecvs) {}
};

struct RecvComm : CommBase {
  std::deque<Request*> unassigned;    // posted receives still waiting for some of their messages
  std::deque<MessageHeader> headers;  // headers read but not yet matched to a buffer
  uint64_t announced = 0;             // headers read in all
  // Admission (net/admission.h), when this receiver admits senders.
  std::shared_ptr<Admission> admission;
  int sender = -1;                            // this comm's number in the admission
  uint64_t mode_epoch = 0;                    // the admission's mode as last told to the sender
  std::atomic<uint64_t> credited_arrived{0};  // credited bytes the data path read
  uint64_t credited_counted = 0;              // ... of which the admission was told
  RecvComm() : CommBase(ObjectKind::kRecv, nccl_abi::kNetMaxRequests + 1) {}  // + 1: an iflush slot
  ~RecvComm();
};

/// Dead-peer detection on one TCP socket of a comm: keepalive probes after 10 s of silence, 5 s apart, and
/// TCP_USER_TIMEOUT = `dead_peer_s` (milliseconds, clamped to [1 s, INT_MAX ms]): the kernel gives the connection up
/// (ETIMEDOUT) once nothing sent on it, data or probe, was acknowledged for that long (tcp(7)). Best effort: a
/// socket option the kernel refuses is left at its default.
void setDeadPeerDetection(int fd, double dead_peer_s);

/// Builds a comm over connected sockets (`sockets[0]` control, the rest TCP data sockets; UCX: the control socket
/// alone) and starts its data path; a receiver queues its UCX address for the sender. Errors: the data path's
/// (kSystemError: a UCX worker that cannot be created).
Result<std::unique_ptr<SendComm>> makeSendComm(std::vector<net::Fd> sockets, const DataPathOptions& options,
                                               std::string peer);
Result<std::unique_ptr<RecvComm>> makeRecvComm(std::vector<net::Fd> sockets, const DataPathOptions& options,
                                               std::string peer);

/// The data-path entry points (v11 shapes; plugin.cc validates the opaque pointers first).
int sendPost(SendComm* comm, void* data, size_t size, int tag, void** request);
int recvPost(RecvComm* comm, int n, void** data, const size_t* sizes, const int* tags, void** request);
int flushPost(RecvComm* comm, void** request);
int requestTest(Request* request, int* done, int* sizes);
/// Writes the goodbye when the comm may (see above), stops the data path and closes the sockets; the comm object
/// is deleted by the caller.
void closeComm(CommBase* comm);

}  // namespace braid::nccl_plugin
