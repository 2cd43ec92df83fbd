"""Name the mistake: recompute what each known wrong implementation would return on the same inputs and see whether
the student's result matches it (the approach of autograder/assignments/attention/diagnosis.py).

Used only when a check has already failed. A mistake is named only when it is the ONLY known one whose result
matches the student's and that result differs from the correct one; otherwise the feedback stays generic. Texts name
the mistake and the fix, never an expected value. Every variant is a few lines of float64 torch, written here
independently of the solution file.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.public.expect import Diagnosis
from autograder.sandbox.wire import grad_ramp
from autograder.public.text import Text

MATCH_ATOL, MATCH_RTOL = 1e-4, 1e-3  # ten times looser than grading (see the attention diagnosis)
EPS = 1e-6


def _named(key: str, **values) -> Diagnosis:
    """The diagnosis `key` of TEXT with `values` filled in; a (zh, en) tuple value gives each language its own."""
    zh, en = TEXT[key]
    pick = lambda i: {k: v[i] if isinstance(v, tuple) else v for k, v in values.items()}
    return Diagnosis(key, Text(zh=zh.format(**pick(0)), en=en.format(**pick(1))))


TEXT = {
    # -- rms_norm
    "rms_eps_outside_sqrt": ("eps 加在了开根号之后（sqrt(mean(x²)) + eps）：应当加在根号里面，sqrt(mean(x²) + eps)。数值很小的行会因此出错。",
                             "You add eps after the square root (sqrt(mean(x²)) + eps): it belongs inside, "
                             "sqrt(mean(x²) + eps). Rows of tiny values come out wrong."),
    "rms_no_eps": ("你没有加 eps：mean(x²) 很小（或为 0）的行会被除以一个接近 0 的数。请用 sqrt(mean(x²) + eps)。",
                   "You leave eps out: rows whose mean(x²) is tiny (or 0) are divided by almost nothing. Use "
                   "sqrt(mean(x²) + eps)."),
    "rms_wrong_default_eps": ("eps 的默认值不对：你的结果与 eps = {eps:g} 一致，约定的默认值是 1e-6。",
                              "Your default eps is wrong: your result matches eps = {eps:g}; the contract's default is "
                              "1e-6."),
    "rms_eps_ignored": ("调用者传入的 eps 没有被使用：你的结果与一个固定的 eps（或不加 eps）一致。请在公式里使用参数 eps。",
                        "The eps the caller passes is not used: your result matches a fixed eps (or none). Use the "
                        "eps argument in the formula."),
    "rms_variance": ("你用的是方差（先减去均值），而不是均方 mean(x²)：那是 LayerNorm。RMSNorm 不减均值。",
                     "You use the variance (subtracting the mean) instead of the mean square mean(x²): that is "
                     "LayerNorm. RMSNorm does not subtract the mean."),
    "rms_wrong_dim": ("你在 {where} 上求均值：应当只在最后一维（特征维，dim=-1）上求 mean(x²)，每个 token 一个值。",
                      "You take the mean over {where}: take mean(x²) over the last dim only (the features, "
                      "dim=-1), one value per token."),
    "rms_no_keepdim": ("求均值时没有 keepdim=True：除法沿错误的维度广播了（方阵时不报错，其他形状直接报错）。",
                       "Your mean drops the dim (no keepdim=True), so the division broadcasts along the wrong axis "
                       "(silently on square inputs, with an error on others)."),
    "rms_no_weight": ("你没有乘以 weight（学习到的缩放）：weight 全为 1 时看不出来，其他时候结果就不对了。",
                      "You do not multiply by weight (the learned scale): invisible while weight is all ones, wrong "
                      "otherwise."),
    "rms_no_sqrt": ("你除以的是 mean(x²) + eps 本身，没有开根号。", "You divide by mean(x²) + eps itself, without the square root."),
    "rms_sum_not_mean": ("你用的是平方和 sum(x²)，而不是均值 mean(x²)（差一个特征数 d 的因子）。",
                         "You use the sum of squares sum(x²), not the mean mean(x²) (off by the number of features d)."),
    "rms_detached": ("前向结果是对的，但梯度不对：你对分母（均方根）用了 .detach() 或 .data，梯度没有经过它。不要切断计算图。",
                     "Your forward result is right but the gradient is not: the denominator (the RMS) is detached "
                     "(.detach() or .data), so no gradient flows through it. Keep the graph whole."),
    "output_dtype": ("数值是对的，但 dtype 是 {dtype}：请返回与输入相同的 dtype（float32）。在 float64 里计算可以，最后要转回 x.dtype。",
                     "The values are right but the dtype is {dtype}: return the input's dtype (float32). Computing in "
                     "float64 is fine, but cast back to x.dtype at the end."),
    # -- SwiGLU
    "swiglu_sigmoid_gate": ("门控用的是 sigmoid(z)，而不是 SiLU：silu(z) = z · sigmoid(z)（F.silu）。",
                            "Your gate is sigmoid(z), not SiLU: silu(z) = z · sigmoid(z) (F.silu)."),
    "swiglu_gate_up_swapped": ("W_gate 与 W_up 的角色反了：silu 应作用在 W_gate(x) 上，再乘以 W_up(x)。",
                               "W_gate and W_up are swapped: silu goes on W_gate(x), which then multiplies W_up(x)."),
    "swiglu_other_activation": ("门控用的是 {name}，而不是 SiLU：silu(z) = z · sigmoid(z)（F.silu）。",
                                "Your gate uses {name}, not SiLU: silu(z) = z · sigmoid(z) (F.silu)."),
    "swiglu_no_activation": ("门控没有经过 SiLU：W_gate(x) 与 W_up(x) 直接相乘了。", "Your gate has no SiLU: W_gate(x) and W_up(x) are multiplied as they are."),
    "swiglu_no_up": ("你没有用 W_up：应当是 silu(W_gate(x)) * W_up(x) 再经过 W_down。",
                     "You leave W_up out: compute silu(W_gate(x)) * W_up(x), then W_down."),
    "swiglu_silu_after_product": ("SiLU 用在了乘积上（silu(W_gate(x) * W_up(x))）：应只作用在 W_gate(x) 上。",
                                  "You apply SiLU to the product (silu(W_gate(x) * W_up(x))): apply it to W_gate(x) "
                                  "only."),
    "swiglu_silu_both": ("SiLU 同时作用在了 W_gate(x) 和 W_up(x) 上：W_up(x) 不经过激活。",
                         "You apply SiLU to both W_gate(x) and W_up(x): W_up(x) goes through no activation."),
    "swiglu_sum_not_product": ("你把 silu(W_gate(x)) 与 W_up(x) 相加了：门控是逐元素相乘。",
                               "You add silu(W_gate(x)) and W_up(x): the gate multiplies, element by element."),
    # -- DecoderLayer
    "post_norm": ("你用的是后归一化（Post-Norm，先加残差再归一化）：本作业要求预归一化，每个子层读取归一化后的副本，残差流本身不归一化：h = x + attn(norm1(x))，out = h + mlp(norm2(h))。",
                  "You normalise after adding the residual (post-norm): this layer is pre-norm, each sub-layer reads "
                  "a normalised copy and the residual stream itself is never normalised: h = x + attn(norm1(x)), "
                  "out = h + mlp(norm2(h))."),
    "missing_residual": ("{which}缺少残差连接：子层的输出要加回到它的输入上（{fix}）。",
                         "The residual connection {which} is missing: add the sub-layer's output back to its input "
                         "({fix})."),
    "residual_from_normed": ("残差加的是归一化之后的值：应把子层输出加回到未归一化的输入上（{fix}）。",
                             "Your residual adds the normalised value: add the sub-layer's output to the "
                             "un-normalised input ({fix})."),
    "mask_not_passed": ("forward 的 causal 参数没有传给注意力：{how}。请写 self.attn(..., causal=causal)。",
                        "forward does not pass its causal argument on to the attention: {how}. Write "
                        "self.attn(..., causal=causal)."),
    "norms_swapped": ("norm1 与 norm2 用反了：norm1 在注意力之前，norm2 在 MLP 之前。",
                      "norm1 and norm2 are swapped: norm1 goes before the attention, norm2 before the MLP."),
    "norm_reused": ("两个子层用了同一个 RMSNorm（{used}）：注意力前用 norm1，MLP 前用 norm2，它们的 weight 不同。",
                    "Both sub-layers use the same RMSNorm ({used}): norm1 before the attention, norm2 before the MLP; "
                    "their weights differ."),
    "parallel_branches": ("注意力和 MLP 是并行的（都读 x）：这里是串行的，MLP 读的是加完注意力残差之后的 h：out = h + mlp(norm2(h))。",
                          "Your attention and MLP run in parallel (both read x): here they are sequential, and the "
                          "MLP reads h, after the attention's residual: out = h + mlp(norm2(h))."),
    "layer_mutates_input": ("你原地修改了输入 x（例如 x += self.attn(...)）：调用者的 x 被改变了。请写 h = x + ...。",
                            "You modify the input x in place (e.g. x += self.attn(...)), changing the caller's x. "
                            "Write h = x + ... instead."),
    "block_wrong": ("DecoderLayer 建立在你的 {block} 之上，而你的 {block} 本身就不对：先让 {block} 的检查通过，层的结果才可能对。",
                    "Your DecoderLayer is built on your {block}, which is itself wrong: make {block}'s checks pass "
                    "first, the layer cannot be right before."),
    "rms_mutates_input": ("你的 rms_norm 原地修改了输入（例如 x /= ... 或 .mul_()）：DecoderLayer 的输入因此被改变了。请用不改变输入的运算。",
                          "Your rms_norm modifies its input in place (e.g. x /= ... or .mul_()), so the "
                          "DecoderLayer's input changes. Use out-of-place operations."),
}

DETACHED = Diagnosis("detached", Text(
    zh="计算图被切断：不要用 .detach()、.data 或 torch.tensor(...) 重新包装中间结果，梯度要能传回输入。",
    en="The graph is cut: don't use .detach(), .data or torch.tensor(...) on intermediate results; gradients must "
       "flow back to the inputs."))


def same(a, b) -> bool:
    """Does the student's value `a` match the variant's value `b` (see MATCH_ATOL)?"""
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and a.dtype != torch.bool and torch.allclose(a.double(), b.double(), atol=MATCH_ATOL, rtol=MATCH_RTOL,
                                                         equal_nan=True))


def unique(got, right, candidates) -> Diagnosis | None:
    """The one diagnosis whose variant matches `got` and differs from `right`; None if none or several do.
    `candidates` yields (diagnosis, thunk); a thunk that raises does not apply to these inputs."""
    found: dict[str, Diagnosis] = {}
    for diagnosis, thunk in candidates:
        try:
            value = thunk()
        except Exception:
            continue
        if same(got, value) and not same(value, right):
            found.setdefault(diagnosis.id, diagnosis)
    return next(iter(found.values())) if len(found) == 1 else None


def dtype_only(got, right) -> Diagnosis | None:
    """Right values in another floating dtype (float64 out, typically)."""
    if isinstance(got, torch.Tensor) and got.is_floating_point() and got.dtype != torch.float32 and same(got, right):
        return _named("output_dtype", dtype=str(got.dtype))
    return None


# -- rms_norm -------------------------------------------------------------------------------------------------------
def _rms(x, w, eps=EPS, *, dims=-1, keepdim=True, centre=False, unbiased=False, outside=False, root=True,
         total=False, weight=True):
    """RMSNorm with one step swapped out; the defaults are the correct computation."""
    if centre or unbiased:
        ms = x.var(dim=dims, keepdim=keepdim, correction=1 if unbiased else 0)
    else:
        ms = x.pow(2).sum(dim=dims, keepdim=keepdim) if total else x.pow(2).mean(dim=dims, keepdim=keepdim)
    denom = (ms.sqrt() + eps) if outside else (ms + eps).sqrt() if root else ms + eps
    top = x - x.mean(dim=dims, keepdim=keepdim) if centre else x
    y = top / denom
    return y * w if weight else y


def rms_right(x, w, eps=EPS):
    return _rms(x.double(), w.double(), eps)


def _rms_candidates(x, w, eps, eps_given):
    n = x.dim()
    yield _named("rms_eps_outside_sqrt"), lambda: _rms(x, w, eps, outside=True)
    fixed = [other for other in (1e-5, 1e-6, 1e-8, torch.finfo(torch.float32).eps) if other != eps]
    if eps_given:  # a fixed eps (or none) instead of the caller's: one mistake, whatever the fixed value
        for other in [0.0, *fixed]:
            yield _named("rms_eps_ignored"), lambda other=other: _rms(x, w, other)
    else:
        yield _named("rms_no_eps"), lambda: _rms(x, w, 0.0)
        for other in fixed:
            yield _named("rms_wrong_default_eps", eps=other), lambda other=other: _rms(x, w, other)
    for centre, unbiased in ((True, False), (True, True), (False, True)):
        yield _named("rms_variance"), lambda c=centre, u=unbiased: _rms(x, w, eps, centre=c, unbiased=u)
        if centre:  # variance in the denominator, x itself on top
            yield _named("rms_variance"), lambda u=unbiased: x / (x.var(-1, keepdim=True, correction=int(u)) + eps
                                                                   ).sqrt() * w
    for dim in range(n - 1):
        where = (f"第 {dim} 维（dim={dim}）", f"dim {dim}") if dim != n - 2 or n == 1 else (
            f"token 维（dim={dim - n}）", f"the token dim ({dim - n})")
        yield _named("rms_wrong_dim", where=where), lambda dim=dim: _rms(x, w, eps, dims=dim)
    if n > 1:
        yield (_named("rms_wrong_dim", where=("所有元素（没有写 dim）", "all elements (no dim given)")),
               lambda: _rms(x, w, eps, dims=tuple(range(n))))
    yield _named("rms_no_keepdim"), lambda: _rms(x, w, eps, keepdim=False)
    yield _named("rms_no_weight"), lambda: _rms(x, w, eps, weight=False)
    yield _named("rms_no_sqrt"), lambda: _rms(x, w, eps, root=False)
    yield _named("rms_sum_not_mean"), lambda: _rms(x, w, eps, total=True)


def rms(x, w, got, eps=EPS, eps_given=False) -> Diagnosis | None:
    """Which known rms_norm mistake (if any) gives the student's `got` on (x, w, eps)."""
    x, w = x.double(), w.double()
    right = _rms(x, w, eps)
    return dtype_only(got, right) or unique(got, right, _rms_candidates(x, w, eps, eps_given))


