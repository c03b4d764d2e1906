// Limits and value sets of sketch fields shared by the sketch reader (sketch_io.cc) and checkSketch
// (sketch_derive.cc). Private to synthesizer/.
#pragma once

#include <set>
#include <string>

namespace braid::synth {

constexpr int kMaxGpuId = 1 << 20;
constexpr int kMaxNodes = 1 << 20;
constexpr int kMaxChunkup = 1 << 16;
constexpr int kMaxPathSlack = 4;

inline const std::set<std::string> kStrategies = {"none", "switch", "maxmin", "minmax"};
inline const std::set<std::string> kHyperedges = {"uc-max", "uc-min"};

}  // namespace braid::synth
