// libbraid_nccl_pareto.so (README.md): braidNcclParetoSet_v1 (shim/pareto_abi.h), the Pareto set of a topology for
// the NCCL-API shim, synthesized with braid_pareto (include/braid/pareto.h) and returned as JSON with one MSCCL XML
// algorithm per window Braid serves. No exception leaves the function and nothing aborts.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"
#include "braid/pareto.h"
#include "braid/topology.h"
#include "common/text.h"
#include "shim/pareto_abi.h"

namespace braid::nccl_shim {
namespace {

constexpr const char* kFormat = "braid-nccl-pareto-set/1";
constexpr double kSynthesesPerCollective = 4;

// The collectives of a request, in order, each once. Errors name the text that is not one.
Result<std::vector<CollectiveKind>> parseCollectives(const char* text) {
  if (text == nullptr) return invalidArgument("collectives: none given");
  std::vector<CollectiveKind> out;
  const std::string list(text);
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    const size_t first = item.find_first_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, item.find_last_not_of(" \t") - first + 1);
    start = end + 1;
    if (item.empty()) continue;
    const std::optional<CollectiveKind> kind = parseCollective(item);
    if (!kind || (*kind != CollectiveKind::kAllReduce && *kind != CollectiveKind::kAllGather &&
                  *kind != CollectiveKind::kReduceScatter && *kind != CollectiveKind::kAllToAll)) {
      return invalidArgument(fmt::format(
          "collectives: '{}' is not one of allreduce, allgather, reducescatter, alltoall (a Pareto set's collectives)",
          item));
    }
    bool seen = false;
    for (CollectiveKind k : out) seen = seen || k == *kind;
    if (!seen) out.push_back(*kind);
  }
  if (out.empty()) return invalidArgument(fmt::format("collectives: '{}' names none", list));
  return out;
}

// One collective's windows as the JSON the shim reads (pareto_abi.h).
nlohmann::ordered_json windowsJson(const CollectiveParetoSet& set, std::vector<std::string>* notes) {
  nlohmann::ordered_json windows = nlohmann::ordered_json::array();
  for (const ParetoWindow& w : set.windows) {
    nlohmann::ordered_json j;
    j["min_bytes"] = w.min_bytes;
    j["max_bytes"] = w.max_bytes;
    bool nccl = w.nccl;
    std::string source = w.candidate.source;
    if (!nccl && w.candidate.algorithm.num_ranks == 0) {
      nccl = true;  // no Braid candidate runs at these sizes
      source = "-";
    }
    std::string xml;
    if (!nccl) {
      // MSCCL XML has no instance count: a window served with several instances is written out with them, as
      // `braid synth --sizes ... -o DIR` writes it.
      Result<Algorithm> written = replicateInstances(w.candidate.algorithm, w.candidate.instances);
      if (written.isOk()) {
        xml = writeMscclXml(*written);
      } else {
        notes->push_back(fmt::format("window [{}, {}]: {} left to NCCL: {}", w.min_bytes, w.max_bytes, source,
                                     written.status().message()));
        nccl = true;
      }
    }
    j["nccl"] = nccl;
    j["source"] = source;
    if (!nccl) j["msccl_xml"] = std::move(xml);
    windows.push_back(std::move(j));
  }
  return windows;
}

