// The tuner plugin as NCCL sees it: libnccl-tuner-braid.so dlopened from BRAID_NCCL_PLUGIN_DIR, its newest
// ncclTunerPlugin_v* struct, the cost table NCCL passes (a contiguous float[7][3] behind a float**). Expected values
// are computed here from Braid's public model (ncclBaselineAlgorithm / ncclNvlsProgram run in simulate()), not
// through the plugin's table code.
#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "abi/tuner_abi.h"
#include "braid/nccl_model.h"
#include "braid/simulate.h"
#include "braid/topology.h"
#include "support/command.h"

namespace braid {
namespace {

namespace abi = nccl_abi;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * 1024;
constexpr uint64_t kGiB = kMiB * 1024;
constexpr float kUntouched = 500.0f;  // what the test puts in allowed cells
constexpr float kGuard = 12345.0f;    // around the table

// ---- NCCL's side: the logger and the library lookup ------------------------------------------------------

std::mutex g_log_mutex;
std::vector<std::string> g_log;

extern "C" void captureLog(int level, unsigned long /*flags*/, const char* /*file*/, int /*line*/, const char* fmt,
                           ...) {
  char buffer[4096];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_log.push_back(std::to_string(level) + " " + buffer);
}

std::vector<std::string> takeLog() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::vector<std::string> out;
  out.swap(g_log);
  return out;
}

bool logHas(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// NCCL's name rule (nccl_plugins.md §2.4): NCCL_TUNER_PLUGIN=<name> -> libnccl-tuner-<name>.so.
std::string tunerLibraryPath(const std::string& dir) {
  setenv("NCCL_TUNER_PLUGIN", "braid", 1);
  return dir + "/libnccl-tuner-" + std::string(std::getenv("NCCL_TUNER_PLUGIN")) + ".so";
}

void* openLibrary(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << path << ": " << dlerror();
  return handle;
}

void* tunerLibrary() {
  static void* handle = openLibrary(tunerLibraryPath(BRAID_NCCL_PLUGIN_DIR));
  return handle;
}

template <class T>
const T* symbol(void* handle, const char* name) {
  return handle ? static_cast<const T*>(dlsym(handle, name)) : nullptr;
}

// Sets or clears the plugin's variables for one init (BRAID_TUNER: unset is `validated`).
void environment(const char* topology, const char* max_sim_bytes = nullptr, const char* rules = nullptr,
                 const char* policy = nullptr) {
  auto put = [](const char* name, const char* value) { value ? setenv(name, value, 1) : unsetenv(name); };
  put("BRAID_TOPOLOGY", topology);
  put("BRAID_TUNER_MAX_SIM_BYTES", max_sim_bytes);
  put("BRAID_TUNER_RULES", rules);
  put("BRAID_TUNER", policy);
  unsetenv("BRAID_TUNER_MAX_SIM_RANKS");
  unsetenv("NCCL_TOPO_DUMP_FILE");
  unsetenv("NCCL_TUNER_CONFIG_FILE");
}

// The v5 entry NCCL 2.28 picks first, initialised for `ranks` on `nodes`.
struct V5Comm {
  const abi::TunerV5* tuner = nullptr;
  void* ctx = nullptr;
  int init_result = -1;
  V5Comm(size_t ranks, size_t nodes) {
    void* lib = tunerLibrary();
    for (const char* name : {"ncclTunerPlugin_v5", "ncclTunerPlugin_v4", "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"}) {
      if (dlsym(lib, name) != nullptr) {
        EXPECT_STREQ(name, "ncclTunerPlugin_v5") << "NCCL 2.28 would take the newest symbol";
        break;
      }
    }
    tuner = symbol<abi::TunerV5>(lib, "ncclTunerPlugin_v5");
    if (tuner == nullptr) return;
    abi::NvlDomainInfoV5 domains{static_cast<int>(nodes), static_cast<int>(ranks / nodes),
                                 static_cast<int>(ranks / nodes)};
    abi::TunerConstantsV5 constants{};
    init_result = tuner->init(&ctx, 0x1234, ranks, nodes, captureLog, &domains, &constants);
  }
  ~V5Comm() {
    if (tuner && ctx) tuner->finalize(ctx);
  }
};

// A float[7][3] with guard cells on both sides; `table()` is what NCCL passes (float** to the first cell).
struct GuardedTable {
  static constexpr int kPad = 5;
  float cells[kPad + abi::kNumAlgorithms * abi::kNumProtocols + kPad];
  GuardedTable() {
    std::fill(std::begin(cells), std::end(cells), kGuard);
    for (int i = 0; i < abi::kNumAlgorithms * abi::kNumProtocols; ++i) cells[kPad + i] = kUntouched;
  }
  float& at(int algo, int proto) { return cells[kPad + algo * abi::kNumProtocols + proto]; }
  float** table() { return reinterpret_cast<float**>(&cells[kPad]); }
  bool guardsIntact() const {
    for (int i = 0; i < kPad; ++i) {
      if (cells[i] != kGuard || cells[kPad + 21 + i] != kGuard) return false;
    }
    return true;
  }
};

// NCCL marks CollNet and PAT not allowed for all-reduce on these machines, and the test forbids Tree/LL128 too
// (Braid models it: the plugin must leave it -1 all the same).
void forbidSome(GuardedTable& t) {
  for (int p = 0; p < 3; ++p) {
    t.at(abi::kAlgoCollNetDirect, p) = -1.0f;
    t.at(abi::kAlgoCollNetChain, p) = -1.0f;
    t.at(abi::kAlgoPat, p) = -1.0f;
  }
  t.at(abi::kAlgoTree, abi::kProtoLL128) = -1.0f;
}

// ---- Braid's model, computed here ----------------------------------------------------------------------------

Protocol braidProtocol(int proto) {
  return proto == abi::kProtoLL ? Protocol::kLL : proto == abi::kProtoLL128 ? Protocol::kLL128 : Protocol::kSimple;
}

// simulate() of NCCL's all-reduce algorithm `algo` with `proto` at `bytes`, out-of-place; nullopt when NCCL's model
// disables the entry on this topology (the plugin then leaves the cell as it is).
std::optional<double> expectedAllReduceUs(const Topology& topology, const NcclSystem& system, int algo, int proto,
                                          uint64_t bytes) {
  Result<NcclPrediction> prediction = ncclPredict(system, CollectiveKind::kAllReduce, bytes);
  EXPECT_TRUE(prediction.isOk());
  bool enabled = false;
  for (const NcclEstimate& e : prediction->all) {
    enabled |= static_cast<int>(e.algo) == algo && e.protocol == braidProtocol(proto) && e.time_us >= 0;
  }
  if (!enabled) return std::nullopt;
  SimOptions options;
  options.size_bytes = bytes;
  options.in_place = false;
  options.protocol = braidProtocol(proto);
  if (algo == abi::kAlgoRing || algo == abi::kAlgoTree) {
    if (algo == abi::kAlgoRing && proto == abi::kProtoSimple) {
      // NCCL's ring loop in Simple: 2 MiB chunks as two 1 MiB slices, its 4 MiB buffer as 4 of them.
      options.model.slice_bytes[static_cast<int>(Protocol::kSimple)] = uint64_t{1} << 20;
      options.slices_per_iteration = 2;
      options.model.fifo_depth = 4;
    }
    Result<Algorithm> built = ncclBaselineAlgorithm(topology, CollectiveKind::kAllReduce, static_cast<NcclAlgo>(algo),
                                                    false, options.protocol.value());
    EXPECT_TRUE(built.isOk()) << built.status().toString();
    Result<SimResult> sim = simulate(*built, topology, options);
    EXPECT_TRUE(sim.isOk()) << sim.status().toString();
    return sim->time_us;
  }
  if (algo == abi::kAlgoNvls || algo == abi::kAlgoNvlsTree) {
    // 1 to 4 rounds per NVLS channel, about 1 MiB per GPU share and round.
    const uint64_t channels = std::max(1, system.nvls_graph.channels);
    const uint64_t per_round = static_cast<uint64_t>(system.ranks_per_node) * channels * kMiB;
    const uint64_t k = std::clamp<uint64_t>((bytes + per_round - 1) / per_round, 1, 4);
    Result<NvlsProgram> program = ncclNvlsProgram(topology, static_cast<int>(channels), static_cast<int>(channels * k),
                                                  ncclNvlsEfficiency(system.arch));
    EXPECT_TRUE(program.isOk()) << program.status().toString();
    Result<SimResult> sim = simulate(program->algorithm, program->topology, options);
    EXPECT_TRUE(sim.isOk()) << sim.status().toString();
    return sim->time_us;
  }
  return std::nullopt;
}

// BRAID_TUNER=model: wherever Braid's fastest differs from NCCL's choice, the table gets Braid's predictions. The
// test's table makes NCCL's choice the entry Braid predicts slowest, so Braid's fastest differs at every size.
void checkAllReduceTable(const char* name) {
  Result<Topology> topology = loadTopologyOrShipped(name);
  ASSERT_TRUE(topology.isOk()) << topology.status().toString();
  Result<NcclSystem> system = ncclSystem(*topology);
  ASSERT_TRUE(system.isOk()) << system.status().toString();
  environment(name, nullptr, nullptr, "model");
  takeLog();
  V5Comm comm(16, 2);
  ASSERT_NE(comm.tuner, nullptr);
  ASSERT_EQ(comm.init_result, 0) << joined(takeLog());
  EXPECT_FALSE(logHas(takeLog(), "left as it is"));
  int simulated = 0;
  for (uint64_t bytes : {kKiB, kMiB, kGiB}) {
    GuardedTable t;
    forbidSome(t);
    int slowest = -1;
    double slowest_us = 0;
    for (int a = 0; a < 7; ++a) {
      for (int p = 0; p < 3; ++p) {
        if (t.at(a, p) < 0) continue;
        const std::optional<double> us = expectedAllReduceUs(*topology, *system, a, p, bytes);
        if (us && (slowest < 0 || *us > slowest_us)) {
          slowest = a * 3 + p;
          slowest_us = *us;
        }
      }
    }
    ASSERT_GE(slowest, 0);
    t.at(slowest / 3, slowest % 3) = 1.0f;  // NCCL's choice
    int channels = 0;
    ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, bytes, 1, t.table(), 7, 3, 0, &channels), 0);
    EXPECT_TRUE(t.guardsIntact());
    EXPECT_EQ(channels, 0);
    std::printf("%s all-reduce %llu bytes (us, LL/LL128/Simple):", name, static_cast<unsigned long long>(bytes));
    for (int a = 0; a < 7; ++a)
      std::printf(" %s %.1f/%.1f/%.1f;", ncclAlgoName(static_cast<NcclAlgo>(a)), t.at(a, 0), t.at(a, 1), t.at(a, 2));
    std::printf("\n");
    for (int a = 0; a < 7; ++a) {
      for (int p = 0; p < 3; ++p) {
        const std::string where = fmt::format("{} {} bytes [{}][{}]", name, bytes, a, p);
        if (a == abi::kAlgoCollNetDirect || a == abi::kAlgoCollNetChain || a == abi::kAlgoPat ||
            (a == abi::kAlgoTree && p == abi::kProtoLL128)) {
          EXPECT_EQ(t.at(a, p), -1.0f) << where;
          continue;
        }
        const std::optional<double> expected = expectedAllReduceUs(*topology, *system, a, p, bytes);
        if (!expected) {
          EXPECT_EQ(t.at(a, p), kUntouched) << where;
          continue;
        }
        EXPECT_FLOAT_EQ(t.at(a, p), static_cast<float>(*expected)) << where;
        ++simulated;
      }
    }
  }
  EXPECT_GE(simulated, 3 * 5) << "ring x 3 and tree x 2 protocols at three sizes at least";
}

