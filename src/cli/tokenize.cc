// `kiln tokenize MODEL TEXT`: ids and pieces of a text.
#include <fmt/format.h>

#include "cli/commands.h"

namespace kiln::cli {

void RegisterTokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids and pieces of a text");
  auto model = std::make_shared<std::string>();
  auto text = std::make_shared<std::string>();
  cmd->add_option("model", *model, "A Hugging Face folder or a .gguf file")->required();
  cmd->add_option("text", *text, "The text to tokenize")->required();
  cmd->callback([model]() {
    fmt::print(stderr, "kiln tokenize: not implemented yet ({})\n", *model);
    SetExitCode(1);
  });
}

}  // namespace kiln::cli
