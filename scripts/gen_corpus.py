#!/usr/bin/env python3
"""Generates the model corpus: architectures users bring, exported by PyTorch, with ORT data.

Usage: gen_corpus.py [OUTDIR] [--models a,b,...] [--force] [--seed S]
       gen_corpus.py --list

Where gen_zoo.py (tests/models) writes each architecture node by node, this corpus is what a
user hands anvil: torchvision and transformers models exported by torch.onnx.export as they
come, with the exporter's own node patterns. The packages are the optional group in
scripts/requirements-corpus.txt (ANVIL_CORPUS=1 scripts/setup.sh); not needed by CI.

Every model has random weights from a fixed seed: torchvision constructors get weights=None and
weights_backbone=None, transformers models are built from config objects, YOLOv8n from the yaml
ultralytics ships. Nothing is downloaded: torch.hub's download functions raise, the Hugging Face
hub and ultralytics are put offline, and any socket connection to another host raises, so a
model that wanted to fetch anything fails to generate instead.

Export: opset 17, static shapes, batch 1, eval mode, the TorchScript exporter (dynamo=False,
which needs no extra packages). Each model is then loaded by ONNX Runtime, run on seeded inputs,
and its outputs compared with PyTorch's (the export's own check; the largest error relative to
the output's scale goes to the manifest).

OUTDIR (default models/corpus, which gets a .gitignore of '*' so git never sees it) gets one
folder per model in the ONNX backend-test layout that bench/peer.py and tests/tools/run_cases.c
read: model.onnx, test_data_set_0/ (the inputs, ONNX Runtime's outputs with its graph
optimisations off) and tolerance.txt (rtol 1e-3, atol 1e-4 * max|expected|), plus OUTDIR/
manifest.json: per model its source, description, inputs and outputs (name, shape, dtype),
parameter count, and the torch-vs-ORT error. A stamp per model (script hash, seed, versions)
makes a rerun skip models that are up to date.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "models", "corpus")
OPSET = 17
SEED = 20261122

# Offline before transformers is imported: it reads these once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def no_downloads():
    """Makes every download fail: torch.hub's functions raise, and so does any socket connection
    to a non-local address (ultralytics, transformers and the rest fetch through sockets), so a
    model that wanted weights, a config or a font from the network fails to generate."""
    import socket

    import torch.hub

    def refuse(url, *args, **kwargs):
        raise RuntimeError(f"gen_corpus.py downloads nothing (asked for {url})")

    torch.hub.load_state_dict_from_url = refuse
    torch.hub.download_url_to_file = refuse
    connect = socket.socket.connect

    def local_only(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and (host.startswith("127.") or host in ("::1", "localhost")
                                      or self.family == socket.AF_UNIX):
            return connect(self, address)
        raise RuntimeError(f"gen_corpus.py downloads nothing (a connection to {address})")

    socket.socket.connect = local_only


# ---- the models: each builder returns (module, {input name: array}, output names) ----------


def image(rng, hw):
    # Normalised pixels, as a user's preprocessing hands them over: roughly zero mean, unit std.
    return {"input": rng.standard_normal((1, 3, hw, hw)).astype("float32")}


def tv(ctor_name, hw=224, **kw):
    def build(rng):
        import torchvision.models as tvm
        model = getattr(tvm, ctor_name)(weights=None, **kw)
        return model, image(rng, hw), ["output"]
    return build


def tv_seg(ctor_name, hw):
    def build(rng):
        import torch
        import torchvision.models.segmentation as seg

        class Out(torch.nn.Module):
            # The segmentation models return a dict; the exported graph has its "out" tensor.
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]

        model = getattr(seg, ctor_name)(weights=None, weights_backbone=None, num_classes=21)
        return Out(model), image(rng, hw), ["out"]
    return build


def vit_s_16(rng):
    # ViT-S/16 (DeiT-small's shape) through torchvision's VisionTransformer: ViT-B/16 is 17.5
    # GFLOP, minutes per round on two cores for every engine; the small one has the same graph.
    from torchvision.models.vision_transformer import VisionTransformer
    model = VisionTransformer(image_size=224, patch_size=16, num_layers=12, num_heads=6,
                              hidden_dim=384, mlp_dim=1536)
    # torchvision zero-initialises the classifier (fine-tuning starts there), which would make
    # every output 0 and the output checks vacuous.
    import torch
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    return model, image(rng, 224), ["output"]


def ssdlite_head(rng):
    # SSDlite320-MobileNetV3-Large without its post-processing (anchor decoding and NMS are
    # data-dependent Python): backbone features into the box regression and classification heads.
    import torch
    import torchvision.models.detection as det

    class Raw(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.backbone, self.head = m.backbone, m.head

        def forward(self, x):
            feats = list(self.backbone(x).values())
            out = self.head(feats)
            return out["bbox_regression"], out["cls_logits"]

    model = det.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
                                              num_classes=91)
    return Raw(model), image(rng, 320), ["bbox_regression", "cls_logits"]


def yolov8n(rng):
    # Ultralytics YOLOv8n built from the yolov8n.yaml that ships in the package (no weights file:
    # DetectionModel from a yaml never downloads), with the Detect head in export mode as
    # ultralytics' own ONNX export sets it: one (1, 84, 8400) tensor of boxes and class scores.
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics.nn.tasks import DetectionModel
    model = DetectionModel("yolov8n.yaml", ch=3, nc=80, verbose=False)
    for m in model.modules():
        if hasattr(m, "export"):
            m.export, m.format = True, "onnx"
    return model, {"images": rng.uniform(0.0, 1.0, (1, 3, 640, 640)).astype("float32")}, \
        ["output0"]


class HfOutputs:
    """Wraps a transformers model so that forward takes positional tensors and returns a tuple."""

    @staticmethod
    def wrap(model, keys):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, *args):
                out = self.m(**dict(zip(self.names, args)), return_dict=True)
                return tuple(out[k] for k in keys)

        return Wrapped()


def tokens(rng, vocab, seq, names):
    feeds = {"input_ids": rng.integers(0, vocab, (1, seq)).astype("int64")}
    if "attention_mask" in names:
        feeds["attention_mask"] = np.ones((1, seq), dtype=np.int64)
    if "token_type_ids" in names:
        feeds["token_type_ids"] = np.zeros((1, seq), dtype=np.int64)
    return feeds


def hf(model, feeds, keys):
    w = HfOutputs.wrap(model, keys)
    w.names = list(feeds)
    return w, feeds, keys


def bert_small(rng):
    # google/bert_uncased_L-4_H-512_A-8's shape.
    from transformers import BertConfig, BertModel
    cfg = BertConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                     intermediate_size=2048, attn_implementation="eager")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    return hf(BertModel(cfg), tokens(rng, cfg.vocab_size, 128, names),
              ["last_hidden_state", "pooler_output"])


def bert_base(rng):
    # bert-base-uncased's shape: 12 layers, hidden 768, 12 heads, at sequence 128.
    from transformers import BertConfig, BertModel
    cfg = BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, attn_implementation="eager")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    return hf(BertModel(cfg), tokens(rng, cfg.vocab_size, 128, names),
              ["last_hidden_state", "pooler_output"])


def gpt2_6l(rng):
    # distilgpt2's shape: 6 layers of GPT-2 small with the tied language-model head, no cache.
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=6, n_embd=768, n_head=12, use_cache=False,
                     attn_implementation="eager")
    # With an attention mask, as a user exports it: without one, transformers derives packed
    # sequences from position ids with torch.diff, which the exporter lacks.
    names = ["input_ids", "attention_mask"]
    return hf(GPT2LMHeadModel(cfg), tokens(rng, cfg.vocab_size, 128, names), ["logits"])


def whisper_tiny_encoder(rng):
    # Whisper tiny's encoder on 10 s of audio: 80 mel bins x 1000 frames (two convolutions, the
    # second with stride 2, then 500 positions through 4 layers).
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    cfg = WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                        encoder_ffn_dim=1536, num_mel_bins=80, max_source_positions=500,
                        attn_implementation="eager")
    feeds = {"input_features": rng.standard_normal((1, 80, 1000)).astype("float32")}
    return hf(WhisperEncoder(cfg), feeds, ["last_hidden_state"])


def t5_small_encoder(rng):
    # t5-small's encoder: 6 layers, d_model 512, relative position buckets, RMS-style LayerNorm.
    from transformers import T5Config, T5EncoderModel
    cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
                   use_cache=False, attn_implementation="eager")
    names = ["input_ids", "attention_mask"]
    return hf(T5EncoderModel(cfg), tokens(rng, cfg.vocab_size, 128, names),
              ["last_hidden_state"])


# name: (builder, source, description)
MODELS = {
    "efficientnet_b0": (tv("efficientnet_b0"), "torchvision",
                        "EfficientNet-B0: MBConv, SiLU, squeeze-excitation, 224x224"),
    "mobilenet_v3_small": (tv("mobilenet_v3_small"), "torchvision",
                           "MobileNetV3-Small: hardswish, hardsigmoid SE, 224x224"),
    "regnet_y_400mf": (tv("regnet_y_400mf"), "torchvision",
                       "RegNetY-400MF: grouped 3x3 conv, SE, 224x224"),
    "shufflenet_v2_x1_0": (tv("shufflenet_v2_x1_0"), "torchvision",
                           "ShuffleNetV2 1.0x: channel shuffle (Reshape/Transpose), split"),
    "convnext_tiny": (tv("convnext_tiny"), "torchvision",
                      "ConvNeXt-Tiny: 7x7 depthwise conv, LayerNorm on NHWC, GELU, 224x224"),
    "deeplabv3_mbv3": (tv_seg("deeplabv3_mobilenet_v3_large", 224), "torchvision",
                       "DeepLabV3-MobileNetV3-Large segmentation: dilated conv, ASPP, Resize"),
    "lraspp_mbv3": (tv_seg("lraspp_mobilenet_v3_large", 224), "torchvision",
                    "LR-ASPP-MobileNetV3-Large segmentation: pooled attention, Resize"),
    "vit_s_16": (vit_s_16, "torchvision",
                 "ViT-S/16 (torchvision VisionTransformer, 12 layers, 384 wide), 224x224"),
    "ssdlite320_head": (ssdlite_head, "torchvision",
                        "SSDlite320-MobileNetV3-Large backbone + detection heads, no NMS"),
    "yolov8n": (yolov8n, "ultralytics",
                "YOLOv8n detector from its yaml (C2f, SPPF, DFL head in export mode), 640x640"),
    "bert_small": (bert_small, "transformers",
                   "BERT L4/H512/A8 (BertModel from a config), sequence 128"),
    "bert_base": (bert_base, "transformers",
                  "BERT-base L12/H768/A12 (BertModel from a config), sequence 128"),
    "gpt2_6l": (gpt2_6l, "transformers",
                "GPT-2 6 layers x 768 with the LM head (distilgpt2's shape), sequence 128"),
    "whisper_tiny_enc": (whisper_tiny_encoder, "transformers",
                         "Whisper tiny encoder, 80 mel x 1000 frames"),
    "t5_small_enc": (t5_small_encoder, "transformers",
                     "T5-small encoder (T5EncoderModel from a config), sequence 128"),
}

# ---- export and check ----------------------------------------------------------------------


def versions():
    from importlib import metadata
    out = {}
    for p in ("torch", "torchvision", "transformers", "ultralytics", "onnx", "onnxruntime"):
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def stamp_of(name, seed):
    with open(os.path.abspath(__file__), "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:16]
    return json.dumps({"name": name, "seed": seed, "script": h, **versions()}, sort_keys=True)


def tensor_info(name, arr):
    info = {"name": name, "shape": list(arr.shape), "dtype": str(arr.dtype)}
    if arr.dtype.kind == "f":
        info["max_abs"] = float(np.max(np.abs(arr))) if arr.size else 0.0
    return info


def calibrate_batchnorm(model, feeds, rng):
    """Gives BatchNorm layers the statistics of a trained network.

    A fresh BatchNorm in eval mode is the identity (mean 0, variance 1), so a randomly initialised
    deep CNN's activations shrink or grow layer by layer (EfficientNet-B0's logits come out near
    1e-14), which no trained model does and which makes output checks vacuous. So: scale and shift
    drawn at random (BN folding must carry them), then running statistics accumulated over a
    few random batches in training mode, as a calibration pass would."""
    import torch
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batches
        with torch.no_grad():
            m.weight.uniform_(0.5, 1.5)
            m.bias.normal_(0.0, 0.1)
    model.train()
    with torch.no_grad():
        for _ in range(4):
            batch = [torch.from_numpy(rng.standard_normal((2,) + a.shape[1:]).astype(a.dtype))
                     for a in feeds.values()]
            model(*batch)
    model.eval()


def export(name, outdir, seed):
    """Builds, exports and checks one model; returns its manifest entry."""
    import onnx
    import onnxruntime as ort
    import torch
    from onnx import numpy_helper

    build, source, desc = MODELS[name]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    t0 = time.monotonic()
    model, feeds, out_names = build(rng)
    calibrate_batchnorm(model, feeds, np.random.default_rng(seed + 1))
    model.eval()
    in_names = list(feeds)
    args = tuple(torch.from_numpy(feeds[n]) for n in in_names)
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "model.onnx")
    with torch.inference_mode():
        expected = model(*args)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=in_names, output_names=out_names,
                          opset_version=OPSET, dynamo=False, do_constant_folding=True)
    onnx.checker.check_model(path)

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    got_in = [i.name for i in sess.get_inputs()]
    # The exporter drops inputs the graph does not use (e.g. a mask folded away).
    feeds = {n: feeds[n] for n in got_in}
    outs = sess.run(None, feeds)
    onnx_outs = [o.name for o in sess.get_outputs()]
    errors = []
    for e, y in zip(expected, outs):
        e = e.detach().numpy()
        scale = float(np.max(np.abs(e))) or 1.0
        errors.append(float(np.max(np.abs(e - y))) / scale)

    ddir = os.path.join(outdir, "test_data_set_0")
    os.makedirs(ddir, exist_ok=True)
    for i, n in enumerate(got_in):
        with open(os.path.join(ddir, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
    for i, (n, y) in enumerate(zip(onnx_outs, outs)):
        with open(os.path.join(ddir, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(y), n).SerializeToString())
    with open(os.path.join(outdir, "tolerance.txt"), "w") as f:
        f.write("rtol 1e-3\natol_scale 1e-4\n")
    m = onnx.load(path, load_external_data=False)
    return {"name": name, "source": source, "description": desc, "seed": seed,
            "opset": OPSET, "nodes": len(m.graph.node),
            "params": int(sum(int(np.prod(t.dims)) for t in m.graph.initializer)),
            "inputs": [tensor_info(n, feeds[n]) for n in got_in],
            "outputs": [tensor_info(n, np.asarray(y)) for n, y in zip(onnx_outs, outs)],
            "torch_vs_ort": max(errors) if errors else None,
            "export_seconds": round(time.monotonic() - t0, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?", default=DEFAULT_OUT)
    ap.add_argument("--models", help="comma-separated names (default: all)")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args()
    if args.list:
        for n, (_, source, desc) in MODELS.items():
            print(f"{n}\t{source}\t{desc}")
        return 0
    names = [n for n in args.models.split(",") if n] if args.models else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        sys.exit(f"gen_corpus.py: {e.name} is not installed (ANVIL_CORPUS=1 scripts/setup.sh)")
    no_downloads()
    # Ultralytics keeps a settings file; in the corpus folder, not the user's ~/.config.
    os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(os.path.abspath(args.outdir),
                                                          ".ultralytics"))
    # nn.MultiheadAttention's inference fast path is one fused aten op the exporter lacks.
    torch.backends.mha.set_fastpath_enabled(False)
    torch.set_num_threads(os.cpu_count() or 1)

    out = os.path.abspath(args.outdir)
    os.makedirs(out, exist_ok=True)
    ignore = os.path.join(out, ".gitignore")
    if not os.path.exists(ignore):
        with open(ignore, "w") as f:
            f.write("# generated by scripts/gen_corpus.py: nothing here is tracked\n*\n")
    manifest_path = os.path.join(out, "manifest.json")
    manifest, failed = {}, {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            old = json.load(f)
        manifest = {m["name"]: m for m in old.get("models", [])}
        failed = {n: why for n, why in old.get("failed", {}).items() if n not in names}
    for name in names:
        seed = args.seed + list(MODELS).index(name)
        mdir = os.path.join(out, name)
        stamp_path = os.path.join(mdir, "corpus.stamp")
        stamp = stamp_of(name, seed)
        if (not args.force and name in manifest and os.path.exists(stamp_path)
                and open(stamp_path).read() == stamp):
            print(f"{name}: up to date in {mdir}")
            continue
        failed.pop(name, None)
        try:
            entry = export(name, mdir, seed)
        except Exception as e:  # noqa: BLE001 - one model's failure must not stop the others
            msg = (str(e).strip().splitlines() or [""])[0][:200]
            failed[name] = f"{type(e).__name__}: {msg}"
            manifest.pop(name, None)
            print(f"{name}: FAILED ({failed[name]})", file=sys.stderr)
            continue
        with open(stamp_path, "w") as f:
            f.write(stamp)
        manifest[name] = entry
        ins = ", ".join(f"{i['name']} {'x'.join(map(str, i['shape']))} {i['dtype']}"
                        for i in entry["inputs"])
        print(f"{name}: {entry['nodes']} nodes, {entry['params'] / 1e6:.1f} M parameters, "
              f"inputs {ins}, torch vs ORT {entry['torch_vs_ort']:.1e} of scale, "
              f"{entry['export_seconds']} s -> {mdir}")
    ordered = [manifest[n] for n in MODELS if n in manifest]
    with open(manifest_path, "w") as f:
        json.dump({"generator": "scripts/gen_corpus.py", "versions": versions(),
                   "failed": failed, "models": ordered}, f, indent=2)
        f.write("\n")
    print(f"manifest: {len(ordered)} models in {manifest_path}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
