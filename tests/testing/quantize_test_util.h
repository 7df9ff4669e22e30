// Helpers of the quantization tests: the golden files, weights widened to
// f32, and held-out perplexity by the reference method.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/compiled_model.h"
#include "core/mapped_file.h"
#include "format/gguf.h"
#include "format/weight_store.h"
#include "quant/dequantize.h"
#include "testing/model_runner_for_tests.h"
#include "testing/test_paths.h"

namespace kiln::testing {

inline nlohmann::json LoadJsonFile(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

inline std::string GgufPath(const std::string& file) { return SharedDir() + "/models/gguf/" + file; }

// The same weights with every tensor widened to f32 (block formats
// dequantized), so that any model compiles and runs in fp32.
class WidenedWeights : public WeightStore {
 public:
  static std::unique_ptr<WeightStore> Of(const WeightStore& source) {
    auto store = std::unique_ptr<WidenedWeights>(new WidenedWeights());
    store->path_ = source.path();
    store->format_ = source.format();
    store->config_ = source.config();
    for (const Weight& w : source.weights()) {
      auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(w.num_elements()));
      Status s = DequantizeRow(w.dtype, w.data, values->data(), w.num_elements());
      EXPECT_TRUE(s.ok()) << s.ToString();
      Weight f = w;
      f.dtype = DType::kF32;
      f.data = reinterpret_cast<const uint8_t*>(values->data());
      f.nbytes = values->size() * sizeof(float);
      store->index_[f.name] = store->weights_.size();
      store->weights_.push_back(std::move(f));
      store->owned_.push_back(values);
    }
    return store;
  }

 private:
  WidenedWeights() = default;
};

inline CompileOptions Fp32Options(int threads = 2) {
  CompileOptions o;
  o.precision = Precision::kFp32;
  o.threads = threads;
  o.max_batch_tokens = 256;
  o.max_model_len = 256;
  return o;
}

// Held-out perplexity as ../shared/models/<model>/reference/heldout_ppl.json
// computes it: windows of 256 tokens from position 0, every prediction
// inside a window scored. `max_windows` limits the work (0: all).
inline double HeldOutPerplexity(CompiledModel& model, const std::string& model_name, int64_t max_windows = 0) {
  auto ref = LoadJsonFile(ModelDir(model_name) + "/reference/heldout_ppl.json");
  auto ids = ref["token_ids"].get<std::vector<int32_t>>();
  const int64_t window = ref["window"].get<int64_t>();
  int64_t windows = ref["n_windows"].get<int64_t>();
  if (max_windows > 0) windows = std::min(windows, max_windows);
  const int64_t vocab = model.config().vocab_size;
  DirectRunner runner(model, 1, window);
  double nll = 0;
  int64_t count = 0;
  for (int64_t w = 0; w < windows; ++w) {
    std::vector<int32_t> chunk(ids.begin() + w * window, ids.begin() + (w + 1) * window);
    auto logits = runner.Prefill({chunk}, window, true);
    for (int64_t t = 0; t + 1 < window; ++t) {
      const float* row = logits[0].data() + t * vocab;
      double mx = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
      nll += mx + std::log(sum) - row[chunk[static_cast<size_t>(t + 1)]];
      ++count;
    }
  }
  return std::exp(nll / static_cast<double>(count));
}

}  // namespace kiln::testing
