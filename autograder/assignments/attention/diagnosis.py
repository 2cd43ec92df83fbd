"""Name the mistake: recompute what each known wrong implementation would return on the same inputs and see
whether the student's result matches one of them. Each variant is a few lines of float64 torch.

Used only when a check has already failed; returns a `Diagnosis` (id + plain words in zh and en) or None, in which
case the feedback stays generic and honest. Texts name the mistake and the fix, never an expected value.

A variant "matches" when it agrees with the student's float32 result within MATCH_ATOL + MATCH_RTOL * |value|
(NaN where the variant has NaN): ten times looser than grading, since a float32 student differs from a float64
variant by ~1e-6, while the variants differ from each other and from the solution by more than 1e-2.
"""
from __future__ import annotations

import math

import torch

from autograder.public.expect import Diagnosis
from autograder.public.text import Text

MATCH_ATOL, MATCH_RTOL = 1e-4, 1e-3
INF = float("inf")


def _named(key: str, as_id: str | None = None, **values) -> Diagnosis:
    """The diagnosis `key` of TEXT (reported under the id `as_id`, default `key`), with `values` filled in; a
    (zh, en) tuple value gives each language its own words."""
    zh, en = TEXT[key]
    pick = lambda i: {k: v[i] if isinstance(v, tuple) else v for k, v in values.items()}
    return Diagnosis(as_id or key, Text(zh=zh.format(**pick(0)), en=en.format(**pick(1))))


