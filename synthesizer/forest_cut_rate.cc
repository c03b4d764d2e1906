// The tree rate under fixed link capacities (forest.h cappedTreeRate): the flow condition of Edmonds' branching
// theorem (ForestColl, Zhao et al., arXiv 2402.06787 §4: the optimality condition, one max-flow per root set) read
// as a ratio, min over destinations v and nonempty S not holding v of c(S -> outside S) / |S|, found exactly by
// Dinkelbach's iteration on integer max-flows (Boost.Graph's Boykov-Kolmogorov).
//
// For a destination v and a rate R = p / q, the network has an arc of capacity p from a source to every rank but v
// and every logical link with capacity q c_l (c_l in integer units of 1e-9 GB/s, rounded down). Its max-flow reaches
// (n - 1) p iff no S has c(S -> outside) < R |S|; otherwise the source side of a minimum cut is such an S, and its
// ratio c(S -> outside) / |S| < R is the next R. Each step strictly lowers R through the finitely many ratios, and
// the ratio of a minimum cut is the smallest over the cuts the flow certifies, so a few steps suffice (measured: 1-3
// per destination on the shipped topologies).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "synthesizer/flow_graph.h"
#include "synthesizer/forest.h"

namespace braid::synth {
namespace {

constexpr double kUnitsPerGbps = 1e9;  // integer capacity units: 1e-9 GB/s
constexpr __int128 kInt64Max = std::numeric_limits<int64_t>::max();

/// A rational rate p / q (units of 1e-9 GB/s), q >= 1.
struct Ratio {
  int64_t p = 0;
  int64_t q = 1;
  bool operator<(const Ratio& o) const { return static_cast<__int128>(p) * o.q < static_cast<__int128>(o.p) * q; }
  double gbps() const { return static_cast<double>(p) / static_cast<double>(q) / kUnitsPerGbps; }
};

/// The flow network of the file comment: ranks 0..n-1, the source n.
class RateNetwork {
 public:
  RateNetwork(const LogicalTopology& logical, const std::vector<int64_t>& units)
      : n_(logical.num_ranks), flow_(logical.num_ranks + 1) {
    for (const LogicalLink& l : logical.links) {
      if (units[l.id] > 0) link_arcs_.push_back({flow_.addArc(l.src, l.dst, 0), units[l.id]});
    }
    for (int u = 0; u < n_; ++u) source_arcs_.push_back(flow_.addArc(n_, u, 0));
  }

  /// Max-flow into `v` at rate r; afterwards sourceSide() gives the minimum cut nearest the source.
  __int128 maxFlowAt(int v, const Ratio& r) {
    for (const auto& [arc, units] : link_arcs_) flow_.setCapacity(arc, units * r.q);
    for (int u = 0; u < n_; ++u) flow_.setCapacity(source_arcs_[u], u == v ? 0 : r.p);
    return flow_.maxFlow(n_, v);
  }
  /// After maxFlowAt: the ranks the source reaches in the residual network (0/1 per rank).
  std::vector<char> sourceSide() const {
    std::vector<char> side = flow_.residualReachable(n_);
    side.pop_back();
    return side;
  }

 private:
  int n_;
  FlowGraph flow_;
  std::vector<std::pair<FlowGraph::Arc, int64_t>> link_arcs_;
  std::vector<FlowGraph::Arc> source_arcs_;
};

}  // namespace

Result<double> cappedTreeRate(const LogicalTopology& logical, const std::vector<double>& caps,
                              const std::vector<int>& destinations, int* max_flows) {
  const int n = logical.num_ranks;
  if (caps.size() != logical.links.size()) {
    return Status(StatusCode::kInvalidArgument, "cappedTreeRate: one capacity per logical link is needed");
  }
  std::vector<int64_t> units(caps.size(), 0);
  for (size_t l = 0; l < caps.size(); ++l) {
    if (!(caps[l] >= 0)) return Status(StatusCode::kInvalidArgument, "cappedTreeRate: a capacity is negative");
    units[l] = static_cast<int64_t>(std::floor(std::min(caps[l], 1e6) * kUnitsPerGbps));
  }
  const int64_t max_units = units.empty() ? 0 : *std::max_element(units.begin(), units.end());
  RateNetwork network(logical, units);
  int flows = 0;
  Ratio rate{-1, 1};
  for (int v : destinations) {
    // Upper bound for v: S = every other rank, c(into v) / (n - 1).
    Ratio r{0, n - 1};
    for (int l : logical.in_links[v]) r.p += units[l];
    if (rate.p >= 0 && rate < r) r = rate;
    while (r.p > 0) {
      if (static_cast<__int128>(max_units) * r.q > kInt64Max || static_cast<__int128>(n - 1) * r.p > kInt64Max) {
        return Status(StatusCode::kInvalidArgument,
                      "cappedTreeRate: capacities and rank count too large for exact 64-bit max-flows");
      }
      ++flows;
      const __int128 flow = network.maxFlowAt(v, r);
      if (flow >= static_cast<__int128>(n - 1) * r.p) break;
      Ratio next{0, 0};
      std::vector<char> in_s = network.sourceSide();
      in_s[v] = 0;
      for (int u = 0; u < n; ++u) next.q += in_s[u];
      if (next.q == 0) return internalError("cappedTreeRate: a short max-flow without a cut below the rate (a bug)");
      for (const LogicalLink& l : logical.links) {
        if (in_s[l.src] && !in_s[l.dst]) next.p += units[l.id];
      }
      if (!(next < r)) return internalError("cappedTreeRate: Dinkelbach's step did not lower the rate (a bug)");
      r = next;
    }
    if (rate.p < 0 || r < rate) rate = r;
    if (rate.p == 0) break;
  }
  if (max_flows != nullptr) *max_flows = flows;
  if (rate.p <= 0) {
    return Status(StatusCode::kInfeasible, "the logical links kept do not connect every rank to every other");
  }
  return rate.gbps();
}

}  // namespace braid::synth
