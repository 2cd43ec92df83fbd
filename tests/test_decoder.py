"""The decoder assignment (the second chapter): every correct variant gets full marks and no diagnosis; every wrong
one loses the checks that must catch it and is told its mistake by name in Chinese and English; each attack gets its
honest score; the student release and run.py work. Fixtures: tests/fixtures/decoder/, composed onto
solutions/decoder/decoder.py by tests/fixtures/compose.py."""
from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from conftest import ROOT, TEST_LIMITS, TEST_SEED
from fixtures.compose import FIXTURES, compose, parse_expect

from autograder.assignments.decoder.spec import FORBIDDEN
from autograder.engine.checks import load_suite
from autograder.engine.forbidden import scan
from autograder.engine.runner import grade_file
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
    with Sandbox(TEST_LIMITS, isolate=True, secrets=[str(ROOT)], slots=4, forbidden=FORBIDDEN) as box:
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
    assert set(expected["lose"]) <= failed, not_passed(result)
    diagnoses = {c.diagnosis for c in result.checks if c.diagnosis}
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
    assert scan(base(), list(FORBIDDEN), None, "decoder") == {}


def test_every_check_catches_some_wrong_fixture():
    """No check is dead weight: each one is listed as lost by at least one wrong fixture (which the test above
    then verifies), so each can fail."""
    lost = {name for p in WRONG for name in parse_expect(p)["lose"]}
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


DEMO = {"s01_zhang_wei": 20, "s02_olivia_brown": 20, "s03_liu_yang": 19, "s04_noah_wilson": 13, "s05_huang_min": 12,
        "s06_ava_davis": 7, "s07_sun_hao": 4, "s08_mia_garcia": 19}


def test_demo_class_scores(decoder_grade):
    folder = ROOT / "examples" / "decoder_class"
    assert sorted(p.name for p in folder.iterdir()) == sorted(DEMO)
    scores = {name: decoder_grade(folder / name / "decoder.py").score for name in DEMO}
    assert scores == DEMO


def test_gradescope_zip_grades_the_module_under_an_lms_copy_name(tmp_path):
    """The decoder has no notebook form: its Gradescope zip is still released, and grades `Decoder (1).py`."""
    import json
    import zipfile

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
