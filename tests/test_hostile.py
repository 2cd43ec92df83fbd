"""The hostile catalog (tests/fixtures/hostile/): each attack gets exactly its expected score, and a correct
submission graded right after it in the same sandbox still gets full marks."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SOLUTION
from fixtures.compose import FIXTURES, base_solution_source, parse_expect, submission_bytes

HOSTILE = sorted(p for p in (FIXTURES / "hostile").iterdir() if p.suffix == ".py" or p.is_dir())


def submitted_path(fixture: Path, tmp_path: Path) -> Path:
    """Where the grader reads this attack from: folders (and the symlink) as they are, others composed."""
    if fixture.is_dir():
        return fixture / "attention.py"
    path = tmp_path / "attention.py"
    path.write_bytes(submission_bytes(fixture, base_solution_source()))
    return path


@pytest.mark.parametrize("fixture", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_attack_scores_exactly_and_changes_nothing_for_the_next_student(fixture, grade, tmp_path):
    expected = parse_expect(fixture)
    result = grade(submitted_path(fixture, tmp_path))
    assert result.score == expected["score"], [(c.name, c.status, c.detail_en) for c in result.checks]
    assert not any("internal grader error" in c.detail_en for c in result.checks)
    after = grade(SOLUTION)
    assert after.score == after.max_score == 20, [(c.name, c.detail_en) for c in after.checks if c.score == 0]


def test_no_attack_left_a_file_on_the_host():
    places = [Path(p) for p in ("/", "/etc", "/tmp", "/var/tmp", "/dev/shm")] + [Path.home()]
    leftovers = [hit for p in places for hit in p.glob("PWNED*")] + list(SOLUTION.parents[2].rglob("PWNED*"))
    assert leftovers == []
