// A stand-in accelerator with a deliberately partial support list and a
// memory domain of its own. It proves the partitioning end to end: what it
// cannot run falls back to the CPU, values cross domains through transfer
// nodes, and (since it computes with the CPU's kernels) its outputs must
// equal the all-CPU outputs bit for bit.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace kiln {

class TestBackend : public Backend {
 public:
  // linear/gate_up (f32 weights, outputs up to 4096 wide), norms, add and
  // silu_mul, casts and transfers; no embedding, RoPE, KV cache or attention.
  static SupportList DefaultSupport();
  // DefaultSupport plus the matmul, masked softmax and matmul of decomposed
  // attention (but not fused attention nor the KV gather), so that
  // legalize rewrites attention for it.
  static SupportList MatmulSupport();

  TestBackend(SupportList support, std::string name);

  const std::string& name() const override { return name_; }
  std::string description() const override;
  const SupportList& support() const override { return support_; }
  MemoryDomain& domain() override { return *domain_; }
  Expected<std::shared_ptr<const PackedMatrix>> PackWeight(const PackRequest& request) override;
  size_t ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const override;
  Expected<Step> Bind(const BindContext& ctx) override;

 private:
  SupportList support_;
  std::string name_;
  std::unique_ptr<MemoryDomain> domain_;
};

}  // namespace kiln
