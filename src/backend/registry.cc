// The process-wide backend registry.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/plugin/plugin_loader.h"

namespace kiln {

BackendRegistry::BackendRegistry() {
  backends_.push_back(std::make_unique<CpuBackend>());
  const char* search_path = std::getenv("KILN_BACKEND_PATH");
  if (search_path == nullptr) return;
  for (const std::string& file : PluginFilesIn(search_path)) {
    Status s = LoadPlugin(file);
    if (!s.ok()) startup_errors_.push_back(fmt::format("KILN_BACKEND_PATH: {}", s.message()));
  }
}

BackendRegistry& BackendRegistry::Get() {
  static BackendRegistry registry;
  return registry;
}

Backend* BackendRegistry::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& b : backends_) {
    if (b->name() == name) return b.get();
  }
  return nullptr;
}

Backend& BackendRegistry::cpu() const {
  std::lock_guard<std::mutex> lock(mu_);
  return *backends_.front();
}

std::vector<Backend*> BackendRegistry::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Backend*> all;
  for (const auto& b : backends_) all.push_back(b.get());
  return all;
}

std::string BackendRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string s;
  for (const auto& b : backends_) s += (s.empty() ? "" : ", ") + b->name();
  return s;
}

Status BackendRegistry::Register(std::unique_ptr<Backend> backend) {
  if (Find(backend->name()) != nullptr) return InvalidArgument("backend name '{}' is already taken", backend->name());
  std::lock_guard<std::mutex> lock(mu_);
  backends_.push_back(std::move(backend));
  return Status::Ok();
}

Status BackendRegistry::LoadPlugin(const std::string& path) {
  char resolved[PATH_MAX];
  std::string canonical = ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::find(plugin_files_.begin(), plugin_files_.end(), canonical) != plugin_files_.end()) return Status::Ok();
  }
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return NotFound("backend plugin {}: no such file", path);
  }
  auto loaded = LoadBackendPlugin(path, [this](const std::string& name) { return Find(name) != nullptr; });
  if (!loaded.ok()) return loaded.status();
  std::lock_guard<std::mutex> lock(mu_);
  plugin_files_.push_back(canonical);
  for (auto& b : *loaded) backends_.push_back(std::move(b));
  return Status::Ok();
}

std::vector<std::string> BackendRegistry::plugin_files() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plugin_files_;
}

std::vector<std::string> BackendRegistry::startup_errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return startup_errors_;
}

}  // namespace kiln
