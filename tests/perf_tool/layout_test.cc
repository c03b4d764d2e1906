// nccl-tests' size -> count rules and bandwidth factors (reference §6.4), with the numbers worked out by hand.
#include "braid_perf/layout.h"

#include <gtest/gtest.h>

namespace braid::perf {
namespace {

TEST(PerfLayoutTest, AllReduceBroadcastReduceUseTheWholeSize) {
  for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce}) {
    const RowLayout l = rowLayout(c, 1 << 20, DataType::kFloat32, 3);
    EXPECT_EQ(l.count, 262144u);
    EXPECT_EQ(l.send_elems, 262144u);
    EXPECT_EQ(l.recv_elems, 262144u);
    EXPECT_EQ(l.rowBytes(), 1u << 20);
    EXPECT_EQ(l.inPlaceSendOffset(c, 2), 0u);
    EXPECT_EQ(l.inPlaceRecvOffset(c, 2), 0u);
  }
  // 7 bytes of float: one whole element.
  const RowLayout l = rowLayout(Collective::kAllReduce, 7, DataType::kFloat32, 4);
  EXPECT_EQ(l.count, 1u);
  EXPECT_EQ(l.rowBytes(), 4u);
}

TEST(PerfLayoutTest, PerRankPartsRoundDownTo16Bytes) {
  // 1 MiB of float over 3 ranks: 262144 / 3 = 87381 elements, down to a multiple of 4 (16 bytes) = 87380.
  const RowLayout ag = rowLayout(Collective::kAllGather, 1 << 20, DataType::kFloat32, 3);
  EXPECT_EQ(ag.count, 87380u);
  EXPECT_EQ(ag.send_elems, 87380u);
  EXPECT_EQ(ag.recv_elems, 262140u);
  EXPECT_EQ(ag.rowBytes(), 1048560u);
  EXPECT_EQ(ag.inPlaceSendOffset(Collective::kAllGather, 2), 2u * 87380u);
  EXPECT_EQ(ag.inPlaceRecvOffset(Collective::kAllGather, 2), 0u);

  const RowLayout rs = rowLayout(Collective::kReduceScatter, 1 << 20, DataType::kFloat32, 3);
  EXPECT_EQ(rs.count, 87380u);
  EXPECT_EQ(rs.send_elems, 262140u);
  EXPECT_EQ(rs.recv_elems, 87380u);
  EXPECT_EQ(rs.rowBytes(), 1048560u);
  EXPECT_EQ(rs.inPlaceSendOffset(Collective::kReduceScatter, 1), 0u);
  EXPECT_EQ(rs.inPlaceRecvOffset(Collective::kReduceScatter, 1), 87380u);

  // int8 alltoall, 1000 bytes over 4 ranks: 250 per peer, down to 240 (a multiple of 16).
  const RowLayout a2a = rowLayout(Collective::kAllToAll, 1000, DataType::kInt8, 4);
  EXPECT_EQ(a2a.count, 240u);
  EXPECT_EQ(a2a.send_elems, 960u);
  EXPECT_EQ(a2a.recv_elems, 960u);
  EXPECT_EQ(a2a.rowBytes(), 960u);

  // double, 100 bytes over 2 ranks: 12 elements, 6 each, already a multiple of 2.
  EXPECT_EQ(rowLayout(Collective::kAllGather, 100, DataType::kFloat64, 2).count, 6u);
  // Below 16 bytes per rank: nothing (nccl-tests prints such rows with size 0).
  const RowLayout tiny = rowLayout(Collective::kAllGather, 8, DataType::kFloat32, 2);
  EXPECT_EQ(tiny.count, 0u);
  EXPECT_EQ(tiny.rowBytes(), 0u);
}

TEST(PerfLayoutTest, BandwidthFactors) {
  EXPECT_DOUBLE_EQ(busFactor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busFactor(Collective::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(busFactor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busFactor(Collective::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busFactor(Collective::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busFactor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busFactor(Collective::kReduce, 8), 1.0);

  // all_reduce: 4 MiB in 1 ms = 4194304 B / 1e9 / 1e-3 s = 4.194304 GB/s.
  const RowLayout ar = rowLayout(Collective::kAllReduce, 4 << 20, DataType::kFloat32, 4);
  EXPECT_NEAR(algBandwidth(Collective::kAllReduce, ar, 4, 1e-3), 4.194304, 1e-12);
  // all_gather counts the whole output: 87380 x 4 B x 3 ranks in 1 ms = 1.04856 GB/s.
  const RowLayout ag = rowLayout(Collective::kAllGather, 1 << 20, DataType::kFloat32, 3);
  EXPECT_NEAR(algBandwidth(Collective::kAllGather, ag, 3, 1e-3), 1.04856, 1e-12);
  EXPECT_EQ(algBandwidth(Collective::kAllGather, ag, 3, 0), 0.0);
}

// -b 0 -f 2: sizes 0, 1, 2, 4, ... Every size below one element per rank makes a zero-byte row; only the first
// is kept.
TEST(PerfLayoutTest, SweepKeepsOneZeroSizeRow) {
  Options o;
  o.min_bytes = 0;
  o.max_bytes = 64;
  o.step_factor = 2;
  auto bytesOf = [](const std::vector<RowLayout>& rows) {
    std::vector<uint64_t> out;
    for (const RowLayout& r : rows) out.push_back(r.rowBytes());
    return out;
  };
  // alltoall on 2 ranks, float: (size / 4 / 2) floats per peer rounded down to 4; 32 B -> 4 per peer.
  o.collective = Collective::kAllToAll;
  EXPECT_EQ(bytesOf(sweepLayouts(o, DataType::kFloat32, 2)), (std::vector<uint64_t>{0, 32, 64}));
  // all_reduce, float: 0, 1 and 2 bytes hold no float; 4 B is one.
  o.collective = Collective::kAllReduce;
  EXPECT_EQ(bytesOf(sweepLayouts(o, DataType::kFloat32, 2)), (std::vector<uint64_t>{0, 4, 8, 16, 32, 64}));
  // Non-zero sizes that round to the same row stay, as nccl-tests prints them: all_gather on 3 ranks, int8,
  // -b 48 -e 50 -i 1: 48, 49 and 50 bytes all give 16 bytes per rank.
  o.collective = Collective::kAllGather;
  o.min_bytes = 48;
  o.max_bytes = 50;
  o.step_factor = 1;
  o.step_bytes = 1;
  EXPECT_EQ(bytesOf(sweepLayouts(o, DataType::kInt8, 3)), (std::vector<uint64_t>{48, 48, 48}));
}

TEST(PerfLayoutTest, InPlaceAllToAllIsNotChecked) {
  for (Collective c : kAllCollectives) EXPECT_EQ(checksInPlace(c), c != Collective::kAllToAll) << collectiveName(c);
}

}  // namespace
}  // namespace braid::perf
