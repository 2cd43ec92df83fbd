"""Inputs of the hidden checks, and their reference outputs computed from the solution by `autograder release`.

Every input is drawn from its own seeded generator (so adding a case never shifts another) in float32; references
are computed in float64 from the clean solution and rounded to float32, which makes them identical across CPUs.
Shapes are chosen so that common mistakes show: T != d_head, d_v != d_head, batch dims, H = 1 and H > 1.
"""
from __future__ import annotations

import numpy as np
import torch

from autograder.sandbox.wire import grad_ramp


def randn(seed: int, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def seed42_inputs():
    """The chapter's run: after manual_seed(42), Q, K, V = randn(4, 4) each, then MultiHeadAttention(8, 2),
    then x = randn(4, 8). Returns Q, K, V and a function that finishes the sequence with a given MHA class."""
    torch.manual_seed(42)
    q, k, v = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)
    return q, k, v


def sdpa_cases() -> dict[str, tuple]:
    """name -> (Q, K, V, causal)"""
    return {
        "batched": (randn(1, 2, 3, 6, 4), randn(2, 2, 3, 6, 4), randn(3, 2, 3, 6, 5), True),
        "scaling": (randn(4, 6, 16, scale=2.0), randn(5, 6, 16, scale=2.0), randn(6, 6, 16), True),
        "noncausal": (randn(7, 3, 5, 4), randn(8, 3, 5, 4), randn(9, 3, 5, 7), False),
        "large": (randn(10, 5, 4, scale=40.0), randn(11, 5, 4, scale=40.0), randn(12, 5, 4), True),
        "grads": (randn(13, 2, 4, 3), randn(14, 2, 4, 3), randn(15, 2, 4, 5), True),
    }


def split_cases() -> dict[str, tuple]:
    """name -> (x, num_heads)"""
    return {
        "unbatched": (randn(20, 3, 8), 2),
        "batched": (randn(21, 2, 5, 12), 3),
        "one_head": (randn(22, 4, 6), 1),
        "all_heads": (randn(23, 4, 6), 6),
    }


MHA_NAMES = ("W_q", "W_k", "W_v", "W_o")


def mha_case():
    """Batched x (2, 5, 12), 3 heads, weights injected by name."""
    weights = {f"{n}.weight": randn(30 + i, 12, 12, scale=0.3) for i, n in enumerate(MHA_NAMES)}
    return randn(35, 2, 5, 12), 3, weights


def build_references(solution) -> dict[str, np.ndarray]:
    """All inputs and expected outputs, as float32 arrays keyed `case.name`."""
    out: dict[str, torch.Tensor] = {}
    f64 = lambda t: t.detach().double()

    for name, (q, k, v, causal) in sdpa_cases().items():
        out.update({f"{name}.Q": q, f"{name}.K": k, f"{name}.V": v})
        qd, kd, vd = (f64(t).requires_grad_(name == "grads") for t in (q, k, v))
        output, weights = solution.scaled_dot_product_attention(qd, kd, vd, causal=causal)
        out[f"{name}.output"], out[f"{name}.weights"] = output, weights
        if name == "grads":
            (output * grad_ramp(output.shape)).sum().backward()
            out.update({"grads.dQ": qd.grad, "grads.dK": kd.grad, "grads.dV": vd.grad})

    for name, (x, heads) in split_cases().items():
        out[f"split_{name}.x"] = x
        out[f"split_{name}.y"] = solution.split_heads(f64(x), heads)

    x, heads, weights = mha_case()
    mha = solution.MultiHeadAttention(12, heads).double()
    mha.load_state_dict({k: f64(v) for k, v in weights.items()})
    out["mha.x"] = x
    out.update({f"mha.{k}": v for k, v in weights.items()})
    out["mha.y"] = mha(f64(x))

    q, k, v = seed42_inputs()
    model = solution.MultiHeadAttention(8, 2)  # created right after Q, K, V: same random weights as run.py
    x42 = torch.randn(4, 8)
    output, weights = solution.scaled_dot_product_attention(f64(q), f64(k), f64(v))
    out.update({"seed42.output": output, "seed42.weights": weights, "seed42.x": x42})
    out.update({f"seed42.{k}": v for k, v in model.state_dict().items()})
    out["seed42.y"] = model.double()(f64(x42))

    return {name: t.detach().to(torch.float32).numpy() for name, t in sorted(out.items())}
