// libbraid_nccl.so: NCCL's entry points for LD_PRELOAD (shim/README.md, docs/nccl.md "NCCL-API shim"). Each
// defined entry point either runs a Braid algorithm (a data call decide() gives to Braid, on a communicator whose
// Braid state is set up) or forwards to the real NCCL: dlsym(RTLD_NEXT, name), else dlopen("libnccl.so.2").
// With BRAID_TOPOLOGY, rank 0 of a communicator with the topology's GPU count gets the topology's Pareto set from
// the companion libbraid_nccl_pareto.so (dlopened then, shim/pareto_abi.h) and sends it to the other ranks over
// Braid's bootstrap.
// No exception leaves an entry point and nothing aborts: Braid's failures become a warning and the call goes to
// NCCL; a missing NCCL is ncclSystemError with a message.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "braid/bootstrap.h"
#include "braid/cuda.h"
#include "braid/topology.h"
#include "braid/transports.h"
#include "common/env.h"
#include "common/log.h"
#include "common/plugin_log.h"
#include "shim/decision.h"
#include "shim/pareto_abi.h"

#define BRAID_SHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace braid::nccl_shim {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// The real NCCL

std::mutex g_resolve_mu;
void* g_libnccl = nullptr;  // dlopen fallback handle, kept for the process's life

void warn(const std::string& text) noexcept {
  try {
    nccl_plugin::log(nccl_abi::kLogWarn, nccl_abi::kSubsysInit, "shim: " + text);
  } catch (...) {
  }
}

// The address of NCCL's `name`: the next definition after this library, else libnccl.so.2's. Null (with `error`
// set) when neither has it.
void* resolveReal(const char* name, std::string* error) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn != nullptr) return fn;
  std::lock_guard<std::mutex> lock(g_resolve_mu);
  if (g_libnccl == nullptr) g_libnccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (g_libnccl == nullptr) {
    const char* why = dlerror();
    *error = std::string("dlsym(RTLD_NEXT) found nothing and dlopen(libnccl.so.2) failed: ") +
             (why != nullptr ? why : "unknown error");
    return nullptr;
  }
  fn = dlsym(g_libnccl, name);
  if (fn == nullptr) *error = "neither dlsym(RTLD_NEXT) nor libnccl.so.2 defines it";
  return fn;
}

// The real function `name`, typed Fn; null when NCCL is missing. One cache per Tag (one per call site of
// BRAID_REAL), so symbols that share a signature never share a cache.
template <class Tag, class Fn>
Fn realFor(const char* name) {
  static std::atomic<Fn> cached{nullptr};
  Fn fn = cached.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  std::string error;
  fn = reinterpret_cast<Fn>(resolveReal(name, &error));
  if (fn == nullptr) {
    warn(std::string(name) + ": the real NCCL was not found: " + error);
    return nullptr;
  }
  cached.store(fn, std::memory_order_release);
  return fn;
}
// BRAID_REAL(ncclAllReduce): the real function, typed from nccl.h's declaration.
#define BRAID_REAL(name)                           \
  ([] {                                            \
    struct Tag {};                                 \
    return realFor<Tag, decltype(&::name)>(#name); \
  }())

// ---------------------------------------------------------------------------------------------------------------
// Per-thread and per-process state

thread_local int t_group_depth = 0;   // ncclGroupStart nesting of this thread
thread_local int t_inside_braid = 0;  // > 0 while Braid's own code or the real NCCL runs: entry points pass through

// A communicator this thread created inside its current group: NCCL initialises it at the outermost ncclGroupEnd
// (until then it answers no query), so it is recorded there.
struct GroupCreated {
  ncclComm_t comm = nullptr;
  bool blocking = true;
  const char* entry = "";
  // Which communicator the rank belongs to: the ncclUniqueId's bytes, or the parent and color of a split. Two
  // entries with the same identity are two ranks of one communicator driven by this thread.
  std::string identity;
};
thread_local std::vector<GroupCreated> t_group_created;

struct InsideBraid {
  InsideBraid() { ++t_inside_braid; }
  ~InsideBraid() { --t_inside_braid; }
};

// Calls the real function (ncclSystemError when NCCL is missing) with t_inside_braid raised: NCCL's
// own calls of exported entry points (its ncclBcast calls ncclBroadcast) pass through the shim untouched.
template <class Fn, class... Args>
ncclResult_t callReal(Fn fn, Args... args) {
  if (fn == nullptr) return ncclSystemError;
  InsideBraid passing_through;
  return fn(args...);
}
#define BRAID_FORWARD(name, ...) return callReal(BRAID_REAL(name), __VA_ARGS__)

// Braid's state for one communicator.
struct CommState {
  int rank = -1;
  int nranks = 0;
  int device = -1;
  bool internal = false;  // created by Braid itself (the CUDA transport's pair communicators)
  bool blocking = true;
  std::string forward_only;  // non-empty: why Braid does not run on it
  // Braid failed on this rank where its peers could not be moved to NCCL with it (after its kernel was enqueued, or
  // before a launch its peers made): as after an NCCL asynchronous error, every later call returns this error and
  // ncclCommGetAsyncError reports it, until the application aborts the communicator.
  // Guarded by failed_mu, not mu: ncclCommGetAsyncError (an application's watchdog thread) reads it while a call
  // may hold mu in a collective step that waits for a dead peer.
  Status failed;
  std::mutex failed_mu;
  std::atomic<bool> warned_capture{false};  // the warning that captured calls go to NCCL was given
  bool capturable = false;  // the device-resident executor of one host: its launches may be captured into a graph
  std::mutex mu;            // one call at a time on this state
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<ShimAlgorithms> pareto;          // BRAID_TOPOLOGY's Pareto set from rank 0; kept until destruction
  uint64_t pareto_digest = 0;                      // textDigest of its text
  std::unique_ptr<DataTransport> proxy_transport;  // hierarchical: the executor's proxies; outlives the executor
  std::unique_ptr<DeviceExecutor> executor;        // one host, or several with BRAID_NCCL_ACROSS_HOSTS=hierarchical
  std::unique_ptr<DataTransport> transport;        // several hosts, host-driven: executeOnStream
  std::string path;                                // executorText() of the choice
  // The executor's prepared plans by what they were lowered for (candidate, bytes in, bytes out, in place, element
  // bytes), not by the Plan object: ShimAlgorithms may lower a call again after dropping its cache, and a rank must
  // not prepare (collectively) what its peers, ranks of other threads sharing that cache, already hold.
  std::map<std::tuple<const ParetoCandidate*, uint64_t, uint64_t, bool, uint64_t>, int> handles;
  void* scratch = nullptr;  // device scratch of the host-driven path and non-root reduce output
  uint64_t scratch_bytes = 0;

  ~CommState() {
    executor.reset();  // its proxy thread uses proxy_transport until it is gone
    proxy_transport.reset();
    transport.reset();
    if (scratch != nullptr) cudaFree(scratch);
    bootstrap.reset();
  }
};

// BRAID_TOPOLOGY's Pareto set (docs/nccl.md): the topology, the request for the companion, and the set this
// process computed as rank 0 of some communicator (once per process: every later communicator's rank 0 in this
// process sends the same text).
struct ParetoSource {
  std::string topology;  // BRAID_TOPOLOGY; empty: unset
  int gpus = 0;          // its GPU count; 0: unset or not loaded
  std::string collectives;
  double time_limit_s = 0;
  std::mutex mu;
  bool computed = false;
  std::string text;  // the set's JSON; empty: none
  std::string why;   // why none
};

struct Shim {
  std::unique_ptr<ShimAlgorithms> algorithms;
  ParetoSource pareto;
  std::mutex mu;
  std::unordered_map<ncclComm_t, std::shared_ptr<CommState>> comms;
  std::mutex log_mu;
  std::unordered_set<std::string> logged;
};

// Reads BRAID_TOPOLOGY and the BRAID_NCCL_PARETO_* variables; loads the topology for its GPU count (every rank does,
// so every rank knows which communicators take part in the exchange). One line either way.
void configurePareto(ParetoSource& p) {
  p.topology = envString("BRAID_TOPOLOGY");
  if (p.topology.empty()) return;
  p.collectives = envString("BRAID_NCCL_PARETO_COLLS");
  const Result<double> limit = envDouble("BRAID_NCCL_PARETO_TIME_LIMIT");
  // At most the synthesizer's maximum (kMaxSynthesisTimeLimitSeconds, 1e6 s), which refuses a longer limit.
  if (limit.isOk() && std::isfinite(*limit) && *limit > 0 && *limit <= 1e6) {
    p.time_limit_s = *limit;
  } else {
    for (const EnvParam& param : envParams()) {
      if (std::strcmp(param.name, "BRAID_NCCL_PARETO_TIME_LIMIT") == 0) {
        p.time_limit_s = std::strtod(param.default_value, nullptr);
      }
    }
    warn(fmt::format("BRAID_NCCL_PARETO_TIME_LIMIT={}: not a positive number of seconds up to 1e6; {:g} s used",
                     envString("BRAID_NCCL_PARETO_TIME_LIMIT"), p.time_limit_s));
  }
  Result<Topology> topology = loadTopologyOrShipped(p.topology);
  if (!topology.isOk()) {
    warn("BRAID_TOPOLOGY=" + p.topology + ": " + topology.status().message() + "; no Pareto set");
    return;
  }
  p.gpus = topology->numGpus();
  if (p.gpus <= 0) {
    warn("BRAID_TOPOLOGY=" + p.topology + ": the topology has no GPUs; no Pareto set");
    p.gpus = 0;
    return;
  }
  nccl_plugin::log(nccl_abi::kLogInfo, nccl_abi::kSubsysInit,
                   fmt::format("shim: BRAID_TOPOLOGY={} ({} GPUs): rank 0 of each {}-rank communicator synthesizes its "
                               "Pareto set ({}) within {:g} s (BRAID_NCCL_PARETO_TIME_LIMIT) with {} and sends it to "
                               "the other ranks",
                               p.topology, p.gpus, p.gpus, p.collectives, p.time_limit_s, BRAID_NCCL_PARETO_LIBRARY));
}

// The companion's path: BRAID_NCCL_PARETO_LIB, else beside this library (dladdr), else its bare name for the
// loader's search path.
std::string companionPath() {
  std::string path = envString("BRAID_NCCL_PARETO_LIB");
  if (!path.empty()) return path;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&companionPath), &info) != 0 && info.dli_fname != nullptr) {
    const std::filesystem::path beside =
        std::filesystem::path(info.dli_fname).parent_path() / BRAID_NCCL_PARETO_LIBRARY;
    std::error_code ec;
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  return BRAID_NCCL_PARETO_LIBRARY;
}

