// yaml-cpp helpers shared by the YAML readers (Braid topologies, TACCL-style sketches): typed field getters whose
// errors name the file, the line and the field's path (parseError).
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "braid/status.h"

namespace braid {

/// Reads the fields of one YAML document of file `file` (the name errors carry). Every getter returns a
/// kParseError naming the file, the node's line (1-based; 0 when unknown) and `path` (the field's dotted path,
/// e.g. "nodes.a.gpus") when the node is not what it expects.
class YamlFields {
 public:
  explicit YamlFields(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }

  /// `text` parsed as YAML; a syntax error names the line yaml-cpp reports.
  Result<YAML::Node> load(const std::string& text) const;
  /// 1-based line of `n`, 0 when it has none (an undefined node).
  int lineOf(const YAML::Node& n) const;
  Status error(const YAML::Node& at, const std::string& field, const std::string& what) const;

  /// Every key of `map` is a plain name in `allowed`, none twice.
  Status checkKeys(const YAML::Node& map, const std::string& path, const std::set<std::string>& allowed) const;
  Status requireMap(const YAML::Node& n, const std::string& path) const;
  Result<std::string> getString(const YAML::Node& n, const std::string& path) const;
  /// A finite decimal number (strtod's syntax, the whole scalar).
  Result<double> getNumber(const YAML::Node& n, const std::string& path) const;
  /// A base-10 integer (the whole scalar) in [min, max].
  Result<long> getInt(const YAML::Node& n, const std::string& path, long min, long max) const;
  /// `true` or `false`.
  Result<bool> getBool(const YAML::Node& n, const std::string& path) const;

 private:
  std::string file_;
};

}  // namespace braid
