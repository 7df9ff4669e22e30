// The subcommand list.
#include "cli/commands.h"

namespace kiln::cli {
namespace {
int g_exit_code = 0;
}  // namespace

void SetExitCode(int code) { g_exit_code = code; }
int ExitCode() { return g_exit_code; }

void RegisterAll(CLI::App& app) {
  RegisterBackends(app);
  RegisterBench(app);
  RegisterCompile(app);
  RegisterDetect(app);
  RegisterDiff(app);
  RegisterEval(app);
  RegisterGenerate(app);
  RegisterInspect(app);
  RegisterOcr(app);
  RegisterProfile(app);
  RegisterQuantize(app);
  RegisterRouter(app);
  RegisterRun(app);
  RegisterServe(app);
  RegisterTokenize(app);
}

}  // namespace kiln::cli
