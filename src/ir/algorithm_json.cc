// Braid algorithm JSON (docs/formats/algorithm.md) and the TACCL/SCCL algorithm JSON importer.
//
// TACCL/SCCL JSON: microsoft/msccl-tools msccl/serialization.py (field meaning) and msccl/ncclize.py
// (addresses -> buffer indices: sorted input_map/output_map, precopy for an address in both);
// ../shared/reference/taccl_msccl.md §2.1, realcases RC-46.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "braid/algorithm.h"
#include "common/text.h"

namespace braid {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;  // writer: keys in documentation order
using PathToken = std::variant<std::string, size_t>;
using Path = std::vector<PathToken>;

constexpr const char* kFormatMarker = "braid-algorithm";
constexpr int kFormatVersion = 1;

std::string pathString(const Path& path) {
  std::string out;
  for (const PathToken& t : path) {
    if (const std::string* key = std::get_if<std::string>(&t)) {
      if (!out.empty()) out += '.';
      out += *key;
    } else {
      out += fmt::format("[{}]", std::get<size_t>(t));
    }
  }
  return out.empty() ? std::string("(top level)") : out;
}

// Finds the 1-based line where the value at `path` starts in already-validated JSON text. A small
// recursive walker: the text parsed successfully, so it only needs to skip values correctly.
class JsonLocator {
 public:
  explicit JsonLocator(const std::string& text) : text_(text) {}

  int lineOf(const Path& path) {
    pos_ = 0;
    line_ = 1;
    skipWs();
    for (const PathToken& token : path) {
      if (!descend(token)) break;
      skipWs();
    }
    return line_;
  }

 private:
  void advance() {
    if (pos_ < text_.size() && text_[pos_] == '\n') ++line_;
    ++pos_;
  }
  void skipWs() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) advance();
  }
  std::string readString() {  // at '"'
    std::string out;
    advance();
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\') {
        advance();
        if (pos_ < text_.size()) out += text_[pos_];
      } else {
        out += text_[pos_];
      }
      advance();
    }
    advance();
    return out;
  }
  void skipValue() {
    skipWs();
    if (pos_ >= text_.size()) return;
    const char c = text_[pos_];
    if (c == '"') {
      readString();
    } else if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      advance();
      skipWs();
      while (pos_ < text_.size() && text_[pos_] != close) {
        if (close == '}') {
          readString();
          skipWs();
          advance();  // ':'
        }
        skipValue();
        skipWs();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          advance();
          skipWs();
        }
      }
      advance();
    } else {
      while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '}' && text_[pos_] != ']' &&
             !std::isspace(static_cast<unsigned char>(text_[pos_]))) {
        advance();
      }
    }
  }
  // Moves to the start of the member/element named by token inside the value at pos_.
  bool descend(const PathToken& token) {
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '{' && std::holds_alternative<std::string>(token)) {
      const std::string& want = std::get<std::string>(token);
      advance();
      skipWs();
      while (pos_ < text_.size() && text_[pos_] != '}') {
        std::string key = readString();
        skipWs();
        advance();  // ':'
        skipWs();
        if (key == want) return true;
        skipValue();
        skipWs();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          advance();
          skipWs();
        }
      }
      return false;
    }
    if (c == '[' && std::holds_alternative<size_t>(token)) {
      size_t want = std::get<size_t>(token);
      advance();
      skipWs();
      for (size_t i = 0; pos_ < text_.size() && text_[pos_] != ']'; ++i) {
        if (i == want) return true;
        skipValue();
        skipWs();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          advance();
          skipWs();
        }
      }
      return false;
    }
    return false;
  }

  const std::string& text_;
  size_t pos_ = 0;
  int line_ = 1;
};

// Typed access to a parsed JSON document; every error names file, line and JSON path.
class JsonAccess {
 public:
  JsonAccess(const std::string& text, const std::string& file) : text_(text), file_(file), locator_(text) {}

  Status error(const Path& path, const std::string& what) {
    return parseError(file_, locator_.lineOf(path), pathString(path), what);
  }

  static Path child(const Path& p, PathToken t) {
    Path out = p;
    out.push_back(std::move(t));
    return out;
  }

