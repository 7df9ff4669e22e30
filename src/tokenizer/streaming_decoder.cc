// Incremental decoding: bytes wait until they form whole characters.
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special, bool at_text_start)
    : tokenizer_(tokenizer),
      skip_special_(skip_special),
      at_text_start_(at_text_start),
      at_start_(at_text_start) {}

std::string StreamingDecoder::Add(int32_t id) {
  tokenizer_.AppendTokenBytes(id, skip_special_, &at_start_, pending_);
  // Everything up to an unfinished trailing sequence is final: a malformed
  // byte before it can never become part of a character.
  size_t complete = CompleteUtf8Prefix(pending_);
  std::string text;
  if (complete == 0) return text;
  AppendUtf8Lossy(std::string_view(pending_).substr(0, complete), text);
  pending_.erase(0, complete);
  return text;
}

std::string StreamingDecoder::Flush() {
  std::string text;
  AppendUtf8Lossy(pending_, text);
  pending_.clear();
  at_start_ = at_text_start_;
  return text;
}

}  // namespace kiln
