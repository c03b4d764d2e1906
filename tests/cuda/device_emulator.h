// Test support: the device-resident executor's block program (runtime/cuda/device_program.h) run on the CPU. Every
// block of every rank of a plan is a group of host threads (HostBlock) running program::runBlock, the same code the
// kernel runs, over host memory laid out as on the device: each rank's blob (encodeDevicePlans), its region
// (zeroed once and kept across launches, as the executor keeps it) and its input, output and scratch. The result
// of every launch is compared with a reference computed element by element from the collective's definition.
//
// Ranks on several hosts (EmulationOptions::host_of_rank): connections between hosts are proxied (device_plan.h);
// each rank with proxied connections gets its proxy area (zeroed once, kept across launches) and, every launch, a
// proxy (runtime/cuda/device_proxy.h) on a host thread of its own beside its blocks, over a real CPU transport
// between the ranks: the threads transport, or TCP over loopback with an in-process bootstrap per rank.
//
// Data: element i of rank q's input is one of -2, -1, 1, 2 (position- and rank-dependent) in the datatype, so
// sums of up to 16 values, products and min/max are exact in every type and any order of reduction gives the
// same bits as the reference's (reduce2 in rank order). Output and scratch start as 0xA5 bytes.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/bootstrap.h"
#include "braid/datatype.h"
#include "braid/plan.h"
#include "braid/transports.h"
#include "cuda/device_plan_codec.h"
#include "cuda/device_program.h"
#include "cuda/device_proxy.h"
#include "support/store_value.h"
#include "transport/threads/threads_transport.h"

