"""Shared fixtures of the Python binding's tests: where the tiny models and
the kiln CLI are, and engines built once per module. CTest sets
KILN_LIBRARY, KILN_CLI and KILN_SHARED_DIR; run by hand, the repository's
../shared and build/ are used."""

import json
import os
import pathlib

import pytest

import kiln

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("KILN_SHARED_DIR", REPO.parent / "shared"))


def model_dir(name: str) -> str:
    return str(SHARED / "models" / name)


def reference(name: str, prompt: int) -> dict:
    with open(SHARED / "models" / name / "reference" / f"prompt_{prompt}.json", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="session", autouse=True)
def quiet():
    kiln.set_log_level("warn")


@pytest.fixture(scope="module")
def qwen_model():
    with kiln.Model(model_dir("tiny-qwen2")) as model:
        yield model


@pytest.fixture(scope="module")
def llm(qwen_model):
    """An fp32 engine, so that greedy output matches the references exactly."""
    with kiln.LLM(qwen_model, threads=2, precision="fp32", seed=1) as engine:
        yield engine


@pytest.fixture(scope="session")
def kiln_cli() -> str:
    path = os.environ.get("KILN_CLI", str(REPO / "build" / "bin" / "kiln"))
    if not os.path.exists(path):
        pytest.skip(f"no kiln CLI at {path} (set KILN_CLI)")
    return path


def greedy(max_tokens: int, **more) -> kiln.SamplingParams:
    return kiln.SamplingParams(temperature=0, max_tokens=max_tokens, **more)
