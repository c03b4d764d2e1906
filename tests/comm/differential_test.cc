// Differential tests (issue 5 acceptance 1): every classical algorithm, and every algorithm synthesized for the
// shipped 8- and 16-GPU topologies, runs through the Communicator on the threads transport with real data and
// equals a naive reference (comm_test_util.h) for every datatype and op, in every mode the algorithm declares,
// for counts 0, 1, 7, 1000003 and 10556587, on 3, 5, 8 and 16 ranks (3 and 5: classical only — no shipped
// topology has 3 or 5 GPUs).
//
// Coverage per algorithm: counts 0, 1 and 7 with the full datatype x op matrix; count 1000003 in every
// declared mode and count 10556587 in one mode, each with one (datatype, op) pair that rotates over the
// algorithms of a suite so that every datatype and every op runs at the large counts too (the data path does
// not depend on the datatype except through the element size, which the rotation also covers). All-gather,
// reduce-scatter and all-to-all take `count` as the size of the whole buffer: each rank piece holds
// ceil(count / n) elements, so uneven counts stay uneven. A guard zone after every receive buffer must stay
// untouched (nothing written past a user buffer).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "braid/classic.h"
#include "braid/synthesize.h"
#include "braid/topology.h"
#include "comm/comm_test_util.h"

namespace braid {
namespace {

using testing::expectedElement;
using testing::inputPeriod;
using testing::inputValue;
using testing::movedWord;
using testing::runRanks;
using testing::storeValue;

constexpr uint64_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xA5;

bool reduces(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter || k == CollectiveKind::kReduce;
}
bool pieced(CollectiveKind k) {
  return k == CollectiveKind::kAllGather || k == CollectiveKind::kReduceScatter || k == CollectiveKind::kAllToAll;
}

struct Run {
  uint64_t count = 0;
  bool in_place = false;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

// One call on one rank: fills, calls, checks. Returns a description of the first mismatch.
Status runOne(Communicator& comm, const Algorithm& alg, const Run& run) {
  const int n = comm.size();
  const int rank = comm.rank();
  const CollectiveKind kind = alg.collective;
  const int root = alg.root;
  const uint64_t esz = dataTypeSize(run.type);
  const uint64_t piece = pieced(kind) ? (run.count + n - 1) / n : run.count;
  // Elements of the send and receive buffers of this rank.
  uint64_t in_elems = piece;
  uint64_t out_elems = piece;
  if (kind == CollectiveKind::kAllGather) out_elems = piece * n;
  if (kind == CollectiveKind::kReduceScatter) in_elems = piece * n;
  if (kind == CollectiveKind::kAllToAll) in_elems = out_elems = piece * n;
  // In place: one buffer, the larger one.
  const uint64_t big = std::max(in_elems, out_elems);
  std::vector<uint8_t> send_buf(run.in_place ? 0 : in_elems * esz + kGuard, kGuardByte);
  std::vector<uint8_t> recv_buf((run.in_place ? big : out_elems) * esz + kGuard, kGuardByte);
  std::fill(recv_buf.begin(), recv_buf.end() - kGuard, 0xCD);
  uint8_t* recv = recv_buf.data();
  uint8_t* send = run.in_place ? recv : send_buf.data();
  // Input position inside the in-place buffer.
  uint64_t in_offset = 0;
  if (run.in_place && kind == CollectiveKind::kAllGather) in_offset = static_cast<uint64_t>(rank) * piece;
  send += in_offset * esz;
  if (run.in_place && kind == CollectiveKind::kReduceScatter) recv += static_cast<uint64_t>(rank) * piece * esz;
  const bool fills_input = kind != CollectiveKind::kBroadcast || rank == root;
  // Reductions: inputs repeat with inputPeriod(op) (comm_test_util.h), so one period of input and of the
  // expected result is computed element by element and then tiled / compared.
  const uint64_t period = inputPeriod(run.op);
  std::vector<uint8_t> input_period(period * esz);
  std::vector<uint8_t> expected_period(period * esz);
  if (reduces(kind)) {
    for (uint64_t i = 0; i < period; ++i) {
      storeValue(input_period.data() + i * esz, run.type, inputValue(rank, i, run.op, run.type));
      expectedElement(expected_period.data() + i * esz, run.type, run.op, n, i);
    }
  }
  if (fills_input) {
    for (uint64_t i = 0; i < in_elems; ++i) {
      if (reduces(kind)) {
        std::memcpy(send + i * esz, input_period.data() + (i % period) * esz, esz);
      } else {
        const uint64_t word = movedWord(rank, i);
        std::memcpy(send + i * esz, &word, esz);
      }
    }
  }
  Status status;
  switch (kind) {
    case CollectiveKind::kAllReduce: status = comm.allReduce(send, recv, run.count, run.type, run.op); break;
    case CollectiveKind::kAllGather: status = comm.allGather(send, recv, piece, run.type); break;
    case CollectiveKind::kReduceScatter: status = comm.reduceScatter(send, recv, piece, run.type, run.op); break;
    case CollectiveKind::kAllToAll: status = comm.allToAll(send, recv, piece, run.type); break;
    case CollectiveKind::kBroadcast: status = comm.broadcast(send, recv, run.count, run.type, root); break;
    case CollectiveKind::kReduce: status = comm.reduce(send, recv, run.count, run.type, run.op, root); break;
    default: return unsupported("custom collective");
  }
  const std::string what =
      fmt::format("{} '{}' n={} count={} {} {} {}", collectiveName(kind), alg.name, n, run.count,
                  run.in_place ? "in-place" : "out-of-place", dataTypeName(run.type), reduceOpName(run.op));
  if (!status.isOk()) return Status(status.code(), what + ": " + status.message());
  // Guard zones.
  for (uint64_t g = recv_buf.size() - kGuard; g < recv_buf.size(); ++g) {
    if (recv_buf[g] != kGuardByte) return internalError(what + ": wrote past the receive buffer");
  }
  if (!run.in_place) {
    for (uint64_t g = send_buf.size() - kGuard; g < send_buf.size(); ++g) {
      if (send_buf[g] != kGuardByte) return internalError(what + ": wrote past the send buffer");
    }
  }
  if (kind == CollectiveKind::kReduce && rank != root) return Status::ok();  // recv unspecified off the root
  const uint64_t rs_base = kind == CollectiveKind::kReduceScatter ? static_cast<uint64_t>(rank) * piece : 0;
  for (uint64_t j = 0; j < out_elems; ++j) {
    const uint8_t* expected = nullptr;
    uint64_t word = 0;
    switch (kind) {
      case CollectiveKind::kAllReduce:
      case CollectiveKind::kReduce:
      case CollectiveKind::kReduceScatter: expected = expected_period.data() + ((rs_base + j) % period) * esz; break;
      case CollectiveKind::kAllGather: word = movedWord(static_cast<int>(j / piece), j % piece); break;
      case CollectiveKind::kAllToAll:
        word = movedWord(static_cast<int>(j / piece), static_cast<uint64_t>(rank) * piece + j % piece);
        break;
      case CollectiveKind::kBroadcast: word = movedWord(root, j); break;
      default: break;
    }
    if (expected == nullptr) expected = reinterpret_cast<const uint8_t*>(&word);
    if (std::memcmp(expected, recv + j * esz, esz) != 0) {
      return internalError(fmt::format("{}: rank {} element {} differs from the reference", what, rank, j));
    }
  }
  return Status::ok();
}

struct Suite {
  std::string name;
  int num_ranks = 0;
  std::vector<Algorithm> algorithms;
};

std::vector<bool> modes(const Algorithm& a) {
  std::vector<bool> out;
  if (a.out_of_place) out.push_back(false);
  if (a.in_place) out.push_back(true);
  return out;
}

// The runs of algorithm number `index` of a suite (see the top of the file).
std::vector<Run> runsFor(const Algorithm& alg, int index) {
  std::vector<Run> runs;
  const std::vector<ReduceOp> ops =
      reduces(alg.collective)
          ? std::vector<ReduceOp>{ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}
          : std::vector<ReduceOp>{ReduceOp::kSum};
  for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}}) {
    for (bool in_place : modes(alg)) {
      for (int t = 0; t < kNumDataTypes; ++t) {
        for (ReduceOp op : ops) runs.push_back(Run{count, in_place, static_cast<DataType>(t), op});
      }
    }
  }
  const DataType big_type = static_cast<DataType>(index % kNumDataTypes);
  const ReduceOp big_op = ops[static_cast<size_t>(index) % ops.size()];
  for (bool in_place : modes(alg)) runs.push_back(Run{1000003, in_place, big_type, big_op});
  const auto m = modes(alg);
  runs.push_back(Run{10556587, m[static_cast<size_t>(index) % m.size()], big_type, big_op});
  return runs;
}