TEXT = {
    # -- scaled_dot_product_attention: values
    "no_scale": ("分数没有除以 √d_head：softmax 会变得过于尖锐。",
                 "The scores are not divided by sqrt(d_head), so the softmax gets too peaked."),
    "scale_by_d": ("你除以的是 d_head，而不是 √d_head。", "You divide by d_head, not sqrt(d_head)."),
    "scale_by_sqrt_seq_len": ("你除以的是 √T（序列长度），而不是 √d_head；当 T = d_head 时两者碰巧相同。",
                              "You divide by sqrt(T) (the sequence length), not sqrt(d_head); they only agree when "
                              "T = d_head."),
    "scale_from_wrong_dim": ("你用 Q.shape[{dim}]（这里是 {size}）当作 d_head：有批维度或头维度时它不是 d_head。请用 Q.shape[-1]。",
                             "You take d_head from Q.shape[{dim}] (= {size} here), which is a batch or head dim once "
                             "the input has them: use Q.shape[-1]."),
    "scale_constant": ("你把分数除以了 {c:.3g}，而不是 √d_head（这里 = {root:.3g}）：写死的常数只对一种头大小成立，d_head 要从 Q.shape[-1] 取。",
                       "You divide the scores by {c:.3g} instead of sqrt(d_head) (= {root:.3g} here): a hard-coded "
                       "constant only fits one head size; take d_head from Q.shape[-1]."),
    "scale_after_softmax": ("你在 softmax 之后才缩放：应当先缩放分数再做 softmax，权重每行之和应为 1。",
                            "You scale after the softmax: scale the scores before it, so each row of weights sums to 1."),
    "scale_on_values": ("你把 √d_head 的缩放用在了 V（或输出）上，而不是分数上。",
                        "You apply the sqrt(d_head) scaling to V (or the output) instead of to the scores."),
    "softmax_wrong_dim": ("你的权重与 dim={dim} 上的 softmax 一致（{what}）：应在最后一维 dim=-1（键）上做 softmax。",
                          "Your weights match a softmax over dim {dim} ({what}): use dim=-1, over the keys."),
    "softmax_unnormalised": ("你只算了 exp，没有除以每行之和：权重每行之和应为 1。",
                             "You take exp but do not divide by the row sums: each row of weights must sum to 1."),
    "softmax_no_keepdim": ("手写 softmax 时求和没有 keepdim=True：除法沿错误的维度广播了（方阵时不会报错）。",
                           "Your hand-written softmax sums without keepdim=True, so the division broadcasts along the "
                           "wrong axis (silently, on square inputs)."),
    "transposed_scores": ("分数矩阵转置了（用了 K·Qᵀ 而不是 Q·Kᵀ）：第 i 行应是查询 i 对所有键的分数。",
                          "Your scores are transposed (K·Qᵀ instead of Q·Kᵀ): row i must hold query i's scores over "
                          "all keys."),
    "transpose_not_last_dims": ("你用 K.T 或 K.transpose(0, 1) 转置 K：单个序列时正确，但有批维度或头维度时转置的是错误的维度。请用 K.transpose(-2, -1)。",
                                "You transpose K with K.T or K.transpose(0, 1): right for one sequence, but with batch "
                                "or head dims in front it swaps the wrong dims. Use K.transpose(-2, -1)."),
    "batch_dims_unsupported": ("你的函数只对某一种维数的输入有效（{works}），对 {fails} 的输入会报错：例如 torch.bmm 只接受 3 维，transpose(1, 2) 假定恰好一个批维度。请用 @ 与 transpose(-2, -1)，使任意前导维度都能工作。",
                               "Your function works for {works} input but raises for {fails} input: e.g. torch.bmm "
                               "takes 3-D only and transpose(1, 2) assumes exactly one batch dim. Use @ and "
                               "transpose(-2, -1) so any leading dims work."),
    "mask_includes_diagonal": ("你的 mask 连对角线也遮住了：第 0 行没有可以关注的位置（结果为 NaN）。用 diagonal=1。",
                               "Your mask also hides the diagonal: row 0 has nothing to attend to (NaN). Use "
                               "diagonal=1."),
    "mask_inverted": ("mask 反了：你遮住的是过去，保留的是未来。", "Your mask is inverted: it hides the past and keeps the future."),
    "mask_filled_with_zero": ("你把未来位置的分数填成了 0 而不是 -inf：softmax 之后它们的权重不为 0。",
                              "You fill future scores with 0 instead of -inf, so after the softmax their weights are "
                              "not 0."),
    "mask_after_softmax": ("你在 softmax 之后才把未来位置置 0，没有重新归一化：每行之和小于 1。应在 softmax 之前填 -inf。",
                           "You zero the future after the softmax without renormalising, so rows sum to less than 1. "
                           "Fill with -inf before the softmax."),
    "mask_fixed_size": ("causal=True 时在序列长度 T = {T} 上报错，causal=False 时却正常：mask 的大小是固定的。请每次按 T = Q.shape[-2] 构造 mask。",
                        "Your function raises at sequence length T = {T} with causal=True but works with "
                        "causal=False: the mask has a fixed size. Build it for T = Q.shape[-2] on every call."),
    "mask_step_raises": ("只有 causal=True 时才报错：出错的是遮挡这一步。请检查 causal_mask 是否返回 [T, T] 的 bool 张量，以及它是否正确地传给了 masked_fill。",
                         "Your function raises only with causal=True: the masking step fails. Check that causal_mask "
                         "returns a bool [T, T] tensor and how you pass it to masked_fill."),
    "mask_wrong_length": ("有批维度且 causal=True 时才报错，单个序列正常：mask 与批量的分数对不上，最常见的原因是序列长度取自错误的维度（例如 Q.shape[0]）。请用 T = Q.shape[-2]。",
                          "Your function raises on batched input only with causal=True, and one sequence works: the "
                          "mask does not fit the batched scores, most often because its length comes from the wrong "
                          "dim (e.g. Q.shape[0]). Use T = Q.shape[-2]."),
    "ignores_causal_false": ("causal=False 时你仍然加了因果 mask：要根据 causal 参数决定是否遮挡。",
                             "You apply the causal mask even when causal=False: mask only when causal is True."),
    "never_masks": ("你没有应用因果 mask：causal=True 时未来位置的权重必须为 0。",
                    "You never apply the causal mask: with causal=True future weights must be 0."),
    "scale_by_sqrt_d_v": ("你除以的是 √d_v（V.shape[-1]，这里 = {size}），而不是 √d_head（Q.shape[-1]）：只有 d_v = d_head 时两者才相同。",
                          "You divide by sqrt(d_v) (V.shape[-1], = {size} here), not sqrt(d_head) (Q.shape[-1]): they "
                          "only agree when d_v = d_head."),
    "scale_by_fourth_root_d": ("你除以的是 d_head 的四次方根（d_head ** 0.25），而不是平方根 √d_head。",
                               "You divide by the fourth root of d_head (d_head ** 0.25), not its square root."),
    "scale_by_sqrt_d_model": ("你除以的是 √(H·d_head) = √d_model，而不是每个头的 √d_head。",
                              "You divide by sqrt(H * d_head) = sqrt(d_model), not by each head's sqrt(d_head)."),
    "scores_times_zero": ("你的分数被乘了 0，权重变成了均匀分布：例如 1 // math.sqrt(d) 是整除，结果是 0.0。请用 1 / math.sqrt(d)。",
                          "Your scores are multiplied by 0, so the weights are uniform: e.g. 1 // math.sqrt(d) is floor "
                          "division and gives 0.0. Use 1 / math.sqrt(d)."),
    "output_dtype": ("数值是对的，但 dtype 是 {dtype}：请返回与输入相同的 float32（在 float64 中计算后要转回来）。",
                     "The values are right but the dtype is {dtype}: return float32 like the inputs (cast back after "
                     "computing in float64)."),
    "low_precision": ("结果偏差约 {err:.1g}，正是半精度（float16/bfloat16）的舍入误差：请全程用 float32 计算。",
                      "Your results are off by about {err:.1g}, the rounding error of half precision (float16 or "
                      "bfloat16): keep the computation in float32."),
    "squeezes_size_one_dims": ("你去掉了大小为 1 的前导维度（squeeze）：形状必须保持 (..., T, d_v) 与 (..., T, T)，批大小为 1 也一样。",
                               "You remove leading dims of size 1 (squeeze): the shapes must stay (..., T, d_v) and "
                               "(..., T, T), also for a batch of one."),
    "mask_zero_times_inf": ("你把 mask 乘以 -inf：mask 为 0 的位置得到 0 · (-inf) = NaN，于是权重全是 NaN。请用 scores.masked_fill(mask, float('-inf'))。",
                            "You multiply the mask by -inf: where the mask is 0 that gives 0 * (-inf) = NaN, so every "
                            "weight is NaN. Use scores.masked_fill(mask, float('-inf'))."),
    "mask_fill_not_low_enough": ("你用约 {fill:.3g} 填充未来位置：这个值不够小，softmax 之后未来位置的权重不是恰好 0。请填 float('-inf')。",
                                 "You fill the future with about {fill:.3g}: not low enough, so after the softmax "
                                 "future weights are not exactly 0. Fill with float('-inf')."),
    "mask_includes_diagonal_finite": ("你的 mask 连对角线也遮住了：第 0 行没有可以关注的位置，只能均匀地分给被遮住的位置。用 diagonal=1。",
                                      "Your mask also hides the diagonal: row 0 has nothing left to attend to, so its "
                                      "weight spreads evenly over hidden positions. Use diagonal=1."),
    "mask_small_t_special_case": ("T = {T} 时报错，更长的序列正常：你为很短的序列写了特殊情况（例如写死的 2×2 mask）。请对任何 T 都用 causal_mask(T)。",
                                  "Your function raises at T = {T} but works for longer sequences: a special case "
                                  "for short sequences (e.g. a hard-coded 2x2 mask). Use causal_mask(T) for every T."),
    "mask_length_from_wrong_dim": ("mask 的长度取自 {dim}，而不是序列长度 T = Q.shape[-2]：只有两者碰巧相等时才能运行。",
                                   "Your mask's length comes from {dim}, not the sequence length T = Q.shape[-2]: it "
                                   "only runs when the two happen to be equal."),
    "split_one_head_special_case": ("你为 1 个头写了特殊情况 x.unsqueeze(0)：有批维度时头的维度跑到了批维度前面。应为 x.unsqueeze(-3)，或不做特殊处理。",
                                    "You special-case one head with x.unsqueeze(0): with batch dims the head dim lands "
                                    "in front of the batch. Use x.unsqueeze(-3), or no special case."),
    "mha_scale_sqrt_d_model": ("多头注意力里你除以的是 √d_model，而不是每个头的 √d_head = √(d_model / H)。",
                               "Inside multi-head attention you divide by sqrt(d_model), not by each head's "
                               "sqrt(d_head) = sqrt(d_model / H)."),
    "output_not_weights_times_v": ("权重是对的，但输出不等于 weights @ V。", "Your weights are right but the output is not weights @ V."),
    # -- causal_mask
    "mask_not_a_tensor": ("causal_mask 返回的是 {type} 类型的值，不是 torch.Tensor：请用 torch 的函数（torch.ones、torch.triu）构造 bool 张量。",
                          "causal_mask returns a value of type {type}, not a torch.Tensor: build a bool tensor with "
                          "torch functions (torch.ones, torch.triu)."),
    "mask_not_bool": ("值是对的，但 dtype 是 {dtype}：请返回 bool 张量（masked_fill 需要 bool）。",
                      "The values are right but the dtype is {dtype}: return a bool tensor (masked_fill needs bool)."),
    "mask_fixed_size_fn": ("causal_mask({n}) 的形状是 {shape}：mask 的大小必须跟随 seq_len，不能写死或从固定大小的 mask 中切出。",
                           "causal_mask({n}) has shape {shape}: the mask must follow seq_len, not a fixed size (nor a "
                           "slice of a fixed-size mask)."),
    "mask_keeps_instead_of_hides": ("True/False 反了：True 应表示要遮住的未来位置（j > i）。",
                                    "True and False are swapped: True must mark the future positions to hide (j > i)."),
    "mask_inverted_fn": ("你遮住的是对角线以下（过去），应遮住对角线以上（未来）。",
                         "You hide below the diagonal (the past); hide above it (the future)."),
    # -- split_heads
    "split_without_transpose": ("你直接把最后一维 reshape 成了 [H, T, d_head]，没有先拆成 [T, H, d_head] 再交换 T 与 H：头被切错了。",
                                "Your heads are cut without the transpose: reshape to [..., T, H, d_head] first, then "
                                "swap T and H."),
    "split_strided_heads": ("你的头是跨步取的（每隔 H 个特征取一个）：每个头应是连续的 d_head 个特征。",
                            "Your heads are strided (every H-th feature): each head must be a contiguous block of "
                            "d_head features."),
    "split_heads_not_moved": ("形状是 [..., T, H, d_head]：还需要把头的维度移到 T 之前。",
                              "Your result is [..., T, H, d_head]: move the head dim in front of T."),
    "split_wrong_axes": ("你交换了第 0 和第 1 维（transpose(0, 1)）：有批维度时应交换最后的 T 与 H 两维（transpose(-3, -2)）。",
                         "You swap dims 0 and 1: with batch dims, swap the T and H dims counted from the end "
                         "(transpose(-3, -2))."),
    "split_hard_coded_heads": ("头的数量被写死成 2：请使用参数 num_heads。", "The number of heads is hard-coded to 2: use num_heads."),
    "split_stacked_before_batch": ("你把各个头堆叠在第 0 维（torch.stack(..., dim=0)）：有批维度时头跑到了批维度前面。头的维度应紧挨在 T 之前（dim=-3）。",
                                   "You stack the heads at dim 0 (torch.stack(..., dim=0)), so with batch dims they "
                                   "land in front of the batch: the head dim goes right before T (dim=-3)."),
    # -- MultiHeadAttention
    "mha_bias": ("你的投影层带有偏置（nn.Linear 默认 bias=True）：把偏置置 0 后输出就对了。W_q、W_k、W_v、W_o 要用 bias=False。",
                 "Your projections have a bias (nn.Linear's default bias=True); with the biases set to 0 the output "
                 "is right. Create W_q, W_k, W_v and W_o with bias=False."),
}