  // Member `key` of object `obj` (at `path`); nullptr when absent.
  const Json* member(const Json& obj, const std::string& key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  Status need(const Json& obj, const Path& path, const std::string& key, const Json** out) {
    if (!obj.is_object()) return error(path, "expected an object");
    *out = member(obj, key);
    if (*out == nullptr) return error(path, fmt::format("missing required member '{}'", key));
    return Status::ok();
  }
  Status getInt64(const Json& v, const Path& path, int64_t lo, int64_t hi, int64_t* out) {
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) return error(path, fmt::format("{} is out of range [{}, {}]", u, lo, hi));
      *out = static_cast<int64_t>(u);
      return Status::ok();
    }
    if (!v.is_number_integer()) return error(path, fmt::format("expected an integer, found {}", describe(v)));
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) return error(path, fmt::format("{} is out of range [{}, {}]", x, lo, hi));
    *out = x;
    return Status::ok();
  }
  Status getInt(const Json& v, const Path& path, int lo, int hi, int* out) {
    int64_t x = 0;
    BRAID_RETURN_IF_ERROR(getInt64(v, path, lo, hi, &x));
    *out = static_cast<int>(x);
    return Status::ok();
  }
  Status getUint64(const Json& v, const Path& path, uint64_t* out) {
    if (v.is_number_unsigned()) {
      *out = v.get<uint64_t>();
      return Status::ok();
    }
    if (v.is_number_integer() && v.get<int64_t>() >= 0) {
      *out = static_cast<uint64_t>(v.get<int64_t>());
      return Status::ok();
    }
    return error(path, fmt::format("expected a non-negative integer, found {}", describe(v)));
  }
  Status getDouble(const Json& v, const Path& path, double* out) {
    if (!v.is_number()) return error(path, fmt::format("expected a number, found {}", describe(v)));
    *out = v.get<double>();
    return Status::ok();
  }
  Status getBool(const Json& v, const Path& path, bool* out) {
    if (!v.is_boolean()) return error(path, fmt::format("expected true or false, found {}", describe(v)));
    *out = v.get<bool>();
    return Status::ok();
  }
  Status getString(const Json& v, const Path& path, std::string* out) {
    if (!v.is_string()) return error(path, fmt::format("expected a string, found {}", describe(v)));
    *out = v.get<std::string>();
    return Status::ok();
  }
  Status getArray(const Json& v, const Path& path) {
    if (!v.is_array()) return error(path, fmt::format("expected an array, found {}", describe(v)));
    return Status::ok();
  }

  static std::string describe(const Json& v) {
    if (v.is_string()) return fmt::format("the string \"{}\"", v.get<std::string>());
    if (v.is_number_float()) return fmt::format("the number {}", v.dump());
    return v.type_name();
  }

 private:
  const std::string& text_;
  const std::string& file_;
  JsonLocator locator_;
};

Result<Json> parseJsonText(const std::string& text, const std::string& filename) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    // nlohmann: "[json.exception.parse_error.101] parse error at line L, column C: ..."
    size_t colon = what.find(": ", what.find("parse error"));
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    return parseError(filename, lineAtOffset(text, e.byte > 0 ? e.byte - 1 : 0), "",
                      fmt::format("malformed JSON: {}", detail));
  } catch (const std::exception& e) {
    return parseError(filename, 0, "", fmt::format("malformed JSON: {}", e.what()));
  }
}

// ---- Braid JSON --------------------------------------------------------------------------------

OrderedJson stepJson(const Step& s) {
  OrderedJson deps = OrderedJson::array();
  for (const Dependency& d : s.deps) deps.push_back(OrderedJson::array({d.tb, d.step}));
  return OrderedJson{{"type", opTypeName(s.type)},
                     {"src_buf", bufferName(s.src_buf)},
                     {"src_off", s.src_off},
                     {"dst_buf", bufferName(s.dst_buf)},
                     {"dst_off", s.dst_off},
                     {"count", s.count},
                     {"deps", deps},
                     {"has_dep", s.has_dep}};
}

class BraidJsonReader {
 public:
  BraidJsonReader(const std::string& text, const std::string& file) : acc_(text, file) {}

