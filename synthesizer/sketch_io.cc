// Communication sketch files: Braid's sketch YAML (docs/formats/sketch.md: reader and writer), the TACCL sketch
// conversion and loadSketch. The sketch derived from a topology and the sketch-topology check are
// sketch_derive.cc. Sources: TACCL (Shah et al., NSDI'23 §3) as summarised in ../shared/reference/taccl_msccl.md
// §1.4.

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
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
#include "braid/sketch.h"
#include "common/text.h"
#include "common/yaml_fields.h"
#include "synthesizer/sketch_limits.h"

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

using synth::kHyperedges;
using synth::kMaxChunkup;
using synth::kMaxGpuId;
using synth::kMaxNodes;
using synth::kMaxPathSlack;
using synth::kStrategies;

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

class SketchYamlReader : private YamlFields {
 public:
  explicit SketchYamlReader(std::string filename) : YamlFields(std::move(filename)) {}

  Result<Sketch> read(const std::string& text);

 private:
  Result<int> getGpuId(const YAML::Node& n, const std::string& path) const;
  Result<std::vector<int>> getGpuList(const YAML::Node& n, const std::string& path) const;
  Result<std::map<int, std::vector<int>>> getGpuMap(const YAML::Node& n, const std::string& path) const;
  Status readIntranode(const YAML::Node& n, Sketch& s) const;
  Status readInternode(const YAML::Node& n, Sketch& s) const;
  Status readSymmetry(const YAML::Node& n, Sketch& s) const;
};

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
  BRAID_ASSIGN_OR_RETURN(const YAML::Node root, load(text));
  Sketch s;
  s.source = file();
  s.name = fileStem(file());
  s.notes = leadingComments(text);
  // A file with nothing in it (blank, only comments, `{}`, or only a name) is a mistake, not a request for
  // every default: without --sketch the synthesizer derives a sketch from the topology.
  const std::string empty_sketch = fmt::format(
      "{}: empty sketch: it sets none of nodes, intranode, internode, symmetry, chunkup, size, path_slack "
      "(omit the sketch to derive one from the topology)",
      file());
  if (!root.IsDefined() || root.IsNull()) return invalidArgument(empty_sketch);
  if (!root.IsMap()) return error(root, "", "expected a YAML mapping with a sketch (name, nodes, intranode, ...)");
  BRAID_RETURN_IF_ERROR(
      checkKeys(root, "", {"name", "nodes", "intranode", "internode", "symmetry", "chunkup", "size", "path_slack"}));
  if (root.size() == 0 || (root.size() == 1 && root["name"])) return invalidArgument(empty_sketch);
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

}  // namespace braid
