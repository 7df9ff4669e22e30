"""Structured output through `kiln serve` and `kiln generate`, checked
against Debian's json-schema-test-suite with Debian's python3-jsonschema.

A server runs tiny-qwen2, then one tiny-llama (another tokenizer): their
unconstrained text is prose, far from JSON, so whatever JSON comes out, the
constraint wrote. Every schema of the suite's draft-07 files for the
keywords kiln claims is sent as response_format json_schema (greedy,
and sampled with a fixed seed), and every output that finishes validates
against its schema. A schema kiln cannot enforce must be a 400 naming the
keyword; so must every schema of the files for keywords kiln does not
claim. Per-keyword counts are printed. Then json_object, a GBNF grammar,
max_tokens running out mid-output, the 400s for bad schemas and grammars,
and kiln generate's --json-schema, --grammar and --json-object.

Run with pytest; see kiln_server.py for the binary and model. The suite is
read from $JSON_SCHEMA_TEST_SUITE, else /usr/share/json-schema-test-suite.
"""

import concurrent.futures
import json
import os
import re
import subprocess

import jsonschema
import pytest

from kiln_server import KILN, SHARED, TINY_QWEN2, KilnServer

SUITE = os.environ.get("JSON_SCHEMA_TEST_SUITE", "/usr/share/json-schema-test-suite")
DRAFT = os.path.join(SUITE, "tests", "draft7")

# The suite's files for the keywords kiln enforces (json_schema_grammar.h),
# and for each format kiln writes.
CLAIMED = [
    "type", "properties", "required", "additionalProperties", "items", "additionalItems", "minItems",
    "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "ref", "definitions", "boolean_schema",
    "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "default", "optional/ecmascript-regex", "optional/format/date", "optional/format/time",
    "optional/format/date-time", "optional/format/email",
]
# Files for keywords kiln refuses, with what its 400 must say.
UNCLAIMED = {
    "not": "'not'", "if-then-else": "'if'|'then'|'else'", "patternProperties": "'patternProperties'",
    "propertyNames": "'propertyNames'", "dependencies": "'dependencies'", "minProperties": "'minProperties'",
    "maxProperties": "'maxProperties'", "uniqueItems": "'uniqueItems'", "contains": "'contains'",
    "multipleOf": "'multipleOf'", "refRemote": "outside the schema",
}

PROMPT = "Once upon a time, in a land far away,"
MAX_TOKENS = 400
SAMPLED_CHOICES = 8


# RFC 3339 times and date-times: the validator's own checks need a package
# Debian lacks (its "time" falls back to draft 3's HH:MM:SS).
TIME = re.compile(r"(\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|([+-])(\d\d):(\d\d))")


def _time(instance):
    if not isinstance(instance, str):
        return True
    match = TIME.fullmatch(instance)
    if not match:
        return False
    hour, minute, second = (int(match.group(i)) for i in (1, 2, 3))
    offset = 0
    if match.group(6):
        offset_hour, offset_minute = int(match.group(7)), int(match.group(8))
        if offset_hour > 23 or offset_minute > 59:
            return False
        offset = (offset_hour * 60 + offset_minute) * (1 if match.group(6) == "+" else -1)
    if hour > 23 or minute > 59 or second > 60:
        return False
    # A leap second is valid only at 23:59:60 UTC.
    return second < 60 or (hour * 60 + minute - offset) % 1440 == 23 * 60 + 59


def _date_time(instance):
    if not isinstance(instance, str):
        return True
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[Tt](.+)", instance)
    return bool(match) and jsonschema.FormatChecker().conforms(match.group(1), "date") and _time(match.group(2))


FORMAT_CHECKER = jsonschema.FormatChecker()
FORMAT_CHECKER.checks("time")(_time)
FORMAT_CHECKER.checks("date-time")(_date_time)


def load_groups(name):
    with open(os.path.join(DRAFT, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def server():
    with KilnServer("--max-num-seqs", "16") as s:
        yield s


# A second tokenizer: SentencePiece with byte fallback (tiny-qwen2's is
# byte-level BPE). tiny-llama has no chat template: completions only.
@pytest.fixture(scope="module")
def llama_server():
    with KilnServer("--max-num-seqs", "16", model=os.path.join(SHARED, "models", "tiny-llama")) as s:
        yield s


def chat(server, extra, content="Tell me a story."):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": MAX_TOKENS}
    body.update(extra)
    return server.post_json("/v1/chat/completions", body)


def complete(server, extra):
    body = {"prompt": PROMPT, "max_tokens": MAX_TOKENS}
    body.update(extra)
    return server.post_json("/v1/completions", body)


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "suite", "schema": schema, "strict": True}}


