"""Inputs of the decoder's hidden checks, drawn per student, and their references computed from the solution.

As in the attention assignment (autograder/assignments/attention/cases.py): `build_references(solution, seed)` draws
every hidden case from a generator of its own, seeded by the student's seed and the case's name; inputs are float32,
references are computed in float64 from the clean solution and rounded to float32; nothing touches torch's global
RNG except the chapter's seed-42 example, replayed once per process under a lock inside `fork_rng`.

Shapes and scales are chosen so that the known mistakes show: rows with a non-zero mean (mean square != variance),
rows of magnitude 1e-4 (eps inside or outside the square root), scales that are not all ones, a single vector,
leading dims of size 1, and two RMSNorm weights that differ (norm1 and norm2 cannot be swapped unnoticed).
"""
from __future__ import annotations

import hashlib
import threading

import torch

from autograder.sandbox.wire import grad_ramp

ATTN_NAMES = ("W_q", "W_k", "W_v", "W_o")
MLP_NAMES = ("W_gate", "W_up", "W_down")
EPS = 1e-6  # the contract's default eps
# The hidden layer's sizes: d_model 12, 3 heads (d_head 4), d_ff 20.
D_MODEL, HEADS, D_FF = 12, 3, 20
# The chapter's example (run.py): DecoderLayer(8, 2, 16), x = randn(2, 4, 8).
SEED42_SIZES = (8, 2, 16)


def case_generator(seed: int, name: str) -> torch.Generator:
    """A generator for case `name` of the student with `seed`: seeded by SHA-256 of both, cut to 63 bits."""
    digest = hashlib.sha256(f"decoder/{seed}/{name}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") >> 1)


