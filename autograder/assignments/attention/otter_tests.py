"""The public checks as plain-assert otter tests (they run in the student's own kernel on `grader.check(...)`).

One test per public check of the suite, same name, same inputs, only published numbers (the contract and the
chapter's seed-42 table). They help the student; scores never come from them (see autograder.integrations.otter).
`tests/test_integrations.py` checks that the names match the suite's public checks and that the solution passes.
"""
from __future__ import annotations

PUBLIC_TESTS: dict[str, str] = {
    "mask_dtype_shape": '''\
def test_mask_dtype_shape(causal_mask, torch):
    m = causal_mask(4)
    assert isinstance(m, torch.Tensor), f"causal_mask(4) returned {type(m).__name__}, not a tensor"
    assert m.dtype == torch.bool, f"causal_mask(4) has dtype {m.dtype}, expected torch.bool"
    assert tuple(m.shape) == (4, 4), f"causal_mask(4) has shape {list(m.shape)}, expected [4, 4]"
''',
    "mask_values_small": '''\
def test_mask_values_small(causal_mask, torch):
    for n in (1, 2, 4):
        i = torch.arange(n)
        expected = i[None, :] > i[:, None]
        m = causal_mask(n)
        assert isinstance(m, torch.Tensor) and m.dtype == torch.bool and tuple(m.shape) == (n, n), f"causal_mask({n}): bool [{n}, {n}] expected"
        assert torch.equal(m, expected), f"causal_mask({n}) must be True exactly above the diagonal"
''',
    "sdpa_shapes_unbatched": '''\
def test_sdpa_shapes_unbatched(scaled_dot_product_attention, torch):
    g = torch.Generator().manual_seed(42)
    Q, K, V = (torch.randn(4, 4, generator=g) for _ in range(3))
    result = scaled_dot_product_attention(Q, K, V)
    assert isinstance(result, tuple) and len(result) == 2, "return a pair (output, weights)"
    output, weights = result
    assert tuple(output.shape) == (4, 4), f"output has shape {list(output.shape)}, expected [4, 4]"
    assert tuple(weights.shape) == (4, 4), f"weights has shape {list(weights.shape)}, expected [4, 4]"
''',
    "sdpa_causal_rows": '''\
def test_sdpa_causal_rows(scaled_dot_product_attention, torch):
    g = torch.Generator().manual_seed(7)
    for T, d in ((5, 3), (4, 4)):
        Q, K, V = (torch.randn(T, d, generator=g) for _ in range(3))
        _, weights = scaled_dot_product_attention(Q, K, V)
        i = torch.arange(T)
        future = weights[i[None, :] > i[:, None]]
        assert torch.isfinite(weights).all(), f"weights are not finite (T={T})"
        assert (future == 0).all(), f"weights of future positions must be exactly 0 (T={T})"
        assert (weights.sum(-1) - 1).abs().max() <= 1e-5, f"every row of weights must sum to 1 (T={T})"
''',
    "sdpa_seed42_weights": '''\
def test_sdpa_seed42_weights(scaled_dot_product_attention, torch):
    g = torch.Generator().manual_seed(42)
    Q, K, V = (torch.randn(4, 4, generator=g) for _ in range(3))
    _, weights = scaled_dot_product_attention(Q, K, V, causal=True)
    expected = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.9310, 0.0690, 0.0, 0.0],
                             [0.2060, 0.4573, 0.3367, 0.0], [0.1871, 0.3089, 0.1306, 0.3735]])
    assert tuple(weights.shape) == (4, 4), f"weights has shape {list(weights.shape)}, expected [4, 4]"
    assert (weights.detach() - expected).abs().max() <= 1e-4, "weights differ from the chapter's seed-42 table"
''',
    "split_shape": '''\
def test_split_shape(split_heads, torch):
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3))
    heads = split_heads(x, 2)
    assert isinstance(heads, torch.Tensor), "split_heads must return a tensor"
    assert tuple(heads.shape) == (2, 4, 4), f"split_heads([4, 8], 2) has shape {list(heads.shape)}, expected [2, 4, 4]"
''',
    "mha_shape": '''\
def test_mha_shape(MultiHeadAttention, torch):
    model = MultiHeadAttention(8, 2)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y = model(x)
    assert tuple(y.shape) == (4, 8), f"MultiHeadAttention(8, 2) maps [4, 8] to {list(y.shape)}, expected [4, 8]"
''',
}
