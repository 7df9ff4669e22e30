// Phi-3's fused projections as the separate weights the decoder builder
// reads: qkv_proj into q_proj, k_proj and v_proj, gate_up_proj into
// gate_proj and up_proj (in GGUF files attn_qkv, and ffn_up holding gate and
// up). Each part is a slice of the fused tensor's rows, which is a slice of
// its bytes, block-quantized rows included, so the parts share its data.
#pragma once

#include <vector>

#include "core/status.h"
#include "format/model_config.h"
#include "format/weight_store.h"

namespace kiln {

// Replaces every fused weight of `weights` by its parts, under canonical
// names. Errors: a fused tensor whose rows are not those the config implies,
// or whose bytes do not divide into its rows.
Status SplitFusedWeights(const ModelConfig& config, std::vector<Weight>* weights);

}  // namespace kiln
