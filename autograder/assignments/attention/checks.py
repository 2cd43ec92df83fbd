"""The attention assignment's hidden checks (13 of the 20 points: causal_mask 3, scaled_dot_product_attention 10,
split_heads 4, MultiHeadAttention 3 in all; the 7 public ones are in public_checks.py). They use `refs`, each
student's own inputs and the references computed from the solution (see cases.py), and the full diagnosis.
"""
from __future__ import annotations

import torch

from autograder.public import expect
from autograder.public.check import check
from autograder.public.errors import StudentError, SubmissionLoadError
from autograder.public.text import Text

from . import diagnosis
from .cases import MHA_NAMES

SDPA = "scaled_dot_product_attention"
MHA = "MultiHeadAttention"
PAIR = ("output", "weights")  # what scaled_dot_product_attention returns
# The chapter's printed seed-42 weights (4 decimals): published in the handout, so a public check may use them.
SEED42_WEIGHTS = torch.tensor([[1.0, 0.0, 0.0, 0.0],
                               [0.9310, 0.0690, 0.0, 0.0],
                               [0.2060, 0.4573, 0.3367, 0.0],
                               [0.1871, 0.3089, 0.1306, 0.3735]])


def spec_mask(n: int) -> torch.Tensor:
    """The contract itself: entry [i, j] is True exactly when j > i."""
    i = torch.arange(n)
    return i[None, :] > i[:, None]


def sdpa(student, Q, K, V, causal=None, what="scaled_dot_product_attention"):
    """Call the student's attention and check it returns a pair of tensors of the right shapes. When the call
    raises, the error carries a diagnosis if probing other shapes tells why (see `diagnosis.sdpa_raised`)."""
    kwargs = {} if causal is None else {"causal": causal}
    try:
        result = student.scaled_dot_product_attention(Q, K, V, **kwargs)
    except StudentError as e:
        if not e.todo and not isinstance(e, SubmissionLoadError):
            e.diagnosis = expect.safely(lambda: diagnosis.sdpa_raised(_prober(student), Q, K, V, causal is not False))
        raise
    out, weights = expect.pair(result, what, PAIR)
    T = Q.shape[-2]
    hint = lambda: diagnosis.sdpa(Q, K, V, causal is not False, out, weights, probe=_prober(student))
    expect.tensor(out, "output", (*Q.shape[:-1], V.shape[-1]), torch.float32, diagnose=hint)
    expect.tensor(weights, "weights", (*Q.shape[:-1], T), torch.float32, diagnose=hint)
    return out, weights


def _prober(student):
    """call(Q, K, V, causal) -> the student's (output, weights), or None when it raises or returns something else."""
    def call(Q, K, V, causal):
        try:
            result = student.scaled_dot_product_attention(Q, K, V, **({} if causal else {"causal": False}))
        except StudentError:
            return None
        ok = isinstance(result, tuple) and len(result) == 2 and all(type(t) is torch.Tensor for t in result)
        return result if ok else None
    return call


def sdpa_against(student, refs, case: str, causal: bool = True):
    """Compare output and weights with the references of `case`, naming the mistake when they differ."""
    Q, K, V = refs[f"{case}.Q"], refs[f"{case}.K"], refs[f"{case}.V"]
    out, weights = sdpa(student, Q, K, V, causal=causal)
    hint = lambda: diagnosis.sdpa(Q, K, V, causal, out, weights, probe=_prober(student))
    expected = refs.get(f"{case}.weights")
    expected = torch.ones(*Q.shape[:-1], 1) if expected is None else expected  # T = 1: one key, weight 1
    expect.close(weights, expected, "weights", diagnose=hint)
    expect.close(out, refs[f"{case}.output"], "output", diagnose=hint)


# -- causal_mask ---------------------------------------------------------------------------------------------------
def mask_hint(student, got, n: int):
    """Name the causal_mask mistake. Below n = 3 the wrong patterns look alike (at n = 1 a mask that hides the
    diagonal is also one that is inverted), so a right-shaped but wrong mask is judged on causal_mask(4) instead."""
    def hint():
        if n < 3 and isinstance(got, torch.Tensor) and tuple(got.shape) == (n, n):
            return diagnosis.mask(student.causal_mask(4), 4)
        return diagnosis.mask(got, n)
    return hint






@check(points=1, function="causal_mask",
       zh="causal_mask 对其他长度同样正确", en="causal_mask is right for other lengths too")
def mask_values_other_lengths(student):
    for n in (3, 7, 16):
        got = student.causal_mask(n)
        expect.tensor(got, f"causal_mask({n})", (n, n), torch.bool, diagnose=mask_hint(student, got, n))
        if not torch.equal(got, spec_mask(n)):
            expect.fail(Text(zh=f"causal_mask({n}) 的值不对",
                             en=f"causal_mask({n}) is wrong"),
                        expect.safely(mask_hint(student, got, n)))


# -- scaled_dot_product_attention ---------------------------------------------------------------------------------






