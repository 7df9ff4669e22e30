// What the tokenizer fuzz targets do with a tokenizer that loaded: encode
// and decode texts that reach special tokens, malformed UTF-8 and long
// words, and check the invariants (ids in range, well-formed text,
// streaming equal to decoding). A broken invariant traps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace kiln::fuzzing {

inline void Check(bool ok) {
  if (!ok) __builtin_trap();
}

inline void ExerciseText(const Tokenizer& tok, std::string_view text) {
  for (bool parse_special : {true, false}) {
    std::vector<int32_t> ids = tok.Encode(text, true, parse_special);
    for (int32_t id : ids) Check(id >= 0 && id < tok.vocab_size());
    for (bool skip : {true, false}) {
      std::string decoded = tok.Decode(ids, skip);
      Check(IsValidUtf8(decoded));
      StreamingDecoder stream(tok, skip);
      std::string streamed;
      for (int32_t id : ids) streamed += stream.Add(id);
      streamed += stream.Flush();
      Check(streamed == decoded);
    }
  }
}

inline void ExerciseTokenizer(const Tokenizer& tok) {
  ExerciseText(tok, "Hello world! <|im_start|>user\n1234 caf\xc3\xa9 e\xcc\x81 <s></s>\xe6\x97\n\t  ");
  ExerciseText(tok, std::string("\xff\xfe\x80 ") + std::string(300, 'a'));
  ExerciseText(tok, "");
  // Ids beyond the vocabulary and negative ones decode to nothing.
  std::vector<int32_t> odd = {-1, 0, tok.vocab_size(), tok.vocab_size() - 1, 1};
  Check(IsValidUtf8(tok.Decode(odd, false)));
}

}  // namespace kiln::fuzzing
