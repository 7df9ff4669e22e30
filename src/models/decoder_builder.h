// Builds the graph of a Llama-family decoder (Llama, Mistral, Qwen2, Qwen3,
// Phi-3, Gemma 2, Gemma 3; Mixtral, Qwen2-MoE and Qwen3-MoE, whose MLPs are
// mixtures of experts: one moe node a layer) from its ModelConfig and
// weights. The architectures differ only in options the config carries: q/k/v biases,
// per-head q/k norms, tied embeddings, sliding-window attention (on every
// layer or some), RoPE convention, base, rotary dims and scaling, Gemma's
// extra norms, embedding scale and soft-capping (Phi-3's fused projections
// are split into separate weights at load).
#pragma once

#include "core/status.h"
#include "format/model_config.h"
#include "graph/graph.h"

namespace kiln {

class WeightStore;

// Names of the values a decoder graph exposes for dumps and layer-by-layer
// comparison (kiln diff, generate --dump).
namespace value_names {
std::string Layer(int64_t layer, const char* what);  // "layers.3.attn_out"
}  // namespace value_names

// The graph computes, for a batch of tokens, the logits of the rows selected
// by the runtime input (the last token of each sequence, or every token),
// writing K and V of every token into the paged KV cache.
// Errors: an architecture other than the Llama family; a missing weight.
Expected<Graph> BuildDecoderGraph(const WeightStore& weights);

}  // namespace kiln
