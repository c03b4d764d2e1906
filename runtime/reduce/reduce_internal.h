// Test hooks of runtime/reduce/reduce.cc.
#pragma once

namespace braid::detail {

/// Selects the reduction loops: `on` = the AVX2/F16C loops when the CPU has them (the default), false = the
/// baseline loops (SSE2 on x86-64). Returns whether the AVX2/F16C loops are now in use. For tests that
/// compare both sets of loops; reductions running meanwhile may use either set.
bool useSimdReduceLoops(bool on);

}  // namespace braid::detail
