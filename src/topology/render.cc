// Rendering a Topology: JSON (topologyToJson), a text summary (describeTopology) and an SVG picture
// (drawTopologySvg).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "braid/topology.h"
#include "common/text.h"

namespace braid {

namespace {

std::string fmtNum(double v) { return fmt::format("{:.4g}", v); }

// "gpu0-gpu7" for a contiguous run of ranks, else a comma list.
std::string rankList(const Topology& t, const std::vector<int>& gpu_ids) {
  if (gpu_ids.empty()) return "none";
  std::vector<int> ranks;
  for (int id : gpu_ids) ranks.push_back(t.vertices[id].rank);
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j > i ? fmt::format("gpu{}-gpu{}", ranks[i], ranks[j]) : fmt::format("gpu{}", ranks[i]);
    i = j + 1;
  }
  return out;
}

// A vertex's name without its node prefix ("node0.nic3" -> "nic3"; an imported "node0.pci0000:07:00.0" ->
// "pci0000:07:00.0").
std::string shortName(const Topology& t, const Vertex& v) {
  if (v.node >= 0 && v.node < t.numNodes()) {
    const std::string prefix = t.nodes[v.node].name + ".";
    if (v.name.compare(0, prefix.size(), prefix) == 0 && v.name.size() > prefix.size())
      return v.name.substr(prefix.size());
  }
  return v.name;
}

}  // namespace

namespace {

/// Class of a route between two GPUs, in the vocabulary of `nvidia-smi topo -m`:
/// "NV<n>" when the route is NVLink only (n = fewest lanes on it), "NET" through a network link,
/// "SYS" across the inter-socket link, "C2C" chip-to-chip, "NODE" through a CPU (between its host bridges), "PHB"
/// through a host bridge (a PCIe switch vertex named "host_bridge*", as the nvidia-smi importer models PHB), "PXB"
/// through several PCIe switches, "PIX" through one.
std::string routeClass(const Topology& t, const Route& r) {
  bool all_nvlink = true, any_net = false, any_sys = false, any_c2c = false;
  int min_lanes = 1 << 30;
  int cpus = 0, pcie_switches = 0, host_bridges = 0;
  for (size_t i = 0; i < r.links.size(); ++i) {
    const Link& l = t.links[r.links[i]];
    all_nvlink = all_nvlink && l.kind == LinkKind::kNvlink;
    any_net = any_net || l.kind == LinkKind::kNet;
    any_sys = any_sys || l.kind == LinkKind::kSys;
    any_c2c = any_c2c || l.kind == LinkKind::kC2c;
    min_lanes = std::min(min_lanes, l.lanes);
    if (i + 1 < r.links.size()) {
      const VertexKind k = t.vertices[l.dst].kind;
      cpus += k == VertexKind::kCpu ? 1 : 0;
      pcie_switches += k == VertexKind::kPcieSwitch ? 1 : 0;
      host_bridges += k == VertexKind::kPcieSwitch && t.vertices[l.dst].name.rfind("host_bridge", 0) == 0 ? 1 : 0;
    }
  }
  if (all_nvlink) return fmt::format("NV{}", min_lanes);
  if (any_net) return "NET";
  if (any_sys) return "SYS";
  if (any_c2c) return "C2C";
  if (cpus > 0) return "NODE";
  if (host_bridges > 0) return "PHB";
  return pcie_switches > 1 ? "PXB" : "PIX";
}

// GPU x GPU best routes, computed once for the text and JSON views: cls[a][b] is routeClass ("X" for the GPU
// itself, "-" with no route), bw[a][b] the bottleneck in GB/s (nullopt on the diagonal and with no route).
struct RouteMatrix {
  std::vector<std::vector<std::string>> cls;
  std::vector<std::vector<std::optional<double>>> bw;
};

// The matrices are shown (text) and written (JSON) for at most this many GPUs.
constexpr int kMaxMatrixGpus = 32;

RouteMatrix routeMatrix(const Topology& t) {
  const int gpus = t.numGpus();
  RouteMatrix m;
  m.cls.assign(gpus, std::vector<std::string>(gpus, "-"));
  m.bw.assign(gpus, std::vector<std::optional<double>>(gpus));
  const std::vector<std::optional<Route>> routes = allGpuRoutes(t);  // route(a, b) for every pair at once
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) {
      if (a == b) {
        m.cls[a][b] = "X";
        continue;
      }
      const std::optional<Route>& r = routes[static_cast<size_t>(a) * gpus + b];
      if (!r) continue;
      m.cls[a][b] = routeClass(t, *r);
      m.bw[a][b] = r->bandwidth_gbps;
    }
  }
  return m;
}

