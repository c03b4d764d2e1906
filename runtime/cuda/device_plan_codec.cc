// encodeDevicePlans, decodeDevicePlan, serializeDevicePlan and the validators (device_plan_codec.h).
#include "cuda/device_plan_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>

namespace braid::cuda {
namespace {

uint64_t alignUp(uint64_t value, uint64_t align) { return (value + align - 1) / align * align; }

/// A connection: (sender, receiver, channel).
using ConnectionKey = std::tuple<int, int, int>;

std::string describeConnection(const ConnectionKey& key) {
  return fmt::format("rank {} -> rank {} channel {}", std::get<0>(key), std::get<1>(key), std::get<2>(key));
}

/// One end of a connection on one rank: its threadblock and its messages per launch.
struct ConnectionEnd {
  int tb = -1;
  uint64_t messages = 0;
};

/// Where a rank's region puts the parts of its connections and its counters.
struct RegionLayout {
  std::map<ConnectionKey, uint64_t> fifo;  // incoming connections
  std::map<ConnectionKey, uint64_t> tail;  // incoming connections
  std::map<ConnectionKey, uint64_t> head;  // outgoing connections
  uint64_t progress = 0;
  uint64_t barrier = 0;
  uint64_t bytes = 0;
};

/// Where a rank's proxy area puts the parts of its proxied connection ends (each end has its own FIFO, tail and
/// head there).
struct ProxyLayout {
  std::map<ConnectionKey, uint64_t> fifo;
  std::map<ConnectionKey, uint64_t> tail;
  std::map<ConnectionKey, uint64_t> head;
  uint64_t bytes = 0;
};

/// The per-rank facts the encoder of every rank needs: connection ends, the region and proxy area layouts.
struct RankShape {
  std::map<ConnectionKey, ConnectionEnd> outgoing;
  std::map<ConnectionKey, ConnectionEnd> incoming;
  RegionLayout region;
  ProxyLayout proxy;
};

bool sends(DeviceOp op) {
  return op == DeviceOp::kSend || op == DeviceOp::kRecvCopySend || op == DeviceOp::kRecvReduceSend ||
         op == DeviceOp::kRecvReduceCopySend;
}
bool receives(DeviceOp op) {
  return op == DeviceOp::kRecv || op == DeviceOp::kRecvCopySend || op == DeviceOp::kRecvReduceSend ||
         op == DeviceOp::kRecvReduceCopy || op == DeviceOp::kRecvReduceCopySend;
}
bool readsSrc(DeviceOp op) {
  return op == DeviceOp::kSend || op == DeviceOp::kRecvReduceSend || op == DeviceOp::kRecvReduceCopy ||
         op == DeviceOp::kRecvReduceCopySend || op == DeviceOp::kCopy || op == DeviceOp::kReduce;
}
bool writesDst(DeviceOp op) {
  return op == DeviceOp::kRecv || op == DeviceOp::kRecvCopySend || op == DeviceOp::kRecvReduceCopy ||
         op == DeviceOp::kRecvReduceCopySend || op == DeviceOp::kCopy || op == DeviceOp::kReduce;
}

/// The slot of a plan whose largest message is `largest` bytes.
uint64_t slotBytes(DeviceProtocol protocol, uint64_t largest) {
  if (protocol == DeviceProtocol::kLL) {
    return std::max<uint64_t>(1, (largest + kLLDataBytes - 1) / kLLDataBytes) * kLLLineBytes;
  }
  return std::max<uint64_t>(16, alignUp(largest, 16));
}

/// The message sizes a threadblock moves in one direction, in the order it runs its slices: iteration j runs
/// slice j of every step with more than j slices. `steps` are the threadblock's steps.
template <typename Visit>
void forEachMessage(const DeviceStep* steps, uint32_t num_steps, uint32_t iterations, uint64_t slice, bool sending,
                    Visit&& visit) {
  for (uint32_t j = 0; j < iterations; ++j) {
    for (uint32_t s = 0; s < num_steps; ++s) {
      const DeviceStep& step = steps[s];
      if (step.slices <= j || (sending ? !sends(step.op) : !receives(step.op))) continue;
      visit(deviceSliceBytes(step.bytes, slice, j));
    }
  }
}

class Encoder {
 public:
  Encoder(const Plan& plan, const std::vector<int>& host_of_rank)
      : plan_(plan), slice_(plan::executedSliceBytes(plan)), hosts_(host_of_rank) {}

  Status prepare() {
    BRAID_RETURN_IF_ERROR(validatePlan(plan_));
    if (hosts_.empty()) hosts_.assign(static_cast<size_t>(plan_.num_ranks), 0);
    if (hosts_.size() != static_cast<size_t>(plan_.num_ranks)) {
      return invalidArgument(
          fmt::format("plan '{}': {} host entries for {} ranks", plan_.algorithm, hosts_.size(), plan_.num_ranks));
    }
    if (plan_.slices_per_iteration != 1) {
      return unsupported(
          fmt::format("plan '{}': {} slices per iteration; the device-resident loop iterates one slice (lower with "
                      "slices_per_iteration 1)",
                      plan_.algorithm, plan_.slices_per_iteration));
    }
    if (plan_.fifo_depth < 1) {
      return invalidArgument(
          fmt::format("plan '{}': fifo_depth {} leaves a connection no slot", plan_.algorithm, plan_.fifo_depth));
    }
    protocol_ = plan_.protocol == Protocol::kLL ? DeviceProtocol::kLL : DeviceProtocol::kSimple;
    shapes_.resize(static_cast<size_t>(plan_.num_ranks));
    uint64_t largest = 0;
    for (int r = 0; r < plan_.num_ranks; ++r) {
      BRAID_RETURN_IF_ERROR(collectConnections(r, &largest));
    }
    slot_ = slotBytes(protocol_, largest);
    for (int r = 0; r < plan_.num_ranks; ++r) {
      layoutRegion(r);
      layoutProxy(r);
    }
    return Status::ok();
  }

