// One activation arena per memory domain shared by compiled tensor graphs
// that never run at the same time: a pipeline's models, which run one after
// another, or one model's shape buckets. Their memory is then the largest
// graph's need rather than the sum of all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "backend/backend.h"
#include "backend/memory_domain.h"
#include "core/status.h"

namespace kiln {

class SharedArenas {
 public:
  // Makes each domain's arena hold at least `bytes` for a graph called
  // `user`. A domain whose arena is too small gets a new, larger buffer and
  // generation() changes: graphs bound to the old buffers must bind again
  // before their next run (CompiledTensorGraph does, in Run).
  Status Reserve(const std::string& user, const std::map<int32_t, size_t>& bytes, const BackendRegistry& backends);

  std::map<int32_t, uint8_t*> bases() const;
  uint64_t generation() const { return generation_; }
  // Per domain: the bytes allocated (the largest need reserved so far).
  std::map<int32_t, size_t> bytes() const;
  // Per user, the largest need it reserved, summed over domains: what
  // separate arenas would have taken.
  const std::map<std::string, size_t>& needs() const { return needs_; }
  size_t separate_bytes() const;
  size_t shared_bytes() const;

 private:
  std::map<int32_t, DomainBuffer> buffers_;
  std::map<std::string, size_t> needs_;
  uint64_t generation_ = 0;
};

}  // namespace kiln