@check(points=1, function=SDPA, kind="structural",
       zh="批量与多头输入、大小为 1 的前导维度、T = 1、T ≠ d_head、d_v ≠ d_head 时的形状",
       en="shapes with batch and head dims, leading dims of size 1, T = 1, T != d_head, d_v != d_head")
def sdpa_shapes_batched(student, refs):
    for case in ("batched", "noncausal", "scaling", "leading_ones", "one_token"):
        sdpa(student, refs[f"{case}.Q"], refs[f"{case}.K"], refs[f"{case}.V"])


@check(points=1, function=SDPA,
       zh="批量输入 [2, 3, 6, 4]、d_v = 5，前导维度为 1 的 [1, 1, 5, 4]，以及 T = 1 时的数值",
       en="values on batched input [2, 3, 6, 4] with d_v = 5, on [1, 1, 5, 4] (leading dims of size 1) and at T = 1")
def sdpa_values_batched(student, refs):
    for case in ("batched", "leading_ones", "one_token"):
        sdpa_against(student, refs, case)


@check(points=1, function=SDPA,
       zh="按 1/√d_head 缩放（T = 6，d_head = 16）", en="scores scaled by 1/sqrt(d_head) (T = 6, d_head = 16)")
def sdpa_scaling(student, refs):
    sdpa_against(student, refs, "scaling")


@check(points=1, function=SDPA,
       zh="causal=False 时可以关注未来位置", en="with causal=False every position attends to the future too")
def sdpa_non_causal(student, refs):
    sdpa_against(student, refs, "noncausal", causal=False)


@check(points=1, function=SDPA,
       zh="大数值（约 ±1000 的分数）时结果有限且正确，单个序列与批量", en="finite, correct results for large scores (about ±1000), one sequence and batched")
def sdpa_large_logits(student, refs):
    for case in ("large", "large_batched"):
        sdpa_against(student, refs, case)


@check(points=1, function=SDPA,
       zh="梯度能传回 Q、K、V，且数值正确", en="gradients reach Q, K and V with the right values")
def sdpa_gradients(student, refs):
    Q, K, V = refs["grads.Q"], refs["grads.K"], refs["grads.V"]
    reply = student.call(SDPA, Q, K, V, grad_of=(0, 1, 2), grad_output=0)
    out, weights = expect.pair(reply.value, SDPA, PAIR)
    expect.close(out, refs["grads.output"], "output",
                 diagnose=lambda: diagnosis.sdpa(Q, K, V, True, out, weights, probe=_prober(student)))
    if isinstance(reply.grads, dict):
        expect.fail(Text(zh="无法对你的输出做反向传播",
                         en="backpropagation through your output failed"),
                    diagnosis.DETACHED,
                    Text(zh=f"（{reply.grads['error']['type']}）", en=f"({reply.grads['error']['type']})"))
    for name, grad in zip("QKV", reply.grads):  # exactly one per input: validated by the student proxy
        if grad is None:
            expect.fail(Text(zh=f"梯度没有传回 {name}（.detach()、.data 或新建张量切断了计算图）",
                             en=f"no gradient reaches {name} (.detach(), .data or a new tensor cuts the graph)"),
                        diagnosis.DETACHED)
        expect.close(grad, refs[f"grads.d{name}"], f"gradient of {name}", atol=1e-4, rtol=1e-3)


@check(points=1, function=SDPA, kind="structural",
       zh="不修改调用者传入的 Q、K、V", en="the caller's Q, K and V are left unchanged")
def sdpa_inputs_unchanged(student, refs):
    """Decided from the student's own results: called twice on the very same tensors, a function that modified
    them in the first call computes something else in the second (the worker's word about its inputs is not used)."""
    Q, K, V = refs["batched.Q"], refs["batched.K"], refs["batched.V"]
    reply = student.call(SDPA, Q, K, V, repeat=2)
    first = expect.pair(reply.value, SDPA, PAIR)
    again = expect.pair(reply.again, SDPA, PAIR)
    for what, a, b in zip(("output", "weights"), first, again):
        expect.tensor(a, what)
        expect.tensor(b, what)
        if a.shape != b.shape or not torch.equal(a.nan_to_num(), b.nan_to_num()):
            expect.fail(Text(zh="对同一组 Q、K、V 再调用一次，结果不同：你的函数原地修改了输入（例如 `Q /= ...`、`.div_()`、"
                        "`masked_fill_`）",
                             en="a second call on the same Q, K, V gives a different result: your function modifies its "
                        "inputs in place (e.g. `Q /= ...`, `.div_()`, `masked_fill_`)"),
                        diagnosis.MUTATES)


# -- split_heads ----------------------------------------------------------------------------------------------------


