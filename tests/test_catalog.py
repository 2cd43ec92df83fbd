"""Grader accuracy on the implementation catalogs: every correct variant gets full marks (and no diagnosis); every
wrong one loses the points of the checks that must catch it and is told its mistake by name, in Chinese and English.
`benchmarks/catalog_report.py` prints the same grading as a table."""
from __future__ import annotations

import re

import pytest

from fixtures.compose import FIXTURES, base_solution_source, compose, parse_expect

CORRECT = sorted((FIXTURES / "attention" / "correct").glob("*.py"))
WRONG = sorted((FIXTURES / "attention" / "wrong").glob("*.py"))
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_catalog_sizes():
    assert len(WRONG) >= 30 and len(CORRECT) >= 12


@pytest.mark.parametrize("fixture", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_variant_gets_full_marks(fixture, grade):
    assert parse_expect(fixture) == {"kind": "full"}
    result = grade(compose(fixture, base_solution_source()))
    assert result.score == result.max_score, [(c.name, c.detail_en) for c in result.checks if c.status != "passed"]
    assert not any(c.diagnosis for c in result.checks)


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
    for c in result.checks:
        if c.diagnosis:  # plain words in both languages
            assert re.fullmatch(r"[a-z][a-z0-9_]*", c.diagnosis)
            assert CJK.search(c.diagnosis_zh) and c.diagnosis_en and not CJK.search(c.diagnosis_en), c.diagnosis
