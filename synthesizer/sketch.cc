// Communication sketches: Braid's sketch YAML (docs/formats/sketch.md), the TACCL sketch conversion, the
// sketch derived from a topology when the user gives none, and the sketch-topology consistency check.
// Sources: TACCL (Shah et al., NSDI'23 §3) as summarised in ../shared/reference/taccl_msccl.md §1.4.

#include "braid/sketch.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "braid/file_io.h"
#include "common/text.h"
#include "topology/routing.h"

namespace braid {

const char* intraLinksName(IntraLinks links) {
  switch (links) {
    case IntraLinks::kNvlink: return "nvlink";
    case IntraLinks::kAll: return "all";
    case IntraLinks::kExplicit: return "explicit";
  }
  return "?";
}

const char* interConnName(InterConn conn) {
  switch (conn) {
    case InterConn::kMap: return "map";
    case InterConn::kFullyConnected: return "fully-connected";
    case InterConn::kDirectMap: return "direct-map";
  }
  return "?";
}

namespace {

constexpr int kMaxGpuId = 1 << 20;
constexpr int kMaxNodes = 1 << 20;
constexpr int kMaxChunkup = 1 << 16;
constexpr int kMaxPathSlack = 4;

const std::set<std::string> kStrategies = {"none", "switch", "maxmin", "minmax"};
const std::set<std::string> kHyperedges = {"uc-max", "uc-min"};

std::string fileStem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

/// The shortest nccl-tests spelling of a byte count (1048576 -> "1M", 1000 -> "1000").
std::string formatNcclSize(uint64_t bytes) {
  if (bytes == 0) return "0";
  const std::pair<uint64_t, const char*> units[] = {{uint64_t{1} << 30, "G"}, {uint64_t{1} << 20, "M"}, {1024, "K"}};
  for (const auto& [unit, suffix] : units) {
    if (bytes % unit == 0) return fmt::format("{}{}", bytes / unit, suffix);
  }
  return fmt::format("{}", bytes);
}

// A string as a plain YAML scalar when it reads back as the same string (a name such as uc-min), else quoted.
std::string scalar(const std::string& s) {
  static const std::set<std::string> kSpecial = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"};
  const bool plain = !s.empty() && std::isalpha(static_cast<unsigned char>(s[0])) && !kSpecial.count(lowerCase(s)) &&
                     std::all_of(s.begin(), s.end(),
                                 [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
  return plain ? s : yamlQuote(s);
}

std::string intList(const std::vector<int>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

std::string intListMap(const std::map<int, std::vector<int>>& m) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : m) parts.push_back(fmt::format("{}: {}", k, intList(v)));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

// Comment lines before the first YAML content: the sketch's notes ('#' and surrounding blanks stripped; empty
// comments skipped).
std::vector<std::string> leadingComments(const std::string& text) {
  std::vector<std::string> notes;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    if (line[start] != '#') break;
    std::string note = line.substr(start + 1);
    const size_t text_start = note.find_first_not_of(" \t");
    note = text_start == std::string::npos ? std::string() : note.substr(text_start);
    while (!note.empty() && (note.back() == ' ' || note.back() == '\t')) note.pop_back();
    if (!note.empty()) notes.push_back(note);
  }
  return notes;
}

class SketchYamlReader {
 public:
  explicit SketchYamlReader(std::string filename) : file_(std::move(filename)) {}

  Result<Sketch> read(const std::string& text);

 private:
  int lineOf(const YAML::Node& n) const {
    if (!n.IsDefined()) return 0;
    const YAML::Mark m = n.Mark();
    return m.line >= 0 ? m.line + 1 : 0;
  }
  Status error(const YAML::Node& at, const std::string& field, const std::string& what) const {
    return parseError(file_, lineOf(at), field, what);
  }
  Status checkKeys(const YAML::Node& map, const std::string& path, const std::set<std::string>& allowed) const;
  Result<std::string> getString(const YAML::Node& n, const std::string& path) const;
  Result<long> getInt(const YAML::Node& n, const std::string& path, long min, long max) const;
  Result<bool> getBool(const YAML::Node& n, const std::string& path) const;
  Result<int> getGpuId(const YAML::Node& n, const std::string& path) const;
  Result<std::vector<int>> getGpuList(const YAML::Node& n, const std::string& path) const;
  Result<std::map<int, std::vector<int>>> getGpuMap(const YAML::Node& n, const std::string& path) const;
  Status readIntranode(const YAML::Node& n, Sketch& s) const;
  Status readInternode(const YAML::Node& n, Sketch& s) const;
  Status readSymmetry(const YAML::Node& n, Sketch& s) const;

  std::string file_;
};

Status SketchYamlReader::checkKeys(const YAML::Node& map, const std::string& path,
                                   const std::set<std::string>& allowed) const {
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) return error(key, path, "keys must be plain names");
    const std::string k = key.Scalar();
    const std::string field = path.empty() ? k : path + "." + k;
    if (!allowed.count(k)) {
      return error(key, field, fmt::format("unknown key '{}' (allowed: {})", k, fmt::join(allowed, ", ")));
    }
    if (!seen.insert(k).second) return error(key, field, fmt::format("key '{}' appears twice", k));
  }
  return Status::ok();
}

Result<std::string> SketchYamlReader::getString(const YAML::Node& n, const std::string& path) const {
  if (!n.IsScalar()) return error(n, path, "expected a string");
  return n.Scalar();
}

Result<long> SketchYamlReader::getInt(const YAML::Node& n, const std::string& path, long min, long max) const {
  if (!n.IsScalar()) return error(n, path, "expected an integer");
  const std::string& s = n.Scalar();
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE)
    return error(n, path, fmt::format("'{}' is not an integer", s));
  if (v < min || v > max) return error(n, path, fmt::format("{} is out of range [{}, {}]", v, min, max));
  return v;
}