DETACHED = Diagnosis("detached", Text(
    zh="计算图被切断：不要用 .detach()、.data 或 torch.tensor(...) 重新包装中间结果，梯度要能传回 Q、K、V。",
    en="The graph is cut: don't use .detach(), .data or torch.tensor(...) on intermediate results; gradients must "
       "flow back to Q, K and V."))
MUTATES = Diagnosis("mutates_inputs", Text(
    zh="你原地修改了输入（如 Q /= √d 或 masked_fill_）。请使用不改变输入的运算：Q / √d、masked_fill。",
    en="You modify an input in place (e.g. Q /= sqrt(d) or masked_fill_). Use out-of-place ops: Q / sqrt(d), "
       "masked_fill."))
UNSTABLE = Diagnosis("unstable_softmax", Text(
    zh="大分数时出现 NaN/inf：手写的 softmax 没有先减去每行最大值，exp 溢出了。用 torch.softmax 或先减 max。",
    en="NaN/inf for large scores: your hand-written softmax does not subtract the row max first, so exp overflows. "
       "Use torch.softmax or subtract the max."))
SWAPPED = Diagnosis("swapped_outputs", Text(
    zh="返回顺序反了：应当返回 (output, weights)，你返回的是 (weights, output)。",
    en="Wrong order: return (output, weights); you return (weights, output)."))
