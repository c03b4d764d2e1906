// Two-dimensional hierarchical all-to-all, "2DH" (Hwang et al., "Tutel: Adaptive Mixture-of-Experts at Scale",
// MLSys'23, §5; microsoft/tutel tutel/custom/custom_kernel.cpp nccl_all_to_all_2d_async, and the same algorithm as
// msccl2DAllToAll in microsoft/msccl). m nodes of g ranks, rank r = q*g + j (node q, local index j), c = one chunk
// (the data one rank sends one peer). Each rank runs four phases:
//   0. stride copy: the m chunks bound for local index j' (ranks (q', j'), q' = 0..m-1) become one contiguous
//      block of m chunks in scratch;
//   1. intra-node all-to-all: block j' goes to the node peer (q, j') as one message of m chunks, and the block of
//      every node peer arrives the same way (m chunks from each);
//   2. stride copy: of the g blocks now held (the own input included), the g chunks bound for rank (q', j) — one
//      from every local index — become one contiguous block of g chunks;
//   3. inter-node all-to-all among the ranks of local index j: block q' goes to (q', j) as one message of g chunks,
//      landing in the output exactly where the g chunks of node q' belong (output chunk q'*g + j'' came from rank
//      (q', j'')).
// Chunks for the own node leave phase 1 straight for the output. A rank sends g-1 intra-node messages of m chunks
// and m-1 inter-node messages of g chunks, instead of the flat exchange's p-1 messages of one chunk (p-g of them
// inter-node).
//
// Cost in the α-β model (N = p·c bytes per rank, i = intra-node links, e = inter-node; B_mem local copy bandwidth;
// ../shared/reference/anchors_algorithms.md §5):
//   T ≈ 2·N/B_mem + (g−1)·α_i + ((g−1)/g)·N·β_i + (m−1)·α_e + ((m−1)/m)·N·β_e
// against the flat exchange's (p−1)·α + ((p−1)/p)·N·β with p−g inter-node messages of N/p bytes: 2DH wins when the
// inter-node message count (α_e and per-message NIC costs) dominates, i.e. for small chunks at scale, and pays the
// two copies when bandwidth dominates.
//
// Program (one channel; scratch [0, p) holds the phase-0 blocks, indexed j'*m + q', and after phase 1 the
// phase-2 blocks, indexed q'*g + j''; scratch [p, 2p) receives phase 1, indexed p + j'*m + q'):
//   - a local threadblock copies the own chunk and, once every phase-1 threadblock finished (a barrier), lets the
//     phase-3 threadblocks start;
//   - one threadblock per node peer: m stride copies, send m chunks, receive m chunks, copy the own node's chunk to
//     the output;
//   - one threadblock per node of the same local index: g stride copies (the first waits for the barrier), send g
//     chunks, receive g chunks into the output.
// One node (m = 1): phase 1 alone, straight from input to output (the direct exchange inside the node). One rank
// per node (g = 1): phase 3 alone, straight from input to output (the direct exchange across nodes). Out of place
// the program is also correct in place (every input chunk is read before its aliased output chunk is written).
#include <fmt/format.h>

#include "braid/classic_blocks.h"

namespace braid::algos {

Status buildAllToAll2dh(ProgramBuilder& b, const NodeGrid& grid) {
  const int m = grid.nodes;
  const int g = grid.gpus_per_node;
  const int n = b.numRanks();
  if (m < 1 || g < 1 || m * g != n) {
    return internalError(fmt::format("2dh: a grid of {} node(s) x {} rank(s) for {} ranks", m, g, n));
  }
  auto rankOf = [&](int q, int j) { return q * g + j; };
  auto packed = [](int idx) { return ProgramBuilder::scratch(idx); };         // phase 0 and phase 2 blocks
  auto received = [n](int idx) { return ProgramBuilder::scratch(n + idx); };  // phase 1 arrivals
  for (int r = 0; r < n; ++r) {
    const int q = r / g;
    const int j = r % g;
    const int local = b.newTb(r, -1, -1, 0);
    if (!b.same(b.in(r, r), b.out(r, r))) b.copy(r, local, b.in(r, r), b.out(r, r), 1);
    // Phases 0 and 1, one threadblock per node peer (q, jj).
    std::vector<StepRef> phase1;
    for (int jj = 0; jj < g; ++jj) {
      if (jj == j) continue;
      const int peer = rankOf(q, jj);
      const int tb = b.newTb(r, peer, peer, 0);
      if (m == 1) {
        b.send(r, tb, b.in(r, peer), 1);
        b.recv(r, tb, b.out(r, peer), 1);
      } else {
        for (int qq = 0; qq < m; ++qq) b.copy(r, tb, b.in(r, rankOf(qq, jj)), packed(jj * m + qq), 1);
        b.send(r, tb, packed(jj * m), m);
        b.recv(r, tb, received(jj * m), m);
        b.copy(r, tb, received(jj * m + q), b.out(r, peer), 1);
      }
      phase1.push_back(b.last(r, tb));
    }
    if (m == 1) continue;
    // Phases 2 and 3 wait until phase 1 is over: its blocks are read, and its send blocks' scratch is reused.
    const StepRef phase1_done = phase1.empty() ? StepRef{} : b.barrier(r, local, phase1);
    for (int qq = 0; qq < m; ++qq) {
      if (qq == q) continue;
      const int peer = rankOf(qq, j);
      const int tb = b.newTb(r, peer, peer, 0);
      if (g == 1) {
        b.send(r, tb, b.in(r, peer), 1);
      } else {
        for (int jj = 0; jj < g; ++jj) {
          const Loc src = jj == j ? b.in(r, peer) : received(jj * m + qq);
          b.copy(r, tb, src, packed(qq * g + jj), 1,
                 jj == 0 ? std::vector<StepRef>{phase1_done} : std::vector<StepRef>{});
        }
        b.send(r, tb, packed(qq * g), g);
      }
      b.recv(r, tb, b.out(r, rankOf(qq, 0)), g);
    }
  }
  return Status::ok();
}

}  // namespace braid::algos
