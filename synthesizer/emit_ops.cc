// The emitter's operations, independent of channels and threadblocks: per rank, the sends, receives, copies and
// reductions of every message in the order of one key, with their dependencies (emit.cc's file comment).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "synthesizer/emitter.h"

namespace braid::synth::emit {
namespace {

// Message `m` at its receiver (keyed at the message's end, receive before send) or at its sender (keyed at its
// start), with the message's members; locations and dependencies are the caller's.
Op messageOp(const Message& msg, int m, OpType type, bool at_receiver) {
  Op op;
  op.rank = at_receiver ? msg.to : msg.from;
  op.type = type;
  op.key = at_receiver ? Key{msg.phase, msg.end, 0, m} : Key{msg.phase, msg.start, 1, m};
  (at_receiver ? op.recv_msg : op.send_msg) = m;
  op.units = msg.units;
  return op;
}

Op copyOp(int rank, const Key& key) {
  Op op;
  op.rank = rank;
  op.type = OpType::kCopy;
  op.key = key;
  return op;
}

}  // namespace

int Emitter::addOp(Op op) {
  ops_.push_back(std::move(op));
  return static_cast<int>(ops_.size()) - 1;
}

Status Emitter::buildOps() {
  scratch_syms_.assign(n_, 0);
  int unique = static_cast<int>(msgs_.size());
  const int num_units = static_cast<int>(units_.size());
  data_.resize(num_units);
  std::iota(data_.begin(), data_.end(), 0);
  // ready[u][r]: the op after which unit u's data is in place on rank r for the gather phase (-1: nothing to
  // wait for).
  std::vector<std::vector<int>> ready(num_units, std::vector<int>(n_, -1));
  if (has_reverse_) BRAID_RETURN_IF_ERROR(buildReduceOps(&ready, &unique));
  if (has_forward_) buildGatherOps(&ready, &unique);
  return Status::ok();
}

Status Emitter::buildReduceOps(std::vector<std::vector<int>>* ready, int* unique) {
  const int num_units = static_cast<int>(units_.size());
  std::map<int, int> reduce_unit_of;  // owner * c + piece -> reduce-phase unit (all-reduce hand-over)
  std::vector<std::vector<std::vector<std::pair<int, int>>>> incoming(
      num_units, std::vector<std::vector<std::pair<int, int>>>(n_));  // (op, member)
  std::vector<int> recv_op(msgs_.size(), -1);
  for (int m = 0; m < static_cast<int>(msgs_.size()); ++m) {
    const Message& msg = msgs_[m];
    if (msg.phase != kPhaseReduce) continue;
    Op op = messageOp(msg, m, OpType::kRecvReduceCopy, /*at_receiver=*/true);
    const size_t k = msg.units.size();
    op.src.resize(k);
    op.dst.resize(k);
    op.deps.resize(k);
    recv_op[m] = addOp(std::move(op));
    for (size_t i = 0; i < k; ++i) incoming[msg.units[i]][msg.to].push_back({recv_op[m], static_cast<int>(i)});
  }
  std::vector<std::vector<int>> final_op(num_units, std::vector<int>(n_, -1));
  std::vector<std::vector<SLoc>> acc(num_units, std::vector<SLoc>(n_));
  for (int u = 0; u < num_units; ++u) {
    const Unit& unit = units_[u];
    if (unit.phase != kPhaseReduce) continue;
    reduce_unit_of[unit.owner * c_ + unit.piece] = u;
    for (int v = 0; v < n_; ++v) {
      auto& list = incoming[u][v];
      std::sort(list.begin(), list.end(),
                [&](const auto& a, const auto& b) { return ops_[a.first].key < ops_[b.first].key; });
      const SLoc in = inputLoc(unit.in_idx);
      const SLoc total = v == unit.owner ? outputLoc(unit.out_idx) : SLoc{};
      if (list.empty()) {
        acc[u][v] = in;
        if (v == unit.owner) {  // nothing to reduce with (one rank): the output is the input
          Op copy = copyOp(v, Key{kPhaseReduce, -kInf, -1, (*unique)++});
          copy.src = {in};
          copy.dst = {total};
          copy.deps = {{}};
          final_op[u][v] = addOp(std::move(copy));
          acc[u][v] = total;
        }
        continue;
      }
      const SLoc sum = v == unit.owner ? total : scratchLoc(newScratch(v));
      int prev = -1;
      for (const auto& [op, i] : list) {
        ops_[op].src[i] = prev < 0 ? in : sum;
        ops_[op].dst[i] = sum;
        if (prev >= 0) ops_[op].deps[i] = {prev};
        prev = op;
      }
      final_op[u][v] = prev;
      acc[u][v] = sum;
    }
  }
  for (int m = 0; m < static_cast<int>(msgs_.size()); ++m) {
    const Message& msg = msgs_[m];
    if (msg.phase != kPhaseReduce) continue;
    Op op = messageOp(msg, m, OpType::kSend, /*at_receiver=*/false);
    for (int u : msg.units) {
      op.src.push_back(acc[u][msg.from]);
      op.deps.push_back(final_op[u][msg.from] >= 0 ? std::vector<int>{final_op[u][msg.from]} : std::vector<int>{});
    }
    addOp(std::move(op));
  }
  // All-reduce: the gather phase starts from the owner's finished reduction.
  if (has_forward_) {
    for (int u = 0; u < num_units; ++u) {
      if (units_[u].phase != kPhaseGather) continue;
      auto it = reduce_unit_of.find(units_[u].owner * c_ + units_[u].piece);
      if (it == reduce_unit_of.end()) {
        return internalError(
            fmt::format("lowering allreduce: the all-gather chunk of owner {} piece {} has no "
                        "reduce-scatter counterpart",
                        units_[u].owner, units_[u].piece));
      }
      (*ready)[u][units_[u].owner] = final_op[it->second][units_[u].owner];
      data_[u] = it->second;
    }
  }
  return Status::ok();
}

void Emitter::buildGatherOps(std::vector<std::vector<int>>* ready, int* unique) {
  const int num_units = static_cast<int>(units_.size());
  const CollectiveKind kind = req_.collective;
  const bool a2a = kind == CollectiveKind::kAllToAll;
  std::vector<std::map<int, int>> relay_slot(n_);  // all-to-all relays: unit -> symbolic scratch
  auto locAt = [&](int u, int r) {
    const Unit& unit = units_[u];
    if (!a2a) return outputLoc(unit.out_idx);
    if (r == unit.owner) return inputLoc(unit.in_idx);
    if (r == unit.dest) return outputLoc(unit.out_idx);
    auto it = relay_slot[r].find(u);
    if (it == relay_slot[r].end()) it = relay_slot[r].emplace(u, newScratch(r)).first;
    return scratchLoc(it->second);
  };
  if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kBroadcast) {
    // The owner's own data moves into its output first; its sends read it there (one program for both modes:
    // in place the copy is the identity and its sends are ordered after it).
    std::vector<std::vector<int>> owned(n_);
    for (int u = 0; u < num_units; ++u) {
      if (units_[u].phase == kPhaseGather) owned[units_[u].owner].push_back(u);
    }
    for (int r = 0; r < n_; ++r) {
      if (owned[r].empty()) continue;
      std::sort(owned[r].begin(), owned[r].end(), [&](int a, int b) { return units_[a].piece < units_[b].piece; });
      Op copy = copyOp(r, Key{kPhaseGather, -kInf, -1, (*unique)++});
      for (int u : owned[r]) {
        copy.src.push_back(inputLoc(units_[u].in_idx));
        copy.dst.push_back(outputLoc(units_[u].out_idx));
        copy.deps.emplace_back();
      }
      const int id = addOp(std::move(copy));
      for (int u : owned[r]) (*ready)[u][r] = id;
    }
  }
  if (a2a) {  // the self block: input s*c.. -> output s*c..
    for (int r = 0; r < n_; ++r) {
      Op copy = copyOp(r, Key{kPhaseGather, kInf, 2, (*unique)++});
      for (int j = 0; j < c_; ++j) {
        copy.src.push_back(inputLoc(r * c_ + j));
        copy.dst.push_back(outputLoc(r * c_ + j));
        copy.deps.emplace_back();
      }
      addOp(std::move(copy));
    }
  }
  // Receives in key order per rank so that relay scratch follows arrival order.
  std::vector<int> gather_msgs;
  for (int m = 0; m < static_cast<int>(msgs_.size()); ++m) {
    if (msgs_[m].phase == kPhaseGather) gather_msgs.push_back(m);
  }
  std::sort(gather_msgs.begin(), gather_msgs.end(),
            [&](int a, int b) { return std::tie(msgs_[a].end, a) < std::tie(msgs_[b].end, b); });
  for (int m : gather_msgs) {
    const Message& msg = msgs_[m];
    Op op = messageOp(msg, m, OpType::kRecv, /*at_receiver=*/true);
    for (int u : msg.units) {
      op.dst.push_back(locAt(u, msg.to));
      op.deps.emplace_back();
    }
    const int id = addOp(std::move(op));
    for (int u : msg.units) (*ready)[u][msg.to] = id;
  }
  for (int m : gather_msgs) {
    const Message& msg = msgs_[m];
    Op op = messageOp(msg, m, OpType::kSend, /*at_receiver=*/false);
    for (int u : msg.units) {
      op.src.push_back(locAt(u, msg.from));
      op.deps.push_back((*ready)[u][msg.from] >= 0 ? std::vector<int>{(*ready)[u][msg.from]} : std::vector<int>{});
    }
    addOp(std::move(op));
  }
}

}  // namespace braid::synth::emit
