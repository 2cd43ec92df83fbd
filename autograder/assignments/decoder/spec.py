"""The decoder assignment, as the grader knows it before torch is imported (the sandbox is started with it)."""
from autograder.assignments import Assignment
from autograder.public.text import Text

ASSIGNMENT = Assignment(
    id="decoder",
    title=Text(zh="Transformer Decoder 层：RMSNorm、SwiGLU 与预归一化残差",
               en="A Transformer decoder layer: RMSNorm, SwiGLU and pre-norm residuals"),
    module="decoder.py",
    notebook="decoder.ipynb",
    functions=("rms_norm", "SwiGLU", "DecoderLayer"),
    # Disabled in every worker before any student code runs (autograder/sandbox/forbid.py): calling one raises.
    # The ready-made attention stays forbidden too: the given MultiHeadAttention is built from the course's own
    # functions (none of them is, or reaches, one of these).
    forbidden={
        "torch.nn.functional.rms_norm": "ready-made RMSNorm",
        "torch.nn.RMSNorm": "ready-made RMSNorm",
        "op:*rms_norm*": "ready-made RMSNorm (however it is reached, e.g. through torch.ops)",
        "torch.nn.TransformerDecoderLayer": "ready-made decoder layer",
        "torch.nn.TransformerEncoderLayer": "ready-made encoder layer",
        "torch.nn.Transformer": "ready-made transformer",
        "op:*transformer*": "ready-made transformer layers",
        "torch.nn.functional.scaled_dot_product_attention": "ready-made attention",
        "torch.nn.functional.multi_head_attention_forward": "ready-made multi-head attention",
        "torch.nn.MultiheadAttention": "ready-made multi-head attention",
        "torch.nn.attention.flex_attention.flex_attention": "ready-made attention",
        "torch._higher_order_ops.flex_attention.FlexAttentionHOP": "ready-made attention (torch.ops.higher_order)",
        "torch._higher_order_ops.flex_attention.math_attention": "ready-made attention",
        "torch._higher_order_ops.flex_attention.sdpa_dense": "ready-made attention",
        "op:*attention*": "ready-made attention (however it is reached, e.g. through torch.ops)",
    },
    hidden_topics=Text(
        zh="批维度与大小为 1 的前导维度、单个向量、均值不为 0 的行、很小的数值（eps 的位置）、调用者给定的 eps、不全为 1 的 "
           "weight、按名字注入权重的 SwiGLU 与 DecoderLayer、残差与预归一化的接法、causal=False、梯度、是否修改输入",
        en="batch dims and leading dims of size 1, a single vector, rows with a non-zero mean, tiny values (where eps "
           "goes), an eps the caller passes, a weight that is not all ones, SwiGLU and DecoderLayer with weights "
           "injected by name, the residual and pre-norm wiring, causal=False, gradients, unchanged inputs"),
)
