"""Grade every hostile fixture in the real sandbox, each followed by the correct solution, and print a table:
attack -> expected score -> score -> seconds -> what stopped it; then whether the next student still got 20.

    .venv/bin/python benchmarks/hostile_report.py
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import FORBIDDEN, SOLUTION, TEST_LIMITS, TEST_SEED  # noqa: E402
from fixtures.compose import parse_expect  # noqa: E402
from test_hostile import HOSTILE, submitted_path  # noqa: E402

from autograder.engine.checks import load_suite  # noqa: E402
from autograder.engine.runner import grade_file  # noqa: E402
from autograder.sandbox.client import Sandbox  # noqa: E402


def outcome(result) -> str:
    if result.error_en:
        return result.error_en[:70]
    statuses = sorted({c.status for c in result.checks if c.status not in ("passed", "failed")})
    return ", ".join(statuses) or "-"


def main() -> None:
    suite = load_suite("attention")
    refs = suite.references(seed=TEST_SEED)
    print("| attack | expected | score | seconds | what happened | next student |")
    print("|---|---|---|---|---|---|")
    with Sandbox(TEST_LIMITS, isolate=True, secrets=[str(ROOT)], forbidden=FORBIDDEN) as sandbox, tempfile.TemporaryDirectory() as tmp:
        sandbox.wait_ready()
        for fixture in HOSTILE:
            path = submitted_path(fixture, Path(tmp))
            started = time.perf_counter()
            result = grade_file(path, fixture.stem, suite, sandbox, TEST_LIMITS, refs)
            seconds = time.perf_counter() - started
            after = grade_file(SOLUTION, "next", suite, sandbox, TEST_LIMITS, refs)
            print(f"| {fixture.stem} | {parse_expect(fixture)['score']} | {result.score:g} | {seconds:.2f} | "
                  f"{outcome(result)} | {after.score:g}/{after.max_score:g} |")


if __name__ == "__main__":
    main()
