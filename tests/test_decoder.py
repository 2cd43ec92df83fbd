"""The decoder assignment (the second chapter): every correct variant gets full marks and no diagnosis; every wrong
one loses the checks that must catch it and is told its mistake by name in Chinese and English; each attack gets its
honest score; the student release and run.py work; the notebook form goes through `autograder grade`, otter, nbgrader
and Gradescope. Fixtures: tests/fixtures/decoder/, composed onto
solutions/decoder/decoder.py by tests/fixtures/compose.py."""
from __future__ import annotations

import ast
import csv
import io
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
import torch

from conftest import ROOT, TEST_LIMITS, TEST_SEED
from fixtures.compose import FIXTURES, compose, parse_expect
from test_integrations import BIN, ENV, otter_test_cases, total
from test_integrations import nbgrader as run_nbgrader

from autograder.assignments import get
from autograder.engine.checks import load_suite
from autograder.public.forbidden import scan
from autograder.engine.runner import grade_file
from autograder.integrations.nbgrader_cells import autograded_function
from autograder.release import zips
from autograder.sandbox.client import Sandbox

HERE = FIXTURES / "decoder"
SOLUTION = ROOT / "solutions" / "decoder" / "decoder.py"
TEMPLATE = ROOT / "student_template" / "decoder"
CORRECT = sorted((HERE / "correct").glob("*.py"))
WRONG = sorted((HERE / "wrong").glob("*.py"))
HOSTILE = sorted((HERE / "hostile").glob("*.py"))
CJK = re.compile(r"[\u4e00-\u9fff]")


def base() -> str:
    return SOLUTION.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def decoder_suite():
    return load_suite("decoder")


@pytest.fixture(scope="session")
def decoder_refs(decoder_suite):
    return decoder_suite.references(seed=TEST_SEED)


@pytest.fixture(scope="session")
def decoder_grade(decoder_suite, decoder_refs, tmp_path_factory):
    """grade(source_or_path) -> SubmissionResult, in a sandbox of its own with the decoder's forbidden APIs."""
    folder = tmp_path_factory.mktemp("decoder_submissions")
    with Sandbox(TEST_LIMITS, isolate=True, secrets=[str(ROOT)], slots=4, forbidden=list(get("decoder").forbidden)) as box:
        def run(source):
            if isinstance(source, Path):
                path = source
            else:
                path = folder / f"{abs(hash(source))}" / "decoder.py"
                path.parent.mkdir(exist_ok=True)
                path.write_text(source, encoding="utf-8")
            return grade_file(path, "student", decoder_suite, box, TEST_LIMITS, decoder_refs)

        yield run


def not_passed(result) -> list[tuple[str, str, str]]:
    return [(c.name, c.status, c.detail_en[:160]) for c in result.checks if c.status != "passed"]


def test_catalog_sizes_and_points(decoder_suite):
    assert len(WRONG) >= 12 and len(CORRECT) >= 6 and len(HOSTILE) >= 3
    assert decoder_suite.max_score == 20
    assert {c.function for c in decoder_suite.checks} == {"rms_norm", "SwiGLU", "DecoderLayer"}


def test_solution_gets_full_marks_and_the_stub_gets_zero_as_not_implemented(decoder_grade):
    full = decoder_grade(SOLUTION)
    assert full.score == full.max_score == 20, not_passed(full)
    stub = decoder_grade(TEMPLATE / "decoder.py")
    assert stub.score == 0 and {c.status for c in stub.checks} == {"not_implemented"}


