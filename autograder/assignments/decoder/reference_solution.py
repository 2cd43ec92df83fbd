"""
A Transformer decoder layer, written from scratch: RMSNorm + causal multi-head attention + a SwiGLU MLP.

Attention (assignment 1) only mixes information between tokens: every output is a weighted average of
values. A decoder layer adds the two other parts of a Transformer block:

    RMSNorm:  rescale every token vector to unit root-mean-square, then apply a learned scale:
                  rms_norm(x, w) = x / sqrt(mean(x ** 2 over the last dim) + eps) * w
    SwiGLU:   a gated MLP applied to every token on its own, the layer's non-linearity:
                  swiglu(x) = W_down(silu(W_gate(x)) * W_up(x)),   silu(z) = z * sigmoid(z)

and wires them with attention in the pre-norm residual pattern of modern LLMs (Llama, Qwen, Mistral):

    h   = x + attn(norm1(x))        # (..., T, d_model): tokens exchange information
    out = h + mlp(norm2(h))         # (..., T, d_model): every token is transformed on its own

The residual stream x -> h -> out is never normalised itself: each sub-layer reads a normalised copy and
adds its result back.

All functions accept any number of leading batch dimensions ("..."): a single sequence is (T, d_model),
a batch is (B, T, d_model), and rms_norm also takes a single vector (d,).

Graded (you write these): rms_norm, SwiGLU.forward, DecoderLayer.forward.
Given (already complete):  causal_mask, scaled_dot_product_attention, split_heads, merge_heads,
                           MultiHeadAttention (the finished assignment 1), RMSNorm, the __init__ methods.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# -- given: the attention of assignment 1 -----------------------------------------------------------------------
def causal_mask(seq_len: int) -> torch.Tensor:
    """bool (T, T): True strictly above the diagonal (the future positions a causal model must not see)."""
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool)
    return torch.triu(ones, diagonal=1)


def scaled_dot_product_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, causal: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_head)) V. Q, K: (..., T, d_head), V: (..., T, d_v) -> (output, weights)."""
    d_head = Q.shape[-1]
    T = Q.shape[-2]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_head)  # (..., T, T)
    if causal:
        mask = causal_mask(T).to(scores.device)  # (T, T), broadcasts over "..."
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (..., T, T), rows sum to 1
    output = weights @ V  # (..., T, d_v)
    return output, weights


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(..., T, d_model) -> (..., H, T, d_head), head h holding features [h * d_head, (h + 1) * d_head)."""
    *batch, T, d_model = x.shape
    d_head = d_model // num_heads
    x = x.reshape(*batch, T, num_heads, d_head)  # (..., T, H, d_head)
    return x.transpose(-3, -2)  # (..., H, T, d_head)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Inverse of split_heads: (..., H, T, d_head) -> (..., T, H * d_head)."""
    *batch, H, T, d_head = x.shape
    x = x.transpose(-3, -2)  # (..., T, H, d_head)
    return x.reshape(*batch, T, H * d_head)  # (..., T, d_model)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention, as in assignment 1, with the mask made a parameter of forward.

    W_q, W_k, W_v, W_o = nn.Linear(d_model, d_model, bias=False), created in that order.
    forward(x, causal=True): (..., T, d_model) -> (..., T, d_model); causal=False lets every position
    attend to the future too.
    """

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        # x: (..., T, d_model)
        q = split_heads(self.W_q(x), self.num_heads)  # (..., H, T, d_head)
        k = split_heads(self.W_k(x), self.num_heads)  # (..., H, T, d_head)
        v = split_heads(self.W_v(x), self.num_heads)  # (..., H, T, d_head)
        out, _ = scaled_dot_product_attention(q, k, v, causal=causal)  # (..., H, T, d_head)
        return self.W_o(merge_heads(out))  # (..., T, d_model)


# -- RMSNorm ------------------------------------------------------------------------------------------------------
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Root-mean-square normalisation over the last dim, then a learned per-feature scale.

    Args:
        x: (..., d); any leading dims, or none (a single vector of shape (d,)).
        weight: (d,), the learned scale (RMSNorm starts it at all ones).
        eps: added to the mean square INSIDE the square root, so that a row of (near) zeros does not
            divide by zero.

    Returns:
        (..., d), the dtype of x:  x / sqrt(mean(x ** 2, over the last dim) + eps) * weight.
        Unlike LayerNorm, the mean is NOT subtracted: mean(x ** 2) is the mean square, not the variance.

    x and weight must not be modified, and gradients must flow back to both.
    """
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1): one value per token
    return x / torch.sqrt(mean_square + eps) * weight  # (..., d); weight broadcasts over "..."


class RMSNorm(nn.Module):
    """RMSNorm(d_model, eps=1e-6): weight = nn.Parameter(torch.ones(d_model)); forward(x) = rms_norm(x, weight, eps).

    forward: (..., d_model) -> (..., d_model)
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


# -- SwiGLU -------------------------------------------------------------------------------------------------------
class SwiGLU(nn.Module):
    """The gated MLP of the layer: W_down(silu(W_gate(x)) * W_up(x)).

    W_gate and W_up = nn.Linear(d_model, d_ff, bias=False), W_down = nn.Linear(d_ff, d_model, bias=False),
    created in that order (the order fixes the random initial weights under a given seed).
    W_gate's output goes through silu(z) = z * sigmoid(z) and gates W_up's output element by element.

    forward(x): (..., T, d_model) -> (..., T, d_model)
    """

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.W_gate = nn.Linear(d_model, d_ff, bias=False)
        self.W_up = nn.Linear(d_model, d_ff, bias=False)
        self.W_down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (..., T, d_model)
        gate = F.silu(self.W_gate(x))  # (..., T, d_ff), silu(z) = z * sigmoid(z)
        up = self.W_up(x)  # (..., T, d_ff)
        return self.W_down(gate * up)  # (..., T, d_model)


# -- the decoder layer --------------------------------------------------------------------------------------------
class DecoderLayer(nn.Module):
    """One pre-norm Transformer decoder layer.

    Sub-modules, created in this order: norm1 = RMSNorm(d_model), attn = MultiHeadAttention(d_model, num_heads),
    norm2 = RMSNorm(d_model), mlp = SwiGLU(d_model, d_ff).

    forward(x, causal=True): (..., T, d_model) -> (..., T, d_model)
        h   = x + attn(norm1(x), causal=causal)
        out = h + mlp(norm2(h))
    `causal` is passed on to the attention. x must not be modified.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.norm1 = RMSNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads)
        self.norm2 = RMSNorm(d_model)
        self.mlp = SwiGLU(d_model, d_ff)

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        # x: (..., T, d_model)
        h = x + self.attn(self.norm1(x), causal=causal)  # (..., T, d_model): attention sub-layer + residual
        return h + self.mlp(self.norm2(h))  # (..., T, d_model): MLP sub-layer + residual
