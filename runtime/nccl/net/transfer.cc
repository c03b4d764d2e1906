// The data path of the net plugin (net/comm.h): helper threads, isend / irecv / iflush / test.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/plugin_log.h"
#include "net/comm.h"

namespace braid::nccl_plugin {
namespace {

constexpr int kWorkerPollMs = 100;            // longest sleep of a helper between checks of its stop flag
constexpr size_t kHelpBudgetBytes = 4 << 20;  // most bytes one test() call moves itself

Status socketError(const std::string& what, int err) {
  return Status(StatusCode::kSystemError, what + ": " + net::errnoText(err));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// SocketWorker

SocketWorker::SocketWorker(DataPath* path, std::vector<int> sockets)
    : path_(path),
      sockets_(std::move(sockets)),
      queues_(sockets_.size()),
      io_(std::make_unique<std::mutex[]>(sockets_.size())) {
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { run(); });
}

SocketWorker::~SocketWorker() {
  stop();
  if (event_fd_ >= 0) close(event_fd_);
}

void SocketWorker::wake() {
  if (event_fd_ < 0) return;
  const uint64_t one = 1;
  ssize_t ignored = write(event_fd_, &one, sizeof(one));
  (void)ignored;
}

void SocketWorker::enqueue(int socket, ChunkTask task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t q = 0; q < sockets_.size(); ++q) {
      if (sockets_[q] == socket) queues_[q].push_back(task);
    }
  }
  wake();
}

void SocketWorker::stop() {
  stop_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
}

bool SocketWorker::progress(size_t q, size_t* budget) {
  ChunkTask* task;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queues_[q].empty()) return false;
    task = &queues_[q].front();  // deque: the front stays put while others are appended
  }
  const int fd = path_->fd(sockets_[q]);
  while (task->moved < task->bytes) {
    if (budget != nullptr && *budget == 0) return false;
    size_t want = task->bytes - task->moved;
    if (budget != nullptr && want > *budget) want = *budget;
    const ssize_t got = path_->sending() ? send(fd, task->data + task->moved, want, MSG_NOSIGNAL)
                                         : recv(fd, task->data + task->moved, want, 0);
    if (got > 0) {
      task->moved += static_cast<size_t>(got);
      if (budget != nullptr) *budget -= static_cast<size_t>(got);
      path_->touch();
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    const std::string what = std::string("NET/Braid: data socket ") + std::to_string(sockets_[q]);
    if (got == 0) {
      path_->fail(StatusCode::kSystemError, what + ": connection closed by the peer (its process exited?)");
    } else {
      path_->fail(StatusCode::kSystemError, socketError(what, errno).message());
    }
    return false;
  }
  task->pending->fetch_sub(1, std::memory_order_acq_rel);
  std::lock_guard<std::mutex> lock(mutex_);
  queues_[q].pop_front();
  return true;
}

bool SocketWorker::help(size_t* budget) {
  bool moved = false;
  for (size_t q = 0; q < sockets_.size() && *budget > 0 && !path_->failed(); ++q) {
    std::unique_lock<std::mutex> io(io_[q], std::try_to_lock);
    if (!io.owns_lock()) continue;  // the helper is on it
    const size_t before = *budget;
    while (progress(q, budget)) {
    }
    moved = moved || *budget != before;
  }
  return moved;
}

