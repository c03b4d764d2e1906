// The threads transport (threads_transport.h): ranks as threads of one process, memcpy between their buffers.
//
// Locks: a connection's mutex may be held while taking an inbox mutex (delivering a completion to a peer),
// never the reverse; the world's connection-table and failure mutexes are never held while taking another
// lock. Every copy that reads or writes another rank's memory happens under the connection's mutex (the one
// exception, a receiver copying a staged message into its own dst, touches only its own buffer and the staging
// buffer it took off the connection).
#include "transport/threads/threads_transport.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "common/env.h"
#include "transport/endpoint_base.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxChannel = 1 << 16;

struct Staging {  // a pooled buffer holding one message's bytes
  std::unique_ptr<uint8_t[]> data;
  uint64_t capacity = 0;
};

struct Message {                 // a send not matched yet
  const uint8_t* src = nullptr;  // pending (not staged): the sender's bytes, read under the connection mutex
  uint64_t bytes = 0;
  RequestId send_id = 0;  // pending: the send that completes once its bytes are copied out
  bool staged = false;
  Staging staging;  // staged: a copy of the bytes (the send has completed)
};

struct PostedRecv {
  uint8_t* dst = nullptr;
  uint64_t bytes = 0;
  RequestId id = 0;
};

struct Connection {
  Connection(int s, int r, int c) : sender(s), receiver(r), channel(c) {}
  const int sender;
  const int receiver;
  const int channel;
  std::mutex mu;
  std::deque<Message> sends;     // in posting order; the first min(fifo_depth, size) are staged
  std::deque<PostedRecv> recvs;  // in posting order; non-empty only while `sends` is empty
  std::vector<Staging> pool;     // free staging buffers
};

struct Inbox {  // completions of one rank's requests finished by other ranks' threads
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Completion> done;
  std::atomic<size_t> arrived{0};  // done.size(), readable without the mutex (a spinning poll watches it)
};

class World {
 public:
  World(int num_ranks, const TransportOptions& options)
      : num_ranks_(num_ranks),
        fifo_depth_(static_cast<size_t>(std::max(0, options.fifo_depth))),
        epoch_(Clock::now()),
        claimed_(static_cast<size_t>(num_ranks), false),
        by_rank_(static_cast<size_t>(num_ranks)) {
    for (int r = 0; r < num_ranks; ++r) inboxes_.push_back(std::make_unique<Inbox>());
  }

  int numRanks() const { return num_ranks_; }
  size_t fifoDepth() const { return fifo_depth_; }
  Clock::time_point epoch() const { return epoch_; }
  double nowUs() const { return std::chrono::duration<double, std::micro>(Clock::now() - epoch_).count(); }
  Inbox& inbox(int rank) { return *inboxes_[static_cast<size_t>(rank)]; }

  /// Marks `rank` as joined; false when it already was (callers hold the registry mutex or own the world).
  bool claim(int rank) {
    std::lock_guard<std::mutex> lock(table_mu_);
    if (claimed_[static_cast<size_t>(rank)]) return false;
    claimed_[static_cast<size_t>(rank)] = true;
    return true;
  }

  /// The connection (sender, receiver, channel), created on first use; lives as long as the world.
  Connection* connection(int sender, int receiver, int channel) {
    std::lock_guard<std::mutex> lock(table_mu_);
    auto& slot = connections_[std::make_tuple(sender, receiver, channel)];
    if (!slot) {
      slot = std::make_unique<Connection>(sender, receiver, channel);
      by_rank_[static_cast<size_t>(sender)].push_back(slot.get());
      by_rank_[static_cast<size_t>(receiver)].push_back(slot.get());
    }
    return slot.get();
  }

  /// Every connection `rank` sends or receives on, in creation order.
  std::vector<Connection*> connectionsOf(int rank) {
    std::lock_guard<std::mutex> lock(table_mu_);
    return by_rank_[static_cast<size_t>(rank)];
  }

