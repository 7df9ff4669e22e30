// Compiled artifacts (.kiln files, `kiln compile`): a model compiled once
// for a backend and options, with its weights already packed in the
// kernels' layouts, its tokenizer, generation defaults, the compile plan
// and provenance, loaded wherever a model path is taken without packing
// again. The container is format/artifact_file.h; this is what goes in it.
#pragma once

#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/engine_options.h"
#include "engine/model_loader.h"

namespace kiln {

class ArtifactFile;

// What compiling wrote, summed up for `kiln compile` to print.
struct ArtifactSummary {
  int64_t tensors = 0;
  int64_t packed = 0;           // matrices stored in their packed layout
  int64_t bytes = 0;            // the file's size
  double compile_seconds = 0;   // compiling alone (the four stages)
};

// Loads and compiles the model `options` names, as an engine would, and
// writes it to `output`. Errors when something cannot be stored (W8A8,
// a backend whose packed weights cannot be stored) or written.
Expected<ArtifactSummary> CompileArtifact(const EngineOptions& options, const std::string& output);

// The compile options as recorded in an artifact, by the flag that sets
// each: "--backend", "--precision", "--dtype", "--kv-cache-dtype",
// "--max-num-batched-tokens", "--max-model-len", "--max-num-seqs",
// "--block-size".
const std::vector<std::string>& ArtifactCompileFlags();

// The hashes of the files a model is read from (a folder's safetensors,
// JSON and tokenizer files, or the .gguf), as an artifact records them:
// [{"name", "bytes", "xxh64"}].
Expected<nlohmann::json> ArtifactSourceFiles(const EngineOptions& options);

// An opened artifact with its parsed metadata.
struct OpenedArtifact {
  std::shared_ptr<const ArtifactFile> file;
  nlohmann::json metadata;
  std::string note;  // set when it was compiled for a lower ISA than this CPU's
};

// Opens `path` and parses its metadata (checksums of header, table,
// metadata, plan and tokenizer verified), then checks that this build and
// machine can run it: the kernel-layout version, the ISA (a file compiled
// for a higher ISA than this CPU's is refused; a lower one runs, with a
// note that LoadArtifact prints on stderr) and the backend. Errors say
// which and how to rebuild. With `recompile_if_stale`, a stale file (another
// kernel-layout version, an ISA this CPU lacks) is rebuilt first by
// RecompileStaleArtifact, and the rebuilt file opened.
Expected<OpenedArtifact> OpenArtifact(const std::string& path, bool recompile_if_stale = false);

// Rebuilds the stale artifact at `path` from the source its metadata
// records (the model path, or the preset and seed of generated weights)
// with the compile options it records, for this build and CPU, and
// replaces the file (as CompileArtifact writes: beside it, then renamed
// over it). Returns a line saying what was rebuilt and why,
// and whether the source changed since. Errors when the file is not stale,
// or its source is gone.
Expected<std::string> RecompileStaleArtifact(const std::string& path);

// Makes `options` the options `artifact` was compiled with: a flag in
// `given` (by name, as ArtifactCompileFlags spells them) whose value
// differs is an error naming it; the others take the artifact's values.
// With `given` null, an option that differs from EngineOptions' default
// counts as given (the C API, which sees no flags).
Status ApplyArtifactOptions(const nlohmann::json& metadata, const std::set<std::string>* given,
                            EngineOptions* options);

// LoadModel for an artifact: weights (packed forms adopted at compile
// time), tokenizer (options.tokenizer instead when set) and generation
// config. Callers make the options the artifact's first
// (ApplyArtifactOptions); an option away from its default that disagrees
// is an error here too. options.verify_weights checks every weight
// section's checksum first.
Expected<LoadedModel> LoadArtifact(const EngineOptions& options, TokenizerLoad when = TokenizerLoad::kNow);

}  // namespace kiln
