// runDeviceProxy (device_proxy.h): one event loop over the proxied connection ends of one launch.
#include "cuda/device_proxy.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace braid::cuda {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t loadAcquire(const uint64_t* p) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
}
void storeRelease(uint64_t* p, uint64_t value) {
  std::atomic_ref<uint64_t>(*p).store(value, std::memory_order_release);
}
bool abortedFlag(DeviceError* e) { return std::atomic_ref<uint32_t>(e->aborted).load(std::memory_order_acquire) != 0; }

/// One proxied connection end of the launch.
struct End {
  const DeviceConnection* c = nullptr;
  std::vector<uint64_t> bytes;  // what each message fills of its slot (deviceMessageSlotBytes)
  uint64_t base = 0;            // counter value before this launch's first message
  uint64_t posted = 0;          // messages of this launch posted to the transport
  uint64_t done = 0;            // messages of this launch completed, in order
  std::vector<uint8_t> completed;
  uint64_t* tail = nullptr;
  uint64_t* head = nullptr;
  Clock::time_point since;  // its last progress
};

class Proxy {
 public:
  Proxy(const DecodedDevicePlan& plan, uint8_t* proxy, uint64_t launch, DataTransport& transport, double timeout_s,
        DeviceError* error)
      : plan_(plan), proxy_(proxy), launch_(launch), transport_(transport), timeout_s_(timeout_s), error_(error) {}

