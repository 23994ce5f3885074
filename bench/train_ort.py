"""Training against ONNX Runtime training (onnxruntime-training-cpu): same ONNX, same batch.

    scripts/setup_ort_training.sh                  # once: .venv-ort-train with ORT training
    .venv-ort-train/bin/python bench/train_ort.py --threads 1,2 --rounds 3
    .venv-ort-train/bin/python bench/train_ort.py --threads 1 --only mlp

    .venv/bin/python bench/train_ort.py --export DIR   # the ONNX models and batches only
    .venv-ort-train/bin/python bench/train_ort.py --models DIR --threads 1,2

The models are train_torch.py's timing rows: SOL's 3-layer MLP of width 4096 at batch 64 (the ONNX
written by hand, Gemm + Relu), ResNet-18 at 64x64 batch 16 (torchvision, `torch.onnx.export` in
eval mode) and BERT L4/H512 with a 2-class head at sequence 128, batch 8 (transformers, dropout
off). onnxruntime-training replaces the inference package's `onnxruntime` module and needs no
torch, so it lives in a venv of its own (scripts/setup_ort_training.sh); the export needs torch
and runs in the project's .venv: `--export DIR` writes DIR/<model>.onnx and DIR/<model>.npz
(the inputs and `labels`, one batch). Without `--models` the ORT run calls that export itself
with --export-python (default .venv/bin/python) into a temporary folder.

ORT side: `onnxruntime.training.artifacts.generate_artifacts` with every trainable float
initializer in requires_grad (BatchNormalization's running mean and variance excluded), loss
CrossEntropyLoss (SoftmaxCrossEntropyLoss, mean, on the first output), optimizer SGD (ORT's
SGDOptimizerV2: w -= lr * g, no momentum or weight decay) or AdamW; then CheckpointState, Module
and Optimizer with SessionOptions(intra_op_num_threads=T, inter_op_num_threads=1), and a step
is `module(*inputs, labels)`, `optimizer.step()`, `module.lazy_reset_grad()`: the median of 20
steps after 3 warm-up steps (a fresh Module from the checkpoint each round). ORT's copy of the
ONNX differs in two ways that keep the model's math (see ort_model): each BatchNormalization
gets running statistics of its own, and LayerNormalization its optional saved-statistics outputs.

anvil side, alternating with ORT, same threads: `anvil train` runs of 25 and 5 epochs (one batch
per epoch), the difference over 20 (session creation not counted), as train_torch.py times it,
with `--no-db` (the built-in rules, no tuning database, as train_torch.py's "anvil" column) and
the same update rule: `--optimizer sgd --lr 0.05` (no momentum) or
`--optimizer adamw --lr 0.001 --weight-decay 0.01` (ORT's AdamW decays the weights after the
Adam update and folds the bias correction into the step size, Hugging Face's adam_mode=1; anvil
decays before it, as PyTorch's: the MLP's step-5 loss is 0.0336 in anvil, 0.0344 in ORT).
Prints a markdown table with ORT/anvil (above 1: anvil is faster), and on stderr, per row, the
loss of step 5 from both, which agree when both train the same graph with the same update (from
the same weights, on the same batch).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")

MODELS = {  # name: (label, batch)
    "mlp": ("MLP 4096x3, batch 64", 64),
    "resnet18": ("ResNet-18 64x64, batch 16", 16),
    "bert": ("BERT L4/H512, seq 128, batch 8", 8),
}

LR = {"sgd": 0.05, "adamw": 0.001}  # AdamW at 0.01 diverges on the MLP
# --no-db: the built-in rules, as train_torch.py's "anvil" column (not the user's tuning database)
ANVIL_OPT = {"sgd": ["--optimizer", "sgd", "--lr", str(LR["sgd"]), "--no-db"],
             "adamw": ["--optimizer", "adamw", "--lr", str(LR["adamw"]), "--weight-decay",
                       "0.01", "--no-db"]}


# --------------------------------------------------------------------------------------------
# --export DIR: run with the project's .venv (torch, torchvision, transformers)


def export(out, only):
    sys.path.insert(0, BENCH)
    import torch
    import train_torch  # noqa: E402  (exits 0 with a message when torch is missing)

    os.makedirs(out, exist_ok=True)
    names = [only] if only else list(MODELS)
    for name in names:
        path, data = os.path.join(out, name + ".onnx"), os.path.join(out, name + ".npz")
        if name in ("mlp", "resnet18"):
            shape = (64, 4096) if name == "mlp" else (16, 3, 64, 64)
            rng = np.random.default_rng(5)
            x = rng.normal(0, 1, shape).astype(np.float32)
            y = rng.integers(0, 10, shape[0]).astype(np.int64)
            torch.manual_seed(0)
            if name == "mlp":
                train_torch.onnx_of(train_torch.Mlp([4096, 4096, 4096, 4096]), x, path)
            else:
                import torchvision
                train_torch.export_torch(torchvision.models.resnet18(num_classes=10), x, path)
            np.savez(data, x=x, labels=y)
        else:  # as train_torch.bert_speed exports it
            from transformers import BertConfig, BertForSequenceClassification
            cfg = BertConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                             intermediate_size=2048, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0, num_labels=2,
                             attn_implementation="eager")
            torch.manual_seed(0)
            model = BertForSequenceClassification(cfg).eval()
            rng = np.random.default_rng(6)
            ids = rng.integers(0, cfg.vocab_size, (8, 128)).astype(np.int64)
            mask = np.ones((8, 128), np.int64)
            y = rng.integers(0, 2, 8).astype(np.int64)
            torch.onnx.export(model, (torch.from_numpy(ids), torch.from_numpy(mask)), path,
                              dynamo=False, do_constant_folding=False,
                              input_names=["input_ids", "attention_mask"],
                              output_names=["logits"],
                              dynamic_axes={"input_ids": {0: "N"}, "attention_mask": {0: "N"}},
                              opset_version=17)
            np.savez(data, input_ids=ids, attention_mask=mask, labels=y)
        print(f"wrote {path} and {data}", flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# the timing: run with .venv-ort-train (onnxruntime-training-cpu, onnx, numpy)


def import_ort_training():
    """onnxruntime.training's __init__ imports its torch-based parts (ORTModule, the FP16
    optimizer wrappers) and fails without torch; the on-device training API (artifacts, api)
    needs none, so the package is registered without running its __init__."""
    import importlib.util
    import types
    try:
        from onnxruntime.training import api, artifacts  # noqa: F401
    except ImportError:
        spec = importlib.util.find_spec("onnxruntime.training")
        if spec is None:
            raise
        for k in [k for k in sys.modules if k.startswith("onnxruntime.training")]:
            del sys.modules[k]
        pkg = types.ModuleType("onnxruntime.training")
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__spec__ = spec
        sys.modules["onnxruntime.training"] = pkg
    from onnxruntime.training import api, artifacts, onnxblock
    import onnxruntime
    onnxruntime.set_default_logger_severity(3)  # errors only (not the shape-merge warnings)
    return api, artifacts, onnxblock


def ort_model(path):
    """The ONNX for ORT, and its trainable float initializers.

    ORT's training graph turns BatchNormalization into its training-mode BatchNormInternal
    (batch statistics, as `anvil train` and PyTorch's train mode). torch.onnx.export
    deduplicates equal initializers, so a fresh ResNet's running means and variances are
    Identity copies of the BN biases (zeros) and scales (ones), and ORT writes the updated
    running statistics in place over that shared buffer: the scales and biases of every BN
    sharing it changed during the forward (step-1 loss 2.207 against PyTorch's and anvil's
    2.218). So each BN gets running statistics of its own (copies, left out of requires_grad).
    LayerNormalization gets its optional Mean and InvStdDev outputs, which ORT's gradient builder
    reads (without them it fails: GradientBuilderBase::O ... i < node_->OutputDefs().size())."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    inits = {t.name: t for t in m.graph.initializer}
    ident = {n.output[0]: n.input[0] for n in m.graph.node if n.op_type == "Identity"}
    running = set()
    for j, n in enumerate(m.graph.node):
        if n.op_type != "BatchNormalization":
            continue
        for k in (3, 4):
            src = n.input[k]
            while src in ident:
                src = ident[src]
            if src in inits:
                name = f"{n.name or n.output[0]}__running_{'mean' if k == 3 else 'var'}_{j}"
                m.graph.initializer.append(
                    numpy_helper.from_array(numpy_helper.to_array(inits[src]).copy(), name))
                n.input[k] = name
            running.add(n.input[k])
    for n in m.graph.node:  # ORT's LayerNormalization gradient reads the saved mean, inv std
        if n.op_type == "LayerNormalization":
            while len(n.output) < 3:
                n.output.append(f"{n.output[0]}__saved{len(n.output)}")
    while True:  # drop the Identity copies nothing reads any more
        used = {i for n in m.graph.node for i in n.input} | {o.name for o in m.graph.output}
        dead = [n for n in m.graph.node if n.op_type == "Identity" and n.output[0] not in used]
        if not dead:
            break
        for n in dead:
            m.graph.node.remove(n)
    if any(not o.type.tensor_type.HasField("shape") for o in m.graph.output):
        # the loss block shapes `labels` after the output's shape: give it the inferred one
        g = onnx.shape_inference.infer_shapes(m).graph
        inferred = {v.name: v for v in list(g.value_info) + list(g.output)
                    if v.type.tensor_type.HasField("shape")}
        for o in m.graph.output:
            if not o.type.tensor_type.HasField("shape") and o.name in inferred:
                o.type.CopyFrom(inferred[o.name].type)
    used = {i for n in m.graph.node for i in n.input}
    trainable = [t.name for t in m.graph.initializer
                 if t.data_type == onnx.TensorProto.FLOAT and t.name in used
                 and t.name not in running]
    return m, trainable


def make_artifacts(path, out, kind):
    api, artifacts, onnxblock = import_ort_training()
    m, trainable = ort_model(path)
    os.makedirs(out, exist_ok=True)
    opt = artifacts.OptimType.SGD if kind == "sgd" else \
        onnxblock.optim.AdamW(eps=1e-8, weight_decay=0.01)  # anvil's eps
    # the gradient builder logs every graph transformer at info level to stderr: to a file
    log = os.path.join(out, "generate_artifacts.log")
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log, "w") as f:
        os.dup2(f.fileno(), 2)
        try:
            artifacts.generate_artifacts(m, requires_grad=trainable,
                                         loss=artifacts.LossType.CrossEntropyLoss,
                                         optimizer=opt, artifact_directory=out)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
    return len(trainable)