// Each GPU's nearest NICs (nicAffinity), grouped by rank; ranks with no reachable NIC have an empty list.
std::vector<std::vector<NicAffinity>> affinityByRank(const Topology& t) {
  std::vector<std::vector<NicAffinity>> by_rank(std::max(0, t.numGpus()));
  for (const NicAffinity& a : nicAffinity(t)) {
    if (a.rank >= 0 && a.rank < static_cast<int>(by_rank.size())) by_rank[a.rank].push_back(a);
  }
  return by_rank;
}

bool hasNics(const Topology& t) {
  for (const Node& n : t.nodes) {
    if (!n.nics.empty()) return true;
  }
  return false;
}

}  // namespace

std::string topologyToJson(const Topology& t) {
  using json = nlohmann::ordered_json;
  json j;
  j["name"] = t.name;
  j["source"] = t.source;
  j["gpus"] = t.numGpus();
  j["nodes"] = t.numNodes();
  json nodes = json::array();
  for (const Node& n : t.nodes) {
    json gpus = json::array(), nics = json::array();
    for (int id : n.gpus) gpus.push_back(t.vertices[id].name);
    for (int id : n.nics) nics.push_back(t.vertices[id].name);
    nodes.push_back({{"name", n.name}, {"template", n.tmpl}, {"gpus", gpus}, {"nics", nics}});
  }
  j["node_list"] = nodes;
  json vertices = json::array();
  for (const Vertex& v : t.vertices) {
    json jv = {{"id", v.id}, {"name", v.name}, {"kind", vertexKindName(v.kind)}};
    jv["node"] = v.node >= 0 && v.node < t.numNodes() ? json(t.nodes[v.node].name) : json(nullptr);
    if (v.kind == VertexKind::kGpu) jv["rank"] = v.rank;
    jv["local"] = v.local;
    if (!v.model.empty()) jv["model"] = v.model;
    if (!v.busid.empty()) jv["busid"] = v.busid;
    if (v.numa >= 0) jv["numa"] = v.numa;
    vertices.push_back(jv);
  }
  j["vertices"] = vertices;
  json links = json::array();
  auto name = [&](int id) {
    return id >= 0 && id < static_cast<int>(t.vertices.size()) ? t.vertices[id].name : std::string("?");
  };
  for (const Link& l : t.links) {
    links.push_back({{"src", name(l.src)},
                     {"dst", name(l.dst)},
                     {"kind", linkKindName(l.kind)},
                     {"lanes", l.lanes},
                     {"bandwidth_gbps", l.bandwidth_gbps},
                     {"alpha_us", l.alpha_us}});
  }
  j["links"] = links;
  // GPU -> nearest NIC(s) (nicAffinity): one entry per GPU and NIC; ties give a GPU several entries.
  json affinity = json::array();
  for (const NicAffinity& a : nicAffinity(t)) {
    affinity.push_back({{"gpu", name(t.gpuVertex(a.rank))},
                        {"nic", name(a.nic_vertex)},
                        {"class", a.path_class},
                        {"bandwidth_gbps", a.bandwidth_gbps},
                        {"hops", a.hops}});
  }
  j["nic_affinity"] = affinity;
  // GPU x GPU best routes, as the text view's matrices: class "X" on the diagonal and "-" with no route,
  // bandwidth null for both. Null above kMaxMatrixGpus GPUs, where the text view omits the matrices too.
  const int gpus = t.numGpus();
  if (gpus > 0 && gpus <= kMaxMatrixGpus) {
    const RouteMatrix m = routeMatrix(t);
    json names = json::array(), cls = json::array(), bw = json::array();
    for (int a = 0; a < gpus; ++a) {
      names.push_back(fmt::format("gpu{}", a));
      json bw_row = json::array();
      for (int b = 0; b < gpus; ++b) bw_row.push_back(m.bw[a][b] ? json(*m.bw[a][b]) : json(nullptr));
      cls.push_back(m.cls[a]);
      bw.push_back(bw_row);
    }
    j["route_matrix"] = {{"gpus", names}, {"class", cls}, {"bandwidth_gbps", bw}};
  } else {
    j["route_matrix"] = nullptr;
  }
  j["notes"] = t.notes;
  return dumpJson(j, 2) + "\n";
}

