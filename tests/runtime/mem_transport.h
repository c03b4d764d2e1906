// Test support: MemTransport, a data-moving in-memory transport for executor tests.
//
// Every rank gets input, output and scratch byte buffers sized from its RankPlan (scratch: scratch_bytes +
// temp_bytes, the executor's staging). Sends are buffered (eager), as in MSCCL's model where a send only
// waits for room in the connection's FIFO: a send can complete without a posted receive. The sent bytes
// are read when the send's completion is delivered (a random later poll), so an executor that overwrote a
// send buffer before its send completed sends the wrong data; the message then joins its connection's
// FIFO, (sender, receiver, channel), and matches the receiver's receives in order (transport.h). Received
// bytes land in the receiver's buffer when the receive's completion is delivered, so an executor that
// read received data before the completion reads stale data. Local requests take effect when their
// completion is delivered: copy, or reduction as wrap-around uint32 sums of 4-byte elements.
//
// Completions of ready requests come back in a seeded pseudo-random order and in random batch sizes, so
// ordering bugs of the executor show up as wrong data. poll(block = true) with nothing completable is a
// deadlock (this transport is driven by one thread, nothing else can make progress): kInternalError
// "deadlock: ..." naming the ranks and connections still waiting. Requests with ranges outside a buffer
// are kInvalidArgument when posted; a message matched with a receive of another size is kInvalidArgument
// from the poll that matched them.
//
// With fifo_depth > 0 a connection buffers at most that many messages ahead of its receiver, like NCCL's
// NCCL_STEPS slots (and the simulated transport's fifo_depth): send number s of a connection can complete
// only once s < (receives posted on it) + fifo_depth; a send waiting for room is named in the deadlock
// report. With move_data = false no buffers are allocated and nothing is copied: the transport only
// matches and completes requests (for measuring the executor itself).
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "braid/plan.h"
#include "braid/transport.h"

namespace braid::testing {

class MemTransport : public Transport {
 public:
  struct Counters {
    long long sends = 0;
    long long recvs = 0;
    long long locals = 0;
    long long fused_locals = 0;
    long long local_copies = 0;  // non-reducing local requests
    long long bytes_sent = 0;
  };

  explicit MemTransport(const Plan& plan, uint64_t seed = 1, bool move_data = true, int fifo_depth = 0)
      : num_ranks_(plan.num_ranks),
        move_data_(move_data),
        fifo_depth_(fifo_depth),
        rng_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {
    id_mask_ = next() | 1;
    buffers_.resize(num_ranks_);
    sizes_.resize(num_ranks_);
    for (const RankPlan& rank_plan : plan.ranks) {
      auto& sizes = sizes_[rank_plan.rank];
      sizes = {rank_plan.input_bytes, rank_plan.output_bytes, rank_plan.scratch_bytes + rank_plan.temp_bytes};
      if (move_data_) {
        for (int b = 0; b < 3; ++b) buffers_[rank_plan.rank][b].assign(sizes[b], 0);
      }
    }
  }

  const char* name() const override { return "mem"; }

  std::vector<uint8_t>& buffer(int rank, BufferKind kind) { return buffers_[rank][static_cast<int>(kind)]; }
  uint32_t word(int rank, BufferKind kind, uint64_t index) {
    uint32_t value;
    std::memcpy(&value, buffer(rank, kind).data() + index * 4, 4);
    return value;
  }
  void setWord(int rank, BufferKind kind, uint64_t index, uint32_t value) {
    std::memcpy(buffer(rank, kind).data() + index * 4, &value, 4);
  }
  const Counters& counters() const { return counters_; }

  Result<RequestId> postSend(const SendRequest& request) override {
    BRAID_RETURN_IF_ERROR(checkPeer(request.rank, request.peer, "send"));
    BRAID_RETURN_IF_ERROR(checkRange(request.rank, request.src, "send src"));
    const uint32_t slot = allocate(Request::kSend, request.rank);
    Request& r = requests_[slot];
    r.peer = request.peer;
    r.channel = request.channel;
    r.ref = request.src;
    ++counters_.sends;
    counters_.bytes_sent += static_cast<long long>(request.src.bytes);
    // The message takes its place in the connection's FIFO now, in posting order; its bytes are read when
    // the send completes.
    Connection& conn = connections_[key(request.rank, request.peer, request.channel)];
    r.conn = &conn;
    r.seq = conn.front_seq + conn.messages.size();
    conn.messages.push_back(Message{request.rank, request.src.bytes, {}, false});
    if (fifo_depth_ > 0 && r.seq >= conn.recvs_posted + static_cast<uint64_t>(fifo_depth_)) {
      conn.blocked.push_back(slot);  // no room in the FIFO until the receiver posts more receives
    } else {
      ready_.push_back(slot);
    }
    return idOf(slot);
  }

