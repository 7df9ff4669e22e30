// The model's weights under one naming, whatever file they came from: Hugging
// Face names ("model.layers.3.mlp.up_proj.weight") for safetensors folders
// and for GGUF files alike. Data stays memory-mapped where the file's dtype
// is one the engine computes in.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "format/model_config.h"

namespace kiln {

class ArtifactFile;
class GgufFile;

struct Weight {
  std::string name;         // canonical (Hugging Face) name
  std::string source_name;  // name in the file ("blk.3.ffn_up.weight" for GGUF)
  std::string file;         // the file it came from
  DType dtype = DType::kF32;
  DType file_dtype = DType::kF32;  // as stored in the file, before any conversion
  std::vector<int64_t> shape;  // row-major, outermost first: [out, in] for linear
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  // Whether data lies in a read-only file mapping: a backend that packs a
  // copy it reads instead may drop these pages (DropMappedPages), as a
  // later read brings them back from the file.
  bool file_mapped = false;

  int64_t num_elements() const;
};

enum class ModelFormat { kHuggingFace, kGguf, kDummy, kArtifact };

const char* ModelFormatName(ModelFormat f);  // "Hugging Face", "GGUF", "dummy", "kiln artifact"

// A weight matrix as a backend packed it, stored with the weights (a .kiln
// artifact): what the backend adopts instead of packing the weight again.
struct StoredPackedMatrix {
  std::string backend;
  std::string weight;  // canonical name
  std::string layout;  // the PackedMatrix's layout(), e.g. "panel16-bf16", "q8_0-x8"
  // The packed bytes by part name ("panel", "x8"); the artifact's mapping.
  std::map<std::string, std::span<const uint8_t>> parts;
};

// A tensor the architecture needs, with the shape the config implies.
struct WeightSpec {
  std::string name;            // canonical name
  std::vector<int64_t> shape;  // row-major, outermost first
};

// Every tensor a model of `config` needs (lm_head only when untied), in
// file order: embedding, then layer by layer, then the final norm and head.
std::vector<WeightSpec> RequiredWeights(const ModelConfig& config);

class WeightStore {
 public:
  // A Hugging Face folder (config.json + model.safetensors or a sharded
  // model.safetensors.index.json) or a .gguf file. Checks that every tensor
  // the architecture needs is present with the right shape.
  static Expected<std::unique_ptr<WeightStore>> Open(const std::string& path);

  // Generated weights of the shapes `config` implies (for benchmarks of
  // real model shapes without downloads): deterministic from `seed`, scaled
  // like a trained model's so activations stay finite.
  static Expected<std::unique_ptr<WeightStore>> Dummy(const ModelConfig& config, DType dtype, uint64_t seed = 0);

  // A copy of `source` (same config, names and shapes) whose matrices are
  // converted to `dtype` (f32, f16, bf16, q8_0 or q4_0), as a cheaper copy
  // of a model to draft with; vectors, and matrices whose rows are not a
  // whole number of `dtype`'s blocks, keep their dtype. Shares nothing with
  // `source`. Errors name a tensor that cannot be converted.
  static Expected<std::unique_ptr<WeightStore>> Requantized(const WeightStore& source, DType dtype);

  // Rank `rank`'s share of `source` for tensor parallelism over `size`
  // ranks (Megatron's split): q/k/v and gate/up keep the rows of the rank's
  // heads and intermediate slice (views into `source`'s memory), o_proj and
  // down_proj the matching input columns (copies), o_proj's bias only on
  // rank 0; embeddings, norms and lm_head are shared whole. The config's
  // head counts and intermediate_size are the rank's, and its
  // tensor_parallel_size is `size`. Keeps `source` alive. Errors name the
  // model's numbers when heads or the intermediate size do not divide by
  // `size`, and the tensor when a column slice of a block-quantized weight
  // would cut a block; mixtures of experts and compiled artifacts are
  // refused.
  static Expected<std::unique_ptr<WeightStore>> TensorParallelShard(std::shared_ptr<const WeightStore> source,
                                                                     int rank, int size);

