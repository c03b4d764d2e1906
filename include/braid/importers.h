// Importers: real machine descriptions turned into the Topology model, from their text (loadTopology() in
// braid/topology.h picks one by the file's contents and reads the file). Each is lenient where real files are
// sloppy and records every assumption in Topology::notes; malformed input gives a parse error
// naming the file, line and field.
#pragma once

#include <string>

#include "braid/taccl.h"
#include "braid/topology.h"

namespace braid {

/// NCCL topology XML (<system version="1">): full dumps (NCCL_TOPO_DUMP_FILE) and PCI-only hint
/// files (NCCL_TOPO_FILE). Source: ../shared/reference/nccl_plugins.md §5.
Result<Topology> importNcclTopoXml(const std::string& text, const std::string& filename);

/// `nvidia-smi topo -m` matrix text (NV#, PIX, PXB, PHB, NODE, SYS, X; NIC legend optional). Errors (kParseError,
/// naming the file, line and column): no header, a cell that is not a class, X off the diagonal, a GPU without a
/// row, and a matrix that is not symmetric (the two cells of a pair differ, e.g. NV1 one way and SYS the other).
Result<Topology> importNvidiaSmiTopo(const std::string& text, const std::string& filename);

/// TACCL topology profile JSON (DGX2/NDv2/custom constructors, ../shared/reference/taccl_msccl.md
/// §1.3). With a sketch, builds sketch->nnodes copies joined as the sketch's internode_conn says;
/// without one, a single node.
Result<Topology> importTacclProfile(const std::string& text, const std::string& filename, const TacclSketch* sketch);

}  // namespace braid
