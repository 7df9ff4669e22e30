// `kiln run PIPELINE.json --image IMG --json OUT.json`: loads the
// pipeline's models, checks that the stages' shapes meet them, runs it on
// the image and writes each output stage's results. A stale compiled
// pipeline is rebuilt with `recompile_if_stale`, else refused.
#pragma once

#include <string>

#include "core/status.h"

namespace kiln::cli {

bool IsPipelineFile(const std::string& path);

Status RunPipelineCommand(const std::string& pipeline_path, const std::string& image_path,
                          const std::string& json_path, int threads, bool recompile_if_stale);

}  // namespace kiln::cli