@pytest.mark.parametrize("fixture", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_variant_gets_full_marks(fixture, decoder_grade):
    assert parse_expect(fixture) == {"kind": "full"}
    result = decoder_grade(compose(fixture, base()))
    assert result.score == result.max_score, not_passed(result)
    assert not any(c.diagnosis for c in result.checks)


@pytest.mark.parametrize("fixture", WRONG, ids=[p.stem for p in WRONG])
def test_wrong_variant_loses_its_checks_and_is_diagnosed(fixture, decoder_grade):
    expected = parse_expect(fixture)
    result = decoder_grade(compose(fixture, base()))
    failed = {c.name for c in result.checks if c.status != "passed"}
    diagnoses = {c.diagnosis for c in result.checks if c.diagnosis}
    also = {a for a in expected.get("also", "").split(",") if a}
    if expected["kind"] == "score":  # code that does nothing: the spec's structural policy leaves it this much
        assert result.score <= expected["score"] < result.max_score, not_passed(result)
        assert diagnoses <= also
        return
    assert set(expected["lose"]) <= failed, not_passed(result)
    assert expected["diagnosis"] in diagnoses, (diagnoses, not_passed(result)[:5])
    for c in result.checks:
        if c.diagnosis:  # plain words in both languages
            assert re.fullmatch(r"[a-z][a-z0-9_]*", c.diagnosis)
            assert CJK.search(c.diagnosis_zh) and c.diagnosis_en and not CJK.search(c.diagnosis_en), c.diagnosis


@pytest.mark.parametrize("fixture", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_attack_gets_exactly_its_honest_score_beside_a_correct_student(fixture, decoder_grade):
    with ThreadPoolExecutor(2) as pool:
        attack = pool.submit(decoder_grade, compose(fixture, base()))
        neighbour = pool.submit(decoder_grade, SOLUTION)
        result, beside = attack.result(), neighbour.result()
    assert result.score == parse_expect(fixture)["score"], not_passed(result)
    assert not any("internal grader error" in c.detail_en for c in result.checks), not_passed(result)
    assert beside.score == beside.max_score == 20, not_passed(beside)


def test_the_given_code_uses_no_forbidden_api():
    """The attention copied from chapter one, RMSNorm and the __init__ methods: nothing the scan would flag."""
    assert scan(base(), list(get("decoder").forbidden), None, "decoder") == {}


def test_every_check_catches_some_wrong_fixture():
    """No check is dead weight: each one is listed as lost by at least one wrong fixture (which the test above
    then verifies), so each can fail."""
    lost = {name for p in WRONG for name in parse_expect(p).get("lose", [])}
    suite = load_suite("decoder")
    missing = {c.name for c in suite.checks} - lost - {"rms_shape", "swiglu_shape", "layer_shape"}
    assert not missing, missing


def test_shape_checks_fail_on_a_wrong_shape(decoder_grade):
    """The three shape checks, which no realistic wrong fixture above is listed for (except rms_shape), on outputs of
    the wrong shape."""
    source = base() + (
        "\n\n_rms, _mlp_forward, _layer_forward = rms_norm, SwiGLU.forward, DecoderLayer.forward\n"
        "rms_norm = lambda x, weight, eps=1e-6: _rms(x, weight, eps)[..., :1]\n"
        "SwiGLU.forward = lambda self, x: _mlp_forward(self, x)[..., :1]\n"
        "DecoderLayer.forward = lambda self, x, causal=True: _layer_forward(self, x, causal)[..., :1]\n")
    failed = {c.name for c in decoder_grade(source).checks if c.status != "passed"}
    assert {"rms_shape", "swiglu_shape", "layer_shape"} <= failed


def test_references_follow_the_seed_and_the_seed42_model_is_run_py(decoder_suite):
    a, b = decoder_suite.references(seed=1), decoder_suite.references(seed=2)
    assert a.keys() == b.keys() and not torch.equal(a["layer.full.x"], b["layer.full.x"])
    from autograder.assignments.decoder.cases import seed42_model

    weights, x = seed42_model()
    sys.path.insert(0, str(SOLUTION.parent))
    try:
        import decoder as solution
    finally:
        sys.path.pop(0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(42)
        layer = solution.DecoderLayer(8, 2, 16)
        x42 = torch.randn(2, 4, 8)
    assert torch.equal(x, x42) and all(torch.equal(layer.state_dict()[k], v) for k, v in weights.items())


def test_release_is_current_and_the_stub_names_its_todos():
    check = subprocess.run([sys.executable, "-m", "autograder", "release", "--assignment", "decoder", "--check"],
                           cwd=ROOT, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    stub = (TEMPLATE / "decoder.py").read_text(encoding="utf-8")
    for todo in ("rms_norm", "SwiGLU", "DecoderLayer"):
        assert f'raise NotImplementedError("TODO({todo}):' in stub
    assert "### BEGIN SOLUTION" not in stub and "x.pow(2).mean(dim=-1, keepdim=True)" not in stub


def test_run_py_prints_the_handout_numbers_with_the_solution_and_names_the_todos_on_the_stub():
    solved = subprocess.run([sys.executable, str(SOLUTION.parent / "run.py")], capture_output=True, text=True)
    assert solved.returncode == 0, solved.stderr
    handout = (TEMPLATE / "README.md").read_text(encoding="utf-8")
    rows = [line for line in solved.stdout.splitlines() if line.startswith("  t")]
    assert len(rows) == 4 and all(row in handout for row in rows)
    stub = subprocess.run([sys.executable, str(TEMPLATE / "run.py")], capture_output=True, text=True)
    assert stub.returncode == 1
    assert all(f"TODO({t})" in stub.stdout for t in ("rms_norm", "SwiGLU", "DecoderLayer"))


DEMO = {"s01_zhang_wei": 20, "s02_olivia_brown": 20, "s03_liu_yang": 18, "s04_noah_wilson": 11, "s05_huang_min": 11,
        "s06_ava_davis": 7, "s07_sun_hao": 0, "s08_mia_garcia": 18}  # shape points count beside a passing value check


DEMO_NOTEBOOK = "s03_liu_yang"  # hands in the notebook form (eps outside the square root, as in the module form)


def test_demo_class_scores(decoder_grade):
    folder = ROOT / "examples" / "decoder_class"
    assert sorted(p.name for p in folder.iterdir()) == sorted(DEMO)
    files = {name: [p.name for p in (folder / name).iterdir()] for name in DEMO}
    assert files == {name: ["decoder.ipynb" if name == DEMO_NOTEBOOK else "decoder.py"] for name in DEMO}
    scores = {name: decoder_grade(folder / name / files[name][0]).score for name in DEMO}
    assert scores == DEMO


def test_gradescope_zip_grades_the_module_under_an_lms_copy_name(tmp_path):
    """The module form through the Gradescope zip, under a name an LMS gives a copy: `Decoder (1).py`."""
    scores = {}
    for name, source in {"solution": base(), "post_norm": compose(HERE / "wrong" / "post_norm.py", base())}.items():
        root = tmp_path / name
        with zipfile.ZipFile(ROOT / "dist" / "decoder" / "gradescope_autograder.zip") as archive:
            archive.extractall(root / "source")
        (root / "source" / "run_autograder").chmod(0o755)
        (root / "submission").mkdir()
        (root / "submission" / "Decoder (1).py").write_text(source, encoding="utf-8")
        run = subprocess.run([str(root / "source" / "run_autograder")], capture_output=True, text=True, timeout=300,
                             env={"PATH": "/usr/bin:/bin", "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable})
        assert run.returncode == 0, run.stdout + run.stderr
        scores[name] = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))["score"]
    assert scores["solution"] == 20 and scores["post_norm"] < 20, scores


# -- the notebook form ----------------------------------------------------------------------------------------------
# decoder.ipynb (assignments/decoder/notebook.py) through every path attention's notebook takes: `autograder grade`,
# otter run, nbgrader autograde and the Gradescope zip. Two submissions, made from each path's released student
# notebook: `solution` (the solution notebook's three graded cells) and `post_norm` (the same, with the DecoderLayer cell
# replaced by the post_norm fixture's class): 20 and less than 20, everywhere.
SOLUTION_NB = ROOT / "solutions" / "decoder" / "decoder.ipynb"
STUDENT_NB = TEMPLATE / "decoder.ipynb"
OTTER_ZIP = ROOT / "dist" / "decoder" / "otter_autograder.zip"
GRADESCOPE_ZIP = ROOT / "dist" / "decoder" / "gradescope_autograder.zip"
GRADED = ("rms_norm", "SwiGLU", "DecoderLayer")
NB_KINDS = ("solution", "post_norm")
POINTS = {"rms_norm": 7, "SwiGLU": 4, "DecoderLayer": 9}


def _first_def(source: str) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return names[0] if names else None


def graded_cells(path: Path) -> dict[str, str]:
    """Graded name -> source of the code cell that defines it (the first name a cell defines)."""
    nb = nbformat.read(path, as_version=4)
    return {name: c.source for c in nb.cells if c.cell_type == "code"
            for name in [_first_def(c.source)] if name in GRADED}


def decoder_notebook(student_nb: Path, kind: str) -> str:
    """A submission of `kind` (solution, post_norm) made from a released student notebook (nbgrader's or otter's)."""
    nb = nbformat.read(student_nb, as_version=4)
    bodies = graded_cells(SOLUTION_NB)
    if kind == "post_norm":
        bodies["DecoderLayer"] = compose(HERE / "wrong" / "post_norm.py", bodies["DecoderLayer"])
        assert "self.norm1(x + self.attn(x" in bodies["DecoderLayer"]
    filled = 0
    for cell in nb.cells:
        name = _first_def(cell.source) if cell.cell_type == "code" else None
        if name in GRADED:
            assert "NotImplementedError" in cell.source  # the released stub
            cell.source, filled = bodies[name], filled + 1
    assert filled == len(GRADED)
    return nbformat.writes(nb)


@pytest.mark.parametrize("path", [ROOT / "assignments" / "decoder" / "decoder.ipynb", STUDENT_NB],
                         ids=["nbgrader_source", "student"])
def test_notebook_has_one_locked_autograded_cell_per_graded_function_right_after_it(path):
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if autograded_function(c)]
    assert [autograded_function(c) for c in cells] == list(GRADED)
    for cell in cells:
        meta = cell.metadata["nbgrader"]
        assert meta["locked"] and meta["grade"] and not meta["solution"]
        assert meta["points"] == POINTS[autograded_function(cell)]
        assert all(line.startswith("#") for line in cell.source.split("\n"))  # no test code, nothing hidden
        before = nb.cells[nb.cells.index(cell) - 1]
        assert _first_def(before.source) == autograded_function(cell)  # the defining cell comes just before


def test_student_notebook_holds_the_given_code_the_stubs_and_the_grading_guard():
    text = STUDENT_NB.read_text(encoding="utf-8")
    source = "\n".join(c.source for c in nbformat.read(STUDENT_NB, as_version=4).cells if c.cell_type == "code")
    for name in ("causal_mask", "scaled_dot_product_attention", "split_heads", "merge_heads", "MultiHeadAttention",
                 "RMSNorm"):
        assert f"\n{'class' if name[0].isupper() else 'def'} {name}" in "\n" + source
    assert source.count('raise NotImplementedError("TODO: 见上方提示 / see the hint above")') == 3
    assert 'GRADING = bool(os.environ.get("AUTOGRADER_GRADING"))' in source
    assert "x.pow(2).mean(dim=-1, keepdim=True)" not in text and "BEGIN SOLUTION" not in text
    assert "python check.py" in text and 'grader.check("rms_norm")' in source
    assert "python check.py decoder.ipynb" in (TEMPLATE / "README.md").read_text(encoding="utf-8")


def test_solution_notebook_runs_and_prints_the_seed42_numbers_of_run_py():
    """The notebook's code cells, run top to bottom in a plain interpreter with AUTOGRADER_GRADING unset (so the
    experiment runs too): the y[0] rows are run.py's."""
    code = "\n".join(c.source for c in nbformat.read(SOLUTION_NB, as_version=4).cells if c.cell_type == "code")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in ENV.items() if k != "AUTOGRADER_GRADING"}, cwd=SOLUTION.parent)
    assert run.returncode == 0, run.stderr[-3000:]
    module = subprocess.run([sys.executable, str(SOLUTION.parent / "run.py")], capture_output=True, text=True)
    rows = [line for line in module.stdout.splitlines() if line.startswith("  t")]
    assert len(rows) == 4 and all(row in run.stdout.splitlines() for row in rows)
    assert "changing the last token leaves earlier tokens unchanged (causal): True" in run.stdout
    assert " DecoderLayer: output == input: True" in run.stdout and "PostNormLayer: output == input: False" in run.stdout


def test_solution_notebook_gets_full_marks_and_a_post_norm_cell_loses_points(decoder_grade, tmp_path):
    results = {}
    for kind in ("stub", *NB_KINDS):
        path = tmp_path / kind / "decoder.ipynb"
        path.parent.mkdir()
        if kind == "stub":
            shutil.copy(STUDENT_NB, path)
        else:
            path.write_text(decoder_notebook(STUDENT_NB, kind), encoding="utf-8")
        results[kind] = decoder_grade(path)
    assert results["solution"].score == 20, not_passed(results["solution"])
    assert results["stub"].score == 0 and {c.status for c in results["stub"].checks} == {"not_implemented"}
    wrong = results["post_norm"]
    assert 0 < wrong.score < 20 and {"layer_seed42", "layer_zero_sublayers"} <= {c.name for c in wrong.checks
                                                                                 if c.status != "passed"}
    assert "post_norm" in {c.diagnosis for c in wrong.checks if c.diagnosis}
    assert all(c.status == "passed" for c in wrong.checks if c.function != "DecoderLayer")


def test_autograder_grade_scores_a_folder_of_notebooks(tmp_path):
    folder = tmp_path / "class"
    for kind in NB_KINDS:
        (folder / kind).mkdir(parents=True)
        (folder / kind / "decoder.ipynb").write_text(decoder_notebook(STUDENT_NB, kind), encoding="utf-8")
    (folder / "untouched").mkdir()
    shutil.copy(STUDENT_NB, folder / "untouched" / "decoder.ipynb")
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", str(folder), "--out", str(tmp_path / "out"),
                          "-q"], capture_output=True, text=True, timeout=600, cwd=tmp_path)  # --assignment inferred
    print(f"\nautograder grade (3 notebooks): {time.perf_counter() - started:.1f} s")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO((tmp_path / "out" / "grades.csv").read_text()))}
    assert {k: float(r["score"]) for k, r in rows.items()} == {"post_norm": float(rows["post_norm"]["score"]),
                                                               "solution": 20.0, "untouched": 0.0}
    assert 0 < float(rows["post_norm"]["score"]) < 20 and rows["post_norm"]["layer_seed42"] == "0"
    assert "rms_shape" in rows["solution"] and "layer_zero_sublayers" in rows["solution"]


