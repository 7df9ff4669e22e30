// The experts of a mixture under the canonical (Qwen-MoE) names the decoder
// builder reads: model.layers.N.mlp.gate (the router),
// mlp.experts.E.{gate,up,down}_proj, mlp.shared_expert.* and
// mlp.shared_expert_gate. Mixtral's Hugging Face names are renamed; GGUF's
// stacked 3-D expert tensors are cut into one 2-D weight per expert, each
// expert's matrix being a contiguous run of the tensor's bytes (its rows,
// block-quantized ones included), so the parts share its data.
#pragma once

#include <vector>

#include "core/status.h"
#include "format/model_config.h"
#include "format/weight_store.h"

namespace kiln {

// Mixtral's block_sparse_moe.gate and block_sparse_moe.experts.E.{w1,w3,w2}
// as mlp.gate and mlp.experts.E.{gate,up,down}_proj.
void RenameMixtralWeights(const ModelConfig& config, std::vector<Weight>* weights);

// GGUF's blk.N.ffn_{gate,up,down}_exps (3-D, experts outermost) as
// per-expert matrices (older Mixtral files' per-expert
// blk.N.ffn_{gate,up,down}.E renamed), and the shared expert's gate (a vector in GGUF) as
// the [1, hidden] matrix Hugging Face holds. Errors: a stacked tensor whose
// expert count is not the config's, or whose bytes do not divide into it.
Status SplitStackedExperts(const ModelConfig& config, std::vector<Weight>* weights);

}  // namespace kiln
