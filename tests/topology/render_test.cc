// topologyToJson, describeTopology and drawTopologySvg on shipped topologies.

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "braid/file_io.h"
#include "braid/topology.h"

namespace braid {
namespace {

Topology shipped(const std::string& name) {
  Result<std::string> path = findShippedTopology(name);
  EXPECT_TRUE(path.isOk()) << path.status().toString();
  Result<std::string> text = readFile(path.isOk() ? *path : "");
  EXPECT_TRUE(text.isOk());
  Result<Topology> t = readTopologyYaml(text.isOk() ? *text : "", name + ".yaml");
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? *t : Topology();
}

// The GPU x GPU class matrix rows printed by describeTopology: row name -> cells.
std::vector<std::vector<std::string>> classMatrix(const std::string& text, int gpus) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("GPU x GPU best route", 0) == 0) {
      inside = true;
      std::getline(in, line);  // header
      continue;
    }
    if (!inside) continue;
    std::istringstream words(line);
    std::vector<std::string> cells;
    for (std::string w; words >> w;) cells.push_back(w);
    if (cells.empty() || cells[0].rfind("gpu", 0) != 0) break;
    cells.erase(cells.begin());
    rows.push_back(cells);
    if (static_cast<int>(rows.size()) == gpus) break;
  }
  return rows;
}

TEST(TopologyJson, FieldsAndCounts) {
  Topology t = shipped("dgx-a100-x2");
  const nlohmann::json j = nlohmann::json::parse(topologyToJson(t));
  EXPECT_EQ(j["name"], "dgx-a100-x2");
  EXPECT_EQ(j["gpus"], 16);
  EXPECT_EQ(j["nodes"], 2);
  ASSERT_EQ(j["links"].size(), t.links.size());
  ASSERT_EQ(j["vertices"].size(), t.vertices.size());
  EXPECT_EQ(j["notes"].size(), t.notes.size());
  // The first template link is gpu0 <-> nvswitch (12 lanes, 240 GB/s, 0.35 us).
  const nlohmann::json& l0 = j["links"][0];
  EXPECT_EQ(l0["src"], "gpu0");
  EXPECT_EQ(l0["dst"], "node0.nvswitch");
  EXPECT_EQ(l0["kind"], "nvlink");
  EXPECT_EQ(l0["lanes"], 12);
  EXPECT_DOUBLE_EQ(l0["bandwidth_gbps"].get<double>(), 240);
  EXPECT_DOUBLE_EQ(l0["alpha_us"].get<double>(), 0.35);
  // GPU vertices named by rank, in node order; rank 9 is local GPU 1 of node1.
  int gpus = 0;
  for (const auto& v : j["vertices"]) {
    if (v["kind"] != "gpu") continue;
    EXPECT_EQ(v["name"], "gpu" + std::to_string(v["rank"].get<int>()));
    if (v["rank"] == 9) {
      EXPECT_EQ(v["node"], "node1");
      EXPECT_EQ(v["local"], 1);
    }
    ++gpus;
  }
  EXPECT_EQ(gpus, 16);
  EXPECT_EQ(j["node_list"][1]["nics"][3], "node1.nic3");
  EXPECT_EQ(j["node_list"][1]["template"], "dgx-a100");
}

TEST(DescribeTopology, Dgx1MatrixEqualsRealNvidiaSmi) {
  Topology t = shipped("dgx1-v100");
  const std::string text = describeTopology(t);
  // The GPU part of the real DGX-1 `nvidia-smi topo -m` (realcases RC-20), typed in by hand.
  const std::vector<std::vector<std::string>> expected = {
      {"X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"}, {"NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"},
      {"NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"}, {"NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"},
      {"NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"}, {"SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"},
      {"SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"}, {"SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"},
  };
  EXPECT_EQ(classMatrix(text, 8), expected) << text;
  EXPECT_NE(text.find("8 GPUs in 1 node(s); 4 NICs"), std::string::npos) << text;
  EXPECT_NE(text.find("node0 [dgx1-v100]: 8 GPUs (gpu0-gpu7) V100-SXM2-16GB, 4 NICs"), std::string::npos) << text;
  EXPECT_NE(text.find("Notes:"), std::string::npos);
}

TEST(DescribeTopology, PcieAndNetworkClasses) {
  {
    const std::string text = describeTopology(shipped("pcie-2s4g"));
    const auto m = classMatrix(text, 8);
    ASSERT_EQ(m.size(), 8u) << text;
    EXPECT_EQ(m[0][1], "PIX");
    EXPECT_EQ(m[0][4], "SYS");
    EXPECT_EQ(m[7][6], "PIX");
  }
  {
    const std::string text = describeTopology(shipped("dgx-a100-x2"));
    const auto m = classMatrix(text, 16);
    ASSERT_EQ(m.size(), 16u) << text;
    EXPECT_EQ(m[0][7], "NV12");
    EXPECT_EQ(m[0][8], "NET");
    EXPECT_EQ(m[15][3], "NET");
    EXPECT_EQ(m[9][9], "X");
    // Link classes aggregate the 16 GPU->NVSwitch links into one line.
    EXPECT_NE(text.find("nvlink  gpu->nvswitch               12        240      0.35      16"), std::string::npos)
        << text;
  }
  {
    Topology big = shipped("dgx-h100-x4");
    big.name = "x";
    EXPECT_NE(describeTopology(big).find("32 GPUs in 4 node(s)"), std::string::npos);
  }
}

TEST(DrawTopologySvg, WellFormedWithEveryVertexAndLink) {
  for (const char* name : {"dgx2-x1", "dgx-a100-x2", "dgx1-v100", "ndv2-x4"}) {
    SCOPED_TRACE(name);
    Topology t = shipped(name);
    const std::string svg = drawTopologySvg(t);
    pugi::xml_document doc;
    pugi::xml_parse_result parsed = doc.load_string(svg.c_str());
    ASSERT_TRUE(parsed) << parsed.description();
    pugi::xml_node root = doc.child("svg");
    ASSERT_TRUE(root);
    // One box per vertex (its <title> is the vertex name followed by its kind).
    int vertex_boxes = 0, gpu_boxes = 0;
    for (pugi::xml_node r : root.children("rect")) {
      const std::string title = r.child_value("title");
      if (title.empty()) continue;
      ++vertex_boxes;
      gpu_boxes += title.find("(gpu") != std::string::npos ? 1 : 0;
    }
    EXPECT_EQ(vertex_boxes, static_cast<int>(t.vertices.size()));
    EXPECT_EQ(gpu_boxes, t.numGpus());
    // One line or arc per full-duplex link: every shipped link comes in both directions, so half the links.
    int drawn = 0;
    for (pugi::xml_node g : root.children("g")) {
      for (pugi::xml_node l : g.children()) drawn += std::string(l.name()) == "line" || std::string(l.name()) == "path";
    }
    EXPECT_EQ(drawn * 2, static_cast<int>(t.links.size()));
    EXPECT_NE(svg.find("nvlink:"), std::string::npos) << "legend";
    EXPECT_NE(svg.find("pcie:"), std::string::npos) << "legend";
    const double width = root.attribute("width").as_double();
    EXPECT_GT(width, 500);
    EXPECT_LT(width, 4000);
  }
}

}  // namespace
}  // namespace braid
