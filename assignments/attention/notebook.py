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

# %%
import math

import torch
import torch.nn as nn

torch.set_printoptions(precision=4, sci_mode=False)

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


gen = torch.Generator().manual_seed(0)
n_queries, n_keys = 64, 16
dims = [4, 16, 64, 256, 1024]
rows = []
print(f"{'d':>5} | {'std raw':>7} {'√d':>6} {'std scaled':>10} | {'max w raw':>9} {'scaled':>6} | "
      f"{'H raw':>5} {'scaled':>6} | {'|J| raw':>7} {'scaled':>6}")
for d in dims:
    q = torch.randn(n_queries, 1, d, generator=gen)
    k = torch.randn(n_queries, n_keys, d, generator=gen)
    raw = (q @ k.transpose(-2, -1)).squeeze(1)      # (n_queries, n_keys)
    scaled = raw / math.sqrt(d)
    mw_r, h_r, j_r = softmax_stats(raw)
    mw_s, h_s, j_s = softmax_stats(scaled)
    rows.append((d, mw_r, mw_s, h_r, h_s))
    print(f"{d:5d} | {raw.std().item():7.2f} {math.sqrt(d):6.2f} {scaled.std().item():10.2f} | "
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
# Optional plot of the table above. Off by default so the graded run stays fast and writes nothing
# (matplotlib may build a font cache on first import). Set to True when running locally.
SHOW_PLOT = False
if SHOW_PLOT:
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    ds = [r[0] for r in rows]
    ax1.plot(ds, [r[1] for r in rows], "o-", label="raw q·k")
    ax1.plot(ds, [r[2] for r in rows], "o-", label="q·k / √d")
    ax1.set(xscale="log", xlabel="d", ylabel="mean max weight", title="softmax peak")
    ax2.plot(ds, [r[3] for r in rows], "o-", label="raw q·k")
    ax2.plot(ds, [r[4] for r in rows], "o-", label="q·k / √d")
    ax2.axhline(math.log(n_keys), ls="--", c="gray", label="uniform")
    ax2.set(xscale="log", xlabel="d", ylabel="entropy", title="softmax entropy")
    ax1.legend()
    ax2.legend()
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ## 6. 审计视角
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
# > 本节的代码练习稍后补充。 *Code for this section will be added later.*
