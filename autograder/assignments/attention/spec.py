"""The attention assignment, as the grader knows it before torch is imported (the sandbox is started with it)."""
from autograder.assignments import Assignment
from autograder.public.text import Text

ASSIGNMENT = Assignment(
    id="attention",
    title=Text(zh="注意力机制：从零实现缩放点积注意力与多头注意力",
               en="Attention from scratch: scaled dot-product and multi-head attention"),
    module="attention.py",
    notebook="attention.ipynb",
    functions=("causal_mask", "scaled_dot_product_attention", "split_heads", "MultiHeadAttention"),
    # Disabled in every worker before any student code runs (autograder/sandbox/forbid.py): calling one raises.
    forbidden={
        "torch.nn.functional.scaled_dot_product_attention": "ready-made attention",
        "torch.nn.functional.multi_head_attention_forward": "ready-made multi-head attention",
        "torch.nn.MultiheadAttention": "ready-made multi-head attention",
        "torch.nn.attention.flex_attention.flex_attention": "ready-made attention",
        "torch._higher_order_ops.flex_attention.FlexAttentionHOP": "ready-made attention (torch.ops.higher_order)",
        "torch._higher_order_ops.flex_attention.math_attention": "ready-made attention",
        "torch._higher_order_ops.flex_attention.sdpa_dense": "ready-made attention",
        "op:*attention*": "ready-made attention (however it is reached, e.g. through torch.ops)",
        "op:*transformer*": "ready-made transformer layers (they contain attention)",
    },
    hidden_topics=Text(
        zh="其他长度（包括 T = 1）、批维度和多头（包括大小为 1 的前导维度）、缩放因子、causal=False、很大的分数、梯度、"
           "是否修改输入、注入权重的多头注意力（包括只有 1 个头）",
        en="other lengths (T = 1 included), batch and head dims (leading dims of size 1 included), the scaling factor, "
           "causal=False, large scores, gradients, unchanged inputs, multi-head attention with injected weights (one "
           "head included)"),
)