def rms_raised(call, x, w) -> Diagnosis | None:
    """rms_norm raised on (x, w). `call(x, w)` runs it again (the student's result or None): a square input
    [d, d] is where a mean without keepdim silently works, so recognise that mistake there."""
    d = x.shape[-1]
    g = torch.Generator().manual_seed(1)
    xs, ws = torch.randn(d, d, generator=g) + 0.5, 1.0 + 0.5 * torch.randn(d, generator=g)
    got = call(xs, ws)
    if got is None:
        return None
    found = rms(xs, ws, got)
    return found if found is not None and found.id == "rms_no_keepdim" else None


def rms_grads(x, w, dx, dw) -> Diagnosis | None:
    """Wrong gradients of a right forward: the RMS detached (a constant to autograd)."""
    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
    ms = xd.pow(2).mean(-1, keepdim=True)
    y = xd / (ms + EPS).sqrt().detach() * wd
    (y * grad_ramp(y.shape)).sum().backward()
    if same(dx, xd.grad) and (dw is None or same(dw, wd.grad)):
        return _named("rms_detached")
    return None


# -- SwiGLU ---------------------------------------------------------------------------------------------------------
def _mlp(x, Wg, Wu, Wd, *, act=F.silu, swap=False, combine=None, up_act=None, after=False, no_up=False):
    """SwiGLU with one step swapped out; the defaults are the correct computation."""
    g, u = x @ Wg.T, x @ Wu.T
    if swap:
        g, u = u, g
    if no_up:
        return act(g) @ Wd.T
    if after:
        return act(g * u) @ Wd.T
    hidden = (combine or torch.mul)(act(g), up_act(u) if up_act else u)
    return hidden @ Wd.T


