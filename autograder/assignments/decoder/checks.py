"""The decoder assignment's hidden checks (14 of the 20 points: rms_norm 7, SwiGLU 4, DecoderLayer 9 in all; the 6
public ones are in public_checks.py). They use `refs`, each student's own inputs and references (see cases.py), and
the full diagnosis.
"""
from __future__ import annotations

import torch

from autograder.public import expect
from autograder.public.check import check
from autograder.public.errors import StudentError, SubmissionLoadError
from autograder.public.text import Text

from . import diagnosis
from .cases import D_FF, D_MODEL, HEADS, zeroed

RMS, MLP, LAYER = "rms_norm", "SwiGLU", "DecoderLayer"
LAYER_NAMES = ("norm1.weight", "norm2.weight", *(f"attn.{n}.weight" for n in ("W_q", "W_k", "W_v", "W_o")),
               *(f"mlp.{n}.weight" for n in ("W_gate", "W_up", "W_down")))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- rms_norm -------------------------------------------------------------------------------------------------------
def rms_call(student, x, w, eps=None):
    """The student's rms_norm(x, w[, eps]); when it raises, the error carries a diagnosis if a square input tells
    why (a mean without keepdim works there)."""
    kwargs = {} if eps is None else {"eps": eps}
    try:
        return student.rms_norm(x, w, **kwargs)
    except StudentError as e:
        if not e.todo and not isinstance(e, SubmissionLoadError):
            e.diagnosis = expect.safely(lambda: diagnosis.rms_raised(_rms_prober(student), x, w))
        raise


def _rms_prober(student):
    def call(x, w):
        try:
            got = student.rms_norm(x, w)
        except StudentError:
            return None
        return got if type(got) is torch.Tensor else None
    return call


def rms_against(student, x, w, expected, eps=None, what="rms_norm(x, weight)"):
    got = rms_call(student, x, w, eps)
    hint = lambda: diagnosis.rms(x, w, got, diagnosis.EPS if eps is None else eps, eps_given=eps is not None)
    expect.tensor(got, what, tuple(x.shape), torch.float32, diagnose=hint)
    expect.close(got, expected, what, diagnose=hint)






@check(points=1, function=RMS,
       zh="批量输入 [2, 5, 16]（每行均值不为 0）时的数值", en="values on batched input [2, 5, 16] (rows with a non-zero mean)")
def rms_values_batched(student, refs):
    rms_against(student, refs["rms.batched.x"], refs["rms.batched.w"], refs["rms.batched.y"])


@check(points=1, function=RMS,
       zh="eps 在根号里面：数值约 1e-4 的行，以及调用者给定的 eps", en="eps inside the square root: rows of values about 1e-4, and an eps the caller passes")
def rms_eps_inside_sqrt(student, refs):
    rms_against(student, refs["rms.tiny.x"], refs["rms.tiny.w"], refs["rms.tiny.y"])
    rms_against(student, refs["rms.eps.x"], refs["rms.eps.w"], refs["rms.eps.y"], eps=1e-2,
                what="rms_norm(x, weight, eps=1e-2)")


@check(points=1, function=RMS,
       zh="学习到的缩放：weight 不全为 1 时的数值", en="the learned scale: values when weight is not all ones")
def rms_learned_scale(student, refs):
    rms_against(student, refs["rms.scale.x"], refs["rms.scale.w"], refs["rms.scale.y"])


@check(points=1, function=RMS,
       zh="单个向量 [8] 与含大小为 1 的前导维度 [1, 1, 3, 8]、[2, 1, 4, 8]",
       en="a single vector [8], and leading dims of size 1: [1, 1, 3, 8], [2, 1, 4, 8]")
def rms_leading_dims(student, refs):
    for case in ("vec", "lead1", "lead2"):
        x = refs[f"rms.{case}.x"]
        rms_against(student, x, refs[f"rms.{case}.w"], refs[f"rms.{case}.y"],
                    what=f"rms_norm(x of shape {list(x.shape)}, weight)")


@check(points=1, function=RMS,
       zh="梯度能传回 x 与 weight，且数值正确", en="gradients reach x and weight with the right values")
