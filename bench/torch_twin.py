#!/usr/bin/env python3
"""PyTorch twins of ONNX models for bench/peer.py: same architecture, same (seeded) weights.

Usage: torch_twin.py CASE_DIR [CASE_DIR ...]   (builds and checks each twin; exit 1 on a mismatch)

A twin is a torch.fx.GraphModule made by onnx2torch.convert from the model file itself, so every
weight is the ONNX initializer (a buffer or parameter of the module) and every node becomes the
torch module a user would write for it (Conv -> nn.Conv2d, BatchNormalization -> nn.BatchNorm2d in
eval mode, LayerNormalization -> nn.LayerNorm, Gemm -> nn.Linear, ...). onnx2torch lacks a few
operators the zoo uses; this file registers converters for them with onnx2torch's own registry:
  - Trilu   -> torch.triu / torch.tril;
  - LSTM    -> nn.LSTM (ONNX gate order i, o, f, c reordered to PyTorch's i, f, g, o; Wb and Rb
               become bias_ih and bias_hh), outputs re-laid out as ONNX's Y [S, dirs, B, H];
  - Loop    -> a Python while loop over the body, itself converted to a GraphModule;
  - If      -> a Python if choosing between the two converted branches.
Subgraphs may read outer-scope values (the zoo's Loop body reads its weights from the main graph):
those names become extra inputs of the subgraph's GraphModule and extra arguments of the Loop/If
node, so onnx2torch wires them like any other input.

A twin is trusted only after check_twin: its outputs on the case's test_data_set_0 must match the
stored ONNX Runtime outputs within rtol 1e-3 and atol 1e-4 * max|expected| (the zoo tolerance).
"""

import keyword
import os
import sys

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper
from torch import nn

import onnx2torch
from onnx2torch.node_converters.registry import add_converter
from onnx2torch.onnx_graph import OnnxGraph
from onnx2torch.utils.common import OnnxMapping, OnnxToTorchModule, OperationConverterResult

RTOL = 1e-3
ATOL_SCALE = 1e-4


def versions():
    """'torch X, onnx2torch Y': what built the twins."""
    from importlib import metadata
    return f"torch {torch.__version__}, onnx2torch {metadata.version('onnx2torch')}"


# ---- converters onnx2torch lacks -----------------------------------------------------------------


class Trilu(nn.Module, OnnxToTorchModule):
    def __init__(self, upper):
        super().__init__()
        self.upper = upper

    def forward(self, x, k=None):
        diagonal = 0 if k is None else int(k)
        return torch.triu(x, diagonal) if self.upper else torch.tril(x, diagonal)


@add_converter(operation_type="Trilu", version=14)
def _convert_trilu(node, graph):
    return OperationConverterResult(
        torch_module=Trilu(bool(node.attributes.get("upper", 1))),
        onnx_mapping=OnnxMapping(inputs=node.input_values, outputs=node.output_values))


class LSTM(nn.Module, OnnxToTorchModule):
    """nn.LSTM with ONNX's output layout: Y [S, dirs, B, H], Y_h and Y_c [dirs, B, H]."""

    def __init__(self, w, r, b, hidden, bidirectional):
        super().__init__()
        dirs, _, cin = w.shape
        self.hidden = hidden
        self.dirs = dirs
        self.lstm = nn.LSTM(cin, hidden, num_layers=1, bias=b is not None,
                            bidirectional=bidirectional)
        # ONNX stacks the gates i, o, f, c; PyTorch i, f, g (= c), o.
        order = torch.cat([torch.arange(g * hidden, (g + 1) * hidden) for g in (0, 2, 3, 1)])
        with torch.no_grad():
            for d in range(dirs):
                sfx = "_reverse" if d == 1 else ""
                getattr(self.lstm, "weight_ih_l0" + sfx).copy_(w[d][order])
                getattr(self.lstm, "weight_hh_l0" + sfx).copy_(r[d][order])
                if b is not None:
                    getattr(self.lstm, "bias_ih_l0" + sfx).copy_(b[d, :4 * hidden][order])
                    getattr(self.lstm, "bias_hh_l0" + sfx).copy_(b[d, 4 * hidden:][order])

    def forward(self, x, initial_h=None, initial_c=None):
        state = None
        if initial_h is not None or initial_c is not None:
            zeros = x.new_zeros(self.dirs, x.shape[1], self.hidden)
            state = (zeros if initial_h is None else initial_h,
                     zeros if initial_c is None else initial_c)
        y, (h, c) = self.lstm(x, state)
        y = y.view(x.shape[0], x.shape[1], self.dirs, self.hidden).permute(0, 2, 1, 3)
        return y, h, c