  /// Delivers a completion to `rank`'s inbox and wakes it.
  void complete(int rank, RequestId id) {
    Inbox& in = inbox(rank);
    {
      std::lock_guard<std::mutex> lock(in.mu);
      in.done.push_back(Completion{id, nowUs()});
      in.arrived.store(in.done.size(), std::memory_order_release);
    }
    in.cv.notify_one();
  }

  /// Records the first failure and wakes every rank.
  void fail(int rank, const Status& why) {
    {
      std::lock_guard<std::mutex> lock(fail_mu_);
      if (failed_.load(std::memory_order_relaxed)) return;
      failed_rank_ = rank;
      failure_ = why;
      failed_.store(true, std::memory_order_release);
    }
    for (auto& in : inboxes_) {
      // Taking the inbox mutex orders the flag before a waiter's predicate check: a waiter either sees it
      // or is already waiting and gets the notification.
      { std::lock_guard<std::mutex> lock(in->mu); }
      in->cv.notify_all();
    }
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::pair<int, Status> failure() {
    std::lock_guard<std::mutex> lock(fail_mu_);
    return {failed_rank_, failure_};
  }

 private:
  const int num_ranks_;
  const size_t fifo_depth_;
  const Clock::time_point epoch_;
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::mutex table_mu_;
  std::vector<bool> claimed_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Connection>> connections_;
  std::vector<std::vector<Connection*>> by_rank_;
  std::mutex fail_mu_;
  std::atomic<bool> failed_{false};
  int failed_rank_ = -1;
  Status failure_;
};

Staging acquireStaging(Connection& conn, uint64_t bytes) {  // conn.mu held
  Staging staging;
  if (!conn.pool.empty()) {
    staging = std::move(conn.pool.back());
    conn.pool.pop_back();
  }
  if (staging.capacity < bytes) {
    staging.data.reset(new uint8_t[bytes]);
    staging.capacity = bytes;
  }
  return staging;
}

class ThreadsTransport final : public EndpointBase {
 public:
  ThreadsTransport(std::shared_ptr<World> world, int rank, const TransportOptions& options)
      : EndpointBase(Config{"threads", rank, world->numRanks(), endpointTimeoutSeconds(options), kMaxChannel,
                            /*progress_thread=*/false, /*bootstrap=*/nullptr, world->epoch()}),
        world_(std::move(world)),
        spin_(endpointSpinMicroseconds(options, world_->numRanks())),
        send_conns_(static_cast<size_t>(world_->numRanks())),
        recv_conns_(static_cast<size_t>(world_->numRanks())) {}

  ~ThreadsTransport() override {
    const size_t outstanding = withdraw();
    if (outstanding > 0) {
      world_->fail(rank_, Status(StatusCode::kRemoteError,
                                 fmt::format("rank {} closed its threads endpoint with {} request(s) outstanding",
                                             rank_, outstanding)));
    }
  }

 private:
  Status startSend(const SendRequest& request, const uint8_t* src, RequestId id) override {
    const uint64_t bytes = request.src.bytes;
    Connection& conn = *connectionTo(send_conns_, request.peer, request.channel, true);
    std::unique_lock<std::mutex> lock(conn.mu);
    if (!conn.recvs.empty()) {  // the receive is posted: copy straight into its dst
      const PostedRecv recv = conn.recvs.front();
      if (recv.bytes != bytes) {
        lock.unlock();
        return failWith(mismatch(rank_, request.peer, request.channel, bytes, recv.bytes));
      }
      conn.recvs.pop_front();
      if (bytes > 0) std::memcpy(recv.dst, src, bytes);
      lock.unlock();
      world_->complete(request.peer, recv.id);
      complete(id);
      return Status::ok();
    }
    if (conn.sends.size() < world_->fifoDepth()) {  // room in the FIFO: stage a copy, the send is done
      Message message;
      message.bytes = bytes;
      message.staged = true;
      message.staging = acquireStaging(conn, bytes);
      if (bytes > 0) std::memcpy(message.staging.data.get(), src, bytes);
      conn.sends.push_back(std::move(message));
      lock.unlock();
      complete(id);
      return Status::ok();
    }
    Message message;  // no room: the receiver copies from src when it posts the receive
    message.src = src;
    message.bytes = bytes;
    message.send_id = id;
    conn.sends.push_back(std::move(message));
    return Status::ok();
  }

