// The C API's edge: kiln's Status becomes a kiln_status plus this thread's
// last-error message, and no exception gets past a C function.
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "core/status.h"
#include "kiln/kiln.h"

namespace kiln::capi {

// The int a caller passed as one of the header's enums. C lets any int
// through an enum parameter, while in C++ reading a value outside the
// enumerators is undefined: read the bytes instead, then range-check.
template <typename Enum>
int RawEnum(const Enum& value) noexcept {
  static_assert(sizeof(Enum) == sizeof(int), "the header's enums are int-sized");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// The C code for a kiln StatusCode.
kiln_status ToCStatus(StatusCode code);

// Records `message` as this thread's last error and returns `code`.
// Never throws: when even the message cannot be stored, a fixed one is.
kiln_status Fail(kiln_status code, const std::string& message) noexcept;

// Records `status` (not ok) prefixed with `function`, returns its code.
kiln_status Fail(const char* function, const Status& status) noexcept;

// This thread's last error message ("" when none).
const char* LastError() noexcept;

// Runs `body`, a callable returning Status, for the C function `function`:
// its error, or an exception it throws, becomes the returned kiln_status
// and this thread's last error ("function: message").
template <typename Body>
kiln_status Guard(const char* function, Body&& body) noexcept {
  try {
    Status status = body();
    return status.ok() ? KILN_OK : Fail(function, status);
  } catch (const std::bad_alloc&) {
    return Fail(KILN_ERROR_OUT_OF_MEMORY, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return Fail(KILN_ERROR_INTERNAL, std::string(function) + ": unexpected exception: " + e.what());
  } catch (...) {
    return Fail(KILN_ERROR_INTERNAL, std::string(function) + ": unexpected exception");
  }
}

// A caller's options struct as this library knows it: `defaults`, then
// the first struct_size bytes the caller gave (a program built against an
// older, shorter struct leaves the newer fields at their defaults). NULL
// means the defaults. A struct_size too small to hold struct_size itself
// means the caller never filled the struct in.
template <typename Options>
Expected<Options> ReadOptions(const Options* given, const Options& defaults, const char* what) {
  Options options = defaults;
  if (given == nullptr) return options;
  if (given->struct_size < sizeof(size_t)) {
    return InvalidArgument("{}: struct_size is {}; fill the struct with its _default() function first", what,
                           given->struct_size);
  }
  const size_t known = given->struct_size < sizeof(Options) ? given->struct_size : sizeof(Options);
  std::memcpy(static_cast<void*>(&options), given, known);
  options.struct_size = sizeof(Options);
  return options;
}

// Writes the first `struct_size` bytes of `full` (struct_size set to what
// was written) to `out`, for the kiln_*_init functions: a caller built
// against an older header passes a smaller size.
template <typename Options>
void WriteOptions(Options* out, size_t struct_size, Options full) {
  if (out == nullptr) return;
  const size_t n = struct_size < sizeof(Options) ? struct_size : sizeof(Options);
  full.struct_size = n;
  std::memcpy(static_cast<void*>(out), &full, n);
}

// A copy of `text` that the caller releases with kiln_string_free.
char* NewCString(const std::string& text);

}  // namespace kiln::capi