MHA_BIAS = _named("mha_bias")


def same(a, b) -> bool:
    """Does the student's value `a` match the variant's value `b` (see MATCH_ATOL)?"""
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and torch.allclose(a.double(), b.double(), atol=MATCH_ATOL, rtol=MATCH_RTOL, equal_nan=True))


def _future(T: int) -> torch.Tensor:
    i = torch.arange(T)
    return i[None, :] > i[:, None]


def _attn(Q, K, V, causal, *, scores=None, divisor=None, mask=None, fill=-INF, softmax=None, post=None):
    """Attention with one step swapped out; the defaults are the correct computation."""
    T, d = Q.shape[-2], Q.shape[-1]
    s = (Q @ K.transpose(-2, -1) if scores is None else scores(Q, K)) / (math.sqrt(d) if divisor is None else divisor)
    if causal:
        s = s.masked_fill(_future(T) if mask is None else mask(T), fill)
    w = torch.softmax(s, -1) if softmax is None else softmax(s)
    if post is not None:
        w = post(w)
    return w @ V, w


def _no_keepdim(s, stable):
    e = (s - s.amax(-1, keepdim=True) if stable else s).exp()
    return e / e.sum(-1)


def _candidates(Q, K, V, causal):
    """(key, diagnosis, thunk) for every known mistake; a thunk returns (output, weights) or raises (no match). The
    key names the mistake the same way on any input (a probe of other sizes is matched by it)."""
    d, n = Q.shape[-1], Q.dim()
    yield "scale_after_softmax", _named("scale_after_softmax"), lambda: _attn(
        Q, K, V, causal, divisor=1.0, post=lambda w: w / math.sqrt(d))
    yield "scale_on_values", _named("scale_on_values"), lambda: (lambda o, w: (o / math.sqrt(d), w))(
        *_attn(Q, K, V, causal, divisor=1.0))
    yield "scores_times_zero", _named("scores_times_zero"), lambda: _attn(Q, K, V, causal, divisor=INF)
    for dim in range(n - 1):
        what = ("每列之和为 1", "columns sum to 1") if dim == n - 2 else (
            "这是批维度或头维度，例如 dim=0，或不写 dim 的 F.softmax：它对 3 维输入猜 dim 0，对 4 维输入猜 dim 1",
            "a batch or head dim, e.g. dim=0, or F.softmax without dim=, which guesses dim 0 for 3-D and dim 1 for 4-D "
            "input")
        yield (f"softmax_wrong_dim:{dim}", _named("softmax_wrong_dim", dim=dim - n if dim == n - 2 else dim, what=what),
               lambda dim=dim: _attn(Q, K, V, causal, softmax=lambda s: torch.softmax(s, dim)))
    yield "softmax_unnormalised", _named("softmax_unnormalised"), lambda: _attn(Q, K, V, causal, softmax=torch.exp)
    for stable in (True, False):
        yield f"softmax_no_keepdim:{stable}", _named("softmax_no_keepdim"), lambda stable=stable: _attn(
            Q, K, V, causal, softmax=lambda s: _no_keepdim(s, stable))
    yield "transposed_scores", _named("transposed_scores"), lambda: _attn(
        Q, K, V, causal, scores=lambda q, k: k @ q.transpose(-2, -1))
    if n > 2:
        yield "transpose_not_last_dims:T", _named("transpose_not_last_dims"), lambda: _attn(
            Q, K, V, causal, scores=lambda q, k: q @ k.permute(*reversed(range(n))))
        yield "transpose_not_last_dims:01", _named("transpose_not_last_dims"), lambda: _attn(
            Q, K, V, causal, scores=lambda q, k: q @ k.transpose(0, 1))
    for scale_key, divisor, values in _scale_expressions(Q, V):
        yield scale_key, _named(scale_key.split(":")[0], **values), lambda divisor=divisor: _attn(
            Q, K, V, causal, divisor=divisor)
    if causal:
        for fill, tag in ((-INF, ""), (-1e9, "_finite")):  # a finite fill leaves a fully hidden row uniform, not NaN
            yield f"mask_includes_diagonal{tag}", _named(f"mask_includes_diagonal{tag}", "mask_includes_diagonal"), \
                lambda fill=fill: _attn(Q, K, V, True, mask=lambda T: ~_future(T).T, fill=fill)
            yield f"mask_inverted{tag}", _named("mask_inverted"), lambda fill=fill: _attn(
                Q, K, V, True, mask=lambda T: _future(T).T, fill=fill)
            yield f"mask_keeps_instead_of_hides{tag}", _named("mask_keeps_instead_of_hides"), lambda fill=fill: _attn(
                Q, K, V, True, mask=lambda T: ~_future(T), fill=fill)
        yield "mask_filled_with_zero", _named("mask_filled_with_zero"), lambda: _attn(Q, K, V, True, fill=0.0)
        for fill in (-100.0, -1e3, -1e4):  # fills that are not low enough where scores are large
            yield f"mask_fill:{fill}", _named("mask_fill_not_low_enough", fill=fill), lambda fill=fill: _attn(
                Q, K, V, True, fill=fill)
        yield "mask_after_softmax", _named("mask_after_softmax"), lambda: _attn(
            Q, K, V, False, post=lambda w: w.masked_fill(_future(Q.shape[-2]), 0.0))
        yield "never_masks", _named("never_masks"), lambda: _attn(Q, K, V, False)
    else:
        yield "ignores_causal_false", _named("ignores_causal_false"), lambda: _attn(Q, K, V, True)


