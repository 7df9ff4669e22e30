// dlopen, the entry point, and the checks on what a plugin registers.
#include "backend/plugin/plugin_loader.h"

#include <dirent.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "backend/plugin/plugin_backend.h"
#include "kiln/kiln_backend.h"

namespace kiln {
namespace {

void WriteError(char* err, size_t size, const std::string& msg) {
  if (err == nullptr || size == 0) return;
  size_t n = std::min(size - 1, msg.size());
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

// What the entry point registers into, during the call.
struct Registration {
  std::string path;
  const std::function<bool(const std::string&)>* taken = nullptr;
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::string> refusals;
};

int32_t RegisterBackend(void* ctx, const kiln_backend* table, char* err, size_t err_size) {
  auto* r = static_cast<Registration*>(ctx);
  auto refuse = [&](const std::string& msg) {
    r->refusals.push_back(msg);
    WriteError(err, err_size, msg);
    return static_cast<int32_t>(KILN_BACKEND_INVALID_ARGUMENT);
  };
  if (table == nullptr) {
    return refuse(fmt::format("backend plugin {}: register_backend called with NULL", r->path));
  }
  if (table->struct_size >= offsetof(kiln_backend, name) + sizeof(table->name) && table->name != nullptr) {
    const std::string name = table->name;
    bool clash = (*r->taken)(name) || std::any_of(r->backends.begin(), r->backends.end(),
                                                  [&](const auto& b) { return b->name() == name; });
    if (clash) {
      return refuse(
          fmt::format("backend plugin {}: backend name '{}' is already taken by a loaded backend", r->path, name));
    }
  }
  auto backend = PluginBackend::Create(*table, r->path);
  if (!backend.ok()) return refuse(backend.status().message());
  r->backends.push_back(std::move(*backend));
  return KILN_BACKEND_OK;
}

}  // namespace

Expected<std::vector<std::unique_ptr<Backend>>> LoadBackendPlugin(
    const std::string& path, const std::function<bool(const std::string&)>& taken) {
  ::dlerror();
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    return InvalidArgument("backend plugin {}: cannot be loaded as a shared library: {}", path,
                           why != nullptr ? why : "unknown error");
  }
  void* sym = ::dlsym(lib, KILN_BACKEND_ENTRY_SYMBOL);
  if (sym == nullptr) {
    ::dlclose(lib);
    return InvalidArgument("backend plugin {}: missing the symbol {} (not a kiln backend plugin)", path,
                           KILN_BACKEND_ENTRY_SYMBOL);
  }
  auto entry = reinterpret_cast<kiln_backend_plugin_entry_fn>(sym);
  Registration reg;
  reg.path = path;
  reg.taken = &taken;
  kiln_plugin_host host{};
  host.struct_size = sizeof(kiln_plugin_host);
  host.abi_version = KILN_BACKEND_ABI_VERSION;
  host.ctx = &reg;
  host.register_backend = &RegisterBackend;
  char err[kPluginErrorBytes] = {0};
  int32_t rc = entry(&host, err, kPluginErrorBytes);
  err[kPluginErrorBytes - 1] = '\0';
  if (!reg.refusals.empty() || rc != KILN_BACKEND_OK) {
    std::string why = !reg.refusals.empty() ? reg.refusals.front()
                                            : fmt::format("backend plugin {}: its entry point failed: {}", path,
                                                          err[0] != '\0' ? err : "no message");
    // The backends it did register go (their plugin's state with them); the
    // library stays mapped, since code of it may still be referenced.
    reg.backends.clear();
    return InvalidArgument("{}", why);
  }
  if (reg.backends.empty()) return InvalidArgument("backend plugin {}: registered no backend", path);
  return std::move(reg.backends);
}

std::vector<std::string> PluginFilesIn(const std::string& search_path) {
  std::vector<std::string> files;
  size_t start = 0;
  while (start <= search_path.size()) {
    size_t end = search_path.find(':', start);
    if (end == std::string::npos) end = search_path.size();
    std::string dir = search_path.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> here;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      const std::string prefix = "libkiln_backend_", suffix = ".so";
      if (name.size() > prefix.size() + suffix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        here.push_back(dir + "/" + name);
      }
    }
    ::closedir(d);
    std::sort(here.begin(), here.end());
    files.insert(files.end(), here.begin(), here.end());
  }
  return files;
}

}  // namespace kiln
