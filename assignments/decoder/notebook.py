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
# # Transformer Decoder 层：RMSNorm、SwiGLU 与预归一化残差
# *A Transformer decoder layer: RMSNorm, SwiGLU and pre-norm residuals*
#
# 上一章的注意力让 token 之间交换信息，但它只会“加权平均”：每个输出都是若干 value 的凸组合，本身不产生新的非线性特征。
# 一个完整的 Transformer 层还需要两样东西：一个逐 token 做非线性变换的 **MLP**（这里是 SwiGLU），以及让每个子层的输入保持稳定尺度的
# **归一化**（这里是 RMSNorm）。把三者用**预归一化残差**接起来，就是 Llama、Qwen、Mistral 等现代大模型里反复堆叠的那一层。
#
# *Attention lets tokens exchange information, but only by weighted averaging. A full Transformer layer adds a per-token
# non-linear **MLP** (SwiGLU here) and a **normalisation** that keeps every sub-layer's input at a steady scale
# (RMSNorm here), wired together with **pre-norm residuals**: the layer that Llama, Qwen and Mistral stack dozens of times.*
#
# **你要完成的 / What you write**：三个标着 `TODO` 的代码单元 —— `rms_norm`、`SwiGLU.forward`、`DecoderLayer.forward`。
# 第一章的注意力、`RMSNorm` 和各个 `__init__` 都已给出，直接运行即可。
# *Three cells marked `TODO`; chapter one's attention, `RMSNorm` and the `__init__` methods are given and just run.*
#
# **评分须知 / Grading notes**
# - 只有这三个部分被评分；不要改函数名、类名、参数和子模块的名字（评分时会按名字注入权重，如 `norm1.weight`、`mlp.W_gate.weight`）。
#   *Only these three parts are graded; keep every name: the grader injects weights by name.*
# - 评分时整个 notebook 会在沙箱里从头运行一遍：请保持每个单元快速、确定（固定随机种子），不要下载、不要写文件、不要用 `%` 魔法命令。
#   *The whole notebook runs during grading: keep cells fast and deterministic; no downloads, no file writes, no `%magic`.*
# - 评分时会设置环境变量 `AUTOGRADER_GRADING`，第 6 节的小实验会自动跳过；整个 notebook 在 CPU 上几秒钟就能跑完。
#   *During grading `AUTOGRADER_GRADING` is set and the experiment of section 6 skips itself; the notebook runs in seconds on a CPU.*
# - 每个 TODO 后面的 `grader.check(...)` 单元会在本地跑这个部分的公开检查（只需要 torch）；在终端里 `python check.py`
#   检查整个文件。评分时还有隐藏检查，`grader` 这几行在评分时被忽略。
#   *The `grader.check(...)` cell after each TODO runs that part's public checks here (torch only); `python check.py`
#   in a terminal checks the whole file. Grading adds hidden checks and ignores the `grader` lines.*

# %%
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_printoptions(precision=4, sci_mode=False)

# Set by the grader: the experiment of section 6 skips itself when it is.
GRADING = bool(os.environ.get("AUTOGRADER_GRADING"))

# %%
# 公开检查，来自作业文件夹里的 checker/ / the public checks, from checker/ in the assignment folder
from checker import Notebook
grader = Notebook()

# %% [markdown]
# ## 1. 给出的代码：第一章的注意力
# *Given: the attention of chapter one*
#
# 这是第一章完成的因果多头注意力，原样给出。唯一的变化：`MultiHeadAttention.forward(x, causal=True)` 多了一个 `causal` 参数，
# `causal=False` 时每个位置也能看到未来（默认仍是因果的）。四个投影 `W_q, W_k, W_v, W_o` 按这个顺序创建、都不带 bias。
#
# *Chapter one's causal multi-head attention, as it was, with one change: `forward(x, causal=True)` takes a `causal`
# argument (`causal=False` lets every position see the future too). `W_q, W_k, W_v, W_o` are created in that order, without bias.*

# %%
# @include decoder.py: causal_mask, scaled_dot_product_attention, split_heads, merge_heads, MultiHeadAttention

