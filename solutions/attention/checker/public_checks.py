"""The attention assignment's public checks (7 of the 20 points). Released to students inside their checker
(`python check.py`, `grader.check(...)`), so they use only the public runtime and the published facts
(public_facts.json: the public inputs, the solution's results on them, and what each catalogued mistake returns on
them); the grader runs the very same checks in the sandbox. Hidden checks are in checks.py.
"""
from __future__ import annotations

from pathlib import Path

import torch

from . import expect, facts
from .check import check
from .errors import StudentError, SubmissionLoadError
from .text import Text

FACTS = facts.Lazy(Path(__file__).with_name("public_facts.json"))
SDPA = "scaled_dot_product_attention"
PAIR = ("output", "weights")  # what scaled_dot_product_attention returns
SDPA_CASES = ("seed42", "square", "batched", "noncausal", "one_token", "large")
SPLIT_CASES = ("split", "split_batched", "split_one_head")


# -- causal_mask ---------------------------------------------------------------------------------------------------
def mask_name(student, got, n: int) -> expect.Diagnosis | None:
    """The causal_mask mistake shown by `got` (= causal_mask(n)). Below n = 3 the wrong patterns look alike, so a
    right-shaped wrong mask is judged on causal_mask(4)."""
    if n < 3 and type(got) is torch.Tensor and tuple(got.shape) == (n, n):
        return mask_name(student, student.causal_mask(4), 4)
    if type(got) is not torch.Tensor:
        return None
    if tuple(got.shape) != (n, n):
        return FACTS.diagnosis("mask_fixed_size", n=n, shape=list(got.shape))
    as_bool = got != 0
    if got.dtype != torch.bool and torch.equal(as_bool, FACTS[f"mask{n}"].expected["mask"]):
        return FACTS.diagnosis("mask_not_bool", dtype=got.dtype)
    return FACTS[f"mask{n}"].name(mask=as_bool)


@check(points=1, function="causal_mask", visibility="public", kind="structural",
       zh="causal_mask(4) 返回 [4, 4] 的 bool 张量", en="causal_mask(4) returns a bool [4, 4] tensor")
def mask_dtype_shape(student):
    got = student.causal_mask(4)
    expect.tensor(got, "causal_mask(4)", (4, 4), torch.bool, diagnose=lambda: mask_name(student, got, 4))


@check(points=1, function="causal_mask", visibility="public",
       zh="causal_mask 在 T = 1, 2, 4, 9 时只遮住对角线以上", en="causal_mask hides exactly the positions above the diagonal for T = 1, 2, 4, 9")
def mask_values_small(student):
    for n in (1, 2, 4, 9):
        got = student.causal_mask(n)
        expect.tensor(got, f"causal_mask({n})", (n, n), torch.bool, diagnose=lambda: mask_name(student, got, n))
        if not torch.equal(got, FACTS[f"mask{n}"].expected["mask"]):
            expect.fail(Text(zh=f"causal_mask({n}) 的值不对", en=f"causal_mask({n}) is wrong"),
                        expect.safely(lambda: mask_name(student, got, n)))


# -- scaled_dot_product_attention ---------------------------------------------------------------------------------
def sdpa_name(case: str, out, weights) -> expect.Diagnosis | None:
    """The catalogued mistake that gives (out, weights) on the published case, if exactly one does."""
    c = FACTS[case]
    right_out, right_w = c.expected["output"], c.expected["weights"]
    if facts.same(out, right_w) and facts.same(weights, right_out):
        return FACTS.texts["swapped_outputs"]
    for value in (out, weights):
        if type(value) is torch.Tensor and value.is_floating_point() and value.dtype != torch.float32 and \
                facts.same(out.float(), right_out) and facts.same(weights.float(), right_w):
            return FACTS.diagnosis("output_dtype", dtype=value.dtype)
    if case == "large" and type(weights) is torch.Tensor and weights.is_floating_point() and \
            not bool(torch.isfinite(weights).all()):
        return FACTS.texts["unstable_softmax"]
    got = {"weights": weights}
    if type(out) is torch.Tensor and out.shape == right_out.shape:
        got["output"] = out
    return c.name(**got)


def sdpa_raised(student) -> expect.Diagnosis | None:
    """The call raised: on the published batch whose dims are all 4, `K.T` and friends run; their result names
    the mistake."""
    try:
        out, weights = sdpa(student, "square")
    except (StudentError, expect.CheckFailed):
        return None
    return sdpa_name("square", out, weights)


def sdpa(student, case: str):
    """The student's (output, weights) on a published case, checked to be two float32 tensors of the right shapes."""
    c = FACTS[case]
    Q, K, V, causal = c.inputs["Q"], c.inputs["K"], c.inputs["V"], bool(c.inputs["causal"])
    try:
        result = student.scaled_dot_product_attention(Q, K, V, **({} if causal else {"causal": False}))
    except StudentError as e:
        if not e.todo and not isinstance(e, SubmissionLoadError) and case != "square":
            e.diagnosis = expect.safely(lambda: sdpa_raised(student))
        raise
    out, weights = expect.pair(result, SDPA, PAIR)
    hint = lambda: sdpa_name(case, out, weights)
    shape = f" (Q {list(Q.shape)}, V {list(V.shape)})"
    expect.tensor(out, "output" + shape, (*Q.shape[:-1], V.shape[-1]), torch.float32, diagnose=hint)
    expect.tensor(weights, "weights" + shape, (*Q.shape[:-1], Q.shape[-2]), torch.float32, diagnose=hint)
    return out, weights


