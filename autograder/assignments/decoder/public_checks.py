"""The decoder assignment's public checks (6 of the 20 points). Released to students inside their checker
(`python check.py`, `grader.check(...)`), so they use only the public runtime and the published facts
(public_facts.json: the public inputs, the solution's results on them, and what each catalogued mistake returns on
them); the grader runs the very same checks in the sandbox. Hidden checks are in checks.py.
"""
from __future__ import annotations

from pathlib import Path

import torch

from autograder.public import expect, facts
from autograder.public.check import check
from autograder.public.errors import StudentError, SubmissionLoadError

FACTS = facts.Lazy(Path(__file__).with_name("public_facts.json"))
RMS, MLP, LAYER = "rms_norm", "SwiGLU", "DecoderLayer"
MLP_NAMES = ("W_gate.weight", "W_up.weight", "W_down.weight")


def name(case: str, got) -> expect.Diagnosis | None:
    """The catalogued mistake giving `got` on the published case (right values in another dtype included)."""
    c = FACTS[case]
    if type(got) is torch.Tensor and got.is_floating_point() and got.dtype != torch.float32 and \
            facts.same(got.float(), c.expected["y"]):
        return FACTS.diagnosis("output_dtype", dtype=got.dtype)
    return c.name(y=got)


# -- rms_norm -------------------------------------------------------------------------------------------------------
def rms(student, case: str):
    """The student's rms_norm on a published case, checked to be a float32 tensor of the input's shape."""
    c = FACTS[case]
    x, w = c.inputs["x"], c.inputs["weight"]
    eps = {"eps": float(c.inputs["eps"])} if "eps" in c.inputs else {}
    try:
        got = student.rms_norm(x, w, **eps)
    except StudentError as e:
        if not e.todo and not isinstance(e, SubmissionLoadError) and case != "rms_square":
            e.diagnosis = expect.safely(lambda: _rms_raised(student))
        raise
    what = f"rms_norm(x of shape {list(x.shape)}, weight" + (f", eps={eps['eps']:g})" if eps else ")")
    expect.tensor(got, what, tuple(x.shape), torch.float32, diagnose=lambda: name(case, got))
    return got, what


def _rms_raised(student):
    """The call raised: on the square published input a mean without keepdim broadcasts; its result names it."""
    try:
        got, _ = rms(student, "rms_square")
    except (StudentError, expect.CheckFailed):
        return None
    return name("rms_square", got)


@check(points=1, kind="structural", function=RMS, visibility="public",
       zh="rms_norm 对 [3, 8] 与 [2, 3, 8] 的输入返回同形状的 float32 张量",
       en="rms_norm returns a float32 tensor of the input's shape for [3, 8] and [2, 3, 8]")
def rms_shape(student):
    for case in ("rms", "rms_batched"):
        rms(student, case)


@check(points=1, function=RMS, visibility="public",
       zh="公开例子上符合 x / sqrt(mean(x²) + eps) · weight：[3, 8]（weight 全为 1）、[2, 3, 8] 与 [8, 8]（学习到的 weight）、"
          "数值约 1e-4 的行、调用者给定的 eps",
       en="x / sqrt(mean(x²) + eps) · weight on the published examples: [3, 8] (weight all ones), [2, 3, 8] and [8, 8] "
          "(a learned weight), rows of values about 1e-4, an eps the caller passes")
def rms_formula(student):
    for case in ("rms", "rms_batched", "rms_square", "rms_tiny", "rms_eps"):
        got, what = rms(student, case)
        expect.close(got, FACTS[case].expected["y"], what, diagnose=lambda: name(case, got))


# -- SwiGLU ---------------------------------------------------------------------------------------------------------
@check(points=1, kind="structural", function=MLP, visibility="public",
       zh="SwiGLU(8, 16) 把 [4, 8] 映射为 [4, 8]、[2, 4, 8] 映射为 [2, 4, 8]",
       en="SwiGLU(8, 16) maps [4, 8] to [4, 8] and [2, 4, 8] to [2, 4, 8]")
