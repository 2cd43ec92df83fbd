"""Grader accuracy on the implementation catalogs: every correct variant gets full marks; every wrong one loses the
points of the checks that must catch it and is told its mistake by name."""
from __future__ import annotations

import pytest

from fixtures.compose import FIXTURES, base_solution_source, compose, parse_expect

CORRECT = sorted((FIXTURES / "correct").glob("*.py"))
WRONG = sorted((FIXTURES / "wrong").glob("*.py"))


@pytest.mark.parametrize("fixture", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_variant_gets_full_marks(fixture, grade):
    assert parse_expect(fixture) == {"kind": "full"}
    result = grade(compose(fixture, base_solution_source()))
    assert result.score == result.max_score, [(c.name, c.detail_en) for c in result.checks if c.status != "passed"]


@pytest.mark.parametrize("fixture", WRONG, ids=[p.stem for p in WRONG])
def test_wrong_variant_loses_points_and_is_diagnosed(fixture, grade):
    expected = parse_expect(fixture)
    result = grade(compose(fixture, base_solution_source()))
    failed = {c.name for c in result.checks if c.status != "passed"}
    assert set(expected["lose"]) <= failed
    assert result.score < result.max_score
    diagnoses = {c.diagnosis for c in result.checks if c.diagnosis}
    assert expected["diagnosis"] in diagnoses, (diagnoses, [(c.name, c.detail_en) for c in result.checks
                                                            if c.status != "passed"][:4])
