// WeightStore::FromArtifact: tensors and packed matrices that lie in a .kiln
// file's sections, described by its metadata.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "format/artifact_file.h"
#include "format/gguf.h"
#include "format/model_config_json.h"
#include "format/weight_store.h"

namespace kiln {
namespace {

Expected<std::span<const uint8_t>> SectionBytes(const ArtifactFile& file, const nlohmann::json& name) {
  KILN_ASSIGN_OR_RETURN(const ArtifactSection* s, file.Require(name.get<std::string>()));
  return s->span();
}

}  // namespace

Expected<std::unique_ptr<WeightStore>> WeightStore::FromArtifact(std::shared_ptr<const ArtifactFile> file,
                                                                 const std::string& config_json,
                                                                 const std::string& tensors_json,
                                                                 const std::string& packed_json) {
  auto store = std::unique_ptr<WeightStore>(new WeightStore());
  store->path_ = file->name();
  store->format_ = ModelFormat::kArtifact;
  const std::string& source = file->name();
  try {
    auto config = ModelConfigFromJson(nlohmann::json::parse(config_json));
    if (!config.ok()) return config.status().WithContext(source);
    store->config_ = std::move(*config);
    for (const nlohmann::json& t : nlohmann::json::parse(tensors_json)) {
      Weight w;
      w.name = t.at("name").get<std::string>();
      w.source_name = t.at("source_name").get<std::string>();
      w.file = t.at("file").get<std::string>();
      auto dtype = DTypeFromName(t.at("dtype").get<std::string>());
      auto file_dtype = DTypeFromName(t.at("file_dtype").get<std::string>());
      if (!dtype || !file_dtype) return Corrupt("{}: tensor {} has an unknown dtype", source, w.name);
      w.dtype = *dtype;
      w.file_dtype = *file_dtype;
      w.shape = t.at("shape").get<std::vector<int64_t>>();
      KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> bytes, SectionBytes(*file, t.at("section")));
      uint64_t elements = 1;
      for (int64_t d : w.shape) {
        if (d < 0 || __builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements)) {
          return Corrupt("{}: tensor {} has a bad shape", source, w.name);
        }
      }
      std::optional<uint64_t> expected = DTypeBytes(w.dtype, elements);
      if (!expected || *expected != bytes.size()) {
        return Corrupt("{}: tensor {} holds {} bytes, not what {} x {} elements take", source, w.name, bytes.size(),
                       DTypeName(w.dtype), elements);
      }
      w.data = bytes.data();
      w.nbytes = bytes.size();
      w.file_mapped = true;
      if (!store->index_.emplace(w.name, store->weights_.size()).second) {
        return Corrupt("{}: tensor {} appears twice", source, w.name);
      }
      store->weights_.push_back(std::move(w));
    }
    for (const nlohmann::json& p : nlohmann::json::parse(packed_json)) {
      StoredPackedMatrix m;
      m.backend = p.at("backend").get<std::string>();
      m.weight = p.at("weight").get<std::string>();
      m.layout = p.at("layout").get<std::string>();
      if (store->Find(m.weight) == nullptr) {
        return Corrupt("{}: a packed form of {}, which is not among the tensors", source, m.weight);
      }
      for (const auto& [part, section] : p.at("parts").items()) {
        KILN_ASSIGN_OR_RETURN(m.parts[part], SectionBytes(*file, section));
      }
      store->packed_.push_back(std::move(m));
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("{}: metadata: {}", source, e.what());
  }
  for (const WeightSpec& spec : RequiredWeights(store->config_)) {
    const Weight* w = store->Find(spec.name);
    if (w == nullptr) return Corrupt("{}: tensor {} is missing", source, spec.name);
    if (w->shape != spec.shape) {
      return Corrupt("{}: tensor {} has shape [{}], the config implies [{}]", source, spec.name,
                     fmt::join(w->shape, ", "), fmt::join(spec.shape, ", "));
    }
  }
  if (const ArtifactSection* compiled = file->Find("compiled")) store->compilation_ = {compiled->data, compiled->bytes};
  store->owned_.push_back(std::const_pointer_cast<ArtifactFile>(std::move(file)));
  return store;
}

const StoredPackedMatrix* WeightStore::FindPacked(std::string_view backend, std::string_view weight) const {
  for (const StoredPackedMatrix& m : packed_) {
    if (m.backend == backend && m.weight == weight) return &m;
  }
  return nullptr;
}

}  // namespace kiln
