"""What the students' checker catches on its own: every wrong fixture of tests/fixtures/<id>/wrong/ (composed onto the
clean solution) run through the released checker (student_template/<id>/check.py, in a fresh process with the
instructor's package unimportable), and the share of the catalog that fails at least one public check, and that is
named right (the fixture header's diagnosis, or an `also=`). Prints a table of the fixtures it misses and the run
time of one check against `python -c "import torch"`, measured side by side.

    .venv/bin/python benchmarks/public_catalog.py [assignment ...]
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fixtures.compose import FIXTURES, base_solution_source, compose, parse_expect  # noqa: E402
from test_student_checker import OUTCOMES as PROBE  # noqa: E402  (the released checker with autograder refused)


def outcomes(folder: Path, file: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", PROBE, file], cwd=folder, capture_output=True, text=True, timeout=300)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main(assignments: list[str]) -> int:
    total = caught_total = named_total = 0
    for assignment in assignments:
        spec_module = json.loads((ROOT / f"student_template/{assignment}/checker/public_facts.json").read_text())["assignment"]
        base = base_solution_source(assignment)
        missed, named, fixtures = [], 0, sorted((FIXTURES / assignment / "wrong").glob("*.py"))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / assignment
            shutil.copytree(ROOT / "student_template" / assignment, folder)
            for fixture in fixtures:
                (folder / spec_module["module"]).write_text(compose(fixture, base), encoding="utf-8")
                got = outcomes(folder, spec_module["module"])
                want = parse_expect(fixture)
                ids = {o["diagnosis"] for o in got if o["diagnosis"]}
                failed = [o["check"] for o in got if o["status"] != "passed"]
                right = want.get("diagnosis") in ids or bool(ids & set(want.get("also", ())))
                named += bool(failed) and right
                if not failed:
                    missed.append(fixture.stem)
        caught = len(fixtures) - len(missed)
        print(f"## {assignment}: {caught}/{len(fixtures)} wrong fixtures fail a public check "
              f"({100 * caught / len(fixtures):.0f} %), {named} named right")
        for stem in missed:
            print(f"- missed locally: {stem}")
        total, caught_total, named_total = total + len(fixtures), caught_total + caught, named_total + named
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / assignment
            shutil.copytree(ROOT / "student_template" / assignment, folder)
            (folder / spec_module["module"]).write_text(base, encoding="utf-8")
            timings = {"check": [], "torch": []}
            for _ in range(3):
                for name, argv in (("torch", [sys.executable, "-c", "import torch"]),
                                   ("check", [sys.executable, "check.py"])):
                    started = time.perf_counter()
                    subprocess.run(argv, cwd=folder, capture_output=True, check=name == "torch")
                    timings[name].append(time.perf_counter() - started)
            c, t = min(timings["check"]), min(timings["torch"])
            print(f"python check.py on the solution: {c:.2f} s; python -c 'import torch': {t:.2f} s; ratio {c / t:.2f}")
    print(f"## all: {caught_total}/{total} caught locally ({100 * caught_total / max(total, 1):.0f} %), "
          f"{named_total} named right")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["attention"]))
