// The CPU backend: supports every op (it is everyone's fallback), computes in
// host memory, and dispatches at run time to the widest vector kernels the
// CPU runs (AVX-512, AVX2, or the scalar reference).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace kiln {

namespace cpu {
struct BindCaches;
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
  // Panels and x8 copies as PackWeight makes them, over the stored bytes.
  Expected<std::shared_ptr<const PackedMatrix>> AdoptPacked(const PackRequest& request,
                                                            const StoredPackedMatrix& stored) override;
  size_t ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const override;
  // The op's binder (backend/cpu/binders/).
  Expected<Step> Bind(const BindContext& ctx) override;
  bool has_native_bf16_dot() const override;
  // Where oneDNN multiplies bf16 (cpu::CpuMultipliesBf16).
  bool has_bf16_tensor_products() const override;
  // nchw16c where a convolution's fast path is oneDNN's blocked kernels
  // (AVX-512); a node takes a layout when its kernel entry says so.
  TensorLayout WantedLayout(const Graph& g, const Node& node) const override;
  bool TakesLayout(const Graph& g, const Node& node, TensorLayout layout) const override;
  // A stem convolution on kiln's nchw16c kernel (ConvReadsRowMajorInput).
  bool ReadsRowMajorInput(const Graph& g, const Node& node, TensorLayout layout) const override;
  // Drops the tensor kernel ScratchBytes made for `node` when the node
  // will not be bound (it is rebuilt elsewhere).
  void ForgetTensorKernel(const Node& node);

 private:
  std::string name_ = "cpu";
  SupportList support_;
  std::unique_ptr<cpu::BindCaches> caches_;  // RoPE tables, shared by every model
};

}  // namespace kiln
