// The sketch derived from a topology when the user gives none (deriveSketch: fabric, intra-node links, relays,
// symmetry, chunkup, path slack, in that order) and the sketch-topology consistency check (checkSketch). Sources:
// TACCL (Shah et al., NSDI'23 §3) as summarised in ../shared/reference/taccl_msccl.md §1.4.

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braid/sketch.h"
#include "synthesizer/sketch_limits.h"

namespace braid {
namespace {

using synth::kHyperedges;
using synth::kMaxGpuId;
using synth::kMaxNodes;
using synth::kMaxPathSlack;
using synth::kStrategies;

bool sameValue(double a, double b) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)});
}

bool nvlinkOnly(const Topology& t, const Route& r) {
  if (r.links.empty()) return false;
  return std::all_of(r.links.begin(), r.links.end(), [&](int l) { return t.links[l].kind == LinkKind::kNvlink; });
}

// Routes a -> b and c -> d cost the same and are both NVLink-only or both not (or both do not exist).
bool sameRoute(const Topology& t, int a, int b, int c, int d) {
  const std::optional<Route> x = t.route(a, b);
  const std::optional<Route> y = t.route(c, d);
  if (!x || !y) return !x && !y;
  return sameValue(x->bandwidth_gbps, y->bandwidth_gbps) && sameValue(x->alpha_us, y->alpha_us) &&
         nvlinkOnly(t, *x) == nvlinkOnly(t, *y);
}

// NCCL path-type order (nccl src/graph/topo.h PATH_NVL < PIX < PXB < P2C < PHB < SYS < NET).
int pathClassOrder(const std::string& c) {
  static const char* const kOrder[] = {"NVL", "PIX", "PXB", "P2C", "PHB", "SYS", "NET"};
  for (int i = 0; i < static_cast<int>(std::size(kOrder)); ++i) {
    if (c == kOrder[i]) return i;
  }
  return static_cast<int>(std::size(kOrder));
}

/// What the phases of deriveSketch share: the topology, the sketch being built, and node 0's NVLink fabric.
struct Derivation {
  Derivation(const Topology& topology, CollectiveKind kind)
      : t(topology),
        collective(kind),
        gpn(static_cast<int>(topology.nodes[0].gpus.size())),
        nodes(topology.numNodes()) {}
  /// Rank of local GPU `local` of node `n`.
  int rankOf(int n, int local) const { return t.vertices[t.nodes[n].gpus[local]].rank; }

  const Topology& t;
  CollectiveKind collective;
  int gpn;
  int nodes;
  Sketch s;
  bool has_nvlink = false;
  bool has_nvswitch = false;
  bool use_nvlink = false;
  std::set<int> gpu_lanes;
  std::map<int, int> lanes_into;  // local GPU -> NVLink lanes arriving from other GPUs of the node
  std::set<std::pair<int, int>> nvlink_pairs;
  int senders_per_node = 0;
};

/// Node 0's NVLink fabric: NVSwitches, GPU-GPU NVLink lanes and pairs.
void readFabric(Derivation& d) {
  const Topology& t = d.t;
  bool& has_nvlink = d.has_nvlink;
  bool& has_nvswitch = d.has_nvswitch;
  std::set<int>& gpu_lanes = d.gpu_lanes;
  std::map<int, int>& lanes_into = d.lanes_into;
  std::set<std::pair<int, int>>& nvlink_pairs = d.nvlink_pairs;
  for (const Vertex& v : t.vertices) {
    if (v.node == 0 && v.kind == VertexKind::kNvSwitch) has_nvswitch = true;
  }
  for (const Link& l : t.links) {
    if (l.kind != LinkKind::kNvlink) continue;
    const Vertex& a = t.vertices[l.src];
    const Vertex& b = t.vertices[l.dst];
    if (a.node != 0 || b.node != 0) continue;
    if (a.kind == VertexKind::kGpu || b.kind == VertexKind::kGpu) has_nvlink = true;
    if (a.kind == VertexKind::kGpu && b.kind == VertexKind::kGpu) {
      gpu_lanes.insert(l.lanes);
      lanes_into[b.local] += l.lanes;
      nvlink_pairs.insert({a.local, b.local});
    }
  }
}

