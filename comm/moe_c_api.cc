// The C API of expert-parallel dispatch and combine (include/braid/braid_moe.h) over braid::moe::DispatchPlan.
#include <new>
#include <string>

#include "braid/braid_moe.h"
#include "braid/moe.h"
#include "c_api_internal.h"

struct braidMoePlan {
  braidComm_t comm = nullptr;
  braid::moe::DispatchPlan plan;
};

namespace {

using braid::capi::checkCall;
using braid::capi::record;

braidResult_t checkPlan(braidMoePlan_t plan) {
  if (plan == nullptr) return braidInvalidArgument;
  return checkCall(plan->comm, nullptr);
}

}  // namespace

extern "C" {

braidResult_t braidMoePlanCreate(const int32_t* expert_ids, size_t num_tokens, int top_k, int num_experts,
                                 int64_t capacity, braidComm_t comm, braidMoePlan_t* plan, size_t* rows) {
  if (braidResult_t r = checkCall(comm, nullptr); r != braidSuccess) return r;
  if (plan == nullptr) return record(comm, braid::invalidArgument("braidMoePlanCreate: plan is NULL"));
  *plan = nullptr;
  braid::moe::RoutingRequest request;
  request.expert_ids = expert_ids;
  request.num_tokens = num_tokens;
  request.top_k = top_k;
  request.num_experts = num_experts;
  request.capacity = capacity;
  braid::Result<braid::moe::DispatchPlan> made = braid::moe::DispatchPlan::plan(*comm->impl, request);
  if (!made.isOk()) return record(comm, made.status());
  auto* out = new (std::nothrow) braidMoePlan{comm, std::move(made).value()};
  if (out == nullptr) return record(comm, braid::Status(braid::StatusCode::kSystemError, "out of memory"));
  if (rows != nullptr) *rows = out->plan.receivedSlots();
  *plan = out;
  return record(comm, braid::Status::ok());
}

braidResult_t braidMoeExpertCounts(braidMoePlan_t plan, int64_t* counts) {
  if (braidResult_t r = checkPlan(plan); r != braidSuccess) return r;
  if (counts == nullptr) return braidInvalidArgument;
  const std::vector<int64_t>& c = plan->plan.expertCounts();
  for (size_t i = 0; i < c.size(); ++i) counts[i] = c[i];
  return braidSuccess;
}

braidResult_t braidMoeSlotCounts(braidMoePlan_t plan, int64_t* dropped, int64_t* sent) {
  if (braidResult_t r = checkPlan(plan); r != braidSuccess) return r;
  if (dropped != nullptr) *dropped = plan->plan.droppedSlots();
  if (sent != nullptr) *sent = plan->plan.sentSlots();
  return braidSuccess;
}

braidResult_t braidMoeDispatch(braidMoePlan_t plan, const void* tokens, size_t hidden, braidDataType_t datatype,
                               void* expert_in) {
  if (braidResult_t r = checkPlan(plan); r != braidSuccess) return r;
  if (!braid::capi::validType(datatype)) return braid::capi::badEnum(plan->comm, "datatype", datatype);
  return record(plan->comm, plan->plan.dispatch(*plan->comm->impl, tokens, hidden,
                                                static_cast<braid::DataType>(datatype), expert_in));
}

braidResult_t braidMoeCombine(braidMoePlan_t plan, const void* expert_out, size_t hidden, braidDataType_t datatype,
                              const float* weights, void* out) {
  if (braidResult_t r = checkPlan(plan); r != braidSuccess) return r;
  if (!braid::capi::validType(datatype)) return braid::capi::badEnum(plan->comm, "datatype", datatype);
  return record(plan->comm, plan->plan.combine(*plan->comm->impl, expert_out, hidden,
                                               static_cast<braid::DataType>(datatype), weights, out));
}

braidResult_t braidMoePlanDestroy(braidMoePlan_t plan) {
  if (plan == nullptr) return braidInvalidArgument;
  delete plan;
  return braidSuccess;
}

}  // extern "C"
