#!/usr/bin/env python3
"""Trained models keep their answers in bf16 (issue 34).

Usage: check_real_bf16.py REAL_DIR

REAL_DIR is what tests/models/fetch_real.py wrote (REAL_DIR/<name>/model.onnx). Each model runs
through the anvil Python API twice on the same inputs, at precision "fp32" and "bf16" (MatMul,
Gemm and Conv round their operands to bfloat16 and accumulate in fp32), and the answers a user of
the model sees are compared:

- OCR (RapidOCR's PP-OCR models): two pages of text lines rendered with Pillow, one in large dark
  print and one in small faint print (fixed seed; DejaVu fonts where the system has them, else
  Pillow's own; rapidocr-onnxruntime ships no sample images), preprocessed as RapidOCR does.
  Detection: the probability maps binarised at RapidOCR's threshold (0.3), IoU of the two masks
  >= 0.95.
  Direction: the classifier's labels on the line crops and on the crops turned 180 degrees are
  identical. Recognition: the CTC greedy decoding of every line crop with the model's own
  character dictionary (its "character" metadata, as RapidOCR reads it) is the same string.
- Voice activity (Silero VAD, both exports): generated speech-like audio (voiced harmonics under
  moving formants, syllable-rate modulation, fricative noise, pauses, background noise), run
  window by window (512 samples with 64 of context, the recurrent state carried) as silero-vad's
  own wrapper does; max |p_fp32 - p_bf16| <= 0.02, both with anvil's own choice (which keeps
  Silero in fp32, see check_vad) and with every Conv forced to its bf16 variant.
- Wake word (openWakeWord 0.4.0's melspectrogram -> embedding -> 'hey jarvis' pipeline, as its
  Model does it): the same audio; max |p_fp32 - p_bf16| <= 0.02.

Every bf16 session must run some nodes in bf16 (Session.explain), else bf16 was not exercised
and the check fails (Silero's unforced session only reports its count). Prints a table (model,
metric, value, bound, pass) and the recognised strings; exit status 0 when every check passes,
1 when one fails, 77 (skipped) on a CPU without AVX512_BF16 or where Pillow is missing.
"""

import argparse
import math
import os
import sys
import time

import numpy as np

try:
    from PIL import Image, ImageDraw, ImageFont
except ImportError:
    Image = None

import anvil

SKIP = 77
SEED = 34
SR = 16000

# RapidOCR 1.4.4's config.yaml: Det thresh 0.3, limit_side_len 736 with limit_type min;
# Cls cls_image_shape [3, 48, 192], label_list ['0', '180']; Rec rec_img_shape [3, 48, 320].
DET_THRESH = 0.3
DET_MIN_SIDE = 736
CLS_SHAPE = (48, 192)
CLS_LABELS = ("0", "180")
REC_SHAPE = (48, 320)

IOU_MIN = 0.95
PROB_MAX_DIFF = 0.02

LINES = [
    "The quick brown fox jumps over the lazy dog",
    "Invoice No. 20417, due 12/03/2025",
    "Total: $1,234.56 (tax included)",
    "anvil compiles ONNX models to C",
    "Call 555-0100 before 5 pm",
    "Meeting room B, 3rd floor",
]

FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONT_FILES = ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSans-Bold.ttf"]


def cpu_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and "avx512_bf16" in line.split()
                       for line in f)
    except OSError:
        return False


# The convs' bf16 variant, forced where a CPU's rules keep a CNN in fp32 (Pair.run).
CONV_BF16 = {"Conv": "conv_bf16_im2col"}


class Pair:
    """One model's sessions (one thread, no tuning database): "fp32", "bf16" (anvil's own
    choice of bf16 variants), and with `force` ({op: variant}) "forced", bf16 with those
    variants forced."""

    def __init__(self, path, force=None):
        self.path = path
        self.s = {p: anvil.Session(path, threads=1, tuning="off", precision=p)
                  for p in ("fp32", "bf16")}
        if force:
            self.s["forced"] = anvil.Session(path, threads=1, tuning="off", precision="bf16",
                                             variants=force)
        self.bf16_nodes = {}

    def run(self, key, feeds):
        out = self.s[key].run(feeds)
        if key != "fp32":
            n = sum(1 for e in self.s[key].explain() if e.get("compute") == "bf16")
            self.bf16_nodes[key] = max(self.bf16_nodes.get(key, 0), n)
            if key == "bf16" and n == 0 and "forced" in self.s:
                # This CPU's measured rates keep the model fp32 (a Sapphire Rapids core's
                # vdpbf16ps runs at half its fp32 FMA's rate): its answers would be fp32's, so
                # the accuracy is judged on the forced bf16 variants instead.
                return self.run("forced", feeds)
        return out

    def bf16_row(self, name, key="bf16"):
        if key == "bf16" and not self.bf16_nodes.get(key) and "forced" in self.s:
            key = "forced"
        n = self.bf16_nodes.get(key, 0)
        return (name, "nodes in bf16" + (" (forced)" if key == "forced" else ""), n, "> 0", n > 0)


