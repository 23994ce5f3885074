"""anvil.bench in this process: anvil_bench_model through ctypes, on inputs made here.

`anvil bench` fills the inputs it is not given with seeded random data (tools/model_inputs.c);
the C API takes every input, so this module makes them the same way with numpy: floats uniform
in [-1, 1], integers in [0, 3], booleans random, of the declared shape with symbolic dims taken
from `shapes` (else 1). The data is not bitwise the tool's, only drawn by the same rule.
"""
from __future__ import annotations

import json
import os
import time
from ctypes import POINTER, Structure, byref, c_char_p, c_double, c_int, c_size_t, c_void_p
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import InvalidArgument, Model, Unsupported, ValueInfo, _check, _set_precision, _wrap
from ._lib import P, _proto, lib


class BenchOptions(Structure):
    _fields_ = [("session", P), ("warmup", c_int), ("iters", c_int), ("explain", c_int),
                ("model_label", c_char_p), ("load_ms", c_double),
                ("input_sources", POINTER(c_char_p)), ("profile_path", c_char_p),
                ("check", c_int)]


_proto("anvil_bench_model", c_int, P, POINTER(BenchOptions), c_size_t, POINTER(c_char_p),
       POINTER(P), POINTER(P))
_proto("anvil_bench_report_json", c_char_p, P)
_proto("anvil_bench_report_free", None, P)


def _dims(info: ValueInfo, given: Optional[Sequence[int]]) -> List[int]:
    if info.shape is None:
        if given is None:
            raise InvalidArgument(1, f"input '{info.name}' has no declared rank; give its shape "
                                     f"in shapes={{'{info.name}': (...)}}")
        return [int(d) for d in given]
    if given is None:
        return [d if isinstance(d, int) else 1 for d in info.shape]
    if len(given) != len(info.shape):
        raise InvalidArgument(1, f"shapes['{info.name}'] has rank {len(given)} but the model "
                                 f"declares {info.shape} (rank {len(info.shape)})")
    for k, (d, g) in enumerate(zip(info.shape, given)):
        if isinstance(d, int) and d != int(g):
            raise InvalidArgument(1, f"shapes['{info.name}']: dimension {k} is fixed to {d} by "
                                     f"the model {info.shape}")
    return [int(g) for g in given]


def _random_input(info: ValueInfo, dims: List[int], rng: np.random.Generator) -> np.ndarray:
    dt = info.dtype
    if dt is None:
        raise Unsupported(3, f"input '{info.name}' of dtype {info.dtype_name}: cannot make "
                             f"random data for it")
    if dt.kind == "f":
        return rng.uniform(-1.0, 1.0, size=dims).astype(dt)
    if dt.kind in "iu":
        return rng.integers(0, 4, size=dims).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=dims).astype(dt)
    raise Unsupported(3, f"input '{info.name}' of dtype {info.dtype_name}: cannot make random "
                         f"data for it")


def generated_inputs(model: Model, shapes: Optional[Mapping[str, Sequence[int]]],
                     seed: int = 0) -> Dict[str, np.ndarray]:
    """Seeded random data for every input of `model`, by the tool's rule (anvil tune and anvil
    bench use it for the inputs not given): symbolic dims from `shapes` ({input: dims}), else 1."""
    shapes = dict(shapes or {})
    unknown = set(shapes) - {i.name for i in model.inputs}
    if unknown:
        raise InvalidArgument(1, f"shapes names {sorted(unknown)}, not inputs of the model")
    rng = np.random.default_rng(seed)
    return {i.name: np.ascontiguousarray(_random_input(i, _dims(i, shapes.get(i.name)), rng))
            for i in model.inputs}


def bench_model(model: Union[str, os.PathLike, Model], threads: int,
                shapes: Optional[Mapping[str, Sequence[int]]], iters: Optional[int],
                tuning: str, precision: Optional[str] = None, tolerance: Optional[float] = None,
                check: bool = False) -> Dict[str, Any]:
    if tuning not in ("db", "off", "online"):
        raise ValueError(f"tuning must be 'db', 'off' or 'online', not {tuning!r}")
    load_ms, label = 0.0, ""
    if not isinstance(model, Model):
        label = os.fspath(model)
        t0 = time.perf_counter()
        model = Model(model)
        load_ms = (time.perf_counter() - t0) * 1e3
    arrays = list(generated_inputs(model, shapes).values())
    n = len(arrays)
    tensors: List[c_void_p] = []
    opts, report = c_void_p(), c_void_p()
    try:
        for a, i in zip(arrays, model.inputs):
            tensors.append(_wrap(a, f"input '{i.name}'"))
        _check(lib.anvil_options_create(byref(opts)))
        _check(lib.anvil_options_set_threads(opts, int(threads)))
        if tuning == "off":
            _check(lib.anvil_options_set_tuning_db(opts, b""))
        elif tuning == "online":
            _check(lib.anvil_options_set_online_tuning(opts, 3, 0.0, 0))
        _set_precision(opts, precision, tolerance)
        names = (c_char_p * max(n, 1))(*[i.name.encode() for i in model.inputs])
        sources = (c_char_p * max(n, 1))(*[b"random"] * n)
        ins = (P * max(n, 1))(*tensors)
        o = BenchOptions(session=opts, warmup=-1, iters=int(iters) if iters else -1, explain=0,
                         model_label=os.fsencode(label), load_ms=load_ms, input_sources=sources,
                         profile_path=None, check=int(bool(check)))
        _check(lib.anvil_bench_model(model._h, byref(o), n, names, ins, byref(report)))
        return json.loads(lib.anvil_bench_report_json(report).decode())
    finally:
        lib.anvil_bench_report_free(report)
        lib.anvil_options_free(opts)
        for t in tensors:
            lib.anvil_tensor_free(t)
