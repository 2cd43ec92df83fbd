"""Name the mistake: recompute what each known wrong implementation would return on the same inputs and see
whether the student's result matches one of them. Each variant is a few lines of float64 torch.

Used only when a check has already failed; returns a `Diagnosis` (id + plain words in zh and en) or None, in which
case the feedback stays generic and honest.
"""
from __future__ import annotations

import math

import torch

from autograder.engine.expect import Diagnosis

MATCH_ATOL, MATCH_RTOL = 1e-4, 1e-3

DETACHED = Diagnosis("detached", "计算图被切断：不要用 .detach()、.data 或 torch.tensor(...) 重新包装中间结果，梯度要能传回 Q、K、V。",
                     "The graph is cut: don't use .detach(), .data or torch.tensor(...) on intermediate results; "
                     "gradients must flow back to Q, K and V.")
MUTATES = Diagnosis("mutates_inputs", "你原地修改了输入（如 Q /= √d 或 masked_fill_）。请使用不改变输入的运算：Q / √d、masked_fill。",
                    "You modify an input in place (e.g. Q /= sqrt(d) or masked_fill_). Use out-of-place ops: "
                    "Q / sqrt(d), masked_fill.")
UNSTABLE = Diagnosis("unstable_softmax", "大分数时出现 NaN/inf：手写的 softmax 没有先减去每行最大值，exp 溢出了。用 torch.softmax 或先减 max。",
                     "NaN/inf for large scores: your hand-written softmax does not subtract the row max first, so exp "
                     "overflows. Use torch.softmax or subtract the max.")
SWAPPED = Diagnosis("swapped_outputs", "返回顺序反了：应当返回 (output, weights)，你返回的是 (weights, output)。",
                    "Wrong order: return (output, weights); you return (weights, output).")


def _softmax(s, dim=-1):
    return torch.softmax(s, dim=dim)


def _future(T):
    i = torch.arange(T)
    return i[None, :] > i[:, None]


def _masked(s, mask, fill=float("-inf")):
    return s.masked_fill(mask, fill)


# Each variant: (Q, K, V, causal) in float64 -> (output, weights). The correct computation is listed first under
# the id "correct" so that "matches the solution with causal flipped" can be told apart.
def _variants():
    def attn(Q, K, V, causal, scale=None, mask_fn=None, softmax=_softmax, post=None, transpose_scores=False):
        d, T = Q.shape[-1], Q.shape[-2]
        s = Q @ K.transpose(-2, -1)
        if transpose_scores:
            s = s.transpose(-2, -1)
        s = s / (math.sqrt(d) if scale is None else scale(d, T))
        if causal and mask_fn is None:
            s = _masked(s, _future(T))
        elif causal:
            s = mask_fn(s, T)
        w = softmax(s)
        if post is not None:
            w = post(w, d, T, causal)
        return w @ V, w

    return {
        "no_scale": lambda Q, K, V, c: attn(Q, K, V, c, scale=lambda d, T: 1.0),
        "scale_by_d": lambda Q, K, V, c: attn(Q, K, V, c, scale=lambda d, T: d),
        "scale_by_sqrt_seq_len": lambda Q, K, V, c: attn(Q, K, V, c, scale=lambda d, T: math.sqrt(T)),
        "scale_constant": lambda Q, K, V, c: attn(Q, K, V, c, scale=lambda d, T: 2.0),
        "scale_after_softmax": lambda Q, K, V, c: attn(Q, K, V, c, scale=lambda d, T: 1.0,
                                                       post=lambda w, d, T, c: w / math.sqrt(d)),
        "scale_on_values": lambda Q, K, V, c: _scale_v(attn(Q, K, V, c, scale=lambda d, T: 1.0), Q.shape[-1]),
        "softmax_wrong_dim": lambda Q, K, V, c: attn(Q, K, V, c, softmax=lambda s: _softmax(s, -2)),
        "softmax_unnormalised": lambda Q, K, V, c: attn(Q, K, V, c, softmax=torch.exp),
        "softmax_no_keepdim": lambda Q, K, V, c: attn(Q, K, V, c, softmax=lambda s: s.exp() / s.exp().sum(-1)),
        "transposed_scores": lambda Q, K, V, c: attn(Q, K, V, c, transpose_scores=True),
        "mask_includes_diagonal": lambda Q, K, V, c: attn(
            Q, K, V, c, mask_fn=lambda s, T: _masked(s, ~_future(T).T)),
        "mask_inverted": lambda Q, K, V, c: attn(Q, K, V, c, mask_fn=lambda s, T: _masked(s, _future(T).T)),
        "mask_filled_with_zero": lambda Q, K, V, c: attn(Q, K, V, c, mask_fn=lambda s, T: _masked(s, _future(T), 0.0)),
        "mask_after_softmax": lambda Q, K, V, c: attn(Q, K, V, False, post=lambda w, d, T, _: w.masked_fill(
            _future(T), 0.0) if c else w),
        "ignores_causal_false": lambda Q, K, V, c: attn(Q, K, V, True) if not c else None,
        "never_masks": lambda Q, K, V, c: attn(Q, K, V, False) if c else None,
    }


