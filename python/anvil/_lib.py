"""The C library, loaded with ctypes, and the prototypes of the functions the package calls.

ctypes rather than a compiled extension: the package then builds nothing but libanvil.so (which
the project's CMake builds anyway), works with every CPython 3.9+ without a per-version wheel,
and every call is a plain C call whose arguments are checked here once. The price is about a
microsecond per call, which `Session.run` keeps to a handful of calls per run.

The library is found, in this order: $ANVIL_LIBRARY (a path), the copy installed inside this
package (pip install ./python), then the project's own build (build-release/) when the package
runs from the source tree.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import (POINTER, Structure, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint64, c_void_p)

MAX_RANK = 8


class ValueInfo(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("rank", c_int),
                ("dims", c_int64 * MAX_RANK), ("dim_names", c_char_p * MAX_RANK)]


class NodeChoice(Structure):
    _fields_ = [("node", c_char_p), ("op", c_char_p), ("variant", c_char_p),
                ("params", c_char_p), ("runs", c_char_p), ("source", c_char_p),
                ("scope", c_char_p), ("note", c_char_p), ("bytes", c_uint64),
                ("flops", c_uint64), ("compute", c_char_p),
                ("storage", c_char_p), ("region", c_int32)]


class SessionStats(Structure):
    _fields_ = [("arena_bytes", c_size_t), ("activation_bytes", c_size_t),
                ("plans_made", c_size_t), ("nodes_run", c_size_t), ("nodes_folded", c_size_t),
                ("nodes_tuning", c_size_t), ("subgraph_runs_compiled", c_size_t),
                ("subgraph_runs_interpreted", c_size_t), ("profiled_ns", c_uint64),
                ("reference_ns", c_uint64), ("interpreted_ns", c_uint64)]


class TrainConfig(Structure):
    _fields_ = [("loss", c_int), ("output", c_char_p), ("optimizer", c_int), ("lr", c_float),
                ("momentum", c_float), ("weight_decay", c_float), ("nesterov", c_int),
                ("beta1", c_float), ("beta2", c_float), ("eps", c_float),
                ("clip_norm", c_float), ("accumulate", c_int),
                ("trainable", POINTER(c_char_p)), ("n_trainable", c_size_t),
                ("threads", c_int), ("opt_level", c_int), ("profiling", c_int),
                ("seed", c_uint64), ("tuning_db", c_char_p), ("online_rounds", c_int),
                ("precision", c_char_p), ("tolerance", c_double)]


class TrainMemory(Structure):
    _fields_ = [("arena_bytes", c_size_t), ("param_bytes", c_size_t),
                ("optimizer_bytes", c_size_t)]


class CompileOptions(Structure):
    _fields_ = [("name", c_char_p), ("embed_weights", c_int)]


class TuneProgress(Structure):
    _fields_ = [("item", c_int), ("n_items", c_int), ("op", c_char_p), ("node", c_char_p),
                ("alive", c_int), ("best_ms", c_double), ("elapsed_s", c_double),
                ("eta_s", c_double)]


TUNE_PROGRESS_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(TuneProgress))


class TuneOptions(Structure):
    _fields_ = [("session", c_void_p), ("budget_seconds", c_double), ("retune", c_int), ("runs", c_int),
                ("model_label", c_char_p), ("progress", TUNE_PROGRESS_FN),
                ("progress_arg", c_void_p), ("stop", ctypes.POINTER(c_int))]


def _candidates():
    env = os.environ.get("ANVIL_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.startswith("libanvil.so"):
            yield os.path.join(here, name)
    root = os.path.dirname(os.path.dirname(here))
    for build in ("build-release", "build"):
        yield os.path.join(root, build, "libanvil.so")


def _load():
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            return ctypes.CDLL(path), path
        tried.append(path)
    raise ImportError("anvil: libanvil.so not found (tried: " + ", ".join(tried) +
                      "); install the package with `pip install ./python`, or set "
                      "ANVIL_LIBRARY to the library's path")


lib, path = _load()

P = c_void_p  # every opaque handle


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_proto("anvil_version", c_char_p)
_proto("anvil_last_error", c_char_p)
_proto("anvil_status_name", c_char_p, c_int)
_proto("anvil_dtype_name", c_char_p, c_int)
_proto("anvil_sysinfo", c_size_t, c_char_p, c_size_t)
_proto("anvil_model_load", c_int, c_char_p, POINTER(P))
_proto("anvil_model_load_buffer", c_int, c_void_p, c_size_t, POINTER(P))
_proto("anvil_model_free", None, P)
_proto("anvil_model_input_count", c_size_t, P)
_proto("anvil_model_output_count", c_size_t, P)
_proto("anvil_model_input_info", c_int, P, c_size_t, POINTER(ValueInfo))
_proto("anvil_model_output_info", c_int, P, c_size_t, POINTER(ValueInfo))
_proto("anvil_options_create", c_int, POINTER(P))
_proto("anvil_options_free", None, P)
_proto("anvil_options_set_threads", c_int, P, c_int)
_proto("anvil_options_set_opt_level", c_int, P, c_int)
_proto("anvil_options_set_passes", c_int, P, c_char_p)
_proto("anvil_options_set_profiling", c_int, P, c_int)
_proto("anvil_options_set_variant", c_int, P, c_char_p, c_char_p)
_proto("anvil_options_set_tuning_db", c_int, P, c_char_p)
_proto("anvil_options_set_online_tuning", c_int, P, c_int, c_double, c_int)
_proto("anvil_options_set_precision", c_int, P, c_char_p)
_proto("anvil_options_set_tolerance", c_int, P, c_double)
_proto("anvil_session_create", c_int, P, P, POINTER(P))
_proto("anvil_session_free", None, P)
_proto("anvil_session_run", c_int, P, c_size_t, POINTER(c_char_p), POINTER(P), c_size_t,
       POINTER(c_char_p), POINTER(P))
_proto("anvil_session_explain", c_int, P, POINTER(c_size_t), POINTER(POINTER(NodeChoice)))
_proto("anvil_session_stats_get", c_int, P, POINTER(SessionStats))
_proto("anvil_session_write_profile", c_int, P, c_char_p)
_proto("anvil_tensor_wrap", c_int, c_int, c_int, POINTER(c_int64), c_void_p, POINTER(P))
_proto("anvil_tensor_free", None, P)
_proto("anvil_tensor_dtype", c_int, P)
_proto("anvil_tensor_rank", c_int, P)
_proto("anvil_tensor_dims", POINTER(c_int64), P)
_proto("anvil_tensor_bytes", c_size_t, P)
_proto("anvil_tensor_data", c_void_p, P)
_proto("anvil_train_config_default", None, POINTER(TrainConfig))
_proto("anvil_train_session_create", c_int, P, POINTER(TrainConfig), POINTER(P))
_proto("anvil_train_session_free", None, P)
_proto("anvil_train_step", c_int, P, c_size_t, POINTER(c_char_p), POINTER(P), P,
       POINTER(c_float), POINTER(P))
_proto("anvil_train_eval", c_int, P, c_size_t, POINTER(c_char_p), POINTER(P), P,
       POINTER(c_float), POINTER(P))
_proto("anvil_train_tune", c_int, P, c_size_t, POINTER(c_char_p), POINTER(P), P, c_double,
       POINTER(c_int))
_proto("anvil_train_gradients", c_int, P, c_size_t, POINTER(c_char_p), POINTER(P), P,
       POINTER(c_float), POINTER(P))
_proto("anvil_train_param_count", c_size_t, P)
_proto("anvil_train_param_name", c_char_p, P, c_size_t)
_proto("anvil_train_param_data", POINTER(c_float), P, c_size_t, POINTER(c_size_t))
_proto("anvil_train_grad_data", POINTER(c_float), P, c_size_t)
_proto("anvil_train_set_lr", None, P, c_float)
_proto("anvil_train_updates", c_uint64, P)
_proto("anvil_train_export", c_int, P, c_char_p)
_proto("anvil_train_save", c_int, P, c_char_p)
_proto("anvil_train_load", c_int, P, c_char_p)
_proto("anvil_train_memory_get", c_int, P, POINTER(TrainMemory))
_proto("anvil_options_set_emittable_only", c_int, P, c_int)
_proto("anvil_session_compile", c_int, P, c_size_t, POINTER(c_char_p), POINTER(P),
       POINTER(CompileOptions), c_char_p)
_proto("anvil_set_isa_cap", c_int, c_char_p)
_proto("anvil_isa_cap", c_char_p)
_proto("anvil_tune_options_default", None, POINTER(TuneOptions))
_proto("anvil_tune_model", c_int, P, POINTER(TuneOptions), c_size_t, POINTER(c_char_p), POINTER(P),
       POINTER(P))
_proto("anvil_tune_report_free", None, P)
_proto("anvil_tune_report_json", c_char_p, P)
_proto("anvil_tune_report_text", c_char_p, P, c_int)