def rms_gradients(student, refs):
    x, w = refs["rms.grads.x"], refs["rms.grads.w"]
    try:
        reply = student.call(RMS, x, w, grad_of=(0, 1))
    except StudentError as e:  # e.g. `x /= ...` on an input that requires grad
        if not e.todo and not isinstance(e, SubmissionLoadError):
            e.diagnosis = expect.safely(lambda: _rms_mutates(student, refs))
        raise
    expect.close(reply.value, refs["rms.grads.y"], "rms_norm(x, weight)",
                 diagnose=lambda: diagnosis.rms(x, w, reply.value))
    _grads_close(reply, ("x", "weight"), (refs["rms.grads.dx"], refs["rms.grads.dw"]),
                 lambda: diagnosis.rms_grads(x, w, *reply.grads))


def _grads_close(reply, names, expected, diagnose=None):
    if isinstance(reply.grads, dict):
        expect.fail(Text(zh="无法对你的输出做反向传播",
                         en="backpropagation through your output failed"),
                    diagnosis.DETACHED,
                    Text(zh=f"（{reply.grads['error']['type']}）", en=f"({reply.grads['error']['type']})"))
    for name, grad, ref in zip(names, reply.grads, expected):  # one per input: validated by the student proxy
        if grad is None:
            expect.fail(Text(zh=f"梯度没有传回 {name}（.detach()、.data 或新建张量切断了计算图）",
                             en=f"no gradient reaches {name} (.detach(), .data or a new tensor cuts the graph)"),
                        diagnosis.DETACHED)
        expect.close(grad, ref, f"gradient of {name}", atol=1e-4, rtol=1e-3, diagnose=diagnose)


# -- SwiGLU ---------------------------------------------------------------------------------------------------------
def mlp_model(student, d_model, d_ff, weights):
    model = student.new(MLP, d_model, d_ff)
    model.load_parameters(weights)
    return model


def mlp_against(model, x, weights, expected, what):
    got = model(x)
    expect.close(got, expected, what, diagnose=lambda: diagnosis.mlp(x, weights, got))






def _mlp_weights(refs):
    return {f"{n}.weight": refs[f"mlp.{n}.weight"] for n in ("W_gate", "W_up", "W_down")}


@check(points=1, function=MLP,
       zh=f"注入权重后，批量输入 [2, 5, {D_MODEL}] 与 [1, 3, {D_MODEL}]（d_ff = {D_FF}）的输出",
       en=f"output for batches [2, 5, {D_MODEL}] and [1, 3, {D_MODEL}] (d_ff = {D_FF}), with injected weights")
def swiglu_values_batched(student, refs):
    weights = _mlp_weights(refs)
    model = mlp_model(student, D_MODEL, D_FF, weights)
    mlp_against(model, refs["mlp.x"], weights, refs["mlp.y"], f"SwiGLU({D_MODEL}, {D_FF})(x)")
    mlp_against(model, refs["mlp.x1"], weights, refs["mlp.y1"], f"SwiGLU({D_MODEL}, {D_FF})(x)")


@check(points=1, function=MLP,
       zh="梯度能穿过 SwiGLU 传回输入，且数值正确", en="gradients flow through SwiGLU back to its input with the right values")
def swiglu_gradients(student, refs):
    weights = _mlp_weights(refs)
    model = mlp_model(student, D_MODEL, D_FF, weights)
    x = refs["mlp.grads.x"]
    reply = model.call(x, grad_of=(0,))
    expect.close(reply.value, refs["mlp.grads.y"], f"SwiGLU({D_MODEL}, {D_FF})(x)",
                 diagnose=lambda: diagnosis.mlp(x, weights, reply.value))
    _grads_close(reply, ("x",), (refs["mlp.grads.dx"],), lambda: diagnosis.mlp_grads(x, weights, reply.grads[0]))


# -- DecoderLayer ---------------------------------------------------------------------------------------------------
def layer_model(student, sizes, weights):
    model = student.new(LAYER, *sizes)
    model.load_parameters(weights)
    return model