  Result<RequestId> postRecv(const RecvRequest& request) override {
    BRAID_RETURN_IF_ERROR(checkPeer(request.rank, request.peer, "recv"));
    BRAID_RETURN_IF_ERROR(checkRange(request.rank, request.dst, "recv dst"));
    const uint32_t slot = allocate(Request::kRecv, request.rank);
    Request& r = requests_[slot];
    r.peer = request.peer;
    r.channel = request.channel;
    r.ref = request.dst;
    ++counters_.recvs;
    Connection& conn = connections_[key(request.peer, request.rank, request.channel)];
    conn.recvs.push_back(slot);
    ++conn.recvs_posted;
    while (!conn.blocked.empty() &&
           requests_[conn.blocked.front()].seq < conn.recvs_posted + static_cast<uint64_t>(fifo_depth_)) {
      ready_.push_back(conn.blocked.front());
      conn.blocked.pop_front();
    }
    BRAID_RETURN_IF_ERROR(match(conn));
    return idOf(slot);
  }

  Result<RequestId> postLocal(const LocalRequest& request) override {
    if (request.rank < 0 || request.rank >= num_ranks_)
      return invalidArgument(fmt::format("local: rank {}", request.rank));
    BRAID_RETURN_IF_ERROR(checkRange(request.rank, request.src, "local src"));
    BRAID_RETURN_IF_ERROR(checkRange(request.rank, request.dst, "local dst"));
    if (request.src.bytes != request.dst.bytes) {
      return invalidArgument(fmt::format("local on rank {}: src has {} bytes, dst {}", request.rank, request.src.bytes,
                                         request.dst.bytes));
    }
    if (request.reduce && request.src.bytes % 4 != 0) {
      return invalidArgument(fmt::format("local reduce on rank {}: {} bytes is not whole 4-byte elements", request.rank,
                                         request.src.bytes));
    }
    const uint32_t slot = allocate(Request::kLocal, request.rank);
    Request& r = requests_[slot];
    r.ref = request.dst;
    r.src = request.src;
    r.reduce = request.reduce;
    ++counters_.locals;
    if (request.fused) ++counters_.fused_locals;
    if (!request.reduce) ++counters_.local_copies;
    ready_.push_back(slot);
    return idOf(slot);
  }

  Status poll(std::vector<Completion>* done, bool block) override {
    now_ += 1.0;
    if (ready_.empty()) {
      if (block) return deadlock();
      return Status::ok();
    }
    const size_t deliver = 1 + next() % ready_.size();
    for (size_t i = 0; i < deliver && !ready_.empty(); ++i) {
      const size_t pick = next() % ready_.size();
      const uint32_t slot = ready_[pick];
      ready_[pick] = ready_.back();
      ready_.pop_back();
      BRAID_RETURN_IF_ERROR(apply(requests_[slot]));
      done->push_back(Completion{idOf(slot), now_});
      release(slot);
    }
    return Status::ok();
  }

  double nowUs() const override { return now_; }

 private:
  struct Connection;
  struct Request {
    enum Type { kSend, kRecv, kLocal } type = kSend;
    bool live = false;
    bool reduce = false;
    int rank = 0;
    int peer = 0;
    int channel = 0;
    uint32_t generation = 0;
    BufferRef ref;               // send: src; recv and local: dst
    BufferRef src;               // local: src
    std::vector<uint8_t> data;   // recv: the bytes matched
    Connection* conn = nullptr;  // send: its connection, and its message's sequence number there
    uint64_t seq = 0;
  };
  struct Message {
    int sender = 0;
    uint64_t bytes = 0;
    std::vector<uint8_t> data;
    bool sent = false;  // its send completed: the data was read
  };
  struct Connection {
    std::deque<Message> messages;  // posted sends in order, not yet received
    uint64_t front_seq = 0;        // sequence number of messages.front()
    std::deque<uint32_t> recvs;    // posted receives not matched yet
    uint64_t recvs_posted = 0;     // receives ever posted on it
    std::deque<uint32_t> blocked;  // sends waiting for room in the FIFO (fifo_depth), in order
  };

  static uint64_t key(int src, int dst, int channel) {
    return (static_cast<uint64_t>(src) << 42) | (static_cast<uint64_t>(dst) << 21) | static_cast<uint64_t>(channel);
  }
  static std::tuple<int, int, int> unkey(uint64_t key) {
    return {static_cast<int>(key >> 42), static_cast<int>((key >> 21) & 0x1FFFFF), static_cast<int>(key & 0x1FFFFF)};
  }

  uint64_t next() {  // xorshift64*
    rng_ ^= rng_ >> 12;
    rng_ ^= rng_ << 25;
    rng_ ^= rng_ >> 27;
    return rng_ * 0x2545F4914F6CDD1Dull;
  }

  RequestId idOf(uint32_t slot) const { return ((uint64_t{requests_[slot].generation} << 32) | slot) ^ id_mask_; }

