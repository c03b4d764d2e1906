/* Expert-parallel dispatch and combine in Braid's C API (include/braid/moe.h is the C++ API and says what each step
 * does: expert placement, capacity and dropped slots, the received layout, the weighted combine).
 *
 *   braidMoePlan_t plan;
 *   size_t rows;
 *   braidMoePlanCreate(expert_ids, num_tokens, top_k, num_experts, capacity, comm, &plan, &rows);
 *   braidMoeDispatch(plan, tokens, hidden, braidBfloat16, expert_in);    (expert_in: rows x hidden)
 *   ... each local expert e computes on its braidMoeExpertCounts(plan, counts)[e] rows of expert_in ...
 *   braidMoeCombine(plan, expert_out, hidden, braidBfloat16, weights, out);   (out: num_tokens x hidden)
 *   braidMoePlanDestroy(plan);
 *
 * A plan belongs to the communicator it was made on: destroy it before that communicator. Every call but the
 * getters and Destroy is collective over the communicator. Errors are returned as
 * braidResult_t with the message in braidGetLastError(comm). */
#ifndef BRAID_BRAID_MOE_H_
#define BRAID_BRAID_MOE_H_

#include <stddef.h>
#include <stdint.h>

#include "braid/braid.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct braidMoePlan* braidMoePlan_t;

/* Routes num_tokens tokens with top_k expert choices each (expert_ids: num_tokens x top_k, -1 = unrouted) over
 * num_experts experts spread evenly over the ranks; capacity = slots per (rank, expert), -1 = dropless. *rows gets
 * the slots this rank receives. */
braidResult_t braidMoePlanCreate(const int32_t* expert_ids, size_t num_tokens, int top_k, int num_experts,
                                 int64_t capacity, braidComm_t comm, braidMoePlan_t* plan, size_t* rows);
/* Rows per local expert (num_experts / ranks values), in the received layout's order. */
braidResult_t braidMoeExpertCounts(braidMoePlan_t plan, int64_t* counts);
/* This rank's slots dropped by capacity, and sent. */
braidResult_t braidMoeSlotCounts(braidMoePlan_t plan, int64_t* dropped, int64_t* sent);
braidResult_t braidMoeDispatch(braidMoePlan_t plan, const void* tokens, size_t hidden, braidDataType_t datatype,
                               void* expert_in);
/* weights: num_tokens x top_k floats, or NULL for 1; datatype: half, bfloat16, float or double. */
braidResult_t braidMoeCombine(braidMoePlan_t plan, const void* expert_out, size_t hidden, braidDataType_t datatype,
                              const float* weights, void* out);
braidResult_t braidMoePlanDestroy(braidMoePlan_t plan);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_BRAID_MOE_H_ */
