// A mixture of experts' routing: which experts each row runs, with what
// weights, and the rows grouped by expert so that each expert's weights are
// read once per step however many rows chose it.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// For each of `rows` rows of router logits (`experts` each, ldl apart):
// p = softmax(logits) in fp32, then the k largest p (ties to the lower
// expert), renormalized to sum to 1 when `normalize`. Writes row m's
// choices to expert[m * k + j] / weight[m * k + j], j in rank order.
// A row's choices depend on its logits only.
// REQUIRES: 0 < k <= experts.
void RouteRows(const float* logits, int64_t rows, int64_t ldl, int64_t experts, int64_t k, bool normalize,
               int32_t* expert, float* weight);

// Groups the choices by expert: expert e's rows are
// row[offset[e] .. offset[e + 1]) in increasing order, each with its
// weight in row_weight at the same place. offset has experts + 1 entries;
// row and row_weight rows * k.
void GroupByExpert(const int32_t* expert, const float* weight, int64_t rows, int64_t k, int64_t experts,
                   int32_t* offset, int32_t* row, float* row_weight);

}  // namespace kiln::cpu
