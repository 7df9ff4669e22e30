// Chat templates rendered by kiln against Python's jinja2 set up the way
// Hugging Face renders them (tests/tools/render_chat_template.py): the real
// templates of ../shared × conversations must match byte for byte, and so
// must a corpus of small templates exercising each language feature.
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing/test_paths.h"
#include "tokenizer/chat_template.h"

namespace kiln {
namespace chat_template_reference_tests {

using ojson = nlohmann::ordered_json;

// The time both renderers give strftime_now(): 2024-09-05 14:30:00.
std::tm PinnedNow() {
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 8;
  t.tm_mday = 5;
  t.tm_hour = 14;
  t.tm_min = 30;
  timegm(&t);  // fills in the weekday and day of the year
  return t;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct Case {
  std::string name;
  std::string source;  // the template
  ojson context;       // messages, add_generation_prompt, other variables
};

struct Outcome {
  bool ok;
  std::string text;  // the output, or the error
};

// Renders every case with the Python reference in one process.
std::vector<Outcome> RenderWithPython(const std::vector<Case>& cases) {
  ojson batch = ojson::array();
  for (const Case& c : cases) batch.push_back({{"template", c.source}, {"context", c.context}});
  std::string path = testing::MakeTempDir() + "/cases.json";
  std::ofstream(path, std::ios::binary) << batch.dump();
  std::string command =
      "/usr/bin/python3 " + testing::SourceDir() + "/tests/tools/render_chat_template.py --batch " + path;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    ADD_FAILURE() << "cannot run " << command;
    return {};
  }
  std::string output;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  int status = pclose(pipe);
  if (status != 0) {
    ADD_FAILURE() << command << " failed with status " << status;
    return {};
  }
  ojson results = ojson::parse(output);
  std::vector<Outcome> outcomes;
  for (const ojson& r : results) {
    if (r.contains("output")) {
      outcomes.push_back({true, r["output"].get<std::string>()});
    } else {
      outcomes.push_back({false, r["error"].get<std::string>()});
    }
  }
  return outcomes;
}

Outcome RenderWithKiln(const Case& c) {
  auto tmpl = ChatTemplate::Parse(c.source);
  if (!tmpl.ok()) return {false, tmpl.status().ToString()};
  ojson extra = ojson::object();
  for (auto it = c.context.begin(); it != c.context.end(); ++it) {
    if (it.key() != "messages" && it.key() != "add_generation_prompt") extra[it.key()] = it.value();
  }
  RenderOptions options;
  options.now = PinnedNow();
  ojson messages = c.context.contains("messages") ? c.context["messages"] : ojson::array();
  bool add_generation_prompt = c.context.value("add_generation_prompt", false);
  auto out = tmpl->Render(messages, add_generation_prompt, extra, options);
  if (!out.ok()) return {false, out.status().ToString()};
  return {true, *out};
}

// Renders all cases both ways; returns how many matched.
int CompareAll(const std::vector<Case>& cases) {
  std::vector<Outcome> expected = RenderWithPython(cases);
  if (expected.size() != cases.size()) {
    ADD_FAILURE() << "the reference rendered " << expected.size() << " of " << cases.size() << " cases";
    return 0;
  }
  int matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    Outcome actual = RenderWithKiln(cases[i]);
    if (expected[i].ok) {
      EXPECT_TRUE(actual.ok) << cases[i].name << ": jinja2 rendered it, kiln failed: " << actual.text;
      if (actual.ok) {
        EXPECT_EQ(actual.text, expected[i].text) << cases[i].name;
      }
    } else {
      EXPECT_FALSE(actual.ok) << cases[i].name << ": jinja2 failed (" << expected[i].text
                              << ") but kiln rendered: " << actual.text;
    }
    if (actual.ok == expected[i].ok && (!actual.ok || actual.text == expected[i].text)) ++matched;
  }
  return matched;
}

// ---- real templates × conversations ----

struct RealTemplate {
  std::string name;
  std::string source;
  ojson special_tokens;  // bos_token, eos_token as the model's config defines them
};

std::vector<RealTemplate> RealTemplates() {
  std::string shared = testing::SharedDir();
  std::vector<RealTemplate> out;
  ojson llama_tokens = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}};
  ojson qwen_tokens = {{"eos_token", "<|im_end|>"}};
  ojson deepseek_tokens = {{"bos_token", "<｜begin▁of▁sentence｜>"}, {"eos_token", "<｜end▁of▁sentence｜>"}};
  const std::pair<const char*, ojson> files[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", qwen_tokens},
      {"Qwen-Qwen3-0.6B.jinja", qwen_tokens},
      {"Qwen-QwQ-32B.jinja", qwen_tokens},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", deepseek_tokens},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", llama_tokens},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", llama_tokens},
  };
  for (const auto& [file, tokens] : files) {
    std::string path = shared + "/data/tokenizers/chat-templates/" + file;
    EXPECT_TRUE(std::filesystem::exists(path)) << path;
    out.push_back({file, ReadFile(path), tokens});
  }
  const char* configs[] = {"data/tokenizers/qwen2",  "data/tokenizers/qwen2.5", "data/tokenizers/qwen3",
                           "data/tokenizers/llama3", "models/tiny-qwen2",       "models/tiny-qwen3"};
  for (const char* dir : configs) {
    std::string path = shared + "/" + dir + "/tokenizer_config.json";
    nlohmann::json config = nlohmann::json::parse(ReadFile(path));
    auto tmpl = ChatTemplate::FromTokenizerConfig(config);
    EXPECT_TRUE(tmpl.ok()) << path << ": " << tmpl.status().ToString();
    if (!tmpl.ok()) continue;
    nlohmann::ordered_json tokens = SpecialTokenVariables(config);
    out.push_back({std::string(dir) + "/tokenizer_config.json", tmpl->source(), tokens});
  }
  return out;
}

struct Conversation {
  std::string name;
  ojson messages;
  ojson extra;
};

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
   "parameters": {"type": "object", "properties": {
     "city": {"type": "string", "description": "City name, e.g. Zürich or 東京"},
     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "add", "description": "Add two numbers.",
   "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number", "default": 1.0}},
   "required": ["a"]}}}
])";

