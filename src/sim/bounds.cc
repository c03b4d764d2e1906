// ForestColl cut bound, computed exactly by Dinkelbach iteration over s-t min cuts.
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
#include <cmath>
#include <limits>
#include <queue>
#include <string>
#include <utility>
#include <vector>

namespace braid {
namespace {

/// Dinic max-flow on double capacities; after maxFlow, sourceSide() is the min cut's source side.
class FlowNetwork {
 public:
  explicit FlowNetwork(int n) : adj_(n), level_(n), next_(n) {}

  void addEdge(int a, int b, double cap) {
    adj_[a].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({b, cap});
    adj_[b].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({a, 0});
  }

  double maxFlow(int s, int t, double eps) {
    eps_ = eps;
    double flow = 0;
    while (bfs(s, t)) {
      std::fill(next_.begin(), next_.end(), 0);
      while (true) {
        double f = dfs(s, t, std::numeric_limits<double>::infinity());
        if (f <= eps_) break;
        flow += f;
      }
    }
    return flow;
  }

  /// Vertices reachable from s through residual capacity > eps (call after maxFlow).
  std::vector<bool> sourceSide(int s) {
    bfs(s, -1);
    std::vector<bool> side(adj_.size());
    for (size_t v = 0; v < adj_.size(); ++v) side[v] = level_[v] >= 0;
    return side;
  }

 private:
  struct Edge {
    int to;
    double cap;
  };

  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> queue;
    level_[s] = 0;
    queue.push(s);
    while (!queue.empty()) {
      int v = queue.front();
      queue.pop();
      for (int e : adj_[v]) {
        if (edges_[e].cap > eps_ && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[v] + 1;
          queue.push(edges_[e].to);
        }
      }
    }
    return t >= 0 && level_[t] >= 0;
  }

  double dfs(int v, int t, double pushed) {
    if (v == t) return pushed;
    for (int& i = next_[v]; i < static_cast<int>(adj_[v].size()); ++i) {
      int e = adj_[v][i];
      Edge& edge = edges_[e];
      if (edge.cap <= eps_ || level_[edge.to] != level_[v] + 1) continue;
      double f = dfs(edge.to, t, std::min(pushed, edge.cap));
      if (f > eps_) {
        edge.cap -= f;
        edges_[e ^ 1].cap += f;
        return f;
      }
    }
    return 0;
  }

  std::vector<Edge> edges_;
  std::vector<std::vector<int>> adj_;
  std::vector<int> level_;
  std::vector<int> next_;
  double eps_ = 0;
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
    const double eps = 1e-13 * infinite;
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
      net.maxFlow(source, sink, eps);
      std::vector<bool> side = net.sourceSide(source);
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