std::string describeTopology(const Topology& t) {
  std::string out;
  out += fmt::format("Topology {}", t.name.empty() ? "(unnamed)" : t.name);
  if (!t.source.empty()) out += fmt::format("  [{}]", t.source);
  out += "\n";
  std::map<VertexKind, int> count;
  for (const Vertex& v : t.vertices) ++count[v.kind];
  out += fmt::format(
      "  {} GPUs in {} node(s); {} NICs, {} NVSwitch, {} PCIe switches, {} CPUs, {} network switches; {} directed "
      "links\n",
      count[VertexKind::kGpu], t.numNodes(), count[VertexKind::kNic], count[VertexKind::kNvSwitch],
      count[VertexKind::kPcieSwitch], count[VertexKind::kCpu], count[VertexKind::kNetSwitch], t.links.size());

  out += "Nodes:\n";
  const size_t shown_nodes = t.nodes.size() <= 16 ? t.nodes.size() : 8;
  for (size_t k = 0; k < shown_nodes; ++k) {
    const Node& n = t.nodes[k];
    std::string gpu_model = n.gpus.empty() ? "" : t.vertices[n.gpus[0]].model;
    std::string nic_model = n.nics.empty() ? "" : t.vertices[n.nics[0]].model;
    out +=
        fmt::format("  {}{}: {} GPUs ({}){}, {} NICs{}\n", n.name, n.tmpl.empty() ? "" : fmt::format(" [{}]", n.tmpl),
                    n.gpus.size(), rankList(t, n.gpus), gpu_model.empty() ? "" : " " + gpu_model, n.nics.size(),
                    nic_model.empty() ? "" : " " + nic_model);
  }
  if (shown_nodes < t.nodes.size()) out += fmt::format("  ... and {} more nodes\n", t.nodes.size() - shown_nodes);

  // Link classes: directed links grouped by (kind, endpoint kinds, lanes, bandwidth, alpha).
  using Key = std::tuple<int, std::string, int, double, double>;
  std::map<Key, int> classes;
  for (const Link& l : t.links) {
    const std::string ends =
        fmt::format("{}->{}", vertexKindName(t.vertices[l.src].kind), vertexKindName(t.vertices[l.dst].kind));
    ++classes[{static_cast<int>(l.kind), ends, l.lanes, l.bandwidth_gbps, l.alpha_us}];
  }
  out += "Link classes (directed links; bandwidth per direction, all lanes together):\n";
  out += fmt::format("  {:<7} {:<24} {:>5} {:>10} {:>9} {:>7}\n", "kind", "endpoints", "lanes", "GB/s", "alpha us",
                     "count");
  for (const auto& [key, n] : classes) {
    const auto& [kind, ends, lanes, bw, alpha] = key;
    out += fmt::format("  {:<7} {:<24} {:>5} {:>10} {:>9} {:>7}\n", linkKindName(static_cast<LinkKind>(kind)), ends,
                       lanes, fmtNum(bw), fmtNum(alpha), n);
  }

  const int gpus = t.numGpus();
  if (gpus <= kMaxMatrixGpus && gpus > 0) {
    const RouteMatrix m = routeMatrix(t);
    out +=
        "GPU x GPU best route (as nvidia-smi topo -m: NV# = NVLink lanes, PIX/PXB/PHB/NODE = PCIe, SYS = across "
        "sockets, NET = network; - = no route: the topology has no path between the two):\n";
    std::string header = "      ";
    for (int b = 0; b < gpus; ++b) header += fmt::format("{:>6}", fmt::format("gpu{}", b));
    out += header + "\n";
    for (int a = 0; a < gpus; ++a) {
      std::string row = fmt::format("{:<6}", fmt::format("gpu{}", a));
      for (int b = 0; b < gpus; ++b) row += fmt::format("{:>6}", m.cls[a][b]);
      out += row + "\n";
    }
    out += "GPU x GPU route bottleneck bandwidth (GB/s; - = no route):\n";
    out += header + "\n";
    for (int a = 0; a < gpus; ++a) {
      std::string row = fmt::format("{:<6}", fmt::format("gpu{}", a));
      for (int b = 0; b < gpus; ++b) {
        const std::string cell = a == b ? "X" : (m.bw[a][b] ? fmtNum(*m.bw[a][b]) : "-");
        row += fmt::format("{:>6}", cell);
      }
      out += row + "\n";
    }
  } else if (gpus > kMaxMatrixGpus) {
    out += fmt::format("GPU x GPU matrix omitted ({} GPUs > {}).\n", gpus, kMaxMatrixGpus);
  }
  if (gpus >= 2) {
    std::optional<Route> r = t.route(0, gpus - 1);
    if (r) {
      out += fmt::format("Route gpu0 -> gpu{}:", gpus - 1);
      for (int li : r->links) out += fmt::format(" {}", t.vertices[t.links[li].src].name);
      out += fmt::format(" {} ({} GB/s bottleneck on {}, alpha {} us)\n", t.vertices[t.links[r->links.back()].dst].name,
                         fmtNum(r->bandwidth_gbps), linkKindName(r->slowest_kind), fmtNum(r->alpha_us));
    }
  }
  if (gpus > 0 && hasNics(t)) {
    // One line per GPU: its nearest NIC(s) in its node, the NCCL path type, the route's bottleneck and hops.
    out +=
        "GPU -> nearest NIC (NCCL path type: PIX = one PCIe switch, PXB = several, PHB = through the CPU "
        "(nvidia-smi: PHB or NODE), SYS = across sockets; ties listed):\n";
    const std::vector<std::vector<NicAffinity>> by_rank = affinityByRank(t);
    const int shown = gpus <= 2 * kMaxMatrixGpus ? gpus : kMaxMatrixGpus;
    for (int rank = 0; rank < shown; ++rank) {
      if (t.gpuVertex(rank) < 0) continue;
      const Vertex& g = t.vertices[t.gpuVertex(rank)];
      std::string line = fmt::format("  {:<6}", g.name);
      if (!g.busid.empty()) line += fmt::format(" {:<13}", g.busid);
      const std::vector<NicAffinity>& near = by_rank[rank];
      if (near.empty()) {
        out += line + " none (no NIC reachable in its node)\n";
        continue;
      }
      std::string nics;
      int min_hops = near.front().hops, max_hops = near.front().hops;
      for (const NicAffinity& a : near) {
        nics += (nics.empty() ? "" : ", ") + t.vertices[a.nic_vertex].name;
        min_hops = std::min(min_hops, a.hops);
        max_hops = std::max(max_hops, a.hops);
      }
      const std::string hops =
          min_hops == max_hops ? fmt::format("{}", min_hops) : fmt::format("{}-{}", min_hops, max_hops);
      out += line + fmt::format(" {}  {}  {} GB/s  {} hops\n", nics, near.front().path_class,
                                fmtNum(near.front().bandwidth_gbps), hops);
    }
    if (shown < gpus) out += fmt::format("  ... and {} more GPUs (all in --json)\n", gpus - shown);
  }
  if (!t.notes.empty()) {
    out += "Notes:\n";
    for (const std::string& n : t.notes) out += fmt::format("  - {}\n", n);
  }
  return out;
}

