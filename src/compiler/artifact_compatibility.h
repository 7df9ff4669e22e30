// What every compiled artifact (an LLM's or an ONNX graph's) records about
// the build and machine it was compiled on, and the checks that a file can
// run here: the kernel-layout version, the ISA (a higher one than this
// CPU's is refused, a lower one runs, with a note) and the backend.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kiln {

// kiln_version, format_version, kernel_layout_version, backend, isa, cpu
// {model, features} and created, for an artifact's metadata.
nlohmann::json ArtifactProvenance(const std::string& backend, const std::string& isa);

// Why this build and CPU cannot run the kernels' stored layouts (another
// kernel-layout version, an ISA this CPU lacks), or "" when they can.
// A stale file can be rebuilt from its source.
Expected<std::string> ArtifactStaleReason(const std::string& path, const nlohmann::json& meta);

// Refuses a stale file or one for a backend not loaded here, saying why and
// `rebuild_hint` ("rebuild it on this machine: kiln compile ..."); sets
// `note` when it was compiled for a lower ISA than this CPU's.
Status CheckArtifactRuns(const std::string& path, const nlohmann::json& meta, const std::string& rebuild_hint,
                         std::string* note);

}  // namespace kiln
