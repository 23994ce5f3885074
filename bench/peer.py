#!/usr/bin/env python3
"""Peer benchmark: anvil tuned and cascade vs ONNX Runtime, OpenVINO and PyTorch on the zoo.

Usage: peer.py [--models a,b,...] [--corpus] [--corpus-dir DIR] [--size full|ci] [--threads 1,2]
               [--runs N] [--rounds R] [--warmup W] [--anvil PATH] [--zoo DIR] [--tune-db FILE]
               [--tune-budget S] [--no-tune] [--no-openvino] [--precision fp32|bf16|fp16|auto] [--ov-f32]
               [--json out.json] [--md out.md]

For every model (the generated zoo of tests/models/gen_zoo.py and the real models of
tests/models/fetch_real.py whose packages are installed; with --corpus instead the PyTorch
exports of scripts/gen_corpus.py, generated into --corpus-dir on first use when torch is
installed; --models may name models of either) and every thread count T:
  1. Tuning: `anvil tune MODEL --db TUNE_DB --threads T -i ... --runs 0 --json` measures every
     distinct problem of the model on this machine with the same inputs the timed runs use and
     stores the winners in TUNE_DB (default build-release/peer_zoo/tuning.db). Problems already
     in the database are not measured again, so a rerun is quick. Its wall time and the number
     of problems measured now ("tuned") and found in the database ("cached") are reported.
     --no-tune skips this step and the tuned engine.
  2. Timing: the engines run in alternation, R rounds of cascade, tuned, ORT, OpenVINO, torch;
     each round is a fresh child process per engine that loads the model, runs it once (first
     run, includes planning), runs W untimed warmup iterations (more where W runs take less than
     --warmup-ms) and N timed ones on the same
     inputs (the model's test_data_set_0, so all engines see identical data):
  - anvil cascade: `anvil bench MODEL --json -i NAME=FILE.npy ... --threads T --no-db`, the
    built-in selection rules only (no database, whatever $ANVIL_TUNING_DB says);
  - anvil tuned: the same with `--db TUNE_DB`, the kernels tuning chose;
  - ONNX Runtime: this script in child mode, intra-op threads T, inter-op 1, sequential
    execution, its default graph optimisations;
  - OpenVINO (when installed: ANVIL_CORPUS=1 scripts/setup.sh; --no-openvino leaves it out):
    this script in child mode, the CPU plugin with INFERENCE_PRECISION_HINT=f32,
    INFERENCE_NUM_THREADS=T, PERFORMANCE_HINT=LATENCY, one stream, no CPU pinning;
  - PyTorch (when torch and onnx2torch are installed: ANVIL_TORCH=1 scripts/setup.sh): the
    model's torch twin (bench/torch_twin.py: the ONNX graph as a torch.fx module holding the
    model's own initializers), built once by this process and accepted only if it reproduces
    test_data_set_0 within the zoo tolerance (rtol 1e-3, atol 1e-4 * max|y|); a twin that cannot
    be built or does not match is never timed and its reason goes to the notes. Each round's
    child loads the saved twin and runs it under torch.inference_mode() with
    torch.set_num_threads(T) and torch.set_num_interop_threads(1).
  3. Outputs: one untimed `anvil run` of each anvil configuration, and OpenVINO's first run, are
     compared with ORT's outputs of test_data_set_0 (rtol 1e-3, atol 1e-4 * max|y| per output);
     the "outputs vs ORT" column says which engines differ and the notes by how much.
  4. What changed: one more untimed `anvil bench --iters 1 --warmup 0 --explain` of each anvil
     configuration lists the variant and parameters every node ran; "nodes changed" counts the
     nodes where they differ (a record's threads=T equal to the session's counts as the
     cascade's default), the notes name the first five and the JSON all of them.
Latency per engine is the median over rounds of each round's median (and likewise p90), so all
engines are summarised the same way. Ratios are of those medians: tuned/cascade, tuned/ORT and
cascade/ORT (below 1: the first is faster), with their geometric means over the models under the
table; anvil/OpenVINO and anvil/torch use tuned anvil (the cascade with --no-tune). When several
thread counts run, a second table gives each engine's speedup from the smallest to each larger
count. Peak RSS is each child's maximum resident set (wait4's ru_maxrss, the largest over
rounds); for ONNX Runtime and PyTorch that includes the Python interpreter and the onnxruntime
/ torch import, reported separately as "base". Models are generated on first use into --zoo (default
build-release/peer_zoo/<size>). Not a test: it never fails on a number; an engine that cannot
run a model gets its error in the notes column and the others go on.

--precision bf16 (default fp32: all of the above) compares anvil's bf16 with OpenVINO's default
(--precision fp16 and auto the same with anvil in that precision: fp16 is the reduced precision
that pays on a CPU with AVX512-FP16 whose bf16 dot product is slow):
  - anvil cascade and tuned run `anvil bench --precision bf16` (tuning: `anvil tune --precision
    bf16`, into the same database, whose keys hold the precision), and one more engine, anvil
    fp32, the cascade in fp32, for bf16's speedup (anvil fp32 / anvil bf16);
  - OpenVINO runs without INFERENCE_PRECISION_HINT, in its default precision (bf16 on CPUs with
    AVX512-BF16 or AMX; the precision it reports is in the JSON and under the table), and with
    --ov-f32 also with the hint f32; ORT fp32 is the reference; no torch;
  - the rounds alternate as above: cascade, tuned, fp32, ORT, OpenVINO, OpenVINO f32;
  - instead of the tolerance check, every engine's error against ORT's outputs of
    test_data_set_0: max|y - y_ref| / max|y_ref|, the worst over outputs (anvil's from one
    untimed `anvil run` per configuration, the peers' from their first timed child); anvil
    bf16's is within bound when no larger than max(1e-2, OpenVINO bf16's error);
  - one untimed `anvil bench --explain` gives the share of the flops anvil ran in bf16;
  - the table: anvil bf16 (tuned, or the cascade with --no-tune), anvil fp32, the speedup,
    OpenVINO, anvil/OpenVINO, ORT, both errors and the bound, with the geometric means of
    anvil/OpenVINO and of the speedup under it, and the CPU's model and `anvil sysinfo --json`
    peaks (peak.fp32.gflops, peak.bf16.gflops) above it.
"""

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GEN_ZOO = os.path.join(ROOT, "tests", "models", "gen_zoo.py")
FETCH_REAL = os.path.join(ROOT, "tests", "models", "fetch_real.py")
GEN_CORPUS = os.path.join(ROOT, "scripts", "gen_corpus.py")
DEFAULT_CORPUS = os.path.join(ROOT, "models", "corpus")
# peer_engines sits beside this file. Python puts this folder on sys.path when peer.py runs as a
# script, from whatever directory; the insert covers a script elsewhere that imports peer.
sys.path.insert(0, HERE)
from peer_engines import (anvil_outputs, error_line, load_inputs, load_outputs,  # noqa: E402
                          max_rel_error, mismatch, ort_child, ov_child, ov_status, run_child,
                          short_error, torch_child, torch_status, twin_child)

