"""The published facts of the attention assignment (`public_facts.json`, written by `autograder release`): the
public inputs, the solution's results on them, and what each catalogued mistake of `diagnosis.py` returns on them.
Nothing here is shipped; the JSON is (with public_checks.py, in the student's checker).

Public inputs are drawn from fixed seeds with shapes chosen so the contract's mistakes show: the chapter's seed-42
example, a batch whose dims are all 4 (so `K.T` and `K.transpose(0, 1)` run and give wrong numbers instead of an
error), a batch whose dims all differ (a dim taken from the wrong axis, softmax over the wrong dim), causal=False,
T = 1, and scores of about ±1000.
"""
from __future__ import annotations

import torch

from autograder.assignments import get

from . import diagnosis
from .cases import saturated, seed42_inputs


def _randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g) * scale


def sdpa_inputs() -> dict[str, tuple]:
    """name -> (Q, K, V, causal)"""
    def drawn(seed, q_shape, v_shape, causal, scale=1.0):
        g = torch.Generator().manual_seed(seed)
        return _randn(g, *q_shape, scale=scale), _randn(g, *q_shape, scale=scale), _randn(g, *v_shape), causal

    g = torch.Generator().manual_seed(1000)
    while True:  # saturated: every weight 0 or 1 to within e^-35 (see cases.saturated)
        q, k, v = _randn(g, 5, 4, scale=40.0), _randn(g, 5, 4, scale=40.0), _randn(g, 5, 4)
        if saturated(q, k):
            break
    return {
        "seed42": (*seed42_inputs(), True),
        "rows": drawn(7, (5, 3), (5, 3), True),
        "square": drawn(1001, (4, 4, 4), (4, 4, 4), True),
        "batched": drawn(1002, (2, 3, 5, 7), (2, 3, 5, 6), True),
        "noncausal": drawn(1003, (3, 5, 7), (3, 5, 6), False),
        "one_token": drawn(1004, (2, 1, 4), (2, 1, 3), True),
        "large": (q, k, v, True),
    }


def split_inputs() -> dict[str, tuple]:
    """name -> (x, num_heads)"""
    return {"split": (_randn(torch.Generator().manual_seed(3), 4, 8), 2),
            "split_batched": (_randn(torch.Generator().manual_seed(1005), 2, 5, 12), 3),
            "split_one_head": (_randn(torch.Generator().manual_seed(1006), 2, 4, 6), 1)}


def _mask_variants(n: int):
    future = diagnosis._future(n)
    yield diagnosis._named("mask_includes_diagonal"), future | torch.eye(n, dtype=torch.bool)
    yield diagnosis._named("mask_keeps_instead_of_hides"), ~future
    yield diagnosis._named("mask_inverted_fn", "mask_inverted"), future.T


def build(solution):
    """(assignment info, cases, texts) for `autograder.public.facts.dumps`."""
    spec = get("attention")
    cases = {}
    for n in (1, 2, 4, 9):
        cases[f"mask{n}"] = {"inputs": {}, "expected": {"mask": solution.causal_mask(n)},
                             "variants": [(d, {"mask": m}) for d, m in _mask_variants(n)]}
    for name, (Q, K, V, causal) in sdpa_inputs().items():
        out, weights = solution.scaled_dot_product_attention(Q, K, V, causal=causal)
        variants = []
        for _, diag, thunk in diagnosis._candidates(Q.double(), K.double(), V.double(), causal):
            try:
                o, w = thunk()
            except Exception:  # the mistake does not apply to these shapes
                continue
            variants.append((diag, {"output": o.float(), "weights": w.float()}))
        cases[name] = {"inputs": {"Q": Q, "K": K, "V": V, "causal": torch.tensor(causal)},
                       "expected": {"output": out.float(), "weights": weights.float()}, "variants": variants}
    for name, (x, heads) in split_inputs().items():
        variants = []
        for key, thunk in diagnosis._split_variants(x, heads).items():
            value = thunk()
            if value is not None:
                variants.append((diagnosis._named(key), {"heads": value}))
        cases[name] = {"inputs": {"x": x, "num_heads": torch.tensor(heads)},
                       "expected": {"heads": solution.split_heads(x, heads)}, "variants": variants}
    texts = {"swapped_outputs": diagnosis.SWAPPED, "unstable_softmax": diagnosis.UNSTABLE,
             "mask_not_bool": diagnosis._named("mask_not_bool", dtype="{dtype}"),
             "mask_fixed_size": diagnosis._named("mask_fixed_size_fn", "mask_fixed_size", n="{n}", shape="{shape}"),
             "output_dtype": diagnosis._named("output_dtype", dtype="{dtype}")}
    return spec.public_info(), cases, texts
