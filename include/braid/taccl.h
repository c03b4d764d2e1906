// TACCL communication sketches (../shared/reference/taccl_msccl.md §1.4), read from TACCL's JSON.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid {

struct TacclSwitch {
  std::vector<int> gpus;  // local GPU ids sharing one switch hyperedge
  std::string strategy;   // "uc-max" or "uc-min"
};

struct TacclSketch {
  std::string source;  // file name
  int nnodes = 1;
  std::string intranode_strategy = "none";  // none | switch | maxmin | minmax
  std::vector<TacclSwitch> switches;
  bool has_internode = false;
  std::string internode_strategy;                          // "relay"
  std::string internode_conn_kind;                         // "map", "fully-connected" or "direct-map"
  std::map<int, std::vector<int>> internode_conn;          // local sender -> local receivers (kind "map")
  std::map<int, std::vector<int>> gpus_to_sender_rev_map;  // sender -> local GPUs it relays for
  bool enforce_ordering = false;
  std::vector<std::pair<int, int>> symmetry_offsets;  // [offset, size]
  int input_chunkup = 1;
};

/// Reads a TACCL sketch. A missing `internode_sketch` is allowed for nnodes == 1.
/// Errors name the file, line and key.
Result<TacclSketch> readTacclSketch(const std::string& text, const std::string& filename);
Result<TacclSketch> loadTacclSketch(const std::string& path);

/// Builds the multi-node topology a TACCL profile describes for a sketch's node count (the import
/// loadTopology uses for TACCL profiles, with the sketch's nnodes): TACCL's built-in NDv2 / DGX-2 /
/// hub-and-spoke link matrices or a custom profile's matrices, one NIC link per NIC into one network switch,
/// GPU-NIC links (both directions) for the sketch's senders and receivers. Errors name the profile or sketch file and
/// field.
class Topology;
Result<Topology> loadTacclTopology(const std::string& profile_path, const TacclSketch& sketch);

}  // namespace braid