  Status startRecv(const RecvRequest& request, uint8_t* dst, RequestId id) override {
    const uint64_t bytes = request.dst.bytes;
    Connection& conn = *connectionTo(recv_conns_, request.peer, request.channel, false);
    std::unique_lock<std::mutex> lock(conn.mu);
    if (conn.sends.empty()) {
      conn.recvs.push_back(PostedRecv{dst, bytes, id});
      return Status::ok();
    }
    Message& front = conn.sends.front();
    if (front.bytes != bytes) {
      const uint64_t sent = front.bytes;
      lock.unlock();
      return failWith(mismatch(request.peer, rank_, request.channel, sent, bytes));
    }
    if (!front.staged) {  // fifo_depth 0: the sender's bytes straight into dst
      if (bytes > 0) std::memcpy(dst, front.src, bytes);
      const RequestId send_id = front.send_id;
      conn.sends.pop_front();
      lock.unlock();
      world_->complete(request.peer, send_id);
      complete(id);
      return Status::ok();
    }
    Staging staging = std::move(front.staging);
    conn.sends.pop_front();
    // A slot is free: the first pending send (if any) moves into the FIFO and completes.
    const size_t depth = world_->fifoDepth();
    RequestId promoted = 0;
    if (depth > 0 && conn.sends.size() >= depth && !conn.sends[depth - 1].staged) {
      Message& next = conn.sends[depth - 1];
      next.staging = acquireStaging(conn, next.bytes);
      if (next.bytes > 0) std::memcpy(next.staging.data.get(), next.src, next.bytes);
      next.staged = true;
      next.src = nullptr;
      promoted = next.send_id;
    }
    lock.unlock();
    if (promoted != 0) world_->complete(request.peer, promoted);
    if (bytes > 0) std::memcpy(dst, staging.data.get(), bytes);  // own memory, off the connection
    lock.lock();
    conn.pool.push_back(std::move(staging));
    lock.unlock();
    complete(id);
    return Status::ok();
  }

  // Takes what peers' threads delivered to the inbox.
  Status progress() override {
    Inbox& in = world_->inbox(rank_);
    if (in.arrived.load(std::memory_order_acquire) == 0) return Status::ok();
    std::lock_guard<std::mutex> lock(in.mu);
    takeInbox(in);
    return Status::ok();
  }

  // Spins (SpinGovernor) on the inbox's arrival count, then sleeps on its condition variable until something
  // arrives, the world fails or the timeout passes.
  Status waitForCompletion() override {
    Inbox& in = world_->inbox(rank_);
    spin_.spin([&] { return in.arrived.load(std::memory_order_acquire) != 0 || world_->failed(); });
    std::unique_lock<std::mutex> lock(in.mu);
    const auto deadline = Clock::now() + timeoutDuration(timeout_s_);
    while (in.done.empty() && !world_->failed()) {
      if (in.cv.wait_until(lock, deadline) == std::cv_status::timeout && in.done.empty() && !world_->failed()) {
        lock.unlock();
        return timeoutError(timeout_s_, waitingOn());
      }
    }
    const bool arrived = !in.done.empty();
    takeInbox(in);
    lock.unlock();
    return arrived ? Status::ok() : currentFailure();  // woken by a failure
  }

  void takeInbox(Inbox& in) {  // in.mu held
    for (const Completion& c : in.done) complete(c);
    in.done.clear();
    in.arrived.store(0, std::memory_order_relaxed);
  }

  void tellPeersOfAbort(const Status& reason) override {
    world_->fail(rank_, reason);
    withdraw();
  }

