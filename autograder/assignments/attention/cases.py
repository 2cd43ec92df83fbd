"""Inputs of the hidden checks, drawn per student, and their references computed by the grader from the solution.

`build_references(solution, seed)` draws every hidden case from a generator of its own, seeded by the student's seed
(see `autograder.engine.hidden_inputs`) and the case's name, so two students get different inputs and adding a case
never shifts another. Inputs are float32 with the shapes and scales the checks' titles name; references are computed
in float64 from the clean solution and rounded to float32, which makes them identical across CPUs. Nothing here
touches torch's global RNG, so grading threads cannot disturb each other: the chapter's seed-42 example (the same for
everyone, published in the handout) is drawn once per process, under a lock, with the global RNG forked and restored.
Shapes are chosen so that common mistakes show: T != d_head, d_v != d_head, batch dims, leading dims of size 1, T = 1,
H = 1 and H > 1 (with batch dims, in split_heads and in MultiHeadAttention), large logits batched and not; the
inventory of what each check covers is docs/hidden-inputs.md.
"""
from __future__ import annotations

import hashlib
import threading

import torch

from autograder.sandbox.wire import grad_ramp

MHA_NAMES = ("W_q", "W_k", "W_v", "W_o")


def case_generator(seed: int, name: str) -> torch.Generator:
    """A generator for case `name` of the student with `seed`: seeded by SHA-256 of both, cut to 63 bits."""
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") >> 1)


def randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale


def seed42_inputs():
    """The chapter's Q, K, V: after manual_seed(42), Q, K, V = randn(4, 4) each. Drawn from a local generator
    (the same numbers as the global RNG seeded with 42), so calling this from any thread changes no global state."""
    g = torch.Generator().manual_seed(42)
    return tuple(torch.randn(4, 4, generator=g) for _ in range(3))


_seed42_lock = threading.Lock()
_seed42_model: tuple[dict[str, torch.Tensor], torch.Tensor] | None = None