def _scale_v(result, d):
    out, w = result
    return out / math.sqrt(d), w


TEXT = {
    "no_scale": ("分数没有除以 √d_head：softmax 会变得过于尖锐。", "The scores are not divided by sqrt(d_head), so the softmax gets too peaked."),
    "scale_by_d": ("你除以的是 d_head，而不是 √d_head。", "You divide by d_head, not sqrt(d_head)."),
    "scale_by_sqrt_seq_len": ("你除以的是 √T（序列长度），而不是 √d_head；当 T = d_head 时两者碰巧相同。",
                              "You divide by sqrt(T) (the sequence length), not sqrt(d_head); they only agree when T = d_head."),
    "scale_constant": ("缩放因子是写死的常数，而不是 √d_head（由 Q 的最后一维得到）。",
                       "The scale is a hard-coded constant instead of sqrt(d_head) taken from Q's last dim."),
    "scale_after_softmax": ("你在 softmax 之后才缩放：应当先缩放分数再做 softmax，权重每行之和应为 1。",
                            "You scale after the softmax: scale the scores before it, so each row of weights sums to 1."),
    "scale_on_values": ("你把 √d_head 的缩放用在了 V（或输出）上，而不是分数上。",
                        "You apply the sqrt(d_head) scaling to V (or the output) instead of to the scores."),
    "softmax_wrong_dim": ("你的权重与 dim=-2 上的 softmax 一致（每列之和为 1）：应在最后一维 dim=-1 上做 softmax。",
                          "Your weights match a softmax over dim -2 (columns sum to 1): use dim=-1, over the keys."),
    "softmax_unnormalised": ("你只算了 exp，没有除以每行之和：权重每行之和应为 1。",
                             "You take exp but do not divide by the row sums: each row of weights must sum to 1."),
    "softmax_no_keepdim": ("手写 softmax 时求和没有 keepdim=True：除法沿错误的维度广播了（方阵时不会报错）。",
                           "Your hand-written softmax sums without keepdim=True, so the division broadcasts along the wrong axis (silently, on square inputs)."),
    "transposed_scores": ("分数矩阵转置了（用了 K·Qᵀ 而不是 Q·Kᵀ）：第 i 行应是查询 i 对所有键的分数。",
                          "Your scores are transposed (K·Qᵀ instead of Q·Kᵀ): row i must hold query i's scores over all keys."),
    "mask_includes_diagonal": ("你的 mask 连对角线也遮住了：第 0 行没有可以关注的位置（结果为 NaN）。用 diagonal=1。",
                               "Your mask also hides the diagonal: row 0 has nothing to attend to (NaN). Use diagonal=1."),
    "mask_inverted": ("mask 反了：你遮住的是过去，保留的是未来。", "Your mask is inverted: it hides the past and keeps the future."),
    "mask_filled_with_zero": ("你把未来位置的分数填成了 0 而不是 -inf：softmax 之后它们的权重不为 0。",
                              "You fill future scores with 0 instead of -inf, so after the softmax their weights are not 0."),
    "mask_after_softmax": ("你在 softmax 之后才把未来位置置 0，没有重新归一化：每行之和小于 1。应在 softmax 之前填 -inf。",
                           "You zero the future after the softmax without renormalising, so rows sum to less than 1. Fill with -inf before the softmax."),
    "ignores_causal_false": ("causal=False 时你仍然加了因果 mask：要根据 causal 参数决定是否遮挡。",
                             "You apply the causal mask even when causal=False: mask only when causal is True."),
    "never_masks": ("你没有应用因果 mask：causal=True 时未来位置的权重必须为 0。",
                    "You never apply the causal mask: with causal=True future weights must be 0."),
}


def _same(a, b) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and torch.allclose(a.double(), b.double(), atol=MATCH_ATOL, rtol=MATCH_RTOL, equal_nan=True))


