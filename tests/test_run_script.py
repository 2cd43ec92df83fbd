"""`python run.py` explains a broken submission by its real cause, one language per line: NaN weights (a mask that
hides the diagonal leaves row 0 with only -inf) are named as NaN, not as "future weights are not 0"; a mask filled
with a value that is not low enough, a softmax over the wrong dim, NaN in the decoder layer likewise.

run.py is the source's (assignments/<id>/run.py); the module is the clean solution with one function replaced."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]")

DIAGONAL_HIDDEN = '''

def causal_mask(seq_len):
    return torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool))  # diagonal=0: each token hides itself too
'''
TIMES_INF = '''

def scaled_dot_product_attention(Q, K, V, causal=True):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if causal:
        scores = scores + causal_mask(Q.shape[-2]).float() * float("-inf")   # 0 * -inf = NaN everywhere else
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
'''
FILL_TOO_HIGH = '''

def scaled_dot_product_attention(Q, K, V, causal=True):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if causal:
        scores = scores.masked_fill(causal_mask(Q.shape[-2]), -8.0)
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
'''
WRONG_DIM = '''

def scaled_dot_product_attention(Q, K, V, causal=True):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if causal:
        scores = scores.masked_fill(causal_mask(Q.shape[-2]), float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    return weights @ V, weights
'''
RMS_NAN = '''

def rms_norm(x, weight, eps=1e-6):
    return x / (x.pow(2).mean(dim=-1, keepdim=True) - 1.0).sqrt() * weight   # sqrt of a negative number: NaN
'''


def run(assignment: str, module: str, appended: str, tmp_path: Path) -> subprocess.CompletedProcess:
    folder = tmp_path / assignment
    folder.mkdir()
    source = (ROOT / "solutions" / assignment / module).read_text(encoding="utf-8")
    if "import math" not in source:
        source = "import math\n" + source
    (folder / module).write_text(source + appended, encoding="utf-8")
    shutil.copy(ROOT / "assignments" / assignment / "run.py", folder / "run.py")
    return subprocess.run([sys.executable, str(folder / "run.py")], capture_output=True, text=True, timeout=120,
                          cwd=folder)


def verdict(done: subprocess.CompletedProcess) -> tuple[str, str]:
    """The two lines of the failure: (Chinese, English)."""
    lines = done.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("❌"))
    zh, en = lines[first].removeprefix("❌ "), lines[first + 1].strip()
    assert CJK.search(zh) and not CJK.search(en), (zh, en)
    return zh, en


def test_the_solution_passes(tmp_path):
    done = run("attention", "attention.py", "", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✅ attention" in done.stdout


def test_a_mask_hiding_the_diagonal_is_explained_as_nan_in_row_0(tmp_path):
    done = run("attention", "attention.py", DIAGONAL_HIDDEN, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "  t0  [ nan   nan   nan   nan]" in done.stdout
    zh, en = verdict(done)
    assert "NaN" in zh and "t0" in zh and "对角线" in zh and "diagonal=1" in zh
    assert en.startswith("NaN in the weights: in row t0 (query) every key is masked")
    assert "softmax over a row of only -inf" in en and "keep the diagonal" in en
    assert "not exactly 0" not in done.stdout and "not all 0" not in done.stdout
    assert "sum to 1" not in done.stdout


def test_nan_from_multiplying_by_inf_gets_the_general_explanation(tmp_path):
    done = run("attention", "attention.py", TIMES_INF, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    zh, en = verdict(done)
    assert en.startswith("NaN or inf in the weights (row t0, t1, t2, t3)")
    assert "0 * -inf = NaN" in en and "0 * -inf = NaN" in zh and "every key is masked" not in en


def test_a_fill_value_not_low_enough_is_named(tmp_path):
    zh, en = verdict(run("attention", "attention.py", FILL_TOO_HIGH, tmp_path))
    assert "tiny but not exactly 0" in en and "float('-inf')" in en and "不够小" in zh


def test_softmax_over_the_wrong_dim_is_named(tmp_path):
    zh, en = verdict(run("attention", "attention.py", WRONG_DIM, tmp_path))
    assert en.startswith("the rows of the weights do not sum to 1") and "最后一维" in zh


def test_the_decoder_says_nan_instead_of_blaming_the_mask(tmp_path):
    done = run("decoder", "decoder.py", RMS_NAN, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    zh, en = verdict(done)
    assert en.startswith("RMSNorm returns NaN or inf") and "NaN" in zh
    assert "causal mask" not in done.stdout


@pytest.mark.parametrize("assignment", ["attention", "decoder"])
def test_every_failure_message_is_one_language_per_line(assignment):
    """Each fail(zh, en) in run.py: Chinese first, English second with no Chinese in it."""
    import ast

    tree = ast.parse((ROOT / "assignments" / assignment / "run.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "fail"]
    assert calls
    for call in calls:
        assert len(call.args) == 2, ast.unparse(call)
        zh, en = (ast.unparse(a) for a in call.args)
        assert CJK.search(zh) and not CJK.search(en), ast.unparse(call)
