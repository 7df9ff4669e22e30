// ChatTemplate: the interpreter's features one by one, error messages with
// template positions, and the render limits that make untrusted templates
// safe. (Byte-for-byte agreement with jinja2 is chat_template_reference_test.)
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "testing/test_paths.h"

namespace kiln {
namespace chat_template_tests {

using ojson = nlohmann::ordered_json;

std::tm PinnedNow() {
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 8;
  t.tm_mday = 5;
  t.tm_hour = 14;
  t.tm_min = 30;
  timegm(&t);
  return t;
}

// Renders `source` with the given variables (messages defaults to empty).
Expected<std::string> RenderWith(std::string_view source, const ojson& vars = ojson::object(),
                                 const RenderLimits& limits = {}) {
  KILN_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::Parse(source));
  if (vars.is_null()) return RenderWith(source, ojson::object(), limits);
  ojson messages = vars.contains("messages") ? vars["messages"] : ojson::array();
  ojson extra = ojson::object();
  for (auto it = vars.begin(); it != vars.end(); ++it) {
    if (it.key() != "messages" && it.key() != "add_generation_prompt") extra[it.key()] = it.value();
  }
  RenderOptions options;
  options.limits = limits;
  options.now = PinnedNow();
  return tmpl.Render(messages, vars.value("add_generation_prompt", false), extra, options);
}

// The rendered text, or the error's text (so failures show what happened).
std::string Render(std::string_view source, const ojson& vars = ojson::object()) {
  auto out = RenderWith(source, vars);
  return out.ok() ? *out : "ERROR " + out.status().ToString();
}

std::string ErrorOf(std::string_view source, const ojson& vars = ojson::object(),
                    const RenderLimits& limits = {}) {
  auto out = RenderWith(source, vars, limits);
  return out.ok() ? "rendered: " + *out : out.status().ToString();
}

TEST(ChatTemplate, PrintsValuesAsPythonDoes) {
  EXPECT_EQ(Render("{{ 1.0 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 % 3 }}"),
            "1.0 1e+16 0.30000000000000004 1e-05 3.5 3 2");
  EXPECT_EQ(Render("{{ true }} {{ none }} {{ [1, 'a', none] }} {{ {'k': \"it's\"} }} {{ (1,) }}"),
            "True None [1, 'a', None] {'k': \"it's\"} (1,)");
  EXPECT_EQ(Render("[{{ missing }}]"), "[]");
  EXPECT_EQ(Render("{{ ['\\n', '\\u3000', 'é'] }}"), "['\\n', '\\u3000', 'é']");
}

TEST(ChatTemplate, ExpressionsFollowJinjaPrecedence) {
  EXPECT_EQ(Render("{{ 2 + 3 * 4 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 2 * 3 ~ 4 }} {{ 'a' ~ (1 + 2) }}"),
            "14 4 64 64 a3");
  EXPECT_EQ(Render("{{ ' x '|trim + '|' }}{{ -1|abs }}{{ not 1 == 2 }}"), "x|1True");
  EXPECT_EQ(Render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'b' in 'abc' }} {{ 2 not in [1] }}"),
            "True False True True");
  EXPECT_EQ(Render("{{ '' or 'dflt' }} {{ 0 and x }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}]"),
            "dflt 0 n []");
}

TEST(ChatTemplate, AttributeAndItemAccess) {
  ojson vars = {{"m", {{"role", "user"}, {"items", 3}}}, {"l", {10, 20, 30}}};
  EXPECT_EQ(Render("{{ m.role }} {{ m['role'] }} {{ m['items'] }} {{ m.get('x', 'dflt') }}", vars),
            "user user 3 dflt");
  EXPECT_EQ(Render("{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[::-1] }} [{{ l[9] }}] {{ l.1 }}", vars),
            "10 30 [20, 30] [30, 20, 10] [] 20");
  EXPECT_EQ(Render("{{ '日本語'[1] }} {{ '日本語'[::-1] }} {{ '日本語'|length }}"), "本 語本日 3");
}

