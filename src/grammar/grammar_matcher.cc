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
  size_t count = 0;
  for (uint32_t start : grammar_->alternatives(grammar_->root())) Expand({start}, state_.stacks, &count);
  state_.stacks.resize(count);
  // Too ambiguous from the very start: nothing is accepted (see kMaxGrammarStacks).
  if (count > kMaxGrammarStacks) state_.stacks.clear();
  std::sort(state_.stacks.begin(), state_.stacks.end());
  state_.stacks.erase(std::unique(state_.stacks.begin(), state_.stacks.end()), state_.stacks.end());
}

void GrammarMatcher::Expand(const std::vector<uint32_t>& start, std::vector<std::vector<uint32_t>>& out,
                            size_t* count) const {
  const std::vector<GrammarElement>& elements = grammar_->elements();
  // Scratch kept across calls: the mask walk expands hundreds of thousands
  // of times, and reused vectors keep their capacity.
  thread_local std::vector<std::vector<uint32_t>> work;
  thread_local std::vector<uint32_t> s;
  size_t waiting = 0;
  s.assign(start.begin(), start.end());
  // The grammar has no left recursion, so every path reaches a character
  // set or an empty stack, and the work list drains.
  for (;;) {
    bool dead = false;
    while (!s.empty()) {
      const GrammarElement& e = elements[s.back()];
      if (e.kind == Kind::kChars) break;
      if (e.kind == Kind::kEnd) {
        s.pop_back();
        continue;
      }
      // The caller resumes after the reference; dropping a resume point
      // that is already at its end keeps right recursion (x*) from growing
      // the stack.
      s.back() += 1;
      if (elements[s.back()].kind == Kind::kEnd) s.pop_back();
      const std::vector<uint32_t>& alts = grammar_->alternatives(e.index);
      if (alts.empty()) {
        dead = true;
        break;
      }
      for (size_t i = 1; i < alts.size(); ++i) {
        if (waiting == work.size()) work.emplace_back();
        work[waiting].assign(s.begin(), s.end());
        work[waiting].push_back(alts[i]);
        ++waiting;
      }
      s.push_back(alts[0]);
    }
    if (!dead) {
      if (*count == out.size()) out.emplace_back();
      out[(*count)++].assign(s.begin(), s.end());
      if (*count > kMaxGrammarStacks) return;
    }
    if (waiting == 0) return;
    s.swap(work[--waiting]);
  }
}

bool GrammarMatcher::StepCodePoint(const GrammarState& from, char32_t cp, GrammarState* to) const {
  const std::vector<GrammarElement>& elements = grammar_->elements();
  const std::vector<CharSet>& sets = grammar_->char_sets();
  to->pending_bytes.clear();
  // The stacks already allocated in *to are reused (see Expand).
  size_t count = 0;
  thread_local std::vector<uint32_t> advanced;
  for (const auto& stack : from.stacks) {
    if (stack.empty()) continue;
    const GrammarElement& e = elements[stack.back()];
    if (!sets[e.index].Contains(cp)) continue;
    advanced.assign(stack.begin(), stack.end());
    advanced.back() += 1;
    Expand(advanced, to->stacks, &count);
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
  size_t count = 0;
  for (const auto& stack : from.stacks) {
    if (stack.empty() || !sets[elements[stack.back()].index].Intersects(lo, hi)) continue;
    if (count == to->stacks.size()) to->stacks.emplace_back();
    to->stacks[count++].assign(stack.begin(), stack.end());
  }
  to->stacks.resize(count);
  to->pending_bytes = std::move(pending);
  return count > 0;
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
