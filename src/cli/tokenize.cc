// `kiln tokenize MODEL TEXT...`: the token ids and pieces of texts.
#include <fmt/format.h>

#include "cli/commands.h"
#include "core/mapped_file.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace kiln::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::vector<std::string> texts;
  std::string file;
  bool ids_only = false;
  bool no_special = false;
  bool no_parse_special = false;
};

// A piece as a quoted string a terminal shows faithfully: control
// characters, quotes, backslashes and bytes that are not UTF-8 are escaped.
std::string Quote(std::string_view piece) {
  std::string out = "\"";
  size_t i = 0;
  while (i < piece.size()) {
    auto c = static_cast<unsigned char>(piece[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      // Copy a whole well-formed character, or escape the stray byte.
      char32_t cp;
      size_t len = DecodeUtf8At(piece, i, &cp);
      if (cp != kInvalidCodePoint) {
        out.append(piece.substr(i, len));
        i += len;
        continue;
      }
      out += fmt::format("\\x{:02x}", c);
    }
    ++i;
  }
  return out + "\"";
}

int Run(const TokenizeOptions& options) {
  std::vector<std::string> texts = options.texts;
  if (!options.file.empty()) {
    auto contents = ReadFileToString(options.file);
    if (!contents.ok()) {
      fmt::print(stderr, "kiln tokenize: {}\n", contents.status().ToString());
      return 1;
    }
    texts.push_back(std::move(contents).value());
  }
  if (texts.empty()) {
    fmt::print(stderr, "kiln tokenize: give a TEXT or --file\n");
    return 2;
  }
  auto tokenizer = LoadTokenizer(options.model);
  if (!tokenizer.ok()) {
    fmt::print(stderr, "kiln tokenize: {}\n", tokenizer.status().ToString());
    return 1;
  }
  const Tokenizer& tok = **tokenizer;
  if (!options.ids_only)
    fmt::print("{} tokenizer, {} ids ({})\n", tok.type(), tok.vocab_size(), tok.source());
  for (const std::string& text : texts) {
    std::vector<int32_t> ids = tok.Encode(text, !options.no_special, !options.no_parse_special);
    // One line of ids per text, so that scripts can tokenize many at once.
    if (options.ids_only) {
      fmt::print("{}\n", fmt::join(ids, " "));
      continue;
    }
    for (int32_t id : ids) {
      fmt::print("{:>8}  {}{}\n", id, Quote(tok.TokenPiece(id)), tok.IsSpecial(id) ? "  (special)" : "");
    }
    fmt::print("{} tokens\n", ids.size());
  }
  return 0;
}

}  // namespace

void RegisterTokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids and pieces of a text");
  auto options = std::make_shared<TokenizeOptions>();
  cmd->add_option("model", options->model, "A Hugging Face folder, a tokenizer file or a .gguf file")
      ->required();
  cmd->add_option("text", options->texts, "The texts to tokenize (each on its own)");
  cmd->add_option("--file", options->file, "Tokenize the contents of this file instead of TEXT");
  cmd->add_flag("--ids-only", options->ids_only, "Print only the ids, on one line");
  cmd->add_flag("--no-special", options->no_special, "Do not add BOS/EOS tokens");
  cmd->add_flag("--no-parse-special", options->no_parse_special,
                "Treat special-token text such as <|im_end|> as plain text");
  cmd->callback([options]() { SetExitCode(Run(*options)); });
}

}  // namespace kiln::cli
