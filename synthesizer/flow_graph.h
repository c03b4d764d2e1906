// An integer flow network on Boost.Graph for Boykov-Kolmogorov max-flows, shared by the arborescence packing
// (forest_pack.cc) and the capped tree rate (forest_cut_rate.cc). Private to synthesizer/.
#pragma once

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <cstdint>
#include <vector>

namespace braid::synth {

class FlowGraph {
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;

 public:
  using Arc = Traits::edge_descriptor;

  explicit FlowGraph(int vertices) : graph_(vertices) {}

  /// Adds the arc a -> b and its residual twin b -> a (capacity 0). Arc descriptors stay valid as arcs are added:
  /// adjacency_list keeps every edge's bundled property on the heap (boost/graph/detail/adjacency_list.hpp,
  /// stored_edge_property), and a descriptor points at that property.
  Arc addArc(int a, int b, int64_t capacity) {
    const Arc forward = boost::add_edge(a, b, graph_).first;
    const Arc backward = boost::add_edge(b, a, graph_).first;
    graph_[forward].capacity = capacity;
    graph_[backward].capacity = 0;
    graph_[forward].reverse = backward;
    graph_[backward].reverse = forward;
    return forward;
  }
  void setCapacity(Arc arc, int64_t capacity) { graph_[arc].capacity = capacity; }

  /// The max-flow from `source` to `sink` at the capacities set now.
  int64_t maxFlow(int source, int sink) {
    const size_t vertices = boost::num_vertices(graph_);
    pred_.resize(vertices);
    dist_.resize(vertices);
    colors_.assign(vertices, boost::default_color_type::white_color);
    const auto index = boost::get(boost::vertex_index, graph_);
    return boost::boykov_kolmogorov_max_flow(
        graph_, boost::get(&ArcProps::capacity, graph_), boost::get(&ArcProps::residual, graph_),
        boost::get(&ArcProps::reverse, graph_), boost::make_iterator_property_map(pred_.begin(), index),
        boost::make_iterator_property_map(colors_.begin(), index),
        boost::make_iterator_property_map(dist_.begin(), index), index, source, sink);
  }

  /// After maxFlow: whether `v` is in the search tree grown from the source (Boykov-Kolmogorov's black vertices).
  bool inSourceTree(int v) const { return colors_[v] == boost::default_color_type::black_color; }

  /// After maxFlow: the vertices `source` reaches over arcs with residual capacity (the source side of the minimum
  /// cut nearest the source), as 0/1 per vertex.
  std::vector<char> residualReachable(int source) const {
    std::vector<char> seen(boost::num_vertices(graph_), 0);
    std::vector<int> stack = {source};
    seen[source] = 1;
    while (!stack.empty()) {
      const int a = stack.back();
      stack.pop_back();
      for (auto [e, end] = boost::out_edges(a, graph_); e != end; ++e) {
        const int b = static_cast<int>(boost::target(*e, graph_));
        if (!seen[b] && graph_[*e].residual > 0) {
          seen[b] = 1;
          stack.push_back(b);
        }
      }
    }
    return seen;
  }

 private:
  struct ArcProps {
    int64_t capacity = 0;
    int64_t residual = 0;
    Arc reverse;
  };
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, ArcProps>;

  Graph graph_;
  std::vector<Arc> pred_;
  std::vector<int64_t> dist_;
  std::vector<boost::default_color_type> colors_;
};

}  // namespace braid::synth