# %%
torch.manual_seed(0)
mha_demo = MultiHeadAttention(8, 2)
x_demo = torch.randn(5, 8)                              # (T=5, d_model=8)
with torch.no_grad():
    print("MultiHeadAttention(8, 2):", tuple(x_demo.shape), "->", tuple(mha_demo(x_demo).shape))
    x_edit = x_demo.clone()
    x_edit[0] += 1.0                                    # change only the first token
    moved = (mha_demo(x_edit) - mha_demo(x_demo)).abs().amax(dim=-1)
print("changing token 0 moves the outputs of tokens:", [t for t in range(5) if moved[t] > 1e-6])

# %% [markdown]
# 改变第 0 个 token，**所有**位置的输出都变了：注意力正是 token 之间交换信息的地方。记住这个结果，第 3 节的 MLP 会截然不同。
#
# *Changing token 0 moves the output of every position: attention is where tokens exchange information.
# Keep this in mind: the MLP of section 3 behaves very differently.*

# %% [markdown]
# ## 2. RMSNorm
#
# 残差流里的向量在一层层相加之后，尺度会漂移：有的 token 越来越大，有的很小。每个子层如果直接读取它，就得同时应付各种尺度。
# 归一化把每个 token 向量先缩放到一个固定尺度，再交给子层。
#
# *Along the residual stream, vectors drift in scale as layer after layer adds to them. Normalisation rescales every token
# vector to a fixed scale before a sub-layer reads it.*
#
# LayerNorm 先减均值、再除以标准差；**RMSNorm** 更简单：不减均值，只除以均方根（root mean square），再乘以学习到的逐特征缩放
# `weight`（初始全为 1）：
#
# $$\operatorname{rms\_norm}(x, w) = \frac{x}{\sqrt{\tfrac{1}{d}\sum_{i=1}^{d} x_i^2 + \varepsilon}} \odot w$$
#
# 少一次求均值、没有 bias，效果和 LayerNorm 相当，所以现代大模型几乎都用它。
#
# *LayerNorm subtracts the mean and divides by the standard deviation; RMSNorm only divides by the root mean square,
# then multiplies by a learned per-feature `weight` (all ones at the start). Cheaper, no bias, and it works as well.*
#
# 常见陷阱 / pitfalls：
# - `eps` 要加在**根号里面**：`sqrt(mean(x²) + eps)`，不是 `sqrt(mean(x²)) + eps`（数值很小的行会差很多）。
#   *eps goes inside the square root.*
# - 只在**最后一维**上求均值，而且要 `keepdim=True`，每个 token 得到一个值；`mean(x²)` 是均方，不是方差，不要减均值。
#   *Mean over the last dim only, with `keepdim=True`: one value per token. The mean square, not the variance.*
# - `x` 可以有任意多个前导维度，也可以就是一个向量 `[d]`；不要原地修改 `x`。
#   *Any leading dims, or none; do not modify `x` in place.*
#
# ### TODO 1：`rms_norm`
# 输入 `x: [..., d]`、`weight: [d]`，返回 `[..., d]`（与 `x` 同 dtype）。
# *Input `x: [..., d]`, `weight: [d]`; return `[..., d]` in the dtype of `x`.*

# %%
# @include decoder.py: rms_norm

# %% [markdown]
# 下面是给出的 `RMSNorm` 模块：它持有 `weight = nn.Parameter(torch.ones(d_model))`，`forward` 调用你的 `rms_norm`。
# *The given `RMSNorm` module: it holds the `weight` and calls your `rms_norm`.*

# %%
# @include decoder.py: RMSNorm

# %%
row = torch.tensor([[3.0, -1.0, 2.0, 6.0]])            # one token, d = 4, mean 2.5
for scale in (1.0, 1000.0):
    print(f"rms_norm({scale:g} * x):", rms_norm(scale * row, torch.ones(4)))   # the same: the scale is gone
y_rms = rms_norm(row, torch.ones(4))
print(f"RMS after: {y_rms.pow(2).mean().sqrt().item():.4f}   mean after: {y_rms.mean().item():.4f}")
centred = row - row.mean(dim=-1, keepdim=True)
print("LayerNorm-like (mean removed):", centred / centred.pow(2).mean(dim=-1, keepdim=True).sqrt())
print("a learned scale, weight = [1, 1, 0.5, 2]:", rms_norm(row, torch.tensor([1.0, 1.0, 0.5, 2.0])))
print("a single vector [4] and a batch [2, 3, 4]:", tuple(rms_norm(row[0], torch.ones(4)).shape),
      tuple(rms_norm(torch.randn(2, 3, 4), torch.ones(4)).shape))

