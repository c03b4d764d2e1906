// loadTopology: picks the importer from the file's content; findShippedTopology: shipped files by name.

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "braid/file_io.h"
#include "braid/importers.h"
#include "braid/topology.h"
#include "common/paths.h"
#include "common/text.h"

namespace braid {

namespace {

enum class TopologyFormat { kYaml, kNcclXml, kNvidiaSmi, kTacclJson, kUnknown };

// Removes ANSI escape sequences (nvidia-smi underlines its header when printing to a terminal).
std::string stripAnsi(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
      continue;
    }
    out += line[i];
  }
  return out;
}

// The name of the XML root element, skipping the declaration, comments and doctype; empty if none.
std::string xmlRootName(const std::string& text, size_t pos) {
  while (pos < text.size()) {
    pos = text.find('<', pos);
    if (pos == std::string::npos) return "";
    if (text.compare(pos, 4, "<!--") == 0) {
      pos = text.find("-->", pos);
      if (pos == std::string::npos) return "";
      pos += 3;
    } else if (text.compare(pos, 2, "<?") == 0 || text.compare(pos, 2, "<!") == 0) {
      pos = text.find('>', pos);
      if (pos == std::string::npos) return "";
      ++pos;
    } else {
      size_t end = pos + 1;
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_' || text[end] == '-'))
        ++end;
      return text.substr(pos + 1, end - pos - 1);
    }
  }
  return "";
}

bool looksLikeNvidiaSmi(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  for (int n = 0; n < 8 && std::getline(in, line); ++n) {
    std::istringstream words(stripAnsi(line));
    std::string first, second;
    words >> first >> second;
    if (first == "GPU0" && (second == "GPU1" || second.rfind("NIC", 0) == 0 || second.rfind("mlx", 0) == 0 ||
                            second == "CPU" || second.empty())) {
      return true;
    }
  }
  return false;
}

}  // namespace

Result<Topology> loadTopology(const std::string& path) {
  BRAID_ASSIGN_OR_RETURN(std::string text, readFile(path));
  size_t start = 0;
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) start = 3;  // UTF-8 byte-order mark
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  if (start == text.size()) return parseError(path, 0, "", "empty file");  // a byte-order mark alone

  if (text[start] == '<') {
    const std::string root = xmlRootName(text, start);
    // No root element found (a comment or declaration that never closes, a file cut short): the XML reader names
    // the line and what is unclosed.
    if (root == "system" || root.empty()) return importNcclTopoXml(text, path);
    if (root == "graphs") {
      return unsupported(
          fmt::format("{}: this is an NCCL graph file (NCCL_GRAPH_FILE, <graphs>): it holds channels, "
                      "not a topology; load the matching NCCL topology XML (<system>) instead",
                      path));
    }
    if (root == "algo")
      return unsupported(fmt::format("{}: this is an MSCCL algorithm (<algo>), not a topology", path));
    return parseError(path, 0, "",
                      fmt::format("XML root <{}> is not an NCCL topology (expected <system version=\"1\">)", root));
  }
  if (text[start] == '{') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      // nlohmann's message: "[json.exception.parse_error.101] parse error at line L, column C: ..."
      std::string what = e.what();
      const size_t cut = what.find("parse error");
      if (cut != std::string::npos) what = what.substr(cut);
      return parseError(path, lineAtOffset(text, e.byte > 0 ? e.byte - 1 : 0), "json", "malformed JSON: " + what);
    }
    if (!j.is_object()) return parseError(path, 1, "json", "a JSON " + std::string(j.type_name()) + ", not an object");
    for (const char* key :
         {"gpus_per_node", "node_invbws_list", "node_betas_list", "invbws", "remote_alpha", "remote_invbw"}) {
      if (j.contains(key)) return importTacclProfile(text, path, nullptr);
    }
    for (const char* key : {"intranode_sketch", "internode_sketch"}) {
      if (j.contains(key)) {
        return unsupported(
            fmt::format("{}: this is a TACCL communication sketch, not a topology; pass it with --sketch "
                        "next to a TACCL topology profile",
                        path));
      }
    }
    return parseError(path, 0, "", "JSON without TACCL topology profile keys (gpus_per_node, links, invbws, ...)");
  }
  if (looksLikeNvidiaSmi(text)) return importNvidiaSmiTopo(text, path);

  // Braid YAML: a mapping whose first keys are the format's. Anything else is an unknown format.
  bool yaml_like = false;
  try {
    const YAML::Node root = YAML::Load(text);
    if (root.IsMap()) {
      for (const auto& kv : root) {
        if (!kv.first.IsScalar()) continue;
        const std::string& k = kv.first.Scalar();
        yaml_like = yaml_like || k == "name" || k == "templates" || k == "nodes" || k == "vertices" || k == "links" ||
                    k == "network";
      }
    }
  } catch (const YAML::Exception&) {
    // A YAML syntax error in a file that starts like a Braid topology is reported by the YAML reader with its line.
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      for (const char* k : {"name:", "templates:", "nodes:", "vertices:", "links:", "network:"}) {
        yaml_like = yaml_like || line.rfind(k, 0) == 0;
      }
    }
  }
  if (yaml_like) return readTopologyYaml(text, path);
  return parseError(path, 0, "",
                    "unrecognized topology format (expected Braid YAML, NCCL topology XML <system>, "
                    "`nvidia-smi topo -m` text or a TACCL topology profile JSON)");
}

Result<std::string> findShippedTopology(const std::string& name) {
  namespace fs = std::filesystem;
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return notFound(fmt::format("'{}' is not a shipped topology name (use e.g. dgx1-v100 or a path to a file)", name));
  }
  const bool has_ext = name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0;
  const std::string file = has_ext ? name : name + ".yaml";
  const std::vector<std::string> dirs = topologySearchDirs();
  std::error_code ec;
  for (const std::string& dir : dirs) {
    const fs::path candidate = fs::path(dir) / file;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  const std::vector<std::string> available = shippedTopologyNames();
  std::string searched, names;
  for (const std::string& d : dirs) searched += (searched.empty() ? "" : ", ") + d;
  for (const std::string& n : available) names += (names.empty() ? "" : ", ") + n;
  return notFound(fmt::format("no shipped topology '{}' (searched {}; available: {})", name,
                              searched.empty() ? "nothing" : searched, names.empty() ? "none" : names));
}

std::vector<std::string> shippedTopologyNames() {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (const std::string& dir : topologySearchDirs()) {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".yaml") names.push_back(it->path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Result<Topology> loadTopologyOrShipped(const std::string& file_or_name) {
  std::error_code ec;
  // Anything at the path, also a dangling link or a loop of links (which readFile reports), is the file meant.
  if (std::filesystem::exists(std::filesystem::symlink_status(file_or_name, ec))) return loadTopology(file_or_name);
  Result<std::string> shipped = findShippedTopology(file_or_name);
  if (!shipped) {
    return notFound(
        fmt::format("{}: no such file, and not a shipped topology ({})", file_or_name, shipped.status().message()));
  }
  return loadTopology(*shipped);
}

}  // namespace braid
