// Text normalization applied before pre-tokenization: Unicode normal forms
// (utf8proc), SentencePiece's space handling and simple rewrites, run in order.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace kiln {

class Normalizer {
 public:
  enum class Form { kNfc, kNfd, kNfkc, kNfkd };

  // Appends a step. The steps run in the order they were added.
  void AddUnicodeForm(Form form);
  // Prepends `prefix` to non-empty text (Hugging Face "Prepend").
  void AddPrepend(std::string prefix);
  // Replaces every occurrence of `from` (a non-empty literal) with `to`.
  void AddReplace(std::string from, std::string to);
  // Replaces every match of `pattern` with `to`.
  void AddReplaceRegex(Regex pattern, std::string to);
  // Lowercases letters (simple one-to-one Unicode mapping).
  void AddLowercase();
  // SentencePiece's remove_extra_whitespaces: drops leading and trailing
  // spaces and folds runs of spaces into one.
  void AddCollapseSpaces();

  bool empty() const { return steps_.empty(); }

  // The normalized text. Malformed UTF-8 is kept byte for byte: normal forms
  // apply to the well-formed runs between malformed bytes, so a byte-level
  // tokenizer still encodes (and decodes back) every input byte.
  std::string Apply(std::string_view text) const;

  // The steps as added (read by the compiled tokenizer's writer, which
  // stores them and adds them again on loading).
  enum class Kind { kUnicodeForm, kPrepend, kReplace, kReplaceRegex, kLowercase, kCollapseSpaces };
  struct Step {
    Kind kind;
    Form form = Form::kNfc;
    std::string from, to;  // kPrepend: the prefix is `to`
    std::shared_ptr<const Regex> regex;
  };
  const std::vector<Step>& steps() const { return steps_; }

 private:
  std::vector<Step> steps_;
};

}  // namespace kiln
