"""PyTorch front end: a module optimized in one line, its parameters kept in PyTorch.

    import anvil.torch
    fast = anvil.torch.optimize(model, (example,), threads=2)
    y = fast(x)                                   # runs in anvil
    model2 = torch.compile(model, backend="anvil")

`optimize` exports the module to ONNX in memory once (torch.onnx.export, parameters kept as named
initializers), builds an anvil session and returns a `torch.nn.Module` whose forward runs in
anvil. The original module stays inside it: `state_dict()` / `load_state_dict()` act on it, and
when a parameter or buffer changes (its version counter or storage moves, as an optimizer step or
load_state_dict does), the next forward copies the new values into the kept ONNX graph and makes
a new session from it, with no new export (SOL's cached parameter context). Inputs and outputs
cross without copies (CPU tensors are viewed as numpy arrays).

Training through it (SOL's transparent mode): while autograd needs the parameters' gradients (a
training loop: gradients enabled, the module in training mode), the forward and backward run in
anvil's training graph for the module (`anvil.TrainSession` with the "dot" loss: the backward
pass gets PyTorch's upstream gradient and returns the vector-Jacobian product), and PyTorch's
optimizer updates the parameters, which are copied into anvil's buffers before the next pass.
Where anvil cannot train the module that way (an input that itself requires gradients, several
outputs, BatchNormalization or Dropout in training mode, whose statistics and masks anvil's graph
would keep apart from PyTorch's), the original module runs in PyTorch instead.
"""
from __future__ import annotations

import copy
import io
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

import anvil

__all__ = ["optimize", "OptimizedModule", "dynamo_backend"]


