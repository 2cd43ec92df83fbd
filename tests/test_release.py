"""`autograder release`: determinism, drift check, marker errors, stubs, leak guard, nbgrader parity."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from autograder.assignments import discover
from autograder.release import leaks, markers
from autograder.release.command import build, run_release
from autograder.release.errors import ReleaseError
from autograder.release.notebook import nbgrader_config
from autograder.release import zips

REPO = Path(__file__).resolve().parent.parent
ID = "attention"
SRC = f"assignments/{ID}"
STUDENT = f"student_template/{ID}"
VENV_BIN = Path(sys.executable).parent


def make_root(tmp: Path) -> Path:
    """A scratch repository root holding a copy of the assignment source (generated notebook left out)."""
    shutil.copytree(REPO / SRC, tmp / SRC, ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
    return tmp


def all_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def line_of(path: Path, needle: str, last: bool = False) -> int:
    numbers = [n for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1) if needle in line]
    return numbers[-1] if last else numbers[0]


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    root = make_root(tmp_path_factory.mktemp("released"))
    assert run_release(root, ID, check=False) == 0
    return root


def test_release_is_deterministic(released, tmp_path):
    other = make_root(tmp_path)
    assert run_release(other, ID, check=False) == 0
    assert all_files(other) == all_files(released)


def test_check_passes_after_release_and_fails_after_editing_a_generated_file(released, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(released, root)
    assert run_release(root, ID, check=True) == 0
    with open(root / STUDENT / "attention.py", "a", encoding="utf-8") as handle:
        handle.write("# edited by hand\n")
    before = all_files(root)
    assert run_release(root, ID, check=True) == 1
    assert all_files(root) == before  # --check writes nothing
    (root / STUDENT / "README.md").unlink()
    assert run_release(root, ID, check=True) == 1


def test_a_release_touches_only_its_own_outputs(released, tmp_path):
    """Another chapter's student folder, solutions and dist/ bundles survive this chapter's release; a stray file in
    this chapter's own dist/ folder is removed (and --check reports it first)."""
    root = tmp_path / "copy"
    shutil.copytree(released, root)
    others = [root / "student_template" / "other" / "x.py", root / "solutions" / "other" / "x.py",
              root / "dist" / "other" / "gradescope_autograder.zip"]
    for path in others:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"another chapter's file")
    stray = root / "dist" / ID / "stale.zip"
    stray.write_bytes(b"old")
    assert run_release(root, ID, check=True) == 1
    assert run_release(root, ID, check=False) == 0
    assert not stray.exists() and all(path.read_bytes() == b"another chapter's file" for path in others)
    assert run_release(root, ID, check=True) == 0


MODULE = f"{SRC}/attention.py"


@pytest.mark.parametrize("case", ["begin_without_end", "nested_begin", "end_without_begin", "unknown_todo",
                                  "marker_in_run_py"])
def test_malformed_marker_gives_file_line_error(case, tmp_path):
    root = make_root(tmp_path)
    module, run = root / MODULE, root / SRC / "run.py"
    text = module.read_text(encoding="utf-8")
    if case == "begin_without_end":  # drop the last END: the last BEGIN stays open
        expect = (MODULE, line_of(module, "### BEGIN SOLUTION", last=True), "has no matching END SOLUTION")
        cut = text.rindex("    ### END SOLUTION\n")
        module.write_text(text[:cut] + text[cut + len("    ### END SOLUTION\n"):], encoding="utf-8")
    elif case == "nested_begin":  # drop the first END: the second BEGIN opens inside the first region
        expect = (MODULE, line_of(module, "### BEGIN SOLUTION scaled_dot_product_attention") - 1, "nested BEGIN")
        edit(module, "    ### END SOLUTION\n", "")
    elif case == "end_without_begin":
        expect = (MODULE, line_of(module, "### END SOLUTION") - 1, "END SOLUTION without a matching BEGIN")
        edit(module, "    ### BEGIN SOLUTION causal_mask\n", "")
    elif case == "unknown_todo":
        expect = (MODULE, line_of(module, "### BEGIN SOLUTION split_heads"), "unknown todo id 'split_head'")
        edit(module, "### BEGIN SOLUTION split_heads", "### BEGIN SOLUTION split_head")
    else:
        lines = run.read_text(encoding="utf-8").split("\n")
        run.write_text("\n".join(lines[:5] + ["### BEGIN SOLUTION causal_mask", "### END SOLUTION"] + lines[5:]),
                       encoding="utf-8")
        expect = (f"{SRC}/run.py", 6, "solution marker not allowed here")
    with pytest.raises(ReleaseError) as info:
        build(root, ID)
    path, line, message = expect
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert message in str(info.value)


def test_malformed_marker_exits_2_and_writes_nothing(tmp_path, capsys):
    root = make_root(tmp_path)
    edit(root / MODULE, "    ### END SOLUTION\n", "")
    before = all_files(root)
    assert run_release(root, ID, check=False) == 2
    assert all_files(root) == before
    assert f"{MODULE}:" in capsys.readouterr().err


def test_every_stub_raises_not_implemented_with_its_todo_message(released):
    spec = importlib.util.spec_from_file_location("student_attention_stub", released / STUDENT / "attention.py")
    student = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(student)
    todos = tomllib.loads((released / SRC / "assignment.toml").read_text(encoding="utf-8"))["todos"]
    t = torch.ones(2, 4)
    calls = {
        "causal_mask": lambda: student.causal_mask(3),
        "scaled_dot_product_attention": lambda: student.scaled_dot_product_attention(t, t, t),
        "split_heads": lambda: student.split_heads(t, 2),
    }
    assert set(calls) == set(todos)
    for todo, call in calls.items():
        with pytest.raises(NotImplementedError) as info:
            call()
        assert str(info.value) == f"TODO({todo}): {todos[todo]['en']} / {todos[todo]['zh']}"


