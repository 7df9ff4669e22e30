// Fuzzes tokenizer.json loading, then encodes and decodes with what loads:
// ids in range, well-formed text, streaming equal to decoding.
#include <cstdint>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = kiln::LoadTokenizerFromJson(json, "fuzz.json");
  if (!tok.ok()) return 0;
  kiln::fuzzing::ExerciseTokenizer(**tok);
  return 0;
}
