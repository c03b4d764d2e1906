// Braid topology YAML: reading (templates, node lists, network builders, explicit vertices and links)
// and writing the flattened model. The format is documented in docs/formats/topology.md.

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "braid/topology.h"
#include "common/text.h"
#include "common/yaml_fields.h"

namespace braid {

namespace {

// Guards against inputs that would build absurdly large models (and take minutes or all memory).
constexpr long kMaxNodes = 16384;
constexpr long kMaxPerNodeCount = 4096;
constexpr size_t kMaxVertices = 4000000;
constexpr size_t kMaxLinks = 16000000;

// One link specification, as written in a template or at the top level, before name resolution.
struct LinkSpec {
  YAML::Node where;
  std::string path;
  std::vector<std::string> a;  // endpoint patterns (a..b duplex, or src -> dst)
  std::vector<std::string> b;
  std::string a_field, b_field;
  bool directed = false;
  LinkKind kind = LinkKind::kNvlink;
  double bandwidth_gbps = 0;
  double alpha_us = 0;
  int lanes = 1;
};

struct TemplateSwitch {
  std::string name;
  VertexKind kind = VertexKind::kPcieSwitch;
  std::string model;
  int numa = -1;
};

struct NodeTemplate {
  std::string name;
  int gpus = 0;
  std::string gpu_model;
  int nics = 0;
  std::string nic_model;
  std::vector<TemplateSwitch> switches;
  std::vector<LinkSpec> links;
};

// Adds vertices exactly as Topology::addVertex does (same id, rank, name, local index and node lists) but in
// logarithmic time: addVertex rescans all vertices, which is quadratic for clusters with thousands of nodes.
class VertexAdder {
 public:
  int add(Topology& t, VertexKind kind, int node, const std::string& name) {
    Vertex v;
    v.id = static_cast<int>(t.vertices.size());
    v.kind = kind;
    v.node = node;
    v.local = local_count_[{node, static_cast<int>(kind)}]++;
    if (kind == VertexKind::kGpu) {
      v.rank = gpus_++;
      v.name = fmt::format("gpu{}", v.rank);
    } else {
      v.name = name;
    }
    if (node >= 0 && node < t.numNodes()) {
      if (kind == VertexKind::kGpu) t.nodes[node].gpus.push_back(v.id);
      if (kind == VertexKind::kNic) t.nodes[node].nics.push_back(v.id);
    }
    t.vertices.push_back(std::move(v));
    return static_cast<int>(t.vertices.size()) - 1;
  }

  int gpus() const { return gpus_; }

 private:
  std::map<std::pair<int, int>, int> local_count_;
  int gpus_ = 0;
};

class YamlTopologyReader : private YamlFields {
 public:
  explicit YamlTopologyReader(std::string filename) : YamlFields(std::move(filename)) {}

  Result<Topology> read(const std::string& text);

 private:
  Result<std::vector<std::string>> getNameList(const YAML::Node& n, const std::string& path) const;
  Result<double> getBandwidth(const YAML::Node& map, const std::string& path, int lanes) const;

  Result<LinkSpec> parseLink(const YAML::Node& n, const std::string& path) const;
  Result<NodeTemplate> parseTemplate(const std::string& name, const YAML::Node& n, const std::string& path) const;
  Status buildNodes(const YAML::Node& nodes, Topology& t) const;
  Status instantiate(const NodeTemplate& tmpl, const std::string& node_name, Topology& t) const;
  Status buildNetwork(const YAML::Node& net, Topology& t) const;
  Status buildVertices(const YAML::Node& list, Topology& t);
  Status addLinks(const LinkSpec& spec,
                  const std::function<Result<std::vector<int>>(const std::string&, const std::string&)>& resolve,
                  Topology& t) const;

