// libbraid_nccl_pareto.so (runtime/nccl/shim/pareto/), dlopened and looked up as the shim does: the Pareto set of a
// topology as the JSON the shim loads (every window in order without gaps, each Braid window's MSCCL XML verifying and
// carrying its window), the same text for the same request, errors naming what is wrong, the budget bounding the
// time; and the shim's decisions with that set (decision.h: ShimAlgorithms::fromParetoSet, decide()).
// The topology is tests/data/shim/nvlink-4g.yaml (4 GPUs, NVLink between every pair): its set takes about a second.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "shim/decision.h"
#include "shim/pareto_abi.h"

namespace braid::nccl_shim {
namespace {

namespace fs = std::filesystem;

const std::string kCompanion = BRAID_PARETO_COMPANION;
const std::string kTopology = std::string(BRAID_SOURCE_DIR) + "/tests/data/shim/nvlink-4g.yaml";
constexpr const char* kAllFour = "allreduce,allgather,reducescatter,alltoall";

braidNcclParetoSet_v1_fn companion() {
  static braidNcclParetoSet_v1_fn fn = [] {
    void* handle = dlopen(kCompanion.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open, as the shim keeps it
    if (handle == nullptr) return braidNcclParetoSet_v1_fn{nullptr};
    return reinterpret_cast<braidNcclParetoSet_v1_fn>(
        dlvsym(handle, BRAID_NCCL_PARETO_SYMBOL, BRAID_NCCL_PARETO_VERSION));
  }();
  return fn;
}

struct Answer {
  int code = -1;
  std::string set;
  std::string error;
  double seconds = 0;
};

Answer ask(const char* topology, int nranks, const char* collectives, double time_limit_s) {
  Answer a;
  braidNcclParetoRequest_v1 request{topology, nranks, collectives, time_limit_s};
  char* set = nullptr;
  char* error = nullptr;
  const auto start = std::chrono::steady_clock::now();
  a.code = companion()(&request, &set, &error);
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (set != nullptr) a.set = set;
  if (error != nullptr) a.error = error;
  std::free(set);
  std::free(error);
  return a;
}

// The set for nvlink-4g, all four collectives, computed once for the tests below.
const Answer& fourGpuSet() {
  static const Answer answer = ask(kTopology.c_str(), 4, kAllFour, 120);
  return answer;
}

#define REQUIRE_COMPANION() ASSERT_NE(companion(), nullptr) << "cannot load " << kCompanion << "'s function"

// Windows in order from 0 to unlimited, each one byte after the previous; every Braid window's algorithm parses,
// verifies, is the collective for 4 ranks and carries the window.
TEST(ShimPareto, EveryCollectiveCoversEverySize) {
  REQUIRE_COMPANION();
  const Answer& a = fourGpuSet();
  ASSERT_EQ(a.code, 0) << a.error;
  EXPECT_LT(a.seconds, 120);
  const nlohmann::json set = nlohmann::json::parse(a.set);
  EXPECT_EQ(set.at("format"), "braid-nccl-pareto-set/1");
  EXPECT_EQ(set.at("topology"), kTopology);
  EXPECT_EQ(set.at("ranks"), 4);
  EXPECT_TRUE(set.at("skipped").empty()) << set.at("skipped").dump();
  const std::vector<std::string> order = {"allreduce", "allgather", "reducescatter", "alltoall"};
  ASSERT_EQ(set.at("collectives").size(), order.size());
  int braid_windows = 0;
  for (size_t c = 0; c < order.size(); ++c) {
    const nlohmann::json& coll = set.at("collectives")[c];
    EXPECT_EQ(coll.at("collective"), order[c]);
    const nlohmann::json& windows = coll.at("windows");
    ASSERT_FALSE(windows.empty()) << order[c];
    uint64_t next = 0;
    for (const nlohmann::json& w : windows) {
      SCOPED_TRACE(order[c] + " window " + w.dump().substr(0, 200));
      const uint64_t lo = w.at("min_bytes").get<uint64_t>();
      const uint64_t hi = w.at("max_bytes").get<uint64_t>();
      EXPECT_EQ(lo, next);
      EXPECT_LE(lo, hi);
      next = hi + 1;  // wraps to 0 after the last window
      EXPECT_FALSE(w.at("source").get<std::string>().empty());
      if (w.at("nccl").get<bool>()) {
        EXPECT_FALSE(w.contains("msccl_xml"));
        continue;
      }
      ++braid_windows;
      Result<Algorithm> algorithm = readMscclXml(w.at("msccl_xml").get<std::string>(), "window");
      ASSERT_TRUE(algorithm.isOk()) << algorithm.status().toString();
      EXPECT_EQ(collectiveName(algorithm->collective), order[c]);
      EXPECT_EQ(algorithm->num_ranks, 4);
      EXPECT_EQ(algorithm->min_bytes, lo);
      EXPECT_EQ(algorithm->max_bytes, hi);
      EXPECT_TRUE(algorithm->out_of_place);
      const VerifyReport report = verify(*algorithm);
      EXPECT_TRUE(report.ok) << report.toString();
    }
    EXPECT_EQ(windows.back().at("max_bytes").get<uint64_t>(), kUnlimitedBytes);
  }
  EXPECT_GT(braid_windows, 0);
}

// Nothing in the set depends on the wall clock here (each synthesis ends well within its limit: no clock-cut note),
// so a second request gives the same text. The shim does not rely on this: rank 0 sends its text to the others.
TEST(ShimPareto, SameRequestSameText) {
  REQUIRE_COMPANION();
  const Answer& first = fourGpuSet();
  ASSERT_EQ(first.code, 0) << first.error;
  const Answer second = ask(kTopology.c_str(), 4, kAllFour, 120);
  ASSERT_EQ(second.code, 0) << second.error;
  for (const Answer* a : {&first, &second}) {
    const nlohmann::json set = nlohmann::json::parse(a->set);  // kept alive for the loop (at() returns into it)
    for (const nlohmann::json& c : set.at("collectives")) {
      for (const nlohmann::json& note : c.at("notes")) {
        ASSERT_EQ(note.get<std::string>().find("wall-clock limit"), std::string::npos)
            << "a synthesis was cut by the clock, so the set may differ: " << note;
      }
    }
  }
  EXPECT_EQ(first.set, second.set);
}

TEST(ShimPareto, BadRequestsNameWhatIsWrong) {
  REQUIRE_COMPANION();
  Answer a = ask(kTopology.c_str(), 8, "allreduce", 5);
  EXPECT_EQ(a.code, static_cast<int>(StatusCode::kInvalidArgument));
  EXPECT_NE(a.error.find("has 4 GPUs, not 8 (the communicator's rank count)"), std::string::npos) << a.error;
  EXPECT_TRUE(a.set.empty());
  a = ask("no-such-topology-here", 4, "allreduce", 5);
  EXPECT_EQ(a.code, static_cast<int>(StatusCode::kNotFound)) << a.error;
  EXPECT_NE(a.error.find("no-such-topology-here"), std::string::npos) << a.error;
  a = ask(kTopology.c_str(), 4, "allreduce, bcast", 5);
  EXPECT_EQ(a.code, static_cast<int>(StatusCode::kInvalidArgument));
  EXPECT_NE(a.error.find("'bcast' is not one of allreduce, allgather, reducescatter, alltoall"), std::string::npos)
      << a.error;
  a = ask(kTopology.c_str(), 4, " , ", 5);
  EXPECT_EQ(a.code, static_cast<int>(StatusCode::kInvalidArgument));
  EXPECT_NE(a.error.find("names none"), std::string::npos) << a.error;
  for (double limit : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    a = ask(kTopology.c_str(), 4, "allreduce", limit);
    EXPECT_EQ(a.code, static_cast<int>(StatusCode::kInvalidArgument)) << limit;
    EXPECT_NE(a.error.find("not a positive number of seconds"), std::string::npos) << a.error;
  }
  a = ask(nullptr, 4, "allreduce", 5);
  EXPECT_EQ(a.code, static_cast<int>(StatusCode::kInvalidArgument));
  EXPECT_EQ(a.error, "topology: none given");
  a = ask(kTopology.c_str(), 0, "allreduce", 5);
  EXPECT_EQ(a.code, static_cast<int>(StatusCode::kInvalidArgument));
  // No request, and no pointers to answer through: a code, nothing written, nothing thrown.
  char* error = nullptr;
  EXPECT_EQ(companion()(nullptr, nullptr, &error), static_cast<int>(StatusCode::kInvalidArgument));
  ASSERT_NE(error, nullptr);
  EXPECT_STREQ(error, "no request");
  std::free(error);
  braidNcclParetoRequest_v1 request{kTopology.c_str(), 8, "allreduce", 5};
  EXPECT_EQ(companion()(&request, nullptr, nullptr), static_cast<int>(StatusCode::kInvalidArgument));
}

// dgx-a100-x2 (16 GPUs, two nodes) takes seconds per collective; a budget of 1 s ends the work within about a second
// (at most one simulated candidate, or one solver limit cut to the time left, beyond it). Whatever did not finish is
// named: a set with "skipped" entries, or kTimeout when no collective finished.
TEST(ShimPareto, TheBudgetBoundsTheTime) {
  REQUIRE_COMPANION();
  const Answer a = ask("dgx-a100-x2", 16, kAllFour, 1.0);
  EXPECT_LT(a.seconds, 1.0 + 5.0);
  if (a.code == 0) {
    const nlohmann::json set = nlohmann::json::parse(a.set);
    ASSERT_FALSE(set.at("skipped").empty()) << "all four collectives of dgx-a100-x2 within 1 s";
    for (const nlohmann::json& s : set.at("skipped")) {
      const std::string why = s.get<std::string>();
      EXPECT_TRUE(why.find("deadline passed") != std::string::npos || why.find("budget of 1 s") != std::string::npos)
          << why;
    }
  } else {
    EXPECT_EQ(a.code, static_cast<int>(StatusCode::kTimeout)) << a.error;
    EXPECT_NE(a.error.find("no Pareto set for 16 on dgx-a100-x2"), std::string::npos) << a.error;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The shim's decisions with the set

// A power of two inside [lo, hi] of at least 4 KiB (so that every 4-rank algorithm's chunks split it), or 0.
uint64_t sizeInside(uint64_t lo, uint64_t hi) {
  for (uint64_t s = 4096; s != 0 && s <= hi; s <<= 1) {
    if (s >= lo) return s;
  }
  return 0;
}

CallArgs outOfPlaceCall(const std::string& collective, uint64_t bytes, int nranks) {
  CallArgs args;
  args.send = reinterpret_cast<const void*>(uintptr_t{1} << 40);
  args.recv = reinterpret_cast<const void*>(uintptr_t{2} << 40);
  args.nccl_type = 7;  // ncclFloat32
  const uint64_t elements = bytes / 4;
  if (collective == "allreduce") {
    args.call = ShimCall::kAllReduce;
    args.nccl_op = 0;
    args.count = elements;
  } else if (collective == "allgather") {
    args.call = ShimCall::kAllGather;
    args.count = elements / nranks;  // nccl-tests bytes: the gathered output
  } else if (collective == "reducescatter") {
    args.call = ShimCall::kReduceScatter;
    args.nccl_op = 0;
    args.count = elements / nranks;  // nccl-tests bytes: the input
  } else {
    args.call = ShimCall::kAllToAll;
    args.count = elements / nranks;  // per peer
  }
  return args;
}

// Every window's sizes go where the set says: Braid windows to their algorithm (origin BRAID_TOPOLOGY and the
// window's source), NCCL's windows to NCCL; the set counts one algorithm per Braid window and one note per NCCL window.
TEST(ShimPareto, DecisionsFollowTheWindows) {
  REQUIRE_COMPANION();
  const Answer& a = fourGpuSet();
  ASSERT_EQ(a.code, 0) << a.error;
  std::unique_ptr<ShimAlgorithms> pareto = ShimAlgorithms::fromParetoSet(a.set);
  EXPECT_TRUE(pareto->warnings().empty()) << pareto->warnings().front();
  std::unique_ptr<ShimAlgorithms> none = ShimAlgorithms::load("", "");
  const nlohmann::json set = nlohmann::json::parse(a.set);
  size_t braid_windows = 0, nccl_windows = 0, checked = 0;
  for (const nlohmann::json& coll : set.at("collectives")) {
    const std::string name = coll.at("collective");
    for (const nlohmann::json& w : coll.at("windows")) {
      const bool nccl = w.at("nccl").get<bool>();
      (nccl ? nccl_windows : braid_windows) += 1;
      const uint64_t size = sizeInside(w.at("min_bytes").get<uint64_t>(), w.at("max_bytes").get<uint64_t>());
      if (size == 0) continue;
      ++checked;
      SCOPED_TRACE(name + " at " + std::to_string(size) + " bytes: " + w.at("source").get<std::string>());
      CommView view;
      view.known = true;
      view.rank = 1;
      view.nranks = 4;
      view.pareto = pareto.get();
      const Decision d = decide(none.get(), outOfPlaceCall(name, size, 4), view, 0);
      EXPECT_EQ(d.bytes, size);
      if (nccl) {
        EXPECT_FALSE(d.braid());
        EXPECT_NE(d.reason.find("no Braid algorithm for 4 ranks at"), std::string::npos) << d.reason;
        continue;
      }
      ASSERT_TRUE(d.braid()) << d.reason;
      const Algorithm expected = readMscclXml(w.at("msccl_xml").get<std::string>(), "window").value();
      EXPECT_EQ(d.candidate->algorithm.name, expected.name);
      EXPECT_EQ(d.candidate->algorithm.protocol, expected.protocol);
      EXPECT_EQ(d.candidate->source, "BRAID_TOPOLOGY " + w.at("source").get<std::string>());
      EXPECT_EQ(d.candidate->window_min, w.at("min_bytes").get<uint64_t>());
      ASSERT_NE(d.plan, nullptr);
      const std::string line = logText(outOfPlaceCall(name, size, 4), view, d);
      EXPECT_NE(line.find("-> braid " + expected.name + " (BRAID_TOPOLOGY "), std::string::npos) << line;
    }
  }
  EXPECT_GE(checked, braid_windows);  // each Braid window holds a power of two of at least 4 KiB
  EXPECT_EQ(pareto->size(), braid_windows);
  EXPECT_EQ(pareto->notes().size(), nccl_windows);
  EXPECT_TRUE(pareto->servesRanks(4));
  EXPECT_FALSE(pareto->servesRanks(8));
  // Another rank count: the set is for 4 ranks.
  CommView eight;
  eight.known = true;
  eight.rank = 0;
  eight.nranks = 8;
  eight.pareto = pareto.get();
  const Decision d = decide(none.get(), outOfPlaceCall("allreduce", 1 << 20, 8), eight, 0);
  EXPECT_FALSE(d.braid());
  EXPECT_EQ(d.reason, "no Braid algorithm for 8 ranks at 1 MiB out-of-place");
}

// BRAID_ALGO_DIR's algorithm comes before the Pareto set (as in the communicator); where it has none, the set serves.
TEST(ShimPareto, FilesComeBeforeTheSet) {
  REQUIRE_COMPANION();
  const Answer& a = fourGpuSet();
  ASSERT_EQ(a.code, 0) << a.error;
  const fs::path dir = fs::temp_directory_path() / ("braid_shim_pareto_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ClassicRequest request;
  request.algo = ClassicAlgo::kRing;
  request.spec.kind = CollectiveKind::kAllReduce;
  request.spec.num_ranks = 4;
  request.spec.chunk_factor = 0;
  Result<Algorithm> ring = buildClassic(request);
  ASSERT_TRUE(ring.isOk()) << ring.status().toString();
  std::ofstream(dir / "ring.xml") << writeMscclXml(*ring);
  std::unique_ptr<ShimAlgorithms> files = ShimAlgorithms::load(dir.string(), "");
  fs::remove_all(dir);
  ASSERT_EQ(files->size(), 1u);
  std::unique_ptr<ShimAlgorithms> pareto = ShimAlgorithms::fromParetoSet(a.set);
  CommView view;
  view.known = true;
  view.rank = 0;
  view.nranks = 4;
  view.pareto = pareto.get();
  const Decision reduce = decide(files.get(), outOfPlaceCall("allreduce", 1 << 20, 4), view, 0);
  ASSERT_TRUE(reduce.braid()) << reduce.reason;
  EXPECT_EQ(reduce.candidate->algorithm.name, ring->name);
  EXPECT_EQ(reduce.candidate->source.rfind("BRAID_ALGO_DIR ", 0), 0u) << reduce.candidate->source;
  const Decision gather = decide(files.get(), outOfPlaceCall("allgather", 1 << 20, 4), view, 0);
  ASSERT_TRUE(gather.braid()) << gather.reason;
  EXPECT_EQ(gather.candidate->source.rfind("BRAID_TOPOLOGY ", 0), 0u) << gather.candidate->source;
  // Without the set, the all-gather goes to NCCL, naming all three sources when nothing is loaded at all.
  view.pareto = nullptr;
  EXPECT_FALSE(decide(files.get(), outOfPlaceCall("allgather", 1 << 20, 4), view, 0).braid());
  std::unique_ptr<ShimAlgorithms> none = ShimAlgorithms::load("", "");
  EXPECT_EQ(decide(none.get(), outOfPlaceCall("allgather", 1 << 20, 4), view, 0).reason,
            "no Braid algorithms loaded (BRAID_ALGO_DIR, MSCCL_XML_FILES, BRAID_TOPOLOGY)");
}

// Text that is not a set is one warning and no algorithm; a window whose algorithm is broken or not its window's is
// skipped with one warning naming it; skipped collectives become notes.
TEST(ShimPareto, MalformedSetsAreWarnings) {
  for (const std::string& text : {std::string("not json"), std::string("[1, 2]"), std::string("{\"format\": \"x\"}"),
                                  std::string("{\"format\": \"braid-nccl-pareto-set/1\", \"collectives\": 3}")}) {
    std::unique_ptr<ShimAlgorithms> set = ShimAlgorithms::fromParetoSet(text);
    EXPECT_EQ(set->size(), 0u) << text;
    ASSERT_EQ(set->warnings().size(), 1u) << text;
    EXPECT_EQ(set->warnings()[0].rfind("BRAID_TOPOLOGY: the Pareto set is not braid-nccl-pareto-set/1 JSON: ", 0), 0u)
        << set->warnings()[0];
  }
  ClassicRequest request;
  request.spec.kind = CollectiveKind::kAllGather;
  request.spec.num_ranks = 4;
  request.spec.chunk_factor = 0;
  Algorithm ring = buildClassic(request).value();
  ring.min_bytes = 0;
  ring.max_bytes = 1023;
  nlohmann::json set = {
      {"format", "braid-nccl-pareto-set/1"},
      {"topology", "t"},
      {"ranks", 4},
      {"collectives",
       {{{"collective", "allgather"},
         {"windows",
          {{{"min_bytes", 0},
            {"max_bytes", 1023},
            {"nccl", false},
            {"source", "good"},
            {"msccl_xml", writeMscclXml(ring)}},
           {{"min_bytes", 1024},
            {"max_bytes", 4095},
            {"nccl", false},
            {"source", "shifted"},
            {"msccl_xml", writeMscclXml(ring)}},
           {{"min_bytes", 4096}, {"max_bytes", 8191}, {"nccl", false}, {"source", "broken"}, {"msccl_xml", "<algo"}},
           {{"min_bytes", 8192}, {"max_bytes", kUnlimitedBytes}, {"nccl", true}, {"source", "-"}}}},
         {"notes", nlohmann::json::array()}}}},
      {"skipped", {"alltoall: the budget of 1 s was spent before it started"}}};
  std::unique_ptr<ShimAlgorithms> loaded = ShimAlgorithms::fromParetoSet(set.dump());
  EXPECT_EQ(loaded->size(), 1u);
  ASSERT_EQ(loaded->warnings().size(), 2u);
  EXPECT_NE(loaded->warnings()[0].find("BRAID_TOPOLOGY: allgather [1 KiB, 4095 B] (shifted) skipped: algorithm "),
            std::string::npos)
      << loaded->warnings()[0];
  EXPECT_NE(loaded->warnings()[0].find("not its window's"), std::string::npos) << loaded->warnings()[0];
  EXPECT_EQ(loaded->warnings()[1].rfind("BRAID_TOPOLOGY: allgather [4 KiB, 8191 B] (broken) skipped: ", 0), 0u)
      << loaded->warnings()[1];
  ASSERT_EQ(loaded->notes().size(), 2u);
  EXPECT_EQ(loaded->notes()[0],
            "BRAID_TOPOLOGY: allgather [8 KiB, unlimited] left to NCCL (its own choice is predicted faster)");
  EXPECT_EQ(loaded->notes()[1],
            "BRAID_TOPOLOGY: no Pareto set for alltoall: the budget of 1 s was spent before it started");
  EXPECT_NE(loaded->summary().find("BRAID_TOPOLOGY allgather 4 ranks " + ring.name + " (good)"), std::string::npos)
      << loaded->summary();
}

}  // namespace
}  // namespace braid::nccl_shim
