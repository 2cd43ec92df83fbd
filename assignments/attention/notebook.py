# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 注意力机制从零实现
# *Attention from scratch*
#
# “苹果”这个词该参考“吃”还是“手机”？注意力机制让序列里的每个 token 自己决定：从哪些位置收集信息、各收集多少。
# 本 notebook 从最朴素的点积注意力出发，一步步走到 GPT 中使用的因果多头注意力。
#
# *Each token decides for itself which positions to gather information from, and how much.
# We go step by step from plain dot-product attention to the causal multi-head attention used in GPT.*
#
# **你要完成的 / What you write**：三个标着 `TODO` 的代码单元 —— `causal_mask`、`scaled_dot_product_attention`、
# `split_heads`。其余代码都已给出，直接运行即可。
# *Three cells marked `TODO`; everything else is given and just runs.*
#
# **评分须知 / Grading notes**
# - 只有这三个函数（以及给出的 `merge_heads`、`MultiHeadAttention`）被评分；不要改函数名和参数。
#   *Only the functions are graded; keep their names and signatures.*
# - 评分时整个 notebook 会在沙箱里从头运行一遍：请保持每个单元快速、确定（固定随机种子），不要下载、不要写文件、不要用 `%` 魔法命令。
#   *The whole notebook is executed during grading: keep cells fast and deterministic; no downloads, no file writes, no `%magic`.*
# - 评分时会设置环境变量 `AUTOGRADER_GRADING`，这时训练和画图的单元（第 5–8 节）会自动跳过；在你自己的电脑上它们正常运行，
#   整个 notebook 在 CPU 上一分钟内跑完。
#   *During grading `AUTOGRADER_GRADING` is set and the training and plotting cells (sections 5–8) skip themselves;
#   on your own machine they run, and the whole notebook takes under a minute on a CPU.*
# - 每个 TODO 后面的 `grader.check(...)` 单元会在本地跑这个函数的公开检查（只需要 torch）；在终端里 `python check.py`
#   检查整个文件。评分时还有隐藏检查，`grader` 这几行在评分时被忽略。
#   *The `grader.check(...)` cell after each TODO runs that function's public checks here (torch only); `python
#   check.py` in a terminal checks the whole file. Grading adds hidden checks and ignores the `grader` lines.*

# %%
import math
import os

import torch
import torch.nn as nn

torch.set_printoptions(precision=4, sci_mode=False)

# Set by the grader: the heavy cells below (training, plots) skip themselves when it is.
GRADING = bool(os.environ.get("AUTOGRADER_GRADING"))

# %%
# 公开检查，来自作业文件夹里的 checker/ / the public checks, from checker/ in the assignment folder
from checker import Notebook
grader = Notebook()

# %% [markdown]
# ## 1. 不带参数的简化注意力
# *Simplified attention without trainable weights*
#
# 先看最简单的版本：3 个 token，每个是 6 维向量。token $i$ 和 token $j$ 的“相关程度”就用点积 $x_i \cdot x_j$ 衡量；
# 每一行做 softmax 后变成一组和为 1 的权重；token $i$ 的新表示（上下文向量）是所有 token 按这组权重的加权平均。
#
# *Relevance of token j to token i is the dot product; a softmax per row turns the scores into weights summing to 1;
# the new representation of token i is the weighted average of all tokens.*
#
# 与 RNN 不同，这里每个 token **直接**和所有位置交互，信息不需要一步步压缩传递，距离远近不影响传递质量。
# *Unlike an RNN, every token talks to every position directly; distance does not degrade the signal.*

# %%
# A toy input: 3 tokens, 6 features each.
inputs = torch.tensor([
    [0.43, 0.15, 0.89, 0.34, 0.66, 0.12],  # token A
    [0.55, 0.87, 0.66, 0.55, 0.12, 0.44],  # token B
    [0.78, 0.23, 0.11, 0.94, 0.33, 0.22],  # token C
])

scores = inputs @ inputs.T                  # (3, 3): scores[i, j] = x_i · x_j
weights = torch.softmax(scores, dim=-1)     # (3, 3): every row sums to 1
context = weights @ inputs                  # (3, 6): weighted average of the tokens

print("scores:\n", scores)
print("weights:\n", weights)
print("row sums:", weights.sum(dim=-1))
print("context shape:", tuple(context.shape))
print("context of token A:", context[0])

# %% [markdown]
# 观察：每个 token 与**自己**的点积通常最大，所以权重矩阵的对角线偏大 —— 这正是没有参数的版本的局限：
# “我想找什么”和“我能提供什么”用的是同一个向量。下一节用三个可学习的投影把这两种角色分开。
#
# *Each token matches itself best, because "what I look for" and "what I offer" are the same vector.
# The next step separates these roles with three learned projections.*

# %% [markdown]
# ## 2. 可训练的 Q / K / V
# *Trainable queries, keys and values*
#
# 用三个不同的线性层把同一个输入投影成三种“视角”：
#
# | | 含义 / meaning |
# |---|---|
# | **Q**（query，查询） | 我需要什么信息 / what this token is looking for |
# | **K**（key，键） | 我能提供什么 / what this token offers |
# | **V**（value，值） | 我实际携带的内容 / the content it passes on |
#
# $$\text{output}_i = \sum_j \operatorname{softmax}_j\!\left(\frac{Q_i \cdot K_j}{\sqrt{d}}\right) V_j$$
#
# 为什么除以 $\sqrt{d}$？第 5 节会用实验说明。先注意一个实现细节：为了同时支持单个序列 `(T, d)` 和批量 `(B, T, d)`，
# 转置要写成 `transpose(-2, -1)`（只交换最后两维），而不是 `.T`。
#
# *Why divide by √d? Section 5 measures it. Note the transpose: `transpose(-2, -1)` swaps only the last two dims,
# so the same code works for one sequence and for a batch; `.T` does not.*