@check(points=1, function=SDPA, visibility="public", kind="structural",
       zh="output 与 weights 的形状：单个序列、批量与多头、causal=False、T = 1",
       en="output and weights shapes: one sequence, batch and head dims, causal=False, T = 1")
def sdpa_shapes_published(student):
    for case in ("seed42", "rows", "square", "batched", "noncausal", "one_token"):
        sdpa(student, case)


@check(points=1, function=SDPA, visibility="public",
       zh="因果注意力：未来位置的权重恰好为 0，每行之和为 1", en="causal attention: future weights are exactly 0 and every row sums to 1")
def sdpa_causal_rows(student):
    for case in ("rows", "seed42", "batched"):
        out, weights = sdpa(student, case)
        T = weights.shape[-1]
        hint = lambda: sdpa_name(case, out, weights)
        expect.finite(weights, f"weights (T={T})", diagnose=hint)
        i = torch.arange(T)
        future = weights[..., i[None, :] > i[:, None]]  # the contract: key j is in query i's future when j > i
        if not torch.all(future == 0):
            expect.fail(Text(zh=f"未来位置的权重不是 0（T={T}）", en=f"weights of future positions are not exactly 0 (T={T})"),
                        expect.safely(hint), Text(zh=f"（最大 {future.abs().max():.3g}）", en=f"(largest {future.abs().max():.3g})"))
        sums = weights.sum(-1)
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5, rtol=0):
            worst = (sums - 1).abs().max()
            expect.fail(Text(zh=f"weights 的每行之和不为 1（T={T}）", en=f"rows of weights do not sum to 1 (T={T})"),
                        expect.safely(hint), Text(zh=f"（最大偏差 {worst:.3g}）", en=f"(off by up to {worst:.3g})"))


@check(points=1, function=SDPA, visibility="public",
       zh="公开例子的数值：章节 seed-42 例子（与 run.py 打印的一致）、全为 4 的批量、各维不同的批量、causal=False、T = 1、约 ±1000 的分数",
       en="values on the published examples: the chapter's seed-42 example (as run.py prints it), a batch of all-4 dims, "
          "a batch whose dims all differ, causal=False, T = 1, scores of about ±1000")
def sdpa_published_values(student):
    for case in SDPA_CASES:
        out, weights = sdpa(student, case)
        c = FACTS[case]
        hint = lambda: sdpa_name(case, out, weights)
        expect.close(weights, c.expected["weights"], f"weights ({case})", diagnose=hint)
        expect.close(out, c.expected["output"], f"output ({case})", diagnose=hint)


# -- split_heads ----------------------------------------------------------------------------------------------------
@check(points=1, function="split_heads", visibility="public",
       zh="公开例子上符合约定 out[..., h, t, :] == x[..., t, h·d_head:(h+1)·d_head]：[4, 8] 2 个头、[2, 5, 12] 3 个头、[2, 4, 6] 1 个头",
       en="the contract out[..., h, t, :] == x[..., t, h*d_head:(h+1)*d_head] on the published examples: [4, 8] with "
          "2 heads, [2, 5, 12] with 3, [2, 4, 6] with 1")
def split_published(student):
    for case in SPLIT_CASES:
        c = FACTS[case]
        x, heads, expected = c.inputs["x"], int(c.inputs["num_heads"]), c.expected["heads"]
        got = student.split_heads(x, heads)
        what = f"split_heads(x of shape {list(x.shape)}, {heads})"
        expect.tensor(got, what, tuple(expected.shape), torch.float32, diagnose=lambda: c.name(heads=got))
        if not torch.equal(got, expected):
            wrong = (got != expected).nonzero()[0].tolist()
            expect.fail(Text(zh=f"{what} 把特征放进了错误的头或位置", en=f"{what} puts features in the wrong heads or places"),
                        expect.safely(lambda: c.name(heads=got)),
                        Text(zh=f"（第一个错误位置 {wrong}）", en=f"(first wrong at {wrong})"))


# -- MultiHeadAttention (given code, built on the student's functions) ---------------------------------------------
@check(points=1, function="MultiHeadAttention", visibility="public", kind="structural",
       zh="MultiHeadAttention(8, 2) 把 [4, 8] 映射为 [4, 8]", en="MultiHeadAttention(8, 2) maps [4, 8] to [4, 8]")
def mha_shape(student):
    model = student.new("MultiHeadAttention", 8, 2)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(5))
    expect.tensor(model(x), "MultiHeadAttention(8, 2)(x)", (4, 8), torch.float32)
