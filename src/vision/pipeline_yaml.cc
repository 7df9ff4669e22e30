#include "vision/pipeline_yaml.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "core/utf8.h"

namespace kiln {
namespace {

constexpr int kMaxYamlDepth = 64;
// Aliases let a few lines name exponentially many values (each list of ten
// aliases to the list before); a pipeline has tens or hundreds.
constexpr size_t kMaxYamlValues = 20000;

std::string Where(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return file;
  return fmt::format("{}:{}:{}", file, mark.line + 1, mark.column + 1);
}

// The path of keys and indices to a node, for messages: stages[2].width.
std::string KeyText(const std::string& path) { return path.empty() ? "the document" : "'" + path + "'"; }

bool IsNullText(const std::string& s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

bool IsBoolText(const std::string& s, bool* value) {
  if (s == "true" || s == "True" || s == "TRUE") return *value = true, true;
  if (s == "false" || s == "False" || s == "FALSE") return *value = false, true;
  return false;
}

// The YAML 1.2 core schema's number forms, scanned by hand: std::regex
// recurses once per character, and scalars may be 64 KiB long.
size_t SkipSign(const std::string& s) {
  return !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
}

size_t SkipDigits(const std::string& s, size_t i) {
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return i;
}

bool IsIntText(const std::string& s) {
  const size_t start = SkipSign(s);
  const size_t end = SkipDigits(s, start);
  return end > start && end == s.size();
}

// [-+]? ( . digits | digits ( . digits? )? ) ( [eE] [-+]? digits )?
bool IsFloatText(const std::string& s) {
  size_t i = SkipSign(s);
  const size_t whole_end = SkipDigits(s, i);
  const bool whole = whole_end > i;
  i = whole_end;
  if (i < s.size() && s[i] == '.') {
    const size_t fraction_end = SkipDigits(s, i + 1);
    if (!whole && fraction_end == i + 1) return false;
    i = fraction_end;
  } else if (!whole) {
    return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const size_t exponent_end = SkipDigits(s, i);
    if (exponent_end == i) return false;
    i = exponent_end;
  }
  return i == s.size();
}

bool IsNonFiniteText(const std::string& s) {
  const std::string rest = s.substr(SkipSign(s));
  if (rest == ".inf" || rest == ".Inf" || rest == ".INF") return true;
  return s == ".nan" || s == ".NaN" || s == ".NAN";
}

// Whether a token may start at text[i]: the line holds nothing before it but
// spaces, or its last character before it is an indicator that a node
// follows (a flow collection's "[", "{" or "," inside one).
bool StartsToken(std::string_view text, size_t i, size_t line_start, int depth) {
  while (i > line_start && (text[i - 1] == ' ' || text[i - 1] == '\t')) --i;
  if (i == line_start) return true;
  const char before = text[i - 1];
  return before == ':' || before == '-' || before == '?' || (depth > 0 && (before == '[' || before == '{' || before == ','));
}

// YAML text holds no control characters but tab, line feed and carriage
// return; yaml-cpp 0.7 reads a NUL as the end of the stream and then makes
// documents without end.
Status RefuseControlCharacters(std::string_view text, const std::string& file) {
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    } else if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
      return InvalidArgument("{}:{}:{}: not valid YAML: control character 0x{:02x}", file, line,
                             i - line_start + 1, static_cast<unsigned>(c));
    }
  }
  return Status::Ok();
}

