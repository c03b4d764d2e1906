// Test support: the device-resident executor's plan encoding (runtime/cuda/device_plan_codec.h) of a lowered plan,
// checked against the plan itself. Used by tests/cuda/device_plan_test.cc and by the differential suite
// (tests/comm/differential_test.cc), which encodes every algorithm it runs.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/plan.h"
#include "cuda/device_plan_codec.h"
#include "support/classic_requests.h"

namespace braid::testing {

/// A hand-built plan on 2 ranks: rank 0's tb 0 sends 100 bytes of input in slices of 40 (messages of 40, 40 and 20
/// bytes, 4-byte elements) to rank 1, whose tb 0 receives them into its output; FIFOs of `fifo_depth` slots.
inline Plan twoRankSendPlan(const std::string& name, Protocol protocol, uint32_t fifo_depth) {
  Plan plan;
  plan.algorithm = name;
  plan.collective = CollectiveKind::kAllGather;
  plan.num_ranks = 2;
  plan.size_bytes = 100;
  plan.protocol = protocol;
  plan.slice_bytes = 40;
  plan.element_bytes = 4;
  plan.fifo_depth = fifo_depth;
  plan.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    plan.ranks[r].rank = r;
    plan.ranks[r].input_bytes = 100;
    plan.ranks[r].output_bytes = 100;
  }
  PlanThreadblock send;
  send.id = 0;
  send.send_peer = 1;
  send.steps.push_back(PlanStep{OpType::kSend, {BufferKind::kInput, 0, 100}, {}, 100, {}});
  plan.ranks[0].threadblocks.push_back(send);
  PlanThreadblock recv;
  recv.id = 0;
  recv.recv_peer = 0;
  recv.steps.push_back(PlanStep{OpType::kRecv, {}, {BufferKind::kOutput, 0, 100}, 100, {}});
  plan.ranks[1].threadblocks.push_back(recv);
  return plan;
}

/// The classical algorithms for n ranks: ring, multi-ring, direct, recursive doubling, double binary tree and
/// pairwise for every collective each applies to, in both modes where built (broadcast and reduce rooted at
/// n / 2), and 2DH all-to-all with nodes of 2 ranks for even n.
inline std::vector<Algorithm> classicalTestAlgorithms(int n) {
  std::vector<Algorithm> out;
  for (ClassicAlgo algo : {ClassicAlgo::kRing, ClassicAlgo::kMultiRing, ClassicAlgo::kDirect,
                           ClassicAlgo::kRecursiveDoubling, ClassicAlgo::kDoubleBinaryTree, ClassicAlgo::kPairwise}) {
    for (CollectiveKind kind : classicCollectives(algo)) {
      for (bool in_place : {false, true}) {
        Result<Algorithm> built = buildClassic(classicRequest(algo, kind, n, in_place, middleRoot(kind, n)));
        if (built.isOk()) out.push_back(std::move(built).value());
      }
    }
  }
  if (n % 2 == 0) {
    ClassicRequest request = classicRequest(ClassicAlgo::kTwoDimHierarchical, CollectiveKind::kAllToAll, n);
    request.ranks_per_node = 2;
    Result<Algorithm> built = buildClassic(request);
    if (built.isOk()) out.push_back(std::move(built).value());
  }
  return out;
}

/// Rank r's blob, decoded, holds what the plan says, field by field: sizes, threadblock peers, channels and
/// staging, every step's type, byte ranges (where the op uses them), bytes and dependencies, and the precopies.
inline Status compareWithPlan(const Plan& plan, const cuda::DecodedDevicePlan& device) {
  const RankPlan& rank = plan.ranks[static_cast<size_t>(device.header.rank)];
  const std::string at = fmt::format("plan '{}' rank {}", plan.algorithm, rank.rank);
  const cuda::DevicePlanHeader& h = device.header;
  if (h.num_ranks != plan.num_ranks || h.input_bytes != rank.input_bytes || h.output_bytes != rank.output_bytes ||
      h.scratch_bytes != rank.scratch_bytes + rank.temp_bytes || h.element_bytes != plan.element_bytes ||
      h.slice_bytes != plan::executedSliceBytes(plan) || h.fifo_depth != static_cast<uint32_t>(plan.fifo_depth) ||
      (h.protocol == cuda::DeviceProtocol::kLL) != (plan.protocol == Protocol::kLL)) {
    return internalError(at + ": header differs from the plan");
  }
  if (device.threadblocks.size() != rank.threadblocks.size() || device.precopies.size() != rank.precopies.size()) {
    return internalError(at + ": threadblock or precopy count differs");
  }
  for (size_t t = 0; t < rank.threadblocks.size(); ++t) {
    const PlanThreadblock& tb = rank.threadblocks[t];
    const cuda::DeviceThreadblock& dtb = device.threadblocks[t];
    if (dtb.send_peer != tb.send_peer || dtb.recv_peer != tb.recv_peer || dtb.channel != tb.channel ||
        dtb.num_steps != tb.steps.size() || dtb.temp_offset != tb.temp.offset || dtb.temp_bytes != tb.temp.bytes) {
      return internalError(fmt::format("{} tb {}: peers, channel, steps or staging differ", at, t));
    }
    for (size_t s = 0; s < tb.steps.size(); ++s) {
      const PlanStep& step = tb.steps[s];
      const cuda::DeviceStep& ds = device.steps[dtb.first_step + s];
      bool same = static_cast<int>(ds.op) == static_cast<int>(step.type) && ds.bytes == step.bytes &&
                  ds.dep_count == step.deps.size();
      if (opReadsSrc(step.type)) {
        same = same && static_cast<int>(ds.src_buffer) == static_cast<int>(step.src.buffer) &&
               ds.src_offset == step.src.offset;
      }
      if (opWritesDst(step.type)) {
        same = same && static_cast<int>(ds.dst_buffer) == static_cast<int>(step.dst.buffer) &&
               ds.dst_offset == step.dst.offset;
      }
      for (size_t d = 0; same && d < step.deps.size(); ++d) {
        const cuda::DeviceDependency& dep = device.deps[ds.dep_begin + d];
        same = static_cast<int>(dep.tb) == step.deps[d].tb && static_cast<int>(dep.step) == step.deps[d].step;
      }
      if (!same) return internalError(fmt::format("{} tb {} step {}: differs from the plan's step", at, t, s));
    }
  }
  for (size_t p = 0; p < rank.precopies.size(); ++p) {
    const PlanCopy& copy = rank.precopies[p];
    const cuda::DevicePrecopy& dp = device.precopies[p];
    if (static_cast<int>(dp.src_buffer) != static_cast<int>(copy.src.buffer) || dp.src_offset != copy.src.offset ||
        static_cast<int>(dp.dst_buffer) != static_cast<int>(copy.dst.buffer) || dp.dst_offset != copy.dst.offset ||
        dp.bytes != copy.src.bytes) {
      return internalError(fmt::format("{} precopy {}: differs from the plan's", at, p));
    }
  }
  return Status::ok();
}

