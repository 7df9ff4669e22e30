"""kiln's errors as Python exceptions carrying its message, and finding
libkiln.so."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import kiln
from kiln import _native
from conftest import REPO, greedy, model_dir


def test_a_missing_model_names_the_path(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(kiln.NotFoundError) as error:
        kiln.LLM(str(missing))
    assert str(missing) in str(error.value)
    assert error.value.message.startswith("kiln_model_load: ")
    assert error.value.status == 2
    assert isinstance(error.value, kiln.KilnError)


def test_bad_arguments_name_themselves(llm, qwen_model):
    with pytest.raises(kiln.InvalidArgumentError, match="params: temperature must be a finite number >= 0, got -1"):
        llm.generate("Hello", kiln.SamplingParams(temperature=-1))
    with pytest.raises(ValueError, match="top_p"):  # InvalidArgumentError is a ValueError
        llm.generate("Hello", kiln.SamplingParams(top_p=0))
    with pytest.raises(kiln.OutOfRangeError, match="max_tokens 5000 exceeds the context"):
        llm.generate("Hello", greedy(5000))
    with pytest.raises(kiln.InvalidArgumentError, match="the prompt is empty"):
        llm.generate("", greedy(4))
    with pytest.raises(kiln.InvalidArgumentError, match="options.precision"):
        kiln.LLM(qwen_model, precision="fp8")
    with pytest.raises(kiln.InvalidArgumentError, match="max-num-seqs"):
        kiln.LLM(qwen_model, max_num_seqs=0)
    with pytest.raises(TypeError, match="unknown options \\['gpu_memory_utilization'\\]"):
        kiln.LLM(qwen_model, gpu_memory_utilization=0.9)
    with pytest.raises(ValueError, match="n=2"):
        kiln.SamplingParams(n=2)
    with pytest.raises(kiln.NotFoundError, match="request 99999"):
        llm.wait(99999)
    with pytest.raises(TypeError, match="a prompt is a str"):
        llm.generate([42], greedy(2))


def test_a_failed_batch_runs_nothing_and_leaves_the_engine_usable(llm):
    with pytest.raises(kiln.OutOfRangeError):
        llm.generate(["Hello", "World"], [greedy(4), greedy(5000)])
    assert len(llm.generate("Hello", greedy(2))[0].outputs[0].token_ids) == 2


def _run_python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_the_library_is_found_next_to_the_package(tmp_path):
    package = tmp_path / "kiln"
    shutil.copytree(REPO / "python" / "kiln", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.realpath(_native.lib().path), package / "libkiln.so")
    env = {k: v for k, v in os.environ.items() if k != "KILN_LIBRARY"}
    env["PYTHONPATH"] = str(tmp_path)
    done = _run_python("import kiln; from kiln import _native; print(_native.lib().path); "
                       "print(kiln.library_version())", env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == str(package / "libkiln.so")
    assert lines[1] == kiln.library_version()


def test_a_wrong_kiln_library_says_so(tmp_path):
    env = dict(os.environ, KILN_LIBRARY=str(tmp_path / "nothing.so"))
    done = _run_python("import kiln; kiln.library_version()", env)
    assert done.returncode != 0
    assert "set KILN_LIBRARY" in done.stderr and "nothing.so" in done.stderr