def test_otter_public_tests_are_the_public_checks_pass_on_the_solution_and_fail_on_the_stub():
    files = zips.read(OTTER_ZIP.read_bytes())
    assert {n for n in files if not n.startswith("tests/")} == {"README.txt", "otter_config.json"}
    config = json.loads(files["otter_config.json"])
    assert config["plugins"] == [{"autograder.integrations.otter.IsolatedGrader": {"assignment": "decoder"}}]
    namespaces = {}
    for kind, path in (("solution", SOLUTION), ("stub", TEMPLATE / "decoder.py")):
        namespaces[kind] = {}
        exec(compile(path.read_text(encoding="utf-8"), path.name, "exec"), namespaces[kind])
    names, failing_on_stub = set(), 0
    for name, case in otter_test_cases(files):
        names.add(name)
        case.call_func(namespaces["solution"])  # raises if a public test fails on the solution
        try:
            case.call_func(namespaces["stub"])
        except Exception:  # NotImplementedError from a TODO, or an AssertionError
            failing_on_stub += 1
    public = {c.name for c in load_suite("decoder").checks if c.visibility == "public"}
    assert names == public and len(public) == 6
    assert failing_on_stub == len(public)


def test_otter_public_tests_catch_post_norm():
    """The seed-42 test (the handout's y) fails on the post-norm layer, which the shape tests do not see."""
    ns: dict = {}
    exec(compile(compose(HERE / "wrong" / "post_norm.py", base()), "decoder.py", "exec"), ns)
    for name, case in otter_test_cases(zips.read(OTTER_ZIP.read_bytes())):
        if name == "layer_seed42":
            with pytest.raises(AssertionError, match="y"):
                case.call_func(ns)
        else:
            case.call_func(ns)