# %%
class SelfAttention(nn.Module):
    """Single-head self-attention with learned projections (no mask yet)."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.W_q = nn.Linear(d_in, d_out, bias=False)
        self.W_k = nn.Linear(d_in, d_out, bias=False)
        self.W_v = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (..., T, d_in)
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)     # (..., T, d_out) each
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])  # (..., T, T)
        return torch.softmax(scores, dim=-1) @ v             # (..., T, d_out)


torch.manual_seed(123)
sa = SelfAttention(d_in=6, d_out=6)
with torch.no_grad():
    out_single = sa(inputs)               # (3, 6)
    out_batch = sa(inputs.unsqueeze(0))   # (1, 3, 6)
print("single:", tuple(inputs.shape), "->", tuple(out_single.shape))
print("batch: ", tuple(inputs.unsqueeze(0).shape), "->", tuple(out_batch.shape))
print("same numbers:", torch.allclose(out_single, out_batch[0]))

# %% [markdown]
# ## 3. 因果注意力与 mask
# *Causal attention and the mask*
#
# 语言模型是自回归的：生成第 $t$ 个 token 时，后面的 token 还不存在。训练时如果不遮住未来，模型等于先看答案再“预测”答案，
# 学不到真正的生成能力。做法：在 softmax **之前**，把未来位置（矩阵对角线以上）的分数设成 $-\infty$，
# softmax 之后这些位置的权重就**恰好**是 0，而每行仍然和为 1。
#
# *A language model generates left to right, so position i may only look at positions j ≤ i. Set the scores of
# future positions (above the diagonal) to −∞ before the softmax: their weights become exactly 0 and each row still sums to 1.*
#
# ```
#          t0    t1    t2    t3                     t0    t1    t2    t3
#   t0  [ s00  -inf  -inf  -inf ]   softmax   t0 [1.00  0.00  0.00  0.00]
#   t1  [ s10   s11  -inf  -inf ]   ------>   t1 [w10   w11   0.00  0.00]
#   t2  [ s20   s21   s22  -inf ]             t2 [w20   w21   w22   0.00]
#   t3  [ s30   s31   s32   s33 ]             t3 [w30   w31   w32   w33 ]
# ```
#
# 常见陷阱 / pitfalls：`diagonal=0` 会把对角线也遮住（第 0 行全是 $-\infty$ → NaN）；填 0 而不是 $-\infty$
# 并不能让权重变成 0；mask 要按当前序列长度生成，不能写死。
# *`diagonal=0` also hides the diagonal (row 0 becomes all −∞ → NaN); filling with 0 instead of −∞ does not zero the
# weight; build the mask for the current length.*
#
# ### TODO 1：`causal_mask`
# 返回形状 `[seq_len, seq_len]` 的 **bool** 张量，对角线**以上**为 `True`（要隐藏的未来位置），其余为 `False`。
# *Return a bool `[seq_len, seq_len]` tensor, `True` strictly above the diagonal.*

# %%
# @include attention.py: causal_mask

# %%
m = causal_mask(5)
print(m.dtype, tuple(m.shape))
print(m.int())
for i in range(5):
    visible = [j for j in range(5) if not m[i, j]]
    print(f"token {i} can see {visible}")

# %%
grader.check("causal_mask")

# %% [markdown]
# ### TODO 2：`scaled_dot_product_attention`
# 输入 `Q, K: [..., T, d_head]`、`V: [..., T, d_v]`，返回 `(output, weights)`：`output [..., T, d_v]`，`weights [..., T, T]`。
# 分数除以 $\sqrt{d_\text{head}}$；`causal=True` 时未来位置权重必须恰好为 0。`...` 可以是任意多个批维度。不要原地修改输入。
#
# *Inputs `Q, K: [..., T, d_head]`, `V: [..., T, d_v]`; return `(output, weights)` with shapes `[..., T, d_v]` and
# `[..., T, T]`. Scale by 1/√d_head; with `causal=True` future weights are exactly 0. Any leading batch dims. Do not modify the inputs.*

# %%
# @include attention.py: scaled_dot_product_attention

# %%
def show_weights(w: torch.Tensor) -> None:
    """Print a (T, T) weight matrix with t0..t{T-1} labels, two decimals."""
    labels = [f"t{i}" for i in range(w.shape[-1])]
    print("        " + "    ".join(labels))
    for label, row in zip(labels, w.tolist()):
        print(f"  {label}  [" + "  ".join(f"{x:.2f}" for x in row) + "]")


# The chapter's example (the same draws as run.py): seed 42, seq_len = 4, d_head = 4.
torch.manual_seed(42)
Q = torch.randn(4, 4)
K = torch.randn(4, 4)
V = torch.randn(4, 4)
output, weights = scaled_dot_product_attention(Q, K, V, causal=True)
print("output:", tuple(output.shape), " weights:", tuple(weights.shape))
show_weights(weights)
print("row sums:", weights.sum(dim=-1))
print("future weights all exactly 0:", bool((weights[causal_mask(4)] == 0).all()))

# %%
# Causal vs. non-causal on the toy tokens, using the projections learned in section 2 (untrained here).
with torch.no_grad():
    q, k, v = sa.W_q(inputs), sa.W_k(inputs), sa.W_v(inputs)   # (3, 6) each
    _, w_full = scaled_dot_product_attention(q, k, v, causal=False)
    _, w_causal = scaled_dot_product_attention(q, k, v, causal=True)
print("causal=False:")
show_weights(w_full)
print("causal=True:")
show_weights(w_causal)

# A batch works the same way: (B, T, d) in, (B, T, T) weights out.
Qb, Kb, Vb = torch.randn(2, 5, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 3)
out_b, w_b = scaled_dot_product_attention(Qb, Kb, Vb)
print("batched:", tuple(out_b.shape), tuple(w_b.shape))

# %%
grader.check("scaled_dot_product_attention")

# %% [markdown]
# ## 4. 多头注意力
# *Multi-head attention*
#
# 单头注意力在整个 `d_model` 维空间里只算一组权重。多头注意力把特征维切成 `num_heads` 份，每份（一个“头”）独立做注意力，
# 不同的头可以学到不同的关注模式（比如一个头看语法搭配，另一个头看语义相近）。头之间在拼接 + 输出投影 `W_o` 之前互不通信。
# GPT-2 small 有 12 个头，GPT-3 有 96 个。
#
# *Cut the features into `num_heads` slices; each head attends on its own slice; the heads are concatenated and mixed
# by `W_o`. GPT-2 small has 12 heads, GPT-3 has 96.*
#
# ```
# x [T, d_model=8] ──W_q/W_k/W_v──▶ [T, 8] ──split_heads(·, 2)──▶ [2, T, 4]   (head 0: features 0..3, head 1: 4..7)
#                                   attention per head ──▶ [2, T, 4]
#                                   merge_heads ──▶ [T, 8] ──W_o──▶ [T, 8]
# ```
#
# 投影矩阵仍是 `d_model × d_model` 的一个大矩阵（比每个头一个小矩阵更高效），切头只是对形状的重新排列：
# 先 `[..., T, d_model] → [..., T, H, d_head]`，再交换 `T` 与 `H` 两维。
#
# ### TODO 3：`split_heads`
# `[..., T, d_model] → [..., num_heads, T, d_model // num_heads]`，支持任意批维度；第 `h` 个头取特征
# `h*d_head … (h+1)*d_head-1`。
# *Head h holds features `h*d_head … (h+1)*d_head-1` of every token; any leading batch dims.*

# %%
# @include attention.py: split_heads

# %%
x_demo = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)   # (B=2, T=3, d_model=8)
heads = split_heads(x_demo, 2)
print("split:", tuple(x_demo.shape), "->", tuple(heads.shape))          # (2, 2, 3, 4)
print("batch 0, head 1, token 0:", heads[0, 1, 0].tolist())              # features 4..7 of token 0

# %%
grader.check("split_heads")

# %% [markdown]
# 下面是给出的代码：`merge_heads`（`split_heads` 的逆操作）和把这些部件组装起来的 `MultiHeadAttention`。
# 四个投影按 `W_q, W_k, W_v, W_o` 的顺序创建、都不带 bias —— 创建顺序决定了固定种子下的随机初始权重。
#
# *Given code: `merge_heads` (inverse of `split_heads`) and `MultiHeadAttention`. The projections are created in the
# order `W_q, W_k, W_v, W_o`, without bias: the order fixes the random initial weights under a seed.*

# %%
# @include attention.py: merge_heads, MultiHeadAttention

# %%
print("merge(split(x)) == x:", torch.equal(merge_heads(split_heads(x_demo, 2)), x_demo))

# The chapter's run (same draws as run.py): Q, K, V first, then the layer, then x.
torch.manual_seed(42)
Q, K, V = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)
mha = MultiHeadAttention(8, 2)
x = torch.randn(4, 8)
with torch.no_grad():
    y = mha(x)
print(f"MultiHeadAttention: {tuple(x.shape)} -> {tuple(y.shape)}")
with torch.no_grad():
    print("batched:", tuple(mha(torch.randn(3, 5, 8)).shape))

# What each head attends to: rebuild the per-head weights from the layer's own pieces.
with torch.no_grad():
    q = split_heads(mha.W_q(x), mha.num_heads)    # (2, 4, 4)
    k = split_heads(mha.W_k(x), mha.num_heads)
    v = split_heads(mha.W_v(x), mha.num_heads)
    _, head_weights = scaled_dot_product_attention(q, k, v)   # (2, 4, 4)
for h in range(mha.num_heads):
    print(f"head {h}:")
    show_weights(head_weights[h])

# %%
grader.check("MultiHeadAttention")

# %% [markdown]
# ## 5. 实验：为什么要除以 √d
# *Experiment: why divide by √d*
#
# 若 $q$、$k$ 的每个分量独立、均值 0、方差 1，则点积 $q\cdot k$ 是 $d$ 项之和，方差为 $d$，标准差为 $\sqrt d$。
# $d$ 越大，分数的量级越大，softmax 就越接近 one-hot：几乎所有权重压在一个位置上，其余位置的梯度接近 0，模型很难学习。
# 除以 $\sqrt d$ 把分数的标准差拉回到 1 左右。下面对每个 $d$ 抽 64 个查询、每个查询对 16 个键打分，比较缩放前后：
#
# *If the components of q and k are independent with mean 0 and variance 1, q·k has variance d. Large scores push
# the softmax towards one-hot and its gradient towards 0. Dividing by √d brings the spread back to about 1.
# For each d: 64 queries, 16 keys each; compare raw and scaled scores.*
#
# - `|q·k|` = 点积绝对值的平均（量级）/ mean magnitude of the raw dot product
# - `std` = 分数的标准差 / spread of the scores
# - `max w` = 每行最大权重的平均值（1 = one-hot，1/16 ≈ 0.06 = 均匀）/ mean largest weight per row
# - `H` = 每行权重的熵（最大 ln 16 ≈ 2.77 = 均匀，0 = one-hot）/ entropy of a row
# - `|J|` = softmax 雅可比矩阵的范数，梯度能传回多少 / norm of the softmax Jacobian: how much gradient gets back

# %%
def softmax_stats(scores: torch.Tensor) -> tuple[float, float, float]:
    """Mean max weight, mean entropy and mean Jacobian norm of softmax over the last dim."""
    w = torch.softmax(scores, dim=-1)                                   # (N, T)
    entropy = -(w * torch.log(w.clamp_min(1e-30))).sum(dim=-1)          # (N,)
    jac = torch.diag_embed(w) - w.unsqueeze(-1) * w.unsqueeze(-2)       # (N, T, T): d w / d scores
    return w.max(dim=-1).values.mean().item(), entropy.mean().item(), jac.norm(dim=(-2, -1)).mean().item()


n_queries, n_keys = 64, 16
dims = [4, 16, 64, 256, 1024]
rows = []
if not GRADING:  # like the pictures below, the table is skipped during grading
    gen = torch.Generator().manual_seed(0)
    print(f"{'d':>5} | {'|q·k|':>6} {'std raw':>7} {'√d':>6} {'std scaled':>10} | {'max w raw':>9} {'scaled':>6} | "
          f"{'H raw':>5} {'scaled':>6} | {'|J| raw':>7} {'scaled':>6}")
    for d in dims:
        q = torch.randn(n_queries, 1, d, generator=gen)
        k = torch.randn(n_queries, n_keys, d, generator=gen)
        raw = (q @ k.transpose(-2, -1)).squeeze(1)      # (n_queries, n_keys)
        scaled = raw / math.sqrt(d)
        mw_r, h_r, j_r = softmax_stats(raw)
        mw_s, h_s, j_s = softmax_stats(scaled)
        magnitude = raw.abs().mean().item()
        rows.append((d, mw_r, mw_s, h_r, h_s, magnitude, scaled.abs().mean().item()))
        print(f"{d:5d} | {magnitude:6.2f} {raw.std().item():7.2f} {math.sqrt(d):6.2f} {scaled.std().item():10.2f} | "
              f"{mw_r:9.2f} {mw_s:6.2f} | {h_r:5.2f} {h_s:6.2f} | {j_r:7.3f} {j_s:6.3f}")

# %% [markdown]
# 读表 / reading the table：未缩放时，分数的标准差随 $\sqrt d$ 增长，最大权重趋向 1、熵趋向 0、雅可比范数趋向 0（梯度消失）；
# 缩放后，这几列几乎不随 $d$ 变化。一个小例子：
#
# *Unscaled, the spread grows like √d, the largest weight heads for 1, entropy and Jacobian norm for 0 (vanishing
# gradient). Scaled, the columns barely change with d. A small example:*

# %%
for s in ([-1.0, 0.0, 1.0], [-8.0, 0.0, 8.0]):
    print(f"softmax({s}) = {[round(p, 4) for p in torch.softmax(torch.tensor(s), dim=-1).tolist()]}")

# %%
# Pictures of the table above, and a helper for every picture that follows. They are skipped during grading.
SAVE_PNG = False   # True: also save each picture as a PNG file next to this notebook


def finish(fig, name: str) -> None:
    """Show a figure inline; with SAVE_PNG also save it as <name>.png."""
    if SAVE_PNG:
        fig.savefig(f"{name}.png", dpi=110)
    plt.show()


def plot_maps(maps, titles, suptitle=None, labels=None):
    """Draw (T, T) attention maps side by side: rows = queries, columns = keys, with the values written in."""
    fig, axes = plt.subplots(1, len(maps), figsize=(3.1 * len(maps), 3.3), squeeze=False)
    for ax, w, title in zip(axes[0], maps, titles):
        w = torch.as_tensor(w).detach().float()
        T = w.shape[-1]
        ax.imshow(w.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
        names = labels or [f"t{i}" for i in range(T)]
        ax.set_xticks(range(T), names, fontsize=7, rotation=90 if labels else 0)
        ax.set_yticks(range(T), names, fontsize=7)
        ax.set_title(title, fontsize=9)
        if T <= 8:
            for i in range(T):
                for j in range(T):
                    ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=6,
                            color="black" if w[i, j] > 0.6 else "white")
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    return fig


if not GRADING:
    import matplotlib.pyplot as plt

    ds = [r[0] for r in rows]
    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(12, 3.4))
    ax0.plot(ds, [r[5] for r in rows], "o-", label="raw |q·k|")
    ax0.plot(ds, [math.sqrt(2 / math.pi) * math.sqrt(d) for d in ds], "--", c="gray", label="√(2/π)·√d")
    ax0.plot(ds, [r[6] for r in rows], "o-", label="|q·k| / √d")
    ax0.set(xscale="log", yscale="log", xlabel="d", ylabel="mean |score|", title="dot-product magnitude")
    ax1.plot(ds, [r[1] for r in rows], "o-", label="raw q·k")
    ax1.plot(ds, [r[2] for r in rows], "o-", label="q·k / √d")
    ax1.axhline(1 / n_keys, ls="--", c="gray", label="uniform")
    ax1.set(xscale="log", xlabel="d", ylabel="mean max weight", title="softmax peak")
    ax2.plot(ds, [r[3] for r in rows], "o-", label="raw q·k")
    ax2.plot(ds, [r[4] for r in rows], "o-", label="q·k / √d")
    ax2.axhline(math.log(n_keys), ls="--", c="gray", label="uniform")
    ax2.set(xscale="log", xlabel="d", ylabel="entropy (nats)", title="softmax entropy")
    for ax in (ax0, ax1, ax2):
        ax.legend(fontsize=8)
    fig.tight_layout()
    finish(fig, "sqrt_d_experiment")

# %% [markdown]
# **思考题（不计分）/ Question (ungraded)**
#
# 1. 如果把 $\sqrt d$ 换成 $d$（即 `raw / d`），$d = 1024$ 时最大权重和熵会怎样？为什么这同样不好？
#    可以把上面循环里的 `scaled = raw / math.sqrt(d)` 改掉再运行一遍。
#    *If you divide by d instead of √d, what happens to the max weight and the entropy at d = 1024, and why is that
#    bad too? Change `scaled = raw / math.sqrt(d)` above and rerun.*
# 2. 训练好的模型里，$q$、$k$ 的分量并不是独立的标准正态分布。$\sqrt d$ 在那时还“刚好”吗？它保证的是什么？
#    *In a trained model the components of q and k are not independent standard normals. Is √d still "exact"? What
#    does it guarantee?*

# %% [markdown]
# ## 6. 看图：你的注意力
# *Your attention, as pictures*
#
# 左边两张：你的 `scaled_dot_product_attention` 在章节 seed-42 例子上的权重，和期望的图案（讲义里打印的数字）。
# 右边：第 4 节里你的 `MultiHeadAttention(8, 2)` 每个头的权重。对角线以上（右上角，未来位置）必须全是 0。
# 在命令行里 `autograder check --plot` 会把同样的图存成 `attention_check.png`。
#
# *Left: your weights on the chapter's seed-42 example beside the expected pattern (the numbers printed in the
# handout). Right: the per-head weights of your `MultiHeadAttention(8, 2)` from section 4. Everything above the
# diagonal (the future) must be 0. `autograder check --plot` saves the same picture as `attention_check.png`.*

# %%
# The chapter's seed-42 weights as printed in the handout (two decimals).
EXPECTED_SEED42 = torch.tensor([[1.00, 0.00, 0.00, 0.00],
                                [0.93, 0.07, 0.00, 0.00],
                                [0.21, 0.46, 0.34, 0.00],
                                [0.19, 0.31, 0.13, 0.37]])

if not GRADING:
    torch.manual_seed(42)
    Q42, K42, V42 = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)
    _, yours42 = scaled_dot_product_attention(Q42, K42, V42, causal=True)
    print("largest difference from the printed numbers:", round((yours42 - EXPECTED_SEED42).abs().max().item(), 4),
          "(up to 0.005 is rounding)")
    fig = plot_maps([yours42, EXPECTED_SEED42, *head_weights],
                    ["your weights (seed 42)", "expected (seed 42)"]
                    + [f"your MHA: head {h}" for h in range(len(head_weights))],
                    suptitle="rows = queries, columns = keys; the upper right (future) must be 0")
    finish(fig, "attention_check")

# %% [markdown]
# ## 7. 在这里训练的一个极小模型（不是预训练的大模型）
# *A tiny model trained here (not a pretrained LLM)*
#
# 本章的讲义看的是一个真正预训练过的大语言模型的注意力。这份作业不能那样做：评分和你的电脑都不联网下载模型，而我们在软件包索引里
# 也没有找到把预训练 Transformer 权重直接装在安装包里、又能在 CPU 上几秒内跑完的小模型。所以这里的模型是**在 notebook 里现场
# 训练的玩具模型**：它很小、任务很简单，图案因此干净得多。
#
# 换成真正的预训练模型（例如 GPT-2 small：12 层 × 12 个头，词表是子词），你会看到：
#
# - 头很多，大多数头的图案**模糊、分散**，不像这里这样一眼看出分工；同一种功能常由好几个头重复承担。
# - 很多头把大量注意力放在**第一个 token**（或句号、换行等分隔符）上，即使它和意思无关 —— 所谓“注意力汇聚点”（attention sink），
#   相当于“没有要看的就看这里”。
# - 有清楚的“**前一个 token**”头，也有“**归纳头**”（induction head：看到 A B … A 时，去看上一次 A 后面的 B），它们多在中间层。
# - 注意力落在**子词**上：一个词被切成几块时，图案会在这几块之间分开，读图前要先看清分词。
#
# *The chapter looks at the attention of a real pretrained LLM. This assignment cannot: neither grading nor your
# machine downloads models, and we found no installable package that ships pretrained transformer weights inside it
# and runs in seconds on a CPU. So the model here is a **toy trained in this notebook**: tiny, on simple tasks, hence
# much cleaner patterns. In a real pretrained model (e.g. GPT-2 small: 12 layers × 12 heads, subword tokens) most
# heads are diffuse and functions are shared by several heads; many heads park attention on the first token or on
# delimiters (an "attention sink"); there are clear previous-token heads and, mostly in middle layers, induction
# heads (after A B … A, look at the B that followed the last A); and attention lands on subword pieces, so read the
# tokenisation before the picture.*
#
# 随机初始化的权重看不出什么规律。下面用**你自己的** `MultiHeadAttention` 搭一个极小的模型，在 CPU 上训练几秒钟，
# 任务的正确注意力图案是已知的：
#
# - **前一个 token**（previous token）：位置 $t$ 要输出位置 $t-1$ 的 token。正确的图案：紧贴对角线下方的一条斜线。
# - **复制开头**（copy the first token）：每个位置都要输出第 0 个 token。正确的图案：第一列。
#
# 模型只有一层注意力（2 个头）、一个残差连接和两个线性读出层。训练好之后，看看两个头是不是各自学会了一种图案。
#
# *A tiny model built on your own `MultiHeadAttention` (one layer, 2 heads, a residual and two linear read-outs),
# trained for a few seconds on two tasks whose right attention pattern is known: output the previous token (the
# line just below the diagonal) and copy the first token (the first column). Do the two heads split the work?*

# %%
VOCAB, SEQ, D_MODEL = 10, 8, 32


class ToyModel(nn.Module):
    """Token + position embeddings -> your MultiHeadAttention (+ residual) -> one read-out per task."""

    def __init__(self, vocab: int, seq_len: int, d_model: int, num_heads: int, outputs: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.attn = MultiHeadAttention(d_model, num_heads)
        self.heads_out = nn.ModuleList(nn.Linear(d_model, vocab) for _ in range(outputs))

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        # tokens: (B, T) integers -> (B, T, d_model)
        return self.tok(tokens) + self.pos(torch.arange(tokens.shape[-1]))

    def forward(self, tokens: torch.Tensor, e: torch.Tensor | None = None) -> list[torch.Tensor]:
        e = self.embed(tokens) if e is None else e            # (B, T, d_model); `e`: embeddings given directly
        h = e + self.attn(e)                                  # (B, T, d_model)
        return [out(h) for out in self.heads_out]             # each (B, T, vocab)


def attention_maps(model: ToyModel, tokens: torch.Tensor, e: torch.Tensor | None = None) -> torch.Tensor:
    """Per-head weights of the model's attention layer: (B, T) tokens (or their embeddings e) -> (B, H, T, T)."""
    layer, e = model.attn, model.embed(tokens) if e is None else e
    q = split_heads(layer.W_q(e), layer.num_heads)
    k = split_heads(layer.W_k(e), layer.num_heads)
    v = split_heads(layer.W_v(e), layer.num_heads)
    return scaled_dot_product_attention(q, k, v, causal=True)[1]


