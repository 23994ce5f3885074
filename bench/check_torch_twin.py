#!/usr/bin/env python3
"""Checks bench/torch_twin.py's PyTorch twins on the generated model zoo (ctest zoo.torch_twin).

Usage: check_torch_twin.py ZOO_DIR   (ZOO_DIR holds gen_zoo.py's cases, e.g. build/zoo at size ci)

For every model that tests/models/gen_zoo.py lists:
  - the twin builds and reproduces *every* data set of the case (the transformers' second set has
    another sequence length, if_loop's four take both If branches and run the Loop) within the zoo
    tolerance, run under torch.inference_mode() as bench/peer.py runs it;
  - the twin's tensors are the ONNX initializers: the largest initializer appears bit for bit
    among the twin's buffers and parameters (LSTM weights are re-ordered, so lstm is exempt).
Then the gate itself: a resnet50 twin with one weight perturbed must be rejected by check_twin,
or the benchmark could time a wrong model. Exit 0 when all holds, 1 otherwise.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GEN_ZOO = os.path.join(os.path.dirname(HERE), "tests", "models", "gen_zoo.py")
sys.path.insert(0, HERE)


def weights_shared(twin, model_path):
    """True when the model's largest float initializer is one of the twin's tensors, exactly."""
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
    model = onnx.load(model_path)
    floats = [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
    if not floats:
        return True
    big = max(floats, key=lambda t: int(np.prod(t.dims)))
    ref = torch.from_numpy(np.array(numpy_helper.to_array(big)))
    tensors = list(twin.buffers()) + list(twin.parameters())
    for t in tensors:
        if t.shape == ref.shape and torch.equal(t, ref):
            return True
        # nn.Linear stores Gemm's transB weight as given, MatMul weights are not transposed;
        # a converter may still keep a transposed copy.
        if t.dim() == 2 and t.t().shape == ref.shape and torch.equal(t.t(), ref):
            return True
    return False


def main(argv):
    if len(argv) != 1:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    zoo = argv[0]
    import torch
    import torch_twin
    torch.set_num_threads(1)
    names = subprocess.run([sys.executable, GEN_ZOO, "list"], capture_output=True, text=True,
                           check=True).stdout.split()
    failures = []
    for name in names:
        case = os.path.join(zoo, name)
        model_path = os.path.join(case, "model.onnx")
        if not os.path.isfile(model_path):
            failures.append(f"{name}: {model_path} missing (run gen_zoo.py all {zoo})")
            continue
        try:
            twin, inputs = torch_twin.load_twin(model_path)
        except Exception as e:  # noqa: BLE001 - report every model, not just the first
            failures.append(f"{name}: no twin: {type(e).__name__}: {e}")
            continue
        k = 0
        while os.path.isdir(os.path.join(case, f"test_data_set_{k}")):
            feeds, expected = torch_twin.read_case(case, k)
            with torch.inference_mode():
                why = torch_twin.compare(torch_twin.run_twin(twin, inputs, feeds), expected)
            if why:
                failures.append(f"{name} data set {k}: {why}")
            k += 1
        if k == 0:
            failures.append(f"{name}: no test_data_set_0")
        if name != "lstm" and not weights_shared(twin, model_path):
            failures.append(f"{name}: the largest initializer is not among the twin's tensors")
        print(f"{name}: {k} data set(s) checked")

    # The gate must reject a wrong twin: scale one conv weight of resnet50 by 1.5.
    case = os.path.join(zoo, "resnet50")
    if os.path.isfile(os.path.join(case, "model.onnx")):
        twin, inputs = torch_twin.load_twin(os.path.join(case, "model.onnx"))
        conv = next(m for m in twin.modules() if isinstance(m, torch.nn.Conv2d))
        with torch.no_grad():
            conv.weight.mul_(1.5)
        if torch_twin.check_twin(twin, inputs, case) is None:
            failures.append("resnet50 with a perturbed conv weight passed check_twin")
        else:
            print("resnet50 with a perturbed weight: rejected, as it must be")

    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    print(f"{len(names)} twins, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
