"""ONNX models with numpy arrays in and out, without copies.

    import numpy as np, kiln
    model = kiln.Model("model.onnx")            # an .onnx path gives an OnnxModel
    outputs = model.run({"x": np.zeros((1, 3, 224, 224), np.float32)})
    outputs["logits"]                            # a numpy array per graph output

Inputs are passed to kiln by pointer: an array that is C-contiguous and of
the input's dtype is read where it lies. Any other array (another dtype of
the same kind, such as float64 for a float32 input, a Python list, a
transposed or sliced view) is converted once, with numpy, into a new
C-contiguous array of the right dtype; a conversion across kinds (float to
int) is refused. Outputs are allocated by numpy (or given with `out=`) and
written in place by kiln."""

import ctypes
import os
from typing import Dict, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native

_NUMPY_DTYPES = {
    "f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "f64": np.dtype(np.float64),
    "i64": np.dtype(np.int64), "i32": np.dtype(np.int32), "i16": np.dtype(np.int16), "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8), "bool": np.dtype(np.bool_),
}


# kiln_dtype codes by kiln dtype name, and by numpy dtype.
_CODES = {name: code for code, name in _native.DTYPES.items()}
_CODE_OF_NUMPY = {dtype: _CODES[name] for name, dtype in _NUMPY_DTYPES.items()}


class TensorInfo(NamedTuple):
    """A graph input or output: its name, its numpy dtype (the kiln dtype's
    name, e.g. "bf16", where numpy has none) and its shape, with None for
    a dimension that the inputs of each run bind."""

    name: str
    dtype: Union[np.dtype, str]
    shape: Tuple[Optional[int], ...]


