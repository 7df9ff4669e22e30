// Small generated models for the compiler's tests: real Llama-family graphs
// with random weights of chosen shapes and dtypes.
#pragma once

#include <memory>

#include "core/dtype.h"
#include "format/model_config.h"
#include "format/weight_store.h"

namespace kiln::testing {

// A 2-layer model: hidden 32, 4 heads of 8, 2 KV heads, MLP 64, vocab 64,
// 128 positions. `arch` selects Qwen2 biases, Qwen3 q/k norms, or Mistral's
// sliding window (of 5 tokens).
inline ModelConfig SmallConfig(Architecture arch) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000;
  c.attention_bias = arch == Architecture::kQwen2;
  c.qk_norm = arch == Architecture::kQwen3;
  c.tie_word_embeddings = arch != Architecture::kLlama;
  c.sliding_window = arch == Architecture::kMistral ? 5 : 0;
  c.bos_token_ids = {1};
  c.eos_token_ids = {2};
  return c;
}

inline std::unique_ptr<WeightStore> SmallModel(Architecture arch, DType dtype = DType::kF32, uint64_t seed = 7) {
  auto store = WeightStore::Dummy(SmallConfig(arch), dtype, seed);
  return store.ok() ? std::move(store).value() : nullptr;
}

}  // namespace kiln::testing