def sdpa(Q, K, V, causal, out, weights) -> Diagnosis | None:
    """Which known mistake (if any) produces the student's (out, weights) on these inputs."""
    Qd, Kd, Vd = Q.double(), K.double(), V.double()
    correct_out, correct_w = _variants_correct(Qd, Kd, Vd, causal)
    if _same(out, correct_w) and _same(weights, correct_out):
        return SWAPPED
    if isinstance(weights, torch.Tensor) and not torch.isfinite(weights).all() and torch.isfinite(correct_w).all():
        stable = {k: v for k, v in _variants().items() if k == "mask_includes_diagonal"}
        for key, fn in stable.items():
            result = fn(Qd, Kd, Vd, causal)
            if result is not None and _same(weights, result[1]):
                return Diagnosis(key, *TEXT[key])
        return UNSTABLE
    for key, fn in _variants().items():
        result = fn(Qd, Kd, Vd, causal)
        if result is None:
            continue
        v_out, v_w = result
        if _same(weights, v_w) and (not isinstance(out, torch.Tensor) or out.shape != v_out.shape or _same(out, v_out)):
            return Diagnosis(key, *TEXT[key])
    if _same(weights, correct_w):
        if _same(out, correct_out / math.sqrt(Q.shape[-1])):
            return Diagnosis("scale_on_values", *TEXT["scale_on_values"])
        return Diagnosis("output_not_weights_times_v", "权重是对的，但输出不等于 weights @ V。",
                         "Your weights are right but the output is not weights @ V.")
    return None


def _variants_correct(Q, K, V, causal):
    T = Q.shape[-2]
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if causal:
        s = _masked(s, _future(T))
    w = torch.softmax(s, -1)
    return w @ V, w


def mask(got, n: int) -> Diagnosis | None:
    """Recognise the usual causal_mask mistakes from the returned tensor."""
    if not isinstance(got, torch.Tensor):
        return None
    if got.shape != (n, n):
        return Diagnosis("mask_fixed_size", f"causal_mask({n}) 的形状是 {list(got.shape)}：mask 的大小必须跟随 seq_len，不能写死。",
                         f"causal_mask({n}) has shape {list(got.shape)}: the mask must follow seq_len, not a fixed size.")
    future = _future(n)
    as_bool = got != 0
    if got.dtype != torch.bool and torch.equal(as_bool, future):
        return Diagnosis("mask_not_bool", f"值是对的，但 dtype 是 {got.dtype}：请返回 bool 张量（masked_fill 需要 bool）。",
                         f"The values are right but the dtype is {got.dtype}: return a bool tensor (masked_fill needs bool).")
    if torch.equal(as_bool, future | torch.eye(n, dtype=torch.bool)):
        return Diagnosis("mask_includes_diagonal", *TEXT["mask_includes_diagonal"])
    if torch.equal(as_bool, ~future):
        return Diagnosis("mask_keeps_instead_of_hides", "True/False 反了：True 应表示要遮住的未来位置（j > i）。",
                         "True and False are swapped: True must mark the future positions to hide (j > i).")
    if torch.equal(as_bool, future.T):
        return Diagnosis("mask_inverted", "你遮住的是对角线以下（过去），应遮住对角线以上（未来）。",
                         "You hide below the diagonal (the past); hide above it (the future).")
    return None


def split(x, heads: int, got) -> Diagnosis | None:
    """Recognise the usual split_heads mistakes by recomputing them on the same x."""
    *batch, T, d_model = x.shape
    d = d_model // heads
    variants = {
        "split_without_transpose": x.reshape(*batch, heads, T, d),
        "split_strided_heads": x.reshape(*batch, T, d, heads).movedim(-1, -3),
        "split_heads_not_moved": x.reshape(*batch, T, heads, d),
    }
    if batch:
        variants["split_wrong_axes"] = x.reshape(*batch, T, heads, d).transpose(0, 1)
    if heads != 2 and d_model % 2 == 0:
        variants["split_hard_coded_heads"] = x.reshape(*batch, T, 2, d_model // 2).transpose(-3, -2)
    text = {
        "split_without_transpose": ("你直接把最后一维 reshape 成了 [H, T, d_head]，没有先拆成 [T, H, d_head] 再交换 T 与 H：头被切错了。",
                                    "Your heads are cut without the transpose: reshape to [..., T, H, d_head] first, then swap T and H."),
        "split_strided_heads": ("你的头是跨步取的（每隔 H 个特征取一个）：每个头应是连续的 d_head 个特征。",
                                "Your heads are strided (every H-th feature): each head must be a contiguous block of d_head features."),
        "split_heads_not_moved": ("形状是 [..., T, H, d_head]：还需要把头的维度移到 T 之前。",
                                  "Your result is [..., T, H, d_head]: move the head dim in front of T."),
        "split_wrong_axes": ("你交换了第 0 和第 1 维（transpose(0, 1)）：有批维度时应交换最后的 T 与 H 两维（transpose(-3, -2)）。",
                             "You swap dims 0 and 1: with batch dims, swap the T and H dims counted from the end (transpose(-3, -2))."),
        "split_hard_coded_heads": ("头的数量被写死成 2：请使用参数 num_heads。", "The number of heads is hard-coded to 2: use num_heads."),
    }
    for key, value in variants.items():
        if isinstance(got, torch.Tensor) and got.shape == value.shape and torch.equal(got, value):
            return Diagnosis(key, *text[key])
    return None
