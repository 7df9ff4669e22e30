// Reading content, reasoning and tool calls out of a streaming chat reply.
#include "server/chat_output_parser.h"

#include <random>

#include "core/json_brackets.h"

namespace kiln::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t SkipSpace(const std::string& s, size_t i) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

// How many of the text's last bytes could begin one of the markers.
size_t HeldBackLength(const std::string& text, const std::vector<std::string>& markers) {
  size_t held = 0;
  for (const std::string& m : markers) {
    for (size_t k = std::min(m.size() - 1, text.size()); k > held; --k) {
      if (text.compare(text.size() - k, k, m, 0, k) == 0) {
        held = k;
        break;
      }
    }
  }
  return held;
}

enum class Match { kYes, kMore, kNo };

// Whether `literal` is at s[*i] (moving past it), may be with more text, or is not.
Match Expect(const std::string& s, size_t* i, std::string_view literal) {
  size_t available = std::min(literal.size(), s.size() - *i);
  if (s.compare(*i, available, literal.data(), available) != 0) return Match::kNo;
  if (available < literal.size()) return Match::kMore;
  *i += literal.size();
  return Match::kYes;
}

// A JSON string at s[*i], decoded into `out`.
Match ExpectString(const std::string& s, size_t* i, std::string* out) {
  if (*i >= s.size()) return Match::kMore;
  if (s[*i] != '"') return Match::kNo;
  size_t j = *i + 1;
  while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
  if (j >= s.size()) return Match::kMore;
  nlohmann::json value = nlohmann::json::parse(s.begin() + static_cast<std::ptrdiff_t>(*i),
                                               s.begin() + static_cast<std::ptrdiff_t>(j + 1), nullptr, false);
  if (value.is_discarded() || !value.is_string()) return Match::kNo;
  *out = value.get<std::string>();
  *i = j + 1;
  return Match::kYes;
}

// Where the JSON object or array at s[start] ends (one past its last
// byte), or npos when it has not ended yet. REQUIRES: s[start] is { or [.
size_t CompositeEnd(const std::string& s, size_t start) {
  JsonBrackets brackets;
  for (size_t i = start; i < s.size(); ++i) {
    if (brackets.Push(s[i]) == 0) return i + 1;
  }
  return std::string::npos;
}

ChatDelta Delta(ChatDelta::Kind kind, std::string text, int index = 0) {
  ChatDelta d;
  d.kind = kind;
  d.text = std::move(text);
  d.index = index;
  return d;
}

}  // namespace

std::string NewToolCallId() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng((uint64_t{std::random_device{}()} << 32) ^ std::random_device{}());
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return id;
}

ChatOutputParser::ChatOutputParser(ChatOutputOptions options) : options_(options) {
  if (options_.tool_calls) {
    switch (options_.format) {
      case ToolCallFormat::kHermes:
        triggers_ = {"<tool_call>"};
        break;
      case ToolCallFormat::kLlama3Json:
        triggers_ = {std::string(kPythonTag), "{\"name\""};
        break;
      case ToolCallFormat::kMistral:
        triggers_ = {"[TOOL_CALLS]"};
        break;
    }
  }
  switch (options_.thinking) {
    case ThinkingMode::kNone:
      state_ = State::kContent;
      break;
    case ThinkingMode::kOptional:
      state_ = State::kThinkStart;
      break;
    case ThinkingMode::kInside:
      state_ = State::kThinking;
      break;
  }
}

std::vector<ChatDelta> ChatOutputParser::Feed(std::string_view text) {
  std::vector<ChatDelta> out;
  pending_.append(text);
  while (Step(&out, /*at_end=*/false)) {
  }
  return out;
}

std::vector<ChatDelta> ChatOutputParser::Finish() {
  std::vector<ChatDelta> out;
  while (Step(&out, /*at_end=*/true)) {
  }
  pending_.clear();
  return out;
}

void ChatOutputParser::EmitContent(std::string text, std::vector<ChatDelta>* out) {
  if (strip_leading_space_) {
    size_t first = SkipSpace(text, 0);
    if (first == text.size()) return;
    text.erase(0, first);
    strip_leading_space_ = false;
  }
  if (!text.empty()) out->push_back(Delta(ChatDelta::Kind::kContent, std::move(text)));
}

