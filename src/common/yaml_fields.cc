#include "common/yaml_fields.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace braid {

Result<YAML::Node> YamlFields::load(const std::string& text) const {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return parseError(file_, e.mark.line >= 0 ? e.mark.line + 1 : 0, "", fmt::format("YAML syntax: {}", e.msg));
  }
}

int YamlFields::lineOf(const YAML::Node& n) const {
  if (!n.IsDefined()) return 0;
  const YAML::Mark m = n.Mark();
  return m.line >= 0 ? m.line + 1 : 0;
}

Status YamlFields::error(const YAML::Node& at, const std::string& field, const std::string& what) const {
  return parseError(file_, lineOf(at), field, what);
}

Status YamlFields::checkKeys(const YAML::Node& map, const std::string& path,
                             const std::set<std::string>& allowed) const {
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) return error(key, path, "keys must be plain names");
    const std::string k = key.Scalar();
    const std::string field = path.empty() ? k : path + "." + k;
    if (!allowed.count(k)) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return error(key, field, fmt::format("unknown key '{}' (allowed: {})", k, list));
    }
    if (!seen.insert(k).second) return error(key, field, fmt::format("key '{}' appears twice", k));
  }
  return Status::ok();
}

Status YamlFields::requireMap(const YAML::Node& n, const std::string& path) const {
  if (!n.IsMap()) return error(n, path, "expected a mapping (key: value)");
  return Status::ok();
}

Result<std::string> YamlFields::getString(const YAML::Node& n, const std::string& path) const {
  if (!n.IsScalar()) return error(n, path, "expected a string");
  return n.Scalar();
}

Result<double> YamlFields::getNumber(const YAML::Node& n, const std::string& path) const {
  if (!n.IsScalar()) return error(n, path, "expected a number");
  const std::string& s = n.Scalar();
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) {
    return error(n, path, fmt::format("'{}' is not a finite number", s));
  }
  return v;
}

Result<long> YamlFields::getInt(const YAML::Node& n, const std::string& path, long min, long max) const {
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

Result<bool> YamlFields::getBool(const YAML::Node& n, const std::string& path) const {
  if (n.IsScalar()) {
    if (n.Scalar() == "true") return true;
    if (n.Scalar() == "false") return false;
  }
  return error(n, path, "expected true or false");
}

}  // namespace braid
