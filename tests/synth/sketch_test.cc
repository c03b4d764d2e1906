// Sketches (include/braid/sketch.h): Braid's sketch YAML, the TACCL conversion on the real TACCL sketches,
// checkSketch against TACCL and shipped topologies, deriveSketch on the shipped machines.
// Expected values come from the input files and the topology YAML, derived by hand in the comments.

#include "braid/sketch.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braid/taccl.h"
#include "braid/topology.h"
#include "support/corpus.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using Pairs = std::vector<std::pair<int, int>>;
using IdMap = std::map<int, std::vector<int>>;

const fs::path kTacclSketches = testing::realcasesDir() / "taccl" / "sketch";
const fs::path kTacclTopos = testing::realcasesDir() / "taccl" / "topo";
const fs::path kShippedSketches = fs::path(BRAID_SOURCE_DIR) / "topologies" / "sketches";

Topology shipped(const std::string& name) {
  Result<Topology> t = loadTopologyOrShipped(name);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? *t : Topology{};
}

// The fields a sketch is made of, notes and source excepted.
void expectSameFields(const Sketch& a, const Sketch& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.intranode_strategy, b.intranode_strategy);
  EXPECT_EQ(a.intranode_links, b.intranode_links);
  EXPECT_EQ(a.intranode_pairs, b.intranode_pairs);
  ASSERT_EQ(a.switches.size(), b.switches.size());
  for (size_t i = 0; i < a.switches.size(); ++i) {
    EXPECT_EQ(a.switches[i].gpus, b.switches[i].gpus);
    EXPECT_EQ(a.switches[i].hyperedge, b.switches[i].hyperedge);
  }
  EXPECT_EQ(a.internode_conn, b.internode_conn);
  EXPECT_EQ(a.internode_map, b.internode_map);
  EXPECT_EQ(a.relay_for, b.relay_for);
  EXPECT_EQ(a.enforce_ordering, b.enforce_ordering);
  EXPECT_EQ(a.symmetry, b.symmetry);
  EXPECT_EQ(a.chunkup, b.chunkup);
  EXPECT_EQ(a.size_bytes, b.size_bytes);
  EXPECT_EQ(a.path_slack, b.path_slack);
}

// ---- YAML reading -----------------------------------------------------------------------------------

TEST(SketchYaml, ParsesEveryField) {
  const std::string text =
      "# first note\n"
      "#\n"
      "#   second note  \n"
      "name: my-sketch\n"
      "nodes: 2\n"
      "intranode:\n"
      "  strategy: switch\n"
      "  links: [[0, 1], [1, 0], [2, 3]]\n"
      "  switches:\n"
      "    - {gpus: [0, 1, 2, 3], hyperedge: uc-min}\n"
      "    - {gpus: [4, 5]}\n"
      "internode:\n"
      "  connections: {1: [0], 3: [2, 4]}\n"
      "  relay_for: {1: [0, 1]}\n"
      "  enforce_ordering: true\n"
      "symmetry: [[2, 16], [16, 32]]\n"
      "chunkup: 3\n"
      "size: 4M\n"
      "path_slack: 2\n";
  Result<Sketch> s = readSketchYaml(text, "dir/my.yaml");
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->source, "dir/my.yaml");
  EXPECT_EQ(s->name, "my-sketch");
  EXPECT_EQ(s->nodes, 2);
  EXPECT_EQ(s->intranode_strategy, "switch");
  EXPECT_EQ(s->intranode_links, IntraLinks::kExplicit);
  EXPECT_EQ(s->intranode_pairs, (Pairs{{0, 1}, {1, 0}, {2, 3}}));
  ASSERT_EQ(s->switches.size(), 2u);
  EXPECT_EQ(s->switches[0].gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(s->switches[0].hyperedge, "uc-min");
  EXPECT_EQ(s->switches[1].gpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(s->switches[1].hyperedge, "uc-max");  // the default
  EXPECT_EQ(s->internode_conn, InterConn::kMap);
  EXPECT_EQ(s->internode_map, (IdMap{{1, {0}}, {3, {2, 4}}}));
  EXPECT_EQ(s->relay_for, (IdMap{{1, {0, 1}}}));
  EXPECT_TRUE(s->enforce_ordering);
  EXPECT_EQ(s->symmetry, (Pairs{{2, 16}, {16, 32}}));
  EXPECT_EQ(s->chunkup, 3);
  EXPECT_EQ(s->size_bytes, 4u * 1024 * 1024);  // nccl-tests M = 2^20
  EXPECT_EQ(s->path_slack, 2);
  EXPECT_EQ(s->notes, (std::vector<std::string>{"first note", "second note"}));
}

TEST(SketchYaml, ScalarChoicesAndDefaults) {
  Result<Sketch> s =
      readSketchYaml("intranode: {links: all}\ninternode: {connections: fully-connected}\nsize: 1000\n", "/x/ab.yaml");
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->name, "ab");  // no name: the file stem
  EXPECT_EQ(s->nodes, 0);
  EXPECT_EQ(s->intranode_strategy, "none");
  EXPECT_EQ(s->intranode_links, IntraLinks::kAll);
  EXPECT_EQ(s->internode_conn, InterConn::kFullyConnected);
  EXPECT_EQ(s->size_bytes, 1000u);
  EXPECT_EQ(s->chunkup, 1);
  EXPECT_EQ(s->path_slack, 0);
  EXPECT_TRUE(s->symmetry.empty());

  Result<Sketch> d =
      readSketchYaml("intranode: {links: nvlink}\ninternode: {connections: direct-map}\nsize: 2g\n", "d.yaml");
  ASSERT_TRUE(d.isOk()) << d.status().toString();
  EXPECT_EQ(d->intranode_links, IntraLinks::kNvlink);
  EXPECT_EQ(d->internode_conn, InterConn::kDirectMap);
  EXPECT_EQ(d->size_bytes, 2ull << 30);

  // Nothing to read is refused, not taken as every default.
  for (const char* text : {"", "\n  \n", "# only a comment\n# and another\n", "{}\n", "name: just-a-name\n"}) {
    Result<Sketch> empty = readSketchYaml(text, "empty.yaml");
    ASSERT_FALSE(empty.isOk()) << "'" << text << "'";
    EXPECT_EQ(empty.status().message().rfind("empty.yaml: empty sketch", 0), 0u) << empty.status().message();
  }
}

