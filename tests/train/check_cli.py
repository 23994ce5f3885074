"""`anvil train` beyond the happy path: resuming from a checkpoint gives the very weights of an
uninterrupted run; bad input gets a clear error and loses nothing.

    check_cli.py ANVIL OUT_DIR   (after digits.py has written OUT_DIR's data and model)

Checks, on the digits CNN of digits.py (same OUT_DIR):
  - 4 epochs in one run, and 2 epochs + --resume to 4, end with identical weights;
  - a truncated checkpoint: INVALID_ARGUMENT naming the checkpoint, no trained model written;
  - labels of the wrong dtype: an error naming the labels and what the loss wants;
  - a learning rate that makes the loss overflow: an error naming the step, and the checkpoint
    of the last good epoch still loads;
  - an op without a gradient rule on the way to the loss: an error naming the node;
  - --loss nll on a model ending in LogSoftmax: step 1's loss is PyTorch's nll_loss (mean) and
    its SGD update the numpy gradient's, training lowers the loss and reports accuracy; labels
    of the wrong dtype or out of range get an error naming them;
  - anvil tune --train: the training graph's problems and the conv layers' grouped choices
    land in the database, the report names them and times steps before and after; a rerun
    measures nothing; --train without --data, --data without --train and a missing .npz are
    refused with clear errors.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def train(anvil, out, *args):
    return subprocess.run([anvil, "train", os.path.join(out, "cnn.onnx"), "--data",
                           os.path.join(out, "train.npz"), "--threads", "1", "--seed", "5",
                           "--optimizer", "adam", "--lr", "0.003", "-q", *args],
                          capture_output=True, text=True)


def weights(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def main():
    anvil, out = sys.argv[1], sys.argv[2]
    d = os.path.join(out, "cli")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    full, part, ck = (os.path.join(d, n) for n in ("full.onnx", "part.onnx", "ck.bin"))
    r = train(anvil, out, "--epochs", "4", "-o", full)
    check(r.returncode == 0, f"4 epochs in one run ({r.stderr.strip()[-200:]})")
    r = train(anvil, out, "--epochs", "2", "--checkpoint", ck, "-o", part)
    check(r.returncode == 0 and os.path.exists(ck), "2 epochs with a checkpoint")
    r = train(anvil, out, "--epochs", "4", "--checkpoint", ck, "--resume", "-o", part)
    check(r.returncode == 0, f"resumed to 4 epochs ({r.stderr.strip()[-200:]})")
    if r.returncode == 0:
        a, b = weights(full), weights(part)
        same = all(np.array_equal(a[k], b[k]) for k in a)
        check(same, "resumed run ends with the uninterrupted run's weights, bit for bit")
    # a damaged checkpoint
    bad = os.path.join(d, "bad.bin")
    with open(ck, "rb") as f:
        data = f.read()
    with open(bad, "wb") as f:
        f.write(data[: len(data) // 2])
    out_bad = os.path.join(d, "never.onnx")
    r = train(anvil, out, "--epochs", "3", "--checkpoint", bad, "--resume", "-o", out_bad)
    check(r.returncode == 11 and "bad.bin" in r.stderr and "checksum" in r.stderr
          and not os.path.exists(out_bad), f"truncated checkpoint refused: {r.stderr.strip()}")
    # labels of the wrong dtype
    z = np.load(os.path.join(out, "train.npz"))
    wrong = os.path.join(d, "wrong.npz")
    np.savez(wrong, x=z["x"], labels=z["labels"].astype(np.float32))
    r = subprocess.run([anvil, "train", os.path.join(out, "cnn.onnx"), "--data", wrong, "-q",
                        "-o", out_bad], capture_output=True, text=True)
    check(r.returncode == 11 and "labels" in r.stderr and "int64" in r.stderr.lower(),
          f"float labels for cross-entropy refused: {r.stderr.strip()}")
    # the loss overflows: the step is named, the last good checkpoint kept
    ck2 = os.path.join(d, "ck2.bin")
    r = train(anvil, out, "--epochs", "1", "--checkpoint", ck2, "-o", part)
    r = train(anvil, out, "--lr", "1e30", "--epochs", "3", "--checkpoint", ck2, "--resume", "-o",
              out_bad)
    check(r.returncode != 0 and "step" in r.stderr and ("NaN" in r.stderr or "infinite" in
                                                        r.stderr),
          f"diverging loss stops naming the step: {r.stderr.strip()}")
    r = train(anvil, out, "--epochs", "2", "--checkpoint", ck2, "--resume", "-o", part)
    check(r.returncode == 0, "the checkpoint of the last good epoch still resumes")
    # an op with no gradient rule between a weight and the loss
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="proj"),
         helper.make_node("Cos", ["m"], ["y"], name="the_cos")], "nograd",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        initializer=[numpy_helper.from_array(np.ones((4, 3), np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, "nograd.onnx"))
    np.savez(os.path.join(d, "nograd.npz"), x=np.ones((8, 4), np.float32),
             labels=np.ones((8, 3), np.float32))
    r = subprocess.run([anvil, "train", os.path.join(d, "nograd.onnx"), "--data",
                        os.path.join(d, "nograd.npz"), "--loss", "mse", "--batch", "4", "-q",
                        "-o", out_bad], capture_output=True, text=True)
    check(r.returncode != 0 and "the_cos" in r.stderr and "gradient" in r.stderr,
          f"an op without a gradient rule is named: {r.stderr.strip()}")
    # Dropout trains: ratio 0 gives the very weights of no Dropout at all; ratio 0.5 draws masks
    # that a seed reproduces and another seed changes
    def dropout_model(path, ratio):
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"])]
        if ratio is not None:
            nodes.append(helper.make_node("Dropout", ["h", "ratio"], ["hd"]))
        nodes.append(helper.make_node("MatMul", ["hd" if ratio is not None else "h", "w2"],
                                      ["y"]))
        inits = [numpy_helper.from_array(np.linspace(-1, 1, 32).reshape(4, 8).astype(np.float32),
                                         "w1"),
                 numpy_helper.from_array(np.linspace(1, -1, 24).reshape(8, 3).astype(np.float32),
                                         "w2")]
        if ratio is not None:
            inits.append(numpy_helper.from_array(np.array(ratio, np.float32), "ratio"))
        gr = helper.make_graph(nodes, "drop",
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                               initializer=inits)
        mm = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
        mm.ir_version = 8
        onnx.save(mm, path)

    rng = np.random.default_rng(9)
    np.savez(os.path.join(d, "drop.npz"), x=rng.normal(0, 1, (16, 4)).astype(np.float32),
             labels=rng.normal(0, 1, (16, 3)).astype(np.float32))
    runs = {}
    for tag, ratio, seed in (("none", None, 1), ("zero", 0.0, 1), ("half1", 0.5, 1),
                             ("half1b", 0.5, 1), ("half2", 0.5, 2)):
        mp = os.path.join(d, f"drop_{tag}.onnx")
        dropout_model(mp, ratio)
        outp = os.path.join(d, f"drop_{tag}_t.onnx")
        r = subprocess.run([anvil, "train", mp, "--data", os.path.join(d, "drop.npz"), "--loss",
                            "mse", "--batch", "4", "--epochs", "3", "--seed", str(seed), "-q",
                            "--threads", "1", "-o", outp], capture_output=True, text=True)
        runs[tag] = weights(outp) if r.returncode == 0 else None
        if r.returncode:
            print(r.stderr)
    ok = all(v is not None for v in runs.values())
    same = lambda a, b: all(np.array_equal(runs[a][k], runs[b][k]) for k in ("w1", "w2"))
    check(ok and same("none", "zero"), "Dropout with ratio 0 trains as no Dropout, bit for bit")
    check(ok and same("half1", "half1b") and not same("half1", "half2") and
          not same("half1", "none"), "Dropout's masks: one seed reproduces them, another changes them")
    # online tuning over the first steps: forward and backward nodes try their candidates and
    # the winners land in the database, while the run still trains
    import sqlite3
    db = os.path.join(d, "online.db")
    r = train(anvil, out, "--epochs", "2", "--tune", "online", "--tune-rounds", "2", "--db", db,
              "--json", "-o", os.path.join(d, "online.onnx"))
    n_rec = 0
    if r.returncode == 0 and os.path.exists(db):
        with sqlite3.connect(db) as con:
            n_rec = con.execute("select count(*) from tune_records").fetchone()[0]
    acc = json.loads(r.stdout)["train_accuracy"] if r.returncode == 0 else 0
    check(n_rec > 5 and acc > 0.8,
          f"--tune online: {n_rec} problems of the training graph tuned, accuracy {acc:.3f}")
    # ... and each conv layer's grouped choice, tried over the first steps, decided and written
    online_groups = []
    if r.returncode == 0 and os.path.exists(db):
        with sqlite3.connect(db) as con:
            online_groups = con.execute(
                "select variant, source from tune_records where key like "
                "'rewrite|train_conv|%'").fetchall()
    check(len(online_groups) >= 2 and all(src == "online" and v in ("tuned", "anvil", "onednn")
                                          for v, src in online_groups),
          f"--tune online decided the conv layers' grouped choices: {online_groups}")
    # offline: the training graph measured before the first step, then trained with the winners
    db2 = os.path.join(d, "offline.db")
    r = train(anvil, out, "--epochs", "2", "--tune", "offline", "--db", db2, "--json", "-o",
              os.path.join(d, "offline.onnx"))
    n_rec = 0
    if r.returncode == 0 and os.path.exists(db2):
        with sqlite3.connect(db2) as con:
            n_rec = con.execute("select count(*) from tune_records").fetchone()[0]
    acc = json.loads(r.stdout)["train_accuracy"] if r.returncode == 0 else 0
    check(n_rec > 10 and acc > 0.8,
          f"--tune offline: {n_rec} records, accuracy {acc:.3f}")
    # grouped choices: each conv layer's forward, input-gradient and weight-gradient passes
    # were timed together and decided as one ("rewrite|train_conv|..." records); a record that
    # says "onednn" makes all three passes run oneDNN's primitives, one that says "anvil" none
    groups = []
    if r.returncode == 0:
        with sqlite3.connect(db2) as con:
            groups = [k for (k,) in con.execute(
                "select key from tune_records where key like 'rewrite|train_conv|%'")]
    check(len(groups) >= 2, f"--tune offline decided {len(groups)} conv layers' grouped choices")
    ex = subprocess.run([anvil, "db", "export", "--json", "--db", db2], capture_output=True,
                        text=True)
    has_dnnl = "vendor.onednn = 1" in subprocess.run([anvil, "sysinfo"], capture_output=True,
                                                     text=True).stdout
    if groups and ex.returncode == 0:
        exported = json.loads(ex.stdout)
        # per-node records naming oneDNN's pass for every conv node: "tuned" keeps them,
        # "anvil" sets them aside, "onednn" needs none
        dnnl = {"Conv|": "dnnl_conv", "ConvTranspose|": "dnnl_deconv",
                "anvil.ConvGradW|": "dnnl_conv_grad_w"}
        per_node = [dict(x, variant=v, params="") for x in exported["records"]
                    for p, v in dnnl.items() if x["key"].startswith(p)] if has_dnnl else []
        for choice in (["onednn", "anvil", "tuned"] if has_dnnl else ["anvil"]):
            recs = [dict(x, variant=choice) for x in exported["records"] if x["key"] in groups]
            if choice != "onednn":
                recs += per_node
            fj, fdb = os.path.join(d, f"{choice}.json"), os.path.join(d, f"{choice}.db")
            with open(fj, "w") as f:
                json.dump(dict(exported, records=recs), f)
            if os.path.exists(fdb):
                os.remove(fdb)
            imp = subprocess.run([anvil, "db", "import", fj, "--db", fdb], capture_output=True,
                                 text=True)
            prof = os.path.join(d, f"{choice}.trace.json")
            r2 = train(anvil, out, "--epochs", "1", "--db", fdb, "--profile", prof, "-o",
                       os.path.join(d, f"{choice}.onnx"))
            ran = set()
            check(imp.returncode == 0 and r2.returncode == 0,
                  f"'{choice}' records import and train ({imp.stderr.strip()}{r2.stderr[-200:]})")
            if imp.returncode == 0 and r2.returncode == 0:
                for e in json.load(open(prof))["traceEvents"]:
                    a = e.get("args", {})
                    if a.get("op") in ("Conv", "ConvTranspose", "anvil.ConvGradW"):
                        ran.add(a.get("variant"))
            vendor = {v for v in ran if v and v.startswith("dnnl_")}
            if choice == "anvil":
                check(ran and not vendor,
                      f"grouped choice 'anvil' runs anvil's own kernels, the database's oneDNN "
                      f"winners set aside ({sorted(ran)})")
            else:
                check({"dnnl_conv", "dnnl_conv_grad_w"} <= vendor,
                      f"grouped choice '{choice}' runs the layers on oneDNN ({sorted(ran)})")
    # a batch that the model's declared static batch dim cannot take
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "static",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])],
        initializer=[numpy_helper.from_array(np.ones((4, 3), np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, "static.onnx"))
    r = subprocess.run([anvil, "train", os.path.join(d, "static.onnx"), "--data",
                        os.path.join(d, "nograd.npz"), "--loss", "mse", "--batch", "2", "-q",
                        "-o", out_bad], capture_output=True, text=True)
    check(r.returncode == 11 and "declared [4,4]" in r.stderr and "'x'" in r.stderr,
          f"a batch the model's static dims refuse is named: {r.stderr.strip()}")
    # a model with Constant nodes (as torch.onnx.export writes them): the export keeps their
    # values, and ONNX Runtime loads it
    g = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
            np.array([0.5, -1.0, 2.0], np.float32))),
         helper.make_node("MatMul", ["x", "w"], ["m"]),
         helper.make_node("Add", ["m", "k"], ["y"])], "constants",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        initializer=[numpy_helper.from_array(np.ones((4, 3), np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, "constants.onnx"))
    np.savez(os.path.join(d, "constants.npz"), x=np.ones((8, 4), np.float32),
             labels=np.zeros((8, 3), np.float32))
    out_c = os.path.join(d, "constants_trained.onnx")
    r = subprocess.run([anvil, "train", os.path.join(d, "constants.onnx"), "--data",
                        os.path.join(d, "constants.npz"), "--loss", "mse", "--batch", "4", "-q",
                        "-o", out_c], capture_output=True, text=True)
    ok = r.returncode == 0
    if ok:
        import onnxruntime as ort
        y = ort.InferenceSession(out_c, providers=["CPUExecutionProvider"]).run(
            None, {"x": np.ones((2, 4), np.float32)})[0]
        w = weights(out_c)["w"]
        ok = np.allclose(y, np.ones((2, 4)) @ w + np.array([0.5, -1.0, 2.0]), atol=1e-5)
    check(ok, f"a trained model with Constant nodes loads in ONNX Runtime ({r.stderr.strip()})")
    # --loss nll: a linear classifier ending in LogSoftmax, on 256 digits
    rng = np.random.default_rng(3)
    w0 = rng.normal(0, 0.1, (10, 64)).astype(np.float32)
    b0 = rng.normal(0, 0.1, 10).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["f"]),
         helper.make_node("Gemm", ["f", "w", "b"], ["z"], transB=1),
         helper.make_node("LogSoftmax", ["z"], ["y"], axis=1)], "nll",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        initializer=[numpy_helper.from_array(w0, "w"), numpy_helper.from_array(b0, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    nll_model, nll_data = os.path.join(d, "nll.onnx"), os.path.join(d, "nll.npz")
    onnx.save(m, nll_model)
    xs, ls = z["x"][:256], z["labels"][:256]
    np.savez(nll_data, x=xs, labels=ls)

    def nll_train(*args, data=nll_data):
        return subprocess.run([anvil, "train", nll_model, "--data", data, "--loss", "nll",
                               "--threads", "1", "-q", "--json", *args],
                              capture_output=True, text=True)

    # PyTorch's nll_loss(log_softmax(z), labels), reduction mean, and its gradient, in float64
    zz = xs.reshape(256, 64).astype(np.float64) @ w0.T.astype(np.float64) + b0
    zz -= zz.max(axis=1, keepdims=True)
    logp = zz - np.log(np.exp(zz).sum(axis=1, keepdims=True))
    want = -logp[np.arange(256), ls].mean()
    dz = (np.exp(logp) - np.eye(10)[ls]) / 256
    out1 = os.path.join(d, "nll_step1.onnx")
    r = nll_train("--optimizer", "sgd", "--lr", "1", "--epochs", "1", "--batch", "256", "-o", out1)
    ok = r.returncode == 0
    got = json.loads(r.stdout)["train_loss"] if ok else float("nan")
    if ok:
        w1 = weights(out1)
        dw = w0 - w1["w"]
        ok = np.allclose(dw, dz.T @ xs.reshape(256, 64), atol=1e-6, rtol=1e-4) and np.allclose(
            b0 - w1["b"], dz.sum(axis=0), atol=1e-6, rtol=1e-4)
    check(ok and abs(got - want) < 1e-5 * max(1.0, want),
          f"--loss nll: step 1's loss {got:.6f} is nll_loss's {want:.6f}, and the SGD update "
          f"is its gradient's ({r.stderr.strip()[-200:]})")
    r = nll_train("--optimizer", "adam", "--lr", "0.01", "--epochs", "10", "--batch", "32",
                  "--val", nll_data, "-o", os.path.join(d, "nll_trained.onnx"))
    res = json.loads(r.stdout) if r.returncode == 0 else {}
    check(res.get("val_loss", 1e9) < 0.5 * want and res.get("val_accuracy", 0) > 0.9,
          f"--loss nll trains: loss {want:.3f} -> {res.get('val_loss', float('nan')):.3f}, "
          f"accuracy {res.get('val_accuracy', 0):.3f} ({r.stderr.strip()[-200:]})")
    bad_data = os.path.join(d, "nll_float.npz")
    np.savez(bad_data, x=xs, labels=ls.astype(np.float32))
    r = nll_train("-o", out_bad, data=bad_data)
    check(r.returncode == 11 and "labels" in r.stderr and "nll" in r.stderr and
          "int64" in r.stderr.lower() and not os.path.exists(out_bad),
          f"float labels for --loss nll refused: {r.stderr.strip()}")
    bad_data = os.path.join(d, "nll_range.npz")
    np.savez(bad_data, x=xs, labels=np.where(np.arange(256) == 7, 10, ls))
    r = nll_train("--batch", "256", "-o", out_bad, data=bad_data)
    check(r.returncode != 0 and "target 10" in r.stderr and "class index" in r.stderr and
          not os.path.exists(out_bad),
          f"a label out of range for --loss nll refused: {r.stderr.strip()}")
    # anvil tune --train: the training graph tuned offline, as anvil train --tune offline tunes
    # it, into the same database; then training steps timed without it and with it
    def tune_train(*args):
        return subprocess.run([anvil, "tune", os.path.join(out, "cnn.onnx"), *args],
                              capture_output=True, text=True)

    db3 = os.path.join(d, "tune_train.db")
    r = tune_train("--train", "--data", os.path.join(out, "train.npz"), "--db", db3, "--runs",
                   "3", "--json", "-q")
    res = json.loads(r.stdout) if r.returncode == 0 else {}
    groups3 = []
    if r.returncode == 0 and os.path.exists(db3):
        with sqlite3.connect(db3) as con:
            groups3 = [k for (k,) in con.execute(
                "select key from tune_records where key like 'rewrite|train_conv|%'")]
    reported = res.get("grouped_choices", [])
    check(r.returncode == 0 and res.get("tuned_problems", 0) > 5 and len(groups3) >= 2 and
          sorted(g["key"] for g in reported) == sorted(groups3) and
          all(g["choice"] in ("tuned", "anvil", "onednn") for g in reported),
          f"anvil tune --train: {res.get('tuned_problems')} problems tuned, grouped choices "
          f"{[(g['key'].split('shapes=')[-1][:40], g['choice']) for g in reported]} written "
          f"({r.stderr.strip()[-300:]})")
    check(res.get("runs") == 3 and res.get("cascade_ms", 0) > 0 and res.get("tuned_ms", 0) > 0,
          f"anvil tune --train times training steps before and after: cascade "
          f"{res.get('cascade_ms')} ms, tuned {res.get('tuned_ms')} ms per step")
    r = tune_train("--train", "--data", os.path.join(out, "train.npz"), "--db", db3, "--runs",
                   "0", "--json", "-q")
    res = json.loads(r.stdout) if r.returncode == 0 else {}
    check(r.returncode == 0 and res.get("tuned_problems") == 0 and "cascade_ms" not in res,
          f"anvil tune --train again: the database has every problem, none measured "
          f"({res.get('tuned_problems')}; {r.stderr.strip()[-200:]})")
    r = tune_train("--train", "--db", db3)
    check(r.returncode == 2 and "--train needs --data" in r.stderr,
          f"--train without --data: a usage error ({r.stderr.strip()})")
    r = tune_train("--data", os.path.join(out, "train.npz"), "--db", db3)
    check(r.returncode == 2 and "--data belongs to --train" in r.stderr,
          f"--data without --train: a usage error ({r.stderr.strip()})")
    r = tune_train("--train", "--data", os.path.join(d, "absent.npz"), "--db", db3)
    check(r.returncode == 16 and "ANVIL_ERR_IO" in r.stderr and "absent.npz" in r.stderr,
          f"--train with a missing .npz: an I/O error naming it ({r.stderr.strip()})")
    print(f"{len(FAILS)} failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