  Result<Algorithm> read(const Json& root) {
    Algorithm alg;
    const Path top;
    if (!root.is_object()) return acc_.error(top, "expected a JSON object");
    const Json* v = nullptr;
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "format", &v));
    std::string format;
    BRAID_RETURN_IF_ERROR(acc_.getString(*v, {"format"}, &format));
    if (format != kFormatMarker)
      return acc_.error({"format"}, fmt::format("is \"{}\", expected \"{}\"", format, kFormatMarker));
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "version", &v));
    int version = 0;
    BRAID_RETURN_IF_ERROR(acc_.getInt(*v, {"version"}, 1, 1 << 20, &version));
    if (version > kFormatVersion) {
      return acc_.error({"version"}, fmt::format("version {} is newer than this reader ({})", version, kFormatVersion));
    }
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "name", &v));
    BRAID_RETURN_IF_ERROR(acc_.getString(*v, {"name"}, &alg.name));
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "collective", &v));
    std::string coll;
    BRAID_RETURN_IF_ERROR(acc_.getString(*v, {"collective"}, &coll));
    std::optional<CollectiveKind> kind = parseCollective(coll);
    if (!kind) return acc_.error({"collective"}, fmt::format("unknown collective \"{}\"", coll));
    alg.collective = *kind;
    alg.collective_name = coll;
    if (const Json* cn = acc_.member(root, "collective_name")) {
      BRAID_RETURN_IF_ERROR(acc_.getString(*cn, {"collective_name"}, &alg.collective_name));
    }
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "num_ranks", &v));
    BRAID_RETURN_IF_ERROR(acc_.getInt(*v, {"num_ranks"}, 1, 1 << 20, &alg.num_ranks));
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "num_chunks", &v));
    BRAID_RETURN_IF_ERROR(acc_.getInt(*v, {"num_chunks"}, 1, std::numeric_limits<int>::max(), &alg.num_chunks));
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "num_channels", &v));
    {
      // As the MSCCL XML reader: above MAXCHANNELS verify() reports it; below 1 the file is refused.
      int64_t channels = 0;
      BRAID_RETURN_IF_ERROR(acc_.getInt64(*v, {"num_channels"}, std::numeric_limits<int64_t>::min(),
                                          std::numeric_limits<int64_t>::max(), &channels));
      if (channels < 1 || channels > std::numeric_limits<int>::max()) {
        return acc_.error({"num_channels"}, channelRangeMessage(channels));
      }
      alg.num_channels = static_cast<int>(channels);
    }
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "protocol", &v));
    std::string proto;
    BRAID_RETURN_IF_ERROR(acc_.getString(*v, {"protocol"}, &proto));
    if (proto == "Simple") {
      alg.protocol = Protocol::kSimple;
    } else if (proto == "LL") {
      alg.protocol = Protocol::kLL;
    } else if (proto == "LL128") {
      alg.protocol = Protocol::kLL128;
    } else {
      return acc_.error({"protocol"}, fmt::format("unknown protocol \"{}\" (expected Simple, LL or LL128)", proto));
    }
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "in_place", &v));
    BRAID_RETURN_IF_ERROR(acc_.getBool(*v, {"in_place"}, &alg.in_place));
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "out_of_place", &v));
    BRAID_RETURN_IF_ERROR(acc_.getBool(*v, {"out_of_place"}, &alg.out_of_place));
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "min_bytes", &v));
    BRAID_RETURN_IF_ERROR(acc_.getUint64(*v, {"min_bytes"}, &alg.min_bytes));
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "max_bytes", &v));
    if (v->is_string() && v->get<std::string>() == "unlimited") {
      alg.max_bytes = kUnlimitedBytes;
    } else if (Status s = acc_.getUint64(*v, {"max_bytes"}, &alg.max_bytes); !s.isOk()) {
      return acc_.error({"max_bytes"}, "expected a non-negative integer or \"unlimited\"");
    }
    if (alg.min_bytes > alg.max_bytes) return acc_.error({"min_bytes"}, "is greater than max_bytes");
    if (const Json* r = acc_.member(root, "root")) {
      BRAID_RETURN_IF_ERROR(acc_.getInt(*r, {"root"}, 0, alg.num_ranks - 1, &alg.root));
    }
    if (const Json* r = acc_.member(root, "redop")) BRAID_RETURN_IF_ERROR(acc_.getString(*r, {"redop"}, &alg.redop));
    if (const Json* n = acc_.member(root, "notes")) {
      BRAID_RETURN_IF_ERROR(acc_.getArray(*n, {"notes"}));
      for (size_t i = 0; i < n->size(); ++i) {
        std::string note;
        BRAID_RETURN_IF_ERROR(acc_.getString((*n)[i], {"notes", i}, &note));
        alg.notes.push_back(std::move(note));
      }
    }
    if (const Json* p = acc_.member(root, "provenance")) BRAID_RETURN_IF_ERROR(readProvenance(*p, &alg.provenance));
    BRAID_RETURN_IF_ERROR(acc_.need(root, top, "ranks", &v));
    BRAID_RETURN_IF_ERROR(acc_.getArray(*v, {"ranks"}));
    if (static_cast<int>(v->size()) != alg.num_ranks) {
      return acc_.error({"ranks"}, fmt::format("has {} entries but num_ranks is {}", v->size(), alg.num_ranks));
    }
    alg.ranks.resize(alg.num_ranks);
    for (size_t r = 0; r < v->size(); ++r) BRAID_RETURN_IF_ERROR(readRank((*v)[r], {"ranks", r}, alg, &alg.ranks[r]));
    return alg;
  }

 private:
  Status readProvenance(const Json& p, Provenance* out) {
    const Path path{"provenance"};
    if (!p.is_object()) return acc_.error(path, "expected an object");
    const std::pair<const char*, std::string*> strings[] = {{"generator", &out->generator},
                                                            {"topology", &out->topology},
                                                            {"sketch", &out->sketch},
                                                            {"solver", &out->solver},
                                                            {"created", &out->created}};
    for (const auto& [key, dst] : strings) {
      if (const Json* v = acc_.member(p, key))
        BRAID_RETURN_IF_ERROR(acc_.getString(*v, JsonAccess::child(path, key), dst));
    }
    if (const Json* v = acc_.member(p, "lower_bound_us")) {
      if (v->is_null()) {
        out->lower_bound_us = -1;
      } else {
        BRAID_RETURN_IF_ERROR(acc_.getDouble(*v, JsonAccess::child(path, "lower_bound_us"), &out->lower_bound_us));
      }
    }
    if (const Json* v = acc_.member(p, "predicted_us")) {
      Path pp = JsonAccess::child(path, "predicted_us");
      if (!v->is_object()) return acc_.error(pp, "expected an object {\"<bytes>\": <microseconds>, ...}");
      for (auto it = v->begin(); it != v->end(); ++it) {
        Path ep = JsonAccess::child(pp, it.key());
        const std::string& key = it.key();
        if (key.empty() || key.size() > 20 ||
            !std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          return acc_.error(ep, fmt::format("key \"{}\" is not a byte count", key));
        }
        errno = 0;
        unsigned long long bytes = std::strtoull(key.c_str(), nullptr, 10);
        if (errno == ERANGE) return acc_.error(ep, fmt::format("key \"{}\" does not fit in 64 bits", key));
        double us = 0;
        BRAID_RETURN_IF_ERROR(acc_.getDouble(it.value(), ep, &us));
        out->predicted_us[static_cast<uint64_t>(bytes)] = us;
      }
    }
    if (const Json* v = acc_.member(p, "extra")) {
      Path ep = JsonAccess::child(path, "extra");
      if (!v->is_object()) return acc_.error(ep, "expected an object of strings");
      for (auto it = v->begin(); it != v->end(); ++it) {
        std::string value;
        BRAID_RETURN_IF_ERROR(acc_.getString(it.value(), JsonAccess::child(ep, it.key()), &value));
        out->extra[it.key()] = std::move(value);
      }
    }
    return Status::ok();
  }

  Status readBuffer(const Json& v, const Path& path, BufferKind* out) {
    std::string s;
    BRAID_RETURN_IF_ERROR(acc_.getString(v, path, &s));
    if (s == "i") {
      *out = BufferKind::kInput;
    } else if (s == "o") {
      *out = BufferKind::kOutput;
    } else if (s == "s") {
      *out = BufferKind::kScratch;
    } else {
      return acc_.error(path, fmt::format("unknown buffer \"{}\" (expected i, o or s)", s));
    }
    return Status::ok();
  }

  Status readRank(const Json& j, const Path& path, const Algorithm& alg, RankProgram* out) {
    const Json* v = nullptr;
    constexpr int kMaxInt = std::numeric_limits<int>::max();
    BRAID_RETURN_IF_ERROR(acc_.need(j, path, "rank", &v));
    BRAID_RETURN_IF_ERROR(acc_.getInt(*v, JsonAccess::child(path, "rank"), 0, alg.num_ranks - 1, &out->rank));
    if (out->rank != static_cast<int>(std::get<size_t>(path.back()))) {
      return acc_.error(JsonAccess::child(path, "rank"),
                        fmt::format("is {} but this is entry {} (ranks must be listed 0..n-1)", out->rank,
                                    std::get<size_t>(path.back())));
    }
    const std::pair<const char*, int*> sizes[] = {{"input_chunks", &out->input_chunks},
                                                  {"output_chunks", &out->output_chunks},
                                                  {"scratch_chunks", &out->scratch_chunks}};
    for (const auto& [key, dst] : sizes) {
      BRAID_RETURN_IF_ERROR(acc_.need(j, path, key, &v));
      BRAID_RETURN_IF_ERROR(acc_.getInt(*v, JsonAccess::child(path, key), 0, kMaxInt, dst));
    }
    if (const Json* pc = acc_.member(j, "precopies")) {
      Path pp = JsonAccess::child(path, "precopies");
      BRAID_RETURN_IF_ERROR(acc_.getArray(*pc, pp));
      for (size_t i = 0; i < pc->size(); ++i) {
        Path ep = JsonAccess::child(pp, i);
        PreCopy c;
        const std::pair<const char*, int*> fields[] = {
            {"input_off", &c.input_off}, {"output_off", &c.output_off}, {"count", &c.count}};
        for (const auto& [key, dst] : fields) {
          BRAID_RETURN_IF_ERROR(acc_.need((*pc)[i], ep, key, &v));
          BRAID_RETURN_IF_ERROR(
              acc_.getInt(*v, JsonAccess::child(ep, key), key == std::string("count") ? 1 : 0, kMaxInt, dst));
        }
        out->precopies.push_back(c);
      }
    }
    BRAID_RETURN_IF_ERROR(acc_.need(j, path, "threadblocks", &v));
    Path tp = JsonAccess::child(path, "threadblocks");
    BRAID_RETURN_IF_ERROR(acc_.getArray(*v, tp));
    out->threadblocks.resize(v->size());
    for (size_t t = 0; t < v->size(); ++t) {
      Path bp = JsonAccess::child(tp, t);
      const Json& tj = (*v)[t];
      Threadblock& tb = out->threadblocks[t];
      const Json* f = nullptr;
      BRAID_RETURN_IF_ERROR(acc_.need(tj, bp, "id", &f));
      BRAID_RETURN_IF_ERROR(acc_.getInt(*f, JsonAccess::child(bp, "id"), 0, kMaxInt, &tb.id));
      if (tb.id != static_cast<int>(t)) {
        return acc_.error(JsonAccess::child(bp, "id"),
                          fmt::format("is {} but this is entry {} (ids must be 0..n-1)", tb.id, t));
      }
      BRAID_RETURN_IF_ERROR(acc_.need(tj, bp, "send", &f));
      BRAID_RETURN_IF_ERROR(acc_.getInt(*f, JsonAccess::child(bp, "send"), -1, alg.num_ranks - 1, &tb.send_peer));
      BRAID_RETURN_IF_ERROR(acc_.need(tj, bp, "recv", &f));
      BRAID_RETURN_IF_ERROR(acc_.getInt(*f, JsonAccess::child(bp, "recv"), -1, alg.num_ranks - 1, &tb.recv_peer));
      BRAID_RETURN_IF_ERROR(acc_.need(tj, bp, "channel", &f));
      BRAID_RETURN_IF_ERROR(acc_.getInt(*f, JsonAccess::child(bp, "channel"), 0, kMaxInt, &tb.channel));
      BRAID_RETURN_IF_ERROR(acc_.need(tj, bp, "steps", &f));
      Path sp = JsonAccess::child(bp, "steps");
      BRAID_RETURN_IF_ERROR(acc_.getArray(*f, sp));
      for (size_t s = 0; s < f->size(); ++s) {
        Step step;
        BRAID_RETURN_IF_ERROR(readStep((*f)[s], JsonAccess::child(sp, s), &step));
        tb.steps.push_back(std::move(step));
      }
    }
    return Status::ok();
  }

  Status readStep(const Json& j, const Path& path, Step* step) {
    constexpr int kMaxInt = std::numeric_limits<int>::max();
    const Json* v = nullptr;
    BRAID_RETURN_IF_ERROR(acc_.need(j, path, "type", &v));
    std::string type;
    BRAID_RETURN_IF_ERROR(acc_.getString(*v, JsonAccess::child(path, "type"), &type));
    std::optional<OpType> op = parseOpType(type);
    if (!op) return acc_.error(JsonAccess::child(path, "type"), fmt::format("unknown step type \"{}\"", type));
    step->type = *op;
    BRAID_RETURN_IF_ERROR(acc_.need(j, path, "src_buf", &v));
    BRAID_RETURN_IF_ERROR(readBuffer(*v, JsonAccess::child(path, "src_buf"), &step->src_buf));
    BRAID_RETURN_IF_ERROR(acc_.need(j, path, "src_off", &v));
    BRAID_RETURN_IF_ERROR(acc_.getInt(*v, JsonAccess::child(path, "src_off"), -1, kMaxInt, &step->src_off));
    BRAID_RETURN_IF_ERROR(acc_.need(j, path, "dst_buf", &v));
    BRAID_RETURN_IF_ERROR(readBuffer(*v, JsonAccess::child(path, "dst_buf"), &step->dst_buf));
    BRAID_RETURN_IF_ERROR(acc_.need(j, path, "dst_off", &v));
    BRAID_RETURN_IF_ERROR(acc_.getInt(*v, JsonAccess::child(path, "dst_off"), -1, kMaxInt, &step->dst_off));
    BRAID_RETURN_IF_ERROR(acc_.need(j, path, "count", &v));
    BRAID_RETURN_IF_ERROR(acc_.getInt(*v, JsonAccess::child(path, "count"), 0, kMaxInt, &step->count));
    if (const Json* d = acc_.member(j, "deps")) {
      Path dp = JsonAccess::child(path, "deps");
      BRAID_RETURN_IF_ERROR(acc_.getArray(*d, dp));
      for (size_t i = 0; i < d->size(); ++i) {
        Path ep = JsonAccess::child(dp, i);
        const Json& pair = (*d)[i];
        if (!pair.is_array() || pair.size() != 2) return acc_.error(ep, "expected [threadblock, step]");
        Dependency dep;
        BRAID_RETURN_IF_ERROR(acc_.getInt(pair[0], JsonAccess::child(ep, size_t{0}), 0, kMaxInt, &dep.tb));
        BRAID_RETURN_IF_ERROR(acc_.getInt(pair[1], JsonAccess::child(ep, size_t{1}), 0, kMaxInt, &dep.step));
        step->deps.push_back(dep);
      }
    }
    if (const Json* h = acc_.member(j, "has_dep"))
      BRAID_RETURN_IF_ERROR(acc_.getBool(*h, JsonAccess::child(path, "has_dep"), &step->has_dep));
    return Status::ok();
  }

  JsonAccess acc_;
};

