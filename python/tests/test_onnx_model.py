"""kiln.Model("m.onnx"): an OnnxModel whose run() reads numpy inputs where
they lie and writes outputs into numpy arrays without copies; results
against numpy and PyTorch; conversions; errors."""

import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from kiln import _native

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("onnx_models")
    subprocess.run([sys.executable, str(REPO / "tests/unit/capi/make_capi_onnx_models.py"), str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def two_relu(models):
    with kiln.Model(models / "two_relu.onnx", threads=2) as model:
        yield model


@pytest.fixture
def run_calls(monkeypatch):
    """Records the data pointers each kiln_onnx_model_run call is given."""
    lib = _native.lib()
    original = lib.kiln_onnx_model_run
    calls = []

    def spy(handle, inputs, num_inputs, outputs, num_outputs):
        calls.append(([inputs[i].data for i in range(num_inputs)], [outputs[j].data for j in range(num_outputs)]))
        return original(handle, inputs, num_inputs, outputs, num_outputs)

    monkeypatch.setattr(lib, "kiln_onnx_model_run", spy)
    return calls


def test_model_of_an_onnx_path_is_an_onnx_model(models):
    with kiln.Model(str(models / "static_relu.onnx")) as model:
        assert isinstance(model, kiln.OnnxModel)
        assert not isinstance(model, kiln.Model)
        assert model.inputs == (kiln.TensorInfo("x", np.dtype(np.float32), (1, 3, 2, 2)),)
        assert model.outputs == (kiln.TensorInfo("y", np.dtype(np.float32), (1, 3, 2, 2)),)
        x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(1, 3, 2, 2)
        np.testing.assert_array_equal(model.run(x)["y"], np.maximum(x, 0))  # one input: the array alone


def test_model_of_a_compiled_onnx_artifact_is_an_onnx_model(models, kiln_cli, tmp_path):
    artifact = tmp_path / "static_relu.kiln"
    subprocess.run([kiln_cli, "compile", str(models / "static_relu.onnx"), "-o", str(artifact)], check=True,
                   stdout=subprocess.DEVNULL)
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(1, 3, 2, 2)
    with kiln.Model(artifact) as model, kiln.Model(models / "static_relu.onnx") as onnx:
        assert isinstance(model, kiln.OnnxModel)
        assert model.inputs == onnx.inputs
        np.testing.assert_array_equal(model.run(x)["y"], onnx.run(x)["y"])


def test_inputs_and_outputs_show_symbolic_dimensions(two_relu):
    assert [(i.name, i.dtype, i.shape) for i in two_relu.inputs] == [("a", np.float32, (None, 4)),
                                                                     ("b", np.float32, (2, 3))]
    assert [(o.name, o.shape) for o in two_relu.outputs] == [("ya", (None, 4)), ("yb", (2, 3))]
    assert two_relu.output_shapes({"a": (7, 4), "b": (2, 3)}) == {"ya": (7, 4), "yb": (2, 3)}
    assert two_relu.output_shapes([(1, 4), (2, 3)]) == {"ya": (1, 4), "yb": (2, 3)}


def test_run_matches_numpy(two_relu):
    rng = np.random.default_rng(0)
    for n in (3, 1, 5, 3):
        a = rng.standard_normal((n, 4), dtype=np.float32)
        b = rng.standard_normal((2, 3), dtype=np.float32)
        result = two_relu.run({"a": a, "b": b})
        assert list(result) == ["ya", "yb"]
        np.testing.assert_array_equal(result["ya"], np.maximum(a, 0))
        np.testing.assert_array_equal(result["yb"], np.maximum(b, 0))
        assert result["ya"].dtype == np.float32 and result["ya"].shape == (n, 4)


def test_inputs_are_read_in_place_and_outputs_written_in_place(two_relu, run_calls):
    a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    b = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    result = two_relu.run({"a": a, "b": b})
    (inputs, outputs), = run_calls
    assert inputs == [a.ctypes.data, b.ctypes.data]  # the caller's arrays, not copies
    assert outputs == [result["ya"].ctypes.data, result["yb"].ctypes.data]  # the returned arrays themselves
    assert result["ya"].flags["OWNDATA"] and result["ya"].base is None
    np.testing.assert_array_equal(result["ya"], np.maximum(a, 0))

    # Outputs into the caller's arrays: the very arrays come back.
    ya = np.full((3, 4), -7, dtype=np.float32)
    big = np.full((10, 3), -7, dtype=np.float32)
    yb = big[2:4]  # a C-contiguous view into a larger buffer
    result = two_relu.run([a, b], out={"ya": ya, "yb": yb})
    assert result["ya"] is ya and result["yb"] is yb
    assert run_calls[1][1] == [ya.ctypes.data, yb.ctypes.data]
    assert np.shares_memory(result["yb"], big)
    np.testing.assert_array_equal(big[2:4], np.maximum(b, 0))
    assert (big[:2] == -7).all() and (big[4:] == -7).all()


def test_other_dtypes_and_layouts_are_converted_once(two_relu, run_calls):
    a64 = np.linspace(-1, 1, 8).reshape(2, 4)  # float64
    b_fortran = np.asfortranarray(np.arange(-3, 3, dtype=np.float32).reshape(2, 3))
    result = two_relu.run({"a": a64, "b": b_fortran})
    (inputs, _), = run_calls
    assert inputs[0] != a64.ctypes.data and inputs[1] != b_fortran.ctypes.data
    np.testing.assert_array_equal(result["ya"], np.maximum(a64.astype(np.float32), 0))
    np.testing.assert_array_equal(result["yb"], np.maximum(b_fortran, 0))
    # Lists and integers become float32; a transposed view is made contiguous.
    result = two_relu.run({"a": [[1, -2, 3, -4]], "b": np.arange(6, dtype=np.float32).reshape(3, 2).T})
    np.testing.assert_array_equal(result["ya"], [[1, 0, 3, 0]])
    np.testing.assert_array_equal(result["yb"], np.arange(6, dtype=np.float32).reshape(3, 2).T)
    with pytest.raises(TypeError, match="complex128 cannot be converted to float32"):
        two_relu.run({"a": np.zeros((1, 4), np.complex128), "b": np.zeros((2, 3), np.float32)})


def test_input_shapes_threads_and_the_model_class(models):
    model = kiln.OnnxModel(models / "two_relu.onnx", input_shapes={"a": [6, 4]}, threads=1, precision="fp32",
                           backend="cpu")
    assert model.inputs[0].shape == (6, 4)
    x = np.arange(-12, 12, dtype=np.float32).reshape(6, 4)
    np.testing.assert_array_equal(model([x, np.ones((2, 3), np.float32)])["ya"], np.maximum(x, 0))
    model.close()
    with pytest.raises(ValueError, match="closed"):
        model.run([x, np.ones((2, 3), np.float32)])


def test_threads_share_a_model(two_relu):
    rng = np.random.default_rng(1)
    arrays = [(rng.standard_normal((1 + t % 3, 4), dtype=np.float32), rng.standard_normal((2, 3), dtype=np.float32))
              for t in range(8)]
    failures = []

    def work(a, b):
        for _ in range(10):
            r = two_relu.run({"a": a, "b": b})
            if not (np.array_equal(r["ya"], np.maximum(a, 0)) and np.array_equal(r["yb"], np.maximum(b, 0))):
                failures.append(a.shape)

    threads = [threading.Thread(target=work, args=pair) for pair in arrays]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_errors_name_the_tensor(two_relu, models):
    a, b = np.zeros((2, 4), np.float32), np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"missing \['b'\]"):
        two_relu.run({"a": a})
    with pytest.raises(ValueError, match="no input named 'c'"):
        two_relu.run({"a": a, "b": b, "c": b})
    with pytest.raises(ValueError, match="1 given"):
        two_relu.run([a])
    with pytest.raises(kiln.InvalidArgumentError, match=r"input b: shape \[3,3\] given, the model takes \[2,3\]"):
        two_relu.run({"a": a, "b": np.zeros((3, 3), np.float32)})
    with pytest.raises(ValueError, match=r"out\['ya'\] has shape \(3, 4\); the output's is \(2, 4\)"):
        two_relu.run({"a": a, "b": b}, out={"ya": np.zeros((3, 4), np.float32)})
    with pytest.raises(TypeError, match=r"out\['ya'\] must be a numpy float32 array"):
        two_relu.run({"a": a, "b": b}, out={"ya": np.zeros((2, 4), np.float64)})
    with pytest.raises(ValueError, match="C-contiguous and writable"):
        two_relu.run({"a": a, "b": b}, out={"yb": np.zeros((3, 2), np.float32).T})
    with pytest.raises(ValueError, match="no output named 'zz'"):
        two_relu.run({"a": a, "b": b}, out={"zz": a})
    with pytest.raises(kiln.InvalidArgumentError, match="output ya's buffer overlaps input a's"):
        two_relu.run({"a": a, "b": b}, out={"ya": a})
    with pytest.raises(kiln.NotFoundError, match="no such file"):
        kiln.Model(models / "missing.onnx")
    with pytest.raises(kiln.CorruptError, match="truncated.onnx"):
        kiln.Model(models / "truncated.onnx")
    with pytest.raises(kiln.UnsupportedError, match="Frobnicate"):
        kiln.Model(models / "unknown_op.onnx")
    with pytest.raises(kiln.InvalidArgumentError, match="options.precision"):
        kiln.Model(models / "two_relu.onnx", precision="fp64")


def test_a_pytorch_export_matches_pytorch(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x), torch.relu(torch.relu(y))

    x = torch.randn(2, 5, 3)
    y = torch.randn(4)
    path = tmp_path / "net.onnx"
    torch.onnx.export(Net(), (x, y), str(path), input_names=["x", "y"], output_names=["rx", "ry"],
                      dynamic_axes={"x": {0: "batch"}}, opset_version=13)
    model = kiln.Model(path, threads=2)
    assert [i.shape for i in model.inputs] == [(None, 5, 3), (4,)]
    for batch in (2, 7):
        x = torch.randn(batch, 5, 3)
        expected = Net()(x, y)
        result = model.run({"x": x.numpy(), "y": y.numpy()})
        np.testing.assert_array_equal(result["rx"], expected[0].numpy())
        np.testing.assert_array_equal(result["ry"], expected[1].numpy())


def test_integer_inputs_and_outputs(models, run_calls):
    model = kiln.Model(models / "gather.onnx", threads=2)
    assert [(i.name, i.dtype, i.shape) for i in model.inputs] == [("ids", np.int64, (None,)),
                                                                  ("table", np.float32, (6, 2))]
    assert [(o.name, o.dtype, o.shape) for o in model.outputs] == [("rows", np.float32, (None, 2)),
                                                                   ("column", np.int64, (None, 1))]
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    ids = np.array([5, 0, -2, 3], dtype=np.int64)
    result = model.run({"ids": ids, "table": table})
    assert run_calls[0][0] == [ids.ctypes.data, table.ctypes.data]
    np.testing.assert_array_equal(result["rows"], np.take(table, ids, axis=0))
    np.testing.assert_array_equal(result["column"], ids[:, None])
    assert result["column"].dtype == np.int64
    # int32 ids and a list are converted once; float ids are refused.
    np.testing.assert_array_equal(model.run([np.array([1, 2], np.int32), table])["rows"], table[1:3])
    np.testing.assert_array_equal(model.run([[4], table])["column"], [[4]])
    with pytest.raises(TypeError, match="float64 cannot be converted to int64"):
        model.run([np.array([1.0]), table])
    with pytest.raises(kiln.KilnError, match="Gather"):
        model.run([np.array([6], np.int64), table])  # beyond the table: an error, no read out of bounds


def test_fixed_inputs(models):
    with pytest.raises(kiln.KilnError, match="shape"):
        kiln.Model(models / "reshape.onnx")  # Reshape's shape must be known to compile
    shape = np.array([3, 2])
    model = kiln.Model(models / "reshape.onnx", fixed_inputs={"shape": shape}, threads=2)
    shape[0] = 1  # the value was copied
    assert model.inputs[1] == kiln.TensorInfo("shape", np.dtype(np.int64), (2,))
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(model.run({"x": x})["y"], x.reshape(3, 2))  # the fixed value filled in
    np.testing.assert_array_equal(model.run({"x": x, "shape": np.array([3, 2])})["y"], x.reshape(3, 2))
    assert model.output_shapes({"x": (6,)}) == {"y": (3, 2)}
    with pytest.raises(kiln.InvalidArgumentError, match="its value was fixed at compile time"):
        model.run([x, np.array([2, 3])])
    with pytest.raises(kiln.InvalidArgumentError, match="dtype f32 given, the model's is i64"):
        kiln.Model(models / "reshape.onnx", fixed_inputs={"shape": [3.0, 2.0]})
    with pytest.raises(TypeError, match="fixed input of dtype <U1"):
        kiln.Model(models / "reshape.onnx", fixed_inputs={"shape": ["a"]})


def test_a_pytorch_mlp_matches_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    path = tmp_path / "mlp.onnx"
    torch.onnx.export(net, torch.randn(2, 8), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=13)
    model = kiln.Model(path, threads=2)
    for batch in (1, 5):
        x = torch.randn(batch, 8)
        with torch.no_grad():
            expected = net(x).numpy()
        got = model.run({"x": x.numpy()})["y"]
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_pytorch_cnn_matches_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8, 5)

        def forward(self, x):
            y = torch.relu(self.conv1(x))
            y = torch.relu(self.conv2(y) + y)  # a residual add
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))

    net = Net().eval()
    path = tmp_path / "cnn.onnx"
    torch.onnx.export(net, torch.randn(1, 3, 12, 12), str(path), input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13)
    model = kiln.Model(path, threads=2)
    for batch in (1, 3):
        x = torch.randn(batch, 3, 12, 12)
        with torch.no_grad():
            expected = net(x).numpy()
        out = np.empty((batch, 5), np.float32)
        got = model.run({"images": x.numpy()}, out={"logits": out})["logits"]
        assert got is out
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_the_llm_model_class_still_loads_folders(qwen_model):
    assert isinstance(qwen_model, kiln.Model) and qwen_model.vocab_size == 2048


def test_an_onnx_path_is_not_an_llm(models, two_relu):
    with pytest.raises(TypeError, match="is an ONNX model"):
        kiln.LLM(models / "two_relu.onnx")
    with pytest.raises(TypeError, match="is an ONNX model"):
        kiln.Session(str(models / "two_relu.onnx"))
    with pytest.raises(TypeError, match="a Model, an LLM or a path"):
        kiln.Session(two_relu)

