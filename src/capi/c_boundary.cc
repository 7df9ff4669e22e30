// Status codes and the per-thread error message of the C API.
#include "capi/c_boundary.h"

#include <cstdlib>

namespace kiln::capi {
namespace {

// Per thread, so that one thread's failure never garbles another's message.
thread_local std::string t_last_error;

}  // namespace

kiln_status ToCStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return KILN_OK;
    case StatusCode::kInvalidArgument: return KILN_ERROR_INVALID_ARGUMENT;
    case StatusCode::kNotFound: return KILN_ERROR_NOT_FOUND;
    case StatusCode::kCorrupt: return KILN_ERROR_CORRUPT;
    case StatusCode::kUnsupported: return KILN_ERROR_UNSUPPORTED;
    case StatusCode::kOutOfRange: return KILN_ERROR_OUT_OF_RANGE;
    case StatusCode::kResourceExhausted: return KILN_ERROR_RESOURCE_EXHAUSTED;
    case StatusCode::kIoError: return KILN_ERROR_IO;
    case StatusCode::kCancelled: return KILN_ERROR_CANCELLED;
    case StatusCode::kInternal: return KILN_ERROR_INTERNAL;
  }
  return KILN_ERROR_INTERNAL;
}

kiln_status Fail(kiln_status code, const std::string& message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    t_last_error.clear();  // no memory even for the message: the code must do
  }
  return code;
}

kiln_status Fail(const char* function, const Status& status) noexcept {
  try {
    return Fail(ToCStatus(status.code()), std::string(function) + ": " + status.message());
  } catch (...) {
    t_last_error.clear();
    return ToCStatus(status.code());
  }
}

const char* LastError() noexcept {
  return t_last_error.c_str();
}

char* NewCString(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy == nullptr) throw std::bad_alloc();
  std::memcpy(copy, text.data(), text.size());
  copy[text.size()] = '\0';
  return copy;
}

}  // namespace kiln::capi