def ort_step_ms(art, inputs, threads, kind, steps=20, warmup=3):
    import onnxruntime as ort
    api, _, _ = import_ort_training()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    state = api.CheckpointState.load_checkpoint(os.path.join(art, "checkpoint"))
    # no eval model: only training steps are timed
    module = api.Module(os.path.join(art, "training_model.onnx"), state, None, device="cpu",
                        session_options=so)
    optimizer = api.Optimizer(os.path.join(art, "optimizer_model.onnx"), module)
    optimizer.set_learning_rate(LR[kind])
    module.train()
    feeds = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(inputs[n]))
             for n in module.input_names()]
    times, losses = [], []
    for i in range(warmup + steps):
        t = time.perf_counter()
        loss = module(*feeds)
        optimizer.step()
        module.lazy_reset_grad()
        if i >= warmup:
            times.append((time.perf_counter() - t) * 1e3)
        losses.append(float(loss.numpy() if hasattr(loss, "numpy") else loss))
    if not all(np.isfinite(losses)):
        raise RuntimeError(f"ORT losses not finite: {losses}")
    return statistics.median(times), losses


def anvil_step_ms(anvil, model, data, batch, threads, extra):
    """train_torch.anvil_step_ms (copied: train_torch imports torch, which this venv lacks),
    and the loss of the 5th step (the 5-epoch run's last and only batch)."""
    def run(epochs):
        r = subprocess.run([anvil, "train", model, "--data", data, "--epochs", str(epochs),
                            "--batch", str(batch), "--threads", str(threads), "--json", "-q",
                            "-o", model + ".out.onnx", *extra], capture_output=True, text=True,
                           check=True)
        return json.loads(r.stdout)
    long, short = run(25), run(5)
    return (long["seconds"] - short["seconds"]) / 20 * 1e3, short["train_loss"]


