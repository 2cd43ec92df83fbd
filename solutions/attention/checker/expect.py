"""Comparisons that cannot be fooled: exact type, shape and dtype on a plain tensor first, finiteness next, values
last (in float64, with explicit tolerances). Failures carry a bilingual explanation and, optionally, a diagnosis.

Default tolerances: ``atol=1e-5, rtol=1e-4``. Student code computes in float32 (machine epsilon 1.2e-7); the
references are computed in float64 and rounded to float32. Summation order (einsum vs matmul, hand-written vs
library softmax, float64 inside) moves results by a few 1e-7 on these sizes, so 1e-5/1e-4 leaves two orders of
magnitude of headroom while every catalogued mistake is off by more than 1e-2. The measured margins (and why the
large-logit case stays within them) are in the docstring of tests/test_properties.py, which checks them.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .text import Text

ATOL, RTOL = 1e-5, 1e-4


@dataclass(frozen=True)
class Diagnosis:
    """A named, recognised mistake with a plain-words explanation."""
    id: str
    text: Text

    @property
    def zh(self) -> str:
        return self.text.zh

    @property
    def en(self) -> str:
        return self.text.en


NOTHING = Text(zh="", en="")


class CheckFailed(AssertionError):
    """`text` says what is wrong in the grader's own words; `measured` adds what was measured on the student's
    result (shapes, counts, differences): shown for public checks only, since a student can make their result
    encode a hidden input and read it back from such numbers."""

    def __init__(self, text: Text, diagnosis: Diagnosis | None = None, measured: Text = NOTHING):
        super().__init__(text.en)
        self.text, self.diagnosis, self.measured = text, diagnosis, measured


def fail(text: Text, diagnosis: Diagnosis | None = None, measured: Text = NOTHING):
    raise CheckFailed(text, diagnosis, measured)


def got(zh: str, en: str) -> Text:
    """What was measured, as the failure messages append it: "(got …)" / "（实际是 …）"."""
    return Text(zh=f"（实际是 {zh}）", en=f"(got {en})")


def _describe(value) -> str:
    """The type name of a value; an object the sandbox could not send back arrives as a stand-in naming its type."""
    stand_in = getattr(type(value), "stands_for", None)
    if callable(stand_in):
        return str(stand_in(value))[:100]
    return type(value).__name__


def tensor(value, what: str, shape=None, dtype=None, diagnose=None) -> torch.Tensor:
    """`value` must be a tensor of exactly this shape (tuple) and dtype; returns it."""
    if type(value) is not torch.Tensor:
        fail(Text(zh=f"{what} 应当是 torch.Tensor", en=f"{what} should be a torch.Tensor"), safely(diagnose),
             got(_describe(value), _describe(value)))
    if shape is not None and tuple(value.shape) != tuple(shape):
        fail(Text(zh=f"{what} 的形状应为 {list(shape)}", en=f"{what} should have shape {list(shape)}"),
             safely(diagnose), got(list(value.shape), list(value.shape)))
    if dtype is not None and value.dtype != dtype:
        fail(Text(zh=f"{what} 的 dtype 应为 {dtype}", en=f"{what} should have dtype {dtype}"), safely(diagnose),
             got(value.dtype, value.dtype))
    return value


def pair(value, what: str, names: tuple[str, str]):
    """`value` must be a tuple or list of exactly two items, named `names` in messages (e.g. ("output", "mask"))."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        shown = f"({', '.join(names)})"
        fail(Text(zh=f"{what} 应返回二元组 {shown}", en=f"{what} should return a pair {shown}"),
             Diagnosis("not_a_pair", Text(zh=f"函数必须返回两个张量组成的元组 {shown}，不能只返回一个。",
                                          en=f"The function must return a tuple of two tensors, {shown}, not a single value.")),
             got(_describe(value), _describe(value)))
    return value


def finite(value: torch.Tensor, what: str, diagnose=None) -> None:
    if value.is_floating_point() and not torch.isfinite(value).all():
        bad = int((~torch.isfinite(value)).sum())
        fail(Text(zh=f"{what} 含有 NaN/inf", en=f"{what} contains NaN/inf values"), safely(diagnose),
             Text(zh=f"（{bad}/{value.numel()} 个）", en=f"({bad} of {value.numel()})"))


def close(actual, expected: torch.Tensor, what: str, atol: float = ATOL, rtol: float = RTOL,
          diagnose=None) -> torch.Tensor:
    """Shape, dtype, finiteness, then values. `diagnose()` (if given) names the mistake when values differ."""
    actual = tensor(actual, what, expected.shape, expected.dtype)
    try:
        finite(actual, what)
        a, e = actual.double(), expected.double()
        err = (a - e).abs()
        bad = err > atol + rtol * e.abs()
        if bool(bad.any()):
            index = [int(i) for i in torch.nonzero(bad)[0]]
            fail(Text(zh=f"{what} 与期望值不一致", en=f"{what} differs from the expected values"), None,
                 Text(zh=f"（{bad.sum().item()}/{bad.numel()} 个位置；最大差 {err.max().item():.3g}，第一个位置 {index}）",
                      en=f"({bad.sum().item()} of {bad.numel()} values; largest difference {err.max().item():.3g}, "
                         f"first at index {index})"))
    except CheckFailed as failure:
        raise CheckFailed(failure.text, safely(diagnose), failure.measured) from None
    return actual


def safely(diagnose) -> Diagnosis | None:
    """Run a diagnosis; a diagnosis that cannot decide (or breaks on odd input) gives no diagnosis."""
    if diagnose is None:
        return None
    try:
        return diagnose()
    except Exception:
        return None


def equal(actual, expected: torch.Tensor, what: str) -> torch.Tensor:
    """Exactly equal values (after the same shape and dtype checks)."""
    actual = tensor(actual, what, expected.shape, expected.dtype)
    if not torch.equal(actual, expected):
        wrong = (actual != expected).nonzero()
        fail(Text(zh=f"{what} 的值不对", en=f"{what} has wrong values"), None,
             Text(zh=f"（{len(wrong)} 个位置，第一个是 {wrong[0].tolist()}）",
                  en=f"({len(wrong)} positions, first at {wrong[0].tolist()})"))
    return actual