def randn(g: torch.Generator, *shape: int, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale + shift


def scale_vector(g: torch.Generator, d: int) -> torch.Tensor:
    """A learned-looking RMSNorm weight: around 1, clearly not all ones, some entries negative-free."""
    return 1.0 + 0.5 * torch.randn(d, generator=g)


def mlp_weights(g: torch.Generator, d_model: int, d_ff: int, prefix: str = "") -> dict[str, torch.Tensor]:
    return {f"{prefix}W_gate.weight": randn(g, d_ff, d_model, scale=0.3),
            f"{prefix}W_up.weight": randn(g, d_ff, d_model, scale=0.3),
            f"{prefix}W_down.weight": randn(g, d_model, d_ff, scale=0.3)}


def layer_weights(g: torch.Generator, d_model: int = D_MODEL, d_ff: int = D_FF) -> dict[str, torch.Tensor]:
    """Every parameter of a DecoderLayer, by name (injected by name: creation order does not matter here)."""
    weights = {"norm1.weight": scale_vector(g, d_model), "norm2.weight": scale_vector(g, d_model)}
    weights.update({f"attn.{n}.weight": randn(g, d_model, d_model, scale=0.3) for n in ATTN_NAMES})
    weights.update(mlp_weights(g, d_model, d_ff, "mlp."))
    return weights


_seed42_lock = threading.Lock()
_seed42: tuple[dict[str, torch.Tensor], torch.Tensor] | None = None


def seed42_model() -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The chapter's run (run.py): after manual_seed(42), DecoderLayer(8, 2, 16) draws W_q, W_k, W_v, W_o, then
    W_gate, W_up, W_down (the RMSNorm weights are ones and draw nothing); then x = randn(2, 4, 8). Replayed with
    nn.Linear's own initialisation once per process, under a lock, inside `fork_rng`, and cached."""
    global _seed42
    with _seed42_lock:
        if _seed42 is None:
            d_model, _, d_ff = SEED42_SIZES
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(42)
                attn = [torch.nn.Linear(d_model, d_model, bias=False) for _ in ATTN_NAMES]
                mlp = [torch.nn.Linear(d_model, d_ff, bias=False), torch.nn.Linear(d_model, d_ff, bias=False),
                       torch.nn.Linear(d_ff, d_model, bias=False)]
                x = torch.randn(2, 4, d_model)
            weights = {"norm1.weight": torch.ones(d_model), "norm2.weight": torch.ones(d_model)}
            weights.update({f"attn.{n}.weight": l.weight.detach().clone() for n, l in zip(ATTN_NAMES, attn)})
            weights.update({f"mlp.{n}.weight": l.weight.detach().clone() for n, l in zip(MLP_NAMES, mlp)})
            _seed42 = weights, x
        return _seed42


_build_lock = threading.Lock()


def build(solution, name: str, args: tuple, weights: dict[str, torch.Tensor]):
    """The solution's module `name(*args)` with the given weights (float64), built on the meta device so that its
    nn.Linear initialisation draws nothing from the global RNG (see attention's cases.py)."""
    with _build_lock, torch.device("meta"):
        model = getattr(solution, name)(*args)
    model.load_state_dict({k: v.detach().double() for k, v in weights.items()}, assign=True)
    return model


def zeroed(weights: dict[str, torch.Tensor], *names: str) -> dict[str, torch.Tensor]:
    return {k: torch.zeros_like(v) if k in names else v for k, v in weights.items()}


def build_references(solution, seed: int) -> dict[str, torch.Tensor]:
    """The hidden inputs of the student with `seed` and the expected outputs, as float32 tensors keyed `case.name`."""
    out: dict[str, torch.Tensor] = {}
    f64 = lambda t: t.detach().double()
    gen = lambda name: case_generator(seed, name)

    # -- rms_norm
    g = gen("rms.batched")  # rows with a mean of about 1: their mean square is far from their variance
    out["rms.batched.x"] = randn(g, 2, 5, 16, shift=1.0)
    out["rms.batched.w"] = torch.ones(16)
    g = gen("rms.scale")
    out["rms.scale.x"], out["rms.scale.w"] = randn(g, 6, 12, shift=0.3), scale_vector(g, 12)
    g = gen("rms.tiny")  # mean square ~1e-8, below eps = 1e-6: only eps inside the root gives the right rows
    out["rms.tiny.x"], out["rms.tiny.w"] = randn(g, 4, 8, scale=1e-4), scale_vector(g, 8)
    g = gen("rms.eps")  # an eps of the caller's (1e-2) on rows of mean square ~1e-2
    out["rms.eps.x"], out["rms.eps.w"] = randn(g, 3, 10, scale=0.1), scale_vector(g, 10)
    g = gen("rms.lead")
    out["rms.vec.x"], out["rms.vec.w"] = randn(g, 8, shift=0.5), scale_vector(g, 8)
    out["rms.lead1.x"], out["rms.lead1.w"] = randn(g, 1, 1, 3, 8, shift=0.5), scale_vector(g, 8)
    out["rms.lead2.x"], out["rms.lead2.w"] = randn(g, 2, 1, 4, 8, shift=0.5), scale_vector(g, 8)
    g = gen("rms.grads")
    out["rms.grads.x"], out["rms.grads.w"] = randn(g, 3, 4, 6, shift=0.5), scale_vector(g, 6)
    for case in ("batched", "scale", "tiny", "vec", "lead1", "lead2"):
        out[f"rms.{case}.y"] = solution.rms_norm(f64(out[f"rms.{case}.x"]), f64(out[f"rms.{case}.w"]))
    out["rms.eps.y"] = solution.rms_norm(f64(out["rms.eps.x"]), f64(out["rms.eps.w"]), eps=1e-2)
    x, w = f64(out["rms.grads.x"]).requires_grad_(), f64(out["rms.grads.w"]).requires_grad_()
    y = solution.rms_norm(x, w)
    (y * grad_ramp(y.shape)).sum().backward()
    out.update({"rms.grads.y": y, "rms.grads.dx": x.grad, "rms.grads.dw": w.grad})

    # -- SwiGLU (d_model 12, d_ff 20)
    g = gen("mlp")
    weights = mlp_weights(g, D_MODEL, D_FF)
    out.update({f"mlp.{k}": v for k, v in weights.items()})
    out["mlp.x"], out["mlp.x1"], out["mlp.grads.x"] = (randn(g, 2, 5, D_MODEL), randn(g, 1, 3, D_MODEL),
                                                       randn(g, 2, 3, D_MODEL))
    mlp = build(solution, "SwiGLU", (D_MODEL, D_FF), weights)
    out["mlp.y"], out["mlp.y1"] = mlp(f64(out["mlp.x"])), mlp(f64(out["mlp.x1"]))
    x = f64(out["mlp.grads.x"]).requires_grad_()
    y = mlp(x)
    (y * grad_ramp(y.shape)).sum().backward()
    out.update({"mlp.grads.y": y, "mlp.grads.dx": x.grad})

    # -- DecoderLayer (d_model 12, 3 heads, d_ff 20): one set of weights, each case its own x
    g = gen("layer")
    weights = layer_weights(g)
    out.update({f"layer.{k}": v for k, v in weights.items()})
    args = (D_MODEL, HEADS, D_FF)
    for case, shape in (("full", (2, 5, D_MODEL)), ("attn_only", (2, 5, D_MODEL)), ("mlp_only", (2, 5, D_MODEL)),
                        ("zero", (2, 4, D_MODEL)), ("open", (1, 6, D_MODEL)), ("grads", (2, 4, D_MODEL))):
        out[f"layer.{case}.x"] = randn(gen(f"layer.{case}"), *shape)
    full = build(solution, "DecoderLayer", args, weights)
    out["layer.full.y"] = full(f64(out["layer.full.x"]))
    out["layer.attn_only.y"] = build(solution, "DecoderLayer", args, zeroed(weights, "mlp.W_down.weight"))(
        f64(out["layer.attn_only.x"]))
    out["layer.mlp_only.y"] = build(solution, "DecoderLayer", args, zeroed(weights, "attn.W_o.weight"))(
        f64(out["layer.mlp_only.x"]))
    out["layer.open.y"] = full(f64(out["layer.open.x"]), causal=False)
    out["layer.open.y_causal"] = full(f64(out["layer.open.x"]), causal=True)
    x = f64(out["layer.grads.x"]).requires_grad_()
    y = full(x)
    (y * grad_ramp(y.shape)).sum().backward()
    out.update({"layer.grads.y": y, "layer.grads.dx": x.grad})

    return {name: t.detach().to(torch.float32).contiguous() for name, t in sorted(out.items())}