// ---- TACCL / SCCL algorithm JSON ---------------------------------------------------------------

struct TacclSend {
  int64_t addr = 0;
  int src = 0;
  int dst = 0;
  double time = 0;  // TACCL's 4th field (start time within the step); 0 when absent
  size_t order = 0;
};

class TacclJsonReader {
 public:
  TacclJsonReader(const std::string& text, const std::string& file) : acc_(text, file) {}

  Result<Algorithm> read(const Json& root);

 private:
  Status readAddressMap(const Json& root, const char* key, int num_ranks, std::vector<std::vector<int64_t>>* out);

  JsonAccess acc_;
};

Status TacclJsonReader::readAddressMap(const Json& root, const char* key, int num_ranks,
                                       std::vector<std::vector<int64_t>>* out) {
  const Json* m = nullptr;
  BRAID_RETURN_IF_ERROR(acc_.need(root, {}, key, &m));
  if (!m->is_object()) return acc_.error({key}, "expected an object {\"<rank>\": [chunk, ...]}");
  out->assign(num_ranks, {});
  for (auto it = m->begin(); it != m->end(); ++it) {
    Path kp{key, it.key()};
    const std::string& k = it.key();
    if (k.empty() || k.size() > 7 || !std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return acc_.error(kp, fmt::format("key \"{}\" is not a rank", k));
    }
    int rank = std::stoi(k);
    if (rank >= num_ranks)
      return acc_.error(kp, fmt::format("rank {} is not below the rank count {}", rank, num_ranks));
    BRAID_RETURN_IF_ERROR(acc_.getArray(it.value(), kp));
    std::set<int64_t> addrs;
    for (size_t i = 0; i < it.value().size(); ++i) {
      int64_t a = 0;
      BRAID_RETURN_IF_ERROR(
          acc_.getInt64(it.value()[i], JsonAccess::child(kp, i), 0, std::numeric_limits<int32_t>::max(), &a));
      if (!addrs.insert(a).second) return acc_.error(JsonAccess::child(kp, i), fmt::format("chunk {} listed twice", a));
    }
    (*out)[rank].assign(addrs.begin(), addrs.end());  // sorted, as msccl-tools ncclize numbers them
  }
  return Status::ok();
}

