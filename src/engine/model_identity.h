// Which model an engine runs, as one hash two processes can compare before
// they share KV blocks: the same weights at the same precision compute the
// same cache.
#pragma once

#include <string>

#include "core/status.h"

namespace kiln {

struct EngineOptions;

// A hash of the model `options` load: of the source files' own hashes (as
// a compiled artifact records them), or for generated weights of the preset
// or config, seed and dtype that generate them; and of the precision.
Expected<std::string> ModelIdentityHash(const EngineOptions& options);

}  // namespace kiln
