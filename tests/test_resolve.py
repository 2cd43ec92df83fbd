"""One submission resolver (`autograder.engine.resolve`) for `grade`, `check` and Gradescope: which file is graded."""
from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.engine.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "student_template" / "attention"
SOLUTIONS = ROOT / "solutions" / "attention"
NAMES = ("attention.py", "attention.ipynb")


def released(folder: Path) -> Path:
    """The student release as unpacked: both forms, untouched, with its manifest.json."""
    shutil.copytree(TEMPLATE, folder)
    return folder


def finish(folder: Path, name: str, mtime: float | None = None, target: str | None = None) -> Path:
    """Put the solution's `name` (attention.py or attention.ipynb) into the folder as `target`."""
    path = folder / (target or name)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(SOLUTIONS / name, path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def changed(path: Path, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# the student's own work: {path.name}\n")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_released_folder_with_a_finished_module_grades_the_module_not_the_untouched_notebook(tmp_path):
    folder = released(tmp_path / "attention")
    finish(folder, "attention.py", mtime=1_000)
    os.utime(folder / "attention.ipynb", (2_000, 2_000))  # the untouched notebook is newer: the manifest decides
    res = resolve(folder, NAMES)
    assert res.path == folder / "attention.py" and res.stubs == ("attention.ipynb",)
    assert res.found == ("attention.py", "attention.ipynb") and not res.note_en and not res.reason_en
    assert res.other_form() == folder / "attention.ipynb"


def test_released_folder_with_a_finished_notebook_grades_the_notebook(tmp_path):
    folder = released(tmp_path / "attention")
    finish(folder, "attention.ipynb", mtime=1_000)
    os.utime(folder / "attention.py", (2_000, 2_000))
    res = resolve(folder, NAMES, "attention")
    assert res.path == folder / "attention.ipynb" and res.stubs == ("attention.py",)
    assert res.other_form() == folder / "attention.py"


@pytest.mark.parametrize("assignment", ["attention", None])
def test_without_a_manifest_in_the_folder_the_release_shipped_with_the_grader_knows_the_stub(tmp_path, assignment):
    folder = tmp_path / "alice"
    folder.mkdir()
    shutil.copy(TEMPLATE / "attention.py", folder / "attention.py")  # untouched, but no manifest.json beside it
    finish(folder, "attention.ipynb", mtime=1_000)
    res = resolve(folder, NAMES, assignment)
    assert res.path == folder / "attention.ipynb" and res.stubs == ("attention.py",)


@pytest.mark.parametrize("name", ["Attention.py", "attention (1).py", "attention-2.ipynb", "attention_1.py",
                                  "attention copy.py", "attention(2).py", "ATTENTION.ipynb", "attention 2.py"])
def test_case_variants_and_lms_or_os_copy_names_are_accepted(tmp_path, name):
    path = changed(tmp_path / "bob" / name)
    assert resolve(tmp_path / "bob", NAMES).path == path


@pytest.mark.parametrize("name", ["attention_notes.py", "my_attention.py", "attention-v2.py", "attention.txt",
                                  "attention.PY", "attention.py.bak"])
def test_unrelated_names_are_not_candidates_and_the_reason_names_what_was_found(tmp_path, name):
    changed(tmp_path / "carol" / name)
    changed(tmp_path / "carol" / "notes.md")
    res = resolve(tmp_path / "carol", NAMES)
    assert res.path is None and res.found == () and set(res.others) == {name, "notes.md"}
    assert name in res.reason_en and "notes.md" in res.reason_en and "attention.py or attention.ipynb" in res.reason_en
    assert name in res.reason_zh and "attention.py 或 attention.ipynb" in res.reason_zh


def test_an_empty_folder_says_it_is_empty(tmp_path):
    (tmp_path / "dan").mkdir()
    res = resolve(tmp_path / "dan", NAMES)
    assert res.path is None and "empty" in res.reason_en and "空" in res.reason_zh


def test_both_forms_changed_the_module_form_wins_even_when_the_notebook_is_newer(tmp_path):
    folder = released(tmp_path / "attention")
    finish(folder, "attention.py", mtime=1_000)
    finish(folder, "attention.ipynb", mtime=2_000)
    res = resolve(folder, NAMES)
    assert res.path == folder / "attention.py" and res.stubs == () and res.other_form() == folder / "attention.ipynb"


def test_both_forms_untouched_the_module_stub_is_graded_with_a_note(tmp_path):
    folder = released(tmp_path / "attention")
    res = resolve(folder, NAMES)
    assert res.path == folder / "attention.py" and res.stubs == ("attention.py", "attention.ipynb")
    assert "unchanged" in res.note_en and "attention.ipynb" in res.note_en and "未修改" in res.note_zh
    assert not res.reason_en


def test_exact_name_beats_case_variant_beats_copy_name_whatever_the_times(tmp_path):
    folder = tmp_path / "erin"
    copy = changed(folder / "attention (1).py", mtime=3_000)
    case = changed(folder / "Attention.py", mtime=2_000)
    exact = changed(folder / "attention.py", mtime=1_000)
    assert resolve(folder, NAMES).path == exact
    exact.unlink()
    assert resolve(folder, NAMES).path == case
    case.unlink()
    assert resolve(folder, NAMES).path == copy


def test_among_copies_of_one_form_the_newest_wins(tmp_path):
    folder = tmp_path / "frank"
    changed(folder / "attention (1).py", mtime=1_000)
    newest = changed(folder / "attention (2).py", mtime=2_000)
    assert resolve(folder, NAMES).path == newest


def test_a_symlinked_candidate_is_reported_and_never_followed(tmp_path):
    folder = tmp_path / "gina"
    folder.mkdir()
    (folder / "attention.py").symlink_to(SOLUTIONS / "attention.py")
    res = resolve(folder, NAMES)
    assert res.path is None and res.links == ("attention.py",) and res.found == ("attention.py",)
    assert "symbolic link" in res.reason_en and "符号链接" in res.reason_zh
    notebook = finish(folder, "attention.ipynb")
    res = resolve(folder, NAMES)
    assert res.path == notebook and res.links == ("attention.py",) and res.other_form() is None


def test_a_symlinked_folder_is_not_entered(tmp_path):
    finish(tmp_path / "elsewhere", "attention.py")
    (tmp_path / "hank").mkdir()
    (tmp_path / "hank" / "hw").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    res = resolve(tmp_path / "hank", NAMES)
    assert res.path is None and res.found == ()


def test_nested_layouts_are_searched_and_the_shallowest_candidate_wins(tmp_path):
    student = tmp_path / "alice"
    deep = finish(student, "attention.py", target="hw/attention.py")
    res = resolve(student, NAMES)
    assert res.path == deep and res.found == ("hw/attention.py",)
    top = changed(student / "attention.py", mtime=1_000)
    os.utime(deep, (2_000, 2_000))
    assert resolve(student, NAMES).path == top


def test_the_released_folder_nested_inside_the_students_folder_still_knows_its_stubs(tmp_path):
    student = tmp_path / "ivan"
    folder = released(student / "downloads" / "attention")
    finish(folder, "attention.ipynb")
    assert resolve(student, NAMES).path == folder / "attention.ipynb"


def test_mac_archive_checkpoint_and_hidden_folders_are_skipped(tmp_path):
    folder = tmp_path / "judy"
    for rel in ("__MACOSX/attention.py", ".ipynb_checkpoints/attention.ipynb", ".git/attention.py",
                "__pycache__/attention.py", "._attention.py"):
        changed(folder / rel)
    res = resolve(folder, NAMES)
    assert res.path is None and res.found == () and res.others == ()


def test_the_resolver_imports_nothing_heavy():
    source = str(ROOT / "autograder" / "engine" / "resolve.py")  # the file alone: the package's __init__ loads torch
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('resolve', {source!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "sys.modules['resolve'] = module\n"
            "spec.loader.exec_module(module)\n"
            f"print(module.resolve({str(TEMPLATE)!r}, {NAMES!r}).path.name, 'torch' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["attention.py", "False"], result.stderr


# -- end to end: `autograder grade` and `autograder check` --------------------------------------------------------
def cli(*args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    env.pop("AUTOGRADER_GRADING", None)
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=600)


@pytest.mark.slow
def test_grade_gives_full_marks_to_the_released_folder_with_a_finished_module_and_to_renamed_files(tmp_path):
    root = tmp_path / "class"
    finish(released(root / "released_py"), "attention.py")
    finish(released(root / "released_nb"), "attention.ipynb")
    finish(root / "renamed", "attention.py", target="Attention.py")
    finish(root / "lms_copy", "attention.py", target="attention (1).py")
    finish(root / "nested", "attention.py", target="hw/attention.py")
    changed(root / "notes_only" / "attention_notes.py")
    out = tmp_path / "out"
    result = cli("grade", root, "--out", out, "-q")
    assert result.returncode == 0, result.stderr
    scores = {r["student"]: r["score"] for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    assert scores == {"lms_copy": "20", "nested": "20", "notes_only": "0", "released_nb": "20", "released_py": "20",
                      "renamed": "20"}
    assert "attention_notes.py" in (out / "report.html").read_text()


@pytest.mark.slow
def test_check_passes_on_the_released_folder_with_a_finished_module_beside_the_untouched_notebook(tmp_path):
    folder = released(tmp_path / "attention")
    finish(folder, "attention.py", mtime=1_000)  # older than the untouched notebook: the manifest decides
    result = cli("check", "--lang", "en", cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "checked: attention.py" in result.stdout and "autograder check attention.ipynb" in result.stdout


def test_check_in_a_folder_without_a_candidate_says_what_it_found(tmp_path):
    changed(tmp_path / "attention_notes.py")
    result = cli("check", "--lang", "en", cwd=tmp_path)
    assert result.returncode == 2
    assert "Nothing to check" in result.stderr and "attention_notes.py" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("upload", ["released_folder_with_finished_notebook", "Attention.py"])
def test_gradescope_zip_gives_full_marks_to_the_released_folder_and_to_a_renamed_file(tmp_path, upload):
    import json
    import zipfile

    root = tmp_path / "gradescope"
    with zipfile.ZipFile(ROOT / "dist" / "attention" / "gradescope_autograder.zip") as archive:
        archive.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)
    if upload == "Attention.py":
        finish(root / "submission", "attention.py", target="Attention.py")
    else:  # every file of the release uploaded, the notebook finished, the module untouched
        finish(released(root / "submission"), "attention.ipynb", mtime=1_000)
    run = subprocess.run([str(root / "source" / "run_autograder")], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))["score"] == 20
