// Recursive doubling (all-gather, all-reduce) and recursive halving (reduce-scatter), after Thakur,
// Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA
// 19(1), 2005. Costs: ../shared/reference/anchors_algorithms.md §4.
//
// Any n, by the fold-in technique of that paper: with p' = 2^floor(log2 n) and rem = n - p', the
// even ranks below 2·rem first hand their data to the odd rank above them and sit out; the p'
// remaining ranks run the power-of-two algorithm on virtual ranks v (v < rem: real 2v+1 standing
// for {2v, 2v+1}; else real v+rem); afterwards each odd rank hands the even one its result. A
// range of virtual ranks always stands for a contiguous range of real ranks, so every message is
// one contiguous chunk range. Cost: floor(log2 n) rounds, plus 2 when n is not a power of two.
//
// Broadcast and reduce use the binomial tree of the same paper (MPICH's MPI_Bcast / MPI_Reduce for short
// messages): ceil(log2 n) rounds of α + Nβ, any n (a subtree is cut where it would pass n).
#include <fmt/format.h>

#include "braid/classic_blocks.h"

namespace braid::algos {
namespace {

struct Fold {
  int n = 0;
  int p2 = 1;   // largest power of two <= n
  int rem = 0;  // n - p2

  explicit Fold(int num_ranks) : n(num_ranks) {
    while (p2 * 2 <= n) p2 *= 2;
    rem = n - p2;
  }
  bool isExtra(int r) const { return r < 2 * rem && r % 2 == 0; }
  bool isFolded(int r) const { return r < 2 * rem && r % 2 == 1; }
  int virtualOf(int r) const { return r < 2 * rem ? r / 2 : r - rem; }
  int realOf(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  /// First real rank a virtual rank stands for (lo(p2) = n).
  int lo(int v) const { return v < rem ? 2 * v : v + rem; }
};

void allGather(ProgramBuilder& b, const Fold& f) {
  const int n = f.n;
  for (int r = 0; r < n; ++r) {
    const Loc own_in = b.in(r, 0);
    const Loc own_out = b.out(r, r);
    if (f.isExtra(r)) {
      const int tb = b.newTb(r, r + 1, r + 1, 0);
      if (!b.same(own_in, own_out)) b.copy(r, tb, own_in, own_out, 1);
      b.send(r, tb, own_in, 1);
      if (r > 0) b.recv(r, tb, b.out(r, 0), r);
      if (r < n - 1) b.recv(r, tb, b.out(r, r + 1), n - 1 - r);
      continue;
    }
    const int v = f.virtualOf(r);
    int fold_tb = -1;
    StepRef ready;  // the last step whose data the next send needs
    if (f.isFolded(r)) {
      fold_tb = b.newTb(r, r - 1, r - 1, 0);
      if (!b.same(own_in, own_out)) b.copy(r, fold_tb, own_in, own_out, 1);
      ready = b.recv(r, fold_tb, b.out(r, r - 1), 1);
    }
    for (int bit = 1; bit < f.p2; bit *= 2) {
      const int u = v ^ bit;
      const int peer = f.realOf(u);
      const int tb = b.newTb(r, peer, peer, 0);
      if (fold_tb < 0 && bit == 1 && !b.same(own_in, own_out)) b.copy(r, tb, own_in, own_out, 1);
      const int mine = v & ~(bit - 1);
      const int theirs = u & ~(bit - 1);
      b.send(r, tb, b.out(r, f.lo(mine)), f.lo(mine + bit) - f.lo(mine), {ready});
      ready = b.recv(r, tb, b.out(r, f.lo(theirs)), f.lo(theirs + bit) - f.lo(theirs));
    }
    if (fold_tb >= 0) {
      const int extra = r - 1;
      if (extra > 0) b.send(r, fold_tb, b.out(r, 0), extra, {ready});
      b.send(r, fold_tb, b.out(r, extra + 1), n - 1 - extra, {ready});
    }
  }
}

void reduceScatter(ProgramBuilder& b, const Fold& f) {
  const int n = f.n;
  for (int r = 0; r < n; ++r) {
    if (f.isExtra(r)) {
      const int tb = b.newTb(r, r + 1, r + 1, 0);
      b.send(r, tb, b.in(r, 0), n);
      b.recv(r, tb, b.out(r, 0), 1);
      continue;
    }
    const int v = f.virtualOf(r);
    int fold_tb = -1;
    StepRef ready;
    bool partial = false;  // partial sums live in scratch (indexed by real destination rank)
    auto src = [&](int x) { return partial ? ProgramBuilder::scratch(x) : b.in(r, x); };
    if (f.isFolded(r)) {
      fold_tb = b.newTb(r, r - 1, r - 1, 0);
      ready = b.recvReduceCopy(r, fold_tb, b.in(r, 0), ProgramBuilder::scratch(0), n);
      partial = true;
    }
    for (int half = f.p2 / 2; half >= 1; half /= 2) {
      const int u = v ^ half;
      const int peer = f.realOf(u);
      const int tb = b.newTb(r, peer, peer, 0);
      const int mine = v & ~(half - 1);
      const int theirs = u & ~(half - 1);
      b.send(r, tb, src(f.lo(theirs)), f.lo(theirs + half) - f.lo(theirs), {ready});
      const int lo = f.lo(mine);
      const int len = f.lo(mine + half) - lo;
      const bool final_own = half == 1 && fold_tb < 0;  // the last round yields exactly this rank's chunk
      ready = b.recvReduceCopy(r, tb, src(lo), final_own ? b.out(r, 0) : ProgramBuilder::scratch(lo), len);
      partial = true;
    }
    if (fold_tb >= 0) {
      b.send(r, fold_tb, ProgramBuilder::scratch(r - 1), 1, {ready});
      b.copy(r, fold_tb, ProgramBuilder::scratch(r), b.out(r, 0), 1);
    }
  }
}

void allReduce(ProgramBuilder& b, const Fold& f) {
  const int n = f.n;
  for (int r = 0; r < n; ++r) {
    if (f.isExtra(r)) {
      const int tb = b.newTb(r, r + 1, r + 1, 0);
      b.send(r, tb, b.in(r, 0), 1);
      b.recv(r, tb, b.out(r, 0), 1);
      continue;
    }
    const int v = f.virtualOf(r);
    int fold_tb = -1;
    StepRef ready;
    Loc cur = b.in(r, 0);
    if (f.isFolded(r)) {
      fold_tb = b.newTb(r, r - 1, r - 1, 0);
      ready = b.recvReduceCopy(r, fold_tb, cur, b.out(r, 0), 1);
      cur = b.out(r, 0);
    }
    for (int bit = 1; bit < f.p2; bit *= 2) {
      const int peer = f.realOf(v ^ bit);
      const int tb = b.newTb(r, peer, peer, 0);
      b.send(r, tb, cur, 1, {ready});
      ready = b.recvReduceCopy(r, tb, cur, b.out(r, 0), 1);
      cur = b.out(r, 0);
    }
    if (fold_tb >= 0) b.send(r, fold_tb, b.out(r, 0), 1, {ready});
  }
}

// Binomial broadcast: a rank receives from its parent, then sends to its children largest subtree
// first, each send waiting for the one before (the textbook's one send per round; per slice, so the
// slices still pipeline). The first child rides on the receiving threadblock (receive, store, forward).
void binomialBroadcast(ProgramBuilder& b, int root) {
  const int n = b.numRanks();
  const std::vector<int> parents = binomialParents(n, root);
  const std::vector<std::vector<int>> children = binomialChildren(n, root);
  for (int r = 0; r < n; ++r) {
    const std::vector<int> kids(children[r].rbegin(), children[r].rend());  // largest subtree first
    StepRef prev;
    size_t first = 0;
    Loc data = b.out(r, 0);
    if (r == root) {
      data = b.in(r, 0);
      const int tb = b.newTb(r, kids[0], -1, 0);
      prev = b.send(r, tb, data, 1);
      if (!b.same(data, b.out(r, 0))) b.copy(r, tb, data, b.out(r, 0), 1);
      first = 1;
    } else if (kids.empty()) {
      b.recv(r, b.newTb(r, -1, parents[r], 0), data, 1);
    } else {
      prev = b.recvCopySend(r, b.newTb(r, kids[0], parents[r], 0), data, 1);
      first = 1;
    }
    for (size_t i = first; i < kids.size(); ++i) prev = b.send(r, b.newTb(r, kids[i], -1, 0), data, 1, {prev});
  }
}

// Binomial reduce: a rank reduces its children's partial sums into its own, smallest subtree first (the
// order they arrive in), then sends the sum to its parent. Non-root ranks accumulate in scratch (their
// output is not theirs to write); the last child's arrival is reduced on the way to the parent
// (recvReduceSend), the root reduces into its output.
void binomialReduce(ProgramBuilder& b, int root) {
  const int n = b.numRanks();
  const std::vector<int> parents = binomialParents(n, root);
  const std::vector<std::vector<int>> children = binomialChildren(n, root);
  for (int r = 0; r < n; ++r) {
    const std::vector<int>& kids = children[r];
    const Loc acc = r == root ? b.out(r, 0) : ProgramBuilder::scratch(0);
    if (kids.empty()) {
      b.send(r, b.newTb(r, parents[r], -1, 0), b.in(r, 0), 1);
      continue;
    }
    StepRef chain;
    const size_t stored = r == root ? kids.size() : kids.size() - 1;  // arrivals reduced into acc
    for (size_t i = 0; i < stored; ++i) {
      const int tb = b.newTb(r, -1, kids[i], 0);
      chain = b.recvReduceCopy(r, tb, chain.valid() ? acc : b.in(r, 0), acc, 1, {chain});
    }
    if (r != root) {
      const int tb = b.newTb(r, parents[r], kids.back(), 0);
      b.recvReduceSend(r, tb, chain.valid() ? acc : b.in(r, 0), 1, {chain});
    }
  }
}

}  // namespace

std::vector<int> binomialParents(int n, int root) {
  std::vector<int> parents(n, -1);
  for (int v = 1; v < n; ++v) parents[(v + root) % n] = ((v & (v - 1)) + root) % n;  // v minus its lowest bit
  return parents;
}

std::vector<std::vector<int>> binomialChildren(int n, int root) {
  std::vector<std::vector<int>> children(n);
  for (int v = 0; v < n; ++v) {
    const int low = v == 0 ? n : (v & -v);  // children v + 2^j for 2^j < lowest set bit (root: any)
    for (int bit = 1; bit < low && v + bit < n; bit *= 2) children[(v + root) % n].push_back((v + bit + root) % n);
  }
  return children;
}

Status buildRecursive(ProgramBuilder& b, CollectiveKind kind, int root) {
  const Fold fold(b.numRanks());
  switch (kind) {
    case CollectiveKind::kAllGather: allGather(b, fold); break;
    case CollectiveKind::kReduceScatter: reduceScatter(b, fold); break;
    case CollectiveKind::kAllReduce: allReduce(b, fold); break;
    case CollectiveKind::kBroadcast: binomialBroadcast(b, root); break;
    case CollectiveKind::kReduce: binomialReduce(b, root); break;
    default: return invalidArgument(fmt::format("recursive: {} is not supported", collectiveName(kind)));
  }
  return Status::ok();
}

}  // namespace braid::algos
