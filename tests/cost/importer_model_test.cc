// The GPU model every importer records reaches NCCL's model: one machine described by its `nvidia-smi topo -m`
// matrix, its NCCL topology dump and the Braid YAML written from either gets one NCCL generation and one all-reduce
// prediction. Inputs: tests/topology/data/dgx-h100-smi.txt and dgx-h100-nccl-topo.xml describe one DGX H100
// (8x H100-SXM5 on NVSwitch, NV18; 8 ConnectX-7 NICs, NIC i beside GPU i; two Sapphire Rapids sockets).
#include <gtest/gtest.h>

#include <string>

#include "braid/importers.h"
#include "braid/nccl_model.h"
#include "braid/topology.h"

namespace braid {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

std::string dataFile(const std::string& name) { return std::string(BRAID_SOURCE_DIR) + "/tests/topology/data/" + name; }

Topology load(const std::string& path) {
  Result<Topology> t = loadTopology(path);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? std::move(t).value() : Topology{};
}

Topology yamlRoundTrip(const Topology& t) {
  Result<Topology> back = readTopologyYaml(writeTopologyYaml(t), t.name + ".yaml");
  EXPECT_TRUE(back.isOk()) << back.status().toString();
  return back.isOk() ? std::move(back).value() : Topology{};
}

struct Baseline {
  int arch = -1;
  bool nvls = false;
  std::string choice;
  double time_us = -1;
  std::vector<std::string> notes;
};

Baseline allReduce256M(const Topology& t) {
  Baseline b;
  Result<NcclSystem> sys = ncclSystem(t);
  EXPECT_TRUE(sys.isOk()) << sys.status().toString();
  if (!sys.isOk()) return b;
  b.arch = sys->arch;
  b.nvls = sys->nvls;
  b.notes = sys->notes;
  Result<NcclPrediction> p = ncclPredict(*sys, CollectiveKind::kAllReduce, 256 * kMiB);
  EXPECT_TRUE(p.isOk()) << p.status().toString();
  if (!p.isOk()) return b;
  b.choice = p->choiceName();
  b.time_us = p->choice.time_us;
  return b;
}

bool mentions(const std::vector<std::string>& notes, const std::string& what) {
  for (const std::string& n : notes) {
    if (n.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(ImporterGpuModel, DgxH100FromSmiAndXmlGetsOneNcclBaseline) {
  const Topology smi = load(dataFile("dgx-h100-smi.txt"));
  const Topology xml = load(dataFile("dgx-h100-nccl-topo.xml"));
  ASSERT_EQ(smi.numGpus(), 8);
  ASSERT_EQ(xml.numGpus(), 8);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(gpuComputeCapability(smi.vertices[smi.gpuVertex(r)].model), 90) << smi.vertices[smi.gpuVertex(r)].model;
    EXPECT_EQ(xml.vertices[xml.gpuVertex(r)].model, "H100-SXM5-80GB");
  }
  const Baseline from_smi = allReduce256M(smi);
  const Baseline from_xml = allReduce256M(xml);
  // Hopper on NVSwitch: NVLink SHARP is NCCL's choice at 256 MiB, from either description.
  EXPECT_EQ(from_smi.arch, 2);
  EXPECT_EQ(from_xml.arch, 2);
  EXPECT_TRUE(from_smi.nvls);
  EXPECT_TRUE(from_xml.nvls);
  EXPECT_EQ(from_smi.choice, "NVLS/Simple");
  EXPECT_EQ(from_xml.choice, "NVLS/Simple");
  EXPECT_FALSE(mentions(from_smi.notes, "not recognised")) << from_smi.notes.front();
  // What differs between the inputs (NIC speeds, absent from the matrix; NVSwitch hop alphas) plays no part on one
  // node, so the predictions agree to rounding.
  EXPECT_GT(from_xml.time_us, 0);
  EXPECT_NEAR(from_smi.time_us, from_xml.time_us, 1e-9 * from_xml.time_us);
  // Ampere without NVLS, what an unrecognised model gives, would be about 30% slower here.
  Topology unknown = smi;
  for (Vertex& v : unknown.vertices) {
    if (v.kind == VertexKind::kGpu) v.model.clear();
  }
  const Baseline ampere = allReduce256M(unknown);
  EXPECT_EQ(ampere.arch, 1);
  EXPECT_FALSE(ampere.nvls);
  EXPECT_GT(ampere.time_us, 1.2 * from_xml.time_us);
}

TEST(ImporterGpuModel, YamlRoundTripKeepsTheModelAndTheBaseline) {
  for (const char* name : {"dgx-h100-smi.txt", "dgx-h100-nccl-topo.xml"}) {
    SCOPED_TRACE(name);
    const Topology t = load(dataFile(name));
    const Topology back = yamlRoundTrip(t);
    ASSERT_EQ(back.numGpus(), t.numGpus());
    for (int r = 0; r < t.numGpus(); ++r) {
      EXPECT_FALSE(t.vertices[t.gpuVertex(r)].model.empty());
      EXPECT_EQ(back.vertices[back.gpuVertex(r)].model, t.vertices[t.gpuVertex(r)].model);
    }
    const Baseline before = allReduce256M(t);
    const Baseline after = allReduce256M(back);
    EXPECT_EQ(after.arch, before.arch);
    EXPECT_EQ(after.choice, before.choice);
    EXPECT_NEAR(after.time_us, before.time_us, 1e-9 * before.time_us);
  }
}

TEST(ImporterGpuModel, SmiGenerationsAndTacclBuiltinsNameTheirGpus) {
  struct Case {
    const char* cell;
    int gpus;
    int sm;  // gpuComputeCapability of the recorded model; 0: none recorded
    int arch;
  };
  // NV12 everywhere (8 GPUs): A100 NVSwitch; NV4 pair: Ampere workstation bridge; PIX only: no guess.
  const Case cases[] = {{"NV12", 8, 80, 1}, {"NV6", 8, 70, 0}, {"NV4", 2, 86, 1}, {"PIX", 4, 0, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cell);
    std::string text = "\t";
    for (int g = 0; g < c.gpus; ++g) text += "GPU" + std::to_string(g) + "\t";
    text += "CPU Affinity\n";
    for (int a = 0; a < c.gpus; ++a) {
      text += "GPU" + std::to_string(a);
      for (int b = 0; b < c.gpus; ++b) text += std::string("\t") + (a == b ? "X" : c.cell);
      text += "\t0-7\n";
    }
    Result<Topology> t = importNvidiaSmiTopo(text, "gen.txt");
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    const std::string& model = t->vertices[t->gpuVertex(0)].model;
    EXPECT_EQ(gpuComputeCapability(model).value_or(0), c.sm) << model;
    if (c.gpus > 1) {
      EXPECT_EQ(allReduce256M(*t).arch, c.arch);
    }
  }
  // TACCL's built-in NDv2 is 8 V100-SXM2 (Volta).
  const std::string profile =
      R"({"name": "NDv2_1MB", "gpus_per_node": 8, "alpha": 0.7, "node_betas_list": [46, 92], "nics_per_node": 1})";
  Result<Topology> ndv2 = importTacclProfile(profile, "ndv2.json", nullptr);
  ASSERT_TRUE(ndv2.isOk()) << ndv2.status().toString();
  EXPECT_EQ(gpuComputeCapability(ndv2->vertices[ndv2->gpuVertex(0)].model), 70);
  EXPECT_EQ(allReduce256M(*ndv2).arch, 0);
}

}  // namespace
}  // namespace braid
