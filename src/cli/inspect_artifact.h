// `kiln inspect OUT.kiln`: what a compiled artifact holds and where it came
// from; --plan prints the plan stored when it was compiled.
#pragma once

#include <string>

#include "core/status.h"

namespace kiln::cli {

// Prints the artifact's provenance (kiln and kernel-layout versions,
// backend, ISA and CPU features, source files with their hashes, compile
// options), model, tokenizer and sections. `verify`: checks every
// section's checksum first and says so (an error names the first damaged
// section). `plan`: then prints the stored plan (`nodes`: with one line per
// op) exactly as compiling printed it.
Status PrintArtifact(const std::string& path, bool verify, bool plan, bool nodes);

}  // namespace kiln::cli