namespace braid::testing {

struct EmulationOptions {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;  // broadcast / reduce
  uint32_t threads_per_block = 1;
  int launches = 2;  // consecutive launches of the plan, on the same regions
  double timeout_s = 30;
  std::vector<int> ranks;           // ranks that run (empty: all); the others never start (timeout tests)
  std::vector<int> host_of_rank;    // rank r's host (encodeDevicePlans); empty: all on one host
  bool tcp_proxies = false;         // the proxies' transport: TCP over loopback (else the threads transport)
  std::vector<int> without_proxy;   // running ranks whose proxy never runs (timeout tests)
  bool replayed_arguments = false;  // every launch passes launch number 0, as a replayed CUDA graph does
};

/// The proxies' transport endpoints of `n` ranks of this process (index = rank), and what they need to live.
struct ProxyTransports {
  std::vector<std::unique_ptr<Bootstrap>> bootstraps;
  std::vector<std::unique_ptr<DataTransport>> endpoints;
};

inline Result<ProxyTransports> createProxyTransports(int n, bool tcp, double timeout_s) {
  ProxyTransports out;
  TransportOptions options;
  options.timeout_s = timeout_s;
  if (!tcp) {
    out.endpoints = createThreadsWorld(n, options);
    return out;
  }
  // TCP: one bootstrap and endpoint per rank, created together (both are collective), each by a thread of its own.
  BRAID_ASSIGN_OR_RETURN(const UniqueId id, createUniqueId("127.0.0.1:0"));
  out.bootstraps.resize(static_cast<size_t>(n));
  out.endpoints.resize(static_cast<size_t>(n));
  std::vector<Status> statuses(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      BootstrapOptions bootstrap_options;
      bootstrap_options.timeout_s = timeout_s;
      Result<std::unique_ptr<Bootstrap>> bootstrap = connectBootstrap(id, r, n, bootstrap_options);
      if (!bootstrap.isOk()) {
        statuses[r] = bootstrap.status();
        return;
      }
      out.bootstraps[r] = std::move(bootstrap).value();
      Result<std::unique_ptr<DataTransport>> endpoint =
          createTransport(TransportKind::kTcp, *out.bootstraps[r], options);
      if (!endpoint.isOk()) {
        statuses[r] = endpoint.status();
        return;
      }
      out.endpoints[r] = std::move(endpoint).value();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& status : statuses) BRAID_RETURN_IF_ERROR(status);
  return out;
}

/// Input element i of rank q, in `type`, as bytes.
inline void inputElement(DataType type, int q, uint64_t i, uint8_t* out) {
  static const int kValues[] = {-2, -1, 1, 2};
  const int v = kValues[(i * 7 + static_cast<uint64_t>(q) * 13) % 4];
  storeValue(out, type, v);
}

/// Rank q's whole input of `elements` elements.
inline std::vector<uint8_t> inputOf(DataType type, int q, uint64_t elements) {
  const size_t size = dataTypeSize(type);
  std::vector<uint8_t> data(elements * size);
  for (uint64_t i = 0; i < elements; ++i) inputElement(type, q, i, data.data() + i * size);
  return data;
}

/// The memory of one emulated rank.
struct EmulatedRank {
  std::vector<uint8_t> input, output, scratch;
  std::vector<uint64_t> region;  // 8-byte words: counters are 64-bit
  std::vector<uint64_t> proxy;   // the proxy area
};

/// What rank r holds after `plan` ran on `inputs` (every rank's input, as inputOf makes them): in *want, and in *got
/// where in its memory (`input` and `output`: its buffers) the result lies. False when the rank holds no result
/// (reduce's non-roots).
inline bool expectedResult(const Plan& plan, const std::vector<std::vector<uint8_t>>& inputs, int r,
                           const EmulationOptions& options, std::vector<uint8_t>* want, const uint8_t** got,
                           const uint8_t* input, const uint8_t* output) {
  const int n = plan.num_ranks;
  const size_t size = dataTypeSize(options.type);
  const RankPlan& rp = plan.ranks[r];
  want->clear();
  switch (plan.collective) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduce:
      if (plan.collective == CollectiveKind::kReduce && r != options.root) return false;
      *want = inputs[0];
      for (int q = 1; q < n; ++q) {
        reduce2(want->data(), want->data(), inputs[q].data(), want->size() / size, options.type, options.op);
      }
      *got = output;
      return true;
    case CollectiveKind::kReduceScatter: {
      const uint64_t block = rp.output_bytes;
      want->assign(inputs[0].begin() + static_cast<std::ptrdiff_t>(r * block),
                   inputs[0].begin() + static_cast<std::ptrdiff_t>((r + 1) * block));
      for (int q = 1; q < n; ++q) {
        reduce2(want->data(), want->data(), inputs[q].data() + r * block, block / size, options.type, options.op);
      }
      *got = plan.in_place ? input + r * block : output;
      return true;
    }
    case CollectiveKind::kAllGather:
      for (int q = 0; q < n; ++q) want->insert(want->end(), inputs[q].begin(), inputs[q].end());
      *got = output;
      return true;
    case CollectiveKind::kAllToAll: {
      const uint64_t block = rp.output_bytes / n;
      for (int q = 0; q < n; ++q) {
        want->insert(want->end(), inputs[q].begin() + static_cast<std::ptrdiff_t>(r * block),
                     inputs[q].begin() + static_cast<std::ptrdiff_t>((r + 1) * block));
      }
      *got = output;
      return true;
    }
    case CollectiveKind::kBroadcast:
      *want = inputs[options.root];
      *got = output;
      return true;
    default: return false;
  }
}

/// Rank r's input for `plan` (launch `launch` shifts the data) and where it goes in its memory: the input buffer,
/// or in place all-gather's block of the output, reduce-scatter's input, the others' output. Returns the input.
inline std::vector<uint8_t> placeInput(const Plan& plan, int r, const EmulationOptions& options, int launch,
                                       uint8_t* input, uint8_t* output) {
  const RankPlan& rp = plan.ranks[r];
  const CollectiveKind kind = plan.collective;
  const uint64_t bytes = kind == CollectiveKind::kAllGather ? rp.output_bytes / plan.num_ranks : rp.input_bytes;
  std::vector<uint8_t> data = inputOf(options.type, r + launch, bytes / dataTypeSize(options.type));
  uint8_t* in = plan.in_place ? (kind == CollectiveKind::kReduceScatter ? input : output) : input;
  if (plan.in_place && kind == CollectiveKind::kAllGather) in += static_cast<uint64_t>(r) * data.size();
  std::memcpy(in, data.data(), data.size());
  return data;
}