std::vector<Conversation> Conversations() {
  std::vector<Conversation> out;
  auto add = [&](std::string name, const char* messages, const char* extra = "{}") {
    out.push_back({std::move(name), ojson::parse(messages), ojson::parse(extra)});
  };
  add("system_user", R"([{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "Hello! Who are you?"}])");
  add("multi_turn", R"([{"role": "system", "content": "You are terse."},
                        {"role": "user", "content": "What is 2+2?"},
                        {"role": "assistant", "content": "4"},
                        {"role": "user", "content": "And 3*3?"},
                        {"role": "assistant", "content": "9."},
                        {"role": "user", "content": "Thanks. Bye"}])");
  add("no_system", R"([{"role": "user", "content": "Tell me a joke."},
                       {"role": "assistant", "content": "Why did the chicken cross the road?"},
                       {"role": "user", "content": "Why?"}])");
  add("unicode", R"([{"role": "system", "content": "Tu es un assistant serviable. Réponds en français 🇫🇷"},
                     {"role": "user", "content": "你好，世界！こんにちは 🌸 Привет, мир! مرحبا 👨‍👩‍👧"},
                     {"role": "assistant", "content": "😀 Ça va? — «très bien» ½ ∑ x² \u00e9\u0301"},
                     {"role": "user", "content": "\u3000 spaced\u00a0out \u3000\u2003"}])");
  add("whitespace_and_braces",
      R"([{"role": "user", "content": "  {{ not a tag }} {% neither %}\n\n  indented\n"},
                                   {"role": "assistant", "content": "line1\r\nline2\ttab\u000bvt "},
                                   {"role": "user", "content": "\n"}])");
  add("empty_content", R"([{"role": "system", "content": ""}, {"role": "user", "content": ""}])");
  add("multi_system", R"([{"role": "system", "content": "First."}, {"role": "user", "content": "Hi"},
                          {"role": "system", "content": "Second system prompt."},
                          {"role": "user", "content": "Again"}])");
  std::string tool_extra = std::string(R"({"tools": )") + kTools + "}";
  const char* tool_conversation = R"([
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "What's the weather in Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
      {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}]},
    {"role": "tool", "content": "{\"temperature\": 21.5, \"sky\": \"sunny ☀\"}"},
    {"role": "assistant", "content": "It is 21.5 °C and sunny in Zürich."},
    {"role": "user", "content": "Thanks!"}])";
  add("tools", tool_conversation, tool_extra.c_str());
  add("tools_no_system", R"([{"role": "user", "content": "Add 2 and 3."}])", tool_extra.c_str());
  add("tool_string_arguments", R"([
    {"role": "user", "content": "Add 2 and 3."},
    {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function":
      {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}}]},
    {"role": "tool", "content": "5"},
    {"role": "assistant", "content": "2 + 3 = 5."}])");
  add("two_tool_calls", R"([
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
    {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "rainy"},
    {"role": "user", "content": "Ok"}])",
      tool_extra.c_str());
  // As the server hands a conversation over: calls with ids and arguments
  // parsed, results with their tool_call_id, the tools in the client's order.
  add("server_tool_round", R"([
    {"role": "system", "content": "Use tools when they help."},
    {"role": "user", "content": "Weather in Zürich, and add 2 and 3."},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "call_a1", "type": "function", "function": {"name": "get_weather",
        "arguments": {"unit": "celsius", "city": "Zürich"}}}]},
    {"role": "tool", "tool_call_id": "call_a1", "content": "{\"temperature\": 21.5}"},
    {"role": "assistant", "content": "Now the sum.", "tool_calls": [
      {"id": "call_b2", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]},
    {"role": "tool", "tool_call_id": "call_b2", "name": "add", "content": "5"}])",
      tool_extra.c_str());
  const char* thinking = R"([
    {"role": "user", "content": "What is 7*6?"},
    {"role": "assistant", "content": "<think>\n7*6 = 42\n</think>\n\n42"},
    {"role": "user", "content": "And 6*9?"}])";
  add("thinking_history", thinking);
  add("thinking_disabled", thinking, R"({"enable_thinking": false})");
  add("reasoning_field", R"([
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!", "reasoning_content": "The user greets me."},
    {"role": "user", "content": "Bye"},
    {"role": "assistant", "content": "Goodbye!", "reasoning_content": "Farewell."}])");
  add("content_parts", R"([{"role": "user", "content": [{"type": "text", "text": "Describe "},
                           {"type": "image"}, {"type": "text", "text": " please ✨"}]}])");
  add("date_string", R"([{"role": "user", "content": "What day is it?"}])",
      R"({"date_string": "01 Jan 2025"})");
  return out;
}

TEST(ChatTemplateReference, RealTemplatesMatchJinja2) {
  std::vector<Case> cases;
  for (const RealTemplate& t : RealTemplates()) {
    for (const Conversation& c : Conversations()) {
      for (bool add_generation_prompt : {false, true}) {
        ojson context = t.special_tokens;
        for (auto it = c.extra.begin(); it != c.extra.end(); ++it) context[it.key()] = it.value();
        context["messages"] = c.messages;
        context["add_generation_prompt"] = add_generation_prompt;
        cases.push_back(
            {t.name + " / " + c.name + (add_generation_prompt ? " / prompt" : ""), t.source, context});
      }
    }
  }
  ASSERT_GE(cases.size(), 300u);
  int matched = CompareAll(cases);
  EXPECT_EQ(matched, static_cast<int>(cases.size()));
}

