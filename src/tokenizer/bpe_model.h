// The interface of a BPE model: turns one pre-token into token ids.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln {

class BpeModel {
 public:
  virtual ~BpeModel() = default;
  // Appends the ids of `piece` (one pre-token, any bytes) to `out`.
  virtual void Encode(std::string_view piece, std::vector<int32_t>& out) const = 0;
};

}  // namespace kiln