// yaml-cpp 0.7 never returns on some commas outside every flow collection:
// one after a flow collection or a quoted scalar ("{a: b},", "\"a\" ,") or
// where a node would start (a document that is ",", or "!tag ," and
// "&anchor ," where a tag or an anchor is followed by no node). None is
// valid YAML (a plain scalar cannot start with ","; a line that continues
// one outside a flow collection may not either, here): such a comma is
// refused before the parser sees the text. Quoted scalars, comments and
// block scalars are skipped.
Status RefuseStrayComma(std::string_view text, const std::string& file) {
  int depth = 0;
  bool after_node = false;  // the last token outside flow collections closed one, or a quoted scalar
  bool after_property = false;  // ... or was a tag or an anchor: a node may start next
  int line = 1;
  size_t line_start = 0;
  int block_indent = -1;  // in a block scalar: lines indented deeper than this are its text
  auto line_indent = [&](size_t start) {
    size_t j = start;
    while (j < text.size() && text[j] == ' ') ++j;
    return j - start;
  };
  size_t i = 0;
  while (i < text.size()) {
    if (i == line_start && block_indent >= 0) {
      const size_t indent = line_indent(i);
      const bool blank = i + indent >= text.size() || text[i + indent] == '\n' || text[i + indent] == '\r';
      if (blank || static_cast<int>(indent) > block_indent) {
        // The line is the scalar's text (or blank): on to the next one.
        while (i < text.size() && text[i] != '\n') ++i;
        if (i < text.size()) {
          ++line;
          line_start = ++i;
        }
        continue;
      }
      block_indent = -1;
    }
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = ++i;
      continue;
    }
    if (c == '#' && (i == line_start || text[i - 1] == ' ' || text[i - 1] == '\t')) {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if ((c == '"' || c == '\'') && StartsToken(text, i, line_start, depth)) {
      for (++i; i < text.size(); ++i) {
        if (c == '"' && text[i] == '\\') {
          ++i;
        } else if (text[i] == c && c == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
          ++i;
        } else if (text[i] == c) {
          break;
        } else if (text[i] == '\n') {
          ++line;
          line_start = i + 1;
        }
      }
      ++i;
      after_node = depth == 0;
      continue;
    }
    if ((c == '[' || c == '{') && (depth > 0 || StartsToken(text, i, line_start, depth))) {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
      after_node = depth == 0;
      ++i;
      continue;
    } else if ((c == '!' || c == '&') && depth == 0 && StartsToken(text, i, line_start, depth)) {
      // The property runs to a space or a flow indicator.
      while (i < text.size() && std::string_view(" \t\r\n,[]{}").find(text[i]) == std::string_view::npos) ++i;
      after_node = false;
      after_property = true;
      continue;
    } else if (c == ',' && depth == 0 &&
               (after_node || after_property || StartsToken(text, i, line_start, depth))) {
      return InvalidArgument("{}:{}:{}: not valid YAML: ',' outside a flow collection", file, line, i - line_start + 1);
    } else if ((c == '|' || c == '>') && depth == 0 && StartsToken(text, i, line_start, depth)) {
      block_indent = static_cast<int>(line_indent(line_start));
    }
    if (c != ' ' && c != '\t' && c != '\r') after_node = after_property = false;
    ++i;
  }
  return Status::Ok();
}

// Counts the documents of a YAML text from the parser's events, without
// building them, and gives up past a bound on events. yaml-cpp 0.7 makes
// documents without end of some invalid text (the fuzzer found a NUL, a
// tag with no node then a comma, two flow mappings with no comma between):
// counted first, such text is refused before a node is built.
class DocumentCounter : public YAML::EventHandler {
 public:
  static constexpr int kMaxDocuments = 64;
  struct TooManyEvents {};

  explicit DocumentCounter(size_t text_bytes) : max_events_(4 * text_bytes + 64) {}

  int documents() const { return documents_; }
  // Where the second document's first node is (null before it is seen).
  const YAML::Mark& second_document() const { return second_document_; }