struct BadInput {
  const char* text;
  const char* expected;  // the whole "<file>:<line>: <field>" prefix of the message
};

TEST(SketchYaml, ErrorsNameFileLineAndField) {
  const BadInput cases[] = {
      // Unknown key on line 3.
      {"name: a\nnodes: 2\nchunk_up: 2\n", "s.yaml:3: chunk_up: unknown key"},
      // Unknown key nested in internode, line 3.
      {"internode:\n  connections: direct-map\n  relays: {}\n", "s.yaml:3: internode.relays: unknown key"},
      // Wrong type: chunkup must be an integer.
      {"name: a\nchunkup: two\n", "s.yaml:2: chunkup: 'two' is not an integer"},
      // Wrong type: enforce_ordering must be a boolean.
      {"internode:\n  enforce_ordering: maybe\n", "s.yaml:2: internode.enforce_ordering: expected true or false"},
      // Negative GPU id as a receiver, line 3.
      {"nodes: 2\ninternode:\n  connections: {1: [-1]}\n",
       "s.yaml:3: internode.connections.1[0]: GPU id -1 is negative"},
      // Negative GPU id in an explicit pair.
      {"intranode:\n  links: [[0, -2]]\n", "s.yaml:2: intranode.links[0]: GPU id -2 is negative"},
      // Symmetry group 0, line 2.
      {"name: a\nsymmetry: [[2, 0]]\n", "s.yaml:2: symmetry[0].group: 0 is out of range"},
      // Symmetry entry that is not a pair.
      {"symmetry: [[2, 16, 1]]\n", "s.yaml:1: symmetry[0]: expected a pair [offset, group]"},
      // chunkup < 1.
      {"chunkup: 0\n", "s.yaml:1: chunkup: 0 is out of range"},
      // path_slack above 4.
      {"path_slack: 5\n", "s.yaml:1: path_slack: 5 is out of range"},
      // Size with a fraction (nccl-tests sizes are integers).
      {"name: a\n\nsize: 1.5M\n", "s.yaml:3: size: '1.5M' is not a size"},
      // Unknown intra-node strategy.
      {"intranode:\n  strategy: ring\n", "s.yaml:2: intranode.strategy: unknown strategy 'ring'"},
      // Switches without the switch strategy.
      {"intranode:\n  switches: [{gpus: [0, 1]}]\n", "s.yaml:2: intranode.switches: switches need strategy: switch"},
      // relay_for naming a GPU that is not a sender.
      {"internode:\n  connections: {1: [0]}\n  relay_for: {3: [2]}\n",
       "s.yaml:3: internode.relay_for.3: GPU 3 is not a sender"},
      // Not a mapping at all.
      {"- a\n- b\n", "s.yaml:1: expected a YAML mapping"},
  };
  for (const BadInput& c : cases) {
    Result<Sketch> s = readSketchYaml(c.text, "s.yaml");
    ASSERT_FALSE(s.isOk()) << c.text;
    EXPECT_EQ(s.status().code(), StatusCode::kParseError) << c.text;
    EXPECT_EQ(s.status().message().rfind(c.expected, 0), 0u) << "got: " << s.status().message();
  }
}