def mlp_right(x, weights: dict, prefix: str = ""):
    Wg, Wu, Wd = (weights[f"{prefix}{n}.weight"].double() for n in ("W_gate", "W_up", "W_down"))
    return _mlp(x.double(), Wg, Wu, Wd)


def _mlp_candidates(x, Wg, Wu, Wd):
    m = lambda **kw: lambda: _mlp(x, Wg, Wu, Wd, **kw)
    yield _named("swiglu_sigmoid_gate"), m(act=torch.sigmoid)
    yield _named("swiglu_gate_up_swapped"), m(swap=True)
    for name, act in (("ReLU", torch.relu), ("GELU", F.gelu), ("tanh", torch.tanh),
                      ("GELU (tanh)", lambda z: F.gelu(z, approximate="tanh"))):
        yield _named("swiglu_other_activation", name=name), m(act=act)
    yield _named("swiglu_no_activation"), m(act=lambda z: z)
    yield _named("swiglu_no_up"), m(no_up=True)
    yield _named("swiglu_silu_after_product"), m(after=True)
    yield _named("swiglu_silu_both"), m(up_act=F.silu)
    yield _named("swiglu_sum_not_product"), m(combine=torch.add)


def mlp(x, weights: dict, got, prefix: str = "") -> Diagnosis | None:
    """Which known SwiGLU mistake gives the student's `got` for input x and the injected `weights`."""
    x = x.double()
    Wg, Wu, Wd = (weights[f"{prefix}{n}.weight"].double() for n in ("W_gate", "W_up", "W_down"))
    right = _mlp(x, Wg, Wu, Wd)
    return dtype_only(got, right) or unique(got, right, _mlp_candidates(x, Wg, Wu, Wd))


