"""Shared fixtures: the attention suite, one real sandbox per test session, and helpers that grade a source."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from autograder.engine.checks import load_suite  # noqa: E402
from autograder.engine.runner import grade_file  # noqa: E402
from autograder.sandbox.client import Sandbox  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402
from autograder.assignments import get  # noqa: E402

FORBIDDEN = dict(get("attention").forbidden)  # also used by other tests
# Tight limits keep the hostile fixtures quick; they are still the real mechanisms.
TEST_LIMITS = Limits(call_seconds=3.0, load_seconds=8.0, total_seconds=30.0, memory_bytes=1 << 30)
SOLUTION = ROOT / "solutions" / "attention" / "attention.py"


@pytest.fixture(scope="session")
def suite():
    return load_suite("attention")


TEST_SEED = 20240601  # the hidden inputs these tests grade on (one fixed student); test_hidden_inputs varies it


@pytest.fixture(scope="session")
def refs(suite):
    return suite.references(seed=TEST_SEED)


@pytest.fixture(scope="session")
def sandbox():
    with Sandbox(TEST_LIMITS, isolate=True, secrets=[str(ROOT)], slots=4, forbidden=FORBIDDEN) as box:
        yield box


@pytest.fixture(scope="session")
def grade(suite, refs, sandbox, tmp_path_factory):
    """grade(source_or_path, name="attention.py") -> SubmissionResult, graded in the shared sandbox."""
    folder = tmp_path_factory.mktemp("submissions")

    def run(source, name: str = "attention.py"):
        if isinstance(source, Path):
            path = source
        else:
            path = folder / f"{abs(hash(source))}-{name}"
            path.write_bytes(source if isinstance(source, bytes) else source.encode())
        return grade_file(path, "student", suite, sandbox, TEST_LIMITS, refs)

    return run


def failed(result) -> set[str]:
    return {c.name for c in result.checks if c.status != "passed"}