@add_converter(operation_type="LSTM", version=7)
@add_converter(operation_type="LSTM", version=14)
def _convert_lstm(node, graph):
    a = node.attributes
    name = node.unique_name
    unsupported = [k for k in ("activations", "clip", "activation_alpha", "activation_beta")
                   if k in a]
    if a.get("layout", 0) != 0 or a.get("input_forget", 0) != 0 or unsupported:
        raise NotImplementedError(f"LSTM {name}: only the default activations, layout 0 and "
                                  f"input_forget 0 have a twin (has {unsupported or 'layout'})")
    ins = list(node.input_values) + [""] * (8 - len(node.input_values))
    for i, what in ((1, "W"), (2, "R")):
        if ins[i] not in graph.initializers:
            raise NotImplementedError(f"LSTM {name}: {what} must be an initializer")
    if ins[3] and ins[3] not in graph.initializers:
        raise NotImplementedError(f"LSTM {name}: B must be an initializer")
    if ins[4] or ins[7]:
        raise NotImplementedError(f"LSTM {name}: sequence_lens and P (peepholes) are not "
                                  "supported by the twin")
    w = graph.initializers[ins[1]].to_torch()
    r = graph.initializers[ins[2]].to_torch()
    b = graph.initializers[ins[3]].to_torch() if ins[3] else None
    direction = a.get("direction", "forward")
    if isinstance(direction, bytes):
        direction = direction.decode()
    if direction == "reverse":
        raise NotImplementedError(f"LSTM {name}: direction 'reverse' has no twin")
    module = LSTM(w, r, b, int(a["hidden_size"]), direction == "bidirectional")
    return OperationConverterResult(
        torch_module=module,
        onnx_mapping=OnnxMapping(inputs=(ins[0], ins[5], ins[6]), outputs=node.output_values))


def _outer_names(graph):
    """Names a subgraph reads from enclosing scopes, in first-use order."""
    local = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    outer = []
    for n in graph.node:
        used = list(n.input)
        for attr in n.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                used += _outer_names(attr.g)
            for g in attr.graphs:
                used += _outer_names(g)
        for name in used:
            if name and name not in local and name not in outer:
                outer.append(name)
        local.update(n.output)
    return outer


def _value_info(name, parent):
    """A ValueInfoProto for an outer-scope name: its type from the parent graph when known."""
    for t in parent.proto.initializer:
        if t.name == name:
            return helper.make_tensor_value_info(name, t.data_type, list(t.dims))
    if name in parent.value_info:
        return parent.value_info[name]
    return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)


def _convert_subgraph(graph, outer, parent, opsets):
    """The subgraph as a GraphModule: (its inputs..., outer values...) -> tuple of its outputs."""
    g = onnx.GraphProto()
    g.CopyFrom(graph)
    for name in outer:
        g.input.append(_value_info(name, parent))
    model = helper.make_model(g, opset_imports=opsets)
    model.ir_version = 8
    _normalise(model.graph)
    return convert_model(model, always_tuple=True)


class Loop(nn.Module, OnnxToTorchModule):
    """ONNX Loop: M and cond given; carried values and scan outputs (stacked on axis 0)."""

    def __init__(self, body, carried, scans):
        super().__init__()
        self.body = body
        self.carried = carried
        self.scans = scans

    def forward(self, trip_count, cond, *args):
        values = list(args[:self.carried])
        outer = args[self.carried:]
        scans = [[] for _ in range(self.scans)]
        keep = bool(cond)
        i = 0
        trips = int(trip_count)
        while i < trips and keep:
            out = self.body(torch.tensor(i, dtype=torch.int64), torch.tensor(keep), *values,
                            *outer)
            keep = bool(out[0])
            values = list(out[1:1 + self.carried])
            for s, v in zip(scans, out[1 + self.carried:]):
                s.append(v)
            i += 1
        return tuple(values) + tuple(torch.stack(s) for s in scans)