TEST(TunerPlugin, AllReduceTableIsBraidsSimulationOnDgxH100x2) { checkAllReduceTable("dgx-h100-x2"); }
TEST(TunerPlugin, AllReduceTableIsBraidsSimulationOnDgxA100x2) { checkAllReduceTable("dgx-a100-x2"); }

// The table is a contiguous float[7][3]: an implementation that read it as 7 row pointers would dereference the
// first cells' bits (a crash) or write outside it (the guards). Exactly the allowed, modelled cells change.
TEST(TunerPlugin, WritesExactlyTheAllowedCellsOfTheContiguousTable) {
  environment("dgx-a100-x1", "1M", nullptr, "model");
  V5Comm comm(8, 1);
  ASSERT_EQ(comm.init_result, 0);
  GuardedTable t;
  forbidSome(t);
  t.at(abi::kAlgoRing, abi::kProtoLL) = -1.0f;
  int channels = 0;
  ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllGather, 64 * kKiB, 1, t.table(), 7, 3, 0, &channels), 0);
  EXPECT_TRUE(t.guardsIntact());
  EXPECT_EQ(t.at(abi::kAlgoRing, abi::kProtoLL), -1.0f);
  EXPECT_NE(t.at(abi::kAlgoRing, abi::kProtoLL128), kUntouched);  // Ring/LL128 and Simple: simulated
  EXPECT_NE(t.at(abi::kAlgoRing, abi::kProtoSimple), kUntouched);
  EXPECT_GT(t.at(abi::kAlgoRing, abi::kProtoSimple), 0.0f);
  EXPECT_EQ(t.at(abi::kAlgoTree, abi::kProtoSimple), kUntouched);  // no tree all-gather in NCCL's model
  for (int p = 0; p < 3; ++p) EXPECT_EQ(t.at(abi::kAlgoPat, p), -1.0f);
  // A collective outside the tuner's five (send/recv) and a null table are left alone.
  GuardedTable other;
  ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncSendRecv, kKiB, 1, other.table(), 7, 3, 0, &channels), 0);
  EXPECT_EQ(other.at(abi::kAlgoRing, abi::kProtoSimple), kUntouched);
  EXPECT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kKiB, 1, nullptr, 7, 3, 0, &channels), 0);
}

