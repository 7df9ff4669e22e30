// `kiln backends`: the backends of this build and their support lists.
#include <fmt/format.h>

#include "backend/backend.h"
#include "cli/backend_plugin_flag.h"
#include "cli/commands.h"

namespace kiln::cli {

void RegisterBackends(CLI::App& app) {
  auto* cmd = app.add_subcommand("backends", "List the backends and what each supports (op x dtype x layout x limits)");
  auto name = std::make_shared<std::string>();
  auto plugins = std::make_shared<std::vector<std::string>>();
  cmd->add_option("name", *name, "Show only this backend");
  AddBackendPluginFlag(cmd, plugins.get());
  cmd->callback([name, plugins]() {
    BackendRegistry& registry = BackendRegistry::Get();
    Status loaded = LoadBackendPlugins(*plugins);
    if (!loaded.ok()) {
      fmt::print(stderr, "kiln backends: {}\n", loaded.ToString());
      SetExitCode(2);
      return;
    }
    bool found = false;
    for (Backend* b : registry.All()) {
      if (!name->empty() && b->name() != *name) continue;
      found = true;
      fmt::print("{}: {}\n  memory domain: {}\n", b->name(), b->description(), b->domain().name());
      fmt::print("{}\n", b->support().ToString());
    }
    if (!found) {
      fmt::print(stderr, "kiln backends: no backend '{}'; available: {}\n", *name, registry.Names());
      SetExitCode(2);
    }
  });
}

}  // namespace kiln::cli