  Result<std::vector<uint8_t>> encode(int r) {
    DecodedDevicePlan out;
    const RankPlan& rank = plan_.ranks[static_cast<size_t>(r)];
    const RankShape& shape = shapes_[static_cast<size_t>(r)];
    DevicePlanHeader& h = out.header;
    h.rank = r;
    h.num_ranks = plan_.num_ranks;
    h.protocol = protocol_;
    h.element_bytes = plan_.element_bytes;
    h.slice_bytes = slice_;
    h.fifo_depth = static_cast<uint32_t>(plan_.fifo_depth);
    h.host = hosts_[static_cast<size_t>(r)];
    h.input_bytes = rank.input_bytes;
    h.output_bytes = rank.output_bytes;
    h.scratch_bytes = rank.scratch_bytes + rank.temp_bytes;
    h.slot_bytes = slot_;
    h.region_bytes = shape.region.bytes;
    h.progress_offset = shape.region.progress;
    h.barrier_offset = shape.region.barrier;
    h.proxy_bytes = shape.proxy.bytes;
    BRAID_RETURN_IF_ERROR(encodeSteps(rank, &out));
    BRAID_RETURN_IF_ERROR(orderSteps(r, &out));
    encodeConnections(r, &out);
    for (const PlanCopy& copy : rank.precopies) {
      DevicePrecopy p;
      p.src_buffer = static_cast<DeviceBuffer>(copy.src.buffer);
      p.src_offset = copy.src.offset;
      p.dst_buffer = static_cast<DeviceBuffer>(copy.dst.buffer);
      p.dst_offset = copy.dst.offset;
      p.bytes = copy.src.bytes;
      out.precopies.push_back(p);
    }
    return serializeDevicePlan(out);
  }

 private:
  std::string where(int r, int t) const { return fmt::format("plan '{}': rank {} tb {}", plan_.algorithm, r, t); }

  // Rank r's connection ends (one threadblock per end) and the largest message of its sending steps.
  Status collectConnections(int r, uint64_t* largest) {
    const RankPlan& rank = plan_.ranks[static_cast<size_t>(r)];
    RankShape& shape = shapes_[static_cast<size_t>(r)];
    for (const PlanThreadblock& tb : rank.threadblocks) {
      uint64_t sent = 0, received = 0;
      for (const PlanStep& step : tb.steps) {
        const uint64_t slices = plan::sliceCount(step.bytes, slice_);
        if (opSends(step.type)) {
          sent += slices;
          *largest = std::max(*largest, slice_ == 0 ? step.bytes : std::min(step.bytes, slice_));
        }
        if (opReceives(step.type)) received += slices;
      }
      for (const auto& [count, key, ends, what] :
           {std::tuple{sent, ConnectionKey{r, tb.send_peer, tb.channel}, &shape.outgoing, "sends to"},
            std::tuple{received, ConnectionKey{tb.recv_peer, r, tb.channel}, &shape.incoming, "receives from"}}) {
        if (count == 0) continue;
        const int peer = ends == &shape.outgoing ? std::get<1>(key) : std::get<0>(key);
        auto [it, added] = ends->emplace(key, ConnectionEnd{tb.id, count});
        if (!added) {
          return unsupported(fmt::format(
              "plan '{}': rank {}: tb {} and tb {} both {} rank {} on channel {}; the device-resident executor "
              "drives each end of a connection from one threadblock (as MSCCL's kernel drives one NCCL "
              "connection per channel and peer)",
              plan_.algorithm, r, it->second.tb, tb.id, what, peer, tb.channel));
        }
      }
    }
    return Status::ok();
  }

  /// A connection between ranks of different hosts: its ends meet through their proxies.
  bool proxied(const ConnectionKey& key) const {
    return hosts_[static_cast<size_t>(std::get<0>(key))] != hosts_[static_cast<size_t>(std::get<1>(key))];
  }

  void layoutRegion(int r) {
    RankShape& shape = shapes_[static_cast<size_t>(r)];
    RegionLayout& region = shape.region;
    uint64_t offset = 0;
    for (const auto& [key, end] : shape.incoming) {
      if (proxied(key)) continue;
      region.fifo[key] = offset;
      offset = alignUp(offset + slot_ * static_cast<uint64_t>(plan_.fifo_depth), kDevicePlanAlign);
    }
    for (const auto& [key, end] : shape.incoming) {
      if (proxied(key)) continue;
      region.tail[key] = offset;
      offset += 8;
    }
    offset = alignUp(offset, kDevicePlanAlign);
    for (const auto& [key, end] : shape.outgoing) {
      if (proxied(key)) continue;
      region.head[key] = offset;
      offset += 8;
    }
    offset = alignUp(offset, kDevicePlanAlign);
    region.progress = offset;
    offset = alignUp(offset + 8 * plan_.ranks[static_cast<size_t>(r)].threadblocks.size(), kDevicePlanAlign);
    region.barrier = offset;
    region.bytes = alignUp(offset + 8, kDevicePlanAlign);
  }

  // The proxy area: FIFOs of the proxied ends (sending, then receiving), their tails, their heads.
  void layoutProxy(int r) {
    RankShape& shape = shapes_[static_cast<size_t>(r)];
    ProxyLayout& proxy = shape.proxy;
    std::vector<ConnectionKey> ends;
    for (const auto* side : {&shape.outgoing, &shape.incoming}) {
      for (const auto& [key, end] : *side) {
        if (proxied(key)) ends.push_back(key);
      }
    }
    if (ends.empty()) return;
    uint64_t offset = 0;
    for (const ConnectionKey& key : ends) {
      proxy.fifo[key] = offset;
      offset = alignUp(offset + slot_ * static_cast<uint64_t>(plan_.fifo_depth), kDevicePlanAlign);
    }
    for (const ConnectionKey& key : ends) {
      proxy.tail[key] = offset;
      offset += 8;
    }
    offset = alignUp(offset, kDevicePlanAlign);
    for (const ConnectionKey& key : ends) {
      proxy.head[key] = offset;
      offset += 8;
    }
    proxy.bytes = alignUp(offset, kDevicePlanAlign);
  }