void chooseIntranodeLinks(Derivation& d) {
  Sketch& s = d.s;
  const int gpn = d.gpn;
  const bool has_nvlink = d.has_nvlink;
  const bool has_nvswitch = d.has_nvswitch;
  const std::set<std::pair<int, int>>& nvlink_pairs = d.nvlink_pairs;
  // Intra-node logical links: NVLink-only routes when they connect all GPUs of the node (directly or through an
  // NVSwitch, so relaying over NVLink reaches everyone), every routable pair otherwise.
  bool nvlink_connected = has_nvswitch;
  if (has_nvlink && !has_nvswitch) {
    std::set<int> seen = {0};
    std::vector<int> frontier = {0};
    while (!frontier.empty()) {
      const int a = frontier.back();
      frontier.pop_back();
      for (const auto& [x, y] : nvlink_pairs) {
        if (x == a && seen.insert(y).second) frontier.push_back(y);
      }
    }
    nvlink_connected = static_cast<int>(seen.size()) == gpn;
  }
  d.use_nvlink = has_nvlink && nvlink_connected;
  const bool use_nvlink = d.use_nvlink;
  s.intranode_links = use_nvlink ? IntraLinks::kNvlink : IntraLinks::kAll;
  s.notes.push_back(use_nvlink   ? "intranode links nvlink: node 0 has NVLink connecting all its GPUs, so GPUs talk "
                                   "directly only over NVLink-only routes (direct or through NVSwitch)."
                    : has_nvlink ? "intranode links all: node 0's NVLink does not connect all its GPUs (islands), so "
                                   "every GPU pair with a route (NVLink, PCIe or SYS) may talk directly."
                                 : "intranode links all: node 0 has no NVLink, so every GPU pair with a route "
                                   "(PCIe / SYS) may talk directly.");
  s.notes.push_back("intranode strategy none: no TACCL objective tweak (uc-min/uc-max, maxmin/minmax).");
}

void chooseRelays(Derivation& d) {
  const Topology& t = d.t;
  Sketch& s = d.s;
  const int gpn = d.gpn;
  const int nodes = d.nodes;
  const Node& node0 = t.nodes[0];
  int& senders_per_node = d.senders_per_node;
  auto rankOf = [&](int n, int local) { return d.rankOf(n, local); };
  // Relays from GPU-NIC affinity (nicAffinity; the traffic NIC is the one Topology::route leaves through).
  if (nodes == 1) {
    s.internode_conn = InterConn::kDirectMap;
    s.notes.push_back("Single node: no inter-node relays.");
  } else {
    std::map<std::pair<int, int>, NicAffinity> affinity;  // (rank, nic vertex) -> entry
    for (const NicAffinity& a : nicAffinity(t)) affinity[{a.rank, a.nic_vertex}] = a;
    std::vector<int> traffic(gpn, -1);
    int with_nic = 0;
    for (int g = 0; g < gpn; ++g) {
      const std::vector<int> nics = nearestNics(t, rankOf(0, g));
      if (!nics.empty()) {
        traffic[g] = nics.front();
        ++with_nic;
      }
    }
    const std::set<int> distinct(traffic.begin(), traffic.end());
    if (with_nic == 0) {
      s.internode_conn = InterConn::kDirectMap;
      s.notes.push_back(
          "internode direct-map: no GPU of node 0 reaches a NIC of its node (a hint topology without PCIe paths?), "
          "so every GPU sends to the same local GPU of other nodes.");
    } else if (with_nic == gpn && static_cast<int>(distinct.size()) == gpn) {
      s.internode_conn = InterConn::kDirectMap;
      senders_per_node = gpn;
      s.notes.push_back(
          "internode direct-map: every GPU has a nearest NIC of its own (nicAffinity), so GPU i sends to GPU i of "
          "the other nodes and relays any chunk of its node.");
    } else {
      s.internode_conn = InterConn::kMap;
      std::vector<std::string> parts;
      for (int nic : node0.nics) {
        std::vector<int> members;
        for (int g = 0; g < gpn; ++g) {
          if (traffic[g] == nic) members.push_back(g);
        }
        if (members.empty()) continue;
        // Nearest first: widest route, then NCCL path type, then fewest hops, then local id.
        std::stable_sort(members.begin(), members.end(), [&](int x, int y) {
          const NicAffinity& a = affinity[{rankOf(0, x), nic}];
          const NicAffinity& b = affinity[{rankOf(0, y), nic}];
          if (!sameValue(a.bandwidth_gbps, b.bandwidth_gbps)) return a.bandwidth_gbps > b.bandwidth_gbps;
          const int ca = pathClassOrder(a.path_class), cb = pathClassOrder(b.path_class);
          if (ca != cb) return ca < cb;
          return a.hops < b.hops;
        });
        const int sender = members[0];
        const int receiver = members.size() > 1 ? members[1] : members[0];
        s.internode_map[sender] = {receiver};
        ++senders_per_node;
        const NicAffinity& a = affinity[{rankOf(0, sender), nic}];
        parts.push_back(fmt::format("{} (used by GPUs {}; GPU {} is {} to it): GPU {} -> GPU {}", t.vertices[nic].name,
                                    fmt::join(members, ","), sender, a.path_class, sender, receiver));
      }
      s.notes.push_back(fmt::format(
          "internode map: GPUs share NICs, so the nearest GPU of each NIC sends and the next nearest receives on the "
          "other nodes, relaying any chunk of its node: {}.",
          fmt::join(parts, "; ")));
    }
  }
}