def layer_hint(student, x, weights, heads, causal, got):
    """The wiring mistake, else (no wiring variant fits) what is wrong with the blocks the layer is built on."""
    if type(got) is torch.Tensor and not bool(got.any()):  # all zeros: a wiring variant can agree with that only
        return blocks_hint(student)                         # by accident (sub-layers zeroed, residuals missing)
    return diagnosis.layer(x, weights, heads, causal, got) or blocks_hint(student)


def blocks_hint(student):
    """The layer is built on the student's rms_norm and SwiGLU: when one of them is wrong on a quick probe (or
    modifies its input), say so, since no wiring can then be right."""
    g = _gen(21)
    x, w = torch.randn(2, 3, 8, generator=g) + 0.5, 1.0 + 0.5 * torch.randn(8, generator=g)
    reply = student.call(RMS, x, w, repeat=2)
    got, again = reply.value, reply.again
    if type(got) is torch.Tensor and type(again) is torch.Tensor and not (
            got.shape == again.shape and torch.equal(got, again)):
        return diagnosis._named("rms_mutates_input")
    if not diagnosis.same(got, diagnosis.rms_right(x, w)):
        return diagnosis._named("block_wrong", block=RMS)
    weights = {"W_gate.weight": torch.randn(6, 8, generator=g) * 0.5, "W_up.weight": torch.randn(6, 8, generator=g) * 0.5,
               "W_down.weight": torch.randn(8, 6, generator=g) * 0.5}
    if not diagnosis.same(mlp_model(student, 8, 6, weights)(x), diagnosis.mlp_right(x, weights)):
        return diagnosis._named("block_wrong", block=MLP)
    return None


def layer_against(student, model, x, weights, heads, expected, what, causal=None):
    got = model(x) if causal is None else model(x, causal=causal)
    expect.close(got, expected, what, diagnose=lambda: layer_hint(student, x, weights, heads, causal is not False, got))


def _layer_weights(refs, *zero):
    return zeroed({n: refs[f"layer.{n}"] for n in LAYER_NAMES}, *zero)


HIDDEN = f"DecoderLayer({D_MODEL}, {HEADS}, {D_FF})"






@check(points=1, function=LAYER,
       zh="残差连接：W_o 与 W_down 置 0 时（两个子层都输出 0），输出等于输入",
       en="residual connections: with W_o and W_down set to 0 (both sub-layers output 0) the output equals the input")
def layer_zero_sublayers(student, refs):
    weights = _layer_weights(refs, "attn.W_o.weight", "mlp.W_down.weight")
    x = refs["layer.zero.x"]
    layer_against(student, layer_model(student, (D_MODEL, HEADS, D_FF), weights), x, weights, HEADS, x, f"{HIDDEN}(x)")


@check(points=1, function=LAYER,
       zh="只有注意力子层（W_down 置 0）：h = x + attn(norm1(x))", en="the attention sub-layer alone (W_down set to 0): h = x + attn(norm1(x))")
def layer_attention_branch(student, refs):
    weights = _layer_weights(refs, "mlp.W_down.weight")
    layer_against(student, layer_model(student, (D_MODEL, HEADS, D_FF), weights), refs["layer.attn_only.x"], weights, HEADS,
                  refs["layer.attn_only.y"], f"{HIDDEN}(x)")


@check(points=1, function=LAYER,
       zh="只有 MLP 子层（W_o 置 0）：out = x + mlp(norm2(x))", en="the MLP sub-layer alone (W_o set to 0): out = x + mlp(norm2(x))")
def layer_mlp_branch(student, refs):
    weights = _layer_weights(refs, "attn.W_o.weight")
    layer_against(student, layer_model(student, (D_MODEL, HEADS, D_FF), weights), refs["layer.mlp_only.x"], weights, HEADS,
                  refs["layer.mlp_only.y"], f"{HIDDEN}(x)")


@check(points=1, function=LAYER,
       zh=f"注入全部权重后（两个 RMSNorm 的 weight 不同），批量输入 [2, 5, {D_MODEL}] 的输出",
       en=f"output for a batch [2, 5, {D_MODEL}] with every weight injected (the two RMSNorm weights differ)")
