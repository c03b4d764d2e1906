// NCCL 2.28's view of a topology: its channel search (ncclSystem, nccl::search), as nccl@2.28.9 src/graph/search.cc
// ncclTopoCompute lays out ring, tree and NVLS channels. Constants and rules are summarised in
// ../shared/reference/nccl_plugins.md §4.5 and cited to the NCCL file they come from:
//   * src/graph/search.cc  speed lists, pass 1 / pass 2, ncclTopoDupChannels;
//   * src/graph/topo.h     NVLink per-link bandwidths by SM (SM70 20, SM80 20, SM86 12, SM90 20.6, SM100 40.1 GB/s);
//   * src/init.cc          how the nodes' graphs combine (min channels and bandwidths, max path types).
// The tuning model that consumes the result (ncclPredict) is nccl_tuning.cc.
//
// The search is re-done on Braid's Topology, not copied: a channel of a ring graph is a Hamiltonian cycle of the
// node's GPUs (one node) or a chain NIC -> GPU ... GPU -> same NIC (several nodes), every hop following
// Topology::route / gpuNicRoute and consuming the per-channel speed on each link it crosses, as NCCL's
// ncclTopoFollowPath does. Channels are found greedily (depth-first, widest remaining hop first), like NCCL's
// own search, so the count is NCCL's when the greedy search finds the maximum (it does on the shipped systems;
// on one node with NVLink the ring finder of src/algos, findRings, is tried too and the larger count kept).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "braid/classic_blocks.h"
#include "braid/nccl_model.h"
#include "cost/nccl_internal.h"

namespace braid {

namespace nccl {

const char* pathTypeName(int type) {
  static const char* const kNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB",
                                       "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};
  return type >= 0 && type <= kPathDis ? kNames[type] : "?";
}

int pathTypeOf(const std::string& name) {
  static const std::map<std::string, int> kTypes = {{"LOC", kPathLoc}, {"NVL", kPathNvl}, {"NVB", kPathNvb},
                                                    {"PIX", kPathPix}, {"PXB", kPathPxb}, {"P2C", kPathP2c},
                                                    {"PHB", kPathPhb}, {"SYS", kPathSys}, {"NET", kPathNet}};
  auto it = kTypes.find(name);
  return it == kTypes.end() ? kPathDis : it->second;
}

}  // namespace nccl

namespace {

using nccl::kMaxNvlsArity;
using nccl::NodeChannels;

// Per-channel speeds the search tries, GB/s (nccl@2.28.9 src/graph/search.cc speedArrayIntra/Inter and their
// sm90/sm100 variants): intra lists on one node, inter lists across nodes.
const std::vector<double>& speedList(int arch, bool inter) {
  static const std::vector<double> kIntra = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
  static const std::vector<double> kInter = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                             7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  static const std::vector<double> kSm90Intra = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
  static const std::vector<double> kSm90Inter = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                                 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  static const std::vector<double> kSm100Intra = {90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
  static const std::vector<double> kSm100Inter = {96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0,
                                                  17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  if (arch >= 3) return inter ? kSm100Inter : kSm100Intra;
  if (arch == 2) return inter ? kSm90Inter : kSm90Intra;
  return inter ? kInter : kIntra;
}

constexpr int kMaxChannels = 64;                    // MAXCHANNELS (nccl@2.28.9 src/include/device.h)
constexpr int kRingMaxChannels = kMaxChannels / 2;  // init.cc: ringGraph->maxChannels
constexpr double kLocBw = 5000.0;                   // LOC_BW (topo.h): a GPU to itself
constexpr double kEps = 1e-6;

// ---- GPU and CPU identification -----------------------------------------------------------------------------

struct GpuArch {
  int row = 1;  // Volta, Ampere, Hopper, Blackwell
  int sm = 80;
  bool known = false;
};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// NCCL's compCapIndex row of a GPU model (nccl@2.28.9 src/graph/tuning.cc: >= 100 Blackwell, >= 90 Hopper,
// >= 80 Ampere, else Volta) from its compute capability (gpuComputeCapability in braid/topology.h).
GpuArch archFromModel(const std::string& model) {
  const std::optional<int> sm = gpuComputeCapability(model);
  if (!sm) return {};
  const int row = *sm >= 100 ? 3 : *sm >= 90 ? 2 : *sm >= 80 ? 1 : 0;
  return {row, *sm, true};
}

const char* archName(int row) {
  static const char* const kNames[] = {"Volta", "Ampere", "Hopper", "Blackwell"};
  return row >= 0 && row < 4 ? kNames[row] : "?";
}

// NVLink bandwidth per link by SM (nccl@2.28.9 src/graph/topo.h SM*_NVLINK_BW), GB/s.
double nvlinkLaneBw(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86) return 12.0;
  if (sm >= 60 && sm < 70) return 18.0;
  return 20.0;  // SM70, SM80
}

std::string cpuVendorOf(const std::string& model) {
  const std::string m = upper(model);
  auto has = [&](const char* token) { return m.find(token) != std::string::npos; };
  if (has("EPYC") || has("AMD") || has("RYZEN") || has("THREADRIPPER")) return "AMD";
  if (has("XEON") || has("INTEL")) return "Intel";
  if (has("GRACE") || has("ARM") || has("NEOVERSE") || has("ALTRA") || has("KUNPENG")) return "Arm";
  if (has("POWER")) return "Power";
  return "";
}

using nccl::pathTypeOf;

// ---- the channel search on one node -----------------------------------------------------------------------

// One hop of a channel: the links it crosses, its NCCL path type and bottleneck (NCCL's link bandwidths).
struct Hop {
  bool exists = false;
  std::vector<int> links;
  int type = nccl::kPathDis;
  double bw = 0;
};

enum class Pattern { kRing, kTree };

struct SearchParams {
  Pattern pattern = Pattern::kRing;
  double s_intra = 0;
  double s_inter = 0;
  int type_intra = nccl::kPathNvl;
  int type_inter = nccl::kPathPix;
  int max_channels = kRingMaxChannels;
};

struct GraphResult {
  int channels = 0;
  double bw_intra = 0;
  double bw_inter = 0;
  int type_intra = nccl::kPathNvl;
  int type_inter = nccl::kPathPix;
  double latency_inter_us = 0;
  bool fallback = false;
  NodeChannels ch;
};

constexpr long kDfsBudget = 200'000;  // partial paths expanded per channel before giving up on it

class NodeSearch {
 public:
  NodeSearch(const Topology& t, const Node& node, bool inter, const std::vector<double>& caps)
      : t_(t), inter_(inter), base_caps_(caps) {
    for (int vid : node.gpus) ranks_.push_back(t.vertices[vid].rank);
    const int n = static_cast<int>(ranks_.size());
    gg_.assign(n, std::vector<Hop>(n));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        std::optional<Route> r = t.route(ranks_[i], ranks_[j]);
        if (r) gg_[i][j] = makeHop(r->links, gpuNicPathClass(t, *r));
      }
    }
    if (!inter_) return;
    for (int nic : node.nics) {
      double speed = 0;
      for (int l : t.outLinks(nic)) {
        if (t.links[l].kind == LinkKind::kNet) speed = std::max(speed, t.links[l].bandwidth_gbps);
      }
      if (speed <= 0) continue;  // not on the network
      nics_.push_back(nic);
      nic_speed_.push_back(speed);
      double alpha = 0;
      for (int l : t.outLinks(nic)) {
        if (t.links[l].kind == LinkKind::kNet) alpha = std::max(alpha, t.links[l].alpha_us);
      }
      nic_alpha_.push_back(alpha);
    }
    const int m = static_cast<int>(nics_.size());
    gn_.assign(n, std::vector<Hop>(m));
    ng_.assign(m, std::vector<Hop>(n));
    local_gpus_.assign(m, {});
    for (int k = 0; k < m; ++k) {
      for (int i = 0; i < n; ++i) {
        std::optional<Route> r = gpuNicRoute(t, ranks_[i], nics_[k]);
        if (!r) continue;
        const std::string cls = gpuNicPathClass(t, *r);
        gn_[i][k] = makeHop(r->links, cls);
        std::vector<int> back;
        bool ok = true;
        for (auto it = r->links.rbegin(); it != r->links.rend() && ok; ++it) {
          const Link& l = t.links[*it];
          int best = -1;
          for (int cand : t.linksBetween(l.dst, l.src)) {
            if (t.links[cand].kind == l.kind && (best < 0 || caps[cand] > caps[best])) best = cand;
          }
          if (best < 0) ok = false;
          back.push_back(best);
        }
        if (ok) ng_[k][i] = makeHop(back, cls);
      }
      // The NIC's nearest GPUs (ncclTopoGetLocal from the NIC): widest path first, then the nearest path type.
      double best_bw = -1;
      int best_type = nccl::kPathDis;
      for (int i = 0; i < n; ++i) {
        const Hop& h = ng_[k][i];
        if (!h.exists) continue;
        if (h.bw > best_bw + kEps || (std::abs(h.bw - best_bw) <= kEps && h.type < best_type)) {
          best_bw = h.bw;
          best_type = h.type;
          local_gpus_[k].clear();
        }
        if (std::abs(h.bw - best_bw) <= kEps && h.type == best_type) local_gpus_[k].push_back(i);
      }
    }
  }

