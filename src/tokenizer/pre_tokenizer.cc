// Pre-tokenizer steps with Hugging Face's semantics: each step maps every
// current piece to zero or more pieces; empty pieces are dropped.
#include "tokenizer/pre_tokenizer.h"

namespace kiln {
namespace {

struct Span {
  size_t begin, end;
  bool is_match;
};

// Applies Hugging Face's delimiter behaviours to the alternating spans of a
// piece (matches and the gaps between them, none empty).
std::vector<Span> ApplyBehavior(std::vector<Span> spans, SplitBehavior behavior) {
  std::vector<Span> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) out.push_back(s);
      }
      return out;
    case SplitBehavior::kIsolated: return spans;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      return {out.rbegin(), out.rend()};
    case SplitBehavior::kContiguous:
      for (size_t i = 0; i < spans.size(); ++i) {
        if (i > 0 && spans[i].is_match == previous_match) {
          out.back().end = spans[i].end;
        } else {
          out.push_back(spans[i]);
        }
        previous_match = spans[i].is_match;
      }
      return out;
  }
  return spans;
}

void SplitPiece(const std::string& piece, const Regex& regex, SplitBehavior behavior, bool invert,
                std::vector<std::string>& out) {
  std::vector<Span> spans;
  size_t last = 0;
  bool complete = regex.ForEachMatch(piece, [&](size_t begin, size_t end) {
    if (begin > last) spans.push_back({last, begin, invert});
    spans.push_back({begin, end, !invert});
    last = end;
  });
  // Text the search did not reach (its budget ran out) stays one piece.
  if (last < piece.size()) spans.push_back({last, piece.size(), complete ? invert : false});
  for (const Span& s : ApplyBehavior(std::move(spans), behavior)) {
    if (s.end > s.begin) out.emplace_back(piece, s.begin, s.end - s.begin);
  }
}

void MetaspacePiece(std::string piece, const std::string& replacement, bool prepend, bool split,
                    std::vector<std::string>& out) {
  std::string replaced;
  replaced.reserve(piece.size() + replacement.size());
  for (char c : piece) {
    if (c == ' ') {
      replaced += replacement;
    } else {
      replaced += c;
    }
  }
  if (prepend && replaced.compare(0, replacement.size(), replacement) != 0) replaced = replacement + replaced;
  if (!split || replacement.empty()) {
    if (!replaced.empty()) out.push_back(std::move(replaced));
    return;
  }
  // Each replacement starts a new piece (MergedWithNext).
  size_t start = 0;
  size_t pos = replaced.find(replacement, replacement.size() <= replaced.size() ? 1 : 0);
  while (pos != std::string::npos && pos > 0) {
    out.push_back(replaced.substr(start, pos - start));
    start = pos;
    pos = replaced.find(replacement, pos + replacement.size());
  }
  if (start < replaced.size()) out.push_back(replaced.substr(start));
}

}  // namespace

void PreTokenizer::AddSplit(Regex pattern, SplitBehavior behavior, bool invert) {
  Step step{Kind::kSplit, std::make_shared<const Regex>(std::move(pattern))};
  step.behavior = behavior;
  step.invert = invert;
  steps_.push_back(std::move(step));
}

Status PreTokenizer::AddByteLevel(bool add_prefix_space, bool use_regex) {
  if (add_prefix_space) steps_.push_back(Step{Kind::kByteLevelPrefix, nullptr});
  if (use_regex) {
    KILN_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(kGpt2SplitPattern));
    AddSplit(std::move(regex), SplitBehavior::kIsolated, false);
  }
  return Status::Ok();
}

void PreTokenizer::AddMetaspace(std::string replacement, PrependScheme scheme, bool split) {
  Step step{Kind::kMetaspace, nullptr};
  step.replacement = std::move(replacement);
  step.scheme = scheme;
  step.split = split;
  steps_.push_back(std::move(step));
}

void PreTokenizer::Apply(std::string_view text, bool at_text_start, std::vector<std::string>& out) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    out.emplace_back(text);
    return;
  }
  std::vector<std::string> pieces{std::string(text)};
  std::vector<std::string> next;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    next.clear();
    for (size_t i = 0; i < pieces.size(); ++i) {
      switch (step.kind) {
        case Kind::kSplit: SplitPiece(pieces[i], *step.regex, step.behavior, step.invert, next); break;
        case Kind::kByteLevelPrefix:
          if (pieces[i].empty() || pieces[i][0] != ' ') {
            next.push_back(std::string(1, ' ').append(pieces[i]));
          } else {
            next.push_back(std::move(pieces[i]));
          }
          break;
        case Kind::kMetaspace: {
          bool prepend = step.scheme == PrependScheme::kAlways ||
                         (step.scheme == PrependScheme::kFirst && at_text_start && i == 0);
          MetaspacePiece(std::move(pieces[i]), step.replacement, prepend, step.split, next);
          break;
        }
      }
    }
    pieces.swap(next);
  }
  for (std::string& p : pieces) {
    if (!p.empty()) out.push_back(std::move(p));
  }
}

}  // namespace kiln