def _distinct_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of module whose floating parameters and buffers all hold distinct values. The
    exporter merges initializers of equal contents into one (BatchNorm's weights and running
    variances are all ones at first), which would tie tensors that training later tells apart;
    exported from this copy, every state_dict entry keeps its own initializer, and the real
    values are copied in afterwards (OptimizedModule._refresh)."""
    twin = copy.deepcopy(module)
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for t in twin.state_dict(keep_vars=True).values():
            if t.is_floating_point():
                t.copy_(torch.rand(t.shape, generator=g, dtype=torch.float32).to(t.dtype) + 0.5)
    return twin


def _export(module: torch.nn.Module, args: Tuple[Any, ...], n_in: int, dynamic_batch: bool):
    import onnx
    names = [f"input_{i}" for i in range(n_in)]
    module = _distinct_copy(module)
    module.eval()
    buf = io.BytesIO()
    dyn = {n: {0: "batch"} for n in names} if dynamic_batch else None
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buf, input_names=names, dynamo=False, opset_version=17,
                          do_constant_folding=False, dynamic_axes=dyn)
    proto = onnx.load_from_string(buf.getvalue())
    return proto, names, [o.name for o in proto.graph.output]


class OptimizedModule(torch.nn.Module):
    """A module whose forward runs in anvil (see the module docstring). `original` is the
    module it was made from; options go to `anvil.Session`."""

    def __init__(self, module: torch.nn.Module, example_inputs: Sequence[Any],
                 dynamic_batch: bool = True, **options: Any):
        super().__init__()
        self.original = module
        self._options = options
        args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) \
            else (example_inputs,)
        self._proto, self._in_names, self._out_names = _export(module, args, len(args),
                                                               dynamic_batch)
        with torch.no_grad():
            expected = module(*args)
        self._single = isinstance(expected, torch.Tensor)
        # initializers that are the module's parameters and buffers, by state_dict name
        state = dict(module.state_dict(keep_vars=True))
        self._bound = {init.name: state[init.name] for init in self._proto.graph.initializer
                       if init.name in state}
        self._session: Optional[anvil.Session] = None
        self._stamp: Dict[str, Tuple[int, int]] = {}
        self._refresh()
        # transparent training (see the module docstring)
        self._train_ops = any(n.op_type in ("BatchNormalization", "Dropout")
                              for n in self._proto.graph.node)
        self._grad_names = [n for n, t in self._bound.items()
                            if isinstance(t, torch.nn.Parameter) and t.requires_grad
                            and t.dtype == torch.float32 and t.numel() >= 2]
        self._ts: Optional[anvil.TrainSession] = None
        self._ts_index: Dict[str, int] = {}
        self._ts_stamp: Dict[str, Tuple[int, int]] = {}

    def _stamps(self) -> Dict[str, Tuple[int, int]]:
        return {n: (t._version, t.data_ptr()) for n, t in self._bound.items()}

    def _refresh(self) -> None:
        """A new session from the kept graph with the current parameter values."""
        from onnx import numpy_helper
        graph = self._proto.graph
        for i, init in enumerate(graph.initializer):
            t = self._bound.get(init.name)
            if t is not None:
                arr = t.detach().cpu().contiguous().numpy()
                graph.initializer[i].CopyFrom(numpy_helper.from_array(arr, init.name))
        self._model = anvil.load(self._proto.SerializeToString())
        self._session = anvil.Session(self._model, **self._options)
        self._stamp = self._stamps()

    def _zeros(self, feeds) -> np.ndarray:
        """Labels for a pass whose loss nobody reads: zeros of the output's shape for this batch
        (the inference session says what that shape is)."""
        key = tuple(np.shape(v) for v in feeds.values())
        z = getattr(self, "_zero_cache", {}).get(key)
        if z is None:
            if self._stamps() != self._stamp:
                self._refresh()
            out = self._session.run(feeds)[self._out_names[0]]
            z = np.zeros(out.shape, np.float32)
            self._zero_cache = {key: z}
        return z

    def state_dict(self, *args, **kwargs):
        return self.original.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self.original.load_state_dict(state_dict, strict=strict, assign=assign)

    def _needs_autograd(self, args) -> bool:
        if not torch.is_grad_enabled():
            return False
        if any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return True
        return any(p.requires_grad for p in self.original.parameters()) and self.training

    def _anvil_trains(self, args) -> bool:
        """Whether anvil's training graph can take this training pass (module docstring)."""
        return (self._single and len(self._out_names) == 1 and not self._train_ops
                and bool(self._grad_names)
                and not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args))

    def _feeds(self, args) -> Dict[str, Any]:
        feeds = {}
        for name, a in zip(self._in_names, args):
            if isinstance(a, torch.Tensor):
                a = a.detach()
                if a.device.type != "cpu":
                    raise ValueError(f"anvil runs on the CPU; input {name!r} is on {a.device}")
                a = a.contiguous().numpy()
            feeds[name] = a
        return feeds

    def _train_session(self, feeds, zeros) -> anvil.TrainSession:
        """The training graph's session, its parameters PyTorch's current values."""
        if self._ts is None:
            opts = {k: v for k, v in self._options.items()
                    if k in ("threads", "opt_level", "db", "precision", "tolerance")}
            self._ts = anvil.TrainSession(self._model, loss="dot", optimizer="sgd", lr=0.0,
                                          trainable=self._grad_names, **opts)
            self._ts.eval(feeds, zeros)  # sets the parameters up (from the model)
            self._ts_index = {n: i for i, n in enumerate(self._ts.param_names)}
        for name in self._grad_names:
            t = self._bound[name]
            stamp = (t._version, t.data_ptr())
            if self._ts_stamp.get(name) != stamp:
                np.copyto(self._ts.param(self._ts_index[name]),
                          t.detach().contiguous().numpy().reshape(-1))
                self._ts_stamp[name] = stamp
        return self._ts

    def forward(self, *args):
        if self._needs_autograd(args):
            if not self._anvil_trains(args):
                return self.original(*args)
            params = [self._bound[n] for n in self._grad_names]
            return _TrainPass.apply(self, len(args), *args, *params)
        if self._stamps() != self._stamp:
            self._refresh()
        out = self._session.run(self._feeds(args))
        tensors = [torch.from_numpy(np.asarray(out[n])) for n in self._out_names]
        return tensors[0] if self._single and len(tensors) == 1 else tuple(tensors)