# -- DecoderLayer ---------------------------------------------------------------------------------------------------
def _future(T: int) -> torch.Tensor:
    i = torch.arange(T)
    return i[None, :] > i[:, None]


def _attn(x, p: dict, heads: int, causal: bool):
    """Multi-head self-attention with the weights `attn.W_*.weight` of p (float64)."""
    *batch, T, d = x.shape
    split = lambda t: t.reshape(*batch, T, heads, d // heads).transpose(-3, -2)
    q, k, v = (split(x @ p[f"attn.{n}.weight"].T) for n in ("W_q", "W_k", "W_v"))
    s = q @ k.transpose(-2, -1) / math.sqrt(d // heads)
    if causal:
        s = s.masked_fill(_future(T), float("-inf"))
    o = (torch.softmax(s, -1) @ v).transpose(-3, -2).reshape(*batch, T, d)
    return o @ p["attn.W_o.weight"].T


class _Parts:
    """The float64 pieces of a layer with the parameters p: n1, n2 (the two norms), a (attention), f (the MLP)."""

    def __init__(self, p: dict, heads: int, causal: bool):
        self.p = {k: v.double() for k, v in p.items()}
        self.heads, self.causal = heads, causal

    def n1(self, t):
        return _rms(t, self.p["norm1.weight"])

    def n2(self, t):
        return _rms(t, self.p["norm2.weight"])

    def a(self, t, causal=None):
        return _attn(t, self.p, self.heads, self.causal if causal is None else causal)

    def f(self, t):
        return _mlp(t, *(self.p[f"mlp.{n}.weight"] for n in ("W_gate", "W_up", "W_down")))


def layer_right(x, p: dict, heads: int, causal: bool = True):
    s = _Parts(p, heads, causal)
    h = x.double() + s.a(s.n1(x.double()))
    return h + s.f(s.n2(h))


ATTN_FIX = ("注意力：h = x + attn(norm1(x))", "around the attention: h = x + attn(norm1(x))")
MLP_FIX = ("MLP：out = h + mlp(norm2(h))", "around the MLP: out = h + mlp(norm2(h))")


def _layer_candidates(x, s: _Parts):
    def seq(first, second):  # h = first(x); out = second(h)
        return lambda: second(first(x))

    attn_res = lambda t: t + s.a(s.n1(t))
    mlp_res = lambda t: t + s.f(s.n2(t))
    yield _named("post_norm"), seq(lambda t: s.n1(t + s.a(t)), lambda h: s.n2(h + s.f(h)))
    yield (_named("missing_residual", which=("注意力周围", "around the attention"), fix=ATTN_FIX),
           seq(lambda t: s.a(s.n1(t)), mlp_res))
    yield (_named("missing_residual", which=("MLP 周围", "around the MLP"), fix=MLP_FIX),
           seq(attn_res, lambda h: s.f(s.n2(h))))
    yield (_named("missing_residual", which=("两个子层周围都", "around both sub-layers"),
                  fix=(ATTN_FIX[0] + "；" + MLP_FIX[0], ATTN_FIX[1] + "; " + MLP_FIX[1])),
           seq(lambda t: s.a(s.n1(t)), lambda h: s.f(s.n2(h))))
    yield (_named("residual_from_normed", fix=ATTN_FIX), seq(lambda t: s.n1(t) + s.a(s.n1(t)), mlp_res))
    yield (_named("residual_from_normed", fix=MLP_FIX), seq(attn_res, lambda h: s.n2(h) + s.f(s.n2(h))))
    how = (("注意力总是因果的，causal=False 不起作用", "the attention is always causal, so causal=False has no effect")
           if not s.causal else ("注意力从不遮挡未来", "the attention never hides the future"))
    yield (_named("mask_not_passed", how=how),
           seq(lambda t: t + s.a(s.n1(t), causal=not s.causal), mlp_res))
    yield _named("norms_swapped"), seq(lambda t: t + s.a(s.n2(t)), lambda h: h + s.f(s.n1(h)))
    yield _named("norm_reused", used="norm1"), seq(attn_res, lambda h: h + s.f(s.n1(h)))
    yield _named("norm_reused", used="norm2"), seq(lambda t: t + s.a(s.n2(t)), mlp_res)
    yield _named("parallel_branches"), lambda: x + s.a(s.n1(x)) + s.f(s.n2(x))


def layer(x, p: dict, heads: int, causal: bool, got) -> Diagnosis | None:
    """Which known wiring mistake gives the student's `got`, for input x and the injected parameters p. The
    variants use correct building blocks: a layer that is wrong only because rms_norm or SwiGLU is wrong is not
    named here (their own checks name it)."""
    x = x.double()
    s = _Parts(p, heads, causal)
    right = layer_right(x, p, heads, causal)
    return dtype_only(got, right) or unique(got, right, _layer_candidates(x, s))


def mlp_grads(x, weights: dict, dx) -> Diagnosis | None:
    """Wrong input gradients of a right forward: the gate or the up projection detached from the graph."""
    Wg, Wu, Wd = (weights[f"{n}.weight"].double() for n in ("W_gate", "W_up", "W_down"))
    for cut in ("gate", "up"):
        xd = x.double().requires_grad_()
        g, u = xd @ Wg.T, xd @ Wu.T
        g, u = (g.detach(), u) if cut == "gate" else (g, u.detach())
        y = (F.silu(g) * u) @ Wd.T
        (y * grad_ramp(y.shape)).sum().backward()
        if same(dx, xd.grad):
            return DETACHED
    return None