// The script's single-template mode, which prints the rendered bytes as
// they are: a trailing newline or carriage return must survive.
TEST(ChatTemplateReference, ScriptRendersOneTemplateFileExactly) {
  std::string dir = testing::MakeTempDir();
  std::string template_path = testing::SharedDir() + "/data/tokenizers/chat-templates/Qwen-Qwen3-0.6B.jinja";
  ojson context = {{"messages", ojson::parse(R"([{"role": "user", "content": "ends with CR LF\r\n"},
                                                 {"role": "assistant", "content": "ok "}])")},
                   {"add_generation_prompt", false}};
  std::ofstream(dir + "/context.json", std::ios::binary) << context.dump();
  std::string command = "/usr/bin/python3 " + testing::SourceDir() + "/tests/tools/render_chat_template.py " +
                        template_path + " " + dir + "/context.json";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string expected;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) expected.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << command;
  Outcome actual = RenderWithKiln({"qwen3 file", ReadFile(template_path), context});
  ASSERT_TRUE(actual.ok) << actual.text;
  EXPECT_EQ(actual.text, expected);
  EXPECT_NE(expected.find("ends with CR LF\r\n<|im_end|>"), std::string::npos) << expected;
  EXPECT_EQ(expected.substr(expected.size() - 14), "ok <|im_end|>\n") << expected;
}

// ---- the feature corpus ----

// Variables every corpus case sees (a case may add its own).
ojson CorpusContext() {
  return ojson::parse(R"({
    "x": 1, "f": 2.5, "big": 12345678901, "s": "Hello World", "e": "", "n": null, "t": true, "no": false,
    "l": [3, 1, 2], "words": ["b", "A", "c", "a"], "d": {"b": 2, "a": 1, "items": 5},
    "u8": "日本語テキスト😀", "ws": " \t\u00a0 padded \u3000\n",
    "users": [{"name": "ann", "age": 30, "tags": ["x"]}, {"name": "Bob", "age": 25},
              {"name": "cy", "age": 30, "tags": []}],
    "nested": {"a": {"b": [10, 20, {"c": "deep"}]}},
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
    "add_generation_prompt": true
  })");
}

