// ForestColl cut bound, computed exactly by Dinkelbach iteration over s-t min cuts (Boost.Graph max-flow).
//
// Method. Let G be the GPUs (N = |G|), m = bytes_per_rank and r(S) = |G \ S| / B_in(S) for a valid S
// (S holds a GPU, misses a GPU). The bound is m * max_S r(S). Dinkelbach (Dinkelbach 1967, "On nonlinear
// fractional programming", Management Science 13(7)): for t = r(S_k), let S_{k+1} maximise
// F_t(S) = |G \ S| - t * B_in(S). If F_t(S_{k+1}) > 0 then r(S_{k+1}) > t; otherwise t is the maximum.
// t strictly increases over finitely many sets, so the iteration ends (superlinearly, in practice a few
// steps). Maximising F_t is minimising t * B_in(S) + |G ∩ S| (= N - F_t), an s-t min cut with S the sink
// side: link a->b gets capacity t * bw (cut iff a outside S, b inside), source->g capacity 1 per GPU g
// (cut iff g in S). Validity is enforced by case split on the lowest-rank GPU g_i in S: for i >= 1,
// g_i -> sink and source -> g_0..g_{i-1} are infinite (g_0 outside, so S misses a GPU); for i = 0,
// g_0 -> sink is infinite and one GPU g_j (j = 1..N-1) is forced outside. That is 2(N-1) min cuts per
// step. This is the cut characterisation ForestColl's binary search tests with max-flows
// (liangyuRain/ForestColl pipeline_allgather.py); Dinkelbach replaces the search with an exact iteration.
// Every candidate's ratio is re-evaluated from the topology, so the reported time is the exact ratio of
// the reported cut.
#include "braid/bounds.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <cmath>
#include <limits>
#include <queue>
#include <string>
#include <utility>
#include <vector>

namespace braid {
namespace {

/// s-t min cut on double capacities with Boost.Graph's Boykov-Kolmogorov max-flow
/// (boost/graph/boykov_kolmogorov_max_flow.hpp). After maxFlow, sourceSide() is the source side of a minimum
/// cut: the vertices of the search tree grown from the source (coloured black by the algorithm).
class FlowNetwork {
 public:
  explicit FlowNetwork(int n) : graph_(n) {}

  void addEdge(int a, int b, double cap) {
    auto forward = boost::add_edge(a, b, graph_).first;
    auto backward = boost::add_edge(b, a, graph_).first;
    graph_[forward].capacity = cap;
    graph_[backward].capacity = 0;
    graph_[forward].reverse = backward;
    graph_[backward].reverse = forward;
  }

  double maxFlow(int s, int t) {
    colors_.assign(boost::num_vertices(graph_), boost::default_color_type::white_color);
    std::vector<Traits::edge_descriptor> pred(boost::num_vertices(graph_));
    std::vector<double> dist(boost::num_vertices(graph_));
    const auto index = boost::get(boost::vertex_index, graph_);
    return boost::boykov_kolmogorov_max_flow(
        graph_, boost::get(&EdgeProps::capacity, graph_), boost::get(&EdgeProps::residual, graph_),
        boost::get(&EdgeProps::reverse, graph_), boost::make_iterator_property_map(pred.begin(), index),
        boost::make_iterator_property_map(colors_.begin(), index),
        boost::make_iterator_property_map(dist.begin(), index), index, s, t);
  }

  std::vector<bool> sourceSide() const {
    std::vector<bool> side(colors_.size());
    for (size_t v = 0; v < colors_.size(); ++v) side[v] = colors_[v] == boost::default_color_type::black_color;
    return side;
  }

 private:
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  struct EdgeProps {
    double capacity = 0;
    double residual = 0;
    Traits::edge_descriptor reverse;
  };
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, EdgeProps>;