  // Stage `stage` of `stages` for pipeline parallelism: the decoder layers
  // PipelineStageLayers gives it (views of `source`'s weights, nothing
  // copied), the embedding on the first stage, the final norm and the LM
  // head on the last (the embedding matrix there too when it is the head:
  // tied embeddings). The config records the stage (ModelConfig's
  // pipeline fields). Keeps `source` alive. Errors: more stages than
  // layers, a mixture of experts, a compiled artifact, a tensor-parallel
  // shard.
  static Expected<std::unique_ptr<WeightStore>> PipelineStage(std::shared_ptr<const WeightStore> source, int stage,
                                                              int stages);

  virtual ~WeightStore();

  const std::string& path() const { return path_; }
  ModelFormat format() const { return format_; }
  const ModelConfig& config() const { return config_; }
  const std::vector<Weight>& weights() const { return weights_; }

  // nullptr when absent.
  const Weight* Find(std::string_view name) const;
  // An error naming the tensor and the file when absent.
  Expected<const Weight*> Require(std::string_view name) const;

  // The weight converted to float32 (any dtype, including block-quantized).
  Expected<std::vector<float>> ReadF32(std::string_view name) const;

  // The GGUF file, when the weights came from one (for tokenizer metadata).
  const GgufFile* gguf() const { return gguf_.get(); }

  // The weights of a compiled artifact: `tensors` (a JSON array of {name,
  // source_name, file, dtype, file_dtype, shape, section}) and `packed`
  // (of {backend, weight, layout, parts: {part: section}}) over `file`'s
  // sections, used where they lie; `config` as ModelConfigToJson wrote it.
  // Checks every tensor's size against its dtype and shape.
  static Expected<std::unique_ptr<WeightStore>> FromArtifact(std::shared_ptr<const ArtifactFile> file,
                                                             const std::string& config_json,
                                                             const std::string& tensors_json,
                                                             const std::string& packed_json);

  // The stored packed form of `weight` for `backend`, or null.
  const StoredPackedMatrix* FindPacked(std::string_view backend, std::string_view weight) const;
  const std::vector<StoredPackedMatrix>& stored_packed() const { return packed_; }

  int64_t TotalBytes() const;

  // What compiling the model produced, as a compiled artifact stores it
  // (compiler/compilation_codec.h); empty otherwise.
  std::span<const uint8_t> stored_compilation() const { return compilation_; }

 protected:
  WeightStore() = default;

  std::string path_;
  ModelFormat format_ = ModelFormat::kHuggingFace;
  ModelConfig config_;
  std::vector<Weight> weights_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in weights_
  std::unique_ptr<GgufFile> gguf_;
  std::vector<std::shared_ptr<void>> owned_;  // mapped files, converted buffers
  std::vector<StoredPackedMatrix> packed_;
  std::span<const uint8_t> compilation_;
};

// The layers of pipeline stage `stage` of `stages` over a model of
// `num_layers`: contiguous, split as evenly as possible, the earlier stages
// taking one more where it does not divide. `first` and `count` are set.
void PipelineStageLayers(int64_t num_layers, int stages, int stage, int64_t* first, int64_t* count);

// Canonical tensor names, so builders never spell them by hand.
namespace weight_names {
std::string Embedding();                 // model.embed_tokens.weight
std::string FinalNorm();                 // model.norm.weight
std::string LmHead();                    // lm_head.weight
std::string Layer(int64_t layer, std::string_view suffix);  // model.layers.{i}.{suffix}
// A mixture's expert, as a Layer suffix: mlp.experts.{e}.{projection}.weight
// (projection: gate_proj, up_proj or down_proj).
std::string ExpertSuffix(int64_t expert, std::string_view projection);

// GGUF tensor names <-> canonical names ("blk.3.ffn_up.weight" <->
// "model.layers.3.mlp.up_proj.weight"). Names without a counterpart come
// back unchanged.
std::string FromGguf(std::string_view gguf_name);
std::string ToGguf(std::string_view canonical_name);
// ToGguf for a model of `config`: Gemma's four norms a layer have names of
// their own in GGUF files.
std::string ToGgufFor(const std::string& canonical_name, const ModelConfig& config);
}  // namespace weight_names

}  // namespace kiln
