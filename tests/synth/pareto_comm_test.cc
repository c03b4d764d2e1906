// The communicator's Pareto set for a topology: synthesized at init through braid_pareto (comm/pareto/), computed
// by a caller's ParetoSynthesizer, or absent (no synthesizer installed: a warning, then BRAID_ALGO_DIR and the
// classical rule). It lives with the synthesizer tests because synthesis leaves helper threads in the process,
// and comm_tests forks processes.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>

#include "braid/classic.h"
#include "braid/pareto.h"
#include "comm/comm_test_util.h"
#include "common/log.h"

namespace braid {
namespace {

using testing::runRanks;

/// all-reduce (sum) of rank-and-position-dependent floats on every rank; the expected sum is computed here.
Status checkAllReduce(Communicator& comm, size_t count) {
  std::vector<float> send(count), recv(count);
  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((comm.rank() * 7 + i) % 13);
  BRAID_RETURN_IF_ERROR(comm.allReduce(send.data(), recv.data(), count, DataType::kFloat32, ReduceOp::kSum));
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < comm.size(); ++r) expected += static_cast<float>((r * 7 + i) % 13);
    if (recv[i] != expected) return internalError(fmt::format("element {}: {} != {}", i, recv[i], expected));
  }
  return Status::ok();
}

TEST(Communicator, ParetoSetForATopology) {
  // ndv2-x1 (8 V100s, NVLink hybrid cube mesh): rank 0 synthesizes and simulates, everyone gets the same set;
  // some all-gather size is served from it.
  enableParetoSynthesis();
  CommOptions options;
  options.transport = "threads";
  options.topology = "ndv2-x1";
  const Status status = runRanks(8, options, [](Communicator& comm) -> Status {
    bool any = false;
    for (uint64_t size : {uint64_t{1} << 10, uint64_t{1} << 20, uint64_t{256} << 20}) {
      BRAID_ASSIGN_OR_RETURN(AlgorithmChoice c, comm.choose(CollectiveKind::kAllGather, size, false));
      // Pareto sources name their candidate ("synthesized ...", "sccl least-steps ...", "pareto ...: classical").
      if (c.source != "classical") any = true;
    }
    if (!any) return internalError("no all-gather size chose from the Pareto set");
    std::vector<float> send(1 << 16, static_cast<float>(comm.rank())), recv(8 << 16);
    BRAID_RETURN_IF_ERROR(comm.allGather(send.data(), recv.data(), send.size(), DataType::kFloat32));
    for (size_t i = 0; i < recv.size(); ++i)
      if (recv[i] != static_cast<float>(i >> 16)) return internalError(fmt::format("element {}", i));
    return Status::ok();
  });
  setDefaultParetoSynthesizer(nullptr);
  EXPECT_TRUE(status.isOk()) << status.toString();
}

TEST(Communicator, TopologyWithoutSynthesizerWarnsAndRunsClassical) {
  // BRAID_TOPO names a topology whose GPU count matches, but no Pareto synthesizer is installed: rank 0 warns once
  // that braid_pareto is not linked, every choice is classical and collectives are still right.
  setDefaultParetoSynthesizer(nullptr);
  setLogLevel(LogLevel::kWarn);
  setenv("BRAID_TOPO", "ndv2-x1", 1);
  CommOptions options;
  options.transport = "threads";
  ::testing::internal::CaptureStderr();
  const Status status = runRanks(8, options, [](Communicator& comm) -> Status {
    for (uint64_t size : {uint64_t{1} << 10, uint64_t{1} << 20, uint64_t{256} << 20}) {
      for (CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kAllReduce}) {
        BRAID_ASSIGN_OR_RETURN(AlgorithmChoice c, comm.choose(kind, size, false));
        if (c.source != "classical")
          return internalError(
              fmt::format("{} at {} B chose {} from {}", collectiveName(kind), size, c.algorithm, c.source));
      }
    }
    BRAID_RETURN_IF_ERROR(checkAllReduce(comm, 1000));
    return checkAllReduce(comm, 1 << 18);
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("BRAID_TOPO");
  EXPECT_TRUE(status.isOk()) << status.toString();
  size_t warnings = 0;
  for (size_t at = err.find("braid::braid_pareto"); at != std::string::npos;
       at = err.find("braid::braid_pareto", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << err;
  EXPECT_NE(err.find("braid WARN"), std::string::npos) << err;
  EXPECT_NE(err.find("ndv2-x1"), std::string::npos) << err;
}

TEST(Communicator, CallerParetoSynthesizerRunsOnRankZeroOnly) {
  // A caller's synthesizer (CommOptions::pareto_synthesizer) serving every all-gather size with the ring: called
  // once (rank 0), and every rank chooses the ring from it.
  std::atomic<int> calls{0};
  CommOptions options;
  options.transport = "threads";
  options.topology = "pcie-2s4g";
  options.pareto_synthesizer = [&calls](const Topology& topology,
                                        const std::string& name) -> Result<std::vector<ParetoCandidate>> {
    ++calls;
    ClassicRequest request;
    request.algo = ClassicAlgo::kRing;
    request.spec.kind = CollectiveKind::kAllGather;
    request.spec.num_ranks = topology.numGpus();
    BRAID_ASSIGN_OR_RETURN(Algorithm ring, buildClassic(request));
    ParetoCandidate c;
    c.algorithm = std::move(ring);
    c.source = "test " + name;
    return std::vector<ParetoCandidate>{std::move(c)};
  };
  const Status status = runRanks(8, options, [](Communicator& comm) -> Status {
    BRAID_ASSIGN_OR_RETURN(AlgorithmChoice c, comm.choose(CollectiveKind::kAllGather, 1 << 10, false));
    if (c.source != "test pcie-2s4g") return internalError(fmt::format("chose {} from {}", c.algorithm, c.source));
    std::vector<int32_t> send(1000), recv(8000);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int32_t>(comm.rank() * 1000 + i);
    BRAID_RETURN_IF_ERROR(comm.allGather(send.data(), recv.data(), send.size(), DataType::kInt32));
    for (size_t i = 0; i < recv.size(); ++i)
      if (recv[i] != static_cast<int32_t>(i)) return internalError(fmt::format("element {}: {}", i, recv[i]));
    return Status::ok();
  });
  EXPECT_TRUE(status.isOk()) << status.toString();
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace braid
