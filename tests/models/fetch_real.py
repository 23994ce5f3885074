#!/usr/bin/env python3
"""Copies real, trained ONNX models out of installed PyPI packages and writes ORT test data.

Usage: fetch_real.py OUTDIR [--list]

The packages are the group in scripts/requirements-zoo.txt (scripts/setup.sh installs them
unless ANVIL_ZOO_REAL=0; the real.* tests run where they are installed). Only their model files are used, so
they are installed without their dependencies. Each model becomes OUTDIR/<name>/ in the ONNX
backend-test layout that tests/tools/run_cases.c reads: model.onnx (a copy), test_data_set_0/
with seeded inputs of a realistic shape and ONNX Runtime's outputs, and tolerance.txt (rtol 1e-3,
atol 1e-4 * max|expected|). Models whose package is not installed are listed as missing; the exit
status is 0 when at least one model was written, 1 when none could be.
"""

import argparse
import importlib.util
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def ocr_image(shape):
    # An input normalised the way RapidOCR does ((pixel / 255 - 0.5) / 0.5): values in [-1, 1].
    def feeds(rng):
        return {"x": rng.uniform(-1.0, 1.0, shape).astype(np.float32)}
    return feeds


def vad_feeds(rng):
    # One 32 ms window of 16 kHz audio, a zero recurrent state, the sample rate.
    return {"input": (rng.standard_normal((1, 512)) * 0.1).astype(np.float32),
            "state": np.zeros((2, 1, 128), dtype=np.float32),
            "sr": np.array(16000, dtype=np.int64)}


def oww_audio(rng):
    # 1.28 s of 16 kHz audio in int16 units, as openWakeWord feeds its melspectrogram model.
    return {"input": (rng.standard_normal((1, 20480)) * 1000.0).astype(np.float32)}


def oww_feature(name, shape):
    # openWakeWord's embedding model takes 76 mel frames (log-mel / 10 + 2, about [-2, 6]); its
    # classifiers take 16 embeddings of 96 (values of a few units).
    def feeds(rng):
        return {name: rng.uniform(-2.0, 6.0, shape).astype(np.float32)}
    return feeds


# name: (package, path inside the package, input feeds, what it is)
MODELS = {
    "silero_vad": ("silero_vad", "data/silero_vad.onnx", vad_feeds,
                   "Silero voice activity detector (opset 16, If on sample rate, LSTM)"),
    "silero_vad_op15": ("silero_vad", "data/silero_vad_16k_op15.onnx", vad_feeds,
                        "Silero VAD 16 kHz, opset 15 export (Conv, If, decomposed LSTM cell)"),
    "ppocrv4_det": ("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx",
                    ocr_image((1, 3, 320, 320)), "PP-OCRv4 text detector (DB, 320x320)"),
    "ppocrv4_rec": ("rapidocr_onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx",
                    ocr_image((1, 3, 48, 320)), "PP-OCRv4 text recogniser (SVTR, 48x320)"),
    "ppocr_cls": ("rapidocr_onnxruntime", "models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                  ocr_image((1, 3, 48, 192)), "PP-OCR text direction classifier (48x192)"),
    # openWakeWord 0.4.0 is the last release whose wheel ships its models (later ones download
    # them at run time). Its code is Apache-2.0, its pre-trained models CC BY-NC-SA 4.0: used
    # here for testing only, copied from the installed package, never redistributed.
    "oww_melspectrogram": ("openwakeword", "resources/models/melspectrogram.onnx", oww_audio,
                           "openWakeWord log-mel front end (STFT as Conv, mel MatMul)"),
    "oww_embedding": ("openwakeword", "resources/models/embedding_model.onnx",
                      oww_feature("input_1", (4, 76, 32, 1)),
                      "openWakeWord speech embedding (Google's, NHWC Conv + LeakyReLU + MaxPool)"),
    "oww_hey_jarvis": ("openwakeword", "resources/models/hey_jarvis_v0.1.onnx",
                       oww_feature("x.1", (1, 16, 96)),
                       "openWakeWord 'hey jarvis' wake-word classifier (Gemm, LayerNorm, If)"),
}


def package_dir(pkg):
    # find_spec locates the package without importing it (silero_vad's __init__ imports torch).
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def write_case(name, src, feeds_fn, outdir, seed):
    case = os.path.join(outdir, name)
    os.makedirs(case, exist_ok=True)
    path = os.path.join(case, "model.onnx")
    shutil.copyfile(src, path)
    model = onnx.load(path, load_external_data=False)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = feeds_fn(np.random.default_rng(seed))
    in_names = [i.name for i in model.graph.input
                if i.name not in {t.name for t in model.graph.initializer}]
    out_names = [o.name for o in model.graph.output]
    outs = sess.run(out_names, feeds)
    ddir = os.path.join(case, "test_data_set_0")
    os.makedirs(ddir, exist_ok=True)
    for i, n in enumerate(in_names):
        with open(os.path.join(ddir, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[n], n).SerializeToString())
    for i, (n, y) in enumerate(zip(out_names, outs)):
        with open(os.path.join(ddir, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(y), n).SerializeToString())
    with open(os.path.join(case, "tolerance.txt"), "w") as f:
        f.write("rtol 1e-3\natol_scale 1e-4\n")
    opset = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    return (f"{len(model.graph.node)} nodes, opset {opset}, inputs "
            + ", ".join(f"{n}{list(np.shape(feeds[n]))}" for n in in_names))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    args = ap.parse_args()
    if args.list:
        for name, (pkg, rel, _, what) in MODELS.items():
            print(f"{name}\t{pkg}/{rel}\t{what}")
        return 0
    if not args.outdir:
        ap.error("OUTDIR is required")
    written = 0
    for seed, (name, (pkg, rel, feeds_fn, what)) in enumerate(MODELS.items()):
        base = package_dir(pkg)
        src = os.path.join(base, rel) if base else None
        if not src or not os.path.isfile(src):
            print(f"MISSING {name}: package '{pkg}' not installed (pip install --no-deps -r "
                  f"scripts/requirements-zoo.txt, or ANVIL_ZOO_REAL=1 scripts/setup.sh)")
            continue
        info = write_case(name, src, feeds_fn, args.outdir, 1000 + seed)
        print(f"{name}: {what}: {info} -> {os.path.join(args.outdir, name)}")
        written += 1
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
