"""Reading submissions: what is refused (with a reason a student can act on) and how notebooks become source."""
from __future__ import annotations

import nbformat
import pytest

from autograder.engine.submission import MAX_BYTES, SubmissionError, load
from conftest import SOLUTION


def notebook_with(*cells: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 作业 / Assignment")] + [nbformat.v4.new_code_cell(c) for c in cells]
    return nbformat.writes(nb)


def test_symlink_is_refused(tmp_path):
    (tmp_path / "attention.py").symlink_to(SOLUTION)
    with pytest.raises(SubmissionError, match="symbolic link"):
        load(tmp_path / "attention.py")


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "attention.py"
    path.write_bytes(b"import torch\n# caf\xe9\n")
    with pytest.raises(SubmissionError, match=r"not UTF-8 text \(byte 0xe9 on line 2\)") as e:
        load(path)
    assert "UTF-8" in e.value.text.zh


def test_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "attention.py"
    path.write_text("def f(:\n    pass\n")
    with pytest.raises(SubmissionError, match="SyntaxError on line 1"):
        load(path)


def test_oversize_file_is_refused(tmp_path):
    path = tmp_path / "attention.py"
    path.write_bytes(b"#" * (MAX_BYTES + 1))
    with pytest.raises(SubmissionError, match="limit"):
        load(path)


def test_notebook_keeps_code_in_order_and_neutralises_magics_shell_and_otter(tmp_path):
    path = tmp_path / "attention.ipynb"
    path.write_text(notebook_with("%matplotlib inline\nimport otter\ngrader = otter.Notebook()\nx = 1",
                                  "%%bash\necho hi", "!pip install torch\ny = x + 1\ngrader.check('q1')"))
    sub = load(path)
    namespace = {}
    exec(compile(sub.source, sub.filename, "exec"), namespace)
    assert namespace["y"] == 2 and sub.notebook
    assert "removed for grading: %matplotlib inline" in sub.source and "# echo hi" in sub.source


def test_invalid_notebook_is_refused(tmp_path):
    path = tmp_path / "attention.ipynb"
    path.write_text("{not json")
    with pytest.raises(SubmissionError, match="not a valid Jupyter notebook"):
        load(path)


def test_notebook_form_of_the_solution_gets_full_marks(grade):
    result = grade(SOLUTION.with_suffix(".ipynb"))
    assert result.score == result.max_score == 20, [(c.name, c.detail_en) for c in result.checks if c.score == 0]


def test_unfinished_notebook_keeps_the_points_of_finished_functions(grade, tmp_path):
    """A demo cell calling an unfinished TODO must not stop the notebook: later cells (and functions) still run."""
    solution = SOLUTION.read_text()
    unfinished = solution.replace("def split_heads(", "def _done_split_heads(", 1) + (
        "\ndef split_heads(x, num_heads):\n    raise NotImplementedError('TODO(split_heads): not yet')\n")
    path = tmp_path / "attention.ipynb"
    path.write_text(notebook_with(unfinished, "print(split_heads(None, 2))", "marker = 'later cells ran'"))
    result = grade(path)
    statuses = {c.function: c.status for c in result.checks if c.status != "passed"}
    assert statuses == {"split_heads": "not_implemented", "MultiHeadAttention": "not_implemented"}
    assert result.score == 13 and "[cell 2] NotImplementedError" in result.output