  Status encodeSteps(const RankPlan& rank, DecodedDevicePlan* out) const {
    const int r = rank.rank;
    for (const PlanThreadblock& tb : rank.threadblocks) {
      DeviceThreadblock dtb;
      dtb.first_step = static_cast<uint32_t>(out->steps.size());
      dtb.num_steps = static_cast<uint32_t>(tb.steps.size());
      dtb.send_peer = tb.send_peer;
      dtb.recv_peer = tb.recv_peer;
      dtb.channel = tb.channel;
      dtb.temp_offset = tb.temp.offset;
      dtb.temp_bytes = tb.temp.bytes;
      for (const PlanStep& step : tb.steps) {
        DeviceStep ds;
        ds.op = static_cast<DeviceOp>(step.type);
        ds.src_buffer = static_cast<DeviceBuffer>(step.src.buffer);
        ds.src_offset = step.src.offset;
        ds.dst_buffer = static_cast<DeviceBuffer>(step.dst.buffer);
        ds.dst_offset = step.dst.offset;
        ds.bytes = step.bytes;
        ds.slices = static_cast<uint32_t>(plan::sliceCount(step.bytes, slice_));  // < 2^32: validatePlan
        if ((step.type == OpType::kRecvReduceCopy || step.type == OpType::kRecvReduceCopySend) &&
            plan::overlaps(step.src, step.dst) && !plan::sameRange(step.src, step.dst)) {
          ds.flags |= kStepStaged;
        }
        if (out->deps.size() + step.deps.size() > std::numeric_limits<uint32_t>::max()) {
          return unsupported(fmt::format("{}: more than 2^32 dependencies", where(r, tb.id)));
        }
        ds.dep_begin = static_cast<uint32_t>(out->deps.size());
        ds.dep_count = static_cast<uint32_t>(step.deps.size());
        for (const Dependency& dep : step.deps) {
          out->deps.push_back(DeviceDependency{static_cast<uint32_t>(dep.tb), static_cast<uint32_t>(dep.step)});
        }
        out->steps.push_back(ds);
      }
      if (out->steps.size() > std::numeric_limits<uint32_t>::max() / 2) {
        return unsupported(fmt::format("{}: more than 2^31 steps", where(r, tb.id)));
      }
      out->threadblocks.push_back(dtb);
    }
    propagateNopSlices(out);
    for (DeviceThreadblock& tb : out->threadblocks) {
      for (uint32_t s = 0; s < tb.num_steps; ++s) {
        tb.iterations = std::max(tb.iterations, out->steps[tb.first_step + s].slices);
      }
    }
    out->header.num_threadblocks = static_cast<uint32_t>(out->threadblocks.size());
    out->header.num_steps = static_cast<uint32_t>(out->steps.size());
    out->header.num_deps = static_cast<uint32_t>(out->deps.size());
    return Status::ok();
  }

  // A nop runs as many slices as the most of the steps it depends on, through chains of nops (the executor's
  // rule, runtime/executor/executor.cc): slice j of what follows it then waits for slice j of that data.
  static void propagateNopSlices(DecodedDevicePlan* out) {
    for (bool changed = true; changed;) {
      changed = false;
      for (DeviceStep& step : out->steps) {
        if (step.op != DeviceOp::kNop) continue;
        for (uint32_t d = step.dep_begin; d < step.dep_begin + step.dep_count; ++d) {
          const DeviceDependency& dep = out->deps[d];
          const uint32_t slices = out->steps[out->threadblocks[dep.tb].first_step + dep.step].slices;
          if (slices > step.slices) {
            step.slices = slices;
            changed = true;
          }
        }
      }
    }
  }

  // DeviceStep::order: Kahn's algorithm over the rank's steps, edges from each step's predecessor in its
  // threadblock and from its dependencies. A dependency cycle leaves steps unordered.
  Status orderSteps(int r, DecodedDevicePlan* out) const {
    const size_t n = out->steps.size();
    std::vector<uint32_t> pending(n, 0);
    std::vector<std::vector<uint32_t>> next(n);
    for (const DeviceThreadblock& tb : out->threadblocks) {
      for (uint32_t s = 0; s < tb.num_steps; ++s) {
        const uint32_t flat = tb.first_step + s;
        if (s > 0) {
          next[flat - 1].push_back(flat);
          ++pending[flat];
        }
        const DeviceStep& step = out->steps[flat];
        for (uint32_t d = step.dep_begin; d < step.dep_begin + step.dep_count; ++d) {
          const DeviceDependency& dep = out->deps[d];
          next[out->threadblocks[dep.tb].first_step + dep.step].push_back(flat);
          ++pending[flat];
        }
      }
    }
    std::deque<uint32_t> ready;
    for (uint32_t i = 0; i < n; ++i)
      if (pending[i] == 0) ready.push_back(i);
    uint32_t position = 0;
    while (!ready.empty()) {
      const uint32_t i = ready.front();
      ready.pop_front();
      out->steps[i].order = position++;
      for (uint32_t j : next[i])
        if (--pending[j] == 0) ready.push_back(j);
    }
    if (position == n) return Status::ok();
    std::string waiting;
    int listed = 0;
    for (size_t t = 0; t < out->threadblocks.size() && listed < 4; ++t) {
      const DeviceThreadblock& tb = out->threadblocks[t];
      for (uint32_t s = 0; s < tb.num_steps && listed < 4; ++s) {
        if (pending[tb.first_step + s] == 0) continue;
        waiting += fmt::format("{}tb {} step {}", listed++ > 0 ? ", " : "", t, s);
        break;  // the first waiting step of each threadblock
      }
    }
    return invalidArgument(
        fmt::format("plan '{}': rank {}: the dependencies of {} of its steps form a cycle (the "
                    "device-resident executor would wait forever): {}",
                    plan_.algorithm, r, n - position, waiting));
  }

