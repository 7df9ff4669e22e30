// Loading the plugins named on the command line.
#include "cli/backend_plugin_flag.h"

#include <fmt/format.h>

#include "backend/backend.h"

namespace kiln::cli {

void AddBackendPluginFlag(CLI::App* cmd, std::vector<std::string>* paths, const std::string& group) {
  auto* opt = cmd->add_option("--backend-plugin", *paths,
                              "A backend plugin (a shared library, include/kiln/kiln_backend.h) to load; "
                              "repeatable. KILN_BACKEND_PATH lists directories loaded at start-up");
  opt->take_all()->allow_extra_args(false);
  if (!group.empty()) opt->group(group);
}

Status LoadBackendPlugins(const std::vector<std::string>& paths) {
  BackendRegistry& registry = BackendRegistry::Get();
  static bool warned = false;
  if (!warned) {
    warned = true;
    for (const std::string& e : registry.startup_errors()) fmt::print(stderr, "kiln: warning: {}\n", e);
  }
  for (const std::string& p : paths) KILN_RETURN_IF_ERROR(registry.LoadPlugin(p).WithContext("--backend-plugin"));
  return Status::Ok();
}

}  // namespace kiln::cli