# %%
grader.check("rms_norm")

# %% [markdown]
# 观察：把输入放大 1000 倍，输出不变 —— 尺度被“归一”掉了；RMSNorm 之后均方根是 1，但均值**没有**变成 0（LayerNorm 才会）。
#
# *Scaling the input by 1000 changes nothing; after RMSNorm the RMS is 1, but the mean is not 0 (that is LayerNorm).*

# %% [markdown]
# ## 3. SwiGLU：逐 token 的门控 MLP
# *SwiGLU: a gated MLP for every token*
#
# 注意力之后，每个 token 要在自己的位置上“消化”收集来的信息：这就是 MLP，整层唯一的强非线性部分。
# 经典的 Transformer MLP 是 `W_2(ReLU(W_1 x))`；**SwiGLU** 用两条并行的投影，其中一条经过 SiLU 之后当作**门**，逐元素地控制另一条：
#
# $$\operatorname{SwiGLU}(x) = W_\text{down}\big(\operatorname{silu}(W_\text{gate}\,x) \odot W_\text{up}\,x\big),
# \qquad \operatorname{silu}(z) = z \cdot \sigma(z)$$
#
# *After attention, every token digests what it gathered, on its own: that is the MLP, the layer's main non-linearity.
# SwiGLU runs two projections side by side; one goes through SiLU and gates the other element by element.*
#
# ```
# x [.., d_model] ──W_gate──▶ [.., d_ff] ──silu──┐
#                 ──W_up────▶ [.., d_ff] ────────⊙──▶ [.., d_ff] ──W_down──▶ [.., d_model]
# ```
#
# SiLU 是一条平滑的曲线：很负的输入接近 0，很正的输入接近它自己，在 0 附近还能取到一点负值。门的大小由输入决定，
# 所以 MLP 可以按内容“打开”或“关上”某些特征。`W_gate`、`W_up`（`d_model → d_ff`）和 `W_down`（`d_ff → d_model`）按这个顺序创建、都不带 bias。
#
# *SiLU is smooth: about 0 for very negative inputs, about z for positive ones, slightly negative near 0. The gate
# depends on the input, so the MLP opens or closes features by content. `W_gate`, `W_up`, `W_down` are created in that order, without bias.*

# %%
z = torch.linspace(-4, 4, 9)
print("z:      ", z)
print("silu(z):", F.silu(z))
print("relu(z):", torch.relu(z))

# %% [markdown]
# ### TODO 2：`SwiGLU.forward`
# `[..., T, d_model] → [..., T, d_model]`：`W_down(silu(W_gate(x)) * W_up(x))`；SiLU 只作用在 `W_gate(x)` 上（可以用 `F.silu`）。
# *`W_down(silu(W_gate(x)) * W_up(x))`, SiLU on `W_gate(x)` only (`F.silu` is fine).*

# %%
# @include decoder.py: SwiGLU

# %%
torch.manual_seed(0)
mlp_demo = SwiGLU(8, 16)
with torch.no_grad():
    print("SwiGLU(8, 16):", tuple(x_demo.shape), "->", tuple(mlp_demo(x_demo).shape))
    moved = (mlp_demo(x_edit) - mlp_demo(x_demo)).abs().amax(dim=-1)
print("changing token 0 moves the outputs of tokens:", [t for t in range(5) if moved[t] > 1e-6])
print("parameters:", sum(p.numel() for p in mlp_demo.parameters()), "= 3 * 8 * 16")

# %%
grader.check("SwiGLU")

# %% [markdown]
# 这次改变第 0 个 token，只有它自己的输出变了：MLP 对每个 token **单独**计算，不在 token 之间传递信息。
# 一层里分工明确：注意力负责“交流”，MLP 负责“思考”。
#
# *Now only token 0's own output moves: the MLP works on every token separately. Attention communicates, the MLP computes.*