// Asks the companion for the set (dlopened on first use, kept for the process's life). Errors name the library.
Result<std::string> runCompanion(const ParetoSource& p) {
  const std::string path = companionPath();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status(StatusCode::kNotFound, "dlopen(" + path + ") failed: " + (why != nullptr ? why : "unknown error") +
                                             " (set BRAID_NCCL_PARETO_LIB to its path)");
  }
  auto fn =
      reinterpret_cast<braidNcclParetoSet_v1_fn>(dlvsym(handle, BRAID_NCCL_PARETO_SYMBOL, BRAID_NCCL_PARETO_VERSION));
  if (fn == nullptr) {
    return Status(StatusCode::kNotFound, path + " has no " + BRAID_NCCL_PARETO_SYMBOL + "@" +
                                             BRAID_NCCL_PARETO_VERSION +
                                             " (not Braid's companion, or another version)");
  }
  braidNcclParetoRequest_v1 request{p.topology.c_str(), p.gpus, p.collectives.c_str(), p.time_limit_s};
  char* text = nullptr;
  char* error = nullptr;
  const int code = fn(&request, &text, &error);
  std::string out = text != nullptr ? text : "";
  std::string why = error != nullptr ? error : "no message";
  std::free(text);
  std::free(error);
  if (code != 0) return Status(static_cast<StatusCode>(code), why);
  if (out.empty()) return internalError(path + " returned no text");
  return out;
}

// Rank 0's set: computed on the first call in this process (warning once when there is none), the same text after.
void paretoOnRankZero(ParetoSource& p, std::string* text, std::string* why) {
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.computed) {
    p.computed = true;
    const auto start = std::chrono::steady_clock::now();
    Result<std::string> set = internalError("no result");
    try {
      set = runCompanion(p);
    } catch (const std::exception& e) {
      set = internalError(e.what());
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (set.isOk()) {
      p.text = std::move(set).value();
      nccl_plugin::log(nccl_abi::kLogInfo, nccl_abi::kSubsysInit,
                       fmt::format("shim: BRAID_TOPOLOGY={}: Pareto set for {} ranks synthesized in {:.1f} s",
                                   p.topology, p.gpus, seconds));
    } else {
      p.why = set.status().toString();
      warn(
          fmt::format("BRAID_TOPOLOGY={}: no Pareto set ({:.1f} s): {}; calls go to NCCL unless BRAID_ALGO_DIR / "
                      "MSCCL_XML_FILES serve them",
                      p.topology, seconds, p.why));
    }
  }
  *text = p.text;
  *why = p.why;
}

Shim& shim() {
  // Never destroyed: entry points may run from other libraries' destructors at exit.
  static Shim* instance = [] {
    auto* s = new Shim();
    InsideBraid inside;
    const std::string dir = envString("BRAID_ALGO_DIR");
    const char* files = std::getenv("MSCCL_XML_FILES");
    try {
      s->algorithms = ShimAlgorithms::load(dir, files != nullptr ? files : "");
      for (const std::string& line : s->algorithms->warnings()) warn(line);
    } catch (const std::exception& e) {
      warn(std::string("loading algorithms: ") + e.what() + "; every call goes to NCCL");
    }
    if (!s->algorithms) s->algorithms = std::make_unique<ShimAlgorithms>();
    try {
      configurePareto(s->pareto);
    } catch (const std::exception& e) {
      s->pareto.gpus = 0;
      warn(std::string("BRAID_TOPOLOGY: ") + e.what() + "; no Pareto set");
    }
    if (logEnabled(LogLevel::kInfo)) {
      nccl_plugin::log(nccl_abi::kLogInfo, nccl_abi::kSubsysInit, "shim: " + s->algorithms->summary());
    }
    return s;
  }();
  return *instance;
}

