// PCRE2 behind the Regex interface. The compiled code is immutable and
// shared; match data is per call, so one Regex serves many threads.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

namespace kiln {
namespace {

// Longest pattern accepted: real pre-tokenizer patterns are a few hundred bytes.
constexpr size_t kMaxPatternBytes = 16 * 1024;
// Backtracking budget per match attempt; the family patterns need a few
// steps per subject byte, so this only stops pathological patterns.
constexpr uint32_t kMatchLimit = 10'000'000;
constexpr uint32_t kDepthLimit = 10'000;

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  ~Compiled() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

Regex::Regex(std::shared_ptr<const Compiled> compiled, std::string pattern, bool literal)
    : compiled_(std::move(compiled)), pattern_(std::move(pattern)), literal_(literal) {}
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Expected<Regex> Regex::Compile(std::string_view pattern, bool literal) {
  if (pattern.size() > kMaxPatternBytes) {
    return InvalidArgument("regex of {} bytes exceeds the limit of {}", pattern.size(), kMaxPatternBytes);
  }
  // PCRE2 refuses UCP together with LITERAL (a literal has no classes).
  uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  auto compiled = std::make_shared<Compiled>();
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                                 &error, &error_offset, nullptr);
  if (compiled->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return InvalidArgument("regex /{}/: {} at offset {}", pattern, reinterpret_cast<const char*>(message),
                           error_offset);
  }
  // Without JIT (unsupported CPU or build) the interpreter gives the same matches.
  (void)pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
  compiled->context = pcre2_match_context_create(nullptr);
  if (compiled->context == nullptr)
    return ResourceExhausted("regex /{}/: cannot allocate a match context", pattern);
  pcre2_set_match_limit(compiled->context, kMatchLimit);
  pcre2_set_depth_limit(compiled->context, kDepthLimit);
  return Regex(std::move(compiled), std::string(pattern), literal);
}

bool Regex::ForEachMatch(std::string_view subject,
                         const std::function<void(size_t, size_t)>& on_match) const {
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
  if (data == nullptr) return false;
  const auto* bytes = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t offset = 0;
  bool complete = true;
  while (offset < subject.size()) {
    int rc = pcre2_match(compiled_->code, bytes, subject.size(), offset, 0, data, compiled_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      complete = false;
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      on_match(begin, end);
      offset = end;
    } else {
      // An empty match: step over one character so the search advances.
      offset = begin + 1;
      while (offset < subject.size() && (static_cast<uint8_t>(subject[offset]) & 0xc0) == 0x80) ++offset;
    }
  }
  pcre2_match_data_free(data);
  return complete;
}

}  // namespace kiln