# %% [markdown]
# ## 4. 预归一化残差：组装 Decoder 层
# *Pre-norm residuals: assembling the decoder layer*
#
# ```
# x ──┬──────────────────────────────(+)──► h ──┬──────────────────────────(+)──► out
#     └─► norm1 ─► attn (causal) ─────┘          └─► norm2 ─► mlp (SwiGLU) ──┘
# ```
#
# $$h = x + \operatorname{attn}(\operatorname{norm}_1(x)), \qquad \text{out} = h + \operatorname{mlp}(\operatorname{norm}_2(h))$$
#
# **残差**：每个子层只计算一个“增量”，加回残差流。子层什么都不做时（输出 0），整层就是恒等映射，所以很深的网络也容易训练，
# 梯度沿着加法一路传回去。**预归一化（pre-norm）**：归一化放在子层**入口**，只作用于子层读到的那份副本；残差流本身从不被归一化。
# 原始 Transformer 用的是后归一化（post-norm，`norm(x + sublayer(x))`），它把残差流也归一化了，深层时更难训练，需要小心地预热学习率。
#
# *Residuals: each sub-layer computes an update and adds it to the stream; a sub-layer that outputs 0 leaves the layer an
# identity, and gradients flow straight back through the additions. Pre-norm: the norm sits at each sub-layer's entrance
# and touches only the copy it reads; the stream itself is never normalised. The original Transformer's post-norm,
# `norm(x + sublayer(x))`, normalises the stream too and is harder to train deep.*
#
# 常见陷阱 / pitfalls：把 `causal` 忘了传给注意力；第二个子层读 `norm2(x)` 而不是 `norm2(h)`；写成 `x += ...`（原地修改了调用者的张量）。
# *Forgetting to pass `causal` on; the MLP reading `norm2(x)` instead of `norm2(h)`; writing `x += ...` (modifies the caller's tensor).*
#
# ### TODO 3：`DecoderLayer.forward`
# `[..., T, d_model] → [..., T, d_model]`；子模块 `norm1, attn, norm2, mlp` 已在 `__init__` 里按这个顺序创建。
# *Sub-modules `norm1, attn, norm2, mlp` are created in `__init__`, in that order.*

# %%
# @include decoder.py: DecoderLayer

# %% [markdown]
# ## 5. 本章的例子（与 `run.py` 相同）
# *The chapter's example (the same as `run.py`)*
#
# `torch.manual_seed(42)`，再创建 `DecoderLayer(d_model=8, num_heads=2, d_ff=16)`，再抽取 `x = torch.randn(2, 4, 8)`（2 个序列，每个 4 个 token）。
# 随机数的抽取顺序是固定的（`W_q, W_k, W_v, W_o, W_gate, W_up, W_down`，然后是 `x`），所以这里打印的数字和 `python run.py`、讲义里的完全一样。
#
# *Seed 42, then the layer, then x: the draws happen in a fixed order, so the numbers below are the ones `python run.py`
# and the handout print.*

# %%
def print_matrix(m: torch.Tensor) -> None:
    """Print a 2-D tensor row by row as t0, t1, ... with 4 decimals (as run.py does)."""
    for i, values in enumerate(m.tolist()):
        print(f"  t{i}  [" + "  ".join(f"{v:7.4f}" for v in values) + "]")


torch.manual_seed(42)
d_model, num_heads, d_ff = 8, 2, 16
layer = DecoderLayer(d_model, num_heads, d_ff)
x = torch.randn(2, 4, d_model)                           # (B, T, d_model)

with torch.no_grad():
    normed = layer.norm1(x)                              # (B, T, d_model)
    y = layer(x)                                         # (B, T, d_model)
    y_open = layer(x, causal=False)                      # every token may see the future too
    x_changed = x.clone()
    x_changed[:, -1] += 1.0                              # change only the last token
    y_changed = layer(x_changed)

print("RMSNorm 之后每个 token 的均方根 / root-mean-square of every token after RMSNorm:")
print("  " + "  ".join(f"{v:.4f}" for v in normed.pow(2).mean(dim=-1).sqrt().flatten().tolist()))
print(f"DecoderLayer(8, 2, 16): 输入 {x.shape} → 输出 {y.shape}")
print()
print("第一个序列的输出 / output of the first sequence, y[0]:")
print_matrix(y[0])
print()
print("changing the last token leaves earlier tokens unchanged (causal):",
      torch.allclose(y_changed[:, :-1], y[:, :-1], atol=1e-6))
print("causal=False gives a different output:", not torch.allclose(y_open, y, atol=1e-6))

# %%
grader.check("DecoderLayer")

