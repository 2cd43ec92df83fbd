"""The students' checker (student_template/<id>/check.py + checker/): it runs from the released folder alone with
the instructor's package unimportable, holds nothing hidden, catches what the contract and the published numbers
reveal with the grader's own diagnosis, and is the very code the grader runs for the public checks."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autograder.assignments import discover
from autograder.engine.checks import load_suite
from autograder.release import command, leaks
from fixtures.compose import FIXTURES, base_solution_source, compose, parse_expect

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(discover())
# Runs check.py (or a snippet) with every `autograder` import refused: the instructor's package is "absent".
REFUSE = r"""
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "autograder" or name.startswith("autograder."):
            raise ImportError("the instructor's package is not available here")
sys.meta_path.insert(0, Refuse())
"""
OUTCOMES = REFUSE + r"""
import json
sys.path.insert(0, ".")
from checker import cli
for o in cli.check_file(sys.argv[1])[0]:
    print(json.dumps({"check": o.check.name, "status": o.status, "diagnosis": o.diagnosis and o.diagnosis.id,
                      "text": o.diagnosis and o.diagnosis.text.en}))
assert not any(m == "autograder" or m.startswith("autograder.") for m in sys.modules)
"""


def released_folder(tmp_path: Path, assignment: str) -> Path:
    """A fresh folder holding only the released student folder."""
    folder = tmp_path / assignment
    shutil.copytree(ROOT / "student_template" / assignment, folder)
    return folder


def module_name(assignment: str) -> str:
    return json.loads((ROOT / "student_template" / assignment / "checker" / "public_facts.json").read_text())[
        "assignment"]["module"]


def run_check(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", REFUSE + "import runpy; sys.argv = ['check.py', *sys.argv[1:]]; "
                           "runpy.run_path('check.py', run_name='__main__')", *args],
                          cwd=folder, capture_output=True, text=True, timeout=300)


def outcomes(folder: Path, source: str, name: str) -> dict[str, dict]:
    (folder / name).write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", OUTCOMES, name], cwd=folder, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {o["check"]: o for o in map(json.loads, done.stdout.splitlines())}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_handouts_command_runs_with_the_instructors_package_absent(tmp_path, assignment):
    folder = released_folder(tmp_path, assignment)
    stub = run_check(folder, "--lang", "en")
    assert stub.returncode == 1, stub.stderr[-2000:]
    assert "[not yet implemented]" in stub.stdout and "passed." in stub.stdout
    (folder / module_name(assignment)).write_text(base_solution_source(assignment), encoding="utf-8")
    done = run_check(folder)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    public = [c for c in load_suite(assignment).checks if c.visibility == "public"]
    assert done.stdout.count("✅ [通过]") == len(public) and f"{len(public)}/{len(public)} 通过" in done.stdout
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "python check.py" in readme  # the handout names the command


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_checker_holds_no_hidden_check_input_reference_or_solution_line(assignment):
    release = command.build(ROOT, assignment)
    prefix = f"student_template/{assignment}/"
    shipped = {p.removeprefix(prefix): b for p, b in release.outputs.items()
               if p.startswith(prefix + "checker/") or p == prefix + "check.py"}
    assert shipped and not leaks.find_leaks(shipped, release.secrets)
    for name, data in shipped.items():
        text = data.decode("utf-8")
        assert "autograder" not in text.replace("autograder release", "").replace("autograder.public", ""), name
        assert "refs[" not in text and "reference_solution" not in text, name
    suite = load_suite(assignment)
    hidden = {c.name for c in suite.checks if c.visibility == "hidden"}
    code = "\n".join(data.decode() for name, data in shipped.items() if name.endswith(".py"))
    assert not [name for name in hidden if f"def {name}(" in code]
    facts = json.loads(shipped["checker/public_facts.json"])
    published = [torch.tensor(t["data"]) for case in facts["cases"].values()
                 for t in [*case["inputs"].values(), *case["expected"].values()] if len(t["data"]) >= 4]
    for seed in (0, 1):  # two students' hidden inputs and references: none is among the published tensors
        for key, ref in suite.references(seed).items():
            if key.startswith("seed42."):  # the chapter's seed-42 example: the same for everyone, published
                continue
            flat = ref.detach().double().reshape(-1)
            assert not any(p.numel() == flat.numel() and torch.allclose(p.double(), flat) for p in published
                           if ref.numel() >= 4 and not bool((flat == flat[0]).all())), key


# Mistakes the handout's contract and published numbers reveal: they fail locally, named as the grader names them.
REVEALED = {"attention": ("split_no_transpose", "k_dot_T", "k_transpose_0_1", "softmax_dim0", "softmax_no_keepdim",
                          "no_scaling", "causal_mask_includes_diagonal", "uses_torch_sdpa",
                          "causal_mask_sliced_from_8"),
            "decoder": ("rms_eps_outside_sqrt", "rms_no_keepdim", "swiglu_sigmoid_gate", "post_norm", "norms_swapped",
                        "causal_hardcoded_false")}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_what_the_contract_reveals_fails_locally_with_the_graders_diagnosis(tmp_path, assignment):
    folder = released_folder(tmp_path, assignment)
    base = base_solution_source(assignment)
    for stem in REVEALED[assignment]:
        fixture = FIXTURES / assignment / "wrong" / f"{stem}.py"
        want = parse_expect(fixture)
        got = outcomes(folder, compose(fixture, base), module_name(assignment))
        named = {o["diagnosis"] for o in got.values() if o["status"] != "passed"}
        assert named & {want["diagnosis"], *want.get("also", ())}, (stem, got)
    correct = outcomes(folder, base, module_name(assignment))
    assert all(o["status"] == "passed" for o in correct.values()), correct


def test_the_grader_runs_the_same_public_checks_and_names_the_same_mistake(grade, tmp_path):
    """One checker: the grader's public check results on a submission are the students' checker's."""
    folder = released_folder(tmp_path, "attention")
    for stem in ("split_no_transpose", "softmax_no_keepdim", "k_dot_T"):
        source = compose(FIXTURES / "attention" / "wrong" / f"{stem}.py", base_solution_source("attention"))
        local = outcomes(folder, source, "attention.py")
        graded = {c.name: c for c in grade(source).checks if c.visibility == "public"}
        assert set(graded) == set(local)
        for name, o in local.items():  # a structural check "not counted" by the scoring policy did pass
            status = "passed" if "not counted" in graded[name].detail_en else graded[name].status
            assert (status, graded[name].diagnosis or None) == (o["status"], o["diagnosis"]), (stem, name)
            if o["diagnosis"]:
                assert graded[name].diagnosis_en == o["text"]