def layer_values_batched(student, refs):
    weights = _layer_weights(refs)
    layer_against(student, layer_model(student, (D_MODEL, HEADS, D_FF), weights), refs["layer.full.x"], weights, HEADS,
                  refs["layer.full.y"], f"{HIDDEN}(x)")


@check(points=1, function=LAYER,
       zh=f"causal 参数传给了注意力：[1, 6, {D_MODEL}] 上 causal=False 与默认的 causal=True",
       en=f"the causal flag reaches the attention: causal=False and the default causal=True on [1, 6, {D_MODEL}]")
def layer_causal_flag(student, refs):
    weights = _layer_weights(refs)
    model = layer_model(student, (D_MODEL, HEADS, D_FF), weights)
    x = refs["layer.open.x"]
    layer_against(student, model, x, weights, HEADS, refs["layer.open.y"], f"{HIDDEN}(x, causal=False)", causal=False)
    layer_against(student, model, x, weights, HEADS, refs["layer.open.y_causal"], f"{HIDDEN}(x)")


@check(points=1, function=LAYER,
       zh="梯度能穿过整个 DecoderLayer 传回输入，且数值正确", en="gradients flow through the whole DecoderLayer back to its input with the right values")
def layer_gradients(student, refs):
    weights = _layer_weights(refs)
    model = layer_model(student, (D_MODEL, HEADS, D_FF), weights)
    x = refs["layer.grads.x"]
    try:
        reply = model.call(x, grad_of=(0,))
    except StudentError as e:  # e.g. `x += ...` on an input that requires grad
        if not e.todo and not isinstance(e, SubmissionLoadError):
            e.diagnosis = expect.safely(lambda: _who_mutates(student, refs))
        raise
    expect.close(reply.value, refs["layer.grads.y"], f"{HIDDEN}(x)",
                 diagnose=lambda: layer_hint(student, x, weights, HEADS, True, reply.value))
    _grads_close(reply, ("x",), (refs["layer.grads.dx"],))


@check(points=1, kind="structural", function=LAYER,
       zh="不修改调用者传入的 x", en="the caller's x is left unchanged")
def layer_inputs_unchanged(student, refs):
    """Decided from the student's own results: called twice on the very same tensor, a layer that modified it in the
    first call computes something else in the second (the worker's word about its inputs is not used)."""
    weights = _layer_weights(refs)
    model = layer_model(student, (D_MODEL, HEADS, D_FF), weights)
    x = refs["layer.full.x"]
    reply = model.call(x, repeat=2)
    first = expect.tensor(reply.value, f"{HIDDEN}(x)")
    again = expect.tensor(reply.again, f"{HIDDEN}(x)")
    if first.shape != again.shape or not torch.equal(first.nan_to_num(), again.nan_to_num()):
        expect.fail(Text(zh="对同一个 x 再调用一次，结果不同：你的代码原地修改了输入（例如 `x += ...`、`x /= ...`、`.mul_()`）",
                         en="a second call on the same x gives a different result: your code modifies its input in place "
                    "(e.g. `x += ...`, `x /= ...`, `.mul_()`)"),
                    expect.safely(lambda: _who_mutates(student, refs)))


def _rms_mutates(student, refs):
    """rms_norm called twice on the same tensors: a different second result means it modifies its input."""
    reply = student.call(RMS, refs["rms.batched.x"], refs["rms.batched.w"], repeat=2)
    a, b = reply.value, reply.again
    if type(a) is torch.Tensor and type(b) is torch.Tensor and not (a.shape == b.shape and torch.equal(a, b)):
        return diagnosis._named("rms_mutates_input")
    return None


def _who_mutates(student, refs):
    """The layer modifies its input (or raises where an input requiring grad is modified): rms_norm, if it does so
    itself, else the layer's own forward, if a second call on the same x differs."""
    found = _rms_mutates(student, refs)
    if found is not None:
        return found
    weights = _layer_weights(refs)
    reply = layer_model(student, (D_MODEL, HEADS, D_FF), weights).call(refs["layer.full.x"], repeat=2)
    a, b = reply.value, reply.again
    if type(a) is torch.Tensor and type(b) is torch.Tensor and not (a.shape == b.shape and torch.equal(a, b)):
        return diagnosis._named("layer_mutates_input")
    return None
