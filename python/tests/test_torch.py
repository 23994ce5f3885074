"""anvil.torch: modules optimized in one line and torch.compile(backend="anvil") give eager
PyTorch's outputs; parameters changed in PyTorch reach anvil without a new export; a training
loop through an optimized module trains. Skips where torch is not installed."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (ANVIL_TORCH=1 "
                                            "scripts/setup.sh installs it)")
import anvil.torch  # noqa: E402

THREADS = 2


def close(a, b, rtol=1e-3, atol=1e-4):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=rtol, atol=atol)


def resnet18():
    tv = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    return tv.models.resnet18(num_classes=10).eval(), (torch.randn(2, 3, 64, 64),)


def mobilenet_v3():
    tv = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    return tv.models.mobilenet_v3_small(num_classes=10).eval(), (torch.randn(2, 3, 96, 96),)


class BertLogits(torch.nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, ids, mask):
        return self.bert(input_ids=ids, attention_mask=mask).logits


def bert():
    tr = pytest.importorskip("transformers")
    cfg = tr.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=512, num_labels=3, attn_implementation="eager")
    torch.manual_seed(0)
    m = BertLogits(tr.BertForSequenceClassification(cfg)).eval()
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    return m, (ids, torch.ones(2, 16, dtype=torch.int64))


MODELS = {"resnet18": resnet18, "mobilenet_v3": mobilenet_v3, "bert": bert}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_optimize_matches_eager(name):
    model, args = MODELS[name]()
    fast = anvil.torch.optimize(model, args, threads=THREADS, tuning="off")
    with torch.no_grad():
        close(fast(*args), model(*args))
        # another batch size: the batch dimension stays dynamic
        more = tuple(torch.cat([a, a]) for a in args)
        close(fast(*more), model(*more))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_torch_compile_backend(name):
    import torch._dynamo
    torch._dynamo.reset()
    model, args = MODELS[name]()
    compiled = torch.compile(model, backend="anvil")
    with torch.no_grad():
        close(compiled(*args), model(*args))


def test_parameters_reach_anvil_without_a_new_export():
    model, args = resnet18()
    fast = anvil.torch.optimize(model, args, threads=THREADS, tuning="off")
    exported = fast._proto
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.5)
        close(fast(*args), model(*args))
    assert fast._proto is exported  # the kept graph, refreshed in place
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.01)
    fast.load_state_dict(other.state_dict())
    with torch.no_grad():
        close(fast(*args), other(*args))
    assert set(fast.state_dict()) == set(model.state_dict())


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 4))


def test_training_through_anvil_matches_pytorch():
    """10 SGD steps (momentum) through an optimized module, its forward and backward in anvil's
    training graph, against the same steps in eager PyTorch: same parameters within 1e-4."""
    model, twin = _mlp(), _mlp()
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    fast = anvil.torch.optimize(model, (x,), threads=1, tuning="off")
    fast.train()
    opt = torch.optim.SGD(fast.parameters(), lr=0.1, momentum=0.9)
    opt2 = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(10):
        for m, o in ((fast, opt), (twin, opt2)):
            o.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            o.step()
            losses.append(loss.item())
    assert fast._ts is not None, "the steps did not run in anvil"
    assert losses[-2] < losses[0]
    for (n, p), q in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=n)
    fast.eval()
    with torch.no_grad():  # inference in anvil, with the trained parameters
        close(fast(x), twin(x))


def test_training_falls_back_where_anvil_cannot_train():
    tv = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = tv.models.resnet18(num_classes=4)  # BatchNorm in training mode: PyTorch runs it
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 4, (4,))
    fast = anvil.torch.optimize(model, (x,), threads=1, tuning="off")
    fast.train()
    opt = torch.optim.SGD(fast.parameters(), lr=0.01)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(fast(x), y).backward()
    opt.step()
    assert fast._ts is None and all(p.grad is not None for p in model.parameters())


def test_bad_input():
    model, args = resnet18()
    fast = anvil.torch.optimize(model, args, threads=1, tuning="off")
    with torch.no_grad(), pytest.raises(anvil.InvalidArgument, match="must have rank 4"):
        fast(torch.randn(2, 3, 64))


def test_optimize_precision():
    """optimize(precision=) reaches the inference session and the training graph: bf16 stays
    within 2e-2 of eager PyTorch (relative to the output's scale), both record their precision;
    fp16 infers, and its training graph is refused by anvil."""
    torch.manual_seed(0)
    model = _mlp()
    x = torch.randn(16, 16)
    fast = anvil.torch.optimize(model, (x,), threads=1, tuning="off", precision="bf16")
    assert fast._options["precision"] == "bf16"
    with torch.no_grad():
        got, want = fast(x), model(x)
    assert float((got - want).abs().max()) <= 2e-2 * float(want.abs().max())
    assert {c["compute"] for c in fast._session.explain()} <= {"bf16", "fp32"}
    fast.train()
    torch.nn.functional.cross_entropy(fast(x), torch.randint(0, 4, (16,))).backward()
    assert fast._ts is not None and all(p.grad is not None for p in model.parameters())
    half = anvil.torch.optimize(model, (x,), threads=1, tuning="off", precision="fp16")
    with torch.no_grad():
        got = half(x)
    assert float((got - want).abs().max()) <= 1e-2 * float(want.abs().max())
    half.train()
    with pytest.raises(anvil.Unsupported, match="fp16"):
        half(x).sum().backward()