Result<std::string> paretoSetJson(const braidNcclParetoRequest_v1& request) {
  if (request.topology == nullptr || request.topology[0] == '\0') return invalidArgument("topology: none given");
  if (request.nranks <= 0) return invalidArgument(fmt::format("nranks = {}: not a rank count", request.nranks));
  if (!std::isfinite(request.time_limit_s) || !(request.time_limit_s > 0)) {
    return invalidArgument(fmt::format("time limit {} s: not a positive number of seconds", request.time_limit_s));
  }
  BRAID_ASSIGN_OR_RETURN(const std::vector<CollectiveKind> kinds, parseCollectives(request.collectives));
  const std::string topology_text(request.topology);
  BRAID_ASSIGN_OR_RETURN(const Topology topology, loadTopologyOrShipped(topology_text));
  if (topology.numGpus() != request.nranks) {
    return invalidArgument(fmt::format("topology {} has {} GPUs, not {} (the communicator's rank count)", topology_text,
                                       topology.numGpus(), request.nranks));
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(request.time_limit_s));
  nlohmann::ordered_json out;
  out["format"] = kFormat;
  out["topology"] = topology_text;
  out["ranks"] = request.nranks;
  out["collectives"] = nlohmann::ordered_json::array();
  std::vector<std::string> skipped;
  bool only_budget = true;  // every collective skipped was skipped for the budget
  for (size_t i = 0; i < kinds.size(); ++i) {
    const char* name = collectiveName(kinds[i]);
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) {
      skipped.push_back(
          fmt::format("{}: the budget of {:g} s was spent before it started", name, request.time_limit_s));
      continue;
    }
    ParetoOptions options;
    // An equal share of what is left per collective, a quarter of it per synthesis (a collective runs at most four:
    // the TACCL pipeline, tree packing and SCCL's two objectives), the rest for simulating the candidates.
    options.time_limit_s = left / static_cast<double>(kinds.size() - i) / kSynthesesPerCollective;
    options.deadline = deadline;
    Result<CollectiveParetoSet> set = synthesizeCollectiveParetoSet(topology, topology.name, kinds[i], options);
    if (!set.isOk()) {
      only_budget = only_budget && set.status().code() == StatusCode::kTimeout;
      skipped.push_back(fmt::format("{}: {}", name, set.status().message()));
      continue;
    }
    std::vector<std::string> notes = set->notes;
    nlohmann::ordered_json collective;
    collective["collective"] = name;
    collective["windows"] = windowsJson(*set, &notes);
    collective["notes"] = notes;
    out["collectives"].push_back(std::move(collective));
  }
  out["skipped"] = skipped;
  if (out["collectives"].empty()) {
    std::string why;
    for (const std::string& s : skipped) why += (why.empty() ? "" : "; ") + s;
    return Status(only_budget ? StatusCode::kTimeout : StatusCode::kUnsupported,
                  fmt::format("no Pareto set for {} on {}: {}", request.nranks, topology_text, why));
  }
  return dumpJson(out);
}

// A malloc'd copy of `head` followed by `tail` (null when memory runs out). Allocates with malloc only, so that it
// can run inside a catch handler.
char* copyOut(const char* head, const char* tail = "") noexcept {
  const size_t a = std::strlen(head), b = std::strlen(tail);
  char* out = static_cast<char*>(std::malloc(a + b + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, head, a);
  std::memcpy(out + a, tail, b + 1);
  return out;
}

int failWith(StatusCode code, const char* head, const char* tail, char** error) noexcept {
  if (error != nullptr) *error = copyOut(head, tail);
  return static_cast<int>(code);
}

}  // namespace
}  // namespace braid::nccl_shim

extern "C" __attribute__((visibility("default"))) int braidNcclParetoSet_v1(const braidNcclParetoRequest_v1* request,
                                                                            char** set_json, char** error) {
  using braid::StatusCode;
  using braid::nccl_shim::failWith;
  if (set_json != nullptr) *set_json = nullptr;
  if (error != nullptr) *error = nullptr;
  if (request == nullptr) return failWith(StatusCode::kInvalidArgument, "no request", "", error);
  try {
    braid::Result<std::string> set = braid::nccl_shim::paretoSetJson(*request);
    if (!set.isOk()) return failWith(set.status().code(), set.status().message().c_str(), "", error);
    if (set_json != nullptr) {
      *set_json = braid::nccl_shim::copyOut(set->c_str());
      if (*set_json == nullptr)
        return failWith(StatusCode::kInternalError, "out of memory for the set's text", "", error);
    }
    return 0;
  } catch (const std::exception& e) {
    return failWith(StatusCode::kInternalError, "internal error: ", e.what(), error);
  } catch (...) {
    return failWith(StatusCode::kInternalError, "internal error", "", error);
  }
}

static_assert(std::is_same_v<decltype(&braidNcclParetoSet_v1), braidNcclParetoSet_v1_fn>,
              "braidNcclParetoSet_v1 must have the type shim/pareto_abi.h declares");
