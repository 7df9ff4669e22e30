// Constants a kernel lays out again for itself (a convolution's weights in
// its register panels, nchw16c blocks or oneDNN's blocked format), by node
// and layout. Compiling into an artifact records what the kernels laid out
// so that it can be stored; loading one hands the stored bytes back, and a
// kernel that finds its layout there uses those bytes where they lie instead
// of laying the constant out again. The counts say which happened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

class LaidOutWeights {
 public:
  struct Entry {
    std::string node;
    std::string layout;  // the kernel's name for it ("kiln-gemm-panels", "onednn-f32")
    std::span<const uint8_t> bytes;
  };

  // Loading: the bytes of `node`'s `layout`, which stay valid while `owner`
  // (kept here) lives.
  void AddStored(std::string node, std::string layout, std::span<const uint8_t> bytes);
  void Keep(std::shared_ptr<const void> owner);

  // A kernel asks for its layout of `bytes` bytes: the stored bytes (counted
  // as adopted), or null when there are none of that size.
  const uint8_t* Take(std::string_view node, std::string_view layout, size_t bytes);
  // A kernel laid a constant out itself; `bytes` must stay valid while the
  // compiled graph lives (they are the kernel's own).
  void Record(std::string_view node, std::string_view layout, std::span<const uint8_t> bytes);

  // What kernels laid out themselves (the latest per node and layout), in
  // node order.
  std::vector<Entry> Recorded() const;
  int adopted() const;
  int laid_out() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::span<const uint8_t>> stored_, recorded_;
  std::map<std::pair<std::string, std::string>, bool> adopted_;
  std::vector<std::shared_ptr<const void>> owners_;
};

}  // namespace kiln
