#include "shim/decision.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "comm/selection.h"
#include "common/text.h"

namespace braid::nccl_shim {

const char* entryName(ShimCall call) {
  switch (call) {
    case ShimCall::kAllReduce: return "ncclAllReduce";
    case ShimCall::kAllGather: return "ncclAllGather";
    case ShimCall::kReduceScatter: return "ncclReduceScatter";
    case ShimCall::kBroadcast: return "ncclBroadcast";
    case ShimCall::kBcast: return "ncclBcast";
    case ShimCall::kReduce: return "ncclReduce";
    case ShimCall::kAllToAll: return "ncclAlltoAll";
    case ShimCall::kSend: return "ncclSend";
    case ShimCall::kRecv: return "ncclRecv";
  }
  return "nccl?";
}

std::optional<DataType> braidDataType(int nccl_type) {
  if (nccl_type < 0 || nccl_type >= kNumDataTypes) return std::nullopt;
  return static_cast<DataType>(nccl_type);  // ncclInt8 0 .. ncclBfloat16 9: Braid's order
}

std::string ncclTypeName(int nccl_type) {
  if (std::optional<DataType> type = braidDataType(nccl_type)) return dataTypeName(*type);
  if (nccl_type == 10) return "float8e4m3";
  if (nccl_type == 11) return "float8e5m2";
  return fmt::format("datatype {}", nccl_type);
}

std::string ncclOpName(int nccl_op) {
  if (nccl_op >= 0 && nccl_op < kNcclNumOps) return reduceOpName(static_cast<ReduceOp>(nccl_op));
  return fmt::format("op {}", nccl_op);
}

std::string formatBytes(uint64_t bytes) {
  if (bytes == 0) return "0 B";
  static const char* const kUnits[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    const uint64_t unit = uint64_t{1} << (10 * (4 - i));
    if (bytes % unit == 0) return fmt::format("{} {}", bytes / unit, kUnits[i]);
  }
  return fmt::format("{} B", bytes);
}

std::vector<std::string> splitFileList(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(",:", start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

std::optional<CollectiveKind> collectiveOf(ShimCall call) {
  switch (call) {
    case ShimCall::kAllReduce: return CollectiveKind::kAllReduce;
    case ShimCall::kAllGather: return CollectiveKind::kAllGather;
    case ShimCall::kReduceScatter: return CollectiveKind::kReduceScatter;
    case ShimCall::kBroadcast:
    case ShimCall::kBcast: return CollectiveKind::kBroadcast;
    case ShimCall::kReduce: return CollectiveKind::kReduce;
    case ShimCall::kAllToAll: return CollectiveKind::kAllToAll;
    case ShimCall::kSend:
    case ShimCall::kRecv: return std::nullopt;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------------
// ShimAlgorithms

ShimAlgorithms::ShimAlgorithms() = default;
ShimAlgorithms::~ShimAlgorithms() = default;

namespace {

// The first line of a loader's message, at most 300 characters: one concise warning line per file.
std::string firstLine(const std::string& text) {
  constexpr size_t kMax = 300;
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > kMax) line = line.substr(0, kMax - 3) + "...";
  return line;
}

// `file` loaded and verified; otherwise the first line of why not, without the file name the loader's message
// starts with ("/d/a.xml:12: ..." -> "line 12: ...").
Result<Algorithm> loadVerified(const std::string& file) {
  Result<Algorithm> algorithm = loadAlgorithm(file);
  if (!algorithm.isOk()) {
    std::string why = algorithm.status().message();
    if (why.rfind(file + ":", 0) == 0) {
      why = why.substr(file.size() + 1);
      if (!why.empty() && why[0] >= '0' && why[0] <= '9') {
        why = "line " + why;
      } else if (!why.empty() && why[0] == ' ') {
        why = why.substr(1);
      }
    }
    return Status(algorithm.status().code(), firstLine(why));
  }
  const VerifyReport report = verify(*algorithm);
  if (!report.ok) {
    return invalidArgument(
        firstLine(fmt::format("algorithm '{}' does not verify: {}", algorithm->name, report.toString())));
  }
  return algorithm;
}

}  // namespace

std::unique_ptr<ShimAlgorithms> ShimAlgorithms::load(const std::string& algo_dir, const std::string& msccl_files) {
  auto out = std::make_unique<ShimAlgorithms>();
  size_t skipped = 0;
  bool dir_listed = false;
  if (!algo_dir.empty()) {
    Result<std::vector<std::string>> files = listAlgorithmDir(algo_dir);
    if (!files.isOk()) {
      const std::string why = files.status().code() == StatusCode::kNotFound ? "does not exist"
                              : files.status().code() == StatusCode::kInvalidArgument
                                  ? "is not a directory"
                                  : "cannot be read (" + files.status().message() + ")";
      out->warnings_.push_back(fmt::format("BRAID_ALGO_DIR={} {}", algo_dir, why));
    } else {
      dir_listed = true;
      for (const std::string& file : files.value()) {
        Result<Algorithm> algorithm = loadVerified(file);
        if (!algorithm.isOk()) {
          ++skipped;
          out->warnings_.push_back(fmt::format("BRAID_ALGO_DIR: {} skipped: {}", file, algorithm.status().message()));
          continue;
        }
        out->loaded_.push_back(Loaded{LoadedAlgorithm{std::move(algorithm).value(), file}, "BRAID_ALGO_DIR"});
      }
    }
  }
  const std::vector<std::string> msccl = splitFileList(msccl_files);
  for (const std::string& file : msccl) {
    Result<Algorithm> algorithm = loadVerified(file);
    if (!algorithm.isOk()) {
      ++skipped;
      out->warnings_.push_back(fmt::format("MSCCL_XML_FILES: {} skipped: {}", file, algorithm.status().message()));
      continue;
    }
    out->loaded_.push_back(Loaded{LoadedAlgorithm{std::move(algorithm).value(), file}, "MSCCL_XML_FILES"});
  }
  if (out->loaded_.empty() && !dir_listed && msccl.empty()) {
    if (!out->warnings_.empty()) out->warnings_.back() += "; every call goes to NCCL";
  } else if (out->loaded_.empty()) {
    std::string sources = dir_listed ? "BRAID_ALGO_DIR=" + algo_dir : "";
    if (!msccl.empty()) sources += (sources.empty() ? "" : " and ") + ("MSCCL_XML_FILES=" + msccl_files);
    out->warnings_.push_back(
        fmt::format("{} {} no algorithm the shim can run ({} file{} skipped); every call goes "
                    "to NCCL",
                    sources, dir_listed && !msccl.empty() ? "hold" : "holds", skipped, skipped == 1 ? "" : "s"));
  }
  return out;
}

namespace {

constexpr const char* kParetoFormat = "braid-nccl-pareto-set/1";

// "[0 B, 131071 B]", "[32 MiB, unlimited]": a window for the log.
std::string windowText(uint64_t min_bytes, uint64_t max_bytes) {
  return fmt::format("[{}, {}]", formatBytes(min_bytes),
                     max_bytes == kUnlimitedBytes ? std::string("unlimited") : formatBytes(max_bytes));
}

}  // namespace

std::unique_ptr<ShimAlgorithms> ShimAlgorithms::fromParetoSet(const std::string& text) {
  auto out = std::make_unique<ShimAlgorithms>();
  const nlohmann::json set = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto malformed = [&](const std::string& what) {
    out->warnings_.push_back(fmt::format("BRAID_TOPOLOGY: the Pareto set is not {} JSON: {}", kParetoFormat, what));
  };
  if (set.is_discarded() || !set.is_object()) {
    malformed("not a JSON object");
    return out;
  }
  const auto format = set.find("format");
  if (format == set.end() || !format->is_string() || format->get<std::string>() != kParetoFormat) {
    malformed("\"format\" is missing or another");
    return out;
  }
  const auto collectives = set.find("collectives");
  if (collectives == set.end() || !collectives->is_array()) {
    malformed("\"collectives\" is not an array");
    return out;
  }
  for (const nlohmann::json& c : *collectives) {
    const auto name = c.find("collective");
    const auto windows = c.find("windows");
    if (!c.is_object() || name == c.end() || !name->is_string() || windows == c.end() || !windows->is_array()) {
      malformed("a collective without \"collective\" or \"windows\"");
      continue;
    }
    const std::string collective = name->get<std::string>();
    for (const nlohmann::json& w : *windows) {
      const auto min_bytes = w.find("min_bytes");
      const auto max_bytes = w.find("max_bytes");
      const auto nccl = w.find("nccl");
      if (!w.is_object() || min_bytes == w.end() || !min_bytes->is_number_unsigned() || max_bytes == w.end() ||
          !max_bytes->is_number_unsigned() || nccl == w.end() || !nccl->is_boolean()) {
        malformed(
            fmt::format("a {} window without unsigned \"min_bytes\" / \"max_bytes\" or boolean \"nccl\"", collective));
        continue;
      }
      const uint64_t lo = min_bytes->get<uint64_t>();
      const uint64_t hi = max_bytes->get<uint64_t>();
      const std::string window = windowText(lo, hi);
      const auto source_field = w.find("source");
      const std::string source =
          source_field != w.end() && source_field->is_string() ? source_field->get<std::string>() : "-";
      if (nccl->get<bool>()) {
        out->notes_.push_back(
            fmt::format("BRAID_TOPOLOGY: {} {} left to NCCL (its own choice is predicted faster)", collective, window));
        continue;
      }
      const auto xml = w.find("msccl_xml");
      if (xml == w.end() || !xml->is_string()) {
        malformed(fmt::format("the {} window {} has no \"msccl_xml\"", collective, window));
        continue;
      }
      Result<Algorithm> algorithm = readMscclXml(xml->get<std::string>(), "msccl_xml");
      if (algorithm.isOk()) {
        const VerifyReport report = verify(*algorithm);
        if (!report.ok) {
          algorithm =
              invalidArgument(fmt::format("algorithm '{}' does not verify: {}", algorithm->name, report.toString()));
        } else if (collectiveName(algorithm->collective) != collective || algorithm->min_bytes != lo ||
                   algorithm->max_bytes != hi) {
          algorithm = invalidArgument(fmt::format("algorithm '{}' is {} for {}, not its window's", algorithm->name,
                                                  collectiveName(algorithm->collective),
                                                  windowText(algorithm->min_bytes, algorithm->max_bytes)));
        }
      }
      if (!algorithm.isOk()) {
        out->warnings_.push_back(fmt::format("BRAID_TOPOLOGY: {} {} ({}) skipped: {}", collective, window, source,
                                             firstLine(algorithm.status().message())));
        continue;
      }
      out->loaded_.push_back(Loaded{LoadedAlgorithm{std::move(algorithm).value(), source}, "BRAID_TOPOLOGY"});
    }
  }
  const auto skipped = set.find("skipped");
  if (skipped != set.end() && skipped->is_array()) {
    for (const nlohmann::json& why : *skipped) {
      if (why.is_string()) out->notes_.push_back("BRAID_TOPOLOGY: no Pareto set for " + why.get<std::string>());
    }
  }
  return out;
}

bool ShimAlgorithms::servesRanks(int nranks) const {
  return std::any_of(loaded_.begin(), loaded_.end(),
                     [&](const Loaded& l) { return l.algorithm.algorithm.num_ranks == nranks; });
}

std::string ShimAlgorithms::summary() const {
  std::string text = fmt::format("{} algorithm{}", loaded_.size(), loaded_.size() == 1 ? "" : "s");
  for (size_t i = 0; i < loaded_.size(); ++i) {
    const Algorithm& a = loaded_[i].algorithm.algorithm;
    text += fmt::format("{}{} {} {} ranks {} ({})", i == 0 ? ": " : "; ", loaded_[i].origin,
                        collectiveName(a.collective), a.num_ranks, a.name, loaded_[i].algorithm.file);
  }
  return text;
}

comm::AlgorithmCatalog& ShimAlgorithms::catalog(int nranks) {
  auto it = catalogs_.find(nranks);
  if (it != catalogs_.end()) return *it->second;
  auto catalog = std::make_unique<comm::AlgorithmCatalog>(nranks, nullptr);
  for (const Loaded& l : loaded_) catalog->addDirectory(l.algorithm, l.origin);
  return *catalogs_.emplace(nranks, std::move(catalog)).first->second;
}

Result<const ParetoCandidate*> ShimAlgorithms::match(CollectiveKind collective, int nranks, uint64_t bytes,
                                                     bool in_place, int root) {
  std::lock_guard<std::mutex> lock(mu_);
  return catalog(nranks).choose(collective, bytes, in_place, root, /*allow_fallback=*/false);
}

Result<const Plan*> ShimAlgorithms::plan(const ParetoCandidate& candidate, uint64_t bytes, bool in_place,
                                         uint64_t element_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_tuple(&candidate, bytes, in_place, element_bytes);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  const LowerOptions options = callLowerOptions(bytes, in_place, candidate.instances, element_bytes);
  BRAID_ASSIGN_OR_RETURN(Plan lowered, lowerAlgorithm(candidate.algorithm, options));
  if (plans_.size() >= 256) {
    // Executors may still hold a handle for a plan handed out: keep the objects, forget the keys.
    for (auto& [k, p] : plans_) retired_.push_back(std::move(p));
    plans_.clear();
  }
  auto stored = std::make_unique<Plan>(std::move(lowered));
  const Plan* out = stored.get();
  plans_.emplace(key, std::move(stored));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// decide

namespace {

Decision toNccl(Decision d, std::string reason) {
  d.candidate = nullptr;
  d.plan = nullptr;
  d.reason = std::move(reason);
  return d;
}

bool overlaps(uintptr_t a, uint64_t a_bytes, uintptr_t b, uint64_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

Decision decide(ShimAlgorithms* algorithms, const CallArgs& args, const CommView& comm, int group_depth) {
  Decision d;
  const std::optional<CollectiveKind> collective = collectiveOf(args.call);
  if (!collective) return toNccl(d, "point-to-point: NCCL runs it");
  if (group_depth > 0) return toNccl(d, "inside ncclGroupStart/ncclGroupEnd");
  if (!comm.known) return toNccl(d, "communicator not created through the shim's init calls");
  if (!comm.forward_only.empty()) return toNccl(d, comm.forward_only);
  const bool have_files = algorithms != nullptr && algorithms->size() > 0;
  const bool have_pareto = comm.pareto != nullptr && comm.pareto->size() > 0;
  if (!have_files && !have_pareto) {
    return toNccl(d, "no Braid algorithms loaded (BRAID_ALGO_DIR, MSCCL_XML_FILES, BRAID_TOPOLOGY)");
  }
  const std::optional<DataType> type = braidDataType(args.nccl_type);
  if (!type) return toNccl(d, fmt::format("Braid has no {}", ncclTypeName(args.nccl_type)));
  const bool reducing = *collective == CollectiveKind::kAllReduce || *collective == CollectiveKind::kReduceScatter ||
                        *collective == CollectiveKind::kReduce;
  if (reducing && (args.nccl_op < 0 || args.nccl_op >= kNcclNumOps)) {
    return toNccl(
        d, fmt::format("{} is not one of NCCL's built-in ops (ncclRedOpCreatePreMulSum)", ncclOpName(args.nccl_op)));
  }
  if (args.count == 0) return toNccl(d, "count 0");
  const int n = comm.nranks;
  if (n < 1 || comm.rank < 0 || comm.rank >= n) return toNccl(d, "communicator rank out of range");
  const bool rooted = *collective == CollectiveKind::kBroadcast || *collective == CollectiveKind::kReduce;
  if (rooted && (args.root < 0 || args.root >= n)) return toNccl(d, fmt::format("root {} out of range", args.root));
  // NCCL ignores a non-root broadcast rank's send buffer and a non-root reduce rank's receive buffer.
  const bool root_only_send = *collective == CollectiveKind::kBroadcast && comm.rank != args.root;
  const bool root_only_recv = *collective == CollectiveKind::kReduce && comm.rank != args.root;
  if ((args.send == nullptr && !root_only_send) || (args.recv == nullptr && !root_only_recv)) {
    return toNccl(d, "null buffer");
  }

  // Bytes of this rank's input and output, and the nccl-tests size.
  const uint64_t element = dataTypeSize(*type);
  const uint64_t n64 = static_cast<uint64_t>(n);
  if (args.count > std::numeric_limits<uint64_t>::max() / element / n64) return toNccl(d, "size overflows 64 bits");
  const uint64_t piece = args.count * element;
  uint64_t in_bytes = piece;
  uint64_t out_bytes = piece;
  const uintptr_t send = reinterpret_cast<uintptr_t>(args.send);
  const uintptr_t recv = reinterpret_cast<uintptr_t>(args.recv);
  switch (*collective) {
    case CollectiveKind::kAllGather:
      out_bytes = piece * n64;
      d.in_place = send == recv + piece * static_cast<uint64_t>(comm.rank);
      break;
    case CollectiveKind::kReduceScatter:
      in_bytes = piece * n64;
      d.in_place = recv == send + piece * static_cast<uint64_t>(comm.rank);
      break;
    case CollectiveKind::kAllToAll:
      in_bytes = out_bytes = piece * n64;
      d.in_place = send == recv;
      break;
    default: d.in_place = send == recv; break;
  }
  d.bytes = std::max(in_bytes, out_bytes);
  if (!d.in_place && send != 0 && recv != 0 && overlaps(send, in_bytes, recv, out_bytes)) {
    return toNccl(d, "buffers overlap outside NCCL's in-place layout");
  }
  // BRAID_ALGO_DIR / MSCCL_XML_FILES first, then the communicator's Pareto set.
  ShimAlgorithms* owner = have_files ? algorithms : comm.pareto;
  const int root = rooted ? args.root : 0;
  Result<const ParetoCandidate*> match = owner->match(*collective, n, d.bytes, d.in_place, root);
  if (!match.isOk() && have_files && have_pareto) {
    owner = comm.pareto;
    match = owner->match(*collective, n, d.bytes, d.in_place, root);
  }
  if (!match.isOk()) {
    return toNccl(d, fmt::format("no Braid algorithm for {} ranks at {} {}", n, formatBytes(d.bytes),
                                 d.in_place ? "in-place" : "out-of-place"));
  }
  Result<const Plan*> plan = owner->plan(**match, d.bytes, d.in_place, element);
  const bool elementwise = *collective == CollectiveKind::kAllReduce || *collective == CollectiveKind::kBroadcast ||
                           *collective == CollectiveKind::kReduce;
  if (!plan.isOk() && plan.status().code() == StatusCode::kUnsupported && elementwise) {
    // Chunks that do not split the count: the largest prefix they split runs in Braid, the rest in NCCL.
    const uint64_t granule = static_cast<uint64_t>(std::max(1, (*match)->algorithm.num_chunks)) *
                             static_cast<uint64_t>(std::max(1, (*match)->instances));
    const uint64_t head = args.count - args.count % granule;
    if (head > 0) {
      Result<const Plan*> head_plan = owner->plan(**match, head * element, d.in_place, element);
      if (head_plan.isOk()) {
        d.candidate = *match;
        d.plan = *head_plan;
        d.tail_count = args.count - head;
        return d;
      }
    }
  }
  if (!plan.isOk()) {
    return toNccl(d, fmt::format("{} cannot run {}: {}", (*match)->algorithm.name, formatBytes(d.bytes),
                                 plan.status().message()));
  }
  d.candidate = *match;
  d.plan = *plan;
  return d;
}

std::string logText(const CallArgs& args, const CommView& comm, const Decision& decision) {
  std::string text =
      fmt::format("shim: {} count {} {}", entryName(args.call), args.count, ncclTypeName(args.nccl_type));
  if (args.nccl_op >= 0 || args.call == ShimCall::kAllReduce || args.call == ShimCall::kReduceScatter ||
      args.call == ShimCall::kReduce) {
    text += " " + ncclOpName(args.nccl_op);
  }
  if (args.call == ShimCall::kSend || args.call == ShimCall::kRecv) {
    text += fmt::format(" peer {}", args.root);
  } else if (args.call == ShimCall::kBroadcast || args.call == ShimCall::kBcast || args.call == ShimCall::kReduce) {
    text += fmt::format(" root {}", args.root);
  }
  if (decision.bytes > 0) text += decision.in_place ? " in-place" : " out-of-place";
  if (comm.known) text += fmt::format(" {} ranks", comm.nranks);
  if (decision.bytes > 0) text += " " + formatBytes(decision.bytes);
  if (!decision.braid()) return text + fmt::format(" -> NCCL ({})", decision.reason);
  const ParetoCandidate& c = *decision.candidate;
  text += fmt::format(" -> braid {} ({}, window [{}, {}])", c.algorithm.name, c.source, formatBytes(c.window_min),
                      c.window_max == kUnlimitedBytes ? std::string("unlimited") : formatBytes(c.window_max));
  if (decision.tail_count > 0) {
    text += fmt::format(", the first {} elements; the last {} -> NCCL (the algorithm's chunks do not split {})",
                        args.count - decision.tail_count, decision.tail_count, args.count);
  }
  return text;
}

const char* acrossHostsName(AcrossHosts mode) {
  return mode == AcrossHosts::kHierarchical ? "hierarchical" : "host-driven";
}

Result<AcrossHosts> parseAcrossHosts(const std::string& text) {
  const std::string lower = lowerCase(text);
  if (lower == "host-driven") return AcrossHosts::kHostDriven;
  if (lower == "hierarchical") return AcrossHosts::kHierarchical;
  return invalidArgument(fmt::format("BRAID_NCCL_ACROSS_HOSTS={}: not host-driven or hierarchical", text));
}

Result<TransportKind> proxyTransportKind(const std::string& setting) {
  const std::optional<TransportKind> kind = parseTransportKind(setting);
  if (!kind) {
    return invalidArgument(
        fmt::format("BRAID_TRANSPORT={}: unknown transport (auto, threads, shm, tcp, ucx)", setting));
  }
  switch (*kind) {
    case TransportKind::kAuto:
    case TransportKind::kTcp: return TransportKind::kTcp;
    case TransportKind::kUcx: return TransportKind::kUcx;
    case TransportKind::kThreads:
    case TransportKind::kShm: break;
  }
  return invalidArgument(fmt::format(
      "BRAID_TRANSPORT={}: does not cross hosts; the hierarchical path's proxies need tcp, ucx or auto", setting));
}

ExecutorChoice chooseExecutor(const std::vector<std::string>& hosts, AcrossHosts mode, TransportKind proxy) {
  ExecutorChoice choice;
  std::vector<std::string> distinct = hosts;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  choice.hosts = std::max<int>(1, static_cast<int>(distinct.size()));
  choice.proxy = proxy;
  if (choice.hosts > 1) {
    choice.kind = mode == AcrossHosts::kHierarchical ? ExecutorKind::kHierarchical : ExecutorKind::kHostDriven;
  }
  return choice;
}

std::string executorText(const ExecutorChoice& choice) {
  switch (choice.kind) {
    case ExecutorKind::kDeviceResident: return "device-resident executor";
    case ExecutorKind::kHierarchical:
      return fmt::format("device-resident executor, hierarchical: {} hosts, proxies over {}", choice.hosts,
                         transportKindName(choice.proxy));
    case ExecutorKind::kHostDriven: break;
  }
  return "host-driven CUDA transport";
}

}  // namespace braid::nccl_shim