std::string writeTemp(const std::string& name, const std::string& text) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("braid_tuner_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(TunerPlugin, RulesOverrideTheModel) {
  const std::string rules = writeTemp("rules.conf",
                                      "# small all-reduce: Ring/LL on 3 channels\n"
                                      "allreduce,0,2048,ring,ll,3,1,8\n"
                                      "allreduce,2049,4294967295,collnet_direct,simple,5,-1,-1,-1,0\n");
  environment("dgx-a100-x1", "1M", rules.c_str());
  V5Comm comm(8, 1);
  ASSERT_EQ(comm.init_result, 0);
  GuardedTable t;
  forbidSome(t);
  int channels = 0;
  ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kKiB, 1, t.table(), 7, 3, 0, &channels), 0);
  EXPECT_EQ(t.at(abi::kAlgoRing, abi::kProtoLL), 0.0f);
  EXPECT_GT(t.at(abi::kAlgoRing, abi::kProtoSimple), 0.0f);  // the model's value elsewhere
  EXPECT_EQ(channels, 3);
  // The rule's entry is not allowed (-1): it stays -1; its channel count still applies.
  GuardedTable big;
  forbidSome(big);
  channels = 0;
  ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kMiB, 1, big.table(), 7, 3, 0, &channels), 0);
  EXPECT_EQ(big.at(abi::kAlgoCollNetDirect, abi::kProtoSimple), -1.0f);
  EXPECT_EQ(channels, 5);
  // regBuff 1 does not match the second rule's 0.
  channels = 0;
  ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kMiB, 1, big.table(), 7, 3, 1, &channels), 0);
  EXPECT_EQ(channels, 0);
  std::filesystem::remove(rules);
}