// One INFO line per distinct text (TRACE: every call).
void logChoice(const std::string& text) {
  if (logEnabled(LogLevel::kTrace)) {
    nccl_plugin::log(nccl_abi::kLogInfo, nccl_abi::kSubsysInit, text);
    return;
  }
  if (!logEnabled(LogLevel::kInfo)) return;
  Shim& s = shim();
  {
    std::lock_guard<std::mutex> lock(s.log_mu);
    if (s.logged.size() >= 4096) s.logged.clear();
    if (!s.logged.insert(text).second) return;
  }
  nccl_plugin::log(nccl_abi::kLogInfo, nccl_abi::kSubsysInit, text);
}

std::string resultText(ncclResult_t result) {
  auto real = BRAID_REAL(ncclGetErrorString);
  return real != nullptr ? real(result) : "result " + std::to_string(static_cast<int>(result));
}

std::shared_ptr<CommState> findComm(ncclComm_t comm) {
  Shim& s = shim();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.comms.find(comm);
  return it != s.comms.end() ? it->second : nullptr;
}

std::shared_ptr<CommState> takeComm(ncclComm_t comm) {
  Shim& s = shim();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.comms.find(comm);
  if (it == s.comms.end()) return nullptr;
  std::shared_ptr<CommState> state = std::move(it->second);
  s.comms.erase(it);
  return state;
}