  int numGpus() const { return static_cast<int>(ranks_.size()); }
  int numNics() const { return static_cast<int>(nics_.size()); }
  const std::vector<int>& ranks() const { return ranks_; }
  const std::vector<int>& nics() const { return nics_; }
  const std::vector<double>& nicSpeeds() const { return nic_speed_; }
  const std::vector<std::vector<int>>& nicLocalGpus() const { return local_gpus_; }
  const Hop& nicToGpu(int k, int i) const { return ng_[k][i]; }
  double nicAlpha(int k) const { return nic_alpha_[k]; }

  // system->maxBw (search.cc getMaxBw): the widest GPU -> GPU path on one node, GPU -> NIC path across nodes.
  double maxBw() const {
    const int n = numGpus();
    if (!inter_ && n == 1) return kLocBw;
    double best = 0;
    for (int i = 0; i < n; ++i) {
      if (inter_) {
        for (int k = 0; k < numNics(); ++k) {
          if (gn_[i][k].exists) best = std::max(best, std::min(gn_[i][k].bw, nic_speed_[k]));
        }
      } else {
        for (int j = 0; j < n; ++j) {
          if (gg_[i][j].exists) best = std::max(best, gg_[i][j].bw);
        }
      }
    }
    return best;
  }

  // system->totalBw (search.cc getTotalBw): per GPU the larger of its summed NVLink and its PCIe link.
  double totalBw() const {
    if (!inter_ && numGpus() == 1) return kLocBw;
    double best = 0;
    for (int r : ranks_) {
      const int v = t_.gpuVertex(r);
      double nvlink = 0, pci = 0;
      for (int l : t_.outLinks(v)) {
        if (t_.links[l].kind == LinkKind::kNvlink) nvlink += base_caps_[l];
        if (t_.links[l].kind == LinkKind::kPcie) pci = std::max(pci, base_caps_[l]);
      }
      best = std::max(best, std::max(nvlink, pci));
    }
    return best;
  }

  // Path types present among GPU pairs (intra) and GPU -> NIC routes (inter), ascending.
  std::vector<int> intraTypes() const {
    std::set<int> types;
    for (const auto& row : gg_) {
      for (const Hop& h : row) {
        if (h.exists) types.insert(h.type);
      }
    }
    if (types.empty()) types.insert(nccl::kPathNvl);
    return {types.begin(), types.end()};
  }
  std::vector<int> interTypes() const {
    std::set<int> types;
    for (const auto& row : gn_) {
      for (const Hop& h : row) {
        if (h.exists) types.insert(h.type);
      }
    }
    if (types.empty()) types.insert(nccl::kPathPix);
    return {types.begin(), types.end()};
  }

