"""
Run the chapter's example with your decoder.py / 用你的 decoder.py 运行本章示例。

    python run.py

seed = 42, then DecoderLayer(d_model=8, num_heads=2, d_ff=16), then x = randn(2, 4, 8) (B = 2 sequences of
T = 4 tokens). The random draws happen in a fixed order (the layer's weights W_q, W_k, W_v, W_o, W_gate, W_up,
W_down, then x): change the order and every number changes. / 随机数的抽取顺序是固定的（层的权重
W_q、W_k、W_v、W_o、W_gate、W_up、W_down，然后是 x），顺序一变，所有数字都会变。
"""
import os
import re
import sys

# Import decoder.py from this script's own folder, wherever the script is started from.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:  # a console that cannot print ✅ or Chinese should not crash the run
    sys.stdout.reconfigure(errors="replace")
except (AttributeError, ValueError):
    pass

import torch

from decoder import DecoderLayer, SwiGLU, rms_norm

TODO_RE = re.compile(r"^TODO\((?P<id>[A-Za-z_][A-Za-z0-9_]*)\)")


def missing_todos() -> list[tuple[str, str]]:
    """Call each TODO once on a tiny input; collect (id, hint) of the unfinished ones."""
    probes = [
        lambda: rms_norm(torch.ones(2, 4), torch.ones(4)),
        lambda: SwiGLU(4, 6)(torch.ones(2, 4)),
        lambda: DecoderLayer(4, 2, 6)(torch.ones(2, 4)),
    ]
    found: dict[str, str] = {}
    for probe in probes:
        try:
            with torch.no_grad():
                probe()
        except NotImplementedError as exc:
            m = TODO_RE.match(str(exc))
            if m is not None:
                found.setdefault(m.group("id"), str(exc)[m.end():].lstrip(": "))
        except Exception:
            pass  # a real bug: main() below shows it with its traceback
    return list(found.items())


def report_missing(todos: list[tuple[str, str]]) -> None:
    for todo, hint in todos:
        print(f"❌ 还没完成 / not done yet: TODO({todo})")
        if hint:
            print(f"   {hint}")
    names = ", ".join(todo for todo, _ in todos)
    print(f"   请在 decoder.py 里完成 {names}，然后再运行 python run.py。")
    print(f"   Fill in {names} in decoder.py, then run python run.py again.")
    sys.exit(1)


def fail(zh: str, en: str) -> None:
    """Say what is wrong, once in each language (one language per line), and stop."""
    print(f"❌ {zh}")
    print(f"   {en}")
    sys.exit(1)


def require_finite(name: str, value: torch.Tensor) -> None:
    """NaN or inf fails every comparison, so say so before a comparison blames the wrong thing."""
    if not torch.isfinite(value).all():
        fail(f"{name} 的输出里有 NaN 或 inf。常见原因：除以 0（RMSNorm 的分母忘了加 eps）、对负数开方，"
             f"或者注意力的某一行所有位置都被遮住（softmax 全是 -inf 得到 NaN）。",
             f"{name} returns NaN or inf. Common causes: dividing by 0 (no eps in the RMSNorm denominator), the "
             f"square root of a negative number, or an attention row where every position is masked (softmax of "
             f"only -inf is NaN).")


def print_matrix(m: torch.Tensor) -> None:
    for i, row in enumerate(m.tolist()):
        print(f"  t{i}  [" + "  ".join(f"{v:7.4f}" for v in row) + "]")


def main() -> None:
    torch.manual_seed(42)
    d_model, num_heads, d_ff = 8, 2, 16
    layer = DecoderLayer(d_model, num_heads, d_ff)
    x = torch.randn(2, 4, d_model)  # (B, T, d_model)

    with torch.no_grad():
        normed = layer.norm1(x)  # (B, T, d_model)
        y = layer(x)  # (B, T, d_model)
        y_open = layer(x, causal=False)  # every token may see the future too
        x_changed = x.clone()
        x_changed[:, -1] += 1.0  # change only the last token
        y_changed = layer(x_changed)

    if tuple(normed.shape) != tuple(x.shape):
        fail(f"RMSNorm：输入 {tuple(x.shape)} → 输出 {tuple(normed.shape)}，形状应当不变",
             f"RMSNorm: input {tuple(x.shape)} -> output {tuple(normed.shape)}, the shape should not change")
    require_finite("RMSNorm", normed)
    rms = normed.pow(2).mean(dim=-1).sqrt()  # (B, T): 1 for every token while the weight is all ones
    print("RMSNorm 之后每个 token 的均方根 / root-mean-square of every token after RMSNorm:")
    print("  " + "  ".join(f"{v:.4f}" for v in rms.flatten().tolist()))
    if not torch.allclose(rms, torch.ones_like(rms), atol=1e-3):
        fail("RMSNorm 之后均方根应当约为 1（weight 全为 1 时）", "after RMSNorm the RMS should be about 1 (weight all ones)")

    if tuple(y.shape) != tuple(x.shape):
        fail(f"DecoderLayer：输入 {tuple(x.shape)} → 输出 {tuple(y.shape)}，形状应当不变",
             f"DecoderLayer: input {tuple(x.shape)} -> output {tuple(y.shape)}, the shape should not change")
    for value in (y, y_open, y_changed):
        require_finite("DecoderLayer", value)
    print(f"DecoderLayer(8, 2, 16): 输入 {x.shape} → 输出 {y.shape}  ✅")
    print()
    print("第一个序列的输出 / output of the first sequence, y[0]:")
    print_matrix(y[0])
    print()

    if not torch.allclose(y_changed[:, :-1], y[:, :-1], atol=1e-6):
        fail("改变最后一个 token 影响了前面的 token：因果 mask 没有生效",
             "changing the last token changed earlier tokens: the causal mask is not applied")
    if torch.allclose(y_open, y, atol=1e-6):
        fail("causal=False 与 causal=True 的输出相同：forward 要把 causal 传给注意力",
             "causal=False gives the same output as causal=True: forward must pass causal on to the attention")
    print("✅ decoder 通过 / passed: 改变最后一个 token 不影响前面的 token（因果），causal=False 时结果不同 / "
          "changing the last token leaves earlier tokens unchanged (causal), and causal=False differs")


if __name__ == "__main__":
    todos = missing_todos()
    if todos:
        report_missing(todos)
    try:
        main()
    except NotImplementedError as exc:  # e.g. a TODO reached only on a path the probes did not take
        m = TODO_RE.match(str(exc))
        if m is None:
            raise
        report_missing([(m.group("id"), str(exc)[m.end():].lstrip(": "))])
