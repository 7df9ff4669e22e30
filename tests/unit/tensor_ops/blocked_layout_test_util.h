// Shared by the nchw16c kernels' tests: the plain reorders between NCHW and
// nchw16c, and a check that runs an op both ways (row-major through
// RunTensorOp, blocked through the kernel made with activation_layout =
// nchw16c) and compares, padding included.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/run_tensor_op.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"
#include "graph/tensor_data.h"
#include "unit/tensor_ops/conv_test_util.h"

namespace kiln::blocked_test {

constexpr int64_t kBlock = 16;

inline int64_t Blocks(int64_t c) {
  return (c + kBlock - 1) / kBlock;
}

inline int64_t BlockedCount(const std::vector<int64_t>& d) {
  return d[0] * Blocks(d[1]) * d[2] * d[3] * kBlock;
}

// NCHW -> nchw16c with the padded channels set to `pad`.
inline std::vector<float> ToBlocked(const float* x, const std::vector<int64_t>& d, float pad = 0.0f) {
  const int64_t n = d[0], c = d[1], hw = d[2] * d[3], cb = Blocks(c);
  std::vector<float> y(static_cast<size_t>(BlockedCount(d)), pad);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        y[static_cast<size_t>(((i * cb + ch / kBlock) * hw + p) * kBlock + ch % kBlock)] =
            x[(i * c + ch) * hw + p];
  return y;
}

inline std::vector<float> FromBlocked(const float* y, const std::vector<int64_t>& d) {
  const int64_t n = d[0], c = d[1], hw = d[2] * d[3], cb = Blocks(c);
  std::vector<float> x(static_cast<size_t>(n * c * hw));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        x[static_cast<size_t>((i * c + ch) * hw + p)] =
            y[((i * cb + ch / kBlock) * hw + p) * kBlock + ch % kBlock];
  return x;
}

// How many padded channel values of a blocked tensor are not +0.
inline int64_t NonZeroPadding(const float* y, const std::vector<int64_t>& d) {
  const int64_t n = d[0], c = d[1], hw = d[2] * d[3], cb = Blocks(c);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = c; ch < cb * kBlock; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        bad += y[((i * cb + ch / kBlock) * hw + p) * kBlock + ch % kBlock] != 0.0f ? 1 : 0;
  return bad;
}

struct BlockedCase {
  std::string op;
  AttributeMap attrs;
  std::vector<TensorData> inputs;
  std::vector<bool> constant;  // per input: known when the kernel is made (row-major then)
  int num_outputs = 1;
  float tol = 1e-5f;
  bool expect_taken =
      true;  // the entry's takes_layout says yes (the kernel is run either way when it can be made)
};

// c's outputs from the row-major kernels.
inline Expected<std::vector<TensorData>> RowMajorOutputs(const BlockedCase& c) {
  cpu::TensorOpRun run;
  run.op_type = c.op;
  run.attrs = c.attrs;
  for (const TensorData& t : c.inputs) run.inputs.emplace_back(t);
  run.num_outputs = c.num_outputs;
  run.inputs_are_constants = true;
  return cpu::RunTensorOp(run);
}

// The arguments that make c's kernel with `attrs` (which must outlive them),
// on 2 threads, without output types.
inline cpu::TensorKernelArgs KernelArgs(const BlockedCase& c, const AttributeMap& attrs) {
  cpu::TensorKernelArgs args;
  args.op_type = c.op;
  args.node = "blocked";
  args.attrs = &attrs;
  args.num_threads = 2;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    args.inputs.push_back(c.inputs[i].type());
    args.present.push_back(true);
    args.constants.push_back(c.constant[i] ? &c.inputs[i] : nullptr);
  }
  return args;
}

// The implementation the op's entry picks for c on nchw16c activations.
inline std::string BlockedImplementation(const BlockedCase& c) {
  AttributeMap attrs = c.attrs;
  attrs.SetString("activation_layout", "nchw16c");
  auto kernel = cpu::MakeTensorKernel(KernelArgs(c, attrs));
  return kernel.ok() ? kernel->impl : "error: " + kernel.status().message();
}

// Runs c row-major and blocked (with and without a pool of 2 threads) and
// compares every output; the blocked outputs' padding must be zero.
inline void ExpectBlockedMatchesRowMajor(const BlockedCase& c, const std::string& what) {
  SCOPED_TRACE(what);
  auto expected = RowMajorOutputs(c);
  ASSERT_TRUE(expected.ok()) << expected.status().message();

  AttributeMap attrs = c.attrs;
  attrs.SetString("activation_layout", "nchw16c");
  cpu::TensorKernelArgs args = KernelArgs(c, attrs);
  for (const TensorData& t : *expected) args.outputs.push_back(t.type());
  const cpu::TensorKernelEntry* entry = cpu::FindTensorKernel(c.op);
  ASSERT_NE(entry, nullptr);
  ASSERT_NE(entry->takes_layout, nullptr) << c.op << " states no layouts";
  const bool taken = entry->takes_layout(TensorLayout::kNCHW16c, args);
  ASSERT_EQ(taken, c.expect_taken) << c.op << ": takes_layout(nchw16c)";
  EXPECT_FALSE(entry->takes_layout(TensorLayout::kNHWC, args));
  auto kernel = cpu::MakeTensorKernel(args);
  // A node the predicate refuses may still be made (slowly, or refused with
  // an error); when it is, it must compute the same.
  if (!taken && !kernel.ok()) return;
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();

  std::vector<std::vector<float>> blocked_inputs(c.inputs.size());
  std::vector<const void*> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const TensorData& t = c.inputs[i];
    if (!c.constant[i] && t.type().rank() == 4) {
      blocked_inputs[i] = ToBlocked(t.As<float>(), t.type().dims);
      ins.push_back(blocked_inputs[i].data());
    } else {
      ins.push_back(t.data());
    }
  }
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &DefaultThreadPool(2)}) {
    std::vector<std::vector<float>> outs;
    std::vector<void*> out_ptrs;
    for (const TensorData& t : *expected) {
      const int64_t n = t.type().rank() == 4 ? BlockedCount(t.type().dims) : t.type().ElementCount();
      outs.emplace_back(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
    }
    for (auto& o : outs) out_ptrs.push_back(o.data());
    std::vector<float> scratch((kernel->scratch_bytes + 64) / sizeof(float) + 16);
    auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
    cpu::TensorCall call;
    call.inputs = ins.data();
    call.outputs = out_ptrs.data();
    call.scratch = aligned;
    call.pool = pool;
    Status s = kernel->run(call);
    ASSERT_TRUE(s.ok()) << s.message();
    for (size_t o = 0; o < outs.size(); ++o) {
      const TensorType& type = (*expected)[o].type();
      const float* want = (*expected)[o].As<float>();
      if (type.rank() == 4) {
        EXPECT_EQ(NonZeroPadding(outs[o].data(), type.dims), 0) << "output " << o << " padding";
        const std::vector<float> got = FromBlocked(outs[o].data(), type.dims);
        conv_test::ExpectClose(got.data(), want, type.ElementCount(), c.tol,
                               c.op + " output " + std::to_string(o) + (pool ? " (pool)" : ""));
      } else {
        conv_test::ExpectClose(outs[o].data(), want, type.ElementCount(), c.tol, c.op + " output");
      }
    }
  }
}

}  // namespace kiln::blocked_test
