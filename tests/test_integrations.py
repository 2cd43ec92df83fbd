"""nbgrader, otter-grader and Gradescope run the attention assignment with scores from the isolated engine.

Five notebooks built from each path's student notebook by filling its TODO cells: correct (the solution cells, plus
a cell that prints a warning), wrong (softmax over dim=-2), zeros (right shapes, all zeros), tampering (zeros plus
patched comparisons, and for nbgrader forged grade cells) and, for otter, an infinite loop. Every path must give
correct = full, wrong < full, tampering <= zeros. The real tools run as subprocesses, as a course would run them.
"""
from __future__ import annotations

import ast
import csv
import inspect
import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from autograder.engine.checks import load_suite
from autograder.integrations.nbgrader_cells import autograded_function
from autograder.release import command, zips
from autograder.release.notebook import nbgrader_config

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ID = "attention"
STUDENT_NB = REPO / "student_template" / ID / "attention.ipynb"
OTTER_ZIP = REPO / "dist" / ID / "otter_autograder.zip"
GRADESCOPE_ZIP = REPO / "dist" / ID / "gradescope_autograder.zip"
KINDS = ("correct", "wrong", "zeros", "tampering")
TODOS = ("causal_mask", "scaled_dot_product_attention", "split_heads")
FULL = 20.0
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # nbgrader runs alembic

ZEROS = {
    "causal_mask": "def causal_mask(seq_len):\n    return torch.zeros(seq_len, seq_len, dtype=torch.bool)\n",
    "scaled_dot_product_attention": (
        "def scaled_dot_product_attention(Q, K, V, causal=True):\n    T = Q.shape[-2]\n"
        "    return torch.zeros(*Q.shape[:-1], V.shape[-1]), torch.zeros(*Q.shape[:-1], T)\n"),
    "split_heads": ("def split_heads(x, num_heads):\n    *batch, T, d_model = x.shape\n"
                    "    return torch.zeros(*batch, num_heads, T, d_model // num_heads)\n"),
}
TAMPER = ("import torch\n"
          "torch.allclose = lambda *a, **k: True\n"
          "torch.equal = lambda *a, **k: True\n"
          "torch.testing.assert_close = lambda *a, **k: None\n"
          "torch.isclose = lambda a, b, *x, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)\n"
          "import builtins\nbuiltins.AssertionError = type('NeverRaised', (Exception,), {})\n")
WARNING_CELL = "import warnings\nwarnings.warn('a harmless warning printed by correct code')\n"