void chooseSymmetry(Derivation& d) {
  const Topology& t = d.t;
  Sketch& s = d.s;
  const int gpn = d.gpn;
  const int nodes = d.nodes;
  const Node& node0 = t.nodes[0];
  const CollectiveKind collective = d.collective;
  const int senders_per_node = d.senders_per_node;
  auto rankOf = [&](int n, int local) { return d.rankOf(n, local); };
  // Symmetry.
  if (collective == CollectiveKind::kBroadcast || collective == CollectiveKind::kReduce) {
    s.notes.push_back(
        fmt::format("No symmetry: {} has a root that no rank permutation may move.", collectiveName(collective)));
  } else {
    if (nodes > 1) {
      bool same = true;
      std::string why;
      for (int n = 1; n < nodes && same; ++n) {
        if (!node0.tmpl.empty() || !t.nodes[n].tmpl.empty()) {
          same = t.nodes[n].tmpl == node0.tmpl;
          if (!same)
            why =
                fmt::format("node {} is a {}, node {} a {}", t.nodes[n].name, t.nodes[n].tmpl, node0.name, node0.tmpl);
          continue;
        }
        // No template names: compare the intra-node routes of node n with node 0's.
        for (int a = 0; a < gpn && same; ++a) {
          for (int b = 0; b < gpn && same; ++b) {
            if (a != b && !sameRoute(t, rankOf(0, a), rankOf(0, b), rankOf(n, a), rankOf(n, b))) {
              same = false;
              why = fmt::format("GPUs {}->{} differ between node {} and node {}", a, b, node0.name, t.nodes[n].name);
            }
          }
        }
      }
      if (same) {
        s.symmetry.emplace_back(gpn, t.numGpus());
        s.notes.push_back(
            fmt::format("symmetry [{}, {}]: all {} nodes are alike, so shifting every rank by one node "
                        "maps the machine onto itself.",
                        gpn, t.numGpus(), nodes));
      } else {
        s.notes.push_back(fmt::format("No node-shift symmetry: {}.", why));
      }
    }
    // Rotation inside a node: by one GPU, or by the GPUs per NIC when one GPU per NIC sends.
    int step = 1;
    if (s.internode_conn == InterConn::kMap && senders_per_node > 0 && gpn % senders_per_node == 0) {
      step = gpn / senders_per_node;
    }
    if (gpn > 1 && step < gpn) {
      auto rot = [&](int g) { return (g + step) % gpn; };
      std::string why;
      for (int a = 0; a < gpn && why.empty(); ++a) {
        for (int b = 0; b < gpn && why.empty(); ++b) {
          if (a != b && !sameRoute(t, rankOf(0, a), rankOf(0, b), rankOf(0, rot(a)), rankOf(0, rot(b)))) {
            why = fmt::format("the route GPU {}->{} differs from GPU {}->{}", a, b, rot(a), rot(b));
          }
        }
      }
      if (why.empty() && s.internode_conn == InterConn::kMap) {
        std::map<int, std::vector<int>> image;
        for (const auto& [sender, receivers] : s.internode_map) {
          std::vector<int> r;
          for (int g : receivers) r.push_back(rot(g));
          image[rot(sender)] = r;
        }
        if (image != s.internode_map) why = "it does not map the relay senders onto themselves";
      }
      if (why.empty() && nodes > 1) {
        // Inter-node links of the relay map (direct-map: i -> i) must cost the same after rotation.
        std::vector<std::pair<int, int>> pairs;
        if (s.internode_conn == InterConn::kMap) {
          for (const auto& [sender, receivers] : s.internode_map) {
            for (int r : receivers) pairs.emplace_back(sender, r);
          }
        } else {
          for (int g = 0; g < gpn; ++g) pairs.emplace_back(g, g);
        }
        for (const auto& [a, b] : pairs) {
          if (!sameRoute(t, rankOf(0, a), rankOf(1, b), rankOf(0, rot(a)), rankOf(1, rot(b)))) {
            why = fmt::format("the inter-node route GPU {}->{} differs from GPU {}->{}", a, b, rot(a), rot(b));
            break;
          }
        }
      }
      if (why.empty()) {
        s.symmetry.emplace_back(step, gpn);
        s.notes.push_back(fmt::format(
            "symmetry [{}, {}]: rotating local GPU ids by {} maps the node's links (bandwidth, latency, NVLink) {}"
            "onto themselves.",
            step, gpn, step, s.internode_conn == InterConn::kMap ? "and the relay map " : ""));
      } else {
        s.notes.push_back(fmt::format("No rotation symmetry by {} inside a node: {}.", step, why));
      }
    }
  }
}