  /// Greedily lays out up to params.max_channels channels; returns them (orders, NICs).
  NodeChannels find(const SearchParams& p) {
    caps_ = base_caps_;
    nic_bw_ = nic_speed_;
    NodeChannels out;
    const int n = numGpus();
    for (int c = 0; c < p.max_channels; ++c) {
      std::vector<int> order;
      int nic = -1;
      bool found = false;
      if (!inter_) {
        found = p.pattern == Pattern::kRing ? findCycle(p, &order) : findChain(p, &order);
      } else {
        const int m = numNics();
        for (int i = 0; i < m && !found; ++i) {
          const int k = (c + i) % m;
          if (nic_bw_[k] + kEps < p.s_inter) continue;
          std::vector<int> entries = local_gpus_[k];
          if (entries.empty()) {
            for (int g = 0; g < n; ++g) entries.push_back(g);
          }
          for (int g : entries) {
            if (findNicChain(p, k, g, &order)) {
              found = true;
              nic = k;
              nic_bw_[k] -= p.s_inter;
              break;
            }
          }
        }
      }
      if (!found) break;
      std::vector<int> ranks;
      for (int i : order) ranks.push_back(ranks_[i]);
      out.orders.push_back(std::move(ranks));
      out.nics.push_back(nic >= 0 ? nics_[nic] : -1);
    }
    return out;
  }

 private:
  Hop makeHop(const std::vector<int>& links, const std::string& cls) const {
    Hop h;
    h.exists = !links.empty();
    h.links = links;
    h.type = pathTypeOf(cls);
    h.bw = std::numeric_limits<double>::infinity();
    for (int l : links) h.bw = std::min(h.bw, base_caps_[l]);
    if (links.empty()) h.bw = 0;
    return h;
  }

  bool fits(const Hop& h, double s, int max_type) const {
    if (!h.exists || h.type > max_type) return false;
    for (int l : h.links) {
      if (caps_[l] + kEps < s) return false;
    }
    return true;
  }
  void take(const Hop& h, double s) {
    for (int l : h.links) caps_[l] -= s;
  }
  void give(const Hop& h, double s) {
    for (int l : h.links) caps_[l] += s;
  }
  double room(const Hop& h) const {
    double r = std::numeric_limits<double>::infinity();
    for (int l : h.links) r = std::min(r, caps_[l]);
    return r;
  }

  // Next GPUs from `at`: nearest path type first, then the most room to go on from there (the GPU's widest
  // remaining way out, so that GPUs short of outgoing bandwidth come last), then the hop's room, then the next
  // index.
  std::vector<int> candidates(int at, const std::vector<bool>& used, const SearchParams& p) const {
    const int n = numGpus();
    std::vector<int> next;
    std::vector<double> hop_room(n, 0), onward(n, 0);
    for (int j = 0; j < n; ++j) {
      if (used[j] || !fits(gg_[at][j], p.s_intra, p.type_intra)) continue;
      next.push_back(j);
      hop_room[j] = room(gg_[at][j]);
      double out = 0;
      for (int v = 0; v < n; ++v) {
        if (v != j && v != at && !used[v] && gg_[j][v].exists && gg_[j][v].type <= p.type_intra) {
          out = std::max(out, room(gg_[j][v]));
        }
      }
      onward[j] = out;
    }
    std::stable_sort(next.begin(), next.end(), [&](int a, int b) {
      const Hop& ha = gg_[at][a];
      const Hop& hb = gg_[at][b];
      if (ha.type != hb.type) return ha.type < hb.type;
      if (std::abs(onward[a] - onward[b]) > kEps) return onward[a] > onward[b];
      if (std::abs(hop_room[a] - hop_room[b]) > kEps) return hop_room[a] > hop_room[b];
      return (a - at + n) % n < (b - at + n) % n;
    });
    return next;
  }

  // Depth-first extension of `path` over all GPUs; `finish(last)` takes the closing hop(s) or fails; `on_step`
  // (step, gpu) may take extra hops when a GPU joins (step > 0) and gives them back (step < 0: -(step + 1)).
  // `fixed_last_` >= 0 is the GPU that must come last. Pruned: an unvisited GPU with no way on to another unvisited
  // GPU can only be last, so two of them (or one that is not the fixed last) end the branch.
  bool extend(std::vector<int>& path, std::vector<bool>& used, const SearchParams& p, long& budget,
              const std::function<bool(int)>& finish, const std::function<bool(int, int)>& on_step) {
    const int n = numGpus();
    const int depth = static_cast<int>(path.size());
    if (depth == n) return (fixed_last_ < 0 || path.back() == fixed_last_) && finish(path.back());
    if (--budget < 0) return false;
    int stuck = -1, stuck_count = 0;
    if (n - depth > 1) {
      for (int u = 0; u < n; ++u) {
        if (used[u]) continue;
        bool can_leave = false;
        for (int v = 0; v < n && !can_leave; ++v) {
          can_leave = v != u && !used[v] && fits(gg_[u][v], p.s_intra, p.type_intra);
        }
        if (!can_leave) {
          stuck = u;
          ++stuck_count;
        }
      }
      if (stuck_count > 1 || (stuck_count == 1 && fixed_last_ >= 0 && stuck != fixed_last_)) return false;
      if (stuck < 0) stuck = fixed_last_;
    }
    const int at = path.back();
    for (int j : candidates(at, used, p)) {
      if (j == stuck && depth < n - 1) continue;  // it has to come last
      const Hop& h = gg_[at][j];
      take(h, p.s_intra);
      used[j] = true;
      path.push_back(j);
      if (on_step(depth, j)) {
        if (extend(path, used, p, budget, finish, on_step)) return true;
        on_step(-(depth + 1), j);
      }
      path.pop_back();
      used[j] = false;
      give(h, p.s_intra);
      if (budget < 0) return false;
    }
    return false;
  }

