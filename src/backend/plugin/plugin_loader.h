// Loading backend plugins: shared libraries that export
// kiln_backend_plugin_entry (include/kiln/kiln_backend.h). A file that is
// not a library, a plugin of another ABI version, one without the entry
// point, a backend whose name is taken, whose struct is too small or whose
// support list names unknown ops is refused with a message naming the file
// and the problem; nothing of it is registered.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

class Backend;

// Loads the library at `path` and returns the backends it registered.
// `taken(name)` says whether a backend name is already in use.
Expected<std::vector<std::unique_ptr<Backend>>> LoadBackendPlugin(const std::string& path,
                                                                  const std::function<bool(const std::string&)>& taken);

// The plugin files of a search path (directories, colon-separated): every
// libkiln_backend_*.so in each, in name order. Missing directories are
// skipped.
std::vector<std::string> PluginFilesIn(const std::string& search_path);

}  // namespace kiln
