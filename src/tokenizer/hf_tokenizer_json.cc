// tokenizer.json -> TokenizerSpec. Every field is checked: the file may come
// from anywhere.
#include "tokenizer/hf_tokenizer_json.h"

#include <unordered_map>

#include "core/json_input.h"
#include "tokenizer/pre_tokenizer.h"

namespace kiln {
namespace {

using nlohmann::json;

// What the decoder section says about the pieces.
struct DecoderTraits {
  bool byte_level = false;
  bool strip_leading_space = false;
};

Expected<std::string> TypeOf(const json& node, const std::string& where) {
  if (!node.is_object()) return Corrupt("{}: should be an object", where);
  return JsonString(node, "type", "", where);
}

// {"String": "x"} or {"Regex": "x"}, compiled.
Expected<Regex> ReadPattern(const json& node, const std::string& where) {
  const json* pattern = JsonField(node, "pattern");
  if (pattern == nullptr || !pattern->is_object())
    return Corrupt("{}: \"pattern\" should be an object", where);
  const json* literal = JsonField(*pattern, "String");
  const json* regex = JsonField(*pattern, "Regex");
  if ((literal != nullptr && literal->is_string()) || (regex != nullptr && regex->is_string())) {
    bool is_literal = literal != nullptr && literal->is_string();
    auto compiled = Regex::Compile((is_literal ? literal : regex)->get<std::string>(), is_literal);
    if (!compiled.ok()) return compiled.status().WithContext(where);
    return compiled;
  }
  return Corrupt("{}: \"pattern\" should hold a \"String\" or a \"Regex\"", where);
}

Status ParseNormalizer(const json& node, const std::string& where, Normalizer& out) {
  if (node.is_null()) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(std::string type, TypeOf(node, where));
  std::string here = where + " (" + type + ")";
  if (type == "Sequence") {
    const json* list = JsonField(node, "normalizers");
    if (list == nullptr || !list->is_array()) return Corrupt("{}: \"normalizers\" should be a list", here);
    for (size_t i = 0; i < list->size(); ++i) {
      KILN_RETURN_IF_ERROR(ParseNormalizer((*list)[i], fmt::format("{}.normalizers[{}]", where, i), out));
    }
  } else if (type == "NFC") {
    out.AddUnicodeForm(Normalizer::Form::kNfc);
  } else if (type == "NFD") {
    out.AddUnicodeForm(Normalizer::Form::kNfd);
  } else if (type == "NFKC") {
    out.AddUnicodeForm(Normalizer::Form::kNfkc);
  } else if (type == "NFKD") {
    out.AddUnicodeForm(Normalizer::Form::kNfkd);
  } else if (type == "Prepend") {
    KILN_ASSIGN_OR_RETURN(std::string prefix, JsonString(node, "prepend", "", here));
    out.AddPrepend(std::move(prefix));
  } else if (type == "Replace") {
    KILN_ASSIGN_OR_RETURN(std::string content, JsonString(node, "content", "", here));
    const json* pattern = JsonField(node, "pattern");
    if (const json* s = pattern ? JsonField(*pattern, "String") : nullptr; s != nullptr && s->is_string()) {
      out.AddReplace(s->get<std::string>(), std::move(content));
    } else {
      KILN_ASSIGN_OR_RETURN(Regex regex, ReadPattern(node, here));
      out.AddReplaceRegex(std::move(regex), std::move(content));
    }
  } else if (type == "Lowercase") {
    out.AddLowercase();
  } else if (type == "Strip") {
    KILN_ASSIGN_OR_RETURN(bool left, JsonBool(node, "strip_left", true, here));
    KILN_ASSIGN_OR_RETURN(bool right, JsonBool(node, "strip_right", true, here));
    if (left) {
      KILN_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(R"(\A\s+)"));
      out.AddReplaceRegex(std::move(regex), "");
    }
    if (right) {
      KILN_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(R"(\s+\z)"));
      out.AddReplaceRegex(std::move(regex), "");
    }
  } else if (type == "Precompiled") {
    const json* map = JsonField(node, "precompiled_charsmap");
    if (map != nullptr && !map->is_null() && !(map->is_string() && map->get<std::string>().empty())) {
      return Unsupported("{}: precompiled SentencePiece normalization is not supported", here);
    }
  } else {
    return Unsupported("{}: normalizer type \"{}\" is not supported", where, type);
  }
  return Status::Ok();
}