TEST(TunerPlugin, BadRulesLineIsSkippedWithAMessage) {
  const std::string rules = writeTemp("bad.conf",
                                      "allreduce,0,4294967295,ring,simple,-1,-1,-1\n"
                                      "allreduce,0,100,spiral,simple,-1,-1,-1\n");
  environment(nullptr, nullptr, rules.c_str());
  takeLog();
  V5Comm comm(8, 1);
  ASSERT_EQ(comm.init_result, 0);
  const std::vector<std::string> lines = takeLog();
  EXPECT_TRUE(logHas(lines, rules + ":2: field 4 (algorithm): 'spiral'")) << joined(lines);
  GuardedTable t;
  int channels = 0;
  ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kKiB, 1, t.table(), 7, 3, 0, &channels), 0);
  EXPECT_EQ(t.at(abi::kAlgoRing, abi::kProtoSimple), 0.0f);  // the good line applies without a topology
  EXPECT_EQ(t.at(abi::kAlgoTree, abi::kProtoSimple), kUntouched);
  std::filesystem::remove(rules);
}

TEST(TunerPlugin, RankCountMismatchIsPassThrough) {
  environment("dgx-h100-x2");
  takeLog();
  V5Comm comm(8, 1);
  ASSERT_EQ(comm.init_result, 0);
  ASSERT_NE(comm.ctx, nullptr);
  const std::vector<std::string> lines = takeLog();
  EXPECT_TRUE(logHas(lines, "has 16 GPU(s) on 2 node(s) but the communicator has 8 rank(s) on 1 node(s)"))
      << joined(lines);
  GuardedTable t;
  forbidSome(t);
  const GuardedTable before = t;
  int channels = 0;
  ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kMiB, 1, t.table(), 7, 3, 0, &channels), 0);
  EXPECT_TRUE(std::equal(std::begin(t.cells), std::end(t.cells), std::begin(before.cells)));
  EXPECT_EQ(channels, 0);
}