def _scale_expressions(Q, V):
    """(key, divisor, text values) for the scales students write instead of sqrt(d_head), as expressions of the
    input's dims; those equal to sqrt(d_head) on this input are left out (they are right here)."""
    T, d, root = Q.shape[-2], Q.shape[-1], math.sqrt(Q.shape[-1])
    found = [("no_scale", 1.0, {}), ("scale_by_d", float(d), {}), ("scale_by_sqrt_seq_len", math.sqrt(T), {}),
             ("scale_by_sqrt_d_v", math.sqrt(V.shape[-1]), {"size": V.shape[-1]}),
             ("scale_by_fourth_root_d", d ** 0.25, {})]
    found += [(f"scale_from_wrong_dim:{k}", math.sqrt(Q.shape[k]), {"dim": k, "size": Q.shape[k]})
              for k in range(Q.dim() - 2)]
    if Q.dim() > 2:
        found.append(("scale_by_sqrt_d_model", math.sqrt(Q.shape[-3] * d), {}))
    return [(k, v, x) for k, v, x in found if abs(v / root - 1) > 1e-3]


def _matches(out, weights, variant) -> bool:
    """The weights match; so does the output, unless the student's output is unusable (wrong shape/type)."""
    v_out, v_w = variant
    return same(weights, v_w) and (not isinstance(out, torch.Tensor) or out.shape != v_out.shape or same(out, v_out))


def _explanations(Q, K, V, causal, out, weights) -> dict:
    """key -> diagnosis of every known mistake that reproduces the student's (out, weights) on these inputs AND
    differs here from the correct implementation (a mistake that agrees with it here cannot be the one shown)."""
    right = _attn(Q, K, V, causal)
    found = {}
    for key, diag, thunk in _candidates(Q, K, V, causal):
        try:
            variant = thunk()
        except Exception:  # the variant does not apply to these shapes
            continue
        if _matches(out, weights, variant) and not (same(variant[0], right[0]) and same(variant[1], right[1])):
            found[key] = diag
    return found


def _survivors(found: dict, Q, K, V, causal, out, weights) -> dict:
    """The candidates of `found` that also reproduce the student's result on another input."""
    keep = {}
    for key, diag, thunk in _candidates(Q, K, V, causal):
        if key in found:
            try:
                if _matches(out, weights, thunk()):
                    keep[key] = found[key]
            except Exception:
                continue
    return keep


def probe_inputs(like: torch.Tensor, seed: int = 1):
    """Q, K, V of the rank of `like` whose sizes are all different (lead 2, 3, ..., T 5, d_head 7, d_v 6), so no
    two dims can stand for each other, and no expression of one equals another's."""
    g = torch.Generator().manual_seed(seed)
    lead = [2, 3, 11, 13][: like.dim() - 2]
    return (torch.randn(*lead, 5, 7, generator=g), torch.randn(*lead, 5, 7, generator=g),
            torch.randn(*lead, 5, 6, generator=g))


