// Running a Program.
#include "compiler/program.h"

namespace kiln {

void Program::Run(const RunState& state, const DumpFn* dump) const {
  ShapeEnv actual;
  if (dump != nullptr) {
    actual.tokens = state.batch->num_tokens;
    actual.output_rows = state.batch->num_output_rows;
    actual.context_rows = state.context_rows;
    actual.score_rows = state.score_rows;
  }
  for (size_t i = 0; i < steps_.size(); ++i) {
    steps_[i].run(state);
    if (dump == nullptr) continue;
    for (const auto& [name, v] : step_outputs_[i]) {
      if (v.rows == RowSpace::kNone) continue;
      BoundValue shown = v;
      if (v.is_output) {
        shown.data = reinterpret_cast<uint8_t*>(state.logits);
        shown.row_stride = state.logits_stride;
      }
      (*dump)(name, shown, actual.Rows(v.rows));
    }
  }
}

}  // namespace kiln
