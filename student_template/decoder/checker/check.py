"""Checks: pytest-style test functions with points, a stable name, a visibility and a bilingual title.

    @check(points=1, function="softmax", visibility="public",
           zh="softmax 的形状", en="softmax shape")
    def softmax_shape(student):
        ...

A check function takes the fixtures it names: `student` (the submission's API: the sandboxed proxy in the grader,
`local.LocalStudent` in the released checker) and `refs` (hidden checks only: each student's hidden inputs and
their references). It passes by returning and fails by raising (see `expect.py`).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

VISIBILITIES = ("public", "hidden")
# "value": compares computed values with the references. "structural": shapes, dtypes, inputs left unchanged, which
# code that computes nothing can pass; under the assignment's `structural_needs_values` policy (the default) a
# function's structural checks count only when one of its value checks passes (applied in engine/runner.py).
KINDS = ("value", "structural")


@dataclass(frozen=True)
class Check:
    name: str
    function: str        # the student function it grades: partial credit and forbidden APIs are per function
    points: float
    visibility: str
    zh: str
    en: str
    run: Callable = field(repr=False, compare=False)
    kind: str = "value"  # one of KINDS

    @property
    def fixtures(self) -> list[str]:
        return list(inspect.signature(self.run).parameters)


def check(*, points: float, function: str, zh: str, en: str, visibility: str = "hidden", kind: str = "value"):
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {VISIBILITIES}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")

    def register(fn: Callable) -> Callable:
        fn.__check__ = Check(fn.__name__, function, float(points), visibility, zh, en, fn, kind)
        return fn

    return register


def collect(namespace: dict) -> list[Check]:
    """The checks defined in a module's namespace, in definition order."""
    return [v.__check__ for v in namespace.values() if hasattr(v, "__check__")]