void SocketWorker::run() {
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    fds.clear();
    fds.push_back({event_fd_, POLLIN, 0});
    int timeout_ms = kWorkerPollMs;
    if (!path_->failed()) {
      for (size_t q = 0; q < sockets_.size(); ++q) {
        std::unique_lock<std::mutex> io(io_[q], std::try_to_lock);
        if (!io.owns_lock()) {
          timeout_ms = 1;  // the caller's thread is moving bytes on it: look again soon
          continue;
        }
        while (progress(q, nullptr)) {
        }
        bool busy;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          busy = !queues_[q].empty();
        }
        if (busy && !path_->failed()) {
          fds.push_back({path_->fd(sockets_[q]), static_cast<short>(path_->sending() ? POLLOUT : POLLIN), 0});
        }
      }
    }
    if (poll(fds.data(), fds.size(), timeout_ms) > 0 && (fds[0].revents & POLLIN) != 0) {
      uint64_t count;
      ssize_t ignored = read(event_fd_, &count, sizeof(count));
      (void)ignored;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// DataPath

DataPath::DataPath(bool sending, std::vector<net::Fd> sockets, int nthreads, double timeout_s)
    : sending_(sending), sockets_(std::move(sockets)), nthreads_(nthreads), timeout_s_(timeout_s) {
  touch();
  for (int t = 0; t < nthreads_; ++t) {
    std::vector<int> mine;
    for (int s = t; s < nsocks(); s += nthreads_) mine.push_back(s);
    workers_.push_back(std::make_unique<SocketWorker>(this, std::move(mine)));
  }
}

DataPath::~DataPath() { shutdown(); }

void DataPath::shutdown() {
  for (auto& w : workers_) w->stop();
  workers_.clear();
}

int64_t DataPath::nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void DataPath::post(uint64_t seq, char* data, size_t size, std::atomic<int>* pending) {
  if (size == 0) return;
  const size_t chunk = chunkBytes(size, nsocks());
  const int count = static_cast<int>((size + chunk - 1) / chunk);
  pending->fetch_add(count, std::memory_order_acq_rel);
  for (int c = 0; c < count; ++c) {
    const size_t offset = static_cast<size_t>(c) * chunk;
    const size_t bytes = std::min(chunk, size - offset);
    const int socket = static_cast<int>((seq + static_cast<uint64_t>(c)) % static_cast<uint64_t>(nsocks()));
    workers_[socket % nthreads_]->enqueue(socket, ChunkTask{data + offset, bytes, 0, pending});
  }
}

bool DataPath::help(size_t budget) {
  bool moved = false;
  for (auto& w : workers_) moved = w->help(&budget) || moved;
  return moved;
}

void DataPath::fail(StatusCode code, const std::string& reason) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failed_.load()) return;
  failure_ = Status(code, reason);
  failed_.store(true, std::memory_order_release);
}

Status DataPath::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

bool DataPath::checkStalled(const std::string& what) {
  if (failed()) return true;
  const double idle_s = static_cast<double>(nowNs() - last_progress_ns_.load(std::memory_order_relaxed)) * 1e-9;
  if (timeout_s_ > 0 && idle_s > timeout_s_) {
    fail(StatusCode::kSystemError,
         fmt::format("NET/Braid: {}: no byte moved for {:.1f} s (BRAID_NET_IDLE_TIMEOUT={:g}): "
                     "the peer stopped or the network is down",
                     what, idle_s, timeout_s_));
  }
  return failed();
}

// ---------------------------------------------------------------------------------------------------------------
// Comms

Request* CommBase::allocate(Request::Type type) {
  for (Request& r : requests) {
    if (r.used) continue;
    r.kind = ObjectKind::kRequest;
    r.comm = this;
    r.type = type;
    r.used = true;
    r.n = 0;
    r.assigned_count = 0;
    r.header_end = 0;
    r.pending.store(0);
    for (int i = 0; i < kNetMaxRecvs; ++i) {
      r.data[i] = nullptr;
      r.capacity[i] = r.sizes[i] = 0;
      r.tags[i] = 0;
      r.assigned[i] = false;
    }
    return &r;
  }
  return nullptr;
}