  uint32_t allocate(Request::Type type, int rank) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<uint32_t>(requests_.size());
      requests_.emplace_back();
    }
    Request& r = requests_[slot];
    r.type = type;
    r.rank = rank;
    r.live = true;
    r.reduce = false;
    r.data.clear();
    return slot;
  }

  void release(uint32_t slot) {
    requests_[slot].live = false;
    ++requests_[slot].generation;
    free_.push_back(slot);
  }

  Status checkPeer(int rank, int peer, const char* what) const {
    if (rank < 0 || rank >= num_ranks_ || peer < 0 || peer >= num_ranks_ || peer == rank) {
      return invalidArgument(fmt::format("{}: rank {} peer {} of {} ranks", what, rank, peer, num_ranks_));
    }
    return Status::ok();
  }

  Status checkRange(int rank, const BufferRef& ref, const char* what) const {
    const uint64_t size = sizes_[rank][static_cast<int>(ref.buffer)];
    if (ref.offset > size || ref.bytes > size - ref.offset) {
      return invalidArgument(fmt::format("{} on rank {}: {} bytes at {} of {} buffer of {} bytes", what, rank,
                                         ref.bytes, ref.offset, bufferName(ref.buffer), size));
    }
    return Status::ok();
  }

  Status match(Connection& conn) {
    while (!conn.messages.empty() && conn.messages.front().sent && !conn.recvs.empty()) {
      Message& message = conn.messages.front();
      const uint32_t r = conn.recvs.front();
      Request& recv = requests_[r];
      if (message.bytes != recv.ref.bytes) {
        return invalidArgument(
            fmt::format("rank {} -> rank {} channel {}: a message of {} bytes matched a receive of {}", message.sender,
                        recv.rank, recv.channel, message.bytes, recv.ref.bytes));
      }
      recv.data = std::move(message.data);
      conn.messages.pop_front();
      ++conn.front_seq;
      conn.recvs.pop_front();
      ready_.push_back(r);
    }
    return Status::ok();
  }

  Status apply(Request& r) {
    if (r.type == Request::kSend) {
      Message& message = r.conn->messages[r.seq - r.conn->front_seq];
      if (move_data_) {
        const uint8_t* from = buffer(r.rank, r.ref.buffer).data() + r.ref.offset;
        message.data.assign(from, from + r.ref.bytes);
      }
      message.sent = true;
      return match(*r.conn);
    }
    if (!move_data_) return Status::ok();
    if (r.type == Request::kRecv) {
      if (!r.data.empty())
        std::memcpy(buffer(r.rank, r.ref.buffer).data() + r.ref.offset, r.data.data(), r.data.size());
    } else if (r.type == Request::kLocal && r.ref.bytes > 0) {
      uint8_t* dst = buffer(r.rank, r.ref.buffer).data() + r.ref.offset;
      const uint8_t* src = buffer(r.rank, r.src.buffer).data() + r.src.offset;
      if (!r.reduce) {
        std::memmove(dst, src, r.ref.bytes);
      } else {
        for (uint64_t i = 0; i < r.ref.bytes; i += 4) {
          uint32_t a, b;
          std::memcpy(&a, dst + i, 4);
          std::memcpy(&b, src + i, 4);
          a += b;
          std::memcpy(dst + i, &a, 4);
        }
      }
    }
    return Status::ok();
  }

  Status deadlock() const {
    std::string waiting;
    int listed = 0;
    std::map<std::tuple<int, int, int>, const Connection*> sorted;  // report in (sender, receiver, channel) order
    for (const auto& [packed, conn] : connections_) sorted[unkey(packed)] = &conn;
    for (const auto& [names, connection] : sorted) {
      const auto& [src, dst, channel] = names;
      const Connection& conn = *connection;
      if (conn.messages.empty() && conn.recvs.empty()) continue;
      if (!conn.blocked.empty()) {
        if (listed++ == 8) {
          waiting += "; ...";
          break;
        }
        waiting += fmt::format(
            "{}rank {} waits for room to send {} message(s) to rank {} on channel {} ({} in the FIFO, no "
            "receive posted)",
            listed > 1 ? "; " : "", src, conn.blocked.size(), dst, channel, conn.messages.size() - conn.blocked.size());
        continue;
      }
      if (listed++ == 8) {
        waiting += "; ...";
        break;
      }
      if (!conn.messages.empty()) {
        waiting += fmt::format("{}rank {} sent {} message(s) to rank {} on channel {} that rank {} never receives",
                               listed > 1 ? "; " : "", src, conn.messages.size(), dst, channel, dst);
      } else {
        waiting += fmt::format("{}rank {} waits for {} message(s) from rank {} on channel {}", listed > 1 ? "; " : "",
                               dst, conn.recvs.size(), src, channel);
      }
    }
    if (waiting.empty()) waiting = "nothing is outstanding";
    return Status(StatusCode::kInternalError, "deadlock: " + waiting);
  }

  int num_ranks_;
  bool move_data_;
  int fifo_depth_;
  uint64_t rng_;
  uint64_t id_mask_ = 0;
  double now_ = 0;
  std::vector<std::array<std::vector<uint8_t>, 3>> buffers_;
  std::vector<std::array<uint64_t, 3>> sizes_;
  std::vector<Request> requests_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> ready_;
  std::unordered_map<uint64_t, Connection> connections_;  // key(): (sender, receiver, channel); nodes stay put
  Counters counters_;
};

}  // namespace braid::testing
