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
    """Caught (loses the points of the checks its header names), named right, and never named wrong: every id any
    check names is the header's `diagnosis=` or one of its `also=` (a second mistake the fixture really makes).
    `expect: score=N` (code that does nothing): at most N points under the spec's structural policy."""
    expected = parse_expect(fixture)
    result = grade(compose(fixture, base_solution_source()))
    failed = {c.name for c in result.checks if c.status != "passed"}
    diagnoses = {c.diagnosis for c in result.checks if c.diagnosis}
    also = {a for a in expected.get("also", "").split(",") if a}
    if expected["kind"] == "score":
        assert result.score <= expected["score"] < result.max_score, [(c.name, c.score) for c in result.checks]
        assert diagnoses <= also
        return
    assert set(expected["lose"]) <= failed
    assert result.score < result.max_score
    if expected["diagnosis"] != "none":
        assert expected["diagnosis"] in diagnoses, (diagnoses, [(c.name, c.detail_en) for c in result.checks
                                                                if c.status != "passed"][:4])
    assert diagnoses <= {expected["diagnosis"]} | also, ("named wrong", diagnoses)
    for c in result.checks:
        if c.diagnosis:  # plain words in both languages
            assert re.fullmatch(r"[a-z][a-z0-9_]*", c.diagnosis)
            assert CJK.search(c.diagnosis_zh) and c.diagnosis_en and not CJK.search(c.diagnosis_en), c.diagnosis


def test_a_finite_fill_is_not_said_to_make_nan(grade):
    result = grade(compose(FIXTURES / "attention" / "wrong" / "mask_diagonal_fill_1e9.py", base_solution_source()))
    texts = [c.diagnosis_en for c in result.checks if c.diagnosis == "mask_includes_diagonal"]
    assert texts and not any("NaN" in t for t in texts)


def test_a_redefined_function_says_which_definition_was_graded(grade):
    result = grade(compose(FIXTURES / "attention" / "wrong" / "notebook_redefined_later.py", base_solution_source()))
    failed = [c for c in result.checks if c.function == "scaled_dot_product_attention" and c.status != "passed"]
    assert failed and all("defined 2 times" in c.detail_en and "In[7]" in c.detail_en for c in failed)
    assert any(c.diagnosis == "no_scale" and "In[7]" in c.diagnosis_en for c in failed)


def test_a_notebook_cell_that_redefines_the_function_is_named(grade, tmp_path):
    import nbformat
    solution = base_solution_source()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(solution),
                nbformat.v4.new_markdown_cell("an experiment"),
                nbformat.v4.new_code_cell("def scaled_dot_product_attention(Q, K, V, causal=True):\n"
                                          "    w = torch.softmax((Q @ K.transpose(-2, -1)).masked_fill(\n"
                                          "        causal_mask(Q.shape[-2]), float('-inf')) if causal else Q @ K.transpose(-2, -1), -1)\n"
                                          "    return w @ V, w\n")]
    path = tmp_path / "attention.ipynb"
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    result = grade(path)
    failed = [c for c in result.checks if c.function == "scaled_dot_product_attention" and c.status != "passed"]
    assert failed and all("in cell 1, in cell 3" in c.detail_en and "the last, in cell 3" in c.detail_en
                          for c in failed)


def test_returning_zeros_scores_nothing_and_the_policy_is_per_assignment(suite, grade):
    """The spec's structural_needs_values policy: structural checks count only with a passed value check of the
    same function. Switched off, the same zeros earn their shape points back."""
    import dataclasses

    from autograder.engine.checks import Suite
    from autograder.engine.runner import apply_structural_policy

    result = grade(compose(FIXTURES / "attention" / "wrong" / "returns_zeros.py", base_solution_source()))
    assert result.score == 0
    assert all(c.score == 0 for c in result.checks)
    structural = {c.name for c in suite.checks if c.kind == "structural"}
    assert structural == {"mask_dtype_shape", "sdpa_shapes_published", "sdpa_shapes_batched", "sdpa_inputs_unchanged",
                          "mha_shape"}
    assert all("not counted" in c.detail_en for c in result.checks if c.name in structural)
    off = Suite(dataclasses.replace(suite.spec, structural_needs_values=False), suite.checks)
    regraded = grade(compose(FIXTURES / "attention" / "wrong" / "returns_zeros.py", base_solution_source()))
    for c in regraded.checks:  # restore what the policy took: the shape checks had passed
        if "not counted" in c.detail_en:
            c.status, c.score = "passed", c.max_score
    assert sum(c.score for c in apply_structural_policy(off, regraded.checks)) >= 5
    # a correct submission is untouched by the policy
    full = grade(base_solution_source())
    assert full.score == full.max_score
