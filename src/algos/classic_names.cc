#include <fmt/format.h>

#include "braid/classic.h"

namespace braid {

const char* classicAlgoName(ClassicAlgo algo) {
  switch (algo) {
    case ClassicAlgo::kRing: return "ring";
    case ClassicAlgo::kMultiRing: return "multiring";
    case ClassicAlgo::kDirect: return "direct";
    case ClassicAlgo::kRecursiveDoubling: return "recursive";
    case ClassicAlgo::kDoubleBinaryTree: return "tree";
    case ClassicAlgo::kPairwise: return "pairwise";
    case ClassicAlgo::kHierarchical: return "hierarchical";
    case ClassicAlgo::kTwoDimHierarchical: return "2dh";
  }
  return "?";
}

Result<ClassicAlgo> parseClassicAlgo(const std::string& name) {
  for (ClassicAlgo a : {ClassicAlgo::kRing, ClassicAlgo::kMultiRing, ClassicAlgo::kDirect,
                        ClassicAlgo::kRecursiveDoubling, ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kPairwise,
                        ClassicAlgo::kHierarchical, ClassicAlgo::kTwoDimHierarchical}) {
    if (name == classicAlgoName(a)) return a;
  }
  return invalidArgument(fmt::format(
      "unknown algorithm '{}': expected ring, multiring, direct, recursive, tree, pairwise, hierarchical or 2dh",
      name));
}

std::vector<CollectiveKind> classicCollectives(ClassicAlgo algo) {
  using K = CollectiveKind;
  switch (algo) {
    case ClassicAlgo::kRing:
    case ClassicAlgo::kMultiRing:
    case ClassicAlgo::kDirect:
      return {K::kAllGather, K::kReduceScatter, K::kAllReduce, K::kAllToAll, K::kBroadcast, K::kReduce};
    case ClassicAlgo::kHierarchical: return {K::kAllGather, K::kReduceScatter, K::kAllReduce, K::kAllToAll};
    case ClassicAlgo::kRecursiveDoubling:
      return {K::kAllGather, K::kReduceScatter, K::kAllReduce, K::kBroadcast, K::kReduce};
    case ClassicAlgo::kDoubleBinaryTree: return {K::kAllReduce};
    case ClassicAlgo::kPairwise:
    case ClassicAlgo::kTwoDimHierarchical: return {K::kAllToAll};
  }
  return {};
}

}  // namespace braid
