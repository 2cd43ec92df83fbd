"""The grader's view of an assignment's checks: a `Suite` (the spec and its public and hidden checks, in order) and
`load_suite`. The `check` decorator and `Check` are in `autograder.public.check` (the released student checker
ships them with the public checks).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import torch

from autograder.assignments import Assignment, get
from autograder.public.check import Check, collect


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
    """The assignment's spec and its checks: the public ones of `public_checks.py`, then the hidden ones of
    `checks.py`, grouped by the spec's `functions` (stable). Every check grades one of them, and every function has
    a check."""
    spec = assignment if isinstance(assignment, Assignment) else get(assignment)
    found: list[Check] = []
    for part in ("public_checks", "checks"):
        module = importlib.import_module(f"{spec.package}.{part}")
        found += [c for c in collect(vars(module)) if c.visibility == ("public" if part == "public_checks" else "hidden")
                  or _fail(f"{module.__name__}.{c.name} is {c.visibility}: public checks live in public_checks.py "
                           "(released to students), hidden ones in checks.py")]
    names = [c.name for c in found]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate check names in {spec.package}")
    graded = {c.function for c in found}
    if graded != set(spec.functions):
        raise ValueError(f"{spec.package}: checks grade {sorted(graded)}, the spec lists {sorted(spec.functions)}")
    order = {f: i for i, f in enumerate(spec.functions)}
    return Suite(spec, tuple(sorted(found, key=lambda c: order[c.function])))  # by function, public first in each


def _fail(message: str):
    raise ValueError(message)
