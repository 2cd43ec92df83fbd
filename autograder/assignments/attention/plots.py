"""`autograder check --plot`: one PNG with the student's causal weights for the chapter's seed-42 input beside the
expected pattern, and the per-head weights of their MultiHeadAttention on the chapter's input.

The only module of the student flow that imports matplotlib (through `matplotlib.figure.Figure`: no GUI backend,
no pyplot state). Panels whose function is unfinished or broken say so instead of failing the picture.

Labels are in the language asked for (`lang`, as `autograder check --lang`). Chinese needs a font with CJK glyphs:
`cjk_font()` looks for one among matplotlib's fonts and the system's (fontconfig), and checks that it really has
the glyphs; without one, the picture falls back to English labels (never boxes for missing glyphs, no warnings).
"""
from __future__ import annotations

import contextlib
import functools
import io
from pathlib import Path

import torch

from autograder.public.text import Text

LABELS = {
    "not_done": Text(zh="{todo}：还没完成", en="{todo}: not done yet"),
    "not_tensor": Text(zh="得到的是 {type}，不是张量", en="got {type}, not a tensor"),
    "bad_shape": Text(zh="形状是 {shape}，应为 [{T}, {T}]", en="shape {shape}, expected [{T}, {T}]"),
    "not_pair": Text(zh="必须返回 (output, weights)", en="must return (output, weights)"),
    "bad_heads": Text(zh="每个头的权重形状是 {shape}，应为 [{H}, 4, 4]",
                      en="per-head weights have shape {shape}, expected [{H}, 4, 4]"),
    "not_available": Text(zh="无法画出", en="not available"),
    "key": Text(zh="键（被关注的位置）", en="key (attended to)"),
    "query": Text(zh="查询", en="query"),
    "yours": Text(zh="你的因果注意力权重（seed 42）", en="your causal weights (seed 42)"),
    "expected": Text(zh="期望结果（本章，seed 42）", en="expected (chapter, seed 42)"),
    "head": Text(zh="你的 MultiHeadAttention：第 {h} 个头", en="your MultiHeadAttention: head {h}"),
    "colorbar": Text(zh="注意力权重", en="attention weight"),
    "suptitle": Text(zh="autograder check --plot：行 = 查询，列 = 键；未来位置（右上三角）必须为 0",
                     en="autograder check --plot: rows = queries, columns = keys; future (upper right) must be 0"),
    "not_loaded": Text(zh="你的文件没有加载成功，没有可画的内容", en="your file did not load, so there is nothing to draw"),
}
# A font counts as Chinese-capable only if it has every glyph of these (and of the labels above).
CJK_SAMPLE = "".join(sorted({ch for t in LABELS.values() for ch in t.zh if ord(ch) > 0x2E80}))
PREFERRED = ("Noto Sans CJK SC", "Source Han Sans SC", "Source Han Sans CN", "Noto Sans SC", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC", "Hiragino Sans GB", "Heiti SC", "SimHei",
             "Noto Sans CJK TC", "Noto Sans CJK JP", "Droid Sans Fallback", "AR PL UMing CN", "Noto Serif CJK SC")
NOT_REAL = ("Last Resort",)   # fonts that map every character to a placeholder box


class PlotUnavailable(RuntimeError):
    """Nothing can be drawn; `text` says why in both languages (the terminal shows Chinese without any font)."""

    def __init__(self, text: Text):
        super().__init__(text.en)
        self.text = text


class _Reason(Exception):
    """Why a panel cannot be drawn, in both languages."""

    def __init__(self, key: str, **fields):
        super().__init__(key)
        self.text = Text(zh=LABELS[key].zh.format(**fields), en=LABELS[key].en.format(**fields))


def _covers(path: str) -> bool:
    """Whether the font file at `path` has a glyph for every character of CJK_SAMPLE."""
    from matplotlib.ft2font import FT2Font

    try:
        font = FT2Font(path)
        return all(font.get_char_index(ord(ch)) for ch in CJK_SAMPLE)
    except Exception:  # an unreadable or unsupported font file is simply not a candidate
        return False


def _pick(entries) -> str | None:
    names: dict[str, str] = {}
    for entry in entries:
        if not any(entry.name.startswith(bad) for bad in NOT_REAL):
            names.setdefault(entry.name, entry.fname)
    checked: dict[str, bool] = {}

    def ok(name: str) -> bool:
        path = names[name]
        if path not in checked:
            checked[path] = _covers(path)
        return checked[path]

    order = [n for n in PREFERRED if n in names] + sorted(
        (n for n in names if n not in PREFERRED), key=lambda n: ("Sans" not in n, "Mono" in n, n))
    return next((n for n in order if ok(n)), None)