/// Runs `plan` (lowered for options.type's size) through the device program on host threads and checks every
/// rank's result after every launch. kInternalError naming the first wrong element; the encoder's errors; a
/// kTimeout built from DeviceError when a block gave up.
inline Status emulateDevicePlan(const Plan& plan, const EmulationOptions& options,
                                cuda::DeviceError* error_out = nullptr) {
  using namespace cuda;
  const int n = plan.num_ranks;
  const size_t size = dataTypeSize(options.type);
  if (plan.element_bytes != size) return invalidArgument("emulateDevicePlan: plan lowered for another element size");
  BRAID_ASSIGN_OR_RETURN(std::vector<std::vector<uint8_t>> blobs, encodeDevicePlans(plan, options.host_of_rank));
  std::vector<DecodedDevicePlan> decoded;
  for (const auto& blob : blobs) {
    BRAID_ASSIGN_OR_RETURN(DecodedDevicePlan d, decodeDevicePlan(blob.data(), blob.size()));
    decoded.push_back(std::move(d));
  }
  BRAID_RETURN_IF_ERROR(validateDevicePlans(decoded));
  // Blobs are read in place as the kernel reads them: keep them 16-byte aligned.
  std::vector<std::vector<uint64_t>> aligned_blobs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    aligned_blobs[r].resize((blobs[r].size() + 7) / 8);
    std::memcpy(aligned_blobs[r].data(), blobs[r].data(), blobs[r].size());
  }
  std::vector<EmulatedRank> ranks(static_cast<size_t>(n));
  std::vector<uint8_t*> regions(static_cast<size_t>(n));
  bool proxied = false;
  for (int r = 0; r < n; ++r) {
    const DevicePlanHeader& h = decoded[r].header;
    ranks[r].region.assign(h.region_bytes / 8 + 1, 0);
    ranks[r].proxy.assign(h.proxy_bytes / 8 + 1, 0);
    regions[r] = reinterpret_cast<uint8_t*>(ranks[r].region.data());
    proxied = proxied || h.proxy_bytes > 0;
  }
  ProxyTransports transports;
  if (proxied) {
    BRAID_ASSIGN_OR_RETURN(transports, createProxyTransports(n, options.tcp_proxies, options.timeout_s));
  }
  const CollectiveKind kind = plan.collective;
  const bool reduces =
      kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kReduce;
  const std::vector<int> running = [&] {
    if (!options.ranks.empty()) return options.ranks;
    std::vector<int> all;
    for (int r = 0; r < n; ++r) all.push_back(r);
    return all;
  }();
  std::vector<DeviceError> errors(static_cast<size_t>(n));
  for (int launch = 0; launch < options.launches; ++launch) {
    // Fresh data every launch: position-, rank- and launch-dependent (the launch shifts the rank).
    std::vector<DeviceLaunch> args(static_cast<size_t>(n));
    std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      const RankPlan& rp = plan.ranks[r];
      EmulatedRank& m = ranks[r];
      m.input.assign(rp.input_bytes + 16, 0xA5);
      m.output.assign(rp.output_bytes + 16, 0xA5);
      m.scratch.assign(rp.scratch_bytes + rp.temp_bytes + 16, 0xA5);
      const uint64_t in_elements = (kind == CollectiveKind::kAllGather ? rp.output_bytes / n : rp.input_bytes) / size;
      inputs[r] = inputOf(options.type, r + launch, in_elements);
      // In place, the input lives in the buffer the plan names: all-gather's at this rank's block of the output,
      // reduce-scatter's in the input, the others' in the output.
      uint8_t* in =
          plan.in_place ? (kind == CollectiveKind::kReduceScatter ? m.input.data() : m.output.data()) : m.input.data();
      if (plan.in_place && kind == CollectiveKind::kAllGather) in += static_cast<uint64_t>(r) * inputs[r].size();
      std::memcpy(in, inputs[r].data(), inputs[r].size());
      args[r].plan = reinterpret_cast<const uint8_t*>(aligned_blobs[r].data());
      args[r].regions = regions.data();
      args[r].proxy = decoded[r].header.proxy_bytes > 0 ? reinterpret_cast<uint8_t*>(m.proxy.data()) : nullptr;
      args[r].buffers[0] = m.input.data();
      args[r].buffers[1] = m.output.data();
      args[r].buffers[2] = m.scratch.data();
      // The block program numbers launches from the rank's launch counter; a CUDA graph replays the same arguments.
      args[r].launch = options.replayed_arguments ? 0 : static_cast<uint64_t>(launch);
      args[r].timeout_ns = static_cast<uint64_t>(options.timeout_s * 1e9);
      args[r].error = &errors[r];
    }
    // Every block of every running rank: `threads_per_block` host threads each.
    struct BlockState {
      HostBlock block;
      std::unique_ptr<std::barrier<>> barrier;
      std::atomic<int> flag{0};
      std::atomic<uint64_t> word{0};
      std::vector<HostBlock> threads;
    };
    std::vector<std::unique_ptr<BlockState>> blocks;
    std::vector<std::thread> threads;
    for (int r : running) {
      const uint32_t grid = std::max<uint32_t>(1, decoded[r].header.num_threadblocks);
      for (uint32_t b = 0; b < grid; ++b) {
        auto state = std::make_unique<BlockState>();
        state->barrier = std::make_unique<std::barrier<>>(options.threads_per_block);
        for (uint32_t t = 0; t < options.threads_per_block; ++t) {
          state->threads.push_back(
              HostBlock{b, grid, t, options.threads_per_block, state->barrier.get(), &state->flag, &state->word});
        }
        blocks.push_back(std::move(state));
      }
    }
    size_t next = 0;
    for (int r : running) {
      const uint32_t grid = std::max<uint32_t>(1, decoded[r].header.num_threadblocks);
      for (uint32_t b = 0; b < grid; ++b, ++next) {
        BlockState* state = blocks[next].get();
        for (uint32_t t = 0; t < options.threads_per_block; ++t) {
          threads.emplace_back([&, state, t, r] {
            HostBlockScope scope(&state->threads[t]);
            const DeviceLaunch& a = args[r];
            if (!reduces) {
              program::runBlock<uint8_t, ElementOp::kCopy>(a);
              return;
            }
            withElementType(static_cast<int>(options.type), [&]<typename T>() {
              withReduceOp(static_cast<int>(options.op), [&]<ElementOp kOp>() { program::runBlock<T, kOp>(a); });
            });
          });
        }
      }
    }
    // Every running rank's proxy, beside its blocks.
    std::vector<Status> proxy_status(static_cast<size_t>(n));
    for (int r : running) {
      if (decoded[r].header.proxy_bytes == 0) continue;
      if (std::find(options.without_proxy.begin(), options.without_proxy.end(), r) != options.without_proxy.end()) {
        continue;
      }
      threads.emplace_back([&, r] {
        proxy_status[r] =
            runDeviceProxy(decoded[r], reinterpret_cast<uint8_t*>(ranks[r].proxy.data()), static_cast<uint64_t>(launch),
                           *transports.endpoints[r], options.timeout_s, &errors[r]);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r : running) {
      const DeviceError& e = errors[r];
      if (e.code != 0) {
        if (error_out != nullptr) *error_out = e;
        return Status(StatusCode::kTimeout,
                      fmt::format("launch {}: rank {} {} {} step {} slice {} gave up waiting "
                                  "(what {}, peer {}){}",
                                  launch, e.rank, e.code == 2 ? "proxy of tb" : "tb", e.tb, e.step, e.slice, e.what,
                                  e.peer, proxy_status[r].isOk() ? "" : ": " + proxy_status[r].message()));
      }
    }
    for (int r : running) BRAID_RETURN_IF_ERROR(proxy_status[r]);
    for (int r : running) {
      const uint8_t* got = nullptr;
      std::vector<uint8_t> want;
      if (!expectedResult(plan, inputs, r, options, &want, &got, ranks[r].input.data(), ranks[r].output.data())) {
        continue;
      }
      for (size_t i = 0; i < want.size(); ++i) {
        if (got[i] != want[i]) {
          return internalError(fmt::format("launch {}: rank {}: output byte {} of {} is {:#04x}, expected {:#04x}",
                                           launch, r, i, want.size(), got[i], want[i]));
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace braid::testing