class _TrainPass(torch.autograd.Function):
    """One training pass of an OptimizedModule through anvil: the forward of its training graph
    (its parameters copied in from PyTorch), and a backward that hands PyTorch's upstream
    gradient to anvil and returns the parameters' gradients."""

    @staticmethod
    def forward(ctx, mod, n_in, *tensors):
        args = tensors[:n_in]
        feeds = mod._feeds(args)
        ts = mod._train_session(feeds, mod._zeros(feeds))
        _, pred = ts.eval(feeds, mod._zeros(feeds), prediction=True)
        ctx.mod, ctx.n_in, ctx.feeds = mod, n_in, feeds
        return torch.from_numpy(np.array(pred))

    @staticmethod
    def backward(ctx, grad_out):
        mod = ctx.mod
        ts = mod._train_session(ctx.feeds, None)
        ts.gradients(ctx.feeds, grad_out.detach().contiguous().numpy())
        grads = [torch.from_numpy(np.array(ts.grad(mod._ts_index[n]))).reshape(
            mod._bound[n].shape) for n in mod._grad_names]
        return (None, None, *([None] * ctx.n_in), *grads)


def optimize(module: torch.nn.Module, example_inputs: Sequence[Any],
             precision: Optional[str] = None, **options: Any) -> OptimizedModule:
    """`module` as an `OptimizedModule` running in anvil. example_inputs: a tuple of the forward's
    arguments (tensors), used to export the graph; the batch dimension (dim 0) stays dynamic
    unless dynamic_batch=False. precision: "fp32", "bf16", "fp16" or "auto", as `anvil.Session`'s,
    for inference and for the training graph alike (fp16 is inference only: the training graph
    raises anvil.Unsupported; None: $ANVIL_PRECISION, else fp32). options:
    `anvil.Session`'s (threads, tuning, db, opt_level, tolerance, ...)."""
    if precision is not None:
        options["precision"] = precision
    return OptimizedModule(module, example_inputs, **options)


class _Lifted(torch.nn.Module):
    """A dynamo graph whose parameters arrive as inputs, with them held as buffers, so that the
    export keeps them as constants (initializers) and anvil packs them once."""

    def __init__(self, gm: torch.nn.Module, consts: Dict[int, torch.Tensor], n: int):
        super().__init__()
        self.gm = gm
        self.n = n
        self.slots = sorted(consts)
        for k, i in enumerate(self.slots):
            self.register_buffer(f"p{k}", consts[i].detach(), persistent=True)

    def forward(self, *args):
        it, full, k = iter(args), [], 0
        for i in range(self.n):
            if k < len(self.slots) and self.slots[k] == i:
                full.append(getattr(self, f"p{k}"))
                k += 1
            else:
                full.append(next(it))
        out = self.gm(*full)
        return tuple(out) if isinstance(out, (list, tuple)) else out


def dynamo_backend(gm: torch.fx.GraphModule, example_inputs: List[torch.Tensor]):
    """`torch.compile(model, backend="anvil")`: each graph dynamo captures runs in anvil; a graph
    anvil cannot take (export or session creation fails) runs in PyTorch, with a warning."""
    consts = {i: t for i, t in enumerate(example_inputs) if isinstance(t, torch.nn.Parameter)}
    try:
        lifted = _Lifted(gm, consts, len(example_inputs))
        free = [t for i, t in enumerate(example_inputs) if i not in consts]
        opt = OptimizedModule(lifted, tuple(free), dynamic_batch=False)
        opt.eval()
    except Exception as e:  # anything the export or anvil refuses: PyTorch runs this graph
        warnings.warn(f"anvil: this graph runs in PyTorch ({type(e).__name__}: {e})")
        return gm.forward

    def run(*args):
        params = [args[i] for i in consts]
        if any(p is not consts[i] for p, i in zip(params, consts)):
            # another set of parameters than the one compiled: PyTorch runs it
            return gm(*args)
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad
                                           for a in args):
            return gm(*args)
        out = opt(*[a for i, a in enumerate(args) if i not in consts])
        return out if isinstance(out, tuple) else (out,)

    return run


def _register() -> None:
    """Registers the backend by name for a source-tree import too (an installed package also
    declares it as a `torch_dynamo_backends` entry point)."""
    try:
        from torch._dynamo import list_backends, register_backend
        if "anvil" not in list_backends(exclude_tags=()):
            register_backend(dynamo_backend, name="anvil")
    except Exception:  # an older torch without these: torch.compile(backend=dynamo_backend)
        pass


_register()