def outputs_for(server, schema, use_chat):
    """(status, [(text, finish_reason)] or the error) for one schema: greedy
    (chat or completions), then sampled completions with a fixed seed."""
    greedy = {"response_format": schema_format(schema), "temperature": 0}
    status, body = chat(server, greedy) if use_chat else complete(server, greedy)
    if status != 200:
        return status, body["error"]
    results = [(c["message"]["content"] if use_chat else c["text"], c["finish_reason"]) for c in body["choices"]]
    status, body = complete(server, {"response_format": schema_format(schema), "temperature": 1.0, "seed": 7,
                                     "n": SAMPLED_CHOICES})
    assert status == 200, body
    results += [(c["text"], c["finish_reason"]) for c in body["choices"]]
    return 200, results


def test_unconstrained_output_is_not_json(server):
    """The baseline: without a constraint the tiny model writes no JSON."""
    for extra in ({"temperature": 0}, {"temperature": 1.0, "seed": 7}):
        status, body = complete(server, dict(extra, max_tokens=48))
        assert status == 200, body
        text = body["choices"][0]["text"]
        with pytest.raises(ValueError):
            json.loads(text)


def test_suite_schemas(server):
    check_suite(server, use_chat=True, title="tiny-qwen2: greedy chat, sampled completions")


def test_suite_schemas_with_a_byte_fallback_tokenizer(llama_server):
    check_suite(llama_server, use_chat=False, title="tiny-llama: greedy and sampled completions")


def check_suite(server, use_chat, title):
    jobs = []  # (keyword, description, schema, claimed)
    for name in CLAIMED:
        for group in load_groups(name):
            jobs.append((name, group["description"], group["schema"], True))
    for name in UNCLAIMED:
        for group in load_groups(name):
            jobs.append((name, group["description"], group["schema"], False))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda job: outputs_for(server, job[2], use_chat), jobs))

    counts = {}
    failures = []
    for (keyword, description, schema, claimed), (status, result) in zip(jobs, answers):
        row = counts.setdefault(keyword, {"schemas": 0, "enforced": 0, "refused": 0, "outputs": 0, "valid": 0,
                                          "cut": 0})
        row["schemas"] += 1
        where = f"{keyword}: {description}: {json.dumps(schema)}"
        if status != 200:
            row["refused"] += 1
            error = result
            if status != 400 or error.get("param") != "response_format":
                failures.append(f"{where}: expected a 400 naming response_format, got {status} {error}")
            elif not claimed and not re.search(UNCLAIMED[keyword], error["message"]):
                failures.append(f"{where}: the 400 does not name {UNCLAIMED[keyword]}: {error['message']}")
            elif claimed and not re.search(r"'[^']+'|\bschema\b|\$ref|oneOf|allOf|pattern|format", error["message"]):
                failures.append(f"{where}: the 400 does not say what is unsupported: {error['message']}")
            continue
        row["enforced"] += 1
        validator = jsonschema.Draft7Validator(schema, format_checker=FORMAT_CHECKER)
        for text, finish in result:
            row["outputs"] += 1
            if finish == "length":
                row["cut"] += 1
                continue
            try:
                value = json.loads(text)
            except ValueError:
                failures.append(f"{where}: finished ({finish}) with text that is not JSON: {text!r}")
                continue
            errors = list(validator.iter_errors(value))
            if errors:
                failures.append(f"{where}: output {text!r} is invalid: {errors[0].message}")
            else:
                row["valid"] += 1

    header = f"{'keyword':34} {'schemas':>7} {'enforced':>8} {'refused':>7} {'outputs':>7} {'valid':>5} {'cut':>4}"
    lines = [header]
    totals = {k: 0 for k in ("schemas", "enforced", "refused", "outputs", "valid", "cut")}
    for keyword, row in counts.items():
        lines.append(f"{keyword:34} {row['schemas']:7} {row['enforced']:8} {row['refused']:7} {row['outputs']:7} "
                     f"{row['valid']:5} {row['cut']:4}")
        for k in totals:
            totals[k] += row[k]
    lines.append(f"{'total':34} {totals['schemas']:7} {totals['enforced']:8} {totals['refused']:7} "
                 f"{totals['outputs']:7} {totals['valid']:5} {totals['cut']:4}")
    print(f"\n{title}\n" + "\n".join(lines))
    assert not failures, "\n".join(failures)
    # The check has teeth only if outputs finish and are checked: for every
    # claimed keyword kiln enforces, some do. (The model writes prose into
    # strings and free keys until max_tokens runs out, so not all finish.)
    for keyword in CLAIMED:
        row = counts[keyword]
        assert row["enforced"] == 0 or row["valid"] > 0, f"{keyword}: no output finished"
    assert totals["valid"] >= totals["outputs"] // 2, lines[-1]


def test_json_object(server):
    for extra in ({"temperature": 0}, {"temperature": 1.0, "seed": 3, "n": 4}):
        status, body = chat(server, dict(extra, response_format={"type": "json_object"}))
        assert status == 200, body
        for choice in body["choices"]:
            if choice["finish_reason"] == "length":
                continue
            assert isinstance(json.loads(choice["message"]["content"]), dict), choice


