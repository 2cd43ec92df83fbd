"""`autograder check`: the student's own run of the public tests, through the real CLI in a copy of the template."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from autograder.engine.checks import load_suite
from conftest import TEST_SEED

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "student_template" / "attention"
SOLUTION = ROOT / "solutions" / "attention"
TODOS = ("TODO(causal_mask)", "TODO(scaled_dot_product_attention)", "TODO(split_heads)")


def check(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    env.pop("AUTOGRADER_GRADING", None)
    return subprocess.run([sys.executable, "-m", "autograder", "check", *args], cwd=folder, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=180)


@pytest.fixture
def folder(tmp_path) -> Path:
    """A fresh copy of the student release, as a student unpacks it."""
    target = tmp_path / "attention"
    shutil.copytree(TEMPLATE, target)
    return target


def with_solution(folder: Path, old: str | None = None, new: str | None = None) -> Path:
    text = (SOLUTION / "attention.py").read_text(encoding="utf-8")
    if old is not None:
        assert old in text
        text = text.replace(old, new)
    (folder / "attention.py").write_text(text, encoding="utf-8")
    future = time.time() + 5  # the file being worked on is the one changed last
    os.utime(folder / "attention.py", (future, future))
    return folder


def test_stubs_exit_nonzero_and_list_the_three_todos(folder):
    result = check(folder, "--lang", "en")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    for todo in TODOS:
        assert todo in out
    assert "not yet implemented" in out
    assert "0 of 7 public tests passed" in out
    assert "hidden tests will check more" not in out
    for function in ("causal_mask", "scaled_dot_product_attention", "split_heads", "MultiHeadAttention"):
        assert function in out
    assert "torch.triu(..., diagonal=1)" in out  # the TODO's hint from assignment.toml


def test_correct_file_exits_zero_and_says_hidden_tests_check_more(folder):
    result = check(with_solution(folder), "--lang", "en")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All 7 public tests passed" in result.stdout and "公开测试" not in result.stdout
    assert "Public tests passed; hidden tests will check more (other lengths" in result.stdout
    assert "TODO(" not in result.stdout


def test_default_language_is_the_course_language_and_both_languages_work(folder):
    with_solution(folder)
    zh = check(folder)  # assignment.toml: default_lang = "zh"
    assert zh.returncode == 0
    assert "公开测试 · 注意力机制" in zh.stdout and "检查的文件: attention.py" in zh.stdout
    assert "公开测试已全部通过" in zh.stdout and "隐藏测试会检查更多" in zh.stdout
    assert "hidden tests will check more" not in zh.stdout  # one language per message
    bad = check(folder, "--lang", "fr")
    assert bad.returncode == 2 and "--lang" in bad.stderr


def test_mask_that_hides_the_diagonal_fails_and_is_explained(folder):
    with_solution(folder, "diagonal=1)", "diagonal=0)")
    en = check(folder, "--lang", "en")
    assert en.returncode == 1
    assert "✘ failed" in en.stdout
    assert "Your mask also hides the diagonal" in en.stdout
    assert "Use diagonal=1" in en.stdout
    zh = check(folder, "--lang", "zh")
    assert zh.returncode == 1
    assert "你的 mask 连对角线也遮住了" in zh.stdout and "Your mask" not in zh.stdout


def test_plot_writes_a_png_next_to_the_file(folder):
    with_solution(folder)
    result = check(folder, "--plot", "--lang", "en")
    assert result.returncode == 0, result.stdout + result.stderr
    png = folder / "attention_check.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "Picture saved" in result.stdout


def test_plot_of_unfinished_stubs_still_draws_and_still_fails(folder):
    result = check(folder, "--plot", "--lang", "en")
    assert result.returncode == 1
    assert (folder / "attention_check.png").is_file()


def test_notebook_form(folder):
    stub = check(folder, "attention.ipynb", "--lang", "en")
    assert stub.returncode == 1
    assert "TODOs still to do" in stub.stdout  # the notebook ran on past its unfinished cells, as in grading
    for todo in TODOS:
        assert todo in stub.stdout
    shutil.copy(SOLUTION / "attention.ipynb", folder / "attention.ipynb")
    future = time.time() + 5
    os.utime(folder / "attention.ipynb", (future, future))
    solved = check(folder, "--lang", "en")  # the folder: the notebook is the file changed last
    assert solved.returncode == 0, solved.stdout + solved.stderr
    assert "checked: attention.ipynb" in solved.stdout
    assert "hidden tests will check more" in solved.stdout


def test_missing_file_is_a_usage_error(tmp_path):
    result = check(tmp_path, "--lang", "en")
    assert result.returncode == 2
    assert "Nothing to check" in result.stderr


def test_the_student_flow_does_not_import_matplotlib(folder):
    with_solution(folder)
    code = ("import sys\nfrom pathlib import Path\nfrom autograder.student.check import run_check_command\n"
            "rc = run_check_command(Path('.'), 'en', False, 'attention')\n"
            "print('RC', rc, 'matplotlib' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True,
                            timeout=180)
    assert "RC 0 False" in result.stdout, result.stdout + result.stderr


# -- the in-process student behaves like the sandboxed one -------------------------------------------------------
@pytest.fixture
def restore_torch():
    """The in-process worker wraps the forbidden torch APIs (as the sandboxed one does): undo that afterwards."""
    import importlib

    names = [n for n in load_suite("attention").forbidden if not n.startswith(("op:", "aten::"))]
    saved = []
    for qualname in names:
        owner_name, _, attr = qualname.rpartition(".")
        try:
            owner = importlib.import_module(owner_name)
        except ImportError:
            continue
        if hasattr(owner, attr):
            saved.append((owner, attr, getattr(owner, attr)))
    yield
    for owner, attr, value in saved:
        setattr(owner, attr, value)


def test_local_student_passes_every_check_of_the_solution_including_hidden_ones(restore_torch):
    from autograder.engine.runner import run_check
    from autograder.student.check import load_student

    suite = load_suite("attention")
    student, session = load_student(SOLUTION / "attention.py", suite.spec.functions)
    results = [run_check(c, student, suite.references(seed=TEST_SEED), suite) for c in suite.checks]
    assert [r.name for r in results if r.status != "passed"] == []
    reply = student.call("scaled_dot_product_attention", torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 2),
                         grad_of=(0, 1, 2), repeat=2)
    assert len(reply.grads) == 3 and all(type(g) is torch.Tensor for g in reply.grads)
    assert torch.equal(reply.again[0], reply.value[0])


def test_local_student_reports_the_same_diagnosis_as_the_grader(tmp_path, restore_torch):
    from autograder.engine.runner import run_check
    from autograder.student.check import load_student

    path = with_solution(tmp_path, "diagonal=1)", "diagonal=0)") / "attention.py"
    suite = load_suite("attention").public()
    student, _ = load_student(path, suite.spec.functions)
    results = {c.name: run_check(c, student, {}, suite) for c in suite.checks}
    assert results["mask_values_small"].status == "failed"
    assert results["mask_values_small"].diagnosis == "mask_includes_diagonal"
    assert results["mask_dtype_shape"].status == "passed"