// NCCL_COMM_BLOCKING and config->blocking (NCCL_CONFIG_UNDEF_INT: the variable's value, default blocking).
bool isBlocking(const ncclConfig_t* config) {
  if (config != nullptr && config->blocking != NCCL_CONFIG_UNDEF_INT) return config->blocking != 0;
  const char* env = std::getenv("NCCL_COMM_BLOCKING");
  return env == nullptr || std::atoi(env) != 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Braid's setup on a communicator (collective over it)

#define BRAID_CUDA_OK(call)                                                                                      \
  do {                                                                                                           \
    const cudaError_t cuda_status = (call);                                                                      \
    if (cuda_status != cudaSuccess) {                                                                            \
      return Status(StatusCode::kUnhandledCudaError, std::string(#call) + ": " + cudaGetErrorName(cuda_status) + \
                                                         ": " + cudaGetErrorString(cuda_status));                \
    }                                                                                                            \
  } while (0)

// Rank 0's Braid UniqueId travels over the communicator itself (the real ncclBroadcast): byte 0 says whether rank 0
// has one, bytes 1..128 hold it.
Status shareUniqueId(ncclComm_t comm, CommState& state, UniqueId* id) {
  constexpr size_t kBytes = 1 + sizeof(UniqueId::internal);
  unsigned char host[kBytes] = {};
  std::string root_error;
  if (state.rank == 0) {
    Result<UniqueId> made = createUniqueId();
    if (made.isOk()) {
      host[0] = 1;
      std::memcpy(host + 1, made->internal, sizeof(made->internal));
    } else {
      root_error = made.status().toString();
    }
  }
  auto broadcast = BRAID_REAL(ncclBroadcast);
  if (broadcast == nullptr) return Status(StatusCode::kSystemError, "the real ncclBroadcast was not found");
  void* device = nullptr;
  cudaStream_t stream = nullptr;
  BRAID_CUDA_OK(cudaMalloc(&device, kBytes));
  Status status = [&]() -> Status {
    BRAID_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // On the broadcast's stream: a cudaMemcpy from pageable memory may return before its DMA lands, and a
    // non-blocking stream is not ordered after the legacy stream.
    BRAID_CUDA_OK(cudaMemcpyAsync(device, host, kBytes, cudaMemcpyHostToDevice, stream));
    const ncclResult_t sent = broadcast(device, device, kBytes, ncclUint8, 0, comm, stream);
    if (sent != ncclSuccess) {
      return Status(StatusCode::kSystemError, "ncclBroadcast of Braid's unique id: " + resultText(sent));
    }
    BRAID_CUDA_OK(cudaStreamSynchronize(stream));
    BRAID_CUDA_OK(cudaMemcpy(host, device, kBytes, cudaMemcpyDeviceToHost));
    return Status::ok();
  }();
  if (stream != nullptr) cudaStreamDestroy(stream);
  cudaFree(device);
  if (!status.isOk()) return status;
  if (host[0] != 1) {
    return Status(StatusCode::kSystemError,
                  "rank 0 could not create Braid's unique id" + (root_error.empty() ? "" : ": " + root_error));
  }
  std::memcpy(id->internal, host + 1, sizeof(id->internal));
  return Status::ok();
}

// One round over Braid's bootstrap after a collective step that can fail on some ranks only: every rank learns
// whether all succeeded, so Braid runs on every rank or on none. Returns this rank's error, else the first failed
// rank's as kRemoteError; `reached` (optional) is set when the round itself completed, so that every rank returns
// the same outcome.
Status agree(CommState& state, const Status& mine, const char* what, bool* reached = nullptr) {
  std::vector<uint8_t> ok(static_cast<size_t>(state.nranks), 0);
  ok[static_cast<size_t>(state.rank)] = mine.isOk() ? 1 : 0;
  BRAID_RETURN_IF_ERROR(state.bootstrap->allGather(ok.data(), 1));
  if (reached != nullptr) *reached = true;  // every rank now knows the outcome
  if (!mine.isOk()) return mine;
  for (int r = 0; r < state.nranks; ++r) {
    if (ok[static_cast<size_t>(r)] == 0) {
      return Status(StatusCode::kRemoteError, "rank " + std::to_string(r) + " failed to " + what);
    }
  }
  return Status::ok();
}

constexpr int kParetoTag = 0x5053;                       // "PS": the Pareto set on the shim's bootstrap
constexpr uint64_t kMaxParetoBytes = uint64_t{1} << 30;  // larger is not a set rank 0 sent
constexpr double kParetoWaitMarginS = 120;               // the other ranks' wait beyond rank 0's budget

// FNV-1a (64 bits) of the set's text: every rank's communicator line shows it, so the logs show that the ranks hold
// the same set.
uint64_t textDigest(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Rank 0 sends BRAID_TOPOLOGY's Pareto set (or why it has none) to every other rank over the bootstrap; every rank
// loads it into state.pareto and the ranks agree that all did, so the set is the same on every rank. `why` receives
// rank 0's reason when it has no set. Returns bootstrap errors and a failed load anywhere.
Status exchangePareto(CommState& state, std::string* why) {
  Shim& s = shim();
  Bootstrap& bootstrap = *state.bootstrap;
  std::string text;
  if (state.rank == 0) {
    paretoOnRankZero(s.pareto, &text, why);
    const uint64_t lengths[2] = {text.size(), why->size()};
    for (int peer = 1; peer < state.nranks; ++peer) {
      BRAID_RETURN_IF_ERROR(bootstrap.send(peer, kParetoTag, lengths, sizeof(lengths)));
      if (!text.empty()) BRAID_RETURN_IF_ERROR(bootstrap.send(peer, kParetoTag, text.data(), text.size()));
      if (!why->empty()) BRAID_RETURN_IF_ERROR(bootstrap.send(peer, kParetoTag, why->data(), why->size()));
    }
  } else {
    uint64_t lengths[2] = {0, 0};
    BRAID_RETURN_IF_ERROR(bootstrap.recv(0, kParetoTag, lengths, sizeof(lengths)));
    if (lengths[0] > kMaxParetoBytes || lengths[1] > kMaxParetoBytes) {
      return Status(StatusCode::kRemoteError, "rank 0 announced a Pareto set of " + std::to_string(lengths[0]) +
                                                  " bytes and a reason of " + std::to_string(lengths[1]));
    }
    text.resize(lengths[0]);
    why->resize(lengths[1]);
    if (!text.empty()) BRAID_RETURN_IF_ERROR(bootstrap.recv(0, kParetoTag, text.data(), text.size()));
    if (!why->empty()) BRAID_RETURN_IF_ERROR(bootstrap.recv(0, kParetoTag, why->data(), why->size()));
  }
  Status loaded = Status::ok();
  try {
    if (!text.empty()) state.pareto = ShimAlgorithms::fromParetoSet(text);
  } catch (const std::exception& e) {
    state.pareto.reset();
    loaded = internalError(std::string("loading the Pareto set: ") + e.what());
  }
  BRAID_RETURN_IF_ERROR(agree(state, loaded, "load the Pareto set"));
  if (state.pareto) {
    state.pareto_digest = textDigest(text);
    if (state.rank == 0) {
      for (const std::string& line : state.pareto->warnings()) warn(line);
      for (const std::string& line : state.pareto->notes()) logChoice("shim: " + line);
      logChoice("shim: BRAID_TOPOLOGY=" + s.pareto.topology + ": Pareto set of " + state.pareto->summary());
    }
  }
  return Status::ok();
}

// What runs Braid on the communicator (decision.h chooseExecutor): its ranks' host names and this rank's
// BRAID_NCCL_ACROSS_HOSTS, with BRAID_TRANSPORT for the hierarchical path's proxies. Every rank reads its own
// environment; agree() makes a refused value (warned about on its rank) end Braid on every rank, and one more round
// checks that every rank made the same choice. Errors: kInvalidArgument naming the variable and its value (this
// rank's), kRemoteError (another rank's), kInvalidUsage naming two ranks that chose differently.
Result<ExecutorChoice> agreeOnExecutor(CommState& state) {
  const Result<AcrossHosts> mode = parseAcrossHosts(envString("BRAID_NCCL_ACROSS_HOSTS"));
  const Result<TransportKind> proxy = proxyTransportKind(envString("BRAID_TRANSPORT"));
  const ExecutorChoice choice =
      chooseExecutor(state.bootstrap->hostNames(), mode.isOk() ? *mode : AcrossHosts::kHostDriven,
                     proxy.isOk() ? *proxy : TransportKind::kTcp);
  Status mine = mode.status();
  if (mine.isOk() && choice.kind == ExecutorKind::kHierarchical) mine = proxy.status();
  BRAID_RETURN_IF_ERROR(agree(state, mine, "read BRAID_NCCL_ACROSS_HOSTS / BRAID_TRANSPORT"));
  std::vector<uint8_t> all(2 * static_cast<size_t>(state.nranks), 0);
  all[2 * static_cast<size_t>(state.rank)] = static_cast<uint8_t>(choice.kind);
  all[2 * static_cast<size_t>(state.rank) + 1] = static_cast<uint8_t>(choice.proxy);
  BRAID_RETURN_IF_ERROR(state.bootstrap->allGather(all.data(), 2));
  for (int r = 0; r < state.nranks; ++r) {
    ExecutorChoice theirs = choice;
    theirs.kind = static_cast<ExecutorKind>(all[2 * static_cast<size_t>(r)]);
    theirs.proxy = static_cast<TransportKind>(all[2 * static_cast<size_t>(r) + 1]);
    if (executorText(theirs) != executorText(choice)) {
      return Status(StatusCode::kInvalidUsage,
                    fmt::format("rank {} chose {} and rank {} {} (BRAID_NCCL_ACROSS_HOSTS and BRAID_TRANSPORT must be "
                                "the same on every rank)",
                                r, executorText(theirs), state.rank, executorText(choice)));
    }
  }
  return choice;
}

Status setUpBraid(ncclComm_t comm, CommState& state, bool exchange_pareto) {
  int previous = -1;
  BRAID_CUDA_OK(cudaGetDevice(&previous));
  BRAID_CUDA_OK(cudaSetDevice(state.device));
  struct Restore {
    int device;
    ~Restore() { cudaSetDevice(device); }
  } restore{previous};
  UniqueId id;
  BRAID_RETURN_IF_ERROR(shareUniqueId(comm, state, &id));
  BootstrapOptions bootstrap_options;
  if (exchange_pareto) {
    // The other ranks wait for rank 0's synthesis in the bootstrap: its budget and a margin, when longer than
    // BRAID_TIMEOUT (an invalid BRAID_TIMEOUT is connectBootstrap's error).
    const Result<double> timeout = runtimeTimeoutSeconds();
    if (timeout.isOk())
      bootstrap_options.timeout_s = std::max(*timeout, shim().pareto.time_limit_s + kParetoWaitMarginS);
  }
  BRAID_ASSIGN_OR_RETURN(state.bootstrap, connectBootstrap(id, state.rank, state.nranks, bootstrap_options));
  if (exchange_pareto) {
    std::string why;
    BRAID_RETURN_IF_ERROR(exchangePareto(state, &why));
    // The same text on every rank, so the same outcome: no algorithm for this rank count anywhere means NCCL.
    if (!shim().algorithms->servesRanks(state.nranks) && !(state.pareto && state.pareto->servesRanks(state.nranks))) {
      state.forward_only =
          "no Braid algorithm for " + std::to_string(state.nranks) +
          " ranks (BRAID_TOPOLOGY=" + shim().pareto.topology + ": " +
          (state.pareto ? std::string("the Pareto set from rank 0 serves no size; rank 0's log says why")
                        : "rank 0 has no Pareto set: " + why) +
          ")";
      return Status::ok();
    }
  }
  BRAID_ASSIGN_OR_RETURN(const ExecutorChoice choice, agreeOnExecutor(state));
  state.path = executorText(choice);
  Status made = Status::ok();
  if (choice.kind == ExecutorKind::kHierarchical) {
    // The proxies' CPU transport over the same bootstrap: collective, so every rank learns whether all made it
    // before the executor's setup (collective too) starts.
    Result<std::unique_ptr<DataTransport>> proxies = createTransport(choice.proxy, *state.bootstrap);
    if (proxies.isOk()) {
      state.proxy_transport = std::move(proxies).value();
    } else {
      made = Status(proxies.status().code(), state.path + ": " + proxies.status().message());
    }
    BRAID_RETURN_IF_ERROR(agree(state, made, ("create the proxy transport (" + state.path + ")").c_str()));
  }
  state.capturable = choice.kind == ExecutorKind::kDeviceResident;
  if (choice.kind != ExecutorKind::kHostDriven) {
    DeviceExecutorOptions options;
    options.device = state.device;
    options.proxy_transport = state.proxy_transport.get();
    Result<std::unique_ptr<DeviceExecutor>> executor = createDeviceExecutor(*state.bootstrap, options);
    if (executor.isOk()) {
      state.executor = std::move(executor).value();
    } else {
      made = Status(executor.status().code(), state.path + ": " + executor.status().message());
    }
  } else {
    CudaTransportOptions options;
    options.device = state.device;
    Result<std::unique_ptr<DataTransport>> transport = createCudaTransport(*state.bootstrap, options);
    if (transport.isOk()) {
      state.transport = std::move(transport).value();
    } else {
      made = Status(transport.status().code(), state.path + ": " + transport.status().message());
    }
  }
  return agree(state, made, ("set up Braid (" + state.path + ")").c_str());
}

// Records a communicator the application created and, when the shim holds an algorithm for its rank count, sets
// up Braid on it. `why_not` non-empty: recorded forward-only for that reason.
void track(ncclComm_t comm, bool blocking, std::string why_not, const char* entry) {
  if (comm == nullptr) return;
  auto state = std::make_shared<CommState>();
  state->blocking = blocking;
  if (!blocking) {
    // Not queried: until its initialisation returns ncclSuccess NCCL refuses every query with a warning.
    state->forward_only = why_not.empty() ? "non-blocking communicator" : why_not;
  } else {
    InsideBraid inside;
    auto user_rank = BRAID_REAL(ncclCommUserRank);
    auto count = BRAID_REAL(ncclCommCount);
    auto cu_device = BRAID_REAL(ncclCommCuDevice);
    if (user_rank == nullptr || count == nullptr || cu_device == nullptr) {
      state->forward_only = "NCCL lacks ncclCommUserRank / ncclCommCount / ncclCommCuDevice";
    } else if (user_rank(comm, &state->rank) != ncclSuccess || count(comm, &state->nranks) != ncclSuccess ||
               cu_device(comm, &state->device) != ncclSuccess) {
      state->forward_only = "NCCL did not report the communicator's rank, size or device";
    }
  }
  const bool given_reason = state->forward_only.empty() && !why_not.empty();
  if (given_reason) state->forward_only = std::move(why_not);
  Shim& s = shim();
  // BRAID_TOPOLOGY's set is for communicators with its GPU count (every rank loaded the same topology).
  const bool exchange_pareto = s.pareto.gpus > 0 && s.pareto.gpus == state->nranks;
  if (given_reason && (s.algorithms->servesRanks(state->nranks) || exchange_pareto)) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      warn(std::string(entry) + ": Braid serves " + std::to_string(state->nranks) + "-rank communicators, but " +
           state->forward_only +
           ": their calls go to NCCL (Braid runs with a process or thread per GPU; nccl-tests: -g 1, or -t N -p 1)");
    }
  }
  if (state->forward_only.empty() && !s.algorithms->servesRanks(state->nranks) && !exchange_pareto) {
    state->forward_only = "no Braid algorithm for " + std::to_string(state->nranks) + " ranks";
    if (s.pareto.gpus > 0) {
      state->forward_only += " (BRAID_TOPOLOGY=" + s.pareto.topology + " has " + std::to_string(s.pareto.gpus) +
                             " GPUs: its Pareto set is for " + std::to_string(s.pareto.gpus) + "-rank communicators)";
    }
  }
  if (state->forward_only.empty()) {
    InsideBraid inside;
    Status status = Status::ok();
    try {
      status = setUpBraid(comm, *state, exchange_pareto);
    } catch (const std::exception& e) {
      status = Status(StatusCode::kInternalError, e.what());
    }
    if (!status.isOk()) {
      warn(std::string(entry) + ": Braid could not be set up on this communicator (rank " +
           std::to_string(state->rank) + " of " + std::to_string(state->nranks) + "): " + status.toString() +
           "; its calls go to NCCL");
      state->forward_only = "Braid setup failed: " + status.message();
    }
    if (!state->forward_only.empty()) {
      state->executor.reset();
      state->proxy_transport.reset();
      state->transport.reset();
      state->bootstrap.reset();
    }
  }
  std::string pareto_text;
  if (state->pareto) {
    pareto_text = fmt::format("; Pareto set from rank 0: {} algorithm{} (digest {:016x})", state->pareto->size(),
                              state->pareto->size() == 1 ? "" : "s", state->pareto_digest);
  }
  const std::string where = state->rank < 0
                                ? ""
                                : ", rank " + std::to_string(state->rank) + " of " + std::to_string(state->nranks) +
                                      " device " + std::to_string(state->device);
  logChoice("shim: communicator of " + std::string(entry) + where + ": " +
            (state->forward_only.empty() ? "Braid ready (" + state->path + ")"
                                         : "calls go to NCCL (" + state->forward_only + ")") +
            pareto_text);
  std::lock_guard<std::mutex> lock(s.mu);
  s.comms[comm] = std::move(state);
}

// ---------------------------------------------------------------------------------------------------------------
// Running a decision

Status ensureScratch(CommState& state, uint64_t bytes) {
  if (bytes <= state.scratch_bytes) return Status::ok();
  if (state.scratch != nullptr) cudaFree(state.scratch);
  state.scratch = nullptr;
  state.scratch_bytes = 0;
  BRAID_CUDA_OK(cudaMalloc(&state.scratch, bytes));
  state.scratch_bytes = bytes;
  return Status::ok();
}

// The key of `d`'s prepared plan in state.handles.
std::tuple<const ParetoCandidate*, uint64_t, uint64_t, bool, uint64_t> handleKey(const CommState& state,
                                                                                 const Decision& d) {
  const RankPlan& mine = d.plan->ranks[static_cast<size_t>(state.rank)];
  return std::make_tuple(d.candidate, mine.input_bytes, mine.output_bytes, d.in_place, d.plan->element_bytes);
}

// Runs `d` on the caller's stream. `every_rank_failed` is set when a failure is one every rank saw (the plan's
// preparation, agreed over the bootstrap), so all of them can hand the call to NCCL; any other failure is this
// rank's alone.
Status runBraid(CommState& state, const CallArgs& args, const Decision& d, cudaStream_t stream,
                bool* every_rank_failed) {
  const Plan& plan = *d.plan;
  const RankPlan& mine = plan.ranks[static_cast<size_t>(state.rank)];
  const DataType type = *braidDataType(args.nccl_type);
  const ReduceOp op = args.nccl_op >= 0 ? static_cast<ReduceOp>(args.nccl_op) : ReduceOp::kSum;
  const CollectiveKind kind = *collectiveOf(args.call);
  const bool root = state.rank == args.root;
  // As the communicator: a non-root broadcast rank reads nothing (its input is its output); a non-root reduce rank's
  // result lands in scratch, its receive buffer is not written.
  void* input = const_cast<void*>(args.send);
  void* output = const_cast<void*>(args.recv);
  if (kind == CollectiveKind::kBroadcast && !root) input = output;
  uint64_t scratch_needed = state.transport ? mine.scratch_bytes + mine.temp_bytes : 0;
  const bool reduce_scratch_out = kind == CollectiveKind::kReduce && !root && !d.in_place;
  const uint64_t out_offset = (scratch_needed + 255) / 256 * 256;
  if (reduce_scratch_out) scratch_needed = out_offset + mine.output_bytes;
  BRAID_RETURN_IF_ERROR(ensureScratch(state, scratch_needed));
  if (reduce_scratch_out) output = static_cast<uint8_t*>(state.scratch) + out_offset;

  RankMemory memory;
  memory.input = input;
  memory.input_bytes = mine.input_bytes;
  memory.output = output;
  memory.output_bytes = mine.output_bytes;
  const ReduceSpec reduce{type, op == ReduceOp::kAvg ? ReduceOp::kSum : op};
  if (state.executor) {
    BRAID_RETURN_IF_ERROR(state.executor->asyncError());
    const auto key = handleKey(state, d);
    auto it = state.handles.find(key);
    if (it == state.handles.end()) {
      Result<int> handle = state.executor->prepare(plan);
      Status prepared = agree(state, handle.status(), "prepare the plan", every_rank_failed);
      if (!prepared.isOk()) return prepared;
      it = state.handles.emplace(key, *handle).first;
    }
    BRAID_RETURN_IF_ERROR(state.executor->launch(it->second, memory, reduce, stream));
  } else {
    memory.scratch = state.scratch;
    memory.scratch_bytes = mine.scratch_bytes + mine.temp_bytes;
    BRAID_RETURN_IF_ERROR(executeOnStream(plan, *state.transport, memory, reduce, stream).status());
  }
  if (op == ReduceOp::kAvg && (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter ||
                               (kind == CollectiveKind::kReduce && root))) {
    const uint64_t out_elements = mine.output_bytes / dataTypeSize(type);
    BRAID_RETURN_IF_ERROR(averageOnStream(args.recv == nullptr ? output : const_cast<void*>(args.recv), out_elements,
                                          type, state.nranks, stream));
  }
  return Status::ok();
}

// `p` advanced by `elements` of NCCL type `type` (one Braid has: a decision with a tail was made for it); null stays
// null (a non-root rank's unused buffer).
template <class T>
T* elementsAfter(T* p, uint64_t elements, ncclDataType_t type) {
  if (p == nullptr) return p;
  const uint64_t bytes = elements * dataTypeSize(*braidDataType(static_cast<int>(type)));
  using Byte = std::conditional_t<std::is_const_v<T>, const uint8_t, uint8_t>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + bytes);
}