@functools.lru_cache(maxsize=None)
def cjk_font() -> str | None:
    """The family name of a font that can draw the Chinese labels, or None. matplotlib's own list first; then the
    system's fonts that list does not know yet (its cache predates a font installed later), added to it."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    found = _pick(manager.ttflist)
    if found is not None:
        return found
    known = {entry.fname for entry in manager.ttflist}
    try:
        system = font_manager.findSystemFonts()
    except Exception:
        return None
    added = False
    for path in sorted(system):
        if path not in known and _covers(path):
            try:
                manager.addfont(path)
                added = True
            except Exception:
                continue
    return _pick(manager.ttflist) if added else None


def label_lang(lang: str) -> str:
    """The language the labels will be drawn in: zh only where a CJK font exists, else en."""
    return "zh" if lang == "zh" and cjk_font() is not None else "en"


def _say(key: str, lang: str, **fields) -> str:
    return LABELS[key].pick(lang).format(**fields)


def _pick_text(reason, lang: str) -> str | None:
    return reason.pick(lang) if isinstance(reason, Text) else reason


def _attempt(fn):
    """(value, None) or (None, short reason as a Text) -- a reason a student can read on the picture."""
    try:
        return fn(), None
    except _Reason as e:
        return None, e.text
    except NotImplementedError as e:
        text = str(e)
        todo = text.split(":", 1)[0] if text.startswith("TODO") else "TODO"
        return None, Text(zh=LABELS["not_done"].zh.format(todo=todo), en=LABELS["not_done"].en.format(todo=todo))
    except Exception as e:  # the student's own exception: quoted as it is, in both languages
        said = f"{type(e).__name__}: {str(e)[:80]}"
        return None, Text(zh=said, en=said)


def _as_map(value, T: int):
    """The (T, T) float tensor inside `value`, or raise with a readable reason."""
    if not isinstance(value, torch.Tensor):
        raise _Reason("not_tensor", type=type(value).__name__)
    value = torch.Tensor.detach(value).float()
    if tuple(value.shape) != (T, T):
        raise _Reason("bad_shape", shape=list(value.shape), T=T)
    return value


def chapter_maps(module):
    """Student maps for the chapter's run, drawn in the chapter's order (run.py): manual_seed(42), Q, K, V, the
    MultiHeadAttention(8, 2), then x. Returns (weights or None, reason) and (per-head list or None, reason); a
    reason is a Text (zh and en)."""
    from autograder.assignments.attention.cases import seed42_inputs

    Q, K, V = seed42_inputs()  # torch.manual_seed(42), then Q, K, V = randn(4, 4) each

    def weights():
        pair = module.scaled_dot_product_attention(Q.clone(), K.clone(), V.clone(), causal=True)
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise _Reason("not_pair")
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
                raise _Reason("bad_heads", shape=list(getattr(w, "shape", [])), H=H)
            return [_as_map(w[h], 4) for h in range(H)]

        per_head, heads_why = _attempt(heads) if layer is not None else (None, layer_why)
    return (seed42, why), (per_head, heads_why)


def _panel(ax, matrix, title: str, reason: str | None = None, lang: str = "en"):
    ax.set_title(title, fontsize=10)
    if matrix is None:
        ax.text(0.5, 0.5, reason or _say("not_available", lang), ha="center", va="center", wrap=True, fontsize=8,
                color="#b00")
        ax.set_xticks([])
        ax.set_yticks([])
        return None
    T = matrix.shape[-1]
    image = ax.imshow(matrix.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    labels = [f"t{i}" for i in range(T)]
    ax.set_xticks(range(T), labels, fontsize=8)
    ax.set_yticks(range(T), labels, fontsize=8)
    ax.set_xlabel(_say("key", lang), fontsize=8)
    ax.set_ylabel(_say("query", lang), fontsize=8)
    for i in range(T):
        for j in range(T):
            value = float(matrix[i, j])
            if value != value:  # NaN: drawn blank by imshow, so say it
                ax.text(j, i, "NaN", ha="center", va="center", fontsize=7, color="#d00", fontweight="bold")
            else:
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if value > 0.6 else "white")
    return image


@contextlib.contextmanager
def _fonts(lang: str):
    """matplotlib settings for drawing and saving in `lang` (already `label_lang`): the CJK font first for zh."""
    import matplotlib

    if lang != "zh":
        yield
        return
    # the family is stored in each text as it is created, so the figure keeps the font wherever it is saved
    with matplotlib.rc_context({"font.family": [cjk_font(), "sans-serif"], "axes.unicode_minus": False}):
        yield


def draw(seed42, expected, per_head, reasons=(None, None), lang: str = "en"):
    """A matplotlib Figure: [your weights | expected | head 0 | head 1 | ...], labelled in `lang` when it can be
    drawn (zh needs a CJK font: `label_lang`). Reasons are Texts (or plain strings, shown as they are). Save it
    inside `fonts_for(fig)` so that the same fonts are used."""
    from matplotlib.figure import Figure

    lang = label_lang(lang)
    with _fonts(lang):
        n_heads = len(per_head) if per_head else 1
        fig = Figure(figsize=(3.2 * (2 + n_heads), 3.6), layout="constrained")
        fig._autograder_lang = lang
        axes = fig.subplots(1, 2 + n_heads)
        _panel(axes[0], seed42, _say("yours", lang), _pick_text(reasons[0], lang), lang)
        image = _panel(axes[1], expected, _say("expected", lang), lang=lang)
        for h in range(n_heads):
            _panel(axes[2 + h], per_head[h] if per_head else None, _say("head", lang, h=h),
                   _pick_text(reasons[1], lang), lang)
        if image is not None:
            fig.colorbar(image, ax=list(axes), shrink=0.8, label=_say("colorbar", lang))
        fig.suptitle(_say("suptitle", lang), fontsize=10)
    return fig


def fonts_for(fig):
    """The font settings `fig` was drawn with (for savefig: layout and glyphs are resolved when saving)."""
    return _fonts(getattr(fig, "_autograder_lang", "en"))


def save_check_plot(session, path: Path, lang: str = "en") -> Path:
    """Draw the student's maps (from the module loaded by `check`) and save them as a PNG at `path`, labelled in
    `lang` (English when no CJK font is installed)."""
    from autograder.assignments.attention.checks import SEED42_WEIGHTS

    module = session.module
    if module is None:
        raise PlotUnavailable(LABELS["not_loaded"])
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        (seed42, why), (per_head, heads_why) = chapter_maps(module)
    fig = draw(seed42, SEED42_WEIGHTS, per_head, (why, heads_why), lang)
    path = Path(path)
    with fonts_for(fig):
        fig.savefig(path, dpi=110)
    return path