def train(model: nn.Module, make_batch, loss_fn, steps: int, lr: float = 1e-2) -> list[float]:
    """Adam on fresh random batches; returns the loss of every step."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small trains fastest on one thread
    try:
        for _ in range(steps):
            loss = loss_fn(model, *make_batch())
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    return losses


def toy_batch(n: int = 64):
    return (torch.randint(0, VOCAB, (n, SEQ), generator=toy_gen),)


def toy_loss(model, tokens):
    previous, first = model(tokens)
    ce = nn.functional.cross_entropy
    loss_prev = ce(previous[:, 1:].reshape(-1, VOCAB), tokens[:, :-1].reshape(-1))   # position t -> token t-1
    loss_first = ce(first.reshape(-1, VOCAB), tokens[:, :1].expand(-1, SEQ).reshape(-1))  # every t -> token 0
    return loss_prev + loss_first


if not GRADING:
    import time

    torch.manual_seed(0)
    toy_gen = torch.Generator().manual_seed(0)
    toy = ToyModel(VOCAB, SEQ, D_MODEL, num_heads=2, outputs=2)
    started = time.perf_counter()
    losses = train(toy, toy_batch, toy_loss, steps=120)
    print(f"trained 120 steps in {time.perf_counter() - started:.1f} s; loss {losses[0]:.2f} -> {losses[-1]:.4f}")

    with torch.no_grad():
        test_tokens = toy_batch(256)[0]
        maps = attention_maps(toy, test_tokens).mean(dim=0)          # (H, T, T), averaged over the batch
        previous, first = toy(test_tokens)
    print("accuracy: previous token", (previous[:, 1:].argmax(-1) == test_tokens[:, :-1]).float().mean().item(),
          "| first token", (first.argmax(-1) == test_tokens[:, :1]).float().mean().item())
    print(f"{'head':>4} | {'weight on t-1':>13} | {'weight on t0':>12}")
    for h in range(maps.shape[0]):
        print(f"{h:4d} | {maps[h].diagonal(-1).mean().item():13.2f} | {maps[h, 2:, 0].mean().item():12.2f}")

    ideal_prev = torch.diag(torch.ones(SEQ - 1), -1)
    ideal_prev[0, 0] = 1.0
    ideal_first = torch.zeros(SEQ, SEQ)
    ideal_first[:, 0] = 1.0
    fig = plot_maps([maps[0], maps[1], ideal_prev, ideal_first],
                    ["trained head 0", "trained head 1", "ideal: previous token", "ideal: first token"],
                    suptitle="your MultiHeadAttention after a few seconds of training (mean over 256 sequences)")
    finish(fig, "trained_heads")

# %% [markdown]
# 哪个头学会了哪种图案由随机初始化决定；重要的是两个头**分了工**。把 `num_heads=2` 改成 1 再试试：一个头要同时完成两项任务，会发生什么？
#
# *Which head takes which task depends on the initialisation; what matters is that they split the work. Try
# `num_heads=1`: what happens when one head must do both?*

# %% [markdown]
# ## 8. 审计视角
# *Audit lens*
#
# 注意力权重告诉我们模型“在看哪里”，这是审计模型可解释性的一项基本功。
# *Attention weights show where the model "looks": a basic tool when auditing a model.*
#
# 1. **可解释性证据 / Explainability evidence**：监管或客户可能要求说明“模型为什么做出这个决定”（例如中国的算法备案需要可解释性说明，
#    金融、医疗场景尤甚）。注意力权重能展示输出时关注了输入的哪些部分 —— 它是证据之一，但不是完整的因果解释。
#    *Regulators may ask why a model decided something; attention weights show which inputs it attended to —
#    one piece of evidence, not a full causal explanation.*
# 2. **偏见 / Bias**：注意力本身只是按数据学到的模式。若某些群体在训练数据里很少出现，模型可能学会系统性地忽略相关 token。
#    审计时可以统计：某类 token 在大量样本中是否总是只得到很小的权重。
#    *If some group is rare in the training data, the model may learn to ignore its tokens; check whether a kind of
#    token consistently receives little weight across many samples.*
# 3. **提示词注入 / Prompt injection**：因果 mask 只限制“不看未来”，并不过滤内容；藏在输入里的恶意指令同样会被忠实地关注。
#    可以用对抗输入（如“忽略之前的指令……”）测试，观察这些 token 是否吸走了大量注意力。
#    *The causal mask hides the future, not bad content; test with injected instructions and see whether those
#    tokens draw a large share of the attention.*
# 4. **审计日志 / Audit logs**：生产环境可为每次推理记录注意力分布的摘要（如每个 token 的最大注意力值、注意力方差），
#    出现争议时用于追溯。
#    *In production, log a per-request summary of the attention (max weight, variance per token) for later tracing.*
#
# 下面的工具来自作业文件夹里的 `audit.py`（模块形式可以直接 `from audit import token_stats, ...`），这里原样放进 notebook：
#
# | 函数 / function | 作用 / what it gives |
# |---|---|
# | `token_stats(weights)` | 每个 token 的熵、最大权重、方差、收到的注意力 / per-token entropy, max weight, variance, attention received |
# | `ignored_tokens(weights, threshold)` | 一批输入里几乎没人关注的位置 / positions almost nobody attends to across a batch |
# | `attention_share(weights, positions)` | 某个 query 的注意力落在给定位置上的份额 / share of a query's attention on given positions |
# | `AuditLog(target).record(weights, ...)` | 每次推理写一行 JSON 的审计日志 / an audit log, one JSON line per inference |
#
# *The tools come from `audit.py` in your assignment folder (module form: `from audit import ...`); they are copied
# here as they are.*

# %%
import io
import json
import time
from pathlib import Path

# %% nbgrader={"grade": false, "grade_id": "audit_tools", "locked": true, "schema_version": 3, "solution": false}
# @include audit.py: _check_weights, _visible, attention_received, token_stats, ignored_tokens, attention_share, summarize, AuditLog, read_log, _is_file

# %% [markdown]
# ### 8.1 每个 token 的统计量
# *Per-token statistics*
#
# 对 seed-42 例子的权重：第 0 行只能看自己（熵 0、最大权重 1）；越往后能看的位置越多，熵一般越大。`received` 是每个 token
# **收到**的注意力（按能看到它的 query 数平均）。在第 7 节训练好的模型上，“复制开头”的头把几乎所有注意力都给了第 0 个位置，
# 于是其余位置都被它忽略了；而最后一个位置只有它自己能看到，它自己又去看前一个 token，所以两个头都不看它。
# 被忽略本身不一定是错：审计时要问的是，被忽略的是不是**本该**被看到的信息。
#
# *Row 0 can only see itself (entropy 0, max weight 1); later rows see more and usually spread more. `received` is
# the attention each token gets. In the trained model of section 7, the copy-the-first-token head gives almost
# everything to position 0, so it ignores every other position; the last position is seen only by itself, which
# looks at the previous token, so both heads ignore it. Being ignored is not wrong in itself: the audit question
# is whether information that should count is being ignored.*

# %%
if not GRADING:
    stats = token_stats(yours42)
    print("seed-42 weights, per token:")
    print(f"{'token':>5} | {'entropy':>7} {'max w':>6} {'variance':>8} | {'received':>8}")
    for t in range(4):
        print(f"{'t' + str(t):>5} | {stats['entropy'][t]:7.3f} {stats['max_weight'][t]:6.3f} "
              f"{stats['variance'][t]:8.4f} | {stats['received'][t]:8.3f}")

    with torch.no_grad():
        batch_maps = attention_maps(toy, toy_batch(256)[0])       # (256, 2, T, T)
    for h in range(batch_maps.shape[1]):
        ignored = ignored_tokens(batch_maps[:, h], threshold=0.05)
        print(f"trained toy model, head {h}: ignored positions {torch.nonzero(ignored).flatten().tolist()}")
    print("both heads together:", torch.nonzero(ignored_tokens(batch_maps, threshold=0.05)).flatten().tolist())

# %% [markdown]
# ### 8.2 练习：注入的指令
# *Exercise: an injected instruction*
#
# 再训练一个小模型（同样用你的 `MultiHeadAttention`，为了看得清楚只用 1 个头）。输入的第 0 个位置是**系统指令**
# （`<summarise>`、`<translate>`、`<classify>`），中间是**用户文本**，最后一个位置 `<answer>` 输出模型要执行的指令。
# 训练数据里，用户文本中有时也会出现一条指令，而且**后出现的指令优先**——很多聊天模型也有类似的倾向。
#
# 然后我们在用户文本里藏一条 `<reveal_secret>`，看看：模型的回答变了吗？`<answer>` 的注意力去了哪里？审计日志能不能发现？
#
# *A second tiny model (your `MultiHeadAttention` again, one head for clarity): position 0 holds the system
# instruction, then user text, and the last position `<answer>` outputs the instruction to carry out. In training,
# user text sometimes holds an instruction too, and the later one wins. Then we hide `<reveal_secret>` in the user
# text: does the answer change, where does `<answer>` look, and does the audit log notice?*

# %%
WORDS = ["the", "report", "data", "users", "price", "city", "today", "rain", "book", "plan", "note", "team"]
COMMANDS = ["<summarise>", "<translate>", "<classify>", "<reveal_secret>"]
NAMES = WORDS + COMMANDS + ["<answer>"]
CMD0, ANSWER, SEQ_F = len(WORDS), len(NAMES) - 1, 10
SECRET = CMD0 + COMMANDS.index("<reveal_secret>")
USER = list(range(1, SEQ_F - 1))          # the untrusted positions: the user text


def request_batch(n: int = 64, gen=None):
    """System instruction at 0 (never <reveal_secret>), user words, <answer> last; half of the requests also
    carry an instruction inside the user text, which then wins. Returns (tokens (n, T), target (n,))."""
    tokens = torch.randint(0, len(WORDS), (n, SEQ_F), generator=gen)
    system = torch.randint(0, len(COMMANDS) - 1, (n,), generator=gen)
    tokens[:, 0], tokens[:, -1] = CMD0 + system, ANSWER
    inner = torch.randint(0, len(COMMANDS), (n,), generator=gen)
    where = torch.randint(1, SEQ_F - 1, (n,), generator=gen)
    has = torch.rand(n, generator=gen) < 0.5
    tokens[has, where[has]] = CMD0 + inner[has]
    return tokens, torch.where(has, inner, system)


def follower_loss(model, tokens, target):
    (logits,) = model(tokens)
    return nn.functional.cross_entropy(logits[:, -1, :len(COMMANDS)], target)


def answer_of(model, tokens) -> str:
    with torch.no_grad():
        (logits,) = model(tokens)
    return COMMANDS[int(logits[..., -1, :len(COMMANDS)].argmax())]


if not GRADING:
    torch.manual_seed(1)
    follow_gen = torch.Generator().manual_seed(1)
    follower = ToyModel(len(NAMES), SEQ_F, D_MODEL, num_heads=1, outputs=1)
    started = time.perf_counter()
    losses = train(follower, lambda: request_batch(64, follow_gen), follower_loss, steps=120)
    print(f"trained 120 steps in {time.perf_counter() - started:.1f} s; loss {losses[0]:.2f} -> {losses[-1]:.4f}")

    from matplotlib.patches import Patch

    INJECT_AT = 5                                      # exercise: try other positions 1..8
    clean, _ = request_batch(1, torch.Generator().manual_seed(7))
    clean = clean[0]
    clean[1:-1] = torch.randint(0, len(WORDS), (SEQ_F - 2,), generator=torch.Generator().manual_seed(8))
    injected = clean.clone()
    injected[INJECT_AT] = SECRET
    fig, axes = plt.subplots(1, 2, figsize=(11, 3), sharey=True)
    for ax, tokens, name in zip(axes, (clean, injected), ("clean request", "injected request")):
        with torch.no_grad():
            w = attention_maps(follower, tokens[None])[0]            # (H, T, T)
        share = attention_share(w, USER).max().item()
        ax.bar(range(SEQ_F), w[:, -1].mean(0).numpy(), color=["#4c72b0" if i in USER else "#dd8452" for i in range(SEQ_F)])
        ax.set_xticks(range(SEQ_F), [NAMES[t] for t in tokens], rotation=60, fontsize=8)
        ax.set_title(f"{name}: answer = {answer_of(follower, tokens)}, user share {share:.2f}", fontsize=9)
    axes[0].set_ylabel("attention of <answer>")
    axes[1].legend(handles=[Patch(color="#dd8452", label="system / <answer>"), Patch(color="#4c72b0", label="user text")],
                   fontsize=8, loc="upper left")
    fig.tight_layout()
    finish(fig, "injection")

# %% [markdown]
# 现在模拟一段更真实的流量，并把每次推理记进审计日志（这里写进内存里的 `io.StringIO()`；生产环境里换成文件路径，例如
# `AuditLog("audit.jsonl")`）。90 个请求分三类，各 30 个：普通请求；用户**正当地**在文本里写了一条指令（如 `<translate>`）；
# 被注入了 `<reveal_secret>`。真实的指令和注入很少像训练数据那样整整齐齐：这里把指令 token 的嵌入和一个普通词的嵌入按比例
# `strength`（0.2–1）混合（措辞含糊、被改写的指令），再给所有嵌入加一点噪声。每条记录是一行 JSON：每个 token 的熵、最大权重、
# 方差、收到的注意力，以及我们附加的元数据（请求编号、类别、回答、用户区的注意力份额）。
#
# *A more realistic traffic, logged (in memory here; give a path such as `AuditLog("audit.jsonl")` in production):
# 90 requests, 30 of each kind: plain; a user's legitimate instruction in the text (e.g. `<translate>`); an injected
# `<reveal_secret>`. Real instructions and injections are rarely as clean as the training data: the instruction
# token's embedding is blended with an ordinary word's by `strength` (0.2–1: vague or reworded instructions), and
# every embedding gets a little noise. One JSON line per request: per-token entropy, max weight, variance, attention
# received, plus our metadata (request id, kind, answer, user share).*

# %%
KINDS = ("plain", "legit", "injected")


def blended_request(kind: str, gen) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens (T,), embeddings (1, T, d_model)) of one request of `kind`, drawn from `gen`."""
    tokens, _ = request_batch(1, gen)
    tokens = tokens[0]
    tokens[1:-1] = torch.randint(0, len(WORDS), (SEQ_F - 2,), generator=gen)          # plain user text
    where = int(torch.randint(1, SEQ_F - 1, (1,), generator=gen))
    command = CMD0 + int(torch.randint(0, len(COMMANDS) - 1, (1,), generator=gen)) if kind == "legit" else SECRET
    strength = float(0.2 + 0.8 * torch.rand(1, generator=gen))
    with torch.no_grad():
        e = follower.embed(tokens[None]).clone()                                       # (1, T, d_model)
        if kind != "plain":
            word = follower.tok.weight[tokens[where]]
            e[0, where] = strength * follower.tok.weight[command] + (1 - strength) * word + follower.pos.weight[where]
            tokens[where] = command
        e += 0.3 * torch.randn(e.shape, generator=gen)
    return tokens, e