@add_converter(operation_type="Loop", version=11)
@add_converter(operation_type="Loop", version=13)
@add_converter(operation_type="Loop", version=16)
def _convert_loop(node, graph):
    ins = list(node.input_values)
    if len(ins) < 2 or not ins[0] or not ins[1]:
        raise NotImplementedError(f"Loop {node.unique_name}: the twin needs both the trip count "
                                  "and the condition")
    body = next(a.g for a in node.proto.attribute if a.name == "body")
    outer = _outer_names(body)
    carried = len(ins) - 2
    scans = len(body.output) - 1 - carried
    module = Loop(_convert_subgraph(body, outer, graph, _OPSETS[-1]), carried, scans)
    return OperationConverterResult(
        torch_module=module,
        onnx_mapping=OnnxMapping(inputs=tuple(ins) + tuple(outer), outputs=node.output_values))


class If(nn.Module, OnnxToTorchModule):
    def __init__(self, then_gm, then_idx, else_gm, else_idx, single):
        super().__init__()
        self.then_branch = then_gm
        self.else_branch = else_gm
        self.then_idx = then_idx
        self.else_idx = else_idx
        self.single = single

    def forward(self, cond, *outer):
        if bool(cond):
            out = self.then_branch(*[outer[i] for i in self.then_idx])
        else:
            out = self.else_branch(*[outer[i] for i in self.else_idx])
        return out[0] if self.single else out


@add_converter(operation_type="If", version=11)
@add_converter(operation_type="If", version=13)
@add_converter(operation_type="If", version=16)
def _convert_if(node, graph):
    branches = {a.name: a.g for a in node.proto.attribute}
    then_g, else_g = branches["then_branch"], branches["else_branch"]
    then_outer, else_outer = _outer_names(then_g), _outer_names(else_g)
    outer = then_outer + [n for n in else_outer if n not in then_outer]
    module = If(_convert_subgraph(then_g, then_outer, graph, _OPSETS[-1]),
                [outer.index(n) for n in then_outer],
                _convert_subgraph(else_g, else_outer, graph, _OPSETS[-1]),
                [outer.index(n) for n in else_outer], len(node.output_values) == 1)
    return OperationConverterResult(
        torch_module=module,
        onnx_mapping=OnnxMapping(inputs=(node.input_values[0],) + tuple(outer),
                                 outputs=node.output_values))


# ---- whole models ------------------------------------------------------------------------------

# The opset imports of the model being converted, innermost last, for the subgraph converters
# (a converter sees the node and its graph, not the model).
_OPSETS = []


def _normalise(graph):
    """Prepares a graph and its subgraphs for onnx2torch, in place, computing the same thing.

    Constant nodes holding a tensor become initializers (exporters such as paddle2onnx store every
    weight that way, and onnx2torch's Conv and friends read weights only from initializers); a
    node named like a Python keyword ("if", "for") is renamed, since fx uses node names as
    attribute names in the code it generates."""
    kept = []
    for n in graph.node:
        for attr in n.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _normalise(attr.g)
            for g in attr.graphs:
                _normalise(g)
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.attribute) == 1 \
                and n.attribute[0].name == "value":
            t = onnx.TensorProto()
            t.CopyFrom(n.attribute[0].t)
            t.name = n.output[0]
            graph.initializer.append(t)
            continue
        if keyword.iskeyword(n.name) or keyword.iskeyword(n.name.replace(".", "_")):
            n.name = f"{n.name}_node"
        kept.append(n)
    del graph.node[:]
    graph.node.extend(kept)