  // GPUs in the order they are tried as a chain's last GPU: the least remaining way out first (the last GPU sends
  // nothing on, so the GPU shortest of outgoing bandwidth is best placed there), then by index.
  std::vector<int> lastOrder(const SearchParams& p) const {
    const int n = numGpus();
    std::vector<double> out(n, 0);
    for (int x = 0; x < n; ++x) {
      for (int v = 0; v < n; ++v) {
        if (v != x && gg_[x][v].exists && gg_[x][v].type <= p.type_intra) out[x] = std::max(out[x], room(gg_[x][v]));
      }
    }
    std::vector<int> order(n);
    for (int x = 0; x < n; ++x) order[x] = x;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return out[a] < out[b] - kEps; });
    return order;
  }

  // One node, ring pattern: a Hamiltonian cycle from GPU 0.
  bool findCycle(const SearchParams& p, std::vector<int>* order) {
    const int n = numGpus();
    std::vector<int> path = {0};
    std::vector<bool> used(n, false);
    used[0] = true;
    long budget = kDfsBudget;
    fixed_last_ = -1;
    auto finish = [&](int last) {
      if (n == 1) return true;
      const Hop& h = gg_[last][0];
      if (!fits(h, p.s_intra, p.type_intra)) return false;
      take(h, p.s_intra);
      return true;
    };
    auto no_step = [](int, int) { return true; };
    if (!extend(path, used, p, budget, finish, no_step)) return false;
    *order = path;
    return true;
  }

  // One node, tree pattern: a chain over all GPUs (NCCL's intra-node tree), tried from each start GPU.
  bool findChain(const SearchParams& p, std::vector<int>* order) {
    const int n = numGpus();
    const std::vector<int> lasts = lastOrder(p);
    for (int start = 0; start < n; ++start) {
      for (int x : lasts) {
        if (x == start && n > 1) continue;
        std::vector<int> path = {start};
        std::vector<bool> used(n, false);
        used[start] = true;
        long budget = kDfsBudget / (n * n);
        fixed_last_ = x;
        auto finish = [](int) { return true; };
        auto no_step = [](int, int) { return true; };
        const bool ok = extend(path, used, p, budget, finish, no_step);
        fixed_last_ = -1;
        if (ok) {
          *order = path;
          return true;
        }
      }
    }
    return false;
  }

  // Across nodes: NIC k -> GPU `entry` -> ... -> last GPU -> NIC k (ring), or NIC k -> GPU chain with the two
  // first GPUs each sending half the channel back to NIC k (NCCL's balanced tree).
  bool findNicChain(const SearchParams& p, int k, int entry, std::vector<int>* order) {
    const int n = numGpus();
    const Hop& in = ng_[k][entry];
    if (!fits(in, p.s_inter, p.type_inter)) return false;
    take(in, p.s_inter);
    bool ok = false;
    std::vector<int> path;
    if (p.pattern == Pattern::kRing) {
      // The GPU that hands back to NIC k is fixed first, then a Hamiltonian path from `entry` to it is searched.
      for (int x : lastOrder(p)) {
        if (ok) break;
        if (x == entry && n > 1) continue;
        const Hop& out = gn_[x][k];
        if (!fits(out, p.s_inter, p.type_inter)) continue;
        take(out, p.s_inter);
        path = {entry};
        std::vector<bool> used(n, false);
        used[entry] = true;
        long budget = kDfsBudget / n;
        fixed_last_ = x;
        auto finish = [](int) { return true; };
        auto no_step = [](int, int) { return true; };
        ok = extend(path, used, p, budget, finish, no_step);
        if (!ok) give(out, p.s_inter);
      }
    } else {
      // Balanced tree (search.cc, NCCL_TOPO_PATTERN_BALANCED_TREE): half of bwInter back to the NIC from each
      // of the first two GPUs; one GPU per node sends all of it (pattern TREE).
      const double back = n > 1 ? p.s_inter / 2 : p.s_inter;
      const Hop& up0 = gn_[entry][k];
      if (fits(up0, back, p.type_inter)) {
        take(up0, back);
        path = {entry};
        std::vector<bool> used(n, false);
        used[entry] = true;
        long budget = kDfsBudget;
        fixed_last_ = -1;
        auto finish = [](int) { return true; };
        auto second = [&](int step, int gpu) {
          if (step == 1) {  // the second GPU of the chain
            const Hop& h = gn_[gpu][k];
            if (!fits(h, back, p.type_inter)) return false;
            take(h, back);
          } else if (step == -2) {
            give(gn_[gpu][k], back);
          }
          return true;
        };
        for (int x : lastOrder(p)) {
          if ((x == entry && n > 1) || ok) continue;
          path = {entry};
          std::fill(used.begin(), used.end(), false);
          used[entry] = true;
          budget = kDfsBudget / n;
          fixed_last_ = n > 1 ? x : -1;
          ok = extend(path, used, p, budget, finish, second);
        }
        if (!ok) give(up0, back);
      }
    }
    fixed_last_ = -1;
    if (!ok) {
      give(in, p.s_inter);
      return false;
    }
    *order = path;
    return true;
  }

  const Topology& t_;
  bool inter_;
  std::vector<double> base_caps_;
  std::vector<int> ranks_;
  std::vector<int> nics_;
  std::vector<double> nic_speed_;
  std::vector<double> nic_alpha_;
  std::vector<std::vector<Hop>> gg_;  // [gpu i][gpu j]
  std::vector<std::vector<Hop>> gn_;  // [gpu i][nic k]
  std::vector<std::vector<Hop>> ng_;  // [nic k][gpu i]
  std::vector<std::vector<int>> local_gpus_;
  std::vector<double> caps_;
  std::vector<double> nic_bw_;
  int fixed_last_ = -1;
};

