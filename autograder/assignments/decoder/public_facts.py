"""The published facts of the decoder assignment (`public_facts.json`, written by `autograder release`): the public
inputs, the solution's results on them, and what each catalogued mistake of `diagnosis.py` returns on them. Nothing
here is shipped; the JSON is (with public_checks.py, in the student's checker).

Public inputs: rms_norm on [3, 8] with weight all ones, on [2, 3, 8] with a learned scale, and on a square [8, 8]
(where a mean without keepdim broadcasts instead of raising), on rows of about 1e-4 (where eps matters) and with
an eps the caller passes; SwiGLU(4, 6) with weights injected by name; the chapter's seed-42 DecoderLayer(8, 2, 16)
(run.py), the same layer with learned RMSNorm weights, and with causal=False.
"""
from __future__ import annotations

import torch

from autograder.assignments import get

from . import diagnosis
from .cases import EPS, SEED42_SIZES, seed42_model
from .cases import build as build_module


def rms_inputs() -> dict[str, tuple]:
    """name -> (x, weight[, eps given by the caller])"""
    g = torch.Generator().manual_seed(4)
    first = (torch.randn(3, 8, generator=g) + 0.5, torch.ones(8))
    g = torch.Generator().manual_seed(1010)
    batched = (torch.randn(2, 3, 8, generator=g) + 0.5, 1.0 + 0.5 * torch.randn(8, generator=g))
    g = torch.Generator().manual_seed(1011)
    square = (torch.randn(8, 8, generator=g) + 0.5, 1.0 + 0.5 * torch.randn(8, generator=g))
    g = torch.Generator().manual_seed(1012)
    tiny = (torch.randn(2, 8, generator=g) * 1e-4, 1.0 + 0.5 * torch.randn(8, generator=g))  # eps matters here
    g = torch.Generator().manual_seed(1013)
    given = (torch.randn(3, 8, generator=g) * 0.1, torch.ones(8), 1e-2)
    return {"rms": first, "rms_batched": batched, "rms_square": square, "rms_tiny": tiny, "rms_eps": given}


def layer_inputs() -> dict[str, tuple]:
    """name -> (weights, x, causal): the chapter's seed-42 layer, then with learned RMSNorm weights that differ
    (a swapped or reused norm shows), then with causal=False."""
    weights, x = seed42_model()
    g = torch.Generator().manual_seed(1014)
    learned = dict(weights, **{"norm1.weight": 1.0 + 0.5 * torch.randn(8, generator=g),
                               "norm2.weight": 1.0 + 0.5 * torch.randn(8, generator=g)})
    return {"layer_seed42": (weights, x, True), "layer_norms": (learned, x, True), "layer_open": (weights, x, False)}


def swiglu_inputs() -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    weights = {"W_gate.weight": torch.randn(6, 4, generator=g) * 0.5, "W_up.weight": torch.randn(6, 4, generator=g) * 0.5,
               "W_down.weight": torch.randn(4, 6, generator=g) * 0.5}
    return weights, torch.randn(3, 4, generator=g)


def _variants(candidates, key: str):
    found = []
    for diag, thunk in candidates:
        try:
            found.append((diag, {key: thunk().float()}))
        except Exception:  # the mistake does not apply to these shapes
            continue
    return found


def build_facts(solution):
    cases = {}
    for name, (x, w, *given) in rms_inputs().items():
        eps = given[0] if given else EPS
        inputs = {"x": x, "weight": w, **({"eps": torch.tensor(eps)} if given else {})}
        y = solution.rms_norm(x, w, eps=eps) if given else solution.rms_norm(x, w)
        cases[name] = {"inputs": inputs, "expected": {"y": y.float()},
                       "variants": _variants(diagnosis._rms_candidates(x.double(), w.double(), eps, bool(given)), "y")}
    weights, x = swiglu_inputs()
    model = build_module(solution, "SwiGLU", (4, 6), weights)
    W = [weights[f"{n}.weight"].double() for n in ("W_gate", "W_up", "W_down")]
    cases["swiglu"] = {"inputs": {"x": x, **weights}, "expected": {"y": model(x.double()).float()},
                       "variants": _variants(diagnosis._mlp_candidates(x.double(), *W), "y")}
    for name, (weights, x, causal) in layer_inputs().items():
        model = build_module(solution, "DecoderLayer", SEED42_SIZES, weights)
        parts = diagnosis._Parts(weights, SEED42_SIZES[1], causal)
        cases[name] = {"inputs": {"x": x, "causal": torch.tensor(causal), **weights},
                       "expected": {"y": model(x.double(), causal=causal).float()},
                       "variants": _variants(diagnosis._layer_candidates(x.double(), parts), "y")}
    return cases


def build(solution):
    """(assignment info, cases, texts) for `autograder.public.facts.dumps`."""
    texts = {"output_dtype": diagnosis._named("output_dtype", dtype="{dtype}"),
             "block_wrong": diagnosis._named("block_wrong", block="{block}")}
    return get("decoder").public_info(), build_facts(solution), texts
