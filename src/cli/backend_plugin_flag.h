// --backend-plugin PATH (repeatable): backend plugins to load before the
// backend is looked up. Taken by every command that compiles a model and by
// `kiln backends`.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/status.h"

namespace kiln::cli {

void AddBackendPluginFlag(CLI::App* cmd, std::vector<std::string>* paths, const std::string& group = "");

// Loads each plugin (errors name the file and the problem); first prints,
// as warnings, the plugins of KILN_BACKEND_PATH that were refused.
Status LoadBackendPlugins(const std::vector<std::string>& paths);

}  // namespace kiln::cli
