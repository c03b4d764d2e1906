// Double binary tree all-reduce (Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth
// broadcast, reduction and scan", Parallel Computing 35(12), 2009; NCCL >= 2.4 uses it across
// nodes). Two binary trees each reduce half of the data up to their root and broadcast it back down.
//
// Tree 0 is the in-order binary tree over positions 1..n (position p = rank p-1): a position whose
// lowest set bit is b has children p - b/2 and the largest p + h <= n with h <= b/2, so leaves are
// the odd positions (even ranks) and interior nodes the even positions (odd ranks). Tree 1 shifts
// it by one rank (position p = rank p-2 mod n): for even n its interior nodes are exactly tree 0's
// leaves, so every rank forwards data in only one of the two trees; for odd n rank n-1 is a leaf in
// both. Cost ≈ 2·log2(n)·α + N·β per tree half, pipelined (anchors_algorithms.md §4).
#include "braid/classic_blocks.h"

namespace braid::algos {
namespace {

int rankAt(int position, int n, int shift) { return (position - 1 + shift) % n; }

}  // namespace

std::vector<std::vector<int>> binaryTreeChildren(int n, int shift) {
  std::vector<std::vector<int>> children(n);
  for (int p = 1; p <= n; ++p) {
    const int low = p & -p;
    if (low == 1) continue;
    std::vector<int>& kids = children[rankAt(p, n, shift)];
    kids.push_back(rankAt(p - low / 2, n, shift));
    int h = low / 2;
    while (h >= 1 && p + h > n) h /= 2;
    if (h >= 1) kids.push_back(rankAt(p + h, n, shift));
  }
  return children;
}

std::vector<int> binaryTreeParents(int n, int shift) {
  std::vector<int> parent(n, -1);
  const auto children = binaryTreeChildren(n, shift);
  for (int r = 0; r < n; ++r) {
    for (int c : children[r]) parent[c] = r;
  }
  return parent;
}

Status buildDoubleBinaryTree(ProgramBuilder& b, int replicas) {
  const int n = b.numRanks();
  for (int tree = 0; tree < 2; ++tree) {
    const int shift = tree == 0 ? 0 : n - 1;
    const auto parent = binaryTreeParents(n, shift);
    const auto children = binaryTreeChildren(n, shift);
    for (int rep = 0; rep < replicas; ++rep) {
      const int chunk = rep * 2 + tree;
      const int channel = rep * 2 + tree;
      for (int r = 0; r < n; ++r) {
        std::vector<int> child_tbs;
        for (int c : children[r]) child_tbs.push_back(b.newTb(r, c, c, channel));
        // Reduce: fold each child's partial sum into the output chunk, one child after the other.
        StepRef reduced;
        for (int tb : child_tbs) {
          reduced = b.recvReduceCopy(r, tb, reduced.valid() ? b.out(r, chunk) : b.in(r, chunk), b.out(r, chunk), 1,
                                     {reduced});
        }
        StepRef have_result = reduced;
        if (parent[r] >= 0) {
          const int tb = b.newTb(r, parent[r], parent[r], channel);
          b.send(r, tb, reduced.valid() ? b.out(r, chunk) : b.in(r, chunk), 1, {reduced});
          have_result = b.recv(r, tb, b.out(r, chunk), 1);
        }
        // Broadcast: pass the final value down.
        for (int tb : child_tbs) b.send(r, tb, b.out(r, chunk), 1, {have_result});
      }
    }
  }
  return Status::ok();
}

}  // namespace braid::algos