// finalize takes back only what init handed out: a second finalize of one context is an error, not a double free.
TEST(TunerPlugin, SecondFinalizeIsRefused) {
  environment("dgx-h100-x2");
  V5Comm comm(8, 1);  // pass-through: quick to build
  ASSERT_EQ(comm.init_result, 0);
  ASSERT_NE(comm.ctx, nullptr);
  takeLog();
  EXPECT_EQ(comm.tuner->finalize(comm.ctx), 0);
  EXPECT_EQ(comm.tuner->finalize(comm.ctx), abi::kInvalidArgument);
  EXPECT_TRUE(logHas(takeLog(), "not a live Braid tuner context"));
  comm.ctx = nullptr;
}

TEST(TunerPlugin, NoTopologyAndUnreadableTopologyArePassThrough) {
  environment(nullptr);
  takeLog();
  {
    V5Comm comm(8, 1);
    ASSERT_EQ(comm.init_result, 0);
    EXPECT_TRUE(logHas(takeLog(), "no topology"));
  }
  environment("/nonexistent/machine.yaml");
  {
    V5Comm comm(8, 1);
    ASSERT_EQ(comm.init_result, 0);
    GuardedTable t;
    int channels = 0;
    ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kMiB, 1, t.table(), 7, 3, 0, &channels), 0);
    EXPECT_EQ(t.at(abi::kAlgoRing, abi::kProtoSimple), kUntouched);
    EXPECT_TRUE(logHas(takeLog(), "/nonexistent/machine.yaml"));
  }
}

// Without BRAID_TOPOLOGY the tuner reads the NCCL topology XML NCCL_TOPO_DUMP_FILE names (one node).
TEST(TunerPlugin, NcclTopologyDumpIsTheMachineWithoutBraidTopology) {
  const std::string xml = std::string(BRAID_SHARED_DIR) + "/realcases/topo/azure-ndv4-a100-topo.xml";
  if (!std::filesystem::exists(xml)) GTEST_SKIP() << xml << " is absent";
  Result<Topology> topology = loadTopology(xml);
  ASSERT_TRUE(topology.isOk()) << topology.status().toString();
  environment(nullptr, "1M", nullptr, "model");
  setenv("NCCL_TOPO_DUMP_FILE", xml.c_str(), 1);
  takeLog();
  V5Comm comm(static_cast<size_t>(topology->numGpus()), 1);
  unsetenv("NCCL_TOPO_DUMP_FILE");
  ASSERT_EQ(comm.init_result, 0);
  const std::vector<std::string> lines = takeLog();
  EXPECT_FALSE(logHas(lines, "left as it is")) << joined(lines);
  GuardedTable t;
  int channels = 0;
  // At 1 GiB Braid's fastest is not NCCL's choice in this table (Tree/LL, the first of equal entries): with
  // BRAID_TUNER=model the table gets Braid's predictions.
  ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kGiB, 1, t.table(), 7, 3, 0, &channels), 0);
  EXPECT_NE(t.at(abi::kAlgoRing, abi::kProtoSimple), kUntouched);
  EXPECT_GT(t.at(abi::kAlgoRing, abi::kProtoSimple), 0.0f);
}

// RC-01 (an NDv2 hint file: no NVLink in it) is modelled as PCIe only; that changes every prediction, so the
// tuner says so as a warning (level 2, ncclDebugLogLevel WARN), not only at INFO.
TEST(TunerPlugin, MachineWithoutNvlinkInItsFileIsAWarning) {
  const std::string xml = std::string(BRAID_SHARED_DIR) + "/realcases/topo/azure-ndv2-v100-topo.xml";
  if (!std::filesystem::exists(xml)) GTEST_SKIP() << xml << " is absent";
  environment(xml.c_str(), "1M");
  takeLog();
  V5Comm comm(8, 1);
  ASSERT_EQ(comm.init_result, 0);
  const std::vector<std::string> lines = takeLog();
  const bool warned = std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.rfind("2 ", 0) == 0 && l.find("PCIe links only") != std::string::npos;
  });
  EXPECT_TRUE(warned) << joined(lines);
}

