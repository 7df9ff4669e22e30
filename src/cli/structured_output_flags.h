// `kiln generate`'s structured-output flags: --json-schema FILE,
// --grammar FILE (GBNF, llama.cpp's format) and --json-object, filling the
// SamplingParams fields the engine enforces token by token.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "engine/sampling_params.h"

namespace kiln::cli {

struct StructuredOutputFlags {
  std::string json_schema_file;
  std::string grammar_file;
  bool json_object = false;
};

// Adds the three flags (mutually exclusive) to `cmd`, writing into `flags`
// (which must outlive parsing).
void AddStructuredOutputFlags(CLI::App* cmd, StructuredOutputFlags* flags);

// Reads the flag's file into `params` and checks it before any model is
// loaded: an unreadable file, a schema kiln cannot enforce or a grammar
// that does not parse is an error naming the flag and the file.
Status ApplyStructuredOutputFlags(const StructuredOutputFlags& flags, SamplingParams* params);

}  // namespace kiln::cli
