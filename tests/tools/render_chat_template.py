#!/usr/bin/env python3
"""Reference renderer for chat templates, for kiln's tests.

Renders a Jinja chat template with Python's jinja2 exactly the way Hugging
Face's apply_chat_template sets it up: an ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loop-controls extension, a tojson filter
that is json.dumps without ASCII escaping, and the globals raise_exception
and strftime_now (which reports a pinned time, so outputs are reproducible).
As in Hugging Face, `tools` and `documents` are None unless the context sets
them.

Usage:
  render_chat_template.py TEMPLATE_FILE CONTEXT_JSON_FILE
      Prints the rendered text's UTF-8 bytes exactly; on a template error,
      prints the error to stderr and exits with status 1.
  render_chat_template.py --batch CASES_JSON_FILE
      CASES is a JSON list of {"template": str, "context": {...}}. Prints a
      JSON list with, per case, {"output": str} or {"error": str}.

A context is {"messages": [...], "add_generation_prompt": bool, ...}: every
key becomes a template variable. --now YYYY-MM-DDTHH:MM:SS changes the
pinned time (default 2024-09-05T14:30:00).
"""

import argparse
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

DEFAULT_NOW = "2024-09-05T14:30:00"


def make_environment(now):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )

    def tojson(x, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(format):
        return now.strftime(format)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, template, context):
    variables = {"tools": None, "documents": None}
    variables.update(context)
    return env.from_string(template).render(**variables)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", metavar="CASES_JSON_FILE")
    parser.add_argument("--now", default=DEFAULT_NOW)
    parser.add_argument("template", nargs="?")
    parser.add_argument("context", nargs="?")
    args = parser.parse_args()
    env = make_environment(datetime.datetime.fromisoformat(args.now))

    if args.batch:
        with open(args.batch, encoding="utf-8") as f:
            cases = json.load(f)
        results = []
        for case in cases:
            try:
                results.append({"output": render(env, case["template"], case["context"])})
            except Exception as e:  # any template error is a result to compare
                results.append({"error": f"{type(e).__name__}: {e}"})
        sys.stdout.write(json.dumps(results))
        return 0

    if not args.template or not args.context:
        parser.error("TEMPLATE_FILE and CONTEXT_JSON_FILE are required without --batch")
    with open(args.template, encoding="utf-8", newline="") as f:
        template = f.read()
    with open(args.context, encoding="utf-8") as f:
        context = json.load(f)
    try:
        output = render(env, template, context)
    except Exception as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(output.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