TEST(TunerPlugin, OlderVersionsGiveTheSameAnswers) {
  environment("dgx-a100-x1", "1M", nullptr, "model");
  void* lib = tunerLibrary();
  const auto* v5 = symbol<abi::TunerV5>(lib, "ncclTunerPlugin_v5");
  const auto* v4 = symbol<abi::TunerV4>(lib, "ncclTunerPlugin_v4");
  const auto* v3 = symbol<abi::TunerV3>(lib, "ncclTunerPlugin_v3");
  const auto* v2 = symbol<abi::TunerV2>(lib, "ncclTunerPlugin_v2");
  ASSERT_TRUE(v5 && v4 && v3 && v2);
  for (const auto* t : {v5->name, v4->name, v3->name, v2->name}) EXPECT_STREQ(t, "Braid");
  void *c5 = nullptr, *c4 = nullptr, *c3 = nullptr, *c2 = nullptr;
  ASSERT_EQ(v5->init(&c5, 1, 8, 1, captureLog, nullptr, nullptr), 0);
  ASSERT_EQ(v4->init(8, 1, captureLog, &c4), 0);
  ASSERT_EQ(v3->init(8, 1, captureLog, &c3), 0);
  ASSERT_EQ(v2->init(8, 1, captureLog, &c2), 0);
  // v2 passes no table: NCCL's choice is what NCCL's model (ncclPredict) picks, without NVLS and CollNet support.
  Result<Topology> topology = loadTopologyOrShipped("dgx-a100-x1");
  ASSERT_TRUE(topology.isOk());
  Result<NcclSystem> system = ncclSystem(*topology);
  ASSERT_TRUE(system.isOk());
  int v2_overrides = 0;
  for (uint64_t bytes : {uint64_t{1024}, 4 * kKiB, 64 * kKiB}) {
    GuardedTable t5, t4, t3;
    int ch = 0;
    ASSERT_EQ(v5->getCollInfo(c5, abi::kFuncAllReduce, bytes, 1, t5.table(), 7, 3, 0, &ch), 0);
    ASSERT_EQ(v4->getCollInfo(c4, abi::kFuncAllReduce, bytes, 1, t4.table(), 7, 3, 0, &ch), 0);
    ASSERT_EQ(v3->getCollInfo(c3, abi::kFuncAllReduce, bytes, 1, t3.table(), 7, 3, &ch), 0);
    EXPECT_TRUE(std::equal(std::begin(t5.cells), std::end(t5.cells), std::begin(t4.cells))) << bytes;
    EXPECT_TRUE(std::equal(std::begin(t5.cells), std::end(t5.cells), std::begin(t3.cells))) << bytes;
    // Grid sizes (no interpolation): Braid's fastest and NCCL's pick among Ring and Tree.
    int braid_best = -1, nccl_best = -1;
    double braid_us = 0, nccl_us = 0;
    Result<NcclPrediction> prediction = ncclPredict(*system, CollectiveKind::kAllReduce, bytes);
    ASSERT_TRUE(prediction.isOk());
    for (const NcclEstimate& e : prediction->all) {
      const int a = static_cast<int>(e.algo);
      if (e.time_us < 0 || (a != abi::kAlgoRing && a != abi::kAlgoTree)) continue;
      const int p = e.protocol == Protocol::kLL      ? abi::kProtoLL
                    : e.protocol == Protocol::kLL128 ? abi::kProtoLL128
                                                     : abi::kProtoSimple;
      const int i = a * 3 + p;
      if (nccl_best < 0 || e.time_us < nccl_us || (e.time_us == nccl_us && i < nccl_best)) {
        nccl_best = i;
        nccl_us = e.time_us;
      }
      const std::optional<double> us = expectedAllReduceUs(*topology, *system, a, p, bytes);
      ASSERT_TRUE(us.has_value());
      if (braid_best < 0 || *us < braid_us || (*us == braid_us && i < braid_best)) {
        braid_best = i;
        braid_us = *us;
      }
    }
    ASSERT_GE(braid_best, 0);
    int algorithm = -1, protocol = -1;
    ASSERT_EQ(v2->getCollInfo(c2, abi::kFuncAllReduce, bytes, 0, 0, 1, &algorithm, &protocol, &ch), 0);
    if (braid_best == nccl_best) {
      EXPECT_EQ(algorithm, -1) << bytes << ": NCCL's own choice stands";
      EXPECT_EQ(protocol, -1) << bytes;
    } else {
      EXPECT_EQ(algorithm, braid_best / 3) << bytes;
      EXPECT_EQ(protocol, braid_best % 3) << bytes;
      ++v2_overrides;
    }
  }
  std::printf("v2 overrode NCCL's choice at %d of 3 sizes\n", v2_overrides);
  EXPECT_EQ(v5->finalize(c5), 0);
  EXPECT_EQ(v4->destroy(c4), 0);
  EXPECT_EQ(v3->destroy(c3), 0);
  EXPECT_EQ(v2->destroy(c2), 0);
}

