// Fuzzes the compiled tokenizer an artifact stores: decoding the bytes,
// building the tokenizer they describe, then encoding and decoding with it.
#include <cstdint>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/tokenizer_spec_codec.h"
#include "tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = kiln::DecodeTokenizerSpec({data, size}, "fuzz.kiln");
  if (!spec.ok()) return 0;
  // What decoded encodes back to the same bytes.
  kiln::fuzzing::Check(kiln::EncodeTokenizerSpec(*spec) == std::vector<uint8_t>(data, data + size));
  auto tok = kiln::Tokenizer::Create(std::move(spec).value());
  if (!tok.ok()) return 0;
  kiln::fuzzing::ExerciseTokenizer(**tok);
  return 0;
}