TEST(SketchYaml, SyntaxErrorHasLine) {
  Result<Sketch> s = readSketchYaml("name: a\nsymmetry: [[1, 2]\n", "s.yaml");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.status().code(), StatusCode::kParseError);
  EXPECT_EQ(s.status().message().rfind("s.yaml:", 0), 0u) << s.status().message();
}

TEST(SketchYaml, MissingFileIsNotFound) {
  const std::string path = (fs::temp_directory_path() / "braid-no-such-sketch.yaml").string();
  Result<Sketch> s = loadSketch(path);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.status().message(), "sketch " + path + ": no such file");
}

TEST(SketchYaml, RoundTrip) {
  Sketch s;
  s.name = "odd \"name\": with # chars";
  s.nodes = 3;
  s.intranode_strategy = "maxmin";
  s.intranode_links = IntraLinks::kExplicit;
  s.intranode_pairs = {{0, 1}, {1, 0}, {3, 2}};
  s.internode_conn = InterConn::kMap;
  s.internode_map = {{0, {1, 2}}, {3, {3}}};
  s.relay_for = {{0, {0, 1, 2}}};
  s.enforce_ordering = true;
  s.symmetry = {{4, 12}, {1, 4}};
  s.chunkup = 6;
  s.size_bytes = 3 * 1024 + 1;  // not a multiple of 1024: written in bytes
  s.path_slack = 1;
  s.notes = {"one sentence.", "two\nlines"};
  Result<Sketch> back = readSketchYaml(writeSketchYaml(s), "rt.yaml");
  ASSERT_TRUE(back.isOk()) << back.status().toString() << "\n" << writeSketchYaml(s);
  expectSameFields(s, *back);
  EXPECT_EQ(back->notes, (std::vector<std::string>{"one sentence.", "two lines"}));

  // Switches, scalar link and connection choices, sizes with a suffix.
  Sketch t;
  t.name = "t";
  t.intranode_strategy = "switch";
  t.switches = {{{0, 1, 2, 3}, "uc-min"}, {{4, 5}, "uc-max"}};
  t.intranode_links = IntraLinks::kAll;
  t.internode_conn = InterConn::kFullyConnected;
  t.size_bytes = 64ull << 20;
  Result<Sketch> tb = readSketchYaml(writeSketchYaml(t), "t.yaml");
  ASSERT_TRUE(tb.isOk()) << tb.status().toString() << "\n" << writeSketchYaml(t);
  expectSameFields(t, *tb);
  EXPECT_NE(writeSketchYaml(t).find("size: 64M\n"), std::string::npos);

  // Names YAML would read as another type or another string stay strings.
  for (const char* name : {"true", "No", "null", "123", "0x1F", "a b", "", "-x", "x: y", "~", "plain-name_1.0"}) {
    Sketch n;
    n.name = name;
    Result<Sketch> nb = readSketchYaml(writeSketchYaml(n), "n.yaml");
    ASSERT_TRUE(nb.isOk()) << nb.status().toString();
    EXPECT_EQ(nb->name, name);
  }
}

// ---- TACCL sketches ---------------------------------------------------------------------------------

TEST(SketchTaccl, EveryRealSketchLoads) {
  BRAID_SKIP_WITHOUT_REALCASES();
  if (!fs::is_directory(kTacclSketches)) GTEST_SKIP() << kTacclSketches << " is absent";
  int loaded = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(kTacclSketches)) {
    if (e.path().extension() != ".json") continue;
    Result<Sketch> s = loadSketch(e.path().string());
    ASSERT_TRUE(s.isOk()) << e.path() << ": " << s.status().toString();
    Result<TacclSketch> raw = loadTacclSketch(e.path().string());
    ASSERT_TRUE(raw.isOk());
    EXPECT_EQ(s->source, e.path().string());
    EXPECT_EQ(s->name, e.path().stem().string());
    EXPECT_EQ(s->nodes, raw->nnodes);
    EXPECT_EQ(s->chunkup, raw->input_chunkup);
    EXPECT_EQ(s->symmetry, raw->symmetry_offsets);
    EXPECT_EQ(s->intranode_links, IntraLinks::kNvlink);
    // Writing it as Braid YAML and reading it back keeps every field.
    Result<Sketch> back = readSketchYaml(writeSketchYaml(*s), "back.yaml");
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    expectSameFields(*s, *back);
    ++loaded;
  }
  EXPECT_EQ(loaded, 18);  // the 18 JSON files of realcases/taccl/sketch
}

