// vocab.json + merges.txt and encoder.json + vocab.bpe.
#include "tokenizer/bpe_vocab_files.h"

#include "core/json_input.h"
#include "core/mapped_file.h"

namespace kiln {
namespace {

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

Status ReadMergeLines(std::string_view text, const std::string& path, TokenizerSpec& spec) {
  size_t pos = 0;
  size_t line_number = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_number == 1 && line.substr(0, 8) == "#version") continue;
    if (line.empty()) continue;
    size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      return Corrupt("{}: line {}: \"{}\" should be two pieces separated by one space", path, line_number,
                     line);
    }
    spec.merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
  }
  return Status::Ok();
}

}  // namespace

std::string_view BpeFamilyName(BpeFamily family) {
  switch (family) {
    case BpeFamily::kGpt2: return "GPT-2";
    case BpeFamily::kQwen2: return "Qwen2";
    case BpeFamily::kLlama3: return "Llama 3";
  }
  return "?";
}

BpeFamily DetectBpeFamily(const TokenizerConfig& config) {
  if (Contains(config.tokenizer_class, "Qwen2")) return BpeFamily::kQwen2;
  if (Contains(config.tokenizer_class, "GPT2")) return BpeFamily::kGpt2;
  const std::string& type = config.model_type;
  if (type.rfind("qwen", 0) == 0) return BpeFamily::kQwen2;
  if (type == "llama") return BpeFamily::kLlama3;
  if (type == "gpt2") return BpeFamily::kGpt2;
  for (const AddedToken& token : config.added_tokens) {
    if (token.content == "<|begin_of_text|>") return BpeFamily::kLlama3;
    if (token.content == "<|im_start|>") return BpeFamily::kQwen2;
  }
  return BpeFamily::kGpt2;
}

Status SetBpeFamilyPipeline(BpeFamily family, TokenizerSpec& spec) {
  std::string_view pattern = kGpt2SplitPattern;
  if (family == BpeFamily::kQwen2) {
    pattern = kQwen2SplitPattern;
    spec.normalizer.AddUnicodeForm(Normalizer::Form::kNfc);
  } else if (family == BpeFamily::kLlama3) {
    pattern = kLlama3SplitPattern;
    spec.ignore_merges = true;
    spec.add_bos = true;  // Llama 3's tokenizer.json template adds <|begin_of_text|>
  }
  KILN_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(pattern));
  spec.pre_tokenizer.AddSplit(std::move(regex), SplitBehavior::kIsolated, false);
  return Status::Ok();
}

Expected<TokenizerSpec> ReadBpeVocabFiles(const std::string& vocab_path, const std::string& merges_path,
                                          BpeFamily family) {
  TokenizerSpec spec;
  spec.source = vocab_path;
  spec.flavor = BpeFlavor::kByteLevel;

  KILN_ASSIGN_OR_RETURN(nlohmann::json vocab, ReadJsonFile(vocab_path));
  if (!vocab.is_object()) return Corrupt("{}: should hold a JSON object of piece -> id", vocab_path);
  for (const auto& [piece, value] : vocab.items()) {
    KILN_ASSIGN_OR_RETURN(int32_t id, JsonInt(vocab, piece, -1, vocab_path));
    if (id < 0 || id >= kMaxTokenizerVocab) {
      return Corrupt("{}: \"{}\" has id {} (0 to {} allowed)", vocab_path, piece, id, kMaxTokenizerVocab - 1);
    }
    if (piece.empty()) return Corrupt("{}: id {} has an empty piece", vocab_path, id);
    if (static_cast<size_t>(id) >= spec.pieces.size()) spec.pieces.resize(static_cast<size_t>(id) + 1);
    if (!spec.pieces[id].empty()) {
      return Corrupt("{}: id {} is given to both \"{}\" and \"{}\"", vocab_path, id, spec.pieces[id], piece);
    }
    spec.pieces[id] = piece;
  }
  spec.kinds.assign(spec.pieces.size(), TokenKind::kNormal);
  for (size_t id = 0; id < spec.pieces.size(); ++id) {
    if (spec.pieces[id].empty()) spec.kinds[id] = TokenKind::kUnused;
  }

  KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> merges, MappedFile::Open(merges_path));
  std::string_view merges_text(reinterpret_cast<const char*>(merges->data()), merges->size());
  KILN_RETURN_IF_ERROR(ReadMergeLines(merges_text, merges_path, spec));

  KILN_RETURN_IF_ERROR(SetBpeFamilyPipeline(family, spec));
  // GPT-2's end-of-text token lives in the vocabulary itself.
  for (size_t id = 0; id < spec.pieces.size(); ++id) {
    if (spec.pieces[id] == "<|endoftext|>") {
      AddedToken token;
      token.id = static_cast<int32_t>(id);
      token.content = spec.pieces[id];
      token.special = true;
      spec.added_tokens.push_back(token);
    }
  }
  return spec;
}

}  // namespace kiln
