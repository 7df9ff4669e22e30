// A Program: the ordered kernel calls of one compiled bucket, with every
// buffer bound. Running it allocates nothing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace kiln {

// Called after each step for each value it produced (generate --dump,
// kiln diff): the value's name, its memory and its actual row count.
using DumpFn = std::function<void(const std::string& name, const BoundValue& value, int64_t rows)>;

class Program {
 public:
  Program(ShapeEnv capacity, std::vector<Step> steps,
          std::vector<std::vector<std::pair<std::string, BoundValue>>> step_outputs)
      : capacity_(capacity), steps_(std::move(steps)), step_outputs_(std::move(step_outputs)) {}

  const ShapeEnv& capacity() const { return capacity_; }
  const std::vector<Step>& steps() const { return steps_; }

  // Runs every step in order. REQUIRES: the batch fits capacity() (the
  // caller checks; see CompiledModel::Forward).
  void Run(const RunState& state, const DumpFn* dump = nullptr) const;

 private:
  ShapeEnv capacity_;
  std::vector<Step> steps_;
  std::vector<std::vector<std::pair<std::string, BoundValue>>> step_outputs_;
};

}  // namespace kiln