def sdpa(Q, K, V, causal, out, weights, probe=None) -> Diagnosis | None:
    """Which known mistake (if any) produces the student's (out, weights) on these inputs. A mistake is named only
    when it reproduces the result and differs here from the correct implementation; when several do, `probe`
    (call(Q, K, V, causal) -> the student's result or None) runs the student's function on inputs whose dims are all
    different, and only the one mistake that reproduces that result too is named; else nothing is."""
    Q, K, V = Q.double(), K.double(), V.double()
    right_out, right_w = _attn(Q, K, V, causal)
    tensors = isinstance(out, torch.Tensor) and isinstance(weights, torch.Tensor)
    if tensors and out.shape == right_out.shape and weights.shape == right_w.shape and \
            (out.dtype != torch.float32 or weights.dtype != torch.float32) and same(out, right_out) and same(weights, right_w):
        return _named("output_dtype", dtype=str(out.dtype if out.dtype != torch.float32 else weights.dtype))
    if tensors and (out.shape != right_out.shape or weights.shape != right_w.shape) and \
            any(out.shape == f(right_out).shape != right_out.shape and same(out, f(right_out))
                for f in (lambda t: t.squeeze(0), lambda t: t.squeeze())):
        return _named("squeezes_size_one_dims")
    if tensors and out.shape == right_out.shape and weights.shape == right_w.shape and same(out, right_out) \
            and same(weights, right_w):
        return None  # the right result here (e.g. T = 1 with d_v = 1, where output and weights look alike)
    if same(out, right_w) and same(weights, right_out):
        return SWAPPED
    if causal and tensors and weights.shape == right_w.shape and bool(torch.isnan(weights).all()) and probe:
        again = probe(Q.float(), K.float(), V.float(), False)  # the same inputs without the mask
        longer = probe(*probe_inputs(Q), True)  # T = 5: a mask that only hides too much leaves rows 1.. finite
        if again is not None and same(again[1], _attn(Q, K, V, False)[1]) and longer is not None \
                and bool(torch.isnan(longer[1]).all()):
            return _named("mask_zero_times_inf")
    if _overflowed(Q, K, causal, weights, right_w):  # before the variants: on saturated scores a wrong variant's
        return UNSTABLE                              # NaN and 0/1 pattern can equal the student's (NaN == NaN)
    found = _explanations(Q, K, V, causal, out, weights)
    if found and probe is not None:  # confirm on inputs whose dims all differ: a coincidence of sizes does not survive
        for rank in sorted({Q.dim(), 4}):
            q, k, v = probe_inputs(torch.empty((1,) * rank))
            result = probe(q, k, v, causal)
            if result is None:  # the function raises there: nothing learnt
                continue
            kept = _survivors(found, q.double(), k.double(), v.double(), causal, *result)
            # another rank can only judge scale expressions (a softmax or transpose over a fixed dim changes meaning)
            found = kept if rank == Q.dim() else {key: d for key, d in found.items()
                                                   if key in kept or not key.startswith(("scale_", "no_scale"))}
        if not found:
            return _unexplained(Q, K, V, causal, out, weights, right_out, right_w, probe)
    if len({d.id for d in found.values()}) == 1:
        return next(iter(found.values()))
    if found:
        return None  # ambiguous: say less
    return _unexplained(Q, K, V, causal, out, weights, right_out, right_w, probe)


def _unexplained(Q, K, V, causal, out, weights, right_out, right_w, probe) -> Diagnosis | None:
    """No catalogued variant reproduces the result: a constant scale, low precision, a fill that is not low enough,
    or right weights with a wrong output."""
    c = _divisor(Q, K, causal, weights)
    root = math.sqrt(Q.shape[-1])
    if c is not None and abs(c / root - 1) > 1e-2 and _matches(out, weights, _attn(Q, K, V, causal, divisor=c)):
        if probe is None:
            return None
        for rank in sorted({Q.dim(), 4}):  # the same divisor on inputs of other sizes and ranks: a constant
            q, k, v = probe_inputs(torch.empty((1,) * rank))
            result = probe(q, k, v, causal)
            other = _divisor(q.double(), k.double(), causal, result[1]) if result is not None else None
            if other is None or abs(other / c - 1) > 1e-2:
                return None  # it follows some dim we do not know: say less
        return _named("scale_constant", c=c, root=root)
    if not (isinstance(out, torch.Tensor) and isinstance(weights, torch.Tensor)) or weights.shape != right_w.shape \
            or out.shape != right_out.shape or not (torch.isfinite(weights).all() and torch.isfinite(out).all()):
        return None
    w, o = weights.double(), out.double()
    if causal:
        future = w[..., _future(Q.shape[-2])]
        if bool((future != 0).any()) and float(future.abs().max()) < 1e-6 and same(w, right_w):
            return _named("mask_fill_not_low_enough", fill=_fill_estimate(Q, K, w))
    err = _half_precision_error(Q, K, V, causal, o, w)
    if err is not None and probe is not None:
        # A small error of the right size can also be another mistake on small inputs (e.g. no scaling when every
        # score is near 0): it is half precision only if the student's result on unit-size inputs fits it too.
        q, k, v = probe_inputs(Q)
        again = probe(q, k, v, causal)
        if again is not None and _half_precision_error(q.double(), k.double(), v.double(), causal,
                                                       again[0].double(), again[1].double()) is not None:
            return _named("low_precision", err=err)
    if same(w, right_w) and not same(o, right_out) and not same(o, w @ V):
        return _named("output_not_weights_times_v")
    return None