  Status run() {
    const DevicePlanHeader& h = plan_.header;
    for (const DeviceConnection& c : plan_.connections) {
      if (!c.proxied) continue;
      End e;
      e.c = &c;
      for (uint64_t data : deviceMessageBytes(plan_, c)) e.bytes.push_back(deviceMessageSlotBytes(h.protocol, data));
      e.base = launch_ * c.messages;
      e.completed.assign(e.bytes.size(), 0);
      e.tail = reinterpret_cast<uint64_t*>(proxy_ + c.tail_offset);
      e.head = reinterpret_cast<uint64_t*>(proxy_ + c.head_offset);
      ends_.push_back(std::move(e));
    }
    if (ends_.empty()) return Status::ok();
    if (proxy_ == nullptr || error_ == nullptr) {
      return invalidArgument(fmt::format("device proxy: rank {}: {} proxied connection(s) but no {}", h.rank,
                                         ends_.size(), proxy_ == nullptr ? "proxy area" : "DeviceError"));
    }
    RankMemory memory;
    memory.scratch = proxy_;
    memory.scratch_bytes = h.proxy_bytes;
    Status status = transport_.bind(h.rank, memory, ReduceSpec{});
    if (!status.isOk())
      return fail(Status(status.code(), fmt::format("device proxy: rank {}: {}", h.rank, status.message())));
    const Clock::time_point start = Clock::now();
    for (End& e : ends_) e.since = start;
    size_t unfinished = ends_.size();
    uint32_t idle = 0;
    std::vector<Completion> done;
    while (unfinished > 0) {
      if (abortedFlag(error_)) {
        return fail(Status(StatusCode::kRemoteError,
                           fmt::format("device proxy: rank {}: its kernel gave up (abort flag set)", h.rank)));
      }
      bool progress = false;
      for (size_t i = 0; i < ends_.size(); ++i) {
        BRAID_ASSIGN_OR_RETURN(const bool posted, post(i));
        progress = progress || posted;
      }
      done.clear();
      status = transport_.poll(&done, /*block=*/false);
      if (!status.isOk()) return fail(Status(status.code(), fmt::format("{}: {}", describeOldest(), status.message())));
      for (const Completion& completion : done) {
        const auto found = requests_.find(completion.id);
        if (found == requests_.end()) continue;  // not a request of this launch (none other is outstanding)
        End& e = ends_[found->second.first];
        e.completed[found->second.second] = 1;
        requests_.erase(found);
        const uint64_t before = e.done;
        while (e.done < e.completed.size() && e.completed[e.done]) ++e.done;
        if (e.done == before) continue;
        // Sending: the slots are free again (head). Receiving: the messages are in their slots (tail).
        storeRelease(e.c->sending ? e.head : e.tail, e.base + e.done);
        e.since = Clock::now();
        progress = true;
        if (e.done == e.completed.size()) --unfinished;
      }
      if (progress) {
        idle = 0;
        continue;
      }
      const Clock::time_point now = Clock::now();
      for (size_t i = 0; i < ends_.size(); ++i) {
        const End& e = ends_[i];
        if (e.done == e.completed.size()) continue;
        const double waited = std::chrono::duration<double>(now - e.since).count();
        if (waited > timeout_s_) return fail(timedOut(i, waited));
      }
      if (++idle < 1024) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
    return Status::ok();
  }

 private:
  // Posts what end i may post now; true when it posted anything.
  Result<bool> post(size_t i) {
    End& e = ends_[i];
    const DevicePlanHeader& h = plan_.header;
    const DeviceConnection& c = *e.c;
    bool posted = false;
    while (e.posted < e.bytes.size()) {
      const uint64_t seq = e.base + e.posted;  // the message's number on the connection
      if (c.sending ? loadAcquire(e.tail) < seq + 1
                    : seq + 1 > h.fifo_depth && loadAcquire(e.head) < seq + 1 - h.fifo_depth) {
        break;
      }
      BufferRef slot{BufferKind::kScratch, c.fifo_offset + (seq % h.fifo_depth) * h.slot_bytes, e.bytes[e.posted]};
      Result<RequestId> id = c.sending ? transport_.postSend(SendRequest{h.rank, c.receiver, c.channel, slot})
                                       : transport_.postRecv(RecvRequest{h.rank, c.sender, c.channel, slot});
      if (!id.isOk()) {
        return fail(Status(id.status().code(), fmt::format("{}: {}", describe(e, e.posted), id.status().message())));
      }
      requests_[*id] = {i, e.posted};
      ++e.posted;
      e.since = Clock::now();
      posted = true;
    }
    return posted;
  }

  std::string describe(const End& e, uint64_t m) const {
    return fmt::format("device proxy: rank {}: connection rank {} -> rank {} channel {}, message {} of {} (launch {})",
                       plan_.header.rank, e.c->sender, e.c->receiver, e.c->channel, m, e.bytes.size(), launch_);
  }

  // The first unfinished end and its oldest message, for errors of the transport.
  std::string describeOldest() const {
    for (const End& e : ends_) {
      if (e.done < e.completed.size()) return describe(e, e.done);
    }
    return fmt::format("device proxy: rank {}", plan_.header.rank);
  }

  Status timedOut(size_t i, double waited) {
    const End& e = ends_[i];
    const DeviceConnection& c = *e.c;
    const bool in_flight = e.posted > e.done;  // the oldest unfinished message is with the transport
    const uint64_t m = e.done;
    const int peer = c.sending ? c.receiver : c.sender;
    DeviceWait what = DeviceWait::kKernel;
    std::string why;
    if (c.sending && in_flight) {
      what = DeviceWait::kCredit;
      why = fmt::format("the send to rank {} to complete", peer);
    } else if (c.sending) {
      why = "its kernel to write the message (tail)";
    } else if (in_flight) {
      what = DeviceWait::kData;
      why = fmt::format("the message from rank {}", peer);
    } else {
      why = "its kernel to free the message's slot (head)";
    }
    if (error_ != nullptr && std::atomic_ref<uint32_t>(error_->code).load() == 0) {
      uint32_t expected = 0;
      if (std::atomic_ref<uint32_t>(error_->code).compare_exchange_strong(expected, 2u)) {
        error_->rank = plan_.header.rank;
        error_->tb = static_cast<int32_t>(c.tb);
        error_->step = -1;
        error_->peer = peer;
        error_->what = static_cast<int32_t>(what);
        error_->slice = static_cast<uint32_t>(m);
        error_->waited_ns = static_cast<uint64_t>(waited * 1e9);
      }
    }
    return Status(StatusCode::kTimeout,
                  fmt::format("{}: waited more than {} s for {}", describe(e, m), timeout_s_, why));
  }

  // Stops the kernel's blocks and the peers' proxies; returns `why`.
  Status fail(Status why) {
    if (error_ != nullptr) std::atomic_ref<uint32_t>(error_->aborted).store(1u, std::memory_order_release);
    transport_.abort(why);
    return why;
  }

  const DecodedDevicePlan& plan_;
  uint8_t* const proxy_;
  const uint64_t launch_;
  DataTransport& transport_;
  const double timeout_s_;
  DeviceError* const error_;
  std::vector<End> ends_;
  std::unordered_map<RequestId, std::pair<size_t, uint64_t>> requests_;  // -> (end, message of this launch)
};

}  // namespace

Status runDeviceProxy(const DecodedDevicePlan& plan, uint8_t* proxy, uint64_t launch, DataTransport& transport,
                      double timeout_s, DeviceError* error) {
  return Proxy(plan, proxy, launch, transport, timeout_s, error).run();
}

}  // namespace braid::cuda
