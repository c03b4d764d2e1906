// buildClassic: checks the request, picks rings/trees/grids, runs the algorithm's builder and fills
// every Algorithm field. How each algorithm works and what it costs: docs/algorithms.md.
#include "braid/classic.h"

#include <fmt/format.h>

#include <algorithm>

#include "braid/classic_blocks.h"

namespace braid {
namespace {

using algos::ProgramBuilder;
using algos::RingOrder;

constexpr int kDefaultMaxRings = 16;

std::string collectivesText(ClassicAlgo algo) {
  std::string text;
  for (CollectiveKind k : classicCollectives(algo)) text += (text.empty() ? "" : ", ") + std::string(collectiveName(k));
  return text;
}

RingOrder rankOrder(int n, bool reversed) {
  RingOrder ring(n);
  for (int i = 0; i < n; ++i) ring[i] = reversed ? (n - i) % n : i;
  return ring;
}

// Collectives whose out-of-place program is also correct in place: the program only reads inputs, and
// writes nothing but outputs that no input aliases before it is read (reduce-scatter, all-reduce, reduce).
bool outOfPlaceServesInPlace(CollectiveKind kind) {
  return kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllReduce ||
         kind == CollectiveKind::kReduce;
}

// What the dispatcher decided before building: base chunk factor, modes, the build step.
struct Plan {
  int base_factor = 1;
  bool both_modes = false;  // the out-of-place program is also correct for in-place calls
  std::vector<RingOrder> rings;
  algos::NodeGrid grid;
  int channels = 1;
  std::vector<std::string> notes;
};

// The node grid of 2dh: the topology's nodes, ClassicRequest::ranks_per_node, or both when they agree.
Result<algos::NodeGrid> twoDimGrid(const ClassicRequest& request) {
  const int n = request.spec.num_ranks;
  const int g = request.ranks_per_node;
  if (g < 0) return invalidArgument(fmt::format("2dh: ranks per node must be at least 1, got {}", g));
  if (request.topology == nullptr) {
    if (g == 0) {
      return invalidArgument(
          fmt::format("algorithm '2dh' needs a node shape: a topology with nodes (--topology) or the ranks per node "
                      "(--ranks-per-node) of the {} ranks",
                      n));
    }
    return algos::explicitGrid(n, g);
  }
  BRAID_ASSIGN_OR_RETURN(algos::NodeGrid grid, algos::nodeGrid(*request.topology, n, nullptr));
  if (g != 0 && g != grid.gpus_per_node) {
    return invalidArgument(fmt::format("2dh: {} ranks per node contradicts topology '{}', whose nodes hold {} GPUs", g,
                                       request.topology->name, grid.gpus_per_node));
  }
  grid.local_ring.clear();
  return grid;
}

// The checks of the request and the plan (rings, grid, chunk factor) that buildClassic builds from.
struct Planned {
  Plan plan;
  CollectiveSpec spec;  // the request's, chunk_factor chosen
  int scale = 1;        // chunk_factor / plan.base_factor
};

Result<Planned> planClassic(const ClassicRequest& request) {
  const ClassicAlgo algo = request.algo;
  CollectiveSpec spec = request.spec;
  const CollectiveKind kind = spec.kind;
  const int n = spec.num_ranks;
  {
    CollectiveSpec check = spec;
    if (check.chunk_factor == 0) check.chunk_factor = 1;
    BRAID_RETURN_IF_ERROR(validateSpec(check));
  }
  const auto applies = classicCollectives(algo);
  if (std::find(applies.begin(), applies.end(), kind) == applies.end()) {
    return invalidArgument(fmt::format("algorithm '{}' does not apply to {}: it builds {}", classicAlgoName(algo),
                                       collectiveName(kind), collectivesText(algo)));
  }
  if (request.num_channels < 0 || request.num_channels > kMaxAlgorithmChannels) {
    return invalidArgument(fmt::format("channels must be between 1 and {} (0 = the algorithm's choice), got {}",
                                       kMaxAlgorithmChannels, request.num_channels));
  }
  const Topology* topo = request.topology;
  if (topo != nullptr && topo->numGpus() != n) {
    return invalidArgument(
        fmt::format("topology '{}' has {} GPUs but the collective has {} ranks", topo->name, topo->numGpus(), n));
  }
  const int requested = request.num_channels;
  auto singleChannelOnly = [&]() -> Status {
    if (requested > 1) {
      return invalidArgument(
          fmt::format("algorithm '{}' runs on one channel; --channels {} applies to ring, "
                      "multiring, direct and tree",
                      classicAlgoName(algo), requested));
    }
    return Status::ok();
  };

  Plan plan;
  switch (algo) {
    case ClassicAlgo::kRing:
    case ClassicAlgo::kMultiRing: {
      std::vector<RingOrder> found;
      if (topo != nullptr && n > 1) {
        const int want = algo == ClassicAlgo::kRing ? 1 : (requested > 0 ? requested : kDefaultMaxRings);
        BRAID_ASSIGN_OR_RETURN(algos::RingSearch search, algos::findRings(*topo, want));
        found = search.rings;
        plan.notes = search.notes;
      } else if (algo == ClassicAlgo::kMultiRing) {
        found = {rankOrder(n, false), rankOrder(n, true)};
        plan.notes.push_back("no topology: rings alternate between rank order and reversed rank order");
      } else {
        found = {rankOrder(n, false)};
      }
      int k_rings = requested > 0 ? requested : (algo == ClassicAlgo::kRing ? 1 : static_cast<int>(found.size()));
      for (int k = 0; k < k_rings; ++k) plan.rings.push_back(found[k % found.size()]);
      if (k_rings > static_cast<int>(found.size()) && found.size() > 1) {
        plan.notes.push_back(
            fmt::format("{} channels over {} distinct rings: rings are reused", k_rings, found.size()));
      }
      plan.channels = k_rings;
      plan.base_factor = algos::ringBaseFactor(kind, n, k_rings);
      plan.both_modes = n > 1 && outOfPlaceServesInPlace(kind);
      break;
    }
    case ClassicAlgo::kDirect:
      plan.channels = requested > 0 ? requested : 1;
      plan.base_factor = algos::directBaseFactor(kind, n, plan.channels);
      plan.both_modes = n > 1 && outOfPlaceServesInPlace(kind);
      break;
    case ClassicAlgo::kRecursiveDoubling:
      BRAID_RETURN_IF_ERROR(singleChannelOnly());
      plan.base_factor = 1;
      plan.both_modes = n > 1 && outOfPlaceServesInPlace(kind);
      if (kind != CollectiveKind::kBroadcast && kind != CollectiveKind::kReduce) {
        int p2 = 1;
        while (p2 * 2 <= n) p2 *= 2;
        if (p2 != n) {
          const int rem = n - p2;
          plan.notes.push_back(fmt::format(
              "{} ranks is not a power of two: {} even rank{} below {} fold{} into the odd neighbour above before "
              "recursive {} over {} ranks and {} served after it",
              n, rem, rem == 1 ? "" : "s", 2 * rem, rem == 1 ? "s" : "",
              kind == CollectiveKind::kReduceScatter ? "halving" : "doubling", p2, rem == 1 ? "is" : "are"));
        }
      }
      break;
    case ClassicAlgo::kDoubleBinaryTree: {
      if (requested % 2 != 0) {
        return invalidArgument(
            fmt::format("tree uses two channels per pair of trees: --channels must be even, got {}", requested));
      }
      const int replicas = requested > 0 ? requested / 2 : 1;
      plan.channels = replicas;  // pairs of trees
      plan.base_factor = 2 * replicas;
      plan.both_modes = n > 1;
      break;
    }
    case ClassicAlgo::kPairwise:
      BRAID_RETURN_IF_ERROR(singleChannelOnly());
      plan.base_factor = 1;
      plan.both_modes = false;
      break;
    case ClassicAlgo::kHierarchical: {
      BRAID_RETURN_IF_ERROR(singleChannelOnly());
      if (topo == nullptr) {
        return invalidArgument(
            fmt::format("algorithm 'hierarchical' needs a topology with nodes (--topology) to know which of the {} "
                        "ranks share a node",
                        n));
      }
      std::vector<std::string> grid_notes;
      BRAID_ASSIGN_OR_RETURN(plan.grid, algos::nodeGrid(*topo, n, &grid_notes));
      plan.base_factor = algos::hierarchicalBaseFactor(kind, plan.grid);
      plan.both_modes = n > 1 && kind != CollectiveKind::kAllGather;
      plan.notes.push_back(fmt::format("two levels: {} node(s) x {} GPU(s)", plan.grid.nodes, plan.grid.gpus_per_node));
      if (kind != CollectiveKind::kAllToAll) plan.notes.insert(plan.notes.end(), grid_notes.begin(), grid_notes.end());
      break;
    }
    case ClassicAlgo::kTwoDimHierarchical: {
      BRAID_RETURN_IF_ERROR(singleChannelOnly());
      BRAID_ASSIGN_OR_RETURN(plan.grid, twoDimGrid(request));
      plan.base_factor = 1;
      plan.both_modes = n > 1;
      plan.notes.push_back(fmt::format("2DH over {} node(s) x {} rank(s)", plan.grid.nodes, plan.grid.gpus_per_node));
      break;
    }
  }

  int scale = 1;
  if (spec.chunk_factor > 1) {
    if (spec.chunk_factor % plan.base_factor != 0) {
      return invalidArgument(
          fmt::format("algorithm '{}' for {} on {} ranks needs a chunk factor that is a multiple "
                      "of {}, got {}",
                      classicAlgoName(algo), collectiveName(kind), n, plan.base_factor, spec.chunk_factor));
    }
    scale = spec.chunk_factor / plan.base_factor;
  }
  spec.chunk_factor = plan.base_factor * scale;

  return Planned{std::move(plan), spec, scale};
}

}  // namespace

Result<ClassicShape> classicShape(const ClassicRequest& request) {
  BRAID_ASSIGN_OR_RETURN(const Planned planned, planClassic(request));
  ClassicShape shape;
  shape.spec = planned.spec;
  const int64_t n = planned.spec.num_ranks;
  shape.chunk_cells = n * (int64_t{planned.spec.inputChunks()} + planned.spec.outputChunks());
  const ClassicAlgo algo = request.algo;
  const CollectiveKind kind = planned.spec.kind;
  const bool rooted = kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce;
  if ((algo == ClassicAlgo::kDirect && !rooted) || algo == ClassicAlgo::kPairwise) {
    shape.min_steps = 2 * n * (n - 1);  // a send to and a receive from every other rank, on every rank
  }
  return shape;
}

Result<Algorithm> buildClassic(const ClassicRequest& request) {
  BRAID_ASSIGN_OR_RETURN(Planned planned, planClassic(request));
  Plan& plan = planned.plan;
  CollectiveSpec& spec = planned.spec;
  const int scale = planned.scale;
  const ClassicAlgo algo = request.algo;
  const CollectiveKind kind = spec.kind;
  const int n = spec.num_ranks;
  const Topology* topo = request.topology;
  const bool both = plan.both_modes;
  ProgramBuilder builder(spec, spec.in_place && !both, scale);
  if (n == 1) {
    // One rank: the output is the input. Out of place that is one copy; in place nothing at all.
    const int count = spec.inputChunks() / scale;
    const algos::Loc src = builder.in(0, 0);
    const algos::Loc dst = builder.out(0, 0);
    if (!builder.same(src, dst)) builder.copy(0, builder.newTb(0, -1, -1, 0), src, dst, count);
  } else {
    switch (algo) {
      case ClassicAlgo::kRing:
      case ClassicAlgo::kMultiRing:
        BRAID_RETURN_IF_ERROR(algos::buildRings(builder, kind, plan.rings, spec.root));
        break;
      case ClassicAlgo::kDirect:
        BRAID_RETURN_IF_ERROR(algos::buildDirect(builder, kind, plan.channels, spec.root));
        break;
      case ClassicAlgo::kRecursiveDoubling:
        BRAID_RETURN_IF_ERROR(algos::buildRecursive(builder, kind, spec.root));
        break;
      case ClassicAlgo::kDoubleBinaryTree:
        BRAID_RETURN_IF_ERROR(algos::buildDoubleBinaryTree(builder, plan.channels));
        break;
      case ClassicAlgo::kPairwise: BRAID_RETURN_IF_ERROR(algos::buildPairwise(builder)); break;
      case ClassicAlgo::kHierarchical: BRAID_RETURN_IF_ERROR(algos::buildHierarchical(builder, kind, plan.grid)); break;
      case ClassicAlgo::kTwoDimHierarchical: BRAID_RETURN_IF_ERROR(algos::buildAllToAll2dh(builder, plan.grid)); break;
    }
  }

  Algorithm algorithm;
  algorithm.name = fmt::format("{}_{}_n{}", classicAlgoName(algo), collectiveName(kind), n);
  algorithm.collective = kind;
  algorithm.collective_name = collectiveName(kind);
  algorithm.protocol = request.protocol;
  algorithm.in_place = both || spec.in_place;
  algorithm.out_of_place = both || !spec.in_place;
  algorithm.root = spec.root;
  algorithm.provenance.generator = fmt::format("braid algo {}", classicAlgoName(algo));
  if (topo != nullptr) algorithm.provenance.topology = topo->source.empty() ? topo->name : topo->source;
  algorithm.notes = plan.notes;
  BRAID_RETURN_IF_ERROR(builder.finish(algorithm));
  return algorithm;
}

}  // namespace braid
