"""`autograder check --plot`: one PNG with the student's causal weights for the chapter's seed-42 input beside the
expected pattern, and the per-head weights of their MultiHeadAttention on the chapter's input.

The only module of the student flow that imports matplotlib (through `matplotlib.figure.Figure`: no GUI backend,
no pyplot state). Panels whose function is unfinished or broken say so instead of failing the picture.
"""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import torch


def _attempt(fn):
    """(value, None) or (None, short reason) -- a reason a student can read on the picture."""
    try:
        return fn(), None
    except NotImplementedError as e:
        text = str(e)
        return None, text.split(":", 1)[0] + ": not done yet" if text.startswith("TODO") else "TODO: not done yet"
    except Exception as e:
        return None, f"{type(e).__name__}: {str(e)[:80]}"


def _as_map(value, T: int):
    """The (T, T) float tensor inside `value`, or raise with a readable reason."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"got {type(value).__name__}, not a tensor")
    value = torch.Tensor.detach(value).float()
    if tuple(value.shape) != (T, T):
        raise ValueError(f"shape {list(value.shape)}, expected [{T}, {T}]")
    return value


def chapter_maps(module):
    """Student maps for the chapter's run, drawn in the chapter's order (run.py): manual_seed(42), Q, K, V, the
    MultiHeadAttention(8, 2), then x. Returns (weights or None, reason) and (per-head list or None, reason)."""
    from autograder.assignments.attention.cases import seed42_inputs

    Q, K, V = seed42_inputs()  # torch.manual_seed(42), then Q, K, V = randn(4, 4) each

    def weights():
        pair = module.scaled_dot_product_attention(Q.clone(), K.clone(), V.clone(), causal=True)
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError("must return (output, weights)")
        return _as_map(pair[1], 4)

    with torch.no_grad():
        seed42, why = _attempt(weights)
        torch.manual_seed(42)
        torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)  # the same draws as above, so the layer's weights
        layer, layer_why = _attempt(lambda: module.MultiHeadAttention(8, 2))  # match the chapter
        x = torch.randn(4, 8)

        def heads():
            H = layer.num_heads
            q = module.split_heads(layer.W_q(x), H)
            k = module.split_heads(layer.W_k(x), H)
            v = module.split_heads(layer.W_v(x), H)
            pair = module.scaled_dot_product_attention(q, k, v, causal=True)
            w = pair[1]
            if not isinstance(w, torch.Tensor) or tuple(w.shape) != (H, 4, 4):
                raise ValueError(f"per-head weights have shape {list(getattr(w, 'shape', []))}, expected [{H}, 4, 4]")
            return [_as_map(w[h], 4) for h in range(H)]

        per_head, heads_why = _attempt(heads) if layer is not None else (None, layer_why)
    return (seed42, why), (per_head, heads_why)


def _panel(ax, matrix, title: str, reason: str | None = None):
    ax.set_title(title, fontsize=10)
    if matrix is None:
        ax.text(0.5, 0.5, reason or "not available", ha="center", va="center", wrap=True, fontsize=8, color="#b00")
        ax.set_xticks([])
        ax.set_yticks([])
        return None
    T = matrix.shape[-1]
    image = ax.imshow(matrix.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    labels = [f"t{i}" for i in range(T)]
    ax.set_xticks(range(T), labels, fontsize=8)
    ax.set_yticks(range(T), labels, fontsize=8)
    ax.set_xlabel("key (attended to)", fontsize=8)
    ax.set_ylabel("query", fontsize=8)
    for i in range(T):
        for j in range(T):
            value = float(matrix[i, j])
            if value != value:  # NaN: drawn blank by imshow, so say it
                ax.text(j, i, "NaN", ha="center", va="center", fontsize=7, color="#d00", fontweight="bold")
            else:
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if value > 0.6 else "white")
    return image


def draw(seed42, expected, per_head, reasons=(None, None)):
    """A matplotlib Figure: [your weights | expected | head 0 | head 1 | ...]."""
    from matplotlib.figure import Figure

    n_heads = len(per_head) if per_head else 1
    fig = Figure(figsize=(3.2 * (2 + n_heads), 3.6), layout="constrained")
    axes = fig.subplots(1, 2 + n_heads)
    _panel(axes[0], seed42, "your causal weights (seed 42)", reasons[0])
    image = _panel(axes[1], expected, "expected (chapter, seed 42)")
    for h in range(n_heads):
        _panel(axes[2 + h], per_head[h] if per_head else None, f"your MultiHeadAttention: head {h}", reasons[1])
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.8, label="attention weight")
    fig.suptitle("autograder check --plot: rows = queries, columns = keys; future (upper right) must be 0",
                 fontsize=10)
    return fig


def save_check_plot(session, path: Path) -> Path:
    """Draw the student's maps (from the module loaded by `check`) and save them as a PNG at `path`."""
    from autograder.assignments.attention.checks import SEED42_WEIGHTS

    module = session.module
    if module is None:
        raise RuntimeError("your file did not load, so there is nothing to draw")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        (seed42, why), (per_head, heads_why) = chapter_maps(module)
    fig = draw(seed42, SEED42_WEIGHTS, per_head, (why, heads_why))
    path = Path(path)
    fig.savefig(path, dpi=110)
    return path