  void OnDocumentStart(const YAML::Mark&) override {
    Count(nullptr);
    ++documents_;
  }
  void OnDocumentEnd() override { Count(nullptr); }
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Count(&mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Count(&mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
    Count(&mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Count(&mark);
  }
  void OnSequenceEnd() override { Count(nullptr); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Count(&mark);
  }
  void OnMapEnd() override { Count(nullptr); }

 private:
  void Count(const YAML::Mark* node) {
    if (++events_ > max_events_) throw TooManyEvents{};
    if (node != nullptr && documents_ == 2 && second_document_.is_null()) second_document_ = *node;
  }

  size_t events_ = 0;
  const size_t max_events_;
  int documents_ = 0;
  YAML::Mark second_document_ = YAML::Mark::null_mark();
};

class YamlToJson {
 public:
  YamlToJson(const std::string& file, std::map<std::string, int>* lines) : file_(file), lines_(lines) {}

  Expected<nlohmann::json> Convert(const YAML::Node& node, const std::string& path, int depth) {
    if (lines_ != nullptr && !node.Mark().is_null()) (*lines_)[path] = node.Mark().line + 1;
    if (++values_ > kMaxYamlValues) {
      return InvalidArgument("{}: {} expands to more than {} values (aliases to lists of aliases?)",
                             Where(file_, node.Mark()), KeyText(path), kMaxYamlValues);
    }
    if (depth > kMaxYamlDepth) {
      return InvalidArgument("{}: {} nests deeper than {} levels (an alias to its own anchor?)",
                             Where(file_, node.Mark()), KeyText(path), kMaxYamlDepth);
    }
    // Text goes into JSON, which holds UTF-8 only.
    if (node.IsScalar() && !IsValidUtf8(node.Scalar())) {
      return InvalidArgument("{}: {} is not valid UTF-8", Where(file_, node.Mark()), KeyText(path));
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return nlohmann::json();
      case YAML::NodeType::Scalar:
        return Scalar(node, path);
      case YAML::NodeType::Sequence: {
        nlohmann::json array = nlohmann::json::array();
        for (size_t i = 0; i < node.size(); ++i) {
          KILN_ASSIGN_OR_RETURN(nlohmann::json item, Convert(node[i], fmt::format("{}[{}]", path, i), depth + 1));
          array.push_back(std::move(item));
        }
        return array;
      }
      case YAML::NodeType::Map: {
        nlohmann::json object = nlohmann::json::object();
        for (auto it = node.begin(); it != node.end(); ++it) {
          // Copies: the iterator's pair is a temporary (Nodes are handles).
          const YAML::Node key = it->first;
          const YAML::Node value = it->second;
          if (!key.IsScalar()) {
            return InvalidArgument("{}: a key in {} is a {}, not text", Where(file_, key.Mark()), KeyText(path),
                                   key.IsMap() ? "mapping" : key.IsSequence() ? "list" : "null");
          }
          const std::string name = key.Scalar();
          if (!IsValidUtf8(name)) {
            return InvalidArgument("{}: a key in {} is not valid UTF-8", Where(file_, key.Mark()), KeyText(path));
          }
          const std::string child = path.empty() ? name : path + "." + name;
          if (object.contains(name)) {
            return InvalidArgument("{}: key {} is given twice", Where(file_, key.Mark()), KeyText(child));
          }
          KILN_ASSIGN_OR_RETURN(object[name], Convert(value, child, depth + 1));
        }
        return object;
      }
    }
    return Internal("{}: a YAML node of unknown type", Where(file_, node.Mark()));
  }

 private:
  Expected<nlohmann::json> Scalar(const YAML::Node& node, const std::string& path) {
    const std::string& text = node.Scalar();
    const std::string& tag = node.Tag();
    const std::string where = Where(file_, node.Mark());
    if (tag == "!" || tag == "tag:yaml.org,2002:str") return nlohmann::json(text);  // quoted, or tagged a string
    bool flag = false;
    if (tag == "tag:yaml.org,2002:null") {
      if (!IsNullText(text)) return InvalidArgument("{}: {} is tagged !!null but holds '{}'", where, KeyText(path), text);
      return nlohmann::json();
    }
    if (tag == "tag:yaml.org,2002:bool") {
      if (!IsBoolText(text, &flag)) {
        return InvalidArgument("{}: {} is tagged !!bool but holds '{}'", where, KeyText(path), text);
      }
      return nlohmann::json(flag);
    }
    if (tag == "tag:yaml.org,2002:int") {
      if (!IsIntText(text)) return InvalidArgument("{}: {} is tagged !!int but holds '{}'", where, KeyText(path), text);
      return Integer(text, where, path);
    }
    if (tag == "tag:yaml.org,2002:float") {
      if (!IsFloatText(text)) {
        return InvalidArgument("{}: {} is tagged !!float but holds '{}'", where, KeyText(path), text);
      }
      return Float(text, where, path);
    }
    if (tag != "?") {
      return InvalidArgument("{}: {} has tag '{}' (a pipeline takes !!str, !!int, !!float, !!bool, !!null)", where,
                             KeyText(path), tag);
    }
    // A plain scalar: typed by its text.
    if (IsNullText(text)) return nlohmann::json();
    if (IsBoolText(text, &flag)) return nlohmann::json(flag);
    if (IsIntText(text)) return Integer(text, where, path);
    if (IsFloatText(text)) return Float(text, where, path);
    if (IsNonFiniteText(text)) {
      return InvalidArgument("{}: {} is {}; a pipeline's numbers are finite", where, KeyText(path), text);
    }
    return nlohmann::json(text);
  }

  static Expected<nlohmann::json> Integer(const std::string& text, const std::string& where, const std::string& path) {
    const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
    int64_t value = 0;
    auto [end, ec] = std::from_chars(begin, text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return InvalidArgument("{}: {} is {}, beyond a 64-bit integer", where, KeyText(path), text);
    }
    return nlohmann::json(value);
  }

  static Expected<nlohmann::json> Float(const std::string& text, const std::string& where, const std::string& path) {
    const double value = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(value)) return InvalidArgument("{}: {} is {}, beyond a double", where, KeyText(path), text);
    return nlohmann::json(value);
  }

  const std::string& file_;
  std::map<std::string, int>* lines_;
  size_t values_ = 0;
};

}  // namespace