def test_grammar(server):
    grammar = 'root ::= "The answer is " ("yes" | "no") "." (" " [0-9]{1,3})?'
    pattern = re.compile(r"The answer is (yes|no)\.( [0-9]{1,3})?")
    for extra in ({"temperature": 0}, {"temperature": 1.0, "seed": 11, "n": 4}):
        status, body = complete(server, dict(extra, grammar=grammar))
        assert status == 200, body
        for choice in body["choices"]:
            assert choice["finish_reason"] == "stop", choice
            assert pattern.fullmatch(choice["text"]), choice["text"]


def test_max_tokens_mid_output_ends_with_length(server):
    schema = {"type": "object", "properties": {"story": {"type": "string", "minLength": 40}}, "required": ["story"]}
    for endpoint in ("chat", "completions"):
        extra = {"response_format": schema_format(schema), "max_tokens": 4, "temperature": 0}
        status, body = (chat if endpoint == "chat" else complete)(server, extra)
        assert status == 200, body
        choice = body["choices"][0]
        text = choice["message"]["content"] if endpoint == "chat" else choice["text"]
        assert choice["finish_reason"] == "length", choice
        assert body["usage"]["completion_tokens"] == 4
        assert text.lstrip().startswith('{'), text
        with pytest.raises(ValueError):
            json.loads(text)


def assert_400(status, body, param, words):
    assert status == 400, body
    error = body["error"]
    assert error["param"] == param, error
    assert words in error["message"], error


def test_bad_schemas_and_grammars_are_400s_naming_the_field(server):
    def with_schema(schema):
        return {"response_format": schema_format(schema)}

    status, body = chat(server, with_schema({"type": "string", "not": {"const": "a"}}))
    assert_400(status, body, "response_format", "keyword 'not' is not supported")
    status, body = chat(server, with_schema({"type": "strin"}))
    assert_400(status, body, "response_format", "unknown type 'strin'")
    status, body = chat(server, with_schema({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                                             "$ref": "#/$defs/a"}))
    assert_400(status, body, "response_format", "can never complete")
    status, body = chat(server, with_schema({"enum": ["a" * (256 * 1024)]}))
    assert_400(status, body, "response_format.json_schema.schema", "over the limit of 262144")
    status, body = chat(server, {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})
    assert_400(status, body, "response_format.json_schema.schema", "is required")
    status, body = chat(server, {"response_format": {"type": "json_schema", "json_schema": {"schema": {},
                                                                                           "strict": "yes"}}})
    assert_400(status, body, "response_format.json_schema.strict", "expected a boolean")
    status, body = complete(server, {"json_schema": {"type": "object", "minProperties": 2}})
    assert_400(status, body, "json_schema", "'minProperties' is not supported")
    status, body = complete(server, {"grammar": 'root ::= "a" | ('})
    assert_400(status, body, "grammar", "grammar")
    status, body = complete(server, {"grammar": "root ::= other"})
    assert_400(status, body, "grammar", "other")
    status, body = complete(server, {"grammar": 'root ::= "' + "a" * (1 << 20) + '"'})
    assert_400(status, body, "grammar", "over the limit")
    # The server goes on serving.
    status, body = complete(server, {"response_format": {"type": "json_object"}, "temperature": 0})
    assert status == 200, body


def test_kiln_generate_flags(tmp_path):
    """kiln generate --json-schema / --grammar / --json-object through the same engine."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99},
                                               "ok": {"type": "boolean"}},
              "required": ["n", "ok"], "additionalProperties": False}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    (tmp_path / "answer.gbnf").write_text('root ::= "It is " ("yes" | "no") "."\n')
    base = [KILN, "generate", "-m", TINY_QWEN2, "--threads", "2", "-p", PROMPT, "-p", "Tell me", "--output", "jsonl",
            "-n", "200", "--temperature", "1.0", "--seed", "5"]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")

    def run(*flags):
        done = subprocess.run(base + list(flags), capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    for result in run("--json-schema", str(tmp_path / "schema.json")):
        assert result["finish_reason"] == "stop", result
        jsonschema.validate(json.loads(result["text"]), schema)
    for result in run("--grammar", str(tmp_path / "answer.gbnf")):
        assert re.fullmatch(r"It is (yes|no)\.", result["text"]), result
    for result in run("--json-object"):
        if result["finish_reason"] == "stop":
            assert isinstance(json.loads(result["text"]), dict), result

    (tmp_path / "bad.json").write_text('{"type": "object", "not": {}}')
    for flags, words in ((["--json-schema", str(tmp_path / "bad.json")], "keyword 'not' is not supported"),
                         (["--json-schema", str(tmp_path / "missing.json")], "cannot open"),
                         (["--grammar", str(tmp_path / "schema.json")], "--grammar")):
        done = subprocess.run(base + flags, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode != 0 and words in done.stderr, done.stderr
