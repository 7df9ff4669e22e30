// The `kiln` command: one subcommand per file in this folder.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "cli/openmp_policy.h"

int main(int argc, char** argv) {
  kiln::cli::EnsureShortOpenMpSpin(argc, argv);
  CLI::App app{"kiln: compile and serve large language models on the hardware you have"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  kiln::cli::RegisterAll(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    // Output that cannot be written (a closed or full stdout or stderr)
    // surfaces as an exception from fmt: end with an error, not an abort.
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  }
  return kiln::cli::ExitCode();
}
