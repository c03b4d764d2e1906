// NVLink SHARP all-reduce (NCCL's NVLS on one node, NVLSTree across nodes) emulated in the IR: each node's
// NVSwitch becomes a pseudo-rank that reduces and multicasts. See include/braid/nccl_model.h.
#include <fmt/format.h>

#include <vector>

#include "braid/nccl_model.h"
#include "braid/program_builder.h"

namespace braid {
namespace {

using algos::Loc;
using algos::ProgramBuilder;
using algos::StepRef;

// The one NVSwitch vertex of a node linked to every GPU of that node, or -1.
int nodeNvSwitch(const Topology& t, int node) {
  int found = -1;
  for (const Vertex& v : t.vertices) {
    if (v.kind != VertexKind::kNvSwitch || v.node != node) continue;
    if (found >= 0) return -1;  // several switch vertices: not the folded model
    found = v.id;
  }
  if (found < 0) return -1;
  for (int g : t.nodes[node].gpus) {
    if (t.linksBetween(g, found).empty() || t.linksBetween(found, g).empty()) return -1;
  }
  return found;
}

}  // namespace

double ncclNvlsEfficiency(int arch) {
  // nccl@2.28.9 src/graph/tuning.cc nvlsEfficiency[] (nccl_plugins.md §4.2).
  switch (arch) {
    case 2: return 0.85;
    case 3: return 0.74;
    default: return 0.0;
  }
}

Result<NvlsProgram> ncclNvlsProgram(const Topology& topology, int channels, int rounds, double nvls_efficiency) {
  if (!(nvls_efficiency > 0 && nvls_efficiency <= 1)) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("NVLS emulation: nvls_efficiency {} is not in (0, 1]", nvls_efficiency));
  }
  if (channels < 1 || rounds < channels) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("NVLS emulation: need rounds ({}) >= channels ({}) >= 1", rounds, channels));
  }
  const int num_nodes = topology.numNodes();
  const int num_gpus = topology.numGpus();
  if (num_nodes < 1 || num_gpus < 2) {
    return Status(StatusCode::kUnsupported, "NVLS emulation: needs at least one node with 2 or more GPUs");
  }
  if ((num_nodes & (num_nodes - 1)) != 0) {
    return Status(
        StatusCode::kUnsupported,
        fmt::format("NVLS emulation: {} nodes is not a power of two (inter-node recursive doubling)", num_nodes));
  }
  const int n = static_cast<int>(topology.nodes[0].gpus.size());
  std::vector<int> switch_vertex(num_nodes, -1);
  for (int a = 0; a < num_nodes; ++a) {
    if (static_cast<int>(topology.nodes[a].gpus.size()) != n) {
      return Status(StatusCode::kUnsupported, fmt::format("NVLS emulation: node {} has {} GPUs, node 0 has {}",
                                                          topology.nodes[a].name, topology.nodes[a].gpus.size(), n));
    }
    switch_vertex[a] = nodeNvSwitch(topology, a);
    if (switch_vertex[a] < 0) {
      return Status(
          StatusCode::kUnsupported,
          fmt::format("NVLS emulation: node {} has no single NVSwitch linked to all its GPUs", topology.nodes[a].name));
    }
  }

  NvlsProgram program;
  program.gpu_ranks = num_gpus;
  program.topology = topology;
  program.topology.name = topology.name + "+nvls";
  for (int a = 0; a < num_nodes; ++a) {
    Vertex& v = program.topology.vertices[switch_vertex[a]];
    v.kind = VertexKind::kGpu;
    v.rank = num_gpus + a;
    v.name = fmt::format("gpu{}", v.rank);
  }
  for (Link& l : program.topology.links) {
    const bool src_switch = program.topology.vertices[l.src].rank >= num_gpus;
    const bool dst_switch = program.topology.vertices[l.dst].rank >= num_gpus;
    if (src_switch || dst_switch) l.bandwidth_gbps *= nvls_efficiency;
  }

  // rank_of[a][j]: collective rank of GPU j of node a.
  std::vector<std::vector<int>> rank_of(num_nodes, std::vector<int>(n));
  for (int a = 0; a < num_nodes; ++a) {
    for (int j = 0; j < n; ++j) rank_of[a][j] = topology.vertices[topology.nodes[a].gpus[j]].rank;
  }
  int levels = 0;
  while ((1 << levels) < num_nodes) ++levels;

  CollectiveSpec spec;
  spec.kind = CollectiveKind::kAllReduce;
  spec.num_ranks = num_gpus + num_nodes;
  spec.chunk_factor = n * rounds;
  spec.in_place = false;
  ProgramBuilder b(spec, /*refs_in_place=*/false, /*scale=*/1);

  // Threadblocks per emulated channel c, each moving data one way so that slices pipeline (as NVLS runs its
  // reduce and multicast in separate warps): channel 4c: GPU j -> switch contributions (GPU `up`, switch
  // `in[j]`); 4c+1: switch -> GPU j reduced share (switch `red[j]`, GPU `red`) and the inter-node exchange
  // (GPU `xs[d]` sends, `xr[d]` receives); 4c+2: GPU j -> switch store (GPU `st`, switch `st[j]`); 4c+3:
  // switch -> GPU j multicast (switch `mc[j]`, GPU `mc`).
  struct GpuTbs {
    int up = -1, red = -1, st = -1, mc = -1;
    std::vector<int> xs, xr;
  };
  struct SwitchTbs {
    std::vector<int> in, red, st, mc;
  };
  std::vector<std::vector<std::vector<GpuTbs>>> gtb(
      channels, std::vector<std::vector<GpuTbs>>(num_nodes, std::vector<GpuTbs>(n)));
  std::vector<std::vector<SwitchTbs>> stb(channels, std::vector<SwitchTbs>(num_nodes));
  for (int c = 0; c < channels; ++c) {
    for (int a = 0; a < num_nodes; ++a) {
      const int s = num_gpus + a;
      for (int j = 0; j < n; ++j) {
        const int g = rank_of[a][j];
        GpuTbs& t = gtb[c][a][j];
        t.up = b.newTb(g, s, -1, 4 * c);
        t.red = b.newTb(g, -1, s, 4 * c + 1);
        t.st = b.newTb(g, s, -1, 4 * c + 2);
        t.mc = b.newTb(g, -1, s, 4 * c + 3);
        for (int d = 0; d < levels; ++d) {
          const int partner = rank_of[a ^ (1 << d)][j];
          t.xs.push_back(b.newTb(g, partner, -1, 4 * c + 1));
          t.xr.push_back(b.newTb(g, -1, partner, 4 * c + 1));
        }
        stb[c][a].in.push_back(b.newTb(s, -1, g, 4 * c));
        stb[c][a].red.push_back(b.newTb(s, g, -1, 4 * c + 1));
        stb[c][a].st.push_back(b.newTb(s, -1, g, 4 * c + 2));
        stb[c][a].mc.push_back(b.newTb(s, g, -1, 4 * c + 3));
      }
    }
  }

  const int reduced_base = 0;          // switch scratch: reduced shares
  const int result_base = n * rounds;  // switch scratch: stored shares to multicast
  for (int r = 0; r < rounds; ++r) {
    const int c = r % channels;
    // 1. Every GPU pushes its share-i part of round r to its node's switch.
    for (int a = 0; a < num_nodes; ++a) {
      for (int j = 0; j < n; ++j) {
        const int g = rank_of[a][j];
        for (int i = 0; i < n; ++i) b.send(g, gtb[c][a][j].up, b.in(g, r * n + i), 1);
      }
    }
    // 2. The switch reduces share i over its GPUs (a chain across its receiving threadblocks).
    std::vector<std::vector<StepRef>> reduced(num_nodes, std::vector<StepRef>(n));
    for (int a = 0; a < num_nodes; ++a) {
      const int s = num_gpus + a;
      for (int i = 0; i < n; ++i) {
        const Loc red = ProgramBuilder::scratch(reduced_base + r * n + i);
        StepRef prev;
        for (int j = 0; j < n; ++j) {
          const int tb = stb[c][a].in[j];
          prev = j == 0 ? b.recv(s, tb, red, 1) : b.recvReduceCopy(s, tb, red, red, 1, {prev});
        }
        reduced[a][i] = prev;
      }
    }
    // 3. Share i goes to GPU i, which combines it across nodes and stores it to the switch.
    std::vector<std::vector<StepRef>> stored(num_nodes, std::vector<StepRef>(n));
    for (int a = 0; a < num_nodes; ++a) {
      const int s = num_gpus + a;
      for (int i = 0; i < n; ++i) {
        const int g = rank_of[a][i];
        const Loc share = b.out(g, r * n + i);
        b.send(s, stb[c][a].red[i], ProgramBuilder::scratch(reduced_base + r * n + i), 1, {reduced[a][i]});
        StepRef last = b.recv(g, gtb[c][a][i].red, share, 1);
        for (int d = 0; d < levels; ++d) {
          const StepRef sent = b.send(g, gtb[c][a][i].xs[d], share, 1, {last});
          last = b.recvReduceCopy(g, gtb[c][a][i].xr[d], share, share, 1, {sent});
        }
        b.send(g, gtb[c][a][i].st, share, 1, {last});
        stored[a][i] = b.recv(s, stb[c][a].st[i], ProgramBuilder::scratch(result_base + r * n + i), 1);
      }
    }
    // 4. The switch multicasts every stored share to every GPU of its node.
    for (int a = 0; a < num_nodes; ++a) {
      const int s = num_gpus + a;
      for (int j = 0; j < n; ++j) {
        const int g = rank_of[a][j];
        for (int i = 0; i < n; ++i) {
          b.send(s, stb[c][a].mc[j], ProgramBuilder::scratch(result_base + r * n + i), 1, {stored[a][i]});
          b.recv(g, gtb[c][a][j].mc, b.out(g, r * n + i), 1);
        }
      }
    }
  }

  program.algorithm.name = levels == 0 ? "nccl-nvls" : "nccl-nvlstree";
  program.algorithm.collective = CollectiveKind::kAllReduce;
  program.algorithm.collective_name = "allreduce";
  program.algorithm.protocol = Protocol::kSimple;
  program.algorithm.in_place = false;
  program.algorithm.out_of_place = true;
  program.algorithm.provenance.generator = "braid nccl-nvls emulation";
  program.algorithm.provenance.topology = topology.name;
  Status st = b.finish(program.algorithm);
  if (!st.isOk()) return st;
  return program;
}

}  // namespace braid