  // The first time this rank sees the world failed (another rank's failure, or its own as recorded there), it
  // keeps that failure and withdraws its requests.
  Status currentFailure() override {
    if (!saw_world_failure_ && world_->failed()) {
      saw_world_failure_ = true;
      const auto [rank, why] = world_->failure();
      (void)fail(rank == rank_
                     ? why
                     : Status(StatusCode::kRemoteError, fmt::format("rank {} failed: {}", rank, why.toString())));
      withdraw();
    }
    return failure();
  }

  Status failWith(Status status) {
    (void)fail(status);
    world_->fail(rank_, status);
    withdraw();
    return status;
  }

  static Status mismatch(int sender, int receiver, int channel, uint64_t sent, uint64_t expected) {
    return invalidArgument(
        fmt::format("rank {} -> rank {} channel {}: a message of {} bytes matched a receive of {} bytes", sender,
                    receiver, channel, sent, expected));
  }

  Connection* connectionTo(std::vector<std::vector<Connection*>>& table, int peer, int channel, bool sending) {
    std::vector<Connection*>& row = table[static_cast<size_t>(peer)];
    if (row.size() <= static_cast<size_t>(channel)) row.resize(static_cast<size_t>(channel) + 1, nullptr);
    Connection*& slot = row[static_cast<size_t>(channel)];
    if (slot == nullptr)
      slot = sending ? world_->connection(rank_, peer, channel) : world_->connection(peer, rank_, channel);
    return slot;
  }

  // Removes this rank's posted receives and pending (unstaged) sends from every connection, so no peer
  // touches its buffers afterwards. Returns how many were removed.
  size_t withdraw() {
    size_t removed = 0;
    for (Connection* conn : world_->connectionsOf(rank_)) {
      std::lock_guard<std::mutex> lock(conn->mu);
      if (conn->receiver == rank_) {
        removed += conn->recvs.size();
        conn->recvs.clear();
      }
      if (conn->sender == rank_) {
        while (!conn->sends.empty() && !conn->sends.back().staged) {
          conn->sends.pop_back();
          ++removed;
        }
      }
    }
    return removed;
  }

  // "receive from rank 1 on channel 0, send to rank 3 on channel 0 (2 waiting for room in the FIFO of 8: ...)".
  std::string waitingOn() {
    std::string text;
    int listed = 0;
    for (Connection* conn : world_->connectionsOf(rank_)) {
      std::lock_guard<std::mutex> lock(conn->mu);
      std::string item;
      if (conn->receiver == rank_ && !conn->recvs.empty()) {
        item = fmt::format("receive from rank {} on channel {}", conn->sender, conn->channel);
        if (conn->recvs.size() > 1) item += fmt::format(" ({} posted)", conn->recvs.size());
      } else if (conn->sender == rank_) {
        size_t pending = 0;
        for (const Message& m : conn->sends) pending += m.staged ? 0 : 1;
        if (pending > 0) {
          item = fmt::format(
              "send to rank {} on channel {} ({} waiting for room in the FIFO of {}: rank {} posted no "
              "receive)",
              conn->receiver, conn->channel, pending, world_->fifoDepth(), conn->receiver);
        }
      }
      if (item.empty()) continue;
      if (listed++ == 8) {
        text += ", ...";
        break;
      }
      text += (listed > 1 ? ", " : "") + item;
    }
    return text.empty() ? "nothing (no send or receive outstanding)" : text;
  }

  std::shared_ptr<World> world_;
  SpinGovernor spin_;                                 // endpointSpinMicroseconds, adaptive
  std::vector<std::vector<Connection*>> send_conns_;  // [peer][channel]
  std::vector<std::vector<Connection*>> recv_conns_;  // [peer][channel]
  bool saw_world_failure_ = false;                    // currentFailure() took the world's failure
};

// Worlds being set up over a bootstrap, by the key rank 0 drew; entries are erased once every rank joined.
struct Registry {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<World>> worlds;
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: endpoints may outlive static destruction
  return *instance;
}

std::string newWorldKey() {
  static std::atomic<uint64_t> counter{0};
  std::random_device device;
  return fmt::format("threads-{}-{:08x}{:08x}{:08x}-{}", static_cast<long long>(::getpid()), device(), device(),
                     device(), counter.fetch_add(1));
}

}  // namespace