# ---- OCR ----------------------------------------------------------------------------------------

# (name, font sizes, ink levels, background levels): dark print, and small faint print whose
# borderline strokes leave the recogniser less margin
STYLES = [("clear", (24, 41), (0, 70), (225, 256)),
          ("faint", (15, 21), (95, 140), (200, 235))]


def fonts(rng, sizes):
    """(font, description) per line: DejaVu faces where installed, else Pillow's default."""
    have = [os.path.join(FONT_DIR, f) for f in FONT_FILES
            if os.path.isfile(os.path.join(FONT_DIR, f))]
    out = []
    for _ in LINES:
        size = int(rng.integers(*sizes))
        if have:
            path = have[int(rng.integers(len(have)))]
            out.append((ImageFont.truetype(path, size), f"{os.path.basename(path)} {size}px"))
        else:
            out.append((ImageFont.load_default(size=size), f"Pillow default {size}px"))
    return out


def render_page(rng, style):
    """A page with LINES in `style`; returns the RGB image and each line's box."""
    _, sizes, inks, bgs = style
    faces = fonts(rng, sizes)
    w, h = 900, 60 + 95 * len(LINES)
    bg = tuple(int(v) for v in rng.integers(*bgs, 3))
    page = Image.new("RGB", (w, h), bg)
    draw = ImageDraw.Draw(page)
    boxes, y = [], 40
    for text, (font, desc) in zip(LINES, faces):
        x = int(rng.integers(20, 90))
        ink = tuple(int(v) for v in rng.integers(*inks, 3))
        draw.text((x, y), text, font=font, fill=ink)
        l, t, r, b = draw.textbbox((x, y), text, font=font)
        boxes.append(((l, t, r, b), desc))
        y = b + int(rng.integers(22, 40))
    return page.crop((0, 0, w, min(h, y + 30))), boxes