def _half_precision_error(Q, K, V, causal, o, w) -> float | None:
    """The largest error when (o, w) differ from the right result by more than 1e-4 but, element by element, by no
    more than float16 or bfloat16 rounding can move them; else None."""
    right_out, right_w = _attn(Q, K, V, causal)
    if o.shape != right_out.shape or w.shape != right_w.shape or not (torch.isfinite(o).all() and torch.isfinite(w).all()):
        return None
    err_w, err_o = (w - right_w).abs(), (o - right_out).abs()
    bound_o = right_w.abs() @ V.abs()  # what rounding each weight (or product) relatively can move an output by
    for dt in (torch.float16, torch.bfloat16):
        eps = torch.finfo(dt).eps
        if bool((err_w <= 2 * eps * right_w.abs() + 1e-6).all()) and bool((err_o <= 4 * eps * bound_o + 1e-6).all()) \
                and float(max(err_w.max(), err_o.max())) > 1e-4:
            return float(max(err_w.max(), err_o.max()))
    return None


def _fill_estimate(Q, K, w) -> float:
    """The fill value f that explains tiny non-zero future weights: w_ij / w_ii = exp(f - s_ii)."""
    T = Q.shape[-2]
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    diag = torch.diagonal(s, dim1=-2, dim2=-1)[..., :, None].expand(s.shape)
    wd = torch.diagonal(w, dim1=-2, dim2=-1)[..., :, None].expand(w.shape)
    pick = _future(T).expand(w.shape) & (w > 0) & (wd > 0)
    estimates = (w[pick].log() - wd[pick].log() + diag[pick])
    return float(round(float(estimates.median())))


def _overflowed(Q, K, causal, weights, right_w) -> bool:
    """NaN/inf exactly in rows whose scaled scores leave exp's float32 range, right everywhere else: a row max above
    88.7 overflows (inf / inf), and a row whose every score is below about -87 underflows to 0 (0 / 0)."""
    if not isinstance(weights, torch.Tensor) or weights.shape != right_w.shape or not torch.isfinite(right_w).all():
        return False
    bad = ~torch.isfinite(weights).all(-1)
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if causal:
        s = s.masked_fill(_future(Q.shape[-2]), -INF)
    extreme = s.amax(-1).abs() > 80
    return bool(bad.any()) and bool((extreme | ~bad).all()) and same(weights[~bad], right_w[~bad])


def _divisor(Q, K, causal, weights) -> float | None:
    """Estimate the divisor c of the scores from the student's weights (log w_ij - log w_ik = (s_ij - s_ik) / c
    along each row, fitted by least squares); None when the weights hold too few ratios or none fits."""
    if not isinstance(weights, torch.Tensor) or weights.shape != Q.shape[:-1] + Q.shape[-2:-1]:
        return None
    if not torch.isfinite(weights).all():
        return None
    T = Q.shape[-2]
    s, w = Q @ K.transpose(-2, -1), weights.double()
    ok = w > 1e-12
    if causal:
        ok = ok & ~_future(T)
    count = ok.sum(-1, keepdim=True).clamp(min=1)

    def centred(x):
        x = torch.where(ok, x, 0.0)
        return torch.where(ok, x - x.sum(-1, keepdim=True) / count, 0.0)

    if int((count - 1).clamp(min=0).sum()) < 3:  # fewer equations than that fit any weights to some c
        return None
    ds, dl = centred(s), centred(w.clamp(min=1e-300).log())
    slope = float((ds * dl).sum() / (ds * ds).sum())  # 1 / c
    return 1.0 / slope if slope > 1e-6 else None


def sdpa_raised(call, Q, K, V, causal) -> Diagnosis | None:
    """The student's function raised on (Q, K, V). `call(Q, K, V, causal)` runs it again on other inputs and returns
    (output, weights), or None when it raises too. Find where it does work and name the cause."""
    first = [x.reshape(-1, *x.shape[-2:])[0] for x in (Q, K, V)]  # the first sequence, [T, d]
    if causal and call(Q, K, V, False) is not None:  # only the mask fails
        return _mask_raised(call, Q, K, V, first)
    if Q.dim() == 2:
        if call(Q[None], K[None], V[None], causal) is not None:
            return _named("batch_dims_unsupported", works=("3 维", "3-D"), fails=("2 维", "2-D"))
        return None
    if call(*first, causal) is None:
        return None
    g = torch.Generator().manual_seed(0)
    cube = [torch.randn(3, 3, 3, generator=g) for _ in range(3)]  # [B, T, d] = [3, 3, 3]: wrong dims still fit
    result = call(*cube, causal)
    found = sdpa(*cube, causal, *result) if result is not None else None
    if found is not None and found.id in ("transpose_not_last_dims", "softmax_no_keepdim"):
        return found
    return _named("batch_dims_unsupported", works=("单个序列 [T, d]", "one sequence [T, d]"),
                  fails=(f"{Q.dim()} 维", f"{Q.dim()}-D"))


def _mask_raised(call, Q, K, V, first) -> Diagnosis:
    """Only the causal masking raises on (Q, K, V): find which lengths work. Probes have sizes chosen so that each
    explanation predicts a different set of working calls."""
    T = Q.shape[-2]
    g = torch.Generator().manual_seed(0)

    def works(T, d, dv, lead=()):
        return call(torch.randn(*lead, T, d, generator=g), torch.randn(*lead, T, d, generator=g),
                    torch.randn(*lead, T, dv, generator=g), True) is not None

    if Q.dim() > 2 and call(*first, True) is not None:  # one sequence works, the batch does not
        return _named("mask_wrong_length")
    # the mask's length follows d_head or d_v: works exactly when T equals that dim
    if works(5, 5, 9) and works(3, 3, 8) and not works(5, 3, 8) and not works(3, 5, 9):
        return _named("mask_length_from_wrong_dim", dim=("d_head（Q.shape[-1]）", "d_head (Q.shape[-1])"))
    if works(5, 9, 5) and works(3, 8, 3) and not works(5, 8, 3) and not works(3, 9, 5):
        return _named("mask_length_from_wrong_dim", dim=("d_v（V.shape[-1]）", "d_v (V.shape[-1])"))
    lengths = {n: works(n, 7, 6) for n in range(1, 9)}
    ok = [n for n, good in lengths.items() if good]
    if len(ok) == 1:
        return _named("mask_fixed_size", T=T)
    if ok and not lengths[1] and all(lengths[n] for n in range(3, 9)):  # only the shortest sequences fail
        return _named("mask_small_t_special_case", T=T)
    return _named("mask_step_raises")


