// `nvidia-smi topo -m` importer.
//
// The matrix gives, for every pair of devices (GPUs and NICs), the closest thing joining them (nvidia-smi's
// legend): NV# = a bonded set of # NVLinks; PIX = at most one PCIe bridge; PXB = several PCIe bridges without
// the host bridge; PHB = through a PCIe host bridge (the CPU); NODE = between host bridges of one NUMA node;
// SYS (older drivers: SOC) = across the SMP interconnect between NUMA nodes. X is the device itself. nvidia-smi
// prints one class per pair in both of its cells; a matrix whose two cells of a pair differ is refused.
//
// Reconstruction: devices whose class is PIX..NODE, or GPUs with the same NUMA (else CPU) affinity, share a CPU
// vertex; CPU vertices are joined pairwise by SYS links. Inside a CPU the devices are clustered by class
// (PHB → host bridge, PXB → switch tree, PIX → one switch) and every cluster of two or more devices that is
// a proper part of its parent becomes a PCIe switch vertex; inside a PXB cluster every PIX group and every lone
// device gets a leaf switch under the cluster's upstream switch, so PIX pairs share one switch and PXB pairs
// cross three. Topology::route between two devices thus crosses switches/CPUs exactly as the class says. NV# pairs
// become direct NVLinks with # lanes, or, when all GPUs are NV-joined with one count k and (n-1)·k exceeds the 18
// NVLink ports of any GPU, one NVSwitch vertex with k lanes per GPU. The matrix carries no bandwidths: the GPU
// generation is inferred from the NVLink lane count per GPU and NCCL's per-lane and PCIe constants are used
// (../shared/reference/nccl_plugins.md §4.5); every such assumption is recorded in Topology::notes.
//
// Inter-socket (SYS) bandwidth: the matrix never names the CPU, so the CPU of NVIDIA's reference machine for the
// inferred GPU generation is assumed and NCCL's per-CPU QPI/UPI/xGMI constant used (§4.5: BDW 6, SKL 10, SRP 22,
// AMD 16): P100 and V100 with direct NVLinks = DGX-1 (Xeon E5-2698 v4, Broadwell) 6; V100 on NVSwitch = DGX-2
// (Xeon Platinum 8168, Skylake) 10; A100 = DGX A100 (EPYC 7742) 16; H100/H800 = DGX H100 (Xeon Platinum 8480C,
// Sapphire Rapids) 22. The shipped topologies/dgx1-v100.yaml, dgx2-x1.yaml, dgx-a100-x1.yaml and dgx-h100-x1.yaml
// use the same values. When the generation is not recognised (PCIe only, NV4 bridges, odd lane counts) no
// machine is implied and NCCL's Skylake class (10; it also covers Ice Lake, Intel's first PCIe Gen4 CPU) is
// assumed. The note names the CPU; cloud machines of one GPU generation may differ (NDv2: Skylake, 10).

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "braid/importers.h"

namespace braid {

namespace {

constexpr double kNvlinkDirectAlphaUs = 0.6;  // NCCL hwLat NVLink (LL) for a direct hop
constexpr double kNvswitchHopAlphaUs = 0.3;   // half of it per GPU-NVSwitch hop
constexpr double kPcieHopAlphaUs = 0.5;       // half of NCCL's PCI hwLat (1.0) per hop
constexpr double kSysAlphaUs = 1.0;
constexpr int kMaxNumaId = 1 << 20;        // the largest numa the Braid YAML reads back
constexpr int kMaxNvlinkPortsPerGpu = 18;  // H100/B200 have 18 NVLink ports, no GPU has more

// Relation levels; larger = farther.
constexpr int kSelf = 0;
constexpr int kPix = 1;
constexpr int kPxb = 2;
constexpr int kPhb = 3;
constexpr int kNode = 4;
constexpr int kSys = 5;
constexpr int kNvOnly = -1;   // NV#: the PCIe class of the pair is not shown
constexpr int kMissing = -2;  // no cell read yet

struct Cell {
  int level = kMissing;
  int lanes = 0;     // NV# lanes
  std::string text;  // the cell as written ("NV2", "SYS")
};

std::string stripAnsiAndHash(const std::string& raw) {
  std::string s;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\x1b' && i + 1 < raw.size() && raw[i + 1] == '[') {
      i += 2;
      while (i < raw.size() && !std::isalpha(static_cast<unsigned char>(raw[i]))) ++i;
      continue;
    }
    if (raw[i] == '\r') continue;
    s += raw[i];
  }
  size_t b = 0;
  while (b < s.size() && (std::isspace(static_cast<unsigned char>(s[b])) || s[b] == '#')) ++b;
  return s.substr(b);
}

std::vector<std::string> tokens(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string t;
  while (in >> t) out.push_back(t);
  return out;
}

bool isGpuColumn(const std::string& t, int* index = nullptr) {
  if (t.size() < 4 || t.compare(0, 3, "GPU") != 0) return false;
  if (t.size() > 9) return false;
  for (size_t i = 3; i < t.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) return false;
  }
  if (index) *index = std::stoi(t.substr(3));
  return true;
}