  void encodeConnections(int r, DecodedDevicePlan* out) const {
    const RankShape& shape = shapes_[static_cast<size_t>(r)];
    for (bool sending : {true, false}) {
      const auto& ends = sending ? shape.outgoing : shape.incoming;
      for (const auto& [key, end] : ends) {
        const auto& [sender, receiver, channel] = key;
        const RegionLayout& receiver_region = shapes_[static_cast<size_t>(receiver)].region;
        const RegionLayout& sender_region = shapes_[static_cast<size_t>(sender)].region;
        DeviceConnection c;
        c.sender = sender;
        c.receiver = receiver;
        c.channel = channel;
        c.tb = static_cast<uint32_t>(end.tb);
        c.sending = sending ? 1 : 0;
        c.messages = end.messages;
        if (proxied(key)) {
          const ProxyLayout& proxy = shapes_[static_cast<size_t>(r)].proxy;
          c.proxied = 1;
          c.fifo_offset = proxy.fifo.at(key);
          c.tail_offset = proxy.tail.at(key);
          c.head_offset = proxy.head.at(key);
        } else {
          c.fifo_offset = receiver_region.fifo.at(key);
          c.tail_offset = receiver_region.tail.at(key);
          c.head_offset = sender_region.head.at(key);
        }
        DeviceThreadblock& tb = out->threadblocks[static_cast<size_t>(end.tb)];
        (sending ? tb.send_connection : tb.recv_connection) = static_cast<int32_t>(out->connections.size());
        out->connections.push_back(c);
      }
    }
    out->header.num_connections = static_cast<uint32_t>(out->connections.size());
  }

  const Plan& plan_;
  const uint64_t slice_;
  std::vector<int> hosts_;
  DeviceProtocol protocol_ = DeviceProtocol::kSimple;
  uint64_t slot_ = 16;
  std::vector<RankShape> shapes_;
};

// ---- decoding ----------------------------------------------------------------------------------------------------

template <typename T>
Status readTable(const uint8_t* data, size_t size, uint64_t offset, uint32_t count, const char* name,
                 std::vector<T>* out) {
  if (offset % kDevicePlanAlign != 0) {
    return invalidArgument(
        fmt::format("device plan: {} table at byte {} is not {}-byte aligned", name, offset, kDevicePlanAlign));
  }
  const uint64_t bytes = uint64_t{count} * sizeof(T);
  if (offset > size || bytes > size - offset) {
    return invalidArgument(fmt::format("device plan: {} table of {} entries at byte {} runs past the {}-byte blob",
                                       name, count, offset, size));
  }
  out->resize(count);
  if (count > 0) std::memcpy(out->data(), data + offset, bytes);
  return Status::ok();
}

template <typename T>
void writeTable(std::vector<uint8_t>* blob, uint64_t* offset_field, const std::vector<T>& table) {
  const uint64_t offset = alignUp(blob->size(), kDevicePlanAlign);
  blob->resize(offset + table.size() * sizeof(T), 0);
  if (!table.empty()) std::memcpy(blob->data() + offset, table.data(), table.size() * sizeof(T));
  *offset_field = offset;
}

// ---- validation --------------------------------------------------------------------------------------------------

class RankValidator {
 public:
  explicit RankValidator(const DecodedDevicePlan& plan) : p_(plan), h_(plan.header) {}

  Status run() {
    if (h_.num_ranks < 1 || h_.rank < 0 || h_.rank >= h_.num_ranks) {
      return invalidArgument(fmt::format("device plan: rank {} of {} ranks", h_.rank, h_.num_ranks));
    }
    if (h_.element_bytes < 1 || h_.fifo_depth < 1 || h_.slot_bytes < 16 || h_.slot_bytes % 16 != 0) {
      return invalidArgument(fmt::format("{}: element_bytes {}, fifo_depth {}, slot_bytes {}", at(), h_.element_bytes,
                                         h_.fifo_depth, h_.slot_bytes));
    }
    if (static_cast<int>(h_.protocol) > static_cast<int>(DeviceProtocol::kLL)) {
      return invalidArgument(fmt::format("{}: protocol {} is not Simple or LL", at(), static_cast<int>(h_.protocol)));
    }
    const uint64_t largest_message =
        h_.protocol == DeviceProtocol::kLL ? h_.slot_bytes / kLLLineBytes * kLLDataBytes : h_.slot_bytes;
    if (h_.slice_bytes > 0 && h_.slice_bytes % h_.element_bytes != 0) {
      return invalidArgument(
          fmt::format("{}: slice of {} bytes is not whole {}-byte elements", at(), h_.slice_bytes, h_.element_bytes));
    }
    largest_message_ = largest_message;
    uint32_t next_step = 0;
    for (uint32_t t = 0; t < p_.threadblocks.size(); ++t) {
      const DeviceThreadblock& tb = p_.threadblocks[t];
      if (tb.first_step != next_step || uint64_t{tb.first_step} + tb.num_steps > p_.steps.size()) {
        return invalidArgument(fmt::format("{}: steps [{}, +{}) do not follow tb {}'s in the {}-step table", at(t),
                                           tb.first_step, tb.num_steps, t == 0 ? 0 : t - 1, p_.steps.size()));
      }
      next_step += tb.num_steps;
      BRAID_RETURN_IF_ERROR(checkThreadblock(t));
    }
    if (next_step != p_.steps.size()) {
      return invalidArgument(
          fmt::format("{}: the threadblocks own {} of the {} steps", at(), next_step, p_.steps.size()));
    }
    for (uint32_t c = 0; c < p_.connections.size(); ++c) BRAID_RETURN_IF_ERROR(checkConnection(c));
    for (uint32_t i = 0; i < p_.precopies.size(); ++i) {
      const DevicePrecopy& copy = p_.precopies[i];
      const std::string where = fmt::format("{} copy {}", at(), i);
      BRAID_RETURN_IF_ERROR(checkRange(copy.src_buffer, copy.src_offset, copy.bytes, "src", where));
      BRAID_RETURN_IF_ERROR(checkRange(copy.dst_buffer, copy.dst_offset, copy.bytes, "dst", where));
    }
    return checkRegion();
  }

