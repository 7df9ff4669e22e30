// Pre-tokenization: cuts normalized text into the pieces ("pre-tokens") that
// BPE encodes one at a time, with the Hugging Face steps kiln supports.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace kiln {

// The split patterns of the byte-level BPE families.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// What a split does with the text its pattern matches (Hugging Face's
// SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// When Metaspace puts the replacement character in front of a piece.
enum class PrependScheme { kAlways, kFirst, kNever };

class PreTokenizer {
 public:
  // Appends a step; steps refine each other's pieces in the order added.
  // Splits on a pattern; with `invert`, the matches are the pieces kept and
  // the text between them is the delimiter.
  void AddSplit(Regex pattern, SplitBehavior behavior, bool invert);
  // Hugging Face ByteLevel: optionally a leading space, optionally GPT-2's
  // split. (The byte-to-character mapping itself is the BPE model's job.)
  Status AddByteLevel(bool add_prefix_space, bool use_regex);
  // Hugging Face Metaspace: spaces become `replacement`, which is also put
  // in front per `scheme`; with `split`, each replacement starts a piece.
  void AddMetaspace(std::string replacement, PrependScheme scheme, bool split);

  bool empty() const { return steps_.empty(); }

  // Appends the pre-tokens of `text` to `out`. `at_text_start` says that
  // `text` begins the caller's input (no special token before it).
  void Apply(std::string_view text, bool at_text_start, std::vector<std::string>& out) const;

  // The steps as added (read by the compiled tokenizer's writer).
  enum class Kind { kSplit, kByteLevelPrefix, kMetaspace };
  struct Step {
    Kind kind;
    std::shared_ptr<const Regex> regex;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    std::string replacement;
    PrependScheme scheme = PrependScheme::kAlways;
    bool split = false;
  };
  const std::vector<Step>& steps() const { return steps_; }

 private:
  std::vector<Step> steps_;
};

}  // namespace kiln