TEST(SketchTaccl, Sk1Dgx2N2) {
  BRAID_SKIP_WITHOUT_REALCASES();
  Result<Sketch> s = loadSketch((kTacclSketches / "sk1-dgx2-n2.json").string());
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->name, "sk1-dgx2-n2");
  EXPECT_EQ(s->nodes, 2);
  EXPECT_EQ(s->intranode_strategy, "switch");
  ASSERT_EQ(s->switches.size(), 1u);
  EXPECT_EQ(s->switches[0].gpus.size(), 16u);
  EXPECT_EQ(s->switches[0].hyperedge, "uc-min");
  // Odd GPU 2k+1 sends to GPU 2k: 1->0, 3->2, ..., 15->14; it relays GPUs 2k and 2k+1.
  IdMap senders, relays;
  for (int k = 0; k < 8; ++k) {
    senders[2 * k + 1] = {2 * k};
    relays[2 * k + 1] = {2 * k, 2 * k + 1};
  }
  EXPECT_EQ(s->internode_conn, InterConn::kMap);
  EXPECT_EQ(s->internode_map, senders);
  EXPECT_EQ(s->relay_for, relays);
  EXPECT_EQ(s->relay_for.at(1), (std::vector<int>{0, 1}));
  EXPECT_TRUE(s->enforce_ordering);
  EXPECT_EQ(s->symmetry, (Pairs{{2, 16}, {16, 32}}));
  EXPECT_EQ(s->chunkup, 2);
}

TEST(SketchTaccl, McrlSketches) {
  BRAID_SKIP_WITHOUT_REALCASES();
  // mcrl_sk-akmu-n3-gpu2-nonsymmetric: 3 nodes, strategy none, fully-connected, no symmetry.
  Result<Sketch> fc = loadSketch((kTacclSketches / "mcrl_sk-akmu-n3-gpu2-nonsymmetric.json").string());
  ASSERT_TRUE(fc.isOk()) << fc.status().toString();
  EXPECT_EQ(fc->nodes, 3);
  EXPECT_EQ(fc->intranode_strategy, "none");
  EXPECT_EQ(fc->internode_conn, InterConn::kFullyConnected);
  EXPECT_TRUE(fc->internode_map.empty());
  EXPECT_TRUE(fc->symmetry.empty());
  EXPECT_TRUE(fc->relay_for.empty());
  EXPECT_FALSE(fc->enforce_ordering);
  // mcrl_sk-akmu-n3-gpu4: one 4-GPU uc-min switch, GPU 3 -> GPU 3, node shift [4, 12].
  Result<Sketch> g4 = loadSketch((kTacclSketches / "mcrl_sk-akmu-n3-gpu4.json").string());
  ASSERT_TRUE(g4.isOk()) << g4.status().toString();
  EXPECT_EQ(g4->nodes, 3);
  EXPECT_EQ(g4->intranode_strategy, "switch");
  ASSERT_EQ(g4->switches.size(), 1u);
  EXPECT_EQ(g4->switches[0].gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g4->internode_conn, InterConn::kMap);
  EXPECT_EQ(g4->internode_map, (IdMap{{3, {3}}}));
  EXPECT_EQ(g4->symmetry, (Pairs{{4, 12}}));
  // sk3-ndv2-n2: direct-map; sk1-ndv2-n1: single node (no internode_sketch).
  Result<Sketch> dm = loadSketch((kTacclSketches / "sk3-ndv2-n2.json").string());
  ASSERT_TRUE(dm.isOk());
  EXPECT_EQ(dm->internode_conn, InterConn::kDirectMap);
  Result<Sketch> one = loadSketch((kTacclSketches / "sk-ndv2-n1-cUp6.json").string());
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(one->nodes, 1);
  EXPECT_EQ(one->chunkup, 6);
}