void runSuite(const Suite& suite) {
  ASSERT_FALSE(suite.algorithms.empty()) << suite.name;
  for (size_t a = 0; a < suite.algorithms.size(); ++a) {
    const Algorithm& alg = suite.algorithms[a];
    // BRAID_TEST_ONLY=<substring of an algorithm name> runs only those (for debugging one algorithm).
    if (const char* only = std::getenv("BRAID_TEST_ONLY"); only != nullptr && alg.name.find(only) == std::string::npos)
      continue;
    CommOptions options;
    options.transport = "threads";
    options.algorithms = {alg};
    options.allow_fallback = false;
    options.timeout_s = 60;
    const std::vector<Run> runs = runsFor(alg, static_cast<int>(a));
    const auto start = std::chrono::steady_clock::now();
    const Status status = runRanks(suite.num_ranks, options, [&](Communicator& comm) -> Status {
      // The forced algorithm is what runs.
      const bool in_place = !alg.out_of_place;
      Result<AlgorithmChoice> choice = comm.choose(alg.collective, 1 << 20, in_place);
      if (alg.collective != CollectiveKind::kBroadcast && alg.collective != CollectiveKind::kReduce) {
        if (!choice.isOk()) return choice.status();
        if (choice->algorithm != alg.name || choice->source != "forced")
          return internalError(
              fmt::format("chose '{}' ({}), not the forced '{}'", choice->algorithm, choice->source, alg.name));
      }
      for (const Run& run : runs) BRAID_RETURN_IF_ERROR(runOne(comm, alg, run));
      return Status::ok();
    });
    EXPECT_TRUE(status.isOk()) << suite.name << " algorithm " << a << " '" << alg.name << "': " << status.toString();
    if (std::getenv("BRAID_TEST_VERBOSE") != nullptr) {
      std::printf("%s: %s (%s) %zu calls %.2f s\n", suite.name.c_str(), alg.name.c_str(),
                  collectiveName(alg.collective), runs.size(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
}

// What an algorithm does, without its name and provenance: the same program built for two topologies is run
// once.
std::string programKey(const Algorithm& a) {
  Algorithm copy = a;
  copy.name.clear();
  copy.provenance = Provenance{};
  copy.notes.clear();
  return writeAlgorithmJson(copy);
}

// Classical algorithms for n ranks: every ClassicAlgo x collective that builds, in each mode it is built for,
// with and without the topology (ring order follows NVLink with one), deduplicated by their JSON.
std::vector<Algorithm> classicalAlgorithms(int n, const Topology* topology) {
  std::vector<Algorithm> out;
  std::set<std::string> seen;
  for (ClassicAlgo algo :
       {ClassicAlgo::kRing, ClassicAlgo::kMultiRing, ClassicAlgo::kDirect, ClassicAlgo::kRecursiveDoubling,
        ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kPairwise, ClassicAlgo::kHierarchical}) {
    for (CollectiveKind kind : classicCollectives(algo)) {
      for (bool in_place : {false, true}) {
        ClassicRequest request;
        request.algo = algo;
        request.spec.kind = kind;
        request.spec.num_ranks = n;
        request.spec.in_place = in_place;
        request.spec.chunk_factor = 0;
        request.spec.root = (kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce) ? n / 2 : 0;
        request.topology = topology;
        Result<Algorithm> built = buildClassic(request);
        if (!built.isOk()) continue;  // e.g. hierarchical without nodes
        if (!seen.insert(programKey(*built)).second) continue;
        out.push_back(std::move(built).value());
      }
    }
  }
  return out;
}

std::vector<std::string> shippedTopologies(int gpus) {
  std::vector<std::string> out;
  for (const char* name :
       {"dgx1-v100", "dgx-a100-x1", "dgx-h100-x1", "ndv2-x1", "dgx2-x1", "dgx-a100-x2", "dgx-h100-x2", "ndv2-x2"}) {
    Result<Topology> t = loadTopologyOrShipped(name);
    if (t.isOk() && t->numGpus() == gpus) out.push_back(name);
  }
  return out;
}

TEST(Differential, Classical3Ranks) { runSuite(Suite{"classical n=3", 3, classicalAlgorithms(3, nullptr)}); }
TEST(Differential, Classical5Ranks) { runSuite(Suite{"classical n=5", 5, classicalAlgorithms(5, nullptr)}); }

void classicalOnTopologies(int gpus) {
  const auto names = shippedTopologies(gpus);
  ASSERT_GE(names.size(), 4u) << "shipped " << gpus << "-GPU topologies";
  std::vector<Algorithm> all = classicalAlgorithms(gpus, nullptr);
  std::set<std::string> seen;
  for (const Algorithm& a : all) seen.insert(programKey(a));
  for (const std::string& name : names) {
    Result<Topology> topology = loadTopologyOrShipped(name);
    ASSERT_TRUE(topology.isOk());
    for (Algorithm& a : classicalAlgorithms(gpus, &*topology)) {
      if (seen.insert(programKey(a)).second) all.push_back(std::move(a));
    }
  }
  runSuite(Suite{fmt::format("classical n={}", gpus), gpus, all});
}

TEST(Differential, Classical8Ranks) { classicalOnTopologies(8); }
TEST(Differential, Classical16Ranks) { classicalOnTopologies(16); }

void synthesizedOnTopologies(int gpus) {
  const auto names = shippedTopologies(gpus);
  ASSERT_GE(names.size(), 4u);
  std::vector<Algorithm> all;
  for (const std::string& name : names) {
    Result<Topology> topology = loadTopologyOrShipped(name);
    ASSERT_TRUE(topology.isOk());
    for (CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce,
                                CollectiveKind::kAllToAll}) {
      SynthesisRequest request;
      request.topology = &*topology;
      request.collective = kind;
      request.time_limit_s = 20;
      Result<SynthesisResult> result = synthesize(request);
      ASSERT_TRUE(result.isOk()) << name << " " << collectiveName(kind) << ": " << result.status().toString();
      result->algorithm.name = fmt::format("{} ({})", result->algorithm.name, name);
      all.push_back(std::move(result->algorithm));
    }
  }
  runSuite(Suite{fmt::format("synthesized n={}", gpus), gpus, all});
}

TEST(Differential, Synthesized8Ranks) { synthesizedOnTopologies(8); }
TEST(Differential, Synthesized16Ranks) { synthesizedOnTopologies(16); }

}  // namespace
}  // namespace braid
