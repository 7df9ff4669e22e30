// `kiln compile MODEL -o OUT.kiln [engine flags]`: compiles a model once
// into an artifact that -m loads without packing its weights again.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/model_artifact.h"

namespace kiln::cli {

void RegisterCompile(CLI::App& app) {
  struct Args {
    EngineFlags engine;
    std::string output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "compile", "Compile a model into a .kiln artifact: weights packed for the backend, plan, tokenizer, "
                 "generation defaults and provenance; -m OUT.kiln then loads it as it is");
  cmd->add_option("model", a->engine.options.model, "A Hugging Face folder or a .gguf file (or -m)");
  AddEngineFlags(cmd, &a->engine);
  cmd->add_option("-o,--output", a->output, "The artifact to write (OUT.kiln)")->required();
  cmd->callback([a]() {
    // An artifact holds the whole model; the split is made when running it.
    if (a->engine.options.tensor_parallel_size > 1 || a->engine.options.pipeline_parallel_size > 1) {
      fmt::print(stderr, "kiln compile: an artifact holds the whole model; --tensor-parallel-size and "
                         "--pipeline-parallel-size apply when running one (from the model it was compiled from)\n");
      SetExitCode(2);
      return;
    }
    auto options = a->engine.Resolve();
    if (!options.ok()) {
      fmt::print(stderr, "kiln compile: {}\n", options.status().ToString());
      SetExitCode(2);
      return;
    }
    if (options->model.empty() && options->load_format != "dummy") {
      fmt::print(stderr, "kiln compile: no model given (MODEL, -m)\n");
      SetExitCode(2);
      return;
    }
    auto summary = CompileArtifact(*options, a->output);
    if (!summary.ok()) {
      fmt::print(stderr, "kiln compile: {}\n", summary.status().ToString());
      SetExitCode(1);
      return;
    }
    fmt::print("{}: {} tensors, {} matrices in their packed layouts, {:.1f} MiB (compiled in {:.2f} s)\n",
               a->output, summary->tensors, summary->packed, static_cast<double>(summary->bytes) / (1 << 20),
               summary->compile_seconds);
  });
}

}  // namespace kiln::cli
