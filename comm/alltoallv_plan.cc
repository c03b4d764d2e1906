#include "comm/alltoallv_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace braid::comm {
namespace {

// A plan for one rank of an all-to-all-v, built a threadblock at a time.
class RankPlanBuilder {
 public:
  RankPlanBuilder(const AllToAllvCall& call, const char* name) {
    plan_.algorithm = name;
    plan_.collective = CollectiveKind::kAllToAll;
    plan_.num_ranks = call.num_ranks;
    plan_.size_bytes = call.input_bytes;
    plan_.element_bytes = call.element_bytes;
    plan_.slice_bytes = defaultSliceBytes(Protocol::kSimple) / call.element_bytes * call.element_bytes;
    plan_.ranks.resize(call.num_ranks);
    for (int r = 0; r < call.num_ranks; ++r) plan_.ranks[r].rank = r;
    mine_ = &plan_.ranks[call.rank];
    mine_->input_bytes = call.input_bytes;
    mine_->output_bytes = call.output_bytes;
  }

  uint64_t slice() const { return plan::executedSliceBytes(plan_); }

  int newTb(int send_peer, int recv_peer) {
    PlanThreadblock tb;
    tb.id = static_cast<int>(mine_->threadblocks.size());
    tb.send_peer = send_peer;
    tb.recv_peer = recv_peer;
    mine_->threadblocks.push_back(std::move(tb));
    return mine_->threadblocks.back().id;
  }

  // Appends a step to threadblock `tb`; returns it as a dependency target.
  Dependency add(int tb, OpType type, BufferRef src, BufferRef dst, uint64_t bytes, std::vector<Dependency> deps = {}) {
    PlanStep step;
    step.type = type;
    step.src = src;
    step.dst = dst;
    step.bytes = bytes;
    step.deps = std::move(deps);
    auto& steps = mine_->threadblocks[tb].steps;
    steps.push_back(std::move(step));
    return Dependency{tb, static_cast<int>(steps.size()) - 1};
  }

  // `bytes` of scratch, placed after what was allocated before.
  uint64_t allocate(uint64_t bytes) {
    const uint64_t at = mine_->scratch_bytes;
    mine_->scratch_bytes += bytes;
    return at;
  }

  Result<Plan> finish(int rank) {
    // Built by hand: checked like any plan (this rank's part; the peers check theirs).
    BRAID_RETURN_IF_ERROR(validatePlan(plan_, {rank}));
    return std::move(plan_);
  }

 private:
  Plan plan_;
  RankPlan* mine_ = nullptr;
};

// The blocks of one message, in order: where each lies (in the buffer the message is sent from or received into)
// and its size.
struct Blocks {
  BufferKind buffer = BufferKind::kScratch;
  std::vector<uint64_t> offset;
  std::vector<uint64_t> bytes;
};

// Blocks `bytes` laid back to back from `base` in `buffer`.
Blocks packedBlocks(BufferKind buffer, uint64_t base, const std::vector<uint64_t>& bytes) {
  Blocks b;
  b.buffer = buffer;
  b.bytes = bytes;
  for (uint64_t size : bytes) {
    b.offset.push_back(base);
    base += size;
  }
  return b;
}

// Whether the non-empty blocks at `offset` lie back to back in order (empty blocks may be anywhere).
bool backToBack(const std::vector<uint64_t>& offset, const std::vector<uint64_t>& bytes) {
  bool first = true;
  uint64_t end = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == 0) continue;
    if (!first && offset[i] != end) return false;
    first = false;
    end = offset[i] + bytes[i];
  }
  return true;
}

// The blocks at `offset` (back to back) as one packed run: empty blocks get the position they take in the run.
Blocks asRun(BufferKind buffer, const std::vector<uint64_t>& offset, const std::vector<uint64_t>& bytes) {
  uint64_t base = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != 0) {
      base = offset[i];
      break;
    }
  }
  return packedBlocks(buffer, base, bytes);
}

// Groups of consecutive blocks [first, last) that one message step carries: whole blocks that fit in one slice
// together, or one block larger than a slice alone. Empty groups are dropped, except that a message of empty blocks
// is one empty group (one zero-byte message).
std::vector<std::pair<size_t, size_t>> messageGroups(const std::vector<uint64_t>& bytes, uint64_t slice) {
  std::vector<std::pair<size_t, size_t>> groups;
  size_t first = 0;
  uint64_t total = 0;
  auto close = [&](size_t end) {
    if (end > first && total > 0) groups.emplace_back(first, end);
    first = end;
    total = 0;
  };
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (slice != 0 && bytes[i] > slice) {
      close(i);
      total = bytes[i];
      close(i + 1);
    } else if (slice != 0 && total + bytes[i] > slice) {
      close(i);
      total = bytes[i];
    } else {
      total += bytes[i];
    }
  }
  close(bytes.size());
  if (groups.empty()) groups.emplace_back(0, bytes.size());
  return groups;
}