TEST(SketchTaccl, ShippedYamlEqualsConversion) {
  BRAID_SKIP_WITHOUT_REALCASES();
  for (const char* name : {"sk1-dgx2-n2", "sk1-ndv2-n2", "sk2-ndv2-n4"}) {
    Result<Sketch> yaml = loadSketch((kShippedSketches / (std::string(name) + ".yaml")).string());
    ASSERT_TRUE(yaml.isOk()) << yaml.status().toString();
    Result<Sketch> json = loadSketch((kTacclSketches / (std::string(name) + ".json")).string());
    ASSERT_TRUE(json.isOk()) << json.status().toString();
    expectSameFields(*json, *yaml);
    EXPECT_FALSE(yaml->notes.empty());  // the header comments
  }
}

// ---- checkSketch ------------------------------------------------------------------------------------

TEST(CheckSketch, AgainstTacclTopologies) {
  BRAID_SKIP_WITHOUT_REALCASES();
  struct Case {
    const char* sketch;
    const char* profile;
  };
  for (const Case& c : {Case{"sk1-dgx2-n2", "topo-dgx2-1MB"}, Case{"sk1-ndv2-n2", "topo-ndv2-1MB"},
                        Case{"sk2-ndv2-n4", "topo-ndv2-1MB"},
                        Case{"mcrl_sk-akmu-n3-gpu4", "mcrl_akmu-A-GPU4-P2P-1-GDRLEVEL-SYS-GDRREAD-1-1MB"}}) {
    const std::string sketch_path = (kTacclSketches / (std::string(c.sketch) + ".json")).string();
    Result<TacclSketch> taccl = loadTacclSketch(sketch_path);
    ASSERT_TRUE(taccl.isOk()) << taccl.status().toString();
    Result<Topology> topo = loadTacclTopology((kTacclTopos / (std::string(c.profile) + ".json")).string(), *taccl);
    ASSERT_TRUE(topo.isOk()) << topo.status().toString();
    Status ok = checkSketch(sketchFromTaccl(*taccl), *topo);
    EXPECT_TRUE(ok.isOk()) << c.sketch << ": " << ok.toString();
  }
  // The DGX-2 sketch (16 GPUs per node, senders 1..15) on two NDv2 nodes (8 GPUs per node): sender 9 is the
  // first sender of the map (keys in order 1, 3, 5, 7, 9) beyond local id 7.
  Result<TacclSketch> ndv2 = loadTacclSketch((kTacclSketches / "sk1-ndv2-n2.json").string());
  ASSERT_TRUE(ndv2.isOk());
  Result<Topology> topo = loadTacclTopology((kTacclTopos / "topo-ndv2-1MB.json").string(), *ndv2);
  ASSERT_TRUE(topo.isOk()) << topo.status().toString();
  Sketch dgx2;
  dgx2.source = "sk1.yaml";
  dgx2.nodes = 2;
  dgx2.internode_conn = InterConn::kMap;
  for (int k = 0; k < 8; ++k) dgx2.internode_map[2 * k + 1] = {2 * k};
  Status bad = checkSketch(dgx2, *topo);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "sk1.yaml: internode.connections: sender 9 does not exist (8 GPUs per node)");
}

TEST(CheckSketch, AgainstShippedTopologies) {
  const Topology ndv2 = shipped("ndv2-x2");
  ASSERT_EQ(ndv2.numNodes(), 2);
  Result<Sketch> two = loadSketch((kShippedSketches / "sk1-ndv2-n2.yaml").string());
  ASSERT_TRUE(two.isOk()) << two.status().toString();
  EXPECT_TRUE(checkSketch(*two, ndv2).isOk()) << checkSketch(*two, ndv2).toString();

  Result<Sketch> four = loadSketch((kShippedSketches / "sk2-ndv2-n4.yaml").string());
  ASSERT_TRUE(four.isOk()) << four.status().toString();
  Status bad = checkSketch(*four, ndv2);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), four->source + ": nodes: the sketch is for 4 node(s), topology ndv2-x2 has 2");

  // nodes 0 = any: the same sketch without a node count fits, since [8, 32] ... does not divide 16 GPUs.
  Sketch any = *four;
  any.nodes = 0;
  Status sym = checkSketch(any, ndv2);
  EXPECT_EQ(sym.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sym.message().find("symmetry[0]: group 32 does not divide the 16 GPUs"), std::string::npos)
      << sym.message();
  any.symmetry = {{8, 16}};
  EXPECT_TRUE(checkSketch(any, ndv2).isOk());
}

