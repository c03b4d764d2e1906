// MSCCL XML algorithm files: reader for both runtimes' flavours and TACCL-EF, and writer.
//
// Format and parser behaviour: ../shared/reference/taccl_msccl.md §2.3, §1.7, §3, checked against
// Azure/msccl-executor-nccl src/misc/msccl/msccl_parser.cc + msccl_lifecycle.cc and microsoft/msccl
// src/graph/topo.cc + tuning.cc. docs/formats/algorithm.md says which behaviour each rule follows.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <pugixml.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "braid/algorithm.h"
#include "braid/file_io.h"
#include "common/xml_util.h"

namespace braid {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Marker attribute written by the kMicrosoft flavour: its maxBytes is exclusive (microsoft/msccl
// tuning.cc selects minBytes <= n < maxBytes). Both runtimes ignore unknown attributes.
constexpr const char* kExclusiveMarker = "maxbytes_exclusive";

// Parses a whole attribute value as an integer: optional whitespace, optional sign, decimal digits
// or 0x hex digits (both runtimes read numbers with strtol(str, NULL, 0)).
std::optional<int64_t> parseInt64(std::string_view s, bool* overflow) {
  *overflow = false;
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  s = s.substr(b, e - b);
  if (s.empty()) return std::nullopt;
  bool negative = false;
  size_t i = 0;
  if (s[0] == '-' || s[0] == '+') {
    negative = s[0] == '-';
    i = 1;
  }
  int base = 10;
  if (s.size() > i + 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
    base = 16;
    i += 2;
  }
  if (i >= s.size()) return std::nullopt;
  uint64_t magnitude = 0;
  const uint64_t limit = negative ? static_cast<uint64_t>(kInt64Max) + 1 : static_cast<uint64_t>(kInt64Max);
  for (; i < s.size(); ++i) {
    const char c = s[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (base == 16 && c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    if (magnitude > (limit - digit) / base) {
      *overflow = true;
      return std::nullopt;
    }
    magnitude = magnitude * base + digit;
  }
  if (negative)
    return magnitude == static_cast<uint64_t>(kInt64Max) + 1 ? std::numeric_limits<int64_t>::min()
                                                             : -static_cast<int64_t>(magnitude);
  return static_cast<int64_t>(magnitude);
}

class Reader {
 public:
  Reader(const std::string& text, const std::string& filename) : text_(text), file_(filename), lines_(text) {}

  Result<Algorithm> read();

 private:
  int lineOf(const pugi::xml_node& node) const { return lines_.line(node.offset_debug()); }
  std::string field(const pugi::xml_node& node, const char* attr) const {
    return fmt::format("<{}> attribute '{}'", node.name(), attr);
  }
  Status error(const pugi::xml_node& node, const char* attr, const std::string& what) const {
    return parseError(file_, lineOf(node), field(node, attr), what);
  }
  Status missing(const pugi::xml_node& node, const char* attr) const {
    return parseError(file_, lineOf(node), field(node, attr), "missing (required)");
  }

  // Integer attribute; nullopt (and *status set) on error or when absent and required.
  Status getInt64(const pugi::xml_node& node, const char* attr, int64_t* out, bool* present = nullptr) const {
    pugi::xml_attribute a = node.attribute(attr);
    if (!a) {
      if (present != nullptr) {
        *present = false;
        return Status::ok();
      }
      return missing(node, attr);
    }
    if (present != nullptr) *present = true;
    bool overflow = false;
    std::optional<int64_t> v = parseInt64(a.value(), &overflow);
    if (!v) {
      return error(node, attr,
                   overflow ? fmt::format("'{}' does not fit in 64 bits", a.value())
                            : fmt::format("'{}' is not an integer", a.value()));
    }
    *out = *v;
    return Status::ok();
  }
  Status getInt(const pugi::xml_node& node, const char* attr, int min_value, int max_value, int* out) const {
    int64_t v = 0;
    BRAID_RETURN_IF_ERROR(getInt64(node, attr, &v));
    if (v < min_value || v > max_value) {
      return error(node, attr, fmt::format("{} is out of range [{}, {}]", v, min_value, max_value));
    }
    *out = static_cast<int>(v);
    return Status::ok();
  }
  Status getBuffer(const pugi::xml_node& node, const char* attr, BufferKind* out) const {
    pugi::xml_attribute a = node.attribute(attr);
    if (!a) return missing(node, attr);
    std::string_view v = a.value();
    if (v == "i") {
      *out = BufferKind::kInput;
    } else if (v == "o") {
      *out = BufferKind::kOutput;
    } else if (v == "s") {
      *out = BufferKind::kScratch;
    } else {
      return error(node, attr, fmt::format("unknown buffer '{}' (expected i, o or s)", a.value()));
    }
    return Status::ok();
  }

  Status rejectDuplicateAttributes(const pugi::xml_document& doc) const;
  Status readHeader(const pugi::xml_node& algo, Algorithm* alg);
  Status readGpu(const pugi::xml_node& gpu, Algorithm* alg, std::vector<bool>* seen);
  Status readThreadblock(const pugi::xml_node& tb_node, int rank, const Algorithm& alg, Threadblock* tb);
  Status readStep(const pugi::xml_node& step_node, int index, Step* step);

  const std::string& text_;
  const std::string& file_;
  LineIndex lines_;
  std::set<std::string> ignored_elements_;
};

Result<Algorithm> Reader::read() {
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(text_.data(), text_.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!parsed) {
    return parseError(file_, lines_.line(parsed.offset), "", fmt::format("malformed XML: {}", parsed.description()));
  }
  BRAID_RETURN_IF_ERROR(rejectDuplicateAttributes(doc));
  pugi::xml_node algo = doc.document_element();
  if (!algo) return parseError(file_, 0, "", "no XML element found (expected <algo>)");
  if (std::string_view(algo.name()) != "algo") {
    return parseError(file_, lineOf(algo), "", fmt::format("root element is <{}>, expected <algo>", algo.name()));
  }
  Algorithm alg;
  BRAID_RETURN_IF_ERROR(readHeader(algo, &alg));

  alg.ranks.resize(alg.num_ranks);
  std::vector<bool> seen(alg.num_ranks, false);
  for (pugi::xml_node child = algo.first_child(); child; child = child.next_sibling()) {
    if (child.type() != pugi::node_element) continue;
    if (std::string_view(child.name()) == "gpu") {
      BRAID_RETURN_IF_ERROR(readGpu(child, &alg, &seen));
    } else {
      ignored_elements_.insert(child.name());
    }
  }
  for (int r = 0; r < alg.num_ranks; ++r) {
    if (!seen[r]) {
      return parseError(file_, lineOf(algo), "<gpu>",
                        fmt::format("no <gpu id=\"{}\"> although ngpus is {}", r, alg.num_ranks));
    }
  }
  for (const std::string& name : ignored_elements_) {
    alg.notes.push_back(fmt::format("ignored unknown element <{}> (both MSCCL runtimes skip it)", name));
  }
  return alg;
}

// Duplicate attributes make XML not well-formed (XML 1.0 §3.1, "Unique Att Spec"). Every element is checked, in
// document order, the ones the reader skips included; the error names the line of the second occurrence.
Status Reader::rejectDuplicateAttributes(const pugi::xml_document& doc) const {
  std::optional<DuplicateAttribute> d = findDuplicateAttribute(doc, text_, lines_);
  if (!d) return Status::ok();
  return parseError(file_, d->line, field(d->element, d->attribute.c_str()),
                    fmt::format("appears twice (\"{}\" and \"{}\"): duplicate attributes make the XML not well-formed",
                                d->first_value, d->second_value));
}

Status Reader::readHeader(const pugi::xml_node& algo, Algorithm* alg) {
  if (pugi::xml_attribute a = algo.attribute("name")) {
    alg->name = a.value();
  } else {
    alg->notes.push_back("attribute 'name' missing: the algorithm has no name (microsoft/msccl requires it)");
  }
  pugi::xml_attribute proto = algo.attribute("proto");
  if (!proto) return missing(algo, "proto");
  std::string_view p = proto.value();
  if (p == "Simple") {
    alg->protocol = Protocol::kSimple;
  } else if (p == "LL") {
    alg->protocol = Protocol::kLL;
  } else if (p == "LL128") {
    alg->protocol = Protocol::kLL128;
  } else {
    return error(algo, "proto", fmt::format("unknown protocol '{}' (expected Simple, LL or LL128)", proto.value()));
  }
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  {
    // Above MAXCHANNELS the file still loads and verify() reports it with the rest; below 1 nothing can use it.
    // Either way the message gives the range a runtime accepts.
    int64_t channels = 0;
    BRAID_RETURN_IF_ERROR(getInt64(algo, "nchannels", &channels));
    if (channels < 1 || channels > kMaxInt) {
      return error(algo, "nchannels", channelRangeMessage(channels));
    }
    alg->num_channels = static_cast<int>(channels);
  }
  BRAID_RETURN_IF_ERROR(getInt(algo, "nchunksperloop", 1, kMaxInt, &alg->num_chunks));
  // 65536 ranks is far beyond any MSCCL runtime (one process per GPU, MAXCHANNELS x 32
  // threadblocks) and keeps a garbled ngpus from allocating much memory.
  BRAID_RETURN_IF_ERROR(getInt(algo, "ngpus", 1, 1 << 16, &alg->num_ranks));

  pugi::xml_attribute coll = algo.attribute("coll");
  if (!coll) {
    return parseError(file_, lineOf(algo), field(algo, "coll"),
                      "missing (required by both MSCCL runtimes: which collective this algorithm implements)");
  }
  std::optional<CollectiveKind> kind = parseCollective(coll.value());
  if (!kind) {
    return error(algo, "coll",
                 fmt::format("unknown collective '{}' (expected allgather, reducescatter/reduce_scatter, allreduce, "
                             "alltoall, broadcast, reduce or custom)",
                             coll.value()));
  }
  alg->collective = *kind;
  alg->collective_name = coll.value();

  int inplace = 0;
  BRAID_RETURN_IF_ERROR(getInt(algo, "inplace", 0, 1, &inplace));
  alg->in_place = inplace == 1;
  bool has_outofplace = false;
  int64_t outofplace = 0;
  BRAID_RETURN_IF_ERROR(getInt64(algo, "outofplace", &outofplace, &has_outofplace));
  if (has_outofplace) {
    if (outofplace != 0 && outofplace != 1)
      return error(algo, "outofplace", fmt::format("{} is not 0 or 1", outofplace));
    alg->out_of_place = outofplace == 1;
  } else {
    alg->out_of_place = !alg->in_place;
    alg->notes.push_back(
        fmt::format("attribute 'outofplace' missing (old format): assumed outofplace={} (= not inplace)",
                    alg->out_of_place ? 1 : 0));
  }
  if (!alg->in_place && !alg->out_of_place) {
    alg->notes.push_back("inplace=0 and outofplace=0: no runtime will ever select this algorithm");
  }

  bool has_min = false, has_max = false;
  int64_t min_bytes = 0, max_bytes = 0;
  BRAID_RETURN_IF_ERROR(getInt64(algo, "minBytes", &min_bytes, &has_min));
  BRAID_RETURN_IF_ERROR(getInt64(algo, "maxBytes", &max_bytes, &has_max));
  if (has_min) {
    if (min_bytes < 0) return error(algo, "minBytes", fmt::format("{} is negative", min_bytes));
    alg->min_bytes = static_cast<uint64_t>(min_bytes);
  } else {
    alg->min_bytes = 0;
    alg->notes.push_back("attribute 'minBytes' missing (old format): assumed minBytes=0");
  }
  int64_t exclusive_marker = 0;
  bool has_marker = false;
  BRAID_RETURN_IF_ERROR(getInt64(algo, kExclusiveMarker, &exclusive_marker, &has_marker));
  const bool exclusive = (has_marker && exclusive_marker != 0) || (has_max && !has_outofplace);
  if (!has_max) {
    alg->max_bytes = kUnlimitedBytes;
    alg->notes.push_back(
        "attribute 'maxBytes' missing (old format): assumed no upper size limit (microsoft/msccl would default to "
        "128 MiB exclusive)");
  } else if (max_bytes < 0) {
    return error(algo, "maxBytes", fmt::format("{} is negative", max_bytes));
  } else if (max_bytes == 0) {
    alg->max_bytes = kUnlimitedBytes;
    if (exclusive) {
      alg->notes.push_back(
          "maxBytes=0 read as no upper limit (Azure/msccl-executor-nccl meaning); microsoft/msccl would never select "
          "this algorithm");
    }
  } else if (max_bytes == kInt64Max) {
    alg->max_bytes = kUnlimitedBytes;
  } else if (exclusive) {
    alg->max_bytes = static_cast<uint64_t>(max_bytes) - 1;
    alg->notes.push_back(fmt::format(
        "maxBytes={} read as exclusive (microsoft/msccl selects minBytes <= size < maxBytes): largest size {}",
        max_bytes, alg->max_bytes));
  } else {
    alg->max_bytes = static_cast<uint64_t>(max_bytes);
  }
  if (alg->min_bytes > alg->max_bytes) {
    return error(algo, "minBytes",
                 fmt::format("minBytes {} is above the largest size {} of the window", alg->min_bytes, alg->max_bytes));
  }
  if (pugi::xml_attribute a = algo.attribute("redop")) alg->redop = a.value();
  if (pugi::xml_attribute a = algo.attribute("root")) {
    int root = 0;
    BRAID_RETURN_IF_ERROR(getInt(algo, "root", 0, alg->num_ranks - 1, &root));
    alg->root = root;
  }
  return Status::ok();
}

Status Reader::readGpu(const pugi::xml_node& gpu, Algorithm* alg, std::vector<bool>* seen) {
  int rank = 0;
  BRAID_RETURN_IF_ERROR(getInt(gpu, "id", 0, alg->num_ranks - 1, &rank));
  if ((*seen)[rank]) return error(gpu, "id", fmt::format("<gpu id=\"{}\"> appears twice", rank));
  (*seen)[rank] = true;
  RankProgram& program = alg->ranks[rank];
  program.rank = rank;
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  BRAID_RETURN_IF_ERROR(getInt(gpu, "i_chunks", 0, kMaxInt, &program.input_chunks));
  BRAID_RETURN_IF_ERROR(getInt(gpu, "o_chunks", 0, kMaxInt, &program.output_chunks));
  BRAID_RETURN_IF_ERROR(getInt(gpu, "s_chunks", 0, kMaxInt, &program.scratch_chunks));

  std::vector<std::pair<int, pugi::xml_node>> tb_nodes;
  for (pugi::xml_node child = gpu.first_child(); child; child = child.next_sibling()) {
    if (child.type() != pugi::node_element) continue;
    std::string_view name = child.name();
    if (name == "tb") {
      int id = 0;
      BRAID_RETURN_IF_ERROR(getInt(child, "id", 0, kMaxInt, &id));
      tb_nodes.emplace_back(id, child);
    } else if (name == "copy") {
      PreCopy copy;
      BRAID_RETURN_IF_ERROR(getInt(child, "i_off", 0, kMaxInt, &copy.input_off));
      BRAID_RETURN_IF_ERROR(getInt(child, "o_off", 0, kMaxInt, &copy.output_off));
      if (child.attribute("cnt")) BRAID_RETURN_IF_ERROR(getInt(child, "cnt", 1, kMaxInt, &copy.count));
      program.precopies.push_back(copy);
    } else {
      ignored_elements_.insert(child.name());
    }
  }
  std::stable_sort(tb_nodes.begin(), tb_nodes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  program.threadblocks.resize(tb_nodes.size());
  for (size_t i = 0; i < tb_nodes.size(); ++i) {
    const int id = tb_nodes[i].first;
    if (id != static_cast<int>(i)) {
      const bool duplicate = i > 0 && tb_nodes[i - 1].first == id;
      return error(tb_nodes[i].second, "id",
                   duplicate ? fmt::format("threadblock id {} appears twice on gpu {}", id, rank)
                             : fmt::format("threadblock ids on gpu {} are not 0..{}: id {} where {} was expected", rank,
                                           tb_nodes.size() - 1, id, i));
    }
    BRAID_RETURN_IF_ERROR(readThreadblock(tb_nodes[i].second, rank, *alg, &program.threadblocks[i]));
  }
  return Status::ok();
}

Status Reader::readThreadblock(const pugi::xml_node& tb_node, int rank, const Algorithm& alg, Threadblock* tb) {
  tb->id = tb_node.attribute("id").as_int();
  BRAID_RETURN_IF_ERROR(getInt(tb_node, "send", -1, alg.num_ranks - 1, &tb->send_peer));
  BRAID_RETURN_IF_ERROR(getInt(tb_node, "recv", -1, alg.num_ranks - 1, &tb->recv_peer));
  BRAID_RETURN_IF_ERROR(getInt(tb_node, "chan", 0, alg.num_channels - 1, &tb->channel));
  if (tb->send_peer == rank) return error(tb_node, "send", fmt::format("peer {} is the gpu itself", rank));
  if (tb->recv_peer == rank) return error(tb_node, "recv", fmt::format("peer {} is the gpu itself", rank));
  int index = 0;
  for (pugi::xml_node child = tb_node.first_child(); child; child = child.next_sibling()) {
    if (child.type() != pugi::node_element) continue;
    if (std::string_view(child.name()) != "step") {
      ignored_elements_.insert(child.name());
      continue;
    }
    Step step;
    BRAID_RETURN_IF_ERROR(readStep(child, index, &step));
    if (opSends(step.type) && tb->send_peer < 0) {
      return error(child, "type",
                   fmt::format("'{}' sends but threadblock {} has send=\"-1\"", opTypeName(step.type), tb->id));
    }
    if (opReceives(step.type) && tb->recv_peer < 0) {
      return error(child, "type",
                   fmt::format("'{}' receives but threadblock {} has recv=\"-1\"", opTypeName(step.type), tb->id));
    }
    tb->steps.push_back(std::move(step));
    ++index;
  }
  return Status::ok();
}

Status Reader::readStep(const pugi::xml_node& node, int index, Step* step) {
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  int s = 0;
  BRAID_RETURN_IF_ERROR(getInt(node, "s", 0, kMaxInt, &s));
  if (s != index)
    return error(node, "s", fmt::format("step {} where {} was expected (steps must be 0..n-1 in order)", s, index));
  pugi::xml_attribute type = node.attribute("type");
  if (!type) return missing(node, "type");
  std::optional<OpType> op = parseOpType(type.value());
  if (!op) {
    return error(
        node, "type",
        fmt::format("unknown step type '{}' (expected s, r, rcs, rrs, rrc, rrcs, cpy, re or nop)", type.value()));
  }
  step->type = *op;
  BRAID_RETURN_IF_ERROR(getBuffer(node, "srcbuf", &step->src_buf));
  BRAID_RETURN_IF_ERROR(getInt(node, "srcoff", -1, kMaxInt, &step->src_off));
  BRAID_RETURN_IF_ERROR(getBuffer(node, "dstbuf", &step->dst_buf));
  BRAID_RETURN_IF_ERROR(getInt(node, "dstoff", -1, kMaxInt, &step->dst_off));
  BRAID_RETURN_IF_ERROR(getInt(node, "cnt", 0, kMaxInt, &step->count));
  int depid = 0, deps = 0, hasdep = 0;
  BRAID_RETURN_IF_ERROR(getInt(node, "depid", -1, kMaxInt, &depid));
  BRAID_RETURN_IF_ERROR(getInt(node, "deps", -1, kMaxInt, &deps));
  BRAID_RETURN_IF_ERROR(getInt(node, "hasdep", 0, 1, &hasdep));
  if (depid >= 0) {
    if (deps < 0)
      return error(node, "deps", fmt::format("depid is {} but deps is {} (a step index is needed)", depid, deps));
    step->deps.push_back(Dependency{depid, deps});
  }
  step->has_dep = hasdep == 1;
  return Status::ok();
}

// ---- writer --------------------------------------------------------------------------------

const char* collName(const Algorithm& alg, MscclFlavour flavour) {
  if (alg.collective == CollectiveKind::kReduceScatter && flavour == MscclFlavour::kMicrosoft) return "reduce_scatter";
  return collectiveName(alg.collective);
}

void appendStep(std::string* out, int s, const Step& step, const Dependency* dep, bool has_dep) {
  fmt::format_to(std::back_inserter(*out),
                 "      <step s=\"{}\" type=\"{}\" srcbuf=\"{}\" srcoff=\"{}\" dstbuf=\"{}\" dstoff=\"{}\" cnt=\"{}\" "
                 "depid=\"{}\" deps=\"{}\" hasdep=\"{}\"/>\n",
                 s, opTypeName(step.type), bufferName(step.src_buf), step.src_off, bufferName(step.dst_buf),
                 step.dst_off, step.count, dep != nullptr ? dep->tb : -1, dep != nullptr ? dep->step : -1,
                 has_dep ? 1 : 0);
}

}  // namespace

Result<Algorithm> readMscclXml(const std::string& text, const std::string& filename) {
  try {
    Reader reader(text, filename);
    return reader.read();
  } catch (const std::exception& e) {
    return internalError(fmt::format("{}: reading MSCCL XML failed: {}", filename, e.what()));
  }
}

Result<Algorithm> loadMscclXml(const std::string& path) {
  BRAID_ASSIGN_OR_RETURN(std::string text, readFile(path, kMaxAlgorithmFileBytes));
  return readMscclXml(text, path);
}

std::string writeMscclXml(const Algorithm& algorithm, MscclFlavour flavour) {
  std::string out;
  const bool exclusive = flavour == MscclFlavour::kMicrosoft;
  uint64_t max_bytes;
  if (algorithm.max_bytes >= static_cast<uint64_t>(kInt64Max) ||
      (exclusive && algorithm.max_bytes >= static_cast<uint64_t>(kInt64Max) - 1)) {
    max_bytes = static_cast<uint64_t>(kInt64Max);  // no upper limit, accepted by both runtimes
  } else {
    max_bytes = exclusive ? algorithm.max_bytes + 1 : algorithm.max_bytes;
  }
  const uint64_t min_bytes = std::min<uint64_t>(algorithm.min_bytes, static_cast<uint64_t>(kInt64Max));
  fmt::format_to(std::back_inserter(out),
                 "<algo name=\"{}\" proto=\"{}\" nchannels=\"{}\" nchunksperloop=\"{}\" ngpus=\"{}\" coll=\"{}\" "
                 "inplace=\"{}\" outofplace=\"{}\" minBytes=\"{}\" maxBytes=\"{}\"",
                 escapeXml(algorithm.name), protocolName(algorithm.protocol), algorithm.num_channels,
                 algorithm.num_chunks, algorithm.num_ranks, collName(algorithm, flavour), algorithm.in_place ? 1 : 0,
                 algorithm.out_of_place ? 1 : 0, min_bytes, max_bytes);
  if (exclusive) fmt::format_to(std::back_inserter(out), " {}=\"1\"", kExclusiveMarker);
  if (!algorithm.redop.empty()) fmt::format_to(std::back_inserter(out), " redop=\"{}\"", escapeXml(algorithm.redop));
  if ((algorithm.collective == CollectiveKind::kBroadcast || algorithm.collective == CollectiveKind::kReduce) &&
      algorithm.root != 0) {
    fmt::format_to(std::back_inserter(out), " root=\"{}\"", algorithm.root);
  }
  out += ">\n";

  for (const RankProgram& program : algorithm.ranks) {
    fmt::format_to(std::back_inserter(out), "  <gpu id=\"{}\" i_chunks=\"{}\" o_chunks=\"{}\" s_chunks=\"{}\">\n",
                   program.rank, program.input_chunks, program.output_chunks, program.scratch_chunks);
    for (const PreCopy& copy : program.precopies) {
      if (copy.count == 1) {
        fmt::format_to(std::back_inserter(out), "    <copy i_off=\"{}\" o_off=\"{}\"/>\n", copy.input_off,
                       copy.output_off);
      } else {
        fmt::format_to(std::back_inserter(out), "    <copy i_off=\"{}\" o_off=\"{}\" cnt=\"{}\"/>\n", copy.input_off,
                       copy.output_off, copy.count);
      }
    }
    // Spilling: a step with k > 1 dependencies becomes k-1 nop steps (deps[1..]) and the step itself
    // (deps[0]), as msccl-tools ir_to_xml does. new_index[tb][old step] is the index of the real step.
    const int num_tbs = static_cast<int>(program.threadblocks.size());
    std::vector<std::vector<int>> new_index(num_tbs);
    for (int t = 0; t < num_tbs; ++t) {
      int next = 0;
      for (const Step& step : program.threadblocks[t].steps) {
        next += step.deps.size() > 1 ? static_cast<int>(step.deps.size()) - 1 : 0;
        new_index[t].push_back(next++);
      }
    }
    auto renumber = [&](const Dependency& d) {
      if (d.tb >= 0 && d.tb < num_tbs && d.step >= 0 && d.step < static_cast<int>(new_index[d.tb].size())) {
        return Dependency{d.tb, new_index[d.tb][d.step]};
      }
      return d;  // out of range: written as is, verify() reports it
    };
    std::set<std::pair<int, int>> targets;  // (tb, new step) some step waits on
    for (const Threadblock& tb : program.threadblocks) {
      for (const Step& step : tb.steps) {
        for (const Dependency& d : step.deps) {
          Dependency n = renumber(d);
          targets.insert({n.tb, n.step});
        }
      }
    }
    for (int t = 0; t < num_tbs; ++t) {
      const Threadblock& tb = program.threadblocks[t];
      fmt::format_to(std::back_inserter(out), "    <tb id=\"{}\" send=\"{}\" recv=\"{}\" chan=\"{}\">\n", t,
                     tb.send_peer, tb.recv_peer, tb.channel);
      int s = 0;
      for (const Step& step : tb.steps) {
        for (size_t k = 1; k < step.deps.size(); ++k) {
          Step nop;
          nop.type = OpType::kNop;
          nop.src_buf = BufferKind::kInput;  // msccl-tools' nop spelling: srcbuf="i" dstbuf="o" offsets -1 cnt 0
          nop.dst_buf = BufferKind::kOutput;
          nop.src_off = -1;
          nop.dst_off = -1;
          nop.count = 0;
          Dependency dep = renumber(step.deps[k]);
          appendStep(&out, s, nop, &dep, targets.count({t, s}) > 0);
          ++s;
        }
        std::optional<Dependency> dep;
        if (!step.deps.empty()) dep = renumber(step.deps[0]);
        appendStep(&out, s, step, dep ? &*dep : nullptr, targets.count({t, s}) > 0);
        ++s;
      }
      out += "    </tb>\n";
    }
    out += "  </gpu>\n";
  }
  out += "</algo>\n";
  return out;
}

}  // namespace braid