Result<bool> SketchYamlReader::getBool(const YAML::Node& n, const std::string& path) const {
  if (n.IsScalar()) {
    if (n.Scalar() == "true") return true;
    if (n.Scalar() == "false") return false;
  }
  return error(n, path, "expected true or false");
}

Result<int> SketchYamlReader::getGpuId(const YAML::Node& n, const std::string& path) const {
  if (!n.IsScalar()) return error(n, path, "expected a local GPU id (an integer >= 0)");
  BRAID_ASSIGN_OR_RETURN(long v, getInt(n, path, std::numeric_limits<long>::min(), kMaxGpuId));
  if (v < 0) return error(n, path, fmt::format("GPU id {} is negative (local ids start at 0)", v));
  return static_cast<int>(v);
}

Result<std::vector<int>> SketchYamlReader::getGpuList(const YAML::Node& n, const std::string& path) const {
  if (!n.IsSequence()) return error(n, path, "expected a list of local GPU ids, e.g. [0, 1]");
  std::vector<int> out;
  std::set<int> seen;
  size_t i = 0;
  for (auto it = n.begin(); it != n.end(); ++it, ++i) {
    const YAML::Node item = *it;
    BRAID_ASSIGN_OR_RETURN(int id, getGpuId(item, fmt::format("{}[{}]", path, i)));
    if (!seen.insert(id).second) return error(item, fmt::format("{}[{}]", path, i), fmt::format("GPU {} twice", id));
    out.push_back(id);
  }
  return out;
}

Result<std::map<int, std::vector<int>>> SketchYamlReader::getGpuMap(const YAML::Node& n,
                                                                    const std::string& path) const {
  if (!n.IsMap()) return error(n, path, "expected a mapping of local GPU id to a list of local GPU ids");
  std::map<int, std::vector<int>> out;
  for (const auto& kv : n) {
    BRAID_ASSIGN_OR_RETURN(int key, getGpuId(kv.first, path));
    const std::string field = fmt::format("{}.{}", path, key);
    if (out.count(key)) return error(kv.first, field, fmt::format("GPU {} appears twice", key));
    BRAID_ASSIGN_OR_RETURN(std::vector<int> list, getGpuList(kv.second, field));
    if (list.empty()) return error(kv.second, field, "empty list");
    out[key] = std::move(list);
  }
  return out;
}