// On one node with NVLink: src/algos' ring finder over the node's NVLink graph with each link carrying
// floor(bandwidth / speed) rings per direction — the lane-disjoint NVLink rings of a DGX-1's hybrid cube mesh.
NodeChannels nvlinkRingsByFinder(const Topology& t, const Node& node, const std::vector<double>& caps, double speed,
                                 int max_channels) {
  NodeChannels out;
  if (node.gpus.size() < 2) return out;
  Topology sub;
  sub.name = t.name + ":" + node.name;
  const int sub_node = sub.addNode(node.name);
  std::vector<int> map(t.vertices.size(), -1);
  std::vector<int> rank_of_local;
  for (int vid : node.gpus) {
    map[vid] = sub.addVertex(VertexKind::kGpu, sub_node);
    rank_of_local.push_back(t.vertices[vid].rank);
  }
  const int node_index = t.vertices[node.gpus.front()].node;
  for (const Vertex& v : t.vertices) {
    if (v.kind == VertexKind::kNvSwitch && v.node == node_index) map[v.id] = sub.addVertex(v.kind, sub_node, v.name);
  }
  bool any = false;
  for (size_t i = 0; i < t.links.size(); ++i) {
    const Link& l = t.links[i];
    if (l.kind != LinkKind::kNvlink || map[l.src] < 0 || map[l.dst] < 0) continue;
    const int lanes = static_cast<int>(std::floor(caps[i] / speed + kEps));
    if (lanes < 1) continue;
    sub.addLink(map[l.src], map[l.dst], l.kind, lanes * speed, l.alpha_us, lanes);
    any = true;
  }
  if (!any) return out;
  Result<algos::RingSearch> rings = algos::findRings(sub, max_channels);
  if (!rings || !rings->all_nvlink) return out;
  for (const algos::RingOrder& ring : rings->rings) {
    std::vector<int> ranks;
    for (int local : ring) ranks.push_back(rank_of_local[local]);
    out.orders.push_back(std::move(ranks));
    out.nics.push_back(-1);
  }
  return out;
}

// ncclTopoDupChannels (search.cc): fast channels are doubled at half the speed (not on Hopper+ when the speed is
// below 50 GB/s and there are more than 4 channels).
void dupChannels(GraphResult& g, int arch_sm, int max_channels) {
  if (g.channels == 0 || g.bw_intra < 25.0) return;
  if (arch_sm > 80 && g.bw_intra < 50.0 && g.channels > 4) return;
  const int dup = std::min(g.channels * 2, max_channels);
  const int div = (dup + g.channels - 1) / g.channels;
  for (int c = g.channels; c < dup; ++c) {
    g.ch.orders.push_back(g.ch.orders[c - g.channels]);
    g.ch.nics.push_back(g.ch.nics[c - g.channels]);
  }
  g.bw_intra /= div;
  g.bw_inter /= div;
  g.channels = dup;
}

// ncclTopoCompute (search.cc) for the ring and balanced-tree patterns on one node: pass 1 walks the speed list down
// from the first speed the node can carry, widening the allowed path types until channels fit, and keeps the
// graph with the most total bandwidth (channels x speed); it stops at a perfect graph (max channels, or channels x
// speed >= the GPU's total bandwidth) or when the next speed is below 0.49 of the best; then channels are
// duplicated and pass 2 tries higher speeds with at least as many channels (trees: bwIntra only, up to twice
// bwInter).
GraphResult searchGraph(const Topology& t, const Node& node, NodeSearch& ns, Pattern pattern, int min_channels,
                        int max_channels, int arch, int arch_sm, bool inter, const std::vector<double>& caps) {
  const std::vector<double>& speeds = speedList(arch, inter);
  const int n = ns.numGpus();
  const int last = static_cast<int>(speeds.size()) - 1;
  const double max_bw = ns.maxBw();
  // The start speed allows trees n/(n-1) of the GPU's total (a chain's last GPU sends nothing on); a graph is
  // perfect once it reaches the unscaled total (search.cc: system->totalBw).
  const double total_bw = ns.totalBw();
  const double start_bw = n > 1 && pattern != Pattern::kRing ? total_bw * n / (n - 1) : total_bw;
  int idx = 0;
  while (idx < last && (speeds[idx] > max_bw || speeds[idx] * min_channels > start_bw)) ++idx;
  const std::vector<int> intra_types = ns.intraTypes();
  const std::vector<int> inter_types = inter ? ns.interTypes() : std::vector<int>{nccl::kPathPix};

  auto evaluate = [&](const SearchParams& p) {
    NodeChannels ch = ns.find(p);
    if (!inter && p.pattern == Pattern::kTree) {
      // A cycle is also a chain: keep the cycle search's channels when it lays out more of them.
      SearchParams as_ring = p;
      as_ring.pattern = Pattern::kRing;
      NodeChannels cycles = ns.find(as_ring);
      if (cycles.orders.size() > ch.orders.size()) ch = std::move(cycles);
    }
    // On one node, a ring of the finder is also a chain (NCCL's intra-node tree) once its closing hop is dropped.
    if (!inter && p.type_intra == nccl::kPathNvl) {
      NodeChannels alt = nvlinkRingsByFinder(t, node, caps, p.s_intra, p.max_channels);
      if (alt.orders.size() > ch.orders.size()) ch = std::move(alt);
    }
    return ch;
  };
  auto record = [&](GraphResult& best, NodeChannels ch, const SearchParams& p) {
    const int k = static_cast<int>(ch.orders.size());
    if (k < min_channels || k == 0) return false;
    if (best.channels > 0 && !(k * p.s_intra > best.channels * best.bw_intra + kEps)) return false;
    best.channels = k;
    best.bw_intra = p.s_intra;
    best.bw_inter = p.s_inter;
    best.type_intra = p.type_intra;
    best.type_inter = p.type_inter;
    best.ch = std::move(ch);
    return true;
  };

  GraphResult best;
  while (true) {
    const double s = speeds[idx];
    bool perfect = false;
    for (int ti : intra_types) {
      bool found_here = false;
      for (int te : inter_types) {
        SearchParams p;
        p.pattern = pattern;
        p.s_intra = p.s_inter = s;
        p.type_intra = ti;
        p.type_inter = te;
        p.max_channels = max_channels;
        NodeChannels ch = evaluate(p);
        const int k = static_cast<int>(ch.orders.size());
        if (k >= std::max(min_channels, 1)) {
          found_here = true;
          if (k == max_channels || k * s >= total_bw - kEps) perfect = true;
        }
        record(best, std::move(ch), p);
        if (perfect) break;
      }
      if (found_here) break;
    }
    if (perfect) break;
    if (idx < last && (best.channels == 0 || speeds[idx + 1] / best.bw_inter > 0.49)) {
      ++idx;
      continue;
    }
    break;
  }
  if (best.channels == 0) {
    // search.cc: "Could not find a path", falling back to one channel in rank order at 0.1 GB/s over SYS.
    best.fallback = true;
    best.channels = 1;
    best.bw_intra = best.bw_inter = 0.1;
    best.type_intra = best.type_inter = nccl::kPathSys;
    best.ch.orders = {ns.ranks()};
    best.ch.nics = {ns.numNics() > 0 ? ns.nics()[0] : -1};
    return best;
  }
  dupChannels(best, arch_sm, max_channels);

  // Pass 2.
  idx = 0;
  while (idx < last && speeds[idx] > best.bw_inter + kEps) ++idx;
  if (pattern == Pattern::kRing) {
    while (idx > 0) {
      --idx;
      SearchParams p;
      p.pattern = pattern;
      p.s_intra = p.s_inter = speeds[idx];
      p.type_intra = best.type_intra;
      p.type_inter = best.type_inter;
      p.max_channels = max_channels;
      NodeChannels ch = evaluate(p);
      if (static_cast<int>(ch.orders.size()) >= best.channels) record(best, std::move(ch), p);
    }
  } else {
    double intra = best.bw_intra;
    while (idx > 0 && intra == best.bw_intra && intra < best.bw_inter * 2) {
      --idx;
      intra = speeds[idx];
      SearchParams p;
      p.pattern = pattern;
      p.s_intra = intra;
      p.s_inter = best.bw_inter;
      p.type_intra = best.type_intra;
      p.type_inter = best.type_inter;
      p.max_channels = max_channels;
      NodeChannels ch = evaluate(p);
      if (static_cast<int>(ch.orders.size()) >= best.channels) record(best, std::move(ch), p);
    }
  }
  for (size_t c = 0; c < best.ch.nics.size(); ++c) {
    const int nic = best.ch.nics[c];
    for (int k = 0; k < ns.numNics(); ++k) {
      if (ns.nics()[k] == nic) best.latency_inter_us = std::max(best.latency_inter_us, ns.nicAlpha(k));
    }
  }
  return best;
}

