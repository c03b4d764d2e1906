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

}  // namespace

Result<CutBound> allGatherCutBound(const Topology& t, double bytes_per_rank) {
  if (!std::isfinite(bytes_per_rank) || bytes_per_rank < 0) {
    return invalidArgument("bytes_per_rank must be finite and >= 0, got " + std::to_string(bytes_per_rank));
  }
  const int num_vertices = static_cast<int>(t.vertices.size());
  double total_bandwidth = 0;
  for (size_t i = 0; i < t.links.size(); ++i) {
    const Link& link = t.links[i];
    if (link.src < 0 || link.src >= num_vertices || link.dst < 0 || link.dst >= num_vertices) {
      return invalidArgument("link " + std::to_string(i) + " has an endpoint outside the topology");
    }
    if (!std::isfinite(link.bandwidth_gbps) || link.bandwidth_gbps <= 0) {
      return invalidArgument("link " + std::to_string(i) + " (" + t.vertices[link.src].name + " -> " +
                             t.vertices[link.dst].name + ") needs a positive finite bandwidth");
    }
    total_bandwidth += link.bandwidth_gbps;
  }
  std::vector<int> gpus;
  for (const Vertex& v : t.vertices) {
    if (v.kind == VertexKind::kGpu) gpus.push_back(v.id);
  }
  const int n = static_cast<int>(gpus.size());
  if (n < 2) return CutBound{};

  // Every GPU must reach gpus[0] and be reached from it; then every valid S has B_in(S) > 0.
  std::vector<bool> from_first = reachable(t, gpus[0], true);
  std::vector<bool> to_first = reachable(t, gpus[0], false);
  for (int g : gpus) {
    if (!from_first[g]) {
      return invalidArgument("GPU " + t.vertices[g].name + " is unreachable from " + t.vertices[gpus[0]].name);
    }
    if (!to_first[g]) {
      return invalidArgument("GPU " + t.vertices[g].name + " cannot reach " + t.vertices[gpus[0]].name);
    }
  }

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