Status SketchYamlReader::readIntranode(const YAML::Node& n, Sketch& s) const {
  if (!n.IsMap()) return error(n, "intranode", "expected a mapping (strategy, links, switches)");
  BRAID_RETURN_IF_ERROR(checkKeys(n, "intranode", {"strategy", "links", "switches"}));
  if (const YAML::Node st = n["strategy"]) {
    BRAID_ASSIGN_OR_RETURN(s.intranode_strategy, getString(st, "intranode.strategy"));
    if (!kStrategies.count(s.intranode_strategy)) {
      return error(st, "intranode.strategy",
                   fmt::format("unknown strategy '{}' (none, switch, maxmin, minmax)", s.intranode_strategy));
    }
  }
  if (const YAML::Node links = n["links"]) {
    if (links.IsScalar()) {
      if (links.Scalar() == "nvlink") {
        s.intranode_links = IntraLinks::kNvlink;
      } else if (links.Scalar() == "all") {
        s.intranode_links = IntraLinks::kAll;
      } else {
        return error(links, "intranode.links",
                     fmt::format("'{}' is not nvlink, all or a list of [from, to] pairs", links.Scalar()));
      }
    } else if (links.IsSequence()) {
      s.intranode_links = IntraLinks::kExplicit;
      std::set<std::pair<int, int>> seen;
      size_t i = 0;
      for (auto it = links.begin(); it != links.end(); ++it, ++i) {
        const YAML::Node pair = *it;
        const std::string field = fmt::format("intranode.links[{}]", i);
        if (!pair.IsSequence() || pair.size() != 2) return error(pair, field, "expected a pair [from, to]");
        BRAID_ASSIGN_OR_RETURN(int a, getGpuId(pair[0], field));
        BRAID_ASSIGN_OR_RETURN(int b, getGpuId(pair[1], field));
        if (a == b) return error(pair, field, fmt::format("GPU {} linked to itself", a));
        if (!seen.insert({a, b}).second) return error(pair, field, fmt::format("pair [{}, {}] twice", a, b));
        s.intranode_pairs.emplace_back(a, b);
      }
    } else {
      return error(links, "intranode.links", "expected nvlink, all or a list of [from, to] pairs");
    }
  }
  if (const YAML::Node sw = n["switches"]) {
    if (!sw.IsSequence()) return error(sw, "intranode.switches", "expected a list of {gpus: [...], hyperedge: ...}");
    size_t i = 0;
    for (auto it = sw.begin(); it != sw.end(); ++it, ++i) {
      const YAML::Node item = *it;
      const std::string field = fmt::format("intranode.switches[{}]", i);
      if (!item.IsMap()) return error(item, field, "expected a mapping {gpus: [...], hyperedge: uc-min|uc-max}");
      BRAID_RETURN_IF_ERROR(checkKeys(item, field, {"gpus", "hyperedge"}));
      if (!item["gpus"]) return error(item, field + ".gpus", "missing");
      SketchSwitch one;
      BRAID_ASSIGN_OR_RETURN(one.gpus, getGpuList(item["gpus"], field + ".gpus"));
      if (one.gpus.size() < 2) return error(item["gpus"], field + ".gpus", "a switch joins at least two GPUs");
      if (const YAML::Node h = item["hyperedge"]) {
        BRAID_ASSIGN_OR_RETURN(one.hyperedge, getString(h, field + ".hyperedge"));
        if (!kHyperedges.count(one.hyperedge))
          return error(h, field + ".hyperedge", fmt::format("'{}' is not uc-max or uc-min", one.hyperedge));
      }
      s.switches.push_back(std::move(one));
    }
  }
  // TACCL's rule (taccl_msccl.md §1.4): switch hyperedges exist only under the switch strategy.
  if (s.intranode_strategy == "switch" && s.switches.empty())
    return error(n, "intranode.switches", "strategy switch needs at least one switch");
  if (s.intranode_strategy != "switch" && !s.switches.empty())
    return error(n["switches"], "intranode.switches", "switches need strategy: switch");
  return Status::ok();
}