// Each entry is a template; all must render exactly as jinja2 does, or fail
// where jinja2 fails.
const char* const kCorpus[] = {
    // Literals and printing.
    "{{ 1 }} {{ -3 }} {{ 1.0 }} {{ 2.50 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1.5e-7 }} {{ "
    "1_000 }}",
    "{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 3.14159265358979 }} {{ 1/3 }} {{ 2**0.5 }} {{ 1e308 * 10 }} {{ "
    "-0.0 }}",
    "{{ none }} {{ None }} {{ true }} {{ True }} {{ false }} {{ n }} {{ t }}",
    "{{ 'single' }} {{ \"double\" }} {{ 'adj' 'acent' }} {{ 'esc\\'aped' }} {{ \"tab\\there\" }}",
    "{{ '\\x41\\u00e9\\U0001F600\\101\\n|' }}{{ '\\d\\q' }}{{ '\\é' }}",
    "{{ [1, 'a', \"b'\", none, 1.5, {'k': 'v'}, (1,), (), [], true] }}",
    "{{ {'a': 1, 'b': [1, 2], 1: 'one', none: 0, (1, 2): 't'} }}",
    "{{ ['a\\tb\\x01\\u00a0\\u3000\\u200b\\U0001F600é\\\\', \"it's\", 'say \"hi\"', 'both \\' and \"'] }}",
    "{{ (1, 2) }} {{ 1, 2 }} {{ (1,) }} {{ ((1, 2), [3]) }}",
    "{{ d }} {{ l }} {{ users[0] }} {{ nested }}",
    "{{ x }}{{ undefined_name }}{{ s }}|{{ e }}|",
    // Arithmetic.
    "{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
    "{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 10 / 4 }} {{ 4 / 2 }}",
    "{{ 1 + 1.5 }} {{ true + 1 }} {{ true + true }} {{ 3 * 'ab' }} {{ 'ab' * 0 }} {{ [1] * 3 }} {{ (1, 2) * "
    "2 }}",
    "{{ 'a' + 'b' }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ -x }} {{ +f }} {{ - 2 ** 2 }} {{ 2 ** 3 ** 2 }}",
    "{{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 10 - 2 - 3 }} {{ 100 / 10 / 5 }} {{ 2 * 3 ~ 4 }} {{ 1 + 2 ~ 3 + 4 "
    "}}",
    "{{ '%s and %s' % ('a', 'b') }} {{ '%d%%' % 50 }} {{ '%5.2f|%-4d|%x|%r|%05d' % (3.14159, 7, 255, 'a', "
    "-42) }}",
    "{{ '%(a)s-%(b)d' % {'a': 'x', 'b': 3} }} {{ '%s' % [1, 2] }} {{ '%c%c' % (65, 'b') }} {{ '%.3s' % "
    "'abcdef' }}",
    "{{ 1 + 'a' }}",
    "{{ 'a' + 1 }}",
    "{{ 1 / 0 }}",
    "{{ 1 // 0 }}",
    "{{ 5 % 0 }}",
    "{{ [1] + (2,) }}",
    "{{ - 'a' }}",
    "{{ undefined_name + 1 }}",
    "{{ 1 - undefined_name }}",
    // Comparisons and logic.
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ 'a' < 'b' }} {{ 'B' < "
    "'a' }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 <= 1 >= 0 }} {{ 1 != 2 }} {{ none == none }} {{ d == {'a': 1, 'b': "
    "2, 'items': 5} }}",
    "{{ [1, 2] < [1, 3] }} {{ (1, 'a') < (1, 'b') }} {{ [1] < [1, 0] }} {{ 2.5 > 2 }} {{ 'abc' >= 'abd' }}",
    "{{ 'a' in 'abc' }} {{ 'z' in s }} {{ 1 in l }} {{ 'a' in d }} {{ 'z' not in d }} {{ 'x' in "
    "undefined_name }} {{ 2 not in l }}",
    "{{ 1 and 2 }} {{ 0 and 2 }} {{ '' or 'default' }} {{ 'set' or 'default' }} {{ none or [] }} {{ not x }} "
    "{{ not not x }}",
    "{{ x and undefined_name }}|{{ undefined_name or 'fallback' }}|{{ not undefined_name }}",
    "{{ 'a' < 1 }}",
    "{{ [1] < 'a' }}",
    "{{ 1 in 5 }}",
    "{{ 1 in 'abc' }}",
    "{{ undefined_name < 1 }}",
    // Conditional expressions.
    "{{ 'yes' if t else 'no' }} {{ 'yes' if no else 'no' }} {{ 'a' if false }}|{{ 1 if x == 2 else 2 if x == "
    "1 else 3 }}",
    "{{ ('y' if x else 'n') ~ '!' }} {{ [1 if t else 0, 2] }}",
    // Attribute and item access.
    "{{ d.a }} {{ d['a'] }} {{ d.items is defined }}|{{ d['items'] }} {{ d.missing }}|{{ d['missing'] }}|{{ "
    "d.get('a') }} {{ d.get('zz', 'dflt') }}",
    "{{ users[0].name }} {{ users[1]['age'] }} {{ users[-1].name }} {{ users[5] }}|{{ l[-1] }} {{ l.0 }} {{ "
    "nested.a.b.2.c }}",
    "{{ s[0] }} {{ s[-1] }} {{ s[100] }}| {{ u8[2] }} {{ u8[-1] }} {{ u8|length }} {{ s|length }}",
    "{{ l[::-1] }} {{ l[1:] }} {{ l[:1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[5:] }} {{ l[1:-1] }} {{ l[::-2] }}",
    "{{ s[::-1] }} {{ s[1:4] }} {{ u8[::-1] }} {{ u8[2:5] }} {{ s[:-6] }} {{ s[10:2:-3] }} {{ (1, 2, 3)[1:] "
    "}}",
    "{{ range(10)[2:5] }} {{ range(10)[::-1] }} {{ range(5)[-1] }} {{ range(0, 10, 3) }} {{ range(3) }}",
    "{{ l['x'] }}|{{ x.y }}|{{ n.attr }}|{{ s.upper() }}",
    "{{ undefined_name.attr }}",
    "{{ undefined_name['key'] }}",
    "{{ d.missing.deeper }}",
    "{{ l[::0] }}",
    "{{ s.missing_method() }}",
    "{{ d.pop }}|{{ l.append }}|",
    "{{ l.append(4) }}",
    // String methods.
    "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a '.lstrip() }}|{{ ' a  '.rstrip() }}|{{ "
    "ws.strip() }}|",
    "{{ 'a,b,,c'.split(',') }} {{ '  a b  c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', "
    "1) }} {{ ''.split() }} {{ ''.split(',') }}",
    "{{ '  a b  c  '.split(none, 1) }} {{ '  a b  c  '.rsplit(none, 1) }} {{ 'a\\nb\\r\\nc\\rd'.splitlines() "
    "}} {{ 'x\\n'.splitlines(true) }}",
    "{{ s.upper() }} {{ s.lower() }} {{ 'hello wORLD'.title() }} {{ 'hELLO'.capitalize() }} {{ "
    "'AbC'.swapcase() }} {{ 'ß'.upper() }} {{ 'straße'.title() }}",
    "{{ s.startswith('He') }} {{ s.startswith(('x', 'Hel')) }} {{ s.endswith('ld') }} {{ "
    "s.startswith('World', 6) }} {{ u8.startswith('日本') }}",
    "{{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 2) }} {{ 'abc'.replace('', '-') }} {{ u8.replace('語', "
    "'go') }}",
    "{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('zz') }} {{ u8.find('テ') }} {{ s.count('l') }} {{ "
    "s.index('W') }} {{ ''.count('') }}",
    "{{ '-'.join(['a', 'b']) }} {{ ', '.join(words) }} {{ ''.join(s) }} {{ '{} and {}'.format(1, 'b') }} {{ "
    "'{0}{name}{0}'.format(1, name='n') }}",
    "{{ '{:>6}|{:<4}|{:^7.2f}|{:,}|{!r}|{:08.3f}|{:x}|{:+d}'.format('ab', 1, 3.14159, 1234567, 'q', -3.5, "
    "255, 4) }}",
    "{{ '{:.3}|{:g}|{}|{:e}|{:.1%}|{:*^9}|{:5}|{:<5}|'.format(1.0, 0.00001, 1e20, 12345.678, 0.123, 'mid', "
    "42, true) }}",
    "{{ '{0[name]} is {0[age]}'.format(users[0]) }} {{ '{u.name}'.format(u=users[1]) }} {{ "
    "'{{literal}}'.format() }}",
    "{{ 'abc'.center(9, '*') }}|{{ 'abc'.ljust(5) }}|{{ 'abc'.rjust(5, '0') }}|{{ '42'.zfill(5) }}|{{ "
    "'-42'.zfill(5) }}|{{ 'ab'.center(5) }}",
    "{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'abc'.partition('x') }} {{ "
    "'prefix_x'.removeprefix('prefix_') }} {{ 'x.txt'.removesuffix('.txt') }}",
    "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ '  '.isspace() }} {{ "
    "'abc'.islower() }} {{ 'ABC'.isupper() }} {{ ''.isdigit() }} {{ 'A1'.isupper() }}",
    "{{ ','.join([1, 2]) }}",
    "{{ 'a'.split('') }}",
    "{{ s.index('zz') }}",
    // Filters.
    "{{ ws|trim }}|{{ 'xxhixx'|trim('x') }}|{{ s|length }} {{ l|length }} {{ d|length }} {{ "
    "undefined_name|length }} {{ l|count }}",
    "{{ s|upper }} {{ s|lower }} {{ 'hello world-foo(bar'|title }} {{ \"it's\"|title }} {{ 'hELLO "
    "wORLD'|capitalize }}",
    "{{ l|first }} {{ l|last }} {{ d|first }} {{ d|last }} {{ s|first }} {{ []|first }}|{{ []|last }}|{{ "
    "u8|last }}",
    "{{ l|join }} {{ l|join(', ') }} {{ [none, true, 1.0]|join('/') }} {{ users|join(', ', attribute='name') "
    "}} {{ s|join('-') }}",
    "{{ undefined_name|default('dflt') }} {{ e|default('dflt') }} {{ e|default('dflt', true) }} {{ n|d('x') "
    "}} {{ x|default(5) }}",
    "{{ l|sort }} {{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ words|sort(reverse=true) }} {{ "
    "users|sort(attribute='age')|map(attribute='name')|list }}",
    "{{ users|sort(attribute='age,name')|map(attribute='name')|join(',') }} {{ users|sort(attribute='name', "
    "reverse=true)|map(attribute='name')|list }}",
    "{{ d|dictsort }} {{ d|dictsort(by='value', reverse=true) }} {{ {'B': 1, 'a': 2}|dictsort }} {{ {'B': 1, "
    "'a': 2}|dictsort(true) }}",
    "{{ d|items|list }} {{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items() }} {{ "
    "d.keys() }}",
    "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{% for k, v in d.items() %}{{ k }}:{{ v }},{% "
    "endfor %}",
    "{{ l|map('string')|list }} {{ words|map('upper')|join }} {{ users|map(attribute='name')|list }} {{ "
    "users|map(attribute='tags', default='none')|list }}",
    "{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a', "
    "none]|select|list }} {{ [1, 5, 9]|select('>', 4)|list }}",
    "{{ users|selectattr('age', 'equalto', 30)|map(attribute='name')|list }} {{ "
    "users|rejectattr('tags')|map(attribute='name')|list }} {{ users|selectattr('tags')|list|length }}",
    "{{ messages|selectattr('role', '==', 'user')|list }} {{ messages|selectattr('role', 'in', "
    "['system'])|map(attribute='content')|first }}",
    "{{ l|max }} {{ l|min }} {{ words|max }} {{ words|min }} {{ words|max(case_sensitive=true) }} {{ "
    "users|max(attribute='age') }} {{ []|max }}|",
    "{{ l|sum }} {{ users|sum(attribute='age') }} {{ [[1], [2]]|sum(start=[]) }} {{ [0.5, 0.25]|sum }} {{ "
    "l|sum(start=10) }}",
    "{{ [1, 2, 1, 'a', 'A', 'b']|unique|list }} {{ words|unique(case_sensitive=true)|list }} {{ "
    "users|unique(attribute='age')|map(attribute='name')|list }}",
    "{{ l|reverse|list }} {{ s|reverse }} {{ u8|reverse }} {{ d|reverse|list }} {{ "
    "l|map('string')|reverse|list }}",
    "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3, 4, 5]|batch(3, 'x')|list }} {{ [1, 2, 3, 4, "
    "5]|slice(2)|list }} {{ [1, 2, 3, 4]|slice(3, 0)|list }}",
    "{{ 'abc'|indent }}|{{ 'a\\nb\\n\\nc'|indent(2, true) }}|{{ 'a\\nb\\n\\nc'|indent(2, blank=true) }}|{{ "
    "'a\\nb'|indent('>>') }}|{{ 'a\\n'|indent }}|",
    "{{ ' 4_2 '|int }} {{ '0x1F'|int }} {{ '0x1F'|int(base=16) }} {{ '1e3'|int }} {{ 'nan'|int(7) }} {{ "
    "'inf'|int }} {{ 4.7|int }} {{ -4.7|int }} {{ true|int }} {{ '12abc'|int }}",
    "{{ ' inf'|float }} {{ '1_0.5'|float }} {{ 5|float }} {{ 'zz'|float }} {{ '1e3'|float }} {{ '-.5'|float "
    "}} {{ none|float(-1) }}",
    "{{ 3.0|round }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.675|round(2) }} {{ 7|round }} "
    "{{ -2.5|round }} {{ 42.55|round(1, 'floor') }} {{ 42.51|round(0, 'ceil') }} {{ 1234.5|round(-2) }}",
    "{{ -3|abs }} {{ -2.5|abs }} {{ 'x'|string }} {{ 12|string + 'a' }} {{ [1, 'a']|string }} {{ none|string "
    "}}",
    "{{ s|center(15) }}|{{ '<a href=\"x\">&\\''|e }} {{ '<b>'|escape }} {{ [1, [2]]|safe }} {{ 'a b  "
    "c\\nd'|wordcount }} {{ u8|wordcount }}",
    "{{ 'a b c d e f g h'|truncate(9) }}|{{ 'a b c d e f g h'|truncate(9, true) }}|{{ 'short'|truncate(9) "
    "}}|{{ 'abcdefghijklmno'|truncate(10, end='!', leeway=0) }}",
    "{{ '%s-%s'|format('a', 'b') }} {{ '%(x)s'|format(x='kw') }} {{ users[0]|attr('name') }}|{{ d|attr('a') "
    "}}|",
    "{{ {'a': 1.0, 'b': [true, none, 'é\"\\n\\u0001']}|tojson }} {{ {'a': [1, 2], 'b': {}, 'c': "
    "[]}|tojson(indent=2) }}",
    "{{ users|tojson }} {{ 'x'|tojson }} {{ 1.5|tojson }} {{ none|tojson }} {{ (1, 2)|tojson }} {{ {1: 'a', "
    "none: 'b', true: 'c', 2.5: 'd'}|tojson }}",
    "{{ d|tojson(sort_keys=true) }} {{ l|tojson(separators=(',', ':')) }} {{ d|tojson(indent='\\t') }} {{ "
    "nested|tojson(indent=0) }}",
    "{{ u8|tojson }} {{ ws|tojson }} {{ 'quote\" back\\\\ slash / ctrl \\x7f'|tojson }}",
    "{{ undefined_name|tojson }}",
    "{{ namespace(a=1)|tojson }}",
    "{{ 5|length }}",
    "{{ 5|first }}",
    "{{ [1, 2]|map('nosuchfilter')|list }}",
    "{{ undefined_name|int }}",
    "{{ [1, 'a']|sort }}",
    "{{ x|items|list }}",
    // Tests.
    "{{ x is defined }} {{ undefined_name is defined }} {{ undefined_name is undefined }} {{ n is none }} {{ "
    "x is none }} {{ d.missing is defined }}",
    "{{ x is number }} {{ f is number }} {{ t is number }} {{ x is integer }} {{ t is integer }} {{ f is "
    "float }} {{ x is float }} {{ t is boolean }} {{ x is boolean }}",
    "{{ s is string }} {{ x is string }} {{ d is mapping }} {{ l is mapping }} {{ s is iterable }} {{ x is "
    "iterable }} {{ undefined_name is iterable }} {{ d is iterable }}",
    "{{ l is sequence }} {{ s is sequence }} {{ d is sequence }} {{ x is sequence }} {{ t is true }} {{ t is "
    "false }} {{ no is false }} {{ 1 is true }}",
    "{{ 3 is odd }} {{ 3 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 'abc' is lower }} "
    "{{ 'ABC' is upper }} {{ x is sameas 1 }} {{ n is sameas none }}",
    "{{ x is eq 1 }} {{ x is equalto(2) }} {{ x is ne 2 }} {{ x is lt 2 }} {{ x is greaterthan 0 }} {{ x is "
    "ge 1 }} {{ x is in l }} {{ 'a' is in 'abc' }} {{ x is == 1 }}",
    "{{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }} {{ range is callable }} {{ x is "
    "callable }} {{ x is not none }} {{ x is not defined }}",
    "{{ x is defined and x > 0 }} {{ not x is none }} {{ x is none or t }} {{ (x is number) + 1 }}",
    "{{ 'a' is odd }}",
    // Whitespace control.
    "a\n  {% if true %}\n  b\n  {% endif %}\nc",
    "a  {% if true %}b{% endif %}  c",
    "  {# comment #}\nx",
    "{# c #}\nx\n{#- trimmed -#}\n  y",
    "  {{ 'v' }}\n  {%+ if true %}y{% endif %}",
    "a {%- if true -%} b {%- endif -%} c",
    "a\n\n  {{- 'v' -}}  \n\n b",
    "{% if true +%}\nX{% endif %}",
    "{% raw %}\n{{ x }}{% endraw %}\nZ",
    "  {%- raw %} {{ raw }} {% endraw -%}  |",
    "x{% for i in l %}\n  {{ i }}\n{% endfor %}\ny",
    "{%- for i in l -%}\n  [{{ i }}]\n{%- endfor -%}",
    "line1\r\nline2\r{{ x }}\r\n",
    "trailing newline kept once\n\n",
    "{{ 'a' }}\n{{ 'b' }}\n",
    "\t{% if t %}\ttab{% endif %}\n",
    "{{ {'a': {'b': 1}}['a']['b'] }}{{ {'a':1}}}",
    "\u3000{% if true %}x{% endif %}|\u00a0 {# c #}y| \t{%- if true %}z{% endif %}",
    "abc  {% if true %}same line{% endif %}\n  {{ 'var at line start' }}\n\t{% if true %}\n  t\n{% endif %}",
    "{%- if true -%}\u3000\n lead {%- endif -%}\u2003 trail",
    "{% if true %}  \n{% endif %}|{% if true %}\n\n{% endif %}|{% if true %}{% endif %}\n\n|",
    "{#- a -#}  x  {#+ b +#}  y  {# c #}\n  z",
    "  {%- raw -%}  {{ raw }}  {%- endraw -%}  |{% raw %}{% if %}{% endraw %}",
    "{{ x-1 }}{{ x -1 }}{{1-1}}{{ x- 1 }}{{ 1_2.3_4 }}{{ 1e5 }}{{ 2E-2 }}{{ 007 }}",
    "{{ {'a': 1, 'a': 2} }} {{ {True: 'a'}[1] }} {{ {1: 'a'}[1.0] }} {{ [1, 2, 3][True] }} {{ {1: 'x'}.1 }}",
    "{{ 9007199254740993 == 9007199254740992.0 }} {{ 123456789.123456789 }} {{ 1e22 }} {{ 0.1 * 3 }} {{ 5 // "
    "0.5 }} {{ 'a' * -1 }}|",
    "{{ 'ab' < 'abc' }} {{ 'é' > 'z' }} {{ '日' > 'é' }} {{ [] == [] }} {{ {} == {} }} {{ none != false }} "
    "{{ 0 == false }} {{ '' == none }}",
    "{{ l[-100:100] }} {{ l[100:-100:-1] }} {{ s[-3:] }} {{ s[:-100] }}|{{ u8[-2::-2] }}",
    "{% for i in l %}{% for j in l %}{{ loop.depth }}{% endfor %}{% endfor %}",
    "{% for k, v in d|dictsort %}{{ k }}={{ v }} {% endfor %}{% for k in d|sort %}{{ k }}{% endfor %}",
    "{{ 'ǅ'.upper() }} {{ 'ǆ'.title() }} {{ 'ﬁne'.upper() }} {{ 'İx'.lower()|length }} {{ 'ÀÉÎ'.lower() }} "
    "{{ 'ßa'.capitalize() }}",
    "{{ ws|trim|length }} {{ '\u2003x\u2003'.strip() }} {{ 'x\u200by'.split() }} {{ 'a\u3000b'.split() }} {{ "
    "'a\\x1cb'.split() }}",
    "{{ 'line\u2028next'.splitlines() }} {{ 'tab\tsep'.split('\t') }} {{ '\x0c'.isspace() }}",
    "{% set ns = namespace() %}{{ ns.y is defined }}|{{ ns.y }}|{% set ns.y = 0 %}{{ ns.y is defined }}",
    "{{ loop is defined }}{% for i in [1] %}{{ loop is defined }}{% endfor %}",
    "{% for i in l %}{{ loop.cycle() }}{% endfor %}",
    "{{ messages[0]['content'] | trim }}{{ messages|map(attribute='role')|join(',') }}{{ messages|length }}",
    "{{ (messages|last).content }} {{ messages[-1]['role'] == 'user' }} {{ (messages|selectattr('role', "
    "'eq', 'user')|list|last).content }}",
    "{% if messages[0].role == 'system' %}{% set sys = messages[0].content %}{% set rest = messages[1:] %}{% "
    "endif %}{{ sys }}|{{ rest|length }}",
    "{{ '%s' % none }} {{ '%s' % (none,) }} {{ '%r' % 'q' }} {{ '%5s|%-5s|' % ('a', 'b') }} {{ '%+d % d' % "
    "(5, 5) }} {{ '%.2e' % 12345.678 }} {{ '%g' % 0.0001 }}",
    "{{ '%s %s' % ('only one',) }}",
    "{{ '%d' % 'x' }}",
    "{{ 'a' ~ none ~ 1 ~ 1.5 ~ [1] ~ true }}",
    "{{ [1, 2] ~ (3,) }}",
    // Loops.
    "{% for i in l %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ "
    "loop.length }}/{{ loop.first }}/{{ loop.last }};{% endfor %}",
    "{% for i in l %}{{ loop.previtem }}-{{ loop.nextitem }}{{ loop.cycle('a', 'b') }};{% endfor %}",
    "{% for i in l if i > 1 %}{{ loop.index }}/{{ loop.length }}:{{ i }};{% else %}none{% endfor %}",
    "{% for i in [] %}x{% else %}empty{% endfor %}{% for i in l if i > 5 %}x{% else %}filtered away{% endfor "
    "%}",
    "{% for i in l %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% if i == 1 %}{% break %}{% endif %}{% "
    "endfor %}|{% for i in l %}{{ i }}{% break %}{% endfor %}",
    "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }},{% endfor %}{% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ "
    "b }}{{ c }}{% endfor %}",
    "{% for c in 'héllo' %}[{{ c }}]{% endfor %}{% for k in d %}{{ k }};{% endfor %}{% for i in "
    "undefined_name %}never{% endfor %}",
    "{% for i in range(3) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{{ j }} {% endfor %}{{ loop.index "
    "}}|{% endfor %}",
    "{% for i in range(2, 11, 3) %}{{ i }},{% endfor %}{% for i in range(5, 0, -2) %}{{ i }},{% endfor %}{% "
    "for i in range(0) %}x{% endfor %}",
    "{% for m in messages %}{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}",
    "{% for m in messages[::-1] %}{{ loop.index0 }}:{{ m.role }} {% endfor %}",
    "{% for i in l %}{{ loop.changed(i > 1) }}{% endfor %}",
    "{% for x in [1, 2] %}{{ x }}{% endfor %}{{ x }}",
    "{% set x = 5 %}{% for i in l %}{{ x }}{% set x = i %}{{ x }}|{% endfor %}{{ x }}",
    "{% for i in [1, 2] %}{% if i == 2 %}{{ y }}{% endif %}{% set y = i %}{% endfor %}[{{ y }}]",
    "{% for item in [{'n': 'a', 'c': [{'n': 'b', 'c': []}, {'n': 'c', 'c': [{'n': 'd', 'c': []}]}]}] "
    "recursive %}{{ loop.depth }}{{ item.n }}({{ loop(item.c) }}){% endfor %}",
    "{% for i in 5 %}{% endfor %}",
    "{% for a, b in [1, 2] %}{% endfor %}",
    "{% for a, b in [[1, 2, 3]] %}{% endfor %}",
    "{% for i in l %}{{ loop(l) }}{% endfor %}",
    "{{ range(100001)|length }}",
    "{{ range(3, 1, 0) }}",
    // Assignment and scoping.
    "{% set a = 1 %}{% set b, c = 2, 3 %}{% set t1 = 4, 5 %}{{ a }}{{ b }}{{ c }}{{ t1 }}",
    "{% set x %}inner {{ 1 }}{% endset %}[{{ x }}]{% set y | upper %}shout {{ s }}{% endset %}[{{ y }}]",
    "{% set ns = namespace(a=1, b='x') %}{% for i in l %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ "
    "ns.b }} {{ ns }}",
    "{% set ns = namespace(d) %}{{ ns.a }}{{ ns.items }}{% set ns.new = [1] %}{{ ns.new }}{{ ns.missing }}|",
    "{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}",
    "{% if true %}{% set inside = 'visible' %}{% endif %}{{ inside }}",
    "{% set messages = messages[1:] %}{{ messages|length }}{{ messages[0].role }}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|",
    "{% set x = 1 %}{% set x = x + 1 %}{{ x }}",
    "{% set d2 = dict(a=1, b=2) %}{{ d2 }} {{ dict(d, z=0) }} {{ dict([['k', 'v']]) }}",
    "{% set n2 = none %}{% set n2.attr = 1 %}",
    "{% set a, b = [1, 2, 3] %}",
    // Macros and calls.
    "{% macro greet(name, greeting='hi') %}{{ greeting }} {{ name }}{% endmacro %}{{ greet('bob') }}|{{ "
    "greet('al', greeting='yo') }}|{{ greet() }}|{{ greet(greeting='g', name='n') }}",
    "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, z=4) }}",
    "{% macro m(a, b=a * 2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(3) }} {{ m(3, 1) }}",
    "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ "
    "fact(6) }}",
    "{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside {{ x }}{% endcall %}",
    "{% macro list(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(item) "
    "list([1, 2]) %}<{{ item }}>{% endcall %}",
    "{% macro m() %}{% set local = 1 %}{{ local }}{% endmacro %}{{ m() }}{{ local }}|",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }}",
    "{% macro m() %}x{% endmacro %}{{ m()|length }}{{ m is callable }}",
    "{{ range(3)|list }} {{ range(1, 4)|list }} {{ joiner is defined }}{% set j = joiner('+') %}{{ j() }}a{{ "
    "j() }}b{{ j() }}c",
    "{{ raise_exception('boom: ' ~ x) }}",
    "{{ undefined_name() }}",
    "{{ x() }}",
    "{{ strftime_now('%Y-%m-%d %H:%M:%S %A %d %b %Y %j') }}",
    // Filter blocks and misc statements.
    "{% filter upper %}abc {{ s }}{% endfilter %}|{% filter trim|upper %}  spaced  {% endfilter %}|",
    "{% print 'printed', x %}",
    "{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %}{% if x == 2 %}two{% elif x == 1 "
    "%}one{% endif %}",
    "{% if l %}nonempty{% endif %}{% if [] %}empty{% else %}falsy{% endif %}{% if d.missing %}x{% else "
    "%}missing falsy{% endif %}",
    "{% if x, %}tuple is true{% endif %}",
    // Syntax errors.
    "{% if x %}unclosed",
    "{% for %}{% endfor %}",
    "{% endif %}",
    "{{ x",
    "{{ (1 }}",
    "{{ [1, 2 }}",
    "{{ 1 + }}",
    "{% nosuchtag %}",
    "{{ x|nosuchfilter }}",
    "{{ x is nosuchtest }}",
    "{{ 'unterminated }}",
    "{% macro m(a=1, b) %}{% endmacro %}",
    "{% break %}",
    "{% for i in l %}{% endif %}",
    "{{ x is defined is defined }}",
    "{% set 1 = 2 %}",
    "{# unclosed comment",
    "{{ }}",
    "{% include 'other.jinja' %}",
    "{{ 'a' 'b' 1 }}",
    "{{ f(x=1, 2) }}",
    "{{ '\\x4' }}",
    "{{ x.1.2 }}",
};

