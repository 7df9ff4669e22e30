// The process-wide backend registry.
#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/test/test_backend.h"

namespace kiln {

BackendRegistry::BackendRegistry() {
  backends_.push_back(std::make_unique<CpuBackend>());
  backends_.push_back(std::make_unique<TestBackend>(TestBackend::DefaultSupport(), "testaccel"));
  backends_.push_back(std::make_unique<TestBackend>(TestBackend::MatmulSupport(), "testaccel-mm"));
}

BackendRegistry& BackendRegistry::Get() {
  static BackendRegistry registry;
  return registry;
}

Backend* BackendRegistry::Find(const std::string& name) const {
  for (const auto& b : backends_) {
    if (b->name() == name) return b.get();
  }
  return nullptr;
}

Backend& BackendRegistry::cpu() const { return *backends_.front(); }

std::vector<Backend*> BackendRegistry::All() const {
  std::vector<Backend*> all;
  for (const auto& b : backends_) all.push_back(b.get());
  return all;
}

std::string BackendRegistry::Names() const {
  std::string s;
  for (const auto& b : backends_) s += (s.empty() ? "" : ", ") + b->name();
  return s;
}

void BackendRegistry::Register(std::unique_ptr<Backend> backend) { backends_.push_back(std::move(backend)); }

}  // namespace kiln
