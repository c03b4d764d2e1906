// The TCP data path (net/tcp_path.h): helper threads moving striped chunks.
#include "net/tcp_path.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace braid::nccl_plugin {
namespace {

constexpr int kWorkerPollMs = 100;  // longest sleep of a helper between checks of its stop flag

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// SocketWorker

SocketWorker::SocketWorker(TcpDataPath* path, std::vector<int> sockets)
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
      path_->fail(StatusCode::kSystemError, what + ": " + net::errnoText(errno));
    }
    return false;
  }
  if (task->arrived != nullptr) task->arrived->fetch_add(task->bytes, std::memory_order_acq_rel);
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
// TcpDataPath

TcpDataPath::TcpDataPath(bool sending, std::vector<net::Fd> sockets, int nthreads, double idle_timeout_s)
    : DataPath(sending, idle_timeout_s), sockets_(std::move(sockets)), nthreads_(nthreads) {
  for (int t = 0; t < nthreads_; ++t) {
    std::vector<int> mine;
    for (int s = t; s < nsocks(); s += nthreads_) mine.push_back(s);
    workers_.push_back(std::make_unique<SocketWorker>(this, std::move(mine)));
  }
}

TcpDataPath::~TcpDataPath() { shutdown(); }

void TcpDataPath::shutdown() {
  for (auto& w : workers_) w->stop();
  workers_.clear();
}

void TcpDataPath::post(uint64_t seq, char* data, size_t size, std::atomic<int>* pending) {
  if (size == 0 || workers_.empty()) return;
  const size_t chunk = chunkBytes(size, nsocks());
  const size_t count = partCount(size, chunk);
  pending->fetch_add(static_cast<int>(count), std::memory_order_acq_rel);
  postParts(seq, data, size, chunk, 0, count, pending, nullptr);
}

void TcpDataPath::postParts(uint64_t seq, char* data, size_t size, size_t part, size_t first, size_t end,
                            std::atomic<int>* pending, std::atomic<uint64_t>* arrived) {
  if (workers_.empty()) return;
  for (size_t c = first; c < end; ++c) {
    const size_t offset = c * part;
    const size_t bytes = std::min(part, size - offset);
    const int socket = static_cast<int>((seq + c) % static_cast<uint64_t>(nsocks()));
    workers_[socket % nthreads_]->enqueue(socket, ChunkTask{data + offset, bytes, 0, pending, arrived});
  }
}

bool TcpDataPath::progress() {
  size_t budget = kHelpBudgetBytes;
  bool moved = false;
  for (auto& w : workers_) moved = w->help(&budget) || moved;
  return moved;
}

}  // namespace braid::nccl_plugin