Result<Algorithm> TacclJsonReader::read(const Json& root) {
  Algorithm alg;
  if (!root.is_object()) return acc_.error({}, "expected a JSON object");
  std::string type_key = acc_.member(root, "sccl_type") != nullptr ? "sccl_type" : "msccl_type";
  const Json* v = nullptr;
  BRAID_RETURN_IF_ERROR(acc_.need(root, {}, type_key, &v));
  std::string type;
  BRAID_RETURN_IF_ERROR(acc_.getString(*v, {type_key}, &type));
  if (type != "algorithm") {
    return acc_.error({type_key}, fmt::format("is \"{}\"; only \"algorithm\" objects can be converted", type));
  }
  if (const Json* n = acc_.member(root, "name")) BRAID_RETURN_IF_ERROR(acc_.getString(*n, {"name"}, &alg.name));

  // Rank count and collective: from "collective" (nodes, name, runtime_name), else from the maps.
  const Json* coll = nullptr;
  BRAID_RETURN_IF_ERROR(acc_.need(root, {}, "collective", &coll));
  if (!coll->is_object()) return acc_.error({"collective"}, "expected an object");
  BRAID_RETURN_IF_ERROR(acc_.need(*coll, {"collective"}, "nodes", &v));
  BRAID_RETURN_IF_ERROR(acc_.getInt(*v, {"collective", "nodes"}, 1, 1 << 16, &alg.num_ranks));
  std::string coll_name;
  if (const Json* rn = acc_.member(*coll, "runtime_name"); rn != nullptr && rn->is_string()) {
    coll_name = rn->get<std::string>();
  }
  std::string full_name;
  if (const Json* cn = acc_.member(*coll, "name"))
    BRAID_RETURN_IF_ERROR(acc_.getString(*cn, {"collective", "name"}, &full_name));
  if (coll_name.empty()) coll_name = full_name.substr(0, full_name.find('('));
  std::optional<CollectiveKind> kind = parseCollective(coll_name);
  if (kind) {
    alg.collective = *kind;
  } else {
    alg.collective = CollectiveKind::kCustom;
    alg.notes.push_back(fmt::format("collective \"{}\" has no MSCCL equivalent: loaded as custom", full_name));
  }
  alg.collective_name = collectiveName(alg.collective);
  if (size_t p = full_name.find("root="); p != std::string::npos) {
    alg.root = std::atoi(full_name.c_str() + p + 5);
    if (alg.root < 0 || alg.root >= alg.num_ranks) return acc_.error({"collective", "name"}, "root is out of range");
  }

  std::vector<std::vector<int64_t>> inputs, outputs;
  BRAID_RETURN_IF_ERROR(readAddressMap(root, "input_map", alg.num_ranks, &inputs));
  BRAID_RETURN_IF_ERROR(readAddressMap(root, "output_map", alg.num_ranks, &outputs));

  // Sends, ordered by (step, TACCL start time, position).
  const Json* steps = nullptr;
  BRAID_RETURN_IF_ERROR(acc_.need(root, {}, "steps", &steps));
  BRAID_RETURN_IF_ERROR(acc_.getArray(*steps, {"steps"}));
  std::vector<std::vector<TacclSend>> by_step(steps->size());
  int64_t total_rounds = 0;
  bool extra_fields = false;
  for (size_t s = 0; s < steps->size(); ++s) {
    Path sp{"steps", s};
    const Json& sj = (*steps)[s];
    const Json* sends = nullptr;
    BRAID_RETURN_IF_ERROR(acc_.need(sj, sp, "sends", &sends));
    if (const Json* r = acc_.member(sj, "rounds")) {
      int64_t rounds = 0;
      BRAID_RETURN_IF_ERROR(
          acc_.getInt64(*r, JsonAccess::child(sp, "rounds"), 0, std::numeric_limits<int32_t>::max(), &rounds));
      total_rounds += rounds;
    }
    Path sendp = JsonAccess::child(sp, "sends");
    BRAID_RETURN_IF_ERROR(acc_.getArray(*sends, sendp));
    for (size_t i = 0; i < sends->size(); ++i) {
      Path ep = JsonAccess::child(sendp, i);
      const Json& e = (*sends)[i];
      if (!e.is_array() || e.size() < 3) return acc_.error(ep, "expected [chunk, src, dst, ...]");
      TacclSend send;
      send.order = i;
      BRAID_RETURN_IF_ERROR(
          acc_.getInt64(e[0], JsonAccess::child(ep, size_t{0}), 0, std::numeric_limits<int32_t>::max(), &send.addr));
      BRAID_RETURN_IF_ERROR(acc_.getInt(e[1], JsonAccess::child(ep, size_t{1}), 0, alg.num_ranks - 1, &send.src));
      BRAID_RETURN_IF_ERROR(acc_.getInt(e[2], JsonAccess::child(ep, size_t{2}), 0, alg.num_ranks - 1, &send.dst));
      if (send.src == send.dst) return acc_.error(ep, fmt::format("rank {} sends to itself", send.src));
      if (e.size() > 3) {
        extra_fields = true;
        if (e[3].is_number()) send.time = e[3].get<double>();
      }
      by_step[s].push_back(send);
    }
    std::stable_sort(by_step[s].begin(), by_step[s].end(), [](const TacclSend& a, const TacclSend& b) {
      return std::tie(a.time, a.order) < std::tie(b.time, b.order);
    });
  }
  if (extra_fields) {
    alg.notes.push_back(
        "sends carry TACCL fields after [chunk, src, dst]: the 4th (start time) orders sends within a "
        "step, the rest is ignored");
  }

  // Buffer mapping per rank (msccl-tools ncclize): input index = position in sorted input_map,
  // output index = position in sorted output_map; an address in both is copied input -> output
  // before the steps (<copy>) and then lives in the output buffer; any other address is scratch.
  const int n = alg.num_ranks;
  struct Location {
    BufferKind buf;
    int off;
  };
  std::vector<std::map<int64_t, Location>> where(n);
  std::vector<std::set<int64_t>> holds(n);  // addresses a rank holds a value for
  int num_chunks = 1;
  for (int r = 0; r < n; ++r) {
    RankProgram& prog = alg.ranks.emplace_back();
    prog.rank = r;
    prog.input_chunks = static_cast<int>(inputs[r].size());
    prog.output_chunks = static_cast<int>(outputs[r].size());
    num_chunks = std::max({num_chunks, prog.input_chunks, prog.output_chunks});
    std::map<int64_t, int> out_index;
    for (size_t i = 0; i < outputs[r].size(); ++i) {
      out_index[outputs[r][i]] = static_cast<int>(i);
      where[r][outputs[r][i]] = {BufferKind::kOutput, static_cast<int>(i)};
    }
    for (size_t i = 0; i < inputs[r].size(); ++i) {
      const int64_t a = inputs[r][i];
      holds[r].insert(a);
      auto it = out_index.find(a);
      if (it != out_index.end()) {
        prog.precopies.push_back(PreCopy{static_cast<int>(i), it->second, 1});
      } else {
        where[r][a] = {BufferKind::kInput, static_cast<int>(i)};
      }
    }
  }
  alg.num_chunks = num_chunks;
  // Scratch for addresses a rank touches that are in neither map (sorted, as ncclize does).
  std::vector<std::set<int64_t>> scratch(n);
  for (const auto& step : by_step) {
    for (const TacclSend& s : step) {
      for (int r : {s.src, s.dst}) {
        if (where[r].count(s.addr) == 0) scratch[r].insert(s.addr);
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    int i = 0;
    for (int64_t a : scratch[r]) where[r][a] = {BufferKind::kScratch, i++};
    alg.ranks[r].scratch_chunks = i;
  }

  // Threadblocks: per rank, receive threadblocks (send=-1, recv=p) then send threadblocks
  // (send=p, recv=-1), peers ascending — msccl-tools' (send, recv, chan) order.
  std::vector<std::map<std::pair<int, int>, int>> tb_of(n);  // (send, recv) -> tb id
  for (int r = 0; r < n; ++r) {
    std::set<int> recv_peers, send_peers;
    for (const auto& step : by_step) {
      for (const TacclSend& s : step) {
        if (s.dst == r) recv_peers.insert(s.src);
        if (s.src == r) send_peers.insert(s.dst);
      }
    }
    auto add = [&](int send, int recv) {
      Threadblock tb;
      tb.id = static_cast<int>(alg.ranks[r].threadblocks.size());
      tb.send_peer = send;
      tb.recv_peer = recv;
      tb.channel = 0;
      tb_of[r][{send, recv}] = tb.id;
      alg.ranks[r].threadblocks.push_back(tb);
    };
    for (int p : recv_peers) add(-1, p);
    for (int p : send_peers) add(p, -1);
  }

  // Hazard tracking per (rank, address): the last write (a receive) and the reads (sends) since.
  struct Access {
    std::optional<Dependency> writer;
    std::vector<Dependency> readers;
  };
  std::vector<std::map<int64_t, Access>> access(n);
  auto addDep = [](Step* step, int own_tb, const Dependency& d) {
    if (d.tb == own_tb) return;  // same threadblock: ordered already
    if (std::find(step->deps.begin(), step->deps.end(), d) == step->deps.end()) step->deps.push_back(d);
  };
  for (size_t s = 0; s < by_step.size(); ++s) {
    // Sends read the values held at the start of the step.
    for (size_t i = 0; i < by_step[s].size(); ++i) {
      const TacclSend& send = by_step[s][i];
      if (holds[send.src].count(send.addr) == 0) {
        return acc_.error(
            {"steps", s, "sends", send.order},
            fmt::format("rank {} sends chunk {} in step {} but does not hold it yet", send.src, send.addr, s));
      }
      const Location loc = where[send.src][send.addr];
      const int tb = tb_of[send.src][{send.dst, -1}];
      Threadblock& block = alg.ranks[send.src].threadblocks[tb];
      Step step;
      step.type = OpType::kSend;
      step.src_buf = loc.buf;
      step.src_off = loc.off;
      step.dst_buf = loc.buf;
      step.dst_off = loc.off;
      step.count = 1;
      Access& acc = access[send.src][send.addr];
      if (acc.writer) addDep(&step, tb, *acc.writer);
      acc.readers.push_back(Dependency{tb, static_cast<int>(block.steps.size())});
      block.steps.push_back(std::move(step));
    }
    // Receives land at the end of the step: into a fresh location (r) or reducing into a held one (rrc).
    std::vector<std::pair<int, int64_t>> arrived;
    for (const TacclSend& send : by_step[s]) {
      const Location loc = where[send.dst][send.addr];
      const int tb = tb_of[send.dst][{-1, send.src}];
      Threadblock& block = alg.ranks[send.dst].threadblocks[tb];
      Step step;
      const bool reduce = holds[send.dst].count(send.addr) > 0;
      step.type = reduce ? OpType::kRecvReduceCopy : OpType::kRecv;
      step.src_buf = loc.buf;
      step.src_off = reduce ? loc.off : -1;
      step.dst_buf = loc.buf;
      step.dst_off = loc.off;
      step.count = 1;
      Access& acc = access[send.dst][send.addr];
      if (acc.writer) addDep(&step, tb, *acc.writer);
      for (const Dependency& d : acc.readers) addDep(&step, tb, d);
      acc.writer = Dependency{tb, static_cast<int>(block.steps.size())};
      acc.readers.clear();
      block.steps.push_back(std::move(step));
      arrived.emplace_back(send.dst, send.addr);
    }
    for (const auto& [r, a] : arrived) holds[r].insert(a);
  }
  for (int r = 0; r < n; ++r) {
    for (const Threadblock& tb : alg.ranks[r].threadblocks) {
      for (const Step& step : tb.steps) {
        for (const Dependency& d : step.deps) alg.ranks[r].threadblocks[d.tb].steps[d.step].has_dep = true;
      }
    }
  }

  // Modes: precopies keep the input buffer read-only, so the algorithm is out-of-place.
  alg.in_place = false;
  alg.out_of_place = true;
  alg.protocol = Protocol::kSimple;
  alg.num_channels = 1;
  alg.provenance.generator = "taccl algorithm json";
  if (const Json* t = acc_.member(root, "topology"); t != nullptr && t->is_object()) {
    if (const Json* tn = acc_.member(*t, "name"); tn != nullptr && tn->is_string())
      alg.provenance.topology = tn->get<std::string>();
  }
  alg.provenance.extra["steps"] = std::to_string(by_step.size());
  alg.provenance.extra["rounds"] = std::to_string(total_rounds);
  alg.notes.push_back(fmt::format(
      "converted from TACCL/SCCL algorithm JSON: {} steps, {} rounds; one threadblock per (rank, peer, direction) on "
      "channel 0, protocol Simple, out-of-place",
      by_step.size(), total_rounds));
  return alg;
}

}  // namespace

std::string writeAlgorithmJson(const Algorithm& alg) {
  OrderedJson j;
  j["format"] = kFormatMarker;
  j["version"] = kFormatVersion;
  j["name"] = alg.name;
  j["collective"] = collectiveName(alg.collective);
  j["collective_name"] = alg.collective_name;
  j["num_ranks"] = alg.num_ranks;
  j["num_chunks"] = alg.num_chunks;
  j["num_channels"] = alg.num_channels;
  j["protocol"] = protocolName(alg.protocol);
  j["in_place"] = alg.in_place;
  j["out_of_place"] = alg.out_of_place;
  j["min_bytes"] = alg.min_bytes;
  j["max_bytes"] = alg.max_bytes == kUnlimitedBytes ? OrderedJson("unlimited") : OrderedJson(alg.max_bytes);
  j["root"] = alg.root;
  j["redop"] = alg.redop;
  OrderedJson prov;
  prov["generator"] = alg.provenance.generator;
  prov["topology"] = alg.provenance.topology;
  prov["sketch"] = alg.provenance.sketch;
  prov["solver"] = alg.provenance.solver;
  prov["created"] = alg.provenance.created;
  prov["lower_bound_us"] =
      std::isfinite(alg.provenance.lower_bound_us) ? OrderedJson(alg.provenance.lower_bound_us) : OrderedJson(-1);
  OrderedJson predicted = OrderedJson::object();
  for (const auto& [bytes, us] : alg.provenance.predicted_us) {
    if (std::isfinite(us)) predicted[std::to_string(bytes)] = us;
  }
  prov["predicted_us"] = predicted;
  prov["extra"] = OrderedJson(alg.provenance.extra);
  j["provenance"] = prov;
  j["notes"] = alg.notes;
  OrderedJson ranks = OrderedJson::array();
  for (const RankProgram& p : alg.ranks) {
    OrderedJson pj;
    pj["rank"] = p.rank;
    pj["input_chunks"] = p.input_chunks;
    pj["output_chunks"] = p.output_chunks;
    pj["scratch_chunks"] = p.scratch_chunks;
    OrderedJson copies = OrderedJson::array();
    for (const PreCopy& c : p.precopies) {
      copies.push_back({{"input_off", c.input_off}, {"output_off", c.output_off}, {"count", c.count}});
    }
    pj["precopies"] = copies;
    OrderedJson tbs = OrderedJson::array();
    for (const Threadblock& tb : p.threadblocks) {
      OrderedJson steps = OrderedJson::array();
      for (const Step& s : tb.steps) steps.push_back(stepJson(s));
      tbs.push_back(
          {{"id", tb.id}, {"send", tb.send_peer}, {"recv", tb.recv_peer}, {"channel", tb.channel}, {"steps", steps}});
    }
    pj["threadblocks"] = tbs;
    ranks.push_back(pj);
  }
  j["ranks"] = ranks;
  // Invalid UTF-8 in names/notes is replaced rather than thrown (nlohmann error_handler).
  return j.dump(1, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
}

Result<Algorithm> readAlgorithmJson(const std::string& text, const std::string& filename) {
  try {
    BRAID_ASSIGN_OR_RETURN(Json root, parseJsonText(text, filename));
    BraidJsonReader reader(text, filename);
    return reader.read(root);
  } catch (const std::exception& e) {
    return internalError(fmt::format("{}: reading Braid JSON failed: {}", filename, e.what()));
  }
}

Result<Algorithm> readTacclAlgorithmJson(const std::string& text, const std::string& filename) {
  try {
    BRAID_ASSIGN_OR_RETURN(Json root, parseJsonText(text, filename));
    TacclJsonReader reader(text, filename);
    return reader.read(root);
  } catch (const std::exception& e) {
    return internalError(fmt::format("{}: reading TACCL algorithm JSON failed: {}", filename, e.what()));
  }
}

}  // namespace braid
