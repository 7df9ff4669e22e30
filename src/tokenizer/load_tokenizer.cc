// Finding and loading a model's tokenizer files.
#include <filesystem>

#include "core/mapped_file.h"
#include "format/gguf.h"
#include "tokenizer/bpe_vocab_files.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/tokenizer_spec.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

bool IsFile(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Adds the folder's configuration.
Expected<TokenizerSpec> Finish(TokenizerSpec spec, const TokenizerConfig& config) {
  KILN_RETURN_IF_ERROR(ApplyTokenizerConfig(config, spec));
  ApplyDefaultSpecialIds(config, spec);
  return spec;
}

Expected<TokenizerSpec> LoadJsonFile(const fs::path& file, const TokenizerConfig& config) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file.string()));
  KILN_ASSIGN_OR_RETURN(TokenizerSpec spec, ParseHfTokenizerJson(text, file.string()));
  return Finish(std::move(spec), config);
}

Expected<TokenizerSpec> LoadModelFile(const fs::path& file, const TokenizerConfig& config) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(file.string()));
  std::string_view bytes(reinterpret_cast<const char*>(mapped->data()), mapped->size());
  KILN_ASSIGN_OR_RETURN(TokenizerSpec spec, ParseSentencePieceModel(bytes, file.string()));
  return Finish(std::move(spec), config);
}

Expected<TokenizerSpec> LoadVocabPair(const fs::path& vocab, const fs::path& merges, const TokenizerConfig& config) {
  if (!IsFile(merges)) return NotFound("{}: no {} beside it", vocab.string(), merges.filename().string());
  KILN_ASSIGN_OR_RETURN(TokenizerSpec spec,
                        ReadBpeVocabFiles(vocab.string(), merges.string(), DetectBpeFamily(config)));
  return Finish(std::move(spec), config);
}

Expected<TokenizerSpec> LoadFromFolder(const fs::path& dir) {
  KILN_ASSIGN_OR_RETURN(TokenizerConfig config, ReadTokenizerConfig(dir.string()));
  if (IsFile(dir / "tokenizer.json")) return LoadJsonFile(dir / "tokenizer.json", config);
  if (IsFile(dir / "tokenizer.model")) return LoadModelFile(dir / "tokenizer.model", config);
  if (IsFile(dir / "vocab.json")) return LoadVocabPair(dir / "vocab.json", dir / "merges.txt", config);
  if (IsFile(dir / "encoder.json")) return LoadVocabPair(dir / "encoder.json", dir / "vocab.bpe", config);
  return NotFound(
      "{}: no tokenizer files (tokenizer.json, tokenizer.model, vocab.json + merges.txt or encoder.json + "
      "vocab.bpe)",
      dir.string());
}

}  // namespace

Expected<TokenizerSpec> LoadTokenizerSpec(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) return LoadFromFolder(p);
  if (!IsFile(p)) return NotFound("{}: no such file or folder", path);

  std::string name = p.filename().string();
  if (EndsWith(name, ".gguf")) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
    return TokenizerSpecFromGguf(*gguf);
  }
  // A single tokenizer file picks that file over the folder's preference;
  // the configuration still comes from its folder.
  KILN_ASSIGN_OR_RETURN(TokenizerConfig config, ReadTokenizerConfig(p.parent_path().string()));
  if (name == "vocab.json") return LoadVocabPair(p, p.parent_path() / "merges.txt", config);
  if (name == "encoder.json") return LoadVocabPair(p, p.parent_path() / "vocab.bpe", config);
  if (EndsWith(name, ".json")) return LoadJsonFile(p, config);
  if (EndsWith(name, ".model")) return LoadModelFile(p, config);
  return Unsupported("{}: not a tokenizer file kiln knows (.json, .model, .gguf)", path);
}

Expected<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(TokenizerSpec spec, LoadTokenizerSpec(path));
  return Tokenizer::Create(std::move(spec));
}

Expected<std::unique_ptr<Tokenizer>> LoadTokenizerFromJson(std::string_view json_text,
                                                           const std::string& name) {
  KILN_ASSIGN_OR_RETURN(TokenizerSpec spec, ParseHfTokenizerJson(json_text, name));
  ApplyDefaultSpecialIds(TokenizerConfig{}, spec);
  return Tokenizer::Create(std::move(spec));
}

}  // namespace kiln
