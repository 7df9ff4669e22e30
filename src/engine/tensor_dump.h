// Writes every named intermediate value of every forward pass to a folder,
// for layer-by-layer comparison with another implementation.
//
// Format: one NumPy .npy file (version 1.0, little-endian float32, shape
// [rows, cols], C order) per value per pass, named
// "pass<P>_<N>_<value name>.npy" (P: pass number from 0, 4 digits; N: the
// value's order within the pass, 4 digits; characters outside [A-Za-z0-9._-]
// in the name become '_'), and index.json:
//   {"format": "kiln-dump-1",
//    "passes": [{"pass": P, "token_ids": [...], "positions": [...],
//                "seq_of_token": [...],
//                "values": [{"name", "file", "shape": [rows, cols],
//                            "dtype": "f32", "source_dtype": "bf16"}]}]}
// Values of every dtype are converted to float32. index.json is rewritten
// after each pass, so it is complete whenever a pass has ended.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/program.h"
#include "core/status.h"

namespace kiln {

struct ForwardBatch;

class TensorDumper {
 public:
  // Creates `dir` (and its parents) if needed.
  static Expected<std::unique_ptr<TensorDumper>> Create(const std::string& dir);

  // Starts the next pass; `batch` describes its tokens for the index.
  void BeginPass(const std::vector<int32_t>& token_ids, const std::vector<int32_t>& positions,
                 const std::vector<int32_t>& seq_of_token);
  // The function to hand to Forward for the current pass.
  const DumpFn& fn() const { return fn_; }
  // Writes the index; returns the first error of the pass (a file that
  // could not be written).
  Status EndPass();

  const std::string& dir() const { return dir_; }
  int64_t num_passes() const { return pass_; }

 private:
  explicit TensorDumper(std::string dir);
  void Write(const std::string& name, const BoundValue& value, int64_t rows);

  std::string dir_;
  DumpFn fn_;
  int64_t pass_ = 0;
  int64_t value_in_pass_ = 0;
  nlohmann::json index_;
  nlohmann::json current_;
  Status error_;
};

// The bytes of a .npy file holding `rows` x `cols` float32 values.
std::string NpyFloat32(const float* data, int64_t rows, int64_t cols);

}  // namespace kiln