def test_student_notebook_keeps_the_bilingual_hint_above_each_stub(released):
    nb = json.loads((released / STUDENT / "attention.ipynb").read_text(encoding="utf-8"))
    todos = tomllib.loads((released / SRC / "assignment.toml").read_text(encoding="utf-8"))["todos"]
    solution_cells = ["".join(c["source"]) for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]
    assert len(solution_cells) == len(todos)
    for todo, hint in todos.items():
        expected = (f"# TODO({todo}): {hint['zh']}\n    # TODO({todo}): {hint['en']}\n"
                    '    raise NotImplementedError("TODO: 见上方提示 / see the hint above")')
        assert sum(expected in source for source in solution_cells) == 1, todo


def student_files(root: Path) -> dict[str, bytes]:
    folder = root / STUDENT
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "manifest.json" and "__pycache__" not in p.parts}


def test_student_files_hold_no_solution_line_or_marker(released):
    secrets = build(released, ID).secrets
    assert len(secrets) >= 10  # sanity: the guard knows the solution bodies
    files = student_files(released)
    assert leaks.find_leaks(files, secrets) == []
    for name, data in files.items():
        assert "BEGIN SOLUTION" not in data.decode() and "END SOLUTION" not in data.decode(), name


def test_leak_check_catches_a_solution_line_pasted_into_the_template(released):
    secrets = build(released, ID).secrets
    pasted = sorted(secrets)[0]
    files = student_files(released)
    files["attention.py"] += f"    {pasted}\n".encode()
    problems = leaks.find_leaks(files, secrets)
    assert len(problems) == 1 and "attention.py:" in problems[0] and pasted in problems[0]


def test_release_refuses_a_handout_that_leaks_a_solution_line(tmp_path, capsys):
    root = make_root(tmp_path)
    pasted = sorted(build(root, ID).secrets)[0]
    with open(root / SRC / "handout.md", "a", encoding="utf-8") as handle:
        handle.write(f"\n    {pasted}\n")
    before = all_files(root)
    assert run_release(root, ID, check=False) == 2
    assert all_files(root) == before
    assert "leak guard" in capsys.readouterr().err


def test_release_ships_the_clean_solution_as_the_reference_and_no_fixed_references(released):
    grading = released / "autograder" / "assignments" / ID
    assert (grading / "reference_solution.py").read_bytes() == (released / "solutions" / ID / "attention.py").read_bytes()
    assert not (grading / "references.npz").exists()
    generated = json.loads((grading / "release_manifest.json").read_text(encoding="utf-8"))["generated"]
    assert f"autograder/assignments/{ID}/reference_solution.py" in generated
    assert not any(p.endswith(".npz") for p in generated)
    bundle = zips.read((released / "dist" / "attention" / "gradescope_autograder.zip").read_bytes())
    assert bundle[f"package/autograder/assignments/{ID}/reference_solution.py"] == (grading / "reference_solution.py").read_bytes()
    assert not any(name.endswith(".npz") for name in bundle)


@pytest.mark.slow
def test_nbgrader_generate_assignment_writes_the_same_student_notebook(released, tmp_path):
    """The released nbgrader_config.py maps nbgrader's course directory onto assignments/ and student_template/."""
    (tmp_path / SRC).mkdir(parents=True)
    shutil.copy(released / SRC / "attention.ipynb", tmp_path / SRC / "attention.ipynb")
    shutil.copy(released / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    assert (released / "nbgrader_config.py").read_text(encoding="utf-8") == nbgrader_config(
        source_only=sorted(p.name for p in (released / SRC).iterdir() if p.is_file() and p.suffix != ".ipynb"))
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # nbgrader runs alembic
    result = subprocess.run([str(VENV_BIN / "nbgrader"), "generate_assignment", ID, "--force"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    ours = (released / STUDENT / "attention.ipynb").read_bytes()
    assert (tmp_path / STUDENT / "attention.ipynb").read_bytes() == ours


@pytest.mark.parametrize("assignment", sorted(discover()))
def test_committed_release_matches_the_source(assignment):
    """The repository's own generated files are up to date (`autograder release --check`), for every assignment."""
    assert run_release(REPO, assignment, check=True) == 0


def test_every_assignment_releases_in_either_order_with_no_solution_line_in_student_files(tmp_path):
    """Releasing one assignment leaves another's release up to date (shared nbgrader_config.py included), and no
    student file of any assignment holds a solution line or a marker."""
    ids = sorted(discover())
    for order in (ids, ids[::-1]):
        root = tmp_path / "-".join(order)
        for assignment in ids:
            shutil.copytree(REPO / "assignments" / assignment, root / "assignments" / assignment,
                            ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
        for assignment in order:
            assert run_release(root, assignment, check=False) == 0
        for assignment in ids:
            assert run_release(root, assignment, check=True) == 0, (order, assignment)
            student = root / "student_template" / assignment
            files = {p.relative_to(student).as_posix(): p.read_bytes() for p in sorted(student.rglob("*"))
                     if p.is_file() and p.name != "manifest.json" and "__pycache__" not in p.parts}
            assert leaks.find_leaks(files, build(root, assignment).secrets) == []
            assert not any(b"BEGIN SOLUTION" in data or b"END SOLUTION" in data for data in files.values())
