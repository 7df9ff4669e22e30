// The engine options shared by every command that runs a model (generate,
// serve, bench, eval), declared once as command-line flags.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/precision.h"
#include "core/status.h"
#include "engine/engine_options.h"

namespace kiln::cli {

// Flag values as typed; Resolve() turns them into EngineOptions.
struct EngineFlags {
  EngineOptions options;
  std::string dummy_dtype = "bf16";
  std::string precision;  // "" (not given): mixed, or fp32 for ONNX graphs
  std::string kv_cache_memory;
  std::string kv_cache_dtype = "f32";
  std::vector<std::string> backend_plugins;
  CLI::App* command = nullptr;  // which flags were given (AddEngineFlags sets it)

  // Checks and converts the typed values, after loading the backend
  // plugins (so that --backend can name theirs); errors name the flag. For
  // a compiled artifact (-m X.kiln), the compile options are the file's: a
  // flag given with another value is an error naming it. With
  // --tensor-parallel-size above 1 it joins the MPI job (src/parallel): a
  // rank other than 0 follows rank 0's forward passes and exits here, never
  // returning.
  Expected<EngineOptions> Resolve() const;
};

// A --precision flag's value; "" (the flag not given) is `fallback`: mixed
// for the LLM path, fp32 for ONNX graphs.
Expected<Precision> ParsePrecisionFlag(const std::string& flag, Precision fallback);

// Parses a KV cache dtype as the flags take it: f32, f16, bf16 or int8
// (also their DTypeFromName spellings, such as fp16 or i8).
Expected<DType> ParseKvCacheDType(const std::string& name);

// Adds -m/--model, --load-format, --preset, --dtype, --tokenizer, --backend,
// --backend-plugin,
// --precision, --threads, --kv-cache-memory, --kv-cache-dtype, --block-size,
// --max-num-seqs, --max-num-batched-tokens, --max-prefill-chunk,
// --max-model-len, --enable-prefix-caching/--no-prefix-caching, the
// speculative decoding flags (--spec-method, --spec-tokens, --spec-ngram-min,
// --spec-ngram-max) and the W8A8 flags (--w8a8, --calibration,
// --calibration-percentile, --w8a8-clips) and model parallelism's
// (--tensor-parallel-size, --pipeline-parallel-size, --collective-timeout)
// to `cmd`,
// writing into `flags` (which must outlive parsing).
void AddEngineFlags(CLI::App* cmd, EngineFlags* flags);

}  // namespace kiln::cli