  Graph graph_;
  std::vector<boost::default_color_type> colors_;
};

std::vector<bool> reachable(const Topology& t, int start, bool forward) {
  std::vector<std::vector<int>> adj(t.vertices.size());
  for (const Link& link : t.links) {
    if (forward) {
      adj[link.src].push_back(link.dst);
    } else {
      adj[link.dst].push_back(link.src);
    }
  }
  std::vector<bool> seen(t.vertices.size());
  std::vector<int> stack = {start};
  seen[start] = true;
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    for (int w : adj[v]) {
      if (!seen[w]) {
        seen[w] = true;
        stack.push_back(w);
      }
    }
  }
  return seen;
}

struct Candidate {
  double gpus_outside = 0;  // |G \ S|
  double bandwidth_in = 0;  // B_in(S), GB/s
  std::vector<bool> in_s;
};

Candidate evaluate(const Topology& t, const std::vector<int>& gpus, std::vector<bool> in_s) {
  Candidate c;
  for (int g : gpus) c.gpus_outside += in_s[g] ? 0 : 1;
  for (const Link& link : t.links) {
    if (!in_s[link.src] && in_s[link.dst]) c.bandwidth_in += link.bandwidth_gbps;
  }
  c.in_s = std::move(in_s);
  return c;
}

// The checks every bound shares: bytes finite and >= 0, links inside the topology with positive finite
// bandwidth, every GPU reaching and reached from the first. Fills the GPU vertex ids and the summed bandwidth.
Status checkBoundInputs(const Topology& t, double bytes_per_rank, std::vector<int>* gpus, double* total_bandwidth) {
  if (!std::isfinite(bytes_per_rank) || bytes_per_rank < 0) {
    return invalidArgument("bytes_per_rank must be finite and >= 0, got " + std::to_string(bytes_per_rank));
  }
  const int num_vertices = static_cast<int>(t.vertices.size());
  *total_bandwidth = 0;
  for (size_t i = 0; i < t.links.size(); ++i) {
    const Link& link = t.links[i];
    if (link.src < 0 || link.src >= num_vertices || link.dst < 0 || link.dst >= num_vertices) {
      return invalidArgument("link " + std::to_string(i) + " has an endpoint outside the topology");
    }
    if (!std::isfinite(link.bandwidth_gbps) || link.bandwidth_gbps <= 0) {
      return invalidArgument("link " + std::to_string(i) + " (" + t.vertices[link.src].name + " -> " +
                             t.vertices[link.dst].name + ") needs a positive finite bandwidth");
    }
    *total_bandwidth += link.bandwidth_gbps;
  }
  gpus->clear();
  for (const Vertex& v : t.vertices) {
    if (v.kind == VertexKind::kGpu) gpus->push_back(v.id);
  }
  if (gpus->size() < 2) return Status::ok();
  // Every GPU must reach gpus[0] and be reached from it; then every valid S has B_in(S) > 0 and B_out(S) > 0.
  const int first = gpus->front();
  std::vector<bool> from_first = reachable(t, first, true);
  std::vector<bool> to_first = reachable(t, first, false);
  for (int g : *gpus) {
    if (!from_first[g]) {
      return invalidArgument("GPU " + t.vertices[g].name + " is unreachable from " + t.vertices[first].name);
    }
    if (!to_first[g]) return invalidArgument("GPU " + t.vertices[g].name + " cannot reach " + t.vertices[first].name);
  }
  return Status::ok();
}

}  // namespace