// The range of `blocks` that the message of group [first, last) carries (offset 0 when it is empty).
BufferRef groupRange(const Blocks& blocks, size_t first, size_t last) {
  uint64_t bytes = 0;
  for (size_t i = first; i < last; ++i) bytes += blocks.bytes[i];
  const uint64_t at = first < blocks.offset.size() ? blocks.offset[first] : 0;
  return BufferRef{blocks.buffer, bytes == 0 ? 0 : at, bytes};
}

// Sends the blocks as message steps on threadblock `tb`.
void sendBlocks(RankPlanBuilder& b, int tb, const Blocks& blocks) {
  for (auto [first, last] : messageGroups(blocks.bytes, b.slice())) {
    const BufferRef src = groupRange(blocks, first, last);
    b.add(tb, OpType::kSend, src, BufferRef{}, src.bytes);
  }
}

// Receives the blocks as message steps on threadblock `tb`; returns, per block, the step that received it.
std::vector<Dependency> recvBlocks(RankPlanBuilder& b, int tb, const Blocks& blocks) {
  std::vector<Dependency> step_of(blocks.bytes.size());
  for (auto [first, last] : messageGroups(blocks.bytes, b.slice())) {
    const BufferRef dst = groupRange(blocks, first, last);
    const Dependency step = b.add(tb, OpType::kRecv, BufferRef{}, dst, dst.bytes);
    for (size_t i = first; i < last; ++i) step_of[i] = step;
  }
  return step_of;
}

// A local copy of `bytes` (none when empty).
void copyBlock(RankPlanBuilder& b, int tb, BufferRef src, BufferRef dst, uint64_t bytes,
               std::vector<Dependency> deps = {}) {
  if (bytes == 0) return;
  src.bytes = dst.bytes = bytes;
  b.add(tb, OpType::kCopy, src, dst, bytes, std::move(deps));
}

// Blocks `bytes` packed back to back in scratch allocated for their total.
Blocks scratchBlocks(RankPlanBuilder& b, const std::vector<uint64_t>& bytes) {
  uint64_t total = 0;
  for (uint64_t x : bytes) total += x;
  return packedBlocks(BufferKind::kScratch, b.allocate(total), bytes);
}

// Sends the input blocks at `offset` (sizes `bytes`) on `tb` as one message: straight from the input when they lie
// back to back, else gathered into scratch first.
void sendInputBlocks(RankPlanBuilder& b, int tb, const std::vector<uint64_t>& offset,
                     const std::vector<uint64_t>& bytes) {
  if (backToBack(offset, bytes)) {
    sendBlocks(b, tb, asRun(BufferKind::kInput, offset, bytes));
    return;
  }
  const Blocks packed = scratchBlocks(b, bytes);
  for (size_t i = 0; i < bytes.size(); ++i) {
    copyBlock(b, tb, BufferRef{BufferKind::kInput, offset[i], 0}, BufferRef{BufferKind::kScratch, packed.offset[i], 0},
              bytes[i]);
  }
  sendBlocks(b, tb, packed);
}

// Receives one message on `tb` into the output blocks at `offset` (sizes `bytes`): straight into the output when
// they lie back to back, else staged in scratch and scattered from there.
void recvOutputBlocks(RankPlanBuilder& b, int tb, const std::vector<uint64_t>& offset,
                      const std::vector<uint64_t>& bytes) {
  if (backToBack(offset, bytes)) {
    recvBlocks(b, tb, asRun(BufferKind::kOutput, offset, bytes));
    return;
  }
  const Blocks staged = scratchBlocks(b, bytes);
  recvBlocks(b, tb, staged);
  for (size_t i = 0; i < bytes.size(); ++i) {
    copyBlock(b, tb, BufferRef{BufferKind::kScratch, staged.offset[i], 0}, BufferRef{BufferKind::kOutput, offset[i], 0},
              bytes[i]);
  }
}

}  // namespace

Result<Plan> flatAllToAllvPlan(const AllToAllvCall& call) {
  RankPlanBuilder b(call, "alltoallv-direct");
  const int n = call.num_ranks;
  const int r = call.rank;
  const int local = b.newTb(-1, -1);
  const uint64_t self = call.send_bytes[r];
  b.add(local, OpType::kCopy, BufferRef{BufferKind::kInput, call.send_offset[r], self},
        BufferRef{BufferKind::kOutput, call.recv_offset[r], self}, self);
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n;
    const int from = (r - k + n) % n;
    b.add(b.newTb(to, -1), OpType::kSend, BufferRef{BufferKind::kInput, call.send_offset[to], call.send_bytes[to]},
          BufferRef{}, call.send_bytes[to]);
    b.add(b.newTb(-1, from), OpType::kRecv, BufferRef{},
          BufferRef{BufferKind::kOutput, call.recv_offset[from], call.recv_bytes[from]}, call.recv_bytes[from]);
  }
  return b.finish(r);
}

