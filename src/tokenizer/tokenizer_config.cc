// Reading the Hugging Face configuration files around a tokenizer.
#include "tokenizer/tokenizer_config.h"

#include <charconv>
#include <filesystem>

#include "core/json_input.h"
#include "core/mapped_file.h"
#include "tokenizer/tokenizer_spec.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using nlohmann::json;

// "bos_token": "<s>" | {"content": "<s>", ...} | null.
Expected<NamedToken> ReadNamedToken(const json& config, std::string_view key, const std::string& where) {
  NamedToken token;
  const json* v = JsonField(config, key);
  if (v == nullptr) return token;
  token.stated = true;
  if (v->is_null()) return token;
  if (v->is_string()) {
    token.content = v->get<std::string>();
    return token;
  }
  if (v->is_object()) {
    KILN_ASSIGN_OR_RETURN(token.content, JsonString(*v, "content", "", where + ": " + std::string(key)));
    return token;
  }
  return Corrupt("{}: \"{}\" should be a string, an object or null", where, key);
}

Status ReadAddedTokensDecoder(const json& config, const std::string& where, std::vector<AddedToken>& out) {
  const json* decoder = JsonField(config, "added_tokens_decoder");
  if (decoder == nullptr || decoder->is_null()) return Status::Ok();
  if (!decoder->is_object()) return Corrupt("{}: \"added_tokens_decoder\" should be an object", where);
  for (const auto& [key, entry] : decoder->items()) {
    std::string field = where + ": added_tokens_decoder." + key;
    AddedToken token;
    auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), token.id);
    if (error != std::errc() || end != key.data() + key.size() || token.id < 0) {
      return Corrupt("{}: the key should be a token id", field);
    }
    KILN_ASSIGN_OR_RETURN(token.content, JsonString(entry, "content", "", field));
    KILN_ASSIGN_OR_RETURN(token.special, JsonBool(entry, "special", false, field));
    KILN_ASSIGN_OR_RETURN(token.normalized, JsonBool(entry, "normalized", !token.special, field));
    KILN_ASSIGN_OR_RETURN(token.lstrip, JsonBool(entry, "lstrip", false, field));
    KILN_ASSIGN_OR_RETURN(token.rstrip, JsonBool(entry, "rstrip", false, field));
    KILN_ASSIGN_OR_RETURN(token.single_word, JsonBool(entry, "single_word", false, field));
    out.push_back(std::move(token));
  }
  return Status::Ok();
}

// chat_template is a string, or a list of {"name", "template"} of which the
// one named "default" (else the first) is the chat template.
Expected<std::string> ReadChatTemplate(const json& config, const std::string& where) {
  const json* v = JsonField(config, "chat_template");
  if (v == nullptr || v->is_null()) return std::string();
  if (v->is_string()) return v->get<std::string>();
  if (v->is_array()) {
    std::string first;
    for (const json& entry : *v) {
      KILN_ASSIGN_OR_RETURN(std::string name, JsonString(entry, "name", "", where + ": chat_template"));
      KILN_ASSIGN_OR_RETURN(std::string text, JsonString(entry, "template", "", where + ": chat_template"));
      if (name == "default") return text;
      if (first.empty()) first = text;
    }
    return first;
  }
  return Corrupt("{}: \"chat_template\" should be a string or a list", where);
}

bool Exists(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// The id of `content`: an added token's, else the vocabulary's, else -1.
int32_t FindTokenId(const TokenizerSpec& spec, const std::string& content) {
  for (const AddedToken& token : spec.added_tokens) {
    if (token.content == content) return token.id;
  }
  for (size_t id = 0; id < spec.pieces.size(); ++id) {
    if (spec.pieces[id] == content) return static_cast<int32_t>(id);
  }
  return -1;
}

}  // namespace