// No tail: the collectives whose decisions never have one (decision.h, Decision::tail_count).
constexpr auto kNoTail = [](uint64_t, uint64_t) { return ncclInternalError; };

// A data call: decide, run Braid or forward. `forward` calls the real NCCL; `tail(offset, count)` calls it on the
// last `count` elements, from element `offset` (all-reduce, broadcast, reduce).
template <class Forward, class Tail = std::remove_const_t<decltype(kNoTail)>>
ncclResult_t dataCall(const CallArgs& args, ncclComm_t comm, cudaStream_t stream, Forward&& forward,
                      Tail tail = kNoTail) noexcept {
  if (t_inside_braid > 0) return forward();
  bool settled = false;  // Braid ran the call (or failed it on this rank alone): it must not reach NCCL whole
  ncclResult_t result = ncclSuccess;
  try {
    std::shared_ptr<CommState> state = findComm(comm);
    if (state && state->internal) return forward();
    CommView view;
    if (state) {
      view.known = true;
      view.rank = state->rank;
      view.nranks = state->nranks;
      view.forward_only = state->forward_only;
      view.pareto = state->pareto.get();
    }
    Decision d = decide(shim().algorithms.get(), args, view, t_group_depth);
    // A captured call runs in Braid only where a graph can replay it: the device-resident executor of one host,
    // with the plan already prepared (preparing allocates and exchanges over the bootstrap, which a graph cannot
    // hold), and no allocation in the call (a non-root reduce's scratch). The same on every rank: ranks capture the
    // same calls after the same history, and the executor kind is agreed at setup.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (d.braid()) {
      const cudaError_t asked = cudaStreamIsCapturing(stream, &capture);
      std::string why;
      if (asked != cudaSuccess) {
        why = std::string("cudaStreamIsCapturing: ") + cudaGetErrorName(asked);
      } else if (capture != cudaStreamCaptureStatusNone) {
        std::lock_guard<std::mutex> lock(state->mu);
        if (!state->capturable || !state->executor) {
          why = "the stream is being captured into a CUDA graph, which " + state->path + " cannot be";
        } else if (args.call == ShimCall::kReduce) {
          why = "the stream is being captured into a CUDA graph (a reduce may allocate)";
        } else if (!state->handles.contains(handleKey(*state, d))) {
          why = "the stream is being captured into a CUDA graph before an uncaptured call prepared this size";
        }
      }
      if (!why.empty()) {
        d = Decision{nullptr, nullptr, why, d.bytes, d.in_place};
        if (capture != cudaStreamCaptureStatusNone && !state->warned_capture.exchange(true)) {
          warn(std::string(entryName(args.call)) + ": rank " + std::to_string(state->rank) +
               ": a call Braid serves goes to NCCL: " + why + " (later ones say so at INFO)");
        }
      }
    }
    if (state) {
      std::lock_guard<std::mutex> lock(state->failed_mu);
      if (!state->failed.isOk()) return static_cast<ncclResult_t>(toNcclResultCode(state->failed.code()));
    }
    if (d.braid()) {
      InsideBraid inside;
      std::lock_guard<std::mutex> lock(state->mu);
      bool every_rank_failed = false;
      Status ran = state->forward_only.empty() ? runBraid(*state, args, d, stream, &every_rank_failed)
                                               : Status(StatusCode::kInternalError, state->forward_only);
      if (!ran.isOk() && !every_rank_failed && state->forward_only.empty()) {
        // The peers go on in Braid (their kernels wait for this rank): NCCL here would wait for them forever.
        result = static_cast<ncclResult_t>(toNcclResultCode(ran.code()));
        {
          std::lock_guard<std::mutex> failed_lock(state->failed_mu);
          state->failed = ran;
        }
        settled = true;  // from here on, whatever happens, the call is not handed to NCCL
        warn(std::string(entryName(args.call)) + ": Braid failed on rank " + std::to_string(state->rank) + " (" +
             ran.toString() + "): this and every later call on the communicator return " + resultText(result) +
             ", as NCCL after an asynchronous error (ncclCommGetAsyncError reports it); abort the communicator");
        return result;
      }
      if (!ran.isOk()) {
        warn(std::string(entryName(args.call)) + ": Braid failed on every rank (" + ran.toString() +
             "); this call and the communicator's later calls go to NCCL");
        if (state->forward_only.empty()) state->forward_only = "Braid failed earlier: " + ran.message();
        d = Decision{nullptr, nullptr, "Braid failed: " + ran.message(), d.bytes, d.in_place};
      } else {
        // Braid's kernel is enqueued: the tail (if any) goes to NCCL now, and the call is never forwarded whole.
        settled = true;
        result = d.tail_count > 0 ? tail(args.count - d.tail_count, d.tail_count) : ncclSuccess;
      }
    }
    if (logEnabled(LogLevel::kInfo)) logChoice(logText(args, view, d));
    if (settled) return result;
  } catch (const std::exception& e) {
    warn(std::string(entryName(args.call)) + ": internal error: " + e.what() +
         (settled ? "" : "; the call goes to NCCL"));
  } catch (...) {
    warn(std::string(entryName(args.call)) + ": internal error" + (settled ? "" : "; the call goes to NCCL"));
  }
  return settled ? result : forward();
}

