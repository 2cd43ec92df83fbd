"""Grader accuracy on the implementation catalogs, in the real sandbox: grades every fixture of
tests/fixtures/attention/correct/ and tests/fixtures/attention/wrong/ (composed onto the clean solution) and prints a markdown table,
fixture -> checks that caught it -> diagnosis id -> diagnosis text (en), then the totals.

    .venv/bin/python benchmarks/catalog_report.py          (needs root, like every isolated sandbox)

A wrong fixture counts as caught when it loses points, including every check its header names; as diagnosed when
some check carries the diagnosis id its header names. A correct fixture must score full marks with no diagnosis.
Exits 1 unless all three totals are 100%.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from autograder.engine.checks import load_suite  # noqa: E402
from autograder.engine.runner import grade_file  # noqa: E402
from autograder.sandbox.client import Sandbox  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402
from autograder.assignments import get  # noqa: E402
from conftest import TEST_SEED  # noqa: E402
from fixtures.compose import FIXTURES, base_solution_source, compose, parse_expect  # noqa: E402


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main() -> int:
    suite, limits = load_suite("attention"), Limits()
    refs, base = suite.references(seed=TEST_SEED), base_solution_source()
    fixtures = [(kind, p) for kind in ("wrong", "correct") for p in sorted((FIXTURES / "attention" / kind).glob("*.py"))]
    rows, caught, diagnosed, full = [], 0, 0, 0
    with Sandbox(limits, isolate=True, secrets=[str(ROOT)], slots=4, forbidden=list(get("attention").forbidden)) as box, tempfile.TemporaryDirectory() as tmp:
        for kind, fixture in fixtures:
            path = Path(tmp) / fixture.stem / "attention.py"
            path.parent.mkdir()
            path.write_text(compose(fixture, base), encoding="utf-8")
            result = grade_file(path, fixture.stem, suite, box, limits, refs)
            failed = [c.name for c in result.checks if c.status != "passed"]
            named = {c.diagnosis: c.diagnosis_en for c in result.checks if c.diagnosis}
            expected = parse_expect(fixture)
            if kind == "correct":
                ok = result.score == result.max_score and not named
                full += ok
                want = "-"
            else:
                hit = result.score < result.max_score and set(expected["lose"]) <= set(failed)
                want = expected["diagnosis"]
                caught, diagnosed = caught + hit, diagnosed + (want in named)
                ok = hit and want in named
            shown = want if want in named else next(iter(named), "-")
            rows.append(f"| {kind}/{fixture.stem} | {result.score:g}/{result.max_score:g} | {', '.join(failed) or '-'} "
                        f"| {', '.join(named) or '-'} | {cell(named.get(shown, '-'))} | {'ok' if ok else 'MISS'} |")
    wrong, correct = sum(k == "wrong" for k, _ in fixtures), sum(k == "correct" for k, _ in fixtures)
    print("| fixture | score | checks that caught it | diagnosis id | diagnosis (en) | |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nwrong caught: {caught}/{wrong} · wrong diagnosed (expected id): {diagnosed}/{wrong} · "
          f"correct with full marks: {full}/{correct}")
    return 0 if caught == diagnosed == wrong and full == correct else 1


if __name__ == "__main__":
    sys.exit(main())
