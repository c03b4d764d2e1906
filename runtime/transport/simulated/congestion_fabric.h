// The congestion model's fabric (include/braid/congestion.h): devices, directed links and each flow's path. Private
// to runtime/transport/simulated (congestion.cc, congestion_fabric.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "braid/congestion.h"
#include "braid/status.h"

namespace braid::congestion {

/// Devices 0 .. hosts-1 are NIC ports, the rest switches. Every link is directed; the link id doubles as the
/// ingress port id at its destination (PFC counts per ingress port).
struct Fabric {
  struct Link {
    int src = 0;
    int dst = 0;
    double bytes_per_us = 0;
    double latency_us = 0;
  };
  int hosts = 0;
  int devices = 0;
  std::vector<Link> links;
  std::vector<int> host_up;   // per host: its link to the first switch
  std::vector<int> ports_of;  // per switch device (index device - hosts): egress ports, for the default buffer
  /// Per (src rank, dst rank) on different nodes: NIC ports and links, in hop order (at most kMaxHops).
  static constexpr int kMaxHops = 4;
  struct Path {
    int src_host = 0;
    int dst_host = 0;
    int hops = 0;
    int link[kMaxHops] = {};
    double latency_us = 0;  // sum of the links' latencies
  };
};

/// Builds the fabric and checks the spec (errors: see simulateAllToAll).
Result<Fabric> buildFabric(const FabricSpec& spec);
/// The path of the flow src -> dst (ranks on different nodes): leaf-spine from src's NIC to dst's NIC through the
/// spine ECMP picks (hash of the pair and `seed`); rail from the NIC of src's node on dst's rail (PXN) to dst's NIC.
Fabric::Path flowPath(const FabricSpec& spec, const Fabric& fabric, int src, int dst, uint64_t seed);

}  // namespace braid::congestion
