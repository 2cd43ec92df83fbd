"""Grader accuracy on the implementation catalogs, in the real sandbox: grades every fixture of
tests/fixtures/<id>/correct/ and tests/fixtures/<id>/wrong/ of every assignment (composed onto the clean solution) and
prints, per assignment, a markdown table (fixture -> score -> checks that caught it -> diagnoses -> verdict) and the
four counts, then the totals over all assignments.

    .venv/bin/python benchmarks/catalog_report.py [assignment ...]     (needs root, like every isolated sandbox)

For a wrong fixture with `expect: lose=<checks> diagnosis=<id> [also=<id>,...]`:
- caught: it loses points, including every check its header names;
- named right: some check names the diagnosis id of its header;
- named wrong: some check names an id that is neither that one nor one of `also=` (a second mistake the fixture
  really makes); a fixture can be named right and named wrong at once;
- unnamed: caught, but no check names any mistake.
`diagnosis=none`: no catalogued mistake (nothing should be named). A wrong fixture with `expect: score=<N>` (e.g. returns zeros) is caught when it scores at most N, and names nothing.
A correct fixture must score full marks with no diagnosis. Exits 1 unless every wrong fixture is caught, none is
named wrong, at least 90 % are named right, and every correct fixture has full marks.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from autograder.assignments import discover  # noqa: E402
from autograder.engine.checks import load_suite  # noqa: E402
from autograder.engine.runner import grade_file  # noqa: E402
from autograder.sandbox.client import Sandbox  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402
from conftest import TEST_SEED  # noqa: E402
from fixtures.compose import FIXTURES, base_solution_source, compose, parse_expect  # noqa: E402

COUNTS = ("wrong", "caught", "named_right", "named_wrong", "unnamed", "catalogued", "correct", "full")


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def verdict(kind: str, expected: dict, score: float, max_score: float, failed: list[str], named: dict,
            checks: set[str]) -> dict:
    """The four counts of one fixture (0 or 1 each). Checks the header names that the suite does not have (yet) are
    left out, so a report run on an older grader still counts what that grader catches."""
    if kind == "correct":
        return {"correct": 1, "full": int(score == max_score and not named)}
    if expected["kind"] == "score":
        caught = score <= expected["score"] and score < max_score
        also = {a for a in expected.get("also", "").split(",") if a}
        return {"wrong": 1, "caught": int(caught), "named_right": 0, "named_wrong": int(bool(set(named) - also)),
                "unnamed": 0,
                "catalogued": 0}
    want = {expected["diagnosis"], *[a for a in expected.get("also", "").split(",") if a]}
    caught = score < max_score and set(expected["lose"]) & checks <= set(failed)
    return {"wrong": 1, "caught": int(caught), "named_right": int(expected["diagnosis"] in named),
            "named_wrong": int(bool(set(named) - want)), "unnamed": int(caught and not named),
            "catalogued": int(expected["diagnosis"] != "none")}


def grade_assignment(assignment: str, limits: Limits) -> tuple[list[str], dict]:
    suite, spec = load_suite(assignment), discover()[assignment]
    refs, base = suite.references(seed=TEST_SEED), base_solution_source(assignment)
    folder = FIXTURES / assignment
    fixtures = [(kind, p) for kind in ("wrong", "correct") for p in sorted((folder / kind).glob("*.py"))]
    rows, totals = [], dict.fromkeys(COUNTS, 0)
    with Sandbox(limits, isolate=True, secrets=[str(ROOT)], slots=4, forbidden=list(spec.forbidden)) as box, \
            tempfile.TemporaryDirectory() as tmp:
        for kind, fixture in fixtures:
            path = Path(tmp) / fixture.stem / spec.module
            path.parent.mkdir()
            path.write_text(compose(fixture, base), encoding="utf-8")
            result = grade_file(path, fixture.stem, suite, box, limits, refs)
            failed = [c.name for c in result.checks if c.status != "passed"]
            named = {c.diagnosis: c.diagnosis_en for c in result.checks if c.diagnosis}
            expected = parse_expect(fixture)
            counts = verdict(kind, expected, result.score, result.max_score, failed, named, {c.name for c in suite.checks})
            for key, value in counts.items():
                totals[key] += value
            want = expected.get("diagnosis", "-")
            marks = [k for k in ("caught", "named_right", "named_wrong", "unnamed") if counts.get(k)]
            ok = counts["full"] if kind == "correct" else counts["caught"] and not counts["named_wrong"]
            rows.append(f"| {kind}/{fixture.stem} | {result.score:g}/{result.max_score:g} | {', '.join(failed) or '-'} "
                        f"| {want} | {', '.join(named) or '-'} | {', '.join(marks) or '-'} | {'ok' if ok else 'MISS'} |")
    return rows, totals


def summary(name: str, t: dict) -> str:
    return (f"{name}: wrong {t['wrong']} · caught {t['caught']} · named right {t['named_right']} · named wrong "
            f"{t['named_wrong']} · unnamed {t['unnamed']} (of {t['catalogued']} with a catalogued mistake) · correct with full marks {t['full']}/{t['correct']}")


def main(argv: list[str]) -> int:
    limits = Limits()
    chosen = argv or [a for a in discover() if (FIXTURES / a / "wrong").is_dir()]
    grand = dict.fromkeys(COUNTS, 0)
    lines = []
    for assignment in chosen:
        rows, totals = grade_assignment(assignment, limits)
        print(f"\n## {assignment}\n")
        print("| fixture | score | checks that caught it | expected | named | counts | |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(rows))
        lines.append(summary(assignment, totals))
        print("\n" + lines[-1])
        for key in COUNTS:
            grand[key] += totals[key]
    print("\n" + "\n".join(lines))
    print(summary("total", grand))
    good = (grand["caught"] == grand["wrong"] and grand["named_wrong"] == 0 and grand["full"] == grand["correct"]
            and grand["named_right"] >= 0.9 * grand["catalogued"])
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
