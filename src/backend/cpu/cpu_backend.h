// The CPU backend: supports every op (it is everyone's fallback), computes in
// host memory, and dispatches at run time to the widest vector kernels the
// CPU runs (AVX-512, AVX2, or the scalar reference).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "backend/backend.h"

namespace kiln {

namespace cpu {
class RopeTable;
}

class CpuBackend : public Backend {
 public:
  CpuBackend();
  ~CpuBackend() override;

  const std::string& name() const override { return name_; }
  std::string description() const override;
  const SupportList& support() const override { return support_; }
  MemoryDomain& domain() override { return HostMemory(); }
  // Float weights into panels, block-quantized ones as they are (repacked
  // where the vector kernels run); an int8 request for a decoder layer's
  // matrix into W8A8's int8 panels.
  Expected<std::shared_ptr<const PackedMatrix>> PackWeight(const PackRequest& request) override;
  size_t ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const override;
  Expected<Step> Bind(const BindContext& ctx) override;
  bool has_native_bf16_dot() const override;

 private:
  // The RoPE table for a model's settings, built once and shared.
  Expected<std::shared_ptr<const cpu::RopeTable>> RopeTableFor(const ModelConfig& c, int64_t max_positions);

  std::string name_ = "cpu";
  SupportList support_;
  std::mutex rope_mu_;
  std::map<std::tuple<int64_t, double, int, double, int64_t>, std::shared_ptr<const cpu::RopeTable>> rope_tables_;
};

}  // namespace kiln
