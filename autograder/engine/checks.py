"""Checks: pytest-style test functions with points, a stable name, a visibility and a bilingual message.

    @check(points=1, function="softmax", visibility="public",
           zh="softmax 的形状", en="softmax shape")
    def softmax_shape(student):
        ...

A check function takes the fixtures it names: `student` (the submission's API, see `student.py`) and `refs`
(the assignment's reference arrays). It passes by returning and fails by raising (see `expect.py`).
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import torch

from autograder.assignments import Assignment, get

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


@dataclass(frozen=True)
class Suite:
    """An assignment's grading material: its spec and its checks in order (public and hidden)."""
    spec: Assignment
    checks: tuple[Check, ...]

    @property
    def assignment(self) -> str:
        return self.spec.id

    @property
    def forbidden(self) -> Mapping[str, str]:   # qualified API name (or op:<glob>) -> why it is forbidden
        return self.spec.forbidden

    @property
    def submission_files(self) -> tuple[str, ...]:
        return self.spec.submission_files

    @property
    def directory(self) -> Path:
        return self.spec.directory

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)

    @property
    def points_by_function(self) -> dict[str, float]:
        """Graded functions in check order, with their total points."""
        points: dict[str, float] = {}
        for c in self.checks:
            points[c.function] = points.get(c.function, 0.0) + c.points
        return points

    def public(self) -> "Suite":
        return Suite(self.spec, tuple(c for c in self.checks if c.visibility == "public"))

    def references(self, seed: int) -> dict[str, torch.Tensor]:
        """One student's hidden inputs (drawn from `seed`) and their expected outputs, computed by `cases.py` from
        the reference solution `autograder release` writes beside the checks (see `hidden_inputs`)."""
        from .hidden_inputs import references

        return references(self.assignment, self.directory, seed)


def load_suite(assignment: str | Assignment) -> Suite:
    """The assignment's spec and the checks of its `checks.py`, in definition order. Every check grades one of
    the spec's `functions`, and every function has a check."""
    spec = assignment if isinstance(assignment, Assignment) else get(assignment)
    module = importlib.import_module(f"{spec.package}.checks")
    checks = tuple(v.__check__ for v in vars(module).values() if hasattr(v, "__check__"))
    names = [c.name for c in checks]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate check names in {module.__name__}")
    graded = {c.function for c in checks}
    if graded != set(spec.functions):
        raise ValueError(f"{module.__name__}: checks grade {sorted(graded)}, the spec lists {sorted(spec.functions)}")
    return Suite(spec, checks)
