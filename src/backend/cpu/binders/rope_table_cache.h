// RoPE cos/sin tables built once per set of parameters and shared by every
// node and model that uses them (a table is as large as the context).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cpu/kernels/rope.h"
#include "core/status.h"
#include "graph/rope_attributes.h"

namespace kiln::cpu {

class RopeTableCache {
 public:
  // The table of a head_dim-wide head rotated by `p` for positions below
  // max_positions. Errors are RopeTable::Build's.
  Expected<std::shared_ptr<const RopeTable>> Get(int64_t head_dim, const RopeParameters& p, int64_t max_positions);

 private:
  std::mutex mu_;
  // Every parameter the table depends on, doubles by their bits.
  std::map<std::vector<int64_t>, std::shared_ptr<const RopeTable>> tables_;
};

}  // namespace kiln::cpu
