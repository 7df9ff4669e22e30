// bf16 matrix products on oneDNN (see matmul_bf16.h).
#include "backend/cpu/tensor_kernels/matmul_bf16.h"

#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/cpu/tensor_kernels/onednn_runtime.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

size_t Round64(size_t n) {
  return (n + 63) / 64 * 64;
}

struct OneDnnBf16MatMul {
  dnnl::matmul primitive;
  dnnl::memory::desc a_user, a_bf16, b_user, b_bf16, bias_desc, c_desc;
  dnnl::reorder a_in, b_in;    // b_in: empty when B is a weight
  dnnl::memory weights, bias;  // weights: B in bf16 (a weight); bias: a constant row
  int bias_input = -1;
  bool has_bias = false;
  size_t a_scratch = 0, b_scratch = 0;
};

}  // namespace

Expected<TensorKernel> MakeOneDnnBf16MatMul(const Bf16MatMulSpec& s) {
  using dnnl::memory;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  if (s.b == nullptr && s.b_scale != 1.0f) return InvalidArgument("bf16 matmul: a scale needs a constant B");
  // Empty products (k = 0 must still write zeros and the bias): the fp32 paths.
  if (s.batch <= 0 || s.m <= 0 || s.n <= 0 || s.k <= 0) return Unsupported("bf16 matmul: an empty product");
  try {
    dnnl::engine& engine = OneDnnEngine();
    auto mm = std::make_shared<OneDnnBf16MatMul>();
    const memory::dims a_dims = {s.batch, s.m, s.k}, b_dims = {s.b_batch, s.k, s.n},
                       c_dims = {s.batch, s.m, s.n};
    mm->a_user = memory::desc(a_dims, dt::f32,
                              s.trans_a ? memory::dims{s.m * s.k, 1, s.m} : memory::dims{s.m * s.k, s.k, 1});
    mm->a_bf16 = memory::desc(a_dims, dt::bf16, tag::abc);
    mm->b_user = memory::desc(b_dims, dt::f32,
                              s.trans_b ? memory::dims{s.k * s.n, 1, s.k} : memory::dims{s.k * s.n, s.n, 1});
    const memory::desc b_want(b_dims, dt::bf16, s.b != nullptr ? tag::any : tag::abc);
    mm->c_desc = memory::desc(c_dims, dt::f32, tag::abc);
    mm->has_bias = s.bias != nullptr || s.bias_input >= 0;
    mm->bias_input = s.bias_input;
    if (mm->has_bias) mm->bias_desc = memory::desc({1, 1, s.n}, dt::f32, tag::abc);
    dnnl::matmul::desc desc = mm->has_bias ? dnnl::matmul::desc(mm->a_bf16, b_want, mm->bias_desc, mm->c_desc)
                                           : dnnl::matmul::desc(mm->a_bf16, b_want, mm->c_desc);
    dnnl::matmul::primitive_desc pd(desc, engine);
    mm->primitive = dnnl::matmul(pd);
    mm->b_bf16 = pd.weights_desc();
    mm->a_in = dnnl::reorder(dnnl::reorder::primitive_desc(engine, mm->a_user, engine, mm->a_bf16));
    mm->a_scratch = Round64(mm->a_bf16.get_size());
    dnnl::stream stream(engine);
    // A weight in the format the primitive picked: an artifact's stored
    // copy, used where it is mapped (oneDNN only reads weights), or
    // rounded and reordered here.
    const std::string layout_name = OneDnnWeightsLayoutName(mm->b_bf16);
    const uint8_t* stored = s.b != nullptr && s.slot.store != nullptr
                                ? s.slot.store->Take(s.slot.node, layout_name, mm->b_bf16.get_size())
                                : nullptr;
    if (stored != nullptr) {
      mm->weights = memory(mm->b_bf16, engine, const_cast<uint8_t*>(stored));
    } else if (s.b != nullptr) {
      // The weight, scaled in fp32 and then rounded once.
      std::vector<float> scaled;
      const float* b = s.b;
      if (s.b_scale != 1.0f) {
        scaled.assign(b, b + s.b_batch * s.k * s.n);
        for (float& v : scaled) v *= s.b_scale;
        b = scaled.data();
      }
      memory user(mm->b_user, engine, const_cast<float*>(b));
      mm->weights = memory(mm->b_bf16, engine);
      dnnl::reorder(user, mm->weights).execute(stream, user, mm->weights);
    } else {
      mm->b_in = dnnl::reorder(dnnl::reorder::primitive_desc(engine, mm->b_user, engine, mm->b_bf16));
      mm->b_scratch = Round64(mm->b_bf16.get_size());
    }
    if (s.bias != nullptr) {
      mm->bias = memory(mm->bias_desc, engine);
      auto* row = static_cast<float*>(mm->bias.get_data_handle());
      for (int64_t j = 0; j < s.n; ++j) row[j] = s.bias[j];
    }
    stream.wait();
    TensorKernel k;
    k.impl = std::string("onednn-bf16:") + pd.impl_info_str();
    k.scratch_bytes = mm->a_scratch + mm->b_scratch;
    k.run = [mm](const TensorCall& call) -> Status {
      try {
        dnnl::engine& eng = OneDnnEngine();
        SetOneDnnThreadCount(call.pool != nullptr ? call.pool->num_threads() : 1);
        dnnl::stream stream(eng);
        memory a_user(mm->a_user, eng, const_cast<void*>(call.inputs[0]));
        memory a(mm->a_bf16, eng, call.scratch);
        mm->a_in.execute(stream, a_user, a);
        memory b = mm->weights;
        if (!b) {
          memory b_user(mm->b_user, eng, const_cast<void*>(call.inputs[1]));
          b = memory(mm->b_bf16, eng, call.scratch + mm->a_scratch);
          mm->b_in.execute(stream, b_user, b);
        }
        memory c(mm->c_desc, eng, call.outputs[0]);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
        if (mm->has_bias) {
          args[DNNL_ARG_BIAS] =
              mm->bias_input >= 0 ? memory(mm->bias_desc, eng, const_cast<void*>(call.inputs[mm->bias_input]))
                                  : mm->bias;
        }
        mm->primitive.execute(stream, args);
        stream.wait();
        return Status::Ok();
      } catch (const dnnl::error& e) {
        return Internal("oneDNN bf16 matmul failed: {}", e.what());
      }
    };
    // Recorded once the kernel is made: its weights live as long as it does.
    if (s.b != nullptr && stored == nullptr && s.slot.store != nullptr) {
      s.slot.store->Record(s.slot.node, layout_name,
                           {static_cast<const uint8_t*>(mm->weights.get_data_handle()), mm->b_bf16.get_size()});
    }
    return k;
  } catch (const dnnl::error& e) {
    return Unsupported("oneDNN does not take this bf16 matmul: {}", e.what());
  }
}

}  // namespace kiln::cpu