std::vector<std::unique_ptr<DataTransport>> createThreadsWorld(int num_ranks, const TransportOptions& options) {
  std::vector<std::unique_ptr<DataTransport>> endpoints;
  if (num_ranks < 1) return endpoints;
  auto world = std::make_shared<World>(num_ranks, options);
  for (int r = 0; r < num_ranks; ++r) {
    world->claim(r);
    endpoints.push_back(std::make_unique<ThreadsTransport>(world, r, options));
  }
  return endpoints;
}

Result<std::unique_ptr<DataTransport>> createThreadsTransport(Bootstrap& bootstrap, const TransportOptions& options) {
  const int n = bootstrap.size();
  const int rank = bootstrap.rank();
  const std::vector<int64_t>& pids = bootstrap.processIds();
  const std::vector<std::string>& hosts = bootstrap.hostNames();
  if (pids.size() != static_cast<size_t>(n) || hosts.size() != static_cast<size_t>(n)) {
    return internalError(
        fmt::format("threads transport on rank {}: the bootstrap knows {} process ids and {} host "
                    "names for {} ranks",
                    rank, pids.size(), hosts.size(), n));
  }
  if (pids[static_cast<size_t>(rank)] != static_cast<int64_t>(::getpid())) {
    return invalidArgument(fmt::format("threads transport on rank {}: the bootstrap names process {}, this is {}", rank,
                                       pids[static_cast<size_t>(rank)], static_cast<long long>(::getpid())));
  }
  for (int q = 0; q < n; ++q) {
    if (pids[static_cast<size_t>(q)] != pids[static_cast<size_t>(rank)] ||
        hosts[static_cast<size_t>(q)] != hosts[static_cast<size_t>(rank)]) {
      return invalidArgument(fmt::format(
          "threads transport: rank {} is process {} on {}, rank {} is process {} on {}; every rank must be a thread "
          "of one process (use shm or tcp)",
          q, pids[static_cast<size_t>(q)], hosts[static_cast<size_t>(q)], rank, pids[static_cast<size_t>(rank)],
          hosts[static_cast<size_t>(rank)]));
    }
  }
  // Rank 0 draws the key of this world and everyone reads it from rank 0's slot.
  constexpr size_t kKeyBytes = 96;
  std::vector<char> keys(static_cast<size_t>(n) * kKeyBytes, 0);
  if (rank == 0) {
    const std::string key = newWorldKey();
    std::memcpy(keys.data(), key.data(), std::min(key.size(), kKeyBytes - 1));
  }
  BRAID_RETURN_IF_ERROR(bootstrap.allGather(keys.data(), kKeyBytes));
  const std::string key(keys.data(), strnlen(keys.data(), kKeyBytes));
  if (key.rfind("threads-", 0) != 0) {
    return internalError(fmt::format("threads transport on rank {}: rank 0 shared no world key", rank));
  }
  std::shared_ptr<World> world;
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    for (auto it = reg.worlds.begin(); it != reg.worlds.end();) {  // forget worlds whose setup failed
      it = it->second.expired() && it->first != key ? reg.worlds.erase(it) : std::next(it);
    }
    std::weak_ptr<World>& slot = reg.worlds[key];
    world = slot.lock();
    if (!world) {
      world = std::make_shared<World>(n, options);
      slot = world;
    }
    if (world->numRanks() != n) {
      return invalidArgument(
          fmt::format("threads transport: rank {} joins with {} ranks, the world has {}", rank, n, world->numRanks()));
    }
    if (!world->claim(rank)) {
      return invalidArgument(fmt::format("threads transport: rank {} joined the same world twice", rank));
    }
  }
  auto endpoint = std::make_unique<ThreadsTransport>(world, rank, options);
  const Status barrier = bootstrap.barrier();
  if (rank == 0) {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    reg.worlds.erase(key);
  }
  if (!barrier.isOk()) return barrier;
  return std::unique_ptr<DataTransport>(std::move(endpoint));
}

}  // namespace braid