Expected<TokenizerConfig> ReadTokenizerConfig(const std::string& folder) {
  TokenizerConfig config;
  fs::path dir(folder);

  fs::path config_path = dir / "tokenizer_config.json";
  if (Exists(config_path)) {
    std::string where = config_path.string();
    KILN_ASSIGN_OR_RETURN(json root, ReadJsonFile(where));
    if (!root.is_object()) return Corrupt("{}: should hold a JSON object", where);
    KILN_RETURN_IF_ERROR(ReadAddedTokensDecoder(root, where, config.added_tokens));
    KILN_ASSIGN_OR_RETURN(config.bos_token, ReadNamedToken(root, "bos_token", where));
    KILN_ASSIGN_OR_RETURN(config.eos_token, ReadNamedToken(root, "eos_token", where));
    KILN_ASSIGN_OR_RETURN(config.unk_token, ReadNamedToken(root, "unk_token", where));
    if (const json* v = JsonField(root, "add_bos_token"); v != nullptr && !v->is_null()) {
      KILN_ASSIGN_OR_RETURN(config.add_bos_token, JsonBool(root, "add_bos_token", false, where));
    }
    if (const json* v = JsonField(root, "add_eos_token"); v != nullptr && !v->is_null()) {
      KILN_ASSIGN_OR_RETURN(config.add_eos_token, JsonBool(root, "add_eos_token", false, where));
    }
    KILN_ASSIGN_OR_RETURN(config.chat_template, ReadChatTemplate(root, where));
    KILN_ASSIGN_OR_RETURN(config.tokenizer_class, JsonString(root, "tokenizer_class", "", where));
  }

  // Newer folders keep the template in its own file.
  fs::path template_path = dir / "chat_template.jinja";
  if (config.chat_template.empty() && Exists(template_path)) {
    KILN_ASSIGN_OR_RETURN(config.chat_template, ReadFileToString(template_path.string()));
  }
  // Multimodal processors (Gemma 3's) keep it as {"chat_template": "..."}.
  fs::path template_json_path = dir / "chat_template.json";
  if (config.chat_template.empty() && Exists(template_json_path)) {
    std::string where = template_json_path.string();
    KILN_ASSIGN_OR_RETURN(json root, ReadJsonFile(where));
    if (!root.is_object()) return Corrupt("{}: should hold a JSON object", where);
    KILN_ASSIGN_OR_RETURN(config.chat_template, ReadChatTemplate(root, where));
  }

  // Older folders name the special tokens here.
  fs::path map_path = dir / "special_tokens_map.json";
  if (Exists(map_path)) {
    std::string where = map_path.string();
    KILN_ASSIGN_OR_RETURN(json root, ReadJsonFile(where));
    NamedToken* slots[] = {&config.bos_token, &config.eos_token, &config.unk_token};
    const char* keys[] = {"bos_token", "eos_token", "unk_token"};
    for (int k = 0; k < 3; ++k) {
      if (slots[k]->stated) continue;
      KILN_ASSIGN_OR_RETURN(*slots[k], ReadNamedToken(root, keys[k], where));
    }
  }

  // {"<|im_start|>": 151644, ...}: added tokens of older folders.
  fs::path added_path = dir / "added_tokens.json";
  if (Exists(added_path)) {
    std::string where = added_path.string();
    KILN_ASSIGN_OR_RETURN(json root, ReadJsonFile(where));
    if (!root.is_object()) return Corrupt("{}: should hold a JSON object", where);
    for (const auto& [content, value] : root.items()) {
      bool known = false;
      for (const AddedToken& token : config.added_tokens) known |= token.content == content;
      if (known) continue;
      AddedToken token;
      token.content = content;
      KILN_ASSIGN_OR_RETURN(token.id, JsonInt(root, content, -1, where));
      token.special = true;
      config.added_tokens.push_back(std::move(token));
    }
  }

  fs::path generation_path = dir / "generation_config.json";
  if (Exists(generation_path)) {
    std::string where = generation_path.string();
    KILN_ASSIGN_OR_RETURN(json root, ReadJsonFile(where));
    const json* eos = JsonField(root, "eos_token_id");
    if (eos != nullptr && eos->is_array()) {
      for (size_t i = 0; i < eos->size(); ++i) {
        KILN_ASSIGN_OR_RETURN(int32_t id,
                              JsonAsInt((*eos)[i], fmt::format("{}: eos_token_id[{}]", where, i)));
        config.generation_eos_ids.push_back(id);
      }
    } else if (eos != nullptr && !eos->is_null()) {
      KILN_ASSIGN_OR_RETURN(int32_t id, JsonInt(root, "eos_token_id", -1, where));
      config.generation_eos_ids.push_back(id);
    }
  }

  fs::path model_config_path = dir / "config.json";
  if (Exists(model_config_path)) {
    std::string where = model_config_path.string();
    KILN_ASSIGN_OR_RETURN(json root, ReadJsonFile(where));
    KILN_ASSIGN_OR_RETURN(config.model_type, JsonString(root, "model_type", "", where));
  }
  return config;
}

Status ApplyTokenizerConfig(const TokenizerConfig& config, TokenizerSpec& spec) {
  for (const AddedToken& token : config.added_tokens) {
    bool known = false;
    for (const AddedToken& existing : spec.added_tokens) known |= existing.id == token.id;
    if (!known) spec.added_tokens.push_back(token);
  }
  auto resolve = [&](const NamedToken& named, int32_t* id, const char* what) -> Status {
    if (!named.stated) return Status::Ok();
    if (named.content.empty()) {
      *id = -1;
      return Status::Ok();
    }
    int32_t found = FindTokenId(spec, named.content);
    if (found < 0) return Corrupt("{}: {} \"{}\" is not a token", spec.source, what, named.content);
    *id = found;
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(resolve(config.bos_token, &spec.bos_id, "bos_token"));
  KILN_RETURN_IF_ERROR(resolve(config.eos_token, &spec.eos_id, "eos_token"));
  KILN_RETURN_IF_ERROR(resolve(config.unk_token, &spec.unk_id, "unk_token"));
  if (config.add_bos_token) spec.add_bos = *config.add_bos_token;
  if (config.add_eos_token) spec.add_eos = *config.add_eos_token;
  if (!config.chat_template.empty()) spec.chat_template = config.chat_template;
  for (int32_t id : config.generation_eos_ids) {
    if (id >= 0) spec.end_of_generation_ids.push_back(id);
  }
  return Status::Ok();
}

void ApplyDefaultSpecialIds(const TokenizerConfig& config, TokenizerSpec& spec) {
  auto pick = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view name : names) {
      for (const AddedToken& token : spec.added_tokens) {
        if (token.special && token.content == name) return token.id;
      }
    }
    return -1;
  };
  if (spec.bos_id < 0 && !config.bos_token.stated) spec.bos_id = pick({"<s>", "<|begin_of_text|>", "<bos>"});
  if (spec.eos_id < 0 && !config.eos_token.stated) {
    spec.eos_id = pick({"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"});
  }
}

}  // namespace kiln