// Lifecycle calls: one log line with NCCL's result.
void logLifecycle(const char* entry, const std::string& detail, ncclResult_t result) noexcept {
  if (t_inside_braid > 0) return;
  try {
    logChoice("shim: " + std::string(entry) + (detail.empty() ? "" : " " + detail) + " -> NCCL: " + resultText(result));
  } catch (...) {
  }
}

enum class Drop { kFinalize, kDestroy, kAbort };

// Drops Braid's state of `comm`: finalize keeps the record, forward-only; destroy and abort forget it. Braid's executor
// waits for its kernels and, on every rank, closes collectively (a barrier over its bootstrap); an abort is not
// collective, so it tells the peers first and their waits end at once.
void dropComm(ncclComm_t comm, Drop drop) noexcept {
  try {
    InsideBraid inside;
    if (drop == Drop::kFinalize) {
      std::shared_ptr<CommState> state = findComm(comm);
      if (!state) return;
      std::lock_guard<std::mutex> lock(state->mu);
      state->forward_only = "finalized";
      state->executor.reset();
      state->transport.reset();
      state->bootstrap.reset();
      return;
    }
    std::erase_if(t_group_created, [comm](const GroupCreated& c) { return c.comm == comm; });
    std::shared_ptr<CommState> state = takeComm(comm);
    if (state && drop == Drop::kAbort) {
      // The kernels stop polling at once instead of at the timeout; the peers learn through the bootstrap.
      if (state->executor) state->executor->abort();
      if (state->bootstrap) state->bootstrap->abort("ncclCommAbort");
    }
  } catch (...) {
  }
}

}  // namespace
}  // namespace braid::nccl_shim

