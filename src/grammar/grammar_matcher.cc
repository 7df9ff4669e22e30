// The automaton's steps: expand rule references, match a character, keep the
// set of stacks small and sorted.
#include "grammar/grammar_matcher.h"

#include <algorithm>

#include "core/utf8.h"

namespace kiln {

using Kind = GrammarElement::Kind;

namespace {

// Whether `bytes` (1 to 3 of them) can begin a well-formed UTF-8 character
// longer than they are.
bool IsPlausibleUtf8Prefix(std::string_view bytes) {
  auto b0 = static_cast<uint8_t>(bytes[0]);
  size_t length = b0 >= 0xC2 && b0 <= 0xDF   ? 2
                  : b0 >= 0xE0 && b0 <= 0xEF ? 3
                  : b0 >= 0xF0 && b0 <= 0xF4 ? 4
                                             : 0;
  if (length <= bytes.size()) return false;
  for (size_t i = 1; i < bytes.size(); ++i) {
    auto b = static_cast<uint8_t>(bytes[i]);
    uint8_t lo = 0x80, hi = 0xBF;
    if (i == 1) {
      // The second byte rules out overlongs, surrogates and values past U+10FFFF.
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    }
    if (b < lo || b > hi) return false;
  }
  return true;
}

// The code points whose UTF-8 encoding starts with `bytes` (a plausible
// prefix): the missing continuation bytes at their least and greatest.
void CodePointRange(std::string_view bytes, char32_t* lo, char32_t* hi) {
  auto b0 = static_cast<uint8_t>(bytes[0]);
  size_t length = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t v = b0 & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < bytes.size(); ++i) v = (v << 6) | (static_cast<uint8_t>(bytes[i]) & 0x3F);
  *lo = *hi = v;
  for (size_t i = bytes.size(); i < length; ++i) {
    *lo = *lo << 6;
    *hi = (*hi << 6) | 0x3F;
  }
  // E0 and F0 alone would reach down into overlong encodings.
  *lo = std::max<char32_t>(*lo, length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000);
  *hi = std::min<char32_t>(*hi, 0x10FFFF);
}

}  // namespace

std::string GrammarState::Key() const {
  std::string key = pending_bytes;
  key.push_back('\0');
  for (const auto& stack : stacks) {
    key.append(reinterpret_cast<const char*>(stack.data()), stack.size() * sizeof(uint32_t));
    key.append(4, '\xff');  // no position is 0xffffffff
  }
  return key;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  for (uint32_t start : grammar_->alternatives(grammar_->root())) Expand({start}, state_.stacks);
  std::sort(state_.stacks.begin(), state_.stacks.end());
  state_.stacks.erase(std::unique(state_.stacks.begin(), state_.stacks.end()), state_.stacks.end());
}

void GrammarMatcher::Expand(std::vector<uint32_t> stack, std::vector<std::vector<uint32_t>>& out) const {
  const std::vector<GrammarElement>& elements = grammar_->elements();
  // The grammar has no left recursion, so this work list drains.
  std::vector<std::vector<uint32_t>> work;
  work.push_back(std::move(stack));
  while (!work.empty()) {
    if (out.size() > kMaxGrammarStacks) return;
    std::vector<uint32_t> s = std::move(work.back());
    work.pop_back();
    if (s.empty()) {
      out.push_back(std::move(s));
      continue;
    }
    const GrammarElement& e = elements[s.back()];
    if (e.kind == Kind::kChars) {
      out.push_back(std::move(s));
    } else if (e.kind == Kind::kEnd) {
      s.pop_back();
      work.push_back(std::move(s));
    } else {
      // The caller resumes after the reference; dropping a resume point
      // that is already at its end keeps right recursion (x*) from growing
      // the stack.
      s.back() += 1;
      if (elements[s.back()].kind == Kind::kEnd) s.pop_back();
      const std::vector<uint32_t>& alts = grammar_->alternatives(e.index);
      for (uint32_t alt : alts) {
        std::vector<uint32_t> next = s;
        next.push_back(alt);
        work.push_back(std::move(next));
      }
    }
  }
}

bool GrammarMatcher::StepCodePoint(const GrammarState& from, char32_t cp, GrammarState* to) const {
  const std::vector<GrammarElement>& elements = grammar_->elements();
  const std::vector<CharSet>& sets = grammar_->char_sets();
  to->pending_bytes.clear();
  // The mask walk steps the same few states hundreds of thousands of times:
  // reuse the stacks already allocated in *to.
  size_t count = 0;
  auto slot = [&]() -> std::vector<uint32_t>& {
    if (count == to->stacks.size()) to->stacks.emplace_back();
    return to->stacks[count++];
  };
  std::vector<std::vector<uint32_t>> expanded;
  for (const auto& stack : from.stacks) {
    if (stack.empty()) continue;
    const GrammarElement& e = elements[stack.back()];
    if (!sets[e.index].Contains(cp)) continue;
    uint32_t next = stack.back() + 1;
    if (elements[next].kind == Kind::kChars) {  // the common case: more characters of one sequence
      std::vector<uint32_t>& dst = slot();
      dst.assign(stack.begin(), stack.end());
      dst.back() = next;
      continue;
    }
    expanded.clear();
    std::vector<uint32_t> advanced = stack;
    advanced.back() = next;
    Expand(std::move(advanced), expanded);
    for (auto& s : expanded) slot().swap(s);
    if (count > kMaxGrammarStacks) {
      to->stacks.clear();
      return false;
    }
  }
  to->stacks.resize(count);
  if (count > 1) {
    std::sort(to->stacks.begin(), to->stacks.end());
    to->stacks.erase(std::unique(to->stacks.begin(), to->stacks.end()), to->stacks.end());
  }
  return count > 0;
}

bool GrammarMatcher::Step(const GrammarState& from, uint8_t byte, GrammarState* to) const {
  if (from.pending_bytes.empty() && byte < 0x80) return StepCodePoint(from, byte, to);
  std::string pending = from.pending_bytes;
  pending.push_back(static_cast<char>(byte));
  char32_t cp;
  size_t used = DecodeUtf8At(pending, 0, &cp);
  if (cp != kInvalidCodePoint && used == pending.size()) return StepCodePoint(from, cp, to);
  // Not yet a whole character: keep it pending if it can still become one.
  if (!IsPlausibleUtf8Prefix(pending)) return false;
  // Keep only the parses that some character with this prefix could continue.
  char32_t lo, hi;
  CodePointRange(pending, &lo, &hi);
  const std::vector<GrammarElement>& elements = grammar_->elements();
  const std::vector<CharSet>& sets = grammar_->char_sets();
  to->stacks.clear();
  for (const auto& stack : from.stacks) {
    if (!stack.empty() && sets[elements[stack.back()].index].Intersects(lo, hi)) to->stacks.push_back(stack);
  }
  to->pending_bytes = std::move(pending);
  return !to->stacks.empty();
}

bool GrammarMatcher::CanEnd(const GrammarState& state) {
  if (!state.pending_bytes.empty()) return false;
  // Sorted lexicographically, an empty stack comes first.
  return !state.stacks.empty() && state.stacks.front().empty();
}

bool GrammarMatcher::AcceptCodePoint(char32_t cp) {
  if (!state_.pending_bytes.empty()) return false;
  GrammarState next;
  if (!StepCodePoint(state_, cp, &next)) return false;
  state_ = std::move(next);
  return true;
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  GrammarState current = state_, next;
  for (char c : bytes) {
    if (!Step(current, static_cast<uint8_t>(c), &next)) return false;
    std::swap(current, next);
  }
  state_ = std::move(current);
  return true;
}

}  // namespace kiln