Status SketchYamlReader::readInternode(const YAML::Node& n, Sketch& s) const {
  if (!n.IsMap()) return error(n, "internode", "expected a mapping (connections, relay_for, enforce_ordering)");
  BRAID_RETURN_IF_ERROR(checkKeys(n, "internode", {"connections", "relay_for", "enforce_ordering"}));
  if (const YAML::Node c = n["connections"]) {
    if (c.IsScalar()) {
      if (c.Scalar() == "direct-map") {
        s.internode_conn = InterConn::kDirectMap;
      } else if (c.Scalar() == "fully-connected") {
        s.internode_conn = InterConn::kFullyConnected;
      } else {
        return error(
            c, "internode.connections",
            fmt::format("'{}' is not direct-map, fully-connected or a map {{sender: [receivers]}}", c.Scalar()));
      }
    } else if (c.IsMap()) {
      s.internode_conn = InterConn::kMap;
      BRAID_ASSIGN_OR_RETURN(s.internode_map, getGpuMap(c, "internode.connections"));
    } else {
      return error(c, "internode.connections", "expected direct-map, fully-connected or a map {sender: [receivers]}");
    }
  }
  if (const YAML::Node r = n["relay_for"]) {
    BRAID_ASSIGN_OR_RETURN(s.relay_for, getGpuMap(r, "internode.relay_for"));
    if (s.internode_conn == InterConn::kMap) {
      for (const auto& kv : r) {
        const int sender = std::atoi(kv.first.Scalar().c_str());
        if (!s.internode_map.count(sender)) {
          return error(kv.first, fmt::format("internode.relay_for.{}", sender),
                       fmt::format("GPU {} is not a sender of internode.connections", sender));
        }
      }
    }
  }
  if (const YAML::Node e = n["enforce_ordering"]) {
    BRAID_ASSIGN_OR_RETURN(s.enforce_ordering, getBool(e, "internode.enforce_ordering"));
  }
  return Status::ok();
}

Status SketchYamlReader::readSymmetry(const YAML::Node& n, Sketch& s) const {
  if (!n.IsSequence()) return error(n, "symmetry", "expected a list of [offset, group] pairs");
  size_t i = 0;
  for (auto it = n.begin(); it != n.end(); ++it, ++i) {
    const YAML::Node pair = *it;
    const std::string field = fmt::format("symmetry[{}]", i);
    if (!pair.IsSequence() || pair.size() != 2) return error(pair, field, "expected a pair [offset, group]");
    BRAID_ASSIGN_OR_RETURN(long offset, getInt(pair[0], field + ".offset", 0, kMaxGpuId));
    BRAID_ASSIGN_OR_RETURN(long group, getInt(pair[1], field + ".group", 1, kMaxGpuId));
    s.symmetry.emplace_back(static_cast<int>(offset), static_cast<int>(group));
  }
  return Status::ok();
}

Result<Sketch> SketchYamlReader::read(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return parseError(file_, e.mark.line >= 0 ? e.mark.line + 1 : 0, "", fmt::format("YAML syntax: {}", e.msg));
  }
  Sketch s;
  s.source = file_;
  s.name = fileStem(file_);
  s.notes = leadingComments(text);
  if (!root.IsDefined() || root.IsNull()) return s;  // an empty file: every default
  if (!root.IsMap()) return error(root, "", "expected a YAML mapping with a sketch (name, nodes, intranode, ...)");
  BRAID_RETURN_IF_ERROR(
      checkKeys(root, "", {"name", "nodes", "intranode", "internode", "symmetry", "chunkup", "size", "path_slack"}));
  if (const YAML::Node n = root["name"]) {
    BRAID_ASSIGN_OR_RETURN(s.name, getString(n, "name"));
  }
  if (const YAML::Node n = root["nodes"]) {
    BRAID_ASSIGN_OR_RETURN(long nodes, getInt(n, "nodes", 0, kMaxNodes));
    s.nodes = static_cast<int>(nodes);
  }
  if (const YAML::Node n = root["intranode"]) BRAID_RETURN_IF_ERROR(readIntranode(n, s));
  if (const YAML::Node n = root["internode"]) BRAID_RETURN_IF_ERROR(readInternode(n, s));
  if (const YAML::Node n = root["symmetry"]) BRAID_RETURN_IF_ERROR(readSymmetry(n, s));
  if (const YAML::Node n = root["chunkup"]) {
    BRAID_ASSIGN_OR_RETURN(long chunkup, getInt(n, "chunkup", 1, kMaxChunkup));
    s.chunkup = static_cast<int>(chunkup);
  }
  if (const YAML::Node n = root["size"]) {
    if (!n.IsScalar()) return error(n, "size", "expected a size such as 1M or 1048576");
    const std::optional<uint64_t> bytes = parseNcclTestsSize(n.Scalar());
    if (!bytes) {
      return error(
          n, "size",
          fmt::format("'{}' is not a size (bytes, or digits with a K, M or G suffix: powers of 1024)", n.Scalar()));
    }
    s.size_bytes = *bytes;
  }
  if (const YAML::Node n = root["path_slack"]) {
    BRAID_ASSIGN_OR_RETURN(long slack, getInt(n, "path_slack", 0, kMaxPathSlack));
    s.path_slack = static_cast<int>(slack);
  }
  return s;
}