 private:
  std::string at() const { return fmt::format("device plan rank {}", h_.rank); }
  std::string at(uint32_t t) const { return fmt::format("device plan rank {}: tb {}", h_.rank, t); }
  std::string at(uint32_t t, uint32_t s) const {
    return fmt::format("device plan rank {}: tb {} step {}", h_.rank, t, s);
  }

  uint64_t bufferBytes(DeviceBuffer buffer) const {
    switch (buffer) {
      case DeviceBuffer::kInput: return h_.input_bytes;
      case DeviceBuffer::kOutput: return h_.output_bytes;
      case DeviceBuffer::kScratch: return h_.scratch_bytes;
    }
    return 0;
  }

  Status checkRange(DeviceBuffer buffer, uint64_t offset, uint64_t bytes, const char* role,
                    const std::string& where) const {
    if (static_cast<int>(buffer) > static_cast<int>(DeviceBuffer::kScratch)) {
      return invalidArgument(fmt::format("{}: {} names buffer kind {}", where, role, static_cast<int>(buffer)));
    }
    const uint64_t size = bufferBytes(buffer);
    if (offset > size || bytes > size - offset) {
      return invalidArgument(fmt::format("{}: {} [{}, +{}) is outside the {}-byte buffer {}", where, role, offset,
                                         bytes, size, static_cast<int>(buffer)));
    }
    if (offset % h_.element_bytes != 0 || bytes % h_.element_bytes != 0) {
      return invalidArgument(fmt::format("{}: {} [{}, +{}) is not on whole {}-byte elements", where, role, offset,
                                         bytes, h_.element_bytes));
    }
    return Status::ok();
  }

  const DeviceStep& stepOf(uint32_t tb, uint32_t s) const { return p_.steps[p_.threadblocks[tb].first_step + s]; }

  Status checkThreadblock(uint32_t t) {
    const DeviceThreadblock& tb = p_.threadblocks[t];
    uint32_t iterations = 0;
    uint64_t sent = 0, received = 0;
    for (uint32_t s = 0; s < tb.num_steps; ++s) {
      BRAID_RETURN_IF_ERROR(checkStep(t, s));
      const DeviceStep& step = stepOf(t, s);
      iterations = std::max(iterations, step.slices);
      if (sends(step.op)) sent += step.slices;
      if (receives(step.op)) received += step.slices;
      if (s > 0 && stepOf(t, s - 1).order >= step.order) {
        return invalidArgument(
            fmt::format("{}: order {} is not above step {}'s {}", at(t, s), step.order, s - 1, stepOf(t, s - 1).order));
      }
    }
    if (tb.iterations != iterations) {
      return invalidArgument(
          fmt::format("{}: {} iterations but its steps run at most {} slices", at(t), tb.iterations, iterations));
    }
    for (const auto& [index, count, sending] :
         {std::tuple{tb.send_connection, sent, true}, std::tuple{tb.recv_connection, received, false}}) {
      const char* what = sending ? "send" : "recv";
      if (index < 0) {
        if (count > 0)
          return invalidArgument(fmt::format("{}: {} slices to {} but no {} connection", at(t), count, what, what));
        continue;
      }
      if (static_cast<size_t>(index) >= p_.connections.size()) {
        return invalidArgument(fmt::format("{}: {} connection {} of {}", at(t), what, index, p_.connections.size()));
      }
      const DeviceConnection& c = p_.connections[static_cast<size_t>(index)];
      const int peer = sending ? tb.send_peer : tb.recv_peer;
      const bool matches =
          c.tb == t && c.sending == (sending ? 1 : 0) && c.channel == tb.channel &&
          (sending ? c.sender == h_.rank && c.receiver == peer : c.receiver == h_.rank && c.sender == peer);
      if (!matches || c.messages != count || count == 0) {
        return invalidArgument(fmt::format(
            "{}: {} connection {} (rank {} -> rank {} channel {}, tb {}, {} messages) is not this threadblock's "
            "{} slices to peer {} on channel {}",
            at(t), what, index, c.sender, c.receiver, c.channel, c.tb, c.messages, count, peer, tb.channel));
      }
    }
    return Status::ok();
  }