Expected<SplitBehavior> ReadBehavior(const json& node, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(std::string name, JsonString(node, "behavior", "Isolated", where));
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return Corrupt("{}: unknown split behavior \"{}\"", where, name);
}

// Metaspace's options, in the current ("prepend_scheme") or the older
// ("add_prefix_space") form.
Expected<PrependScheme> ReadPrependScheme(const json& node, const std::string& where) {
  if (const json* scheme = JsonField(node, "prepend_scheme"); scheme != nullptr && !scheme->is_null()) {
    KILN_ASSIGN_OR_RETURN(std::string name, JsonString(node, "prepend_scheme", "always", where));
    if (name == "always") return PrependScheme::kAlways;
    if (name == "first") return PrependScheme::kFirst;
    if (name == "never") return PrependScheme::kNever;
    return Corrupt("{}: unknown prepend_scheme \"{}\"", where, name);
  }
  KILN_ASSIGN_OR_RETURN(bool add, JsonBool(node, "add_prefix_space", true, where));
  return add ? PrependScheme::kAlways : PrependScheme::kNever;
}

Status ParsePreTokenizer(const json& node, const std::string& where, PreTokenizer& out, bool* byte_level) {
  if (node.is_null()) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(std::string type, TypeOf(node, where));
  std::string here = where + " (" + type + ")";
  if (type == "Sequence") {
    const json* list = JsonField(node, "pretokenizers");
    if (list == nullptr || !list->is_array()) return Corrupt("{}: \"pretokenizers\" should be a list", here);
    for (size_t i = 0; i < list->size(); ++i) {
      KILN_RETURN_IF_ERROR(
          ParsePreTokenizer((*list)[i], fmt::format("{}.pretokenizers[{}]", where, i), out, byte_level));
    }
  } else if (type == "Split") {
    KILN_ASSIGN_OR_RETURN(Regex regex, ReadPattern(node, here));
    KILN_ASSIGN_OR_RETURN(SplitBehavior behavior, ReadBehavior(node, here));
    KILN_ASSIGN_OR_RETURN(bool invert, JsonBool(node, "invert", false, here));
    out.AddSplit(std::move(regex), behavior, invert);
  } else if (type == "ByteLevel") {
    KILN_ASSIGN_OR_RETURN(bool add_prefix_space, JsonBool(node, "add_prefix_space", true, here));
    KILN_ASSIGN_OR_RETURN(bool use_regex, JsonBool(node, "use_regex", true, here));
    KILN_RETURN_IF_ERROR(out.AddByteLevel(add_prefix_space, use_regex));
    *byte_level = true;
  } else if (type == "Metaspace") {
    KILN_ASSIGN_OR_RETURN(std::string replacement, JsonString(node, "replacement", "\xE2\x96\x81", here));
    KILN_ASSIGN_OR_RETURN(PrependScheme scheme, ReadPrependScheme(node, here));
    KILN_ASSIGN_OR_RETURN(bool split, JsonBool(node, "split", true, here));
    out.AddMetaspace(std::move(replacement), scheme, split);
  } else if (type == "Digits") {
    KILN_ASSIGN_OR_RETURN(bool individual, JsonBool(node, "individual_digits", false, here));
    KILN_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(individual ? R"(\p{N})" : R"(\p{N}+)"));
    out.AddSplit(std::move(regex), SplitBehavior::kIsolated, false);
  } else if (type == "Whitespace") {
    KILN_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(R"(\w+|[^\w\s]+)"));
    out.AddSplit(std::move(regex), SplitBehavior::kRemoved, true);
  } else if (type == "WhitespaceSplit") {
    KILN_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(R"(\s+)"));
    out.AddSplit(std::move(regex), SplitBehavior::kRemoved, false);
  } else if (type == "Punctuation") {
    KILN_ASSIGN_OR_RETURN(SplitBehavior behavior, ReadBehavior(node, here));
    KILN_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(R"([\p{P}$+<=>^`|~])"));
    out.AddSplit(std::move(regex), behavior, false);
  } else {
    return Unsupported("{}: pre-tokenizer type \"{}\" is not supported", where, type);
  }
  return Status::Ok();
}