TEST(ChatTemplate, StringMethods) {
  EXPECT_EQ(Render("{{ ' a b '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'x</think>y'.split('</think>')[-1] }}"),
            "a b|['a', 'b']|y");
  EXPECT_EQ(
      Render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ '\\n\\nx'.lstrip('\\n') }}"),
      "True True x");
  EXPECT_EQ(
      Render("{{ 'Hi'.upper() }} {{ 'Hi'.lower() }} {{ 'a-b'.replace('-', '+') }} {{ '{}!'.format('x') }}"),
      "HI hi a+b x!");
}

TEST(ChatTemplate, Filters) {
  ojson vars = {{"tools", {{{"name", "f"}, {"b", 1}, {"a", {1, 2}}}}}};
  EXPECT_EQ(Render("{{ tools|length }} {{ tools[0]|tojson }}", vars),
            "1 {\"name\": \"f\", \"b\": 1, \"a\": [1, 2]}");
  EXPECT_EQ(Render("{{ tools[0]|tojson(indent=2) }}", vars),
            "{\n  \"name\": \"f\",\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ]\n}");
  EXPECT_EQ(Render("{{ '日本'|tojson }} {{ 'a\"\\n'|tojson }}"), "\"日本\" \"a\\\"\\n\"");
  EXPECT_EQ(
      Render("{{ [3, 1, 2]|sort|join(',') }} {{ ['a', 'b']|first }} {{ ['a', 'b']|last }} {{ 'ab'|upper }}"),
      "1,2,3 a b AB");
  EXPECT_EQ(Render("{{ x|default('d') }} {{ ''|default('d', true) }} {{ {'b': 1, 'a': 2}|items|list }}"),
            "d d [('b', 1), ('a', 2)]");
  EXPECT_EQ(Render("{{ [{'r': 'a'}, {'r': 'b'}]|selectattr('r', 'equalto', 'b')|map(attribute='r')|list }}"),
            "['b']");
  EXPECT_EQ(Render("{{ ['x', 'code_interpreter']|reject('equalto', 'code_interpreter')|join(', ') }}"), "x");
  EXPECT_EQ(Render("{{ 'hello world'|capitalize }} {{ 'hello world'|title }} {{ 'a b'|replace(' ', '_') }}"),
            "Hello world Hello World a_b");
}

TEST(ChatTemplate, Tests) {
  EXPECT_EQ(
      Render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ 3 is odd }}"),
      "False True True True True");
  EXPECT_EQ(Render("{{ x is not defined }} {{ 'a' is iterable }} {{ 1 is number }} {{ false is false }}"),
            "True True True True");
}

TEST(ChatTemplate, WhitespaceControlWithTrimAndLstripBlocks) {
  EXPECT_EQ(Render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(Render("a {%- if true -%} b {%- endif -%} c"), "abc");
  EXPECT_EQ(Render("  {{- 'v' -}}  \n"), "v");
  EXPECT_EQ(Render("{# comment #}\nx"), "x");
  EXPECT_EQ(Render("{% if true +%}\nX{% endif %}"), "\nX");
  EXPECT_EQ(Render("one trailing newline is dropped\n\n"), "one trailing newline is dropped\n");
  EXPECT_EQ(Render("crlf\r\nbecomes\rlf"), "crlf\nbecomes\nlf");
}

TEST(ChatTemplate, LoopVariablesAndControl) {
  EXPECT_EQ(Render("{% for i in [5, 6, 7] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }} "
                   "{% endfor %}"),
            "10TrueFalse 21FalseFalse 32FalseTrue ");
  EXPECT_EQ(
      Render("{% for i in [1, 2, 3] %}{{ loop.revindex }}{{ loop.length }}{{ loop.previtem }}{% endfor %}"),
      "33231132");
  EXPECT_EQ(Render("{% for i in [1, 2, 3, 4] %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}"
                   "{% break %}{% endif %}{{ i }}{% endfor %}"),
            "13");
  EXPECT_EQ(Render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}"), "a=1");
  EXPECT_EQ(Render("{% for i in range(5) if i is odd %}{{ i }}/{{ loop.length }} {% endfor %}"), "1/2 3/2 ");
}

TEST(ChatTemplate, SetScopingAndNamespace) {
  // A set inside a loop stays in the loop (each iteration starts afresh);
  // a namespace carries state out of it.
  EXPECT_EQ(
      Render("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 10 * i %}{{ x }}|{% endfor %}{{ x }}"),
      "110|120|1");
  EXPECT_EQ(
      Render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}"
             "{{ ns.n }} {{ ns }}"),
      "6 <Namespace {'n': 6}>");
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c %}block {{ a }}{% endset %}[{{ c }}]"),
            "12[block 1]");
}

