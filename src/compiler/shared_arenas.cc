// Growing a shared arena: a new buffer of the larger size replaces the old
// one, whose contents need not survive (an arena holds a run's
// intermediates only).
#include "compiler/shared_arenas.h"

#include <algorithm>
#include <vector>

#include "compiler/layout.h"

namespace kiln {

Status SharedArenas::Reserve(const std::string& user, const std::map<int32_t, size_t>& bytes,
                             const BackendRegistry& backends) {
  size_t need = 0;
  for (const auto& [domain, b] : bytes) need += b;
  size_t& recorded = needs_[user];
  recorded = std::max(recorded, need);
  for (const auto& [domain, b] : bytes) {
    auto it = buffers_.find(domain);
    if (it != buffers_.end() && it->second.size() >= b) continue;
    if (it != buffers_.end()) buffers_.erase(it);  // freed before the larger one is taken
    std::vector<DomainBuffer> made;
    KILN_RETURN_IF_ERROR(AllocateArenas({{domain, b}}, backends, &made).status());
    buffers_.emplace(domain, std::move(made.front()));
    ++generation_;
  }
  return Status::Ok();
}

std::map<int32_t, uint8_t*> SharedArenas::bases() const {
  std::map<int32_t, uint8_t*> b;
  for (const auto& [domain, buffer] : buffers_) b[domain] = buffer.data();
  return b;
}

std::map<int32_t, size_t> SharedArenas::bytes() const {
  std::map<int32_t, size_t> b;
  for (const auto& [domain, buffer] : buffers_) b[domain] = buffer.size();
  return b;
}

size_t SharedArenas::separate_bytes() const {
  size_t sum = 0;
  for (const auto& [user, need] : needs_) sum += need;
  return sum;
}

size_t SharedArenas::shared_bytes() const {
  size_t sum = 0;
  for (const auto& [domain, buffer] : buffers_) sum += buffer.size();
  return sum;
}

}  // namespace kiln