bool ChatOutputParser::Step(std::vector<ChatDelta>* out, bool at_end) {
  switch (state_) {
    case State::kThinkStart: {
      size_t i = SkipSpace(pending_, 0);
      Match m = Expect(pending_, &i, kThinkOpen);
      if (m == Match::kYes) {
        pending_.erase(0, i);
        state_ = State::kThinking;
        return true;
      }
      if (m == Match::kMore && !at_end) return false;
      state_ = State::kContent;
      return true;
    }
    case State::kThinking: {
      size_t close = pending_.find(kThinkClose);
      if (close != std::string::npos) {
        if (close > 0) out->push_back(Delta(ChatDelta::Kind::kReasoning, pending_.substr(0, close)));
        pending_.erase(0, close + kThinkClose.size());
        state_ = State::kContent;
        strip_leading_space_ = true;
        return true;
      }
      size_t keep = at_end ? 0 : HeldBackLength(pending_, {std::string(kThinkClose)});
      if (pending_.size() > keep) {
        out->push_back(Delta(ChatDelta::Kind::kReasoning, pending_.substr(0, pending_.size() - keep)));
        pending_.erase(0, pending_.size() - keep);
      }
      return false;
    }
    case State::kContent:
      return StepContent(out, at_end);
    case State::kListOpen: {
      size_t i = SkipSpace(pending_, 0);
      Match m = Expect(pending_, &i, "[");
      if (m == Match::kYes) {
        call_text_ += pending_.substr(0, i);
        pending_.erase(0, i);
        state_ = State::kCallHeader;
        return true;
      }
      if (m == Match::kMore) return false;  // at the end: a call cut off before its name is dropped
      EmitContent(call_text_, out);
      call_text_.clear();
      state_ = State::kContent;
      return true;
    }
    case State::kCallHeader:
      return StepHeader(out, at_end);
    case State::kArguments:
      return StepArguments(out);
    case State::kCallEnd: {
      size_t i = SkipSpace(pending_, 0);
      if (i == pending_.size()) return false;
      if (pending_[i] == '}') pending_.erase(0, i + 1);
      state_ = State::kAfterCall;
      return true;
    }
    case State::kAfterCall:
      return StepAfterCall(at_end);
  }
  return false;
}

bool ChatOutputParser::StepContent(std::vector<ChatDelta>* out, bool at_end) {
  size_t best = std::string::npos;
  const std::string* trigger = nullptr;
  for (const std::string& t : triggers_) {
    size_t at = pending_.find(t);
    if (at < best) {
      best = at;
      trigger = &t;
    }
  }
  if (trigger != nullptr) {
    EmitContent(pending_.substr(0, best), out);
    // Llama's bare JSON call is its own trigger and stays to be read.
    const bool kept = options_.format == ToolCallFormat::kLlama3Json && *trigger != kPythonTag;
    const size_t consumed = best + (kept ? 0 : trigger->size());
    call_text_ = kept ? "" : *trigger;
    pending_.erase(0, consumed);
    state_ = options_.format == ToolCallFormat::kMistral ? State::kListOpen : State::kCallHeader;
    return true;
  }
  size_t keep = at_end ? 0 : HeldBackLength(pending_, triggers_);
  if (pending_.size() > keep) {
    EmitContent(pending_.substr(0, pending_.size() - keep), out);
    pending_.erase(0, pending_.size() - keep);
  }
  return false;
}

bool ChatOutputParser::StepHeader(std::vector<ChatDelta>* out, bool at_end) {
  size_t i = SkipSpace(pending_, 0);
  std::string name;
  Match m = Expect(pending_, &i, "{");
  auto next = [&](auto&& step) {
    if (m != Match::kYes) return;
    i = SkipSpace(pending_, i);
    m = step();
  };
  next([&] { return Expect(pending_, &i, "\"name\""); });
  next([&] { return Expect(pending_, &i, ":"); });
  next([&] { return ExpectString(pending_, &i, &name); });
  next([&] { return Expect(pending_, &i, ","); });
  next([&] {
    size_t j = i;
    Match a = Expect(pending_, &j, "\"arguments\"");
    if (a == Match::kNo) a = Expect(pending_, &j, "\"parameters\"");
    i = j;
    return a;
  });
  next([&] { return Expect(pending_, &i, ":"); });
  if (m == Match::kYes) {
    pending_.erase(0, i);
    ChatDelta start = Delta(ChatDelta::Kind::kToolCallStart, name, num_calls_++);
    start.id = NewToolCallId();
    out->push_back(std::move(start));
    call_text_.clear();
    state_ = State::kArguments;
    args_started_ = args_primitive_ = in_string_ = escaped_ = false;
    depth_ = 0;
    return true;
  }
  if (m == Match::kMore) {
    if (!at_end) return false;
    pending_.clear();  // a call cut off before its name is dropped
    call_text_.clear();
    state_ = State::kContent;
    return false;
  }
  return RecoverCall(out, at_end);
}

