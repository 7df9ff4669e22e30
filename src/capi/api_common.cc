// The C API's status names, error message, versions, logging and strings.
#include <cstdlib>

#include "backend/backend.h"
#include "capi/c_boundary.h"
#include "core/log.h"
#include "kiln/kiln.h"

extern "C" {

const char* kiln_status_name(kiln_status status) {
  switch (kiln::capi::RawEnum(status)) {
    case KILN_OK: return "ok";
    case KILN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case KILN_ERROR_NOT_FOUND: return "not found";
    case KILN_ERROR_CORRUPT: return "corrupt";
    case KILN_ERROR_UNSUPPORTED: return "unsupported";
    case KILN_ERROR_OUT_OF_RANGE: return "out of range";
    case KILN_ERROR_RESOURCE_EXHAUSTED: return "resource exhausted";
    case KILN_ERROR_IO: return "i/o error";
    case KILN_ERROR_CANCELLED: return "cancelled";
    case KILN_ERROR_INTERNAL: return "internal error";
    case KILN_ERROR_OUT_OF_MEMORY: return "out of memory";
  }
  return "unknown status";
}

const char* kiln_last_error(void) {
  return kiln::capi::LastError();
}

int kiln_api_version(void) {
  return KILN_API_VERSION;
}

const char* kiln_version(void) {
  return KILN_VERSION;
}

void kiln_set_log_level(kiln_log_level level) {
  int value = kiln::capi::RawEnum(level);
  if (value < static_cast<int>(KILN_LOG_DEBUG)) value = KILN_LOG_DEBUG;
  if (value > static_cast<int>(KILN_LOG_OFF)) value = KILN_LOG_OFF;
  kiln::SetLogLevel(static_cast<kiln::LogLevel>(value));
}

void kiln_string_free(char* text) {
  std::free(text);
}

kiln_status kiln_load_backend_plugin(const char* path) {
  return kiln::capi::Guard("kiln_load_backend_plugin", [&]() -> kiln::Status {
    if (path == nullptr) return kiln::InvalidArgument("path is NULL");
    return kiln::BackendRegistry::Get().LoadPlugin(path);
  });
}

}  // extern "C"
