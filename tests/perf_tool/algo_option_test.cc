// The "algorithms:" text of braid_perf's header for --algo (perf/braid_perf/algo_option.h): "forced" only where the
// file's algorithm serves every size in both modes; its window and modes otherwise; why it never runs when its
// collective, rank count or root is not the run's.

#include "braid_perf/algo_option.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace braid::perf {
namespace {

AlgoFile allReduce(int ranks, uint64_t min_bytes, uint64_t max_bytes, bool in_place, bool out_of_place,
                   const std::string& file) {
  AlgoFile f;
  f.algorithm.collective = CollectiveKind::kAllReduce;
  f.algorithm.num_ranks = ranks;
  f.algorithm.min_bytes = min_bytes;
  f.algorithm.max_bytes = max_bytes;
  f.algorithm.in_place = in_place;
  f.algorithm.out_of_place = out_of_place;
  f.file = file;
  return f;
}

Options run(Collective collective, int threads) {
  Options o;
  o.collective = collective;
  o.threads = threads;
  return o;
}

TEST(AlgoHeaderText, ForcedOnlyWhereEverySizeAndBothModes) {
  const Options o = run(Collective::kAllReduce, 8);
  EXPECT_EQ(algoHeaderText("/t/ring.xml", {allReduce(8, 0, kUnlimitedBytes, true, true, "/t/ring.xml")}, o),
            "forced from /t/ring.xml");
  // MSCCL's defaults: out-of-place only, a size window.
  EXPECT_EQ(algoHeaderText("/t/a.xml", {allReduce(8, 1024, (1 << 20) - 1, false, true, "/t/a.xml")}, o),
            "/t/a.xml (sizes 1024 B..1048575 B, out-of-place only) where it matches, else Braid's selection");
  EXPECT_EQ(algoHeaderText("/t/a.xml", {allReduce(8, 0, kUnlimitedBytes, true, false, "/t/a.xml")}, o),
            "/t/a.xml (in-place only) where it matches, else Braid's selection");
  // A directory: file names, the matching ones listed.
  EXPECT_EQ(algoHeaderText("/d",
                           {allReduce(8, 0, 65535, true, true, "/d/small.xml"),
                            allReduce(4, 0, kUnlimitedBytes, true, true, "/d/four.xml"),
                            allReduce(8, 65536, kUnlimitedBytes, false, true, "/d/big.xml")},
                           o),
            "small.xml (sizes 0 B..65535 B); big.xml (sizes 64 KiB..unlimited, out-of-place only) where they match, "
            "else Braid's selection");
}

TEST(AlgoHeaderText, SaysWhyTheFileNeverRuns) {
  EXPECT_EQ(algoHeaderText("/t/a.xml", {allReduce(4, 0, kUnlimitedBytes, true, true, "/t/a.xml")},
                           run(Collective::kAllReduce, 8)),
            "Braid's selection (/t/a.xml: allreduce for 4 ranks, never this all_reduce with 8 ranks)");
  EXPECT_EQ(algoHeaderText("/t/a.xml", {allReduce(8, 0, kUnlimitedBytes, true, true, "/t/a.xml")},
                           run(Collective::kAllGather, 8)),
            "Braid's selection (/t/a.xml: allreduce for 8 ranks, never this all_gather with 8 ranks)");
  AlgoFile b = allReduce(4, 0, kUnlimitedBytes, true, true, "/t/b.xml");
  b.algorithm.collective = CollectiveKind::kBroadcast;
  b.algorithm.root = 2;
  Options o = run(Collective::kBroadcast, 4);
  EXPECT_EQ(algoHeaderText("/t/b.xml", {b}, o),
            "Braid's selection (/t/b.xml: broadcast for 4 ranks root 2, never this broadcast with 4 ranks root 0)");
  o.root = 2;
  EXPECT_EQ(algoHeaderText("/t/b.xml", {b}, o), "forced from /t/b.xml");
  o.root = -1;  // -r all
  EXPECT_EQ(algoHeaderText("/t/b.xml", {b}, o), "/t/b.xml (root 2 only) where it matches, else Braid's selection");
}

TEST(AlgoHeaderText, Bytes) {
  EXPECT_EQ(headerBytes(0), "0 B");
  EXPECT_EQ(headerBytes(1000), "1000 B");
  EXPECT_EQ(headerBytes(1536), "1536 B");
  EXPECT_EQ(headerBytes(uint64_t{3} << 30), "3 GiB");
  EXPECT_EQ(headerBytes(kUnlimitedBytes), "unlimited");
}

// Both ends of a window in one unit: MSCCL's ndv4 ring window [266240, 2078719] (260 KiB and a byte count that is
// no whole KiB) in bytes, not "260 KiB..2078719 B".
TEST(AlgoHeaderText, ByteRangeInOneUnit) {
  EXPECT_EQ(headerByteRange(266240, 2078719), "266240 B..2078719 B");
  EXPECT_EQ(headerByteRange(266240, 2097152), "260 KiB..2048 KiB");
  EXPECT_EQ(headerByteRange(1 << 20, 3 << 20), "1 MiB..3 MiB");
  EXPECT_EQ(headerByteRange(0, 65535), "0 B..65535 B");
  EXPECT_EQ(headerByteRange(0, 1 << 20), "0 MiB..1 MiB");
  EXPECT_EQ(headerByteRange(0, 0), "0 B..0 B");
  EXPECT_EQ(headerByteRange(65536, kUnlimitedBytes), "64 KiB..unlimited");
  EXPECT_EQ(headerByteRange(0, kUnlimitedBytes), "0 B..unlimited");
  EXPECT_EQ(headerByteRange(uint64_t{3} << 40, uint64_t{6} << 40), "3 TiB..6 TiB");
}

}  // namespace
}  // namespace braid::perf