TEST(ChatTemplate, Macros) {
  EXPECT_EQ(Render("{% macro tag(name, attr='x') %}<{{ name }} {{ attr }}>{% endmacro %}"
                   "{{ tag('a') }}{{ tag('b', attr='y') }}{{ tag(attr='z', name='c') }}"),
            "<a x><b y><c z>");
  EXPECT_EQ(Render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}"),
            "1(2,){'k': 3}");
  EXPECT_EQ(Render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}"), "[in]");
  EXPECT_EQ(Render("{% filter upper %}shout{% endfilter %}"), "SHOUT");
}

TEST(ChatTemplate, GlobalsFromHuggingFace) {
  EXPECT_EQ(Render("{{ strftime_now('%d %b %Y') }}"), "05 Sep 2024");
  EXPECT_EQ(ErrorOf("{{ raise_exception('Only user and assistant roles are supported!') }}"),
            "invalid argument: chat template: 1:4: Only user and assistant roles are supported!");
  EXPECT_EQ(Render("{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }}"),
            "True True False");
}

TEST(ChatTemplate, RendersAConversation) {
  const char* chatml =
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% "
      "endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  auto tmpl = ChatTemplate::Parse(chatml);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  std::vector<ChatMessage> messages = {{"system", "Be brief.", {}}, {"user", "Grüß dich 👋", {}}};
  auto with_prompt = tmpl->Render(messages, true);
  ASSERT_TRUE(with_prompt.ok()) << with_prompt.status().ToString();
  EXPECT_EQ(*with_prompt,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nGrüß dich 👋<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto without = tmpl->Render(messages, false);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(*without, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nGrüß dich 👋<|im_end|>\n");
}

TEST(ChatTemplate, OrderedJsonKeepsKeyOrderAndPlainJsonSortsIt) {
  auto tmpl = ChatTemplate::Parse("{{ tools|tojson }}");
  ASSERT_TRUE(tmpl.ok());
  auto ordered = tmpl->Render(ojson::array(), false, ojson::parse(R"({"tools": {"z": 1, "a": 2}})"));
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(*ordered, "{\"z\": 1, \"a\": 2}");
  auto sorted =
      tmpl->Render(nlohmann::json::array(), false, nlohmann::json::parse(R"({"tools": {"z": 1, "a": 2}})"));
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(*sorted, "{\"a\": 2, \"z\": 1}");
}

TEST(ChatTemplate, LoadsTemplatesFromTokenizerConfig) {
  std::ifstream in(testing::SharedDir() + "/data/tokenizers/llama3/tokenizer_config.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json config = nlohmann::json::parse(text.str());
  auto tmpl = ChatTemplate::FromTokenizerConfig(config);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  ojson tokens = SpecialTokenVariables(config);
  EXPECT_EQ(tokens["bos_token"], "<|begin_of_text|>");
  RenderOptions options;
  options.now = PinnedNow();
  auto out = tmpl->Render(MessagesToJson({{"user", "Hi", {}}}), true, tokens, options);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(
      *out,
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
      "Today Date: 05 Sep 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n");

  nlohmann::json named = {
      {"chat_template",
       {{{"name", "default"}, {"template", "D"}}, {{"name", "tool_use"}, {"template", "T"}}}}};
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig(named)->source(), "D");
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig(named, "tool_use")->source(), "T");
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig(named, "nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig(nlohmann::json::object()).status().code(),
            StatusCode::kNotFound);
}

TEST(ChatTemplate, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(
      ChatTemplate::Parse("{% for x in y %}\n\n  {% endif %}").status().ToString(),
      "invalid argument: chat template: 3:6: unknown tag 'endif'; the 'for' block at 1:4 expects 'endfor' or "
      "'else'");
  EXPECT_EQ(ChatTemplate::Parse("{% if x %}\nno end").status().ToString(),
            "invalid argument: chat template: 2:7: unexpected end of template, expected 'elif' or 'else' or "
            "'endif' (the 'if' block at 1:4 is not closed)");
  EXPECT_EQ(ChatTemplate::Parse("{{ x | nosuch }}").status().ToString(),
            "invalid argument: chat template: 1:8: no filter named 'nosuch'");
  EXPECT_EQ(ChatTemplate::Parse("{{ (1 }}").status().ToString(),
            "invalid argument: chat template: 1:7: unexpected '}', expected ')'");
  EXPECT_EQ(ChatTemplate::Parse("ok\n{{ 'open }}").status().ToString(),
            "invalid argument: chat template: 2:4: unterminated string literal");
  EXPECT_EQ(ChatTemplate::Parse("\xff").status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplate, RenderErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("{% if true %}\n  {{ 1 + 'a' }}\n{% endif %}"),
            "invalid argument: chat template: 2:6: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(ErrorOf("{{ missing.attr }}"), "invalid argument: chat template: 1:11: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("{{ {'a': 1}.b.c }}"),
            "invalid argument: chat template: 1:14: 'dict object' has no attribute 'b'");
  EXPECT_EQ(ErrorOf("{% set x = none %}{% set x.y = 1 %}"),
            "invalid argument: chat template: 1:26: cannot assign attribute on non-namespace object");
  // An error inside a macro points into the macro.
  EXPECT_EQ(ErrorOf("{% macro m() %}\n{{ 1 // 0 }}{% endmacro %}{{ m() }}"),
            "invalid argument: chat template: 2:4: integer division or modulo by zero");
}

TEST(ChatTemplate, RejectsBadInputWithoutThrowing) {
  auto tmpl = ChatTemplate::Parse("{{ messages }}");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_FALSE(tmpl->Render(ojson::array(), false, ojson::array()).ok());          // extra not an object
  EXPECT_FALSE(tmpl->Render(ojson::array(), false, ojson{{"messages", 1}}).ok());  // clobbers an argument
  EXPECT_FALSE(tmpl->Render(ojson::array({std::string("\xc3")}), false).ok());     // invalid UTF-8
  EXPECT_FALSE(tmpl->Render(ojson::array({UINT64_MAX}), false).ok());              // beyond int64
  ojson deep = ojson::array();
  for (int i = 0; i < 1000; ++i) deep = ojson::array({deep});
  EXPECT_FALSE(tmpl->Render(deep, false).ok());
}

// ---- limits ----

TEST(ChatTemplateLimits, HugeRangeIsRefusedLikeTheSandbox) {
  std::string error = ErrorOf("{% for i in range(10**9) %}x{% endfor %}");
  EXPECT_NE(error.find("Range too big"), std::string::npos) << error;
}

TEST(ChatTemplateLimits, LoopIterationsAreCounted) {
  RenderLimits limits;
  limits.max_loop_iterations = 5000;
  std::string error =
      ErrorOf("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", {}, limits);
  EXPECT_EQ(error, "resource exhausted: chat template: 1:29: template loops exceeded 5000 iterations");
  EXPECT_TRUE(
      RenderWith("{% for i in range(50) %}{% for j in range(50) %}{% endfor %}{% endfor %}", {}, limits)
          .ok());
}

TEST(ChatTemplateLimits, RecursionDepthIsBounded) {
  std::string error = ErrorOf("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}");
  EXPECT_NE(error.find("resource exhausted"), std::string::npos) << error;
  RenderLimits limits;
  limits.max_call_depth = 10;
  error =
      ErrorOf("{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(20) }}", {}, limits);
  EXPECT_NE(error.find("calls nested more than 10 deep"), std::string::npos) << error;
  EXPECT_TRUE(RenderWith("{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(5) }}",
                         {}, limits)
                  .ok());
  error = ErrorOf("{% for i in [[[]]] recursive %}{{ loop(i) }}{{ loop([i]) }}{% endfor %}");
  EXPECT_NE(error.find("resource exhausted"), std::string::npos) << error;
}

TEST(ChatTemplateLimits, OutputAndStringSizesAreBounded) {
  RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  std::string error = ErrorOf("{% for i in range(10000) %}{{ 'x' * 1000 }}{% endfor %}", {}, limits);
  EXPECT_NE(error.find("over the limit of 1048576"), std::string::npos) << error;
  error = ErrorOf("{{ 'x' * 10**12 }}", {}, limits);
  EXPECT_NE(error.find("over the limit"), std::string::npos) << error;
  error = ErrorOf("{{ ('ab' * 1000)|replace('a', 'a' * 100000) }}", {}, limits);
  EXPECT_NE(error.find("over the limit"), std::string::npos) << error;
}

TEST(ChatTemplateLimits, TotalWorkIsBounded) {
  // Quadratic string growth: fine for a few steps, refused at scale.
  RenderLimits limits;
  limits.max_steps = 2'000'000;
  std::string quadratic =
      "{% set ns = namespace(s='') %}{% for i in range(20000) %}{% set ns.s = ns.s ~ 'abcdefghij' %}{% "
      "endfor %}"
      "{{ ns.s|length }}";
  std::string error = ErrorOf(quadratic, {}, limits);
  EXPECT_NE(error.find("steps of work"), std::string::npos) << error;
  // Comparing two wide, deep values that share structure: exponential work
  // without the budget.
  std::string exponential =
      "{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(60) %}{% set ns.a = [ns.a, ns.a] %}"
      "{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a == ns.b }}";
  error = ErrorOf(exponential, {}, limits);
  EXPECT_NE(error.find("steps of work"), std::string::npos) << error;
  // Millions of small values from one big string are refused before they
  // are built (with the default limits).
  error = ErrorOf("{{ ('a,' * 8000000).split(',')|length }}");
  EXPECT_NE(error.find("steps of work"), std::string::npos) << error;
  error = ErrorOf("{{ ('x' * 16000000)|list|length }}");
  EXPECT_NE(error.find("steps of work"), std::string::npos) << error;
  EXPECT_EQ(Render("{{ ('ab' * 1000000)|reverse|length }} {{ ('a,' * 1000)|trim(',')|length }}"),
            "2000000 1999");
}

TEST(ChatTemplateLimits, DeepNestingIsRefusedNotOverflowed) {
  std::string parens = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_NE(ChatTemplate::Parse("{{ " + parens + " }}").status().message().find("nested"), std::string::npos);
  std::string sum = "{{ 1";
  for (int i = 0; i < 50000; ++i) sum += " + 1";
  EXPECT_NE(ChatTemplate::Parse(sum + " }}").status().message().find("nested"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_NE(ChatTemplate::Parse(ifs).status().message().find("nested"), std::string::npos);
  std::string error = ErrorOf(
      "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x "
      "}}");
  EXPECT_NE(error.find("nested more than"), std::string::npos) << error;
  // A long chain of namespaces is freed without deep recursion.
  EXPECT_TRUE(RenderWith("{% set ns = namespace(head=none) %}{% for i in range(100000) %}"
                         "{% set ns.head = namespace(next=ns.head) %}{% endfor %}ok")
                  .ok());
}

TEST(ChatTemplateLimits, ReferenceCyclesDoNotBreakRendering) {
  EXPECT_EQ(Render("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}"),
            "<Namespace {'self': <Namespace {...}>}>");
  EXPECT_EQ(Render("{% macro m() %}m{% endmacro %}{% set ns = namespace(f=m) %}{{ ns.f() }}"), "m");
}

}  // namespace chat_template_tests
}  // namespace kiln