// ---- deriveSketch helpers ------------------------------------------------------------------------

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

}  // namespace

// ---- public API ------------------------------------------------------------------------------------

Result<Sketch> readSketchYaml(const std::string& text, const std::string& filename) {
  SketchYamlReader reader(filename);
  try {
    return reader.read(text);
  } catch (const YAML::Exception& e) {
    return parseError(filename, e.mark.line >= 0 ? e.mark.line + 1 : 0, "", fmt::format("YAML: {}", e.msg));
  }
}

std::string writeSketchYaml(const Sketch& s) {
  std::string out;
  for (std::string note : s.notes) {
    std::replace(note.begin(), note.end(), '\n', ' ');
    std::replace(note.begin(), note.end(), '\r', ' ');
    const size_t first = note.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    note = note.substr(first);
    while (!note.empty() && (note.back() == ' ' || note.back() == '\t')) note.pop_back();
    out += "# " + note + "\n";
  }
  out += fmt::format("name: {}\n", scalar(s.name));
  out += fmt::format("nodes: {}\n", s.nodes);
  out += "intranode:\n";
  out += fmt::format("  strategy: {}\n", scalar(s.intranode_strategy));
  if (s.intranode_links == IntraLinks::kExplicit) {
    std::vector<std::string> pairs;
    for (const auto& [a, b] : s.intranode_pairs) pairs.push_back(fmt::format("[{}, {}]", a, b));
    out += fmt::format("  links: [{}]\n", fmt::join(pairs, ", "));
  } else {
    out += fmt::format("  links: {}\n", intraLinksName(s.intranode_links));
  }
  if (!s.switches.empty()) {
    out += "  switches:\n";
    for (const SketchSwitch& sw : s.switches)
      out += fmt::format("    - {{gpus: {}, hyperedge: {}}}\n", intList(sw.gpus), scalar(sw.hyperedge));
  }
  out += "internode:\n";
  if (s.internode_conn == InterConn::kMap) {
    out += fmt::format("  connections: {}\n", intListMap(s.internode_map));
  } else {
    out += fmt::format("  connections: {}\n", interConnName(s.internode_conn));
  }
  out += fmt::format("  relay_for: {}\n", intListMap(s.relay_for));
  out += fmt::format("  enforce_ordering: {}\n", s.enforce_ordering ? "true" : "false");
  std::vector<std::string> sym;
  for (const auto& [offset, group] : s.symmetry) sym.push_back(fmt::format("[{}, {}]", offset, group));
  out += fmt::format("symmetry: [{}]\n", fmt::join(sym, ", "));
  out += fmt::format("chunkup: {}\n", s.chunkup);
  out += fmt::format("size: {}\n", formatNcclSize(s.size_bytes));
  out += fmt::format("path_slack: {}\n", s.path_slack);
  return out;
}