bool ChatOutputParser::StepArguments(std::vector<ChatDelta>* out) {
  size_t i = 0;
  if (!args_started_) {
    i = SkipSpace(pending_, 0);
    pending_.erase(0, i);
    i = 0;
    if (pending_.empty()) return false;
    args_started_ = true;
    args_primitive_ = pending_[0] != '{' && pending_[0] != '[' && pending_[0] != '"';
  }
  bool ended = false;
  for (; i < pending_.size() && !ended; ++i) {
    char c = pending_[i];
    if (args_primitive_) {
      if (c == ',' || c == '}' || c == ']' || IsSpace(c)) {
        ended = true;
        break;
      }
    } else if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        ended = depth_ == 0;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      ended = --depth_ == 0;
    }
  }
  if (i > 0) {
    out->push_back(Delta(ChatDelta::Kind::kToolArguments, pending_.substr(0, i), num_calls_ - 1));
    pending_.erase(0, i);
  }
  if (ended) {
    state_ = State::kCallEnd;
    return true;
  }
  return false;
}

bool ChatOutputParser::StepAfterCall(bool at_end) {
  size_t i = SkipSpace(pending_, 0);
  Match m = Match::kNo;
  State next = State::kContent;
  switch (options_.format) {
    case ToolCallFormat::kHermes:
      m = Expect(pending_, &i, "</tool_call>");
      break;
    case ToolCallFormat::kLlama3Json:
      m = Expect(pending_, &i, ";");
      next = State::kCallHeader;
      break;
    case ToolCallFormat::kMistral:
      m = Expect(pending_, &i, ",");
      next = State::kCallHeader;
      if (m == Match::kNo) {
        m = Expect(pending_, &i, "]");
        next = State::kContent;
      }
      break;
  }
  if (m == Match::kMore && !at_end) return false;
  if (m == Match::kYes) pending_.erase(0, i);
  state_ = m == Match::kYes ? next : State::kContent;
  strip_leading_space_ = true;
  return true;
}

bool ChatOutputParser::RecoverCall(std::vector<ChatDelta>* out, bool at_end) {
  size_t start = SkipSpace(pending_, 0);
  if (start < pending_.size() && pending_[start] == '{') {
    size_t end = CompositeEnd(pending_, start);
    if (end == std::string::npos) {
      if (!at_end) return false;
      pending_.clear();  // a call cut off before its name
      state_ = State::kContent;
      return false;
    }
    nlohmann::ordered_json call = nlohmann::ordered_json::parse(pending_.substr(start, end - start), nullptr, false);
    if (call.is_object() && call.contains("name") && call["name"].is_string()) {
      nlohmann::ordered_json args = call.contains("arguments")    ? call["arguments"]
                                    : call.contains("parameters") ? call["parameters"]
                                                                  : nlohmann::ordered_json::object();
      ChatDelta begin = Delta(ChatDelta::Kind::kToolCallStart, call["name"].get<std::string>(), num_calls_++);
      begin.id = NewToolCallId();
      out->push_back(std::move(begin));
      std::string text = args.is_string() ? args.get<std::string>() : args.dump();
      if (!text.empty()) out->push_back(Delta(ChatDelta::Kind::kToolArguments, text, num_calls_ - 1));
      pending_.erase(0, end);
      call_text_.clear();
      state_ = State::kAfterCall;
      return true;
    }
  }
  // Not a call after all: its text is content.
  EmitContent(call_text_, out);
  call_text_.clear();
  if (options_.format == ToolCallFormat::kLlama3Json && start < pending_.size() && pending_[start] == '{') {
    // The bare-JSON trigger was left in place: the object (complete, or all
    // there is at the end) goes out as content so it is not read again.
    size_t end = CompositeEnd(pending_, start);
    size_t cut = end == std::string::npos ? pending_.size() : end;
    EmitContent(pending_.substr(0, cut), out);
    pending_.erase(0, cut);
  }
  state_ = State::kContent;
  return true;
}

ParsedChatOutput ParseChatOutput(const ChatOutputOptions& options, std::string_view text) {
  ChatOutputParser parser(options);
  std::vector<ChatDelta> deltas = parser.Feed(text);
  std::vector<ChatDelta> rest = parser.Finish();
  deltas.insert(deltas.end(), rest.begin(), rest.end());
  ParsedChatOutput out;
  for (ChatDelta& d : deltas) {
    switch (d.kind) {
      case ChatDelta::Kind::kContent:
        out.content += d.text;
        break;
      case ChatDelta::Kind::kReasoning:
        out.reasoning += d.text;
        break;
      case ChatDelta::Kind::kToolCallStart:
        out.tool_calls.push_back({{"id", d.id},
                                  {"type", "function"},
                                  {"function", {{"name", d.text}, {"arguments", ""}}}});
        break;
      case ChatDelta::Kind::kToolArguments: {
        auto& args = out.tool_calls[static_cast<size_t>(d.index)]["function"]["arguments"];
        args = args.get<std::string>() + d.text;
        break;
      }
    }
  }
  return out;
}

}  // namespace kiln::server
