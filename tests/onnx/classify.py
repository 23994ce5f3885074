#!/usr/bin/env python3
"""Sorts the official ONNX backend node tests into the ones anvil's conformance run leaves out and
why, by reading each test's model (its ops, domains and value types), not by picking names.

Usage (with the project's venv, onnx==1.22.0):
    .venv/bin/python tests/onnx/classify.py [NODE_DIR] [OUT_TSV]

NODE_DIR defaults to the node suite inside the installed onnx package, OUT_TSV to excluded.tsv
next to this script. Output: one line per excluded test, "name<TAB>category<TAB>detail", sorted by
name, after a '#' header. The categories, checked in this order (the first that applies wins):

    domain    a node of a non-default domain (ai.onnx.ml, ai.onnx.preview.training, ...):
              anvil imports the default ONNX domain only
    training  training-only computation: test names containing "_training" (BatchNormalization
              and Dropout in training mode), Dropout fed a training_mode input; the optimizers
              and Gradient are in the preview.training domain (caught above). The loss functions
              SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss stay in the run: their forward
              computation is an ordinary default-domain op that anvil implements
    sequence  a sequence-typed value (graph input/output, value_info) or a Sequence* /
              SplitToSequence / ConcatFromSequence node
    optional  an optional-typed value or an Optional* node
    string    a string tensor anywhere (inputs, outputs, initializers, Constant attributes) or a
              string-processing op (StringNormalizer, RegexFullMatch, StringSplit, StringConcat)
    float8    a float8 element type (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0)
    subbyte   a 4- or 2-bit element type (float4e2m1, int4, uint4, int2, uint2)

Subgraphs (If / Loop / Scan bodies) are searched too. Everything not listed is part of the
conformance run."""

import os
import sys

import onnx
from onnx import TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_NODE_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")

FLOAT8 = {
    TensorProto.FLOAT8E4M3FN,
    TensorProto.FLOAT8E4M3FNUZ,
    TensorProto.FLOAT8E5M2,
    TensorProto.FLOAT8E5M2FNUZ,
    TensorProto.FLOAT8E8M0,
}
SUBBYTE = {
    TensorProto.FLOAT4E2M1,
    TensorProto.INT4,
    TensorProto.UINT4,
    TensorProto.INT2,
    TensorProto.UINT2,
}
SEQUENCE_OPS = {"SplitToSequence", "ConcatFromSequence"}
STRING_OPS = {"StringNormalizer", "RegexFullMatch", "StringSplit", "StringConcat"}
DEFAULT_DOMAINS = {"", "ai.onnx"}


class Facts:
    """What one model contains, gathered over the main graph and every subgraph."""

    def __init__(self):
        self.ops = set()  # (domain, op_type)
        self.elem_types = set()  # tensor element types seen anywhere
        self.kinds = set()  # "sequence", "optional", "map", "sparse" value types seen
        self.dropout_training = False


def scan_type(tp, facts):
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        facts.elem_types.add(tp.tensor_type.elem_type)
    elif which == "sparse_tensor_type":
        facts.kinds.add("sparse")
        facts.elem_types.add(tp.sparse_tensor_type.elem_type)
    elif which == "sequence_type":
        facts.kinds.add("sequence")
        scan_type(tp.sequence_type.elem_type, facts)
    elif which == "optional_type":
        facts.kinds.add("optional")
        scan_type(tp.optional_type.elem_type, facts)
    elif which == "map_type":
        facts.kinds.add("map")
        facts.elem_types.add(tp.map_type.key_type)
        scan_type(tp.map_type.value_type, facts)


def scan_graph(g, facts):
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        scan_type(vi.type, facts)
    for t in g.initializer:
        facts.elem_types.add(t.data_type)
    for n in g.node:
        facts.ops.add((n.domain, n.op_type))
        if n.op_type == "Dropout" and n.domain in DEFAULT_DOMAINS and len(n.input) > 2 and n.input[2]:
            facts.dropout_training = True
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                facts.elem_types.add(a.t.data_type)
            elif a.type == onnx.AttributeProto.TENSORS:
                facts.elem_types.update(t.data_type for t in a.tensors)
            elif a.type in (onnx.AttributeProto.STRING, onnx.AttributeProto.STRINGS):
                # string attributes are ordinary (modes, names); string *values* come via
                # Constant's value_string(s)
                if n.op_type == "Constant" and a.name in ("value_string", "value_strings"):
                    facts.elem_types.add(TensorProto.STRING)
            elif a.type == onnx.AttributeProto.GRAPH:
                scan_graph(a.g, facts)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    scan_graph(sg, facts)


def classify(name, model):
    """(category, detail) for an excluded test, or None if it belongs to the conformance run."""
    f = Facts()
    scan_graph(model.graph, f)
    foreign = sorted(f"{d}::{o}" for d, o in f.ops if d not in DEFAULT_DOMAINS)
    if foreign:
        return "domain", ", ".join(foreign)
    ops = {o for _, o in f.ops}
    if "_training" in name:
        return "training", "training-mode test"
    if f.dropout_training:
        return "training", "Dropout with a training_mode input"
    seq_ops = sorted(o for o in ops if o.startswith("Sequence") or o in SEQUENCE_OPS)
    if "sequence" in f.kinds or seq_ops:
        return "sequence", ", ".join(seq_ops) if seq_ops else "sequence-typed value"
    opt_ops = sorted(o for o in ops if o.startswith("Optional"))
    if "optional" in f.kinds or opt_ops:
        return "optional", ", ".join(opt_ops) if opt_ops else "optional-typed value"
    if TensorProto.STRING in f.elem_types or ops & STRING_OPS:
        str_ops = sorted(ops & STRING_OPS)
        return "string", ", ".join(str_ops) if str_ops else "string tensor"
    if f.elem_types & FLOAT8:
        return "float8", ", ".join(sorted(TensorProto.DataType.Name(t) for t in f.elem_types & FLOAT8))
    if f.elem_types & SUBBYTE:
        return "subbyte", ", ".join(sorted(TensorProto.DataType.Name(t) for t in f.elem_types & SUBBYTE))
    if f.kinds & {"map", "sparse"}:
        return "domain", "map / sparse value types"
    return None


def main():
    node_dir = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_NODE_DIR
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "excluded.tsv")
    rows = []
    counts = {}
    total = 0
    for name in sorted(os.listdir(node_dir)):
        path = os.path.join(node_dir, name, "model.onnx")
        if not os.path.isfile(path):
            continue
        total += 1
        c = classify(name, onnx.load(path, load_external_data=False))
        if c:
            rows.append((name, c[0], c[1]))
            counts[c[0]] = counts.get(c[0], 0) + 1
    with open(out, "w") as fh:
        fh.write("# Written by tests/onnx/classify.py from the onnx %s node suite: %d tests, %d excluded "
                 "(%s).\n" % (onnx.__version__, total, len(rows),
                              ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))))
        fh.write("# name\tcategory\tdetail\n")
        for r in rows:
            fh.write("\t".join(r) + "\n")
    print(f"{total} tests, {len(rows)} excluded, {total - len(rows)} in the run:",
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