namespace {

const char* linkColor(LinkKind k) {
  switch (k) {
    case LinkKind::kNvlink: return "#5f9e00";
    case LinkKind::kPcie: return "#1f77b4";
    case LinkKind::kSys: return "#d62728";
    case LinkKind::kNet: return "#ff7f0e";
    case LinkKind::kC2c: return "#9467bd";
  }
  return "#000000";
}

const char* vertexFill(VertexKind k) {
  switch (k) {
    case VertexKind::kGpu: return "#e8f5d0";
    case VertexKind::kNic: return "#fde3c8";
    case VertexKind::kNvSwitch: return "#c9e6a0";
    case VertexKind::kPcieSwitch: return "#d6e6f5";
    case VertexKind::kCpu: return "#eeeeee";
    case VertexKind::kNetSwitch: return "#fbd3a7";
  }
  return "#ffffff";
}

struct Box {
  double x = 0, y = 0;  // centre
  double w = 0, h = 0;
  int row = 0;
  bool placed = false;
};

}  // namespace

std::string drawTopologySvg(const Topology& t) {
  constexpr double kSlot = 74, kRowH = 78, kPad = 28, kTitleH = 40, kBoxW = 60, kBoxH = 28, kNodeGap = 40,
                   kArcRoom = 78;
  const int nv = static_cast<int>(t.vertices.size());
  std::vector<Box> box(nv);
  std::vector<std::vector<int>> adj(nv);
  for (const Link& l : t.links) {
    if (l.src < 0 || l.src >= nv || l.dst < 0 || l.dst >= nv) continue;
    adj[l.src].push_back(l.dst);
    adj[l.dst].push_back(l.src);
  }
  auto barycenter = [&](int v, double fallback) {
    double sum = 0;
    int n = 0;
    for (int u : adj[v]) {
      if (box[u].placed) {
        sum += box[u].x;
        ++n;
      }
    }
    return n ? sum / n : fallback;
  };
  // Places one row of vertices on evenly spaced slots across [left, left + width), ordered by barycentre.
  auto placeRow = [&](std::vector<int> row, double left, double width, double y, bool by_barycenter) {
    if (row.empty()) return;
    std::vector<std::pair<double, int>> order;
    for (size_t i = 0; i < row.size(); ++i) {
      const double key =
          by_barycenter ? barycenter(row[i], left + width * (i + 0.5) / row.size()) : static_cast<double>(i);
      order.push_back({key, static_cast<int>(i)});
    }
    std::stable_sort(order.begin(), order.end());
    for (size_t s = 0; s < order.size(); ++s) {
      Box& b = box[row[order[s].second]];
      b.x = left + width * (s + 0.5) / order.size();
      b.y = y;
      b.w = kBoxW;
      b.h = kBoxH;
      b.placed = true;
    }
  };

  // Rows inside a node box, top to bottom. GPUs first (fixed order), the rest by barycentre.
  const VertexKind kRowKinds[] = {VertexKind::kNvSwitch, VertexKind::kGpu, VertexKind::kPcieSwitch,
                                  VertexKind::kCpu,      VertexKind::kNic, VertexKind::kNetSwitch};
  struct NodeFrame {
    double x = 0, y = 0, w = 0, h = 0;
  };
  const int num_nodes = t.numNodes();
  std::vector<std::map<VertexKind, std::vector<int>>> rows(num_nodes);
  std::vector<int> outside;
  for (const Vertex& v : t.vertices) {
    if (v.node >= 0 && v.node < num_nodes) {
      rows[v.node][v.kind].push_back(v.id);
    } else {
      outside.push_back(v.id);
    }
  }
  std::vector<NodeFrame> frames(num_nodes);
  // Nodes whose NVSwitch or GPU row has links inside the row get room above it for the arcs.
  std::vector<bool> arc_room(num_nodes, false);
  for (const Link& l : t.links) {
    if (l.src < 0 || l.src >= nv || l.dst < 0 || l.dst >= nv) continue;
    const Vertex& a = t.vertices[l.src];
    const Vertex& b = t.vertices[l.dst];
    if (a.node >= 0 && a.node == b.node && a.kind == b.kind &&
        (a.kind == VertexKind::kGpu || a.kind == VertexKind::kNvSwitch)) {
      arc_room[a.node] = true;
    }
  }
  const int per_line = num_nodes <= 4 ? std::max(1, num_nodes) : (num_nodes <= 16 ? 4 : 8);
  double cursor_x = kPad, cursor_y = kTitleH, line_h = 0, total_w = 0;
  for (int k = 0; k < num_nodes; ++k) {
    size_t slots = 1;
    int used_rows = 0;
    for (VertexKind kind : kRowKinds) {
      slots = std::max(slots, rows[k][kind].size());
      used_rows += rows[k][kind].empty() ? 0 : 1;
    }
    NodeFrame& f = frames[k];
    f.w = slots * kSlot + 2 * 12;
    f.h = std::max(1, used_rows) * kRowH + 30 + (arc_room[k] ? kArcRoom : 0);
    if (k > 0 && k % per_line == 0) {
      cursor_x = kPad;
      cursor_y += line_h + kNodeGap;
      line_h = 0;
    }
    f.x = cursor_x;
    f.y = cursor_y;
    cursor_x += f.w + kNodeGap;
    line_h = std::max(line_h, f.h);
    total_w = std::max(total_w, cursor_x - kNodeGap + kPad);
  }
  for (int k = 0; k < num_nodes; ++k) {
    const NodeFrame& f = frames[k];
    const double inner_left = f.x + 12, inner_w = f.w - 24;
    double y = f.y + 30 + kRowH / 2 + (arc_room[k] ? kArcRoom : 0);
    std::map<VertexKind, double> y_of;
    for (VertexKind kind : kRowKinds) {
      if (rows[k][kind].empty()) continue;
      y_of[kind] = y;
      y += kRowH;
    }
    if (y_of.count(VertexKind::kGpu))
      placeRow(rows[k][VertexKind::kGpu], inner_left, inner_w, y_of[VertexKind::kGpu], false);
    for (VertexKind kind : kRowKinds) {
      if (kind == VertexKind::kGpu || !y_of.count(kind)) continue;
      placeRow(rows[k][kind], inner_left, inner_w, y_of[kind], true);
    }
  }
  // Vertices outside nodes (network switches): a row for those that touch NICs, then a row for the rest.
  double bottom = cursor_y + line_h;
  if (total_w == 0) total_w = 2 * kPad + kSlot;
  if (!outside.empty()) {
    std::vector<int> level0, level1;
    for (int v : outside) {
      bool touches_node = false;
      for (int u : adj[v]) touches_node = touches_node || t.vertices[u].node >= 0;
      (touches_node ? level0 : level1).push_back(v);
    }
    if (level0.empty()) std::swap(level0, level1);
    const double width = std::max(total_w - 2 * kPad, std::max(level0.size(), level1.size()) * kSlot);
    total_w = std::max(total_w, width + 2 * kPad);
    double y = bottom + kRowH;
    placeRow(level0, kPad, width, y, true);
    if (!level1.empty()) {
      y += kRowH;
      placeRow(level1, kPad, width, y, true);
    }
    bottom = y + kBoxH;
  }

  // Links: one line per vertex pair and link class (the two directions of a duplex link are drawn once).
  struct Drawn {
    int a, b;
    LinkKind kind;
    int lanes;
    double bw, alpha;
    bool both;
  };
  std::map<std::tuple<int, int, int, int, double, double>, size_t> seen;
  std::vector<Drawn> drawn;
  std::map<LinkKind, std::set<std::pair<int, double>>> legend_classes;
  for (const Link& l : t.links) {
    if (l.src < 0 || l.src >= nv || l.dst < 0 || l.dst >= nv) continue;
    const int a = std::min(l.src, l.dst), b = std::max(l.src, l.dst);
    auto key = std::make_tuple(a, b, static_cast<int>(l.kind), l.lanes, l.bandwidth_gbps, l.alpha_us);
    legend_classes[l.kind].insert({l.lanes, l.bandwidth_gbps});
    auto it = seen.find(key);
    if (it != seen.end()) {
      Drawn& d = drawn[it->second];
      if (d.a != l.src) d.both = true;
      continue;
    }
    seen[key] = drawn.size();
    drawn.push_back({l.src, l.dst, l.kind, l.lanes, l.bandwidth_gbps, l.alpha_us, false});
  }

  const double legend_h = 30 + 18.0 * legend_classes.size();
  const double height = bottom + kPad + legend_h;
  const double width = std::max(total_w, 560.0);
  std::string svg;
  svg += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
      width, height);
  svg += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  svg += fmt::format("<text x=\"{}\" y=\"26\" font-size=\"17\" font-weight=\"bold\">{} — {} GPUs, {} node(s)</text>\n",
                     kPad, escapeXml(t.name), t.numGpus(), num_nodes);
  for (int k = 0; k < num_nodes; ++k) {
    const NodeFrame& f = frames[k];
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" rx=\"8\" fill=\"#fafafa\" "
        "stroke=\"#888888\" stroke-dasharray=\"4 3\"/>\n",
        f.x, f.y, f.w, f.h);
    const Node& n = t.nodes[k];
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"13\" fill=\"#444444\">{}{}</text>\n", f.x + 8,
                       f.y + 18, escapeXml(n.name), n.tmpl.empty() ? "" : escapeXml(" (" + n.tmpl + ")"));
  }
  // Links under the vertices. Links within one row bend upward as arcs so that they do not run through boxes.
  svg += "<g fill=\"none\" stroke-linecap=\"round\">\n";
  std::vector<std::string> labels;
  for (const Drawn& d : drawn) {
    const Box& p = box[d.a];
    const Box& q = box[d.b];
    const double stroke = std::clamp(1.0 + 1.3 * std::log2(1.0 + d.bw / 12.5), 1.0, 7.0);
    const char* color = linkColor(d.kind);
    const std::string title = fmt::format(
        "{} {} {} : {} lanes, {} GB/s, alpha {} us{}", escapeXml(t.vertices[d.a].name), d.both ? "&lt;-&gt;" : "-&gt;",
        escapeXml(t.vertices[d.b].name), d.lanes, fmtNum(d.bw), fmtNum(d.alpha), d.both ? " each way" : "");
    double lx = (p.x + q.x) / 2, ly = (p.y + q.y) / 2;
    if (std::abs(p.y - q.y) < 1e-6) {
      // GPU and NVSwitch rows bend up into the room reserved above them; lower rows bend down a little.
      const VertexKind row_kind = t.vertices[d.a].kind;
      const bool up = row_kind == VertexKind::kGpu || row_kind == VertexKind::kNvSwitch;
      const double span = std::abs(p.x - q.x);
      const double lift = up ? std::min(kArcRoom - 8, 12 + span * 0.22) : std::min(26.0, 8 + span * 0.06);
      const double sign = up ? -1 : 1;
      const double y0 = p.y + sign * p.h / 2;
      const double cx = (p.x + q.x) / 2, cy = y0 + sign * lift * 2;
      svg += fmt::format(
          "<path d=\"M {:.1f} {:.1f} Q {:.1f} {:.1f} {:.1f} {:.1f}\" stroke=\"{}\" stroke-width=\"{:.1f}\" "
          "opacity=\"0.85\"><title>{}</title></path>\n",
          p.x, y0, cx, cy, q.x, y0, color, stroke, title);
      lx = cx;
      ly = y0 + sign * lift;
    } else {
      svg += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"{:.1f}\" "
          "opacity=\"0.85\"><title>{}</title></line>\n",
          p.x, p.y, q.x, q.y, color, stroke, title);
      // Label near the lower end so that the labels of links fanning out of one box above do not pile up.
      const Box& low = p.y > q.y ? p : q;
      const Box& high = p.y > q.y ? q : p;
      lx = low.x + (high.x - low.x) * 0.3;
      ly = low.y + (high.y - low.y) * 0.3;
    }
    if (d.lanes > 1) {
      labels.push_back(
          fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\" fill=\"{}\" "
                      "stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\">×{}</text>\n",
                      lx, ly + 3, color, d.lanes));
    }
  }
  svg += "</g>\n";
  for (const std::string& l : labels) svg += l;
  for (const Vertex& v : t.vertices) {
    const Box& b = box[v.id];
    if (!b.placed) continue;
    const bool round =
        v.kind == VertexKind::kNvSwitch || v.kind == VertexKind::kNetSwitch || v.kind == VertexKind::kPcieSwitch;
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" rx=\"{}\" fill=\"{}\" stroke=\"#333333\">"
        "<title>{} ({}{}{})</title></rect>\n",
        b.x - b.w / 2, b.y - b.h / 2, b.w, b.h, round ? 12 : 3, vertexFill(v.kind), escapeXml(v.name),
        vertexKindName(v.kind), v.model.empty() ? "" : ", ", escapeXml(v.model));
    std::string label = v.kind == VertexKind::kGpu ? v.name : shortName(t, v);
    // Long names (PCI bus ids, bonded NICs) keep their head and their distinguishing tail.
    // The cuts move off UTF-8 continuation bytes so that a multi-byte character is kept whole or dropped whole.
    if (label.size() > 10) {
      auto continuation = [&](size_t i) { return (static_cast<unsigned char>(label[i]) & 0xC0) == 0x80; };
      size_t head = 3;
      while (head > 0 && continuation(head)) --head;
      size_t tail = label.size() - 6;
      while (tail < label.size() && continuation(tail)) ++tail;
      label = label.substr(0, head) + "…" + label.substr(tail);
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", b.x,
                       b.y + 4, escapeXml(label));
  }
  // Legend: one line per link kind with its bandwidth classes.
  double ly = bottom + kPad + 10;
  svg += fmt::format(
      "<text x=\"{}\" y=\"{:.1f}\" font-size=\"12\" font-weight=\"bold\">Links (GB/s per direction; ×N = "
      "lanes)</text>\n",
      kPad, ly);
  for (const auto& [kind, classes] : legend_classes) {
    ly += 18;
    std::string text;
    for (const auto& [lanes, bw] : classes) {
      text += (text.empty() ? "" : ", ") + (lanes > 1 ? fmt::format("×{} = {}", lanes, fmtNum(bw)) : fmtNum(bw));
    }
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"4\"/>\n",
                       kPad, ly - 4, kPad + 28, ly - 4, linkColor(kind));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"12\">{}: {}</text>\n", kPad + 36, ly,
                       linkKindName(kind), escapeXml(text));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace braid
