// Per-render limits and bookkeeping (see runtime.h).
#include "jinja/runtime.h"

namespace kiln::jinja {

Runtime::~Runtime() {
  for (const auto& ns : namespaces_) ns->Clear();
}

Status Runtime::Charge(int64_t units) {
  if (!failure_.ok()) return failure_;
  steps_ += units;
  if (steps_ > limits_.max_steps) {
    failure_ = ResourceExhausted("template render exceeded {} steps of work", limits_.max_steps);
    return failure_;
  }
  return Status::Ok();
}

Status Runtime::CountIteration() {
  if (++iterations_ > limits_.max_loop_iterations) {
    return ResourceExhausted("template loops exceeded {} iterations", limits_.max_loop_iterations);
  }
  return Charge(1);
}

Status Runtime::CheckStringSize(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    return ResourceExhausted("template built a string of {} bytes, over the limit of {}", bytes,
                             limits_.max_output_bytes);
  }
  return Status::Ok();
}

Status Runtime::EnterCall() {
  if (call_depth_ >= limits_.max_call_depth) {
    return ResourceExhausted("template calls nested more than {} deep", limits_.max_call_depth);
  }
  ++call_depth_;
  return Status::Ok();
}

void Runtime::Fail(Status status) {
  if (failure_.ok()) failure_ = std::move(status);
}

Expected<std::shared_ptr<Namespace>> Runtime::NewNamespace() {
  // Namespaces live until the render ends, so each costs as much as a
  // modest string would.
  KILN_RETURN_IF_ERROR(Charge(64));
  namespaces_.push_back(std::make_shared<Namespace>());
  return namespaces_.back();
}

}  // namespace kiln::jinja