# %% [markdown]
# 注意：这个例子里两个 RMSNorm 的 `weight` 都是 1，所以忘了乘 `weight`、或把 `norm1` 与 `norm2` 用反，在这里看不出来 —— 隐藏测试会用不全为 1 的 `weight`。
#
# *Both RMSNorm weights are ones here, so forgetting `weight` or swapping `norm1` and `norm2` does not show: the hidden
# tests use weights that are not all ones.*

# %% [markdown]
# ## 6. 实验：残差这条“高速公路”
# *Experiment: the residual highway*
#
# 1. 把两个子层的输出投影 `W_o`、`W_down` 置 0：子层的增量都是 0。预归一化的层应当**恰好**是恒等映射；后归一化的层却把每个 token 都缩放到了均方根 1。
# 2. 把 6 层堆起来，输入的 6 个 token 尺度相差 300 倍：看残差流里每个 token 的尺度，以及每个子层实际读到的输入（`norm1` 之后）的尺度。
#
# *1. Zero `W_o` and `W_down`, so both sub-layers add nothing: a pre-norm layer is then exactly the identity; a post-norm
# layer still rescales every token to RMS 1. 2. Stack 6 layers on six tokens whose sizes differ 300-fold: the scale of
# every token in the stream, and the scale of what each sub-layer actually reads.*

# %%
class PostNormLayer(DecoderLayer):
    """The original Transformer's wiring, for comparison only: the residual stream itself is normalised."""

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        mixed = self.norm1(x + self.attn(x, causal=causal))
        return self.norm2(mixed + self.mlp(mixed))


if not GRADING:
    x_big = 3.0 * torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(1))   # a stream of RMS about 3
    for cls in (DecoderLayer, PostNormLayer):
        torch.manual_seed(0)
        model = cls(8, 2, 16)
        with torch.no_grad():
            model.attn.W_o.weight.zero_()
            model.mlp.W_down.weight.zero_()
            out = model(x_big)
        print(f"{cls.__name__:>13}: output == input: {torch.equal(out, x_big)}; "
              f"RMS in {x_big.pow(2).mean().sqrt().item():.3f}, out {out.pow(2).mean().sqrt().item():.3f}")

    torch.manual_seed(0)
    stack = nn.ModuleList(DecoderLayer(16, 2, 32) for _ in range(6))
    scales = torch.tensor([0.1, 0.3, 1.0, 3.0, 10.0, 30.0])[:, None]      # six tokens of very different sizes
    stream = scales * torch.randn(1, 6, 16, generator=torch.Generator().manual_seed(2))
    per_token = lambda t: t.pow(2).mean(dim=-1).sqrt()[0]                 # (6,): the RMS of every token
    print(f"\n{'layer':>5} | {'stream RMS: min':>15} {'max':>7} | {'what attn reads: min':>20} {'max':>6}")
    with torch.no_grad():
        for index, block in enumerate(stack):
            read = per_token(block.norm1(stream))
            stream = block(stream)
            rms = per_token(stream)
            print(f"{index:5d} | {rms.min().item():15.3f} {rms.max().item():7.3f} | "
                  f"{read.min().item():20.3f} {read.max().item():6.3f}")

# %% [markdown]
# 读结果 / reading the output：置 0 之后，预归一化层原样返回输入，后归一化层却改变了残差流 —— 这就是预归一化中“恒等路径”的意思，
# 梯度也沿着这条路径直接传回。堆叠时，残差流里的 token 保持着各自相差悬殊的尺度（每层只是加上一个增量），但每个子层读到的输入
# 始终是均方根 1：归一化替子层挡住了尺度的差异和漂移，子层的权重不必去适应它。
#
# *With the updates zeroed, the pre-norm layer returns its input unchanged while the post-norm layer rescales the stream:
# that is the identity path, along which gradients also flow back. In the stack, the tokens of the stream keep their very
# different sizes (each layer only adds an update), yet every sub-layer reads an input of RMS 1: the norm shields the
# sub-layers from differences and drift in scale.*
#
# **练习（不计分）/ Exercise (ungraded)**：把 `stack` 里的 `DecoderLayer` 换成 `PostNormLayer`，再看两组数字：残差流里各个 token 的尺度还保留着吗？
# *Replace `DecoderLayer` by `PostNormLayer` in `stack` and look again: do the tokens of the stream keep their sizes?*