Result<Plan> twoDimAllToAllvPlan(const AllToAllvCall& call, int nodes, int ranks_per_node,
                                 const std::vector<uint64_t>& from_node_peers) {
  const int m = nodes;
  const int g = ranks_per_node;
  const int r = call.rank;
  if (m < 2 || g < 2 || m * g != call.num_ranks || static_cast<int>(from_node_peers.size()) != m * g) {
    return internalError(fmt::format("alltoallv 2dh: {} node(s) x {} rank(s) for {} ranks, {} node-peer counts", m, g,
                                     call.num_ranks, from_node_peers.size()));
  }
  const int q = r / g;
  const int j = r % g;
  auto rankOf = [g](int node, int local) { return node * g + local; };
  RankPlanBuilder b(call, "alltoallv-2dh");
  const uint64_t self = call.send_bytes[r];
  if (self > 0) {
    copyBlock(b, b.newTb(-1, -1), BufferRef{BufferKind::kInput, call.send_offset[r], 0},
              BufferRef{BufferKind::kOutput, call.recv_offset[r], 0}, self);
  }
  // Phases 0 and 1: per node peer (q, jj), the blocks for (0..m-1, jj) go out and those of (q, jj) for (0..m-1, j)
  // come in; arrived[jj] says where each arrived block lies and which step received it.
  std::vector<Blocks> arrived(g);
  std::vector<std::vector<Dependency>> arrival_step(g);
  for (int jj = 0; jj < g; ++jj) {
    if (jj == j) continue;
    const int peer = rankOf(q, jj);
    std::vector<uint64_t> out_offset(m), out_bytes(m), in_bytes(m);
    for (int qq = 0; qq < m; ++qq) {
      out_offset[qq] = call.send_offset[rankOf(qq, jj)];
      out_bytes[qq] = call.send_bytes[rankOf(qq, jj)];
      in_bytes[qq] = from_node_peers[jj * m + qq];
    }
    sendInputBlocks(b, b.newTb(peer, -1), out_offset, out_bytes);
    const int recv_tb = b.newTb(-1, peer);
    arrived[jj] = scratchBlocks(b, in_bytes);
    arrival_step[jj] = recvBlocks(b, recv_tb, arrived[jj]);
    if (in_bytes[q] != call.recv_bytes[peer]) {
      return invalidArgument(
          fmt::format("alltoallv on rank {}: rank {} sends {} bytes to rank {}, rank {} expects {} "
                      "bytes from rank {}",
                      r, peer, in_bytes[q], r, r, call.recv_bytes[peer], peer));
    }
    copyBlock(b, recv_tb, BufferRef{BufferKind::kScratch, arrived[jj].offset[q], 0},
              BufferRef{BufferKind::kOutput, call.recv_offset[peer], 0}, in_bytes[q]);
  }
  // Phases 2 and 3: per node qq != q, the blocks of (q, 0..g-1) for (qq, j) go to (qq, j) as one message, and
  // the blocks of (qq, 0..g-1) for this rank come from it.
  for (int qq = 0; qq < m; ++qq) {
    if (qq == q) continue;
    const int peer = rankOf(qq, j);
    std::vector<uint64_t> out_bytes(g), in_offset(g), in_bytes(g);
    for (int jj = 0; jj < g; ++jj) {
      out_bytes[jj] = jj == j ? call.send_bytes[peer] : from_node_peers[jj * m + qq];
      in_offset[jj] = call.recv_offset[rankOf(qq, jj)];
      in_bytes[jj] = call.recv_bytes[rankOf(qq, jj)];
    }
    const int send_tb = b.newTb(peer, -1);
    const Blocks packed = scratchBlocks(b, out_bytes);
    for (int jj = 0; jj < g; ++jj) {
      const BufferRef dst{BufferKind::kScratch, packed.offset[jj], 0};
      if (jj == j) {
        copyBlock(b, send_tb, BufferRef{BufferKind::kInput, call.send_offset[peer], 0}, dst, out_bytes[jj]);
      } else {
        copyBlock(b, send_tb, BufferRef{BufferKind::kScratch, arrived[jj].offset[qq], 0}, dst, out_bytes[jj],
                  {arrival_step[jj][qq]});
      }
    }
    sendBlocks(b, send_tb, packed);
    recvOutputBlocks(b, b.newTb(-1, peer), in_offset, in_bytes);
  }
  return b.finish(r);
}

}  // namespace braid::comm
