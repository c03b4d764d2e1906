// Ring algorithms (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
// workstations", JPDC 69(2), 2009; NCCL's ring). Costs: ../shared/reference/anchors_algorithms.md §4.
// Every rank runs one threadblock per ring (send to the next rank, receive from the previous one);
// ring k runs on channel k and owns its own share of the data, so K rings split the data K ways.
// Broadcast and reduce are chains along the ring that start (broadcast) or end (reduce) at the root.
#include <fmt/format.h>

#include "braid/classic_blocks.h"

namespace braid::algos {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

struct RingPos {
  int pos = 0;
  int next = 0;
  int prev = 0;
};

std::vector<RingPos> positions(const RingOrder& ring) {
  const int n = static_cast<int>(ring.size());
  std::vector<RingPos> by_rank(n);
  for (int i = 0; i < n; ++i) by_rank[ring[i]] = RingPos{i, ring[mod(i + 1, n)], ring[mod(i - 1, n)]};
  return by_rank;
}

// All-gather: logical c = K; rank q's chunk k lands at output q*K + k. Rank at position p sends its
// own chunk, then forwards n-2 chunks and keeps the last: n-1 sends, (n-1)α + (n-1)/n·N·β.
void ringAllGather(ProgramBuilder& b, const RingOrder& ring, int k, int num_rings) {
  const int n = b.numRanks();
  const auto pos = positions(ring);
  for (int r = 0; r < n; ++r) {
    const int tb = b.newTb(r, pos[r].next, pos[r].prev, k);
    const Loc own_in = b.in(r, k);
    const Loc own_out = b.out(r, r * num_rings + k);
    if (!b.same(own_in, own_out)) b.copy(r, tb, own_in, own_out, 1);
    b.send(r, tb, own_in, 1);
    for (int s = 1; s < n; ++s) {
      const int origin = ring[mod(pos[r].pos - s, n)];
      const Loc dst = b.out(r, origin * num_rings + k);
      if (s < n - 1) {
        b.recvCopySend(r, tb, dst, 1);
      } else {
        b.recv(r, tb, dst, 1);
      }
    }
  }
}

// Reduce-scatter: logical c = K; input chunk d*K + k is rank d's share. The partial sum for the rank
// at position t starts at t+1 and ends, complete, at t.
void ringReduceScatter(ProgramBuilder& b, const RingOrder& ring, int k, int num_rings) {
  const int n = b.numRanks();
  const auto pos = positions(ring);
  for (int r = 0; r < n; ++r) {
    const int tb = b.newTb(r, pos[r].next, pos[r].prev, k);
    const int p = pos[r].pos;
    b.send(r, tb, b.in(r, ring[mod(p - 1, n)] * num_rings + k), 1);
    for (int s = 1; s < n - 1; ++s) {
      b.recvReduceSend(r, tb, b.in(r, ring[mod(p - 1 - s, n)] * num_rings + k), 1);
    }
    b.recvReduceCopy(r, tb, b.in(r, r * num_rings + k), b.out(r, k), 1);
  }
}

// All-reduce: logical c = n*K; ring k owns chunks [k*n, k*n+n), chunk k*n + t belonging to
// position t. Reduce-scatter then all-gather in one threadblock: 2(n-1) sends per rank.
void ringAllReduce(ProgramBuilder& b, const RingOrder& ring, int k) {
  const int n = b.numRanks();
  const auto pos = positions(ring);
  auto seg = [&](int t) { return k * n + mod(t, n); };
  for (int r = 0; r < n; ++r) {
    const int tb = b.newTb(r, pos[r].next, pos[r].prev, k);
    const int p = pos[r].pos;
    b.send(r, tb, b.in(r, seg(p - 1)), 1);
    for (int s = 1; s < n - 1; ++s) b.recvReduceSend(r, tb, b.in(r, seg(p - 1 - s)), 1);
    b.recvReduceCopySend(r, tb, b.in(r, seg(p)), b.out(r, seg(p)), 1);
    for (int s = 1; s < n - 1; ++s) b.recvCopySend(r, tb, b.out(r, seg(p - s)), 1);
    b.recv(r, tb, b.out(r, seg(p - (n - 1))), 1);
  }
}

// All-to-all by ring forwarding (store and forward with accumulated messages): in round t the rank
// at position p sends n-t chunks, all of them originating at position p-t+1 and ordered by the
// distance still to travel; the receiver keeps the first and forwards the rest. Logical c = K;
// scratch holds n-1 chunks per ring. Per link: n(n-1)/2 chunks in n-1 messages.
void ringAllToAll(ProgramBuilder& b, const RingOrder& ring, int k, int num_rings) {
  const int n = b.numRanks();
  const auto pos = positions(ring);
  const int base = k * (n - 1);  // this ring's scratch region
  for (int r = 0; r < n; ++r) {
    const int tb = b.newTb(r, pos[r].next, pos[r].prev, k);
    const int p = pos[r].pos;
    const Loc self_in = b.in(r, r * num_rings + k);
    const Loc self_out = b.out(r, r * num_rings + k);
    if (!b.same(self_in, self_out)) b.copy(r, tb, self_in, self_out, 1);
    // Stage own chunks by distance 1..n-1, merging runs that are contiguous at both ends.
    int d = 1;
    while (d < n) {
      const Loc first = b.in(r, ring[mod(p + d, n)] * num_rings + k);
      int len = 1;
      while (d + len < n) {
        const Loc nxt = b.in(r, ring[mod(p + d + len, n)] * num_rings + k);
        if (nxt.buf != first.buf || nxt.off != first.off + len) break;
        ++len;
      }
      b.copy(r, tb, first, ProgramBuilder::scratch(base + d - 1), len);
      d += len;
    }
    b.send(r, tb, ProgramBuilder::scratch(base), n - 1);
    for (int t = 1; t < n; ++t) {
      const int m = n - t;  // chunks in this round's message
      const int origin = ring[mod(p - t, n)];
      const Loc mine = b.out(r, origin * num_rings + k);
      if (m == 1) {  // the last message holds only this rank's chunk
        b.recv(r, tb, mine, 1);
        break;
      }
      b.recv(r, tb, ProgramBuilder::scratch(base), m);
      b.copy(r, tb, ProgramBuilder::scratch(base), mine, 1);
      b.send(r, tb, ProgramBuilder::scratch(base + 1), m - 1);
    }
  }
}

// Broadcast (NCCL's ring broadcast: a chain in ring order from the root): logical c = K, ring k moves
// chunk k. The root sends its input (and copies it to its output out of place), every following rank
// receives into its output and forwards it, the rank before the root only receives. One step per rank;
// the executor pipelines its slices across the n-1 hops: (n-1+S-1)(α + (N/S)β) for S slices.
void ringBroadcast(ProgramBuilder& b, const RingOrder& ring, int k, int root) {
  const int n = b.numRanks();
  const auto pos = positions(ring);
  const int root_pos = pos[root].pos;
  for (int r = 0; r < n; ++r) {
    const int hop = mod(pos[r].pos - root_pos, n);  // 0 at the root, n-1 at the chain's end
    const int tb = b.newTb(r, hop < n - 1 ? pos[r].next : -1, hop > 0 ? pos[r].prev : -1, k);
    if (hop == 0) {
      b.send(r, tb, b.in(r, k), 1);
      if (!b.same(b.in(r, k), b.out(r, k))) b.copy(r, tb, b.in(r, k), b.out(r, k), 1);
    } else if (hop < n - 1) {
      b.recvCopySend(r, tb, b.out(r, k), 1);
    } else {
      b.recv(r, tb, b.out(r, k), 1);
    }
  }
}

// Reduce (NCCL's ring reduce): the broadcast chain reversed toward the root. The rank after the root
// sends its input, each rank after it adds its input to what passes through (recvReduceSend, nothing
// stored), and the root adds its input into its output. Logical c = K. Only the root writes.
void ringReduce(ProgramBuilder& b, const RingOrder& ring, int k, int root) {
  const int n = b.numRanks();
  const auto pos = positions(ring);
  const int root_pos = pos[root].pos;
  for (int r = 0; r < n; ++r) {
    const int hop = mod(pos[r].pos - root_pos, n);  // 1 starts the chain, 0 (the root) ends it
    const int tb = b.newTb(r, hop != 0 ? pos[r].next : -1, hop != 1 ? pos[r].prev : -1, k);
    if (hop == 1) {
      b.send(r, tb, b.in(r, k), 1);
    } else if (hop != 0) {
      b.recvReduceSend(r, tb, b.in(r, k), 1);
    } else {
      b.recvReduceCopy(r, tb, b.in(r, k), b.out(r, k), 1);
    }
  }
}

}  // namespace