@pytest.mark.slow
def test_otter_run_scores_the_decoder_notebook_from_the_engine(tmp_path):
    runs = {}
    for kind in NB_KINDS:  # one at a time: two kernels starting at once can draw the same port
        submission = tmp_path / kind / "decoder.ipynb"
        submission.parent.mkdir()
        submission.write_text(decoder_notebook(STUDENT_NB, kind), encoding="utf-8")
        started = time.perf_counter()
        run = subprocess.run([str(BIN / "otter"), "run", "-a", str(OTTER_ZIP), "-o", str(submission.parent),
                              str(submission)], env=ENV, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        runs[kind] = json.loads((submission.parent / "results.json").read_text()), time.perf_counter() - started
    print("\notter run seconds:", {k: round(v[1], 1) for k, v in runs.items()})
    scores = {kind: total(r[0]) for kind, r in runs.items()}
    assert scores["solution"] == 20 and scores["post_norm"] < 20, scores
    by_name = {t["name"]: t for t in runs["post_norm"][0]["tests"]}
    assert set(by_name) == {"Public Tests", *GRADED}
    assert by_name["rms_norm"]["score"] == 7 and by_name["SwiGLU"]["score"] == 4 and by_name["DecoderLayer"]["score"] < 9


@pytest.fixture(scope="module")
def decoder_nbgrader_course(tmp_path_factory):
    """A course directory like the repository (nbgrader_config.py and assignments/decoder/), graded by nbgrader."""
    course = tmp_path_factory.mktemp("decoder_course")
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "assignments" / "decoder", course / "assignments" / "decoder",
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    timings = {}
    _, timings["generate_assignment"] = run_nbgrader(course, "generate_assignment", "decoder")
    for kind in NB_KINDS:
        folder = course / "submitted" / kind / "decoder"
        folder.mkdir(parents=True)
        (folder / "decoder.ipynb").write_text(decoder_notebook(STUDENT_NB, kind), encoding="utf-8")
    _, timings["autograde (2 notebooks)"] = run_nbgrader(course, "autograde", "decoder")
    print("\nnbgrader timings:", {k: round(v, 1) for k, v in timings.items()})
    return course


@pytest.mark.slow
def test_nbgrader_releases_the_student_notebook_and_autograde_records_the_engine_scores(decoder_nbgrader_course):
    from nbgrader.api import Gradebook

    released = decoder_nbgrader_course / "student_template" / "decoder"
    assert sorted(p.name for p in released.iterdir()) == ["decoder.ipynb"]  # no decoder.py (the solution!)
    assert (released / "decoder.ipynb").read_bytes() == STUDENT_NB.read_bytes()
    with Gradebook(f"sqlite:///{decoder_nbgrader_course / 'gradebook.db'}") as gb:
        scores = {kind: gb.find_submission("decoder", kind).score for kind in NB_KINDS}
        grades = {g.name: (g.score, g.max_score)
                  for g in gb.find_submission_notebook("decoder", "decoder", "post_norm").grades}
    assert scores["solution"] == 20 and scores["post_norm"] < 20, scores
    assert grades["autograded_rms_norm"] == (7, 7) and grades["autograded_SwiGLU"] == (4, 4)
    assert grades["autograded_DecoderLayer"][0] < 9 == grades["autograded_DecoderLayer"][1]
    graded = [p for p in (decoder_nbgrader_course / "autograded").rglob("*") if p.is_file()]
    assert graded and all(p.suffix == ".ipynb" for p in graded)  # no source file copied in


def test_gradescope_zip_grades_the_notebook(tmp_path):
    scores, seconds = {}, {}
    for kind in NB_KINDS:
        root = tmp_path / kind
        with zipfile.ZipFile(GRADESCOPE_ZIP) as archive:
            archive.extractall(root / "source")
        (root / "source" / "run_autograder").chmod(0o755)
        (root / "submission").mkdir()
        (root / "submission" / "decoder.ipynb").write_text(decoder_notebook(STUDENT_NB, kind), encoding="utf-8")
        started = time.perf_counter()
        run = subprocess.run([str(root / "source" / "run_autograder")], capture_output=True, text=True, timeout=300,
                             env={"PATH": "/usr/bin:/bin", "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable})
        seconds[kind] = round(time.perf_counter() - started, 1)
        assert run.returncode == 0, run.stdout + run.stderr
        results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
        scores[kind] = results["score"]
        assert [t["name"] for t in results["tests"]] == [c.name for c in load_suite("decoder").checks]
    print("\nGradescope run_autograder seconds:", seconds)
    assert scores["solution"] == 20 and scores["post_norm"] < 20, scores