def normalise(img):
    """PIL RGB -> 1x3xHxW float32 as RapidOCR feeds it: BGR (it reads with OpenCV), then
    (pixel / 255 - 0.5) / 0.5."""
    a = np.asarray(img, dtype=np.float32)[:, :, ::-1]
    return ((a / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()


def det_input(page):
    # limit_type min: the short side is scaled up to 736, then both sides rounded to 32.
    w, h = page.size
    ratio = DET_MIN_SIDE / min(w, h) if min(w, h) < DET_MIN_SIDE else 1.0
    rw = max(32, int(round(w * ratio / 32)) * 32)
    rh = max(32, int(round(h * ratio / 32)) * 32)
    return normalise(page.resize((rw, rh), Image.BILINEAR))


def line_input(crop, height, width_min, width_max=None):
    """A crop resized to `height` keeping its aspect ratio, zero-padded on the right to
    `width_min` (the classifier's width_max also caps the width, as RapidOCR does)."""
    w, h = crop.size
    rw = int(math.ceil(height * w / h))
    width = max(width_min, rw) if width_max is None else width_max
    rw = min(rw, width)
    x = normalise(crop.resize((rw, height), Image.BILINEAR))
    out = np.zeros((1, 3, height, width), dtype=np.float32)
    out[:, :, :, :rw] = x
    return out


def characters(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    meta = {p.key: p.value for p in m.metadata_props}
    # RapidOCR's CTCLabelDecode: 'blank' first, the dictionary, then ' '
    return ["blank"] + meta["character"].splitlines() + [" "]


def ctc_greedy(probs, chars):
    idx = probs[0].argmax(axis=-1)
    keep = np.ones(len(idx), dtype=bool)
    keep[1:] = idx[1:] != idx[:-1]
    keep &= idx != 0
    return "".join(chars[i] for i in idx[keep])


def check_ocr(real, rows, notes):
    rng = np.random.default_rng(SEED)
    det = Pair(os.path.join(real, "ppocrv4_det", "model.onnx"), force=CONV_BF16)
    cls = Pair(os.path.join(real, "ppocr_cls", "model.onnx"))
    rec_path = os.path.join(real, "ppocrv4_rec", "model.onnx")
    chars = characters(rec_path)
    rec = Pair(rec_path)
    ious, cls_same, cls_right, cls_n, rec_same, rec_exact, rec_n = [], 0, 0, 0, 0, 0, 0
    for style in STYLES:
        page, boxes = render_page(rng, style)
        crops, pad = [], 6
        for (l, t, r, b), _ in boxes:
            crops.append(page.crop((max(0, l - pad), max(0, t - pad),
                                    min(page.size[0], r + pad), min(page.size[1], b + pad))))

        # detection: the DB probability map over the whole page
        x = det_input(page)
        maps = {p: next(iter(det.run(p, {"x": x}).values())) for p in ("fp32", "bf16")}
        m32, m16 = (maps[p] > DET_THRESH for p in ("fp32", "bf16"))
        union = np.logical_or(m32, m16).sum()
        ious.append(float(np.logical_and(m32, m16).sum() / union) if union else 1.0)
        notes.append(f"ppocrv4_det [{style[0]} page]: input {list(x.shape)}, text pixels fp32 "
                     f"{int(m32.sum())} ({100.0 * m32.mean():.1f}% of the map), bf16 "
                     f"{int(m16.sum())}, IoU {ious[-1]:.4f}, max |map diff| "
                     f"{float(np.abs(maps['fp32'] - maps['bf16']).max()):.4f}")

        # direction: every crop upright and turned 180 degrees
        labels, truth = {"fp32": [], "bf16": []}, []
        for crop in crops:
            for turned in (False, True):
                c = crop.rotate(180) if turned else crop
                feeds = {"x": line_input(c, CLS_SHAPE[0], CLS_SHAPE[1], CLS_SHAPE[1])}
                for p in ("fp32", "bf16"):
                    y = next(iter(cls.run(p, feeds).values()))
                    labels[p].append(CLS_LABELS[int(y[0].argmax())])
                truth.append("180" if turned else "0")
        cls_same += sum(a == b for a, b in zip(labels["fp32"], labels["bf16"]))
        cls_right += sum(a == t for a, t in zip(labels["fp32"], truth))
        cls_n += len(truth)
        notes.append(f"ppocr_cls [{style[0]} page]: fp32 {' '.join(labels['fp32'])}; bf16 "
                     f"{' '.join(labels['bf16'])}")

        # recognition: CTC greedy decoding of every line
        for text, crop, (_, desc) in zip(LINES, crops, boxes):
            feeds = {"x": line_input(crop, REC_SHAPE[0], REC_SHAPE[1])}
            got = {p: ctc_greedy(next(iter(rec.run(p, feeds).values())), chars)
                   for p in ("fp32", "bf16")}
            rec_same += got["fp32"] == got["bf16"]
            rec_exact += got["fp32"] == text
            rec_n += 1
            mark = "same" if got["fp32"] == got["bf16"] else "DIFFERENT"
            notes.append(f"ppocrv4_rec [{style[0]}, {desc}] rendered {text!r}\n"
                         f"    fp32 {got['fp32']!r}\n    bf16 {got['bf16']!r} ({mark})")
    notes.append(f"ppocr_cls: fp32 labels right on {cls_right}/{cls_n}; ppocrv4_rec: fp32 reads "
                 f"{rec_exact}/{rec_n} lines exactly as rendered")
    rows.append(("ppocrv4_det", "min mask IoU (map > 0.3)", min(ious), f">= {IOU_MIN}",
                 min(ious) >= IOU_MIN))
    rows.append(det.bf16_row("ppocrv4_det"))
    rows.append(("ppocr_cls", "labels identical", f"{cls_same}/{cls_n}", "all", cls_same == cls_n))
    rows.append(cls.bf16_row("ppocr_cls"))
    rows.append(("ppocrv4_rec", "strings identical", f"{rec_same}/{rec_n}", "all",
                 rec_same == rec_n))
    rows.append(rec.bf16_row("ppocrv4_rec"))


# ---- audio --------------------------------------------------------------------------------------

def speech_like(rng, seconds):
    """Phrases of voiced syllables (a gliding f0 whose harmonics pass through three moving
    formant resonances, tilted down, modulated at a syllable rate, some syllables with a
    fricative noise onset) between pauses, over quiet background noise; peak 0.5."""
    n = int(seconds * SR)
    t = np.arange(n) / SR
    gate = np.zeros(n)
    pos = int(0.3 * SR)
    while pos < n:
        length = int(rng.uniform(0.8, 1.5) * SR)
        ramp = np.minimum(1.0, np.minimum(np.arange(length), np.arange(length)[::-1]) / 400.0)
        gate[pos:pos + length] = ramp[:max(0, min(length, n - pos))]
        pos += length + int(rng.uniform(0.3, 0.7) * SR)
    syl_rate = 4.5
    syl = 0.5 * (1.0 - np.cos(2 * np.pi * syl_rate * t + rng.uniform(0, 2 * np.pi)))
    f0 = 140.0 + 30.0 * np.sin(2 * np.pi * 0.6 * t) + 10.0 * np.sin(2 * np.pi * 3.1 * t)
    phase = 2 * np.pi * np.cumsum(f0) / SR
    formants = [(650 + 200 * np.sin(2 * np.pi * 1.3 * t), 110.0),
                (1500 + 500 * np.sin(2 * np.pi * 0.9 * t + 1.0), 160.0),
                (2600 + 150 * np.sin(2 * np.pi * 0.4 * t), 220.0)]
    voiced = np.zeros(n)
    for k in range(1, 40):
        fk = k * f0
        amp = sum(np.exp(-0.5 * ((fk - fc) / bw) ** 2) for fc, bw in formants) + 0.05
        amp *= (fk < 4000) / k ** 0.7
        voiced += amp * np.sin(k * phase)
    noise = rng.standard_normal(n)
    fricative = np.diff(noise, prepend=0.0) * (syl < 0.15) * 0.3
    x = gate * (syl * voiced / np.abs(voiced).max() + fricative) + 0.003 * noise
    return 0.5 * x / np.abs(x).max()


def check_vad(real, name, audio, rows, notes):
    # anvil's rules keep Silero's convs in fp32 under bf16 (after the STFT every map is at most 4
    # positions long: GEMM slivers, where bf16 is not worth its error) and LSTM has no bf16
    # variant, so "bf16" alone would compare fp32 with itself; "forced" rounds every Conv.
    vad = Pair(os.path.join(real, name, "model.onnx"), force={"Conv": "conv_bf16_im2col"})
    probs = {}
    for key in vad.s:
        state = np.zeros((2, 1, 128), dtype=np.float32)
        context = np.zeros(64, dtype=np.float32)
        out = []
        for i in range(0, len(audio) - 511, 512):
            x = np.concatenate([context, audio[i:i + 512]]).astype(np.float32)[None]
            r = vad.run(key, {"input": x, "state": state, "sr": np.array(SR, dtype=np.int64)})
            out.append(float(r["output"].reshape(-1)[0]))
            state = r["stateN"]
            context = x[0, -64:]
        probs[key] = np.array(out)
    p32 = probs["fp32"]
    notes.append(f"{name}: {len(p32)} windows, fp32 p from {p32.min():.3f} to {p32.max():.3f}, "
                 f"windows above 0.5: " + ", ".join(f"{k} {int((v > 0.5).sum())}"
                                                    for k, v in probs.items()))
    for key in ("bf16", "forced"):
        diff = float(np.abs(p32 - probs[key]).max())
        what = "max |p fp32 - p bf16|" + (" (forced)" if key == "forced" else "")
        rows.append((name, what, diff, f"<= {PROB_MAX_DIFF}", diff <= PROB_MAX_DIFF))
    n = vad.bf16_nodes.get("bf16", 0)
    rows.append((name, "nodes in bf16", n, "info", True))
    rows.append(vad.bf16_row(name, "forced"))


def check_wakeword(real, audio, rows, notes):
    mel = Pair(os.path.join(real, "oww_melspectrogram", "model.onnx"))
    emb = Pair(os.path.join(real, "oww_embedding", "model.onnx"), force=CONV_BF16)
    ww = Pair(os.path.join(real, "oww_hey_jarvis", "model.onnx"))
    pcm = np.clip(np.round(audio * 32767.0), -32768, 32767).astype(np.float32)[None]
    probs, embs = {}, {}
    for p in ("fp32", "bf16"):
        # openWakeWord's AudioFeatures: log-mel / 10 + 2, windows of 76 frames every 8, and the
        # classifier on every 16 consecutive embeddings
        spec = np.squeeze(next(iter(mel.run(p, {"input": pcm}).values()))) / 10.0 + 2.0
        windows = np.stack([spec[i:i + 76] for i in range(0, spec.shape[0] - 75, 8)])
        e = next(iter(emb.run(p, {"input_1": windows[..., None].astype(np.float32)}).values()))
        e = e.reshape(len(windows), 96)
        embs[p] = e
        probs[p] = np.array([float(next(iter(ww.run(p, {"x.1": e[None, i:i + 16]}).values()))
                                   .reshape(-1)[0]) for i in range(len(e) - 15)])
    diff = float(np.abs(probs["fp32"] - probs["bf16"]).max())
    rel = float(np.abs(embs["fp32"] - embs["bf16"]).max() / np.abs(embs["fp32"]).max())
    notes.append(f"oww_hey_jarvis: {len(probs['fp32'])} predictions over {len(embs['fp32'])} "
                 f"embeddings; fp32 p max {probs['fp32'].max():.4f} (the audio says no wake "
                 f"word), embedding max |diff| / max |e| {rel:.4f}")
    rows.append(("oww_hey_jarvis", "max |p fp32 - p bf16|", diff, f"<= {PROB_MAX_DIFF}",
                 diff <= PROB_MAX_DIFF))
    # no wake word is said, so p stays near 0 and the bound is loose; the embeddings the
    # classifier reads show how close the two pipelines really are
    rows.append(("oww_hey_jarvis", "max p (fp32)", float(probs["fp32"].max()), "info", True))
    rows.append(("oww_embedding", "max |e diff| / max |e|", rel, "info", True))
    for name, pair in (("oww_melspectrogram", mel), ("oww_embedding", emb),
                       ("oww_hey_jarvis", ww)):
        rows.append(pair.bf16_row(name))


# ---- main ---------------------------------------------------------------------------------------

MODELS = ["ppocrv4_det", "ppocr_cls", "ppocrv4_rec", "silero_vad", "silero_vad_op15",
          "oww_melspectrogram", "oww_embedding", "oww_hey_jarvis"]


def fmt(v):
    if not isinstance(v, float):
        return str(v)
    return f"{v:.4f}" if v == 0 or abs(v) >= 1e-3 else f"{v:.1e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("real_dir")
    args = ap.parse_args()
    if not cpu_has_bf16():
        print("skipped: this CPU has no AVX512_BF16 (/proc/cpuinfo), so bf16 is not exercised")
        return SKIP
    # anvil runs bf16 kernels only where the measured bf16 rate beats fp32's by 1.2x (the
    # cascade's rule, kern_cascade_may_pick): elsewhere a bf16 session is fp32 by design
    info = anvil.sysinfo()
    f32, bf16 = float(info.get("peak.fp32.gflops", 0)), float(info.get("peak.bf16.gflops", 0))
    if not bf16 > 1.2 * f32:
        print(f"skipped: bf16 measured {bf16:.0f} GFLOP/s against fp32's {f32:.0f}, so anvil "
              f"keeps bf16 sessions in fp32 on this CPU")
        return SKIP
    if Image is None:
        print("skipped: Pillow is not installed (scripts/requirements-zoo.txt)")
        return SKIP
    missing = [m for m in MODELS
               if not os.path.isfile(os.path.join(args.real_dir, m, "model.onnx"))]
    if missing:
        print(f"missing models in {args.real_dir}: {', '.join(missing)} (run "
              f"tests/models/fetch_real.py {args.real_dir})")
        return 1

    start = time.time()
    rows, notes = [], []
    check_ocr(args.real_dir, rows, notes)
    audio = speech_like(np.random.default_rng(SEED), 4.0)
    for name in ("silero_vad", "silero_vad_op15"):
        check_vad(args.real_dir, name, audio, rows, notes)
    check_wakeword(args.real_dir, audio, rows, notes)

    for n in notes:
        print(n)
    print()
    head = ("model", "metric", "value", "bound", "pass")
    table = [head] + [(m, k, fmt(v), b, "-" if b == "info" else "ok" if ok else "FAIL")
                      for m, k, v, b, ok in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    checks = [r for r in rows if r[3] != "info"]
    failed = [r for r in checks if not r[4]]
    print(f"\n{len(checks) - len(failed)} of {len(checks)} checks pass "
          f"({time.time() - start:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
