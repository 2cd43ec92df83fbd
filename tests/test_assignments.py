"""The one assignment spec: discovered by scanning, validated, and the only way the commands find an assignment
(`--assignment`, else inferred from a release manifest or the graded file names)."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

from autograder.assignments import Assignment, UnknownAssignment, discover, get, infer
from autograder.engine.checks import load_suite
from autograder.public.text import Text

T = Text(zh="标题", en="title")


def test_every_assignment_folder_is_discovered_with_its_own_id():
    found = discover()
    assert {"attention", "decoder"} <= set(found)
    for id_, spec in found.items():
        assert spec.id == id_ and spec.directory.name == id_ and spec.module.endswith(".py")
        assert (spec.directory / "checks.py").is_file() and (spec.directory / "cases.py").is_file()


@pytest.mark.parametrize("bad", [dict(id="Bad-Id"), dict(module="lab.ipynb"), dict(notebook="lab.py"),
                                 dict(functions=())])
def test_a_malformed_spec_is_refused(bad):
    fields = dict(id="lab", title=T, module="lab.py", notebook="lab.ipynb", functions=("f",), hidden_topics=T) | bad
    with pytest.raises(ValueError):
        Assignment(**fields)


def test_text_is_keyword_only_so_a_swapped_pair_cannot_pass():
    with pytest.raises(TypeError):
        Text("中文", "English")
    assert Text(zh="中文", en="English").pick("en") == "English"


def test_checks_must_grade_exactly_the_functions_the_spec_lists():
    from dataclasses import replace

    spec = get("attention")
    with pytest.raises(ValueError, match="checks grade"):
        load_suite(replace(spec, functions=spec.functions[:-1]))


def test_an_unknown_assignment_names_the_known_ones():
    with pytest.raises(UnknownAssignment, match="attention"):
        get("no_such_lab")


def test_the_assignment_is_inferred_from_a_manifest_file_names_copies_and_zips(tmp_path):
    (tmp_path / "released").mkdir()
    (tmp_path / "released" / "manifest.json").write_text(json.dumps({"id": "decoder", "files": {}}))
    assert infer(tmp_path / "released").id == "decoder"
    (tmp_path / "cls" / "alice").mkdir(parents=True)
    (tmp_path / "cls" / "alice" / "Attention (1).py").write_text("x = 1\n")
    assert infer(tmp_path / "cls").id == "attention"
    assert infer(tmp_path / "cls" / "alice" / "Attention (1).py").id == "attention"
    with zipfile.ZipFile(tmp_path / "lms.zip", "w") as z:
        z.writestr("bob_1002_sub/decoder-2.py", "x = 1\n")
    assert infer(tmp_path / "lms.zip").id == "decoder"


def test_a_class_for_two_assignments_or_none_needs_the_option(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "attention.py").write_text("x = 1\n")
    (tmp_path / "a" / "decoder.py").write_text("x = 1\n")
    with pytest.raises(UnknownAssignment, match="several match"):
        infer(tmp_path)
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "s01.py").write_text("x = 1\n")
    result = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "loose"), "--out",
                             str(tmp_path / "out"), "-q"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2 and "--assignment" in result.stderr and "attention" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_release_toml_may_not_repeat_what_the_spec_says(tmp_path):
    from autograder.release.errors import ReleaseError
    from autograder.release.spec import load_spec

    (tmp_path / "assignments" / "attention").mkdir(parents=True)
    source = (ROOT / "assignments" / "attention" / "assignment.toml").read_text(encoding="utf-8")
    (tmp_path / "assignments" / "attention" / "assignment.toml").write_text('module = "x.py"\n' + source)
    with pytest.raises(ReleaseError, match="spec.py"):
        load_spec(tmp_path, "attention")


def test_an_assignment_may_set_its_own_default_limits_and_only_known_ones():
    from dataclasses import replace

    spec = replace(get("attention"), limits={"call_seconds": 3.5, "memory_bytes": 1 << 29})
    limits = spec.default_limits()
    assert limits.call_seconds == 3.5 and limits.memory_bytes == 1 << 29 and limits.total_seconds == 90.0
    with pytest.raises(ValueError, match="unknown limits"):
        replace(get("attention"), limits={"call_secs": 3})