// Parses one matrix cell. nullopt when it is not an nvidia-smi class.
std::optional<Cell> parseCell(const std::string& raw) {
  std::string t;
  for (char c : raw) t += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  Cell cell;
  cell.text = raw;
  if (t == "X")
    cell.level = kSelf;
  else if (t == "PIX")
    cell.level = kPix;
  else if (t == "PXB")
    cell.level = kPxb;
  else if (t == "PHB")
    cell.level = kPhb;
  else if (t == "NODE")
    cell.level = kNode;
  else if (t == "SYS" || t == "SOC")
    cell.level = kSys;
  else if (t.size() > 2 && t.size() <= 5 && t.compare(0, 2, "NV") == 0 &&
           std::all_of(t.begin() + 2, t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    cell.level = kNvOnly;
    cell.lanes = std::stoi(t.substr(2));
    if (cell.lanes < 1 || cell.lanes > 64) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return cell;
}

bool isCellToken(const std::string& t) { return parseCell(t).has_value(); }

// A NUMA Affinity cell as a NUMA node id: digits only, at most kMaxNumaId. nullopt otherwise ("N/A", "0-1", "-1").
std::optional<int> parseNuma(const std::string& t) {
  if (t.empty() || t.size() > 7) return std::nullopt;
  for (char c : t) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  const int v = std::stoi(t);
  if (v > kMaxNumaId) return std::nullopt;
  return v;
}

struct Device {
  std::string column;  // header name
  bool gpu = false;
  int row_line = 0;
  std::string cpu_affinity;
  std::string numa_affinity;
  std::optional<int> numa;  // numa_affinity as a NUMA node id, when it is one
  std::string name;         // vertex name (NIC legend name for NICs)
};

class DisjointSets {
 public:
  explicit DisjointSets(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int find(int x) { return parent_[x] == x ? x : parent_[x] = find(parent_[x]); }
  void unite(int a, int b) { parent_[find(a)] = find(b); }

 private:
  std::vector<int> parent_;
};

// NCCL's inter-socket bandwidths by CPU (nccl@2.28.9 src/graph/topo.h; nccl_plugins.md §4.5), GB/s.
constexpr double kBroadwellSysGbps = 6.0;
constexpr double kSkylakeSysGbps = 10.0;
constexpr double kSapphireRapidsSysGbps = 22.0;
constexpr double kAmdSysGbps = 16.0;

// CPU assumed for the inter-socket link and NCCL's bandwidth for it.
struct CpuGuess {
  std::string what;
  double sys_gbps;
};

// GPU generation guessed from NVLink lanes per GPU: per-lane NVLink and x16 PCIe bandwidth (GB/s), and the CPU of
// the reference machine of that generation.
struct Generation {
  std::string what;
  double lane_gbps;
  double pcie_gbps;
  CpuGuess cpu;
  std::string gpu_model;  // recorded on the GPU vertices ("H100/H800 (sm90)"); empty when not recognised
};

const CpuGuess kDgx1Cpu{"Intel Xeon E5-2698 v4 (Broadwell) of the DGX-1: 6 GB/s (NCCL BDW)", kBroadwellSysGbps};
const CpuGuess kDgx2Cpu{"Intel Xeon Platinum 8168 (Skylake) of the DGX-2: 10 GB/s (NCCL SKL)", kSkylakeSysGbps};
const CpuGuess kDgxA100Cpu{"AMD EPYC 7742 of the DGX A100: 16 GB/s (NCCL AMD)", kAmdSysGbps};
const CpuGuess kDgxH100Cpu{"Intel Xeon Platinum 8480C (Sapphire Rapids) of the DGX H100: 22 GB/s (NCCL SRP)",
                           kSapphireRapidsSysGbps};
const CpuGuess kUnknownCpu{
    "no reference machine for this GPU generation: 10 GB/s (NCCL's Skylake class, which also covers Ice Lake)",
    kSkylakeSysGbps};

Generation inferGeneration(int lanes_per_gpu, int max_pair_lanes, bool nvswitch) {
  // NCCL per-lane: SM60 18, SM70 20, SM80 20, SM86 12, SM90 20.6; PCIe x16: Gen3 12, Gen4 24, Gen5 48.
  if (lanes_per_gpu == 0) {
    return {"no NVLink in the matrix: PCIe assumed Gen4 x16 (24 GB/s)", 20.0, 24.0, kUnknownCpu, ""};
  }
  if (lanes_per_gpu == 4 && max_pair_lanes == 1) {
    return {"4 single NVLinks per GPU looks like P100 (SM60): 18 GB/s per lane, PCIe Gen3 x16 (12 GB/s)", 18.0, 12.0,
            kDgx1Cpu, "P100 (sm60)"};
  }
  if (lanes_per_gpu == 6) {
    if (nvswitch) {
      return {
          "6 NVLinks per GPU into an NVSwitch looks like V100 in a DGX-2 (SM70): 20 GB/s per lane, PCIe Gen3 "
          "x16 (12 GB/s)",
          20.0, 12.0, kDgx2Cpu, "V100 (sm70)"};
    }
    return {"6 NVLinks per GPU looks like V100 (SM70): 20 GB/s per lane, PCIe Gen3 x16 (12 GB/s)", 20.0, 12.0, kDgx1Cpu,
            "V100 (sm70)"};
  }
  if (lanes_per_gpu == 4 && !nvswitch) {
    return {"NV4 bridges look like Ampere workstation GPUs (SM86): 12 GB/s per lane, PCIe Gen4 x16 (24 GB/s)", 12.0,
            24.0, kUnknownCpu, "RTX 3090/A6000 class (sm86)"};
  }
  if (lanes_per_gpu == 12) {
    return {"12 NVLinks per GPU looks like A100 (SM80): 20 GB/s per lane, PCIe Gen4 x16 (24 GB/s)", 20.0, 24.0,
            kDgxA100Cpu, "A100/A800 (sm80)"};
  }
  if (lanes_per_gpu == 18 || (lanes_per_gpu == 8 && nvswitch)) {
    return {fmt::format("{} NVLinks per GPU looks like H100/H800 (SM90): 20.6 GB/s per lane, PCIe Gen5 x16 (48 GB/s)",
                        lanes_per_gpu),
            20.6, 48.0, kDgxH100Cpu, "H100/H800 (sm90)"};
  }
  return {fmt::format("GPU generation not recognised from {} NVLinks per GPU: 20 GB/s per lane (NCCL's SM80 value) and "
                      "PCIe Gen4 x16 (24 GB/s) assumed",
                      lanes_per_gpu),
          20.0, 24.0, kUnknownCpu, ""};
}

class SmiImporter {
 public:
  SmiImporter(const std::string& text, const std::string& filename) : text_(text), filename_(filename) {}

  Result<Topology> run() {
    BRAID_RETURN_IF_ERROR(parse());
    return build();
  }

 private:
  Status parse() {
    std::vector<std::string> lines;
    {
      std::string line;
      std::istringstream in(text_);
      while (std::getline(in, line)) lines.push_back(stripAnsiAndHash(line));
    }
    int header = -1;
    for (size_t i = 0; i < lines.size(); ++i) {
      auto t = tokens(lines[i]);
      if (!t.empty() && isGpuColumn(t[0]) && (t.size() == 1 || !isCellToken(t[1]))) {
        header = static_cast<int>(i);
        break;
      }
    }
    if (header < 0) {
      return parseError(filename_, 0, "header",
                        "no `nvidia-smi topo -m` header: expected a line of column names starting with GPU0");
    }
    header_line_ = header + 1;
    const auto head = tokens(lines[header]);
    size_t k = 0;
    for (; k < head.size(); ++k) {
      const std::string& t = head[k];
      if (t == "CPU" || t == "NUMA" || t == "GPU" || t == "Affinity") break;
      Device d;
      d.column = t;
      d.gpu = isGpuColumn(t);
      if (column_index_.count(t))
        return parseError(filename_, header_line_, t, "column name appears twice in the header");
      column_index_[t] = static_cast<int>(devices_.size());
      devices_.push_back(d);
    }
    for (; k < head.size(); ++k) trailer_.push_back(head[k]);
    has_cpu_affinity_ = std::find(trailer_.begin(), trailer_.end(), "CPU") != trailer_.end();
    for (size_t i = 0; i + 1 < trailer_.size(); ++i) {
      if (trailer_[i] == "NUMA" && trailer_[i + 1] == "Affinity") has_numa_affinity_ = true;
    }
    const int n = static_cast<int>(devices_.size());
    cells_.assign(n, std::vector<Cell>(n));

    for (size_t i = header + 1; i < lines.size(); ++i) {
      auto t = tokens(lines[i]);
      if (t.empty()) continue;
      if (t[0].size() > 1 && t[0].back() == ':' && t.size() >= 2) {
        // NIC legend: "NIC0: mlx5_0".
        const std::string column = t[0].substr(0, t[0].size() - 1);
        const int line_no = static_cast<int>(i) + 1;
        auto it = column_index_.find(column);
        if (it == column_index_.end() || devices_[it->second].gpu) {
          if (column.rfind("NIC", 0) == 0 || it != column_index_.end()) {
            notes_.push_back(fmt::format("{}:{}: NIC legend entry {}: {} ignored: the header has no NIC column {}",
                                         filename_, line_no, column, t[1], column));
          }
          continue;
        }
        auto [prev, fresh] = legend_.emplace(it->second, t[1]);
        if (!fresh) {
          notes_.push_back(
              fmt::format("{}:{}: {} appears twice in the NIC legend ({} here, {} at line {}): the "
                          "first is kept",
                          filename_, line_no, column, t[1], prev->second, legend_line_[it->second]));
        } else {
          legend_line_[it->second] = line_no;
        }
        continue;
      }
      auto it = column_index_.find(t[0]);
      if (it == column_index_.end()) continue;
      const int row = it->second;
      const int line_no = static_cast<int>(i) + 1;
      Device& d = devices_[row];
      if (d.row_line > 0) {
        return parseError(filename_, line_no, d.column,
                          fmt::format("second row for {} (first at line {})", d.column, d.row_line));
      }
      d.row_line = line_no;
      if (static_cast<int>(t.size()) - 1 < n) {
        return parseError(filename_, line_no, devices_[t.size() - 1].column,
                          fmt::format("row {} has {} cells, the header names {} devices", d.column, t.size() - 1, n));
      }
      for (int c = 0; c < n; ++c) {
        auto cell = parseCell(t[c + 1]);
        if (!cell) {
          return parseError(filename_, line_no, devices_[c].column,
                            fmt::format("'{}' is not a topology class (X, NV#, PIX, PXB, PHB, NODE, SYS)", t[c + 1]));
        }
        if ((c == row) != (cell->level == kSelf)) {
          return parseError(filename_, line_no, devices_[c].column,
                            c == row ? fmt::format("the diagonal cell of {} must be X, found '{}'", d.column, t[c + 1])
                                     : fmt::format("X appears off the diagonal (row {})", d.column));
        }
        cells_[row][c] = *cell;
      }
      size_t extra = static_cast<size_t>(n) + 1;
      if (d.gpu && has_cpu_affinity_ && extra < t.size()) d.cpu_affinity = t[extra++];
      if (d.gpu && has_numa_affinity_ && extra < t.size()) {
        d.numa_affinity = t[extra++];
        d.numa = parseNuma(d.numa_affinity);
        if (!d.numa && d.numa_affinity != "N/A") {
          notes_.push_back(fmt::format("{}:{}: {}'s NUMA Affinity '{}' is not a NUMA node id (0..{}): ignored",
                                       filename_, line_no, d.column, d.numa_affinity, kMaxNumaId));
        }
      }
    }
    for (int r = 0; r < n; ++r) {
      if (devices_[r].row_line > 0) continue;
      if (devices_[r].gpu) {
        return parseError(filename_, header_line_, devices_[r].column,
                          fmt::format("the header names {} but the matrix has no row for it", devices_[r].column));
      }
      notes_.push_back(fmt::format("no matrix row for {}: its classes are taken from its column", devices_[r].column));
      for (int c = 0; c < n; ++c) cells_[r][c] = c == r ? Cell{kSelf, 0, "X"} : cells_[c][r];
    }
    // `nvidia-smi topo -m` prints one class per pair, in both of its cells: a matrix whose two cells of a pair
    // differ was edited or pieced together, and either reading (a one-way NVLink, a guessed class) would be
    // made up. Refused, naming both cells.
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        Cell& x = cells_[a][b];
        Cell& y = cells_[b][a];
        if (x.level == kMissing || y.level == kMissing) {
          if (x.level == kMissing && y.level == kMissing) {
            notes_.push_back(
                fmt::format("no class between {} and {}: read as SYS", devices_[a].column, devices_[b].column));
            x.level = y.level = kSys;
          } else if (x.level == kMissing) {
            x = y;
          } else {
            y = x;
          }
        }
        if (x.level != y.level || x.lanes != y.lanes) {
          const Device& da = devices_[a];
          const Device& db = devices_[b];
          // The later of the two rows is reported: its line, and its device as the field.
          const bool b_later = db.row_line >= da.row_line;
          return parseError(
              filename_, b_later ? db.row_line : da.row_line, b_later ? db.column : da.column,
              fmt::format("the matrix is not symmetric: row {} (line {}) gives {} -> {} as {}, row {} (line {}) gives "
                          "{} -> {} as {}; `nvidia-smi topo -m` prints one class for both directions of a pair, so "
                          "the file was edited or mixes two matrices: make the two cells agree",
                          da.column, da.row_line, da.column, db.column, x.text, db.column, db.row_line, db.column,
                          da.column, y.text));
        }
      }
    }
    return Status::ok();
  }

  void attach(int device, int parent) {
    topo_.addDuplexLink(vertex_[device], parent, LinkKind::kPcie, gen_.pcie_gbps, kPcieHopAlphaUs);
  }

  // Devices `members` all meet within class `level` below vertex `parent`; split them at level - 1.
  // `parent_is_switch`: `parent` is a PCIe switch made for exactly these members, so a PIX/PXB cluster equal to
  // them needs no vertex of its own (one that hangs off a CPU or host bridge does).
  void buildCluster(const std::vector<int>& members, int level, int parent, int numa, bool parent_is_switch) {
    if (members.size() == 1 || level <= kPix) {
      for (int d : members) attach(d, parent);
      return;
    }
    std::vector<std::vector<int>> groups = split(members, level - 1);
    if (groups.size() == 1) {
      bool phb_pair = false;
      for (int a : members) {
        for (int b : members) phb_pair = phb_pair || (a != b && cells_[a][b].level == kPhb);
      }
      if (level - 1 == kPhb && phb_pair) {
        // Every device of the socket meets the others within PHB: one host bridge holds them all, so that routes
        // between them cross the host bridge (PHB), not the CPU (NODE).
        const int v = topo_.addVertex(VertexKind::kPcieSwitch, node_, fmt::format("host_bridge{}", switch_count_++));
        topo_.vertices[v].numa = numa;
        topo_.addDuplexLink(v, parent, LinkKind::kPcie, gen_.pcie_gbps, kPcieHopAlphaUs);
        buildCluster(members, level - 1, v, numa, false);
      } else if (level - 1 <= kPxb && !parent_is_switch) {
        const int v = topo_.addVertex(VertexKind::kPcieSwitch, node_, fmt::format("pcie_switch{}", switch_count_++));
        topo_.vertices[v].numa = numa;
        topo_.addDuplexLink(v, parent, LinkKind::kPcie, gen_.pcie_gbps, kPcieHopAlphaUs);
        buildCluster(members, level - 1, v, numa, true);
      } else {
        buildCluster(members, level - 1, parent, numa, parent_is_switch);
      }
      return;
    }
    for (const auto& g : groups) {
      // Above PXB a lone device hangs off the host bridge or CPU. Inside a PXB cluster (split into PIX groups)
      // every group, a lone device too, gets a leaf switch under the cluster's upstream switch: two devices
      // then meet across leaf, upstream and leaf switch (PXB), never across the upstream switch alone (PIX).
      if (g.size() == 1 && level - 1 > kPix) {
        attach(g[0], parent);
        continue;
      }
      int widest = kPix;  // farthest known class inside the group: PHB groups are host bridges
      for (int a : g) {
        for (int b : g) {
          if (a != b && cells_[a][b].level >= kPix) widest = std::max(widest, cells_[a][b].level);
        }
      }
      const char* kind = widest >= kPhb ? "host_bridge" : "pcie_switch";
      const int v = topo_.addVertex(VertexKind::kPcieSwitch, node_, fmt::format("{}{}", kind, switch_count_++));
      topo_.vertices[v].numa = numa;
      topo_.addDuplexLink(v, parent, LinkKind::kPcie, gen_.pcie_gbps, kPcieHopAlphaUs);
      buildCluster(g, level - 1, v, numa, widest <= kPxb);
    }
  }

  // Groups of `members` joined by known PCIe classes at most `max_level`.
  std::vector<std::vector<int>> split(const std::vector<int>& members, int max_level) {
    const int n = static_cast<int>(devices_.size());
    DisjointSets sets(n);
    for (int a : members) {
      for (int b : members) {
        const int l = cells_[a][b].level;
        if (a != b && l >= kPix && l <= max_level) sets.unite(a, b);
      }
    }
    std::map<int, std::vector<int>> by_root;
    std::vector<int> order;
    for (int d : members) {
      const int r = sets.find(d);
      if (!by_root.count(r)) order.push_back(r);
      by_root[r].push_back(d);
    }
    std::vector<std::vector<int>> out;
    for (int r : order) out.push_back(by_root[r]);
    return out;
  }

  Result<Topology> build() {
    const int n = static_cast<int>(devices_.size());
    topo_.name = std::filesystem::path(filename_).stem().string();
    if (topo_.name.empty()) topo_.name = "nvidia-smi-topology";
    topo_.source = filename_;
    node_ = topo_.addNode("node0");

    // NVLink structure and GPU generation.
    std::vector<int> gpus;
    for (int d = 0; d < n; ++d) {
      if (devices_[d].gpu) gpus.push_back(d);
    }
    for (size_t r = 0; r < gpus.size(); ++r) {
      int index = -1;
      isGpuColumn(devices_[gpus[r]].column, &index);
      if (index != static_cast<int>(r)) {
        notes_.push_back(
            fmt::format("GPU columns are not GPU0..GPU{} in order: ranks follow column order", gpus.size() - 1));
        break;
      }
    }
    int max_pair = 0;
    bool uniform_clique = gpus.size() >= 3;
    int clique_lanes = -1;
    std::vector<int> lanes_per_gpu(n, 0);
    for (int a : gpus) {
      for (int b : gpus) {
        if (a == b) continue;
        const Cell& c = cells_[a][b];
        if (c.level == kNvOnly) {
          lanes_per_gpu[a] += c.lanes;
          max_pair = std::max(max_pair, c.lanes);
          if (clique_lanes < 0) clique_lanes = c.lanes;
          if (c.lanes != clique_lanes) uniform_clique = false;
        } else {
          uniform_clique = false;
        }
      }
    }
    for (int d = 0; d < n; ++d) {
      for (int e = 0; e < n; ++e) {
        if (cells_[d][e].level == kNvOnly && (!devices_[d].gpu || !devices_[e].gpu) && d < e) {
          notes_.push_back(fmt::format("NV# between {} and {} ignored: NVLink joins GPUs only", devices_[d].column,
                                       devices_[e].column));
        }
      }
    }
    const bool nvswitch = uniform_clique && clique_lanes > 0 &&
                          (static_cast<int>(gpus.size()) - 1) * clique_lanes > kMaxNvlinkPortsPerGpu;
    const int lanes = nvswitch ? clique_lanes : *std::max_element(lanes_per_gpu.begin(), lanes_per_gpu.end());
    gen_ = inferGeneration(lanes, max_pair, nvswitch);
    notes_.push_back("bandwidths are not in an nvidia-smi matrix: " + gen_.what);

    // Vertices: GPUs first (rank = column order), then NICs.
    vertex_.assign(n, -1);
    std::set<std::string> names;
    for (int d : gpus) {
      vertex_[d] = topo_.addVertex(VertexKind::kGpu, node_);
      topo_.vertices[vertex_[d]].model = gen_.gpu_model;
      names.insert(topo_.vertices[vertex_[d]].name);
    }
    if (!gen_.gpu_model.empty()) {
      notes_.push_back(fmt::format(
          "GPU model is not in an nvidia-smi matrix: GPUs recorded as '{}' from their NVLinks, so NCCL's model uses "
          "that generation's constants; set `model` in the written YAML if the GPUs differ",
          gen_.gpu_model));
    }
    for (int d = 0; d < n; ++d) {
      if (devices_[d].gpu) continue;
      auto it = legend_.find(d);
      std::string name = it != legend_.end() ? it->second : devices_[d].column;
      if (names.count(name)) {
        const std::string taken = name;
        if (it != legend_.end()) name = devices_[d].column;
        while (names.count(name)) name += "_";
        notes_.push_back(
            fmt::format("{}{}: NIC name {} is already taken (by another legend entry or a GPU): {} "
                        "named {}",
                        filename_, legend_line_.count(d) ? fmt::format(":{}", legend_line_[d]) : "", taken,
                        devices_[d].column, name));
      }
      names.insert(name);
      vertex_[d] = topo_.addVertex(VertexKind::kNic, node_, name);
    }
    if (gpus.size() < static_cast<size_t>(n)) {
      notes_.push_back(
          "NIC speeds are not in an nvidia-smi matrix: NICs are placed on the PCIe tree but have no network link");
    }

    // Sockets.
    DisjointSets sockets(n);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        const int l = cells_[a][b].level;
        if (a != b && l >= kPix && l <= kNode) sockets.unite(a, b);
      }
    }
    const bool use_numa = has_numa_affinity_;
    std::map<std::string, int> by_affinity;
    bool any_affinity = false;
    for (int d : gpus) {
      const std::string key = use_numa ? devices_[d].numa_affinity : devices_[d].cpu_affinity;
      if (key.empty() || key == "N/A") continue;
      any_affinity = true;
      auto [it, fresh] = by_affinity.emplace(key, d);
      if (!fresh) sockets.unite(d, it->second);
    }
    std::vector<std::vector<int>> socket_members;
    {
      std::map<int, int> root_index;
      for (int d = 0; d < n; ++d) {
        const int r = sockets.find(d);
        if (!root_index.count(r)) {
          root_index[r] = static_cast<int>(socket_members.size());
          socket_members.emplace_back();
        }
        socket_members[root_index[r]].push_back(d);
      }
    }
    for (const auto& members : socket_members) {
      for (int a : members) {
        for (int b : members) {
          if (a < b && cells_[a][b].level == kSys) {
            notes_.push_back(fmt::format("{} and {} are SYS apart but share a NUMA/CPU affinity: kept on one CPU",
                                         devices_[a].column, devices_[b].column));
          }
        }
      }
    }
    if (!any_affinity && socket_members.size() > 1 && gpus.size() == static_cast<size_t>(n)) {
      // Nothing groups the GPUs but PCIe classes; NV-only GPUs would each become a CPU of their own.
      bool all_nv = true;
      for (int a : gpus) {
        for (int b : gpus) {
          if (a != b && cells_[a][b].level != kNvOnly) all_nv = false;
        }
      }
      if (all_nv) {
        notes_.push_back("no PCIe class and no CPU/NUMA affinity between GPUs: all GPUs placed under one CPU");
        socket_members.assign(1, gpus);
      }
    }
    std::vector<int> cpu_vertex;
    for (size_t s = 0; s < socket_members.size(); ++s) {
      int numa = -1;
      for (int d : socket_members[s]) {
        if (devices_[d].numa) {
          numa = *devices_[d].numa;
          break;
        }
      }
      if (numa < 0) {
        // Numbered by position, skipping ids the matrix gives other sockets.
        numa = static_cast<int>(s);
        auto given = [&](int id) {
          for (const Device& dev : devices_) {
            if (dev.numa == id) return true;
          }
          for (int c : cpu_vertex) {
            if (topo_.vertices[c].numa == id) return true;
          }
          return false;
        };
        while (given(numa)) ++numa;
      }
      const int v = topo_.addVertex(VertexKind::kCpu, node_, fmt::format("cpu{}", s));
      topo_.vertices[v].numa = numa;
      for (int d : socket_members[s]) topo_.vertices[vertex_[d]].numa = numa;
      cpu_vertex.push_back(v);
    }
    for (size_t a = 0; a < cpu_vertex.size(); ++a) {
      for (size_t b = a + 1; b < cpu_vertex.size(); ++b) {
        topo_.addDuplexLink(cpu_vertex[a], cpu_vertex[b], LinkKind::kSys, gen_.cpu.sys_gbps, kSysAlphaUs);
      }
    }
    if (cpu_vertex.size() > 1) {
      notes_.push_back(
          "CPU model is not in an nvidia-smi matrix: inter-socket (SYS) links follow the CPU of the "
          "reference machine for the GPU generation, " +
          gen_.cpu.what);
    }
    for (size_t s = 0; s < socket_members.size(); ++s) {
      buildCluster(socket_members[s], kNode, cpu_vertex[s], topo_.vertices[cpu_vertex[s]].numa, false);
    }

    // NVLinks.
    if (nvswitch) {
      const int sw = topo_.addVertex(VertexKind::kNvSwitch, node_, "nvswitch");
      for (int d : gpus) {
        topo_.addDuplexLink(vertex_[d], sw, LinkKind::kNvlink, clique_lanes * gen_.lane_gbps, kNvswitchHopAlphaUs,
                            clique_lanes);
      }
      notes_.push_back(
          fmt::format("every GPU pair shows NV{} and {} GPUs x {} lanes exceed {} NVLink ports per GPU: read as "
                      "an NVSwitch fabric with {} lanes per GPU",
                      clique_lanes, gpus.size(), clique_lanes, kMaxNvlinkPortsPerGpu, clique_lanes));
    } else {
      for (int a : gpus) {
        for (int b : gpus) {
          const Cell& c = cells_[a][b];
          if (a == b || c.level != kNvOnly) continue;
          topo_.addLink(vertex_[a], vertex_[b], LinkKind::kNvlink, c.lanes * gen_.lane_gbps, kNvlinkDirectAlphaUs,
                        c.lanes);
        }
        if (lanes_per_gpu[a] > kMaxNvlinkPortsPerGpu) {
          notes_.push_back(
              fmt::format("{} has {} NVLink lanes in total, more than any GPU's {} ports; an NVSwitch may be "
                          "hidden behind the NV# cells",
                          devices_[a].column, lanes_per_gpu[a], kMaxNvlinkPortsPerGpu));
        }
      }
    }
    topo_.notes = notes_;
    // Errors name the file (the topology's source) and what in it is at fault: a link outside physical ranges, GPUs
    // that no chain of links joins.
    BRAID_RETURN_IF_ERROR(validateTopology(topo_));
    return std::move(topo_);
  }

  const std::string& text_;
  const std::string& filename_;
  int header_line_ = 0;
  std::vector<Device> devices_;
  std::map<std::string, int> column_index_;
  std::vector<std::string> trailer_;
  bool has_cpu_affinity_ = false;
  bool has_numa_affinity_ = false;
  std::map<int, std::string> legend_;
  std::map<int, int> legend_line_;
  std::vector<std::vector<Cell>> cells_;
  std::vector<std::string> notes_;
  Generation gen_;
  Topology topo_;
  int node_ = -1;
  int switch_count_ = 0;
  std::vector<int> vertex_;
};

}  // namespace

Result<Topology> importNvidiaSmiTopo(const std::string& text, const std::string& filename) {
  try {
    SmiImporter importer(text, filename);
    return importer.run();
  } catch (const std::exception& e) {
    return parseError(filename, 0, "", fmt::format("cannot read nvidia-smi topology: {}", e.what()));
  }
}

}  // namespace braid
