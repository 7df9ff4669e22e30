// The KV pools advised for 4 KiB pages: the first write into a pool brings
// in one small page, not a 2 MiB huge page the kernel must zero first.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "backend/kv_cache.h"
#include "backend/memory_domain.h"

namespace kiln {
namespace kv_cache_pages_tests {

size_t ResidentBytes(const void* p, size_t bytes) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  if (::mincore(const_cast<void*>(p), bytes, resident.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char r : resident) n += (r & 1) ? page : 0;
  return n;
}

TEST(KvCachePages, AFirstWriteBringsInOneSmallPage) {
  KvCacheLayout layout;
  layout.num_layers = 4;
  layout.num_blocks = 1024;  // 8 MiB pools: large enough to be advised for huge pages
  layout.block_size = 16;
  layout.num_kv_heads = 2;
  layout.head_dim = 64;
  layout.dtype = DType::kF32;
  MemoryDomain host("host", 0);
  auto cache = KvCache::Allocate(layout, host);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  (*cache)->AdviseSmallPages();
  for (int64_t l = 0; l < layout.num_layers; ++l) {
    static_cast<float*>((*cache)->keys(l))[0] = 1.0f;
    static_cast<float*>((*cache)->values(l))[5] = 2.0f;
    EXPECT_LE(ResidentBytes((*cache)->keys(l), size_t{4} << 20), size_t{64} << 10) << "layer " << l;
    EXPECT_LE(ResidentBytes((*cache)->values(l), size_t{4} << 20), size_t{64} << 10) << "layer " << l;
    EXPECT_EQ(static_cast<float*>((*cache)->keys(l))[0], 1.0f);
  }
}

}  // namespace kv_cache_pages_tests
}  // namespace kiln