def swiglu_shape(student):
    model = student.new(MLP, 8, 16)
    g = torch.Generator().manual_seed(5)
    for shape in ((4, 8), (2, 4, 8)):
        expect.tensor(model(torch.randn(*shape, generator=g)), f"SwiGLU(8, 16)(x of shape {list(shape)})", shape,
                      torch.float32)


def swiglu(student):
    c = FACTS["swiglu"]
    model = student.new(MLP, 4, 6)
    model.load_parameters({n: c.inputs[n] for n in MLP_NAMES})
    return model(c.inputs["x"])


@check(points=1, function=MLP, visibility="public",
       zh="SwiGLU(4, 6) 在公开例子上符合公式 W_down(silu(W_gate(x)) · W_up(x))（按名字注入权重）",
       en="SwiGLU(4, 6) follows W_down(silu(W_gate(x)) · W_up(x)) on the published example (weights injected by name)")
def swiglu_formula(student):
    got = swiglu(student)
    expect.close(got, FACTS["swiglu"].expected["y"], "SwiGLU(4, 6)(x)", diagnose=lambda: name("swiglu", got))


# -- DecoderLayer ---------------------------------------------------------------------------------------------------
@check(points=1, kind="structural", function=LAYER, visibility="public",
       zh="DecoderLayer(8, 2, 16) 把 [4, 8] 映射为 [4, 8]、[2, 4, 8] 映射为 [2, 4, 8]",
       en="DecoderLayer(8, 2, 16) maps [4, 8] to [4, 8] and [2, 4, 8] to [2, 4, 8]")
def layer_shape(student):
    model = student.new(LAYER, 8, 2, 16)
    g = torch.Generator().manual_seed(6)
    for shape in ((4, 8), (2, 4, 8)):
        expect.tensor(model(torch.randn(*shape, generator=g)), f"DecoderLayer(8, 2, 16)(x of shape {list(shape)})",
                      shape, torch.float32)


def blocks_wrong(student) -> expect.Diagnosis | None:
    """The layer is built on the student's rms_norm and SwiGLU: when one of them is wrong on its published example,
    no wiring can be right."""
    for block, run in ((RMS, lambda: rms(student, "rms_batched")[0]), (MLP, lambda: swiglu(student))):
        case = "rms_batched" if block == RMS else "swiglu"
        try:
            got = run()
        except (StudentError, expect.CheckFailed):
            return FACTS.diagnosis("block_wrong", block=block)
        if not facts.same(got, FACTS[case].expected["y"]):
            return FACTS.diagnosis("block_wrong", block=block)
    return None


@check(points=1, function=LAYER, visibility="public",
       zh="章节 seed-42 例子的输出 y（与 run.py 打印的一致），以及同一层换上不同的 RMSNorm weight、以及 causal=False 时",
       en="the chapter's seed-42 output y (as printed by run.py), and the same layer with learned RMSNorm weights, and "
          "with causal=False")
def layer_seed42(student):
    for case in ("layer_seed42", "layer_norms", "layer_open"):
        c = FACTS[case]
        model = student.new(LAYER, 8, 2, 16)
        model.load_parameters({k: v for k, v in c.inputs.items() if k not in ("x", "causal")})
        causal = bool(c.inputs["causal"])
        got = model(c.inputs["x"]) if causal else model(c.inputs["x"], causal=False)
        hint = lambda: (blocks_wrong(student) if type(got) is torch.Tensor and not bool(got.any()) else
                        name(case, got) or blocks_wrong(student))
        what = f"DecoderLayer(8, 2, 16)(x{'' if causal else ', causal=False'}) [{case}]"
        expect.tensor(got, what, (2, 4, 8), torch.float32, diagnose=hint)
        expect.close(got, c.expected["y"], what, diagnose=hint)