bool IsYamlPath(const std::string& path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".yaml") || ends_with(".yml");
}

Expected<nlohmann::json> PipelineYamlToJson(std::string_view text, const std::string& file,
                                            std::map<std::string, int>* lines) {
  KILN_RETURN_IF_ERROR(RefuseControlCharacters(text, file));
  KILN_RETURN_IF_ERROR(RefuseStrayComma(text, file));
  const std::string owned(text);
  DocumentCounter counter(text.size());
  YAML::Node document;
  try {
    std::istringstream stream(owned);
    YAML::Parser parser(stream);
    while (counter.documents() < DocumentCounter::kMaxDocuments && parser.HandleNextDocument(counter)) {
    }
    if (counter.documents() == 1) document = YAML::Load(owned);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("{}: not valid YAML: {}", Where(file, e.mark), e.msg);
  } catch (const DocumentCounter::TooManyEvents&) {
    return InvalidArgument("{}: not valid YAML: the parser found no end to it", file);
  }
  if (counter.documents() == 0) return InvalidArgument("{}: the YAML file is empty", file);
  if (counter.documents() > 1) {
    return InvalidArgument(
        "{}: holds {}{} YAML documents; a pipeline is one", Where(file, counter.second_document()),
        counter.documents() == DocumentCounter::kMaxDocuments ? "at least " : "", counter.documents());
  }
  try {
    return YamlToJson(file, lines).Convert(document, "", 0);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("{}: {}", Where(file, e.mark), e.msg);
  }
}

Status WithYamlLine(const Status& error, const nlohmann::json& json, const std::map<std::string, int>& lines,
                    const std::string& file) {
  static const std::regex stage_name("stage '([^']*)'");
  const std::string message = error.message();
  const Status plain = error.WithContext(fmt::format("pipeline {}", file));
  std::smatch m;
  if (!std::regex_search(message, m, stage_name) || !json.is_object() || !json.contains("stages") ||
      !json["stages"].is_array()) {
    return plain;
  }
  const nlohmann::json& stages = json["stages"];
  for (size_t i = 0; i < stages.size(); ++i) {
    if (!stages[i].is_object() || stages[i].value("name", nlohmann::json()) != m[1].str()) continue;
    std::string path = fmt::format("stages[{}]", i);
    // The key the message names, where it names one.
    for (const auto& item : stages[i].items()) {
      if (item.key() != "name" && (message.find(" " + item.key() + " ") != std::string::npos ||
                                   message.find("'" + item.key() + "'") != std::string::npos)) {
        path += "." + item.key();
        break;
      }
    }
    auto line = lines.find(path);
    if (line == lines.end()) return plain;
    return error.WithContext(fmt::format("pipeline {}:{}", file, line->second));
  }
  return plain;
}

}  // namespace kiln
