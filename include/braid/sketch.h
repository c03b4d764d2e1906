// Communication sketches (TACCL, NSDI'23 §3; ../shared/reference/taccl_msccl.md §1.4): what the
// synthesizer may use and how it should think about the machine. A sketch narrows the search:
// which GPU pairs may talk directly inside a node (the logical topology), which GPUs relay
// between nodes and whose chunks they forward, the symmetry the algorithm must have, how many
// chunks each rank's data is cut into, and the message size the α-β costs are taken at.
//
// Braid's sketch is YAML (docs/formats/sketch.md). TACCL's sketch JSON converts into it
// (sketchFromTaccl). Without a sketch the synthesizer derives one from the topology (deriveSketch).
// GPU ids in a sketch are local ids inside a node (0 .. GPUs per node - 1).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "braid/collective.h"
#include "braid/status.h"
#include "braid/taccl.h"
#include "braid/topology.h"

namespace braid {

/// Which GPU pairs of a node may exchange data directly (the sketch's intra-node logical topology).
enum class IntraLinks {
  kNvlink,    // pairs whose route is NVLink only (direct or through NVSwitch); all pairs when the node has none
  kAll,       // every pair with a route inside the node (PCIe / SYS included)
  kExplicit,  // exactly Sketch::intranode_pairs
};
const char* intraLinksName(IntraLinks links);  // "nvlink", "all", "explicit"

/// TACCL switch hyperedge: GPUs attached to one switch. uc-min prefers few distinct connections through
/// it, uc-max many (TACCL routing objective tweak, taccl_msccl.md §1.5).
struct SketchSwitch {
  std::vector<int> gpus;             // local GPU ids
  std::string hyperedge = "uc-max";  // "uc-max" | "uc-min"
};

/// How GPUs of different nodes connect (TACCL "relay" internode sketch).
enum class InterConn {
  kMap,             // Sketch::internode_map: local sender -> local receivers on every other node
  kFullyConnected,  // every GPU to every GPU of every other node
  kDirectMap,       // GPU i to GPU i of every other node
};
const char* interConnName(InterConn conn);  // "map", "fully-connected", "direct-map"

struct Sketch {
  std::string name;    // informational
  std::string source;  // file it was read from; "derived:<topology>" for deriveSketch
  /// Node count the sketch was written for; 0 = any. Must equal the topology's node count when set.
  int nodes = 0;
  /// TACCL intranode strategy: "none" | "switch" | "maxmin" | "minmax" (objective tweaks only).
  std::string intranode_strategy = "none";
  IntraLinks intranode_links = IntraLinks::kNvlink;
  std::vector<std::pair<int, int>> intranode_pairs;  // kExplicit: directed local pairs (a -> b)
  std::vector<SketchSwitch> switches;
  InterConn internode_conn = InterConn::kDirectMap;
  std::map<int, std::vector<int>> internode_map;  // kMap: local sender -> local receivers
  /// TACCL gpus_to_sender_rev_map: sender -> local GPUs whose chunks it forwards to other nodes. A sender
  /// missing here (or an empty map) forwards any chunk of its node.
  std::map<int, std::vector<int>> relay_for;
  /// The sender's own chunks cross before the chunks it relays (TACCL enforce_ordering).
  bool enforce_ordering = false;
  /// TACCL symmetry offsets [offset, group]: rank r maps to ((r mod group) + offset) mod group +
  /// (r div group) * group. The algorithm is invariant under every listed map (and their compositions).
  std::vector<std::pair<int, int>> symmetry;
  int chunkup = 1;  // chunks per rank-sized piece of data (TACCL input_chunkup)
  /// nccl-tests size (bytes) the α-β link costs are evaluated at; 0 = 1 MiB per chunk (TACCL's profiles are
  /// taken at 1 MB chunks).
  uint64_t size_bytes = 0;
  /// Extra hops beyond the shortest path a chunk may take inside the logical topology (TACCL: 0).
  int path_slack = 0;
  /// Why each derived or defaulted field has its value (one sentence each).
  std::vector<std::string> notes;
};

/// Reads Braid's sketch YAML. Errors (kParseError) name the file, line and field.
Result<Sketch> readSketchYaml(const std::string& text, const std::string& filename);
/// Writes Braid's sketch YAML (readSketchYaml reads it back unchanged; notes become comments).
std::string writeSketchYaml(const Sketch& sketch);
/// TACCL sketch -> Braid sketch (nnodes, strategies, switches, relays, rev map, ordering, symmetry, chunkup).
Sketch sketchFromTaccl(const TacclSketch& taccl);
/// Loads a sketch file: TACCL JSON (starts with '{') or Braid YAML. kNotFound for a missing file.
Result<Sketch> loadSketch(const std::string& path);

/// A sensible sketch for `topology` and `collective` when the user gives none:
///   - intra-node links: NVLink pairs when the node has NVLink, else every pair;
///   - relays from GPU-NIC affinity (nicAffinity): every GPU with a nearest NIC of its own sends to and
///     receives from the same local GPU of other nodes (direct-map) when each GPU has such a NIC; otherwise
///     the GPUs nearest to each NIC relay (one sender per NIC, receivers = the same local GPUs), and every
///     GPU's chunks may use any relay;
///   - symmetry: the node shift [GPUs per node, all GPUs] when every node has the same template and more
///     than one node exists; rotations inside a node only when they map the intra-node links onto
///     themselves (checked) — all-to-all and multi-node alike;
///   - chunkup: the smallest of 1, 2, 3, 6 for which the NVLink lane counts of the node divide evenly
///     (6 on DGX-1: one- and two-lane links), 1 otherwise; size_bytes 0.
/// Each choice is explained in Sketch::notes. Errors: kInvalidArgument for a topology with no GPUs.
Result<Sketch> deriveSketch(const Topology& topology, CollectiveKind collective);

/// Checks a sketch against a topology: node count, GPU ids in range, map/relay entries that name GPUs of
/// the node, positive chunkup, symmetry groups dividing the rank count. Errors name the sketch source and
/// the field (kInvalidArgument).
Status checkSketch(const Sketch& sketch, const Topology& topology);

}  // namespace braid
