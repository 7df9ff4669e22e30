// A kernel's weights in its own layout: floats it packed itself, or the same
// floats stored in a compiled artifact and used where they are mapped
// (graph/laid_out_weights.h). Reads go through the const accessors, which
// see either; packing writes through the others into its own copy.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/tensor_kernels/cache_line_allocator.h"
#include "graph/laid_out_weights.h"

namespace kiln::cpu {

class LaidOutFloats {
 public:
  LaidOutFloats() = default;
  LaidOutFloats(const LaidOutFloats& o) { *this = o; }
  LaidOutFloats(LaidOutFloats&& o) noexcept { *this = std::move(o); }
  LaidOutFloats& operator=(const LaidOutFloats& o) {
    own_ = o.own_;
    data_ = o.owns() ? own_.data() : o.data_;
    size_ = o.size_;
    return *this;
  }
  LaidOutFloats& operator=(LaidOutFloats&& o) noexcept {
    const bool owned = o.owns();
    own_ = std::move(o.own_);
    data_ = owned ? own_.data() : o.data_;
    size_ = o.size_;
    return *this;
  }

  void assign(size_t n, float v) {
    own_.assign(n, v);
    Own();
  }
  template <typename It>
  void assign(It first, It last) {
    own_.assign(first, last);
    Own();
  }
  // Reads `n` floats at `stored` in place (not copied).
  void Adopt(const float* stored, size_t n) {
    own_.clear();
    data_ = stored;
    size_ = n;
  }

  float* data() { return own_.data(); }
  const float* data() const { return data_; }
  float& operator[](size_t i) { return own_[i]; }
  float operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const {
    return {reinterpret_cast<const uint8_t*>(data_), size_ * sizeof(float)};
  }

 private:
  bool owns() const { return !own_.empty() && data_ == own_.data(); }
  void Own() {
    data_ = own_.data();
    size_ = own_.size();
  }
  std::vector<float, CacheLineAllocator<float>> own_;
  const float* data_ = nullptr;
  size_t size_ = 0;
};

// Where one node's kernel finds and records its laid-out weights.
struct LaidOutSlot {
  LaidOutWeights* store = nullptr;
  std::string_view node;

  // Points `dst` at the stored `floats` floats of `layout` when there are;
  // false (nothing changed) otherwise.
  bool Adopt(std::string_view layout, size_t floats, LaidOutFloats* dst) const {
    if (store == nullptr) return false;
    const uint8_t* stored = store->Take(node, layout, floats * sizeof(float));
    if (stored == nullptr) return false;
    dst->Adopt(reinterpret_cast<const float*>(stored), floats);
    return true;
  }
  // Notes that the kernel laid `w` out itself.
  void Record(std::string_view layout, const LaidOutFloats& w) const {
    if (store != nullptr) store->Record(node, layout, w.bytes());
  }
};

}  // namespace kiln::cpu