def mask(got, n: int) -> Diagnosis | None:
    """Recognise the usual causal_mask mistakes from the returned value."""
    if not isinstance(got, torch.Tensor):
        return _named("mask_not_a_tensor", type=getattr(got, "type_name", type(got).__name__))
    if got.shape != (n, n):
        return _named("mask_fixed_size_fn", "mask_fixed_size", n=n, shape=list(got.shape))
    future = _future(n)
    as_bool = got != 0
    if got.dtype != torch.bool and torch.equal(as_bool, future):
        return _named("mask_not_bool", dtype=got.dtype)
    if torch.equal(as_bool, future | torch.eye(n, dtype=torch.bool)):
        return _named("mask_includes_diagonal")
    if torch.equal(as_bool, ~future):
        return _named("mask_keeps_instead_of_hides")
    if torch.equal(as_bool, future.T):
        return _named("mask_inverted_fn", "mask_inverted")
    return None


def right_split(x, heads: int) -> torch.Tensor:
    *batch, T, d_model = x.shape
    return x.reshape(*batch, T, heads, d_model // heads).transpose(-3, -2)


def mha(x, weights, heads: int, got) -> Diagnosis | None:
    """A known MultiHeadAttention mistake, recomputed in float64 from the injected weights: named when it reproduces
    the student's output and differs from the right one."""
    W = {k.split(".")[0]: v.double() for k, v in weights.items()}
    x = x.double()
    d_model = x.shape[-1]

    def run(divisor):
        q, k, v = (right_split(x @ W[n].T, heads) for n in ("W_q", "W_k", "W_v"))
        out, _ = _attn(q, k, v, True, divisor=divisor)
        *batch, H, T, d = out.shape
        return out.transpose(-3, -2).reshape(*batch, T, H * d) @ W["W_o"].T

    right = run(None)
    for key, divisor in (("mha_scale_sqrt_d_model", math.sqrt(d_model)),):
        if abs(divisor / math.sqrt(d_model // heads) - 1) < 1e-3:
            continue
        variant = run(divisor)
        if same(got, variant) and not same(variant, right):
            return _named(key)
    return None


def _split_variants(x, heads: int) -> dict:
    *batch, T, d_model = x.shape
    d = d_model // heads
    return {
        "split_without_transpose": lambda: x.reshape(*batch, heads, T, d),
        "split_strided_heads": lambda: x.reshape(*batch, T, d, heads).movedim(-1, -3),
        "split_heads_not_moved": lambda: x.reshape(*batch, T, heads, d),
        "split_wrong_axes": lambda: x.reshape(*batch, T, heads, d).transpose(0, 1) if batch else None,
        "split_stacked_before_batch": lambda: torch.stack(x.chunk(heads, -1), 0) if batch else None,
        "split_one_head_special_case": lambda: x.unsqueeze(0) if heads == 1 and batch else right_split(x, heads),
        "split_hard_coded_heads": lambda: x.reshape(*batch, T, 2, d_model // 2).transpose(-3, -2) if heads != 2 else None,
    }


def _split_matches(x, heads, got) -> set[str]:
    """The split_heads mistakes that reproduce `got` on x and differ there from the right split."""
    if not isinstance(got, torch.Tensor):
        return set()
    right, found = right_split(x, heads), set()
    for key, variant in _split_variants(x, heads).items():
        try:
            value = variant()
        except Exception:
            continue
        if value is not None and got.shape == value.shape and torch.equal(got, value) and \
                not (value.shape == right.shape and torch.equal(value, right)):
            found.add(key)
    return found


def split(x, heads: int, got, probe=None) -> Diagnosis | None:
    """Recognise the usual split_heads mistakes by recomputing them on the same x. When two mistakes give the same
    result here (one head: stacking at dim 0 is unsqueeze(0)), `probe(x, heads)` (the student's split_heads, or None
    when it raises) is run on a batch with another number of heads, and only a mistake that still agrees is named."""
    found = _split_matches(x, heads, got)
    if len(found) > 1 and probe is not None:
        x2 = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(5))
        h2 = 2 if heads == 1 else heads
        other = probe(x2, h2)
        if isinstance(other, torch.Tensor):
            right = right_split(x2, h2)
            kept = set()
            for key in found:
                try:
                    value = _split_variants(x2, h2)[key]()
                except Exception:
                    continue
                value = right if value is None else value
                if value.shape == other.shape and torch.equal(value, other):
                    kept.add(key)
            found = kept
    return _named(found.pop()) if len(found) == 1 else None
