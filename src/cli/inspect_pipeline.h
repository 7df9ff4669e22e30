// `kiln inspect OUT.kiln [--plan [--nodes]] [--verify]` for a compiled
// pipeline: its stages in run order with what each reads, its models with
// their provenance, and with --plan the memory across stages and each
// model's stored plan.
#pragma once

#include <string>

#include "core/status.h"

namespace kiln::cli {

Status PrintPipelineArtifact(const std::string& path, bool verify, bool plan, bool nodes);

}  // namespace kiln::cli