class OnnxModel(_native.OwnedHandle):
    """An ONNX model compiled for this machine. `input_shapes` fixes the
    dimensions of inputs whose declared shape is symbolic, as
    {"x": (1, 3, 640, 640)} (like `kiln run --input-shape`); otherwise each
    new set of input shapes is compiled on its first run and kept.
    `fixed_inputs` ({"shape": [1, -1]}) compiles the values of graph inputs
    that static shapes need (a shape, scales or pads fed as an input, as
    `kiln run --fixed-input`); run() fills them in when left out, and a run
    passing other values is an error. Arrays keep their dtype; lists become
    int64 or float32. Options: threads (0: one per physical core), backend
    ("cpu"), precision ("fp32", "mixed", "bf16"), recompile_if_stale (a .kiln artifact built
    for another kernel-layout version or an ISA this CPU lacks is rebuilt in
    place from the .onnx file it records, instead of refused). Runs on one model take
    turns; it may be shared by threads. `kiln.Model(path)` returns an
    OnnxModel for an .onnx path."""

    _kind = "ONNX model"
    _destroy_function = "kiln_onnx_model_destroy"

    def __init__(self, path: Union[str, os.PathLike], *, input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
                 fixed_inputs: Optional[Mapping[str, object]] = None, threads: int = 0,
                 backend: Optional[str] = None, precision: Optional[str] = None,
                 recompile_if_stale: bool = False):
        lib = _native.lib()
        options = _native.OnnxOptions()
        lib.kiln_onnx_options_init(ctypes.byref(options), ctypes.sizeof(options))
        keep = []  # what the options point at, alive until the load returns
        shapes = list((input_shapes or {}).items())
        if shapes:
            entries = (_native.InputShape * len(shapes))()
            for entry, (name, dims) in zip(entries, shapes):
                dims = [int(d) for d in dims]
                array = (ctypes.c_int64 * max(1, len(dims)))(*dims)
                keep.append(array)
                entry.name = _native.encode(name, "input_shapes name")
                entry.dims = ctypes.cast(array, ctypes.POINTER(ctypes.c_int64))
                entry.rank = len(dims)
            options.input_shapes = entries
            options.num_input_shapes = len(shapes)
        self._fixed = {name: _fixed_value(value) for name, value in (fixed_inputs or {}).items()}
        if self._fixed:
            tensors = (_native.Tensor * len(self._fixed))()
            for t, (name, array) in zip(tensors, self._fixed.items()):
                self._describe(t, array.shape, _CODE_OF_NUMPY[array.dtype], keep)
                t.name = _native.encode(name, "fixed_inputs name")
                t.data = array.ctypes.data
                t.size_bytes = array.nbytes
            options.fixed_inputs = tensors
            options.num_fixed_inputs = len(self._fixed)
        options.backend = _native.encode(backend, "backend") if backend is not None else None
        options.precision = _native.encode(precision, "precision") if precision is not None else None
        options.threads = int(threads)
        options.recompile_if_stale = 1 if recompile_if_stale else 0
        self.path = os.fspath(path)
        handle = ctypes.c_void_p()
        _native.check(lib.kiln_onnx_model_load(_native.encode(self.path, "path"), ctypes.byref(options),
                                               ctypes.byref(handle)))
        self._handle = handle
        self.inputs: Tuple[TensorInfo, ...] = tuple(
            self._info(lib.kiln_onnx_model_input_info, i) for i in range(lib.kiln_onnx_model_num_inputs(handle)))
        self.outputs: Tuple[TensorInfo, ...] = tuple(
            self._info(lib.kiln_onnx_model_output_info, i) for i in range(lib.kiln_onnx_model_num_outputs(handle)))
        self._output_shapes: Dict[tuple, list] = {}  # by the inputs' shapes

    def _info(self, function, index: int) -> TensorInfo:
        info = _native.TensorInfoStruct()
        _native.check(function(self._handle, index, ctypes.byref(info)))
        kind = _native.DTYPES[info.dtype]
        shape = tuple(None if info.dims[d] < 0 else int(info.dims[d]) for d in range(info.rank))
        return TensorInfo(info.name.decode("utf-8"), _NUMPY_DTYPES.get(kind, kind), shape)

    def output_shapes(self, input_shapes: Union[Mapping[str, Sequence[int]], Sequence[Sequence[int]]]
                      ) -> Dict[str, Tuple[int, ...]]:
        """The shape of each output for inputs of these shapes (by name, or
        a sequence in input order), compiling for them if they are new."""
        shapes = tuple(tuple(int(d) for d in s) for s in self._in_order(input_shapes, "input_shapes"))
        return dict(zip((o.name for o in self.outputs), self._shapes_for(shapes)))

    def run(self, inputs: Union[Mapping[str, object], Sequence[object]], *,
            out: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, np.ndarray]:
        """Runs the model on `inputs` (arrays by input name, or a sequence in
        input order) and returns {output name: array} in output order.
        Inputs are read in place when C-contiguous and of the input's dtype,
        else converted once (see the module's doc). Outputs are new arrays,
        except those given in `out` (by name: C-contiguous, writable, of the
        output's dtype and shape), which are written in place and returned."""
        arrays = [self._as_input(value, info) for value, info in zip(self._in_order(inputs, "inputs"), self.inputs)]
        shapes = self._shapes_for(tuple(a.shape for a in arrays))
        given = dict(out or {})
        unknown = set(given) - {o.name for o in self.outputs}
        if unknown:
            raise ValueError(f"out: the model has no output named {sorted(unknown)[0]!r} "
                             f"(its outputs: {', '.join(o.name for o in self.outputs)})")
        results = {}
        for info, shape in zip(self.outputs, shapes):
            dtype = self._numpy_dtype(info)
            if info.name in given:
                results[info.name] = self._check_out(given[info.name], info.name, dtype, shape)
            else:
                results[info.name] = np.empty(shape, dtype=dtype)
        keep = []
        c_inputs = self._tensors(arrays, keep)
        c_outputs = self._tensors(list(results.values()), keep)
        _native.check(_native.lib().kiln_onnx_model_run(self.handle, c_inputs, len(arrays), c_outputs,
                                                        len(results)))
        return results

    __call__ = run

    def _in_order(self, values, what: str) -> list:
        """`values` (a mapping by input name, or a sequence) in input order.
        In a mapping, fixed inputs may be left out: their fixed values (or
        shapes) are used."""
        names = [i.name for i in self.inputs]
        if isinstance(values, Mapping):
            if any(name not in values for name in self._fixed):
                fixed = {n: (a.shape if what == "input_shapes" else a) for n, a in self._fixed.items()}
                values = {**fixed, **values}
            missing = [n for n in names if n not in values]
            extra = [k for k in values if k not in names]
            if missing or extra:
                problem = f"missing {missing}" if missing else f"no input named {extra[0]!r}"
                raise ValueError(f"{what}: {problem}; the model's inputs are {names}")
            return [values[n] for n in names]
        if isinstance(values, np.ndarray) or not isinstance(values, Sequence):
            values = [values]  # a single array for a one-input model
        if len(values) != len(names):
            raise ValueError(f"{what}: {len(values)} given; the model's inputs are {names}")
        return list(values)

    def _shapes_for(self, input_shapes: tuple) -> list:
        shapes = self._output_shapes.get(input_shapes)
        if shapes is not None:
            return shapes
        keep = []
        tensors = (_native.Tensor * max(1, len(self.inputs)))()
        for t, info, shape in zip(tensors, self.inputs, input_shapes):
            self._describe(t, shape, self._kiln_dtype(info), keep)
        lib = _native.lib()
        shapes = []
        for j in range(len(self.outputs)):
            rank = ctypes.c_size_t()
            _native.check(lib.kiln_onnx_model_output_shape(self.handle, tensors, len(input_shapes), j, None, 0,
                                                           ctypes.byref(rank)))
            dims = (ctypes.c_int64 * max(1, rank.value))()
            _native.check(lib.kiln_onnx_model_output_shape(self.handle, tensors, len(input_shapes), j, dims,
                                                           rank.value, ctypes.byref(rank)))
            shapes.append(tuple(int(dims[d]) for d in range(rank.value)))
        self._output_shapes[input_shapes] = shapes
        return shapes

    @staticmethod
    def _numpy_dtype(info: TensorInfo) -> np.dtype:
        if not isinstance(info.dtype, np.dtype):
            raise TypeError(f"{info.name} is {info.dtype}, which numpy has no dtype for")
        return info.dtype

    @staticmethod
    def _kiln_dtype(info: TensorInfo) -> int:
        return _CODE_OF_NUMPY[info.dtype] if isinstance(info.dtype, np.dtype) else _CODES[info.dtype]

    def _as_input(self, value, info: TensorInfo) -> np.ndarray:
        """`value` as a C-contiguous array of the input's dtype: itself when
        it already is one, else one numpy conversion."""
        want = self._numpy_dtype(info)
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        if array.dtype != want:
            if not np.can_cast(array.dtype, want, casting="same_kind"):
                raise TypeError(f"input {info.name}: {array.dtype} cannot be converted to {want} "
                                f"(convert it yourself if that is what you mean)")
            return array.astype(want, order="C")
        if not array.flags["C_CONTIGUOUS"]:
            return np.array(array, dtype=want, order="C")
        return array

    @staticmethod
    def _check_out(array, name: str, dtype: np.dtype, shape: tuple) -> np.ndarray:
        if not isinstance(array, np.ndarray) or array.dtype != dtype:
            raise TypeError(f"out[{name!r}] must be a numpy {dtype} array")
        if array.shape != shape:
            raise ValueError(f"out[{name!r}] has shape {array.shape}; the output's is {shape}")
        if not array.flags["C_CONTIGUOUS"] or not array.flags["WRITEABLE"]:
            raise ValueError(f"out[{name!r}] must be C-contiguous and writable (the output is written into it)")
        return array

    def _tensors(self, arrays, keep: list):
        tensors = (_native.Tensor * max(1, len(arrays)))()
        for t, array in zip(tensors, arrays):
            self._describe(t, array.shape, _CODE_OF_NUMPY[array.dtype], keep)
            t.data = array.ctypes.data
            t.size_bytes = array.nbytes
        return tensors

    @staticmethod
    def _describe(tensor, shape, dtype_code: int, keep: list) -> None:
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        keep.append(dims)
        tensor.name = None  # by position: the arrays are in graph order
        tensor.dtype = dtype_code
        tensor.rank = len(shape)
        tensor.dims = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))


def _fixed_value(value) -> np.ndarray:
    """A fixed input's value as a C-contiguous copy: an array keeps its
    dtype; anything else becomes int64 (integers) or float32 (floats), the
    dtypes ONNX uses for shapes, pads and scales."""
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    if array is not value and array.dtype.kind == "f":
        array = array.astype(np.float32)
    elif array is not value and array.dtype.kind in "iu":
        array = array.astype(np.int64)
    if array.dtype not in _CODE_OF_NUMPY:
        raise TypeError(f"fixed input of dtype {array.dtype}: kiln takes {', '.join(map(str, _CODE_OF_NUMPY))}")
    return np.array(array, order="C")  # a copy: the caller's array may change later
