// The communicator's Pareto set for a topology (comm/pareto.cc): synthesis in the communicator. It lives with the
// synthesizer tests because synthesis leaves helper threads in the process, and comm_tests forks processes.
#include <gtest/gtest.h>

#include "comm/comm_test_util.h"

namespace braid {
namespace {

using testing::runRanks;

TEST(Communicator, ParetoSetForATopology) {
  // ndv2-x1 (8 V100s, NVLink hybrid cube mesh): rank 0 synthesizes and simulates, everyone gets the same set;
  // some all-gather size is served from it.
  CommOptions options;
  options.transport = "threads";
  options.topology = "ndv2-x1";
  const Status status = runRanks(8, options, [](Communicator& comm) -> Status {
    bool any = false;
    for (uint64_t size : {uint64_t{1} << 10, uint64_t{1} << 20, uint64_t{256} << 20}) {
      BRAID_ASSIGN_OR_RETURN(AlgorithmChoice c, comm.choose(CollectiveKind::kAllGather, size, false));
      if (c.source.find("synthesized") == 0 || c.source.find("pareto") == 0) any = true;
    }
    if (!any) return internalError("no all-gather size chose from the Pareto set");
    std::vector<float> send(1 << 16, static_cast<float>(comm.rank())), recv(8 << 16);
    BRAID_RETURN_IF_ERROR(comm.allGather(send.data(), recv.data(), send.size(), DataType::kFloat32));
    for (size_t i = 0; i < recv.size(); ++i)
      if (recv[i] != static_cast<float>(i >> 16)) return internalError(fmt::format("element {}", i));
    return Status::ok();
  });
  EXPECT_TRUE(status.isOk()) << status.toString();
}

}  // namespace
}  // namespace braid