using namespace braid::nccl_shim;  // NOLINT: the entry points below are NCCL's C functions

// ---------------------------------------------------------------------------------------------------------------
// Entry points

BRAID_SHIM_EXPORT ncclResult_t ncclGetVersion(int* version) {
  const ncclResult_t result = callReal(BRAID_REAL(ncclGetVersion), version);
  logLifecycle("ncclGetVersion", "", result);
  return result;
}

BRAID_SHIM_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  const ncclResult_t result = callReal(BRAID_REAL(ncclGetUniqueId), unique_id);
  logLifecycle("ncclGetUniqueId", "", result);
  return result;
}

BRAID_SHIM_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  auto real = BRAID_REAL(ncclGetErrorString);
  return real != nullptr ? real(result) : "the real NCCL was not found (libbraid_nccl.so)";
}

BRAID_SHIM_EXPORT const char* ncclGetLastError(ncclComm_t comm) {
  auto real = BRAID_REAL(ncclGetLastError);
  return real != nullptr ? real(comm) : "the real NCCL was not found (libbraid_nccl.so)";
}

// NCCL's asynchronous error, else Braid's: a failure recorded on the communicator or one its executor's kernels or
// proxy reported (a wait past BRAID_TIMEOUT), which then sticks as NCCL's does.
BRAID_SHIM_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  const ncclResult_t result = callReal(BRAID_REAL(ncclCommGetAsyncError), comm, async_error);
  if (t_inside_braid > 0 || result != ncclSuccess || async_error == nullptr || *async_error != ncclSuccess)
    return result;
  try {
    std::shared_ptr<CommState> state = findComm(comm);
    if (!state || state->internal) return result;
    {
      // The executor is asked only when no call holds the communicator (a call may wait in a collective step for a
      // dead peer: a watchdog polling here must not wait with it); a failure it recorded then shows next time.
      std::unique_lock<std::mutex> lock(state->mu, std::try_to_lock);
      if (lock.owns_lock() && state->executor) {
        InsideBraid inside;
        braid::Status error = state->executor->asyncError();
        std::lock_guard<std::mutex> failed_lock(state->failed_mu);
        if (!error.isOk() && state->failed.isOk()) {
          warn("ncclCommGetAsyncError: rank " + std::to_string(state->rank) + ": " + error.toString());
          state->failed = std::move(error);
        }
      }
    }
    std::lock_guard<std::mutex> failed_lock(state->failed_mu);
    if (!state->failed.isOk()) *async_error = static_cast<ncclResult_t>(toNcclResultCode(state->failed.code()));
  } catch (...) {
  }
  return result;
}

namespace {

// Init entry points: forward, then record the communicator (only the application's, outside a group).
template <class Forward>
ncclResult_t initCall(const char* entry, ncclComm_t* comm, bool blocking, const std::string& detail,
                      const std::string& identity, Forward&& forward) noexcept {
  const ncclResult_t result = forward();
  if (t_inside_braid > 0) {
    if (result == ncclSuccess && comm != nullptr && *comm != nullptr) {
      try {
        auto state = std::make_shared<CommState>();
        state->internal = true;
        Shim& s = shim();
        std::lock_guard<std::mutex> lock(s.mu);
        s.comms[*comm] = std::move(state);
      } catch (...) {
      }
    }
    return result;
  }
  logLifecycle(entry, detail, result);
  if (result != ncclSuccess || comm == nullptr || *comm == nullptr) return result;
  try {
    if (t_group_depth > 0) {
      t_group_created.push_back(GroupCreated{*comm, blocking, entry, identity});  // recorded at the group's end
    } else {
      track(*comm, blocking, "", entry);
    }
  } catch (const std::exception& e) {
    warn(std::string(entry) + ": recording the communicator: " + e.what() + "; its calls go to NCCL");
  } catch (...) {
  }
  return result;
}

// At the outermost ncclGroupEnd (`result` its return): records the communicators this thread created in the group.
// A communicator of which the thread holds one rank (nccl-tests' and PyTorch's way: a process or thread per GPU) is
// set up as one created outside a group; one of which it holds several ranks (the same unique id, or the same
// parent and color) is one thread driving several ranks, whose collective setup that thread cannot run one rank at
// a time (as ncclCommInitAll's), so those stay with NCCL. Every process is expected to create its ranks of a
// communicator the same way, as those programs do: the setup is collective over the communicator's ranks.
void trackGroupCreated(ncclResult_t result) noexcept {
  std::vector<GroupCreated> created;
  created.swap(t_group_created);
  for (const GroupCreated& c : created) {
    try {
      std::string why_not;
      const auto ranks_here = std::count_if(created.begin(), created.end(),
                                            [&](const GroupCreated& other) { return other.identity == c.identity; });
      if (result != ncclSuccess && result != ncclInProgress) {
        why_not = "the ncclGroupEnd of the group that created it returned " + resultText(result);
      } else if (ranks_here > 1) {
        why_not = std::to_string(ranks_here) +
                  " of its ranks created by one thread in one ncclGroupStart/ncclGroupEnd: one thread drives several "
                  "ranks";
      }
      // After a failed group (or one still in progress) the communicator is recorded without queries.
      track(c.comm, c.blocking && result == ncclSuccess, why_not, c.entry);
    } catch (const std::exception& e) {
      warn(std::string(c.entry) + ": recording the communicator: " + e.what() + "; its calls go to NCCL");
    } catch (...) {
    }
  }
}

// A communicator's identity from its unique id (GroupCreated::identity); empty when it cannot be made.
std::string uniqueIdIdentity(const ncclUniqueId& id) noexcept {
  try {
    return "id " + std::string(id.internal, sizeof(id.internal));
  } catch (...) {
    return "";
  }
}

std::string rankDetail(int rank, int nranks) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(nranks);
}

}  // namespace

BRAID_SHIM_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank) {
  return initCall("ncclCommInitRank", comm, isBlocking(nullptr), rankDetail(rank, nranks), uniqueIdIdentity(comm_id),
                  [&] { BRAID_FORWARD(ncclCommInitRank, comm, nranks, comm_id, rank); });
}

BRAID_SHIM_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                                      ncclConfig_t* config) {
  return initCall("ncclCommInitRankConfig", comm, isBlocking(config), rankDetail(rank, nranks),
                  uniqueIdIdentity(comm_id),
                  [&] { BRAID_FORWARD(ncclCommInitRankConfig, comm, nranks, comm_id, rank, config); });
}