  Status checkStep(uint32_t t, uint32_t s) {
    const DeviceThreadblock& tb = p_.threadblocks[t];
    const DeviceStep& step = stepOf(t, s);
    const std::string where = at(t, s);
    if (static_cast<int>(step.op) > static_cast<int>(DeviceOp::kNop)) {
      return invalidArgument(fmt::format("{}: op {} is not a step type", where, static_cast<int>(step.op)));
    }
    if (readsSrc(step.op))
      BRAID_RETURN_IF_ERROR(checkRange(step.src_buffer, step.src_offset, step.bytes, "src", where));
    if (writesDst(step.op))
      BRAID_RETURN_IF_ERROR(checkRange(step.dst_buffer, step.dst_offset, step.bytes, "dst", where));
    if (step.op != DeviceOp::kNop && step.bytes % h_.element_bytes != 0) {
      return invalidArgument(fmt::format("{}: {} bytes are not whole elements", where, step.bytes));
    }
    if (uint64_t{step.dep_begin} + step.dep_count > p_.deps.size()) {
      return invalidArgument(fmt::format("{}: dependencies [{}, +{}) are outside the {}-entry table", where,
                                         step.dep_begin, step.dep_count, p_.deps.size()));
    }
    uint32_t dep_slices = 1;
    for (uint32_t d = step.dep_begin; d < step.dep_begin + step.dep_count; ++d) {
      const DeviceDependency& dep = p_.deps[d];
      if (dep.tb >= p_.threadblocks.size() || dep.step >= p_.threadblocks[dep.tb].num_steps) {
        return invalidArgument(fmt::format("{}: dependency on tb {} step {} names no step", where, dep.tb, dep.step));
      }
      const DeviceStep& target = stepOf(dep.tb, dep.step);
      if (target.order >= step.order) {
        return invalidArgument(fmt::format("{}: dependency on tb {} step {} does not point backwards (order {} >= {})",
                                           where, dep.tb, dep.step, target.order, step.order));
      }
      dep_slices = std::max(dep_slices, target.slices);
    }
    const uint64_t want = step.op == DeviceOp::kNop ? dep_slices
                          : h_.slice_bytes == 0 || step.bytes <= h_.slice_bytes
                              ? 1
                              : (step.bytes + h_.slice_bytes - 1) / h_.slice_bytes;
    if (step.slices != want) {
      return invalidArgument(fmt::format("{}: {} slices, the executor runs {}", where, step.slices, want));
    }
    if (sends(step.op) || receives(step.op)) {
      const uint64_t message = h_.slice_bytes == 0 ? step.bytes : std::min(step.bytes, h_.slice_bytes);
      if (message > largest_message_) {
        return invalidArgument(
            fmt::format("{}: a {}-byte message does not fit a {}-byte slot", where, message, h_.slot_bytes));
      }
    }
    if (step.flags & ~kStepStaged) {
      return invalidArgument(fmt::format("{}: unknown flags {:#x}", where, step.flags));
    }
    if (step.flags & kStepStaged) {
      if (step.op != DeviceOp::kRecvReduceCopy && step.op != DeviceOp::kRecvReduceCopySend) {
        return invalidArgument(fmt::format("{}: only receive-reduce-copy steps go through staging", where));
      }
      const uint64_t need = h_.slice_bytes == 0 ? step.bytes : std::min(step.bytes, h_.slice_bytes);
      if (tb.temp_bytes < need || tb.temp_offset > h_.scratch_bytes ||
          tb.temp_bytes > h_.scratch_bytes - tb.temp_offset) {
        return invalidArgument(fmt::format("{}: staging [{}, +{}) of scratch ({} bytes) cannot hold a {}-byte slice",
                                           where, tb.temp_offset, tb.temp_bytes, h_.scratch_bytes, need));
      }
    }
    return Status::ok();
  }

  Status checkConnection(uint32_t c) {
    const DeviceConnection& conn = p_.connections[c];
    const std::string name =
        fmt::format("connection {} (rank {} -> rank {} channel {})", c, conn.sender, conn.receiver, conn.channel);
    const std::string where = at() + ": " + name;
    const int peer = conn.sending ? conn.receiver : conn.sender;
    const int self = conn.sending ? conn.sender : conn.receiver;
    if (conn.sending > 1 || self != h_.rank || peer < 0 || peer >= h_.num_ranks || peer == h_.rank ||
        conn.channel < 0) {
      return invalidArgument(fmt::format("{}: not an end on rank {}", where, h_.rank));
    }
    if (conn.tb >= p_.threadblocks.size()) {
      return invalidArgument(fmt::format("{}: tb {} of {}", where, conn.tb, p_.threadblocks.size()));
    }
    const DeviceThreadblock& tb = p_.threadblocks[conn.tb];
    if ((conn.sending ? tb.send_connection : tb.recv_connection) != static_cast<int32_t>(c)) {
      return invalidArgument(fmt::format("{}: tb {} does not drive it", where, conn.tb));
    }
    if (conn.proxied > 1) {
      return invalidArgument(fmt::format("{}: proxied is {}, not 0 or 1", where, conn.proxied));
    }
    if (conn.proxied) {
      // Each end of a proxied connection has its FIFO, tail and head in its own rank's proxy area.
      proxy_parts_.push_back({conn.fifo_offset, h_.slot_bytes * h_.fifo_depth, name + " FIFO"});
      proxy_parts_.push_back({conn.tail_offset, 8, name + " tail"});
      proxy_parts_.push_back({conn.head_offset, 8, name + " head"});
      if (conn.fifo_offset % kDevicePlanAlign != 0) {
        return invalidArgument(fmt::format("{}: proxied FIFO at byte {} is not {}-byte aligned", where,
                                           conn.fifo_offset, kDevicePlanAlign));
      }
    } else if (conn.sending) {
      // This rank's own parts of the connection: the FIFO and tail when receiving, the head when sending.
      parts_.push_back({conn.head_offset, 8, name + " head"});
    } else {
      parts_.push_back({conn.fifo_offset, h_.slot_bytes * h_.fifo_depth, name + " FIFO"});
      parts_.push_back({conn.tail_offset, 8, name + " tail"});
      if (conn.fifo_offset % kDevicePlanAlign != 0) {
        return invalidArgument(
            fmt::format("{}: FIFO at byte {} is not {}-byte aligned", where, conn.fifo_offset, kDevicePlanAlign));
      }
    }
    if (conn.head_offset % 8 != 0 || conn.tail_offset % 8 != 0) {
      return invalidArgument(fmt::format("{}: counters at bytes {} and {} are not 8-byte aligned", where,
                                         conn.head_offset, conn.tail_offset));
    }
    return Status::ok();
  }

  struct Part {
    uint64_t offset;
    uint64_t bytes;
    std::string what;
  };

  Status checkRegion() {
    parts_.push_back({h_.progress_offset, 8 * uint64_t{h_.num_threadblocks}, "progress counters"});
    parts_.push_back({h_.barrier_offset, 8, "barrier counter"});
    if (h_.progress_offset % 8 != 0 || h_.barrier_offset % 8 != 0) {
      return invalidArgument(fmt::format("{}: progress counters at byte {} or barrier at byte {} not 8-byte aligned",
                                         at(), h_.progress_offset, h_.barrier_offset));
    }
    if (h_.proxy_bytes % kDevicePlanAlign != 0) {
      return invalidArgument(
          fmt::format("{}: proxy_bytes {} is not a multiple of {}", at(), h_.proxy_bytes, kDevicePlanAlign));
    }
    BRAID_RETURN_IF_ERROR(checkParts(&parts_, h_.region_bytes, "region"));
    return checkParts(&proxy_parts_, h_.proxy_bytes, "proxy area");
  }

