// The table of the CPU's tensor kernels, gathered from the families.
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

#include <algorithm>

#include "backend/cpu/tensor_kernels/channel_shuffle_kernels.h"

namespace kiln::cpu {
namespace {

std::vector<TensorKernelEntry> BuildTable() {
  std::vector<TensorKernelEntry> kernels;
  AddElementwiseKernels(&kernels);
  AddShapeKernels(&kernels);
  AddReduceKernels(&kernels);
  AddConvKernels(&kernels);
  AddMatMulKernels(&kernels);
  AddQuantKernels(&kernels);
  AddLayoutKernels(&kernels);
  AddChannelShuffleKernels(&kernels);
  std::sort(kernels.begin(), kernels.end(),
            [](const TensorKernelEntry& a, const TensorKernelEntry& b) { return a.op_type < b.op_type; });
  return kernels;
}

}  // namespace

const std::vector<TensorKernelEntry>& AllTensorKernels() {
  static const std::vector<TensorKernelEntry> table = BuildTable();
  return table;
}

const TensorKernelEntry* FindTensorKernel(std::string_view op_type) {
  const auto& all = AllTensorKernels();
  auto it = std::lower_bound(all.begin(), all.end(), op_type,
                             [](const TensorKernelEntry& e, std::string_view name) { return e.op_type < name; });
  return it != all.end() && it->op_type == op_type ? &*it : nullptr;
}

Expected<TensorKernel> MakeTensorKernel(const TensorKernelArgs& args) {
  const TensorKernelEntry* entry = FindTensorKernel(args.op_type);
  if (entry == nullptr) return Unsupported("{} {}: the CPU has no kernel for {}", args.op_type, args.node, args.op_type);
  auto kernel = entry->make(args);
  if (!kernel.ok()) {
    Status s = kernel.status();
    // Factories name the op and node themselves; add them where they did not.
    const std::string prefix = std::string(args.op_type) + " " + std::string(args.node);
    if (s.message().rfind(prefix, 0) == 0) return s;
    return Status(s.code(), prefix + ": " + s.message());
  }
  return kernel;
}

}  // namespace kiln::cpu
