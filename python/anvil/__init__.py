"""anvil: an optimizing compiler and runtime for neural networks, from Python.

    import anvil, numpy as np
    model = anvil.load("model.onnx")
    session = anvil.Session(model, threads=2)
    outputs = session.run({"x": np.zeros((1, 3, 224, 224), np.float32)})

Inputs may be numpy arrays or anything that exports DLPack (a torch tensor, for one): they are
read in place when C-contiguous. Outputs are numpy arrays over anvil's own buffers (no copy),
which export DLPack themselves (`torch.from_dlpack(out)`). Failures raise `anvil.Error`
subclasses carrying anvil's status and message. `anvil.torch` optimizes PyTorch modules.
"""
from __future__ import annotations

import ctypes
import json
import os
from ctypes import POINTER, byref, c_char_p, c_float, c_int, c_int64, c_size_t, c_void_p
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["Error", "InvalidArgument", "InvalidModel", "Unsupported", "ShapeError",
           "OutOfMemory", "IOError", "LimitError", "RuntimeFailure", "InternalError",
           "Model", "Session", "TrainSession", "ValueInfo", "load", "version", "sysinfo",
           "tune", "bench", "compile"]


# ---- errors ------------------------------------------------------------------------------------

class Error(RuntimeError):
    """A failure in anvil: `status` is the C status code, `status_name` its name (e.g.
    "ANVIL_ERR_SHAPE") and the message is anvil's own (it names the node or input at fault)."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.status_name = lib.anvil_status_name(status).decode()
        super().__init__(f"{message} [{self.status_name}]")


class InvalidArgument(Error, ValueError):
    pass


class InvalidModel(Error, ValueError):
    pass


class Unsupported(Error, NotImplementedError):
    pass


class ShapeError(Error, ValueError):
    pass


class OutOfMemory(Error, MemoryError):
    pass


class IOError(Error, OSError):  # noqa: A001 - anvil's status name
    pass


class LimitError(Error):
    pass


class RuntimeFailure(Error):
    pass


class InternalError(Error):
    pass


_ERRORS = {1: InvalidArgument, 2: InvalidModel, 3: Unsupported, 4: ShapeError, 5: OutOfMemory,
           6: IOError, 7: LimitError, 8: RuntimeFailure, 9: InternalError}


def _check(status: int, what: str = "") -> None:
    if status != 0:
        msg = (lib.anvil_last_error() or b"").decode(errors="replace")
        raise _ERRORS.get(status, Error)(status, msg or what or "anvil call failed")


# ---- dtypes -------------------------------------------------------------------------------------

_NP_OF = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
          7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
          14: np.complex64, 15: np.complex128}
_CODE_OF = {np.dtype(t): c for c, t in _NP_OF.items()}


def _dtype_name(code: int) -> str:
    return lib.anvil_dtype_name(code).decode()


def _code_of(dt: np.dtype, what: str) -> int:
    code = _CODE_OF.get(np.dtype(dt))
    if code is None:
        raise TypeError(f"{what}: numpy dtype {np.dtype(dt)} has no anvil equivalent")
    return code


def version() -> str:
    """anvil's version, "MAJOR.MINOR.PATCH"."""
    return lib.anvil_version().decode()


