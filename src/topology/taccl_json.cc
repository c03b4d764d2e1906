// TACCL inputs: communication sketches and topology profiles (../shared/reference/taccl_msccl.md §1.3-1.4).
//
// Units. TACCL profiles give α in µs and β in µs per MB (1 MB = 10^6 bytes) for the chunk size they target.
// A link with β µs/MB moves 10^6 bytes in β·10^-6 s, so its bandwidth is 10^6 / (β·10^-6) bytes/s
// = 10^12/β bytes/s = 1000/β GB/s (β = 23 µs/MB ⇒ 43.5 GB/s, matching "NVLink beta 23 µs/MB ≈ 43.5 GB/s" in
// ../shared/reference/anchors_algorithms.md §2).
//
// Built-in link matrices (taccl/topologies/generic.py as summarised in taccl_msccl.md §1.3):
//   NDv2 / DGX-1: 8-GPU hybrid cube-mesh; class-1 pairs (β = node_betas_list[0], two NVLinks) 0-1, 0-4, 1-3,
//                 2-3, 2-6, 4-5, 5-7, 6-7; class-2 pairs (β = node_betas_list[1], one NVLink) 0-2, 0-3, 1-2,
//                 1-5, 3-7, 4-6, 4-7, 5-6. nics_per_node is forced to 1.
//   DGX2:         16 GPUs fully connected through NVSwitch, one β class; nics_per_node is forced to 8.
//   HubAndSpoke:  every GPU pair joined directly, one β class.
//   custom:       `links`, `betas`, `invbws` matrices indexed [dst][src]; the diagonal holds α, not a link.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "braid/file_io.h"
#include "braid/importers.h"
#include "common/text.h"

namespace braid {

namespace {

using Json = nlohmann::json;

constexpr int kMaxGpusPerNode = 256;
constexpr int kMaxNodes = 1024;
constexpr int kMaxTotalGpus = 4096;

// JSON reading with errors that name the file, the line of the key and the key path.
class JsonReader {
 public:
  JsonReader(const std::string& text, const std::string& filename) : text_(text), filename_(filename) {}

  Result<Json> parse() const {
    try {
      return Json::parse(text_);
    } catch (const Json::parse_error& e) {
      const size_t byte = e.byte > 0 ? e.byte - 1 : 0;
      std::string what = e.what();
      const size_t cut = what.find("parse error");
      if (cut != std::string::npos) what = what.substr(cut);
      return parseError(filename_, lineAtOffset(text_, byte), "json", what);
    }
  }