def split_against(student, refs, case: str, heads: int):
    x, expected = refs[f"split_{case}.x"], refs[f"split_{case}.y"]
    got = student.split_heads(x, heads)
    expect.tensor(got, f"split_heads(x of shape {list(x.shape)}, {heads})", expected.shape, torch.float32,
                  diagnose=lambda: diagnosis.split(x, heads, got, _split_prober(student)))
    if not torch.equal(got, expected):
        expect.fail(Text(zh=f"split_heads(形状 {list(x.shape)} 的 x, {heads}) 把特征放进了错误的头或位置",
                         en=f"split_heads(x of shape {list(x.shape)}, {heads}) puts features in the wrong heads or places"),
                    expect.safely(lambda: diagnosis.split(x, heads, got, _split_prober(student))))


def _split_prober(student):
    """call(x, heads) -> the student's split_heads(x, heads), or None when it raises."""
    def call(x, heads):
        try:
            return student.split_heads(x, heads)
        except StudentError:
            return None
    return call


@check(points=1, function="split_heads",
       zh="单个序列 [3, 8]、2 个头时的数值（T ≠ d_head）", en="values for one sequence [3, 8] with 2 heads (T != d_head)")
def split_values_unbatched(student, refs):
    split_against(student, refs, "unbatched", 2)


@check(points=1, function="split_heads",
       zh="批量输入 [2, 5, 12]、3 个头时的数值", en="values for a batch [2, 5, 12] with 3 heads")
def split_values_batched(student, refs):
    split_against(student, refs, "batched", 3)


@check(points=1, function="split_heads",
       zh="1 个头（单个序列与批量）与 d_head = 1 的边界情况", en="edge cases: one head (one sequence and batched), and d_head = 1")
def split_single_head(student, refs):
    split_against(student, refs, "one_head", 1)
    split_against(student, refs, "one_head_batched", 1)
    split_against(student, refs, "all_heads", 6)


# -- MultiHeadAttention (given code, built on the student's functions) ---------------------------------------------
def mha_against(model, x, expected, student, weights, heads):
    """The model's output on x against the reference. When the call raises or the output differs, the mistake is
    looked for in the student's split_heads on this input first (MultiHeadAttention runs on it), then in the
    known MultiHeadAttention mistakes (see `mha_diagnosis`)."""
    try:
        got = model(x)
    except StudentError as e:
        if not e.todo and not isinstance(e, SubmissionLoadError):
            e.diagnosis = expect.safely(lambda: split_blamed(student, x, heads))
        raise
    expect.close(got, expected, "MultiHeadAttention output",
                 diagnose=lambda: split_blamed(student, x, heads) or mha_diagnosis(model, x, expected, got, weights, heads))


def split_blamed(student, x, heads):
    """The split_heads mistake shown by the student's split_heads on the projected input's shape, if any."""
    probe = torch.randn(x.shape, generator=torch.Generator().manual_seed(11))
    try:
        got = student.split_heads(probe, heads)
    except StudentError:
        return None

    if isinstance(got, torch.Tensor) and got.shape == diagnosis.right_split(probe, heads).shape and \
            torch.equal(got, diagnosis.right_split(probe, heads)):
        return None
    return diagnosis.split(probe, heads, got, _split_prober(student))


def mha_diagnosis(model, x, expected, got, weights, heads):
    """A known MultiHeadAttention mistake recomputed from the injected weights (a scale from d_model, ...); else set
    any projection biases to 0 and run again: if the output is then right, the biases were the mistake."""
    found = diagnosis.mha(x, weights, heads, got)
    if found is not None:
        return found
    zeroed = 0
    for name in MHA_NAMES:
        try:
            model.load_parameters({f"{name}.bias": torch.zeros(x.shape[-1])})
            zeroed += 1
        except StudentError:  # no such parameter
            pass
    return diagnosis.MHA_BIAS if zeroed and diagnosis.same(model(x), expected) else None




@check(points=1, function=MHA,
       zh="注入权重后，批量输入 [2, 5, 12]、3 个头的输出，以及只有 1 个头的 [2, 4, 6]",
       en="output for a batch [2, 5, 12], 3 heads, and for [2, 4, 6] with one head, with injected weights")
def mha_injected_weights(student, refs):
    for case, d_model, heads in (("mha", 12, 3), ("mha1", 6, 1)):
        model = student.new(MHA, d_model, heads)
        weights = {f"{n}.weight": refs[f"{case}.{n}.weight"] for n in MHA_NAMES}
        model.load_parameters(weights)
        mha_against(model, refs[f"{case}.x"], refs[f"{case}.y"], student, weights, heads)


@check(points=1, function=MHA,
       zh="使用章节 seed-42 权重的 MultiHeadAttention(8, 2) 的输出", en="MultiHeadAttention(8, 2) output with the chapter's seed-42 weights")
def mha_seed42(student, refs):
    model = student.new(MHA, 8, 2)
    weights = {f"{n}.weight": refs[f"seed42.{n}.weight"] for n in MHA_NAMES}
    model.load_parameters(weights)
    mha_against(model, refs["seed42.x"], refs["seed42.y"], student, weights, 2)

