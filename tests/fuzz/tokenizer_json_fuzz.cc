// Fuzzes tokenizer.json loading, then encodes and decodes with what loads:
// ids in range, well-formed text, streaming equal to decoding.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void Exercise(const kiln::Tokenizer& tok, std::string_view text) {
  for (bool parse_special : {true, false}) {
    std::vector<int32_t> ids = tok.Encode(text, true, parse_special);
    for (int32_t id : ids) Check(id >= 0 && id < tok.vocab_size());
    for (bool skip : {true, false}) {
      std::string decoded = tok.Decode(ids, skip);
      Check(kiln::IsValidUtf8(decoded));
      kiln::StreamingDecoder stream(tok, skip);
      std::string streamed;
      for (int32_t id : ids) streamed += stream.Add(id);
      streamed += stream.Flush();
      Check(streamed == decoded);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = kiln::LoadTokenizerFromJson(json, "fuzz.json");
  if (!tok.ok()) return 0;
  Exercise(**tok, "Hello world! <|im_start|>user\n1234 caf\xc3\xa9 e\xcc\x81 <s></s>\xe6\x97\n\t  ");
  Exercise(**tok, std::string("\xff\xfe\x80 ") + std::string(300, 'a'));
  Exercise(**tok, "");
  // Ids beyond the vocabulary and negative ones decode to nothing.
  std::vector<int32_t> odd = {-1, 0, (**tok).vocab_size(), (**tok).vocab_size() - 1, 1};
  Check(kiln::IsValidUtf8((**tok).Decode(odd, false)));
  return 0;
}
