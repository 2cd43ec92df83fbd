"""Adding a chapter means adding its folders: no chapter's name or API appears anywhere outside them. For every
assignment `discover()` finds, its id, graded file stems and graded functions are searched for (as words) in the
engine package outside the chapters' own packages `autograder/assignments/<id>/` and in the build files. A hit fails with file and line."""
from __future__ import annotations

import re

import pytest

from conftest import ROOT

from autograder.assignments import discover

ASSIGNMENTS = discover()
SHARED = [ROOT / "Makefile", ROOT / "pyproject.toml", ROOT / ".ci" / "run",
          *(p for p in (ROOT / "autograder").rglob("*") if p.is_file() and "__pycache__" not in p.parts)]


def words(spec) -> set[str]:
    return {spec.id, *(name.rsplit(".", 1)[0] for name in spec.submission_files), *spec.functions}


def outside_own_folders(spec) -> list:
    """The shared files: everything but the chapters' own packages (a later chapter may build on an earlier one, as
    the decoder layer builds on attention)."""
    chapters = ROOT / "autograder" / "assignments"
    return [p for p in SHARED if not (p.is_relative_to(chapters) and p.parent != chapters)
            and p.suffix not in (".pyc", ".png", ".zip")]


def hits(spec, paths=None) -> list[str]:
    pattern = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, sorted(words(spec)))) + r")(?![A-Za-z0-9])",
                         re.IGNORECASE)
    found = []
    for path in outside_own_folders(spec) if paths is None else paths:
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{number}: "
                             f"{line.strip()[:120]}")
    return found


def test_there_are_at_least_two_chapters_to_keep_apart():
    assert len(ASSIGNMENTS) >= 2, sorted(ASSIGNMENTS)


@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_no_chapter_name_or_api_outside_its_own_folders(assignment):
    assert not hits(ASSIGNMENTS[assignment]), "\n".join(hits(ASSIGNMENTS[assignment]))


def test_the_search_finds_a_planted_name_and_not_a_longer_word(tmp_path):
    for spec in ASSIGNMENTS.values():
        planted = tmp_path / f"{spec.id}.py"
        planted.write_text(f"x = 1\n# grade {spec.functions[0]} here\ny = '{spec.id}s_x{spec.id}2'\n", encoding="utf-8")
        assert hits(spec, [planted]) == [f"{planted.name}:2: # grade {spec.functions[0]} here"]
