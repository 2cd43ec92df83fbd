"""Hidden references: the release ships the clean solution beside the checks (`reference_solution.py`), from which
the grader computes each student's references for that student's own inputs (`cases.build_references(solution,
seed)`, see `autograder.engine.hidden_inputs`). Here the release checks that this works before writing anything."""
from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import torch

from .errors import ReleaseError

REFERENCE_SOLUTION = "reference_solution.py"
SMOKE_SEEDS = (0, 1)


def load_cases(assignment: str) -> types.ModuleType | None:
    """The assignment's case module, or None when it does not exist (yet)."""
    name = f"autograder.assignments.{assignment}.cases"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            return None
        raise


def import_solution(source: str, path: Path, digest: str) -> types.ModuleType:
    """Import the clean solution text (what the release writes to `path`) under a unique module name."""
    name = f"_autograder_release_solution_{digest[:16]}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses, pickling and typing look modules up by name
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def build(assignment: str, solution_source: str, solution_path: Path, digest: str) -> tuple[bytes | None, str]:
    """(the reference solution's bytes, or None when the assignment has no cases; a one-line note for the summary).
    The bytes are the clean solution's; `build_references` must give the same references twice for a seed and
    different inputs for two seeds."""
    cases = load_cases(assignment)
    if cases is None:
        return None, f"autograder.assignments.{assignment}.cases not found: hidden references skipped"
    if not callable(getattr(cases, "build_references", None)):
        return None, f"{cases.__name__} has no build_references(solution, seed): hidden references skipped"
    solution = import_solution(solution_source, solution_path, digest)
    try:
        first, other = (cases.build_references(solution, seed) for seed in SMOKE_SEEDS)
        again = cases.build_references(solution, SMOKE_SEEDS[0])
    finally:
        sys.modules.pop(solution.__name__, None)
    for refs in (first, other, again):
        if not isinstance(refs, dict) or not refs or not all(isinstance(t, torch.Tensor) for t in refs.values()):
            raise ReleaseError("build_references(solution, seed) must return a non-empty dict[str, torch.Tensor]")
    if first.keys() != again.keys() or not all(torch.equal(first[k], again[k]) for k in first):
        raise ReleaseError("build_references(solution, seed) is not deterministic: two calls with one seed differ")
    if first.keys() != other.keys() or all(torch.equal(first[k], other[k]) for k in first):
        raise ReleaseError("build_references(solution, seed) ignores the seed: every student would get the same inputs")
    return solution_source.encode("utf-8"), (f"hidden references: {len(first)} tensors per student from "
                                             f"{cases.__name__}, computed at grading time from {REFERENCE_SOLUTION}")