  YAML::Node root_;
  std::map<std::string, NodeTemplate> templates_;
  mutable VertexAdder adder_;
};

Result<std::vector<std::string>> YamlTopologyReader::getNameList(const YAML::Node& n, const std::string& path) const {
  std::vector<std::string> out;
  if (n.IsScalar()) {
    out.push_back(n.Scalar());
  } else if (n.IsSequence()) {
    size_t i = 0;
    for (auto it = n.begin(); it != n.end(); ++it, ++i) {
      const YAML::Node item = *it;
      BRAID_ASSIGN_OR_RETURN(std::string s, getString(item, fmt::format("{}[{}]", path, i)));
      out.push_back(s);
    }
  } else {
    return error(n, path, "expected a vertex name or a list of names");
  }
  if (out.empty()) return error(n, path, "empty list of vertex names");
  for (const std::string& s : out) {
    if (s.empty()) return error(n, path, "empty vertex name");
  }
  return out;
}

// Exactly one of bandwidth (GB/s, all lanes), lane_bandwidth (GB/s per lane, times lanes) or speed_gbit
// (Gbit/s, divided by 8 as NCCL does for NET speed in nccl_plugins.md §4.5).
Result<double> YamlTopologyReader::getBandwidth(const YAML::Node& map, const std::string& path, int lanes) const {
  const char* keys[] = {"bandwidth", "lane_bandwidth", "speed_gbit"};
  int given = 0;
  double value = 0;
  for (const char* k : keys) {
    const YAML::Node v = map[k];
    if (!v) continue;
    ++given;
    const std::string field = path + "." + k;
    BRAID_ASSIGN_OR_RETURN(double x, getNumber(v, field));
    if (x <= 0) return error(v, field, fmt::format("must be > 0 (found {})", x));
    if (std::string(k) == "bandwidth") value = x;
    if (std::string(k) == "lane_bandwidth") value = x * lanes;
    if (std::string(k) == "speed_gbit") value = x / 8.0;
  }
  if (given == 0)
    return error(map, path, "needs one of bandwidth (GB/s), lane_bandwidth (GB/s per lane) or speed_gbit (Gb/s)");
  if (given > 1) return error(map, path, "give only one of bandwidth, lane_bandwidth and speed_gbit");
  return value;
}

Result<LinkSpec> YamlTopologyReader::parseLink(const YAML::Node& n, const std::string& path) const {
  BRAID_RETURN_IF_ERROR(requireMap(n, path));
  BRAID_RETURN_IF_ERROR(checkKeys(
      n, path,
      {"a", "b", "src", "dst", "directed", "kind", "bandwidth", "lane_bandwidth", "speed_gbit", "alpha", "lanes"}));
  LinkSpec spec;
  spec.where = n;
  spec.path = path;
  const bool ab = n["a"] || n["b"];
  const bool sd = n["src"] || n["dst"];
  if (ab && sd) return error(n, path, "use either a/b (full duplex) or src/dst (one direction), not both");
  if (!ab && !sd) return error(n, path, "needs endpoints: a and b (full duplex) or src and dst (one direction)");
  spec.a_field = ab ? "a" : "src";
  spec.b_field = ab ? "b" : "dst";
  for (const std::string& f : {spec.a_field, spec.b_field}) {
    if (!n[f]) return error(n, path + "." + f, "missing");
  }
  BRAID_ASSIGN_OR_RETURN(spec.a, getNameList(n[spec.a_field], path + "." + spec.a_field));
  BRAID_ASSIGN_OR_RETURN(spec.b, getNameList(n[spec.b_field], path + "." + spec.b_field));
  if (sd) spec.directed = true;
  if (n["directed"]) {
    if (sd) return error(n["directed"], path + ".directed", "src/dst links are always one direction; drop 'directed'");
    BRAID_ASSIGN_OR_RETURN(spec.directed, getBool(n["directed"], path + ".directed"));
  }
  if (!n["kind"]) return error(n, path + ".kind", "missing (nvlink, pcie, sys, net or c2c)");
  BRAID_ASSIGN_OR_RETURN(std::string kind, getString(n["kind"], path + ".kind"));
  std::optional<LinkKind> k = parseLinkKind(kind);
  if (!k)
    return error(n["kind"], path + ".kind", fmt::format("unknown link kind '{}' (nvlink, pcie, sys, net, c2c)", kind));
  spec.kind = *k;
  if (n["lanes"]) {
    BRAID_ASSIGN_OR_RETURN(long lanes, getInt(n["lanes"], path + ".lanes", 1, 1024));
    spec.lanes = static_cast<int>(lanes);
  }
  BRAID_ASSIGN_OR_RETURN(spec.bandwidth_gbps, getBandwidth(n, path, spec.lanes));
  if (!n["alpha"]) return error(n, path + ".alpha", "missing (latency in microseconds; 0 is allowed)");
  BRAID_ASSIGN_OR_RETURN(spec.alpha_us, getNumber(n["alpha"], path + ".alpha"));
  if (spec.alpha_us < 0)
    return error(n["alpha"], path + ".alpha", fmt::format("must be >= 0 (found {})", spec.alpha_us));
  return spec;
}

// Endpoint names: exact names, or a prefix followed by '*' that matches every name starting with it.
Result<std::vector<int>> resolveIn(const std::vector<std::pair<std::string, int>>& names, const std::string& pattern) {
  std::vector<int> out;
  if (!pattern.empty() && pattern.back() == '*') {
    const std::string prefix = pattern.substr(0, pattern.size() - 1);
    for (const auto& [name, id] : names) {
      if (name.compare(0, prefix.size(), prefix) == 0) out.push_back(id);
    }
  } else {
    for (const auto& [name, id] : names) {
      if (name == pattern) out.push_back(id);
    }
  }
  if (out.empty()) return notFound(pattern);
  return out;
}

Status YamlTopologyReader::addLinks(
    const LinkSpec& spec,
    const std::function<Result<std::vector<int>>(const std::string&, const std::string&)>& resolve, Topology& t) const {
  std::vector<int> as, bs;
  for (size_t i = 0; i < spec.a.size(); ++i) {
    BRAID_ASSIGN_OR_RETURN(std::vector<int> ids, resolve(spec.a[i], spec.path + "." + spec.a_field));
    as.insert(as.end(), ids.begin(), ids.end());
  }
  for (size_t i = 0; i < spec.b.size(); ++i) {
    BRAID_ASSIGN_OR_RETURN(std::vector<int> ids, resolve(spec.b[i], spec.path + "." + spec.b_field));
    bs.insert(bs.end(), ids.begin(), ids.end());
  }
  const std::set<int> a_set(as.begin(), as.end());
  const std::set<int> b_set(bs.begin(), bs.end());
  if (as.size() == 1 && bs.size() == 1 && as[0] == bs[0]) {
    return error(spec.where, spec.path, fmt::format("link from '{}' to itself", t.vertices[as[0]].name));
  }
  if (as.size() * bs.size() + t.links.size() > kMaxLinks) {
    return error(spec.where, spec.path, fmt::format("more than {} links in total", kMaxLinks));
  }
  for (int x : as) {
    for (int y : bs) {
      if (x == y) continue;  // a pattern pair such as gpu* x gpu* (a full mesh) skips the diagonal
      if (!spec.directed && x > y && a_set.count(y) && b_set.count(x)) continue;  // that pair is made as (y, x)
      if (spec.directed) {
        t.addLink(x, y, spec.kind, spec.bandwidth_gbps, spec.alpha_us, spec.lanes);
      } else {
        t.addDuplexLink(x, y, spec.kind, spec.bandwidth_gbps, spec.alpha_us, spec.lanes);
      }
    }
  }
  return Status::ok();
}

bool isReservedLocalName(const std::string& name) {
  for (const char* prefix : {"gpu", "nic"}) {
    const std::string p(prefix);
    if (name.size() > p.size() && name.compare(0, p.size(), p) == 0 &&
        name.find_first_not_of("0123456789", p.size()) == std::string::npos) {
      return true;
    }
  }
  return false;
}

Result<NodeTemplate> YamlTopologyReader::parseTemplate(const std::string& name, const YAML::Node& n,
                                                       const std::string& path) const {
  BRAID_RETURN_IF_ERROR(requireMap(n, path));
  BRAID_RETURN_IF_ERROR(checkKeys(n, path, {"description", "gpus", "nics", "switches", "links"}));
  NodeTemplate tmpl;
  tmpl.name = name;
  if (n["description"]) BRAID_RETURN_IF_ERROR(getString(n["description"], path + ".description").status());
  for (const char* what : {"gpus", "nics"}) {
    const YAML::Node g = n[what];
    if (!g) continue;
    const std::string field = path + "." + what;
    int count = 0;
    std::string model;
    if (g.IsScalar()) {
      BRAID_ASSIGN_OR_RETURN(long c, getInt(g, field, 0, kMaxPerNodeCount));
      count = static_cast<int>(c);
    } else {
      BRAID_RETURN_IF_ERROR(requireMap(g, field));
      BRAID_RETURN_IF_ERROR(checkKeys(g, field, {"count", "model"}));
      if (!g["count"]) return error(g, field + ".count", "missing");
      BRAID_ASSIGN_OR_RETURN(long c, getInt(g["count"], field + ".count", 0, kMaxPerNodeCount));
      count = static_cast<int>(c);
      if (g["model"]) {
        BRAID_ASSIGN_OR_RETURN(model, getString(g["model"], field + ".model"));
      }
    }
    if (std::string(what) == "gpus") {
      tmpl.gpus = count;
      tmpl.gpu_model = model;
    } else {
      tmpl.nics = count;
      tmpl.nic_model = model;
    }
  }
  std::set<std::string> local_names;
  if (const YAML::Node sw = n["switches"]) {
    if (!sw.IsSequence()) return error(sw, path + ".switches", "expected a list");
    size_t i = 0;
    for (auto it = sw.begin(); it != sw.end(); ++it, ++i) {
      const YAML::Node item = *it;
      const std::string field = fmt::format("{}.switches[{}]", path, i);
      const YAML::Node s = item;
      BRAID_RETURN_IF_ERROR(requireMap(s, field));
      BRAID_RETURN_IF_ERROR(checkKeys(s, field, {"name", "kind", "model", "numa"}));
      TemplateSwitch ts;
      if (!s["name"]) return error(s, field + ".name", "missing");
      BRAID_ASSIGN_OR_RETURN(ts.name, getString(s["name"], field + ".name"));
      if (ts.name.empty() || ts.name.find_first_of(" .*") != std::string::npos) {
        return error(s["name"], field + ".name",
                     fmt::format("'{}' is not a valid name (no spaces, '.' or '*')", ts.name));
      }
      if (isReservedLocalName(ts.name)) {
        return error(s["name"], field + ".name", fmt::format("'{}' is reserved for the template's GPUs/NICs", ts.name));
      }
      if (!local_names.insert(ts.name).second)
        return error(s["name"], field + ".name", fmt::format("duplicate name '{}'", ts.name));
      if (!s["kind"]) return error(s, field + ".kind", "missing (nvswitch, pcie_switch, cpu or net_switch)");
      BRAID_ASSIGN_OR_RETURN(std::string kind, getString(s["kind"], field + ".kind"));
      std::optional<VertexKind> k = parseVertexKind(kind);
      if (!k || *k == VertexKind::kGpu || *k == VertexKind::kNic) {
        return error(s["kind"], field + ".kind",
                     fmt::format("'{}' is not a switch kind (nvswitch, pcie_switch, cpu, net_switch)", kind));
      }
      ts.kind = *k;
      if (s["model"]) {
        BRAID_ASSIGN_OR_RETURN(ts.model, getString(s["model"], field + ".model"));
      }
      if (s["numa"]) {
        BRAID_ASSIGN_OR_RETURN(long numa, getInt(s["numa"], field + ".numa", 0, 1 << 20));
        ts.numa = static_cast<int>(numa);
      }
      tmpl.switches.push_back(ts);
    }
  }
  if (const YAML::Node ls = n["links"]) {
    if (!ls.IsSequence()) return error(ls, path + ".links", "expected a list");
    size_t i = 0;
    for (auto it = ls.begin(); it != ls.end(); ++it, ++i) {
      const YAML::Node item = *it;
      BRAID_ASSIGN_OR_RETURN(LinkSpec spec, parseLink(item, fmt::format("{}.links[{}]", path, i)));
      tmpl.links.push_back(std::move(spec));
    }
  }
  return tmpl;
}

Status YamlTopologyReader::instantiate(const NodeTemplate& tmpl, const std::string& node_name, Topology& t) const {
  const int node = t.addNode(node_name, tmpl.name);
  std::vector<std::pair<std::string, int>> local;  // template-local name -> vertex id
  for (int i = 0; i < tmpl.gpus; ++i) {
    const int id = adder_.add(t, VertexKind::kGpu, node, "");
    t.vertices[id].model = tmpl.gpu_model;
    local.emplace_back(fmt::format("gpu{}", i), id);
  }
  for (int i = 0; i < tmpl.nics; ++i) {
    const int id = adder_.add(t, VertexKind::kNic, node, fmt::format("{}.nic{}", node_name, i));
    t.vertices[id].model = tmpl.nic_model;
    local.emplace_back(fmt::format("nic{}", i), id);
  }
  for (const TemplateSwitch& s : tmpl.switches) {
    const int id = adder_.add(t, s.kind, node, fmt::format("{}.{}", node_name, s.name));
    t.vertices[id].model = s.model;
    t.vertices[id].numa = s.numa;
    local.emplace_back(s.name, id);
  }
  if (t.vertices.size() > kMaxVertices)
    return error(root_["nodes"], "nodes", fmt::format("more than {} vertices", kMaxVertices));
  for (const LinkSpec& spec : tmpl.links) {
    BRAID_RETURN_IF_ERROR(addLinks(
        spec,
        [&](const std::string& pattern, const std::string& field) -> Result<std::vector<int>> {
          Result<std::vector<int>> ids = resolveIn(local, pattern);
          if (!ids) {
            std::string names;
            for (const auto& [n, id] : local) names += (names.empty() ? "" : ", ") + n;
            return error(
                spec.where, field,
                fmt::format("'{}' matches no vertex of template '{}' (it has: {})", pattern, tmpl.name, names));
          }
          return ids;
        },
        t));
  }
  return Status::ok();
}

Status YamlTopologyReader::buildNodes(const YAML::Node& nodes, Topology& t) const {
  std::vector<YAML::Node> entries;
  std::vector<std::string> paths;
  if (nodes.IsMap()) {
    entries.push_back(nodes);
    paths.push_back("nodes");
  } else if (nodes.IsSequence()) {
    size_t i = 0;
    for (auto it = nodes.begin(); it != nodes.end(); ++it, ++i) {
      const YAML::Node item = *it;
      entries.push_back(item);
      paths.push_back(fmt::format("nodes[{}]", i));
    }
  } else {
    return error(nodes, "nodes", "expected a mapping {template, count} or a list of them");
  }
  std::set<std::string> used;
  for (size_t e = 0; e < entries.size(); ++e) {
    const YAML::Node& n = entries[e];
    const std::string& path = paths[e];
    BRAID_RETURN_IF_ERROR(requireMap(n, path));
    BRAID_RETURN_IF_ERROR(checkKeys(n, path, {"name", "template", "count", "built_from"}));
    long count = 1;
    if (n["count"]) {
      BRAID_ASSIGN_OR_RETURN(count, getInt(n["count"], path + ".count", 1, kMaxNodes));
    }
    if (t.nodes.size() + count > static_cast<size_t>(kMaxNodes))
      return error(n, path + ".count", fmt::format("more than {} nodes", kMaxNodes));
    std::string name;
    if (n["name"]) {
      BRAID_ASSIGN_OR_RETURN(name, getString(n["name"], path + ".name"));
      if (count != 1) return error(n["name"], path + ".name", "a name is only allowed with count 1");
      if (name.empty() || name.find_first_of(" .*") != std::string::npos) {
        return error(n["name"], path + ".name",
                     fmt::format("'{}' is not a valid node name (no spaces, '.' or '*')", name));
      }
    }
    if (n["built_from"] && n["template"]) {
      return error(n["built_from"], path + ".built_from",
                   "built_from records a flattened node's template; not allowed with template");
    }
    const NodeTemplate* tmpl = nullptr;
    if (n["template"]) {
      BRAID_ASSIGN_OR_RETURN(std::string tname, getString(n["template"], path + ".template"));
      auto it = templates_.find(tname);
      if (it == templates_.end()) {
        std::string known;
        for (const auto& [k, v] : templates_) known += (known.empty() ? "" : ", ") + k;
        return error(n["template"], path + ".template",
                     fmt::format("unknown template '{}' (defined: {})", tname, known.empty() ? "none" : known));
      }
      tmpl = &it->second;
    }
    for (long c = 0; c < count; ++c) {
      const std::string node_name = name.empty() ? fmt::format("node{}", t.nodes.size()) : name;
      if (!used.insert(node_name).second) {
        return error(n, path + (name.empty() ? "" : ".name"), fmt::format("node name '{}' is used twice", node_name));
      }
      if (tmpl) {
        BRAID_RETURN_IF_ERROR(instantiate(*tmpl, node_name, t));
      } else {
        std::string built_from;
        if (n["built_from"]) {
          BRAID_ASSIGN_OR_RETURN(built_from, getString(n["built_from"], path + ".built_from"));
        }
        t.addNode(node_name, built_from);
      }
    }
  }
  return Status::ok();
}

Status YamlTopologyReader::buildNetwork(const YAML::Node& net, Topology& t) const {
  const std::string path = "network";
  BRAID_RETURN_IF_ERROR(requireMap(net, path));
  BRAID_RETURN_IF_ERROR(
      checkKeys(net, path,
                {"kind", "bandwidth", "speed_gbit", "alpha", "nodes_per_leaf", "spines", "oversubscription", "model"}));
  if (!net["kind"]) return error(net, path + ".kind", "missing (switch, rail or fat-tree)");
  BRAID_ASSIGN_OR_RETURN(std::string kind, getString(net["kind"], path + ".kind"));
  if (kind != "switch" && kind != "rail" && kind != "fat-tree") {
    return error(net["kind"], path + ".kind", fmt::format("unknown network kind '{}' (switch, rail, fat-tree)", kind));
  }
  if (net["lane_bandwidth"]) return error(net["lane_bandwidth"], path + ".lane_bandwidth", "not used by networks");
  BRAID_ASSIGN_OR_RETURN(double nic_bw, getBandwidth(net, path, 1));
  if (!net["alpha"]) return error(net, path + ".alpha", "missing (per-hop latency in microseconds)");
  BRAID_ASSIGN_OR_RETURN(double alpha, getNumber(net["alpha"], path + ".alpha"));
  if (alpha < 0) return error(net["alpha"], path + ".alpha", fmt::format("must be >= 0 (found {})", alpha));
  std::string model;
  if (net["model"]) {
    BRAID_ASSIGN_OR_RETURN(model, getString(net["model"], path + ".model"));
  }
  const bool fat_tree = kind == "fat-tree";
  for (const char* k : {"nodes_per_leaf", "spines", "oversubscription"}) {
    if (net[k] && !fat_tree) return error(net[k], path + "." + k, "only used by kind fat-tree");
  }
  if (t.nodes.empty()) return error(net, path, "a network needs nodes");
  int total_nics = 0;
  for (const Node& n : t.nodes) total_nics += static_cast<int>(n.nics.size());
  if (total_nics == 0) return error(net, path, "a network needs NICs, but the nodes have none");

  auto addSwitch = [&](const std::string& name) {
    const int id = adder_.add(t, VertexKind::kNetSwitch, -1, name);
    t.vertices[id].model = model;
    return id;
  };
  if (kind == "switch") {
    const int sw = addSwitch("netswitch");
    for (const Node& n : t.nodes) {
      for (int nic : n.nics) t.addDuplexLink(nic, sw, LinkKind::kNet, nic_bw, alpha);
    }
  } else if (kind == "rail") {
    size_t rails = 0;
    for (const Node& n : t.nodes) rails = std::max(rails, n.nics.size());
    std::vector<int> rail_ids;
    for (size_t r = 0; r < rails; ++r) rail_ids.push_back(addSwitch(fmt::format("rail{}", r)));
    for (const Node& n : t.nodes) {
      for (size_t i = 0; i < n.nics.size(); ++i) t.addDuplexLink(n.nics[i], rail_ids[i], LinkKind::kNet, nic_bw, alpha);
    }
  } else {
    if (!net["nodes_per_leaf"]) return error(net, path + ".nodes_per_leaf", "missing (nodes under one leaf switch)");
    BRAID_ASSIGN_OR_RETURN(long per_leaf, getInt(net["nodes_per_leaf"], path + ".nodes_per_leaf", 1, kMaxNodes));
    long spines = 1;
    if (net["spines"]) {
      BRAID_ASSIGN_OR_RETURN(spines, getInt(net["spines"], path + ".spines", 1, 4096));
    }
    double ratio = 1.0;
    if (const YAML::Node o = net["oversubscription"]) {
      const std::string field = path + ".oversubscription";
      if (!o.IsScalar()) return error(o, field, "expected a ratio such as 2:1 or a number such as 2");
      const std::string s = o.Scalar();
      const size_t colon = s.find(':');
      char* end = nullptr;
      if (colon == std::string::npos) {
        ratio = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size()) return error(o, field, fmt::format("'{}' is not a ratio", s));
      } else {
        const std::string down = s.substr(0, colon), up = s.substr(colon + 1);
        const double d = std::strtod(down.c_str(), &end);
        const bool d_ok = !down.empty() && end == down.c_str() + down.size();
        const double u = std::strtod(up.c_str(), &end);
        const bool u_ok = !up.empty() && end == up.c_str() + up.size();
        if (!d_ok || !u_ok || !(u > 0)) return error(o, field, fmt::format("'{}' is not a ratio such as 2:1", s));
        ratio = d / u;
      }
      if (!std::isfinite(ratio) || ratio < 1.0) {
        return error(o, field, fmt::format("'{}': the downlink:uplink ratio must be >= 1 (1:1 is non-blocking)", s));
      }
    }
    const long num_nodes = static_cast<long>(t.nodes.size());
    const long leaves = (num_nodes + per_leaf - 1) / per_leaf;
    std::vector<int> leaf_ids, spine_ids;
    for (long l = 0; l < leaves; ++l) leaf_ids.push_back(addSwitch(fmt::format("leaf{}", l)));
    for (long s = 0; s < spines; ++s) spine_ids.push_back(addSwitch(fmt::format("spine{}", s)));
    for (long l = 0; l < leaves; ++l) {
      double downlink = 0;
      for (long k = l * per_leaf; k < std::min(num_nodes, (l + 1) * per_leaf); ++k) {
        for (int nic : t.nodes[k].nics) {
          t.addDuplexLink(nic, leaf_ids[l], LinkKind::kNet, nic_bw, alpha);
          downlink += nic_bw;
        }
      }
      if (downlink <= 0) continue;  // a leaf whose nodes have no NICs carries nothing
      const double per_spine = downlink / ratio / static_cast<double>(spines);
      for (int spine : spine_ids) t.addDuplexLink(leaf_ids[l], spine, LinkKind::kNet, per_spine, alpha);
    }
  }
  return Status::ok();
}

Status YamlTopologyReader::buildVertices(const YAML::Node& list, Topology& t) {
  if (!list.IsSequence()) return error(list, "vertices", "expected a list");
  std::map<std::string, int> node_index;
  for (int k = 0; k < t.numNodes(); ++k) node_index[t.nodes[k].name] = k;
  std::set<std::string> names;
  for (const Vertex& v : t.vertices) names.insert(v.name);
  size_t i = 0;
  for (auto it = list.begin(); it != list.end(); ++it, ++i) {
    const YAML::Node item = *it;
    const std::string path = fmt::format("vertices[{}]", i);
    const YAML::Node v = item;
    BRAID_RETURN_IF_ERROR(requireMap(v, path));
    BRAID_RETURN_IF_ERROR(checkKeys(v, path, {"name", "kind", "node", "model", "busid", "numa"}));
    if (!v["kind"]) return error(v, path + ".kind", "missing (gpu, nic, nvswitch, pcie_switch, cpu, net_switch)");
    BRAID_ASSIGN_OR_RETURN(std::string kind_name, getString(v["kind"], path + ".kind"));
    std::optional<VertexKind> kind = parseVertexKind(kind_name);
    if (!kind) {
      return error(
          v["kind"], path + ".kind",
          fmt::format("unknown vertex kind '{}' (gpu, nic, nvswitch, pcie_switch, cpu, net_switch)", kind_name));
    }
    int node = -1;
    if (v["node"]) {
      BRAID_ASSIGN_OR_RETURN(std::string node_name, getString(v["node"], path + ".node"));
      auto it = node_index.find(node_name);
      if (it == node_index.end()) return error(v["node"], path + ".node", fmt::format("unknown node '{}'", node_name));
      node = it->second;
    } else if (*kind == VertexKind::kGpu) {
      return error(v, path + ".node", "a GPU must name its node");
    }
    std::string name;
    if (v["name"]) {
      BRAID_ASSIGN_OR_RETURN(name, getString(v["name"], path + ".name"));
    }
    if (*kind == VertexKind::kGpu) {
      const std::string expected = fmt::format("gpu{}", adder_.gpus());
      if (!name.empty() && name != expected) {
        return error(
            v["name"], path + ".name",
            fmt::format("GPUs are named by rank in order of appearance: this one is '{}', not '{}'", expected, name));
      }
      name = expected;
    } else {
      if (name.empty()) return error(v, path + ".name", "missing (every non-GPU vertex needs a unique name)");
      const bool gpu_like = isReservedLocalName(name) && name.compare(0, 3, "gpu") == 0;
      if (name.find_first_of(" *") != std::string::npos || gpu_like) {
        return error(v["name"], path + ".name",
                     fmt::format("'{}' is not a valid name (no spaces or '*'; gpu<N> is for GPUs)", name));
      }
    }
    if (!names.insert(name).second)
      return error(v["name"] ? v["name"] : v, path + ".name", fmt::format("vertex name '{}' is already used", name));
    const int id = adder_.add(t, *kind, node, name);
    if (v["model"]) {
      BRAID_ASSIGN_OR_RETURN(t.vertices[id].model, getString(v["model"], path + ".model"));
    }
    if (v["busid"]) {
      BRAID_ASSIGN_OR_RETURN(t.vertices[id].busid, getString(v["busid"], path + ".busid"));
    }
    if (v["numa"]) {
      BRAID_ASSIGN_OR_RETURN(long numa, getInt(v["numa"], path + ".numa", 0, 1 << 20));
      t.vertices[id].numa = static_cast<int>(numa);
    }
    if (t.vertices.size() > kMaxVertices) return error(v, path, fmt::format("more than {} vertices", kMaxVertices));
  }
  return Status::ok();
}

Result<Topology> YamlTopologyReader::read(const std::string& text) {
  BRAID_ASSIGN_OR_RETURN(root_, load(text));
  if (!root_.IsMap())
    return parseError(file(), root_.IsDefined() && !root_.IsNull() ? lineOf(root_) : 0, "",
                      "expected a YAML mapping with a topology (name, templates, nodes, ...)");
  BRAID_RETURN_IF_ERROR(checkKeys(root_, "", {"name", "notes", "templates", "nodes", "network", "vertices", "links"}));
  Topology t;
  t.source = file();
  if (!root_["name"]) return error(root_, "name", "missing");
  BRAID_ASSIGN_OR_RETURN(t.name, getString(root_["name"], "name"));
  if (const YAML::Node notes = root_["notes"]) {
    if (!notes.IsSequence()) return error(notes, "notes", "expected a list of sentences");
    size_t i = 0;
    for (auto it = notes.begin(); it != notes.end(); ++it, ++i) {
      const YAML::Node item = *it;
      BRAID_ASSIGN_OR_RETURN(std::string note, getString(item, fmt::format("notes[{}]", i)));
      t.notes.push_back(note);
    }
  }
  if (const YAML::Node tmpls = root_["templates"]) {
    if (!tmpls.IsMap()) return error(tmpls, "templates", "expected a mapping of template name to template");
    BRAID_RETURN_IF_ERROR(checkKeys(tmpls, "templates", [&] {
      std::set<std::string> all;
      for (const auto& kv : tmpls) all.insert(kv.first.IsScalar() ? kv.first.Scalar() : "");
      return all;
    }()));
    for (const auto& kv : tmpls) {
      const std::string name = kv.first.Scalar();
      if (name.empty()) return error(kv.first, "templates", "empty template name");
      BRAID_ASSIGN_OR_RETURN(NodeTemplate tmpl, parseTemplate(name, kv.second, "templates." + name));
      templates_.emplace(name, std::move(tmpl));
    }
  }
  if (const YAML::Node nodes = root_["nodes"]) BRAID_RETURN_IF_ERROR(buildNodes(nodes, t));
  if (const YAML::Node net = root_["network"]) BRAID_RETURN_IF_ERROR(buildNetwork(net, t));
  if (const YAML::Node vs = root_["vertices"]) BRAID_RETURN_IF_ERROR(buildVertices(vs, t));
  if (const YAML::Node ls = root_["links"]) {
    if (!ls.IsSequence()) return error(ls, "links", "expected a list");
    std::map<std::string, int> by_name;
    std::vector<std::pair<std::string, int>> all;
    for (const Vertex& v : t.vertices) {
      by_name[v.name] = v.id;
      all.emplace_back(v.name, v.id);
    }
    size_t i = 0;
    for (auto it = ls.begin(); it != ls.end(); ++it, ++i) {
      const YAML::Node item = *it;
      BRAID_ASSIGN_OR_RETURN(LinkSpec spec, parseLink(item, fmt::format("links[{}]", i)));
      BRAID_RETURN_IF_ERROR(addLinks(
          spec,
          [&](const std::string& pattern, const std::string& field) -> Result<std::vector<int>> {
            if (pattern.empty() || pattern.back() != '*') {
              auto it = by_name.find(pattern);
              if (it == by_name.end()) return error(spec.where, field, fmt::format("unknown vertex '{}'", pattern));
              return std::vector<int>{it->second};
            }
            Result<std::vector<int>> ids = resolveIn(all, pattern);
            if (!ids) return error(spec.where, field, fmt::format("'{}' matches no vertex", pattern));
            return ids;
          },
          t));
    }
  }
  if (t.numGpus() == 0) return error(root_, "nodes", "the topology has no GPUs");
  Status valid = validateTopology(t);
  if (!valid) return Status(StatusCode::kParseError, valid.message());
  return t;
}

}  // namespace