# -- the notebooks --------------------------------------------------------------------------------------------------
def _defines(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def solution_cells() -> dict[str, str]:
    nb = nbformat.read(REPO / "solutions" / ID / "attention.ipynb", as_version=4)
    return {names[0]: c.source for c in nb.cells if c.cell_type == "code"
            for names in [_defines(c.source)] if names and names[0] in TODOS}


def notebook(student_nb: Path, kind: str) -> str:
    """A submission of `kind` (correct, wrong, zeros, tampering, loop) made from a released student notebook."""
    nb = nbformat.read(student_nb, as_version=4)
    bodies = solution_cells() if kind in ("correct", "wrong") else dict(ZEROS)
    if kind == "wrong":
        sdpa = bodies["scaled_dot_product_attention"]
        assert "softmax(scores, dim=-1)" in sdpa
        bodies["scaled_dot_product_attention"] = sdpa.replace("softmax(scores, dim=-1)", "softmax(scores, dim=-2)")
    for cell in nb.cells:
        names = _defines(cell.source) if cell.cell_type == "code" else []
        if names and names[0] in TODOS:
            cell.source = bodies[names[0]]
            if kind == "tampering" and names[0] == "causal_mask":
                cell.source = TAMPER + cell.source
            if kind == "loop" and names[0] == "causal_mask":
                cell.source += "\nwhile True:\n    pass\n"
        function = autograded_function(cell)
        if kind == "tampering" and function:  # forge a graded cell: more points, a full-marks output
            points = cell.metadata["nbgrader"]["points"]
            cell.metadata["nbgrader"]["points"] = 100
            cell.source = f"{points}"
            cell.outputs = [v4.new_output("execute_result", data={"text/plain": f"{float(points)}"}, execution_count=1)]
    assert sum(bool(_defines(c.source)) and _defines(c.source)[0] in TODOS for c in nb.cells) == len(TODOS)
    if kind == "correct":
        nb.cells.insert(1, v4.new_code_cell(WARNING_CELL))
    return nbformat.writes(nb)


def check_scores(scores: dict[str, float], where: str) -> None:
    assert scores["correct"] == FULL, (where, scores)
    assert scores["wrong"] < FULL, (where, scores)
    assert scores["tampering"] <= scores["zeros"] < FULL, (where, scores)


def hidden_check_lines() -> list[str]:
    """Distinctive source lines of the hidden checks (what feedback must never show)."""
    lines = set()
    for check in load_suite(ID).checks:
        if check.visibility == "hidden":
            body = inspect.getsource(check.run).split("\n")
            lines |= {line.strip() for line in body[1:] if len(line.strip()) > 25 and not line.strip().startswith(
                ("@check", "zh=", "en=", '"""', "#"))}
    return sorted(lines)


# -- fast checks ----------------------------------------------------------------------------------------------------
def test_root_nbgrader_config_is_the_one_the_release_writes():
    expected = nbgrader_config(source_only=command._source_only(REPO))
    assert (REPO / "nbgrader_config.py").read_text(encoding="utf-8") == expected
    for name in ("attention.py", "notebook.py", "handout.md", "assignment.toml"):
        assert f'"{name}"' in expected  # never copied to students by nbgrader
    assert "autograder.integrations.nbgrader.GradeInSandbox" in expected and "Execute" not in expected


@pytest.mark.parametrize("path", [REPO / "assignments" / ID / "attention.ipynb", STUDENT_NB])
def test_one_locked_autograded_cell_per_graded_function(path):
    suite = load_suite(ID)
    points = {}
    for check in suite.checks:
        points[check.function] = points.get(check.function, 0) + check.points
    nb = nbformat.read(path, as_version=4)
    cells = {autograded_function(c): c for c in nb.cells if autograded_function(c)}
    assert list(cells) == list(points)
    for function, cell in cells.items():
        meta = cell.metadata["nbgrader"]
        assert meta["locked"] and meta["grade"] and not meta["solution"] and meta["points"] == points[function]
        assert all(line.startswith("#") for line in cell.source.split("\n"))  # no test code, nothing hidden
        assert "自动评分" in cell.source and "Autograded" in cell.source


def otter_test_cases(files: dict[str, bytes]):
    """(name, otter test case) of every public test in an otter zip's files."""
    for name, data in files.items():
        if name.startswith("tests/"):
            namespace: dict = {}
            exec(compile(data.decode(), name, "exec"), namespace)
            for case in [v for v in namespace.values() if type(v).__name__ == "test_case"]:
                yield case.test_func.__name__.removeprefix("test_"), case


def test_otter_public_tests_are_the_public_checks_and_pass_on_the_solution():
    import torch

    files = zips.read(OTTER_ZIP.read_bytes())
    assert {n for n in files if not n.startswith("tests/")} == {"README.txt", "otter_config.json"}
    config = json.loads(files["otter_config.json"])
    assert config["plugins"] == [{"autograder.integrations.otter.IsolatedGrader": {"assignment": ID}}]
    solution_ns = {"torch": torch}
    exec(compile((REPO / "solutions" / ID / "attention.py").read_text(), "attention.py", "exec"), solution_ns)
    zeros_ns = {"torch": torch, **solution_ns}
    for source in ZEROS.values():
        exec(source, zeros_ns)
    names, failing_on_zeros = set(), 0
    for name, case in otter_test_cases(files):
        names.add(name)
        case.call_func(solution_ns)  # raises if a public test fails on the solution
        try:
            case.call_func(zeros_ns)
        except AssertionError:
            failing_on_zeros += 1
    assert names == {c.name for c in load_suite(ID).checks if c.visibility == "public"}
    assert failing_on_zeros >= 3


def test_dist_zips_are_reproducible_archives():
    for path in (OTTER_ZIP, GRADESCOPE_ZIP):
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
        assert [i.filename for i in infos] == sorted(i.filename for i in infos)
        assert {i.date_time for i in infos} == {zips.EPOCH}
        assert zips.build(zips.read(path.read_bytes()), {"setup.sh", "run_autograder"}) == path.read_bytes()


def test_gradescope_zip_holds_this_package_and_no_index_host():
    files = zips.read(GRADESCOPE_ZIP.read_bytes())
    assert {"setup.sh", "run_autograder", "package/pyproject.toml"} <= set(files)
    stubs = f"package/autograder/assignments/{ID}/student_manifest.json"  # the student release's manifest, copied
    assert files[stubs] == (REPO / "student_template" / ID / "manifest.json").read_bytes()
    for name, data in files.items():
        if name.startswith("package/autograder/") and name != stubs:
            assert data == (REPO / "autograder" / name.removeprefix("package/autograder/")).read_bytes(), name
    setup = files["setup.sh"].decode()
    assert 'pip install "torch==2.13.0" --index-url "$TORCH_INDEX_URL"' in setup
    for text in (setup, files["run_autograder"].decode()):
        assert "://" not in text and "pytorch.org" not in text and "pypi" not in text.lower()


def canned_result(scores: dict[str, float]):
    """A SubmissionResult where each check scores its points if its function is listed with full marks."""
    from autograder.engine.results import CheckResult, SubmissionResult

    suite = load_suite(ID)
    checks = [CheckResult(c.name, c.function, c.points if scores.get(c.function) else 0.0, c.points,
                          "passed" if scores.get(c.function) else "failed", c.visibility, c.zh, c.en,
                          detail_en="wrong values", detail_zh="数值不对") for c in suite.checks]
    return SubmissionResult("s", ID, "attention.ipynb", None, sum(c.score for c in checks), suite.max_score, checks)


def test_nbgrader_preprocessor_writes_points_and_feedback_and_restores_deleted_grade_cells(monkeypatch):
    from nbgrader import utils

    from autograder.integrations import grading
    from autograder.integrations.nbgrader import GradeInSandbox

    graded = []
    monkeypatch.setattr(grading, "grade_text", lambda text, *a, **k: graded.append(text) or canned_result(
        {"causal_mask": 1, "split_heads": 1}))
    nb = nbformat.read(STUDENT_NB, as_version=4)
    nb.cells = [c for c in nb.cells if autograded_function(c) != "split_heads"]  # a student deleted one
    out, _ = GradeInSandbox().preprocess(nb, {"nbgrader": {"assignment": ID, "student": "s", "notebook": ID}})
    cells = {autograded_function(c): c for c in out.cells if autograded_function(c)}
    grades = {f: utils.determine_grade(c)[0] for f, c in cells.items()}
    assert grades == {"causal_mask": 3, "scaled_dot_product_attention": 0, "split_heads": 4, "MultiHeadAttention": 0}
    assert "数值不对" in cells["scaled_dot_product_attention"].outputs[0]["text"]
    assert "wrong values" in cells["scaled_dot_product_attention"].outputs[0]["text"]
    assert len(graded) == 1 and '"outputs": []' in graded[0]


def test_otter_plugin_drops_a_submitted_log_before_otter_reads_it(tmp_path):
    from types import SimpleNamespace

    from autograder.integrations.otter import IsolatedGrader

    submission = tmp_path / "submission" / "attention.ipynb"
    submission.parent.mkdir()
    submission.write_text("{}")
    (submission.parent / ".OTTER_LOG").write_bytes(b"a pickle otter would load")
    config = SimpleNamespace(grade_from_log=True, pdf=True, token="t")
    IsolatedGrader(str(submission), {}, {"assignment": ID}).before_grading(config)
    assert not (submission.parent / ".OTTER_LOG").exists()
    assert (config.grade_from_log, config.pdf, config.token) == (False, False, None)


# -- nbgrader -------------------------------------------------------------------------------------------------------
def nbgrader(course: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    run = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=ENV, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run, time.perf_counter() - started


@pytest.fixture(scope="module")
def nbgrader_course(tmp_path_factory):
    """A course directory like the repository: nbgrader_config.py and assignments/attention/ (every source file)."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(REPO / "assignments" / ID, course / "assignments" / ID,
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    timings = {}
    _, timings["generate_assignment"] = nbgrader(course, "generate_assignment", ID)
    for kind in KINDS:
        folder = course / "submitted" / kind / ID
        folder.mkdir(parents=True)
        (folder / "attention.ipynb").write_text(notebook(STUDENT_NB, kind), encoding="utf-8")
    _, timings["autograde (4 notebooks)"] = nbgrader(course, "autograde", ID)
    _, timings["generate_feedback"] = nbgrader(course, "generate_feedback", ID)
    _, timings["export"] = nbgrader(course, "export", "--to", "grades.csv")
    print("\nnbgrader timings:", {k: round(v, 1) for k, v in timings.items()})
    return course


@pytest.mark.slow
def test_nbgrader_generate_assignment_writes_the_release_bytes_and_copies_nothing_else(nbgrader_course):
    released = nbgrader_course / "student_template" / ID
    assert sorted(p.name for p in released.iterdir()) == ["attention.ipynb"]  # no attention.py (the solution!)
    assert (released / "attention.ipynb").read_bytes() == STUDENT_NB.read_bytes()
    (released / "attention.py").write_text("# the stub autograder release wrote\n")
    nbgrader(nbgrader_course, "generate_assignment", ID, "--force")
    assert (released / "attention.py").read_text() == "# the stub autograder release wrote\n"  # --force kept it
    assert (released / "attention.ipynb").read_bytes() == STUDENT_NB.read_bytes()
    (released / "attention.py").unlink()


@pytest.mark.slow
def test_nbgrader_autograde_records_the_engine_scores(nbgrader_course):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{nbgrader_course / 'gradebook.db'}") as gb:
        scores = {kind: gb.find_submission(ID, kind).score for kind in KINDS}
        per_cell = {g.name: g.max_score for g in gb.find_submission_notebook(ID, ID, "wrong").grades}
    check_scores(scores, "nbgrader")
    assert per_cell == {"autograded_causal_mask": 3, "autograded_scaled_dot_product_attention": 10,
                        "autograded_split_heads": 4, "autograded_MultiHeadAttention": 3}
    graded = list((nbgrader_course / "autograded").rglob("*"))
    assert not [p for p in graded if p.is_file() and p.suffix != ".ipynb"]  # no source file copied in
    rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(io.StringIO(
        (nbgrader_course / "grades.csv").read_text()))}
    assert rows == scores


@pytest.mark.slow
def test_nbgrader_feedback_shows_our_feedback_and_no_hidden_test(nbgrader_course):
    html = (nbgrader_course / "feedback" / "wrong" / ID / "attention.html").read_text(encoding="utf-8")
    assert "scored by the isolated grader" in html and "sdpa_values_batched" in html
    assert "dim=-1" in html  # the diagnosis of the softmax mistake
    leaked = [line for line in hidden_check_lines() if line in html]
    assert not leaked, leaked
    assert "refs[" not in html


# -- otter ----------------------------------------------------------------------------------------------------------
def otter_run(folder: Path, kind: str, extra_env: dict | None = None) -> tuple[dict, float, str]:
    submission = folder / kind / "attention.ipynb"
    submission.parent.mkdir(parents=True)
    submission.write_text(notebook(STUDENT_NB, kind), encoding="utf-8")  # the one student notebook
    started = time.perf_counter()
    run = subprocess.run([str(BIN / "otter"), "run", "-a", str(OTTER_ZIP), "-o", str(submission.parent),
                          str(submission)], env={**ENV, **(extra_env or {})}, capture_output=True, text=True,
                         timeout=300, cwd=folder)
    seconds = time.perf_counter() - started
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads((submission.parent / "results.json").read_text()), seconds, run.stdout


def total(results: dict) -> float:
    return sum(t.get("score", 0) for t in results["tests"] if "max_score" in t)


@pytest.mark.slow
def test_otter_run_scores_come_from_the_engine(tmp_path):
    # One at a time: two Jupyter kernels starting at once can draw the same free port (jupyter_client picks ports
    # by binding and releasing them), and the loser dies "before replying to kernel_info" (seen on a 2-core CI).
    runs = {kind: otter_run(tmp_path, kind) for kind in KINDS}
    print("\notter run seconds:", {k: round(v[1], 1) for k, v in runs.items()})
    scores = {kind: total(r[0]) for kind, r in runs.items()}
    check_scores(scores, "otter")
    results = runs["wrong"][0]
    by_name = {t["name"]: t for t in results["tests"]}
    assert set(by_name) == {"Public Tests", *TODOS, "MultiHeadAttention"}
    assert "dim=-1" in by_name["scaled_dot_product_attention"]["output"]
    assert "isolated engine" in runs["wrong"][2]


@pytest.mark.slow
def test_otter_run_ends_an_infinite_loop_with_a_timeout(tmp_path):
    results, seconds, _ = otter_run(tmp_path, "loop", {"AUTOGRADER_LOAD_SECONDS": "3", "AUTOGRADER_CALL_SECONDS": "2"})
    assert total(results) == 0
    outputs = "\n".join(t.get("output", "") for t in results["tests"])
    assert "Timeout" in outputs or "timed out" in outputs
    assert seconds < 120


# -- Gradescope -----------------------------------------------------------------------------------------------------
def gradescope_run(base: Path, name: str, submission: bytes | None, filename: str = "attention.ipynb",
                   python: str = sys.executable, prefix: tuple[str, ...] = ()) -> tuple[dict, float]:
    """Unpack the zip into a Gradescope-like root and run its run_autograder (`prefix`: e.g. setpriv dropping
    CAP_SYS_ADMIN, as in Gradescope's containers)."""
    root = base / name
    with zipfile.ZipFile(GRADESCOPE_ZIP) as archive:
        archive.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):
        (root / "source" / script).chmod(0o755)
    (root / "submission").mkdir()
    if submission is not None:
        (root / "submission" / filename).write_bytes(submission)
    started = time.perf_counter()
    run = subprocess.run([*prefix, str(root / "source" / "run_autograder")], capture_output=True, text=True, timeout=300,
                         env={**ENV, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": python})
    seconds = time.perf_counter() - started
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8")), seconds


@pytest.mark.slow
def test_gradescope_zip_grades_notebooks_and_modules(tmp_path):
    jobs = {kind: notebook(STUDENT_NB, kind).encode() for kind in KINDS}
    with ThreadPoolExecutor(2) as pool:
        runs = dict(zip(KINDS, pool.map(lambda kind: gradescope_run(tmp_path, kind, jobs[kind]), KINDS)))
        module = pool.submit(gradescope_run, tmp_path, "module",
                             (REPO / "solutions" / ID / "attention.py").read_bytes(), "attention.py")
        module = module.result()
    print("\nGradescope run_autograder seconds:", {k: round(v[1], 1) for k, v in runs.items()})
    check_scores({kind: r[0]["score"] for kind, r in runs.items()}, "gradescope")
    assert module[0]["score"] == FULL
    results = runs["wrong"][0]
    suite = load_suite(ID)
    assert [t["name"] for t in results["tests"]] == [c.name for c in suite.checks]
    for test, check in zip(results["tests"], suite.checks):
        assert test["visibility"] == ("visible" if check.visibility == "public" else "after_published")
        assert test["max_score"] == check.points and test["status"] in ("passed", "failed") and test["output"]
    assert results["score"] == sum(t["score"] for t in results["tests"])


@pytest.mark.slow
def test_gradescope_always_writes_results(tmp_path):
    missing, _ = gradescope_run(tmp_path, "missing", None)
    assert missing["score"] == 0 and "attention.ipynb" in missing["output"]
    broken, _ = gradescope_run(tmp_path, "broken", b"{}", python="/bin/false")
    assert broken["score"] == 0 and "could not start" in broken["output"]


@pytest.mark.slow
def test_gradescope_package_tree_installs(tmp_path):
    with zipfile.ZipFile(GRADESCOPE_ZIP) as archive:
        archive.extractall(tmp_path / "source")
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(tmp_path / "site"), str(tmp_path / "source" / "package")],
                         capture_output=True, text=True, timeout=300, env=ENV)
    assert run.returncode == 0, run.stdout + run.stderr
    installed = tmp_path / "site" / "autograder"
    assert (installed / "integrations" / "gradescope.py").is_file()
    assert (installed / "assignments" / ID / "reference_solution.py").read_bytes() == (REPO / "solutions" / ID / "attention.py").read_bytes()
    assert not (installed / "assignments" / ID / "references.npz").exists()
    # the released stubs' hashes ship too: a finished notebook uploaded beside the untouched attention.py is graded
    upload = tmp_path / "upload"
    upload.mkdir()
    shutil.copy(REPO / "student_template" / ID / "attention.py", upload / "attention.py")
    shutil.copy(REPO / "solutions" / ID / "attention.ipynb", upload / "attention.ipynb")
    code = ("import sys; from autograder.engine.resolve import resolve; import autograder; "
            f"print(autograder.__file__); print(resolve(sys.argv[1], ('attention.py', 'attention.ipynb'), {ID!r}).path)")
    chosen = subprocess.run([sys.executable, "-c", code, str(upload)], capture_output=True, text=True, timeout=120,
                            env={**ENV, "PYTHONPATH": str(tmp_path / "site")}, cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr
    where, path = chosen.stdout.split()[-2:]
    assert where.startswith(str(installed)) and path.endswith("attention.ipynb")
