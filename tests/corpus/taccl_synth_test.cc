// Synthesis on TACCL's own inputs (../shared/realcases/README.md §4, RC-41..RC-45): every TACCL
// sketch in taccl/sketch, on the profile it was written for, synthesizes all-gather and all-reduce, and the
// 2 x DGX-2 sketch sk1-dgx2-n2 synthesizes all-to-all (TACCL reported that case infeasible, microsoft/taccl#2;
// TACCL crashes on the single-node sketches and on custom profiles, taccl_msccl.md §1.8). Each case loads the
// sketch and the profile the way `braid synth --topology <profile> --sketch <sketch>` does (loadTacclSketch,
// loadTacclTopology, loadSketch), synthesizes with a 5 s budget (the synthesizer keeps its best solution when
// the time runs out) and checks that the algorithm verifies and has the expected shape.
//
// Expected values, read off the files by hand:
//   ranks  = gpus_per_node of the profile x nnodes of the sketch. gpus_per_node: DGX-2 16 (topo-dgx2-1MB.json),
//            NDv2 8 (topo-ndv2-1MB.json), MI300X 8 (adp_topo-mi300x.json), MI300X "dumb" 4
//            (adp_topo-mi300x_dumb.json), akmu A 4 / B 2 / D 1 (the GPU4 / GPU2 / GPU1 profiles).
//   chunks = MSCCL nchunksperloop = ranks x input_chunkup of the sketch: all-gather and all-reduce cut each rank's
//            share into input_chunkup chunks (taccl_msccl.md §1.4, collective.chunk_up), all-to-all cuts each
//            (source, destination) block into input_chunkup chunks, so one rank's send buffer holds ranks x
//            input_chunkup chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/collective.h"
#include "braid/sketch.h"
#include "braid/synthesize.h"
#include "braid/taccl.h"
#include "braid/topology.h"
#include "support/corpus.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

constexpr double kTimeLimitSeconds = 5;

const char kDgx2[] = "topo-dgx2-1MB.json";
const char kNdv2[] = "topo-ndv2-1MB.json";
const char kAkmuA4[] = "mcrl_akmu-A-GPU4-P2P-1-GDRLEVEL-SYS-GDRREAD-1-1MB.json";
const char kAkmuB2[] = "mcrl_akmu-B-GPU2-P2P-0-GDRLEVEL-LOC-GDRREAD-0-1MB.json";
const char kAkmuD1[] = "mcrl_akmu-D-GPU1-P2P-1-GDRLEVEL-SYS-GDRREAD-1-1MB.json";
const char kMi300x[] = "adp_topo-mi300x.json";
const char kMi300xDumb[] = "adp_topo-mi300x_dumb.json";

struct SketchCase {
  const char* sketch;   // file in taccl/sketch (without .json)
  const char* profile;  // file in taccl/topo
  int ranks;            // gpus_per_node x nnodes (see the file comment)
  int chunkup;          // the sketch's input_chunkup
};

// gpus_per_node x nnodes and input_chunkup as written in each file.
const std::vector<SketchCase>& sketchCases() {
  static const std::vector<SketchCase> cases = {
      {"adp_mi300x-dumb-n2", kMi300xDumb, 4 * 2, 1},
      {"adp_mi300x-n2", kMi300x, 8 * 2, 1},
      {"adp_mi300x-n3", kMi300x, 8 * 3, 1},
      {"mcrl_sk-akmu-n2-gpu4-nonsymmetric", kAkmuA4, 4 * 2, 1},
      {"mcrl_sk-akmu-n3-gpu2-nonsymmetric", kAkmuB2, 2 * 3, 1},
      {"mcrl_sk-akmu-n3-gpu4", kAkmuA4, 4 * 3, 1},
      {"mcrl_sk-akmu-n5-gpu1", kAkmuD1, 1 * 5, 1},
      {"sk-dgx2-n1", kDgx2, 16 * 1, 2},
      {"sk-ndv2-n1-cUp6", kNdv2, 8 * 1, 6},
      {"sk1-dgx2-n1", kDgx2, 16 * 1, 1},
      {"sk1-dgx2-n2", kDgx2, 16 * 2, 2},
      {"sk1-ndv2-n1", kNdv2, 8 * 1, 1},
      {"sk1-ndv2-n2", kNdv2, 8 * 2, 1},
      {"sk1-ndv2-n4", kNdv2, 8 * 4, 1},
      {"sk2-dgx2-n2", kDgx2, 16 * 2, 1},
      {"sk2-ndv2-n2", kNdv2, 8 * 2, 1},
      {"sk2-ndv2-n4", kNdv2, 8 * 4, 1},
      {"sk3-ndv2-n2", kNdv2, 8 * 2, 1},
  };
  return cases;
}