def convert_model(model, always_tuple=False):
    """onnx2torch.convert, with one value per graph output.

    onnx2torch returns one entry per *node* that produces a graph output, so a node with several
    outputs (Loop, Split, ...) would come back as a tuple inside the tuple; this rebuilds the
    output of the fx graph so it holds exactly the graph's outputs, in order."""
    _OPSETS.append(list(model.opset_import))
    try:
        gm = onnx2torch.convert(model)
    finally:
        _OPSETS.pop()
    og = OnnxGraph(model.graph)
    calls = {n.target: n for n in gm.graph.nodes if n.op == "call_module"}
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inits = {t.name for t in model.graph.initializer}
    inputs = [v.name for v in model.graph.input if v.name not in inits]
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = []
    with gm.graph.inserting_before(out_node):
        for name in og.output_values:
            if name in inputs:
                outs.append(places[inputs.index(name)])
                continue
            onnx_node, idx = og.value_as_node_output(name)
            fx_node = calls[onnx_node.unique_name]
            if len(onnx_node.output_values) > 1:
                fx_node = gm.graph.call_function(_getitem, (fx_node, idx))
            outs.append(fx_node)
    result = tuple(outs) if always_tuple or len(outs) > 1 else outs[0]
    out_node.args = (result,)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm.eval()


def _getitem(seq, idx):
    return seq[idx]


def load_twin(model_path):
    """The twin of an ONNX model file and the names of its inputs, in the order it takes them."""
    model = onnx.load(model_path)
    _normalise(model.graph)
    inits = {t.name for t in model.graph.initializer}
    names = [v.name for v in model.graph.input if v.name not in inits]
    return convert_model(model), names


def read_case(case, k=0):
    """(inputs {name: array}, expected outputs [array]) of CASE/test_data_set_k."""
    ddir = os.path.join(case, f"test_data_set_{k}")

    def read(prefix):
        arrays = []
        i = 0
        while os.path.exists(os.path.join(ddir, f"{prefix}_{i}.pb")):
            t = onnx.TensorProto()
            with open(os.path.join(ddir, f"{prefix}_{i}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            arrays.append((t.name, np.asarray(numpy_helper.to_array(t))))
            i += 1
        return arrays
    return dict(read("input")), [a for _, a in read("output")]


def run_twin(twin, names, feeds):
    """Runs the twin on numpy feeds; returns its outputs as a list of tensors."""
    out = twin(*[torch.from_numpy(np.array(feeds[n])) for n in names])
    return list(out) if isinstance(out, (tuple, list)) else [out]


def compare(got, expected):
    """None when every output matches within the zoo tolerance, else what differs."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        g = g.detach().numpy() if isinstance(g, torch.Tensor) else np.asarray(g)
        if g.shape != e.shape:
            return f"output {i}: shape {list(g.shape)}, expected {list(e.shape)}"
        if e.dtype == bool or not np.issubdtype(e.dtype, np.floating):
            if not np.array_equal(g, e):
                return f"output {i}: values differ"
            continue
        e64, g64 = e.astype(np.float64), g.astype(np.float64)
        atol = ATOL_SCALE * float(np.max(np.abs(e64))) if e.size else 0.0
        err = np.abs(g64 - e64)
        bad = err > atol + RTOL * np.abs(e64)
        if bad.any() or np.isnan(g64).any():
            return (f"output {i}: {int(bad.sum())} of {e.size} values off, max |diff| "
                    f"{float(np.nanmax(err)):.3g} (atol {atol:.3g}, rtol {RTOL})")
    return None


def check_twin(twin, names, case):
    """None when the twin reproduces test_data_set_0 of case, else why not."""
    feeds, expected = read_case(case)
    with torch.inference_mode():
        got = run_twin(twin, names, feeds)
    return compare(got, expected)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.splitlines()[2])
        return 0 if argv else 2
    bad = 0
    for case in argv:
        try:
            twin, names = load_twin(os.path.join(case, "model.onnx"))
            why = check_twin(twin, names, case)
        except Exception as e:  # noqa: BLE001 - any conversion failure is reported per model
            why = f"no twin: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
        print(f"{os.path.basename(os.path.normpath(case))}: {why or 'twin matches ORT'}")
        bad += why is not None
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