// The default policy (BRAID_TUNER unset = validated) on dgx-h100-x2: below 32 MiB Braid predicts NVLSTree/Simple
// fastest, where the NVLS emulation is not validated, so NCCL's table is left exactly as it is; BRAID_TUNER=model
// writes Braid's predictions and NVLSTree/Simple becomes the smallest entry.
TEST(TunerPlugin, DefaultPolicyKeepsNcclsChoiceWhereTheNvlsEmulationIsNotValidated) {
  auto ncclLike = [](GuardedTable& t) {
    forbidSome(t);
    t.at(abi::kAlgoTree, abi::kProtoLL128) = 115.0f;  // NCCL's choice at 1 MiB (2-node H100 log RC-50)
    t.at(abi::kAlgoNvlsTree, abi::kProtoSimple) = 130.0f;
  };
  environment("dgx-h100-x2");  // the same model (and cache entry) as AllReduceTableIsBraidsSimulationOnDgxH100x2
  {
    V5Comm comm(16, 2);
    ASSERT_EQ(comm.init_result, 0);
    for (uint64_t bytes : {64 * kKiB, kMiB, 4 * kMiB}) {
      GuardedTable t;
      ncclLike(t);
      const GuardedTable before = t;
      int channels = 0;
      ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, bytes, 1, t.table(), 7, 3, 0, &channels), 0);
      EXPECT_TRUE(std::equal(std::begin(t.cells), std::end(t.cells), std::begin(before.cells))) << bytes;
      EXPECT_EQ(channels, 0);
    }
  }
  environment("dgx-h100-x2", nullptr, nullptr, "model");
  V5Comm comm(16, 2);
  ASSERT_EQ(comm.init_result, 0);
  GuardedTable t;
  ncclLike(t);
  int channels = 0;
  ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kMiB, 1, t.table(), 7, 3, 0, &channels), 0);
  const float nvls_tree = t.at(abi::kAlgoNvlsTree, abi::kProtoSimple);
  EXPECT_NE(nvls_tree, 130.0f);
  for (int a = 0; a < 7; ++a) {
    for (int p = 0; p < 3; ++p) {
      if (t.at(a, p) >= 0 && !(a == abi::kAlgoNvlsTree && p == abi::kProtoSimple)) {
        EXPECT_GT(t.at(a, p), nvls_tree);
      }
    }
  }
}

// BRAID_TUNER=off: init succeeds (a failing init would fail NCCL's communicator) without building a model or
// reading rules, and every call leaves NCCL's table, channels and v2 choice as they are.
TEST(TunerPlugin, BraidTunerOffChangesNothing) {
  const std::string rules = writeTemp("off.conf", "allreduce,0,4294967295,ring,simple,4,-1,-1\n");
  environment("dgx-h100-x2", nullptr, rules.c_str(), "off");
  takeLog();
  {
    V5Comm comm(16, 2);
    ASSERT_EQ(comm.init_result, 0);
    ASSERT_NE(comm.ctx, nullptr);
    const std::vector<std::string> lines = takeLog();
    EXPECT_TRUE(logHas(lines, "BRAID_TUNER=off")) << joined(lines);
    EXPECT_FALSE(logHas(lines, "rule(s) from")) << joined(lines);
    GuardedTable t;
    forbidSome(t);
    const GuardedTable before = t;
    int channels = 0;
    ASSERT_EQ(comm.tuner->getCollInfo(comm.ctx, abi::kFuncAllReduce, kMiB, 1, t.table(), 7, 3, 0, &channels), 0);
    EXPECT_TRUE(std::equal(std::begin(t.cells), std::end(t.cells), std::begin(before.cells)));
    EXPECT_EQ(channels, 0);
  }
  const auto* v2 = symbol<abi::TunerV2>(tunerLibrary(), "ncclTunerPlugin_v2");
  ASSERT_NE(v2, nullptr);
  void* ctx = nullptr;
  ASSERT_EQ(v2->init(16, 2, captureLog, &ctx), 0);
  int algorithm = -1, protocol = -1, channels = 0;
  ASSERT_EQ(v2->getCollInfo(ctx, abi::kFuncAllReduce, kMiB, 1, 1, 1, &algorithm, &protocol, &channels), 0);
  EXPECT_EQ(algorithm, -1);
  EXPECT_EQ(protocol, -1);
  EXPECT_EQ(channels, 0);
  EXPECT_EQ(v2->destroy(ctx), 0);
  unsetenv("BRAID_TUNER");
  std::filesystem::remove(rules);
}