Status ParseDecoder(const json& node, const std::string& where, DecoderTraits& traits) {
  if (node.is_null()) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(std::string type, TypeOf(node, where));
  std::string here = where + " (" + type + ")";
  if (type == "Sequence") {
    const json* list = JsonField(node, "decoders");
    if (list == nullptr || !list->is_array()) return Corrupt("{}: \"decoders\" should be a list", here);
    for (size_t i = 0; i < list->size(); ++i) {
      KILN_RETURN_IF_ERROR(ParseDecoder((*list)[i], fmt::format("{}.decoders[{}]", where, i), traits));
    }
  } else if (type == "ByteLevel") {
    traits.byte_level = true;
  } else if (type == "Strip") {
    KILN_ASSIGN_OR_RETURN(std::string content, JsonString(node, "content", " ", here));
    KILN_ASSIGN_OR_RETURN(int32_t start, JsonInt(node, "start", 0, here));
    KILN_ASSIGN_OR_RETURN(int32_t stop, JsonInt(node, "stop", 0, here));
    if (content != " " || start > 1 || stop != 0) {
      return Unsupported("{}: only stripping one leading space is supported", here);
    }
    traits.strip_leading_space = start == 1;
  } else if (type == "Metaspace") {
    KILN_ASSIGN_OR_RETURN(PrependScheme scheme, ReadPrependScheme(node, here));
    traits.strip_leading_space = scheme != PrependScheme::kNever;
  } else if (type == "Replace" || type == "ByteFallback" || type == "Fuse") {
    // The SentencePiece decoding these spell out (U+2581 -> space, <0xAB>
    // -> byte, concatenation) is how kiln decodes non-byte-level pieces.
  } else {
    return Unsupported("{}: decoder type \"{}\" is not supported", where, type);
  }
  return Status::Ok();
}

Status ParseAddedTokens(const json& root, const std::string& name, TokenizerSpec& spec) {
  const json* list = JsonField(root, "added_tokens");
  if (list == nullptr || list->is_null()) return Status::Ok();
  if (!list->is_array()) return Corrupt("{}: \"added_tokens\" should be a list", name);
  for (size_t i = 0; i < list->size(); ++i) {
    const json& entry = (*list)[i];
    std::string where = fmt::format("{}: added_tokens[{}]", name, i);
    AddedToken token;
    KILN_ASSIGN_OR_RETURN(token.id, JsonInt(entry, "id", -1, where));
    KILN_ASSIGN_OR_RETURN(token.content, JsonString(entry, "content", "", where));
    KILN_ASSIGN_OR_RETURN(token.special, JsonBool(entry, "special", false, where));
    KILN_ASSIGN_OR_RETURN(token.normalized, JsonBool(entry, "normalized", !token.special, where));
    KILN_ASSIGN_OR_RETURN(token.lstrip, JsonBool(entry, "lstrip", false, where));
    KILN_ASSIGN_OR_RETURN(token.rstrip, JsonBool(entry, "rstrip", false, where));
    KILN_ASSIGN_OR_RETURN(token.single_word, JsonBool(entry, "single_word", false, where));
    if (token.id < 0) return Corrupt("{}: \"id\" should be a non-negative integer", where);
    spec.added_tokens.push_back(std::move(token));
  }
  return Status::Ok();
}

// The id of a token the post-processor names by content.
int32_t FindByContent(const TokenizerSpec& spec, const std::unordered_map<std::string, int32_t>& vocab,
                      const std::string& content) {
  for (const AddedToken& token : spec.added_tokens) {
    if (token.content == content) return token.id;
  }
  auto it = vocab.find(content);
  return it == vocab.end() ? -1 : it->second;
}