Sketch sketchFromTaccl(const TacclSketch& taccl) {
  Sketch s;
  s.source = taccl.source;
  s.name = fileStem(taccl.source);
  s.nodes = taccl.nnodes;
  s.intranode_strategy = taccl.intranode_strategy;
  s.intranode_links = IntraLinks::kNvlink;
  for (const TacclSwitch& sw : taccl.switches) s.switches.push_back(SketchSwitch{sw.gpus, sw.strategy});
  s.internode_conn = InterConn::kDirectMap;
  if (taccl.has_internode) {
    if (taccl.internode_conn_kind == "map") {
      s.internode_conn = InterConn::kMap;
      s.internode_map = taccl.internode_conn;
    } else if (taccl.internode_conn_kind == "fully-connected") {
      s.internode_conn = InterConn::kFullyConnected;
    } else {
      s.internode_conn = InterConn::kDirectMap;
    }
  }
  s.relay_for = taccl.gpus_to_sender_rev_map;
  s.enforce_ordering = taccl.enforce_ordering;
  s.symmetry = taccl.symmetry_offsets;
  s.chunkup = taccl.input_chunkup;
  s.notes.push_back(fmt::format("Converted from the TACCL sketch {}.", taccl.source));
  s.notes.push_back(
      "intranode links nvlink: TACCL's logical topology holds only the profile's NVLink (or profiled) GPU links.");
  if (!taccl.has_internode) s.notes.push_back("No internode_sketch: a single-node sketch, no relays.");
  return s;
}

Result<Sketch> loadSketch(const std::string& path) {
  Result<std::string> text = readFile(path);
  if (!text.isOk()) {
    if (text.status().code() == StatusCode::kNotFound) return notFound(fmt::format("sketch {}: no such file", path));
    return text.status();
  }
  const size_t first = text->find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (*text)[first] == '{') {
    BRAID_ASSIGN_OR_RETURN(TacclSketch taccl, readTacclSketch(*text, path));
    return sketchFromTaccl(taccl);
  }
  return readSketchYaml(*text, path);
}

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
  const int nodes = t.numNodes();
  // rank of local GPU `local` of node `n`.
  auto rankOf = [&](int n, int local) { return t.vertices[t.nodes[n].gpus[local]].rank; };

  Sketch s;
  s.name = fmt::format("{}-{}", t.name, collectiveName(collective));
  s.source = "derived:" + t.name;
  s.nodes = nodes;

  // Node 0's NVLink fabric.
  bool has_nvlink = false, has_nvswitch = false;
  std::set<int> gpu_lanes;
  std::map<int, int> lanes_into;  // local GPU -> NVLink lanes arriving from other GPUs of the node
  std::set<std::pair<int, int>> nvlink_pairs;
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

  // Intra-node logical links: NVLink-only routes when they connect all GPUs of the node (directly or through an
  // NVSwitch, so relaying over NVLink reaches everyone), every routable pair otherwise.
  bool nvlink_connected = has_nvswitch;
  if (has_nvlink && !has_nvswitch) {
    std::set<int> seen = {0};
    std::vector<int> todo = {0};
    while (!todo.empty()) {
      const int a = todo.back();
      todo.pop_back();
      for (const auto& [x, y] : nvlink_pairs) {
        if (x == a && seen.insert(y).second) todo.push_back(y);
      }
    }
    nvlink_connected = static_cast<int>(seen.size()) == gpn;
  }
  const bool use_nvlink = has_nvlink && nvlink_connected;
  s.intranode_links = use_nvlink ? IntraLinks::kNvlink : IntraLinks::kAll;
  s.notes.push_back(use_nvlink   ? "intranode links nvlink: node 0 has NVLink connecting all its GPUs, so GPUs talk "
                                   "directly only over NVLink-only routes (direct or through NVSwitch)."
                    : has_nvlink ? "intranode links all: node 0's NVLink does not connect all its GPUs (islands), so "
                                   "every GPU pair with a route (NVLink, PCIe or SYS) may talk directly."
                                 : "intranode links all: node 0 has no NVLink, so every GPU pair with a route "
                                   "(PCIe / SYS) may talk directly.");
  s.notes.push_back("intranode strategy none: no TACCL objective tweak (uc-min/uc-max, maxmin/minmax).");

  // Relays from GPU-NIC affinity (nicAffinity; the traffic NIC is the one Topology::route leaves through).
  int senders_per_node = 0;
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
  s.size_bytes = 0;
  s.notes.push_back("size 0: costs taken at 1 MiB per chunk (TACCL's profiles are measured at 1 MB chunks).");

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

  Status ok = checkSketch(s, t);
  if (!ok.isOk()) return internalError(fmt::format("derived sketch fails its own check: {}", ok.message()));
  return s;
}

}  // namespace braid