// BRAID_DEBUG=INFO: one line per decision through NCCL's logger. BRAID_DEBUG is read once per library instance,
// so this loads a copy of the library (a separate instance) with the variable set.
TEST(TunerPlugin, DebugInfoLogsEachDecision) {
  const std::filesystem::path copy =
      std::filesystem::temp_directory_path() / ("braid_tuner_" + std::to_string(::getpid()) + "_libnccl-tuner-copy.so");
  std::filesystem::copy_file(tunerLibraryPath(BRAID_NCCL_PLUGIN_DIR), copy,
                             std::filesystem::copy_options::overwrite_existing);
  setenv("BRAID_DEBUG", "INFO", 1);
  void* lib = openLibrary(copy.string());
  ASSERT_NE(lib, nullptr);
  const auto* v5 = symbol<abi::TunerV5>(lib, "ncclTunerPlugin_v5");
  ASSERT_NE(v5, nullptr);
  environment("dgx-a100-x1", "1M");
  void* ctx = nullptr;
  ASSERT_EQ(v5->init(&ctx, 1, 8, 1, captureLog, nullptr, nullptr), 0);
  takeLog();
  GuardedTable t;
  int ch = 0;
  ASSERT_EQ(v5->getCollInfo(ctx, abi::kFuncAllReduce, kKiB, 1, t.table(), 7, 3, 0, &ch), 0);
  const std::vector<std::string> lines = takeLog();
  EXPECT_TRUE(logHas(lines, "TUNER/Braid: AllReduce 1024 bytes -> ")) << joined(lines);
  EXPECT_TRUE(logHas(lines, " us (NCCL's choice kept, Braid's candidate ") ||
              logHas(lines, " us (Braid's model over NCCL's "))
      << joined(lines);
  EXPECT_EQ(v5->finalize(ctx), 0);
  unsetenv("BRAID_DEBUG");
  dlclose(lib);
  std::filesystem::remove(copy);
}

TEST(TunerPlugin, NetPluginLibraryCarriesTheTunerSymbols) {
  const std::string path = std::string(BRAID_NCCL_PLUGIN_DIR) + "/libnccl-net-braid.so";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not built";
  void* lib = openLibrary(path);
  ASSERT_NE(lib, nullptr);
  for (const char* name : {"ncclTunerPlugin_v5", "ncclTunerPlugin_v4", "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"}) {
    EXPECT_NE(dlsym(lib, name), nullptr) << name;
  }
}

std::string commandOutput(const std::string& command) {
  int status = 0;
  return braid::test::runCommand(command, &status);
}

TEST(TunerPlugin, ExportsOnlyTheTunerSymbolsAndNoSolver) {
  if (std::system("command -v nm >/dev/null 2>&1 && command -v readelf >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "nm or readelf not installed";
  }
  const std::string path = tunerLibraryPath(BRAID_NCCL_PLUGIN_DIR);
  const std::string symbols = commandOutput("nm -D --defined-only '" + path + "'");
  ASSERT_FALSE(symbols.empty());
  int found = 0;
  std::istringstream lines(symbols);
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(line.rfind(' ') + 1);
    EXPECT_EQ(name.rfind("ncclTunerPlugin_v", 0), 0u) << "exported: " << line;
    ++found;
  }
  EXPECT_EQ(found, 4);
  const std::string dynamic = commandOutput("readelf -d '" + path + "'");
  EXPECT_NE(dynamic.find("NEEDED"), std::string::npos);
  EXPECT_EQ(dynamic.find("libz3"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libglpk"), std::string::npos) << dynamic;
}

}  // namespace
}  // namespace braid