Result<CutBound> allGatherCutBound(const Topology& t, double bytes_per_rank) {
  std::vector<int> gpus;
  double total_bandwidth = 0;
  BRAID_RETURN_IF_ERROR(checkBoundInputs(t, bytes_per_rank, &gpus, &total_bandwidth));
  const int num_vertices = static_cast<int>(t.vertices.size());
  const int n = static_cast<int>(gpus.size());
  if (n < 2) return CutBound{};

  // Start from S = {gpus[0]}.
  std::vector<bool> first(num_vertices);
  first[gpus[0]] = true;
  Candidate best = evaluate(t, gpus, first);
  const int source = num_vertices;
  const int sink = num_vertices + 1;
  while (true) {
    const double ratio = best.gpus_outside / best.bandwidth_in;
    const double infinite = 2.0 * (n + 1 + ratio * total_bandwidth);
    Candidate step_best = best;
    double step_value = best.gpus_outside - ratio * best.bandwidth_in;  // ~0
    // Case i >= 1: lowest GPU in S is gpus[i]; case i = 0 with gpus[j] forced outside, j = 1..n-1.
    for (int c = 1; c < 2 * n - 1; ++c) {
      FlowNetwork net(num_vertices + 2);
      for (const Link& link : t.links) {
        if (link.src != link.dst) net.addEdge(link.src, link.dst, ratio * link.bandwidth_gbps);
      }
      for (int g : gpus) net.addEdge(source, g, 1.0);
      if (c < n) {
        net.addEdge(gpus[c], sink, infinite);
        for (int j = 0; j < c; ++j) net.addEdge(source, gpus[j], infinite);
      } else {
        net.addEdge(gpus[0], sink, infinite);
        net.addEdge(source, gpus[c - n + 1], infinite);
      }
      net.maxFlow(source, sink);
      std::vector<bool> side = net.sourceSide();
      std::vector<bool> in_s(num_vertices);
      for (int v = 0; v < num_vertices; ++v) in_s[v] = !side[v];
      Candidate cand = evaluate(t, gpus, std::move(in_s));
      if (cand.gpus_outside == 0 || cand.gpus_outside == n) continue;  // guarded by the forced edges
      double value = cand.gpus_outside - ratio * cand.bandwidth_in;
      if (value > step_value) {
        step_value = value;
        step_best = std::move(cand);
      }
    }
    const double new_ratio = step_best.gpus_outside / step_best.bandwidth_in;
    if (!(new_ratio > ratio * (1 + 1e-14))) break;
    best = std::move(step_best);
  }

  CutBound bound;
  // bytes / (GB/s) = bytes / (1e3 bytes/us) = 1e-3 * bytes us.
  bound.time_us = best.gpus_outside * bytes_per_rank / (best.bandwidth_in * 1e3);
  for (int v = 0; v < num_vertices; ++v) {
    if (best.in_s[v]) bound.cut.push_back(v);
  }
  return bound;
}

Result<CutBound> reduceScatterCutBound(const Topology& t, double bytes_per_rank) {
  Topology reversed = t;
  for (Link& link : reversed.links) std::swap(link.src, link.dst);
  return allGatherCutBound(reversed, bytes_per_rank);
}

Result<CutBound> allReduceCutBound(const Topology& t, double bytes_per_rank) {
  BRAID_ASSIGN_OR_RETURN(CutBound reduce_scatter, reduceScatterCutBound(t, bytes_per_rank));
  BRAID_ASSIGN_OR_RETURN(CutBound all_gather, allGatherCutBound(t, bytes_per_rank));
  all_gather.time_us += reduce_scatter.time_us;
  return all_gather;
}

}  // namespace braid

