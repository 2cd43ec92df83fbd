"""The public checks as plain-assert otter tests (they run in the student's own kernel on `grader.check(...)`).

One test per public check of the suite, same name, same inputs, only published facts: the contract (shapes, dtype, the
formulas, the parameter names weights are injected by) and the numbers run.py prints for the chapter's seed-42 example
(in the handout). They help the student; scores never come from them (see autograder.integrations.otter).
`tests/test_decoder.py` checks that the names match the suite's public checks, that the solution passes and the stub fails.
"""
from __future__ import annotations

PUBLIC_TESTS: dict[str, str] = {
    "rms_shape": '''\
def test_rms_shape(rms_norm, torch):
    g = torch.Generator().manual_seed(3)
    for shape in ((4, 8), (2, 3, 8)):
        y = rms_norm(torch.randn(*shape, generator=g), torch.ones(8))
        assert isinstance(y, torch.Tensor), f"rms_norm returned {type(y).__name__}, not a tensor"
        assert tuple(y.shape) == shape, f"rms_norm(x of shape {list(shape)}, ones(8)) has shape {list(y.shape)}, expected {list(shape)}"
        assert y.dtype == torch.float32, f"rms_norm returned dtype {y.dtype}, expected torch.float32 (the dtype of x)"
''',
    "rms_formula": '''\
def test_rms_formula(rms_norm, torch):
    x, w = torch.randn(3, 8, generator=torch.Generator().manual_seed(4)) + 0.5, torch.ones(8)
    expected = (x.double() / torch.sqrt(x.double().pow(2).mean(dim=-1, keepdim=True) + 1e-6)).float()
    y = rms_norm(x, w)
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == (3, 8), "rms_norm(x of shape [3, 8], ones(8)) must return a [3, 8] tensor"
    err = (y.detach().double() - expected.double()).abs()
    assert (err <= 1e-5 + 1e-4 * expected.double().abs()).all(), f"rms_norm differs from x / sqrt(mean(x²) + eps) * weight (largest difference {err.max().item():.3g})"
''',
    "swiglu_shape": '''\
def test_swiglu_shape(SwiGLU, torch):
    model = SwiGLU(8, 16)
    g = torch.Generator().manual_seed(5)
    for shape in ((4, 8), (2, 4, 8)):
        with torch.no_grad():
            y = model(torch.randn(*shape, generator=g))
        assert isinstance(y, torch.Tensor), "SwiGLU.forward must return a tensor"
        assert tuple(y.shape) == shape, f"SwiGLU(8, 16) maps {list(shape)} to {list(y.shape)}, expected {list(shape)}"
        assert y.dtype == torch.float32, f"SwiGLU(8, 16) returned dtype {y.dtype}, expected torch.float32"
''',
    "swiglu_formula": '''\
def test_swiglu_formula(SwiGLU, torch):
    g = torch.Generator().manual_seed(11)
    weights = {"W_gate.weight": torch.randn(6, 4, generator=g) * 0.5, "W_up.weight": torch.randn(6, 4, generator=g) * 0.5,
               "W_down.weight": torch.randn(4, 6, generator=g) * 0.5}
    x = torch.randn(3, 4, generator=g)
    model = SwiGLU(4, 6)
    with torch.no_grad():
        for name, value in weights.items():
            model.get_parameter(name).copy_(value)
        y = model(x)
    Wg, Wu, Wd = (weights[f"{n}.weight"].double() for n in ("W_gate", "W_up", "W_down"))
    gate = x.double() @ Wg.T
    expected = (((gate * torch.sigmoid(gate)) * (x.double() @ Wu.T)) @ Wd.T).float()
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == (3, 4), "SwiGLU(4, 6) must map [3, 4] to [3, 4]"
    err = (y.double() - expected.double()).abs()
    assert (err <= 1e-5 + 1e-4 * expected.double().abs()).all(), f"SwiGLU(4, 6) differs from W_down(silu(W_gate(x)) * W_up(x)) (largest difference {err.max().item():.3g})"
''',
    "layer_shape": '''\
def test_layer_shape(DecoderLayer, torch):
    model = DecoderLayer(8, 2, 16)
    g = torch.Generator().manual_seed(6)
    for shape in ((4, 8), (2, 4, 8)):
        with torch.no_grad():
            y = model(torch.randn(*shape, generator=g))
        assert isinstance(y, torch.Tensor), "DecoderLayer.forward must return a tensor"
        assert tuple(y.shape) == shape, f"DecoderLayer(8, 2, 16) maps {list(shape)} to {list(y.shape)}, expected {list(shape)}"
        assert y.dtype == torch.float32, f"DecoderLayer(8, 2, 16) returned dtype {y.dtype}, expected torch.float32"
''',
    "layer_seed42": '''\
def test_layer_seed42(DecoderLayer, torch):
    # run.py's draws after manual_seed(42): W_q, W_k, W_v, W_o, W_gate, W_up, W_down (the norms' weights are ones), then x
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(42)
        linears = [torch.nn.Linear(8, 8, bias=False) for _ in range(4)]
        linears += [torch.nn.Linear(8, 16, bias=False), torch.nn.Linear(8, 16, bias=False), torch.nn.Linear(16, 8, bias=False)]
        x = torch.randn(2, 4, 8)
        model = DecoderLayer(8, 2, 16)
    names = ["attn.W_q.weight", "attn.W_k.weight", "attn.W_v.weight", "attn.W_o.weight",
             "mlp.W_gate.weight", "mlp.W_up.weight", "mlp.W_down.weight"]
    with torch.no_grad():
        for name, linear in zip(names, linears):
            model.get_parameter(name).copy_(linear.weight)
        for name in ("norm1.weight", "norm2.weight"):
            model.get_parameter(name).fill_(1.0)
        y = model(x)
    expected = torch.tensor([[-1.2033, 0.1101, 2.0482, 0.3676, 0.3035, -0.4407, -1.3022, 0.5905],
                             [0.4069, 0.4382, -1.1577, 2.1732, 0.1699, 0.1170, -0.8852, -0.5811],
                             [-0.5005, -0.6906, -0.2504, -2.0086, -0.1085, 1.0413, -0.1207, -0.2191],
                             [-0.8022, -0.0731, -1.0786, 0.0280, -0.5793, 1.0234, 0.0929, -1.5103]])
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == (2, 4, 8), "DecoderLayer(8, 2, 16) must map [2, 4, 8] to [2, 4, 8]"
    err = (y[0].double() - expected.double()).abs()
    assert err.max() <= 1e-4, f"y[0] differs from the chapter's seed-42 output printed by run.py (largest difference {err.max().item():.3g})"
''',
}