def seed42_model() -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The rest of the chapter's run (run.py): MultiHeadAttention(8, 2)'s weights, then x = randn(4, 8).
    The weights come from nn.Linear's own initialisation, which draws from the global RNG: replayed once per
    process under a lock, inside `fork_rng` (the global state is restored afterwards), and cached."""
    global _seed42_model
    with _seed42_lock:
        if _seed42_model is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(42)
                for _ in range(3):  # Q, K, V
                    torch.randn(4, 4)
                layers = [torch.nn.Linear(8, 8, bias=False) for _ in MHA_NAMES]  # W_q, W_k, W_v, W_o, in order
                x = torch.randn(4, 8)
            weights = {f"{n}.weight": layer.weight.detach().clone() for n, layer in zip(MHA_NAMES, layers)}
            _seed42_model = weights, x
        return _seed42_model


SATURATION_GAP = 35.0


def saturated(Q: torch.Tensor, K: torch.Tensor, gap: float = SATURATION_GAP) -> bool:
    """In every causal row with two or more keys the top scaled score leads the next by more than `gap`. Every
    weight is then 0 or 1 to within e^-35, so float32's rounding of scores of about +-1000 (~1e-4) cannot move a
    correct softmax out of tolerance (tests/test_properties.py); with near ties it could."""
    T = Q.shape[-2]
    s = (Q.double() @ K.double().transpose(-2, -1) / Q.shape[-1] ** 0.5).masked_fill(
        torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    top = s[..., 1:, :].topk(2, dim=-1).values
    return bool((top[..., 0] - top[..., 1] > gap).all())


def sdpa_cases(seed: int) -> dict[str, tuple]:
    """name -> (Q, K, V, causal)"""
    def case(name, q_shape, v_shape, causal, scale=1.0):
        g = case_generator(seed, f"sdpa.{name}")
        return randn(g, *q_shape, scale=scale), randn(g, *q_shape, scale=scale), randn(g, *v_shape), causal

    def large(name="large", lead=()):  # scores of about +-1000, saturated: drawn again (same generator) until no
        g = case_generator(seed, f"sdpa.{name}")  # row has a near tie
        for _ in range(1000):  # about 1 draw in 10 is rejected (1 in 2 batched)
            q, k, v = randn(g, *lead, 5, 4, scale=40.0), randn(g, *lead, 5, 4, scale=40.0), randn(g, *lead, 5, 4)
            if saturated(q, k):
                return q, k, v, True
        raise RuntimeError(f"no saturated large-logit input for seed {seed}")

    return {
        "batched": case("batched", (2, 3, 6, 4), (2, 3, 6, 5), True),
        "scaling": case("scaling", (6, 16), (6, 16), True, scale=2.0),
        "noncausal": case("noncausal", (3, 5, 4), (3, 5, 7), False),
        "large": large(),
        "large_batched": large("large_batched", (2, 3)),
        "leading_ones": case("leading_ones", (1, 1, 5, 4), (1, 1, 5, 3), True),  # squeeze() must not touch them
        "one_token": case("one_token", (2, 3, 1, 4), (2, 3, 1, 5), True),         # T = 1, with batch and heads
        "grads": case("grads", (2, 4, 3), (2, 4, 5), True),
    }


def split_cases(seed: int) -> dict[str, tuple]:
    """name -> (x, num_heads)"""
    def case(name, shape, heads):
        return randn(case_generator(seed, f"split.{name}"), *shape), heads

    return {
        "unbatched": case("unbatched", (3, 8), 2),
        "batched": case("batched", (2, 5, 12), 3),
        "one_head": case("one_head", (4, 6), 1),
        "one_head_batched": case("one_head_batched", (2, 5, 6), 1),
        "all_heads": case("all_heads", (4, 6), 6),
    }


def mha_case(seed: int, name: str = "mha", d_model: int = 12, heads: int = 3, lead: tuple = (2, 5)):
    """Batched x (2, 5, 12), 3 heads, weights injected by name (`mha1`: (2, 4, 6) with one head)."""
    g = case_generator(seed, name)
    weights = {f"{n}.weight": randn(g, d_model, d_model, scale=0.3) for n in MHA_NAMES}
    return randn(g, *lead, d_model), heads, weights


def mha_cases(seed: int) -> dict[str, tuple]:
    """name -> (x, num_heads, weights): the 3-head case, and one head on batched input."""
    return {"mha": mha_case(seed), "mha1": mha_case(seed, "mha1", 6, 1, (2, 4))}


_build_lock = threading.Lock()


def _model(solution, d_model: int, heads: int, weights: dict[str, torch.Tensor]):
    """The solution's MultiHeadAttention with the given weights (float64), built on the meta device so that its
    nn.Linear initialisation draws nothing from the global RNG (the device mode is per thread; the lock keeps
    torch's module-level note of the current device consistent when threads build at once)."""
    with _build_lock, torch.device("meta"):
        model = solution.MultiHeadAttention(d_model, heads)
    model.load_state_dict({k: v.detach().double() for k, v in weights.items()}, assign=True)
    return model


def build_references(solution, seed: int) -> dict[str, torch.Tensor]:
    """The hidden inputs of the student with `seed` and the expected outputs, as float32 tensors keyed `case.name`."""
    out: dict[str, torch.Tensor] = {}
    f64 = lambda t: t.detach().double()

    for name, (q, k, v, causal) in sdpa_cases(seed).items():
        out.update({f"{name}.Q": q, f"{name}.K": k, f"{name}.V": v})
        qd, kd, vd = (f64(t).requires_grad_(name == "grads") for t in (q, k, v))
        output, weights = solution.scaled_dot_product_attention(qd, kd, vd, causal=causal)
        out[f"{name}.output"] = output
        if weights.shape[-1] > 1:  # at T = 1 every weight is 1 for everyone: the check uses ones, not a reference
            out[f"{name}.weights"] = weights
        if name == "grads":
            (output * grad_ramp(output.shape)).sum().backward()
            out.update({"grads.dQ": qd.grad, "grads.dK": kd.grad, "grads.dV": vd.grad})

    for name, (x, heads) in split_cases(seed).items():
        out[f"split_{name}.x"] = x
        out[f"split_{name}.y"] = solution.split_heads(f64(x), heads)

    for name, (x, heads, weights) in mha_cases(seed).items():
        out[f"{name}.x"] = x
        out.update({f"{name}.{k}": v for k, v in weights.items()})
        out[f"{name}.y"] = _model(solution, x.shape[-1], heads, weights)(f64(x))

    q, k, v = seed42_inputs()
    weights42, _ = seed42_model()
    # The chapter's weights, but an input of the student's own: a fixed hidden input could be answered from a
    # table made offline (tests/fixtures/attention/hostile/replay_hidden_answers.py).
    x42 = randn(case_generator(seed, "seed42.x"), 4, 8)
    output, weights = solution.scaled_dot_product_attention(f64(q), f64(k), f64(v))
    out.update({"seed42.output": output, "seed42.weights": weights, "seed42.x": x42})
    out.update({f"seed42.{k}": v.clone() for k, v in weights42.items()})
    out["seed42.y"] = _model(solution, 8, 2, weights42)(f64(x42))

    return {name: t.detach().to(torch.float32).contiguous() for name, t in sorted(out.items())}