TEST(CheckSketch, FieldErrors) {
  const Topology dgx1 = shipped("dgx1-v100");  // one node, 8 GPUs
  auto message = [&](const Sketch& s) { return checkSketch(s, dgx1).message(); };
  Sketch base;
  base.source = "x.yaml";
  ASSERT_TRUE(checkSketch(base, dgx1).isOk());

  Sketch pairs = base;
  pairs.intranode_links = IntraLinks::kExplicit;
  pairs.intranode_pairs = {{0, 1}, {7, 8}};
  EXPECT_EQ(message(pairs), "x.yaml: intranode.links: GPU 8 does not exist (8 GPUs per node)");

  Sketch sw = base;
  sw.intranode_strategy = "switch";
  sw.switches = {{{0, 1}, "uc-min"}, {{6, 7, 12}, "uc-max"}};
  EXPECT_EQ(message(sw), "x.yaml: intranode.switches[1].gpus: GPU 12 does not exist (8 GPUs per node)");

  Sketch recv = base;
  recv.internode_conn = InterConn::kMap;
  recv.internode_map = {{0, {9}}};
  EXPECT_EQ(message(recv), "x.yaml: internode.connections: receiver 9 does not exist (8 GPUs per node)");

  Sketch relay = base;
  relay.relay_for = {{2, {3, 8}}};
  EXPECT_EQ(message(relay), "x.yaml: internode.relay_for: GPU 8 does not exist (8 GPUs per node)");

  Sketch sym = base;
  sym.symmetry = {{-1, 8}};
  EXPECT_EQ(message(sym), "x.yaml: symmetry[0]: offset -1 is negative");
  sym.symmetry = {{1, 0}};
  EXPECT_EQ(message(sym), "x.yaml: symmetry[0]: group 0 must be positive");
  sym.symmetry = {{1, 3}};
  EXPECT_EQ(message(sym), "x.yaml: symmetry[0]: group 3 does not divide the 8 GPUs of topology dgx1-v100");

  Sketch chunk = base;
  chunk.chunkup = 0;
  EXPECT_EQ(message(chunk), "x.yaml: chunkup: 0 must be at least 1");
  Sketch slack = base;
  slack.path_slack = 5;
  EXPECT_EQ(message(slack), "x.yaml: path_slack: 5 is out of range [0, 4]");
}

TEST(CheckSketch, NodesOfDifferentSizes) {
  // Two nodes: two GPUs, then one.
  Topology t;
  t.name = "uneven";
  const int n0 = t.addNode("n0");
  const int n1 = t.addNode("n1");
  const int g0 = t.addVertex(VertexKind::kGpu, n0);
  const int g1 = t.addVertex(VertexKind::kGpu, n0);
  t.addVertex(VertexKind::kGpu, n1);
  t.addDuplexLink(g0, g1, LinkKind::kNvlink, 20, 0.7);
  Sketch s;
  s.source = "u.yaml";
  Status bad = checkSketch(s, t);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message().rfind("u.yaml: nodes: node n1 of topology uneven has 1 GPUs, node n0 has 2", 0), 0u)
      << bad.message();
  EXPECT_EQ(deriveSketch(t, CollectiveKind::kAllGather).status().code(), StatusCode::kInvalidArgument);
}

// ---- deriveSketch -----------------------------------------------------------------------------------

TEST(DeriveSketch, Dgx1) {
  const Topology t = shipped("dgx1-v100");
  Result<Sketch> s = deriveSketch(t, CollectiveKind::kAllGather);
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->source, "derived:dgx1-v100");
  EXPECT_EQ(s->nodes, 1);
  EXPECT_EQ(s->intranode_links, IntraLinks::kNvlink);
  // One node: no relays.
  EXPECT_TRUE(s->internode_map.empty());
  EXPECT_TRUE(s->relay_for.empty());
  // Every GPU has 2+2+1+1 = 6 NVLink lanes (two NV2 and two NV1 neighbours, topologies/dgx1-v100.yaml) and
  // receives 7c chunks in an all-gather: 7c divisible by 6 first at c = 6 (TACCL's sk-ndv2-n1-cUp6); the derived
  // sketch takes a multiple of that (smaller pieces, less pipeline fill at relays): 3x for all-gather.
  EXPECT_EQ(s->chunkup, 18);
  // All-reduce takes 2x the balancing count, all-to-all 1x (measured choices, synthesizer/sketch.cc).
  EXPECT_EQ(deriveSketch(t, CollectiveKind::kAllReduce)->chunkup, 12);
  EXPECT_EQ(deriveSketch(t, CollectiveKind::kAllToAll)->chunkup, 6);
  // Eight GPUs with four NVLink neighbours each: not complete, no NVSwitch.
  EXPECT_EQ(s->path_slack, 1);
  // Rotating by one maps the NV2 pair 0-3 onto 1-4, which is not linked (hybrid cube-mesh): no rotation.
  EXPECT_TRUE(s->symmetry.empty());
  EXPECT_GE(s->notes.size(), 5u);
  EXPECT_TRUE(checkSketch(*s, t).isOk());
}