  // Parts inside [0, bytes) of the memory named `memory`, without overlap.
  Status checkParts(std::vector<Part>* parts, uint64_t bytes, const char* memory) const {
    std::sort(parts->begin(), parts->end(), [](const Part& a, const Part& b) { return a.offset < b.offset; });
    for (size_t i = 0; i < parts->size(); ++i) {
      const Part& part = (*parts)[i];
      if (part.offset > bytes || part.bytes > bytes - part.offset) {
        return invalidArgument(fmt::format("{}: {} [{}, +{}) is outside the {}-byte {}", at(), part.what, part.offset,
                                           part.bytes, bytes, memory));
      }
      const Part* previous = i > 0 ? &(*parts)[i - 1] : nullptr;
      if (previous != nullptr && previous->offset + previous->bytes > part.offset) {
        return invalidArgument(fmt::format("{}: {} [{}, +{}) overlaps {} at byte {} of the {}", at(), part.what,
                                           part.offset, part.bytes, previous->what, previous->offset, memory));
      }
    }
    return Status::ok();
  }

  const DecodedDevicePlan& p_;
  const DevicePlanHeader& h_;
  uint64_t largest_message_ = 0;
  std::vector<Part> parts_;
  std::vector<Part> proxy_parts_;
};

}  // namespace

std::vector<uint64_t> deviceMessageBytes(const DecodedDevicePlan& plan, const DeviceConnection& c) {
  std::vector<uint64_t> sizes;
  const DeviceThreadblock& tb = plan.threadblocks[c.tb];
  forEachMessage(plan.steps.data() + tb.first_step, tb.num_steps, tb.iterations, plan.header.slice_bytes,
                 c.sending != 0, [&](uint64_t bytes) { sizes.push_back(bytes); });
  return sizes;
}

Result<std::vector<std::vector<uint8_t>>> encodeDevicePlans(const Plan& plan, const std::vector<int>& host_of_rank) {
  Encoder encoder(plan, host_of_rank);
  BRAID_RETURN_IF_ERROR(encoder.prepare());
  std::vector<std::vector<uint8_t>> blobs;
  for (int r = 0; r < plan.num_ranks; ++r) {
    BRAID_ASSIGN_OR_RETURN(std::vector<uint8_t> blob, encoder.encode(r));
    blobs.push_back(std::move(blob));
  }
  return blobs;
}

Result<std::vector<uint8_t>> encodeDevicePlan(const Plan& plan, int rank, const std::vector<int>& host_of_rank) {
  if (rank < 0 || rank >= plan.num_ranks) {
    return invalidArgument(fmt::format("plan '{}': no rank {} among {}", plan.algorithm, rank, plan.num_ranks));
  }
  Encoder encoder(plan, host_of_rank);
  BRAID_RETURN_IF_ERROR(encoder.prepare());
  return encoder.encode(rank);
}

std::vector<uint8_t> serializeDevicePlan(const DecodedDevicePlan& plan) {
  std::vector<uint8_t> blob(sizeof(DevicePlanHeader), 0);
  DevicePlanHeader header = plan.header;
  header.magic = kDevicePlanMagic;
  header.version = kDevicePlanVersion;
  header.num_threadblocks = static_cast<uint32_t>(plan.threadblocks.size());
  header.num_steps = static_cast<uint32_t>(plan.steps.size());
  header.num_deps = static_cast<uint32_t>(plan.deps.size());
  header.num_connections = static_cast<uint32_t>(plan.connections.size());
  header.num_precopies = static_cast<uint32_t>(plan.precopies.size());
  writeTable(&blob, &header.threadblocks_offset, plan.threadblocks);
  writeTable(&blob, &header.steps_offset, plan.steps);
  writeTable(&blob, &header.deps_offset, plan.deps);
  writeTable(&blob, &header.connections_offset, plan.connections);
  writeTable(&blob, &header.precopies_offset, plan.precopies);
  blob.resize(alignUp(blob.size(), kDevicePlanAlign), 0);
  header.blob_bytes = blob.size();
  std::memcpy(blob.data(), &header, sizeof header);
  return blob;
}

Result<DecodedDevicePlan> decodeDevicePlan(const uint8_t* data, size_t size) {
  DecodedDevicePlan out;
  if (data == nullptr || size < sizeof(DevicePlanHeader)) {
    return invalidArgument(fmt::format("device plan: {} bytes hold no {}-byte header", size, sizeof(DevicePlanHeader)));
  }
  std::memcpy(&out.header, data, sizeof out.header);
  const DevicePlanHeader& h = out.header;
  if (h.magic != kDevicePlanMagic) {
    return invalidArgument(fmt::format("device plan: magic {:#010x}, expected {:#010x}", h.magic, kDevicePlanMagic));
  }
  if (h.version != kDevicePlanVersion) {
    return invalidArgument(
        fmt::format("device plan: version {}, this build reads version {}", h.version, kDevicePlanVersion));
  }
  if (h.blob_bytes != size) {
    return invalidArgument(fmt::format("device plan: blob_bytes {} but the blob has {} bytes", h.blob_bytes, size));
  }
  BRAID_RETURN_IF_ERROR(
      readTable(data, size, h.threadblocks_offset, h.num_threadblocks, "threadblock", &out.threadblocks));
  BRAID_RETURN_IF_ERROR(readTable(data, size, h.steps_offset, h.num_steps, "step", &out.steps));
  BRAID_RETURN_IF_ERROR(readTable(data, size, h.deps_offset, h.num_deps, "dependency", &out.deps));
  BRAID_RETURN_IF_ERROR(readTable(data, size, h.connections_offset, h.num_connections, "connection", &out.connections));
  BRAID_RETURN_IF_ERROR(readTable(data, size, h.precopies_offset, h.num_precopies, "precopy", &out.precopies));
  return out;
}

Status validateDevicePlan(const DecodedDevicePlan& plan) { return RankValidator(plan).run(); }

Status validateDevicePlans(const std::vector<DecodedDevicePlan>& plans) {
  if (plans.empty()) return invalidArgument("device plans: none");
  const DevicePlanHeader& first = plans[0].header;
  for (size_t r = 0; r < plans.size(); ++r) {
    const DevicePlanHeader& h = plans[r].header;
    if (h.rank != static_cast<int>(r) || h.num_ranks != static_cast<int>(plans.size())) {
      return invalidArgument(fmt::format("device plans: entry {} is rank {} of {}, expected rank {} of {}", r, h.rank,
                                         h.num_ranks, r, plans.size()));
    }
    if (h.protocol != first.protocol || h.slice_bytes != first.slice_bytes || h.slot_bytes != first.slot_bytes ||
        h.fifo_depth != first.fifo_depth || h.element_bytes != first.element_bytes) {
      return invalidArgument(fmt::format(
          "device plans: rank {} has protocol {} slice {} slot {} depth {} element {}, rank 0 {} {} {} {} {}", r,
          static_cast<int>(h.protocol), h.slice_bytes, h.slot_bytes, h.fifo_depth, h.element_bytes,
          static_cast<int>(first.protocol), first.slice_bytes, first.slot_bytes, first.fifo_depth,
          first.element_bytes));
    }
    BRAID_RETURN_IF_ERROR(validateDevicePlan(plans[r]));
  }
  // Every end finds its peer's opposite end, with the same offsets, message count and message sizes.
  std::map<std::tuple<int, int, int, int>, const DeviceConnection*> ends;  // (sender, receiver, channel, sending)
  for (const DecodedDevicePlan& plan : plans) {
    for (const DeviceConnection& c : plan.connections) ends[{c.sender, c.receiver, c.channel, c.sending}] = &c;
  }
  for (const DecodedDevicePlan& plan : plans) {
    for (const DeviceConnection& c : plan.connections) {
      if (!c.sending) continue;
      const ConnectionKey key{c.sender, c.receiver, c.channel};
      const auto other = ends.find({c.sender, c.receiver, c.channel, 0});
      if (other == ends.end()) {
        return invalidArgument(fmt::format("device plans: {}: rank {} sends {} message(s) but rank {} never receives",
                                           describeConnection(key), c.sender, c.messages, c.receiver));
      }
      const DeviceConnection& r = *other->second;
      const int sender_host = plans[static_cast<size_t>(c.sender)].header.host;
      const int receiver_host = plans[static_cast<size_t>(c.receiver)].header.host;
      if (c.proxied != r.proxied) {
        return invalidArgument(fmt::format("device plans: {}: proxied is {} on the sender and {} on the receiver",
                                           describeConnection(key), c.proxied, r.proxied));
      }
      if ((c.proxied != 0) != (sender_host != receiver_host)) {
        return invalidArgument(fmt::format(
            "device plans: {}: proxied is {} but rank {} is on host {} and rank {} on host {} (proxied exactly when "
            "the hosts differ)",
            describeConnection(key), c.proxied, c.sender, sender_host, c.receiver, receiver_host));
      }
      if (c.proxied && r.messages != c.messages) {
        return invalidArgument(fmt::format("device plans: {}: the sender has {} messages, the receiver {}",
                                           describeConnection(key), c.messages, r.messages));
      }
      // A proxied connection's ends each have their own FIFO and counters in their own proxy area (checked per
      // rank); the others share the receiver's FIFO and tail and the sender's head.
      if (!c.proxied && (r.messages != c.messages || r.fifo_offset != c.fifo_offset || r.tail_offset != c.tail_offset ||
                         r.head_offset != c.head_offset)) {
        return invalidArgument(fmt::format(
            "device plans: {}: the sender has {} messages, FIFO {} tail {} head {}; the receiver {}, {}, {}, {}",
            describeConnection(key), c.messages, c.fifo_offset, c.tail_offset, c.head_offset, r.messages, r.fifo_offset,
            r.tail_offset, r.head_offset));
      }
      const DevicePlanHeader& rh = plans[static_cast<size_t>(c.receiver)].header;
      const uint64_t fifo_bytes = rh.slot_bytes * rh.fifo_depth;
      if (!c.proxied && (c.fifo_offset > rh.region_bytes || fifo_bytes > rh.region_bytes - c.fifo_offset ||
                         c.tail_offset + 8 > rh.region_bytes)) {
        return invalidArgument(fmt::format(
            "device plans: {}: FIFO [{}, +{}) or tail {} is outside rank {}'s {}-byte "
            "region",
            describeConnection(key), c.fifo_offset, fifo_bytes, c.tail_offset, c.receiver, rh.region_bytes));
      }
      const std::vector<uint64_t> sent = deviceMessageBytes(plan, c);
      const std::vector<uint64_t> received = deviceMessageBytes(plans[static_cast<size_t>(c.receiver)], r);
      if (sent != received) {
        size_t m = 0;
        while (m < sent.size() && m < received.size() && sent[m] == received[m]) ++m;
        return invalidArgument(
            fmt::format("device plans: {}: message {} is {} bytes on the sender (tb {}) and {} on the receiver (tb {})",
                        describeConnection(key), m, m < sent.size() ? std::to_string(sent[m]) : "missing", c.tb,
                        m < received.size() ? std::to_string(received[m]) : "missing", r.tb));
      }
    }
  }
  for (const DecodedDevicePlan& plan : plans) {
    for (const DeviceConnection& c : plan.connections) {
      if (c.sending) continue;
      if (ends.find({c.sender, c.receiver, c.channel, 1}) == ends.end()) {
        return invalidArgument(fmt::format("device plans: {}: rank {} receives {} message(s) but rank {} never sends",
                                           describeConnection({c.sender, c.receiver, c.channel}), c.receiver,
                                           c.messages, c.sender));
      }
    }
  }
  return Status::ok();
}

}  // namespace braid::cuda