def test_notebook_check_runs_on_the_notebooks_own_names(tmp_path):
    folder = released_folder(tmp_path, "attention")
    snippet = REFUSE + (
        "sys.path.insert(0, '.')\n"
        "from checker import Notebook\n"
        f"exec(compile(open({str(ROOT / 'solutions/attention/attention.py')!r}).read(), 'attention.py', 'exec'))\n"
        "grader = Notebook(lang='en')\n"
        "assert grader.check('causal_mask') and grader.check('split_heads')\n"
        "def split_heads(x, num_heads):  # the classic mistake: no transpose\n"
        "    *b, T, d = x.shape\n"
        "    return x.reshape(*b, num_heads, T, d // num_heads)\n"
        "assert not grader.check('split_heads')\n")
    done = subprocess.run([sys.executable, "-c", snippet], cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "✅ [passed]" in done.stdout and "❌ [failed]" in done.stdout and "Diagnosis:" in done.stdout


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_one_student_notebook_carries_the_checker_cells_and_otters_assignment_name(assignment):
    nb = json.loads((ROOT / "student_template" / assignment / f"{assignment}.ipynb").read_text(encoding="utf-8"))
    assert nb["metadata"]["otter"] == {"assignment_name": assignment}
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert any("from checker import Notebook" in s for s in sources)
    checked = {s.strip().removeprefix('grader.check("').removesuffix('")') for s in sources
               if s.strip().startswith("grader.check(")}
    assert checked == set(discover()[assignment].functions)
    assert not (ROOT / "dist" / assignment / "otter_student").exists()  # no second student notebook


def test_a_hanging_function_times_out_alone_and_a_raising_one_is_reported(tmp_path):
    folder = released_folder(tmp_path, "attention")
    snippet = REFUSE + ("import json\nsys.path.insert(0, '.')\nfrom checker import cli\n"
                        "for o in cli.check_file('attention.py', timeout=1.0)[0]:\n"
                        "    print(json.dumps([o.check.name, o.status, o.detail.en]))\n")

    def run_with(extra: str) -> dict:
        (folder / "attention.py").write_text(base_solution_source("attention") + extra, encoding="utf-8")
        done = subprocess.run([sys.executable, "-c", snippet], cwd=folder, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return {name: (status, detail) for name, status, detail in map(json.loads, done.stdout.splitlines())}

    hangs = run_with("\n\ndef split_heads(x, num_heads):\n    while True:\n        pass\n")
    assert hangs["split_published"][0] == "timeout" and "within 1 s" in hangs["split_published"][1]
    assert hangs["sdpa_published_values"][0] == hangs["mask_values_small"][0] == "passed"  # the others as usual
    raises = run_with("\n\ndef causal_mask(seq_len):\n    raise ValueError('my own message')\n")
    assert raises["mask_dtype_shape"][0] == "error" and "ValueError: my own message" in raises["mask_dtype_shape"][1]
    assert raises["split_published"][0] == "passed"