void chooseChunkup(Derivation& d) {
  Sketch& s = d.s;
  const int gpn = d.gpn;
  const int nodes = d.nodes;
  const CollectiveKind collective = d.collective;
  const std::set<int>& gpu_lanes = d.gpu_lanes;
  const std::map<int, int>& lanes_into = d.lanes_into;
  // Chunkup: balance the NVLink lanes (TACCL ships sk-ndv2-n1-cUp6 for the DGX-1's one- and two-lane links).
  if (nodes > 1) {
    s.chunkup = 1;
    s.notes.push_back(
        "chunkup 1: across nodes the NICs, not the NVLink lanes, are the bottleneck (TACCL's multi-node sketches "
        "use input_chunkup 1).");
  } else if (gpu_lanes.size() > 1) {
    // Each GPU receives (gpn - 1) * chunkup chunks in an all-gather; they spread exactly over its lanes when
    // the lane count divides them (DGX-1: 7 * 6 chunks over 6 lanes).
    const int candidates[] = {1, 2, 3, 6};
    int chosen = 6;
    for (int c : candidates) {
      const bool even = std::all_of(lanes_into.begin(), lanes_into.end(),
                                    [&](const auto& kv) { return kv.second > 0 && ((gpn - 1) * c) % kv.second == 0; });
      if (even) {
        chosen = c;
        break;
      }
    }
    // A multiple of the balancing count: smaller pieces shorten the pipeline fill at relays (a relay forwards a
    // piece only as its slices arrive). Measured on dgx1-v100 at 256 MiB in the simulator (route bound 1933 us
    // for all-gather): all-gather 2088 us at chunkup 6, 2035 at 12, 2008 at 18, 2012 at 24 -> 3x; all-reduce
    // 4183 us at 12 and 4359 at 18 -> 2x; all-to-all 4494 us at 12 and 4488 at 6, where 6 routes in 5 s and 12
    // in 9 s -> 1x.
    const int multiple = collective == CollectiveKind::kAllGather || collective == CollectiveKind::kReduceScatter ? 3
                         : collective == CollectiveKind::kAllReduce                                               ? 2
                                                                                                                  : 1;
    s.chunkup = chosen > 1 ? multiple * chosen : 1;
    s.notes.push_back(fmt::format(
        "chunkup {}: node 0 mixes NVLink links of {} lanes, and {} chunks per GPU spread evenly over its lanes only "
        "when cut a multiple of {} ways (TACCL's sk-ndv2-n1-cUp6 for the DGX-1); a multiple of that shortens the "
        "pipeline fill at relays (3x for all-gather and reduce-scatter, 2x for all-reduce, measured).",
        s.chunkup, fmt::join(gpu_lanes, " and "), gpn - 1, chosen));
  } else {
    s.chunkup = 1;
    s.notes.push_back("chunkup 1: every direct NVLink link of the node has the same lane count (or none exists).");
  }
}

