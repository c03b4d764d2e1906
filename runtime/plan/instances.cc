// Lowering pass 4: threadblocks, steps and instances.
//
// MSCCL instances (msccl-tools `instances`, ../shared/reference/taccl_msccl.md §2.3) run `instances` copies
// of every threadblock side by side, each on its own channels (channel c of copy i -> c + i * nchannels)
// and each on its own part of the data. Braid splits every chunk of E elements into `instances` parts,
// part i = [floor(i*E/I), floor((i+1)*E/I)) elements, and copy i works on part i of every chunk it touches.
// Because a chunk is split the same way wherever it lies (sizes agree along every move, chunks.cc), copy i
// only ever reads what copy i wrote, so the copies need no dependencies on each other and each copy keeps
// the algorithm's own dependencies. Part i of a range of several chunks is not contiguous, so with
// instances > 1 a step over `count` > 1 chunks becomes `count` steps of one chunk each, in order (both ends
// of a connection split the same way, since matching steps have equal counts); a dependency on a step
// becomes a dependency on the last of its pieces in the same copy.
//
// Slices and chunks. The executor runs a threadblock the way MSCCL's kernel does (Azure/msccl-executor-nccl
// msccl_kernel.cu; ../shared/reference/taccl_msccl.md §3.2): an outer loop over slice iterations and an
// inner loop over steps, iteration j of a step moving slice j of every chunk it covers. A plan step is
// therefore either one chunk (or one instance's part of it), cut into slices from the chunk's start, or a
// group of whole chunks that together fit in one slice (one message, as MSCCL moves a step's chunks
// together). Without instances a step over several chunks becomes consecutive groups, greedily as many
// chunks as fit in slice_bytes (a chunk larger than a slice is a group of its own); both ends of a
// connection group the same way, since the chunks they name have equal sizes (chunks.cc).
#include <vector>

#include "plan/lower_internal.h"

namespace braid::plan {

namespace {

// A piece of an IR step: chunks [first, first + count) of its ranges, relative to its offsets.
struct Piece {
  int first = 0;
  int count = 1;
};

// Calls fn(piece) for each plan step IR step `step` of `rank` becomes, in order.
template <typename Fn>
void forEachPiece(const Geometry& geometry, int rank, const Step& step, int instances, uint64_t element_bytes,
                  uint64_t slice_bytes, Fn&& fn) {
  if (step.type == OpType::kNop || step.count <= 1) {
    fn(Piece{0, step.type == OpType::kNop ? 0 : step.count});
    return;
  }
  if (instances > 1) {
    for (int c = 0; c < step.count; ++c) fn(Piece{c, 1});
    return;
  }
  const bool src = opReadsSrc(step.type);
  const BufferKind buffer = src ? step.src_buf : step.dst_buf;
  const int offset = src ? step.src_off : step.dst_off;
  int first = 0;
  uint64_t bytes = 0;
  for (int c = 0; c < step.count; ++c) {
    const uint64_t chunk = geometry.size(rank, buffer, offset + c) * element_bytes;
    if (c > first && (slice_bytes == 0 ? false : bytes + chunk > slice_bytes)) {
      fn(Piece{first, c - first});
      first = c;
      bytes = 0;
    }
    bytes += chunk;
  }
  fn(Piece{first, step.count - first});
}

}  // namespace

void buildThreadblocks(const Algorithm& algorithm, const Geometry& geometry, int instances, uint64_t element_bytes,
                       uint64_t slice_bytes, std::vector<RankPlan>& ranks) {
  for (size_t r = 0; r < algorithm.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    const RankProgram& program = algorithm.ranks[r];
    const int num_tbs = static_cast<int>(program.threadblocks.size());
    // piece_base[t][s]: index of the first plan step of IR step s of threadblock t.
    std::vector<std::vector<int>> piece_base(num_tbs);
    for (int t = 0; t < num_tbs; ++t) {
      const std::vector<Step>& steps = program.threadblocks[t].steps;
      piece_base[t].assign(steps.size() + 1, 0);
      for (size_t s = 0; s < steps.size(); ++s) {
        int pieces = 0;
        forEachPiece(geometry, rank, steps[s], instances, element_bytes, slice_bytes, [&](Piece) { ++pieces; });
        piece_base[t][s + 1] = piece_base[t][s] + pieces;
      }
    }
    RankPlan& rank_plan = ranks[r];
    rank_plan.threadblocks.resize(static_cast<size_t>(instances) * num_tbs);
    for (int i = 0; i < instances; ++i) {
      for (int t = 0; t < num_tbs; ++t) {
        const Threadblock& tb = program.threadblocks[t];
        PlanThreadblock& plan_tb = rank_plan.threadblocks[static_cast<size_t>(i) * num_tbs + t];
        plan_tb.id = i * num_tbs + t;
        plan_tb.send_peer = tb.send_peer;
        plan_tb.recv_peer = tb.recv_peer;
        plan_tb.channel = tb.channel + i * algorithm.num_channels;
        plan_tb.steps.reserve(piece_base[t].back());
        for (const Step& step : tb.steps) {
          bool first_piece = true;
          forEachPiece(geometry, rank, step, instances, element_bytes, slice_bytes, [&](Piece piece) {
            PlanStep& plan_step = plan_tb.steps.emplace_back();
            plan_step.type = step.type;
            if (opReadsSrc(step.type)) {
              plan_step.src =
                  resolve(geometry, rank,
                          geometry.range(rank, step.src_buf, step.src_off + piece.first, piece.count, i, instances),
                          element_bytes);
              plan_step.bytes = plan_step.src.bytes;
            }
            if (opWritesDst(step.type)) {
              plan_step.dst =
                  resolve(geometry, rank,
                          geometry.range(rank, step.dst_buf, step.dst_off + piece.first, piece.count, i, instances),
                          element_bytes);
              plan_step.bytes = plan_step.dst.bytes;
            }
            if (step.type == OpType::kCopy && sameRange(plan_step.src, plan_step.dst)) {
              // An in-place alias of itself: nothing to move, but later steps may still wait on it.
              plan_step = PlanStep{};
            }
            if (first_piece) {
              plan_step.deps.reserve(step.deps.size());
              for (const Dependency& dep : step.deps) {
                plan_step.deps.push_back(Dependency{i * num_tbs + dep.tb, piece_base[dep.tb][dep.step + 1] - 1});
              }
              first_piece = false;
            }
          });
        }
      }
    }
    layoutStaging(rank_plan, slice_bytes);
  }
}

}  // namespace braid::plan