if not GRADING:
    log = AuditLog(io.StringIO())
    traffic = torch.Generator().manual_seed(3)
    for i in range(90):
        kind = KINDS[i % 3]
        tokens, e = blended_request(kind, traffic)
        with torch.no_grad():
            w = attention_maps(follower, tokens[None], e)[0]                          # (H, T, T)
            (logits,) = follower(tokens[None], e)
        log.record(w, tokens=[NAMES[t] for t in tokens], request=f"r{i:02d}", kind=kind,
                   answer=COMMANDS[int(logits[0, -1, :len(COMMANDS)].argmax())],
                   user_share=round(attention_share(w, USER).max().item(), 4))

    first_line = log.stream.getvalue().splitlines()[0]
    print("one line of the log:", first_line[:300], "...")
    records = read_log(log.stream)
    print(f"{len(records)} records")
    for kind in KINDS:
        shares = sorted(r["user_share"] for r in records if r["kind"] == kind)
        print(f"{kind:>8}: user share quartiles {[round(shares[int(q * (len(shares) - 1))], 2) for q in (0, .25, .5, .75, 1)]}")

# %%
# Exercise (ungraded) / 练习（不计分）: choose ALERT_SHARE from the table below, and improve `alert` if you can.
ALERT_SHARE = 0.5


