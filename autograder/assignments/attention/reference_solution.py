"""
Scaled dot-product attention and multi-head attention, written from scratch.

Every token builds a query ("what am I looking for?"), a key ("what do I offer?") and a value
("what do I carry?"). The output at position i is a weighted average of all values, where the
weights come from how well query i matches each key:

    weights = softmax(Q @ K^T / sqrt(d_head))      # (..., T, T), every row sums to 1
    output  = weights @ V                          # (..., T, d_v)

A causal (autoregressive) model must not look ahead, so before the softmax every score for a
future position j > i is set to -inf; after the softmax those weights are exactly 0.

Multi-head attention cuts d_model into num_heads slices of size d_head, runs attention on each
slice independently, glues the results back together and mixes them with an output projection.

All functions accept any number of leading batch dimensions ("..."): a single sequence is
(T, d), a batch is (B, T, d), a batch of heads is (B, H, T, d), and so on.

Graded (you write these): causal_mask, scaled_dot_product_attention, split_heads.
Given (already complete):  merge_heads, MultiHeadAttention.
"""
import math

import torch
import torch.nn as nn


def causal_mask(seq_len: int) -> torch.Tensor:
    """Mask of the positions a causal model must not attend to.

    Args:
        seq_len: number of tokens T.

    Returns:
        bool tensor of shape (T, T); entry [i, j] is True when j > i (a future token, to be hidden)
        and False on and below the diagonal. Example for T = 3:
            [[False,  True,  True],
             [False, False,  True],
             [False, False, False]]
    """
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool)
    return torch.triu(ones, diagonal=1)  # strictly above the diagonal


def scaled_dot_product_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, causal: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of every query over every key: softmax(Q K^T / sqrt(d_head)) V.

    Args:
        Q: queries, (..., T, d_head)
        K: keys,    (..., T, d_head)
        V: values,  (..., T, d_v)
        causal: if True, position i may only attend to positions j <= i; the weights of future
            positions must be exactly 0.

    Returns:
        (output, weights):
            output:  (..., T, d_v)
            weights: (..., T, T), non-negative, every row sums to 1

    The leading dims "..." may be absent (a single sequence) or any batch/head dims, so transpose
    only the last two dims. The inputs Q, K, V must not be modified, and gradients must flow
    through to them.
    """
    d_head = Q.shape[-1]
    T = Q.shape[-2]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_head)  # (..., T, T)
    if causal:
        mask = causal_mask(T).to(scores.device)  # (T, T), broadcasts over "..."
        scores = scores.masked_fill(mask, float("-inf"))  # out of place: a new tensor
    weights = torch.softmax(scores, dim=-1)  # (..., T, T), rows sum to 1
    output = weights @ V  # (..., T, d_v)
    return output, weights


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut the feature dimension into num_heads heads and move the head dim before the tokens.

    Args:
        x: (..., T, d_model), d_model divisible by num_heads
        num_heads: H

    Returns:
        (..., H, T, d_head) with d_head = d_model // H. Head h holds features
        [h * d_head, (h + 1) * d_head) of every token: out[..., h, t, :] == x[..., t, h*d_head:(h+1)*d_head].
    """
    *batch, T, d_model = x.shape
    d_head = d_model // num_heads
    x = x.reshape(*batch, T, num_heads, d_head)  # (..., T, H, d_head)
    return x.transpose(-3, -2)  # (..., H, T, d_head)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Inverse of split_heads: put the heads side by side again.

    Args:
        x: (..., H, T, d_head)

    Returns:
        (..., T, H * d_head), so that merge_heads(split_heads(x, H)) == x.
    """
    *batch, H, T, d_head = x.shape
    x = x.transpose(-3, -2)  # (..., T, H, d_head)
    return x.reshape(*batch, T, H * d_head)  # (..., T, d_model)


class MultiHeadAttention(nn.Module):
    """Causal multi-head self-attention.

    d_model is split into num_heads heads of size d_head = d_model // num_heads. The four
    projections are created in the order W_q, W_k, W_v, W_o (the order fixes the random
    initial weights under a given seed), all without bias.

    forward(x): (..., T, d_model) -> (..., T, d_model)
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (..., T, d_model)
        q = split_heads(self.W_q(x), self.num_heads)  # (..., H, T, d_head)
        k = split_heads(self.W_k(x), self.num_heads)  # (..., H, T, d_head)
        v = split_heads(self.W_v(x), self.num_heads)  # (..., H, T, d_head)
        out, _ = scaled_dot_product_attention(q, k, v, causal=True)  # (..., H, T, d_head)
        return self.W_o(merge_heads(out))  # (..., T, d_model)
