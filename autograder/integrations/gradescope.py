"""Gradescope's run_autograder: grade ROOT/submission/ (a .py or .ipynb) into ROOT/results/results.json.

    python -m autograder.integrations.gradescope --root "${AUTOGRADER_ROOT:-/autograder}"
        [--assignment ID] [--hidden-visibility after_published]

results.json follows Gradescope's spec: overall `score` and `output`, one test per check with `score`, `max_score`,
`status`, `output` (bilingual feedback) and `visibility` (public checks `visible`, hidden ones `after_published`
unless AUTOGRADER_HIDDEN_VISIBILITY or --hidden-visibility says otherwise). It is always written, also when the
submission is missing or the grader itself fails (score 0 with the reason); the exit code is 0 whenever it was.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from autograder.engine.resolve import resolve
from autograder.engine.runner import ungradable
from autograder.report.feedback import feedback, gradescope_json, summary
from autograder.public.text import Text

from . import grading

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


def results_for(root: Path, assignment: str, hidden_visibility: str) -> dict:
    suite = grading.suite_for(assignment)
    # the file grading and `autograder check` would choose (the one changed from the release, a case variant...)
    found = resolve(root / "submission", suite.submission_files, assignment)
    if found.path is None:
        names = " / ".join(suite.submission_files)
        result = ungradable("submission", suite, None, Text(zh=f"{found.reason_zh}：请上传 {names}",
                                                            en=f"{found.reason_en}: upload {names}"))
    else:
        # hidden inputs per Gradescope user (the result itself is "submission"); the secret is source/course_secret,
        # written by setup.sh when the image is built (or shipped in the zip), or $AUTOGRADER_COURSE_SECRET
        seed = grading.seed_for(assignment, grading.gradescope_submitter(root) or "submission",
                                shipped=root / "source" / "course_secret")
        result = grading.grade_path(found.path, assignment, "submission", secrets=[str(root)], seed=seed)
    fb = feedback(result)
    data = gradescope_json(fb, hidden_visibility)
    note = f"{found.note_zh} / {found.note_en}" if found.note_en else ""
    late = grading.gradescope_lateness(root)
    late = f"{late.zh}\n{late.en}" if late is not None else ""
    data["output"] = "\n\n".join(part for part in (summary(fb), late, note, data["output"]) if part).strip()
    data["stdout_visibility"] = "hidden"
    return data


def write_results(root: Path, data: dict) -> Path:
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")))
    parser.add_argument("--assignment", default=os.environ.get("AUTOGRADER_ASSIGNMENT") or None)
    parser.add_argument("--hidden-visibility", choices=VISIBILITIES,
                        default=os.environ.get("AUTOGRADER_HIDDEN_VISIBILITY", "after_published"))
    args = parser.parse_args(argv)
    try:
        assignment = grading.assignment_for(args.assignment, args.root / "submission")
        data = results_for(args.root, assignment, args.hidden_visibility)
    except Exception as e:  # never leave Gradescope without a results.json
        data = {"score": 0, "tests": [],
                "output": f"评分程序出错（{type(e).__name__}）\nthe autograder failed: {type(e).__name__}: {e}"}
    finally:
        grading.close()
    out = write_results(args.root, data)
    print(f"{out}: {data.get('score')} — {data.get('output', '').splitlines()[0] if data.get('output') else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