def alert(record: dict) -> bool:
    """Flag a request whose <answer> token put more than ALERT_SHARE of its attention on the user text."""
    return record["user_share"] > ALERT_SHARE


if not GRADING:
    print(f"{'threshold':>9} | {'injections caught':>17} | {'clean requests flagged':>22}")
    for threshold in (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99):
        caught = sum(r["user_share"] > threshold for r in records if r["kind"] == "injected")
        false = sum(r["user_share"] > threshold for r in records if r["kind"] != "injected")
        print(f"{threshold:9.2f} | {caught:>10} of 30 | {false:>15} of 60")
    flagged = [r for r in records if alert(r)]
    print(f"ALERT_SHARE = {ALERT_SHARE}: {len(flagged)} flagged, "
          f"{sum(r['kind'] == 'injected' for r in flagged)} of them injected")
    print("answered <reveal_secret>:", sum(r["answer"] == "<reveal_secret>" for r in records),
          "requests, of which injected:", sum(r["answer"] == "<reveal_secret>" and r["kind"] == "injected" for r in records))

# %% [markdown]
# **练习（不计分）/ Exercise (ungraded)**
#
# 1. 看上面三类请求的 `user share` 分位数和阈值表：没有一个阈值能把注入和干净请求完全分开。假设漏掉一次注入的代价是
#    一次误报的 10 倍，`ALERT_SHARE` 取多少总代价最小？用表里的数字说明你的选择；代价比改成 1:1 时呢？
#    *Look at the quartiles of `user share` per kind and at the threshold table: no threshold separates injections
#    from clean requests. If a missed injection costs 10 times a false alarm, which `ALERT_SHARE` costs least? Justify
#    it with the table's numbers; and with a 1:1 cost?*
# 2. 把 `INJECT_AT` 改成别的位置，或者注入一个普通指令（如 `<translate>`）而不是 `<reveal_secret>`：模型会照做吗？`alert` 能区分
#    “用户正常地换了个指令”和“恶意注入”吗？只看注意力够吗？
#    *Move `INJECT_AT`, or inject an ordinary instruction such as `<translate>`: does the model obey? Can `alert`
#    tell a user's legitimate instruction from a malicious one? Is attention alone enough?*
# 3. 审计日志里还记录了每个 token 的熵和方差。写一条不依赖 `user_share` 的规则（例如用 `<answer>` 一行的 `max_weight` 或
#    `entropy`），比较两条规则的结果。
#    *The log also holds per-token entropy and variance. Write a rule that does not use `user_share` (for example
#    the `max_weight` or `entropy` of the `<answer>` row) and compare the two rules.*
#
# 注意力告诉我们模型**看了哪里**，不等于它**为什么**这样做；它是审计证据的一部分，不是全部。
# *Attention tells us where the model looked, not why: one piece of audit evidence, not all of it.*
