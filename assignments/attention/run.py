"""
Run the chapter's example with your attention.py / 用你的 attention.py 运行本章示例。

    python run.py

seed = 42, seq_len = 4, d_head = 4, then MultiHeadAttention(d_model=8, num_heads=2).
The random draws happen in a fixed order (Q, K, V, the layer weights, x): change the order and
every number changes. / 随机数的抽取顺序是固定的（Q、K、V、层的权重、x），顺序一变，所有数字都会变。
"""
import os
import re
import sys

# Import attention.py from this script's own folder, wherever the script is started from.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:  # a console that cannot print ✅ or Chinese should not crash the run
    sys.stdout.reconfigure(errors="replace")
except (AttributeError, ValueError):
    pass

import torch

from attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention, split_heads

TODO_RE = re.compile(r"^TODO\((?P<id>[A-Za-z_][A-Za-z0-9_]*)\)")


def missing_todos() -> list[tuple[str, str]]:
    """Call each TODO function once on a tiny input; collect (id, hint) of the unfinished ones."""
    probes = [
        lambda: causal_mask(2),
        lambda: scaled_dot_product_attention(torch.ones(2, 2), torch.ones(2, 2), torch.ones(2, 2)),
        lambda: split_heads(torch.ones(2, 4), 2),
    ]
    found: dict[str, str] = {}
    for probe in probes:
        try:
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
    print(f"   请在 attention.py 里完成 {names}，然后再运行 python run.py。")
    print(f"   Fill in {names} in attention.py, then run python run.py again.")
    sys.exit(1)


def print_weights(weights: torch.Tensor) -> None:
    T = weights.shape[-1]
    labels = [f"t{i}" for i in range(T)]
    print("        " + "    ".join(labels))
    for i, row in enumerate(weights.tolist()):
        print(f"  {labels[i]}  [" + "  ".join(f"{w:4.2f}" for w in row) + "]")


def fail(zh: str, en: str) -> None:
    """Say what is wrong, once in each language (one language per line), and stop."""
    print(f"❌ {zh}")
    print(f"   {en}")
    sys.exit(1)


def explain_not_finite(weights: torch.Tensor, seq_len: int) -> None:
    """NaN or inf in the weights: say where, and the likely cause, before any other check misreads them."""
    bad = [i for i in range(seq_len) if not torch.isfinite(weights[i]).all()]
    rows = ", ".join(f"t{i}" for i in bad)
    try:
        hidden_rows = [i for i, row in enumerate(causal_mask(seq_len).tolist()) if all(row)]
    except Exception:  # causal_mask itself is broken: the general explanation below still holds
        hidden_rows = []
    if bad and set(bad) <= set(hidden_rows):
        fail(f"权重里有 NaN：第 {rows} 行（查询）的每一个键都被 mask 遮住了。一行全是 -inf 时，softmax 算的是 0/0，"
             f"结果是 NaN。请检查 causal_mask：对角线（每个 token 自己）必须保留，只有对角线以上（严格上三角）才是 "
             f"True，例如 torch.triu(..., diagonal=1)。",
             f"NaN in the weights: in row {rows} (query) every key is masked. softmax over a row of only -inf is "
             f"0/0, i.e. NaN. Check causal_mask: it must keep the diagonal (each token sees itself) and be True only "
             f"strictly above it, e.g. torch.triu(..., diagonal=1).")
    fail(f"权重里有 NaN 或 inf（第 {rows} 行）。常见原因：把 mask 乘以 -inf（0 * -inf = NaN）、除以 0，或者某一行"
         f"所有位置都被遮住。请用 masked_fill 把未来位置设成 -inf，并确认每一行至少保留一个位置。",
         f"NaN or inf in the weights (row {rows}). Common causes: multiplying the mask by -inf (0 * -inf = NaN), "
         f"dividing by 0, or a row where every position is masked. Use masked_fill to set the future positions to "
         f"-inf, and make sure every row keeps at least one position.")


def main() -> None:
    torch.manual_seed(42)
    seq_len, d_head = 4, 4
    Q = torch.randn(seq_len, d_head)
    K = torch.randn(seq_len, d_head)
    V = torch.randn(seq_len, d_head)

    output, weights = scaled_dot_product_attention(Q, K, V, causal=True)

    print("注意力权重矩阵（因果 mask 生效）/ Attention weights (causal mask applied):")
    print_weights(weights)
    print()

    if tuple(weights.shape) != (seq_len, seq_len) or tuple(output.shape) != (seq_len, d_head):
        fail(f"形状不对：output 是 {tuple(output.shape)}，weights 是 {tuple(weights.shape)}；应为 {(seq_len, d_head)} 和 "
             f"{(seq_len, seq_len)}",
             f"wrong shapes: output {tuple(output.shape)}, weights {tuple(weights.shape)}; expected "
             f"{(seq_len, d_head)} and {(seq_len, seq_len)}")
    if not torch.isfinite(weights).all():  # NaN fails every comparison below, so it would be misexplained there
        explain_not_finite(weights, seq_len)
    future = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1)
    if not torch.all(weights[future] == 0) and weights[future].abs().max() < 1e-3:
        fail("未来位置的权重很小，但不是恰好 0：填充未来位置的值不够小。请用 float('-inf') 填充。",
             "the weights of future positions are tiny but not exactly 0: the value that fills them is not low "
             "enough. Fill them with float('-inf').")
    if not torch.all(weights[future] == 0):
        fail("未来位置（对角线以上）的权重不全为 0：mask 没有遮住未来，或者遮错了位置",
             "weights of future positions (above the diagonal) are not all 0: the mask does not hide the future, "
             "or hides the wrong positions")
    if not torch.allclose(weights.sum(dim=-1), torch.ones(seq_len), atol=1e-5):
        fail("每行权重之和不是 1：softmax 要沿最后一维（对每个查询的所有键）做",
             "the rows of the weights do not sum to 1: softmax must run over the last dim (all keys of each query)")

    mha = MultiHeadAttention(8, 2)
    x = torch.randn(4, 8)
    y = mha(x)
    if y.shape != x.shape:
        fail(f"MultiHeadAttention：输入 {tuple(x.shape)} → 输出 {tuple(y.shape)}，形状应当不变",
             f"MultiHeadAttention: input {tuple(x.shape)} -> output {tuple(y.shape)}, the shape should not change")
    print(f"MultiHeadAttention: 输入 {x.shape} → 输出 {y.shape}  ✅")
    print()
    print("✅ attention 通过 / passed: 上三角（未来位置）权重全为 0，因果 mask 生效 / "
          "future weights are all 0, the causal mask works")


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
