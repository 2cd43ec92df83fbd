"""Checks: pytest-style test functions with points, a stable name, a visibility and a bilingual message.

    @check(points=1, function="causal_mask", visibility="public",
           zh="因果 mask 的 dtype 与形状", en="causal mask dtype and shape")
    def mask_dtype_shape(student):
        ...

A check function takes the fixtures it names: `student` (the submission's API, see `student.py`) and `refs`
(the assignment's reference arrays). It passes by returning and fails by raising (see `expect.py`).
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

VISIBILITIES = ("public", "hidden")


@dataclass(frozen=True)
class Check:
    name: str
    function: str        # the student function it grades: partial credit and forbidden APIs are per function
    points: float
    visibility: str
    zh: str
    en: str
    run: Callable = field(repr=False, compare=False)

    @property
    def fixtures(self) -> list[str]:
        return list(inspect.signature(self.run).parameters)


def check(*, points: float, function: str, zh: str, en: str, visibility: str = "hidden"):
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {VISIBILITIES}")

    def register(fn: Callable) -> Callable:
        fn.__check__ = Check(fn.__name__, function, float(points), visibility, zh, en, fn)
        return fn

    return register


@dataclass(frozen=True)
class Suite:
    """An assignment's grading material: its checks in order, forbidden APIs, references, submission names."""
    assignment: str
    checks: tuple[Check, ...]
    forbidden: dict[str, str]       # qualified API name -> why it is forbidden
    submission_files: tuple[str, ...]
    directory: Path

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)

    def public(self) -> "Suite":
        return Suite(self.assignment, tuple(c for c in self.checks if c.visibility == "public"), self.forbidden,
                     self.submission_files, self.directory)

    def references(self, seed: int) -> dict[str, torch.Tensor]:
        """One student's hidden inputs (drawn from `seed`) and their expected outputs, computed by `cases.py` from
        the reference solution `autograder release` writes beside the checks (see `hidden_inputs`)."""
        from .hidden_inputs import references

        return references(self.assignment, self.directory, seed)


def load_suite(assignment: str) -> Suite:
    """Import `autograder.assignments.<assignment>.checks` and collect its checks in definition order."""
    module = importlib.import_module(f"autograder.assignments.{assignment}.checks")
    checks = tuple(v.__check__ for v in vars(module).values() if hasattr(v, "__check__"))
    names = [c.name for c in checks]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate check names in {module.__name__}")
    return Suite(assignment, checks, dict(getattr(module, "FORBIDDEN", {})),
                 tuple(getattr(module, "SUBMISSION_FILES", ())), Path(module.__file__).parent)