/// Encodes every rank of `plan` (ranks on the hosts `host_of_rank`, empty: one host), checks that each blob
/// decodes and serializes back to the same bytes and holds what the plan says (compareWithPlan) and its host, and
/// that validateDevicePlans accepts them together.
inline Status checkDeviceEncoding(const Plan& plan, const std::vector<int>& host_of_rank = {}) {
  BRAID_ASSIGN_OR_RETURN(std::vector<std::vector<uint8_t>> blobs, cuda::encodeDevicePlans(plan, host_of_rank));
  std::vector<cuda::DecodedDevicePlan> decoded;
  for (size_t r = 0; r < blobs.size(); ++r) {
    BRAID_ASSIGN_OR_RETURN(cuda::DecodedDevicePlan d, cuda::decodeDevicePlan(blobs[r].data(), blobs[r].size()));
    if (cuda::serializeDevicePlan(d) != blobs[r]) {
      return internalError(fmt::format("plan '{}' rank {}: decode + serialize changed the blob", plan.algorithm, r));
    }
    if (d.header.host != (host_of_rank.empty() ? 0 : host_of_rank[r])) {
      return internalError(fmt::format("plan '{}' rank {}: host {}", plan.algorithm, r, d.header.host));
    }
    BRAID_RETURN_IF_ERROR(compareWithPlan(plan, d));
    decoded.push_back(std::move(d));
  }
  return cuda::validateDevicePlans(decoded);
}

/// Lowers `algorithm` for fp32 at each of `counts` (elements per rank piece, nccl-tests' count times the size
/// multiplier) in each mode it declares, with its own protocol and with LL, and checks every encoding
/// (checkDeviceEncoding) with the ranks split into `hosts` hosts of consecutive ranks. The first failure, naming the
/// size and mode.
inline Status checkDeviceEncodings(const Algorithm& algorithm, const std::vector<uint64_t>& counts,
                                   const std::vector<int>& instances = {1}, int hosts = 1) {
  std::vector<int> host_of_rank;
  for (int r = 0; r < algorithm.num_ranks; ++r) host_of_rank.push_back(r * hosts / algorithm.num_ranks);
  BRAID_ASSIGN_OR_RETURN(CollectiveSpec spec, algorithm.spec(!algorithm.out_of_place));
  const uint64_t multiplier = static_cast<uint64_t>(spec.sizeMultiplier());
  for (bool in_place : {false, true}) {
    if (in_place ? !algorithm.in_place : !algorithm.out_of_place) continue;
    for (uint64_t count : counts) {
      for (int copies : instances) {
        for (Protocol protocol : {algorithm.protocol, Protocol::kLL}) {
          LowerOptions options = callLowerOptions(count * 4 * multiplier, in_place, copies, 4);
          options.protocol = protocol;
          Result<Plan> plan = lowerAlgorithm(algorithm, options);
          // Uneven counts an algorithm cannot split are lowering's to refuse (kUnsupported), not the encoder's.
          if (!plan.isOk() && plan.status().code() == StatusCode::kUnsupported) continue;
          if (!plan.isOk()) return plan.status();
          const Status status = checkDeviceEncoding(*plan, host_of_rank);
          if (!status.isOk()) {
            return Status(status.code(), fmt::format("{} count {} {} instances {} {}: {}", algorithm.name, count,
                                                     in_place ? "in place" : "out of place", copies,
                                                     protocolName(protocol), status.message()));
          }
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace braid::testing