TEST(DeriveSketch, DgxA100x2) {
  const Topology t = shipped("dgx-a100-x2");
  Result<Sketch> s = deriveSketch(t, CollectiveKind::kAllGather);
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->nodes, 2);
  // GPUs 2k, 2k+1 and NICs 2k, 2k+1 share PCIe switch k: each GPU ties between two PIX NICs and NCCL's spread
  // (local index mod 2) gives GPU i NIC i, a NIC of its own: direct-map.
  EXPECT_EQ(s->internode_conn, InterConn::kDirectMap);
  EXPECT_TRUE(s->internode_map.empty());
  EXPECT_TRUE(s->relay_for.empty());
  // Both nodes are dgx-a100: node shift [8, 16]. The NVSwitch gives every pair the same route and the rail
  // network joins NIC i to NIC i, so rotation by one inside a node holds as well: [1, 8].
  EXPECT_EQ(s->symmetry, (Pairs{{8, 16}, {1, 8}}));
  EXPECT_EQ(s->chunkup, 1);
  EXPECT_EQ(s->path_slack, 0);
  EXPECT_TRUE(checkSketch(*s, t).isOk());

  // Broadcast has a root: no symmetry.
  Result<Sketch> b = deriveSketch(t, CollectiveKind::kBroadcast);
  ASSERT_TRUE(b.isOk());
  EXPECT_TRUE(b->symmetry.empty());
}

TEST(DeriveSketch, Ndv2x2) {
  const Topology t = shipped("ndv2-x2");
  // By hand from topologies/ndv2-x2.yaml: one NIC per node on pcie1 with gpu2 and gpu3 (PIX, 12 GB/s, two hops);
  // gpu0/gpu1 reach it through pcie0 - cpu0 - pcie1 (PHB), gpu4..7 across the 10 GB/s UPI link (SYS).
  std::map<int, std::string> klass;
  for (const NicAffinity& a : nicAffinity(t)) {
    if (t.vertices[t.gpuVertex(a.rank)].node == 0) klass[a.rank] = a.path_class;
  }
  EXPECT_EQ(klass,
            (std::map<int, std::string>{
                {0, "PHB"}, {1, "PHB"}, {2, "PIX"}, {3, "PIX"}, {4, "SYS"}, {5, "SYS"}, {6, "SYS"}, {7, "SYS"}}));
  Result<Sketch> s = deriveSketch(t, CollectiveKind::kAllGather);
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  // All eight GPUs share the NIC: the nearest (PIX) GPUs relay, the first sends, the second receives.
  EXPECT_EQ(s->internode_conn, InterConn::kMap);
  EXPECT_EQ(s->internode_map, (IdMap{{2, {3}}}));
  EXPECT_TRUE(s->relay_for.empty());
  // Same template on both nodes: node shift [8, 16]; one sender per NIC covers 8 GPUs, so the rotation
  // candidate is by 8, the identity: none.
  EXPECT_EQ(s->symmetry, (Pairs{{8, 16}}));
  EXPECT_EQ(s->chunkup, 1);  // several nodes: the NIC is the bottleneck
  EXPECT_EQ(s->path_slack, 0);
  EXPECT_TRUE(checkSketch(*s, t).isOk());
}

TEST(DeriveSketch, Dgx2x2) {
  const Topology t = shipped("dgx2-x2");
  Result<Sketch> s = deriveSketch(t, CollectiveKind::kAllToAll);
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  // NIC k sits on PCIe switch k with GPUs 2k and 2k+1 (PIX for both): two GPUs per NIC, so GPU 2k sends to
  // GPU 2k+1 of the other node.
  IdMap expected;
  for (int k = 0; k < 8; ++k) expected[2 * k] = {2 * k + 1};
  EXPECT_EQ(s->internode_conn, InterConn::kMap);
  EXPECT_EQ(s->internode_map, expected);
  // Node shift [16, 32]; rotation by the two GPUs per NIC maps the senders onto themselves and NVSwitch routes
  // are all alike: [2, 16] (TACCL's sk1-dgx2-n2 symmetry).
  EXPECT_EQ(s->symmetry, (Pairs{{16, 32}, {2, 16}}));
  EXPECT_EQ(s->chunkup, 1);
  EXPECT_EQ(s->path_slack, 0);
  EXPECT_TRUE(checkSketch(*s, t).isOk());
}