int ringBaseFactor(CollectiveKind kind, int n, int num_rings) {
  return kind == CollectiveKind::kAllReduce ? n * num_rings : num_rings;
}

Status buildRings(ProgramBuilder& b, CollectiveKind kind, const std::vector<RingOrder>& rings, int root) {
  const int n = b.numRanks();
  const int num_rings = static_cast<int>(rings.size());
  for (const RingOrder& ring : rings) {
    std::vector<bool> seen(n, false);
    if (static_cast<int>(ring.size()) != n) return internalError("ring does not list every rank");
    for (int r : ring) {
      if (r < 0 || r >= n || seen[r]) return internalError("ring is not a permutation of the ranks");
      seen[r] = true;
    }
  }
  for (int k = 0; k < num_rings; ++k) {
    switch (kind) {
      case CollectiveKind::kAllGather: ringAllGather(b, rings[k], k, num_rings); break;
      case CollectiveKind::kReduceScatter: ringReduceScatter(b, rings[k], k, num_rings); break;
      case CollectiveKind::kAllReduce: ringAllReduce(b, rings[k], k); break;
      case CollectiveKind::kAllToAll: ringAllToAll(b, rings[k], k, num_rings); break;
      case CollectiveKind::kBroadcast: ringBroadcast(b, rings[k], k, root); break;
      case CollectiveKind::kReduce: ringReduce(b, rings[k], k, root); break;
      default: return invalidArgument(fmt::format("ring: {} is not supported", collectiveName(kind)));
    }
  }
  return Status::ok();
}

}  // namespace braid::algos
