"""`autograder check --plot` labels its picture in the student's language: English always; Chinese when a font
with CJK glyphs is installed, else English (never boxes for missing glyphs, never matplotlib's glyph warnings)."""
from __future__ import annotations

import io
import re
import warnings

import pytest

from autograder.assignments.attention import plots
from autograder.assignments.attention.checks import SEED42_WEIGHTS

CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]")


def texts(fig) -> list[str]:
    """Every label of the figure: titles, axis labels, the colour bar's label, the suptitle, panel texts."""
    found = [fig.get_suptitle()]
    for ax in fig.axes:
        found += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.texts]
    return [t for t in found if t]


def draw_and_save(lang: str, reasons=(None, None), mine=SEED42_WEIGHTS):
    fig = plots.draw(mine, SEED42_WEIGHTS, [SEED42_WEIGHTS, SEED42_WEIGHTS], reasons, lang)
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # "Glyph ... missing from font(s)" would fail here
        with plots.fonts_for(fig):
            fig.savefig(io.BytesIO(), format="png", dpi=40)
    return fig


def test_english_labels_always():
    fig = draw_and_save("en")
    labels = texts(fig)
    assert "your causal weights (seed 42)" in labels and "key (attended to)" in labels
    assert "your MultiHeadAttention: head 1" in labels and "attention weight" in labels
    assert not any(CJK.search(t) for t in labels), labels


def test_english_reasons_for_unfinished_panels():
    reasons = (plots.Text(zh="TODO(sdpa)：还没完成", en="TODO(sdpa): not done yet"), None)
    fig = plots.draw(None, SEED42_WEIGHTS, None, reasons, "en")
    labels = texts(fig)
    assert "TODO(sdpa): not done yet" in labels and "not available" in labels
    assert not any(CJK.search(t) for t in labels), labels


def test_chinese_without_a_cjk_font_falls_back_to_english_quietly(monkeypatch):
    monkeypatch.setattr(plots, "cjk_font", lambda: None)
    assert plots.label_lang("zh") == "en"
    fig = draw_and_save("zh", (plots.Text(zh="得到的是 int，不是张量", en="got int, not a tensor"), None), mine=None)
    labels = texts(fig)
    assert "your causal weights (seed 42)" in labels and "got int, not a tensor" in labels
    assert not any(CJK.search(t) for t in labels), labels


def test_a_font_without_cjk_glyphs_is_not_taken_for_one():
    from matplotlib import font_manager

    dejavu = font_manager.findfont("DejaVu Sans")
    assert not plots._covers(dejavu)
    last_resort = [e for e in font_manager.fontManager.ttflist if e.name.startswith("Last Resort")]
    assert plots._pick(last_resort) is None  # draws every character as a box: not a Chinese font


def test_chinese_labels_when_a_cjk_font_is_installed():
    font = plots.cjk_font()
    if font is None:
        pytest.skip("no font with CJK glyphs on this machine (e.g. apt-get install fonts-noto-cjk): "
                    "Chinese labels cannot be drawn, so English is used")
    assert plots.label_lang("zh") == "zh"
    fig = draw_and_save("zh")
    labels = texts(fig)
    assert "你的因果注意力权重（seed 42）" in labels and "注意力权重" in labels
    assert "你的 MultiHeadAttention：第 1 个头" in labels
    assert not any(re.search(r"\b(your|expected|attention weight|attended)\b", t) for t in labels), labels
    assert fig.axes[0].title.get_fontname() == font   # kept in the figure, wherever it is saved


def test_save_check_plot_takes_the_language(tmp_path):
    import types

    from autograder.assignments.attention import reference_solution

    session = types.SimpleNamespace(module=reference_solution)
    for lang in ("en", "zh"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            path = plots.save_check_plot(session, tmp_path / f"{lang}.png", lang)
        assert path.stat().st_size > 1000
    with pytest.raises(plots.PlotUnavailable) as raised:
        plots.save_check_plot(types.SimpleNamespace(module=None), tmp_path / "none.png", "zh")
    assert raised.value.text.zh == "你的文件没有加载成功，没有可画的内容"