void choosePathSlack(Derivation& d) {
  const Topology& t = d.t;
  Sketch& s = d.s;
  const int gpn = d.gpn;
  const int nodes = d.nodes;
  const bool has_nvlink = d.has_nvlink;
  const bool has_nvswitch = d.has_nvswitch;
  const bool use_nvlink = d.use_nvlink;
  const std::set<std::pair<int, int>>& nvlink_pairs = d.nvlink_pairs;
  // Path slack: on a DGX-1-like single node, two-hop destinations need routes beyond the shortest to balance.
  bool complete = true;
  for (int a = 0; a < gpn && complete; ++a) {
    for (int b = 0; b < gpn && complete; ++b) {
      if (a != b && !nvlink_pairs.count({a, b})) complete = false;
    }
  }
  // On one node whose GPU pairs see different route bandwidths (PCIe switches vs the inter-socket link, NVLink
  // islands joined by SYS) a chunk should cross the slow link once and be relayed on the far side rather than
  // sent directly to every far GPU: shortest paths in a complete logical graph are all direct.
  bool uneven_routes = false;
  if (nodes == 1 && !use_nvlink) {
    double lo = 0, hi = 0;
    for (int a : t.nodes[0].gpus) {
      for (int b : t.nodes[0].gpus) {
        if (a == b) continue;
        std::optional<Route> r = t.route(t.vertices[a].rank, t.vertices[b].rank);
        if (!r) continue;
        lo = lo == 0 ? r->bandwidth_gbps : std::min(lo, r->bandwidth_gbps);
        hi = std::max(hi, r->bandwidth_gbps);
      }
    }
    uneven_routes = hi > lo * (1 + 1e-9);
  }
  if (nodes == 1 && !has_nvswitch && has_nvlink && use_nvlink && !complete) {
    s.path_slack = 1;
    s.notes.push_back(
        "path_slack 1: the node's NVLink graph is not complete and has no NVSwitch, so two-hop destinations "
        "cannot be balanced over shortest paths alone.");
  } else if (uneven_routes) {
    s.path_slack = 1;
    s.notes.push_back(
        "path_slack 1: GPU pairs of the node see different route bandwidths (e.g. PCIe vs the inter-socket link), "
        "so a chunk may cross the slow link once and be relayed instead of going directly to every far GPU.");
  } else {
    s.path_slack = 0;
    s.notes.push_back(nodes > 1 ? "path_slack 0: shortest paths only (TACCL's routing), several nodes."
                                : "path_slack 0: every GPU pair is one NVLink hop (or NVSwitch) away, or there is "
                                  "no NVLink; shortest paths suffice.");
  }
}

}  // namespace