Status ParsePostProcessor(const json& node, const json& root, const std::string& where,
                          const std::unordered_map<std::string, int32_t>& vocab, TokenizerSpec& spec) {
  if (node.is_null()) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(std::string type, TypeOf(node, where));
  std::string here = where + " (" + type + ")";
  if (type == "Sequence") {
    const json* list = JsonField(node, "processors");
    if (list == nullptr || !list->is_array()) return Corrupt("{}: \"processors\" should be a list", here);
    for (size_t i = 0; i < list->size(); ++i) {
      KILN_RETURN_IF_ERROR(
          ParsePostProcessor((*list)[i], root, fmt::format("{}.processors[{}]", where, i), vocab, spec));
    }
  } else if (type == "TemplateProcessing") {
    const json* single = JsonField(node, "single");
    if (single == nullptr || !single->is_array()) return Corrupt("{}: \"single\" should be a list", here);
    const json* special_tokens = JsonField(node, "special_tokens");
    bool after_sequence = false;
    for (const json& item : *single) {
      if (JsonField(item, "Sequence") != nullptr) {
        after_sequence = true;
        continue;
      }
      const json* special = JsonField(item, "SpecialToken");
      if (special == nullptr)
        return Corrupt("{}: a \"single\" item is neither Sequence nor SpecialToken", here);
      KILN_ASSIGN_OR_RETURN(std::string content, JsonString(*special, "id", "", here));
      // The processor's own table gives the ids; else the content is a token.
      int32_t id = -1;
      if (const json* entry = special_tokens ? JsonField(*special_tokens, content) : nullptr) {
        const json* ids = JsonField(*entry, "ids");
        if (ids != nullptr && ids->is_array() && ids->size() == 1) {
          KILN_ASSIGN_OR_RETURN(id, JsonAsInt((*ids)[0], here + ": special_tokens ids"));
        }
      }
      if (id < 0) id = FindByContent(spec, vocab, content);
      if (id < 0) return Corrupt("{}: special token \"{}\" is not in the vocabulary", here, content);
      if (!after_sequence && !spec.add_bos) {
        spec.add_bos = true;
        spec.bos_id = id;
      } else if (after_sequence && !spec.add_eos) {
        spec.add_eos = true;
        spec.eos_id = id;
      }
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    // "cls": ["<s>", 0], "sep": ["</s>", 2]: added around every text.
    for (const char* key : {"cls", "sep"}) {
      const json* pair = JsonField(node, key);
      if (pair == nullptr || !pair->is_array() || pair->size() != 2) {
        return Corrupt("{}: \"{}\" should be [token, id]", here, key);
      }
      KILN_ASSIGN_OR_RETURN(int32_t id, JsonAsInt((*pair)[1], fmt::format("{}: \"{}\" id", here, key)));
      if (std::string(key) == "cls") {
        spec.add_bos = true;
        spec.bos_id = id;
      } else {
        spec.add_eos = true;
        spec.eos_id = id;
      }
    }
  } else if (type != "ByteLevel") {
    return Unsupported("{}: post-processor type \"{}\" is not supported", where, type);
  }
  return Status::Ok();
}

// "a b" (older files) or ["a", "b"] (newer ones).
Status ReadMerges(const json& model, const std::string& name, TokenizerSpec& spec) {
  const json* merges = JsonField(model, "merges");
  if (merges == nullptr || merges->is_null()) return Status::Ok();
  if (!merges->is_array()) return Corrupt("{}: model.merges should be a list", name);
  spec.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& merge = (*merges)[i];
    if (merge.is_string()) {
      const auto& text = merge.get_ref<const std::string&>();
      size_t space = text.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == text.size() ||
          text.find(' ', space + 1) != std::string::npos) {
        return Corrupt("{}: model.merges[{}] \"{}\" should be two pieces separated by one space", name, i,
                       text);
      }
      spec.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      spec.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      return Corrupt("{}: model.merges[{}] should be a string or a pair of strings", name, i);
    }
  }
  return Status::Ok();
}

bool IsBytePiece(const std::string& piece) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && hex(piece[3]) && hex(piece[4]) &&
         piece[5] == '>';
}

}  // namespace