MIB = 1024.0


# ---- parent ------------------------------------------------------------------------------------


def make_twin(case, path, python, timeout):
    """None when case's twin is saved at path, else why not."""
    rc, out, err, _ = run_child([python, os.path.abspath(__file__), "--child-twin", case, path],
                                timeout)
    if rc != 0:
        return short_error("torch twin", err, rc)
    return json.loads(out.strip().splitlines()[-1])["why"]


def ensure_corpus(names, corpus_dir, python):
    """Generates the corpus models named (scripts/gen_corpus.py; it skips those up to date) when
    torch is installed, else uses what corpus_dir has; returns ({name: case dir}, {name: why a
    model is missing})."""
    gen_error = None
    if importlib.util.find_spec("torch") is not None:
        # Its progress goes to stderr with the rest of this script's; a model it cannot export
        # is in the manifest's "failed" and gets a note. (Its stderr is the exporter's warnings.)
        gen = subprocess.run([python, GEN_CORPUS, corpus_dir, "--models", ",".join(names)],
                             stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
        if gen.returncode != 0:
            gen_error = error_line(gen.stderr, gen.returncode)
    failed = {}
    try:
        with open(os.path.join(corpus_dir, "manifest.json")) as f:
            failed = json.load(f).get("failed", {})
    except (OSError, ValueError):
        pass
    why = {}
    for n in names:
        if not os.path.isfile(os.path.join(corpus_dir, n, "model.onnx")):
            why[n] = (f"gen_corpus.py failed: {failed[n]}" if n in failed else
                      f"gen_corpus.py failed: {gen_error}" if gen_error else
                      "not generated (needs torch: ANVIL_CORPUS=1 scripts/setup.sh, then "
                      "scripts/gen_corpus.py)")
    return {n: os.path.join(corpus_dir, n) for n in names}, why


def ensure_models(names, size, zoo, python, corpus_dir=None):
    """Generates the zoo models and copies the real ones into zoo, and with corpus_dir makes the
    corpus (all of it when names is empty); returns ({name: case dir}, {name: kind}, {name: why
    it is missing})."""
    gen = subprocess.run([python, GEN_ZOO, "list"], capture_output=True, text=True, check=True)
    generated = gen.stdout.split()
    real = subprocess.run([python, FETCH_REAL, "--list"], capture_output=True, text=True,
                          check=True)
    real_names = [line.split("\t")[0] for line in real.stdout.splitlines() if line]
    corpus = subprocess.run([python, GEN_CORPUS, "--list"], capture_output=True, text=True,
                            check=True)
    corpus_names = [line.split("\t")[0] for line in corpus.stdout.splitlines() if line]
    wanted = names or (corpus_names if corpus_dir else generated + real_names)
    known = generated + real_names + corpus_names
    unknown = [n for n in wanted if n not in known]
    if unknown:
        sys.exit(f"peer.py: unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    kinds = {n: "real" if n in real_names else "corpus" if n in corpus_names else size
             for n in wanted}
    cases, missing = {}, {}
    for n in wanted:
        if n in generated:
            subprocess.run([python, GEN_ZOO, n, os.path.join(zoo, n), "--size", size],
                           check=True, stdout=subprocess.DEVNULL)
            cases[n] = os.path.join(zoo, n)
    if any(n in real_names for n in wanted):
        real_dir = os.path.join(zoo, "real")
        if not os.path.isdir(real_dir):
            subprocess.run([python, FETCH_REAL, real_dir], stdout=subprocess.DEVNULL)
        for n in wanted:
            if n in real_names:
                cases[n] = os.path.join(real_dir, n)
    from_corpus = [n for n in wanted if n in corpus_names]
    if from_corpus:
        found, missing = ensure_corpus(from_corpus, corpus_dir or DEFAULT_CORPUS, python)
        cases.update(found)
    return {n: cases[n] for n in wanted}, kinds, missing


def summarise(rounds):
    if not rounds:
        return None
    return {"median_ms": statistics.median(r["median"] for r in rounds),
            "p90_ms": statistics.median(r["p90"] for r in rounds),
            "min_ms": min(r["min"] for r in rounds),
            "first_run_ms": statistics.median(r["first_run_ms"] for r in rounds),
            "peak_rss_mib": max(r["rss_kib"] for r in rounds) / MIB,
            "rounds": len(rounds)}


def anvil_round(out, rss):
    """One `anvil bench --json` child's output as a round (the shape the Python children print)."""
    j = json.loads(out)
    lat = j["latency_ms"]
    return {"median": lat["median"], "p90": lat["p90"], "min": lat["min"],
            "first_run_ms": j["first_run_ms"], "rss_kib": rss}


def peer_round(out, rss):
    """One ORT or torch child's output (this script in child mode) as a round."""
    j = json.loads(out)
    j["rss_kib"] = rss
    return j


def warmup_runs(anvil_base, args):
    """--warmup, or more: enough untimed runs to fill --warmup-ms at the model's latency (from
    one short anvil child). A child's first ~100 ms on this shared VM run up to 2.5x slow
    (a 2-thread 0.45 ms model ran 1.1-1.3 ms a run for its first ~90 runs, whatever the
    engine's threads do), so a fixed count left small models unwarmed. Every engine gets the
    same count."""
    if args.warmup_ms <= 0:
        return args.warmup
    rc, out, _, _ = run_child(anvil_base + ["--no-db", "--iters", "5", "--warmup", "1"],
                              args.timeout)
    try:
        ms = json.loads(out)["latency_ms"]["median"] if rc == 0 else 0.0
    except (ValueError, KeyError, TypeError):
        ms = 0.0
    if ms <= 0:
        return args.warmup
    return max(args.warmup, min(2000, int(args.warmup_ms / ms) + 1))


def tune_model(model, input_args, threads, args):
    """Runs `anvil tune` on model at threads into args.tune_db; returns what the table needs.

    Problems already in the database are not measured again, so a rerun costs a model load and a
    look-up per problem. --runs 0: tune's own cascade-vs-tuned timing is skipped, this script
    times both itself."""
    cmd = [args.anvil, "tune", model, "--db", args.tune_db, "--threads", str(threads), "-q",
           "--runs", "0", "--json"] + input_args + args.precision_flags
    if args.tune_budget:
        cmd += ["--budget", str(args.tune_budget)]
    t0 = time.monotonic()
    rc, out, err, _ = run_child(cmd, args.timeout)
    info = {"seconds": time.monotonic() - t0}
    if rc != 0:
        info["error"] = error_line(err, rc)
        return info
    try:
        j = json.loads(out)
        status = [p["status"] for p in j["problems"]]
    except (ValueError, KeyError, TypeError) as e:
        info["error"] = f"unreadable tune output ({type(e).__name__}: {str(e)[:80]})"
        return info
    info.update({"problems": len(status), "stopped": j["stopped"],
                 **{k: status.count(k) for k in ("tuned", "cached", "skipped", "failed")}})
    return info


def explain_nodes(cmd, timeout):
    """([{node, op, variant, params, source, flops, compute}, ...], None) from one untimed
    `anvil bench --explain` run, or (None, why not). A fused node is listed with the nodes it
    holds, which may share its name."""
    rc, out, err, _ = run_child(cmd, timeout)
    if rc != 0:
        return None, error_line(err, rc)
    try:
        return list(json.loads(out)["nodes"]), None
    except (ValueError, KeyError, TypeError) as e:
        return None, f"unreadable explain output ({type(e).__name__}: {str(e)[:80]})"


def explain(cmd, timeout):
    """{node: {op, variant, params, source}} from one untimed `anvil bench --explain` run."""
    nodes, why = explain_nodes(cmd, timeout)
    return ({n["node"]: n for n in nodes}, None) if nodes is not None else (None, why)


def norm_params(params, threads):
    """params without 'threads=T' when T is the session's: the cascade prints '' for
    "default configuration, all the session's threads", a database record spells the threads."""
    keep = [p for p in params.split(";") if p and p != f"threads={threads}"]
    return ";".join(keep)


def changed_nodes(cascade, tuned, threads):
    """The nodes whose variant or parameters differ between the two explains, in graph order."""
    changed = []
    for node, c in cascade.items():
        t = tuned.get(node)
        if t is None:
            continue
        cp, tp = norm_params(c["params"], threads), norm_params(t["params"], threads)
        if c["variant"] != t["variant"] or cp != tp:
            changed.append({"node": node, "op": c["op"], "cascade": c["variant"],
                            "cascade_params": cp, "tuned": t["variant"], "tuned_params": tp,
                            "source": t["source"]})
    return changed


def describe_change(c):
    params = f" [{c['tuned_params']}]" if c["tuned_params"] else ""
    before = c["cascade"] + (f" [{c['cascade_params']}]" if c["cascade_params"] else "")
    return f"{c['node']}: {before} -> {c['tuned']}{params}"


def anvil_notes(failures):
    """Notes for the anvil side ({step: message}), one per distinct message: an operator anvil
    lacks makes tune, cascade and tuned fail alike, and that is one note, not three."""
    notes = []
    for msg in dict.fromkeys(failures.values()):
        steps = [k for k, v in failures.items() if v == msg]
        who = "anvil" if len(steps) == len(failures) and len(steps) > 1 else \
            "anvil " + "/".join(steps)
        notes.append(f"{who}: {msg}")
    return notes


def ratio(a, b):
    return a["median_ms"] / b["median_ms"] if a and b else None


def add_torch(cmds, parse, result, name, case, npz, threads, warmup, args, python, tmp):
    """Adds the torch engine to cmds when the model's twin can be built (once per model) and
    matches ORT, else puts why not in the notes."""
    twin_path = os.path.join(tmp, f"{name}.twin.pt")
    torch_ok = args.torch_note is None
    if torch_ok and not os.path.exists(twin_path):
        if name not in args.twin_notes:
            args.twin_notes[name] = make_twin(case, twin_path, python, args.timeout)
        if args.twin_notes[name]:
            result["notes"].append(args.twin_notes[name])
            torch_ok = False
    elif not torch_ok:
        result["notes"].append(f"torch: {args.torch_note}")
    if torch_ok:
        cmds["torch"] = [python, os.path.abspath(__file__), "--child-torch", twin_path, npz,
                         str(threads), str(warmup), str(args.runs)]
        parse["torch"] = peer_round


def bench_model(name, case, threads, args, python, tmp):
    import numpy as np
    model = os.path.join(case, "model.onnx")
    result = {"model": name, "size": args.kinds.get(name, args.size), "threads": threads,
              "notes": []}
    if not os.path.isfile(model):
        result["notes"].append(args.missing.get(name) or f"not available ({model} missing)")
        return result
    feeds = load_inputs(case)
    npz = os.path.join(tmp, f"{name}.npz")
    np.savez(npz, **feeds)
    input_args = []
    for n, arr in feeds.items():
        path = os.path.join(tmp, f"{name}.{n}.npy")
        np.save(path, arr)
        input_args += ["-i", f"{n}={path}"]
    anvil_base = [args.anvil, "bench", model, "--json", "--threads", str(threads)] + input_args
    warmup = warmup_runs(anvil_base, args)
    result["warmup"] = warmup
    timed = ["--warmup", str(warmup), "--iters", str(args.runs)]
    # Under --precision bf16 the cascade and tuned engines run bf16, and "fp32" is the cascade
    # in fp32, for the speedup bf16 brings.
    bf16 = args.precision != "fp32"  # a reduced precision: bf16, fp16 or auto
    db_flags = {"cascade": ["--no-db"] + args.precision_flags,
                "tuned": ["--db", args.tune_db] + args.precision_flags, "fp32": ["--no-db"]}
    anvil_failures = {}

    # 1. Tune first, so the tuned engine reads a database that has this model at these threads.
    engines = ["cascade"]
    if not args.no_tune:
        tune = tune_model(model, input_args, threads, args)
        result["tune"] = tune
        if "error" in tune:
            anvil_failures["tune"] = tune["error"]
        else:
            engines.append("tuned")
            left = [f"{tune[k]} problems {k}" for k in ("skipped", "failed") if tune[k]]
            left += ["stopped"] if tune["stopped"] else []
            if left:
                result["notes"].append(f"tune: {', '.join(left)} (nodes without a record run "
                                       "the cascade)")
    if bf16:
        engines.append("fp32")
    cmds = {e: anvil_base + timed + db_flags[e] for e in engines}
    parse = {e: anvil_round for e in engines}

    # The peers' first-run outputs, for the comparison with test_data_set_0 (ORT's own only in
    # bf16 mode, where every engine's error is reported).
    outputs = {e: os.path.join(tmp, f"{name}.t{threads}.{e}_outputs.npz")
               for e in ("ort", "ov", "ov_f32")}
    cmds["ort"] = [python, os.path.abspath(__file__), "--child-ort", model, npz, str(threads),
                   str(warmup), str(args.runs)] + ([outputs["ort"]] if bf16 else [])
    parse["ort"] = peer_round
    # OpenVINO as this script always ran it (f32), or under bf16 in its default configuration,
    # with its f32 configuration next to it under --ov-f32.
    ov_configs = {"ov": "default", "ov_f32": "f32"} if bf16 and args.ov_f32 else \
        {"ov": "default"} if bf16 else {"ov": "f32"}
    if args.ov_note is None:
        for e, config in ov_configs.items():
            cmds[e] = [python, os.path.abspath(__file__), "--child-ov", model, npz, str(threads),
                       str(warmup), str(args.runs), outputs[e], config]
            parse[e] = peer_round
    # No torch under bf16: its table has no column for it.
    if not bf16:
        add_torch(cmds, parse, result, name, case, npz, threads, warmup, args, python, tmp)

    # 2. Rounds: cascade, tuned, ORT, torch, cascade, tuned, ... each a fresh child, so drift in
    # machine load hits all engines alike. An engine that fails once is dropped for this model.
    rounds = {e: [] for e in cmds}
    failed = set(anvil_failures)
    for _ in range(args.rounds):
        for e, cmd in cmds.items():
            if e in failed:
                continue
            rc, out, err, rss = run_child(cmd, args.timeout)
            if rc == 0:
                try:
                    rounds[e].append(parse[e](out, rss))
                    if e in ("ort", "ov", "ov_f32", "torch"):
                        result[f"{e}_base_rss_mib"] = rounds[e][-1]["base_rss_kib"] / MIB
                    if e in ("ov", "ov_f32") and bf16:
                        result[f"{e}_precision"] = rounds[e][-1]["precision"]
                    continue
                except (ValueError, KeyError, TypeError) as ex:
                    # Not what the child should print: reported as that engine's failure.
                    err, rc = f"unreadable output ({type(ex).__name__}: {str(ex)[:80]})", -1
            failed.add(e)
            if e in ANVIL_ENGINES:
                anvil_failures[e] = error_line(err, rc)
            else:
                result["notes"].append(short_error(ENGINE_NAMES.get(e, e), err, rc))
    for e in BF16_ENGINES if bf16 else FP32_ENGINES:
        result[e] = summarise(rounds.get(e))
    result["notes"] = anvil_notes(anvil_failures) + result["notes"]

    # 3. Outputs against ORT's (test_data_set_0).
    run_outputs = {e: os.path.join(tmp, f"{name}.t{threads}.{e}") for e in ANVIL_ENGINES}
    run_cmds = {e: [args.anvil, "run", model, "--threads", str(threads), "-o", run_outputs[e]] +
                input_args + db_flags[e] for e in ANVIL_ENGINES}
    if bf16:
        output_errors(result, load_outputs(case), run_cmds, outputs, args.timeout)
    else:
        check_outputs(result, load_outputs(case), run_cmds, outputs, args.timeout)

    # 4. Which nodes the database changed: one untimed explain run of each configuration.
    if result["cascade"] and result["tuned"]:
        plans = {e: explain(anvil_base + ["--iters", "1", "--warmup", "0", "--explain"] +
                            db_flags[e], args.timeout) for e in ("cascade", "tuned")}
        errors = [f"explain {e}: {plans[e][1]}" for e in plans if plans[e][1]]
        if errors:
            result["notes"] += errors
        else:
            changed = changed_nodes(plans["cascade"][0], plans["tuned"][0], threads)
            result["changed"] = len(changed)
            result["changed_nodes"] = changed
            sources = [n["source"] for n in plans["tuned"][0].values()]
            result["tuned_sources"] = {k: sources.count(k) for k in dict.fromkeys(sources)}
            if changed:
                more = f"; +{len(changed) - 5} more" if len(changed) > 5 else ""
                result["notes"].append("changed: " + "; ".join(
                    describe_change(c) for c in changed[:5]) + more)

    if bf16 and (result["tuned"] or result["cascade"]):
        bf16_share(result, anvil_base + db_flags["tuned" if result["tuned"] else "cascade"],
                   args.timeout)

    c, t, o, pt = (result.get(e) for e in ("cascade", "tuned", "ort", "torch"))
    result["tuned_vs_cascade"] = ratio(t, c)
    result["tuned_vs_ort"] = ratio(t, o)
    result["cascade_vs_ort"] = ratio(c, o)
    # "anvil" is anvil as a user runs it after tuning (the cascade with --no-tune); kept so
    # readers of earlier JSON still find anvil, ratio (anvil / ORT) and ratio_torch.
    result["anvil"] = t or c
    result["ratio"] = ratio(result["anvil"], o)
    result["ratio_torch"] = ratio(result["anvil"], pt)
    result["ratio_ov"] = ratio(result["anvil"], result["ov"])
    result["ov_vs_ort"] = ratio(result["ov"], o)
    if bf16:
        result["bf16_speedup"] = ratio(result["fp32"], result["anvil"])
        result["ratio_ov_f32"] = ratio(result["anvil"], result.get("ov_f32"))
    return result


def peer_outputs(result, outputs):
    """{engine: (arrays, None)} of the peers that ran and saved their first run's outputs."""
    import numpy as np
    got = {}
    for e, path in outputs.items():
        if result.get(e) and os.path.exists(path):
            with np.load(path) as z:
                got[e] = [z[f"out_{i}"] for i in range(len(z.files))], None
    return got


def check_outputs(result, expected, run_cmds, outputs, timeout):
    """fp32 mode: one untimed `anvil run` per anvil configuration that ran, and OpenVINO's first
    run as its child saved it, each within the zoo tolerance of ORT's outputs."""
    got = {e: anvil_outputs(cmd, timeout) for e, cmd in run_cmds.items() if result.get(e)}
    got.update(peer_outputs(result, {"ov": outputs["ov"]}))
    checks = {}
    for e, (arrays, error) in got.items():
        checks[e] = f"run failed: {error}" if error else mismatch(expected, arrays)
        if checks[e]:
            result["notes"].append(f"{ENGINE_NAMES[e]} output mismatch: {checks[e]}")
    result["outputs_vs_ort"] = checks


def output_errors(result, expected, run_cmds, outputs, timeout):
    """bf16 mode: every engine's error against ORT's outputs of test_data_set_0 (max|y - y_ref| /
    max|y_ref|, the worst output): anvil's from one untimed `anvil run` per configuration, the
    peers' from their first run. anvil bf16's error is within bound when no larger than
    max(ERR_FLOOR, OpenVINO bf16's error); "err_over" says it is not (or is NaN)."""
    got = {e: anvil_outputs(cmd, timeout) for e, cmd in run_cmds.items() if result.get(e)}
    got.update(peer_outputs(result, outputs))
    errors = {}
    for e, (arrays, why) in got.items():
        err, why = (None, f"run failed: {why}") if why else max_rel_error(expected, arrays)
        errors[e] = err
        if why:
            result["notes"].append(f"{ENGINE_NAMES[e]} outputs: {why}")
    result["errors"] = errors
    anvil = "tuned" if result.get("tuned") else "cascade"
    err, ov_err = errors.get(anvil), errors.get("ov")
    bound = max(ERR_FLOOR, ov_err if ov_err is not None and not math.isnan(ov_err) else 0.0)
    result["err_bound"] = bound
    if err is None:
        return
    result["err_over"] = not err <= bound  # NaN is over too
    if result["err_over"]:
        result["notes"].append(f"anvil bf16 error {err:.2e} above the bound {bound:.1e}")


def bf16_share(result, cmd, timeout):
    """Which part of the model's arithmetic anvil ran in bf16, from one untimed `anvil bench
    --explain` of its bf16 configuration: the share of the flops (bf16_flops_share) and the
    nodes (bf16_nodes of compute_nodes, those with flops)."""
    nodes, why = explain_nodes(cmd + ["--iters", "1", "--warmup", "0", "--explain"], timeout)
    if why:
        result["notes"].append(f"explain: {why}")
        return
    compute = [n for n in nodes if n.get("flops", 0) > 0]
    in_bf16 = [n for n in compute if n.get("compute") in ("bf16", "fp16")]
    total = sum(n["flops"] for n in compute)
    result["bf16_flops_share"] = sum(n["flops"] for n in in_bf16) / total if total else None
    result["bf16_nodes"] = len(in_bf16)
    result["compute_nodes"] = len(compute)


ENGINE_NAMES = {"cascade": "anvil cascade", "tuned": "anvil tuned", "fp32": "anvil fp32",
                "ort": "ORT", "ov": "OpenVINO", "ov_f32": "OpenVINO f32", "torch": "torch"}
ANVIL_ENGINES = ("cascade", "tuned", "fp32")
# The engines each mode reports, in the order of the rounds. Under bf16, cascade and tuned are
# anvil's bf16 configurations, fp32 the cascade in fp32, ov OpenVINO's default configuration.
FP32_ENGINES = ("cascade", "tuned", "ort", "ov", "torch")
BF16_ENGINES = ("cascade", "tuned", "fp32", "ort", "ov", "ov_f32")
# anvil bf16's output error may reach OpenVINO bf16's on the same model, or this, whichever is
# larger (relative to the output's scale).
ERR_FLOOR = 1e-2


def fmt(v, spec=".2f"):
    return "—" if v is None else format(v, spec)


def ms(v):
    """A latency with about three significant digits: the ci models run in tens of microseconds."""
    return format(v, ".0f" if v >= 100 else ".1f" if v >= 10 else ".2f" if v >= 1 else
                  ".3f" if v >= 0.1 else ".4f")


def med_p90(s):
    return "—" if not s else f"{ms(s['median_ms'])} ({ms(s['p90_ms'])})"


def geomean(values):
    values = [v for v in values if v]
    return (math.exp(sum(math.log(v) for v in values) / len(values)), len(values)) \
        if values else (None, 0)


def scaling(results):
    """Per model, the speedup from the smallest thread count run to each larger one:
    median at the smallest / median at the larger, for tuned anvil, the cascade, ORT and
    OpenVINO."""
    rows = []
    by_model = {}
    for r in results:
        by_model.setdefault(r["model"], {})[r["threads"]] = r
    for model, runs in by_model.items():
        lo = min(runs)
        for t in sorted(runs):
            if t == lo:
                continue
            row = {"model": model, "from_threads": lo, "to_threads": t}
            for e in ("tuned", "cascade", "ort", "ov"):
                a, b = runs[lo].get(e), runs[t].get(e)
                row[e] = a["median_ms"] / b["median_ms"] if a and b else None
            rows.append(row)
    return rows


def markdown(results, meta):
    tuned = not meta["no_tune"]
    what = "the corpus" if meta.get("corpus") else f"size `{meta['size']}`"
    lines = [f"Peer benchmark, {what}, {meta['rounds']} rounds x "
             f"{meta['runs']} runs (warmup {meta['warmup']}, or more to fill "
             f"{meta.get('warmup_ms', 0):g} ms), {meta['cpu']}; "
             + (f"tuning database `{meta['tune_db']}`." if tuned else
                "no tuning (--no-tune): anvil is the cascade only."), "",
             "Latencies are medians in ms with the p90 in parentheses; a ratio below 1 means the "
             "first engine is faster.", "",
             "| model | size | thr | anvil cascade ms | anvil tuned ms | ORT ms | tuned/cascade | "
             "tuned/ORT | cascade/ORT | OpenVINO ms | anvil/OpenVINO | torch ms | anvil/torch | "
             "outputs vs ORT | tune s | problems tuned/cached | nodes changed | anvil peak RSS "
             "MiB cascade/tuned | ORT peak RSS MiB (base) | torch peak RSS MiB (base) | notes |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:"
             "|---:|---:|---:|---|"]
    for r in results:
        c, t, o, pt = (r.get(e) for e in ("cascade", "tuned", "ort", "torch"))
        tune = r.get("tune") or {}
        counts = f"{tune['tuned']}/{tune['cached']}" if "problems" in tune else "—"
        # A torch note repeated on every row would drown the table; it is printed once below.
        notes = "; ".join(n for n in r["notes"] if n != f"torch: {meta['torch_note']}")
        checks = r.get("outputs_vs_ort") or {}
        bad = [ENGINE_NAMES[e] for e, why in checks.items() if why]
        check = "—" if not checks else f"differ: {', '.join(bad)}" if bad else "match"
        lines.append(
            f"| {r['model']} | {r['size']} | {r['threads']} | {med_p90(c)} | {med_p90(t)} | "
            f"{med_p90(o)} | {fmt(r.get('tuned_vs_cascade'))} | {fmt(r.get('tuned_vs_ort'))} | "
            f"{fmt(r.get('cascade_vs_ort'))} | {med_p90(r.get('ov'))} | "
            f"{fmt(r.get('ratio_ov'))} | {med_p90(pt)} | {fmt(r.get('ratio_torch'))} | {check} | "
            f"{fmt(tune.get('seconds'))} | {counts} | {fmt(r.get('changed'), 'd')} | "
            f"{fmt(c and c['peak_rss_mib'], '.0f')}/{fmt(t and t['peak_rss_mib'], '.0f')} | "
            f"{fmt(o and o['peak_rss_mib'], '.0f')} ({fmt(r.get('ort_base_rss_mib'), '.0f')}) | "
            f"{fmt(pt and pt['peak_rss_mib'], '.0f')} "
            f"({fmt(r.get('torch_base_rss_mib'), '.0f')}) | {notes.replace('|', '/')} |")
    lines.append("")
    for label, key in meta["geomeans"].items():
        if not any(g["n"] for g in key.values()):
            continue
        lines.append(f"Geometric mean {label}: " + ", ".join(
            f"{fmt(g['value'], '.3f')} at {thr} (n={g['n']})" for thr, g in key.items()) + ".")
    if meta["scaling"]:
        lines += ["", "| model | threads | tuned speedup | cascade speedup | ORT speedup | "
                  "OpenVINO speedup |", "|---|---|---:|---:|---:|---:|"]
        for s in meta["scaling"]:
            lines.append(f"| {s['model']} | {s['from_threads']} -> {s['to_threads']} | "
                         f"{fmt(s['tuned'])} | {fmt(s['cascade'])} | {fmt(s['ort'])} | "
                         f"{fmt(s.get('ov'))} |")
    lines += ["", f"OpenVINO: {meta['ov_note'] or meta['ov_version']}.",
              "", f"PyTorch: {meta['torch_note'] or meta['torch_versions']}.",
              "", f"Peak RSS floor: a child that runs nothing reports "
              f"{fmt(meta['rss_floor_mib'], '.0f')} MiB (wait4 counts the image a child was "
              "forked from, i.e. this script's process), so smaller peaks read as that."]
    return "\n".join(lines) + "\n"


def geomeans(results, threads):
    """{label: {"T threads" | "all": {value, n}}} of the anvil ratios (and OpenVINO/ORT)."""
    out = {}
    for label, key in (("tuned/ORT", "tuned_vs_ort"), ("tuned/cascade", "tuned_vs_cascade"),
                       ("cascade/ORT", "cascade_vs_ort"), ("anvil/OpenVINO", "ratio_ov"),
                       ("OpenVINO/ORT", "ov_vs_ort")):
        per = {}
        for t in threads + [None]:
            v, n = geomean([r.get(key) for r in results if t is None or r["threads"] == t])
            per["all" if t is None else f"{t} thr"] = {"value": v, "n": n}
        if len(threads) == 1:
            per.pop("all")
        out[label] = per
    return out


def bf16_geomeans(results, threads, prec="bf16"):
    """Like geomeans, for the reduced-precision table (prec: bf16, fp16 or auto): anvil / OpenVINO
    default and anvil's speedup over its fp32 (and anvil / OpenVINO f32 when it ran)."""
    out = {}
    for label, key in ((f"anvil {prec}/OpenVINO", "ratio_ov"),
                       (f"{prec} speedup (anvil fp32/{prec})", "bf16_speedup"),
                       (f"anvil {prec}/OpenVINO f32", "ratio_ov_f32")):
        per = {}
        for t in threads + [None]:
            v, n = geomean([r.get(key) for r in results if t is None or r["threads"] == t])
            per["all" if t is None else f"{t} thr"] = {"value": v, "n": n}
        if len(threads) == 1:
            per.pop("all")
        out[label] = per
    return out


def peaks(anvil):
    """anvil sysinfo's measured one-core peaks: {"fp32": (GFLOP/s, isa), "bf16": ...}, or why
    not."""
    rc, out, err, _ = run_child([anvil, "sysinfo", "--json"], 120)
    if rc != 0:
        return {"error": error_line(err, rc)}
    try:
        j = json.loads(out)
        return {p: [j[f"peak.{p}.gflops"], j[f"peak.{p}.isa"]] for p in ("fp32", "bf16", "fp16")}
    except (ValueError, KeyError) as e:
        return {"error": f"unreadable sysinfo output ({type(e).__name__}: {str(e)[:80]})"}


def err(v):
    return "—" if v is None else format(v, ".1e")


def bf16_markdown(results, meta):
    """The table of --precision bf16: anvil bf16 against its fp32, OpenVINO's default and ORT,
    with each one's output error against ORT fp32."""
    tuned = not meta["no_tune"]
    ov_f32 = meta["ov_f32"]
    what = "the corpus" if meta.get("corpus") else f"size `{meta['size']}`"
    pk = meta["peaks"]
    peak_line = (f"anvil sysinfo: {pk['error']}" if "error" in pk else
                 "anvil sysinfo peaks (one core): " + ", ".join(
                     f"{p} {pk[p][0]:g} GFLOP/s ({pk[p][1]})" for p in ("fp32", "bf16", "fp16")))
    prec = meta["precision"]
    anvil = f"anvil {prec} tuned" if tuned else f"anvil {prec}"
    lines = [f"Peer benchmark in {prec}, {what}, {meta['rounds']} rounds x {meta['runs']} runs "
             f"(warmup {meta['warmup']}, or more to fill {meta.get('warmup_ms', 0):g} ms).", "",
             f"CPU: {meta['cpu']}; {peak_line}.", "",
             f"{anvil}: `anvil bench --precision {prec}` "
             + (f"with the tuning database `{meta['tune_db']}`" if tuned else
                "with the built-in rules (--no-db, --no-tune)")
             + "; anvil fp32: the same with the built-in rules in fp32. Latencies are medians in "
             f"ms with the p90 in parentheses; {prec} speedup = anvil fp32 / anvil {prec}; a ratio "
             "anvil/OpenVINO below 1 means anvil is faster. Errors are max|y - y_ORT| / "
             "max|y_ORT| against ORT fp32's outputs of test_data_set_0, the worst output; the "
             f"bound is max({ERR_FLOOR:g}, OpenVINO default's error); reduced flops: the share of "
             f"the model's flops anvil {prec} ran in bf16 or fp16 (its --explain).", ""]
    head = (f"| model | thr | {anvil} ms | anvil fp32 ms | {prec} speedup | OpenVINO ms | "
            "anvil/OpenVINO | " + ("OpenVINO f32 ms | " if ov_f32 else "") +
            f"ORT ms | anvil {prec} err | OpenVINO err | within bound | reduced flops | notes |")
    lines += [head, "|---|---:|" + "---:|" * (head.count("|") - 4) + "---|"]
    for r in results:
        a, errs = r.get("anvil"), r.get("errors") or {}
        anvil_err = errs.get("tuned" if r.get("tuned") else "cascade")
        within = "—" if "err_over" not in r else "**no**" if r["err_over"] else "yes"
        share = r.get("bf16_flops_share")
        share = "—" if share is None else f"{100 * share:.0f}%"
        lines.append(
            f"| {r['model']} | {r['threads']} | {med_p90(a)} | {med_p90(r.get('fp32'))} | "
            f"{fmt(r.get('bf16_speedup'))} | {med_p90(r.get('ov'))} | {fmt(r.get('ratio_ov'))} | "
            + (f"{med_p90(r.get('ov_f32'))} | " if ov_f32 else "") +
            f"{med_p90(r.get('ort'))} | {err(anvil_err)} | {err(errs.get('ov'))} | {within} | "
            f"{share} | {'; '.join(r['notes']).replace('|', '/')} |")
    lines.append("")
    for label, key in meta["geomeans"].items():
        if not any(g["n"] for g in key.values()):
            continue
        lines.append(f"Geometric mean {label}: " + ", ".join(
            f"{fmt(g['value'], '.3f')} at {thr} (n={g['n']})" for thr, g in key.items()) + ".")
    over = [f"{r['model']} at {r['threads']}" for r in results if r.get("err_over")]
    lines += ["", f"anvil {prec} error above the bound: " + (", ".join(over) if over else "none")
              + "."]
    if meta["scaling"]:
        lines += ["", f"| model | threads | anvil {prec} speedup | ORT speedup | OpenVINO speedup |",
                  "|---|---|---:|---:|---:|"]
        for sc in meta["scaling"]:
            lines.append(f"| {sc['model']} | {sc['from_threads']} -> {sc['to_threads']} | "
                         f"{fmt(sc['tuned'] if tuned else sc['cascade'])} | {fmt(sc['ort'])} | "
                         f"{fmt(sc.get('ov'))} |")
    found = {label: sorted({r[key] for r in results if r.get(key)})
             for label, key in (("default", "ov_precision"), ("f32", "ov_f32_precision"))}
    reported = [f"{label} {'/'.join(p)}" for label, p in found.items() if p]
    lines += ["", f"OpenVINO: {meta['ov_note'] or meta['ov_version']}"
              + (f"; the inference precision it reported: {', '.join(reported)}" if reported
                 else "") + "."]
    return "\n".join(lines) + "\n"


def progress(r, precision):
    """One model and thread count's line on stderr."""
    lat = {e: ms(r[e]["median_ms"]) if r.get(e) else "—" for e in ENGINE_NAMES}
    head = f"{r['model']} threads={r['threads']}: "
    if precision != "fp32":
        errors = r.get("errors") or {}
        return (head + f"{precision} cascade {lat['cascade']} ms, tuned {lat['tuned']} ms, fp32 "
                f"{lat['fp32']} ms, ORT {lat['ort']} ms, OpenVINO {lat['ov']} ms; errors " +
                ", ".join(f"{ENGINE_NAMES[e]} {err(v)}" for e, v in errors.items()))
    tune = r.get("tune") or {}
    return (head + f"cascade {lat['cascade']} ms, tuned {lat['tuned']} ms "
            f"(tune {fmt(tune.get('seconds'))} s, {fmt(r.get('changed'), 'd')} nodes changed), "
            f"ORT {lat['ort']} ms, OpenVINO {lat['ov']} ms, torch {lat['torch']} ms")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} CPUs"
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child-ort":
        model, npz, threads, warmup, runs = sys.argv[2:7]
        outputs = sys.argv[7] if len(sys.argv) > 7 else None
        return ort_child(model, npz, int(threads), int(warmup), int(runs), outputs)
    if len(sys.argv) > 1 and sys.argv[1] == "--child-ov":
        model, npz, threads, warmup, runs, outputs, precision = sys.argv[2:9]
        return ov_child(model, npz, int(threads), int(warmup), int(runs), outputs, precision)
    if len(sys.argv) > 1 and sys.argv[1] == "--child-twin":
        return twin_child(sys.argv[2], sys.argv[3])
    if len(sys.argv) > 1 and sys.argv[1] == "--child-torch":
        twin, npz, threads, warmup, runs = sys.argv[2:7]
        return torch_child(twin, npz, int(threads), int(warmup), int(runs))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated model names, from the zoo and the corpus "
                    "(default: all of the zoo, or of the corpus with --corpus)")
    ap.add_argument("--corpus", action="store_true",
                    help="run the corpus of PyTorch exports (scripts/gen_corpus.py, generated on "
                         "first use when torch is installed) instead of the zoo")
    ap.add_argument("--corpus-dir", default=DEFAULT_CORPUS,
                    help="the corpus folder (default models/corpus)")
    ap.add_argument("--no-openvino", action="store_true",
                    help="leave out the OpenVINO engine even when it is installed")
    ap.add_argument("--precision", choices=["fp32", "bf16", "fp16", "auto"], default="fp32",
                    help="bf16 (fp16, auto): anvil's cascade (and tuned) in that precision with "
                         "its fp32 cascade beside "
                         "them, OpenVINO in its default configuration (bf16 on CPUs with "
                         "AVX512-BF16 or AMX), each engine's output error against ORT fp32; "
                         "no torch (default fp32)")
    ap.add_argument("--ov-f32", action="store_true",
                    help="with --precision bf16/fp16/auto: OpenVINO's f32 configuration too")
    ap.add_argument("--size", choices=["full", "ci"], default="ci")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts (default 1)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per round (default 10)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds of alternating engines (default 2)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs per round (default 2)")
    ap.add_argument("--warmup-ms", type=float, default=300.0,
                    help="at least this long warming up per round: the warmup count grows to "
                         "fill it at the model's latency (default 300; 0: the count alone)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per child (default 1800)")
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build-release", "anvil"))
    ap.add_argument("--zoo", help="model folder (default build-release/peer_zoo/<size>)")
    ap.add_argument("--tune-db", default=os.path.join(ROOT, "build-release", "peer_zoo",
                                                      "tuning.db"),
                    help="tuning database anvil tune fills and tuned anvil reads "
                         "(default build-release/peer_zoo/tuning.db)")
    ap.add_argument("--tune-budget", type=int,
                    help="seconds anvil tune may measure per model and thread count "
                         "(default: no limit; problems left out run the cascade)")
    ap.add_argument("--no-tune", action="store_true",
                    help="no tuning: time anvil's cascade (built-in rules, --no-db) only")
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--md", help="write the markdown table here")
    args = ap.parse_args()
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        ap.error(f"--threads needs comma-separated whole numbers, got '{args.threads}'")
    if min(threads) < 1 or args.runs < 1 or args.rounds < 1 or args.warmup < 0:
        ap.error("--threads, --runs and --rounds must be positive, --warmup not negative")
    if not os.access(args.anvil, os.X_OK):
        ap.error(f"{args.anvil} is not an executable; build it with scripts/build.sh release "
                 "or pass --anvil")
    if args.ov_f32 and args.precision == "fp32":
        ap.error("--ov-f32 needs --precision bf16, fp16 or auto (OpenVINO runs f32 without it)")
    args.precision_flags = ["--precision", args.precision] if args.precision != "fp32" else []
    python = sys.executable
    args.tune_db = os.path.abspath(args.tune_db)
    os.makedirs(os.path.dirname(args.tune_db), exist_ok=True)
    zoo = args.zoo or os.path.join(ROOT, "build-release", "peer_zoo", args.size)
    names = [n for n in args.models.split(",") if n] if args.models else None
    cases, args.kinds, args.missing = ensure_models(
        names, args.size, zoo, python, os.path.abspath(args.corpus_dir) if args.corpus else None)
    args.ov_note = "left out (--no-openvino)" if args.no_openvino else ov_status()
    ov_version = None
    if args.ov_note is None:
        from importlib import metadata
        hint = ("no INFERENCE_PRECISION_HINT (its default)" +
                (", and INFERENCE_PRECISION_HINT=f32 (OpenVINO f32)" if args.ov_f32 else "")
                if args.precision != "fp32" else "INFERENCE_PRECISION_HINT=f32")
        ov_version = (f"openvino {metadata.version('openvino')}, CPU plugin, {hint}, "
                      "INFERENCE_NUM_THREADS=T, PERFORMANCE_HINT=LATENCY, one stream, no CPU "
                      "pinning")
    args.torch_note = torch_status()
    args.twin_notes = {}
    torch_versions = None
    if args.torch_note is None:
        from importlib import metadata
        torch_versions = (f"torch {metadata.version('torch')}, onnx2torch "
                          f"{metadata.version('onnx2torch')}; twins from bench/torch_twin.py, "
                          "checked against ORT on test_data_set_0 before timing")
    results = []
    with tempfile.TemporaryDirectory(prefix="anvil_peer_") as tmp:
        for name, case in cases.items():
            for t in threads:
                r = bench_model(name, case, t, args, python, tmp)
                results.append(r)
                print(progress(r, args.precision), file=sys.stderr)
    # /bin/true's peak is this process's resident size at the fork: the least any child reports.
    meta = {"size": args.size, "rounds": args.rounds, "runs": args.runs,
            "warmup": args.warmup, "warmup_ms": args.warmup_ms, "cpu": cpu_name(), "torch_note": args.torch_note,
            "torch_versions": torch_versions, "ov_note": args.ov_note,
            "ov_version": ov_version, "anvil": args.anvil, "corpus": args.corpus,
            "no_tune": args.no_tune, "tune_db": None if args.no_tune else args.tune_db,
            "geomeans": geomeans(results, threads), "scaling": scaling(results),
            "rss_floor_mib": run_child(["true"], 60)[3] / MIB}
    if args.precision != "fp32":
        meta.update({"precision": args.precision, "ov_f32": args.ov_f32, "peaks": peaks(args.anvil),
                     "geomeans": bf16_geomeans(results, threads, args.precision)})
        meta.pop("torch_note")
        meta.pop("torch_versions")
    md = bf16_markdown(results, meta) if args.precision != "fp32" else markdown(results, meta)
    print(md, end="")
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
