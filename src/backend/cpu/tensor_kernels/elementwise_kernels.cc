// The CPU's elementwise tensor kernels: the table entries; the kernels are
// in elementwise_unary.cc, elementwise_binary.cc and elementwise_cast.cc
// (those on nchw16c activations in blocked_elementwise.cc).
#include "backend/cpu/tensor_kernels/elementwise_kernels.h"
#include "backend/cpu/tensor_kernels/blocked_elementwise.h"

namespace kiln::cpu {

void AddElementwiseKernels(std::vector<TensorKernelEntry>* kernels) {
  const std::vector<DType> kFloats = {DType::kF32, DType::kF16, DType::kF64};
  const std::vector<DType> kNumeric = {DType::kF32, DType::kF16, DType::kF64, DType::kI64,
                                       DType::kI32, DType::kI16, DType::kI8,  DType::kU8};
  std::vector<DType> all = kNumeric;
  all.push_back(DType::kBool);
  const std::vector<DType> kIntegers = {DType::kI64, DType::kI32, DType::kI16, DType::kI8, DType::kU8};
  std::vector<DType> signed_numeric = {DType::kF32, DType::kF16, DType::kF64, DType::kI64,
                                       DType::kI32, DType::kI16, DType::kI8};

  for (const char* name :
       {"Exp",         "Log",       "Sqrt",     "Reciprocal", "Floor",     "Ceil", "Round",          "Sin",
        "Cos",         "Tan",       "Asin",     "Acos",       "Atan",      "Sinh", "Cosh",           "Asinh",
        "Acosh",       "Atanh",     "Tanh",     "Sigmoid",    "LeakyRelu", "Elu",  "Selu",           "Celu",
        "HardSigmoid", "HardSwish", "Softplus", "Softsign",   "Erf",       "Mish", "ThresholdedRelu"}) {
    kernels->push_back({name, MakeUnaryKernel, kFloats, "", UnaryTakesLayout});
  }
  kernels->push_back({"Gelu", MakeUnaryKernel, kFloats, "approximate none|tanh", UnaryTakesLayout});
  kernels->push_back({"kiln.Silu", MakeUnaryKernel, kFloats, "x * Sigmoid(x)", UnaryTakesLayout});
  for (const char* name : {"Abs", "Neg", "Sign", "Relu"})
    kernels->push_back({name, MakeUnaryKernel, kNumeric, "", UnaryTakesLayout});
  kernels->push_back({"IsNaN", MakeUnaryKernel, kFloats, ""});
  kernels->push_back({"IsInf", MakeUnaryKernel, kFloats, ""});
  kernels->push_back({"Identity", MakeUnaryKernel, all, "", UnaryTakesLayout});
  kernels->push_back({"Not", MakeUnaryKernel, {DType::kBool}, ""});
  kernels->push_back({"BitwiseNot", MakeUnaryKernel, kIntegers, ""});
  kernels->push_back({"Dropout", MakeDropoutKernel, all, "inference only (training_mode false)"});
  kernels->push_back({"Clip", MakeClipKernel, kNumeric, "", UnaryTakesLayout});

  for (const char* name : {"Add", "Sub", "Mul", "Div"})
    kernels->push_back({name, MakeBinaryKernel, kNumeric, "", BinaryTakesLayout});
  kernels->push_back({"Mod", MakeBinaryKernel, kNumeric, "fmod=1 for floats"});
  kernels->push_back(
      {"Pow", MakeBinaryKernel, {DType::kF32, DType::kF16, DType::kF64, DType::kI64, DType::kI32}, ""});
  for (const char* name : {"Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    kernels->push_back({name, MakeBinaryKernel, kNumeric, ""});
  }
  kernels->push_back({"Equal", MakeBinaryKernel, all, ""});
  for (const char* name : {"And", "Or", "Xor"})
    kernels->push_back({name, MakeBinaryKernel, {DType::kBool}, ""});
  kernels->push_back({"BitShift", MakeBinaryKernel, kIntegers, "shifts the unsigned bits"});
  std::vector<DType> bitwise = kIntegers;
  bitwise.push_back(DType::kBool);
  for (const char* name : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) {
    kernels->push_back({name, MakeBinaryKernel, bitwise, ""});
  }
  for (const char* name : {"Min", "Max", "Sum"}) kernels->push_back({name, MakeVariadicKernel, kNumeric, ""});
  kernels->push_back({"Mean", MakeVariadicKernel, kFloats, ""});
  kernels->push_back({"Where", MakeWhereKernel, {DType::kBool}, ""});
  kernels->push_back({"PRelu", MakePReluKernel, signed_numeric, ""});
  std::vector<DType> cast_types = all;
  cast_types.push_back(DType::kBF16);
  kernels->push_back({"Cast", MakeCastKernel, cast_types, "f32 f16 bf16 f64 i64 i32 i16 i8 u8 bool"});
  kernels->push_back({"CastLike", MakeCastKernel, cast_types, "f32 f16 bf16 f64 i64 i32 i16 i8 u8 bool"});
}

}  // namespace kiln::cpu
