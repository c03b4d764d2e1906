// The chunk problem: which units of data exist, who owns them, who must receive them, and how the symmetry
// group permutes them (taccl_msccl.md §1.4: input_chunkup, symmetry_offsets).
#include <map>
#include <tuple>
#include <vector>

#include "synthesizer/model.h"

namespace braid::synth {

int ChunkProblem::numRepresentatives() const {
  int count = 0;
  for (size_t c = 0; c < orbit.size(); ++c) count += orbit[c].first == static_cast<int>(c) ? 1 : 0;
  return count;
}

ChunkProblem makeChunkProblem(CollectiveKind pattern, const LogicalTopology& logical, int chunkup, int root,
                              uint64_t size_bytes) {
  ChunkProblem p;
  p.kind = pattern;
  p.num_ranks = logical.num_ranks;
  p.chunkup = chunkup;
  p.root = root;
  const int n = p.num_ranks;
  const double size = static_cast<double>(size_bytes);
  std::map<std::tuple<int, int, int>, int> id_of;  // (owner, dest, piece) -> id
  auto add = [&](int owner, int dest, int piece, std::vector<int> targets) {
    Chunk c;
    c.id = static_cast<int>(p.chunks.size());
    c.owner = owner;
    c.piece = piece;
    c.dest = dest;
    c.targets = std::move(targets);
    id_of[{owner, dest, piece}] = c.id;
    p.chunks.push_back(std::move(c));
  };
  auto everyoneBut = [n](int r) {
    std::vector<int> v;
    for (int x = 0; x < n; ++x) {
      if (x != r) v.push_back(x);
    }
    return v;
  };
  switch (pattern) {
    case CollectiveKind::kAllToAll:
      p.chunk_bytes = size / (static_cast<double>(n) * chunkup);
      for (int s = 0; s < n; ++s) {
        for (int d = 0; d < n; ++d) {
          if (s == d) continue;
          for (int j = 0; j < chunkup; ++j) add(s, d, j, {d});
        }
      }
      break;
    case CollectiveKind::kBroadcast:
      p.chunk_bytes = size / chunkup;
      for (int j = 0; j < chunkup; ++j) add(root, -1, j, everyoneBut(root));
      break;
    default:  // all-gather movement (all-gather, reduce-scatter, all-reduce)
      p.kind = CollectiveKind::kAllGather;
      p.chunk_bytes = size / (static_cast<double>(n) * chunkup);
      for (int o = 0; o < n; ++o) {
        for (int j = 0; j < chunkup; ++j) add(o, -1, j, everyoneBut(o));
      }
      break;
  }
  const int num_chunks = static_cast<int>(p.chunks.size());
  p.image.assign(logical.symmetry.size(), std::vector<int>(num_chunks, -1));
  for (size_t g = 0; g < logical.symmetry.size(); ++g) {
    const std::vector<int>& perm = logical.symmetry[g];
    if (p.kind == CollectiveKind::kBroadcast && perm[root] != root) continue;
    for (const Chunk& c : p.chunks) {
      auto it = id_of.find({perm[c.owner], c.dest < 0 ? -1 : perm[c.dest], c.piece});
      p.image[g][c.id] = it == id_of.end() ? -1 : it->second;
    }
  }
  p.orbit.assign(num_chunks, {-1, -1});
  for (int c = 0; c < num_chunks; ++c) {
    if (p.orbit[c].first >= 0) continue;
    p.orbit[c] = {c, 0};
    for (size_t g = 1; g < p.image.size(); ++g) {
      const int img = p.image[g][c];
      if (img >= 0 && p.orbit[img].first < 0) p.orbit[img] = {c, static_cast<int>(g)};
    }
  }
  return p;
}

}  // namespace braid::synth