// The NVLS graph (search.cc, NCCL_TOPO_PATTERN_NVLS) on a node whose GPUs all reach one NVSwitch: every channel
// has a head GPU; the switch -> GPU and GPU -> switch links carry the channel's speed for every GPU and twice it
// for the head. One node: channels = min(32, GPUs), all forced; the highest intra speed that fits is bwIntra, and
// pass 2 raises bwInter while it is below twice bwIntra. Across nodes: heads are the GPUs nearest to the NICs
// (one per NIC, distinct), the channel count is the largest that fits at each inter speed.
GraphResult nvlsGraph(NodeSearch& ns, const Topology& t, const std::vector<double>& caps, int arch, bool inter) {
  GraphResult g;
  const int n = ns.numGpus();
  double cap_min = std::numeric_limits<double>::infinity();
  for (int r : ns.ranks()) {
    const int v = t.gpuVertex(r);
    double up = 0, down = 0;
    for (int l : t.outLinks(v)) {
      if (t.links[l].kind == LinkKind::kNvlink && t.vertices[t.links[l].dst].kind == VertexKind::kNvSwitch) {
        up += caps[l];
      }
    }
    for (int l : t.inLinks(v)) {
      if (t.links[l].kind == LinkKind::kNvlink && t.vertices[t.links[l].src].kind == VertexKind::kNvSwitch) {
        down += caps[l];
      }
    }
    cap_min = std::min(cap_min, std::min(up, down));
  }
  if (!(cap_min > 0) || n < 2) return g;
  const int max_channels = std::min(kMaxNvlsArity, n);
  const double total_bw = ns.totalBw();
  const double start_bw = total_bw * n / (n - 1);
  const std::vector<double>& speeds = speedList(arch, inter);
  const int last = static_cast<int>(speeds.size()) - 1;
  // Channels whose switch links fit at speed s: heads carry (channels + 1) x s.
  auto fitChannels = [&](double s) { return static_cast<int>(std::floor(cap_min / s + kEps)) - 1; };
  g.type_intra = nccl::kPathNvl;
  if (!inter) {
    int idx = 0;
    while (idx < last && (speeds[idx] > cap_min || speeds[idx] * max_channels > start_bw)) ++idx;
    while (idx < last && fitChannels(speeds[idx]) < max_channels) ++idx;
    if (fitChannels(speeds[idx]) < max_channels) return g;
    g.channels = max_channels;
    g.bw_intra = g.bw_inter = speeds[idx];
    while (idx > 0 && g.bw_inter < 2 * g.bw_intra) g.bw_inter = speeds[--idx];
    return g;
  }
  // Heads: the first GPU, among each NIC's nearest GPUs, that is not a head yet.
  struct HeadNic {
    int nic = -1;
    int gpu = -1;
  };
  std::vector<HeadNic> heads;
  std::vector<bool> is_head(n, false);
  for (int k = 0; k < ns.numNics(); ++k) {
    for (int gpu : ns.nicLocalGpus()[k]) {
      if (is_head[gpu]) continue;
      is_head[gpu] = true;
      heads.push_back({k, gpu});
      break;
    }
  }
  auto headsAt = [&](double s) {
    int count = 0;
    for (const HeadNic& h : heads) {
      const Hop& hop = ns.nicToGpu(h.nic, h.gpu);
      if (ns.nicSpeeds()[h.nic] + kEps >= s && hop.exists && hop.bw + kEps >= s) ++count;
    }
    return count;
  };
  int idx = 0;
  while (idx < last && (speeds[idx] > ns.maxBw() || speeds[idx] > start_bw)) ++idx;
  while (true) {
    const double s = speeds[idx];
    const int k = std::min({headsAt(s), fitChannels(s), max_channels});
    if (k > 0 && (k > g.channels || k * s > g.channels * g.bw_inter + kEps)) {
      g.channels = k;
      g.bw_intra = g.bw_inter = s;
    }
    if (g.channels == max_channels || (g.channels > 0 && g.channels * g.bw_inter >= total_bw - kEps)) break;
    if (idx < last && (g.channels == 0 || speeds[idx + 1] / g.bw_inter > 0.49)) {
      ++idx;
      continue;
    }
    break;
  }
  if (g.channels == 0) return g;
  idx = 0;
  while (idx < last && speeds[idx] > g.bw_inter + kEps) ++idx;
  while (idx > 0 && g.bw_inter < 2 * g.bw_intra) {
    const double s = speeds[idx - 1];
    if (headsAt(s) < g.channels) break;
    --idx;
    g.bw_inter = s;
  }
  double alpha = 0;
  for (const HeadNic& h : heads) alpha = std::max(alpha, ns.nicAlpha(h.nic));
  g.latency_inter_us = alpha;
  return g;
}

