"""What the grader must know about this assignment before it imports torch (the sandbox is started with it)."""

SUBMISSION_FILES = ("attention.py", "attention.ipynb")
# Disabled in every worker before any student code runs (autograder/sandbox/forbid.py): calling one raises.
FORBIDDEN = {
    "torch.nn.functional.scaled_dot_product_attention": "ready-made attention",
    "torch.nn.functional.multi_head_attention_forward": "ready-made multi-head attention",
    "torch.nn.MultiheadAttention": "ready-made multi-head attention",
    "torch.nn.attention.flex_attention.flex_attention": "ready-made attention",
    "torch._higher_order_ops.flex_attention.FlexAttentionHOP": "ready-made attention (torch.ops.higher_order)",
    "torch._higher_order_ops.flex_attention.math_attention": "ready-made attention",
    "torch._higher_order_ops.flex_attention.sdpa_dense": "ready-made attention",
    "op:*attention*": "ready-made attention (however it is reached, e.g. through torch.ops)",
    "op:*transformer*": "ready-made transformer layers (they contain attention)",
}