Result<Topology> readTopologyYaml(const std::string& text, const std::string& filename) {
  YamlTopologyReader reader(filename);
  try {
    return reader.read(text);
  } catch (const YAML::Exception& e) {
    return parseError(filename, e.mark.line >= 0 ? e.mark.line + 1 : 0, "", fmt::format("YAML: {}", e.msg));
  }
}

std::string writeTopologyYaml(const Topology& t) {
  std::string out;
  out += "# Braid topology, flattened: every vertex and every directed link is explicit.\n";
  out += "# Format: docs/formats/topology.md. Bandwidth in GB/s per direction, alpha in microseconds.\n";
  out += fmt::format("name: {}\n", yamlQuote(t.name));
  if (t.notes.empty()) {
    out += "notes: []\n";
  } else {
    out += "notes:\n";
    for (const std::string& n : t.notes) out += fmt::format("  - {}\n", yamlQuote(n));
  }
  if (t.nodes.empty()) {
    out += "nodes: []\n";
  } else {
    out += "nodes:\n";
    for (const Node& n : t.nodes) {
      out += fmt::format("  - {{name: {}", yamlQuote(n.name));
      if (!n.tmpl.empty()) out += fmt::format(", built_from: {}", yamlQuote(n.tmpl));
      out += "}\n";
    }
  }
  out += t.vertices.empty() ? "vertices: []\n" : "vertices:\n";
  for (const Vertex& v : t.vertices) {
    out += fmt::format("  - {{name: {}, kind: {}", yamlQuote(v.name), vertexKindName(v.kind));
    if (v.node >= 0 && v.node < t.numNodes()) out += fmt::format(", node: {}", yamlQuote(t.nodes[v.node].name));
    if (!v.model.empty()) out += fmt::format(", model: {}", yamlQuote(v.model));
    if (!v.busid.empty()) out += fmt::format(", busid: {}", yamlQuote(v.busid));
    if (v.numa >= 0) out += fmt::format(", numa: {}", v.numa);
    out += "}\n";
  }
  out += t.links.empty() ? "links: []\n" : "links:\n";
  auto name = [&](int id) {
    return id >= 0 && id < static_cast<int>(t.vertices.size()) ? t.vertices[id].name : fmt::format("#{}", id);
  };
  for (const Link& l : t.links) {
    out +=
        fmt::format("  - {{src: {}, dst: {}, kind: {}, lanes: {}, bandwidth: {}, alpha: {}}}\n", yamlQuote(name(l.src)),
                    yamlQuote(name(l.dst)), linkKindName(l.kind), l.lanes, l.bandwidth_gbps, l.alpha_us);
  }
  return out;
}

}  // namespace braid