  // Line of a dotted key path ("internode_sketch.strategy"): each part searched after the previous one.
  int lineOf(const std::string& path) const {
    size_t pos = 0;
    int line = 0;
    size_t start = 0;
    while (start <= path.size()) {
      size_t dot = path.find('.', start);
      std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const size_t bracket = part.find('[');
      if (bracket != std::string::npos) part = part.substr(0, bracket);
      if (!part.empty()) {
        const size_t found = text_.find("\"" + part + "\"", pos);
        if (found == std::string::npos) break;
        pos = found + part.size() + 2;
        line = lineAtOffset(text_, found);
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return line;
  }

  Status error(const std::string& path, const std::string& what) const {
    return parseError(filename_, lineOf(path), path, what);
  }

  Status integer(const Json& value, const std::string& path, long long lo, long long hi, long long* out) const {
    if (!value.is_number_integer() && !value.is_number_unsigned()) {
      if (value.is_number_float()) {
        const double d = value.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) {
          *out = static_cast<long long>(d);
          return Status::ok();
        }
      }
      return error(path, fmt::format("must be an integer, found {}", describe(value)));
    }
    long long v = 0;
    if (value.is_number_unsigned()) {
      const auto u = value.get<unsigned long long>();
      if (u > static_cast<unsigned long long>(hi))
        return error(path, fmt::format("{} is out of range {}..{}", u, lo, hi));
      v = static_cast<long long>(u);
    } else {
      v = value.get<long long>();
    }
    if (v < lo || v > hi) return error(path, fmt::format("{} is out of range {}..{}", v, lo, hi));
    *out = v;
    return Status::ok();
  }

  Status number(const Json& value, const std::string& path, double lo, double* out) const {
    if (!value.is_number()) return error(path, fmt::format("must be a number, found {}", describe(value)));
    const double v = value.get<double>();
    if (!std::isfinite(v) || v < lo) return error(path, fmt::format("{} must be a finite number >= {}", v, lo));
    *out = v;
    return Status::ok();
  }

  static std::string describe(const Json& value) {
    std::string s = value.dump();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return fmt::format("{} {}", value.type_name(), s);
  }

  const std::string& filename() const { return filename_; }

 private:
  const std::string& text_;
  const std::string& filename_;
};

Status readIntList(const JsonReader& r, const Json& value, const std::string& path, std::vector<int>* out) {
  if (!value.is_array())
    return r.error(path, fmt::format("must be a list of integers, found {}", JsonReader::describe(value)));
  for (size_t i = 0; i < value.size(); ++i) {
    long long v = 0;
    BRAID_RETURN_IF_ERROR(r.integer(value[i], fmt::format("{}[{}]", path, i), 0, 1 << 20, &v));
    out->push_back(static_cast<int>(v));
  }
  return Status::ok();
}

// {"<int>": [ints]} with string keys.
Status readIntListMap(const JsonReader& r, const Json& value, const std::string& path,
                      std::map<int, std::vector<int>>* out) {
  if (!value.is_object())
    return r.error(path, fmt::format("must be an object of lists, found {}", JsonReader::describe(value)));
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& key = it.key();
    long long k = -1;
    bool ok = !key.empty() && key.size() <= 7 &&
              std::all_of(key.begin(), key.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (ok) k = std::stoll(key);
    if (!ok) return r.error(path, fmt::format("key \"{}\" is not a local GPU index", key));
    std::vector<int> list;
    BRAID_RETURN_IF_ERROR(readIntList(r, it.value(), fmt::format("{}.{}", path, key), &list));
    (*out)[static_cast<int>(k)] = std::move(list);
  }
  return Status::ok();
}

Result<TacclSketch> parseSketch(const std::string& text, const std::string& filename) {
  JsonReader r(text, filename);
  BRAID_ASSIGN_OR_RETURN(Json root, r.parse());
  if (!root.is_object()) return parseError(filename, 1, "", "a TACCL sketch must be a JSON object");
  TacclSketch sk;
  sk.source = filename;

  if (!root.contains("nnodes")) return parseError(filename, 0, "nnodes", "missing (number of nodes)");
  long long nnodes = 0;
  BRAID_RETURN_IF_ERROR(r.integer(root["nnodes"], "nnodes", 1, kMaxNodes, &nnodes));
  sk.nnodes = static_cast<int>(nnodes);

  if (!root.contains("intranode_sketch")) return parseError(filename, 0, "intranode_sketch", "missing");
  const Json& intra = root["intranode_sketch"];
  if (!intra.is_object()) return r.error("intranode_sketch", "must be an object with a strategy");
  if (!intra.contains("strategy") || !intra["strategy"].is_string()) {
    return r.error("intranode_sketch.strategy", "missing or not a string (none, switch, maxmin, minmax)");
  }
  sk.intranode_strategy = intra["strategy"].get<std::string>();
  static const std::set<std::string> kIntra = {"none", "switch", "maxmin", "minmax"};
  if (!kIntra.count(sk.intranode_strategy)) {
    return r.error("intranode_sketch.strategy",
                   fmt::format("unknown strategy '{}' (none, switch, maxmin, minmax)", sk.intranode_strategy));
  }
  if (sk.intranode_strategy == "switch") {
    if (!intra.contains("switches") || !intra["switches"].is_array()) {
      return r.error("intranode_sketch.switches", "the switch strategy needs a list of GPU lists");
    }
    const Json& switches = intra["switches"];
    const Json* strategies =
        intra.contains("switch_hyperedge_strategy") ? &intra["switch_hyperedge_strategy"] : nullptr;
    if (!strategies || !strategies->is_array() || strategies->size() != switches.size()) {
      return r.error("intranode_sketch.switch_hyperedge_strategy",
                     fmt::format("must be a list with one entry per switch ({})", switches.size()));
    }
    for (size_t i = 0; i < switches.size(); ++i) {
      TacclSwitch sw;
      BRAID_RETURN_IF_ERROR(readIntList(r, switches[i], fmt::format("intranode_sketch.switches[{}]", i), &sw.gpus));
      if (sw.gpus.empty()) return r.error("intranode_sketch.switches", fmt::format("switch {} has no GPU", i));
      const Json& s = (*strategies)[i];
      if (!s.is_string() || (s.get<std::string>() != "uc-max" && s.get<std::string>() != "uc-min")) {
        return r.error("intranode_sketch.switch_hyperedge_strategy",
                       fmt::format("entry {} is {}: unknown strategy (uc-max, uc-min)", i, JsonReader::describe(s)));
      }
      sw.strategy = s.get<std::string>();
      sk.switches.push_back(std::move(sw));
    }
    // TACCL: two switch sets are identical or disjoint.
    for (size_t a = 0; a < sk.switches.size(); ++a) {
      for (size_t b = a + 1; b < sk.switches.size(); ++b) {
        std::set<int> sa(sk.switches[a].gpus.begin(), sk.switches[a].gpus.end());
        std::set<int> sb(sk.switches[b].gpus.begin(), sk.switches[b].gpus.end());
        if (sa == sb) continue;
        for (int g : sa) {
          if (sb.count(g)) {
            return r.error(
                "intranode_sketch.switches",
                fmt::format("switches {} and {} share GPU {} but differ: TACCL needs identical or disjoint sets", a, b,
                            g));
          }
        }
      }
    }
  }

  if (root.contains("internode_sketch")) {
    const Json& inter = root["internode_sketch"];
    if (!inter.is_object()) return r.error("internode_sketch", "must be an object");
    sk.has_internode = true;
    if (!inter.contains("strategy") || !inter["strategy"].is_string()) {
      return r.error("internode_sketch.strategy", "missing or not a string (relay)");
    }
    sk.internode_strategy = inter["strategy"].get<std::string>();
    if (sk.internode_strategy != "relay") {
      return r.error("internode_sketch.strategy",
                     fmt::format("unknown strategy '{}' (TACCL supports relay)", sk.internode_strategy));
    }
    if (!inter.contains("internode_conn")) return r.error("internode_sketch.internode_conn", "missing");
    const Json& conn = inter["internode_conn"];
    if (conn.is_string()) {
      sk.internode_conn_kind = conn.get<std::string>();
      if (sk.internode_conn_kind != "fully-connected" && sk.internode_conn_kind != "direct-map") {
        return r.error("internode_sketch.internode_conn",
                       fmt::format("unknown connection '{}' (a map, \"fully-connected\" or \"direct-map\")",
                                   sk.internode_conn_kind));
      }
    } else {
      sk.internode_conn_kind = "map";
      BRAID_RETURN_IF_ERROR(readIntListMap(r, conn, "internode_sketch.internode_conn", &sk.internode_conn));
      if (sk.internode_conn.empty()) return r.error("internode_sketch.internode_conn", "the map names no sender");
      const size_t per_sender = sk.internode_conn.begin()->second.size();
      for (const auto& [sender, dsts] : sk.internode_conn) {
        if (dsts.size() != per_sender || dsts.empty()) {
          return r.error("internode_sketch.internode_conn",
                         fmt::format("sender {} lists {} receivers; every sender must list the same number (>0)",
                                     sender, dsts.size()));
        }
      }
    }
    if (inter.contains("gpus_to_sender_rev_map")) {
      BRAID_RETURN_IF_ERROR(readIntListMap(r, inter["gpus_to_sender_rev_map"],
                                           "internode_sketch.gpus_to_sender_rev_map", &sk.gpus_to_sender_rev_map));
    }
    if (inter.contains("enforce_ordering")) {
      if (!inter["enforce_ordering"].is_boolean())
        return r.error("internode_sketch.enforce_ordering", "must be true or false");
      sk.enforce_ordering = inter["enforce_ordering"].get<bool>();
      if (sk.enforce_ordering && sk.gpus_to_sender_rev_map.empty()) {
        return r.error("internode_sketch.enforce_ordering", "needs gpus_to_sender_rev_map (whose chunks go out first)");
      }
    }
  } else if (sk.nnodes > 1) {
    return parseError(filename, r.lineOf("nnodes"), "internode_sketch",
                      fmt::format("required when nnodes is {} (> 1)", sk.nnodes));
  }

  if (root.contains("symmetry_offsets")) {
    const Json& sym = root["symmetry_offsets"];
    if (!sym.is_array()) return r.error("symmetry_offsets", "must be a list of [offset, size] pairs");
    for (size_t i = 0; i < sym.size(); ++i) {
      const std::string path = fmt::format("symmetry_offsets[{}]", i);
      if (!sym[i].is_array() || sym[i].size() != 2) {
        return r.error("symmetry_offsets",
                       fmt::format("entry {} is {}, not [offset, size]", i, JsonReader::describe(sym[i])));
      }
      long long offset = 0, size = 0;
      BRAID_RETURN_IF_ERROR(r.integer(sym[i][0], path, 0, 1 << 20, &offset));
      BRAID_RETURN_IF_ERROR(r.integer(sym[i][1], path, 1, 1 << 20, &size));
      sk.symmetry_offsets.emplace_back(static_cast<int>(offset), static_cast<int>(size));
    }
  }
  if (root.contains("hyperparameters")) {
    const Json& hp = root["hyperparameters"];
    if (!hp.is_object()) return r.error("hyperparameters", "must be an object");
    if (hp.contains("input_chunkup")) {
      long long chunkup = 1;
      BRAID_RETURN_IF_ERROR(r.integer(hp["input_chunkup"], "hyperparameters.input_chunkup", 1, 1024, &chunkup));
      sk.input_chunkup = static_cast<int>(chunkup);
    }
  }
  return sk;
}

enum class Builtin { kNdv2, kDgx2, kHubAndSpoke, kCustom };

struct Profile {
  std::string name;
  int gpus = 0;
  int nics = -1;  // -1: not given
  double alpha = 0;
  std::vector<double> betas;
  std::vector<double> invbws;
  std::optional<double> remote_alpha, remote_beta, remote_invbw;
  std::vector<std::vector<long long>> links;  // [dst][src]
  std::vector<std::vector<double>> link_betas;
  Builtin kind = Builtin::kHubAndSpoke;
};

Status readMatrix(const JsonReader& r, const Json& root, const std::string& key, int n, bool integers,
                  std::vector<std::vector<double>>* out) {
  if (!root.contains(key)) return r.error(key, fmt::format("missing: a custom profile needs {} x {} `{}`", n, n, key));
  const Json& m = root[key];
  if (!m.is_array() || m.size() != static_cast<size_t>(n)) {
    return r.error(key, fmt::format("must be a {} x {} matrix (gpus_per_node rows)", n, n));
  }
  out->assign(n, std::vector<double>(n, 0));
  for (int d = 0; d < n; ++d) {
    if (!m[d].is_array() || m[d].size() != static_cast<size_t>(n)) {
      return r.error(key, fmt::format("row {} must have {} entries", d, n));
    }
    for (int s = 0; s < n; ++s) {
      const std::string path = fmt::format("{}[{}][{}]", key, d, s);
      if (integers) {
        long long v = 0;
        BRAID_RETURN_IF_ERROR(r.integer(m[d][s], path, 0, 1024, &v));
        (*out)[d][s] = static_cast<double>(v);
      } else {
        BRAID_RETURN_IF_ERROR(r.number(m[d][s], path, 0, &(*out)[d][s]));
      }
    }
  }
  return Status::ok();
}

std::string lowerCase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<Profile> parseProfile(const JsonReader& r, const Json& root, std::vector<std::string>& notes) {
  const std::string& filename = r.filename();
  if (!root.is_object()) return parseError(filename, 1, "", "a TACCL topology profile must be a JSON object");
  Profile p;
  if (root.contains("name")) {
    if (!root["name"].is_string()) return r.error("name", "must be a string");
    p.name = root["name"].get<std::string>();
  }
  if (!root.contains("gpus_per_node")) return parseError(filename, 0, "gpus_per_node", "missing");
  long long gpus = 0;
  BRAID_RETURN_IF_ERROR(r.integer(root["gpus_per_node"], "gpus_per_node", 1, kMaxGpusPerNode, &gpus));
  p.gpus = static_cast<int>(gpus);
  if (root.contains("nics_per_node")) {
    long long nics = 0;
    BRAID_RETURN_IF_ERROR(r.integer(root["nics_per_node"], "nics_per_node", 0, kMaxGpusPerNode, &nics));
    p.nics = static_cast<int>(nics);
  }
  if (!root.contains("alpha")) return parseError(filename, 0, "alpha", "missing (intra-node link latency, µs)");
  BRAID_RETURN_IF_ERROR(r.number(root["alpha"], "alpha", 0, &p.alpha));
  for (const char* key : {"remote_alpha", "remote_beta", "remote_invbw"}) {
    if (!root.contains(key)) continue;
    double v = 0;
    BRAID_RETURN_IF_ERROR(r.number(root[key], key, 0, &v));
    if (std::string(key) == "remote_alpha") p.remote_alpha = v;
    if (std::string(key) == "remote_beta") p.remote_beta = v;
    if (std::string(key) == "remote_invbw") p.remote_invbw = v;
  }
  if (p.remote_beta && *p.remote_beta <= 0) return r.error("remote_beta", "must be > 0 µs/MB");

  const std::string lname = lowerCase(p.name);
  if (root.contains("links")) {
    p.kind = Builtin::kCustom;
    std::vector<std::vector<double>> links, invbws;
    BRAID_RETURN_IF_ERROR(readMatrix(r, root, "links", p.gpus, true, &links));
    BRAID_RETURN_IF_ERROR(readMatrix(r, root, "betas", p.gpus, false, &p.link_betas));
    if (root.contains("invbws")) BRAID_RETURN_IF_ERROR(readMatrix(r, root, "invbws", p.gpus, false, &invbws));
    p.links.assign(p.gpus, std::vector<long long>(p.gpus, 0));
    for (int d = 0; d < p.gpus; ++d) {
      for (int s = 0; s < p.gpus; ++s) {
        p.links[d][s] = static_cast<long long>(links[d][s]);
        if (d != s && p.links[d][s] > 0 && p.link_betas[d][s] <= 0) {
          return r.error(
              fmt::format("betas[{}][{}]", d, s),
              fmt::format("links[{}][{}] = {} but its beta is 0 (a link needs beta > 0 µs/MB)", d, s, p.links[d][s]));
        }
      }
    }
    notes.push_back(
        "custom TACCL profile: links/betas matrices read as [dst][src]; the diagonal holds alpha, not a link, "
        "and makes no self-link");
    notes.push_back("custom TACCL profiles do not say what a link is: links recorded as pcie");
    return p;
  }

  if (!root.contains("node_betas_list"))
    return parseError(filename, 0, "node_betas_list", "missing (β per link class, µs/MB)");
  const Json& betas = root["node_betas_list"];
  if (!betas.is_array() || betas.empty()) return r.error("node_betas_list", "must be a non-empty list of numbers");
  for (size_t i = 0; i < betas.size(); ++i) {
    double b = 0;
    BRAID_RETURN_IF_ERROR(r.number(betas[i], fmt::format("node_betas_list[{}]", i), 0, &b));
    if (b <= 0) return r.error("node_betas_list", fmt::format("entry {} is 0: β must be > 0 µs/MB", i));
    p.betas.push_back(b);
  }
  if (root.contains("node_invbws_list")) {
    const Json& inv = root["node_invbws_list"];
    if (!inv.is_array() || inv.size() != p.betas.size()) {
      return r.error("node_invbws_list", fmt::format("must be a list of {} numbers, one per β class", p.betas.size()));
    }
    for (size_t i = 0; i < inv.size(); ++i) {
      double v = 0;
      BRAID_RETURN_IF_ERROR(r.number(inv[i], fmt::format("node_invbws_list[{}]", i), 0, &v));
      p.invbws.push_back(v);
    }
  }
  if (lname.find("dgx2") != std::string::npos || lname.find("dgx-2") != std::string::npos) {
    p.kind = Builtin::kDgx2;
    notes.push_back(
        fmt::format("TACCL built-in DGX2 chosen by name '{}': GPUs fully connected through one NVSwitch", p.name));
  } else if (lname.find("ndv2") != std::string::npos || lname.find("dgx1") != std::string::npos ||
             lname.find("dgx-1") != std::string::npos) {
    p.kind = Builtin::kNdv2;
    notes.push_back(fmt::format("TACCL built-in NDv2 (DGX-1 hybrid cube-mesh) chosen by name '{}'", p.name));
  } else if (lname.find("hub") != std::string::npos) {
    p.kind = Builtin::kHubAndSpoke;
    notes.push_back(
        fmt::format("TACCL built-in HubAndSpoke chosen by name '{}': every GPU pair joined directly", p.name));
  } else if (p.gpus == 8 && p.betas.size() == 2) {
    p.kind = Builtin::kNdv2;
    notes.push_back(
        fmt::format("name '{}' is not a TACCL built-in: 8 GPUs with 2 β classes read as NDv2 (DGX-1 hybrid "
                    "cube-mesh)",
                    p.name));
  } else {
    p.kind = Builtin::kHubAndSpoke;
    notes.push_back(
        fmt::format("name '{}' is not a TACCL built-in: {} GPUs with one β class read as HubAndSpoke (every "
                    "GPU pair joined directly, links recorded as nvlink)",
                    p.name, p.gpus));
  }
  if (p.kind == Builtin::kNdv2) {
    if (p.gpus != 8)
      return r.error("gpus_per_node", fmt::format("NDv2 is an 8-GPU hybrid cube-mesh, found {}", p.gpus));
    if (p.betas.size() != 2) {
      return r.error("node_betas_list",
                     fmt::format("NDv2 needs exactly 2 β classes (double, single NVLink), found {}", p.betas.size()));
    }
    if (p.nics >= 0 && p.nics != 1)
      notes.push_back(fmt::format("NDv2 forces nics_per_node = 1 (file says {})", p.nics));
    p.nics = 1;
  } else {
    if (p.betas.size() > 1)
      notes.push_back(fmt::format("only the first of {} β classes is used by this built-in", p.betas.size()));
    if (p.kind == Builtin::kDgx2) {
      if (p.gpus != 16)
        notes.push_back(fmt::format("DGX2 has 16 GPUs; this profile says {} and is built with {}", p.gpus, p.gpus));
      if (p.nics >= 0 && p.nics != 8)
        notes.push_back(fmt::format("DGX2 forces nics_per_node = 8 (file says {})", p.nics));
      p.nics = 8;
    }
  }
  return p;
}

// Chunk size a profile targets, from a name suffix like "_1KB" / "-32KB" / "1MB"; 0 when absent.
double chunkMegabytes(const std::string& name) {
  const std::string l = lowerCase(name);
  for (const auto& [suffix, mb] : {std::pair<const char*, double>{"kb", 1e-3}, {"mb", 1.0}, {"gb", 1e3}}) {
    const std::string s = suffix;
    if (l.size() <= s.size() || l.compare(l.size() - s.size(), s.size(), s) != 0) continue;
    size_t end = l.size() - s.size(), begin = end;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(l[begin - 1]))) --begin;
    if (begin == end || end - begin > 6) return 0;
    return std::stod(l.substr(begin, end - begin)) * mb;
  }
  return 0;
}

// NDv2 class-1 (two NVLinks) and class-2 (one NVLink) pairs, taccl_msccl.md §1.3.
constexpr int kNdv2Class1[8][2] = {{0, 1}, {0, 4}, {1, 3}, {2, 3}, {2, 6}, {4, 5}, {5, 7}, {6, 7}};
constexpr int kNdv2Class2[8][2] = {{0, 2}, {0, 3}, {1, 2}, {1, 5}, {3, 7}, {4, 6}, {4, 7}, {5, 6}};

double gbpsFromBeta(double beta_us_per_mb) { return 1000.0 / beta_us_per_mb; }

// GPUs of TACCL's built-in machines (taccl_msccl.md §1.3): NDv2 and DGX-1 are 8x V100-SXM2, DGX-2 16x
// V100-SXM3-32GB. HubAndSpoke and custom profiles do not say (empty).
std::string builtinGpuModel(Builtin kind) {
  switch (kind) {
    case Builtin::kNdv2: return "V100-SXM2";
    case Builtin::kDgx2: return "V100-SXM3-32GB";
    case Builtin::kHubAndSpoke:
    case Builtin::kCustom: break;
  }
  return "";
}

Result<Topology> buildProfile(const JsonReader& r, const Profile& p, const TacclSketch* sketch,
                              std::vector<std::string> notes) {
  const std::string& filename = r.filename();
  const int nnodes = sketch ? sketch->nnodes : 1;
  if (static_cast<long long>(nnodes) * p.gpus > kMaxTotalGpus) {
    return parseError(sketch ? sketch->source : filename, 0, "nnodes",
                      fmt::format("{} nodes x {} GPUs exceed {} GPUs", nnodes, p.gpus, kMaxTotalGpus));
  }
  const double mb = chunkMegabytes(p.name);
  if (mb > 0 && std::fabs(mb - 1.0) > 1e-9) {
    notes.push_back(
        fmt::format("profile '{}' targets {} MB chunks: TACCL stores per-chunk costs and often scales them "
                    "(x10, x100) to survive integer rounding; α and β were read as µs and µs/MB as written, "
                    "so bandwidths from this file are only meaningful relative to each other",
                    p.name, mb));
  }
  notes.push_back("bandwidth = 1000 / β GB/s (β in µs per 10^6 bytes)");
  if (!builtinGpuModel(p.kind).empty()) {
    notes.push_back(fmt::format("GPUs recorded as {}, the GPUs of TACCL's built-in machine", builtinGpuModel(p.kind)));
  } else {
    notes.push_back("a TACCL profile does not name its GPUs: GPU model left empty (NCCL's model then assumes SM80)");
  }

  // Sketch checks against this profile.
  std::set<int> senders, receivers;
  if (sketch) {
    for (const TacclSwitch& sw : sketch->switches) {
      for (int g : sw.gpus) {
        if (g >= p.gpus) {
          return parseError(
              sketch->source, 0, "intranode_sketch.switches",
              fmt::format("GPU {} does not exist: the profile {} has {} GPUs per node", g, filename, p.gpus));
        }
      }
    }
    if (sketch->intranode_strategy == "switch") {
      notes.push_back("intranode sketch 'switch' hyperedges are a synthesis hint: physical links unchanged");
    }
    if (nnodes > 1) {
      if (sketch->internode_conn_kind == "map") {
        for (const auto& [s, dsts] : sketch->internode_conn) {
          if (s >= p.gpus) {
            return parseError(
                sketch->source, 0, "internode_sketch.internode_conn",
                fmt::format("sender {} does not exist: the profile {} has {} GPUs per node", s, filename, p.gpus));
          }
          senders.insert(s);
          for (int d : dsts) {
            if (d >= p.gpus) {
              return parseError(
                  sketch->source, 0, "internode_sketch.internode_conn",
                  fmt::format("receiver {} does not exist: the profile {} has {} GPUs per node", d, filename, p.gpus));
            }
            receivers.insert(d);
          }
        }
      } else {
        for (int g = 0; g < p.gpus; ++g) senders.insert(g), receivers.insert(g);
      }
      for (const auto& [s, gpus] : sketch->gpus_to_sender_rev_map) {
        bool bad = s >= p.gpus;
        for (int g : gpus) bad = bad || g >= p.gpus;
        if (bad) {
          notes.push_back(
              fmt::format("sketch gpus_to_sender_rev_map entry \"{}\" names a GPU beyond the {} per node: it "
                          "does not change the topology",
                          s, p.gpus));
        }
      }
    }
  }
  if (nnodes > 1) {
    if (!p.remote_alpha || !p.remote_beta) {
      return parseError(filename, 0, !p.remote_alpha ? "remote_alpha" : "remote_beta",
                        fmt::format("missing: the sketch {} joins {} nodes", sketch->source, nnodes));
    }
    if (p.nics < 1) {
      return parseError(
          filename, r.lineOf("nics_per_node"), "nics_per_node",
          fmt::format("inter-node links of the sketch {} need at least one NIC per node", sketch->source));
    }
  }

  Topology t;
  t.name = p.name.empty() ? std::filesystem::path(filename).stem().string() : p.name;
  t.source = filename;
  int net_switch = -1;
  for (int node = 0; node < nnodes; ++node) {
    const int n = t.addNode(fmt::format("node{}", node), p.name);
    std::vector<int> gpu(p.gpus);
    for (int g = 0; g < p.gpus; ++g) {
      gpu[g] = t.addVertex(VertexKind::kGpu, n);
      t.vertices[gpu[g]].model = builtinGpuModel(p.kind);
    }
    switch (p.kind) {
      case Builtin::kNdv2:
        for (const auto& pair : kNdv2Class1) {
          t.addDuplexLink(gpu[pair[0]], gpu[pair[1]], LinkKind::kNvlink, gbpsFromBeta(p.betas[0]), p.alpha, 2);
        }
        for (const auto& pair : kNdv2Class2) {
          t.addDuplexLink(gpu[pair[0]], gpu[pair[1]], LinkKind::kNvlink, gbpsFromBeta(p.betas[1]), p.alpha, 1);
        }
        break;
      case Builtin::kDgx2: {
        const int sw = t.addVertex(VertexKind::kNvSwitch, n, fmt::format("node{}.nvswitch", node));
        for (int g = 0; g < p.gpus; ++g) {
          t.addDuplexLink(gpu[g], sw, LinkKind::kNvlink, gbpsFromBeta(p.betas[0]), p.alpha / 2, 6);
        }
        break;
      }
      case Builtin::kHubAndSpoke:
        for (int a = 0; a < p.gpus; ++a) {
          for (int b = 0; b < p.gpus; ++b) {
            if (a != b) t.addLink(gpu[a], gpu[b], LinkKind::kNvlink, gbpsFromBeta(p.betas[0]), p.alpha, 1);
          }
        }
        break;
      case Builtin::kCustom:
        for (int d = 0; d < p.gpus; ++d) {
          for (int s = 0; s < p.gpus; ++s) {
            const long long k = p.links[d][s];
            if (d == s || k <= 0) continue;
            t.addLink(gpu[s], gpu[d], LinkKind::kPcie, static_cast<double>(k) * gbpsFromBeta(p.link_betas[d][s]),
                      p.alpha, static_cast<int>(k));
          }
        }
        break;
    }
    if (nnodes > 1) {
      const double nic_gbps = gbpsFromBeta(*p.remote_beta);
      if (net_switch < 0) net_switch = t.addVertex(VertexKind::kNetSwitch, -1, "net");
      std::vector<int> nic(p.nics);
      for (int k = 0; k < p.nics; ++k) {
        nic[k] = t.addVertex(VertexKind::kNic, n, fmt::format("node{}.nic{}", node, k));
        t.addDuplexLink(nic[k], net_switch, LinkKind::kNet, nic_gbps, *p.remote_alpha / 2);
      }
      for (int g = 0; g < p.gpus; ++g) {
        const int k = static_cast<int>(static_cast<long long>(g) * p.nics / p.gpus);
        // A GPU the sketch names as a sender or a receiver gets both directions of its NIC link: the PCIe link
        // is full duplex, and reduce-scatter runs the sketch's connections backwards (TACCL reverses links).
        if (senders.count(g) || receivers.count(g)) t.addDuplexLink(gpu[g], nic[k], LinkKind::kPcie, nic_gbps, 0.0);
      }
    }
  }
  if (nnodes > 1) {
    std::string conn = sketch->internode_conn_kind;
    if (conn == "map") {
      conn.clear();
      for (const auto& [s, dsts] : sketch->internode_conn) {
        std::string d;
        for (size_t i = 0; i < dsts.size(); ++i) d += (i ? "," : "") + std::to_string(dsts[i]);
        conn += fmt::format("{}{}->[{}]", conn.empty() ? "" : " ", s, d);
      }
    }
    notes.push_back(
        fmt::format("{} nodes from sketch {}: inter-node links follow internode_conn {} (local sender GPU -> "
                    "receiver GPU on every other node) through NICs (GPU g uses NIC g*{}/{}) and one network "
                    "switch; NIC links carry remote α {} µs (half per hop) and 1000/remote_beta = {:.3g} GB/s",
                    nnodes, sketch->source, conn, p.nics, p.gpus, *p.remote_alpha, gbpsFromBeta(*p.remote_beta)));
    notes.push_back(
        "TACCL's per-connection β scaling (x senders x receivers / nics_per_node) is not applied: NIC links "
        "are shared, so the sharing shows in the topology itself; GPU-NIC links are not profiled by TACCL and "
        "carry the NIC bandwidth with α 0");
  } else {
    notes.push_back(sketch ? fmt::format("sketch {} has one node: no inter-node links", sketch->source)
                           : "no sketch: one node; inter-node links need a sketch (nnodes, internode_conn)");
  }
  t.notes = std::move(notes);
  // Errors name the file (the topology's source) and what in it is at fault: a link outside physical ranges, GPUs
  // that no chain of links joins.
  BRAID_RETURN_IF_ERROR(validateTopology(t));
  return t;
}

}  // namespace