def sysinfo() -> Dict[str, str]:
    """The CPU, its ISA features and the backends built in, as `anvil sysinfo` prints them."""
    n = lib.anvil_sysinfo(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.anvil_sysinfo(buf, n + 1)
    out = {}
    for line in buf.value.decode().splitlines():
        k, _, v = line.partition(" = ")
        out[k.strip()] = v.strip()
    return out


# ---- models -------------------------------------------------------------------------------------

class ValueInfo:
    """A model input or output: name, numpy dtype (None where numpy has none) and shape, with
    the symbol name (or None) where a dimension is not a number."""

    def __init__(self, raw: _lib.ValueInfo):
        self.name: str = raw.name.decode()
        self.dtype_name: str = _dtype_name(raw.dtype)
        self.dtype: Optional[np.dtype] = np.dtype(_NP_OF[raw.dtype]) if raw.dtype in _NP_OF \
            else None
        self.shape: Optional[Tuple[Union[int, str, None], ...]] = None
        if raw.rank >= 0:
            dims = []
            for i in range(raw.rank):
                d = raw.dims[i]
                name = raw.dim_names[i]
                dims.append(int(d) if d >= 0 else (name.decode() if name else None))
            self.shape = tuple(dims)

    def __repr__(self) -> str:
        return f"ValueInfo({self.name!r}, {self.dtype_name}, {self.shape})"


class Model:
    """An ONNX model loaded by anvil (from a path or from bytes). Weights are not copied: a file
    is memory-mapped, and bytes are kept alive by the model."""

    def __init__(self, source: Union[str, os.PathLike, bytes, bytearray, memoryview]):
        self._h = c_void_p()
        self._buf = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._buf = bytes(source)
            _check(lib.anvil_model_load_buffer(self._buf, len(self._buf), byref(self._h)))
        else:
            _check(lib.anvil_model_load(os.fsencode(source), byref(self._h)))
        self.inputs: List[ValueInfo] = self._infos(lib.anvil_model_input_count,
                                                   lib.anvil_model_input_info)
        self.outputs: List[ValueInfo] = self._infos(lib.anvil_model_output_count,
                                                    lib.anvil_model_output_info)

    def _infos(self, count, info) -> List[ValueInfo]:
        out = []
        for i in range(count(self._h)):
            raw = _lib.ValueInfo()
            _check(info(self._h, i, byref(raw)))
            out.append(ValueInfo(raw))
        return out

    def close(self) -> None:
        """Frees the model now (sessions made from it keep it alive until they close)."""
        if self._h:
            lib.anvil_model_free(self._h)
            self._h = c_void_p()

    def __del__(self):
        self.close()


def load(source: Union[str, os.PathLike, bytes, bytearray, memoryview]) -> Model:
    """Loads an ONNX model from a path or from its bytes."""
    return Model(source)


# ---- tensors ------------------------------------------------------------------------------------

def _as_array(x: Any, what: str) -> np.ndarray:
    """x as a C-contiguous numpy array, without a copy where possible (DLPack producers such as
    torch tensors are viewed in place)."""
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__dlpack__"):
            try:
                x = np.from_dlpack(x)
            except (TypeError, RuntimeError, BufferError) as e:
                raise TypeError(f"{what}: cannot view this DLPack tensor ({e}); pass a CPU, "
                                f"strided tensor or a numpy array") from None
        else:
            x = np.asarray(x)
    # not np.ascontiguousarray: it returns at least one dimension, so a rank-0 input (Silero
    # VAD's sample rate) would arrive with shape [1]
    return np.asarray(x, order="C")


def _wrap(arr: np.ndarray, what: str) -> c_void_p:
    code = _code_of(arr.dtype, what)
    t = c_void_p()
    dims = (c_int64 * max(arr.ndim, 1))(*arr.shape)
    _check(lib.anvil_tensor_wrap(code, arr.ndim, dims, arr.ctypes.data_as(c_void_p), byref(t)))
    return t


class _Owned:
    """A tensor anvil returned, exposed to numpy without a copy; freed with the last array."""
    __slots__ = ("_t", "__array_interface__")

    def __init__(self, t: c_void_p):
        self._t = t
        code = lib.anvil_tensor_dtype(t)
        if code not in _NP_OF:
            lib.anvil_tensor_free(t)
            self._t = None
            raise Unsupported(3, f"an output of dtype {_dtype_name(code)} has no numpy "
                                 f"equivalent")
        rank = lib.anvil_tensor_rank(t)
        dims = lib.anvil_tensor_dims(t)
        shape = tuple(dims[i] for i in range(rank))
        data = lib.anvil_tensor_data(t) or 0
        self.__array_interface__ = {"version": 3, "shape": shape,
                                    "typestr": np.dtype(_NP_OF[code]).str,
                                    "data": (data, False)}

    def __del__(self):
        if self._t:
            lib.anvil_tensor_free(self._t)


def _to_numpy(t: c_void_p) -> np.ndarray:
    return np.asarray(_Owned(t))


# ---- sessions -----------------------------------------------------------------------------------

def _set_precision(opts: c_void_p, precision: Optional[str], tolerance: Optional[float]) -> None:
    """anvil_options_set_precision / _set_tolerance where given (None: the default, or
    $ANVIL_PRECISION); anvil refuses unknown names."""
    if precision is not None:
        if not isinstance(precision, str):
            raise TypeError(f"precision must be a string ('fp32', 'bf16', 'fp16', 'auto' or 'int8'), "
                            f"not {type(precision).__name__}")
        _check(lib.anvil_options_set_precision(opts, precision.encode()))
    if tolerance is not None:
        _check(lib.anvil_options_set_tolerance(opts, float(tolerance)))


Feeds = Mapping[str, Any]


class Session:
    """Runs a model. threads: 0 for every core; opt_level: graph rewrites (0 none, 1 all);
    tuning: "db" (the tuning database's winners, the default), "off" (built-in rules only) or
    "online" (BestOf: candidates take turns over real runs, the fastest is kept and written to
    the database); db: the database's path (default: $ANVIL_TUNING_DB, else
    ~/.cache/anvil/tuning.db); variants: {node name or op type: variant} to force; profiling:
    record per-node timings (write_profile); precision: "fp32", "bf16" (MatMul/Gemm round their
    operands to bfloat16, accumulate in fp32), "fp16" (IEEE half instead, on CPUs with
    AVX512-FP16; inference only) or "auto" (bf16 or fp16 where tuning finds it faster within
    `tolerance`, default 0.01); None: $ANVIL_PRECISION, else fp32."""

    def __init__(self, model: Union[Model, str, os.PathLike, bytes], threads: int = 0,
                 opt_level: int = 1, tuning: str = "db", db: Optional[str] = None,
                 online_rounds: int = 3, passes: Optional[str] = None,
                 variants: Optional[Mapping[str, str]] = None, profiling: bool = False,
                 precision: Optional[str] = None, tolerance: Optional[float] = None):
        self._h = c_void_p()
        if not isinstance(model, Model):
            model = Model(model)
        if tuning not in ("db", "off", "online"):
            raise ValueError(f"tuning must be 'db', 'off' or 'online', not {tuning!r}")
        self.model = model
        opts = c_void_p()
        _check(lib.anvil_options_create(byref(opts)))
        try:
            _check(lib.anvil_options_set_threads(opts, int(threads)))
            _check(lib.anvil_options_set_opt_level(opts, int(opt_level)))
            if passes is not None:
                _check(lib.anvil_options_set_passes(opts, passes.encode()))
            if profiling:
                _check(lib.anvil_options_set_profiling(opts, 1))
            for key, variant in (variants or {}).items():
                _check(lib.anvil_options_set_variant(opts, key.encode(), variant.encode()))
            if tuning == "off":
                _check(lib.anvil_options_set_tuning_db(opts, b""))
            elif db is not None:
                _check(lib.anvil_options_set_tuning_db(opts, os.fsencode(db)))
            if tuning == "online":
                _check(lib.anvil_options_set_online_tuning(opts, int(online_rounds), 0.0, 0))
            _set_precision(opts, precision, tolerance)
            _check(lib.anvil_session_create(model._h, opts, byref(self._h)))
        finally:
            lib.anvil_options_free(opts)
        self.inputs = model.inputs
        self.outputs = model.outputs
        self._in_names = [i.name for i in self.inputs]
        self._in_c = (c_char_p * max(len(self.inputs), 1))(*[n.encode() for n in self._in_names])
        self._all_out = [o.name for o in self.outputs]
        self._out_c = (c_char_p * max(len(self.outputs), 1))(*[n.encode() for n in self._all_out])

    def run(self, feeds: Feeds, outputs: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """Runs the model on `feeds` ({input name: array}, every input) and returns {output name:
        numpy array} for `outputs` (default: all, in the model's order)."""
        if not self._h:
            raise InvalidArgument(1, "this session is closed")
        n_in = len(self._in_names)
        extra = set(feeds) - set(self._in_names)
        if extra:
            raise InvalidArgument(1, f"the model has no input {sorted(extra)[0]!r}; its inputs "
                                     f"are {self._in_names}")
        arrays, tensors = [], (c_void_p * max(n_in, 1))()
        try:
            for k, name in enumerate(self._in_names):
                if name not in feeds:
                    raise InvalidArgument(1, f"input {name!r} is missing; the model's inputs "
                                             f"are {self._in_names}")
                a = _as_array(feeds[name], f"input {name!r}")
                arrays.append(a)
                tensors[k] = _wrap(a, f"input {name!r}")
            names = self._all_out if outputs is None else list(outputs)
            out_c = self._out_c if outputs is None else \
                (c_char_p * max(len(names), 1))(*[n.encode() for n in names])
            got = (c_void_p * max(len(names), 1))()
            _check(lib.anvil_session_run(self._h, n_in, self._in_c, tensors, len(names),
                                         out_c, got))
        finally:
            for k in range(len(arrays)):
                lib.anvil_tensor_free(tensors[k])
        return {name: _to_numpy(c_void_p(got[k])) for k, name in enumerate(names)}

    __call__ = run

    def explain(self) -> List[Dict[str, Any]]:
        """Per node of the last run's plan: what ran, why, in which arithmetic ("compute":
        "bf16" or "fp32") and how its activations are stored ("storage": "fp32", "bf16 in",
        "bf16 out", "bf16 in+out") and the bf16 region it is in ("region": 1.., or 0 outside
        every region), as `anvil bench --explain`."""
        count, items = c_size_t(), POINTER(_lib.NodeChoice)()
        _check(lib.anvil_session_explain(self._h, byref(count), byref(items)))
        dec = lambda s: s.decode() if s else None  # noqa: E731
        return [{"node": dec(c.node), "op": dec(c.op), "variant": dec(c.variant),
                 "params": dec(c.params), "runs": dec(c.runs), "source": dec(c.source),
                 "scope": dec(c.scope), "note": dec(c.note), "bytes": c.bytes, "flops": c.flops,
                 "compute": dec(c.compute), "storage": dec(c.storage), "region": c.region}
                for c in (items[i] for i in range(count.value))]

    def stats(self) -> Dict[str, int]:
        """The last run's plan: arena bytes, nodes run and folded, plans made, ..."""
        s = _lib.SessionStats()
        _check(lib.anvil_session_stats_get(self._h, byref(s)))
        return {name: getattr(s, name) for name, _ in _lib.SessionStats._fields_}

    def write_profile(self, path: Union[str, os.PathLike]) -> None:
        """Writes the per-node timings (profiling=True) as Chrome trace JSON."""
        _check(lib.anvil_session_write_profile(self._h, os.fsencode(path)))

    def close(self) -> None:
        if self._h:
            lib.anvil_session_free(self._h)
            self._h = c_void_p()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()


# ---- training -----------------------------------------------------------------------------------

_LOSSES = {"cross_entropy": 0, "mse": 1, "nll": 2, "dot": 3}
_OPTIMIZERS = {"sgd": 0, "adam": 1, "adamw": 2}


class TrainSession:
    """Trains a model's float32 initializers with anvil's gradient graph and optimizer (the C
    training API). loss: "cross_entropy" | "mse" | "nll" | "dot" (sum(output * labels): with the
    output's gradient as the labels, `gradients` gives the parameters' vector-Jacobian product);
    optimizer: "sgd" | "adam" | "adamw"; trainable: initializer names (default: every float
    initializer the loss reaches); precision: the kernels' arithmetic, forward and backward, as
    Session's (parameters, gradients and optimizer state stay float32)."""

    def __init__(self, model: Union[Model, str, os.PathLike, bytes], loss: str = "cross_entropy",
                 optimizer: str = "sgd", lr: float = 0.01, momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 clip_norm: float = 0.0, accumulate: int = 1,
                 trainable: Optional[Iterable[str]] = None, output: Optional[str] = None,
                 threads: int = 0, opt_level: int = 1, seed: int = 0,
                 db: Optional[str] = None, online_rounds: int = 0,
                 precision: Optional[str] = None, tolerance: Optional[float] = None):
        self._h = c_void_p()
        if not isinstance(model, Model):
            model = Model(model)
        if loss not in _LOSSES:
            raise ValueError(f"loss must be one of {sorted(_LOSSES)}, not {loss!r}")
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(_OPTIMIZERS)}, not {optimizer!r}")
        self.model = model
        c = _lib.TrainConfig()
        lib.anvil_train_config_default(byref(c))
        c.loss, c.optimizer = _LOSSES[loss], _OPTIMIZERS[optimizer]
        c.lr, c.momentum, c.weight_decay, c.nesterov = lr, momentum, weight_decay, int(nesterov)
        c.beta1, c.beta2, c.eps, c.clip_norm = betas[0], betas[1], eps, clip_norm
        c.accumulate, c.threads, c.opt_level, c.seed = accumulate, threads, opt_level, seed
        c.online_rounds = online_rounds
        keep = []
        if output is not None:
            keep.append(output.encode())
            c.output = keep[-1]
        if db is not None:
            keep.append(os.fsencode(db))
            c.tuning_db = keep[-1]
        if precision is not None:
            if not isinstance(precision, str):
                raise TypeError(f"precision must be a string ('fp32', 'bf16', 'fp16', 'auto' or 'int8'), "
                                f"not {type(precision).__name__}")
            keep.append(precision.encode())
            c.precision = keep[-1]
        if tolerance is not None:
            tolerance = float(tolerance)
            if not (tolerance > 0 and tolerance != float("inf")):
                raise InvalidArgument(1, f"tolerance must be a positive finite number, got "
                                         f"{tolerance}")
            c.tolerance = tolerance
        if trainable is not None:
            names = [n.encode() for n in trainable]
            arr = (c_char_p * max(len(names), 1))(*names)
            keep.append(arr)
            c.trainable, c.n_trainable = arr, len(names)
        _check(lib.anvil_train_session_create(model._h, byref(c), byref(self._h)))
        self._in_names = [i.name for i in model.inputs]
        self._in_c = (c_char_p * max(len(self._in_names), 1))(
            *[n.encode() for n in self._in_names])

    def _call(self, fn, feeds: Feeds, labels: Any, want_prediction: bool):
        if not self._h:
            raise InvalidArgument(1, "this training session is closed")
        arrays, tensors = [], (c_void_p * max(len(self._in_names), 1))()
        lab = None
        try:
            for k, name in enumerate(self._in_names):
                if name not in feeds:
                    raise InvalidArgument(1, f"input {name!r} is missing")
                a = _as_array(feeds[name], f"input {name!r}")
                arrays.append(a)
                tensors[k] = _wrap(a, f"input {name!r}")
            la = _as_array(labels, "labels")
            lab = _wrap(la, "labels")
            loss, pred = c_float(), c_void_p()
            _check(fn(self._h, len(self._in_names), self._in_c, tensors, lab, byref(loss),
                      byref(pred) if want_prediction else None))
        finally:
            for k in range(len(arrays)):
                lib.anvil_tensor_free(tensors[k])
            if lab:
                lib.anvil_tensor_free(lab)
        return float(loss.value), (_to_numpy(pred) if want_prediction else None)

    def step(self, feeds: Feeds, labels: Any, prediction: bool = False):
        """One training step; returns the loss (and the prediction when asked)."""
        loss, pred = self._call(lib.anvil_train_step, feeds, labels, prediction)
        return (loss, pred) if prediction else loss

    def eval(self, feeds: Feeds, labels: Any, prediction: bool = False):
        """The loss (and prediction) without an update."""
        loss, pred = self._call(lib.anvil_train_eval, feeds, labels, prediction)
        return (loss, pred) if prediction else loss

    def gradients(self, feeds: Feeds, labels: Any, prediction: bool = False):
        """Forward and backward without an update: returns the loss (and prediction); the
        gradients are then `grad(i)` / `grads()`."""
        loss, pred = self._call(lib.anvil_train_gradients, feeds, labels, prediction)
        return (loss, pred) if prediction else loss

    @property
    def param_names(self) -> List[str]:
        """The trained parameters (empty until the first step, eval or gradients call)."""
        return [lib.anvil_train_param_name(self._h, i).decode()
                for i in range(lib.anvil_train_param_count(self._h))]

    def param(self, i: int) -> np.ndarray:
        """Parameter i as a writable numpy view of the session's own buffer."""
        n = c_size_t()
        ptr = lib.anvil_train_param_data(self._h, i, byref(n))
        if not ptr:
            raise InvalidArgument(1, f"no parameter {i} (the session has "
                                     f"{lib.anvil_train_param_count(self._h)})")
        return np.ctypeslib.as_array(ptr, shape=(n.value,))

    def grad(self, i: int) -> np.ndarray:
        """The last `gradients` call's gradient of parameter i (a read-only view)."""
        n = c_size_t()
        if not lib.anvil_train_param_data(self._h, i, byref(n)):
            raise InvalidArgument(1, f"no parameter {i}")
        ptr = lib.anvil_train_grad_data(self._h, i)
        if not ptr:
            raise InvalidArgument(1, "no gradients yet: call gradients() first")
        a = np.ctypeslib.as_array(ptr, shape=(n.value,))
        a.flags.writeable = False
        return a

    def set_lr(self, lr: float) -> None:
        lib.anvil_train_set_lr(self._h, float(lr))

    @property
    def updates(self) -> int:
        return int(lib.anvil_train_updates(self._h))

    def export(self, path: Union[str, os.PathLike]) -> None:
        """Writes the model with the trained weights as ONNX."""
        _check(lib.anvil_train_export(self._h, os.fsencode(path)))

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Checkpoint: parameters, optimizer state and step counts (written atomically)."""
        _check(lib.anvil_train_save(self._h, os.fsencode(path)))

    def load(self, path: Union[str, os.PathLike]) -> None:
        _check(lib.anvil_train_load(self._h, os.fsencode(path)))

    def memory(self) -> Dict[str, int]:
        m = _lib.TrainMemory()
        _check(lib.anvil_train_memory_get(self._h, byref(m)))
        return {"arena_bytes": m.arena_bytes, "param_bytes": m.param_bytes,
                "optimizer_bytes": m.optimizer_bytes}

    def close(self) -> None:
        if self._h:
            lib.anvil_train_session_free(self._h)
            self._h = c_void_p()

    def __del__(self):
        self.close()


# ---- tuning, benchmarking and compiling: the C API's calls, in this process ------------------

def tune(model: Union[str, os.PathLike, Model], threads: int = 0, db: Optional[str] = None,
         shapes: Optional[Mapping[str, Sequence[int]]] = None, budget: Optional[float] = None,
         runs: int = 20, inputs: Optional[Feeds] = None, opt_level: int = 1,
         passes: Optional[str] = None, retune: bool = False,
         progress: Optional[Any] = None, precision: Optional[str] = None,
         tolerance: Optional[float] = None) -> Dict[str, Any]:
    """Measures every problem of the model on this machine (anvil_tune_model, in this process),
    writes the winners to the tuning database, and returns the report (the dict `anvil tune
    --json` prints). Inputs not given are generated for `shapes`. progress(dict) is called as the
    tune goes (item, n_items, op, node, alive, best_ms, elapsed_s, eta_s). precision and
    tolerance: those of the sessions that will use the winners, as Session's."""
    from ._bench import generated_inputs
    m = model if isinstance(model, Model) else Model(model)
    feeds = generated_inputs(m, shapes)
    for name, x in (inputs or {}).items():
        feeds[name] = _as_array(x, f"input '{name}'")
    names = (c_char_p * max(len(feeds), 1))(*[k.encode() for k in feeds])
    arrays = list(feeds.values())
    handles = [_wrap(a, f"input '{k}'") for k, a in feeds.items()]
    tensors = (c_void_p * max(len(handles), 1))(*handles)
    opts = c_void_p()
    _check(lib.anvil_options_create(byref(opts)))
    o = _lib.TuneOptions()
    lib.anvil_tune_options_default(byref(o))
    o.session = opts
    o.budget_seconds = float(budget or 0)
    o.retune = int(bool(retune))
    o.runs = int(runs)
    o.model_label = os.fsencode(model) if isinstance(model, (str, os.PathLike)) else None
    if progress is not None:
        def relay(_arg, p):
            v = p.contents
            progress({"item": v.item, "n_items": v.n_items,
                      "op": (v.op or b"").decode(), "node": (v.node or b"").decode(),
                      "alive": v.alive, "best_ms": v.best_ms, "elapsed_s": v.elapsed_s,
                      "eta_s": v.eta_s})
        o.progress = _lib.TUNE_PROGRESS_FN(relay)
    report = c_void_p()
    try:
        _check(lib.anvil_options_set_threads(opts, int(threads)))
        _check(lib.anvil_options_set_opt_level(opts, int(opt_level)))
        if passes:
            _check(lib.anvil_options_set_passes(opts, passes.encode()))
        if db:
            _check(lib.anvil_options_set_tuning_db(opts, os.fsencode(db)))
        _set_precision(opts, precision, tolerance)
        status = lib.anvil_tune_model(m._h, byref(o), len(handles), names, tensors,
                                      byref(report))
        _check(status)
        text = lib.anvil_tune_report_json(report)
        if text is None:
            raise MemoryError("anvil_tune_report_json: out of memory")
        return json.loads(text.decode())
    finally:
        lib.anvil_tune_report_free(report)
        lib.anvil_options_free(opts)
        for h in handles:
            lib.anvil_tensor_free(h)
        del arrays


def compile(model: Union[str, os.PathLike, Model], out_dir: Union[str, os.PathLike],
            shapes: Optional[Mapping[str, Sequence[int]]] = None, name: str = "net",
            isa: Optional[str] = None, embed_weights: bool = False, threads: int = 0,
            db: Optional[str] = None, tuning: str = "db",
            precision: Optional[str] = None) -> Dict[str, Any]:
    """What `anvil compile MODEL -o OUT_DIR` does, in this process (anvil_session_compile): writes
    the model, for fixed input shapes (`shapes` for its symbolic dims), as a standalone C library
    (NAME.h, NAME.c, NAME.weights, a Makefile, a CMakeLists.txt and the runner NAME_run.c);
    `make -C OUT_DIR` builds it. isa: "avx512", "avx2" or "generic" caps the ISA the kernels are
    chosen for (default: this CPU's; the cap is the process's while the plan is made, and is put
    back after). precision: as Session's (a bf16 kernel is emitted only where it can be).
    Returns what was written (the dict `anvil compile --json` prints); raises anvil.Unsupported
    naming every node that cannot be emitted."""
    from ._bench import generated_inputs
    if tuning not in ("db", "off"):
        raise ValueError(f"tuning must be 'db' or 'off', not {tuning!r}")
    if isa not in (None, "avx512", "avx2", "generic"):
        raise ValueError(f"isa must be 'avx512', 'avx2' or 'generic', not {isa!r}")
    m = model if isinstance(model, Model) else Model(model)
    # only the shapes and dtypes matter to the plan; zeros are a valid index for any Gather
    feeds = {k: np.zeros_like(v) for k, v in generated_inputs(m, shapes).items()}
    handles = [_wrap(a, f"input '{k}'") for k, a in feeds.items()]
    names = (c_char_p * max(len(feeds), 1))(*[k.encode() for k in feeds])
    tensors = (c_void_p * max(len(handles), 1))(*handles)
    opts, sess = c_void_p(), c_void_p()
    previous = lib.anvil_isa_cap()
    try:
        if isa:
            _check(lib.anvil_set_isa_cap(b"scalar" if isa == "generic" else isa.encode()))
        _check(lib.anvil_options_create(byref(opts)))
        _check(lib.anvil_options_set_threads(opts, int(threads)))
        _check(lib.anvil_options_set_emittable_only(opts, 1))
        if tuning == "off":
            _check(lib.anvil_options_set_tuning_db(opts, b""))
        elif db:
            _check(lib.anvil_options_set_tuning_db(opts, os.fsencode(db)))
        _set_precision(opts, precision, None)
        _check(lib.anvil_session_create(m._h, opts, byref(sess)))
        co = _lib.CompileOptions(name=name.encode(), embed_weights=int(bool(embed_weights)))
        _check(lib.anvil_session_compile(sess, len(handles), names, tensors, byref(co),
                                         os.fsencode(out_dir)))
    finally:
        if sess:
            lib.anvil_session_free(sess)
        lib.anvil_options_free(opts)
        for h in handles:
            lib.anvil_tensor_free(h)
        lib.anvil_set_isa_cap(previous)
    files = [f"{name}.h", f"{name}.c", f"{name}.weights", f"{name}_run.c", "Makefile",
             "CMakeLists.txt", "README.md"]
    return {"model": os.fspath(model) if not isinstance(model, Model) else "",
            "dir": os.fspath(out_dir), "name": name, "files": files,
            "build": f"make -C {os.fspath(out_dir)}"}


def bench(model: Union[str, os.PathLike, Model], threads: int = 0,
          shapes: Optional[Mapping[str, Sequence[int]]] = None, iters: Optional[int] = None,
          tuning: str = "db", precision: Optional[str] = None,
          tolerance: Optional[float] = None, check: bool = False) -> Dict[str, Any]:
    """What `anvil bench MODEL --json` reports, measured in this process (anvil_bench_model):
    load time, first run, latency statistics over `iters` timed runs (default 50, after 5
    untimed ones), memory and plan statistics. Inputs are random data of the declared shapes,
    symbolic dims from `shapes` ({input: dims}) or 1: floats uniform in [-1, 1], integers in
    [0, 3], booleans random. tuning: "db", "off" or "online", as Session's. A model already
    loaded reports a load time of 0. precision, tolerance: as Session's. check: also run an fp32
    session once on the same inputs; the report's "check" then holds per output the max and
    mean error relative to its scale and, for a classifier's [N, C] output, the top-1
    agreement (`anvil bench --check`)."""
    from ._bench import bench_model
    return bench_model(model, threads, shapes, iters, tuning, precision, tolerance, check)
