// Quantizing a whole model (a Hugging Face folder or a GGUF file) to a GGUF
// file type: each tensor gets the policy's type (quant_policy.h), the
// metadata is carried over (GGUF) or built as llama.cpp's converter would
// (Hugging Face), and the result is written atomically.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/model_config.h"
#include "quantize/quant_policy.h"
#include "quantize/quantize_metadata.h"

namespace kiln {

class Tokenizer;
class WeightStore;

// Where a running quantization stands, reported after every tensor.
struct QuantizeProgress {
  int64_t tensors_done = 0;
  int64_t tensors_total = 0;
  uint64_t bytes_done = 0;  // of the output written so far
  uint64_t bytes_total = 0;  // of the whole output
  double elapsed_seconds = 0;
  std::string last_tensor;  // the GGUF name of the tensor just finished
};

struct QuantizeOptions {
  QuantFileType type = QuantFileType::kQ8_0;
  int threads = 0;  // 0: one per physical core
  // Called on the calling thread after each tensor.
  std::function<void(const QuantizeProgress&)> on_progress;
  // Called for what a user should know: per-tensor fallbacks ("blk.0.attn_q.weight:
  // 128 columns are not a multiple of q4_k's block of 256, falling back to
  // q5_0"), requantization of already quantized weights, skipped tensors.
  std::function<void(const std::string&)> on_notice;
};

struct QuantizedTensor {
  std::string name;            // GGUF name ("blk.3.ffn_down.weight")
  DType dtype = DType::kF32;   // as written
  std::vector<int64_t> shape;  // row-major, outermost first (the file stores the reverse)
  std::vector<uint8_t> data;
  TypeChoice choice;           // the policy's decision (keep_as_is for copied tensors)
};

// A quantized model in memory: exactly what WriteGguf puts in the file.
struct QuantizedModel {
  QuantFileType type = QuantFileType::kQ8_0;
  // The configuration a reader of the file sees (llama's interleaved RoPE
  // for q/k rows permuted as llama.cpp does).
  ModelConfig config;
  GgufMetadata metadata;                // in file order
  std::vector<QuantizedTensor> tensors;  // in file order
  int64_t fallbacks = 0;                // tensors whose type fell back

  uint64_t TensorBytes() const;
};

// Quantizes the model at `source`: a Hugging Face folder (config.json +
// safetensors + tokenizer files) or a .gguf file. Hugging Face llama and
// mistral q/k rows are permuted for GGUF's interleaved RoPE; a GGUF source
// keeps its names, layout, tensor order and every metadata key but
// general.file_type and general.quantization_version. Tensors already in
// their target type are copied byte for byte. Errors name the file, the
// tensor and the problem (a non-finite weight, a shape the policy cannot
// place).
Expected<QuantizedModel> QuantizeModel(const std::string& source, const QuantizeOptions& options);

// Writes `model` as a GGUF file, atomically (a temporary file beside
// `path`, then a rename): `path` keeps its old content or has the whole new
// one.
Status WriteQuantizedGguf(const QuantizedModel& model, const std::string& path);

// The weights of `model` as a WeightStore under canonical names, pointing
// into model's tensors, as WeightStore::Open would give them for the written
// file: the in-memory quantized model. REQUIRES: model outlives the store.
Expected<std::unique_ptr<WeightStore>> QuantizedModelWeights(const QuantizedModel& model);

// The tokenizer of model's metadata, as LoadTokenizerFromGguf reads it from
// the written file.
Expected<std::unique_ptr<Tokenizer>> QuantizedModelTokenizer(const QuantizedModel& model);

}  // namespace kiln