namespace {

// TCP keepalive on every socket of a comm: a peer host that vanishes (power, network) turns into ETIMEDOUT on the
// sockets after about kKeepIdleS + kKeepCount x kKeepIntervalS seconds, failing the pending requests, while a live
// peer that is only slow (a rank still computing) is waited for, as NCCL's own socket transport waits.
constexpr int kKeepIdleS = 10;
constexpr int kKeepIntervalS = 5;
constexpr int kKeepCount = 6;
void setKeepAlive(int fd) {
  const int on = 1, idle = kKeepIdleS, interval = kKeepIntervalS, count = kKeepCount;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

template <class Comm>
std::unique_ptr<Comm> makeComm(bool sending, std::vector<net::Fd> sockets, int nthreads, double timeout_s,
                               std::string peer) {
  auto comm = std::make_unique<Comm>();
  for (const net::Fd& s : sockets) setKeepAlive(s.get());
  comm->control = std::move(sockets[0]);
  std::vector<net::Fd> data;
  for (size_t i = 1; i < sockets.size(); ++i) data.push_back(std::move(sockets[i]));
  comm->path = std::make_unique<DataPath>(sending, std::move(data), nthreads, timeout_s);
  comm->peer = std::move(peer);
  return comm;
}

// Writes queued header bytes as far as the control socket takes them.
void flushControl(SendComm* comm) {
  while (!comm->control_out.empty() && !comm->path->failed()) {
    const ssize_t got = send(comm->control.get(), comm->control_out.data(), comm->control_out.size(), MSG_NOSIGNAL);
    if (got > 0) {
      comm->control_out.erase(comm->control_out.begin(), comm->control_out.begin() + got);
      comm->control_written += static_cast<uint64_t>(got);
      comm->path->touch();
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    comm->path->fail(StatusCode::kSystemError,
                     socketError("NET/Braid: control socket to " + comm->peer, got < 0 ? errno : EPIPE).message());
  }
}

// Matches one received header to the oldest receive still missing messages.
void assignHeader(RecvComm* comm, const MessageHeader& header) {
  Request* r = comm->unassigned.front();
  int slot = -1;
  for (int i = 0; i < r->n && slot < 0; ++i)
    if (!r->assigned[i] && r->tags[i] == header.tag) slot = i;
  if (header.magic != kHandleMagic) {
    comm->path->fail(StatusCode::kSystemError, "NET/Braid: corrupt message header from " + comm->peer);
    return;
  }
  if (slot < 0) {
    comm->path->fail(StatusCode::kInternalError,
                     fmt::format("NET/Braid: message with tag {} from {} matches no buffer of the posted receive",
                                 header.tag, comm->peer));
    return;
  }
  if (header.size > r->capacity[slot]) {
    comm->path->fail(StatusCode::kInvalidUsage,
                     fmt::format("NET/Braid: message truncated: {} B sent by {} into a {} B receive buffer (tag {})",
                                 header.size, comm->peer, r->capacity[slot], header.tag));
    return;
  }
  r->assigned[slot] = true;
  r->sizes[slot] = header.size;
  ++r->assigned_count;
  comm->path->post(comm->next_seq++, r->data[slot], header.size, &r->pending);
  if (r->assigned_count == r->n) comm->unassigned.pop_front();
}

// Reads headers while receives wait for messages.
void readControl(RecvComm* comm) {
  while (!comm->unassigned.empty() && !comm->control_closed && !comm->path->failed()) {
    const ssize_t got =
        recv(comm->control.get(), comm->header + comm->header_have, sizeof(comm->header) - comm->header_have, 0);
    if (got > 0) {
      comm->header_have += static_cast<size_t>(got);
      comm->path->touch();
      if (comm->header_have == sizeof(comm->header)) {
        MessageHeader header;
        std::memcpy(&header, comm->header, sizeof(header));
        comm->header_have = 0;
        assignHeader(comm, header);
      }
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got == 0) {
      // The sender closed (or died): messages already announced may still be arriving on the data sockets;
      // receives still waiting for a message fail at their next test.
      comm->control_closed = true;
      return;
    }
    comm->path->fail(StatusCode::kSystemError,
                     socketError("NET/Braid: control socket from " + comm->peer, errno).message());
  }
}

// The error of a failed comm, logged once.
int reportFailure(CommBase* comm, const char* what) {
  const Status failure = comm->path->failure();
  if (!comm->failure_reported) {
    comm->failure_reported = true;
    return report(failure, nccl_abi::kSubsysNet, what);
  }
  return toNcclResultCode(failure.code());
}

}  // namespace

std::unique_ptr<SendComm> makeSendComm(std::vector<net::Fd> sockets, int nthreads, double timeout_s, std::string peer) {
  return makeComm<SendComm>(true, std::move(sockets), nthreads, timeout_s, std::move(peer));
}

std::unique_ptr<RecvComm> makeRecvComm(std::vector<net::Fd> sockets, int nthreads, double timeout_s, std::string peer) {
  return makeComm<RecvComm>(false, std::move(sockets), nthreads, timeout_s, std::move(peer));
}

int sendPost(SendComm* comm, void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  if (comm->path->failed()) return reportFailure(comm, "isend");
  if (size > 0 && data == nullptr) {
    return report(Status(StatusCode::kInvalidArgument, "isend: data is NULL"), nccl_abi::kSubsysNet, "isend");
  }
  Request* r = comm->allocate(Request::Type::kSend);
  if (r == nullptr) return nccl_abi::kSuccess;  // all slots busy: NCCL retries
  r->n = 1;
  r->data[0] = static_cast<char*>(data);
  r->capacity[0] = r->sizes[0] = size;
  r->tags[0] = tag;
  MessageHeader header;
  header.size = size;
  header.tag = tag;
  const char* bytes = reinterpret_cast<const char*>(&header);
  comm->control_out.insert(comm->control_out.end(), bytes, bytes + sizeof(header));
  comm->control_queued += sizeof(header);
  r->header_end = comm->control_queued;
  comm->path->post(comm->next_seq++, r->data[0], size, &r->pending);
  comm->path->touch();
  flushControl(comm);
  *request = r;
  return nccl_abi::kSuccess;
}

int recvPost(RecvComm* comm, int n, void** data, const size_t* sizes, const int* tags, void** request) {
  *request = nullptr;
  if (comm->path->failed()) return reportFailure(comm, "irecv");
  if (n < 1 || n > kNetMaxRecvs || data == nullptr || sizes == nullptr || tags == nullptr) {
    return report(Status(StatusCode::kInvalidArgument,
                         fmt::format("irecv: n = {} (1..{}) or a NULL data/sizes/tags array", n, kNetMaxRecvs)),
                  nccl_abi::kSubsysNet, "irecv");
  }
  size_t in_use = 0;
  for (const Request& q : comm->requests) in_use += (q.used && q.type == Request::Type::kRecv) ? 1 : 0;
  if (in_use >= static_cast<size_t>(nccl_abi::kNetMaxRequests)) return nccl_abi::kSuccess;
  Request* r = comm->allocate(Request::Type::kRecv);
  if (r == nullptr) return nccl_abi::kSuccess;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->data[i] = static_cast<char*>(data[i]);
    r->capacity[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  comm->unassigned.push_back(r);
  comm->path->touch();
  readControl(comm);
  *request = r;
  return nccl_abi::kSuccess;
}

int flushPost(RecvComm* comm, void** request) {
  *request = comm->allocate(Request::Type::kFlush);  // host memory: nothing to flush, done at the first test
  if (*request != nullptr) static_cast<Request*>(*request)->n = 0;
  return nccl_abi::kSuccess;
}

namespace {

// Whether `r` is complete, after progressing the control socket.
bool requestComplete(Request* r) {
  CommBase* base = static_cast<CommBase*>(r->comm);
  if (r->type == Request::Type::kFlush) return true;
  if (r->type == Request::Type::kSend) {
    auto* comm = static_cast<SendComm*>(base);
    flushControl(comm);
    return comm->control_written >= r->header_end && r->pending.load(std::memory_order_acquire) == 0;
  }
  auto* comm = static_cast<RecvComm*>(base);
  readControl(comm);
  const bool complete = r->assigned_count == r->n && r->pending.load(std::memory_order_acquire) == 0;
  if (!complete && r->assigned_count < r->n && comm->control_closed) {
    comm->path->fail(StatusCode::kSystemError,
                     "NET/Braid: connection from " + comm->peer + " closed by the peer (its process exited?)");
  }
  return complete;
}

}  // namespace

int requestTest(Request* r, int* done, int* sizes) {
  *done = 0;
  CommBase* base = static_cast<CommBase*>(r->comm);
  bool complete = requestComplete(r);
  // NCCL's proxy polls test() in a loop: rather than spin, its thread moves bytes on sockets whose helper is
  // not busy with them (bounded per call, so test() returns promptly).
  if (!complete && base->path->help(kHelpBudgetBytes)) complete = requestComplete(r);
  if (!complete) {
    if (base->path->checkStalled(r->type == Request::Type::kSend ? "isend to " + base->peer
                                                                 : "irecv from " + base->peer)) {
      return reportFailure(base, "test");
    }
    // NCCL's proxy polls test() in a loop: give the core to the helpers that move the bytes (on a host with
    // fewer cores than busy threads this is most of the throughput; with idle cores it returns at once).
    sched_yield();
    return nccl_abi::kSuccess;
  }
  if (sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) {
      sizes[i] = r->sizes[i] > static_cast<size_t>(INT32_MAX) ? INT32_MAX : static_cast<int>(r->sizes[i]);
    }
  }
  r->used = false;
  *done = 1;
  return nccl_abi::kSuccess;
}

void closeComm(CommBase* comm) {
  if (comm->path) comm->path->shutdown();
  comm->control.reset();
  comm->path.reset();
  comm->kind = ObjectKind::kDead;
}

}  // namespace braid::nccl_plugin