// `keep_bw_inter`: the NVLS graph's bwInter enters NCCL's NVLS bandwidth also on one node.
NcclGraph toNcclGraph(const GraphResult& g, bool inter, bool keep_bw_inter = false) {
  NcclGraph out;
  out.channels = g.channels;
  out.bw_intra = g.bw_intra;
  out.bw_inter = inter || keep_bw_inter ? g.bw_inter : 0;
  out.type_intra = nccl::pathTypeName(g.type_intra);
  out.type_inter = inter ? nccl::pathTypeName(g.type_inter) : "";
  out.latency_inter_us = inter ? g.latency_inter_us : 0;
  return out;
}

// NCCL combines the nodes' graphs with min (channels, bandwidths) and max (path types) (init.cc, allGather3).
void combine(GraphResult& into, const GraphResult& g, bool first) {
  if (first) {
    into = g;
    return;
  }
  into.channels = std::min(into.channels, g.channels);
  into.bw_intra = std::min(into.bw_intra, g.bw_intra);
  into.bw_inter = std::min(into.bw_inter, g.bw_inter);
  into.type_intra = std::max(into.type_intra, g.type_intra);
  into.type_inter = std::max(into.type_inter, g.type_inter);
  into.latency_inter_us = std::max(into.latency_inter_us, g.latency_inter_us);
  into.fallback = into.fallback || g.fallback;
}

void cutChannels(NodeChannels& ch, int channels) {
  if (static_cast<int>(ch.orders.size()) > channels) ch.orders.resize(channels);
  if (static_cast<int>(ch.nics.size()) > channels) ch.nics.resize(channels);
}

}  // namespace

// ---- ncclSystem -------------------------------------------------------------------------------------------

namespace {

// GPU architecture (NCCL's compCapIndex follows the smallest compute capability); returns that SM.
int detectArch(const Topology& t, NcclSystem& sys) {
  std::set<int> sms;
  std::set<std::string> unknown_models;
  int row = 3, sm = 100;
  for (const Vertex& v : t.vertices) {
    if (v.kind != VertexKind::kGpu) continue;
    GpuArch a = archFromModel(v.model);
    if (!a.known) {
      unknown_models.insert(v.model.empty() ? "(no model)" : v.model);
      a = GpuArch{1, 80, false};
    }
    sms.insert(a.sm);
    if (a.sm < sm) {
      sm = a.sm;
      row = a.row;
    }
  }
  sys.arch = row;
  sys.arch_name = archName(row);
  sys.mixed_arch = sms.size() > 1;
  for (const std::string& m : unknown_models) {
    sys.notes.push_back(fmt::format("GPU model '{}' not recognised: assumed Ampere (SM80), NCCL's middle row", m));
  }
  if (sys.mixed_arch) {
    sys.notes.push_back(
        fmt::format("GPUs of different architectures: NCCL uses the oldest ({}) and disables LL128", sys.arch_name));
  }
  return sm;
}

// Host CPU vendor: multi-node LL bandwidth cap row and network post overhead (tuning.cc getNetOverhead).
void detectCpuVendor(const Topology& t, bool inter, NcclSystem& sys) {
  std::set<std::string> vendors;
  bool any_cpu = false;
  for (const Vertex& v : t.vertices) {
    if (v.kind != VertexKind::kCpu) continue;
    any_cpu = true;
    const std::string vendor = cpuVendorOf(v.model);
    if (!vendor.empty()) vendors.insert(vendor);
  }
  if (vendors.empty()) {
    sys.cpu_vendor = "Intel";
    if (inter) {
      sys.notes.push_back(any_cpu ? "CPU models not recognised: assumed Intel x86 (net overhead 1 us, LL cap row 0)"
                                  : "no CPU in the topology: assumed Intel x86 (net overhead 1 us, LL cap row 0)");
    }
  } else if (vendors.size() > 1) {
    sys.cpu_vendor = "mixed";
  } else {
    sys.cpu_vendor = *vendors.begin();
  }
}

// NCCL's link bandwidths: NVLink per link by SM times the lanes; everything else as the topology says.
std::vector<double> ncclLinkCaps(const Topology& t, int sm, NcclSystem& sys) {
  const double lane_bw = nvlinkLaneBw(sm);
  std::vector<double> caps(t.links.size());
  bool nvlink_differs = false;
  for (size_t i = 0; i < t.links.size(); ++i) {
    const Link& l = t.links[i];
    if (l.kind == LinkKind::kNvlink) {
      caps[i] = lane_bw * std::max(l.lanes, 1);
      if (std::abs(caps[i] - l.bandwidth_gbps) > 1e-6 * caps[i]) nvlink_differs = true;
    } else {
      caps[i] = l.bandwidth_gbps;
    }
  }
  if (nvlink_differs) {
    sys.notes.push_back(fmt::format(
        "NCCL rates NVLink at {:g} GB/s per link on SM{} (topo.h); the topology's NVLink bandwidths differ and NCCL's "
        "are used",
        lane_bw, sm));
  }
  return caps;
}

// Per node: the ring, tree and NVLS graphs, combined over nodes as init.cc does; the channels behind each node's
// graphs go to `result`. Rings and trees end with the same channel count (the smaller).
Status searchNodes(const Topology& t, const std::vector<int>& gpu_nodes, const std::vector<double>& caps, int sm,
                   nccl::SearchResult& result) {
  NcclSystem& sys = result.system;
  const bool inter = gpu_nodes.size() > 1;
  GraphResult ring, tree, nvls;
  bool nvls_ok = sys.arch >= 2;
  for (size_t idx = 0; idx < gpu_nodes.size(); ++idx) {
    const Node& node = t.nodes[gpu_nodes[idx]];
    NodeSearch ns(t, node, inter, caps);
    if (inter && ns.numNics() == 0) {
      return unsupported(fmt::format(
          "topology '{}': node {} has no NIC linked to the network, so NCCL cannot connect it to the other nodes",
          t.name, node.name));
    }
    GraphResult r = searchGraph(t, node, ns, Pattern::kRing, 1, kRingMaxChannels, sys.arch, sm, inter, caps);
    GraphResult tr = searchGraph(t, node, ns, Pattern::kTree, r.channels, r.channels, sys.arch, sm, inter, caps);
    if (r.fallback) {
      sys.notes.push_back(
          fmt::format("node {}: no ring fits NCCL's search; NCCL falls back to one channel at 0.1 GB/s", node.name));
    }
    combine(ring, r, idx == 0);
    combine(tree, tr, idx == 0);
    result.node_index.push_back(gpu_nodes[idx]);
    result.ring.push_back(std::move(r.ch));
    result.tree.push_back(std::move(tr.ch));
    if (nvls_ok) {
      GraphResult nv = nvlsGraph(ns, t, caps, sys.arch, inter);
      if (nv.channels == 0) nvls_ok = false;
      combine(nvls, nv, idx == 0);
    }
  }
  const int channels = std::min(ring.channels, tree.channels);
  ring.channels = tree.channels = channels;
  for (NodeChannels& ch : result.ring) cutChannels(ch, channels);
  for (NodeChannels& ch : result.tree) cutChannels(ch, channels);
  sys.ring = toNcclGraph(ring, inter);
  sys.tree = toNcclGraph(tree, inter);
  if (nvls_ok && nvls.channels > 0) {
    sys.nvls = true;
    sys.nvls_graph = toNcclGraph(nvls, inter, true);
  }
  return Status::ok();
}

void summaryNotes(int sm, bool inter, NcclSystem& sys) {
  sys.notes.push_back(fmt::format("{} ({}), {} node(s) x {} GPU(s); host CPUs {}", sys.arch_name,
                                  fmt::format("SM{}", sm), sys.num_nodes, sys.ranks_per_node, sys.cpu_vendor));
  sys.notes.push_back(fmt::format("ring: {} channel(s) x {:g} GB/s{}, path types {}{}", sys.ring.channels,
                                  sys.ring.bw_intra, inter ? fmt::format(" (inter {:g})", sys.ring.bw_inter) : "",
                                  sys.ring.type_intra, inter ? "/" + sys.ring.type_inter : ""));
  sys.notes.push_back(
      fmt::format("tree: {} channel(s) x {:g} GB/s{}: NCCL's balanced tree assumed (no 0.85 'TREE pattern' penalty)",
                  sys.tree.channels, sys.tree.bw_intra, inter ? fmt::format(" (inter {:g})", sys.tree.bw_inter) : ""));
  sys.notes.push_back(fmt::format("p2p (send/recv, all-to-all): {} channel(s), {} per peer", sys.p2p_channels,
                                  sys.p2p_channels_per_peer));
  if (sys.nvls) {
    sys.notes.push_back(
        fmt::format("NVLS: {} channel(s), bwIntra {:g}, bwInter {:g} GB/s (NVLink SHARP assumed "
                    "available: Hopper+ on NVSwitch with multicast)",
                    sys.nvls_graph.channels, sys.nvls_graph.bw_intra, sys.nvls_graph.bw_inter));
  }
  if (inter) {
    sys.notes.push_back(
        "across nodes each channel enters and leaves a node through one NIC (NCCL_CROSS_NIC's first try); NIC "
        "latency = the NIC's network link alpha; CollNet/SHARP off (NCCL's default)");
  }
}

}  // namespace

