// The CPU's tensor kernels of the reduce family: the table entries; the
// kernels are in reduce_axes.cc, reduce_softmax.cc and reduce_norms.cc.
#include "backend/cpu/tensor_kernels/reduce_kernels.h"

#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/blocked_spatial_mean.h"

namespace kiln::cpu {

AxisView ViewAround(const std::vector<int64_t>& dims, int64_t begin, int64_t end) {
  AxisView v;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i < begin) {
      v.outer *= dims[i];
    } else if (i < end) {
      v.axis *= dims[i];
    } else {
      v.inner *= dims[i];
    }
  }
  return v;
}

namespace {

Expected<TensorKernel> MakeReduceMeanKernel(const TensorKernelArgs& args) {
  return NodeIsNchw16c(args) ? MakeBlockedSpatialMean(args) : MakeReduceKernel(args);
}

}  // namespace

void AddReduceKernels(std::vector<TensorKernelEntry>* kernels) {
  const std::vector<DType> kFloats = {DType::kF32, DType::kF16};
  const std::vector<DType> kReduceTypes = {DType::kF32, DType::kF16, DType::kF64, DType::kI64, DType::kI32};
  for (const char* name : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    kernels->push_back({name, MakeReduceKernel, kReduceTypes, "axes constant"});
  }
  // ReduceMean over the height and width also takes nchw16c (a classifier's global average).
  kernels->push_back(
      {"ReduceMean", MakeReduceMeanKernel, kReduceTypes, "axes constant", SpatialMeanTakesLayout});
  std::vector<DType> arg_types = kReduceTypes;
  arg_types.push_back(DType::kU8);
  arg_types.push_back(DType::kI8);
  kernels->push_back({"ArgMax", MakeArgReduceKernel, arg_types, ""});
  kernels->push_back({"ArgMin", MakeArgReduceKernel, arg_types, ""});
  kernels->push_back({"CumSum", MakeCumSumKernel, kReduceTypes, "axis constant"});
  kernels->push_back({"TopK", MakeTopKKernel, arg_types, "K constant"});
  for (const char* name : {"Softmax", "LogSoftmax", "Hardmax"}) {
    kernels->push_back({name, MakeSoftmaxKernel, kFloats, ""});
  }
  kernels->push_back({"LayerNormalization", MakeLayerNormKernel, kFloats, ""});
  kernels->push_back({"BatchNormalization", MakeBatchNormKernel, kFloats, "inference form only"});
  kernels->push_back({"InstanceNormalization", MakeInstanceNormKernel, kFloats, ""});
  kernels->push_back(
      {"GroupNormalization", MakeGroupNormKernel, kFloats, "scale/bias per group or per channel"});
  kernels->push_back({"LpNormalization", MakeLpNormKernel, kFloats, "p 1|2"});
  kernels->push_back({"MeanVarianceNormalization", MakeMvnKernel, kFloats, ""});
}

}  // namespace kiln::cpu
