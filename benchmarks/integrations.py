"""Wall-clock time of each integration path on the four test notebooks (run as root, after `autograder release`).

    .venv/bin/python benchmarks/integrations.py

nbgrader: one `nbgrader autograde` for the four students (one process, one sandbox), plus the other commands once.
otter and Gradescope: one `otter run` / `run_autograder` process per notebook, one after the other, as they run.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import test_integrations as t  # noqa: E402  (the notebooks and runners the tests use)


def nbgrader(work: Path) -> dict[str, float]:
    course = work / "course"
    (course / "assignments").mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", course)
    shutil.copytree(REPO / "assignments" / t.ID, course / "assignments" / t.ID)
    times = {"generate_assignment": t.nbgrader(course, "generate_assignment", t.ID)[1]}
    for kind in t.KINDS:
        (course / "submitted" / kind / t.ID).mkdir(parents=True)
        (course / "submitted" / kind / t.ID / "attention.ipynb").write_text(t.notebook(t.STUDENT_NB, kind))
    times["autograde, 4 notebooks"] = t.nbgrader(course, "autograde", t.ID)[1]
    times["generate_feedback, 4"] = t.nbgrader(course, "generate_feedback", t.ID)[1]
    times["export"] = t.nbgrader(course, "export", "--to", "grades.csv")[1]
    return times


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-integrations-") as tmp:
        work = Path(tmp)
        print("nbgrader (s):", {k: round(v, 1) for k, v in nbgrader(work).items()}, flush=True)
        otter = {}
        for kind in t.KINDS:
            results, seconds, _ = t.otter_run(work / "otter", kind)
            otter[kind] = (round(seconds, 1), t.total(results))
        print("otter run (s, score):", otter, flush=True)
        results, seconds, _ = t.otter_run(work / "otter", "loop", {"AUTOGRADER_LOAD_SECONDS": "3"})
        print(f"otter run, infinite loop, 3 s load limit: {seconds:.1f} s, score {t.total(results)}", flush=True)
        gradescope = {}
        for kind in t.KINDS:
            results, seconds = t.gradescope_run(work / "gradescope", kind, t.notebook(t.STUDENT_NB, kind).encode())
            gradescope[kind] = (round(seconds, 1), results["score"])
        print("Gradescope run_autograder (s, score):", gradescope, flush=True)


if __name__ == "__main__":
    main()
