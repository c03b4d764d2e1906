// The congestion model's fabrics: leaf-spine and rail-only (congestion_fabric.h, docs/congestion.md "Fabric").
#include "transport/simulated/congestion_fabric.h"

#include <fmt/format.h>

#include <cmath>

namespace braid::congestion {
namespace {

constexpr double kBytesPerUsPerGbps = 1e3;

// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA'14): the ECMP hash.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int addLink(Fabric& f, int src, int dst, double gbps, double latency_us) {
  f.links.push_back({src, dst, gbps * kBytesPerUsPerGbps, latency_us});
  return static_cast<int>(f.links.size()) - 1;
}

Status checkSpec(const FabricSpec& s) {
  if (s.ranks < 2) return invalidArgument(fmt::format("congestion: {} ranks; an all-to-all needs at least 2", s.ranks));
  if (s.gpus_per_node < 1 || s.ranks % s.gpus_per_node != 0) {
    return invalidArgument(
        fmt::format("congestion: {} ranks are not whole nodes of {} GPUs", s.ranks, s.gpus_per_node));
  }
  if (s.ranks / s.gpus_per_node < 2) {
    return invalidArgument(
        fmt::format("congestion: {} ranks of {} GPUs per node make one node; the fabric carries "
                    "nothing",
                    s.ranks, s.gpus_per_node));
  }
  if (!(s.link_gbps > 0) || !std::isfinite(s.link_gbps)) {
    return invalidArgument(fmt::format("congestion: link bandwidth {} GB/s is not positive", s.link_gbps));
  }
  if (!(s.link_latency_us >= 0) || !std::isfinite(s.link_latency_us)) {
    return invalidArgument(fmt::format("congestion: link latency {} us is negative", s.link_latency_us));
  }
  if (s.kind == FabricKind::kLeafSpine) {
    if (s.hosts_per_leaf < 1) return invalidArgument("congestion: hosts_per_leaf must be at least 1");
    if (!(s.oversubscription >= 1) || !std::isfinite(s.oversubscription)) {
      return invalidArgument(fmt::format("congestion: oversubscription {} must be at least 1", s.oversubscription));
    }
    if (s.spines < 0) return invalidArgument(fmt::format("congestion: {} spines", s.spines));
  }
  return Status::ok();
}

}  // namespace

Result<Fabric> buildFabric(const FabricSpec& spec) {
  BRAID_RETURN_IF_ERROR(checkSpec(spec));
  Fabric f;
  f.hosts = spec.ranks;
  if (spec.kind == FabricKind::kLeafSpine) {
    const int leaves = (spec.ranks + spec.hosts_per_leaf - 1) / spec.hosts_per_leaf;
    const int spines =
        spec.spines > 0 ? spec.spines : std::max(1, static_cast<int>(spec.hosts_per_leaf / spec.oversubscription));
    // A leaf's uplinks carry its downlink bandwidth / oversubscription, split evenly over the spines.
    const double up_gbps = spec.hosts_per_leaf * spec.link_gbps / spec.oversubscription / spines;
    f.devices = f.hosts + leaves + (leaves > 1 ? spines : 0);
    f.ports_of.assign(static_cast<size_t>(f.devices - f.hosts), 0);
    f.host_up.resize(f.hosts);
    for (int h = 0; h < f.hosts; ++h) {
      const int leaf = f.hosts + h / spec.hosts_per_leaf;
      f.host_up[h] = addLink(f, h, leaf, spec.link_gbps, spec.link_latency_us);
      addLink(f, leaf, h, spec.link_gbps, spec.link_latency_us);
      ++f.ports_of[leaf - f.hosts];
    }
    if (leaves > 1) {
      for (int l = 0; l < leaves; ++l) {
        for (int s = 0; s < spines; ++s) {
          const int leaf = f.hosts + l, spine = f.hosts + leaves + s;
          addLink(f, leaf, spine, up_gbps, spec.link_latency_us);
          addLink(f, spine, leaf, up_gbps, spec.link_latency_us);
          ++f.ports_of[leaf - f.hosts];
          ++f.ports_of[spine - f.hosts];
        }
      }
    }
  } else {
    const int rails = spec.gpus_per_node;
    f.devices = f.hosts + rails;
    f.ports_of.assign(static_cast<size_t>(rails), 0);
    f.host_up.resize(f.hosts);
    for (int h = 0; h < f.hosts; ++h) {
      const int rail = f.hosts + h % rails;
      f.host_up[h] = addLink(f, h, rail, spec.link_gbps, spec.link_latency_us);
      addLink(f, rail, h, spec.link_gbps, spec.link_latency_us);
      ++f.ports_of[rail - f.hosts];
    }
  }
  return f;
}

Fabric::Path flowPath(const FabricSpec& spec, const Fabric& f, int src, int dst, uint64_t seed) {
  Fabric::Path p;
  // Host h's links: up = 2h, down = 2h + 1 (buildFabric adds them in that order for every host first).
  auto down = [](int host) { return 2 * host + 1; };
  if (spec.kind == FabricKind::kRail) {
    const int g = spec.gpus_per_node;
    p.src_host = src / g * g + dst % g;  // PXN: the NIC of src's node on dst's rail
    p.dst_host = dst;
    p.link[p.hops++] = f.host_up[p.src_host];
    p.link[p.hops++] = down(p.dst_host);
  } else {
    p.src_host = src;
    p.dst_host = dst;
    const int hpl = spec.hosts_per_leaf;
    const int src_leaf = src / hpl, dst_leaf = dst / hpl;
    p.link[p.hops++] = f.host_up[src];
    if (src_leaf != dst_leaf) {
      const int leaves = (spec.ranks + hpl - 1) / hpl;
      const int spines = (f.devices - f.hosts - leaves);
      const int spine = static_cast<int>(mix(seed ^ (static_cast<uint64_t>(src) << 32 | static_cast<uint64_t>(dst))) %
                                         static_cast<uint64_t>(spines));
      // Leaf-spine links follow the host links: for leaf l and spine s, up = base + 2(l * spines + s), down = up + 1.
      const int base = 2 * f.hosts;
      p.link[p.hops++] = base + 2 * (src_leaf * spines + spine);
      p.link[p.hops++] = base + 2 * (dst_leaf * spines + spine) + 1;
    }
    p.link[p.hops++] = down(dst);
  }
  for (int k = 0; k < p.hops; ++k) p.latency_us += f.links[p.link[k]].latency_us;
  return p;
}

}  // namespace braid::congestion
