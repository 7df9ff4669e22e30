// The shared RoPE tables.
#include "backend/cpu/binders/rope_table_cache.h"

#include <cstring>

namespace kiln::cpu {
namespace {

int64_t Bits(double d) {
  int64_t b = 0;
  std::memcpy(&b, &d, sizeof(b));
  return b;
}

}  // namespace

Expected<std::shared_ptr<const RopeTable>> RopeTableCache::Get(int64_t head_dim, const RopeParameters& p,
                                                               int64_t max_positions) {
  const RopeScaling& s = p.scaling;
  std::vector<int64_t> key = {head_dim,
                              p.rotary_dim,
                              Bits(p.theta),
                              static_cast<int64_t>(s.type),
                              Bits(s.factor),
                              Bits(s.low_freq_factor),
                              Bits(s.high_freq_factor),
                              s.original_max_position_embeddings,
                              Bits(s.beta_fast),
                              Bits(s.beta_slow),
                              Bits(s.attention_factor),
                              max_positions};
  for (const auto* factors : {&s.short_factor, &s.long_factor}) {
    key.push_back(static_cast<int64_t>(factors->size()));
    for (double f : *factors) key.push_back(Bits(f));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(key);
  if (it != tables_.end()) return it->second;
  KILN_ASSIGN_OR_RETURN(RopeTable t, RopeTable::Build(head_dim, p.rotary_dim, p.theta, s, max_positions));
  auto shared = std::make_shared<const RopeTable>(std::move(t));
  tables_.emplace(key, shared);
  return shared;
}

}  // namespace kiln::cpu
