// Registration of kiln's subcommands. Each subcommand lives in its own file
// and adds itself to the app in Register<Name>(); its callback runs the
// command and records the exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace kiln::cli {

void RegisterAll(CLI::App& app);

// Called by a subcommand's callback with its result.
void SetExitCode(int code);
int ExitCode();

// Subcommands.
void RegisterBackends(CLI::App& app);
void RegisterBench(CLI::App& app);
void RegisterCompile(CLI::App& app);
void RegisterDetect(CLI::App& app);
void RegisterDiff(CLI::App& app);
void RegisterEval(CLI::App& app);
void RegisterGenerate(CLI::App& app);
void RegisterInspect(CLI::App& app);
void RegisterOcr(CLI::App& app);
void RegisterProfile(CLI::App& app);
void RegisterQuantize(CLI::App& app);
void RegisterRouter(CLI::App& app);
void RegisterRun(CLI::App& app);
void RegisterServe(CLI::App& app);
void RegisterTokenize(CLI::App& app);

}  // namespace kiln::cli