Expected<TokenizerSpec> ParseHfTokenizerJson(std::string_view text, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(json root, ParseJsonText(text, name));
  if (!root.is_object()) return Corrupt("{}: should hold a JSON object", name);
  TokenizerSpec spec;
  spec.source = name;

  const json* model = JsonField(root, "model");
  if (model == nullptr || !model->is_object()) return Corrupt("{}: no \"model\" object", name);
  std::string model_where = name + ": model";
  KILN_ASSIGN_OR_RETURN(std::string model_type, JsonString(*model, "type", "BPE", model_where));
  if (model_type != "BPE") {
    return Unsupported("{}: model type \"{}\" is not supported (kiln reads BPE tokenizers)", name,
                       model_type);
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    KILN_ASSIGN_OR_RETURN(std::string value, JsonString(*model, affix, "", model_where));
    if (!value.empty()) return Unsupported("{}: \"{}\" is not supported", model_where, affix);
  }

  const json* vocab = JsonField(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object())
    return Corrupt("{}: \"vocab\" should be an object", model_where);
  std::unordered_map<std::string, int32_t> vocab_ids;
  vocab_ids.reserve(vocab->size());
  int32_t max_id = -1;
  for (const auto& [piece, value] : vocab->items()) {
    KILN_ASSIGN_OR_RETURN(int32_t id, JsonInt(*vocab, piece, -1, model_where + ".vocab"));
    if (id < 0 || id >= kMaxTokenizerVocab) {
      return Corrupt("{}.vocab: \"{}\" has id {} (0 to {} allowed)", model_where, piece, id,
                     kMaxTokenizerVocab - 1);
    }
    if (piece.empty()) return Corrupt("{}.vocab: id {} has an empty piece", model_where, id);
    vocab_ids.emplace(piece, id);
    max_id = std::max(max_id, id);
  }
  spec.pieces.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [piece, id] : vocab_ids) {
    if (!spec.pieces[id].empty()) {
      return Corrupt("{}.vocab: id {} is given to both \"{}\" and \"{}\"", model_where, id, spec.pieces[id],
                     piece);
    }
    spec.pieces[id] = piece;
  }
  KILN_RETURN_IF_ERROR(ReadMerges(*model, name, spec));
  KILN_ASSIGN_OR_RETURN(spec.byte_fallback, JsonBool(*model, "byte_fallback", false, model_where));
  KILN_ASSIGN_OR_RETURN(spec.fuse_unk, JsonBool(*model, "fuse_unk", false, model_where));
  KILN_ASSIGN_OR_RETURN(spec.ignore_merges, JsonBool(*model, "ignore_merges", false, model_where));
  KILN_ASSIGN_OR_RETURN(std::string unk, JsonString(*model, "unk_token", "", model_where));
  if (!unk.empty()) {
    auto it = vocab_ids.find(unk);
    if (it == vocab_ids.end())
      return Corrupt("{}: unk_token \"{}\" is not in the vocabulary", model_where, unk);
    spec.unk_id = it->second;
  }

  spec.kinds.assign(spec.pieces.size(), TokenKind::kNormal);
  for (size_t id = 0; id < spec.pieces.size(); ++id) {
    if (spec.pieces[id].empty()) {
      spec.kinds[id] = TokenKind::kUnused;
    } else if (spec.byte_fallback && IsBytePiece(spec.pieces[id])) {
      spec.kinds[id] = TokenKind::kByte;
    }
  }
  if (spec.unk_id >= 0) spec.kinds[spec.unk_id] = TokenKind::kUnknown;

  KILN_RETURN_IF_ERROR(ParseAddedTokens(root, name, spec));

  static const json kNull;
  auto section = [&](const char* key) -> const json& {
    const json* v = JsonField(root, key);
    return v ? *v : kNull;
  };
  KILN_RETURN_IF_ERROR(ParseNormalizer(section("normalizer"), name + ": normalizer", spec.normalizer));
  bool byte_level = false;
  KILN_RETURN_IF_ERROR(
      ParsePreTokenizer(section("pre_tokenizer"), name + ": pre_tokenizer", spec.pre_tokenizer, &byte_level));
  DecoderTraits decoder;
  KILN_RETURN_IF_ERROR(ParseDecoder(section("decoder"), name + ": decoder", decoder));
  KILN_RETURN_IF_ERROR(
      ParsePostProcessor(section("post_processor"), root, name + ": post_processor", vocab_ids, spec));

  spec.flavor = byte_level || decoder.byte_level ? BpeFlavor::kByteLevel : BpeFlavor::kRankedChars;
  spec.strip_leading_space = spec.flavor != BpeFlavor::kByteLevel && decoder.strip_leading_space;
  return spec;
}

}  // namespace kiln
