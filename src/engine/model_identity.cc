// The model identity hash: what decides the bits of a KV cache, without
// where the files lie.
#include "engine/model_identity.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "core/precision.h"
#include "engine/engine_options.h"
#include "engine/model_artifact.h"

namespace kiln {

Expected<std::string> ModelIdentityHash(const EngineOptions& options) {
  nlohmann::json what;
  if (options.load_format == "dummy") {
    what = {{"preset", options.preset},
            {"seed", options.dummy_seed},
            {"dtype", DTypeName(options.dummy_dtype)},
            {"config", options.model.empty() ? nlohmann::json() : nlohmann::json(options.model)}};
  }
  KILN_ASSIGN_OR_RETURN(nlohmann::json files, ArtifactSourceFiles(options));
  for (auto& file : files) file.erase("name");  // the contents matter, not where they are
  what["files"] = std::move(files);
  // The precision changes the bits a pass computes, so the cache's too.
  what["precision"] = PrecisionName(options.precision);
  what["w8a8"] = options.w8a8;
  const std::string text = what.dump();
  return fmt::format("{:016x}", XXH64(text.data(), text.size(), 0));
}

}  // namespace kiln
