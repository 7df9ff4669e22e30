// A quantized model still in memory, seen the way a reader of its file sees
// it: weights under canonical names and the tokenizer of its metadata.
#include <fmt/format.h>

#include "format/expert_weights.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "format/weight_store.h"
#include "quantize/quantize_model.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace {

constexpr const char* kInMemoryName = "in-memory quantized model";

// A WeightStore over a QuantizedModel's tensors (no copies).
class QuantizedWeightStore : public WeightStore {
 public:
  static Expected<std::unique_ptr<WeightStore>> Create(const QuantizedModel& model) {
    auto store = std::unique_ptr<QuantizedWeightStore>(new QuantizedWeightStore());
    store->path_ = kInMemoryName;
    store->format_ = ModelFormat::kGguf;
    store->config_ = model.config;
    for (const QuantizedTensor& t : model.tensors) {
      Weight w;
      w.name = weight_names::FromGguf(t.name);
      w.source_name = t.name;
      w.file = kInMemoryName;
      w.dtype = t.dtype;
      w.file_dtype = t.dtype;
      w.shape = t.shape;
      w.data = t.data.data();
      w.nbytes = t.data.size();
      store->weights_.push_back(std::move(w));
    }
    // A mixture's stacked expert tensors as one matrix an expert, as a
    // reader of the file sees them.
    KILN_RETURN_IF_ERROR(SplitStackedExperts(store->config_, &store->weights_));
    for (size_t i = 0; i < store->weights_.size(); ++i) {
      if (!store->index_.emplace(store->weights_[i].name, i).second) {
        return Corrupt("{}: two tensors map to {}", kInMemoryName, store->weights_[i].name);
      }
    }
    for (const WeightSpec& spec : RequiredWeights(store->config_)) {
      const Weight* w = store->Find(spec.name);
      if (w == nullptr) return NotFound("{}: tensor {} is missing", kInMemoryName, spec.name);
      if (w->shape != spec.shape) {
        return Corrupt("{}: tensor {} has shape [{}], the config implies [{}]", kInMemoryName, spec.name,
                       fmt::join(w->shape, ", "), fmt::join(spec.shape, ", "));
      }
    }
    return std::unique_ptr<WeightStore>(std::move(store));
  }

 private:
  QuantizedWeightStore() = default;
};

}  // namespace

Expected<std::unique_ptr<WeightStore>> QuantizedModelWeights(const QuantizedModel& model) {
  return QuantizedWeightStore::Create(model);
}

Expected<std::unique_ptr<Tokenizer>> QuantizedModelTokenizer(const QuantizedModel& model) {
  GgufWriter writer;
  for (const auto& [key, value] : model.metadata) KILN_RETURN_IF_ERROR(writer.Set(key, value));
  std::vector<uint8_t> image = writer.Serialize();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Parse(image.data(), image.size(), kInMemoryName));
  return LoadTokenizerFromGguf(*gguf);
}

}  // namespace kiln