Result<TacclSketch> readTacclSketch(const std::string& text, const std::string& filename) {
  try {
    return parseSketch(text, filename);
  } catch (const std::exception& e) {
    return parseError(filename, 0, "", fmt::format("cannot read TACCL sketch: {}", e.what()));
  }
}

Result<TacclSketch> loadTacclSketch(const std::string& path) {
  Result<std::string> text = readFile(path);
  if (!text.isOk()) {
    if (text.status().code() == StatusCode::kNotFound)
      return notFound(fmt::format("TACCL sketch {}: no such file", path));
    return text.status();
  }
  return readTacclSketch(*text, path);
}

Result<Topology> importTacclProfile(const std::string& text, const std::string& filename, const TacclSketch* sketch) {
  try {
    JsonReader r(text, filename);
    BRAID_ASSIGN_OR_RETURN(Json root, r.parse());
    std::vector<std::string> notes;
    BRAID_ASSIGN_OR_RETURN(Profile p, parseProfile(r, root, notes));
    return buildProfile(r, p, sketch, std::move(notes));
  } catch (const std::exception& e) {
    return parseError(filename, 0, "", fmt::format("cannot read TACCL profile: {}", e.what()));
  }
}

}  // namespace braid

namespace braid {

Result<Topology> loadTacclTopology(const std::string& profile_path, const TacclSketch& sketch) {
  Result<std::string> text = readFile(profile_path);
  if (!text.isOk()) {
    if (text.status().code() == StatusCode::kNotFound)
      return notFound(fmt::format("TACCL profile {}: no such file", profile_path));
    return text.status();
  }
  return importTacclProfile(*text, profile_path, &sketch);
}

}  // namespace braid