Status checkSketch(const Sketch& s, const Topology& t) {
  const std::string src = !s.source.empty() ? s.source : (!s.name.empty() ? s.name : std::string("sketch"));
  auto fail = [&](const std::string& field, const std::string& what) {
    return invalidArgument(fmt::format("{}: {}: {}", src, field, what));
  };
  if (t.numGpus() == 0 || t.numNodes() == 0) return fail("nodes", fmt::format("topology {} has no GPUs", t.name));
  if (s.nodes > 0 && s.nodes != t.numNodes()) {
    return fail("nodes",
                fmt::format("the sketch is for {} node(s), topology {} has {}", s.nodes, t.name, t.numNodes()));
  }
  if (s.nodes < 0) return fail("nodes", fmt::format("{} is negative", s.nodes));
  const int gpn = static_cast<int>(t.nodes[0].gpus.size());
  for (int n = 1; n < t.numNodes(); ++n) {
    if (static_cast<int>(t.nodes[n].gpus.size()) != gpn) {
      return fail("nodes", fmt::format("node {} of topology {} has {} GPUs, node {} has {}: sketches address GPUs by "
                                       "local id and need the same GPU count on every node",
                                       t.nodes[n].name, t.name, t.nodes[n].gpus.size(), t.nodes[0].name, gpn));
    }
  }
  if (gpn == 0) return fail("nodes", fmt::format("node {} of topology {} has no GPUs", t.nodes[0].name, t.name));
  auto gpuOk = [&](int g) { return g >= 0 && g < gpn; };
  auto missing = [&](const std::string& field, const std::string& role, int g) {
    return fail(field, fmt::format("{} {} does not exist ({} GPUs per node)", role, g, gpn));
  };

  if (!kStrategies.count(s.intranode_strategy)) {
    return fail("intranode.strategy",
                fmt::format("unknown strategy '{}' (none, switch, maxmin, minmax)", s.intranode_strategy));
  }
  if (s.intranode_links == IntraLinks::kExplicit) {
    for (const auto& [a, b] : s.intranode_pairs) {
      if (!gpuOk(a)) return missing("intranode.links", "GPU", a);
      if (!gpuOk(b)) return missing("intranode.links", "GPU", b);
      if (a == b) return fail("intranode.links", fmt::format("GPU {} linked to itself", a));
    }
  }
  for (size_t i = 0; i < s.switches.size(); ++i) {
    const std::string field = fmt::format("intranode.switches[{}]", i);
    for (int g : s.switches[i].gpus) {
      if (!gpuOk(g)) return missing(field + ".gpus", "GPU", g);
    }
    if (!kHyperedges.count(s.switches[i].hyperedge))
      return fail(field + ".hyperedge", fmt::format("'{}' is not uc-max or uc-min", s.switches[i].hyperedge));
  }
  if (s.internode_conn == InterConn::kMap) {
    if (s.internode_map.empty() && t.numNodes() > 1) {
      return fail("internode.connections",
                  fmt::format("no sender: the {} nodes of topology {} could not exchange data", t.numNodes(), t.name));
    }
    for (const auto& [sender, receivers] : s.internode_map) {
      if (!gpuOk(sender)) return missing("internode.connections", "sender", sender);
      if (receivers.empty()) return fail("internode.connections", fmt::format("sender {} has no receiver", sender));
      for (int r : receivers) {
        if (!gpuOk(r)) return missing("internode.connections", "receiver", r);
      }
    }
  }
  for (const auto& [sender, gpus] : s.relay_for) {
    if (!gpuOk(sender)) return missing("internode.relay_for", "sender", sender);
    if (s.internode_conn == InterConn::kMap && !s.internode_map.count(sender)) {
      return fail("internode.relay_for", fmt::format("GPU {} is not a sender of internode.connections", sender));
    }
    for (int g : gpus) {
      if (!gpuOk(g)) return missing("internode.relay_for", "GPU", g);
    }
  }
  for (size_t i = 0; i < s.symmetry.size(); ++i) {
    const auto [offset, group] = s.symmetry[i];
    const std::string field = fmt::format("symmetry[{}]", i);
    if (offset < 0) return fail(field, fmt::format("offset {} is negative", offset));
    if (group <= 0) return fail(field, fmt::format("group {} must be positive", group));
    if (t.numGpus() % group != 0) {
      return fail(field,
                  fmt::format("group {} does not divide the {} GPUs of topology {}", group, t.numGpus(), t.name));
    }
  }
  if (s.chunkup < 1) return fail("chunkup", fmt::format("{} must be at least 1", s.chunkup));
  if (s.path_slack < 0 || s.path_slack > kMaxPathSlack)
    return fail("path_slack", fmt::format("{} is out of range [0, {}]", s.path_slack, kMaxPathSlack));
  return Status::ok();
}

Result<Sketch> deriveSketch(const Topology& t, CollectiveKind collective) {
  if (t.numGpus() == 0 || t.numNodes() == 0) return invalidArgument(fmt::format("topology {}: no GPUs", t.name));
  const Node& node0 = t.nodes[0];
  const int gpn = static_cast<int>(node0.gpus.size());
  for (const Node& n : t.nodes) {
    if (static_cast<int>(n.gpus.size()) != gpn) {
      return invalidArgument(fmt::format(
          "topology {}: node {} has {} GPUs, node {} has {}: a sketch addresses GPUs by local id and needs the "
          "same GPU count on every node",
          t.name, n.name, n.gpus.size(), node0.name, gpn));
    }
  }
  if (gpn == 0) return invalidArgument(fmt::format("topology {}: node {} has no GPUs", t.name, node0.name));
  Derivation d(t, collective);
  Sketch& s = d.s;
  s.name = fmt::format("{}-{}", t.name, collectiveName(collective));
  s.source = "derived:" + t.name;
  s.nodes = d.nodes;
  readFabric(d);
  chooseIntranodeLinks(d);
  chooseRelays(d);
  chooseSymmetry(d);
  chooseChunkup(d);
  s.size_bytes = 0;
  s.notes.push_back("size 0: costs taken at 1 MiB per chunk (TACCL's profiles are measured at 1 MB chunks).");
  choosePathSlack(d);

  Status ok = checkSketch(s, t);
  if (!ok.isOk()) return internalError(fmt::format("derived sketch fails its own check: {}", ok.message()));
  return s;
}

}  // namespace braid
