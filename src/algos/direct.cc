// Direct (all-pairs) algorithms: every rank exchanges with every other rank at once, one
// threadblock per peer and channel (as MSCCL's allpairs algorithms, msccl-tools examples). One
// latency step for all-gather/all-to-all, two for all-reduce (reduce-scatter then all-gather).
// Broadcast and reduce: the root talks to every other rank directly (a flat tree: one latency step, but
// the root's links carry (n-1)N; the binomial tree in recursive.cc, after Thakur, Rabenseifner & Gropp,
// "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005, trades that for
// ceil(log2 n) rounds of N each).
#include <fmt/format.h>

#include "braid/classic_blocks.h"

namespace braid::algos {

int directBaseFactor(CollectiveKind kind, int n, int channels) {
  return kind == CollectiveKind::kAllReduce ? n * channels : channels;
}

namespace {

// Broadcast: the root sends chunk k to every other rank on channel k, one threadblock per peer (all
// n-1 sends at once: the root's links carry (n-1)N); out of place the root also copies its input.
void directBroadcast(ProgramBuilder& b, int K, int root) {
  const int n = b.numRanks();
  const Loc src = b.in(root, 0);
  const Loc dst = b.out(root, 0);
  if (!b.same(src, dst)) b.copy(root, b.newTb(root, -1, -1, 0), src, dst, K);
  for (int k = 0; k < K; ++k) {
    for (int i = 1; i < n; ++i) {
      const int p = (root + i) % n;
      b.send(root, b.newTb(root, p, -1, k), b.in(root, k), 1);
      b.recv(p, b.newTb(p, -1, root, k), b.out(p, k), 1);
    }
  }
}

// Reduce: every other rank sends chunk k of its input to the root on channel k; the root receives each
// peer on its own threadblock and reduces the arrivals into its output one after another (a chain of
// dependencies, first input + arrival -> output), so no two reductions write the output at once.
void directReduce(ProgramBuilder& b, int K, int root) {
  const int n = b.numRanks();
  for (int k = 0; k < K; ++k) {
    StepRef chain;
    const Loc acc = b.out(root, k);
    for (int i = 1; i < n; ++i) {
      const int p = (root + i) % n;
      b.send(p, b.newTb(p, root, -1, k), b.in(p, k), 1);
      const int tb = b.newTb(root, -1, p, k);
      chain = b.recvReduceCopy(root, tb, chain.valid() ? acc : b.in(root, k), acc, 1, {chain});
    }
  }
}

}  // namespace

Status buildDirect(ProgramBuilder& b, CollectiveKind kind, int channels, int root) {
  const int n = b.numRanks();
  const int K = channels;
  if (kind == CollectiveKind::kBroadcast) {
    directBroadcast(b, K, root);
    return Status::ok();
  }
  if (kind == CollectiveKind::kReduce) {
    directReduce(b, K, root);
    return Status::ok();
  }
  for (int r = 0; r < n; ++r) {
    // Local work (own chunk into the output) on a threadblock with no peers, when needed.
    if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kAllToAll) {
      const Loc src = b.in(r, kind == CollectiveKind::kAllGather ? 0 : r * K);
      const Loc dst = b.out(r, r * K);
      if (!b.same(src, dst)) b.copy(r, b.newTb(r, -1, -1, 0), src, dst, K);
    }
    for (int k = 0; k < K; ++k) {
      StepRef chain;  // reduce-scatter / all-reduce: the receives reduce into one chunk in turn
      std::vector<int> tbs;
      for (int i = 1; i < n; ++i) {
        const int p = (r + i) % n;
        const int tb = b.newTb(r, p, p, k);
        tbs.push_back(tb);
        switch (kind) {
          case CollectiveKind::kAllGather:
            b.send(r, tb, b.in(r, k), 1);
            b.recv(r, tb, b.out(r, p * K + k), 1);
            break;
          case CollectiveKind::kAllToAll:
            b.send(r, tb, b.in(r, p * K + k), 1);
            b.recv(r, tb, b.out(r, p * K + k), 1);
            break;
          case CollectiveKind::kReduceScatter: {
            b.send(r, tb, b.in(r, p * K + k), 1);
            const Loc acc = b.out(r, k);
            chain = b.recvReduceCopy(r, tb, chain.valid() ? acc : b.in(r, r * K + k), acc, 1, {chain});
            break;
          }
          case CollectiveKind::kAllReduce: {
            b.send(r, tb, b.in(r, k * n + p), 1);
            const Loc acc = b.out(r, k * n + r);
            chain = b.recvReduceCopy(r, tb, chain.valid() ? acc : b.in(r, k * n + r), acc, 1, {chain});
            break;
          }
          default: return invalidArgument(fmt::format("direct: {} is not supported", collectiveName(kind)));
        }
      }
      if (kind == CollectiveKind::kAllReduce) {
        // All-gather half: send the reduced chunk to every peer once the chain is complete.
        for (int i = 1; i < n; ++i) {
          const int p = (r + i) % n;
          const int tb = tbs[i - 1];
          b.send(r, tb, b.out(r, k * n + r), 1, {chain});
          b.recv(r, tb, b.out(r, k * n + p), 1);
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace braid::algos
