// One rank's share of a model's weights under pipeline parallelism: a
// contiguous range of decoder layers, with the embedding on the first stage
// and the final norm and LM head on the last. Every weight kept is a view
// of the source's (mapped files included); the layers of other stages are
// never touched, so their pages are never read in.
#include "format/weight_store.h"

#include <algorithm>

#include <fmt/format.h>

// The store's members' complete types, for its destructor.
#include "format/artifact_file.h"
#include "format/gguf.h"

namespace kiln {
namespace {

class StageWeightStore : public WeightStore {
 public:
  StageWeightStore(const WeightStore& source, int stage, int stages) {
    path_ = fmt::format("{} (pipeline stage {} of {})", source.path(), stage, stages);
    format_ = source.format();
    config_ = source.config();
  }
  ModelConfig& config() { return config_; }
  void Add(const Weight& w) {
    index_.emplace(w.name, weights_.size());
    weights_.push_back(w);
  }
  void Own(std::shared_ptr<void> p) { owned_.push_back(std::move(p)); }
};

// The layer of a "model.layers.{i}." weight name; -1 for any other.
int64_t LayerOf(const std::string& name) {
  static const std::string kPrefix = "model.layers.";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  int64_t layer = 0;
  size_t i = kPrefix.size();
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) layer = layer * 10 + (name[i] - '0');
  return i < name.size() && name[i] == '.' ? layer : -1;
}

}  // namespace

void PipelineStageLayers(int64_t num_layers, int stages, int stage, int64_t* first, int64_t* count) {
  const int64_t base = num_layers / stages, extra = num_layers % stages;
  *count = base + (stage < extra ? 1 : 0);
  *first = stage * base + std::min<int64_t>(stage, extra);
}

Expected<std::unique_ptr<WeightStore>> WeightStore::PipelineStage(std::shared_ptr<const WeightStore> source,
                                                                  int stage, int stages) {
  if (source == nullptr) return InvalidArgument("pipeline parallelism: no weights");
  const ModelConfig& c = source->config();
  if (stages < 1 || stage < 0 || stage >= stages) {
    return InvalidArgument("pipeline parallelism: stage {} of {} stages", stage, stages);
  }
  if (c.pipeline_stages != 1) return InvalidArgument("{}: already a pipeline stage", source->path());
  if (c.tensor_parallel_size != 1) {
    return Unsupported("{}: pipeline parallelism over a tensor-parallel shard is not supported", source->path());
  }
  if (source->format() == ModelFormat::kArtifact) {
    return Unsupported("{}: a compiled artifact cannot be split into pipeline stages; give the model it was "
                       "compiled from", source->path());
  }
  if (c.num_experts > 0) {
    return Unsupported("{}: pipeline parallelism over a mixture of experts is not supported", source->path());
  }
  if (stages > c.num_layers) {
    return InvalidArgument("{}: --pipeline-parallel-size {} is more than the model's {} decoder layers",
                           source->path(), stages, c.num_layers);
  }
  auto store = std::make_unique<StageWeightStore>(*source, stage, stages);
  ModelConfig& sc = store->config();
  sc.pipeline_stage = stage;
  sc.pipeline_stages = stages;
  PipelineStageLayers(c.num_layers, stages, stage, &sc.stage_first_layer, &sc.stage_num_layers);
  const bool first = sc.FirstStage(), last = sc.LastStage();
  const bool has_head = source->Find(weight_names::LmHead()) != nullptr && !c.tie_word_embeddings;
  for (const Weight& w : source->weights()) {
    const int64_t layer = LayerOf(w.name);
    bool keep = false;
    if (layer >= 0) {
      keep = layer >= sc.StageLayerBegin() && layer < sc.StageLayerEnd();
    } else if (w.name == weight_names::Embedding()) {
      keep = first || (last && !has_head);
    } else if (w.name == weight_names::FinalNorm() || w.name == weight_names::LmHead()) {
      keep = last;
    } else {
      keep = true;  // anything else the model carries is small: every stage has it
    }
    if (keep) store->Add(w);
  }
  store->Own(std::const_pointer_cast<WeightStore>(source));
  return std::unique_ptr<WeightStore>(std::move(store));
}

}  // namespace kiln
