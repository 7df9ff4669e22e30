// `kiln inspect MODEL`: what a model is and what it needs.
#include <fmt/format.h>

#include "cli/commands.h"

namespace kiln::cli {

void RegisterInspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Print a model's architecture, tensors, tokenizer and memory needs");
  auto model = std::make_shared<std::string>();
  cmd->add_option("model", *model, "A Hugging Face folder or a .gguf file")->required();
  cmd->callback([model]() {
    fmt::print(stderr, "kiln inspect: not implemented yet ({})\n", *model);
    SetExitCode(1);
  });
}

}  // namespace kiln::cli
