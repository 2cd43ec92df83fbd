"""Hidden checks stay hidden: what the student's code prints, raises or returns during a hidden check does not come
back to the student verbatim (output, exception messages and type names, measured numbers), so no hidden input can
be read back from the feedback. Staff still see the output."""
from __future__ import annotations

from conftest import SOLUTION

LEAKY = SOLUTION.read_text(encoding="utf-8") + '''

_graded = scaled_dot_product_attention


def scaled_dot_product_attention(Q, K, V, causal=True):
    print("SEEN", list(Q.shape), float(Q.sum()))
    if tuple(Q.shape) == (2, 3, 6, 4):  # the hidden batched case (the published ones have other shapes)
        raise type("Leak_" + str(int(abs(float(Q.sum())) * 1000)), (ValueError,), {})(f"LEAK {Q.flatten()[:4].tolist()}")
    return _graded(Q, K, V, causal)
'''


def test_output_printed_during_hidden_checks_is_for_staff_only(grade):
    result = grade(LEAKY)
    assert "SEEN [4, 4]" in result.output          # public checks: the student sees their own prints
    assert "SEEN [2, 3, 6, 4]" not in result.output  # the batched hidden case
    assert "SEEN [2, 3, 6, 4]" in result.staff_output


def test_exception_text_of_hidden_checks_is_not_repeated(grade):
    result = grade(LEAKY)
    hidden = [c for c in result.checks if c.visibility == "hidden" and c.status != "passed"]
    assert hidden, "the leaky submission must fail hidden checks"
    for c in hidden:
        assert "LEAK" not in c.detail_en + c.detail_zh and "Leak_" not in c.detail_en + c.detail_zh, c
    public = [c for c in result.checks if c.visibility == "public" and c.function == "scaled_dot_product_attention"]
    assert all(c.status == "passed" for c in public)


def test_measured_numbers_are_shown_for_public_checks_only(grade):
    wrong_shape = SOLUTION.read_text(encoding="utf-8") + '''

_graded = scaled_dot_product_attention


def scaled_dot_product_attention(Q, K, V, causal=True):
    out, weights = _graded(Q, K, V, causal)
    return out[..., :1], weights
'''
    result = grade(wrong_shape)
    by_name = {c.name: c for c in result.checks}
    assert "(got [4, 1])" in by_name["sdpa_shapes_published"].detail_en       # public: what was measured
    assert "got" not in by_name["sdpa_shapes_batched"].detail_en              # hidden: only what was expected
    assert "should have shape" in by_name["sdpa_shapes_batched"].detail_en