TEST(DeriveSketch, SingleNodes) {
  // DGX A100: NVSwitch, all pairs alike: rotation [1, 8]; no GPU-GPU link, chunkup 1, no slack.
  const Topology a100 = shipped("dgx-a100-x1");
  Result<Sketch> a = deriveSketch(a100, CollectiveKind::kAllReduce);
  ASSERT_TRUE(a.isOk()) << a.status().toString();
  EXPECT_EQ(a->symmetry, (Pairs{{1, 8}}));
  EXPECT_EQ(a->chunkup, 1);
  EXPECT_EQ(a->path_slack, 0);
  EXPECT_EQ(a->intranode_links, IntraLinks::kNvlink);

  // PCIe only: every pair may talk. Pairs in one socket meet at their PCIe switch (24 GB/s), pairs across the
  // sockets cross the 10 GB/s inter-socket link (topologies/pcie-2s4g.yaml): uneven routes, so slack 1 lets a
  // chunk cross once and be relayed.
  const Topology pcie = shipped("pcie-2s4g");
  Result<Sketch> p = deriveSketch(pcie, CollectiveKind::kAllGather);
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  EXPECT_EQ(p->intranode_links, IntraLinks::kAll);
  EXPECT_EQ(p->path_slack, 1);
  EXPECT_EQ(p->chunkup, 1);

  // NVLink islands (two bridged pairs on two sockets, realcases RC-28 shape): NVLink does not connect the node,
  // so every routable pair may talk, and the routes are uneven (NVLink pair vs SYS).
  {
    Topology islands;
    islands.name = "islands";
    const int node = islands.addNode("node0");
    int g[4];
    for (int& v : g) v = islands.addVertex(VertexKind::kGpu, node);
    const int cpu0 = islands.addVertex(VertexKind::kCpu, node, "cpu0");
    const int cpu1 = islands.addVertex(VertexKind::kCpu, node, "cpu1");
    islands.addDuplexLink(g[0], g[1], LinkKind::kNvlink, 50, 0.7, 4);
    islands.addDuplexLink(g[2], g[3], LinkKind::kNvlink, 50, 0.7, 4);
    islands.addDuplexLink(g[0], cpu0, LinkKind::kPcie, 12, 1.0);
    islands.addDuplexLink(g[1], cpu0, LinkKind::kPcie, 12, 1.0);
    islands.addDuplexLink(g[2], cpu1, LinkKind::kPcie, 12, 1.0);
    islands.addDuplexLink(g[3], cpu1, LinkKind::kPcie, 12, 1.0);
    islands.addDuplexLink(cpu0, cpu1, LinkKind::kSys, 6, 1.0);
    Result<Sketch> i = deriveSketch(islands, CollectiveKind::kAllGather);
    ASSERT_TRUE(i.isOk()) << i.status().toString();
    EXPECT_EQ(i->intranode_links, IntraLinks::kAll);
    EXPECT_EQ(i->path_slack, 1);
  }

  Topology empty;
  empty.name = "empty";
  EXPECT_EQ(deriveSketch(empty, CollectiveKind::kAllGather).status().code(), StatusCode::kInvalidArgument);
}

TEST(DeriveSketch, RoundTripsThroughYaml) {
  for (const char* name : {"dgx1-v100", "dgx-a100-x2", "ndv2-x2", "dgx2-x2"}) {
    const Topology t = shipped(name);
    Result<Sketch> s = deriveSketch(t, CollectiveKind::kAllGather);
    ASSERT_TRUE(s.isOk()) << name << ": " << s.status().toString();
    Result<Sketch> back = readSketchYaml(writeSketchYaml(*s), "d.yaml");
    ASSERT_TRUE(back.isOk()) << back.status().toString() << "\n" << writeSketchYaml(*s);
    expectSameFields(*s, *back);
    EXPECT_EQ(back->notes, s->notes);
  }
}

}  // namespace
}  // namespace braid