Result<nccl::SearchResult> nccl::search(const Topology& t) {
  nccl::SearchResult result;
  NcclSystem& sys = result.system;
  const int n = t.numGpus();
  if (n < 1) return invalidArgument(fmt::format("topology '{}' has no GPUs: NCCL has nothing to build", t.name));
  sys.num_ranks = n;
  std::vector<int> gpu_nodes;
  for (size_t q = 0; q < t.nodes.size(); ++q) {
    if (t.nodes[q].gpus.empty()) continue;
    gpu_nodes.push_back(static_cast<int>(q));
    sys.ranks_per_node = std::max(sys.ranks_per_node, static_cast<int>(t.nodes[q].gpus.size()));
  }
  if (gpu_nodes.empty()) return invalidArgument(fmt::format("topology '{}': no node holds a GPU", t.name));
  sys.num_nodes = static_cast<int>(gpu_nodes.size());
  const bool inter = sys.num_nodes > 1;
  const int sm = detectArch(t, sys);
  detectCpuVendor(t, inter, sys);
  const std::vector<double> caps = ncclLinkCaps(t, sm, sys);
  if (n == 1) {
    // One GPU: NCCL's tuning returns before modelling anything (nRanks <= 1).
    sys.ring.channels = sys.tree.channels = 1;
    sys.ring.bw_intra = sys.tree.bw_intra = kLocBw;
    sys.ring.type_intra = sys.tree.type_intra = "LOC";
    sys.notes.push_back("one GPU: NCCL copies locally, no channels are searched");
    result.node_index = {gpu_nodes[0]};
    result.ring.push_back(NodeChannels{{{0}}, {-1}});
    result.tree.push_back(NodeChannels{{{0}}, {-1}});
    sys.p2p_channels = sys.p2p_channels_per_peer = 1;
    return result;
  }
  BRAID_RETURN_IF_ERROR(searchNodes(t, gpu_nodes, caps, sm, result));
  nccl::p2pChannelCounts(t, nvlinkLaneBw(sm), sys);
  summaryNotes(sm, inter, sys);
  return result;
}

Result<NcclSystem> ncclSystem(const Topology& topology) {
  BRAID_ASSIGN_OR_RETURN(nccl::SearchResult result, nccl::search(topology));
  return std::move(result.system);
}
}  // namespace braid