namespace braid {

// ---- all-to-all cut bound, latency bound, both together ------------------------------------------------------
//
// All-to-all (anchors_algorithms.md §4, "Lower bounds"): rank r sends m/n bytes to every rank, so across a vertex
// set S holding a of the n GPUs, a(n-a)m/n bytes leave S and as many enter it; T >= a(n-a)m/n / B_out(S) and
// / B_in(S). Unlike all-gather this ratio is not a plain Dinkelbach target (the numerator is quadratic in the
// GPUs of S), so the bound is the maximum over a family of sets that covers the cuts that bind in practice:
// single GPUs (injection), nodes and sets of whole nodes (NICs and the network), and min cuts between the two
// halves of the GPUs in rank order (bisection).

namespace {

struct SetValue {
  double time_per_byte = 0;  // microseconds per byte of bytes_per_rank
  std::vector<bool> in_s;
};

// a(n-a)/n / min(B_out(S), B_in(S)) in us per byte of m (GB/s = 1e3 bytes/us); 0 when S holds no GPU or all.
double allToAllRatio(const Topology& t, const std::vector<int>& gpus, const std::vector<bool>& in_s) {
  double a = 0;
  for (int g : gpus) a += in_s[g] ? 1 : 0;
  const double n = static_cast<double>(gpus.size());
  if (a == 0 || a == n) return 0;
  double out = 0, in = 0;
  for (const Link& link : t.links) {
    if (in_s[link.src] && !in_s[link.dst]) out += link.bandwidth_gbps;
    if (!in_s[link.src] && in_s[link.dst]) in += link.bandwidth_gbps;
  }
  return a * (n - a) / n / (std::min(out, in) * 1e3);
}

// The source side of a minimum cut between vertex sets `from` and `to` (link capacities = bandwidths).
std::vector<bool> minCutSide(const Topology& t, const std::vector<int>& from, const std::vector<int>& to,
                             double total_bandwidth) {
  const int nv = static_cast<int>(t.vertices.size());
  FlowNetwork net(nv + 2);
  for (const Link& link : t.links) {
    if (link.src != link.dst) net.addEdge(link.src, link.dst, link.bandwidth_gbps);
  }
  const double infinite = 2 * total_bandwidth + 1;
  for (int v : from) net.addEdge(nv, v, infinite);
  for (int v : to) net.addEdge(v, nv + 1, infinite);
  net.maxFlow(nv, nv + 1);
  std::vector<bool> side = net.sourceSide();
  side.resize(nv);
  return side;
}

}  // namespace

Result<CutBound> allToAllCutBound(const Topology& t, double bytes_per_rank) {
  std::vector<int> gpus;
  double total_bandwidth = 0;
  BRAID_RETURN_IF_ERROR(checkBoundInputs(t, bytes_per_rank, &gpus, &total_bandwidth));
  const int n = static_cast<int>(gpus.size());
  if (n < 2) return CutBound{};
  const int nv = static_cast<int>(t.vertices.size());
  SetValue best;
  auto consider = [&](std::vector<bool> in_s) {
    const double r = allToAllRatio(t, gpus, in_s);
    if (r > best.time_per_byte) {
      best.time_per_byte = r;
      best.in_s = std::move(in_s);
    }
  };
  // Every GPU alone.
  for (int g : gpus) {
    std::vector<bool> in_s(nv, false);
    in_s[g] = true;
    consider(std::move(in_s));
  }
  // Nodes holding GPUs, and sets of whole nodes.
  std::vector<int> nodes;
  for (int q = 0; q < t.numNodes(); ++q) {
    bool has_gpu = false;
    for (int g : gpus) has_gpu = has_gpu || t.vertices[g].node == q;
    if (has_gpu) nodes.push_back(q);
  }
  const int k = static_cast<int>(nodes.size());
  auto nodeSet = [&](const std::vector<bool>& chosen) {
    std::vector<bool> in_s(nv, false);
    for (const Vertex& v : t.vertices) {
      for (int i = 0; i < k; ++i) {
        if (chosen[i] && v.node == nodes[i]) in_s[v.id] = true;
      }
    }
    return in_s;
  };
  if (k >= 2 && k <= 16) {
    for (uint32_t mask = 1; mask + 1 < (1u << k); ++mask) {
      std::vector<bool> chosen(k);
      for (int i = 0; i < k; ++i) chosen[i] = (mask >> i) & 1u;
      consider(nodeSet(chosen));
    }
  } else if (k > 16) {
    for (int i = 0; i < k; ++i) {
      std::vector<bool> single(k, false), prefix(k, false), half(k, false);
      single[i] = true;
      for (int j = 0; j <= i; ++j) prefix[j] = true;
      for (int j = 0; j < k / 2; ++j) half[(i + j) % k] = true;
      consider(nodeSet(single));
      if (i + 1 < k) consider(nodeSet(prefix));
      consider(nodeSet(half));
    }
  }
  // Min cuts between the GPU halves in rank order, both ways.
  std::vector<int> low(gpus.begin(), gpus.begin() + n / 2), high(gpus.begin() + n / 2, gpus.end());
  consider(minCutSide(t, low, high, total_bandwidth));
  consider(minCutSide(t, high, low, total_bandwidth));

  CutBound bound;
  bound.time_us = best.time_per_byte * bytes_per_rank;
  for (int v = 0; v < nv; ++v) {
    if (!best.in_s.empty() && best.in_s[v]) bound.cut.push_back(v);
  }
  return bound;
}

Result<LatencyBound> latencyBound(const Topology& t, CollectiveKind collective) {
  if (collective == CollectiveKind::kCustom) {
    return invalidArgument("latency bound: a custom collective has no postcondition to bound");
  }
  std::vector<int> gpus;
  double total_bandwidth = 0;
  BRAID_RETURN_IF_ERROR(checkBoundInputs(t, 0, &gpus, &total_bandwidth));
  LatencyBound bound;
  const int n = static_cast<int>(gpus.size());
  if (n < 2) return bound;
  while ((1 << bound.steps) < n) ++bound.steps;
  // Dijkstra on summed link alpha from every GPU (relays anywhere, GPUs included: a lower bound on any route).
  const int nv = static_cast<int>(t.vertices.size());
  std::vector<std::vector<int>> out(nv);
  for (size_t i = 0; i < t.links.size(); ++i) out[t.links[i].src].push_back(static_cast<int>(i));
  bound.min_alpha_us = std::numeric_limits<double>::infinity();
  for (int src : gpus) {
    std::vector<double> dist(nv, std::numeric_limits<double>::infinity());
    using Item = std::pair<double, int>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
    dist[src] = 0;
    queue.push({0, src});
    while (!queue.empty()) {
      auto [d, v] = queue.top();
      queue.pop();
      if (d > dist[v]) continue;
      for (int l : out[v]) {
        const double nd = d + std::max(0.0, t.links[l].alpha_us);
        if (nd < dist[t.links[l].dst]) {
          dist[t.links[l].dst] = nd;
          queue.push({nd, t.links[l].dst});
        }
      }
    }
    for (int dst : gpus) {
      if (dst == src) continue;
      bound.min_alpha_us = std::min(bound.min_alpha_us, dist[dst]);
      bound.diameter_us = std::max(bound.diameter_us, dist[dst]);
    }
  }
  bound.single_port_us = bound.steps * bound.min_alpha_us;
  bound.time_us = bound.diameter_us;
  return bound;
}

Result<CollectiveBound> collectiveBound(const Topology& t, CollectiveKind collective, uint64_t size_bytes) {
  const int n = t.numGpus();
  if (n < 1) return invalidArgument("topology '" + t.name + "' has no GPUs to bound a collective over");
  const double size = static_cast<double>(size_bytes);
  Result<CutBound> cut = Status(StatusCode::kInternalError, "unset");
  switch (collective) {
    case CollectiveKind::kAllGather: cut = allGatherCutBound(t, size / n); break;
    case CollectiveKind::kReduceScatter: cut = reduceScatterCutBound(t, size / n); break;
    case CollectiveKind::kAllReduce: cut = allReduceCutBound(t, size / n); break;
    case CollectiveKind::kAllToAll: cut = allToAllCutBound(t, size); break;
    default:
      return unsupported(std::string("no bandwidth bound for ") + collectiveName(collective) +
                         " (allgather, reducescatter, allreduce and alltoall have one)");
  }
  if (!cut) return cut.status();
  // The route LP: above kRouteBoundMaxGpus it is not solved (route_us = 0, the cut bound alone).
  double route_us = 0;
  if (n <= kRouteBoundMaxGpus) {
    BRAID_ASSIGN_OR_RETURN(route_us,
                           routeBound(t, collective, collective == CollectiveKind::kAllToAll ? size : size / n));
  }
  // The all-to-all max-concurrent flow, up to kAllToAllFlowMaxGpus (0.7 s at 32 GPUs on a 2-core machine).
  double flow_us = 0;
  if (collective == CollectiveKind::kAllToAll && n >= 2 && n <= kAllToAllFlowMaxGpus) {
    BRAID_ASSIGN_OR_RETURN(const AllToAllFlow flow, allToAllFlow(t));
    flow_us = flow.us_per_byte * size;
  }
  BRAID_ASSIGN_OR_RETURN(LatencyBound latency, latencyBound(t, collective));
  CollectiveBound bound;
  bound.cut_us = cut->time_us;
  bound.route_us = route_us;
  bound.flow_us = flow_us;
  bound.bandwidth_us = std::max({bound.cut_us, bound.route_us, bound.flow_us});
  bound.latency_us = latency.time_us;
  bound.time_us = std::max(bound.bandwidth_us, bound.latency_us);
  bound.cut = cut->cut;
  return bound;
}

Result<std::vector<CollectiveBound>> collectiveBounds(const Topology& t, CollectiveKind collective,
                                                      const std::vector<uint64_t>& sizes) {
  std::vector<CollectiveBound> out;
  if (sizes.empty()) return out;
  const uint64_t ref_size = std::max<uint64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
  BRAID_ASSIGN_OR_RETURN(CollectiveBound ref, collectiveBound(t, collective, ref_size));
  for (uint64_t size : sizes) {
    CollectiveBound b = ref;
    const double scale = static_cast<double>(size) / static_cast<double>(ref_size);
    b.cut_us = ref.cut_us * scale;
    b.route_us = ref.route_us * scale;
    b.flow_us = ref.flow_us * scale;
    b.bandwidth_us = std::max({b.cut_us, b.route_us, b.flow_us});
    b.time_us = std::max(b.bandwidth_us, b.latency_us);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace braid