struct SynthCase {
  SketchCase sketch;
  CollectiveKind collective;
};

void PrintTo(const SynthCase& c, std::ostream* os) {
  *os << c.sketch.sketch << " on " << c.sketch.profile << ", " << collectiveName(c.collective);
}

std::vector<SynthCase> synthCases() {
  std::vector<SynthCase> out;
  for (const SketchCase& s : sketchCases()) {
    out.push_back({s, CollectiveKind::kAllGather});
    out.push_back({s, CollectiveKind::kAllReduce});
    // TACCL's issue #2: all-to-all on 2 x DGX-2 with this sketch was reported infeasible.
    if (std::string(s.sketch) == "sk1-dgx2-n2") out.push_back({s, CollectiveKind::kAllToAll});
  }
  return out;
}

std::string caseName(const ::testing::TestParamInfo<SynthCase>& info) {
  std::string name = std::string(info.param.sketch.sketch) + "_" + collectiveName(info.param.collective);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class TacclSketchSynthesisTest : public ::testing::TestWithParam<SynthCase> {};

TEST_P(TacclSketchSynthesisTest, SynthesizesAndVerifies) {
  BRAID_SKIP_WITHOUT_REALCASES();
  const SynthCase& c = GetParam();
  const fs::path taccl = testing::realcasesDir() / "taccl";
  const std::string sketch_path = (taccl / "sketch" / (std::string(c.sketch.sketch) + ".json")).string();
  const std::string profile_path = (taccl / "topo" / c.sketch.profile).string();

  Result<TacclSketch> taccl_sketch = loadTacclSketch(sketch_path);
  ASSERT_TRUE(taccl_sketch.isOk()) << taccl_sketch.status().toString();
  Result<Topology> topology = loadTacclTopology(profile_path, *taccl_sketch);
  ASSERT_TRUE(topology.isOk()) << topology.status().toString();
  ASSERT_EQ(topology->numGpus(), c.sketch.ranks);
  Result<Sketch> sketch = loadSketch(sketch_path);
  ASSERT_TRUE(sketch.isOk()) << sketch.status().toString();
  EXPECT_EQ(sketch->chunkup, c.sketch.chunkup);

  SynthesisRequest request;
  request.topology = &*topology;
  request.sketch = *sketch;
  request.has_sketch = true;
  request.collective = c.collective;
  request.time_limit_s = kTimeLimitSeconds;
  Result<SynthesisResult> result = synthesize(request);
  ASSERT_TRUE(result.isOk()) << result.status().toString();

  const Algorithm& algorithm = result->algorithm;
  EXPECT_EQ(algorithm.collective, c.collective);
  EXPECT_EQ(algorithm.num_ranks, c.sketch.ranks);
  EXPECT_EQ(algorithm.num_chunks, c.sketch.ranks * c.sketch.chunkup);
  EXPECT_EQ(static_cast<int>(algorithm.ranks.size()), c.sketch.ranks);
  const VerifyReport report = verify(algorithm);
  EXPECT_TRUE(report.ok) << report.toString();
  EXPECT_FALSE(report.modes_checked.empty());
}

INSTANTIATE_TEST_SUITE_P(Realcases, TacclSketchSynthesisTest, ::testing::ValuesIn(synthCases()), caseName);

// The corpus must hold exactly the sketches listed above: a new file in taccl/sketch needs a case here.
TEST(TacclSketchSynthesisCorpusTest, EverySketchFileHasACase) {
  BRAID_SKIP_WITHOUT_REALCASES();
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(testing::realcasesDir() / "taccl" / "sketch")) {
    if (e.path().extension() == ".json") files.push_back(e.path().stem().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> listed;
  for (const SketchCase& s : sketchCases()) listed.push_back(s.sketch);
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(files, listed);
  EXPECT_EQ(listed.size(), 18u);
}

}  // namespace
}  // namespace braid