BRAID_SHIM_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  const ncclResult_t result = callReal(BRAID_REAL(ncclCommInitAll), comms, ndev, devlist);
  if (t_inside_braid > 0) return result;
  logLifecycle("ncclCommInitAll", std::to_string(ndev) + " devices", result);
  if (result == ncclSuccess && comms != nullptr) {
    // One thread drives every rank: Braid's setup is collective per rank, so these stay with NCCL.
    for (int i = 0; i < ndev; ++i) {
      try {
        track(comms[i], true, "ncclCommInitAll: one thread drives every rank", "ncclCommInitAll");
      } catch (...) {
      }
    }
  }
  return result;
}

BRAID_SHIM_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                             ncclConfig_t* config) {
  bool blocking = isBlocking(config);
  if (config == nullptr) {  // the child inherits the parent's configuration
    try {
      std::shared_ptr<CommState> parent = t_inside_braid > 0 ? nullptr : findComm(comm);
      if (parent) blocking = parent->blocking;
    } catch (...) {
    }
  }
  std::string identity;
  try {
    identity = fmt::format("split of {} color {}", static_cast<const void*>(comm), color);
  } catch (...) {
  }
  return initCall("ncclCommSplit", newcomm, blocking, "color " + std::to_string(color) + " key " + std::to_string(key),
                  identity, [&] { BRAID_FORWARD(ncclCommSplit, comm, color, key, newcomm, config); });
}

BRAID_SHIM_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  dropComm(comm, Drop::kFinalize);
  const ncclResult_t result = callReal(BRAID_REAL(ncclCommFinalize), comm);
  logLifecycle("ncclCommFinalize", "", result);
  return result;
}

BRAID_SHIM_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  dropComm(comm, Drop::kDestroy);
  const ncclResult_t result = callReal(BRAID_REAL(ncclCommDestroy), comm);
  logLifecycle("ncclCommDestroy", "", result);
  return result;
}

BRAID_SHIM_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  dropComm(comm, Drop::kAbort);
  const ncclResult_t result = callReal(BRAID_REAL(ncclCommAbort), comm);
  logLifecycle("ncclCommAbort", "", result);
  return result;
}

BRAID_SHIM_EXPORT ncclResult_t ncclGroupStart() {
  if (t_inside_braid > 0) return callReal(BRAID_REAL(ncclGroupStart));
  ++t_group_depth;
  const ncclResult_t result = callReal(BRAID_REAL(ncclGroupStart));
  logLifecycle("ncclGroupStart", "depth " + std::to_string(t_group_depth), result);
  return result;
}

BRAID_SHIM_EXPORT ncclResult_t ncclGroupEnd() {
  if (t_inside_braid > 0) return callReal(BRAID_REAL(ncclGroupEnd));
  const int depth = t_group_depth;
  if (t_group_depth > 0) --t_group_depth;
  const ncclResult_t result = callReal(BRAID_REAL(ncclGroupEnd));
  logLifecycle("ncclGroupEnd", "depth " + std::to_string(depth), result);
  if (t_group_depth == 0 && !t_group_created.empty()) trackGroupCreated(result);
  return result;
}

BRAID_SHIM_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                             cudaStream_t stream) {
  const CallArgs args{ShimCall::kAllReduce, sendbuff, recvbuff, count, static_cast<int>(datatype),
                      static_cast<int>(op), -1};
  return dataCall(
      args, comm, stream, [&] { BRAID_FORWARD(ncclAllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream); },
      [&](uint64_t offset, uint64_t tail) {
        BRAID_FORWARD(ncclAllReduce, elementsAfter(sendbuff, offset, datatype),
                      elementsAfter(recvbuff, offset, datatype), tail, datatype, op, comm, stream);
      });
}

BRAID_SHIM_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const CallArgs args{ShimCall::kAllGather, sendbuff, recvbuff, sendcount, static_cast<int>(datatype), -1, -1};
  return dataCall(args, comm, stream,
                  [&] { BRAID_FORWARD(ncclAllGather, sendbuff, recvbuff, sendcount, datatype, comm, stream); });
}

BRAID_SHIM_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                 cudaStream_t stream) {
  const CallArgs args{ShimCall::kReduceScatter, sendbuff, recvbuff, recvcount, static_cast<int>(datatype),
                      static_cast<int>(op),     -1};
  return dataCall(args, comm, stream,
                  [&] { BRAID_FORWARD(ncclReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, comm, stream); });
}

BRAID_SHIM_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  const CallArgs args{ShimCall::kBroadcast, sendbuff, recvbuff, count, static_cast<int>(datatype), -1, root};
  return dataCall(
      args, comm, stream,
      [&] { BRAID_FORWARD(ncclBroadcast, sendbuff, recvbuff, count, datatype, root, comm, stream); },
      [&](uint64_t offset, uint64_t tail) {
        BRAID_FORWARD(ncclBroadcast, elementsAfter(sendbuff, offset, datatype),
                      elementsAfter(recvbuff, offset, datatype), tail, datatype, root, comm, stream);
      });
}

BRAID_SHIM_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                         cudaStream_t stream) {
  const CallArgs args{ShimCall::kBcast, buff, buff, count, static_cast<int>(datatype), -1, root};
  return dataCall(
      args, comm, stream, [&] { BRAID_FORWARD(ncclBcast, buff, count, datatype, root, comm, stream); },
      [&](uint64_t offset, uint64_t tail) {
        BRAID_FORWARD(ncclBcast, elementsAfter(buff, offset, datatype), tail, datatype, root, comm, stream);
      });
}

BRAID_SHIM_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  const CallArgs args{ShimCall::kReduce,    sendbuff, recvbuff, count, static_cast<int>(datatype),
                      static_cast<int>(op), root};
  return dataCall(
      args, comm, stream,
      [&] { BRAID_FORWARD(ncclReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream); },
      [&](uint64_t offset, uint64_t tail) {
        BRAID_FORWARD(ncclReduce, elementsAfter(sendbuff, offset, datatype), elementsAfter(recvbuff, offset, datatype),
                      tail, datatype, op, root, comm, stream);
      });
}

BRAID_SHIM_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                            ncclComm_t comm, cudaStream_t stream) {
  const CallArgs args{ShimCall::kAllToAll, sendbuff, recvbuff, count, static_cast<int>(datatype), -1, -1};
  return dataCall(args, comm, stream,
                  [&] { BRAID_FORWARD(ncclAlltoAll, sendbuff, recvbuff, count, datatype, comm, stream); });
}

BRAID_SHIM_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                        ncclComm_t comm, cudaStream_t stream) {
  const CallArgs args{ShimCall::kSend, sendbuff, nullptr, count, static_cast<int>(datatype), -1, peer};
  return dataCall(args, comm, stream, [&] { BRAID_FORWARD(ncclSend, sendbuff, count, datatype, peer, comm, stream); });
}

BRAID_SHIM_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                        ncclComm_t comm, cudaStream_t stream) {
  const CallArgs args{ShimCall::kRecv, nullptr, recvbuff, count, static_cast<int>(datatype), -1, peer};
  return dataCall(args, comm, stream, [&] { BRAID_FORWARD(ncclRecv, recvbuff, count, datatype, peer, comm, stream); });
}
