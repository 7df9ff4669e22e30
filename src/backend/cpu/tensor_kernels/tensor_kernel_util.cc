// Shared helpers of the elementwise and reduce kernels.
#include "backend/cpu/tensor_kernels/tensor_kernel_util.h"

#include <memory>
#include <vector>

#include "core/half.h"

namespace kiln::cpu {

int64_t IntAttrOr(const TensorKernelArgs& args, const char* name, int64_t fallback) {
  auto v = args.a().Int(name);
  return v.ok() ? *v : fallback;
}

float FloatAttrOr(const TensorKernelArgs& args, const char* name, float fallback) {
  auto v = args.a().Float(name);
  return v.ok() ? static_cast<float>(*v) : fallback;
}

std::string StringAttrOr(const TensorKernelArgs& args, const char* name, const std::string& fallback) {
  auto v = args.a().String(name);
  return v.ok() ? *v : fallback;
}

Status UnsupportedDType(const TensorKernelArgs& args, DType t, const char* supported) {
  return Unsupported("{} {}: dtype {} not supported ({})", args.op_type, args.node, DTypeName(t), supported);
}

namespace {

size_t Align64(size_t n) {
  return (n + 63) / 64 * 64;
}

void F16ToF32Array(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

void F32ToF16Array(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToF16(src[i]);
}

}  // namespace

Expected<TensorKernel> MakeViaF32(const TensorKernelArgs& args, TensorKernelFactory f) {
  bool any_f16 = false;
  for (size_t i = 0; i < args.inputs.size(); ++i)
    any_f16 |= args.has(i) && args.inputs[i].dtype == DType::kF16;
  for (const TensorType& t : args.outputs) any_f16 |= t.dtype == DType::kF16;
  if (!any_f16) return f(args);

  TensorKernelArgs wide = args;
  // Converted constants live as long as the kernel, in case it keeps them.
  auto converted = std::make_shared<std::vector<TensorData>>();
  converted->reserve(args.inputs.size());
  struct Buffer {
    size_t index;
    int64_t count;
    size_t offset;
  };
  std::vector<Buffer> in_buffers, out_buffers;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (!args.has(i) || args.inputs[i].dtype != DType::kF16) continue;
    wide.inputs[i].dtype = DType::kF32;
    in_buffers.push_back({i, args.inputs[i].ElementCount(), 0});
    if (args.constants[i] != nullptr) {
      auto bytes = std::make_shared<std::string>(wide.inputs[i].Bytes(), '\0');
      F16ToF32Array(args.constants[i]->As<uint16_t>(), reinterpret_cast<float*>(bytes->data()),
                    in_buffers.back().count);
      converted->emplace_back(wide.inputs[i], bytes);
      wide.constants[i] = &converted->back();
    }
  }
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    if (args.outputs[i].dtype != DType::kF16) continue;
    wide.outputs[i].dtype = DType::kF32;
    out_buffers.push_back({i, args.outputs[i].ElementCount(), 0});
  }
  KILN_ASSIGN_OR_RETURN(TensorKernel inner, f(wide));
  size_t offset = Align64(inner.scratch_bytes);
  for (Buffer& b : in_buffers) {
    b.offset = offset;
    offset += Align64(static_cast<size_t>(b.count) * 4);
  }
  for (Buffer& b : out_buffers) {
    b.offset = offset;
    offset += Align64(static_cast<size_t>(b.count) * 4);
  }
  TensorKernel k;
  k.scratch_bytes = offset;
  k.impl = inner.impl + " via f32";
  const size_t num_in = args.inputs.size();
  const size_t num_out = args.outputs.size();
  k.run = [inner = std::move(inner), in_buffers, out_buffers, num_in, num_out,
           converted](const TensorCall& call) {
    std::vector<const void*> ins(call.inputs, call.inputs + num_in);
    std::vector<void*> outs(call.outputs, call.outputs + num_out);
    for (const Buffer& b : in_buffers) {
      float* dst = reinterpret_cast<float*>(call.scratch + b.offset);
      F16ToF32Array(static_cast<const uint16_t*>(call.inputs[b.index]), dst, b.count);
      ins[b.index] = dst;
    }
    for (const Buffer& b : out_buffers) outs[b.index] = call.scratch + b.offset;
    TensorCall wide_call = call;
    wide_call.inputs = ins.data();
    wide_call.outputs = outs.data();
    KILN_RETURN_IF_ERROR(inner.run(wide_call));
    for (const Buffer& b : out_buffers) {
      F32ToF16Array(reinterpret_cast<const float*>(call.scratch + b.offset),
                    static_cast<uint16_t*>(call.outputs[b.index]), b.count);
    }
    return Status::Ok();
  };
  return k;
}

}  // namespace kiln::cpu
