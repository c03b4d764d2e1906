// Test helper: small hand-built topologies whose costs are easy to derive by hand. Bandwidth b in GB/s per
// direction, alpha a in µs per link; all GPUs in one node "n0", NVLink links.
#pragma once

#include "braid/topology.h"

namespace braid::testing {

/// gpu0 - gpu1 - ... - gpu(n-1), duplex links (b, a).
inline Topology lineTopology(int n, double b, double a) {
  Topology t;
  t.name = "line";
  const int node = t.addNode("n0");
  for (int i = 0; i < n; ++i) t.addVertex(VertexKind::kGpu, node);
  for (int i = 0; i + 1 < n; ++i) t.addDuplexLink(t.gpuVertex(i), t.gpuVertex(i + 1), LinkKind::kNvlink, b, a);
  return t;
}

/// The line closed into a ring (for n = 2 a single duplex link).
inline Topology ringTopology(int n, double b, double a) {
  Topology t = lineTopology(n, b, a);
  t.name = "ring";
  if (n > 2) t.addDuplexLink(t.gpuVertex(n - 1), t.gpuVertex(0), LinkKind::kNvlink, b, a);
  return t;
}

/// n GPUs, each with one duplex link (b, a) to one NVSwitch vertex (added after the GPUs).
inline Topology starTopology(int n, double b, double a) {
  Topology t;
  t.name = "star";
  const int node = t.addNode("n0");
  for (int i = 0; i < n; ++i) t.addVertex(VertexKind::kGpu, node);
  const int sw = t.addVertex(VertexKind::kNvSwitch, node, "nvswitch");
  for (int i = 0; i < n; ++i) t.addDuplexLink(t.gpuVertex(i), sw, LinkKind::kNvlink, b, a);
  return t;
}

}  // namespace braid::testing
