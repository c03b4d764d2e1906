#include "comm/alltoall_choice.h"

#include <fmt/format.h>

#include <bit>
#include <set>

#include "braid/classic.h"
#include "braid/classic_blocks.h"
#include "braid/simulate.h"
#include "common/log.h"

namespace braid::comm {

std::string NodeShape::toString() const {
  if (!known()) return fmt::format("unknown ({})", source);
  return fmt::format("{} node(s) x {} rank(s) ({})", nodes, ranks_per_node, source);
}

NodeShape nodeShapeFromHosts(const std::vector<std::string>& hosts) {
  NodeShape shape;
  const int n = static_cast<int>(hosts.size());
  if (n == 0) {
    shape.source = "no host names";
    return shape;
  }
  // Blocks of consecutive ranks as long as the first host's, each on one host, no host in two blocks.
  int run = 1;
  while (run < n && hosts[run] == hosts[0]) ++run;
  if (n % run != 0) {
    shape.source = fmt::format("host {} holds ranks 0..{}, and {} ranks do not split into blocks of {}", hosts[0],
                               run - 1, n, run);
    return shape;
  }
  std::set<std::string> seen;
  for (int start = 0; start < n; start += run) {
    for (int r = start + 1; r < start + run; ++r) {
      if (hosts[r] != hosts[start]) {
        shape.source = fmt::format(
            "ranks are not on their hosts in blocks of {} consecutive ranks: rank {} is on {}, rank {} on {}", run,
            start, hosts[start], r, hosts[r]);
        return shape;
      }
    }
    if (!seen.insert(hosts[start]).second) {
      shape.source =
          fmt::format("host {} holds ranks that are not consecutive (rank {} among them)", hosts[start], start);
      return shape;
    }
  }
  shape.nodes = n / run;
  shape.ranks_per_node = run;
  shape.source = "hosts";
  return shape;
}

Result<NodeShape> resolveNodeShape(int num_ranks, const Topology* topology, int ranks_per_node,
                                   const std::string& ranks_per_node_source, const std::vector<std::string>& hosts) {
  if (ranks_per_node < 0 || (ranks_per_node > 0 && num_ranks % ranks_per_node != 0)) {
    return invalidArgument(fmt::format("{}: {} ranks do not split into nodes of {} rank(s)", ranks_per_node_source,
                                       num_ranks, ranks_per_node));
  }
  NodeShape shape;
  if (topology != nullptr) {
    Result<algos::NodeGrid> grid = algos::nodeGrid(*topology, num_ranks, nullptr);
    if (grid.isOk()) {
      if (ranks_per_node > 0 && ranks_per_node != grid->gpus_per_node) {
        return invalidArgument(fmt::format("{} contradicts topology '{}', whose nodes hold {} GPUs each",
                                           ranks_per_node_source, topology->name, grid->gpus_per_node));
      }
      shape.nodes = grid->nodes;
      shape.ranks_per_node = grid->gpus_per_node;
      shape.source = "topology " + topology->name;
      return shape;
    }
    if (ranks_per_node == 0) {
      shape = nodeShapeFromHosts(hosts);
      if (!shape.known()) shape.source = grid.status().message() + "; " + shape.source;
      return shape;
    }
  }
  if (ranks_per_node > 0) {
    shape.nodes = num_ranks / ranks_per_node;
    shape.ranks_per_node = ranks_per_node;
    shape.source = ranks_per_node_source;
    return shape;
  }
  return nodeShapeFromHosts(hosts);
}

Result<AllToAllMode> parseAllToAllMode(const std::string& value, const std::string& setting) {
  if (value == "auto") return AllToAllMode::kAuto;
  if (value == "flat") return AllToAllMode::kFlat;
  if (value == "2dh") return AllToAllMode::kTwoDim;
  return invalidArgument(fmt::format("{}={}: not one of auto, flat, 2dh", setting, value));
}

const char* allToAllModeName(AllToAllMode mode) {
  switch (mode) {
    case AllToAllMode::kAuto: return "auto";
    case AllToAllMode::kFlat: return "flat";
    case AllToAllMode::kTwoDim: return "2dh";
  }
  return "?";
}

AllToAllChooser::AllToAllChooser(int num_ranks, AllToAllMode mode, std::string mode_setting, NodeShape shape,
                                 std::shared_ptr<const Topology> topology, int log_rank)
    : num_ranks_(num_ranks),
      mode_(mode),
      mode_setting_(std::move(mode_setting)),
      shape_(std::move(shape)),
      topology_(std::move(topology)),
      log_rank_(log_rank) {}

bool AllToAllChooser::needsSize() const {
  return mode_ == AllToAllMode::kAuto && shape_.twoLevels() && topology_ != nullptr;
}

Result<Algorithm> AllToAllChooser::algorithm(bool two_dim, bool in_place) const {
  ClassicRequest request;
  request.algo = two_dim ? ClassicAlgo::kTwoDimHierarchical : ClassicAlgo::kDirect;
  request.spec.kind = CollectiveKind::kAllToAll;
  request.spec.num_ranks = num_ranks_;
  request.spec.in_place = in_place;
  request.spec.chunk_factor = 0;
  if (two_dim) request.ranks_per_node = shape_.ranks_per_node;
  return buildClassic(request);
}

AllToAllDecision AllToAllChooser::simulated(uint64_t per_peer_bytes) const {
  AllToAllDecision d;
  SimOptions options;
  options.size_bytes = per_peer_bytes * static_cast<uint64_t>(num_ranks_);
  double us[2] = {-1, -1};
  for (int two_dim = 0; two_dim < 2; ++two_dim) {
    Result<Algorithm> built = algorithm(two_dim == 1, false);
    Result<SimResult> sim = built.isOk() ? simulate(*built, *topology_, options) : Result<SimResult>(built.status());
    if (!sim.isOk()) {
      d.why = fmt::format("the {} all-to-all could not be simulated on {}: {}", two_dim ? "2dh" : "flat",
                          topology_->name, sim.status().message());
      return d;
    }
    us[two_dim] = sim->time_us;
  }
  d.flat_us = us[0];
  d.two_dim_us = us[1];
  d.two_dim = d.two_dim_us < d.flat_us;
  d.why = fmt::format("predicted on {} at {} B per peer: 2dh {:.2f} us, flat {:.2f} us", topology_->name,
                      per_peer_bytes, d.two_dim_us, d.flat_us);
  return d;
}

const AllToAllDecision& AllToAllChooser::decide(uint64_t per_peer_bytes) {
  const int bucket = per_peer_bytes == 0 ? -1 : static_cast<int>(std::bit_width(per_peer_bytes)) - 1;
  const int key = needsSize() ? bucket : -2;  // one decision for every size when the size does not matter
  auto it = decisions_.find(key);
  if (it != decisions_.end()) return it->second;
  AllToAllDecision d;
  switch (mode_) {
    case AllToAllMode::kFlat:
    case AllToAllMode::kTwoDim:
      d.two_dim = mode_ == AllToAllMode::kTwoDim;
      d.why = fmt::format("forced ({}={})", mode_setting_, allToAllModeName(mode_));
      break;
    case AllToAllMode::kAuto:
      if (!shape_.known()) {
        d.why = "node shape unknown";
      } else if (!shape_.twoLevels()) {
        d.why = shape_.nodes == 1 ? "one node: 2DH would be the flat exchange"
                                  : "one rank per node: 2DH would be the flat exchange";
      } else if (topology_ == nullptr) {
        d.why = "no topology (BRAID_TOPO) to predict 2DH against flat with; BRAID_ALLTOALL=2dh forces 2DH";
      } else {
        d = simulated(bucket < 0 ? 0 : uint64_t{1} << bucket);
      }
      break;
  }
  if (log_rank_ >= 0) {
    const std::string size = needsSize() ? fmt::format("{} B per peer (bucket from {} B)", per_peer_bytes,
                                                       bucket < 0 ? 0 : uint64_t{1} << bucket)
                                         : std::string("any size");
    BRAID_LOG_RANK(kInfo, log_rank_, "alltoall(v) {}: {}, {}; nodes: {}", size, d.two_dim ? "2dh" : "flat", d.why,
                   shape_.toString());
  }
  return decisions_.emplace(key, std::move(d)).first->second;
}

std::string AllToAllChooser::digest() const {
  return fmt::format("alltoall={} shape={}x{};", allToAllModeName(mode_), shape_.nodes, shape_.ranks_per_node);
}

}  // namespace braid::comm
