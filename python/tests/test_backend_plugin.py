"""Backend plugins from Python: kiln.load_backend_plugin() registers the
test accelerators' plugin, whose greedy output equals the CPU's; a file
that is not a plugin is refused with a message naming it."""

import os
import pathlib

import pytest

import kiln
from conftest import REPO, greedy, model_dir

PLUGIN_DIR = pathlib.Path(os.environ.get("KILN_BACKEND_PLUGIN_DIR", REPO / "build" / "plugins"))
TESTACCEL = PLUGIN_DIR / "libkiln_backend_testaccel.so"
TESTACCEL_MM = PLUGIN_DIR / "libkiln_backend_testaccel-mm.so"


def test_a_file_that_is_not_a_plugin_is_refused(tmp_path):
    bogus = tmp_path / "libkiln_backend_bogus.so"
    bogus.write_text("not a shared library\n")
    with pytest.raises(kiln.InvalidArgumentError) as error:
        kiln.load_backend_plugin(bogus)
    assert str(bogus) in str(error.value)
    assert "cannot be loaded as a shared library" in str(error.value)


def test_the_test_accelerators_plugin_generates_as_the_cpu():
    for plugin in (TESTACCEL, TESTACCEL_MM):
        assert plugin.exists(), f"{plugin} is not built"
        kiln.load_backend_plugin(plugin)
    kiln.load_backend_plugin(str(TESTACCEL))  # a second load does nothing
    texts = {}
    for backend in ("cpu", "testaccel", "testaccel-mm"):
        with kiln.LLM(model_dir("tiny-qwen2"), precision="fp32", backend=backend, threads=2) as llm:
            texts[backend] = llm.generate("The capital of France is", greedy(12))[0].outputs[0].text
    assert texts["testaccel"] == texts["cpu"]
    assert texts["testaccel-mm"] == texts["cpu"]