TEST(ChatTemplateReference, FeatureCorpusMatchesJinja2) {
  std::vector<Case> cases;
  ojson context = CorpusContext();
  for (size_t i = 0; i < sizeof(kCorpus) / sizeof(kCorpus[0]); ++i) {
    cases.push_back({"corpus[" + std::to_string(i) + "]: " + kCorpus[i], kCorpus[i], context});
  }
  int matched = CompareAll(cases);
  EXPECT_EQ(matched, static_cast<int>(cases.size()));
}

// Hugging Face-style templates beyond the ones in ../shared: the idioms of
// other published chat templates (Mistral's alternation check, Gemma's role
// mapping, ChatML with tools, Phi's bos handling), written for this test.
const char* const kStyleTemplates[] = {
    // Alternating roles enforced with raise_exception, system folded into the first user turn.
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = system_message + '\\n\\n' + "
    "message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}{% "
    "endfor %}",
    // Role renaming and a trailing generation prompt.
    "{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' "
    "else "
    "message['role'] %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}",
    // ChatML with tool calls rendered through tojson and a namespace.
    "{%- set ns = namespace(found=false) -%}{%- for message in messages -%}{%- if message['role'] == "
    "'system' -%}"
    "{%- set ns.found = true -%}{%- endif -%}{%- endfor -%}{%- if not ns.found -%}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' -}}{%- endif %}"
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' }}"
    "{%- if message.tool_calls is defined %}{%- for call in message.tool_calls %}"
    "{{- '<tool_call>' + call.function | tojson + '</tool_call>' }}{%- endfor %}{%- else %}"
    "{{- message.content }}{%- endif %}{{- '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
    // Tool schemas spelled out field by field, and tool calls whose arguments may be a string or a mapping.
    "{%- if tools %}{%- for tool in tools %}{%- set fn = tool.function if tool.function is defined else tool "
    "%}"
    "## {{ fn.name }}: {{ fn.description | default('') | trim }}\n{%- for name, p in "
    "fn.parameters.properties.items() %}"
    "- {{ name }} ({{ p.type }}{{ ', required' if name in fn.parameters.required | default([]) }}){{ ': ' ~ "
    "p.enum | join('|') if p.enum is defined }}{{ ' = ' ~ p.default if p.default is defined }}\n"
    "{%- endfor %}{{ fn | tojson(indent=4) }}\n{%- endfor %}{%- endif %}"
    "{%- for message in messages %}{%- set content = message.content if message.content is string else '' %}"
    "[{{ message.role | upper }}]{{ content }}{%- if message.tool_calls is defined and message.tool_calls | "
    "length > 0 %}"
    "{%- for call in message.tool_calls %}<call n={{ loop.index }}>{{ call.function.name }}("
    "{{ call.function.arguments | tojson if call.function.arguments is mapping else call.function.arguments "
    "}})"
    "{%- endfor %}{%- endif %}\n{%- endfor %}{{ messages | map(attribute='role') | select('equalto', 'user') "
    "| list "
    "| length }} user turns",
    // Content given as a list of typed parts (multimodal-style messages).
    "{% for message in messages %}<|{{ message.role }}|>{% if message.content is string %}{{ message.content "
    "}}"
    "{% else %}{% for part in message.content %}{% if part.type == 'text' %}{{ part.text }}{% elif part.type "
    "== "
    "'image' %}<image>{% endif %}{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt "
    "%}<|assistant|>{% endif %}",
    // Mistral-style tools: listed before the last user turn, calls as a [TOOL_CALLS] list.
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}{% if loop.last and tools %}"
    "[AVAILABLE_TOOLS] {{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}[INST] {{ m.content }}[/INST]"
    "{% elif m.role == 'assistant' %}{% if m.tool_calls %}[TOOL_CALLS] [{% for c in m.tool_calls %}"
    "{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments | tojson }}}"
    "{% if not loop.last %}, {% endif %}{% endfor %}]{% else %}{{ m.content }}{% endif %}{{ eos_token }}"
    "{% elif m.role == 'tool' %}[TOOL_RESULTS] {\"content\": {{ m.content | tojson }}}[/TOOL_RESULTS]"
    "{% endif %}{% endfor %}",
    // Per-role blocks with whitespace control and a macro.
    "{% macro render(role, text) -%}\n<|{{ role }}|>\n{{ text | trim }}<|end|>\n{%- endmacro %}\n"
    "{% for message in messages %}\n  {{ render(message.role, message.content) }}\n{% endfor %}\n"
    "{% if add_generation_prompt %}\n<|assistant|>\n{% endif %}",
};

TEST(ChatTemplateReference, OtherTemplateStylesMatchJinja2) {
  std::vector<Case> cases;
  for (size_t t = 0; t < sizeof(kStyleTemplates) / sizeof(kStyleTemplates[0]); ++t) {
    for (const Conversation& c : Conversations()) {
      for (bool prompt : {false, true}) {
        ojson context = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
        for (auto it = c.extra.begin(); it != c.extra.end(); ++it) context[it.key()] = it.value();
        context["messages"] = c.messages;
        context["add_generation_prompt"] = prompt;
        cases.push_back({"style[" + std::to_string(t) + "] / " + c.name, kStyleTemplates[t], context});
      }
    }
  }
  int matched = CompareAll(cases);
  EXPECT_EQ(matched, static_cast<int>(cases.size()));
}

}  // namespace chat_template_reference_tests
}  // namespace kiln