def speed(a, models):
    kind = a.optimizer
    print(f"optimizer: {kind} (ORT {'SGDOptimizerV2' if kind == 'sgd' else 'AdamW'}; anvil "
          f"{' '.join(ANVIL_OPT[kind])})", flush=True)
    rows, notes = [], []
    names = [a.only] if a.only else list(MODELS)
    for name in names:
        label, batch = MODELS[name]
        path, data = os.path.join(models, name + ".onnx"), os.path.join(models, name + ".npz")
        art = os.path.join(models, f"{name}_ort_{kind}")
        try:
            n = make_artifacts(path, art, kind)
            inputs = dict(np.load(data))
            ort_step_ms(art, inputs, 1, kind, steps=1, warmup=0)  # fails here, not mid-table
        except Exception as e:  # noqa: BLE001 -- report and go on with the other models
            traceback.print_exc()
            msg = f"{label}: ORT training failed: {type(e).__name__}: {str(e).strip()[:600]}"
            print(msg, file=sys.stderr, flush=True)
            notes.append(msg)
            continue
        print(f"{label}: {n} trainable initializers", file=sys.stderr, flush=True)
        for threads in a.threads:
            av, ov = [], []
            for _ in range(a.rounds):
                ms, anvil_loss5 = anvil_step_ms(a.anvil, path, data, batch, threads,
                                                ANVIL_OPT[kind])
                av.append(ms)
                ms, losses = ort_step_ms(art, inputs, threads, kind)
                ov.append(ms)
            am, om = statistics.median(av), statistics.median(ov)
            rows.append(f"| {label} | {threads} | {am:.2f} | {om:.2f} | {om / am:.2f} |")
            print(f"{label}, {threads} threads: anvil {am:.2f} ms, ORT {om:.2f} ms; loss at "
                  f"step 1: ORT {losses[0]:.5f}, step 5: anvil {anvil_loss5:.5f} ORT "
                  f"{losses[4]:.5f}", file=sys.stderr, flush=True)
    print("| model | threads | anvil ms/step | ORT-training ms/step | ORT/anvil |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(r)
    for n in notes:
        print(f"\n{n}")
    return 1 if notes and not rows else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", metavar="DIR", help="write the ONNX models and batches (needs "
                    "torch: run with .venv/bin/python) and exit")
    ap.add_argument("--models", metavar="DIR", help="models written by --export (default: "
                    "export them now with --export-python into a temporary folder)")
    ap.add_argument("--export-python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=list(MODELS))
    ap.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build-release", "anvil"))
    ap.add_argument("--version-check", action="store_true", help="import the ORT training API, "
                    "print the versions and exit (scripts/setup_ort_training.sh runs it)")
    a = ap.parse_args()
    if a.version_check:
        import onnx
        import onnxruntime
        import_ort_training()
        print(f"onnxruntime {onnxruntime.__version__} (training API importable), onnx "
              f"{onnx.__version__}, numpy {np.__version__}")
        return 0
    if a.export:
        return export(a.export, a.only)
    a.threads = [int(t) for t in a.threads.split(",")]
    try:
        import_ort_training()
    except ImportError as e:
        print(f"skipped: onnxruntime-training is not importable ({e}); "
              f"scripts/setup_ort_training.sh installs it into .venv-ort-train")
        return 0
    if a.models:
        return speed(a, a.models)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [a.export_python, os.path.abspath(__file__), "--export", tmp]
        if a.only:
            cmd += ["--only", a.only]
        subprocess.run(cmd, check=True, stdout=sys.stderr)
        return speed(a, tmp)


if __name__ == "__main__":
    sys.exit(main())
